/*
 * maintain.c - the broker's maintenance loop (one thread): it keeps the
 * set of local replicas in line with this broker's assignments, refreshes
 * each replica's fragment index from its stores every refresh_interval
 * (facts §5.3), and "pulses" primaries (§4.8): writes the route into
 * inconsistent assignments (§4.6) and closes spools at flush-interval
 * boundaries (§6.3), so idle journals still persist on time.
 */
#include "broker/broker.h"

#include <stdlib.h>
#include <string.h>

#include "broker/persister.h"
#include "broker/release.h"
#include "broker/replica.h"
#include "common/clock.h"
#include "common/log.h"
#include "etcd/txn.h"

#define MAINTAIN_TICK_MS 250

void gaz_broker_kick(struct gaz_broker *b)
{
	pthread_mutex_lock(&b->mu);
	b->maintain_wake = true;
	b->alloc_wake = true;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->mu);
}

/* A local assignment: journal and the item's create revision. */
struct local_assign {
	char *journal;
	int64_t create_revision;
	bool primary;
};

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

/* Snapshot of the replica table with references. */
static size_t replicas_snapshot(struct gaz_broker *b, struct gaz_replica ***out)
{
	size_t n;

	pthread_mutex_lock(&b->mu);
	n = b->n_replicas;
	*out = calloc(n + 1, sizeof(**out));
	for (size_t i = 0; *out && i < n; i++) {
		(*out)[i] = b->replicas[i];
		atomic_fetch_add(&b->replicas[i]->refs, 1);
	}
	pthread_mutex_unlock(&b->mu);
	return *out ? n : 0;
}

static void reconcile(struct gaz_broker *b)
{
	struct local_assign *as = NULL;
	struct gaz_replica **rs = NULL;
	size_t na = local_assignments(b, &as), nr = replicas_snapshot(b, &rs);

	for (size_t i = 0; i < nr; i++) {
		struct local_assign *a = find_assign(as, na, rs[i]->journal);
		bool demoted = a && rs[i]->primary && !a->primary;
		if (!a || a->create_revision != rs[i]->create_revision || demoted)
			gaz_replica_teardown(rs[i]);
		else
			rs[i]->primary = a->primary;
		gaz_replica_unref(rs[i]);
	}
	for (size_t i = 0; i < na && !atomic_load(&b->exiting); i++) {
		struct gaz_replica *r = gaz_replica_get(b, as[i].journal);
		if (!r && (r = gaz_replica_new(b, as[i].journal, as[i].create_revision))) {
			r->primary = as[i].primary;
			continue; /* table reference only */
		}
		gaz_replica_unref(r);
	}
	for (size_t i = 0; i < na; i++)
		free(as[i].journal);
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

/* Flush-interval roll of an idle primary spool (the pulse's fragment
 * closing): only when no append holds the token. */
static void pulse_flush(struct gaz_replica *r, const Protocol__JournalSpec *spec)
{
	int64_t interval_s = spec->fragment && spec->fragment->flush_interval
				     ? spec->fragment->flush_interval->seconds : 0;
	struct gaz_status st = {0};
	bool due;

	if (interval_s <= 0 || !r->primary)
		return;
	pthread_mutex_lock(&r->mu);
	due = !r->token_held && !r->dead && r->spool.first_append_ns &&
	      r->spool.fragment.end > r->spool.fragment.begin &&
	      r->spool.first_append_ns / GAZ_NS_PER_S / interval_s !=
		      gaz_wall_ns() / GAZ_NS_PER_S / interval_s;
	if (due)
		r->token_held = true;
	pthread_mutex_unlock(&r->mu);
	if (!due)
		return;
	if (gaz_replica_roll(r, r->spool.fragment.end, spec->fragment->compression_codec, &st))
		gaz_error("flush-interval roll failed", "journal=%s err=\"%s\"", r->journal, st.msg);
	gaz_replica_release(r);
}

/* Writes the derived route (members and primary, no endpoints) into every
 * inconsistent assignment of `journal`, guarded by every assignment's mod
 * revision (§4.6). Returns true if nothing needed writing. */
static bool write_routes(struct gaz_broker *b, const char *journal)
{
	struct gaz_route route;
	struct gaz_txn t;
	struct gaz_status st = {0};
	Protocol__Route *p = NULL;
	uint8_t *val = NULL;
	size_t len = 0;
	bool consistent = true;

	gaz_keyspace_rlock(b->ks);
	if (gaz_route_build(b->ks, b->root, journal, &route)) {
		gaz_keyspace_runlock(b->ks);
		return false;
	}
	gaz_keyspace_runlock(b->ks);
	for (size_t i = 0; i < route.n; i++)
		consistent &= route.consistent[i];
	if (!consistent && (p = gaz_route_to_proto(&route, false)) &&
	    (val = malloc((len = protocol__route__get_packed_size(p)) + 1))) {
		protocol__route__pack(p, val);
		gaz_txn_init(&t);
		for (size_t i = 0; i < route.n; i++) {
			char *key = gaz_ks_assign_key(b->root, journal, route.zone[i], route.suffix[i],
						      route.slot[i]);
			if (!key)
				continue;
			gaz_txn_compare_mod(&t, key, route.mod_revision[i]);
			if (!route.consistent[i])
				gaz_txn_put(&t, key, val, len, 0, true);
			free(key);
		}
		if (gaz_txn_commit(b->etcd, &t, NULL, NULL, &st))
			gaz_warn("route write failed", "journal=%s err=\"%s\"", journal, st.msg);
		gaz_txn_release(&t);
	}
	free(val);
	gaz_route_proto_free(p);
	gaz_route_release(&route);
	return consistent;
}

/* Single-member routes of journals we are primary of are made consistent
 * by the pulse: there is no peer to synchronise first. */
static void pulse_routes(struct gaz_broker *b, struct gaz_replica *r)
{
	if (r->primary && !atomic_load(&b->exiting))
		write_routes(b, r->journal);
}

/* Graceful hand-off of a journal we are primary of, to the member the
 * allocator added. Without a replication pipeline the new member cannot
 * be synchronised from our spool, so the spool goes through the store
 * instead: stop serving the replica (in-flight appends finish), persist
 * its last fragment, record the write head in the spec (release.c), and
 * only then write the route that lets the allocator move the primary. */
static void hand_off(struct gaz_broker *b, const char *journal)
{
	struct gaz_replica *r = gaz_replica_get(b, journal);
	struct gaz_release_head head = {.journal = (char *)journal, .head = -1};
	int64_t deadline = gaz_deadline_in(60000);

	if (r) {
		gaz_replica_teardown(r);
		head.head = r->spool.fragment.end;
		gaz_replica_unref(r);
		while (b->persister && gaz_persister_pending_for(b->persister, journal) &&
		       gaz_mono_ns() < deadline)
			usleep(20000);
		if (b->persister && gaz_persister_pending_for(b->persister, journal)) {
			gaz_error("hand-off: fragment not persisted; keeping the journal",
				  "journal=%s", journal);
			return;
		}
		gaz_release_record_heads(b, &head, 1);
	}
	write_routes(b, journal);
}

static void hand_off_all(struct gaz_broker *b)
{
	struct local_assign *as = NULL;
	size_t na = local_assignments(b, &as);

	for (size_t i = 0; i < na; i++) {
		if (as[i].primary) {
			struct gaz_route route = {.primary = -1};
			bool multi = false;
			gaz_keyspace_rlock(b->ks);
			if (!gaz_route_build(b->ks, b->root, as[i].journal, &route))
				multi = route.n > 1;
			gaz_keyspace_runlock(b->ks);
			gaz_route_release(&route);
			if (multi)
				hand_off(b, as[i].journal);
		}
		free(as[i].journal);
	}
	free(as);
}

static void tick(struct gaz_broker *b)
{
	struct gaz_replica **rs = NULL;
	size_t n;

	if (!atomic_load(&b->stopping))
		reconcile(b);
	if (atomic_load(&b->exiting) && !atomic_load(&b->stopping))
		hand_off_all(b);
	n = replicas_snapshot(b, &rs);
	for (size_t i = 0; i < n; i++) {
		Protocol__JournalSpec *spec = gaz_ks_spec_copy(b->ks, b->root, rs[i]->journal);
		if (spec && !atomic_load(&b->stopping)) {
			refresh(rs[i], spec);
			pulse_flush(rs[i], spec);
			pulse_routes(b, rs[i]);
		}
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
