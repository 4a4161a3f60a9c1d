/* test_base64.c - one decoder in each caller's strictness (Go's
 * StdEncoding for keys and kubeconfig data, RawURLEncoding for JWT
 * segments, protobuf JSON's lenient bytes) and the encoder, checked
 * against RFC 4648 §10's vectors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/base64.h"
#include "common/err.h"

static void ok(const char *in, unsigned flags, const char *want)
{
	uint8_t *out = NULL;
	size_t n = 99;

	assert_int_equal(gaz_b64_decode(in, strlen(in), flags, &out, &n, NULL), 0);
	assert_int_equal(n, strlen(want));
	assert_memory_equal(out, want, n);
	assert_int_equal(out[n], 0);
	free(out);
}

static void bad(const char *in, unsigned flags, size_t at)
{
	uint8_t *out = NULL;
	size_t n = 0, where = 99;

	assert_int_equal(gaz_b64_decode(in, strlen(in), flags, &out, &n, &where), GAZ_EINVAL);
	assert_int_equal(where, at);
	assert_null(out);
}

static void test_rfc4648_vectors(void **state)
{
	static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	static const char *const std[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	static const char *const raw[] = {"", "Zg", "Zm8", "Zm9v", "Zm9vYg", "Zm9vYmE", "Zm9vYmFy"};
	(void)state;
	for (size_t i = 0; i < 7; i++) {
		char *e = gaz_b64_encode(plain[i], strlen(plain[i]), GAZ_B64_STD | GAZ_B64_PAD);
		assert_string_equal(e, std[i]);
		free(e);
		e = gaz_b64_encode(plain[i], strlen(plain[i]), GAZ_B64_URL);
		assert_string_equal(e, raw[i]);
		free(e);
		ok(std[i], GAZ_B64_STD | GAZ_B64_PAD, plain[i]);
		ok(raw[i], GAZ_B64_URL | GAZ_B64_NOPAD, plain[i]);
		ok(std[i], GAZ_B64_STD | GAZ_B64_URL, plain[i]);
		ok(raw[i], GAZ_B64_STD | GAZ_B64_URL, plain[i]);
	}
}

static void test_strictness(void **state)
{
	(void)state;
	/* Padding required: a symbol is reported before a bad length. */
	bad("Zm8", GAZ_B64_STD | GAZ_B64_PAD, 0);
	bad("sec*ret=", GAZ_B64_STD | GAZ_B64_PAD, 3);
	bad("Zg==Zg==", GAZ_B64_STD | GAZ_B64_PAD, 2);
	bad("Z===", GAZ_B64_STD | GAZ_B64_PAD, 1);
	/* Padding refused, and the other alphabet. */
	bad("Zg==", GAZ_B64_URL | GAZ_B64_NOPAD, 2);
	bad("a+b", GAZ_B64_URL | GAZ_B64_NOPAD, 1);
	bad("a-b=", GAZ_B64_STD | GAZ_B64_PAD, 1);
	ok("-_8", GAZ_B64_URL | GAZ_B64_NOPAD, "\xfb\xff");
	ok("+/8=", GAZ_B64_STD | GAZ_B64_PAD, "\xfb\xff");
	/* A lone symbol holds no byte. */
	bad("Zm9vY", GAZ_B64_STD | GAZ_B64_URL, 4);
	/* White space, when allowed; a NUL is never white space. */
	ok("Zm9v\nYmFy\n", GAZ_B64_STD | GAZ_B64_PAD | GAZ_B64_SPACE, "foobar");
	bad("Zm9v Ym", GAZ_B64_STD | GAZ_B64_PAD, 4);
	uint8_t *out;
	size_t n, at;
	assert_int_equal(gaz_b64_decode("Zm\0v", 4, GAZ_B64_STD | GAZ_B64_SPACE, &out, &n, &at), GAZ_EINVAL);
	assert_int_equal(at, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rfc4648_vectors),
		cmocka_unit_test(test_strictness),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
