/* test_framing.c - content types, fixed frames (header bytes as Gazette's
 * EncodeFixedProtoFrame writes them, partial frames, de-synchronization
 * skips to the next magic, a trailing newline, truncation at the end),
 * JSON lines (partial, too long, truncated), and the JSON message type
 * (UUID at a pointer, made on set, missing, malformed documents). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "gazette/message.h"

static void test_content_types(void **state)
{
	(void)state;
	enum gaz_framing f;
	assert_int_equal(gaz_framing_for_content_type("application/x-ndjson", &f, NULL), 0);
	assert_int_equal(f, GAZ_FRAMING_JSON);
	assert_int_equal(gaz_framing_for_content_type("application/x-protobuf-fixed; charset=binary", &f, NULL), 0);
	assert_int_equal(f, GAZ_FRAMING_FIXED);
	struct gaz_status st = {0};
	assert_int_equal(gaz_framing_for_content_type("text/csv", &f, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "text/csv"));
	assert_int_equal(gaz_framing_for_content_type(NULL, &f, NULL), GAZ_EINVAL);
	assert_string_equal(gaz_framing_content_type(GAZ_FRAMING_FIXED), "application/x-protobuf-fixed");
}

static void test_fixed_frames(void **state)
{
	(void)state;
	/* Two frames (payloads "abc" and ""), then a trailing newline. */
	uint8_t b[64];
	size_t n = 0;
	gaz_fixed_header(b, 3);
	static const uint8_t want_header[] = {0x66, 0x33, 0x93, 0x36, 3, 0, 0, 0};
	assert_memory_equal(b, want_header, 8);
	memcpy(b + 8, "abc", 3);
	n = 11;
	gaz_fixed_header(b + n, 0);
	n += 8;
	b[n++] = '\n';

	struct gaz_frame f;
	assert_int_equal(gaz_frame_next(GAZ_FRAMING_FIXED, b, n, false, &f, NULL), 0);
	assert_int_equal(f.len, 11);
	assert_int_equal(f.payload_off, 8);
	assert_int_equal(f.payload_len, 3);
	assert_int_equal(gaz_frame_next(GAZ_FRAMING_FIXED, b + 11, n - 11, false, &f, NULL), 0);
	assert_int_equal(f.len, 8);
	assert_int_equal(f.payload_len, 0);
	/* The lone newline: more is needed, or at the end it is consumed. */
	assert_int_equal(gaz_frame_next(GAZ_FRAMING_FIXED, b + 19, 1, false, &f, NULL), GAZ_EOF);
	assert_int_equal(gaz_frame_next(GAZ_FRAMING_FIXED, b + 19, 1, true, &f, NULL), GAZ_EOF);
	assert_int_equal(f.len, 1);
	/* Every cut of the first frame needs more bytes, or at the end is a
	 * truncated frame. */
	for (size_t cut = 1; cut < 11; cut++) {
		struct gaz_status st = {0};
		assert_int_equal(gaz_frame_next(GAZ_FRAMING_FIXED, b, cut, false, &f, NULL), GAZ_EOF);
		assert_int_equal(gaz_frame_next(GAZ_FRAMING_FIXED, b, cut, true, &f, &st), GAZ_EPROTO);
		assert_int_equal(f.len, cut);
		assert_non_null(strstr(st.msg, "unexpected EOF"));
	}
}

static void test_fixed_desync(void **state)
{
	(void)state;
	/* Garbage, then a frame: skip exactly to the magic. */
	uint8_t b[64] = "garbage!!";
	gaz_fixed_header(b + 9, 2);
	memcpy(b + 17, "hi", 2);
	struct gaz_frame f;
	struct gaz_status st = {0};
	assert_int_equal(gaz_frame_next(GAZ_FRAMING_FIXED, b, 19, false, &f, &st), GAZ_EPROTO);
	assert_int_equal(f.len, 9);
	assert_non_null(strstr(st.msg, "de-synchronization"));
	assert_int_equal(gaz_frame_next(GAZ_FRAMING_FIXED, b + 9, 10, false, &f, NULL), 0);
	assert_int_equal(f.payload_len, 2);
	/* No magic in view: all but the last 3 bytes go (they may start one). */
	uint8_t g[16];
	memset(g, 'x', sizeof g);
	assert_int_equal(gaz_frame_next(GAZ_FRAMING_FIXED, g, sizeof g, false, &f, NULL), GAZ_EPROTO);
	assert_int_equal(f.len, sizeof g - 3);
	/* A magic with an absurd length is corruption too. */
	uint8_t h[16];
	gaz_fixed_header(h, 0xFFFFFFF0u);
	memset(h + 8, 0, 8);
	assert_int_equal(gaz_frame_next(GAZ_FRAMING_FIXED, h, sizeof h, false, &f, NULL), GAZ_EPROTO);
	assert_true(f.len >= 1);
}

static void test_json_lines(void **state)
{
	(void)state;
	const char *s = "{\"a\":1}\n{\"b\":2}";
	struct gaz_frame f;
	struct gaz_status st = {0};
	assert_int_equal(gaz_frame_next(GAZ_FRAMING_JSON, (const uint8_t *)s, strlen(s), false, &f, NULL), 0);
	assert_int_equal(f.len, 8);
	assert_int_equal(f.payload_off, 0);
	assert_int_equal(f.payload_len, 7);
	assert_int_equal(gaz_frame_next(GAZ_FRAMING_JSON, (const uint8_t *)s + 8, 7, false, &f, NULL), GAZ_EOF);
	assert_int_equal(gaz_frame_next(GAZ_FRAMING_JSON, (const uint8_t *)s + 8, 7, true, &f, &st), GAZ_EPROTO);
	assert_int_equal(f.len, 7);
	assert_non_null(strstr(st.msg, "unexpected EOF"));
	assert_int_equal(gaz_frame_next(GAZ_FRAMING_JSON, (const uint8_t *)s, 0, true, &f, NULL), GAZ_EOF);
	assert_int_equal(f.len, 0);
	/* A reader's first look, before it has a buffer (UBSan caught
	 * memchr(NULL, ...) here). */
	assert_int_equal(gaz_frame_next(GAZ_FRAMING_JSON, NULL, 0, false, &f, NULL), GAZ_EOF);
	assert_int_equal(gaz_frame_next(GAZ_FRAMING_FIXED, NULL, 0, false, &f, NULL), GAZ_EOF);
}

static void test_json_message_type(void **state)
{
	(void)state;
	struct gaz_message_type t = gaz_json_message_type(NULL);
	static const gaz_producer_id P = {{0x01, 0x23, 0x45, 0x67, 0x89, 0xab}};
	gaz_uuid u, got;
	assert_int_equal(gaz_uuid_build(&u, &P, 2205855587517004112ULL, GAZ_FLAG_CONTINUE_TXN), 0);

	/* Decode, no UUID yet; set one (making /_meta); frame; decode again. */
	const char *line = "{\"key\":\"a\",\"n\":[1,2]}";
	void *msg;
	assert_int_equal(t.decode((const uint8_t *)line, strlen(line), &msg, NULL, t.arg), 0);
	assert_int_equal(t.get_uuid(msg, &got, t.arg), GAZ_ENOTFOUND);
	assert_int_equal(t.set_uuid(msg, &u, t.arg), 0);
	uint8_t *out;
	size_t len;
	assert_int_equal(gaz_message_frame(GAZ_FRAMING_JSON, &t, msg, &out, &len, NULL), 0);
	const char *want = "{\"key\":\"a\",\"n\":[1,2],\"_meta\":{\"uuid\":\"83fc2f95-cc5f-11e9-8001-0123456789ab\"}}\n";
	assert_int_equal(len, strlen(want));
	assert_memory_equal(out, want, len);
	t.free_msg(msg, t.arg);
	assert_int_equal(t.decode(out, len - 1, &msg, NULL, t.arg), 0);
	assert_int_equal(t.get_uuid(msg, &got, t.arg), 0);
	assert_memory_equal(got.b, u.b, 16);
	t.free_msg(msg, t.arg);
	free(out);

	/* Another pointer, with an escaped token. */
	struct gaz_message_type t2 = gaz_json_message_type("/m~1eta/id");
	assert_int_equal(t2.decode((const uint8_t *)"{}", 2, &msg, NULL, t2.arg), 0);
	assert_int_equal(t2.set_uuid(msg, &u, t2.arg), 0);
	assert_non_null(json_object_get(json_object_get(msg, "m/eta"), "id"));
	assert_int_equal(t2.get_uuid(msg, &got, t2.arg), 0);
	t2.free_msg(msg, t2.arg);

	/* A path through a non-object cannot take a UUID. */
	assert_int_equal(t.decode((const uint8_t *)"{\"_meta\":5}", 11, &msg, NULL, t.arg), 0);
	assert_int_equal(t.set_uuid(msg, &u, t.arg), GAZ_EINVAL);
	t.free_msg(msg, t.arg);
	/* A UUID that does not parse is none. */
	const char *badid = "{\"_meta\":{\"uuid\":\"not-a-uuid\"}}";
	assert_int_equal(t.decode((const uint8_t *)badid, strlen(badid), &msg, NULL, t.arg), 0);
	assert_int_equal(t.get_uuid(msg, &got, t.arg), GAZ_ENOTFOUND);
	t.free_msg(msg, t.arg);
	/* Not JSON: a clear error. */
	struct gaz_status st = {0};
	assert_int_equal(t.decode((const uint8_t *)"{nope", 5, &msg, &st, t.arg), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "invalid JSON message"));
	/* A uint64 past int64 (Gazette's stream-sum writes such sums): the
	 * message still decodes, its numbers as doubles. */
	const char *big = "{\"UUID\":\"83fc2f95-cc5f-11e9-82aa-0123456789ab\",\"Value\":18446744073709551615}";
	struct gaz_message_type tu = gaz_json_message_type("/UUID");
	assert_int_equal(tu.decode((const uint8_t *)big, strlen(big), &msg, NULL, tu.arg), 0);
	assert_int_equal(tu.get_uuid(msg, &got, tu.arg), 0);
	assert_true(json_is_real(json_object_get(msg, "Value")));
	assert_true(json_real_value(json_object_get(msg, "Value")) > 1.8e19);
	tu.free_msg(msg, tu.arg);
	/* An ACK is a bare document with the UUID set. */
	void *ack = t.new_ack("a/journal", t.arg);
	assert_non_null(ack);
	assert_int_equal(t.set_uuid(ack, &u, t.arg), 0);
	assert_int_equal(t.get_uuid(ack, &got, t.arg), 0);
	t.free_msg(ack, t.arg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_content_types),
		cmocka_unit_test(test_fixed_frames),
		cmocka_unit_test(test_fixed_desync),
		cmocka_unit_test(test_json_lines),
		cmocka_unit_test(test_json_message_type),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
