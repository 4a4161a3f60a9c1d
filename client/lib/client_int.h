/*
 * client_int.h - internals shared by the client_*.c files of the gazette-c
 * client library. Not a public header (see gazette/client.h).
 *
 *   client_core.c    the client, dispatch, cancellation, statuses, backoff
 *   client_list.c    List, Apply, ListFragments
 *   client_append.c  Appender and the one-shot Append
 *   client_read.c    Reader and RetryReader
 *   client_fetch.c   direct fragment reads (file:// and http(s) via curl)
 *   client_readahead.c the next persisted fragment, fetched and decoded
 *                    ahead of a direct read on a thread of its own
 *   route_cache.c    routes remembered per journal; member choice
 *   retry.c          which failures are retried (pure policy)
 *   append_service.c asynchronous, batched, ordered appends
 *
 * Only client_fetch.c calls libcurl; only lib/rpc talks to grpc.
 */
#ifndef GAZ_CLIENT_CLIENT_INT_H
#define GAZ_CLIENT_CLIENT_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "client/lib/route_cache.h"
#include "gazette/client.h"
#include "rpc/rpc.h"

/* How often blocked receives wake to look at the cancel flag. */
#define GAZ__CLIENT_POLL_MS 100

/* Most member endpoints a client keeps channels to at once. */
#define GAZ__CLIENT_PEERS_MAX 32
/* A member channel unused this long is closed when room is needed
 * (Gazette's dispatcher sweeps unused connections every 30 s). */
#define GAZ__CLIENT_PEER_IDLE_MS 30000

/* A channel to a broker's advertised endpoint (route.endpoints[i]).
 * `refs` counts open calls using it; it is freed only at zero. */
struct gaz__client_peer {
	char *endpoint;              /* NULL: the slot is free */
	struct gaz_rpc_channel *chan;
	int refs;
	int64_t last_used_ns;        /* monotonic */
};

/* Where one RPC goes (gaz__client_dispatch). */
struct gaz__dispatch {
	struct gaz_rpc_channel *ch;     /* the channel to call on */
	const char *target;             /* its address, for messages (borrowed
	                                 * from the client or the peer) */
	struct gaz__client_peer *peer;  /* a referenced member channel, or NULL
	                                 * for the broker address */
	const char *journal;            /* when the member came from the route
	                                 * cache: the journal to invalidate if
	                                 * the call fails (borrowed), else NULL */
	const char *claims_journal;     /* the journal the call is about, which
	                                 * a token signed with --auth-keys names
	                                 * (borrowed; used when the call opens) */
};

/* A streaming call registered with its client, so gaz_client_cancel can
 * cancel it while a send blocks on flow control. It owns its dispatch. */
struct gaz__client_call {
	struct gaz_rpc_stream *stream;
	struct gaz__dispatch d;
	struct gaz__client_call *prev, *next;
};

struct gaz_client {
	char *address;               /* broker service address */
	char *zone;
	char *auth;                  /* "Bearer <token>" or NULL */
	struct gaz_auth *keys;       /* auth_keys: each call signs its own token */
	char *file_root;             /* NULL = file:// URLs refused */
	char *cert_file, *cert_key_file, *trusted_ca_file; /* NULL = not set */
	struct gaz_rpc_tls tls;      /* of the three above, for https:// channels */
	int64_t rpc_timeout_ms;
	int64_t connect_timeout_ms;  /* < 0: wait for connections forever */
	struct gaz_rpc_channel *chan; /* to `address` */
	struct gaz__route_cache *routes; /* NULL: no route cache */
	atomic_int cancelled;
	pthread_mutex_t mu;          /* guards `calls` and `peers` */
	struct gaz__client_call calls; /* list head (sentinel) */
	struct gaz__client_peer peers[GAZ__CLIENT_PEERS_MAX];
};

/* gaz__client_dispatch chooses where an RPC for `journal` goes, as
 * Gazette's dispatcher does with a route (facts §7.1): `hint` (a route the
 * caller saw itself, e.g. a reader's last response header; may be NULL),
 * else the route cache's entry. `primary` (appends) picks the primary;
 * otherwise a member in our zone is preferred (reads, fragments). Members
 * whose connection is in transient failure are skipped; when the route's
 * choice is unusable the cache entry is invalidated. Without a usable
 * member (no route, no endpoints, no free peer slot) the RPC goes to the
 * broker address, which proxies. Never fails; release *d with
 * gaz__client_undispatch unless it is handed to gaz__client_open. */
void gaz__client_dispatch(struct gaz_client *c, const char *journal, bool primary,
			  const Protocol__Route *hint, struct gaz__dispatch *d);

/* gaz__client_undispatch releases the dispatch's peer reference. */
void gaz__client_undispatch(struct gaz_client *c, struct gaz__dispatch *d);

/* gaz__client_observe records the route of a response header for
 * `journal` (Append and Read responses, listings) in the route cache.
 * NULL header or no cache: nothing. */
void gaz__client_observe(struct gaz_client *c, const char *journal, const Protocol__Header *h);

/* gaz__client_forget invalidates `journal`'s cached route (NULL ok). */
void gaz__client_forget(struct gaz_client *c, const char *journal);

/* gaz__client_connect waits until d's channel is connected, for at most
 * the client's connect timeout, so no call waits forever on an unreachable
 * address. Without `wait_for_ready` (a fail-fast call, as gRPC's default)
 * it gives up at the first failed connection attempt instead. Returns 0,
 * GAZ_ECANCELLED, or GAZ_ERPC with st->grpc = UNAVAILABLE and
 * "broker \"<target>\" unreachable: ...". */
int gaz__client_connect(struct gaz_client *c, const struct gaz__dispatch *d, bool wait_for_ready,
			struct gaz_status *st);

/* gaz__client_deadline: the monotonic deadline of a unary call now. */
int64_t gaz__client_deadline(const struct gaz_client *c);

/* gaz__client_unary performs one unary call on dispatch `d` (borrowed):
 * connect (bounded), then gaz_rpc_unary with the client's RPC deadline
 * and authorization. Returns as gaz_rpc_unary, plus gaz__client_connect's
 * errors. A transport failure invalidates the cached route that chose d. */
int gaz__client_unary(struct gaz_client *c, const struct gaz__dispatch *d, const char *path,
		      const ProtobufCMessage *req, const ProtobufCMessageDescriptor *resp_desc,
		      ProtobufCMessage **resp, bool wait_for_ready, struct gaz_status *st);

/* gaz__client_open connects (bounded by the connect timeout) and opens a
 * streaming call on dispatch *d, which it takes over (released by
 * gaz__client_close, or here on failure), and registers it in `call`.
 * `deadline_ns` bounds the whole call (GAZ_DEADLINE_NEVER for none).
 * `wait_for_ready` waits for a connection (Go's grpc.WaitForReady, used
 * by listings) instead of failing fast with UNAVAILABLE. Returns 0,
 * GAZ_ECANCELLED, GAZ_ERPC, or the error of gaz_rpc_stream_open;
 * call->stream is NULL on failure. */
int gaz__client_open(struct gaz_client *c, struct gaz__dispatch *d, const char *path,
		     int64_t deadline_ns, bool wait_for_ready, struct gaz__client_call *call,
		     struct gaz_status *st);

/* gaz__client_close unregisters and frees the call's stream and releases
 * its dispatch (no stream: nothing). */
void gaz__client_close(struct gaz_client *c, struct gaz__client_call *call);

/* gaz__client_call_failed is told that `call` failed with `rc`: a
 * transport failure (GAZ_ERPC) of a call dispatched by the route cache
 * invalidates the journal's entry, as Gazette's dispatcher does on
 * UNAVAILABLE. */
void gaz__client_call_failed(struct gaz_client *c, const struct gaz__client_call *call, int rc);

/* gaz__client_recv receives the next message of a registered stream,
 * waking every GAZ__CLIENT_POLL_MS to honour cancellation. Returns 0,
 * GAZ_EOF (stream ended; finish it for the status), GAZ_EPROTO,
 * GAZ_ECANCELLED (the stream is cancelled). */
int gaz__client_recv(struct gaz_client *c, struct gaz_rpc_stream *s,
		     const ProtobufCMessageDescriptor *desc, ProtobufCMessage **out,
		     struct gaz_status *st);

/* gaz__client_try_recv is gaz__client_recv without the wait
 * (gaz_rpc_stream_try_recv): GAZ_READ_WAIT, with fn(arg) to be called
 * from a poller once the receive completes, when nothing is in yet. A
 * cancel of the client cancels the stream, which completes it. */
int gaz__client_try_recv(struct gaz_client *c, struct gaz_rpc_stream *s,
			 const ProtobufCMessageDescriptor *desc, ProtobufCMessage **out,
			 void (*fn)(void *arg), void *arg, struct gaz_status *st);

/* gaz__client_recv_last is gaz__client_recv for the stream's last message:
 * it returns once the stream has ended too (gaz_rpc_stream_recv_last), and
 * GAZ_EPROTO also when the broker sent a second message. */
int gaz__client_recv_last(struct gaz_client *c, struct gaz_rpc_stream *s,
			  const ProtobufCMessageDescriptor *desc, ProtobufCMessage **out,
			  struct gaz_status *st);

/* gaz__client_sleep waits `ms` milliseconds; GAZ_ECANCELLED if cancelled
 * meanwhile, else 0. */
int gaz__client_sleep(struct gaz_client *c, int64_t ms);

/* gaz__client_status_fail sets st to the status name (with `what` quoted
 * in front when non-NULL: `journal "a/b": SUSPENDED`) and returns
 * gaz_client_status_err(status). */
int gaz__client_status_fail(int status, const char *what, struct gaz_status *st);

/* gaz__client_invalid turns a failed response validation (reason in
 * vst) into GAZ_EPROTO "validating broker response: <reason>". */
int gaz__client_invalid(const struct gaz_status *vst, struct gaz_status *st);

/* gaz__check_read_response validates a ReadResponse (§3.8) and Gazette's
 * client rule that an OK response is never for an offset below the
 * requested `req_offset` ("invalid ReadResponse offset"). 0 or GAZ_EPROTO. */
int gaz__check_read_response(const Protocol__ReadResponse *r, int64_t req_offset,
			     struct gaz_status *st);

/* gaz__append_attempt runs ONE append transaction (no retry): begin,
 * the content of `src`, commit; a stream the broker ended is asked why.
 * Returns as gaz_appender_commit (*resp handed out on a status). */
int gaz__append_attempt(struct gaz_client *c, const struct gaz_append_opts *o,
			const struct gaz_append_src *src, Protocol__AppendResponse **resp,
			struct gaz_status *st);

/* ---- retry policies (retry.c; pure) --------------------------------------- */

/* One failed attempt, as the retry policies see it. */
struct gaz__failure {
	int rc;     /* the attempt's GAZ_E* code */
	int grpc;   /* gRPC status code when rc == GAZ_ERPC, else 0 */
	int status; /* the broker Status of the response, or -1 for none */
};

/* gaz__append_retryable: whether the one-shot Append retries (Gazette's
 * client.Append, facts §7.4): gRPC UNAVAILABLE (transport failures,
 * connection timeouts), and the routing statuses NOT_JOURNAL_PRIMARY_BROKER,
 * NO_JOURNAL_PRIMARY_BROKER and INSUFFICIENT_JOURNAL_BROKERS. Also a gRPC
 * CANCELLED the broker sent (our own cancellation is GAZ_ECANCELLED, never
 * GAZ_ERPC): gazette-c's broker reports a proxy hop that lost its upstream
 * that way, where Gazette's relays the upstream's UNAVAILABLE. */
bool gaz__append_retryable(const struct gaz__failure *f);

/* gaz__service_retryable: whether AppendService retries a failed batch.
 * Everything is retried except the terminal failures of Gazette's
 * AppendService: cancellation, FRAGMENT_STORE_UNHEALTHY,
 * INDEX_HAS_GREATER_OFFSET, JOURNAL_NOT_FOUND, NOT_ALLOWED,
 * REGISTER_MISMATCH, WRONG_APPEND_OFFSET; with `check_registers` set only
 * cancellation is terminal (Gazette retries fenced appends forever). A
 * request this client refuses to send (GAZ_EINVAL) is terminal too. */
bool gaz__service_retryable(const struct gaz__failure *f, bool check_registers);

/* Results of gaz__read_policy. */
enum gaz__read_verdict {
	GAZ__READ_SURFACE,      /* return the failure to the caller */
	GAZ__READ_RETRY,        /* restart the read, logging a warning */
	GAZ__READ_RETRY_QUIET,  /* restart without a warning (routine) */
};

/* gaz__read_policy is Gazette's RetryReader decision (facts §7.2) after
 * failure `rc` of attempt *attempt with broker `status` (-1 none) on a
 * `block`ing read: cancellation, GAZ_EINVAL (a fragment URL this client
 * cannot read), SUSPENDED, the tail of a non-blocking read, and
 * JOURNAL_NOT_FOUND after attempt 3 surface; a stream's clean end restarts
 * quietly and resets *attempt to -1; everything else restarts. The caller
 * handles a reached end_offset before asking. */
enum gaz__read_verdict gaz__read_policy(int rc, int status, bool block, int *attempt);

/* ---- direct fragment reads (client_fetch.c) ----------------------------- */

/* gaz__file_url_path maps a file:// fragment URL to a local path under
 * `root` as Go's http.Dir does: the URL's host is ignored, its path is
 * percent-decoded, cleaned as an absolute path (so ".." cannot climb above
 * the root) and joined to root. Writes into out[cap]. Returns 0,
 * GAZ_EINVAL (not a file:// URL, bad escape, NUL), GAZ_ERANGE. */
int gaz__file_url_path(const char *root, const char *url, char *out, size_t cap,
		       struct gaz_status *st);

struct gaz__frag_reader;

/* gaz__frag_open fetches fragment `f` (borrowed) from `url` and positions
 * the reader at `offset` (begin <= offset <= end) by decoding and
 * discarding (offset - begin) bytes. `stop` (borrowed for the reader's
 * life; NULL: none), once set, fails a pending http(s) transfer with
 * GAZ_ECANCELLED within GAZ__CLIENT_POLL_MS, as the client's cancellation
 * does. Returns 0 and *out (close with gaz__frag_close), GAZ_EINVAL
 * (unsupported scheme, no file root), GAZ_ENOTFOUND / GAZ_EIO (fetch
 * failed: "!OK fetching (404 Not Found, ...)"), GAZ_EPROTO (decoding),
 * GAZ_ECANCELLED, GAZ_ENOMEM. */
int gaz__frag_open(struct gaz_client *c, const struct gaz_fragment *f, int64_t offset,
		   const char *url, const atomic_bool *stop, struct gaz__frag_reader **out,
		   struct gaz_status *st);

/* gaz__frag_read returns decoded fragment bytes: 0 with *n >= 1, GAZ_EOF
 * exactly at the fragment's end, GAZ_EPROTO for a body ending early
 * ("unexpected EOF") or running past the end ("did not read EOF at
 * expected Fragment.End"), fetch errors. Errors are sticky. */
int gaz__frag_read(struct gaz__frag_reader *fr, void *buf, size_t cap, size_t *n,
		   struct gaz_status *st);

/* gaz__frag_offset: the next journal offset the fragment reader yields. */
int64_t gaz__frag_offset(const struct gaz__frag_reader *fr);

/* gaz__frag_close releases the reader and its transfer. NULL ok. */
void gaz__frag_close(struct gaz__frag_reader *fr);

/* ---- read-ahead of the next fragment (client_readahead.c) ----------------- */

struct gaz__readahead;

/* gaz__readahead_take's result when there is nothing read ahead. */
#define GAZ__RA_NONE 101

/* gaz__readahead_start asks, on a thread of its own, for the fragment at
 * `offset` with a copy of `rq` (borrowed for the call; block is cleared,
 * so at the write head the broker answers at once). When the broker
 * answers OK with a fragment URL and ends the stream cleanly, the thread
 * fetches the fragment from `offset` (or the answer's later offset) and
 * decodes it into a ring of `cap` bytes, waiting while the ring is full.
 * Any other answer (content, a status, an error) ends the read-ahead: the
 * reader then asks again itself, so retries and errors of that request
 * stay the reader's. `ring` (may be NULL) is a buffer of `cap` bytes the
 * read-ahead takes over (see gaz__readahead_free). Returns 0 and *out,
 * GAZ_ENOMEM, GAZ_EIO (no thread). Not thread-safe: one reader owns it. */
int gaz__readahead_start(struct gaz_client *c, const Protocol__ReadRequest *rq, int64_t offset,
			 size_t cap, uint8_t *ring, struct gaz__readahead **out);

/* gaz__readahead_offset: the offset it was started for. */
int64_t gaz__readahead_offset(const struct gaz__readahead *ra);

/* gaz__readahead_take waits for the broker's answer. Returns 0 and *resp
 * (the validated OK metadata response with the URL, handed over: free with
 * protobuf_c_message_free_unpacked), or GAZ__RA_NONE when the fragment is not
 * read ahead, GAZ_ECANCELLED. At most once per read-ahead. */
int gaz__readahead_take(struct gaz__readahead *ra, Protocol__ReadResponse **resp);

/* gaz__readahead_read yields decoded content after a successful take, as
 * gaz__frag_read does (0 with *n >= 1, GAZ_EOF exactly at the fragment's
 * end, the fetch's or decoder's error, GAZ_ECANCELLED), waiting while the
 * decoder thread is behind. */
int gaz__readahead_read(struct gaz__readahead *ra, void *buf, size_t cap, size_t *n,
			struct gaz_status *st);

/* gaz__readahead_free stops the thread (its fetch within
 * GAZ__CLIENT_POLL_MS), joins it, and frees everything but the ring, which
 * it returns (free() it or pass it to the next start). NULL: NULL. */
uint8_t *gaz__readahead_free(struct gaz__readahead *ra);

#endif
