/*
 * http.c - HTTP/1.1 on the broker's service port (facts §8.3):
 * /debug/ready (200 only while announced and not exiting; an exiting
 * broker's 503 says what it still waits for), /debug/metrics
 * (Prometheus text), and the journal gateway: GET/HEAD /<journal>?offset=&block=
 * as a Read, PUT /<journal> as one Append. The gateway calls this broker's
 * own gRPC service over loopback, as Gazette's does. /v1/ (the REST gateway)
 * is in http_v1.c.
 */
#include "broker/broker.h"
#include "protocol/auth.h"
#include "broker/metrics.h"
#include "broker/replica.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/clock.h"
#include "common/http.h"
#include "common/log.h"
#include "common/metrics.h"
#include "fragment/fragment.h"
#include "protocol/validate.h"

static int ready(struct gaz_http_req *req, struct gaz_http_resp *resp, void *arg)
{
	struct gaz_broker *b = arg;
	bool ok = atomic_load(&b->announced) && !atomic_load(&b->exiting);

	(void)req;
	if (!ok) {
		char *why = gaz_broker_exit_report(b);
		int rc = gaz_http_resp_error(resp, 503, "%s", why ? why : "not ready");
		free(why);
		return rc;
	}
	/* Ready all the same while a spool's disk is failing: the broker
	 * serves every other journal, and the failing one heals by itself
	 * (gaz_replica_spool_failed); the body says what fails meanwhile. */
	char *faults = gaz_replica_spool_faults(b);
	gaz_http_resp_status(resp, 200);
	int rc = gaz_http_resp_send(resp, faults ? faults : "", faults ? strlen(faults) : 0);
	free(faults);
	return rc;
}

static int metrics(struct gaz_http_req *req, struct gaz_http_resp *resp, void *arg)
{
	struct gaz_status st = {0};
	char *out = NULL;
	size_t len = 0;
	int rc;

	(void)req;
	(void)arg;
	gaz_metric_scrape_begin();
	if (gaz_metrics_render(gaz_metrics_default(), &out, &len, &st)) {
		gaz_metric_scrape_end(500);
		return gaz_http_resp_error(resp, 500, "%s", st.msg);
	}
	gaz_http_resp_status(resp, 200);
	gaz_http_resp_header(resp, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	rc = gaz_http_resp_send(resp, out, len);
	free(out);
	gaz_metric_scrape_end(200);
	return rc;
}

static int status_http_code(int status)
{
	switch (status) {
	case PROTOCOL__STATUS__JOURNAL_NOT_FOUND: return 404;
	case PROTOCOL__STATUS__INSUFFICIENT_JOURNAL_BROKERS: return 503;
	case PROTOCOL__STATUS__OFFSET_NOT_YET_AVAILABLE: return 416;
	}
	return 500;
}

static const char *status_name(int status)
{
	const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(&protocol__status__descriptor,
									    status);
	return v ? v->name : "UNKNOWN";
}

/* Headers of the first (metadata) ReadResponse. */
static void read_headers(struct gaz_http_resp *resp, const Protocol__ReadResponse *m)
{
	gaz_http_resp_header(resp, "Content-Range", "bytes %lld-9223372036854775807/9223372036854775807",
			     (long long)m->offset);
	gaz_http_resp_header(resp, "X-Write-Head", "%lld", (long long)m->write_head);
	if (m->fragment) {
		struct gaz_fragment f = {0};
		char name[GAZ_FRAGMENT_NAME_MAX];
		if (gaz_fragment_from_proto(&f, m->fragment, NULL) == 0 &&
		    gaz_fragment_content_name(&f, name, sizeof(name), NULL) == 0)
			gaz_http_resp_header(resp, "X-Fragment-Name", "%s", name);
		gaz_fragment_release(&f);
	}
	if (m->fragment_url && m->fragment_url[0])
		gaz_http_resp_header(resp, "X-Fragment-Location", "%s", m->fragment_url);
}

/* gateway_read_request fills `rr` from a GET or HEAD of the gateway: the
 * journal is the path after its '/' (borrowed from req, as are all of
 * rr's strings), offset and block come from the query, HEAD asks for
 * metadata only. Returns 0; 1 when the journal is empty or offset or block
 * do not parse (the caller answers "bad request: ..."); GAZ_EINVAL with
 * Gazette's reason in `st` when the request does not validate. No I/O:
 * the fuzz target tests/fuzz/http_request.c calls it. */
static int gateway_read_request(const struct gaz_http_req *req, Protocol__ReadRequest *rr,
				struct gaz_status *st)
{
	const char *off = gaz_http_req_param(req, "offset"), *block = gaz_http_req_param(req, "block");
	char *end = NULL;

	rr->journal = (char *)req->path + 1;
	rr->offset = off ? strtoll(off, &end, 10) : 0;
	if ((off && (!*off || *end || rr->offset < -1)) || !rr->journal[0] ||
	    (block && strcasecmp(block, "true") && strcasecmp(block, "false")))
		return 1;
	rr->block = block && !strcasecmp(block, "true");
	rr->metadata_only = !strcmp(req->method, "HEAD");
	return gaz_validate_read_request(rr, st);
}

static int gateway_get(struct gaz_http_req *req, struct gaz_http_resp *resp, struct gaz_broker *b)
{
	Protocol__ReadRequest rr = PROTOCOL__READ_REQUEST__INIT;
	const char *off = gaz_http_req_param(req, "offset"), *block = gaz_http_req_param(req, "block");
	bool head = !strcmp(req->method, "HEAD"), started = false;
	struct gaz_status st = {0};
	struct gaz_rpc_stream *s;
	char *auth;
	const char *close_err = "";
	int rc;

	rc = gateway_read_request(req, &rr, &st);
	if (rc == 1)
		return gaz_http_resp_error(resp, 400, "bad request: journal %s offset %s block %s",
					   rr.journal[0] ? rr.journal : "(none)", off ? off : "0",
					   block ? block : "false");
	if (rc) /* Gazette: 400 with the reason */
		return gaz_http_resp_error(resp, 400, "%s", st.msg);
	gaz_metric_read_bytes(rr.journal, 0); /* as Gazette's client Reader, made here */
	/* Gazette's gateway signs its own loopback call (§8.3): the caller's
	 * Authorization header is not what authorizes it. */
	auth = gaz_broker_sign(b, GAZ_CAP_READ, rr.journal);
	s = gaz_rpc_stream_open(gaz_self_channel(b), "/protocol.Journal/Read", GAZ_DEADLINE_NEVER, true, auth,
				&st);
	free(auth);
	if (!s || gaz_rpc_stream_send(s, &rr.base) || gaz_rpc_stream_close_send(s)) {
		gaz_rpc_stream_free(s);
		return gaz_http_resp_error(resp, 503, "read failed: %s", st.msg);
	}
	for (;;) {
		Protocol__ReadResponse *m = NULL;
		rc = gaz_rpc_stream_recv(s, &protocol__read_response__descriptor, (ProtobufCMessage **)&m,
					 GAZ_DEADLINE_NEVER);
		if (rc)
			break;
		if (!started) {
			started = true;
			if (m->status != PROTOCOL__STATUS__OK) {
				rc = gaz_http_resp_error(resp, status_http_code(m->status), "%s",
							 status_name(m->status));
				protobuf_c_message_free_unpacked(&m->base, NULL);
				gaz_rpc_stream_free(s);
				return rc;
			}
			gaz_http_resp_status(resp, 206);
			read_headers(resp, m);
			if (!head)
				gaz_http_resp_declare_trailer(resp, "X-Close-Error");
		} else if (m->status != PROTOCOL__STATUS__OK) {
			close_err = status_name(m->status);
		} else if (m->content.len && !head &&
			   gaz_http_resp_write(resp, m->content.data, m->content.len)) {
			protobuf_c_message_free_unpacked(&m->base, NULL);
			break;
		} else {
			gaz_metric_read_bytes(rr.journal, (int64_t)m->content.len);
		}
		protobuf_c_message_free_unpacked(&m->base, NULL);
		if (close_err[0])
			break;
	}
	gaz_rpc_stream_cancel(s);
	gaz_rpc_stream_free(s);
	if (!started)
		return gaz_http_resp_error(resp, 503, "read failed");
	if (!head)
		gaz_http_resp_trailer(resp, "X-Close-Error", "%s",
				      close_err[0] ? close_err : "broker terminated RPC");
	return gaz_http_resp_finish(resp);
}

/* Sends the request body as content chunks of at most 1 MiB. */
static int put_body(struct gaz_http_req *req, const char *journal, struct gaz_rpc_stream *s)
{
	size_t cap = 1 << 20;
	uint8_t *buf = malloc(cap);
	int rc = 0;

	if (!buf)
		return GAZ_ENOMEM;
	for (;;) {
		Protocol__AppendRequest c = PROTOCOL__APPEND_REQUEST__INIT;
		ssize_t n = gaz_http_req_read(req, buf, cap);
		if (n < 0) {
			rc = GAZ_EIO;
			break;
		}
		if (n == 0)
			break;
		c.content.data = buf;
		c.content.len = (size_t)n;
		gaz_metric_append_bytes(journal, n); /* Gazette's Appender counts writes */
		if ((rc = gaz_rpc_stream_send(s, &c.base)))
			break;
	}
	free(buf);
	return rc;
}

static int gateway_put(struct gaz_http_req *req, struct gaz_http_resp *resp, struct gaz_broker *b)
{
	Protocol__AppendRequest first = PROTOCOL__APPEND_REQUEST__INIT, end = first;
	Protocol__AppendResponse *ar = NULL;
	struct gaz_status st = {0};
	struct gaz_rpc_stream *s;
	char *auth;
	int rc;

	first.journal = (char *)req->path + 1;
	if (gaz_validate_append_request(&first, &st)) /* Gazette: 400 with the reason */
		return gaz_http_resp_error(resp, 400, "%s", st.msg);
	gaz_metric_append_bytes(first.journal, 0);
	auth = gaz_broker_sign(b, GAZ_CAP_APPEND, first.journal);
	s = gaz_rpc_stream_open(gaz_self_channel(b), "/protocol.Journal/Append", GAZ_DEADLINE_NEVER, true, auth,
				&st);
	free(auth);
	if (!s)
		return gaz_http_resp_error(resp, 500, "append failed: %s", st.msg);
	rc = gaz_rpc_stream_send(s, &first.base);
	if (!rc && (rc = put_body(req, first.journal, s)) == 0)
		rc = gaz_rpc_stream_send(s, &end.base);
	if (rc) {
		gaz_rpc_stream_cancel(s); /* rolls the append back */
	} else {
		gaz_rpc_stream_close_send(s);
		rc = gaz_rpc_stream_recv(s, &protocol__append_response__descriptor,
					 (ProtobufCMessage **)&ar, GAZ_DEADLINE_NEVER);
	}
	if (rc || gaz_rpc_stream_finish(s, &st) || !ar || ar->status != PROTOCOL__STATUS__OK) {
		rc = gaz_http_resp_error(resp, 500, "append failed: %s",
					 ar ? status_name(ar->status) : st.msg);
	} else {
		uint8_t sum[20];
		char hex[41];
		gaz_sha1sum_from_proto(ar->commit->sum, sum);
		for (int i = 0; i < 20; i++)
			snprintf(hex + 2 * i, 3, "%02x", sum[i]);
		gaz_http_resp_status(resp, 204);
		gaz_http_resp_header(resp, "X-Commit-Begin", "%lld", (long long)ar->commit->begin);
		gaz_http_resp_header(resp, "X-Commit-End", "%lld", (long long)ar->commit->end);
		gaz_http_resp_header(resp, "X-Write-Head", "%lld", (long long)ar->commit->end);
		gaz_http_resp_header(resp, "X-Commit-SHA1-Sum", "%s", hex);
		rc = gaz_http_resp_send(resp, "", 0);
	}
	if (ar)
		protobuf_c_message_free_unpacked(&ar->base, NULL);
	gaz_rpc_stream_free(s);
	return rc;
}

static int gateway(struct gaz_http_req *req, struct gaz_http_resp *resp, void *arg)
{
	if (!strcmp(req->method, "GET") || !strcmp(req->method, "HEAD"))
		return gateway_get(req, resp, arg);
	if (!strcmp(req->method, "PUT"))
		return gateway_put(req, resp, arg);
	return gaz_http_resp_error(resp, 400, "unknown method: %s", req->method); /* as Gazette */
}

void gaz_http_conn(int fd, const char *peer, void *arg)
{
	struct gaz_http_route routes[] = {
		{.method = "GET", .pattern = "/debug/ready", .fn = ready, .arg = arg},
		{.method = "GET", .pattern = "/debug/metrics", .fn = metrics, .arg = arg},
		{.method = NULL, .pattern = "/v1/", .fn = gaz_http_v1, .arg = arg},
		{.method = NULL, .pattern = "/", .fn = gateway, .arg = arg},
	};
	struct gaz_http_routes table = {.routes = routes, .nroutes = sizeof(routes) / sizeof(routes[0])};

	gaz_http_serve_conn(fd, peer, &table);
	close(fd);
}
