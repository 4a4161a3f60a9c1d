/*
 * steps.c - tasks that run in steps on a bounded pool of threads (see
 * steps.h).
 *
 * A task is in one state at a time:
 *
 *   QUEUED --a thread takes it--> RUNNING --step returns a time--> WAITING
 *      ^                            |  |                              |
 *      +--- kicked meanwhile, or ---+  +--GAZ_STEP_DONE--> DONE       |
 *      |    its time is now                                           |
 *      +------------------- a kick, or its due time ------------------+
 *
 * A WAITING task with a due time sits in the timer heap (a binary
 * min-heap of task pointers by due_ns, each task knowing its index, so a
 * kick takes it out at once and a done task is never left behind). An
 * idle thread sleeps until the heap's earliest due time or a signal.
 *
 * Locking (steps.h): p->mu guards the tasks' pool fields, the queue and
 * the heap; a step runs without it.
 */
#include "common/steps.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"

enum { QUEUED = 1, RUNNING, WAITING, DONE };

struct gaz_steps {
	pthread_mutex_t mu;
	pthread_cond_t work;     /* a task queued, the heap's top moved, stop */
	pthread_cond_t done;     /* a task is done (joiners) */
	struct gaz_step_task *head, *tail;
	struct gaz_step_task **heap;
	size_t n_heap, cap_heap;
	bool stopping;
	int n_threads;
	pthread_t *threads;
	char name[16];
};

/* ---- the timer heap (p->mu held) ------------------------------------------ */

static void heap_set(struct gaz_steps *p, size_t i, struct gaz_step_task *t)
{
	p->heap[i] = t;
	t->heap_i = i + 1;
}

static void heap_up(struct gaz_steps *p, size_t i)
{
	struct gaz_step_task *t = p->heap[i];

	while (i > 0 && p->heap[(i - 1) / 2]->due_ns > t->due_ns) {
		heap_set(p, i, p->heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	heap_set(p, i, t);
}

static void heap_down(struct gaz_steps *p, size_t i)
{
	struct gaz_step_task *t = p->heap[i];

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= p->n_heap)
			break;
		if (c + 1 < p->n_heap && p->heap[c + 1]->due_ns < p->heap[c]->due_ns)
			c++;
		if (p->heap[c]->due_ns >= t->due_ns)
			break;
		heap_set(p, i, p->heap[c]);
		i = c;
	}
	heap_set(p, i, t);
}

/* Returns false when out of memory (the task then runs at once). */
static bool heap_push(struct gaz_steps *p, struct gaz_step_task *t)
{
	if (p->n_heap == p->cap_heap) {
		size_t cap = p->cap_heap ? 2 * p->cap_heap : 64;
		struct gaz_step_task **h = realloc(p->heap, cap * sizeof(*h));
		if (!h)
			return false;
		p->heap = h;
		p->cap_heap = cap;
	}
	p->heap[p->n_heap++] = t;
	heap_up(p, p->n_heap - 1);
	return true;
}

static void heap_remove(struct gaz_steps *p, struct gaz_step_task *t)
{
	size_t i = t->heap_i - 1;

	t->heap_i = 0;
	if (--p->n_heap == i)
		return;
	/* The last entry fills the hole and moves whichever way it must. */
	heap_set(p, i, p->heap[p->n_heap]);
	heap_down(p, i);
	heap_up(p, i);
}

/* ---- the run queue (p->mu held) ------------------------------------------- */

static void enqueue(struct gaz_steps *p, struct gaz_step_task *t)
{
	t->state = QUEUED;
	t->next = NULL;
	if (p->tail)
		p->tail->next = t;
	else
		p->head = t;
	p->tail = t;
	pthread_cond_signal(&p->work);
}

static struct gaz_step_task *dequeue(struct gaz_steps *p)
{
	struct gaz_step_task *t = p->head;

	if (t && !(p->head = t->next))
		p->tail = NULL;
	return t;
}

/* ---- the threads ------------------------------------------------------------ */

static void *thread_main(void *arg)
{
	struct gaz_steps *p = arg;

	pthread_setname_np(pthread_self(), p->name);
	pthread_mutex_lock(&p->mu);
	for (;;) {
		int64_t now = gaz_mono_ns();
		struct gaz_step_task *t;

		while (p->n_heap && p->heap[0]->due_ns <= now) {
			t = p->heap[0];
			heap_remove(p, t);
			enqueue(p, t);
		}
		if (!(t = dequeue(p))) {
			if (p->stopping)
				break;
			if (p->n_heap) {
				struct timespec at = gaz_abstime_of(p->heap[0]->due_ns);
				pthread_cond_timedwait(&p->work, &p->mu, &at);
			} else {
				pthread_cond_wait(&p->work, &p->mu);
			}
			continue;
		}
		t->state = RUNNING;
		t->kicked = false;
		pthread_mutex_unlock(&p->mu);
		int64_t next = t->step(t);
		pthread_mutex_lock(&p->mu);
		if (next == GAZ_STEP_DONE) {
			t->state = DONE;
			pthread_cond_broadcast(&p->done);
		} else if (t->kicked || next <= gaz_mono_ns()) {
			enqueue(p, t);
		} else {
			t->state = WAITING;
			t->due_ns = next;
			if (next != GAZ_DEADLINE_NEVER && !heap_push(p, t))
				enqueue(p, t);
			else if (t->heap_i == 1)
				pthread_cond_signal(&p->work); /* a sleeper's earliest moved */
		}
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int gaz_steps_new(int threads, const char *name, struct gaz_steps **out)
{
	struct gaz_steps *p = calloc(1, sizeof(*p));
	pthread_condattr_t ca;

	if (threads < 1)
		threads = 1;
	if (!p || !(p->threads = calloc((size_t)threads, sizeof(*p->threads)))) {
		free(p);
		return GAZ_ENOMEM;
	}
	snprintf(p->name, sizeof(p->name), "%s", name);
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->work, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&p->done, NULL);
	for (int i = 0; i < threads; i++) {
		if (pthread_create(&p->threads[i], NULL, thread_main, p))
			break;
		p->n_threads++;
	}
	if (p->n_threads == 0) {
		gaz_steps_free(p);
		return GAZ_ENOMEM;
	}
	*out = p;
	return 0;
}

void gaz_steps_add(struct gaz_steps *p, struct gaz_step_task *t)
{
	pthread_mutex_lock(&p->mu);
	t->pool = p;
	t->kicked = false;
	t->heap_i = 0;
	enqueue(p, t);
	pthread_mutex_unlock(&p->mu);
}

void gaz_steps_kick(struct gaz_step_task *t)
{
	struct gaz_steps *p = t->pool;

	pthread_mutex_lock(&p->mu);
	if (t->state == RUNNING) {
		t->kicked = true;
	} else if (t->state == WAITING) {
		if (t->heap_i)
			heap_remove(p, t);
		enqueue(p, t);
	}
	pthread_mutex_unlock(&p->mu);
}

void gaz_steps_join(struct gaz_step_task *t)
{
	struct gaz_steps *p = t->pool;

	pthread_mutex_lock(&p->mu);
	while (t->state != DONE)
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

void gaz_steps_free(struct gaz_steps *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stopping = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->n_threads; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->done);
	pthread_mutex_destroy(&p->mu);
	free(p->heap);
	free(p->threads);
	free(p);
}
