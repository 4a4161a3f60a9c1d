/*
 * cr_fields.h - field helpers the JournalSpec and ShardSpec conversions
 * (journal_cr.c, shard_cr.c) share: errors naming the CR field, Go
 * duration strings to and from google.protobuf.Duration, and string
 * comparison that takes NULL as "".
 *
 * Pure functions; thread-safe.
 */
#ifndef GAZ_OPERATOR_CR_FIELDS_H
#define GAZ_OPERATOR_CR_FIELDS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "common/err.h"
#include "google/protobuf/duration.pb-c.h"

/* gaz_cr_field_err: GAZ_EINVAL with "spec.<field>: <what>" in st. */
int gaz_cr_field_err(struct gaz_status *st, const char *field, const char *what);

/* gaz_cr_get_duration reads the optional Go duration string o[key]
 * ("10m", "1h30m"; absent = 0) into a new Duration (*out, heap-allocated:
 * freed with the message that holds it). `field` names it in errors
 * ("fragment.retention"). Errors: GAZ_EINVAL, GAZ_ENOMEM. */
int gaz_cr_get_duration(const json_t *o, const char *key, const char *field,
			Google__Protobuf__Duration **out, struct gaz_status *st);

/* gaz_cr_dur_ns: a Duration (NULL or out of range: 0) in nanoseconds. */
int64_t gaz_cr_dur_ns(const Google__Protobuf__Duration *d);

/* gaz_cr_put_duration sets o[key] to the Go text of d ("10m0s") unless it
 * is zero. 0, or -1 on OOM. */
int gaz_cr_put_duration(json_t *o, const char *key, const Google__Protobuf__Duration *d);

/* gaz_cr_str_eq compares two strings, NULL being "". */
bool gaz_cr_str_eq(const char *a, const char *b);

#endif
