/* test_http.c - lib/common/http: raw HTTP/1.1 over a socketpair. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/http.h"

/* ---- handlers ------------------------------------------------------------- */

/* Handlers run on the server thread, where cmocka's asserts must not jump;
 * they count failures instead, checked by the test thread. */
static volatile int handler_failures;
#define HCHECK(cond)                      \
	do {                              \
		if (!(cond))              \
			handler_failures++; \
	} while (0)

static int h_query(struct gaz_http_req *req, struct gaz_http_resp *resp, void *arg)
{
	char body[512];
	const char *off = gaz_http_req_param(req, "OFFSET");
	const char *blk = gaz_http_req_param(req, "block");
	const char *name = gaz_http_req_param(req, "name");
	const char *hdr = gaz_http_req_header(req, "x-test-header");
	(void)arg;

	int n = snprintf(body, sizeof(body), "path=%s raw=%s query=%s offset=%s block=%s name=%s "
					     "hdr=%s nparams=%zu missing=%s",
			 req->path, req->raw_path, req->query, off ? off : "-", blk ? blk : "-",
			 name ? name : "-", hdr ? hdr : "-", req->nparams,
			 gaz_http_req_param(req, "nope") ? "no" : "yes");
	gaz_http_resp_header(resp, "Content-Type", "text/plain");
	return gaz_http_resp_send(resp, body, (size_t)n);
}

/* Reads the body in small pieces; answers with its length and contents. */
static int h_put(struct gaz_http_req *req, struct gaz_http_resp *resp, void *arg)
{
	size_t cap = 4 << 20, len = 0, step = arg ? 65536 : 7;
	char *all = malloc(cap);
	ssize_t n;
	uint64_t sum = 0;

	while ((n = gaz_http_req_read(req, all + len, step < cap - len ? step : cap - len)) > 0)
		len += (size_t)n;
	if (n < 0) {
		free(all);
		gaz_http_resp_error(resp, 400, "body read failed: %d", (int)n);
		return 0;
	}
	for (size_t i = 0; i < len; i++)
		sum = sum * 31 + (unsigned char)all[i];
	gaz_http_resp_status(resp, 201);
	gaz_http_resp_header(resp, "X-Len", "%zu", len);
	gaz_http_resp_header(resp, "X-Sum", "%llu", (unsigned long long)sum);
	gaz_http_resp_header(resp, "X-Chunked", "%d", req->chunked);
	int rc = gaz_http_resp_send(resp, all, len < 64 ? len : 64);
	free(all);
	return rc;
}

/* Streams three chunks with a declared trailer, like Gazette's read gateway. */
static int h_stream(struct gaz_http_req *req, struct gaz_http_resp *resp, void *arg)
{
	static const char *const parts[] = {"first chunk;", "second\r\n", "third"};
	(void)req;
	(void)arg;

	gaz_http_resp_status(resp, 206);
	gaz_http_resp_header(resp, "X-Write-Head", "%d", 1234);
	HCHECK((gaz_http_resp_declare_trailer(resp, "X-Close-Error")) == 0);
	for (int i = 0; i < 3; i++)
		if (gaz_http_resp_write(resp, parts[i], strlen(parts[i])))
			return 0;
	HCHECK((gaz_http_resp_header(resp, "X-Late", "x")) == GAZ_EINVAL);
	gaz_http_resp_trailer(resp, "X-Close-Error", "OFFSET_NOT_YET_AVAILABLE\nsecond line");
	return 0;
}

static int h_ready(struct gaz_http_req *req, struct gaz_http_resp *resp, void *arg)
{
	(void)req;
	(void)resp;
	(void)arg;
	return 0; /* nothing sent: 200 with an empty body */
}

static int h_fail(struct gaz_http_req *req, struct gaz_http_resp *resp, void *arg)
{
	(void)req;
	(void)resp;
	(void)arg;
	return GAZ_EIO;
}

static int h_bad_headers(struct gaz_http_req *req, struct gaz_http_resp *resp, void *arg)
{
	(void)req;
	(void)arg;
	HCHECK((gaz_http_resp_header(resp, "Content-Length", "5")) == GAZ_EINVAL);
	HCHECK((gaz_http_resp_header(resp, "Bad Name", "x")) == GAZ_EINVAL);
	HCHECK((gaz_http_resp_header(resp, "X-Inject", "a\r\nX-Evil: 1")) == GAZ_EINVAL);
	HCHECK((gaz_http_resp_header(resp, "X-Ok", "fine")) == 0);
	HCHECK((gaz_http_resp_status(resp, 99)) == GAZ_EINVAL);
	return gaz_http_resp_send(resp, "ok", 2);
}

static volatile int peer_closed_seen;

static int h_wait_close(struct gaz_http_req *req, struct gaz_http_resp *resp, void *arg)
{
	int64_t deadline = gaz_mono_ns() + 3 * GAZ_NS_PER_S;
	(void)arg;

	gaz_http_resp_write(resp, "waiting", 7);
	while (gaz_mono_ns() < deadline) {
		if (gaz_http_req_peer_closed(req)) {
			peer_closed_seen = 1;
			return 0;
		}
		usleep(10000);
	}
	return 0;
}

static const struct gaz_http_route routes_v[] = {
	{"GET", "/debug/ready", h_ready, NULL},
	{"GET", "/fail", h_fail, NULL},
	{"GET", "/stream", h_stream, NULL},
	{"GET", "/bad-headers", h_bad_headers, NULL},
	{"GET", "/wait-close", h_wait_close, NULL},
	{"PUT", "/put/", h_put, NULL},
	{"PUT", "/bigput", h_put, (void *)1},
	{"POST", "/v1/", h_query, NULL},
	{"GET", "/", h_query, NULL},
};

static struct gaz_http_routes routes = {routes_v, sizeof(routes_v) / sizeof(routes_v[0]), 0, 0,
					0};

/* ---- server harness ------------------------------------------------------- */

struct server {
	int fds[2];
	pthread_t thread;
	const struct gaz_http_routes *routes;
};

static void *server_main(void *arg)
{
	struct server *s = arg;

	gaz_http_serve_conn(s->fds[1], "test-peer", s->routes);
	close(s->fds[1]);
	return NULL;
}

static int start(struct server *s, const struct gaz_http_routes *rt)
{
	struct timeval tv = {5, 0};

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, s->fds), 0);
	s->routes = rt;
	setsockopt(s->fds[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	assert_int_equal(pthread_create(&s->thread, NULL, server_main, s), 0);
	return s->fds[0];
}

static void stop(struct server *s)
{
	shutdown(s->fds[0], SHUT_RDWR);
	pthread_join(s->thread, NULL);
	close(s->fds[0]);
	assert_int_equal(handler_failures, 0);
}

static void send_str(int fd, const char *str)
{
	size_t n = strlen(str), off = 0;

	while (off < n) {
		ssize_t w = send(fd, str + off, n - off, MSG_NOSIGNAL);
		assert_true(w > 0);
		off += (size_t)w;
	}
}

/* ---- a small response parser --------------------------------------------------- */

struct cbuf {
	int fd;
	char buf[65536];
	size_t pos, len;
};

struct cresp {
	int status;
	size_t nh;
	char hk[64][64], hv[64][512];
	char *body;
	size_t blen;
	size_t nt;
	char tk[8][64], tv[8][512];
};

static int cb_fill(struct cbuf *b)
{
	ssize_t n;

	if (b->pos == b->len)
		b->pos = b->len = 0;
	n = recv(b->fd, b->buf + b->len, sizeof(b->buf) - b->len, 0);
	if (n > 0)
		b->len += (size_t)n;
	return (int)n;
}

/* A line without its CRLF; -1 on EOF. */
static int cb_line(struct cbuf *b, char *out, size_t cap)
{
	for (;;) {
		char *nl = memchr(b->buf + b->pos, '\n', b->len - b->pos);
		if (nl) {
			size_t n = (size_t)(nl - (b->buf + b->pos));
			assert_true(n > 0 && nl[-1] == '\r');
			assert_true(n - 1 < cap);
			memcpy(out, b->buf + b->pos, n - 1);
			out[n - 1] = '\0';
			b->pos += n + 1;
			return 0;
		}
		if (cb_fill(b) <= 0)
			return -1;
	}
}

static void cb_bytes(struct cbuf *b, char *out, size_t n)
{
	while (n) {
		if (b->pos == b->len)
			assert_true(cb_fill(b) > 0);
		size_t k = b->len - b->pos < n ? b->len - b->pos : n;
		memcpy(out, b->buf + b->pos, k);
		b->pos += k;
		out += k;
		n -= k;
	}
}

static const char *hdr(const struct cresp *r, const char *k)
{
	for (size_t i = 0; i < r->nh; i++)
		if (!strcasecmp(r->hk[i], k))
			return r->hv[i];
	return NULL;
}

static void read_fields(struct cbuf *b, size_t *n, char k[][64], char v[][512])
{
	char line[8192];

	*n = 0;
	for (;;) {
		assert_int_equal(cb_line(b, line, sizeof(line)), 0);
		if (!line[0])
			return;
		char *colon = strchr(line, ':');
		assert_non_null(colon);
		*colon = '\0';
		assert_true(strlen(line) < 64 && strlen(colon + 2) < 512 && *n < 64);
		memcpy(k[*n], line, strlen(line) + 1);
		memcpy(v[*n], colon + 2, strlen(colon + 2) + 1);
		(*n)++;
	}
}

static void read_chunked(struct cbuf *b, struct cresp *r)
{
	char line[256];

	for (;;) {
		assert_int_equal(cb_line(b, line, sizeof(line)), 0);
		size_t n = strtoul(line, NULL, 16);
		if (n == 0)
			break;
		r->body = realloc(r->body, r->blen + n + 1);
		cb_bytes(b, r->body + r->blen, n);
		r->blen += n;
		r->body[r->blen] = '\0';
		assert_int_equal(cb_line(b, line, sizeof(line)), 0);
		assert_string_equal(line, "");
	}
	read_fields(b, &r->nt, r->tk, r->tv);
}

/* Reads one response. `head` = response to a HEAD request (no body). */
static void read_resp(struct cbuf *b, struct cresp *r, bool head)
{
	char line[8192];
	const char *cl, *te;

	memset(r, 0, sizeof(*r));
	r->body = calloc(1, 1);
	assert_int_equal(cb_line(b, line, sizeof(line)), 0);
	assert_int_equal(strncmp(line, "HTTP/1.1 ", 9), 0);
	r->status = atoi(line + 9);
	read_fields(b, &r->nh, r->hk, r->hv);
	cl = hdr(r, "Content-Length");
	te = hdr(r, "Transfer-Encoding");
	if (head || r->status == 204 || r->status == 304 || r->status < 200)
		return;
	if (te) {
		assert_string_equal(te, "chunked");
		read_chunked(b, r);
	} else if (cl) {
		r->blen = strtoul(cl, NULL, 10);
		r->body = realloc(r->body, r->blen + 1);
		cb_bytes(b, r->body, r->blen);
		r->body[r->blen] = '\0';
	} else {
		int n;
		while ((n = cb_fill(b)) > 0)
			;
		r->blen = b->len - b->pos;
		r->body = realloc(r->body, r->blen + 1);
		memcpy(r->body, b->buf + b->pos, r->blen);
		r->body[r->blen] = '\0';
		b->pos = b->len;
	}
}

static bool at_eof(struct cbuf *b)
{
	return b->pos == b->len && cb_fill(b) == 0;
}

static struct cbuf *cb_new(int fd)
{
	struct cbuf *b = calloc(1, sizeof(*b));
	b->fd = fd;
	return b;
}

/* ---- tests ------------------------------------------------------------------------ */

static void test_get_query(void **state)
{
	struct server s;
	struct cbuf *b = cb_new(start(&s, &routes));
	struct cresp r;
	(void)state;

	send_str(b->fd, "GET /j/a%2Fb?Offset=10&BLOCK=true&name=a%20b+c&empty&bad=%zz HTTP/1.1\r\n"
			"Host: x\r\nX-Test-Header:   spaced value  \r\n\r\n");
	read_resp(b, &r, false);
	assert_int_equal(r.status, 200);
	assert_string_equal(hdr(&r, "Content-Type"), "text/plain");
	assert_non_null(hdr(&r, "Date"));
	assert_null(hdr(&r, "Connection"));
	assert_string_equal(r.body, "path=/j/a/b raw=/j/a%2Fb "
				    "query=Offset=10&BLOCK=true&name=a%20b+c&empty&bad=%zz "
				    "offset=10 block=true name=a b c hdr=spaced value nparams=5 "
				    "missing=yes");
	free(r.body);
	free(b);
	stop(&s);
}

static void test_keepalive(void **state)
{
	struct server s;
	struct cbuf *b = cb_new(start(&s, &routes));
	struct cresp r;
	(void)state;

	/* Two pipelined requests in one write, then a third after reading. */
	send_str(b->fd, "GET /one HTTP/1.1\r\nHost: x\r\n\r\n"
			"GET /two?offset=2 HTTP/1.1\r\nHost: x\r\n\r\n");
	read_resp(b, &r, false);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "path=/one "));
	free(r.body);
	read_resp(b, &r, false);
	assert_non_null(strstr(r.body, "path=/two "));
	assert_non_null(strstr(r.body, "offset=2 "));
	free(r.body);
	send_str(b->fd, "\r\nGET /debug/ready HTTP/1.1\r\nHost: x\r\n\r\n");
	read_resp(b, &r, false);
	assert_int_equal(r.status, 200);
	assert_string_equal(hdr(&r, "Content-Length"), "0");
	free(r.body);
	/* Connection: close is honoured. */
	send_str(b->fd, "GET /three HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	read_resp(b, &r, false);
	assert_int_equal(r.status, 200);
	assert_string_equal(hdr(&r, "Connection"), "close");
	free(r.body);
	assert_true(at_eof(b));
	free(b);
	stop(&s);
}

static void test_chunked_put(void **state)
{
	struct server s;
	struct cbuf *b = cb_new(start(&s, &routes));
	struct cresp r;
	(void)state;

	send_str(b->fd, "PUT /put/journal HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
			"5\r\nhello\r\n7;ext=1\r\n, world\r\n");
	usleep(20000); /* the rest arrives later: the reader must block, not fail */
	send_str(b->fd, "A\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n");
	read_resp(b, &r, false);
	assert_int_equal(r.status, 201);
	assert_string_equal(hdr(&r, "X-Len"), "22");
	assert_string_equal(hdr(&r, "X-Chunked"), "1");
	assert_string_equal(r.body, "hello, world0123456789");
	free(r.body);
	/* Content-Length body on the same connection. */
	send_str(b->fd, "PUT /put/j HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
	read_resp(b, &r, false);
	assert_string_equal(hdr(&r, "X-Len"), "3");
	assert_string_equal(r.body, "abc");
	free(r.body);
	/* Expect: 100-continue: the body goes out only after the interim reply. */
	send_str(b->fd, "PUT /put/j HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
			"Expect: 100-continue\r\n\r\n");
	char line[128];
	assert_int_equal(cb_line(b, line, sizeof(line)), 0);
	assert_string_equal(line, "HTTP/1.1 100 Continue");
	assert_int_equal(cb_line(b, line, sizeof(line)), 0);
	assert_string_equal(line, "");
	send_str(b->fd, "wxyz");
	read_resp(b, &r, false);
	assert_int_equal(r.status, 201);
	assert_string_equal(r.body, "wxyz");
	free(r.body);
	free(b);
	stop(&s);
}

struct bigsend {
	int fd;
	char *data;
	size_t len;
};

/* Sender thread: no cmocka asserts here; failures are counted. */
static void raw_send(int fd, const char *p, size_t n)
{
	for (size_t off = 0; off < n;) {
		ssize_t w = send(fd, p + off, n - off, MSG_NOSIGNAL);
		if (w <= 0) {
			handler_failures++;
			return;
		}
		off += (size_t)w;
	}
}

static void *big_sender(void *arg)
{
	static const char head[] =
		"PUT /bigput HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
	struct bigsend *bs = arg;
	size_t off = 0;

	raw_send(bs->fd, head, strlen(head));
	for (size_t k = 1; off < bs->len; k = k * 3 % 70001 + 1) { /* chunks of varied sizes */
		size_t n = k < bs->len - off ? k : bs->len - off;
		char sz[32];
		raw_send(bs->fd, sz, (size_t)snprintf(sz, sizeof(sz), "%zx\r\n", n));
		raw_send(bs->fd, bs->data + off, n);
		raw_send(bs->fd, "\r\n", 2);
		off += n;
	}
	raw_send(bs->fd, "0\r\n\r\n", 5);
	return NULL;
}

static void test_big_chunked_put(void **state)
{
	struct server s;
	struct cbuf *b = cb_new(start(&s, &routes));
	struct bigsend bs = {b->fd, malloc(3 << 20), 3 << 20};
	struct cresp r;
	pthread_t t;
	uint64_t sum = 0;
	char want[32];
	(void)state;

	for (size_t i = 0; i < bs.len; i++)
		bs.data[i] = (char)(i * 7 + i / 4096);
	for (size_t i = 0; i < bs.len; i++)
		sum = sum * 31 + (unsigned char)bs.data[i];
	pthread_create(&t, NULL, big_sender, &bs);
	read_resp(b, &r, false);
	pthread_join(t, NULL);
	assert_int_equal(r.status, 201);
	snprintf(want, sizeof(want), "%zu", bs.len);
	assert_string_equal(hdr(&r, "X-Len"), want);
	snprintf(want, sizeof(want), "%llu", (unsigned long long)sum);
	assert_string_equal(hdr(&r, "X-Sum"), want);
	free(r.body);
	free(bs.data);
	free(b);
	stop(&s);
}

static void expect_error(const char *request, int status)
{
	struct server s;
	struct cbuf *b = cb_new(start(&s, &routes));
	struct cresp r;

	send_str(b->fd, request);
	read_resp(b, &r, false);
	if (r.status != status)
		fail_msg("request %.40s: status %d, want %d", request, r.status, status);
	assert_string_equal(hdr(&r, "Connection"), "close");
	assert_true(at_eof(b));
	free(r.body);
	free(b);
	stop(&s);
}

static void test_malformed(void **state)
{
	(void)state;
	expect_error("GARBAGE\r\n\r\n", 400);
	expect_error("GET /\r\n\r\n", 400);
	expect_error("GET / HTTP/1.1\r\n\r\n", 400); /* no Host */
	expect_error("GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", 400);
	expect_error("GET / HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n", 400);
	expect_error("GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400);
	expect_error("GET nopath HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	expect_error("GET /a%zzb HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	expect_error("GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505);
	expect_error("PUT /put/x HTTP/1.1\r\nHost: x\r\nContent-Length: 12x\r\n\r\n", 400);
	expect_error("PUT /put/x HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
		     "Content-Length: 2\r\n\r\n",
		     400);
	expect_error("PUT /put/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501);
	expect_error("GET / HTTP/1.1\r\nHost: x\r\nExpect: magic\r\n\r\n", 417);
}

static void test_oversized_header(void **state)
{
	char *req = malloc(40000);
	(void)state;

	strcpy(req, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: ");
	memset(req + strlen(req), 'a', 20000);
	strcpy(req + strlen("GET / HTTP/1.1\r\nHost: x\r\nX-Big: ") + 20000, "\r\n\r\n");
	expect_error(req, 431);
	/* A head that never ends within the buffer. */
	strcpy(req, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: ");
	memset(req + strlen(req), 'b', 39000);
	req[39000] = '\0';
	expect_error(req, 431);
	/* Too many header fields. */
	strcpy(req, "GET / HTTP/1.1\r\nHost: x\r\n");
	for (int i = 0; i < GAZ_HTTP_MAX_HEADERS + 1; i++)
		sprintf(req + strlen(req), "X-H%d: v\r\n", i);
	strcat(req, "\r\n");
	expect_error(req, 431);
	free(req);
}

static void test_streaming_trailer(void **state)
{
	struct server s;
	struct cbuf *b = cb_new(start(&s, &routes));
	struct cresp r;
	(void)state;

	send_str(b->fd, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
	read_resp(b, &r, false);
	assert_int_equal(r.status, 206);
	assert_string_equal(hdr(&r, "Transfer-Encoding"), "chunked");
	assert_string_equal(hdr(&r, "Trailer"), "X-Close-Error");
	assert_string_equal(hdr(&r, "X-Write-Head"), "1234");
	assert_null(hdr(&r, "Content-Length"));
	assert_null(hdr(&r, "X-Late"));
	assert_string_equal(r.body, "first chunk;second\r\nthird");
	assert_int_equal(r.nt, 1);
	assert_string_equal(r.tk[0], "X-Close-Error");
	assert_string_equal(r.tv[0], "OFFSET_NOT_YET_AVAILABLE second line");
	free(r.body);
	/* The connection is still usable. */
	send_str(b->fd, "GET /debug/ready HTTP/1.1\r\nHost: x\r\n\r\n");
	read_resp(b, &r, false);
	assert_int_equal(r.status, 200);
	free(r.body);
	free(b);
	stop(&s);
}

static void test_head(void **state)
{
	struct server s;
	struct cbuf *b = cb_new(start(&s, &routes));
	struct cresp r;
	(void)state;

	send_str(b->fd, "HEAD /stream HTTP/1.1\r\nHost: x\r\n\r\n");
	read_resp(b, &r, true);
	assert_int_equal(r.status, 206);
	assert_string_equal(hdr(&r, "X-Write-Head"), "1234");
	assert_null(hdr(&r, "Transfer-Encoding"));
	free(r.body);
	send_str(b->fd, "HEAD /q?offset=1 HTTP/1.1\r\nHost: x\r\n\r\n");
	read_resp(b, &r, true);
	assert_int_equal(r.status, 200);
	assert_non_null(hdr(&r, "Content-Length"));
	assert_true(atoi(hdr(&r, "Content-Length")) > 0);
	free(r.body);
	/* No body bytes were sent: the next response starts right here. */
	send_str(b->fd, "GET /debug/ready HTTP/1.1\r\nHost: x\r\n\r\n");
	read_resp(b, &r, false);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.blen, 0);
	free(r.body);
	free(b);
	stop(&s);
}

static void test_routing_errors(void **state)
{
	static const struct gaz_http_route only_v[] = {
		{"GET", "/debug/ready", h_ready, NULL},
		{"PUT", "/j/", h_put, NULL},
	};
	struct gaz_http_routes only = {only_v, 2, 0, 0, 0};
	struct server s;
	struct cbuf *b = cb_new(start(&s, &only));
	struct cresp r;
	(void)state;

	send_str(b->fd, "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n");
	read_resp(b, &r, false);
	assert_int_equal(r.status, 404);
	assert_string_equal(r.body, "404 page not found\n");
	free(r.body);
	send_str(b->fd, "POST /debug/ready HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nxx");
	read_resp(b, &r, false);
	assert_int_equal(r.status, 405);
	assert_string_equal(hdr(&r, "Allow"), "GET, HEAD");
	free(r.body);
	/* The unread body was drained: the connection is still in sync. */
	send_str(b->fd, "GET /j/x HTTP/1.1\r\nHost: x\r\n\r\n");
	read_resp(b, &r, false);
	assert_int_equal(r.status, 405);
	assert_string_equal(hdr(&r, "Allow"), "PUT");
	free(r.body);
	send_str(b->fd, "GET /debug/ready/ HTTP/1.1\r\nHost: x\r\n\r\n");
	read_resp(b, &r, false);
	assert_int_equal(r.status, 404); /* exact pattern */
	free(r.body);
	free(b);
	stop(&s);
}

static void test_handler_failure_and_headers(void **state)
{
	struct server s;
	struct cbuf *b = cb_new(start(&s, &routes));
	struct cresp r;
	(void)state;

	send_str(b->fd, "GET /fail HTTP/1.1\r\nHost: x\r\n\r\n");
	read_resp(b, &r, false);
	assert_int_equal(r.status, 500);
	assert_string_equal(r.body, "internal server error\n");
	assert_string_equal(hdr(&r, "X-Content-Type-Options"), "nosniff");
	free(r.body);
	send_str(b->fd, "GET /bad-headers HTTP/1.1\r\nHost: x\r\n\r\n");
	read_resp(b, &r, false);
	assert_int_equal(r.status, 200);
	assert_string_equal(hdr(&r, "X-Ok"), "fine");
	assert_null(hdr(&r, "X-Evil"));
	assert_string_equal(hdr(&r, "Content-Length"), "2");
	free(r.body);
	free(b);
	stop(&s);
}

static void test_http10(void **state)
{
	struct server s;
	struct cbuf *b = cb_new(start(&s, &routes));
	struct cresp r;
	(void)state;

	/* keep-alive when asked, with a length. */
	send_str(b->fd, "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
	read_resp(b, &r, false);
	assert_int_equal(r.status, 200);
	assert_string_equal(hdr(&r, "Connection"), "keep-alive");
	free(r.body);
	/* A stream to a 1.0 client: raw bytes, then close. */
	send_str(b->fd, "GET /stream HTTP/1.0\r\n\r\n");
	read_resp(b, &r, false);
	assert_int_equal(r.status, 206);
	assert_null(hdr(&r, "Transfer-Encoding"));
	assert_string_equal(hdr(&r, "Connection"), "close");
	assert_string_equal(r.body, "first chunk;second\r\nthird");
	free(r.body);
	free(b);
	stop(&s);
}

static void test_bad_chunked_body(void **state)
{
	struct server s;
	struct cbuf *b = cb_new(start(&s, &routes));
	struct cresp r;
	(void)state;

	send_str(b->fd, "PUT /put/j HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
			"3\r\nabcXX\r\n0\r\n\r\n");
	read_resp(b, &r, false);
	assert_int_equal(r.status, 400);
	assert_non_null(strstr(r.body, "body read failed"));
	assert_string_equal(hdr(&r, "Connection"), "close");
	assert_true(at_eof(b));
	free(r.body);
	free(b);
	stop(&s);
}

static void test_idle_timeout(void **state)
{
	struct gaz_http_routes quick = routes;
	struct server s;
	struct cbuf *b;
	int64_t t0 = gaz_mono_ns();
	(void)state;

	quick.idle_timeout_ms = 150;
	b = cb_new(start(&s, &quick));
	send_str(b->fd, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
	struct cresp r;
	read_resp(b, &r, false);
	free(r.body);
	assert_true(at_eof(b)); /* server gave up on the idle connection */
	assert_true(gaz_mono_ns() - t0 < 3 * GAZ_NS_PER_S);
	free(b);
	stop(&s);
}

static void test_peer_closed(void **state)
{
	struct server s;
	struct cbuf *b = cb_new(start(&s, &routes));
	char line[128];
	(void)state;

	peer_closed_seen = 0;
	send_str(b->fd, "GET /wait-close HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_int_equal(cb_line(b, line, sizeof(line)), 0);
	assert_string_equal(line, "HTTP/1.1 200 OK");
	shutdown(b->fd, SHUT_WR);
	pthread_join(s.thread, NULL);
	assert_int_equal(peer_closed_seen, 1);
	close(b->fd);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_get_query),
		cmocka_unit_test(test_keepalive),
		cmocka_unit_test(test_chunked_put),
		cmocka_unit_test(test_big_chunked_put),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_oversized_header),
		cmocka_unit_test(test_streaming_trailer),
		cmocka_unit_test(test_head),
		cmocka_unit_test(test_routing_errors),
		cmocka_unit_test(test_handler_failure_and_headers),
		cmocka_unit_test(test_http10),
		cmocka_unit_test(test_bad_chunked_body),
		cmocka_unit_test(test_idle_timeout),
		cmocka_unit_test(test_peer_closed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
