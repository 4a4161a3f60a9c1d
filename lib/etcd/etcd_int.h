/*
 * etcd_int.h - internals shared by lib/etcd's files (etcd.c, etcd_lease.c,
 * etcd_watch.c); not for use outside lib/etcd.
 *
 * struct gaz_etcd is immutable after gaz_etcd_new, so any thread may use it.
 * A "worker" is the stop machinery of a stream thread (keep-alive, watch):
 * a flag, the stream currently open (so a stopper can cancel it), and a
 * condvar for interruptible sleeps. Invariant: `cur` is only freed by the
 * worker thread after it has detached it under `mu`, so a stopper never
 * cancels a freed stream.
 */
#ifndef GAZ_ETCD_ETCD_INT_H
#define GAZ_ETCD_ETCD_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "rpc/rpc.h"

struct gaz_etcd {
	struct gaz_rpc_channel *ch;
	int64_t timeout_ms;  /* bound of each unary call */
};

struct gaz__etcd_worker {
	pthread_mutex_t mu;
	pthread_cond_t cv;            /* CLOCK_MONOTONIC; signalled on stop */
	bool stop;                    /* under mu */
	struct gaz_rpc_stream *cur;   /* under mu; NULL between streams */
};

/* gaz__etcd_rpc_fail turns the failure `rc` of a gaz_rpc_* call, detailed
 * in `local`, into the error etcd callers see: GAZ_EUNAVAIL for UNAVAILABLE,
 * DEADLINE_EXCEEDED and timeouts (the caller retries), else GAZ_ERPC with the
 * grpc code, or `rc` itself. Sets st (first error wins); returns the code. */
int gaz__etcd_rpc_fail(struct gaz_status *st, int rc, const struct gaz_status *local,
		       const char *method);

/* gaz__etcd_backoff_ms: the delay before re-opening a stream on attempt
 * `attempt` (0-based): 0, 0, 5 ms, 2 s, 3 s, 4 s, then 5 s, as Gazette's
 * KeySpace.Watch. */
int64_t gaz__etcd_backoff_ms(int attempt);

int gaz__etcd_worker_init(struct gaz__etcd_worker *w);
void gaz__etcd_worker_destroy(struct gaz__etcd_worker *w);

/* gaz__etcd_worker_attach records s as the current stream; false (s not
 * recorded) when stopping. The worker thread only. */
bool gaz__etcd_worker_attach(struct gaz__etcd_worker *w, struct gaz_rpc_stream *s);

/* gaz__etcd_worker_detach forgets and frees the current stream (if any). */
void gaz__etcd_worker_detach(struct gaz__etcd_worker *w);

/* gaz__etcd_worker_sleep waits until deadline_ns (monotonic) or stop;
 * returns true when stopping. */
bool gaz__etcd_worker_sleep(struct gaz__etcd_worker *w, int64_t deadline_ns);

bool gaz__etcd_worker_stopping(struct gaz__etcd_worker *w);

/* gaz__etcd_worker_stop sets the flag, cancels the current stream and wakes
 * the sleeper. Any thread; idempotent. */
void gaz__etcd_worker_stop(struct gaz__etcd_worker *w);

#endif
