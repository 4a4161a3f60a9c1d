/*
 * client_int.h - internals shared by the client_*.c files of the gazette-c
 * client library. Not a public header (see gazette/client.h).
 *
 *   client_core.c    the client, dispatch, cancellation, statuses, backoff
 *   client_list.c    List, Apply, ListFragments
 *   client_append.c  Appender and the one-shot Append
 *   client_read.c    Reader and RetryReader
 *   client_fetch.c   direct fragment reads (file:// and http(s) via curl)
 *
 * Only client_fetch.c calls libcurl; only lib/rpc talks to grpc.
 */
#ifndef GAZ_CLIENT_CLIENT_INT_H
#define GAZ_CLIENT_CLIENT_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "gazette/client.h"
#include "rpc/rpc.h"

/* How often blocked receives wake to look at the cancel flag. */
#define GAZ__CLIENT_POLL_MS 100

/* A streaming call registered with its client, so gaz_client_cancel can
 * cancel it while a send blocks on flow control. */
struct gaz__client_call {
	struct gaz_rpc_stream *stream;
	struct gaz__client_call *prev, *next;
};

/* Most member endpoints a client keeps channels to. */
#define GAZ__CLIENT_PEERS_MAX 16

/* A channel to a broker's advertised endpoint (route.endpoints[i]). */
struct gaz__client_peer {
	char *endpoint;
	struct gaz_rpc_channel *chan;
};

struct gaz_client {
	char *address;               /* broker service address */
	char *zone;
	char *auth;                  /* "Bearer <token>" or NULL */
	char *file_root;             /* NULL = file:// URLs refused */
	int64_t rpc_timeout_ms;
	struct gaz_rpc_channel *chan; /* to `address` */
	atomic_int cancelled;
	pthread_mutex_t mu;          /* guards `calls` and `peers` */
	struct gaz__client_call calls; /* list head (sentinel) */
	struct gaz__client_peer peers[GAZ__CLIENT_PEERS_MAX];
	size_t npeers;
};

/* gaz__client_channel is the channel an RPC for a journal with `route`
 * (NULL = unknown) goes to. Without a route cache: always the broker
 * address. Borrowed from the client. */
struct gaz_rpc_channel *gaz__client_channel(struct gaz_client *c, const Protocol__Route *route);

/* gaz__client_member_channel is the channel to a member of `route`, for
 * reads that must reach a replica themselves (do_not_proxy): the first
 * member in our zone with an endpoint, else the primary, else any member
 * with one (Gazette's dispatcher prefers the zone too). Falls back to the
 * broker address when the route names no endpoints or GAZ__CLIENT_PEERS_MAX
 * channels exist. Borrowed from the client. Thread-safe. */
struct gaz_rpc_channel *gaz__client_member_channel(struct gaz_client *c,
						   const Protocol__Route *route);

/* gaz__client_deadline: the monotonic deadline of a unary call now. */
int64_t gaz__client_deadline(const struct gaz_client *c);

/* gaz__client_open opens a streaming call on `ch` and registers it in
 * `call` (call->stream). `wait_for_ready` waits for a connection (Go's
 * grpc.WaitForReady, used by listings) instead of failing fast with
 * UNAVAILABLE. Returns 0, GAZ_ECANCELLED, or the error of
 * gaz_rpc_stream_open; call->stream is NULL on failure. */
int gaz__client_open(struct gaz_client *c, struct gaz_rpc_channel *ch, const char *path,
		     bool wait_for_ready, struct gaz__client_call *call, struct gaz_status *st);

/* gaz__client_close unregisters and frees the call's stream (NULL ok). */
void gaz__client_close(struct gaz_client *c, struct gaz__client_call *call);

/* gaz__client_recv receives the next message of a registered stream,
 * waking every GAZ__CLIENT_POLL_MS to honour cancellation. Returns 0,
 * GAZ_EOF (stream ended; finish it for the status), GAZ_EPROTO,
 * GAZ_ECANCELLED (the stream is cancelled). */
int gaz__client_recv(struct gaz_client *c, struct gaz_rpc_stream *s,
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
 * discarding (offset - begin) bytes. Returns 0 and *out (close with
 * gaz__frag_close), GAZ_EINVAL (unsupported scheme, no file root),
 * GAZ_ENOTFOUND / GAZ_EIO (fetch failed: "!OK fetching (404 Not Found,
 * ...)"), GAZ_EPROTO (decoding), GAZ_ECANCELLED, GAZ_ENOMEM. */
int gaz__frag_open(struct gaz_client *c, const struct gaz_fragment *f, int64_t offset,
		   const char *url, struct gaz__frag_reader **out, struct gaz_status *st);

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

#endif
