/*
 * queue.c - reconcile work queue (see queue.h). An array of (key, due)
 * kept unsorted: take scans for the earliest due entry. Queues hold at
 * most a few thousand keys, so a scan is cheaper than keeping a heap and
 * a key index in step.
 */
#include "operator/queue.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"

struct entry {
	char *key;
	int64_t due_ns;
};

struct gaz_queue {
	pthread_mutex_t mu;
	pthread_cond_t cv;     /* CLOCK_MONOTONIC */
	struct entry *e;
	size_t n, cap, max;
	bool down;
};

struct gaz_queue *gaz_queue_new(size_t max)
{
	struct gaz_queue *q = calloc(1, sizeof(*q));
	pthread_condattr_t ca;

	if (!q)
		return NULL;
	q->max = max;
	pthread_mutex_init(&q->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&q->cv, &ca);
	pthread_condattr_destroy(&ca);
	return q;
}

void gaz_queue_free(struct gaz_queue *q)
{
	if (!q)
		return;
	for (size_t i = 0; i < q->n; i++)
		free(q->e[i].key);
	free(q->e);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

static struct entry *find(struct gaz_queue *q, const char *key)
{
	for (size_t i = 0; i < q->n; i++)
		if (!strcmp(q->e[i].key, key))
			return &q->e[i];
	return NULL;
}

/* Appends an entry; false when full or out of memory. */
static bool push(struct gaz_queue *q, const char *key, int64_t due)
{
	if (q->n >= q->max)
		return false;
	if (q->n == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 64;
		struct entry *ne = realloc(q->e, cap * sizeof(*ne));
		if (!ne)
			return false;
		q->e = ne;
		q->cap = cap;
	}
	if (!(q->e[q->n].key = strdup(key)))
		return false;
	q->e[q->n++].due_ns = due;
	return true;
}

bool gaz_queue_add_after(struct gaz_queue *q, const char *key, int64_t delay_ms)
{
	int64_t due = gaz_mono_ns() + (delay_ms > 0 ? delay_ms : 0) * GAZ_NS_PER_MS;
	struct entry *e;
	bool ok = true;

	pthread_mutex_lock(&q->mu);
	if (q->down)
		ok = false;
	else if ((e = find(q, key)))
		e->due_ns = due < e->due_ns ? due : e->due_ns;
	else
		ok = push(q, key, due);
	if (ok)
		pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	if (!ok && !q->down)
		gaz_warn("work queue full; dropping a key until the next resync", "key=%s", key);
	return ok;
}

char *gaz_queue_take(struct gaz_queue *q, int64_t timeout_ms)
{
	int64_t deadline = gaz_deadline_in(timeout_ms);
	char *key = NULL;

	pthread_mutex_lock(&q->mu);
	while (!q->down) {
		int64_t now = gaz_mono_ns(), wake = deadline;
		size_t best = q->n;
		for (size_t i = 0; i < q->n; i++)
			if (best == q->n || q->e[i].due_ns < q->e[best].due_ns)
				best = i;
		if (best < q->n && q->e[best].due_ns <= now) {
			key = q->e[best].key;
			q->e[best] = q->e[--q->n];
			break;
		}
		if (now >= deadline)
			break;
		if (best < q->n && q->e[best].due_ns < wake)
			wake = q->e[best].due_ns;
		struct timespec ts = gaz_abstime_of(wake);
		pthread_cond_timedwait(&q->cv, &q->mu, &ts);
	}
	pthread_mutex_unlock(&q->mu);
	return key;
}

size_t gaz_queue_len(struct gaz_queue *q)
{
	pthread_mutex_lock(&q->mu);
	size_t n = q->n;
	pthread_mutex_unlock(&q->mu);
	return n;
}

void gaz_queue_shutdown(struct gaz_queue *q)
{
	pthread_mutex_lock(&q->mu);
	q->down = true;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}
