/*
 * rpc.h - gazette-c's only door to grpc core (nothing else includes
 * grpc/grpc.h). Server and client calls, messages packed with protobuf-c.
 *
 * Model (design.md §4.2, grpc-core.md §2): one process-wide NEXT completion
 * queue drained by a few poller threads that only dispatch tags (a tag is a
 * struct whose first member is its completion function). Every server call
 * runs its handler on a thread of a bounded pool, as sequential code: the
 * blocking helpers below start one grpc batch and wait on the call's own
 * mutex/condvar, which pollers signal on completion, and which is also
 * signalled by cancellation (RECV_CLOSE_ON_SERVER) and by gaz_rpc_wake()
 * from application code (a commit, an index change). That is Go's select in
 * C: gaz_rpc_wait() returns on wake, cancellation or deadline. A call
 * that waits long gives its thread back instead (gaz_rpc_park) and is
 * resumed on the pool by the same events.
 *
 * Client calls (peers, etcd, gazctl) use the same queue and pollers, so
 * connects always make progress (grpc-core.md §7.6).
 *
 * Deadlines are monotonic nanoseconds (clock.h), GAZ_DEADLINE_NEVER = none.
 * Functions return 0 or a negative GAZ_E* code (common/err.h); remote
 * failures are GAZ_ERPC with the grpc code and message in *st.
 */
#ifndef GAZ_RPC_RPC_H
#define GAZ_RPC_RPC_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* gRPC status codes we name (same values as grpc_status_code). */
enum {
	GAZ_GRPC_OK = 0,
	GAZ_GRPC_CANCELLED = 1,
	GAZ_GRPC_UNKNOWN = 2,
	GAZ_GRPC_INVALID_ARGUMENT = 3,
	GAZ_GRPC_DEADLINE_EXCEEDED = 4,
	GAZ_GRPC_NOT_FOUND = 5,
	GAZ_GRPC_RESOURCE_EXHAUSTED = 8,
	GAZ_GRPC_FAILED_PRECONDITION = 9,
	GAZ_GRPC_UNIMPLEMENTED = 12,
	GAZ_GRPC_INTERNAL = 13,
	GAZ_GRPC_UNAVAILABLE = 14,
	GAZ_GRPC_UNAUTHENTICATED = 16,
};

/* ---- runtime ---------------------------------------------------------- */

/* gaz_rpc_init starts grpc and `pollers` (1 or 2) poller threads on the
 * shared completion queue. Call once, before any other gaz_rpc_* call and
 * after blocking SIGINT/SIGTERM in the main thread (grpc-core.md P6).
 * Returns 0 or GAZ_EINVAL. */
int gaz_rpc_init(int pollers);

/* gaz_rpc_default_pollers is the poller count for a server process: 1 when
 * the process may run on fewer than 4 CPUs (its affinity mask), else 2.
 * Each event a poller takes wakes it from epoll; a second poller on a small
 * machine mostly adds wake-ups and context switches (docs/decisions.md,
 * "One grpc poller on small machines"). */
int gaz_rpc_default_pollers(void);

/* gaz_rpc_shutdown stops the pollers and grpc. All servers, channels and
 * calls must have been freed. */
void gaz_rpc_shutdown(void);

/* ---- server ----------------------------------------------------------- */

struct gaz_rpc_server;
struct gaz_rpc_call;

/* A handler runs on a pool thread with the call accepted and its first
 * request NOT yet received. It must end the call with gaz_rpc_finish()
 * (exactly once) before returning; the call is freed after it returns. */
typedef void (*gaz_rpc_handler_fn)(struct gaz_rpc_call *call, void *arg);

struct gaz_rpc_server_opts {
	int max_recv_bytes;   /* max inbound message; 0 = 4 MiB (Gazette's default) */
	int max_handlers;     /* concurrent handler threads; 0 = 4096 */
	/* Threads started at once for calls that find every thread busy; 0 =
	 * 4 per CPU, at least 64. Past them the pool grows only while its
	 * threads are blocked: one thread per 5 ms while the oldest queued
	 * call has waited 5 ms, up to max_handlers. So a burst of short calls
	 * (thousands of Reads arriving to park) starts no thread per call. */
	int core_handlers;
	int keepalive_ms;     /* server keepalive ping interval; 0 = 30000 */
	/* How long an idle handler thread lives; 0 = the environment's
	 * GAZ_RPC_IDLE_THREAD_MS, else 30000 (tests shorten it to watch a
	 * pool shrink back after a burst). */
	int64_t idle_thread_ms;
	/* Bounds on the open calls of methods registered GAZ_RPC_LIMITED (a
	 * broker's Reads): in all (max_streams), and on one client connection
	 * (max_streams_per_conn; a connection is its peer address). 0 = none.
	 * A call past either is answered RESOURCE_EXHAUSTED at once, on the
	 * poller, with a message naming the bound; its handler never runs
	 * and the finish observer does not see it. A call counts from its
	 * accept until it is freed (parked, it still counts). Calls of other
	 * methods are neither counted nor refused, so a crowd of the limited
	 * ones cannot keep them out. */
	int max_streams;
	int max_streams_per_conn;
};

/* gaz_rpc_server_new creates a server (not started). `opts` may be NULL.
 * Returns NULL only on allocation failure. Free with gaz_rpc_server_free. */
struct gaz_rpc_server *gaz_rpc_server_new(const struct gaz_rpc_server_opts *opts);

/* gaz_rpc_server_register binds a full method path ("/protocol.Journal/Read")
 * to a handler. Before start only. Unregistered methods are answered
 * UNIMPLEMENTED (grpc-core.md P1). Returns 0, GAZ_EINVAL or GAZ_ENOMEM. */
int gaz_rpc_server_register(struct gaz_rpc_server *srv, const char *path, gaz_rpc_handler_fn fn,
			    void *arg);

/* Flags of gaz_rpc_server_register_flags. */
enum {
	/* Start the handler only once the request stream has ended (client
	 * half-close, confirmed; or cancellation) or the read-ahead is full
	 * (4 messages or 64 KiB): a client-streaming handler then finds a
	 * small request whole instead of waking once per message. */
	GAZ_RPC_DISPATCH_READ = 1 << 0,
	/* The method's streams, for the grpc_type label of the server
	 * metrics: neither is "unary", both "bidi_stream". */
	GAZ_RPC_CLIENT_STREAMS = 1 << 1,
	GAZ_RPC_SERVER_STREAMS = 1 << 2,
	/* The method's calls count against the server's max_streams and
	 * max_streams_per_conn (struct gaz_rpc_server_opts). */
	GAZ_RPC_LIMITED = 1 << 3,
};

/* gaz_rpc_server_register_flags is gaz_rpc_server_register with `flags`. */
int gaz_rpc_server_register_flags(struct gaz_rpc_server *srv, const char *path,
				  gaz_rpc_handler_fn fn, void *arg, unsigned flags);

/* A fast path for a GAZ_RPC_DISPATCH_READ method: runs on a poller when
 * the call's request has been read, before a handler thread is used. It
 * must not block; it may only peek at the request (gaz_rpc_peek). It
 * returns false to run the handler as usual, or true when it took the
 * call: whoever holds it then either ends it (gaz_rpc_finish, then
 * gaz_rpc_unpark) or hands it to its handler after all
 * (gaz_rpc_dispatch), from any thread, exactly once. */
typedef bool (*gaz_rpc_fast_fn)(struct gaz_rpc_call *call, void *arg);

/* gaz_rpc_server_register_fast registers a method with a fast path (`arg`
 * goes to both); flags as gaz_rpc_server_register_flags, which must
 * include GAZ_RPC_DISPATCH_READ. */
int gaz_rpc_server_register_fast(struct gaz_rpc_server *srv, const char *path,
				 gaz_rpc_handler_fn fn, gaz_rpc_fast_fn fast, void *arg,
				 unsigned flags);

/* A server's finish observer: called once per call, on the thread that
 * ends it with gaz_rpc_finish (a handler, a poller's fast path, another
 * call's handler answering it), right after the status is queued. `arg`
 * is the method's registered arg, `code` the gRPC code sent and `outcome`
 * what the handler recorded with gaz_rpc_set_outcome (0 if nothing).
 * Must not block. Not called for local calls nor unknown methods. */
typedef void (*gaz_rpc_finish_fn)(void *arg, int code, int outcome);

/* gaz_rpc_server_on_finish sets the server's finish observer (NULL:
 * none). Before start only. Returns 0 or GAZ_EINVAL. */
int gaz_rpc_server_on_finish(struct gaz_rpc_server *srv, gaz_rpc_finish_fn fn);

/* gaz_rpc_server_metrics makes the server count its calls as
 * go-grpc-prometheus's server interceptors (with handling-time histograms,
 * as Gazette enables them) do, in the default registry:
 * grpc_server_started_total, grpc_server_handled_total{grpc_code},
 * grpc_server_msg_received_total, grpc_server_msg_sent_total and
 * grpc_server_handling_seconds, labelled grpc_type, grpc_service and
 * grpc_method. A series appears on its first use. Before start only.
 * Returns 0 or GAZ_EINVAL. */
int gaz_rpc_server_metrics(struct gaz_rpc_server *srv);

/* gaz_rpc_set_outcome records an application-level result of `call` for
 * the finish observer (the broker: the Gazette Status that an OK response
 * carries, as Gazette's instrumentJournalServerRPC labels it). Call before
 * gaz_rpc_finish, from the thread that holds the call. */
void gaz_rpc_set_outcome(struct gaz_rpc_call *call, int outcome);

/* gaz_rpc_peek unpacks (a copy of) the i-th request message read ahead
 * and not yet received, into *out (free with
 * protobuf_c_message_free_unpacked). Returns 0, GAZ_EOF when the request
 * has exactly i messages and the client half-closed (confirmed),
 * GAZ_ETIMEDOUT when it has not arrived (or the end is not confirmed) yet,
 * GAZ_ECANCELLED, or GAZ_EPROTO (failed to unpack). Fast path only. */
int gaz_rpc_peek(struct gaz_rpc_call *call, size_t i, const ProtobufCMessageDescriptor *desc,
		 ProtobufCMessage **out);

/* gaz_rpc_peek_size stores how many request messages are read ahead and
 * their size in bytes (serialized), and returns GAZ_EOF when that is the
 * whole request (half-close confirmed), else 0. Fast path only. */
int gaz_rpc_peek_size(struct gaz_rpc_call *call, size_t *n, size_t *bytes);

/* gaz_rpc_dispatch hands a call the fast path took to its handler. */
void gaz_rpc_dispatch(struct gaz_rpc_call *call);

/* gaz_rpc_unpark lets go of a call the fast path took, once finished (a
 * call not finished is answered INTERNAL). The call may be freed. */
void gaz_rpc_unpark(struct gaz_rpc_call *call);

/* gaz_rpc_server_start starts serving. Connections come in through
 * gaz_rpc_server_add_fd (one-port mode) and, if `listen_addr` is non-NULL
 * ("127.0.0.1:0"), a native grpc listener too; the bound port is stored in
 * *port_out when non-NULL. Returns 0, GAZ_EIO (bind failed). */
int gaz_rpc_server_start(struct gaz_rpc_server *srv, const char *listen_addr, int *port_out);

/* gaz_rpc_server_add_fd hands an accepted connection whose first bytes
 * (peeked, not consumed) are the HTTP/2 preface to grpc. The fd is consumed
 * in every case: grpc owns and closes it. `peer` ("ipv4:1.2.3.4:5") is kept
 * for gaz_rpc_peer. Returns 0, or GAZ_ESTOPPED once shutdown has begun (the
 * fd is then closed here). Thread-safe. Follows grpc-core.md §7.3 R1-R5. */
int gaz_rpc_server_add_fd(struct gaz_rpc_server *srv, int fd, const char *peer);

/* gaz_rpc_server_shutdown stops accepting calls, lets running calls finish
 * for up to `grace_ms`, then cancels the rest and waits for every handler to
 * return. Idempotent. */
void gaz_rpc_server_shutdown(struct gaz_rpc_server *srv, int64_t grace_ms);

/* gaz_rpc_server_free shuts down (grace 0) if needed and frees. */
void gaz_rpc_server_free(struct gaz_rpc_server *srv);

/* ---- server call: used only on the handler's thread, except wake ------- */

/* gaz_rpc_recv receives the next request message and unpacks it with `desc`.
 * *out is owned by the caller: free with protobuf_c_message_free_unpacked(
 * *out, NULL). Returns 0, GAZ_EOF (client half-closed; until the handler
 * has sent something this is told apart from a cancellation by sending the
 * response headers, see server.c eof_confirmed), GAZ_ECANCELLED
 * (client cancelled, deadline, connection lost), GAZ_ETIMEDOUT (deadline_ns
 * passed; the call stays usable), GAZ_EPROTO (message failed to unpack;
 * answer INVALID_ARGUMENT). */
int gaz_rpc_recv(struct gaz_rpc_call *call, const ProtobufCMessageDescriptor *desc,
		 ProtobufCMessage **out, int64_t deadline_ns);

/* gaz_rpc_recv_request receives a handler's first request message into *out
 * (caller frees with protobuf_c_message_free_unpacked). On failure it ends
 * the call itself — INVALID_ARGUMENT "malformed <what>" when the bytes do
 * not unpack, CANCELLED when the client went away or sent nothing — and
 * returns the gaz_rpc_recv error; the handler then just returns. */
int gaz_rpc_recv_request(struct gaz_rpc_call *call, const ProtobufCMessageDescriptor *desc,
		     ProtobufCMessage **out, const char *what);

/* gaz_rpc_recv_each hands the call's further request messages, in order,
 * unpacked as `desc`, to fn(arg, m) (m owned by fn; free it with
 * protobuf_c_message_free_unpacked): those already read ahead on this
 * thread, then each as it arrives on the poller that received it, with no
 * thread switch, while this handler waits here. fn must not block: it
 * runs on a poller, with no lock of the call held, and may send on the
 * call. Returns fn's first non-zero return, GAZ_EPROTO (a message did not
 * unpack), GAZ_EOF (half-close), GAZ_ECANCELLED, or GAZ_ETIMEDOUT at
 * deadline_ns (the stream stays usable: check what the handler must and
 * call again). No fn call is running once it returns. */
int gaz_rpc_recv_each(struct gaz_rpc_call *call, const ProtobufCMessageDescriptor *desc,
		      int (*fn)(void *arg, ProtobufCMessage *m), void *arg, int64_t deadline_ns);

/* gaz_rpc_recv_raw is gaz_rpc_recv without unpacking: *buf (malloc'd, free
 * with free) holds the serialized message of *len bytes. Same returns. */
int gaz_rpc_recv_raw(struct gaz_rpc_call *call, uint8_t **buf, size_t *len, int64_t deadline_ns);

/* gaz_rpc_send packs and sends one response message without waiting for
 * it to go out: it waits only for the previous send (grpc allows one at a
 * time), which is the flow control. Returns 0 or GAZ_ECANCELLED (the call
 * is gone, noticed now or at the previous send's completion). */
int gaz_rpc_send(struct gaz_rpc_call *call, const ProtobufCMessage *msg);

/* gaz_rpc_finish ends the call with a status. For a unary or
 * client-streaming method `resp` is the single response message (NULL when
 * `code` != OK); for streaming responses pass NULL. `msg` may be NULL.
 * `code` is a GAZ_GRPC_* code; a negative GAZ_E* code is also accepted and
 * mapped with gaz_err_grpc_code.
 * Does not wait for the status to be delivered (the call lives until it
 * is). Returns 0, GAZ_ECANCELLED (the client is known to be gone, or the
 * batch could not start; the call is finished either way) or GAZ_EINVAL
 * (already finished). Must be called exactly once. */
int gaz_rpc_finish(struct gaz_rpc_call *call, const ProtobufCMessage *resp, int code,
		   const char *msg);

/* gaz_rpc_cancelled: whether the client cancelled or the connection died. */
bool gaz_rpc_cancelled(struct gaz_rpc_call *call);

/* gaz_rpc_wake wakes the call's handler out of gaz_rpc_wait. Thread-safe,
 * callable from any thread while the call is alive (callers keep their own
 * registration so they never wake a freed call). */
void gaz_rpc_wake(struct gaz_rpc_call *call);

/* gaz_rpc_wait blocks the handler until gaz_rpc_wake (returns 0; the wake
 * is consumed), cancellation (GAZ_ECANCELLED) or deadline_ns
 * (GAZ_ETIMEDOUT). A wake that came before the wait is not lost. */
int gaz_rpc_wait(struct gaz_rpc_call *call, int64_t deadline_ns);

/* ---- parking: a long-lived call that holds no thread while it waits --- */

/* Flags of gaz_rpc_park. */
#define GAZ_RPC_PARK_SEND 1u /* also resume once the response queue has room */

/* gaz_rpc_park gives the call's thread back without ending the call: the
 * handler (or resume function) that calls it returns right after, and
 * resume(call, arg) later runs on a pool thread, once, at the first of:
 * a gaz_rpc_wake (also one before the park that no gaz_rpc_wait or
 * gaz_rpc_poll consumed), the call's cancellation (client, connection,
 * server shutdown, gaz_rpc_expire_at's time), `deadline_ns` (monotonic;
 * GAZ_DEADLINE_NEVER: none), and with GAZ_RPC_PARK_SEND room in the
 * response queue (gaz_rpc_send_room). resume runs as a handler does, with
 * the same duties: it may park again, and in the end it finishes the
 * call. `arg` stays the caller's (resume usually frees it when it ends
 * the call). It learns why it runs from gaz_rpc_poll and its own state. This
 * is how a blocking Read waits at the write head with no thread of its
 * own (issue 39; Gazette parks a goroutine). Returns 0, or GAZ_EINVAL for
 * a local call, which cannot park: wait with gaz_rpc_wait instead. */
int gaz_rpc_park(struct gaz_rpc_call *call, gaz_rpc_handler_fn resume, void *arg,
		 int64_t deadline_ns, unsigned flags);

/* gaz_rpc_park_each is gaz_rpc_park for a stream that keeps receiving
 * while it holds no thread: each further request message, as it arrives,
 * goes to fn(fn_arg, m) on the poller that received it, exactly as
 * gaz_rpc_recv_each's callback (same duties: fn must not block, owns m),
 * and resume(call, arg) also runs once fn returned non-zero, a message
 * did not unpack, or the stream ended (half-close, cancellation). The
 * events of gaz_rpc_park wake it too (flags as there). Until resume takes
 * the stream back, fn may still run on a poller: resume's first act is
 * gaz_rpc_recv_each with the same fn and fn_arg and a deadline already
 * passed (0), which waits out a running fn and returns what ended the
 * park (fn's code, GAZ_EPROTO, GAZ_EOF, GAZ_ECANCELLED), or GAZ_ETIMEDOUT
 * when the stream goes on (a wake or the due time: gaz_rpc_poll says).
 * The replica side of a Replicate stream waits so between proposals
 * (issue 39). Returns 0, or GAZ_EINVAL for a local call (use
 * gaz_rpc_recv_each). */
int gaz_rpc_park_each(struct gaz_rpc_call *call, const ProtobufCMessageDescriptor *desc,
		      int (*fn)(void *fn_arg, ProtobufCMessage *m), void *fn_arg,
		      gaz_rpc_handler_fn resume, void *arg, int64_t deadline_ns, unsigned flags);

/* gaz_rpc_poll is gaz_rpc_wait without waiting: GAZ_ECANCELLED, 0 (a wake,
 * consumed) or GAZ_ETIMEDOUT (neither). */
int gaz_rpc_poll(struct gaz_rpc_call *call);

/* gaz_rpc_send_room: whether gaz_rpc_send would now queue its message
 * without waiting (or fail at once: the call is gone). */
bool gaz_rpc_send_room(struct gaz_rpc_call *call);

/* gaz_rpc_send_packed_now queues the `n` messages of `msgs` (packed once
 * with gaz_rpc_pack_msg; each send holds its own reference, the caller
 * keeps `msgs`) on the call's response stream, in order, only if its
 * response queue has room for all of them now: it never waits. All but
 * the last carry grpc's GRPC_WRITE_BUFFER_HINT, so they go out in one
 * write with the last. This is how one commit's bytes, read and packed
 * once, go to every reader parked at a journal's write head (issue 39),
 * as Gazette's readers each send them. Any thread may call it for a
 * parked call, provided no other thread sends on it meanwhile (the caller
 * excludes the call's own resume by a lock of its own). Returns 0,
 * GAZ_ERANGE (not enough room: nothing was queued) or GAZ_ECANCELLED (the
 * call is gone or its sending failed; nothing was queued). */
struct gaz_rpc_packed;
int gaz_rpc_send_packed_now(struct gaz_rpc_call *call, struct gaz_rpc_packed *const *msgs,
			    size_t n);

/* gaz_rpc_post runs fn(arg) once on a poller, behind the completions
 * queued there already, through an empty batch on `call` (grpc.h: an
 * empty batch's tag is queued at once). For work that starts sends on
 * many calls (a commit's fan-out to the readers at a write head): sends
 * a poller starts wake no other thread when they complete, where each
 * send started elsewhere wakes a poller to take its completion. fn runs
 * on a poller: it must not wait. The call stays alive until fn returned;
 * fn need not touch it. Returns 0, or GAZ_EINVAL (a local call, or one
 * finished) or GAZ_ENOMEM, and then fn does not run. */
int gaz_rpc_post(struct gaz_rpc_call *call, void (*fn)(void *arg), void *arg);

/* gaz_rpc_server_packed_in_flight: of the messages gaz_rpc_send_packed_now
 * started at once (on calls with nothing else queued), how many have not
 * yet completed, over all the calls of `srv`. A sender of many calls
 * paces itself on it, so that grpc's completion queue holds few of its
 * completions ahead of other calls' (an append behind a commit's fan-out
 * to 10,000 readers). Thread-safe. */
long gaz_rpc_server_packed_in_flight(struct gaz_rpc_server *srv);

/* gaz_rpc_metadata returns the value of request metadata `key`
 * ("authorization") borrowed until the call ends, or NULL. */
const char *gaz_rpc_metadata(struct gaz_rpc_call *call, const char *key);

/* gaz_rpc_expire_at ends the call at monotonic time `mono_ns` (if earlier
 * than a time set before): its waits (gaz_rpc_wait, gaz_rpc_recv*) return
 * GAZ_ECANCELLED from then on and the client sees DEADLINE_EXCEEDED
 * "authorization expired". The broker binds a call to its token's `exp`
 * this way, as Gazette's Verify sets its context deadline. Thread-safe. */
void gaz_rpc_expire_at(struct gaz_rpc_call *call, int64_t mono_ns);

/* gaz_rpc_set_user attaches `user` to the call (replacing and freeing a
 * previous one); `user_free` (may be NULL) frees it when the call is
 * destroyed. gaz_rpc_user returns it (NULL if none). Set by the thread
 * that handles the call before other threads may read it (the fast path
 * hands the call over with a pool push, which orders the write). */
void gaz_rpc_set_user(struct gaz_rpc_call *call, void *user, void (*user_free)(void *));
void *gaz_rpc_user(struct gaz_rpc_call *call);

/* gaz_rpc_peer: the peer address, borrowed until the call ends. */
const char *gaz_rpc_peer(struct gaz_rpc_call *call);

/* gaz_rpc_deadline: the client's deadline as monotonic ns, or
 * GAZ_DEADLINE_NEVER. */
int64_t gaz_rpc_deadline(struct gaz_rpc_call *call);

/* ---- local calls ------------------------------------------------------ */

/* A local call runs a server handler in-process, with no connection: the
 * broker's pulse is an Append handled exactly as a client's (Gazette's
 * pulse runs its append FSM on a synthetic request, facts §4.8).
 *
 * gaz_rpc_local_new makes a call whose gaz_rpc_recv returns `reqs` in
 * order (packed here; the messages stay the caller's), then GAZ_EOF;
 * gaz_rpc_send discards; gaz_rpc_finish records the outcome; and the call
 * counts as cancelled once `deadline_ns` (monotonic) passes, so every wait
 * of the handler is bounded by it. Run the handler on the caller's thread
 * (handler(call, arg)), then read the outcome and free. Returns NULL on
 * allocation failure. */
struct gaz_rpc_call *gaz_rpc_local_new(const ProtobufCMessage *const *reqs, size_t n,
				       int64_t deadline_ns);

/* gaz_rpc_local_result: the gRPC code the handler finished with (-1 if it
 * has not), *msg its status text (borrowed until gaz_rpc_local_free, may be
 * NULL) and, when `resp` is non-NULL, the response unpacked with `desc`
 * (owned by the caller; NULL if none). */
int gaz_rpc_local_result(struct gaz_rpc_call *call, const ProtobufCMessageDescriptor *desc,
			 ProtobufCMessage **resp, const char **msg);

/* gaz_rpc_is_local: whether `call` is a local call. */
bool gaz_rpc_is_local(const struct gaz_rpc_call *call);

/* gaz_rpc_local_free frees a local call (NULL is ignored). */
void gaz_rpc_local_free(struct gaz_rpc_call *call);

/* ---- client ----------------------------------------------------------- */

struct gaz_rpc_channel;
struct gaz_rpc_stream;

/* Who a channel talks to. It sets the reconnect back-off (grpc core's
 * default grows from 1 s to 120 s, so a peer that restarted was reached
 * again only 20-80 s later) and the keepalive pings:
 * - GAZ_RPC_PEER_CLIENT: a client of brokers (gazctl, the client library,
 *   the operator). Back-off 1 s growing 1.6x to at most 5 s, as Gazette's
 *   clients dial (mainboilerplate AddressConfig.MustDial).
 * - GAZ_RPC_PEER_BROKER: broker to broker (replication, proxying). Back-off
 *   capped at 0.5 s, as Gazette dials its peers (server.New: "crucial for
 *   quick cluster recovery").
 * - GAZ_RPC_PEER_ETCD: etcd. Back-off capped at 0.5 s (a lease must be
 *   kept alive across an etcd restart). Pings only while a call is open:
 *   etcd's server refuses pings on a connection without streams and
 *   answers them with a GOAWAY "too_many_pings".
 * Brokers and clients ping every keepalive_ms also without calls (a Read
 * or Watch idle for minutes must notice a dead peer; grpc-core.md P4). */
enum gaz_rpc_peer {
	GAZ_RPC_PEER_CLIENT = 0,
	GAZ_RPC_PEER_BROKER,
	GAZ_RPC_PEER_ETCD,
};

/* TLS certificate files (paths, PEM), borrowed by the call they are
 * passed to; NULL or "" = not set. Files are read when a channel is made
 * (checked there) and again every 5 s for its later handshakes (grpc's
 * file watcher) or, for a listener, when it starts and again whenever
 * they change.
 * Mirrors Gazette's server.BuildTLSConfig(certPath, keyPath, caPath). */
struct gaz_rpc_tls {
	const char *cert_file; /* certificate (chain) to present; with key_file */
	const char *key_file;  /* its private key */
	const char *ca_file;   /* channel: trusted roots for the server's
	                        * certificate (not set = the system's roots);
	                        * listener: client certificates are REQUIRED
	                        * and verified against it (not set = none
	                        * asked for) */
};

/* gaz_rpc_tls_check reads and checks the files of `tls` (NULL = nothing
 * to check) as a channel would: cert and key given together, parse and
 * match; the CA file holds certificates. Returns 0 or GAZ_EINVAL with the
 * file and the reason in st ("TLS key file \"k.pem\" does not match
 * certificate file \"c.pem\""), GAZ_ENOMEM. Thread-safe. */
int gaz_rpc_tls_check(const struct gaz_rpc_tls *tls, struct gaz_status *st);

/* A service's TLS flags (Gazette's ServiceConfig: --<ns>.server-cert-file,
 * -server-cert-key-file, -server-ca-file, -peer-cert-file,
 * -peer-cert-key-file, -peer-ca-file), each "" when not given. */
struct gaz_rpc_tls_flags {
	const char *server_cert_file, *server_cert_key_file, *server_ca_file;
	const char *peer_cert_file, *peer_cert_key_file, *peer_ca_file;
};

/* gaz_rpc_tls_flags_check checks the flags of service `ns` ("broker",
 * "consumer"): cert and key given in pairs, a server CA only with a server
 * certificate, the peer files loadable (gaz_rpc_tls_check; the server
 * files are loaded by the listener). Fills *peer with the peer files
 * (borrowed from `f`) and *serve_tls with whether to serve TLS on `port`:
 * not on a unix:// socket, as Gazette (server.New: clients cannot tell
 * from the endpoint's scheme), which is warned. Returns 0 or GAZ_EINVAL
 * naming the flag or file. */
int gaz_rpc_tls_flags_check(const char *ns, const struct gaz_rpc_tls_flags *f, const char *port,
			    struct gaz_rpc_tls *peer, bool *serve_tls, struct gaz_status *st);

/* gaz_rpc_tls_version is a fingerprint of the files of `tls` (device,
 * inode, size and mtime of each; 0 for NULL or none set): it changes when
 * a file is replaced or rewritten, so a holder of long-lived channels
 * knows to make new ones (a channel keeps the files it was made with).
 * Stats the files; thread-safe. */
uint64_t gaz_rpc_tls_version(const struct gaz_rpc_tls *tls);

struct gaz_rpc_channel_opts {
	int max_recv_bytes;  /* 0 = 64 MiB */
	int keepalive_ms;    /* 0 = 10000 */
	enum gaz_rpc_peer peer;
	/* For https:// targets (ignored for others, as Gazette's dispatched
	 * credentials pick TLS by the endpoint's scheme): the client
	 * certificate to present and the CA to trust. NULL = no client
	 * certificate, the system's roots. */
	const struct gaz_rpc_tls *tls;
	/* The name the server's certificate must carry instead of the
	 * target's host (grpc's ssl_target_name_override); NULL = the host.
	 * A broker dialing itself over 127.0.0.1 names its advertised host. */
	const char *tls_server_name;
};

/* gaz_rpc_channel_open opens a lazily connecting channel. `target` is a
 * grpc target ("127.0.0.1:8080", "unix:///path") or an endpoint URL as
 * brokers advertise ("http://host:port", "https://host:port",
 * "unix://host/path"), which is converted; https:// (port 443 if none)
 * dials with TLS using opts->tls, whose files are checked and read now
 * and watched after (every 5 s): a rotated file is presented or trusted
 * at the channel's next handshake. Returns NULL with st
 * set (may be NULL) on a malformed target (see gaz_rpc_target_check),
 * unreadable or mismatched TLS files (gaz_rpc_tls_check), allocation
 * failure. `opts` may be NULL (a client's defaults). Thread-safe; free
 * with gaz_rpc_channel_free after all its calls. */
struct gaz_rpc_channel *gaz_rpc_channel_open(const char *target,
					     const struct gaz_rpc_channel_opts *opts,
					     struct gaz_status *st);

/* gaz_rpc_channel_new is gaz_rpc_channel_open without a status: a TLS
 * file that does not load is logged as a warning. */
struct gaz_rpc_channel *gaz_rpc_channel_new(const char *target,
					    const struct gaz_rpc_channel_opts *opts);

/* gaz_rpc_target_check says why gaz_rpc_channel_new would refuse `target`
 * (NULL is refused): GAZ_EINVAL with the reason in st ("invalid port
 * 99999: want 1-65535", "no host after https://", ...), or 0 when it is
 * well formed. st may be NULL. */
int gaz_rpc_target_check(const char *target, struct gaz_status *st);
void gaz_rpc_channel_free(struct gaz_rpc_channel *ch);

/* Connectivity of a channel (grpc_connectivity_state, same values). */
enum gaz_rpc_conn_state {
	GAZ_RPC_CONN_IDLE = 0,
	GAZ_RPC_CONN_CONNECTING = 1,
	GAZ_RPC_CONN_READY = 2,
	GAZ_RPC_CONN_TRANSIENT_FAILURE = 3,
	GAZ_RPC_CONN_SHUTDOWN = 4,
};

/* gaz_rpc_channel_state returns the channel's connectivity now; with
 * `try_connect` an idle channel starts connecting. Never blocks.
 * Thread-safe. */
enum gaz_rpc_conn_state gaz_rpc_channel_state(struct gaz_rpc_channel *ch, bool try_connect);

/* gaz_rpc_conn_state_name: "READY", "TRANSIENT_FAILURE", ... (static). */
const char *gaz_rpc_conn_state_name(enum gaz_rpc_conn_state s);

/* gaz_rpc_channel_wait_ready connects the channel if it is idle and waits
 * until it is READY (returns 0), until a connection attempt made during
 * the wait fails (the channel moves into TRANSIENT_FAILURE: returns
 * GAZ_EUNAVAIL at once, e.g. on a refused connection), or until
 * deadline_ns passes (GAZ_ETIMEDOUT: an attempt still connecting, or a
 * channel that was failing already and made no new attempt). The last
 * state goes to *last when non-NULL. Thread-safe; blocks the calling
 * thread (the watch completes on a poller). */
int gaz_rpc_channel_wait_ready(struct gaz_rpc_channel *ch, int64_t deadline_ns,
			       enum gaz_rpc_conn_state *last);

/* gaz_rpc_unary performs one unary call: packs `req`, waits for the response
 * and unpacks it with `resp_desc` into *resp (caller frees with
 * protobuf_c_message_free_unpacked). `wait_for_ready` waits for a
 * connection instead of failing fast. Returns 0, GAZ_ERPC (st->grpc holds
 * the status code, st->msg the detail), GAZ_EPROTO. `md_auth` is an
 * optional "authorization" metadata value (NULL for none). */
int gaz_rpc_unary(struct gaz_rpc_channel *ch, const char *path, const ProtobufCMessage *req,
		  const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
		  int64_t deadline_ns, bool wait_for_ready, const char *md_auth,
		  struct gaz_status *st);

/* gaz_rpc_stream_open starts a streaming call (client-, server- or
 * bidi-streaming); nothing is sent yet. Returns NULL on failure (st set).
 * Threads: one thread may send/close_send while another receives; each
 * function is used by one thread at a time, except cancel (any thread). */
struct gaz_rpc_stream *gaz_rpc_stream_open(struct gaz_rpc_channel *ch, const char *path,
					   int64_t deadline_ns, bool wait_for_ready,
					   const char *md_auth, struct gaz_status *st);

/* gaz_rpc_stream_open_lazy is gaz_rpc_stream_open (same arguments,
 * deadline_ns monotonic; the caller frees the stream with
 * gaz_rpc_stream_free; NULL on failure, st set) for a long-lived stream
 * that mostly idles with no receive in flight (a replication pipeline's):
 * its final status is asked of grpc only once a receive finds the end,
 * or gaz_rpc_stream_finish (or recv_last) wants it, not for the stream's
 * whole life. Until then gaz_rpc_stream_status_now answers GAZ_ETIMEDOUT
 * (not known yet), and the stream holds no op in flight while idle. Why:
 * each op in flight costs every completion of the process a step of a
 * linear search in the grpc build this runs on (docs/decisions.md, "Ops
 * in flight"). */
struct gaz_rpc_stream *gaz_rpc_stream_open_lazy(struct gaz_rpc_channel *ch, const char *path,
						int64_t deadline_ns, bool wait_for_ready,
						const char *md_auth, struct gaz_status *st);

/* gaz_rpc_stream_queue_sends makes sends and the half-close of `s` return
 * without waiting for the send before them: messages queue behind the one
 * in flight (up to 8, or 2 MiB past the first; beyond that the sender
 * waits) and the poller starts each as the one before completes, the
 * half-close in the same batch as the last message. Each wait costs a
 * thread switch; a client that sends a whole request and then waits for
 * the answer (an Append) is left with one. A failed send drops the rest
 * and later sends and the half-close return GAZ_ERPC; the call's status
 * (gaz_rpc_stream_finish) tells why. On a poller thread a send never
 * waits: one that finds the queue full returns GAZ_ERPC, queueing
 * nothing. Call before the first send. */
void gaz_rpc_stream_queue_sends(struct gaz_rpc_stream *s);

/* gaz_rpc_stream_send sends one message without waiting for it to go out:
 * it waits only for the previous send (grpc allows one at a time), which
 * is the flow control. Returns 0 or GAZ_ERPC (the call ended, noticed at
 * this send or the previous one's completion: gaz_rpc_stream_finish tells
 * why). */
int gaz_rpc_stream_send(struct gaz_rpc_stream *s, const ProtobufCMessage *msg);

/* gaz_rpc_stream_send_buffered is gaz_rpc_stream_send of a message that
 * may wait in the transport for the stream's next unbuffered send or
 * half-close, to go out in the same write (see gaz_rpc_stream_send_packed):
 * an Append's request and content chunks ahead of its commit message. */
int gaz_rpc_stream_send_buffered(struct gaz_rpc_stream *s, const ProtobufCMessage *msg);

/* A message packed once, to send on several streams without packing or
 * copying it again (a primary's fan-out to its replicas). */
struct gaz_rpc_packed;

/* gaz_rpc_pack_msg packs `msg`; NULL on allocation failure. Free with
 * gaz_rpc_packed_free (sends in flight keep their own reference). */
struct gaz_rpc_packed *gaz_rpc_pack_msg(const ProtobufCMessage *msg);
void gaz_rpc_packed_free(struct gaz_rpc_packed *p);

/* gaz_rpc_stream_send_packed is gaz_rpc_stream_send of a packed message.
 * With `buffer`, the message may wait in the transport for the stream's
 * next unbuffered send, to go out in the same write (grpc's
 * GRPC_WRITE_BUFFER_HINT; it goes out anyway once more than the
 * transport's write buffer is waiting): for a message that is of no use
 * to the peer before the one that follows it. */
int gaz_rpc_stream_send_packed(struct gaz_rpc_stream *s, const struct gaz_rpc_packed *p,
			       bool buffer);

/* gaz_rpc_stream_close_send half-closes the sending side. It waits for
 * the sends before it, unless the stream queues its sends. */
int gaz_rpc_stream_close_send(struct gaz_rpc_stream *s);

/* gaz_rpc_stream_recv_ahead starts receiving the next message of `s`
 * without waiting for it: it completes on a poller while the caller waits
 * for another stream, and the next gaz_rpc_stream_recv takes it. A caller
 * gathering one message from each of several streams starts them all
 * first, and then wakes once the last is in, instead of starting each
 * receive only after the one before (a poller round trip per stream).
 * Does nothing while a receive is in flight or unread, or after the end.
 * Same threads as gaz_rpc_stream_recv. */
void gaz_rpc_stream_recv_ahead(struct gaz_rpc_stream *s);

/* gaz_rpc_stream_recv_notify starts the next receive, as
 * gaz_rpc_stream_recv_ahead, and calls fn(arg) (`arg` passed back as is,
 * not owned) once it has completed (a message, the end of the stream or
 * a failure): on the poller that completes it, or at once on this thread when a completed receive is
 * waiting already or the stream is over. fn must not block; it (or
 * anyone after it) takes the outcome with gaz_rpc_stream_recv, which then
 * returns without waiting. One notification at a time per stream; not
 * with gaz_rpc_stream_recv_last. The stream stays allocated while fn
 * runs from a poller. */
void gaz_rpc_stream_recv_notify(struct gaz_rpc_stream *s, void (*fn)(void *arg), void *arg);

/* gaz_rpc_stream_try_recv is gaz_rpc_stream_recv without the wait, for
 * callers that hold no thread per stream: when a message, or the end of
 * the stream with its status, is in, it returns as gaz_rpc_stream_recv
 * (and gaz_rpc_stream_finish then returns at once); otherwise it keeps a
 * receive in flight, arranges fn(arg) to be called once from the poller
 * that completes it (as gaz_rpc_stream_recv_notify: fn must not block nor
 * receive), and returns GAZ_ETIMEDOUT. Never calls fn on this thread.
 * One notification at a time per stream: a later call replaces an armed
 * one. Not with gaz_rpc_stream_recv_last. */
int gaz_rpc_stream_try_recv(struct gaz_rpc_stream *s, const ProtobufCMessageDescriptor *desc,
			    ProtobufCMessage **out, void (*fn)(void *arg), void *arg);

/* gaz_rpc_stream_recv receives the next message (see gaz_rpc_unary for
 * ownership). Returns 0, GAZ_EOF (server ended the stream: call
 * gaz_rpc_stream_finish for the status), GAZ_ETIMEDOUT (deadline_ns passed;
 * the stream remains usable and the receive stays pending), GAZ_EPROTO. */
int gaz_rpc_stream_recv(struct gaz_rpc_stream *s, const ProtobufCMessageDescriptor *desc,
			ProtobufCMessage **out, int64_t deadline_ns);

/* gaz_rpc_stream_recv_last receives the stream's last message and its end
 * in one wait: the poller starts the next receive as soon as the message
 * is in and wakes the caller once the stream has ended and its status is
 * in (gaz_rpc_stream_finish then returns at once). For calls answered with
 * one message, as Gazette's Append: grpc-go's CloseAndRecv reads the same
 * way and fails a second message. Returns 0 with *out (owned by the
 * caller), GAZ_EOF (no message: see gaz_rpc_stream_finish), GAZ_EPROTO
 * (the message did not unpack, or a second one came; it is dropped),
 * GAZ_ETIMEDOUT (deadline_ns passed; the receive stays in flight: call
 * again). Later receives return GAZ_EOF. 0 does not say the status was
 * OK: gaz_rpc_stream_finish does (as CloseAndRecv, a response followed by
 * an error status is an error). Once called, use only this function to
 * receive on the stream. */
int gaz_rpc_stream_recv_last(struct gaz_rpc_stream *s, const ProtobufCMessageDescriptor *desc,
			     ProtobufCMessage **out, int64_t deadline_ns);

/* gaz_rpc_stream_finish waits for the final status. Returns 0 if OK, else
 * GAZ_ERPC with st filled. */
int gaz_rpc_stream_finish(struct gaz_rpc_stream *s, struct gaz_status *st);

/* gaz_rpc_stream_status_now is gaz_rpc_stream_finish without the wait,
 * for pollers: returns 0 when the final status is in and OK, GAZ_ERPC
 * with st filled (code and the peer's text) when it is in and not OK, or
 * GAZ_ETIMEDOUT while it is not in yet. Thread-safe. A
 * receive's notify (gaz_rpc_stream_recv_notify) that found the stream's
 * end comes once the status is in. */
int gaz_rpc_stream_status_now(struct gaz_rpc_stream *s, struct gaz_status *st);

/* gaz_rpc_stream_cancel cancels the call (thread-safe; pending ops fail). */
void gaz_rpc_stream_cancel(struct gaz_rpc_stream *s);

/* gaz_rpc_stream_free cancels if not finished, waits for pending ops and
 * frees. */
void gaz_rpc_stream_free(struct gaz_rpc_stream *s);

/* gaz_rpc_stream_free_later is gaz_rpc_stream_free without the wait, for
 * a poller (a receive notify may call it for its own stream): it cancels
 * the call if not finished, and the stream is freed at once if no op is
 * in flight, else by the poller that completes the last one. `s` must not
 * be used after. */
void gaz_rpc_stream_free_later(struct gaz_rpc_stream *s);

/* ---- one port: HTTP/1.1 and gRPC on one listening socket -------------- */

struct gaz_rpc_listener;

/* Called on a listener thread for each HTTP/1 connection; owns `fd` and must
 * close it. `peer` is borrowed for the call. The fd is a dup of the accepted
 * socket: the listener keeps the original so that gaz_rpc_listener_close
 * can shut the connection down for reading without racing the close. */
typedef void (*gaz_http_conn_fn)(int fd, const char *peer, void *arg);

/* gaz_rpc_listen binds `addr` ("0.0.0.0:8080", "127.0.0.1:0",
 * "unix:///abs/path"), accepts connections, peeks each one's first bytes
 * (7.5 s sniff timeout, Gazette's) and hands HTTP/2 preface connections to
 * `srv` (which must be started) and the rest to `http_fn`. The bound port is
 * stored in *port_out (0 for unix). Returns NULL with st set on failure. */
struct gaz_rpc_listener *gaz_rpc_listen(const char *addr, struct gaz_rpc_server *srv,
					gaz_http_conn_fn http_fn, void *http_arg, int *port_out,
					struct gaz_status *st);

/* gaz_rpc_listen_tls is gaz_rpc_listen serving TLS (`tls` borrowed; its
 * cert and key required; a CA file makes client certificates required,
 * as Gazette's --broker.server-ca-file). Each connection is handshaken
 * (7.5 s bound; ALPN "http/1.1" then "h2", server preference, as Gazette)
 * and then sniffed and served as a plain one, through a socketpair and a
 * pump thread (tls.c). The files are checked for changes (at most once a
 * second, on accept) and reloaded: new connections get the new
 * certificate; a set that does not load keeps the old one (a warning).
 * Returns NULL with st set when the files do not load at start. */
struct gaz_rpc_listener *gaz_rpc_listen_tls(const char *addr, struct gaz_rpc_server *srv,
					    gaz_http_conn_fn http_fn, void *http_arg,
					    const struct gaz_rpc_tls *tls, int *port_out,
					    struct gaz_status *st);

/* gaz_rpc_listener_close stops accepting, waits until no sniffer can still
 * hand a connection to grpc (R2) and for HTTP connections to end (their
 * fds are shut down for reading). Call before gaz_rpc_server_shutdown. */
void gaz_rpc_listener_close(struct gaz_rpc_listener *l);

#endif
