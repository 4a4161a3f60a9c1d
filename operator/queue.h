/*
 * queue.h - the reconcile work queue: a bounded set of keys
 * ("namespace/name"), each due at a monotonic time. Adding a key that is
 * already queued keeps one entry, due at the earlier time, so a burst of
 * events for one object yields one reconcile. Failed reconciles come back
 * through gaz_queue_add_after with a per-key backoff the caller computes.
 *
 * Thread-safe: producers (informer callbacks, resync timers) add; one or
 * more workers take.
 */
#ifndef GAZ_OPERATOR_QUEUE_H
#define GAZ_OPERATOR_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gaz_queue;

/* gaz_queue_new makes a queue of at most `max` keys (adds beyond it are
 * dropped and logged: a periodic resync brings them back). NULL on OOM. */
struct gaz_queue *gaz_queue_new(size_t max);
void gaz_queue_free(struct gaz_queue *q);

/* gaz_queue_add_after queues `key` (copied) to be due `delay_ms` from now
 * (0 = now). Returns false when the queue is full or shut down. */
bool gaz_queue_add_after(struct gaz_queue *q, const char *key, int64_t delay_ms);

/* gaz_queue_take waits until a key is due (earliest first) or
 * `timeout_ms` passes, and returns it (free() it), or NULL on timeout or
 * shutdown. */
char *gaz_queue_take(struct gaz_queue *q, int64_t timeout_ms);

/* gaz_queue_len: keys queued. */
size_t gaz_queue_len(struct gaz_queue *q);

/* gaz_queue_shutdown wakes every taker; later takes return NULL at once. */
void gaz_queue_shutdown(struct gaz_queue *q);

#endif
