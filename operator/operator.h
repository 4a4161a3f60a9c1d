/*
 * operator.h - gazette-operator's shared state and the pieces the
 * JournalSpec and ShardSpec reconcilers are made of:
 *
 *   journal_reconcile.c  the decisions: ownership and conflicts, apply with
 *                        Gazette's optimistic concurrency, adoption, drift,
 *                        finalizer and deletion policy
 *   etcd_items.c         the brokers' keyspace: read / write / delete one
 *                        item (<root>/items/<journal>), read its route
 *   broker_ops.c         through a broker: suspend a journal, summarise its
 *                        fragments (write head, persisted-through)
 *   cr_status.c          the Kubernetes side: finalizers, status, conditions
 *   election.c           Lease leader election
 *   shard_reconcile.c    the same decisions for ShardSpec CRs against a
 *                        consumer keyspace (<prefix>/items/<shard id>);
 *                        shard_cr.c converts them
 *   cr_reconcile.c       the steps both reconcilers share (loading,
 *                        ownership, status and Events, apply and drift,
 *                        the finalizer's common cases); cr_fields.c the
 *                        field helpers both conversions share
 *
 * Threads: informer threads only enqueue; one worker thread runs every
 * reconcile, so two reconciles never race on one journal inside this
 * process; other writers (brokers, gazctl, a second operator) are fenced
 * by etcd mod revisions and Kubernetes resourceVersions.
 */
#ifndef GAZ_OPERATOR_OPERATOR_H
#define GAZ_OPERATOR_OPERATOR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "common/err.h"
#include "common/metrics.h"
#include "etcd/etcd.h"
#include "operator/informer.h"
#include "operator/kube.h"
#include "operator/queue.h"
#include "protocol.pb-c.h"

#define GAZ_OP_GROUP "gazette-c.dev"
#define GAZ_OP_VERSION "v1alpha1"
#define GAZ_OP_API_PATH "/apis/" GAZ_OP_GROUP "/" GAZ_OP_VERSION
#define GAZ_OP_FINALIZER "gazette-c.dev/journal"
#define GAZ_OP_SHARD_FINALIZER "gazette-c.dev/shard"
/* Work-queue keys of ShardSpecs are this plus "namespace/name" (journal
 * keys are bare "namespace/name"; ':' is in no namespace or name). */
#define GAZ_OP_SHARD_KEY "shard:"
#define GAZ_OP_COMPONENT "gazette-operator"

struct gaz_op_config {
	char *kubeconfig;        /* --kubeconfig ("" = in-cluster, else ~/.kube/config) */
	char *kube_context;
	char *namespace;         /* watched namespace; "" = all */
	char *etcd_address;
	char *etcd_cert_file, *etcd_cert_key_file, *etcd_trusted_ca_file; /* "" = not set */
	char *broker_cert_file, *broker_cert_key_file, *broker_trusted_ca_file; /* "" = not set */
	char *etcd_prefix;       /* the brokers' --etcd.prefix */
	char *consumer_prefix;   /* default consumer --etcd.prefix of ShardSpecs ("" = none) */
	char *broker_address;    /* for suspension and fragment summaries */
	char *broker_auth_keys;  /* --broker.auth-keys: base64 keys; each broker
	                          * call signs its own token with the first
	                          * ("" = none; wins over broker_auth_token) */
	char *broker_auth_token; /* --broker.auth-token: a fixed bearer token */
	int64_t resync_ns;       /* every CR reconciled at least this often */
	int64_t watch_timeout_ns;
	int64_t broker_timeout_ns;
	char *http_address;      /* "127.0.0.1:8081" or ":8081" */
	bool bucket_lifecycle;   /* keep S3 lifecycle rules from retention */
	bool leader_elect;
	char *lease_name, *lease_namespace, *identity;
	int64_t lease_duration_ns, renew_deadline_ns, retry_period_ns;
	char *sa_dir;            /* service-account directory for in-cluster */
	char *log_level, *log_format;
};

struct gaz_op {
	struct gaz_op_config cfg;
	struct gaz_kube *kube;
	struct gaz_etcd *etcd;
	struct gaz_informer *journals;
	struct gaz_informer *shards;
	struct gaz_queue *queue;
	atomic_bool stop;
	atomic_bool leading;     /* true when elected, or without election */
	atomic_bool worker_alive;
	struct gaz_metric *m_reconciles, *m_writes, *m_duration;
};

/* ---- etcd_items.c ------------------------------------------------------- */

/* One item as read from etcd. */
struct gaz_item {
	bool exists;
	int64_t mod_revision;      /* 0 when absent */
	Protocol__JournalSpec *spec; /* NULL when absent or undecodable */
	char decode_err[600];      /* why spec is NULL although the key exists */
};

void gaz_item_release(struct gaz_item *it);

/* gaz_item_get reads <root>/items/<journal>. Errors of gaz_etcd_range. */
int gaz_item_get(struct gaz_op *op, const char *journal, struct gaz_item *out,
		 struct gaz_status *st);

/* gaz_item_put writes `spec` if the key's ModRevision still equals
 * `expect_mod` (0 = the key must not exist), Gazette's Apply compare.
 * *applied says whether the compare held; *revision receives the txn
 * revision. */
int gaz_item_put(struct gaz_op *op, const Protocol__JournalSpec *spec, int64_t expect_mod,
		 bool *applied, int64_t *revision, struct gaz_status *st);

/* gaz_item_delete deletes the key if its ModRevision equals expect_mod. */
int gaz_item_delete(struct gaz_op *op, const char *journal, int64_t expect_mod, bool *applied,
		    struct gaz_status *st);

/* The journal's assignments: members "zone/suffix" in key order, and the
 * index of the slot-0 (primary) member or -1. */
struct gaz_item_route {
	char **members;
	size_t n;
	int primary;
	ProtobufCBinaryData *values; /* each assignment's value (owned), when asked for */
};

int gaz_item_route(struct gaz_op *op, const char *journal, struct gaz_item_route *out,
		   struct gaz_status *st);
/* gaz_item_route_at: the same for item `item` of the allocator keyspace
 * rooted at `root` (a consumer's prefix and a shard id: Gazette's consumer
 * allocator uses the brokers' assignment key layout), with each
 * assignment's value in out->values[i] when `values` (a consumer's
 * ReplicaStatus; NULL otherwise). */
int gaz_item_route_at(struct gaz_op *op, const char *root, const char *item, bool values,
		      struct gaz_item_route *out, struct gaz_status *st);
void gaz_item_route_release(struct gaz_item_route *r);

/* ---- broker_ops.c --------------------------------------------------------- */

/* gaz_broker_suspend asks the journal's primary (through --broker.address)
 * to suspend it now: an empty Append with SUSPEND_NOW, as `gazctl journals
 * suspend --force`. The primary rolls its spool (handing the fragment to
 * its persister) and records suspend PARTIAL (or FULL when the journal
 * holds no content) in the spec. OK and SUSPENDED both succeed. Bounded by
 * --broker.timeout. */
int gaz_broker_suspend(struct gaz_op *op, const char *journal, struct gaz_status *st);

/* What a journal's fragment index says. */
struct gaz_fragsum {
	int64_t write_head;        /* largest fragment end */
	int64_t persisted_through; /* every fragment below is persisted */
	size_t unpersisted;        /* fragments not yet in a store */
	bool suspended;            /* the broker answered SUSPENDED (FULL) */
};

/* gaz_broker_fragments lists the journal's fragments (ListFragments) and
 * summarises them. */
int gaz_broker_fragments(struct gaz_op *op, const char *journal, struct gaz_fragsum *out,
			 struct gaz_status *st);

/* ---- cr_status.c ----------------------------------------------------------- */

/* gaz_cr_path writes the API path of a JournalSpec or ShardSpec (by its
 * kind: "/apis/.../namespaces/<ns>/journalspecs/<name>", or shardspecs)
 * plus `suffix` ("" or "/status"). */
void gaz_cr_path(const json_t *obj, const char *suffix, char *buf, size_t cap);

/* gaz_cr_has_finalizer: metadata.finalizers holds ours (the journal or
 * the shard finalizer, by the object's kind). */
bool gaz_cr_has_finalizer(const json_t *obj);

/* gaz_cr_set_finalizer adds (add=true) or removes ours with a merge patch
 * guarded by the object's resourceVersion (409 -> GAZ_EEXIST: re-read and
 * retry). */
int gaz_cr_set_finalizer(struct gaz_op *op, const json_t *obj, bool add, struct gaz_status *st);

/* gaz_cr_condition sets condition `type` in the status object `status`
 * (borrowed, modified), keeping lastTransitionTime when status is unchanged
 * from `old_status` (may be NULL). */
void gaz_cr_condition(json_t *status, const json_t *old_status, const char *type,
		      const char *cstatus, const char *reason, const char *message,
		      int64_t generation);

/* gaz_cr_patch_status writes `status` (borrowed) to the status
 * subresource unless it equals the object's current status (ignoring
 * lastSyncTime, which is then refreshed). *written says whether it did. */
int gaz_cr_patch_status(struct gaz_op *op, const json_t *obj, json_t *status, bool *written,
			struct gaz_status *st);

/* gaz_cr_needs_reconcile: a watch event changed more than the status
 * (generation, deletionTimestamp or finalizers), or added/removed the
 * object. Status-only changes are mostly our own writes. */
bool gaz_cr_needs_reconcile(const json_t *old, const json_t *obj);

/* ---- journal_reconcile.c ---------------------------------------------------- */

/* gaz_journal_reconcile brings the JournalSpec CR `key` and its etcd item in
 * line. Returns 0 when done until the next change or resync, or asks to run
 * again after *requeue_ms (> 0) (waiting on a broker, a lost txn, an
 * error). */
int gaz_journal_reconcile(struct gaz_op *op, const char *key, int64_t *requeue_ms);

/* gaz_journal_enqueue_related queues every cached CR naming `journal`. */
void gaz_journal_enqueue_related(struct gaz_op *op, const char *journal, const char *except_key);

/* ---- shard_reconcile.c ------------------------------------------------------ */

/* gaz_shard_informer_start starts the ShardSpec informer (op->shards),
 * which queues GAZ_OP_SHARD_KEY "<ns>/<name>" keys on changes. Errors of
 * gaz_informer_start. */
int gaz_shard_informer_start(struct gaz_op *op, struct gaz_status *st);

/* gaz_shard_enqueue_all queues every cached ShardSpec (the resync). */
void gaz_shard_enqueue_all(struct gaz_op *op);

/* gaz_shard_reconcile brings the ShardSpec CR of queue key `key`
 * (GAZ_OP_SHARD_KEY "<ns>/<name>") and its consumer-keyspace item in
 * line; returns and requeues as gaz_journal_reconcile. */
int gaz_shard_reconcile(struct gaz_op *op, const char *key, int64_t *requeue_ms);

/* ---- election.c ------------------------------------------------------------- */

/* gaz_election_run campaigns for the Lease and keeps it, setting
 * op->leading; returns when op->stop is set (releasing the Lease if held)
 * or when leadership is lost (exits the process: a deposed leader must not
 * keep writing). Runs on its own thread. */
void *gaz_election_run(void *op);

#endif
