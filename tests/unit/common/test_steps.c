/* test_steps.c - tasks in steps on a bounded pool: 2,000 tasks on 2
 * threads woken only by kicks from other threads (no wake lost, no step
 * of a task concurrent with another of its own), due times honoured and
 * a kick that ends a timed wait early, kicks out of the timer heap's
 * middle. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/steps.h"

struct counted {
	struct gaz_step_task t; /* first: the step's argument */
	atomic_int wanted;      /* kicks given: the steps that must see them */
	atomic_int in_step;
	atomic_int overlaps;
	int seen, goal;
};

static int64_t counted_step(struct gaz_step_task *t)
{
	struct counted *c = (struct counted *)t;

	if (atomic_fetch_add(&c->in_step, 1))
		atomic_fetch_add(&c->overlaps, 1);
	c->seen = atomic_load(&c->wanted);
	atomic_fetch_sub(&c->in_step, 1);
	return c->seen >= c->goal ? GAZ_STEP_DONE : GAZ_DEADLINE_NEVER;
}

struct kicker {
	struct counted *tasks;
	size_t from, to;
	int rounds;
};

static void *kicker_main(void *arg)
{
	struct kicker *k = arg;

	for (int r = 0; r < k->rounds; r++)
		for (size_t i = k->from; i < k->to; i++) {
			atomic_fetch_add(&k->tasks[i].wanted, 1);
			gaz_steps_kick(&k->tasks[i].t);
		}
	return NULL;
}

/* Each task waits for kicks only, and is done once its step has seen
 * them all: a kick lost between a step's look and its return would
 * leave a task waiting forever (the join would hang). */
static void test_kicks_are_never_lost(void **state)
{
	enum { N = 2000, ROUNDS = 20, KICKERS = 4 };
	struct counted *tasks = calloc(N, sizeof(*tasks));
	struct kicker k[KICKERS];
	pthread_t th[KICKERS];
	struct gaz_steps *p;
	(void)state;

	assert_int_equal(gaz_steps_new(2, "test-steps", &p), 0);
	for (size_t i = 0; i < N; i++) {
		tasks[i].t.step = counted_step;
		tasks[i].goal = ROUNDS;
		gaz_steps_add(p, &tasks[i].t);
	}
	for (int i = 0; i < KICKERS; i++) {
		k[i] = (struct kicker){tasks, (size_t)i * N / KICKERS, (size_t)(i + 1) * N / KICKERS, ROUNDS};
		pthread_create(&th[i], NULL, kicker_main, &k[i]);
	}
	for (int i = 0; i < KICKERS; i++)
		pthread_join(th[i], NULL);
	for (size_t i = 0; i < N; i++) {
		gaz_steps_join(&tasks[i].t);
		assert_int_equal(tasks[i].seen, ROUNDS);
		assert_int_equal(atomic_load(&tasks[i].overlaps), 0);
	}
	/* A kick to a task that is done changes nothing. */
	gaz_steps_kick(&tasks[0].t);
	gaz_steps_free(p);
	free(tasks);
}

struct timed {
	struct gaz_step_task t;
	int64_t due, ran_at;
	atomic_int steps;
};

static int64_t timed_step(struct gaz_step_task *t)
{
	struct timed *d = (struct timed *)t;

	if (atomic_fetch_add(&d->steps, 1) == 0)
		return d->due;
	d->ran_at = gaz_mono_ns();
	return GAZ_STEP_DONE;
}

/* add_scattered adds n timed tasks to p, due from `from` (monotonic) on,
 * one each millisecond in a scattered order. */
static void add_scattered(struct gaz_steps *p, struct timed *tasks, size_t n, int64_t from)
{
	for (size_t i = 0; i < n; i++) {
		tasks[i].t.step = timed_step;
		tasks[i].due = from + (int64_t)((i * 7919) % n) * GAZ_NS_PER_MS;
		gaz_steps_add(p, &tasks[i].t);
	}
}

/* Tasks due at scattered times run their second step no earlier than
 * their due time, and not much later; one due in an hour runs when
 * kicked. */
static void test_due_times_and_an_early_kick(void **state)
{
	enum { N = 200 };
	struct timed *tasks = calloc(N + 1, sizeof(*tasks));
	int64_t start = gaz_mono_ns();
	struct gaz_steps *p;
	(void)state;

	assert_int_equal(gaz_steps_new(2, "test-steps", &p), 0);
	add_scattered(p, tasks, N, start);
	tasks[N].t.step = timed_step;
	tasks[N].due = start + 3600 * GAZ_NS_PER_S;
	gaz_steps_add(p, &tasks[N].t);
	for (size_t i = 0; i < N; i++) {
		gaz_steps_join(&tasks[i].t);
		assert_true(tasks[i].ran_at >= tasks[i].due);
		assert_true(tasks[i].ran_at - tasks[i].due < 5 * GAZ_NS_PER_S);
	}
	while (atomic_load(&tasks[N].steps) == 0) /* queued: a kick does nothing yet */
		gaz_steps_kick(&tasks[N].t);
	gaz_steps_kick(&tasks[N].t); /* waiting an hour, or running: runs again */
	gaz_steps_join(&tasks[N].t);
	assert_true(tasks[N].ran_at < tasks[N].due);
	gaz_steps_free(p);
	free(tasks);
}

/* Tasks waiting in the timer heap are kicked out of its middle, in
 * scattered order: each kicked one runs before its due time, and every
 * other one still runs no earlier than its own (a heap left out of order
 * by a removal would pop one early). */
static void test_kicks_out_of_the_middle_of_the_heap(void **state)
{
	enum { N = 300 };
	struct timed *tasks = calloc(N, sizeof(*tasks));
	bool kicked[N] = {false};
	int64_t start = gaz_mono_ns();
	struct gaz_steps *p;
	(void)state;

	assert_int_equal(gaz_steps_new(2, "test-steps", &p), 0);
	add_scattered(p, tasks, N, start + 2 * GAZ_NS_PER_S);
	for (size_t i = 0; i < N; i++) /* each has asked for its due time */
		while (atomic_load(&tasks[i].steps) == 0)
			;
	for (size_t i = 0; i < N; i += 3) { /* 101 is prime to N: no repeats */
		kicked[(i * 101) % N] = true;
		gaz_steps_kick(&tasks[(i * 101) % N].t);
	}
	for (size_t i = 0; i < N; i++) {
		gaz_steps_join(&tasks[i].t);
		if (kicked[i])
			assert_true(tasks[i].ran_at < tasks[i].due);
		else
			assert_true(tasks[i].ran_at >= tasks[i].due);
	}
	gaz_steps_free(p);
	free(tasks);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kicks_are_never_lost),
		cmocka_unit_test(test_due_times_and_an_early_kick),
		cmocka_unit_test(test_kicks_out_of_the_middle_of_the_heap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
