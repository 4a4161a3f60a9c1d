/* test_pbjson.c - lib/common/pbjson: the protobuf JSON mapping of Gazette's
 * REST gateway (gogo jsonpb with EmitDefaults). Expected texts are what
 * Gazette v0.103.0's /v1/ gateway writes for the same messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/pbjson.h"
#include "protocol.pb-c.h"

static char *dump(const ProtobufCMessage *m)
{
	json_t *j = gaz_pbjson_encode(m, NULL);
	char *s;

	assert_non_null(j);
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	assert_non_null(s);
	return s;
}

static void test_names(void **state)
{
	char buf[64];

	(void)state;
	assert_string_equal(gaz_pbjson_name("write_head", buf, sizeof(buf)), "writeHead");
	assert_string_equal(gaz_pbjson_name("do_not_proxy", buf, sizeof(buf)), "doNotProxy");
	assert_string_equal(gaz_pbjson_name("signatureTTL", buf, sizeof(buf)), "signatureTTL");
	assert_string_equal(gaz_pbjson_name("journal", buf, 4), "jou");
}

/* A content message of a Read, as Gazette writes it: int64 as strings,
 * enum by name, absent messages null, bytes base64, empty bytes null. */
static void test_encode_read_response(void **state)
{
	Protocol__ReadResponse r = PROTOCOL__READ_RESPONSE__INIT;
	char *s;

	(void)state;
	r.offset = 0;
	r.content.data = (uint8_t *)"hello\nworld\n";
	r.content.len = 12;
	s = dump(&r.base);
	assert_string_equal(s, "{\"status\":\"OK\",\"header\":null,\"offset\":\"0\",\"writeHead\":\"0\","
			       "\"fragment\":null,\"fragmentUrl\":\"\",\"content\":\"aGVsbG8Kd29ybGQK\"}");
	free(s);
	r.status = PROTOCOL__STATUS__OFFSET_NOT_YET_AVAILABLE;
	r.offset = 12;
	r.write_head = 12;
	r.content.len = 0;
	s = dump(&r.base);
	assert_string_equal(s, "{\"status\":\"OFFSET_NOT_YET_AVAILABLE\",\"header\":null,\"offset\":\"12\","
			       "\"writeHead\":\"12\",\"fragment\":null,\"fragmentUrl\":\"\",\"content\":null}");
	free(s);
}

/* Fields Gazette declares non-nullable come out as objects even when
 * absent; Durations as seconds strings. */
static void test_encode_non_nullable_and_durations(void **state)
{
	Protocol__JournalSpec js = PROTOCOL__JOURNAL_SPEC__INIT;
	Protocol__JournalSpec__Fragment fr = PROTOCOL__JOURNAL_SPEC__FRAGMENT__INIT;
	Google__Protobuf__Duration d = GOOGLE__PROTOBUF__DURATION__INIT;
	char *s;

	(void)state;
	js.name = "a/b";
	s = dump(&js.base);
	assert_string_equal(s, "{\"name\":\"a/b\",\"replication\":0,\"labels\":{\"labels\":[]},"
			       "\"fragment\":{\"length\":\"0\",\"compressionCodec\":\"INVALID\",\"stores\":[],"
			       "\"refreshInterval\":\"0s\",\"retention\":\"0s\",\"flushInterval\":\"0s\","
			       "\"pathPostfixTemplate\":\"\"},\"flags\":0,\"maxAppendRate\":\"0\",\"suspend\":null}");
	free(s);
	js.fragment = &fr;
	fr.refresh_interval = &d;
	static const struct {
		int64_t sec;
		int32_t nanos;
		const char *want;
	} cases[] = {
		{1, 0, "1s"}, {1, 500000000, "1.500s"}, {0, 1500, "0.000001500s"},
		{-2, -250000000, "-2.250s"}, {0, -5000000, "-0.005s"}, {86400, 0, "86400s"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		d.seconds = cases[i].sec;
		d.nanos = cases[i].nanos;
		json_t *j = gaz_pbjson_encode(&js.base, NULL);
		const char *got = json_string_value(
			json_object_get(json_object_get(j, "fragment"), "refreshInterval"));
		assert_non_null(got);
		assert_string_equal(got, cases[i].want);
		json_decref(j);
	}
}

static ProtobufCMessage *decode(const char *text, const ProtobufCMessageDescriptor *d,
				struct gaz_status *st)
{
	json_t *j = json_loads(text, 0, NULL);
	ProtobufCMessage *m = NULL;
	int rc;

	assert_non_null(j);
	rc = gaz_pbjson_decode(j, d, &m, st);
	json_decref(j);
	return rc ? NULL : m;
}

static void test_decode_read_request(void **state)
{
	struct gaz_status st = {0};
	Protocol__ReadRequest *r;

	(void)state;
	r = (Protocol__ReadRequest *)decode(
		"{\"journal\":\"a/b\",\"offset\":\" 9223372036854775807  \",\"block\":true,"
		"\"do_not_proxy\":true,\"metadataOnly\":false,\"endOffset\":42,\"unknown\":[1],"
		"\"header\":{\"processId\":{\"zone\":\"z\",\"suffix\":\"s\"},"
		"\"etcd\":{\"clusterId\":\"18446744073709551615\",\"revision\":\"7\"},"
		"\"route\":{\"members\":[{\"zone\":\"z\",\"suffix\":\"s\"}],\"primary\":0,"
		"\"endpoints\":[\"http://x:1\"]}},\"beginModTime\":null}",
		&protocol__read_request__descriptor, &st);
	assert_non_null(r);
	assert_string_equal(r->journal, "a/b");
	assert_int_equal(r->offset, INT64_MAX);
	assert_true(r->block && r->do_not_proxy && !r->metadata_only);
	assert_int_equal(r->end_offset, 42);
	assert_non_null(r->header);
	assert_string_equal(r->header->process_id->suffix, "s");
	assert_true(r->header->etcd->cluster_id == UINT64_MAX);
	assert_int_equal(r->header->route->n_members, 1);
	assert_string_equal(r->header->route->endpoints[0], "http://x:1");
	protobuf_c_message_free_unpacked(&r->base, NULL);
}

static void test_decode_fields(void **state)
{
	struct gaz_status st = {0};
	Protocol__JournalSpec *js;
	Protocol__AppendRequest *ar;

	(void)state;
	js = (Protocol__JournalSpec *)decode(
		"{\"name\":\"a/b\",\"fragment\":{\"compression_codec\":\"ZSTANDARD\",\"length\":1024,"
		"\"refreshInterval\":\"1m30s\",\"flushInterval\":\"1.5s\",\"stores\":[\"s3://b/\"]},"
		"\"flags\":4}",
		&protocol__journal_spec__descriptor, &st);
	assert_non_null(js);
	assert_int_equal(js->fragment->compression_codec, PROTOCOL__COMPRESSION_CODEC__ZSTANDARD);
	assert_int_equal(js->fragment->length, 1024);
	assert_int_equal(js->fragment->refresh_interval->seconds, 90);
	assert_int_equal(js->fragment->flush_interval->seconds, 1);
	assert_int_equal(js->fragment->flush_interval->nanos, 500000000);
	assert_int_equal(js->flags, 4);
	protobuf_c_message_free_unpacked(&js->base, NULL);

	/* bytes: standard or URL-safe, padded or not; the same field given
	 * under both names keeps the last */
	ar = (Protocol__AppendRequest *)decode("{\"content\":\"aGm-_w==\",\"journal\":\"x/y\"}",
					       &protocol__append_request__descriptor, &st);
	assert_non_null(ar);
	assert_int_equal(ar->content.len, 4);
	assert_memory_equal(ar->content.data, "hi\xbe\xff", 4);
	protobuf_c_message_free_unpacked(&ar->base, NULL);
	ar = (Protocol__AppendRequest *)decode("{\"content\":\"aGk\",\"journal\":\"x/y\",\"journal\":\"z/w\"}",
					       &protocol__append_request__descriptor, &st);
	assert_non_null(ar);
	assert_memory_equal(ar->content.data, "hi", 2);
	assert_string_equal(ar->journal, "z/w");
	protobuf_c_message_free_unpacked(&ar->base, NULL);
}

static void test_decode_errors(void **state)
{
	static const struct {
		const char *text;
		const char *needle;
	} bad[] = {
		{"{\"offset\":\"abc\"}", "\"offset\": not an integer"},
		{"{\"offset\":1.5}", "\"offset\": not an integer"},
		{"{\"offset\":\"99999999999999999999\"}", "\"offset\": out of range"},
		{"{\"offset\":\"05\"}", "not an integer"},
		{"{\"offset\":\"5\\n\"}", "not an integer"},
		{"{\"offset\":\"+5\"}", "not an integer"},
		{"{\"offset\":\"1e3\"}", "not an integer"},
		{"{\"offset\":\"\"}", "not an integer"},
		{"{\"offset\":\"-\"}", "not an integer"},
		{"{\"journal\":5}", "\"journal\": not a string"},
		{"{\"block\":\"yes\"}", "\"block\": not a boolean"},
		{"{\"header\":[]}", "not a JSON object"},
		{"{\"header\":{\"route\":{\"members\":{}}}}", "\"members\": not an array"},
		{"{\"header\":{\"route\":{\"primary\":4294967296}}}", "\"primary\": out of range"},
		{"{\"header\":{\"etcd\":{\"clusterId\":-1}}}", "\"cluster_id\": out of range"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct gaz_status st = {0};
		assert_null(decode(bad[i].text, &protocol__read_request__descriptor, &st));
		assert_int_equal(st.code, GAZ_EINVAL);
		if (!strstr(st.msg, bad[i].needle))
			fail_msg("%s: got \"%s\", want \"%s\"", bad[i].text, st.msg, bad[i].needle);
	}
	struct gaz_status st = {0};
	assert_null(decode("{\"content\":\"a$==\"}", &protocol__append_request__descriptor, &st));
	assert_non_null(strstr(st.msg, "not valid base64"));
	gaz_status_clear(&st);
	assert_null(decode("{\"fragment\":{\"compressionCodec\":\"LZ4\"}}",
			   &protocol__journal_spec__descriptor, &st));
	assert_non_null(strstr(st.msg, "unknown protocol.CompressionCodec value \"LZ4\""));
	gaz_status_clear(&st);
	assert_null(decode("{\"fragment\":{\"refreshInterval\":\"10\"}}",
			   &protocol__journal_spec__descriptor, &st));
	assert_non_null(strstr(st.msg, "not a duration"));
}

/* What gaz_pbjson_encode writes decodes to the same message. */
static void test_round_trip(void **state)
{
	Protocol__ReadResponse r = PROTOCOL__READ_RESPONSE__INIT, *back;
	Protocol__Fragment f = PROTOCOL__FRAGMENT__INIT;
	Protocol__SHA1Sum sum = PROTOCOL__SHA1_SUM__INIT;
	struct gaz_status st = {0};
	uint8_t bin[256], a[512], b[512];
	char *s;

	(void)state;
	for (int i = 0; i < 256; i++)
		bin[i] = (uint8_t)i;
	sum.part1 = UINT64_MAX;
	sum.part3 = 7;
	f.journal = "a/b";
	f.begin = 1;
	f.end = 257;
	f.sum = &sum;
	f.compression_codec = PROTOCOL__COMPRESSION_CODEC__GZIP;
	r.fragment = &f;
	r.offset = -1;
	r.content.data = bin;
	for (size_t len = 1; len <= 4; len++) {
		r.content.len = len == 4 ? 256 : len;
		s = dump(&r.base);
		back = (Protocol__ReadResponse *)decode(s, &protocol__read_response__descriptor, &st);
		assert_non_null(back);
		size_t n1 = protobuf_c_message_pack(&r.base, a), n2 = protobuf_c_message_pack(&back->base, b);
		assert_int_equal(n1, n2);
		assert_memory_equal(a, b, n1);
		protobuf_c_message_free_unpacked(&back->base, NULL);
		free(s);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_encode_read_response),
		cmocka_unit_test(test_encode_non_nullable_and_durations),
		cmocka_unit_test(test_decode_read_request),
		cmocka_unit_test(test_decode_fields),
		cmocka_unit_test(test_decode_errors),
		cmocka_unit_test(test_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
