/*
 * util.c - small helpers shared by gazctl's commands: allocation that
 * aborts on OOM (a program may, style.md), selector listing, and the
 * FULL-suspension test several commands filter journals with.
 */
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
