/*
 * gazette/journalspec_yaml.h - the journal YAML hierarchy of gazctl
 * (`journals apply`, `journals edit`, `journals list -o yaml`).
 *
 * A document is a tree of nodes; each node is a partial JournalSpec plus the
 * tool keys `comment` (ignored), `delete`, `revision` and `children`. A node
 * named "" or "<prefix>/" is a directory; any other name is a journal. This
 * mirrors Gazette's broker/journalspace package and yaml.v2 UnmarshalStrict:
 *
 *   parse:   strict YAML (unknown or duplicate keys fail, naming the line),
 *            tree-shape checks, then "flatten": every zero-valued field of a
 *            child takes its parent's value, labels are unioned per name
 *            (child values win), stores only when the child has none,
 *            `delete` is inherited when unset, `suspend` never is. Each
 *            journal becomes one ApplyRequest.Change.
 *   emit:    group journals by shared '/'-delimited prefixes, hoist the
 *            fields all children share into their directory, and print the
 *            tree with zero values omitted (the inverse of flatten).
 *
 * JournalSpecs produced here are NOT validated (replication range, name
 * rules, ...): callers validate the upserts before sending them.
 * All functions are thread-safe (no shared state).
 */
#ifndef GAZETTE_JOURNALSPEC_YAML_H
#define GAZETTE_JOURNALSPEC_YAML_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "protocol.pb-c.h"

/* Largest YAML text gaz_journalspec_yaml_emit will build (bytes). */
#define GAZ_JOURNALSPEC_YAML_MAX (64u << 20) /* = GAZ__YAML_OUT_MAX */

/* One listed journal: its spec (borrowed) and etcd ModRevision. */
struct gaz_journal_rev {
	const Protocol__JournalSpec *spec;
	int64_t mod_revision;
};

/* gaz_journalspec_yaml_parse parses a journal hierarchy and flattens it into
 * an ApplyRequest, one Change per journal in document order:
 *   delete: true  -> {delete: name, expect_mod_revision: revision}
 *   otherwise     -> {upsert: full spec, expect_mod_revision: revision}
 * (revision 0 means create-only, -1 unconditional, as Gazette's Apply).
 *
 * Keys: name, comment, delete, revision, children, replication, labels
 * ([{name, value}], sorted by name then value), fragment {length,
 * compression_codec, stores, refresh_interval, retention, flush_interval,
 * path_postfix_template}, flags, max_append_rate, suspend {level, offset}.
 * Enums take their names or integers; durations take Go text ("1m0s") or
 * integer nanoseconds. Tree rules: a directory has >= 1 child, no revision,
 * children named under it in strictly ascending order; a journal has no
 * children.
 *
 * `yaml` (borrowed, `len` bytes, need not be NUL-terminated) holds one
 * document; later documents are ignored. On success `*out` is owned by the
 * caller: free it with gaz_journalspec_apply_free. Errors: GAZ_EINVAL with
 * "line N: ..." in `st` (libyaml's problem and column for malformed YAML,
 * the key or node name otherwise); GAZ_ENOMEM. `*out` is untouched on error.
 * `st` may be NULL. */
int gaz_journalspec_yaml_parse(const char *yaml, size_t len, Protocol__ApplyRequest **out,
			       struct gaz_status *st);

/* gaz_journalspec_apply_free frees a request from gaz_journalspec_yaml_parse
 * (equivalent to protocol__apply_request__free_unpacked(req, NULL): every
 * part is individually heap-allocated). NULL is ignored. */
void gaz_journalspec_apply_free(Protocol__ApplyRequest *req);

/* gaz_journalspec_yaml_emit prints `n` journals as a hoisted hierarchy, as
 * `gazctl journals list -o yaml` does (journalspace.FromListResponse then
 * yaml.Marshal): a single journal prints as itself, several under a root
 * directory named by their longest shared '/'-prefix (omitted when ""),
 * with sub-directories for each longest run sharing a deeper prefix. Each
 * directory carries the fields equal across all its children (labels: names
 * whose value sets are identical); children keep only differing fields.
 * `suspend` is never hoisted; journals carry `revision`. Zero values are
 * omitted, durations print as Go text, enums by name; an empty list prints
 * "{}". gaz_journalspec_yaml_parse of the output yields the same specs.
 *
 * `journals` (borrowed) must be sorted by strictly ascending name. On success
 * `*out` is a NUL-terminated string owned by the caller (free()), and
 * `*out_len` (may be NULL) its length. Errors: GAZ_EINVAL (unsorted input, a
 * NULL spec, an out-of-range duration), GAZ_ERANGE (output would exceed
 * GAZ_JOURNALSPEC_YAML_MAX), GAZ_ENOMEM. */
int gaz_journalspec_yaml_emit(const struct gaz_journal_rev *journals, size_t n, char **out,
			      size_t *out_len, struct gaz_status *st);

/* gaz_journalspec_yaml_emit_list is gaz_journalspec_yaml_emit over the
 * journals of a ListResponse (borrowed), taking each spec and mod_revision.
 * Errors as gaz_journalspec_yaml_emit. */
int gaz_journalspec_yaml_emit_list(const Protocol__ListResponse *resp, char **out,
				   size_t *out_len, struct gaz_status *st);

#endif
