/*
 * labels.c - label, label set and selector validation (gazette-facts §3.3)
 * and the heap label-set helpers of labels.h: lifecycle, lookup, add/set/
 * remove.
 *
 * Invariant of sets built here: `labels` is NULL or a malloc'd array
 * holding (at least) n_labels malloc'd labels whose name and value are
 * malloc'd. Insertions keep (name, value) byte order.
 */
#include "protocol/labels.h"
#include "protocol/validate.h"
#include "protocol/vctx.h"

#include <stdlib.h>
#include <string.h>

/* ---- validation ------------------------------------------------------------ */

static int validate_label(const Protocol__Label *l, bool allow_prefix,
			  const struct gaz__vctx *c, struct gaz_status *st)
{
	const char *name = l ? gaz__str(l->name) : "";
	const char *value = l ? gaz__str(l->value) : "";
	GAZ__VCTX(cn, c, "Name", -1);
	GAZ__VCTX(cv, c, "Value", -1);

	if (gaz__validate_token(name, strlen(name), GAZ_TOKEN_SYMBOLS, GAZ_LABEL_NAME_MIN,
				GAZ_LABEL_NAME_MAX, &cn, st))
		return GAZ_EINVAL;
	if (gaz__validate_token(value, strlen(value), GAZ_PATH_SYMBOLS, 0, GAZ_LABEL_VALUE_MAX,
				&cv, st))
		return GAZ_EINVAL;
	if (l && l->prefix && !allow_prefix)
		return gaz__verr(st, c, "Prefix may not be set outside of a LabelSelector");
	return 0;
}

int gaz_validate_label(const Protocol__Label *l, bool allow_prefix, struct gaz_status *st)
{
	return validate_label(l, allow_prefix, NULL, st);
}

/* Order of labels[i-1] and labels[i] (both already valid). */
static int check_order(const Protocol__Label *a, const Protocol__Label *b, size_t i,
		       const struct gaz__vctx *c, struct gaz_status *st)
{
	int cmp = strcmp(gaz__str(a->name), gaz__str(b->name));

	if (cmp < 0)
		return 0;
	if (cmp > 0)
		return gaz__verr(st, c,
				 "Labels not in unique, sorted order (index %zu; label name %s <= %s)",
				 i, b->name, a->name);
	if (strcmp(gaz__str(a->value), gaz__str(b->value)) >= 0)
		return gaz__verr(st, c,
				 "Labels not in unique, sorted order (index %zu; label %s value %s <= %s)",
				 i, b->name, gaz__str(b->value), gaz__str(a->value));
	if (gaz__str(a->value)[0] == '\0')
		return gaz__verr(st, c,
				 "Label has empty & non-empty values (index %zu; label %s value %s)", i,
				 b->name, gaz__str(b->value));
	return 0;
}

int gaz__validate_labelset(const Protocol__LabelSet *set, bool allow_prefix,
			   const struct gaz__vctx *c, struct gaz_status *st)
{
	size_t n = set ? set->n_labels : 0;

	for (size_t i = 0; i < n; i++) {
		GAZ__VCTX(ci, c, "Labels", (long)i);

		if (validate_label(set->labels[i], allow_prefix, &ci, st))
			return GAZ_EINVAL;
		if (i > 0 && check_order(set->labels[i - 1], set->labels[i], i, c, st))
			return GAZ_EINVAL;
	}
	return 0;
}

int gaz_validate_labelset(const Protocol__LabelSet *set, bool allow_prefix,
			  struct gaz_status *st)
{
	return gaz__validate_labelset(set, allow_prefix, NULL, st);
}

int gaz__validate_selector(const Protocol__LabelSelector *sel, const struct gaz__vctx *c,
			   struct gaz_status *st)
{
	GAZ__VCTX(ci, c, "Include", -1);
	GAZ__VCTX(ce, c, "Exclude", -1);

	if (!sel)
		return 0;
	if (gaz__validate_labelset(sel->include, true, &ci, st))
		return GAZ_EINVAL;
	return gaz__validate_labelset(sel->exclude, true, &ce, st);
}

int gaz_validate_selector(const Protocol__LabelSelector *sel, struct gaz_status *st)
{
	return gaz__validate_selector(sel, NULL, st);
}

static bool is_single_value_label(const char *name)
{
	static const char *const single[] = {
		"content-type",
		"app.gazette.dev/instance",
		"app.gazette.dev/managed-by",
		"app.gazette.dev/message-subtype",
		"app.gazette.dev/message-type",
		"app.gazette.dev/region",
	};

	for (size_t i = 0; i < sizeof(single) / sizeof(single[0]); i++)
		if (!strcmp(name, single[i]))
			return true;
	return false;
}

int gaz_validate_single_value_labels(const Protocol__LabelSet *set, struct gaz_status *st)
{
	size_t n = set ? set->n_labels : 0;

	for (size_t i = 1; i < n; i++) {
		const char *name = gaz__str(set->labels[i]->name);

		if (strcmp(gaz__str(set->labels[i - 1]->name), name) || !is_single_value_label(name))
			continue;
		return gaz__verr(st, NULL,
				 "expected single-value Label has multiple values (index %zu; label %s value %s)",
				 i, name, gaz__str(set->labels[i]->value));
	}
	return 0;
}

/* ---- lifecycle ------------------------------------------------------------- */

static Protocol__Label *label_new(const char *name, size_t name_len, const char *value,
				  bool prefix)
{
	Protocol__Label *l = malloc(sizeof(*l));

	if (!l)
		return NULL;
	protocol__label__init(l);
	l->name = strndup(name, name_len);
	l->value = strdup(gaz__str(value));
	l->prefix = prefix;
	if (!l->name || !l->value) {
		free(l->name);
		free(l->value);
		free(l);
		return NULL;
	}
	return l;
}

static void label_free(Protocol__Label *l)
{
	if (!l)
		return;
	free(l->name);
	free(l->value);
	free(l);
}

void gaz_labelset_init(Protocol__LabelSet *set)
{
	protocol__label_set__init(set);
}

void gaz_labelset_release(Protocol__LabelSet *set)
{
	if (!set)
		return;
	for (size_t i = 0; i < set->n_labels; i++)
		label_free(set->labels[i]);
	free(set->labels);
	protocol__label_set__init(set);
}

Protocol__LabelSet *gaz_labelset_new(void)
{
	Protocol__LabelSet *set = malloc(sizeof(*set));

	if (set)
		protocol__label_set__init(set);
	return set;
}

void gaz_labelset_free(Protocol__LabelSet *set)
{
	gaz_labelset_release(set);
	free(set);
}

int gaz_labelset_copy(Protocol__LabelSet *dst, const Protocol__LabelSet *src)
{
	Protocol__LabelSet tmp = PROTOCOL__LABEL_SET__INIT;
	size_t n = src ? src->n_labels : 0;

	if (n && !(tmp.labels = calloc(n, sizeof(*tmp.labels))))
		return GAZ_ENOMEM;
	for (; tmp.n_labels < n; tmp.n_labels++) {
		const Protocol__Label *l = src->labels[tmp.n_labels];
		const char *name = gaz__str(l->name);

		tmp.labels[tmp.n_labels] = label_new(name, strlen(name), l->value, l->prefix);
		if (!tmp.labels[tmp.n_labels]) {
			gaz_labelset_release(&tmp);
			return GAZ_ENOMEM;
		}
	}
	gaz_labelset_release(dst);
	*dst = tmp;
	return 0;
}

/* ---- lookup ---------------------------------------------------------------- */

size_t gaz_labelset_find(const Protocol__LabelSet *set, const char *name, size_t *first)
{
	size_t n = set ? set->n_labels : 0, i = 0, count = 0;

	while (i < n && strcmp(gaz__str(set->labels[i]->name), name))
		i++;
	while (i + count < n && !strcmp(gaz__str(set->labels[i + count]->name), name))
		count++;
	if (count && first)
		*first = i;
	return count;
}

const char *gaz_labelset_value_of(const Protocol__LabelSet *set, const char *name)
{
	size_t first;

	if (!gaz_labelset_find(set, name, &first))
		return NULL;
	return gaz__str(set->labels[first]->value);
}

bool gaz_labelset_equal(const Protocol__LabelSet *a, const Protocol__LabelSet *b)
{
	size_t n = a ? a->n_labels : 0;

	if (n != (b ? b->n_labels : 0))
		return false;
	for (size_t i = 0; i < n; i++) {
		const Protocol__Label *x = a->labels[i], *y = b->labels[i];

		if (strcmp(gaz__str(x->name), gaz__str(y->name)) ||
		    strcmp(gaz__str(x->value), gaz__str(y->value)) || !x->prefix != !y->prefix)
			return false;
	}
	return true;
}

/* ---- mutation -------------------------------------------------------------- */

/* Splits a trailing ":prefix" off `name`: returns the bare length. */
static size_t split_prefix(const char *name, bool *prefix)
{
	static const char suffix[] = ":prefix";
	size_t n = strlen(name), k = sizeof(suffix) - 1;

	*prefix = n >= k && !strcmp(name + n - k, suffix);
	return *prefix ? n - k : n;
}

/* Grows the array to hold one more label; the set is otherwise unchanged. */
static int reserve_one(Protocol__LabelSet *set)
{
	Protocol__Label **grown = realloc(set->labels, (set->n_labels + 1) * sizeof(*grown));

	if (!grown)
		return GAZ_ENOMEM;
	set->labels = grown;
	return 0;
}

/* Places `l` at index `at`; room for it was reserved. */
static void place_at(Protocol__LabelSet *set, size_t at, Protocol__Label *l)
{
	memmove(set->labels + at + 1, set->labels + at, (set->n_labels - at) * sizeof(*set->labels));
	set->labels[at] = l;
	set->n_labels++;
}

/* Inserts `l` (consumed, even on failure) at index `at`. */
static int insert_at(Protocol__LabelSet *set, size_t at, Protocol__Label *l)
{
	if (!l || reserve_one(set)) {
		label_free(l);
		return GAZ_ENOMEM;
	}
	place_at(set, at, l);
	return 0;
}

/* Compares label `l` with (name[0..nlen), value). */
static int label_cmp(const Protocol__Label *l, const char *name, size_t nlen, const char *value)
{
	const char *ln = gaz__str(l->name);
	size_t llen = strlen(ln);
	int c = memcmp(ln, name, llen < nlen ? llen : nlen);

	if (c == 0 && llen != nlen)
		c = llen < nlen ? -1 : 1;
	return c ? c : strcmp(gaz__str(l->value), value);
}

int gaz_labelset_add(Protocol__LabelSet *set, const char *name, const char *value)
{
	bool prefix;
	size_t nlen = split_prefix(name, &prefix), at = 0;

	value = gaz__str(value);
	while (at < set->n_labels && label_cmp(set->labels[at], name, nlen, value) < 0)
		at++;
	if (at < set->n_labels && label_cmp(set->labels[at], name, nlen, value) == 0 &&
	    !set->labels[at]->prefix == !prefix)
		return 0;
	return insert_at(set, at, label_new(name, nlen, value, prefix));
}

void gaz_labelset_remove(Protocol__LabelSet *set, const char *name)
{
	size_t first, n = gaz_labelset_find(set, name, &first);

	if (!n)
		return;
	for (size_t i = first; i < first + n; i++)
		label_free(set->labels[i]);
	memmove(set->labels + first, set->labels + first + n,
		(set->n_labels - first - n) * sizeof(*set->labels));
	set->n_labels -= n;
}

int gaz_labelset_set(Protocol__LabelSet *set, const char *name, const char *value)
{
	bool prefix;
	size_t nlen = split_prefix(name, &prefix), at = 0;
	Protocol__Label *l = label_new(name, nlen, value, prefix);

	if (!l || reserve_one(set)) {
		label_free(l);
		return GAZ_ENOMEM;
	}
	gaz_labelset_remove(set, l->name);
	while (at < set->n_labels && strcmp(gaz__str(set->labels[at]->name), l->name) < 0)
		at++;
	place_at(set, at, l);
	return 0;
}
