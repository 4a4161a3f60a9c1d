/* test_stream_sum.c - stream-sum's Chunk and Sum (examples/stream-sum/
 * stream_sum.h) against bytes printed by Go's encoding/json for
 * Gazette's structs at v0.103.0 (Chunk{UUID, ID StreamID, SeqNo int,
 * Data []byte}, Sum{..., Value uint64}), Go's hash/crc64 ECMA, FNV-1a of
 * the stream ID (the chunks' modulo mapping), and what json.Unmarshal
 * accepts and refuses. The vectors came from a throwaway Go program over
 * go.gazette.dev/core v0.103.0 (message.BuildUUID, json.Marshal,
 * json.Unmarshal, crc64.Update, fnv.New32a). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "examples/stream-sum/stream_sum.h"

/* Go: producer 01:02:03:04:05:06, clock 0x1ed2b3c4d5e6f7a1, OUTSIDE_TXN. */
static const gaz_producer_id P = {{1, 2, 3, 4, 5, 6}};
static const uint64_t CLOCK = 0x1ed2b3c4d5e6f7a1ull;
#define UUID_TEXT "4d5e6f7a-2b3c-11ed-8400-010203040506"
#define ID_JSON "[3,20,37,54,71,88,105,122,139,156,173,190,207,224,241,2]"
#define HEAD "{\"UUID\":\"" UUID_TEXT "\",\"ID\":" ID_JSON ","

static gaz_uuid vec_uuid(uint64_t clock, unsigned flags)
{
	gaz_uuid u;
	assert_int_equal(gaz_uuid_build(&u, &P, clock, flags), 0);
	return u;
}

/* Go: id[i] = byte(i*17 + 3); data[i] = byte(255 - i*7), 32 bytes. */
static void vec_id(uint8_t id[16])
{
	for (int i = 0; i < 16; i++)
		id[i] = (uint8_t)(i * 17 + 3);
}

static uint8_t DATA[32];

static int setup(void **state)
{
	(void)state;
	for (int i = 0; i < 32; i++)
		DATA[i] = (uint8_t)(255 - i * 7);
	return 0;
}

static void check_chunk_bytes(const struct stream_sum_chunk *c, const char *want)
{
	uint8_t *b = NULL;
	size_t n = 0;
	assert_int_equal(stream_sum_chunk_encode(c, &b, &n, NULL), 0);
	assert_int_equal(n, strlen(want));
	assert_memory_equal(b, want, n);
	/* And back: decoding Go's bytes and encoding again gives them. */
	struct stream_sum_chunk d;
	struct gaz_status st = {0};
	assert_int_equal(stream_sum_chunk_decode((const uint8_t *)want, strlen(want), &d, &st), 0);
	uint8_t *b2 = NULL;
	size_t n2 = 0;
	assert_int_equal(stream_sum_chunk_encode(&d, &b2, &n2, NULL), 0);
	assert_int_equal(n2, n);
	assert_memory_equal(b2, want, n);
	assert_true(d.has_uuid);
	free(b);
	free(b2);
	stream_sum_chunk_release(&d);
}

static void test_chunk_encoding(void **state)
{
	(void)state;
	struct stream_sum_chunk c = {.uuid = vec_uuid(CLOCK, 0), .has_uuid = true, .seq_no = 1};
	vec_id(c.id);
	char text[GAZ_UUID_STR_LEN + 1];
	gaz_uuid_format(&c.uuid, text);
	assert_string_equal(text, UUID_TEXT);

	c.data = DATA;
	c.data_len = 32;
	check_chunk_bytes(&c, HEAD "\"SeqNo\":1,\"Data\":\"//jx6uPc1c7HwLmyq6Sdlo+IgXpzbGVeV1BJQjs0LSY=\"}");
	c.seq_no = 11, c.data = NULL, c.data_len = 0; /* Go's nil: a stream's last chunk */
	check_chunk_bytes(&c, HEAD "\"SeqNo\":11,\"Data\":null}");
	uint8_t none[1], two[2] = {0xfb, 0xff};
	c.seq_no = 2, c.data = none; /* []byte{} */
	check_chunk_bytes(&c, HEAD "\"SeqNo\":2,\"Data\":\"\"}");
	c.seq_no = 3, c.data = two, c.data_len = 2;
	check_chunk_bytes(&c, HEAD "\"SeqNo\":3,\"Data\":\"+/8=\"}");
}

static void check_sum_bytes(const struct stream_sum_sum *s, const char *want)
{
	uint8_t *b = NULL;
	size_t n = 0;
	assert_int_equal(stream_sum_sum_encode(s, &b, &n, NULL), 0);
	assert_int_equal(n, strlen(want));
	assert_memory_equal(b, want, n);
	struct stream_sum_sum d;
	assert_int_equal(stream_sum_sum_decode((const uint8_t *)want, strlen(want), &d, NULL), 0);
	assert_true(d.value == s->value);
	assert_true(d.seq_no == s->seq_no);
	assert_memory_equal(d.id, s->id, 16);
	assert_memory_equal(d.uuid.b, s->uuid.b, 16);
	free(b);
}

static void test_sum_encoding(void **state)
{
	(void)state;
	struct stream_sum_sum s = {.uuid = vec_uuid(CLOCK, 0), .has_uuid = true, .seq_no = 11};
	vec_id(s.id);
	s.value = UINT64_MAX; /* above INT64_MAX: what jansson cannot hold */
	check_sum_bytes(&s, HEAD "\"SeqNo\":11,\"Value\":18446744073709551615}");
	s.value = 0x8000000000000000ull;
	check_sum_bytes(&s, HEAD "\"SeqNo\":11,\"Value\":9223372036854775808}");
	s.value = 42;
	check_sum_bytes(&s, HEAD "\"SeqNo\":11,\"Value\":42}");
	/* An ACK: new(Sum) with its UUID set. */
	struct stream_sum_sum ack = {.uuid = vec_uuid(CLOCK + 16, GAZ_FLAG_ACK_TXN), .has_uuid = true};
	check_sum_bytes(&ack, "{\"UUID\":\"4d5e6f7b-2b3c-11ed-8402-010203040506\",\"ID\":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,"
			      "0,0],\"SeqNo\":0,\"Value\":0}");
}

static void test_crc64_ecma(void **state)
{
	(void)state;
	assert_true(stream_sum_crc64_update(0, (const uint8_t *)"123456789", 9) == 0x995dc9bbdf1939faull);
	/* Go: v = crc64.Update(v, ecma, data[i:]) for i in 0..9, then nil. */
	static const uint64_t fold[10] = {
		0xf817143ebde9b255ull, 0x3312a123c77ccc84ull, 0xc2d69e71957d754dull, 0xdd46b93db29fe71dull,
		0xa1d316cc28f13c37ull, 0x4ef85df3c798b55bull, 0xb79e938b13e8a23eull, 0x0b86568a78df5397ull,
		0x613e110e4d98951full, 0x639b07937750ccf0ull,
	};
	uint64_t v = 0;
	for (int i = 0; i < 10; i++) {
		v = stream_sum_crc64_update(v, DATA + i, 32 - (size_t)i);
		assert_true(v == fold[i]);
	}
	assert_true(stream_sum_crc64_update(v, NULL, 0) == fold[9]);
	/* Go's slicing-by-8 path (inputs of 16 bytes and more) agrees. */
	uint8_t big[4096];
	for (int i = 0; i < 4096; i++)
		big[i] = (uint8_t)(i * 31);
	assert_true(stream_sum_crc64_update(0x0123456789abcdefull, big, sizeof big) == 0x9de78de34a4ecb8eull);
}

static void test_update(void **state)
{
	(void)state;
	struct stream_sum_sum s = {0};
	vec_id(s.id);
	struct stream_sum_chunk c = {.seq_no = 1, .data = DATA, .data_len = 32};
	vec_id(c.id);
	bool done = true;
	assert_int_equal(stream_sum_update(&s, &c, &done, NULL), 0);
	assert_false(done);
	assert_true(s.value == 0xf817143ebde9b255ull); /* Go: fold 0 */
	struct gaz_status st = {0};
	assert_int_equal(stream_sum_update(&s, &c, &done, &st), GAZ_EINVAL); /* SeqNo 1 again */
	assert_non_null(strstr(st.msg, "SeqNo"));
	c.id[0] ^= 1;
	c.seq_no = 2;
	assert_int_equal(stream_sum_update(&s, &c, &done, NULL), GAZ_EINVAL);
	c.id[0] ^= 1;
	c.data = NULL, c.data_len = 0;
	assert_int_equal(stream_sum_update(&s, &c, &done, NULL), 0);
	assert_true(done);
	assert_true(s.seq_no == 2);
}

/* Modulo mapping: FNV-1a 32 of the ID's raw bytes, mod the journals. */
static void test_mapping_key(void **state)
{
	(void)state;
	uint8_t id[16];
	vec_id(id);
	uint32_t h = gaz_fnv1a32(id, 16);
	assert_true(h == 0xfa9d9955u);
	assert_int_equal(h % 8, 5);
	assert_int_equal(h % 3, 0);
	struct gaz_mapped m;
	assert_int_equal(stream_sum_final_sums_mapping(NULL, NULL, &m, NULL), 0);
	assert_string_equal(m.journal, "examples/stream-sum/sums");
	assert_int_equal(m.framing, GAZ_FRAMING_JSON);
}

/* What Go's json.Unmarshal made of these documents into a Sum: ok, and
 * then its SeqNo, Value and the first three ID bytes. */
static const struct {
	const char *in;
	bool ok;
	int64_t seq_no;
	uint64_t value;
	uint8_t id3[3];
	bool has_uuid;
} SUMS[] = {
	{"{\"UUID\":\"" UUID_TEXT "\",\"ID\":[1,2,3],\"SeqNo\":5,\"Value\":18446744073709551615}", true, 5,
	 UINT64_MAX, {1, 2, 3}, true},
	{"{\"uuid\":\"" UUID_TEXT "\",\"id\":[1,2,3],\"seqno\":5,\"value\":18446744073709551614,"
	 "\"Extra\":{\"a\":[1,\"}\"]}}",
	 true, 5, UINT64_MAX - 1, {1, 2, 3}, true},
	{" { \"Value\" : 0 , \"SeqNo\" : -3 , \"ID\" : null } ", true, -3, 0, {0, 0, 0}, false},
	{"{\"Value\":18446744073709551616}", false, 0, 0, {0}, false},
	{"{\"Value\":-1}", false, 0, 0, {0}, false},
	{"{\"Value\":1.0}", false, 0, 0, {0}, false},
	{"{\"Value\":1e3}", false, 0, 0, {0}, false},
	{"{\"SeqNo\":1.5}", false, 0, 0, {0}, false},
	{"{\"ID\":[256]}", false, 0, 0, {0}, false},
	{"{\"ID\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}", true, 0, 0, {1, 2, 3}, false},
	{"{\"Value\":\"5\"}", false, 0, 0, {0}, false},
	{"{\"Value\":5,\"Value\":7}", true, 0, 7, {0}, false},
	{"not json", false, 0, 0, {0}, false},
	{"{\"Value\":5} x", false, 0, 0, {0}, false},
	{"[]", false, 0, 0, {0}, false},
	/* Not from Go, but JSON's grammar, which Go's decoder enforces: */
	{"{\"Value\":05}", false, 0, 0, {0}, false},
	{"{\"Value\":5,}", false, 0, 0, {0}, false},
	{"{\"Value\" 5}", false, 0, 0, {0}, false},
	{"{\"Value\":5", false, 0, 0, {0}, false},
	{"{\"ID\":[1,2}", false, 0, 0, {0}, false},
	{"{\"Big\":123456789012345678901234567890,\"Value\":1}", true, 0, 1, {0}, false},
	{"{\"UUID\":null,\"Value\":null}", true, 0, 0, {0}, false},
	{"", false, 0, 0, {0}, false},
	{"{}", true, 0, 0, {0}, false},
};

static void test_sum_decoding(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof SUMS / sizeof SUMS[0]; i++) {
		struct stream_sum_sum s;
		struct gaz_status st = {0};
		int rc = stream_sum_sum_decode((const uint8_t *)SUMS[i].in, strlen(SUMS[i].in), &s, &st);
		if (!SUMS[i].ok) {
			if (rc != GAZ_EINVAL)
				fail_msg("%s: decoded, Go refuses it", SUMS[i].in);
			assert_true(st.msg[0] != '\0');
			continue;
		}
		if (rc != 0)
			fail_msg("%s: %s", SUMS[i].in, st.msg);
		assert_true(s.seq_no == SUMS[i].seq_no);
		assert_true(s.value == SUMS[i].value);
		assert_memory_equal(s.id, SUMS[i].id3, 3);
		assert_int_equal(s.has_uuid, SUMS[i].has_uuid);
	}
}

/* And into a Chunk: Data's base64 (nil for null, empty for ""). */
static const struct {
	const char *in;
	bool ok;
	const char *data; /* hex; NULL = nil */
} CHUNKS[] = {
	{"{\"Data\":null,\"SeqNo\":2}", true, NULL},
	{"{\"Data\":\"\"}", true, ""},
	{"{\"Data\":\"+/8=\"}", true, "fbff"},
	{"{\"Data\":\"+/8\"}", false, NULL},
	{"{\"Data\":\"!!!!\"}", false, NULL},
	{"{\"Data\":\"AAEC\\u0041w==\"}", true, "00010203"},
	{"{\"UUID\":\"not-a-uuid\"}", false, NULL},
	{"{\"UUID\":null}", true, NULL},
	/* Go's base64: padding ends the input; '\r' and '\n' are skipped. */
	{"{\"Data\":\"AA==AA==\"}", false, NULL},
	{"{\"Data\":\"AA=A\"}", false, NULL},
	{"{\"Data\":\"AA\\r\\n==\"}", true, "00"},
	{"{\"Data\":5}", false, NULL},
	{"{\"Value\":18446744073709551615}", true, NULL}, /* not a Chunk field */
};

static void test_chunk_decoding(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof CHUNKS / sizeof CHUNKS[0]; i++) {
		struct stream_sum_chunk c;
		struct gaz_status st = {0};
		int rc = stream_sum_chunk_decode((const uint8_t *)CHUNKS[i].in, strlen(CHUNKS[i].in), &c, &st);
		if (!CHUNKS[i].ok) {
			if (rc != GAZ_EINVAL)
				fail_msg("%s: decoded, Go refuses it", CHUNKS[i].in);
			assert_null(c.data);
			continue;
		}
		if (rc != 0)
			fail_msg("%s: %s", CHUNKS[i].in, st.msg);
		if (!CHUNKS[i].data) {
			assert_null(c.data);
			continue;
		}
		assert_non_null(c.data);
		char hex[64] = "";
		for (size_t k = 0; k < c.data_len; k++)
			snprintf(hex + 2 * k, 3, "%02x", c.data[k]);
		assert_string_equal(hex, CHUNKS[i].data);
		stream_sum_chunk_release(&c);
	}
}

/* The message types as the message layer drives them: the publisher
 * sets a UUID and frames; readers decode and ask for the UUID. */
static void test_message_types(void **state)
{
	(void)state;
	struct gaz_message_type ct = stream_sum_chunk_type(), stt = stream_sum_sum_type();
	struct stream_sum_chunk c = {.seq_no = 1, .data = DATA, .data_len = 32};
	vec_id(c.id);
	gaz_uuid u = vec_uuid(CLOCK, 0), got;
	assert_int_equal(ct.get_uuid(&c, &got, ct.arg), GAZ_ENOTFOUND);
	assert_int_equal(ct.set_uuid(&c, &u, ct.arg), 0);
	uint8_t *frame = NULL;
	size_t n = 0;
	assert_int_equal(gaz_message_frame(GAZ_FRAMING_JSON, &ct, &c, &frame, &n, NULL), 0);
	const char *want = HEAD "\"SeqNo\":1,\"Data\":\"//jx6uPc1c7HwLmyq6Sdlo+IgXpzbGVeV1BJQjs0LSY=\"}\n";
	assert_int_equal(n, strlen(want));
	assert_memory_equal(frame, want, n);

	void *msg;
	assert_int_equal(ct.decode(frame, n - 1, &msg, NULL, ct.arg), 0);
	assert_int_equal(ct.get_uuid(msg, &got, ct.arg), 0);
	assert_memory_equal(got.b, u.b, 16);
	ct.free_msg(msg, ct.arg);
	free(frame);

	/* A Sum without a UUID member decodes, and has none. */
	const char *nouuid = "{\"ID\":" ID_JSON ",\"SeqNo\":3,\"Value\":9}";
	assert_int_equal(stt.decode((const uint8_t *)nouuid, strlen(nouuid), &msg, NULL, stt.arg), 0);
	assert_int_equal(stt.get_uuid(msg, &got, stt.arg), GAZ_ENOTFOUND);
	stt.free_msg(msg, stt.arg);
	struct gaz_status st = {0};
	assert_int_equal(stt.decode((const uint8_t *)"nope", 4, &msg, &st, stt.arg), GAZ_EINVAL);

	void *ack = stt.new_ack("examples/stream-sum/sums", stt.arg);
	assert_int_equal(stt.set_uuid(ack, &u, stt.arg), 0);
	assert_int_equal(gaz_message_frame(GAZ_FRAMING_JSON, &stt, ack, &frame, &n, NULL), 0);
	assert_memory_equal(frame, "{\"UUID\":\"" UUID_TEXT "\",\"ID\":[0,", 51);
	free(frame);
	stt.free_msg(ack, stt.arg);
	void *cack = ct.new_ack("j", ct.arg);
	ct.free_msg(cack, ct.arg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chunk_encoding), cmocka_unit_test(test_sum_encoding),
		cmocka_unit_test(test_crc64_ecma),     cmocka_unit_test(test_update),
		cmocka_unit_test(test_mapping_key),    cmocka_unit_test(test_sum_decoding),
		cmocka_unit_test(test_chunk_decoding), cmocka_unit_test(test_message_types),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
