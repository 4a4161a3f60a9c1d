/*
 * append_repl.c - the replicated part of an append on the primary, used
 * when the journal's route has more than one member (facts §2.1
 * START_PIPELINE, SEND_SYNC, RECV_SYNC, STREAM_CONTENT, READ_ACKS; §6.4).
 *
 * Every change to the primary's spool is first scattered to the peers
 * (proposal or content), then applied locally with the same rules the
 * peers apply (gaz_replica_apply_proposal), then, for acknowledged
 * proposals, one response per peer is gathered. Any failure closes the
 * pipeline: peers roll back what was not committed when their stream ends,
 * and the next append opens and synchronises a new pipeline.
 *
 * Appends are pipelined: an append proposes its commit with the token
 * held, lets go of the token, and only then waits (in proposal order) for
 * its acknowledgements, so the next append streams meanwhile. A failed
 * gather marks the pipeline failed; the next token holder rebuilds it.
 */
#include <stdlib.h>
#include <string.h>

#include "broker/append_int.h"
#include "broker/pipeline.h"
#include "broker/replica.h"
#include "common/log.h"
#include "fragment/fragment.h"
#include "protocol/labels.h"

void gaz__append_pipeline_fail(struct append_ctx *a, const char *why)
{
	struct gaz_replica *r = a->res.replica;

	gaz_warn("replication pipeline failed", "journal=%s err=%s", r->journal, why);
	if (!a->fail_why[0])
		snprintf(a->fail_why, sizeof(a->fail_why), "%s", why);
	gaz_replica_close_pipeline(r);
	pthread_mutex_lock(&r->mu);
	gaz_spool_rollback(&r->spool);
	pthread_mutex_unlock(&r->mu);
}

/* One sync round's verdict on the gathered responses. */
struct sync_verdict {
	int64_t roll_to;        /* a peer is ahead: roll to its end */
	int64_t read_through;   /* a peer has a newer route: resolve at it */
	bool failed;
	/* A peer answered with an empty fragment at our end: it rolled past
	 * our spool's content, which it may never have held. */
	bool rolled_onto_end;
};

static void judge(struct append_ctx *a, Protocol__ReplicateResponse *const *resp, size_t n,
		  struct sync_verdict *v)
{
	struct gaz_replica *r = a->res.replica;
	int64_t end = r->spool.fragment.end;

	for (size_t i = 0; i < n; i++) {
		const Protocol__ReplicateResponse *x = resp[i];
		if (!x || x->status == PROTOCOL__STATUS__OK)
			continue;
		if (x->status == PROTOCOL__STATUS__WRONG_ROUTE && x->header && x->header->etcd &&
		    x->header->etcd->revision > a->res.etcd.revision) {
			if (x->header->etcd->revision > v->read_through)
				v->read_through = x->header->etcd->revision;
		} else if (x->status == PROTOCOL__STATUS__PROPOSAL_MISMATCH && x->fragment &&
			   x->fragment->end > end) {
			if (x->fragment->end > v->roll_to) {
				v->roll_to = x->fragment->end;
				gaz_labelset_copy(r->registers, x->registers);
			}
		} else if (x->status == PROTOCOL__STATUS__PROPOSAL_MISMATCH && x->fragment &&
			   x->fragment->end == end && x->fragment->begin == x->fragment->end) {
			if (end > v->roll_to)
				v->roll_to = end;
			v->rolled_onto_end = true;
		} else {
			v->failed = true;
		}
	}
}

/* Sends `proposal` (acknowledged) and applies it locally; *ticket is its
 * place in the order of gathers. On failure nothing is left to gather
 * (the pipeline is marked failed). */
static int propose(struct append_ctx *a, const Protocol__Fragment *proposal,
		   const Protocol__LabelSet *regs, uint64_t *ticket, struct gaz_status *st)
{
	struct gaz_replica *r = a->res.replica;
	int rc = gaz_pipeline_propose(r->pipeline, proposal, regs, ticket, st);

	if (!rc && gaz_replica_apply_proposal(r, proposal, regs, true, st) != PROTOCOL__STATUS__OK) {
		gaz_pipeline_abandon(r->pipeline); /* the ticket will never be gathered */
		rc = gaz_status_set(st, GAZ_EIO, "local spool refused the proposal");
	}
	return rc;
}

/* Gathers the peers' answers to the proposal of `ticket` on `p` into *v:
 * for a commit, any answer but OK fails it; for a sync, judge() reads
 * them, also those that came when another peer failed. Returns 0 or the
 * gather's error. */
static int gather(struct append_ctx *a, struct gaz_pipeline *p, uint64_t ticket, bool commit,
		  struct sync_verdict *v, struct gaz_status *st)
{
	size_t n = gaz_pipeline_peers(p);
	Protocol__ReplicateResponse **resp = calloc(n + 1, sizeof(*resp));
	int rc;

	if (!resp) {
		gaz_pipeline_abandon(p);
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	}
	rc = gaz_pipeline_gather(p, ticket, resp, st);
	for (size_t i = 0; !rc && commit && i < n; i++)
		v->failed |= resp[i]->status != PROTOCOL__STATUS__OK;
	if (!commit)
		judge(a, resp, n, v);
	for (size_t i = 0; i < n; i++)
		if (resp[i])
			protobuf_c_message_free_unpacked(&resp[i]->base, NULL);
	free(resp);
	return rc;
}

/* The proposal a sync sends: the spool's fragment, or an empty one at
 * `to` with the spec's codec when rolling. */
static void sync_proposal(struct append_ctx *a, int64_t to, struct gaz_fragment *out)
{
	struct gaz_replica *r = a->res.replica;

	gaz_fragment_copy(out, &r->spool.fragment, NULL);
	if (to >= 0) {
		out->begin = out->end = to;
		memset(out->sum, 0, sizeof(out->sum));
		out->codec = a->res.spec->fragment->compression_codec;
	}
}

/* After a failed sync in which a peer rolled forward onto our end, the
 * spool's content may exist here only: that peer's history now runs past
 * it, and it gave up what it did not hold (a primary killed mid-commit
 * leaves one replica ahead of another, and the one ahead becomes
 * primary). Rolling the spool now hands that content to the persister at
 * once; waiting for a sync that succeeds would lose it to this broker's
 * end, leaving a hole no reader passes. Gazette's primary waits. */
static void persist_sole_copy(struct append_ctx *a)
{
	struct gaz_replica *r = a->res.replica;
	struct gaz_status st = {0};
	int64_t begin, end;
	int codec;

	pthread_mutex_lock(&r->mu);
	begin = r->spool.fragment.begin;
	end = r->spool.fragment.end;
	codec = r->spool.fragment.codec;
	pthread_mutex_unlock(&r->mu);
	if (begin == end)
		return;
	gaz_info("a peer rolled forward past this spool's content and the sync failed; "
		 "rolling the spool to persist the only copy",
		 "journal=%s begin=%lld end=%lld", r->journal, (long long)begin, (long long)end);
	if (gaz_replica_roll(r, end, codec, true, true, &st))
		gaz_error("rolling the spool to persist it failed", "journal=%s err=%s", r->journal,
			  st.msg);
}

int gaz__append_sync(struct append_ctx *a, int64_t roll_to)
{
	struct gaz_replica *r = a->res.replica;
	struct gaz_status st = {0};

	for (int round = 0; round < 8; round++) {
		struct sync_verdict v = {0};
		struct gaz_fragment f = {0};
		Protocol__Fragment pf = PROTOCOL__FRAGMENT__INIT;
		Protocol__SHA1Sum sum = PROTOCOL__SHA1_SUM__INIT;
		int rc;
		sync_proposal(a, roll_to, &f);
		gaz_fragment_to_proto(&f, &pf, &sum);
		uint64_t ticket = 0;
		rc = propose(a, &pf, r->registers, &ticket, &st);
		if (!rc)
			rc = gather(a, r->pipeline, ticket, false, &v, &st);
		gaz_fragment_release(&f);
		if (rc || v.failed) {
			gaz__append_pipeline_fail(a, rc ? st.msg : "a peer refused the sync");
			if (v.rolled_onto_end)
				persist_sole_copy(a);
			return -1;
		}
		if (v.roll_to) {
			/* Rare (a fresh primary, a peer that committed what we did
			 * not): the bytes below roll_to are held by that peer only,
			 * which must persist them (facts §2.1 RECV_SYNC). */
			gaz_info("a peer is ahead; rolling the spool forward to its end", "journal=%s from=%lld to=%lld",
				 r->journal, (long long)r->spool.fragment.end, (long long)v.roll_to);
			roll_to = v.roll_to;
			continue;
		}
		if (v.read_through) {
			a->read_through_rev = v.read_through;
			gaz_replica_close_pipeline(r);
			return 1;
		}
		return 0;
	}
	gaz__append_pipeline_fail(a, "sync did not converge");
	return -1;
}

int gaz__append_start_pipeline(struct append_ctx *a)
{
	struct gaz_replica *r = a->res.replica;
	struct gaz_status st = {0};

	if (r->pipeline && gaz_pipeline_matches(r->pipeline, &a->res.route) &&
	    !gaz_pipeline_failed(r->pipeline))
		return 0;
	gaz_replica_close_pipeline(r);
	if (a->res.route.n < 2)
		return 0;
	if (gaz_pipeline_open(a->b, &a->res, &r->pipeline, &st)) {
		gaz_warn("opening the replication pipeline failed", "journal=%s err=%s", r->journal,
			 st.msg);
		return -1;
	}
	atomic_store(&r->pipelined, true);
	/* Maintenance has not seen this broker made primary yet: have it look
	 * at the assignments again, so that if the primacy is already gone it
	 * closes this pipeline rather than wait for the next keyspace change. */
	if (!atomic_load(&r->primary))
		gaz_maintain_look(a->b, r->journal);
	return gaz__append_sync(a, -1);
}

int gaz__append_replicate_content(struct append_ctx *a, const uint8_t *data, size_t len,
				  int64_t delta)
{
	struct gaz_status st = {0};

	if (gaz_pipeline_content(a->res.replica->pipeline, data, len, delta, &st)) {
		gaz__append_pipeline_fail(a, st.msg);
		return GAZ_EUNAVAIL;
	}
	return 0;
}

int gaz__append_replicate_commit_start(struct append_ctx *a, struct gaz_commit_pending *pc)
{
	struct gaz_status st = {0};
	int rc = gaz__append_replicate_commit_propose(a, pc, &st);

	if (rc)
		gaz__append_pipeline_fail(a, st.msg[0] ? st.msg : gaz_err_str(rc));
	return rc;
}

int gaz__append_replicate_commit_propose(struct append_ctx *a, struct gaz_commit_pending *pc,
					 struct gaz_status *st)
{
	struct gaz_replica *r = a->res.replica;
	Protocol__LabelSet *regs = gaz_labelset_new();
	struct gaz_fragment next = {0};
	Protocol__Fragment pf = PROTOCOL__FRAGMENT__INIT;
	Protocol__SHA1Sum sum = PROTOCOL__SHA1_SUM__INIT;
	int rc = regs ? 0 : gaz_status_set(st, GAZ_ENOMEM, "out of memory");

	*pc = (struct gaz_commit_pending){.p = r->pipeline};
	/* The registers after this append: only non-empty appends change them. */
	if (!rc && r->spool.delta)
		rc = gaz_registers_update(regs, r->registers, a->req->union_registers,
					  a->req->subtract_registers);
	else if (!rc)
		rc = gaz_labelset_copy(regs, r->registers);
	if (!rc)
		rc = gaz_spool_next(&r->spool, &next, st);
	if (!rc) {
		gaz_fragment_to_proto(&next, &pf, &sum);
		rc = propose(a, &pf, regs, &pc->ticket, st);
	}
	gaz_fragment_release(&next);
	if (rc) {
		gaz_labelset_free(regs);
		return rc;
	}
	pc->regs = regs;
	return 0;
}

int gaz__append_replicate_commit_finish(struct append_ctx *a, struct gaz_commit_pending *pc)
{
	struct gaz_status st = {0};
	struct sync_verdict v = {0};
	int rc = gather(a, pc->p, pc->ticket, true, &v, &st);

	if (!rc && v.failed)
		rc = gaz_status_set(&st, GAZ_EPROTO, "a peer did not acknowledge the commit");
	if (rc && a->token)
		gaz__append_pipeline_fail(a, st.msg[0] ? st.msg : gaz_err_str(rc));
	else if (rc) { /* the next token holder rebuilds the failed pipeline */
		gaz_warn("replication pipeline failed", "journal=%s err=%s", a->res.replica->journal,
			 st.msg);
		if (!a->fail_why[0])
			snprintf(a->fail_why, sizeof(a->fail_why), "%s", st.msg);
	}
	else
		gaz_labelset_copy(a->registers, pc->regs);
	gaz_labelset_free(pc->regs);
	pc->regs = NULL;
	return rc;
}
