/*
 * informer.h - a cache of one resource kind kept current by list-then-
 * watch, as client-go's reflector and informer: LIST (paged), remember the
 * list's resourceVersion, WATCH from it with bookmarks, re-watch from the
 * last seen version when the server ends the watch, and LIST again (a
 * relist) when the version has expired: HTTP 410 Gone on the watch
 * request or an in-stream ERROR event with code 410 (k8s.md §5.3, case
 * BR-25). Other errors back off (200 ms doubling to 30 s) and re-watch;
 * after 5 failures in a row it relists.
 *
 * Every change reaches on_change(key, old, obj) with key "namespace/name",
 * old the previously cached object (NULL when new) and obj the new object
 * (NULL when deleted); a relist reports every key it finds and every
 * cached key it no longer finds, with what the cache held before. on_change runs on
 * the informer's thread without the cache lock held; it must not block
 * for long (it should only enqueue).
 *
 * Cached objects are immutable once stored: readers get new references.
 */
#ifndef GAZ_OPERATOR_INFORMER_H
#define GAZ_OPERATOR_INFORMER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "common/err.h"
#include "operator/kube.h"

typedef void (*gaz_informer_change_fn)(void *arg, const char *key, const json_t *old,
				       const json_t *obj);

struct gaz_informer_opts {
	struct gaz_kube *kube;          /* borrowed; must outlive the informer */
	const char *api_path;           /* "/apis/gazette-c.dev/v1alpha1" */
	const char *plural;             /* "journalspecs" */
	const char *namespace;          /* NULL or "" = all namespaces */
	const char *label_selector;     /* NULL or "" = every object; else a
	                                 * labelSelector ("app=gazette,tier in
	                                 * (a,b)") applied to list and watch */
	int64_t watch_timeout_s;        /* server-side timeoutSeconds of each
	                                 * watch; 0 = 300 */
	gaz_informer_change_fn on_change;
	void *arg;
};

struct gaz_informer;

/* gaz_informer_start copies `o` (strings too) and starts the thread.
 * NULL with st set on failure (GAZ_ENOMEM, GAZ_EINVAL). */
struct gaz_informer *gaz_informer_start(const struct gaz_informer_opts *o, struct gaz_status *st);

/* gaz_informer_stop ends the watch (within about a second) and joins the
 * thread, then frees the cache. */
void gaz_informer_stop(struct gaz_informer *inf);

/* gaz_informer_synced: a first list has completed. */
bool gaz_informer_synced(struct gaz_informer *inf);

/* gaz_informer_get returns a new reference to the cached object of `key`,
 * or NULL. Thread-safe. */
json_t *gaz_informer_get(struct gaz_informer *inf, const char *key);

/* gaz_informer_snapshot returns a new JSON object mapping every key to
 * its object (new references), a consistent copy. NULL on OOM. */
json_t *gaz_informer_snapshot(struct gaz_informer *inf);

/* Relists done since start (the first list excluded). */
int64_t gaz_informer_relists(struct gaz_informer *inf);

/* gaz_object_key writes "namespace/name" of a Kubernetes object into
 * buf[cap]; returns buf, or NULL if the object has no name. Pure. */
char *gaz_object_key(const json_t *obj, char *buf, size_t cap);

#endif
