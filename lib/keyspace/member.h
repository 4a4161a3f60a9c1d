/*
 * member.h - a process's member key under <root>/members/<zone>#<suffix>
 * (facts §4.2): brokers' BrokerSpecs and consumers' ConsumerSpecs, each
 * on the process's lease, written only while no other lease holds it (an
 * earlier process of the same id keeps it until its lease expires).
 */
#ifndef GAZ_KEYSPACE_MEMBER_H
#define GAZ_KEYSPACE_MEMBER_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "etcd/etcd.h"

/* gaz_member_put_once makes one attempt: in one etcd transaction, puts
 * `member_key` = val[0..len) on `lease` if the key is absent, else reads
 * it. Returns 0 when the key is now ours (written, or already on our
 * lease), GAZ_EEXIST when another lease holds it (retry later), or the
 * etcd call's error. */
int gaz_member_put_once(struct gaz_etcd *etcd, const char *member_key, int64_t lease, const uint8_t *val,
			size_t len, struct gaz_status *st);

/* gaz_member_update puts a new value of our own member key (e.g. its
 * spec marked exiting), keeping the key's lease. Returns 0 or the etcd
 * call's error. */
int gaz_member_update(struct gaz_etcd *etcd, const char *member_key, const uint8_t *val, size_t len,
		      struct gaz_status *st);

#endif
