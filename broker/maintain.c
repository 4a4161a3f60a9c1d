/*
 * maintain.c - the broker's maintenance loop (one thread): it keeps the
 * set of local replicas in line with this broker's assignments and
 * refreshes each replica's fragment index from its stores every
 * refresh_interval (facts §5.3). Pulses, which synchronise routes and
 * close idle fragments, run on their own thread (pulse.c).
 */
#include "broker/broker.h"

#include <stdlib.h>
#include <string.h>

#include "broker/persister.h"
#include "broker/replica.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/strset.h"

#define MAINTAIN_TICK_MS 250

/* Wakes the maintenance thread, and the allocator too with `alloc`. */
static void wake(struct gaz_broker *b, bool alloc)
{
	pthread_mutex_lock(&b->mu);
	b->maintain_wake = true;
	b->alloc_wake = b->alloc_wake || alloc;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->mu);
	if (alloc)
		gaz_pulse_kick(b); /* a keyspace change, or stopping */
}

void gaz_broker_kick(struct gaz_broker *b)
{
	wake(b, true);
}

void gaz_maintain_reconcile_soon(struct gaz_broker *b)
{
	atomic_store(&b->reconcile_asked, true);
	wake(b, false);
}

/* A local assignment: journal, the item's create revision, and the
 * route's primary member ("zone#suffix"; NULL while slot 0 is empty). */
struct local_assign {
	char *journal;
	int64_t create_revision;
	bool primary;
	char *route_primary;
};

static const struct gaz_ks_value *assign_at(struct gaz_keyspace *ks, size_t i)
{
	return gaz_keyspace_at(ks, i)->decoded;
}

/* The member holding slot 0 of the assignments of `journal` around index
 * i of [lo, hi) (assignment keys sort by journal, so one journal's are
 * adjacent). Returns a malloc'd "zone#suffix" or NULL. Read lock held. */
static char *slot0_member(struct gaz_keyspace *ks, size_t lo, size_t hi, size_t i,
			  const char *journal)
{
	size_t a = i, z = i;
	char *out = NULL;

	while (a > lo && !strcmp(assign_at(ks, a - 1)->journal, journal))
		a--;
	while (z + 1 < hi && !strcmp(assign_at(ks, z + 1)->journal, journal))
		z++;
	for (size_t k = a; k <= z; k++) {
		const struct gaz_ks_value *v = assign_at(ks, k);
		if (v->slot == 0 && asprintf(&out, "%s#%s", v->zone, v->suffix) < 0)
			out = NULL;
	}
	return out;
}

static int assign_cmp(const void *x, const void *y);

/* local_assign_of fills `out` with this broker's assignment of `journal`
 * (keys [lo, hi) are all assignments; i is any index of the journal's own
 * within them) when the journal has one and an item. Read lock held. */
static bool local_assign_of(struct gaz_broker *b, size_t lo, size_t hi, size_t i, const char *journal,
			    struct local_assign *out)
{
	const struct gaz_ks_value *v = gaz_keyspace_at(b->ks, i)->decoded;
	const struct gaz_ks_entry *item;

	if (!gaz_broker_is_local(b, v->zone, v->suffix) || !(item = gaz_ks_item(b->ks, b->root, journal)))
		return false;
	out->journal = strdup(journal);
	out->create_revision = item->create_revision;
	out->primary = v->slot == 0;
	out->route_primary = slot0_member(b->ks, lo, hi, i, journal);
	return out->journal != NULL;
}

static void local_assign_free(struct local_assign *a)
{
	free(a->journal);
	free(a->route_primary);
}

/* Our assignments, kept between passes: from a scan of every assignment
 * when the keyspace's change log does not reach back to the revision
 * they reflect, else by recomputing only the journals whose keys changed
 * since (so a broker's pass does not cost every assignment in the cluster
 * on each revision). */
struct local_set {
	struct local_assign *as;  /* sorted by journal */
	size_t n;
	int64_t rev;              /* keyspace revision reflected; 0: none */
	struct gaz_strset changed;
	const char *root;
	size_t root_len;
};

/* Collects the journals of changed items and assignments (gaz_ks_change_fn). */
static void local_on_change(void *arg, const char *key, enum gaz_ks_change kind)
{
	struct local_set *ls = arg;
	(void)kind;

	if (gaz_ks_note_journal(&ls->changed, ls->root, ls->root_len, key) < 0)
		ls->rev = 0; /* not followed: rescan */
}

static int cmp_cstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* local_sync brings `ls` to the keyspace (read lock taken inside). */
static void local_sync(struct gaz_broker *b, struct local_set *ls)
{
	char *prefix = NULL;
	size_t lo, hi;

	if (asprintf(&prefix, "%s/assign/", b->root) < 0)
		return;
	ls->root = b->root;
	ls->root_len = strlen(b->root);
	gaz_keyspace_rlock(b->ks);
	gaz_keyspace_prefix(b->ks, prefix, &lo, &hi);
	int64_t rev = gaz_keyspace_revision(b->ks);
	gaz_strset_clear(&ls->changed);
	bool follow = ls->rev && gaz_keyspace_changes(b->ks, ls->rev, local_on_change, ls) && ls->rev;
	if (!follow) {
		struct local_assign *as = calloc(hi - lo + 1, sizeof(*as));
		size_t n = 0;
		for (size_t i = lo; as && i < hi; i++) {
			const struct gaz_ks_value *v = gaz_keyspace_at(b->ks, i)->decoded;
			n += local_assign_of(b, lo, hi, i, v->journal, &as[n]);
		}
		if (as) {
			for (size_t i = 0; i < ls->n; i++)
				local_assign_free(&ls->as[i]);
			free(ls->as);
			ls->as = as;
			ls->n = n;
			ls->rev = rev;
		}
	} else if (ls->changed.n) {
		size_t nc = 0, w = 0;
		char **names = gaz_strset_drain(&ls->changed, &nc);
		struct local_assign *as = names ? calloc(ls->n + nc + 1, sizeof(*as)) : NULL;
		if (!as) {
			ls->rev = 0;
		} else {
			qsort(names, nc, sizeof(*names), cmp_cstr);
			/* Keep the unchanged ones, recompute the changed. */
			for (size_t i = 0; i < ls->n; i++) {
				if (bsearch(&ls->as[i].journal, names, nc, sizeof(*names), cmp_cstr))
					local_assign_free(&ls->as[i]);
				else
					as[w++] = ls->as[i];
			}
			for (size_t k = 0; k < nc; k++) {
				char *jp = NULL;
				size_t jlo, jhi;
				if (asprintf(&jp, "%s/assign/%s#", b->root, names[k]) < 0)
					continue;
				gaz_keyspace_prefix(b->ks, jp, &jlo, &jhi);
				free(jp);
				for (size_t i = jlo; i < jhi; i++)
					if (local_assign_of(b, lo, hi, i, names[k], &as[w])) {
						w++;
						break;
					}
			}
			free(ls->as);
			ls->as = as;
			ls->n = w;
			ls->rev = rev;
		}
		for (size_t k = 0; k < nc; k++)
			free(names[k]);
		free(names);
	} else {
		ls->rev = rev;
	}
	gaz_keyspace_runlock(b->ks);
	free(prefix);
	if (ls->n)
		qsort(ls->as, ls->n, sizeof(*ls->as), assign_cmp);
}

static void local_release(struct local_set *ls)
{
	for (size_t i = 0; i < ls->n; i++)
		local_assign_free(&ls->as[i]);
	free(ls->as);
	gaz_strset_release(&ls->changed);
}

static int assign_cmp(const void *x, const void *y)
{
	return strcmp(((const struct local_assign *)x)->journal, ((const struct local_assign *)y)->journal);
}

/* find_assign: `a` is sorted by journal (reconcile sorts it). */
static struct local_assign *find_assign(struct local_assign *a, size_t n, const char *journal)
{
	struct local_assign key = {.journal = (char *)journal};

	return n ? bsearch(&key, a, n, sizeof(*a), assign_cmp) : NULL;
}

/* note_route_primary records the route's primary as this replica last
 * saw it. Once it is no longer the member under which the replica's
 * fragments completed (killed, exited, or moved), those fragments may
 * exist nowhere else: the persister stops delaying them. */
static void note_route_primary(struct gaz_broker *b, struct gaz_replica *r, const char *now)
{
	if (r->route_primary && now && !strcmp(r->route_primary, now))
		return;
	if (r->route_primary)
		gaz_persister_expedite(b->persister, r);
	free(r->route_primary);
	r->route_primary = now ? strdup(now) : NULL;
}

static void reconcile(struct gaz_broker *b, struct local_set *ls)
{
	struct gaz_replica **rs = NULL;
	size_t na, nr;
	struct local_assign *as;

	local_sync(b, ls);
	as = ls->as;
	na = ls->n;
	nr = gaz_replicas_snapshot(b, &rs);

	for (size_t i = 0; i < nr; i++) {
		struct local_assign *a = find_assign(as, na, rs[i]->journal);
		/* Not primary any more, or never seen primary here but holding
		 * a pipeline an append opened while it briefly was. */
		bool demoted = a && !a->primary && (rs[i]->primary || atomic_load(&rs[i]->pipelined));
		if (demoted && !rs[i]->primary)
			gaz_info("closing a pipeline opened while briefly primary", "journal=%s",
				 rs[i]->journal);
		if (!a || a->create_revision != rs[i]->create_revision || demoted) {
			gaz_replica_teardown(rs[i]);
			gaz_replica_unref(rs[i]);
			continue;
		}
		if (a->primary && !rs[i]->primary) {
			/* Promoted: the previous primary persisted what only it
			 * held before letting go (append.c), so list the store now
			 * rather than at the next refresh interval. */
			rs[i]->primary = true;
			rs[i]->next_refresh_ns = 0;
			/* The pulse thread may have looked at this journal while
			 * the replica was not primary yet; kicked, it looks again,
			 * so the route the allocator changed gets its consistency
			 * write now (else only at the periodic pulse, leaving the
			 * journal under-replicated to the operator until then). */
			gaz_pulse_kick_journal(b, rs[i]->journal);
		}
		note_route_primary(b, rs[i], a->route_primary);
		gaz_replica_unref(rs[i]);
	}
	/* An exiting broker still takes up what the allocator gives it: a
	 * member not yet shed may take journals of an older exiting one. */
	for (size_t i = 0; i < na && !atomic_load(&b->stopping); i++) {
		struct gaz_replica *r = gaz_replica_get(b, as[i].journal);
		if (!r && (r = gaz_replica_new(b, as[i].journal, as[i].create_revision))) {
			r->primary = as[i].primary;
			r->route_primary = as[i].route_primary ? strdup(as[i].route_primary) : NULL;
			if (r->primary)
				gaz_pulse_kick_journal(b, r->journal); /* a new primary pulses at once */
			continue; /* table reference only */
		}
		gaz_replica_unref(r);
	}
	free(rs);
}

/* refresh_due: whether `r`'s listing is due at `now`: its refresh
 * interval has passed, or a reader waiting at a hole hurries listings
 * (unless the store just failed: then the failure's pace holds). */
static bool refresh_due(struct gaz_replica *r, int64_t now)
{
	bool hurry = now < atomic_load(&r->hole_refresh_until_ns) && !r->last_refresh_failed &&
		     now >= r->last_refresh_ns + GAZ_HOLE_REFRESH_MS * GAZ_NS_PER_MS;

	return now >= r->next_refresh_ns || hurry;
}

/* refresh lists `r`'s stores (it is due) and schedules the next listing. */
static void refresh(struct gaz_replica *r, const Protocol__JournalSpec *spec, int64_t now)
{
	struct gaz_status st = {0};
	int64_t every = spec->fragment && spec->fragment->refresh_interval
				? spec->fragment->refresh_interval->seconds * GAZ_NS_PER_S
				: 60 * GAZ_NS_PER_S;

	r->next_refresh_ns = now + (every > 0 ? every : GAZ_NS_PER_S);
	r->last_refresh_ns = now;
	r->last_refresh_failed = gaz_replica_refresh(r, spec, &st) != 0;
	if (r->last_refresh_failed) {
		/* Retry no faster than every 5 s, and say so once per failure. */
		if (every < 5 * GAZ_NS_PER_S)
			r->next_refresh_ns = now + 5 * GAZ_NS_PER_S;
		gaz_warn("fragment index refresh failed", "journal=%s err=%s", r->journal, st.msg);
	}
}

void gaz_replica_hurry_refresh(struct gaz_replica *r, int64_t until_ns)
{
	long long was = atomic_load(&r->hole_refresh_until_ns);

	while (was < until_ns &&
	       !atomic_compare_exchange_weak(&r->hole_refresh_until_ns, &was, (long long)until_ns))
		;
	if (was < until_ns) {
		atomic_store(&r->b->refresh_hurried, true);
		wake(r->b, false);
	}
}

/* What the maintenance thread remembers between passes. */
struct maintain_state {
	struct local_set local;   /* our assignments */
	int64_t reconciled_rev;   /* keyspace revision of the last reconcile */
	size_t reconciled_n;      /* replicas after it */
	int64_t refresh_due_ns;   /* earliest next listing of any replica */
};

/* One pass: reconcile the replicas with our assignments when the keyspace
 * or the replica table moved since the last pass (an idle broker scans
 * no assignments), then, once the earliest listing is due (or a reader
 * waiting at a hole hurries one), list the stores of each replica that is
 * due. */
static void tick(struct gaz_broker *b, struct maintain_state *ms)
{
	struct gaz_replica **rs = NULL;
	size_t n;
	int64_t rev, now;
	bool reconciled = false;

	rev = gaz_keyspace_revision_now(b->ks);
	pthread_mutex_lock(&b->mu);
	n = b->n_replicas;
	pthread_mutex_unlock(&b->mu);
	if (!atomic_load(&b->stopping) && (atomic_exchange(&b->reconcile_asked, false) ||
					    rev != ms->reconciled_rev || n != ms->reconciled_n)) {
		reconcile(b, &ms->local);
		pthread_mutex_lock(&b->mu);
		ms->reconciled_n = b->n_replicas;
		pthread_mutex_unlock(&b->mu);
		ms->reconciled_rev = rev;
		reconciled = true;
	}
	now = gaz_mono_ns();
	if (!reconciled && now < ms->refresh_due_ns && !atomic_exchange(&b->refresh_hurried, false))
		return;
	n = gaz_replicas_snapshot(b, &rs);
	ms->refresh_due_ns = now + 60 * GAZ_NS_PER_S;
	for (size_t i = 0; i < n; i++) {
		Protocol__JournalSpec *spec = NULL;
		if (!atomic_load(&b->stopping) && refresh_due(rs[i], now) &&
		    (spec = gaz_ks_spec_copy(b->ks, b->root, rs[i]->journal)))
			refresh(rs[i], spec, gaz_mono_ns());
		if (spec)
			protobuf_c_message_free_unpacked(&spec->base, NULL);
		/* A reader's hurry lasts past this listing: keep coming back. */
		int64_t due = now < atomic_load(&rs[i]->hole_refresh_until_ns)
				      ? now + GAZ_HOLE_REFRESH_MS * GAZ_NS_PER_MS
				      : rs[i]->next_refresh_ns;
		if (due < ms->refresh_due_ns)
			ms->refresh_due_ns = due;
		gaz_replica_unref(rs[i]);
	}
	free(rs);
}

void *gaz_maintain_thread(void *arg)
{
	struct gaz_broker *b = arg;
	struct maintain_state ms = {.reconciled_rev = -1};

	while (!atomic_load(&b->stopping)) {
		struct timespec ts = gaz_abstime_of(gaz_deadline_in(MAINTAIN_TICK_MS));
		tick(b, &ms);
		pthread_mutex_lock(&b->mu);
		while (!b->maintain_wake && !atomic_load(&b->stopping))
			if (pthread_cond_timedwait(&b->cond, &b->mu, &ts))
				break;
		b->maintain_wake = false;
		pthread_mutex_unlock(&b->mu);
	}
	local_release(&ms.local);
	return NULL;
}
