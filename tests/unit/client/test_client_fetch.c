/*
 * test_client_fetch.c - direct fragment reads (client_fetch.c, facts §7.3):
 * file:// URL to file-root mapping (Go's http.Dir rules), fragment files
 * of every codec read from an offset to exactly their end, the errors for
 * short and long bodies, and http:// fetches from a small HTTP/1.1 server
 * in this process (Accept-Encoding per codec, Content-Encoding handling,
 * non-200 answers, bodies larger than the transfer buffer).
 *
 * Lock rule: srv.mu guards the server's answer (status, encoding, body,
 * len) and the last request it received. The test thread sets the one and
 * reads the other, the server thread the reverse, each under srv.mu: the
 * socket between them orders them in fact, but no tool sees that order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/lib/client_int.h"
#include "fragment/codec.h"

static char root[] = "/tmp/gaz-fetch-XXXXXX";
static struct gaz_client *g_client;

/* ---- file:// mapping ------------------------------------------------------ */

static void test_file_url_path(void **state)
{
	static const char *const ok[][3] = {
		{"/root", "file:///a/b.gz", "/root/a/b.gz"},
		{"/root/", "file:///a/b.gz", "/root/a/b.gz"},
		{"/root", "file://host/a/b.gz", "/root/a/b.gz"},
		{"/root", "file:///a/../../../etc/passwd", "/root/etc/passwd"},
		{"/root", "file:///a/./b//c", "/root/a/b/c"},
		{"/root", "file:///a%20b/c%2Fd?x=1#frag", "/root/a b/c/d"},
		{"", "file:///a", "./a"},
	};
	struct gaz_status st = {0};
	char out[256];

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(gaz__file_url_path(ok[i][0], ok[i][1], out, sizeof(out), &st), 0);
		assert_string_equal(out, ok[i][2]);
	}
	assert_int_equal(gaz__file_url_path("/r", "http://x/a", out, sizeof(out), &st), GAZ_EINVAL);
	gaz_status_clear(&st);
	assert_int_equal(gaz__file_url_path("/r", "file:///a%zz", out, sizeof(out), &st),
			 GAZ_EINVAL);
	gaz_status_clear(&st);
	assert_int_equal(gaz__file_url_path("/r", "file:///a%00b", out, sizeof(out), &st),
			 GAZ_EINVAL);
	gaz_status_clear(&st);
	assert_int_equal(gaz__file_url_path("/r", "file:///abcdef", out, 8, &st), GAZ_ERANGE);
}

/* ---- fragment files -------------------------------------------------------- */

#define CONTENT_LEN 300000

static uint8_t content[CONTENT_LEN];

static void encode(int codec, const uint8_t *buf, size_t len, struct gaz_mem_sink *out)
{
	struct gaz_status st = {0};
	struct gaz_encoder *enc;

	memset(out, 0, sizeof(*out));
	assert_int_equal(gaz_encoder_new(codec, gaz_mem_sink_write, out, &enc, &st), 0);
	assert_int_equal(gaz_encoder_write(enc, buf, len, &st), 0);
	assert_int_equal(gaz_encoder_finish(enc, &st), 0);
	gaz_encoder_free(enc);
}

static void write_file(const char *name, const void *buf, size_t len)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	assert_true((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

/* read_all reads the fragment from `offset`; returns the final rc. */
static int read_all(const struct gaz_fragment *f, int64_t offset, const char *url,
		    struct gaz_mem_sink *out, struct gaz_status *st)
{
	struct gaz__frag_reader *fr;
	uint8_t buf[7000];
	size_t n;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = gaz__frag_open(g_client, f, offset, url, NULL, &fr, st)))
		return rc;
	while ((rc = gaz__frag_read(fr, buf, sizeof(buf), &n, st)) == 0)
		assert_int_equal(gaz_mem_sink_write(out, buf, n, NULL), 0);
	assert_int_equal(gaz__frag_offset(fr), offset + (int64_t)out->len);
	gaz__frag_close(fr);
	return rc;
}

static void test_file_codecs(void **state)
{
	static const int codecs[] = {
		PROTOCOL__COMPRESSION_CODEC__NONE, PROTOCOL__COMPRESSION_CODEC__GZIP,
		PROTOCOL__COMPRESSION_CODEC__ZSTANDARD, PROTOCOL__COMPRESSION_CODEC__SNAPPY,
		PROTOCOL__COMPRESSION_CODEC__GZIP_OFFLOAD_DECOMPRESSION,
	};
	struct gaz_fragment f = {.begin = 1000, .end = 1000 + CONTENT_LEN};
	struct gaz_status st = {0};
	struct gaz_mem_sink enc, got;

	(void)state;
	for (size_t i = 0; i < sizeof(codecs) / sizeof(codecs[0]); i++) {
		int64_t offsets[] = {1000, 1001, 1000 + 123456, 1000 + CONTENT_LEN};
		char name[32], url[64];

		f.codec = codecs[i];
		snprintf(name, sizeof(name), "frag-%d", codecs[i]);
		snprintf(url, sizeof(url), "file:///%s", name);
		encode(codecs[i] == PROTOCOL__COMPRESSION_CODEC__GZIP_OFFLOAD_DECOMPRESSION
			       ? PROTOCOL__COMPRESSION_CODEC__GZIP
			       : codecs[i],
		       content, CONTENT_LEN, &enc);
		write_file(name, enc.data, enc.len);
		for (size_t k = 0; k < 4; k++) {
			int64_t skip = offsets[k] - f.begin;
			assert_int_equal(read_all(&f, offsets[k], url, &got, &st), GAZ_EOF);
			assert_int_equal(got.len, CONTENT_LEN - skip);
			assert_memory_equal(got.data, content + skip, got.len);
			gaz_mem_sink_release(&got);
		}
		gaz_mem_sink_release(&enc);
	}
}

/* A body ending early or running past the fragment's end is an error,
 * never a clean end (facts §7.3). */
static void test_file_length_mismatch(void **state)
{
	struct gaz_fragment f = {.begin = 0, .end = 1000, .codec = PROTOCOL__COMPRESSION_CODEC__NONE};
	struct gaz_status st = {0};
	struct gaz_mem_sink got;

	(void)state;
	write_file("short", content, 999);
	assert_int_equal(read_all(&f, 10, "file:///short", &got, &st), GAZ_EPROTO);
	assert_non_null(strstr(st.msg, "unexpected EOF"));
	assert_int_equal(got.len, 989);
	gaz_mem_sink_release(&got);

	gaz_status_clear(&st);
	write_file("long", content, 1001);
	assert_int_equal(read_all(&f, 0, "file:///long", &got, &st), GAZ_EPROTO);
	assert_non_null(strstr(st.msg, "did not read EOF at expected Fragment.End"));
	assert_int_equal(got.len, 1000);
	gaz_mem_sink_release(&got);

	gaz_status_clear(&st);
	assert_int_equal(read_all(&f, 0, "file:///missing", &got, &st), GAZ_ENOTFOUND);
	assert_string_equal(st.msg, "!OK fetching (404 Not Found, \"file:///missing\")");
	gaz_status_clear(&st);
	assert_int_equal(read_all(&f, 0, "ftp://x/y", &got, &st), GAZ_EINVAL);
}

/* ---- http:// -------------------------------------------------------------- */

/* A one-request-per-connection HTTP/1.1 server answering canned responses. */
static struct {
	int lfd, port;
	pthread_t thread;
	pthread_mutex_t mu;
	char request[4096];       /* last request head received */
	int status;               /* to answer */
	const char *encoding;     /* Content-Encoding to send, or NULL */
	const uint8_t *body;
	size_t len;
} srv = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* srv_recv reads one request head from `fd` into req (NUL-terminated). */
static void srv_recv(int fd, char *req, size_t cap)
{
	size_t n = 0;

	req[0] = '\0';
	while (n < cap - 1 && !strstr(req, "\r\n\r\n")) {
		ssize_t r = read(fd, req + n, cap - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		req[n] = '\0';
	}
}

/* srv_answer writes the response `status`, `encoding`, body[0, len). */
static void srv_answer(int fd, int status, const char *encoding, const uint8_t *body, size_t len)
{
	char head[512];

	snprintf(head, sizeof(head),
		 "HTTP/1.1 %d %s\r\nContent-Length: %zu\r\n%s%s%sConnection: close\r\n\r\n",
		 status, status == 200 ? "OK" : "Not Found", len,
		 encoding ? "Content-Encoding: " : "", encoding ? encoding : "",
		 encoding ? "\r\n" : "");
	if (write(fd, head, strlen(head)) > 0 && len)
		for (size_t off = 0; off < len;) {
			ssize_t w = write(fd, body + off, len - off);
			if (w <= 0)
				break;
			off += (size_t)w;
		}
}

/* srv_main records each request and answers it with what serve() set,
 * both copied under srv.mu. */
static void *srv_main(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept(srv.lfd, NULL, NULL), status;
		char req[sizeof(srv.request)];
		const char *encoding;
		const uint8_t *body;
		size_t len;

		if (fd < 0)
			return NULL;
		srv_recv(fd, req, sizeof(req));
		pthread_mutex_lock(&srv.mu);
		memcpy(srv.request, req, sizeof(req));
		status = srv.status;
		encoding = srv.encoding;
		body = srv.body;
		len = srv.len;
		pthread_mutex_unlock(&srv.mu);
		srv_answer(fd, status, encoding, body, len);
		close(fd);
	}
}

static void srv_start(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);

	assert_true((srv.lfd = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	assert_int_equal(bind(srv.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(srv.lfd, 8), 0);
	assert_int_equal(getsockname(srv.lfd, (struct sockaddr *)&a, &al), 0);
	srv.port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&srv.thread, NULL, srv_main, NULL), 0);
}

/* serve sets the answer to the next requests. */
static void serve(int status, const char *encoding, const uint8_t *body, size_t len)
{
	pthread_mutex_lock(&srv.mu);
	srv.status = status;
	srv.encoding = encoding;
	srv.body = body;
	srv.len = len;
	srv.request[0] = '\0';
	pthread_mutex_unlock(&srv.mu);
}

/* requested: whether the last request head received contains `s`. */
static bool requested(const char *s)
{
	bool found;

	pthread_mutex_lock(&srv.mu);
	found = strstr(srv.request, s) != NULL;
	pthread_mutex_unlock(&srv.mu);
	return found;
}

static void test_http(void **state)
{
	struct gaz_fragment f = {.begin = 0, .end = CONTENT_LEN};
	struct gaz_status st = {0};
	struct gaz_mem_sink enc, got;
	char url[128];

	(void)state;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/frag?sig=1", srv.port);
	encode(PROTOCOL__COMPRESSION_CODEC__GZIP, content, CONTENT_LEN, &enc);

	/* GZIP: ask for gzip so nothing decodes for us; we decode. */
	f.codec = PROTOCOL__COMPRESSION_CODEC__GZIP;
	serve(200, "gzip", enc.data, enc.len);
	assert_int_equal(read_all(&f, 5, url, &got, &st), GAZ_EOF);
	assert_true(requested("GET /frag?sig=1 HTTP/1.1\r\n"));
	assert_true(requested("Accept-Encoding: gzip\r\n"));
	assert_int_equal(got.len, CONTENT_LEN - 5);
	assert_memory_equal(got.data, content + 5, got.len);
	gaz_mem_sink_release(&got);

	/* GZIP_OFFLOAD_DECOMPRESSION: identity asked; a store that still
	 * sends gzip is decoded here, one that complied is read as is. */
	f.codec = PROTOCOL__COMPRESSION_CODEC__GZIP_OFFLOAD_DECOMPRESSION;
	serve(200, "gzip", enc.data, enc.len);
	assert_int_equal(read_all(&f, 0, url, &got, &st), GAZ_EOF);
	assert_true(requested("Accept-Encoding: identity\r\n"));
	assert_memory_equal(got.data, content, CONTENT_LEN);
	gaz_mem_sink_release(&got);
	serve(200, NULL, content, CONTENT_LEN);
	assert_int_equal(read_all(&f, 0, url, &got, &st), GAZ_EOF);
	assert_memory_equal(got.data, content, CONTENT_LEN);
	gaz_mem_sink_release(&got);

	/* NONE: no Accept-Encoding at all. */
	f.codec = PROTOCOL__COMPRESSION_CODEC__NONE;
	serve(200, NULL, content, CONTENT_LEN);
	assert_int_equal(read_all(&f, CONTENT_LEN - 1, url, &got, &st), GAZ_EOF);
	assert_false(requested("Accept-Encoding"));
	assert_int_equal(got.len, 1);
	gaz_mem_sink_release(&got);

	serve(404, NULL, (const uint8_t *)"no", 2);
	assert_int_equal(read_all(&f, 0, url, &got, &st), GAZ_ENOTFOUND);
	assert_non_null(strstr(st.msg, "!OK fetching (404 Not Found, \"http://127.0.0.1:"));
	gaz_mem_sink_release(&enc);
}

static int setup(void **state)
{
	struct gaz_client_opts o = {.broker_address = "http://127.0.0.1:1"};
	struct gaz_status st = {0};

	(void)state;
	for (size_t i = 0; i < CONTENT_LEN; i++)
		content[i] = (uint8_t)(i * 7 + i / 1000);
	if (!mkdtemp(root) || gaz_rpc_init(1))
		return -1;
	o.file_root = root;
	if (gaz_client_new(&o, &g_client, &st))
		return -1;
	srv_start();
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	shutdown(srv.lfd, SHUT_RDWR);
	close(srv.lfd);
	pthread_join(srv.thread, NULL);
	gaz_client_free(g_client);
	gaz_rpc_shutdown();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_url_path),
		cmocka_unit_test(test_file_codecs),
		cmocka_unit_test(test_file_length_mismatch),
		cmocka_unit_test(test_http),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
