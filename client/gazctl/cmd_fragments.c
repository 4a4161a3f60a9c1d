/*
 * cmd_fragments.c - `gazctl journals fragments`: list the fragments of
 * the journals matching a selector (facts §9.1, §2.6), skipping
 * FULL-suspended journals, paging each journal's ListFragments.
 *
 *   table  Journal, Offset, Length (IEC bytes), Persisted (relative time of
 *          mod_time, "" while local), SHA1 (first 6 bytes, "..."),
 *          Compression, and URL with --url-ttl
 *   json   one FragmentsResponse._Fragment per line, as Go's json.Encoder
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/gazctl/gazctl.h"
#include "fragment/fragment.h"

static struct {
	char *selector, *format;
	int64_t from, to, url_ttl_ns;
} opt;

#define FRAG_FLAG(n, s, t, d, h, ini, p, ch)                                                  \
	{ .name = n, .short_name = s, .type = t, .def = d, .help = h, .ptr = p,             \
	  .group = "journals.fragments", .ini_name = ini, .choices = ch }

static const struct gaz_flag flags[] = {
	FRAG_FLAG("selector", 'l', GAZ_FLAG_STRING, NULL, "Label Selector query to filter on",
		  "Selector", &opt.selector, NULL),
	FRAG_FLAG("format", 'o', GAZ_FLAG_STRING, "table", "Output format", "Format", &opt.format,
		  "table|json|proto"),
	FRAG_FLAG("from", 0, GAZ_FLAG_INT64, "0",
		  "Restrict to fragments created at or after this time, in unix seconds since epoch",
		  "FromUnix", &opt.from, NULL),
	FRAG_FLAG("to", 0, GAZ_FLAG_INT64, "0",
		  "Restrict to fragments created before this time, in unix seconds since epoch",
		  "ToUnix", &opt.to, NULL),
	FRAG_FLAG("url-ttl", 0, GAZ_FLAG_DURATION, "0s",
		  "Provide a signed GET URL with the given TTL", "SigTTL", &opt.url_ttl_ns, NULL),
	{ 0 },
};

static const char *codec_name(int codec, char *buf, size_t cap)
{
	const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(
		&protocol__compression_codec__descriptor, codec);

	if (v)
		return v->name;
	snprintf(buf, cap, "%d", codec);
	return buf;
}

static void add_row(struct gazctl_table *t, const Protocol__FragmentsResponse__Fragment *f,
		    int64_t now)
{
	const Protocol__Fragment *s = f->spec;
	uint8_t sum[GAZ_SHA1_LEN];
	char begin[32], len[32], mod[64] = "", hex[32], codec[16];
	const char *cells[7];

	gaz_sha1sum_from_proto(s->sum, sum);
	snprintf(begin, sizeof(begin), "%lld", (long long)s->begin);
	gazctl_ibytes((uint64_t)(s->end - s->begin), len, sizeof(len));
	if (s->mod_time != 0)
		gazctl_reltime(s->mod_time, now, mod, sizeof(mod));
	for (int i = 0; i < 6; i++)
		sprintf(hex + 2 * i, "%02x", sum[i]);
	strcat(hex, "...");
	cells[0] = s->journal;
	cells[1] = begin;
	cells[2] = len;
	cells[3] = mod;
	cells[4] = hex;
	cells[5] = codec_name(s->compression_codec, codec, sizeof(codec));
	cells[6] = f->signed_url;
	gazctl_table_add(t, cells);
}

static void output(Protocol__FragmentsResponse **resps, size_t n)
{
	static const char *const hdr[] = {"Journal", "Offset", "Length", "Persisted",
					  "SHA1",    "Compression", "URL"};
	struct gazctl_table t;
	int64_t now = (int64_t)time(NULL);
	bool json = !strcmp(opt.format, "json");

	gazctl_table_init(&t, opt.url_ttl_ns ? 7 : 6, hdr);
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; resps[i] && k < resps[i]->n_fragments; k++) {
			if (json)
				gazctl_fragment_json(stdout, resps[i]->fragments[k]);
			else
				add_row(&t, resps[i]->fragments[k], now);
		}
	if (!json)
		gazctl_table_render(&t, stdout);
	gazctl_table_release(&t);
}

static int run(struct gaz_client *c, struct gaz_status *st)
{
	Protocol__ListResponse *list = NULL;
	Protocol__FragmentsResponse **resps;
	int rc;

	if (!strcmp(opt.format, "proto"))
		return gaz_status_set(st, GAZ_EINVAL, "--format proto is not supported yet");
	if ((rc = gazctl_list_selector(c, opt.selector, &list, st)))
		return rc;
	resps = gazctl_xcalloc(list->n_journals, sizeof(*resps));
	for (size_t i = 0; !rc && i < list->n_journals; i++) {
		struct gaz_fragments_opts o = {.journal = list->journals[i]->spec->name,
					       .begin_mod_time = opt.from,
					       .end_mod_time = opt.to,
					       .signature_ttl_ns = opt.url_ttl_ns};
		if (gazctl_is_full_suspended(list->journals[i]))
			continue;
		if ((rc = gaz_client_list_fragments(c, &o, &resps[i], st)))
			gaz_status_prefix(st, "failed to fetch fragments of \"%s\": ", o.journal);
	}
	if (!rc)
		output(resps, list->n_journals);
	for (size_t i = 0; i < list->n_journals; i++)
		if (resps[i])
			protobuf_c_message_free_unpacked(&resps[i]->base, NULL);
	free(resps);
	protobuf_c_message_free_unpacked(&list->base, NULL);
	return rc;
}

const struct gazctl_cmd gazctl_cmd_fragments = {
	.name = "fragments",
	.summary = "List journal fragments",
	.description = "List fragments of selected journals.\n\n"
		       "Use --from and/or --to to retrieve fragments persisted within the given "
		       "time\nrange, in Unix seconds. If --url-ttl, the broker will generate and "
		       "return a\nsigned GET URL having the given TTL.\n\n"
		       "Results can be output in a variety of --format options:\n"
		       "json: Prints Fragments encoded as JSON, one per line.\n"
		       "table: Prints as a humanized table.",
	.flags = flags,
	.needs_client = true,
	.run = run,
};
