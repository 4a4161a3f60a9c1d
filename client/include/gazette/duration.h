/*
 * gazette/duration.h - durations as the client tools spell them.
 *
 * Three spellings meet in gazctl:
 *   - Go text ("1m0s", "720h0m0s", "1.5s"): YAML journal specs, flags. The
 *     parser and formatter live in lib/common/duration.h (gaz_duration_parse,
 *     gaz_duration_format) and are re-exported here.
 *   - google.protobuf.Duration {seconds, nanos}: JournalSpec.Fragment fields
 *     on the wire (gogo "stdduration", i.e. a Go time.Duration in Gazette).
 *   - the protobuf JSON mapping ("60s", "1.500s"): `journals list -o json`.
 *
 * Durations in C are int64 nanoseconds, like Go's time.Duration. Nothing here
 * keeps state; every function is thread-safe.
 */
#ifndef GAZETTE_DURATION_H
#define GAZETTE_DURATION_H

#include <stdint.h>

#include "common/duration.h"
#include "common/err.h"
#include "google/protobuf/duration.pb-c.h"

/* Enough for any seconds and nanos pair ("-9223372036854775808.4294967295s"). */
#define GAZ_DURATION_JSON_MAX 40

/* gaz_duration_parse_spec parses a duration as yaml.v2 decodes a Go
 * time.Duration field: a bare decimal integer (optional sign) is taken as
 * nanoseconds, anything else must be Go duration syntax (gaz_duration_parse).
 * Callers holding a quoted YAML scalar should call gaz_duration_parse instead,
 * since yaml.v2 only resolves plain scalars to integers.
 *
 * `s` is borrowed and NUL-terminated; `*out_ns` is written only on success.
 * Returns 0, or GAZ_EINVAL with the reason in `st` (may be NULL). */
int gaz_duration_parse_spec(const char *s, int64_t *out_ns, struct gaz_status *st);

/* gaz_duration_from_pb converts a google.protobuf.Duration to nanoseconds.
 * A NULL `d` is a zero duration (an absent non-nullable field). Returns 0, or
 * GAZ_EINVAL when nanos is outside (-1e9, 1e9), the signs of seconds and
 * nanos disagree, or the total does not fit int64 (Go's
 * types.DurationFromProto fails the same way). */
int gaz_duration_from_pb(const Google__Protobuf__Duration *d, int64_t *out_ns,
			 struct gaz_status *st);

/* gaz_duration_set_pb stores `ns` into `d` as seconds plus same-signed nanos
 * (types.DurationProto). `d` is borrowed and must be initialised. */
void gaz_duration_set_pb(Google__Protobuf__Duration *d, int64_t ns);

/* gaz_duration_new_pb allocates an initialised Duration holding `ns`. The
 * result is owned by the caller (free with
 * google__protobuf__duration__free_unpacked(d, NULL), or as part of the
 * enclosing message). Returns NULL when out of memory. */
Google__Protobuf__Duration *gaz_duration_new_pb(int64_t ns);

/* gaz_duration_format_json writes a duration per the proto3 JSON mapping, as
 * jsonpb does: seconds, then 0, 3, 6 or 9 fraction digits, then "s" ("0s",
 * "60s", "1.500s", "-0.000000001s"). A negative seconds or nanos gives a
 * leading '-' and the magnitudes are printed. `buf` must hold
 * GAZ_DURATION_JSON_MAX bytes; no quotes are added. Returns `buf`. */
char *gaz_duration_format_json(int64_t seconds, int32_t nanos, char *buf);

#endif
