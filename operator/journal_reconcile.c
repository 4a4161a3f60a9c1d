/*
 * journal_reconcile.c - one JournalSpec CR against its etcd item.
 *
 * Ownership. Several CRs may name one journal (spec.name). The oldest
 * (creationTimestamp, then namespace/name) owns it; the others get
 * Ready=False and Conflict=True and never write etcd. When the owner goes,
 * the next oldest takes over (adopting the item as it stands).
 *
 * Sync (owner, not deleting):
 *   finalizer present? else add it
 *   desired := CR spec (validated with Gazette's rules) + the item's
 *              current suspend (broker-owned)
 *   item absent                -> put, compare ModRevision == 0   "Created"
 *   item differs from desired  -> put, compare ModRevision == seen
 *        never synced before   -> "Adopted"
 *        CR generation changed -> "Updated"
 *        otherwise             -> "DriftCorrected" (changed behind our back)
 *   equal, never synced        -> "Adopted" (nothing written)
 *   a lost compare re-reads and tries again (Gazette's Apply semantics).
 *   A correction of drift (also an item deleted or unreadable: not a
 *   JournalSpec, another journal's, or failing Gazette's validation) sets
 *   condition DriftCorrected=True, reason ChangedInEtcd, DeletedFromEtcd
 *   or UnreadableInEtcd, with what was found, and posts an Event of that
 *   reason; the condition stays until the next correction.
 *   etcd unreachable -> Ready=False EtcdUnavailable naming the endpoint,
 *   an Event, retried every 5 s.
 *   status: Ready, observedGeneration, route, write head, persisted-through.
 *   bucket lifecycle rules from fragment.retention (lifecycle.c):
 *   condition Lifecycle, status.lifecycle; a failure is retried at the
 *   next resync.
 *
 * Deletion (deletionTimestamp set, our finalizer present):
 *   not the owner                       -> drop the finalizer only
 *   owner, no other live claimant       -> first remove our bucket
 *                                          lifecycle rules (retried until
 *                                          done), then by policy:
 *   deletionPolicy Retain               -> drop the finalizer; item stays
 *   Delete, another CR claims the name  -> hand over: as Retain
 *   Delete -> make the journal read-only (flags O_RDONLY: appends stop;
 *             a plain append would lift a suspension), then while any
 *             fragment is unpersisted (or, with no stores, until
 *             suspended): suspend through the primary (SUSPEND_NOW: the spool rolls
 *             and goes to the persister; suspend PARTIAL, or FULL when
 *             empty, is written into the spec) -> wait until ListFragments
 *             shows every fragment persisted (while waiting, or when the
 *             suspension or the listing fails, the first store is listed:
 *             when that fails, Ready=False PersistenceBlocked and a Warning
 *             Event say why; the item stays until the broker persisted
 *             everything) -> delete the item comparing
 *             the ModRevision read after that check (an append after it
 *             would have resumed the journal, changing the spec, and the
 *             delete fails and starts over) -> drop the finalizer.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "keyspace/journals.h"
#include "operator/journal_cr.h"
#include "operator/lifecycle.h"
#include "operator/operator.h"
#include "protocol/validate.h"
#include "store/store.h"

#define REQUEUE_RACE_MS 100
#define REQUEUE_WAIT_MS 1000
#define REQUEUE_ERROR_MS 5000

struct recon {
	struct gaz_op *op;
	const char *key;
	json_t *obj;               /* the CR (own reference) */
	const json_t *spec, *old_status;
	json_t *status;            /* the status being built (own reference) */
	const char *journal;
	int64_t generation;
	bool deleting;
	char owner[600];           /* key of the owning CR */
	bool other_live_claimant;  /* a CR other than us, not being deleted */
};

/* ---- ownership ----------------------------------------------------------- */

static const char *spec_name(const json_t *o)
{
	return json_string_value(json_object_get(json_object_get(o, "spec"), "name"));
}

static bool being_deleted(const json_t *o)
{
	return json_object_get(json_object_get(o, "metadata"), "deletionTimestamp") != NULL;
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

static void find_owner(struct recon *r)
{
	json_t *all = gaz_informer_snapshot(r->op->journals), *o, *best = r->obj;
	const char *k;

	snprintf(r->owner, sizeof(r->owner), "%s", r->key);
	json_object_foreach(all, k, o) {
		const char *n = spec_name(o);
		if (!n || strcmp(n, r->journal) || !strcmp(k, r->key))
			continue;
		if (!being_deleted(o))
			r->other_live_claimant = true;
		if (older(o, k, best, r->owner)) {
			best = o;
			snprintf(r->owner, sizeof(r->owner), "%s", k);
		}
	}
	json_decref(all);
}

void gaz_journal_enqueue_related(struct gaz_op *op, const char *journal, const char *except_key)
{
	json_t *all = gaz_informer_snapshot(op->journals), *o;
	const char *k;

	json_object_foreach(all, k, o) {
		const char *n = spec_name(o);
		if (n && !strcmp(n, journal) && (!except_key || strcmp(k, except_key)))
			gaz_queue_add_after(op->queue, k, 0);
	}
	json_decref(all);
}

/* ---- status helpers -------------------------------------------------------- */

static void event(struct recon *r, const char *type, const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void event(struct recon *r, const char *type, const char *reason, const char *fmt, ...)
{
	char msg[700];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	gaz_kube_event_post(r->op->kube, r->obj, type, reason, GAZ_OP_COMPONENT, "%s", msg);
	for (char *q = msg; *q; q++) /* keep the log line's quoting intact */
		if (*q == '"')
			*q = '\'';
	gaz_info("journal spec event", "key=%s journal=%s reason=%s msg=\"%s\"", r->key, r->journal,
		 reason, msg);
}

/* Starts the new status from the old one's operator-maintained fields. */
static void status_init(struct recon *r)
{
	static const char *const keep[] = {"adopted", "primary", "replicas", "suspend", "writeHead",
					   "persistedThrough", "etcdModRevision", "conditions",
					   "lifecycle"};

	r->status = json_object();
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
		json_t *v = json_object_get(r->old_status, keep[i]);
		if (v)
			json_object_set_new(r->status, keep[i], json_deep_copy(v));
	}
	json_object_set_new(r->status, "journal", json_string(r->journal));
	json_object_set_new(r->status, "observedGeneration", json_integer(r->generation));
}

static void set_ready(struct recon *r, bool ok, const char *reason, const char *msg)
{
	gaz_cr_condition(r->status, r->old_status, "Ready", ok ? "True" : "False", reason, msg,
			 r->generation);
	if (ok)
		json_object_del(r->status, "lastError");
	else
		json_object_set_new(r->status, "lastError", json_string(msg));
}

static void set_conflict(struct recon *r, bool conflict, const char *msg)
{
	gaz_cr_condition(r->status, r->old_status, "Conflict", conflict ? "True" : "False",
			 conflict ? "JournalClaimed" : "NoConflict", msg, r->generation);
}

static bool had_condition(const struct recon *r, const char *type, const char *cstatus)
{
	const json_t *c;
	size_t i;

	json_array_foreach(json_object_get(r->old_status, "conditions"), i, c) {
		if (!strcmp(json_string_value(json_object_get(c, "type")) ?: "", type))
			return !strcmp(json_string_value(json_object_get(c, "status")) ?: "", cstatus);
	}
	return false;
}

static int write_status(struct recon *r)
{
	struct gaz_status st = {0};
	bool written;

	if (gaz_cr_patch_status(r->op, r->obj, r->status, &written, &st)) {
		gaz_warn("writing status failed", "key=%s err=\"%s\"", r->key, st.msg);
		return st.code;
	}
	if (written)
		gaz_debug("status written", "key=%s journal=%s", r->key, r->journal);
	return 0;
}

/* Route, suspension and fragment summary into the status; best effort. */
static void observe(struct recon *r, const Protocol__JournalSpec *spec)
{
	struct gaz_item_route route;
	struct gaz_fragsum fs;
	struct gaz_status st = {0};
	int level = spec && spec->suspend ? spec->suspend->level : 0;

	json_object_set_new(r->status, "suspend", json_string(gaz_suspend_level_name(level)));
	if (gaz_item_route(r->op, r->journal, &route, &st) == 0) {
		json_t *reps = json_array();
		for (size_t i = 0; i < route.n; i++)
			json_array_append_new(reps, json_string(route.members[i]));
		json_object_set_new(r->status, "replicas", reps);
		if (route.primary >= 0)
			json_object_set_new(r->status, "primary", json_string(route.members[route.primary]));
		else
			json_object_del(r->status, "primary");
		gaz_item_route_release(&route);
	}
	if (!r->op->cfg.broker_address[0])
		return;
	gaz_status_clear(&st);
	if (gaz_broker_fragments(r->op, r->journal, &fs, &st)) {
		gaz_debug("fragment summary unavailable", "journal=%s err=\"%s\"", r->journal, st.msg);
		return;
	}
	if (fs.suspended && spec && spec->suspend)
		fs.write_head = fs.persisted_through = spec->suspend->offset;
	json_object_set_new(r->status, "writeHead", json_integer(fs.write_head));
	json_object_set_new(r->status, "persistedThrough", json_integer(fs.persisted_through));
}

/* ---- sync -------------------------------------------------------------------- */

static int fail(struct recon *r, const char *reason, const char *msg, int64_t requeue_ms,
		int64_t *requeue)
{
	bool again = had_condition(r, "Ready", "False") &&
		     !strcmp(json_string_value(json_object_get(r->old_status, "lastError")) ?: "", msg);

	set_ready(r, false, reason, msg);
	if (!again)
		event(r, "Warning", reason, "%s", msg);
	write_status(r);
	*requeue = requeue_ms;
	return 0;
}

/* Ready=False EtcdUnavailable naming the key and the endpoint. */
static int etcd_fail(struct recon *r, const char *what, const struct gaz_status *st,
		     int64_t *requeue)
{
	char msg[1000], *key = gaz_ks_item_key(r->op->cfg.etcd_prefix, r->journal);

	snprintf(msg, sizeof(msg), "%s %s in etcd at %s failed: %s", what, key ? key : r->journal,
		 r->op->cfg.etcd_address, st->msg);
	free(key);
	gaz_warn("etcd unavailable", "key=%s journal=%s endpoint=%s err=\"%s\"", r->key, r->journal,
		 r->op->cfg.etcd_address, st->msg);
	return fail(r, "EtcdUnavailable", msg, REQUEUE_ERROR_MS, requeue);
}

static int conflict(struct recon *r)
{
	char msg[800];

	snprintf(msg, sizeof(msg), "journal \"%s\" is managed by JournalSpec %s", r->journal,
		 r->owner);
	if (!had_condition(r, "Conflict", "True"))
		event(r, "Warning", "Conflict", "%s", msg);
	set_conflict(r, true, msg);
	gaz_cr_condition(r->status, r->old_status, "Ready", "False", "Conflict", msg, r->generation);
	json_object_set_new(r->status, "lastError", json_string(msg));
	static const char *const drop[] = {"etcdModRevision", "adopted", "primary", "replicas",
					   "writeHead", "persistedThrough", "suspend", "lifecycle"};
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		json_object_del(r->status, drop[i]);
	return write_status(r);
}

/* Desired spec from the CR, validated. NULL after reporting the failure. */
static Protocol__JournalSpec *desired_spec(struct recon *r, int64_t *requeue)
{
	Protocol__JournalSpec *d = NULL;
	struct gaz_status st = {0};

	if (gaz_journal_cr_to_spec(r->spec, &d, &st) || gaz_validate_journal_spec(d, &st)) {
		if (d)
			protobuf_c_message_free_unpacked(&d->base, NULL);
		if (st.code == GAZ_ENOMEM)
			*requeue = REQUEUE_ERROR_MS;
		else
			fail(r, "InvalidSpec", st.msg, 0, requeue);
		return NULL;
	}
	return d;
}

/* Why an item that differs is being written. */
static const char *write_reason(const struct recon *r, bool exists)
{
	const json_t *og = json_object_get(r->old_status, "observedGeneration");

	if (!json_object_get(r->old_status, "etcdModRevision"))
		return exists ? "Adopted" : "Created";
	if (!og || json_integer_value(og) != r->generation)
		return exists ? "Updated" : "Created";
	return "DriftCorrected";
}

/* Records and announces an out-of-band change the write just undid. */
static void drift(struct recon *r, const struct gaz_item *it, int64_t rev)
{
	const char *reason = !it->exists ? "DeletedFromEtcd" : !it->spec ? "UnreadableInEtcd"
									   : "ChangedInEtcd";
	char msg[1200], *key = gaz_ks_item_key(r->op->cfg.etcd_prefix, r->journal);
	const char *k = key ? key : r->journal;

	if (!it->exists)
		snprintf(msg, sizeof(msg), "%s was deleted from etcd; rewrote it at revision %lld", k,
			 (long long)rev);
	else if (!it->spec)
		snprintf(msg, sizeof(msg), "%s held an unreadable JournalSpec (%s); rewrote it at "
			 "revision %lld", k, it->decode_err, (long long)rev);
	else
		snprintf(msg, sizeof(msg), "%s was changed in etcd; restored the spec at revision %lld",
			 k, (long long)rev);
	free(key);
	gaz_cr_condition(r->status, r->old_status, "DriftCorrected", "True", reason, msg,
			 r->generation);
	event(r, it->exists && !it->spec ? "Warning" : "Normal", reason, "%s", msg);
}

static int apply(struct recon *r, Protocol__JournalSpec *d, struct gaz_item *it, int64_t *requeue)
{
	struct gaz_status st = {0};
	int64_t rev = it->mod_revision;
	const char *reason = NULL;
	bool applied = true;

	if (it->spec && it->spec->suspend) /* broker-owned: carry it over */
		d->suspend = (Protocol__JournalSpec__Suspend *)gaz_pb_copy(&it->spec->suspend->base);
	if (!it->exists || !it->spec || !gaz_journal_spec_equal(it->spec, d)) {
		reason = write_reason(r, it->exists);
		if (gaz_item_put(r->op, d, it->mod_revision, &applied, &rev, &st))
			return etcd_fail(r, "writing", &st, requeue);
		if (!applied) { /* lost a race: re-read and decide again */
			*requeue = REQUEUE_RACE_MS;
			return 0;
		}
		gaz_metric_inc(gaz_metric_with(r->op->m_writes, reason));
	} else if (!json_object_get(r->old_status, "etcdModRevision")) {
		reason = "Adopted";
	}
	if (reason && !strcmp(reason, "Adopted"))
		json_object_set_new(r->status, "adopted", json_true());
	if (reason && (!strcmp(reason, "DriftCorrected") || (it->exists && !it->spec)))
		drift(r, it, rev);
	else if (reason)
		event(r, "Normal", reason, "journal \"%s\" %s in etcd at revision %lld", r->journal,
		      !strcmp(reason, "Adopted") ? "adopted" : "written", (long long)rev);
	json_object_set_new(r->status, "etcdModRevision", json_integer(rev));
	return 0;
}

/* Bucket lifecycle rules from the retention (lifecycle.c); d NULL removes
 * them. A Warning event when it starts failing or the failure changes;
 * the failure's text goes to why[cap]. Nothing with --bucket-lifecycle
 * off. */
static int lifecycle(struct recon *r, const Protocol__JournalSpec *d, char *why, size_t cap)
{
	struct gaz_status st = {0};
	const char *old_msg = NULL;
	const json_t *c;
	size_t i;
	int rc;

	json_array_foreach(json_object_get(r->old_status, "conditions"), i, c) {
		if (!strcmp(json_string_value(json_object_get(c, "type")) ?: "", "Lifecycle") &&
		    !strcmp(json_string_value(json_object_get(c, "status")) ?: "", "False"))
			old_msg = json_string_value(json_object_get(c, "message"));
	}
	if (!r->op->cfg.bucket_lifecycle ||
	    !(rc = gaz_lifecycle_sync(d, r->old_status, r->status, r->generation, &st)))
		return 0;
	snprintf(why, cap, "%s", st.msg);
	gaz_warn("bucket lifecycle failed", "key=%s journal=%s err=\"%s\"", r->key, r->journal, st.msg);
	if (!old_msg || strcmp(old_msg, st.msg))
		event(r, "Warning", "LifecycleFailed", "%s", st.msg);
	return rc;
}

static int sync(struct recon *r, int64_t *requeue)
{
	char why[600];
	struct gaz_status st = {0};
	struct gaz_item it;
	Protocol__JournalSpec *d;
	int rc;

	if (!gaz_cr_has_finalizer(r->obj) && gaz_cr_set_finalizer(r->op, r->obj, true, &st)) {
		gaz_debug("adding finalizer failed", "key=%s err=\"%s\"", r->key, st.msg);
		*requeue = st.code == GAZ_EEXIST ? REQUEUE_RACE_MS : REQUEUE_ERROR_MS;
		return 0;
	}
	if (strcmp(r->owner, r->key))
		return conflict(r);
	set_conflict(r, false, "");
	if (!(d = desired_spec(r, requeue)))
		return 0;
	if (gaz_item_get(r->op, r->journal, &it, &st)) {
		protobuf_c_message_free_unpacked(&d->base, NULL);
		return etcd_fail(r, "reading", &st, requeue);
	}
	rc = apply(r, d, &it, requeue);
	if (!rc && !*requeue) {
		observe(r, d);
		set_ready(r, true, "Synced", "");
		/* A failure shows as condition Lifecycle=False and is retried
		 * at the next resync: it does not hold the journal back. */
		lifecycle(r, d, why, sizeof(why));
		rc = write_status(r);
	}
	protobuf_c_message_free_unpacked(&d->base, NULL);
	gaz_item_release(&it);
	return rc;
}

/* ---- deletion ---------------------------------------------------------------- */

static int stop_at_first(void *arg, const struct gaz_store_obj *obj, struct gaz_status *st)
{
	(void)arg;
	(void)obj;
	(void)st;
	return GAZ_ECANCELLED;
}

/* Lists the journal's prefix in its first store, so that a deletion
 * waiting for persistence can say why the broker cannot persist: the
 * failure goes to err[cap], "" when the store answers. Only s3:// stores
 * (a file:// store is the brokers' disk, not the operator's). */
static void probe_store(struct recon *r, const Protocol__JournalSpec *spec, char *err, size_t cap)
{
	struct gaz_status st = {0};
	struct gaz_store *s = NULL;
	char prefix[600];
	const char *url;
	int rc;

	err[0] = '\0';
	if (!spec || !spec->fragment || !spec->fragment->n_stores)
		return;
	url = spec->fragment->stores[0];
	if (strncmp(url, "s3://", 5))
		return;
	snprintf(prefix, sizeof(prefix), "%s/", r->journal);
	if ((rc = gaz_store_open(url, NULL, &s, &st)) == 0)
		rc = gaz_store_list(s, prefix, stop_at_first, NULL, &st);
	if (rc && rc != GAZ_ECANCELLED)
		snprintf(err, cap, "fragment store %s is unusable: %s", url, st.msg);
	gaz_store_unref(s);
}

/* Suspends, waits for persistence, deletes. *done when the item is gone;
 * otherwise `why` says what is awaited (st->code set on errors) and
 * blocked[cap] what keeps fragments from being persisted ("" if nothing
 * known). */
static int delete_item(struct recon *r, bool *done, char *why, char *blocked, size_t cap,
		       struct gaz_status *st)
{
	struct gaz_item it;
	struct gaz_fragsum fs = {0};
	bool applied = false;
	int rc;

	*done = false;
	if ((rc = gaz_item_get(r->op, r->journal, &it, st)))
		return rc;
	int level = it.spec && it.spec->suspend ? it.spec->suspend->level : 0;
	bool stores = it.spec && it.spec->fragment && it.spec->fragment->n_stores;
	if (!it.exists) {
		*done = true;
	} else if (it.spec && it.spec->flags != PROTOCOL__JOURNAL_SPEC__FLAG__O_RDONLY &&
		   level != PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__FULL) {
		/* Writers first: read-only, appends answer NOT_ALLOWED and
		 * commit nothing more. (A plain append still lifts a
		 * suspension, as in Gazette, so a suspension alone would not
		 * hold while writers write.) */
		uint32_t flags = it.spec->flags;
		int64_t rev = 0;
		it.spec->flags = PROTOCOL__JOURNAL_SPEC__FLAG__O_RDONLY;
		rc = gaz_item_put(r->op, it.spec, it.mod_revision, &applied, &rev, st);
		it.spec->flags = flags;
		if (!rc)
			snprintf(why, cap, "making journal %s read-only before deleting it", r->journal);
	} else if (it.spec && (stores || level == PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__NONE) &&
		   (!stores || (rc = gaz_broker_fragments(r->op, r->journal, &fs, st)) ||
		    fs.unpersisted)) {
		/* Suspending rolls the spool, so its content goes to the
		 * persister; then wait until every fragment is in a store. */
		bool suspend = level == PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__NONE;
		if (!rc && suspend && !r->op->cfg.broker_address[0])
			rc = gaz_status_set(st, GAZ_EINVAL, "deletionPolicy Delete needs --broker.address "
					    "to suspend journal %s before deleting it", r->journal);
		else if (!rc && suspend && (rc = gaz_broker_suspend(r->op, r->journal, st)) == 0)
			snprintf(why, cap, "suspending journal %s", r->journal);
		else if (!rc && !suspend) {
			probe_store(r, it.spec, blocked, cap);
			snprintf(why, cap, "waiting for %zu fragment(s) of %s to be persisted%s%.400s",
				 fs.unpersisted, r->journal, blocked[0] ? ": " : "", blocked);
		}
	} else if ((rc = gaz_item_delete(r->op, r->journal, it.mod_revision, &applied, st)) == 0) {
		*done = applied;
		if (!applied)
			snprintf(why, cap, "journal %s changed while deleting; retrying", r->journal);
	}
	if (rc && rc != GAZ_ENOMEM && !*done && it.spec) {
		/* Suspending or listing failed: when the journal's store is
		 * what fails, the deletion waits for it (not an error). */
		probe_store(r, it.spec, blocked, cap);
		if (blocked[0]) {
			snprintf(why, cap, "journal %s cannot be suspended and persisted yet: %.300s "
				 "(broker: %.200s)", r->journal, blocked, st->msg);
			gaz_status_clear(st);
			rc = 0;
		}
	}
	gaz_item_release(&it);
	return rc;
}

static int drop_finalizer(struct recon *r, int64_t *requeue)
{
	struct gaz_status st = {0};

	if (gaz_cr_set_finalizer(r->op, r->obj, false, &st)) {
		gaz_debug("removing finalizer failed", "key=%s err=\"%s\"", r->key, st.msg);
		*requeue = st.code == GAZ_EEXIST ? REQUEUE_RACE_MS : REQUEUE_ERROR_MS;
	}
	return 0;
}

static int finalize(struct recon *r, int64_t *requeue)
{
	struct gaz_status st = {0};
	char why[700] = "", blocked[600] = "";
	bool done = false;

	if (!gaz_cr_has_finalizer(r->obj))
		return 0;
	if (strcmp(r->owner, r->key))
		return drop_finalizer(r, requeue);
	if (!r->other_live_claimant && lifecycle(r, NULL, why, sizeof(why))) {
		set_ready(r, false, "Deleting", why);
		write_status(r);
		*requeue = REQUEUE_ERROR_MS;
		return 0;
	}
	if (gaz_journal_cr_policy(r->spec) == GAZ_DELETION_RETAIN) {
		event(r, "Normal", "Retained", "journal \"%s\" stays in etcd (deletionPolicy Retain)",
		      r->journal);
		return drop_finalizer(r, requeue);
	}
	if (r->other_live_claimant) {
		event(r, "Normal", "HandedOver",
		      "journal \"%s\" is claimed by another JournalSpec; it stays in etcd", r->journal);
		return drop_finalizer(r, requeue);
	}
	if (delete_item(r, &done, why, blocked, sizeof(blocked), &st)) {
		gaz_warn("deleting journal failed", "key=%s journal=%s err=\"%s\"", r->key, r->journal,
			 st.msg);
		return fail(r, "DeleteFailed", st.msg, REQUEUE_ERROR_MS, requeue);
	}
	if (!done) {
		gaz_info("deleting journal", "key=%s journal=%s state=\"%s\"", r->key, r->journal, why);
		if (blocked[0] && strcmp(json_string_value(json_object_get(r->old_status,
									   "lastError")) ?: "", why))
			event(r, "Warning", "PersistenceBlocked", "deleting journal %s waits: its fragments "
			      "cannot be persisted, so its spec stays in etcd: %s", r->journal, blocked);
		set_ready(r, false, blocked[0] ? "PersistenceBlocked" : "Deleting", why);
		write_status(r);
		*requeue = REQUEUE_WAIT_MS;
		return 0;
	}
	event(r, "Normal", "Deleted", "journal \"%s\" suspended, persisted and deleted from etcd",
	      r->journal);
	gaz_metric_inc(gaz_metric_with(r->op->m_writes, "Deleted"));
	return drop_finalizer(r, requeue);
}

/* GETs the CR afresh: the cache may not show our own last status write
 * yet, and decisions (adopted or not, drift or update) read the status.
 * *obj is NULL when the CR no longer exists. */
static int fetch(struct gaz_op *op, const char *key, json_t **obj)
{
	const char *slash = strchr(key, '/');
	struct gaz_status st = {0};
	char path[1024];
	int rc;

	*obj = NULL;
	if (!slash)
		return 0;
	snprintf(path, sizeof(path), GAZ_OP_API_PATH "/namespaces/%.*s/journalspecs/%s",
		 (int)(slash - key), key, slash + 1);
	rc = gaz_kube_request(op->kube, "GET", path, NULL, NULL, obj, NULL, &st);
	if (rc == GAZ_ENOTFOUND)
		return 0;
	if (rc)
		gaz_warn("reading JournalSpec failed", "key=%s err=\"%s\"", key, st.msg);
	return rc;
}

int gaz_journal_reconcile(struct gaz_op *op, const char *key, int64_t *requeue_ms)
{
	struct recon r = {.op = op, .key = key};
	int rc = 0;

	*requeue_ms = 0;
	if ((rc = fetch(op, key, &r.obj)) || !r.obj) {
		if (rc)
			*requeue_ms = REQUEUE_ERROR_MS;
		return rc; /* gone: the finalizer already did what deletion needs */
	}
	r.spec = json_object_get(r.obj, "spec");
	r.old_status = json_object_get(r.obj, "status");
	r.journal = spec_name(r.obj);
	r.generation = json_integer_value(json_object_get(json_object_get(r.obj, "metadata"),
							  "generation"));
	r.deleting = being_deleted(r.obj);
	if (r.journal) {
		find_owner(&r);
		status_init(&r);
		rc = r.deleting ? finalize(&r, requeue_ms) : sync(&r, requeue_ms);
	}
	json_decref(r.status);
	json_decref(r.obj);
	return rc;
}
