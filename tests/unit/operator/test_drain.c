/*
 * test_drain.c - the label selector the drain controller turns into the
 * PodDisruptionBudget's matchLabels: equality requirements only, spaces
 * trimmed, anything set-based or negated refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "operator/drain.h"

static void expect_labels(const char *selector, const char *want_json)
{
	json_t *got = gaz_drain_parse_selector(selector), *want = json_loads(want_json, 0, NULL);

	assert_non_null(want);
	if (!got)
		fail_msg("selector \"%s\" refused", selector);
	if (!json_equal(got, want)) {
		char *s = json_dumps(got, JSON_SORT_KEYS);
		fail_msg("selector \"%s\": got %s, want %s", selector, s, want_json);
	}
	json_decref(got);
	json_decref(want);
}

static void equality_selectors(void **state)
{
	(void)state;
	expect_labels("app=gazette", "{\"app\": \"gazette\"}");
	expect_labels("app.kubernetes.io/name=gazette-c,app.kubernetes.io/component=broker",
		      "{\"app.kubernetes.io/name\": \"gazette-c\", \"app.kubernetes.io/component\": \"broker\"}");
	expect_labels(" a = b , c=d ", "{\"a\": \"b\", \"c\": \"d\"}");
	expect_labels("a=", "{\"a\": \"\"}");
}

static void refused_selectors(void **state)
{
	static const char *bad[] = {"", "app", "app!=x", "app==x", "tier in (a,b)", "!app", "=x",
				    "a=b,", "a=b c", NULL};
	(void)state;
	for (size_t i = 0; bad[i]; i++) {
		json_t *j = gaz_drain_parse_selector(bad[i]);
		if (j)
			fail_msg("selector \"%s\" accepted", bad[i]);
	}
	assert_null(gaz_drain_parse_selector(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(equality_selectors),
		cmocka_unit_test(refused_selectors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
