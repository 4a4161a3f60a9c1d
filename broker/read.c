/*
 * read.c - the Read RPC (server-streaming; facts §2.2).
 *
 * Each fragment served starts with a metadata response (offset, write head,
 * fragment, signed URL when persisted), followed by content chunks of at
 * most 32736 bytes with consecutive offsets. At the write head a blocking
 * read parks on the replica's notifier (gaz_rpc_park: no thread is held
 * while it waits), so a commit wakes it at once; a non-blocking read ends
 * with OFFSET_NOT_YET_AVAILABLE. A read whose client is slow parks too,
 * until its response queue has room. Only committed bytes are ever
 * visible: the index holds committed fragments only. A local read's
 * states are in one place below (enum read_state).
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
#include "broker/read_fanout.h"
#include "broker/replica.h"
#include "broker/stores.h"
#include "common/clock.h"
#include "common/log.h"
#include "protocol/validate.h"

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

/* Streams [from, to) of a persisted target from its store (local bytes
 * stream in stream_step). A fragment read to its end
 * must also end there (gaz_fragment_reader_finish): a cut or padded object
 * fails the RPC after the bytes it did hold, never as a clean fragment end.
 * Returns 0, or an error ending the RPC (its text in c->err). */
static int stream_store(struct read_ctx *c, const struct read_target *t, int64_t from, int64_t to)
{
	struct gaz_fragment_reader *fr = NULL;
	struct gaz_status *st = &c->err;
	uint8_t *buf = malloc(GAZ_READ_CHUNK);
	int rc = 0;

	if (!buf)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	if ((rc = gaz_stores_open_fragment(c->b, &t->frag, from, &fr, st)))
		gaz_error("opening persisted fragment failed", "journal=%s err=%s", c->res.journal,
			  st->msg);
	while (!rc && from < to) {
		size_t want = to - from < GAZ_READ_CHUNK ? (size_t)(to - from) : GAZ_READ_CHUNK, n = 0;
		if ((rc = gaz_fragment_reader_read(fr, buf, want, &n, st)))
			break;
		rc = send_chunk(c, from, buf, n);
		if (!rc)
			gaz_metric_read_served(true, (int64_t)n);
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

/* A stream_store on a thread of its own. */
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

	/* Best effort: a niceness this thread cannot take leaves it as is.
	 * Niced before it is named, so that no one sees a store reader at
	 * the handlers' priority. */
	(void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), j->nice);
	pthread_setname_np(pthread_self(), "gaz-store-read");
	j->rc = stream_store(j->c, j->t, j->from, j->to);
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
		return stream_store(c, t, from, to);
	pthread_join(tid, NULL);
	return j.rc;
}

/* The states of a local read, one step at a time (read_step):
 *   READ_QUERY  find the fragment at `offset`; at the write head a
 *               blocking read parks until a commit, an index change or
 *               teardown wakes it; in a hole, until HOLE_WAIT_MS passes.
 *               One that sent its first response parks in the replica's
 *               head group instead (read_fanout.c): commits reach it as
 *               responses the group sends for it, and it runs again only
 *               when the group sends it back, or on its cancellation;
 *   READ_STREAM send the target's metadata, then its bytes [from, to),
 *               parking whenever the response queue is full;
 *   READ_DONE   finish the call with `rc`.
 * A parked read holds no thread: its state is this struct, and the
 * replica's notifier wakes it (gaz_rpc_park). */
enum read_state { READ_QUERY, READ_STREAM, READ_DONE };

struct local_read {
	struct read_ctx c;
	enum read_state state;
	struct gaz_waiter w;
	struct gaz_head_reader hr; /* while `joined`, the head group's */
	bool joined;
	int64_t offset, hole_deadline;
	struct read_target t;   /* READ_STREAM: the fragment being sent */
	bool meta_sent;
	int64_t from, to;
	int rc;
};

static void wake_call(void *arg) { gaz_rpc_wake(arg); }

/* head_leave takes the read back from its head group, at the offset the
 * group's deliveries took it to, and into the replica's notifier again:
 * from here a commit wakes it, and its next query sees any before. */
static void head_leave(struct local_read *l)
{
	struct gaz_replica *r = l->c.res.replica;

	if (l->joined) {
		l->offset = gaz_head_leave(&r->head, &l->hr);
		l->joined = false;
		gaz_notifier_add(&r->notifier, &l->w);
	}
}

/* Parks the read until `deadline_ns` or an event (see read_step). */
static void read_resume(struct gaz_rpc_call *call, void *arg);

static bool read_park(struct local_read *l, int64_t deadline_ns, unsigned flags)
{
	return gaz_rpc_park(l->c.call, read_resume, l, deadline_ns, flags) == 0;
}

/* One READ_STREAM step: metadata, then chunks while the response queue
 * has room. Returns true when the read parked. */
static bool stream_step(struct local_read *l)
{
	struct read_ctx *c = &l->c;
	const Protocol__ReadRequest *q = c->req;
	struct read_target *t = &l->t;
	bool remote = !t->file;
	uint8_t *buf = NULL;

	if (!l->meta_sent) {
		if (!gaz_rpc_send_room(c->call) && read_park(l, GAZ_DEADLINE_NEVER, GAZ_RPC_PARK_SEND))
			return true;
		l->meta_sent = true;
		if ((l->rc = send_metadata(c, PROTOCOL__STATUS__OK, t)))
			goto done;
		l->from = t->offset;
		l->to = q->end_offset && q->end_offset < t->frag.end ? q->end_offset : t->frag.end;
		if (q->metadata_only || (remote && q->do_not_proxy))
			l->from = l->to;
	}
	if (remote && l->from < l->to) {
		/* A store read streams on this thread to its end (its reader
		 * holds an open object between chunks). */
		l->rc = stream_remote(c, t, l->from, l->to);
		l->from = l->to;
	}
	while (!l->rc && l->from < l->to) {
		int64_t want = l->to - l->from < GAZ_READ_CHUNK ? l->to - l->from : GAZ_READ_CHUNK;
		ssize_t got;
		if (!gaz_rpc_send_room(c->call) && read_park(l, GAZ_DEADLINE_NEVER, GAZ_RPC_PARK_SEND)) {
			free(buf);
			return true;
		}
		if (!buf && !(buf = malloc(GAZ_READ_CHUNK))) {
			l->rc = gaz_status_set(&c->err, GAZ_ENOMEM, "out of memory");
			break;
		}
		got = pread(t->file->fd, buf, (size_t)want, l->from - t->frag.begin);
		if (got <= 0) {
			l->rc = gaz_status_set(&c->err, GAZ_EIO, "reading local fragment failed");
			break;
		}
		if (!(l->rc = send_chunk(c, l->from, buf, (size_t)got)))
			gaz_metric_read_served(false, (int64_t)got);
		l->from += got;
	}
	free(buf);
done:
	l->offset = l->to > l->offset ? l->to : l->offset;
	if (l->rc || q->metadata_only || (remote && q->do_not_proxy) ||
	    (q->end_offset && l->offset >= q->end_offset))
		l->state = READ_DONE;
	else
		l->state = READ_QUERY;
	target_release(t);
	l->meta_sent = false;
	return false;
}

/* wait_step waits for the read's next event: a wake (query again), its
 * cancellation (READ_DONE) or `deadline_ns`. It parks when the call can,
 * else blocks (a call that cannot park). Returns true when it parked. */
static bool wait_step(struct local_read *l, int64_t deadline_ns)
{
	int rc = gaz_rpc_poll(l->c.call);

	if (rc == GAZ_ETIMEDOUT) {
		if (read_park(l, deadline_ns, 0))
			return true;
		rc = gaz_rpc_wait(l->c.call, deadline_ns);
	}
	if (rc == GAZ_ECANCELLED) {
		l->rc = rc;
		l->state = READ_DONE;
	}
	return false;
}

/* One READ_QUERY step. Returns true when the read parked. */
static bool query_step(struct local_read *l)
{
	struct read_ctx *c = &l->c;
	struct gaz_replica *r = c->res.replica;
	const Protocol__ReadRequest *q = c->req;
	struct read_target *t = &l->t;
	bool dead;

	head_leave(l);
	pthread_mutex_lock(&r->mu);
	query(r, l->offset, q->begin_mod_time, t);
	dead = r->dead;
	/* At the write head, with its header sent: wait in the head group.
	 * The query and the join are one step under mu, so no commit falls
	 * between them. A read with an end offset waits on its own, to end
	 * exactly there. */
	if (!t->found && !dead && q->block && t->offset >= t->write_head && c->header_sent &&
	    !q->metadata_only && !q->end_offset && !gaz_rpc_is_local(c->call) &&
	    (l->joined = gaz_head_join(&r->head, &l->hr, t->offset)))
		gaz_notifier_remove(&r->notifier, &l->w);
	pthread_mutex_unlock(&r->mu);
	if (t->found) {
		l->hole_deadline = 0;
		l->state = READ_STREAM;
		return false;
	}
	if (!dead && t->offset < t->write_head &&
	    (!l->hole_deadline || gaz_mono_ns() < l->hole_deadline)) {
		/* A hole below the write head: wait for a listing. */
		if (!l->hole_deadline)
			l->hole_deadline = gaz_deadline_in(HOLE_WAIT_MS);
		gaz_replica_hurry_refresh(r, l->hole_deadline);
		l->offset = t->offset;
		target_release(t);
		return wait_step(l, l->hole_deadline);
	}
	if (dead || t->offset >= t->write_head)
		l->hole_deadline = 0; /* else a hole outlived its wait: block as at the head */
	if (!q->block || dead) {
		if (!dead)
			l->rc = send_metadata(c, PROTOCOL__STATUS__OFFSET_NOT_YET_AVAILABLE, t);
		target_release(t);
		l->state = READ_DONE;
		return false;
	}
	/* At the write head: park until a commit wakes us. */
	l->offset = t->offset;
	target_release(t);
	return wait_step(l, GAZ_DEADLINE_NEVER);
}

static void local_read_end(struct local_read *l)
{
	struct read_ctx *c = &l->c;
	struct gaz_replica *r = c->res.replica;

	head_leave(l);
	gaz_notifier_remove(&r->notifier, &l->w);
	gaz_debug("read ended", "journal=%s offset=%lld rc=%s dead=%d", c->res.journal,
		  (long long)l->offset, gaz_err_str(l->rc), (int)atomic_load(&r->dead));
	if (l->rc && l->rc != GAZ_ECANCELLED)
		gaz_rpc_finish(c->call, NULL, GAZ_GRPC_UNKNOWN, c->err.code ? c->err.msg : gaz_err_str(l->rc));
	else
		gaz_rpc_finish(c->call, NULL, GAZ_GRPC_OK, NULL);
	target_release(&l->t);
	gaz_resolution_release(&c->res);
	protobuf_c_message_free_unpacked(&c->req->base, NULL);
	free(l);
}

/* Runs the read's steps until it parks or is done. */
static void read_resume(struct gaz_rpc_call *call, void *arg)
{
	struct local_read *l = arg;

	(void)call;
	while (l->state != READ_DONE) {
		bool parked = l->state == READ_QUERY ? query_step(l) : stream_step(l);
		if (parked)
			return;
	}
	local_read_end(l);
}

/* Serves the read from the local replica: takes over `c` (its request
 * and resolution) and ends the call, now or after parks. */
static void serve_local(struct read_ctx *c)
{
	struct local_read *l = calloc(1, sizeof(*l));
	struct gaz_replica *r = c->res.replica;
	int rc;

	if (!l) {
		gaz_rpc_finish(c->call, NULL, GAZ_GRPC_RESOURCE_EXHAUSTED, "out of memory");
		gaz_resolution_release(&c->res);
		protobuf_c_message_free_unpacked(&c->req->base, NULL);
		return;
	}
	l->c = *c;
	l->offset = c->req->offset;
	l->w = (struct gaz_waiter){.wake = wake_call, .arg = c->call};
	l->hr.call = c->call;
	/* Like appends, reads answer only from an index that has seen the
	 * store once: a fresh replica would otherwise report its history as
	 * not yet available. */
	if ((rc = gaz_replica_wait_ready(r, c->call))) {
		gaz_debug("read ended before the replica was ready", "journal=%s rc=%s", c->res.journal,
			  gaz_err_str(rc));
		l->rc = rc == GAZ_ESTOPPED ? 0 : rc;
		l->state = READ_DONE;
	}
	gaz_notifier_add(&r->notifier, &l->w);
	read_resume(c->call, l);
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
		serve_local(&c); /* owns c's request and resolution now */
		return;
	}
out:
	gaz_resolution_release(&c.res);
	protobuf_c_message_free_unpacked(&c.req->base, NULL);
}
