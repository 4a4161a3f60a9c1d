/*
 * steps.h - tasks that run in steps on a bounded pool of threads.
 *
 * For work that is long-lived but mostly waits, such as a consumer
 * shard: instead of a thread per task, the task is a machine whose step
 * function runs until it would wait and returns when it wants to run
 * again, a due time or "when kicked". Whatever ends its wait (a
 * callback from a poller, another thread) kicks it, and a pool thread
 * runs its next step. However many tasks there are, the pool holds its
 * `threads` threads; a step that blocks (a store's commit) holds one of
 * them while it blocks.
 *
 * A task's steps never run concurrently with each other. A kick while
 * its step runs makes it run again once that step returns, so a wake
 * that comes between a step's last look and its return is never lost.
 *
 * Locking: the pool's mutex guards every task's pool fields (state,
 * kicked, due_ns, heap_i, next), the run queue and the timer heap. It is
 * never held while a step runs, so a step may kick (itself or another
 * task), and a kick may be made under the caller's own locks.
 */
#ifndef GAZ_COMMON_STEPS_H
#define GAZ_COMMON_STEPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A step's return: the task is over (gaz_steps_join returns). */
#define GAZ_STEP_DONE INT64_MIN

struct gaz_steps;

struct gaz_step_task {
	/* Set by the owner before gaz_steps_add. step returns when to run
	 * again: a monotonic time (gaz_mono_ns; now or earlier = at once),
	 * GAZ_DEADLINE_NEVER (only when kicked), or GAZ_STEP_DONE. */
	int64_t (*step)(struct gaz_step_task *t);
	/* The pool's (its mutex): */
	struct gaz_steps *pool;
	int state;
	bool kicked;
	int64_t due_ns;
	size_t heap_i;              /* 1 + index in the timer heap; 0 = none */
	struct gaz_step_task *next; /* the run queue */
};

/* gaz_steps_new starts a pool of `threads` threads (at least 1), named
 * `name` (15 bytes at most, for top -H). Returns 0 and *out, or
 * GAZ_ENOMEM (nothing started). */
int gaz_steps_new(int threads, const char *name, struct gaz_steps **out);

/* gaz_steps_add runs `t` (its step set, the rest zeroed) for the first
 * time as soon as a thread is free. */
void gaz_steps_add(struct gaz_steps *p, struct gaz_step_task *t);

/* gaz_steps_kick runs t's next step soon, whatever it waits for: at once
 * if it waits, after the running step otherwise. Thread-safe, cheap, and
 * never calls out: callbacks may kick under their own locks. A task that
 * is done ignores it. */
void gaz_steps_kick(struct gaz_step_task *t);

/* gaz_steps_join waits until t's step returned GAZ_STEP_DONE; t is then
 * the owner's to free. */
void gaz_steps_join(struct gaz_step_task *t);

/* gaz_steps_free stops the pool's threads and frees it. Every task added
 * must be done. NULL is ignored. */
void gaz_steps_free(struct gaz_steps *p);

#endif
