/*
 * resolver.c - this process's shards, as its assignments in the keyspace
 * say (Gazette's consumer.Resolver): a shard is started for each of our
 * assignments, moved to primary when ours reaches slot 0, and stopped
 * when the assignment goes (or the shard's spec was deleted and created
 * again), and started again as a standby when ours leaves slot 0. The
 * resolver thread does this after each keyspace update.
 *
 * Locking (runtime_int.h): consumer->mu guards the shard array, each
 * shard's refs, resolve_wake, stopping and reaping. Shards are created
 * under it and stopped without it; their threads are joined by reaper
 * threads.
 */
#include "consumer/runtime_int.h"

#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"

/* One of our assignments, copied out of the keyspace. */
struct local_assignment {
	char *id;
	int64_t slot, create_revision;
	Consumer__ShardSpec *spec;
};

static void assignments_release(struct local_assignment *a, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(a[i].id);
		if (a[i].spec)
			protobuf_c_message_free_unpacked(&a[i].spec->base, NULL);
	}
	free(a);
}

/* Our assignments whose shard has a spec, in shard order. */
static int collect(struct gaz_consumer *c, struct local_assignment **out, size_t *n_out)
{
	char *prefix = NULL;
	size_t lo, hi, n = 0;
	struct local_assignment *a = NULL;
	int rc = 0;

	*out = NULL;
	*n_out = 0;
	if (asprintf(&prefix, "%s/assign/", c->root) < 0)
		return GAZ_ENOMEM;
	gaz_keyspace_rlock(c->ks);
	gaz_keyspace_prefix(c->ks, prefix, &lo, &hi);
	if (hi > lo && !(a = calloc(hi - lo, sizeof(*a))))
		rc = GAZ_ENOMEM;
	for (size_t i = lo; !rc && i < hi; i++) {
		const struct gaz_ks_value *v = gaz_keyspace_at(c->ks, i)->decoded;
		const struct gaz_ks_entry *item;
		if (strcmp(v->zone, c->cfg.zone) || strcmp(v->suffix, c->cfg.id))
			continue;
		if (!(item = gaz_ks_item(c->ks, c->root, v->item)))
			continue; /* an orphan the allocator removes */
		const struct gaz_ks_value *iv = item->decoded;
		a[n] = (struct local_assignment){.id = strdup(v->item), .slot = v->slot,
						 .create_revision = item->create_revision,
						 .spec = (Consumer__ShardSpec *)gaz_pb_copy(&iv->shard->base)};
		if (!a[n].id || !a[n++].spec)
			rc = GAZ_ENOMEM;
	}
	gaz_keyspace_runlock(c->ks);
	free(prefix);
	if (rc) {
		assignments_release(a, n);
		return rc;
	}
	*out = a;
	*n_out = n;
	return 0;
}

/* Index of shard `id` in c->shards, or where it would go (mu held). */
static size_t find(struct gaz_consumer *c, const char *id, bool *found)
{
	size_t lo = 0, hi = c->n_shards;

	*found = false;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int cmp = strcmp(c->shards[mid]->id, id);
		if (!cmp) {
			*found = true;
			return mid;
		}
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct reaping {
	struct gaz_consumer *c;
	struct gaz_shard **gone;
	size_t n;
};

static void *reaper_thread(void *arg)
{
	struct reaping *r = arg;
	struct gaz_consumer *c = r->c;

	for (size_t i = 0; i < r->n; i++) {
		gaz_shard_join(r->gone[i]);
		gaz_shard_unref(r->gone[i]);
	}
	free(r->gone);
	free(r);
	pthread_mutex_lock(&c->mu);
	c->reaping--;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* Stops the shards in `gone` (mu not held; takes the array) at once, and
 * joins and releases them on a reaper thread: a shard may take a while to
 * end (its last commit, its appends cancelled), and the resolver must
 * meanwhile follow the keyspace, or a demoted primary it has not seen
 * yet would go on committing. */
static void retire(struct gaz_consumer *c, struct gaz_shard **gone, size_t n)
{
	struct reaping *r = n ? malloc(sizeof(*r)) : NULL;
	pthread_t t;

	for (size_t i = 0; i < n; i++)
		gaz_shard_stop(gone[i]);
	if (r) {
		*r = (struct reaping){c, gone, n};
		pthread_mutex_lock(&c->mu);
		c->reaping++;
		pthread_mutex_unlock(&c->mu);
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		int err = pthread_create(&t, &attr, reaper_thread, r);
		pthread_attr_destroy(&attr);
		if (!err)
			return;
		reaper_thread(r); /* no thread: reap here */
		return;
	}
	for (size_t i = 0; i < n; i++) {
		gaz_shard_join(gone[i]);
		gaz_shard_unref(gone[i]);
	}
	free(gone);
}

/* One pass: start, promote and stop shards to match our assignments. */
static void resolve(struct gaz_consumer *c)
{
	struct local_assignment *a = NULL;
	size_t n = 0, n_gone = 0;
	struct gaz_shard **gone = NULL;

	if (collect(c, &a, &n)) {
		gaz_warn("resolving shards: out of memory; retrying", NULL);
		return;
	}
	pthread_mutex_lock(&c->mu);
	gone = calloc(c->n_shards + 1, sizeof(*gone));
	/* Stop shards no longer assigned (or re-created under their id). */
	for (size_t i = 0; gone && i < c->n_shards;) {
		struct gaz_shard *s = c->shards[i];
		bool keep = false;
		for (size_t k = 0; k < n && !keep; k++)
			keep = !strcmp(a[k].id, s->id) && a[k].create_revision == s->item_create_revision;
		if (keep) {
			i++;
			continue;
		}
		gone[n_gone++] = s;
		memmove(&c->shards[i], &c->shards[i + 1], (c->n_shards - i - 1) * sizeof(*c->shards));
		c->n_shards--;
	}
	for (size_t k = 0; gone && k < n && !c->stopping; k++) {
		bool found;
		size_t at = find(c, a[k].id, &found);
		if (found && gaz_shard_set_slot(c->shards[at], a[k].slot)) {
			continue;
		} else if (found) {
			/* A primary moved off slot 0 (the allocator balances
			 * primaries): it stops being primary, its store closed,
			 * and serves again as a standby. */
			gone[n_gone++] = c->shards[at];
			memmove(&c->shards[at], &c->shards[at + 1], (c->n_shards - at - 1) * sizeof(*c->shards));
			c->n_shards--;
			at = find(c, a[k].id, &found);
		}
		if (c->n_shards == c->cap_shards) {
			size_t cap = c->cap_shards ? c->cap_shards * 2 : 16;
			void *p = realloc(c->shards, cap * sizeof(*c->shards));
			if (!p)
				break;
			c->shards = p;
			c->cap_shards = cap;
		}
		struct gaz_shard *s = gaz_shard_new(c, a[k].id, a[k].spec, a[k].create_revision, a[k].slot);
		if (!s) {
			gaz_warn("starting a shard failed: out of memory", "shard=%s", a[k].id);
			continue;
		}
		memmove(&c->shards[at + 1], &c->shards[at], (c->n_shards - at) * sizeof(*c->shards));
		c->shards[at] = s;
		c->n_shards++;
	}
	pthread_mutex_unlock(&c->mu);
	retire(c, gone, n_gone);
	assignments_release(a, n);
}

static void *resolver_thread(void *arg)
{
	struct gaz_consumer *c = arg;

	pthread_mutex_lock(&c->mu);
	while (!c->stopping) {
		struct timespec ts = gaz_abstime_of(gaz_deadline_in(1000));
		while (!c->resolve_wake && !c->stopping)
			if (pthread_cond_timedwait(&c->cond, &c->mu, &ts))
				break;
		c->resolve_wake = false;
		if (c->stopping)
			break;
		pthread_mutex_unlock(&c->mu);
		resolve(c);
		pthread_mutex_lock(&c->mu);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* The shard pool's threads: twice the cores, at least 4. A shard's step
 * holds one while its application's callbacks or its store block. */
static int shard_pool_threads(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 2 ? (int)(2 * n) : 4;
}

int gaz_consumer_resolver_start(struct gaz_consumer *c)
{
	if (!c->shard_pool && gaz_steps_new(shard_pool_threads(), "gaz-shard", &c->shard_pool))
		return GAZ_ENOMEM;
	if (pthread_create(&c->resolver, NULL, resolver_thread, c))
		return GAZ_ENOMEM;
	c->resolver_started = true;
	return 0;
}

void gaz_consumer_resolver_wake(struct gaz_consumer *c)
{
	pthread_mutex_lock(&c->mu);
	c->resolve_wake = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->mu);
}

void gaz_consumer_resolver_stop(struct gaz_consumer *c)
{
	struct gaz_shard **gone;
	size_t n;

	pthread_mutex_lock(&c->mu);
	c->stopping = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->mu);
	if (c->resolver_started)
		pthread_join(c->resolver, NULL);
	c->resolver_started = false;
	pthread_mutex_lock(&c->mu);
	gone = c->shards;
	n = c->n_shards;
	c->shards = NULL;
	c->n_shards = c->cap_shards = 0;
	pthread_mutex_unlock(&c->mu);
	retire(c, gone, n);
	pthread_mutex_lock(&c->mu);
	while (c->reaping)
		pthread_cond_wait(&c->cond, &c->mu);
	pthread_mutex_unlock(&c->mu);
	gaz_steps_free(c->shard_pool); /* every shard is joined */
	c->shard_pool = NULL;
}

size_t gaz_consumer_local_shards(struct gaz_consumer *c)
{
	size_t n;

	pthread_mutex_lock(&c->mu);
	n = c->n_shards;
	pthread_mutex_unlock(&c->mu);
	return n;
}

struct gaz_shard *gaz_consumer_shard_get(struct gaz_consumer *c, const char *id)
{
	struct gaz_shard *s = NULL;
	bool found;

	pthread_mutex_lock(&c->mu);
	size_t at = find(c, id, &found);
	if (found) {
		s = c->shards[at];
		s->refs++;
	}
	pthread_mutex_unlock(&c->mu);
	return s;
}

void gaz_shard_unref(struct gaz_shard *s)
{
	struct gaz_consumer *c = s->c;
	bool last;

	pthread_mutex_lock(&c->mu);
	last = --s->refs == 0;
	pthread_mutex_unlock(&c->mu);
	if (last)
		gaz_shard_free(s);
}
