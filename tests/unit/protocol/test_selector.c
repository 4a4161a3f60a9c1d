/*
 * test_selector.c - the gazctl `-l` selector grammar (§3.3): parse, the
 * canonical format, and errors. Expected strings are Gazette's
 * ParseLabelSelector / LabelSelector.String outputs for the same inputs.
 */
#include "vcheck.h"

#include <stdlib.h>

#include "protocol/labels.h"
#include "protocol/validate.h"

static void test_parse_format(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"", ""},
		{"kk=v", "kk=v"},
		{"kk==v", "kk=v"},
		{"kk = v", "kk=v"},
		{"kk != v", "kk!=v"},
		{"kk!=v", "kk!=v"},
		{"kk", "kk"},
		{"!kk", "!kk"},
		{"! kk", "!kk"},
		{"kk in (a,b)", "kk in (a,b)"},
		{"kk in (b, a)", "kk in (a,b)"},
		{"kk in(a)", "kk=a"},
		{"kk notin (a,b)", "kk notin (a,b)"},
		{"kk not in (a, b)", "kk notin (a,b)"},
		{"kk notin(a)", "kk!=a"},
		{"name:prefix=foo/", "name:prefix=foo/"},
		{"kk:prefix in (a/,b/)", "kk:prefix in (a/,b/)"},
		{"!kk:prefix", "!kk:prefix"},
		{"env in (production, qa), tier not in (frontend,backend), partition",
		 "env in (production,qa),partition,tier notin (backend,frontend)"},
		{"topic in (topic/one, topic/two), name:prefix=my/journal/prefix",
		 "name:prefix=my/journal/prefix,topic in (topic/one,topic/two)"},
		{"aa=1,bb=2,", "aa=1,bb=2"},
		{"aa=1 , bb=2", "aa=1,bb=2"},
		{"aa=", "aa"},
		{"aa=,bb", "aa,bb"},
		{"bb=2,aa=1", "aa=1,bb=2"},
		{"aa=1,aa=2", "aa in (1,2)"},
		{"kk in (a),", "kk=a"},
		{"kk == =v", "kk==v"},
		{"\xc3\xa9\x31=2", "\xc3\xa9\x31=2"}, /* é1: 2 runes */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct gaz_status st = {0};
		Protocol__LabelSelector *sel = NULL;
		char *out = NULL;

		if (gaz_selector_parse(cases[i].in, &sel, &st))
			fail_msg("\"%s\": %s", cases[i].in, st.msg);
		assert_int_equal(gaz_validate_selector(sel, &st), 0);
		assert_int_equal(gaz_selector_format(sel, &out, &st), 0);
		if (strcmp(out, cases[i].out))
			fail_msg("\"%s\": formatted \"%s\", want \"%s\"", cases[i].in, out, cases[i].out);
		free(out);
		gaz_selector_free(sel);
	}
}

static void test_parse_structure(void **state)
{
	struct gaz_status st = {0};
	Protocol__LabelSelector *sel = NULL;

	(void)state;
	assert_int_equal(gaz_selector_parse("bb:prefix=x/,aa in (2,1),!cc,dd!=4", &sel, &st), 0);
	assert_int_equal(sel->include->n_labels, 3);
	assert_string_equal(sel->include->labels[0]->name, "aa");
	assert_string_equal(sel->include->labels[0]->value, "1");
	assert_string_equal(sel->include->labels[1]->value, "2");
	assert_string_equal(sel->include->labels[2]->name, "bb");
	assert_true(sel->include->labels[2]->prefix);
	assert_int_equal(sel->exclude->n_labels, 2);
	assert_string_equal(sel->exclude->labels[0]->name, "cc");
	assert_string_equal(sel->exclude->labels[0]->value, "");
	assert_string_equal(sel->exclude->labels[1]->value, "4");
	gaz_selector_free(sel);
	gaz_selector_free(NULL);
}

static int parse_only(const char *s, struct gaz_status *st)
{
	Protocol__LabelSelector *sel = (Protocol__LabelSelector *)1;
	int rc = gaz_selector_parse(s, &sel, st);

	if (rc)
		assert_null(sel);
	gaz_selector_free(sel);
	return rc;
}

static void test_parse_errors(void **state)
{
	char big[1100];

	(void)state;
	VCHECK(parse_only("k=v", &st), "could not match \"k=v\" to a label selector expression");
	VCHECK(parse_only("kk  = v", &st), "could not match \"kk  = v\" to a label selector expression");
	VCHECK(parse_only("kk=v  ", &st), "could not match \"kk=v  \" to a label selector expression");
	VCHECK(parse_only("a b", &st), "could not match \"a b\" to a label selector expression");
	VCHECK(parse_only("kk in ()", &st), "could not match \"kk in ()\" to a label selector expression");
	VCHECK(parse_only("kk in (a", &st), "could not match \"kk in (a\" to a label selector expression");
	VCHECK(parse_only("kk in (a b)", &st),
	       "parsing \"kk in (a b)\": could not match \"a b\" to a label selector set expression");
	VCHECK(parse_only("kk in (a;b)", &st),
	       "parsing \"kk in (a;b)\": could not match \"a;b\" to a label selector set expression");
	VCHECK(parse_only("kk=v;", &st), "could not match \"kk=v;\" to a label selector expression");
	VCHECK(parse_only(",", &st), "could not match \",\" to a label selector expression");
	VCHECK(parse_only("kk=v,,", &st), "could not match \",\" to a label selector expression");
	VCHECK(parse_only("kk=a b", &st), "could not match \"kk=a b\" to a label selector expression");
	VCHECK(parse_only("kk:prefix:prefix=a", &st),
	       "could not match \"kk:prefix:prefix=a\" to a label selector expression");
	VCHECK(parse_only("aa in (1,,2)", &st),
	       "Include: Label has empty & non-empty values (index 1; label aa value 1)");
	VCHECK(parse_only("aa:prefix=a,aa=a", &st),
	       "Include: Labels not in unique, sorted order (index 1; label aa value a <= a)");
	snprintf(big, sizeof(big), "aa=%s", rep('v', 1025));
	VCHECK(parse_only(big, &st),
	       "Include.Labels[0].Value: invalid length (1025; expected 0 <= length <= 1024)");
	snprintf(big, sizeof(big), "%s=1", rep('k', 65));
	VCHECK(parse_only(big, &st),
	       "Include.Labels[0].Name: invalid length (65; expected 2 <= length <= 64)");
}

static void test_format_built(void **state)
{
	Protocol__LabelSelector *sel = gaz_selector_new();
	struct gaz_status st = {0};
	char *out = NULL;

	(void)state;
	assert_non_null(sel);
	assert_int_equal(gaz_selector_format(sel, &out, &st), 0);
	assert_string_equal(out, "");
	free(out);
	assert_int_equal(gaz_labelset_add(sel->exclude, "zz", ""), 0);
	assert_int_equal(gaz_selector_format(sel, &out, &st), 0);
	assert_string_equal(out, "!zz");
	free(out);
	assert_int_equal(gaz_labelset_add(sel->include, "aa:prefix", "p/"), 0);
	assert_int_equal(gaz_labelset_add(sel->include, "aa", "q"), 0);
	assert_int_equal(gaz_selector_format(sel, &out, &st), 0);
	assert_string_equal(out, "aa=q,aa:prefix=p/,!zz");
	free(out);
	assert_int_equal(gaz_selector_format(NULL, &out, &st), 0);
	assert_string_equal(out, "");
	free(out);
	gaz_selector_free(sel);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_format),
		cmocka_unit_test(test_parse_structure),
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_format_built),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
