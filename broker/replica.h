/*
 * replica.h - a journal replica held by this broker: its spool (the open
 * fragment), its fragment index (local + store listing), its registers,
 * and the token that serialises appends (the single "pipeline" slot of
 * Gazette's replica, facts §4.8, §6.1).
 *
 * Ownership and locking: replicas are reference counted; the broker's
 * table holds one reference, each resolution another. `mu` guards every
 * field below it. The append token gives its holder the right to change
 * the spool; readers only read committed bytes through index entries
 * (which hold their own file references), so they never need the token.
 * `notifier` is broadcast on every commit, index change and teardown.
 */
#ifndef GAZ_BROKER_REPLICA_H
#define GAZ_BROKER_REPLICA_H

#include "broker/broker.h"
#include "broker/read_fanout.h"
#include "fragment/coverset.h"
#include "fragment/spool.h"

/* An append waiting for the token; lives on the waiter's stack. */
struct gaz_token_waiter {
	struct gaz_rpc_call *call;        /* woken when granted; may be NULL */
	bool granted;
	struct gaz_token_waiter *next;
};

/* An append queued for group commit (append_batch.c embeds it first in
 * its entry): its content is complete, and whichever append holds the
 * token may commit it with its own. Fields are guarded by the replica's
 * mu. */
struct gaz_batch_link {
	struct gaz_batch_link *next;
	struct gaz_token_waiter *waiter;  /* the owner's place in the token queue */
	struct gaz_rpc_call *call;        /* woken when done */
	bool taken;                       /* a token holder is committing it */
	bool done;                        /* its outcome is set */
	/* A parked link has no thread behind it (append_batch.c's fast path):
	 * no token wait, and a token holder answers it itself. Should the
	 * token go free with it still queued, or the replica die, it is
	 * handed back through unpark (no locks held), which gives the call a
	 * handler thread. */
	bool parked;
	void (*unpark)(struct gaz_batch_link *l);
};

struct gaz_replica {
	char *journal;
	atomic_int refs;
	struct gaz_broker *b;
	int64_t create_revision;       /* of the item this replica serves */

	pthread_mutex_t mu;
	struct gaz_spool spool;        /* changed only by the token holder, under mu */
	Protocol__LabelSet *registers; /* owned (labels.h allocator) */
	struct gaz_coverset index;     /* remote + local fragments */
	int refreshing;                /* store listings in progress (gaz_replica_refresh) */
	struct gaz_coverset persisted_during; /* persisted while a listing ran */
	bool index_ready;              /* first store listing done (or no stores) */
	/* A released journal's index, kept to serve reads only while an
	 * exiting broker persists what it held (gaz_replica_archive). Set
	 * before the replica enters the table, never changed. */
	bool sealed;
	char store_error[256];         /* why the last listing failed; "" when it worked */
	int64_t next_refresh_ns;       /* monotonic; maintenance thread only */
	int64_t refresh_interval_ns;
	int64_t last_refresh_ns;       /* monotonic start of the last listing; maintenance only */
	bool last_refresh_failed;      /* maintenance thread only */
	/* Until this monotonic time a reader waits at a hole of the index
	 * below its write head (read.c): maintenance lists the stores every
	 * GAZ_HOLE_REFRESH_MS instead of every refresh interval. Written by
	 * readers, read by maintenance, so atomic. */
	atomic_llong hole_refresh_until_ns;
	bool token_held;
	struct gaz_token_waiter *token_queue; /* FIFO of appends waiting for the token */
	struct gaz_batch_link *batch_queue;   /* FIFO of appends queued for group commit */
	/* Per the last resolution by maintenance, which writes it; the pulse
	 * thread reads it without a lock, so atomic. */
	atomic_bool primary;
	char *route_primary;           /* the route's primary ("zone#suffix") as
					* maintenance last saw it; NULL for none.
					* Owned; maintenance thread only. */
	/* Torn down: holders must let go. Set once, under mu, by teardown;
	 * atomic because Replicate streams and pulses also read it without mu
	 * (replicate.c after each message, pulse.c) to let go of a dying
	 * replica. */
	atomic_bool dead;
	/* The Replicate stream that holds the token (replicate.c), woken by
	 * teardown so that it lets go: it waits parked, with no timer. Set and
	 * cleared under mu by that stream while it holds the token; teardown
	 * wakes it under mu (lock order: mu, then the call's). */
	struct gaz_rpc_call *token_stream;
	int64_t fc_balance;            /* append flow-control balance, bytes */
	int64_t last_pulse_ns;
	struct gaz_notifier notifier;
	/* Blocking Reads parked at the write head, served one delivery per
	 * commit (read_fanout.c; its own lock, taken after mu). */
	struct gaz_head_group head;
	struct gaz_pipeline *pipeline; /* primary only; owned by the token holder */
	/* Whether `pipeline` is set: written by the token holder as it sets
	 * or clears it, read by maintenance, which tears down a replica whose
	 * assignment is no longer primary while it still has one. An append
	 * may open a pipeline under a resolution that made this broker the
	 * primary at a revision maintenance never reconciled (the primacy
	 * came and went between two of its passes); its Replicate streams
	 * would hold the peers' replicas, and the next primary's proposals
	 * would wait on them forever. */
	atomic_bool pipelined;
	/* The keyspace revision at which a full resolution found this
	 * replica fit for the append fast path (append_batch.c): primary,
	 * full route, writable, not suspended. Any later change under the
	 * prefix moves the revision on and so voids it. */
	atomic_llong fast_rev;
	/* Appends in the replica's last replicated transaction (group
	 * commit), set by token holders: a lone append is committed by the
	 * poller only while they come one at a time; in a busy journal the
	 * handler's hand-off lets the next group gather. */
	atomic_int last_group_n;

	/* Pulse scheduling (pulse.c); only the pulse thread touches these. */
	int64_t pulse_next_ns;         /* monotonic; 0 = pulse at once */
	int64_t pulse_retry_ns;        /* monotonic; after a failed pulse */
	int pulse_stable_ticks;        /* periodic pulses with no route change */
	int64_t pulse_checked_rev;     /* revision of the scan that found the
					* route consistent (0: none, or its keys
					* changed since), so an idle journal's
					* route is not rebuilt at each pulse */
	int64_t pulse_flush_s;         /* the flush interval seen then */
	int64_t pulse_heap_due;        /* due time of its latest entry in the
					* pulse thread's queue (0: none) */
	bool pulse_in_flight;          /* a pulse runner holds its pulse; the
					* outcome comes back to the pulse thread */
	int64_t refresh_heap_due;      /* due time of its latest entry in
					* maintenance's listing queue (0: none);
					* maintenance thread only */
	int64_t published_begin;       /* spool begin at the last publish (mu) */
	/* The last write to the spool failed (disk full, I/O error) and none
	 * has succeeded since: why, for /debug/ready ("" when writes work).
	 * Under mu; spool_failing mirrors it without a lock for the write
	 * path's check. */
	char spool_fault[256];
	atomic_bool spool_failing;
};

/* gaz_replica_get returns a new reference to the local replica of `journal`
 * or NULL. Thread-safe. */
struct gaz_replica *gaz_replica_get(struct gaz_broker *b, const char *journal);
/* gaz_replica_ref takes another reference to `r` (one held already) and
 * returns it; gaz_replica_unref drops one. Thread-safe. */
struct gaz_replica *gaz_replica_ref(struct gaz_replica *r);
void gaz_replica_unref(struct gaz_replica *r);

/* gaz_replicas_snapshot stores in *out (free with free) a new reference
 * to each replica of the broker's table (drop each with
 * gaz_replica_unref) and returns how many. Thread-safe. */
size_t gaz_replicas_snapshot(struct gaz_broker *b, struct gaz_replica ***out);

/* gaz_replica_new creates the replica and inserts it into the broker's
 * table (maintain.c). Returns it (table reference only) or NULL. */
struct gaz_replica *gaz_replica_new(struct gaz_broker *b, const char *journal,
				    int64_t create_revision);

/* gaz_replica_archive: for a replica just torn down at exit (`dead`, its
 * spool rolled to the persister), a sealed replica of the same journal
 * put in its place in the broker's table, holding a copy of its index
 * (local fragments keep their files). It serves reads only: the resolver
 * hands it to Read and Fragments while the broker is stopping, and
 * nothing ever appends to or replicates into it. So a reader still gets
 * every acknowledged byte while the exiting broker waits past its exit
 * timeout for a store to take the only copy (issue 21; Gazette's broker
 * keeps serving until its journals are taken over). Returns it (table
 * reference only) or NULL when out of memory or the slot is taken. */
struct gaz_replica *gaz_replica_archive(struct gaz_replica *dead);

/* gaz_replica_acquire takes the append token, waiting (cancellable through
 * `call`) while another append holds it. Waiters are served in arrival
 * order and only the next one is woken on release, so a busy journal's
 * appends do not stampede. Returns 0, GAZ_ECANCELLED, or GAZ_ESTOPPED when
 * the replica was torn down meanwhile. */
int gaz_replica_acquire(struct gaz_replica *r, struct gaz_rpc_call *call);
void gaz_replica_release(struct gaz_replica *r);

/* gaz_replica_token_park takes the append token for `call`, a remote call
 * (not local) that waits for it without a thread: 0 when it was free and
 * is now held; 1 when `w` (the caller's, alive until resume has settled
 * it) joined the token queue and the call parked (gaz_rpc_park with
 * resume(call, arg)); GAZ_ESTOPPED when the replica is torn down, or
 * GAZ_ECANCELLED when the call could not park. The release that grants
 * the token wakes the call, and so does teardown; resume then calls
 * gaz_replica_token_resumed. (A parked Replicate stream or streaming
 * Append; Gazette's wait on the replica's spool channel.) */
int gaz_replica_token_park(struct gaz_replica *r, struct gaz_token_waiter *w,
			   struct gaz_rpc_call *call, gaz_rpc_handler_fn resume, void *arg);

/* gaz_replica_token_resumed settles, in `resume`, a wait that
 * gaz_replica_token_park parked: 0 with the token held; 1 when parked
 * again (a spurious wake; resume runs later); GAZ_ECANCELLED (the call is
 * gone) or GAZ_ESTOPPED (torn down), with `w` out of the queue and a
 * token granted meanwhile passed on. */
int gaz_replica_token_resumed(struct gaz_replica *r, struct gaz_token_waiter *w,
			      struct gaz_rpc_call *call, gaz_rpc_handler_fn resume, void *arg);

/* gaz_replica_acquire_queued is gaz_replica_acquire for an append whose
 * content is complete: `link` joins the group-commit queue in the same
 * step as the token queue. Returns 0 with the token held (link no longer
 * queued); 1 when a token holder took the link and marked it done (the
 * token is not held; a taken link is always waited for, even past a
 * cancellation, since the taker reads its owner's content); or an error
 * of gaz_replica_acquire (link no longer queued). */
int gaz_replica_acquire_queued(struct gaz_replica *r, struct gaz_rpc_call *call,
			       struct gaz_batch_link *link);

/* gaz_replica_park queues a parked link (l->parked, l->unpark set) for
 * group commit, only while the token is held (so that its release will
 * see it). Returns false, not queued, when the token is free or the
 * replica dead. */
bool gaz_replica_park(struct gaz_replica *r, struct gaz_batch_link *l);

/* gaz_replica_park_or_acquire: the token when it is free and nobody
 * waits for it (returns 2, the caller then holds it, `l` untouched); else
 * gaz_replica_park (1 when parked); 0 when neither (the replica died, or
 * the token went free between the two steps). */
int gaz_replica_park_or_acquire(struct gaz_replica *r, struct gaz_batch_link *l);

/* gaz_replica_try_acquire takes the append token only when it is free
 * and nobody waits for it or queued behind it: true when the caller now
 * holds it (a pulse that must not wait, pulse.c). */
bool gaz_replica_try_acquire(struct gaz_replica *r);

/* gaz_replica_take_queued: with the token held, detaches queued links in
 * FIFO order while accept(link, arg) says yes, marking each taken and
 * dropping its token wait. Stores up to `max` of them in out[]; returns
 * how many. */
size_t gaz_replica_take_queued(struct gaz_replica *r, struct gaz_batch_link **out, size_t max,
			       bool (*accept)(struct gaz_batch_link *l, void *arg), void *arg);

/* gaz_replica_only_queued_waiters (r->mu held): every append waiting for
 * the token is queued for group commit too, so that the token holder may
 * keep the token for another group without passing over an append that
 * needs the token to itself (registers, offsets, large content). */
bool gaz_replica_only_queued_waiters(const struct gaz_replica *r);

/* gaz_replica_done_queued marks taken links done and wakes their owners. */
void gaz_replica_done_queued(struct gaz_replica *r, struct gaz_batch_link **links, size_t n);

/* gaz_replica_wait_ready waits for the first index refresh. */
int gaz_replica_wait_ready(struct gaz_replica *r, struct gaz_rpc_call *call);

/* With the token held: roll the spool to `offset` (an empty fragment with
 * `codec`), handing any completed content to the persister: at once with
 * `at_once`, else after its delay (gaz_persister_enqueue: only for content
 * the primary confirmed holding). `sole`: the content was committed with
 * no peer holding it (a primary's route of one), so an exit waits for its
 * upload past the exit timeout. mu not held. */
int gaz_replica_roll(struct gaz_replica *r, int64_t offset, int codec, bool at_once, bool sole,
		     struct gaz_status *st);

/* With the token held and mu held: publish the spool's committed fragment
 * into the index and wake readers. */
int gaz_replica_publish_spool(struct gaz_replica *r, struct gaz_status *st);

/* gaz_replica_close_pipeline closes the replica's pipeline, if any
 * (gaz_pipeline_close: waits for appends still gathering), and clears
 * `pipeline` and `pipelined`. Token holder only. */
void gaz_replica_close_pipeline(struct gaz_replica *r);

/* gaz_replica_spool_failed: a write to the spool failed (`why` names
 * the journal, the spool's directory and the errno). With the token held
 * and mu not held: drops the uncommitted delta, records the fault (the
 * gazette_spool_write_failing gauge and _failures_total counter, the
 * /debug/ready body), and rolls the spool at its last commit, handing
 * what it holds to the persister at once, so that its disk space frees
 * as soon as the store holds it and the next append starts an empty
 * spool. `sole`: committed with no peer holding it (a route of one).
 * Gazette retries the write every 5 s and the append hangs meanwhile;
 * we answer and heal instead (docs/decisions.md). */
void gaz_replica_spool_failed(struct gaz_replica *r, const char *why, bool sole);

/* gaz_replica_spool_ok: a write to the spool succeeded; clears a fault
 * recorded by gaz_replica_spool_failed. Token held, mu not held. */
void gaz_replica_spool_ok(struct gaz_replica *r);

/* gaz_replica_spool_faults: one line "journal: why" for each replica of
 * the broker whose spool is failing, as a malloc'd string (free with
 * free), or NULL when none is. Thread-safe. */
char *gaz_replica_spool_faults(struct gaz_broker *b);

/* gaz_replica_demote: the replica's assignment is no longer the
 * primary (the allocator moved the primary, or an append opened a
 * pipeline under a primacy maintenance never saw), but this broker stays
 * in the route. Takes the append token (waiting for an append in
 * progress, as teardown does), closes the pipeline, so that the peers'
 * Replicate streams let go of their spools for the new primary, and
 * clears `primary`. The spool and the index are kept: every fragment
 * this broker holds keeps being served, as a Gazette replica keeps its
 * index across route changes (issue 31: a re-created replica knew only
 * its store listing). Maintenance thread only. */
void gaz_replica_demote(struct gaz_replica *r);

/* gaz_replica_teardown marks the replica dead, persists its spool's
 * content, removes it from the broker's table and drops the table's
 * reference. Used on unassignment and at exit. */
void gaz_replica_teardown(struct gaz_replica *r);

/* Listing pace while a reader waits at a hole (maintain.c). */
#define GAZ_HOLE_REFRESH_MS 250

/* gaz_replica_hurry_refresh: a reader found no fragment at an offset
 * below the index's write head, a hole that fragments persisted by
 * another broker fill at its next listing (a new replica's index between
 * its first listing and the start of its spool, while the route's former
 * members persist what they hold). Maintenance lists the journal's
 * stores every GAZ_HOLE_REFRESH_MS until `until_ns` (monotonic) instead
 * of waiting for the refresh interval; it is woken at once. Thread-safe. */
void gaz_replica_hurry_refresh(struct gaz_replica *r, int64_t until_ns);

/* gaz_replica_refresh lists the journal's stores and replaces the remote
 * part of the index (facts §5.3), keeping the local part and every
 * fragment gaz_replica_persisted reported while the listing ran. Called
 * by maintenance, no locks held. Returns 0, or the store's error (also
 * kept in r->store_error; st says why). */
int gaz_replica_refresh(struct gaz_replica *r, const Protocol__JournalSpec *spec,
			struct gaz_status *st);

/* gaz_replica_persisted: the persister stored `frag` (backing_store and
 * mod_time set): the index swaps the local entry for the remote one. */
void gaz_replica_persisted(struct gaz_replica *r, const struct gaz_fragment *frag);

/* gaz_replica_apply_proposal applies a proposal to the spool with Gazette's
 * rules (facts §6.2; replicate.c): roll, no-op (rolling back any delta),
 * commit, or mismatch; a roll completes the spool with `at_once` as for
 * gaz_replica_roll. The append token must be held. Returns a
 * Protocol__Status (OK or PROPOSAL_MISMATCH), or -1 on a local failure. */
int gaz_replica_apply_proposal(struct gaz_replica *r, const Protocol__Fragment *proposal,
			       const Protocol__LabelSet *registers, bool at_once, struct gaz_status *st);

#endif
