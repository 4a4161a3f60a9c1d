/*
 * log.c - text (logfmt) and JSON log lines on stderr. See log.h for the
 * fields format and the quoting rules, which mirror logrus v1.9
 * (text_formatter.go needsQuoting/appendValue, json_formatter.go).
 *
 * An event is built in a stack buffer and written with one write(2). The
 * fields format is walked once: spaces separate pairs, the first '=' ends a
 * key, and each printf conversion is formatted on its own (its arguments
 * taken from the va_list by the types its length modifier names), so the
 * pair boundaries come from the format and never from the values.
 *
 * Invariants: the line never exceeds LINE_BYTES; what is written of it is
 * always well-formed (a value cut short still has its closing quote, a JSON
 * line its closing brace), because each escaped character is appended whole
 * or not at all and the closers have reserved room.
 *
 * Must not call anything that logs, locks or allocates: grpc's threads log
 * through here (lib/rpc installs the hook) and so does GAZ_BUG_ON.
 */
#include "common/log.h"
#include "common/err.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#define LINE_BYTES 4096 /* PIPE_BUF: lines sharing a pipe never interleave */
#define TAIL_BYTES 2    /* room kept for a JSON line's '}' and the '\n' */
#define KEY_BYTES 128

int gaz_log_level_cur = GAZ_LOG_WARN;
static int log_json;

static const char *level_names[] = {"trace", "debug", "info", "warning", "error", "fatal"};

int gaz_log_setup(const char *level, const char *format)
{
	static const char *in[] = {"trace", "debug", "info", "warn", "error", "fatal"};
	int lvl = -1;

	for (int i = 0; level && i < 6; i++)
		if (!strcmp(level, in[i]) || !strcmp(level, level_names[i]))
			lvl = i;
	if (level && lvl < 0)
		return GAZ_EINVAL;
	if (format && strcmp(format, "text") && strcmp(format, "json") && strcmp(format, "color"))
		return GAZ_EINVAL;
	if (lvl >= 0)
		gaz_log_level_cur = lvl;
	if (format)
		log_json = !strcmp(format, "json");
	return 0;
}

/* ---- raw text of one key or value --------------------------------------- */

/* A bounded buffer; n < cap always, p[n] is not kept terminated. */
struct raw {
	char *p;
	size_t n, cap;
};

static void raw_put(struct raw *r, const char *s, size_t len)
{
	if (len > r->cap - 1 - r->n)
		len = r->cap - 1 - r->n;
	memcpy(r->p + r->n, s, len);
	r->n += len;
}

/* Formats with `spec` (one conversion, built by conv) onto r. */
static void raw_fmt(struct raw *r, const char *spec, ...)
{
	size_t room = r->cap - r->n;
	va_list ap;
	int w;

	va_start(ap, spec);
	w = vsnprintf(r->p + r->n, room, spec, ap);
	va_end(ap);
	if (w > 0)
		r->n += (size_t)w < room ? (size_t)w : room - 1;
}

/* Copies a width at *f into spec: digits, or '*' taken from ap (a negative
 * one comes out as "-N", the '-' flag it means). */
static size_t spec_width(char *spec, size_t k, const char **f, va_list *ap)
{
	if (**f == '*') {
		(*f)++;
		return k + (size_t)snprintf(spec + k, 16, "%d", va_arg(*ap, int));
	}
	for (int i = 0; i < 10 && isdigit((unsigned char)**f); i++)
		spec[k++] = *(*f)++;
	while (isdigit((unsigned char)**f)) /* absurd widths are dropped */
		(*f)++;
	return k;
}

/* Copies a precision (".N" or ".*") at *f into spec; a negative '*' one is
 * as if omitted (C11 7.21.6.1p5). */
static size_t spec_prec(char *spec, size_t k, const char **f, va_list *ap)
{
	if (**f != '.')
		return k;
	(*f)++;
	if (**f == '*') {
		int p = va_arg(*ap, int);
		(*f)++;
		return p < 0 ? k : k + (size_t)snprintf(spec + k, 16, ".%d", p);
	}
	spec[k++] = '.';
	return spec_width(spec, k, f, ap);
}

/* One printf conversion: `s` is its spelling to hand snprintf (flags,
 * width and precision with any '*' resolved, the length modifier rewritten
 * as conv prints it), `lm` its length modifier as parsed ('h' for h and hh,
 * 'q' for ll, else the letter, 0 for none), `c` the conversion letter. */
struct spec {
	char s[64];
	char lm, c;
};

/* Parses the conversion at *fp ('%' ...) into sp, moving *fp past it and
 * taking any '*' arguments from ap. Integers with l, ll, j, z or t are
 * spelt "ll": conv widens them to long long, which holds each of them, so
 * one spelling prints them all; h and hh keep theirs and take an int, as
 * argument promotion passed it. Returns false at a '%' ending the format. */
static bool spec_parse(struct spec *sp, const char **fp, va_list *ap)
{
	const char *f = *fp + 1;
	char *s = sp->s;
	size_t k = 0;

	s[k++] = '%';
	while (k < 8 && *f && strchr("-+ #0'", *f))
		s[k++] = *f++;
	k = spec_width(s, k, &f, ap);
	k = spec_prec(s, k, &f, ap);
	sp->lm = 0;
	if (*f == 'h') {
		s[k++] = *f++;
		if (*f == 'h')
			s[k++] = *f++;
		sp->lm = 'h';
	} else if (*f == 'l' && f[1] == 'l') {
		f += 2;
		sp->lm = 'q';
	} else if (*f == 'l' || *f == 'j' || *f == 'z' || *f == 't' || *f == 'L') {
		sp->lm = *f++;
	}
	sp->c = *f;
	*fp = *f ? f + 1 : f;
	if (!sp->c)
		return false;
	if (strchr("diouxX", sp->c) && sp->lm && sp->lm != 'h' && sp->lm != 'L')
		s[k++] = 'l', s[k++] = 'l';
	else if ((sp->lm == 'l' && strchr("cs", sp->c)) ||
		 (sp->lm == 'L' && strchr("eEfFgGaA", sp->c)))
		s[k++] = sp->lm;
	s[k++] = sp->c == 'm' ? 's' : sp->c;
	s[k] = 0;
	return true;
}

/* Prints an integer conversion (d i o u x X), its argument from ap. */
static void conv_int(struct raw *r, const struct spec *sp, va_list *ap)
{
	char lm = sp->lm == 'L' ? 0 : sp->lm; /* "Ld" is not C: as plain d */

	if (sp->c == 'd' || sp->c == 'i') {
		long long v = lm == 'l'   ? va_arg(*ap, long)
			      : lm == 'q' ? va_arg(*ap, long long)
			      : lm == 'j' ? (long long)va_arg(*ap, intmax_t)
			      : lm == 'z' ? (long long)va_arg(*ap, ssize_t)
			      : lm == 't' ? (long long)va_arg(*ap, ptrdiff_t)
					  : va_arg(*ap, int);
		if (lm && lm != 'h')
			raw_fmt(r, sp->s, v);
		else
			raw_fmt(r, sp->s, (int)v);
	} else {
		unsigned long long v = lm == 'l'   ? va_arg(*ap, unsigned long)
				       : lm == 'q' ? va_arg(*ap, unsigned long long)
				       : lm == 'j' ? (unsigned long long)va_arg(*ap, uintmax_t)
				       : lm == 'z' ? (unsigned long long)va_arg(*ap, size_t)
				       : lm == 't' ? (unsigned long long)va_arg(*ap, ptrdiff_t)
						   : va_arg(*ap, unsigned int);
		if (lm && lm != 'h')
			raw_fmt(r, sp->s, v);
		else
			raw_fmt(r, sp->s, (unsigned int)v);
	}
}

/* Formats the conversion at *fp onto r and moves *fp past it, taking its
 * arguments from ap. %n writes nothing; %m prints strerror(err). */
static void conv(struct raw *r, const char **fp, va_list *ap, int err)
{
	struct spec sp;
	char eb[128];

	if (!spec_parse(&sp, fp, ap))
		return;
	switch (sp.c) {
	case 'd': case 'i': case 'o': case 'u': case 'x': case 'X':
		conv_int(r, &sp, ap);
		break;
	case 'c':
		if (sp.lm == 'l')
			raw_fmt(r, sp.s, va_arg(*ap, wint_t));
		else
			raw_fmt(r, sp.s, va_arg(*ap, int));
		break;
	case 's':
		if (sp.lm == 'l')
			raw_fmt(r, sp.s, va_arg(*ap, const wchar_t *));
		else
			raw_fmt(r, sp.s, va_arg(*ap, const char *));
		break;
	case 'p':
		raw_fmt(r, sp.s, va_arg(*ap, void *));
		break;
	case 'e': case 'E': case 'f': case 'F': case 'g': case 'G': case 'a': case 'A':
		if (sp.lm == 'L')
			raw_fmt(r, sp.s, va_arg(*ap, long double));
		else
			raw_fmt(r, sp.s, va_arg(*ap, double));
		break;
	case 'n':
		(void)va_arg(*ap, void *);
		break;
	case 'm':
		raw_fmt(r, sp.s, strerror_r(err, eb, sizeof(eb)));
		break;
	case '%':
		raw_put(r, "%", 1);
		break;
	default: /* unknown (the format attribute rejects these): kept as text */
		raw_put(r, sp.s, strlen(sp.s));
		break;
	}
}

/* ---- escaping ----------------------------------------------------------- */

/* The length of the valid UTF-8 sequence at s (n > 0 bytes left), its code
 * point in *cp; 0 when s does not start one (RFC 3629: no overlong forms,
 * surrogates or code points past U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
	uint32_t c, min;
	size_t len;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, c = s[0] & 0x1f, min = 0x80;
	else if ((s[0] & 0xf0) == 0xe0)
		len = 3, c = s[0] & 0x0f, min = 0x800;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, c = s[0] & 0x07, min = 0x10000;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

/* Characters Go's strconv.IsPrint rejects past ASCII that a log line meets:
 * C1 controls, the non-ASCII spaces, and the invisible format characters. */
static bool invisible(uint32_t c)
{
	return (c >= 0x80 && c <= 0xa0) || c == 0xad || c == 0x1680 ||
	       (c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f) ||
	       (c >= 0x205f && c <= 0x2064) || c == 0x3000 || c == 0xfeff;
}

/* The one-letter escapes: JSON's (RFC 8259 section 7), and Go's, which add
 * \a and \v. 0 when c has none. */
static char json_short(uint32_t c)
{
	switch (c) {
	case '\b': return 'b';
	case '\f': return 'f';
	case '\n': return 'n';
	case '\r': return 'r';
	case '\t': return 't';
	}
	return 0;
}

static char go_short(uint32_t c)
{
	return c == '\a' ? 'a' : c == '\v' ? 'v' : json_short(c);
}

/* Escapes the character at s for a JSON string into e (*elen bytes);
 * returns the bytes of s it stands for. */
static size_t json_char(const unsigned char *s, size_t n, char *e, size_t *elen)
{
	uint32_t c;
	size_t len = utf8_seq(s, n, &c);

	if (!len) {
		memcpy(e, "\\ufffd", *elen = 6);
		return 1;
	}
	if (c == '"' || c == '\\') {
		e[0] = '\\', e[1] = (char)c, *elen = 2;
	} else if (json_short(c)) {
		e[0] = '\\', e[1] = json_short(c), *elen = 2;
	} else if (c < 0x20 || c == 0x2028 || c == 0x2029) {
		*elen = (size_t)snprintf(e, 8, "\\u%04x", (unsigned)c);
	} else {
		memcpy(e, s, *elen = len);
	}
	return len;
}

/* Escapes the character at s as Go's strconv.Quote does. */
static size_t text_char(const unsigned char *s, size_t n, char *e, size_t *elen)
{
	uint32_t c;
	size_t len = utf8_seq(s, n, &c);

	if (!len) {
		*elen = (size_t)snprintf(e, 8, "\\x%02x", s[0]);
		return 1;
	}
	if (c == '"' || c == '\\') {
		e[0] = '\\', e[1] = (char)c, *elen = 2;
	} else if (go_short(c)) {
		e[0] = '\\', e[1] = go_short(c), *elen = 2;
	} else if (c < 0x20 || c == 0x7f) {
		*elen = (size_t)snprintf(e, 8, "\\x%02x", (unsigned)c);
	} else if (invisible(c)) {
		*elen = (size_t)snprintf(e, 8, "\\u%04x", (unsigned)c);
	} else {
		memcpy(e, s, *elen = len);
	}
	return len;
}

/* logrus needsQuoting: anything but [A-Za-z0-9-._/@^+] is quoted. */
static bool needs_quote(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!(isalnum(c) && c < 0x80) && c != '-' && c != '.' && c != '_' && c != '/' &&
		    c != '@' && c != '^' && c != '+')
			return true;
	}
	return false;
}

/* ---- the line ----------------------------------------------------------- */

/* The line being built: n <= cap, and cap leaves TAIL_BYTES of the buffer. */
struct line {
	char p[LINE_BYTES];
	size_t n, cap;
	bool json;
};

static bool put(struct line *l, const char *s, size_t len)
{
	if (len > l->cap - l->n)
		return false;
	memcpy(l->p + l->n, s, len);
	l->n += len;
	return true;
}

/* Writes a value: JSON strings always quoted, text ones when needed. Cut at
 * a character boundary when the line is full; false when not even its
 * quotes fit. */
static bool put_value(struct line *l, const char *s, size_t n)
{
	size_t (*esc)(const unsigned char *, size_t, char *, size_t *) =
		l->json ? json_char : text_char;
	char e[12];
	size_t elen;

	if (!l->json && !needs_quote(s, n)) {
		size_t room = l->cap - l->n;
		return put(l, s, n < room ? n : room);
	}
	if (l->cap - l->n < 2)
		return false;
	put(l, "\"", 1);
	l->cap--; /* the closing quote's room */
	for (size_t i = 0; i < n;) {
		size_t used = esc((const unsigned char *)s + i, n - i, e, &elen);
		if (!put(l, e, elen))
			break;
		i += used;
	}
	l->cap++;
	return put(l, "\"", 1);
}

/* Writes a key whole or fails: JSON-escaped and quoted, or for text with
 * the bytes logfmt cannot hold in a key (space, '=', '"', controls,
 * non-ASCII) as '_'. */
static bool put_key(struct line *l, const char *k, size_t n)
{
	char e[12];
	size_t elen;

	if (l->json) {
		if (!put(l, "\"", 1))
			return false;
		for (size_t i = 0; i < n;) {
			i += json_char((const unsigned char *)k + i, n - i, e, &elen);
			if (!put(l, e, elen))
				return false;
		}
		return put(l, "\"", 1);
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)k[i];
		char o = c <= ' ' || c >= 0x7f || c == '=' || c == '"' ? '_' : (char)c;
		if (!put(l, &o, 1))
			return false;
	}
	return true;
}

/* Writes one pair, or nothing at all when its key does not fit. A key that
 * names one of the line's own members gets logrus' "fields." prefix. */
static void put_pair(struct line *l, const char *k, size_t kn, const char *v, size_t vn)
{
	static const char *const own[] = {"time", "level", "msg"};
	char kb[16];
	size_t start = l->n;

	for (int i = 0; i < 3; i++)
		if (kn == strlen(own[i]) && !memcmp(k, own[i], kn)) {
			kn = (size_t)snprintf(kb, sizeof(kb), "fields.%s", own[i]);
			k = kb;
		}
	if (!(put(l, l->json ? "," : " ", 1) && put_key(l, k, kn) &&
	      put(l, l->json ? ":" : "=", 1) && put_value(l, v, vn)))
		l->n = start;
}

/* Walks the fields format (see log.h), writing each pair. */
static void put_fields(struct line *l, const char *f, va_list *ap, int err)
{
	char kb[KEY_BYTES], vb[LINE_BYTES];
	struct raw key = {kb, 0, sizeof(kb)}, val = {vb, 0, sizeof(vb)}, *cur;

	while (*f) {
		while (*f == ' ')
			f++;
		if (!*f)
			break;
		key.n = val.n = 0;
		cur = &key;
		while (*f && *f != ' ') {
			if (*f == '%')
				conv(cur, &f, ap, err);
			else if (*f == '=' && cur == &key)
				cur = &val, f++;
			else
				raw_put(cur, f++, 1);
		}
		put_pair(l, key.p, key.n, val.p, val.n);
	}
}

void gaz_log_emit(enum gaz_log_level lvl, const char *msg, const char *fields_fmt, ...)
{
	int err = errno;
	struct line l;
	char ts[40];
	struct timespec now;
	struct tm tm;
	size_t n;
	va_list ap;

	l.n = 0;
	l.cap = sizeof(l.p) - TAIL_BYTES;
	l.json = log_json;
	if ((unsigned)lvl > GAZ_LOG_FATAL)
		lvl = GAZ_LOG_FATAL;
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	n += (size_t)snprintf(ts + n, sizeof(ts) - n, ".%03ldZ", now.tv_nsec / 1000000);

	put(&l, l.json ? "{\"time\":" : "time=", l.json ? 8 : 5);
	put_value(&l, ts, n);
	put(&l, l.json ? ",\"level\":" : " level=", l.json ? 9 : 7);
	put_value(&l, level_names[lvl], strlen(level_names[lvl]));
	put(&l, l.json ? ",\"msg\":" : " msg=", l.json ? 7 : 5);
	put_value(&l, msg ? msg : "", msg ? strlen(msg) : 0);
	if (fields_fmt) {
		va_start(ap, fields_fmt);
		put_fields(&l, fields_fmt, &ap, err);
		va_end(ap);
	}
	if (l.json)
		l.p[l.n++] = '}';
	l.p[l.n++] = '\n';
	while (write(STDERR_FILENO, l.p, l.n) < 0 && errno == EINTR)
		;
	errno = err;
}
