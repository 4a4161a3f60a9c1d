/*
 * template.c - a structural check of JournalSpec.fragment.path_postfix_template.
 *
 * Gazette accepts a template when Go's text/template parses it and executes
 * it without error against a zero-valued {Spool, JournalSpec...} struct.
 * Until gazette-c has Go templates, we check the structure that parsing
 * needs, with Go's messages ("template: postfix:LINE: ..."):
 *   - every "{{" has a closing "}}" (quoted "..", `..` and '..' honoured)
 *     and no other brace inside;
 *   - a comment action ("{{" then a slash-star comment) ends with
 *     star-slash right before "}}";
 *   - an action is not empty once "{{- " / " -}}" trim markers are removed;
 *   - if/range/with/block/define are closed by end, else/end have an opener.
 * Not checked: expression syntax, field and function names, execution.
 */
#include "protocol/validate.h"
#include "protocol/vctx.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

struct tscan {
	const char *p;  /* cursor */
	int line;       /* 1-based line of the cursor */
	int depth;      /* open if/range/with/block/define */
	const char *why;
};

static bool t_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Advances the cursor one byte, counting lines. */
static void t_step(struct tscan *t)
{
	if (*t->p == '\n')
		t->line++;
	t->p++;
}

/* Skips a quoted string opening at the cursor; false if unterminated. */
static bool t_quoted(struct tscan *t)
{
	char q = *t->p;

	for (t_step(t); *t->p && *t->p != q; t_step(t)) {
		if (q != '`' && *t->p == '\\' && t->p[1])
			t_step(t);
		else if (q != '`' && *t->p == '\n')
			break;
	}
	if (*t->p != q) {
		t->why = q == '`' ? "unterminated raw quoted string"
			 : q == '"' ? "unterminated quoted string"
				    : "unterminated character constant";
		return false;
	}
	t_step(t);
	return true;
}

/* Comment action body at the cursor (just after the slash-star). */
static bool t_comment(struct tscan *t)
{
	const char *close = strstr(t->p, "*/");

	if (!close) {
		t->why = "unclosed comment";
		return false;
	}
	while (t->p < close + 2)
		t_step(t);
	if (t->p[0] == ' ' && t->p[1] == '-' && t->p[2] == '}' && t->p[3] == '}')
		t->p += 2;
	if (strncmp(t->p, "}}", 2)) {
		t->why = "comment ends before closing delimiter";
		return false;
	}
	t->p += 2;
	return true;
}

/* Applies the keyword of action text [b, e) to the nesting depth. */
static bool t_keyword(struct tscan *t, const char *b, const char *e)
{
	static const char *const openers[] = {"if", "range", "with", "block", "define"};
	size_t n = 0;

	while (b + n < e && !t_space(b[n]) && b[n] != '(')
		n++;
	for (size_t i = 0; i < sizeof(openers) / sizeof(openers[0]); i++)
		if (n == strlen(openers[i]) && !strncmp(b, openers[i], n))
			return t->depth++, true;
	if ((n == 3 && !strncmp(b, "end", 3)) || (n == 4 && !strncmp(b, "else", 4))) {
		if (t->depth == 0) {
			t->why = n == 3 ? "unexpected {{end}}" : "unexpected {{else}}";
			return false;
		}
		t->depth -= n == 3;
	}
	return true;
}

/* Non-comment action body at the cursor; consumes through "}}". */
static bool t_action(struct tscan *t)
{
	const char *b = t->p, *e;

	while (*t->p && strncmp(t->p, "}}", 2)) {
		if (strchr("\"`'", *t->p)) {
			if (!t_quoted(t))
				return false;
		} else if (*t->p == '{' || *t->p == '}') {
			t->why = *t->p == '{' ? "unexpected \"{\" in command"
					      : "unexpected \"}\" in command";
			return false;
		} else {
			t_step(t);
		}
	}
	if (!*t->p) {
		t->why = "unclosed action";
		return false;
	}
	e = t->p;
	t->p += 2;
	if (e - b >= 2 && e[-1] == '-' && t_space(e[-2]))
		e -= 2;
	while (b < e && t_space(*b))
		b++;
	while (e > b && t_space(e[-1]))
		e--;
	if (b == e) {
		t->why = "missing value for command";
		return false;
	}
	return t_keyword(t, b, e);
}

/* The action opening at the cursor ("{{"). */
static bool t_open(struct tscan *t)
{
	t->p += 2;
	if (t->p[0] == '-' && t_space(t->p[1]))
		t_step(t), t_step(t);
	if (!strncmp(t->p, "/*", 2)) {
		t->p += 2;
		return t_comment(t);
	}
	return t_action(t);
}

int gaz__validate_postfix_template(const char *tpl, const struct gaz__vctx *c,
				   struct gaz_status *st)
{
	struct tscan t = {.p = gaz__str(tpl), .line = 1, .depth = 0, .why = NULL};

	while (*t.p) {
		int line = t.line;

		if (strncmp(t.p, "{{", 2)) {
			t_step(&t);
			continue;
		}
		if (!t_open(&t))
			return gaz__verr(st, c, "template: postfix:%d: %s", line, t.why);
	}
	if (t.depth > 0)
		return gaz__verr(st, c, "template: postfix:%d: unexpected EOF", t.line);
	return 0;
}

int gaz_validate_postfix_template(const char *tpl, struct gaz_status *st)
{
	return gaz__validate_postfix_template(tpl, NULL, st);
}

/* ---- execution ------------------------------------------------------------
 *
 * A subset of Go's text/template, enough for the postfix layouts Gazette
 * documents (facts §5.5): text, comments, trim markers, and actions that
 * are one field chain over Gazette's data struct{Spool; *JournalSpec}:
 *   .Spool.FirstAppendTime.Format "LAYOUT"  (also .FirstAppendTime...)
 *   .Spool.FirstAppendTime[.Unix|.Year|.YearDay|.Day|.Hour|.Minute]
 *   .Spool.Begin .Spool.End .Begin .End       (decimal)
 *   .Spool.Journal .Journal .Name .JournalSpec.Name .Replication
 *   "a string constant"
 * The "Spool", "Fragment" and "JournalSpec" segments name embedded
 * structs, so they may be left out, as in Go. Anything else (pipelines,
 * functions, if/range/with, other fields) is reported as unsupported. */

struct texec {
	const struct gaz_postfix_data *d;
	char *out;
	size_t cap, len;
	const char *why;
	char why_buf[160];
};

static bool x_put(struct texec *x, const char *s, size_t n)
{
	if (x->len + n >= x->cap) {
		x->why = "result too long";
		return false;
	}
	memcpy(x->out + x->len, s, n);
	x->len += n;
	x->out[x->len] = 0;
	return true;
}

static bool x_putf(struct texec *x, const char *fmt, long long v)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), fmt, v);

	return x_put(x, buf, (size_t)n);
}

/* Broken-down UTC time of a wall clock in ns; 0 is Go's zero time,
 * 0001-01-01 00:00:00 UTC. */
static void x_tm(int64_t ns, struct tm *tm, long *nsec)
{
	time_t secs = ns ? (time_t)(ns / 1000000000) : (time_t)INT64_C(-62135596800);

	*nsec = ns ? (long)(ns % 1000000000) : 0;
	gmtime_r(&secs, tm);
}

static const char *const months[] = {"January", "February", "March", "April", "May", "June", "July",
				     "August", "September", "October", "November", "December"};
static const char *const days[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday",
				   "Friday", "Saturday"};

/* Go layout chunks, longest first where they share a prefix. The time is
 * UTC, so zones print as Go prints UTC ("UTC", "Z", "+0000"...). */
struct chunk {
	const char *std;
	int kind;
};
enum { C_YEAR, C_YEAR2, C_MONTH, C_MONTH2, C_MONTH_SHORT, C_MONTH_LONG, C_DAY, C_DAY2, C_DAY_SP,
       C_YDAY3, C_WDAY_SHORT, C_WDAY_LONG, C_HOUR, C_HOUR12, C_HOUR12_2, C_MIN, C_MIN2, C_SEC,
       C_SEC2, C_PM, C_pm, C_TZ, C_Z_COLON, C_Z, C_NUM_COLON, C_NUM, C_NUM_SHORT, C_Z_SHORT };

static const struct chunk chunks[] = {
	{"January", C_MONTH_LONG}, {"Jan", C_MONTH_SHORT}, {"Monday", C_WDAY_LONG},
	{"Mon", C_WDAY_SHORT}, {"MST", C_TZ}, {"2006", C_YEAR}, {"002", C_YDAY3},
	{"01", C_MONTH2}, {"02", C_DAY2}, {"03", C_HOUR12_2}, {"04", C_MIN2}, {"05", C_SEC2},
	{"06", C_YEAR2}, {"15", C_HOUR}, {"1", C_MONTH}, {"2", C_DAY}, {"_2", C_DAY_SP},
	{"3", C_HOUR12}, {"4", C_MIN}, {"5", C_SEC}, {"PM", C_PM}, {"pm", C_pm},
	{"Z07:00", C_Z_COLON}, {"Z0700", C_Z}, {"Z07", C_Z_SHORT}, {"-07:00", C_NUM_COLON},
	{"-0700", C_NUM}, {"-07", C_NUM_SHORT},
};

static bool x_chunk(struct texec *x, int kind, const struct tm *tm)
{
	int h12 = tm->tm_hour % 12 ? tm->tm_hour % 12 : 12;

	switch (kind) {
	case C_YEAR: return x_putf(x, "%04lld", tm->tm_year + 1900LL);
	case C_YEAR2: return x_putf(x, "%02lld", (tm->tm_year + 1900LL) % 100);
	case C_MONTH: return x_putf(x, "%lld", tm->tm_mon + 1LL);
	case C_MONTH2: return x_putf(x, "%02lld", tm->tm_mon + 1LL);
	case C_MONTH_SHORT: return x_put(x, months[tm->tm_mon], 3);
	case C_MONTH_LONG: return x_put(x, months[tm->tm_mon], strlen(months[tm->tm_mon]));
	case C_DAY: return x_putf(x, "%lld", (long long)tm->tm_mday);
	case C_DAY2: return x_putf(x, "%02lld", (long long)tm->tm_mday);
	case C_DAY_SP: return x_putf(x, "%2lld", (long long)tm->tm_mday);
	case C_YDAY3: return x_putf(x, "%03lld", tm->tm_yday + 1LL);
	case C_WDAY_SHORT: return x_put(x, days[tm->tm_wday], 3);
	case C_WDAY_LONG: return x_put(x, days[tm->tm_wday], strlen(days[tm->tm_wday]));
	case C_HOUR: return x_putf(x, "%02lld", (long long)tm->tm_hour);
	case C_HOUR12: return x_putf(x, "%lld", (long long)h12);
	case C_HOUR12_2: return x_putf(x, "%02lld", (long long)h12);
	case C_MIN: return x_putf(x, "%lld", (long long)tm->tm_min);
	case C_MIN2: return x_putf(x, "%02lld", (long long)tm->tm_min);
	case C_SEC: return x_putf(x, "%lld", (long long)tm->tm_sec);
	case C_SEC2: return x_putf(x, "%02lld", (long long)tm->tm_sec);
	case C_PM: return x_put(x, tm->tm_hour >= 12 ? "PM" : "AM", 2);
	case C_pm: return x_put(x, tm->tm_hour >= 12 ? "pm" : "am", 2);
	case C_TZ: return x_put(x, "UTC", 3);
	case C_Z_COLON: case C_Z: case C_Z_SHORT: return x_put(x, "Z", 1);
	case C_NUM_COLON: return x_put(x, "+00:00", 6);
	case C_NUM: return x_put(x, "+0000", 5);
	default: return x_put(x, "+00", 3);
	}
}

/* Go's Time.Format for the UTC time of `ns` (0 = the zero time): layout
 * chunks as Go recognises them, ".000"/".999" (or ',') fractions after a
 * seconds chunk, everything else literal. */
static bool x_time_format(struct texec *x, int64_t ns, const char *layout, size_t n)
{
	struct tm tm;
	long nsec;
	size_t i = 0;

	x_tm(ns, &tm, &nsec);
	while (i < n) {
		bool done = false;
		if ((layout[i] == '.' || layout[i] == ',') && i + 1 < n &&
		    (layout[i + 1] == '0' || layout[i + 1] == '9')) {
			char digit = layout[i + 1], frac[16];
			size_t k = i + 1;
			while (k < n && layout[k] == digit)
				k++;
			if (k >= n || layout[k] < '0' || layout[k] > '9') {
				size_t w = k - i - 1 > 9 ? 9 : k - i - 1;
				snprintf(frac, sizeof(frac), "%09ld", nsec);
				frac[w] = 0;
				if (digit == '9')
					while (w > 0 && frac[w - 1] == '0')
						frac[--w] = 0;
				if ((w && !x_put(x, &layout[i], 1)) || !x_put(x, frac, w))
					return false;
				i = k;
				continue;
			}
		}
		for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]) && !done; c++) {
			size_t len = strlen(chunks[c].std);
			if (len <= n - i && !strncmp(layout + i, chunks[c].std, len)) {
				if (!x_chunk(x, chunks[c].kind, &tm))
					return false;
				i += len;
				done = true;
			}
		}
		if (!done && !x_put(x, &layout[i++], 1))
			return false;
	}
	return true;
}

/* Reads a Go string constant ("..." with \-escapes of \" and \\, or `...`)
 * at *p into buf[cap]; advances *p. */
static bool x_string(const char **p, const char *e, char *buf, size_t cap, size_t *n)
{
	char q = **p;
	const char *s = *p + 1;

	*n = 0;
	for (; s < e && *s != q; s++) {
		if (q == '"' && *s == '\\' && s + 1 < e && (s[1] == '"' || s[1] == '\\'))
			s++;
		else if (q == '"' && *s == '\\')
			return false; /* other escapes: not in our subset */
		if (*n + 1 >= cap)
			return false;
		buf[(*n)++] = *s;
	}
	if (s >= e)
		return false;
	buf[*n] = 0;
	*p = s + 1;
	return true;
}

static bool x_unsupported(struct texec *x, const char *b, const char *e)
{
	snprintf(x->why_buf, sizeof(x->why_buf), "unsupported action {{%.*s}}", (int)(e - b > 100 ? 100 : e - b),
		 b);
	x->why = x->why_buf;
	return false;
}

/* Evaluates the time field's method chain [seg, e) (after FirstAppendTime). */
static bool x_time(struct texec *x, const char *seg, const char *e, const char *b)
{
	char layout[256];
	size_t n;
	struct tm tm;
	long nsec;
	int64_t ns = x->d->first_append_ns;

	x_tm(ns, &tm, &nsec);
	if (seg == e)
		return x_time_format(x, ns, "2006-01-02 15:04:05.999999999 -0700 MST", 39);
	if (!strncmp(seg, ".Format", 7) && t_space(seg[7])) {
		const char *p = seg + 8;
		while (p < e && t_space(*p))
			p++;
		if (p < e && (*p == '"' || *p == '`') && x_string(&p, e, layout, sizeof(layout), &n)) {
			while (p < e && t_space(*p))
				p++;
			if (p == e)
				return x_time_format(x, ns, layout, n);
		}
		return x_unsupported(x, b, e);
	}
	if ((size_t)(e - seg) == 5 && !strncmp(seg, ".Unix", 5))
		return x_putf(x, "%lld", ns ? (long long)(ns / 1000000000) : -62135596800LL);
	if ((size_t)(e - seg) == 5 && !strncmp(seg, ".Year", 5))
		return x_putf(x, "%lld", tm.tm_year + 1900LL);
	if ((size_t)(e - seg) == 8 && !strncmp(seg, ".YearDay", 8))
		return x_putf(x, "%lld", tm.tm_yday + 1LL);
	if ((size_t)(e - seg) == 4 && !strncmp(seg, ".Day", 4))
		return x_putf(x, "%lld", (long long)tm.tm_mday);
	if ((size_t)(e - seg) == 5 && !strncmp(seg, ".Hour", 5))
		return x_putf(x, "%lld", (long long)tm.tm_hour);
	if ((size_t)(e - seg) == 7 && !strncmp(seg, ".Minute", 7))
		return x_putf(x, "%lld", (long long)tm.tm_min);
	return x_unsupported(x, b, e);
}

/* Skips an embedded struct's name (".Spool", ".Fragment", ".JournalSpec")
 * at p when a further field follows. */
static const char *x_embedded(const char *p, const char *e)
{
	static const char *const names[] = {".Spool.", ".Fragment.", ".JournalSpec."};

	for (bool again = true; again;) {
		again = false;
		for (size_t i = 0; i < 3; i++) {
			size_t n = strlen(names[i]);
			if ((size_t)(e - p) > n && !strncmp(p, names[i], n)) {
				p += n - 1;
				again = true;
			}
		}
	}
	return p;
}

/* Evaluates one action's trimmed text [b, e). */
static bool x_action(struct texec *x, const char *b, const char *e)
{
	const struct gaz_postfix_data *d = x->d;
	const char *p = x_embedded(b, e);
	size_t n = (size_t)(e - p);
	char buf[256];

	if (*b == '"' || *b == '`') {
		const char *q = b;
		if (x_string(&q, e, buf, sizeof(buf), &n) && q == e)
			return x_put(x, buf, n);
		return x_unsupported(x, b, e);
	}
	if (!strncmp(p, ".FirstAppendTime", 16) && (p + 16 == e || p[16] == '.'))
		return x_time(x, p + 16, e, b);
	if ((n == 6 && !strncmp(p, ".Begin", 6)) || (n == 4 && !strncmp(p, ".End", 4)))
		return x_putf(x, "%lld", (long long)(n == 6 ? d->begin : d->end));
	if ((n == 8 && !strncmp(p, ".Journal", 8)) || (n == 5 && !strncmp(p, ".Name", 5)))
		return x_put(x, d->journal ? d->journal : "", d->journal ? strlen(d->journal) : 0);
	if (n == 12 && !strncmp(p, ".Replication", 12))
		return x_putf(x, "%lld", (long long)d->replication);
	return x_unsupported(x, b, e);
}

int gaz_postfix_template_exec(const char *tpl, const struct gaz_postfix_data *d, char *out,
			      size_t cap, struct gaz_status *st)
{
	struct texec x = {.d = d, .out = out, .cap = cap};
	const char *p = tpl ? tpl : "";
	int rc;

	if (cap == 0)
		return gaz_status_set(st, GAZ_EINVAL, "no room for the path postfix");
	out[0] = 0;
	if ((rc = gaz_validate_postfix_template(p, st)))
		return rc;
	while (*p) {
		const char *open = strstr(p, "{{"), *b, *e, *text_end;
		if (!open)
			open = p + strlen(p);
		text_end = open;
		if (*open && open[2] == '-' && t_space(open[3]))
			while (text_end > p && t_space(text_end[-1]))
				text_end--; /* "{{- " trims the text before */
		if (!x_put(&x, p, (size_t)(text_end - p)))
			break;
		if (!*open)
			break;
		b = open + 2;
		if (*b == '-' && t_space(b[1]))
			b += 2;
		/* The action ends where validation's scanner ends it: past
		 * "..", `..` and '..' quotes and through a comment. (A scan of
		 * its own here, blind to '..' and comments, ran past the end of
		 * the template on a backquote inside either.) Depth 1: this one
		 * action's else/end are not judged again. */
		struct tscan t = {.p = open, .line = 1, .depth = 1};
		if (!t_open(&t)) {
			x.why = t.why; /* validation passed: cannot happen */
			break;
		}
		e = t.p - 2;
		p = t.p;
		bool trim_after = e - b >= 2 && e[-1] == '-' && t_space(e[-2]);
		if (trim_after)
			e -= 2;
		while (b < e && t_space(*b))
			b++;
		while (e > b && t_space(e[-1]))
			e--;
		if (!(e - b >= 2 && b[0] == '/' && b[1] == '*') && !x_action(&x, b, e))
			break;
		if (trim_after)
			while (t_space(*p))
				p++;
	}
	if (x.why)
		return gaz_status_set(st, GAZ_EINVAL, "path_postfix_template %s", x.why);
	return 0;
}
