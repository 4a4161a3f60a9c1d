/*
 * drain.c - broker drains, pod annotations, the pod finalizer and the
 * PodDisruptionBudget; see drain.h for what and why.
 *
 * One pass (evaluate) reads a consistent view of the keyspace mirror into
 * a small summary (members, their assignment counts, under-replicated
 * journals) under the read lock, then acts on the API server and etcd
 * without it, in an order that keeps the budget safe: exiting marks first,
 * then the budget, then the pods' reports and finalizers (so the budget is
 * 0 before any pod says Draining, and 1 again before a drained pod is
 * released). Every write is idempotent and guarded: the exiting mark by
 * the member key's ModRevision, finalizers by the pod's resourceVersion;
 * a lost race is retried by the next pass.
 *
 * A pod's drain, as reported in its gazette-c.dev/drain annotation:
 *
 *   (running) --pod deleted--> Draining --no assignments--> HandedOff
 *                                 |                            |
 *                                 +------member key gone-------+--> Drained
 *
 * HandedOff: the member holds no assignment and waits for its process to
 * persist its spools and revoke its lease. NoMember: terminating, and no
 * member key names the pod (never announced): nothing to drain.
 *
 * Must not call: the JournalSpec reconciler (it has its own thread).
 */
#include "operator/drain.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/metrics.h"
#include "etcd/txn.h"
#include "keyspace/journals.h"
#include "operator/operator.h"

#define MIN_PASS_GAP_MS 200

struct gaz_drain {
	struct gaz_op *op;
	struct gaz_drain_config cfg;
	char *ns;
	json_t *match_labels;          /* PDB selector; NULL without a PDB */
	struct gaz_informer *pods;
	struct gaz_keyspace *ks;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool dirty;                    /* a pod or the keyspace changed */
	atomic_bool stop;
	int64_t pdb_max_unavailable;   /* last written; -1 = unknown */
	int64_t pdb_checked_ns;        /* monotonic time of the last PDB read */
	struct gaz_metric *m_in_progress, *m_under, *m_pdb, *m_assign, *m_done, *m_marked;
};

/* One member as the pass saw it. */
struct member {
	char *key, *zone, *suffix;
	int64_t mod_revision;
	bool exiting;
	size_t assignments;
	Protocol__BrokerSpec *spec;    /* copy, for the exiting write */
};

struct view {
	struct member *m;
	size_t n;
	size_t under_replicated;       /* journals below desired live replicas */
	size_t exiting;                /* members marked exiting */
};

static void view_release(struct view *v)
{
	for (size_t i = 0; i < v->n; i++) {
		free(v->m[i].key);
		free(v->m[i].zone);
		free(v->m[i].suffix);
		if (v->m[i].spec)
			protobuf_c_message_free_unpacked(&v->m[i].spec->base, NULL);
	}
	free(v->m);
	memset(v, 0, sizeof(*v));
}

static void wake(struct gaz_drain *d)
{
	pthread_mutex_lock(&d->mu);
	d->dirty = true;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->mu);
}

static void on_pod(void *arg, const char *key, const json_t *old, const json_t *obj)
{
	(void)key, (void)old, (void)obj;
	wake(arg);
}

static void on_keyspace(void *arg) { wake(arg); }

/* Trims spaces at both ends of `s` in place; returns the first non-space. */
static char *trim(char *s)
{
	char *e = s + strlen(s);

	while (*s == ' ')
		s++;
	while (e > s && e[-1] == ' ')
		*--e = '\0';
	return s;
}

json_t *gaz_drain_parse_selector(const char *selector)
{
	json_t *out = json_object();
	char *copy = strdup(selector ? selector : ""), *item = copy;
	bool ok = out && copy && *trim(copy);

	/* Every comma-separated item must be "key=value" (no empty items). */
	while (ok && item) {
		char *comma = strchr(item, ',');
		if (comma)
			*comma = '\0';
		char *eq = strchr(item, '=');
		if (!eq || eq[1] == '=' || (eq > item && eq[-1] == '!')) {
			ok = false;
			break;
		}
		*eq = '\0';
		char *k = trim(item), *v = trim(eq + 1);
		ok = *k && !strpbrk(k, " ()!") && !strpbrk(v, " ()!=") &&
		     !json_object_set_new(out, k, json_string(v));
		item = comma ? comma + 1 : NULL;
	}
	free(copy);
	if (!ok) {
		json_decref(out);
		return NULL;
	}
	return out;
}

/* ---- the keyspace summary ---------------------------------------------------- */

/* Gazette's desired replication (facts §4.3). */
static int64_t desired(const struct gaz_drain *d, const Protocol__JournalSpec *spec)
{
	int64_t r = spec->replication;

	if (spec->suspend && spec->suspend->level == PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__PARTIAL)
		r = 1;
	else if (spec->suspend && spec->suspend->level == PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__FULL)
		r = 0;
	return r < d->cfg.max_replication ? r : d->cfg.max_replication;
}

/* A live replica: its member is announced, not exiting, and its stored
 * route agrees with the assignments (it has been synchronised). */
static size_t live_replicas(struct gaz_drain *d, const char *root, const struct gaz_route *r)
{
	size_t live = 0;

	for (size_t i = 0; i < r->n; i++) {
		const struct gaz_ks_entry *e = gaz_ks_member(d->ks, root, r->zone[i], r->suffix[i]);
		const struct gaz_ks_value *v = e ? e->decoded : NULL;
		live += v && v->broker && !v->broker->exiting && r->consistent[i];
	}
	return live;
}

static int summarise_members(struct gaz_drain *d, const char *root, struct view *v)
{
	char prefix[1024];
	size_t lo, hi;

	snprintf(prefix, sizeof(prefix), "%s/members/", root);
	gaz_keyspace_prefix(d->ks, prefix, &lo, &hi);
	if (!(v->m = calloc(hi - lo + 1, sizeof(*v->m))))
		return GAZ_ENOMEM;
	for (size_t i = lo; i < hi; i++) {
		const struct gaz_ks_entry *e = gaz_keyspace_at(d->ks, i);
		const struct gaz_ks_value *kv = e->decoded;
		struct member *m = &v->m[v->n];
		if (!kv || !kv->broker)
			continue;
		m->key = strdup(e->key);
		m->zone = strdup(kv->zone);
		m->suffix = strdup(kv->suffix);
		m->spec = (Protocol__BrokerSpec *)gaz_pb_copy(&kv->broker->base);
		m->mod_revision = e->mod_revision;
		m->exiting = kv->broker->exiting;
		v->n++;
		if (!m->key || !m->zone || !m->suffix || !m->spec)
			return GAZ_ENOMEM;
		v->exiting += m->exiting;
	}
	return 0;
}

static void count_assignments(struct gaz_drain *d, const char *root, struct view *v)
{
	char prefix[1024];
	size_t lo, hi;

	snprintf(prefix, sizeof(prefix), "%s/assign/", root);
	gaz_keyspace_prefix(d->ks, prefix, &lo, &hi);
	for (size_t i = lo; i < hi; i++) {
		const struct gaz_ks_value *kv = gaz_keyspace_at(d->ks, i)->decoded;
		for (size_t j = 0; kv && j < v->n; j++) {
			if (!strcmp(v->m[j].zone, kv->zone) && !strcmp(v->m[j].suffix, kv->suffix)) {
				v->m[j].assignments++;
				break;
			}
		}
	}
}

static int summarise(struct gaz_drain *d, struct view *v)
{
	const char *root = d->op->cfg.etcd_prefix;
	char prefix[1024];
	size_t lo, hi;
	int rc;

	memset(v, 0, sizeof(*v));
	gaz_keyspace_rlock(d->ks);
	if ((rc = summarise_members(d, root, v)))
		goto out;
	count_assignments(d, root, v);
	snprintf(prefix, sizeof(prefix), "%s/items/", root);
	gaz_keyspace_prefix(d->ks, prefix, &lo, &hi);
	for (size_t i = lo; i < hi; i++) {
		const struct gaz_ks_value *kv = gaz_keyspace_at(d->ks, i)->decoded;
		struct gaz_route r;
		int64_t want;
		if (!kv || !kv->spec || (want = desired(d, kv->spec)) <= 0)
			continue;
		if ((rc = gaz_route_build(d->ks, root, kv->item, &r)))
			goto out;
		v->under_replicated += (int64_t)live_replicas(d, root, &r) < want;
		gaz_route_release(&r);
	}
out:
	gaz_keyspace_runlock(d->ks);
	return rc;
}

/* ---- writes ---------------------------------------------------------------------- */

/* Marks member `m` exiting, keeping its lease; guarded by its ModRevision
 * (the broker may be rewriting it itself). */
static int mark_exiting(struct gaz_drain *d, struct member *m, bool *applied,
			struct gaz_status *st)
{
	struct gaz_txn t;
	size_t len;
	uint8_t *val;
	int rc;

	m->spec->exiting = true;
	len = protobuf_c_message_get_packed_size(&m->spec->base);
	if (!(val = malloc(len ? len : 1)))
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	protobuf_c_message_pack(&m->spec->base, val);
	gaz_txn_init(&t);
	gaz_txn_compare_mod(&t, m->key, m->mod_revision);
	gaz_txn_put(&t, m->key, val, len, 0, true);
	rc = gaz_txn_commit(d->op->etcd, &t, applied, NULL, st);
	gaz_txn_release(&t);
	free(val);
	return rc;
}

static void pod_path(const json_t *pod, char *buf, size_t cap)
{
	const json_t *md = json_object_get(pod, "metadata");

	snprintf(buf, cap, "/api/v1/namespaces/%s/pods/%s",
		 json_string_value(json_object_get(md, "namespace")) ?: "",
		 json_string_value(json_object_get(md, "name")) ?: "");
}

static bool has_finalizer(const json_t *pod)
{
	const json_t *fins = json_object_get(json_object_get(pod, "metadata"), "finalizers"), *f;
	size_t i;

	json_array_foreach(fins, i, f) {
		if (json_is_string(f) && !strcmp(json_string_value(f), GAZ_DRAIN_FINALIZER))
			return true;
	}
	return false;
}

/* Adds or removes our finalizer with a merge patch guarded by the pod's
 * resourceVersion (409: the next pass retries with the newer pod). */
static int set_finalizer(struct gaz_drain *d, const json_t *pod, bool add, struct gaz_status *st)
{
	const json_t *md = json_object_get(pod, "metadata"), *f;
	json_t *list = json_array(), *patch;
	char path[1024];
	size_t i;
	int rc;

	json_array_foreach(json_object_get(md, "finalizers"), i, f) {
		if (!json_is_string(f) || strcmp(json_string_value(f), GAZ_DRAIN_FINALIZER))
			json_array_append(list, (json_t *)f);
	}
	if (add)
		json_array_append_new(list, json_string(GAZ_DRAIN_FINALIZER));
	patch = json_pack("{s:{s:O?, s:o}}", "metadata", "resourceVersion",
			  json_object_get(md, "resourceVersion"), "finalizers", list);
	if (!patch)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	pod_path(pod, path, sizeof(path));
	rc = gaz_kube_requestj(d->op->kube, "PATCH", path, "application/merge-patch+json", patch,
			       NULL, NULL, st);
	json_decref(patch);
	return rc;
}

/* Writes the drain annotations when they differ from the pod's; *updated
 * receives the pod as written (a new reference), or NULL when unchanged. */
static int annotate(struct gaz_drain *d, const json_t *pod, const char *phase, size_t assignments,
		    const char *member, const char *message, json_t **updated, struct gaz_status *st)
{
	const json_t *ann = json_object_get(json_object_get(pod, "metadata"), "annotations");
	char n[32], path[1024];
	json_t *want, *patch;
	int rc;

	snprintf(n, sizeof(n), "%zu", assignments);
	want = json_pack("{s:s, s:s, s:s, s:s}", GAZ_DRAIN_ANNOTATION, phase,
			 GAZ_DRAIN_ANNOTATION "-assignments", n, GAZ_DRAIN_ANNOTATION "-message",
			 message, "gazette-c.dev/member", member);
	if (!want)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	const char *k;
	json_t *v;
	bool same = true;
	json_object_foreach(want, k, v)
		same &= json_equal(v, json_object_get(ann, k));
	if (same) {
		json_decref(want);
		return 0;
	}
	patch = json_pack("{s:{s:o}}", "metadata", "annotations", want);
	pod_path(pod, path, sizeof(path));
	rc = patch ? gaz_kube_requestj(d->op->kube, "PATCH", path, "application/merge-patch+json",
				       patch, updated, NULL, st)
		   : gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	json_decref(patch);
	return rc;
}

static void pod_event(struct gaz_drain *d, const json_t *pod, const char *type, const char *reason,
		      const char *msg)
{
	json_t *ref = json_copy((json_t *)pod);

	if (!ref)
		return;
	json_object_set_new(ref, "apiVersion", json_string("v1"));
	json_object_set_new(ref, "kind", json_string("Pod"));
	gaz_kube_event_post(d->op->kube, ref, type, reason, GAZ_OP_COMPONENT, "%s", msg);
	json_decref(ref);
}

/* ---- one pod --------------------------------------------------------------------- */

static struct member *find_member(struct view *v, const char *pod_name)
{
	for (size_t i = 0; i < v->n; i++) {
		if (!strcmp(v->m[i].suffix, pod_name))
			return &v->m[i];
	}
	return NULL;
}

static const char *drain_annotation(const json_t *pod)
{
	const json_t *ann = json_object_get(json_object_get(pod, "metadata"), "annotations");

	return json_string_value(json_object_get(ann, GAZ_DRAIN_ANNOTATION));
}

/* Marks the member of a terminating pod exiting (once) and says so. */
static void start_drain(struct gaz_drain *d, const json_t *pod, const char *name, struct member *m,
			struct view *v)
{
	struct gaz_status st = {0};
	bool applied = false;
	char msg[512];

	if (mark_exiting(d, m, &applied, &st))
		gaz_warn("marking member exiting failed", "pod=%s key=%s err=%s", name, m->key, st.msg);
	if (!applied)
		return; /* lost a race with the broker's own write: next pass */
	m->exiting = true;
	v->exiting++;
	gaz_metric_inc(gaz_metric_with(d->m_marked));
	gaz_info("pod terminating: member marked exiting", "pod=%s key=%s assignments=%zu", name,
		 m->key, m->assignments);
	snprintf(msg, sizeof(msg), "member %s#%s marked exiting; %zu assignments to hand off",
		 m->zone, m->suffix, m->assignments);
	pod_event(d, pod, "Normal", "DrainStarted", msg);
}

/* The drain phase of a terminating pod (see the diagram at the top). */
static const char *drain_phase(const json_t *pod, const struct member *m, char *msg, size_t cap)
{
	const char *was = drain_annotation(pod);

	if (m && m->assignments) {
		snprintf(msg, cap, "%zu assignments left to hand off", m->assignments);
		return "Draining";
	}
	if (m) {
		snprintf(msg, cap, "no assignments left; waiting for the broker to persist its spools "
			 "and release its member key");
		return "HandedOff";
	}
	if (was && strcmp(was, "NoMember")) {
		snprintf(msg, cap, "member key gone: journals handed off and spools persisted");
		return "Drained";
	}
	snprintf(msg, cap, "no member key names this pod (never announced, or gone before the pod "
		 "was seen terminating): nothing to drain");
	return "NoMember";
}

/* Reports one terminating pod's drain (annotations, the Drained Event)
 * and releases it once its member key is gone. */
static void report_drain(struct gaz_drain *d, const json_t *pod, const char *name, struct view *v)
{
	struct gaz_status st = {0};
	struct member *m = find_member(v, name);
	const char *phase, *was = drain_annotation(pod);
	char msg[512], id[600] = "";
	json_t *updated = NULL;

	if (m)
		snprintf(id, sizeof(id), "%s#%s", m->zone, m->suffix);
	phase = drain_phase(pod, m, msg, sizeof(msg));
	gaz_metric_set(gaz_metric_with(d->m_assign, name), (int64_t)(m ? m->assignments : 0));
	if (annotate(d, pod, phase, m ? m->assignments : 0, id, msg, &updated, &st)) {
		gaz_warn("annotating pod failed", "pod=%s err=%s", name, st.msg);
		gaz_status_clear(&st);
	} else if (!strcmp(phase, "Drained") && strcmp(was ? was : "", "Drained")) {
		gaz_info("drain complete", "pod=%s", name);
		gaz_metric_inc(gaz_metric_with(d->m_done));
		pod_event(d, pod, "Normal", "Drained", msg);
	}
	/* The annotation patch changed the resourceVersion: guard with the new one. */
	if (!m && has_finalizer(pod) && set_finalizer(d, updated ? updated : pod, false, &st))
		gaz_warn("removing the drain finalizer failed", "pod=%s err=%s", name, st.msg);
	json_decref(updated);
}

/* A running pod carries our finalizer exactly when --brokers.finalizer is
 * on (turning it off releases every pod, e.g. before an uninstall). */
static void keep_finalizer(struct gaz_drain *d, const json_t *pod, const char *name)
{
	struct gaz_status st = {0};

	if (d->cfg.finalizer == has_finalizer(pod))
		return;
	if (set_finalizer(d, pod, d->cfg.finalizer, &st))
		gaz_warn("updating the drain finalizer failed", "pod=%s add=%d err=%s", name,
			 (int)d->cfg.finalizer, st.msg);
}

/* ---- the PodDisruptionBudget --------------------------------------------------- */

static int ensure_pdb(struct gaz_drain *d, int64_t max_unavailable, struct gaz_status *st)
{
	char path[1024];
	json_t *pdb = NULL, *body;
	int rc;

	snprintf(path, sizeof(path), "/apis/policy/v1/namespaces/%s/poddisruptionbudgets/%s", d->ns,
		 d->cfg.pdb_name);
	rc = gaz_kube_request(d->op->kube, "GET", path, NULL, NULL, &pdb, NULL, st);
	if (rc == GAZ_ENOTFOUND) {
		gaz_status_clear(st);
		body = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:I, s:{s:O}, s:s}}", "apiVersion",
				 "policy/v1", "kind", "PodDisruptionBudget", "metadata", "name",
				 d->cfg.pdb_name, "labels", "app.kubernetes.io/managed-by",
				 GAZ_OP_COMPONENT, "spec", "maxUnavailable", (json_int_t)max_unavailable,
				 "selector", "matchLabels", d->match_labels, "unhealthyPodEvictionPolicy",
				 "AlwaysAllow");
		snprintf(path, sizeof(path), "/apis/policy/v1/namespaces/%s/poddisruptionbudgets", d->ns);
		rc = body ? gaz_kube_requestj(d->op->kube, "POST", path, NULL, body, NULL, NULL, st)
			  : gaz_status_set(st, GAZ_ENOMEM, "out of memory");
		json_decref(body);
		return rc;
	}
	if (rc)
		return rc;
	json_t *cur = json_object_get(json_object_get(pdb, "spec"), "maxUnavailable");
	bool same = json_is_integer(cur) && json_integer_value(cur) == max_unavailable;
	json_decref(pdb);
	if (same)
		return 0;
	body = json_pack("{s:{s:I}}", "spec", "maxUnavailable", (json_int_t)max_unavailable);
	rc = body ? gaz_kube_requestj(d->op->kube, "PATCH", path, "application/merge-patch+json", body,
				      NULL, NULL, st)
		  : gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	json_decref(body);
	return rc;
}

/* ---- a pass ------------------------------------------------------------------------ */

/* The name of a terminating pod (deletionTimestamp set), else NULL. */
static const char *terminating_name(const json_t *pod)
{
	const json_t *md = json_object_get(pod, "metadata");

	if (!json_object_get(md, "deletionTimestamp"))
		return NULL;
	return json_string_value(json_object_get(md, "name"));
}

static void evaluate(struct gaz_drain *d)
{
	struct gaz_status st = {0};
	struct view v;
	json_t *pods, *pod;
	const char *key;
	size_t in_progress = 0;

	if (summarise(d, &v)) {
		view_release(&v);
		gaz_warn("summarising the keyspace failed", "err=%s", "out of memory");
		return;
	}
	/* Three steps, in this order so that the budget is lowered before a
	 * drain is reported and raised before a pod is released: mark the
	 * members of terminating pods exiting, write the budget, then report
	 * on (and release) the pods. */
	pods = gaz_informer_snapshot(d->pods);
	json_object_foreach(pods, key, pod) {
		const char *name = terminating_name(pod);
		struct member *m = name ? find_member(&v, name) : NULL;
		if (m && !m->exiting)
			start_drain(d, pod, name, m, &v);
		/* A mark that failed or lost a race is a drain pending. */
		in_progress += m && !m->exiting;
	}
	/* Exiting members are drains in progress, whoever marked them. */
	in_progress += v.exiting;
	int64_t max_unavailable = v.under_replicated || in_progress ? 0 : 1;
	gaz_metric_set(gaz_metric_with(d->m_in_progress), (int64_t)in_progress);
	gaz_metric_set(gaz_metric_with(d->m_under), (int64_t)v.under_replicated);
	/* Read the budget back (drift) once per interval, and at once when the
	 * value to write changes. */
	bool due = d->pdb_max_unavailable != max_unavailable ||
		   gaz_mono_ns() - d->pdb_checked_ns >= d->cfg.interval_ns;
	if (d->match_labels && due) {
		d->pdb_checked_ns = gaz_mono_ns();
		if (ensure_pdb(d, max_unavailable, &st)) {
			d->pdb_max_unavailable = -1;
			gaz_warn("updating the PodDisruptionBudget failed", "name=%s err=%s",
				 d->cfg.pdb_name, st.msg);
		} else {
			if (d->pdb_max_unavailable != max_unavailable)
				gaz_info("PodDisruptionBudget", "name=%s maxUnavailable=%lld under_replicated=%zu "
					 "drains=%zu", d->cfg.pdb_name, (long long)max_unavailable,
					 v.under_replicated, in_progress);
			d->pdb_max_unavailable = max_unavailable;
			gaz_metric_set(gaz_metric_with(d->m_pdb), max_unavailable);
		}
	}
	json_object_foreach(pods, key, pod) {
		const char *name = json_string_value(json_object_get(json_object_get(pod, "metadata"), "name"));
		if (name && terminating_name(pod))
			report_drain(d, pod, name, &v);
		else if (name)
			keep_finalizer(d, pod, name);
	}
	json_decref(pods);
	view_release(&v);
}

/* (Re)builds the keyspace mirror: at start, and when its watch ended. */
static int open_keyspace(struct gaz_drain *d, struct gaz_status *st)
{
	int rc;

	if (d->ks)
		gaz_keyspace_free(d->ks);
	if (!(d->ks = gaz_journals_keyspace_new(d->op->etcd, d->op->cfg.etcd_prefix)))
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	gaz_keyspace_set_observer(d->ks, on_keyspace, d);
	if ((rc = gaz_keyspace_load(d->ks, 0, st)) || (rc = gaz_keyspace_watch(d->ks, st)))
		return rc;
	return 0;
}

/* Waits until something changed, `next_ns` (monotonic) passed or stop. */
static void wait_for_work(struct gaz_drain *d, int64_t next_ns)
{
	pthread_mutex_lock(&d->mu);
	while (!d->dirty && !atomic_load(&d->stop) && gaz_mono_ns() < next_ns) {
		int64_t t = gaz_mono_ns() + GAZ_NS_PER_S;
		struct timespec ts;
		if (t > next_ns)
			t = next_ns;
		ts.tv_sec = t / GAZ_NS_PER_S;
		ts.tv_nsec = t % GAZ_NS_PER_S;
		pthread_cond_timedwait(&d->cond, &d->mu, &ts);
	}
	d->dirty = false;
	pthread_mutex_unlock(&d->mu);
}

static void *run(void *arg)
{
	struct gaz_drain *d = arg;
	struct gaz_status st = {0};
	int64_t next = 0;

	for (wait_for_work(d, next); !atomic_load(&d->stop); wait_for_work(d, next)) {
		/* Keyspace changes come in bursts (allocator rounds, route
		 * writes): at most one pass per MIN_PASS_GAP_MS. */
		struct timespec gap = {0, MIN_PASS_GAP_MS * 1000000L};
		nanosleep(&gap, NULL);
		if (atomic_load(&d->stop))
			break;
		if (!atomic_load(&d->op->leading) || !gaz_informer_synced(d->pods)) {
			next = gaz_mono_ns() + 200 * GAZ_NS_PER_MS;
			continue;
		}
		next = gaz_mono_ns() + d->cfg.interval_ns;
		if (gaz_keyspace_watch_failed(d->ks) && open_keyspace(d, &st)) {
			gaz_warn("re-reading the brokers' keyspace failed", "err=%s", st.msg);
			gaz_status_clear(&st);
			continue;
		}
		evaluate(d);
	}
	return NULL;
}

/* ---- lifecycle ------------------------------------------------------------------ */

struct gaz_drain *gaz_drain_start(struct gaz_op *op, const struct gaz_drain_config *cfg,
				  struct gaz_status *st)
{
	struct gaz_drain *d = calloc(1, sizeof(*d));
	const char *ns = cfg->namespace && *cfg->namespace ? cfg->namespace
			 : op->cfg.namespace && *op->cfg.namespace ? op->cfg.namespace
								   : gaz_kube_namespace(op->kube);
	pthread_condattr_t ca;

	if (!d || !(d->ns = strdup(ns ? ns : "default"))) {
		free(d);
		gaz_status_set(st, GAZ_ENOMEM, "out of memory");
		return NULL;
	}
	d->op = op;
	d->cfg = *cfg;
	d->pdb_max_unavailable = -1;
	if (d->cfg.interval_ns <= 0)
		d->cfg.interval_ns = 5 * GAZ_NS_PER_S;
	if (d->cfg.max_replication <= 0)
		d->cfg.max_replication = 9;
	if (cfg->pdb_name && *cfg->pdb_name && !(d->match_labels = gaz_drain_parse_selector(cfg->selector))) {
		gaz_status_set(st, GAZ_EINVAL, "--brokers.selector \"%s\": a PodDisruptionBudget needs "
			       "equality requirements only (\"a=b,c=d\")", cfg->selector);
		goto fail;
	}
	pthread_mutex_init(&d->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->cond, &ca);
	pthread_condattr_destroy(&ca);
	d->m_in_progress = gaz_metrics_gauge(NULL, "gazette_operator_drains_in_progress", "Broker drains in progress (members exiting, pods terminating)", NULL);
	d->m_under = gaz_metrics_gauge(NULL, "gazette_operator_underreplicated_journals", "Journals with fewer live, consistent replicas than desired", NULL);
	d->m_pdb = gaz_metrics_gauge(NULL, "gazette_operator_pdb_max_unavailable", "maxUnavailable last written to the brokers' PodDisruptionBudget", NULL);
	d->m_assign = gaz_metrics_gauge(NULL, "gazette_operator_drain_assignments", "Assignments a terminating broker pod still holds", "pod");
	d->m_done = gaz_metrics_counter(NULL, "gazette_operator_drains_completed_total", "Terminating broker pods whose member key is gone", NULL);
	d->m_marked = gaz_metrics_counter(NULL, "gazette_operator_members_marked_exiting_total", "Members the operator marked exiting", NULL);
	if (open_keyspace(d, st))
		goto fail;
	struct gaz_informer_opts io = {.kube = op->kube, .api_path = "/api/v1", .plural = "pods",
				       .namespace = d->ns, .label_selector = cfg->selector,
				       .watch_timeout_s = op->cfg.watch_timeout_ns / GAZ_NS_PER_S,
				       .on_change = on_pod, .arg = d};
	if (!(d->pods = gaz_informer_start(&io, st)))
		goto fail;
	if (pthread_create(&d->thread, NULL, run, d)) {
		gaz_status_set(st, GAZ_ENOMEM, "starting the drain thread failed");
		goto fail;
	}
	gaz_info("watching broker pods", "namespace=%s selector=%s pdb=%s finalizer=%d", d->ns,
		 cfg->selector, cfg->pdb_name ? cfg->pdb_name : "", (int)cfg->finalizer);
	return d;
fail:
	gaz_informer_stop(d->pods);
	if (d->ks)
		gaz_keyspace_free(d->ks);
	json_decref(d->match_labels);
	free(d->ns);
	free(d);
	return NULL;
}

bool gaz_drain_synced(struct gaz_drain *d) { return !d || gaz_informer_synced(d->pods); }

void gaz_drain_stop(struct gaz_drain *d)
{
	if (!d)
		return;
	atomic_store(&d->stop, true);
	wake(d);
	pthread_join(d->thread, NULL);
	gaz_informer_stop(d->pods);
	gaz_keyspace_free(d->ks);
	pthread_mutex_destroy(&d->mu);
	pthread_cond_destroy(&d->cond);
	json_decref(d->match_labels);
	free(d->ns);
	free(d);
}
