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
 * the JournalSpec reconciler's policy (journal_reconcile.c):
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
#include "operator/operator.h"
#include "operator/shard_cr.h"
#include "protocol/shard.h"

#define REQUEUE_RACE_MS 100
#define REQUEUE_ERROR_MS 5000
#define KEY_PFX_LEN (sizeof(GAZ_OP_SHARD_KEY) - 1)

static struct gaz_metric *m_writes;

struct srecon {
	struct gaz_op *op;
	const char *key;           /* "<ns>/<name>" */
	json_t *obj;               /* the CR (own reference) */
	const json_t *spec, *old_status;
	json_t *status;            /* being built (own reference) */
	const char *shard;         /* spec.name */
	char prefix[600];          /* resolved consumer prefix; "" if none */
	char item_key[1200];       /* <prefix>/items/<shard> */
	int64_t generation;
	char owner[600];
	bool other_live_claimant;
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

static int sitem_get(struct srecon *r, struct sitem *out, struct gaz_status *st)
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
		sitem_decode(out, r->shard, &resp->kvs[0]->value);
	}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return 0;
}

/* Puts `spec` (spec == NULL: deletes) if the key's ModRevision is still
 * expect_mod (0: absent). */
static int sitem_write(struct srecon *r, const Consumer__ShardSpec *spec, int64_t expect_mod,
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

static const char *shard_name(const json_t *o)
{
	return json_string_value(json_object_get(json_object_get(o, "spec"), "name"));
}

static bool being_deleted(const json_t *o)
{
	return json_object_get(json_object_get(o, "metadata"), "deletionTimestamp") != NULL;
}

/* The consumer prefix of a CR: spec.etcdPrefix, else the flag. */
static const char *prefix_of(const struct gaz_op *op, const json_t *o)
{
	const char *p = json_string_value(json_object_get(json_object_get(o, "spec"), "etcdPrefix"));

	return p && *p ? p : op->cfg.consumer_prefix;
}

/* Same item: same shard id under the same prefix. */
static bool same_item(const struct gaz_op *op, const json_t *o, const struct srecon *r)
{
	const char *n = shard_name(o);

	return n && !strcmp(n, r->shard) && !strcmp(prefix_of(op, o), r->prefix);
}

static bool older(const json_t *a, const char *ka, const json_t *b, const char *kb)
{
	const char *ca = json_string_value(json_object_get(json_object_get(a, "metadata"),
							   "creationTimestamp")) ?: "";
	const char *cb = json_string_value(json_object_get(json_object_get(b, "metadata"),
							   "creationTimestamp")) ?: "";
	int c = strcmp(ca, cb);

	return c ? c < 0 : strcmp(ka, kb) < 0;
}

static void find_owner(struct srecon *r)
{
	json_t *all = gaz_informer_snapshot(r->op->shards), *o, *best = r->obj;
	const char *k;

	snprintf(r->owner, sizeof(r->owner), "%s", r->key);
	json_object_foreach(all, k, o) {
		if (!strcmp(k, r->key) || !same_item(r->op, o, r))
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

/* Queues every other CR naming the same shard id (any prefix: cheap, and
 * ownership only changes among them). */
static void enqueue_related(struct gaz_op *op, const char *shard, const char *except_key)
{
	json_t *all = gaz_informer_snapshot(op->shards), *o;
	char qk[700];
	const char *k;

	json_object_foreach(all, k, o) {
		const char *n = shard_name(o);
		if (!n || strcmp(n, shard) || (except_key && !strcmp(k, except_key)))
			continue;
		snprintf(qk, sizeof(qk), GAZ_OP_SHARD_KEY "%s", k);
		gaz_queue_add_after(op->queue, qk, 0);
	}
	json_decref(all);
}

/* ---- status -------------------------------------------------------------------- */

static void event(struct srecon *r, const char *type, const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void event(struct srecon *r, const char *type, const char *reason, const char *fmt, ...)
{
	char msg[1200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	gaz_kube_event_post(r->op->kube, r->obj, type, reason, GAZ_OP_COMPONENT, "%s", msg);
	for (char *q = msg; *q; q++)
		if (*q == '"')
			*q = '\'';
	gaz_info("shard spec event", "key=%s shard=%s reason=%s msg=\"%s\"", r->key, r->shard,
		 reason, msg);
}

static void status_init(struct srecon *r)
{
	static const char *const keep[] = {"adopted", "primary", "replicas", "etcdModRevision",
					   "etcdKey", "conditions", "replicaStatus", "replicaErrors"};

	r->status = json_object();
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
		json_t *v = json_object_get(r->old_status, keep[i]);
		if (v)
			json_object_set_new(r->status, keep[i], json_deep_copy(v));
	}
	json_object_set_new(r->status, "shard", json_string(r->shard));
	json_object_set_new(r->status, "observedGeneration", json_integer(r->generation));
}

static void condition(struct srecon *r, const char *type, bool on, const char *reason,
		      const char *msg)
{
	gaz_cr_condition(r->status, r->old_status, type, on ? "True" : "False", reason, msg,
			 r->generation);
}

static bool had_condition(const struct srecon *r, const char *type, const char *cstatus)
{
	const json_t *c;
	size_t i;

	json_array_foreach(json_object_get(r->old_status, "conditions"), i, c) {
		if (!strcmp(json_string_value(json_object_get(c, "type")) ?: "", type))
			return !strcmp(json_string_value(json_object_get(c, "status")) ?: "", cstatus);
	}
	return false;
}

static int write_status(struct srecon *r)
{
	struct gaz_status st = {0};
	bool written;

	if (gaz_cr_patch_status(r->op, r->obj, r->status, &written, &st)) {
		gaz_warn("writing status failed", "key=%s err=\"%s\"", r->key, st.msg);
		return st.code;
	}
	return 0;
}

static void set_ready(struct srecon *r, bool ok, const char *reason, const char *msg)
{
	condition(r, "Ready", ok, reason, msg);
	if (ok)
		json_object_del(r->status, "lastError");
	else
		json_object_set_new(r->status, "lastError", json_string(msg));
}

/* Ready=False with `msg`; a Warning event unless the same error stands. */
static int fail(struct srecon *r, const char *reason, const char *msg, int64_t requeue_ms,
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
static int etcd_fail(struct srecon *r, const char *what, const struct gaz_status *st,
		     int64_t *requeue)
{
	char msg[2400];

	snprintf(msg, sizeof(msg), "%s %s in etcd at %s failed: %s", what, r->item_key,
		 r->op->cfg.etcd_address, st->msg);
	gaz_warn("etcd unavailable", "key=%s shard=%s endpoint=%s err=\"%s\"", r->key, r->shard,
		 r->op->cfg.etcd_address, st->msg);
	return fail(r, "EtcdUnavailable", msg, REQUEUE_ERROR_MS, requeue);
}

/* The replicas' statuses reduced as Gazette's ReplicaStatus.Reduce (the
 * highest code, every error), which is what `gazctl shards list` shows.
 * Values that do not decode are skipped, as the consumer's keyspace does;
 * an empty value is IDLE. */
static void replica_status(struct srecon *r, const struct gaz_item_route *route)
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

static void observe(struct srecon *r)
{
	struct gaz_item_route route;
	struct gaz_status st = {0};

	if (gaz_item_route_at(r->op, r->prefix, r->shard, true, &route, &st))
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

/* ---- sync -------------------------------------------------------------------------- */

static int conflict(struct srecon *r)
{
	static const char *const drop[] = {"etcdModRevision", "adopted", "primary", "replicas",
					   "replicaStatus", "replicaErrors"};
	char msg[2400];

	snprintf(msg, sizeof(msg), "shard \"%s\" (%s) is managed by ShardSpec %s", r->shard,
		 r->item_key, r->owner);
	if (!had_condition(r, "Conflict", "True"))
		event(r, "Warning", "Conflict", "%s", msg);
	condition(r, "Conflict", true, "ShardClaimed", msg);
	condition(r, "Ready", false, "Conflict", msg);
	json_object_set_new(r->status, "lastError", json_string(msg));
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		json_object_del(r->status, drop[i]);
	return write_status(r);
}

static Consumer__ShardSpec *desired_spec(struct srecon *r, int64_t *requeue)
{
	Consumer__ShardSpec *d = NULL;
	struct gaz_status st = {0};

	if (gaz_shard_cr_to_spec(r->spec, &d, &st) || gaz_validate_shard_spec(d, &st)) {
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

static const char *write_reason(const struct srecon *r, bool exists)
{
	const json_t *og = json_object_get(r->old_status, "observedGeneration");

	if (!json_object_get(r->old_status, "etcdModRevision"))
		return exists ? "Adopted" : "Created";
	if (!og || json_integer_value(og) != r->generation)
		return exists ? "Updated" : "Created";
	return "DriftCorrected";
}

/* Records and announces an out-of-band change the write just undid. */
static void drift(struct srecon *r, const struct sitem *it, int64_t rev)
{
	const char *reason = !it->exists ? "DeletedFromEtcd" : !it->spec ? "UnreadableInEtcd"
									   : "ChangedInEtcd";
	char msg[2400];

	if (!it->exists)
		snprintf(msg, sizeof(msg), "%s was deleted from etcd; rewrote it at revision %lld",
			 r->item_key, (long long)rev);
	else if (!it->spec)
		snprintf(msg, sizeof(msg), "%s held an unreadable ShardSpec (%s); rewrote it at "
			 "revision %lld", r->item_key, it->decode_err, (long long)rev);
	else
		snprintf(msg, sizeof(msg), "%s was changed in etcd; restored the spec at revision %lld",
			 r->item_key, (long long)rev);
	condition(r, "DriftCorrected", true, reason, msg);
	event(r, it->exists && !it->spec ? "Warning" : "Normal", reason, "%s", msg);
}

static int apply(struct srecon *r, const Consumer__ShardSpec *d, const struct sitem *it,
		 int64_t *requeue)
{
	struct gaz_status st = {0};
	int64_t rev = it->mod_revision;
	const char *reason = NULL;
	bool applied = true;

	if (!it->exists || !it->spec || !gaz_shard_spec_equal(it->spec, d)) {
		reason = write_reason(r, it->exists);
		if (sitem_write(r, d, it->mod_revision, &applied, &rev, &st))
			return etcd_fail(r, "writing", &st, requeue);
		if (!applied) {
			*requeue = REQUEUE_RACE_MS;
			return 0;
		}
		gaz_metric_inc(gaz_metric_with(m_writes, reason));
	} else if (!json_object_get(r->old_status, "etcdModRevision")) {
		reason = "Adopted";
	}
	if (reason && !strcmp(reason, "Adopted"))
		json_object_set_new(r->status, "adopted", json_true());
	if (reason && (!strcmp(reason, "DriftCorrected") || (it->exists && !it->spec)))
		drift(r, it, rev);
	else if (reason)
		event(r, "Normal", reason, "shard \"%s\" %s at %s, revision %lld", r->shard,
		      !strcmp(reason, "Adopted") ? "adopted" : "written", r->item_key, (long long)rev);
	json_object_set_new(r->status, "etcdModRevision", json_integer(rev));
	return 0;
}

static int sync(struct srecon *r, int64_t *requeue)
{
	struct gaz_status st = {0};
	struct sitem it;
	Consumer__ShardSpec *d;
	int rc;

	if (!gaz_cr_has_finalizer(r->obj) && gaz_cr_set_finalizer(r->op, r->obj, true, &st)) {
		*requeue = st.code == GAZ_EEXIST ? REQUEUE_RACE_MS : REQUEUE_ERROR_MS;
		return 0;
	}
	if (!r->prefix[0])
		return fail(r, "NoConsumerPrefix", "spec.etcdPrefix is not set and the operator has "
			    "no --consumer.etcd-prefix: which consumer keyspace is unknown", 0, requeue);
	if (!strcmp(r->prefix, r->op->cfg.etcd_prefix)) {
		char msg[800];
		snprintf(msg, sizeof(msg), "consumer prefix %s is the brokers' --etcd.prefix: its "
			 "items are journals, not shards", r->prefix);
		return fail(r, "InvalidSpec", msg, 0, requeue);
	}
	if (strcmp(r->owner, r->key))
		return conflict(r);
	condition(r, "Conflict", false, "NoConflict", "");
	if (!(d = desired_spec(r, requeue)))
		return 0;
	if (sitem_get(r, &it, &st)) {
		protobuf_c_message_free_unpacked(&d->base, NULL);
		return etcd_fail(r, "reading", &st, requeue);
	}
	rc = apply(r, d, &it, requeue);
	if (!rc && !*requeue) {
		observe(r);
		set_ready(r, true, "Synced", "");
		rc = write_status(r);
	}
	protobuf_c_message_free_unpacked(&d->base, NULL);
	sitem_release(&it);
	return rc;
}

/* ---- deletion --------------------------------------------------------------------- */

static int drop_finalizer(struct srecon *r, int64_t *requeue)
{
	struct gaz_status st = {0};

	if (gaz_cr_set_finalizer(r->op, r->obj, false, &st))
		*requeue = st.code == GAZ_EEXIST ? REQUEUE_RACE_MS : REQUEUE_ERROR_MS;
	return 0;
}

static int finalize(struct srecon *r, int64_t *requeue)
{
	const char *policy = json_string_value(json_object_get(r->spec, "deletionPolicy"));
	struct gaz_status st = {0};
	struct sitem it;
	bool applied = false;

	if (!gaz_cr_has_finalizer(r->obj))
		return 0;
	if (!r->prefix[0] || strcmp(r->owner, r->key))
		return drop_finalizer(r, requeue);
	if (!policy || strcmp(policy, "Delete")) {
		event(r, "Normal", "Retained", "shard \"%s\" stays at %s (deletionPolicy Retain)",
		      r->shard, r->item_key);
		return drop_finalizer(r, requeue);
	}
	if (r->other_live_claimant) {
		event(r, "Normal", "HandedOver",
		      "shard \"%s\" is claimed by another ShardSpec; it stays in etcd", r->shard);
		return drop_finalizer(r, requeue);
	}
	int rc = sitem_get(r, &it, &st);
	bool existed = it.exists;
	if (!rc && existed)
		rc = sitem_write(r, NULL, it.mod_revision, &applied, NULL, &st);
	sitem_release(&it);
	if (rc)
		return fail(r, "DeleteFailed", st.msg, REQUEUE_ERROR_MS, requeue);
	if (existed && !applied) { /* changed meanwhile: read again */
		*requeue = REQUEUE_RACE_MS;
		return 0;
	}
	event(r, "Normal", "Deleted", "shard \"%s\" deleted from %s", r->shard, r->item_key);
	gaz_metric_inc(gaz_metric_with(m_writes, "Deleted"));
	return drop_finalizer(r, requeue);
}

/* ---- entry points ---------------------------------------------------------------------- */

static int fetch(struct gaz_op *op, const char *key, json_t **obj)
{
	const char *slash = strchr(key, '/');
	struct gaz_status st = {0};
	char path[1024];
	int rc;

	*obj = NULL;
	if (!slash)
		return 0;
	snprintf(path, sizeof(path), GAZ_OP_API_PATH "/namespaces/%.*s/shardspecs/%s",
		 (int)(slash - key), key, slash + 1);
	rc = gaz_kube_request(op->kube, "GET", path, NULL, NULL, obj, NULL, &st);
	if (rc == GAZ_ENOTFOUND)
		return 0;
	if (rc)
		gaz_warn("reading ShardSpec failed", "key=%s err=\"%s\"", key, st.msg);
	return rc;
}

/* A consumer prefix must be absolute, without a trailing '/' or "//",
 * like an --etcd.prefix (gazette-facts §4.1). */
static bool prefix_ok(const char *p)
{
	size_t n = strlen(p);

	return n > 1 && p[0] == '/' && p[n - 1] != '/' && !strstr(p, "//");
}

int gaz_shard_reconcile(struct gaz_op *op, const char *qkey, int64_t *requeue_ms)
{
	struct srecon r = {.op = op, .key = qkey + KEY_PFX_LEN};
	int rc;

	*requeue_ms = 0;
	if ((rc = fetch(op, r.key, &r.obj)) || !r.obj) {
		if (rc)
			*requeue_ms = REQUEUE_ERROR_MS;
		return rc;
	}
	r.spec = json_object_get(r.obj, "spec");
	r.old_status = json_object_get(r.obj, "status");
	r.shard = shard_name(r.obj);
	r.generation = json_integer_value(json_object_get(json_object_get(r.obj, "metadata"),
							  "generation"));
	if (r.shard) {
		const char *p = prefix_of(op, r.obj);
		if (prefix_ok(p)) {
			snprintf(r.prefix, sizeof(r.prefix), "%s", p);
			snprintf(r.item_key, sizeof(r.item_key), "%s/items/%s", p, r.shard);
		}
		find_owner(&r);
		status_init(&r);
		if (r.item_key[0])
			json_object_set_new(r.status, "etcdKey", json_string(r.item_key));
		rc = being_deleted(r.obj) ? finalize(&r, requeue_ms) : sync(&r, requeue_ms);
	}
	json_decref(r.status);
	json_decref(r.obj);
	return rc;
}

static void on_change(void *arg, const char *key, const json_t *old, const json_t *obj)
{
	struct gaz_op *op = arg;
	const char *name = shard_name(obj ? obj : old);
	char qk[700];

	if (!gaz_cr_needs_reconcile(old, obj))
		return;
	snprintf(qk, sizeof(qk), GAZ_OP_SHARD_KEY "%s", key);
	gaz_queue_add_after(op->queue, qk, 0);
	if (name && (!old || !obj || being_deleted(obj)))
		enqueue_related(op, name, key);
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
