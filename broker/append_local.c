/*
 * append_local.c - an append on the primary: VALIDATE_PRECONDITIONS and
 * STREAM_CONTENT of Gazette's append FSM (facts §2.1, §2.1.1, §6.3), with
 * the replica's append token held. The client's bytes go to the spool as
 * they arrive and become visible only at commit; anything else rolls back.
 */
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/append_int.h"
#include "broker/metrics.h"
#include "broker/pipeline.h"
#include "broker/replica.h"
#include "broker/stores.h"
#include "common/clock.h"
#include "common/log.h"
#include "keyspace/keyspace.h"
#include "protocol/labels.h"
#include "protocol/validate.h"

#define SUSPEND(x) PROTOCOL__APPEND_REQUEST__SUSPEND__SUSPEND_##x
#define LEVEL(x) PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__##x
/* How long an append waits for its store's first health check (Gazette
 * bounds a check at one minute). */
#define STORE_HEALTH_WAIT_MS 60000
#define LEASE_LOST "broker's etcd lease expired; the journal may have moved"

/* maybeRoll (§6.3): the offset to roll the spool to, or -1 to keep it.
 * An empty spool rolls only to move elsewhere or to take the spec's
 * codec: rolled onto its own end it would stay as it is. */
static int64_t roll_target(const struct gaz_replica *r, const Protocol__JournalSpec__Fragment *fs,
			   int64_t roll_to)
{
	const struct gaz_fragment *f = &r->spool.fragment;
	int64_t len = f->end - f->begin, interval_s;
	bool moves = roll_to && roll_to != f->begin;

	if (len == 0)
		return moves || f->codec != (int)fs->compression_codec ? (roll_to ? roll_to : f->end) : -1;
	if (len > fs->length || moves)
		return roll_to ? roll_to : f->end;
	interval_s = fs->flush_interval ? fs->flush_interval->seconds : 0;
	if (interval_s > 0 && r->spool.first_append_ns) {
		int64_t now_s = gaz_wall_ns() / GAZ_NS_PER_S;
		if (r->spool.first_append_ns / GAZ_NS_PER_S / interval_s != now_s / interval_s)
			return f->end;
	}
	return -1;
}

int gaz__append_roll(struct append_ctx *a, int64_t to)
{
	struct gaz_replica *r = a->res.replica;
	const Protocol__JournalSpec__Fragment *fs = a->res.spec->fragment;
	struct gaz_status st = {0};
	int rc;

	if (to == r->spool.fragment.end && r->spool.fragment.begin == to &&
	    r->spool.fragment.codec == (int)fs->compression_codec)
		return 0;
	if (r->pipeline) /* peers roll with us */
		return gaz__append_sync(a, to) == 0 ? 0 : GAZ_EUNAVAIL;
	/* No pipeline: a route of one, so no peer holds what completes. */
	if ((rc = gaz_replica_roll(r, to, fs->compression_codec, true, true, &st)))
		gaz_error("rolling the spool failed", "journal=%s err=%s", r->journal, st.msg);
	return rc;
}

static int maybe_roll(struct append_ctx *a, int64_t roll_to)
{
	int64_t to = roll_target(a->res.replica, a->res.spec->fragment, roll_to);

	return to < 0 ? 0 : gaz__append_roll(a, to);
}

/* IF_FLUSHED / NOW suspension (§2.1 step 8). Returns 1 to resolve again,
 * 0 when answered, -1 to continue. */
static int suspend_request(struct append_ctx *a, int64_t index_min, int64_t index_max,
			   int64_t last_mod)
{
	struct gaz_replica *r = a->res.replica;
	const Protocol__JournalSpec *spec = a->res.spec;
	int level = spec->suspend ? spec->suspend->level : LEVEL(NONE);
	int64_t end = r->spool.fragment.end, flush_s = 24 * 3600;
	bool clean;

	if (spec->fragment->flush_interval && spec->fragment->flush_interval->seconds)
		flush_s = spec->fragment->flush_interval->seconds;
	clean = last_mod && last_mod <= gaz_wall_ns() / GAZ_NS_PER_S - flush_s;
	if (level != LEVEL(FULL) && index_min == index_max)
		return gaz__append_update_suspend(a, LEVEL(FULL), end) ? 0 : 1;
	if (level == LEVEL(NONE) && (clean || a->req->suspend == SUSPEND(NOW))) {
		maybe_roll(a, end);
		return gaz__append_update_suspend(a, LEVEL(PARTIAL), end) ? 0 : 1;
	}
	if (level == LEVEL(PARTIAL)) {
		gaz__append_respond_status(a, PROTOCOL__STATUS__SUSPENDED);
		return 0;
	}
	return -1;
}

static int preconditions(struct append_ctx *a, int64_t *roll_to);

/* Rolls the spool forward to `to`, then checks the preconditions again.
 * A roll that fails answers the append, so the check cannot loop. */
static int roll_and_recheck(struct append_ctx *a, int64_t to, int64_t *roll_to)
{
	if (maybe_roll(a, to)) {
		gaz__append_respond_error(a, GAZ_GRPC_UNAVAILABLE, "rolling the spool failed");
		return 0;
	}
	return preconditions(a, roll_to);
}

/* Gazette gates appends on the health of the journal's first store
 * (§2.1, §5.7): its periodic checks' last result, waiting for the first.
 * Answers FRAGMENT_STORE_UNHEALTHY and returns true when it is unhealthy. */
static bool store_unhealthy(struct append_ctx *a)
{
	const Protocol__JournalSpec *spec = a->res.spec;
	struct gaz_status st = {0};

	if (!spec->fragment || !spec->fragment->n_stores ||
	    !gaz_stores_health(a->b, spec->fragment->stores[0], STORE_HEALTH_WAIT_MS, &st))
		return false;
	snprintf(a->store_error, sizeof(a->store_error), "fragment store %.480s unhealthy: %s",
		 spec->fragment->stores[0], st.msg);
	gaz__append_respond_status(a, PROTOCOL__STATUS__FRAGMENT_STORE_UNHEALTHY);
	return true;
}

/* VALIDATE_PRECONDITIONS. Returns 1 to resolve again, 0 when answered, -1
 * to stream content. *roll_to receives the offset to roll to (0 = none). */
static int preconditions(struct append_ctx *a, int64_t *roll_to)
{
	struct gaz_replica *r = a->res.replica;
	const Protocol__AppendRequest *q = a->req;
	const Protocol__JournalSpec *spec = a->res.spec;
	int64_t imin, imax, last_mod, end, max_off;
	int level = spec->suspend ? spec->suspend->level : LEVEL(NONE);
	int rc;

	if ((rc = gaz_replica_wait_ready(r, a->call)) == GAZ_ESTOPPED) {
		/* The replica was torn down under us (its journal handed off
		 * or released while its first listing was pending): nothing was
		 * written, and another broker takes the journal; UNAVAILABLE is
		 * what clients retry (a rolling upgrade saw this as a failed
		 * append when it was answered CANCELLED). */
		gaz__append_respond_error(a, GAZ_GRPC_UNAVAILABLE,
					  "journal's replica stopped while waiting for its fragment index");
		return 0;
	} else if (rc) {
		gaz__append_respond_error(a, GAZ_GRPC_CANCELLED, "cancelled waiting for the fragment index");
		return 0;
	}
	if (store_unhealthy(a))
		return 0;
	pthread_mutex_lock(&r->mu);
	gaz_coverset_summary(&r->index, &imin, &imax, &last_mod);
	gaz_labelset_copy(a->registers, r->registers);
	snprintf(a->store_error, sizeof(a->store_error), "%s", r->store_error);
	pthread_mutex_unlock(&r->mu);
	if (a->store_error[0] && spec->fragment->n_stores) {
		/* Gazette gates appends on the first store's health (§2.1). */
		char why[sizeof(a->store_error)];
		snprintf(why, sizeof(why), "%s", a->store_error);
		snprintf(a->store_error, sizeof(a->store_error), "fragment store %s unhealthy: %.200s",
			 spec->fragment->stores[0], why);
		gaz__append_respond_status(a, PROTOCOL__STATUS__FRAGMENT_STORE_UNHEALTHY);
		return 0;
	}
	end = r->spool.fragment.end;
	max_off = end > imax ? end : imax;
	*roll_to = 0;
	if (q->check_registers && a->registers->n_labels &&
	    !gaz_labelset_matches(q->check_registers, a->registers)) {
		gaz__append_respond_status(a, PROTOCOL__STATUS__REGISTER_MISMATCH);
		return 0;
	}
	if (spec->suspend && end < spec->suspend->offset)
		return roll_and_recheck(a, spec->suspend->offset, roll_to);
	if (end != max_off && q->offset == 0 && gaz_journal_may_write(spec->flags)) {
		gaz__append_respond_status(a, PROTOCOL__STATUS__INDEX_HAS_GREATER_OFFSET);
		return 0;
	}
	if (q->offset != 0 && q->offset != max_off) {
		gaz_debug("wrong append offset", "journal=%s offset=%lld write_head=%lld spool_end=%lld index_end=%lld",
			 r->journal, (long long)q->offset, (long long)max_off, (long long)end, (long long)imax);
		gaz__append_respond_status(a, PROTOCOL__STATUS__WRONG_APPEND_OFFSET);
		return 0;
	}
	if (q->offset != 0 && end != max_off)
		return roll_and_recheck(a, max_off, roll_to);
	switch (q->suspend) {
	case SUSPEND(RESUME):
		if (level != LEVEL(NONE))
			return gaz__append_update_suspend(a, LEVEL(NONE), end) ? 0 : 1;
		break;
	case SUSPEND(NO_RESUME):
		if (level != LEVEL(NONE)) {
			gaz__append_respond_status(a, PROTOCOL__STATUS__SUSPENDED);
			return 0;
		}
		break;
	case SUSPEND(IF_FLUSHED):
	case SUSPEND(NOW): {
		int s = suspend_request(a, imin, imax, last_mod);
		if (s >= 0)
			return s;
		break;
	}
	default:
		break;
	}
	if (r->spool.fragment.begin == imin)
		*roll_to = end;
	return -1;
}

static int64_t rate_deadline(const struct append_rate *rt)
{
	if (rt->min_rate <= 0)
		return GAZ_DEADLINE_NEVER;
	return rt->at_ns + rt->spent * GAZ_NS_PER_S / rt->min_rate;
}

static void rate_credit(struct append_rate *rt, int64_t bytes)
{
	int64_t now = gaz_mono_ns();

	if (rt->min_rate > 0) {
		rt->spent -= (now - rt->at_ns) * rt->min_rate / GAZ_NS_PER_S;
		rt->spent += bytes;
		if (rt->spent > rt->min_rate)
			rt->spent = rt->min_rate;
	}
	rt->at_ns = now;
}

/* The append rate limit in bytes/s (0 = none): the journal's
 * max_append_rate, lowered by --broker.max-append-rate when that is
 * smaller; a journal without a limit stays unlimited (facts §2.1.1). */
static int64_t max_rate(const struct append_ctx *a)
{
	int64_t spec = a->res.spec->max_append_rate, flag = a->b->cfg.max_append_rate;

	return spec && flag && flag < spec ? flag : spec;
}

/* rate_take refills the replica's balance at `rate` bytes/s (capped at
 * ten seconds' worth) and takes `len` from it if it covers them. */
static bool rate_take(struct gaz_replica *r, int64_t rate, int64_t len)
{
	int64_t now = gaz_mono_ns();
	bool ok;

	pthread_mutex_lock(&r->mu);
	r->fc_balance += (now - r->last_pulse_ns) * rate / GAZ_NS_PER_S;
	r->last_pulse_ns = now;
	if (r->fc_balance > rate * 10)
		r->fc_balance = rate * 10;
	if ((ok = r->fc_balance >= len))
		r->fc_balance -= len;
	pthread_mutex_unlock(&r->mu);
	return ok;
}

/* Max-rate flow control: waits until the replica's balance covers `len`.
 * Returns true if the chunk was delayed. */
static bool rate_debit(struct append_ctx *a, struct append_rate *rt, int64_t len)
{
	bool delayed = false;

	if (rt->max_rate <= 0)
		return false;
	while (!rate_take(a->res.replica, rt->max_rate, len)) {
		delayed = true;
		if (gaz_rpc_wait(a->call, gaz_deadline_in(50)) == GAZ_ECANCELLED)
			break;
	}
	return delayed;
}

static void roll_back(struct append_ctx *a, const char *why);

/* A peer failed (the pipeline's error in a->fail_why): what the append
 * answers. */
static const char *peer_failure(struct append_ctx *a, char *buf, size_t cap, bool may_have_committed)
{
	snprintf(buf, cap, "replication to a peer failed%s%s%s",
		 may_have_committed ? "; the append may have committed" : "",
		 a->fail_why[0] ? ": " : "", a->fail_why);
	return buf;
}

/* spool_failure notes in `a` that its spool write failed with `st`:
 * the text every answer of its transaction gives. */
static void spool_failure(struct append_ctx *a, const struct gaz_status *st)
{
	snprintf(a->fail_why, sizeof(a->fail_why), "append to \"%.256s\" failed: %.512s",
		 a->res.replica->journal, st->msg);
	a->spool_failed = true;
}

/* Writes content to the spool. A write that fails (disk full, I/O error)
 * is not retried while the client waits, as Gazette's broker does (every
 * 5 s, forever): the transaction rolls back, the spool rolls at its last
 * commit so that what it holds is persisted and its disk space freed
 * (gaz_replica_spool_failed), and the append is answered UNAVAILABLE at
 * once, which Gazette's clients retry (docs/decisions.md). A leader
 * committing a later group (its own call answered) fails the group with
 * the same error. Returns 0 or the spool's error. */
static int spool_write(struct append_ctx *a, const uint8_t *data, size_t len)
{
	struct gaz_replica *r = a->res.replica;
	struct gaz_status st = {0};
	int rc = gaz_spool_append(&r->spool, data, len, &st);

	if (!rc) {
		gaz_replica_spool_ok(r);
		return 0;
	}
	spool_failure(a, &st);
	roll_back(a, a->fail_why);
	gaz_replica_spool_failed(r, st.msg, a->res.route.n == 1);
	if (!a->finished)
		gaz__append_respond_error(a, GAZ_GRPC_UNAVAILABLE, a->fail_why);
	return rc;
}

/* One receive's outcome of STREAM_CONTENT (gaz__append_stream_chunk,
 * before the roll-back): 0 for the next chunk, 1 to commit, or an error
 * with the append answered (or a cancelled call). */
static int stream_chunk(struct append_ctx *a, int rc, Protocol__AppendRequest *m)
{
	struct gaz_replica *r = a->res.replica;
	const Protocol__JournalSpec *spec = a->res.spec;
	struct gaz_status st = {0};

	if (rc == GAZ_EOF) {
		if (a->intent)
			return 1;
		gaz__append_respond_error(a, GAZ_GRPC_UNKNOWN, "unexpected EOF");
		return GAZ_EPROTO;
	}
	if (rc == GAZ_ETIMEDOUT) {
		gaz__append_respond_error(a, GAZ_GRPC_UNKNOWN,
					  "client stream didn't sustain the minimum append data rate");
		return rc;
	}
	if (rc == GAZ_EPROTO) {
		gaz__append_respond_error(a, GAZ_GRPC_INVALID_ARGUMENT, "malformed AppendRequest");
		return rc;
	}
	if (rc) {
		a->finished = true; /* cancelled: Gazette returns no response */
		gaz_rpc_finish(a->call, NULL, GAZ_GRPC_CANCELLED, "append cancelled");
		return rc;
	}
	if (a->intent) {
		gaz__append_respond_error(a, GAZ_GRPC_UNKNOWN, "expected EOF after empty Content chunk");
		rc = GAZ_EPROTO;
	} else if (m->journal[0] || gaz_validate_append_request(m, &st)) {
		gaz__append_respond_error(a, GAZ_GRPC_INVALID_ARGUMENT,
					  st.msg[0] ? st.msg : "unexpected Journal in a content chunk");
		rc = GAZ_EINVAL;
	} else if (m->content.len == 0) {
		a->intent = true;
	} else if (!gaz_journal_may_write(spec->flags) || a->req->suspend == SUSPEND(IF_FLUSHED) ||
		   a->req->suspend == SUSPEND(NOW) || a->req->suspend == SUSPEND(KEEP)) {
		gaz__append_respond_status(a, PROTOCOL__STATUS__NOT_ALLOWED);
		rc = GAZ_EPERM;
	} else {
		int64_t delta = r->spool.delta;
		a->delayed_chunks += rate_debit(a, &a->rate, (int64_t)m->content.len);
		if (r->pipeline &&
		    gaz__append_replicate_content(a, m->content.data, m->content.len, delta)) {
			char why[1100];
			gaz__append_respond_error(a, GAZ_GRPC_UNAVAILABLE,
						  peer_failure(a, why, sizeof(why), false));
			rc = GAZ_EUNAVAIL;
		} else {
			rc = spool_write(a, m->content.data, m->content.len);
			EVP_DigestUpdate(a->sha, m->content.data, m->content.len);
			a->total_chunks++;
			rate_credit(&a->rate, (int64_t)m->content.len);
		}
	}
	protobuf_c_message_free_unpacked(&m->base, NULL);
	return rc;
}

/* A commit needs the broker's member lease: without it the journal may
 * already have another primary. Answers the append when it is lost. */
static bool commit_lease(struct append_ctx *a)
{
	if (gaz_broker_lease_valid(a->b))
		return true;
	gaz_warn("append not committed: member lease expired", "journal=%s", a->res.replica->journal);
	a->lease_lost = true;
	if (!a->finished)
		gaz__append_respond_error(a, GAZ_GRPC_UNAVAILABLE, LEASE_LOST);
	return false;
}

/* commit_start commits the spool's delta here (registers updated, the
 * commit's range noted in `a`). For a replicated journal the proposal is
 * also out to the peers and pc->p is set: commit_finish gathers their
 * acknowledgements. Otherwise the commit is complete and pc->p is NULL.
 * Returns 0 or an error (the append answered when the lease is lost;
 * the pipeline closed when it failed). */
static int commit_start(struct append_ctx *a, EVP_MD_CTX *sha, struct gaz_commit_pending *pc)
{
	struct gaz_replica *r = a->res.replica;
	struct gaz_status st = {0};
	unsigned int n = 0;
	int rc = 0;

	*pc = (struct gaz_commit_pending){0};
	if (!commit_lease(a))
		return GAZ_EUNAVAIL;
	a->commit_begin = r->spool.fragment.end;
	a->commit_end = r->spool.fragment.end + r->spool.delta;
	a->commit_codec = r->spool.fragment.codec;
	if (sha)
		EVP_DigestFinal_ex(sha, a->commit_sum, &n);
	if (r->pipeline) {
		/* Peers and our spool commit the same proposal. An empty one
		 * (a pulse) is no commit to count (Gazette's spool neither). */
		if (r->spool.delta)
			gaz_metric_spool_commit(r->spool.delta);
		return gaz__append_replicate_commit_start(a, pc);
	}
	pthread_mutex_lock(&r->mu);
	if (r->spool.delta) {
		gaz_metric_spool_commit(r->spool.delta);
		rc = gaz_spool_commit(&r->spool, &st);
		if (!rc)
			rc = gaz_registers_update(r->registers, r->registers, a->req->union_registers,
						  a->req->subtract_registers);
		if (!rc)
			rc = gaz_replica_publish_spool(r, &st);
	}
	if (!rc)
		gaz_labelset_copy(a->registers, r->registers);
	pthread_mutex_unlock(&r->mu);
	gaz_notifier_broadcast(&r->notifier);
	if (rc)
		gaz_error("commit failed", "journal=%s err=%s", r->journal, st.msg);
	return rc;
}

/* commit_finish completes a commit_start: the peers' acknowledgements, for
 * a replicated one. Returns 0 or an error (see
 * gaz__append_replicate_commit_finish). */
static int commit_finish(struct append_ctx *a, struct gaz_commit_pending *pc)
{
	int rc;

	if (!pc->p)
		return 0;
	rc = gaz__append_replicate_commit_finish(a, pc);
	gaz_notifier_broadcast(&a->res.replica->notifier);
	return rc;
}

/* Commits the spool's delta everywhere and publishes it; registers
 * updated. A group of several keeps the token until the peers acknowledge:
 * appends arriving meanwhile join the next group instead of starting a
 * second, smaller transaction beside it (fewer proposals,
 * acknowledgements and wake-ups per append). A lone append lets go of it
 * first and pipelines, as Gazette's do (docs/decisions.md, "Group
 * commit"). */
static int commit(struct append_ctx *a, EVP_MD_CTX *sha)
{
	struct gaz_commit_pending pc;
	bool release = !a->batch || a->group_n < 2;
	int rc = commit_start(a, sha, &pc);

	if (rc || !pc.p)
		return rc;
	if (release) {
		gaz_pipeline_ref(pc.p);
		gaz_replica_release(a->token);
		a->token = NULL;
	}
	rc = commit_finish(a, &pc);
	if (release)
		gaz_pipeline_unref(pc.p);
	return rc;
}

/* ---- group commit (append_batch.c queues the members) ------------------- */

#define BATCH_MAX_MEMBERS 256
#define BATCH_MAX_BYTES (8 << 20)
#define BATCH_SLICE_BYTES (1 << 20) /* content per spool write and Replicate message */
#define BATCH_JOIN_BYTES (64 << 10) /* members up to this size are joined into slices */

static struct gaz_batch_entry *entry_of(struct gaz_batch_link *l)
{
	return (struct gaz_batch_entry *)l; /* the link is the entry's first member */
}

/* Writes one slice of content: to the peers, then the spool. */
static int write_slice(struct append_ctx *a, const uint8_t *data, size_t len, struct append_rate *rt)
{
	struct gaz_replica *r = a->res.replica;
	int rc = 0;

	a->delayed_chunks += rate_debit(a, rt, (int64_t)len);
	if (r->pipeline)
		rc = gaz__append_replicate_content(a, data, len, r->spool.delta);
	return rc ? rc : spool_write(a, data, len);
}

/* Writes the members' content after the spool's delta, in order, noting
 * each member's range (its SHA-1 was taken before it queued). Small
 * members are joined into slices of up to BATCH_SLICE_BYTES; large ones
 * go out as they are. Returns 0 or an error. */
static int batch_write(struct append_ctx *a, struct gaz_batch_link **links, size_t n)
{
	struct gaz_replica *r = a->res.replica;
	struct append_rate rt = {.at_ns = gaz_mono_ns(), .max_rate = max_rate(a)};
	int64_t at = r->spool.fragment.end + r->spool.delta;
	uint8_t *joined = NULL;
	size_t used = 0;
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++) {
		struct gaz_batch_entry *e = entry_of(links[i]);
		e->begin = at;
		e->end = at += (int64_t)e->len;
		if (e->len > BATCH_JOIN_BYTES || used + e->len > BATCH_SLICE_BYTES) {
			if (used)
				rc = write_slice(a, joined, used, &rt);
			used = 0;
		}
		if (!rc && e->len > BATCH_JOIN_BYTES) {
			for (size_t off = 0; off < e->len && !rc; off += BATCH_SLICE_BYTES)
				rc = write_slice(a, e->data + off,
						 e->len - off < BATCH_SLICE_BYTES ? e->len - off
										  : BATCH_SLICE_BYTES,
						 &rt);
			continue;
		}
		if (!rc && !joined && !(joined = malloc(BATCH_SLICE_BYTES)))
			rc = GAZ_ENOMEM;
		if (!rc) {
			memcpy(joined + used, e->data, e->len);
			used += e->len;
		}
	}
	if (!rc && used)
		rc = write_slice(a, joined, used, &rt);
	free(joined);
	return rc;
}

/* Answers members links[first..n), committed to a fragment of `codec`
 * when OK: parked ones here, the others by waking their handler. The
 * leader (links[0] of its own group) answers itself. */
static void batch_answer(struct append_ctx *a, struct gaz_batch_link **links, size_t first,
			 size_t n, int codec, int code, int status, const char *msg)
{
	struct gaz_replica *r = a->res.replica;
	size_t threaded = 0;

	for (size_t i = first; i < n; i++) {
		struct gaz_batch_entry *e = entry_of(links[i]);
		e->code = code;
		e->status = status;
		e->codec = codec;
		snprintf(e->msg, sizeof(e->msg), "%s", msg ? msg : "");
		if (links[i]->parked) {
			gaz__append_answer_parked(a, e);
			continue;
		}
		if (code == GAZ_GRPC_OK && status == PROTOCOL__STATUS__OK)
			gaz_labelset_copy(e->a->registers, a->registers);
		links[threaded++] = links[i]; /* compacted in place; unused after */
	}
	gaz_replica_done_queued(r, links, threaded);
}

/* healthy_now: the member lease is valid and the journal's first store
 * was healthy at its last check (no wait for a first one). */
static bool healthy_now(struct append_ctx *a)
{
	const Protocol__JournalSpec__Fragment *fs = a->res.spec->fragment;
	struct gaz_status st = {0};

	return gaz_broker_lease_valid(a->b) &&
	       !(fs->n_stores && gaz_stores_health(a->b, fs->stores[0], 0, &st));
}

/* spool_ready_locked (r->mu held, token held): the spool may take a
 * commit at once: replica alive, last store listing fine, nothing in the
 * index beyond the spool, no roll due (maybeRoll, §6.3). */
static bool spool_ready_locked(const struct gaz_replica *r, const Protocol__JournalSpec__Fragment *fs)
{
	int64_t imin, imax, last_mod, end = r->spool.fragment.end;

	gaz_coverset_summary(&r->index, &imin, &imax, &last_mod);
	return !r->dead && !r->store_error[0] && imax <= end &&
	       roll_target(r, fs, r->spool.fragment.begin == imin ? end : 0) < 0;
}

/* group_may_continue (token held, a group just committed): whether the
 * token holder may commit the next queued group at once, without
 * resolving and checking preconditions again, because nothing they
 * depend on changed: the broker's view of etcd is at the revision the
 * leader resolved at (same spec, route, members and assignments), the
 * pipeline is sound, the store healthy, no fragment in the index beyond
 * the spool, no roll due, and no append that needs the token to itself
 * is waiting. Otherwise the token goes to the next append, which takes
 * the whole path. */
static bool group_may_continue(struct append_ctx *a)
{
	struct gaz_replica *r = a->res.replica;
	int64_t rev;
	bool ok;

	if (!a->token || (a->res.route.n > 1 && (!r->pipeline || gaz_pipeline_failed(r->pipeline))))
		return false;
	gaz_keyspace_rlock(a->b->ks);
	rev = gaz_keyspace_revision(a->b->ks);
	gaz_keyspace_runlock(a->b->ks);
	if (rev != a->res.etcd.revision || !healthy_now(a))
		return false;
	pthread_mutex_lock(&r->mu);
	ok = spool_ready_locked(r, a->res.spec->fragment) && r->batch_queue &&
	     gaz_replica_only_queued_waiters(r);
	pthread_mutex_unlock(&r->mu);
	return ok;
}

/* roll_back drops the spool's uncommitted delta after a failed
 * transaction, closing the pipeline (peers roll back as their streams
 * end). Only while the token is held: an append that let go of it before
 * its acknowledgements committed locally, and the next holder rebuilds
 * the pipeline. */
static void roll_back(struct append_ctx *a, const char *why)
{
	struct gaz_replica *r = a->res.replica;

	if (!a->token)
		return;
	if (r->pipeline)
		gaz__append_pipeline_fail(a, why);
	pthread_mutex_lock(&r->mu);
	gaz_metric_spool_rollback(r->spool.delta);
	gaz_spool_rollback(&r->spool);
	pthread_mutex_unlock(&r->mu);
}

/* A group's transaction failed: roll back (closing the pipeline) and
 * answer its members links[first..n) with the error. */
static void group_failed(struct append_ctx *a, struct gaz_batch_link **links, size_t first,
			 size_t n, bool replicated)
{
	char buf[1100];
	const char *why = a->lease_lost     ? LEASE_LOST
			  : a->spool_failed ? a->fail_why
			  : replicated      ? peer_failure(a, buf, sizeof(buf), true)
					    : "commit failed";
	int code = a->lease_lost || a->spool_failed || replicated ? GAZ_GRPC_UNAVAILABLE
								  : GAZ_GRPC_INTERNAL;

	roll_back(a, "group commit rolled back");
	batch_answer(a, links, first, n, 0, code, 0, why);
	if (!a->finished)
		gaz__append_respond_error(a, code, why);
}

/* respond_leader answers the leader's own append, committed as `self`
 * in its group, keeping the token past the response (responding lets go
 * of a token the append holds). */
static void respond_leader(struct append_ctx *a, const struct gaz_batch_entry *self)
{
	struct gaz_replica *held = a->token;

	a->token = NULL;
	a->commit_begin = self->begin;
	a->commit_end = self->end;
	memcpy(a->commit_sum, self->sum, sizeof(a->commit_sum));
	gaz__append_respond_commit(a);
	a->token = held;
}

int gaz__append_batch_commit(struct append_ctx *a)
{
	struct gaz_replica *r = a->res.replica;
	struct gaz_batch_link *links[BATCH_MAX_MEMBERS], *next[BATCH_MAX_MEMBERS];
	struct gaz_batch_entry *self = a->batch;
	bool replicated = r->pipeline != NULL;
	size_t n = 1, first = 1;
	int rc, codec;

	links[0] = &self->link;
	n += gaz__append_batch_take(a, links + 1, BATCH_MAX_MEMBERS - 1, BATCH_MAX_BYTES - self->len);
	if (!gaz_journal_may_write(a->res.spec->flags)) {
		batch_answer(a, links, 1, n, 0, GAZ_GRPC_OK, PROTOCOL__STATUS__NOT_ALLOWED, NULL);
		gaz__append_respond_status(a, PROTOCOL__STATUS__NOT_ALLOWED);
		return 0;
	}
	a->total_chunks = (int64_t)a->pre.n - 1;
	a->group_n = n;
	rc = batch_write(a, links, n);
	if (!rc)
		rc = commit(a, NULL);
	codec = a->commit_codec;
	/* Each round: group `links` is committed everywhere. While the token
	 * may stay (group_may_continue), the next group is written and
	 * proposed before this one is answered, and its acknowledgements are
	 * gathered on this thread: no hand-off to another handler between
	 * groups, and the answers overlap the peers' round trip. */
	for (;;) {
		struct gaz_commit_pending pc = {0};
		size_t nn = 0;
		int next_rc = 0;
		if (rc) {
			group_failed(a, links, first, n, replicated);
			return 0;
		}
		if (first)
			respond_leader(a, self);
		if (group_may_continue(a))
			nn = gaz__append_batch_take(a, next, BATCH_MAX_MEMBERS, BATCH_MAX_BYTES);
		if (!nn && a->token) { /* committed everywhere: the next group may start */
			gaz_replica_release(a->token);
			a->token = NULL;
		}
		if (nn) {
			gaz_metric_group_continued();
			a->group_n = nn;
			next_rc = batch_write(a, next, nn);
			if (!next_rc)
				next_rc = commit_start(a, NULL, &pc);
		}
		batch_answer(a, links, first, n, codec, GAZ_GRPC_OK, PROTOCOL__STATUS__OK, NULL);
		gaz_metric_group_commit((int64_t)n);
		atomic_store(&r->last_group_n, (int)n);
		if (!nn)
			return 0;
		memcpy(links, next, nn * sizeof(*next));
		n = nn;
		first = 0;
		codec = a->commit_codec;
		rc = next_rc ? next_rc : commit_finish(a, &pc);
	}
}

int gaz__append_validate(struct append_ctx *a)
{
	int64_t roll_to = 0;
	int rc;

	if (!a->registers)
		a->registers = gaz_labelset_new();
	if (!a->registers) {
		gaz__append_respond_error(a, GAZ_GRPC_RESOURCE_EXHAUSTED, "out of memory");
		return 0;
	}
	if ((rc = preconditions(a, &roll_to)) >= 0)
		return rc;
	if (maybe_roll(a, roll_to)) {
		gaz__append_respond_error(a, GAZ_GRPC_INTERNAL, "rolling the spool failed");
		return 0;
	}
	return -1;
}

/* transaction_failed rolls back a failed transaction and answers the
 * append, unless answered already: UNAVAILABLE when `replicated` (a peer
 * failed; the append may have committed), else INTERNAL. */
static void transaction_failed(struct append_ctx *a, bool replicated)
{
	char why[1100];

	roll_back(a, "append rolled back");
	if (!a->finished && replicated)
		gaz__append_respond_error(a, GAZ_GRPC_UNAVAILABLE, peer_failure(a, why, sizeof(why), true));
	else if (!a->finished)
		gaz__append_respond_error(a, GAZ_GRPC_INTERNAL, "commit failed");
}

int gaz__append_stream_begin(struct append_ctx *a)
{
	if (!(a->sha = EVP_MD_CTX_new())) {
		gaz__append_respond_error(a, GAZ_GRPC_RESOURCE_EXHAUSTED, "out of memory");
		return GAZ_ENOMEM;
	}
	EVP_DigestInit_ex(a->sha, gaz_sha1_md(), NULL);
	a->rate = (struct append_rate){.min_rate = a->b->cfg.min_append_rate,
				       .spent = a->b->cfg.min_append_rate,
				       .at_ns = gaz_mono_ns(),
				       .max_rate = max_rate(a)};
	return 0;
}

int64_t gaz__append_stream_deadline(const struct append_ctx *a)
{
	return rate_deadline(&a->rate);
}

int gaz__append_stream_chunk(struct append_ctx *a, int rc, Protocol__AppendRequest *m)
{
	struct gaz_replica *r = a->res.replica;

	rc = stream_chunk(a, rc, m);
	if (rc == 1 && r->spool.delta == 0 && (a->req->union_registers || a->req->subtract_registers)) {
		gaz__append_respond_error(a, GAZ_GRPC_UNKNOWN, "register modification requires non-empty Append");
		rc = GAZ_EINVAL;
	}
	if (rc < 0)
		transaction_failed(a, r->pipeline != NULL); /* before the roll-back closes it */
	return rc;
}

void gaz__append_commit(struct append_ctx *a)
{
	bool replicated = a->res.replica->pipeline != NULL; /* read while the token is held */

	if (!commit(a, a->sha))
		gaz__append_respond_commit(a);
	else /* roll_back does nothing without the token: committed locally, a peer failed after */
		transaction_failed(a, replicated);
}

/* ---- a lone append committed by the poller that read it ----------------- */

/* ready_now: the checks preconditions() and maybe_roll() make of a plain
 * append (no offset, register or suspension request), when all pass
 * without waiting or writing: fragment index ready, first store healthy
 * by its last check, member lease valid, nothing in the index beyond the
 * spool, no suspension offset ahead, no roll due. Anything else goes to
 * the handler's path, which answers or waits. Token held. */
static bool ready_now(struct append_ctx *a)
{
	struct gaz_replica *r = a->res.replica;
	const Protocol__JournalSpec *spec = a->res.spec;
	bool ok;

	if (!gaz_journal_may_write(spec->flags) || !healthy_now(a))
		return false;
	pthread_mutex_lock(&r->mu);
	ok = r->index_ready && r->spool.delta == 0 && spool_ready_locked(r, spec->fragment) &&
	     !(spec->suspend && r->spool.fragment.end < spec->suspend->offset) &&
	     gaz_labelset_copy(a->registers, r->registers) == 0;
	pthread_mutex_unlock(&r->mu);
	return ok;
}

/* The pollers gathered a poller commit's acknowledgements. */
static void poller_gathered(void *arg, int rc, const char *why, Protocol__ReplicateResponse **resp)
{
	struct append_ctx *a = arg;
	struct gaz_commit_pending *pc = a->poller_pc;
	char msg[1100];

	for (size_t i = 0; !rc && i < gaz_pipeline_peers(pc->p); i++)
		if (resp[i]->status != PROTOCOL__STATUS__OK) {
			gaz_warn("replication pipeline failed", "journal=%s err=%s", a->res.journal,
				 "a peer did not acknowledge the commit");
			gaz_pipeline_abandon(pc->p); /* the next token holder rebuilds it */
			rc = GAZ_EPROTO;
		}
	if (rc) {
		if (why && !a->fail_why[0])
			snprintf(a->fail_why, sizeof(a->fail_why), "%s", why);
		gaz__append_respond_error(a, GAZ_GRPC_UNAVAILABLE, peer_failure(a, msg, sizeof(msg), true));
	} else {
		gaz_labelset_copy(a->registers, pc->regs);
		gaz_notifier_broadcast(&a->res.replica->notifier);
		gaz__append_respond_commit(a);
	}
	gaz_labelset_free(pc->regs);
	free(pc);
	a->poller_pc = NULL;
	gaz__append_poller_done(a);
}

/* A poller commit failed before its proposal was out: roll back (the
 * pipeline, failed, is rebuilt by the next token holder), answer, and let
 * go of the token. */
static void poller_failed(struct append_ctx *a, const char *why)
{
	struct gaz_replica *r = a->res.replica;

	gaz_warn("append rolled back", "journal=%s err=%s", r->journal, why);
	gaz_pipeline_abandon(r->pipeline);
	pthread_mutex_lock(&r->mu);
	gaz_metric_spool_rollback(r->spool.delta);
	gaz_spool_rollback(&r->spool);
	pthread_mutex_unlock(&r->mu);
	gaz__append_respond_error(a, GAZ_GRPC_UNAVAILABLE, why);
	gaz_replica_release(r);
}

/* gather_then_release hands the gathering of pc's acknowledgements to
 * the pollers (fn(arg, ...) once every peer answered; perhaps right here)
 * and lets go of the token. The gather holds the pipeline; our reference
 * on `r` lets the token go after `arg` (which holds the other) may have
 * been freed. The ticket is the next one, with the pipeline idle and
 * the token held; were it not, the commit fails rather than be lost. */
static void gather_then_release(struct gaz_replica *r, struct gaz_pipeline *p,
				struct gaz_commit_pending *pc, gaz_pipeline_gathered_fn fn, void *arg)
{
	atomic_fetch_add(&r->refs, 1);
	if (gaz_pipeline_gather_async(p, pc->ticket, fn, arg)) {
		gaz_error("poller gather out of order", "journal=%s", r->journal);
		gaz_pipeline_abandon(p);
		fn(arg, GAZ_EUNAVAIL, "gather out of order", NULL);
	}
	gaz_replica_release(r);
	gaz_replica_unref(r);
}

/* ---- a periodic pulse proposed by the pulse thread ----------------------- */

static void pulse_free(struct append_ctx *a)
{
	gaz_labelset_free(a->registers);
	gaz_resolution_release(&a->res);
	free(a);
}

/* The pollers gathered a pulse's acknowledgements. */
static void pulse_gathered(void *arg, int rc, const char *why, Protocol__ReplicateResponse **resp)
{
	struct append_ctx *a = arg;
	struct gaz_commit_pending *pc = a->poller_pc;
	bool ok = rc == 0;

	for (size_t i = 0; ok && i < gaz_pipeline_peers(pc->p); i++)
		if (resp[i]->status != PROTOCOL__STATUS__OK) {
			gaz_warn("replication pipeline failed", "journal=%s err=%s", a->res.journal,
				 "a peer did not acknowledge the pulse");
			gaz_pipeline_abandon(pc->p); /* the next token holder rebuilds it */
			ok = false;
		}
	if (rc)
		gaz_info("journal pulse not committed", "journal=%s err=%s", a->res.journal,
			 why ? why : gaz_err_str(rc));
	gaz_labelset_free(pc->regs);
	free(pc);
	a->poller_pc = NULL;
	a->pulse_done(a->pulse_arg, ok);
	pulse_free(a);
}

int gaz__append_pulse_commit(struct append_ctx *a, struct gaz_pipeline **pln)
{
	struct gaz_replica *r = a->res.replica;
	struct gaz_pipeline *p = r->pipeline;
	struct gaz_commit_pending *pc;
	struct gaz_status st = {0};

	if (!p || !gaz_pipeline_matches(p, &a->res.route) || !gaz_pipeline_idle(p) || !ready_now(a) ||
	    !(pc = calloc(1, sizeof(*pc))))
		return GAZ_EINVAL;
	*pln = p;
	/* From here the pulse is ours: its outcome goes to pulse_done. With
	 * spool.delta 0 (ready_now), the proposal is the spool's fragment
	 * and registers as they are. */
	if (gaz__append_replicate_commit_propose(a, pc, &st)) {
		free(pc);
		gaz_warn("replication pipeline failed", "journal=%s err=%s", r->journal,
			 st.msg[0] ? st.msg : gaz_err_str(GAZ_EUNAVAIL));
		gaz_pipeline_abandon(p);
		gaz_replica_release(r);
		a->pulse_done(a->pulse_arg, false);
		pulse_free(a);
		return 0;
	}
	a->poller_pc = pc;
	gather_then_release(r, p, pc, pulse_gathered, a);
	return 0;
}

bool gaz__append_poller_may_commit(struct gaz_replica *r, const struct gaz_batch_entry *e)
{
	return r->pipeline && e->len <= BATCH_SLICE_BYTES && atomic_load(&r->last_group_n) <= 1 &&
	       gaz_pipeline_idle(r->pipeline);
}

int gaz__append_poller_commit(struct append_ctx *a, struct gaz_batch_entry *e)
{
	struct gaz_replica *r = a->res.replica;
	struct gaz_pipeline *p = r->pipeline;
	struct gaz_commit_pending *pc;
	struct gaz_status st = {0};

	if (!gaz_pipeline_matches(p, &a->res.route) || !ready_now(a) || (max_rate(a) > 0 && !rate_take(r, max_rate(a), (int64_t)e->len)) ||
	    !(pc = calloc(1, sizeof(*pc))))
		return GAZ_EINVAL;
	/* From here the append is ours to answer. */
	a->commit_begin = r->spool.fragment.end;
	a->commit_end = a->commit_begin + (int64_t)e->len;
	a->commit_codec = r->spool.fragment.codec;
	memcpy(a->commit_sum, e->sum, sizeof(a->commit_sum));
	a->total_chunks = e->chunks;
	if (e->len && gaz_pipeline_content(p, e->data, e->len, 0, &st)) {
		free(pc);
		poller_failed(a, st.msg);
		gaz__append_poller_done(a);
		return 0;
	}
	if (e->len && gaz_spool_append(&r->spool, e->data, e->len, &st)) {
		free(pc);
		spool_failure(a, &st);
		gaz_pipeline_abandon(p); /* peers roll back as the next holder rebuilds it */
		gaz_replica_spool_failed(r, st.msg, false);
		gaz__append_respond_error(a, GAZ_GRPC_UNAVAILABLE, a->fail_why);
		gaz_replica_release(r);
		gaz__append_poller_done(a);
		return 0;
	}
	if (e->len) { /* an empty append writes and commits nothing */
		gaz_replica_spool_ok(r);
		gaz_metric_spool_commit(r->spool.delta);
	}
	if (gaz__append_replicate_commit_propose(a, pc, &st)) {
		free(pc);
		gaz_warn("replication pipeline failed", "journal=%s err=%s", r->journal,
			 st.msg[0] ? st.msg : gaz_err_str(GAZ_EUNAVAIL));
		poller_failed(a, "replication to a peer failed; the append may have committed");
		gaz__append_poller_done(a);
		return 0;
	}
	gaz_notifier_broadcast(&r->notifier);
	a->poller_pc = pc;
	gather_then_release(r, p, pc, poller_gathered, a);
	return 0;
}
