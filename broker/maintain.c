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

#define MAINTAIN_TICK_MS 250

void gaz_broker_kick(struct gaz_broker *b)
{
	pthread_mutex_lock(&b->mu);
	b->maintain_wake = true;
	b->alloc_wake = true;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->mu);
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

/* Lists our assignments (read lock taken inside). */
static size_t local_assignments(struct gaz_broker *b, struct local_assign **out)
{
	char *prefix = NULL;
	size_t lo, hi, n = 0;

	*out = NULL;
	if (asprintf(&prefix, "%s/assign/", b->root) < 0)
		return 0;
	gaz_keyspace_rlock(b->ks);
	gaz_keyspace_prefix(b->ks, prefix, &lo, &hi);
	*out = calloc(hi - lo + 1, sizeof(**out));
	for (size_t i = lo; *out && i < hi; i++) {
		const struct gaz_ks_value *v = gaz_keyspace_at(b->ks, i)->decoded;
		const struct gaz_ks_entry *item;
		if (!gaz_broker_is_local(b, v->zone, v->suffix))
			continue;
		item = gaz_ks_item(b->ks, b->root, v->journal);
		if (!item)
			continue;
		(*out)[n].journal = strdup(v->journal);
		(*out)[n].create_revision = item->create_revision;
		(*out)[n].primary = v->slot == 0;
		(*out)[n].route_primary = slot0_member(b->ks, lo, hi, i, v->journal);
		n++;
	}
	gaz_keyspace_runlock(b->ks);
	free(prefix);
	return n;
}

static struct local_assign *find_assign(struct local_assign *a, size_t n, const char *journal)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(a[i].journal, journal))
			return &a[i];
	return NULL;
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

static void reconcile(struct gaz_broker *b)
{
	struct local_assign *as = NULL;
	struct gaz_replica **rs = NULL;
	size_t na = local_assignments(b, &as), nr = gaz_replicas_snapshot(b, &rs);

	for (size_t i = 0; i < nr; i++) {
		struct local_assign *a = find_assign(as, na, rs[i]->journal);
		bool demoted = a && rs[i]->primary && !a->primary;
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
		}
		note_route_primary(b, rs[i], a->route_primary);
		gaz_replica_unref(rs[i]);
	}
	for (size_t i = 0; i < na && !atomic_load(&b->exiting); i++) {
		struct gaz_replica *r = gaz_replica_get(b, as[i].journal);
		if (!r && (r = gaz_replica_new(b, as[i].journal, as[i].create_revision))) {
			r->primary = as[i].primary;
			r->route_primary = as[i].route_primary ? strdup(as[i].route_primary) : NULL;
			continue; /* table reference only */
		}
		gaz_replica_unref(r);
	}
	for (size_t i = 0; i < na; i++) {
		free(as[i].journal);
		free(as[i].route_primary);
	}
	free(as);
	free(rs);
}

static void refresh(struct gaz_replica *r, const Protocol__JournalSpec *spec)
{
	struct gaz_status st = {0};
	int64_t now = gaz_mono_ns();
	int64_t every = spec->fragment && spec->fragment->refresh_interval
				? spec->fragment->refresh_interval->seconds * GAZ_NS_PER_S
				: 60 * GAZ_NS_PER_S;

	if (now < r->next_refresh_ns)
		return;
	r->next_refresh_ns = now + (every > 0 ? every : GAZ_NS_PER_S);
	if (gaz_replica_refresh(r, spec, &st)) {
		/* Retry no faster than every 5 s, and say so once per failure. */
		if (every < 5 * GAZ_NS_PER_S)
			r->next_refresh_ns = now + 5 * GAZ_NS_PER_S;
		gaz_warn("fragment index refresh failed", "journal=%s err=\"%s\"", r->journal, st.msg);
	}
}

static void tick(struct gaz_broker *b)
{
	struct gaz_replica **rs = NULL;
	size_t n;

	if (!atomic_load(&b->stopping))
		reconcile(b);
	n = gaz_replicas_snapshot(b, &rs);
	for (size_t i = 0; i < n; i++) {
		Protocol__JournalSpec *spec = gaz_ks_spec_copy(b->ks, b->root, rs[i]->journal);
		if (spec && !atomic_load(&b->stopping))
			refresh(rs[i], spec);
		if (spec)
			protobuf_c_message_free_unpacked(&spec->base, NULL);
		gaz_replica_unref(rs[i]);
	}
	free(rs);
}

void *gaz_maintain_thread(void *arg)
{
	struct gaz_broker *b = arg;

	while (!atomic_load(&b->stopping)) {
		struct timespec ts = gaz_abstime_of(gaz_deadline_in(MAINTAIN_TICK_MS));
		tick(b);
		pthread_mutex_lock(&b->mu);
		while (!b->maintain_wake && !atomic_load(&b->stopping))
			if (pthread_cond_timedwait(&b->cond, &b->mu, &ts))
				break;
		b->maintain_wake = false;
		pthread_mutex_unlock(&b->mu);
	}
	return NULL;
}
