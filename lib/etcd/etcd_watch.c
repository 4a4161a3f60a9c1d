/*
 * etcd_watch.c - a resumable watch of one etcd key range.
 *
 * One thread per watch. It opens a Watch stream, sends one
 * WatchCreateRequest{key, range_end, start_revision = next_rev,
 * progress_notify} and hands every response carrying events to fn, in
 * order. Invariant: next_rev is one past the mod_revision of the last event
 * delivered (or the start revision, or, for a watch "from now", one past the
 * revision of the first `created` header), so a re-opened stream resumes
 * exactly where delivery stopped: no event is lost or repeated. The
 * response header revision is NOT used for this: etcd 3.4 stamps a
 * catch-up batch cut at 1000 revisions with its current revision.
 *
 * A stream that fails or ends (etcd restart, connection loss, leader
 * change) is re-opened with Gazette's KeySpace backoff (etcd_int.h), reset
 * by each `created` answer. On compaction past next_rev the resync
 * callback, if any, re-reads the caller's state and the watch resumes after
 * it. The watch ends for good, with one end_fn call, on compaction past
 * next_rev without a resync (GAZ_ERANGE), a cancellation by etcd for
 * another reason (GAZ_ERPC), fn returning non-zero or gaz_etcd_watch_stop
 * (GAZ_ECANCELLED). Streams use wait_for_ready, so while etcd is down the
 * thread waits in grpc instead of spinning; stop cancels that wait. etcd
 * does not end a Watch stream on half-close (grpc-core.md §6), so streams
 * are always cancelled, never half-closed.
 * Lock order: only the worker's mutex is taken.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "etcd/etcd.h"
#include "etcd/etcd_int.h"
#include "rpc/rpc.h"

#define WATCH_METHOD "/etcdserverpb.Watch/Watch"

enum { W_GO_ON, W_RETRY, W_END };

struct gaz_etcd_watch {
	struct gaz__etcd_worker w;
	struct gaz_etcd *e;             /* borrowed; outlives the watch */
	uint8_t *key;                   /* owned copies */
	size_t key_len;
	uint8_t *range_end;
	size_t range_end_len;
	int64_t next_rev;               /* thread only; see the invariant */
	gaz_etcd_watch_fn fn;
	gaz_etcd_watch_end_fn end_fn;   /* may be NULL */
	gaz_etcd_watch_resync_fn resync; /* may be NULL */
	void *arg;
	int attempt;                    /* thread only: failed opens in a row */
	int end_code;                   /* thread only: for end_fn */
	char why[600];
	pthread_t th;
};

/* watch_open opens a stream and asks for the watch; NULL on failure or
 * when stopping (the stream is then attached to the worker). */
static struct gaz_rpc_stream *watch_open(struct gaz_etcd_watch *w)
{
	Etcdserverpb__WatchCreateRequest cr = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
	Etcdserverpb__WatchRequest req = ETCDSERVERPB__WATCH_REQUEST__INIT;
	struct gaz_status st = {0};
	struct gaz_rpc_stream *s;

	s = gaz_rpc_stream_open(w->e->ch, WATCH_METHOD, GAZ_DEADLINE_NEVER, true, NULL, &st);
	if (!s) {
		snprintf(w->why, sizeof(w->why), "watch open failed: %s", st.msg);
		return NULL;
	}
	if (!gaz__etcd_worker_attach(&w->w, s)) {
		gaz_rpc_stream_free(s);
		return NULL;
	}
	cr.key = (ProtobufCBinaryData){w->key_len, w->key};
	cr.range_end = (ProtobufCBinaryData){w->range_end_len, w->range_end};
	cr.start_revision = w->next_rev;
	cr.progress_notify = true;
	req.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
	req.create_request = &cr;
	gaz_rpc_stream_send(s, &req.base); /* a failure shows in the recv */
	return s;
}

/* watch_answer handles one response: W_GO_ON, W_RETRY (re-read after a
 * compaction; re-open at the new next_rev) or W_END (end_code set). */
static int watch_answer(struct gaz_etcd_watch *w, const Etcdserverpb__WatchResponse *r)
{
	const Etcdserverpb__Event *last;

	if (r->compact_revision != 0) {
		int64_t rev = -1;
		w->end_code = GAZ_ERANGE;
		snprintf(w->why, sizeof(w->why), "watch from revision %lld failed: compacted "
			 "through %lld", (long long)w->next_rev, (long long)r->compact_revision);
		if (w->resync && (rev = w->resync(w->arg)) >= 0) {
			gaz_warn("etcd watch fell behind a compaction; state re-read",
				 "from=%lld compacted=%lld resumed=%lld", (long long)w->next_rev,
				 (long long)r->compact_revision, (long long)rev + 1);
			w->next_rev = rev + 1;
			w->attempt = 0;
			w->end_code = GAZ_ECANCELLED;
			snprintf(w->why, sizeof(w->why), "resuming after a re-read at revision %lld",
				 (long long)rev);
			return W_RETRY;
		}
		return W_END;
	}
	if (r->canceled) {
		w->end_code = GAZ_ERPC;
		snprintf(w->why, sizeof(w->why), "watch cancelled by etcd: %s",
			 r->cancel_reason ? r->cancel_reason : "");
		return W_END;
	}
	if (r->created) {
		w->attempt = 0;
		if (w->next_rev == 0 && r->header)
			w->next_rev = r->header->revision + 1;
	}
	if (r->n_events == 0)
		return W_GO_ON; /* created, or a progress notification */
	last = r->events[r->n_events - 1];
	if (last->kv)
		w->next_rev = last->kv->mod_revision + 1;
	if (w->fn(w->arg, r) != 0) {
		w->end_code = GAZ_ECANCELLED;
		snprintf(w->why, sizeof(w->why), "watch stopped by its callback");
		return W_END;
	}
	return W_GO_ON;
}

/* watch_stream runs one stream to its end: W_RETRY or W_END. */
static int watch_stream(struct gaz_etcd_watch *w)
{
	struct gaz_status st = {0};
	struct gaz_rpc_stream *s = watch_open(w);
	ProtobufCMessage *m;
	int rc, end = W_GO_ON;

	if (!s)
		return gaz__etcd_worker_stopping(&w->w) ? W_END : W_RETRY;
	while (end == W_GO_ON) {
		m = NULL;
		rc = gaz_rpc_stream_recv(s, &etcdserverpb__watch_response__descriptor, &m,
					 GAZ_DEADLINE_NEVER);
		if (rc != 0)
			break;
		end = watch_answer(w, (Etcdserverpb__WatchResponse *)m);
		protobuf_c_message_free_unpacked(m, NULL);
	}
	if (end == W_GO_ON) {
		if (rc != GAZ_EOF)
			gaz_rpc_stream_cancel(s); /* GAZ_EPROTO: the call is still open */
		gaz_rpc_stream_finish(s, &st);
		snprintf(w->why, sizeof(w->why), "watch stream ended: %s",
			 st.msg[0] ? st.msg : gaz_err_str(rc));
		end = W_RETRY;
	}
	gaz__etcd_worker_detach(&w->w); /* cancels: Watch ignores half-close */
	return end;
}

static void *watch_thread(void *p)
{
	struct gaz_etcd_watch *w = p;

	pthread_setname_np(pthread_self(), "gaz-etcd-watch");
	w->end_code = GAZ_ECANCELLED;
	for (;;) {
		if (watch_stream(w) == W_END || gaz__etcd_worker_stopping(&w->w))
			break;
		gaz_debug("etcd watch retrying", "revision=%lld attempt=%d why=%s",
			  (long long)w->next_rev, w->attempt, w->why);
		if (gaz__etcd_worker_sleep(&w->w,
					   gaz_deadline_in(gaz__etcd_backoff_ms(w->attempt++))))
			break;
	}
	if (gaz__etcd_worker_stopping(&w->w) && w->end_code == GAZ_ECANCELLED)
		snprintf(w->why, sizeof(w->why), "watch stopped");
	if (w->end_code != GAZ_ECANCELLED)
		gaz_warn("etcd watch ended", "revision=%lld why=%s", (long long)w->next_rev,
			 w->why);
	if (w->end_fn)
		w->end_fn(w->arg, w->end_code, w->why);
	return NULL;
}

static uint8_t *dup_bytes(const uint8_t *b, size_t len)
{
	uint8_t *out = malloc(len ? len : 1);

	if (out && len)
		memcpy(out, b, len);
	return out;
}

static void watch_free(struct gaz_etcd_watch *w)
{
	free(w->key);
	free(w->range_end);
	free(w);
}

struct gaz_etcd_watch *gaz_etcd_watch_start(struct gaz_etcd *e, const uint8_t *key, size_t key_len,
					    const uint8_t *range_end, size_t range_end_len,
					    int64_t start_revision, gaz_etcd_watch_fn fn,
					    gaz_etcd_watch_end_fn end_fn, void *arg,
					    struct gaz_status *st)
{
	return gaz_etcd_watch_start_resync(e, key, key_len, range_end, range_end_len,
					   start_revision, fn, end_fn, NULL, arg, st);
}

struct gaz_etcd_watch *gaz_etcd_watch_start_resync(struct gaz_etcd *e, const uint8_t *key,
						   size_t key_len, const uint8_t *range_end,
						   size_t range_end_len, int64_t start_revision,
						   gaz_etcd_watch_fn fn, gaz_etcd_watch_end_fn end_fn,
						   gaz_etcd_watch_resync_fn resync, void *arg,
						   struct gaz_status *st)
{
	struct gaz_etcd_watch *w;

	if (!e || !fn || start_revision < 0) {
		gaz_status_set(st, GAZ_EINVAL, "etcd watch from revision %lld invalid",
			       (long long)start_revision);
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w || gaz__etcd_worker_init(&w->w) != 0) {
		free(w);
		gaz_status_set(st, GAZ_ENOMEM, "etcd watch: out of memory");
		return NULL;
	}
	w->e = e;
	w->key_len = key_len;
	w->range_end_len = range_end_len;
	w->next_rev = start_revision;
	w->fn = fn;
	w->end_fn = end_fn;
	w->resync = resync;
	w->arg = arg;
	w->key = dup_bytes(key, key_len);
	w->range_end = dup_bytes(range_end, range_end_len);
	if (!w->key || !w->range_end || pthread_create(&w->th, NULL, watch_thread, w) != 0) {
		gaz__etcd_worker_destroy(&w->w);
		watch_free(w);
		gaz_status_set(st, GAZ_ENOMEM, "etcd watch: out of memory or threads");
		return NULL;
	}
	return w;
}

void gaz_etcd_watch_stop(struct gaz_etcd_watch *w)
{
	if (!w)
		return;
	gaz__etcd_worker_stop(&w->w);
	pthread_join(w->th, NULL);
	gaz__etcd_worker_destroy(&w->w);
	watch_free(w);
}
