/*
 * etcd.c - the etcd v3 client: its channel, the unary KV and Lease calls,
 * and the worker machinery shared with the stream threads (etcd_lease.c,
 * etcd_watch.c).
 *
 * One gaz_rpc_channel per client; calls are independent grpc calls on it, so
 * every function here is thread-safe. Unary calls wait for a connection
 * (wait_for_ready, as etcd's Go clientv3 does) but never past timeout_ms:
 * an unreachable etcd therefore costs one timeout and answers GAZ_EUNAVAIL.
 * Must not call: anything above lib/rpc and lib/common.
 */
#include "etcd/etcd.h"

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "etcd/etcd_int.h"
#include "rpc/rpc.h"

#define KV_RANGE "/etcdserverpb.KV/Range"
#define KV_PUT "/etcdserverpb.KV/Put"
#define KV_DELETE "/etcdserverpb.KV/DeleteRange"
#define KV_TXN "/etcdserverpb.KV/Txn"
#define LEASE_GRANT "/etcdserverpb.Lease/LeaseGrant"
#define LEASE_REVOKE "/etcdserverpb.Lease/LeaseRevoke"

static bool has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

struct gaz_etcd *gaz_etcd_new(const char *endpoint, int64_t timeout_ms, struct gaz_status *st)
{
	return gaz_etcd_new_tls(endpoint, timeout_ms, NULL, st);
}

struct gaz_etcd *gaz_etcd_new_tls(const char *endpoint, int64_t timeout_ms,
				  const struct gaz_rpc_tls *tls, struct gaz_status *st)
{
	struct gaz_rpc_channel_opts o = {.peer = GAZ_RPC_PEER_ETCD, .tls = tls};
	struct gaz_status local = {0};
	struct gaz_etcd *e;

	if (!endpoint || !(has_prefix(endpoint, "http://") || has_prefix(endpoint, "https://") ||
			   has_prefix(endpoint, "unix://")) || timeout_ms <= 0) {
		gaz_status_set(st, GAZ_EINVAL, "etcd endpoint \"%s\" invalid: want http://, https:// "
			       "or unix:// and a positive timeout", endpoint ? endpoint : "(null)");
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		gaz_status_set(st, GAZ_ENOMEM, "etcd client of \"%s\": out of memory", endpoint);
		return NULL;
	}
	e->timeout_ms = timeout_ms;
	e->ch = gaz_rpc_channel_open(endpoint, &o, &local);
	if (!e->ch) {
		free(e);
		gaz_status_set(st, local.code ? local.code : GAZ_EINVAL, "etcd endpoint \"%s\": %s",
			       endpoint, local.msg[0] ? local.msg : "invalid");
		return NULL;
	}
	return e;
}

void gaz_etcd_free(struct gaz_etcd *e)
{
	if (!e)
		return;
	gaz_rpc_channel_free(e->ch);
	free(e);
}

int gaz__etcd_rpc_fail(struct gaz_status *st, int rc, const struct gaz_status *local,
		       const char *method)
{
	int code = rc, grpc = local->grpc;

	if (rc == GAZ_ETIMEDOUT || (rc == GAZ_ERPC && (grpc == GAZ_GRPC_UNAVAILABLE ||
						       grpc == GAZ_GRPC_DEADLINE_EXCEEDED)))
		code = GAZ_EUNAVAIL;
	if (st && st->code == 0)
		st->grpc = grpc ? grpc : gaz_err_grpc_code(code);
	return gaz_status_set(st, code, "etcd call \"%s\" failed: %s", method,
			      local->msg[0] ? local->msg : gaz_err_str(rc));
}

/* etcd_unary performs one call bounded by the client's timeout. */
static int etcd_unary(struct gaz_etcd *e, const char *method, const ProtobufCMessage *req,
		      const ProtobufCMessageDescriptor *desc, ProtobufCMessage **resp,
		      struct gaz_status *st)
{
	struct gaz_status local = {0};
	int rc;

	*resp = NULL;
	rc = gaz_rpc_unary(e->ch, method, req, desc, resp, gaz_deadline_in(e->timeout_ms), true,
			   NULL, &local);
	if (rc == 0)
		return 0;
	if (*resp) {
		protobuf_c_message_free_unpacked(*resp, NULL);
		*resp = NULL;
	}
	gaz_debug("etcd call failed", "method=%s rc=%d grpc=%d", method, rc, local.grpc);
	return gaz__etcd_rpc_fail(st, rc, &local, method);
}

int gaz_etcd_range(struct gaz_etcd *e, const Etcdserverpb__RangeRequest *req,
		   Etcdserverpb__RangeResponse **resp, struct gaz_status *st)
{
	ProtobufCMessage *m;
	int rc = etcd_unary(e, KV_RANGE, &req->base, &etcdserverpb__range_response__descriptor,
			    &m, st);

	*resp = (Etcdserverpb__RangeResponse *)m;
	return rc;
}

int gaz_etcd_put(struct gaz_etcd *e, const Etcdserverpb__PutRequest *req,
		 Etcdserverpb__PutResponse **resp, struct gaz_status *st)
{
	ProtobufCMessage *m;
	int rc = etcd_unary(e, KV_PUT, &req->base, &etcdserverpb__put_response__descriptor, &m,
			    st);

	*resp = (Etcdserverpb__PutResponse *)m;
	return rc;
}

int gaz_etcd_delete(struct gaz_etcd *e, const Etcdserverpb__DeleteRangeRequest *req,
		    Etcdserverpb__DeleteRangeResponse **resp, struct gaz_status *st)
{
	ProtobufCMessage *m;
	int rc = etcd_unary(e, KV_DELETE, &req->base,
			    &etcdserverpb__delete_range_response__descriptor, &m, st);

	*resp = (Etcdserverpb__DeleteRangeResponse *)m;
	return rc;
}

int gaz_etcd_txn(struct gaz_etcd *e, const Etcdserverpb__TxnRequest *req,
		 Etcdserverpb__TxnResponse **resp, struct gaz_status *st)
{
	ProtobufCMessage *m;
	int rc = etcd_unary(e, KV_TXN, &req->base, &etcdserverpb__txn_response__descriptor, &m,
			    st);

	*resp = (Etcdserverpb__TxnResponse *)m;
	return rc;
}

size_t gaz_etcd_prefix_range_end(const uint8_t *prefix, size_t len, uint8_t *out)
{
	size_t i;

	/* etcd's clientv3.GetPrefixRangeEnd: drop trailing 0xff bytes, then
	 * increment the last byte; nothing left means "\0", which etcd reads as
	 * "every key from key on". */
	for (i = len; i > 0; i--) {
		if (prefix[i - 1] < 0xff) {
			memcpy(out, prefix, i - 1);
			out[i - 1] = (uint8_t)(prefix[i - 1] + 1);
			return i;
		}
	}
	out[0] = 0;
	return 1;
}

void gaz_etcd_prefix_end(const uint8_t *prefix, size_t len, uint8_t *out)
{
	size_t n;

	if (len == 0)
		return;
	n = gaz_etcd_prefix_range_end(prefix, len, out);
	/* Exact when the last byte is below 0xff (every Gazette key: they are
	 * printable); otherwise zero padding only approximates the end, which
	 * is why gaz_etcd_prefix_range_end exists. */
	memset(out + n, 0, len - n);
}

int gaz_etcd_lease_grant(struct gaz_etcd *e, int64_t ttl_s, int64_t *id, struct gaz_status *st)
{
	Etcdserverpb__LeaseGrantRequest req = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
	Etcdserverpb__LeaseGrantResponse *resp;
	ProtobufCMessage *m;
	int rc;

	req.ttl = ttl_s;
	rc = etcd_unary(e, LEASE_GRANT, &req.base, &etcdserverpb__lease_grant_response__descriptor,
			&m, st);
	if (rc != 0)
		return rc;
	resp = (Etcdserverpb__LeaseGrantResponse *)m;
	if (resp->error && resp->error[0]) {
		rc = gaz_status_set(st, GAZ_ERPC, "etcd lease grant of %llds failed: %s",
				    (long long)ttl_s, resp->error);
	} else {
		*id = resp->id;
	}
	protobuf_c_message_free_unpacked(m, NULL);
	return rc;
}

int gaz_etcd_lease_revoke(struct gaz_etcd *e, int64_t id, struct gaz_status *st)
{
	Etcdserverpb__LeaseRevokeRequest req = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
	ProtobufCMessage *m;
	int rc;

	req.id = id;
	rc = etcd_unary(e, LEASE_REVOKE, &req.base,
			&etcdserverpb__lease_revoke_response__descriptor, &m, st);
	if (rc == 0)
		protobuf_c_message_free_unpacked(m, NULL);
	return rc;
}

/* ---- workers --------------------------------------------------------- */

int64_t gaz__etcd_backoff_ms(int attempt)
{
	static const int64_t table_ms[] = {0, 0, 5, 2000, 3000, 4000, 5000};
	const int n = (int)(sizeof(table_ms) / sizeof(table_ms[0]));

	if (attempt < 0)
		attempt = 0;
	return table_ms[attempt < n ? attempt : n - 1];
}

int gaz__etcd_worker_init(struct gaz__etcd_worker *w)
{
	pthread_condattr_t ca;

	memset(w, 0, sizeof(*w));
	if (pthread_condattr_init(&ca) != 0)
		return GAZ_ENOMEM;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (pthread_cond_init(&w->cv, &ca) != 0) {
		pthread_condattr_destroy(&ca);
		return GAZ_ENOMEM;
	}
	pthread_condattr_destroy(&ca);
	if (pthread_mutex_init(&w->mu, NULL) != 0) {
		pthread_cond_destroy(&w->cv);
		return GAZ_ENOMEM;
	}
	return 0;
}

void gaz__etcd_worker_destroy(struct gaz__etcd_worker *w)
{
	GAZ_BUG_ON(w->cur != NULL);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
}

bool gaz__etcd_worker_attach(struct gaz__etcd_worker *w, struct gaz_rpc_stream *s)
{
	bool ok;

	pthread_mutex_lock(&w->mu);
	ok = !w->stop;
	if (ok)
		w->cur = s;
	pthread_mutex_unlock(&w->mu);
	return ok;
}

void gaz__etcd_worker_detach(struct gaz__etcd_worker *w)
{
	struct gaz_rpc_stream *s;

	pthread_mutex_lock(&w->mu);
	s = w->cur;
	w->cur = NULL;
	pthread_mutex_unlock(&w->mu);
	if (s)
		gaz_rpc_stream_free(s);
}

bool gaz__etcd_worker_sleep(struct gaz__etcd_worker *w, int64_t deadline_ns)
{
	struct timespec ts = gaz_abstime_of(deadline_ns);
	bool stop;

	pthread_mutex_lock(&w->mu);
	while (!w->stop && gaz_mono_ns() < deadline_ns)
		pthread_cond_timedwait(&w->cv, &w->mu, &ts);
	stop = w->stop;
	pthread_mutex_unlock(&w->mu);
	return stop;
}

bool gaz__etcd_worker_stopping(struct gaz__etcd_worker *w)
{
	bool stop;

	pthread_mutex_lock(&w->mu);
	stop = w->stop;
	pthread_mutex_unlock(&w->mu);
	return stop;
}

void gaz__etcd_worker_stop(struct gaz__etcd_worker *w)
{
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	/* Cancel under mu: the worker frees `cur` only after detaching it under
	 * mu, so it is alive here. */
	if (w->cur)
		gaz_rpc_stream_cancel(w->cur);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}
