/*
 * allocator.c - assignment of journals to brokers (facts §4.7), run by
 * every broker and acting only on the leader (the member key with the
 * smallest CreateRevision).
 *
 * Each round reads the keyspace and, per journal, converges its
 * assignments toward a desired set in one etcd transaction guarded by
 * compares (so a stale leader or a racing change makes it fail harmlessly):
 *   - keep current assignments on members that still have capacity;
 *   - add members (least loaded first, preferring zones the journal does
 *     not use yet) until the desired replication is met;
 *   - remove surplus assignments (exiting members first) only while the
 *     consistent assignments that remain still meet the desired replication;
 *   - promote a kept assignment to slot 0 when no primary remains;
 *   - delete assignments of journals that no longer exist.
 * An added assignment is put on the assigned member's lease, so it
 * disappears with that member. The max-flow solver of Gazette is replaced by
 * this greedy pass: the wire layout is the same and tie-breaking is not
 * part of compatibility (facts §4.7).
 */
#include "broker/broker.h"

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "etcd/txn.h"

struct alloc_member {
	const char *zone, *suffix, *key;
	int64_t lease, mod_revision, create_revision;
	int64_t limit, load;
	bool exiting;
};

struct alloc_state {
	struct alloc_member *m;
	size_t n;
	bool leader;
	int64_t leader_mod_revision;
	const char *leader_key;
};

/* Collects members and their loads; decides leadership. Read lock held. */
static int collect_members(struct gaz_broker *b, struct alloc_state *s)
{
	char *prefix = NULL;
	size_t lo, hi, alo, ahi;
	int64_t min_create = INT64_MAX;
	bool any_live = false;

	if (asprintf(&prefix, "%s/members/", b->root) < 0)
		return GAZ_ENOMEM;
	gaz_keyspace_prefix(b->ks, prefix, &lo, &hi);
	free(prefix);
	s->m = calloc(hi - lo + 1, sizeof(*s->m));
	if (!s->m)
		return GAZ_ENOMEM;
	for (size_t i = lo; i < hi; i++) {
		const struct gaz_ks_entry *e = gaz_keyspace_at(b->ks, i);
		const struct gaz_ks_value *v = e->decoded;
		struct alloc_member *am = &s->m[s->n++];
		am->zone = v->zone;
		am->suffix = v->suffix;
		am->key = e->key;
		am->lease = e->lease;
		am->mod_revision = e->mod_revision;
		am->create_revision = e->create_revision;
		am->limit = v->broker->journal_limit;
		am->exiting = v->broker->exiting;
		any_live |= !am->exiting && am->limit > 0;
		if (e->create_revision < min_create) {
			min_create = e->create_revision;
			s->leader = !strcmp(e->key, b->member_key);
			s->leader_key = e->key;
			s->leader_mod_revision = e->mod_revision;
		}
	}
	/* Exiting members shed their capacity when someone else can take it;
	 * a lone exiting broker releases its journals itself (maintain.c). */
	for (size_t i = 0; i < s->n; i++)
		if (s->m[i].exiting && any_live)
			s->m[i].limit = 0;
	if (asprintf(&prefix, "%s/assign/", b->root) < 0)
		return GAZ_ENOMEM;
	gaz_keyspace_prefix(b->ks, prefix, &alo, &ahi);
	free(prefix);
	for (size_t i = alo; i < ahi; i++) {
		const struct gaz_ks_value *v = gaz_keyspace_at(b->ks, i)->decoded;
		for (size_t j = 0; j < s->n; j++)
			if (!strcmp(s->m[j].zone, v->zone) && !strcmp(s->m[j].suffix, v->suffix))
				s->m[j].load++;
	}
	return 0;
}

static struct alloc_member *find_member(struct alloc_state *s, const char *zone, const char *suffix)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->m[i].zone, zone) && !strcmp(s->m[i].suffix, suffix))
			return &s->m[i];
	return NULL;
}

static int64_t desired_replication(struct gaz_broker *b, const Protocol__JournalSpec *spec)
{
	int64_t r = spec->replication;
	if (r > b->cfg.max_replication)
		r = b->cfg.max_replication;
	if (spec->suspend && spec->suspend->level == PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__PARTIAL)
		r = r > 1 ? 1 : r;
	if (spec->suspend && spec->suspend->level == PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__FULL)
		r = 0;
	return r;
}

/* Picks the member to add: capacity left, not in the route, fewest
 * assignments, preferring a zone the route does not use. */
static struct alloc_member *pick_add(struct alloc_state *s, const struct gaz_route *r,
				     const bool *taken)
{
	struct alloc_member *best = NULL;
	bool best_new_zone = false;

	for (size_t i = 0; i < s->n; i++) {
		struct alloc_member *m = &s->m[i];
		bool new_zone = true;
		if (taken[i] || m->exiting || m->load >= m->limit)
			continue;
		for (size_t j = 0; j < r->n; j++)
			new_zone &= strcmp(r->zone[j], m->zone) != 0;
		if (!best || (new_zone && !best_new_zone) ||
		    (new_zone == best_new_zone && m->load < best->load)) {
			best = m;
			best_new_zone = new_zone;
		}
	}
	return best;
}

/* Plans one journal's changes into `t`. Returns true if any op was added. */
static bool plan_journal(struct gaz_broker *b, struct alloc_state *s, const char *journal,
			 const struct gaz_ks_entry *item, struct gaz_txn *t)
{
	const struct gaz_ks_value *iv = item->decoded;
	int64_t desired = desired_replication(b, iv->spec), kept = 0, consistent_kept = 0;
	int64_t max_slot = -1;
	struct gaz_route r;
	bool *keep = NULL, *taken = calloc(s->n + 1, sizeof(bool)), changed = false;

	if (!taken || gaz_route_build(b->ks, b->root, journal, &r)) {
		free(taken);
		return false;
	}
	keep = calloc(r.n + 1, sizeof(bool));
	for (size_t i = 0; keep && i < r.n; i++) {
		struct alloc_member *m = find_member(s, r.zone[i], r.suffix[i]);
		if (m)
			taken[m - s->m] = true;
		if (r.slot[i] > max_slot)
			max_slot = r.slot[i];
		keep[i] = m && m->limit > 0 && kept < desired;
		if (keep[i]) {
			kept++;
			consistent_kept += r.consistent[i];
		}
	}
	/* Removals: only while the consistent assignments kept still meet the
	 * desired replication, so no acknowledged byte loses its last copy. */
	for (size_t i = 0; keep && i < r.n; i++) {
		char *key;
		if (keep[i] || consistent_kept < desired)
			continue;
		if ((key = gaz_ks_assign_key(b->root, journal, r.zone[i], r.suffix[i], r.slot[i]))) {
			gaz_txn_compare_mod(t, key, r.mod_revision[i]);
			gaz_txn_delete(t, key);
			free(key);
			changed = true;
		}
	}
	/* Adds. */
	for (int64_t n = kept; keep && n < desired; n++) {
		struct alloc_member *m = pick_add(s, &r, taken);
		char *key;
		if (!m)
			break;
		taken[m - s->m] = true;
		m->load++;
		key = gaz_ks_assign_key(b->root, journal, m->zone, m->suffix, ++max_slot);
		if (key) {
			gaz_txn_compare_mod(t, m->key, m->mod_revision);
			gaz_txn_put(t, key, NULL, 0, m->lease, false);
			free(key);
			changed = true;
		}
	}
	/* Promotion: with no primary among the kept ones and nothing removed
	 * or added this round, move the first kept (consistent preferred)
	 * assignment to slot 0, keeping its value and lease. */
	if (keep && !changed && r.primary < 0 && kept > 0) {
		size_t pick = r.n;
		for (size_t i = 0; i < r.n; i++)
			if (keep[i] && (pick == r.n || (r.consistent[i] && !r.consistent[pick])))
				pick = i;
		char *from = gaz_ks_assign_key(b->root, journal, r.zone[pick], r.suffix[pick], r.slot[pick]);
		char *to = gaz_ks_assign_key(b->root, journal, r.zone[pick], r.suffix[pick], 0);
		const struct gaz_ks_entry *e = from ? gaz_keyspace_get(b->ks, from) : NULL;
		if (e && to) {
			const struct gaz_ks_value *v = e->decoded;
			uint8_t *val = NULL;
			size_t len = v->route ? protocol__route__get_packed_size(v->route) : 0;
			if (len && (val = malloc(len)))
				protocol__route__pack(v->route, val);
			gaz_txn_compare_mod(t, from, e->mod_revision);
			gaz_txn_delete(t, from);
			gaz_txn_put(t, to, val, val ? len : 0, e->lease, false);
			free(val);
			changed = true;
		}
		free(from);
		free(to);
	}
	gaz_route_release(&r);
	free(keep);
	free(taken);
	return changed;
}

/* Deletes assignments of journals that no longer exist. */
static bool plan_orphans(struct gaz_broker *b, struct gaz_txn *t)
{
	char *prefix = NULL;
	size_t lo, hi;
	bool changed = false;

	if (asprintf(&prefix, "%s/assign/", b->root) < 0)
		return false;
	gaz_keyspace_prefix(b->ks, prefix, &lo, &hi);
	free(prefix);
	for (size_t i = lo; i < hi && gaz_txn_ops(t) < 32; i++) {
		const struct gaz_ks_entry *e = gaz_keyspace_at(b->ks, i);
		const struct gaz_ks_value *v = e->decoded;
		if (gaz_ks_item(b->ks, b->root, v->journal))
			continue;
		gaz_txn_compare_mod(t, e->key, e->mod_revision);
		gaz_txn_delete(t, e->key);
		changed = true;
	}
	return changed;
}

/* Commits one planned transaction (no keyspace lock held). */
static void run_txn(struct gaz_broker *b, struct gaz_txn *t)
{
	struct gaz_status st = {0};
	bool ok = false;

	if (gaz_txn_commit(b->etcd, t, &ok, NULL, &st))
		gaz_warn("allocator transaction failed", "err=\"%s\"", st.msg);
	else if (!ok)
		gaz_debug("allocator transaction lost a race", "%s", "");
}

#define ROUND_TXNS 16

/* One allocation round: plans up to ROUND_TXNS transactions under the
 * keyspace read lock (every pointer into the keyspace stays valid only
 * while it is held; the builders copy what they keep), then commits them
 * without it. Each also requires the leader's member key unchanged.
 * Returns the number of transactions issued. */
static int allocate_round(struct gaz_broker *b)
{
	struct alloc_state s = {0};
	struct gaz_txn txns[ROUND_TXNS + 1];
	char *prefix = NULL;
	size_t lo, hi;
	int n = 0;

	gaz_keyspace_rlock(b->ks);
	if (collect_members(b, &s) || !s.leader || asprintf(&prefix, "%s/items/", b->root) < 0)
		goto unlock;
	gaz_keyspace_prefix(b->ks, prefix, &lo, &hi);
	for (size_t i = lo; i < hi && n < ROUND_TXNS; i++) {
		const struct gaz_ks_entry *e = gaz_keyspace_at(b->ks, i);
		gaz_txn_init(&txns[n]);
		if (plan_journal(b, &s, ((struct gaz_ks_value *)e->decoded)->journal, e, &txns[n]))
			gaz_txn_compare_mod(&txns[n], s.leader_key, s.leader_mod_revision), n++;
		else
			gaz_txn_release(&txns[n]);
	}
	gaz_txn_init(&txns[n]);
	if (n < ROUND_TXNS && plan_orphans(b, &txns[n]))
		gaz_txn_compare_mod(&txns[n], s.leader_key, s.leader_mod_revision), n++;
	else
		gaz_txn_release(&txns[n]);
unlock:
	gaz_keyspace_runlock(b->ks);
	for (int i = 0; i < n; i++) {
		run_txn(b, &txns[i]);
		gaz_txn_release(&txns[i]);
	}
	free(prefix);
	free(s.m);
	return n;
}

void *gaz_allocator_thread(void *arg)
{
	struct gaz_broker *b = arg;

	pthread_mutex_lock(&b->mu);
	while (!atomic_load(&b->stopping)) {
		struct timespec ts = gaz_abstime_of(gaz_deadline_in(1000));
		int64_t rev;
		int txns;
		while (!b->alloc_wake && !atomic_load(&b->stopping))
			if (pthread_cond_timedwait(&b->cond, &b->mu, &ts))
				break;
		b->alloc_wake = false;
		pthread_mutex_unlock(&b->mu);
		gaz_keyspace_rlock(b->ks);
		rev = gaz_keyspace_revision(b->ks);
		gaz_keyspace_runlock(b->ks);
		txns = allocate_round(b);
		/* After writing, wait for our own writes before planning again,
		 * so the next round does not repeat them. */
		if (txns)
			gaz_keyspace_wait_revision(b->ks, rev + 1, gaz_deadline_in(2000));
		pthread_mutex_lock(&b->mu);
		if (txns)
			b->alloc_wake = true;
	}
	pthread_mutex_unlock(&b->mu);
	return NULL;
}
