/*
 * bench_loops.c - the closed-loop appenders of the throughput workloads,
 * driven as events on completion queues rather than one blocked thread per
 * appender.
 *
 * Each loop is one appender: one Append RPC at a time, the next started
 * when the last one has ended, exactly the RPC bench_append sends
 * (bench_ops.c). What changes is who waits. With a thread per appender,
 * every append woke its thread at least once, so at 32 appenders the load
 * generator spent most of its CPU in thread switches, CPU taken from the
 * brokers it measures on the same machine (perf.md Part B: subtract the
 * load generator's CPU). Here a few driver threads each poll their own
 * grpc completion queue and advance whichever appends completed a step.
 *
 * One append is four grpc batches on its call:
 *   R   RECV_INITIAL_METADATA + RECV_MESSAGE + RECV_STATUS_ON_CLIENT, started
 *       at once (a pending RECV_INITIAL_METADATA lets a trailers-only error
 *       complete the status, grpc-core.md pitfall P2)
 *   S1  SEND_INITIAL_METADATA + AppendRequest{journal}   (write-buffer hint)
 *   S2  AppendRequest{content}                           (write-buffer hint)
 *   S3  AppendRequest{} + SEND_CLOSE_FROM_CLIENT: the commit, one write for
 *       the whole append
 * S1..S3 go one after the other (grpc allows one SEND_MESSAGE in flight).
 * The call ends when R and the last send batch have completed.
 *
 * Invariants: a loop's call is touched only by its driver thread; every
 * call has the OP_TIMEOUT deadline, so a driver always finishes; a call is
 * unreferenced only when none of its batches is pending.
 */
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "common/clock.h"

#define APPEND_PATH "/protocol.Journal/Append"
#define CALL_TIMEOUT_MS 10000    /* deadline of each Append RPC */
#define UNAVAILABLE_PAUSE_MS 10  /* before retrying after a retryable failure */

struct driver;

/* A pending batch's tag: which loop, and which of its two batch kinds. */
struct loop_tag {
	struct loop_state *ls;
	bool recv;
};

/* The per-loop state a driver keeps beside the caller's bench_loop. */
struct loop_state {
	struct bench_loop *o;
	struct driver *d;
	grpc_call *call;             /* NULL between appends */
	int pending;                 /* batches in flight on call */
	int step;                    /* last send batch started: 1..3 */
	bool send_failed;
	int64_t t0;                  /* start of this append */
	int64_t retry_at;            /* next start not before (0: now) */
	bool done;                   /* the window closed; no more appends */
	grpc_byte_buffer *send_bb;   /* of the send batch in flight */
	grpc_byte_buffer *resp;
	grpc_metadata_array md, trailers;
	grpc_status_code status;
	grpc_slice details;
	struct loop_tag rtag, stag;
};

struct driver {
	pthread_t tid;
	grpc_channel *gc;
	grpc_completion_queue *cq;
	const uint8_t *payload;
	size_t payload_len, size;
	int64_t start_ns, end_ns;
	struct loop_state *ls;
	int n;
};

static gpr_timespec mono_in_ms(int64_t ms)
{
	return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

/* pack_bb packs an AppendRequest into a new byte buffer (caller owns). */
static grpc_byte_buffer *pack_bb(const Protocol__AppendRequest *m)
{
	grpc_slice s = grpc_slice_malloc(protocol__append_request__get_packed_size(m));
	grpc_byte_buffer *bb;

	protocol__append_request__pack(m, GRPC_SLICE_START_PTR(s));
	bb = grpc_raw_byte_buffer_create(&s, 1);
	grpc_slice_unref(s);
	return bb;
}

/* note_error counts a failed append and keeps the first one's message. */
__attribute__((format(printf, 2, 3)))
static void note_error(struct loop_state *ls, const char *fmt, ...)
{
	va_list ap;

	if (ls->o->errors++ != 0)
		return;
	va_start(ap, fmt);
	vsnprintf(ls->o->first_err, sizeof(ls->o->first_err), fmt, ap);
	va_end(ap);
}

/* send_step starts send batch `step` (1..3) of the current append. */
static bool send_step(struct loop_state *ls, int step)
{
	struct driver *d = ls->d;
	Protocol__AppendRequest m = PROTOCOL__APPEND_REQUEST__INIT;
	grpc_op ops[2] = {{0}};
	size_t n = 0;

	if (step == 1) {
		ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
		ops[n++].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY_EXPLICITLY_SET;
		m.journal = (char *)ls->o->journal;
	} else if (step == 2) {
		m.content.data = (uint8_t *)d->payload + ls->o->off;
		m.content.len = d->size;
	}
	ls->send_bb = pack_bb(&m);
	ops[n].op = GRPC_OP_SEND_MESSAGE;
	ops[n].flags = step < 3 ? GRPC_WRITE_BUFFER_HINT : 0;
	ops[n++].data.send_message.send_message = ls->send_bb;
	if (step == 3)
		ops[n++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ls->step = step;
	if (grpc_call_start_batch(ls->call, ops, n, &ls->stag, NULL) != GRPC_CALL_OK) {
		grpc_byte_buffer_destroy(ls->send_bb);
		ls->send_bb = NULL;
		return false;
	}
	ls->pending++;
	return true;
}

/* append_start begins the next append of a loop; false if the call could
 * not start (counted as an error; the loop retries after a pause). */
static bool append_start(struct loop_state *ls, int64_t now)
{
	struct driver *d = ls->d;
	grpc_slice method = grpc_slice_from_static_string(APPEND_PATH);
	grpc_op r[3] = {{0}};

	ls->t0 = now;
	ls->retry_at = 0;
	ls->send_failed = false;
	ls->status = GRPC_STATUS_OK;
	ls->details = grpc_empty_slice();
	ls->resp = NULL;
	grpc_metadata_array_init(&ls->md);
	grpc_metadata_array_init(&ls->trailers);
	ls->call = grpc_channel_create_call(d->gc, NULL, GRPC_PROPAGATE_DEFAULTS, d->cq, method,
					    NULL, mono_in_ms(CALL_TIMEOUT_MS), NULL);
	r[0].op = GRPC_OP_RECV_INITIAL_METADATA;
	r[0].data.recv_initial_metadata.recv_initial_metadata = &ls->md;
	r[1].op = GRPC_OP_RECV_MESSAGE;
	r[1].data.recv_message.recv_message = &ls->resp;
	r[2].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	r[2].data.recv_status_on_client.trailing_metadata = &ls->trailers;
	r[2].data.recv_status_on_client.status = &ls->status;
	r[2].data.recv_status_on_client.status_details = &ls->details;
	if (!ls->call || grpc_call_start_batch(ls->call, r, 3, &ls->rtag, NULL) != GRPC_CALL_OK) {
		if (ls->call)
			grpc_call_unref(ls->call);
		ls->call = NULL;
		grpc_metadata_array_destroy(&ls->md);
		grpc_metadata_array_destroy(&ls->trailers);
		note_error(ls, "append to \"%s\" failed: cannot start a call", ls->o->journal);
		ls->retry_at = now + UNAVAILABLE_PAUSE_MS * GAZ_NS_PER_MS;
		return false;
	}
	ls->pending = 1;
	if (!send_step(ls, 1))
		ls->send_failed = true; /* R completes with the call's status */
	return true;
}

/* append_end accounts the finished append and releases its call. */
static void append_end(struct loop_state *ls, int64_t acked_ns)
{
	struct bench_loop *o = ls->o;
	struct driver *d = ls->d;
	Protocol__AppendResponse *resp = NULL;
	int st = -1;

	if (ls->resp) {
		grpc_byte_buffer_reader rd;

		if (grpc_byte_buffer_reader_init(&rd, ls->resp)) {
			grpc_slice s = grpc_byte_buffer_reader_readall(&rd);

			resp = protocol__append_response__unpack(NULL, GRPC_SLICE_LENGTH(s),
								 GRPC_SLICE_START_PTR(s));
			grpc_slice_unref(s);
			grpc_byte_buffer_reader_destroy(&rd);
		}
		grpc_byte_buffer_destroy(ls->resp);
		ls->resp = NULL;
	}
	if (resp)
		st = (int)resp->status;
	if (ls->status != GRPC_STATUS_OK) {
		char *msg = grpc_slice_to_c_string(ls->details);

		note_error(ls, "append to \"%s\" failed: %s (grpc status %d)", o->journal, msg,
			   (int)ls->status);
		gpr_free(msg);
		if (ls->status == GRPC_STATUS_UNAVAILABLE)
			ls->retry_at = acked_ns + UNAVAILABLE_PAUSE_MS * GAZ_NS_PER_MS;
	} else if (!resp) {
		note_error(ls, "append to \"%s\" failed: no response", o->journal);
	} else if (st != PROTOCOL__STATUS__OK) {
		note_error(ls, "append to \"%s\" failed: status %d", o->journal, st);
		if (bench_retryable_status(st))
			ls->retry_at = acked_ns + UNAVAILABLE_PAUSE_MS * GAZ_NS_PER_MS;
	} else if (acked_ns >= d->start_ns && acked_ns <= d->end_ns) {
		o->bytes += (int64_t)d->size;
		o->appends++;
		bench_samples_add(o->lat, acked_ns - ls->t0);
	}
	if (resp)
		protocol__append_response__free_unpacked(resp, NULL);
	grpc_slice_unref(ls->details);
	grpc_metadata_array_destroy(&ls->md);
	grpc_metadata_array_destroy(&ls->trailers);
	grpc_call_unref(ls->call);
	ls->call = NULL;
	o->off = (o->off + d->size * 13) % (d->payload_len - d->size);
}

/* on_event advances the loop whose batch completed. */
static void on_event(struct loop_tag *t, int ok)
{
	struct loop_state *ls = t->ls;

	ls->pending--;
	if (!t->recv) {
		grpc_byte_buffer_destroy(ls->send_bb);
		ls->send_bb = NULL;
		if (!ok)
			ls->send_failed = true;
		else if (!ls->send_failed && ls->step < 3 && !send_step(ls, ls->step + 1))
			ls->send_failed = true;
	}
	if (ls->pending == 0) {
		int64_t now = gaz_mono_ns();

		append_end(ls, now);
		if (now >= ls->d->end_ns)
			ls->done = true;
		else if (!ls->retry_at)
			append_start(ls, now);
	}
}

static void *driver_main(void *arg)
{
	struct driver *d = arg;
	int live = d->n;

	for (int i = 0; i < d->n; i++)
		append_start(&d->ls[i], gaz_mono_ns());
	while (live > 0) {
		int64_t now = gaz_mono_ns(), wait_ms = 50;

		/* Loops paused after a retryable failure start again when due. */
		live = 0;
		for (int i = 0; i < d->n; i++) {
			struct loop_state *ls = &d->ls[i];

			if (!ls->done && !ls->call && now >= d->end_ns)
				ls->done = true;
			else if (!ls->done && !ls->call && ls->retry_at <= now)
				append_start(ls, now);
			if (!ls->done && !ls->call && ls->retry_at > now)
				wait_ms = 1;
			live += !ls->done;
		}
		if (!live)
			break;
		grpc_event ev = grpc_completion_queue_next(d->cq, mono_in_ms(wait_ms), NULL);

		if (ev.type == GRPC_OP_COMPLETE)
			on_event(ev.tag, ev.success);
		/* Drain what else is ready without a timed wait. */
		while ((ev = grpc_completion_queue_next(d->cq, gpr_inf_past(GPR_CLOCK_MONOTONIC),
							NULL)).type == GRPC_OP_COMPLETE)
			on_event(ev.tag, ev.success);
	}
	return NULL;
}

/* channel_target maps an endpoint URL (http(s)://host:port[/]) to a grpc
 * target; other forms go through as they are. Returns a malloc'd string. */
static char *channel_target(const char *url)
{
	const char *p = strncmp(url, "http://", 7) == 0	   ? url + 7
			: strncmp(url, "https://", 8) == 0 ? url + 8
							    : url;
	char *t = strdup(p);
	size_t n = t ? strlen(t) : 0;

	if (n && t[n - 1] == '/')
		t[n - 1] = '\0';
	return t;
}

/* tls_creds: ssl credentials trusting bench_tls_ca (NULL: grpc's default
 * roots), or NULL when the file cannot be read. */
static grpc_channel_credentials *tls_creds(void)
{
	grpc_channel_credentials *creds;
	char *pem = NULL;
	size_t n = 0;
	FILE *f;

	if (bench_tls_ca) {
		if (!(f = fopen(bench_tls_ca, "rb")))
			return NULL;
		pem = bench_xcalloc(1, 1 << 20);
		n = fread(pem, 1, (1 << 20) - 1, f);
		fclose(f);
		if (n == 0) {
			free(pem);
			return NULL;
		}
	}
	creds = grpc_ssl_credentials_create(pem, NULL, NULL, NULL);
	free(pem);
	return creds;
}

int bench_loops_run(const char *target, const uint8_t *payload, size_t payload_len,
		    size_t size, struct bench_loop *loops, int n, int threads, int64_t start_ns,
		    int64_t end_ns)
{
	char *t = channel_target(target);
	grpc_arg a[3] = {{0}};
	grpc_channel_credentials *creds;
	grpc_channel *gc;
	struct driver *d;
	struct loop_state *ls;

	if (!t || n < 1 || threads < 1 || size >= payload_len) {
		free(t);
		return GAZ_EINVAL;
	}
	if (threads > n)
		threads = n;
	a[0].type = GRPC_ARG_INTEGER;
	a[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
	a[0].value.integer = 64 << 20;
	a[1].type = GRPC_ARG_INTEGER;
	a[1].key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL;
	a[1].value.integer = 1;
	a[2].type = GRPC_ARG_INTEGER;
	a[2].key = (char *)GRPC_ARG_ENABLE_RETRIES;
	a[2].value.integer = 0;
	grpc_channel_args args = {.num_args = 3, .args = a};
	creds = strncmp(target, "https://", 8) ? grpc_insecure_credentials_create() : tls_creds();
	if (!creds) {
		free(t);
		return GAZ_EINVAL;
	}
	gc = grpc_channel_create(t, creds, &args);
	grpc_channel_credentials_release(creds);
	free(t);

	d = bench_xcalloc((size_t)threads, sizeof(*d));
	ls = bench_xcalloc((size_t)n, sizeof(*ls));
	for (int i = 0; i < n; i++) {
		ls[i].o = &loops[i];
		ls[i].rtag = (struct loop_tag){.ls = &ls[i], .recv = true};
		ls[i].stag = (struct loop_tag){.ls = &ls[i], .recv = false};
	}
	/* Loops i, i + threads, ... go to driver i: contiguous slices of ls. */
	for (int i = 0, first = 0; i < threads; i++) {
		int cnt = n / threads + (i < n % threads);

		d[i] = (struct driver){.gc = gc, .cq = grpc_completion_queue_create_for_next(NULL),
				       .payload = payload, .payload_len = payload_len, .size = size,
				       .start_ns = start_ns, .end_ns = end_ns, .ls = ls + first,
				       .n = cnt};
		for (int j = 0; j < cnt; j++)
			ls[first + j].d = &d[i];
		first += cnt;
		pthread_create(&d[i].tid, NULL, driver_main, &d[i]);
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(d[i].tid, NULL);
		grpc_completion_queue_shutdown(d[i].cq);
		while (grpc_completion_queue_next(d[i].cq, gpr_inf_future(GPR_CLOCK_MONOTONIC),
						  NULL).type != GRPC_QUEUE_SHUTDOWN)
			;
		grpc_completion_queue_destroy(d[i].cq);
	}
	grpc_channel_destroy(gc);
	free(ls);
	free(d);
	return 0;
}
