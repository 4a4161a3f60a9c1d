/*
 * cr_reconcile.h - the reconcile flow JournalSpec and ShardSpec CRs share
 * (journal_reconcile.c and shard_reconcile.c supply the per-kind parts):
 *
 *   load        GET the CR afresh (the informer's cache may not show our
 *               own last status write yet; decisions read the status)
 *   find_owner  the oldest CR naming the same item owns it (creation
 *               time, then namespace/name); others are in Conflict
 *   status      a new status from the old one's operator-maintained
 *               fields; conditions, Ready, lastError, Events
 *   applied     after an etcd write (or none): the reason (Created,
 *               Adopted, Updated, DriftCorrected), adoption, drift
 *               condition and Event, etcdModRevision
 *   finalizer   the deletion steps common to both: not the owner, Retain,
 *               or handed over to another claimant -> drop the finalizer
 *
 * Runs on the operator's one worker thread (operator.h); nothing here is
 * thread-safe.
 */
#ifndef GAZ_OPERATOR_CR_RECONCILE_H
#define GAZ_OPERATOR_CR_RECONCILE_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "operator/operator.h"

#define GAZ_CRR_REQUEUE_RACE_MS 100
#define GAZ_CRR_REQUEUE_WAIT_MS 1000
#define GAZ_CRR_REQUEUE_ERROR_MS 5000

struct gaz_crr;

/* What differs between the kinds. Every pointer is static. */
struct gaz_crr_kind {
	const char *kind;          /* "JournalSpec": messages */
	const char *plural;        /* "journalspecs": API paths */
	const char *noun;          /* "journal": log fields, status field, messages */
	const char *claimed;       /* reason of Conflict=True */
	const char *qprefix;       /* work-queue key prefix ("" or GAZ_OP_SHARD_KEY) */
	const char *const *keep;   /* status fields carried over (NULL-terminated) */
	const char *const *drop;   /* status fields a conflicting CR loses (NULL-terminated) */
	struct gaz_informer *(*informer)(const struct gaz_op *op);
	/* Whether the cached CR `o` names r's item (besides the name). NULL:
	 * the name alone decides. */
	bool (*same_item)(const struct gaz_crr *r, const json_t *o);
};

/* One reconcile of one CR. */
struct gaz_crr {
	const struct gaz_crr_kind *k;
	struct gaz_op *op;
	const char *key;           /* "<ns>/<name>" */
	json_t *obj;               /* the CR (own reference) */
	const json_t *spec, *old_status;
	json_t *status;            /* the status being built (own reference) */
	const char *name;          /* spec.name: the journal or shard id */
	char item_key[1200];       /* <prefix>/items/<name>; "" when unknown */
	char what[1400];           /* the item in messages: `journal "a/b"` */
	int64_t generation;
	bool deleting;
	char owner[600];           /* key of the owning CR */
	bool other_live_claimant;  /* a CR other than us, not being deleted */
};

/* What a read of the item found, for gaz_crr_applied. */
struct gaz_crr_found {
	bool exists;
	bool readable;             /* decoded, valid and naming the item */
	const char *decode_err;    /* why not readable */
};

/* spec.name of a CR, or NULL (borrowed from `o`). */
const char *gaz_crr_spec_name(const json_t *o);

/* Whether the CR has a metadata.deletionTimestamp. */
bool gaz_crr_being_deleted(const json_t *o);

/* gaz_crr_load GETs the CR of `key` and fills r (r->k, r->op set by the
 * caller). Returns 0 with r->obj NULL when the CR is gone; an API error
 * otherwise (logged). */
int gaz_crr_load(struct gaz_crr *r, const char *key);

/* gaz_crr_begin (after the kind set item_key and what): the owner (from
 * the informer's cache) and the new status (r->status, a new object
 * carrying the kind's `keep` fields of the old one). Cannot fail. */
void gaz_crr_begin(struct gaz_crr *r);

/* gaz_crr_release drops r's references to the CR and the status. */
void gaz_crr_release(struct gaz_crr *r);

/* gaz_crr_enqueue_related queues every cached CR of the kind naming
 * `name`, but `except_key`. */
void gaz_crr_enqueue_related(const struct gaz_crr_kind *k, struct gaz_op *op, const char *name,
			     const char *except_key);

/* gaz_crr_event posts a Kubernetes Event on the CR (`type` "Normal" or
 * "Warning"; the message truncated at 1200 bytes) and logs it. A failed
 * post is logged by the kube client, not returned. */
void gaz_crr_event(struct gaz_crr *r, const char *type, const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* gaz_crr_condition sets condition `type` in r->status ("True" when `on`),
 * keeping its lastTransitionTime when the old status had the same value,
 * and observedGeneration = r->generation. */
void gaz_crr_condition(struct gaz_crr *r, const char *type, bool on, const char *reason,
		       const char *msg);

/* gaz_crr_had_condition: the old status had condition `type` with status
 * `cstatus` ("True" or "False"). */
bool gaz_crr_had_condition(const struct gaz_crr *r, const char *type, const char *cstatus);

/* gaz_crr_set_ready sets Ready, and lastError to `msg` when not ok
 * (removed when ok). */
void gaz_crr_set_ready(struct gaz_crr *r, bool ok, const char *reason, const char *msg);

/* gaz_crr_write_status patches the CR's status subresource with r->status
 * (nothing sent when unchanged). Returns 0 or the API error's GAZ_E* code
 * (logged). */
int gaz_crr_write_status(struct gaz_crr *r);

/* gaz_crr_fail: Ready=False `reason` with `msg`, a Warning Event unless the
 * same error stands, the status written, *requeue = requeue_ms. Returns 0. */
int gaz_crr_fail(struct gaz_crr *r, const char *reason, const char *msg, int64_t requeue_ms,
		 int64_t *requeue);

/* gaz_crr_etcd_fail: gaz_crr_fail with EtcdUnavailable, the message naming
 * the key and the endpoint; `what` is "reading" or "writing". */
int gaz_crr_etcd_fail(struct gaz_crr *r, const char *what, const struct gaz_status *st,
		      int64_t *requeue);

/* gaz_crr_conflict: we are not the owner: Conflict=True, Ready=False,
 * status fields of the item dropped, written. */
int gaz_crr_conflict(struct gaz_crr *r);

/* gaz_crr_invalid reports a desired spec that could not be built or
 * failed Gazette's validation (st): Ready=False InvalidSpec, or a retry
 * for GAZ_ENOMEM. */
void gaz_crr_invalid(struct gaz_crr *r, const struct gaz_status *st, int64_t *requeue);

/* Writes the kind's desired spec (`arg`) if the item's ModRevision is
 * still expect_mod (0: absent): *applied says whether it was, *rev the
 * revision written. */
typedef int (*gaz_crr_put_fn)(struct gaz_crr *r, void *arg, int64_t expect_mod, bool *applied,
			      int64_t *rev, struct gaz_status *st);

/* gaz_crr_apply brings the item in line: unless it exists, is readable and
 * `equal` to the desired spec, put (compare on mod_revision; a lost compare
 * requeues to read again; an etcd failure is EtcdUnavailable), counted in
 * m_writes by reason (Created, Adopted, Updated, DriftCorrected); then
 * adoption, drift (condition DriftCorrected and its Event) or an Event,
 * and etcdModRevision go into the status. Returns 0. */
int gaz_crr_apply(struct gaz_crr *r, const struct gaz_crr_found *f, int64_t mod_revision,
		  bool equal, gaz_crr_put_fn put, void *arg, struct gaz_metric *m_writes,
		  int64_t *requeue);

/* The annotation that pauses the operator for one CR (value "true"). */
#define GAZ_CRR_PAUSE_ANNOTATION "gazette-c.dev/paused"

/* gaz_crr_paused: whether the CR carries GAZ_CRR_PAUSE_ANNOTATION "true". */
bool gaz_crr_paused(const json_t *o);

/* gaz_crr_pause is the whole reconcile of a paused CR: nothing is written
 * to etcd or the bucket and nothing deleted (a deletion waits, held by the
 * finalizer, until the annotation goes), so a person may change the item
 * by hand without it being corrected; status says so (paused: true,
 * condition Paused=True, reason PausedByAnnotation) and an Event marks
 * the change. Removing the annotation resumes at once (the watch sees the
 * edit): the next reconcile corrects any drift as usual and sets Paused
 * False. Strimzi's strimzi.io/pause-reconciliation is the model. Returns
 * 0 or the status write's error. */
int gaz_crr_pause(struct gaz_crr *r);

/* gaz_crr_note_resumed: on a CR that is not paused, turns a Paused
 * condition left by an earlier pause to False (reason Resumed), with an
 * Event; CRs never paused get no Paused condition. */
void gaz_crr_note_resumed(struct gaz_crr *r);

/* gaz_crr_add_finalizer puts ours on the CR unless there. False (and
 * *requeue set) when that failed: stop this reconcile. */
bool gaz_crr_add_finalizer(struct gaz_crr *r, int64_t *requeue);

/* gaz_crr_drop_finalizer removes ours; on failure *requeue. Returns 0. */
int gaz_crr_drop_finalizer(struct gaz_crr *r, int64_t *requeue);

/* gaz_crr_let_go: the deletion steps that leave the item alone. Returns
 * true (finalizer dropped, or being dropped) when not the owner, under
 * deletionPolicy Retain, or when another live CR claims the item; false
 * when the kind must delete the item itself. */
bool gaz_crr_let_go(struct gaz_crr *r, bool retain, int64_t *requeue);

#endif
