/*
 * shard.h - Gazette's validation of a consumer ShardSpec (proto/
 * consumer.proto; gazette-facts §1.7), as Gazette's consumer/protocol
 * ShardSpec.Validate does it: the same checks in the same order, with
 * Gazette's dotted context paths and wording ("Sources[1].Journal: ...").
 *
 * A consumer application's keyspace ignores (logs and skips) an item whose
 * value does not decode and validate this way, or whose id differs from
 * the key's, so anything that writes <prefix>/items/<id> must pass it.
 *
 * Contract as validate.h: inputs borrowed, NULL messages and strings are
 * their zero values, 0 or GAZ_EINVAL with the reason in `st` (may be
 * NULL); thread-safe, no allocation.
 */
#ifndef GAZ_PROTOCOL_SHARD_H
#define GAZ_PROTOCOL_SHARD_H

#include "common/err.h"
#include "consumer.pb-c.h"

/* Shard id length bounds, bytes (Gazette's minShardNameLen/maxShardNameLen). */
#define GAZ_SHARD_ID_MIN 4
#define GAZ_SHARD_ID_MAX 512

/* gaz_validate_shard_id: a token over GAZ_TOKEN_SYMBOLS ("-_+/."),
 * 4..512 bytes. */
int gaz_validate_shard_id(const char *id, struct gaz_status *st);

/* gaz_validate_shard_spec, in Gazette's order: Id; the recovery log
 * "<recovery_log_prefix>/<id>" is a valid journal when the prefix is set;
 * hint_prefix empty without a recovery log, else an absolute, clean,
 * non-directory path; hint_backups >= 0; min_txn_duration >= 0;
 * max_txn_duration > 0; labels a valid LabelSet, single-value labels
 * single, no "id" label; each source a valid journal (meta allowed) with
 * min_offset >= 0, sources strictly ascending by journal. hot_standbys,
 * disable, disable_wait_for_ack and the buffer sizes take any value. */
int gaz_validate_shard_spec(const Consumer__ShardSpec *spec, struct gaz_status *st);

/* gaz_validate_consumer_status: a value of the consumer.Status enum
 * ("invalid status (<n>)"). */
int gaz_validate_consumer_status(int status, struct gaz_status *st);

/* gaz_validate_replica_status: a known Code ("Code: invalid code (<n>)");
 * errors present exactly when the code is FAILED. */
int gaz_validate_replica_status(const Consumer__ReplicaStatus *rs, struct gaz_status *st);

/* gaz_validate_shard_apply_change, as ApplyRequest_Change.Validate: exactly
 * one of upsert and delete; an upsert a valid spec ("Upsert.Id: ...") with
 * expect_mod_revision >= 0 or -1; a delete a valid shard id ("Delete: ...")
 * with expect_mod_revision > 0 or -1 and no primary_hints. primary_hints of
 * an upsert are not checked here (gazctl never sends them). */
int gaz_validate_shard_apply_change(const Consumer__ApplyRequest__Change *ch,
				    struct gaz_status *st);

/* gaz_validate_shard_apply_request: every change, with Gazette's dotted
 * context: "Changes[0].Upsert.Id: invalid length (3; ...)". */
int gaz_validate_shard_apply_request(const Consumer__ApplyRequest *req, struct gaz_status *st);

/* gaz_validate_shard_list_response, as ListResponse.Validate: status,
 * "Header...", and each shard "Shards[<i>]...": "Spec...", ModRevision > 0,
 * "Route...", one status per route member ("length of Route.Members and
 * Status are not equal (<m> vs <n>)"), "Status[<k>]: ...". */
int gaz_validate_shard_list_response(const Consumer__ListResponse *resp, struct gaz_status *st);

#endif
