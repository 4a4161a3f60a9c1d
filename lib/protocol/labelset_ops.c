/*
 * labelset_ops.c - per-name set algebra over sorted label sets: union,
 * subtract and the register update of a committed append (gazette-facts
 * §2.1 STREAM_CONTENT, §6.5).
 *
 * Both operate on NAME GROUPS (the run of labels sharing a name): union
 * takes a whole group from the left set when it has the name, else from the
 * right; subtract drops a left group only when the right group of the same
 * name has exactly the same value list. Results are built in a fresh set and
 * swapped into `out` last, so `out` may alias an input and is unchanged on
 * GAZ_ENOMEM.
 */
#include "protocol/labels.h"
#include "protocol/vctx.h"

#include <stdlib.h>
#include <string.h>

/* Cursor over the name groups of one set. */
struct groups {
	const Protocol__LabelSet *set;
	size_t beg, end; /* current group [beg, end); beg == n when done */
};

static size_t set_len(const Protocol__LabelSet *s)
{
	return s ? s->n_labels : 0;
}

static const char *name_at(const struct groups *g, size_t i)
{
	return gaz__str(g->set->labels[i]->name);
}

/* Advances to the group starting at g->end. */
static void groups_next(struct groups *g)
{
	g->beg = g->end;
	while (g->end < set_len(g->set) &&
	       !strcmp(name_at(g, g->end), name_at(g, g->beg)))
		g->end++;
}

static void groups_init(struct groups *g, const Protocol__LabelSet *set)
{
	g->set = set;
	g->beg = g->end = 0;
	groups_next(g);
}

static bool groups_done(const struct groups *g)
{
	return g->beg >= set_len(g->set);
}

/* Orders the current groups of l and r by name; a finished side is last. */
static int groups_cmp(const struct groups *l, const struct groups *r)
{
	if (groups_done(l))
		return groups_done(r) ? 0 : 1;
	if (groups_done(r))
		return -1;
	return strcmp(name_at(l, l->beg), name_at(r, r->beg));
}

/* Appends copies of the current group of g to tmp (capacity reserved). */
static int append_group(Protocol__LabelSet *tmp, const struct groups *g)
{
	for (size_t i = g->beg; i < g->end; i++) {
		const Protocol__Label *l = g->set->labels[i];
		Protocol__Label *c = malloc(sizeof(*c));

		if (!c)
			return GAZ_ENOMEM;
		protocol__label__init(c);
		c->name = strdup(gaz__str(l->name));
		c->value = strdup(gaz__str(l->value));
		c->prefix = l->prefix;
		tmp->labels[tmp->n_labels++] = c;
		if (!c->name || !c->value)
			return GAZ_ENOMEM; /* released with tmp by the caller */
	}
	return 0;
}

static bool group_values_equal(const struct groups *a, const struct groups *b)
{
	if (a->end - a->beg != b->end - b->beg)
		return false;
	for (size_t i = 0; i < a->end - a->beg; i++)
		if (strcmp(gaz__str(a->set->labels[a->beg + i]->value),
			   gaz__str(b->set->labels[b->beg + i]->value)))
			return false;
	return true;
}

/* Swaps the finished tmp into out, or releases it on failure. */
static int finish(Protocol__LabelSet *out, Protocol__LabelSet *tmp, int rc)
{
	if (rc) {
		for (size_t i = 0; i < tmp->n_labels; i++) {
			if (tmp->labels[i]) {
				free(tmp->labels[i]->name);
				free(tmp->labels[i]->value);
				free(tmp->labels[i]);
			}
		}
		free(tmp->labels);
		return rc;
	}
	gaz_labelset_release(out);
	*out = *tmp;
	return 0;
}

static int reserve(Protocol__LabelSet *tmp, size_t cap)
{
	protocol__label_set__init(tmp);
	if (cap && !(tmp->labels = calloc(cap, sizeof(*tmp->labels))))
		return GAZ_ENOMEM;
	return 0;
}

int gaz_labelset_union(Protocol__LabelSet *out, const Protocol__LabelSet *lhs,
		       const Protocol__LabelSet *rhs)
{
	Protocol__LabelSet tmp;
	struct groups l, r;
	int rc = reserve(&tmp, set_len(lhs) + set_len(rhs));

	if (rc)
		return rc;
	groups_init(&l, lhs);
	groups_init(&r, rhs);
	while (!rc && !(groups_done(&l) && groups_done(&r))) {
		int c = groups_cmp(&l, &r);

		rc = append_group(&tmp, c <= 0 ? &l : &r);
		if (c <= 0)
			groups_next(&l);
		if (c >= 0)
			groups_next(&r);
	}
	return finish(out, &tmp, rc);
}

int gaz_labelset_subtract(Protocol__LabelSet *out, const Protocol__LabelSet *lhs,
			  const Protocol__LabelSet *rhs)
{
	Protocol__LabelSet tmp;
	struct groups l, r;
	int rc = reserve(&tmp, set_len(lhs));

	if (rc)
		return rc;
	groups_init(&l, lhs);
	groups_init(&r, rhs);
	while (!rc && !groups_done(&l)) {
		int c = groups_cmp(&l, &r);

		if (c > 0) {
			groups_next(&r);
			continue;
		}
		if (c < 0 || !group_values_equal(&l, &r))
			rc = append_group(&tmp, &l);
		groups_next(&l);
		if (c == 0)
			groups_next(&r);
	}
	return finish(out, &tmp, rc);
}

int gaz_registers_update(Protocol__LabelSet *out, const Protocol__LabelSet *current,
			 const Protocol__LabelSet *union_regs,
			 const Protocol__LabelSet *subtract_regs)
{
	Protocol__LabelSet kept = PROTOCOL__LABEL_SET__INIT;
	int rc = gaz_labelset_subtract(&kept, current, subtract_regs);

	if (!rc)
		rc = gaz_labelset_union(out, union_regs, &kept);
	gaz_labelset_release(&kept);
	return rc;
}
