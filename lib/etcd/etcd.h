/*
 * etcd.h - a small etcd v3 client over lib/rpc: KV (Range, Put,
 * DeleteRange, Txn), Lease (Grant, KeepAlive, Revoke) and Watch.
 *
 * Requests and responses are the protobuf-c structs generated from
 * proto/etcd.proto (Etcdserverpb__*). Calls are synchronous and
 * thread-safe; streams (watch, keep-alive) run on their own threads.
 * Errors: GAZ_EUNAVAIL when etcd cannot be reached (the caller retries),
 * GAZ_ERPC for other failures (grpc code in st->grpc), GAZ_ETIMEDOUT.
 */
#ifndef GAZ_ETCD_ETCD_H
#define GAZ_ETCD_ETCD_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "etcd.pb-c.h"
#include "rpc/rpc.h"

struct gaz_etcd;

/* gaz_etcd_new makes a client of the endpoint "http://127.0.0.1:2379"
 * (http, https or unix). `timeout_ms` bounds each unary call. Does not
 * connect yet. NULL with st set on a malformed endpoint. */
struct gaz_etcd *gaz_etcd_new(const char *endpoint, int64_t timeout_ms, struct gaz_status *st);

/* gaz_etcd_new_tls is gaz_etcd_new with the TLS files of an https://
 * endpoint (`tls` borrowed; NULL = no client certificate, the system's
 * roots), read now and watched for renewals, used at each reconnect
 * (lib/rpc: gaz_rpc_channel_open) (Gazette's --etcd.cert-file, --etcd.cert-key-file,
 * --etcd.trusted-ca-file; mainboilerplate EtcdConfig.MustDial builds its
 * TLS config only for https://, so the files are not read otherwise).
 * NULL with st set on a malformed endpoint or TLS files that do not load
 * (the file named). */
struct gaz_etcd *gaz_etcd_new_tls(const char *endpoint, int64_t timeout_ms,
				  const struct gaz_rpc_tls *tls, struct gaz_status *st);
void gaz_etcd_free(struct gaz_etcd *e);

/* Unary calls. *resp is owned by the caller: free with
 * protobuf_c_message_free_unpacked(&(*resp)->base, NULL); NULL on error.
 * Each waits for a connection (wait_for_ready) for at most timeout_ms; an
 * unreachable etcd, grpc UNAVAILABLE or DEADLINE_EXCEEDED give GAZ_EUNAVAIL
 * (retry), other grpc failures GAZ_ERPC; st->grpc holds the grpc code.
 * A failed Txn compare is not an error: resp->succeeded is false. */
int gaz_etcd_range(struct gaz_etcd *e, const Etcdserverpb__RangeRequest *req,
		   Etcdserverpb__RangeResponse **resp, struct gaz_status *st);
int gaz_etcd_put(struct gaz_etcd *e, const Etcdserverpb__PutRequest *req,
		 Etcdserverpb__PutResponse **resp, struct gaz_status *st);
int gaz_etcd_delete(struct gaz_etcd *e, const Etcdserverpb__DeleteRangeRequest *req,
		    Etcdserverpb__DeleteRangeResponse **resp, struct gaz_status *st);
int gaz_etcd_txn(struct gaz_etcd *e, const Etcdserverpb__TxnRequest *req,
		 Etcdserverpb__TxnResponse **resp, struct gaz_status *st);

/* gaz_etcd_prefix_end writes the range_end of a prefix scan (prefix with its
 * last byte incremented) into out[len]; len must equal the prefix length. */
void gaz_etcd_prefix_end(const uint8_t *prefix, size_t len, uint8_t *out);

/* gaz_etcd_prefix_range_end is the exact form of gaz_etcd_prefix_end, as
 * etcd's clientv3.GetPrefixRangeEnd: trailing 0xff bytes are dropped before
 * the increment, and an all-0xff (or empty) prefix gives "\0" (every key from
 * key on). out must hold max(len, 1) bytes; returns the range_end length.
 * Pure; thread-safe. */
size_t gaz_etcd_prefix_range_end(const uint8_t *prefix, size_t len, uint8_t *out);

/* ---- leases ------------------------------------------------------------ */

/* gaz_etcd_lease_grant grants a lease of ttl_s seconds; *id receives it. */
int gaz_etcd_lease_grant(struct gaz_etcd *e, int64_t ttl_s, int64_t *id, struct gaz_status *st);

/* gaz_etcd_lease_revoke revokes the lease (etcd deletes its keys). */
int gaz_etcd_lease_revoke(struct gaz_etcd *e, int64_t id, struct gaz_status *st);

struct gaz_etcd_keepalive;

/* Called from the keep-alive thread once when the lease is lost (expired,
 * revoked, or etcd unreachable past the TTL); the thread then ends (the
 * caller must still call gaz_etcd_keepalive_stop). `why` is borrowed for
 * the call. Never called after or during gaz_etcd_keepalive_stop. */
typedef void (*gaz_etcd_lease_lost_fn)(void *arg, const char *why);

/* gaz_etcd_keepalive_start keeps lease `id` alive, sending a keep-alive
 * every ttl_s/3 seconds on one LeaseKeepAlive stream (reopened on errors).
 * `e` is borrowed and must outlive it; `lost` may be NULL. Returns NULL
 * with st set: GAZ_EINVAL (ttl_s <= 0), GAZ_ENOMEM. Stop with
 * gaz_etcd_keepalive_stop (cancels the stream and joins the thread; not
 * from within lost()). */
struct gaz_etcd_keepalive *gaz_etcd_keepalive_start(struct gaz_etcd *e, int64_t id,
						    int64_t ttl_s, gaz_etcd_lease_lost_fn lost,
						    void *arg, struct gaz_status *st);
void gaz_etcd_keepalive_stop(struct gaz_etcd_keepalive *ka);

/* gaz_etcd_keepalive_valid_until: the monotonic ns until which the lease
 * is surely alive: the last keep-alive answer's arrival plus the TTL, less
 * a tenth of the TTL for the answer's travel time. Monotonic time runs on
 * while the process is stopped, so after a SIGSTOP longer than the TTL
 * this is already in the past before the keep-alive thread notices
 * (cases BR-18). Thread-safe. */
int64_t gaz_etcd_keepalive_valid_until(struct gaz_etcd_keepalive *ka);

/* ---- watch ------------------------------------------------------------- */

struct gaz_etcd_watch;

/* Called on the watch thread for each WatchResponse carrying events, in
 * order. `resp` is borrowed for the call. A non-zero return stops the watch
 * (the error callback then receives GAZ_ECANCELLED). */
typedef int (*gaz_etcd_watch_fn)(void *arg, const Etcdserverpb__WatchResponse *resp);

/* Called once, on the watch thread, when the watch ends for good:
 * compaction past the revision to resume from (GAZ_ERANGE), a cancellation
 * by etcd for another reason (GAZ_ERPC, e.g. permission denied), stopped by
 * the caller or by fn (GAZ_ECANCELLED). `why` is borrowed for the call.
 * Transient errors (etcd restart, connection loss) are retried internally
 * with Gazette's KeySpace backoff (0, 0, 5 ms, 2 s, 3 s, 4 s, then 5 s),
 * resuming from the last delivered event's mod_revision + 1, and are not
 * reported. After it the caller must still call gaz_etcd_watch_stop. */
typedef void (*gaz_etcd_watch_end_fn)(void *arg, int code, const char *why);

/* gaz_etcd_watch_start watches [key, range_end) from start_revision (0 =
 * from now: then the revision of etcd's `created` answer anchors resumes)
 * with progress notifications. key and range_end are copied (range_end may
 * be NULL/0 for the one key); `e` is borrowed and must outlive the watch;
 * end_fn may be NULL. Returns NULL with st set: GAZ_EINVAL (no fn, negative
 * revision), GAZ_ENOMEM. */
struct gaz_etcd_watch *gaz_etcd_watch_start(struct gaz_etcd *e, const uint8_t *key, size_t key_len,
					    const uint8_t *range_end, size_t range_end_len,
					    int64_t start_revision, gaz_etcd_watch_fn fn,
					    gaz_etcd_watch_end_fn end_fn, void *arg,
					    struct gaz_status *st);

/* Called on the watch thread when the revision to resume from has been
 * compacted away: the caller re-reads its state at a current revision
 * (a Range of the whole watched range) and returns that revision, so the
 * watch resumes one past it without missing a change; or returns a
 * negative value to end the watch with GAZ_ERANGE as without it. A watch
 * that resumed from the compaction revision instead would silently skip
 * every change made before it (cases BR-17). */
typedef int64_t (*gaz_etcd_watch_resync_fn)(void *arg);

/* gaz_etcd_watch_start_resync is gaz_etcd_watch_start with a resync
 * callback for compactions (may be NULL). */
struct gaz_etcd_watch *gaz_etcd_watch_start_resync(struct gaz_etcd *e, const uint8_t *key,
						   size_t key_len, const uint8_t *range_end,
						   size_t range_end_len, int64_t start_revision,
						   gaz_etcd_watch_fn fn, gaz_etcd_watch_end_fn end_fn,
						   gaz_etcd_watch_resync_fn resync, void *arg,
						   struct gaz_status *st);

/* gaz_etcd_watch_stop cancels the watch and joins its thread. Must not be
 * called from the watch callbacks. */
void gaz_etcd_watch_stop(struct gaz_etcd_watch *w);

#endif
