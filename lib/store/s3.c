/*
 * s3.c - the s3:// fragment store (facts §5.6): objects live under
 * <bucket>/<prefix><key> in any S3-compatible service, reached over
 * libcurl and signed with SigV4 (sigv4.h). Configuration: s3_config.c;
 * XML answers: s3_xml.c.
 *
 *   list    ListObjectsV2 (list-type=2) with continuation tokens, every page
 *   exists  HEAD (404 = absent)
 *   get     GET with "Range: bytes=<off>-", streamed (below)
 *   put     PUT with the body's SHA-256 signed; above MULTIPART_BYTES a
 *           multipart upload (CreateMultipartUpload, UploadPart each
 *           PART_BYTES, CompleteMultipartUpload; aborted on failure)
 *   remove  DELETE
 *   sign    a presigned GET URL (query-string SigV4), X-Amz-Expires = TTL
 *
 * Connections: a pool of idle "conns", each one curl easy handle inside
 * its own multi handle, so the multi's connection cache keeps the socket
 * for the next request that takes the conn. A conn is used by one thread
 * at a time (taken from the pool under pool_mu, given back when done);
 * curl does not support sharing one connection cache between concurrent
 * threads, so only DNS and TLS sessions go through the share handle. Every
 * request, blocking or streamed, is driven through its conn's multi
 * handle, so there is one code path for both.
 *
 * Streamed GETs: the write callback fills a bounded buffer and pauses the
 * transfer when it is full; the reader's read() drains it and resumes. A
 * transfer that breaks after some bytes is resumed with a Range from the
 * first byte not yet received (up to MAX_ATTEMPTS).
 *
 * Timeouts: a connect has CONNECT_TIMEOUT_MS; a whole request
 * CALL_TIMEOUT_MS, or PUT_TIMEOUT_MS for an upload (a streamed GET has
 * none); and every request, streamed GETs included, fails once no byte
 * has moved either way for the store's stall_s (GAZ_S3_STALL_S, 60 s,
 * or the URL's `stalltimeout`), so an upload into a server that stopped
 * reading is retried within a minute rather than after five, while a
 * slow one that still moves runs on to its total.
 *
 * Retries: connection errors (a stall among them), HTTP 5xx and 429, and the codes SlowDown,
 * InternalError and RequestTimeout are retried up to MAX_ATTEMPTS with
 * exponential backoff (BACKOFF_MS doubling, +-20 % jitter). Errors map to
 * the store classes of store.h: 403, AccessDenied, InvalidAccessKeyId,
 * SignatureDoesNotMatch and NoSuchBucket are GAZ_EPERM (Gazette's
 * IsAuthError), 404 GAZ_ENOTFOUND, 416 GAZ_EINVAL, connection failures and
 * exhausted retries GAZ_EUNAVAIL, anything else GAZ_EIO.
 *
 * Lock order: pool_mu and the share locks are leaves (nothing else is
 * taken while holding them).
 */
#include "store/s3_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

#define MULTIPART_BYTES (32LL << 20) /* single PUT up to this size */
#define PART_BYTES (16LL << 20)      /* multipart part size (S3 minimum 5 MiB) */
#define MAX_PARTS 10000
#define MAX_ATTEMPTS 5
#define BACKOFF_MS 100
#define POOL_MAX 16
#define BODY_MAX (16u << 20)          /* largest XML/error body kept */
#define STREAM_BUF (256u * 1024)
#define STREAM_BUF_MAX (64u << 20)
#define CONNECT_TIMEOUT_MS 10000
#define CALL_TIMEOUT_MS 60000         /* list, head, delete, multipart control */
#define PUT_TIMEOUT_MS 300000         /* Gazette persists with a 5 minute timeout */

/* One pooled connection: an easy handle inside its own multi handle. */
struct conn {
	CURLM *m;
	CURL *e;
};

struct s3_store {
	struct gaz_store *store; /* borrowed: the store this is the backend of */
	struct gaz_s3_config cfg;
	CURLSH *share;
	pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];
	pthread_mutex_t pool_mu;
	struct conn pool[POOL_MAX];
	size_t n_pool;
};

static struct s3_store *impl_of(struct gaz_store *s)
{
	return s->impl;
}

/* -------------------------------------------------------------- conns */

static void share_lock(CURL *e, curl_lock_data d, curl_lock_access a, void *arg)
{
	(void)e;
	(void)a;
	pthread_mutex_lock(&((struct s3_store *)arg)->share_mu[d]);
}

static void share_unlock(CURL *e, curl_lock_data d, void *arg)
{
	(void)e;
	pthread_mutex_unlock(&((struct s3_store *)arg)->share_mu[d]);
}

static int conn_take(struct s3_store *s3, struct conn *c)
{
	pthread_mutex_lock(&s3->pool_mu);
	if (s3->n_pool) {
		*c = s3->pool[--s3->n_pool];
		pthread_mutex_unlock(&s3->pool_mu);
		curl_easy_reset(c->e);
		return 0;
	}
	pthread_mutex_unlock(&s3->pool_mu);
	c->m = curl_multi_init();
	c->e = curl_easy_init();
	if (!c->m || !c->e) {
		curl_multi_cleanup(c->m);
		curl_easy_cleanup(c->e);
		return GAZ_ENOMEM;
	}
	return 0;
}

static void conn_free(struct conn *c)
{
	curl_multi_cleanup(c->m);
	curl_easy_cleanup(c->e);
}

/* Gives c back to the pool (its easy handle already removed from the
 * multi), or frees it when the pool is full or reuse=false. */
static void conn_give(struct s3_store *s3, struct conn *c, bool reuse)
{
	pthread_mutex_lock(&s3->pool_mu);
	if (reuse && s3->n_pool < POOL_MAX) {
		s3->pool[s3->n_pool++] = *c;
		c = NULL;
	}
	pthread_mutex_unlock(&s3->pool_mu);
	if (c)
		conn_free(c);
}

/* -------------------------------------------------------------- calls */

/* A growable response body, bounded by max. */
struct rbuf {
	char *p;
	size_t len, cap, max;
	bool over;
};

static void rbuf_free(struct rbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* Appends; returns false (and sets over) past b->max or on OOM. */
static bool rbuf_add(struct rbuf *b, const void *d, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;
		while (cap < b->len + n + 1)
			cap *= 2;
		if (b->len + n > b->max || !(p = realloc(b->p, cap))) {
			b->over = true;
			return false;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, d, n);
	b->len += n;
	b->p[b->len] = 0;
	return true;
}

/* One S3 request and what came back. */
struct s3_call {
	const char *method;
	const char *op;                  /* Gazette's store operation ("get") it is
	                                  * part of, for metrics; NULL = none */
	const char *key;                 /* full object key, NULL = the bucket */
	struct gaz_sigv4_kv query[6];
	size_t n_query;
	struct gaz_sigv4_kv hdrs[8];     /* extra headers, sent and signed */
	size_t n_hdrs;
	const char *body;                /* memory body, or ... */
	size_t body_len;
	int fd;                          /* ... a file range (fd >= 0) */
	int64_t fd_off, fd_len;
	long timeout_ms;
	/* results */
	long status;
	CURLcode cc;
	char curl_err[CURL_ERROR_SIZE];
	struct rbuf resp;
	char etag[160];
	char content_encoding[32];
	/* request state */
	int64_t sent;                    /* body bytes handed to curl */
	char payload_hash[65];
};

static size_t on_body(char *d, size_t size, size_t n, void *arg)
{
	struct s3_call *c = arg;

	return rbuf_add(&c->resp, d, size * n) ? size * n : 0;
}

/* Copies a header's value (after "Name:") trimmed into out[cap] if the
 * line is that header. */
static bool header_value(const char *line, size_t len, const char *name, char *out, size_t cap)
{
	size_t nl = strlen(name), o = 0;

	if (len <= nl || strncasecmp(line, name, nl) || line[nl] != ':')
		return false;
	line += nl + 1;
	len -= nl + 1;
	while (len && (*line == ' ' || *line == '\t'))
		line++, len--;
	while (len && (line[len - 1] == '\r' || line[len - 1] == '\n' || line[len - 1] == ' '))
		len--;
	for (; o < len && o + 1 < cap; o++)
		out[o] = line[o];
	out[o] = 0;
	return true;
}

static size_t on_header(char *d, size_t size, size_t n, void *arg)
{
	struct s3_call *c = arg;

	if (!header_value(d, size * n, "ETag", c->etag, sizeof(c->etag)))
		header_value(d, size * n, "Content-Encoding", c->content_encoding,
			     sizeof(c->content_encoding));
	return size * n;
}

static size_t on_send(char *buf, size_t size, size_t n, void *arg)
{
	struct s3_call *c = arg;
	size_t cap = size * n, left;
	ssize_t got;

	if (c->fd < 0) {
		left = c->body_len - (size_t)c->sent;
		if (cap > left)
			cap = left;
		memcpy(buf, c->body + c->sent, cap);
		c->sent += (int64_t)cap;
		return cap;
	}
	left = (size_t)(c->fd_len - c->sent);
	if (cap > left)
		cap = left;
	if (cap == 0)
		return 0;
	do
		got = pread(c->fd, buf, cap, (off_t)(c->fd_off + c->sent));
	while (got < 0 && errno == EINTR);
	if (got <= 0)
		return CURL_READFUNC_ABORT; /* fd shorter than promised */
	c->sent += got;
	return (size_t)got;
}

/* The request path ("/bucket/key" or "/key", encoded) into out[cap]. */
static int request_path(const struct gaz_s3_config *cfg, const char *key, char *out, size_t cap,
			struct gaz_status *st)
{
	size_t n = (size_t)snprintf(out, cap, "%s/", cfg->path_prefix);

	if (!key) {
		if (*cfg->path_prefix)
			out[n - 1] = 0; /* "/bucket": path-style bucket operations */
		return 0;
	}
	if (n >= cap || gaz_sigv4_uri_encode(key, true, out + n, cap - n) < 0)
		return gaz_status_set(st, GAZ_EINVAL, "s3 key \"%.64s...\" too long", key);
	return 0;
}

/* Signs c and builds its header list into *hdrs (free with
 * curl_slist_free_all). */
static int sign_call(struct s3_store *s3, struct s3_call *c, const char *path,
		     struct curl_slist **hdrs, struct gaz_status *st)
{
	const struct gaz_s3_config *cfg = &s3->cfg;
	struct gaz_sigv4_kv h[16];
	struct gaz_sigv4_out *o = malloc(sizeof(*o));
	char line[GAZ_SIGV4_MAX + 64], date[17];
	time_t when = time(NULL);
	size_t n = 0;
	int rc;

	if (!o)
		return gaz_status_set(st, GAZ_ENOMEM, "s3: out of memory");
	/* The x-amz-date header and the signing time are the same second. */
	gaz_sigv4_amz_date(when, date);
	h[n++] = (struct gaz_sigv4_kv){"host", cfg->host};
	h[n++] = (struct gaz_sigv4_kv){"x-amz-content-sha256", c->payload_hash};
	h[n++] = (struct gaz_sigv4_kv){"x-amz-date", date};
	if (cfg->creds.session_token[0])
		h[n++] = (struct gaz_sigv4_kv){"x-amz-security-token", cfg->creds.session_token};
	for (size_t i = 0; i < c->n_hdrs; i++)
		h[n++] = c->hdrs[i];
	struct gaz_sigv4_req req = {c->method, path, c->query, c->n_query, h, n,
				    c->payload_hash, cfg->region, "s3", when};
	if ((rc = gaz_sigv4_sign(&req, &cfg->creds, o, st))) {
		free(o);
		return rc;
	}
	*hdrs = NULL;
	for (size_t i = 0; i <= n; i++) {
		struct curl_slist *l;
		if (i < n)
			snprintf(line, sizeof(line), "%s: %s", h[i].key, h[i].value);
		else
			snprintf(line, sizeof(line), "Authorization: %s", o->authorization);
		if (!(l = curl_slist_append(*hdrs, line))) {
			curl_slist_free_all(*hdrs);
			free(o);
			return gaz_status_set(st, GAZ_ENOMEM, "s3: out of memory");
		}
		*hdrs = l;
	}
	*hdrs = curl_slist_append(*hdrs, "Expect:");
	gaz_trace("s3 canonical request", "canonical=%s", o->canonical);
	free(o);
	return *hdrs ? 0 : gaz_status_set(st, GAZ_ENOMEM, "s3: out of memory");
}

/* The full URL of c (base, path, encoded query) into out[cap]. */
static int call_url(struct s3_store *s3, struct s3_call *c, const char *path, char *out,
		    size_t cap, struct gaz_status *st)
{
	size_t n = (size_t)snprintf(out, cap, "%s%s", s3->cfg.base_url, path);

	for (size_t i = 0; i < c->n_query && n < cap; i++) {
		int k, v;
		out[n++] = i ? '&' : '?';
		if ((k = gaz_sigv4_uri_encode(c->query[i].key, false, out + n, cap - n)) < 0)
			break;
		n += (size_t)k;
		if (n + 1 >= cap)
			break;
		out[n++] = '=';
		if ((v = gaz_sigv4_uri_encode(c->query[i].value, false, out + n, cap - n)) < 0)
			break;
		n += (size_t)v;
	}
	if (n >= cap - 1 || strlen(out) != n)
		return gaz_status_set(st, GAZ_EINVAL, "s3 request URL too long");
	return 0;
}

static void set_common(struct s3_store *s3, CURL *e, const char *url, struct curl_slist *hdrs,
		       char *err)
{
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(e, CURLOPT_SHARE, s3->share);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT_MS);
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, err);
	err[0] = 0;
}

/* Fails a transfer that moves no byte, up or down, for stall_s: curl's
 * low-speed check under 1 byte/s, which counts the upload of a body and
 * the wait for its answer alike. curl averages the speed over its last
 * 5 seconds, so a stall is cut between stall_s and stall_s + 5 s after
 * the last byte moved. */
static void set_stall(struct s3_store *s3, CURL *e)
{
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, s3->cfg.stall_s);
}

/* Rewrites curl's "Operation too slow. Less than 1 bytes/sec transferred
 * the last N seconds" as what it means here. */
static void name_stall(struct s3_store *s3, CURLcode cc, char err[CURL_ERROR_SIZE])
{
	if (cc == CURLE_OPERATION_TIMEDOUT && strstr(err, "too slow"))
		snprintf(err, CURL_ERROR_SIZE,
			 "stalled: nothing sent or received for %ld s or more (stall timeout)",
			 s3->cfg.stall_s);
}

/* Sets the method and body of c on e. */
static void set_method(CURL *e, struct s3_call *c)
{
	int64_t len = c->fd >= 0 ? c->fd_len : (int64_t)c->body_len;

	c->sent = 0;
	if (!strcmp(c->method, "HEAD")) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
		return;
	}
	if (!strcmp(c->method, "GET"))
		return;
	if (!strcmp(c->method, "PUT") || !strcmp(c->method, "POST")) {
		curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)len);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, on_send);
		curl_easy_setopt(e, CURLOPT_READDATA, c);
	}
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, c->method);
}

/* Drives conn's multi until its one transfer ends; returns its result. */
static CURLcode drive(struct conn *cn)
{
	CURLcode result = CURLE_OK;
	int running = 1;

	for (;;) {
		CURLMsg *msg;
		int left;
		if (curl_multi_perform(cn->m, &running) != CURLM_OK)
			return CURLE_FAILED_INIT;
		while ((msg = curl_multi_info_read(cn->m, &left)))
			if (msg->msg == CURLMSG_DONE)
				result = msg->data.result;
		if (!running)
			return result;
		curl_multi_poll(cn->m, NULL, 0, 1000, NULL);
	}
}

/* One attempt of c. Returns 0 when an HTTP answer came back (any
 * status), else the transport failure (c->cc set). */
static int perform_once(struct s3_store *s3, struct s3_call *c, struct gaz_status *st)
{
	char path[GAZ_STORE_KEY_MAX * 3 + 300], url[sizeof(path) + 1024];
	struct curl_slist *hdrs = NULL;
	struct conn cn;
	int rc;

	if ((rc = request_path(&s3->cfg, c->key, path, sizeof(path), st)) ||
	    (rc = call_url(s3, c, path, url, sizeof(url), st)) ||
	    (rc = sign_call(s3, c, path, &hdrs, st)))
		return rc;
	if ((rc = conn_take(s3, &cn))) {
		curl_slist_free_all(hdrs);
		return gaz_status_set(st, rc, "s3: out of memory");
	}
	rbuf_free(&c->resp);
	c->resp.max = BODY_MAX;
	c->etag[0] = c->content_encoding[0] = 0;
	set_common(s3, cn.e, url, hdrs, c->curl_err);
	set_method(cn.e, c);
	curl_easy_setopt(cn.e, CURLOPT_TIMEOUT_MS, c->timeout_ms);
	set_stall(s3, cn.e);
	curl_easy_setopt(cn.e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(cn.e, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(cn.e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(cn.e, CURLOPT_HEADERDATA, c);
	curl_multi_add_handle(cn.m, cn.e);
	c->cc = drive(&cn);
	name_stall(s3, c->cc, c->curl_err);
	c->status = 0;
	curl_easy_getinfo(cn.e, CURLINFO_RESPONSE_CODE, &c->status);
	curl_multi_remove_handle(cn.m, cn.e);
	conn_give(s3, &cn, c->cc == CURLE_OK);
	curl_slist_free_all(hdrs);
	return c->cc == CURLE_OK ? 0 : GAZ_EUNAVAIL;
}

/* ------------------------------------------------------------- errors */

static bool code_is(const char *code, const char *const *set)
{
	for (; *set; set++)
		if (!strcmp(code, *set))
			return true;
	return false;
}

static const char *const retry_codes[] = {"SlowDown", "InternalError", "RequestTimeout",
					  "ServiceUnavailable", NULL};
static const char *const auth_codes[] = {"AccessDenied", "InvalidAccessKeyId",
					 "SignatureDoesNotMatch", "NoSuchBucket", NULL};

/* Whether the attempt's outcome is worth another try. */
static bool retryable(const struct s3_call *c, int rc, const char *code)
{
	if (rc == GAZ_EUNAVAIL)
		return c->cc != CURLE_ABORTED_BY_CALLBACK && c->cc != CURLE_READ_ERROR;
	return c->status >= 500 || c->status == 429 || code_is(code, retry_codes);
}

/* Maps a failed call to a store error code with a clear message. */
static int call_error(struct s3_store *s3, const struct s3_call *c, int rc, struct gaz_status *st)
{
	const struct gaz_s3_config *cfg = &s3->cfg;
	char code[128], msg[256];
	const char *key = c->key ? c->key : "";
	int err;

	if (rc == GAZ_EUNAVAIL)
		return gaz_status_set(st, GAZ_EUNAVAIL, "s3 %s \"%s/%s\" failed: %s (%s)", c->method,
				      cfg->bucket, key, c->curl_err[0] ? c->curl_err : curl_easy_strerror(c->cc),
				      cfg->base_url);
	gaz__s3_parse_error(c->resp.p, c->resp.len, code, sizeof(code), msg, sizeof(msg));
	if (!strcmp(code, "NoSuchBucket") || (c->status == 404 && !c->key && !*code))
		return gaz_status_set(st, GAZ_EPERM, "s3 bucket \"%s\" does not exist (NoSuchBucket at %s)",
				      cfg->bucket, cfg->base_url);
	if (c->status == 403 || code_is(code, auth_codes))
		err = GAZ_EPERM;
	else if (c->status == 404)
		err = GAZ_ENOTFOUND;
	else if (c->status == 416)
		err = GAZ_EINVAL;
	else if (c->status >= 500 || c->status == 429)
		err = GAZ_EUNAVAIL;
	else
		err = GAZ_EIO;
	if (err == GAZ_EPERM)
		return gaz_status_set(st, err, "s3 %s \"%s/%s\" failed: HTTP %ld %s%s%s (access key %s from %s, "
				      "region %s)", c->method, cfg->bucket, key, c->status, *code ? code : "Forbidden",
				      *msg ? ": " : "", msg, cfg->creds.access_key, cfg->creds_source, cfg->region);
	return gaz_status_set(st, err, "s3 %s \"%s/%s\" failed: HTTP %ld%s%s%s%s", c->method, cfg->bucket,
			      key, c->status, *code ? " " : "", code, *msg ? ": " : "", msg);
}

static void backoff(int attempt)
{
	int64_t ms = (int64_t)BACKOFF_MS << attempt;
	int64_t jitter = ms / 5;
	struct timespec ts;

	ms += jitter ? (int64_t)(random() % (2 * jitter + 1)) - jitter : 0;
	ts.tv_sec = (time_t)(ms / 1000);
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Hashes the call's body for x-amz-content-sha256 (signed payloads). */
static int hash_body(struct s3_call *c, struct gaz_status *st)
{
	unsigned char buf[65536];
	EVP_MD_CTX *ctx;
	unsigned char md[32];
	unsigned int mdlen = 0;
	int64_t done = 0;

	if (c->fd < 0) {
		gaz_sigv4_sha256_hex(c->body ? c->body : "", c->body_len, c->payload_hash);
		return 0;
	}
	if (!(ctx = EVP_MD_CTX_new()) || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		EVP_MD_CTX_free(ctx);
		return gaz_status_set(st, GAZ_ENOMEM, "s3: hashing the body: out of memory");
	}
	while (done < c->fd_len) {
		size_t want = c->fd_len - done < (int64_t)sizeof(buf) ? (size_t)(c->fd_len - done) : sizeof(buf);
		ssize_t got = pread(c->fd, buf, want, (off_t)(c->fd_off + done));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			EVP_MD_CTX_free(ctx);
			return gaz_status_set(st, GAZ_EIO, "s3 put: source holds %lld of %lld bytes",
					      (long long)done, (long long)c->fd_len);
		}
		EVP_DigestUpdate(ctx, buf, (size_t)got);
		done += got;
	}
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	EVP_MD_CTX_free(ctx);
	for (unsigned i = 0; i < 32; i++)
		snprintf(c->payload_hash + 2 * i, 3, "%02x", md[i]);
	return 0;
}

/* Logs a failed attempt of `c` that will be retried, at warning (what was
 * asked, what came back, which attempt failed), and counts it as a failed
 * operation of Gazette's gazette_store_operation_total{status="error"}
 * (with its duration from `t0_ns`): a retried read or write is otherwise
 * invisible, as only the operation's outcome is counted. */
static void note_retry(struct s3_store *s3, const struct s3_call *c, const char *code, int attempt,
		       int64_t t0_ns)
{
	gaz_warn("retrying s3 request", "store=%s method=%s key=%s status=%ld err=%s attempt=%d",
		 s3->store->url.raw, c->method, c->key ? c->key : "", c->status,
		 c->curl_err[0] ? c->curl_err : code && *code ? code : curl_easy_strerror(c->cc),
		 attempt);
	if (c->op)
		gaz__store_attempt_failed(s3->store, c->op, t0_ns);
}

/* Runs c with retries. Returns 0 on a 2xx answer, else the mapped error.
 * c->resp holds the last body (free with rbuf_free). */
static int s3_do(struct s3_store *s3, struct s3_call *c, struct gaz_status *st)
{
	struct gaz_status local = {0};
	char code[128], msg[8];
	int rc = 0;

	if (!c->payload_hash[0] && (rc = hash_body(c, st)))
		return rc;
	if (!c->timeout_ms)
		c->timeout_ms = CALL_TIMEOUT_MS;
	for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
		if (attempt)
			backoff(attempt - 1);
		gaz_status_clear(&local);
		int64_t t0 = gaz_mono_ns();
		rc = perform_once(s3, c, &local);
		if (rc && rc != GAZ_EUNAVAIL)
			return gaz_status_set(st, rc, "%s", local.msg);
		if (!rc && c->status >= 200 && c->status < 300)
			return 0;
		gaz__s3_parse_error(c->resp.p, c->resp.len, code, sizeof(code), msg, sizeof(msg));
		if (!retryable(c, rc, code) || attempt + 1 == MAX_ATTEMPTS)
			break;
		note_retry(s3, c, code, attempt + 1, t0);
	}
	return call_error(s3, c, rc, st);
}

static void call_init(struct s3_call *c, const char *method, const char *key, const char *op)
{
	memset(c, 0, sizeof(*c));
	c->method = method;
	c->op = op;
	c->key = key;
	c->fd = -1;
}

/* "<prefix><key>" into out[cap]. */
static int full_key(struct s3_store *s3, const char *key, char *out, size_t cap,
		    struct gaz_status *st)
{
	int n = snprintf(out, cap, "%s%s", s3->cfg.prefix, key);

	if (n < 0 || (size_t)n >= cap)
		return gaz_status_set(st, GAZ_EINVAL, "s3 key \"%s%.64s...\" too long", s3->cfg.prefix, key);
	return 0;
}

/* --------------------------------------------------------------- list */

static int list_page(struct s3_store *s3, const char *prefix, const char *token,
		     struct gaz_s3_list_page *page, struct gaz_status *st)
{
	struct s3_call c;
	int rc;

	call_init(&c, "GET", NULL, "list");
	c.query[c.n_query++] = (struct gaz_sigv4_kv){"list-type", "2"};
	c.query[c.n_query++] = (struct gaz_sigv4_kv){"prefix", prefix};
	if (token)
		c.query[c.n_query++] = (struct gaz_sigv4_kv){"continuation-token", token};
	rc = s3_do(s3, &c, st);
	if (!rc)
		rc = gaz__s3_parse_list(c.resp.p ? c.resp.p : "", c.resp.len, page, st);
	rbuf_free(&c.resp);
	return rc;
}

/* Calls cb for each object of page below prefix (keys ending in '/' are
 * directory placeholders and skipped, as Gazette's store does). */
static int list_emit(const struct gaz_s3_list_page *page, const char *prefix, gaz_store_list_fn cb,
		     void *arg, struct gaz_status *st)
{
	size_t plen = strlen(prefix);
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < page->n; i++) {
		const struct gaz_s3_obj *o = &page->objs[i];
		size_t klen = strlen(o->key);
		if (strncmp(o->key, prefix, plen) || klen == plen || o->key[klen - 1] == '/')
			continue;
		struct gaz_store_obj obj = {o->key + plen, o->size, o->mod_time};
		rc = cb(arg, &obj, st);
	}
	return rc;
}

static int s3_list(struct gaz_store *s, const char *key_prefix, gaz_store_list_fn cb, void *arg,
		   struct gaz_status *st)
{
	struct s3_store *s3 = impl_of(s);
	struct gaz_s3_list_page page;
	char prefix[GAZ_STORE_KEY_MAX + 512], *token = NULL;
	int rc;

	if ((rc = full_key(s3, key_prefix, prefix, sizeof(prefix), st)))
		return rc;
	do {
		if ((rc = list_page(s3, prefix, token, &page, st)))
			break;
		rc = list_emit(&page, prefix, cb, arg, st);
		if (!rc && page.truncated && token && !strcmp(token, page.next_token))
			rc = gaz_status_set(st, GAZ_EPROTO, "s3 listing of \"%s\" repeats its continuation token",
					    prefix);
		free(token);
		token = !rc && page.truncated ? page.next_token : NULL;
		if (token)
			page.next_token = NULL;
		gaz__s3_list_page_release(&page);
	} while (token);
	free(token); /* a page that failed after a token */
	return rc;
}

/* ------------------------------------------------------ exists/remove */

/* A request on one object with no body to send or keep (HEAD, DELETE). */
static int object_request(struct gaz_store *s, const char *method, const char *key,
			  struct gaz_status *st)
{
	struct s3_store *s3 = impl_of(s);
	char k[GAZ_STORE_KEY_MAX + 512];
	struct s3_call c;
	int rc;

	if ((rc = full_key(s3, key, k, sizeof(k), st)))
		return rc;
	call_init(&c, method, k, !strcmp(method, "HEAD") ? "exists" : "remove");
	rc = s3_do(s3, &c, st);
	rbuf_free(&c.resp);
	return rc;
}

static int s3_exists(struct gaz_store *s, const char *key, bool *exists, struct gaz_status *st)
{
	int rc = object_request(s, "HEAD", key, st);

	if (rc == GAZ_ENOTFOUND) {
		gaz_status_clear(st);
		rc = 0;
	} else if (rc == 0) {
		*exists = true;
	}
	return rc;
}

static int s3_remove(struct gaz_store *s, const char *key, struct gaz_status *st)
{
	return object_request(s, "DELETE", key, st);
}

/* ---------------------------------------------------------------- put */

/* The object headers Gazette sets on uploads, only when given. */
static void put_headers(struct s3_store *s3, struct s3_call *c, const char *content_encoding)
{
	const struct gaz_s3_config *cfg = &s3->cfg;

	if (*cfg->acl)
		c->hdrs[c->n_hdrs++] = (struct gaz_sigv4_kv){"x-amz-acl", cfg->acl};
	if (*cfg->storage_class)
		c->hdrs[c->n_hdrs++] = (struct gaz_sigv4_kv){"x-amz-storage-class", cfg->storage_class};
	if (*cfg->sse)
		c->hdrs[c->n_hdrs++] = (struct gaz_sigv4_kv){"x-amz-server-side-encryption", cfg->sse};
	if (*cfg->sse_kms_key_id)
		c->hdrs[c->n_hdrs++] =
			(struct gaz_sigv4_kv){"x-amz-server-side-encryption-aws-kms-key-id", cfg->sse_kms_key_id};
	if (content_encoding && *content_encoding)
		c->hdrs[c->n_hdrs++] = (struct gaz_sigv4_kv){"content-encoding", content_encoding};
}

static int put_single(struct s3_store *s3, const char *k, int fd, int64_t len, const char *enc,
		      struct gaz_status *st)
{
	struct s3_call c;
	int rc;

	call_init(&c, "PUT", k, "put");
	put_headers(s3, &c, enc);
	c.fd = fd;
	c.fd_len = len;
	c.timeout_ms = PUT_TIMEOUT_MS;
	rc = s3_do(s3, &c, st);
	rbuf_free(&c.resp);
	return rc;
}

static int mp_create(struct s3_store *s3, const char *k, const char *enc, char *upload_id,
		     size_t cap, struct gaz_status *st)
{
	struct s3_call c;
	int rc;

	call_init(&c, "POST", k, "put");
	c.query[c.n_query++] = (struct gaz_sigv4_kv){"uploads", ""};
	put_headers(s3, &c, enc);
	if (!(rc = s3_do(s3, &c, st)) && !gaz__s3_parse_upload_id(c.resp.p, c.resp.len, upload_id, cap))
		rc = gaz_status_set(st, GAZ_EPROTO, "s3 multipart upload of \"%s\": no UploadId in answer", k);
	rbuf_free(&c.resp);
	return rc;
}

static int mp_part(struct s3_store *s3, const char *k, const char *upload_id, int part, int fd,
		   int64_t off, int64_t len, struct rbuf *done, struct gaz_status *st)
{
	char num[16], entry[256];
	struct s3_call c;
	int rc;

	snprintf(num, sizeof(num), "%d", part);
	call_init(&c, "PUT", k, "put");
	c.query[c.n_query++] = (struct gaz_sigv4_kv){"partNumber", num};
	c.query[c.n_query++] = (struct gaz_sigv4_kv){"uploadId", upload_id};
	c.fd = fd;
	c.fd_off = off;
	c.fd_len = len;
	c.timeout_ms = PUT_TIMEOUT_MS;
	rc = s3_do(s3, &c, st);
	rbuf_free(&c.resp);
	if (!rc && !c.etag[0])
		rc = gaz_status_set(st, GAZ_EPROTO, "s3 UploadPart %d of \"%s\": no ETag in answer", part, k);
	if (rc)
		return rc;
	snprintf(entry, sizeof(entry), "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>", part,
		 c.etag);
	return rbuf_add(done, entry, strlen(entry)) ? 0 : gaz_status_set(st, GAZ_ENOMEM, "s3: out of memory");
}

static int mp_complete(struct s3_store *s3, const char *k, const char *upload_id, struct rbuf *parts,
		       struct gaz_status *st)
{
	char code[128], msg[256];
	struct s3_call c;
	int rc;

	call_init(&c, "POST", k, "put");
	c.query[c.n_query++] = (struct gaz_sigv4_kv){"uploadId", upload_id};
	c.body = parts->p;
	c.body_len = parts->len;
	rc = s3_do(s3, &c, st);
	/* S3 may answer 200 and still report an error in the body. */
	if (!rc && gaz__s3_parse_error(c.resp.p, c.resp.len, code, sizeof(code), msg, sizeof(msg)))
		rc = gaz_status_set(st, GAZ_EIO, "s3 CompleteMultipartUpload of \"%s\" failed: %s: %s", k,
				    code, msg);
	rbuf_free(&c.resp);
	return rc;
}

static void mp_abort(struct s3_store *s3, const char *k, const char *upload_id)
{
	struct gaz_status st = {0};
	struct s3_call c;

	call_init(&c, "DELETE", k, "put");
	c.query[c.n_query++] = (struct gaz_sigv4_kv){"uploadId", upload_id};
	if (s3_do(s3, &c, &st))
		gaz_warn("aborting s3 multipart upload failed", "key=%s err=%s", k, st.msg);
	rbuf_free(&c.resp);
}

static int put_multipart(struct s3_store *s3, const char *k, int fd, int64_t len, const char *enc,
			 struct gaz_status *st)
{
	static const char open_tag[] = "<CompleteMultipartUpload>", close_tag[] = "</CompleteMultipartUpload>";
	struct rbuf parts = {.max = (size_t)MAX_PARTS * 256};
	char upload_id[1024];
	int64_t part_len = PART_BYTES;
	int rc, part = 1;

	while (len / part_len >= MAX_PARTS)
		part_len *= 2;
	if ((rc = mp_create(s3, k, enc, upload_id, sizeof(upload_id), st)))
		return rc;
	rbuf_add(&parts, open_tag, strlen(open_tag));
	for (int64_t off = 0; rc == 0 && off < len; off += part_len, part++)
		rc = mp_part(s3, k, upload_id, part, fd, off, len - off < part_len ? len - off : part_len,
			     &parts, st);
	if (!rc && !rbuf_add(&parts, close_tag, strlen(close_tag)))
		rc = gaz_status_set(st, GAZ_ENOMEM, "s3: out of memory");
	if (!rc)
		rc = mp_complete(s3, k, upload_id, &parts, st);
	if (rc)
		mp_abort(s3, k, upload_id);
	rbuf_free(&parts);
	return rc;
}

static int s3_put(struct gaz_store *s, const char *key, int fd, int64_t len,
		  const char *content_encoding, struct gaz_status *st)
{
	struct s3_store *s3 = impl_of(s);
	char k[GAZ_STORE_KEY_MAX + 512];
	int rc;

	if ((rc = full_key(s3, key, k, sizeof(k), st)))
		return rc;
	if (len > MULTIPART_BYTES)
		return put_multipart(s3, k, fd, len, content_encoding, st);
	return put_single(s3, k, fd, len, content_encoding, st);
}

/* --------------------------------------------------------------- sign */

static int presign(struct s3_store *s3, const char *k, int64_t ttl_s, char **url,
		   struct gaz_status *st)
{
	const struct gaz_s3_config *cfg = &s3->cfg;
	char path[GAZ_STORE_KEY_MAX * 3 + 300], q[GAZ_SIGV4_MAX];
	const struct gaz_sigv4_kv h[] = {{"host", cfg->host}};
	struct gaz_sigv4_out *o;
	int rc;

	if ((rc = request_path(cfg, k, path, sizeof(path), st)))
		return rc;
	if (!(o = malloc(sizeof(*o))))
		return gaz_status_set(st, GAZ_ENOMEM, "s3 signing: out of memory");
	struct gaz_sigv4_req req = {"GET", path, NULL, 0, h, 1, NULL, cfg->region, "s3", time(NULL)};
	rc = gaz_sigv4_presign(&req, &cfg->creds, ttl_s, q, sizeof(q), o, st);
	free(o);
	if (rc)
		return rc;
	if (asprintf(url, "%s%s?%s", cfg->base_url, path, q) < 0) {
		*url = NULL;
		return gaz_status_set(st, GAZ_ENOMEM, "s3 signing: out of memory");
	}
	return 0;
}

static int s3_sign_get(struct gaz_store *s, const char *key, int64_t ttl_s, char **url,
		       struct gaz_status *st)
{
	struct s3_store *s3 = impl_of(s);
	char k[GAZ_STORE_KEY_MAX + 512];
	int rc = full_key(s3, key, k, sizeof(k), st);

	return rc ? rc : presign(s3, k, ttl_s, url, st);
}

/* Health check step: GET a signed URL as a client would (no signing of
 * our own); expect 200 and at most cap bytes. */
static int s3_fetch(struct gaz_store *s, const char *url, char *buf, size_t cap, size_t *n,
		    struct gaz_status *st)
{
	struct s3_store *s3 = impl_of(s);
	struct s3_call c;
	struct conn cn;
	long status = 0;
	CURLcode cc;

	call_init(&c, "GET", NULL, NULL);
	c.resp.max = cap;
	if (conn_take(s3, &cn))
		return gaz_status_set(st, GAZ_ENOMEM, "s3: out of memory");
	set_common(s3, cn.e, url, NULL, c.curl_err);
	curl_easy_setopt(cn.e, CURLOPT_TIMEOUT_MS, (long)CALL_TIMEOUT_MS);
	set_stall(s3, cn.e);
	curl_easy_setopt(cn.e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(cn.e, CURLOPT_WRITEDATA, &c);
	curl_multi_add_handle(cn.m, cn.e);
	cc = drive(&cn);
	name_stall(s3, cc, c.curl_err);
	curl_easy_getinfo(cn.e, CURLINFO_RESPONSE_CODE, &status);
	curl_multi_remove_handle(cn.m, cn.e);
	conn_give(s3, &cn, cc == CURLE_OK);
	*n = c.resp.len < cap ? c.resp.len : cap;
	if (c.resp.p)
		memcpy(buf, c.resp.p, *n);
	rbuf_free(&c.resp);
	if (cc != CURLE_OK && !(cc == CURLE_WRITE_ERROR && status == 200))
		return gaz_status_set(st, GAZ_EUNAVAIL, "fetching signed URL failed: %s",
				      c.curl_err[0] ? c.curl_err : curl_easy_strerror(cc));
	if (status != 200)
		return gaz_status_set(st, status == 403 ? GAZ_EPERM : GAZ_EIO,
				      "fetching signed URL failed: HTTP %ld", status);
	return 0;
}

/* ---------------------------------------------------- streamed reader */

struct s3_reader {
	struct gaz_store_reader base; /* first: the public view */
	struct s3_store *s3;
	char key[GAZ_STORE_KEY_MAX + 512];
	struct s3_call call;          /* the request (and its error body) */
	struct conn cn;
	bool have_conn, active, done, paused, streaming;
	CURLcode result;
	struct curl_slist *hdrs;
	char range[48];
	int64_t off;                  /* object offset of the first byte wanted */
	int64_t received;             /* bytes accepted into buf since off */
	int64_t skip;                 /* bytes still to drop: a 200 to a Range */
	char *buf;                    /* [head, head + len) unread */
	size_t head, len, cap;
	int attempts;                 /* failed attempts so far */
	int64_t attempt_t0_ns;        /* start of the current attempt (monotonic) */
};

static size_t reader_on_body(char *d, size_t size, size_t n, void *arg)
{
	struct s3_reader *r = arg;
	size_t len = size * n;
	long status = 0;

	curl_easy_getinfo(r->cn.e, CURLINFO_RESPONSE_CODE, &status);
	if (status != 200 && status != 206)
		return rbuf_add(&r->call.resp, d, len) ? len : 0; /* error body */
	if (!r->streaming && status == 200 && r->range[0])
		r->skip = r->off + r->received; /* the Range was ignored */
	r->streaming = true;
	if (r->skip) {
		size_t drop = (int64_t)len < r->skip ? len : (size_t)r->skip;
		r->skip -= (int64_t)drop;
		if (drop == len)
			return len;
		size_t got = reader_on_body(d + drop, 1, len - drop, arg);
		if (got == CURL_WRITEFUNC_PAUSE)
			r->skip += (int64_t)drop; /* all of it comes again */
		return got == len - drop ? len : got == CURL_WRITEFUNC_PAUSE ? got : 0;
	}
	if (r->head && r->cap - r->head - r->len < len) {
		memmove(r->buf, r->buf + r->head, r->len);
		r->head = 0;
	}
	if (r->cap - r->head - r->len < len) {
		if (r->len) {
			r->paused = true;
			return CURL_WRITEFUNC_PAUSE; /* redelivered after resume */
		}
		/* A single delivery larger than the buffer: grow, bounded. */
		char *p = len <= STREAM_BUF_MAX ? realloc(r->buf, len) : NULL;
		if (!p)
			return 0;
		r->buf = p;
		r->cap = len;
	}
	memcpy(r->buf + r->head + r->len, d, len);
	r->len += len;
	r->received += (int64_t)len;
	return len;
}

static void reader_stop(struct s3_reader *r)
{
	if (r->active) {
		curl_multi_remove_handle(r->cn.m, r->cn.e);
		r->active = false;
	}
	curl_slist_free_all(r->hdrs);
	r->hdrs = NULL;
}

/* Starts (or resumes) the GET at object offset off + received. */
static int reader_start(struct s3_reader *r, struct gaz_status *st)
{
	struct s3_store *s3 = r->s3;
	char path[GAZ_STORE_KEY_MAX * 3 + 300], url[sizeof(path) + 64];
	int64_t from = r->off + r->received;
	int rc;

	rbuf_free(&r->call.resp);
	call_init(&r->call, "GET", r->key, "get");
	r->range[0] = 0;
	if (from > 0) {
		snprintf(r->range, sizeof(r->range), "bytes=%lld-", (long long)from);
		r->call.hdrs[r->call.n_hdrs++] = (struct gaz_sigv4_kv){"range", r->range};
	}
	snprintf(r->call.payload_hash, sizeof(r->call.payload_hash), "%s", GAZ_SIGV4_EMPTY_SHA256);
	r->call.resp.max = 64 * 1024;
	if ((rc = request_path(&s3->cfg, r->key, path, sizeof(path), st)) ||
	    (rc = call_url(s3, &r->call, path, url, sizeof(url), st)) ||
	    (rc = sign_call(s3, &r->call, path, &r->hdrs, st)))
		return rc;
	if (!r->have_conn) {
		if (conn_take(s3, &r->cn))
			return gaz_status_set(st, GAZ_ENOMEM, "s3: out of memory");
		r->have_conn = true;
	} else {
		curl_easy_reset(r->cn.e);
	}
	set_common(s3, r->cn.e, url, r->hdrs, r->call.curl_err);
	curl_easy_setopt(r->cn.e, CURLOPT_WRITEFUNCTION, reader_on_body);
	curl_easy_setopt(r->cn.e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(r->cn.e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(r->cn.e, CURLOPT_HEADERDATA, &r->call);
	set_stall(s3, r->cn.e);
	r->done = r->paused = r->streaming = false;
	r->attempt_t0_ns = gaz_mono_ns();
	r->active = curl_multi_add_handle(r->cn.m, r->cn.e) == CURLM_OK;
	return r->active ? 0 : gaz_status_set(st, GAZ_EIO, "s3: starting GET failed");
}

/* Moves the transfer along once: perform, collect completion, wait a
 * little if nothing is buffered. */
static void reader_step(struct s3_reader *r)
{
	CURLMsg *msg;
	int running, left;

	if (r->paused && r->cap - r->len > 0) {
		r->paused = false;
		curl_easy_pause(r->cn.e, CURLPAUSE_CONT);
	}
	curl_multi_perform(r->cn.m, &running);
	while ((msg = curl_multi_info_read(r->cn.m, &left))) {
		if (msg->msg == CURLMSG_DONE) {
			r->done = true;
			r->result = msg->data.result;
		}
	}
	if (!r->done && !r->len && !r->paused)
		curl_multi_poll(r->cn.m, NULL, 0, 1000, NULL);
}

/* Settles a finished transfer: 0 when complete, a resume started, or an
 * error. */
static int reader_settle(struct s3_reader *r, struct gaz_status *st)
{
	long status = 0;
	int rc;

	curl_easy_getinfo(r->cn.e, CURLINFO_RESPONSE_CODE, &status);
	r->call.status = status;
	r->call.cc = r->result;
	name_stall(r->s3, r->result, r->call.curl_err);
	reader_stop(r);
	if (r->result == CURLE_OK && (status == 200 || status == 206))
		return 0;
	rc = r->result == CURLE_OK ? 0 : GAZ_EUNAVAIL;
	char code[128] = "", msg[8];
	bool again = false;
	gaz__s3_parse_error(r->call.resp.p, r->call.resp.len, code, sizeof(code), msg, sizeof(msg));
	if (r->result != CURLE_OK && r->result != CURLE_ABORTED_BY_CALLBACK && r->result != CURLE_WRITE_ERROR)
		again = ++r->attempts < MAX_ATTEMPTS && retryable(&r->call, rc, code);
	else if (r->result == CURLE_OK)
		again = ++r->attempts < MAX_ATTEMPTS && (status >= 500 || status == 429);
	if (!again)
		return call_error(r->s3, &r->call, rc, st);
	/* A cut body resumes at the first byte not yet received (Range). */
	note_retry(r->s3, &r->call, code, r->attempts, r->attempt_t0_ns);
	backoff(r->attempts - 1);
	rbuf_free(&r->call.resp);
	return reader_start(r, st);
}

static int reader_read(struct gaz_store_reader *base, void *buf, size_t cap, size_t *n,
		       struct gaz_status *st)
{
	struct s3_reader *r = (struct s3_reader *)base;
	int rc;

	*n = 0;
	while (r->len == 0) {
		if (!r->active)
			return GAZ_EOF;
		reader_step(r);
		if (r->done && r->len == 0 && (rc = reader_settle(r, st)))
			return rc;
	}
	*n = cap < r->len ? cap : r->len;
	memcpy(buf, r->buf + r->head, *n);
	r->head += *n;
	r->len -= *n;
	if (r->len == 0)
		r->head = 0;
	return 0;
}

static void reader_close(struct gaz_store_reader *base)
{
	struct s3_reader *r = (struct s3_reader *)base;

	if (!r)
		return;
	reader_stop(r);
	if (r->have_conn)
		conn_give(r->s3, &r->cn, r->done && r->result == CURLE_OK);
	rbuf_free(&r->call.resp);
	free(r->buf);
	free(r);
}

static int s3_get(struct gaz_store *s, const char *key, int64_t off, struct gaz_store_reader **out,
		  struct gaz_status *st)
{
	struct s3_store *s3 = impl_of(s);
	struct s3_reader *r = calloc(1, sizeof(*r));
	curl_off_t clen = -1;
	int rc;

	if (!r || !(r->buf = malloc(STREAM_BUF))) {
		free(r);
		return gaz_status_set(st, GAZ_ENOMEM, "s3 get: out of memory");
	}
	r->base = (struct gaz_store_reader){reader_read, reader_close, 0, "", -1};
	r->s3 = s3;
	r->off = off;
	r->cap = STREAM_BUF;
	if ((rc = full_key(s3, key, r->key, sizeof(r->key), st)) || (rc = reader_start(r, st)))
		goto fail;
	/* Wait for the answer's head: errors (404, 403, 416) surface here. */
	while (!r->streaming && (rc = 0, r->active)) {
		reader_step(r);
		if (r->done && !r->streaming && (rc = reader_settle(r, st)))
			goto fail;
	}
	curl_easy_getinfo(r->cn.e, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &clen);
	r->base.len = clen >= 0 ? (int64_t)clen : -1;
	snprintf(r->base.content_encoding, sizeof(r->base.content_encoding), "%s",
		 r->call.content_encoding);
	*out = &r->base;
	return 0;
fail:
	reader_close(&r->base);
	return rc;
}

/* ---------------------------------------------------------------- open */

static void s3_destroy(struct gaz_store *s)
{
	struct s3_store *s3 = s->impl;

	if (!s3)
		return;
	for (size_t i = 0; i < s3->n_pool; i++)
		conn_free(&s3->pool[i]);
	curl_share_cleanup(s3->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&s3->share_mu[i]);
	pthread_mutex_destroy(&s3->pool_mu);
	gaz__s3_config_release(&s3->cfg);
	free(s3);
	s->impl = NULL;
}

static const struct gaz_store_ops s3_ops = {
	.provider = "s3",
	.list = s3_list,
	.exists = s3_exists,
	.get = s3_get,
	.put = s3_put,
	.remove = s3_remove,
	.sign_get = s3_sign_get,
	.fetch = s3_fetch,
	.destroy = s3_destroy,
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int gaz__store_s3_open(struct gaz_store *s, const char *file_root, struct gaz_status *st)
{
	struct s3_store *s3;
	int rc;

	(void)file_root;
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return gaz_status_set(st, GAZ_EIO, "initializing libcurl failed");
	if (!(s3 = calloc(1, sizeof(*s3))))
		return gaz_status_set(st, GAZ_ENOMEM, "opening s3 store: out of memory");
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&s3->share_mu[i], NULL);
	pthread_mutex_init(&s3->pool_mu, NULL);
	s->impl = s3;
	s->ops = &s3_ops;
	s3->store = s;
	if ((rc = gaz__s3_config_resolve(s, &s3->cfg, st)))
		return rc;
	if (!(s3->share = curl_share_init()))
		return gaz_status_set(st, GAZ_ENOMEM, "opening s3 store: out of memory");
	curl_share_setopt(s3->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(s3->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(s3->share, CURLSHOPT_USERDATA, s3);
	curl_share_setopt(s3->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(s3->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	gaz_info("opened s3 fragment store", "store=%s endpoint=%s region=%s path_style=%d key_id=%s creds=%s",
		 s->url.raw, s3->cfg.base_url, s3->cfg.region, s3->cfg.path_style,
		 s3->cfg.creds.access_key, s3->cfg.creds_source);
	return 0;
}
