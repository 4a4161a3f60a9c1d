/*
 * list_apply.c - the List (server-streaming, with watch) and Apply (unary)
 * RPCs (facts §2.4, §2.5). Both work on the keyspace alone: List reads the
 * mirror, Apply writes JournalSpecs in one etcd transaction and answers
 * once the mirror has applied it.
 */
#include "broker/broker.h"
#include "rpc/authorize.h"

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "protocol/labels.h"
#include "protocol/validate.h"

#define LIST_PAGE 25 /* journals per ListResponse message, as Gazette */

struct list_snapshot {
	Protocol__ListResponse__Journal **journals;
	size_t n;
	int64_t max_mod_revision;
	int64_t revision;
};

static void journal_free(Protocol__ListResponse__Journal *j)
{
	if (!j)
		return;
	if (j->spec)
		protobuf_c_message_free_unpacked(&j->spec->base, NULL);
	if (j->route)
		protobuf_c_message_free_unpacked(&j->route->base, NULL);
	free(j);
}

static void snapshot_release(struct list_snapshot *s)
{
	for (size_t i = 0; i < s->n; i++)
		journal_free(s->journals[i]);
	free(s->journals);
	memset(s, 0, sizeof(*s));
}

static Protocol__ListResponse__Journal *journal_of(struct gaz_broker *b,
						   const struct gaz_ks_entry *e)
{
	const struct gaz_ks_value *v = e->decoded;
	Protocol__ListResponse__Journal *j = calloc(1, sizeof(*j));
	struct gaz_route r;
	Protocol__Route *rp;

	if (!j)
		return NULL;
	protocol__list_response__journal__init(j);
	j->spec = (Protocol__JournalSpec *)gaz_pb_copy(&v->spec->base);
	j->mod_revision = e->mod_revision;
	j->create_revision = e->create_revision;
	if (gaz_route_build(b->ks, b->root, v->item, &r) == 0) {
		if ((rp = gaz_route_to_proto(&r, true))) {
			j->route = (Protocol__Route *)gaz_pb_copy(&rp->base);
			gaz_route_proto_free(rp);
		}
		gaz_route_release(&r);
	}
	if (!j->spec || !j->route) {
		journal_free(j);
		return NULL;
	}
	return j;
}

/* Builds the matching snapshot. Keyspace read lock held. */
static int snapshot_build(struct gaz_broker *b, const Protocol__LabelSelector *sel,
			  const Protocol__LabelSelector *claims,
			  struct list_snapshot *s)
{
	char *prefix = NULL;
	size_t lo, hi;

	if (asprintf(&prefix, "%s/items/", b->root) < 0)
		return GAZ_ENOMEM;
	gaz_keyspace_prefix(b->ks, prefix, &lo, &hi);
	free(prefix);
	s->revision = gaz_keyspace_revision(b->ks);
	s->journals = calloc(hi - lo + 1, sizeof(*s->journals));
	if (!s->journals)
		return GAZ_ENOMEM;
	for (size_t i = lo; i < hi; i++) {
		const struct gaz_ks_entry *e = gaz_keyspace_at(b->ks, i);
		const struct gaz_ks_value *v = e->decoded;
		if (!gaz_selector_matches_journal(sel, v->spec) ||
		    (claims && !gaz_selector_matches_journal(claims, v->spec)))
			continue;
		if (!(s->journals[s->n] = journal_of(b, e)))
			return GAZ_ENOMEM;
		s->n++;
		if (e->mod_revision > s->max_mod_revision)
			s->max_mod_revision = e->mod_revision;
	}
	return 0;
}

/* Sends a snapshot in pages of 25; the first page carries status+header. */
static int snapshot_send(struct gaz_broker *b, struct gaz_rpc_call *call,
			 const struct list_snapshot *s)
{
	size_t off = 0;
	int rc = 0;

	do {
		Protocol__ListResponse resp = PROTOCOL__LIST_RESPONSE__INIT;
		Protocol__Header *h = NULL;
		size_t n = s->n - off < LIST_PAGE ? s->n - off : LIST_PAGE;
		if (off == 0) {
			if (!(h = gaz_header_unrouted(b, s->revision)))
				return GAZ_ENOMEM;
			resp.header = h;
		}
		resp.n_journals = n;
		resp.journals = s->journals + off;
		rc = gaz_rpc_send(call, &resp.base);
		gaz_header_free(h);
		off += n;
	} while (!rc && off < s->n);
	return rc;
}

static void wake_call(void *arg) { gaz_rpc_wake(arg); }

static int list_rounds(struct gaz_broker *b, struct gaz_rpc_call *call, const Protocol__ListRequest *req)
{
	int64_t min_rev = 0, last_max = -1;
	size_t last_n = (size_t)-1;
	struct gaz_waiter w = {.wake = wake_call, .arg = call};
	int rc = 0;

	if (req->watch_resume && req->watch_resume->etcd)
		min_rev = req->watch_resume->etcd->revision + 1;
	gaz_notifier_add(gaz_keyspace_notifier(b->ks), &w);
	for (;;) {
		struct list_snapshot s = {0};
		if (min_rev && (rc = gaz_wait_revision(b, call, min_rev, GAZ_DEADLINE_NEVER)))
			break;
		gaz_keyspace_rlock(b->ks);
		rc = snapshot_build(b, req->selector, gaz_rpc_claims_selector(call), &s);
		min_rev = gaz_keyspace_revision(b->ks) + 1;
		gaz_keyspace_runlock(b->ks);
		if (!rc && (s.n != last_n || s.max_mod_revision != last_max)) {
			last_n = s.n;
			last_max = s.max_mod_revision;
			rc = snapshot_send(b, call, &s);
			if (!rc && req->watch) {
				Protocol__ListResponse end = PROTOCOL__LIST_RESPONSE__INIT;
				rc = gaz_rpc_send(call, &end.base);
			}
		}
		snapshot_release(&s);
		if (rc || !req->watch)
			break;
	}
	gaz_notifier_remove(gaz_keyspace_notifier(b->ks), &w);
	return rc;
}

void gaz_handle_list(struct gaz_rpc_call *call, void *arg)
{
	struct gaz_broker *b = arg;
	Protocol__ListRequest *req = NULL;
	struct gaz_status st = {0};
	int rc;

	if (gaz_rpc_recv_request(call, &protocol__list_request__descriptor, (ProtobufCMessage **)&req, "ListRequest"))
		return;
	if (gaz_validate_list_request(req, &st)) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_INVALID_ARGUMENT, st.msg);
	} else {
		rc = list_rounds(b, call, req);
		if (rc == 0 || rc == GAZ_ECANCELLED)
			gaz_rpc_finish(call, NULL, GAZ_GRPC_OK, NULL);
		else
			gaz_rpc_finish(call, NULL, gaz_err_grpc_code(rc), gaz_err_str(rc));
	}
	protobuf_c_message_free_unpacked(&req->base, NULL);
}

/* ---- Apply ----------------------------------------------------------------- */

struct apply_txn {
	Etcdserverpb__TxnRequest txn;
	Etcdserverpb__Compare *cmp_v, **cmps;
	Etcdserverpb__RequestOp *op_v, **ops;
	Etcdserverpb__PutRequest *put_v;
	Etcdserverpb__DeleteRangeRequest *del_v;
	char **keys;
	uint8_t **vals;
	size_t n;
};

static void apply_txn_release(struct apply_txn *a)
{
	for (size_t i = 0; i < a->n; i++) {
		free(a->keys ? a->keys[i] : NULL);
		free(a->vals ? a->vals[i] : NULL);
	}
	free(a->cmp_v); free(a->cmps); free(a->op_v); free(a->ops);
	free(a->put_v); free(a->del_v); free(a->keys); free(a->vals);
}

/* One compare (unless expect == -1) and one put or delete per change. */
static int apply_txn_build(struct gaz_broker *b, const Protocol__ApplyRequest *req,
			   struct apply_txn *a)
{
	size_t n = req->n_changes;

	etcdserverpb__txn_request__init(&a->txn);
	a->n = n;
	a->cmp_v = calloc(n + 1, sizeof(*a->cmp_v)); a->cmps = calloc(n + 1, sizeof(void *));
	a->op_v = calloc(n + 1, sizeof(*a->op_v)); a->ops = calloc(n + 1, sizeof(void *));
	a->put_v = calloc(n + 1, sizeof(*a->put_v)); a->del_v = calloc(n + 1, sizeof(*a->del_v));
	a->keys = calloc(n + 1, sizeof(char *)); a->vals = calloc(n + 1, sizeof(uint8_t *));
	if (!a->cmp_v || !a->cmps || !a->op_v || !a->ops || !a->put_v || !a->del_v || !a->keys ||
	    !a->vals)
		return GAZ_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const Protocol__ApplyRequest__Change *c = req->changes[i];
		const char *name = c->upsert ? c->upsert->name : c->delete_;
		ProtobufCBinaryData key;
		if (!(a->keys[i] = gaz_ks_item_key(b->root, name)))
			return GAZ_ENOMEM;
		key.data = (uint8_t *)a->keys[i];
		key.len = strlen(a->keys[i]);
		if (c->expect_mod_revision != -1) {
			Etcdserverpb__Compare *cmp = &a->cmp_v[a->txn.n_compare];
			etcdserverpb__compare__init(cmp);
			cmp->result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
			cmp->target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD;
			cmp->key = key;
			cmp->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
			cmp->mod_revision = c->expect_mod_revision;
			a->cmps[a->txn.n_compare++] = cmp;
		}
		etcdserverpb__request_op__init(&a->op_v[i]);
		if (c->upsert) {
			size_t len = protocol__journal_spec__get_packed_size(c->upsert);
			if (!(a->vals[i] = malloc(len ? len : 1)))
				return GAZ_ENOMEM;
			protocol__journal_spec__pack(c->upsert, a->vals[i]);
			etcdserverpb__put_request__init(&a->put_v[i]);
			a->put_v[i].key = key;
			a->put_v[i].value.data = a->vals[i];
			a->put_v[i].value.len = len;
			a->op_v[i].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
			a->op_v[i].request_put = &a->put_v[i];
		} else {
			etcdserverpb__delete_range_request__init(&a->del_v[i]);
			a->del_v[i].key = key;
			a->op_v[i].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
			a->op_v[i].request_delete_range = &a->del_v[i];
		}
		a->ops[i] = &a->op_v[i];
	}
	a->txn.compare = a->cmps;
	a->txn.n_success = n;
	a->txn.success = a->ops;
	return 0;
}

static int apply_validate(const Protocol__ApplyRequest *req, struct gaz_status *st)
{
	for (size_t i = 0; i < req->n_changes; i++) {
		if (gaz_validate_apply_change(req->changes[i], st)) {
			gaz_status_prefix(st, "Changes[%zu].", i);
			return GAZ_EINVAL;
		}
	}
	return 0;
}

/* Runs the transaction; fills *status and *revision. */
static int apply_run(struct gaz_broker *b, struct gaz_rpc_call *call,
		     const Protocol__ApplyRequest *req, int *status, int64_t *revision,
		     struct gaz_status *st)
{
	struct apply_txn a = {0};
	Etcdserverpb__TxnResponse *resp = NULL;
	int rc = apply_txn_build(b, req, &a);

	if (!rc)
		rc = gaz_etcd_txn(b->etcd, &a.txn, &resp, st);
	apply_txn_release(&a);
	if (rc)
		return rc;
	*revision = resp->header ? resp->header->revision : 0;
	*status = resp->succeeded ? PROTOCOL__STATUS__OK : PROTOCOL__STATUS__ETCD_TRANSACTION_FAILED;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	/* Answer only once our own mirror reflects the write (§2.5 step 4). */
	if (*status == PROTOCOL__STATUS__OK && req->n_changes)
		rc = gaz_wait_revision(b, call, *revision, GAZ_DEADLINE_NEVER);
	return rc;
}

/* apply_unauthorized: a change the caller's claims do not cover (an
 * upsert by the spec's labels plus its name, a delete by its name alone,
 * as Gazette's Apply) refuses the whole request. */
static bool apply_unauthorized(struct gaz_rpc_call *call, const Protocol__ApplyRequest *req,
			       struct gaz_status *st)
{
	const Protocol__LabelSelector *sel = gaz_rpc_claims_selector(call);

	for (size_t i = 0; sel && i < req->n_changes; i++) {
		const Protocol__ApplyRequest__Change *c = req->changes[i];
		const char *name = c->upsert ? c->upsert->name : c->delete_;

		if (!gaz_selector_matches_meta(sel, name, c->upsert ? c->upsert->labels : NULL, 0)) {
			gaz_status_set(st, GAZ_EPERM, "not authorized to %s", name);
			return true;
		}
	}
	return false;
}

void gaz_handle_apply(struct gaz_rpc_call *call, void *arg)
{
	struct gaz_broker *b = arg;
	Protocol__ApplyRequest *req = NULL;
	Protocol__ApplyResponse resp = PROTOCOL__APPLY_RESPONSE__INIT;
	struct gaz_status st = {0};
	int status = 0, rc;
	int64_t revision = 0;

	if (gaz_rpc_recv_request(call, &protocol__apply_request__descriptor, (ProtobufCMessage **)&req, "ApplyRequest"))
		return;
	if (apply_validate(req, &st)) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_INVALID_ARGUMENT, st.msg);
	} else if (apply_unauthorized(call, req, &st)) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_UNAUTHENTICATED, st.msg);
	} else if ((rc = apply_run(b, call, req, &status, &revision, &st))) {
		gaz_rpc_finish(call, NULL, gaz_err_grpc_code(rc), st.msg[0] ? st.msg : gaz_err_str(rc));
	} else {
		resp.status = status;
		resp.header = gaz_header_unrouted(b, revision);
		gaz_rpc_finish(call, &resp.base, GAZ_GRPC_OK, NULL);
		gaz_header_free(resp.header);
	}
	protobuf_c_message_free_unpacked(&req->base, NULL);
}
