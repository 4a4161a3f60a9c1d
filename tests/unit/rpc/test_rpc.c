/*
 * test_rpc.c - lib/rpc over real grpc on loopback: a server with test
 * handlers, reached through its native grpc port and through the one-port
 * listener (peek + add_fd), plus HTTP/1.1 on that same port.
 *
 * Payloads are Gazette's own ReadRequest / ReadResponse messages. Handlers
 * report what they saw through the shared state S, guarded by S.mu.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/metrics.h"
#include "protocol.pb-c.h"
#include "rpc/rpc.h"

#define P(name) "/test.T/" name
#define MAX_RECV (2 << 20)
#define BIG_MSG (1 << 20)
#define BIG_COUNT 64

/* ---- shared state between handlers and tests -------------------------- */

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct gaz_rpc_call *published; /* a call the test may wake */
	int waiting;                    /* handlers parked in gaz_rpc_wait */
	int rc[4];
	int nrc;
	int running, max_running; /* pool test */
	int ended;                /* handlers that returned (hold test) */
	int received;             /* requests h_sum received */
	int end_rc[4];
	int each_n, each_on_poller; /* h_each: messages, and those run on a poller */
	char http_peer[80];
	int finished, fin_code, fin_outcome; /* the finish observer's last call */
	void *fin_arg;
} S = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static struct gaz_rpc_server *g_srv;
static struct gaz_rpc_listener *g_lst;
static struct gaz_rpc_channel *g_native, *g_oneport;
static int g_port_native, g_port_one;

static void s_reset(void)
{
	pthread_mutex_lock(&S.mu);
	S.published = NULL;
	S.waiting = S.nrc = S.running = S.max_running = S.ended = S.received = 0;
	S.each_n = S.each_on_poller = 0;
	memset(S.rc, 0, sizeof(S.rc));
	memset(S.end_rc, 0, sizeof(S.end_rc));
	S.http_peer[0] = '\0';
	pthread_mutex_unlock(&S.mu);
}

static void s_record(int rc)
{
	pthread_mutex_lock(&S.mu);
	if (S.nrc < 4)
		S.rc[S.nrc++] = rc;
	pthread_cond_broadcast(&S.cv);
	pthread_mutex_unlock(&S.mu);
}

/* s_wait_for waits (S.mu held) until *v >= want or 10 s passed. */
static bool s_wait_for(const int *v, int want)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	while (*v < want)
		if (pthread_cond_timedwait(&S.cv, &S.mu, &ts) == ETIMEDOUT)
			return *v >= want;
	return true;
}

/* s_await waits until *v >= want (10 s at most). Tests never assert with
 * S.mu held: a failed assertion jumps out of the test. */
static bool s_await(const int *v, int want)
{
	bool ok;

	pthread_mutex_lock(&S.mu);
	ok = s_wait_for(v, want);
	pthread_mutex_unlock(&S.mu);
	return ok;
}

/* s_int reads one field of S under its lock. */
static int s_int(const int *v)
{
	int x;

	pthread_mutex_lock(&S.mu);
	x = *v;
	pthread_mutex_unlock(&S.mu);
	return x;
}

static int64_t ms_since(int64_t t0)
{
	return (gaz_mono_ns() - t0) / GAZ_NS_PER_MS;
}

/* s_ended records how a handler's stream ended. */
static void s_ended(int rc)
{
	pthread_mutex_lock(&S.mu);
	if (S.ended < 4)
		S.end_rc[S.ended] = rc;
	S.ended++;
	pthread_cond_broadcast(&S.cv);
	pthread_mutex_unlock(&S.mu);
}

/* ---- handlers --------------------------------------------------------- */

static Protocol__ReadRequest *recv_req(struct gaz_rpc_call *c, int *rc)
{
	ProtobufCMessage *m = NULL;

	*rc = gaz_rpc_recv(c, &protocol__read_request__descriptor, &m, gaz_deadline_in(10000));
	return (Protocol__ReadRequest *)m;
}

static void finish_failed(struct gaz_rpc_call *c, int rc)
{
	gaz_rpc_finish(c, NULL, rc == GAZ_EPROTO ? GAZ_GRPC_INVALID_ARGUMENT : GAZ_GRPC_CANCELLED,
		       "request failed");
}

/* first_req receives the request; on failure it ends the call and
 * returns NULL. */
static Protocol__ReadRequest *first_req(struct gaz_rpc_call *c)
{
	int rc;
	Protocol__ReadRequest *req = recv_req(c, &rc);

	if (rc != 0)
		finish_failed(c, rc);
	return rc != 0 ? NULL : req;
}

static void h_echo(struct gaz_rpc_call *c, void *arg)
{
	Protocol__ReadResponse resp = PROTOCOL__READ_RESPONSE__INIT;
	Protocol__ReadRequest *req = first_req(c);

	(void)arg;
	if (!req)
		return;
	resp.offset = req->offset;
	resp.fragment_url = req->journal;
	gaz_rpc_finish(c, &resp.base, GAZ_GRPC_OK, NULL);
	protobuf_c_message_free_unpacked(&req->base, NULL);
}

/* h_md answers "authorization|peer" and the deadline left in ms (-1: none). */
static void h_md(struct gaz_rpc_call *c, void *arg)
{
	Protocol__ReadResponse resp = PROTOCOL__READ_RESPONSE__INIT;
	const char *auth = gaz_rpc_metadata(c, "authorization");
	int64_t dl = gaz_rpc_deadline(c);
	char text[256];
	Protocol__ReadRequest *req = first_req(c);

	(void)arg;
	if (!req)
		return;
	snprintf(text, sizeof(text), "%s|%s", auth ? auth : "-", gaz_rpc_peer(c));
	resp.fragment_url = text;
	resp.write_head = dl == GAZ_DEADLINE_NEVER ? -1 : (dl - gaz_mono_ns()) / GAZ_NS_PER_MS;
	gaz_rpc_finish(c, &resp.base, GAZ_GRPC_OK, NULL);
	protobuf_c_message_free_unpacked(&req->base, NULL);
}

/* h_stream sends req.offset messages numbered 0.. then OK. */
static void h_stream(struct gaz_rpc_call *c, void *arg)
{
	Protocol__ReadResponse resp = PROTOCOL__READ_RESPONSE__INIT;
	Protocol__ReadRequest *req = first_req(c);
	int rc = 0;

	(void)arg;
	if (!req)
		return;
	for (int64_t i = 0; i < req->offset && rc == 0; i++) {
		resp.offset = i;
		rc = gaz_rpc_send(c, &resp.base);
	}
	gaz_rpc_finish(c, NULL, rc ? GAZ_GRPC_CANCELLED : GAZ_GRPC_OK, NULL);
	protobuf_c_message_free_unpacked(&req->base, NULL);
}

/* h_sum adds up the offsets of every request until EOF. */
static void h_sum(struct gaz_rpc_call *c, void *arg)
{
	Protocol__ReadResponse resp = PROTOCOL__READ_RESPONSE__INIT;
	Protocol__ReadRequest *req;
	int rc;

	(void)arg;
	while ((req = recv_req(c, &rc))) {
		resp.offset += req->offset;
		protobuf_c_message_free_unpacked(&req->base, NULL);
		pthread_mutex_lock(&S.mu);
		S.received++;
		pthread_cond_broadcast(&S.cv);
		pthread_mutex_unlock(&S.mu);
	}
	s_ended(rc);
	if (rc != GAZ_EOF) {
		finish_failed(c, rc);
		return;
	}
	gaz_rpc_finish(c, &resp.base, GAZ_GRPC_OK, NULL);
}

/* h_bidi answers each request with offset+1 until EOF; records its end. */
static void h_bidi(struct gaz_rpc_call *c, void *arg)
{
	Protocol__ReadResponse resp = PROTOCOL__READ_RESPONSE__INIT;
	Protocol__ReadRequest *req;
	int rc, src = 0;

	(void)arg;
	while (src == 0 && (req = recv_req(c, &rc))) {
		resp.offset = req->offset + 1;
		protobuf_c_message_free_unpacked(&req->base, NULL);
		src = gaz_rpc_send(c, &resp.base);
	}
	if (src)
		rc = src;
	src = gaz_rpc_finish(c, NULL, rc == GAZ_EOF ? GAZ_GRPC_OK : GAZ_GRPC_CANCELLED, NULL);
	/* Once a response went out, a cancellation may first read as EOF;
	 * finish reports it when the cancellation is known by then. */
	s_ended(rc == GAZ_EOF && src != 0 ? src : rc);
}

/* h_outcome answers OK with an application outcome of 7 recorded. */
static void h_outcome(struct gaz_rpc_call *c, void *arg)
{
	Protocol__ReadRequest *req = first_req(c);
	Protocol__ReadResponse resp = PROTOCOL__READ_RESPONSE__INIT;

	(void)arg;
	if (!req)
		return;
	gaz_rpc_set_outcome(c, 7);
	gaz_rpc_finish(c, &resp.base, GAZ_GRPC_OK, NULL);
	protobuf_c_message_free_unpacked(&req->base, NULL);
}

/* The server's finish observer: records its last call. */
static void on_finish(void *arg, int code, int outcome)
{
	pthread_mutex_lock(&S.mu);
	S.finished++;
	S.fin_code = code;
	S.fin_outcome = outcome;
	S.fin_arg = arg;
	pthread_cond_broadcast(&S.cv);
	pthread_mutex_unlock(&S.mu);
}

static void h_fail(struct gaz_rpc_call *c, void *arg)
{
	char text[300];
	Protocol__ReadRequest *req = first_req(c);

	(void)arg;
	if (!req)
		return;
	snprintf(text, sizeof(text), "no such journal: %s", req->journal);
	gaz_rpc_finish(c, NULL, GAZ_GRPC_NOT_FOUND, text);
	protobuf_c_message_free_unpacked(&req->base, NULL);
}

/* h_park: after one request, waits forever; records wait's and finish's rc. */
static void h_park(struct gaz_rpc_call *c, void *arg)
{
	int rc;
	Protocol__ReadRequest *req = recv_req(c, &rc);

	(void)arg;
	if (req)
		protobuf_c_message_free_unpacked(&req->base, NULL);
	pthread_mutex_lock(&S.mu);
	S.waiting++;
	pthread_cond_broadcast(&S.cv);
	pthread_mutex_unlock(&S.mu);
	s_record(gaz_rpc_wait(c, GAZ_DEADLINE_NEVER));
	s_record(gaz_rpc_cancelled(c));
	s_record(gaz_rpc_finish(c, NULL, GAZ_GRPC_OK, NULL));
}

/* h_wake: a wake before the wait is kept; a deadline passes; then waits to
 * be woken by the test thread through S.published. */
static void h_wake(struct gaz_rpc_call *c, void *arg)
{
	Protocol__ReadResponse resp = PROTOCOL__READ_RESPONSE__INIT;
	int64_t t0;
	int rc;
	Protocol__ReadRequest *req = recv_req(c, &rc);

	(void)arg;
	if (req)
		protobuf_c_message_free_unpacked(&req->base, NULL);
	gaz_rpc_wake(c);
	s_record(gaz_rpc_wait(c, gaz_deadline_in(5000)));
	t0 = gaz_mono_ns();
	s_record(gaz_rpc_wait(c, gaz_deadline_in(100)));
	resp.write_head = ms_since(t0);
	pthread_mutex_lock(&S.mu);
	S.published = c;
	S.waiting++;
	pthread_cond_broadcast(&S.cv);
	pthread_mutex_unlock(&S.mu);
	rc = gaz_rpc_wait(c, gaz_deadline_in(10000));
	pthread_mutex_lock(&S.mu);
	S.published = NULL; /* before the call can end: no late wake */
	pthread_mutex_unlock(&S.mu);
	s_record(rc);
	gaz_rpc_finish(c, &resp.base, GAZ_GRPC_OK, NULL);
}

/* h_slow sends one message after req.offset ms, then ends OK. */
static void h_slow(struct gaz_rpc_call *c, void *arg)
{
	Protocol__ReadResponse resp = PROTOCOL__READ_RESPONSE__INIT;
	Protocol__ReadRequest *req = first_req(c);

	(void)arg;
	if (!req)
		return;
	gaz_rpc_wait(c, gaz_deadline_in(req->offset));
	resp.offset = 7;
	gaz_rpc_send(c, &resp.base);
	gaz_rpc_finish(c, NULL, GAZ_GRPC_OK, NULL);
	protobuf_c_message_free_unpacked(&req->base, NULL);
}

/* h_then sends one message, then waits req.offset ms (0: none) and ends
 * with the status named by the request's journal ("fail": NOT_FOUND). */
static void h_then(struct gaz_rpc_call *c, void *arg)
{
	Protocol__ReadResponse resp = PROTOCOL__READ_RESPONSE__INIT;
	Protocol__ReadRequest *req = first_req(c);

	(void)arg;
	if (!req)
		return;
	resp.offset = 9;
	gaz_rpc_send(c, &resp.base);
	if (req->offset)
		gaz_rpc_wait(c, gaz_deadline_in(req->offset));
	if (!strcmp(req->journal, "fail"))
		gaz_rpc_finish(c, NULL, GAZ_GRPC_NOT_FOUND, "gone after the response");
	else
		gaz_rpc_finish(c, NULL, GAZ_GRPC_OK, NULL);
	protobuf_c_message_free_unpacked(&req->base, NULL);
}

/* h_proto unpacks the request as a ReadResponse, which must fail. */
static void h_proto(struct gaz_rpc_call *c, void *arg)
{
	ProtobufCMessage *m = NULL;
	int rc = gaz_rpc_recv(c, &protocol__read_response__descriptor, &m, gaz_deadline_in(5000));

	(void)arg;
	s_record(rc);
	if (m)
		protobuf_c_message_free_unpacked(m, NULL);
	gaz_rpc_finish(c, NULL, GAZ_GRPC_INVALID_ARGUMENT, "malformed request");
}

/* h_bytes receives raw ReadResponses until EOF; answers the content total
 * (offset), the message count (write_head) and "bad" on a corrupt one. */
static void h_bytes(struct gaz_rpc_call *c, void *arg)
{
	Protocol__ReadResponse resp = PROTOCOL__READ_RESPONSE__INIT, *m;
	uint8_t *buf;
	size_t len;
	int rc;

	(void)arg;
	while ((rc = gaz_rpc_recv_raw(c, &buf, &len, gaz_deadline_in(60000))) == 0) {
		m = protocol__read_response__unpack(NULL, len, buf);
		free(buf);
		if (!m || m->content.len == 0 || m->offset != resp.write_head ||
		    m->content.data[0] != (uint8_t)m->offset ||
		    m->content.data[m->content.len - 1] != (uint8_t)~m->offset)
			resp.fragment_url = "bad";
		if (m) {
			resp.offset += (int64_t)m->content.len;
			protocol__read_response__free_unpacked(m, NULL);
		}
		resp.write_head++;
	}
	gaz_rpc_finish(c, rc == GAZ_EOF ? &resp.base : NULL,
		       rc == GAZ_EOF ? GAZ_GRPC_OK : GAZ_GRPC_CANCELLED, NULL);
}

/* h_tid answers the id of the thread that ran it. */
static void h_tid(struct gaz_rpc_call *c, void *arg)
{
	Protocol__ReadResponse resp = PROTOCOL__READ_RESPONSE__INIT;
	int rc;
	Protocol__ReadRequest *req = recv_req(c, &rc);

	(void)arg;
	if (req)
		protobuf_c_message_free_unpacked(&req->base, NULL);
	resp.offset = gettid();
	gaz_rpc_finish(c, &resp.base, GAZ_GRPC_OK, NULL);
}

/* h_sleep holds a handler thread 150 ms and tracks concurrency. */
static void h_sleep(struct gaz_rpc_call *c, void *arg)
{
	Protocol__ReadResponse resp = PROTOCOL__READ_RESPONSE__INIT;
	int rc;
	Protocol__ReadRequest *req = recv_req(c, &rc);

	(void)arg;
	if (req)
		protobuf_c_message_free_unpacked(&req->base, NULL);
	pthread_mutex_lock(&S.mu);
	if (++S.running > S.max_running)
		S.max_running = S.running;
	pthread_mutex_unlock(&S.mu);
	gaz_rpc_wait(c, gaz_deadline_in(150));
	pthread_mutex_lock(&S.mu);
	S.running--;
	pthread_mutex_unlock(&S.mu);
	gaz_rpc_finish(c, &resp.base, GAZ_GRPC_OK, NULL);
}

/* http_conn serves one HTTP/1.1 request: the body echoes the path. */
static void http_conn(int fd, const char *peer, void *arg)
{
	char buf[1024], path[256] = "?", out[512];
	size_t n = 0;
	ssize_t r;

	(void)arg;
	while (n < sizeof(buf) - 1 && (r = recv(fd, buf + n, sizeof(buf) - 1 - n, 0)) > 0) {
		n += (size_t)r;
		buf[n] = '\0';
		if (strstr(buf, "\r\n\r\n"))
			break;
	}
	buf[n] = '\0';
	pthread_mutex_lock(&S.mu);
	snprintf(S.http_peer, sizeof(S.http_peer), "%s", peer);
	pthread_mutex_unlock(&S.mu);
	sscanf(buf, "GET %255s ", path);
	n = (size_t)snprintf(out, sizeof(out),
			     "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
			     strlen(path), path);
	send(fd, out, n, MSG_NOSIGNAL);
	close(fd);
}

/* h_each answers each request with offset+1 from gaz_rpc_recv_each's
 * callback (a negative offset fails the stream), counting the messages
 * run off the handler's thread (on a poller). */
struct each_ctx {
	struct gaz_rpc_call *c;
	pthread_t handler;
	int n, on_poller;
	size_t pad; /* content bytes in each answer (h_each_big) */
};

#define EACH_BIG_PAD (256u << 10)
static uint8_t g_each_pad[EACH_BIG_PAD];

static int each_fn(void *arg, ProtobufCMessage *m)
{
	struct each_ctx *x = arg;
	Protocol__ReadRequest *q = (Protocol__ReadRequest *)m;
	Protocol__ReadResponse resp = PROTOCOL__READ_RESPONSE__INIT;
	int rc = GAZ_EINVAL;

	if (q->offset >= 0) {
		resp.offset = q->offset + 1;
		resp.content.data = x->pad ? g_each_pad : NULL;
		resp.content.len = x->pad;
		rc = gaz_rpc_send(x->c, &resp.base);
	}
	x->n++;
	x->on_poller += !pthread_equal(pthread_self(), x->handler);
	protobuf_c_message_free_unpacked(m, NULL);
	return rc;
}

static void each_run(struct gaz_rpc_call *c, size_t pad)
{
	struct each_ctx x = {.c = c, .handler = pthread_self(), .pad = pad};
	int rc;

	while ((rc = gaz_rpc_recv_each(c, &protocol__read_request__descriptor, each_fn, &x,
				       gaz_deadline_in(20))) == GAZ_ETIMEDOUT)
		;
	pthread_mutex_lock(&S.mu);
	S.each_n = x.n;
	S.each_on_poller = x.on_poller;
	pthread_mutex_unlock(&S.mu);
	gaz_rpc_finish(c, NULL,
		       rc == GAZ_EOF ? GAZ_GRPC_OK
		       : rc == GAZ_EINVAL ? GAZ_GRPC_INVALID_ARGUMENT
					  : GAZ_GRPC_CANCELLED,
		       rc == GAZ_EINVAL ? "negative offset" : NULL);
	s_ended(rc);
}

static void h_each(struct gaz_rpc_call *c, void *arg)
{
	(void)arg;
	each_run(c, 0);
}

/* h_each_big is h_each answering with EACH_BIG_PAD content bytes. */
static void h_each_big(struct gaz_rpc_call *c, void *arg)
{
	(void)arg;
	each_run(c, EACH_BIG_PAD);
}

/* h_each_race is h_each with a timed wait far shorter than its callback:
 * the handler's wait in gaz_rpc_recv_each ends (and it takes the stream
 * back) while a poller is inside the callback, over and over. The callback
 * records, after its work, whether the handler's deadline had passed by
 * then: the window in which the poller once read the callback's fields
 * after the handler cleared them (a NULL call on a Replicate stream). */
struct each_race {
	struct each_ctx x;
	_Atomic int64_t deadline_ns; /* the handler's current wait's end */
	int expired_in_fn;           /* callbacks outlasting the handler's wait */
	int timeouts;                /* GAZ_ETIMEDOUT returns seen by the handler */
};

#define EACH_RACE_WAIT_NS (50 * 1000)   /* the handler's timed wait */
#define EACH_RACE_WORK_NS (300 * 1000)  /* each callback's work */

static int each_race_fn(void *arg, ProtobufCMessage *m)
{
	struct each_race *r = arg;
	struct timespec ts = {0, EACH_RACE_WORK_NS};

	nanosleep(&ts, NULL);
	r->expired_in_fn += gaz_mono_ns() > atomic_load(&r->deadline_ns);
	return each_fn(&r->x, m);
}

static void h_each_race(struct gaz_rpc_call *c, void *arg)
{
	struct each_race r = {.x = {.c = c, .handler = pthread_self()}};
	int rc;

	(void)arg;
	for (;;) {
		int64_t dl = gaz_mono_ns() + EACH_RACE_WAIT_NS;

		atomic_store(&r.deadline_ns, dl);
		rc = gaz_rpc_recv_each(c, &protocol__read_request__descriptor, each_race_fn, &r, dl);
		if (rc != GAZ_ETIMEDOUT)
			break;
		r.timeouts++;
	}
	pthread_mutex_lock(&S.mu);
	S.each_n = r.x.n;
	S.each_on_poller = r.x.on_poller;
	S.rc[0] = r.expired_in_fn;
	S.rc[1] = r.timeouts;
	pthread_mutex_unlock(&S.mu);
	gaz_rpc_finish(c, NULL, rc == GAZ_EOF ? GAZ_GRPC_OK : GAZ_GRPC_CANCELLED, NULL);
	s_ended(rc);
}

/* fast_end, the fast path of SumFast, records on the poller whether the
 * request ended at a half-close (the message count) or not (-1), then
 * lets h_sum run as usual. */
static bool fast_end(struct gaz_rpc_call *c, void *arg)
{
	size_t n, bytes;
	int rc = gaz_rpc_peek_size(c, &n, &bytes);

	(void)arg;
	s_record(rc == GAZ_EOF ? (int)n : -1);
	return false;
}

/* Parked calls (gaz_rpc_park): h_parked parks after its request, whose
 * offset is its deadline in ms (0: none), and publishes the call in PK so
 * the test may wake it; parked_resume answers one response whose
 * write_head says why it ran (1 woken, 2 due, 3 cancelled) and its
 * offset after how many ms, then ends OK. */
#define PARKERS 12
static struct {
	struct gaz_rpc_call *calls[PARKERS];
	int64_t since[PARKERS];
	int n, resumed;
} PK; /* under S.mu */

static void parked_resume(struct gaz_rpc_call *c, void *arg)
{
	Protocol__ReadResponse resp = PROTOCOL__READ_RESPONSE__INIT;
	int rc = gaz_rpc_poll(c);

	(void)arg;
	resp.write_head = rc == 0 ? 1 : rc == GAZ_ECANCELLED ? 3 : 2;
	pthread_mutex_lock(&S.mu);
	for (int i = 0; i < PK.n; i++) /* unpublished before it can end */
		if (PK.calls[i] == c) {
			PK.calls[i] = NULL;
			resp.offset = ms_since(PK.since[i]);
		}
	PK.resumed++;
	pthread_cond_broadcast(&S.cv);
	pthread_mutex_unlock(&S.mu);
	gaz_rpc_send(c, &resp.base);
	gaz_rpc_finish(c, NULL, GAZ_GRPC_OK, NULL);
}

static void h_parked(struct gaz_rpc_call *c, void *arg)
{
	int rc;
	Protocol__ReadRequest *req = recv_req(c, &rc);
	int64_t deadline = req && req->offset ? gaz_deadline_in(req->offset) : GAZ_DEADLINE_NEVER;
	int id = req && req->journal ? atoi(req->journal) : -1;

	(void)arg;
	if (req)
		protobuf_c_message_free_unpacked(&req->base, NULL);
	pthread_mutex_lock(&S.mu);
	if (id >= 0 && id < PARKERS) { /* the stream's index in the test */
		PK.since[id] = gaz_mono_ns();
		PK.calls[id] = c;
		PK.n = id >= PK.n ? id + 1 : PK.n;
	}
	S.waiting++;
	pthread_cond_broadcast(&S.cv);
	pthread_mutex_unlock(&S.mu);
	if (gaz_rpc_park(c, parked_resume, NULL, deadline, 0) != 0)
		gaz_rpc_finish(c, NULL, GAZ_GRPC_INTERNAL, "park refused");
}

/* Streams parked while they receive (gaz_rpc_park_each): h_each_parked
 * answers its first request (journal: the stream's index, offset+1),
 * publishes the call in EP and parks; each later message is answered by
 * each_fn on a poller. Its resume re-parks after a wake (counted), and
 * otherwise records the end (messages run, rc) and ends the call as
 * h_each does. */
#define EACH_PARKERS 8
static struct {
	struct gaz_rpc_call *calls[EACH_PARKERS];
	int n[EACH_PARKERS], wakes[EACH_PARKERS], rc[EACH_PARKERS];
	int parked, ended;
} EP; /* under S.mu */

struct each_parked {
	struct each_ctx x;
	int id, wakes;
};

static void each_parked_resume(struct gaz_rpc_call *c, void *arg);

static void each_parked_park(struct each_parked *p)
{
	if (gaz_rpc_park_each(p->x.c, &protocol__read_request__descriptor, each_fn, &p->x,
			      each_parked_resume, p, GAZ_DEADLINE_NEVER, 0) != 0)
		each_parked_resume(p->x.c, p); /* not parked: ends it */
}

static void each_parked_resume(struct gaz_rpc_call *c, void *arg)
{
	struct each_parked *p = arg;
	int rc = gaz_rpc_recv_each(c, &protocol__read_request__descriptor, each_fn, &p->x, 0);

	if (rc == GAZ_ETIMEDOUT) {
		p->wakes += gaz_rpc_poll(c) == 0;
		each_parked_park(p);
		return;
	}
	pthread_mutex_lock(&S.mu);
	EP.calls[p->id] = NULL; /* unpublished before it ends */
	EP.n[p->id] = p->x.n;
	EP.wakes[p->id] = p->wakes;
	EP.rc[p->id] = rc;
	EP.ended++;
	pthread_cond_broadcast(&S.cv);
	pthread_mutex_unlock(&S.mu);
	gaz_rpc_finish(c, NULL,
		       rc == GAZ_EOF ? GAZ_GRPC_OK
		       : rc == GAZ_EINVAL ? GAZ_GRPC_INVALID_ARGUMENT
					  : GAZ_GRPC_CANCELLED,
		       rc == GAZ_EINVAL ? "negative offset" : NULL);
	free(p);
}

static void h_each_parked(struct gaz_rpc_call *c, void *arg)
{
	struct each_parked *p = calloc(1, sizeof(*p));
	Protocol__ReadRequest *req;
	Protocol__ReadResponse resp = PROTOCOL__READ_RESPONSE__INIT;
	int rc;

	(void)arg;
	assert_non_null(p);
	p->x.c = c;
	p->x.handler = pthread_self();
	if (!(req = recv_req(c, &rc))) {
		finish_failed(c, rc);
		free(p);
		return;
	}
	p->id = req->journal ? atoi(req->journal) : 0;
	p->id = p->id < 0 || p->id >= EACH_PARKERS ? 0 : p->id;
	resp.offset = req->offset + 1;
	protobuf_c_message_free_unpacked(&req->base, NULL);
	gaz_rpc_send(c, &resp.base);
	pthread_mutex_lock(&S.mu);
	EP.calls[p->id] = c;
	EP.parked++;
	pthread_cond_broadcast(&S.cv);
	pthread_mutex_unlock(&S.mu);
	each_parked_park(p);
}

static void register_all(struct gaz_rpc_server *srv)
{
	static const struct {
		const char *path;
		gaz_rpc_handler_fn fn;
	} hs[] = {
		{P("Echo"), h_echo},   {P("Md"), h_md},       {P("Stream"), h_stream},
		{P("Sum"), h_sum},     {P("Bidi"), h_bidi},   {P("Fail"), h_fail},
		{P("Park"), h_park},   {P("Wake"), h_wake},   {P("Slow"), h_slow},
		{P("Proto"), h_proto}, {P("Bytes"), h_bytes}, {P("Sleep"), h_sleep},
		{P("Tid"), h_tid},     {P("Then"), h_then},   {P("Each"), h_each},
		{P("EachRace"), h_each_race}, {P("Parked"), h_parked},
		{P("EachParked"), h_each_parked}, {P("EachBig"), h_each_big},
	};

	for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
		assert_int_equal(gaz_rpc_server_register(srv, hs[i].path, hs[i].fn, NULL), 0);
	assert_int_equal(gaz_rpc_server_register_fast(srv, P("SumFast"), h_sum, fast_end, NULL,
						      GAZ_RPC_DISPATCH_READ),
			 0);
	assert_int_equal(gaz_rpc_server_register(srv, P("Outcome"), h_outcome, &S), 0);
	assert_int_equal(gaz_rpc_server_on_finish(srv, on_finish), 0);
	assert_int_equal(gaz_rpc_server_metrics(srv), 0);
	/* Registered after: counted as well, with its type. */
	assert_int_equal(gaz_rpc_server_register_flags(srv, P("Stream2"), h_stream, NULL,
						       GAZ_RPC_SERVER_STREAMS),
			 0);
}

/* ---- fixture ---------------------------------------------------------- */

static struct gaz_rpc_channel *channel_to(int port)
{
	char t[64];

	snprintf(t, sizeof(t), "http://127.0.0.1:%d", port);
	return gaz_rpc_channel_new(t, NULL);
}

static int setup(void **state)
{
	struct gaz_rpc_server_opts o = {.max_recv_bytes = MAX_RECV};
	struct gaz_status st = {0};
	char t[64];

	(void)state;
	if (gaz_rpc_init(2) != 0 || gaz_rpc_init(1) != GAZ_EINVAL)
		return -1;
	g_srv = gaz_rpc_server_new(&o);
	register_all(g_srv);
	if (gaz_rpc_server_register(g_srv, P("Echo"), h_echo, NULL) != GAZ_EINVAL)
		return -1; /* duplicate */
	if (gaz_rpc_server_start(g_srv, "127.0.0.1:0", &g_port_native) != 0 || !g_port_native)
		return -1;
	g_lst = gaz_rpc_listen("127.0.0.1:0", g_srv, http_conn, NULL, &g_port_one, &st);
	if (!g_lst || !g_port_one)
		return -1;
	snprintf(t, sizeof(t), "127.0.0.1:%d", g_port_native);
	g_native = gaz_rpc_channel_new(t, NULL);
	g_oneport = channel_to(g_port_one);
	return g_native && g_oneport ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	gaz_rpc_channel_free(g_native);
	gaz_rpc_channel_free(g_oneport);
	gaz_rpc_listener_close(g_lst);
	gaz_rpc_server_free(g_srv);
	gaz_rpc_shutdown();
	return 0;
}

/* ---- client helpers --------------------------------------------------- */

static int unary(struct gaz_rpc_channel *ch, const char *path, const char *journal, int64_t off,
		 Protocol__ReadResponse **resp, int64_t deadline_ns, const char *auth,
		 struct gaz_status *st)
{
	Protocol__ReadRequest req = PROTOCOL__READ_REQUEST__INIT;
	ProtobufCMessage *m = NULL;
	int rc;

	req.journal = (char *)journal;
	req.offset = off;
	memset(st, 0, sizeof(*st));
	rc = gaz_rpc_unary(ch, path, &req.base, &protocol__read_response__descriptor, &m,
			   deadline_ns, true, auth, st);
	*resp = (Protocol__ReadResponse *)m;
	return rc;
}

static void free_resp(Protocol__ReadResponse *r)
{
	if (r)
		protobuf_c_message_free_unpacked(&r->base, NULL);
}

static int stream_send_off(struct gaz_rpc_stream *s, int64_t off)
{
	Protocol__ReadRequest req = PROTOCOL__READ_REQUEST__INIT;

	req.offset = off;
	return gaz_rpc_stream_send(s, &req.base);
}

static int stream_recv_resp(struct gaz_rpc_stream *s, Protocol__ReadResponse **r, int64_t dl)
{
	ProtobufCMessage *m = NULL;
	int rc = gaz_rpc_stream_recv(s, &protocol__read_response__descriptor, &m, dl);

	*r = (Protocol__ReadResponse *)m;
	return rc;
}

static struct gaz_rpc_stream *open_stream(struct gaz_rpc_channel *ch, const char *path)
{
	struct gaz_status st = {0};
	struct gaz_rpc_stream *s = gaz_rpc_stream_open(ch, path, gaz_deadline_in(30000), true,
						       NULL, &st);

	assert_non_null(s);
	return s;
}

/* end_ok checks that `s` has no message left and ended OK, and frees it. */
static void end_ok(struct gaz_rpc_stream *s)
{
	struct gaz_status st = {0};
	Protocol__ReadResponse *r;

	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), GAZ_EOF);
	assert_null(r);
	assert_int_equal(gaz_rpc_stream_finish(s, &st), 0);
	gaz_rpc_stream_free(s);
}

/* ---- tests ------------------------------------------------------------ */

static void test_unary_echo(void **state)
{
	struct gaz_rpc_channel *chs[] = {g_native, g_oneport};
	Protocol__ReadResponse *r;
	struct gaz_status st;

	(void)state;
	for (int i = 0; i < 2; i++) {
		assert_int_equal(unary(chs[i], P("Echo"), "a/b", 42, &r, gaz_deadline_in(10000),
				       NULL, &st), 0);
		assert_int_equal(r->offset, 42);
		assert_string_equal(r->fragment_url, "a/b");
		free_resp(r);
	}
}

static void test_metadata_peer_deadline(void **state)
{
	struct gaz_rpc_channel *chs[] = {g_native, g_oneport};
	Protocol__ReadResponse *r;
	struct gaz_status st;

	(void)state;
	for (int i = 0; i < 2; i++) {
		assert_int_equal(unary(chs[i], P("Md"), "", 0, &r, gaz_deadline_in(5000),
				       "Bearer tok", &st), 0);
		/* Through add_fd grpc reports "fd:N": the listener's address
		 * recorded at handover must come back instead. */
		assert_true(strncmp(r->fragment_url, "Bearer tok|ipv4:127.0.0.1:", 26) == 0);
		/* grpc-timeout travels in coarse units: allow rounding up. */
		assert_true(r->write_head > 3000 && r->write_head <= 5100);
		free_resp(r);
	}
	assert_int_equal(unary(g_native, P("Md"), "", 0, &r, GAZ_DEADLINE_NEVER, NULL, &st), 0);
	assert_true(strncmp(r->fragment_url, "-|", 2) == 0);
	assert_int_equal(r->write_head, -1);
	free_resp(r);
}

static void test_server_stream(void **state)
{
	struct gaz_rpc_stream *s = open_stream(g_oneport, P("Stream"));
	Protocol__ReadResponse *r;

	(void)state;
	assert_int_equal(stream_send_off(s, 25), 0);
	assert_int_equal(gaz_rpc_stream_close_send(s), 0);
	for (int i = 0; i < 25; i++) {
		assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), 0);
		assert_int_equal(r->offset, i);
		free_resp(r);
	}
	end_ok(s);
}

static void test_client_stream_sum(void **state)
{
	struct gaz_rpc_stream *s = open_stream(g_native, P("Sum"));
	Protocol__ReadResponse *r;

	(void)state;
	s_reset();
	for (int i = 1; i <= 100; i++)
		assert_int_equal(stream_send_off(s, i), 0);
	assert_int_equal(gaz_rpc_stream_close_send(s), 0);
	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), 0);
	assert_int_equal(r->offset, 5050);
	free_resp(r);
	end_ok(s);
	assert_true(s_await(&S.ended, 1));
	assert_int_equal(s_int(&S.end_rc[0]), GAZ_EOF); /* half-close confirmed */
}

static void test_bidi_ping_pong(void **state)
{
	struct gaz_rpc_stream *s = open_stream(g_oneport, P("Bidi"));
	Protocol__ReadResponse *r;

	(void)state;
	s_reset();
	for (int i = 0; i < 50; i++) {
		assert_int_equal(stream_send_off(s, i * 10), 0);
		assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), 0);
		assert_int_equal(r->offset, i * 10 + 1);
		free_resp(r);
	}
	assert_int_equal(gaz_rpc_stream_close_send(s), 0);
	end_ok(s);
	assert_true(s_await(&S.ended, 1));
	assert_int_equal(s_int(&S.end_rc[0]), GAZ_EOF);
}

/* Receives started ahead on several streams (as a gather does) deliver
 * each stream's own messages, in order, to the later receives; one
 * started twice, or after the end, changes nothing. */
static void test_stream_recv_ahead(void **state)
{
	struct gaz_rpc_stream *s[3];
	Protocol__ReadResponse *r;

	(void)state;
	s_reset();
	for (int k = 0; k < 3; k++)
		s[k] = open_stream(g_oneport, P("Bidi"));
	for (int i = 0; i < 20; i++) {
		for (int k = 0; k < 3; k++) {
			assert_int_equal(stream_send_off(s[k], 1000 * k + i), 0);
			gaz_rpc_stream_recv_ahead(s[k]);
			gaz_rpc_stream_recv_ahead(s[k]); /* in flight: no second receive */
		}
		for (int k = 2; k >= 0; k--) {
			assert_int_equal(stream_recv_resp(s[k], &r, gaz_deadline_in(10000)), 0);
			assert_int_equal(r->offset, 1000 * k + i + 1);
			free_resp(r);
		}
	}
	/* Nothing sent: the receive started ahead waits, and the message
	 * sent after it is what it gets. */
	gaz_rpc_stream_recv_ahead(s[0]);
	assert_int_equal(stream_recv_resp(s[0], &r, gaz_deadline_in(50)), GAZ_ETIMEDOUT);
	assert_int_equal(stream_send_off(s[0], 7), 0);
	assert_int_equal(stream_recv_resp(s[0], &r, gaz_deadline_in(10000)), 0);
	assert_int_equal(r->offset, 8);
	free_resp(r);
	for (int k = 0; k < 3; k++) {
		assert_int_equal(gaz_rpc_stream_close_send(s[k]), 0);
		gaz_rpc_stream_recv_ahead(s[k]);
		assert_int_equal(stream_recv_resp(s[k], &r, gaz_deadline_in(10000)), GAZ_EOF);
		gaz_rpc_stream_recv_ahead(s[k]); /* after the end: nothing */
		end_ok(s[k]);
	}
	assert_true(s_await(&S.ended, 3));
}

/* A receive notification: counts calls and the thread each ran on. */
struct notified {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int calls;
	pthread_t thread;
};

static void on_notify(void *arg)
{
	struct notified *n = arg;

	pthread_mutex_lock(&n->mu);
	n->calls++;
	n->thread = pthread_self();
	pthread_cond_broadcast(&n->cv);
	pthread_mutex_unlock(&n->mu);
}

static bool notified_await(struct notified *n, int calls)
{
	int64_t deadline = gaz_deadline_in(10000);

	pthread_mutex_lock(&n->mu);
	while (n->calls < calls && gaz_mono_ns() < deadline) {
		struct timespec ts = gaz_abstime_of(gaz_deadline_in(50));
		pthread_cond_timedwait(&n->cv, &n->mu, &ts);
	}
	pthread_mutex_unlock(&n->mu);
	return n->calls >= calls;
}

/* gaz_rpc_stream_recv_notify calls back once per receive: from a poller
 * when the message comes later, at once when it is in already or the
 * stream is over; the receive after it takes the message without
 * waiting. */
static void test_stream_recv_notify(void **state)
{
	struct gaz_rpc_stream *s = open_stream(g_oneport, P("Bidi"));
	struct notified n = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	Protocol__ReadResponse *r;

	(void)state;
	s_reset();
	/* Registered before the message is even sent: a poller calls back. */
	gaz_rpc_stream_recv_notify(s, on_notify, &n);
	assert_int_equal(n.calls, 0);
	assert_int_equal(stream_send_off(s, 41), 0);
	assert_true(notified_await(&n, 1));
	assert_false(pthread_equal(n.thread, pthread_self()));
	assert_int_equal(stream_recv_resp(s, &r, gaz_mono_ns()), 0);
	assert_int_equal(r->offset, 42);
	free_resp(r);
	/* A completed receive left unread: the next registration is
	 * called back at once, on this thread. */
	assert_int_equal(stream_send_off(s, 9), 0);
	gaz_rpc_stream_recv_notify(s, on_notify, &n);
	assert_true(notified_await(&n, 2));
	gaz_rpc_stream_recv_notify(s, on_notify, &n);
	assert_int_equal(n.calls, 3);
	assert_true(pthread_equal(n.thread, pthread_self()));
	assert_int_equal(stream_recv_resp(s, &r, gaz_mono_ns()), 0);
	assert_int_equal(r->offset, 10);
	free_resp(r);
	/* The end of the stream notifies too, once its status is in (a
	 * poller reads it without waiting), and the receive reads EOF. */
	gaz_rpc_stream_recv_notify(s, on_notify, &n);
	assert_int_equal(gaz_rpc_stream_close_send(s), 0);
	assert_true(notified_await(&n, 4));
	struct gaz_status st = {0};
	assert_int_equal(gaz_rpc_stream_status_now(s, &st), 0);
	end_ok(s);
	assert_true(s_await(&S.ended, 1));
}

/* gaz_rpc_stream_free_later from a receive notify, on the notify's own
 * stream (which gaz_rpc_stream_free would wait on forever): after the
 * answer, the callback frees the stream and the poller lets go of it
 * once its last op is done. The sanitizer build (make SAN=1) sees a
 * use after the free or a leak. */
struct free_in_notify {
	struct gaz_rpc_stream *s;
	struct notified n;
	int64_t offset; /* the answer's */
};

static void free_on_notify(void *arg)
{
	struct free_in_notify *f = arg;
	Protocol__ReadResponse *r = NULL;

	if (stream_recv_resp(f->s, &r, 0) == 0) {
		f->offset = r->offset;
		free_resp(r);
	}
	gaz_rpc_stream_free_later(f->s);
	on_notify(&f->n);
}

static void test_stream_free_later(void **state)
{
	struct free_in_notify f = {.n = {.mu = PTHREAD_MUTEX_INITIALIZER,
					 .cv = PTHREAD_COND_INITIALIZER}};

	(void)state;
	s_reset();
	f.s = open_stream(g_oneport, P("Bidi"));
	gaz_rpc_stream_recv_notify(f.s, free_on_notify, &f);
	assert_int_equal(stream_send_off(f.s, 6), 0);
	assert_true(notified_await(&f.n, 1));
	assert_int_equal(f.offset, 7);
	/* The server sees the call end (cancelled by the free). */
	assert_true(s_await(&S.ended, 1));
}

/* Sends from a poller (a receive notification's callback) on a stream
 * whose server never reads: grpc's flow control holds the sends in
 * flight, the queue fills, and the send that finds it full fails at once
 * rather than waiting for completions only this poller could deliver. */
struct poller_sends {
	struct gaz_rpc_stream *s;   /* the stream to the non-reading handler */
	struct notified n;
	int sent, rc;               /* sends accepted, and the first failure */
	int64_t took_ms;
};

static void sends_on_poller(void *arg)
{
	struct poller_sends *ps = arg;
	Protocol__ReadResponse msg = PROTOCOL__READ_RESPONSE__INIT;
	uint8_t *content = calloc(1, BIG_MSG / 4);
	int64_t t0 = gaz_mono_ns();

	msg.content.data = content;
	msg.content.len = content ? BIG_MSG / 4 : 0;
	/* 64 MiB: far past any flow-control window and the queue. */
	while (ps->rc == 0 && ps->sent < 256) {
		msg.offset = ps->sent;
		if ((ps->rc = gaz_rpc_stream_send(ps->s, &msg.base)) == 0)
			ps->sent++;
	}
	ps->took_ms = ms_since(t0);
	free(content);
	on_notify(&ps->n);
}

static void test_queued_sends_full_on_poller(void **state)
{
	struct poller_sends ps = {.n = {.mu = PTHREAD_MUTEX_INITIALIZER,
					.cv = PTHREAD_COND_INITIALIZER}};
	struct gaz_rpc_stream *trigger = open_stream(g_oneport, P("Bidi"));
	struct gaz_status st = {0};

	(void)state;
	s_reset();
	ps.s = gaz_rpc_stream_open(g_oneport, P("Park"), gaz_deadline_in(30000), true, NULL, &st);
	assert_non_null(ps.s);
	gaz_rpc_stream_queue_sends(ps.s);
	assert_int_equal(stream_send_off(ps.s, 0), 0);
	assert_true(s_await(&S.waiting, 1)); /* parked: it reads no more */
	/* The callback runs on the poller that receives the echo. */
	gaz_rpc_stream_recv_notify(trigger, sends_on_poller, &ps);
	assert_int_equal(stream_send_off(trigger, 1), 0);
	assert_true(notified_await(&ps.n, 1));
	assert_false(pthread_equal(ps.n.thread, pthread_self()));
	assert_int_equal(ps.rc, GAZ_ERPC);
	assert_true(ps.sent >= 1 && ps.sent < 256);
	assert_true(ps.took_ms < 5000);
	gaz_rpc_stream_cancel(ps.s);
	assert_true(s_await(&S.nrc, 3)); /* the handler saw the cancellation */
	assert_int_not_equal(gaz_rpc_stream_finish(ps.s, &st), 0);
	gaz_rpc_stream_free(ps.s);
	gaz_rpc_stream_cancel(trigger);
	gaz_rpc_stream_free(trigger);
}

/* send_buffered sends a ReadRequest for `off` (journal `j`) packed, with
 * the buffer hint. */
static int send_buffered(struct gaz_rpc_stream *s, int64_t off, char *j)
{
	Protocol__ReadRequest req = PROTOCOL__READ_REQUEST__INIT;
	struct gaz_rpc_packed *p;
	int rc;

	req.offset = off;
	req.journal = j;
	p = gaz_rpc_pack_msg(&req.base);
	assert_non_null(p);
	rc = gaz_rpc_stream_send_packed(s, p, true);
	gaz_rpc_packed_free(p);
	return rc;
}

/* A malloc'd string of `len` copies of `c` (larger than the transport's
 * 64 KiB write buffer when len is). */
static char *big_string(size_t len, char c)
{
	char *big = malloc(len + 1);

	assert_non_null(big);
	memset(big, c, len);
	big[len] = '\0';
	return big;
}

/* Buffered sends still arrive, in order: with the next unbuffered send,
 * alone once larger than the transport's write buffer, and with the
 * half-close. */
static void test_buffered_sends(void **state)
{
	struct gaz_rpc_stream *s = open_stream(g_oneport, P("Bidi"));
	Protocol__ReadResponse *r;
	char *big = big_string(256 << 10, 'j');

	(void)state;
	s_reset();
	assert_int_equal(send_buffered(s, 10, ""), 0);
	assert_int_equal(stream_send_off(s, 20), 0);
	for (int64_t want = 11; want <= 21; want += 10) {
		assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), 0);
		assert_int_equal(r->offset, want);
		free_resp(r);
	}
	/* Nothing follows this one until its answer is in. */
	assert_int_equal(send_buffered(s, 30, big), 0);
	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), 0);
	assert_int_equal(r->offset, 31);
	free_resp(r);
	assert_int_equal(send_buffered(s, 40, ""), 0);
	assert_int_equal(gaz_rpc_stream_close_send(s), 0);
	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), 0);
	assert_int_equal(r->offset, 41);
	free_resp(r);
	end_ok(s);
	assert_true(s_await(&S.ended, 1));
	assert_int_equal(s_int(&S.end_rc[0]), GAZ_EOF);
	free(big);
}

/* gaz_rpc_stream_send_buffered on a stream that queues its sends (an
 * appender's request and chunks): everything arrives, in order, with the
 * half-close that follows; a buffered message larger than the transport's
 * write buffer goes out without waiting for it. */
static void test_buffered_queued_sends(void **state)
{
	struct gaz_rpc_stream *s = open_stream(g_oneport, P("Bidi"));
	Protocol__ReadRequest req = PROTOCOL__READ_REQUEST__INIT;
	Protocol__ReadResponse *r;
	char *big = big_string(256 << 10, 'q');

	(void)state;
	s_reset();
	gaz_rpc_stream_queue_sends(s);
	req.journal = big;
	req.offset = 5;
	assert_int_equal(gaz_rpc_stream_send_buffered(s, &req.base), 0);
	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), 0);
	assert_int_equal(r->offset, 6);
	free_resp(r);
	req.journal = "";
	for (int64_t off = 10; off <= 30; off += 10) {
		req.offset = off;
		assert_int_equal(gaz_rpc_stream_send_buffered(s, &req.base), 0);
	}
	assert_int_equal(gaz_rpc_stream_close_send(s), 0);
	for (int64_t want = 11; want <= 31; want += 10) {
		assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), 0);
		assert_int_equal(r->offset, want);
		free_resp(r);
	}
	end_ok(s);
	assert_true(s_await(&S.ended, 1));
	assert_int_equal(s_int(&S.end_rc[0]), GAZ_EOF);
	free(big);
}

/* each_lockstep sends offsets [from, to) on an Each stream one at a time,
 * each answered with offset+1 before the next goes. */
static void each_lockstep(struct gaz_rpc_stream *s, int from, int to)
{
	Protocol__ReadResponse *r;

	for (int i = from; i < to; i++) {
		assert_int_equal(stream_send_off(s, i), 0);
		assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), 0);
		assert_int_equal(r->offset, i + 1);
		free_resp(r);
	}
}

/* gaz_rpc_recv_each runs every message, in order, answered from the
 * callback: in lock step (on the poller, the handler waiting) and
 * pipelined; the half-close ends it with EOF. */
static void test_recv_each(void **state)
{
	struct gaz_rpc_stream *s = open_stream(g_oneport, P("Each"));
	Protocol__ReadResponse *r;

	(void)state;
	s_reset();
	each_lockstep(s, 0, 50);
	for (int i = 50; i < 100; i++)
		assert_int_equal(stream_send_off(s, i), 0);
	for (int i = 50; i < 100; i++) {
		assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), 0);
		assert_int_equal(r->offset, i + 1);
		free_resp(r);
	}
	assert_int_equal(gaz_rpc_stream_close_send(s), 0);
	end_ok(s);
	assert_true(s_await(&S.ended, 1));
	assert_int_equal(s_int(&S.end_rc[0]), GAZ_EOF);
	assert_int_equal(s_int(&S.each_n), 100);
	assert_true(s_int(&S.each_on_poller) > 0);
}

/* Regression (a pipelined Replicate failed under CPU pressure): a peer
 * sends many requests before it reads any answer, and the answers are
 * too large for the transport to take at once. The callback on the
 * poller cannot wait for room to send; the stream's next receive waits
 * instead, and every request is answered, in order, without the call
 * being cancelled for a full response queue. */
static void test_recv_each_backpressure(void **state)
{
	struct gaz_rpc_stream *s = open_stream(g_oneport, P("EachBig"));
	Protocol__ReadResponse *r;
	const int n = 64;

	(void)state;
	s_reset();
	for (int i = 0; i < n; i++)
		assert_int_equal(stream_send_off(s, i), 0);
	assert_int_equal(gaz_rpc_stream_close_send(s), 0);
	for (int i = 0; i < n; i++) {
		assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), 0);
		assert_int_equal(r->offset, i + 1);
		assert_int_equal(r->content.len, EACH_BIG_PAD);
		free_resp(r);
	}
	end_ok(s);
	assert_true(s_await(&S.ended, 1));
	assert_int_equal(s_int(&S.end_rc[0]), GAZ_EOF);
	assert_int_equal(s_int(&S.each_n), n);
}

/* Regression (a broker's poller called a NULL function): the handler's
 * timed wait in gaz_rpc_recv_each ends while a poller runs the callback,
 * hundreds of times, and every message is still run exactly once, in
 * order, on a poller. Without the callback copied under the call's lock
 * the poller reads fields the handler is clearing: a data race under
 * ThreadSanitizer, a crash when the poller loses it. */
static void test_recv_each_timed_wait_race(void **state)
{
	struct gaz_rpc_stream *s = open_stream(g_oneport, P("EachRace"));
	const int n = 400;

	(void)state;
	s_reset();
	each_lockstep(s, 0, n);
	assert_int_equal(gaz_rpc_stream_close_send(s), 0);
	end_ok(s);
	assert_true(s_await(&S.ended, 1));
	assert_int_equal(s_int(&S.end_rc[0]), GAZ_EOF);
	assert_int_equal(s_int(&S.each_n), n);
	assert_true(s_int(&S.each_on_poller) > 0);
	/* The window was exercised: waits ended inside callbacks. */
	assert_true(s_int(&S.rc[0]) > n / 4);
	assert_true(s_int(&S.rc[1]) > n / 4);
}

/* A callback's error ends gaz_rpc_recv_each with it; nothing after it
 * is run. */
static void test_recv_each_error(void **state)
{
	struct gaz_rpc_stream *s = open_stream(g_oneport, P("Each"));
	struct gaz_status st = {0};
	Protocol__ReadResponse *r;

	(void)state;
	s_reset();
	assert_int_equal(stream_send_off(s, 7), 0);
	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), 0);
	assert_int_equal(r->offset, 8);
	free_resp(r);
	assert_int_equal(stream_send_off(s, -1), 0);
	assert_true(s_await(&S.ended, 1));
	assert_int_equal(s_int(&S.end_rc[0]), GAZ_EINVAL);
	assert_int_equal(s_int(&S.each_n), 2);
	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), GAZ_EOF);
	assert_int_equal(gaz_rpc_stream_finish(s, &st), GAZ_ERPC);
	assert_int_equal(st.grpc, GAZ_GRPC_INVALID_ARGUMENT);
	gaz_rpc_stream_free(s);
}

/* A lazy Bidi stream that sent one message and read its answer. */
static struct gaz_rpc_stream *lazy_bidi_answered(void)
{
	struct gaz_status st = {0};
	Protocol__ReadResponse *r;
	struct gaz_rpc_stream *s;

	s = gaz_rpc_stream_open_lazy(g_oneport, P("Bidi"), gaz_deadline_in(30000), true, NULL, &st);
	assert_non_null(s);
	assert_int_equal(stream_send_off(s, 1), 0);
	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), 0);
	free_resp(r);
	return s;
}

/* A lazy stream asks for its final status only once a receive finds the
 * end (or finish wants it): before that status_now does not know it; the
 * end's status, a receive's notify at the end, and a trailers-only error
 * all come as on a stream that asked at open. */
static void test_stream_lazy_status(void **state)
{
	struct notified n = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	struct gaz_status st = {0};
	Protocol__ReadResponse *r;
	struct gaz_rpc_stream *s;

	(void)state;
	s_reset();
	s = gaz_rpc_stream_open_lazy(g_oneport, P("Each"), gaz_deadline_in(30000), true, NULL, &st);
	assert_non_null(s);
	assert_int_equal(stream_send_off(s, 7), 0);
	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), 0);
	assert_int_equal(r->offset, 8);
	free_resp(r);
	assert_int_equal(gaz_rpc_stream_status_now(s, &st), GAZ_ETIMEDOUT);
	assert_int_equal(stream_send_off(s, -1), 0); /* the handler fails the call */
	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), GAZ_EOF);
	assert_int_equal(gaz_rpc_stream_finish(s, &st), GAZ_ERPC);
	assert_int_equal(st.grpc, GAZ_GRPC_INVALID_ARGUMENT);
	assert_int_equal(gaz_rpc_stream_status_now(s, &st), GAZ_ERPC);
	gaz_rpc_stream_free(s);

	/* The end notifies once its status is in. */
	s = lazy_bidi_answered();
	gaz_rpc_stream_recv_notify(s, on_notify, &n);
	assert_int_equal(gaz_rpc_stream_close_send(s), 0);
	assert_true(notified_await(&n, 1));
	memset(&st, 0, sizeof(st));
	assert_int_equal(gaz_rpc_stream_status_now(s, &st), 0);
	end_ok(s);

	/* Rejected at once (trailers-only). */
	s = gaz_rpc_stream_open_lazy(g_oneport, P("Fail"), gaz_deadline_in(30000), true, NULL, &st);
	assert_non_null(s);
	assert_int_equal(stream_send_off(s, 1), 0);
	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), GAZ_EOF);
	memset(&st, 0, sizeof(st));
	assert_int_equal(gaz_rpc_stream_finish(s, &st), GAZ_ERPC);
	assert_int_equal(st.grpc, GAZ_GRPC_NOT_FOUND);
	gaz_rpc_stream_free(s);

	/* Freed while idle, its status never asked for. */
	gaz_rpc_stream_free(lazy_bidi_answered());
}

static void test_error_status(void **state)
{
	Protocol__ReadResponse *r;
	struct gaz_status st;
	struct gaz_rpc_stream *s;
	int64_t t0 = gaz_mono_ns();

	(void)state;
	assert_int_equal(unary(g_native, P("Fail"), "x/y", 0, &r, gaz_deadline_in(10000), NULL,
			       &st), GAZ_ERPC);
	assert_null(r);
	assert_int_equal(st.code, GAZ_ERPC);
	assert_int_equal(st.grpc, GAZ_GRPC_NOT_FOUND);
	assert_string_equal(st.msg, "no such journal: x/y");

	/* A streaming call rejected at once (trailers-only, pitfall P2). */
	s = open_stream(g_oneport, P("Fail"));
	assert_int_equal(stream_send_off(s, 1), 0);
	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), GAZ_EOF);
	memset(&st, 0, sizeof(st));
	assert_int_equal(gaz_rpc_stream_finish(s, &st), GAZ_ERPC);
	assert_int_equal(st.grpc, GAZ_GRPC_NOT_FOUND);
	assert_string_equal(st.msg, "no such journal: ");
	gaz_rpc_stream_free(s);
	assert_true(ms_since(t0) < 5000);
}

/* The finish observer sees every finished call once, with the method's
 * arg, the code sent and the outcome its handler recorded; unknown
 * methods are not reported. */
static void test_finish_observer(void **state)
{
	Protocol__ReadResponse *r;
	struct gaz_status st;
	int n = s_int(&S.finished);

	(void)state;
	assert_int_equal(unary(g_native, P("Outcome"), "a/b", 0, &r, gaz_deadline_in(10000), NULL,
			       &st), 0);
	free_resp(r);
	assert_true(s_await(&S.finished, n + 1));
	assert_int_equal(s_int(&S.fin_code), GAZ_GRPC_OK);
	assert_int_equal(s_int(&S.fin_outcome), 7);
	pthread_mutex_lock(&S.mu);
	void *arg = S.fin_arg;
	pthread_mutex_unlock(&S.mu);
	assert_ptr_equal(arg, &S);

	assert_int_equal(unary(g_oneport, P("Fail"), "x/y", 0, &r, gaz_deadline_in(10000), NULL,
			       &st), GAZ_ERPC);
	assert_true(s_await(&S.finished, n + 2));
	assert_int_equal(s_int(&S.fin_code), GAZ_GRPC_NOT_FOUND);
	assert_int_equal(s_int(&S.fin_outcome), 0);

	assert_int_equal(unary(g_native, "/test.T/Nope", "", 0, &r, gaz_deadline_in(10000), NULL,
			       &st), GAZ_ERPC);
	assert_int_equal(unary(g_native, P("Echo"), "a/b", 1, &r, gaz_deadline_in(10000), NULL,
			       &st), 0);
	free_resp(r);
	assert_true(s_await(&S.finished, n + 3));
	assert_int_equal(s_int(&S.finished), n + 3); /* Nope was not reported */
	assert_int_equal(s_int(&S.fin_outcome), 0);
	/* Not after start. */
	assert_int_equal(gaz_rpc_server_on_finish(g_srv, NULL), GAZ_EINVAL);
}

/* go-grpc-prometheus's server families, from the calls above and these. */
static void test_server_metrics(void **state)
{
	struct gaz_rpc_stream *s = open_stream(g_native, P("Stream2"));
	Protocol__ReadResponse *r;
	struct gaz_status st = {0};
	char *text = NULL;
	size_t len = 0;

	(void)state;
	assert_int_equal(stream_send_off(s, 3), 0);
	assert_int_equal(gaz_rpc_stream_close_send(s), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), 0);
		free_resp(r);
	}
	end_ok(s);
	assert_int_equal(unary(g_native, P("Fail"), "x/y", 0, &r, gaz_deadline_in(10000), NULL,
			       &st), GAZ_ERPC);
	assert_int_equal(gaz_metrics_render(NULL, &text, &len, &st), 0);
	assert_non_null(strstr(text, "grpc_server_started_total{grpc_type=\"server_stream\","
				     "grpc_service=\"test.T\",grpc_method=\"Stream2\"} 1\n"));
	assert_non_null(strstr(text, "grpc_server_msg_received_total{grpc_type=\"server_stream\","
				     "grpc_service=\"test.T\",grpc_method=\"Stream2\"} 1\n"));
	assert_non_null(strstr(text, "grpc_server_msg_sent_total{grpc_type=\"server_stream\","
				     "grpc_service=\"test.T\",grpc_method=\"Stream2\"} 3\n"));
	assert_non_null(strstr(text, "grpc_server_handled_total{grpc_type=\"server_stream\","
				     "grpc_service=\"test.T\",grpc_method=\"Stream2\",grpc_code=\"OK\"} 1\n"));
	assert_non_null(strstr(text, "grpc_server_handled_total{grpc_type=\"unary\",grpc_service=\"test.T\","
				     "grpc_method=\"Fail\",grpc_code=\"NotFound\"}"));
	assert_non_null(strstr(text, "grpc_server_handling_seconds_count{grpc_type=\"server_stream\","
				     "grpc_service=\"test.T\",grpc_method=\"Stream2\"} 1\n"));
	assert_null(strstr(text, "grpc_method=\"Nope\"")); /* unknown methods are not counted */
	free(text);
}

static void test_unknown_method(void **state)
{
	struct gaz_rpc_channel *chs[] = {g_native, g_oneport};
	Protocol__ReadResponse *r;
	struct gaz_status st;

	(void)state;
	for (int i = 0; i < 2; i++) {
		int64_t t0 = gaz_mono_ns();
		assert_int_equal(unary(chs[i], "/test.T/Nope", "", 0, &r, gaz_deadline_in(10000),
				       NULL, &st), GAZ_ERPC);
		assert_int_equal(st.grpc, GAZ_GRPC_UNIMPLEMENTED);
		assert_non_null(strstr(st.msg, "/test.T/Nope"));
		assert_true(ms_since(t0) < 3000); /* answered, not timed out (P1) */
	}
}

static void test_oversized(void **state)
{
	size_t n = MAX_RECV + 1024;
	char *big = malloc(n + 1);
	Protocol__ReadResponse *r;
	struct gaz_status st;
	struct gaz_rpc_channel_opts o = {.max_recv_bytes = 1024};
	struct gaz_rpc_channel *small;

	(void)state;
	memset(big, 'j', n);
	big[n] = '\0';
	assert_int_equal(unary(g_oneport, P("Echo"), big, 0, &r, gaz_deadline_in(10000), NULL,
			       &st), GAZ_ERPC);
	assert_int_equal(st.grpc, GAZ_GRPC_RESOURCE_EXHAUSTED);
	/* Just under the server's limit passes. */
	big[MAX_RECV - 64] = '\0';
	assert_int_equal(unary(g_oneport, P("Echo"), big, 0, &r, gaz_deadline_in(10000), NULL,
			       &st), 0);
	assert_int_equal(strlen(r->fragment_url), MAX_RECV - 64);
	free_resp(r);
	/* The client's own limit applies to responses. */
	{
		char t[64];
		snprintf(t, sizeof(t), "127.0.0.1:%d", g_port_native);
		small = gaz_rpc_channel_new(t, &o);
	}
	big[4096] = '\0';
	assert_int_equal(unary(small, P("Echo"), big, 0, &r, gaz_deadline_in(10000), NULL, &st),
			 GAZ_ERPC);
	assert_int_equal(st.grpc, GAZ_GRPC_RESOURCE_EXHAUSTED);
	gaz_rpc_channel_free(small);
	free(big);
}

static void test_client_cancel(void **state)
{
	struct gaz_rpc_stream *s;
	struct gaz_status st = {0};

	(void)state;
	s_reset();
	s = open_stream(g_oneport, P("Park"));
	assert_int_equal(stream_send_off(s, 1), 0);
	assert_true(s_await(&S.waiting, 1));
	gaz_rpc_stream_cancel(s);
	assert_int_equal(gaz_rpc_stream_finish(s, &st), GAZ_ERPC);
	assert_int_equal(st.grpc, GAZ_GRPC_CANCELLED);
	gaz_rpc_stream_free(s);
	assert_true(s_await(&S.nrc, 3));
	assert_int_equal(s_int(&S.rc[0]), GAZ_ECANCELLED); /* gaz_rpc_wait */
	assert_int_equal(s_int(&S.rc[1]), 1);              /* gaz_rpc_cancelled */
	assert_int_equal(s_int(&S.rc[2]), GAZ_ECANCELLED); /* gaz_rpc_finish */
}

/* waker_main wakes the call h_wake publishes, from another thread. */
static void *waker_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&S.mu);
	if (s_wait_for(&S.waiting, 1) && S.published)
		gaz_rpc_wake(S.published);
	pthread_mutex_unlock(&S.mu);
	return NULL;
}

/* A client that cancels a client stream without half-closing must never
 * look like EOF to the handler (an Append would commit). */
static void test_cancel_is_not_eof(void **state)
{
	struct gaz_status st;

	(void)state;
	for (int i = 0; i < 20; i++) {
		struct gaz_rpc_stream *s = open_stream(i % 2 ? g_native : g_oneport, P("Sum"));
		s_reset();
		assert_int_equal(stream_send_off(s, i), 0);
		/* Cancel once the server has the stream: a cancel that overtakes
		 * the stream's headers leaves the server nothing to run. */
		assert_true(s_await(&S.received, 1));
		gaz_rpc_stream_cancel(s);
		memset(&st, 0, sizeof(st));
		assert_int_equal(gaz_rpc_stream_finish(s, &st), GAZ_ERPC);
		assert_int_equal(st.grpc, GAZ_GRPC_CANCELLED);
		gaz_rpc_stream_free(s);
		assert_true(s_await(&S.ended, 1));
		assert_int_equal(s_int(&S.end_rc[0]), GAZ_ECANCELLED);
	}
}

/* The fast path looks at a request's end on the poller, as soon as the
 * receive completes: a client that resets the stream after its last
 * message (an append cancelled after its commit intent) must not read as
 * a half-close there either, however early the poller looks; a client
 * that half-closes must. */
static void test_fast_path_end(void **state)
{
	(void)state;
	for (int i = 0; i < 40; i++) {
		struct gaz_rpc_channel *ch = i % 2 ? g_native : g_oneport;
		struct gaz_rpc_stream *s = open_stream(ch, P("SumFast"));
		bool reset = i % 4 >= 2;
		Protocol__ReadResponse *r;
		struct gaz_status st = {0};

		s_reset();
		assert_int_equal(stream_send_off(s, 1), 0);
		assert_int_equal(stream_send_off(s, 2), 0);
		if (reset) {
			/* Answered on the same connection after the two
			 * messages: the server has the stream and both. */
			assert_int_equal(unary(ch, P("Echo"), "x", 0, &r, gaz_deadline_in(10000), NULL,
					       &st),
					 0);
			free_resp(r);
			gaz_rpc_stream_cancel(s);
			assert_int_equal(gaz_rpc_stream_finish(s, &st), GAZ_ERPC);
			gaz_rpc_stream_free(s);
		} else {
			assert_int_equal(gaz_rpc_stream_close_send(s), 0);
			assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), 0);
			assert_int_equal(r->offset, 3);
			free_resp(r);
			end_ok(s);
		}
		assert_true(s_await(&S.ended, 1));
		assert_int_equal(s_int(&S.nrc), 1);
		assert_int_equal(s_int(&S.rc[0]), reset ? -1 : 2);
		assert_int_equal(s_int(&S.end_rc[0]), reset ? GAZ_ECANCELLED : GAZ_EOF);
	}
}

static void test_wake_and_deadline(void **state)
{
	Protocol__ReadResponse *r;
	struct gaz_status st;
	pthread_t t;
	int64_t t0 = gaz_mono_ns();

	(void)state;
	s_reset();
	assert_int_equal(pthread_create(&t, NULL, waker_main, NULL), 0);
	assert_int_equal(unary(g_native, P("Wake"), "", 0, &r, gaz_deadline_in(20000), NULL, &st),
			 0);
	pthread_join(t, NULL);
	assert_int_equal(s_int(&S.nrc), 3);
	assert_int_equal(s_int(&S.rc[0]), 0);             /* wake before wait not lost */
	assert_int_equal(s_int(&S.rc[1]), GAZ_ETIMEDOUT); /* deadline */
	assert_int_equal(s_int(&S.rc[2]), 0);             /* woken by the other thread */
	assert_true(r->write_head >= 100 && r->write_head < 3000);
	assert_true(ms_since(t0) < 8000); /* not the 10 s wait */
	free_resp(r);
}

static void *local_waker_main(void *arg)
{
	usleep(150 * 1000);
	gaz_rpc_wake(arg);
	return NULL;
}

/* A local call (the broker's pulse) waits on its own condition variable:
 * a wait with a deadline ends at it, and another thread's wake ends it
 * sooner, and the wait holds no CPU meanwhile (a condition variable on the
 * wrong clock made every timed wait of a pulse spin). */
static void test_local_call_waits(void **state)
{
	Protocol__ReadRequest req = PROTOCOL__READ_REQUEST__INIT;
	const ProtobufCMessage *reqs[] = {&req.base};
	struct gaz_rpc_call *call = gaz_rpc_local_new(reqs, 1, gaz_deadline_in(60000));
	struct timespec c0, c1;
	pthread_t t;
	int64_t t0 = gaz_mono_ns();

	(void)state;
	assert_non_null(call);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	assert_int_equal(gaz_rpc_wait(call, gaz_deadline_in(200)), GAZ_ETIMEDOUT);
	assert_true(ms_since(t0) >= 200);
	assert_int_equal(pthread_create(&t, NULL, local_waker_main, call), 0);
	assert_int_equal(gaz_rpc_wait(call, gaz_deadline_in(20000)), 0);
	pthread_join(t, NULL);
	assert_true(ms_since(t0) < 10000);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	int64_t cpu_ms = (c1.tv_sec - c0.tv_sec) * 1000 + (c1.tv_nsec - c0.tv_nsec) / 1000000;
	assert_true(cpu_ms < 100); /* ~350 ms of waiting; a spinning wait takes it all */
	gaz_rpc_local_free(call);
}

static void test_stream_recv_timeout(void **state)
{
	struct gaz_rpc_stream *s = open_stream(g_native, P("Slow"));
	Protocol__ReadResponse *r;
	int64_t t0;

	(void)state;
	assert_int_equal(stream_send_off(s, 400), 0);
	assert_int_equal(gaz_rpc_stream_close_send(s), 0);
	t0 = gaz_mono_ns();
	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(50)), GAZ_ETIMEDOUT);
	assert_null(r);
	assert_true(ms_since(t0) >= 50);
	/* Again: the first receive is still pending and must be reused. */
	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(50)), GAZ_ETIMEDOUT);
	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), 0);
	assert_int_equal(r->offset, 7);
	assert_true(ms_since(t0) >= 300);
	free_resp(r);
	end_ok(s);

	/* Freeing with a receive still pending cancels and cleans up. */
	s = open_stream(g_native, P("Slow"));
	assert_int_equal(stream_send_off(s, 5000), 0);
	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(20)), GAZ_ETIMEDOUT);
	gaz_rpc_stream_free(s);
}

static void test_malformed_request(void **state)
{
	Protocol__ReadResponse *r;
	struct gaz_status st;

	(void)state;
	s_reset();
	/* Field 2 of ReadResponse is a message: these bytes are no message. */
	assert_int_equal(unary(g_oneport, P("Proto"), "\xff\xff\xff\xff", 0, &r,
			       gaz_deadline_in(10000), NULL, &st), GAZ_ERPC);
	assert_int_equal(st.grpc, GAZ_GRPC_INVALID_ARGUMENT);
	assert_string_equal(st.msg, "malformed request");
	assert_true(s_await(&S.nrc, 1));
	assert_int_equal(s_int(&S.rc[0]), GAZ_EPROTO);
}

static int tcp_connect(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	struct timeval tv = {.tv_sec = 5};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static size_t read_all(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	ssize_t r;

	while (n < cap - 1 && (r = recv(fd, buf + n, cap - 1 - n, 0)) > 0)
		n += (size_t)r;
	buf[n] = '\0';
	return n;
}

static void test_one_port_http(void **state)
{
	const char *req = "GET /x/y HTTP/1.1\r\nHost: t\r\n\r\n";
	char buf[1024];
	Protocol__ReadResponse *r;
	struct gaz_status st;
	int fd;

	(void)state;
	s_reset();
	fd = tcp_connect(g_port_one);
	assert_int_equal(send(fd, req, strlen(req), 0), (ssize_t)strlen(req));
	read_all(fd, buf, sizeof(buf));
	close(fd);
	assert_true(strncmp(buf, "HTTP/1.1 200 OK\r\n", 17) == 0);
	assert_non_null(strstr(buf, "\r\n\r\n/x/y"));
	pthread_mutex_lock(&S.mu);
	memcpy(buf, S.http_peer, sizeof(S.http_peer));
	pthread_mutex_unlock(&S.mu);
	assert_true(strncmp(buf, "ipv4:127.0.0.1:", 15) == 0);

	/* The port is taken: a second listener fails cleanly. */
	memset(&st, 0, sizeof(st));
	snprintf(buf, sizeof(buf), "127.0.0.1:%d", g_port_one);
	assert_null(gaz_rpc_listen(buf, g_srv, http_conn, NULL, NULL, &st));
	assert_int_equal(st.code, GAZ_EIO);

	/* A connection that closes before sending anything is dropped. */
	close(tcp_connect(g_port_one));
	/* gRPC on the same port still works. */
	assert_int_equal(unary(g_oneport, P("Echo"), "p", 5, &r, gaz_deadline_in(10000), NULL,
			       &st), 0);
	assert_int_equal(r->offset, 5);
	free_resp(r);
}

/* A preface in pieces is only peeked, then handed over whole (R1): grpc
 * answers with its SETTINGS frame. */
static void test_one_port_slow_preface(void **state)
{
	static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	const struct timespec pause = {.tv_nsec = 30 * GAZ_NS_PER_MS};
	unsigned char frame[9];
	size_t got = 0;
	ssize_t r;
	int fd = tcp_connect(g_port_one);

	(void)state;
	assert_int_equal(send(fd, preface, 1, 0), 1);
	nanosleep(&pause, NULL);
	assert_int_equal(send(fd, preface + 1, 10, 0), 10);
	nanosleep(&pause, NULL);
	assert_int_equal(send(fd, preface + 11, 13, 0), 13);
	while (got < sizeof(frame) && (r = recv(fd, frame + got, sizeof(frame) - got, 0)) > 0)
		got += (size_t)r;
	assert_int_equal(got, sizeof(frame));
	assert_int_equal(frame[3], 0x4); /* SETTINGS */
	close(fd);
}

/* A refused connection fails a wait for READY at once (it used to wait for
 * the whole deadline); a malformed port is refused with its reason. */
static void test_refused_and_bad_port(void **state)
{
	struct gaz_rpc_server *srv = gaz_rpc_server_new(NULL);
	struct gaz_rpc_channel *ch;
	enum gaz_rpc_conn_state last;
	struct gaz_status st = {0};
	char t[64];
	int port = 0;
	int64_t t0;

	(void)state;
	/* A port nothing listens on: one a server had, now closed. */
	assert_int_equal(gaz_rpc_server_start(srv, "127.0.0.1:0", &port), 0);
	gaz_rpc_server_free(srv);
	snprintf(t, sizeof(t), "http://127.0.0.1:%d", port);
	assert_non_null(ch = gaz_rpc_channel_new(t, NULL));
	t0 = gaz_mono_ns();
	assert_int_equal(gaz_rpc_channel_wait_ready(ch, gaz_deadline_in(5000), &last), GAZ_EUNAVAIL);
	assert_int_equal(last, GAZ_RPC_CONN_TRANSIENT_FAILURE);
	assert_true(ms_since(t0) < 2500);
	gaz_rpc_channel_free(ch);

	for (size_t i = 0; i < 4; i++) {
		static const char *const bad[] = {"http://127.0.0.1:99999", "http://h:0", "h:80x",
						  "http://[::1]:"};
		memset(&st, 0, sizeof(st));
		assert_null(gaz_rpc_channel_new(bad[i], NULL));
		assert_int_equal(gaz_rpc_target_check(bad[i], &st), GAZ_EINVAL);
		assert_non_null(strstr(st.msg, "invalid port"));
	}
	assert_int_equal(gaz_rpc_target_check("http://[::1]:8080", NULL), 0);
	assert_int_equal(gaz_rpc_target_check("http://host", NULL), 0);
	/* https:// is TLS (port 443 when none); its host and port are checked
	 * as http://'s. */
	assert_int_equal(gaz_rpc_target_check("https://host:1", NULL), 0);
	assert_int_equal(gaz_rpc_target_check("https://host", NULL), 0);
	memset(&st, 0, sizeof(st));
	assert_int_equal(gaz_rpc_target_check("https://", &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "no host after https://"));
	memset(&st, 0, sizeof(st));
	assert_int_equal(gaz_rpc_target_check("https://h:70000", &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "invalid port"));
}

/* reconnect_ms: a channel of `peer` kind is connected to a server, the
 * server goes away for `down_ms` while the channel keeps trying, then a
 * server comes back on the same port: how long until the channel is READY
 * again (grpc's back-off decides). */
static int64_t reconnect_ms(enum gaz_rpc_peer peer, int down_ms)
{
	struct gaz_rpc_channel_opts o = {.peer = peer};
	struct gaz_rpc_server *srv = gaz_rpc_server_new(NULL);
	struct gaz_rpc_channel *ch;
	char addr[64];
	int port = 0, again = 0;
	int64_t t0;

	assert_int_equal(gaz_rpc_server_start(srv, "127.0.0.1:0", &port), 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	assert_non_null(ch = gaz_rpc_channel_new(addr, &o));
	assert_int_equal(gaz_rpc_channel_wait_ready(ch, gaz_deadline_in(5000), NULL), 0);
	gaz_rpc_server_free(srv);
	t0 = gaz_deadline_in(down_ms);
	while (gaz_mono_ns() < t0) /* attempts fail; the back-off grows */
		(void)gaz_rpc_channel_wait_ready(ch, t0, NULL);
	srv = gaz_rpc_server_new(NULL);
	assert_int_equal(gaz_rpc_server_start(srv, addr, &again), 0);
	assert_int_equal(again, port);
	t0 = gaz_mono_ns();
	while (gaz_rpc_channel_wait_ready(ch, gaz_deadline_in(30000), NULL) != 0)
		assert_true(ms_since(t0) < 30000);
	t0 = ms_since(t0);
	gaz_rpc_channel_free(ch);
	gaz_rpc_server_free(srv);
	return t0;
}

/* A restarted broker peer is used again within about a second however long
 * it was down (back-off capped at 0.5 s, as Gazette's peer connections);
 * grpc's default grows to seconds within these 6 s (1, 1.6, 2.56 s ...). */
static void test_peer_reconnect_backoff(void **state)
{
	int64_t ms = reconnect_ms(GAZ_RPC_PEER_BROKER, 6000);

	(void)state;
	print_message("broker peer reconnected %lld ms after its restart\n", (long long)ms);
	assert_true(ms < 1500);
}

static void test_unix_listener(void **state)
{
	struct gaz_status st = {0};
	struct gaz_rpc_listener *l;
	struct gaz_rpc_channel *ch;
	Protocol__ReadResponse *r;
	char addr[128], target[128], path[96];
	struct stat sb;
	int port = -1;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/gaz-rpc-test-%d.sock", (int)getpid());
	snprintf(addr, sizeof(addr), "unix://%s", path);
	snprintf(target, sizeof(target), "unix://localhost%s", path);
	l = gaz_rpc_listen(addr, g_srv, http_conn, NULL, &port, &st);
	assert_non_null(l);
	assert_int_equal(port, 0);
	ch = gaz_rpc_channel_new(target, NULL);
	assert_non_null(ch);
	assert_int_equal(unary(ch, P("Md"), "", 0, &r, gaz_deadline_in(10000), NULL, &st), 0);
	assert_true(strncmp(r->fragment_url, "-|unix:", 7) == 0);
	free_resp(r);
	gaz_rpc_channel_free(ch);
	gaz_rpc_listener_close(l);
	assert_int_equal(stat(path, &sb), -1); /* the socket file is gone */

	assert_null(gaz_rpc_listen("unix://nohost", g_srv, NULL, NULL, &port, &st));
	assert_null(gaz_rpc_channel_new("unix:relative", NULL));
	assert_null(gaz_rpc_channel_new("", NULL));
}

static void test_big_client_stream(void **state)
{
	Protocol__ReadResponse msg = PROTOCOL__READ_RESPONSE__INIT, *r;
	struct gaz_status st = {0};
	struct gaz_rpc_stream *s;
	uint8_t *content = malloc(BIG_MSG);

	(void)state;
	s = gaz_rpc_stream_open(g_oneport, P("Bytes"), gaz_deadline_in(120000), true, NULL, &st);
	assert_non_null(s);
	memset(content, 0x5a, BIG_MSG);
	msg.content.data = content;
	msg.content.len = BIG_MSG;
	for (int i = 0; i < BIG_COUNT; i++) {
		msg.offset = i;
		content[0] = (uint8_t)i;
		content[BIG_MSG - 1] = (uint8_t)~i;
		assert_int_equal(gaz_rpc_stream_send(s, &msg.base), 0);
	}
	assert_int_equal(gaz_rpc_stream_close_send(s), 0);
	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(120000)), 0);
	assert_int_equal(r->offset, (int64_t)BIG_MSG * BIG_COUNT);
	assert_int_equal(r->write_head, BIG_COUNT);
	assert_string_equal(r->fragment_url, "");
	free_resp(r);
	assert_int_equal(gaz_rpc_stream_finish(s, &st), 0);
	gaz_rpc_stream_free(s);
	free(content);
}

/* A stream that queues its sends: messages of mixed sizes (past the
 * queue's count and byte bounds) arrive whole and in order, the half-close
 * returns at once and still ends the request after the last message. */
static void test_queued_sends(void **state)
{
	Protocol__ReadResponse msg = PROTOCOL__READ_RESPONSE__INIT, *r;
	struct gaz_status st = {0};
	struct gaz_rpc_stream *s;
	uint8_t *content = malloc(BIG_MSG);
	int64_t total = 0;

	(void)state;
	s = gaz_rpc_stream_open(g_oneport, P("Bytes"), gaz_deadline_in(120000), true, NULL, &st);
	assert_non_null(s);
	gaz_rpc_stream_queue_sends(s);
	memset(content, 0x33, BIG_MSG);
	msg.content.data = content;
	for (int i = 0; i < 300; i++) {
		msg.content.len = i % 25 == 0 ? (size_t)BIG_MSG * 3 / 4 : 100 + (size_t)i;
		msg.offset = i;
		content[0] = (uint8_t)i;
		content[msg.content.len - 1] = (uint8_t)~i;
		assert_int_equal(gaz_rpc_stream_send(s, &msg.base), 0);
		content[msg.content.len - 1] = 0x33; /* the stream packed its own copy */
		total += (int64_t)msg.content.len;
	}
	assert_int_equal(gaz_rpc_stream_close_send(s), 0);
	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(120000)), 0);
	assert_int_equal(r->write_head, 300);
	assert_int_equal(r->offset, total);
	assert_string_equal(r->fragment_url, ""); /* every message whole, in order */
	free_resp(r);
	assert_int_equal(gaz_rpc_stream_finish(s, &st), 0);
	gaz_rpc_stream_free(s);
	free(content);
}

/* Freeing a cancelled stream with sends still queued drops them (no leak,
 * no hang), and sends after the failure report it. */
static void test_queued_sends_cancelled(void **state)
{
	Protocol__ReadResponse msg = PROTOCOL__READ_RESPONSE__INIT;
	struct gaz_status st = {0};
	struct gaz_rpc_stream *s;
	uint8_t *content = calloc(1, BIG_MSG);
	int rc = 0;

	(void)state;
	s = gaz_rpc_stream_open(g_oneport, P("Bytes"), gaz_deadline_in(120000), true, NULL, &st);
	assert_non_null(s);
	gaz_rpc_stream_queue_sends(s);
	msg.content.data = content;
	msg.content.len = BIG_MSG / 4;
	for (int i = 0; i < 6; i++) {
		msg.offset = i;
		assert_int_equal(gaz_rpc_stream_send(s, &msg.base), 0);
	}
	gaz_rpc_stream_cancel(s);
	/* The cancellation fails the send in flight; a later send or the
	 * half-close says so (bounded: each send waits at most for the queue). */
	for (int i = 0; i < 1000 && rc == 0; i++) {
		rc = gaz_rpc_stream_send(s, &msg.base);
		if (rc == 0)
			usleep(1000);
	}
	assert_int_equal(rc, GAZ_ERPC);
	assert_int_equal(gaz_rpc_stream_close_send(s), GAZ_ERPC);
	assert_int_not_equal(gaz_rpc_stream_finish(s, &st), 0);
	gaz_rpc_stream_free(s);
	free(content);
}

static int recv_last_resp(struct gaz_rpc_stream *s, Protocol__ReadResponse **r, int64_t dl)
{
	return gaz_rpc_stream_recv_last(s, &protocol__read_response__descriptor,
					(ProtobufCMessage **)r, dl);
}

/* A receive through the end returns the one response once the stream has
 * ended, with its status already in; later receives say EOF. */
static void test_recv_last(void **state)
{
	struct gaz_rpc_stream *s = open_stream(g_native, P("Sum"));
	Protocol__ReadResponse *r;

	(void)state;
	s_reset();
	gaz_rpc_stream_queue_sends(s);
	for (int i = 1; i <= 10; i++)
		assert_int_equal(stream_send_off(s, i), 0);
	assert_int_equal(gaz_rpc_stream_close_send(s), 0);
	assert_int_equal(recv_last_resp(s, &r, gaz_deadline_in(10000)), 0);
	assert_int_equal(r->offset, 55);
	free_resp(r);
	assert_int_equal(recv_last_resp(s, &r, gaz_deadline_in(10000)), GAZ_EOF);
	assert_null(r);
	end_ok(s);
}

/* A stream ended by an error status has no message: EOF, and the status
 * is the error's. */
static void test_recv_last_error(void **state)
{
	struct gaz_rpc_stream *s = open_stream(g_oneport, P("Fail"));
	struct gaz_status st = {0};
	Protocol__ReadResponse *r;

	(void)state;
	assert_int_equal(stream_send_off(s, 1), 0);
	assert_int_equal(recv_last_resp(s, &r, gaz_deadline_in(10000)), GAZ_EOF);
	assert_null(r);
	assert_int_equal(gaz_rpc_stream_finish(s, &st), GAZ_ERPC);
	assert_int_equal(st.grpc, GAZ_GRPC_NOT_FOUND);
	gaz_rpc_stream_free(s);
}

/* A response followed by an error status: the message is returned and
 * the status, already in, is the error (the caller must check it). */
static void test_recv_last_then_error(void **state)
{
	struct gaz_rpc_stream *s = open_stream(g_native, P("Then"));
	Protocol__ReadRequest req = PROTOCOL__READ_REQUEST__INIT;
	struct gaz_status st = {0};
	Protocol__ReadResponse *r;

	(void)state;
	req.journal = "fail";
	assert_int_equal(gaz_rpc_stream_send(s, &req.base), 0);
	assert_int_equal(recv_last_resp(s, &r, gaz_deadline_in(10000)), 0);
	assert_int_equal(r->offset, 9);
	free_resp(r);
	assert_int_equal(gaz_rpc_stream_finish(s, &st), GAZ_ERPC);
	assert_int_equal(st.grpc, GAZ_GRPC_NOT_FOUND);
	assert_string_equal(st.msg, "gone after the response");
	gaz_rpc_stream_free(s);
}

/* Freeing a stream whose message is held while its end is awaited drops
 * the message (no leak under LSan) and does not wait for the server. */
static void test_recv_last_free_held(void **state)
{
	struct gaz_rpc_stream *s = open_stream(g_native, P("Then"));
	Protocol__ReadRequest req = PROTOCOL__READ_REQUEST__INIT;
	Protocol__ReadResponse *r;
	int64_t t0 = gaz_mono_ns();

	(void)state;
	req.journal = "ok";
	req.offset = 5000;
	assert_int_equal(gaz_rpc_stream_send(s, &req.base), 0);
	/* The message comes at once, the end 5 s later: the receive times
	 * out with the message held. */
	assert_int_equal(recv_last_resp(s, &r, gaz_deadline_in(300)), GAZ_ETIMEDOUT);
	assert_null(r);
	gaz_rpc_stream_free(s);
	assert_true(ms_since(t0) < 3000);
}

/* A second message fails the receive (as grpc-go's CloseAndRecv), and
 * three do too (the receive stops at the second). */
static void test_recv_last_extra(void **state)
{
	for (int n = 2; n <= 3; n++) {
		struct gaz_rpc_stream *s = open_stream(g_native, P("Stream"));
		Protocol__ReadResponse *r;

		(void)state;
		assert_int_equal(stream_send_off(s, n), 0);
		assert_int_equal(recv_last_resp(s, &r, gaz_deadline_in(10000)), GAZ_EPROTO);
		assert_null(r);
		assert_int_equal(recv_last_resp(s, &r, gaz_deadline_in(10000)), GAZ_EOF);
		gaz_rpc_stream_free(s);
	}
}

/* A deadline passing leaves the receive in flight: the next call gets the
 * message; one that completed before (an earlier plain receive timed out
 * and completed unread) is taken over. */
static void test_recv_last_timeout(void **state)
{
	struct gaz_rpc_stream *s = open_stream(g_native, P("Slow"));
	struct gaz_status st = {0};
	Protocol__ReadResponse *r;
	int64_t t0 = gaz_mono_ns();

	(void)state;
	assert_int_equal(stream_send_off(s, 300), 0);
	assert_int_equal(gaz_rpc_stream_close_send(s), 0);
	assert_int_equal(recv_last_resp(s, &r, gaz_deadline_in(50)), GAZ_ETIMEDOUT);
	assert_null(r);
	assert_int_equal(recv_last_resp(s, &r, gaz_deadline_in(10000)), 0);
	assert_int_equal(r->offset, 7);
	assert_true(ms_since(t0) >= 300);
	free_resp(r);
	assert_int_equal(gaz_rpc_stream_finish(s, &st), 0);
	gaz_rpc_stream_free(s);

	s = open_stream(g_native, P("Slow"));
	assert_int_equal(stream_send_off(s, 100), 0);
	assert_int_equal(gaz_rpc_stream_close_send(s), 0);
	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(20)), GAZ_ETIMEDOUT);
	usleep(400 * 1000); /* the plain receive completes, unread */
	assert_int_equal(recv_last_resp(s, &r, gaz_deadline_in(10000)), 0);
	assert_int_equal(r->offset, 7);
	free_resp(r);
	assert_int_equal(gaz_rpc_stream_finish(s, &st), 0);
	gaz_rpc_stream_free(s);

	/* Freeing with the receive in flight cancels and cleans up. */
	s = open_stream(g_native, P("Slow"));
	assert_int_equal(stream_send_off(s, 5000), 0);
	assert_int_equal(recv_last_resp(s, &r, gaz_deadline_in(20)), GAZ_ETIMEDOUT);
	gaz_rpc_stream_free(s);
}

struct pcall {
	struct gaz_rpc_channel *ch;
	int rc;
};

static void *pcall_main(void *arg)
{
	struct pcall *p = arg;
	Protocol__ReadResponse *r;
	struct gaz_status st;

	p->rc = unary(p->ch, P("Sleep"), "", 0, &r, gaz_deadline_in(20000), NULL, &st);
	free_resp(r);
	return NULL;
}

static void test_handler_pool(void **state)
{
	struct gaz_rpc_server_opts o = {.max_handlers = 2};
	struct gaz_rpc_server *srv = gaz_rpc_server_new(&o);
	struct gaz_rpc_channel *ch;
	struct pcall pc[6];
	pthread_t t[6];
	Protocol__ReadResponse *r;
	struct gaz_status st;
	char target[64];
	int port = 0, ntids = 0, k;
	int64_t tids[30];

	(void)state;
	/* Sequential calls run on a few reused threads, not one per call
	 * (Linux thread ids are not reused this soon). */
	for (int i = 0; i < 30; i++) {
		assert_int_equal(unary(g_native, P("Tid"), "", 0, &r, gaz_deadline_in(10000), NULL,
				       &st), 0);
		for (k = 0; k < ntids && tids[k] != r->offset; k++)
			;
		if (k == ntids)
			tids[ntids++] = r->offset;
		free_resp(r);
	}
	assert_true(ntids <= 5);

	/* More calls than max_handlers: they queue and all complete. */
	s_reset();
	register_all(srv);
	{ /* a failed start leaves the server unstarted and freeable */
		struct gaz_rpc_server *bad = gaz_rpc_server_new(NULL);
		assert_int_equal(gaz_rpc_server_start(bad, "unix:/nonexistent/dir/s", NULL), GAZ_EIO);
		gaz_rpc_server_free(bad);
	}
	assert_int_equal(gaz_rpc_server_start(srv, "127.0.0.1:0", &port), 0);
	assert_int_equal(gaz_rpc_server_register(srv, P("Late"), h_echo, NULL), GAZ_EINVAL);
	snprintf(target, sizeof(target), "127.0.0.1:%d", port);
	ch = gaz_rpc_channel_new(target, NULL);
	for (int i = 0; i < 6; i++) {
		pc[i].ch = ch;
		assert_int_equal(pthread_create(&t[i], NULL, pcall_main, &pc[i]), 0);
	}
	for (int i = 0; i < 6; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(pc[i].rc, 0);
	}
	assert_true(s_int(&S.max_running) >= 1 && s_int(&S.max_running) <= 2);
	gaz_rpc_channel_free(ch);
	gaz_rpc_server_free(srv);
}

/* park_open opens stream `id` to h_parked, parked with `deadline_ms`. */
static struct gaz_rpc_stream *park_open(struct gaz_rpc_channel *ch, int id, int64_t deadline_ms)
{
	Protocol__ReadRequest req = PROTOCOL__READ_REQUEST__INIT;
	struct gaz_rpc_stream *s = open_stream(ch, P("Parked"));
	char name[16];

	snprintf(name, sizeof(name), "%d", id);
	req.journal = name;
	req.offset = deadline_ms;
	assert_int_equal(gaz_rpc_stream_send(s, &req.base), 0);
	return s;
}

/* recv_parked reads a parked call's one response and checks why it ran. */
static int64_t recv_parked(struct gaz_rpc_stream *s, int64_t why)
{
	Protocol__ReadResponse *r;
	int64_t ms;

	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), 0);
	assert_int_equal(r->write_head, why);
	ms = r->offset;
	free_resp(r);
	end_ok(s);
	return ms;
}

/* drain_free reads what is left of `s` to its end, whatever its status
 * (a shutdown ended it), and frees it. */
static void drain_free(struct gaz_rpc_stream *s)
{
	struct gaz_status st = {0};
	Protocol__ReadResponse *r;

	while (stream_recv_resp(s, &r, gaz_deadline_in(10000)) == 0)
		free_resp(r);
	gaz_rpc_stream_finish(s, &st);
	gaz_rpc_stream_free(s);
}

/* pool_of_two starts a server with every handler registered and two
 * handler threads at most, and returns a channel to it in *ch. */
static struct gaz_rpc_server *pool_of_two(struct gaz_rpc_channel **ch)
{
	struct gaz_rpc_server_opts o = {.max_handlers = 2};
	struct gaz_rpc_server *srv = gaz_rpc_server_new(&o);
	char target[64];
	int port = 0;

	register_all(srv);
	assert_int_equal(gaz_rpc_server_start(srv, "127.0.0.1:0", &port), 0);
	snprintf(target, sizeof(target), "127.0.0.1:%d", port);
	*ch = gaz_rpc_channel_new(target, NULL);
	return srv;
}

/* Parked calls hold no handler thread: with a pool of two, a dozen parked
 * streams leave unary calls answered; each parked call resumes once, on
 * its wake, its deadline or its cancellation, and a shutdown resumes and
 * ends those still parked. */
static void test_parked_calls(void **state)
{
	struct gaz_rpc_stream *s[PARKERS];
	struct gaz_rpc_channel *ch;
	struct gaz_rpc_server *srv;
	struct gaz_status st;
	Protocol__ReadResponse *r;
	int n = PARKERS - 2;

	(void)state;
	s_reset();
	pthread_mutex_lock(&S.mu);
	memset(&PK, 0, sizeof(PK));
	pthread_mutex_unlock(&S.mu);
	srv = pool_of_two(&ch);
	for (int i = 0; i < n; i++)
		s[i] = park_open(ch, i, 0);
	assert_true(s_await(&S.waiting, n));
	for (int i = 0; i < 4; i++) { /* the pool of two is free */
		assert_int_equal(unary(ch, P("Echo"), "x", 0, &r, gaz_deadline_in(5000), NULL, &st), 0);
		free_resp(r);
	}
	/* Woken: the first half, from this thread. */
	pthread_mutex_lock(&S.mu);
	for (int i = 0; i < n / 2; i++)
		if (PK.calls[i])
			gaz_rpc_wake(PK.calls[i]);
	pthread_mutex_unlock(&S.mu);
	for (int i = 0; i < n / 2; i++)
		recv_parked(s[i], 1);
	/* Cancelled by its client. */
	gaz_rpc_stream_cancel(s[n / 2]);
	memset(&st, 0, sizeof(st));
	assert_int_equal(gaz_rpc_stream_finish(s[n / 2], &st), GAZ_ERPC);
	gaz_rpc_stream_free(s[n / 2]);
	assert_true(s_await(&PK.resumed, n / 2 + 1));
	/* Due: parked with a 150 ms deadline. */
	s[n] = park_open(ch, n, 150);
	{
		int64_t ms = recv_parked(s[n], 2);
		assert_true(ms >= 150 && ms < 5000);
	}
	/* Shutdown resumes the rest, cancelled, and waits for them: also one
	 * due only in a minute, which the timer does not wait for. */
	s[n + 1] = park_open(ch, n + 1, 60000);
	assert_true(s_await(&S.waiting, n + 2));
	{
		int64_t t0 = gaz_mono_ns();
		gaz_rpc_server_shutdown(srv, 0);
		assert_true(ms_since(t0) < 5000);
	}
	assert_int_equal(s_int(&PK.resumed), n + 2);
	for (int i = n / 2 + 1; i < n + 2; i++)
		if (i != n)
			drain_free(s[i]);
	gaz_rpc_channel_free(ch);
	gaz_rpc_server_free(srv);
}

/* refused_open opens a stream to h_parked on `ch` and expects it refused
 * RESOURCE_EXHAUSTED at once, naming `bound`. */
static void refused_open(struct gaz_rpc_channel *ch, const char *bound)
{
	int64_t t0 = gaz_mono_ns();
	struct gaz_rpc_stream *s = park_open(ch, PARKERS - 1, 0);
	struct gaz_status st = {0};
	Protocol__ReadResponse *r = NULL;

	assert_int_equal(stream_recv_resp(s, &r, gaz_deadline_in(10000)), GAZ_EOF);
	assert_null(r);
	assert_int_equal(gaz_rpc_stream_finish(s, &st), GAZ_ERPC);
	assert_int_equal(st.grpc, GAZ_GRPC_RESOURCE_EXHAUSTED);
	assert_non_null(strstr(st.msg, bound));
	assert_true(ms_since(t0) < 3000);
	gaz_rpc_stream_free(s);
}

/* The bounds on open streams (max_streams 3, max_streams_per_conn 2)
 * count the calls of a GAZ_RPC_LIMITED method from accept to free,
 * parked ones included: past either bound a new one is refused
 * RESOURCE_EXHAUSTED at once, naming it, and never reaches its handler;
 * unlimited methods are still served; a stream that ends makes room on
 * its connection and in all. */
static void test_stream_limits(void **state)
{
	struct gaz_rpc_server_opts o = {.max_streams = 3, .max_streams_per_conn = 2};
	struct gaz_rpc_server *srv = gaz_rpc_server_new(&o);
	struct gaz_rpc_channel *a, *b, *c;
	struct gaz_rpc_stream *s[4];
	Protocol__ReadResponse *r;
	struct gaz_status st;
	char target[64];
	int port = 0;

	(void)state;
	s_reset();
	pthread_mutex_lock(&S.mu);
	memset(&PK, 0, sizeof(PK));
	pthread_mutex_unlock(&S.mu);
	assert_int_equal(gaz_rpc_server_register_flags(srv, P("Parked"), h_parked, NULL,
						       GAZ_RPC_SERVER_STREAMS | GAZ_RPC_LIMITED),
			 0);
	assert_int_equal(gaz_rpc_server_register(srv, P("Echo"), h_echo, NULL), 0);
	assert_int_equal(gaz_rpc_server_start(srv, "127.0.0.1:0", &port), 0);
	snprintf(target, sizeof(target), "127.0.0.1:%d", port);
	a = gaz_rpc_channel_new(target, NULL); /* a connection each */
	b = gaz_rpc_channel_new(target, NULL);
	c = gaz_rpc_channel_new(target, NULL);

	s[0] = park_open(a, 0, 0);
	s[1] = park_open(a, 1, 0);
	assert_true(s_await(&S.waiting, 2));
	refused_open(a, "this connection has its limit of concurrent streams open (2)");
	s[2] = park_open(b, 2, 0);
	assert_true(s_await(&S.waiting, 3));
	refused_open(c, "the server has its limit of concurrent streams open (3)");
	assert_int_equal(s_int(&S.waiting), 3); /* no refused one reached h_parked */
	assert_int_equal(unary(c, P("Echo"), "x", 0, &r, gaz_deadline_in(5000), NULL, &st), 0);
	free_resp(r);

	/* One of a's ends: room on a, and in all (once its call is freed,
	 * just after its status). */
	pthread_mutex_lock(&S.mu);
	gaz_rpc_wake(PK.calls[0]);
	pthread_mutex_unlock(&S.mu);
	recv_parked(s[0], 1);
	for (int i = 0;; i++) {
		s[3] = park_open(a, 3, 0);
		if (stream_recv_resp(s[3], &r, gaz_deadline_in(200)) == GAZ_ETIMEDOUT)
			break; /* parked */
		assert_null(r);
		memset(&st, 0, sizeof(st));
		assert_int_equal(gaz_rpc_stream_finish(s[3], &st), GAZ_ERPC);
		assert_int_equal(st.grpc, GAZ_GRPC_RESOURCE_EXHAUSTED);
		gaz_rpc_stream_free(s[3]);
		assert_true(i < 25);
	}
	assert_true(s_await(&S.waiting, 4));
	refused_open(c, "the server has its limit of concurrent streams open (3)");

	gaz_rpc_server_shutdown(srv, 0); /* resumes and ends the parked ones */
	for (int i = 1; i < 4; i++)
		drain_free(s[i]);
	gaz_rpc_channel_free(a);
	gaz_rpc_channel_free(b);
	gaz_rpc_channel_free(c);
	gaz_rpc_server_free(srv);
}

/* Streams parked while they receive (gaz_rpc_park_each), more than the
 * pool's two threads: every message is answered in order from the pollers
 * while unary calls still find a thread; a wake resumes a stream, which
 * parks again and goes on; a callback's error, a half-close and a
 * client's cancellation each end their stream once, with their code. */
static void test_parked_each(void **state)
{
	struct gaz_rpc_stream *s[EACH_PARKERS];
	struct gaz_rpc_channel *ch;
	struct gaz_rpc_server *srv;
	struct gaz_status st;
	Protocol__ReadResponse *r;
	char name[16];
	int n = EACH_PARKERS;

	(void)state;
	pthread_mutex_lock(&S.mu);
	memset(&EP, 0, sizeof(EP));
	pthread_mutex_unlock(&S.mu);
	srv = pool_of_two(&ch);
	for (int i = 0; i < n; i++) {
		Protocol__ReadRequest req = PROTOCOL__READ_REQUEST__INIT;

		s[i] = open_stream(ch, P("EachParked"));
		snprintf(name, sizeof(name), "%d", i);
		req.journal = name;
		req.offset = 1000;
		assert_int_equal(gaz_rpc_stream_send(s[i], &req.base), 0);
		assert_int_equal(stream_recv_resp(s[i], &r, gaz_deadline_in(10000)), 0);
		assert_int_equal(r->offset, 1001);
		free_resp(r);
	}
	assert_true(s_await(&EP.parked, n));
	/* Interleaved over all of them: no stream holds a thread. */
	for (int k = 0; k < 20; k++)
		for (int i = 0; i < n; i++)
			each_lockstep(s[i], k, k + 1);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(unary(ch, P("Echo"), "x", 0, &r, gaz_deadline_in(5000), NULL, &st), 0);
		free_resp(r);
	}
	/* Woken: stream 0 resumes, parks again and goes on. */
	pthread_mutex_lock(&S.mu);
	gaz_rpc_wake(EP.calls[0]);
	pthread_mutex_unlock(&S.mu);
	each_lockstep(s[0], 20, 40);
	/* A callback's error ends stream 1 with it. */
	assert_int_equal(stream_send_off(s[1], -1), 0);
	assert_int_equal(stream_recv_resp(s[1], &r, gaz_deadline_in(10000)), GAZ_EOF);
	memset(&st, 0, sizeof(st));
	assert_int_equal(gaz_rpc_stream_finish(s[1], &st), GAZ_ERPC);
	assert_int_equal(st.grpc, GAZ_GRPC_INVALID_ARGUMENT);
	gaz_rpc_stream_free(s[1]);
	/* Its client cancels stream 2. */
	gaz_rpc_stream_cancel(s[2]);
	memset(&st, 0, sizeof(st));
	assert_int_equal(gaz_rpc_stream_finish(s[2], &st), GAZ_ERPC);
	gaz_rpc_stream_free(s[2]);
	/* The rest half-close. */
	for (int i = 0; i < n; i++) {
		if (i == 1 || i == 2)
			continue;
		assert_int_equal(gaz_rpc_stream_close_send(s[i]), 0);
		end_ok(s[i]);
	}
	assert_true(s_await(&EP.ended, n));
	pthread_mutex_lock(&S.mu);
	for (int i = 0; i < n; i++) {
		int want_n = i == 0 ? 40 : i == 1 ? 21 : 20;
		int want_rc = i == 1 ? GAZ_EINVAL : i == 2 ? GAZ_ECANCELLED : GAZ_EOF;

		assert_int_equal(EP.n[i], want_n);
		assert_int_equal(EP.rc[i], want_rc);
		assert_int_equal(EP.wakes[i], i == 0 ? 1 : 0);
	}
	pthread_mutex_unlock(&S.mu);
	gaz_rpc_channel_free(ch);
	gaz_rpc_server_free(srv);
}

/* Shutdown with live streams on the native port and on the one-port
 * listener: handlers are cancelled and end, clients see the call fail,
 * and nothing leaks (ASan). A handover after shutdown is refused. */
static void test_shutdown_live_streams(void **state)
{
	struct gaz_rpc_server *srv = gaz_rpc_server_new(NULL);
	struct gaz_status st = {0};
	struct gaz_rpc_listener *l;
	struct gaz_rpc_channel *ch[2];
	struct gaz_rpc_stream *s[2];
	Protocol__ReadResponse *r;
	char target[64];
	int port = 0, lport = 0, sp[2];

	(void)state;
	s_reset();
	register_all(srv);
	assert_int_equal(gaz_rpc_server_start(srv, "127.0.0.1:0", &port), 0);
	l = gaz_rpc_listen("127.0.0.1:0", srv, http_conn, NULL, &lport, &st);
	assert_non_null(l);
	snprintf(target, sizeof(target), "127.0.0.1:%d", port);
	ch[0] = gaz_rpc_channel_new(target, NULL);
	ch[1] = channel_to(lport);
	for (int i = 0; i < 2; i++) {
		s[i] = open_stream(ch[i], P("Bidi"));
		assert_int_equal(stream_send_off(s[i], 1), 0);
		assert_int_equal(stream_recv_resp(s[i], &r, gaz_deadline_in(10000)), 0);
		free_resp(r);
	}
	gaz_rpc_listener_close(l);
	gaz_rpc_server_shutdown(srv, 100);
	assert_int_equal(s_int(&S.ended), 2); /* shutdown waited for both handlers */
	/* Both handlers saw the end of their stream. After a response went
	 * out, a cancellation can read as EOF, and gaz_rpc_finish does not
	 * wait to find out (the client's status below is what tells). */
	for (int i = 0; i < 2; i++)
		assert_true(s_int(&S.end_rc[i]) == GAZ_ECANCELLED || s_int(&S.end_rc[i]) == GAZ_EOF);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(stream_recv_resp(s[i], &r, gaz_deadline_in(10000)), GAZ_EOF);
		memset(&st, 0, sizeof(st));
		assert_int_equal(gaz_rpc_stream_finish(s[i], &st), GAZ_ERPC);
		assert_int_not_equal(st.grpc, GAZ_GRPC_OK);
		gaz_rpc_stream_free(s[i]);
		gaz_rpc_channel_free(ch[i]);
	}
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	assert_int_equal(gaz_rpc_server_add_fd(srv, sp[0], "x"), GAZ_ESTOPPED);
	assert_int_equal(recv(sp[1], target, 1, 0), 0); /* closed by add_fd */
	close(sp[1]);
	gaz_rpc_server_shutdown(srv, 0); /* idempotent */
	gaz_rpc_server_free(srv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unary_echo),
		cmocka_unit_test(test_metadata_peer_deadline),
		cmocka_unit_test(test_server_stream),
		cmocka_unit_test(test_client_stream_sum),
		cmocka_unit_test(test_bidi_ping_pong),
		cmocka_unit_test(test_stream_recv_ahead),
		cmocka_unit_test(test_stream_recv_notify),
		cmocka_unit_test(test_buffered_sends),
		cmocka_unit_test(test_buffered_queued_sends),
		cmocka_unit_test(test_recv_each),
		cmocka_unit_test(test_recv_each_error),
		cmocka_unit_test(test_recv_each_backpressure),
		cmocka_unit_test(test_stream_free_later),
		cmocka_unit_test(test_recv_each_timed_wait_race),
		cmocka_unit_test(test_stream_lazy_status),
		cmocka_unit_test(test_error_status),
		cmocka_unit_test(test_unknown_method),
		cmocka_unit_test(test_finish_observer),
		cmocka_unit_test(test_server_metrics),
		cmocka_unit_test(test_oversized),
		cmocka_unit_test(test_client_cancel),
		cmocka_unit_test(test_cancel_is_not_eof),
		cmocka_unit_test(test_fast_path_end),
		cmocka_unit_test(test_parked_calls),
		cmocka_unit_test(test_parked_each),
		cmocka_unit_test(test_stream_limits),
		cmocka_unit_test(test_wake_and_deadline),
		cmocka_unit_test(test_local_call_waits),
		cmocka_unit_test(test_stream_recv_timeout),
		cmocka_unit_test(test_malformed_request),
		cmocka_unit_test(test_one_port_http),
		cmocka_unit_test(test_one_port_slow_preface),
		cmocka_unit_test(test_unix_listener),
		cmocka_unit_test(test_refused_and_bad_port),
		cmocka_unit_test(test_peer_reconnect_backoff),
		cmocka_unit_test(test_big_client_stream),
		cmocka_unit_test(test_queued_sends),
		cmocka_unit_test(test_queued_sends_cancelled),
		cmocka_unit_test(test_queued_sends_full_on_poller),
		cmocka_unit_test(test_recv_last),
		cmocka_unit_test(test_recv_last_error),
		cmocka_unit_test(test_recv_last_extra),
		cmocka_unit_test(test_recv_last_timeout),
		cmocka_unit_test(test_recv_last_then_error),
		cmocka_unit_test(test_recv_last_free_held),
		cmocka_unit_test(test_handler_pool),
		cmocka_unit_test(test_shutdown_live_streams),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
