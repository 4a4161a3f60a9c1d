/*
 * cmd_list.c - `gazctl journals list`: list journal specifications and
 * their routes (facts §9.1). Output formats as Gazette's:
 *   table  Name [RF] [Primary] [Replicas] [Stores] [label columns...]
 *          (tablewriter style; primary "<none>" without one, " <S>" when
 *          suspended; "<none>" for absent labels and stores)
 *   yaml   the hoisted journal hierarchy `journals apply` takes (§9.2)
 *   json   the ListResponse as jsonpb (proto names, defaults emitted)
 */
#include <stdlib.h>
#include <string.h>

#include "client/gazctl/gazctl.h"
#include "gazette/journal_json.h"
#include "gazette/journalspec_yaml.h"
#include "protocol/labels.h"

static struct {
	char *selector, *format;
	struct gaz_strlist labels;
	bool primary, replicas, rf, stores, watch;
} opt;

#define LIST_FLAG(n, s, t, d, h, ini, p, ch)                                                  \
	{ .name = n, .short_name = s, .type = t, .def = d, .help = h, .ptr = p,             \
	  .group = "journals.list", .ini_name = ini, .choices = ch }

static const struct gaz_flag flags[] = {
	LIST_FLAG("selector", 'l', GAZ_FLAG_STRING, NULL, "Label Selector query to filter on",
		  "Selector", &opt.selector, NULL),
	LIST_FLAG("format", 'o', GAZ_FLAG_STRING, "table", "Output format", "Format", &opt.format,
		  "table|yaml|json|proto"),
	LIST_FLAG("label-columns", 'L', GAZ_FLAG_STRLIST, NULL,
		  "Labels to present as columns, eg -L label-one -L label-two", "Labels",
		  &opt.labels, NULL),
	LIST_FLAG("primary", 'p', GAZ_FLAG_BOOL, NULL, "Show primary column", "Primary",
		  &opt.primary, NULL),
	LIST_FLAG("replicas", 'r', GAZ_FLAG_BOOL, NULL, "Show replicas column", "Replicas",
		  &opt.replicas, NULL),
	LIST_FLAG("rf", 0, GAZ_FLAG_BOOL, NULL, "Show replication factor column", "RF", &opt.rf,
		  NULL),
	LIST_FLAG("stores", 0, GAZ_FLAG_BOOL, NULL, "Show fragment store column", "Stores",
		  &opt.stores, NULL),
	LIST_FLAG("watch", 0, GAZ_FLAG_BOOL, NULL, "Use a long-lived watch", "Watch", &opt.watch,
		  NULL),
	{ 0 },
};

/* route_cells fills the Primary and Replicas cells (malloc'd). */
static void route_cells(const Protocol__ListResponse__Journal *j, char **primary, char **replicas)
{
	const Protocol__Route *rt = j->route;
	size_t len = 1;

	*primary = NULL;
	for (size_t i = 0; rt && i < rt->n_members; i++)
		len += strlen(rt->members[i]->suffix ? rt->members[i]->suffix : "") + 1;
	*replicas = gazctl_xcalloc(1, len);
	for (size_t i = 0; rt && i < rt->n_members; i++) {
		const char *sfx = rt->members[i]->suffix ? rt->members[i]->suffix : "";
		if ((int32_t)i == rt->primary) {
			*primary = gazctl_xstrdup(sfx);
			continue;
		}
		if ((*replicas)[0])
			strcat(*replicas, ",");
		strcat(*replicas, sfx);
	}
	if (!*primary)
		*primary = gazctl_xstrdup("<none>");
	if (j->spec->suspend && j->spec->suspend->level) {
		*primary = gazctl_xrealloc(*primary, strlen(*primary) + 5);
		strcat(*primary, " <S>");
	}
}

/* journal_row builds the cells of one journal (all malloc'd). */
static size_t journal_row(const Protocol__ListResponse__Journal *j, char **cells)
{
	const Protocol__JournalSpec *s = j->spec;
	char *primary, *replicas, rf[16];
	size_t n = 0;

	route_cells(j, &primary, &replicas);
	cells[n++] = gazctl_xstrdup(s->name);
	snprintf(rf, sizeof(rf), "%d", (int)s->replication);
	if (opt.rf)
		cells[n++] = gazctl_xstrdup(rf);
	if (opt.primary)
		cells[n++] = gazctl_xstrdup(primary);
	if (opt.replicas)
		cells[n++] = gazctl_xstrdup(replicas);
	if (opt.stores)
		cells[n++] = gazctl_xstrdup(s->fragment && s->fragment->n_stores
						    ? s->fragment->stores[0]
						    : "<none>");
	for (size_t i = 0; i < opt.labels.n; i++)
		cells[n++] = gazctl_label_values(s->labels, opt.labels.v[i]);
	free(primary);
	free(replicas);
	return n;
}

static void output_table(const Protocol__ListResponse *resp)
{
	const char *hdr[5 + 256];
	size_t nh = 0;
	struct gazctl_table t;
	char *cells[5 + 256];

	hdr[nh++] = "Name";
	if (opt.rf)
		hdr[nh++] = "RF";
	if (opt.primary)
		hdr[nh++] = "Primary";
	if (opt.replicas)
		hdr[nh++] = "Replicas";
	if (opt.stores)
		hdr[nh++] = "Stores";
	for (size_t i = 0; i < opt.labels.n && i < 256; i++)
		hdr[nh++] = opt.labels.v[i];
	gazctl_table_init(&t, nh, hdr);
	for (size_t i = 0; i < resp->n_journals; i++) {
		size_t n = journal_row(resp->journals[i], cells);
		gazctl_table_add(&t, (const char *const *)cells);
		for (size_t k = 0; k < n; k++)
			free(cells[k]);
	}
	gazctl_table_render(&t, stdout);
	gazctl_table_release(&t);
}

static int output_text(const Protocol__ListResponse *resp, struct gaz_status *st)
{
	char *text = NULL;
	size_t len = 0;
	int rc;

	if (!strcmp(opt.format, "yaml"))
		rc = gaz_journalspec_yaml_emit_list(resp, &text, &len, st);
	else
		rc = gaz_journal_json_list_response(resp, &text, &len, st);
	if (rc) {
		gaz_status_prefix(st, "failed to encode journals: ");
		return rc;
	}
	fwrite(text, 1, len, stdout);
	free(text);
	return 0;
}

static int run(struct gaz_client *c, struct gaz_status *st)
{
	Protocol__ListResponse *resp;
	int rc;

	if (opt.watch)
		return gaz_status_set(st, GAZ_EINVAL, "--watch is not supported yet");
	if (!strcmp(opt.format, "proto"))
		return gaz_status_set(st, GAZ_EINVAL, "--format proto is not supported yet");
	if (opt.labels.n > 256)
		return gaz_status_set(st, GAZ_EINVAL, "too many --label-columns (max 256)");
	if ((rc = gazctl_list_selector(c, opt.selector, &resp, st)))
		return rc;
	if (!strcmp(opt.format, "table"))
		output_table(resp);
	else
		rc = output_text(resp, st);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

const struct gazctl_cmd gazctl_cmd_list = {
	.name = "list",
	.summary = "List journals",
	.description = "List journal specifications and status.\n\n"
		       "Use --selector to supply a LabelSelector which constrains the set of "
		       "returned\njournals. Journal selectors support additional meta-labels "
		       "\"name\" and \"prefix\".\n\n"
		       "Results can be output in a variety of --format options:\n"
		       "yaml:  Prints a YAML journal hierarchy, compatible with \"journals apply\"\n"
		       "json:  Prints JournalSpecs encoded as JSON\n"
		       "table: Prints as a table (see other flags for column choices)",
	.flags = flags,
	.needs_client = true,
	.run = run,
};
