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

/* Applies messages until the stream ends. Returns 0 on a clean end. The
 * messages after the first are applied by the poller that receives each
 * (gaz_rpc_recv_each): no thread switch per proposal. This thread wakes
 * now and then to let go of a replica being torn down (unassigned, or
 * this broker exiting): the primary's pipeline then fails and
 * re-resolves. */
static int stream(struct repl_ctx *c, Protocol__ReplicateRequest *first)
{
	int rc = apply_one(c, first);

	while (!rc) {
		rc = gaz_rpc_recv_each(c->call, &protocol__replicate_request__descriptor, apply_cb, c,
				       gaz_deadline_in(250));
		if (rc == GAZ_ETIMEDOUT)
			rc = c->r->dead ? gaz_status_set(&c->st, GAZ_ESTOPPED, "replica is shutting down")
					: 0;
	}
	if (rc == GAZ_EOF)
		return 0;
	if (rc != GAZ_ECANCELLED)
		gaz_warn("replication stream failed", "journal=%s err=%s", c->res.journal,
			 c->st.msg[0] ? c->st.msg : gaz_err_str(rc));
	return rc;
}

static int serve(struct repl_ctx *c, Protocol__ReplicateRequest *first)
{
	int rc;

	if (gaz_replica_acquire(c->r, c->call)) {
		protobuf_c_message_free_unpacked(&first->base, NULL);
		return GAZ_ECANCELLED;
	}
	if (c->r->pipeline) {
		/* We led this journal until the route moved its primary: the
		 * pipeline of our time as primary holds the other peers' spools
		 * from the primary that now replicates to us. Token holder. */
		gaz_replica_close_pipeline(c->r);
	}
	rc = stream(c, first);
	pthread_mutex_lock(&c->r->mu);
	gaz_spool_rollback(&c->r->spool);
	pthread_mutex_unlock(&c->r->mu);
	gaz_replica_release(c->r);
	return rc;
}

void gaz_handle_replicate(struct gaz_rpc_call *call, void *arg)
{
	struct repl_ctx c = {.b = arg, .call = call};
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
	struct gaz_resolve_opts o = {.proxy_header = m->header, .call = call};
	c.res.route.primary = -1;
	if ((rc = gaz_resolve(c.b, m->proposal->journal, &o, &c.res, &st))) {
		gaz_rpc_finish(call, NULL, gaz_err_grpc_code(rc), st.msg);
		protobuf_c_message_free_unpacked(&m->base, NULL);
	} else if (c.res.status != PROTOCOL__STATUS__OK) {
		gaz_rpc_set_outcome(call, c.res.status);
		respond(&c, c.res.status, false);
		gaz_rpc_finish(call, NULL, GAZ_GRPC_OK, NULL);
		protobuf_c_message_free_unpacked(&m->base, NULL);
	} else if (!m->header->route || !gaz_proto_route_equivalent(m->header->route, &c.res.route)) {
		respond(&c, PROTOCOL__STATUS__WRONG_ROUTE, false);
		gaz_rpc_finish(call, NULL, GAZ_GRPC_OK, NULL);
		protobuf_c_message_free_unpacked(&m->base, NULL);
	} else {
		c.r = c.res.replica;
		rc = serve(&c, m);
		if (rc && rc != GAZ_ECANCELLED)
			gaz_rpc_finish(call, NULL, GAZ_GRPC_UNKNOWN,
				       c.st.msg[0] ? c.st.msg : gaz_err_str(rc));
		else
			gaz_rpc_finish(call, NULL, GAZ_GRPC_OK, NULL);
	}
	gaz_resolution_release(&c.res);
}
