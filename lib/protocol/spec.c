/*
 * spec.c - JournalSpec validation (gazette-facts §3.3 journal label
 * constraints, §3.4, §3.6): the spec itself, its Fragment part, fragment
 * store URLs, codecs, flags, suspension, content-type media types and the
 * path postfix template.
 *
 * Check order and wording follow Gazette's JournalSpec.Validate so that the
 * first reported error is the one a Go broker would report.
 */
#include "protocol/labels.h"
#include "protocol/url.h"
#include "protocol/validate.h"
#include "protocol/vctx.h"

#include "common/duration.h"

#include <string.h>

/* ---- media types (Go mime.ParseMediaType acceptance) ----------------------- */

static bool mime_token_char(unsigned char c)
{
	return c > 0x20 && c < 0x7f && !strchr("()<>@,;:\\\"/[]?=", c);
}

static bool mime_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static size_t mime_token(const char *s, size_t n)
{
	size_t i = 0;

	while (i < n && mime_token_char((unsigned char)s[i]))
		i++;
	return i;
}

static const char *skip_space(const char *s, const char *end)
{
	while (s < end && mime_space(*s))
		s++;
	return s;
}

/* "type" or "type/subtype" over [s, end), already trimmed. */
static const char *mime_disposition(const char *s, const char *end)
{
	size_t t = mime_token(s, (size_t)(end - s));

	if (t == 0)
		return "mime: no media type";
	s += t;
	if (s == end)
		return NULL;
	if (*s != '/')
		return "mime: expected slash after first token";
	s++;
	if ((t = mime_token(s, (size_t)(end - s))) == 0)
		return "mime: expected token after slash";
	return s + t == end ? NULL : "mime: unexpected content after media subtype";
}

/* A quoted-string or token value at s; returns its end, or NULL. */
static const char *mime_value(const char *s, const char *end)
{
	if (s < end && *s == '"') {
		for (s++; s < end; s++) {
			if (*s == '"')
				return s + 1;
			if (*s == '\\' && s + 1 < end && !mime_token_char((unsigned char)s[1]) &&
			    s[1] > 0x20 && s[1] < 0x7f)
				s++;
			else if (*s == '\r' || *s == '\n')
				return NULL;
		}
		return NULL;
	}
	size_t t = mime_token(s, (size_t)(end - s));

	return t ? s + t : NULL;
}

/* One "; attr=value" at s; returns the rest, or NULL if malformed. */
static const char *mime_param(const char *s, const char *end)
{
	size_t t;

	s = skip_space(s, end);
	if (s == end || *s != ';')
		return NULL;
	s = skip_space(s + 1, end);
	if ((t = mime_token(s, (size_t)(end - s))) == 0)
		return NULL;
	s = skip_space(s + t, end);
	if (s == end || *s != '=')
		return NULL;
	return mime_value(skip_space(s + 1, end), end);
}

int gaz_validate_media_type(const char *v, struct gaz_status *st)
{
	const char *semi, *end, *b, *e, *why;

	v = gaz__str(v);
	end = v + strlen(v);
	semi = memchr(v, ';', (size_t)(end - v));
	b = skip_space(v, semi ? semi : end);
	for (e = semi ? semi : end; e > b && mime_space(e[-1]); e--)
		;
	if ((why = mime_disposition(b, e)))
		return gaz__verr(st, NULL, "%s", why);
	for (const char *p = semi; p && (p = skip_space(p, end)) < end;) {
		const char *next = mime_param(p, end);

		if (!next && skip_space(p + 1, end) == end && *p == ';')
			break; /* a trailing lone ';' is ignored */
		if (!next)
			return gaz__verr(st, NULL, "mime: invalid media parameter");
		p = next;
	}
	return 0;
}

/* ---- fragment stores (§3.6) ------------------------------------------------- */

static int azure_ad_rules(const struct gaz_url *u, const char *raw, const struct gaz__vctx *c,
			  struct gaz_status *st)
{
	const char *acct = u->path[0] ? u->path + 1 : u->path;
	const char *slash = strchr(acct, '/');

	if (!u->host[0])
		return gaz__verr(st, c, "missing tenant ID (%s)", raw);
	if (acct[0] == '\0' || acct[0] == '/')
		return gaz__verr(st, c, "missing storage account (%s)", raw);
	if (!slash || slash[1] == '\0' || slash[1] == '/')
		return gaz__verr(st, c, "missing storage container (%s)", raw);
	return 0;
}

static int store_rules(const struct gaz_url *u, const char *raw, const struct gaz__vctx *c,
		       struct gaz_status *st)
{
	const char *s = u->scheme;
	size_t n = strlen(u->path);

	if (!gaz_url_is_abs(u))
		return gaz__verr(st, c, "not absolute (%s)", raw);
	if (!strcmp(s, "s3") || !strcmp(s, "gs") || !strcmp(s, "azure")) {
		if (!u->host[0])
			return gaz__verr(st, c, "missing bucket (%s)", raw);
	} else if (!strcmp(s, "azure-ad")) {
		if (azure_ad_rules(u, raw, c, st))
			return GAZ_EINVAL;
	} else if (!strcmp(s, "file")) {
		if (u->host[0])
			return gaz__verr(st, c, "file scheme cannot have host (%s)", raw);
	} else {
		return gaz__verr(st, c, "invalid scheme (%s)", s);
	}
	if (n == 0 || u->path[n - 1] != '/')
		return gaz__verr(st, c, "path component doesn't end in '/' (%s)", u->path);
	return 0;
}

/* Validates store `raw`; *is_file tells whether its scheme is "file". */
static int store_check(const char *raw, const struct gaz__vctx *c, struct gaz_status *st,
		       bool *is_file)
{
	struct gaz_status ps = {0};
	struct gaz_url u;
	int rc;

	raw = gaz__str(raw);
	*is_file = false;
	rc = gaz_url_parse(raw, &u, &ps);
	if (rc == GAZ_ENOMEM)
		return gaz_status_set(st, GAZ_ENOMEM, "%s", ps.msg);
	if (rc)
		return gaz__verr(st, c, "%s", ps.msg);
	rc = store_rules(&u, raw, c, st);
	*is_file = !strcmp(u.scheme, "file");
	gaz_url_release(&u);
	return rc;
}

int gaz__validate_fragment_store(const char *url, const struct gaz__vctx *c,
				 struct gaz_status *st)
{
	bool is_file;

	return store_check(url, c, st, &is_file);
}

int gaz_validate_fragment_store(const char *url, struct gaz_status *st)
{
	return gaz__validate_fragment_store(url, NULL, st);
}

/* ---- codecs, flags, suspension ------------------------------------------------ */

int gaz__validate_codec(int codec, const struct gaz__vctx *c, struct gaz_status *st)
{
	char name[24];

	if (codec >= PROTOCOL__COMPRESSION_CODEC__NONE &&
	    codec <= PROTOCOL__COMPRESSION_CODEC__GZIP_OFFLOAD_DECOMPRESSION)
		return 0;
	return gaz__verr(st, c, "invalid value (%s)",
			 gaz__enum_name(&protocol__compression_codec__descriptor, codec, name,
					sizeof(name)));
}

int gaz_validate_codec(int codec, struct gaz_status *st)
{
	return gaz__validate_codec(codec, NULL, st);
}

bool gaz_journal_may_read(uint32_t flags)
{
	return flags == PROTOCOL__JOURNAL_SPEC__FLAG__NOT_SPECIFIED ||
	       flags == PROTOCOL__JOURNAL_SPEC__FLAG__O_RDONLY ||
	       flags == PROTOCOL__JOURNAL_SPEC__FLAG__O_RDWR;
}

bool gaz_journal_may_write(uint32_t flags)
{
	return flags == PROTOCOL__JOURNAL_SPEC__FLAG__NOT_SPECIFIED ||
	       flags == PROTOCOL__JOURNAL_SPEC__FLAG__O_WRONLY ||
	       flags == PROTOCOL__JOURNAL_SPEC__FLAG__O_RDWR;
}

static int validate_flags(uint32_t flags, const struct gaz__vctx *parent, struct gaz_status *st)
{
	GAZ__VCTX(c, parent, "Flags", -1);

	if (flags == 0 || flags == 1 || flags == 2 || flags == 4)
		return 0;
	return gaz__verr(st, &c, "invalid combination (%u)", flags);
}

static int validate_suspend(const Protocol__JournalSpec__Suspend *s,
			    const struct gaz__vctx *parent, struct gaz_status *st)
{
	GAZ__VCTX(c, parent, "Suspend", -1);
	GAZ__VCTX(cl, &c, "Level", -1);
	GAZ__VCTX(co, &c, "Offset", -1);
	char name[24];

	if (!s)
		return 0;
	if ((int)s->level < 0 || s->level > PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__FULL)
		return gaz__verr(st, &cl, "invalid Level variant (%s)",
				 gaz__enum_name(&protocol__journal_spec__suspend__level__descriptor,
						(int)s->level, name, sizeof(name)));
	if (s->offset < 0)
		return gaz__verr(st, &co, "invalid Offset (%lld; expected >= 0)",
				 (long long)s->offset);
	return 0;
}

/* ---- JournalSpec.Fragment (§3.4) ---------------------------------------------- */

static int fragment_stores(const Protocol__JournalSpec__Fragment *f, const struct gaz__vctx *c,
			   struct gaz_status *st)
{
	for (size_t i = 0; i < f->n_stores; i++) {
		GAZ__VCTX(ci, c, "Stores", (long)i);
		bool is_file;
		int rc = store_check(f->stores[i], &ci, st, &is_file);

		if (rc)
			return rc;
		if (i == 0 && is_file &&
		    f->compression_codec == PROTOCOL__COMPRESSION_CODEC__GZIP_OFFLOAD_DECOMPRESSION)
			return gaz__verr(st, c,
					 "GZIP_OFFLOAD_DECOMPRESSION is incompatible with file:// stores (%s)",
					 f->stores[i]);
	}
	return 0;
}

static int fragment_intervals(const Protocol__JournalSpec__Fragment *f,
			      const struct gaz__vctx *c, struct gaz_status *st)
{
	int64_t refresh = gaz__duration_ns(f->refresh_interval);
	int64_t flush = gaz__duration_ns(f->flush_interval);
	char d[GAZ_DURATION_STR_MAX], lo[GAZ_DURATION_STR_MAX], hi[GAZ_DURATION_STR_MAX];

	if (refresh < GAZ_REFRESH_MIN_NS || refresh > GAZ_REFRESH_MAX_NS)
		return gaz__verr(st, c, "invalid RefreshInterval (%s; expected %s <= interval <= %s)",
				 gaz_duration_format(refresh, d),
				 gaz_duration_format(GAZ_REFRESH_MIN_NS, lo),
				 gaz_duration_format(GAZ_REFRESH_MAX_NS, hi));
	if (flush != 0 && flush < GAZ_FLUSH_MIN_NS)
		return gaz__verr(st, c, "invalid FlushInterval (%s; expected >= %s)",
				 gaz_duration_format(flush, d),
				 gaz_duration_format(GAZ_FLUSH_MIN_NS, lo));
	return 0;
}

static int fragment_spec(const Protocol__JournalSpec__Fragment *f, const struct gaz__vctx *c,
			 struct gaz_status *st)
{
	static const Protocol__JournalSpec__Fragment zero = PROTOCOL__JOURNAL_SPEC__FRAGMENT__INIT;
	GAZ__VCTX(cc, c, "CompressionCodec", -1);
	GAZ__VCTX(ct, c, "PathPostfixTemplate", -1);
	int rc;

	if (!f)
		f = &zero;
	if (f->length < GAZ_FRAGMENT_LEN_MIN || f->length > GAZ_FRAGMENT_LEN_MAX)
		return gaz__verr(st, c, "invalid Length (%lld; expected %lld <= length <= %lld)",
				 (long long)f->length, GAZ_FRAGMENT_LEN_MIN, GAZ_FRAGMENT_LEN_MAX);
	if ((rc = gaz__validate_codec((int)f->compression_codec, &cc, st)) ||
	    (rc = fragment_stores(f, c, st)) || (rc = fragment_intervals(f, c, st)))
		return rc;
	/* Retention: every value is permitted. */
	return gaz__validate_postfix_template(f->path_postfix_template, &ct, st);
}

int gaz_validate_fragment_spec(const Protocol__JournalSpec__Fragment *f, struct gaz_status *st)
{
	return fragment_spec(f, NULL, st);
}

/* ---- JournalSpec (§3.3 label constraints, §3.4) ------------------------------------ */

static int label_constraints(const Protocol__LabelSet *ls, const struct gaz__vctx *c,
			     struct gaz_status *st)
{
	const char *ct = gaz_labelset_value_of(ls, "content-type");
	struct gaz_status ms = {0};

	if (gaz_validate_single_value_labels(ls, &ms))
		return gaz__verr(st, c, "%s", ms.msg);
	if (ct && gaz_validate_media_type(ct, &ms))
		return gaz__verr(st, c, "parsing content-type: %s", ms.msg);
	if (gaz_labelset_find(ls, "app.gazette.dev/message-type", NULL)) {
		if (!ct)
			return gaz__verr(st, c, "expected content-type label alongside "
						"app.gazette.dev/message-type");
	} else if (gaz_labelset_find(ls, "app.gazette.dev/message-subtype", NULL)) {
		return gaz__verr(st, c, "expected app.gazette.dev/message-type label alongside "
					"app.gazette.dev/message-subtype");
	}
	return 0;
}

static int spec_labels(const Protocol__LabelSet *ls, const struct gaz__vctx *parent,
		       struct gaz_status *st)
{
	GAZ__VCTX(c, parent, "Labels", -1);

	if (gaz__validate_labelset(ls, false, &c, st))
		return GAZ_EINVAL;
	if (gaz_labelset_find(ls, "name", NULL))
		return gaz__verr(st, parent, "Labels cannot include label \"name\"");
	if (gaz_labelset_find(ls, "prefix", NULL))
		return gaz__verr(st, parent, "Labels cannot include label \"prefix\"");
	return label_constraints(ls, &c, st);
}

int gaz__validate_journal_spec(const Protocol__JournalSpec *spec, const struct gaz__vctx *c,
			       struct gaz_status *st)
{
	static const Protocol__JournalSpec zero = PROTOCOL__JOURNAL_SPEC__INIT;
	GAZ__VCTX(cn, c, "Name", -1);
	GAZ__VCTX(cf, c, "Fragment", -1);
	const char *name;
	int rc;

	if (!spec)
		spec = &zero;
	name = gaz__str(spec->name);
	if ((rc = gaz__validate_journal(name, &cn, st)))
		return rc;
	if (name[gaz_journal_name_len(name)])
		return gaz__verr(st, c,
				 "Name cannot have a metadata path segment (%s; expected no segment)",
				 name + gaz_journal_name_len(name));
	if (spec->replication < 1 || spec->replication > GAZ_REPLICATION_MAX)
		return gaz__verr(st, c, "invalid Replication (%d; expected 1 <= Replication <= %d)",
				 (int)spec->replication, GAZ_REPLICATION_MAX);
	if ((rc = spec_labels(spec->labels, c, st)) || (rc = fragment_spec(spec->fragment, &cf, st)) ||
	    (rc = validate_flags(spec->flags, c, st)))
		return rc;
	if (spec->max_append_rate < 0)
		return gaz__verr(st, c, "invalid MaxAppendRate (%lld; expected >= 0)",
				 (long long)spec->max_append_rate);
	return validate_suspend(spec->suspend, c, st);
}

int gaz_validate_journal_spec(const Protocol__JournalSpec *spec, struct gaz_status *st)
{
	return gaz__validate_journal_spec(spec, NULL, st);
}
