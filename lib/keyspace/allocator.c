/*
 * allocator.c - assignment of items to members (facts §4.7): of journals
 * to brokers and of shards to consumers, by the same code (allocator.h),
 * run by every member and acting only on the leader (the member key with
 * the smallest CreateRevision). Below, "journal" stands for either item
 * kind: the brokers' terms, in which this was first written.
 *
 * The leader keeps an index across rounds (struct alloc_index): member
 * loads, followed through the keyspace's change log, and the journals
 * whose keys changed since they were planned. A round plans those, a pass
 * over every journal only when members changed (or the log overflowed),
 * and balancing moves only when every journal is stable; so a round costs
 * what changed, not the cluster's size (100,000 journals converge from
 * empty in seconds of CPU: bench/README.md, "The allocator at scale").
 * Per journal it converges the assignments toward a desired set, in
 * etcd transactions of many journals guarded by compares (so a stale
 * leader or a racing change makes them fail harmlessly):
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
#include "keyspace/allocator.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/strset.h"
#include "etcd/txn.h"

struct gaz_allocator {
	struct gaz_etcd *etcd;
	struct gaz_keyspace *ks;
	char *root, *member_key, *what;
	struct gaz_allocator_ops ops;
	void *arg;
	pthread_t thread;
	pthread_mutex_t mu;             /* guards wake, stop and joined */
	pthread_cond_t cond;
	bool wake, stop, joined;
};

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
	/* Assignments and primaries per unit of member limit, were the
	 * cluster balanced: a member's share is this times its limit. */
	double slot_share, primary_share;
	/* plan_journal's working arrays, reused from journal to journal (a
	 * round plans thousands): a route view of `cap` members, borrowing
	 * the keyspace's strings (route_view), and per member `taken`, all
	 * false between plans. */
	struct plan_scratch {
		size_t cap;
		char **zone, **suffix;
		int64_t *slot, *mod_revision;
		bool *consistent, *keep;
		struct alloc_member **rm;
		size_t *order;
		const char **zones;     /* cap + the adds */
		const struct gaz_ks_value **vals; /* the route's assignment values */
		bool *taken;
	} scratch;
};

static void scratch_release(struct plan_scratch *p)
{
	free(p->zone), free(p->suffix), free(p->slot), free(p->mod_revision);
	free(p->consistent), free(p->keep), free(p->rm), free(p->order), free(p->zones), free(p->vals);
	free(p->taken);
	*p = (struct plan_scratch){0};
}

/* scratch_reserve makes room for routes of `n` members and `adds` more. */
static int scratch_reserve(struct plan_scratch *p, size_t n, size_t adds)
{
	size_t cap = p->cap ? p->cap : 8;

	if (n + adds + 1 <= p->cap)
		return 0;
	while (cap < n + adds + 1)
		cap *= 2;
#define GROW(f) do { void *q = realloc(p->f, cap * sizeof(*p->f)); if (!q) return GAZ_ENOMEM; p->f = q; } while (0)
	GROW(zone); GROW(suffix); GROW(slot); GROW(mod_revision); GROW(consistent);
	GROW(keep); GROW(rm); GROW(order); GROW(zones); GROW(vals);
#undef GROW
	p->cap = cap;
	return 0;
}

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

/* Collects members; decides leadership. Loads come from the index
 * (index_loads). Read lock held. */
static int collect_members(struct gaz_allocator *a, struct alloc_state *s)
{
	char *prefix = NULL;
	size_t lo, hi;
	int64_t min_create = INT64_MAX;

	if (asprintf(&prefix, "%s/members/", a->root) < 0)
		return GAZ_ENOMEM;
	gaz_keyspace_prefix(a->ks, prefix, &lo, &hi);
	free(prefix);
	s->m = calloc(hi - lo + 1, sizeof(*s->m));
	if (!s->m)
		return GAZ_ENOMEM;
	for (size_t i = lo; i < hi; i++) {
		const struct gaz_ks_entry *e = gaz_keyspace_at(a->ks, i);
		const struct gaz_ks_value *v = e->decoded;
		struct alloc_member *am = &s->m[s->n++];
		am->zone = v->zone;
		am->suffix = v->suffix;
		am->key = e->key;
		am->hash = fnv1a(fnv1a(FNV_BASIS, v->zone), v->suffix);
		am->lease = e->lease;
		am->mod_revision = e->mod_revision;
		am->create_revision = e->create_revision;
		am->limit = v->item_limit;
		am->exiting = v->exiting;
		if (e->create_revision < min_create) {
			min_create = e->create_revision;
			s->leader = !strcmp(e->key, a->member_key);
			s->leader_key = e->key;
			s->leader_mod_revision = e->mod_revision;
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

/*
 * The leader's index, kept across rounds so that a round costs what
 * changed, not the size of the cluster: assignments and primaries per
 * member (from the keyspace's change log: a created assignment key adds
 * one, a deleted one takes one away), the journals whose keys changed
 * since they were planned (`dirty`), those planned and not stable yet
 * (`unstable`: balancing waits for none), those that wanted a member and
 * found none with capacity (`blocked`: planned again when capacity may
 * have come free), and a pass over every journal (`full`, resumed at
 * `cursor`) when members changed or the log no longer reaches back (then
 * the counts are rebuilt too). Owned by the allocator thread alone (no
 * lock of its own); it follows the keyspace under the keyspace's read
 * lock, and holds copies, never pointers into it.
 */
struct alloc_count {
	char *id;                       /* "<zone>#<suffix>", as member keys end */
	int64_t load, primaries;        /* assignment keys, and those of slot 0 */
};

struct alloc_index {
	int64_t rev;                    /* keyspace revision reflected; 0: rebuild */
	struct alloc_count *counts;     /* sorted by id */
	size_t n_counts, cap_counts;
	struct gaz_strset dirty, unstable, blocked;
	bool full;                      /* a pass over every journal is due */
	char *cursor;                   /* journal the full pass resumes at; NULL: the first */
	bool totals_stale;              /* items changed: recompute the slot totals */
	int64_t slots, primaried, max_replication;
	/* While following the change log: */
	const char *root;
	size_t root_len;
	bool freed;                     /* an assignment was deleted: capacity came free */
};

static void index_release(struct alloc_index *ix)
{
	for (size_t i = 0; i < ix->n_counts; i++)
		free(ix->counts[i].id);
	free(ix->counts);
	gaz_strset_release(&ix->dirty);
	gaz_strset_release(&ix->unstable);
	gaz_strset_release(&ix->blocked);
	free(ix->cursor);
	*ix = (struct alloc_index){0};
}

/* The count of member `id` (its first `len` bytes), created at zero when
 * `create`; NULL when absent (or out of memory). */
static struct alloc_count *index_count(struct alloc_index *ix, const char *id, size_t len, bool create)
{
	size_t lo = 0, hi = ix->n_counts;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strncmp(ix->counts[mid].id, id, len);
		if (!c && ix->counts[mid].id[len])
			c = 1;
		if (!c)
			return &ix->counts[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!create)
		return NULL;
	if (ix->n_counts == ix->cap_counts) {
		size_t ncap = ix->cap_counts ? ix->cap_counts * 2 : 64;
		void *p = realloc(ix->counts, ncap * sizeof(*ix->counts));
		if (!p)
			return NULL;
		ix->counts = p;
		ix->cap_counts = ncap;
	}
	char *copy = strndup(id, len);
	if (!copy)
		return NULL;
	memmove(&ix->counts[lo + 1], &ix->counts[lo], (ix->n_counts - lo) * sizeof(*ix->counts));
	ix->counts[lo] = (struct alloc_count){copy, 0, 0};
	ix->n_counts++;
	return &ix->counts[lo];
}

/* Follows one change of the keyspace (gaz_ks_change_fn): the journal an
 * item or assignment key names is dirty. Assignment keys are
 * "<root>/assign/<journal>#<zone>#<suffix>#<slot>" (journals.h). */
static void index_on_change(void *arg, const char *key, enum gaz_ks_change kind)
{
	struct alloc_index *ix = arg;
	const char *rest = key + ix->root_len;

	if (strncmp(key, ix->root, ix->root_len))
		return;
	if (gaz_ks_note_journal(&ix->dirty, ix->root, ix->root_len, key) < 0) {
		ix->rev = 0; /* rebuild next round */
		return;
	}
	if (!strncmp(rest, "/items/", 7)) {
		ix->totals_stale = true;
	} else if (!strncmp(rest, "/members/", 9)) {
		ix->full = true;
		free(ix->cursor);
		ix->cursor = NULL;
	} else if (!strncmp(rest, "/assign/", 8) && kind != GAZ_KS_UPDATED) {
		const char *h1 = strchr(rest + 8, '#'), *h3 = strrchr(rest + 8, '#');
		if (!h1 || h3 <= h1)
			return;
		struct alloc_count *c = index_count(ix, h1 + 1, (size_t)(h3 - h1 - 1), true);
		int64_t d = kind == GAZ_KS_CREATED ? 1 : -1;
		if (!c) {
			ix->rev = 0;
			return;
		}
		c->load += d;
		c->primaries += strcmp(h3 + 1, "0") ? 0 : d;
		ix->freed |= d < 0;
	}
}

/* index_rebuild recounts every assignment and schedules a full pass. */
static int index_rebuild(struct gaz_allocator *a, struct alloc_index *ix)
{
	char *prefix = NULL, id[512];
	size_t lo, hi;

	for (size_t i = 0; i < ix->n_counts; i++)
		ix->counts[i].load = ix->counts[i].primaries = 0;
	gaz_strset_clear(&ix->dirty);
	gaz_strset_clear(&ix->unstable);
	gaz_strset_clear(&ix->blocked);
	free(ix->cursor);
	ix->cursor = NULL;
	ix->full = true;
	ix->totals_stale = true;
	if (asprintf(&prefix, "%s/assign/", a->root) < 0)
		return GAZ_ENOMEM;
	gaz_keyspace_prefix(a->ks, prefix, &lo, &hi);
	free(prefix);
	for (size_t i = lo; i < hi; i++) {
		const struct gaz_ks_value *v = gaz_keyspace_at(a->ks, i)->decoded;
		int n = snprintf(id, sizeof(id), "%s#%s", v->zone, v->suffix);
		struct alloc_count *c = n > 0 && (size_t)n < sizeof(id) ? index_count(ix, id, (size_t)n, true) : NULL;
		if (!c)
			return GAZ_ENOMEM;
		c->load++;
		c->primaries += v->slot == 0;
	}
	return 0;
}

/* index_sync brings the index to the keyspace's revision (read lock
 * held): by the change log when it reaches back, else by a rebuild. */
static int index_sync(struct gaz_allocator *a, struct alloc_index *ix)
{
	int64_t rev = gaz_keyspace_revision(a->ks);

	ix->root = a->root;
	ix->root_len = strlen(a->root);
	ix->freed = false;
	if (!ix->rev || !gaz_keyspace_changes(a->ks, ix->rev, index_on_change, ix) || !ix->rev) {
		int rc = index_rebuild(a, ix);
		if (rc)
			return rc;
	}
	ix->rev = rev;
	/* Capacity came free, or members changed: the blocked journals may
	 * find a member now. */
	if ((ix->freed || ix->full) && ix->blocked.n) {
		size_t n = 0;
		char **names = gaz_strset_drain(&ix->blocked, &n);
		for (size_t i = 0; names && i < n; i++) {
			gaz_strset_add(&ix->dirty, names[i]);
			free(names[i]);
		}
		free(names);
	}
	return 0;
}

/* index_loads sets each member's load and primaries from the counts. */
static void index_loads(struct gaz_allocator *a, struct alloc_index *ix, struct alloc_state *s)
{
	size_t skip = strlen(a->root) + strlen("/members/");

	for (size_t i = 0; i < s->n; i++) {
		const char *id = s->m[i].key + skip;
		struct alloc_count *c = index_count(ix, id, strlen(id), false);
		s->m[i].load = c ? c->load : 0;
		s->m[i].primaries = c ? c->primaries : 0;
	}
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
static bool move_slot(struct gaz_allocator *a, const char *journal, const struct gaz_route *r, size_t i,
		      int64_t slot, struct gaz_txn *t)
{
	char *from = gaz_ks_assign_key(a->root, journal, r->zone[i], r->suffix[i], r->slot[i]);
	char *to = gaz_ks_assign_key(a->root, journal, r->zone[i], r->suffix[i], slot);
	const struct gaz_ks_entry *e = from ? gaz_keyspace_get(a->ks, from) : NULL;
	bool ok = false;

	if (e && to) {
		const ProtobufCMessage *m = gaz_ks_assign_value(e->decoded);
		uint8_t *val = NULL;
		size_t len = m ? protobuf_c_message_get_packed_size(m) : 0;
		if (len && (val = malloc(len)))
			protobuf_c_message_pack(m, val);
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
static bool guard_kept(struct gaz_allocator *a, const char *journal, const struct gaz_route *r,
		       const bool *keep, struct gaz_txn *t)
{
	for (size_t i = 0; i < r->n; i++) {
		char *key;
		if (!keep[i])
			continue;
		if (!(key = gaz_ks_assign_key(a->root, journal, r->zone[i], r->suffix[i], r->slot[i])))
			return false;
		gaz_txn_compare_mod(t, key, r->mod_revision[i]);
		free(key);
	}
	return true;
}

/* route_view fills `r` with the route of `journal`'s assignments (read
 * lock held), as gaz_route_build does but without an allocation: its
 * arrays are s->scratch's and its strings the keyspace's (valid while the
 * lock is held; never released with gaz_route_release), and without
 * endpoints, which allocation needs not. Clears the scratch's keep. */
static int route_view(struct gaz_allocator *a, struct alloc_state *s, const char *journal, int64_t desired,
		      struct gaz_route *r)
{
	struct plan_scratch *p = &s->scratch;
	char buf[512];
	size_t lo, hi;
	int n = snprintf(buf, sizeof(buf), "%s/assign/%s#", a->root, journal);

	if (n < 0 || (size_t)n >= sizeof(buf))
		return GAZ_EINVAL;
	gaz_keyspace_prefix(a->ks, buf, &lo, &hi);
	if (scratch_reserve(p, hi - lo, (size_t)(desired > 0 ? desired : 0)))
		return GAZ_ENOMEM;
	*r = (struct gaz_route){.zone = p->zone, .suffix = p->suffix, .slot = p->slot,
				.mod_revision = p->mod_revision, .consistent = p->consistent, .primary = -1};
	for (size_t i = lo; i < hi; i++) {
		const struct gaz_ks_entry *e = gaz_keyspace_at(a->ks, i);
		const struct gaz_ks_value *v = e->decoded;
		size_t j = r->n++;
		r->zone[j] = v->zone;
		r->suffix[j] = v->suffix;
		r->slot[j] = v->slot;
		r->mod_revision[j] = e->mod_revision;
		if (v->slot == 0)
			r->primary = (int)j;
	}
	for (size_t i = lo; i < hi; i++)
		p->vals[i - lo] = gaz_keyspace_at(a->ks, i)->decoded;
	for (size_t i = 0; i < r->n; i++) {
		r->consistent[i] = a->ops.consistent(a->arg, p->vals, r->n, i, r);
		p->keep[i] = false;
	}
	return 0;
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
static int plan_journal(struct gaz_allocator *a, struct alloc_state *s, const char *journal,
			const struct gaz_ks_entry *item, bool balance, struct gaz_txn *t, bool *stable_out,
			bool *blocked)
{
	const struct gaz_ks_value *iv = item->decoded;
	int64_t desired = a->ops.desired(a->arg, iv), kept = 0, consistent_kept = 0;
	int64_t max_slot = -1;
	struct gaz_route r;
	struct alloc_member **rm;
	size_t *order, n_order = 0, n_zones = 0;
	const char **zones;            /* zones of the route and of this plan's adds (borrowed) */
	uint64_t journal_hash = fnv1a(FNV_BASIS, journal);
	bool *keep, *taken, changed = false, stable;

	*stable_out = false;
	*blocked = false;
	if (route_view(a, s, journal, desired, &r))
		return 0;
	keep = s->scratch.keep;
	rm = s->scratch.rm;
	order = s->scratch.order;
	zones = s->scratch.zones;
	taken = s->scratch.taken;
	/* Room in `t` for the most this journal may add to it: a compare and
	 * an op per member removed or added, one compare per member kept, and
	 * two slot moves (two compares, four ops). */
	size_t most = 2 * (r.n + (size_t)(desired > 0 ? desired : 0)) + 4;
	if (gaz_txn_ops(t) && (gaz_txn_ops(t) + most > TXN_MAX_OPS ||
			       gaz_txn_compares(t) + most + 1 > TXN_MAX_OPS))
		return -1;
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
	*stable_out = stable;
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
		if (!guarded && !guard_kept(a, journal, &r, keep, t))
			break;
		guarded = true;
		if ((key = gaz_ks_assign_key(a->root, journal, r.zone[i], r.suffix[i], r.slot[i]))) {
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
		if (!m) {
			*blocked = true;
			break;
		}
		taken[m - s->m] = true;
		zones[n_zones++] = m->zone;
		m->load++;
		m->primaries += max_slot < 0;
		key = gaz_ks_assign_key(a->root, journal, m->zone, m->suffix, ++max_slot);
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
		    (key = gaz_ks_assign_key(a->root, journal, under->zone, under->suffix, ++max_slot))) {
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
		    move_slot(a, journal, &r, (size_t)r.primary, ++max_slot, t) &&
		    move_slot(a, journal, &r, to, 0, t)) {
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
		if (move_slot(a, journal, &r, pick, 0, t)) {
			rm[pick]->primaries++;
			changed = true;
			s->packed++; /* Gazette counts a promotion as a pack */
		}
	}
	memset(taken, 0, s->n * sizeof(*taken));
	return changed ? 1 : 0;
}

/* plan_orphan plans deleting the assignments of `journal`, which has no
 * item (its spec was deleted), as far as `t` has room; the rest follow
 * in later rounds (each deletion makes the journal dirty again). Returns
 * 1 if any op was added, -1 when `t` holds ops and has no room. */
static int plan_orphan(struct gaz_allocator *a, struct alloc_state *s, const char *journal, struct gaz_txn *t)
{
	char *prefix = NULL;
	size_t lo, hi;
	int rc = 0;

	if (asprintf(&prefix, "%s/assign/%s#", a->root, journal) < 0)
		return 0;
	gaz_keyspace_prefix(a->ks, prefix, &lo, &hi);
	free(prefix);
	if (hi > lo && gaz_txn_ops(t) && (gaz_txn_ops(t) + 2 > TXN_MAX_OPS || gaz_txn_compares(t) + 3 > TXN_MAX_OPS))
		return -1;
	for (size_t i = lo; i < hi && gaz_txn_ops(t) + 1 < TXN_MAX_OPS && gaz_txn_compares(t) + 2 < TXN_MAX_OPS; i++) {
		const struct gaz_ks_entry *e = gaz_keyspace_at(a->ks, i);
		gaz_txn_compare_mod(t, e->key, e->mod_revision);
		gaz_txn_delete(t, e->key);
		s->removed++;
		rc = 1;
	}
	return rc;
}

/* Commits one planned transaction (no keyspace lock held). Returns 1 when
 * it applied (raising *revision to its revision), 0 when it lost a race
 * (a compare failed: the next round sees why), -1 when etcd failed it. */
static int run_txn(struct gaz_allocator *a, struct gaz_txn *t, int64_t *revision)
{
	struct gaz_status st = {0};
	int64_t rev = 0;
	bool ok = false;

	if (gaz_txn_commit(a->etcd, t, &ok, &rev, &st)) {
		gaz_warn("allocator transaction failed", "items=%s err=%s", a->what, st.msg);
		return -1;
	}
	if (!ok) {
		gaz_debug("allocator transaction lost a race", "items=%s", a->what);
		return 0;
	}
	/* Only an applied transaction's revision is one of our prefix: a
	 * failed one answers etcd's current revision, which writes elsewhere
	 * in a shared etcd may have moved past anything our keyspace sees. */
	if (rev > *revision)
		*revision = rev;
	return 1;
}

/* Transactions per round at most: the next round plans from a keyspace
 * holding all of them (allocate_round). */
#define ROUND_TXNS 64

/* One round's planning: its transactions, the journals planned into each
 * (planned again next round if it does not apply), and every journal
 * planned so far (none is planned twice in a round: the second plan would
 * not see the first's writes). */
struct alloc_round {
	struct gaz_allocator *a;
	struct alloc_state *s;
	struct alloc_index *ix;
	struct gaz_txn txns[ROUND_TXNS];
	struct gaz_strset journals[ROUND_TXNS];
	struct gaz_strset planned;
	int n;
	bool open;
};

/* Closes the open transaction: kept (guarded by the leader's member key)
 * when it holds ops. */
static void round_close(struct alloc_round *r)
{
	if (!r->open)
		return;
	r->open = false;
	if (gaz_txn_ops(&r->txns[r->n])) {
		gaz_txn_compare_mod(&r->txns[r->n], r->s->leader_key, r->s->leader_mod_revision);
		r->n++;
	} else {
		gaz_txn_release(&r->txns[r->n]);
		gaz_strset_release(&r->journals[r->n]);
	}
}

/* round_plan plans `journal` (`item` its spec entry, NULL when it has
 * none) into the open transaction, opening the next one when it is full,
 * and records whether it is stable and whether it is blocked. Returns
 * false, planning nothing, when the round has no transaction left. */
static bool round_plan(struct alloc_round *r, const char *journal, const struct gaz_ks_entry *item, bool balance)
{
	struct alloc_index *ix = r->ix;

	if (gaz_strset_has(&r->planned, journal))
		return true;
	for (;;) {
		bool stable = false, blocked = false;
		int rc;
		if (!r->open) {
			if (r->n == ROUND_TXNS)
				return false;
			gaz_txn_init(&r->txns[r->n]);
			r->journals[r->n] = (struct gaz_strset){0};
			r->open = true;
		}
		rc = item ? plan_journal(r->a, r->s, journal, item, balance, &r->txns[r->n], &stable, &blocked)
			  : plan_orphan(r->a, r->s, journal, &r->txns[r->n]);
		if (rc < 0) {
			round_close(r);
			continue;
		}
		if (rc > 0)
			gaz_strset_add(&r->journals[r->n], journal);
		gaz_strset_add(&r->planned, journal);
		if (item && !stable)
			gaz_strset_add(&ix->unstable, journal);
		else
			gaz_strset_remove(&ix->unstable, journal);
		if (blocked)
			gaz_strset_add(&ix->blocked, journal);
		else
			gaz_strset_remove(&ix->blocked, journal);
		return true;
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* round_dirty plans the dirty journals, in name order; those the round
 * has no room for stay dirty. */
static void round_dirty(struct alloc_round *r)
{
	size_t n = 0, i = 0;
	char **names = gaz_strset_drain(&r->ix->dirty, &n);

	if (!names)
		return;
	qsort(names, n, sizeof(*names), cmp_str);
	for (; i < n; i++) {
		const struct gaz_ks_entry *item = gaz_ks_item(r->a->ks, r->a->root, names[i]);
		if (!round_plan(r, names[i], item, false))
			break;
		free(names[i]);
	}
	for (; i < n; i++) {
		gaz_strset_add(&r->ix->dirty, names[i]);
		free(names[i]);
	}
	free(names);
}

/* round_full continues the pass over every journal from the cursor; at
 * its end it plans the orphaned assignments too (those of journals with
 * no item, which only a rebuild can have missed). `balance`: the pass is
 * a balancing one (it ends once the round's moves are spent) and keeps no
 * cursor. */
static void round_full(struct alloc_round *r, size_t lo, size_t hi, bool balance)
{
	struct gaz_allocator *a = r->a;
	struct alloc_index *ix = r->ix;
	size_t i = lo;

	if (!balance && ix->cursor) {
		char *key = gaz_ks_item_key(a->root, ix->cursor);
		size_t e;
		if (key)
			gaz_keyspace_prefix(a->ks, key, &i, &e);
		free(key);
		i = i < lo ? lo : i;
	}
	for (; i < hi; i++) {
		const struct gaz_ks_entry *e = gaz_keyspace_at(a->ks, i);
		const char *journal = ((const struct gaz_ks_value *)e->decoded)->item;
		if (balance && r->s->moves >= r->s->max_moves)
			return;
		if (!round_plan(r, journal, e, balance)) {
			if (!balance) {
				free(ix->cursor);
				ix->cursor = strdup(journal);
				if (!ix->cursor)
					ix->rev = 0;
			}
			return;
		}
	}
	if (balance)
		return;
	char *prefix = NULL;
	size_t alo, ahi;
	if (asprintf(&prefix, "%s/assign/", a->root) < 0)
		return;
	gaz_keyspace_prefix(a->ks, prefix, &alo, &ahi);
	free(prefix);
	const char *last = NULL;
	for (size_t k = alo; k < ahi; k++) {
		const char *journal = ((const struct gaz_ks_value *)gaz_keyspace_at(a->ks, k)->decoded)->item;
		if (last && !strcmp(last, journal))
			continue;
		last = journal;
		if (!gaz_ks_item(a->ks, a->root, journal) && !round_plan(r, journal, NULL, false))
			return; /* the pass stays due, past its last journal */
	}
	ix->full = false;
	free(ix->cursor);
	ix->cursor = NULL;
}

/* One allocation round, on the leader (others only learn they are not):
 * brings the index to the keyspace, then plans under the keyspace read
 * lock (every pointer into the keyspace is valid only while it is held;
 * transactions copy what they keep) up to ROUND_TXNS transactions, each of
 * several journals, and commits them without it. Each also requires the
 * leader's member key unchanged. Planned, in this order: the dirty
 * journals; the full pass, if due; and, only when neither planned
 * anything and every journal is stable, balancing moves over every
 * journal. So moves never interleave with a departure's repairs, and are
 * planned from loads that count no surplus member still waiting for its
 * removal (which would make its member look heavier than it is and shed
 * it twice). A leader's round over a revision it has not converged on yet
 * (`*converged_rev`) counts as one of Gazette's converge iterations when
 * every transaction went through, as Gazette counts one per revision.
 * Returns the number of transactions issued; *written_rev is raised to
 * the last applied one's revision (the next round must see every one:
 * planned from a view lacking some, it would add their members again, at
 * other slots, since an add compares only the member's key). */
static int allocate_round(struct gaz_allocator *a, struct alloc_index *ix, int64_t rev, int64_t *converged_rev,
			  int64_t *written_rev)
{
	struct alloc_state s = {0};
	struct alloc_round r = {.a = a, .s = &s, .ix = ix};
	char *prefix = NULL;
	size_t lo = 0, hi = 0;
	int64_t t0 = gaz_mono_ns(), solve_ns = 0;
	bool ok = true;

	gaz_keyspace_rlock(a->ks);
	if (collect_members(a, &s) || asprintf(&prefix, "%s/items/", a->root) < 0)
		goto unlock;
	if (!s.leader) {
		/* A member that leads later rebuilds from what it sees then. */
		if (ix->rev)
			index_release(ix);
		goto unlock;
	}
	if (index_sync(a, ix))
		goto unlock;
	index_loads(a, ix, &s);
	if (!(s.scratch.taken = calloc(s.n + 1, sizeof(bool))))
		goto unlock;
	gaz_keyspace_prefix(a->ks, prefix, &lo, &hi);
	if (ix->totals_stale) {
		ix->slots = ix->primaried = ix->max_replication = 0;
		for (size_t i = lo; i < hi; i++) {
			int64_t d = a->ops.desired(a->arg, gaz_keyspace_at(a->ks, i)->decoded);
			ix->slots += d;
			ix->primaried += d > 0;
			ix->max_replication = d > ix->max_replication ? d : ix->max_replication;
		}
		ix->totals_stale = false;
		/* Exiting members shed by the totals: their journals replan. */
		for (size_t i = 0; i < s.n && !ix->full; i++)
			if (s.m[i].exiting)
				ix->full = true;
	}
	s.slots = ix->slots;
	shed_exiting(&s, s.slots, ix->max_replication);
	set_shares(&s, ix->primaried);
	s.max_moves = s.slots / 100 > ROUND_MOVES ? s.slots / 100 : ROUND_MOVES;
	/* A full pass from its start sees every journal: it rebuilds which
	 * are unstable. */
	if (ix->full && !ix->cursor)
		gaz_strset_clear(&ix->unstable);
	round_dirty(&r);
	if (ix->full)
		round_full(&r, lo, hi, false);
	round_close(&r);
	if (r.n == 0 && !ix->full && !ix->dirty.n && !ix->unstable.n) {
		/* Nothing was written: the journals planned above may be
		 * planned again, now for balance. */
		gaz_strset_clear(&r.planned);
		round_full(&r, lo, hi, true);
		round_close(&r);
	}
	solve_ns = gaz_mono_ns() - t0;
unlock:
	gaz_keyspace_runlock(a->ks);
	for (int i = 0; i < r.n; i++) {
		int rc = run_txn(a, &r.txns[i], written_rev);
		ok &= rc >= 0;
		gaz_txn_release(&r.txns[i]);
		/* Not applied: its journals are planned again next round. */
		size_t n = 0;
		char **names = rc == 1 ? NULL : gaz_strset_drain(&r.journals[i], &n);
		for (size_t k = 0; k < n; k++) {
			gaz_strset_add(&ix->dirty, names[k]);
			free(names[k]);
		}
		free(names);
		gaz_strset_release(&r.journals[i]);
	}
	gaz_strset_release(&r.planned);
	if (s.leader) {
		if (a->ops.round_ops)
			a->ops.round_ops(a->arg, s.added, s.packed, s.removed);
		if (ok && rev != *converged_rev) {
			*converged_rev = rev;
			if (a->ops.converged)
				a->ops.converged(a->arg, (double)solve_ns / 1e9, (int64_t)s.n, (int64_t)(hi - lo),
						 s.slots);
		}
	}
	free(prefix);
	free(s.m);
	scratch_release(&s.scratch);
	return r.n;
}

static bool stopping(struct gaz_allocator *a)
{
	bool stop;

	pthread_mutex_lock(&a->mu);
	stop = a->stop;
	pthread_mutex_unlock(&a->mu);
	return stop;
}

static void *allocator_thread(void *arg)
{
	struct gaz_allocator *a = arg;
	struct alloc_index ix = {0};
	int64_t converged_rev = 0, idle_rev = -1;

	pthread_setname_np(pthread_self(), "gaz-allocator");
	pthread_mutex_lock(&a->mu);
	while (!a->stop) {
		struct timespec ts = gaz_abstime_of(gaz_deadline_in(1000));
		int64_t rev;
		int txns;
		while (!a->wake && !a->stop)
			if (pthread_cond_timedwait(&a->cond, &a->mu, &ts))
				break;
		a->wake = false;
		if (a->stop)
			break;
		pthread_mutex_unlock(&a->mu);
		rev = gaz_keyspace_revision_now(a->ks);
		/* A round is a function of the keyspace alone: one that planned
		 * nothing at this revision would plan nothing again, so an idle
		 * cluster costs no round at all. */
		if (rev == idle_rev) {
			pthread_mutex_lock(&a->mu);
			continue;
		}
		int64_t written = 0;
		txns = allocate_round(a, &ix, rev, &converged_rev, &written);
		if (!txns)
			idle_rev = rev;
		/* After writing, wait for all our own applied writes before
		 * planning again, so the next round does not repeat them; when
		 * none applied (lost races), for the change that beat us, a
		 * while. */
		while (written && !stopping(a) && gaz_keyspace_wait_revision(a->ks, written, gaz_deadline_in(1000)))
			;
		if (txns && !written)
			gaz_keyspace_wait_revision(a->ks, rev + 1, gaz_deadline_in(2000));
		pthread_mutex_lock(&a->mu);
		if (txns)
			a->wake = true;
	}
	pthread_mutex_unlock(&a->mu);
	index_release(&ix);
	return NULL;
}

struct gaz_allocator *gaz_allocator_start(const struct gaz_allocator_cfg *cfg)
{
	struct gaz_allocator *a = calloc(1, sizeof(*a));
	pthread_condattr_t ca;

	if (!a)
		return NULL;
	a->etcd = cfg->etcd;
	a->ks = cfg->ks;
	a->ops = cfg->ops;
	a->arg = cfg->arg;
	a->root = strdup(cfg->root);
	a->member_key = strdup(cfg->member_key);
	a->what = strdup(cfg->what ? cfg->what : "item");
	if (!a->root || !a->member_key || !a->what) {
		free(a->root), free(a->member_key), free(a->what), free(a);
		return NULL;
	}
	pthread_mutex_init(&a->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&a->thread, NULL, allocator_thread, a)) {
		pthread_cond_destroy(&a->cond);
		pthread_mutex_destroy(&a->mu);
		free(a->root), free(a->member_key), free(a->what), free(a);
		return NULL;
	}
	return a;
}

void gaz_allocator_wake(struct gaz_allocator *a)
{
	pthread_mutex_lock(&a->mu);
	a->wake = true;
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->mu);
}

void gaz_allocator_stop(struct gaz_allocator *a)
{
	bool join;

	if (!a)
		return;
	pthread_mutex_lock(&a->mu);
	a->stop = true;
	join = !a->joined;
	a->joined = true;
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->mu);
	if (join)
		pthread_join(a->thread, NULL);
}

void gaz_allocator_free(struct gaz_allocator *a)
{
	if (!a)
		return;
	gaz_allocator_stop(a);
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->mu);
	free(a->root), free(a->member_key), free(a->what);
	free(a);
}
