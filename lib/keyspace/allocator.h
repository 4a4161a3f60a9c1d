/*
 * allocator.h - Gazette's allocator (facts §4.7) over one keyspace of
 * items, members and assignments (journals.h's layout): the brokers run it
 * over journals (items: JournalSpecs; members: BrokerSpecs; assignment
 * values: Routes), consumers over shards (ShardSpecs, ConsumerSpecs,
 * ReplicaStatus). The same code plans both; what differs is the owner's
 * gaz_allocator_ops: an item's desired replication and whether an
 * assignment is consistent (ready to serve, so a surplus one may go).
 *
 * Every member runs it; only the leader (the member key with the smallest
 * CreateRevision, as Gazette's) writes. It runs on its own thread, woken by
 * gaz_allocator_wake (the owner's keyspace observer) and once a second.
 *
 * Locking: the allocator's own mutex guards its wake and stop flags only;
 * planning holds the keyspace's read lock, commits run without it. The
 * ops are called on the allocator thread, with the keyspace read-locked
 * (desired, consistent) or not (the metric hooks).
 */
#ifndef GAZ_KEYSPACE_ALLOCATOR_H
#define GAZ_KEYSPACE_ALLOCATOR_H

#include <stdbool.h>
#include <stdint.h>

#include "keyspace/journals.h"

struct gaz_allocator_ops {
	/* desired: the replication item `item` (an ITEM value) wants: 0 for
	 * none (a fully suspended journal, a disabled shard). */
	int64_t (*desired)(void *arg, const struct gaz_ks_value *item);
	/* consistent: whether assignment `i` of an item's `n` assignments
	 * (`assigns`, ASSIGN values in key order; `route` their route without
	 * endpoints) is consistent. */
	bool (*consistent)(void *arg, const struct gaz_ks_value *const *assigns, size_t n, size_t i,
			   const struct gaz_route *route);
	/* Optional metric hooks: assignments added, packed (slot moves,
	 * promotions) and removed in a round; and each converged round's
	 * planning time (seconds) with the member, item and slot counts. */
	void (*round_ops)(void *arg, int64_t added, int64_t packed, int64_t removed);
	void (*converged)(void *arg, double solve_s, int64_t members, int64_t items, int64_t slots);
};

struct gaz_allocator_cfg {
	struct gaz_etcd *etcd;          /* borrowed; outlives the allocator */
	struct gaz_keyspace *ks;        /* borrowed; a journals.h keyspace of root */
	const char *root;               /* copied: "/gazette/cluster", no trailing slash */
	const char *member_key;         /* copied: this process's member key */
	const char *what;               /* copied: what items are, for logs ("journal", "shard") */
	struct gaz_allocator_ops ops;
	void *arg;                      /* passed to every op */
};

struct gaz_allocator;

/* gaz_allocator_start starts the allocator thread. Returns NULL when out
 * of memory or the thread cannot start. */
struct gaz_allocator *gaz_allocator_start(const struct gaz_allocator_cfg *cfg);

/* gaz_allocator_wake asks for a round soon (the keyspace changed); a
 * stopped allocator ignores it. Thread-safe. */
void gaz_allocator_wake(struct gaz_allocator *a);

/* gaz_allocator_stop ends the thread (a round in progress completes, its
 * transactions included) and joins it; wakes may still come (they do
 * nothing) until gaz_allocator_free. Idempotent; NULL is a no-op. */
void gaz_allocator_stop(struct gaz_allocator *a);

/* gaz_allocator_free stops the allocator if it runs and frees it; call it
 * once nothing can wake it any more. NULL is a no-op. */
void gaz_allocator_free(struct gaz_allocator *a);

#endif
