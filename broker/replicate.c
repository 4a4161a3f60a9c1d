/*
 * replicate.c - the replica side of the Replicate RPC (bidi; facts §2.3,
 * §6.2): a primary streams proposals and content to this broker's spool
 * of a journal, and this broker answers each acknowledged proposal.
 *
 * Per message, with the replica's append token held for the whole stream:
 *   content {content, content_delta}: delta must equal the spool's
 *     uncommitted length; the bytes are appended (not yet visible).
 *   proposal {proposal P, registers R}:
 *     ROLL     when P.end > end + delta, or P is empty at end: the spool's
 *              content (if any) is completed and persisted, and the spool
 *              restarts empty at P.end with P's codec (registers := R when
 *              P moved past end);
 *     OK       when P equals the committed fragment and R the registers:
 *              any uncommitted delta is rolled back;
 *     COMMIT   when delta != 0 and P equals the fragment a commit would
 *              produce: the delta becomes visible to readers;
 *     PROPOSAL_MISMATCH otherwise, with our fragment and registers.
 * When the stream ends, for any reason, uncommitted bytes are rolled back.
 *
 * Between messages the stream is parked (gaz_rpc_park_each): it holds no
 * thread, and each message is applied on the poller that received it. A
 * replica's teardown wakes the stream that holds its token (token_stream),
 * which then ends. States: see gaz_handle_replicate.
 */
#include "broker/broker.h"

#include <stdlib.h>
#include <string.h>

#include "broker/metrics.h"
#include "broker/pipeline.h"
#include "broker/replica.h"
#include "common/clock.h"
#include "common/log.h"
#include "protocol/labels.h"
#include "protocol/validate.h"

struct repl_ctx {
	struct gaz_broker *b;
	struct gaz_rpc_call *call;
	struct gaz_resolution res;
	struct gaz_replica *r;
	bool header_sent;
	/* The last proposal on this stream matched the spool (status OK): the
	 * primary holds exactly its content and persists it when it rolls,
	 * so our copy of it may wait (gaz_persister_enqueue). Until then (a
	 * new stream, a mismatch), what a roll completes may exist only
	 * here. */
	bool spool_confirmed;
	struct gaz_status st;       /* why the stream failed */
	/* REPL_TOKEN: the stream's place in the token queue, and its first
	 * message, applied once the token is ours. */
	struct gaz_token_waiter waiter;
	Protocol__ReplicateRequest *first;
};

/* Sends a ReplicateResponse; the first one carries our header (as
 * Gazette's replica does, although its validator would not ask for it). */
static int respond(struct repl_ctx *c, int status, bool with_state)
{
	Protocol__ReplicateResponse resp = PROTOCOL__REPLICATE_RESPONSE__INIT;
	Protocol__Fragment frag = PROTOCOL__FRAGMENT__INIT;
	Protocol__SHA1Sum sum = PROTOCOL__SHA1_SUM__INIT;
	Protocol__Header *h = NULL;
	int rc;

	resp.status = status;
	if (!c->header_sent || status == PROTOCOL__STATUS__WRONG_ROUTE) {
		h = gaz_header_build(c->b, &c->res);
		resp.header = h;
		c->header_sent = true;
	}
	if (with_state) {
		gaz_fragment_to_proto(&c->r->spool.fragment, &frag, &sum);
		resp.fragment = &frag;
		resp.registers = c->r->registers;
	}
	rc = gaz_rpc_send(c->call, &resp.base);
	gaz_header_free(h);
	return rc;
}

int gaz_replica_apply_proposal(struct gaz_replica *r, const Protocol__Fragment *proposal,
			       const Protocol__LabelSet *registers, bool at_once, struct gaz_status *st)
{
	const Protocol__LabelSet empty = PROTOCOL__LABEL_SET__INIT;
	const Protocol__LabelSet *regs = registers ? registers : &empty;
	struct gaz_fragment p = {0}, next = {0};
	int status = PROTOCOL__STATUS__PROPOSAL_MISMATCH;
	int64_t end = r->spool.fragment.end;

	if (gaz_fragment_from_proto(&p, proposal, st))
		return -1;
	if (p.end > end + r->spool.delta || (p.end == end && p.begin == p.end)) {
		/* A proposal: the content is held across the route. A spool
		 * with content rolled past its end missed commits: [end, p.end)
		 * is held elsewhere only (a fresh, empty spool catching up is the
		 * common case and says nothing). */
		if (p.end > end && end > r->spool.fragment.begin)
			gaz_info("spool rolled forward past bytes this replica does not hold",
				 "journal=%s from=%lld to=%lld", r->journal, (long long)end, (long long)p.end);
		if (gaz_replica_roll(r, p.end, p.codec, at_once, false, st)) {
			gaz_fragment_release(&p);
			return -1;
		}
		if (p.end > end)
			gaz_labelset_copy(r->registers, regs);
	}
	pthread_mutex_lock(&r->mu);
	if (gaz_fragment_equal(&p, &r->spool.fragment) && gaz_labelset_equal(regs, r->registers)) {
		gaz_spool_rollback(&r->spool);
		status = PROTOCOL__STATUS__OK;
	} else if (r->spool.delta && gaz_spool_next(&r->spool, &next, st) == 0 &&
		   gaz_fragment_equal(&p, &next)) {
		gaz_metric_spool_commit(r->spool.delta);
		if (gaz_spool_commit(&r->spool, st) == 0) {
			gaz_labelset_copy(r->registers, regs);
			gaz_replica_publish_spool(r, st);
			status = PROTOCOL__STATUS__OK;
		}
	}
	pthread_mutex_unlock(&r->mu);
	gaz_fragment_release(&next);
	gaz_fragment_release(&p);
	if (status == PROTOCOL__STATUS__OK)
		gaz_notifier_broadcast(&r->notifier);
	return status;
}

static int apply_content(struct repl_ctx *c, const Protocol__ReplicateRequest *m,
			 struct gaz_status *st)
{
	struct gaz_replica *r = c->r;

	if (m->content_delta != r->spool.delta)
		return gaz_status_set(st, GAZ_EPROTO, "invalid ContentDelta (%lld; expected %lld)",
				      (long long)m->content_delta, (long long)r->spool.delta);
	if (gaz_spool_append(&r->spool, m->content.data, m->content.len, st) == 0) {
		gaz_replica_spool_ok(r);
		return 0;
	}
	/* Our disk failed (full, I/O): the stream fails with why, so the
	 * primary answers its append at once, and our spool rolls at its last
	 * commit, persisted and freed; the primary's next sync finds our
	 * spool rolled and rolls the route with it. */
	gaz_replica_spool_failed(r, st->msg, false);
	return GAZ_EIO;
}

/* Applies one message (consumed), on the handler or on the poller that
 * received it. Returns 0 to go on, else why the stream fails (c->st). */
static int apply_one(struct repl_ctx *c, Protocol__ReplicateRequest *m)
{
	int rc = 0;

	if (gaz_validate_replicate_request(m, &c->st)) {
		rc = GAZ_EINVAL;
	} else if (m->proposal) {
		int status = gaz_replica_apply_proposal(c->r, m->proposal, m->registers,
							!c->spool_confirmed, &c->st);
		c->spool_confirmed = status == PROTOCOL__STATUS__OK;
		if (status < 0)
			rc = GAZ_EIO;
		else if (m->acknowledge)
			rc = respond(c, status, status == PROTOCOL__STATUS__PROPOSAL_MISMATCH);
		else if (status != PROTOCOL__STATUS__OK)
			rc = gaz_status_set(&c->st, GAZ_EPROTO, "proposal not acknowledged: %s",
					    gaz_status_label(status));
	} else {
		rc = apply_content(c, m, &c->st);
	}
	protobuf_c_message_free_unpacked(&m->base, NULL);
	if (!rc && c->r->dead)
		rc = gaz_status_set(&c->st, GAZ_ESTOPPED, "replica is shutting down");
	return rc;
}

static int apply_cb(void *arg, ProtobufCMessage *m)
{
	return apply_one(arg, (Protocol__ReplicateRequest *)m);
}

/* repl_end (REPL_DONE) lets go of a stream that ended with `rc` (0: the
 * primary closed it): uncommitted bytes are rolled back, the token passes
 * on, the call is finished and `c` freed. */
static void repl_end(struct repl_ctx *c, int rc)
{
	struct gaz_rpc_call *call = c->call;
	bool failed = rc && rc != GAZ_EOF && rc != GAZ_ECANCELLED;
	const char *why = c->st.msg[0] ? c->st.msg : gaz_err_str(rc);

	if (failed)
		gaz_warn("replication stream failed", "journal=%s err=%s", c->res.journal, why);
	pthread_mutex_lock(&c->r->mu);
	gaz_spool_rollback(&c->r->spool);
	c->r->token_stream = NULL;
	pthread_mutex_unlock(&c->r->mu);
	gaz_replica_release(c->r);
	gaz_rpc_finish(call, NULL, failed ? GAZ_GRPC_UNKNOWN : GAZ_GRPC_OK, failed ? why : NULL);
	gaz_resolution_release(&c->res);
	free(c);
}

static void repl_resume(struct gaz_rpc_call *call, void *arg);

/* repl_wait (REPL_STREAM) parks the stream between messages: pollers apply
 * each message as it arrives (apply_cb), and repl_resume runs when the
 * stream ends, a message fails, or teardown wakes it. A local call cannot
 * park: it is applied here, on its runner's thread, to its end. */
static void repl_wait(struct repl_ctx *c)
{
	int rc;

	if (gaz_rpc_park_each(c->call, &protocol__replicate_request__descriptor, apply_cb, c,
			      repl_resume, c, GAZ_DEADLINE_NEVER, 0) == 0)
		return;
	rc = gaz_rpc_recv_each(c->call, &protocol__replicate_request__descriptor, apply_cb, c,
			       GAZ_DEADLINE_NEVER);
	repl_end(c, rc);
}

/* repl_resume takes the stream back from the pollers: what ended the park
 * ends the stream, except a wake of a replica still alive (a spurious one:
 * the stream parks again). */
static void repl_resume(struct gaz_rpc_call *call, void *arg)
{
	struct repl_ctx *c = arg;
	int rc = gaz_rpc_recv_each(call, &protocol__replicate_request__descriptor, apply_cb, c, 0);

	if (rc == GAZ_ETIMEDOUT) {
		rc = gaz_rpc_poll(call) == GAZ_ECANCELLED ? GAZ_ECANCELLED : 0;
		if (!rc && c->r->dead)
			rc = gaz_status_set(&c->st, GAZ_ESTOPPED, "replica is shutting down");
		if (!rc) {
			repl_wait(c);
			return;
		}
	}
	repl_end(c, rc);
}

/* repl_took ends REPL_TOKEN: with the token (rc 0) the stream applies its
 * first message and goes on to REPL_STREAM; without (cancelled, or the
 * replica torn down), it ends OK as the primary closing it would. The
 * token holder's call is on record (token_stream) so that teardown wakes
 * the parked stream to let go. */
static void repl_took(struct repl_ctx *c, int rc)
{
	Protocol__ReplicateRequest *first = c->first;

	c->first = NULL;
	if (rc) {
		protobuf_c_message_free_unpacked(&first->base, NULL);
		gaz_rpc_finish(c->call, NULL, GAZ_GRPC_OK, NULL);
		gaz_resolution_release(&c->res);
		free(c);
		return;
	}
	pthread_mutex_lock(&c->r->mu);
	c->r->token_stream = c->call;
	pthread_mutex_unlock(&c->r->mu);
	if (c->r->pipeline) {
		/* We led this journal until the route moved its primary: the
		 * pipeline of our time as primary holds the other peers' spools
		 * from the primary that now replicates to us. Token holder. */
		gaz_replica_close_pipeline(c->r);
	}
	if ((rc = apply_one(c, first)))
		repl_end(c, rc);
	else
		repl_wait(c);
}

/* repl_token_resume runs when a stream parked for the token wakes: granted
 * (release hands the token straight to the queue's head and wakes it),
 * cancelled, or the replica torn down; else it parks again. */
static void repl_token_resume(struct gaz_rpc_call *call, void *arg)
{
	struct repl_ctx *c = arg;
	int rc = gaz_replica_token_resumed(c->r, &c->waiter, call, repl_token_resume, c);

	if (rc != 1)
		repl_took(c, rc);
}

/* repl_start (REPL_TOKEN) takes the replica's append token for the
 * stream's life. While another holds it (the stream of the journal's
 * previous primary, or an append of our own time as primary), the stream
 * waits parked in the token queue, holding no thread; a local call waits
 * on its runner's thread. */
static void repl_start(struct repl_ctx *c, Protocol__ReplicateRequest *first)
{
	int rc;

	c->first = first;
	if (gaz_rpc_is_local(c->call)) {
		repl_took(c, gaz_replica_acquire(c->r, c->call));
		return;
	}
	rc = gaz_replica_token_park(c->r, &c->waiter, c->call, repl_token_resume, c);
	if (rc != 1)
		repl_took(c, rc);
}

/* The stream's states, in order: REPL_RESOLVE (the first message names the
 * journal and the route it was sent under), REPL_TOKEN (repl_start, parked
 * in the token queue while another holds it: repl_token_resume, then
 * repl_took), REPL_STREAM (parked; messages applied on the pollers,
 * repl_wait and repl_resume) and REPL_DONE (repl_end). A stream holds no
 * thread while it waits for the token or for the primary's next
 * message. */
void gaz_handle_replicate(struct gaz_rpc_call *call, void *arg)
{
	struct repl_ctx *c;
	Protocol__ReplicateRequest *m = NULL;
	struct gaz_status st = {0};
	int rc;

	if (gaz_rpc_recv_request(call, &protocol__replicate_request__descriptor, (ProtobufCMessage **)&m, "ReplicateRequest"))
		return;
	if (!m->header || !m->proposal || gaz_validate_replicate_request(m, &st)) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_INVALID_ARGUMENT,
			       st.msg[0] ? st.msg : "expected first ReplicateRequest to have Header");
		protobuf_c_message_free_unpacked(&m->base, NULL);
		return;
	}
	if (!(c = calloc(1, sizeof(*c)))) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_RESOURCE_EXHAUSTED, "out of memory");
		protobuf_c_message_free_unpacked(&m->base, NULL);
		return;
	}
	c->b = arg;
	c->call = call;
	struct gaz_resolve_opts o = {.proxy_header = m->header, .call = call};
	c->res.route.primary = -1;
	if ((rc = gaz_resolve(c->b, m->proposal->journal, &o, &c->res, &st))) {
		gaz_rpc_finish(call, NULL, gaz_err_grpc_code(rc), st.msg);
	} else if (c->res.status != PROTOCOL__STATUS__OK) {
		gaz_rpc_set_outcome(call, c->res.status);
		respond(c, c->res.status, false);
		gaz_rpc_finish(call, NULL, GAZ_GRPC_OK, NULL);
	} else if (!m->header->route || !gaz_proto_route_equivalent(m->header->route, &c->res.route)) {
		respond(c, PROTOCOL__STATUS__WRONG_ROUTE, false);
		gaz_rpc_finish(call, NULL, GAZ_GRPC_OK, NULL);
	} else {
		c->r = c->res.replica;
		repl_start(c, m); /* owns c and m from here */
		return;
	}
	protobuf_c_message_free_unpacked(&m->base, NULL);
	gaz_resolution_release(&c->res);
	free(c);
}
