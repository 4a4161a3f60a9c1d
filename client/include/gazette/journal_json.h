/*
 * gazette/journal_json.h - `gazctl journals list -o json` and `gazctl shards
 * list -o json` output.
 *
 * Gazette prints each ListResponse with gogo jsonpb, Marshaler{OrigName:
 * true, EmitDefaults: true}: proto field names, fields in declaration order,
 * every field present (zero values, [] for empty lists, null for an unset
 * nullable message such as JournalSpec.suspend, {} shapes for unset
 * non-nullable ones), enums by name (an unknown value as a bare number),
 * int64/uint64 as decimal strings, int32/uint32 as numbers (so `flags`, a
 * uint32 in the proto, is a number), durations per the proto3 JSON mapping
 * ("60s", "1.500s"), and '<', '>', '&', U+2028, U+2029 escaped as Go's
 * encoding/json does. JournalSpec.labels is the nested LabelSet object
 * {"labels": [...]}, as in Gazette.
 *
 * Thread-safe (no shared state).
 */
#ifndef GAZETTE_JOURNAL_JSON_H
#define GAZETTE_JOURNAL_JSON_H

#include <stddef.h>

#include "common/err.h"
#include "consumer.pb-c.h"
#include "protocol.pb-c.h"

/* gaz_journal_json_list_response renders `resp` (borrowed) as one compact
 * JSON object, {"status", "header", "journals": [{"spec", "mod_revision",
 * "route", "create_revision"}]}, with no trailing newline (jsonpb writes
 * none). On success `*out` is a NUL-terminated string owned by the caller
 * (free()), `*out_len` (may be NULL) its length. Errors: GAZ_EINVAL when a
 * string is not valid UTF-8 (jansson refuses it), GAZ_ENOMEM. */
int gaz_journal_json_list_response(const Protocol__ListResponse *resp, char **out,
				   size_t *out_len, struct gaz_status *st);

/* gaz_shard_json_list_response renders a consumer ListResponse (`gazctl
 * shards list -o json`) the same way: {"status", "header", "shards":
 * [{"spec", "mod_revision", "route", "status": [{"code", "errors"}],
 * "create_revision"}], "extension"}, ShardSpec with every field (sources
 * as [{"journal", "min_offset"}], durations as "1s", labels as the nested
 * {"labels": [...]}), an empty extension as null. Errors as above. */
int gaz_shard_json_list_response(const Consumer__ListResponse *resp, char **out, size_t *out_len,
				 struct gaz_status *st);

#endif
