/*
 * append.c - the Append RPC (client-streaming; facts §2.1, §2.1.1).
 *
 * States, after Gazette's append FSM:
 *
 *   RESOLVE ──not primary──▶ AWAIT_DESIRED_REPLICAS ─▶ PROXY
 *      │ primary
 *      ▼
 *   ACQUIRE (the replica's append token) ─▶ UPDATE_ASSIGNMENTS (route
 *   consistency write, §4.6) ─▶ AWAIT_DESIRED_REPLICAS ─▶
 *   VALIDATE_PRECONDITIONS (registers, offsets, suspension, rolls) ─▶
 *   STREAM_CONTENT ─▶ commit or roll back ─▶ response
 *
 * Any state may loop back to RESOLVE at a newer etcd revision (append_run).
 * With more than one route member, every spool change also goes through
 * the replication pipeline (append_repl.c). An append that streams its
 * content waits for the token in ACQUIRE parked, holding no thread
 * (append_token_resume carries on); the other states still run on the
 * handler's thread (issue 39's next steps: STREAM_CONTENT and the
 * pipeline's round trips). The append's state (struct append_ctx) is on
 * the heap, freed by append_end.
 */
#include "broker/broker.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "broker/append_int.h"
#include "broker/metrics.h"
#include "broker/persister.h"
#include "broker/replica.h"
#include "common/clock.h"
#include "common/log.h"
#include "protocol/labels.h"
#include "protocol/validate.h"

void gaz__append_respond_status(struct append_ctx *a, int status)
{
	Protocol__AppendResponse resp = PROTOCOL__APPEND_RESPONSE__INIT;
	Protocol__Header *h = gaz_header_build(a->b, &a->res);
	Protocol__LabelSet regs = PROTOCOL__LABEL_SET__INIT;

	resp.status = status;
	resp.header = h;
	if (status == PROTOCOL__STATUS__REGISTER_MISMATCH)
		resp.registers = a->registers ? a->registers : &regs;
	if (status == PROTOCOL__STATUS__FRAGMENT_STORE_UNHEALTHY)
		resp.store_health_error = a->store_error;
	gaz_rpc_set_outcome(a->call, status);
	gaz_rpc_finish(a->call, &resp.base, GAZ_GRPC_OK, NULL);
	gaz_header_free(h);
	a->finished = true;
}

void gaz__append_respond_error(struct append_ctx *a, int code, const char *msg)
{
	gaz_rpc_finish(a->call, NULL, code, msg);
	a->finished = true;
}

/* ---- RESOLVE and the assignment writes ----------------------------------- */

static int resolve(struct append_ctx *a)
{
	struct gaz_resolve_opts o = {
		.may_proxy = !a->req->do_not_proxy,
		.require_primary = true,
		.min_etcd_revision = a->read_through_rev,
		.proxy_header = a->req->header,
		.call = a->call,
	};
	struct gaz_status st = {0};
	int rc;

	gaz_resolution_release(&a->res);
	rc = gaz_resolve(a->b, a->req->journal, &o, &a->res, &st);
	if (rc) {
		/* A broker shutting down answers UNAVAILABLE (Gazette: Unknown),
		 * which clients retry: the journal is moving elsewhere. */
		int code = rc == GAZ_ECANCELLED			      ? GAZ_GRPC_CANCELLED
			   : rc == GAZ_EUNAVAIL || rc == GAZ_ESTOPPED ? GAZ_GRPC_UNAVAILABLE
								      : GAZ_GRPC_UNKNOWN;
		gaz__append_respond_error(a, code, st.msg);
		return rc;
	}
	return 0;
}

int64_t gaz__append_desired_replication(const struct gaz_broker *b, const Protocol__JournalSpec *s)
{
	int64_t r = s->replication;

	if (r > b->cfg.max_replication)
		r = b->cfg.max_replication;
	if (s->suspend && s->suspend->level == PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__PARTIAL && r > 1)
		r = 1;
	return r;
}

static int64_t desired_replication(const struct append_ctx *a)
{
	return gaz__append_desired_replication(a->b, a->res.spec);
}

/* read_through_txn sets where the next resolution reads through after a
 * transaction guarded by the resolution's view (at res.etcd.revision):
 * applied, its own revision, which is in our prefix; failed, one past the
 * view. A compare failed because a compared key changed after the view,
 * and the keyspace will hold that change; the response's revision is
 * etcd's, which our watch of the prefix never reaches when other keys
 * (another prefix, a consumer's) moved it last: waiting for it hung an
 * append that lost the route write to a pulse (Gazette waits for it). */
static void read_through_txn(struct append_ctx *a, bool applied, int64_t revision)
{
	a->read_through_rev = applied ? revision : a->res.etcd.revision + 1;
}

/* Appends to a txn: for every assignment compare its mod revision, and put
 * the derived route (no endpoints) into each inconsistent one (§4.6). */
static int update_assignments(struct append_ctx *a, bool *wrote)
{
	struct gaz_route *r = &a->res.route;
	struct gaz_txn t;
	Protocol__Route *p = gaz_route_to_proto(r, false);
	size_t len = p ? protocol__route__get_packed_size(p) : 0;
	uint8_t *val = p ? malloc(len ? len : 1) : NULL;
	struct gaz_status st = {0};
	int rc = 0;

	*wrote = false;
	if (!p || !val) {
		gaz_route_proto_free(p);
		free(val);
		return GAZ_ENOMEM;
	}
	protocol__route__pack(p, val);
	gaz_route_proto_free(p);
	gaz_txn_init(&t);
	for (size_t i = 0; i < r->n; i++) {
		char *key = gaz_ks_assign_key(a->b->root, a->res.journal, r->zone[i], r->suffix[i],
					      r->slot[i]);
		if (!key) {
			rc = GAZ_ENOMEM;
			break;
		}
		gaz_txn_compare_mod(&t, key, r->mod_revision[i]);
		if (!r->consistent[i]) {
			gaz_txn_put(&t, key, val, len, 0, true);
			*wrote = true;
		}
		free(key);
	}
	if (!rc && *wrote) {
		bool applied = false;
		int64_t rev = 0;
		if (!(rc = gaz_txn_commit(a->b->etcd, &t, &applied, &rev, &st)))
			read_through_txn(a, applied, rev);
	}
	gaz_txn_release(&t);
	free(val);
	if (rc)
		gaz_warn("route consistency write failed", "journal=%s err=%s", a->res.journal,
			 st.msg);
	return rc;
}

/* A broker on its way out lets a journal's new route take effect (the
 * consistency write after which the allocator removes us and moves the
 * primary) only once the spool's content is in the store: a member that
 * joined has none of it, and with replication 1 our disk holds the only
 * copy. So roll the spool (peers roll with it) and wait for the persister.
 * Without a pending route write, or while serving, nothing happens. */
static int persist_before_hand_off(struct append_ctx *a)
{
	struct gaz_replica *r = a->res.replica;
	const struct gaz_route *route = &a->res.route;
	bool pending = false;
	int rc;

	if (!atomic_load(&a->b->exiting) || !a->b->persister)
		return 0;
	for (size_t i = 0; i < route->n; i++)
		pending |= !route->consistent[i];
	if (!pending)
		return 0;
	if ((rc = gaz__append_roll(a, r->spool.fragment.end)))
		return rc;
	while (gaz_persister_pending_for(a->b->persister, r->journal))
		if (gaz_rpc_wait(a->call, gaz_deadline_in(20)) == GAZ_ECANCELLED)
			return GAZ_ECANCELLED;
	return 0;
}

/* Writes the item with a new suspension, guarded by the item's and every
 * assignment's mod revision (UPDATE_SUSPEND). */
int gaz__append_update_suspend(struct append_ctx *a, int level, int64_t offset)
{
	Protocol__JournalSpec__Suspend sus = PROTOCOL__JOURNAL_SPEC__SUSPEND__INIT;
	Protocol__JournalSpec__Suspend *old = a->res.spec->suspend;
	struct gaz_route *r = &a->res.route;
	char *ikey = gaz_ks_item_key(a->b->root, a->res.journal);
	struct gaz_status st = {0};
	struct gaz_txn t;
	uint8_t *val;
	size_t len;
	bool ok = false;
	int rc;

	sus.level = level;
	sus.offset = offset;
	a->res.spec->suspend = &sus;
	len = protocol__journal_spec__get_packed_size(a->res.spec);
	val = malloc(len ? len : 1);
	if (val)
		protocol__journal_spec__pack(a->res.spec, val);
	a->res.spec->suspend = old;
	if (!val || !ikey) {
		free(val);
		free(ikey);
		return GAZ_ENOMEM;
	}
	gaz_txn_init(&t);
	gaz_txn_compare_mod(&t, ikey, a->res.item_mod_revision);
	for (size_t i = 0; i < r->n; i++) {
		char *key = gaz_ks_assign_key(a->b->root, a->res.journal, r->zone[i], r->suffix[i],
					      r->slot[i]);
		if (key)
			gaz_txn_compare_mod(&t, key, r->mod_revision[i]);
		free(key);
	}
	gaz_txn_put(&t, ikey, val, len, 0, false);
	int64_t rev = 0;
	rc = gaz_txn_commit(a->b->etcd, &t, &ok, &rev, &st);
	gaz_txn_release(&t);
	free(val);
	free(ikey);
	if (!rc) {
		read_through_txn(a, ok, rev);
		gaz_info("journal suspension updated",
			 "journal=%s suspend_level=%d offset=%lld ok=%d", a->res.journal, level,
			 (long long)offset, ok);
	}
	return rc;
}

/* ---- the response of a committed append ---------------------------------- */

void gaz__append_respond_commit(struct append_ctx *a)
{
	/* The commit is durable on every replica: let the next append start
	 * while this response travels (Gazette releases before SendAndClose). */
	if (a->token) {
		gaz_replica_release(a->token);
		a->token = NULL;
	}
	Protocol__AppendResponse resp = PROTOCOL__APPEND_RESPONSE__INIT;
	Protocol__Fragment commit = PROTOCOL__FRAGMENT__INIT;
	Protocol__SHA1Sum sum = PROTOCOL__SHA1_SUM__INIT;
	Protocol__LabelSet empty = PROTOCOL__LABEL_SET__INIT;
	Protocol__Header *h = gaz_header_build(a->b, &a->res);

	commit.journal = a->res.journal;
	commit.begin = a->commit_begin;
	commit.end = a->commit_end;
	commit.compression_codec = a->commit_codec;
	/* The SHA-1 of this append's bytes only: SHA1("") for an empty append,
	 * unlike empty spool fragments, which carry the zero sum (§2.1). */
	gaz_sha1sum_to_proto(a->commit_sum, &sum);
	commit.sum = &sum;
	resp.status = PROTOCOL__STATUS__OK;
	resp.header = h;
	resp.commit = &commit;
	resp.registers = a->registers ? a->registers : &empty;
	resp.total_chunks = a->total_chunks;
	resp.delayed_chunks = a->delayed_chunks;
	gaz_rpc_finish(a->call, &resp.base, GAZ_GRPC_OK, NULL);
	gaz_header_free(h);
	a->finished = true;
	gaz_metric_write_head(a->res.journal, a->commit_end);
}

/* ---- the state machine ---------------------------------------------------- */

/* as_primary and after_resolve return this when the append waits parked
 * for the token: append_token_resume carries on. */
#define APPEND_PARKED 2

static void append_token_resume(struct gaz_rpc_call *call, void *arg);

/* ACQUIRE: takes the replica's append token, the outcome as
 * gaz__append_acquire's. An append that streams its content (not
 * batchable: its request was not read whole ahead) waits parked in the
 * token queue, holding no thread, while another append holds the token;
 * then APPEND_PARKED. Batchable ones wait in the group-commit queue
 * (append_batch.c), and a local call (a pulse) on its thread. */
static int acquire(struct append_ctx *a)
{
	int rc;

	if (a->batchable || gaz_rpc_is_local(a->call))
		return gaz__append_acquire(a);
	rc = gaz_replica_token_park(a->res.replica, &a->waiter, a->call, append_token_resume, a);
	return rc == 1 ? APPEND_PARKED : rc;
}

static int with_token(struct append_ctx *a, int rc);

/* Primary path once resolved: ACQUIRE, then with_token. Returns 1 to
 * resolve again, 0 when the call was answered, APPEND_PARKED. */
static int as_primary(struct append_ctx *a)
{
	gaz__append_prefetch(a);
	return with_token(a, acquire(a));
}

/* The primary path after ACQUIRE ended with `rc`: 0 with the token held.
 * Returns as as_primary. */
static int with_token(struct append_ctx *a, int rc)
{
	struct gaz_replica *r = a->res.replica;
	int64_t d = desired_replication(a);
	bool wrote;

	if (rc == APPEND_PARKED)
		return rc;
	if (rc) {
		if (rc == 1) /* committed by another append's group commit */
			return 0;
		if (rc == GAZ_ESTOPPED)
			return 1;
		gaz__append_respond_error(a, GAZ_GRPC_CANCELLED, "cancelled waiting for the journal");
		return 0;
	}
	a->token = r;
	/* START_PIPELINE / SYNC, then UPDATE_ASSIGNMENTS, then
	 * AWAIT_DESIRED_REPLICAS, in Gazette's order. */
	if ((rc = gaz__append_start_pipeline(a)) != 0) {
		gaz_replica_release(r);
		a->token = NULL;
		if (rc < 0)
			gaz__append_respond_error(a, GAZ_GRPC_UNAVAILABLE, "replication to the journal's peers failed");
		return rc > 0;
	}
	if ((rc = persist_before_hand_off(a))) {
		gaz_replica_release(r);
		a->token = NULL;
		gaz__append_respond_error(a, GAZ_GRPC_UNAVAILABLE, "persisting the spool before hand-off failed");
		return 0;
	}
	rc = update_assignments(a, &wrote);
	if (rc || wrote) {
		gaz_replica_release(r);
		a->token = NULL;
		if (rc)
			gaz__append_respond_error(a, GAZ_GRPC_UNAVAILABLE, "updating assignments in etcd failed");
		return rc ? 0 : 1;
	}
	if ((int64_t)a->res.route.n > d) {
		/* Wait for the allocator to shrink the route. */
		gaz_replica_release(r);
		a->token = NULL;
		a->read_through_rev = a->res.etcd.revision + 1;
		return 1;
	}
	if ((int64_t)a->res.route.n < d) {
		gaz__append_respond_status(a, PROTOCOL__STATUS__INSUFFICIENT_JOURNAL_BROKERS);
		return 0;
	}
	if ((rc = gaz__append_local(a)) == 1) {
		/* Resolving again: let go of the token first, so that the
		 * next ACQUIRE (ours or another append's) can take it. */
		gaz_replica_release(r);
		a->token = NULL;
	}
	return rc;
}

/* The broker-level outcome of RESOLVE. Returns 1 to resolve again. */
static int after_resolve(struct append_ctx *a)
{
	int status = a->res.status;

	if (status == PROTOCOL__STATUS__SUSPENDED &&
	    a->req->suspend == PROTOCOL__APPEND_REQUEST__SUSPEND__SUSPEND_RESUME) {
		int64_t off = a->res.spec->suspend ? a->res.spec->suspend->offset : 0;
		if (gaz__append_update_suspend(a, PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__NONE, off)) {
			gaz__append_respond_error(a, GAZ_GRPC_UNAVAILABLE, "resuming the journal failed");
			return 0;
		}
		return 1;
	}
	if (status != PROTOCOL__STATUS__OK) {
		gaz__append_respond_status(a, status);
		return 0;
	}
	if (!a->res.replica) {
		int64_t d = desired_replication(a);
		if ((int64_t)a->res.route.n > d) {
			a->read_through_rev = a->res.etcd.revision + 1;
			return 1;
		}
		if ((int64_t)a->res.route.n < d) {
			gaz__append_respond_status(a, PROTOCOL__STATUS__INSUFFICIENT_JOURNAL_BROKERS);
			return 0;
		}
		gaz__append_proxy(a);
		return 0;
	}
	return as_primary(a);
}

/* The end of every append: lets go of the token, answers an append left
 * unanswered, frees `a`. */
static void append_end(struct append_ctx *a)
{
	if (a->token)
		gaz_replica_release(a->token);
	if (!a->finished)
		gaz_rpc_finish(a->call, NULL, GAZ_GRPC_CANCELLED, "append abandoned");
	gaz__append_prefetch_release(a);
	gaz_labelset_free(a->registers);
	gaz_resolution_release(&a->res);
	protobuf_c_message_free_unpacked(&a->req->base, NULL);
	free(a);
}

/* RESOLVE and what follows, over again while a state asks to resolve at a
 * newer revision, until the append is answered (append_end) or waits
 * parked (it is then append_token_resume's). */
static void append_run(struct append_ctx *a)
{
	int rc = 1;

	while (!a->finished && rc == 1 && resolve(a) == 0)
		rc = after_resolve(a);
	if (rc != APPEND_PARKED)
		append_end(a);
}

/* append_token_resume runs when an append parked in the token queue
 * wakes: granted, cancelled, or the replica torn down; else it parks
 * again. */
static void append_token_resume(struct gaz_rpc_call *call, void *arg)
{
	struct append_ctx *a = arg;
	int rc = gaz_replica_token_resumed(a->res.replica, &a->waiter, call, append_token_resume, a);

	if (rc == 1)
		return;
	rc = with_token(a, rc);
	if (rc == APPEND_PARKED)
		return;
	if (rc == 1)
		append_run(a);
	else
		append_end(a);
}

void gaz_handle_append(struct gaz_rpc_call *call, void *arg)
{
	struct append_ctx *a = calloc(1, sizeof(*a));
	struct gaz_status st = {0};

	if (!a) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	a->b = arg;
	a->call = call;
	a->res.route.primary = -1;
	if (gaz_rpc_recv_request(call, &protocol__append_request__descriptor, (ProtobufCMessage **)&a->req, "AppendRequest")) {
		free(a);
		return;
	}
	if (!a->req->journal[0])
		gaz_status_set(&st, GAZ_EINVAL, "expected first AppendRequest to have a Journal");
	else
		gaz_validate_append_request(a->req, &st);
	if (st.code) {
		gaz__append_respond_error(a, GAZ_GRPC_INVALID_ARGUMENT, st.msg);
		append_end(a);
		return;
	}
	a->read_through_rev = a->req->min_etcd_revision;
	append_run(a);
}
