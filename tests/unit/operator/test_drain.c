/*
 * test_drain.c - the drain controller's pure parts: the label selector it
 * turns into the PodDisruptionBudget's matchLabels (equality requirements
 * only, spaces trimmed, anything set-based or negated refused), Gazette's
 * desired replication (facts §4.3) and the phase a terminating pod
 * reports. Includes drain.c for its static functions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "operator/drain.c"

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

static void desired_replication(void **state)
{
	struct gaz_drain d = {.cfg = {.max_replication = 2}};
	Protocol__JournalSpec spec = PROTOCOL__JOURNAL_SPEC__INIT;
	Protocol__JournalSpec__Suspend sus = PROTOCOL__JOURNAL_SPEC__SUSPEND__INIT;

	(void)state;
	spec.replication = 3;
	assert_int_equal(desired(&d, &spec), 2); /* capped by --broker.max-replication */
	d.cfg.max_replication = 9;
	assert_int_equal(desired(&d, &spec), 3);
	spec.suspend = &sus;
	sus.level = PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__PARTIAL;
	assert_int_equal(desired(&d, &spec), 1);
	sus.level = PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__FULL;
	assert_int_equal(desired(&d, &spec), 0);
	sus.level = PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__NONE;
	assert_int_equal(desired(&d, &spec), 3);
}

static const char *phase_of(const char *annotation, const struct member *m)
{
	static char msg[512];
	json_t *pod = annotation ? json_pack("{s:{s:{s:s}}}", "metadata", "annotations",
					     GAZ_DRAIN_ANNOTATION, annotation)
				 : json_pack("{s:{}}", "metadata");
	const char *p = drain_phase(pod, m, msg, sizeof(msg));

	json_decref(pod);
	return p;
}

static void drain_phases(void **state)
{
	struct member m = {.assignments = 3};

	(void)state;
	assert_string_equal(phase_of(NULL, &m), "Draining");
	m.assignments = 0;
	assert_string_equal(phase_of("Draining", &m), "HandedOff");
	/* The member key is gone: drained if we saw it draining ... */
	assert_string_equal(phase_of("HandedOff", NULL), "Drained");
	assert_string_equal(phase_of("Draining", NULL), "Drained");
	assert_string_equal(phase_of("Drained", NULL), "Drained");
	/* ... and nothing to drain if we never saw a member. */
	assert_string_equal(phase_of(NULL, NULL), "NoMember");
	assert_string_equal(phase_of("NoMember", NULL), "NoMember");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(equality_selectors),
		cmocka_unit_test(refused_selectors),
		cmocka_unit_test(desired_replication),
		cmocka_unit_test(drain_phases),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
