/*
 * cr_reconcile.c - the reconcile steps JournalSpec and ShardSpec CRs share
 * (see cr_reconcile.h). The per-kind decisions (what the item is, how it
 * is read, compared, written and deleted) stay in journal_reconcile.c and
 * shard_reconcile.c.
 */
#include "operator/cr_reconcile.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

const char *gaz_crr_spec_name(const json_t *o)
{
	return json_string_value(json_object_get(json_object_get(o, "spec"), "name"));
}

bool gaz_crr_being_deleted(const json_t *o)
{
	return json_object_get(json_object_get(o, "metadata"), "deletionTimestamp") != NULL;
}

/* ---- loading and ownership ------------------------------------------------------ */

int gaz_crr_load(struct gaz_crr *r, const char *key)
{
	const char *slash = strchr(key, '/');
	struct gaz_status st = {0};
	char path[1024], msg[64];
	int rc;

	r->key = key;
	r->obj = NULL;
	if (!slash)
		return 0;
	snprintf(path, sizeof(path), GAZ_OP_API_PATH "/namespaces/%.*s/%s/%s", (int)(slash - key),
		 key, r->k->plural, slash + 1);
	rc = gaz_kube_request(r->op->kube, "GET", path, NULL, NULL, &r->obj, NULL, &st);
	if (rc == GAZ_ENOTFOUND)
		return 0;
	if (rc) {
		snprintf(msg, sizeof(msg), "reading %s failed", r->k->kind);
		gaz_warn(msg, "key=%s err=%s", key, st.msg);
		return rc;
	}
	r->spec = json_object_get(r->obj, "spec");
	r->old_status = json_object_get(r->obj, "status");
	r->name = gaz_crr_spec_name(r->obj);
	r->generation = json_integer_value(json_object_get(json_object_get(r->obj, "metadata"),
							   "generation"));
	r->deleting = gaz_crr_being_deleted(r->obj);
	return 0;
}

/* Whether (created a, key a) sorts before (created b, key b). RFC 3339
 * UTC timestamps of one format compare as strings. */
static bool older(const json_t *a, const char *ka, const json_t *b, const char *kb)
{
	const char *ca = json_string_value(json_object_get(json_object_get(a, "metadata"),
							   "creationTimestamp")) ?: "";
	const char *cb = json_string_value(json_object_get(json_object_get(b, "metadata"),
							   "creationTimestamp")) ?: "";
	int c = strcmp(ca, cb);

	return c ? c < 0 : strcmp(ka, kb) < 0;
}

static void find_owner(struct gaz_crr *r)
{
	json_t *all = gaz_informer_snapshot(r->k->informer(r->op)), *o, *best = r->obj;
	const char *k;

	snprintf(r->owner, sizeof(r->owner), "%s", r->key);
	json_object_foreach(all, k, o) {
		const char *n = gaz_crr_spec_name(o);
		if (!n || strcmp(n, r->name) || !strcmp(k, r->key) ||
		    (r->k->same_item && !r->k->same_item(r, o)))
			continue;
		if (!gaz_crr_being_deleted(o))
			r->other_live_claimant = true;
		if (older(o, k, best, r->owner)) {
			best = o;
			snprintf(r->owner, sizeof(r->owner), "%s", k);
		}
	}
	json_decref(all);
}

/* Starts the new status from the old one's operator-maintained fields. */
static void status_init(struct gaz_crr *r)
{
	r->status = json_object();
	for (const char *const *f = r->k->keep; *f; f++) {
		json_t *v = json_object_get(r->old_status, *f);
		if (v)
			json_object_set_new(r->status, *f, json_deep_copy(v));
	}
	json_object_set_new(r->status, r->k->noun, json_string(r->name));
	json_object_set_new(r->status, "observedGeneration", json_integer(r->generation));
}

void gaz_crr_begin(struct gaz_crr *r)
{
	find_owner(r);
	status_init(r);
}

void gaz_crr_release(struct gaz_crr *r)
{
	json_decref(r->status);
	json_decref(r->obj);
	r->status = r->obj = NULL;
}

void gaz_crr_enqueue_related(const struct gaz_crr_kind *k, struct gaz_op *op, const char *name,
			     const char *except_key)
{
	json_t *all = gaz_informer_snapshot(k->informer(op)), *o;
	char qk[700];
	const char *key;

	json_object_foreach(all, key, o) {
		const char *n = gaz_crr_spec_name(o);
		if (!n || strcmp(n, name) || (except_key && !strcmp(key, except_key)))
			continue;
		snprintf(qk, sizeof(qk), "%s%s", k->qprefix, key);
		gaz_queue_add_after(op->queue, qk, 0);
	}
	json_decref(all);
}

/* ---- pause ---------------------------------------------------------------------- */

bool gaz_crr_paused(const json_t *o)
{
	const json_t *a = json_object_get(json_object_get(o, "metadata"), "annotations");
	const char *v = json_string_value(json_object_get(a, GAZ_CRR_PAUSE_ANNOTATION));

	return v && !strcmp(v, "true");
}

int gaz_crr_pause(struct gaz_crr *r)
{
	char msg[1600];

	snprintf(msg, sizeof(msg),
		 "annotation %s is \"true\": the operator neither writes nor deletes %s in etcd%s",
		 GAZ_CRR_PAUSE_ANNOTATION, r->what, r->deleting ? "; the deletion waits until it is removed" : "");
	if (!gaz_crr_had_condition(r, "Paused", "True"))
		gaz_crr_event(r, "Normal", "Paused", "%s", msg);
	gaz_crr_condition(r, "Paused", true, "PausedByAnnotation", msg);
	json_object_set_new(r->status, "paused", json_true());
	return gaz_crr_write_status(r);
}

void gaz_crr_note_resumed(struct gaz_crr *r)
{
	if (!gaz_crr_had_condition(r, "Paused", "True"))
		return;
	gaz_crr_event(r, "Normal", "Resumed", "annotation %s removed: reconciling %s again",
		      GAZ_CRR_PAUSE_ANNOTATION, r->what);
	gaz_crr_condition(r, "Paused", false, "Resumed", "");
}

/* ---- status ------------------------------------------------------------------- */

void gaz_crr_event(struct gaz_crr *r, const char *type, const char *reason, const char *fmt, ...)
{
	char msg[1200], log[64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	gaz_kube_event_post(r->op->kube, r->obj, type, reason, GAZ_OP_COMPONENT, "%s", msg);
	snprintf(log, sizeof(log), "%s spec event", r->k->noun);
	gaz_info(log, "key=%s %s=%s reason=%s message=%s", r->key, r->k->noun, r->name, reason, msg);
}

void gaz_crr_condition(struct gaz_crr *r, const char *type, bool on, const char *reason,
		       const char *msg)
{
	gaz_cr_condition(r->status, r->old_status, type, on ? "True" : "False", reason, msg,
			 r->generation);
}

bool gaz_crr_had_condition(const struct gaz_crr *r, const char *type, const char *cstatus)
{
	const json_t *c;
	size_t i;

	json_array_foreach(json_object_get(r->old_status, "conditions"), i, c) {
		if (!strcmp(json_string_value(json_object_get(c, "type")) ?: "", type))
			return !strcmp(json_string_value(json_object_get(c, "status")) ?: "", cstatus);
	}
	return false;
}

void gaz_crr_set_ready(struct gaz_crr *r, bool ok, const char *reason, const char *msg)
{
	gaz_crr_condition(r, "Ready", ok, reason, msg);
	if (ok)
		json_object_del(r->status, "lastError");
	else
		json_object_set_new(r->status, "lastError", json_string(msg));
}

int gaz_crr_write_status(struct gaz_crr *r)
{
	struct gaz_status st = {0};
	bool written;

	if (gaz_cr_patch_status(r->op, r->obj, r->status, &written, &st)) {
		gaz_warn("writing status failed", "key=%s err=%s", r->key, st.msg);
		return st.code;
	}
	if (written)
		gaz_debug("status written", "key=%s %s=%s", r->key, r->k->noun, r->name);
	return 0;
}

int gaz_crr_fail(struct gaz_crr *r, const char *reason, const char *msg, int64_t requeue_ms,
		 int64_t *requeue)
{
	bool again = gaz_crr_had_condition(r, "Ready", "False") &&
		     !strcmp(json_string_value(json_object_get(r->old_status, "lastError")) ?: "", msg);

	gaz_crr_set_ready(r, false, reason, msg);
	if (!again)
		gaz_crr_event(r, "Warning", reason, "%s", msg);
	gaz_crr_write_status(r);
	*requeue = requeue_ms;
	return 0;
}

int gaz_crr_etcd_fail(struct gaz_crr *r, const char *what, const struct gaz_status *st,
		      int64_t *requeue)
{
	char msg[2400];

	snprintf(msg, sizeof(msg), "%s %s in etcd at %s failed: %s", what, r->item_key,
		 r->op->cfg.etcd_address, st->msg);
	gaz_warn("etcd unavailable", "key=%s %s=%s endpoint=%s err=%s", r->key, r->k->noun,
		 r->name, r->op->cfg.etcd_address, st->msg);
	return gaz_crr_fail(r, "EtcdUnavailable", msg, GAZ_CRR_REQUEUE_ERROR_MS, requeue);
}

int gaz_crr_conflict(struct gaz_crr *r)
{
	char msg[2400];

	snprintf(msg, sizeof(msg), "%s is managed by %s %s", r->what, r->k->kind, r->owner);
	if (!gaz_crr_had_condition(r, "Conflict", "True"))
		gaz_crr_event(r, "Warning", "Conflict", "%s", msg);
	gaz_crr_condition(r, "Conflict", true, r->k->claimed, msg);
	gaz_crr_condition(r, "Ready", false, "Conflict", msg);
	json_object_set_new(r->status, "lastError", json_string(msg));
	for (const char *const *f = r->k->drop; *f; f++)
		json_object_del(r->status, *f);
	return gaz_crr_write_status(r);
}

/* ---- applying ----------------------------------------------------------------- */

void gaz_crr_invalid(struct gaz_crr *r, const struct gaz_status *st, int64_t *requeue)
{
	if (st->code == GAZ_ENOMEM)
		*requeue = GAZ_CRR_REQUEUE_ERROR_MS;
	else
		gaz_crr_fail(r, "InvalidSpec", st->msg, 0, requeue);
}

/* Why an item that differs is written. */
static const char *write_reason(const struct gaz_crr *r, bool exists)
{
	const json_t *og = json_object_get(r->old_status, "observedGeneration");

	if (!json_object_get(r->old_status, "etcdModRevision"))
		return exists ? "Adopted" : "Created";
	if (!og || json_integer_value(og) != r->generation)
		return exists ? "Updated" : "Created";
	return "DriftCorrected";
}

/* Records and announces an out-of-band change the write just undid. The
 * condition stays until the next one, so the last change stays visible
 * after the Event expires. */
static void drift(struct gaz_crr *r, const struct gaz_crr_found *f, int64_t rev)
{
	const char *reason = !f->exists ? "DeletedFromEtcd" : !f->readable ? "UnreadableInEtcd"
									     : "ChangedInEtcd";
	char msg[2400];

	if (!f->exists)
		snprintf(msg, sizeof(msg), "%s was deleted from etcd; rewrote it at revision %lld",
			 r->item_key, (long long)rev);
	else if (!f->readable)
		snprintf(msg, sizeof(msg), "%s held an unreadable %s (%s); rewrote it at revision %lld",
			 r->item_key, r->k->kind, f->decode_err, (long long)rev);
	else
		snprintf(msg, sizeof(msg), "%s was changed in etcd; restored the spec at revision %lld",
			 r->item_key, (long long)rev);
	gaz_crr_condition(r, "DriftCorrected", true, reason, msg);
	gaz_crr_event(r, f->exists && !f->readable ? "Warning" : "Normal", reason, "%s", msg);
}

int gaz_crr_apply(struct gaz_crr *r, const struct gaz_crr_found *f, int64_t mod_revision,
		  bool equal, gaz_crr_put_fn put, void *arg, struct gaz_metric *m_writes,
		  int64_t *requeue)
{
	struct gaz_status st = {0};
	int64_t rev = mod_revision;
	const char *reason = NULL;
	bool applied = true;

	if (!f->exists || !f->readable || !equal) {
		reason = write_reason(r, f->exists);
		if (put(r, arg, mod_revision, &applied, &rev, &st))
			return gaz_crr_etcd_fail(r, "writing", &st, requeue);
		if (!applied) { /* lost a race: re-read and decide again */
			*requeue = GAZ_CRR_REQUEUE_RACE_MS;
			return 0;
		}
		gaz_metric_inc(gaz_metric_with(m_writes, reason));
	} else if (!json_object_get(r->old_status, "etcdModRevision")) {
		reason = "Adopted"; /* equal already: adopted without a write */
	}
	if (reason && !strcmp(reason, "Adopted"))
		json_object_set_new(r->status, "adopted", json_true());
	if (reason && (!strcmp(reason, "DriftCorrected") || (f->exists && !f->readable)))
		drift(r, f, rev);
	else if (reason)
		gaz_crr_event(r, "Normal", reason, "%s %s in etcd at revision %lld", r->what,
			      !strcmp(reason, "Adopted") ? "adopted" : "written", (long long)rev);
	json_object_set_new(r->status, "etcdModRevision", json_integer(rev));
	return 0;
}

bool gaz_crr_add_finalizer(struct gaz_crr *r, int64_t *requeue)
{
	struct gaz_status st = {0};

	if (gaz_cr_has_finalizer(r->obj) || !gaz_cr_set_finalizer(r->op, r->obj, true, &st))
		return true;
	gaz_debug("adding finalizer failed", "key=%s err=%s", r->key, st.msg);
	*requeue = st.code == GAZ_EEXIST ? GAZ_CRR_REQUEUE_RACE_MS : GAZ_CRR_REQUEUE_ERROR_MS;
	return false;
}

/* ---- deletion ----------------------------------------------------------------- */

int gaz_crr_drop_finalizer(struct gaz_crr *r, int64_t *requeue)
{
	struct gaz_status st = {0};

	if (gaz_cr_set_finalizer(r->op, r->obj, false, &st)) {
		gaz_debug("removing finalizer failed", "key=%s err=%s", r->key, st.msg);
		*requeue = st.code == GAZ_EEXIST ? GAZ_CRR_REQUEUE_RACE_MS : GAZ_CRR_REQUEUE_ERROR_MS;
	}
	return 0;
}

bool gaz_crr_let_go(struct gaz_crr *r, bool retain, int64_t *requeue)
{
	if (retain)
		gaz_crr_event(r, "Normal", "Retained", "%s stays in etcd (deletionPolicy Retain)",
			      r->what);
	else if (r->other_live_claimant)
		gaz_crr_event(r, "Normal", "HandedOver", "%s is claimed by another %s; it stays in etcd",
			      r->what, r->k->kind);
	else
		return false;
	gaz_crr_drop_finalizer(r, requeue);
	return true;
}
