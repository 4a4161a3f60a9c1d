/*
 * sigv4.c - AWS Signature Version 4 (see sigv4.h for the algorithm and
 * its sources). Everything is built in fixed, bounded buffers; an input
 * that does not fit is GAZ_EINVAL, never a truncated signature.
 *
 * Must not call: curl, grpc, the clock (the signing time is an input).
 */
#include "store/sigv4.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_PARAMS 32
#define MAX_HEADERS 24

/* A bounded string builder over a caller's buffer. `bad` sticks once
 * anything did not fit. */
struct sb {
	char *p;
	size_t len, cap;
	bool bad;
};

static void sb_add(struct sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_add(struct sb *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->bad)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= b->cap - b->len) {
		b->bad = true;
		b->p[b->len] = 0;
		return;
	}
	b->len += (size_t)n;
}

static void hex(const unsigned char *d, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 15];
	}
	out[2 * n] = 0;
}

void gaz_sigv4_sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char md[SHA256_DIGEST_LENGTH];

	SHA256(data, len, md);
	hex(md, sizeof(md), out);
}

void gaz_sigv4_amz_date(time_t when, char out[17])
{
	struct tm tm;

	gmtime_r(&when, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

int gaz_sigv4_uri_encode(const char *in, bool keep_slash, char *out, size_t cap)
{
	static const char digits[] = "0123456789ABCDEF";
	size_t o = 0;

	for (const unsigned char *c = (const unsigned char *)in; *c; c++) {
		bool plain = isalnum(*c) || *c == '-' || *c == '_' || *c == '.' || *c == '~' ||
			     (keep_slash && *c == '/');
		if (o + (plain ? 1 : 3) >= cap)
			return -1;
		if (plain) {
			out[o++] = (char)*c;
		} else {
			out[o++] = '%';
			out[o++] = digits[*c >> 4];
			out[o++] = digits[*c & 15];
		}
	}
	if (o >= cap)
		return -1;
	out[o] = 0;
	return (int)o;
}

/* An encoded query parameter, for sorting. */
struct enc_kv {
	char key[512];
	char value[4096];
};

static int enc_cmp(const void *a, const void *b)
{
	const struct enc_kv *x = a, *y = b;
	int c = strcmp(x->key, y->key);

	return c ? c : strcmp(x->value, y->value);
}

/* Canonical query: encoded, sorted by name then value, '&'-joined. */
static int canonical_query(const struct gaz_sigv4_kv *q, size_t n, struct sb *b,
			   struct gaz_status *st)
{
	struct enc_kv *v;

	if (n == 0)
		return 0;
	if (n > MAX_PARAMS)
		return gaz_status_set(st, GAZ_EINVAL, "sigv4: too many query parameters (%zu)", n);
	if (!(v = malloc(n * sizeof(*v))))
		return gaz_status_set(st, GAZ_ENOMEM, "sigv4: out of memory");
	for (size_t i = 0; i < n; i++) {
		if (gaz_sigv4_uri_encode(q[i].key, false, v[i].key, sizeof(v[i].key)) < 0 ||
		    gaz_sigv4_uri_encode(q[i].value ? q[i].value : "", false, v[i].value,
					 sizeof(v[i].value)) < 0) {
			free(v);
			return gaz_status_set(st, GAZ_EINVAL, "sigv4: query parameter \"%.64s\" too long",
					      q[i].key);
		}
	}
	qsort(v, n, sizeof(*v), enc_cmp);
	for (size_t i = 0; i < n; i++)
		sb_add(b, "%s%s=%s", i ? "&" : "", v[i].key, v[i].value);
	free(v);
	return 0;
}

/* A header prepared for signing: lowercase name, trimmed folded value. */
struct canon_hdr {
	char name[64];
	char value[4096];
};

static int hdr_cmp(const void *a, const void *b)
{
	return strcmp(((const struct canon_hdr *)a)->name, ((const struct canon_hdr *)b)->name);
}

static bool canon_header(const struct gaz_sigv4_kv *h, struct canon_hdr *out)
{
	const char *v = h->value ? h->value : "";
	size_t n = strlen(h->key), o = 0;

	if (n == 0 || n >= sizeof(out->name))
		return false;
	for (size_t i = 0; i <= n; i++)
		out->name[i] = (char)tolower((unsigned char)h->key[i]);
	while (*v == ' ' || *v == '\t')
		v++;
	for (; *v; v++) {
		bool space = *v == ' ' || *v == '\t';
		if (space && (o == 0 || out->value[o - 1] == ' '))
			continue;
		if (o + 1 >= sizeof(out->value))
			return false;
		out->value[o++] = space ? ' ' : *v;
	}
	while (o > 0 && out->value[o - 1] == ' ')
		o--;
	out->value[o] = 0;
	return true;
}

/* Canonical headers block and the signed-headers list. */
static int canonical_headers(const struct gaz_sigv4_req *req, struct sb *b, struct sb *signed_b,
			     struct gaz_status *st)
{
	struct canon_hdr *h;
	bool has_host = false;

	if (req->n_headers == 0 || req->n_headers > MAX_HEADERS)
		return gaz_status_set(st, GAZ_EINVAL, "sigv4: %zu headers to sign", req->n_headers);
	if (!(h = malloc(req->n_headers * sizeof(*h))))
		return gaz_status_set(st, GAZ_ENOMEM, "sigv4: out of memory");
	for (size_t i = 0; i < req->n_headers; i++) {
		if (!canon_header(&req->headers[i], &h[i])) {
			free(h);
			return gaz_status_set(st, GAZ_EINVAL, "sigv4: header \"%.64s\" invalid or too long",
					      req->headers[i].key);
		}
		has_host = has_host || !strcmp(h[i].name, "host");
	}
	qsort(h, req->n_headers, sizeof(*h), hdr_cmp);
	for (size_t i = 0; i < req->n_headers; i++) {
		sb_add(b, "%s:%s\n", h[i].name, h[i].value);
		sb_add(signed_b, "%s%s", i ? ";" : "", h[i].name);
	}
	free(h);
	if (!has_host)
		return gaz_status_set(st, GAZ_EINVAL, "sigv4: the host header must be signed");
	return 0;
}

static void hmac(const void *key, size_t key_len, const char *msg, unsigned char out[32])
{
	unsigned int n = 32;

	HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)msg, strlen(msg), out, &n);
}

/* Scope "yyyymmdd/region/service/aws4_request" into scope[cap]. */
static bool scope_of(const struct gaz_sigv4_req *req, const char *amz_date, char *scope, size_t cap)
{
	int n = snprintf(scope, cap, "%.8s/%s/%s/aws4_request", amz_date, req->region, req->service);

	return n > 0 && (size_t)n < cap;
}

/* Signs the canonical request already in out->canonical. */
static int finish_signature(const struct gaz_sigv4_req *req, const struct gaz_sigv4_creds *c,
			    struct gaz_sigv4_out *out, struct gaz_status *st)
{
	unsigned char k[32], k2[32];
	char secret[sizeof(c->secret_key) + 4], scope[256], canon_hash[65], day[9];
	struct sb sts = {out->string_to_sign, 0, sizeof(out->string_to_sign), false};

	if (!scope_of(req, out->amz_date, scope, sizeof(scope)))
		return gaz_status_set(st, GAZ_EINVAL, "sigv4: region or service too long");
	gaz_sigv4_sha256_hex(out->canonical, strlen(out->canonical), canon_hash);
	sb_add(&sts, "AWS4-HMAC-SHA256\n%s\n%s\n%s", out->amz_date, scope, canon_hash);
	if (sts.bad)
		return gaz_status_set(st, GAZ_EINVAL, "sigv4: string to sign too long");
	snprintf(secret, sizeof(secret), "AWS4%s", c->secret_key);
	snprintf(day, sizeof(day), "%.8s", out->amz_date);
	hmac(secret, strlen(secret), day, k);
	hmac(k, 32, req->region, k2);
	hmac(k2, 32, req->service, k);
	hmac(k, 32, "aws4_request", k2);
	hmac(k2, 32, out->string_to_sign, k);
	hex(k, 32, out->signature);
	OPENSSL_cleanse(secret, sizeof(secret));
	OPENSSL_cleanse(k2, sizeof(k2));
	return 0;
}

static int check_req(const struct gaz_sigv4_req *req, const struct gaz_sigv4_creds *c,
		     struct gaz_status *st)
{
	if (!req->method || !req->path || req->path[0] != '/' || !req->region || !*req->region ||
	    !req->service || !c->access_key[0] || !c->secret_key[0])
		return gaz_status_set(st, GAZ_EINVAL, "sigv4: incomplete request or credentials");
	return 0;
}

int gaz_sigv4_sign(const struct gaz_sigv4_req *req, const struct gaz_sigv4_creds *c,
		   struct gaz_sigv4_out *out, struct gaz_status *st)
{
	struct sb b = {out->canonical, 0, sizeof(out->canonical), false};
	struct sb sh = {out->signed_headers, 0, sizeof(out->signed_headers), false};
	char scope[256];
	int rc;

	out->canonical[0] = out->signed_headers[0] = 0;
	if ((rc = check_req(req, c, st)))
		return rc;
	gaz_sigv4_amz_date(req->when, out->amz_date);
	sb_add(&b, "%s\n%s\n", req->method, req->path);
	if ((rc = canonical_query(req->query, req->n_query, &b, st)))
		return rc;
	sb_add(&b, "\n");
	if ((rc = canonical_headers(req, &b, &sh, st)))
		return rc;
	sb_add(&b, "\n%s\n%s", out->signed_headers,
	       req->payload_hash ? req->payload_hash : GAZ_SIGV4_UNSIGNED_PAYLOAD);
	if (b.bad || sh.bad)
		return gaz_status_set(st, GAZ_EINVAL, "sigv4: canonical request too long");
	if ((rc = finish_signature(req, c, out, st)))
		return rc;
	scope_of(req, out->amz_date, scope, sizeof(scope));
	rc = snprintf(out->authorization, sizeof(out->authorization),
		      "AWS4-HMAC-SHA256 Credential=%s/%s,SignedHeaders=%s,Signature=%s", c->access_key,
		      scope, out->signed_headers, out->signature);
	if (rc < 0 || (size_t)rc >= sizeof(out->authorization))
		return gaz_status_set(st, GAZ_EINVAL, "sigv4: authorization header too long");
	return 0;
}

int gaz_sigv4_presign(const struct gaz_sigv4_req *req, const struct gaz_sigv4_creds *c,
		      int64_t expires_s, char *query, size_t cap, struct gaz_sigv4_out *out,
		      struct gaz_status *st)
{
	struct gaz_sigv4_kv q[MAX_PARAMS];
	struct gaz_sigv4_req r = *req;
	struct sb b = {query, 0, cap, false};
	char scope[256], cred[600], expires[24];
	size_t n = 0;
	int rc;

	if ((rc = check_req(req, c, st)))
		return rc;
	if (expires_s < 1 || expires_s > 604800)
		return gaz_status_set(st, GAZ_EINVAL,
				      "presigned URL expiry %llds is outside 1s..7 days (SigV4 limit)",
				      (long long)expires_s);
	if (req->n_query > MAX_PARAMS - 6)
		return gaz_status_set(st, GAZ_EINVAL, "sigv4: too many query parameters");
	gaz_sigv4_amz_date(req->when, out->amz_date);
	if (!scope_of(req, out->amz_date, scope, sizeof(scope)))
		return gaz_status_set(st, GAZ_EINVAL, "sigv4: region or service too long");
	snprintf(cred, sizeof(cred), "%s/%s", c->access_key, scope);
	snprintf(expires, sizeof(expires), "%lld", (long long)expires_s);
	for (size_t i = 0; i < req->n_query; i++)
		q[n++] = req->query[i];
	q[n++] = (struct gaz_sigv4_kv){"X-Amz-Algorithm", "AWS4-HMAC-SHA256"};
	q[n++] = (struct gaz_sigv4_kv){"X-Amz-Credential", cred};
	q[n++] = (struct gaz_sigv4_kv){"X-Amz-Date", out->amz_date};
	q[n++] = (struct gaz_sigv4_kv){"X-Amz-Expires", expires};
	q[n++] = (struct gaz_sigv4_kv){"X-Amz-SignedHeaders", "host"};
	if (c->session_token[0])
		q[n++] = (struct gaz_sigv4_kv){"X-Amz-Security-Token", c->session_token};
	r.query = q;
	r.n_query = n;
	r.payload_hash = GAZ_SIGV4_UNSIGNED_PAYLOAD;
	if (req->n_headers != 1 || strcasecmp(req->headers[0].key, "host"))
		return gaz_status_set(st, GAZ_EINVAL, "sigv4: presigned URLs sign the host header only");
	if ((rc = gaz_sigv4_sign(&r, c, out, st)))
		return rc;
	/* The canonical query is the URL's query, in the same order. */
	if ((rc = canonical_query(q, n, &b, st)))
		return rc;
	sb_add(&b, "&X-Amz-Signature=%s", out->signature);
	if (b.bad)
		return gaz_status_set(st, GAZ_EINVAL, "presigned URL query too long");
	return 0;
}
