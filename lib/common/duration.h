/*
 * duration.h - Go time.Duration text: parse ("30ms", "1m30s", "-1.5h") and
 * format ("1m0s", "1.5s", "500ms"), exactly as Go's time.ParseDuration and
 * Duration.String, so flags, INI output and logs read the same as Gazette's.
 *
 * Durations are int64 nanoseconds, like Go. No allocation, no globals:
 * every function is thread-safe.
 */
#ifndef GAZ_COMMON_DURATION_H
#define GAZ_COMMON_DURATION_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Enough for any int64 duration ("-2562047h47m16.854775808s" is 25). */
#define GAZ_DURATION_STR_MAX 32

/* gaz_duration_parse parses Go duration syntax: an optional sign, then one or
 * more decimal numbers (optionally fractional) each followed by a unit among
 * "ns", "us", "µs" (U+00B5), "μs" (U+03BC), "ms", "s", "m", "h". A lone "0"
 * is accepted; "" and unit-less numbers are not. Mirrors time.ParseDuration,
 * including its overflow limit (|d| must fit int64) and its float rounding of
 * fractions.
 *
 * `s` is borrowed and NUL-terminated; `*out_ns` is written only on success.
 * Returns 0, or GAZ_EINVAL (bad syntax, unknown unit, overflow) with the
 * reason in `st` (may be NULL). */
int gaz_duration_parse(const char *s, int64_t *out_ns, struct gaz_status *st);

/* gaz_duration_format writes `ns` as Go's Duration.String() does: "0s";
 * under one second a single unit ("1.5µs", "500ms", "12ns"); otherwise
 * hours, minutes and seconds with trailing zeros dropped ("1h0m0s",
 * "1m30.5s"). `buf` must hold GAZ_DURATION_STR_MAX bytes. Returns `buf`. */
char *gaz_duration_format(int64_t ns, char *buf);

#endif
