/*
 * maintain.c - the broker's maintenance loop (one thread): it keeps the
 * set of local replicas in line with this broker's assignments and
 * refreshes each replica's fragment index from its stores every
 * refresh_interval (facts §5.3). Pulses, which synchronise routes and
 * close idle fragments, run on their own thread (pulse.c).
 *
 * Work is per journal and only when due: a keyspace change reconciles the
 * journals whose keys it touched (the keyspace's change log names them),
 * a look asked for (gaz_maintain_look: a replica the resolver created, a
 * reader waiting at a hole, an append that opened a pipeline) reconciles
 * that journal, and listings come off a queue ordered by due time. Every
 * replica and assignment is looked at only when the change log does not
 * reach back.
 *
 * Locks: the replica fields marked "maintenance thread only" are touched
 * by this thread alone. maintain_mu guards maintain_journals and
 * maintain_look_all only and is a leaf lock (a look may be asked with a
 * replica's mu held); b->mu guards the wake flag, as for the allocator.
 */
#include "broker/broker.h"

#include <stdlib.h>
#include <string.h>

#include "broker/persister.h"
#include "broker/replica.h"
#include "common/clock.h"
#include "common/dueq.h"
#include "common/log.h"
#include "common/strset.h"
#include "keyspace/allocator.h"

/* The longest sleep between passes: a wake-up or a due listing comes
 * sooner in all but an idle broker's life. */
#define MAINTAIN_IDLE_MS 5000

/* Wakes the maintenance thread, and the allocator too with `alloc`. */
static void wake(struct gaz_broker *b, bool alloc)
{
	struct gaz_allocator *a = alloc ? atomic_load(&b->allocator) : NULL;

	pthread_mutex_lock(&b->mu);
	b->maintain_wake = true;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->mu);
	if (a)
		gaz_allocator_wake(a);
	if (alloc)
		gaz_pulse_kick(b); /* a keyspace change, or stopping */
}

void gaz_broker_kick(struct gaz_broker *b)
{
	wake(b, true);
}

void gaz_maintain_look(struct gaz_broker *b, const char *journal)
{
	pthread_mutex_lock(&b->maintain_mu);
	if (gaz_strset_add(&b->maintain_journals, journal) < 0)
		b->maintain_look_all = true; /* out of memory: look at every one */
	pthread_mutex_unlock(&b->maintain_mu);
	wake(b, false);
}

/* A local assignment: journal, the item's create revision, and the
 * route's primary member ("zone#suffix"; NULL while slot 0 is empty). */
struct local_assign {
	char *journal;
	int64_t create_revision;
	bool primary;
	char *route_primary;
	bool gone;  /* no longer ours: dropped at local_sync's merge */
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

	while (a > lo && !strcmp(assign_at(ks, a - 1)->item, journal))
		a--;
	while (z + 1 < hi && !strcmp(assign_at(ks, z + 1)->item, journal))
		z++;
	for (size_t k = a; k <= z; k++) {
		const struct gaz_ks_value *v = assign_at(ks, k);
		if (v->slot == 0 && asprintf(&out, "%s#%s", v->zone, v->suffix) < 0)
			out = NULL;
	}
	return out;
}

static int assign_cmp(const void *x, const void *y);
static struct local_assign *find_assign(struct local_assign *a, size_t n, const char *journal);

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

/* assign_of_journal fills `out` with this broker's assignment of
 * `journal` (keys [lo, hi) are all assignments) when it has one. Read
 * lock held. */
static bool assign_of_journal(struct gaz_broker *b, size_t lo, size_t hi, const char *journal,
			      struct local_assign *out)
{
	char *jp = NULL;
	size_t jlo, jhi;

	if (asprintf(&jp, "%s/assign/%s#", b->root, journal) < 0)
		return false;
	gaz_keyspace_prefix(b->ks, jp, &jlo, &jhi);
	free(jp);
	for (size_t i = jlo; i < jhi; i++)
		if (local_assign_of(b, lo, hi, i, journal, out))
			return true;
	return false;
}

/* follow_changes applies the journals `names` (sorted, nc of them) to
 * ls->as: a journal still ours is updated in place, and only when some
 * are gained or lost is the array merged anew (one pass). Returns -1 when
 * out of memory (ls unchanged but for updates in place). Read lock held. */
static int follow_changes(struct gaz_broker *b, struct local_set *ls, size_t lo, size_t hi,
			  char **names, size_t nc)
{
	struct local_assign *add = calloc(nc + 1, sizeof(*add)), *as;
	size_t nadd = 0, ngone = 0, w = 0, i = 0, k = 0;

	if (!add)
		return -1;
	for (size_t j = 0; j < nc; j++) {
		struct local_assign fresh = {0}, *cur = find_assign(ls->as, ls->n, names[j]);
		bool have = assign_of_journal(b, lo, hi, names[j], &fresh);
		if (cur && have) {
			local_assign_free(cur);
			*cur = fresh;
		} else if (cur && !cur->gone) {
			cur->gone = true; /* freed at the merge: bsearch still needs its name */
			ngone++;
		} else if (have) {
			add[nadd++] = fresh; /* in name order, as `names` is */
		}
	}
	if (!nadd && !ngone) {
		free(add);
		return 0;
	}
	if (!(as = calloc(ls->n - ngone + nadd + 1, sizeof(*as)))) {
		for (size_t j = 0; j < nadd; j++)
			local_assign_free(&add[j]);
		free(add);
		for (size_t j = 0; j < ls->n; j++)
			ls->as[j].gone = false;
		return -1;
	}
	while (i < ls->n || k < nadd) {
		if (i < ls->n && ls->as[i].gone) {
			local_assign_free(&ls->as[i++]);
			continue;
		}
		if (k == nadd || (i < ls->n && strcmp(ls->as[i].journal, add[k].journal) < 0))
			as[w++] = ls->as[i++];
		else
			as[w++] = add[k++];
	}
	free(ls->as);
	free(add);
	ls->as = as;
	ls->n = w;
	return 0;
}

/* local_sync brings `ls` to the keyspace (read lock taken inside).
 * Returns 1 when it scanned every assignment (the change log did not
 * reach back: any journal may have changed), 0 when it followed the
 * change log, handing the journals it names to the caller in *changed
 * (sorted; *n_changed of them; the caller frees each and the array), or
 * -1 when out of memory (the next call scans). */
static int local_sync(struct gaz_broker *b, struct local_set *ls, char ***changed, size_t *n_changed)
{
	char *prefix = NULL;
	size_t lo, hi;
	int rc = 0;

	*changed = NULL;
	*n_changed = 0;
	if (asprintf(&prefix, "%s/assign/", b->root) < 0)
		return -1;
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
			n += local_assign_of(b, lo, hi, i, v->item, &as[n]);
		}
		if (as) {
			for (size_t i = 0; i < ls->n; i++)
				local_assign_free(&ls->as[i]);
			free(ls->as);
			ls->as = as;
			ls->n = n;
			ls->rev = rev;
			/* Assignment keys sort by "journal#": not quite by name. */
			if (ls->n)
				qsort(ls->as, ls->n, sizeof(*ls->as), assign_cmp);
			rc = 1;
		} else {
			ls->rev = 0;
			rc = -1;
		}
	} else if (ls->changed.n) {
		size_t nc = 0;
		char **names = gaz_strset_drain(&ls->changed, &nc);
		if (names)
			qsort(names, nc, sizeof(*names), cmp_cstr);
		if (!names || follow_changes(b, ls, lo, hi, names, nc)) {
			for (size_t k = 0; k < nc; k++)
				free(names[k]);
			free(names);
			ls->rev = 0;
			rc = -1;
		} else {
			ls->rev = rev;
			*changed = names;
			*n_changed = nc;
		}
	} else {
		ls->rev = rev;
	}
	gaz_keyspace_runlock(b->ks);
	free(prefix);
	return rc;
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

/* What the maintenance thread remembers between passes. */
struct maintain_state {
	struct local_set local;   /* our assignments */
	int64_t reconciled_rev;   /* keyspace revision of the last reconcile; -1: none */
	struct gaz_dueq listings; /* replicas by their next listing; each
				   * remembers its latest entry's due time
				   * (refresh_heap_due), stale ones are dropped */
};

/* listing_due: when `r`'s next listing is due: at its refresh interval,
 * or GAZ_HOLE_REFRESH_MS after the last while a reader waits at a hole
 * (unless the store just failed: then the failure's pace holds). */
static int64_t listing_due(struct gaz_replica *r, int64_t now)
{
	int64_t due = r->next_refresh_ns;

	if (now < atomic_load(&r->hole_refresh_until_ns) && !r->last_refresh_failed &&
	    r->last_refresh_ns + GAZ_HOLE_REFRESH_MS * GAZ_NS_PER_MS < due)
		due = r->last_refresh_ns + GAZ_HOLE_REFRESH_MS * GAZ_NS_PER_MS;
	return due;
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

/* schedule lists `r`'s stores if that is due, and queues its next
 * listing if its due time moved. */
static void schedule(struct gaz_broker *b, struct maintain_state *ms, struct gaz_replica *r)
{
	int64_t now = gaz_mono_ns(), due;

	if (atomic_load(&b->stopping))
		return;
	if ((due = listing_due(r, now)) <= now) {
		Protocol__JournalSpec *spec = gaz_ks_spec_copy(b->ks, b->root, r->journal);
		if (spec) {
			refresh(r, spec, now);
			protobuf_c_message_free_unpacked(&spec->base, NULL);
		} else {
			/* The item is gone: its removal reconciles the replica. */
			r->next_refresh_ns = now + GAZ_NS_PER_S;
		}
		due = listing_due(r, gaz_mono_ns());
	}
	if (due != r->refresh_heap_due && gaz_dueq_push(&ms->listings, due, r->journal) == 0)
		r->refresh_heap_due = due;
}

/* reconcile_journal brings the local replica of `journal` in line with
 * our assignment of it (ls): tears down a replica no longer ours (or of a
 * deleted and re-created journal), demotes one no longer primary (its
 * pipeline closed, its spool and index kept), creates one newly ours,
 * notes a promotion, then lists its stores if due. */
static void reconcile_journal(struct gaz_broker *b, struct maintain_state *ms, const char *journal)
{
	struct gaz_replica *r = gaz_replica_get(b, journal);
	struct local_assign *a = find_assign(ms->local.as, ms->local.n, journal);

	if (r) {
		/* Not primary any more, or never seen primary here but holding
		 * a pipeline an append opened while it briefly was. */
		bool demoted = a && !a->primary && (r->primary || atomic_load(&r->pipelined));
		if (demoted && a->create_revision == r->create_revision) {
			gaz_info(r->primary ? "no longer primary; closing the pipeline"
					    : "closing a pipeline opened while briefly primary",
				 "journal=%s", r->journal);
			gaz_replica_demote(r);
		}
		if (!a || a->create_revision != r->create_revision) {
			gaz_replica_teardown(r);
			gaz_replica_unref(r);
			r = NULL; /* re-created below while still ours */
		} else {
			if (a->primary && !r->primary) {
				/* Promoted: the previous primary persisted what only it
				 * held before letting go (append_fsm.c), so list the store now
				 * rather than at the next refresh interval. */
				r->primary = true;
				r->next_refresh_ns = 0;
				/* The pulse thread may have looked at this journal while
				 * the replica was not primary yet; kicked, it looks again,
				 * so the route the allocator changed gets its consistency
				 * write now (else only at the periodic pulse, leaving the
				 * journal under-replicated to the operator until then). */
				gaz_pulse_kick_journal(b, r->journal);
			}
			note_route_primary(b, r, a->route_primary);
		}
	}
	/* An exiting broker still takes up what the allocator gives it: a
	 * member not yet shed may take journals of an older exiting one. */
	if (!r && a && !atomic_load(&b->stopping) &&
	    (r = gaz_replica_new(b, a->journal, a->create_revision))) {
		r->primary = a->primary;
		r->route_primary = a->route_primary ? strdup(a->route_primary) : NULL;
		if (r->primary)
			gaz_pulse_kick_journal(b, r->journal); /* a new primary pulses at once */
		r = gaz_replica_get(b, journal);
	}
	if (r) {
		schedule(b, ms, r);
		gaz_replica_unref(r);
	}
}

/* reconcile_all: every local replica and every assignment of ours. */
static void reconcile_all(struct gaz_broker *b, struct maintain_state *ms)
{
	struct gaz_replica **rs = NULL;
	size_t nr = gaz_replicas_snapshot(b, &rs);
	char **names = calloc(nr + 1, sizeof(*names));

	/* Names copied: reconciling may tear the replica down. */
	for (size_t i = 0; i < nr; i++) {
		if (names)
			names[i] = strdup(rs[i]->journal);
		gaz_replica_unref(rs[i]);
	}
	free(rs);
	for (size_t i = 0; names && i < nr; i++) {
		if (names[i])
			reconcile_journal(b, ms, names[i]);
		free(names[i]);
	}
	free(names);
	for (size_t i = 0; i < ms->local.n && !atomic_load(&b->stopping); i++)
		reconcile_journal(b, ms, ms->local.as[i].journal);
}

void gaz_replica_hurry_refresh(struct gaz_replica *r, int64_t until_ns)
{
	long long was = atomic_load(&r->hole_refresh_until_ns);

	while (was < until_ns &&
	       !atomic_compare_exchange_weak(&r->hole_refresh_until_ns, &was, (long long)until_ns))
		;
	if (was < until_ns)
		gaz_maintain_look(r->b, r->journal);
}

/* One pass: reconcile the journals whose keys changed since the last
 * pass and those a look was asked for (all of them when the change log
 * does not reach back), then list the stores of each replica whose
 * listing came due. Returns when the next listing is due. */
static int64_t tick(struct gaz_broker *b, struct maintain_state *ms)
{
	size_t n_looks = 0, n_changed = 0;
	char **looks = NULL, **changed = NULL;
	bool all;
	int64_t rev, now;
	struct gaz_due e;

	pthread_mutex_lock(&b->maintain_mu);
	looks = b->maintain_journals.n ? gaz_strset_drain(&b->maintain_journals, &n_looks) : NULL;
	all = b->maintain_look_all || (b->maintain_journals.n && !looks);
	b->maintain_look_all = false;
	pthread_mutex_unlock(&b->maintain_mu);

	rev = gaz_keyspace_revision_now(b->ks);
	if (!atomic_load(&b->stopping) && (all || n_looks || rev != ms->reconciled_rev)) {
		int rc = local_sync(b, &ms->local, &changed, &n_changed);
		ms->reconciled_rev = rc < 0 ? -1 : rev;
		if (rc > 0 || all) {
			reconcile_all(b, ms);
		} else {
			for (size_t i = 0; i < n_changed; i++)
				reconcile_journal(b, ms, changed[i]);
			for (size_t i = 0; i < n_looks; i++)
				reconcile_journal(b, ms, looks[i]);
		}
	}
	for (size_t i = 0; i < n_changed; i++)
		free(changed[i]);
	free(changed);
	for (size_t i = 0; i < n_looks; i++)
		free(looks[i]);
	free(looks);

	/* Due by the pass's start only: schedule queues each anew past it. */
	now = gaz_mono_ns();
	while (!atomic_load(&b->stopping) && gaz_dueq_due_by(&ms->listings, now) &&
	       gaz_dueq_pop(&ms->listings, &e)) {
		struct gaz_replica *r = gaz_replica_get(b, e.name);
		if (r && r->refresh_heap_due == e.due_ns) {
			r->refresh_heap_due = 0; /* popped: schedule queues it anew */
			schedule(b, ms, r);
		}
		if (r)
			gaz_replica_unref(r);
		free(e.name);
	}
	if (ms->reconciled_rev < 0)
		return gaz_deadline_in(1000); /* out of memory: try again soon */
	return gaz_dueq_earliest(&ms->listings);
}

void *gaz_maintain_thread(void *arg)
{
	struct gaz_broker *b = arg;
	struct maintain_state ms = {.reconciled_rev = -1};

	pthread_setname_np(pthread_self(), "gaz-maintain");
	while (!atomic_load(&b->stopping)) {
		int64_t until = tick(b, &ms);
		if (until > gaz_deadline_in(MAINTAIN_IDLE_MS))
			until = gaz_deadline_in(MAINTAIN_IDLE_MS);
		struct timespec ts = gaz_abstime_of(until);
		pthread_mutex_lock(&b->mu);
		while (!b->maintain_wake && !atomic_load(&b->stopping))
			if (pthread_cond_timedwait(&b->cond, &b->mu, &ts))
				break;
		b->maintain_wake = false;
		pthread_mutex_unlock(&b->mu);
	}
	local_release(&ms.local);
	gaz_dueq_release(&ms.listings);
	return NULL;
}
