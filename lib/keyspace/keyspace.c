/*
 * keyspace.c - the watched mirror of an etcd prefix. See keyspace.h.
 *
 * Invariants: `entries` is sorted by key bytes with no duplicates; every
 * entry has a non-NULL decoded value; `revision` never decreases. Events at
 * or below the current revision are ignored (a watch resumed after a
 * reconnect may replay the last one). Each response is applied as one
 * batch (apply_batch): in-place changes, then a single merge.
 *
 * The lock (a rwlock) guards the entries, the revision, the header and
 * the change log (log, log_head, log_len, log_floor).
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
#include "rpc/rpc.h"

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
	struct gaz_ks_entry **entries;  /* each its own allocation: a merge moves pointers */
	size_t len, cap;
	/* The change log (gaz_keyspace_changes): a ring of log_cap records
	 * from log_head; complete for revisions above log_floor. */
	struct ks_change {
		char *key;
		int64_t revision;
		enum gaz_ks_change kind;
	} *log;
	size_t log_cap, log_head, log_len;
	int64_t log_floor;
	int64_t revision;
	struct gaz_etcd_header header;

	pthread_mutex_t rev_mu; /* guards rev_cond's waits and rev_waiters */
	pthread_cond_t rev_cond;
	/* Calls waiting for a revision (gaz_keyspace_wait_call), each woken
	 * only once the mirror reaches it: thousands of appends waiting at
	 * their etcd writes' revisions must not all wake at every update. */
	struct ks_rev_waiter {
		int64_t revision;
		struct gaz_rpc_call *call;
		struct ks_rev_waiter *prev, *next;
	} *rev_waiters;
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
	if (!e)
		return;
	if (e->decoded)
		ks->free_fn(ks->arg, e->decoded);
	free(e->key);
	free(e);
}

/* Binary search: index of `key` or of where it would be inserted. */
static size_t search(const struct gaz_keyspace *ks, const char *key, bool *found)
{
	size_t lo = 0, hi = ks->len;

	*found = false;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(ks->entries[mid]->key, key);
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

/* One key's change within an applied batch: the last event of the key
 * (the states between are never seen by readers: the write lock covers
 * the whole batch). kv NULL: a delete. */
struct batch_op {
	const uint8_t *key;
	size_t key_len, order;
	const Etcdserverpb__KeyValue *kv;
};

static int batch_cmp(const void *pa, const void *pb)
{
	const struct batch_op *a = pa, *b = pb;
	size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
	int c = memcmp(a->key, b->key, n);

	if (!c)
		c = a->key_len < b->key_len ? -1 : a->key_len > b->key_len;
	if (!c)
		c = a->order < b->order ? -1 : a->order > b->order;
	return c;
}

/* Records a change of `key` at `revision` in the change log (a ring of
 * ks->log_cap); an overwritten record moves log_floor to its revision. */
static void log_change(struct gaz_keyspace *ks, const char *key, int64_t revision, enum gaz_ks_change kind)
{
	struct ks_change *c;
	char *k;

	if (!ks->log_cap || !revision)
		return;
	if (!(k = strdup(key))) {
		ks->log_floor = revision; /* a lost record: readers before it rescan */
		return;
	}
	c = &ks->log[(ks->log_head + ks->log_len) % ks->log_cap];
	if (ks->log_len == ks->log_cap) {
		c = &ks->log[ks->log_head];
		if (c->revision > ks->log_floor)
			ks->log_floor = c->revision;
		free(c->key);
		ks->log_head = (ks->log_head + 1) % ks->log_cap;
		ks->log_len--;
	}
	c->key = k;
	c->revision = revision;
	c->kind = kind;
	ks->log_len++;
}

static void log_reset(struct gaz_keyspace *ks, int64_t revision)
{
	for (size_t i = 0; i < ks->log_len; i++)
		free(ks->log[(ks->log_head + i) % ks->log_cap].key);
	ks->log_head = ks->log_len = 0;
	ks->log_floor = revision;
}

/* apply_batch applies `ops` (any order; several of one key allowed, the
 * last in `order` wins) with the write lock held, in time linear in the
 * mirror's size plus n log n: changes of present keys in place, then one
 * pass that moves the runs between removed and added keys (an insertion
 * per key would move the whole array's tail each time: hours at 100,000
 * journals), comparing no key (positions come from the searches). A put
 * whose value does not decode removes the key, as it no longer has a valid
 * meaning. Changes go to the change log at `revision` (0: not logged). */
static void apply_batch(struct gaz_keyspace *ks, struct batch_op *ops, size_t n, int64_t revision)
{
	struct gaz_ks_entry **ins = NULL;
	size_t n_ins = 0, n_del = 0, *dels = NULL, *ins_at = NULL;

	if (!n)
		return;
	qsort(ops, n, sizeof(*ops), batch_cmp);
	ins = malloc(n * sizeof(*ins));
	ins_at = malloc(n * sizeof(*ins_at));
	dels = malloc(n * sizeof(*dels));
	if (!ins || !ins_at || !dels) {
		free(ins), free(ins_at), free(dels);
		ins = NULL, ins_at = NULL, dels = NULL;
	}
	for (size_t i = 0; i < n; i++) {
		const struct batch_op *op = &ops[i];
		struct gaz_ks_entry *e = NULL;
		struct gaz_status st = {0};
		char *key;
		bool found;
		size_t at;

		if (i + 1 < n && op->key_len == ops[i + 1].key_len && !memcmp(op->key, ops[i + 1].key, op->key_len))
			continue; /* a later event of the same key wins */
		if (!(key = strndup((const char *)op->key, op->key_len)))
			continue;
		at = search(ks, key, &found);
		if (op->kv) {
			void *decoded = ks->decode(ks->arg, key, op->kv->value.data, op->kv->value.len, &st);
			if (!decoded)
				gaz_warn("ignoring undecodable key", "key=%s err=%s", key, st.msg);
			else if (!(e = calloc(1, sizeof(*e))))
				ks->free_fn(ks->arg, decoded);
			if (e) {
				e->key = key;
				e->decoded = decoded;
				e->create_revision = op->kv->create_revision;
				e->mod_revision = op->kv->mod_revision;
				e->version = op->kv->version;
				e->lease = op->kv->lease;
				key = NULL;
			}
		}
		if (found && e) {
			log_change(ks, e->key, revision, GAZ_KS_UPDATED);
			entry_release(ks, ks->entries[at]);
			ks->entries[at] = e;
		} else if (found && dels) {
			log_change(ks, ks->entries[at]->key, revision, GAZ_KS_DELETED);
			dels[n_del++] = at; /* released after the searches */
		} else if (e && ins) {
			log_change(ks, e->key, revision, GAZ_KS_CREATED);
			ins_at[n_ins] = at; /* before deletions; ascending, as ops are in key order */
			ins[n_ins++] = e;
		} else {
			entry_release(ks, e);
		}
		free(key);
	}
	/* Deletions: the runs between deleted indexes (ascending, as the ops
	 * are in key order) move down; an insertion point moves down by the
	 * deletions before it. */
	for (size_t i = 0, k = 0, w = n_del ? dels[0] : 0; i < n_del; i++) {
		size_t from = dels[i] + 1, to = i + 1 < n_del ? dels[i + 1] : ks->len;
		entry_release(ks, ks->entries[dels[i]]);
		for (; k < n_ins && ins_at[k] <= dels[i]; k++)
			ins_at[k] -= i;
		memmove(&ks->entries[w], &ks->entries[from], (to - from) * sizeof(*ks->entries));
		w += to - from;
		if (i + 1 == n_del)
			for (; k < n_ins; k++)
				ins_at[k] -= n_del;
	}
	ks->len -= n_del;
	if (n_ins && ks->len + n_ins > ks->cap) {
		size_t ncap = ks->cap ? ks->cap : 64;
		while (ncap < ks->len + n_ins)
			ncap *= 2;
		void *p = realloc(ks->entries, ncap * sizeof(*ks->entries));
		if (!p) {
			for (size_t i = 0; i < n_ins; i++)
				entry_release(ks, ins[i]);
			n_ins = 0;
		} else {
			ks->entries = p;
			ks->cap = ncap;
		}
	}
	/* Insertions, from the back: each block of old entries moves up by
	 * the insertions before it, with no key compared. */
	for (size_t k = n_ins, r = ks->len; k > 0; k--) {
		size_t at = ins_at[k - 1];
		memmove(&ks->entries[at + k], &ks->entries[at], (r - at) * sizeof(*ks->entries));
		ks->entries[at + k - 1] = ins[k - 1];
		r = at;
	}
	ks->len += n_ins;
	free(ins_at);
	free(ins);
	free(dels);
}

static void set_header(struct gaz_keyspace *ks, const Etcdserverpb__ResponseHeader *h)
{
	if (!h)
		return;
	ks->header.cluster_id = h->cluster_id;
	ks->header.member_id = h->member_id;
	ks->header.raft_term = h->raft_term;
}

/* wake_waiters wakes revision waiters (the calls among them whose
 * revision the mirror reached) and the notifier's (requests). */
static void wake_waiters(struct gaz_keyspace *ks)
{
	int64_t cur = gaz_keyspace_revision_now(ks);

	pthread_mutex_lock(&ks->rev_mu);
	pthread_cond_broadcast(&ks->rev_cond);
	for (struct ks_rev_waiter *w = ks->rev_waiters; w; w = w->next)
		if (w->revision <= cur)
			gaz_rpc_wake(w->call);
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

/* Keys per Range page of gaz_keyspace_load: a page stays far below the
 * RPC receive limit (64 MiB) even with large specs, where one Range of
 * 100,000 journals' keys would not. */
#define LOAD_PAGE_KEYS 10000

/* load_page reads up to LOAD_PAGE_KEYS keys of the prefix from `from`
 * (inclusive) at `revision` (0: current). */
static int load_page(struct gaz_keyspace *ks, const uint8_t *from, size_t from_len, int64_t revision,
		     Etcdserverpb__RangeResponse **resp, struct gaz_status *st)
{
	size_t plen = strlen(ks->prefix);
	uint8_t *end = malloc(plen);
	Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
	int rc;

	if (!end)
		return gaz_status_set(st, GAZ_ENOMEM, "keyspace load: out of memory");
	gaz_etcd_prefix_end((const uint8_t *)ks->prefix, plen, end);
	req.key.data = (uint8_t *)from;
	req.key.len = from_len;
	req.range_end.data = end;
	req.range_end.len = plen;
	req.revision = revision;
	req.limit = LOAD_PAGE_KEYS;
	rc = gaz_etcd_range(ks->etcd, &req, resp, st);
	free(end);
	return rc;
}

int gaz_keyspace_load(struct gaz_keyspace *ks, int64_t revision, struct gaz_status *st)
{
	Etcdserverpb__RangeResponse **pages = NULL;
	struct batch_op *ops = NULL;
	size_t n_pages = 0, n_ops = 0;
	uint8_t *from = (uint8_t *)strdup(ks->prefix);
	size_t from_len = strlen(ks->prefix);
	int rc = 0;

	/* Pages at one revision (the first page's, when none is given), each
	 * from just past the last key of the one before. */
	for (bool more = true; more && from && !rc;) {
		Etcdserverpb__RangeResponse *resp = NULL, **np;
		if ((rc = load_page(ks, from, from_len, revision, &resp, st)))
			break;
		if (!(np = realloc(pages, (n_pages + 1) * sizeof(*pages)))) {
			protobuf_c_message_free_unpacked(&resp->base, NULL);
			rc = gaz_status_set(st, GAZ_ENOMEM, "keyspace load: out of memory");
			break;
		}
		pages = np;
		pages[n_pages++] = resp;
		if (!revision)
			revision = resp->header ? resp->header->revision : 0;
		more = resp->more && resp->n_kvs > 0;
		if (more) {
			const ProtobufCBinaryData *last = &resp->kvs[resp->n_kvs - 1]->key;
			uint8_t *nf = realloc(from, last->len + 1);
			if (!nf) {
				rc = gaz_status_set(st, GAZ_ENOMEM, "keyspace load: out of memory");
				break;
			}
			from = nf;
			memcpy(from, last->data, last->len);
			from[last->len] = 0; /* the next key after `last` */
			from_len = last->len + 1;
		}
		n_ops += resp->n_kvs;
	}
	if (!from && !rc)
		rc = gaz_status_set(st, GAZ_ENOMEM, "keyspace load: out of memory");
	free(from);
	if (!rc && n_ops && !(ops = calloc(n_ops, sizeof(*ops))))
		rc = gaz_status_set(st, GAZ_ENOMEM, "keyspace load: out of memory");
	if (!rc) {
		size_t k = 0;
		for (size_t p = 0; p < n_pages; p++)
			for (size_t i = 0; i < pages[p]->n_kvs; i++, k++)
				ops[k] = (struct batch_op){pages[p]->kvs[i]->key.data, pages[p]->kvs[i]->key.len, k,
							   pages[p]->kvs[i]};
		pthread_rwlock_wrlock(&ks->lock);
		for (size_t i = 0; i < ks->len; i++)
			entry_release(ks, ks->entries[i]);
		ks->len = 0;
		apply_batch(ks, ops, n_ops, 0);
		set_header(ks, n_pages ? pages[0]->header : NULL);
		ks->revision = revision;
		ks->header.revision = ks->revision;
		log_reset(ks, revision);
		pthread_rwlock_unlock(&ks->lock);
	}
	free(ops);
	for (size_t p = 0; p < n_pages; p++)
		protobuf_c_message_free_unpacked(&pages[p]->base, NULL);
	free(pages);
	if (!rc)
		publish(ks);
	return rc;
}

static int on_watch(void *arg, const Etcdserverpb__WatchResponse *resp)
{
	struct gaz_keyspace *ks = arg;
	struct batch_op *ops = resp->n_events ? calloc(resp->n_events, sizeof(*ops)) : NULL;
	size_t n = 0;
	int64_t applied, first = 0;

	pthread_rwlock_wrlock(&ks->lock);
	set_header(ks, resp->header);
	/* One transaction's events share a revision: compare against the
	 * revision before this response, not the one just advanced to. */
	applied = ks->revision;
	for (size_t i = 0; i < resp->n_events; i++) {
		const Etcdserverpb__Event *ev = resp->events[i];
		if (!ev->kv || ev->kv->mod_revision <= applied)
			continue;
		if (ops)
			ops[n++] = (struct batch_op){ev->kv->key.data, ev->kv->key.len, i,
						     ev->type == ETCDSERVERPB__EVENT__EVENT_TYPE__DELETE ? NULL : ev->kv};
		if (!first)
			first = ev->kv->mod_revision;
		ks->revision = ev->kv->mod_revision;
	}
	/* A response may span revisions; its changes are logged at its last
	 * (readers consume whole responses), and a reader that had seen only
	 * part of it cannot exist, as the lock covers the batch. */
	if (first && !ops)
		ks->log_floor = ks->revision; /* out of memory: the batch is lost to readers of the log */
	apply_batch(ks, ops, n, ks->revision);
	ks->header.revision = ks->revision;
	pthread_rwlock_unlock(&ks->lock);
	free(ops);
	if (first && ks->publisher_started) {
		wake_waiters(ks);
		pthread_mutex_lock(&ks->pub_mu);
		if (!ks->pub_pending) {
			ks->pub_pending = true;
			ks->pub_first_ns = gaz_mono_ns();
			pthread_cond_signal(&ks->pub_cond);
		}
		pthread_mutex_unlock(&ks->pub_mu);
	} else if (first) {
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
		entry_release(ks, ks->entries[i]);
	free(ks->entries);
	log_reset(ks, 0);
	free(ks->log);
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
	return i < ks->len ? ks->entries[i] : NULL;
}

const struct gaz_ks_entry *gaz_keyspace_get(const struct gaz_keyspace *ks, const char *key)
{
	bool found;
	size_t i = search(ks, key, &found);

	return found ? ks->entries[i] : NULL;
}

void gaz_keyspace_prefix(const struct gaz_keyspace *ks, const char *prefix, size_t *begin,
			 size_t *end)
{
	bool found;
	size_t plen = strlen(prefix), lo = search(ks, prefix, &found), hi = ks->len;

	/* The keys holding the prefix are contiguous from `lo`: the end is
	 * the first key past them (binary search, not a walk: the assignment
	 * prefix spans most of the mirror). */
	*begin = lo;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strncmp(ks->entries[mid]->key, prefix, plen) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*end = lo;
}

bool gaz_keyspace_changes(const struct gaz_keyspace *ks, int64_t since, gaz_ks_change_fn fn, void *arg)
{
	if (!ks->log_cap || since < ks->log_floor)
		return false;
	for (size_t i = 0; i < ks->log_len; i++) {
		const struct ks_change *c = &ks->log[(ks->log_head + i) % ks->log_cap];
		if (c->revision > since)
			fn(arg, c->key, c->kind);
	}
	return true;
}

void gaz_keyspace_set_change_log(struct gaz_keyspace *ks, size_t cap)
{
	free(ks->log);
	ks->log = cap ? calloc(cap, sizeof(*ks->log)) : NULL;
	ks->log_cap = ks->log ? cap : 0;
	ks->log_head = ks->log_len = 0;
	ks->log_floor = 0;
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

int gaz_keyspace_wait_call(struct gaz_keyspace *ks, struct gaz_rpc_call *call, int64_t revision,
			   int64_t deadline_ns)
{
	struct ks_rev_waiter w = {.revision = revision, .call = call};
	int rc = 0;

	if (!call)
		return gaz_keyspace_wait_revision(ks, revision, deadline_ns);
	/* Listed before the revision is read: an update after the read
	 * wakes the call, and gaz_rpc_wait keeps a wake that came first. */
	pthread_mutex_lock(&ks->rev_mu);
	if ((w.next = ks->rev_waiters))
		w.next->prev = &w;
	ks->rev_waiters = &w;
	pthread_mutex_unlock(&ks->rev_mu);
	while (gaz_keyspace_revision_now(ks) < revision && !(rc = gaz_rpc_wait(call, deadline_ns)))
		;
	pthread_mutex_lock(&ks->rev_mu);
	if (w.prev)
		w.prev->next = w.next;
	else
		ks->rev_waiters = w.next;
	if (w.next)
		w.next->prev = w.prev;
	pthread_mutex_unlock(&ks->rev_mu);
	return rc;
}
