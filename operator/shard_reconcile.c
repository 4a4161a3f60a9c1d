/*
 * shard_reconcile.c - one ShardSpec CR against its item in a Gazette
 * consumer application's etcd keyspace: <prefix>/items/<shard id>, a
 * consumer.ShardSpec protobuf (gazette-facts §1.7, §4.1), where <prefix>
 * is the CR's spec.etcdPrefix or else --consumer.etcd-prefix (the
 * application's own --etcd.prefix).
 *
 * Gazette's consumers read that key through their allocator keyspace,
 * which skips a value that does not decode, validate, or name the key's
 * shard; Gazette's Shard Apply writes it with a ModRevision compare
 * (consumer/shard_api.go). The operator does what that Apply does, with
 * the JournalSpec reconciler's policy (journal_reconcile.c; the shared
 * steps are in cr_reconcile.c):
 *
 * Ownership. CRs naming one item (same prefix and shard id): the oldest
 * (creationTimestamp, then namespace/name) owns it; the others get
 * Ready=False, Conflict=True and never write.
 *
 * Sync (owner, not deleting):
 *   finalizer present? else add it
 *   desired := CR spec, validated with Gazette's ShardSpec rules
 *   item absent                   -> put, compare ModRevision == 0   "Created"
 *   item differs or is unreadable -> put, compare ModRevision == seen
 *        never synced before      -> "Adopted"
 *        CR generation changed    -> "Updated"
 *        otherwise                -> "DriftCorrected"
 *   equal, never synced           -> "Adopted" (nothing written)
 *   a lost compare re-reads and decides again.
 *   A correction of drift or of an unreadable value also sets condition
 *   DriftCorrected=True (reason ChangedInEtcd, DeletedFromEtcd or
 *   UnreadableInEtcd, with what was found), kept until the next one, so
 *   the last out-of-band change stays visible after the Event expires.
 *   status: Ready, observedGeneration, etcdKey, etcdModRevision, route,
 *   and the replicas' ReplicaStatus reduced as `gazctl shards list` does.
 *
 * Deletion (deletionTimestamp set, our finalizer present):
 *   not the owner, Retain, or another live CR claims the item
 *                    -> drop the finalizer; the item stays
 *   Delete           -> delete the item comparing the ModRevision just
 *                       read (Gazette's Apply delete removes the spec
 *                       only: hints and recovery log stay), then drop
 *                       the finalizer.
 *
 * Runs on the operator's one worker thread (operator.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "etcd/txn.h"
#include "operator/cr_reconcile.h"
#include "operator/operator.h"
#include "operator/shard_cr.h"
#include "protocol/shard.h"

#define KEY_PFX_LEN (sizeof(GAZ_OP_SHARD_KEY) - 1)

static struct gaz_metric *m_writes;

/* A ShardSpec reconcile: the shared part first (cr_reconcile.h). */
struct srecon {
	struct gaz_crr c;
	char prefix[600];          /* resolved consumer prefix; "" if none */
};

/* One item as read from etcd. */
struct sitem {
	bool exists;
	int64_t mod_revision;
	Consumer__ShardSpec *spec; /* NULL when absent or unreadable */
	char decode_err[600];
};

/* ---- the consumer keyspace -------------------------------------------------- */

static void sitem_release(struct sitem *it)
{
	if (it->spec)
		protobuf_c_message_free_unpacked(&it->spec->base, NULL);
	memset(it, 0, sizeof(*it));
}

/* Decodes as Gazette's consumer keyspace does: unmarshal, validate, the id
 * must be the key's. */
static void sitem_decode(struct sitem *it, const char *shard, const ProtobufCBinaryData *v)
{
	struct gaz_status vst = {0};

	it->spec = consumer__shard_spec__unpack(NULL, v->len, v->data);
	if (!it->spec)
		snprintf(it->decode_err, sizeof(it->decode_err), "value is not a ShardSpec");
	else if (gaz_validate_shard_spec(it->spec, &vst))
		snprintf(it->decode_err, sizeof(it->decode_err), "invalid ShardSpec: %s", vst.msg);
	else if (strcmp(it->spec->id, shard))
		snprintf(it->decode_err, sizeof(it->decode_err), "value names shard \"%s\"",
			 it->spec->id);
	else
		return;
	if (it->spec)
		protobuf_c_message_free_unpacked(&it->spec->base, NULL);
	it->spec = NULL;
}

static int sitem_get(struct gaz_crr *r, struct sitem *out, struct gaz_status *st)
{
	Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
	Etcdserverpb__RangeResponse *resp = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	req.key.data = (uint8_t *)r->item_key;
	req.key.len = strlen(r->item_key);
	if ((rc = gaz_etcd_range(r->op->etcd, &req, &resp, st)))
		return rc;
	if (resp->n_kvs) {
		out->exists = true;
		out->mod_revision = resp->kvs[0]->mod_revision;
		sitem_decode(out, r->name, &resp->kvs[0]->value);
	}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return 0;
}

/* Puts `spec` (spec == NULL: deletes) if the key's ModRevision is still
 * expect_mod (0: absent). */
static int sitem_write(struct gaz_crr *r, const Consumer__ShardSpec *spec, int64_t expect_mod,
		       bool *applied, int64_t *revision, struct gaz_status *st)
{
	size_t len = spec ? consumer__shard_spec__get_packed_size(spec) : 0;
	uint8_t *val = malloc(len ? len : 1);
	struct gaz_txn t;
	int rc;

	if (!val)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	gaz_txn_init(&t);
	gaz_txn_compare_mod(&t, r->item_key, expect_mod);
	if (spec) {
		consumer__shard_spec__pack(spec, val);
		gaz_txn_put(&t, r->item_key, val, len, 0, false);
	} else {
		gaz_txn_delete(&t, r->item_key);
	}
	rc = gaz_txn_commit(r->op->etcd, &t, applied, revision, st);
	gaz_txn_release(&t);
	free(val);
	return rc;
}

/* ---- identity and ownership -------------------------------------------------- */

/* The consumer prefix of a CR: spec.etcdPrefix, else the flag. */
static const char *prefix_of(const struct gaz_op *op, const json_t *o)
{
	const char *p = json_string_value(json_object_get(json_object_get(o, "spec"), "etcdPrefix"));

	return p && *p ? p : op->cfg.consumer_prefix;
}

static const char *prefix(const struct gaz_crr *r)
{
	return ((const struct srecon *)r)->prefix; /* r is the first member */
}

/* Same item (the shard id being the same): under the same prefix. */
static bool same_item(const struct gaz_crr *r, const json_t *o)
{
	return !strcmp(prefix_of(r->op, o), prefix(r));
}

/* ---- status -------------------------------------------------------------------- */

/* The replicas' statuses reduced as Gazette's ReplicaStatus.Reduce (the
 * highest code, every error), which is what `gazctl shards list` shows.
 * Values that do not decode are skipped, as the consumer's keyspace does;
 * an empty value is IDLE. */
static void replica_status(struct gaz_crr *r, const struct gaz_item_route *route)
{
	const ProtobufCEnumValue *name;
	json_t *errors = json_array();
	int code = 0;

	for (size_t i = 0; i < route->n; i++) {
		Consumer__ReplicaStatus *rs = consumer__replica_status__unpack(
			NULL, route->values[i].len, route->values[i].data);
		if (!rs)
			continue;
		if ((int)rs->code > code)
			code = rs->code;
		for (size_t e = 0; e < rs->n_errors; e++)
			json_array_append_new(errors, json_string(rs->errors[e]));
		consumer__replica_status__free_unpacked(rs, NULL);
	}
	name = protobuf_c_enum_descriptor_get_value(&consumer__replica_status__code__descriptor, code);
	if (route->n)
		json_object_set_new(r->status, "replicaStatus", json_string(name ? name->name : "UNKNOWN"));
	else
		json_object_del(r->status, "replicaStatus");
	if (json_array_size(errors))
		json_object_set_new(r->status, "replicaErrors", errors);
	else {
		json_object_del(r->status, "replicaErrors");
		json_decref(errors);
	}
}

static void observe(struct gaz_crr *r)
{
	struct gaz_item_route route;
	struct gaz_status st = {0};

	if (gaz_item_route_at(r->op, prefix(r), r->name, true, &route, &st))
		return;
	if (route.values)
		replica_status(r, &route);
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

static Consumer__ShardSpec *desired_spec(struct gaz_crr *r, int64_t *requeue)
{
	Consumer__ShardSpec *d = NULL;
	struct gaz_status st = {0};

	if (gaz_shard_cr_to_spec(r->spec, &d, &st) || gaz_validate_shard_spec(d, &st)) {
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
	return sitem_write(r, arg, expect_mod, applied, rev, st);
}

static int apply(struct gaz_crr *r, Consumer__ShardSpec *d, const struct sitem *it,
		 int64_t *requeue)
{
	struct gaz_crr_found f = {.exists = it->exists, .readable = it->spec != NULL,
				  .decode_err = it->decode_err};

	return gaz_crr_apply(r, &f, it->mod_revision, it->spec && gaz_shard_spec_equal(it->spec, d),
			     put_spec, d, m_writes, requeue);
}

static int sync(struct gaz_crr *r, int64_t *requeue)
{
	struct gaz_status st = {0};
	struct sitem it;
	Consumer__ShardSpec *d;
	int rc;

	if (!gaz_crr_add_finalizer(r, requeue))
		return 0;
	if (!prefix(r)[0])
		return gaz_crr_fail(r, "NoConsumerPrefix", "spec.etcdPrefix is not set and the "
				    "operator has no --consumer.etcd-prefix: which consumer keyspace "
				    "is unknown", 0, requeue);
	if (!strcmp(prefix(r), r->op->cfg.etcd_prefix)) {
		char msg[800];
		snprintf(msg, sizeof(msg), "consumer prefix %s is the brokers' --etcd.prefix: its "
			 "items are journals, not shards", prefix(r));
		return gaz_crr_fail(r, "InvalidSpec", msg, 0, requeue);
	}
	if (strcmp(r->owner, r->key))
		return gaz_crr_conflict(r);
	gaz_crr_condition(r, "Conflict", false, "NoConflict", "");
	if (!(d = desired_spec(r, requeue)))
		return 0;
	if (sitem_get(r, &it, &st)) {
		protobuf_c_message_free_unpacked(&d->base, NULL);
		return gaz_crr_etcd_fail(r, "reading", &st, requeue);
	}
	rc = apply(r, d, &it, requeue);
	if (!rc && !*requeue) {
		observe(r);
		gaz_crr_set_ready(r, true, "Synced", "");
		rc = gaz_crr_write_status(r);
	}
	protobuf_c_message_free_unpacked(&d->base, NULL);
	sitem_release(&it);
	return rc;
}

/* ---- deletion --------------------------------------------------------------------- */

static int finalize(struct gaz_crr *r, int64_t *requeue)
{
	const char *policy = json_string_value(json_object_get(r->spec, "deletionPolicy"));
	struct gaz_status st = {0};
	struct sitem it;
	bool applied = false;

	if (!gaz_cr_has_finalizer(r->obj))
		return 0;
	if (!prefix(r)[0] || strcmp(r->owner, r->key))
		return gaz_crr_drop_finalizer(r, requeue);
	if (gaz_crr_let_go(r, !policy || strcmp(policy, "Delete"), requeue))
		return 0;
	int rc = sitem_get(r, &it, &st);
	bool existed = it.exists;
	if (!rc && existed)
		rc = sitem_write(r, NULL, it.mod_revision, &applied, NULL, &st);
	sitem_release(&it);
	if (rc)
		return gaz_crr_fail(r, "DeleteFailed", st.msg, GAZ_CRR_REQUEUE_ERROR_MS, requeue);
	if (existed && !applied) { /* changed meanwhile: read again */
		*requeue = GAZ_CRR_REQUEUE_RACE_MS;
		return 0;
	}
	gaz_crr_event(r, "Normal", "Deleted", "shard \"%s\" deleted from %s", r->name, r->item_key);
	gaz_metric_inc(gaz_metric_with(m_writes, "Deleted"));
	return gaz_crr_drop_finalizer(r, requeue);
}

/* ---- entry points ---------------------------------------------------------------------- */

/* A consumer prefix must be absolute, without a trailing '/' or "//",
 * like an --etcd.prefix (gazette-facts §4.1). */
static bool prefix_ok(const char *p)
{
	size_t n = strlen(p);

	return n > 1 && p[0] == '/' && p[n - 1] != '/' && !strstr(p, "//");
}

static struct gaz_informer *shards(const struct gaz_op *op)
{
	return op->shards;
}

static const char *const keep[] = {"adopted", "primary", "replicas", "etcdModRevision",
				   "etcdKey", "conditions", "replicaStatus", "replicaErrors", NULL};
static const char *const drop[] = {"etcdModRevision", "adopted", "primary", "replicas",
				   "replicaStatus", "replicaErrors", NULL};
static const struct gaz_crr_kind shard_kind = {
	.kind = "ShardSpec", .plural = "shardspecs", .noun = "shard", .claimed = "ShardClaimed",
	.qprefix = GAZ_OP_SHARD_KEY, .keep = keep, .drop = drop, .informer = shards,
	.same_item = same_item,
};

int gaz_shard_reconcile(struct gaz_op *op, const char *qkey, int64_t *requeue_ms)
{
	struct srecon sr = {.c = {.k = &shard_kind, .op = op}};
	struct gaz_crr *r = &sr.c;
	int rc;

	*requeue_ms = 0;
	if ((rc = gaz_crr_load(r, qkey + KEY_PFX_LEN)) || !r->obj) {
		if (rc)
			*requeue_ms = GAZ_CRR_REQUEUE_ERROR_MS;
		return rc;
	}
	if (r->name) {
		const char *p = prefix_of(op, r->obj);
		if (prefix_ok(p)) {
			snprintf(sr.prefix, sizeof(sr.prefix), "%s", p);
			snprintf(r->item_key, sizeof(r->item_key), "%s/items/%s", p, r->name);
			snprintf(r->what, sizeof(r->what), "shard \"%s\" (%s)", r->name, r->item_key);
		} else {
			snprintf(r->what, sizeof(r->what), "shard \"%s\"", r->name);
		}
		gaz_crr_begin(r);
		if (r->item_key[0])
			json_object_set_new(r->status, "etcdKey", json_string(r->item_key));
		if (gaz_crr_paused(r->obj)) {
			rc = gaz_crr_pause(r);
		} else {
			gaz_crr_note_resumed(r);
			rc = r->deleting ? finalize(r, requeue_ms) : sync(r, requeue_ms);
		}
	}
	gaz_crr_release(r);
	return rc;
}

static void on_change(void *arg, const char *key, const json_t *old, const json_t *obj)
{
	struct gaz_op *op = arg;
	const char *name = gaz_crr_spec_name(obj ? obj : old);
	char qk[700];

	if (!gaz_cr_needs_reconcile(old, obj))
		return;
	snprintf(qk, sizeof(qk), GAZ_OP_SHARD_KEY "%s", key);
	gaz_queue_add_after(op->queue, qk, 0);
	if (name && (!old || !obj || gaz_crr_being_deleted(obj)))
		gaz_crr_enqueue_related(&shard_kind, op, name, key);
}

int gaz_shard_informer_start(struct gaz_op *op, struct gaz_status *st)
{
	struct gaz_informer_opts io = {.kube = op->kube, .api_path = GAZ_OP_API_PATH,
				       .plural = "shardspecs", .namespace = op->cfg.namespace,
				       .watch_timeout_s = op->cfg.watch_timeout_ns / 1000000000LL,
				       .on_change = on_change, .arg = op};
	const char *p = op->cfg.consumer_prefix;

	if (*p && !prefix_ok(p))
		return gaz_status_set(st, GAZ_EINVAL, "--consumer.etcd-prefix %s must be absolute, "
				      "without a trailing '/'", p);
	if (!strcmp(p, op->cfg.etcd_prefix))
		return gaz_status_set(st, GAZ_EINVAL, "--consumer.etcd-prefix %s is the brokers' "
				      "--etcd.prefix", p);
	m_writes = gaz_metrics_counter(NULL, "gazette_operator_shard_writes_total",
				       "Writes of shard specs to etcd by reason", "reason");
	op->shards = gaz_informer_start(&io, st);
	return op->shards ? 0 : st->code;
}

void gaz_shard_enqueue_all(struct gaz_op *op)
{
	json_t *all = gaz_informer_snapshot(op->shards), *v;
	char qk[700];
	const char *k;

	json_object_foreach(all, k, v) {
		snprintf(qk, sizeof(qk), GAZ_OP_SHARD_KEY "%s", k);
		gaz_queue_add_after(op->queue, qk, 0);
	}
	json_decref(all);
}
