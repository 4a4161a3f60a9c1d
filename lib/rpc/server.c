/*
 * server.c - the grpc server: method registration, accepting calls, the
 * bounded handler thread pool, the blocking per-call helpers (recv, send,
 * finish, wait, wake) and clean shutdown.
 *
 * Flow of a call (grpc-core.md §2, §4):
 *   request tag completes on a poller (accept_cb)
 *     -> call moved out of the tag, tag re-requested at once
 *     -> the first RECV_MESSAGE started; RECV_CLOSE_ON_SERVER only once no
 *        receive is in flight (close_watch_locked): a pending receive
 *        already ends at a cancellation, and every op in flight costs
 *        each completion of the queue (Debian's libgrpc checks tags by a
 *        linear search, docs/decisions.md "Ops in flight")
 *     -> call queued to the pool; a pool thread runs the handler, which uses
 *        gaz_rpc_recv/send/finish: each starts one batch, then waits on the
 *        call's condvar, which the op's completion (on a poller) signals.
 *   Unknown methods come through one generic request and are answered
 *   UNIMPLEMENTED right there on the poller (pitfall P1); so is a call of
 *   a GAZ_RPC_LIMITED method past the bounds on open streams, with
 *   RESOURCE_EXHAUSTED (opts.max_streams, max_streams_per_conn).
 *   A handler that would wait long (a Read at the write head) parks
 *   instead (gaz_rpc_park): it returns with the call unfinished, and the
 *   call's next event (a wake, its cancellation, a due time, room to
 *   send) queues its resume function to the pool. A parked call costs its
 *   structs, no thread. A stream parked with gaz_rpc_park_each has its
 *   messages run through a callback on the pollers meanwhile, and resumes
 *   when its receiving ends.
 *
 * Invariants:
 * - A call holds one reference for its handler and one per op in flight
 *   (the close op included); it is destroyed by whoever drops the last one, so
 *   never before the handler returned and every op completed.
 * - At most one op of each kind is in flight per call (grpc's rule): recv,
 *   send and finish run only on the handler thread, and a recv that timed
 *   out stays in flight to be picked up by the next gaz_rpc_recv.
 * - srv->requests counts request tags grpc holds; srv->live counts calls not
 *   yet destroyed. grpc_server_destroy runs only when both are 0.
 * - A parked call keeps its handler's reference; whoever disarms it
 *   (park_event_locked, under the call's mu) hands that reference to the
 *   pool with it. The timed list holds calls only while parked or being
 *   resumed, so under srv->mu a listed call is alive.
 * - Lock order: a call's mu and srv->mu are never held together.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <grpc/support/alloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/metrics.h"
#include "rpc/rpc_int.h"

#define REQS_PER_METHOD 8
#define RECV_AHEAD 4               /* messages a call may receive ahead of its handler */
#define RECV_AHEAD_BYTES (64 << 10) /* ...while they hold less than this */
#define SEND_QUEUE 8               /* response messages queued behind the one in flight */
#define SEND_QUEUE_LOW 2           /* a full queue's sender wakes when down to this */
#define SEND_SLACK 8               /* more a poller's callback may queue past a full queue */
#define IDLE_THREAD_MS 30000       /* idle pool threads exit after (opts.idle_thread_ms) */
#define DISPATCH_READ_NS (20 * GAZ_NS_PER_MS) /* GAZ_RPC_DISPATCH_READ waits at most */
#define TIMER_TICK_NS (5 * GAZ_NS_PER_MS)     /* ...plus this */
#define POOL_STALL_NS (5 * GAZ_NS_PER_MS) /* past core_handlers: one more thread per this, while
					    * the oldest queued call has waited as long */
#define CONN_BUCKETS 1024 /* hash buckets of the per-connection stream counts */

/* A method's go-grpc-prometheus series, made on first use. */
struct method_metrics {
	const char *labels[3]; /* grpc_type, grpc_service, grpc_method (into path) */
	char service[128];
	_Atomic(struct gaz_metric_child *) started, received, sent, seconds;
};

struct method {
	void *handle; /* from grpc_server_register_method */
	gaz_rpc_handler_fn fn;
	void *arg;
	char *path;
	unsigned flags; /* GAZ_RPC_* */
	gaz_rpc_fast_fn fast;
	struct method_metrics *mm; /* NULL: the server counts nothing */
};

/* A request kept outstanding with grpc, reused after every accept. */
struct req {
	struct gaz__tag tag;
	struct gaz_rpc_server *srv;
	struct method *m; /* NULL: the generic request (unknown methods) */
	grpc_call *gc;
	gpr_timespec deadline;
	grpc_metadata_array md;
	grpc_call_details details; /* generic request only */
};

enum srv_state { SRV_NEW, SRV_STARTED, SRV_STOPPING, SRV_STOPPED };

/* The open GAZ_RPC_LIMITED calls of one client connection (srv->mu). */
struct conn_streams {
	struct conn_streams *next; /* in its hash bucket */
	int n;
	char peer[];
};

struct gaz_rpc_server {
	grpc_server *gs;                  /* NULL once destroyed */
	grpc_server_credentials *fd_creds; /* insecure, reused by add_fd (R4) */
	struct gaz_rpc_server_opts opts;
	struct method **methods;
	size_t nmethods;
	struct gaz__tag shutdown_tag;

	pthread_mutex_t mu; /* guards everything below */
	pthread_cond_t cv;  /* state, handovers, requests, live, nthreads */
	enum srv_state state;
	bool shutdown_done; /* shutdown tag arrived */
	int handovers;      /* add_fd calls inside grpc (R2 gate) */
	int requests;       /* request tags held by grpc */
	int live;           /* calls accepted and not yet destroyed */
	char **peers;       /* peer of each handed-over fd, by fd number */
	int npeers;
	/* GAZ_RPC_LIMITED calls alive, in all and per connection (a table
	 * made on first use when max_streams_per_conn is set). */
	int streams;
	struct conn_streams **conns;

	/* Handler pool: FIFO of accepted calls, threads reused. */
	pthread_cond_t work_cv; /* stopping (idle workers wait on their own cv) */
	/* Idle workers, the most recently idle on top: a push wakes the top
	 * one, so work gathers on few threads and the rest idle out. */
	struct idle_worker *idle_top;
	struct gaz_rpc_call *qhead, *qtail;
	int queued, nthreads, idle;
	/* Past opts.core_handlers threads, the pool grows only while its
	 * threads are blocked: the parked calls' timer starts one thread per
	 * POOL_STALL_NS while the oldest queued call has waited that long
	 * (grown_ns: the last such start). A burst of calls that each run
	 * briefly (thousands of Reads arriving to park, or woken at once by
	 * one commit) is served by the core threads instead of a thread
	 * each. */
	int64_t grown_ns;
	/* The timer knows calls wait past the core threads (it has a due
	 * time for the pool's growth): pool_push signals it only when not,
	 * so a burst does not wake it once per call. */
	bool grow_watched;
	bool stopping;

	/* Messages gaz_rpc_send_packed_now started on calls that had nothing
	 * else to send, not yet completed: how far grpc and the pollers are
	 * behind a fan-out (gaz_rpc_packed_in_flight). */
	atomic_long packed_in_flight;

	/* GAZ_RPC_DISPATCH_READ calls by dispatch deadline (FIFO: all wait
	 * the same), each holding a reference; one timer thread, started on
	 * first use, hands to the pool those whose request is still open. */
	pthread_cond_t timer_cv;
	struct gaz_rpc_call *thead, *ttail;
	bool timer_running;

	/* Parked calls with a due time (gaz_rpc_park: a deadline or an
	 * expiry), unordered; one timer thread, started on first use, resumes
	 * each at its time (and grows the pool, see grown_ns). A call is in
	 * the list only while parked or being resumed, when its handler's
	 * reference keeps it alive. */
	pthread_cond_t park_cv;
	struct gaz_rpc_call *parked;
	bool park_timer_running;

	gaz_rpc_finish_fn on_finish; /* set before start; NULL = none */
	bool metrics;                /* gaz_rpc_server_metrics */
};

/* An idle pool thread, on its own stack while it waits (srv->mu). */
struct idle_worker {
	pthread_cond_t cv;
	struct idle_worker *below, *above;
	bool woken; /* taken off the stack by a push or the stop */
};

/* One in-flight batch of a call. */
struct optag {
	struct gaz__tag tag;
	struct gaz_rpc_call *call;
	bool pending; /* started, not completed */
	bool done;    /* completed, result not yet consumed */
	int ok;
};

struct mdval {
	struct mdval *next;
	size_t idx;  /* index in md */
	char *value; /* gpr_malloc'd */
};

/* A gaz_rpc_recv_each callback with its message type and argument: one
 * value, so a poller copies all three at once under the call's mu. */
struct each_cb {
	int (*fn)(void *arg, ProtobufCMessage *m);
	const ProtobufCMessageDescriptor *desc;
	void *arg;
};

struct gaz_rpc_call {
	struct gaz_rpc_server *srv;
	struct method *m;
	grpc_call *gc;
	grpc_metadata_array md; /* request metadata, owned by the call */
	struct mdval *mdvals;   /* NUL-terminated copies handed out */
	int64_t deadline_ns;
	/* gaz_rpc_expire_at: the call is cancelled (DEADLINE_EXCEEDED) once
	 * this passes, as its waits see (GAZ_DEADLINE_NEVER: never). Set by
	 * the handler's thread before it waits; read under mu. */
	int64_t expire_ns;
	void *user;                 /* gaz_rpc_set_user, freed by user_free */
	void (*user_free)(void *);
	char *peer;
	bool limited;              /* counted in srv->streams and its connection's */
	struct gaz_rpc_call *next; /* pool queue link */
	int64_t queued_ns;          /* monotonic; when pool_push queued it */
	struct gaz_rpc_call *tnext; /* dispatch timer link */
	int64_t dispatch_by_ns;     /* monotonic; GAZ_RPC_DISPATCH_READ */

	pthread_mutex_t mu;
	pthread_cond_t cv; /* op completions, cancellation, wake */
	atomic_int refs;           /* changed under mu, except the final drops */
	struct optag close_op, recv_op, send_op, fin_op;
	int close_cancelled; /* written by grpc */
	bool close_watched;  /* RECV_CLOSE_ON_SERVER started (close_watch_locked) */
	bool cancelled, woken, md_sent, finished, eof;
	grpc_byte_buffer *recv_bb; /* written by grpc */
	grpc_slice details;        /* status text; alive until destroy */
	grpc_byte_buffer *fin_bb;  /* the final response, alive until destroy */
	grpc_byte_buffer *send_bb; /* the streamed response in flight */
	/* Streamed responses queued behind it: the poller starts the next
	 * as one completes, so a streaming handler (a Read) waits only when
	 * the queue is full, not once per message. */
	grpc_byte_buffer *sendq[SEND_QUEUE + SEND_SLACK];
	uint32_t sendq_flags[SEND_QUEUE + SEND_SLACK]; /* each one's write flags */
	int sendq_n;
	int send_wait_len;         /* the handler waits for sendq_n <= this (-1: idle) */
	bool send_failed;          /* a streamed send failed: the call is gone */
	bool send_counted;         /* send_bb is counted in srv->packed_in_flight */

	/* Read-ahead: pollers keep one RECV_MESSAGE in flight and queue what
	 * arrives (at most RECV_AHEAD messages), so a handler busy elsewhere
	 * (waiting for a journal's append token) finds its next messages
	 * ready instead of a round trip through a poller for each. Bounded
	 * in bytes too, so large messages keep grpc's flow control. */
	grpc_byte_buffer *ahead[RECV_AHEAD];
	int n_ahead;
	size_t ahead_bytes;
	bool recv_end;             /* a receive completed without a message */
	bool dispatch_pending;     /* GAZ_RPC_DISPATCH_READ: not yet handed to the pool */
	bool recv_waiting;         /* the handler waits in recv_bb */
	bool send_waiting;         /* the handler waits for send_op */
	int recv_end_ok;           /* ...at the client's half-close (1), or at a
	                            * reset or cancellation (0) */
	/* gaz_rpc_recv_each: while the handler waits there (each.fn set), a
	 * poller runs each arriving message through each.fn itself, on a copy
	 * of `each` taken under mu: the handler clears it as its wait ends.
	 * gaz_rpc_park_each sets it for the park, and the resume's
	 * gaz_rpc_recv_each clears it. */
	struct each_cb each;
	bool each_busy;            /* a poller is in each.fn */
	int each_rc;               /* each.fn's first non-zero return */
	bool each_held;            /* the next receive waits for send room (each_recv_locked) */

	/* A local call (gc == NULL, see gaz_rpc_local_new): its requests,
	 * consumed in order, then EOF; the outcome is kept for the caller. */
	grpc_byte_buffer **local_reqs;
	size_t local_n, local_next;
	grpc_byte_buffer *local_resp;
	int local_code;
	char *local_msg;

	/* gaz_rpc_park: what a pool thread runs for the call next (NULL: the
	 * method's handler), and the park itself. PARK_ASKED: the thread
	 * that holds the call asked and has not yet returned; PARK_ARMED: no
	 * thread holds it, and the first event (park_event_locked) hands it
	 * to the pool. Under mu. */
	gaz_rpc_handler_fn run_fn;
	void *run_arg;
	enum { PARK_NONE, PARK_ASKED, PARK_ARMED } park_state;
	unsigned park_flags;
	int64_t park_due_ns;
	/* The server's list of timed parked calls (srv->mu). */
	struct gaz_rpc_call *park_prev, *park_next;
	int64_t park_timer_ns;
	bool park_listed;

	int outcome; /* gaz_rpc_set_outcome, for the finish observer */
	int64_t started_ns; /* accepted (monotonic), for grpc_server_handling_seconds */
};

/* ---- go-grpc-prometheus server metrics --------------------------------- */

static struct gaz_metric *f_started, *f_handled, *f_received, *f_sent, *f_seconds;
static pthread_once_t metrics_once = PTHREAD_ONCE_INIT;

static void metrics_init(void)
{
	struct gaz_metrics *r = gaz_metrics_default();
	const char *l = "grpc_type,grpc_service,grpc_method";

	f_started = gaz_metrics_counter(r, "grpc_server_started_total",
					"Total number of RPCs started on the server.", l);
	f_handled = gaz_metrics_counter(r, "grpc_server_handled_total",
					"Total number of RPCs completed on the server, regardless of success or failure.",
					"grpc_type,grpc_service,grpc_method,grpc_code");
	f_received = gaz_metrics_counter(r, "grpc_server_msg_received_total",
					 "Total number of RPC stream messages received on the server.", l);
	f_sent = gaz_metrics_counter(r, "grpc_server_msg_sent_total",
				     "Total number of gRPC stream messages sent by the server.", l);
	f_seconds = gaz_metrics_histogram(r, "grpc_server_handling_seconds",
					  "Histogram of response latency (seconds) of gRPC that had been "
					  "application-level handled by the server.", l, NULL, 0);
}

/* The series of `fam` for the call's method, cached in *slot. NULL when
 * the server counts nothing (or the family failed to register). */
static struct gaz_metric_child *series(const struct gaz_rpc_call *c, struct gaz_metric *fam,
				       _Atomic(struct gaz_metric_child *) *slot)
{
	struct gaz_metric_child *ch = atomic_load_explicit(slot, memory_order_acquire);

	if (!ch && (ch = gaz_metric_withv(fam, c->m->mm->labels)))
		atomic_store_explicit(slot, ch, memory_order_release);
	return ch;
}

#define MM(c, name) ((c)->m && (c)->m->mm ? series((c), f_##name, &(c)->m->mm->name) : NULL)

/* grpc-go's codes.Code names, the grpc_code label. */
static const char *const code_names[] = {
	"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
	"AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted",
	"OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated",
};

static void metrics_handled(const struct gaz_rpc_call *c, int code)
{
	const struct method_metrics *mm = c->m ? c->m->mm : NULL;

	if (!mm)
		return;
	const char *v[4] = {mm->labels[0], mm->labels[1], mm->labels[2],
			    code >= 0 && code <= 16 ? code_names[code] : "Unknown"};
	gaz_metric_inc(gaz_metric_withv(f_handled, v));
	gaz_metric_observe(MM(c, seconds), (double)(gaz_mono_ns() - c->started_ns) / 1e9);
}

/* Labels of a method at path "/<service>/<method>" as go-grpc-prometheus
 * splits it. Returns NULL when out of memory. */
static struct method_metrics *method_metrics_new(const char *path, unsigned flags)
{
	struct method_metrics *mm = calloc(1, sizeof(*mm));
	const char *slash = strrchr(path, '/');

	if (!mm)
		return NULL;
	snprintf(mm->service, sizeof(mm->service), "%.*s",
		 slash > path ? (int)(slash - path - 1) : 0, path + 1);
	mm->labels[0] = (flags & GAZ_RPC_CLIENT_STREAMS) && (flags & GAZ_RPC_SERVER_STREAMS) ? "bidi_stream"
			: flags & GAZ_RPC_CLIENT_STREAMS ? "client_stream"
			: flags & GAZ_RPC_SERVER_STREAMS ? "server_stream"
							 : "unary";
	mm->labels[1] = mm->service;
	mm->labels[2] = slash ? slash + 1 : path;
	return mm;
}

int gaz_rpc_server_metrics(struct gaz_rpc_server *srv)
{
	if (!srv || srv->state != SRV_NEW)
		return GAZ_EINVAL;
	pthread_once(&metrics_once, metrics_init);
	srv->metrics = true;
	for (size_t i = 0; i < srv->nmethods; i++)
		if (!srv->methods[i]->mm)
			srv->methods[i]->mm = method_metrics_new(srv->methods[i]->path, srv->methods[i]->flags);
	return 0;
}

static void srv_lock(struct gaz_rpc_server *srv)
{
	pthread_mutex_lock(&srv->mu);
}

static void srv_unlock_signal(struct gaz_rpc_server *srv)
{
	pthread_cond_broadcast(&srv->cv);
	pthread_mutex_unlock(&srv->mu);
}

/* ---- the bounds on open streams (opts.max_streams*) -------------------- */

static struct conn_streams **conn_slot(struct gaz_rpc_server *srv, const char *peer)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (const char *p = peer; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	struct conn_streams **pp = &srv->conns[h % CONN_BUCKETS];
	while (*pp && strcmp((*pp)->peer, peer))
		pp = &(*pp)->next;
	return pp;
}

/* Why limit_take_locked refused a call. */
enum limit_refusal { LIMIT_OK, LIMIT_SERVER, LIMIT_CONN, LIMIT_NOMEM };

/* limit_take_locked counts a new GAZ_RPC_LIMITED call of `peer` (srv->mu
 * held; NULL peer: out of memory). Returns LIMIT_OK when counted, else
 * which bound refused it. */
static enum limit_refusal limit_take_locked(struct gaz_rpc_server *srv, const char *peer)
{
	int per_conn = srv->opts.max_streams_per_conn;
	struct conn_streams **pp = NULL;

	if (!peer)
		return LIMIT_NOMEM;
	if (srv->opts.max_streams > 0 && srv->streams >= srv->opts.max_streams)
		return LIMIT_SERVER;
	if (per_conn > 0) {
		if (!srv->conns && !(srv->conns = calloc(CONN_BUCKETS, sizeof(*srv->conns))))
			return LIMIT_NOMEM;
		pp = conn_slot(srv, peer);
		if (*pp && (*pp)->n >= per_conn)
			return LIMIT_CONN;
		if (!*pp) {
			size_t len = strlen(peer) + 1;
			if (!(*pp = calloc(1, sizeof(**pp) + len)))
				return LIMIT_NOMEM;
			memcpy((*pp)->peer, peer, len);
		}
		(*pp)->n++;
	}
	srv->streams++;
	return LIMIT_OK;
}

/* limit_give_locked uncounts a call limit_take_locked counted (srv->mu). */
static void limit_give_locked(struct gaz_rpc_server *srv, const char *peer)
{
	srv->streams--;
	if (!srv->conns)
		return;
	struct conn_streams **pp = conn_slot(srv, peer), *e = *pp;
	if (e && --e->n == 0) {
		*pp = e->next;
		free(e);
	}
}

/* ---- calls ------------------------------------------------------------ */

static void call_destroy(struct gaz_rpc_call *c)
{
	struct gaz_rpc_server *srv = c->srv;
	char *peer = c->peer;
	bool limited = c->limited;

	while (c->mdvals) {
		struct mdval *v = c->mdvals;
		c->mdvals = v->next;
		gpr_free(v->value);
		free(v);
	}
	grpc_metadata_array_destroy(&c->md);
	if (c->user_free)
		c->user_free(c->user);
	if (c->recv_bb)
		grpc_byte_buffer_destroy(c->recv_bb);
	for (int i = 0; i < c->n_ahead; i++)
		grpc_byte_buffer_destroy(c->ahead[i]);
	if (c->fin_bb)
		grpc_byte_buffer_destroy(c->fin_bb);
	if (c->send_bb)
		grpc_byte_buffer_destroy(c->send_bb);
	for (int i = 0; i < c->sendq_n; i++)
		grpc_byte_buffer_destroy(c->sendq[i]);
	grpc_slice_unref(c->details);
	grpc_call_unref(c->gc);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
	srv_lock(srv);
	if (limited)
		limit_give_locked(srv, peer);
	srv->live--;
	srv_unlock_signal(srv);
	free(peer);
}

/* call_unref drops a reference, waking the handler if `wake`; call with
 * c->mu held, returns unlocked. */
static void call_unref_locked(struct gaz_rpc_call *c, bool wake)
{
	/* Signal with mu released, or the woken handler would at once block
	 * on it (a second thread switch); our reference keeps c alive until
	 * the decrement after. */
	pthread_mutex_unlock(&c->mu);
	if (wake)
		pthread_cond_broadcast(&c->cv);
	if (atomic_fetch_sub(&c->refs, 1) == 1)
		call_destroy(c);
}

static int call_start(struct gaz_rpc_call *c, struct optag *o, const grpc_op *ops, size_t n);

/* recv_start keeps one RECV_MESSAGE in flight (c->mu held). */
static int recv_start(struct gaz_rpc_call *c)
{
	grpc_op op = {.op = GRPC_OP_RECV_MESSAGE};

	op.data.recv_message.recv_message = &c->recv_bb;
	c->each_held = false; /* whoever starts a receive ends a hold */
	return call_start(c, &c->recv_op, &op, 1);
}

/* each_recv_locked (c->mu held) starts the next receive of a stream whose
 * messages run through an each-callback (gaz_rpc_recv_each,
 * gaz_rpc_park_each), unless its response queue is full: then the
 * receive is held and send_completed starts it once a queued response
 * has gone out. A callback runs on a poller, which cannot wait for room
 * to send its answer; holding the next message back instead leaves a
 * peer that sends faster than its answers go out waiting in HTTP/2 flow
 * control, where a full queue used to fail the call (a pipelined
 * Replicate under CPU pressure). Returns recv_start's result, 0 when
 * held. */
static void close_watch_locked(struct gaz_rpc_call *c);

static int each_recv_locked(struct gaz_rpc_call *c)
{
	if (c->sendq_n >= SEND_QUEUE && !c->send_failed && !c->cancelled) {
		c->each_held = true;
		close_watch_locked(c);
		return 0;
	}
	return recv_start(c);
}

/* close_watch_locked (c->mu held) starts RECV_CLOSE_ON_SERVER once the
 * call has no receive in flight, so a cancellation is always seen: by
 * the receive while one is pending (it ends without a message, and
 * recv_arrived tells a reset from a half-close), by the close op after.
 * An idle bidirectional stream (a Replicate at a replica) so holds one op,
 * not two. Started at most once, and not once the handler finished (a
 * cancellation then changes nothing); a failure to start reads as
 * cancelled. */
static void close_watch_locked(struct gaz_rpc_call *c)
{
	grpc_op op = {.op = GRPC_OP_RECV_CLOSE_ON_SERVER};

	if (c->close_watched || c->recv_op.pending || c->cancelled || c->finished || !c->gc)
		return;
	c->close_watched = true;
	op.data.recv_close_on_server.cancelled = &c->close_cancelled;
	if (call_start(c, &c->close_op, &op, 1) != 0)
		c->cancelled = true;
}

/* dispatch_ready (c->mu held): a GAZ_RPC_DISPATCH_READ call may go to its
 * handler: nothing more arrives without it. */
static bool dispatch_ready(struct gaz_rpc_call *c)
{
	if (!c->dispatch_pending)
		return false;
	if (!c->cancelled && c->recv_op.pending)
		return false;
	c->dispatch_pending = false;
	return true;
}

static void pool_push(struct gaz_rpc_server *srv, struct gaz_rpc_call *c);
static bool expired_locked(struct gaz_rpc_call *c);

/* ---- parked calls (gaz_rpc_park) --------------------------------------- */

/* gaz_rpc_park_each's flag (beside the public GAZ_RPC_PARK_*): the park
 * also ends when the stream's receiving does. */
#define PARK_RECV (1u << 8)

/* park_event_locked (c->mu held): whether an armed parked call has what it
 * waits for (a wake, its cancellation or expiry, its due time, room in its
 * response queue, with PARK_RECV the end of its receiving); if so it is
 * disarmed, and the caller hands it to park_resume once mu is released. */
static bool park_event_locked(struct gaz_rpc_call *c)
{
	bool event;

	if (c->park_state != PARK_ARMED)
		return false;
	event = c->woken || c->cancelled || expired_locked(c) ||
		((c->park_flags & PARK_RECV) &&
		 (c->each_rc || c->n_ahead || c->recv_end || c->eof || c->finished)) ||
		(c->park_due_ns != GAZ_DEADLINE_NEVER && gaz_mono_ns() >= c->park_due_ns) ||
		((c->park_flags & GAZ_RPC_PARK_SEND) &&
		 (c->send_failed || c->sendq_n <= SEND_QUEUE_LOW));
	if (event)
		c->park_state = PARK_NONE;
	return event;
}

/* park_unlink_locked (srv->mu held) takes a listed `c` off the timed list. */
static void park_unlink_locked(struct gaz_rpc_server *srv, struct gaz_rpc_call *c)
{
	if (c->park_prev)
		c->park_prev->park_next = c->park_next;
	else
		srv->parked = c->park_next;
	if (c->park_next)
		c->park_next->park_prev = c->park_prev;
	c->park_prev = c->park_next = NULL;
	c->park_listed = false;
}

/* park_unlist takes `c` off the timed list if it is on it (no lock held). */
static void park_unlist(struct gaz_rpc_call *c)
{
	struct gaz_rpc_server *srv = c->srv;
	bool last = false;

	srv_lock(srv);
	if (c->park_listed) {
		park_unlink_locked(srv, c);
		last = srv->stopping && !srv->parked;
	}
	pthread_mutex_unlock(&srv->mu);
	if (last) /* the timer exits now, not at the due time it sleeps to */
		pthread_cond_signal(&srv->park_cv);
}

/* park_resume hands a disarmed call to the pool, which runs its run_fn
 * (no lock held; the handler's reference moves with it). */
static void park_resume(struct gaz_rpc_call *c)
{
	park_unlist(c);
	pool_push(c->srv, c);
}

static void *worker_main(void *arg);

/* pool_stalled_locked (srv->mu held): when the pool should next grow past
 * its core threads (GAZ_DEADLINE_NEVER: no call waits for a thread, or
 * the pool is at max_handlers); at or before `now`, it starts a thread. */
static int64_t pool_stalled_locked(struct gaz_rpc_server *srv, int64_t now)
{
	int64_t at;
	int err;

	srv->grow_watched = srv->qhead && srv->queued > srv->idle &&
			    srv->nthreads < srv->opts.max_handlers && !srv->stopping;
	if (!srv->grow_watched)
		return GAZ_DEADLINE_NEVER;
	at = srv->qhead->queued_ns + POOL_STALL_NS;
	if (at < srv->grown_ns + POOL_STALL_NS)
		at = srv->grown_ns + POOL_STALL_NS;
	if (at > now)
		return at;
	if ((err = gaz__rpc_spawn(worker_main, srv)) == 0)
		srv->nthreads++;
	else
		gaz_error("cannot start rpc handler thread", "errno=%d threads=%d", err,
			  srv->nthreads);
	srv->grown_ns = now;
	return now + POOL_STALL_NS;
}

/* park_timer_main resumes timed parked calls at their due time, and grows
 * the pool past its core threads while they are blocked
 * (pool_stalled_locked); at shutdown it ends once the list is empty
 * (cancellation resumes every parked call). */
static void *park_timer_main(void *arg)
{
	struct gaz_rpc_server *srv = arg;

	pthread_setname_np(pthread_self(), "gaz-rpc-park");
	srv_lock(srv);
	for (;;) {
		int64_t now = gaz_mono_ns(), next = pool_stalled_locked(srv, now);
		struct gaz_rpc_call *c, *due = NULL;
		bool resume;

		for (c = srv->parked; c && !due; c = c->park_next) {
			if (c->park_timer_ns <= now)
				due = c;
			else if (c->park_timer_ns < next)
				next = c->park_timer_ns;
		}
		if (!due) {
			if (srv->stopping && !srv->parked)
				break;
			gaz__rpc_timedwait(&srv->park_cv, &srv->mu, next);
			continue;
		}
		/* Off the list, and a reference of our own: with srv->mu
		 * released, another event may resume and end the call. */
		park_unlink_locked(srv, due);
		atomic_fetch_add(&due->refs, 1);
		pthread_mutex_unlock(&srv->mu);
		pthread_mutex_lock(&due->mu);
		resume = park_event_locked(due);
		call_unref_locked(due, false); /* the handler's reference remains */
		if (resume)
			pool_push(srv, due);
		srv_lock(srv);
	}
	srv->park_timer_running = false;
	srv_unlock_signal(srv);
	return NULL;
}

/* park_timer_start_locked (srv->mu held) starts the parked calls' timer
 * unless it runs. Returns false if it cannot. */
static bool park_timer_start_locked(struct gaz_rpc_server *srv)
{
	if (!srv->park_timer_running) {
		if (gaz__rpc_spawn(park_timer_main, srv) != 0)
			return false;
		srv->park_timer_running = true;
	}
	return true;
}

/* park_list puts a call that asked to park (not yet armed, so nothing
 * else resumes it) on the timed list, due at `due_ns`. Returns false if
 * no timer thread can run. */
static bool park_list(struct gaz_rpc_call *c, int64_t due_ns)
{
	struct gaz_rpc_server *srv = c->srv;

	srv_lock(srv);
	if (!park_timer_start_locked(srv)) {
		pthread_mutex_unlock(&srv->mu);
		return false;
	}
	c->park_timer_ns = due_ns;
	c->park_prev = NULL;
	c->park_next = srv->parked;
	if (srv->parked)
		srv->parked->park_prev = c;
	srv->parked = c;
	c->park_listed = true;
	pthread_mutex_unlock(&srv->mu);
	pthread_cond_signal(&srv->park_cv);
	return true;
}

/* park_arm runs when the thread that asked to park `c` is done with it:
 * the call is listed for its due time, then armed, then resumed at once
 * if its event came meanwhile. Returns nothing; `c` may be running on
 * another thread, or freed, once this returns. */
static void park_arm(struct gaz_rpc_call *c)
{
	int64_t due;
	bool resume;

	pthread_mutex_lock(&c->mu);
	due = c->park_due_ns < c->expire_ns ? c->park_due_ns : c->expire_ns;
	pthread_mutex_unlock(&c->mu);
	if (due != GAZ_DEADLINE_NEVER && !park_list(c, due)) {
		gaz_error("cannot start the parked calls' timer; resuming at once", "method=%s",
			  c->m->path);
		pthread_mutex_lock(&c->mu);
		c->park_due_ns = gaz_mono_ns(); /* due now: a busy retry, never a hang */
		pthread_mutex_unlock(&c->mu);
	}
	pthread_mutex_lock(&c->mu);
	c->park_state = PARK_ARMED;
	resume = park_event_locked(c);
	pthread_mutex_unlock(&c->mu);
	if (resume)
		park_resume(c);
}

/* call_dispatch (mu not held) offers a read call to its method's fast
 * path, else queues it for a handler thread. */
static void call_dispatch(struct gaz_rpc_call *c)
{
	if (c->m->fast && c->m->fast(c, c->m->arg))
		return;
	pool_push(c->srv, c);
}

/* each_one unpacks `bb` (consumed) and hands it to e->fn. `e` is the
 * caller's own copy, never the call's field: mu is not held here. */
static int each_one(const struct each_cb *e, grpc_byte_buffer *bb)
{
	ProtobufCMessage *m = NULL;
	int rc = gaz__rpc_unpack(bb, e->desc, &m, NULL);

	grpc_byte_buffer_destroy(bb);
	return rc ? rc : e->fn(e->arg, m);
}

/* recv_arrived queues a completed receive (c->mu held, on a poller) and
 * starts the next one while the queue has room. */
static void recv_arrived(struct gaz_rpc_call *c)
{
	grpc_byte_buffer *bb = c->recv_bb;

	c->recv_bb = NULL;
	c->recv_op.done = false; /* consumed into the queue */
	if (!c->recv_op.ok || !bb) {
		/* grpc completes a receive with no message (and ok) both at the
		 * client's half-close and when the client resets the stream; the
		 * transport tells them apart, and grpc_call_failed_before_recv_message
		 * reports which. Read at once, it needs no write to the client
		 * and does not depend on the order of the call's completions. */
		c->recv_end = true;
		c->recv_end_ok = c->recv_op.ok && !grpc_call_failed_before_recv_message(c->gc);
		if (!c->recv_end_ok)
			c->cancelled = true; /* no close op may be watching yet */
		if (bb)
			grpc_byte_buffer_destroy(bb);
		return;
	}
	gaz_metric_inc(MM(c, received));
	if (c->each.fn && !c->each_rc && !c->n_ahead && !c->finished && !c->cancelled) {
		/* The handler waits in gaz_rpc_recv_each: run the message here,
		 * with no thread switch, then receive the next (one receive at
		 * a time keeps the order). The callback is copied before the
		 * unlock: once mu is released the handler's wait may end and
		 * clear c->each (it then waits for each_busy). */
		struct each_cb e = c->each;

		c->each_busy = true;
		pthread_mutex_unlock(&c->mu);
		int rc = each_one(&e, bb);
		pthread_mutex_lock(&c->mu);
		c->each_busy = false;
		if (!c->each.fn) /* the handler took the stream back: it waits for us */
			pthread_cond_broadcast(&c->cv);
		if (rc)
			c->each_rc = rc;
		else if (c->each.fn && !c->finished && !c->cancelled && each_recv_locked(c) != 0) {
			c->recv_end = true;
			c->recv_end_ok = 0;
		}
		return;
	}
	c->ahead[c->n_ahead++] = bb;
	c->ahead_bytes += grpc_byte_buffer_length(bb);
	if (c->n_ahead < RECV_AHEAD && c->ahead_bytes < RECV_AHEAD_BYTES && !c->finished && !c->cancelled && recv_start(c) != 0) {
		c->recv_end = true;
		c->recv_end_ok = 0;
	}
}

/* send_completed (c->mu held, on a poller) consumes a streamed
 * message's send_op completion, after which the next queued message goes
 * out. */
static void send_completed(struct gaz_rpc_call *c, int ok)
{
	grpc_op op = {.op = GRPC_OP_SEND_MESSAGE};

	c->send_op.done = false;
	if (c->send_bb)
		grpc_byte_buffer_destroy(c->send_bb);
	c->send_bb = NULL;
	if (c->send_counted)
		atomic_fetch_sub(&c->srv->packed_in_flight, 1);
	c->send_counted = false;
	if (!ok)
		c->send_failed = true;
	if (c->send_failed || c->cancelled) {
		while (c->sendq_n)
			grpc_byte_buffer_destroy(c->sendq[--c->sendq_n]);
		return;
	}
	if (c->sendq_n && !c->send_op.pending) {
		c->send_bb = c->sendq[0];
		op.flags = c->sendq_flags[0];
		memmove(c->sendq, c->sendq + 1, (size_t)--c->sendq_n * sizeof(*c->sendq));
		memmove(c->sendq_flags, c->sendq_flags + 1, (size_t)c->sendq_n * sizeof(*c->sendq_flags));
		op.data.send_message.send_message = c->send_bb;
		if (call_start(c, &c->send_op, &op, 1) != 0)
			c->send_failed = true;
	}
	if (c->each_held && c->sendq_n < SEND_QUEUE) {
		/* Room again: the held receive of an each-stream starts. With
		 * no callback set, the handler took the stream back and starts
		 * its own receive. */
		c->each_held = false;
		if (c->each.fn && !c->each_busy && !c->recv_op.pending && !c->recv_end &&
		    !c->n_ahead && !c->each_rc && !c->finished && !c->cancelled &&
		    !c->send_failed && recv_start(c) != 0) {
			c->recv_end = true;
			c->recv_end_ok = 0;
		}
	}
}

/* op_cb runs on a poller when a batch of a server call completes. */
static void op_cb(void *tag, int ok)
{
	struct optag *o = tag;
	struct gaz_rpc_call *c = o->call;

	bool dispatch, wake, resume;

	pthread_mutex_lock(&c->mu);
	o->pending = false;
	o->done = true;
	o->ok = ok;
	if (o == &c->close_op && (c->close_cancelled || !ok))
		c->cancelled = true;
	if (o == &c->recv_op)
		recv_arrived(c);
	if (o == &c->send_op)
		send_completed(c, ok);
	close_watch_locked(c);
	/* Wake the handler only for what it waits on: a handler waiting for
	 * a journal's append token must not wake for each message read
	 * ahead (thread switches are the cost of small appends). */
	wake = o == &c->close_op || (o == &c->recv_op && c->cancelled) ||
	       (o == &c->recv_op && c->recv_waiting &&
		(!c->each.fn || c->each_rc || c->recv_end || c->n_ahead)) ||
	       (o == &c->send_op && c->send_waiting &&
		(c->send_failed || c->cancelled || c->sendq_n <= c->send_wait_len ||
		 (!c->send_op.pending && !c->sendq_n)));
	dispatch = dispatch_ready(c);
	resume = park_event_locked(c);
	call_unref_locked(c, wake);
	if (dispatch) /* the handler's reference keeps c alive */
		call_dispatch(c);
	if (resume) /* ...as it does a parked call's */
		park_resume(c);
}

/* call_start starts a batch tagged `o`; c->mu held (released meanwhile so
 * pollers never wait on grpc work done here). Returns 0 or GAZ_EINVAL. */
static int call_start(struct gaz_rpc_call *c, struct optag *o, const grpc_op *ops, size_t n)
{
	grpc_call_error err;

	o->pending = true;
	o->done = false;
	c->refs++;
	pthread_mutex_unlock(&c->mu);
	err = gaz__rpc_start_batch(c->gc, ops, n, o);
	pthread_mutex_lock(&c->mu);
	if (err == GRPC_CALL_OK)
		return 0;
	gaz_error("grpc_call_start_batch failed", "method=%s err=%d", c->m->path, (int)err);
	o->pending = false;
	c->refs--;
	return GAZ_EINVAL;
}

static char *peer_of(struct gaz_rpc_server *srv, grpc_call *gc)
{
	char *p = grpc_call_get_peer(gc), *out = NULL;
	int fd;

	/* Calls on handed-over fds report "fd:N" (grpc-core.md §7.3): map N
	 * back to the address recorded at handover. */
	if (p && sscanf(p, "fd:%d", &fd) == 1) {
		srv_lock(srv);
		if (fd >= 0 && fd < srv->npeers && srv->peers[fd])
			out = strdup(srv->peers[fd]);
		pthread_mutex_unlock(&srv->mu);
	}
	if (!out)
		out = strdup(p ? p : "unknown");
	gpr_free(p);
	return out;
}

static void optag_init(struct optag *o, struct gaz_rpc_call *c)
{
	o->tag.cb = op_cb;
	o->call = c;
}

/* call_new takes the accepted call out of `r`, and `peer` (its address,
 * from peer_of). NULL on allocation failure (r keeps the call, the caller
 * `peer`). */
static struct gaz_rpc_call *call_new(struct req *r, char *peer)
{
	struct gaz_rpc_call *c = peer ? calloc(1, sizeof(*c)) : NULL;

	if (!c)
		return NULL;
	c->srv = r->srv;
	c->m = r->m;
	c->gc = r->gc;
	c->md = r->md;
	grpc_metadata_array_init(&r->md);
	r->gc = NULL;
	c->deadline_ns = gaz__rpc_from_gpr(r->deadline);
	c->expire_ns = GAZ_DEADLINE_NEVER;
	c->peer = peer;
	c->details = grpc_empty_slice();
	c->refs = 1; /* the handler's */
	pthread_mutex_init(&c->mu, NULL);
	gaz__rpc_cond_init(&c->cv);
	optag_init(&c->close_op, c);
	optag_init(&c->recv_op, c);
	optag_init(&c->send_op, c);
	optag_init(&c->fin_op, c);
	srv_lock(r->srv);
	r->srv->live++;
	pthread_mutex_unlock(&r->srv->mu);
	return c;
}

/* ---- handler pool ----------------------------------------------------- */

static void call_run(struct gaz_rpc_call *c)
{
	gaz_rpc_handler_fn fn = c->run_fn ? c->run_fn : c->m->fn;
	void *arg = c->run_fn ? c->run_arg : c->m->arg;
	bool parking;

	fn(c, arg);
	pthread_mutex_lock(&c->mu);
	parking = c->park_state == PARK_ASKED;
	pthread_mutex_unlock(&c->mu);
	if (parking) {
		park_arm(c);
		return;
	}
	if (!c->finished) {
		gaz_error("rpc handler returned without finishing", "method=%s", c->m->path);
		gaz_rpc_finish(c, NULL, GAZ_GRPC_INTERNAL, "handler ended without a status");
	}
	pthread_mutex_lock(&c->mu);
	call_unref_locked(c, false);
}

static struct gaz_rpc_call *pool_pop(struct gaz_rpc_server *srv)
{
	struct gaz_rpc_call *c = srv->qhead;

	if (c) {
		srv->qhead = c->next;
		if (!srv->qhead)
			srv->qtail = NULL;
		srv->queued--;
	}
	return c;
}

/* idle_wait (srv->mu held) waits on top of the idle stack until a push
 * or the stop takes this worker off it, or idle_thread_ms pass (returns
 * true: the worker exits). */
static bool idle_wait(struct gaz_rpc_server *srv)
{
	struct idle_worker w = {.below = srv->idle_top};
	int64_t deadline = gaz_mono_ns() + srv->opts.idle_thread_ms * GAZ_NS_PER_MS;
	bool expired = false;

	gaz__rpc_cond_init(&w.cv);
	if (w.below)
		w.below->above = &w;
	srv->idle_top = &w;
	srv->idle++;
	while (!w.woken && !expired)
		expired = gaz__rpc_timedwait(&w.cv, &srv->mu, deadline);
	if (!w.woken) { /* expired: off the stack by itself */
		if (w.above)
			w.above->below = w.below;
		else
			srv->idle_top = w.below;
		if (w.below)
			w.below->above = w.above;
		srv->idle--;
	}
	pthread_cond_destroy(&w.cv);
	return expired && !w.woken;
}

/* idle_wake_top (srv->mu held) takes the top idle worker off the stack
 * and wakes it (under mu: it may not go before its cv is signalled). */
static void idle_wake_top(struct gaz_rpc_server *srv)
{
	struct idle_worker *w = srv->idle_top;

	if (!w)
		return;
	srv->idle_top = w->below;
	if (w->below)
		w->below->above = NULL;
	w->woken = true;
	srv->idle--;
	pthread_cond_signal(&w->cv);
}

static void *worker_main(void *arg)
{
	struct gaz_rpc_server *srv = arg;
	struct gaz_rpc_call *c;
	bool idle_expired = false;

	pthread_setname_np(pthread_self(), "gaz-rpc-handler");
	srv_lock(srv);
	for (;;) {
		if ((c = pool_pop(srv))) {
			pthread_mutex_unlock(&srv->mu);
			call_run(c);
			srv_lock(srv);
			continue;
		}
		if (srv->stopping || idle_expired)
			break;
		idle_expired = idle_wait(srv);
	}
	srv->nthreads--;
	srv_unlock_signal(srv);
	return NULL;
}

/* pool_push queues an accepted or resumed call, starting a thread for it
 * when every thread is busy, up to core_handlers; past them the parked
 * calls' timer grows the pool while the queue stalls (pool_stalled_locked).
 * Never blocks (runs on pollers). */
static void pool_push(struct gaz_rpc_server *srv, struct gaz_rpc_call *c)
{
	bool stall = false;
	int err;

	srv_lock(srv);
	c->next = NULL;
	c->queued_ns = gaz_mono_ns();
	if (srv->qtail)
		srv->qtail->next = c;
	else
		srv->qhead = c;
	srv->qtail = c;
	srv->queued++;
	if (srv->queued > srv->idle && srv->nthreads < srv->opts.core_handlers) {
		if ((err = gaz__rpc_spawn(worker_main, srv)) == 0)
			srv->nthreads++;
		else
			gaz_error("cannot start rpc handler thread", "errno=%d threads=%d", err,
				  srv->nthreads);
	} else if (srv->queued > srv->idle && srv->nthreads < srv->opts.max_handlers &&
		   !srv->stopping && !srv->grow_watched) {
		stall = srv->grow_watched = park_timer_start_locked(srv);
	}
	idle_wake_top(srv);
	pthread_mutex_unlock(&srv->mu);
	if (stall) /* the timer has no due time for the pool: it looks now */
		pthread_cond_signal(&srv->park_cv);
}

/* timer_main hands GAZ_RPC_DISPATCH_READ calls to the pool at their
 * dispatch deadline if nothing else did; at shutdown, all at once. */
static void *timer_main(void *arg)
{
	struct gaz_rpc_server *srv = arg;
	struct gaz_rpc_call *c;
	bool dispatch;

	pthread_setname_np(pthread_self(), "gaz-rpc-timer");
	srv_lock(srv);
	for (;;) {
		if (!(c = srv->thead)) {
			if (srv->stopping)
				break;
			pthread_cond_wait(&srv->timer_cv, &srv->mu);
			continue;
		}
		if (!srv->stopping && c->dispatch_by_ns > gaz_mono_ns()) {
			/* Coarse: one wake-up serves every call due within a
			 * tick, not one per call. */
			gaz__rpc_timedwait(&srv->timer_cv, &srv->mu, c->dispatch_by_ns + TIMER_TICK_NS);
			continue;
		}
		srv->thead = c->tnext;
		if (!srv->thead)
			srv->ttail = NULL;
		pthread_mutex_unlock(&srv->mu);
		pthread_mutex_lock(&c->mu);
		dispatch = c->dispatch_pending;
		c->dispatch_pending = false;
		call_unref_locked(c, false); /* the handler's reference remains if dispatching */
		if (dispatch)
			pool_push(srv, c);
		srv_lock(srv);
	}
	srv->timer_running = false;
	srv_unlock_signal(srv);
	return NULL;
}

/* timer_add queues `c` (holding a reference for the timer) for dispatch
 * at its deadline. Returns false if no timer thread can run. */
static bool timer_add(struct gaz_rpc_server *srv, struct gaz_rpc_call *c)
{
	bool first;

	srv_lock(srv);
	if (!srv->timer_running) {
		if (srv->stopping || gaz__rpc_spawn(timer_main, srv) != 0) {
			pthread_mutex_unlock(&srv->mu);
			return false;
		}
		srv->timer_running = true;
	}
	c->tnext = NULL;
	first = !srv->thead;
	if (srv->ttail)
		srv->ttail->tnext = c;
	else
		srv->thead = c;
	srv->ttail = c;
	pthread_mutex_unlock(&srv->mu);
	if (first)
		pthread_cond_signal(&srv->timer_cv);
	return true;
}

/* pool_stop (srv->mu held) lets workers exit once the queue is empty and
 * waits for them and for every call to be destroyed. Calls left queued with
 * no thread (spawn failures) run here. */
static void pool_stop(struct gaz_rpc_server *srv)
{
	struct gaz_rpc_call *c;

	srv->stopping = true;
	pthread_cond_broadcast(&srv->work_cv);
	while (srv->idle_top)
		idle_wake_top(srv);
	pthread_cond_broadcast(&srv->timer_cv);
	pthread_cond_broadcast(&srv->park_cv);
	while (srv->nthreads > 0 || srv->live > 0 || srv->qhead || srv->timer_running ||
	       srv->park_timer_running) {
		if (srv->nthreads == 0 && (c = pool_pop(srv))) {
			pthread_mutex_unlock(&srv->mu);
			call_run(c);
			srv_lock(srv);
			continue;
		}
		pthread_cond_wait(&srv->cv, &srv->mu);
	}
}

/* ---- accepting -------------------------------------------------------- */

static void req_free(struct req *r)
{
	struct gaz_rpc_server *srv = r->srv;

	grpc_metadata_array_destroy(&r->md);
	grpc_call_details_destroy(&r->details);
	free(r);
	srv_lock(srv);
	srv->requests--;
	srv_unlock_signal(srv);
}

/* req_issue hands `r` to grpc (again); frees it once the server stops. */
static void req_issue(struct req *r)
{
	struct gaz_rpc_server *srv = r->srv;
	grpc_completion_queue *cq = gaz__rpc_cq();
	void *method = r->m ? r->m->handle : NULL;
	grpc_call_error err;
	bool stop;

	srv_lock(srv);
	stop = srv->state != SRV_STARTED;
	pthread_mutex_unlock(&srv->mu);
	if (stop) {
		req_free(r);
		return;
	}
	/* A request made after shutdown began completes with ok=0; requests
	 * stays counted until then, so the server outlives this call. Once
	 * given, `r` is the poller's (it may complete and be freed before
	 * grpc returns): nothing of it is read after this line. */
	gaz__rpc_tag_give(r);
	if (method)
		err = grpc_server_request_registered_call(srv->gs, method, &r->gc, &r->deadline,
							  &r->md, NULL, cq, cq, r);
	else
		err = grpc_server_request_call(srv->gs, &r->gc, &r->details, &r->md, cq, cq, r);
	if (err != GRPC_CALL_OK) {
		gaz_error("grpc request call failed", "err=%d", (int)err);
		req_free(r);
	}
}

struct answered;
static void answer_now(struct answered *u, int status, const char *text);
static struct answered *answered_new(struct req *r);

/* reject drops an accepted call we cannot serve (allocation failure). */
static void reject(grpc_call *gc, grpc_metadata_array *md)
{
	grpc_call_cancel_with_status(gc, GRPC_STATUS_RESOURCE_EXHAUSTED, "server out of memory",
				     NULL);
	grpc_metadata_array_destroy(md);
	grpc_metadata_array_init(md);
	grpc_call_unref(gc);
}

/* refuse_limited answers a GAZ_RPC_LIMITED call past the server's bounds
 * RESOURCE_EXHAUSTED on this poller, counted in the server metrics as a
 * call started and handled; the text names the bound that refused it. */
static void refuse_limited(struct req *r, enum limit_refusal why)
{
	struct method *m = r->m;
	struct gaz_rpc_server *srv = r->srv;
	struct answered *u = answered_new(r);
	char text[200];

	if (!u)
		return;
	if (why == LIMIT_NOMEM)
		snprintf(text, sizeof(text), "the server is out of memory");
	else
		snprintf(text, sizeof(text),
			 "%s has its limit of concurrent streams open (%d): retry later, or through "
			 "another connection or server",
			 why == LIMIT_CONN ? "this connection" : "the server",
			 why == LIMIT_CONN ? srv->opts.max_streams_per_conn : srv->opts.max_streams);
	if (m->mm) {
		const char *v[4] = {m->mm->labels[0], m->mm->labels[1], m->mm->labels[2],
				    code_names[GAZ_GRPC_RESOURCE_EXHAUSTED]};
		gaz_metric_inc(gaz_metric_withv(f_started, m->mm->labels));
		gaz_metric_inc(gaz_metric_withv(f_handled, v));
		gaz_metric_observe(gaz_metric_withv(f_seconds, m->mm->labels), 0);
	}
	answer_now(u, GRPC_STATUS_RESOURCE_EXHAUSTED, text);
}

static void accept_registered(struct req *r)
{
	struct gaz_rpc_server *srv = r->srv;
	bool limited = r->m->flags & GAZ_RPC_LIMITED;
	char *peer = peer_of(srv, r->gc);
	struct gaz_rpc_call *c;
	bool dispatch;

	if (limited) {
		enum limit_refusal refused;
		srv_lock(srv);
		refused = limit_take_locked(srv, peer);
		pthread_mutex_unlock(&srv->mu);
		if (refused != LIMIT_OK) {
			free(peer);
			refuse_limited(r, refused);
			req_issue(r);
			return;
		}
	}
	/* `r` goes back to grpc below: nothing of it is read after. */
	if ((c = call_new(r, peer)) != NULL) {
		c->limited = limited;
	} else {
		if (limited) {
			srv_lock(srv);
			limit_give_locked(srv, peer);
			pthread_mutex_unlock(&srv->mu);
		}
		free(peer);
		reject(r->gc, &r->md);
	}
	req_issue(r);
	if (!c)
		return;
	c->started_ns = gaz_mono_ns();
	gaz_metric_inc(MM(c, started));
	pthread_mutex_lock(&c->mu);
	/* The first request is on its way already: receive it while the
	 * handler thread is being dispatched. The close op waits until no
	 * receive is in flight (close_watch_locked). */
	if (recv_start(c) != 0) {
		c->recv_end = true; /* recv_end_ok 0: reads as cancelled */
		c->cancelled = true;
	}
	c->dispatch_pending = c->m->flags & GAZ_RPC_DISPATCH_READ;
	/* While call_start had mu released, another poller's completions may
	 * have read the whole request (they could not dispatch it: nothing was
	 * pending yet). Such a call is dispatched here as it would have been
	 * there, through its fast path. */
	dispatch = !c->dispatch_pending || dispatch_ready(c);
	if (!dispatch) {
		c->dispatch_by_ns = gaz_mono_ns() + DISPATCH_READ_NS;
		atomic_fetch_add(&c->refs, 1); /* the timer's */
	}
	pthread_mutex_unlock(&c->mu);
	if (dispatch) {
		call_dispatch(c);
		return;
	}
	if (!timer_add(c->srv, c)) {
		/* No timer: dispatch now, unless a completion just did; its
		 * request is not read yet, so not to the fast path. */
		pthread_mutex_lock(&c->mu);
		dispatch = c->dispatch_pending;
		c->dispatch_pending = false;
		call_unref_locked(c, false);
		if (dispatch)
			pool_push(c->srv, c);
	}
}

/* A call answered on the poller in one batch, never seen by a handler:
 * an unknown method's (UNIMPLEMENTED) or one past the bounds on open
 * streams (RESOURCE_EXHAUSTED). Counted in srv->live until its batch
 * completes. */
struct answered {
	struct gaz__tag tag;
	struct gaz_rpc_server *srv;
	grpc_call *gc;
	grpc_metadata_array md;
	grpc_call_details details;
	grpc_slice msg;
	int cancelled;
};

static void answered_cb(void *tag, int ok)
{
	struct answered *u = tag;
	struct gaz_rpc_server *srv = u->srv;

	(void)ok;
	grpc_metadata_array_destroy(&u->md);
	grpc_call_details_destroy(&u->details);
	grpc_slice_unref(u->msg);
	grpc_call_unref(u->gc);
	free(u);
	srv_lock(srv);
	srv->live--;
	srv_unlock_signal(srv);
}

/* answer_now ends `u`'s call with `status` and `text` (copied). */
static void answer_now(struct answered *u, int status, const char *text)
{
	grpc_op ops[3] = {{.op = GRPC_OP_SEND_INITIAL_METADATA},
			  {.op = GRPC_OP_SEND_STATUS_FROM_SERVER},
			  {.op = GRPC_OP_RECV_CLOSE_ON_SERVER}};

	u->msg = grpc_slice_from_copied_string(text);
	ops[1].data.send_status_from_server.status = (grpc_status_code)status;
	ops[1].data.send_status_from_server.status_details = &u->msg;
	ops[2].data.recv_close_on_server.cancelled = &u->cancelled;
	if (gaz__rpc_start_batch(u->gc, ops, 3, u) != GRPC_CALL_OK)
		answered_cb(u, 0);
}

/* answered_new takes the accepted call out of `r` (before it is issued
 * again). NULL when out of memory: the call is dropped (reject). */
static struct answered *answered_new(struct req *r)
{
	struct answered *u = calloc(1, sizeof(*u));

	if (!u) {
		reject(r->gc, &r->md);
		return NULL;
	}
	u->tag.cb = answered_cb;
	u->srv = r->srv;
	u->gc = r->gc;
	u->md = r->md;
	u->details = r->details;
	r->gc = NULL;
	grpc_metadata_array_init(&r->md);
	grpc_call_details_init(&r->details);
	srv_lock(u->srv);
	u->srv->live++;
	pthread_mutex_unlock(&u->srv->mu);
	u->msg = grpc_empty_slice();
	return u;
}

static void accept_unknown(struct req *r)
{
	struct answered *u = answered_new(r);
	char *method, text[300];

	req_issue(r);
	if (!u)
		return;
	method = grpc_slice_to_c_string(u->details.method);
	snprintf(text, sizeof(text), "unknown method %.256s", method);
	gpr_free(method);
	answer_now(u, GRPC_STATUS_UNIMPLEMENTED, text);
}

/* accept_cb runs on a poller when a request tag completes: a new call, or
 * ok=0 when the server is shutting down. */
static void accept_cb(void *tag, int ok)
{
	struct req *r = tag;

	if (!ok)
		req_free(r);
	else if (r->m)
		accept_registered(r);
	else
		accept_unknown(r);
}

static void shutdown_cb(void *tag, int ok)
{
	struct gaz_rpc_server *srv =
		(struct gaz_rpc_server *)((char *)tag - offsetof(struct gaz_rpc_server, shutdown_tag));

	(void)ok;
	srv_lock(srv);
	srv->shutdown_done = true;
	srv_unlock_signal(srv);
}

/* ---- server lifecycle ------------------------------------------------- */

static grpc_server *server_create(const struct gaz_rpc_server_opts *o)
{
	grpc_arg a[8] = {0};
	int n = 0;

#define INT_ARG(k, v) (a[n].type = GRPC_ARG_INTEGER, a[n].key = (char *)(k), a[n++].value.integer = (v))
	INT_ARG(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, o->max_recv_bytes); /* P3 */
	INT_ARG(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, -1);
	INT_ARG(GRPC_ARG_KEEPALIVE_TIME_MS, o->keepalive_ms);
	INT_ARG(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
	INT_ARG(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
	/* Go clients ping idle connections (P4): never GOAWAY them for it. */
	INT_ARG(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
	INT_ARG(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
#undef INT_ARG
	grpc_channel_args args = {.num_args = (size_t)n, .args = a};
	return grpc_server_create(&args, NULL);
}

struct gaz_rpc_server *gaz_rpc_server_new(const struct gaz_rpc_server_opts *opts)
{
	struct gaz_rpc_server *srv = calloc(1, sizeof(*srv));

	if (!srv || !gaz__rpc_cq()) {
		free(srv);
		return NULL;
	}
	if (opts)
		srv->opts = *opts;
	if (srv->opts.max_recv_bytes <= 0)
		srv->opts.max_recv_bytes = 4 << 20;
	if (srv->opts.max_handlers <= 0)
		srv->opts.max_handlers = 4096;
	if (srv->opts.core_handlers <= 0) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		srv->opts.core_handlers = cpus > 16 ? 4 * (int)cpus : 64;
	}
	if (srv->opts.core_handlers > srv->opts.max_handlers)
		srv->opts.core_handlers = srv->opts.max_handlers;
	if (srv->opts.keepalive_ms <= 0)
		srv->opts.keepalive_ms = 30000;
	if (srv->opts.idle_thread_ms <= 0) {
		const char *e = getenv("GAZ_RPC_IDLE_THREAD_MS");
		srv->opts.idle_thread_ms = e && atoll(e) > 0 ? atoll(e) : IDLE_THREAD_MS;
	}
	pthread_mutex_init(&srv->mu, NULL);
	gaz__rpc_cond_init(&srv->cv);
	gaz__rpc_cond_init(&srv->work_cv);
	gaz__rpc_cond_init(&srv->timer_cv);
	gaz__rpc_cond_init(&srv->park_cv);
	srv->shutdown_tag.cb = shutdown_cb;
	srv->gs = server_create(&srv->opts);
	srv->fd_creds = grpc_insecure_server_credentials_create();
	grpc_server_register_completion_queue(srv->gs, gaz__rpc_cq(), NULL);
	return srv;
}

int gaz_rpc_server_register(struct gaz_rpc_server *srv, const char *path, gaz_rpc_handler_fn fn,
			    void *arg)
{
	return gaz_rpc_server_register_flags(srv, path, fn, arg, 0);
}

int gaz_rpc_server_register_flags(struct gaz_rpc_server *srv, const char *path,
				  gaz_rpc_handler_fn fn, void *arg, unsigned flags)
{
	return gaz_rpc_server_register_fast(srv, path, fn, NULL, arg, flags);
}

int gaz_rpc_server_register_fast(struct gaz_rpc_server *srv, const char *path,
				 gaz_rpc_handler_fn fn, gaz_rpc_fast_fn fast, void *arg,
				 unsigned flags)
{
	struct method *m, **ms;

	if (fast && !(flags & GAZ_RPC_DISPATCH_READ))
		return GAZ_EINVAL;
	if (!srv || !path || path[0] != '/' || !fn || srv->state != SRV_NEW)
		return GAZ_EINVAL;
	ms = realloc(srv->methods, (srv->nmethods + 1) * sizeof(*ms));
	if (!ms)
		return GAZ_ENOMEM;
	srv->methods = ms;
	if (!(m = calloc(1, sizeof(*m))) || !(m->path = strdup(path))) {
		free(m);
		return GAZ_ENOMEM;
	}
	m->handle = grpc_server_register_method(srv->gs, path, NULL, GRPC_SRM_PAYLOAD_NONE, 0);
	if (!m->handle) { /* duplicate path */
		free(m->path);
		free(m);
		return GAZ_EINVAL;
	}
	m->fn = fn;
	m->arg = arg;
	m->flags = flags;
	m->fast = fast;
	m->mm = srv->metrics ? method_metrics_new(m->path, flags) : NULL;
	ms[srv->nmethods++] = m;
	return 0;
}

static void req_new(struct gaz_rpc_server *srv, struct method *m)
{
	struct req *r = calloc(1, sizeof(*r));

	if (!r) {
		gaz_error("cannot allocate rpc request", "path=%s", m ? m->path : "*");
		return;
	}
	r->tag.cb = accept_cb;
	r->srv = srv;
	r->m = m;
	grpc_metadata_array_init(&r->md);
	grpc_call_details_init(&r->details);
	srv_lock(srv);
	srv->requests++;
	pthread_mutex_unlock(&srv->mu);
	req_issue(r);
}

int gaz_rpc_server_start(struct gaz_rpc_server *srv, const char *listen_addr, int *port_out)
{
	int port = 0;

	if (srv->state != SRV_NEW)
		return GAZ_EINVAL;
	if (listen_addr) {
		grpc_server_credentials *c = grpc_insecure_server_credentials_create();
		port = grpc_server_add_http2_port(srv->gs, listen_addr, c);
		grpc_server_credentials_release(c);
		if (port == 0) {
			gaz_error("cannot listen for grpc", "addr=%s", listen_addr);
			return GAZ_EIO;
		}
	}
	if (port_out)
		*port_out = port;
	grpc_server_start(srv->gs); /* before any add_fd (R2) */
	srv_lock(srv);
	srv->state = SRV_STARTED;
	pthread_mutex_unlock(&srv->mu);
	for (size_t i = 0; i < srv->nmethods; i++)
		for (int k = 0; k < REQS_PER_METHOD; k++)
			req_new(srv, srv->methods[i]);
	req_new(srv, NULL);
	return 0;
}

/* peer_record (srv->mu held) remembers the address behind fd number `fd`. */
static void peer_record(struct gaz_rpc_server *srv, int fd, const char *peer)
{
	if (fd >= srv->npeers) {
		int n = fd + 64;
		char **p = realloc(srv->peers, (size_t)n * sizeof(*p));
		if (!p)
			return;
		memset(p + srv->npeers, 0, (size_t)(n - srv->npeers) * sizeof(*p));
		srv->peers = p;
		srv->npeers = n;
	}
	free(srv->peers[fd]);
	srv->peers[fd] = peer ? strdup(peer) : NULL;
}

int gaz_rpc_server_add_fd(struct gaz_rpc_server *srv, int fd, const char *peer)
{
	int one = 1, fl;

	srv_lock(srv);
	if (srv->state != SRV_STARTED) {
		pthread_mutex_unlock(&srv->mu);
		close(fd);
		return GAZ_ESTOPPED;
	}
	srv->handovers++;
	peer_record(srv, fd, peer);
	pthread_mutex_unlock(&srv->mu);
	/* R3: grpc's reader deadlocks on a blocking fd; R5: latency. */
	fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, (fl < 0 ? 0 : fl) | O_NONBLOCK);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* fails on unix: fine */
	grpc_server_add_channel_from_fd(srv->gs, fd, srv->fd_creds);
	srv_lock(srv);
	srv->handovers--;
	srv_unlock_signal(srv);
	return 0;
}

/* wait_shutdown_tag (srv->mu held) waits for the shutdown tag or deadline_ns. */
static void wait_shutdown_tag(struct gaz_rpc_server *srv, int64_t deadline_ns)
{
	while (!srv->shutdown_done && !gaz__rpc_timedwait(&srv->cv, &srv->mu, deadline_ns))
		;
}

void gaz_rpc_server_shutdown(struct gaz_rpc_server *srv, int64_t grace_ms)
{
	srv_lock(srv);
	if (srv->state != SRV_NEW && srv->state != SRV_STARTED) {
		while (srv->state != SRV_STOPPED)
			pthread_cond_wait(&srv->cv, &srv->mu);
		pthread_mutex_unlock(&srv->mu);
		return;
	}
	if (srv->state == SRV_STARTED) {
		srv->state = SRV_STOPPING;
		while (srv->handovers > 0) /* R2: no add_fd may follow shutdown */
			pthread_cond_wait(&srv->cv, &srv->mu);
		pthread_mutex_unlock(&srv->mu);
		gaz__rpc_tag_give(&srv->shutdown_tag);
		grpc_server_shutdown_and_notify(srv->gs, gaz__rpc_cq(), &srv->shutdown_tag);
		srv_lock(srv);
		wait_shutdown_tag(srv, gaz_mono_ns() + (grace_ms > 0 ? grace_ms : 0) * GAZ_NS_PER_MS);
		pthread_mutex_unlock(&srv->mu);
		grpc_server_cancel_all_calls(srv->gs);
		srv_lock(srv);
		wait_shutdown_tag(srv, GAZ_DEADLINE_NEVER);
		while (srv->requests > 0)
			pthread_cond_wait(&srv->cv, &srv->mu);
		pool_stop(srv);
	}
	pthread_mutex_unlock(&srv->mu);
	grpc_server_destroy(srv->gs);
	srv_lock(srv);
	srv->gs = NULL;
	srv->state = SRV_STOPPED;
	srv_unlock_signal(srv);
}

void gaz_rpc_server_free(struct gaz_rpc_server *srv)
{
	if (!srv)
		return;
	gaz_rpc_server_shutdown(srv, 0);
	for (size_t i = 0; i < srv->nmethods; i++) {
		free(srv->methods[i]->path);
		free(srv->methods[i]->mm);
		free(srv->methods[i]);
	}
	free(srv->methods);
	for (int i = 0; i < srv->npeers; i++)
		free(srv->peers[i]);
	free(srv->peers);
	/* Every call is freed by now, so every count is gone too. */
	free(srv->conns);
	grpc_server_credentials_release(srv->fd_creds);
	pthread_cond_destroy(&srv->work_cv);
	pthread_cond_destroy(&srv->timer_cv);
	pthread_cond_destroy(&srv->park_cv);
	pthread_cond_destroy(&srv->cv);
	pthread_mutex_destroy(&srv->mu);
	free(srv);
}

/* ---- server call helpers (handler thread) ---------------------------- */

/* eof_confirmed (c->mu held), for a receive that ended at the client's
 * half-close (recv_end_ok): true (and marks EOF) unless the call was
 * cancelled since. */
static bool eof_confirmed(struct gaz_rpc_call *c)
{
	c->eof = !c->cancelled;
	return c->eof;
}

static bool local_expired(struct gaz_rpc_call *c);

/* A local call's next request, then EOF; mu not held by the caller. */
static int local_recv(struct gaz_rpc_call *c, grpc_byte_buffer **bb)
{
	int rc = GAZ_EOF;

	pthread_mutex_lock(&c->mu);
	if (c->finished || local_expired(c))
		rc = GAZ_ECANCELLED;
	else if (c->local_next < c->local_n) {
		*bb = c->local_reqs[c->local_next];
		c->local_reqs[c->local_next++] = NULL;
		rc = 0;
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

/* recv_bb receives the next message's byte buffer into *bb (owned by the
 * caller): from the read-ahead queue when something arrived already, else
 * starting a receive and waiting for it. Returns 0, GAZ_EOF, GAZ_ECANCELLED
 * or GAZ_ETIMEDOUT (the receive stays in flight for the next call). */
/* ahead_pop (c->mu held, n_ahead > 0) takes the oldest message read
 * ahead and keeps a receive in flight behind it. */
static grpc_byte_buffer *ahead_pop(struct gaz_rpc_call *c)
{
	grpc_byte_buffer *bb = c->ahead[0];

	memmove(c->ahead, c->ahead + 1, (size_t)--c->n_ahead * sizeof(*c->ahead));
	c->ahead_bytes -= grpc_byte_buffer_length(bb);
	if (!c->recv_op.pending && !c->recv_end && !c->cancelled && recv_start(c) != 0) {
		c->recv_end = true;
		c->recv_end_ok = 0;
	}
	return bb;
}

/* stream_over (c->mu held): GAZ_EOF or GAZ_ECANCELLED once no message is
 * left to receive (a half-close confirmed), else 0. A message read ahead
 * is still to be received, unless the handler finished. */
/* expired_locked (mu held): past gaz_rpc_expire_at's time, the call is
 * cancelled with DEADLINE_EXCEEDED (once) and true returned. */
static bool expired_locked(struct gaz_rpc_call *c)
{
	if (c->expire_ns == GAZ_DEADLINE_NEVER || gaz_mono_ns() < c->expire_ns)
		return false;
	if (!c->cancelled) {
		c->cancelled = true;
		if (c->gc)
			grpc_call_cancel_with_status(c->gc, GRPC_STATUS_DEADLINE_EXCEEDED,
						     "authorization expired", NULL);
	}
	return true;
}

/* until: the earlier of a wait's deadline and the call's expiry. */
static int64_t until(const struct gaz_rpc_call *c, int64_t deadline_ns)
{
	return c->expire_ns < deadline_ns ? c->expire_ns : deadline_ns;
}

static int stream_over(struct gaz_rpc_call *c)
{
	if (c->eof || c->finished)
		return c->eof ? GAZ_EOF : GAZ_ECANCELLED;
	if (c->n_ahead)
		return 0;
	if (c->recv_end)
		return c->recv_end_ok && eof_confirmed(c) ? GAZ_EOF : GAZ_ECANCELLED;
	return c->cancelled ? GAZ_ECANCELLED : 0;
}

static int recv_bb(struct gaz_rpc_call *c, grpc_byte_buffer **bb, int64_t deadline_ns)
{
	bool timed_out;
	int rc = 0;

	*bb = NULL;
	if (!c->gc)
		return local_recv(c, bb);
	pthread_mutex_lock(&c->mu);
	for (;;) {
		expired_locked(c);
		if ((rc = stream_over(c)))
			break;
		if (c->n_ahead) {
			*bb = ahead_pop(c);
			break;
		}
		if (!c->recv_op.pending) {
			if (recv_start(c) != 0) {
				rc = GAZ_ECANCELLED;
				break;
			}
			continue; /* mu was dropped: it may have arrived already */
		}
		c->recv_waiting = true;
		timed_out = gaz__rpc_timedwait(&c->cv, &c->mu, until(c, deadline_ns));
		c->recv_waiting = false;
		if (timed_out && expired_locked(c))
			continue;
		if (timed_out && !c->n_ahead && !c->recv_end) {
			rc = GAZ_ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

int gaz_rpc_recv_each(struct gaz_rpc_call *c, const ProtobufCMessageDescriptor *desc,
		      int (*fn)(void *arg, ProtobufCMessage *m), void *arg, int64_t deadline_ns)
{
	const struct each_cb e = {.fn = fn, .desc = desc, .arg = arg};
	grpc_byte_buffer *bb = NULL;
	int rc;

	if (!c->gc) { /* a local call: its messages on this thread */
		while ((rc = local_recv(c, &bb)) == 0)
			if ((rc = each_one(&e, bb)))
				return rc;
		return rc;
	}
	pthread_mutex_lock(&c->mu);
	/* The stream is this thread's from here: a park's callback
	 * (gaz_rpc_park_each) runs no more once one running now returns.
	 * Left registered, it would take a message the next receive brings
	 * while this thread runs fn on one read ahead, or after it returned
	 * fn's code: two fn calls at once, out of order. */
	c->each = (struct each_cb){0};
	while (c->each_busy)
		pthread_cond_wait(&c->cv, &c->mu);
	for (;;) {
		bool timed_out;
		expired_locked(c);
		if ((rc = stream_over(c)))
			break;
		if (c->n_ahead) { /* read ahead before we came: here, in order */
			bb = ahead_pop(c);
			pthread_mutex_unlock(&c->mu);
			rc = each_one(&e, bb);
			pthread_mutex_lock(&c->mu);
			if (rc)
				break;
			continue;
		}
		if (c->each_rc) { /* a park's callback ended it: no receive more */
			rc = c->each_rc;
			c->each_rc = 0;
			break;
		}
		if (!c->recv_op.pending && !c->each_held && each_recv_locked(c) != 0) {
			rc = GAZ_ECANCELLED;
			break;
		}
		c->each = e;
		c->recv_waiting = true;
		timed_out = gaz__rpc_timedwait(&c->cv, &c->mu, until(c, deadline_ns));
		c->recv_waiting = false;
		c->each = (struct each_cb){0};
		while (c->each_busy) /* a poller is still in fn: it wakes us after */
			pthread_cond_wait(&c->cv, &c->mu);
		if (c->each_rc) {
			rc = c->each_rc;
			c->each_rc = 0;
			break;
		}
		if (!c->recv_op.pending && !c->recv_end && !c->n_ahead && !c->cancelled &&
		    !c->finished && !c->each_held && each_recv_locked(c) != 0) {
			rc = GAZ_ECANCELLED; /* fn ran last, the next receive did not start */
			break;
		}
		if (timed_out && expired_locked(c))
			continue;
		if (timed_out && !c->n_ahead && !c->recv_end && !c->cancelled) {
			rc = GAZ_ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

int gaz_rpc_recv(struct gaz_rpc_call *call, const ProtobufCMessageDescriptor *desc,
		 ProtobufCMessage **out, int64_t deadline_ns)
{
	grpc_byte_buffer *bb;
	int rc = recv_bb(call, &bb, deadline_ns);

	*out = NULL;
	if (rc != 0)
		return rc;
	rc = gaz__rpc_unpack(bb, desc, out, NULL);
	grpc_byte_buffer_destroy(bb);
	return rc;
}

int gaz_rpc_recv_raw(struct gaz_rpc_call *call, uint8_t **buf, size_t *len, int64_t deadline_ns)
{
	grpc_byte_buffer *bb;
	int rc = recv_bb(call, &bb, deadline_ns);

	*buf = NULL;
	*len = 0;
	if (rc != 0)
		return rc;
	rc = gaz__rpc_copy_out(bb, buf, len);
	grpc_byte_buffer_destroy(bb);
	return rc;
}

/* send_settle (c->mu held) waits until every streamed message went out
 * (or one failed) and returns whether they all did. */
static bool send_settle(struct gaz_rpc_call *c)
{
	c->send_waiting = true;
	c->send_wait_len = -1;
	while (c->send_op.pending || (c->sendq_n && !c->send_failed && !c->cancelled))
		pthread_cond_wait(&c->cv, &c->mu);
	c->send_waiting = false;
	return !c->send_failed;
}

/* send_start_locked (call->mu held, nothing in flight or queued) starts
 * the streamed message `bb` with write `flags`, the call's initial
 * metadata with it if not yet sent. Returns 0 (the completion, on a
 * poller, destroys bb) or GAZ_EINVAL (bb is still the caller's). */
static int send_start_locked(struct gaz_rpc_call *call, grpc_byte_buffer *bb, uint32_t flags)
{
	grpc_op ops[2] = {{.op = GRPC_OP_SEND_INITIAL_METADATA}, {.op = GRPC_OP_SEND_MESSAGE}};
	size_t k = call->md_sent ? 0 : 1; /* initial metadata travels with the first message */

	call->md_sent = true;
	ops[1].data.send_message.send_message = bb;
	ops[1].flags = flags;
	/* Before the start: the completion (on a poller, while call_start
	 * has mu released) frees it. */
	call->send_bb = bb;
	if (call_start(call, &call->send_op, ops + 1 - k, k + 1) == 0)
		return 0;
	call->send_bb = NULL;
	return GAZ_EINVAL;
}

/* sendq_push_locked queues `bb` (call->mu held, room checked) behind the
 * message in flight, to go out with write `flags`. */
static void sendq_push_locked(struct gaz_rpc_call *call, grpc_byte_buffer *bb, uint32_t flags)
{
	call->sendq_flags[call->sendq_n] = flags;
	call->sendq[call->sendq_n++] = bb;
}

int gaz_rpc_send(struct gaz_rpc_call *call, const ProtobufCMessage *msg)
{
	grpc_byte_buffer *bb = gaz__rpc_pack(msg);
	int ok = 0;

	pthread_mutex_lock(&call->mu);
	if (call->finished || call->cancelled)
		goto out;
	if (!call->gc) { /* a local call has no reader of streamed responses */
		ok = !local_expired(call);
		goto out;
	}
	if (call->send_op.pending || call->sendq_n) {
		/* Queue behind the send in flight (grpc allows one at a time);
		 * when full, wait for the poller to drain it. A poller (a
		 * gaz_rpc_recv_each callback) cannot wait for itself: it may
		 * queue SEND_SLACK more while its stream's receives are held;
		 * a callback sending more than that fails the call. */
		if (call->sendq_n >= SEND_QUEUE && gaz__rpc_on_poller() &&
		    call->sendq_n < SEND_QUEUE + SEND_SLACK) {
			/* A callback's answer: its stream's next receive waits for
			 * room (each_recv_locked), so the queue stays bounded. */
			sendq_push_locked(call, bb, 0);
			bb = NULL;
			ok = 1;
			goto out;
		}
		if (call->sendq_n >= SEND_QUEUE && gaz__rpc_on_poller()) {
			gaz_warn("response queue full on a poller; cancelling the call", "method=%s",
				 call->m->path);
			grpc_call_cancel_with_status(call->gc, GRPC_STATUS_RESOURCE_EXHAUSTED,
						     "peer does not read its responses", NULL);
			call->cancelled = true;
			goto out;
		}
		call->send_waiting = true;
		call->send_wait_len = SEND_QUEUE_LOW;
		while (call->sendq_n >= SEND_QUEUE && !call->send_failed && !call->cancelled)
			pthread_cond_wait(&call->cv, &call->mu);
		call->send_waiting = false;
		if (call->send_failed || call->cancelled) {
			call->cancelled = true;
			goto out;
		}
		if (call->send_op.pending || call->sendq_n) {
			sendq_push_locked(call, bb, 0);
			bb = NULL;
			ok = 1;
			goto out;
		}
	}
	if (call->send_failed) {
		call->cancelled = true;
		goto out;
	}
	if (send_start_locked(call, bb, 0) == 0) {
		bb = NULL;
		ok = 1;
	}
out:
	pthread_mutex_unlock(&call->mu);
	if (bb)
		grpc_byte_buffer_destroy(bb);
	if (ok && call->gc)
		gaz_metric_inc(MM(call, sent));
	return ok ? 0 : GAZ_ECANCELLED;
}

int gaz_rpc_send_packed_now(struct gaz_rpc_call *call, struct gaz_rpc_packed *const *msgs,
			    size_t n)
{
	size_t room, i, start_first;
	int rc = 0;

	if (!n)
		return 0;
	pthread_mutex_lock(&call->mu);
	if (!call->gc || call->finished || call->cancelled || call->send_failed) {
		rc = GAZ_ECANCELLED;
		goto out;
	}
	/* Nothing in flight: the first starts now, beside a full queue. */
	start_first = call->send_op.pending || call->sendq_n ? 0 : 1;
	room = (size_t)(call->sendq_n < SEND_QUEUE ? SEND_QUEUE - call->sendq_n : 0) + start_first;
	if (n > room) {
		rc = GAZ_ERANGE;
		goto out;
	}
	/* Each byte buffer takes its own reference to the packed slice. */
	for (i = start_first; i < n; i++) {
		grpc_slice slice = msgs[i]->slice;
		sendq_push_locked(call, grpc_raw_byte_buffer_create(&slice, 1),
				  i + 1 < n ? GRPC_WRITE_BUFFER_HINT : 0);
	}
	if (start_first) {
		/* Nothing in flight: the first goes out now, the rest follow it
		 * from its completion (send_completed). They are queued before
		 * the start, which releases mu. */
		grpc_slice slice = msgs[0]->slice;
		grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&slice, 1);
		call->send_counted = true;
		atomic_fetch_add(&call->srv->packed_in_flight, 1);
		if (send_start_locked(call, bb, n > 1 ? GRPC_WRITE_BUFFER_HINT : 0) != 0) {
			call->send_counted = false;
			atomic_fetch_sub(&call->srv->packed_in_flight, 1);
			grpc_byte_buffer_destroy(bb);
			for (i = 1; i < n; i++) /* no op started: nothing else took them */
				grpc_byte_buffer_destroy(call->sendq[--call->sendq_n]);
			call->send_failed = true;
			rc = GAZ_ECANCELLED;
		}
	}
out:
	pthread_mutex_unlock(&call->mu);
	if (!rc)
		gaz_metric_add(MM(call, sent), (int64_t)n);
	return rc;
}

long gaz_rpc_server_packed_in_flight(struct gaz_rpc_server *srv)
{
	return atomic_load(&srv->packed_in_flight);
}

static grpc_status_code status_code_of(int code)
{
	if (code < 0)
		return (grpc_status_code)gaz_err_grpc_code(code);
	return code <= GRPC_STATUS_UNAUTHENTICATED ? (grpc_status_code)code : GRPC_STATUS_UNKNOWN;
}

int gaz_rpc_finish(struct gaz_rpc_call *call, const ProtobufCMessage *resp, int code,
		   const char *msg)
{
	grpc_op ops[3] = {{.op = GRPC_OP_SEND_INITIAL_METADATA}};
	grpc_byte_buffer *bb = resp ? gaz__rpc_pack(resp) : NULL;
	size_t n = 0;
	int ok = 0;

	pthread_mutex_lock(&call->mu);
	if (call->finished) {
		pthread_mutex_unlock(&call->mu);
		if (bb)
			grpc_byte_buffer_destroy(bb);
		return GAZ_EINVAL;
	}
	if (call->gc)
		send_settle(call); /* one send at a time, the status after it */
	call->finished = true;
	if (!call->gc) {
		call->local_resp = bb;
		call->local_code = status_code_of(code);
		call->local_msg = msg ? strdup(msg) : NULL;
		pthread_mutex_unlock(&call->mu);
		return 0;
	}
	if (!call->md_sent)
		n++;
	call->md_sent = true;
	if (bb) {
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = bb;
	}
	call->details = msg ? grpc_slice_from_copied_string(msg) : grpc_empty_slice();
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = status_code_of(code);
	ops[n++].data.send_status_from_server.status_details = msg ? &call->details : NULL;
	/* The status goes out without waiting for the batch: the handler is
	 * done, and the batch's reference keeps the call (and the response,
	 * freed with it) alive until grpc completes it. */
	call->fin_bb = bb;
	ok = call_start(call, &call->fin_op, ops, n) == 0 && !call->cancelled;
	pthread_mutex_unlock(&call->mu);
	/* finished is set: no other finish gets here, and the caller still
	 * holds the call. */
	if (bb)
		gaz_metric_inc(MM(call, sent));
	metrics_handled(call, (int)status_code_of(code));
	if (call->m && call->srv->on_finish)
		call->srv->on_finish(call->m->arg, (int)status_code_of(code), call->outcome);
	return ok ? 0 : GAZ_ECANCELLED;
}

void gaz_rpc_set_outcome(struct gaz_rpc_call *call, int outcome)
{
	call->outcome = outcome;
}

int gaz_rpc_server_on_finish(struct gaz_rpc_server *srv, gaz_rpc_finish_fn fn)
{
	if (!srv || srv->state != SRV_NEW)
		return GAZ_EINVAL;
	srv->on_finish = fn;
	return 0;
}

int gaz_rpc_peek(struct gaz_rpc_call *call, size_t i, const ProtobufCMessageDescriptor *desc,
		 ProtobufCMessage **out)
{
	int rc = GAZ_ETIMEDOUT;

	*out = NULL;
	pthread_mutex_lock(&call->mu);
	if (call->cancelled || call->finished)
		rc = GAZ_ECANCELLED;
	else if (i < (size_t)call->n_ahead)
		rc = gaz__rpc_unpack(call->ahead[i], desc, out, NULL);
	else if (i == (size_t)call->n_ahead && call->recv_end && call->recv_end_ok)
		rc = GAZ_EOF; /* the client half-closed */
	pthread_mutex_unlock(&call->mu);
	return rc;
}

int gaz_rpc_peek_size(struct gaz_rpc_call *call, size_t *n, size_t *bytes)
{
	int rc;

	pthread_mutex_lock(&call->mu);
	*n = (size_t)call->n_ahead;
	*bytes = call->ahead_bytes;
	rc = !call->cancelled && call->recv_end && call->recv_end_ok ? GAZ_EOF : 0;
	pthread_mutex_unlock(&call->mu);
	return rc;
}

void gaz_rpc_dispatch(struct gaz_rpc_call *call)
{
	pool_push(call->srv, call);
}

void gaz_rpc_unpark(struct gaz_rpc_call *call)
{
	if (!call->finished)
		gaz_rpc_finish(call, NULL, GAZ_GRPC_INTERNAL, "parked call ended without a status");
	pthread_mutex_lock(&call->mu);
	call_unref_locked(call, false);
}

bool gaz_rpc_cancelled(struct gaz_rpc_call *call)
{
	bool c;

	pthread_mutex_lock(&call->mu);
	c = call->cancelled || (!call->gc && local_expired(call));
	pthread_mutex_unlock(&call->mu);
	return c;
}

void gaz_rpc_wake(struct gaz_rpc_call *call)
{
	bool resume;

	pthread_mutex_lock(&call->mu);
	call->woken = true;
	resume = park_event_locked(call);
	pthread_mutex_unlock(&call->mu);
	pthread_cond_broadcast(&call->cv); /* the caller keeps the call alive */
	if (resume)
		park_resume(call);
}

/* park_ask_locked (call->mu held) records what the thread that holds
 * the call asks for its park; call_run arms it once that thread returns. */
static void park_ask_locked(struct gaz_rpc_call *call, gaz_rpc_handler_fn resume, void *arg,
			    int64_t deadline_ns, unsigned flags)
{
	call->run_fn = resume;
	call->run_arg = arg;
	call->park_due_ns = deadline_ns;
	call->park_flags = flags;
	call->park_state = PARK_ASKED;
}

int gaz_rpc_park(struct gaz_rpc_call *call, gaz_rpc_handler_fn resume, void *arg,
		 int64_t deadline_ns, unsigned flags)
{
	if (!call->gc)
		return GAZ_EINVAL; /* a local call's runner waits for its handler */
	pthread_mutex_lock(&call->mu);
	park_ask_locked(call, resume, arg, deadline_ns, flags & GAZ_RPC_PARK_SEND);
	pthread_mutex_unlock(&call->mu);
	return 0;
}

int gaz_rpc_park_each(struct gaz_rpc_call *call, const ProtobufCMessageDescriptor *desc,
		      int (*fn)(void *fn_arg, ProtobufCMessage *m), void *fn_arg,
		      gaz_rpc_handler_fn resume, void *arg, int64_t deadline_ns, unsigned flags)
{
	if (!call->gc)
		return GAZ_EINVAL;
	pthread_mutex_lock(&call->mu);
	park_ask_locked(call, resume, arg, deadline_ns, (flags & GAZ_RPC_PARK_SEND) | PARK_RECV);
	/* From here pollers run the messages through fn (recv_arrived), as
	 * for a handler waiting in gaz_rpc_recv_each; messages read ahead
	 * before are the resume's, in order (n_ahead ends the park). */
	call->each = (struct each_cb){.fn = fn, .desc = desc, .arg = fn_arg};
	if (!call->recv_op.pending && !call->recv_end && !call->n_ahead && !call->each_rc &&
	    !call->finished && !call->cancelled && !call->each_held &&
	    each_recv_locked(call) != 0) {
		call->recv_end = true;
		call->recv_end_ok = 0;
	}
	pthread_mutex_unlock(&call->mu);
	return 0;
}

int gaz_rpc_poll(struct gaz_rpc_call *call)
{
	int rc = GAZ_ETIMEDOUT;

	pthread_mutex_lock(&call->mu);
	if (call->cancelled || expired_locked(call) || (!call->gc && local_expired(call))) {
		rc = GAZ_ECANCELLED;
	} else if (call->woken) {
		call->woken = false;
		rc = 0;
	}
	pthread_mutex_unlock(&call->mu);
	return rc;
}

/* A gaz_rpc_post in flight: its empty batch's tag, and a reference on
 * the call until fn returned. */
struct post {
	struct gaz__tag tag;
	struct gaz_rpc_call *call;
	void (*fn)(void *arg);
	void *arg;
};

static void post_cb(void *tag, int ok)
{
	struct post *p = tag;
	struct gaz_rpc_call *c = p->call;

	(void)ok; /* an empty batch always completes */
	p->fn(p->arg);
	free(p);
	pthread_mutex_lock(&c->mu);
	call_unref_locked(c, false);
}

int gaz_rpc_post(struct gaz_rpc_call *call, void (*fn)(void *arg), void *arg)
{
	struct post *p;
	int rc = 0;

	if (!call->gc)
		return GAZ_EINVAL;
	if (!(p = malloc(sizeof(*p))))
		return GAZ_ENOMEM;
	*p = (struct post){.tag.cb = post_cb, .call = call, .fn = fn, .arg = arg};
	pthread_mutex_lock(&call->mu);
	if (call->finished) {
		rc = GAZ_EINVAL;
	} else {
		call->refs++;
		/* The tag may run (and free p) before this returns; mu keeps
		 * its unref waiting until we are done with the call. */
		if (gaz__rpc_start_batch(call->gc, NULL, 0, p) != GRPC_CALL_OK) {
			call->refs--;
			rc = GAZ_EINVAL;
		}
	}
	pthread_mutex_unlock(&call->mu);
	if (rc)
		free(p);
	return rc;
}

bool gaz_rpc_send_room(struct gaz_rpc_call *call)
{
	bool room;

	pthread_mutex_lock(&call->mu);
	room = call->sendq_n < SEND_QUEUE || call->send_failed || call->cancelled || !call->gc;
	pthread_mutex_unlock(&call->mu);
	return room;
}

int gaz_rpc_wait(struct gaz_rpc_call *call, int64_t deadline_ns)
{
	int rc;

	pthread_mutex_lock(&call->mu);
	if (!call->gc && call->deadline_ns < deadline_ns)
		deadline_ns = call->deadline_ns;
	for (;;) {
		if (call->cancelled || expired_locked(call) || (!call->gc && local_expired(call))) {
			rc = GAZ_ECANCELLED;
			break;
		}
		if (call->woken) {
			call->woken = false;
			rc = 0;
			break;
		}
		if (gaz__rpc_timedwait(&call->cv, &call->mu, until(call, deadline_ns)) &&
		    !expired_locked(call)) {
			rc = GAZ_ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&call->mu);
	return rc;
}

const char *gaz_rpc_metadata(struct gaz_rpc_call *call, const char *key)
{
	struct mdval *v;

	for (size_t i = 0; i < call->md.count; i++) {
		if (grpc_slice_str_cmp(call->md.metadata[i].key, key) != 0)
			continue;
		for (v = call->mdvals; v; v = v->next)
			if (v->idx == i)
				return v->value;
		if (!(v = calloc(1, sizeof(*v))))
			return NULL;
		v->idx = i;
		v->value = grpc_slice_to_c_string(call->md.metadata[i].value);
		v->next = call->mdvals;
		call->mdvals = v;
		return v->value;
	}
	return NULL;
}

void gaz_rpc_expire_at(struct gaz_rpc_call *call, int64_t mono_ns)
{
	pthread_mutex_lock(&call->mu);
	if (mono_ns < call->expire_ns)
		call->expire_ns = mono_ns;
	pthread_mutex_unlock(&call->mu);
	pthread_cond_broadcast(&call->cv); /* waits re-read it */
}

void gaz_rpc_set_user(struct gaz_rpc_call *call, void *user, void (*user_free)(void *))
{
	if (call->user_free)
		call->user_free(call->user);
	call->user = user;
	call->user_free = user_free;
}

void *gaz_rpc_user(struct gaz_rpc_call *call)
{
	return call->user;
}

const char *gaz_rpc_peer(struct gaz_rpc_call *call)
{
	return call->peer;
}

int64_t gaz_rpc_deadline(struct gaz_rpc_call *call)
{
	return call->deadline_ns;
}

/* ---- local calls ------------------------------------------------------- */

/* A local call's deadline passing is its cancellation. mu held. */
static bool local_expired(struct gaz_rpc_call *c)
{
	if (!c->cancelled && c->deadline_ns != GAZ_DEADLINE_NEVER && gaz_mono_ns() >= c->deadline_ns)
		c->cancelled = true;
	return c->cancelled;
}

struct gaz_rpc_call *gaz_rpc_local_new(const ProtobufCMessage *const *reqs, size_t n,
				       int64_t deadline_ns)
{
	struct gaz_rpc_call *c = calloc(1, sizeof(*c));

	if (!c || !(c->local_reqs = calloc(n + 1, sizeof(*c->local_reqs)))) {
		free(c);
		return NULL;
	}
	pthread_mutex_init(&c->mu, NULL);
	gaz__rpc_cond_init(&c->cv); /* gaz_rpc_wait's deadlines are monotonic */
	grpc_metadata_array_init(&c->md);
	c->details = grpc_empty_slice();
	c->deadline_ns = deadline_ns;
	c->expire_ns = GAZ_DEADLINE_NEVER;
	c->local_code = -1;
	c->peer = strdup("local");
	for (size_t i = 0; i < n; i++)
		c->local_reqs[c->local_n++] = gaz__rpc_pack(reqs[i]);
	return c;
}

int gaz_rpc_local_result(struct gaz_rpc_call *call, const ProtobufCMessageDescriptor *desc,
			 ProtobufCMessage **resp, const char **msg)
{
	int code;

	if (resp)
		*resp = NULL;
	pthread_mutex_lock(&call->mu);
	code = call->finished ? call->local_code : -1;
	if (msg)
		*msg = call->local_msg;
	if (resp && desc && call->local_resp &&
	    gaz__rpc_unpack(call->local_resp, desc, resp, NULL) != 0)
		*resp = NULL;
	pthread_mutex_unlock(&call->mu);
	return code;
}

bool gaz_rpc_is_local(const struct gaz_rpc_call *call)
{
	return !call->gc;
}

void gaz_rpc_local_free(struct gaz_rpc_call *call)
{
	if (!call)
		return;
	for (size_t i = 0; i < call->local_n; i++)
		if (call->local_reqs[i])
			grpc_byte_buffer_destroy(call->local_reqs[i]);
	free(call->local_reqs);
	if (call->local_resp)
		grpc_byte_buffer_destroy(call->local_resp);
	free(call->local_msg);
	if (call->user_free)
		call->user_free(call->user);
	grpc_metadata_array_destroy(&call->md);
	pthread_cond_destroy(&call->cv);
	pthread_mutex_destroy(&call->mu);
	free(call->peer);
	free(call);
}

int gaz_rpc_recv_request(struct gaz_rpc_call *call, const ProtobufCMessageDescriptor *desc,
		     ProtobufCMessage **out, const char *what)
{
	char msg[96];
	int rc = gaz_rpc_recv(call, desc, out, GAZ_DEADLINE_NEVER);

	if (rc == 0)
		return 0;
	snprintf(msg, sizeof(msg), "%s %s", rc == GAZ_EPROTO ? "malformed" : "expected", what);
	gaz_rpc_finish(call, NULL, rc == GAZ_EPROTO ? GAZ_GRPC_INVALID_ARGUMENT : GAZ_GRPC_CANCELLED, msg);
	return rc;
}

