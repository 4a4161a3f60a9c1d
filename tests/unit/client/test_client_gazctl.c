/*
 * test_client_gazctl.c - gazctl's pure output pieces against what Gazette's
 * gazctl v0.103.0 printed for the same inputs (captured from its runs):
 * tablewriter tables and header titles, go-humanize sizes and times,
 * encoding/json strings and fragments, offsets files, and the protobuf
 * text of `journals apply --dry-run`.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/gazctl/offsets.c"
#include "client/gazctl/output.c"
#include "client/gazctl/prototext.c"
#include "client/gazctl/util.c"
#include "gazette/journalspec_yaml.h"

/* capture runs fn(arg, FILE*) and returns what it wrote (caller frees). */
static char *capture(void (*fn)(void *, FILE *), void *arg)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	fn(arg, f);
	fclose(f);
	return buf;
}

static void test_header_title(void **state)
{
	static const char *const cases[][2] = {
		{"Name", "NAME"},
		{"RF", "RF"},
		{"content-type", "CONTENT - TYPE"},
		{"app.gazette.dev/message-type", "APP . GAZETTE . DEV / MESSAGE - TYPE"},
		{"SHA1", "SHA 1"},
		{"Compression", "COMPRESSION"},
		{"a_b", "A B"},
		{"HTTPServer", "HTTP SERVER"},
		{"1.5", "1 . 5"},
		{"nope", "NOPE"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *t = gazctl_header_title(cases[i][0]);
		assert_string_equal(t, cases[i][1]);
		free(t);
	}
}

static void render_cb(void *arg, FILE *out)
{
	gazctl_table_render(arg, out);
}

/* Gazette: gazctl journals list -p -r --rf --stores -L content-type
 * -L app.gazette.dev/message-type -L nope (first and a data row). */
static void test_table_list(void **state)
{
	static const char *const hdr[] = {"Name", "RF", "Primary", "Replicas", "Stores",
					  "content-type", "app.gazette.dev/message-type", "nope"};
	static const char *const row[] = {"examples/bar", "1", "inviting-macaw", "", "file:///",
					  "application/x-ndjson", "TestMsg", "<none>"};
	struct gazctl_table t;
	char *out;

	(void)state;
	gazctl_table_init(&t, 8, hdr);
	gazctl_table_add(&t, row);
	out = capture(render_cb, &t);
	assert_string_equal(
		out,
		"┌──────────────┬────┬────────────────┬──────────┬──────────┬──────────────────────┬"
		"──────────────────────────────────────┬────────┐\n"
		"│     NAME     │ RF │    PRIMARY     │ REPLICAS │  STORES  │    CONTENT - TYPE    │ "
		"APP . GAZETTE . DEV / MESSAGE - TYPE │  NOPE  │\n"
		"├──────────────┼────┼────────────────┼──────────┼──────────┼──────────────────────┼"
		"──────────────────────────────────────┼────────┤\n"
		"│ examples/bar │ 1  │ inviting-macaw │          │ file:/// │ application/x-ndjson │ "
		"TestMsg                              │ <none> │\n"
		"└──────────────┴────┴────────────────┴──────────┴──────────┴──────────────────────┴"
		"──────────────────────────────────────┴────────┘\n");
	free(out);
	gazctl_table_release(&t);
}

/* An empty listing has no separator line. */
static void test_table_empty(void **state)
{
	static const char *const hdr[] = {"Name"};
	struct gazctl_table t;
	char *out;

	(void)state;
	gazctl_table_init(&t, 1, hdr);
	out = capture(render_cb, &t);
	assert_string_equal(out, "┌──────┐\n│ NAME │\n└──────┘\n");
	free(out);
	gazctl_table_release(&t);
}

/* Cells are trimmed; headers centre with the odd space on the right. */
static void test_table_fragments(void **state)
{
	static const char *const hdr[] = {"Journal", "Offset", "Length", "Persisted", "SHA1",
					  "Compression"};
	static const char *const row[] = {" examples/foo ", "588895", "8 B", "", "8a3d961f7fe8...",
					  "GZIP"};
	struct gazctl_table t;
	char *out;

	(void)state;
	gazctl_table_init(&t, 6, hdr);
	gazctl_table_add(&t, row);
	out = capture(render_cb, &t);
	assert_non_null(strstr(out, "│   JOURNAL    │ OFFSET │ LENGTH │ PERSISTED │      SHA 1      "
				    "│ COMPRESSION │\n"));
	assert_non_null(strstr(out, "│ examples/foo │ 588895 │ 8 B    │           │ 8a3d961f7fe8... "
				    "│ GZIP        │\n"));
	free(out);
	gazctl_table_release(&t);
}

static void test_ibytes(void **state)
{
	char b[32];

	(void)state;
	assert_string_equal(gazctl_ibytes(0, b, sizeof(b)), "0 B");
	assert_string_equal(gazctl_ibytes(8, b, sizeof(b)), "8 B");
	assert_string_equal(gazctl_ibytes(1023, b, sizeof(b)), "1023 B");
	assert_string_equal(gazctl_ibytes(1024, b, sizeof(b)), "1.0 KiB");
	assert_string_equal(gazctl_ibytes(588895, b, sizeof(b)), "575 KiB");
	assert_string_equal(gazctl_ibytes(6754388, b, sizeof(b)), "6.4 MiB");
	assert_string_equal(gazctl_ibytes(82854982, b, sizeof(b)), "79 MiB");
}

static void test_reltime(void **state)
{
	char b[64];
	int64_t now = 1800000000;

	(void)state;
	assert_string_equal(gazctl_reltime(now, now, b, sizeof(b)), "now");
	assert_string_equal(gazctl_reltime(now - 1, now, b, sizeof(b)), "1 second ago");
	assert_string_equal(gazctl_reltime(now - 4, now, b, sizeof(b)), "4 seconds ago");
	assert_string_equal(gazctl_reltime(now - 90, now, b, sizeof(b)), "1 minute ago");
	assert_string_equal(gazctl_reltime(now - 11 * 60 - 5, now, b, sizeof(b)),
			    "11 minutes ago");
	assert_string_equal(gazctl_reltime(now - 3 * 86400, now, b, sizeof(b)), "3 days ago");
	assert_string_equal(gazctl_reltime(now + 7200, now, b, sizeof(b)), "2 hours from now");
	assert_string_equal(gazctl_reltime(0, now, b, sizeof(b)), "a long while ago");
}

static void json_cb(void *arg, FILE *out)
{
	gazctl_json_string(out, arg);
}

static void test_json_string(void **state)
{
	char *out;

	(void)state;
	out = capture(json_cb, "a<b>&\"\\\n\t\x01\xe2\x80\xa8 é\xff");
	assert_string_equal(out, "\"a\\u003cb\\u003e\\u0026\\\"\\\\\\n\\t\\u0001\\u2028 é\\ufffd\"");
	free(out);
}

static void frag_cb(void *arg, FILE *out)
{
	gazctl_fragment_json(out, arg);
}

/* journals fragments -o json, as Gazette printed it. */
static void test_fragment_json(void **state)
{
	Protocol__FragmentsResponse__Fragment f = PROTOCOL__FRAGMENTS_RESPONSE____FRAGMENT__INIT;
	Protocol__Fragment spec = PROTOCOL__FRAGMENT__INIT;
	Protocol__SHA1Sum sum = PROTOCOL__SHA1_SUM__INIT;
	char *out;

	(void)state;
	spec.journal = "examples/bar";
	spec.end = 588895;
	sum.part1 = 11368392209645476406ull;
	sum.part2 = 7384263896837321769ull;
	sum.part3 = 2948186495u;
	spec.sum = &sum;
	spec.compression_codec = PROTOCOL__COMPRESSION_CODEC__SNAPPY;
	spec.backing_store = "file:///";
	spec.mod_time = 1795990485;
	f.spec = &spec;
	f.signed_url = "file:///examples/bar/x.sz?a=1&b=2";
	out = capture(frag_cb, &f);
	assert_string_equal(out, "{\"spec\":{\"journal\":\"examples/bar\",\"end\":588895,\"sum\":{"
				 "\"part1\":11368392209645476406,\"part2\":7384263896837321769,"
				 "\"part3\":2948186495},\"compression_codec\":4,\"backing_store\":"
				 "\"file:///\",\"mod_time\":1795990485},\"signed_url\":"
				 "\"file:///examples/bar/x.sz?a=1\\u0026b=2\"}\n");
	free(out);
	spec.sum = NULL;
	spec.journal = "a/b";
	spec.begin = 5;
	spec.end = 5;
	spec.compression_codec = 0;
	spec.backing_store = NULL;
	spec.mod_time = 0;
	f.signed_url = "";
	out = capture(frag_cb, &f);
	assert_string_equal(out, "{\"spec\":{\"journal\":\"a/b\",\"begin\":5,\"end\":5,\"sum\":{}}}\n");
	free(out);
}

static void offsets_cb(void *arg, FILE *out)
{
	gazctl_offsets_write(arg, out);
}

static void test_offsets(void **state)
{
	static const char in[] = "{\"b/j\": 10, \"a/<j>\": 0, \"c\": 9007199254740993}";
	struct gaz_status st = {0};
	struct gazctl_offsets o;
	int64_t off = -1;
	char *out;

	(void)state;
	assert_int_equal(gazctl_offsets_parse(in, strlen(in), &o, &st), 0);
	assert_true(gazctl_offsets_get(&o, "b/j", &off));
	assert_int_equal(off, 10);
	assert_false(gazctl_offsets_get(&o, "nope", &off));
	gazctl_offsets_set(&o, "b/j", 42);
	gazctl_offsets_set(&o, "aa", 7);
	out = capture(offsets_cb, &o);
	assert_string_equal(out, "{\"a/\\u003cj\\u003e\":0,\"aa\":7,\"b/j\":42,"
				 "\"c\":9007199254740993}\n");
	free(out);
	gazctl_offsets_release(&o);

	assert_int_equal(gazctl_offsets_parse("null", 4, &o, &st), 0);
	assert_int_equal(o.n, 0);
	assert_int_equal(gazctl_offsets_parse("[1]", 3, &o, &st), GAZ_EINVAL);
	gaz_status_clear(&st);
	assert_int_equal(gazctl_offsets_parse("{\"a\":1.5}", 9, &o, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "not an integer"));
	gaz_status_clear(&st);
	assert_int_equal(gazctl_offsets_parse("{\"a\":", 5, &o, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "failed to decode offsets"));
}

static void text_cb(void *arg, FILE *out)
{
	gazctl_proto_text(out, arg);
}

/* journals apply --dry-run of the same YAML, as Gazette printed it. */
static void test_proto_text(void **state)
{
	static const char yaml[] =
		"name: t/\nreplication: 1\nlabels:\n  - name: a-label\n  - name: content-type\n"
		"    value: \"text/csv\"\nfragment:\n  length: 2048\n  compression_codec: NONE\n"
		"  stores: [\"file:///x/\", \"s3://bucket/p/?a=b&c=d\"]\n  refresh_interval: 1m30s\n"
		"  retention: 1.5s\n  flush_interval: 1m\n"
		"  path_postfix_template: 'date={{ .Spool.FirstAppendTime.Format \"2006-01-02\" }}'\n"
		"flags: O_RDONLY\nmax_append_rate: 1000\nchildren:\n  - name: t/aaaa\n    revision: -1\n"
		"    suspend: {level: PARTIAL, offset: 100}\n  - name: t/bbbb\n    delete: true\n"
		"    revision: 5\n  - name: t/é/cc\n    fragment:\n      retention: 0s\n";
	static const char want[] =
		"changes: <\n  expect_mod_revision: -1\n  upsert: <\n    name: \"t/aaaa\"\n"
		"    replication: 1\n    labels: <\n      labels: <\n        name: \"a-label\"\n"
		"      >\n      labels: <\n        name: \"content-type\"\n        value: \"text/csv\"\n"
		"      >\n    >\n    fragment: <\n      length: 2048\n      compression_codec: NONE\n"
		"      stores: \"file:///x/\"\n      stores: \"s3://bucket/p/?a=b&c=d\"\n"
		"      refresh_interval: <\n        seconds: 90\n      >\n      retention: <\n"
		"        seconds: 1\n        nanos: 500000000\n      >\n      flush_interval: <\n"
		"        seconds: 60\n      >\n"
		"      path_postfix_template: \"date={{ .Spool.FirstAppendTime.Format "
		"\\\"2006-01-02\\\" }}\"\n    >\n    flags: 1\n    max_append_rate: 1000\n"
		"    suspend: <\n      level: PARTIAL\n      offset: 100\n    >\n  >\n>\n"
		"changes: <\n  expect_mod_revision: 5\n  delete: \"t/bbbb\"\n>\n";
	Protocol__ApplyRequest *req = NULL;
	struct gaz_status st = {0};
	char *out;

	(void)state;
	if (gaz_journalspec_yaml_parse(yaml, strlen(yaml), &req, &st))
		fail_msg("parse: %s", st.msg);
	assert_int_equal(req->n_changes, 3);
	out = capture(text_cb, req);
	assert_memory_equal(out, want, strlen(want));
	/* The third journal: a non-ASCII name in octal; retention inherited. */
	assert_non_null(strstr(out + strlen(want), "name: \"t/\\303\\251/cc\"\n"));
	free(out);
	gaz_journalspec_apply_free(req);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_header_title), cmocka_unit_test(test_table_list),
		cmocka_unit_test(test_table_empty),  cmocka_unit_test(test_table_fragments),
		cmocka_unit_test(test_ibytes),	     cmocka_unit_test(test_reltime),
		cmocka_unit_test(test_json_string),  cmocka_unit_test(test_fragment_json),
		cmocka_unit_test(test_offsets),	     cmocka_unit_test(test_proto_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
