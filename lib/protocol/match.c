/*
 * match.c - LabelSelector matching (gazette-facts §3.3) and the journal
 * meta-labels of resolution, List and Apply (§2.0 step 6, §2.4 step 2).
 *
 * Semantics, per label NAME: an exclude name excludes the set when any of
 * its selector values matches any set value of that name; an include name is
 * satisfied when any of its selector values matches any set value of that
 * name; every include name must be satisfied. Value match: selector value
 * "" matches any value; a prefix label matches values it prefixes; else
 * byte equality. Scanning is O(selector x set) and needs no sorting; sets
 * are small.
 *
 * Meta-labels are not materialized: the "set" is a view of a LabelSet plus
 * an optional name=<journal> that hides any real "name" label, and with
 * GAZ_MATCH_PREFIX_META each selector label named "prefix" is read as a
 * prefix label named "name" (so it joins the OR of "name" values, exactly
 * like Gazette's rewrite to "name:prefix").
 */
#include "protocol/labels.h"
#include "protocol/vctx.h"

#include <string.h>

struct view {
	const Protocol__LabelSet *set;
	const char *meta_name; /* NULL: no name meta-label */
	unsigned flags;
};

/* The name and prefix flag a selector label has under v's flags. */
static const char *eff_name(const struct view *v, const Protocol__Label *l, bool *prefix)
{
	const char *name = gaz__str(l->name);

	*prefix = l->prefix;
	if ((v->flags & GAZ_MATCH_PREFIX_META) && !strcmp(name, "prefix")) {
		*prefix = true;
		return "name";
	}
	return name;
}

static bool value_matches(const char *sel, bool prefix, const char *val)
{
	if (sel[0] == '\0')
		return true;
	if (prefix)
		return !strncmp(val, sel, strlen(sel));
	return !strcmp(val, sel);
}

/* Whether the view holds a value of `name` matched by (sel, prefix). */
static bool view_has(const struct view *v, const char *name, const char *sel, bool prefix)
{
	size_t n = v->set ? v->set->n_labels : 0;

	if (v->meta_name && !strcmp(name, "name"))
		return value_matches(sel, prefix, v->meta_name);
	for (size_t i = 0; i < n; i++) {
		const Protocol__Label *l = v->set->labels[i];

		if (!strcmp(gaz__str(l->name), name) &&
		    value_matches(sel, prefix, gaz__str(l->value)))
			return true;
	}
	return false;
}

/* Whether any label of `s` with effective name `name` matches the view. */
static bool group_matches(const struct view *v, const Protocol__LabelSet *s, const char *name)
{
	for (size_t i = 0; i < s->n_labels; i++) {
		bool prefix;
		const char *n = eff_name(v, s->labels[i], &prefix);

		if (!strcmp(n, name) && view_has(v, n, gaz__str(s->labels[i]->value), prefix))
			return true;
	}
	return false;
}

static bool view_matches(const Protocol__LabelSelector *sel, const struct view *v)
{
	const Protocol__LabelSet *inc = sel ? sel->include : NULL;
	const Protocol__LabelSet *exc = sel ? sel->exclude : NULL;
	bool prefix;

	for (size_t i = 0; exc && i < exc->n_labels; i++) {
		const char *n = eff_name(v, exc->labels[i], &prefix);

		if (view_has(v, n, gaz__str(exc->labels[i]->value), prefix))
			return false;
	}
	for (size_t i = 0; inc && i < inc->n_labels; i++)
		if (!group_matches(v, inc, eff_name(v, inc->labels[i], &prefix)))
			return false;
	return true;
}

bool gaz_labelset_matches(const Protocol__LabelSelector *sel, const Protocol__LabelSet *set)
{
	struct view v = {.set = set, .meta_name = NULL, .flags = 0};

	return view_matches(sel, &v);
}

bool gaz_selector_matches_meta(const Protocol__LabelSelector *sel, const char *journal,
			       const Protocol__LabelSet *labels, unsigned flags)
{
	struct view v = {.set = labels, .meta_name = journal, .flags = flags};

	return view_matches(sel, &v);
}

bool gaz_selector_matches_journal(const Protocol__LabelSelector *sel,
				  const Protocol__JournalSpec *spec)
{
	return gaz_selector_matches_meta(sel, spec ? gaz__str(spec->name) : "",
					 spec ? spec->labels : NULL, GAZ_MATCH_PREFIX_META);
}
