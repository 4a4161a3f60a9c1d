/*
 * allocator.c - the brokers' use of the allocator (lib/keyspace/
 * allocator.h) over journals: a journal's desired replication and what
 * makes a journal's assignment consistent, as Gazette's broker has them
 * (facts §4.7), and Gazette's allocator metrics.
 */
#include "broker/broker.h"
#include "broker/metrics.h"

#include <stdatomic.h>

#include "keyspace/allocator.h"

/* A journal's replication, capped by --broker.max-replication; one with a
 * partially suspended journal (its spool is gone, one broker answers its
 * reads), none for a fully suspended one. */
static int64_t journal_desired(void *arg, const struct gaz_ks_value *item)
{
	const struct gaz_broker *b = arg;
	const Protocol__JournalSpec *spec = item->spec;
	int64_t r = spec->replication;

	if (r > b->cfg.max_replication)
		r = b->cfg.max_replication;
	if (spec->suspend && spec->suspend->level == PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__PARTIAL)
		r = r > 1 ? 1 : r;
	if (spec->suspend && spec->suspend->level == PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__FULL)
		r = 0;
	return r;
}

/* Gazette's JournalIsConsistent: the Route the assigned broker stored in
 * its assignment equals the journal's current route (it has joined it). */
static bool journal_consistent(void *arg, const struct gaz_ks_value *const *assigns, size_t n, size_t i,
			       const struct gaz_route *route)
{
	(void)arg, (void)n;
	return assigns[i]->route && gaz_proto_route_equivalent(assigns[i]->route, route);
}

static void round_ops(void *arg, int64_t added, int64_t packed, int64_t removed)
{
	(void)arg;
	gaz_metric_allocator_ops(added, packed, removed);
}

static void converged(void *arg, double solve_s, int64_t members, int64_t items, int64_t slots)
{
	(void)arg;
	gaz_metric_allocator_converged(solve_s, members, items, slots);
}

int gaz_broker_allocator_start(struct gaz_broker *b)
{
	struct gaz_allocator_cfg cfg = {
		.etcd = b->etcd,
		.ks = b->ks,
		.root = b->root,
		.member_key = b->member_key,
		.what = "journals",
		.ops = {journal_desired, journal_consistent, round_ops, converged},
		.arg = b,
	};
	struct gaz_allocator *a = gaz_allocator_start(&cfg);

	if (!a)
		return GAZ_ENOMEM;
	atomic_store(&b->allocator, a);
	return 0;
}
