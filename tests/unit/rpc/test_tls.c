/*
 * test_tls.c - lib/rpc/tls.c: the checks of certificate files, ALPN in
 * Gazette's server preference, the server context's reload when the files
 * change (and its refusal of a file that does not load), and the
 * handshake + pump over a socketpair against an OpenSSL client, including
 * the handshake bound for a silent client.
 *
 * Certificates are made with the openssl CLI in a temporary directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <openssl/ssl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/rpc/tls.c"

static char dir[64];

static const char *path(const char *name)
{
	static char buf[8][128];
	static int i;

	i = (i + 1) % 8;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, name);
	return buf[i];
}

/* make_cert makes <name>.crt/.key signed by <ca> (self-signed if equal),
 * both replaced by rename. */
static void make_cert(const char *name, const char *ca, const char *cn)
{
	char cmd[2048];

	if (!strcmp(name, ca))
		snprintf(cmd, sizeof(cmd),
			 "cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
			 "-nodes -keyout %s.key -out %s.crt -days 2 -subj /CN=%s 2>/dev/null",
			 dir, name, name, cn);
	else
		snprintf(cmd, sizeof(cmd),
			 "cd %s && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
			 "-keyout %s.key.new -out %s.csr -subj /CN=%s 2>/dev/null && "
			 "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > %s.ext && "
			 "openssl x509 -req -in %s.csr -CA %s.crt -CAkey %s.key -set_serial $$$(date +%%N) "
			 "-out %s.crt.new -days 2 -extfile %s.ext 2>/dev/null && "
			 "mv %s.key.new %s.key && mv %s.crt.new %s.crt",
			 dir, name, name, cn, name, name, ca, ca, name, name, name, name, name, name);
	assert_int_equal(system(cmd), 0);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/gaz-test-tls-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	make_cert("ca", "ca", "ca");
	make_cert("server", "ca", "first");
	make_cert("other", "ca", "other");
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_check_files(void **state)
{
	struct gaz_status st = {0};

	(void)state;
	assert_int_equal(gaz_rpc_tls_check(NULL, &st), 0);
	assert_int_equal(gaz_rpc_tls_check(&(struct gaz_rpc_tls){0}, &st), 0);
	assert_int_equal(gaz_rpc_tls_check(&(struct gaz_rpc_tls){path("server.crt"), path("server.key"),
								 path("ca.crt")}, &st), 0);
	/* A certificate without its key. */
	assert_int_equal(gaz_rpc_tls_check(&(struct gaz_rpc_tls){.cert_file = path("server.crt")}, &st),
			 GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "both or neither"));
	gaz_status_clear(&st);
	/* Another certificate's key. */
	assert_int_equal(gaz_rpc_tls_check(&(struct gaz_rpc_tls){path("server.crt"), path("other.key")}, &st),
			 GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "does not match"));
	gaz_status_clear(&st);
	/* A missing file is named. */
	assert_int_equal(gaz_rpc_tls_check(&(struct gaz_rpc_tls){.ca_file = "/nonexistent/ca.crt"}, &st),
			 GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "\"/nonexistent/ca.crt\": cannot open"));
	gaz_status_clear(&st);
	/* A key is no CA. */
	assert_int_equal(gaz_rpc_tls_check(&(struct gaz_rpc_tls){.ca_file = path("ca.key")}, &st),
			 GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "no PEM certificate"));
	gaz_status_clear(&st);
	/* A certificate file without a certificate. */
	assert_int_equal(gaz_rpc_tls_check(&(struct gaz_rpc_tls){path("server.key"), path("server.key")}, &st),
			 GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "no PEM certificate"));
}

static const char *pick(const char *client, size_t n)
{
	static char out[32];
	const unsigned char *sel = NULL;
	unsigned char len = 0;

	if (alpn_select(NULL, &sel, &len, (const unsigned char *)client, (unsigned)n, NULL) !=
	    SSL_TLSEXT_ERR_OK)
		return "none";
	snprintf(out, sizeof(out), "%.*s", len, sel);
	return out;
}

static void test_alpn_server_preference(void **state)
{
	(void)state;
	/* As Gazette's NextProtos {"http/1.1", "h2"}: curl and browsers
	 * (both offered) get HTTP/1.1; gRPC clients offer only h2. */
	assert_string_equal(pick("\x02h2\x08http/1.1", 12), "http/1.1");
	assert_string_equal(pick("\x08grpc-exp\x02h2", 12), "h2");
	assert_string_equal(pick("\x02h2", 3), "h2");
	assert_string_equal(pick("\x03""foo", 4), "none");
}

static long ctx_serial(SSL_CTX *ctx)
{
	X509 *x = SSL_CTX_get0_certificate(ctx);

	return x ? ASN1_INTEGER_get(X509_get0_serialNumber(x)) : -1;
}

static void test_reload_on_change(void **state)
{
	struct gaz_rpc_tls t = {path("server.crt"), path("server.key"), NULL};
	struct gaz_status st = {0};
	struct gaz__tls_server *s;
	SSL_CTX *ctx;
	long first, second;
	FILE *f;

	(void)state;
	assert_non_null(s = gaz__tls_server_new(&t, &st));
	ctx = server_ctx(s);
	first = ctx_serial(ctx);
	SSL_CTX_free(ctx);
	make_cert("server", "ca", "second");
	/* Within the second since the last check: not looked at yet. */
	ctx = server_ctx(s);
	assert_int_equal(ctx_serial(ctx), first);
	SSL_CTX_free(ctx);
	s->next_check_ns = 0;
	ctx = server_ctx(s);
	second = ctx_serial(ctx);
	SSL_CTX_free(ctx);
	assert_int_not_equal(second, first);
	/* A file that does not load keeps the last good context. */
	assert_non_null(f = fopen(path("server.crt"), "w"));
	fputs("garbage\n", f);
	fclose(f);
	s->next_check_ns = 0;
	ctx = server_ctx(s);
	assert_int_equal(ctx_serial(ctx), second);
	SSL_CTX_free(ctx);
	gaz__tls_server_free(s);
	make_cert("server", "ca", "third"); /* for the tests after */
	/* A server needs its certificate and key at start. */
	assert_null(gaz__tls_server_new(&(struct gaz_rpc_tls){.cert_file = path("server.crt")}, &st));
	gaz_status_clear(&st);
	t.cert_file = path("ca.key");
	assert_null(gaz__tls_server_new(&t, &st));
	assert_non_null(strstr(st.msg, "ca.key"));
}

struct server_side {
	struct gaz__tls_server *s;
	int fd, plain, rc;
	int64_t bound_ms;
};

static void *serve_one(void *arg)
{
	struct server_side *ss = arg;

	ss->rc = gaz__tls_accept(ss->s, ss->fd, "test", gaz_mono_ns() + ss->bound_ms * GAZ_NS_PER_MS,
				 &ss->plain);
	return NULL;
}

static void test_handshake_and_pump(void **state)
{
	struct gaz_rpc_tls t = {path("server.crt"), path("server.key"), NULL};
	struct server_side ss = {.bound_ms = 5000, .plain = -1};
	struct gaz_status st = {0};
	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
	static char big[1 << 20], got[1 << 20];
	int sv[2];
	pthread_t thr;
	SSL *c;

	(void)state;
	assert_non_null(ss.s = gaz__tls_server_new(&t, &st));
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ss.fd = sv[0];
	pthread_create(&thr, NULL, serve_one, &ss);
	assert_int_equal(SSL_CTX_load_verify_locations(cctx, path("ca.crt"), NULL), 1);
	SSL_CTX_set_verify(cctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_alpn_protos(cctx, (const unsigned char *)"\x02h2", 3);
	c = SSL_new(cctx);
	SSL_set_fd(c, sv[1]);
	SSL_set1_host(c, "localhost");
	assert_int_equal(SSL_connect(c), 1);
	pthread_join(thr, NULL);
	assert_int_equal(ss.rc, 0);
	/* A megabyte each way through the pump. */
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7);
	assert_int_equal(SSL_write(c, big, sizeof(big)), (int)sizeof(big));
	for (size_t n = 0; n < sizeof(got);) {
		ssize_t r = read(ss.plain, got + n, sizeof(got) - n);
		assert_true(r > 0);
		n += (size_t)r;
	}
	assert_memory_equal(got, big, sizeof(big));
	for (size_t n = 0; n < sizeof(big);) {
		ssize_t w = write(ss.plain, big + n, sizeof(big) - n);
		assert_true(w > 0);
		n += (size_t)w;
	}
	for (size_t n = 0; n < sizeof(got);) {
		int r = SSL_read(c, got + n, (int)(sizeof(got) - n));
		assert_true(r > 0);
		n += (size_t)r;
	}
	assert_memory_equal(got, big, sizeof(big));
	/* The client's close reaches the plain side as EOF; closing the
	 * plain side ends the pump, which closes the TLS connection. */
	SSL_shutdown(c);
	assert_int_equal(read(ss.plain, got, 1), 0);
	close(ss.plain);
	assert_true(SSL_read(c, got, 1) <= 0);
	SSL_free(c);
	close(sv[1]);
	SSL_CTX_free(cctx);
	gaz__tls_server_free(ss.s);
}

static void test_silent_client_times_out(void **state)
{
	struct gaz_rpc_tls t = {path("server.crt"), path("server.key"), NULL};
	struct server_side ss = {.bound_ms = 300, .plain = -1};
	struct gaz_status st = {0};
	int64_t t0 = gaz_mono_ns();
	int sv[2];

	(void)state;
	assert_non_null(ss.s = gaz__tls_server_new(&t, &st));
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ss.fd = sv[0];
	serve_one(&ss);
	assert_int_equal(ss.rc, GAZ_EPROTO);
	assert_true(gaz_mono_ns() - t0 >= 300 * GAZ_NS_PER_MS);
	assert_int_equal(ss.plain, -1);
	close(sv[0]); /* still the caller's */
	close(sv[1]);
	gaz__tls_server_free(ss.s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_check_files),
		cmocka_unit_test(test_alpn_server_preference),
		cmocka_unit_test(test_reload_on_change),
		cmocka_unit_test(test_handshake_and_pump),
		cmocka_unit_test(test_silent_client_times_out),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
