/*
 * http.h - a small blocking HTTP/1.1 server for one connection.
 *
 * The listener (elsewhere) accepts a socket and calls gaz_http_serve_conn on
 * some thread; that thread then reads requests, dispatches each to a route
 * handler and writes responses, until the peer closes, asks to close, goes
 * idle past the timeout, or the request stream turns malformed. Nothing here
 * starts threads or polls other sockets.
 *
 * What it covers is what Gazette's broker serves over HTTP/1.1 (facts
 * §8.3): the /debug/ endpoints, the /v1/ REST gateway, and the journal gateway
 * (GET/HEAD reads streamed as chunks with an `X-Close-Error` trailer, PUT
 * appends with Content-Length or chunked bodies, as curl -T - and Go clients
 * send). Semantics follow RFC 9112 and Go's net/http where they differ in
 * detail:
 *   - keep-alive by default for HTTP/1.1, `Connection: close` honoured;
 *     HTTP/1.0 keep-alive only when asked for and the response has a length;
 *   - request line + headers bounded (default 16 KiB) -> 431; at most
 *     GAZ_HTTP_MAX_HEADERS header fields -> 431; malformed -> 400; an
 *     HTTP/1.1 request without Host -> 400; unsupported Transfer-Encoding
 *     -> 501; unknown HTTP major version -> 505;
 *   - `Expect: 100-continue` answered on the handler's first body read;
 *   - no route for the path -> 404 "404 page not found"; a route for the
 *     path but not the method -> 405 with Allow;
 *   - HEAD: routes for GET also serve HEAD; the response carries the
 *     headers but no body bytes;
 *   - unread request body is drained (up to 256 KiB) after the handler, or
 *     the connection is closed;
 *   - writes use MSG_NOSIGNAL; a stalled peer fails writes after the write
 *     timeout.
 */
#ifndef GAZ_COMMON_HTTP_H
#define GAZ_COMMON_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"

#define GAZ_HTTP_MAX_HEADERS 100
#define GAZ_HTTP_MAX_PARAMS 64

struct gaz__http_conn; /* per-connection state, private to http.c */
struct gaz_http_resp;  /* one response, private to http.c */

/* A name/value pair; both NUL-terminated, borrowed. */
struct gaz_http_kv {
	const char *key;
	const char *value;
};

/* A parsed request. Every pointer is borrowed and valid until the handler
 * returns. */
struct gaz_http_req {
	const char *method;   /* as sent, case-sensitive: "GET", "PUT" */
	const char *target;   /* raw request-target: "/a/b?offset=1" */
	const char *path;     /* percent-decoded path: "/a/b" */
	const char *raw_path; /* path as sent, without the query */
	const char *query;    /* raw query after '?'; "" if none */
	const char *peer;     /* as passed to gaz_http_serve_conn; may be NULL */
	int version;          /* 10 or 11 (HTTP/1.0, HTTP/1.1) */
	int64_t content_length; /* declared body length; -1 if chunked */
	bool chunked;         /* body uses chunked transfer coding */
	size_t nheaders;
	struct gaz_http_kv headers[GAZ_HTTP_MAX_HEADERS]; /* in order received */
	size_t nparams;
	struct gaz_http_kv params[GAZ_HTTP_MAX_PARAMS]; /* decoded query, in order */
	struct gaz__http_conn *conn_; /* internal */
};

/* A handler answers one request through `resp`. It returns 0, or a negative
 * GAZ_E* code: if nothing was sent yet the server answers 500; if a streamed
 * body was under way the connection is closed without terminating it (the
 * client sees a truncated response). A handler that sends nothing gets its
 * status (default 200) with an empty body. Runs on the connection's thread. */
typedef int (*gaz_http_handler_fn)(struct gaz_http_req *req, struct gaz_http_resp *resp,
				   void *arg);

struct gaz_http_route {
	const char *method;  /* "GET" (also serves HEAD), "PUT", ...; NULL = any */
	const char *pattern; /* "/debug/ready" matches exactly; "/v1/" (trailing
	                      * '/') matches every path under it; the longest
	                      * matching pattern wins, as Go's ServeMux */
	gaz_http_handler_fn fn;
	void *arg;           /* passed to fn; borrowed */
};

/* Routes and limits for a connection. Borrowed for the whole call. */
struct gaz_http_routes {
	const struct gaz_http_route *routes;
	size_t nroutes;
	int idle_timeout_ms;     /* idle keep-alive and body-read timeout; 0 = 60000 */
	int write_timeout_ms;    /* a send stalled this long fails; 0 = 60000, <0 = none */
	size_t max_header_bytes; /* request line + headers; 0 = 16384 */
};

/* gaz_http_serve_conn serves requests on connected socket `fd` until the
 * connection ends, then shuts down its write side and returns. It does not
 * close `fd`: the caller owns it and closes it afterwards. Sets SO_RCVTIMEO
 * and SO_SNDTIMEO on `fd`. `peer` (e.g. "10.0.0.1:4321", may be NULL) is
 * exposed to handlers as req->peer. Another thread may end a connection
 * early with shutdown(fd, SHUT_RDWR). Out of memory closes the connection. */
void gaz_http_serve_conn(int fd, const char *peer, const struct gaz_http_routes *routes);

/* --- request ----------------------------------------------------------- */

/* gaz_http_req_header returns the first value of header `name` (compared
 * case-insensitively), or NULL. */
const char *gaz_http_req_header(const struct gaz_http_req *req, const char *name);

/* gaz_http_req_param returns the first decoded value of query parameter
 * `key` (compared case-insensitively, as Gazette's gateway decodes its
 * query), or NULL. A key without '=' has value "". */
const char *gaz_http_req_param(const struct gaz_http_req *req, const char *key);

/* gaz_http_req_read reads up to `cap` bytes of the request body into `buf`,
 * decoding chunked transfer coding; streaming, so large bodies are never
 * buffered whole. Sends "100 Continue" first if the client expects it.
 * Returns the byte count (> 0), 0 at the end of the body, or GAZ_ETIMEDOUT
 * (no bytes within the idle timeout), GAZ_EPROTO (malformed chunking or the
 * peer closed early) or GAZ_EIO; errors are sticky and close the connection
 * after the response. */
ssize_t gaz_http_req_read(struct gaz_http_req *req, void *buf, size_t cap);

/* gaz_http_req_peer_closed reports, without blocking, whether the peer has
 * closed or reset the connection (for handlers blocked producing a stream,
 * as Gazette's gateway watches its request context). */
bool gaz_http_req_peer_closed(const struct gaz_http_req *req);

/* --- response ---------------------------------------------------------- */

/* gaz_http_resp_status sets the status code (100 < code < 600; default
 * 200). GAZ_EINVAL once the header has been sent or for a bad code. */
int gaz_http_resp_status(struct gaz_http_resp *resp, int code);

/* gaz_http_resp_header adds a header field. `name` must be a token and not
 * one the server manages (Content-Length, Transfer-Encoding, Connection,
 * Trailer, Date); the value must not contain CR or LF. GAZ_EINVAL for
 * those, once the header has been sent, GAZ_ERANGE past 8 KiB of headers. */
int gaz_http_resp_header(struct gaz_http_resp *resp, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* gaz_http_resp_declare_trailer announces trailer field `name` in a
 * `Trailer:` header; its value is given later by gaz_http_resp_trailer and
 * sent after the last chunk. Declaring makes the response chunked (for
 * HTTP/1.1 clients). Same errors as gaz_http_resp_header. */
int gaz_http_resp_declare_trailer(struct gaz_http_resp *resp, const char *name);

/* gaz_http_resp_trailer sets the value of a declared trailer (GAZ_EINVAL if
 * `name` was not declared or the response is finished). */
int gaz_http_resp_trailer(struct gaz_http_resp *resp, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* gaz_http_resp_send sends the whole response: header with Content-Length
 * `len`, then `body` (`len` bytes, borrowed; NULL when len is 0). No body is
 * written for HEAD, 1xx, 204 or 304. Finishes the response. Returns 0,
 * GAZ_EINVAL if something was already sent, GAZ_EIO / GAZ_ETIMEDOUT on a
 * write failure. */
int gaz_http_resp_send(struct gaz_http_resp *resp, const void *body, size_t len);

/* gaz_http_resp_error sends a text/plain response `code` whose body is the
 * formatted message plus "\n", with X-Content-Type-Options: nosniff (Go's
 * http.Error). Errors as gaz_http_resp_send. */
int gaz_http_resp_error(struct gaz_http_resp *resp, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* gaz_http_resp_write streams `len` bytes (borrowed) as one chunk, sending
 * the header first if needed, and returns once the bytes are handed to the
 * kernel: each call flushes. Zero-length writes send nothing (only the
 * header, if not yet sent). HTTP/1.0 clients get the raw bytes and the
 * connection closes at the end; HEAD discards the bytes. Returns 0,
 * GAZ_EINVAL after a fixed-length send or finish, GAZ_EIO / GAZ_ETIMEDOUT
 * (sticky) on write failure, e.g. the client went away. */
int gaz_http_resp_write(struct gaz_http_resp *resp, const void *buf, size_t len);

/* gaz_http_resp_finish ends the response: for a streamed body the last
 * chunk and the trailers; for an untouched response its status with an
 * empty body. Called by the server after the handler if the handler did
 * not. Returns 0 or a write error; idempotent. */
int gaz_http_resp_finish(struct gaz_http_resp *resp);

/* gaz_http_resp_close asks for the connection to close after this
 * response (adds `Connection: close` if the header is not yet sent). */
void gaz_http_resp_close(struct gaz_http_resp *resp);

/* gaz_http_status_text returns the reason phrase for `code` ("Not Found"),
 * or "" for codes it does not know. */
const char *gaz_http_status_text(int code);

#endif
