/*
 * auth.c - gazette-facts §11: pre-shared keys, JWT HS256/HS384 signing and
 * verification (RFC 7519, RFC 7515 compact serialization, RFC 4648 §5
 * base64url without padding), capability and claims checks, with the
 * error texts of Gazette's auth package and the golang-jwt v5 parser it
 * uses (so a client sees the same Unauthenticated message from our broker
 * as from Gazette's).
 *
 * Lock rule: none. A struct gaz_auth is written only by gaz_auth_new and
 * read-only after; every function here is reentrant.
 */
#include "protocol/auth.h"
#include "protocol/labels.h"
#include "common/base64.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define LEEWAY_S 5.0
#define GRPC_UNAUTHENTICATED 16

struct key {
	uint8_t *b;
	size_t n;
};

struct gaz_auth {
	struct key *keys;
	size_t n_keys;
	bool allow_missing; /* "AA==" was given */
};

double gaz_auth_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int unauth(struct gaz_status *st, const char *fmt, const char *arg)
{
	gaz_status_set(st, GAZ_EPERM, fmt, arg);
	if (st)
		st->grpc = GRPC_UNAUTHENTICATED;
	return GAZ_EPERM;
}

/* ---- keys ------------------------------------------------------------------- */

void gaz_auth_free(struct gaz_auth *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->n_keys; i++) {
		OPENSSL_cleanse(a->keys[i].b, a->keys[i].n);
		free(a->keys[i].b);
	}
	free(a->keys);
	free(a);
}

int gaz_auth_new(const char *base64_keys, struct gaz_auth **out, struct gaz_status *st)
{
	struct gaz_auth *a = calloc(1, sizeof(*a));
	const char *p = base64_keys ? base64_keys : "";
	size_t index = 0, bad;

	if (!a)
		return gaz_status_set(st, GAZ_ENOMEM, "allocating auth keys");
	while (*p) {
		size_t n, len;
		uint8_t *b;
		struct key *nk;
		int rc;

		while (*p && (isspace((unsigned char)*p) || *p == ','))
			p++;
		if (!*p)
			break;
		for (n = 0; p[n] && !isspace((unsigned char)p[n]) && p[n] != ','; n++)
			;
		if (n == 4 && !memcmp(p, "AA==", 4)) {
			a->allow_missing = true;
		} else if ((rc = gaz_b64_decode(p, n, GAZ_B64_STD | GAZ_B64_PAD, &b, &len, &bad)) == GAZ_ENOMEM) {
			gaz_auth_free(a);
			return gaz_status_set(st, GAZ_ENOMEM, "decoding auth keys");
		} else if (rc) {
			gaz_auth_free(a);
			return gaz_status_set(st, GAZ_EINVAL,
					      "failed to decode key at index %zu: illegal base64 data at input byte %zu",
					      index, bad);
		} else if (!(nk = realloc(a->keys, (a->n_keys + 1) * sizeof(*nk)))) {
			free(b);
			gaz_auth_free(a);
			return gaz_status_set(st, GAZ_ENOMEM, "decoding auth keys");
		} else {
			a->keys = nk;
			a->keys[a->n_keys].b = b;
			a->keys[a->n_keys++].n = len;
		}
		index++;
		p += n;
	}
	if (a->n_keys == 0) {
		gaz_auth_free(a);
		return gaz_status_set(st, GAZ_EINVAL, "at least one key must be provided");
	}
	*out = a;
	return 0;
}

/* ---- claims JSON ------------------------------------------------------------- */

/* Go's encoding/json matches object keys to struct fields without regard
 * to case; the claims are decoded the same way. */
static json_t *get_ci(json_t *obj, const char *key)
{
	const char *k;
	json_t *v, *found = NULL;

	if (!json_is_object(obj))
		return NULL;
	if ((v = json_object_get(obj, key)))
		return v;
	json_object_foreach(obj, k, v)
	{
		if (!strcasecmp(k, key))
			found = v;
	}
	return found;
}

static json_t *selector_labels_json(const Protocol__LabelSet *set)
{
	json_t *arr;

	if (!set || set->n_labels == 0)
		return json_null();
	if (!(arr = json_array()))
		return NULL;
	for (size_t i = 0; i < set->n_labels; i++) {
		const Protocol__Label *l = set->labels[i];
		json_t *o = json_object();

		if (!o || json_array_append_new(arr, o)) {
			json_decref(arr);
			return NULL;
		}
		if (l->name && *l->name)
			json_object_set_new(o, "name", json_string(l->name));
		if (l->value && *l->value)
			json_object_set_new(o, "value", json_string(l->value));
		if (l->prefix)
			json_object_set_new(o, "prefix", json_true());
	}
	return arr;
}

/* parse_labels adds the JSON LabelSet `js` ({"labels": [...]} or null) to
 * `set`. Returns 0, -1 (wrong shape: *why says what) or GAZ_ENOMEM. */
static int parse_labels(json_t *js, Protocol__LabelSet *set, const char **why)
{
	json_t *arr, *l;
	size_t i;

	if (!js || json_is_null(js))
		return 0;
	if (!json_is_object(js)) {
		*why = "sel: LabelSet is not an object";
		return -1;
	}
	arr = get_ci(js, "labels");
	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr)) {
		*why = "sel: labels is not an array";
		return -1;
	}
	json_array_foreach(arr, i, l)
	{
		json_t *name = get_ci(l, "name"), *value = get_ci(l, "value"), *prefix = get_ci(l, "prefix");
		const char *n, *v;
		char *pn;
		int rc;

		if (!json_is_object(l) || (name && !json_is_string(name) && !json_is_null(name)) ||
		    (value && !json_is_string(value) && !json_is_null(value)) ||
		    (prefix && !json_is_boolean(prefix) && !json_is_null(prefix))) {
			*why = "sel: a label is not {name, value, prefix}";
			return -1;
		}
		n = json_is_string(name) ? json_string_value(name) : "";
		v = json_is_string(value) ? json_string_value(value) : "";
		if (json_is_true(prefix)) {
			if (!(pn = malloc(strlen(n) + 8)))
				return GAZ_ENOMEM;
			sprintf(pn, "%s:prefix", n);
			rc = gaz_labelset_add(set, pn, v);
			free(pn);
		} else {
			rc = gaz_labelset_add(set, n, v);
		}
		if (rc)
			return GAZ_ENOMEM;
	}
	return 0;
}

/* A NumericDate: a JSON number (fractions allowed) or absent/null. Returns
 * 0 (absent: *has false), or -1 for another type. */
static int numeric_date(json_t *claims, const char *key, double *v, bool *has)
{
	json_t *j = get_ci(claims, key);

	*has = false;
	if (!j || json_is_null(j))
		return 0;
	if (!json_is_number(j))
		return -1;
	*v = json_number_value(j);
	*has = true;
	return 0;
}

static const char *const signing_methods[] = {
	"HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "ES256", "ES384",
	"ES512", "PS256", "PS384", "PS512", "EdDSA", "none",
};

/* ---- verification ------------------------------------------------------------ */

void gaz_claims_release(struct gaz_claims *c)
{
	if (!c)
		return;
	gaz_selector_free(c->sel);
	memset(c, 0, sizeof(*c));
}

int gaz_capability_check(uint32_t have, uint32_t require, struct gaz_status *st)
{
	static const struct {
		uint32_t cap;
		const char *name;
	} names[] = {{GAZ_CAP_LIST, "LIST"},
		     {GAZ_CAP_APPLY, "APPLY"},
		     {GAZ_CAP_READ, "READ"},
		     {GAZ_CAP_APPEND, "APPEND"},
		     {GAZ_CAP_REPLICATE, "REPLICATE"}};
	char hb[40], rb[40];
	int h = 0, r = 0;

	if ((have & require) == require)
		return 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if ((require & names[i].cap) && !(have & names[i].cap))
			return unauth(st, "authorization is missing required %s capability", names[i].name);
	for (int b = 31; b >= 0; b--) {
		if (have >> b & 1 || h)
			hb[h++] = (char)('0' + (have >> b & 1));
		if (require >> b & 1 || r)
			rb[r++] = (char)('0' + (require >> b & 1));
	}
	if (!h)
		hb[h++] = '0';
	hb[h] = rb[r] = '\0';
	gaz_status_set(st, GAZ_EPERM,
		       "authorization is missing required capability (have %s, but require %s)", hb, rb);
	if (st)
		st->grpc = GRPC_UNAUTHENTICATED;
	return GAZ_EPERM;
}

/* hmac computes the signature of `text` under `alg` ("HS256"/"HS384"). */
static bool hmac_matches(const char *alg, const struct key *k, const char *text, size_t n,
			 const unsigned char *sig, size_t sig_n)
{
	const EVP_MD *md = !strcmp(alg, "HS384") ? EVP_sha384() : EVP_sha256();
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int mac_n = 0;

	if (!HMAC(md, k->b, (int)k->n, (const unsigned char *)text, n, mac, &mac_n))
		return false;
	return mac_n == sig_n && CRYPTO_memcmp(mac, sig, mac_n) == 0;
}

/* Decoded, unverified pieces of a token. */
struct parsed {
	json_t *header, *claims;
	uint8_t *sig;
	size_t sig_n;
	const char *alg;
};

static void parsed_free(struct parsed *p)
{
	json_decref(p->header);
	json_decref(p->claims);
	free(p->sig);
}

static int malformed(struct gaz_status *st, const char *what)
{
	return unauth(st, "verifying Authorization: token is malformed: %s", what);
}

/* json_segment decodes base64url segment s[0..n) as a JSON value. */
static int json_segment(const char *s, size_t n, json_t **out, const char *b64_err,
			const char *json_err, struct gaz_status *st)
{
	uint8_t *b;
	size_t len;
	int rc = gaz_b64_decode(s, n, GAZ_B64_URL | GAZ_B64_NOPAD, &b, &len, NULL);
	json_error_t je;

	if (rc == GAZ_ENOMEM)
		return gaz_status_set(st, GAZ_ENOMEM, "decoding a token");
	if (rc)
		return malformed(st, b64_err);
	*out = json_loadb((const char *)b, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
	free(b);
	if (!*out)
		return malformed(st, json_err);
	return 0;
}

/* parse_token splits and decodes a compact JWS as golang-jwt's
 * ParseUnverified does, in its order (so its first error is the one we
 * report). */
static int parse_token(const char *tok, struct parsed *p, struct gaz_status *st)
{
	const char *d1 = strchr(tok, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
	bool known = false;
	int rc;

	if (!d1 || !d2 || strchr(d2 + 1, '.'))
		return malformed(st, "token contains an invalid number of segments");
	if ((rc = json_segment(tok, (size_t)(d1 - tok), &p->header, "could not base64 decode header",
			       "could not JSON decode header", st)))
		return rc;
	if (!json_is_object(p->header))
		return malformed(st, "could not JSON decode header");
	if ((rc = json_segment(d1 + 1, (size_t)(d2 - d1 - 1), &p->claims, "could not base64 decode claim",
			       "could not JSON decode claim", st)))
		return rc;
	if (!json_is_object(p->claims) && !json_is_null(p->claims))
		return malformed(st, "could not JSON decode claim");
	p->alg = json_string_value(json_object_get(p->header, "alg"));
	if (!p->alg)
		return unauth(st, "verifying Authorization: %s",
			      "token is unverifiable: signing method (alg) is unspecified");
	for (size_t i = 0; i < sizeof(signing_methods) / sizeof(signing_methods[0]); i++)
		known |= !strcmp(p->alg, signing_methods[i]);
	if (!known)
		return unauth(st, "verifying Authorization: %s",
			      "token is unverifiable: signing method (alg) is unavailable");
	if (strcmp(p->alg, "HS256") && strcmp(p->alg, "HS384"))
		return unauth(st, "verifying Authorization: token signature is invalid: signing method %s is invalid",
			      p->alg);
	if ((rc = gaz_b64_decode(d2 + 1, strlen(d2 + 1), GAZ_B64_URL | GAZ_B64_NOPAD, &p->sig, &p->sig_n,
				 NULL)) == GAZ_ENOMEM)
		return gaz_status_set(st, GAZ_ENOMEM, "decoding a token");
	if (rc)
		return malformed(st, "could not base64 decode signature");
	return 0;
}

/* decode_claims reads cap, sel, exp, iat and nbf, with Go's type rules
 * (a wrong type is a JSON decoding error of the claims). */
static int decode_claims(json_t *cl, struct gaz_claims *out, double *nbf, bool *has_exp,
			 bool *has_iat, bool *has_nbf, struct gaz_status *st)
{
	json_t *cap = get_ci(cl, "cap"), *sel = get_ci(cl, "sel");
	const char *why = NULL;
	int rc;

	if (cap && !json_is_null(cap)) {
		double v = json_number_value(cap);

		if (!json_is_number(cap) || v < 0 || v > 4294967295.0 || v != floor(v))
			return malformed(st, "could not JSON decode claim");
		out->cap = (uint32_t)v;
	}
	if (numeric_date(cl, "exp", &out->exp, has_exp) || numeric_date(cl, "iat", &out->iat, has_iat) ||
	    numeric_date(cl, "nbf", nbf, has_nbf))
		return malformed(st, "could not JSON decode claim");
	for (const char *const *k = (const char *const[]){"iss", "sub", "jti", NULL}; *k; k++) {
		json_t *v = get_ci(cl, *k);
		if (v && !json_is_string(v) && !json_is_null(v))
			return malformed(st, "could not JSON decode claim");
	}
	if (!(out->sel = gaz_selector_new()))
		return gaz_status_set(st, GAZ_ENOMEM, "decoding claims");
	if (sel && !json_is_null(sel)) {
		if (!json_is_object(sel))
			return malformed(st, "could not JSON decode claim");
		if ((rc = parse_labels(get_ci(sel, "include"), out->sel->include, &why)) ||
		    (rc = parse_labels(get_ci(sel, "exclude"), out->sel->exclude, &why)))
			return rc == GAZ_ENOMEM ? gaz_status_set(st, GAZ_ENOMEM, "decoding claims")
						: malformed(st, "could not JSON decode claim");
	}
	return 0;
}

int gaz_auth_verify(const struct gaz_auth *a, const char *authorization, uint32_t require,
		    double now, struct gaz_claims *out, struct gaz_status *st)
{
	struct parsed p = {0};
	const char *tok, *d2;
	double nbf = 0;
	bool has_exp, has_iat, has_nbf, sig_ok = false;
	char errs[256];
	size_t en = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!authorization || !*authorization) {
		if (!a->allow_missing)
			return unauth(st, "%s", "missing or empty Authorization token");
		if (!(out->sel = gaz_selector_new()))
			return gaz_status_set(st, GAZ_ENOMEM, "allocating claims");
		out->cap = require;
		out->exp = now + 3600;
		return 0;
	}
	if (strncmp(authorization, "Bearer ", 7))
		return unauth(st, "%s", "invalid or unsupported Authorization header (expected 'Bearer')");
	tok = authorization + 7;
	if ((rc = parse_token(tok, &p, st)))
		goto fail;
	if (json_is_object(p.claims) &&
	    (rc = decode_claims(p.claims, out, &nbf, &has_exp, &has_iat, &has_nbf, st)))
		goto fail;
	if (!json_is_object(p.claims)) {
		has_exp = has_iat = has_nbf = false;
		if (!(out->sel = gaz_selector_new())) {
			rc = gaz_status_set(st, GAZ_ENOMEM, "allocating claims");
			goto fail;
		}
	}
	d2 = strrchr(tok, '.');
	for (size_t i = 0; i < a->n_keys && !sig_ok; i++)
		sig_ok = hmac_matches(p.alg, &a->keys[i], tok, (size_t)(d2 - tok), p.sig, p.sig_n);
	if (!sig_ok) {
		rc = unauth(st, "verifying Authorization: %s", "token signature is invalid: signature is invalid");
		goto fail;
	}
	/* Validation order and joining as golang-jwt's Validator. */
	errs[0] = '\0';
#define ADD_ERR(s) en += (size_t)snprintf(errs + en, en < sizeof(errs) ? sizeof(errs) - en : 0, "%s%s", en ? "\n" : "", s)
	if (!has_exp)
		ADD_ERR("token is missing required claim: exp claim is required");
	else if (!(now < out->exp + LEEWAY_S))
		ADD_ERR("token is expired");
	if (has_nbf && now < nbf - LEEWAY_S)
		ADD_ERR("token is not valid yet");
	if (has_iat && now < out->iat - LEEWAY_S)
		ADD_ERR("token used before issued");
#undef ADD_ERR
	if (en) {
		rc = unauth(st, "verifying Authorization: token has invalid claims: %s", errs);
		goto fail;
	}
	if ((rc = gaz_capability_check(out->cap, require, st)))
		goto fail;
	parsed_free(&p);
	return 0;
fail:
	parsed_free(&p);
	gaz_claims_release(out);
	return rc;
}

/* ---- signing ---------------------------------------------------------------- */

int gaz_auth_sign(const struct gaz_auth *a, uint32_t cap, const Protocol__LabelSelector *sel,
		  int64_t ttl_s, char **bearer, struct gaz_status *st)
{
	static const char header[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
	json_t *claims = NULL, *js = NULL, *inc, *exc;
	char *payload = NULL, *h64 = NULL, *p64 = NULL, *s64 = NULL, *text = NULL;
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int mac_n = 0;
	int64_t now = (int64_t)time(NULL);
	int rc = GAZ_ENOMEM;
	size_t n;

	inc = selector_labels_json(sel ? sel->include : NULL);
	exc = selector_labels_json(sel ? sel->exclude : NULL);
	if (!inc || !exc)
		goto out;
	/* "o" takes both references, whether or not the pack succeeds. */
	js = json_pack("{s:{s:o},s:{s:o}}", "include", "labels", inc, "exclude", "labels", exc);
	inc = exc = NULL;
	if (!js)
		goto out;
	if (!(claims = json_pack("{s:I,s:O,s:I,s:I}", "cap", (json_int_t)cap, "sel", js, "exp",
				 (json_int_t)(now + ttl_s), "iat", (json_int_t)now)) ||
	    !(payload = json_dumps(claims, JSON_COMPACT)) ||
	    !(h64 = gaz_b64_encode(header, strlen(header), GAZ_B64_URL)) ||
	    !(p64 = gaz_b64_encode(payload, strlen(payload), GAZ_B64_URL)))
		goto out;
	n = strlen(h64) + 1 + strlen(p64);
	if (!(text = malloc(n + 1)))
		goto out;
	sprintf(text, "%s.%s", h64, p64);
	if (!HMAC(EVP_sha256(), a->keys[0].b, (int)a->keys[0].n, (unsigned char *)text, n, mac, &mac_n) ||
	    !(s64 = gaz_b64_encode(mac, mac_n, GAZ_B64_URL)) || !(*bearer = malloc(7 + n + 1 + strlen(s64) + 1)))
		goto out;
	sprintf(*bearer, "Bearer %s.%s", text, s64);
	rc = 0;
out:
	json_decref(inc);
	json_decref(exc);
	json_decref(js);
	json_decref(claims);
	free(payload);
	free(h64);
	free(p64);
	free(s64);
	free(text);
	return rc ? gaz_status_set(st, rc, "signing an authorization token") : 0;
}

int gaz_auth_sign_journal(const struct gaz_auth *a, uint32_t cap, const char *journal,
			  int64_t ttl_s, char **bearer, struct gaz_status *st)
{
	Protocol__LabelSelector *sel = gaz_selector_new();
	const char *semi = strchr(journal, ';');
	char *name = semi ? strndup(journal, (size_t)(semi - journal)) : strdup(journal);
	int rc;

	if (!sel || !name || gaz_labelset_add(sel->include, "name", name)) {
		gaz_selector_free(sel);
		free(name);
		return gaz_status_set(st, GAZ_ENOMEM, "signing an authorization token");
	}
	rc = gaz_auth_sign(a, cap, sel, ttl_s, bearer, st);
	gaz_selector_free(sel);
	free(name);
	return rc;
}
