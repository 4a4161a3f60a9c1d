/*
 * etcd_lease.c - keeping an etcd lease alive on a LeaseKeepAlive stream.
 *
 * One thread per keep-alive. It sends LeaseKeepAliveRequest{ID} every
 * ttl/3 (as etcd's clientv3 does) and reads the answers; each answer with
 * TTL > 0 renews `last_ok_ns`. The lease counts as lost, and lost() is
 * called exactly once before the thread exits, when:
 *   - an answer has TTL <= 0 (etcd no longer knows the lease: expired or
 *     revoked), or
 *   - no answer came for longer than the TTL (etcd unreachable: by then it
 *     has expired the lease, or will before we could tell).
 * Stream errors re-open the stream at once, then every 500 ms while the TTL
 * allows (clientv3's retryConnWait; a growing backoff would sleep through
 * an etcd that is back, a 5 s lease lost to a 2 s restart). Streams fail
 * fast (no wait_for_ready) so that a dead etcd shows up as failures the
 * loop times, never as a send blocked past the TTL.
 * Stopping (gaz_etcd_keepalive_stop) never calls lost().
 * Lock order: only the worker's mutex is taken.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "etcd/etcd.h"
#include "etcd/etcd_int.h"
#include "rpc/rpc.h"

#define LEASE_KEEPALIVE "/etcdserverpb.Lease/LeaseKeepAlive"
#define KA_RETRY_MS 500

enum ka_end { KA_RETRY, KA_LOST, KA_STOP };

struct gaz_etcd_keepalive {
	struct gaz__etcd_worker w;
	struct gaz_etcd *e;           /* borrowed; outlives the keep-alive */
	int64_t id;
	int64_t ttl_ns;               /* the lease TTL */
	int64_t interval_ns;          /* ttl / 3 */
	gaz_etcd_lease_lost_fn lost;  /* may be NULL */
	void *arg;
	_Atomic int64_t last_ok_ns;   /* last answer with TTL > 0; written by the thread */
	pthread_t th;
};

/* ka_answer handles one answer: KA_LOST on TTL <= 0, else -1 (go on). */
static int ka_answer(struct gaz_etcd_keepalive *ka, ProtobufCMessage *m, int *attempt,
		     char *why, size_t why_len)
{
	int64_t ttl = ((Etcdserverpb__LeaseKeepAliveResponse *)m)->ttl;

	protobuf_c_message_free_unpacked(m, NULL);
	if (ttl <= 0) {
		snprintf(why, why_len, "lease %llx expired or revoked (keep-alive TTL %lld)",
			 (long long)ka->id, (long long)ttl);
		return KA_LOST;
	}
	ka->last_ok_ns = gaz_mono_ns();
	*attempt = 0;
	return -1;
}

/* ka_pump sends and receives on an open stream until it ends. On KA_RETRY
 * the call has ended or was cancelled here, so finishing it cannot block. */
static int ka_pump(struct gaz_etcd_keepalive *ka, struct gaz_rpc_stream *s, int *attempt,
		   char *why, size_t why_len)
{
	Etcdserverpb__LeaseKeepAliveRequest req = ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
	int64_t next_send_ns = 0, now, lost_ns;
	ProtobufCMessage *m;
	int rc;

	req.id = ka->id;
	for (;;) {
		now = gaz_mono_ns();
		if (now >= next_send_ns) {
			if (gaz_rpc_stream_send(s, &req.base) != 0)
				return KA_RETRY;
			next_send_ns = now + ka->interval_ns;
		}
		lost_ns = ka->last_ok_ns + ka->ttl_ns;
		if (now >= lost_ns) {
			gaz_rpc_stream_cancel(s);
			return KA_RETRY; /* the caller declares the loss */
		}
		m = NULL;
		rc = gaz_rpc_stream_recv(s, &etcdserverpb__lease_keep_alive_response__descriptor, &m,
					 next_send_ns < lost_ns ? next_send_ns : lost_ns);
		if (rc == GAZ_ETIMEDOUT)
			continue;
		if (rc != 0) {
			if (rc != GAZ_EOF)
				gaz_rpc_stream_cancel(s); /* GAZ_EPROTO: still open */
			return KA_RETRY;
		}
		rc = ka_answer(ka, m, attempt, why, why_len);
		if (rc >= 0)
			return rc;
	}
}

/* ka_stream opens one stream, pumps it and reports how it ended. */
static int ka_stream(struct gaz_etcd_keepalive *ka, int *attempt, char *why, size_t why_len)
{
	struct gaz_status st = {0};
	struct gaz_rpc_stream *s;
	int end;

	s = gaz_rpc_stream_open(ka->e->ch, LEASE_KEEPALIVE, GAZ_DEADLINE_NEVER, false, NULL, &st);
	if (!s) {
		snprintf(why, why_len, "keep-alive stream open failed: %s", st.msg);
		return KA_RETRY;
	}
	if (!gaz__etcd_worker_attach(&ka->w, s)) {
		gaz_rpc_stream_free(s);
		return KA_STOP;
	}
	end = ka_pump(ka, s, attempt, why, why_len);
	if (end == KA_RETRY) {
		gaz_rpc_stream_finish(s, &st);
		snprintf(why, why_len, "keep-alive stream failed: %s", st.msg);
	}
	gaz__etcd_worker_detach(&ka->w);
	return gaz__etcd_worker_stopping(&ka->w) ? KA_STOP : end;
}

static void *ka_thread(void *p)
{
	struct gaz_etcd_keepalive *ka = p;
	int attempt = 0, end;
	int64_t lost_ns, wake_ns;
	char why[600] = "";

	pthread_setname_np(pthread_self(), "gaz-etcd-lease");
	ka->last_ok_ns = gaz_mono_ns();
	for (;;) {
		end = ka_stream(ka, &attempt, why, sizeof(why));
		if (end == KA_STOP)
			return NULL;
		lost_ns = ka->last_ok_ns + ka->ttl_ns;
		if (end == KA_RETRY && gaz_mono_ns() < lost_ns) {
			gaz_debug("etcd keep-alive retrying", "lease=%llx attempt=%d why=%s",
				  (long long)ka->id, attempt, why);
			wake_ns = gaz_deadline_in(attempt++ ? KA_RETRY_MS : 0);
			if (gaz__etcd_worker_sleep(&ka->w, wake_ns < lost_ns ? wake_ns : lost_ns))
				return NULL;
			if (gaz_mono_ns() < lost_ns)
				continue;
		}
		if (end == KA_RETRY) {
			size_t n = strnlen(why, sizeof(why));
			snprintf(why + n, sizeof(why) - n, "%sno keep-alive answered for %lld ms",
				 n ? "; " : "", (long long)(ka->ttl_ns / GAZ_NS_PER_MS));
		}
		break;
	}
	gaz_warn("etcd lease lost", "lease=%llx why=%s", (long long)ka->id, why);
	if (ka->lost && !gaz__etcd_worker_stopping(&ka->w))
		ka->lost(ka->arg, why);
	return NULL;
}

struct gaz_etcd_keepalive *gaz_etcd_keepalive_start(struct gaz_etcd *e, int64_t id,
						    int64_t ttl_s, gaz_etcd_lease_lost_fn lost,
						    void *arg, struct gaz_status *st)
{
	struct gaz_etcd_keepalive *ka;

	if (!e || ttl_s <= 0) {
		gaz_status_set(st, GAZ_EINVAL, "keep-alive of lease %llx invalid: ttl %llds",
			       (long long)id, (long long)ttl_s);
		return NULL;
	}
	ka = calloc(1, sizeof(*ka));
	if (!ka || gaz__etcd_worker_init(&ka->w) != 0) {
		free(ka);
		gaz_status_set(st, GAZ_ENOMEM, "keep-alive of lease %llx: out of memory",
			       (long long)id);
		return NULL;
	}
	ka->e = e;
	ka->id = id;
	ka->ttl_ns = ttl_s * GAZ_NS_PER_S;
	ka->interval_ns = ka->ttl_ns / 3;
	ka->lost = lost;
	ka->arg = arg;
	if (pthread_create(&ka->th, NULL, ka_thread, ka) != 0) {
		gaz__etcd_worker_destroy(&ka->w);
		free(ka);
		gaz_status_set(st, GAZ_ENOMEM, "keep-alive of lease %llx: no thread",
			       (long long)id);
		return NULL;
	}
	return ka;
}

void gaz_etcd_keepalive_stop(struct gaz_etcd_keepalive *ka)
{
	if (!ka)
		return;
	gaz__etcd_worker_stop(&ka->w);
	pthread_join(ka->th, NULL);
	gaz__etcd_worker_destroy(&ka->w);
	free(ka);
}

int64_t gaz_etcd_keepalive_valid_until(struct gaz_etcd_keepalive *ka)
{
	return atomic_load(&ka->last_ok_ns) + ka->ttl_ns - ka->ttl_ns / 10;
}
