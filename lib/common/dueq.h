/*
 * dueq.h - a queue of names by due time (a binary min-heap).
 *
 * For work that is due per name at its own time, such as a replica's next
 * pulse or next store listing: the owner pushes (due, name) and pops what
 * is due, instead of scanning every name on each wake. An entry is never
 * updated or removed in place; to reschedule, push again and recognise
 * the stale entry when it is popped (the owner keeps, per name, the due
 * time of its latest push and drops a popped entry that differs).
 *
 * Not thread-safe: the owner serialises every call.
 */
#ifndef GAZ_COMMON_DUEQ_H
#define GAZ_COMMON_DUEQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gaz_due {
	int64_t due_ns;   /* the owner's clock (monotonic ns in the broker) */
	char *name;       /* owned by the queue; by the caller once popped */
};

struct gaz_dueq {
	struct gaz_due *e;
	size_t n, cap;
};

/* A zeroed gaz_dueq is empty and ready. */

/* gaz_dueq_push queues a copy of `name` due at `due_ns`. Entries due at
 * the same time pop in no particular order. Returns 0, or -1 when out of
 * memory (the queue is unchanged). */
int gaz_dueq_push(struct gaz_dueq *q, int64_t due_ns, const char *name);
/* gaz_dueq_due_by: whether the earliest entry is due at or before
 * `now_ns`. */
bool gaz_dueq_due_by(const struct gaz_dueq *q, int64_t now_ns);
/* gaz_dueq_earliest returns the earliest due time, or INT64_MAX when the
 * queue is empty. */
int64_t gaz_dueq_earliest(const struct gaz_dueq *q);
/* gaz_dueq_pop removes the earliest entry into *out (its name is then the
 * caller's to free). Returns false when the queue is empty. */
bool gaz_dueq_pop(struct gaz_dueq *q, struct gaz_due *out);
/* gaz_dueq_release frees every entry; the queue is empty after. */
void gaz_dueq_release(struct gaz_dueq *q);

#endif
