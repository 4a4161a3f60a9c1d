/* test_auth.c - authorization tokens (gazette-facts §11): keys parse as
 * Gazette's NewKeyedAuth does; tokens made by another JWT implementation
 * (Python's hmac/base64, vectors below) verify; ours verify in turn;
 * every refusal carries the message Gazette's verifier (golang-jwt v5)
 * gives, and claims' selectors decode as Go's encoding/json would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "protocol/auth.h"
#include "protocol/labels.h"

#define KEY1 "c2VjcmV0LWtleS1vbmU=" /* "secret-key-one" */
#define KEY2 "c2VjcmV0LWtleS10d28=" /* "secret-key-two" */
#define NOW 1750000000.0

/* Made with Python: HS256 {cap: READ, sel: name=a/journal, exp 2100, iat
 * 2023} and HS384 with keys in other cases and a fractional exp. */
static const char *PY_HS256 =
	"Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJjYXAiOjgsInNlbCI6eyJpbmNsdWRlIjp7ImxhYmVscyI6W3sibmFtZSI6Im5h"
	"bWUiLCJ2YWx1ZSI6ImEvam91cm5hbCJ9XX0sImV4Y2x1ZGUiOnsibGFiZWxzIjpudWxsfX0sImV4cCI6NDEwMjQ0NDgwMCwiaWF0IjoxNzAw"
	"MDAwMDAwfQ.jJqTvS-4PaC33APTxPfVSqt7RxK0pgnKBkf9uRf3bXg";
static const char *PY_HS384 =
	"Bearer eyJhbGciOiJIUzM4NCIsInR5cCI6IkpXVCJ9.eyJDQVAiOjI0LCJTZWwiOnsiSW5jbHVkZSI6eyJMYWJlbHMiOlt7Ik5hbWUiOiJu"
	"YW1lIiwiVmFsdWUiOiJhLyIsIlByZWZpeCI6dHJ1ZX1dfX0sImV4cCI6NDEwMjQ0NDgwMC41fQ.SfGFtg5CmvQmZHTNlIT_00fyPzlX7kGkD9g"
	"j582PBc3g6AYGFRp3GYAXoSK6J9F4";

static char *enc(const char *s, size_t n)
{
	static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	char *o = calloc(1, n * 2 + 4), *p = o;
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned char)s[i] << 16 | (i + 1 < n ? (unsigned char)s[i + 1] << 8 : 0) |
			     (i + 2 < n ? (unsigned char)s[i + 2] : 0);
		*p++ = t[v >> 18 & 63];
		*p++ = t[v >> 12 & 63];
		if (i + 1 < n)
			*p++ = t[v >> 6 & 63];
		if (i + 2 < n)
			*p++ = t[v & 63];
	}
	return o;
}

/* token signs header.claims with `key` (sha256 or sha384) as any JWT
 * library would; the result is "Bearer ..." in a static buffer. */
static const char *token(const char *header, const char *claims, const char *key, const EVP_MD *md)
{
	static char out[4096];
	char *h = enc(header, strlen(header)), *c = enc(claims, strlen(claims)), *s;
	unsigned char mac[64];
	unsigned mac_n;
	char text[3000];

	snprintf(text, sizeof(text), "%s.%s", h, c);
	HMAC(md, key, (int)strlen(key), (unsigned char *)text, strlen(text), mac, &mac_n);
	s = enc((char *)mac, mac_n);
	snprintf(out, sizeof(out), "Bearer %s.%s", text, s);
	free(h);
	free(c);
	free(s);
	return out;
}

static const char *HS256 = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";

static struct gaz_auth *keys(const char *s)
{
	struct gaz_auth *a = NULL;
	struct gaz_status st = {0};
	assert_int_equal(gaz_auth_new(s, &a, &st), 0);
	return a;
}

/* refused verifies and expects UNAUTHENTICATED with `msg`. */
static void refused(struct gaz_auth *a, const char *authz, uint32_t require, const char *msg)
{
	struct gaz_claims c;
	struct gaz_status st = {0};
	assert_int_equal(gaz_auth_verify(a, authz, require, NOW, &c, &st), GAZ_EPERM);
	assert_int_equal(st.grpc, 16);
	assert_string_equal(st.msg, msg);
	assert_null(c.sel);
}

static void test_keys_parse(void **state)
{
	struct gaz_auth *a = NULL;
	struct gaz_status st = {0};
	(void)state;
	assert_int_equal(gaz_auth_new(" " KEY1 ",\t" KEY2 " ,", &a, &st), 0);
	gaz_auth_free(a);
	assert_int_equal(gaz_auth_new("AA==", &a, &st), GAZ_EINVAL);
	assert_string_equal(st.msg, "at least one key must be provided");
	gaz_status_clear(&st);
	assert_int_equal(gaz_auth_new("", &a, &st), GAZ_EINVAL);
	gaz_status_clear(&st);
	assert_int_equal(gaz_auth_new(KEY1 " c2VjcmV0LWtleS10d28", &a, &st), GAZ_EINVAL);
	assert_string_equal(st.msg, "failed to decode key at index 1: illegal base64 data at input byte 16");
	gaz_status_clear(&st);
	assert_int_equal(gaz_auth_new("AA==,sec*ret=", &a, &st), GAZ_EINVAL);
	assert_string_equal(st.msg, "failed to decode key at index 1: illegal base64 data at input byte 3");
}

static void test_verifies_tokens_made_elsewhere(void **state)
{
	struct gaz_auth *a = keys(KEY2 " " KEY1);
	struct gaz_claims c;
	struct gaz_status st = {0};
	Protocol__LabelSet set = PROTOCOL__LABEL_SET__INIT;
	(void)state;

	assert_int_equal(gaz_auth_verify(a, PY_HS256, GAZ_CAP_READ, NOW, &c, &st), 0);
	assert_int_equal(c.cap, GAZ_CAP_READ);
	assert_true(c.exp == 4102444800.0 && c.iat == 1700000000.0);
	assert_true(gaz_selector_matches_meta(c.sel, "a/journal", NULL, 0));
	assert_false(gaz_selector_matches_meta(c.sel, "a/other", NULL, 0));
	gaz_claims_release(&c);

	/* Keys in other cases (Go's json matches them), a prefix label. */
	assert_int_equal(gaz_auth_verify(a, PY_HS384, GAZ_CAP_READ | GAZ_CAP_APPEND, NOW, &c, &st), 0);
	assert_int_equal(c.cap, 24);
	assert_true(c.exp == 4102444800.5);
	assert_true(gaz_selector_matches_meta(c.sel, "a/b/c", &set, 0));
	assert_false(gaz_selector_matches_meta(c.sel, "b/c", &set, 0));
	gaz_claims_release(&c);

	refused(a, PY_HS256, GAZ_CAP_APPEND, "authorization is missing required APPEND capability");
	refused(a, PY_HS256, 1u << 16,
		"authorization is missing required capability (have 1000, but require 10000000000000000)");
	gaz_auth_free(a);

	a = keys(KEY2);
	refused(a, PY_HS256, GAZ_CAP_READ, "verifying Authorization: token signature is invalid: signature is invalid");
	gaz_auth_free(a);
}

static void test_signs_what_it_verifies(void **state)
{
	struct gaz_auth *signer = keys(KEY1 " " KEY2), *verifier = keys(KEY2 "," KEY1);
	struct gaz_claims c;
	struct gaz_status st = {0};
	char *bearer = NULL;
	double now = gaz_auth_now();
	(void)state;

	assert_int_equal(gaz_auth_sign_journal(signer, GAZ_CAP_APPEND, "a/journal;o=1", 60, &bearer, &st), 0);
	assert_int_equal(strncmp(bearer, "Bearer ey", 9), 0);
	assert_int_equal(gaz_auth_verify(verifier, bearer, GAZ_CAP_APPEND, now, &c, &st), 0);
	assert_true(c.exp >= now + 58 && c.exp <= now + 62);
	assert_true(gaz_selector_matches_meta(c.sel, "a/journal", NULL, 0));
	assert_false(gaz_selector_matches_meta(c.sel, "a/journal;o=1", NULL, 0));
	gaz_claims_release(&c);
	/* Past its lifetime and the 5 s leeway. */
	assert_int_equal(gaz_auth_verify(verifier, bearer, GAZ_CAP_APPEND, now + 66, &c, &st), GAZ_EPERM);
	assert_string_equal(st.msg, "verifying Authorization: token has invalid claims: token is expired");
	gaz_status_clear(&st);
	free(bearer);

	assert_int_equal(gaz_auth_sign(signer, GAZ_CAP_ALL, NULL, 3600, &bearer, &st), 0);
	assert_int_equal(gaz_auth_verify(verifier, bearer, GAZ_CAP_REPLICATE, now, &c, &st), 0);
	assert_true(gaz_selector_matches_meta(c.sel, "any/journal", NULL, 0));
	gaz_claims_release(&c);
	free(bearer);
	gaz_auth_free(signer);
	gaz_auth_free(verifier);
}

static void test_refusals(void **state)
{
	struct gaz_auth *a = keys(KEY1);
	const char *k = "secret-key-one";
	char claims[256];
	(void)state;

	refused(a, NULL, GAZ_CAP_READ, "missing or empty Authorization token");
	refused(a, "", GAZ_CAP_READ, "missing or empty Authorization token");
	refused(a, "Basic Zm9vOmJhcg==", GAZ_CAP_READ,
		"invalid or unsupported Authorization header (expected 'Bearer')");
	refused(a, "Bearer abc", GAZ_CAP_READ,
		"verifying Authorization: token is malformed: token contains an invalid number of segments");
	refused(a, "Bearer a.b.c.d", GAZ_CAP_READ,
		"verifying Authorization: token is malformed: token contains an invalid number of segments");
	refused(a, "Bearer a*.b.c", GAZ_CAP_READ,
		"verifying Authorization: token is malformed: could not base64 decode header");
	refused(a, "Bearer e30=.e30.c", GAZ_CAP_READ,
		"verifying Authorization: token is malformed: could not base64 decode header");
	refused(a, "Bearer bm90IGpzb24.e30.c", GAZ_CAP_READ,
		"verifying Authorization: token is malformed: could not JSON decode header");
	refused(a, token(HS256, "{\"cap\":-1}", k, EVP_sha256()), GAZ_CAP_READ,
		"verifying Authorization: token is malformed: could not JSON decode claim");
	refused(a, token(HS256, "{\"cap\":8,\"exp\":\"soon\"}", k, EVP_sha256()), GAZ_CAP_READ,
		"verifying Authorization: token is malformed: could not JSON decode claim");
	refused(a, token(HS256, "{\"sel\":{\"include\":{\"labels\":[1]}}}", k, EVP_sha256()), GAZ_CAP_READ,
		"verifying Authorization: token is malformed: could not JSON decode claim");
	refused(a, token("{\"typ\":\"JWT\"}", "{}", k, EVP_sha256()), GAZ_CAP_READ,
		"verifying Authorization: token is unverifiable: signing method (alg) is unspecified");
	refused(a, token("{\"alg\":\"XY1\"}", "{}", k, EVP_sha256()), GAZ_CAP_READ,
		"verifying Authorization: token is unverifiable: signing method (alg) is unavailable");
	refused(a, token("{\"alg\":\"none\"}", "{}", k, EVP_sha256()), GAZ_CAP_READ,
		"verifying Authorization: token signature is invalid: signing method none is invalid");
	refused(a, token("{\"alg\":\"HS512\"}", "{}", k, EVP_sha512()), GAZ_CAP_READ,
		"verifying Authorization: token signature is invalid: signing method HS512 is invalid");
	/* An HS384 signature under an HS256 header. */
	refused(a, token(HS256, "{\"cap\":8,\"exp\":4102444800}", k, EVP_sha384()), GAZ_CAP_READ,
		"verifying Authorization: token signature is invalid: signature is invalid");
	refused(a, token(HS256, "{\"cap\":8}", k, EVP_sha256()), GAZ_CAP_READ,
		"verifying Authorization: token has invalid claims: token is missing required claim: exp claim is required");
	snprintf(claims, sizeof(claims), "{\"cap\":8,\"exp\":%.0f}", NOW - 6);
	refused(a, token(HS256, claims, k, EVP_sha256()), GAZ_CAP_READ,
		"verifying Authorization: token has invalid claims: token is expired");
	snprintf(claims, sizeof(claims), "{\"cap\":8,\"exp\":%.0f,\"iat\":%.0f,\"nbf\":%.0f}", NOW + 60, NOW + 6,
		 NOW + 6);
	refused(a, token(HS256, claims, k, EVP_sha256()), GAZ_CAP_READ,
		"verifying Authorization: token has invalid claims: token is not valid yet\ntoken used before issued");
	gaz_auth_free(a);
}

static void test_leeway_and_allow_missing(void **state)
{
	struct gaz_auth *a = keys("AA== " KEY1);
	const char *k = "secret-key-one";
	struct gaz_claims c;
	struct gaz_status st = {0};
	char claims[256];
	(void)state;

	/* Expired 4 s ago, issued 4 s ahead: inside the 5 s leeway. */
	snprintf(claims, sizeof(claims), "{\"cap\":10,\"exp\":%.0f,\"iat\":%.0f,\"aud\":[\"x\"],\"iss\":\"me\"}",
		 NOW - 4, NOW + 4);
	assert_int_equal(gaz_auth_verify(a, token(HS256, claims, k, EVP_sha256()), GAZ_CAP_LIST, NOW, &c, &st), 0);
	gaz_claims_release(&c);

	/* No header at all: allowed with exactly what is required, an empty
	 * selector and an hour. A header that is present is still checked. */
	assert_int_equal(gaz_auth_verify(a, NULL, GAZ_CAP_APPLY, NOW, &c, &st), 0);
	assert_int_equal(c.cap, GAZ_CAP_APPLY);
	assert_true(c.exp == NOW + 3600);
	assert_true(gaz_selector_matches_meta(c.sel, "x/y", NULL, 0));
	gaz_claims_release(&c);
	refused(a, "Bearer x.y", GAZ_CAP_READ,
		"verifying Authorization: token is malformed: token contains an invalid number of segments");
	gaz_auth_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keys_parse),
		cmocka_unit_test(test_verifies_tokens_made_elsewhere),
		cmocka_unit_test(test_signs_what_it_verifies),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_leeway_and_allow_missing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
