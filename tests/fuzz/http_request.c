/*
 * http_request.c - fuzz target: what a client sends to the broker's HTTP
 * port. The bytes go into one end of an in-process socketpair (no network)
 * and lib/common/http.c's gaz_http_serve_conn serves the other end with
 * the broker's routes (broker/http.c gaz_http_conn): request lines,
 * headers, targets and query strings, percent-decoding, Content-Length and
 * chunked bodies, Expect, pipelining, keep-alive and close. The handlers
 * are the broker's up to the point where they would call the broker over
 * gRPC (broker/http.c and http_v1.c are included here for it):
 *   /debug/ready      answers;
 *   /v1/...           CORS, OPTIONS, the JSON body read and decoded as a
 *                     ListRequest or ReadRequest (read_request, with the
 *                     socket's body reads), then validated as the broker's
 *                     List and Read handlers validate them;
 *   /<journal>        GET/HEAD: gateway_read_request (query to a validated
 *                     ReadRequest); PUT: the AppendRequest check, then the
 *                     body read to its end as put_body reads it.
 * A thread writes what does not fit the socket's buffer and reads every
 * response, so the server never blocks on a full socket.
 *
 * Input: the bytes a client sends on one connection.
 */
#include "fuzz.h"

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../broker/http.c"
#include "../../broker/http_v1.c"

/* broker/main.c's, which the broker's /debug/ready calls; main.c is not
 * linked into fuzz targets and this target serves its own ready route. */
char *gaz_broker_exit_report(struct gaz_broker *b)
{
	(void)b;
	return NULL;
}

static int fz_ready(struct gaz_http_req *req, struct gaz_http_resp *resp, void *arg)
{
	(void)req, (void)arg;
	return gaz_http_resp_send(resp, "ready\n", 6);
}

static int fz_v1(struct gaz_http_req *req, struct gaz_http_resp *resp, void *arg)
{
	struct gaz_broker *b = arg;
	bool post = !strcmp(req->method, "POST");
	const ProtobufCMessageDescriptor *desc = NULL;
	ProtobufCMessage *rq = NULL;
	struct gaz_status st = {0};
	int rc = 0;

	cors(req, resp, b);
	if (!strcmp(req->method, "OPTIONS")) {
		gaz_http_resp_status(resp, 200);
		return gaz_http_resp_send(resp, "", 0);
	}
	if (post && !strcmp(req->path, "/v1/journals/list"))
		desc = &protocol__list_request__descriptor;
	else if (post && !strcmp(req->path, "/v1/journals/read"))
		desc = &protocol__read_request__descriptor;
	else
		return proto_error(resp, 12, "Not Implemented");
	if (read_request(req, resp, desc, &rq, &rc))
		return rc;
	if (desc == &protocol__list_request__descriptor)
		rc = gaz_validate_list_request((Protocol__ListRequest *)rq, &st);
	else
		rc = gaz_validate_read_request((Protocol__ReadRequest *)rq, &st);
	protobuf_c_message_free_unpacked(rq, NULL);
	if (rc)
		return proto_error(resp, 3, st.msg);
	stream_header(resp);
	return gaz_http_resp_finish(resp);
}

static int fz_gateway(struct gaz_http_req *req, struct gaz_http_resp *resp, void *arg)
{
	Protocol__ReadRequest rr = PROTOCOL__READ_REQUEST__INIT;
	Protocol__AppendRequest first = PROTOCOL__APPEND_REQUEST__INIT;
	struct gaz_status st = {0};
	char buf[4096];
	ssize_t n;

	(void)arg;
	if (!strcmp(req->method, "GET") || !strcmp(req->method, "HEAD")) {
		if (gateway_read_request(req, &rr, &st))
			return gaz_http_resp_error(resp, 400, "%s", st.msg);
		gaz_http_resp_status(resp, 206);
		return gaz_http_resp_send(resp, "", 0);
	}
	if (!strcmp(req->method, "PUT")) {
		first.journal = (char *)req->path + 1;
		if (gaz_validate_append_request(&first, &st))
			return gaz_http_resp_error(resp, 400, "%s", st.msg);
		while ((n = gaz_http_req_read(req, buf, sizeof(buf))) > 0)
			;
		if (n < 0)
			return gaz_http_resp_error(resp, 500, "append failed: body");
		gaz_http_resp_status(resp, 204);
		return gaz_http_resp_send(resp, "", 0);
	}
	return gaz_http_resp_error(resp, 400, "unknown method: %s", req->method);
}

struct peer {
	int fd;
	const uint8_t *data;
	size_t size, sent;
};

/* The client side: the rest of the input, then read until the server ends. */
static void *client(void *arg)
{
	struct peer *p = arg;
	char sink[16384];

	while (p->sent < p->size) {
		ssize_t w = send(p->fd, p->data + p->sent, p->size - p->sent, MSG_NOSIGNAL);
		if (w <= 0)
			break;
		p->sent += (size_t)w;
	}
	shutdown(p->fd, SHUT_WR);
	while (recv(p->fd, sink, sizeof(sink), 0) > 0)
		;
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char *origins[] = {"https://example.com"};
	static struct gaz_broker b = {.cfg.allow_origin = {.v = origins, .n = 1}};
	struct gaz_http_route routes[] = {
		{.method = "GET", .pattern = "/debug/ready", .fn = fz_ready, .arg = &b},
		{.method = "GET", .pattern = "/debug/metrics", .fn = fz_ready, .arg = &b},
		{.method = NULL, .pattern = "/v1/", .fn = fz_v1, .arg = &b},
		{.method = NULL, .pattern = "/", .fn = fz_gateway, .arg = &b},
	};
	struct gaz_http_routes table = {.routes = routes,
					.nroutes = sizeof(routes) / sizeof(routes[0]),
					.idle_timeout_ms = 5000,
					.write_timeout_ms = 5000};
	struct peer p = {.data = data, .size = size};
	pthread_t t;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		abort();
	p.fd = sv[1];
	/* What fits goes in before the server starts, so that most inputs are
	 * served from one buffered read, deterministically. */
	while (p.sent < size) {
		ssize_t w = send(sv[1], data + p.sent, size - p.sent, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w <= 0)
			break;
		p.sent += (size_t)w;
	}
	if (pthread_create(&t, NULL, client, &p))
		abort();
	gaz_http_serve_conn(sv[0], "fuzz", &table);
	close(sv[0]);
	pthread_join(t, NULL);
	close(sv[1]);
	return 0;
}
