/*
 * http.c - blocking HTTP/1.1 server for one connection (see http.h).
 *
 * Connection buffer layout (one heap block per connection):
 *
 *   buf: [0 ........ head_len)[head_len ..... rpos ..... rlen) ... cap)
 *         request line+headers   consumed body   unread input
 *
 *  - The head of the current request stays in place while its handler
 *    runs: header, method and target pointers point into it. Body bytes
 *    are read through [head_len, cap), which always has READ_AHEAD bytes
 *    of room because a head never exceeds max_head.
 *  - Before the next request, unread input (pipelined bytes) moves to 0.
 *  - Decoded path and query strings go into `scratch`, a bump area reset
 *    per request, sized for the worst case so it never overflows.
 *
 * Response states: R_NEW (nothing sent) -> R_STREAM (header sent, body
 * being streamed) -> R_DONE; or R_NEW -> R_DONE (fixed-length send). Only
 * finish and send move to R_DONE. A write error is sticky in resp->err and
 * closes the connection.
 *
 * Request body states: B_IDENTITY (remaining bytes) -> B_DONE, or
 * B_CHUNK_SIZE -> B_CHUNK_DATA -> B_CHUNK_CRLF -> B_CHUNK_SIZE ... ->
 * (size 0) B_TRAILERS -> B_DONE. Errors are sticky in c->body_err.
 *
 * Must not call: grpc, curl, or anything that starts threads.
 */
#include "common/hex.h"
#include "common/http.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>

#define DEF_TIMEOUT_MS 60000
#define DEF_MAX_HEAD 16384
#define READ_AHEAD 16384
#define LINE_MAX_BYTES 4096
#define TRAILERS_IN_MAX 16384
#define DRAIN_MAX (256 * 1024)
#define RESP_HDR_MAX 8192
#define MAX_TRAILERS 8
#define LINGER_MS 500

enum body_state { B_IDENTITY, B_CHUNK_SIZE, B_CHUNK_DATA, B_CHUNK_CRLF, B_TRAILERS, B_DONE };
enum resp_state { R_NEW, R_STREAM, R_DONE };
enum framing { F_FIXED, F_CHUNKED, F_UNTIL_CLOSE, F_NONE };

struct gaz_http_resp {
	struct gaz__http_conn *c;
	const struct gaz_http_req *req;
	int status;
	enum resp_state state;
	bool head_only; /* HEAD request or a status without a body */
	bool chunked;   /* streamed body is chunk-coded */
	int err;        /* sticky write error */
	size_t hlen;
	char hdr[RESP_HDR_MAX]; /* handler's header fields, "Name: v\r\n"... */
	size_t ntrailers;
	struct {
		char name[64];
		char value[512];
		bool set;
	} trailers[MAX_TRAILERS];
};

struct gaz__http_conn {
	int fd;
	const char *peer;
	const struct gaz_http_routes *cfg;
	size_t max_head;
	char *buf;
	size_t cap, head_len, rpos, rlen;
	char *scratch;
	size_t scap, sused;
	bool close; /* close after the current response */
	enum body_state bst;
	uint64_t remaining;     /* bytes left in the identity body or chunk */
	size_t trailer_bytes;   /* request trailer bytes seen */
	int body_err;
	bool expect_continue, continue_sent;
	struct gaz_http_resp *resp;
	char out[RESP_HDR_MAX + 1024]; /* response head being sent */
};

/* ---- small helpers ------------------------------------------------------ */

const char *gaz_http_status_text(int code)
{
	switch (code) {
	case 100: return "Continue";
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 206: return "Partial Content";
	case 301: return "Moved Permanently";
	case 302: return "Found";
	case 304: return "Not Modified";
	case 307: return "Temporary Redirect";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 411: return "Length Required";
	case 413: return "Request Entity Too Large";
	case 416: return "Requested Range Not Satisfiable";
	case 417: return "Expectation Failed";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	}
	return "";
}

static bool is_tchar(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static bool is_token(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!is_tchar((unsigned char)*s))
			return false;
	return true;
}

static bool status_has_body(int code)
{
	return code >= 200 && code != 204 && code != 304;
}

/* True if comma-separated header value `v` holds `token` (case-insensitive). */
static bool has_token(const char *v, const char *token)
{
	size_t n = strlen(token);

	while (v && *v) {
		while (*v == ' ' || *v == '\t' || *v == ',')
			v++;
		const char *e = v;
		while (*e && *e != ',')
			e++;
		const char *t = e;
		while (t > v && (t[-1] == ' ' || t[-1] == '\t'))
			t--;
		if ((size_t)(t - v) == n && !strncasecmp(v, token, n))
			return true;
		v = e;
	}
	return false;
}

static void http_date(char *out, size_t cap)
{
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(out, cap, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

/* ---- socket I/O -------------------------------------------------------- */

static ssize_t recv_some(struct gaz__http_conn *c, void *dst, size_t n)
{
	for (;;) {
		ssize_t r = recv(c->fd, dst, n, 0);
		if (r >= 0)
			return r;
		if (errno == EINTR)
			continue;
		return errno == EAGAIN || errno == EWOULDBLOCK ? GAZ_ETIMEDOUT : GAZ_EIO;
	}
}

/* Sends every byte of iov[0..n) (modified in place). */
static int send_iov(struct gaz__http_conn *c, struct iovec *iov, int n)
{
	struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};

	while (msg.msg_iovlen) {
		ssize_t w = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? GAZ_ETIMEDOUT : GAZ_EIO;
		while (msg.msg_iovlen && (size_t)w >= msg.msg_iov->iov_len) {
			w -= (ssize_t)msg.msg_iov->iov_len;
			msg.msg_iov++;
			msg.msg_iovlen--;
		}
		if (msg.msg_iovlen) {
			msg.msg_iov->iov_base = (char *)msg.msg_iov->iov_base + w;
			msg.msg_iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

static int send_str(struct gaz__http_conn *c, const char *s, size_t n)
{
	struct iovec iov = {(void *)s, n};
	return send_iov(c, &iov, 1);
}

static void set_timeout(int fd, int opt, int ms)
{
	struct timeval tv = {0, 0};

	if (ms > 0) {
		tv.tv_sec = ms / 1000;
		tv.tv_usec = (ms % 1000) * 1000;
	}
	setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof(tv));
}

/* Shuts down our side, then reads what the peer still sends for a moment so
 * that closing does not reset the connection under an unread response. */
static void lingering_close(int fd)
{
	char sink[4096];
	size_t total = 0;
	ssize_t n;

	shutdown(fd, SHUT_WR);
	set_timeout(fd, SO_RCVTIMEO, LINGER_MS);
	while (total < DRAIN_MAX && ((n = recv(fd, sink, sizeof(sink), 0)) > 0 ||
				     (n < 0 && errno == EINTR)))
		total += n > 0 ? (size_t)n : 0;
}

/* A whole response composed here, for errors found before any handler. */
static void reply_plain(struct gaz__http_conn *c, int code, const char *body)
{
	int n = snprintf(c->out, sizeof(c->out),
			 "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			 "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
			 code, gaz_http_status_text(code), strlen(body), body);
	send_str(c, c->out, (size_t)n < sizeof(c->out) ? (size_t)n : sizeof(c->out) - 1);
	c->close = true;
}

static void reply_status(struct gaz__http_conn *c, int code)
{
	char body[64];

	snprintf(body, sizeof(body), "%d %s", code, gaz_http_status_text(code));
	reply_plain(c, code, body);
}

/* ---- reading a request head ---------------------------------------------- */

/* Offset just past the blank line ending the head, or 0 if not yet seen. */
static size_t head_end(const char *b, size_t len, size_t *scanned)
{
	for (size_t i = *scanned; i < len; i++) {
		if (b[i] != '\n')
			continue;
		if ((i >= 1 && b[i - 1] == '\n') || (i >= 2 && b[i - 1] == '\r' && b[i - 2] == '\n'))
			return i + 1;
	}
	*scanned = len;
	return 0;
}

/* Moves unread input to the front, dropping blank lines between requests. */
static void compact_for_head(struct gaz__http_conn *c)
{
	while (c->rpos < c->rlen && (c->buf[c->rpos] == '\r' || c->buf[c->rpos] == '\n'))
		c->rpos++;
	memmove(c->buf, c->buf + c->rpos, c->rlen - c->rpos);
	c->rlen -= c->rpos;
	c->rpos = 0;
	c->head_len = 0;
}

/* Returns 0 with the head in buf[0, head_len), GAZ_EOF if the peer closed
 * cleanly between requests, GAZ_ERANGE if the head is too large, or a read
 * error. */
static int read_head(struct gaz__http_conn *c)
{
	size_t scanned = 0, end;
	ssize_t n;

	compact_for_head(c);
	for (;;) {
		if (c->rlen && (c->buf[0] == '\r' || c->buf[0] == '\n')) {
			compact_for_head(c); /* blank lines before a request */
			scanned = 0;
		}
		if ((end = head_end(c->buf, c->rlen, &scanned))) {
			if (end > c->max_head)
				return GAZ_ERANGE;
			c->head_len = c->rpos = end;
			return 0;
		}
		if (c->rlen >= c->max_head)
			return GAZ_ERANGE;
		n = recv_some(c, c->buf + c->rlen, c->cap - c->rlen);
		if (n == 0)
			return c->rlen ? GAZ_EPROTO : GAZ_EOF;
		if (n < 0)
			return (int)n;
		c->rlen += (size_t)n;
	}
}

/* ---- parsing a request head ------------------------------------------------ */

static char *next_line(char **p, char *end)
{
	char *s = *p, *nl = memchr(s, '\n', (size_t)(end - s));

	if (!nl)
		return NULL;
	*nl = '\0';
	if (nl > s && nl[-1] == '\r')
		nl[-1] = '\0';
	*p = nl + 1;
	return s;
}

static int parse_request_line(struct gaz_http_req *req, char *line)
{
	char *sp1 = strchr(line, ' '), *sp2;

	if (!sp1 || !(sp2 = strchr(sp1 + 1, ' ')))
		return 400;
	*sp1 = *sp2 = '\0';
	req->method = line;
	req->target = sp1 + 1;
	if (!is_token(req->method) || !*req->target || strchr(req->target, ' ') ||
	    strchr(req->target, '\r'))
		return 400;
	if (!strcmp(sp2 + 1, "HTTP/1.1"))
		req->version = 11;
	else if (!strcmp(sp2 + 1, "HTTP/1.0"))
		req->version = 10;
	else if (!strncmp(sp2 + 1, "HTTP/", 5) && sp2[6] >= '0' && sp2[6] <= '9' && sp2[7] == '.')
		return 505;
	else
		return 400;
	return 0;
}

static int parse_header_line(struct gaz_http_req *req, char *line)
{
	char *colon = strchr(line, ':'), *v, *e;

	if (line[0] == ' ' || line[0] == '\t' || !colon)
		return 400; /* obsolete line folding, or no colon */
	*colon = '\0';
	if (!is_token(line) || strchr(colon + 1, '\r'))
		return 400;
	if (req->nheaders == GAZ_HTTP_MAX_HEADERS)
		return 431;
	for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
		;
	for (e = v + strlen(v); e > v && (e[-1] == ' ' || e[-1] == '\t'); e--)
		;
	*e = '\0';
	req->headers[req->nheaders].key = line;
	req->headers[req->nheaders++].value = v;
	return 0;
}

static char *scratch_alloc(struct gaz__http_conn *c, size_t n)
{
	char *p;

	if (c->sused + n > c->scap)
		return NULL; /* cannot happen: scap covers the worst case */
	p = c->scratch + c->sused;
	c->sused += n;
	return p;
}

/* Percent-decodes s[0..n) into scratch. Query mode maps '+' to ' ' and keeps
 * bad escapes literally; path mode rejects them (and %00). */
static const char *pct_decode(struct gaz__http_conn *c, const char *s, size_t n, bool query)
{
	char *out = scratch_alloc(c, n + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '%') {
			*o++ = query && s[i] == '+' ? ' ' : s[i];
			continue;
		}
		int hi = i + 2 < n ? gaz_hex_digit(s[i + 1]) : -1;
		int lo = i + 2 < n ? gaz_hex_digit(s[i + 2]) : -1;
		if (hi >= 0 && lo >= 0 && (query || hi || lo)) {
			*o++ = (char)(hi << 4 | lo);
			i += 2;
		} else if (query) {
			*o++ = '%';
		} else {
			return NULL;
		}
	}
	*o = '\0';
	return out;
}

static int parse_query(struct gaz__http_conn *c, struct gaz_http_req *req)
{
	const char *p = req->query;

	while (*p) {
		const char *amp = strchr(p, '&'), *end = amp ? amp : p + strlen(p);
		const char *eq = memchr(p, '=', (size_t)(end - p));
		if (end > p) {
			if (req->nparams == GAZ_HTTP_MAX_PARAMS)
				return 400;
			struct gaz_http_kv *kv = &req->params[req->nparams++];
			kv->key = pct_decode(c, p, (size_t)((eq ? eq : end) - p), true);
			kv->value = eq ? pct_decode(c, eq + 1, (size_t)(end - eq - 1), true) : "";
			if (!kv->key || !kv->value)
				return 400;
		}
		p = amp ? amp + 1 : end;
	}
	return 0;
}

/* Splits the target into path and query (origin-form, absolute-form, '*'). */
static int parse_target(struct gaz__http_conn *c, struct gaz_http_req *req)
{
	const char *t = req->target, *q;
	size_t plen;

	if (!strncasecmp(t, "http://", 7) || !strncasecmp(t, "https://", 8)) {
		t = strchr(strstr(t, "//") + 2, '/');
		if (!t)
			t = "/";
	} else if (t[0] != '/' && !(t[0] == '*' && !t[1] && !strcmp(req->method, "OPTIONS"))) {
		return 400;
	}
	q = strchr(t, '?');
	plen = q ? (size_t)(q - t) : strlen(t);
	req->query = q ? q + 1 : "";
	char *raw = scratch_alloc(c, plen + 1);
	if (!raw)
		return 400;
	memcpy(raw, t, plen);
	raw[plen] = '\0';
	req->raw_path = raw;
	if (!(req->path = pct_decode(c, raw, plen, false)))
		return 400;
	return parse_query(c, req);
}

/* Finds the framing headers; applies Connection, Host and Expect rules. */
static int scan_headers(struct gaz__http_conn *c, struct gaz_http_req *req, const char **cl,
			const char **te)
{
	const char *host = NULL;

	for (size_t i = 0; i < req->nheaders; i++) {
		const char *k = req->headers[i].key, *v = req->headers[i].value;
		if (!strcasecmp(k, "Content-Length")) {
			if (*cl && strcmp(*cl, v))
				return 400;
			*cl = v;
		} else if (!strcasecmp(k, "Transfer-Encoding")) {
			if (*te)
				return 501;
			*te = v;
		} else if (!strcasecmp(k, "Host")) {
			if (host)
				return 400;
			host = v;
		} else if (!strcasecmp(k, "Connection")) {
			if (has_token(v, "close"))
				c->close = true;
			else if (req->version == 10 && has_token(v, "keep-alive"))
				c->close = false;
		} else if (!strcasecmp(k, "Expect") && req->version == 11) {
			if (strcasecmp(v, "100-continue"))
				return 417;
			c->expect_continue = true;
		}
	}
	return req->version == 11 && !host ? 400 : 0;
}

/* Body framing: chunked wins over Content-Length (and then the connection
 * is not reused, as the two disagreeing is a smuggling pattern). */
static int set_framing(struct gaz__http_conn *c, struct gaz_http_req *req, const char *cl,
		       const char *te)
{
	uint64_t n = 0;

	if (te) {
		if (strcasecmp(te, "chunked"))
			return 501;
		req->chunked = true;
		req->content_length = -1;
		c->bst = B_CHUNK_SIZE;
		c->close |= cl != NULL;
		return 0;
	}
	if (!cl)
		return 0;
	if (!*cl)
		return 400;
	for (const char *p = cl; *p; p++) {
		if (*p < '0' || *p > '9' || n > (UINT64_C(1) << 62))
			return 400;
		n = n * 10 + (uint64_t)(*p - '0');
	}
	req->content_length = (int64_t)n;
	c->remaining = n;
	c->bst = n ? B_IDENTITY : B_DONE;
	return 0;
}

static int parse_request(struct gaz__http_conn *c, struct gaz_http_req *req)
{
	char *p = c->buf, *end = c->buf + c->head_len, *line;
	const char *cl = NULL, *te = NULL;
	int rc;

	memset(req, 0, offsetof(struct gaz_http_req, headers));
	req->nparams = 0;
	req->peer = c->peer;
	req->conn_ = c;
	c->sused = 0;
	c->bst = B_DONE;
	c->body_err = 0;
	c->trailer_bytes = 0;
	c->expect_continue = c->continue_sent = false;
	if (memchr(c->buf, '\0', c->head_len) || !(line = next_line(&p, end)))
		return 400;
	if ((rc = parse_request_line(req, line)))
		return rc;
	c->close = req->version == 10;
	while ((line = next_line(&p, end)) && *line)
		if ((rc = parse_header_line(req, line)))
			return rc;
	if ((rc = parse_target(c, req)) || (rc = scan_headers(c, req, &cl, &te)))
		return rc;
	return set_framing(c, req, cl, te);
}

/* ---- request accessors and body ---------------------------------------------- */

const char *gaz_http_req_header(const struct gaz_http_req *req, const char *name)
{
	for (size_t i = 0; i < req->nheaders; i++)
		if (!strcasecmp(req->headers[i].key, name))
			return req->headers[i].value;
	return NULL;
}

const char *gaz_http_req_param(const struct gaz_http_req *req, const char *key)
{
	for (size_t i = 0; i < req->nparams; i++)
		if (!strcasecmp(req->params[i].key, key))
			return req->params[i].value;
	return NULL;
}

bool gaz_http_req_peer_closed(const struct gaz_http_req *req)
{
	struct pollfd p = {.fd = req->conn_->fd, .events = POLLIN | POLLRDHUP};

	if (poll(&p, 1, 0) <= 0)
		return false;
	return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

/* Reads more body input into [head_len, cap), keeping unread bytes. */
static ssize_t fill_body(struct gaz__http_conn *c)
{
	ssize_t n;

	if (c->rpos == c->rlen) {
		c->rpos = c->rlen = c->head_len;
	} else if (c->rlen == c->cap) {
		memmove(c->buf + c->head_len, c->buf + c->rpos, c->rlen - c->rpos);
		c->rlen -= c->rpos - c->head_len;
		c->rpos = c->head_len;
	}
	n = recv_some(c, c->buf + c->rlen, c->cap - c->rlen);
	if (n > 0)
		c->rlen += (size_t)n;
	return n == 0 ? GAZ_EPROTO : n;
}

/* One body line (chunk size, chunk end, trailer), NUL-terminated in place. */
static int read_line(struct gaz__http_conn *c, char **line)
{
	ssize_t n;

	for (;;) {
		char *s = c->buf + c->rpos, *nl = memchr(s, '\n', c->rlen - c->rpos);
		if (nl) {
			*nl = '\0';
			if (nl > s && nl[-1] == '\r')
				nl[-1] = '\0';
			c->rpos = (size_t)(nl + 1 - c->buf);
			*line = s;
			return 0;
		}
		if (c->rlen - c->rpos >= LINE_MAX_BYTES)
			return GAZ_EPROTO;
		if ((n = fill_body(c)) < 0)
			return (int)n;
	}
}

static int chunk_size(struct gaz__http_conn *c)
{
	uint64_t n = 0;
	char *line, *p;
	int rc;

	if ((rc = read_line(c, &line)))
		return rc;
	for (p = line; gaz_hex_digit(*p) >= 0; p++) {
		if (n >> 56)
			return GAZ_EPROTO;
		n = n << 4 | (uint64_t)gaz_hex_digit(*p);
	}
	while (*p == ' ' || *p == '\t')
		p++;
	if (p == line || (*p && *p != ';'))
		return GAZ_EPROTO;
	c->remaining = n;
	c->bst = n ? B_CHUNK_DATA : B_TRAILERS;
	return 0;
}

static int chunk_meta(struct gaz__http_conn *c)
{
	char *line;
	int rc;

	if ((rc = read_line(c, &line)))
		return rc;
	if (c->bst == B_CHUNK_CRLF) {
		c->bst = B_CHUNK_SIZE;
		return *line ? GAZ_EPROTO : 0;
	}
	c->trailer_bytes += strlen(line) + 2;
	if (!*line)
		c->bst = B_DONE;
	return c->trailer_bytes > TRAILERS_IN_MAX ? GAZ_EPROTO : 0;
}

static ssize_t read_data(struct gaz__http_conn *c, void *buf, size_t cap)
{
	size_t want = cap < c->remaining ? cap : (size_t)c->remaining;
	ssize_t n;

	if (c->rpos < c->rlen) {
		n = (ssize_t)(want < c->rlen - c->rpos ? want : c->rlen - c->rpos);
		memcpy(buf, c->buf + c->rpos, (size_t)n);
		c->rpos += (size_t)n;
	} else if ((n = recv_some(c, buf, want)) <= 0) {
		return n == 0 ? GAZ_EPROTO : n;
	}
	c->remaining -= (uint64_t)n;
	if (!c->remaining)
		c->bst = c->bst == B_IDENTITY ? B_DONE : B_CHUNK_CRLF;
	return n;
}

static void maybe_continue(struct gaz__http_conn *c)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

	if (!c->expect_continue || c->continue_sent || c->resp->state != R_NEW)
		return;
	c->continue_sent = true;
	if (send_str(c, cont, sizeof(cont) - 1))
		c->close = true;
}

ssize_t gaz_http_req_read(struct gaz_http_req *req, void *buf, size_t cap)
{
	struct gaz__http_conn *c = req->conn_;
	ssize_t rc = 0;

	if (c->body_err || c->bst == B_DONE)
		return c->body_err;
	if (!cap)
		return GAZ_EINVAL;
	maybe_continue(c);
	while (!rc && c->bst != B_DONE) {
		if (c->bst == B_IDENTITY || c->bst == B_CHUNK_DATA)
			rc = read_data(c, buf, cap);
		else if (c->bst == B_CHUNK_SIZE)
			rc = chunk_size(c);
		else
			rc = chunk_meta(c);
	}
	if (rc < 0) {
		c->body_err = (int)rc;
		c->close = true;
	}
	return rc;
}

/* ---- responses ------------------------------------------------------------- */

static bool managed_header(const char *name)
{
	static const char *const names[] = {"Content-Length", "Transfer-Encoding", "Connection",
					    "Trailer", "Date"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcasecmp(name, names[i]))
			return true;
	return false;
}

int gaz_http_resp_status(struct gaz_http_resp *resp, int code)
{
	if (resp->state != R_NEW || code <= 100 || code >= 600)
		return GAZ_EINVAL;
	resp->status = code;
	return 0;
}

static int header_va(struct gaz_http_resp *resp, const char *name, const char *fmt, va_list ap)
{
	size_t room = sizeof(resp->hdr) - resp->hlen;
	char *p = resp->hdr + resp->hlen;
	int n, m;

	if (resp->state != R_NEW || !is_token(name) || managed_header(name))
		return GAZ_EINVAL;
	n = snprintf(p, room, "%s: ", name);
	if (n < 0 || (size_t)n >= room)
		return GAZ_ERANGE;
	m = vsnprintf(p + n, room - (size_t)n, fmt, ap);
	if (m < 0 || (size_t)(n + m + 2) >= room)
		return GAZ_ERANGE;
	if (strpbrk(p + n, "\r\n"))
		return GAZ_EINVAL;
	memcpy(p + n + m, "\r\n", 3);
	resp->hlen += (size_t)(n + m + 2);
	return 0;
}

int gaz_http_resp_header(struct gaz_http_resp *resp, const char *name, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = header_va(resp, name, fmt, ap);
	va_end(ap);
	return rc;
}

int gaz_http_resp_declare_trailer(struct gaz_http_resp *resp, const char *name)
{
	if (resp->state != R_NEW || !is_token(name) || managed_header(name) ||
	    strlen(name) >= sizeof(resp->trailers[0].name))
		return GAZ_EINVAL;
	if (resp->ntrailers == MAX_TRAILERS)
		return GAZ_ERANGE;
	snprintf(resp->trailers[resp->ntrailers].name, sizeof(resp->trailers[0].name), "%s", name);
	resp->trailers[resp->ntrailers++].set = false;
	return 0;
}

int gaz_http_resp_trailer(struct gaz_http_resp *resp, const char *name, const char *fmt, ...)
{
	va_list ap;

	if (resp->state == R_DONE)
		return GAZ_EINVAL;
	for (size_t i = 0; i < resp->ntrailers; i++) {
		if (strcasecmp(resp->trailers[i].name, name))
			continue;
		va_start(ap, fmt);
		vsnprintf(resp->trailers[i].value, sizeof(resp->trailers[i].value), fmt, ap);
		va_end(ap);
		/* Error text may span lines; a field value may not. */
		for (char *p = resp->trailers[i].value; (p = strpbrk(p, "\r\n"));)
			*p = ' ';
		resp->trailers[i].set = true;
		return 0;
	}
	return GAZ_EINVAL;
}

void gaz_http_resp_close(struct gaz_http_resp *resp)
{
	if (resp->state == R_NEW)
		resp->c->close = true;
}

/* Composes the status line and header fields into c->out; returns length. */
static size_t build_head(struct gaz_http_resp *resp, enum framing fr, uint64_t clen)
{
	struct gaz__http_conn *c = resp->c;
	char date[64], *o = c->out;
	size_t cap = sizeof(c->out), n;

	http_date(date, sizeof(date));
	n = (size_t)snprintf(o, cap, "HTTP/1.1 %d %s\r\nDate: %s\r\n", resp->status,
			     gaz_http_status_text(resp->status), date);
	memcpy(o + n, resp->hdr, resp->hlen);
	n += resp->hlen;
	if (fr == F_FIXED)
		n += (size_t)snprintf(o + n, cap - n, "Content-Length: %llu\r\n",
				      (unsigned long long)clen);
	if (fr == F_CHUNKED)
		n += (size_t)snprintf(o + n, cap - n, "Transfer-Encoding: chunked\r\n");
	for (size_t i = 0; fr == F_CHUNKED && i < resp->ntrailers; i++)
		n += (size_t)snprintf(o + n, cap - n, "%s%s%s", i ? ", " : "Trailer: ",
				      resp->trailers[i].name,
				      i + 1 == resp->ntrailers ? "\r\n" : "");
	if (c->close)
		n += (size_t)snprintf(o + n, cap - n, "Connection: close\r\n");
	else if (resp->req->version == 10)
		n += (size_t)snprintf(o + n, cap - n, "Connection: keep-alive\r\n");
	n += (size_t)snprintf(o + n, cap - n, "\r\n");
	return n;
}

static int fail_write(struct gaz_http_resp *resp, int rc)
{
	resp->err = rc;
	resp->c->close = true;
	return rc;
}

int gaz_http_resp_send(struct gaz_http_resp *resp, const void *body, size_t len)
{
	bool with_body = status_has_body(resp->status);
	struct iovec iov[2];
	int rc;

	if (resp->state != R_NEW)
		return GAZ_EINVAL;
	resp->state = R_DONE;
	iov[0].iov_len = build_head(resp, with_body ? F_FIXED : F_NONE, len);
	iov[0].iov_base = resp->c->out;
	iov[1].iov_base = (void *)body;
	iov[1].iov_len = len;
	rc = send_iov(resp->c, iov, with_body && !resp->head_only && len ? 2 : 1);
	return rc ? fail_write(resp, rc) : 0;
}

int gaz_http_resp_error(struct gaz_http_resp *resp, int code, const char *fmt, ...)
{
	char body[1024];
	va_list ap;
	int n;

	if (resp->state != R_NEW)
		return GAZ_EINVAL;
	va_start(ap, fmt);
	n = vsnprintf(body, sizeof(body) - 1, fmt, ap);
	va_end(ap);
	n = n < 0 ? 0 : (n > (int)sizeof(body) - 2 ? (int)sizeof(body) - 2 : n);
	body[n++] = '\n';
	resp->hlen = 0; /* as Go's http.Error, only these headers */
	if (gaz_http_resp_status(resp, code))
		return GAZ_EINVAL;
	gaz_http_resp_header(resp, "Content-Type", "text/plain; charset=utf-8");
	gaz_http_resp_header(resp, "X-Content-Type-Options", "nosniff");
	return gaz_http_resp_send(resp, body, (size_t)n);
}

/* Puts the header for a streamed body into iov[0]. */
static void start_stream(struct gaz_http_resp *resp, struct iovec *iov, int *n)
{
	enum framing fr = F_CHUNKED;

	if (resp->head_only || !status_has_body(resp->status)) {
		fr = F_NONE;
	} else if (resp->req->version == 10) {
		fr = F_UNTIL_CLOSE;
		resp->c->close = true;
	}
	resp->chunked = fr == F_CHUNKED;
	resp->state = R_STREAM;
	iov[0].iov_len = build_head(resp, fr, 0);
	iov[0].iov_base = resp->c->out;
	*n = 1;
}

int gaz_http_resp_write(struct gaz_http_resp *resp, const void *buf, size_t len)
{
	struct iovec iov[4];
	char size[24];
	int n = 0, rc;

	if (resp->err)
		return resp->err;
	if (resp->state == R_DONE)
		return GAZ_EINVAL;
	if (resp->state == R_NEW)
		start_stream(resp, iov, &n);
	bool body = len && !resp->head_only && status_has_body(resp->status);
	if (body && resp->chunked) {
		iov[n].iov_base = size;
		iov[n++].iov_len = (size_t)snprintf(size, sizeof(size), "%zx\r\n", len);
	}
	if (body) {
		iov[n].iov_base = (void *)buf;
		iov[n++].iov_len = len;
	}
	if (body && resp->chunked) {
		iov[n].iov_base = (void *)"\r\n";
		iov[n++].iov_len = 2;
	}
	if (n && (rc = send_iov(resp->c, iov, n)))
		return fail_write(resp, rc);
	return 0;
}

/* The last chunk and the trailer section. */
static int end_chunks(struct gaz_http_resp *resp)
{
	char *o = resp->c->out;
	size_t cap = sizeof(resp->c->out), n;

	n = (size_t)snprintf(o, cap, "0\r\n");
	for (size_t i = 0; i < resp->ntrailers; i++)
		if (resp->trailers[i].set)
			n += (size_t)snprintf(o + n, cap - n, "%s: %s\r\n", resp->trailers[i].name,
					      resp->trailers[i].value);
	n += (size_t)snprintf(o + n, cap - n, "\r\n");
	return send_str(resp->c, o, n);
}

int gaz_http_resp_finish(struct gaz_http_resp *resp)
{
	int rc = 0;

	if (resp->state == R_DONE || resp->err)
		return resp->err;
	if (resp->state == R_NEW && resp->ntrailers && resp->req->version == 11 &&
	    !resp->head_only && status_has_body(resp->status))
		rc = gaz_http_resp_write(resp, NULL, 0); /* trailers need chunking */
	else if (resp->state == R_NEW)
		return gaz_http_resp_send(resp, NULL, 0);
	if (!rc && resp->chunked)
		rc = end_chunks(resp);
	resp->state = R_DONE;
	return rc ? fail_write(resp, rc) : 0;
}

/* ---- dispatch ----------------------------------------------------------------- */

static bool pattern_matches(const char *pattern, const char *path)
{
	size_t n = strlen(pattern);

	if (n && pattern[n - 1] == '/')
		return !strncmp(path, pattern, n);
	return !strcmp(path, pattern);
}

static bool method_matches(const char *want, const char *method)
{
	return !want || !strcmp(want, method) || (!strcmp(want, "GET") && !strcmp(method, "HEAD"));
}

/* The longest pattern matching path and method; *path_hit says whether any
 * route matched the path alone. */
static const struct gaz_http_route *find_route(const struct gaz_http_routes *rt,
					       const struct gaz_http_req *req, bool *path_hit)
{
	const struct gaz_http_route *best = NULL;

	*path_hit = false;
	for (size_t i = 0; i < rt->nroutes; i++) {
		const struct gaz_http_route *r = &rt->routes[i];
		if (!pattern_matches(r->pattern, req->path))
			continue;
		*path_hit = true;
		if (method_matches(r->method, req->method) &&
		    (!best || strlen(r->pattern) > strlen(best->pattern)))
			best = r;
	}
	return best;
}

static void reply_405(const struct gaz_http_routes *rt, const struct gaz_http_req *req,
		      struct gaz_http_resp *resp)
{
	static const char body[] = "Method Not Allowed\n";
	char allow[256] = "";
	size_t n = 0;

	for (size_t i = 0; i < rt->nroutes && n < sizeof(allow) - 1; i++) {
		const char *m = rt->routes[i].method;
		if (!pattern_matches(rt->routes[i].pattern, req->path) || !m || strstr(allow, m))
			continue;
		n += (size_t)snprintf(allow + n, sizeof(allow) - n, "%s%s%s", n ? ", " : "", m,
				      strcmp(m, "GET") ? "" : ", HEAD");
	}
	gaz_http_resp_status(resp, 405);
	gaz_http_resp_header(resp, "Allow", "%s", allow);
	gaz_http_resp_header(resp, "Content-Type", "text/plain; charset=utf-8");
	gaz_http_resp_header(resp, "X-Content-Type-Options", "nosniff");
	gaz_http_resp_send(resp, body, sizeof(body) - 1);
}

/* Discards what the handler left of the body, or gives up on the connection. */
static void drain_body(struct gaz__http_conn *c, struct gaz_http_req *req)
{
	char sink[4096];
	size_t total = 0;
	ssize_t n = 1;

	if (c->bst == B_DONE)
		return;
	if (c->close || (c->expect_continue && !c->continue_sent)) {
		c->close = true;
		return;
	}
	while (total < DRAIN_MAX && (n = gaz_http_req_read(req, sink, sizeof(sink))) > 0)
		total += (size_t)n;
	if (n != 0)
		c->close = true;
}

static void serve_one(struct gaz__http_conn *c, struct gaz_http_req *req)
{
	struct gaz_http_resp *resp = c->resp;
	const struct gaz_http_route *route;
	bool path_hit;
	int rc = 0;

	memset(resp, 0, offsetof(struct gaz_http_resp, hdr));
	resp->ntrailers = 0;
	resp->c = c;
	resp->req = req;
	resp->status = 200;
	resp->head_only = !strcmp(req->method, "HEAD");
	route = find_route(c->cfg, req, &path_hit);
	if (route)
		rc = route->fn(req, resp, route->arg);
	else if (path_hit)
		reply_405(c->cfg, req, resp);
	else
		gaz_http_resp_error(resp, 404, "404 page not found");
	if (rc < 0 && resp->state == R_STREAM) {
		c->close = true; /* abort: the client must not take it as complete */
		return;
	}
	if (rc < 0 && resp->state == R_NEW)
		gaz_http_resp_error(resp, 500, "internal server error");
	gaz_http_resp_finish(resp);
	if (!resp->err)
		drain_body(c, req);
}

/* ---- the connection loop ----------------------------------------------------------- */

static int conn_init(struct gaz__http_conn *c, int fd, const char *peer,
		     const struct gaz_http_routes *rt)
{
	memset(c, 0, offsetof(struct gaz__http_conn, out));
	c->fd = fd;
	c->peer = peer;
	c->cfg = rt;
	c->max_head = rt->max_header_bytes ? rt->max_header_bytes : DEF_MAX_HEAD;
	c->cap = c->max_head + READ_AHEAD;
	c->scap = 2 * c->max_head + 4 * GAZ_HTTP_MAX_PARAMS + 64;
	c->buf = malloc(c->cap);
	c->scratch = malloc(c->scap);
	c->resp = malloc(sizeof(*c->resp));
	if (!c->buf || !c->scratch || !c->resp)
		return GAZ_ENOMEM;
	set_timeout(fd, SO_RCVTIMEO, rt->idle_timeout_ms ? rt->idle_timeout_ms : DEF_TIMEOUT_MS);
	set_timeout(fd, SO_SNDTIMEO,
		    rt->write_timeout_ms ? (rt->write_timeout_ms < 0 ? 0 : rt->write_timeout_ms)
					 : DEF_TIMEOUT_MS);
	return 0;
}

void gaz_http_serve_conn(int fd, const char *peer, const struct gaz_http_routes *routes)
{
	struct gaz__http_conn *c = malloc(sizeof(*c));
	struct gaz_http_req *req = malloc(sizeof(*req));
	int rc;

	if (c && req && !conn_init(c, fd, peer, routes)) {
		for (;;) {
			rc = read_head(c);
			if (rc == GAZ_ERANGE)
				reply_status(c, 431);
			if (rc)
				break;
			if ((rc = parse_request(c, req))) {
				reply_status(c, rc);
				break;
			}
			serve_one(c, req);
			if (c->close)
				break;
		}
	}
	if (c) {
		free(c->buf);
		free(c->scratch);
		free(c->resp);
	}
	free(c);
	free(req);
	lingering_close(fd);
}
