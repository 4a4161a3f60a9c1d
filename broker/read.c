/*
 * read.c - the Read RPC (server-streaming; facts §2.2).
 *
 * Each fragment served starts with a metadata response (offset, write head,
 * fragment, signed URL when persisted), followed by content chunks of at
 * most 32736 bytes with consecutive offsets. At the write head a blocking
 * read waits on the replica's notifier, so a commit wakes it at once; a
 * non-blocking read ends with OFFSET_NOT_YET_AVAILABLE. Only committed
 * bytes are ever visible: the index holds committed fragments only.
 *
 * A hole of the index below its write head (no fragment at an offset
 * that was committed) is a listing that has not yet seen fragments
 * another broker is persisting: a replica that joined a route holds the
 * route's history only from its store listings and its own spool. A read
 * there waits up to HOLE_WAIT_MS while maintenance lists the stores every
 * GAZ_HOLE_REFRESH_MS, and answers as before only if the hole stays.
 * Gazette answers such a read at once (OFFSET_NOT_YET_AVAILABLE, or a
 * blocking wait for the next listing); docs/decisions.md says why we wait.
 */
#include "broker/broker.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "broker/metrics.h"
#include "broker/proxy.h"
#include "broker/replica.h"
#include "broker/stores.h"
#include "common/clock.h"
#include "common/log.h"
#include "protocol/validate.h"

#define READ_CHUNK 32736           /* 32 KiB - 32, as Gazette */
#define OFFSET_JUMP_AGE_S (6 * 3600)
#define SIGNED_URL_TTL_S 60
#define HOLE_WAIT_MS 5000

struct read_ctx {
	struct gaz_broker *b;
	struct gaz_rpc_call *call;
	Protocol__ReadRequest *req;
	struct gaz_resolution res;
	bool header_sent;
	struct gaz_status err;  /* why a persisted fragment's read failed */
};

/* The outcome of an index query. */
struct read_target {
	bool found;
	int64_t offset, write_head;
	struct gaz_fragment frag;          /* owned copy when found */
	struct gaz_fragment_file *file;    /* reference when local */
};

static void target_release(struct read_target *t)
{
	gaz_fragment_release(&t->frag);
	gaz_fragment_file_unref(t->file);
	memset(t, 0, sizeof(*t));
}

/* Index query for `offset` (facts §2.2), replica mu held. */
static void query(struct gaz_replica *r, int64_t offset, int64_t begin_mod_time,
		  struct read_target *t)
{
	const struct gaz_coverset *idx = &r->index;
	int64_t now_s = gaz_wall_ns() / GAZ_NS_PER_S;
	size_t i;

	gaz_coverset_summary(idx, NULL, &t->write_head, NULL);
	if (offset < 0)
		offset = t->write_head;
	for (;;) {
		i = gaz_coverset_lookup(idx, offset, &t->found);
		if (!t->found && i < idx->len) {
			const struct gaz_fragment *f = &idx->v[i].frag;
			if (f->mod_time && (i == 0 || f->mod_time < now_s - OFFSET_JUMP_AGE_S)) {
				offset = f->begin;
				t->found = true;
			}
		}
		if (t->found && idx->v[i].frag.mod_time && idx->v[i].frag.mod_time < begin_mod_time) {
			offset = idx->v[i].frag.end;
			continue;
		}
		break;
	}
	t->offset = offset;
	if (t->found) {
		gaz_fragment_copy(&t->frag, &idx->v[i].frag, NULL);
		t->file = gaz_fragment_file_ref(idx->v[i].file);
	}
}

static int send_metadata(struct read_ctx *c, int status, const struct read_target *t)
{
	Protocol__ReadResponse resp = PROTOCOL__READ_RESPONSE__INIT;
	Protocol__Fragment frag = PROTOCOL__FRAGMENT__INIT;
	Protocol__SHA1Sum sum = PROTOCOL__SHA1_SUM__INIT;
	Protocol__Header *h = NULL;
	char *url = NULL;
	int rc;

	resp.status = status;
	resp.offset = t->offset;
	resp.write_head = t->write_head;
	if (!c->header_sent) {
		h = gaz_header_build(c->b, &c->res);
		resp.header = h;
		c->header_sent = true;
	}
	if (t->found) {
		gaz_fragment_to_proto(&t->frag, &frag, &sum);
		resp.fragment = &frag;
		if (t->frag.backing_store && t->frag.backing_store[0] && t->frag.mod_time) {
			struct gaz_status st = {0};
			if (gaz_stores_sign(c->b, &t->frag, SIGNED_URL_TTL_S, &url, &st) == 0) {
				resp.fragment_url = url;
				gaz_metric_read_fragment_url();
			}
			else
				gaz_warn("signing fragment URL failed", "journal=%s err=%s",
					 c->res.journal, st.msg);
		}
	}
	rc = gaz_rpc_send(c->call, &resp.base);
	gaz_header_free(h);
	free(url);
	return rc;
}

static int send_chunk(struct read_ctx *c, int64_t offset, const uint8_t *buf, size_t n)
{
	Protocol__ReadResponse resp = PROTOCOL__READ_RESPONSE__INIT;

	resp.offset = offset;
	resp.content.data = (uint8_t *)buf;
	resp.content.len = n;
	return gaz_rpc_send(c->call, &resp.base);
}

/* Streams [from, to) of the target. A persisted fragment read to its end
 * must also end there (gaz_fragment_reader_finish): a cut or padded object
 * fails the RPC after the bytes it did hold, never as a clean fragment end.
 * Returns 0, or an error ending the RPC (its text in c->err). */
static int stream_content(struct read_ctx *c, const struct read_target *t, int64_t from, int64_t to)
{
	struct gaz_fragment_reader *fr = NULL;
	struct gaz_status *st = &c->err;
	uint8_t *buf = malloc(READ_CHUNK);
	int rc = 0;

	if (!buf)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	if (!t->file && (rc = gaz_stores_open_fragment(c->b, &t->frag, from, &fr, st)))
		gaz_error("opening persisted fragment failed", "journal=%s err=%s", c->res.journal,
			  st->msg);
	while (!rc && from < to) {
		size_t want = to - from < READ_CHUNK ? (size_t)(to - from) : READ_CHUNK, n = 0;
		if (t->file) {
			ssize_t got = pread(t->file->fd, buf, want, from - t->frag.begin);
			if (got <= 0) {
				rc = gaz_status_set(st, GAZ_EIO, "reading local fragment failed");
				break;
			}
			n = (size_t)got;
		} else if ((rc = gaz_fragment_reader_read(fr, buf, want, &n, st))) {
			break;
		}
		rc = send_chunk(c, from, buf, n);
		if (!rc)
			gaz_metric_read_served(!t->file, (int64_t)n);
		from += (int64_t)n;
	}
	if (!rc && fr && from == t->frag.end)
		rc = gaz_fragment_reader_finish(fr, st);
	if (rc && fr)
		gaz_error("reading persisted fragment failed", "journal=%s fragment=%s err=%s",
			  c->res.journal, t->frag.backing_store, st->msg);
	gaz_fragment_reader_close(fr);
	free(buf);
	return rc;
}

/* A store-backed stream_content on a thread of its own. */
struct stream_job {
	struct read_ctx *c;
	const struct read_target *t;
	int64_t from, to;
	int nice;
	int rc;
};

static void *stream_job_main(void *arg)
{
	struct stream_job *j = arg;

	pthread_setname_np(pthread_self(), "gaz-store-read");
	/* Best effort: a niceness this thread cannot take leaves it as is. */
	(void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), j->nice);
	j->rc = stream_content(j->c, j->t, j->from, j->to);
	return NULL;
}

/* stream_remote streams [from, to) of a persisted fragment from its store.
 * With --broker.store-read-nice the fetch, decompression and packing run
 * on a new thread at that niceness while the handler waits for it: a
 * thread's niceness cannot be lowered again by an unprivileged process,
 * so it is never raised on a pooled handler thread that later serves
 * appends. Each chunk's send already waits for the call's bounded send
 * queue, so cancellation ends the thread at its next send. */
static int stream_remote(struct read_ctx *c, const struct read_target *t, int64_t from, int64_t to)
{
	struct stream_job j = {.c = c, .t = t, .from = from, .to = to,
			       .nice = (int)c->b->cfg.store_read_nice};
	pthread_t tid;

	if (j.nice <= 0 || pthread_create(&tid, NULL, stream_job_main, &j))
		return stream_content(c, t, from, to);
	pthread_join(tid, NULL);
	return j.rc;
}

static void wake_call(void *arg) { gaz_rpc_wake(arg); }

/* Serves the read from the local replica until done, cancelled or an
 * error. Returns 0 or the error that ended it. */
static int serve_local(struct read_ctx *c)
{
	struct gaz_replica *r = c->res.replica;
	const Protocol__ReadRequest *q = c->req;
	struct gaz_waiter w = {.wake = wake_call, .arg = c->call};
	int64_t offset = q->offset, hole_deadline = 0;
	int rc = 0;

	/* Like appends, reads answer only from an index that has seen the
	 * store once: a fresh replica would otherwise report its history as
	 * not yet available. */
	if ((rc = gaz_replica_wait_ready(r, c->call))) {
		gaz_debug("read ended before the replica was ready", "journal=%s rc=%s", c->res.journal,
			  gaz_err_str(rc));
		return rc == GAZ_ESTOPPED ? 0 : rc;
	}
	gaz_notifier_add(&r->notifier, &w);
	while (!rc) {
		struct read_target t = {0};
		bool dead, remote;
		int64_t to;
		pthread_mutex_lock(&r->mu);
		query(r, offset, q->begin_mod_time, &t);
		dead = r->dead;
		pthread_mutex_unlock(&r->mu);
		if (t.found || dead || t.offset >= t.write_head) {
			hole_deadline = 0;
		} else if (!hole_deadline || gaz_mono_ns() < hole_deadline) {
			if (!hole_deadline)
				hole_deadline = gaz_deadline_in(HOLE_WAIT_MS);
			gaz_replica_hurry_refresh(r, hole_deadline);
			offset = t.offset;
			target_release(&t);
			rc = gaz_rpc_wait(c->call, hole_deadline);
			if (rc == GAZ_ETIMEDOUT)
				rc = 0;
			continue;
		}
		if (!t.found && (!q->block || dead)) {
			if (!dead)
				rc = send_metadata(c, PROTOCOL__STATUS__OFFSET_NOT_YET_AVAILABLE, &t);
			target_release(&t);
			break;
		}
		if (!t.found) {
			offset = t.offset;
			rc = gaz_rpc_wait(c->call, GAZ_DEADLINE_NEVER);
			continue;
		}
		rc = send_metadata(c, PROTOCOL__STATUS__OK, &t);
		remote = !t.file;
		to = q->end_offset && q->end_offset < t.frag.end ? q->end_offset : t.frag.end;
		if (!rc && !q->metadata_only && !(remote && q->do_not_proxy) && t.offset < to)
			rc = remote ? stream_remote(c, &t, t.offset, to)
				    : stream_content(c, &t, t.offset, to);
		offset = to;
		target_release(&t);
		if (q->metadata_only || (remote && q->do_not_proxy) ||
		    (q->end_offset && offset >= q->end_offset))
			break;
	}
	gaz_notifier_remove(&r->notifier, &w);
	gaz_debug("read ended", "journal=%s offset=%lld rc=%s dead=%d", c->res.journal, (long long)offset,
		  gaz_err_str(rc), (int)atomic_load(&r->dead));
	return rc;
}

static void send_status_only(struct read_ctx *c, int status)
{
	struct read_target t = {0};

	send_metadata(c, status, &t);
	gaz_rpc_finish(c->call, NULL, GAZ_GRPC_OK, NULL);
}

void gaz_handle_read(struct gaz_rpc_call *call, void *arg)
{
	struct read_ctx c = {.b = arg, .call = call};
	struct gaz_status st = {0};
	int rc;

	if (gaz_rpc_recv_request(call, &protocol__read_request__descriptor, (ProtobufCMessage **)&c.req, "ReadRequest"))
		return;
	if (gaz_validate_read_request(c.req, &st)) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_INVALID_ARGUMENT, st.msg);
		goto out;
	}
	struct gaz_resolve_opts o = {
		.may_proxy = !c.req->do_not_proxy,
		.read_only = true,
		.min_etcd_revision = c.req->min_etcd_revision,
		.proxy_header = c.req->header,
		.call = call,
	};
	if ((rc = gaz_resolve(c.b, c.req->journal, &o, &c.res, &st))) {
		gaz_rpc_finish(call, NULL, rc == GAZ_ECANCELLED ? GAZ_GRPC_CANCELLED : rc == GAZ_EUNAVAIL ? GAZ_GRPC_UNAVAILABLE : GAZ_GRPC_UNKNOWN,
			       st.msg);
	} else if (c.res.status != PROTOCOL__STATUS__OK) {
		/* Gazette labels the RPC with the resolution's status only
		 * (NOT_ALLOWED below counts "ok", as in read_api.go). */
		gaz_rpc_set_outcome(call, c.res.status);
		send_status_only(&c, c.res.status);
	} else if (!gaz_journal_may_read(c.res.spec->flags)) {
		send_status_only(&c, PROTOCOL__STATUS__NOT_ALLOWED);
	} else if (!c.res.replica) {
		gaz_debug("read proxied", "journal=%s offset=%lld block=%d peer=%s", c.res.journal,
			  (long long)c.req->offset, (int)c.req->block, gaz_rpc_peer(call));
		gaz_proxy_read(c.b, call, c.req, &c.res);
	} else {
		gaz_debug("read started", "journal=%s offset=%lld block=%d peer=%s", c.res.journal,
			  (long long)c.req->offset, (int)c.req->block, gaz_rpc_peer(call));
		rc = serve_local(&c);
		if (rc && rc != GAZ_ECANCELLED)
			gaz_rpc_finish(call, NULL, GAZ_GRPC_UNKNOWN,
				       c.err.code ? c.err.msg : gaz_err_str(rc));
		else
			gaz_rpc_finish(call, NULL, GAZ_GRPC_OK, NULL);
	}
out:
	gaz_resolution_release(&c.res);
	protobuf_c_message_free_unpacked(&c.req->base, NULL);
}
