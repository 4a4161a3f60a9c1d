/*
 * shard_api.c - the consumer.Shard service (facts §1.7; Gazette's
 * consumer/shard_api.go and resolver.go), wire-compatible:
 *   Stat      resolves the shard: SHARD_NOT_FOUND, NO_SHARD_PRIMARY, or,
 *             for a request already proxied (it carries a header),
 *             NOT_SHARD_PRIMARY when we are not its primary; an unproxied
 *             request for another member's shard is proxied to it. Ours
 *             waits for the store, then for the requested read-through
 *             offsets of its sources, and answers the progress.
 *   List      the shards a selector matches (their labels and "id"), with
 *             routes, endpoints and every replica's status.
 *   Apply     upserts and deletes of ShardSpecs in one etcd transaction,
 *             each guarded by its expected mod revision (-1: none);
 *             answers once our keyspace reflects it.
 *   GetHints  the primary and backup FSMHints in etcd, JSON or protobuf.
 *   Unassign  removes the failed (and, unless only_failed, the primary)
 *             assignments of shards in one transaction.
 * Invalid requests get INVALID_ARGUMENT with Gazette's message.
 *
 * The resolution and proxying of Stat serve an application's own methods
 * too (runtime.h: gaz_consumer_resolve, gaz_consumer_proxy,
 * gaz_consumer_shard_with_source): a shard ours resolves to its store,
 * borrowed between its transactions; another member's to its endpoint
 * and the header to proxy with.
 *
 * Locking (runtime_int.h): handlers read the keyspace under its read lock
 * and copy out what they answer; they take no other lock but a shard's
 * progress_mu (and its mu, through gaz_shard_wait_ready and
 * gaz_shard_store_borrow).
 */
#include "consumer/runtime_int.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/pbjson.h"
#include "etcd/txn.h"
#include "protocol/auth.h"
#include "protocol/labels.h"
#include "protocol/shard.h"
#include "protocol/validate.h"
#include "recoverylog.pb-c.h"
#include "rpc/authorize.h"

static void wake_call(void *arg)
{
	gaz_rpc_wake(arg);
}

/* The responder's header: the keyspace's etcd header and our process id. */
static Protocol__Header *header_ours(struct gaz_consumer *c, int64_t revision)
{
	struct gaz_etcd_header eh;
	bool announced = atomic_load(&c->announced);

	gaz_keyspace_rlock(c->ks);
	eh = gaz_keyspace_header(c->ks);
	gaz_keyspace_runlock(c->ks);
	if (revision)
		eh.revision = revision;
	return gaz_header_new(&eh, announced ? c->cfg.zone : "local ConsumerSpec",
			      announced ? c->cfg.id : "missing from Etcd", NULL);
}

/* The label set a selector sees of a shard: its labels and "id". */
static int shard_labels(const Consumer__ShardSpec *spec, Protocol__LabelSet *out)
{
	Protocol__LabelSet none = PROTOCOL__LABEL_SET__INIT;

	gaz_labelset_init(out);
	if (gaz_labelset_copy(out, spec->labels ? spec->labels : &none))
		return GAZ_ENOMEM;
	return gaz_labelset_set(out, "id", spec->id);
}

static bool shard_matches(const Protocol__LabelSelector *sel, const Consumer__ShardSpec *spec)
{
	Protocol__LabelSet set;
	bool m = !shard_labels(spec, &set) && gaz_labelset_matches(sel, &set);

	gaz_labelset_release(&set);
	return m;
}

/* ---- Stat -------------------------------------------------------------------- */

struct resolution {
	Consumer__Status status;
	struct gaz_etcd_header eh;
	struct gaz_route route;
	bool route_ok;
	int primary;            /* route index, -1 */
	bool local;             /* the primary is us */
	char *primary_endpoint;
};

static void resolution_release(struct resolution *r)
{
	if (r->route_ok)
		gaz_route_release(&r->route);
	free(r->primary_endpoint);
}

/* Gazette's Resolver.Resolve, up to the local shard's wait. */
static int resolve(struct gaz_consumer *c, struct gaz_rpc_call *call, const char *shard,
		   const Protocol__Header *proxy, struct resolution *r, struct gaz_status *st)
{
	int rc;

	*r = (struct resolution){.primary = -1};
	if (!atomic_load(&c->ks_ready))
		return gaz_status_set(st, GAZ_EUNAVAIL, "the consumer is starting: its keyspace is not loaded yet");
	if (proxy) {
		struct gaz_etcd_header eh;
		gaz_keyspace_rlock(c->ks);
		eh = gaz_keyspace_header(c->ks);
		gaz_keyspace_runlock(c->ks);
		if (proxy->etcd && proxy->etcd->cluster_id != eh.cluster_id)
			return gaz_status_set(st, GAZ_EINVAL, "request Etcd ClusterId doesn't match our own (%llu vs %llu)",
					      (unsigned long long)proxy->etcd->cluster_id,
					      (unsigned long long)eh.cluster_id);
		const Protocol__ProcessSpec__ID *pid = proxy->process_id;
		if (pid && ((pid->zone && pid->zone[0]) || (pid->suffix && pid->suffix[0])) &&
		    (strcmp(pid->zone ? pid->zone : "", c->cfg.zone) || strcmp(pid->suffix ? pid->suffix : "", c->cfg.id)))
			return gaz_status_set(st, GAZ_EINVAL, "request ProcessId doesn't match our own (%s#%s vs %s#%s)",
					      pid->zone ? pid->zone : "", pid->suffix ? pid->suffix : "", c->cfg.zone,
					      c->cfg.id);
		if (proxy->etcd && (rc = gaz_keyspace_wait_call(c->ks, call, proxy->etcd->revision, gaz_rpc_deadline(call))))
			return gaz_status_set(st, rc, "waiting for etcd revision %lld", (long long)proxy->etcd->revision);
	}
	gaz_keyspace_rlock(c->ks);
	r->eh = gaz_keyspace_header(c->ks);
	const struct gaz_ks_entry *item = gaz_ks_item(c->ks, c->root, shard);
	const Protocol__LabelSelector *claims = gaz_rpc_claims_selector(call);
	/* A shard the caller's claims do not match (its labels plus id=) does
	 * not exist for it (Gazette's Resolver). */
	if (item && claims && !shard_matches(claims, ((const struct gaz_ks_value *)item->decoded)->shard))
		item = NULL;
	rc = item ? gaz_route_build(c->ks, c->root, shard, &r->route) : 0;
	r->route_ok = item && !rc;
	if (r->route_ok && r->route.primary >= 0) {
		r->primary = r->route.primary;
		r->local = !strcmp(r->route.zone[r->primary], c->cfg.zone) && !strcmp(r->route.suffix[r->primary], c->cfg.id);
		r->primary_endpoint = strdup(r->route.endpoint[r->primary]);
	}
	gaz_keyspace_runlock(c->ks);
	if (rc)
		return gaz_status_set(st, rc, "out of memory");
	if (!item)
		r->status = CONSUMER__STATUS__SHARD_NOT_FOUND;
	else if (r->primary < 0)
		r->status = CONSUMER__STATUS__NO_SHARD_PRIMARY;
	else if (proxy && !r->local)
		r->status = CONSUMER__STATUS__NOT_SHARD_PRIMARY;
	else
		r->status = CONSUMER__STATUS__OK;
	return 0;
}

/* Waits until the shard read through every requested offset of its
 * sources. */
static int wait_read_through(struct gaz_shard *s, struct gaz_rpc_call *call, const Consumer__StatRequest *req)
{
	struct gaz_waiter w = {.wake = wake_call, .arg = call};
	int rc = 0;

	gaz_notifier_add(&s->progress, &w);
	for (;;) {
		bool behind = false, stopped;
		pthread_mutex_lock(&s->progress_mu);
		for (size_t i = 0; i < req->n_read_through && !behind; i++) {
			const char *j = req->read_through[i]->key;
			bool source = false;
			for (size_t k = 0; k < s->spec->n_sources && !source; k++)
				source = !strcmp(s->spec->sources[k]->journal, j);
			behind = source && req->read_through[i]->value &&
				 gaz_offsets_get(&s->read_through, j) < req->read_through[i]->value;
		}
		pthread_mutex_unlock(&s->progress_mu);
		pthread_mutex_lock(&s->mu);
		stopped = s->stop || s->primary_done;
		pthread_mutex_unlock(&s->mu);
		if (!behind)
			break;
		if (stopped) {
			rc = GAZ_ESTOPPED;
			break;
		}
		if ((rc = gaz_rpc_wait(call, gaz_rpc_deadline(call))))
			break;
	}
	gaz_notifier_remove(&s->progress, &w);
	return rc;
}

/* Fills resp's offsets maps from progress (copies). */
static int progress_out(struct gaz_shard *s, Consumer__StatResponse *resp)
{
	int rc = 0;

	pthread_mutex_lock(&s->progress_mu);
	const struct gaz_offsets *o[2] = {&s->read_through, &s->publish_at};
	for (int m = 0; m < 2 && !rc; m++) {
		size_t n = o[m]->n;
		Consumer__StatResponse__ReadThroughEntry **e = n ? calloc(n, sizeof(*e)) : NULL;
		Consumer__StatResponse__ReadThroughEntry *v = n ? calloc(n, sizeof(*v)) : NULL;
		if (n && (!e || !v)) {
			free(e), free(v);
			rc = GAZ_ENOMEM;
			break;
		}
		for (size_t i = 0; i < n; i++) {
			consumer__stat_response__read_through_entry__init(&v[i]);
			v[i].key = strdup(o[m]->journal[i]);
			v[i].value = o[m]->offset[i];
			e[i] = &v[i];
		}
		if (m == 0) {
			resp->n_read_through = n;
			resp->read_through = e;
		} else {
			resp->n_publish_at = n;
			resp->publish_at = (Consumer__StatResponse__PublishAtEntry **)e;
		}
	}
	pthread_mutex_unlock(&s->progress_mu);
	return rc;
}

static void progress_free(Consumer__StatResponse *resp)
{
	if (resp->n_read_through)
		for (size_t i = 0; i < resp->n_read_through; i++)
			free(resp->read_through[i]->key);
	if (resp->read_through)
		free(resp->read_through[0]);
	free(resp->read_through);
	if (resp->n_publish_at)
		for (size_t i = 0; i < resp->n_publish_at; i++)
			free(resp->publish_at[i]->key);
	if (resp->publish_at)
		free(resp->publish_at[0]);
	free(resp->publish_at);
}

/* sign_shard signs {cap, id=<shard>} for a minute, as Gazette's
 * AuthShardClient scopes Stat. *bearer NULL on failure. */
static void sign_shard(const struct gaz_auth *keys, uint32_t cap, const char *shard, char **bearer)
{
	Protocol__LabelSelector *sel = gaz_selector_new();

	*bearer = NULL;
	if (sel && !gaz_labelset_add(sel->include, "id", shard))
		gaz_auth_sign(keys, cap, sel, GAZ_AUTH_TTL_SHORT, bearer, NULL);
	gaz_selector_free(sel);
}

/* The consumer's --consumer.peer-* files, set by gaz_consumer_register_api
 * before the server starts and not changed after. */
static const struct gaz_rpc_tls *peer_tls;

/* Sends `req` to the shard's primary at `endpoint` with `header` in its
 * header field and `auth` (an "authorization" value, borrowed; NULL for
 * none) in its metadata, and ends `call` with the primary's answer. */
static void proxy_call(const char *auth, struct gaz_rpc_call *call, const char *endpoint,
		       Protocol__Header *header, const char *path, ProtobufCMessage *req,
		       Protocol__Header **req_header, const ProtobufCMessageDescriptor *resp_desc)
{
	/* TLS by the endpoint's scheme, as Gazette's dispatched credentials. */
	struct gaz_rpc_channel_opts o = {.tls = peer_tls};
	struct gaz_status st = {0};
	struct gaz_rpc_channel *ch = endpoint ? gaz_rpc_channel_new(endpoint, &o) : NULL;
	ProtobufCMessage *resp = NULL;

	if (!ch || !header) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_UNAVAILABLE, "cannot reach the shard's primary");
	} else {
		/* Fail fast, as Gazette's proxies (grpc-go calls without
		 * WaitForReady): a primary killed a moment ago stays in the
		 * keyspace until its lease expires, and waiting for its address
		 * would hold the caller to its whole deadline instead of letting
		 * it ask again once the standby took over. */
		*req_header = header;
		int rc = gaz_rpc_unary(ch, path, req, resp_desc, &resp, gaz_rpc_deadline(call), false, auth, &st);
		*req_header = NULL;
		if (rc)
			gaz_rpc_finish(call, NULL, st.grpc ? st.grpc : GAZ_GRPC_UNAVAILABLE, st.msg);
		else
			gaz_rpc_finish(call, resp, GAZ_GRPC_OK, NULL);
	}
	if (resp)
		protobuf_c_message_free_unpacked(resp, NULL);
	gaz_rpc_channel_free(ch);
}

/* Proxies an unproxied Stat to the shard's primary with our header, signed
 * by us ({READ, id=<shard>} with --consumer.auth-keys) for the caller we
 * verified, as Gazette's service proxies through its own authorizer. */
static void stat_proxy(struct gaz_consumer *c, struct gaz_rpc_call *call, Consumer__StatRequest *req,
		       struct resolution *r)
{
	Protocol__Header *h = gaz_header_new(&r->eh, r->route.zone[r->primary], r->route.suffix[r->primary], &r->route);
	char *auth = NULL;

	if (c->auth)
		sign_shard(c->auth, GAZ_CAP_READ, req->shard, &auth);
	proxy_call(auth, call, r->primary_endpoint, h, "/consumer.Shard/Stat", &req->base, &req->header,
		   &consumer__stat_response__descriptor);
	free(auth);
	gaz_header_free(h);
}

/* The local shard the keyspace names us primary of, referenced (drop it
 * with gaz_shard_unref): the resolver may start it a moment after the
 * keyspace changed, so give it a little while. NULL when it did not
 * start, or the call ended. */
static struct gaz_shard *local_primary(struct gaz_consumer *c, struct gaz_rpc_call *call, const char *id)
{
	struct gaz_shard *s = NULL;

	for (int i = 0; i < 100 && !(s = gaz_consumer_shard_get(c, id)); i++)
		if (gaz_rpc_wait(call, gaz_deadline_in(20)) && gaz_rpc_cancelled(call))
			break;
	return s;
}

static void handle_stat(struct gaz_rpc_call *call, void *arg)
{
	struct gaz_consumer *c = arg;
	Consumer__StatRequest *req = NULL;
	Consumer__StatResponse resp = CONSUMER__STAT_RESPONSE__INIT;
	struct gaz_status st = {0};
	struct resolution r;
	struct gaz_shard *s = NULL;
	int rc;

	if (gaz_rpc_refused(c->auth, call, GAZ_CAP_READ))
		return;
	if (gaz_rpc_recv_request(call, &consumer__stat_request__descriptor, (ProtobufCMessage **)&req, "StatRequest"))
		return;
	if ((req->header && gaz_validate_header(req->header, &st)) ||
	    gaz_validate_shard_id(req->shard, &st)) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_INVALID_ARGUMENT, st.msg);
		goto out;
	}
	for (size_t i = 0; i < req->n_read_through; i++) {
		if (gaz_validate_journal(req->read_through[i]->key, &st) || req->read_through[i]->value < 0) {
			gaz_rpc_finish(call, NULL, GAZ_GRPC_INVALID_ARGUMENT,
				       st.msg[0] ? st.msg : "ReadThrough: invalid offset");
			goto out;
		}
	}
	if ((rc = resolve(c, call, req->shard, req->header, &r, &st))) {
		gaz_rpc_finish(call, NULL, rc == GAZ_EINVAL ? GAZ_GRPC_INVALID_ARGUMENT : gaz_err_grpc_code(rc), st.msg);
		goto out;
	}
	if (r.status == CONSUMER__STATUS__OK && !r.local) {
		stat_proxy(c, call, req, &r);
		resolution_release(&r);
		goto out;
	}
	resp.status = r.status;
	if (r.status == CONSUMER__STATUS__OK) {
		s = local_primary(c, call, req->shard);
		if (!s || (rc = gaz_shard_wait_ready(s, call)) == GAZ_ESTOPPED) {
			resp.status = CONSUMER__STATUS__SHARD_STOPPED;
		} else if (rc) {
			gaz_rpc_finish(call, NULL, gaz_err_grpc_code(rc), gaz_err_str(rc));
			goto done;
		} else if ((rc = wait_read_through(s, call, req)) == GAZ_ESTOPPED) {
			resp.status = CONSUMER__STATUS__SHARD_STOPPED;
		} else if (rc) {
			gaz_rpc_finish(call, NULL, gaz_err_grpc_code(rc), gaz_err_str(rc));
			goto done;
		} else if (progress_out(s, &resp)) {
			gaz_rpc_finish(call, NULL, GAZ_GRPC_RESOURCE_EXHAUSTED, "out of memory");
			goto done;
		}
	}
	{
		bool ours = resp.status != CONSUMER__STATUS__OK;
		resp.header = gaz_header_new(&r.eh, ours || r.primary < 0 ? c->cfg.zone : r.route.zone[r.primary],
					     ours || r.primary < 0 ? c->cfg.id : r.route.suffix[r.primary],
					     r.route_ok ? &r.route : NULL);
		if (resp.header)
			gaz_rpc_finish(call, &resp.base, GAZ_GRPC_OK, NULL);
		else
			gaz_rpc_finish(call, NULL, GAZ_GRPC_RESOURCE_EXHAUSTED, "out of memory");
		gaz_header_free(resp.header);
	}
done:
	progress_free(&resp);
	if (s)
		gaz_shard_unref(s);
	resolution_release(&r);
out:
	protobuf_c_message_free_unpacked(&req->base, NULL);
}

/* ---- List ----------------------------------------------------------------------- */

static void list_shard_free(Consumer__ListResponse__Shard *sh)
{
	if (!sh)
		return;
	if (sh->spec)
		protobuf_c_message_free_unpacked(&sh->spec->base, NULL);
	if (sh->route)
		protobuf_c_message_free_unpacked(&sh->route->base, NULL);
	for (size_t i = 0; i < sh->n_status; i++)
		protobuf_c_message_free_unpacked(&sh->status[i]->base, NULL);
	free(sh->status);
	free(sh);
}

/* One shard of a listing (read lock held). */
static Consumer__ListResponse__Shard *list_shard(struct gaz_consumer *c, const struct gaz_ks_entry *e)
{
	const struct gaz_ks_value *v = e->decoded;
	Consumer__ListResponse__Shard *sh = calloc(1, sizeof(*sh));
	struct gaz_route r;
	char *prefix = NULL;
	size_t lo = 0, hi = 0;

	if (!sh)
		return NULL;
	consumer__list_response__shard__init(sh);
	sh->spec = (Consumer__ShardSpec *)gaz_pb_copy(&v->shard->base);
	sh->mod_revision = e->mod_revision;
	sh->create_revision = e->create_revision;
	if (gaz_route_build(c->ks, c->root, v->item, &r) == 0) {
		Protocol__Route *rp = gaz_route_to_proto(&r, true);
		if (rp) {
			sh->route = (Protocol__Route *)gaz_pb_copy(&rp->base);
			gaz_route_proto_free(rp);
		}
		gaz_route_release(&r);
	}
	if (asprintf(&prefix, "%s/assign/%s#", c->root, v->item) >= 0)
		gaz_keyspace_prefix(c->ks, prefix, &lo, &hi);
	free(prefix);
	if (hi > lo && !(sh->status = calloc(hi - lo, sizeof(*sh->status)))) {
		list_shard_free(sh);
		return NULL;
	}
	for (size_t i = lo; i < hi; i++) {
		const struct gaz_ks_value *a = gaz_keyspace_at(c->ks, i)->decoded;
		Consumer__ReplicaStatus idle = CONSUMER__REPLICA_STATUS__INIT;
		sh->status[sh->n_status] = (Consumer__ReplicaStatus *)gaz_pb_copy(a->status ? &a->status->base : &idle.base);
		if (!sh->status[sh->n_status++]) {
			list_shard_free(sh);
			return NULL;
		}
	}
	if (!sh->spec || !sh->route) {
		list_shard_free(sh);
		return NULL;
	}
	return sh;
}

static void handle_list(struct gaz_rpc_call *call, void *arg)
{
	struct gaz_consumer *c = arg;
	Consumer__ListRequest *req = NULL;
	Consumer__ListResponse resp = CONSUMER__LIST_RESPONSE__INIT;
	struct gaz_status st = {0};
	char *prefix = NULL;
	size_t lo, hi;
	int64_t rev;
	bool oom = false;

	if (gaz_rpc_refused(c->auth, call, GAZ_CAP_LIST))
		return;
	if (gaz_rpc_recv_request(call, &consumer__list_request__descriptor, (ProtobufCMessage **)&req, "ListRequest"))
		return;
	if (req->selector && gaz_validate_selector(req->selector, &st)) {
		char msg[600];
		snprintf(msg, sizeof(msg), "Selector.%s", st.msg);
		gaz_rpc_finish(call, NULL, GAZ_GRPC_INVALID_ARGUMENT, msg);
		goto out;
	}
	if (asprintf(&prefix, "%s/items/", c->root) < 0) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_RESOURCE_EXHAUSTED, "out of memory");
		goto out;
	}
	const Protocol__LabelSelector *claims = gaz_rpc_claims_selector(call);
	gaz_keyspace_rlock(c->ks);
	rev = gaz_keyspace_revision(c->ks);
	gaz_keyspace_prefix(c->ks, prefix, &lo, &hi);
	resp.shards = calloc(hi - lo + 1, sizeof(*resp.shards));
	oom = !resp.shards;
	for (size_t i = lo; !oom && i < hi; i++) {
		const struct gaz_ks_entry *e = gaz_keyspace_at(c->ks, i);
		const struct gaz_ks_value *v = e->decoded;
		if ((req->selector && !shard_matches(req->selector, v->shard)) ||
		    (claims && !shard_matches(claims, v->shard)))
			continue;
		if (!(resp.shards[resp.n_shards] = list_shard(c, e)))
			oom = true;
		else
			resp.n_shards++;
	}
	gaz_keyspace_runlock(c->ks);
	free(prefix);
	resp.status = CONSUMER__STATUS__OK;
	resp.header = header_ours(c, rev);
	if (oom || !resp.header)
		gaz_rpc_finish(call, NULL, GAZ_GRPC_RESOURCE_EXHAUSTED, "out of memory");
	else
		gaz_rpc_finish(call, &resp.base, GAZ_GRPC_OK, NULL);
	gaz_header_free(resp.header);
	for (size_t i = 0; i < resp.n_shards; i++)
		list_shard_free(resp.shards[i]);
	free(resp.shards);
out:
	protobuf_c_message_free_unpacked(&req->base, NULL);
}

/* ---- Apply ---------------------------------------------------------------------- */

/* The etcd key of a spec's primary hints (Gazette's HintPrimaryKey). */
static char *hint_primary_key(const Consumer__ShardSpec *spec)
{
	char *k = NULL;
	return asprintf(&k, "%s/%s.primary", spec->hint_prefix ? spec->hint_prefix : "", spec->id) < 0 ? NULL : k;
}

/* id_matches: `claims` cover shard `id` by its id label alone, as
 * Gazette authorizes deletes and Unassign. */
static bool id_matches(const Protocol__LabelSelector *claims, const char *id)
{
	Protocol__Label l = PROTOCOL__LABEL__INIT, *lp = &l;
	Protocol__LabelSet set = PROTOCOL__LABEL_SET__INIT;

	l.name = "id";
	l.value = (char *)id;
	set.labels = &lp;
	set.n_labels = 1;
	return !claims || gaz_labelset_matches(claims, &set);
}

/* authorized_ids: every change of an Apply is covered by the claims (an
 * upsert by its labels plus id, a delete by id); else "not authorized
 * to <id>" and false. */
static bool authorized_ids(struct gaz_rpc_call *call, const Consumer__ApplyRequest *req, struct gaz_status *st)
{
	const Protocol__LabelSelector *claims = gaz_rpc_claims_selector(call);

	for (size_t i = 0; claims && i < req->n_changes; i++) {
		const Consumer__ApplyRequest__Change *ch = req->changes[i];
		if (ch->upsert ? !shard_matches(claims, ch->upsert) : !id_matches(claims, ch->delete_)) {
			gaz_status_set(st, GAZ_EPERM, "not authorized to %s", ch->upsert ? ch->upsert->id : ch->delete_);
			return false;
		}
	}
	return true;
}

static void handle_apply(struct gaz_rpc_call *call, void *arg)
{
	struct gaz_consumer *c = arg;
	Consumer__ApplyRequest *req = NULL;
	Consumer__ApplyResponse resp = CONSUMER__APPLY_RESPONSE__INIT;
	struct gaz_status st = {0};
	struct gaz_txn t;
	int64_t rev = 0;
	bool ok = false;
	int rc = 0;

	if (gaz_rpc_refused(c->auth, call, GAZ_CAP_APPLY))
		return;
	if (gaz_rpc_recv_request(call, &consumer__apply_request__descriptor, (ProtobufCMessage **)&req, "ApplyRequest"))
		return;
	if (gaz_validate_shard_apply_request(req, &st)) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_INVALID_ARGUMENT, st.msg);
		goto out;
	}
	if (!authorized_ids(call, req, &st)) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_UNAUTHENTICATED, st.msg);
		goto out;
	}
	gaz_txn_init(&t);
	for (size_t i = 0; i < req->n_changes && !rc; i++) {
		const Consumer__ApplyRequest__Change *ch = req->changes[i];
		const char *id = ch->upsert ? ch->upsert->id : ch->delete_;
		char *key = gaz_ks_item_key(c->root, id);
		if (!key) {
			rc = GAZ_ENOMEM;
			break;
		}
		if (ch->expect_mod_revision != -1)
			gaz_txn_compare_mod(&t, key, ch->expect_mod_revision);
		if (ch->upsert) {
			size_t len = consumer__shard_spec__get_packed_size(ch->upsert);
			uint8_t *val = malloc(len ? len : 1);
			if (val) {
				consumer__shard_spec__pack(ch->upsert, val);
				gaz_txn_put(&t, key, val, len, 0, false);
			} else {
				rc = GAZ_ENOMEM;
			}
			free(val);
			if (!rc && ch->primary_hints) {
				/* Protobuf bytes, which Gazette's reader senses (no
				 * leading '{'); empty hints as JSON "{}", never empty. */
				size_t hl = recoverylog__fsmhints__get_packed_size(ch->primary_hints);
				uint8_t *hv = malloc(hl ? hl : 2);
				char *hk = hint_primary_key(ch->upsert);
				if (hv && hk) {
					if (hl)
						recoverylog__fsmhints__pack(ch->primary_hints, hv);
					else
						memcpy(hv, "{}", hl = 2);
					gaz_txn_put(&t, hk, hv, hl, 0, false);
				} else {
					rc = GAZ_ENOMEM;
				}
				free(hv), free(hk);
			}
		} else {
			gaz_txn_delete(&t, key);
		}
		free(key);
	}
	if (!rc)
		rc = gaz_txn_commit(c->etcd, &t, &ok, &rev, &st);
	gaz_txn_release(&t);
	if (rc) {
		gaz_rpc_finish(call, NULL, gaz_err_grpc_code(rc), st.msg[0] ? st.msg : gaz_err_str(rc));
		goto out;
	}
	resp.status = ok ? CONSUMER__STATUS__OK : CONSUMER__STATUS__ETCD_TRANSACTION_FAILED;
	if (ok && req->n_changes && (rc = gaz_keyspace_wait_call(c->ks, call, rev, gaz_rpc_deadline(call)))) {
		gaz_rpc_finish(call, NULL, gaz_err_grpc_code(rc), gaz_err_str(rc));
		goto out;
	}
	resp.header = header_ours(c, rev);
	if (resp.header)
		gaz_rpc_finish(call, &resp.base, GAZ_GRPC_OK, NULL);
	else
		gaz_rpc_finish(call, NULL, GAZ_GRPC_RESOURCE_EXHAUSTED, "out of memory");
	gaz_header_free(resp.header);
out:
	protobuf_c_message_free_unpacked(&req->base, NULL);
}

/* ---- GetHints ------------------------------------------------------------------- */

/* Decodes a hints value as Gazette's fetchHints: JSON when it starts with
 * '{', else protobuf. */
static int hints_decode(const uint8_t *v, size_t len, Recoverylog__FSMHints **out, struct gaz_status *st)
{
	if (len && v[0] == '{') {
		json_error_t je;
		json_t *j = json_loadb((const char *)v, len, 0, &je);
		if (!j)
			return gaz_status_set(st, GAZ_EINVAL, "json.Unmarshal(hints): %s", je.text);
		int rc = gaz_pbjson_decode(j, &recoverylog__fsmhints__descriptor, (ProtobufCMessage **)out, st);
		json_decref(j);
		return rc ? gaz_status_set(st, rc, "json.Unmarshal(hints): %s", st->msg) : 0;
	}
	if (!(*out = recoverylog__fsmhints__unpack(NULL, len, v)))
		return gaz_status_set(st, GAZ_EINVAL, "hints.Unmarshal: not FSMHints");
	return 0;
}

/* Reads one hints key: *out NULL when absent. */
static int hints_get(struct gaz_consumer *c, const char *key, const char *log, Recoverylog__FSMHints **out,
		     struct gaz_status *st)
{
	Etcdserverpb__RangeRequest rr = ETCDSERVERPB__RANGE_REQUEST__INIT;
	Etcdserverpb__RangeResponse *resp = NULL;
	int rc;

	*out = NULL;
	rr.key.data = (uint8_t *)key;
	rr.key.len = strlen(key);
	if ((rc = gaz_etcd_range(c->etcd, &rr, &resp, st)))
		return gaz_status_set(st, rc, "fetching ShardSpec.HintKeys: %s", st->msg);
	if (resp->n_kvs && (rc = hints_decode(resp->kvs[0]->value.data, resp->kvs[0]->value.len, out, st)) == 0 &&
	    strcmp((*out)->log ? (*out)->log : "", log)) {
		rc = gaz_status_set(st, GAZ_EINVAL, "hints.Log %s != ShardSpec.RecoveryLog %s", (*out)->log, log);
		protobuf_c_message_free_unpacked(&(*out)->base, NULL);
		*out = NULL;
	}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

static bool shard_matches_claims(struct gaz_rpc_call *call, const Consumer__ShardSpec *spec)
{
	const Protocol__LabelSelector *claims = gaz_rpc_claims_selector(call);

	return !claims || shard_matches(claims, spec);
}

static void handle_get_hints(struct gaz_rpc_call *call, void *arg)
{
	struct gaz_consumer *c = arg;
	Consumer__GetHintsRequest *req = NULL;
	Consumer__GetHintsResponse resp = CONSUMER__GET_HINTS_RESPONSE__INIT;
	Consumer__GetHintsResponse__ResponseHints primary = CONSUMER__GET_HINTS_RESPONSE__RESPONSE_HINTS__INIT;
	Consumer__GetHintsResponse__ResponseHints *backups = NULL, **bp = NULL;
	Consumer__ShardSpec *spec = NULL;
	struct gaz_status st = {0};
	char *log = NULL, *key = NULL;
	int64_t rev;
	int rc = 0;

	if (gaz_rpc_refused(c->auth, call, GAZ_CAP_READ))
		return;
	if (gaz_rpc_recv_request(call, &consumer__get_hints_request__descriptor, (ProtobufCMessage **)&req,
				 "GetHintsRequest"))
		return;
	if (gaz_validate_shard_id(req->shard, &st)) {
		char msg[600];
		snprintf(msg, sizeof(msg), "Shard: %s", st.msg);
		gaz_rpc_finish(call, NULL, GAZ_GRPC_INVALID_ARGUMENT, msg);
		goto out;
	}
	gaz_keyspace_rlock(c->ks);
	rev = gaz_keyspace_revision(c->ks);
	const struct gaz_ks_entry *e = gaz_ks_item(c->ks, c->root, req->shard);
	if (e)
		spec = (Consumer__ShardSpec *)gaz_pb_copy(&((const struct gaz_ks_value *)e->decoded)->shard->base);
	gaz_keyspace_runlock(c->ks);
	resp.status = CONSUMER__STATUS__OK;
	resp.primary_hints = &primary;
	if (!e || (spec && !shard_matches_claims(call, spec))) {
		resp.status = CONSUMER__STATUS__SHARD_NOT_FOUND;
	} else if (!spec) {
		rc = GAZ_ENOMEM;
	} else {
		const char *prefix = spec->recovery_log_prefix ? spec->recovery_log_prefix : "";
		if (prefix[0] && asprintf(&log, "%s/%s", prefix, spec->id) < 0)
			log = NULL;
		if (!(key = hint_primary_key(spec)) || (prefix[0] && !log))
			rc = GAZ_ENOMEM;
		if (!rc)
			rc = hints_get(c, key, log ? log : "", &primary.hints, &st);
		if (!rc && spec->hint_backups > 0) {
			backups = calloc((size_t)spec->hint_backups, sizeof(*backups));
			bp = calloc((size_t)spec->hint_backups, sizeof(*bp));
			if (!backups || !bp)
				rc = GAZ_ENOMEM;
		}
		for (int32_t i = 0; !rc && i < spec->hint_backups; i++) {
			char *bk = NULL;
			consumer__get_hints_response__response_hints__init(&backups[i]);
			bp[i] = &backups[i];
			resp.n_backup_hints++;
			if (asprintf(&bk, "%s/%s.backup.%d", spec->hint_prefix ? spec->hint_prefix : "", spec->id, i) < 0)
				rc = GAZ_ENOMEM;
			else
				rc = hints_get(c, bk, log ? log : "", &backups[i].hints, &st);
			free(bk);
		}
		resp.backup_hints = bp;
	}
	if (rc) {
		gaz_rpc_finish(call, NULL, rc == GAZ_EINVAL ? GAZ_GRPC_UNKNOWN : gaz_err_grpc_code(rc),
			       st.msg[0] ? st.msg : gaz_err_str(rc));
	} else {
		resp.header = header_ours(c, rev);
		gaz_rpc_finish(call, &resp.base, GAZ_GRPC_OK, NULL);
		gaz_header_free(resp.header);
	}
	if (primary.hints)
		protobuf_c_message_free_unpacked(&primary.hints->base, NULL);
	for (size_t i = 0; i < resp.n_backup_hints; i++)
		if (backups[i].hints)
			protobuf_c_message_free_unpacked(&backups[i].hints->base, NULL);
	free(backups), free(bp), free(log), free(key);
	if (spec)
		protobuf_c_message_free_unpacked(&spec->base, NULL);
out:
	protobuf_c_message_free_unpacked(&req->base, NULL);
}

/* ---- Unassign -------------------------------------------------------------------- */

static void handle_unassign(struct gaz_rpc_call *call, void *arg)
{
	struct gaz_consumer *c = arg;
	Consumer__UnassignRequest *req = NULL;
	Consumer__UnassignResponse resp = CONSUMER__UNASSIGN_RESPONSE__INIT;
	struct gaz_status st = {0};
	struct gaz_txn t;
	int64_t rev = 0;
	bool ok = false;
	int rc = 0;

	if (gaz_rpc_refused(c->auth, call, GAZ_CAP_APPLY))
		return;
	if (gaz_rpc_recv_request(call, &consumer__unassign_request__descriptor, (ProtobufCMessage **)&req,
				 "UnassignRequest"))
		return;
	for (size_t i = 0; i < req->n_shards; i++) {
		if (gaz_validate_shard_id(req->shards[i], &st)) {
			char msg[600];
			snprintf(msg, sizeof(msg), "Shards[%zu]: %s", i, st.msg);
			gaz_rpc_finish(call, NULL, GAZ_GRPC_INVALID_ARGUMENT, msg);
			goto out;
		}
	}
	/* Authorized by the id label alone, as Gazette's Unassign. */
	for (size_t i = 0; i < req->n_shards; i++) {
		if (!id_matches(gaz_rpc_claims_selector(call), req->shards[i])) {
			char msg[600];
			snprintf(msg, sizeof(msg), "not authorized to %s", req->shards[i]);
			gaz_rpc_finish(call, NULL, GAZ_GRPC_UNAUTHENTICATED, msg);
			goto out;
		}
	}
	resp.shards = calloc(req->n_shards + 1, sizeof(*resp.shards));
	if (!resp.shards) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_RESOURCE_EXHAUSTED, "out of memory");
		goto out;
	}
	gaz_txn_init(&t);
	gaz_keyspace_rlock(c->ks);
	for (size_t i = 0; i < req->n_shards && !rc; i++) {
		char *prefix = NULL;
		size_t lo, hi;
		if (asprintf(&prefix, "%s/assign/%s#", c->root, req->shards[i]) < 0) {
			rc = GAZ_ENOMEM;
			break;
		}
		gaz_keyspace_prefix(c->ks, prefix, &lo, &hi);
		free(prefix);
		for (size_t k = lo; k < hi; k++) {
			const struct gaz_ks_entry *e = gaz_keyspace_at(c->ks, k);
			const struct gaz_ks_value *v = e->decoded;
			bool failed = v->status && v->status->code == CONSUMER__REPLICA_STATUS__CODE__FAILED;
			if (!failed && (req->only_failed || v->slot != 0))
				continue;
			gaz_txn_compare_mod(&t, e->key, e->mod_revision);
			gaz_txn_delete(&t, e->key);
			if (!resp.n_shards || strcmp(resp.shards[resp.n_shards - 1], req->shards[i]))
				resp.shards[resp.n_shards++] = req->shards[i];
		}
	}
	gaz_keyspace_runlock(c->ks);
	if (!rc && !req->dry_run && gaz_txn_ops(&t))
		rc = gaz_txn_commit(c->etcd, &t, &ok, &rev, &st);
	else
		ok = true;
	gaz_txn_release(&t);
	if (rc) {
		gaz_rpc_finish(call, NULL, gaz_err_grpc_code(rc),
			       st.msg[0] ? st.msg : gaz_err_str(rc));
		goto done;
	}
	resp.status = ok ? CONSUMER__STATUS__OK : CONSUMER__STATUS__ETCD_TRANSACTION_FAILED;
	if (ok && rev && (rc = gaz_keyspace_wait_call(c->ks, call, rev, gaz_rpc_deadline(call)))) {
		gaz_rpc_finish(call, NULL, gaz_err_grpc_code(rc), gaz_err_str(rc));
		goto done;
	}
	gaz_rpc_finish(call, &resp.base, GAZ_GRPC_OK, NULL);
done:
	free(resp.shards); /* the strings are the request's */
out:
	protobuf_c_message_free_unpacked(&req->base, NULL);
}

/* ---- for an application's methods (runtime.h) ------------------------------- */

int gaz_consumer_resolve(struct gaz_consumer *c, struct gaz_rpc_call *call, const char *shard_id,
			 const Protocol__Header *proxy, struct gaz_consumer_resolution *out, struct gaz_status *st)
{
	struct resolution r;
	struct gaz_shard *s = NULL;
	int rc;

	*out = (struct gaz_consumer_resolution){0};
	if (gaz_validate_shard_id(shard_id, st) || (proxy && gaz_validate_header(proxy, st)))
		return GAZ_EINVAL;
	if ((rc = resolve(c, call, shard_id, proxy, &r, st)))
		return rc;
	out->status = r.status;
	bool ok = r.status == CONSUMER__STATUS__OK;
	/* Gazette's: the primary's process id when OK, else ours (we author
	 * the error). */
	Protocol__Header *h = gaz_header_new(&r.eh, ok ? r.route.zone[r.primary] : c->cfg.zone,
					     ok ? r.route.suffix[r.primary] : c->cfg.id, r.route_ok ? &r.route : NULL);
	out->header = h ? (Protocol__Header *)gaz_pb_copy(&h->base) : NULL;
	gaz_header_free(h);
	if (!out->header) {
		rc = gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	} else if (ok && !r.local) {
		if (!(out->endpoint = strdup(r.primary_endpoint)))
			rc = gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	} else if (ok) {
		if (!(s = local_primary(c, call, shard_id)))
			rc = gaz_rpc_cancelled(call) ? GAZ_ECANCELLED : GAZ_ESTOPPED;
		else if (!(rc = gaz_shard_wait_ready(s, call)))
			rc = gaz_shard_store_borrow(s, call, &out->store);
		if (rc == GAZ_ESTOPPED) {
			out->status = CONSUMER__STATUS__SHARD_STOPPED;
			rc = 0;
		} else if (rc) {
			gaz_status_set(st, rc, "waiting for shard %s: %s", shard_id, gaz_err_str(rc));
		} else {
			out->shard = s;
			s = NULL;
		}
	}
	if (s)
		gaz_shard_unref(s);
	resolution_release(&r);
	if (rc)
		gaz_consumer_resolution_release(out);
	return rc;
}

void gaz_consumer_resolution_release(struct gaz_consumer_resolution *r)
{
	if (r->store)
		gaz_shard_store_return(r->shard);
	if (r->shard)
		gaz_shard_unref(r->shard);
	if (r->header)
		protobuf_c_message_free_unpacked(&r->header->base, NULL);
	free(r->endpoint);
	*r = (struct gaz_consumer_resolution){0};
}

int gaz_consumer_proxy(struct gaz_rpc_call *call, const struct gaz_consumer_resolution *r, const char *path,
		       ProtobufCMessage *req, Protocol__Header **req_header, const ProtobufCMessageDescriptor *resp_desc)
{
	if (r->status != CONSUMER__STATUS__OK || !r->endpoint) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_INTERNAL, "proxy: the shard's primary is not another member");
		return GAZ_EINVAL;
	}
	/* An application's own methods are its to authorize (Gazette's
	 * runtime verifies only the Shard service): no token is signed. */
	proxy_call(NULL, call, r->endpoint, r->header, path, req, req_header, resp_desc);
	return 0;
}

int gaz_consumer_shard_with_source(struct gaz_consumer *c, const char *journal, char **id, struct gaz_status *st)
{
	char *prefix = NULL;
	size_t lo, hi;
	bool found = false;

	*id = NULL;
	if (!atomic_load(&c->ks_ready))
		return gaz_status_set(st, GAZ_EUNAVAIL, "the consumer is starting: its keyspace is not loaded yet");
	if (asprintf(&prefix, "%s/items/", c->root) < 0)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	gaz_keyspace_rlock(c->ks);
	gaz_keyspace_prefix(c->ks, prefix, &lo, &hi);
	for (size_t i = lo; i < hi && !found; i++) {
		const Consumer__ShardSpec *spec = ((const struct gaz_ks_value *)gaz_keyspace_at(c->ks, i)->decoded)->shard;
		for (size_t k = 0; k < spec->n_sources && !found; k++)
			if ((found = !strcmp(spec->sources[k]->journal, journal)))
				*id = strdup(spec->id);
	}
	gaz_keyspace_runlock(c->ks);
	free(prefix);
	if (found && !*id)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	return found ? 0 : gaz_status_set(st, GAZ_ENOTFOUND, "no ShardSpec is consuming journal %s", journal);
}

/* The server listens before the keyspace (and the etcd client) exists:
 * the port is announced in the ConsumerSpec, and etcd may be down at
 * start. A Shard call that comes first is answered UNAVAILABLE, which
 * clients retry, instead of reaching a keyspace being made (the
 * broker's Journal service does the same). */
static void gated(struct gaz_rpc_call *call, void *arg)
{
	struct gaz_shard_api_gate *g = arg;

	if (!atomic_load(&g->c->ks_ready)) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_UNAVAILABLE, "the consumer is starting: its keyspace is not loaded yet");
		return;
	}
	g->fn(call, g->c);
}

int gaz_consumer_register_api(struct gaz_consumer *c)
{
	peer_tls = &c->peer_tls;
	static const struct {
		const char *path;
		gaz_rpc_handler_fn fn;
	} methods[] = {
		{"/consumer.Shard/Stat", handle_stat},
		{"/consumer.Shard/List", handle_list},
		{"/consumer.Shard/Apply", handle_apply},
		{"/consumer.Shard/GetHints", handle_get_hints},
		{"/consumer.Shard/Unassign", handle_unassign},
	};
	_Static_assert(sizeof(methods) / sizeof(methods[0]) == sizeof(c->api_gates) / sizeof(c->api_gates[0]),
		       "a gate per method");

	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		c->api_gates[i] = (struct gaz_shard_api_gate){methods[i].fn, c};
		if (gaz_rpc_server_register(c->srv, methods[i].path, gated, &c->api_gates[i]))
			return GAZ_ENOMEM;
	}
	return 0;
}
