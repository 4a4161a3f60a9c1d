/*
 * strset.c - open addressing with linear probing; removal shifts the
 * following run back (no tombstones), so lookups stay short after many
 * removals. The table doubles past 1/2 full. See strset.h.
 */
#include "common/strset.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static size_t hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
	return (size_t)(h ^ (h >> 29));
}

/* The slot holding `s`, or the free slot where it would go. */
static size_t find(const struct gaz_strset *set, const char *s)
{
	size_t mask = set->cap - 1, i = hash(s) & mask;

	while (set->slots[i] && strcmp(set->slots[i], s))
		i = (i + 1) & mask;
	return i;
}

static int grow(struct gaz_strset *set)
{
	size_t ncap = set->cap ? set->cap * 2 : 64;
	struct gaz_strset n = {calloc(ncap, sizeof(char *)), ncap, 0};

	if (!n.slots)
		return -1;
	for (size_t i = 0; i < set->cap; i++)
		if (set->slots[i]) {
			n.slots[find(&n, set->slots[i])] = set->slots[i];
			n.n++;
		}
	free(set->slots);
	*set = n;
	return 0;
}

int gaz_strset_add(struct gaz_strset *set, const char *s)
{
	size_t i;
	char *c;

	if ((set->n + 1) * 2 > set->cap && grow(set))
		return -1;
	i = find(set, s);
	if (set->slots[i])
		return 0;
	if (!(c = strdup(s)))
		return -1;
	set->slots[i] = c;
	set->n++;
	return 1;
}

bool gaz_strset_has(const struct gaz_strset *set, const char *s)
{
	return set->n && set->slots[find(set, s)];
}

/* Empties slot `i` and moves back the entries after it that probed past
 * it, so every entry stays reachable from its home slot. */
static void vacate(struct gaz_strset *set, size_t i)
{
	size_t mask = set->cap - 1, j = i;

	set->slots[i] = NULL;
	set->n--;
	for (;;) {
		j = (j + 1) & mask;
		if (!set->slots[j])
			return;
		size_t home = hash(set->slots[j]) & mask;
		/* Entry j may move to i when i lies on its probe path,
		 * cyclically in [home, j). */
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			set->slots[i] = set->slots[j];
			set->slots[j] = NULL;
			i = j;
		}
	}
}

bool gaz_strset_remove(struct gaz_strset *set, const char *s)
{
	size_t i;

	if (!set->n)
		return false;
	i = find(set, s);
	if (!set->slots[i])
		return false;
	free(set->slots[i]);
	vacate(set, i);
	return true;
}

char **gaz_strset_drain(struct gaz_strset *set, size_t *n)
{
	char **out = malloc((set->n + 1) * sizeof(char *));
	size_t k = 0;

	*n = 0;
	if (!out)
		return NULL;
	for (size_t i = 0; i < set->cap; i++)
		if (set->slots[i]) {
			out[k++] = set->slots[i];
			set->slots[i] = NULL;
		}
	set->n = 0;
	*n = k;
	return out;
}

const char *gaz_strset_next(const struct gaz_strset *set, size_t *pos)
{
	for (; *pos < set->cap; (*pos)++)
		if (set->slots[*pos])
			return set->slots[(*pos)++];
	return NULL;
}

void gaz_strset_clear(struct gaz_strset *set)
{
	for (size_t i = 0; i < set->cap; i++) {
		free(set->slots[i]);
		set->slots[i] = NULL;
	}
	set->n = 0;
}

void gaz_strset_release(struct gaz_strset *set)
{
	gaz_strset_clear(set);
	free(set->slots);
	set->slots = NULL;
	set->cap = 0;
}
