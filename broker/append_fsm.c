/*
 * append_fsm.c - the Append RPC (client-streaming; facts §2.1, §2.1.1) as
 * one state machine, after Gazette's broker/append_fsm.go. A reader
 * follows an append here from RESOLVE to its response: enum append_state
 * names the states, append_step runs one, append_run loops until the
 * append is answered or waits parked.
 *
 *   RESOLVE ─▶ ROUTE ──not primary──▶ AWAIT_DESIRED_REPLICAS ─▶ PROXY
 *                │ primary
 *                ▼
 *   ACQUIRE (the replica's append token) ─▶ START_PIPELINE ─▶
 *   PERSIST_HAND_OFF ─▶ UPDATE_ASSIGNMENTS ─▶ AWAIT_DESIRED_REPLICAS ─▶
 *   VALIDATE_PRECONDITIONS ─▶ GROUP_COMMIT, or STREAM_CONTENT ─▶ COMMIT
 *   ─▶ DONE (the response; append_end)
 *
 * Any step may go back to RESOLVE at a newer etcd revision, letting go of
 * the token first (again). The modules below do the work of the steps:
 * append_etcd.c the etcd writes, append_repl.c the replication pipeline
 * (every spool change goes through it when the route has more than one
 * member), append_local.c preconditions, content and commit,
 * append_batch.c the group-commit queue and the pollers' fast path for a
 * lone small append (which never enters this machine), proxy.c PROXY.
 *
 * An append that streams its content waits parked, holding no thread,
 * for the token in ACQUIRE (append_token_resume carries on), for each of
 * its chunks in STREAM_CONTENT and PROXY (append_stream_resume), and in
 * PROXY for the primary's answer (gaz__append_resume); the other
 * states run on the pool thread of the handler or of the latest resume
 * (the pipeline's round trips among them: START_PIPELINE's sync and
 * COMMIT's acknowledgements). The append's state (struct append_ctx) is
 * on the heap, freed by append_end.
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
	/* Before the response: a client that scrapes after its append sees
	 * the head it was answered with. A pulse (a local call) leaves the
	 * gauge alone, as Gazette's pulses do: answered after the token is
	 * released, its older head could overwrite a client append's. */
	if (!gaz_rpc_is_local(a->call))
		gaz_metric_write_head(a->res.journal, a->commit_end);
	gaz_rpc_finish(a->call, &resp.base, GAZ_GRPC_OK, NULL);
	gaz_header_free(h);
	a->finished = true;
}

/* ---- the state machine ---------------------------------------------------- */

/* The states of an append, in the order a reader follows them; each
 * step below runs one and names the next. */
enum append_state {
	APPEND_RESOLVE,                /* resolve the journal at read_through_rev */
	APPEND_ROUTE,                  /* the resolution's status; primary or proxy */
	APPEND_PROXY,                  /* forward the whole RPC to the primary */
	APPEND_ACQUIRE,                /* the replica's append token (may park) */
	APPEND_START_PIPELINE,         /* the peers' Replicate streams, synced */
	APPEND_PERSIST_HAND_OFF,       /* an exiting broker persists first */
	APPEND_UPDATE_ASSIGNMENTS,     /* the route consistency write (§4.6) */
	APPEND_AWAIT_DESIRED_REPLICAS, /* the route has the journal's replication */
	APPEND_VALIDATE_PRECONDITIONS, /* registers, offsets, suspension, roll */
	APPEND_GROUP_COMMIT,           /* a whole small request: with its group */
	APPEND_STREAM_CONTENT,         /* the client's chunks to the spool */
	APPEND_COMMIT,                 /* everywhere, then the response */
	APPEND_DONE,                   /* answered: append_end */
	APPEND_PARKED,                 /* waits with no thread (not a state of
					* the append: the step's outcome) */
};

static void append_token_resume(struct gaz_rpc_call *call, void *arg);
static void append_run(struct append_ctx *a);

/* let_go releases the token, if held, so that another append (or this
 * one's next ACQUIRE) can take it. */
static void let_go(struct append_ctx *a)
{
	if (a->token) {
		gaz_replica_release(a->token);
		a->token = NULL;
	}
}

/* again resolves once more, without the token. */
static enum append_state again(struct append_ctx *a)
{
	let_go(a);
	return APPEND_RESOLVE;
}

/* fail answers the append with a gRPC error, the token let go first, and
 * ends it. */
static enum append_state fail(struct append_ctx *a, int code, const char *msg)
{
	let_go(a);
	gaz__append_respond_error(a, code, msg);
	return APPEND_DONE;
}

static enum append_state step_resolve(struct append_ctx *a)
{
	if (a->finished || resolve(a))
		return APPEND_DONE;
	return APPEND_ROUTE;
}

/* The broker-level outcome of RESOLVE: a suspended journal asked to
 * resume is resumed first; a status other than OK is the answer. */
static enum append_state step_route(struct append_ctx *a)
{
	int status = a->res.status;

	if (status == PROTOCOL__STATUS__SUSPENDED &&
	    a->req->suspend == PROTOCOL__APPEND_REQUEST__SUSPEND__SUSPEND_RESUME) {
		int64_t off = a->res.spec->suspend ? a->res.spec->suspend->offset : 0;
		if (gaz__append_update_suspend(a, PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__NONE, off))
			return fail(a, GAZ_GRPC_UNAVAILABLE, "resuming the journal failed");
		return APPEND_RESOLVE;
	}
	if (status != PROTOCOL__STATUS__OK) {
		gaz__append_respond_status(a, status);
		return APPEND_DONE;
	}
	if (!a->res.replica) /* Gazette's order: the route first, then PROXY */
		return APPEND_AWAIT_DESIRED_REPLICAS;
	gaz__append_prefetch(a);
	return APPEND_ACQUIRE;
}

/* The outcome `rc` of ACQUIRE (gaz__append_acquire's, or a parked wait's):
 * 0 with the token; 1 when another append's group commit committed and
 * answered this one; GAZ_ESTOPPED when the replica went away. */
static enum append_state acquired(struct append_ctx *a, int rc)
{
	if (rc == 1)
		return APPEND_DONE;
	if (rc == GAZ_ESTOPPED)
		return APPEND_RESOLVE;
	if (rc)
		return fail(a, GAZ_GRPC_CANCELLED, "cancelled waiting for the journal");
	a->token = a->res.replica;
	return APPEND_START_PIPELINE;
}

/* ACQUIRE: an append that streams its content (its request was not read
 * whole ahead) waits in the token queue parked, holding no thread, while
 * another append holds the token; append_token_resume carries on.
 * Batchable ones wait in the group-commit queue (append_batch.c), and a
 * local call (a pulse) on its thread. */
static enum append_state step_acquire(struct append_ctx *a)
{
	int rc;

	if (a->batchable || gaz_rpc_is_local(a->call))
		return acquired(a, gaz__append_acquire(a));
	rc = gaz_replica_token_park(a->res.replica, &a->waiter, a->call, append_token_resume, a);
	return rc == 1 ? APPEND_PARKED : acquired(a, rc);
}

/* START_PIPELINE, and SYNC of a pipeline already there (append_repl.c). */
static enum append_state step_start_pipeline(struct append_ctx *a)
{
	int rc = gaz__append_start_pipeline(a);

	if (rc > 0)
		return again(a);
	if (rc < 0)
		return fail(a, GAZ_GRPC_UNAVAILABLE, "replication to the journal's peers failed");
	return APPEND_PERSIST_HAND_OFF;
}

static enum append_state step_persist_hand_off(struct append_ctx *a)
{
	if (persist_before_hand_off(a))
		return fail(a, GAZ_GRPC_UNAVAILABLE, "persisting the spool before hand-off failed");
	return APPEND_UPDATE_ASSIGNMENTS;
}

static enum append_state step_update_assignments(struct append_ctx *a)
{
	bool wrote;
	int rc = gaz__append_update_assignments(a, &wrote);

	if (rc)
		return fail(a, GAZ_GRPC_UNAVAILABLE, "updating assignments in etcd failed");
	return wrote ? again(a) : APPEND_AWAIT_DESIRED_REPLICAS;
}

/* AWAIT_DESIRED_REPLICAS: a route larger than the journal's replication
 * waits for the allocator to shrink it (resolving past this view); a
 * smaller one is answered INSUFFICIENT_JOURNAL_BROKERS. */
static enum append_state step_await_desired_replicas(struct append_ctx *a)
{
	int64_t d = desired_replication(a);

	if ((int64_t)a->res.route.n > d) {
		a->read_through_rev = a->res.etcd.revision + 1;
		return again(a);
	}
	if ((int64_t)a->res.route.n < d) {
		gaz__append_respond_status(a, PROTOCOL__STATUS__INSUFFICIENT_JOURNAL_BROKERS);
		return APPEND_DONE;
	}
	return a->res.replica ? APPEND_VALIDATE_PRECONDITIONS : APPEND_PROXY;
}

static enum append_state step_validate_preconditions(struct append_ctx *a)
{
	int rc = gaz__append_validate(a);

	if (rc == 1)
		return again(a);
	if (rc == 0)
		return APPEND_DONE;
	return a->batch ? APPEND_GROUP_COMMIT : APPEND_STREAM_CONTENT;
}

/* STREAM_CONTENT waits for each chunk parked, holding no thread: the
 * poller that receives the chunk hands it over (chunk_arrived), and
 * append_stream_resume carries on with it on the pool. Chunks prefetched
 * before ACQUIRE go first. A local call (a pulse) cannot park: it
 * receives on its own thread. */
static void append_stream_resume(struct gaz_rpc_call *call, void *arg);

#define CHUNK_ARRIVED 2 /* chunk_arrived's code (GAZ_EOF is 1) */

/* chunk_arrived queues a chunk a poller received (or, read ahead, the
 * resume's own thread) and ends the park. One more may come before the
 * resume takes the stream back: the receive its gaz_rpc_recv_each
 * starts. */
static int chunk_arrived(void *arg, ProtobufCMessage *m)
{
	struct append_ctx *a = arg;
	struct append_chunk *c = malloc(sizeof(*c));

	if (!c) {
		protobuf_c_message_free_unpacked(m, NULL);
		return GAZ_ECANCELLED; /* out of memory: the append is abandoned */
	}
	c->m = (Protocol__AppendRequest *)m;
	c->next = NULL;
	*(a->arrived ? a->arrived_tail : &a->arrived) = c;
	a->arrived_tail = &c->next;
	return CHUNK_ARRIVED;
}

static Protocol__AppendRequest *chunk_take(struct append_ctx *a)
{
	struct append_chunk *c = a->arrived;
	Protocol__AppendRequest *m = c->m;

	a->arrived = c->next;
	free(c);
	return m;
}

int gaz__append_await_chunk(struct append_ctx *a, Protocol__AppendRequest **m, int64_t deadline_ns)
{
	int rc;

	*m = NULL;
	if (a->arrived) {
		*m = chunk_take(a);
		return 0;
	}
	if (a->arrived_rc) {
		rc = a->arrived_rc;
		a->arrived_rc = 0;
		return rc;
	}
	if ((rc = gaz__append_next_prefetched(a, m)) != APPEND_NONE_PREFETCHED)
		return rc;
	if (!gaz_rpc_is_local(a->call) &&
	    gaz_rpc_park_each(a->call, &protocol__append_request__descriptor, chunk_arrived, a,
			      append_stream_resume, a, deadline_ns, 0) == 0)
		return APPEND_AWAIT_PARKED;
	return gaz_rpc_recv(a->call, &protocol__append_request__descriptor, (ProtobufCMessage **)m,
			    deadline_ns);
}

static enum append_state step_stream_content(struct append_ctx *a)
{
	if (!a->sha && gaz__append_stream_begin(a))
		return APPEND_DONE; /* answered */
	for (;;) {
		Protocol__AppendRequest *m = NULL;
		int rc = gaz__append_await_chunk(a, &m, gaz__append_stream_deadline(a));

		if (rc == APPEND_AWAIT_PARKED)
			return APPEND_PARKED;
		rc = gaz__append_stream_chunk(a, rc, m);
		if (rc < 0)
			return APPEND_DONE; /* rolled back and answered */
		if (rc == 1)
			return APPEND_COMMIT;
	}
}

/* append_stream_resume takes the stream back from the pollers: chunks
 * (chunk_arrived's), the stream's end, or a wake; a wake before the
 * minimum rate's deadline (nothing the append waits for) parks again.
 * The deadline is STREAM_CONTENT's (none for PROXY, whose rate is
 * unset). */
static void append_stream_resume(struct gaz_rpc_call *call, void *arg)
{
	struct append_ctx *a = arg;
	int rc = gaz_rpc_recv_each(call, &protocol__append_request__descriptor, chunk_arrived, a, 0);

	if (rc == CHUNK_ARRIVED) {
		rc = 0; /* a->arrived */
	} else if (rc == GAZ_ETIMEDOUT && gaz_rpc_poll(call) == GAZ_ECANCELLED) {
		rc = GAZ_ECANCELLED;
	} else if (rc == GAZ_ETIMEDOUT && gaz_mono_ns() < gaz__append_stream_deadline(a)) {
		if (gaz_rpc_park_each(call, &protocol__append_request__descriptor, chunk_arrived, a,
				      append_stream_resume, a, gaz__append_stream_deadline(a), 0) == 0)
			return;
		rc = GAZ_ECANCELLED;
	}
	a->arrived_rc = rc; /* after the chunks queued before it */
	append_run(a);
}

/* One step of the append; returns the next state. */
static enum append_state append_step(struct append_ctx *a)
{
	switch ((enum append_state)a->state) {
	case APPEND_RESOLVE:
		return step_resolve(a);
	case APPEND_ROUTE:
		return step_route(a);
	case APPEND_PROXY: /* proxy.c relays the RPC and answers it */
		return gaz__append_proxy(a) == APPEND_AWAIT_PARKED ? APPEND_PARKED : APPEND_DONE;
	case APPEND_ACQUIRE:
		return step_acquire(a);
	case APPEND_START_PIPELINE:
		return step_start_pipeline(a);
	case APPEND_PERSIST_HAND_OFF:
		return step_persist_hand_off(a);
	case APPEND_UPDATE_ASSIGNMENTS:
		return step_update_assignments(a);
	case APPEND_AWAIT_DESIRED_REPLICAS:
		return step_await_desired_replicas(a);
	case APPEND_VALIDATE_PRECONDITIONS:
		return step_validate_preconditions(a);
	case APPEND_GROUP_COMMIT:
		gaz__append_batch_commit(a); /* append_batch.c/append_local.c answer the group */
		return APPEND_DONE;
	case APPEND_STREAM_CONTENT:
		return step_stream_content(a);
	case APPEND_COMMIT:
		gaz__append_commit(a);
		return APPEND_DONE;
	case APPEND_DONE:
	case APPEND_PARKED:
		break;
	}
	return APPEND_DONE;
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
	EVP_MD_CTX_free(a->sha);
	while (a->arrived) {
		Protocol__AppendRequest *m = chunk_take(a);
		protobuf_c_message_free_unpacked(&m->base, NULL);
	}
	protobuf_c_message_free_unpacked(&a->req->base, NULL);
	free(a);
}

/* append_run runs the append's steps from a->state until it is answered
 * (append_end) or waits parked (then append_token_resume's). */
static void append_run(struct append_ctx *a)
{
	while (a->state != APPEND_DONE) {
		enum append_state next = append_step(a);
		if (next == APPEND_PARKED)
			return;
		a->state = next;
	}
	append_end(a);
}

void gaz__append_resume(struct gaz_rpc_call *call, void *arg)
{
	(void)call;
	append_run(arg);
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
	a->state = acquired(a, rc);
	append_run(a);
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
	a->state = APPEND_RESOLVE;
	append_run(a);
}
