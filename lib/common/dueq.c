/* dueq.c - see dueq.h. Parent of i is (i - 1) / 2, children 2i+1, 2i+2. */
#include "common/dueq.h"

#include <stdlib.h>
#include <string.h>

int gaz_dueq_push(struct gaz_dueq *q, int64_t due_ns, const char *name)
{
	char *copy = strdup(name);
	size_t i;

	if (!copy)
		return -1;
	if (q->n == q->cap) {
		size_t ncap = q->cap ? q->cap * 2 : 64;
		void *p = realloc(q->e, ncap * sizeof(*q->e));
		if (!p) {
			free(copy);
			return -1;
		}
		q->e = p;
		q->cap = ncap;
	}
	for (i = q->n++; i > 0 && q->e[(i - 1) / 2].due_ns > due_ns; i = (i - 1) / 2)
		q->e[i] = q->e[(i - 1) / 2];
	q->e[i] = (struct gaz_due){due_ns, copy};
	return 0;
}

bool gaz_dueq_due_by(const struct gaz_dueq *q, int64_t now_ns)
{
	return q->n && q->e[0].due_ns <= now_ns;
}

int64_t gaz_dueq_earliest(const struct gaz_dueq *q)
{
	return q->n ? q->e[0].due_ns : INT64_MAX;
}

bool gaz_dueq_pop(struct gaz_dueq *q, struct gaz_due *out)
{
	struct gaz_due last;
	size_t i = 0;

	if (!q->n)
		return false;
	*out = q->e[0];
	last = q->e[--q->n];
	/* Sift the last entry down from the root into the hole. */
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= q->n)
			break;
		if (c + 1 < q->n && q->e[c + 1].due_ns < q->e[c].due_ns)
			c++;
		if (q->e[c].due_ns >= last.due_ns)
			break;
		q->e[i] = q->e[c];
		i = c;
	}
	if (q->n)
		q->e[i] = last;
	return true;
}

void gaz_dueq_release(struct gaz_dueq *q)
{
	for (size_t i = 0; i < q->n; i++)
		free(q->e[i].name);
	free(q->e);
	*q = (struct gaz_dueq){0};
}
