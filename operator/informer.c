/*
 * informer.c - list-then-watch cache of one resource kind (see informer.h).
 *
 * States of the thread:
 *   LIST  --ok-->  WATCH(rv)  --server ended-->  WATCH(rv')
 *     ^              |  410 Gone (HTTP or ERROR event)  --> LIST (relist)
 *     |              |  other error --> backoff --> WATCH(rv'), 5 in a row --> LIST
 *     +--error, backoff
 * rv' is the resourceVersion of the last event or bookmark seen, so a
 * re-watch never goes back to an expired version once a newer one is known.
 *
 * Lock: mu guards cache, rv, synced; on_change is called without it.
 */
#include "operator/informer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/metrics.h"

#define BACKOFF_MIN_MS 200
#define BACKOFF_MAX_MS 30000
#define FAILS_BEFORE_RELIST 5
#define LIST_PAGE 500

struct gaz_informer {
	struct gaz_kube *kube;
	char *base;                 /* collection path, no query */
	char *selector;             /* "&labelSelector=<escaped>" or "" */
	char *plural;
	int64_t watch_timeout_s;
	gaz_informer_change_fn on_change;
	void *arg;
	pthread_t thread;
	atomic_bool stop;
	pthread_mutex_t mu;
	json_t *cache;              /* key -> object */
	char rv[64];                /* resourceVersion to watch from */
	bool synced;
	atomic_llong relists;
	bool expired;               /* the watch saw a 410 ERROR event */
	struct gaz_metric *m_events, *m_relists;
};

char *gaz_object_key(const json_t *obj, char *buf, size_t cap)
{
	const json_t *md = json_object_get(obj, "metadata");
	const char *ns = json_string_value(json_object_get(md, "namespace"));
	const char *name = json_string_value(json_object_get(md, "name"));

	if (!name)
		return NULL;
	snprintf(buf, cap, "%s/%s", ns ? ns : "", name);
	return buf;
}

/* Sleeps `ms`, waking early when stopping. */
static void nap(struct gaz_informer *inf, int64_t ms)
{
	int64_t end = gaz_deadline_in(ms);

	while (!atomic_load(&inf->stop) && gaz_mono_ns() < end) {
		struct timespec ts = {0, 50 * 1000000L};
		nanosleep(&ts, NULL);
	}
}

static int64_t backoff_ms(int fails)
{
	int64_t ms = BACKOFF_MIN_MS;

	for (int i = 1; i < fails && ms < BACKOFF_MAX_MS; i++)
		ms *= 2;
	if (ms > BACKOFF_MAX_MS)
		ms = BACKOFF_MAX_MS;
	return ms / 2 + rand() % (ms / 2 + 1); /* jitter: [ms/2, ms] */
}

/* Stores `obj` (or removes `key` when NULL) and reports it. */
static void apply_change(struct gaz_informer *inf, const char *key, json_t *obj)
{
	json_t *old;

	pthread_mutex_lock(&inf->mu);
	old = json_incref(json_object_get(inf->cache, key));
	if (obj)
		json_object_set(inf->cache, key, obj);
	else
		json_object_del(inf->cache, key);
	pthread_mutex_unlock(&inf->mu);
	if (inf->on_change)
		inf->on_change(inf->arg, key, old, obj);
	json_decref(old);
}

/* ---- LIST ---------------------------------------------------------------- */

static int list_page(struct gaz_informer *inf, const char *cont, json_t *into, char *rv,
		     char *next, struct gaz_status *st)
{
	char path[2048], key[600];
	json_t *resp = NULL;
	char *esc = cont && *cont ? gaz_kube_escape(cont) : NULL;
	int rc;

	snprintf(path, sizeof(path), "%s?limit=%d%s%s%s", inf->base, LIST_PAGE, inf->selector,
		 esc ? "&continue=" : "", esc ? esc : "");
	free(esc);
	if ((rc = gaz_kube_request(inf->kube, "GET", path, NULL, NULL, &resp, NULL, st)))
		return rc;
	json_t *items = json_object_get(resp, "items"), *it;
	json_t *md = json_object_get(resp, "metadata");
	size_t i;
	json_array_foreach(items, i, it) {
		if (gaz_object_key(it, key, sizeof(key)))
			json_object_set(into, key, it);
	}
	snprintf(rv, 64, "%s", json_string_value(json_object_get(md, "resourceVersion")) ?: "");
	snprintf(next, 1024, "%s", json_string_value(json_object_get(md, "continue")) ?: "");
	json_decref(resp);
	return 0;
}

/* Lists everything, swaps the cache, reports every key old and new. */
static int relist(struct gaz_informer *inf, struct gaz_status *st)
{
	json_t *fresh = json_object(), *old, *v;
	char rv[64] = "", next[1024] = "";
	const char *key;
	void *tmp;
	int rc;

	if (!fresh)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	do {
		char cont[1024];
		snprintf(cont, sizeof(cont), "%s", next);
		if ((rc = list_page(inf, cont, fresh, rv, next, st))) {
			json_decref(fresh);
			return rc;
		}
	} while (next[0] && !atomic_load(&inf->stop));
	pthread_mutex_lock(&inf->mu);
	old = inf->cache;
	inf->cache = fresh;
	snprintf(inf->rv, sizeof(inf->rv), "%s", rv);
	inf->synced = true;
	pthread_mutex_unlock(&inf->mu);
	gaz_info("listed", "resource=%s objects=%zu resourceVersion=%s", inf->plural,
		 json_object_size(fresh), rv);
	json_object_foreach_safe(old, tmp, key, v) {
		if (!json_object_get(fresh, key) && inf->on_change)
			inf->on_change(inf->arg, key, v, NULL);
	}
	json_object_foreach(fresh, key, v) {
		if (inf->on_change)
			inf->on_change(inf->arg, key, json_object_get(old, key), v);
	}
	json_decref(old);
	return 0;
}

/* ---- WATCH --------------------------------------------------------------- */

static int on_event(void *arg, const struct gaz_kube_event *ev)
{
	struct gaz_informer *inf = arg;
	static const char *const names[] = {"", "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};
	char key[600];

	gaz_metric_inc(gaz_metric_with(inf->m_events, inf->plural, names[ev->type]));
	if (ev->type == GAZ_KUBE_ERROR) {
		const char *msg = json_string_value(json_object_get(ev->object, "message"));
		if (ev->code == 410) {
			inf->expired = true;
			return GAZ_ERANGE;
		}
		gaz_warn("watch error event", "resource=%s code=%ld message=%s", inf->plural,
			 ev->code, msg ? msg : "");
		return GAZ_EPROTO;
	}
	if (ev->resource_version) {
		pthread_mutex_lock(&inf->mu);
		snprintf(inf->rv, sizeof(inf->rv), "%s", ev->resource_version);
		pthread_mutex_unlock(&inf->mu);
	}
	if (ev->type == GAZ_KUBE_BOOKMARK || !gaz_object_key(ev->object, key, sizeof(key)))
		return 0;
	gaz_trace("watch event", "resource=%s type=%s key=%s rv=%s", inf->plural, names[ev->type],
		  key, ev->resource_version ? ev->resource_version : "");
	apply_change(inf, key, ev->type == GAZ_KUBE_DELETED ? NULL : ev->object);
	return 0;
}

static int watch_once(struct gaz_informer *inf, struct gaz_status *st)
{
	char path[2048], rv[64];

	pthread_mutex_lock(&inf->mu);
	snprintf(rv, sizeof(rv), "%s", inf->rv);
	pthread_mutex_unlock(&inf->mu);
	snprintf(path, sizeof(path),
		 "%s?watch=1&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%lld%s",
		 inf->base, rv, (long long)inf->watch_timeout_s, inf->selector);
	inf->expired = false;
	gaz_debug("watching", "resource=%s resourceVersion=%s", inf->plural, rv);
	/* No byte for twice the server's timeout: the connection is dead. */
	return gaz_kube_watch(inf->kube, path, (inf->watch_timeout_s * 2 + 30) * 1000, on_event, inf,
			      &inf->stop, st);
}

/* Watches until a relist is needed (returns) or the informer stops. */
static void watch_loop(struct gaz_informer *inf)
{
	int fails = 0;

	while (!atomic_load(&inf->stop)) {
		struct gaz_status st = {0};
		int64_t t0 = gaz_mono_ns();
		int rc = watch_once(inf, &st);

		if (rc == 0) { /* the server ended the watch: resume from the last version */
			fails = 0;
			if (gaz_mono_ns() - t0 < GAZ_NS_PER_S)
				nap(inf, BACKOFF_MIN_MS); /* never spin on a server that ends at once */
			continue;
		}
		if (rc == GAZ_ECANCELLED)
			return;
		if (rc == GAZ_ERANGE) {
			gaz_info("watch expired (410 Gone); relisting", "resource=%s resourceVersion=%s via=%s",
				 inf->plural, inf->rv, inf->expired ? "event" : "http");
			return;
		}
		if (++fails >= FAILS_BEFORE_RELIST) {
			gaz_warn("watch failed; relisting", "resource=%s err=%s attempt=%d",
				 inf->plural, st.msg, fails);
			return;
		}
		int64_t ms = backoff_ms(fails);
		gaz_warn("watch failed", "resource=%s err=%s attempt=%d retry_in_ms=%lld",
			 inf->plural, st.msg, fails, (long long)ms);
		nap(inf, ms);
	}
}

static void *run(void *arg)
{
	struct gaz_informer *inf = arg;
	int fails = 0;
	bool first = true;

	while (!atomic_load(&inf->stop)) {
		struct gaz_status st = {0};
		if (relist(inf, &st)) {
			int64_t ms = backoff_ms(++fails);
			if (st.code != GAZ_ECANCELLED)
				gaz_warn("list failed", "resource=%s err=%s attempt=%d retry_in_ms=%lld",
					 inf->plural, st.msg, fails, (long long)ms);
			nap(inf, ms);
			continue;
		}
		if (!first) {
			atomic_fetch_add(&inf->relists, 1);
			gaz_metric_inc(gaz_metric_with(inf->m_relists, inf->plural));
		}
		first = false;
		fails = 0;
		watch_loop(inf);
	}
	return NULL;
}

struct gaz_informer *gaz_informer_start(const struct gaz_informer_opts *o, struct gaz_status *st)
{
	struct gaz_informer *inf = calloc(1, sizeof(*inf));
	int n;

	if (!inf || !(inf->cache = json_object()) || !(inf->plural = strdup(o->plural)))
		goto oom;
	if (o->namespace && *o->namespace)
		n = asprintf(&inf->base, "%s/namespaces/%s/%s", o->api_path, o->namespace, o->plural);
	else
		n = asprintf(&inf->base, "%s/%s", o->api_path, o->plural);
	if (n < 0) {
		inf->base = NULL;
		goto oom;
	}
	if (o->label_selector && *o->label_selector) {
		char *esc = gaz_kube_escape(o->label_selector);
		n = esc ? asprintf(&inf->selector, "&labelSelector=%s", esc) : -1;
		free(esc);
	} else {
		n = (inf->selector = strdup("")) ? 0 : -1;
	}
	if (n < 0) {
		inf->selector = NULL;
		goto oom;
	}
	inf->kube = o->kube;
	inf->watch_timeout_s = o->watch_timeout_s > 0 ? o->watch_timeout_s : 300;
	inf->on_change = o->on_change;
	inf->arg = o->arg;
	inf->m_events = gaz_metrics_counter(NULL, "gazette_operator_watch_events_total",
					    "Watch events received, by resource and type", "resource,type");
	inf->m_relists = gaz_metrics_counter(NULL, "gazette_operator_relists_total",
					     "Lists after the first (410 Gone or repeated watch failures)",
					     "resource");
	pthread_mutex_init(&inf->mu, NULL);
	if (pthread_create(&inf->thread, NULL, run, inf)) {
		pthread_mutex_destroy(&inf->mu);
		goto oom;
	}
	return inf;
oom:
	if (inf) {
		json_decref(inf->cache);
		free(inf->plural);
		free(inf->base);
		free(inf->selector);
		free(inf);
	}
	gaz_status_set(st, GAZ_ENOMEM, "starting the %s informer: out of resources", o->plural);
	return NULL;
}

void gaz_informer_stop(struct gaz_informer *inf)
{
	if (!inf)
		return;
	atomic_store(&inf->stop, true);
	pthread_join(inf->thread, NULL);
	pthread_mutex_destroy(&inf->mu);
	json_decref(inf->cache);
	free(inf->plural);
	free(inf->base);
	free(inf->selector);
	free(inf);
}

bool gaz_informer_synced(struct gaz_informer *inf)
{
	pthread_mutex_lock(&inf->mu);
	bool s = inf->synced;
	pthread_mutex_unlock(&inf->mu);
	return s;
}

json_t *gaz_informer_get(struct gaz_informer *inf, const char *key)
{
	pthread_mutex_lock(&inf->mu);
	json_t *o = json_incref(json_object_get(inf->cache, key));
	pthread_mutex_unlock(&inf->mu);
	return o;
}

json_t *gaz_informer_snapshot(struct gaz_informer *inf)
{
	pthread_mutex_lock(&inf->mu);
	json_t *copy = json_copy(inf->cache); /* shallow: values are shared references */
	pthread_mutex_unlock(&inf->mu);
	return copy;
}

int64_t gaz_informer_relists(struct gaz_informer *inf)
{
	return atomic_load(&inf->relists);
}
