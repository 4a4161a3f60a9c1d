/*
 * lifecycle.h - S3 bucket lifecycle rules derived from a JournalSpec's
 * fragment.retention (lifecycle.c has the rules and their shape).
 */
#ifndef GAZ_OPERATOR_LIFECYCLE_H
#define GAZ_OPERATOR_LIFECYCLE_H

#include <stdint.h>

#include <jansson.h>

#include "common/err.h"
#include "protocol.pb-c.h"

/* Owned rule IDs start with this; no other rule of a bucket is touched. */
#define GAZ_LIFECYCLE_ID_PREFIX "gazette-operator/"

/* gaz_lifecycle_sync brings the buckets of `spec`'s s3:// stores in line
 * with its retention: one rule per store (none for recovery logs, zero
 * retention or non-s3 stores), and removes the rules listed in
 * old_status.lifecycle.rules (borrowed; may be NULL) that are no longer
 * wanted. spec NULL removes them all (the resource is going). Writes
 * status.lifecycle ({rules: [{store, bucket, id, prefix,
 * expirationDays}], excluded}) and condition Lifecycle (True: Applied,
 * NoRetention, RecoveryLog, NoS3Store; False: S3Error, RuleLimit) into
 * `status` (borrowed, modified). Returns 0 when every bucket is in line,
 * else the first error (message in st; rules not yet removed stay listed
 * so a later call retries). Blocking network calls; one caller at a
 * time per journal. */
int gaz_lifecycle_sync(const Protocol__JournalSpec *spec, const json_t *old_status, json_t *status,
		       int64_t generation, struct gaz_status *st);

#endif
