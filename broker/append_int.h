/* append_int.h - state shared by the append machine (append_fsm.c) and
 * the modules it calls down into: append_local.c, append_batch.c,
 * append_repl.c, proxy.c. */
#ifndef GAZ_BROKER_APPEND_INT_H
#define GAZ_BROKER_APPEND_INT_H

#include <openssl/evp.h>

#include "broker/broker.h"
#include "broker/replica.h"
#include "etcd/txn.h"

/* A group-commit member (append_batch.c). */
struct gaz_batch_entry {
	struct gaz_batch_link link;        /* first: the replica's queue links it */
	struct append_ctx *a;              /* the member's own append */
	const uint8_t *data;               /* its whole content, `len` bytes */
	size_t len;
	uint8_t *owned;                    /* data, when it had to be joined */
	int64_t chunks;                    /* content messages (parked entries) */
	/* The outcome, set by the token holder that committed it. */
	int code;                          /* GAZ_GRPC_*; with OK, `status` */
	int status;                        /* Protocol__Status */
	char msg[128];
	int64_t begin, end;
	uint8_t sum[20];
	int codec;                         /* of the fragment it was committed to */
};

/* The client's messages read before the append took the token
 * (append_batch.c): replayed, in order, before any further receive. */
struct append_prefetch {
	Protocol__AppendRequest **msgs;    /* owned; consumed from `next` */
	size_t n, next;
	int end_rc;                        /* 0: stream still open; else what the
					    * receive after msgs[n-1] returned */
	size_t bytes;                      /* content bytes held (budget) */
	bool tried;
};

/* Min-rate bookkeeping of a streaming append (§2.1.1): `spent` credit in
 * bytes decays at min_rate per second; each chunk credits its length
 * (capped). The next chunk must come before the credit runs out.
 * max_rate is the append rate limit in bytes/s (0 = none). */
struct append_rate {
	int64_t min_rate, spent, at_ns;
	int64_t max_rate;
};

struct append_ctx {
	struct gaz_broker *b;
	struct gaz_rpc_call *call;
	Protocol__AppendRequest *req;      /* the first message */
	struct gaz_resolution res;
	int64_t read_through_rev;
	struct gaz_replica *token;         /* replica whose append token we hold */
	Protocol__LabelSet *registers;     /* for the response (owned) */
	char store_error[1024];
	bool finished;
	/* the commit */
	int64_t commit_begin, commit_end;
	uint8_t commit_sum[20];
	int commit_codec;
	int64_t total_chunks, delayed_chunks;
	struct append_prefetch pre;
	bool batchable;                    /* the prefetch holds the whole request */
	struct gaz_batch_entry entry;      /* valid when batchable */
	struct gaz_batch_entry *batch;     /* &entry while this append leads a group commit */
	size_t group_n;                    /* members of the group it leads, itself included */
	bool lease_lost;                   /* a commit found the member lease expired */
	/* Why the transaction failed, for its answers: a spool write's error
	 * (disk full, I/O; spool_failed is then set) or a peer's (the
	 * pipeline's). "" when unknown. */
	char fail_why[1024];
	bool spool_failed;
	struct gaz_commit_pending *poller_pc; /* a poller commit's, until gathered */
	gaz_pulse_done_fn pulse_done;      /* a pulse's (no call): its outcome goes here */
	void *pulse_arg;
	/* ACQUIRE of an append that streams its content (not batchable):
	 * its place in the token queue while it waits parked. */
	struct gaz_token_waiter waiter;
	unsigned state;                    /* enum append_state (append_fsm.c) */
	/* STREAM_CONTENT: the chunks so far (append_local.c). */
	EVP_MD_CTX *sha;                   /* SHA-1 of the content */
	struct append_rate rate;           /* the min and max rates (§2.1.1) */
	bool intent;                       /* the empty chunk came: EOF is next */
	/* STREAM_CONTENT's and PROXY's wait for the next chunk
	 * (gaz__append_await_chunk): its outcome is handed from the poller
	 * that received the chunk to the pool thread that resumes the append
	 * through the call's lock (gaz_rpc_recv_each). */
	struct append_chunk *arrived, **arrived_tail; /* received, not yet taken */
	int arrived_rc;                    /* what else ended the wait (0: chunks only) */
	/* PROXY (proxy.c): the upstream Append and how far it got. */
	struct gaz_rpc_stream *proxy_s;
	unsigned proxy_step;
	int64_t proxy_deadline;            /* for the upstream's answer (monotonic ns) */
};

/* A chunk received for STREAM_CONTENT while the append was parked. */
struct append_chunk {
	Protocol__AppendRequest *m;
	struct append_chunk *next;
};

/* append_batch.c: group commit. An append whose whole content is small
 * and was received before it took the token is queued on the replica;
 * the token holder commits every queued append with its own, as one
 * replicated transaction, and each gets its own commit range. */

/* gaz__append_prefetch reads the client's content ahead (once per
 * append, before the token), bounded per append and per broker. */
void gaz__append_prefetch(struct append_ctx *a);

/* gaz__append_next_prefetched: the next prefetched message (0, *m owned
 * by the caller), how the prefetch's receiving ended (gaz_rpc_recv's
 * errors, GAZ_EOF), or APPEND_NONE_PREFETCHED when the prefetch holds
 * nothing more and the call's next message is still to be received. */
#define APPEND_NONE_PREFETCHED 2
int gaz__append_next_prefetched(struct append_ctx *a, Protocol__AppendRequest **m);

/* gaz__append_prefetch_release frees what was read ahead. */
void gaz__append_prefetch_release(struct append_ctx *a);

/* gaz__append_acquire: acquire the token as a queued group-commit member
 * when the append qualifies (else a plain acquire). Returns 0 with the
 * token held (a->batch set when this append leads a group), 1 when another
 * append committed it and the call was answered, or the error of
 * gaz_replica_acquire. */
int gaz__append_acquire(struct append_ctx *a);

/* gaz__append_batch_commit (append_local.c): the leader, after its
 * preconditions, writes its own and every queued member's content and
 * commits them together; answers every member and itself. */
int gaz__append_batch_commit(struct append_ctx *a);

/* gaz__append_batch_take: with the token held, detaches queued members
 * in FIFO order into out[] (at most `max`, and `max_bytes` of content);
 * returns how many. Each link is the first member of its entry. */
size_t gaz__append_batch_take(struct append_ctx *a, struct gaz_batch_link **out, size_t max,
			      size_t max_bytes);

/* append_local.c: VALIDATE_PRECONDITIONS (registers, offsets, store
 * health, suspension, §2.1) and the roll they call for (maybeRoll, §6.3).
 * The token is held. Returns 1 to resolve again, 0 once answered, -1 to
 * go on to the content. */
int gaz__append_validate(struct append_ctx *a);

/* append_local.c: STREAM_CONTENT, the client's chunks to the spool (and
 * the peers) under the min and max rates (§2.1.1), until the commit
 * intent and EOF; a->sha takes their SHA-1. The token is held throughout.
 * append_fsm.c receives the chunks (waiting parked between them) and
 * hands each here.
 *
 * gaz__append_stream_begin sets the stream up: 0, or GAZ_ENOMEM with the
 * append answered. */
int gaz__append_stream_begin(struct append_ctx *a);

/* gaz__append_stream_deadline: by when (monotonic ns) the next chunk must
 * arrive to sustain the minimum rate (GAZ_DEADLINE_NEVER: no minimum). */
int64_t gaz__append_stream_deadline(const struct append_ctx *a);

/* gaz__append_stream_chunk takes the outcome of one receive: rc 0 with
 * chunk `m` (owned from here), or gaz_rpc_recv's error (GAZ_EOF,
 * GAZ_ETIMEDOUT for the min rate's deadline, GAZ_EPROTO, or a
 * cancellation). Returns 0 for the next chunk, 1 to commit (the intent,
 * then EOF), or a negative error after which the spool's delta is rolled
 * back and the append answered. */
int gaz__append_stream_chunk(struct append_ctx *a, int rc, Protocol__AppendRequest *m);

/* append_local.c: COMMIT of a streamed append: the spool's delta
 * everywhere, the registers, then the response; on failure rolls back
 * and answers UNAVAILABLE (a peer failed) or INTERNAL. */
void gaz__append_commit(struct append_ctx *a);

/* append_local.c: rolls the spool (and, through the pipeline, every
 * peer's) to an empty fragment at `to`. The token is held. Returns 0 or
 * an error (the pipeline is closed on failure). */
int gaz__append_roll(struct append_ctx *a, int64_t to);

/* append_fsm.c: the journal's replication the route must have (§4.7). */
int64_t gaz__append_desired_replication(const struct gaz_broker *b, const Protocol__JournalSpec *s);

/* append_batch.c: answers a taken parked entry (leader's context `a` for
 * the header and registers) and frees it. code/status/msg as in
 * struct gaz_batch_entry. */
void gaz__append_answer_parked(struct append_ctx *a, struct gaz_batch_entry *e);

/* append_etcd.c: UPDATE_ASSIGNMENTS, the route consistency write
 * (§4.6): compares every assignment's mod revision and puts the route
 * into each inconsistent one. *wrote tells whether it wrote; either way
 * a->read_through_rev is where to resolve next. Returns 0 or an error. */
int gaz__append_update_assignments(struct append_ctx *a, bool *wrote);

/* append_etcd.c: suspension write (UPDATE_SUSPEND), guarded by the
 * item's and every assignment's mod revision. Returns 0 or an error. */
int gaz__append_update_suspend(struct append_ctx *a, int level, int64_t offset);

/* append_repl.c: the replicated steps, used while the route has more
 * than one member. Each closes the pipeline (rolling back) on failure.
 * start_pipeline and sync return 0 to go on, 1 to resolve again, -1 on
 * failure; the others 0 or an error. */
int gaz__append_start_pipeline(struct append_ctx *a);
int gaz__append_sync(struct append_ctx *a, int64_t roll_to);
int gaz__append_replicate_content(struct append_ctx *a, const uint8_t *data, size_t len,
				  int64_t delta);

/* A commit proposed to the peers and applied locally whose
 * acknowledgements are still to be gathered. */
struct gaz_commit_pending {
	struct gaz_pipeline *p;
	uint64_t ticket;
	Protocol__LabelSet *regs;          /* the registers it commits (owned) */
};

/* gaz__append_replicate_commit_start proposes the spool's delta (token
 * held) and commits it locally, setting *pc (pc->p: the pipeline, which
 * the gather needs even if the token is let go meanwhile; pc->regs owned
 * until _finish). _finish gathers the acknowledgements (in proposal
 * order, each peer's bounded by the pipeline's gather timeout) and takes
 * the registers. Both close the pipeline on failure while the token is
 * held and return 0 or an error (GAZ_EUNAVAIL, GAZ_EPROTO, GAZ_ENOMEM);
 * after a failed start there is nothing to finish. */
int gaz__append_replicate_commit_start(struct append_ctx *a, struct gaz_commit_pending *pc);
int gaz__append_replicate_commit_finish(struct append_ctx *a, struct gaz_commit_pending *pc);

/* gaz__append_replicate_commit_propose is commit_start without closing
 * the pipeline on failure, for a caller that must not block: it then
 * abandons the pipeline itself (the next token holder closes it).
 * Returns 0 with *pc set, or an error (st says why; nothing to gather). */
int gaz__append_replicate_commit_propose(struct append_ctx *a, struct gaz_commit_pending *pc,
					 struct gaz_status *st);

/* append_local.c: the pulse of a healthy journal without a thread
 * (gaz_append_pulse_fast): `a` holds the resolution and the token, no
 * call. Proposes the spool's fragment unchanged (acknowledged) when the
 * pipeline is built for the route and idle and ready_now's checks pass;
 * the pollers gather the acknowledgements and call a->pulse_done, then
 * free `a` (perhaps before this returns). Returns 0 once it took the
 * pulse (the token is let go of), or GAZ_EINVAL with nothing done, the
 * token still held and `a` the caller's. */
int gaz__append_pulse_commit(struct append_ctx *a, struct gaz_pipeline **pln);

/* append_local.c: commits a lone parked append, `e` (its whole content,
 * SHA-1 taken), on the poller that read it, when it can go through
 * without waiting: the token held by the caller, which checked
 * gaz__append_poller_may_commit, the pipeline built for the route, the preconditions met now, no roll due, the rate
 * limit's balance covering it. Returns 0 once it took the append: the
 * token is let go of, and the acknowledgements are gathered by the
 * pollers, which answer the call and then call gaz__append_poller_done
 * (perhaps before this returns; `a` must not be touched after).
 * Returns GAZ_EINVAL, nothing done and the token still held, when the
 * append needs the handler's path. */
int gaz__append_poller_commit(struct append_ctx *a, struct gaz_batch_entry *e);

/* gaz__append_poller_may_commit: the cheap part of the poller commit's
 * conditions, checked before resolving (token held): a pipeline with
 * nothing to gather, content of one slice, and the journal's last
 * transaction a lone append (in a busy journal, appends wait for the
 * handler's path and commit in groups). */
bool gaz__append_poller_may_commit(struct gaz_replica *r, const struct gaz_batch_entry *e);

/* append_batch.c: frees a poller-committed append's context, once
 * answered, and lets go of its call. */
void gaz__append_poller_done(struct append_ctx *a);
void gaz__append_pipeline_fail(struct append_ctx *a, const char *why);

/* append_fsm.c: answer with a Gazette status (registers or the store error
 * attached as the status needs), or with a gRPC error. */
void gaz__append_respond_status(struct append_ctx *a, int status);
void gaz__append_respond_error(struct append_ctx *a, int code, const char *msg);

/* append_fsm.c: the OK response with the commit. */
void gaz__append_respond_commit(struct append_ctx *a);

/* append_fsm.c: the append's next client message, for STREAM_CONTENT and
 * PROXY: a prefetched one first, then one received. Returns 0 with *m
 * (owned by the caller), a receive's outcome as gaz_rpc_recv's (GAZ_EOF,
 * GAZ_EPROTO, GAZ_ECANCELLED; GAZ_ETIMEDOUT once `deadline_ns` passed),
 * or APPEND_AWAIT_PARKED: the call is parked until the message arrives,
 * the stream ends or the deadline passes, and the append's step runs
 * again then (on a pool thread), where this returns the outcome. A local
 * call (which cannot park) receives here, blocking. */
#define APPEND_AWAIT_PARKED 3
int gaz__append_await_chunk(struct append_ctx *a, Protocol__AppendRequest **m, int64_t deadline_ns);

/* append_fsm.c: a gaz_rpc_park resume that runs the append's step again
 * (for a step that parked on an event of its own). */
void gaz__append_resume(struct gaz_rpc_call *call, void *arg);

/* proxy.c: PROXY, the append forwarded to the primary and its answer
 * relayed. Returns 0 once answered, or APPEND_AWAIT_PARKED while it waits
 * parked (for a client chunk, or the primary's answer); it carries on
 * when the append's step runs again. */
int gaz__append_proxy(struct append_ctx *a);

#endif
