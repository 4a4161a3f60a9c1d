/*
 * gazette/shardspec_yaml.h - the shard set YAML of gazctl (`shards apply`,
 * `shards edit`, `shards list -o yaml`), Gazette's consumer/shardspace:
 *
 *   common:                  # a partial ShardSpec shared by every shard
 *     recovery_log_prefix: examples/stream-sum/recovery-logs
 *     hint_prefix: /gazette/hints
 *     max_txn_duration: 1s
 *   shards:                  # uniquely ordered by id
 *     - id: chunks-part-000
 *       sources: [{journal: examples/stream-sum/chunks/part-000}]
 *       labels: [{name: store, value: sqlite}]
 *       revision: 42         # etcd ModRevision: 0 creates, -1 any
 *     - id: chunks-part-001
 *       delete: true
 *       revision: 43
 *
 * Spec keys (in `common:` and inline in each shard): id, sources
 * ([{journal, min_offset}]), recovery_log_prefix, hint_prefix, hint_backups,
 * max_txn_duration, min_txn_duration (Go durations, or integer
 * nanoseconds), disable, hot_standbys, labels ([{name, value, prefix}]),
 * disable_wait_for_ack, ring_buffer_size, read_channel_size. Shard keys
 * also: comment (ignored), delete, revision.
 *
 *   parse:  strict (yaml.v2 UnmarshalStrict: unknown or duplicate keys fail
 *           naming the line), then PushDown: each zero-valued field of a
 *           shard takes common's value (sources only when the shard has
 *           none; labels unioned by name, the shard's values win; `id` is
 *           never inherited), then one ApplyRequest.Change per shard in
 *           document order: delete: true -> {delete: id}, else {upsert:
 *           spec}, expect_mod_revision = revision.
 *   emit:   Hoist (shardspace.FromListResponse): common = the fields equal
 *           across all shards (labels: names with identical value lists),
 *           each shard keeps the rest, its id and revision; printed as
 *           yaml.v2 prints a shardspace.Set (zero fields omitted, durations
 *           as Go text, `common: {}` / `shards: []` when empty).
 *
 * Specs produced here are NOT validated; callers validate the request
 * (gaz_validate_shard_apply_request) before sending it. Thread-safe.
 */
#ifndef GAZETTE_SHARDSPEC_YAML_H
#define GAZETTE_SHARDSPEC_YAML_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "consumer.pb-c.h"

/* One listed shard: its spec (borrowed) and etcd ModRevision. */
struct gaz_shard_rev {
	const Consumer__ShardSpec *spec;
	int64_t mod_revision;
};

/* gaz_shardspec_yaml_parse parses a shard set from yaml[0..len) (borrowed,
 * need not be NUL-terminated) into *out (free with gaz_shardspec_apply_free).
 * Errors: GAZ_EINVAL "line N: ..." (malformed YAML, unknown keys, bad
 * values), GAZ_ERANGE (alias bomb), GAZ_ENOMEM; *out untouched on error.
 * An empty document is an empty request. */
int gaz_shardspec_yaml_parse(const char *yaml, size_t len, Consumer__ApplyRequest **out,
			     struct gaz_status *st);

/* gaz_shardspec_apply_free frees a request of gaz_shardspec_yaml_parse
 * (consumer__apply_request__free_unpacked). NULL is ignored. */
void gaz_shardspec_apply_free(Consumer__ApplyRequest *req);

/* gaz_shardspec_yaml_emit prints `n` shards (borrowed, in list order) as a
 * hoisted shard set; *out (free()) NUL-terminated, *out_len (may be NULL)
 * its length. Errors: GAZ_ERANGE (over 64 MiB), GAZ_ENOMEM. */
int gaz_shardspec_yaml_emit(const struct gaz_shard_rev *shards, size_t n, char **out,
			    size_t *out_len, struct gaz_status *st);

/* gaz_shardspec_yaml_emit_list: gaz_shardspec_yaml_emit over the shards of
 * a List response (spec and mod_revision of each). */
int gaz_shardspec_yaml_emit_list(const Consumer__ListResponse *resp, char **out, size_t *out_len,
				 struct gaz_status *st);

#endif
