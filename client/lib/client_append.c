/*
 * client_append.c - appending to a journal: the streaming Appender and the
 * one-shot, retrying client.Append of Gazette (facts §2.1, §7.4).
 *
 * Stream contract, client side (facts §2.1):
 *
 *   begin:  [parameters message] ------------------------------ open
 *   write:  [content chunk <= 1 MiB]* ------------------------- open
 *   commit: [empty message] + half-close, read one response --- done
 *   abort:  half-close without the empty message -------------- done
 *           (the broker rolls back and fails the RPC)
 *
 * An appender that saw a failed send stops sending; commit then collects
 * the broker's reason from the stream's final status.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/lib/client_int.h"
#include "common/clock.h"
#include "common/log.h"
#include "protocol/validate.h"

#define APPEND_PATH "/protocol.Journal/Append"

struct gaz_appender {
	struct gaz_client *c;
	struct gaz__client_call call;
	char *journal;       /* for messages */
	int64_t sent;        /* content bytes sent */
	bool failed;         /* a send failed: the stream is over */
	gaz_append_progress_fn progress;
	void *progress_arg;
};

static void fill_request(Protocol__AppendRequest *req, const struct gaz_append_opts *o)
{
	req->journal = (char *)o->journal;
	req->offset = o->offset;
	req->suspend = (Protocol__AppendRequest__Suspend)o->suspend;
	req->do_not_proxy = o->do_not_proxy;
	req->check_registers = (Protocol__LabelSelector *)o->check_registers;
	req->union_registers = (Protocol__LabelSet *)o->union_registers;
	req->subtract_registers = (Protocol__LabelSet *)o->subtract_registers;
}

static void appender_free(struct gaz_appender *a)
{
	gaz__client_close(a->c, &a->call);
	free(a->journal);
	free(a);
}

int gaz_appender_begin(struct gaz_client *c, const struct gaz_append_opts *o,
		       struct gaz_appender **out, struct gaz_status *st)
{
	Protocol__AppendRequest req = PROTOCOL__APPEND_REQUEST__INIT;
	struct gaz_status vst = {0};
	struct gaz__dispatch d;
	struct gaz_appender *a;
	int rc;

	fill_request(&req, o);
	if (!o->journal || !*o->journal)
		return gaz_status_set(st, GAZ_EINVAL, "invalid AppendRequest: expected Journal");
	if (gaz_validate_append_request(&req, &vst))
		return gaz_status_set(st, GAZ_EINVAL, "invalid AppendRequest: %s", vst.msg);
	if (!(a = calloc(1, sizeof(*a))) || !(a->journal = strdup(o->journal))) {
		free(a);
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory starting append");
	}
	a->c = c;
	a->progress = o->progress;
	a->progress_arg = o->progress_arg;
	/* Straight to the primary when its route is cached (facts §7.4). */
	gaz__client_dispatch(c, a->journal, true, NULL, &d);
	rc = gaz__client_open(c, &d, APPEND_PATH, GAZ_DEADLINE_NEVER, false, &a->call, st);
	if (rc) {
		if (rc == GAZ_ERPC)
			gaz_status_prefix(st, "append to \"%s\": ", a->journal);
		appender_free(a);
		return rc;
	}
	/* Sends go out behind each other from the poller: the writer waits
	 * only for the response (or when 2 MiB are queued). The request and
	 * content may wait in the transport for the commit message (or until
	 * its write buffer fills): a small append is one write, and the
	 * broker holds the journal for no time before its content is in. */
	gaz_rpc_stream_queue_sends(a->call.stream);
	if (gaz_rpc_stream_send_buffered(a->call.stream, &req.base))
		a->failed = true; /* commit reports the stream's status */
	*out = a;
	return 0;
}

int gaz_appender_write(struct gaz_appender *a, const void *buf, size_t len,
		       struct gaz_status *st)
{
	Protocol__AppendRequest chunk = PROTOCOL__APPEND_REQUEST__INIT;
	const uint8_t *p = buf;

	while (len > 0) {
		size_t n = len > GAZ_APPEND_CHUNK_MAX ? GAZ_APPEND_CHUNK_MAX : len;

		if (gaz_client_cancelled(a->c))
			return gaz_status_set(st, GAZ_ECANCELLED, "cancelled");
		if (a->failed)
			return gaz_status_set(st, GAZ_ERPC, "append to \"%s\" failed: stream ended",
					      a->journal);
		chunk.content.data = (uint8_t *)p;
		chunk.content.len = n;
		if (gaz_rpc_stream_send_buffered(a->call.stream, &chunk.base)) {
			a->failed = true;
			continue;
		}
		a->sent += (int64_t)n;
		p += n;
		len -= n;
		if (a->progress)
			a->progress(a->progress_arg, a->sent);
	}
	return 0;
}

/* recv_response reads the single response and the end of the stream (as
 * Gazette's client does), so the call's status is final. */
static int recv_response(struct gaz_appender *a, Protocol__AppendResponse **resp,
			 struct gaz_status *st)
{
	struct gaz_rpc_stream *s = a->call.stream;
	int rc = gaz__client_recv_last(a->c, s, &protocol__append_response__descriptor,
				       (ProtobufCMessage **)resp, st);

	if (rc == GAZ_EOF) {
		if (!(rc = gaz_rpc_stream_finish(s, st)))
			rc = gaz_status_set(st, GAZ_EPROTO, "Append ended without a response");
		return rc;
	}
	/* A response followed by an error status fails the append, as
	 * Gazette's client (CloseAndRecv) does. The status is in already. */
	if (!rc && (rc = gaz_rpc_stream_finish(s, st))) {
		protobuf_c_message_free_unpacked(&(*resp)->base, NULL);
		*resp = NULL;
	}
	return rc;
}

/* is_routing_status: the broker says the route we used is not (or no
 * longer) right; a cached route for the journal is dropped. */
static bool is_routing_status(int status)
{
	return status == PROTOCOL__STATUS__NOT_JOURNAL_PRIMARY_BROKER ||
	       status == PROTOCOL__STATUS__NO_JOURNAL_PRIMARY_BROKER ||
	       status == PROTOCOL__STATUS__INSUFFICIENT_JOURNAL_BROKERS ||
	       status == PROTOCOL__STATUS__NOT_JOURNAL_BROKER;
}

/* check_response validates `r`, records its route (every valid response's
 * header, as Gazette's Appender does) and maps a non-OK status to an
 * error. */
static int check_response(const struct gaz_appender *a, const Protocol__AppendResponse *r,
			  struct gaz_status *st)
{
	struct gaz_status vst = {0};
	int rc;

	if (gaz_validate_append_response(r, &vst))
		return gaz__client_invalid(&vst, st);
	gaz__client_observe(a->c, a->journal, r->header);
	if (is_routing_status((int)r->status))
		gaz__client_forget(a->c, a->journal);
	if (r->status == PROTOCOL__STATUS__OK)
		return 0;
	rc = gaz__client_status_fail((int)r->status, a->journal, st);
	if (r->status == PROTOCOL__STATUS__FRAGMENT_STORE_UNHEALTHY && r->store_health_error &&
	    st && st->code == rc) {
		size_t n = strlen(st->msg);
		snprintf(st->msg + n, sizeof(st->msg) - n, ": %s", r->store_health_error);
	}
	return rc;
}

int gaz_appender_commit(struct gaz_appender *a, Protocol__AppendResponse **resp,
			struct gaz_status *st)
{
	Protocol__AppendRequest commit = PROTOCOL__APPEND_REQUEST__INIT;
	Protocol__AppendResponse *r = NULL;
	int rc;

	if (resp)
		*resp = NULL;
	if (!a->failed && gaz_rpc_stream_send(a->call.stream, &commit.base) == 0)
		gaz_rpc_stream_close_send(a->call.stream);
	rc = recv_response(a, &r, st);
	gaz__client_call_failed(a->c, &a->call, rc);
	if (rc == GAZ_ERPC)
		gaz_status_prefix(st, "append to \"%s\": ", a->journal);
	if (!rc)
		rc = check_response(a, r, st);
	if (r && resp && (rc == 0 || gaz_validate_append_response(r, NULL) == 0))
		*resp = r;
	else if (r)
		protobuf_c_message_free_unpacked(&r->base, NULL);
	appender_free(a);
	return rc;
}

void gaz_appender_abort(struct gaz_appender *a)
{
	ProtobufCMessage *r = NULL;

	if (!a)
		return;
	if (!a->failed && gaz_rpc_stream_close_send(a->call.stream) == 0 &&
	    gaz__client_recv(a->c, a->call.stream, &protocol__append_response__descriptor, &r,
			     NULL) == 0)
		protobuf_c_message_free_unpacked(r, NULL);
	appender_free(a);
}

/* ---- one-shot Append ----------------------------------------------------- */

/* read_full reads up to cap bytes of fd (fewer only at EOF). */
static int read_full(int fd, uint8_t *buf, size_t cap, size_t *n, struct gaz_status *st)
{
	*n = 0;
	while (*n < cap) {
		ssize_t r = read(fd, buf + *n, cap - *n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return gaz_status_set(st, GAZ_EIO, "read of append input failed: %s",
					      strerror(errno));
		if (r == 0)
			break;
		*n += (size_t)r;
	}
	return 0;
}

/* send_fd streams everything readable from fd into the appender. */
static int send_fd(struct gaz_appender *a, int fd, struct gaz_status *st)
{
	uint8_t *buf = malloc(GAZ_APPEND_CHUNK_MAX);
	size_t n = 0;
	int rc;

	if (!buf)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory appending");
	do {
		if ((rc = read_full(fd, buf, GAZ_APPEND_CHUNK_MAX, &n, st)) == 0)
			rc = gaz_appender_write(a, buf, n, st);
	} while (rc == 0 && n == GAZ_APPEND_CHUNK_MAX);
	free(buf);
	return rc;
}

int gaz__append_attempt(struct gaz_client *c, const struct gaz_append_opts *o,
			const struct gaz_append_src *src, Protocol__AppendResponse **resp,
			struct gaz_status *st)
{
	struct gaz_appender *a;
	int rc;

	if ((rc = gaz_appender_begin(c, o, &a, st)))
		return rc;
	if (src->fd >= 0)
		rc = send_fd(a, src->fd, st);
	else
		rc = gaz_appender_write(a, src->buf, src->len, st);
	if (rc == GAZ_ERPC && a->failed) { /* the broker ended the stream: ask why */
		gaz_status_clear(st);
		return gaz_appender_commit(a, resp, st);
	}
	if (rc) {
		gaz_appender_abort(a);
		return rc;
	}
	return gaz_appender_commit(a, resp, st);
}

/* failure_of describes a failed attempt for the retry policies. */
static struct gaz__failure failure_of(int rc, const struct gaz_status *st,
				      const Protocol__AppendResponse *r)
{
	struct gaz__failure f = {.rc = rc, .grpc = rc == GAZ_ERPC ? st->grpc : 0, .status = -1};

	if (r)
		f.status = (int)r->status;
	return f;
}

/* rewind_src moves a re-readable fd back to `start`; false if it cannot. */
static bool rewind_src(const struct gaz_append_src *src, off_t start)
{
	return src->fd < 0 || (start >= 0 && lseek(src->fd, start, SEEK_SET) == start);
}

/* retry_wait logs a failed attempt that will be retried (routing statuses
 * only from the second attempt on, as Gazette) and sleeps its backoff.
 * Returns 0, or GAZ_ECANCELLED. */
static int retry_wait(struct gaz_client *c, const char *journal, const struct gaz__failure *f,
		      const struct gaz_status *ast, int attempt)
{
	if (attempt > 0 || f->status < 0)
		gaz_warn("append failure (will retry)", "journal=%s err=%s attempt=%d", journal,
			 ast->msg, attempt);
	return gaz__client_sleep(c, gaz_client_backoff_ms(attempt));
}

int gaz_client_append(struct gaz_client *c, const struct gaz_append_opts *o,
		      const struct gaz_append_src *src, Protocol__AppendResponse **resp,
		      struct gaz_status *st)
{
	off_t start = src->fd >= 0 ? lseek(src->fd, 0, SEEK_CUR) : 0;
	struct gaz_status ast;
	Protocol__AppendResponse *r;
	int rc;

	for (int attempt = 0;; attempt++) {
		struct gaz__failure f;

		gaz_status_clear(&ast);
		r = NULL;
		rc = gaz__append_attempt(c, o, src, &r, &ast);
		f = failure_of(rc, &ast, r);
		if (rc == 0 || !gaz__append_retryable(&f) || !rewind_src(src, start))
			break;
		if (gaz_client_cancelled(c) || retry_wait(c, o->journal, &f, &ast, attempt)) {
			gaz_status_clear(&ast);
			rc = gaz_status_set(&ast, GAZ_ECANCELLED, "cancelled");
			break;
		}
		if (r)
			protobuf_c_message_free_unpacked(&r->base, NULL);
	}
	if (rc) {
		gaz_status_set(st, rc, "%s", ast.msg);
		if (st && st->code == rc)
			st->grpc = ast.grpc;
	}
	if (resp)
		*resp = r;
	else if (r)
		protobuf_c_message_free_unpacked(&r->base, NULL);
	return rc;
}
