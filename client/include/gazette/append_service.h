/*
 * gazette/append_service.h - asynchronous, ordered, batched appends: the
 * gazette-c counterpart of Gazette's broker/client AppendService
 * (append_service.go; gazette-facts §7.4).
 *
 * A caller queues an append (a journal and its bytes) and gets a handle
 * back at once; the service commits it in the background and the handle
 * then holds the offsets it was written at, or the error that failed it.
 *
 * Order. Appends queued to one journal commit in the order they were
 * queued: the order in which gaz_append_service_append calls returned. So
 * the appends each thread queues to a journal stay in that thread's order.
 * One journal has at most one Append RPC in flight; different journals
 * are appended concurrently by a pool of worker threads.
 *
 * Batching. While a journal's Append RPC is in flight, further appends to
 * it queue up; the next RPC carries as many queued appends as fit in
 * `max_batch_bytes` (at least one), in queue order, as ONE append
 * transaction, provided their register options are identical (Gazette
 * coalesces appends whose requests are equal). All of a batch commits or
 * none does. Each handle reports its own offsets inside the batch and the
 * batch's commit fragment.
 *
 * Retries. A failed batch is retried whole, from its first byte, with the
 * client's backoff table, until it commits, the client is cancelled, or it
 * fails with one of Gazette's terminal errors (JOURNAL_NOT_FOUND,
 * NOT_ALLOWED, WRONG_APPEND_OFFSET, INDEX_HAS_GREATER_OFFSET,
 * REGISTER_MISMATCH, FRAGMENT_STORE_UNHEALTHY; with check_registers set
 * only cancellation is terminal). A transport failure after the broker
 * committed makes the retry write the batch again: delivery is
 * at-least-once, as in Gazette. A terminal error fails that batch, every
 * append queued behind it, and every later append to the journal (the
 * error is sticky, as Gazette's AppendService keeps it), so a failed
 * append is never followed by a later one of the same journal.
 *
 * Memory. Queued bytes are copied into the service and count against
 * `max_buffered_bytes` (plus GAZ_APPEND_SERVICE_ENTRY_COST per append)
 * until their batch completes; a caller queueing beyond that blocks until
 * room frees up (back-pressure). Gazette buffers in temporary files; this
 * service buffers in memory, bounded.
 *
 * Threads. Every function may be called from any thread, concurrently,
 * except that gaz_append_service_free must be the last call on a service
 * and a handle is freed exactly once. Worker threads call only the client
 * library; no user code runs on them.
 *
 * Errors. Functions return 0 or a negative GAZ_E* code (common/err.h)
 * with detail in the caller's struct gaz_status (may be NULL); a failed
 * append reports the failure of its batch (the broker status name, or
 * the transport error) as gaz_client_append would.
 */
#ifndef GAZETTE_APPEND_SERVICE_H
#define GAZETTE_APPEND_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gazette/client.h"

/* Defaults of struct gaz_append_service_opts. */
#define GAZ_APPEND_SERVICE_BUFFER_BYTES (64u << 20)
#define GAZ_APPEND_SERVICE_BATCH_BYTES (8u << 20)
#define GAZ_APPEND_SERVICE_WORKERS 8
/* Bytes of buffer an append counts for on top of its content. */
#define GAZ_APPEND_SERVICE_ENTRY_COST 128

struct gaz_append_service_opts {
	size_t max_buffered_bytes; /* queued + in-flight bytes before appends
	                            * block; 0 = GAZ_APPEND_SERVICE_BUFFER_BYTES */
	size_t max_batch_bytes;    /* content of one Append RPC built from
	                            * queued appends (a larger single append
	                            * goes alone); 0 = GAZ_APPEND_SERVICE_BATCH_BYTES */
	int max_workers;           /* threads running Append RPCs, started on
	                            * demand; 0 = GAZ_APPEND_SERVICE_WORKERS */
};

struct gaz_append_service;
struct gaz_append_handle;

/* What a committed append was written as. */
struct gaz_append_result {
	int64_t begin;        /* journal offset of this append's first byte */
	int64_t end;          /* offset after its last byte (begin + len) */
	int64_t batch_begin;  /* the commit fragment of the Append RPC that */
	int64_t batch_end;    /*   carried it: [batch_begin, batch_end) */
	uint8_t batch_sum[20]; /* SHA-1 of the batch's bytes */
	int batches;          /* Append RPC attempts the batch took (>= 1) */
};

/* gaz_append_service_new makes a service appending through `c` (borrowed:
 * it must outlive the service). `opts` may be NULL (defaults). Returns 0
 * and *out (free with gaz_append_service_free), GAZ_EINVAL
 * (max_batch_bytes > max_buffered_bytes), GAZ_ENOMEM. No thread starts
 * before the first append. */
int gaz_append_service_new(struct gaz_client *c, const struct gaz_append_service_opts *opts,
			   struct gaz_append_service **out, struct gaz_status *st);

/* gaz_append_service_append queues the append of `len` bytes at `buf`
 * (copied; borrowed for the call) to o->journal, with o's register options
 * (check_registers, union_registers, subtract_registers; borrowed, copied).
 * o->offset, o->suspend, o->do_not_proxy and o->progress must be zero:
 * a batch has no single offset. len 0 is allowed (an empty append, a
 * barrier). Blocks while the service's buffer is full.
 * On 0, *out (may be NULL: fire and forget) is a handle owned by the
 * caller, to be freed with gaz_append_handle_free whether or not it was
 * waited on. Errors: GAZ_EINVAL (invalid request, or forbidden options),
 * GAZ_ERANGE (len + GAZ_APPEND_SERVICE_ENTRY_COST exceeds the whole
 * buffer), the journal's sticky terminal error (its code and text),
 * GAZ_ECANCELLED (the client was cancelled), GAZ_ESTOPPED (the service is
 * being freed), GAZ_ENOMEM. Nothing is queued on error. */
int gaz_append_service_append(struct gaz_append_service *svc, const struct gaz_append_opts *o,
			      const void *buf, size_t len, struct gaz_append_handle **out,
			      struct gaz_status *st);

/* gaz_append_handle_wait waits until the append committed or failed, for
 * at most timeout_ms (< 0 = no limit; 0 = just look). Returns 0 with *res
 * (may be NULL) filled, GAZ_ETIMEDOUT if it is still pending, or the
 * append's error with its text in st. May be called any number of times,
 * from any thread, until the handle is freed. */
int gaz_append_handle_wait(struct gaz_append_handle *h, int64_t timeout_ms,
			   struct gaz_append_result *res, struct gaz_status *st);

/* gaz_append_handle_notify arranges fn(arg) to be called once when the
 * append has committed or failed: at once on this thread if it has, else
 * from the service's worker thread that completes it (fn must not block;
 * it may call gaz_append_handle_wait with timeout_ms 0). For owners that
 * hold no thread per pending append (the consumer runtime's ACK
 * barrier). `arg` is passed back, not owned. One notification per
 * handle: a later call replaces an armed one. The caller's reference must
 * outlive the call of fn. */
void gaz_append_handle_notify(struct gaz_append_handle *h, void (*fn)(void *arg), void *arg);

/* gaz_append_handle_ref gives another owner of `h` (the same handle,
 * returned), which frees it with gaz_append_handle_free in turn. */
struct gaz_append_handle *gaz_append_handle_ref(struct gaz_append_handle *h);

/* gaz_append_handle_free releases the caller's handle; the append itself
 * goes on. NULL is ignored. */
void gaz_append_handle_free(struct gaz_append_handle *h);

/* gaz_append_service_flush waits until every append queued before the call
 * committed or failed. Returns 0, or GAZ_ECANCELLED if the client was
 * cancelled (appends then complete with GAZ_ECANCELLED). It does not
 * report individual failures: their handles do. */
int gaz_append_service_flush(struct gaz_append_service *svc, struct gaz_status *st);

/* gaz_append_service_free waits for every queued append to commit or fail
 * (call gaz_client_cancel first to abandon retries: they then fail with
 * GAZ_ECANCELLED promptly), stops the workers and frees the service.
 * Handles stay valid until freed. NULL is ignored. */
void gaz_append_service_free(struct gaz_append_service *svc);

#endif
