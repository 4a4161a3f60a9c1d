/*
 * keyspace.c - the watched mirror of an etcd prefix. See keyspace.h.
 *
 * Invariants: `entries` is sorted by key bytes with no duplicates; every
 * entry has a non-NULL decoded value; `revision` never decreases. Events at
 * or below the current revision are ignored (a watch resumed after a
 * reconnect may replay the last one).
 *
 * With a watch delay, each watch response is applied at once and wakes
 * the requests waiting on it (revision waiters, the notifier) at once; the
 * observer (the broker's maintenance and allocator) is called by the
 * publisher thread once the delay after the first response it has not
 * seen has passed, so a burst of responses costs one round of that work.
 * pub_mu guards pub_pending, pub_first_ns and pub_stop.
 */
#include "keyspace/keyspace.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

struct gaz_keyspace {
	struct gaz_etcd *etcd;
	char *prefix;
	gaz_ks_decode_fn decode;
	gaz_ks_free_fn free_fn;
	void *arg;
	gaz_ks_observer_fn observer;
	void *observer_arg;
	void (*cleanup)(void *arg);

	pthread_rwlock_t lock;
	struct gaz_ks_entry *entries;
	size_t len, cap;
	int64_t revision;
	struct gaz_etcd_header header;

	pthread_mutex_t rev_mu; /* guards nothing but rev_cond's waits */
	pthread_cond_t rev_cond;
	struct gaz_notifier notifier;
	struct gaz_etcd_watch *watch;
	bool watch_failed;

	int64_t watch_delay_ns;         /* set before the watch starts */
	pthread_t publisher;
	bool publisher_started;
	pthread_mutex_t pub_mu;
	pthread_cond_t pub_cond;
	bool pub_pending, pub_stop;
	int64_t pub_first_ns;           /* monotonic: the first unpublished response */
};

struct gaz_keyspace *gaz_keyspace_new(struct gaz_etcd *etcd, const char *prefix,
				      gaz_ks_decode_fn decode, gaz_ks_free_fn free_fn, void *arg)
{
	struct gaz_keyspace *ks = calloc(1, sizeof(*ks));
	pthread_condattr_t ca;

	if (!ks || !(ks->prefix = strdup(prefix))) {
		free(ks);
		return NULL;
	}
	ks->etcd = etcd;
	ks->decode = decode;
	ks->free_fn = free_fn;
	ks->arg = arg;
	pthread_rwlock_init(&ks->lock, NULL);
	pthread_mutex_init(&ks->rev_mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ks->rev_cond, &ca);
	pthread_mutex_init(&ks->pub_mu, NULL);
	pthread_cond_init(&ks->pub_cond, &ca);
	pthread_condattr_destroy(&ca);
	gaz_notifier_init(&ks->notifier);
	return ks;
}

void gaz_keyspace_set_watch_delay(struct gaz_keyspace *ks, int64_t delay_ns)
{
	ks->watch_delay_ns = delay_ns > 0 ? delay_ns : 0;
}

void gaz_keyspace_set_cleanup(struct gaz_keyspace *ks, void (*fn)(void *arg))
{
	ks->cleanup = fn;
}

void gaz_keyspace_set_observer(struct gaz_keyspace *ks, gaz_ks_observer_fn fn, void *arg)
{
	ks->observer = fn;
	ks->observer_arg = arg;
}

static void entry_release(struct gaz_keyspace *ks, struct gaz_ks_entry *e)
{
	if (e->decoded)
		ks->free_fn(ks->arg, e->decoded);
	free(e->key);
}

/* Binary search: index of `key` or of where it would be inserted. */
static size_t search(const struct gaz_keyspace *ks, const char *key, bool *found)
{
	size_t lo = 0, hi = ks->len;

	*found = false;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(ks->entries[mid].key, key);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void remove_key(struct gaz_keyspace *ks, const char *key)
{
	bool found;
	size_t i = search(ks, key, &found);

	if (!found)
		return;
	entry_release(ks, &ks->entries[i]);
	memmove(&ks->entries[i], &ks->entries[i + 1], (ks->len - i - 1) * sizeof(ks->entries[0]));
	ks->len--;
}

/* Decodes and upserts one key-value. An undecodable value removes any
 * previous entry of the key: the key no longer has a valid meaning. */
static void upsert_kv(struct gaz_keyspace *ks, const Etcdserverpb__KeyValue *kv)
{
	struct gaz_status st = {0};
	struct gaz_ks_entry e = {0};
	bool found;
	size_t i;

	e.key = strndup((const char *)kv->key.data, kv->key.len);
	if (!e.key)
		return;
	e.decoded = ks->decode(ks->arg, e.key, kv->value.data, kv->value.len, &st);
	if (!e.decoded) {
		gaz_warn("ignoring undecodable key", "key=%s err=%s", e.key, st.msg);
		remove_key(ks, e.key);
		free(e.key);
		return;
	}
	e.create_revision = kv->create_revision;
	e.mod_revision = kv->mod_revision;
	e.version = kv->version;
	e.lease = kv->lease;
	i = search(ks, e.key, &found);
	if (found) {
		entry_release(ks, &ks->entries[i]);
		ks->entries[i] = e;
		return;
	}
	if (ks->len == ks->cap) {
		size_t ncap = ks->cap ? ks->cap * 2 : 64;
		void *n = realloc(ks->entries, ncap * sizeof(ks->entries[0]));
		if (!n) {
			entry_release(ks, &e);
			return;
		}
		ks->entries = n;
		ks->cap = ncap;
	}
	memmove(&ks->entries[i + 1], &ks->entries[i], (ks->len - i) * sizeof(ks->entries[0]));
	ks->entries[i] = e;
	ks->len++;
}

static void set_header(struct gaz_keyspace *ks, const Etcdserverpb__ResponseHeader *h)
{
	if (!h)
		return;
	ks->header.cluster_id = h->cluster_id;
	ks->header.member_id = h->member_id;
	ks->header.raft_term = h->raft_term;
}

/* wake_waiters wakes revision waiters and the notifier's (requests). */
static void wake_waiters(struct gaz_keyspace *ks)
{
	pthread_mutex_lock(&ks->rev_mu);
	pthread_cond_broadcast(&ks->rev_cond);
	pthread_mutex_unlock(&ks->rev_mu);
	gaz_notifier_broadcast(&ks->notifier);
}

/* After an update: wake the waiters, then call the observer. */
static void publish(struct gaz_keyspace *ks)
{
	wake_waiters(ks);
	if (ks->observer)
		ks->observer(ks->observer_arg);
}

int gaz_keyspace_load(struct gaz_keyspace *ks, int64_t revision, struct gaz_status *st)
{
	size_t plen = strlen(ks->prefix);
	uint8_t *end = malloc(plen);
	Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
	Etcdserverpb__RangeResponse *resp = NULL;
	int rc;

	if (!end)
		return gaz_status_set(st, GAZ_ENOMEM, "keyspace load: out of memory");
	gaz_etcd_prefix_end((const uint8_t *)ks->prefix, plen, end);
	req.key.data = (uint8_t *)ks->prefix;
	req.key.len = plen;
	req.range_end.data = end;
	req.range_end.len = plen;
	req.revision = revision;
	rc = gaz_etcd_range(ks->etcd, &req, &resp, st);
	free(end);
	if (rc)
		return rc;

	pthread_rwlock_wrlock(&ks->lock);
	for (size_t i = 0; i < ks->len; i++)
		entry_release(ks, &ks->entries[i]);
	ks->len = 0;
	for (size_t i = 0; i < resp->n_kvs; i++)
		upsert_kv(ks, resp->kvs[i]);
	set_header(ks, resp->header);
	ks->revision = revision ? revision : (resp->header ? resp->header->revision : 0);
	ks->header.revision = ks->revision;
	pthread_rwlock_unlock(&ks->lock);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	publish(ks);
	return 0;
}

static int on_watch(void *arg, const Etcdserverpb__WatchResponse *resp)
{
	struct gaz_keyspace *ks = arg;
	bool changed = false;
	int64_t applied;

	pthread_rwlock_wrlock(&ks->lock);
	set_header(ks, resp->header);
	/* One transaction's events share a revision: compare against the
	 * revision before this response, not the one just advanced to. */
	applied = ks->revision;
	for (size_t i = 0; i < resp->n_events; i++) {
		const Etcdserverpb__Event *ev = resp->events[i];
		if (!ev->kv || ev->kv->mod_revision <= applied)
			continue;
		if (ev->type == ETCDSERVERPB__EVENT__EVENT_TYPE__DELETE) {
			char *k = strndup((const char *)ev->kv->key.data, ev->kv->key.len);
			if (k)
				remove_key(ks, k);
			free(k);
		} else {
			upsert_kv(ks, ev->kv);
		}
		ks->revision = ev->kv->mod_revision;
		changed = true;
	}
	ks->header.revision = ks->revision;
	pthread_rwlock_unlock(&ks->lock);
	if (changed && ks->publisher_started) {
		wake_waiters(ks);
		pthread_mutex_lock(&ks->pub_mu);
		if (!ks->pub_pending) {
			ks->pub_pending = true;
			ks->pub_first_ns = gaz_mono_ns();
			pthread_cond_signal(&ks->pub_cond);
		}
		pthread_mutex_unlock(&ks->pub_mu);
	} else if (changed) {
		publish(ks);
	}
	return 0;
}

/* The publisher thread (a watch delay is set): one publish per delay
 * window that saw changes. */
static void *publisher_main(void *arg)
{
	struct gaz_keyspace *ks = arg;

	pthread_setname_np(pthread_self(), "gaz-ks-publish");
	pthread_mutex_lock(&ks->pub_mu);
	while (!ks->pub_stop) {
		if (!ks->pub_pending) {
			pthread_cond_wait(&ks->pub_cond, &ks->pub_mu);
			continue;
		}
		int64_t due = ks->pub_first_ns + ks->watch_delay_ns;
		if (gaz_mono_ns() < due) {
			struct timespec ts = gaz_abstime_of(due);
			pthread_cond_timedwait(&ks->pub_cond, &ks->pub_mu, &ts);
			continue;
		}
		ks->pub_pending = false;
		pthread_mutex_unlock(&ks->pub_mu);
		if (ks->observer)
			ks->observer(ks->observer_arg);
		pthread_mutex_lock(&ks->pub_mu);
	}
	pthread_mutex_unlock(&ks->pub_mu);
	return NULL;
}

static void on_watch_end(void *arg, int code, const char *why)
{
	struct gaz_keyspace *ks = arg;

	if (code != GAZ_ECANCELLED) {
		gaz_error("keyspace watch failed", "prefix=%s err=%s", ks->prefix, why);
		ks->watch_failed = true;
		publish(ks);
	}
}

/* The watch fell behind a compaction: re-read the whole prefix at the
 * current revision (observers see every difference as one change) and
 * resume from there. Runs on the watch thread. */
static int64_t on_watch_compacted(void *arg)
{
	struct gaz_keyspace *ks = arg;
	struct gaz_status st = {0};

	for (int attempt = 0; attempt < 5; attempt++) {
		if (gaz_keyspace_load(ks, 0, &st) == 0)
			return ks->revision;
		gaz_warn("keyspace re-read failed", "prefix=%s err=%s", ks->prefix, st.msg);
		gaz_status_clear(&st);
		usleep(200000);
	}
	return -1;
}

int gaz_keyspace_watch(struct gaz_keyspace *ks, struct gaz_status *st)
{
	size_t plen = strlen(ks->prefix);
	uint8_t *end = malloc(plen);

	if (!end)
		return gaz_status_set(st, GAZ_ENOMEM, "keyspace watch: out of memory");
	gaz_etcd_prefix_end((const uint8_t *)ks->prefix, plen, end);
	if (ks->watch_delay_ns && !ks->publisher_started)
		ks->publisher_started = pthread_create(&ks->publisher, NULL, publisher_main, ks) == 0;
	ks->watch = gaz_etcd_watch_start_resync(ks->etcd, (const uint8_t *)ks->prefix, plen, end,
						plen, ks->revision + 1, on_watch, on_watch_end,
						on_watch_compacted, ks, st);
	free(end);
	return ks->watch ? 0 : (st && st->code ? st->code : GAZ_EUNAVAIL);
}

void gaz_keyspace_free(struct gaz_keyspace *ks)
{
	if (!ks)
		return;
	if (ks->watch)
		gaz_etcd_watch_stop(ks->watch);
	if (ks->publisher_started) {
		pthread_mutex_lock(&ks->pub_mu);
		ks->pub_stop = true;
		pthread_cond_signal(&ks->pub_cond);
		pthread_mutex_unlock(&ks->pub_mu);
		pthread_join(ks->publisher, NULL);
	}
	for (size_t i = 0; i < ks->len; i++)
		entry_release(ks, &ks->entries[i]);
	free(ks->entries);
	free(ks->prefix);
	if (ks->cleanup)
		ks->cleanup(ks->arg);
	pthread_rwlock_destroy(&ks->lock);
	pthread_cond_destroy(&ks->rev_cond);
	pthread_mutex_destroy(&ks->rev_mu);
	pthread_cond_destroy(&ks->pub_cond);
	pthread_mutex_destroy(&ks->pub_mu);
	gaz_notifier_release(&ks->notifier);
	free(ks);
}

void gaz_keyspace_rlock(struct gaz_keyspace *ks) { pthread_rwlock_rdlock(&ks->lock); }
void gaz_keyspace_runlock(struct gaz_keyspace *ks) { pthread_rwlock_unlock(&ks->lock); }
int64_t gaz_keyspace_revision(const struct gaz_keyspace *ks) { return ks->revision; }

int64_t gaz_keyspace_revision_now(struct gaz_keyspace *ks)
{
	int64_t rev;

	gaz_keyspace_rlock(ks);
	rev = ks->revision;
	gaz_keyspace_runlock(ks);
	return rev;
}
struct gaz_etcd_header gaz_keyspace_header(const struct gaz_keyspace *ks) { return ks->header; }
size_t gaz_keyspace_len(const struct gaz_keyspace *ks) { return ks->len; }
struct gaz_notifier *gaz_keyspace_notifier(struct gaz_keyspace *ks) { return &ks->notifier; }
bool gaz_keyspace_watch_failed(struct gaz_keyspace *ks) { return ks->watch_failed; }

const struct gaz_ks_entry *gaz_keyspace_at(const struct gaz_keyspace *ks, size_t i)
{
	return i < ks->len ? &ks->entries[i] : NULL;
}

const struct gaz_ks_entry *gaz_keyspace_get(const struct gaz_keyspace *ks, const char *key)
{
	bool found;
	size_t i = search(ks, key, &found);

	return found ? &ks->entries[i] : NULL;
}

void gaz_keyspace_prefix(const struct gaz_keyspace *ks, const char *prefix, size_t *begin,
			 size_t *end)
{
	bool found;
	size_t plen = strlen(prefix), i = search(ks, prefix, &found);

	*begin = i;
	while (i < ks->len && !strncmp(ks->entries[i].key, prefix, plen))
		i++;
	*end = i;
}

int gaz_keyspace_wait_revision(struct gaz_keyspace *ks, int64_t revision, int64_t deadline_ns)
{
	struct timespec ts = gaz_abstime_of(deadline_ns);
	int rc = 0;

	pthread_mutex_lock(&ks->rev_mu);
	for (;;) {
		int64_t cur;
		pthread_rwlock_rdlock(&ks->lock);
		cur = ks->revision;
		pthread_rwlock_unlock(&ks->lock);
		if (cur >= revision || ks->watch_failed)
			break;
		if (pthread_cond_timedwait(&ks->rev_cond, &ks->rev_mu, &ts)) {
			rc = GAZ_ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&ks->rev_mu);
	return rc;
}
