/* test_http_v1.c - broker/http_v1.c: the /v1/ gateway's request body
 * decoding (decode_body, included), against what Gazette's grpc-gateway
 * (JSONPb over Go's json.Decoder) does with the same bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../../broker/http_v1.c"

static int decode(const char *body, size_t len, Protocol__ListRequest **out, struct gaz_status *st)
{
	memset(st, 0, sizeof(*st));
	*out = NULL;
	return decode_body(body, len, &protocol__list_request__descriptor, (ProtobufCMessage **)out, st);
}

static void test_decode_body(void **state)
{
	Protocol__ListRequest *r;
	struct gaz_status st;

	(void)state;
	/* io.EOF: an empty or all-space body is the empty request. */
	assert_int_equal(decode("", 0, &r, &st), 0);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	assert_int_equal(decode(" \t\r\n", 4, &r, &st), 0);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	assert_int_equal(decode("null", 4, &r, &st), 0);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	/* One value; what follows it is not read. */
	assert_int_equal(decode("{\"watch\":true} garbage", 22, &r, &st), 0);
	assert_true(r->watch);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	assert_int_equal(decode("{\"watch\":", 9, &r, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "invalid JSON"));
	assert_null(r);
}

/* Regression (seen while fuzzing, docs/fuzzing.md): a body of NUL bytes
 * (and spaces) was taken for an empty one and ran the RPC; Go's decoder
 * answers "invalid character '\x00' looking for beginning of value", a
 * 400. */
static void test_decode_body_nul(void **state)
{
	Protocol__ListRequest *r;
	struct gaz_status st;

	(void)state;
	assert_int_equal(decode("\0", 1, &r, &st), GAZ_EINVAL);
	assert_null(r);
	assert_int_equal(decode(" \0 \n", 4, &r, &st), GAZ_EINVAL);
	assert_null(r);
	assert_non_null(strstr(st.msg, "invalid JSON"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode_body),
		cmocka_unit_test(test_decode_body_nul),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
