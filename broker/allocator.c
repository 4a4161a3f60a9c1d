/*
 * allocator.c - assignment of journals to brokers (facts §4.7), run by
 * every broker and acting only on the leader (the member key with the
 * smallest CreateRevision).
 *
 * Each round reads the keyspace and, per journal, converges its
 * assignments toward a desired set in one etcd transaction guarded by
 * compares (so a stale leader or a racing change makes it fail harmlessly):
 *   - keep current assignments on members that still have capacity (the
 *     primary first, then the least loaded) up to the desired replication;
 *   - add members (least loaded first, preferring zones the journal does
 *     not use yet) until the desired replication is met;
 *   - remove surplus assignments (exiting members first) only while the
 *     consistent assignments that remain still meet the desired replication;
 *   - exiting members shed their capacity oldest first, as Gazette's, and
 *     never below the largest desired replication (shed_exiting);
 *   - balance a stable route: a replica toward a member two or more
 *     assignments lighter, or the primary toward a member primary of two
 *     or more journals fewer (both in proportion to member limits, at most
 *     ROUND_MOVES per round), each a synchronised hand-off that never drops
 *     a route below its replication or below two zones;
 *   - promote a kept assignment to slot 0 when no primary remains;
 *   - delete assignments of journals that no longer exist.
 * An added assignment is put on the assigned member's lease, so it
 * disappears with that member. The max-flow solver of Gazette is replaced by
 * this greedy pass: the wire layout is the same and tie-breaking is not
 * part of compatibility (facts §4.7).
 */
#include "broker/broker.h"
#include "broker/metrics.h"

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "etcd/txn.h"

struct alloc_member {
	const char *zone, *suffix, *key;
	uint64_t hash;                  /* of zone and suffix: tie-breaks (pick_add) */
	int64_t lease, mod_revision, create_revision;
	int64_t limit, load;            /* load: assignments, as planned so far */
	int64_t primaries;              /* slot-0 assignments, as planned so far */
	bool exiting;
};

struct alloc_state {
	struct alloc_member *m;
	size_t n;
	bool leader;
	int64_t leader_mod_revision;
	const char *leader_key;
	/* Planned this round, for Gazette's allocator metrics. */
	int64_t added, packed, removed, slots;
	int64_t moves, max_moves;       /* balancing moves planned this round, and its cap */
	int64_t unstable;               /* journals short, surplus, unsynchronised or draining */
	/* Assignments and primaries per unit of member limit, were the
	 * cluster balanced: a member's share is this times its limit. */
	double slot_share, primary_share;
};

/* Balancing moves (a replica added toward a less loaded member, or a
 * primary moved to a consistent replica) planned per round at most: each
 * is a synchronised hand-off, so a few at a time keep the cluster calm;
 * a hundredth of the cluster's slots when that is more, so that a large
 * cluster rebalances after joins in a few rounds, not thousands. */
#define ROUND_MOVES 8
/* Operations (and compares) per transaction: etcd's default
 * --max-txn-ops, up to which Gazette's allocator batches too. */
#define TXN_MAX_OPS 128

static struct alloc_member *find_member(struct alloc_state *s, const char *zone, const char *suffix);

/* FNV-1a over `str`, continuing from `h`. */
static uint64_t fnv1a(uint64_t h, const char *str)
{
	for (; *str; str++)
		h = (h ^ (uint8_t)*str) * 0x100000001b3ULL;
	return h;
}

/* mix64: a bijective scramble of 64 bits (splitmix64's finaliser). */
static uint64_t mix64(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

#define FNV_BASIS 0xcbf29ce484222325ULL

/* Collects members and their loads; decides leadership. Read lock held. */
static int collect_members(struct gaz_broker *b, struct alloc_state *s)
{
	char *prefix = NULL;
	size_t lo, hi, alo, ahi;
	int64_t min_create = INT64_MAX;

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
		am->hash = fnv1a(fnv1a(FNV_BASIS, v->zone), v->suffix);
		am->lease = e->lease;
		am->mod_revision = e->mod_revision;
		am->create_revision = e->create_revision;
		am->limit = v->broker->journal_limit;
		am->exiting = v->broker->exiting;
		if (e->create_revision < min_create) {
			min_create = e->create_revision;
			s->leader = !strcmp(e->key, b->member_key);
			s->leader_key = e->key;
			s->leader_mod_revision = e->mod_revision;
		}
	}
	if (asprintf(&prefix, "%s/assign/", b->root) < 0)
		return GAZ_ENOMEM;
	gaz_keyspace_prefix(b->ks, prefix, &alo, &ahi);
	free(prefix);
	for (size_t i = alo; i < ahi; i++) {
		const struct gaz_ks_value *v = gaz_keyspace_at(b->ks, i)->decoded;
		struct alloc_member *m = find_member(s, v->zone, v->suffix);
		if (m) {
			m->load++;
			m->primaries += v->slot == 0;
		}
	}
	return 0;
}

/* Gazette's shedding of exiting members (allocator/alloc_state.go): the
 * oldest exiting members (by CreateRevision) give up their capacity first,
 * each at most what the cluster has in excess of the desired replication
 * slots, and never so many that fewer than `max_replication` members keep
 * theirs. A shed member (limit 0) keeps nothing it need not: its
 * assignments go once the members that replace it are consistent. An
 * exiting member not shed yet keeps serving, and may even take journals
 * from an older one; it drains when members join or older ones leave. So
 * a lone broker, or three brokers of which one exits under replication 3,
 * sheds nothing and keeps every journal until a member joins or its exit
 * timeout ends (main.c). */
static void shed_exiting(struct alloc_state *s, int64_t slots, int64_t max_replication)
{
	int64_t excess = -slots, max_shed = (int64_t)s->n - max_replication, shed = 0;
	size_t *order = calloc(s->n + 1, sizeof(size_t)), n_exiting = 0;

	for (size_t i = 0; i < s->n; i++)
		excess += s->m[i].limit;
	for (size_t i = 0; order && i < s->n; i++) {
		size_t j;
		if (!s->m[i].exiting)
			continue;
		for (j = n_exiting++; j > 0 && s->m[order[j - 1]].create_revision > s->m[i].create_revision; j--)
			order[j] = order[j - 1];
		order[j] = i;
	}
	for (size_t k = 0; order && k < n_exiting && shed < max_shed && excess > 0; k++, shed++) {
		struct alloc_member *m = &s->m[order[k]];
		int64_t give = m->limit < excess ? m->limit : excess;
		m->limit -= give;
		excess -= give;
	}
	free(order);
}

/* find_member: binary search of s->m, which is in the keyspace's order of
 * member keys "<zone>#<suffix>": ordered by zone, then suffix, since '#'
 * sorts below every character a name may hold (journals.h). */
static struct alloc_member *find_member(struct alloc_state *s, const char *zone, const char *suffix)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(s->m[mid].zone, zone);
		if (!c)
			c = strcmp(s->m[mid].suffix, suffix);
		if (!c)
			return &s->m[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
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

/* Picks the member to add: capacity left, not taken, a member not
 * exiting before one that is (an exiting member has capacity only while
 * it is not shed), then, while `zones[n_zones]` (the route's and those of
 * members added to it in this plan) name fewer than two zones, a zone
 * none of them uses, then the fewest assignments. */
static struct alloc_member *pick_add(struct alloc_state *s, const char *const *zones, size_t n_zones,
				     const bool *taken, bool primary, uint64_t journal_hash)
{
	struct alloc_member *best = NULL;
	bool best_new_zone = false, two_zones = false;
	uint64_t best_rank = 0;

	/* A route over two zones already is spread enough (as Gazette's
	 * allocator asks): past that, load alone decides, so a departed
	 * member's journals do not all land on the few members of its zone. */
	for (size_t j = 1; j < n_zones && !two_zones; j++)
		two_zones = strcmp(zones[j], zones[0]) != 0;
	for (size_t i = 0; i < s->n; i++) {
		struct alloc_member *m = &s->m[i];
		bool new_zone = !two_zones;
		if (taken[i] || m->load >= m->limit)
			continue;
		for (size_t j = 0; j < n_zones && new_zone; j++)
			new_zone = strcmp(zones[j], m->zone) != 0;
		/* For slot 0 the fewest primaries come before the fewest
		 * assignments, so new journals spread their primaries too.
		 * Ties go by a hash of (journal, member): in member order they
		 * would give every journal the same few member combinations,
		 * and a departed member's journals could then go only to the
		 * members it never shared one with. */
		uint64_t rank = mix64(journal_hash ^ m->hash);
		int c = !best ? -1
		      : primary && m->primaries != best->primaries ? (m->primaries < best->primaries ? -1 : 1)
		      : m->load != best->load ? (m->load < best->load ? -1 : 1)
		      : rank < best_rank ? -1 : 1;
		if (!best || (best->exiting && !m->exiting) ||
		    (best->exiting == m->exiting &&
		     ((new_zone && !best_new_zone) || (new_zone == best_new_zone && c < 0)))) {
			best = m;
			best_new_zone = new_zone;
			best_rank = rank;
		}
	}
	return best;
}

/* set_shares computes the balanced shares of slots and of `primaried`
 * journals (those wanting a primary) over the members' limits, after
 * shedding. */
static void set_shares(struct alloc_state *s, int64_t primaried)
{
	int64_t limits = 0;

	for (size_t i = 0; i < s->n; i++)
		limits += s->m[i].limit > 0 ? s->m[i].limit : 0;
	s->slot_share = limits ? (double)s->slots / (double)limits : 0;
	s->primary_share = limits ? (double)primaried / (double)limits : 0;
}

/* above/below: whether `count` of member `m` is over or under its share
 * (`share` times its limit). A replica moves only from a member above its
 * share to one below it, so members near their share never trade with
 * each other and every move is one the final balance needs. A primary
 * moves from a member above its share to any route member it is heavier
 * than: it can go only to the journal's own replicas, which may all sit
 * at their share, and a slot move copies no data. */
static bool above(const struct alloc_member *m, int64_t count, double share)
{
	return (double)count > share * (double)m->limit;
}

static bool below(const struct alloc_member *m, int64_t count, double share)
{
	return (double)count < share * (double)m->limit;
}

/* heavier: whether moving one unit of `count` (a replica, or a primary)
 * from member `a` (holding `ca`) to `b` (holding `cb`) evens them out in
 * proportion to their limits: a ends no lighter than b. With equal limits
 * that is ca - cb >= 2, so each move lowers the sum of squared loads and
 * balancing ends. */
static bool heavier(const struct alloc_member *a, int64_t ca, const struct alloc_member *b, int64_t cb)
{
	return a->limit > 0 && b->limit > 0 && (ca - 1) * b->limit >= (cb + 1) * a->limit;
}

/* Distinct zones of route `r` with member index `drop` replaced by
 * `zone` (drop = r->n: nothing replaced, nothing added when zone NULL). */
static size_t route_zones(const struct gaz_route *r, size_t drop, const char *zone)
{
	size_t n = 0;

	for (size_t i = 0; i <= r->n; i++) {
		const char *z = i < r->n ? (i == drop ? NULL : r->zone[i]) : zone;
		bool seen = false;
		if (!z)
			continue;
		for (size_t j = 0; j < i && !seen; j++) {
			const char *y = j < r->n ? (j == drop ? NULL : r->zone[j]) : NULL;
			seen = y && !strcmp(y, z);
		}
		n += !seen;
	}
	return n;
}

/* move_slot plans moving the assignment of route member `i` from its slot
 * to `slot`, keeping its value (the stored Route) and lease. */
static bool move_slot(struct gaz_broker *b, const char *journal, const struct gaz_route *r, size_t i,
		      int64_t slot, struct gaz_txn *t)
{
	char *from = gaz_ks_assign_key(b->root, journal, r->zone[i], r->suffix[i], r->slot[i]);
	char *to = gaz_ks_assign_key(b->root, journal, r->zone[i], r->suffix[i], slot);
	const struct gaz_ks_entry *e = from ? gaz_keyspace_get(b->ks, from) : NULL;
	bool ok = false;

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
		ok = true;
	}
	free(from);
	free(to);
	return ok;
}

/* guard_kept adds to `t` a compare of each kept assignment's mod revision.
 * Returns false if a key could not be built (out of memory). */
static bool guard_kept(struct gaz_broker *b, const char *journal, const struct gaz_route *r,
		       const bool *keep, struct gaz_txn *t)
{
	for (size_t i = 0; i < r->n; i++) {
		char *key;
		if (!keep[i])
			continue;
		if (!(key = gaz_ks_assign_key(b->root, journal, r->zone[i], r->suffix[i], r->slot[i])))
			return false;
		gaz_txn_compare_mod(t, key, r->mod_revision[i]);
		free(key);
	}
	return true;
}

/* Plans one journal's changes into `t`. Returns 1 if any op was added, 0
 * if none, and -1 (nothing added) when `t` already holds ops and lacks
 * room for this journal's most (TXN_MAX_OPS): plan it into the next.
 * Balancing moves only when `balance`.
 *
 * Which assignments are kept: those of members with capacity, the
 * primary first, then the least loaded (consistent ones first among
 * equals), up to the desired replication. The rest are removed only
 * while the consistent kept ones meet the desired replication. With the
 * route stable (every member consistent, none surplus, none missing, none
 * exiting) one balancing move may follow: a replica added on a member
 * lighter by two or more than the heaviest non-primary member (which, now
 * surplus and the heaviest, is removed once the newcomer is consistent),
 * or, failing that, the primary moved to a consistent replica whose member
 * is primary of two or more journals fewer; each only from a member above
 * its share (and a replica only to one below it). Neither takes a route
 * that spans two zones or more down to one. */
static int plan_journal(struct gaz_broker *b, struct alloc_state *s, const char *journal,
			const struct gaz_ks_entry *item, bool balance, struct gaz_txn *t)
{
	const struct gaz_ks_value *iv = item->decoded;
	int64_t desired = desired_replication(b, iv->spec), kept = 0, consistent_kept = 0;
	int64_t max_slot = -1;
	struct gaz_route r;
	struct alloc_member **rm = NULL;
	size_t *order = NULL, n_order = 0, n_zones = 0;
	const char **zones = NULL;     /* zones of the route and of this plan's adds (borrowed) */
	uint64_t journal_hash = fnv1a(FNV_BASIS, journal);
	bool *keep = NULL, *taken = calloc(s->n + 1, sizeof(bool)), changed = false, stable;

	if (!taken || gaz_route_build(b->ks, b->root, journal, &r)) {
		free(taken);
		return 0;
	}
	/* Room in `t` for the most this journal may add to it: a compare and
	 * an op per member removed or added, one compare per member kept, and
	 * two slot moves (two compares, four ops). */
	size_t most = 2 * (r.n + (size_t)(desired > 0 ? desired : 0)) + 4;
	if (gaz_txn_ops(t) && (gaz_txn_ops(t) + most > TXN_MAX_OPS ||
			       gaz_txn_compares(t) + most + 1 > TXN_MAX_OPS)) {
		gaz_route_release(&r);
		free(taken);
		return -1;
	}
	keep = calloc(r.n + 1, sizeof(bool));
	rm = calloc(r.n + 1, sizeof(*rm));
	order = calloc(r.n + 1, sizeof(size_t));
	zones = calloc(r.n + (size_t)(desired > 0 ? desired : 0) + 1, sizeof(*zones));
	if (!keep || !rm || !order || !zones)
		goto done;
	for (size_t i = 0; i < r.n; i++)
		zones[n_zones++] = r.zone[i];
	for (size_t i = 0; i < r.n; i++) {
		rm[i] = find_member(s, r.zone[i], r.suffix[i]);
		if (rm[i])
			taken[rm[i] - s->m] = true;
		if (r.slot[i] > max_slot)
			max_slot = r.slot[i];
		if (!rm[i] || rm[i]->limit <= 0)
			continue;
		/* Insertion by (primary first, load, consistent first, index). */
		size_t j = n_order++;
		for (; j > 0; j--) {
			size_t o = order[j - 1];
			bool before = r.slot[o] == 0 ? false
				    : r.slot[i] == 0 ? true
				    : rm[i]->load != rm[o]->load ? rm[i]->load < rm[o]->load
				    : r.consistent[i] && !r.consistent[o];
			if (!before)
				break;
			order[j] = o;
		}
		order[j] = i;
	}
	size_t n_kept_order = 0;
	for (size_t k = 0; k < n_order && kept < desired; k++, n_kept_order++) {
		keep[order[k]] = true;
		kept++;
		consistent_kept += r.consistent[order[k]];
	}
	/* Kept members all in one zone while a candidate left out is in
	 * another: that candidate is kept instead of the last non-primary,
	 * so dropping a surplus member never leaves a route on one zone. */
	if (kept >= 2) {
		const char *z = r.zone[order[0]];
		bool one_zone = true;
		for (size_t k = 1; k < n_kept_order && one_zone; k++)
			one_zone = !strcmp(r.zone[order[k]], z);
		for (size_t k = n_kept_order; one_zone && k < n_order; k++) {
			size_t in = order[k], out = order[n_kept_order - 1];
			if (!strcmp(r.zone[in], z) || r.slot[out] == 0)
				continue;
			keep[out] = false;
			keep[in] = true;
			consistent_kept += (int64_t)r.consistent[in] - (int64_t)r.consistent[out];
			one_zone = false;
		}
	}
	stable = kept == desired && (int64_t)r.n == desired && consistent_kept == desired;
	/* No balancing move while a member of the route is on its way out:
	 * the drain moves this journal anyway, and two hand-offs at once on
	 * one route are what balancing must never cause. */
	for (size_t i = 0; stable && i < r.n; i++)
		stable = !rm[i]->exiting;
	s->unstable += !stable;
	/* Removals: only while the consistent assignments kept still meet the
	 * desired replication, so no acknowledged byte loses its last copy.
	 * The transaction also requires each kept assignment unchanged: the
	 * next round may plan from a view that lacks this one's writes, pick
	 * other keepers (loads moved meanwhile) and remove one of these, and
	 * the two removals together would leave the route short. */
	bool guarded = false;
	for (size_t i = 0; i < r.n; i++) {
		char *key;
		if (keep[i] || consistent_kept < desired)
			continue;
		if (!guarded && !guard_kept(b, journal, &r, keep, t))
			break;
		guarded = true;
		if ((key = gaz_ks_assign_key(b->root, journal, r.zone[i], r.suffix[i], r.slot[i]))) {
			gaz_txn_compare_mod(t, key, r.mod_revision[i]);
			gaz_txn_delete(t, key);
			free(key);
			changed = true;
			s->removed++;
			if (rm[i]) {
				rm[i]->load--;
				rm[i]->primaries -= r.slot[i] == 0;
			}
		}
	}
	/* Adds, each counting the zones of those before it. */
	for (int64_t n = kept; n < desired; n++) {
		struct alloc_member *m = pick_add(s, zones, n_zones, taken, max_slot < 0, journal_hash);
		char *key;
		if (!m)
			break;
		taken[m - s->m] = true;
		zones[n_zones++] = m->zone;
		m->load++;
		m->primaries += max_slot < 0;
		key = gaz_ks_assign_key(b->root, journal, m->zone, m->suffix, ++max_slot);
		if (key) {
			gaz_txn_compare_mod(t, m->key, m->mod_revision);
			gaz_txn_put(t, key, NULL, 0, m->lease, false);
			free(key);
			changed = true;
			s->added++;
		}
	}
	/* Balance: a replica toward a lighter member. */
	if (balance && stable && !changed && s->moves < s->max_moves) {
		size_t over = r.n;
		for (size_t i = 0; i < r.n; i++)
			if (r.slot[i] != 0 && (over == r.n || rm[i]->load > rm[over]->load))
				over = i;
		struct alloc_member *under = over < r.n ? pick_add(s, (const char *const *)r.zone, r.n, taken, false,
							   journal_hash)
							: NULL;
		size_t zones = route_zones(&r, r.n, NULL);
		char *key;
		if (under && !under->exiting && heavier(rm[over], rm[over]->load, under, under->load) &&
		    above(rm[over], rm[over]->load, s->slot_share) && below(under, under->load, s->slot_share) &&
		    route_zones(&r, over, under->zone) >= (zones < 2 ? zones : 2) &&
		    (key = gaz_ks_assign_key(b->root, journal, under->zone, under->suffix, ++max_slot))) {
			gaz_txn_compare_mod(t, under->key, under->mod_revision);
			gaz_txn_put(t, key, NULL, 0, under->lease, false);
			free(key);
			under->load++;
			rm[over]->load--; /* as it will be once `under` is consistent */
			changed = true;
			s->added++;
			s->moves++;
		}
	}
	/* Balance: the primary toward a member primary of fewer journals. */
	if (balance && stable && !changed && s->moves < s->max_moves && r.primary >= 0) {
		struct alloc_member *p = rm[r.primary];
		size_t to = r.n;
		for (size_t i = 0; i < r.n; i++)
			if ((int)i != r.primary && !rm[i]->exiting &&
			    (to == r.n || rm[i]->primaries < rm[to]->primaries))
				to = i;
		if (to < r.n && heavier(p, p->primaries, rm[to], rm[to]->primaries) &&
		    above(p, p->primaries, s->primary_share) &&
		    move_slot(b, journal, &r, (size_t)r.primary, ++max_slot, t) &&
		    move_slot(b, journal, &r, to, 0, t)) {
			p->primaries--;
			rm[to]->primaries++;
			changed = true;
			s->packed++;
			s->moves++;
		}
	}
	/* Promotion: with no primary among the kept ones and nothing removed
	 * or added this round, move the first kept (consistent preferred)
	 * assignment to slot 0, keeping its value and lease. */
	if (!changed && r.primary < 0 && kept > 0) {
		size_t pick = r.n;
		for (size_t i = 0; i < r.n; i++)
			if (keep[i] && (pick == r.n || (r.consistent[i] && !r.consistent[pick])))
				pick = i;
		if (move_slot(b, journal, &r, pick, 0, t)) {
			rm[pick]->primaries++;
			changed = true;
			s->packed++; /* Gazette counts a promotion as a pack */
		}
	}
done:
	gaz_route_release(&r);
	free(zones);
	free(order);
	free(rm);
	free(keep);
	free(taken);
	return changed ? 1 : 0;
}

/* Deletes assignments of journals that no longer exist. */
static bool plan_orphans(struct gaz_broker *b, struct alloc_state *s, struct gaz_txn *t)
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
		s->removed++;
	}
	return changed;
}

/* Commits one planned transaction (no keyspace lock held). Returns false
 * when etcd failed it (a lost race is no failure: the next round sees).
 * Raises *revision to its revision when it applied. */
static bool run_txn(struct gaz_broker *b, struct gaz_txn *t, int64_t *revision)
{
	struct gaz_status st = {0};
	int64_t rev = 0;
	bool ok = false;

	if (gaz_txn_commit(b->etcd, t, &ok, &rev, &st)) {
		gaz_warn("allocator transaction failed", "err=%s", st.msg);
		return false;
	}
	if (!ok)
		gaz_debug("allocator transaction lost a race", NULL);
	/* Only an applied transaction's revision is one of our prefix: a
	 * failed one answers etcd's current revision, which writes elsewhere
	 * in a shared etcd may have moved past anything our keyspace sees. */
	if (ok && rev > *revision)
		*revision = rev;
	return true;
}

/* Transactions per round at most: the next round plans from a keyspace
 * holding all of them (allocate_round). */
#define ROUND_TXNS 64

/* One allocation round: plans up to ROUND_TXNS transactions, each of
 * several journals, under the keyspace read lock (every pointer into the
 * keyspace stays valid only while it is held; the builders copy what they
 * keep), then commits them without it. Each also requires the leader's member key unchanged.
 * A leader's round over a keyspace revision it has not converged on yet
 * (`*converged_rev`) counts as one of Gazette's converge iterations when
 * every transaction went through, as Gazette counts one per revision.
 * Returns the number of transactions issued; *written_rev is raised to
 * the last applied one's revision (the next round must see every one:
 * planned from a view lacking some, it would add their members again,
 * at other slots, since an add compares only the member's key). */
static int allocate_round(struct gaz_broker *b, int64_t rev, int64_t *converged_rev,
			  int64_t *written_rev)
{
	struct alloc_state s = {0};
	struct gaz_txn txns[ROUND_TXNS + 1];
	char *prefix = NULL;
	size_t lo = 0, hi = 0;
	int64_t t0 = gaz_mono_ns(), solve_ns = 0, max_replication = 0, primaried = 0;
	bool ok = true;
	int n = 0;

	gaz_keyspace_rlock(b->ks);
	if (collect_members(b, &s) || !s.leader || asprintf(&prefix, "%s/items/", b->root) < 0)
		goto unlock;
	gaz_keyspace_prefix(b->ks, prefix, &lo, &hi);
	for (size_t i = lo; i < hi; i++) {
		int64_t r = desired_replication(b, ((struct gaz_ks_value *)gaz_keyspace_at(b->ks, i)->decoded)->spec);
		s.slots += r;
		primaried += r > 0;
		max_replication = r > max_replication ? r : max_replication;
	}
	shed_exiting(&s, s.slots, max_replication);
	set_shares(&s, primaried);
	s.max_moves = s.slots / 100 > ROUND_MOVES ? s.slots / 100 : ROUND_MOVES;
	/* Pass 0 plans what the journals need (members missing, surplus,
	 * departed, no primary); only a round that finds every journal
	 * stable plans balancing moves (pass 1). So moves never interleave
	 * with a departure's repairs, and are planned from loads that count
	 * no surplus member still waiting for its removal (which would make
	 * its member look heavier than it is and shed it twice). Journals share
	 * a transaction up to TXN_MAX_OPS. */
	for (int pass = 0; pass < 2 && n == 0 && !s.unstable; pass++) {
		bool open = false;
		for (size_t i = lo; i < hi && n < ROUND_TXNS;) {
			const struct gaz_ks_entry *e = gaz_keyspace_at(b->ks, i);
			if (!open)
				gaz_txn_init(&txns[n]), open = true;
			if (plan_journal(b, &s, ((struct gaz_ks_value *)e->decoded)->journal, e, pass == 1,
					 &txns[n]) < 0) {
				/* Full: close it and plan this journal into the next. */
				gaz_txn_compare_mod(&txns[n++], s.leader_key, s.leader_mod_revision);
				open = false;
				continue;
			}
			i++;
		}
		if (open && gaz_txn_ops(&txns[n]))
			gaz_txn_compare_mod(&txns[n++], s.leader_key, s.leader_mod_revision);
		else if (open)
			gaz_txn_release(&txns[n]);
	}
	gaz_txn_init(&txns[n]);
	if (n < ROUND_TXNS && plan_orphans(b, &s, &txns[n]))
		gaz_txn_compare_mod(&txns[n], s.leader_key, s.leader_mod_revision), n++;
	else
		gaz_txn_release(&txns[n]);
	solve_ns = gaz_mono_ns() - t0;
unlock:
	gaz_keyspace_runlock(b->ks);
	for (int i = 0; i < n; i++) {
		ok &= run_txn(b, &txns[i], written_rev);
		gaz_txn_release(&txns[i]);
	}
	if (s.leader) {
		gaz_metric_allocator_ops(s.added, s.packed, s.removed);
		if (ok && rev != *converged_rev) {
			*converged_rev = rev;
			gaz_metric_allocator_converged((double)solve_ns / 1e9, (int64_t)s.n,
						       (int64_t)(hi - lo), s.slots);
		}
	}
	free(prefix);
	free(s.m);
	return n;
}

void *gaz_allocator_thread(void *arg)
{
	struct gaz_broker *b = arg;
	int64_t converged_rev = 0, idle_rev = -1;

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
		rev = gaz_keyspace_revision_now(b->ks);
		/* A round is a function of the keyspace alone: one that planned
		 * nothing at this revision would plan nothing again, so an idle
		 * cluster costs no scan of its journals. */
		if (rev == idle_rev) {
			pthread_mutex_lock(&b->mu);
			continue;
		}
		int64_t written = 0;
		txns = allocate_round(b, rev, &converged_rev, &written);
		if (!txns)
			idle_rev = rev;
		/* After writing, wait for all our own applied writes before
		 * planning again, so the next round does not repeat them; when
		 * none applied (lost races), for the change that beat us, a
		 * while. */
		while (written && !atomic_load(&b->stopping) &&
		       gaz_keyspace_wait_revision(b->ks, written, gaz_deadline_in(1000)))
			;
		if (txns && !written)
			gaz_keyspace_wait_revision(b->ks, rev + 1, gaz_deadline_in(2000));
		pthread_mutex_lock(&b->mu);
		if (txns)
			b->alloc_wake = true;
	}
	pthread_mutex_unlock(&b->mu);
	return NULL;
}
