/*
 * shard_cr.h - the ShardSpec custom resource (crds/
 * gazette-c.dev_shardspecs.yaml) and Gazette's consumer ShardSpec
 * protobuf (proto/consumer.proto): conversion both ways and the
 * comparison drift correction uses.
 *
 * CR .spec fields (camelCase JSON) and the protobuf fields they fill:
 *   name -> id, sources [{journal, minOffset}] -> sources (sorted by
 *   journal, as Gazette requires), recoveryLogPrefix, hintPrefix,
 *   hintBackups, maxTxnDuration / minTxnDuration (Go duration strings),
 *   disable, hotStandbys, labels [{name, value}] (sorted, as for
 *   journals), disableWaitForAck, ringBufferSize, readChannelSize.
 * `etcdPrefix` (which consumer keyspace) and `deletionPolicy` are
 * operator-only.
 *
 * Pure functions; thread-safe.
 */
#ifndef GAZ_OPERATOR_SHARD_CR_H
#define GAZ_OPERATOR_SHARD_CR_H

#include <stdbool.h>

#include <jansson.h>

#include "common/err.h"
#include "consumer.pb-c.h"

/* gaz_shard_cr_to_spec converts a CR's .spec object (borrowed) into a new
 * ShardSpec (*out, every part heap-allocated: free with
 * protobuf_c_message_free_unpacked(&(*out)->base, NULL)). Not validated
 * (gaz_validate_shard_spec does that). Errors: GAZ_EINVAL naming the
 * field ("spec.maxTxnDuration: time: unknown unit ..."), GAZ_ENOMEM. */
int gaz_shard_cr_to_spec(const json_t *spec, Consumer__ShardSpec **out, struct gaz_status *st);

/* gaz_shard_spec_to_cr converts a ShardSpec (borrowed) into a new CR
 * .spec object (durations as Go text, zero values omitted). NULL on OOM.
 * Converting it back gives an equal spec (gaz_shard_spec_equal). */
json_t *gaz_shard_spec_to_cr(const Consumer__ShardSpec *spec);

/* gaz_shard_spec_equal compares by value: absent submessages, durations
 * and strings equal their zero values, so a spec read back from etcd
 * (whoever wrote it: gazctl shards apply, a consumer's Apply, us) equals
 * the desired one exactly when no write is needed. */
bool gaz_shard_spec_equal(const Consumer__ShardSpec *a, const Consumer__ShardSpec *b);

#endif
