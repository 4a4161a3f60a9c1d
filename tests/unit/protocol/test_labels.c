/*
 * test_labels.c - §3.3 label/label-set/selector validation, the heap set
 * helpers, per-name union/subtract (§2.1, §6.5) and selector matching with
 * and without journal meta-labels (§2.0 step 6, §2.4 step 2).
 */
#include "vcheck.h"

#include <stdlib.h>

#include "protocol/labels.h"
#include "protocol/validate.h"

/* Builds a heap set from "name=value" terms ("name:prefix=v" for prefix). */
static Protocol__LabelSet *mkset(const char *const *terms)
{
	Protocol__LabelSet *s = gaz_labelset_new();

	assert_non_null(s);
	for (; *terms; terms++) {
		char buf[256], *eq;

		snprintf(buf, sizeof(buf), "%s", *terms);
		eq = strchr(buf, '=');
		assert_non_null(eq);
		*eq = '\0';
		assert_int_equal(gaz_labelset_add(s, buf, eq + 1), 0);
	}
	return s;
}

#define SET(...) mkset((const char *const[]){__VA_ARGS__, NULL})
#define NOSET() mkset((const char *const[]){NULL})

/* "n=v,n2=v2*" rendering, '*' marking prefix labels. */
static const char *show(const Protocol__LabelSet *s)
{
	static char buf[512];
	size_t o = 0;

	buf[0] = '\0';
	for (size_t i = 0; s && i < s->n_labels; i++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s=%s%s", i ? "," : "",
				      s->labels[i]->name, s->labels[i]->value,
				      s->labels[i]->prefix ? "*" : "");
	return buf;
}

/* A selector over borrowed heap sets. */
static Protocol__LabelSelector mksel(Protocol__LabelSet *inc, Protocol__LabelSet *exc)
{
	Protocol__LabelSelector sel = PROTOCOL__LABEL_SELECTOR__INIT;

	sel.include = inc;
	sel.exclude = exc;
	return sel;
}

static void test_label_validation(void **state)
{
	Protocol__Label l = PROTOCOL__LABEL__INIT;

	(void)state;
	l.name = "ab";
	l.value = "";
	VCHECK(gaz_validate_label(&l, false, &st), NULL);
	l.name = "a";
	VCHECK(gaz_validate_label(&l, false, &st),
	       "Name: invalid length (1; expected 2 <= length <= 64)");
	l.name = (char *)rep('n', 64);
	VCHECK(gaz_validate_label(&l, false, &st), NULL);
	l.name = (char *)rep('n', 65);
	VCHECK(gaz_validate_label(&l, false, &st),
	       "Name: invalid length (65; expected 2 <= length <= 64)");
	l.name = "a=b";
	VCHECK(gaz_validate_label(&l, false, &st), "Name: not a valid token (a=b)");
	l.name = "ab";
	l.value = "a=b%/c";
	VCHECK(gaz_validate_label(&l, false, &st), NULL);
	l.value = (char *)rep('v', 1024);
	VCHECK(gaz_validate_label(&l, false, &st), NULL);
	l.value = (char *)rep('v', 1025);
	VCHECK(gaz_validate_label(&l, false, &st),
	       "Value: invalid length (1025; expected 0 <= length <= 1024)");
	l.value = "a b";
	VCHECK(gaz_validate_label(&l, false, &st), "Value: not a valid token (a b)");
	l.value = "v";
	l.prefix = 1;
	VCHECK(gaz_validate_label(&l, false, &st), "Prefix may not be set outside of a LabelSelector");
	VCHECK(gaz_validate_label(&l, true, &st), NULL);
}

/* A set from raw (name, value) pairs, in the given (possibly bad) order. */
static void check_raw_set(const char *const *nv, size_t n, bool allow_prefix, const char *want)
{
	Protocol__Label labels[8], *ptrs[8];
	Protocol__LabelSet set = PROTOCOL__LABEL_SET__INIT;

	for (size_t i = 0; i < n; i++) {
		protocol__label__init(&labels[i]);
		labels[i].name = (char *)nv[2 * i];
		labels[i].value = (char *)nv[2 * i + 1];
		ptrs[i] = &labels[i];
	}
	set.n_labels = n;
	set.labels = ptrs;
	VCHECK(gaz_validate_labelset(&set, allow_prefix, &st), want);
}

static void test_labelset_validation(void **state)
{
	(void)state;
	check_raw_set((const char *[]){"aa", "1", "aa", "2", "bb", ""}, 3, false, NULL);
	check_raw_set((const char *[]){"bb", "1", "aa", "2"}, 2, false,
		      "Labels not in unique, sorted order (index 1; label name aa <= bb)");
	check_raw_set((const char *[]){"aa", "2", "aa", "1"}, 2, false,
		      "Labels not in unique, sorted order (index 1; label aa value 1 <= 2)");
	check_raw_set((const char *[]){"aa", "1", "aa", "1"}, 2, false,
		      "Labels not in unique, sorted order (index 1; label aa value 1 <= 1)");
	check_raw_set((const char *[]){"aa", "", "aa", "1"}, 2, false,
		      "Label has empty & non-empty values (index 1; label aa value 1)");
	check_raw_set((const char *[]){"aa", "1", "b", "1"}, 2, false,
		      "Labels[1].Name: invalid length (1; expected 2 <= length <= 64)");
	check_raw_set(NULL, 0, false, NULL);
	VCHECK(gaz_validate_labelset(NULL, false, &st), NULL);
}

static void test_selector_validation(void **state)
{
	Protocol__LabelSet *inc = SET("aa:prefix=x/"), *exc = SET("bb=1");
	Protocol__LabelSelector sel = mksel(inc, exc);

	(void)state;
	VCHECK(gaz_validate_selector(&sel, &st), NULL);
	VCHECK(gaz_validate_labelset(inc, false, &st),
	       "Labels[0]: Prefix may not be set outside of a LabelSelector");
	assert_int_equal(gaz_labelset_add(exc, "b", "x"), 0);
	VCHECK(gaz_validate_selector(&sel, &st),
	       "Exclude.Labels[0].Name: invalid length (1; expected 2 <= length <= 64)");
	VCHECK(gaz_validate_selector(NULL, &st), NULL);
	gaz_labelset_free(inc);
	gaz_labelset_free(exc);
}

static void test_single_value(void **state)
{
	Protocol__LabelSet *ok = SET("app.gazette.dev/tag=a", "app.gazette.dev/tag=b", "content-type=x/y");
	Protocol__LabelSet *bad = SET("app.gazette.dev/region=a", "app.gazette.dev/region=b");

	(void)state;
	VCHECK(gaz_validate_single_value_labels(ok, &st), NULL);
	VCHECK(gaz_validate_single_value_labels(bad, &st),
	       "expected single-value Label has multiple values (index 1; label "
	       "app.gazette.dev/region value b)");
	gaz_labelset_free(ok);
	gaz_labelset_free(bad);
}

static void test_add_set_remove(void **state)
{
	Protocol__LabelSet *s = NOSET(), copy;
	size_t first = 99;

	(void)state;
	assert_int_equal(gaz_labelset_add(s, "bb", "2"), 0);
	assert_int_equal(gaz_labelset_add(s, "aa", "1"), 0);
	assert_int_equal(gaz_labelset_add(s, "bb", "1"), 0);
	assert_int_equal(gaz_labelset_add(s, "bb", "1"), 0); /* duplicate: no-op */
	assert_int_equal(gaz_labelset_add(s, "cc:prefix", "p/"), 0);
	assert_string_equal(show(s), "aa=1,bb=1,bb=2,cc=p/*");
	assert_int_equal(gaz_labelset_find(s, "bb", &first), 2);
	assert_int_equal(first, 1);
	assert_int_equal(gaz_labelset_find(s, "zz", NULL), 0);
	assert_string_equal(gaz_labelset_value_of(s, "bb"), "1");
	assert_null(gaz_labelset_value_of(s, "zz"));
	assert_int_equal(gaz_labelset_set(s, "bb", "9"), 0);
	assert_string_equal(show(s), "aa=1,bb=9,cc=p/*");
	assert_int_equal(gaz_labelset_set(s, "ab", "0"), 0);
	assert_string_equal(show(s), "aa=1,ab=0,bb=9,cc=p/*");
	gaz_labelset_remove(s, "aa");
	gaz_labelset_remove(s, "zz");
	assert_string_equal(show(s), "ab=0,bb=9,cc=p/*");

	gaz_labelset_init(&copy);
	assert_int_equal(gaz_labelset_copy(&copy, s), 0);
	assert_true(gaz_labelset_equal(&copy, s));
	copy.labels[2]->prefix = 0;
	assert_false(gaz_labelset_equal(&copy, s));
	gaz_labelset_remove(&copy, "cc");
	assert_false(gaz_labelset_equal(&copy, s));
	assert_true(gaz_labelset_equal(NULL, &(Protocol__LabelSet)PROTOCOL__LABEL_SET__INIT));
	gaz_labelset_release(&copy);
	assert_int_equal(copy.n_labels, 0);
	gaz_labelset_free(s);
	gaz_labelset_free(NULL);
}

static void test_union_subtract(void **state)
{
	static const struct {
		const char *lhs[6], *rhs[6];
		const char *uni, *sub;
	} cases[] = {
		/* union takes every value of a name from lhs when lhs has it */
		{{"aa=1", "bb=1", "bb=2"}, {"bb=3", "cc=1"}, "aa=1,bb=1,bb=2,cc=1", "aa=1,bb=1,bb=2"},
		{{"bb=3"}, {"aa=1", "bb=1", "bb=2", "cc=4"}, "aa=1,bb=3,cc=4", "bb=3"},
		/* subtract drops a name only on an exact value-set match */
		{{"aa=1", "aa=2", "bb=1"}, {"aa=1", "aa=2"}, "aa=1,aa=2,bb=1", "bb=1"},
		{{"aa=1", "aa=2", "bb=1"}, {"aa=1"}, "aa=1,aa=2,bb=1", "aa=1,aa=2,bb=1"},
		{{"aa=1", "bb=1"}, {"aa=1", "aa=2"}, "aa=1,bb=1", "aa=1,bb=1"},
		{{"aa=1", "bb=1"}, {"aa=9"}, "aa=1,bb=1", "aa=1,bb=1"},
		{{"aa="}, {"aa="}, "aa=", ""},
		{{NULL}, {"aa=1"}, "aa=1", ""},
		{{"aa=1"}, {NULL}, "aa=1", "aa=1"},
		{{NULL}, {NULL}, "", ""},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		Protocol__LabelSet *l = mkset(cases[i].lhs), *r = mkset(cases[i].rhs), out;

		gaz_labelset_init(&out);
		assert_int_equal(gaz_labelset_union(&out, l, r), 0);
		assert_string_equal(show(&out), cases[i].uni);
		assert_int_equal(gaz_labelset_subtract(&out, l, r), 0);
		assert_string_equal(show(&out), cases[i].sub);
		/* out may alias lhs */
		assert_int_equal(gaz_labelset_union(l, l, r), 0);
		assert_string_equal(show(l), cases[i].uni);
		gaz_labelset_release(&out);
		gaz_labelset_free(l);
		gaz_labelset_free(r);
	}
}

static void test_registers_update(void **state)
{
	Protocol__LabelSet *cur = SET("author=a1", "lease=x", "lease=y", "tag=t");
	Protocol__LabelSet *uni = SET("author=a2");
	Protocol__LabelSet *sub = SET("lease=x", "lease=y", "tag=other");
	Protocol__LabelSet out;

	(void)state;
	gaz_labelset_init(&out);
	assert_int_equal(gaz_registers_update(&out, cur, uni, sub), 0);
	assert_string_equal(show(&out), "author=a2,tag=t");
	/* union after subtract: a name both subtracted and unioned comes back */
	gaz_labelset_free(uni);
	uni = SET("lease=z");
	assert_int_equal(gaz_registers_update(&out, cur, uni, sub), 0);
	assert_string_equal(show(&out), "author=a1,lease=z,tag=t");
	gaz_labelset_release(&out);
	assert_int_equal(gaz_registers_update(cur, cur, NULL, NULL), 0);
	assert_string_equal(show(cur), "author=a1,lease=x,lease=y,tag=t");
	gaz_labelset_free(cur);
	gaz_labelset_free(uni);
	gaz_labelset_free(sub);
}

/* Each case: include terms, exclude terms, set terms, match? */
struct match_case {
	const char *inc[5], *exc[5], *set[6];
	bool want;
};

static const struct match_case match_cases[] = {
	{{NULL}, {NULL}, {NULL}, true},                       /* empty selector */
	{{NULL}, {NULL}, {"aa=1"}, true},
	{{"aa=1"}, {NULL}, {"aa=1", "bb=2"}, true},
	{{"aa=1"}, {NULL}, {"aa=2"}, false},
	{{"aa=1"}, {NULL}, {NULL}, false},
	{{"aa=1", "aa=2"}, {NULL}, {"aa=2"}, true},           /* OR within a name */
	{{"aa=1", "bb=1"}, {NULL}, {"aa=1"}, false},          /* AND across names */
	{{"aa=1", "bb=1"}, {NULL}, {"aa=1", "bb=1"}, true},
	{{"aa="}, {NULL}, {"aa=x"}, true},                    /* "" = exists */
	{{"aa="}, {NULL}, {"bb=x"}, false},
	{{"aa:prefix=a/"}, {NULL}, {"aa=a/b"}, true},
	{{"aa:prefix=a/"}, {NULL}, {"aa=b/a/"}, false},
	{{"aa:prefix=a/"}, {NULL}, {"aa=a"}, false},
	{{"aa=a/"}, {NULL}, {"aa=a/b"}, false},               /* exact without prefix */
	{{"aa=1", "aa:prefix=x/"}, {NULL}, {"aa=x/y"}, true},
	{{NULL}, {"aa=1"}, {"aa=1"}, false},
	{{NULL}, {"aa=1"}, {"aa=2"}, true},
	{{NULL}, {"aa="}, {"aa=2"}, false},                   /* !aa */
	{{NULL}, {"aa="}, {"bb=2"}, true},
	{{NULL}, {"aa=1", "bb=1"}, {"bb=1"}, false},          /* any exclude */
	{{NULL}, {"aa:prefix=a/"}, {"aa=a/x"}, false},
	{{"aa=1"}, {"bb=1"}, {"aa=1", "bb=2"}, true},
	{{"aa=1"}, {"bb=1"}, {"aa=1", "bb=1", "bb=2"}, false},
	{{"aa=2"}, {NULL}, {"aa=1", "aa=2", "aa=3"}, true},   /* multi-valued set */
};

static void test_matches(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(match_cases) / sizeof(match_cases[0]); i++) {
		const struct match_case *c = &match_cases[i];
		Protocol__LabelSet *inc = mkset(c->inc), *exc = mkset(c->exc), *set = mkset(c->set);
		Protocol__LabelSelector sel = mksel(inc, exc);

		if (gaz_labelset_matches(&sel, set) != c->want)
			fail_msg("case %zu: want %d", i, c->want);
		gaz_labelset_free(inc);
		gaz_labelset_free(exc);
		gaz_labelset_free(set);
	}
	assert_true(gaz_labelset_matches(NULL, NULL));
}

/* Selector terms against journal "a/journal" with labels aa=1. */
static const struct match_case meta_cases[] = {
	{{"name=a/journal"}, {NULL}, {NULL}, true},
	{{"name=a/other"}, {NULL}, {NULL}, false},
	{{"name:prefix=a/"}, {NULL}, {NULL}, true},
	{{"prefix=a/"}, {NULL}, {NULL}, true},                /* prefix meta-label */
	{{"prefix=b/"}, {NULL}, {NULL}, false},
	{{"name=x/y", "prefix=a/"}, {NULL}, {NULL}, true},    /* OR'd with name */
	{{"prefix=a/", "aa=1"}, {NULL}, {NULL}, true},
	{{"prefix=a/", "aa=2"}, {NULL}, {NULL}, false},
	{{NULL}, {"prefix=a/"}, {NULL}, false},
	{{NULL}, {"name=a/journal"}, {NULL}, false},
	{{NULL}, {"name:prefix=b/"}, {NULL}, true},
	{{"name="}, {NULL}, {NULL}, true},
};

static void test_matches_journal(void **state)
{
	Protocol__LabelSet *labels = SET("aa=1");
	Protocol__JournalSpec spec = PROTOCOL__JOURNAL_SPEC__INIT;

	(void)state;
	spec.name = "a/journal";
	spec.labels = labels;
	for (size_t i = 0; i < sizeof(meta_cases) / sizeof(meta_cases[0]); i++) {
		const struct match_case *c = &meta_cases[i];
		Protocol__LabelSet *inc = mkset(c->inc), *exc = mkset(c->exc);
		Protocol__LabelSelector sel = mksel(inc, exc);

		if (gaz_selector_matches_journal(&sel, &spec) != c->want)
			fail_msg("case %zu: want %d", i, c->want);
		gaz_labelset_free(inc);
		gaz_labelset_free(exc);
	}
	gaz_labelset_free(labels);
}

static void test_matches_meta_flags(void **state)
{
	Protocol__LabelSet *labels = SET("aa=1", "name=spoof");
	Protocol__LabelSet *inc = SET("prefix=a/"), *none = NOSET(), *byname = SET("name=a/journal");
	Protocol__LabelSelector psel = mksel(inc, none), nsel = mksel(byname, none);

	(void)state;
	/* Without GAZ_MATCH_PREFIX_META, "prefix" is an ordinary (absent) label. */
	assert_false(gaz_selector_matches_meta(&psel, "a/journal", labels, 0));
	assert_true(gaz_selector_matches_meta(&psel, "a/journal", labels, GAZ_MATCH_PREFIX_META));
	/* The meta-label hides a real "name" label. */
	assert_true(gaz_selector_matches_meta(&nsel, "a/journal", labels, 0));
	assert_false(gaz_selector_matches_meta(&nsel, "b/journal", labels, 0));
	/* Apply's delete check: the name alone. */
	assert_true(gaz_selector_matches_meta(&nsel, "a/journal", NULL, 0));
	/* No journal: no meta-label at all. */
	assert_false(gaz_selector_matches_meta(&nsel, NULL, labels, 0));
	gaz_labelset_free(labels);
	gaz_labelset_free(inc);
	gaz_labelset_free(none);
	gaz_labelset_free(byname);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_label_validation),  cmocka_unit_test(test_labelset_validation),
		cmocka_unit_test(test_selector_validation), cmocka_unit_test(test_single_value),
		cmocka_unit_test(test_add_set_remove),    cmocka_unit_test(test_union_subtract),
		cmocka_unit_test(test_registers_update),  cmocka_unit_test(test_matches),
		cmocka_unit_test(test_matches_journal),   cmocka_unit_test(test_matches_meta_flags),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
