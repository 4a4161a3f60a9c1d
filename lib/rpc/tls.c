/*
 * tls.c - TLS for lib/rpc with OpenSSL: certificate files checked and
 * read for outgoing channels (client.c hands the PEM text to grpc's ssl
 * credentials), and TLS termination for the one-port listener (listen.c).
 *
 * Why the listener terminates TLS itself: grpc 1.51's
 * grpc_server_add_channel_from_fd takes insecure credentials only
 * (grpc-core.md §7.3 R4, §7.5), and Gazette serves gRPC and HTTP/1 on one
 * TLS port (server.New wraps the listener in tls.NewListener, then cmux).
 * So each accepted connection is handshaken here (ALPN offering
 * "http/1.1" then "h2" in server preference, as Gazette), then one end of
 * a socketpair goes into the listener's existing sniff path (gRPC or
 * HTTP/1, unchanged) while a pump thread moves bytes between the SSL
 * connection and the other end (docs/decisions.md, "TLS on the one port").
 *
 * Certificate rotation: the server context is rebuilt when the cert, key
 * or CA file changed (device, inode, size or mtime), checked at most once
 * a second when a connection is accepted. A new set that does not load
 * keeps the old context and logs one warning per attempt.
 *
 * Locks: tls_server.mu guards its context and file stamps; it is held
 * while a new context is built (file reads, at most once a second) and
 * never while handshaking. A pump owns its SSL, TCP fd and socket end and
 * shares nothing. No other lock is taken here.
 * Must not call: grpc (nothing here needs it), anything above lib/common.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "rpc/rpc_int.h"

#define PEM_MAX (4 << 20)           /* bound on one certificate file */
#define PUMP_BUF (64 << 10)         /* per direction */
#define RELOAD_CHECK_NS GAZ_NS_PER_S /* stat the files at most this often */

/* ---- files ------------------------------------------------------------ */

/* ossl_reason writes the oldest queued OpenSSL error (or "unknown") to
 * buf and clears the queue. */
static const char *ossl_reason(char *buf, size_t n)
{
	unsigned long e = ERR_get_error();

	if (!e)
		snprintf(buf, n, "unknown error");
	else
		ERR_error_string_n(e, buf, n);
	ERR_clear_error();
	return buf;
}

/* read_file reads `path` whole (at most PEM_MAX bytes), NUL-terminated. */
static int read_file(const char *what, const char *path, char **out, struct gaz_status *st)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0;

	*out = NULL;
	if (!f)
		return gaz_status_set(st, GAZ_EINVAL, "%s \"%s\": cannot open: %s", what, path,
				      strerror(errno));
	if (!(buf = malloc(PEM_MAX + 1))) {
		fclose(f);
		return gaz_status_set(st, GAZ_ENOMEM, "%s \"%s\": out of memory", what, path);
	}
	n = fread(buf, 1, PEM_MAX + 1, f);
	if (ferror(f) || n > PEM_MAX) {
		fclose(f);
		free(buf);
		return gaz_status_set(st, GAZ_EINVAL, "%s \"%s\": %s", what, path,
				      n > PEM_MAX ? "larger than 4 MiB" : "read failed");
	}
	fclose(f);
	buf[n] = '\0';
	*out = buf;
	return 0;
}

/* pem_certs counts the certificates in `pem`, keeping the first in *first
 * when asked (caller frees). */
static int pem_certs(const char *pem, X509 **first)
{
	BIO *bio = BIO_new_mem_buf(pem, -1);
	X509 *x;
	int n = 0;

	if (first)
		*first = NULL;
	while (bio && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
		if (first && !*first)
			*first = x;
		else
			X509_free(x);
		n++;
	}
	BIO_free(bio);
	ERR_clear_error(); /* the read that ended the loop */
	return n;
}

/* check_pair: the key of `key_pem` parses and belongs to the first
 * certificate of `cert_pem`. */
static int check_pair(const struct gaz_rpc_tls *t, const char *cert_pem, const char *key_pem,
		      struct gaz_status *st)
{
	BIO *bio = BIO_new_mem_buf(key_pem, -1);
	EVP_PKEY *key = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
	X509 *cert = NULL;
	char why[256];
	int rc = 0;

	BIO_free(bio);
	if (!key)
		rc = gaz_status_set(st, GAZ_EINVAL, "TLS key file \"%s\": no PEM private key: %s",
				    t->key_file, ossl_reason(why, sizeof(why)));
	else if (pem_certs(cert_pem, &cert) == 0)
		rc = gaz_status_set(st, GAZ_EINVAL, "TLS certificate file \"%s\": no PEM certificate",
				    t->cert_file);
	else if (X509_check_private_key(cert, key) != 1)
		rc = gaz_status_set(st, GAZ_EINVAL, "TLS key file \"%s\" does not match certificate "
				    "file \"%s\"", t->key_file, t->cert_file);
	X509_free(cert);
	EVP_PKEY_free(key);
	ERR_clear_error();
	return rc;
}

static bool set(const char *s)
{
	return s && *s;
}

void gaz__tls_pems_free(struct gaz__tls_pems *p)
{
	free(p->cert);
	free(p->key);
	free(p->ca);
	p->cert = p->key = p->ca = NULL;
}

int gaz__tls_pems_read(const struct gaz_rpc_tls *t, bool need_cert, struct gaz__tls_pems *out,
		       struct gaz_status *st)
{
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!t || (!set(t->cert_file) && !set(t->key_file) && !set(t->ca_file))) {
		if (need_cert)
			return gaz_status_set(st, GAZ_EINVAL, "TLS needs a certificate file");
		return 0;
	}
	if (set(t->cert_file) != set(t->key_file) || (need_cert && !set(t->cert_file)))
		return gaz_status_set(st, GAZ_EINVAL, "TLS certificate file \"%s\" and key file \"%s\": "
				      "both or neither must be given",
				      set(t->cert_file) ? t->cert_file : "",
				      set(t->key_file) ? t->key_file : "");
	if (set(t->cert_file) &&
	    ((rc = read_file("TLS certificate file", t->cert_file, &out->cert, st)) ||
	     (rc = read_file("TLS key file", t->key_file, &out->key, st)) ||
	     (rc = check_pair(t, out->cert, out->key, st))))
		goto fail;
	if (set(t->ca_file) && (rc = read_file("TLS CA file", t->ca_file, &out->ca, st)))
		goto fail;
	if (out->ca && pem_certs(out->ca, NULL) == 0) {
		rc = gaz_status_set(st, GAZ_EINVAL, "TLS CA file \"%s\": no PEM certificate",
				    t->ca_file);
		goto fail;
	}
	return 0;
fail:
	gaz__tls_pems_free(out);
	return rc;
}

int gaz_rpc_tls_check(const struct gaz_rpc_tls *tls, struct gaz_status *st)
{
	struct gaz__tls_pems p;
	int rc = gaz__tls_pems_read(tls, false, &p, st);

	gaz__tls_pems_free(&p);
	return rc;
}

char *gaz__tls_system_roots(void)
{
	const char *env = getenv(X509_get_default_cert_file_env());
	const char *path = env && *env ? env : X509_get_default_cert_file();
	char *pem = NULL;

	if (read_file("system CA file", path, &pem, NULL))
		return NULL;
	if (pem_certs(pem, NULL) == 0) {
		free(pem);
		return NULL;
	}
	return pem;
}

/* ---- the server context and its reload -------------------------------- */

struct stamp {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	bool missing;
};

struct gaz__tls_server {
	pthread_mutex_t mu;
	char *cert, *key, *ca; /* file paths; ca may be NULL */
	SSL_CTX *ctx;          /* the current context */
	struct stamp seen[3];  /* of the last attempt (good or not) */
	int64_t next_check_ns;
};

static void stamp_of(const char *path, struct stamp *s)
{
	struct stat sb;

	memset(s, 0, sizeof(*s));
	if (!path || stat(path, &sb)) {
		s->missing = true;
		return;
	}
	s->dev = sb.st_dev;
	s->ino = sb.st_ino;
	s->size = sb.st_size;
	s->mtime = sb.st_mtim;
}

static bool stamp_eq(const struct stamp *a, const struct stamp *b)
{
	return a->missing == b->missing && a->dev == b->dev && a->ino == b->ino &&
	       a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
	       a->mtime.tv_nsec == b->mtime.tv_nsec;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	return (h ^ v) * 0x100000001b3ULL; /* FNV-1a step, per value */
}

uint64_t gaz_rpc_tls_version(const struct gaz_rpc_tls *tls)
{
	const char *files[3] = {tls ? tls->cert_file : NULL, tls ? tls->key_file : NULL,
				tls ? tls->ca_file : NULL};
	uint64_t h = 0xcbf29ce484222325ULL;
	bool any = false;

	for (int i = 0; i < 3; i++) {
		struct stamp s;

		if (!set(files[i]))
			continue;
		any = true;
		stamp_of(files[i], &s);
		h = mix(h, (uint64_t)i);
		h = mix(h, s.missing);
		h = mix(h, (uint64_t)s.dev);
		h = mix(h, (uint64_t)s.ino);
		h = mix(h, (uint64_t)s.size);
		h = mix(h, (uint64_t)s.mtime.tv_sec);
		h = mix(h, (uint64_t)s.mtime.tv_nsec);
	}
	return any ? (h ? h : 1) : 0;
}

/* Server preference, as Gazette's serverTLS.NextProtos: clients offering
 * both (curl, browsers) get HTTP/1.1; gRPC clients offer only h2. */
static const unsigned char alpn_protos[] = "\x08http/1.1\x02h2";

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		       const unsigned char *in, unsigned int inlen, void *arg)
{
	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto((unsigned char **)out, outlen, alpn_protos,
				  sizeof(alpn_protos) - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK; /* no ALPN: the sniffer decides */
	return SSL_TLSEXT_ERR_OK;
}

/* ctx_build makes a server context of the files. */
static SSL_CTX *ctx_build(const char *cert, const char *key, const char *ca, struct gaz_status *st)
{
	static const unsigned char sid[] = "gazette-c";
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	STACK_OF(X509_NAME) *names = NULL;
	char why[256];

	if (!ctx) {
		gaz_status_set(st, GAZ_ENOMEM, "creating a TLS context: %s", ossl_reason(why, sizeof(why)));
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION); /* as Go's crypto/tls */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		gaz_status_set(st, GAZ_EINVAL, "server TLS certificate file \"%s\": %s", cert,
			       ossl_reason(why, sizeof(why)));
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		gaz_status_set(st, GAZ_EINVAL, "server TLS key file \"%s\" (certificate \"%s\"): %s",
			       key, cert, ossl_reason(why, sizeof(why)));
		goto fail;
	}
	if (ca) {
		/* Gazette's BuildTLSConfig: a CA makes client certificates
		 * required (tls.RequireAndVerifyClientCert). */
		if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1 ||
		    !(names = SSL_load_client_CA_file(ca))) {
			gaz_status_set(st, GAZ_EINVAL, "server TLS CA file \"%s\": %s", ca,
				       ossl_reason(why, sizeof(why)));
			goto fail;
		}
		SSL_CTX_set_client_CA_list(ctx, names);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	}
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

struct gaz__tls_server *gaz__tls_server_new(const struct gaz_rpc_tls *t, struct gaz_status *st)
{
	struct gaz__tls_server *s;

	if (!t || !set(t->cert_file) || !set(t->key_file)) {
		gaz_status_set(st, GAZ_EINVAL, "server TLS needs a certificate file and a key file");
		return NULL;
	}
	if (!(s = calloc(1, sizeof(*s))) || !(s->cert = strdup(t->cert_file)) ||
	    !(s->key = strdup(t->key_file)) || (set(t->ca_file) && !(s->ca = strdup(t->ca_file)))) {
		gaz_status_set(st, GAZ_ENOMEM, "out of memory");
		goto fail;
	}
	stamp_of(s->cert, &s->seen[0]);
	stamp_of(s->key, &s->seen[1]);
	stamp_of(s->ca, &s->seen[2]);
	if (!(s->ctx = ctx_build(s->cert, s->key, s->ca, st)))
		goto fail;
	pthread_mutex_init(&s->mu, NULL);
	s->next_check_ns = gaz_mono_ns() + RELOAD_CHECK_NS;
	return s;
fail:
	if (s) {
		free(s->cert);
		free(s->key);
		free(s->ca);
		free(s);
	}
	return NULL;
}

void gaz__tls_server_free(struct gaz__tls_server *s)
{
	if (!s)
		return;
	SSL_CTX_free(s->ctx); /* pumps still running hold their own references */
	pthread_mutex_destroy(&s->mu);
	free(s->cert);
	free(s->key);
	free(s->ca);
	free(s);
}

/* maybe_reload rebuilds the context when a file changed (s->mu held). */
static void maybe_reload(struct gaz__tls_server *s)
{
	struct gaz_status st = {0};
	struct stamp now[3];
	SSL_CTX *ctx;

	stamp_of(s->cert, &now[0]);
	stamp_of(s->key, &now[1]);
	stamp_of(s->ca, &now[2]);
	if (stamp_eq(&now[0], &s->seen[0]) && stamp_eq(&now[1], &s->seen[1]) &&
	    stamp_eq(&now[2], &s->seen[2]))
		return;
	memcpy(s->seen, now, sizeof(now));
	if (!(ctx = ctx_build(s->cert, s->key, s->ca, &st))) {
		gaz_warn("TLS files changed but do not load; still serving the previous certificate",
			 "cert=%s err=%s", s->cert, st.msg);
		return;
	}
	SSL_CTX_free(s->ctx);
	s->ctx = ctx;
	gaz_info("TLS files changed; serving the new certificate", "cert=%s", s->cert);
}

/* server_ctx returns the current context with a reference for the caller. */
static SSL_CTX *server_ctx(struct gaz__tls_server *s)
{
	int64_t now = gaz_mono_ns();
	SSL_CTX *ctx;

	pthread_mutex_lock(&s->mu);
	if (now >= s->next_check_ns) {
		s->next_check_ns = now + RELOAD_CHECK_NS;
		maybe_reload(s);
	}
	ctx = s->ctx;
	SSL_CTX_up_ref(ctx);
	pthread_mutex_unlock(&s->mu);
	return ctx;
}

/* ---- handshake -------------------------------------------------------- */

/* wait_io polls fd for what SSL asked (err) until deadline_ns. */
static bool wait_io(int fd, int err, int64_t deadline_ns)
{
	struct pollfd p = {.fd = fd, .events = err == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN};
	int64_t left = deadline_ns - gaz_mono_ns();

	if (left <= 0)
		return false;
	return poll(&p, 1, (int)((left + GAZ_NS_PER_MS - 1) / GAZ_NS_PER_MS)) > 0;
}

/* handshake runs SSL_accept on the non-blocking fd until deadline_ns. */
static int handshake(SSL *ssl, int fd, const char *peer, int64_t deadline_ns)
{
	char why[256];

	for (;;) {
		int rc = SSL_accept(ssl), err;
		if (rc == 1)
			return 0;
		err = SSL_get_error(ssl, rc);
		if ((err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) &&
		    wait_io(fd, err, deadline_ns))
			continue;
		if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
			snprintf(why, sizeof(why), "timed out");
		else if (err == SSL_ERROR_SYSCALL && !ERR_peek_error())
			snprintf(why, sizeof(why), "connection closed");
		else
			ossl_reason(why, sizeof(why));
		ERR_clear_error();
		gaz_info("TLS handshake failed", "peer=%s err=%s", peer, why);
		return GAZ_EPROTO;
	}
}

/* ---- the pump ---------------------------------------------------------- */

struct pump {
	SSL *ssl;
	int tcp, plain; /* both non-blocking; the pump closes them */
	char peer[80];
	unsigned char in[PUMP_BUF];  /* decrypted, on its way to plain */
	size_t in_off, in_len;
	unsigned char out[PUMP_BUF]; /* from plain, on its way to encryption */
	size_t out_off, out_len;
	bool tls_eof, plain_eof, failed;
	bool plain_shut; /* the client's end passed on to the plain side */
};

/* ssl_want adds the poll event SSL asked for to *ev, or marks the end. */
static void ssl_want(struct pump *p, int rc, short *ev, bool reading)
{
	int err = SSL_get_error(p->ssl, rc);

	if (err == SSL_ERROR_WANT_READ)
		*ev |= POLLIN;
	else if (err == SSL_ERROR_WANT_WRITE)
		*ev |= POLLOUT;
	else if (reading && (err == SSL_ERROR_ZERO_RETURN ||
			     (err == SSL_ERROR_SYSCALL && !ERR_peek_error())))
		p->tls_eof = true; /* close_notify, or the peer just closed */
	else
		p->failed = true;
	ERR_clear_error();
}

/* tls_to_plain moves decrypted bytes on; returns whether it made progress. */
static bool tls_to_plain(struct pump *p, short *ev_tcp, short *ev_plain)
{
	bool progress = false;
	ssize_t n;

	/* Gather as many records (16 KiB at most each) as are in before one
	 * send: a send per record cost a quarter of 1 MiB append throughput. */
	while (!p->tls_eof && p->in_off == 0 && p->in_len < sizeof(p->in)) {
		int rc = SSL_read(p->ssl, p->in + p->in_len, (int)(sizeof(p->in) - p->in_len));
		if (rc > 0) {
			p->in_len += (size_t)rc;
			progress = true;
			continue;
		}
		ssl_want(p, rc, ev_tcp, true);
		if (p->tls_eof) /* the client is done sending */
			progress = true;
		break;
	}
	if (p->tls_eof && p->in_len == 0 && !p->plain_shut) { /* once what came is sent */
		shutdown(p->plain, SHUT_WR);
		p->plain_shut = true;
	}
	if (p->in_len > p->in_off) {
		n = send(p->plain, p->in + p->in_off, p->in_len - p->in_off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			p->in_off += (size_t)n;
			if (p->in_off == p->in_len)
				p->in_off = p->in_len = 0;
			progress = true;
		} else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			*ev_plain |= POLLOUT;
		} else {
			p->failed = true; /* the server side closed */
		}
	}
	return progress;
}

/* plain_to_tls encrypts the server's bytes; returns whether it made progress. */
static bool plain_to_tls(struct pump *p, short *ev_tcp, short *ev_plain)
{
	bool progress = false;
	ssize_t n;

	if (!p->plain_eof && p->out_len == 0) {
		n = recv(p->plain, p->out, sizeof(p->out), MSG_DONTWAIT);
		if (n > 0) {
			p->out_off = 0;
			p->out_len = (size_t)n;
			progress = true;
		} else if (n == 0) {
			p->plain_eof = true; /* the server side ended the connection */
			progress = true;
		} else if (errno == EAGAIN || errno == EINTR) {
			*ev_plain |= POLLIN;
		} else {
			p->failed = true;
		}
	}
	if (p->out_len > p->out_off) {
		int rc = SSL_write(p->ssl, p->out + p->out_off, (int)(p->out_len - p->out_off));
		if (rc > 0) {
			p->out_off += (size_t)rc;
			if (p->out_off == p->out_len)
				p->out_off = p->out_len = 0;
			progress = true;
		} else {
			ssl_want(p, rc, ev_tcp, false);
		}
	}
	return progress;
}

static void *pump_main(void *arg)
{
	struct pump *p = arg;

	pthread_setname_np(pthread_self(), "gaz-tls-pump");
	/* Ends when the server side is done and flushed, or either side fails. */
	while (!p->failed && !(p->plain_eof && p->out_len == 0)) {
		short ev_tcp = 0, ev_plain = 0;
		bool progress = tls_to_plain(p, &ev_tcp, &ev_plain);

		progress |= plain_to_tls(p, &ev_tcp, &ev_plain);
		if (progress || p->failed)
			continue;
		if (!ev_tcp && !ev_plain)
			break; /* nothing left to wait for */
		struct pollfd fds[2] = {{.fd = ev_tcp ? p->tcp : -1, .events = ev_tcp},
					{.fd = ev_plain ? p->plain : -1, .events = ev_plain}};
		if (poll(fds, 2, -1) < 0 && errno != EINTR)
			break;
	}
	if (!p->failed)
		SSL_shutdown(p->ssl); /* best effort close_notify */
	ERR_clear_error();
	SSL_free(p->ssl);
	close(p->tcp);
	close(p->plain);
	free(p);
	return NULL;
}

int gaz__tls_accept(struct gaz__tls_server *s, int fd, const char *peer, int64_t deadline_ns,
		    int *plain_fd)
{
	SSL_CTX *ctx = server_ctx(s);
	struct pump *p = NULL;
	int sp[2] = {-1, -1}, bufsz = 4 << 20;
	SSL *ssl = SSL_new(ctx);

	SSL_CTX_free(ctx); /* the SSL holds its own reference */
	if (!ssl)
		return GAZ_ENOMEM;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	if (!SSL_set_fd(ssl, fd) || handshake(ssl, fd, peer, deadline_ns))
		goto fail;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0 || !(p = calloc(1, sizeof(*p))))
		goto fail;
	for (int i = 0; i < 2; i++) {
		setsockopt(sp[i], SOL_SOCKET, SO_SNDBUF, &bufsz, sizeof(bufsz));
		setsockopt(sp[i], SOL_SOCKET, SO_RCVBUF, &bufsz, sizeof(bufsz));
	}
	fcntl(sp[0], F_SETFL, fcntl(sp[0], F_GETFL) | O_NONBLOCK);
	p->ssl = ssl;
	p->tcp = fd;
	p->plain = sp[0];
	snprintf(p->peer, sizeof(p->peer), "%s", peer);
	if (gaz__rpc_spawn(pump_main, p) != 0)
		goto fail;
	*plain_fd = sp[1];
	return 0;
fail:
	free(p);
	if (sp[0] >= 0) {
		close(sp[0]);
		close(sp[1]);
	}
	SSL_free(ssl);
	return GAZ_EPROTO; /* fd stays the caller's */
}

int gaz_rpc_tls_flags_check(const char *ns, const struct gaz_rpc_tls_flags *f, const char *port,
			    struct gaz_rpc_tls *peer, bool *serve_tls, struct gaz_status *st)
{
	if (!f->server_cert_file[0] != !f->server_cert_key_file[0])
		return gaz_status_set(st, GAZ_EINVAL, "--%s.server-cert-file and --%s.server-cert-key-file "
				      "must be given together", ns, ns);
	if (f->server_ca_file[0] && !f->server_cert_file[0])
		return gaz_status_set(st, GAZ_EINVAL, "--%s.server-ca-file needs --%s.server-cert-file "
				      "(TLS is off without it)", ns, ns);
	if (!f->peer_cert_file[0] != !f->peer_cert_key_file[0])
		return gaz_status_set(st, GAZ_EINVAL, "--%s.peer-cert-file and --%s.peer-cert-key-file "
				      "must be given together", ns, ns);
	*peer = (struct gaz_rpc_tls){f->peer_cert_file, f->peer_cert_key_file, f->peer_ca_file};
	if (gaz_rpc_tls_check(peer, st)) {
		gaz_status_prefix(st, "--%s.peer-*: ", ns);
		return GAZ_EINVAL;
	}
	*serve_tls = f->server_cert_file[0] != '\0';
	if (*serve_tls && !strncmp(port, "unix://", 7)) {
		gaz_warn("TLS is not used on a unix socket (as Gazette); serving in the clear", "port=%s", port);
		*serve_tls = false;
	}
	return 0;
}
