/*
 * gazette/client.h - the gazette-c broker client: List, Apply,
 * ListFragments, Append (one-shot and streaming) and Read (with retries and
 * direct fragment reads), mirroring Gazette's Go package broker/client
 * (gazette-facts §7) on the wire protocol of §1.4.
 *
 * Dispatch and the route cache (facts §7.1). A client dials one broker
 * address (`--broker.address`) and remembers, per journal, the route that
 * the last response header named (Append and Read responses, List
 * results): an LRU of `route_cache_size` journals whose entries expire
 * after `route_cache_ttl_ms`. An append then goes straight to the
 * journal's primary, and a read or fragment listing to a member in our
 * zone (else any member), over a channel to the member's advertised
 * endpoint; without a usable route the RPC goes to the broker address,
 * whose broker proxies. An entry is invalidated when an RPC it chose fails
 * in transport, when the broker answers with a routing status
 * (NOT_JOURNAL_PRIMARY_BROKER, NO_JOURNAL_PRIMARY_BROKER,
 * INSUFFICIENT_JOURNAL_BROKERS, NOT_JOURNAL_BROKER), and replaced by a
 * header with a newer etcd revision (an older one is ignored). A
 * do_not_proxy read that learnt the journal's route from a response header
 * restarts at a member of that route, as Gazette's Reader does.
 *
 * Connections. Every call first waits for its channel to connect, for at
 * most `connect_timeout_ms`, and then fails with GAZ_ERPC / UNAVAILABLE
 * "broker \"<address>\" unreachable: ..." rather than waiting forever on an
 * address where nothing listens (retrying calls count that as a
 * transport failure and retry).
 *
 * Validation. Every broker response is checked with the validators of
 * protocol/validate.h before it is used (facts §2.9, §3.8); a response that
 * fails is a GAZ_EPROTO error whose text starts with what was being checked
 * ("validating broker response: Header.Etcd: invalid ClusterId ...").
 *
 * Errors. Functions return 0 or a negative GAZ_E* code (common/err.h) with
 * detail in the caller's `struct gaz_status` (may be NULL):
 *   - transport and server failures: GAZ_ERPC, st->grpc = gRPC status code;
 *   - a broker Status other than OK: gaz_client_status_err(status), and the
 *     status name ("JOURNAL_NOT_FOUND") in st->msg; the status itself is
 *     reported through the call's result where the caller may need it;
 *   - gaz_client_cancel() was called: GAZ_ECANCELLED.
 *
 * Memory. Responses handed out as Protocol__* pointers are owned by the
 * caller and freed with protobuf_c_message_free_unpacked(msg, NULL) (they
 * are unpacked with protobuf-c's default allocator). Option structs and the
 * strings and messages they point to are borrowed for the call only (for an
 * appender or reader: until it is freed).
 *
 * Threads. A struct gaz_client may be used from any number of threads at
 * once. An appender or a reader is used by one thread at a time.
 * gaz_rpc_init() must have been called before gaz_client_new().
 */
#ifndef GAZETTE_CLIENT_H
#define GAZETTE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "fragment/fragment.h"
#include "protocol.pb-c.h"

/* Gazette's default service address (mainboilerplate AddressConfig). */
#define GAZ_CLIENT_DEFAULT_ADDRESS "http://localhost:8080"
/* Largest message the client accepts from a broker (bytes). */
#define GAZ_CLIENT_MAX_RECV_BYTES (64 << 20)
/* Largest content chunk an appender sends in one AppendRequest (bytes). */
#define GAZ_APPEND_CHUNK_MAX (1 << 20)

/* ---- the client ---------------------------------------------------------- */

struct gaz_client;

struct gaz_client_opts {
	const char *broker_address; /* http://host:port, https://host:port or
	                             * unix://[host]/path;
	                             * NULL = GAZ_CLIENT_DEFAULT_ADDRESS */
	/* TLS files (PEM paths) for https:// brokers, the address's and the
	 * route members' (Gazette's --broker.cert-file, --broker.cert-key-file,
	 * --broker.trusted-ca-file); NULL or "" = not set. Read whenever a
	 * channel is made: a rotated file is used by channels made after it
	 * changed. No CA = the system's roots. */
	const char *cert_file;      /* client certificate to present, with: */
	const char *cert_key_file;  /* its private key */
	const char *trusted_ca_file; /* CA of the brokers' certificates */
	const char *zone;           /* our zone, for zone-preferred dispatch once
	                             * routes are cached; NULL = "local" */
	const char *auth_token;     /* sent as "authorization: Bearer <token>";
	                             * NULL or "" = no authorization */
	const char *auth_keys;      /* base64 keys (--broker.auth-keys): each call
	                             * signs its own token with the first, with
	                             * the claims Gazette's clients use (§11);
	                             * takes precedence over auth_token */
	const char *file_root;      /* local directory rooting file:// fragment
	                             * URLs of direct reads (gazctl --file-root);
	                             * NULL = such URLs are refused */
	int max_recv_bytes;         /* 0 = GAZ_CLIENT_MAX_RECV_BYTES */
	int64_t rpc_timeout_ms;     /* deadline of List/Apply/ListFragments
	                             * calls; 0 = none */
	int64_t connect_timeout_ms; /* longest wait for a connection before a
	                             * call fails; 0 = GAZ_CLIENT_CONNECT_TIMEOUT_MS,
	                             * < 0 = wait forever */
	int64_t route_cache_size;   /* journals whose routes are remembered;
	                             * 0 = GAZ_CLIENT_ROUTE_CACHE_SIZE, < 0 = no
	                             * cache (every RPC goes to broker_address) */
	int64_t route_cache_ttl_ms; /* lifetime of a remembered route;
	                             * 0 = GAZ_CLIENT_ROUTE_CACHE_TTL_MS */
};

/* Defaults of struct gaz_client_opts. The TTL is gazctl's
 * --broker.cache.ttl default. */
#define GAZ_CLIENT_CONNECT_TIMEOUT_MS 5000
#define GAZ_CLIENT_ROUTE_CACHE_SIZE 1024
#define GAZ_CLIENT_ROUTE_CACHE_TTL_MS 60000

/* gaz_client_new makes a client for `opts` (borrowed; strings are copied).
 * Nothing connects until the first RPC. Returns 0 and *out (free with
 * gaz_client_free after every appender and reader of it), GAZ_EINVAL for a
 * malformed broker address or TLS files that do not load (cert without
 * key, unreadable, not PEM, key not of the cert: the file is named),
 * GAZ_ENOMEM. */
int gaz_client_new(const struct gaz_client_opts *opts, struct gaz_client **out,
		   struct gaz_status *st);

/* gaz_client_free releases the client and its channels. NULL is ignored. */
void gaz_client_free(struct gaz_client *c);

/* gaz_client_cancel makes every current and later blocking call of this
 * client (and of its appenders and readers) return GAZ_ECANCELLED within
 * about 100 ms, cancelling open streams; retries stop. Irreversible.
 * Thread-safe, but not async-signal-safe: call it from a sigwait thread. */
void gaz_client_cancel(struct gaz_client *c);

/* gaz_client_cancelled: whether gaz_client_cancel was called. */
bool gaz_client_cancelled(const struct gaz_client *c);

/* ---- statuses and backoff -------------------------------------------------- */

/* gaz_client_status_name is the protocol.Status name ("JOURNAL_NOT_FOUND"),
 * or "Status(<n>)" for a value outside the enum, written into buf[cap].
 * Returns buf. */
const char *gaz_client_status_name(int status, char *buf, size_t cap);

/* gaz_client_status_err maps a non-OK broker Status to the error code the
 * client returns for it: JOURNAL_NOT_FOUND -> GAZ_ENOTFOUND; the routing
 * statuses (NO_JOURNAL_PRIMARY_BROKER, NOT_JOURNAL_PRIMARY_BROKER,
 * NOT_JOURNAL_BROKER, INSUFFICIENT_JOURNAL_BROKERS) and
 * FRAGMENT_STORE_UNHEALTHY -> GAZ_EUNAVAIL; WRONG_APPEND_OFFSET,
 * INDEX_HAS_GREATER_OFFSET -> GAZ_ERANGE; REGISTER_MISMATCH,
 * ETCD_TRANSACTION_FAILED -> GAZ_EEXIST; NOT_ALLOWED, SUSPENDED ->
 * GAZ_EPERM; OFFSET_NOT_YET_AVAILABLE -> GAZ_ETIMEDOUT; anything else ->
 * GAZ_EPROTO. OK -> 0. */
int gaz_client_status_err(int status);

/* gaz_client_backoff_ms is Gazette's retry delay for attempt `attempt`
 * (broker/client backoff, facts §7.2): -1 -> 0, 0-1 -> 50, 2-3 -> 100,
 * 4-5 -> 1000, later -> 5000 milliseconds. */
int64_t gaz_client_backoff_ms(int attempt);

/* ---- List, Apply, ListFragments (facts §7.5) ------------------------------- */

/* gaz_client_list lists the journals matching `sel` (borrowed; NULL =
 * everything) as ListAllJournals does: one non-watch List stream to the
 * broker address (wait-for-ready), its first response validated whole and
 * required OK, continuation messages (journals only, each validated)
 * appended until the stream ends. An empty continuation is an error, as is
 * a non-OK status (its name is the message). On success *out holds every
 * journal in the broker's order (by name) and the first header; the caller
 * frees it. Errors: GAZ_ERPC, GAZ_EPROTO (validation), the status' code,
 * GAZ_ECANCELLED, GAZ_ENOMEM. */
int gaz_client_list(struct gaz_client *c, const Protocol__LabelSelector *sel,
		    Protocol__ListResponse **out, struct gaz_status *st);

/* gaz_client_apply sends the changes of `req` (borrowed, validated by the
 * caller) in Apply transactions of at most `max_txn_size` changes (0 = all
 * in one), in order, as ApplyJournalsInBatches. Each response is validated;
 * a non-OK status (ETCD_TRANSACTION_FAILED) stops and fails the call, with
 * earlier batches already applied. *revision (may be NULL) receives the
 * etcd revision of the last response, *status (may be NULL) its status.
 * An empty request is sent as one empty transaction. */
int gaz_client_apply(struct gaz_client *c, const Protocol__ApplyRequest *req,
		     size_t max_txn_size, int64_t *revision, int *status, struct gaz_status *st);

struct gaz_fragments_opts {
	const char *journal;      /* required */
	int64_t begin_mod_time;   /* unix seconds; 0 = no lower bound */
	int64_t end_mod_time;     /* unix seconds; 0 = no upper bound */
	int64_t signature_ttl_ns; /* > 0 asks for signed URLs valid this long */
	int32_t page_limit;       /* fragments per page; 0 = broker default 1000 */
};

/* gaz_client_list_fragments pages ListFragments for one journal until
 * next_page_token is 0, as ListAllFragments: every page validated and
 * required OK (SUSPENDED and others fail with their name), fragments
 * concatenated in order into *out (caller frees; header of the first
 * page). Errors as gaz_client_list. */
int gaz_client_list_fragments(struct gaz_client *c, const struct gaz_fragments_opts *o,
			      Protocol__FragmentsResponse **out, struct gaz_status *st);

/* gaz_client_store_health asks the broker address whether fragment store
 * `store` (a store URL, borrowed) is healthy (FragmentStoreHealth, §2.7).
 * *out (caller frees) holds the response: status OK, or
 * FRAGMENT_STORE_UNHEALTHY with store_health_error; both return 0, as
 * Gazette's client.FragmentStoreHealth returns the response. Errors:
 * GAZ_EINVAL (not a store URL), GAZ_ERPC, GAZ_EPROTO (validation). */
int gaz_client_store_health(struct gaz_client *c, const char *store,
			    Protocol__FragmentStoreHealthResponse **out, struct gaz_status *st);

/* ---- Append (facts §2.1, §7.4) --------------------------------------------- */

/* Progress callback: `bytes` of content sent so far in this attempt. Called
 * on the appending thread after each chunk; must not block. */
typedef void (*gaz_append_progress_fn)(void *arg, int64_t bytes);

struct gaz_append_opts {
	const char *journal;           /* required; may carry ";meta" */
	int64_t offset;                /* expected write head; 0 = any */
	int suspend;                   /* Protocol__AppendRequest__Suspend */
	bool do_not_proxy;
	const Protocol__LabelSelector *check_registers;  /* NULL = none */
	const Protocol__LabelSet *union_registers;       /* NULL = none */
	const Protocol__LabelSet *subtract_registers;    /* NULL = none */
	gaz_append_progress_fn progress; /* NULL = none */
	void *progress_arg;
};

struct gaz_appender;

/* gaz_appender_begin validates the request (AppendRequest rules of §3.8),
 * opens an Append stream to the journal's primary (cached route) or the
 * broker address, and sends the parameters message. The appender must
 * then be ended by exactly one of gaz_appender_commit or gaz_appender_abort. Returns 0 and *out,
 * GAZ_EINVAL (invalid request), GAZ_ERPC, GAZ_ENOMEM. */
int gaz_appender_begin(struct gaz_client *c, const struct gaz_append_opts *o,
		       struct gaz_appender **out, struct gaz_status *st);

/* gaz_appender_write sends `len` bytes (borrowed) as content chunks of at
 * most GAZ_APPEND_CHUNK_MAX bytes; len 0 sends nothing. Blocks for flow
 * control. The request and chunks may wait in the transport (grpc's
 * write-buffer hint) until the commit, or until its write buffer fills: a
 * small append reaches the broker in one write, which holds the journal
 * only once its content is in. GAZ_ERPC if the stream already ended
 * (commit then reports why); GAZ_ECANCELLED. After an error only
 * commit/abort remain. */
int gaz_appender_write(struct gaz_appender *a, const void *buf, size_t len,
		       struct gaz_status *st);

/* gaz_appender_commit sends the empty commit message, half-closes, reads
 * and validates the single AppendResponse and frees the appender (also on
 * error). On status OK returns 0 with *resp (may be NULL to discard) owned
 * by the caller: commit fragment, registers, header. On another status,
 * returns gaz_client_status_err(status) with the name in st (plus the
 * store error for FRAGMENT_STORE_UNHEALTHY) and still hands out *resp when
 * asked. GAZ_ERPC when the broker failed the stream. */
int gaz_appender_commit(struct gaz_appender *a, Protocol__AppendResponse **resp,
			struct gaz_status *st);

/* gaz_appender_abort half-closes without the commit message, so the broker
 * rolls back everything written (facts §2.1), and frees the appender.
 * NULL is ignored. */
void gaz_appender_abort(struct gaz_appender *a);

/* Content of a one-shot append: `len` bytes at `buf` when fd < 0, else
 * everything readable from `fd` (from its current position to EOF). */
struct gaz_append_src {
	const void *buf;
	size_t len;
	int fd;
};

/* gaz_client_append appends all of `src` as ONE append transaction, as
 * Gazette's client.Append: begin, chunks, commit, sent to the journal's
 * primary when its route is cached. When the content can be read again (a
 * buffer, or an fd that lseek(2)s: a regular file), attempts failing with
 * gRPC UNAVAILABLE (transport failures, an unreachable broker), a gRPC
 * CANCELLED sent by the broker (how gazette-c's broker reports a proxy hop
 * that lost the primary), or the statuses NOT_JOURNAL_PRIMARY_BROKER,
 * NO_JOURNAL_PRIMARY_BROKER, INSUFFICIENT_JOURNAL_BROKERS are retried from
 * the first byte, with the backoff table (gaz_client_backoff_ms), until
 * one commits or gaz_client_cancel is called (GAZ_ECANCELLED). Other
 * failures, and any failure of a non-rewindable fd (a pipe), are returned.
 * A transport failure can hide a commit, so a retried append may be
 * written twice (at-least-once, as Gazette). A read error of the input
 * aborts the append (GAZ_EIO). *resp as for gaz_appender_commit. */
int gaz_client_append(struct gaz_client *c, const struct gaz_append_opts *o,
		      const struct gaz_append_src *src, Protocol__AppendResponse **resp,
		      struct gaz_status *st);

/* ---- Read (facts §2.2, §7.2, §7.3) ------------------------------------------ */

struct gaz_read_opts {
	const char *journal;     /* required */
	int64_t offset;          /* first offset; -1 = the write head */
	int64_t end_offset;      /* exclusive end; 0 = unbounded */
	bool block;              /* wait at the write head for new content */
	bool do_not_proxy;       /* the broker sends fragment URLs instead of
	                          * proxying remote fragments; we read them */
	bool metadata_only;
	int64_t begin_mod_time;  /* unix seconds: skip older persisted fragments */
	bool retry;              /* RetryReader semantics (see gaz_reader_read) */
	int64_t read_ahead_bytes; /* direct reads: ring of decoded bytes of the
	                          * next fragment, fetched ahead (see below);
	                          * 0 = GAZ_READ_AHEAD_DEFAULT, < 0 = none */
};

/* Default read-ahead ring of a reader (bytes). While the caller consumes a
 * directly read fragment, the reader asks for the next one and a thread of
 * its own fetches and decodes it into this ring, so decoding the next
 * fragment overlaps consuming this one. A reader holds at most two rings
 * (the fragment being consumed, if it was read ahead, and the next one):
 * 2 x read_ahead_bytes, plus per ring a transfer buffer (256 KiB, grown
 * to the largest write of the HTTP stack) and the codec's state. */
#define GAZ_READ_AHEAD_DEFAULT ((int64_t)32 << 20)

/* Events of gaz_reader_read besides content (positive, not errors). */
enum {
	GAZ_READ_META = 2, /* a metadata response arrived: see gaz_reader_meta */
	GAZ_READ_JUMP = 3, /* the offset moved forward past unreadable content
	                    * (ErrOffsetJump); gaz_reader_offset is the new one */
	GAZ_READ_TAIL = 4, /* non-blocking read reached the write head
	                    * (OFFSET_NOT_YET_AVAILABLE) */
	GAZ_READ_WAIT = 5, /* gaz_reader_try_read only: nothing yet; try
	                    * again when woken (struct gaz_reader_wake) */
};

/* How a reader that holds no thread tells its owner when to try again
 * (gaz_reader_try_read). */
struct gaz_reader_wake {
	/* Called once after a GAZ_READ_WAIT that armed it, from a poller
	 * thread of the client library, when the awaited response, the end
	 * of the stream or its failure is in (a cancel of the client
	 * included). It must not block, nor call into the reader: it tells
	 * the owner's own loop to try again. `arg` is passed back, not
	 * owned, and must stay valid until gaz_reader_free returns. */
	void (*fn)(void *arg);
	void *arg;
	/* Out, with GAZ_READ_WAIT: a monotonic time (gaz_mono_ns) to try
	 * again without a call to fn (a retry's backoff), or
	 * GAZ_DEADLINE_NEVER when fn will be called. */
	int64_t at_ns;
};

/* The last metadata response. Strings and the fragment are owned by the
 * reader and valid until its next read or free. */
struct gaz_read_meta {
	int status;             /* protocol.Status of the response */
	int64_t offset;         /* offset the response is for */
	int64_t write_head;
	bool has_fragment;
	struct gaz_fragment fragment; /* valid when has_fragment */
	const char *fragment_url;     /* "" when none */
};

struct gaz_reader;

/* gaz_reader_new validates the ReadRequest (§3.8) and makes a reader; no
 * RPC starts until the first read. Returns 0 and *out (free with
 * gaz_reader_free), GAZ_EINVAL, GAZ_ENOMEM. */
int gaz_reader_new(struct gaz_client *c, const struct gaz_read_opts *o, struct gaz_reader **out,
		   struct gaz_status *st);

/* gaz_reader_read returns the next thing the read yields:
 *   0              *n (1..cap) bytes of content copied into buf, which were
 *                  at offset gaz_reader_offset() - *n;
 *   GAZ_READ_META  a metadata response (fragment, write head), *n = 0;
 *   GAZ_READ_JUMP  the response was for an offset beyond the one asked for
 *                  (content was deleted, or offset -1 resolved); the
 *                  metadata is updated if it was a metadata response;
 *   GAZ_READ_TAIL  a non-blocking read is at the write head;
 *   GAZ_EOF        end_offset was read through; (without retry) the stream
 *                  or the directly read fragment ended;
 *   < 0            an error.
 * Every response is validated, and a content or metadata response for an
 * offset below the requested one is a protocol error (facts §2.9).
 * Fragments announced by URL (do_not_proxy) are fetched directly (§7.3):
 * file:// under the client's file_root, http(s) with libcurl (HTTP/1.1,
 * Accept-Encoding identity for GZIP_OFFLOAD_DECOMPRESSION and gzip for
 * GZIP), decompressed, (offset - begin) bytes discarded, and the body must
 * end exactly at the fragment's end.
 * Without `retry`, a failure ends the reader and broker statuses map to
 * errors (gaz_client_status_err; meta.status holds the status). With
 * `retry` (RetryReader, §7.2) the read is restarted at the current offset
 * after stream ends, transport errors, routing statuses, validation errors
 * and JOURNAL_NOT_FOUND (up to 3 times), with the backoff table; only
 * GAZ_ECANCELLED, SUSPENDED (GAZ_EPERM), JOURNAL_NOT_FOUND (GAZ_ENOTFOUND,
 * after the 4th attempt), GAZ_EINVAL (a fragment URL that cannot be read
 * here: no file root, unknown scheme; Gazette would retry it forever) and
 * the events above reach the caller. */
int gaz_reader_read(struct gaz_reader *r, void *buf, size_t cap, size_t *n,
		    struct gaz_status *st);

/* gaz_reader_try_read is gaz_reader_read for a reader that holds no
 * thread: the same results, and the same retries and backoff, except
 * that where gaz_reader_read would wait on the broker's next response or
 * sleep out a retry's backoff, it returns GAZ_READ_WAIT at once (*n = 0)
 * with `w` armed: w->fn is called when the response is in, or w->at_ns
 * says when the backoff ends. One thread may so drive any number of
 * readers at the head of their journals (the consumer runtime's shards
 * do). Fetching a fragment directly from its store (a URL, as for
 * do_not_proxy reads of persisted content) still reads on the calling
 * thread. A reader is driven by one of the two functions at a time, from
 * one thread at a time. */
int gaz_reader_try_read(struct gaz_reader *r, void *buf, size_t cap, size_t *n,
			struct gaz_reader_wake *w, struct gaz_status *st);

/* gaz_reader_offset: the next offset the reader will return (-1 until an
 * offset -1 read resolved). */
int64_t gaz_reader_offset(const struct gaz_reader *r);

/* gaz_reader_journal: the journal, borrowed from the reader. */
const char *gaz_reader_journal(const struct gaz_reader *r);

/* gaz_reader_meta: the last metadata response, borrowed (see the struct). */
const struct gaz_read_meta *gaz_reader_meta(const struct gaz_reader *r);

/* gaz_reader_free cancels any open stream or fetch and frees. NULL ok. */
void gaz_reader_free(struct gaz_reader *r);

#endif
