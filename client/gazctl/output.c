/*
 * output.c - how gazctl prints, matching what Gazette's gazctl prints:
 * tables in the default style of olekukonko/tablewriter v1.1.0, sizes and
 * times as dustin/go-humanize v1.0.1, and JSON strings and fragments as
 * Go's encoding/json (HTML-safe escaping, omitempty fields).
 *
 * Widths are counted in runes (no East Asian double width): journal
 * names, labels and URLs are ASCII in practice.
 */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "client/gazctl/gazctl.h"
#include "protocol/validate.h"

/* ---- UTF-8 ------------------------------------------------------------------ */

/* utf8_next decodes the rune at s (n bytes left) into *r; returns its
 * length, or 0 for an invalid sequence (one byte to skip). */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *r)
{
	size_t len = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3
				     : (s[0] >> 3) == 30 ? 4 : 0;
	uint32_t v = len == 1 ? s[0] : len == 2 ? s[0] & 0x1f : len == 3 ? s[0] & 0x0f : s[0] & 7;

	if (len == 0 || len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (s[i] & 0x3f);
	}
	if ((len == 2 && v < 0x80) || (len == 3 && v < 0x800) || (len == 4 && v < 0x10000) ||
	    v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*r = v;
	return len;
}

size_t gazctl_display_width(const char *s)
{
	size_t w = 0, n = strlen(s);
	const unsigned char *p = (const unsigned char *)s;
	uint32_t r;

	while (n > 0) {
		size_t k = utf8_next(p, n, &r);
		k = k ? k : 1;
		p += k;
		n -= k;
		w++;
	}
	return w;
}

/* ---- header titles ----------------------------------------------------------- */

/* rune_class as tablewriter's SplitCamelCase: lower 1, upper 2, digit 3,
 * other 4 (non-ASCII runes count as other here). */
static int rune_class(const char *p)
{
	unsigned char ch = (unsigned char)*p;

	return ch >= 0x80 ? 4 : islower(ch) ? 1 : isupper(ch) ? 2 : isdigit(ch) ? 3 : 4;
}

/* split_groups writes the SplitCamelCase words of s, joined by spaces. */
static void split_groups(const char *s, char *out)
{
	size_t n = strlen(s), ng = 0, starts[512], ends[512];

	for (size_t i = 0; i < n && ng < 512;) {
		size_t j = i + 1;
		while (j < n && (((unsigned char)s[j] & 0xc0) == 0x80 ||
				 rune_class(s + j) == rune_class(s + i)))
			j++;
		starts[ng] = i;
		ends[ng++] = j;
		i = j;
	}
	for (size_t g = 0; g + 1 < ng; g++) /* "ABc": move the last upper on */
		if (starts[g] < ends[g] && isupper((unsigned char)s[starts[g]]) &&
		    islower((unsigned char)s[starts[g + 1]]))
			starts[g + 1] = --ends[g];
	out[0] = '\0';
	for (size_t g = 0; g < ng; g++) {
		size_t len = ends[g] - starts[g], k = 0;
		while (k < len && isspace((unsigned char)s[starts[g] + k]))
			k++;
		if (len == 0 || k == len || (len == 1 && s[starts[g]] == '_'))
			continue;
		if (out[0])
			strcat(out, " ");
		strncat(out, s + starts[g], len);
	}
}

static bool num_or_space(char c)
{
	return (c >= '0' && c <= '9') || c == ' ';
}

char *gazctl_header_title(const char *s)
{
	size_t n = strlen(s);
	char *out = gazctl_xmalloc(2 * n + 2), *p, *e;

	split_groups(s, out);
	n = strlen(out);
	for (size_t i = 0; i < n; i++) {
		if (out[i] == '_')
			out[i] = ' ';
		else if (out[i] == '.' && ((i != 0 && !num_or_space(out[i - 1])) ||
					   (i != n - 1 && !num_or_space(out[i + 1]))))
			out[i] = ' ';
	}
	for (p = out; isspace((unsigned char)*p); p++)
		;
	for (e = p + strlen(p); e > p && isspace((unsigned char)e[-1]); e--)
		;
	*e = '\0';
	memmove(out, p, strlen(p) + 1);
	if (!out[0] && s[0])
		strcpy(out, " ");
	for (p = out; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	return out;
}

/* ---- tables ---------------------------------------------------------------- */

static char *trimmed(const char *s)
{
	const char *b = s ? s : "", *e;

	while (isspace((unsigned char)*b))
		b++;
	for (e = b + strlen(b); e > b && isspace((unsigned char)e[-1]); e--)
		;
	char *out = gazctl_xmalloc((size_t)(e - b) + 1);
	memcpy(out, b, (size_t)(e - b));
	out[e - b] = '\0';
	return out;
}

void gazctl_table_init(struct gazctl_table *t, size_t ncols, const char *const *header)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
	t->header = gazctl_xcalloc(ncols, sizeof(char *));
	for (size_t i = 0; i < ncols; i++)
		t->header[i] = gazctl_xstrdup(header[i]);
}

void gazctl_table_add(struct gazctl_table *t, const char *const *cells)
{
	char **row = gazctl_xcalloc(t->ncols, sizeof(char *));

	for (size_t i = 0; i < t->ncols; i++)
		row[i] = trimmed(cells[i]);
	t->rows = gazctl_xrealloc(t->rows, (t->nrows + 1) * sizeof(*t->rows));
	t->rows[t->nrows++] = row;
}

static void rule(FILE *out, const size_t *w, size_t n, const char *l, const char *m,
		 const char *r)
{
	fputs(l, out);
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < w[i] + 2; k++)
			fputs("─", out);
		fputs(i + 1 < n ? m : r, out);
	}
	fputc('\n', out);
}

/* cell writes " s " padded to width w, centred (extra space right) or left. */
static void cell(FILE *out, const char *s, size_t w, bool centre)
{
	size_t gap = w - gazctl_display_width(s), left = centre ? gap / 2 : 0;

	fprintf(out, " %*s%s%*s │", (int)left, "", s, (int)(gap - left), "");
}

void gazctl_table_render(const struct gazctl_table *t, FILE *out)
{
	size_t *w = gazctl_xcalloc(t->ncols, sizeof(size_t));
	char **titles = gazctl_xcalloc(t->ncols, sizeof(char *));

	for (size_t i = 0; i < t->ncols; i++) {
		titles[i] = gazctl_header_title(t->header[i]);
		w[i] = gazctl_display_width(titles[i]);
		for (size_t r = 0; r < t->nrows; r++) {
			size_t cw = gazctl_display_width(t->rows[r][i]);
			w[i] = cw > w[i] ? cw : w[i];
		}
	}
	rule(out, w, t->ncols, "┌", "┬", "┐");
	fputs("│", out);
	for (size_t i = 0; i < t->ncols; i++)
		cell(out, titles[i], w[i], true);
	fputc('\n', out);
	if (t->nrows)
		rule(out, w, t->ncols, "├", "┼", "┤");
	for (size_t r = 0; r < t->nrows; r++) {
		fputs("│", out);
		for (size_t i = 0; i < t->ncols; i++)
			cell(out, t->rows[r][i], w[i], false);
		fputc('\n', out);
	}
	rule(out, w, t->ncols, "└", "┴", "┘");
	for (size_t i = 0; i < t->ncols; i++)
		free(titles[i]);
	free(titles);
	free(w);
}

void gazctl_table_release(struct gazctl_table *t)
{
	for (size_t r = 0; r < t->nrows; r++) {
		for (size_t i = 0; i < t->ncols; i++)
			free(t->rows[r][i]);
		free(t->rows[r]);
	}
	for (size_t i = 0; i < t->ncols; i++)
		free(t->header[i]);
	free(t->rows);
	free(t->header);
	memset(t, 0, sizeof(*t));
}

/* ---- go-humanize ------------------------------------------------------------- */

char *gazctl_ibytes(uint64_t n, char *buf, size_t cap)
{
	static const char *const sizes[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	double e, val;

	if (n < 10) {
		snprintf(buf, cap, "%" PRIu64 " B", n);
		return buf;
	}
	e = floor(log((double)n) / log(1024.0));
	val = floor((double)n / pow(1024.0, e) * 10 + 0.5) / 10;
	snprintf(buf, cap, val < 10 ? "%.1f %s" : "%.0f %s", val, sizes[(int)e]);
	return buf;
}

char *gazctl_reltime(int64_t then, int64_t now, char *buf, size_t cap)
{
	static const struct { int64_t d; const char *fmt; int64_t div; } mags[] = {
		{1, "now", 1},
		{2, "1 second %s", 1},
		{60, "%lld seconds %s", 1},
		{120, "1 minute %s", 1},
		{3600, "%lld minutes %s", 60},
		{7200, "1 hour %s", 1},
		{86400, "%lld hours %s", 3600},
		{2 * 86400, "1 day %s", 1},
		{7 * 86400, "%lld days %s", 86400},
		{14 * 86400, "1 week %s", 1},
		{30 * 86400, "%lld weeks %s", 7 * 86400},
		{60 * 86400, "1 month %s", 1},
		{360 * 86400, "%lld months %s", 30 * 86400},
		{540 * 86400, "1 year %s", 1},
		{720 * 86400, "2 years %s", 1},
		{37 * 360 * 86400LL, "%lld years %s", 360 * 86400},
		{INT64_MAX, "a long while %s", 1},
	};
	const char *lbl = then > now ? "from now" : "ago";
	int64_t diff = then > now ? then - now : now - then;
	size_t i = 0;

	while (i + 1 < sizeof(mags) / sizeof(mags[0]) && mags[i].d <= diff)
		i++;
	if (strstr(mags[i].fmt, "%lld"))
		snprintf(buf, cap, mags[i].fmt, (long long)(diff / mags[i].div), lbl);
	else if (strstr(mags[i].fmt, "%s"))
		snprintf(buf, cap, mags[i].fmt, lbl);
	else
		snprintf(buf, cap, "%s", mags[i].fmt);
	return buf;
}

/* ---- encoding/json ------------------------------------------------------------- */

void gazctl_json_string(FILE *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);
	uint32_t r;

	fputc('"', out);
	while (n > 0) {
		size_t k = utf8_next(p, n, &r);

		if (k == 0) {
			fputs("\\ufffd", out);
			k = 1;
		} else if (r == '"' || r == '\\') {
			fprintf(out, "\\%c", (int)r);
		} else if (r == '\n' || r == '\r' || r == '\t' || r == '\b' || r == '\f') {
			fprintf(out, "\\%c", r == '\n' ? 'n' : r == '\r' ? 'r' : r == '\t' ? 't'
							   : r == '\b' ? 'b' : 'f');
		} else if (r < 0x20 || r == '<' || r == '>' || r == '&' || r == 0x2028 ||
			   r == 0x2029) {
			fprintf(out, "\\u%04x", (unsigned)r);
		} else {
			fwrite(p, 1, k, out);
		}
		p += k;
		n -= k;
	}
	fputc('"', out);
}

static void json_sum(FILE *out, const Protocol__SHA1Sum *s)
{
	const char *sep = "";

	fputs("\"sum\":{", out);
	if (s && s->part1) {
		fprintf(out, "\"part1\":%" PRIu64, s->part1);
		sep = ",";
	}
	if (s && s->part2) {
		fprintf(out, "%s\"part2\":%" PRIu64, sep, s->part2);
		sep = ",";
	}
	if (s && s->part3)
		fprintf(out, "%s\"part3\":%" PRIu32, sep, s->part3);
	fputc('}', out);
}

/* json_str_field writes ,"key":"value" when value is non-empty. */
static void json_str_field(FILE *out, const char *key, const char *v, bool *first)
{
	if (!v || !*v)
		return;
	fprintf(out, "%s\"%s\":", *first ? "" : ",", key);
	gazctl_json_string(out, v);
	*first = false;
}

static void json_int_field(FILE *out, const char *key, int64_t v, bool *first)
{
	if (v == 0)
		return;
	fprintf(out, "%s\"%s\":%" PRId64, *first ? "" : ",", key, v);
	*first = false;
}

void gazctl_fragment_json(FILE *out, const Protocol__FragmentsResponse__Fragment *f)
{
	const Protocol__Fragment *s = f->spec;
	bool first = true;

	fputs("{\"spec\":{", out);
	if (s) {
		json_str_field(out, "journal", s->journal, &first);
		json_int_field(out, "begin", s->begin, &first);
		json_int_field(out, "end", s->end, &first);
	}
	if (!first)
		fputc(',', out);
	json_sum(out, s ? s->sum : NULL);
	first = false;
	if (s) {
		json_int_field(out, "compression_codec", s->compression_codec, &first);
		json_str_field(out, "backing_store", s->backing_store, &first);
		json_int_field(out, "mod_time", s->mod_time, &first);
		json_str_field(out, "path_postfix", s->path_postfix, &first);
	}
	fputc('}', out);
	first = false;
	json_str_field(out, "signed_url", f->signed_url, &first);
	fputs("}\n", out);
}
