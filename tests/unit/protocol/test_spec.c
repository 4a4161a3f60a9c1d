/*
 * test_spec.c - §3.4 JournalSpec (every row, exact boundaries), §3.6
 * fragment store URLs, content-type media types and the path postfix
 * template check (lib/protocol/spec.c, template.c).
 */
#include "vcheck.h"

#include <stdlib.h>

#include "protocol/labels.h"
#include "protocol/validate.h"

/* A valid spec and the storage it points into. */
struct fixture {
	Protocol__JournalSpec spec;
	Protocol__JournalSpec__Fragment frag;
	Google__Protobuf__Duration refresh, flush;
	Protocol__JournalSpec__Suspend suspend;
	Protocol__LabelSet *labels;
	char *stores[2];
};

static void fixture_init(struct fixture *f)
{
	protocol__journal_spec__init(&f->spec);
	protocol__journal_spec__fragment__init(&f->frag);
	google__protobuf__duration__init(&f->refresh);
	google__protobuf__duration__init(&f->flush);
	protocol__journal_spec__suspend__init(&f->suspend);
	f->labels = gaz_labelset_new();
	assert_int_equal(gaz_labelset_add(f->labels, "content-type", "application/x-ndjson"), 0);
	f->stores[0] = "s3://bucket/prefix/";
	f->stores[1] = "file:///mnt/x/";
	f->refresh.seconds = 60;
	f->flush.seconds = 3600;
	f->frag.length = 1 << 20;
	f->frag.compression_codec = PROTOCOL__COMPRESSION_CODEC__SNAPPY;
	f->frag.n_stores = 2;
	f->frag.stores = f->stores;
	f->frag.refresh_interval = &f->refresh;
	f->frag.flush_interval = &f->flush;
	f->frag.path_postfix_template = "date={{ .Spool.FirstAppendTime.Format \"2006-01-02\" }}";
	f->spec.name = "a/journal";
	f->spec.replication = 3;
	f->spec.labels = f->labels;
	f->spec.fragment = &f->frag;
}

static void fixture_release(struct fixture *f)
{
	gaz_labelset_free(f->labels);
}

static void test_valid_and_name(void **state)
{
	struct fixture f;

	(void)state;
	fixture_init(&f);
	VCHECK(gaz_validate_journal_spec(&f.spec, &st), NULL);
	f.spec.name = "abc";
	VCHECK(gaz_validate_journal_spec(&f.spec, &st),
	       "Name: invalid length (3; expected 4 <= length <= 512)");
	f.spec.name = "abcd";
	VCHECK(gaz_validate_journal_spec(&f.spec, &st), NULL);
	f.spec.name = (char *)rep('n', 512);
	VCHECK(gaz_validate_journal_spec(&f.spec, &st), NULL);
	f.spec.name = (char *)rep('n', 513);
	VCHECK(gaz_validate_journal_spec(&f.spec, &st),
	       "Name: invalid length (513; expected 4 <= length <= 512)");
	f.spec.name = "a/journal;meta";
	VCHECK(gaz_validate_journal_spec(&f.spec, &st),
	       "Name cannot have a metadata path segment (;meta; expected no segment)");
	f.spec.name = "a/journal/";
	VCHECK(gaz_validate_journal_spec(&f.spec, &st), "Name: must be a clean path (a/journal/)");
	VCHECK(gaz_validate_journal_spec(NULL, &st),
	       "Name: invalid length (0; expected 4 <= length <= 512)");
	fixture_release(&f);
}

static void test_replication_flags_rate_suspend(void **state)
{
	static const struct {
		int32_t repl;
		const char *want;
	} repl[] = {
		{0, "invalid Replication (0; expected 1 <= Replication <= 5)"},
		{1, NULL},
		{5, NULL},
		{6, "invalid Replication (6; expected 1 <= Replication <= 5)"},
		{-1, "invalid Replication (-1; expected 1 <= Replication <= 5)"},
	};
	static const struct {
		uint32_t flags;
		const char *want;
	} flags[] = {
		{0, NULL}, {1, NULL}, {2, NULL}, {4, NULL},
		{3, "Flags: invalid combination (3)"},
		{5, "Flags: invalid combination (5)"},
		{6, "Flags: invalid combination (6)"},
		{8, "Flags: invalid combination (8)"},
	};
	struct fixture f;

	(void)state;
	fixture_init(&f);
	for (size_t i = 0; i < sizeof(repl) / sizeof(repl[0]); i++) {
		f.spec.replication = repl[i].repl;
		VCHECK(gaz_validate_journal_spec(&f.spec, &st), repl[i].want);
	}
	f.spec.replication = 1;
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		f.spec.flags = flags[i].flags;
		VCHECK(gaz_validate_journal_spec(&f.spec, &st), flags[i].want);
	}
	f.spec.flags = 0;
	f.spec.max_append_rate = -1;
	VCHECK(gaz_validate_journal_spec(&f.spec, &st), "invalid MaxAppendRate (-1; expected >= 0)");
	f.spec.max_append_rate = 0;
	f.spec.suspend = &f.suspend;
	VCHECK(gaz_validate_journal_spec(&f.spec, &st), NULL);
	f.suspend.level = PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__FULL;
	f.suspend.offset = 1024;
	VCHECK(gaz_validate_journal_spec(&f.spec, &st), NULL);
	f.suspend.level = 3;
	VCHECK(gaz_validate_journal_spec(&f.spec, &st), "Suspend.Level: invalid Level variant (3)");
	f.suspend.level = PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__PARTIAL;
	f.suspend.offset = -1;
	VCHECK(gaz_validate_journal_spec(&f.spec, &st), "Suspend.Offset: invalid Offset (-1; expected >= 0)");
	fixture_release(&f);

	assert_true(gaz_journal_may_read(0) && gaz_journal_may_read(1) && gaz_journal_may_read(4));
	assert_false(gaz_journal_may_read(2) || gaz_journal_may_read(3));
	assert_true(gaz_journal_may_write(0) && gaz_journal_may_write(2) && gaz_journal_may_write(4));
	assert_false(gaz_journal_may_write(1) || gaz_journal_may_write(3));
}

static void test_labels(void **state)
{
	static const struct {
		const char *terms[4];
		const char *want;
	} cases[] = {
		{{"content-type=text/csv"}, NULL},
		{{"app.gazette.dev/tag=a", "app.gazette.dev/tag=b"}, NULL},
		{{"name=a/journal"}, "Labels cannot include label \"name\""},
		{{"prefix=a/"}, "Labels cannot include label \"prefix\""},
		{{"content-type=text/csv", "content-type=text/plain"},
		 "Labels: expected single-value Label has multiple values (index 1; label content-type value text/plain)"},
		{{"app.gazette.dev/managed-by=a", "app.gazette.dev/managed-by=b"},
		 "Labels: expected single-value Label has multiple values (index 1; label app.gazette.dev/managed-by value b)"},
		{{"content-type=text"}, NULL}, /* Go accepts a bare type */
		{{"content-type="}, "Labels: parsing content-type: mime: no media type"},
		{{"content-type=text/"}, "Labels: parsing content-type: mime: expected token after slash"},
		{{"content-type=text/csv/x"},
		 "Labels: parsing content-type: mime: unexpected content after media subtype"},
		{{"content-type=a=b"}, "Labels: parsing content-type: mime: expected slash after first token"},
		{{"app.gazette.dev/message-type=Foo"},
		 "Labels: expected content-type label alongside app.gazette.dev/message-type"},
		{{"app.gazette.dev/message-type=Foo", "content-type=application/x-ndjson"}, NULL},
		{{"app.gazette.dev/message-subtype=Bar", "content-type=application/x-ndjson"},
		 "Labels: expected app.gazette.dev/message-type label alongside app.gazette.dev/message-subtype"},
		{{"app.gazette.dev/message-subtype=Bar", "app.gazette.dev/message-type=Foo",
		  "content-type=application/x-ndjson"},
		 NULL},
		{{"a=1"}, "Labels.Labels[0].Name: invalid length (1; expected 2 <= length <= 64)"},
	};
	struct fixture f;

	(void)state;
	fixture_init(&f);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		Protocol__LabelSet *set = gaz_labelset_new();

		for (size_t k = 0; k < 4 && cases[i].terms[k]; k++) {
			char buf[128], *eq;

			snprintf(buf, sizeof(buf), "%s", cases[i].terms[k]);
			eq = strchr(buf, '=');
			*eq = '\0';
			assert_int_equal(gaz_labelset_add(set, buf, eq + 1), 0);
		}
		f.spec.labels = set;
		VCHECK(gaz_validate_journal_spec(&f.spec, &st), cases[i].want);
		gaz_labelset_free(set);
	}
	f.spec.labels = NULL; /* absent = empty */
	VCHECK(gaz_validate_journal_spec(&f.spec, &st), NULL);
	fixture_release(&f);
}

static void test_fragment_length_codec(void **state)
{
	static const struct {
		int64_t len;
		const char *want;
	} lens[] = {
		{0, "Fragment: invalid Length (0; expected 1024 <= length <= 17179869184)"},
		{1023, "Fragment: invalid Length (1023; expected 1024 <= length <= 17179869184)"},
		{1024, NULL},
		{17179869184LL, NULL},
		{17179869185LL, "Fragment: invalid Length (17179869185; expected 1024 <= length <= 17179869184)"},
	};
	struct fixture f;

	(void)state;
	fixture_init(&f);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		f.frag.length = lens[i].len;
		VCHECK(gaz_validate_journal_spec(&f.spec, &st), lens[i].want);
	}
	f.frag.length = 1024;
	for (int c = 1; c <= 5; c++) {
		f.frag.compression_codec = c;
		f.frag.n_stores = 1; /* the file:// store would refuse codec 5 */
		VCHECK(gaz_validate_journal_spec(&f.spec, &st), NULL);
	}
	f.frag.compression_codec = 0;
	VCHECK(gaz_validate_journal_spec(&f.spec, &st),
	       "Fragment.CompressionCodec: invalid value (INVALID)");
	f.frag.compression_codec = 6;
	VCHECK(gaz_validate_journal_spec(&f.spec, &st), "Fragment.CompressionCodec: invalid value (6)");
	f.spec.fragment = NULL;
	VCHECK(gaz_validate_journal_spec(&f.spec, &st),
	       "Fragment: invalid Length (0; expected 1024 <= length <= 17179869184)");
	fixture_release(&f);
}

static void test_fragment_stores(void **state)
{
	struct fixture f;

	(void)state;
	fixture_init(&f);
	f.stores[1] = "s3://bucket";
	VCHECK(gaz_validate_journal_spec(&f.spec, &st),
	       "Fragment.Stores[1]: path component doesn't end in '/' ()");
	f.stores[1] = "s3://bucket/prefix";
	VCHECK(gaz_validate_journal_spec(&f.spec, &st),
	       "Fragment.Stores[1]: path component doesn't end in '/' (/prefix)");
	f.stores[1] = "file://host/x/";
	VCHECK(gaz_validate_journal_spec(&f.spec, &st),
	       "Fragment.Stores[1]: file scheme cannot have host (file://host/x/)");
	f.stores[1] = "file:///x/";
	VCHECK(gaz_validate_journal_spec(&f.spec, &st), NULL);
	/* GZIP_OFFLOAD_DECOMPRESSION is refused only when stores[0] is file://. */
	f.frag.compression_codec = PROTOCOL__COMPRESSION_CODEC__GZIP_OFFLOAD_DECOMPRESSION;
	VCHECK(gaz_validate_journal_spec(&f.spec, &st), NULL);
	f.stores[0] = "file:///x/";
	VCHECK(gaz_validate_journal_spec(&f.spec, &st),
	       "Fragment: GZIP_OFFLOAD_DECOMPRESSION is incompatible with file:// stores (file:///x/)");
	f.frag.n_stores = 0;
	VCHECK(gaz_validate_journal_spec(&f.spec, &st), NULL);
	fixture_release(&f);
}

static void test_fragment_intervals(void **state)
{
	static const struct {
		int64_t s;
		int32_t ns;
		const char *want;
	} refresh[] = {
		{0, 0, "Fragment: invalid RefreshInterval (0s; expected 1s <= interval <= 24h0m0s)"},
		{0, 999999999, "Fragment: invalid RefreshInterval (999.999999ms; expected 1s <= interval <= 24h0m0s)"},
		{1, 0, NULL},
		{86400, 0, NULL},
		{86400, 1, "Fragment: invalid RefreshInterval (24h0m0.000000001s; expected 1s <= interval <= 24h0m0s)"},
		{-1, 0, "Fragment: invalid RefreshInterval (-1s; expected 1s <= interval <= 24h0m0s)"},
	};
	static const struct {
		int64_t s;
		const char *want;
	} flush[] = {
		{0, NULL},
		{1, "Fragment: invalid FlushInterval (1s; expected >= 1m0s)"},
		{59, "Fragment: invalid FlushInterval (59s; expected >= 1m0s)"},
		{60, NULL},
		{-60, "Fragment: invalid FlushInterval (-1m0s; expected >= 1m0s)"},
	};
	struct fixture f;

	(void)state;
	fixture_init(&f);
	for (size_t i = 0; i < sizeof(refresh) / sizeof(refresh[0]); i++) {
		f.refresh.seconds = refresh[i].s;
		f.refresh.nanos = refresh[i].ns;
		VCHECK(gaz_validate_journal_spec(&f.spec, &st), refresh[i].want);
	}
	f.frag.refresh_interval = NULL; /* required: absent is 0 */
	VCHECK(gaz_validate_journal_spec(&f.spec, &st),
	       "Fragment: invalid RefreshInterval (0s; expected 1s <= interval <= 24h0m0s)");
	f.frag.refresh_interval = &f.refresh;
	f.refresh.seconds = 1;
	f.refresh.nanos = 0;
	for (size_t i = 0; i < sizeof(flush) / sizeof(flush[0]); i++) {
		f.flush.seconds = flush[i].s;
		VCHECK(gaz_validate_journal_spec(&f.spec, &st), flush[i].want);
	}
	f.frag.flush_interval = NULL;
	VCHECK(gaz_validate_journal_spec(&f.spec, &st), NULL);
	fixture_release(&f);
}

/* Expected values from Go's text/template and time.Format (go1 toolchain)
 * over Gazette's struct{Spool; *JournalSpec}, at 2019-11-19T22:04:05.123456789Z
 * and at the zero value. */
static void test_postfix_template_exec(void **state)
{
	static const struct {
		const char *tpl, *want, *want_zero;
	} cases[] = {
		{"date={{ .Spool.FirstAppendTime.Format \"2006-01-02\" }}/hour={{ .Spool.FirstAppendTime.Format \"15\" }}",
		 "date=2019-11-19/hour=22", "date=0001-01-01/hour=00"},
		{"{{ .FirstAppendTime.Format \"Mon Jan _2 3:4:5 PM 2006 002 06 MST -0700 Z07:00 .000 .999\" }}",
		 "Tue Nov 19 10:4:5 PM 2019 323 19 UTC +0000 Z .123 .123",
		 "Mon Jan  1 12:0:0 AM 0001 001 01 UTC +0000 Z .000 "},
		{"{{- .Spool.Begin -}} / {{ .End }}-{{ .Journal }}-{{ .Name }}-{{ .Replication }}",
		 "1024/ 2048-a/b-a/b-3", "0/ 0---0"},
		{"{{/* c */}}{{ .Spool.FirstAppendTime.Unix }}-{{ .FirstAppendTime.YearDay }}-{{ \"x\\\"y\" }}",
		 "1574201045-323-x\"y", "-62135596800-1-x\"y"},
		{"{{ .Spool.FirstAppendTime.Format \"January Monday 01/02 03 04 05.000000 pm\" }}",
		 "November Tuesday 11/19 10 04 05.123456 pm", "January Monday 01/01 12 00 00.000000 am"},
		{"", "", ""},
	};
	struct gaz_postfix_data d = {"a/b", 1024, 2048, INT64_C(1574201045123456789), 3};
	struct gaz_postfix_data zero = {0};
	struct gaz_status st = {0};
	char out[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(gaz_postfix_template_exec(cases[i].tpl, &d, out, sizeof(out), &st), 0);
		assert_string_equal(out, cases[i].want);
		assert_int_equal(gaz_postfix_template_exec(cases[i].tpl, &zero, out, sizeof(out), &st), 0);
		assert_string_equal(out, cases[i].want_zero);
	}
	/* Outside the subset, and invalid: a clear error, nothing written. */
	static const char *const bad[] = {"{{ .Labels }}", "{{ .Spool.FirstAppendTime | printf \"%s\" }}",
					  "{{if .Begin}}x{{end}}", "{{ .FirstAppendTime.Format 7 }}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&st, 0, sizeof(st));
		assert_int_equal(gaz_postfix_template_exec(bad[i], &d, out, sizeof(out), &st), GAZ_EINVAL);
		assert_non_null(strstr(st.msg, "unsupported action"));
	}
	memset(&st, 0, sizeof(st));
	assert_int_equal(gaz_postfix_template_exec("{{ .A", &d, out, sizeof(out), &st), GAZ_EINVAL);
	assert_string_equal(st.msg, "template: postfix:1: unclosed action");
	memset(&st, 0, sizeof(st));
	assert_int_equal(gaz_postfix_template_exec("{{ .Journal }}{{ .Journal }}", &d, out, 5, &st),
			 GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "too long"));
}

/* Regression (fuzz target protocol_names, docs/fuzzing.md): execution
 * found an action's "}}" with a scan of its own that knew "..", `..` but
 * not '..' quotes or comments, so a backquote inside either sent it past
 * the end of the template (heap-buffer-overflow under ASan), or to the
 * wrong "}}". Validation accepts all of these, as Go's parser does. */
static void test_postfix_template_exec_quotes(void **state)
{
	struct gaz_postfix_data d = {"a/b", 1024, 2048, INT64_C(1574201045123456789), 3};
	struct gaz_status st = {0};
	char out[256];
	/* The fuzzer's input, minus its selector byte. */
	static const char crash[] = "\xfb\xff\xff\xfe\xff/{{whth                      =      '`          }}/"
				    "                               =      '           }}/\x98";
	char *heap = strdup(crash); /* exactly sized, so ASan sees a read past it */

	(void)state;
	assert_non_null(heap);
	assert_int_equal(gaz_validate_postfix_template(heap, &st), 0);
	assert_int_equal(gaz_postfix_template_exec(heap, &d, out, sizeof(out), &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "unsupported action"));
	free(heap);

	/* A comment holding a backquote is skipped whole (Go: "a/b"). */
	memset(&st, 0, sizeof(st));
	assert_int_equal(gaz_postfix_template_exec("{{/* ` */}}{{ `a` }}/{{ .Journal }}", &d, out,
						   sizeof(out), &st), 0);
	assert_string_equal(out, "a/a/b");
	/* A character constant holding "}}" and a backquote is one action. */
	memset(&st, 0, sizeof(st));
	assert_int_equal(gaz_validate_postfix_template("x{{ '`' }}y", &st), 0);
	assert_int_equal(gaz_postfix_template_exec("x{{ '`' }}y", &d, out, sizeof(out), &st),
			 GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "unsupported action"));
}

static void test_postfix_template(void **state)
{
	static const struct {
		const char *tpl, *want;
	} cases[] = {
		{"", NULL},
		{"plain/text", NULL},
		{"date={{ .Spool.FirstAppendTime.Format \"2006-01-02\" }}", NULL},
		{"{{- .Spool.Begin -}}/x", NULL},
		{"{{/* a comment */}}x", NULL},
		{"{{if .Spool.Begin}}a{{else}}b{{end}}", NULL},
		{"{{ \"}}\" }}", NULL},
		{"a}}b", NULL},
		{"{{}}", "template: postfix:1: missing value for command"},
		{"{{ }}", "template: postfix:1: missing value for command"},
		{"{{-  -}}", "template: postfix:1: missing value for command"},
		{"x{{ .A", "template: postfix:1: unclosed action"},
		{"a\nb{{ .A", "template: postfix:2: unclosed action"},
		{"{{/* x }}", "template: postfix:1: unclosed comment"},
		{"{{/* x */ .A}}", "template: postfix:1: comment ends before closing delimiter"},
		{"{{ \"x }}", "template: postfix:1: unterminated quoted string"},
		{"{{ `x }}", "template: postfix:1: unterminated raw quoted string"},
		{"{{{ .A }}", "template: postfix:1: unexpected \"{\" in command"},
		{"{{if .A}}x", "template: postfix:1: unexpected EOF"},
		{"x{{end}}", "template: postfix:1: unexpected {{end}}"},
		{"{{else}}", "template: postfix:1: unexpected {{else}}"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		VCHECK(gaz_validate_postfix_template(cases[i].tpl, &st), cases[i].want);

	struct fixture f;

	fixture_init(&f);
	f.frag.path_postfix_template = "{{}}";
	VCHECK(gaz_validate_journal_spec(&f.spec, &st),
	       "Fragment.PathPostfixTemplate: template: postfix:1: missing value for command");
	fixture_release(&f);
}

static void test_store_urls(void **state)
{
	static const struct {
		const char *url, *want;
	} cases[] = {
		{"s3://bucket/", NULL},
		{"s3://bucket/prefix/", NULL},
		{"s3://bucket/?profile=p&endpoint=http://h:9000", NULL},
		{"gs://bucket/a/", NULL},
		{"azure://container/", NULL},
		{"file:///", NULL},
		{"file:///x/", NULL},
		{"azure-ad://tenant/account/container/", NULL},
		{"s3://bucket", "path component doesn't end in '/' ()"},
		{"s3://bucket/prefix", "path component doesn't end in '/' (/prefix)"},
		{"s3:bucket/", "missing bucket (s3:bucket/)"},
		{"s3:///x/", "missing bucket (s3:///x/)"},
		{"file://host/x/", "file scheme cannot have host (file://host/x/)"},
		{"file:x/", "path component doesn't end in '/' ()"},
		{"azure-ad:///account/container/", "missing tenant ID (azure-ad:///account/container/)"},
		{"azure-ad://tenant//container/", "missing storage account (azure-ad://tenant//container/)"},
		{"azure-ad://tenant/account/", "missing storage container (azure-ad://tenant/account/)"},
		{"azure-ad://tenant/account", "missing storage container (azure-ad://tenant/account)"},
		{"azure-ad://tenant", "missing storage account (azure-ad://tenant)"},
		{"ftp://host/x/", "invalid scheme (ftp)"},
		{"/x/", "not absolute (/x/)"},
		{"", "not absolute ()"},
		{"s3://b c/", "parse \"s3://b c/\": invalid character \" \" in host name"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		VCHECK(gaz_validate_fragment_store(cases[i].url, &st), cases[i].want);
}

static void test_media_types(void **state)
{
	static const struct {
		const char *mt, *want;
	} cases[] = {
		{"text/csv", NULL},
		{"application/x-protobuf-fixed", NULL},
		{" Text/CSV ", NULL},
		{"text/plain; charset=utf-8", NULL},
		{"text/plain; charset=\"utf-8\"", NULL},
		{"text/plain;", NULL},
		{"text", NULL},
		{"", "mime: no media type"},
		{"/csv", "mime: no media type"},
		{"text csv", "mime: expected slash after first token"},
		{"text/", "mime: expected token after slash"},
		{"text/csv/x", "mime: unexpected content after media subtype"},
		{"text/plain; charset", "mime: invalid media parameter"},
		{"text/plain; charset=\"utf-8", "mime: invalid media parameter"},
		{"text/plain;;", "mime: invalid media parameter"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		VCHECK(gaz_validate_media_type(cases[i].mt, &st), cases[i].want);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_and_name),
		cmocka_unit_test(test_replication_flags_rate_suspend),
		cmocka_unit_test(test_labels),
		cmocka_unit_test(test_fragment_length_codec),
		cmocka_unit_test(test_fragment_stores),
		cmocka_unit_test(test_fragment_intervals),
		cmocka_unit_test(test_postfix_template),
		cmocka_unit_test(test_postfix_template_exec),
		cmocka_unit_test(test_postfix_template_exec_quotes),
		cmocka_unit_test(test_store_urls),
		cmocka_unit_test(test_media_types),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
