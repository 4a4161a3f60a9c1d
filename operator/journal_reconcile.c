/*
 * journal_reconcile.c - one JournalSpec CR against its etcd item. The
 * steps shared with ShardSpecs are in cr_reconcile.c; this file has what
 * is particular to journals.
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
#include "operator/cr_reconcile.h"
#include "operator/journal_cr.h"
#include "operator/lifecycle.h"
#include "operator/operator.h"
#include "protocol/validate.h"
#include "store/store.h"

/* Route, suspension and fragment summary into the status; best effort. */
static void observe(struct gaz_crr *r, const Protocol__JournalSpec *spec)
{
	struct gaz_item_route route;
	struct gaz_fragsum fs;
	struct gaz_status st = {0};
	int level = spec && spec->suspend ? spec->suspend->level : 0;

	json_object_set_new(r->status, "suspend", json_string(gaz_suspend_level_name(level)));
	if (gaz_item_route(r->op, r->name, &route, &st) == 0) {
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
	if (gaz_broker_fragments(r->op, r->name, &fs, &st)) {
		gaz_debug("fragment summary unavailable", "journal=%s err=%s", r->name, st.msg);
		return;
	}
	if (fs.suspended && spec && spec->suspend)
		fs.write_head = fs.persisted_through = spec->suspend->offset;
	json_object_set_new(r->status, "writeHead", json_integer(fs.write_head));
	json_object_set_new(r->status, "persistedThrough", json_integer(fs.persisted_through));
}

/* Desired spec from the CR, validated. NULL after reporting the failure. */
static Protocol__JournalSpec *desired_spec(struct gaz_crr *r, int64_t *requeue)
{
	Protocol__JournalSpec *d = NULL;
	struct gaz_status st = {0};

	if (gaz_journal_cr_to_spec(r->spec, &d, &st) || gaz_validate_journal_spec(d, &st)) {
		if (d)
			protobuf_c_message_free_unpacked(&d->base, NULL);
		gaz_crr_invalid(r, &st, requeue);
		return NULL;
	}
	return d;
}

static int put_spec(struct gaz_crr *r, void *arg, int64_t expect_mod, bool *applied,
		    int64_t *rev, struct gaz_status *st)
{
	return gaz_item_put(r->op, arg, expect_mod, applied, rev, st);
}

static int apply(struct gaz_crr *r, Protocol__JournalSpec *d, struct gaz_item *it, int64_t *requeue)
{
	struct gaz_crr_found f = {.exists = it->exists, .readable = it->spec != NULL,
				  .decode_err = it->decode_err};

	if (it->spec && it->spec->suspend) /* broker-owned: carry it over */
		d->suspend = (Protocol__JournalSpec__Suspend *)gaz_pb_copy(&it->spec->suspend->base);
	return gaz_crr_apply(r, &f, it->mod_revision, it->spec && gaz_journal_spec_equal(it->spec, d),
			     put_spec, d, r->op->m_writes, requeue);
}

/* Bucket lifecycle rules from the retention (lifecycle.c); d NULL removes
 * them. A Warning event when it starts failing or the failure changes;
 * the failure's text goes to why[cap]. Nothing with --bucket-lifecycle
 * off. */
static int lifecycle(struct gaz_crr *r, const Protocol__JournalSpec *d, char *why, size_t cap)
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
	gaz_warn("bucket lifecycle failed", "key=%s journal=%s err=%s", r->key, r->name, st.msg);
	if (!old_msg || strcmp(old_msg, st.msg))
		gaz_crr_event(r, "Warning", "LifecycleFailed", "%s", st.msg);
	return rc;
}

static int sync(struct gaz_crr *r, int64_t *requeue)
{
	char why[600];
	struct gaz_status st = {0};
	struct gaz_item it;
	Protocol__JournalSpec *d;
	int rc;

	if (!gaz_crr_add_finalizer(r, requeue))
		return 0;
	if (strcmp(r->owner, r->key))
		return gaz_crr_conflict(r);
	gaz_crr_condition(r, "Conflict", false, "NoConflict", "");
	if (!(d = desired_spec(r, requeue)))
		return 0;
	if (gaz_item_get(r->op, r->name, &it, &st)) {
		protobuf_c_message_free_unpacked(&d->base, NULL);
		return gaz_crr_etcd_fail(r, "reading", &st, requeue);
	}
	rc = apply(r, d, &it, requeue);
	if (!rc && !*requeue) {
		observe(r, d);
		gaz_crr_set_ready(r, true, "Synced", "");
		/* A failure shows as condition Lifecycle=False and is retried
		 * at the next resync: it does not hold the journal back. */
		lifecycle(r, d, why, sizeof(why));
		rc = gaz_crr_write_status(r);
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
static void probe_store(struct gaz_crr *r, const Protocol__JournalSpec *spec, char *err, size_t cap)
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
	snprintf(prefix, sizeof(prefix), "%s/", r->name);
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
static int delete_item(struct gaz_crr *r, bool *done, char *why, char *blocked, size_t cap,
		       struct gaz_status *st)
{
	struct gaz_item it;
	struct gaz_fragsum fs = {0};
	bool applied = false;
	int rc;

	*done = false;
	if ((rc = gaz_item_get(r->op, r->name, &it, st)))
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
			snprintf(why, cap, "making journal %s read-only before deleting it", r->name);
	} else if (it.spec && (stores || level == PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__NONE) &&
		   (!stores || (rc = gaz_broker_fragments(r->op, r->name, &fs, st)) ||
		    fs.unpersisted)) {
		/* Suspending rolls the spool, so its content goes to the
		 * persister; then wait until every fragment is in a store. */
		bool suspend = level == PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__NONE;
		if (!rc && suspend && !r->op->cfg.broker_address[0])
			rc = gaz_status_set(st, GAZ_EINVAL, "deletionPolicy Delete needs --broker.address "
					    "to suspend journal %s before deleting it", r->name);
		else if (!rc && suspend && (rc = gaz_broker_suspend(r->op, r->name, st)) == 0)
			snprintf(why, cap, "suspending journal %s", r->name);
		else if (!rc && !suspend) {
			probe_store(r, it.spec, blocked, cap);
			snprintf(why, cap, "waiting for %zu fragment(s) of %s to be persisted%s%.400s",
				 fs.unpersisted, r->name, blocked[0] ? ": " : "", blocked);
		}
	} else if ((rc = gaz_item_delete(r->op, r->name, it.mod_revision, &applied, st)) == 0) {
		*done = applied;
		if (!applied)
			snprintf(why, cap, "journal %s changed while deleting; retrying", r->name);
	}
	if (rc && rc != GAZ_ENOMEM && !*done && it.spec) {
		/* Suspending or listing failed: when the journal's store is
		 * what fails, the deletion waits for it (not an error). */
		probe_store(r, it.spec, blocked, cap);
		if (blocked[0]) {
			snprintf(why, cap, "journal %s cannot be suspended and persisted yet: %.300s "
				 "(broker: %.200s)", r->name, blocked, st->msg);
			gaz_status_clear(st);
			rc = 0;
		}
	}
	gaz_item_release(&it);
	return rc;
}

static int finalize(struct gaz_crr *r, int64_t *requeue)
{
	struct gaz_status st = {0};
	char why[700] = "", blocked[600] = "";
	bool done = false;

	if (!gaz_cr_has_finalizer(r->obj))
		return 0;
	if (strcmp(r->owner, r->key))
		return gaz_crr_drop_finalizer(r, requeue);
	if (!r->other_live_claimant && lifecycle(r, NULL, why, sizeof(why))) {
		gaz_crr_set_ready(r, false, "Deleting", why);
		gaz_crr_write_status(r);
		*requeue = GAZ_CRR_REQUEUE_ERROR_MS;
		return 0;
	}
	if (gaz_crr_let_go(r, gaz_journal_cr_policy(r->spec) == GAZ_DELETION_RETAIN, requeue))
		return 0;
	if (delete_item(r, &done, why, blocked, sizeof(blocked), &st)) {
		gaz_warn("deleting journal failed", "key=%s journal=%s err=%s", r->key, r->name,
			 st.msg);
		return gaz_crr_fail(r, "DeleteFailed", st.msg, GAZ_CRR_REQUEUE_ERROR_MS, requeue);
	}
	if (!done) {
		gaz_info("deleting journal", "key=%s journal=%s state=%s", r->key, r->name, why);
		if (blocked[0] && strcmp(json_string_value(json_object_get(r->old_status,
									   "lastError")) ?: "", why))
			gaz_crr_event(r, "Warning", "PersistenceBlocked", "deleting %s waits: its "
				      "fragments cannot be persisted, so its spec stays in etcd: %s",
				      r->what, blocked);
		gaz_crr_set_ready(r, false, blocked[0] ? "PersistenceBlocked" : "Deleting", why);
		gaz_crr_write_status(r);
		*requeue = GAZ_CRR_REQUEUE_WAIT_MS;
		return 0;
	}
	gaz_crr_event(r, "Normal", "Deleted", "%s suspended, persisted and deleted from etcd",
		      r->what);
	gaz_metric_inc(gaz_metric_with(r->op->m_writes, "Deleted"));
	return gaz_crr_drop_finalizer(r, requeue);
}

static struct gaz_informer *journals(const struct gaz_op *op)
{
	return op->journals;
}

static const char *const keep[] = {"adopted", "primary", "replicas", "suspend", "writeHead",
				   "persistedThrough", "etcdModRevision", "conditions",
				   "lifecycle", NULL};
static const char *const drop[] = {"etcdModRevision", "adopted", "primary", "replicas",
				   "writeHead", "persistedThrough", "suspend", "lifecycle", NULL};
static const struct gaz_crr_kind journal_kind = {
	.kind = "JournalSpec", .plural = "journalspecs", .noun = "journal",
	.claimed = "JournalClaimed", .qprefix = "", .keep = keep, .drop = drop,
	.informer = journals,
};

void gaz_journal_enqueue_related(struct gaz_op *op, const char *journal, const char *except_key)
{
	gaz_crr_enqueue_related(&journal_kind, op, journal, except_key);
}

int gaz_journal_reconcile(struct gaz_op *op, const char *key, int64_t *requeue_ms)
{
	struct gaz_crr r = {.k = &journal_kind, .op = op};
	int rc;

	*requeue_ms = 0;
	if ((rc = gaz_crr_load(&r, key)) || !r.obj) {
		if (rc)
			*requeue_ms = GAZ_CRR_REQUEUE_ERROR_MS;
		return rc; /* gone: the finalizer already did what deletion needs */
	}
	if (r.name) {
		char *ik = gaz_ks_item_key(op->cfg.etcd_prefix, r.name);
		snprintf(r.item_key, sizeof(r.item_key), "%s", ik ? ik : r.name);
		free(ik);
		snprintf(r.what, sizeof(r.what), "journal \"%s\"", r.name);
		gaz_crr_begin(&r);
		if (gaz_crr_paused(r.obj)) {
			rc = gaz_crr_pause(&r);
		} else {
			gaz_crr_note_resumed(&r);
			rc = r.deleting ? finalize(&r, requeue_ms) : sync(&r, requeue_ms);
		}
	}
	gaz_crr_release(&r);
	return rc;
}
