/*
 * test_journal_cr.c - JournalSpec CR <-> protobuf: field mapping, label
 * ordering, duration strings, errors naming the field, the round trip,
 * and value comparison as drift correction uses it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gazette/duration.h"
#include "operator/journal_cr.h"
#include "protocol/validate.h"

#define SEC INT64_C(1000000000)

static const char full[] =
	"{\"name\": \"k8s/j-1\", \"replication\": 3, \"deletionPolicy\": \"Delete\","
	" \"labels\": [{\"name\": \"content-type\", \"value\": \"application/x-ndjson\"},"
	"              {\"name\": \"app.gazette.dev/tag\", \"value\": \"b\"},"
	"              {\"name\": \"app.gazette.dev/tag\", \"value\": \"a\"},"
	"              {\"name\": \"app.gazette.dev/tag\", \"value\": \"b\"},"
	"              {\"name\": \"empty\"}],"
	" \"fragment\": {\"length\": 1048576, \"compressionCodec\": \"ZSTANDARD\","
	"               \"stores\": [\"s3://bucket/prefix/\", \"file:///\"],"
	"               \"refreshInterval\": \"10s\", \"retention\": \"720h\","
	"               \"flushInterval\": \"1h30m\", \"pathPostfixTemplate\": \"date={{.Spool}}\"},"
	" \"flags\": \"O_RDWR\", \"maxAppendRate\": 1000}";

static json_t *load(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, 0, &e);

	assert_non_null(j);
	return j;
}

static int64_t ns_of(const Google__Protobuf__Duration *d)
{
	int64_t ns = -1;

	assert_int_equal(gaz_duration_from_pb(d, &ns, NULL), 0);
	return ns;
}

static void test_cr_to_spec(void **state)
{
	json_t *j = load(full);
	Protocol__JournalSpec *s = NULL;
	struct gaz_status st = {0};

	(void)state;
	assert_int_equal(gaz_journal_cr_to_spec(j, &s, &st), 0);
	assert_string_equal(s->name, "k8s/j-1");
	assert_int_equal(s->replication, 3);
	/* Sorted by (name, value), exact duplicates dropped, "" for a missing value. */
	assert_int_equal(s->labels->n_labels, 4);
	assert_string_equal(s->labels->labels[0]->name, "app.gazette.dev/tag");
	assert_string_equal(s->labels->labels[0]->value, "a");
	assert_string_equal(s->labels->labels[1]->value, "b");
	assert_string_equal(s->labels->labels[2]->name, "content-type");
	assert_string_equal(s->labels->labels[3]->name, "empty");
	assert_string_equal(s->labels->labels[3]->value, "");
	assert_int_equal(s->fragment->length, 1048576);
	assert_int_equal(s->fragment->compression_codec, PROTOCOL__COMPRESSION_CODEC__ZSTANDARD);
	assert_int_equal(s->fragment->n_stores, 2);
	assert_string_equal(s->fragment->stores[0], "s3://bucket/prefix/");
	assert_int_equal(ns_of(s->fragment->refresh_interval), 10 * SEC);
	assert_int_equal(ns_of(s->fragment->retention), 720 * 3600 * SEC);
	assert_int_equal(ns_of(s->fragment->flush_interval), 5400 * SEC);
	assert_string_equal(s->fragment->path_postfix_template, "date={{.Spool}}");
	assert_int_equal(s->flags, PROTOCOL__JOURNAL_SPEC__FLAG__O_RDWR);
	assert_int_equal(s->max_append_rate, 1000);
	assert_null(s->suspend);
	assert_int_equal(gaz_validate_journal_spec(s, &st), 0);
	assert_int_equal(gaz_journal_cr_policy(j), GAZ_DELETION_DELETE);
	protobuf_c_message_free_unpacked(&s->base, NULL);
	json_decref(j);
}

static void test_minimal_and_defaults(void **state)
{
	json_t *j = load("{\"name\": \"a/b/c\", \"replication\": 1,"
			 " \"fragment\": {\"refreshInterval\": \"0\"}}");
	Protocol__JournalSpec *s = NULL;
	struct gaz_status st = {0};

	(void)state;
	assert_int_equal(gaz_journal_cr_to_spec(j, &s, &st), 0);
	assert_int_equal(s->labels->n_labels, 0);
	assert_int_equal(s->fragment->n_stores, 0);
	assert_int_equal(ns_of(s->fragment->refresh_interval), 0);
	assert_int_equal(ns_of(s->fragment->retention), 0);
	assert_int_equal(s->flags, 0);
	assert_int_equal(s->fragment->compression_codec, PROTOCOL__COMPRESSION_CODEC__INVALID);
	/* Converted but not valid for Gazette: codec and refresh interval. */
	assert_int_equal(gaz_validate_journal_spec(s, &st), GAZ_EINVAL);
	assert_int_equal(gaz_journal_cr_policy(j), GAZ_DELETION_RETAIN);
	protobuf_c_message_free_unpacked(&s->base, NULL);
	json_decref(j);
}

static void test_durations(void **state)
{
	static const struct {
		const char *text;
		int64_t ns;
	} ok[] = {{"10m", 600 * SEC}, {"1h30m", 5400 * SEC}, {"1.5s", 1500000000}, {"0", 0},
		  {"250ms", 250000000}, {"24h", 86400 * SEC}, {"-1s", -SEC}};
	static const char *const bad[] = {"7d", "10", "", "1h1", "m"};
	struct gaz_status st = {0};
	char buf[256];

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		snprintf(buf, sizeof(buf), "{\"name\": \"a/b/c\", \"fragment\": {\"retention\": \"%s\"}}",
			 ok[i].text);
		json_t *j = load(buf);
		Protocol__JournalSpec *s = NULL;
		assert_int_equal(gaz_journal_cr_to_spec(j, &s, &st), 0);
		assert_int_equal(ns_of(s->fragment->retention), ok[i].ns);
		protobuf_c_message_free_unpacked(&s->base, NULL);
		json_decref(j);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(buf, sizeof(buf), "{\"name\": \"a/b/c\", \"fragment\": {\"flushInterval\": \"%s\"}}",
			 bad[i]);
		json_t *j = load(buf);
		Protocol__JournalSpec *s = NULL;
		gaz_status_clear(&st);
		assert_int_equal(gaz_journal_cr_to_spec(j, &s, &st), GAZ_EINVAL);
		assert_null(s);
		assert_non_null(strstr(st.msg, "spec.fragment.flushInterval: "));
		json_decref(j);
	}
}

static void test_errors_name_the_field(void **state)
{
	static const struct {
		const char *json, *needle;
	} cases[] = {
		{"[]", "spec: not an object"},
		{"{\"name\": 7}", "spec.name: not a string"},
		{"{\"replication\": \"3\"}", "spec.replication: not an integer"},
		{"{\"replication\": 4294967296}", "spec.replication: out of range"},
		{"{\"labels\": {}}", "spec.labels: not a list"},
		{"{\"labels\": [{\"value\": \"x\"}]}", "spec.labels[0].name: missing"},
		{"{\"fragment\": {\"compressionCodec\": \"LZ4\"}}", "unknown codec \"LZ4\""},
		{"{\"fragment\": {\"stores\": [1]}}", "spec.fragment.stores[0]: not a string"},
		{"{\"fragment\": {\"length\": 1.5}}", "spec.fragment.length: not an integer"},
		{"{\"flags\": \"O_RW\"}", "spec.flags: unknown flag \"O_RW\""},
	};
	struct gaz_status st;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *j = load(cases[i].json);
		Protocol__JournalSpec *s = NULL;
		memset(&st, 0, sizeof(st));
		assert_int_equal(gaz_journal_cr_to_spec(j, &s, &st), GAZ_EINVAL);
		if (!strstr(st.msg, cases[i].needle))
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, st.msg, cases[i].needle);
		json_decref(j);
	}
}

static void test_round_trip_and_equal(void **state)
{
	json_t *j = load(full), *back;
	Protocol__JournalSpec *a = NULL, *b = NULL;
	struct gaz_status st = {0};

	(void)state;
	assert_int_equal(gaz_journal_cr_to_spec(j, &a, &st), 0);
	assert_non_null(back = gaz_journal_spec_to_cr(a));
	assert_string_equal(json_string_value(json_object_get(json_object_get(back, "fragment"),
							      "flushInterval")), "1h30m0s");
	assert_string_equal(json_string_value(json_object_get(back, "flags")), "O_RDWR");
	assert_null(json_object_get(back, "deletionPolicy"));
	assert_int_equal(gaz_journal_cr_to_spec(back, &b, &st), 0);
	assert_true(gaz_journal_spec_equal(a, b));

	/* Absent and zero are equal; any field change is not. */
	Google__Protobuf__Duration *ret = b->fragment->retention;
	b->fragment->retention = NULL;
	a->fragment->retention->seconds = 0;
	assert_true(gaz_journal_spec_equal(a, b));
	b->fragment->retention = ret;
	b->fragment->retention->seconds = 0;
	b->replication = 2;
	assert_false(gaz_journal_spec_equal(a, b));
	b->replication = 3;
	free(b->fragment->stores[1]);
	b->fragment->stores[1] = strdup("file:///other/");
	assert_false(gaz_journal_spec_equal(a, b));
	free(b->fragment->stores[1]);
	b->fragment->stores[1] = strdup("file:///");
	assert_true(gaz_journal_spec_equal(a, b));
	/* Suspension counts: a broker's write of it is not drift only if we carry it. */
	Protocol__JournalSpec__Suspend sus = PROTOCOL__JOURNAL_SPEC__SUSPEND__INIT;
	sus.level = PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__PARTIAL;
	sus.offset = 42;
	b->suspend = &sus;
	assert_false(gaz_journal_spec_equal(a, b));
	b->suspend = NULL;
	protobuf_c_message_free_unpacked(&a->base, NULL);
	protobuf_c_message_free_unpacked(&b->base, NULL);
	json_decref(back);
	json_decref(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cr_to_spec),
		cmocka_unit_test(test_minimal_and_defaults),
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_errors_name_the_field),
		cmocka_unit_test(test_round_trip_and_equal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
