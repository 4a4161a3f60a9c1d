/*
 * coverset.c - the CoverSet: ordered fragments, none covering another.
 *
 * Because no entry covers another, sorting by begin also sorts by end, so
 * both "first entry beginning at or after X" and "first entry ending after
 * X" are binary searches. Add splices f over the run of entries it covers:
 *
 *   entries:  [100,200) [200,300) [300,400) [400,500)
 *   add:           [150,                 450)
 *   result:   [100,200) [150,450) [400,500)
 *
 * f is dropped instead when the entry just before the run (begin < f.begin)
 * reaches f.end, or the entry just after it (end > f.end) begins at or
 * before f.begin: exactly the entries able to cover f. Not thread-safe.
 */
#include "fragment/coverset.h"

#include "common/log.h"

#include <stdlib.h>
#include <string.h>

void gaz_coverset_init(struct gaz_coverset *cs)
{
	memset(cs, 0, sizeof(*cs));
}

static void cover_release(struct gaz_cover *c)
{
	gaz_fragment_release(&c->frag);
	gaz_fragment_file_unref(c->file);
	c->file = NULL;
}

void gaz_coverset_release(struct gaz_coverset *cs)
{
	for (size_t i = 0; i < cs->len; i++)
		cover_release(&cs->v[i]);
	free(cs->v);
	memset(cs, 0, sizeof(*cs));
}

/* First index whose begin >= off (cs->len if none). */
static size_t first_begin_at_or_after(const struct gaz_coverset *cs, int64_t off)
{
	size_t lo = 0, hi = cs->len;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cs->v[mid].frag.begin >= off)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* First index whose end > off (cs->len if none). */
static size_t first_end_after(const struct gaz_coverset *cs, int64_t off)
{
	size_t lo = 0, hi = cs->len;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cs->v[mid].frag.end > off)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static int reserve(struct gaz_coverset *cs, size_t need, struct gaz_status *st)
{
	size_t cap = cs->cap ? cs->cap : 8;
	struct gaz_cover *v;

	if (need <= cs->cap)
		return 0;
	while (cap < need)
		cap *= 2;
	v = realloc(cs->v, cap * sizeof(*v));
	if (!v)
		return gaz_status_set(st, GAZ_ENOMEM, "growing fragment index to %zu failed", cap);
	cs->v = v;
	cs->cap = cap;
	return 0;
}

/* Replaces entries [lo, hi) by one slot at lo (capacity already reserved). */
static void splice_slot(struct gaz_coverset *cs, size_t lo, size_t hi)
{
	for (size_t i = lo; i < hi; i++)
		cover_release(&cs->v[i]);
	memmove(&cs->v[lo + 1], &cs->v[hi], (cs->len - hi) * sizeof(cs->v[0]));
	cs->len = cs->len - (hi - lo) + 1;
}

int gaz_coverset_add(struct gaz_coverset *cs, const struct gaz_fragment *f,
		     struct gaz_fragment_file *file, bool *added, struct gaz_status *st)
{
	size_t lo = first_begin_at_or_after(cs, f->begin);
	size_t hi = first_end_after(cs, f->end);
	struct gaz_cover c = {.file = NULL};
	int rc;

	if (added)
		*added = false;
	if (f->begin >= f->end)
		return 0; /* empty fragments carry nothing to index */
	if (lo > 0 && cs->v[lo - 1].frag.end >= f->end)
		return 0; /* covered by an entry beginning earlier */
	if (hi < cs->len && cs->v[hi].frag.begin <= f->begin)
		return 0; /* covered by an entry ending later */
	GAZ_BUG_ON(hi < lo);
	if ((rc = reserve(cs, cs->len + 1, st)) || (rc = gaz_fragment_copy(&c.frag, f, st)))
		return rc;
	c.file = gaz_fragment_file_ref(file);
	splice_slot(cs, lo, hi);
	cs->v[lo] = c;
	if (added)
		*added = true;
	return 0;
}

size_t gaz_coverset_lookup(const struct gaz_coverset *cs, int64_t offset, bool *found)
{
	size_t i = first_end_after(cs, offset);

	*found = i < cs->len && cs->v[i].frag.begin <= offset;
	if (!*found)
		return i;
	while (i + 1 < cs->len && cs->v[i + 1].frag.begin <= offset)
		i++;
	return i;
}

void gaz_coverset_summary(const struct gaz_coverset *cs, int64_t *begin, int64_t *end,
			  int64_t *mod_time)
{
	const struct gaz_fragment *first = cs->len ? &cs->v[0].frag : NULL;
	const struct gaz_fragment *last = cs->len ? &cs->v[cs->len - 1].frag : NULL;

	if (begin)
		*begin = first ? first->begin : 0;
	if (end)
		*end = last ? last->end : 0;
	if (mod_time)
		*mod_time = last ? last->mod_time : 0;
}

bool gaz_coverset_covered(const struct gaz_coverset *cs, int64_t begin, int64_t end)
{
	int64_t reach = begin;
	bool found;

	/* Walk the chain of entries; ends strictly increase, so it ends. */
	while (reach < end) {
		size_t i = gaz_coverset_lookup(cs, reach, &found);
		if (!found)
			return false;
		reach = cs->v[i].frag.end;
	}
	return true;
}

void gaz_coverset_difference(struct gaz_coverset *a, const struct gaz_coverset *b)
{
	size_t out = 0;

	for (size_t i = 0; i < a->len; i++) {
		if (gaz_coverset_covered(b, a->v[i].frag.begin, a->v[i].frag.end))
			cover_release(&a->v[i]);
		else
			a->v[out++] = a->v[i];
	}
	a->len = out;
}

int gaz_coverset_replace_remote(struct gaz_coverset *set, struct gaz_coverset *local,
				struct gaz_coverset *remote, struct gaz_status *st)
{
	bool added;
	int rc;

	gaz_coverset_difference(local, remote);
	for (size_t i = 0; i < local->len; i++) {
		rc = gaz_coverset_add(remote, &local->v[i].frag, local->v[i].file, &added, st);
		if (rc)
			return rc;
		/* Not covered by the union of remote, so no single entry covers
		 * it; nor does another local entry (local is a cover set). */
		GAZ_BUG_ON(!added);
	}
	gaz_coverset_release(set);
	*set = *remote;
	memset(remote, 0, sizeof(*remote));
	return 0;
}
