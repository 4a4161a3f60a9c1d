/* test_strset.c - the string set: adds, removals with backward shifts
 * across growth, and drain, checked against a plain array model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/strset.h"

static void test_add_has_remove(void **state)
{
	struct gaz_strset s = {0};
	(void)state;

	assert_false(gaz_strset_has(&s, "a"));
	assert_false(gaz_strset_remove(&s, "a"));
	assert_int_equal(gaz_strset_add(&s, "a/b"), 1);
	assert_int_equal(gaz_strset_add(&s, "a/b"), 0);
	assert_true(gaz_strset_has(&s, "a/b"));
	assert_int_equal(s.n, 1);
	assert_true(gaz_strset_remove(&s, "a/b"));
	assert_false(gaz_strset_has(&s, "a/b"));
	assert_int_equal(s.n, 0);
	gaz_strset_release(&s);
}

/* Many names, removed in an order unlike the insertion's, with the model
 * (present[i]) checked after every step: a wrong backward shift strands
 * an entry past a free slot, which then reads as absent. */
static void test_against_model(void **state)
{
	enum { N = 5000 };
	struct gaz_strset s = {0};
	static bool present[N];
	char name[32];
	(void)state;

	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "journal/%d", i);
		assert_int_equal(gaz_strset_add(&s, name), 1);
		present[i] = true;
	}
	for (int round = 0; round < 3; round++)
		for (int i = (round * 7) % 13; i < N; i += 13) {
			snprintf(name, sizeof(name), "journal/%d", i);
			assert_int_equal(gaz_strset_remove(&s, name), present[i]);
			present[i] = false;
			if (i % 3 == 0) {
				snprintf(name, sizeof(name), "journal/%d", (i * 31) % N);
				assert_int_equal(gaz_strset_add(&s, name), present[(i * 31) % N] ? 0 : 1);
				present[(i * 31) % N] = true;
			}
		}
	size_t want = 0;
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "journal/%d", i);
		assert_int_equal(gaz_strset_has(&s, name), present[i]);
		want += present[i];
	}
	assert_int_equal(s.n, want);

	size_t pos = 0, seen = 0;
	for (const char *m; (m = gaz_strset_next(&s, &pos));) {
		assert_true(present[atoi(m + strlen("journal/"))]);
		seen++;
	}
	assert_int_equal(seen, want);

	size_t n = 0;
	char **all = gaz_strset_drain(&s, &n);
	assert_non_null(all);
	assert_int_equal(n, want);
	assert_int_equal(s.n, 0);
	for (size_t i = 0; i < n; i++) {
		int j = atoi(all[i] + strlen("journal/"));
		assert_true(present[j]);
		present[j] = false; /* each once */
		free(all[i]);
	}
	free(all);
	snprintf(name, sizeof(name), "journal/%d", 1);
	assert_false(gaz_strset_has(&s, name));
	assert_int_equal(gaz_strset_add(&s, name), 1);
	gaz_strset_release(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_add_has_remove),
		cmocka_unit_test(test_against_model),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
