/*
 * util.c - small helpers shared by gazctl's commands: allocation that
 * aborts on OOM (a program may, style.md), selector listing, and the
 * FULL-suspension test several commands filter journals with.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/gazctl/gazctl.h"
#include "protocol/labels.h"

static void oom(void)
{
	fputs("gazctl: out of memory\n", stderr);
	abort();
}

void *gazctl_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		oom();
	return p;
}

void *gazctl_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p)
		oom();
	return p;
}

void *gazctl_xrealloc(void *p, size_t n)
{
	if (!(p = realloc(p, n ? n : 1)))
		oom();
	return p;
}

char *gazctl_xstrdup(const char *s)
{
	char *d = strdup(s ? s : "");

	if (!d)
		oom();
	return d;
}

int gazctl_list_selector(struct gaz_client *c, const char *selector,
			 Protocol__ListResponse **out, struct gaz_status *st)
{
	Protocol__LabelSelector *sel = NULL;
	int rc;

	if ((rc = gaz_selector_parse(selector ? selector : "", &sel, st))) {
		gaz_status_prefix(st, "failed to parse label selector \"%s\": ",
				  selector ? selector : "");
		return rc;
	}
	if ((rc = gaz_client_list(c, sel, out, st)))
		gaz_status_prefix(st, "failed to list journals: ");
	gaz_selector_free(sel);
	return rc;
}

bool gazctl_is_full_suspended(const Protocol__ListResponse__Journal *j)
{
	return j->spec && j->spec->suspend &&
	       j->spec->suspend->level == PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__FULL;
}

int gazctl_each_unsuspended(struct gaz_client *c, const char *selector,
			    int (*fn)(struct gaz_client *c, const char *journal, struct gaz_status *st),
			    struct gaz_status *st)
{
	Protocol__ListResponse *list;
	int rc;

	if ((rc = gazctl_list_selector(c, selector, &list, st)))
		return rc;
	for (size_t i = 0; !rc && i < list->n_journals; i++)
		if (!gazctl_is_full_suspended(list->journals[i]))
			rc = fn(c, list->journals[i]->spec->name, st);
	protobuf_c_message_free_unpacked(&list->base, NULL);
	return rc;
}

char *gazctl_label_values(const Protocol__LabelSet *set, const char *name)
{
	size_t first, n = gaz_labelset_find(set, name, &first), len = 1;
	char *out;

	if (n == 0)
		return gazctl_xstrdup("<none>");
	for (size_t i = 0; i < n; i++)
		len += strlen(set->labels[first + i]->value ? set->labels[first + i]->value : "") + 1;
	out = gazctl_xcalloc(1, len);
	for (size_t i = 0; i < n; i++) {
		if (i)
			strcat(out, ",");
		strcat(out, set->labels[first + i]->value ? set->labels[first + i]->value : "");
	}
	return out;
}

int gazctl_read_file(const char *path, char **buf, size_t *len, struct gaz_status *st)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	size_t cap = 64 * 1024, n;

	if (!f)
		return gaz_status_set(st, GAZ_EIO, "failed to read YAML input: open %s: %s", path,
				      strerror(errno));
	*buf = gazctl_xmalloc(cap + 1);
	*len = 0;
	while ((n = fread(*buf + *len, 1, cap - *len, f)) > 0) {
		*len += n;
		if (*len == cap && cap < GAZCTL_SPECS_MAX)
			*buf = gazctl_xrealloc(*buf, (cap *= 2) + 1);
		else if (*len == cap)
			break;
	}
	int bad = ferror(f) || *len == GAZCTL_SPECS_MAX;
	if (f != stdin)
		fclose(f);
	(*buf)[*len] = '\0';
	if (bad)
		return gaz_status_set(st, GAZ_EIO, "failed to read YAML input %s", path);
	return 0;
}
