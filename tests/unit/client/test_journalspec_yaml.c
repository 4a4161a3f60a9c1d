/*
 * test_journalspec_yaml.c - the journal YAML hierarchy (gazctl journals
 * apply / list -o yaml): the §9.2 example, inheritance of every field, label
 * union, strictness and tree-shape errors with their line numbers, hoisting
 * layout, and flatten(hoist(x)) == x over a dozen varied journals.
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
#include "gazette/journalspec_yaml.h"

#define SEC INT64_C(1000000000)

/* ---- helpers ---- */

static Protocol__ApplyRequest *parse_ok(const char *yaml)
{
	struct gaz_status st = {0};
	Protocol__ApplyRequest *req = NULL;
	int rc = gaz_journalspec_yaml_parse(yaml, strlen(yaml), &req, &st);

	if (rc)
		fail_msg("parse failed (%d): %s\n%s", rc, st.msg, yaml);
	assert_non_null(req);
	return req;
}

/* Parses `yaml`, which must fail with `msg` (exactly, or as a substring
 * when `exact` is 0). */
static void parse_fails(const char *yaml, int code, const char *msg, int exact)
{
	struct gaz_status st = {0};
	Protocol__ApplyRequest *req = (Protocol__ApplyRequest *)&st; /* sentinel */
	int rc = gaz_journalspec_yaml_parse(yaml, strlen(yaml), &req, &st);

	if (rc != code)
		fail_msg("rc %d (%s), want %d for:\n%s", rc, st.msg, code, yaml);
	assert_ptr_equal(req, (Protocol__ApplyRequest *)&st); /* untouched */
	assert_int_equal(st.code, code);
	if (exact ? strcmp(st.msg, msg) != 0 : strstr(st.msg, msg) == NULL)
		fail_msg("message \"%s\", want%s \"%s\"", st.msg, exact ? "" : " substring", msg);
}

static int64_t dur(const Google__Protobuf__Duration *d)
{
	int64_t ns = -1;

	assert_non_null(d);
	assert_int_equal(gaz_duration_from_pb(d, &ns, NULL), 0);
	return ns;
}

/* "a=1,b=,c=x" against the spec's labels, in order. */
static void check_labels(const Protocol__JournalSpec *s, const char *want)
{
	char buf[512] = "";

	assert_non_null(s->labels);
	for (size_t i = 0; i < s->labels->n_labels; i++) {
		size_t used = strlen(buf);

		snprintf(buf + used, sizeof(buf) - used, "%s%s=%s", i ? "," : "",
			 s->labels->labels[i]->name, s->labels->labels[i]->value);
		assert_false(s->labels->labels[i]->prefix);
	}
	assert_string_equal(buf, want);
}

static void check_stores(const Protocol__JournalSpec *s, const char *want)
{
	char buf[512] = "";

	for (size_t i = 0; i < s->fragment->n_stores; i++) {
		size_t used = strlen(buf);

		snprintf(buf + used, sizeof(buf) - used, "%s%s", i ? "," : "",
			 s->fragment->stores[i]);
	}
	assert_string_equal(buf, want);
}

static const Protocol__JournalSpec *upsert(const Protocol__ApplyRequest *req, size_t i,
					   const char *name, int64_t rev)
{
	const Protocol__ApplyRequest__Change *c;

	assert_true(i < req->n_changes);
	c = req->changes[i];
	assert_non_null(c->upsert);
	assert_string_equal(c->delete_, "");
	assert_string_equal(c->upsert->name, name);
	assert_int_equal(c->expect_mod_revision, rev);
	assert_non_null(c->upsert->fragment);
	return c->upsert;
}

static void deleted(const Protocol__ApplyRequest *req, size_t i, const char *name, int64_t rev)
{
	assert_true(i < req->n_changes);
	assert_null(req->changes[i]->upsert);
	assert_string_equal(req->changes[i]->delete_, name);
	assert_int_equal(req->changes[i]->expect_mod_revision, rev);
}

/* ---- flattening ---- */

static const char example[] =
	"name: examples/\n"
	"replication: 3\n"
	"labels:\n"
	"  - name: example-journals\n"
	"fragment:\n"
	"  length: 268435456\n"
	"  compression_codec: SNAPPY\n"
	"  stores:\n"
	"    - s3://examples/fragments/?profile=minio&endpoint=http%3A%2F%2Fminio%3A9000\n"
	"  refresh_interval: 1m0s\n"
	"  retention: 720h0m0s\n"
	"  flush_interval: 10m0s\n"
	"  path_postfix_template: date={{ .Spool.FirstAppendTime.Format \"2006-01-02\" }}\n"
	"children:\n"
	"  - name: examples/bike-share/\n"
	"    labels:\n"
	"      - name: content-type\n"
	"        value: application/x-ndjson\n"
	"    children:\n"
	"      - name: examples/bike-share/part-000\n"
	"        revision: 42          # expect ModRevision 42\n"
	"      - name: examples/bike-share/part-001\n"
	"        delete: true\n"
	"        revision: 43\n";

static void test_spec_example(void **state)
{
	Protocol__ApplyRequest *req = parse_ok(example);
	const Protocol__JournalSpec *s;

	(void)state;
	assert_int_equal(req->n_changes, 2);
	s = upsert(req, 0, "examples/bike-share/part-000", 42);
	assert_int_equal(s->replication, 3);
	check_labels(s, "content-type=application/x-ndjson,example-journals=");
	assert_int_equal(s->fragment->length, 268435456);
	assert_int_equal(s->fragment->compression_codec, PROTOCOL__COMPRESSION_CODEC__SNAPPY);
	check_stores(s, "s3://examples/fragments/?profile=minio&endpoint=http%3A%2F%2Fminio%3A9000");
	assert_int_equal(dur(s->fragment->refresh_interval), 60 * SEC);
	assert_int_equal(dur(s->fragment->retention), 720 * 3600 * SEC);
	assert_int_equal(dur(s->fragment->flush_interval), 600 * SEC);
	assert_string_equal(s->fragment->path_postfix_template,
			    "date={{ .Spool.FirstAppendTime.Format \"2006-01-02\" }}");
	assert_int_equal(s->flags, 0);
	assert_int_equal(s->max_append_rate, 0);
	assert_null(s->suspend);
	deleted(req, 1, "examples/bike-share/part-001", 43);
	gaz_journalspec_apply_free(req);
}

static const char inherit_yaml[] =
	"name: p/\n"
	"comment: every field set here\n"
	"replication: 3\n"
	"labels:\n"
	"- {name: a, value: \"1\"}\n"
	"- {name: a, value: \"2\"}\n"
	"- {name: b, value: x}\n"
	"- {name: c}\n"
	"fragment:\n"
	"  length: 1024\n"
	"  compression_codec: GZIP\n"
	"  stores: [\"s3://p/\"]\n"
	"  refresh_interval: 30s\n"
	"  retention: 24h\n"
	"  flush_interval: 60000000000\n"
	"  path_postfix_template: \"{{.Spool.Begin}}\"\n"
	"flags: O_RDONLY\n"
	"max_append_rate: 500\n"
	"suspend: {level: FULL, offset: 9}\n"
	"children:\n"
	"- name: p/inherit\n"
	"- name: p/override\n"
	"  replication: 1\n"
	"  labels:\n"
	"  - {name: a, value: \"9\"}\n"
	"  - {name: d, value: \"4\"}\n"
	"  fragment:\n"
	"    length: 2048\n"
	"    compression_codec: 3\n"
	"    stores: [\"gs://o/\", \"s3://o2/\"]\n"
	"    refresh_interval: 2m\n"
	"    retention: \"1h\"\n"
	"    flush_interval: 5m0s\n"
	"    path_postfix_template: o\n"
	"  flags: 4\n"
	"  max_append_rate: 7\n"
	"  suspend: {level: 1}\n"
	"- name: p/sub/\n"
	"  fragment: {length: 4096}\n"
	"  delete: true\n"
	"  children:\n"
	"  - name: p/sub/deleted\n"
	"    revision: 5\n"
	"  - name: p/sub/kept\n"
	"    delete: false\n"
	"    revision: -1\n";

static void test_inherit_every_field(void **state)
{
	Protocol__ApplyRequest *req = parse_ok(inherit_yaml);
	const Protocol__JournalSpec *s;

	(void)state;
	assert_int_equal(req->n_changes, 4);
	s = upsert(req, 0, "p/inherit", 0);
	assert_int_equal(s->replication, 3);
	check_labels(s, "a=1,a=2,b=x,c=");
	assert_int_equal(s->fragment->length, 1024);
	assert_int_equal(s->fragment->compression_codec, PROTOCOL__COMPRESSION_CODEC__GZIP);
	check_stores(s, "s3://p/");
	assert_int_equal(dur(s->fragment->refresh_interval), 30 * SEC);
	assert_int_equal(dur(s->fragment->retention), 24 * 3600 * SEC);
	assert_int_equal(dur(s->fragment->flush_interval), 60 * SEC);
	assert_string_equal(s->fragment->path_postfix_template, "{{.Spool.Begin}}");
	assert_int_equal(s->flags, PROTOCOL__JOURNAL_SPEC__FLAG__O_RDONLY);
	assert_int_equal(s->max_append_rate, 500);
	assert_null(s->suspend); /* suspend is never inherited */

	s = upsert(req, 1, "p/override", 0);
	assert_int_equal(s->replication, 1);
	check_labels(s, "a=9,b=x,c=,d=4"); /* child's "a" wins; b, c added */
	assert_int_equal(s->fragment->length, 2048);
	assert_int_equal(s->fragment->compression_codec, PROTOCOL__COMPRESSION_CODEC__ZSTANDARD);
	check_stores(s, "gs://o/,s3://o2/");
	assert_int_equal(dur(s->fragment->refresh_interval), 120 * SEC);
	assert_int_equal(dur(s->fragment->retention), 3600 * SEC);
	assert_int_equal(dur(s->fragment->flush_interval), 300 * SEC);
	assert_string_equal(s->fragment->path_postfix_template, "o");
	assert_int_equal(s->flags, PROTOCOL__JOURNAL_SPEC__FLAG__O_RDWR);
	assert_int_equal(s->max_append_rate, 7);
	assert_non_null(s->suspend);
	assert_int_equal(s->suspend->level, PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__PARTIAL);
	assert_int_equal(s->suspend->offset, 0);

	deleted(req, 2, "p/sub/deleted", 5); /* delete inherited from p/sub/ */
	s = upsert(req, 3, "p/sub/kept", -1); /* explicit delete: false wins */
	assert_int_equal(s->fragment->length, 4096);
	assert_int_equal(s->replication, 3); /* through two levels */
	check_labels(s, "a=1,a=2,b=x,c=");
	check_stores(s, "s3://p/");
	assert_null(s->suspend);
	gaz_journalspec_apply_free(req);
}

static void test_label_union_across_levels(void **state)
{
	Protocol__ApplyRequest *req = parse_ok(
		"labels: [{name: m, value: \"0\"}, {name: z, value: top}]\n"
		"children:\n"
		"- name: x/\n"
		"  labels: [{name: a, value: \"1\"}, {name: m, value: \"1\"}, {name: m, value: \"2\"}]\n"
		"  children:\n"
		"  - name: x/j\n"
		"    labels: [{name: b, value: \"2\"}, {name: z, value: low}]\n"
		"- name: y\n");

	(void)state;
	assert_int_equal(req->n_changes, 2);
	check_labels(upsert(req, 0, "x/j", 0), "a=1,b=2,m=1,m=2,z=low");
	check_labels(upsert(req, 1, "y", 0), "m=0,z=top");
	gaz_journalspec_apply_free(req);
}

static void test_scalars_and_nulls(void **state)
{
	Protocol__ApplyRequest *req = parse_ok(
		"name: ''\n"
		"fragment: ~\n"
		"labels:\n"
		"suspend: null\n"
		"children:\n"
		"- name: 2024/j\n"
		"  replication: 0x3\n"
		"  max_append_rate: +1048576\n"
		"  flags: NOT_SPECIFIED\n"
		"  delete: no\n"
		"  fragment:\n"
		"    refresh_interval: 1500000000\n"
		"    retention: 0\n"
		"    flush_interval: \"2µs\"\n"
		"    stores: [s3://a/, 'true']\n"
		"  suspend: {level: 2, offset: 10}\n"
		"- name: 2024/k\n"
		"  flags: 2\n"
		"  suspend: {level: NONE}\n");
	const Protocol__JournalSpec *s;

	(void)state;
	assert_int_equal(req->n_changes, 2);
	s = upsert(req, 0, "2024/j", 0);
	assert_int_equal(s->replication, 3);
	assert_int_equal(s->max_append_rate, 1048576);
	assert_int_equal(dur(s->fragment->refresh_interval), 1500000000);
	assert_int_equal(dur(s->fragment->retention), 0);
	assert_int_equal(dur(s->fragment->flush_interval), 2000);
	check_stores(s, "s3://a/,true");
	assert_int_equal(s->suspend->level, PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__FULL);
	assert_int_equal(s->suspend->offset, 10);
	s = upsert(req, 1, "2024/k", 0);
	assert_int_equal(s->flags, PROTOCOL__JOURNAL_SPEC__FLAG__O_WRONLY);
	assert_non_null(s->suspend); /* present, if all zero */
	assert_int_equal(s->suspend->level, 0);
	gaz_journalspec_apply_free(req);
}

/* A lone journal is its own root; later YAML documents are ignored. */
static void test_single_journal(void **state)
{
	Protocol__ApplyRequest *req = parse_ok("name: solo\nreplication: 2\n---\nname: ignored\n");

	(void)state;
	assert_int_equal(req->n_changes, 1);
	assert_int_equal(upsert(req, 0, "solo", 0)->replication, 2);
	gaz_journalspec_apply_free(req);
}

/* ---- strictness and shape errors ---- */

static void test_errors_keys(void **state)
{
	(void)state;
	parse_fails("name: a/\nreplicaton: 3\nchildren: [{name: a/b}]\n", GAZ_EINVAL,
		    "line 2: unknown key \"replicaton\"", 1);
	parse_fails("name: a/\nchildren:\n- name: a/b\n  fragment:\n    lenght: 3\n", GAZ_EINVAL,
		    "line 5: unknown key \"lenght\" in fragment", 1);
	parse_fails("name: a\nlabels:\n- {name: l, prefix: true}\n", GAZ_EINVAL,
		    "line 3: unknown key \"prefix\" in label", 1);
	parse_fails("name: a\nsuspend: {level: FULL, offst: 1}\n", GAZ_EINVAL,
		    "line 2: unknown key \"offst\" in suspend", 1);
	parse_fails("name: a/\nchildren: [{name: a/b}]\nname: b/\n", GAZ_EINVAL,
		    "line 3: duplicate key \"name\"", 1);
	parse_fails("- name: a\n", GAZ_EINVAL, "line 1: want a mapping, not a list", 1);
	parse_fails("name: a\nfragment: 3\n", GAZ_EINVAL,
		    "line 2: bad value for \"fragment\": want a mapping", 1);
	parse_fails("name: a\nlabels: {name: x}\n", GAZ_EINVAL,
		    "line 2: bad value for \"labels\": want a list", 1);
	parse_fails("name: [a]\n", GAZ_EINVAL, "line 1: bad value for \"name\": want a scalar", 1);
	parse_fails("name: a\nlabels:\n- {name: b}\n- {name: a}\n", GAZ_EINVAL,
		    "line 4: labels are not in sorted, unique order (\"a\" = \"\" after \"b\" = \"\")", 1);
	parse_fails("name: a\nlabels:\n- {name: b}\n- {name: b}\n", GAZ_EINVAL,
		    "line 4: labels are not in sorted, unique order", 0);
}

static void test_errors_values(void **state)
{
	(void)state;
	parse_fails("name: a/\nchildren:\n- name: a/b\n  fragment: {refresh_interval: 1x}\n",
		    GAZ_EINVAL, "line 4: bad value for \"refresh_interval\": ", 0);
	parse_fails("name: a\nfragment:\n  retention: \"10\"\n", GAZ_EINVAL,
		    "line 3: bad value for \"retention\": ", 0);
	parse_fails("name: a\nfragment: {compression_codec: LZ4}\n", GAZ_EINVAL,
		    "line 2: bad value for \"compression_codec\": unknown name \"LZ4\" (want INVALID, "
		    "NONE, GZIP, ZSTANDARD, SNAPPY, GZIP_OFFLOAD_DECOMPRESSION)", 1);
	parse_fails("name: a\nflags: O_RDWRX\n", GAZ_EINVAL,
		    "line 2: bad value for \"flags\": unknown name \"O_RDWRX\"", 0);
	parse_fails("name: a\nflags: -1\n", GAZ_EINVAL,
		    "line 2: bad value for \"flags\": -1 is out of range [0, 4294967295]", 1);
	parse_fails("name: a\nsuspend:\n  level: HALF\n", GAZ_EINVAL,
		    "line 3: bad value for \"level\": unknown name \"HALF\" (want NONE, PARTIAL, FULL)", 1);
	parse_fails("name: a\nreplication: \"3\"\n", GAZ_EINVAL,
		    "line 2: bad value for \"replication\": \"3\" is not an integer", 1);
	parse_fails("name: a\nreplication: three\n", GAZ_EINVAL,
		    "line 2: bad value for \"replication\": \"three\" is not an integer", 1);
	parse_fails("name: a\nreplication: 4294967296\n", GAZ_EINVAL,
		    "line 2: bad value for \"replication\": 4294967296 is out of range "
		    "[-2147483648, 2147483647]", 1);
	parse_fails("name: a\nrevision: 99999999999999999999\n", GAZ_EINVAL,
		    "line 2: bad value for \"revision\": 99999999999999999999 is out of range", 0);
	parse_fails("name: a\ndelete: maybe\n", GAZ_EINVAL,
		    "line 2: bad value for \"delete\": \"maybe\" is not a boolean", 1);
	parse_fails("name: a\ndelete: \"true\"\n", GAZ_EINVAL, "is not a boolean", 0);
	parse_fails("name: \"a\\0b\"\n", GAZ_EINVAL,
		    "line 1: bad value for \"name\": contains a NUL byte", 1);
}

static void test_errors_yaml(void **state)
{
	(void)state;
	parse_fails("name: [a\n", GAZ_EINVAL,
		    "line 2 column 1: did not find expected ',' or ']' "
		    "(while parsing a flow sequence at line 1)", 1);
	parse_fails("name: a/\n  x: 1\n", GAZ_EINVAL,
		    "line 2 column 4: mapping values are not allowed in this context", 1);
	parse_fails("", GAZ_EINVAL, "no journal specs: the document is empty", 1);
	parse_fails("# only a comment\n", GAZ_EINVAL, "the document is empty", 0);
	parse_fails("name: *nope\n", GAZ_EINVAL, "line 1 column 7: found undefined alias", 0);
}

static void test_errors_tree(void **state)
{
	(void)state;
	parse_fails("name: a/\nreplication: 3\n", GAZ_EINVAL,
		    "line 1: directory \"a/\" has no children", 1);
	parse_fails("replication: 3\nchildren: []\n", GAZ_EINVAL,
		    "line 1: directory \"\" has no children", 1);
	parse_fails("name: a/\nchildren:\n- name: a/x\n- name: b/y\n", GAZ_EINVAL,
		    "line 4: child \"b/y\" is not under directory \"a/\"", 1);
	parse_fails("name: a/\nchildren:\n- name: a/2\n- name: a/1\n", GAZ_EINVAL,
		    "line 4: children of \"a/\" are not in strictly ascending order "
		    "(\"a/1\" after \"a/2\")", 1);
	parse_fails("name: a/\nchildren:\n- name: a/1\n- name: a/1\n", GAZ_EINVAL,
		    "line 4: children of \"a/\" are not in strictly ascending order", 0);
	parse_fails("name: a\nchildren:\n- name: a/b\n", GAZ_EINVAL,
		    "line 1: journal \"a\" has children (only directories, named \"\" or ending "
		    "in '/', may)", 1);
	parse_fails("name: a/\nrevision: 3\nchildren: [{name: a/b}]\n", GAZ_EINVAL,
		    "line 1: directory \"a/\" has revision 3 (only journals may)", 1);
	parse_fails("name: a/\nchildren:\n- name: a/b/\n  children:\n  - name: a/b/c/\n", GAZ_EINVAL,
		    "line 5: directory \"a/b/c/\" has no children", 1);
}

/* Aliases may not loop or multiply the document without bound. */
static void test_errors_aliases(void **state)
{
	char bomb[2048] = "name: ''\nchildren:\n- &l0 {name: a}\n";

	(void)state;
	parse_fails("&a {name: x/, children: [*a]}\n", GAZ_EINVAL,
		    "children nest deeper than 256", 0);
	for (int i = 1; i <= 8; i++) {
		size_t used = strlen(bomb);

		snprintf(bomb + used, sizeof(bomb) - used,
			 "- &l%d {name: b%d/, children: [*l%d,*l%d,*l%d,*l%d,*l%d,*l%d,*l%d,*l%d,*l%d,*l%d]}\n",
			 i, i, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
	}
	parse_fails(bomb, GAZ_ERANGE, "document too large", 0);
}

/* ---- hoisting ---- */

/* A test journal. labels "a=1,b=2"; stores comma-separated. */
struct tj {
	const char *name;
	int64_t rev;
	int32_t repl;
	const char *labels;
	int64_t length;
	int codec;
	const char *stores;
	int64_t refresh, retention, flush;
	const char *postfix;
	uint32_t flags;
	int64_t rate;
	int susp, level;
	int64_t off;
};

static char **split(const char *list, char sep, size_t *n)
{
	char **v = calloc(16, sizeof(*v));
	const char *p = list;

	*n = 0;
	while (p && *p) {
		const char *e = strchr(p, sep);
		size_t len = e ? (size_t)(e - p) : strlen(p);

		v[(*n)++] = strndup(p, len);
		p = e ? e + 1 : NULL;
	}
	return v;
}

static Protocol__JournalSpec *mkspec(const struct tj *t)
{
	Protocol__JournalSpec *s = calloc(1, sizeof(*s));
	Protocol__JournalSpec__Fragment *f = calloc(1, sizeof(*f));
	char **pairs;
	size_t n;

	protocol__journal_spec__init(s);
	protocol__journal_spec__fragment__init(f);
	s->name = strdup(t->name);
	s->replication = t->repl;
	s->flags = t->flags;
	s->max_append_rate = t->rate;
	s->labels = calloc(1, sizeof(*s->labels));
	protocol__label_set__init(s->labels);
	pairs = split(t->labels, ',', &n);
	s->labels->labels = calloc(n + 1, sizeof(Protocol__Label *));
	for (size_t i = 0; i < n; i++) {
		Protocol__Label *l = calloc(1, sizeof(*l));
		char *eq = strchr(pairs[i], '=');

		protocol__label__init(l);
		l->name = strndup(pairs[i], (size_t)(eq - pairs[i]));
		l->value = strdup(eq + 1);
		s->labels->labels[s->labels->n_labels++] = l;
		free(pairs[i]);
	}
	free(pairs);
	s->fragment = f;
	f->length = t->length;
	f->compression_codec = (Protocol__CompressionCodec)t->codec;
	f->stores = split(t->stores, ',', &f->n_stores);
	f->refresh_interval = gaz_duration_new_pb(t->refresh);
	f->retention = gaz_duration_new_pb(t->retention);
	f->flush_interval = gaz_duration_new_pb(t->flush);
	f->path_postfix_template = strdup(t->postfix ? t->postfix : "");
	if (t->susp) {
		s->suspend = calloc(1, sizeof(*s->suspend));
		protocol__journal_spec__suspend__init(s->suspend);
		s->suspend->level = (Protocol__JournalSpec__Suspend__Level)t->level;
		s->suspend->offset = t->off;
	}
	return s;
}

static char *emit_ok(const struct tj *t, size_t n)
{
	struct gaz_journal_rev js[32];
	struct gaz_status st = {0};
	char *out = NULL;
	size_t len = 0;
	int rc;

	assert_true(n <= 32);
	for (size_t i = 0; i < n; i++) {
		js[i].spec = mkspec(&t[i]);
		js[i].mod_revision = t[i].rev;
	}
	rc = gaz_journalspec_yaml_emit(js, n, &out, &len, &st);
	for (size_t i = 0; i < n; i++)
		protocol__journal_spec__free_unpacked((Protocol__JournalSpec *)js[i].spec, NULL);
	if (rc)
		fail_msg("emit failed (%d): %s", rc, st.msg);
	assert_int_equal(len, strlen(out));
	return out;
}

static void test_hoist_layout(void **state)
{
	static const struct tj t[] = {
		{.name = "a/b/1", .rev = 1, .repl = 1},
		{.name = "a/b/2", .rev = 2, .repl = 1},
		{.name = "a/c", .rev = 3, .repl = 1},
		{.name = "b/d", .rev = 4, .repl = 1},
	};
	char *y = emit_ok(t, 4);

	(void)state;
	assert_string_equal(y, "replication: 1\n"
			       "children:\n"
			       "- name: a/\n"
			       "  children:\n"
			       "  - name: a/b/\n"
			       "    children:\n"
			       "    - name: a/b/1\n"
			       "      revision: 1\n"
			       "    - name: a/b/2\n"
			       "      revision: 2\n"
			       "  - name: a/c\n"
			       "    revision: 3\n"
			       "- name: b/d\n"
			       "  revision: 4\n");
	free(y);
}

/* Labels hoist only when a name's value set is identical; suspend never. */
static void test_hoist_labels_and_suspend(void **state)
{
	static const struct tj t[] = {
		{.name = "x/1", .rev = 1, .labels = "a=1,a=2,b=1", .susp = 1, .level = 2},
		{.name = "x/2", .rev = 2, .labels = "a=1,b=1", .susp = 1, .level = 2},
	};
	char *y = emit_ok(t, 2);

	(void)state;
	assert_string_equal(y, "name: x/\n"
			       "labels:\n"
			       "- name: b\n"
			       "  value: \"1\"\n"
			       "children:\n"
			       "- name: x/1\n"
			       "  labels:\n"
			       "  - name: a\n"
			       "    value: \"1\"\n"
			       "  - name: a\n"
			       "    value: \"2\"\n"
			       "  suspend:\n"
			       "    level: FULL\n"
			       "  revision: 1\n"
			       "- name: x/2\n"
			       "  labels:\n"
			       "  - name: a\n"
			       "    value: \"1\"\n"
			       "  suspend:\n"
			       "    level: FULL\n"
			       "  revision: 2\n");
	free(y);
}

static void test_hoist_single_and_empty(void **state)
{
	static const struct tj one = {
		.name = "solo/j", .rev = 9, .repl = 3, .codec = 4, .refresh = 60 * SEC,
		.retention = 720 * 3600 * SEC, .flags = 1, .stores = "s3://b/",
	};
	struct gaz_status st = {0};
	char *y = emit_ok(&one, 1);

	(void)state;
	assert_string_equal(y, "name: solo/j\n"
			       "replication: 3\n"
			       "fragment:\n"
			       "  compression_codec: SNAPPY\n"
			       "  stores:\n"
			       "  - s3://b/\n"
			       "  refresh_interval: 1m0s\n"
			       "  retention: 720h0m0s\n"
			       "flags: O_RDONLY\n"
			       "revision: 9\n");
	free(y);
	y = emit_ok(NULL, 0);
	assert_string_equal(y, "{}\n");
	free(y);
	assert_int_equal(gaz_journalspec_yaml_emit(NULL, 0, &y, NULL, &st), 0);
	free(y);
}

static void test_hoist_rejects_bad_input(void **state)
{
	static const struct tj a = {.name = "b"}, b = {.name = "a"};
	Protocol__JournalSpec *sa = mkspec(&a), *sb = mkspec(&b);
	struct gaz_journal_rev js[2] = {{sa, 1}, {sb, 2}};
	struct gaz_status st = {0};
	char *out = NULL;

	(void)state;
	assert_int_equal(gaz_journalspec_yaml_emit(js, 2, &out, NULL, &st), GAZ_EINVAL);
	assert_string_equal(st.msg, "journals are not sorted by name (\"a\" after \"b\")");
	js[1].spec = sa; /* a duplicate is not strictly ascending either */
	gaz_status_clear(&st);
	assert_int_equal(gaz_journalspec_yaml_emit(js, 2, &out, NULL, &st), GAZ_EINVAL);
	assert_string_equal(st.msg, "journals are not sorted by name (\"b\" after \"b\")");
	js[1].spec = NULL;
	gaz_status_clear(&st);
	assert_int_equal(gaz_journalspec_yaml_emit(js, 2, &out, NULL, &st), GAZ_EINVAL);
	assert_string_equal(st.msg, "journal 1 has no spec");
	assert_null(out);
	protocol__journal_spec__free_unpacked(sa, NULL);
	protocol__journal_spec__free_unpacked(sb, NULL);
}

/* A dozen journals, varied so that every field hoists somewhere and differs
 * somewhere, including values a YAML reader would mistake for non-strings. */
static const struct tj dozen[] = {
	{"a/b/c/1", 11, 3, "app=x,tier=1", 1 << 28, 4, "s3://bkt/a/", 60 * SEC, 720 * 3600 * SEC,
	 600 * SEC, "date={{ .Spool.FirstAppendTime.Format \"2006-01-02\" }}", 0, 0, 0, 0, 0},
	{"a/b/c/2", 12, 3, "app=x,tier=2", 1 << 28, 4, "s3://bkt/a/", 60 * SEC, 720 * 3600 * SEC,
	 600 * SEC, "date={{ .Spool.FirstAppendTime.Format \"2006-01-02\" }}", 0, 0, 0, 0, 0},
	{"a/b/d", 13, 2, "app=x", 1 << 28, 4, "s3://bkt/a/", 60 * SEC, 720 * 3600 * SEC, 600 * SEC,
	 NULL, 0, 0, 1, 1, 100},
	{"a/b/e/f/g", 14, 3, "app=x,app=y", 1 << 28, 2, "s3://bkt/a/", 60 * SEC, 0, 0, NULL, 0, 0,
	 0, 0, 0},
	{"a/x", 15, 3, "", 1 << 28, 4, "s3://bkt/a/,gs://other/", 60 * SEC, 720 * 3600 * SEC,
	 600 * SEC, NULL, 1, 1000, 0, 0, 0},
	{"a/y", 16, 3, "app=x", 1 << 20, 4, "s3://bkt/a/", 60 * SEC, 720 * 3600 * SEC, 0, NULL,
	 0, 0, 1, 0, 0},
	{"b/1", 17, 1, "", 0, 3, "", 30 * SEC, 0, 0, NULL, 0, 0, 0, 0, 0},
	{"b/2", 18, 1, "", 0, 3, "", 30 * SEC, 0, 0, NULL, 2, 0, 1, 2, 7},
	{"b/3/deep/er/journal", 19, 1, "", 0, 3, "", 1500 * 1000000, 1, 0, NULL, 0, 0, 0, 0, 0},
	{"c", 20, 5, "z=", 1024, 1, "file:///tmp/x/", SEC, 0, 60 * SEC, "123", 4, 5, 0, 0, 0},
	{"d/e", 21, 0, "", 0, 0, "", 0, 0, 0, NULL, 0, 0, 0, 0, 0},
	{"d/f", 22, 4, "content-type=application/x-ndjson,k=null,k2=~,k3=true,k4=-1", 1024, 5,
	 "s3://x/?a=1&b=2", 24 * 3600 * SEC, -SEC, 60 * SEC, ": colon #hash", 0, 0, 0, 0, 0},
	{"d/g h", 23, 4, "k=yes", 1024, 5, "'quoted'", 1, 1, 1, "\"dq\" and\ttab", 0, 0, 0, 0, 0},
};

static void test_round_trip(void **state)
{
	size_t n = sizeof(dozen) / sizeof(dozen[0]);
	Protocol__ApplyRequest *req;
	char *y = emit_ok(dozen, n);

	(void)state;
	req = parse_ok(y);
	assert_int_equal(req->n_changes, n);
	for (size_t i = 0; i < n; i++) {
		Protocol__JournalSpec *want = mkspec(&dozen[i]);
		const Protocol__JournalSpec *got = upsert(req, i, dozen[i].name, dozen[i].rev);
		size_t wl = protocol__journal_spec__get_packed_size(want);
		size_t gl = protocol__journal_spec__get_packed_size(got);
		uint8_t *wb = malloc(wl), *gb = malloc(gl);

		protocol__journal_spec__pack(want, wb);
		protocol__journal_spec__pack(got, gb);
		if (wl != gl || memcmp(wb, gb, wl))
			fail_msg("journal %s differs after the round trip:\n%s", dozen[i].name, y);
		free(wb);
		free(gb);
		protocol__journal_spec__free_unpacked(want, NULL);
	}
	/* Hoisting did hoist: shared fields sit on the deepest common directory
	 * (a/b/), one field even on a/, and a journal matching none is bare. */
	assert_non_null(strstr(y, "- name: a/\n  fragment:\n    refresh_interval: 1m0s\n"));
	assert_non_null(strstr(y, "  - name: a/b/\n    fragment:\n      length: 268435456\n"
				  "      stores:\n      - s3://bkt/a/\n    children:\n"));
	assert_non_null(strstr(y, "\n  - name: d/e\n    revision: 21\n"));
	assert_non_null(strstr(y, "\n    suspend: {}\n    revision: 16\n"));
	gaz_journalspec_apply_free(req);
	free(y);
}

static void test_emit_list(void **state)
{
	Protocol__ListResponse resp = PROTOCOL__LIST_RESPONSE__INIT;
	Protocol__ListResponse__Journal j[2] = {PROTOCOL__LIST_RESPONSE__JOURNAL__INIT,
						PROTOCOL__LIST_RESPONSE__JOURNAL__INIT};
	Protocol__ListResponse__Journal *jp[2] = {&j[0], &j[1]};
	struct gaz_status st = {0};
	char *y = NULL;

	(void)state;
	j[0].spec = mkspec(&dozen[6]);
	j[0].mod_revision = 70;
	j[1].spec = mkspec(&dozen[7]);
	j[1].mod_revision = 80;
	resp.journals = jp;
	resp.n_journals = 2;
	assert_int_equal(gaz_journalspec_yaml_emit_list(&resp, &y, NULL, &st), 0);
	assert_string_equal(y, "name: b/\n"
			       "replication: 1\n"
			       "fragment:\n"
			       "  compression_codec: ZSTANDARD\n"
			       "  refresh_interval: 30s\n"
			       "children:\n"
			       "- name: b/1\n"
			       "  revision: 70\n"
			       "- name: b/2\n"
			       "  flags: O_WRONLY\n"
			       "  suspend:\n"
			       "    level: FULL\n"
			       "    offset: 7\n"
			       "  revision: 80\n");
	free(y);
	protocol__journal_spec__free_unpacked(j[0].spec, NULL);
	protocol__journal_spec__free_unpacked(j[1].spec, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spec_example),
		cmocka_unit_test(test_inherit_every_field),
		cmocka_unit_test(test_label_union_across_levels),
		cmocka_unit_test(test_scalars_and_nulls),
		cmocka_unit_test(test_single_journal),
		cmocka_unit_test(test_errors_keys),
		cmocka_unit_test(test_errors_values),
		cmocka_unit_test(test_errors_yaml),
		cmocka_unit_test(test_errors_tree),
		cmocka_unit_test(test_errors_aliases),
		cmocka_unit_test(test_hoist_layout),
		cmocka_unit_test(test_hoist_labels_and_suspend),
		cmocka_unit_test(test_hoist_single_and_empty),
		cmocka_unit_test(test_hoist_rejects_bad_input),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_emit_list),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
