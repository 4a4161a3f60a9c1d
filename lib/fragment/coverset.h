/*
 * coverset.h - the CoverSet: a journal's fragment index as an ordered array
 * (Gazette broker/fragment CoverSet, facts §5.3-§5.4).
 *
 * Invariants: no entry is fully covered by another; so begins AND ends are
 * both strictly increasing (entries may overlap). Empty fragments are never
 * stored. Each entry owns a deep copy of its fragment and optionally one
 * reference to the local file holding its bytes (NULL for remote ones).
 *
 * Not thread-safe: the owner (the journal's index) locks around every call.
 * Indexes handed out by lookup are valid until the next modification.
 */
#ifndef GAZ_FRAGMENT_COVERSET_H
#define GAZ_FRAGMENT_COVERSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "fragment/fragment.h"

struct gaz_cover {
	struct gaz_fragment frag;        /* owned copy */
	struct gaz_fragment_file *file;  /* one owned reference, or NULL */
};

struct gaz_coverset {
	struct gaz_cover *v;  /* ordered by begin (and so by end) */
	size_t len;
	size_t cap;
};

/* Zero-initialisation is a valid empty set; _init spells it out. */
void gaz_coverset_init(struct gaz_coverset *cs);

/* gaz_coverset_release drops every entry (fragments and file references)
 * and frees the array, leaving an empty set. */
void gaz_coverset_release(struct gaz_coverset *cs);

/* gaz_coverset_add adds a copy of `f` (and a new reference to `file`, which
 * may be NULL) under Gazette's rules: an empty fragment is ignored; a
 * fragment fully covered by an existing one that is not equal in range is
 * ignored; otherwise it replaces every entry whose range it covers
 * (including an entry with the same range) and is spliced in.
 * *added (may be NULL) says whether the set changed. Returns 0 or
 * GAZ_ENOMEM (set unchanged). */
int gaz_coverset_add(struct gaz_coverset *cs, const struct gaz_fragment *f,
		     struct gaz_fragment_file *file, bool *added, struct gaz_status *st);

/* gaz_coverset_lookup finds the fragment to read `offset` from: the first
 * entry with end > offset, then the furthest later entry still beginning at
 * or before offset (the covering fragment extending furthest). Returns its
 * index and *found = true; when no entry covers offset, *found = false and
 * the index of the next entry after offset (cs->len if none). */
size_t gaz_coverset_lookup(const struct gaz_coverset *cs, int64_t offset, bool *found);

/* gaz_coverset_summary: (first begin, last end, last mod_time); all 0 for an
 * empty set. Any out-pointer may be NULL. */
void gaz_coverset_summary(const struct gaz_coverset *cs, int64_t *begin, int64_t *end,
			  int64_t *mod_time);

/* gaz_coverset_covered: [begin, end) lies inside the union of `cs` with no
 * gap (touching or overlapping entries chain). */
bool gaz_coverset_covered(const struct gaz_coverset *cs, int64_t begin, int64_t end);

/* gaz_coverset_difference removes from `a` every entry that `b` covers
 * without a gap (Gazette's CoverSetDifference): what remains of `a` is not
 * yet represented in `b`. Never allocates. */
void gaz_coverset_difference(struct gaz_coverset *a, const struct gaz_coverset *b);

/* gaz_coverset_replace_remote applies a store listing to an index (§5.3):
 * local fragments (`local`, entries with files) covered by `remote` are
 * dropped from `local`; the rest are added to `remote`; then `remote`
 * becomes the whole index `set` (its previous content released) and is left
 * empty. Returns 0 or GAZ_ENOMEM, in which case nothing changed except that
 * `local` may have lost covered entries. */
int gaz_coverset_replace_remote(struct gaz_coverset *set, struct gaz_coverset *local,
				struct gaz_coverset *remote, struct gaz_status *st);

#endif
