/*
 * cmd_shards_list.c - `gazctl shards list`: list shard specifications and
 * their status from a consumer (facts §9.1). Output formats as Gazette's:
 *   table  ID Status [RF] [Primary] [Replicas] [label columns...] [Lag]
 *          (Status: the highest ReplicaStatus code of the shard's members;
 *          RF: hot_standbys + 1, or 0 when disabled; Primary and Replicas
 *          as "<member suffix>:<code>", "<none>" without a primary; Lag:
 *          "<journal>:<write head - read through>" per source journal the
 *          primary has read, joined by ", ")
 *   yaml   the hoisted shard set `shards apply` takes (§9.3)
 *   json   the ListResponse as jsonpb (proto names, defaults emitted)
 *   proto  the ListResponse in protobuf text format
 *
 * --lag costs one Stat of each shard (answered by its primary) and one
 * non-blocking Read at the write head of each journal it reads, through
 * --broker.address. Gazette prints the journals of a shard's lag in Go's
 * random map order; we print them sorted by name.
 */
#include <stdlib.h>
#include <string.h>

#include "client/gazctl/gazctl.h"
#include "gazette/journal_json.h"
#include "gazette/shard_client.h"
#include "gazette/shardspec_yaml.h"
#include "protocol/labels.h"

static struct {
	char *selector, *format;
	struct gaz_strlist labels;
	bool primary, replicas, rf, lag;
} opt;

#define LIST_FLAG(n, s, t, d, h, ini, p, ch)                                                  \
	{ .name = n, .short_name = s, .type = t, .def = d, .help = h, .ptr = p,             \
	  .group = "shards.list", .ini_name = ini, .choices = ch }

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
	LIST_FLAG("lag", 0, GAZ_FLAG_BOOL, NULL, "Show the amount of unread data for each shard",
		  "Lag", &opt.lag, NULL),
	{ 0 },
};

static const char *code_name(int code)
{
	const ProtobufCEnumValue *v =
		protobuf_c_enum_descriptor_get_value(&consumer__replica_status__code__descriptor, code);

	return v ? v->name : "UNKNOWN";
}

/* append_str appends `s` to the malloc'd *buf, with `sep` first unless
 * *buf is empty. */
static void append_str(char **buf, const char *sep, const char *s)
{
	size_t n = strlen(*buf), k = strlen(s), m = n ? strlen(sep) : 0;

	*buf = gazctl_xrealloc(*buf, n + m + k + 1);
	memcpy(*buf + n, sep, m);
	memcpy(*buf + n + m, s, k + 1);
}

/* route_cells fills the Status, Primary and Replicas cells (malloc'd). */
static void route_cells(const Consumer__ListResponse__Shard *sh, char **status, char **primary,
			char **replicas)
{
	const Protocol__Route *rt = sh->route;
	int code = CONSUMER__REPLICA_STATUS__CODE__IDLE;

	*primary = gazctl_xstrdup("<none>");
	*replicas = gazctl_xstrdup("");
	for (size_t i = 0; rt && i < rt->n_members && i < sh->n_status; i++) {
		int c = (int)sh->status[i]->code;
		const char *sfx = rt->members[i]->suffix ? rt->members[i]->suffix : "";
		char *cell = gazctl_xmalloc(strlen(sfx) + 32);

		sprintf(cell, "%s:%s", sfx, code_name(c));
		code = c > code ? c : code;
		if ((int32_t)i == rt->primary) {
			free(*primary);
			*primary = cell;
			continue;
		}
		append_str(replicas, ",", cell);
		free(cell);
	}
	*status = gazctl_xstrdup(code_name(code));
}

static int by_key(const void *a, const void *b)
{
	const Consumer__StatResponse__ReadThroughEntry *const *x = a, *const *y = b;

	return strcmp((*x)->key, (*y)->key);
}

/* write_head reads `journal` at its write head without blocking, as
 * Gazette's lag does (Read{offset -1}: OFFSET_NOT_YET_AVAILABLE). */
static int write_head(struct gaz_client *bc, const char *journal, int64_t *head,
		      struct gaz_status *st)
{
	struct gaz_read_opts o = {.journal = journal, .offset = -1};
	const struct gaz_read_meta *m;
	struct gaz_reader *r;
	char buf[1];
	size_t n;
	int rc;

	if ((rc = gaz_reader_new(bc, &o, &r, st)))
		return rc;
	do
		rc = gaz_reader_read(r, buf, sizeof(buf), &n, st);
	while (rc == GAZ_READ_JUMP || rc == GAZ_READ_META);
	m = gaz_reader_meta(r);
	*head = m && m->write_head ? m->write_head : gaz_reader_offset(r);
	gaz_reader_free(r);
	if (rc == GAZ_READ_TAIL || rc == GAZ_EOF || rc == 0)
		return 0;
	gaz_status_prefix(st, "failed to read journal \"%s\": ", journal);
	return rc;
}

/* lag_cell builds the Lag cell of one shard. */
static int lag_cell(struct gaz_client *c, struct gaz_client *bc, const Consumer__ShardSpec *spec,
		    char **out, struct gaz_status *st)
{
	Consumer__StatResponse *resp;
	int rc;

	*out = gazctl_xstrdup("");
	if ((rc = gaz_shard_stat(c, spec->id, &resp, st))) {
		gaz_status_prefix(st, "failed to stat shard: ");
		return rc;
	}
	qsort(resp->read_through, resp->n_read_through, sizeof(*resp->read_through), by_key);
	for (size_t i = 0; !rc && i < resp->n_read_through; i++) {
		const Consumer__StatResponse__ReadThroughEntry *e = resp->read_through[i];
		char *cell;
		int64_t head = 0;

		if ((rc = write_head(bc, e->key, &head, st)))
			break;
		cell = gazctl_xmalloc(strlen(e->key) + 32);
		sprintf(cell, "%s:%lld", e->key, (long long)(head - e->value));
		append_str(out, ", ", cell);
		free(cell);
	}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

/* shard_row builds the cells of one shard (all malloc'd); returns their
 * number, or a negative error of --lag. */
static int shard_row(struct gaz_client *c, struct gaz_client *bc,
		     const Consumer__ListResponse__Shard *sh, char **cells, struct gaz_status *st)
{
	const Consumer__ShardSpec *s = sh->spec;
	char *status, *primary, *replicas, rf[16];
	int n = 0, rc = 0;

	route_cells(sh, &status, &primary, &replicas);
	cells[n++] = gazctl_xstrdup(s->id);
	cells[n++] = status;
	snprintf(rf, sizeof(rf), "%u", s->disable ? 0u : s->hot_standbys + 1);
	if (opt.rf)
		cells[n++] = gazctl_xstrdup(rf);
	cells[n++] = primary;
	if (!opt.primary)
		free(cells[--n]);
	cells[n++] = replicas;
	if (!opt.replicas)
		free(cells[--n]);
	for (size_t i = 0; i < opt.labels.n; i++)
		cells[n++] = gazctl_label_values(s->labels, opt.labels.v[i]);
	if (opt.lag)
		rc = lag_cell(c, bc, s, &cells[n++], st);
	if (rc) {
		while (n > 0)
			free(cells[--n]);
		return rc;
	}
	return n;
}

static int output_table(struct gaz_client *c, const Consumer__ListResponse *resp,
			struct gaz_status *st)
{
	const char *hdr[6 + 256];
	char *cells[6 + 256];
	struct gaz_client *bc = NULL;
	struct gazctl_table t;
	size_t nh = 0;
	int rc = 0;

	hdr[nh++] = "ID";
	hdr[nh++] = "Status";
	if (opt.rf)
		hdr[nh++] = "RF";
	if (opt.primary)
		hdr[nh++] = "Primary";
	if (opt.replicas)
		hdr[nh++] = "Replicas";
	for (size_t i = 0; i < opt.labels.n; i++)
		hdr[nh++] = opt.labels.v[i];
	if (opt.lag) {
		hdr[nh++] = "Lag";
		if ((rc = gazctl_broker(&bc, st)))
			return rc;
	}
	gazctl_table_init(&t, nh, hdr);
	for (size_t i = 0; i < resp->n_shards; i++) {
		int n = shard_row(c, bc, resp->shards[i], cells, st);

		if (n < 0) {
			rc = n;
			break;
		}
		gazctl_table_add(&t, (const char *const *)cells);
		while (n > 0)
			free(cells[--n]);
	}
	if (!rc)
		gazctl_table_render(&t, stdout);
	gazctl_table_release(&t);
	return rc;
}

static int output_text(const Consumer__ListResponse *resp, struct gaz_status *st)
{
	char *text = NULL;
	size_t len = 0;
	int rc;

	if (!strcmp(opt.format, "proto")) {
		gazctl_proto_text(stdout, &resp->base);
		return 0;
	}
	if (!strcmp(opt.format, "yaml"))
		rc = gaz_shardspec_yaml_emit_list(resp, &text, &len, st);
	else
		rc = gaz_shard_json_list_response(resp, &text, &len, st);
	if (rc) {
		gaz_status_prefix(st, "failed to encode shards: ");
		return rc;
	}
	fwrite(text, 1, len, stdout);
	free(text);
	return 0;
}

int gazctl_list_shards(struct gaz_client *c, const char *selector, Consumer__ListResponse **out,
		       struct gaz_status *st)
{
	Protocol__LabelSelector *sel = NULL;
	int rc;

	if ((rc = gaz_selector_parse(selector ? selector : "", &sel, st))) {
		gaz_status_prefix(st, "failed to parse label selector \"%s\": ",
				  selector ? selector : "");
		return rc;
	}
	if ((rc = gaz_shard_list(c, sel, out, st)))
		gaz_status_prefix(st, "failed to list shards: ");
	gaz_selector_free(sel);
	return rc;
}

static int run(struct gaz_client *c, struct gaz_status *st)
{
	Consumer__ListResponse *resp;
	int rc;

	if (opt.labels.n > 256)
		return gaz_status_set(st, GAZ_EINVAL, "too many --label-columns (max 256)");
	if ((rc = gazctl_list_shards(c, opt.selector, &resp, st)))
		return rc;
	if (!strcmp(opt.format, "table"))
		rc = output_table(c, resp, st);
	else
		rc = output_text(resp, st);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

const struct gazctl_cmd gazctl_cmd_shards_list = {
	.name = "list",
	.summary = "List shards",
	.description = "List shard specifications and status.\n\n"
		       "Use --selector to supply a LabelSelector which constrains the set of "
		       "returned\nshards. Shard selectors support an additional meta-label "
		       "\"id\".\n\n"
		       "Match ShardSpecs having a specific ID:\n"
		       ">    --selector \"id in (shard-12, shard-34)\"\n\n"
		       "Results can be output in a variety of --format options:\n"
		       "yaml:  Prints shards in YAML form, compatible with \"shards apply\"\n"
		       "json:  Prints ShardSpecs encoded as JSON\n"
		       "proto: Prints ShardSpecs encoded in protobuf text format\n"
		       "table: Prints as a table (see other flags for column choices)\n\n"
		       "It's recommended that --lag be used with a relatively focused --selector,\n"
		       "as fetching consumption lag for a large number of shards may take a while.",
	.flags = flags,
	.needs_client = true,
	.run = run,
};
