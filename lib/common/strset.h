/*
 * strset.h - a set of strings (owned copies), by open addressing.
 *
 * For bookkeeping keyed by name, such as the allocator's journals to plan
 * and journals not yet stable: insert, remove and lookup in expected
 * constant time, iteration in no particular order.
 *
 * Not thread-safe: the owner serialises every call.
 */
#ifndef GAZ_COMMON_STRSET_H
#define GAZ_COMMON_STRSET_H

#include <stdbool.h>
#include <stddef.h>

struct gaz_strset {
	char **slots;   /* cap slots, NULL when free */
	size_t cap, n;  /* cap: 0 or a power of two */
};

/* A zeroed gaz_strset is empty and ready. */

/* gaz_strset_add inserts a copy of `s`. Returns 1 if added, 0 if it was
 * present, -1 when out of memory (the set is unchanged). */
int gaz_strset_add(struct gaz_strset *set, const char *s);
/* gaz_strset_has: whether `s` is in the set. */
bool gaz_strset_has(const struct gaz_strset *set, const char *s);
/* gaz_strset_remove removes `s`; returns whether it was present. */
bool gaz_strset_remove(struct gaz_strset *set, const char *s);
/* gaz_strset_drain empties the set into a new array of its members (in
 * no order; *n of them), which the caller owns with each string. Returns
 * NULL (the set unchanged, *n 0) when out of memory. */
char **gaz_strset_drain(struct gaz_strset *set, size_t *n);
/* gaz_strset_next iterates: from *pos (0 to begin) it returns the next
 * member (borrowed) and advances *pos past it, or NULL at the end. The set
 * must not change during the iteration. */
const char *gaz_strset_next(const struct gaz_strset *set, size_t *pos);
/* gaz_strset_clear empties the set, keeping its table. */
void gaz_strset_clear(struct gaz_strset *set);
/* gaz_strset_release frees everything; the set is empty after. */
void gaz_strset_release(struct gaz_strset *set);

#endif
