/*
 * http_v1.c - the /v1/ REST gateway (facts §8.3): POST /v1/journals/list and
 * POST /v1/journals/read, as Gazette serves them through grpc-gateway v1.16
 * (protocol.pb.gw.go, runtime.ForwardResponseStream) with gogo/gateway's
 * JSONPb{EmitDefaults: true}, behind its CORS wrapper
 * (mainboilerplate.ServiceConfig.CORSWrapper).
 *
 * Exchange, as Gazette's:
 *   - the body is one JSON ListRequest / ReadRequest (see common/pbjson.h);
 *     an empty body or `null` is the empty request; bytes after the first JSON value
 *     are ignored (Go's json.Decoder reads one value);
 *   - a body that does not decode -> 400 with a google.rpc.Status object
 *     {"code":3,"message":...,"details":[]} and a Content-Length;
 *   - otherwise the RPC runs over loopback on this broker's own gRPC port,
 *     with the request's Authorization header as the call's metadata, and
 *     each response message is written as `{"result":{...}}\n`, one chunk
 *     each, flushed; the response is 200, Content-Type application/json,
 *     with the server's gRPC content-type echoed as Grpc-Metadata-Content-Type;
 *   - a non-OK gRPC status ends the body with an error object
 *     {"error":{"grpcCode","httpCode","message","httpStatus","details"}}
 *     without a trailing newline; if nothing was written yet, the HTTP
 *     status is httpCode (grpc-gateway's HTTPStatusFromCode);
 *   - any other /v1/ path or method -> 501 {"code":12,"message":"Not
 *     Implemented","details":[]} (grpc-gateway's ErrUnknownURI);
 *   - OPTIONS -> 200 with an empty body; an Origin listed by
 *     --broker.allow-origin gets the Access-Control-Allow-* headers.
 * The client going away cancels the RPC (Gazette's request context).
 *
 * Must not block while holding broker locks: it holds none.
 */
#include "broker/broker.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/clock.h"
#include "common/http.h"
#include "common/log.h"
#include "common/pbjson.h"

#define V1_MAX_BODY (4u << 20) /* bound on a request body: Gazette's default gRPC receive size */
#define V1_POLL_NS (250 * 1000000LL) /* how often a blocked stream checks the client */

/* grpc-gateway's runtime.HTTPStatusFromCode. */
static int http_code(int grpc)
{
	static const int map[] = {
		[0] = 200,  [1] = 408,  [2] = 500,  [3] = 400,  [4] = 504,  [5] = 404,
		[6] = 409,  [7] = 403,  [8] = 429,  [9] = 400,  [10] = 409, [11] = 400,
		[12] = 501, [13] = 500, [14] = 503, [15] = 500, [16] = 401,
	};
	return grpc >= 0 && grpc < (int)(sizeof(map) / sizeof(map[0])) ? map[grpc] : 500;
}

static int send_json(struct gaz_http_resp *resp, json_t *j, const char *suffix)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	size_t n;
	int rc;

	json_decref(j);
	if (!s)
		return GAZ_ENOMEM;
	n = strlen(s);
	if (suffix[0]) {
		char *t = realloc(s, n + strlen(suffix) + 1);
		if (!t) {
			free(s);
			return GAZ_ENOMEM;
		}
		s = t;
		strcpy(s + n, suffix);
		n = strlen(s);
	}
	rc = gaz_http_resp_write(resp, s, n);
	free(s);
	return rc;
}

/* A whole-response error: google.rpc.Status as grpc-gateway's
 * DefaultHTTPProtoErrorHandler writes it. */
static int proto_error(struct gaz_http_resp *resp, int grpc, const char *msg)
{
	json_t *j = json_pack("{s:i, s:s, s:[]}", "code", grpc, "message", msg, "details");
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	int rc;

	json_decref(j);
	if (!s)
		return GAZ_ENOMEM;
	gaz_http_resp_status(resp, http_code(grpc));
	gaz_http_resp_header(resp, "Content-Type", "application/json");
	rc = gaz_http_resp_send(resp, s, strlen(s));
	free(s);
	return rc;
}

/* The final chunk of a stream that ended in a non-OK status. */
static int stream_error(struct gaz_http_resp *resp, bool started, const struct gaz_status *st)
{
	int code = http_code(st->grpc);
	json_t *j;

	if (!started) {
		gaz_http_resp_status(resp, code);
		gaz_http_resp_header(resp, "Content-Type", "application/json");
	}
	j = json_pack("{s:{s:i, s:i, s:s, s:s, s:[]}}", "error", "grpcCode", st->grpc, "httpCode",
		      code, "message", st->msg, "httpStatus", gaz_http_status_text(code), "details");
	return send_json(resp, j, "");
}

/* decode_body decodes a request body buf[0..len) (borrowed) as `desc`
 * the way grpc-gateway's JSONPb does: an empty or all-space body and
 * `null` are the empty message, bytes after the first JSON value are
 * ignored. Returns 0 with *out (free with protobuf_c_message_free_unpacked),
 * or non-zero with the reason in `st` (empty when out of memory). No I/O:
 * the fuzz target tests/fuzz/v1_json.c calls it. */
static int decode_body(const char *buf, size_t len, const ProtobufCMessageDescriptor *desc,
		       ProtobufCMessage **out, struct gaz_status *st)
{
	json_error_t jerr;
	json_t *j = NULL;
	size_t i;

	/* JSON's white space only: strchr would also match a NUL byte. */
	for (i = 0; i < len && buf[i] && strchr(" \t\r\n", buf[i]); i++)
		;
	if (i == len)
		j = json_object(); /* io.EOF: the empty request */
	else if (!(j = json_loadb(buf, len, JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY, &jerr)))
		gaz_status_set(st, GAZ_EINVAL, "invalid JSON: %s (line %d, column %d)", jerr.text,
			       jerr.line, jerr.column);
	else if (json_is_null(j)) { /* jsonpb reads null as the empty message */
		json_decref(j);
		j = json_object();
	}
	if (j && gaz_pbjson_decode(j, desc, out, st) == 0) {
		json_decref(j);
		return 0;
	}
	json_decref(j);
	return GAZ_EINVAL;
}

/* Reads the whole body (at most V1_MAX_BODY) and decodes it as `desc`.
 * Returns 0, or answers the client itself and returns 1. */
static int read_request(struct gaz_http_req *req, struct gaz_http_resp *resp,
			const ProtobufCMessageDescriptor *desc, ProtobufCMessage **out, int *rc)
{
	struct gaz_status st = {0};
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	int drc;

	for (ssize_t n = 1; buf && n > 0;) {
		if (len == cap) {
			char *t = cap < V1_MAX_BODY + 1 ? realloc(buf, cap * 2) : NULL;
			if (!t) {
				free(buf);
				*rc = proto_error(resp, 3, "request body too large");
				return 1;
			}
			buf = t;
			cap *= 2;
		}
		if ((n = gaz_http_req_read(req, buf + len, cap - len)) < 0) {
			free(buf);
			*rc = proto_error(resp, 3, "reading the request body failed");
			return 1;
		}
		len += (size_t)n;
	}
	if (!buf) {
		*rc = GAZ_ENOMEM;
		return 1;
	}
	drc = decode_body(buf, len, desc, out, &st);
	free(buf);
	if (drc == 0)
		return 0;
	*rc = proto_error(resp, 3, st.msg[0] ? st.msg : "out of memory");
	return 1;
}

/* The header of a stream that opened: what grpc-gateway sends once the
 * call's response headers are in. */
static void stream_header(struct gaz_http_resp *resp)
{
	gaz_http_resp_status(resp, 200);
	gaz_http_resp_header(resp, "Content-Type", "application/json");
	gaz_http_resp_header(resp, "Grpc-Metadata-Content-Type", "application/grpc");
}

/* Forwards one server-streaming call's responses as ND-JSON. */
static int forward_stream(struct gaz_http_req *req, struct gaz_http_resp *resp,
			  struct gaz_rpc_stream *s, const ProtobufCMessageDescriptor *resp_desc)
{
	struct gaz_status st = {0};
	bool started = false;
	int rc;

	for (;;) {
		ProtobufCMessage *m = NULL;
		rc = gaz_rpc_stream_recv(s, resp_desc, &m, gaz_mono_ns() + V1_POLL_NS);
		if (rc == GAZ_ETIMEDOUT) {
			if (gaz_http_req_peer_closed(req))
				return GAZ_EIO; /* closes the connection; the caller cancels */
			continue;
		}
		if (rc)
			break;
		if (!started) {
			stream_header(resp);
			started = true;
		}
		json_t *enc = gaz_pbjson_encode(m, NULL);
		protobuf_c_message_free_unpacked(m, NULL);
		if (!enc || (rc = send_json(resp, json_pack("{s:o}", "result", enc), "\n")))
			return enc ? rc : GAZ_ENOMEM;
	}
	if (rc == GAZ_EPROTO) {
		st.grpc = 13;
		gaz_status_set(&st, GAZ_EPROTO, "malformed response message");
	} else if (gaz_rpc_stream_finish(s, &st) == 0) {
		if (!started)
			stream_header(resp);
		return gaz_http_resp_finish(resp);
	}
	if ((rc = stream_error(resp, started, &st)))
		return rc;
	return gaz_http_resp_finish(resp);
}

static int call(struct gaz_http_req *req, struct gaz_http_resp *resp, struct gaz_broker *b,
		const char *method, const ProtobufCMessageDescriptor *req_desc,
		const ProtobufCMessageDescriptor *resp_desc)
{
	ProtobufCMessage *rq = NULL;
	struct gaz_status st = {0};
	struct gaz_rpc_stream *s;
	int rc = 0;

	if (read_request(req, resp, req_desc, &rq, &rc))
		return rc;
	s = gaz_rpc_stream_open(gaz_self_channel(b), method, GAZ_DEADLINE_NEVER, true,
				gaz_http_req_header(req, "Authorization"), &st);
	if (!s || gaz_rpc_stream_send(s, rq) || gaz_rpc_stream_close_send(s)) {
		protobuf_c_message_free_unpacked(rq, NULL);
		if (s && gaz_rpc_stream_finish(s, &st) == 0)
			gaz_status_set(&st, GAZ_ERPC, "loopback call failed");
		gaz_rpc_stream_free(s);
		if (!st.grpc)
			st.grpc = 14;
		if ((rc = stream_error(resp, false, &st)) == 0)
			rc = gaz_http_resp_finish(resp);
		return rc;
	}
	protobuf_c_message_free_unpacked(rq, NULL);
	rc = forward_stream(req, resp, s, resp_desc);
	gaz_rpc_stream_cancel(s); /* a no-op once the status is in */
	gaz_rpc_stream_free(s);
	return rc;
}

/* CORSWrapper: headers for an allowed Origin. */
static void cors(struct gaz_http_req *req, struct gaz_http_resp *resp, const struct gaz_broker *b)
{
	const char *origin = gaz_http_req_header(req, "Origin");

	for (size_t i = 0; origin && i < b->cfg.allow_origin.n; i++) {
		if (strcmp(origin, b->cfg.allow_origin.v[i]))
			continue;
		gaz_http_resp_header(resp, "Access-Control-Allow-Origin", "%s", origin);
		gaz_http_resp_header(resp, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
		gaz_http_resp_header(resp, "Access-Control-Allow-Headers",
				     "Cache-Control, Content-Language, Content-Length, Content-Type, "
				     "Expires, Last-Modified, Pragma, Authorization");
		break;
	}
}

int gaz_http_v1(struct gaz_http_req *req, struct gaz_http_resp *resp, void *arg)
{
	struct gaz_broker *b = arg;
	bool post = !strcmp(req->method, "POST");

	cors(req, resp, b);
	if (!strcmp(req->method, "OPTIONS")) {
		gaz_http_resp_status(resp, 200);
		return gaz_http_resp_send(resp, "", 0);
	}
	if (post && !strcmp(req->path, "/v1/journals/list"))
		return call(req, resp, b, "/protocol.Journal/List", &protocol__list_request__descriptor,
			    &protocol__list_response__descriptor);
	if (post && !strcmp(req->path, "/v1/journals/read"))
		return call(req, resp, b, "/protocol.Journal/Read", &protocol__read_request__descriptor,
			    &protocol__read_response__descriptor);
	return proto_error(resp, 12, "Not Implemented");
}
