/*
 * labels.h - label sets, selectors and their matching (gazette-facts §3.3,
 * §2.0 step 6, §2.4 step 2, §2.1 STREAM_CONTENT / §6.5 registers).
 *
 * Memory: sets and selectors built here use the C heap (malloc/strdup) in a
 * fixed layout: `labels` is a malloc'd array of n_labels pointers, each
 * Label malloc'd with strdup'd name and value. Release them ONLY with the
 * gaz_labelset_* / gaz_selector_* functions below, never with
 * protobuf_c_message_free_unpacked, and never pass an unpacked (protobuf-c
 * allocated) set to a function that MUTATES its argument. Read-only
 * functions accept sets from anywhere; NULL means the empty set/selector.
 *
 * Lifecycle: gaz_labelset_init/_release for a caller-owned struct,
 * gaz_labelset_new/_free and gaz_selector_new/_free for heap ones.
 * Functions that build return 0 or GAZ_ENOMEM; on GAZ_ENOMEM the output is
 * left unchanged. None of this is thread-safe for concurrent mutation of
 * one set; distinct sets are independent.
 */
#ifndef GAZ_PROTOCOL_LABELS_H
#define GAZ_PROTOCOL_LABELS_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "protocol.pb-c.h"

/* ---- lifecycle ---------------------------------------------------------- */

/* Initializes `set` to the empty set (PROTOCOL__LABEL_SET__INIT). */
void gaz_labelset_init(Protocol__LabelSet *set);
/* Frees the labels of a set built by these helpers and re-initializes it. */
void gaz_labelset_release(Protocol__LabelSet *set);
/* Heap-allocated empty set, or NULL on OOM. Free with gaz_labelset_free. */
Protocol__LabelSet *gaz_labelset_new(void);
void gaz_labelset_free(Protocol__LabelSet *set);
/* Replaces the contents of `dst` (ours) with a deep copy of `src`. */
int gaz_labelset_copy(Protocol__LabelSet *dst, const Protocol__LabelSet *src);

/* ---- lookup --------------------------------------------------------------- */

/* gaz_labelset_find returns how many labels named `name` the (sorted) set
 * has and stores the index of the first one in *first (when non-NULL and
 * the count is > 0). Mirrors LabelSet.ValuesOf. */
size_t gaz_labelset_find(const Protocol__LabelSet *set, const char *name, size_t *first);
/* First value of `name`, borrowed from the set, or NULL if absent (Go's
 * ValueOf returns "" for both; NULL lets callers tell them apart). */
const char *gaz_labelset_value_of(const Protocol__LabelSet *set, const char *name);
/* Same labels (name, value, prefix) in the same order. */
bool gaz_labelset_equal(const Protocol__LabelSet *a, const Protocol__LabelSet *b);

/* ---- mutation (sets built by these helpers only) ---------------------------- */

/* gaz_labelset_add inserts name=value keeping (name, value) order, no-op if
 * the identical label is present; a name ending in ":prefix" adds a prefix
 * label named without the suffix. Mirrors LabelSet.AddValue. */
int gaz_labelset_add(Protocol__LabelSet *set, const char *name, const char *value);
/* gaz_labelset_set replaces every value of `name` by `value` (":prefix" as
 * for add). Mirrors LabelSet.SetValue. */
int gaz_labelset_set(Protocol__LabelSet *set, const char *name, const char *value);
/* Removes every label named `name`. */
void gaz_labelset_remove(Protocol__LabelSet *set, const char *name);

/* ---- set algebra (per label NAME; inputs sorted; out replaced) ------------ */

/* out := every name of lhs or rhs; a name in both takes lhs's values.
 * Mirrors UnionLabelSets. `out` may alias an input. */
int gaz_labelset_union(Protocol__LabelSet *out, const Protocol__LabelSet *lhs,
		       const Protocol__LabelSet *rhs);
/* out := names of lhs, except a name whose complete value list equals rhs's
 * value list for that name (partial overlap removes nothing). Mirrors
 * SubtractLabelSet. `out` may alias an input. */
int gaz_labelset_subtract(Protocol__LabelSet *out, const Protocol__LabelSet *lhs,
			  const Protocol__LabelSet *rhs);
/* Register update of a committed append (§2.1, §6.5):
 * out := union(union_regs, subtract(current, subtract_regs)). Any input may
 * be NULL (empty). `out` may alias `current`. */
int gaz_registers_update(Protocol__LabelSet *out, const Protocol__LabelSet *current,
			 const Protocol__LabelSet *union_regs,
			 const Protocol__LabelSet *subtract_regs);

/* ---- matching ------------------------------------------------------------- */

/* gaz_labelset_matches: `set` has no value matched by any exclude label, and
 * for every include label name at least one of that name's selector values
 * matches a value of the set. A selector value "" matches any value (the
 * name must exist); a prefix label matches values it prefixes; otherwise
 * equality. NULL/empty selector matches everything. Both arguments are
 * expected valid (sorted). Mirrors LabelSelector.Matches. */
bool gaz_labelset_matches(const Protocol__LabelSelector *sel, const Protocol__LabelSet *set);

/* Flags of gaz_selector_matches_meta. */
enum {
	/* Selector labels named "prefix" act as prefix labels named "name",
	 * OR'd with any "name" values (List's rewriting, §2.4 step 2). */
	GAZ_MATCH_PREFIX_META = 1u << 0,
};

/* gaz_selector_matches_meta matches `sel` against `labels` plus the
 * meta-label name=<journal> (which replaces any "name" label of `labels`).
 * `journal` NULL adds no meta-label; `labels` NULL is the empty set. With
 * flags 0 this is the authorization check of resolution (§2.0 step 6) and
 * of Apply (delete: labels NULL); List passes GAZ_MATCH_PREFIX_META. */
bool gaz_selector_matches_meta(const Protocol__LabelSelector *sel, const char *journal,
			       const Protocol__LabelSet *labels, unsigned flags);

/* gaz_selector_matches_journal: List semantics over a spec: its labels plus
 * name=<spec name>, with "prefix" selector labels as name prefix matches. */
bool gaz_selector_matches_journal(const Protocol__LabelSelector *sel,
				  const Protocol__JournalSpec *spec);

/* ---- selectors: lifecycle, parse, format ----------------------------------- */

/* Heap selector with heap (empty) include and exclude sets, or NULL. */
Protocol__LabelSelector *gaz_selector_new(void);
/* Frees a selector from gaz_selector_new/_parse; NULL is a no-op. */
void gaz_selector_free(Protocol__LabelSelector *sel);

/* gaz_selector_parse parses the gazctl `-l` grammar (§3.3), terms separated
 * by ',' with at most single spaces around operators and separators:
 *   k=v  k==v  k!=v  k in (a,b)  k notin (a,b)  k not in (a,b)  k  !k
 * A key is >= 2 runes of letters/numbers/"-_+/." and may end in ":prefix"
 * for a prefix match; values are letters/numbers/"-_+/.=%" (possibly empty).
 * The result is validated as a selector. On success *out is a new heap
 * selector (free with gaz_selector_free). Returns 0, GAZ_EINVAL (Gazette's
 * message, e.g. `could not match "a b" to a label selector expression`) or
 * GAZ_ENOMEM. Mirrors ParseLabelSelector. */
int gaz_selector_parse(const char *s, Protocol__LabelSelector **out, struct gaz_status *st);

/* gaz_selector_format renders `sel` in the parse grammar, canonically:
 * include terms then exclude terms, names sorted, "k" / "k=v" /
 * "k in (a,b)" and "!k" / "k!=v" / "k notin (a,b)", prefix labels as
 * "k:prefix". *out is a malloc'd string the caller frees with free().
 * Returns 0 or GAZ_ENOMEM. Mirrors LabelSelector.String. */
int gaz_selector_format(const Protocol__LabelSelector *sel, char **out, struct gaz_status *st);

#endif
