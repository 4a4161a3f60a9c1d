/* test_dueq.c - the due-time queue: pops in due order against a sorted
 * model, interleaved pushes and pops, and the lazy rescheduling idiom its
 * owners use (the latest push per name wins, stale entries dropped). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/dueq.h"

static void test_empty(void **state)
{
	struct gaz_dueq q = {0};
	struct gaz_due d;
	(void)state;

	assert_false(gaz_dueq_due_by(&q, INT64_MAX));
	assert_true(gaz_dueq_earliest(&q) == INT64_MAX);
	assert_false(gaz_dueq_pop(&q, &d));
	assert_int_equal(gaz_dueq_push(&q, 5, "a"), 0);
	assert_false(gaz_dueq_due_by(&q, 4));
	assert_true(gaz_dueq_due_by(&q, 5));
	assert_true(gaz_dueq_earliest(&q) == 5);
	gaz_dueq_release(&q);
	assert_int_equal(q.n, 0);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Pushes and pops interleaved, each pop checked to be the model's least
 * (the model: an array kept sorted). Duplicated due times included. */
static void test_against_model(void **state)
{
	enum { N = 20000 };
	static int64_t model[N];
	struct gaz_dueq q = {0};
	size_t m = 0;
	char name[32];
	(void)state;

	srand(7);
	for (int step = 0; step < 3 * N; step++) {
		if (m < N && (m == 0 || rand() % 3 != 0)) {
			int64_t due = rand() % 5000;
			snprintf(name, sizeof(name), "j/%lld", (long long)due);
			assert_int_equal(gaz_dueq_push(&q, due, name), 0);
			model[m++] = due;
			qsort(model, m, sizeof(*model), cmp_i64);
		} else {
			struct gaz_due d;
			assert_true(gaz_dueq_pop(&q, &d));
			assert_true(d.due_ns == model[0]);
			snprintf(name, sizeof(name), "j/%lld", (long long)d.due_ns);
			assert_string_equal(d.name, name); /* the entry's own name */
			free(d.name);
			memmove(model, model + 1, (--m) * sizeof(*model));
		}
		assert_int_equal(q.n, m);
		assert_true(gaz_dueq_earliest(&q) == (m ? model[0] : INT64_MAX));
	}
	gaz_dueq_release(&q);
}

/* The owners' idiom: a name rescheduled later and earlier again pops
 * once, at its latest due time, when stale pops are dropped. */
static void test_reschedule_lazily(void **state)
{
	struct gaz_dueq q = {0};
	int64_t latest[3] = {0};
	int pops[3] = {0};
	int64_t at[3] = {0};
	struct gaz_due d;
	char name[16];
	(void)state;

	for (int k = 0; k < 3; k++) {
		const int64_t dues[3] = {100, 300, 200}; /* last one wins */
		for (int i = 0; i < 3; i++) {
			snprintf(name, sizeof(name), "j%d", i);
			latest[i] = dues[k] + i;
			assert_int_equal(gaz_dueq_push(&q, latest[i], name), 0);
		}
	}
	while (gaz_dueq_pop(&q, &d)) {
		int i = d.name[1] - '0';
		if (d.due_ns == latest[i]) {
			pops[i]++;
			at[i] = d.due_ns;
		}
		free(d.name);
	}
	for (int i = 0; i < 3; i++) {
		assert_int_equal(pops[i], 1);
		assert_true(at[i] == 200 + i);
	}
	gaz_dueq_release(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_against_model),
		cmocka_unit_test(test_reschedule_lazily),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
