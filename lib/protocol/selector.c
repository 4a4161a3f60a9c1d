/*
 * selector.c - the gazctl `-l` selector grammar (gazette-facts §3.3):
 * parsing into a heap LabelSelector and formatting back.
 *
 * Gazette parses with six anchored regular expressions tried in order
 * (equal, not-equal, in, notin, exists, not-exists), each consuming one
 * term and its trailing ',' . We match the same languages by hand; each
 * pattern is deterministic (every optional part either must be taken or
 * cannot matter), so no backtracking is needed:
 *
 *   TOKEN  = " "? [L N -_+/.]{2,} (":prefix")?      (2+ runes)
 *   PATH   = " "? [L N -_+/.=%]*
 *   END    = " "? ("," | end of input)
 *   equal     TOKEN " "? "=" "="? PATH END
 *   not-equal TOKEN " "? "!=" PATH END
 *   in        TOKEN " in" " "? "(" [^)]+ ")" END
 *   notin     TOKEN " not" " "? "in" " "? "(" [^)]+ ")" END
 *   exists    TOKEN END
 *   not-exist " "? "!" TOKEN END
 *   set value PATH END    (repeated over the parenthesised text)
 */
#include "protocol/labels.h"
#include "protocol/validate.h"
#include "protocol/vctx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct span {
	const char *p;
	size_t n;
};

/* Bytes of the run of letters/numbers/`symbols` in [s, end); runes in *runes. */
static size_t run_of(const char *s, const char *end, const char *symbols, size_t *runes)
{
	size_t i = 0, w;

	*runes = 0;
	while (s + i < end) {
		uint32_t r = gaz__utf8_decode((const unsigned char *)s + i, (size_t)(end - s) - i, &w);

		if (!gaz_rune_is_letter_or_number(r) && !(r && r < 0x80 && strchr(symbols, (int)r)))
			break;
		i += w;
		(*runes)++;
	}
	return i;
}

static size_t opt_space(const char *s, const char *end)
{
	return s < end && *s == ' ';
}

static bool lit(const char *s, const char *end, const char *word)
{
	size_t n = strlen(word);

	return (size_t)(end - s) >= n && !memcmp(s, word, n);
}

static size_t m_token(const char *s, const char *end, struct span *key)
{
	size_t o = opt_space(s, end), runes, n = run_of(s + o, end, GAZ_TOKEN_SYMBOLS, &runes);

	if (runes < 2)
		return 0;
	if (lit(s + o + n, end, ":prefix"))
		n += 7;
	key->p = s + o;
	key->n = n;
	return o + n;
}

static size_t m_path(const char *s, const char *end, struct span *val)
{
	size_t o = opt_space(s, end), runes;

	val->p = s + o;
	val->n = run_of(s + o, end, GAZ_PATH_SYMBOLS, &runes);
	return o + val->n;
}

/* END: bytes consumed, or -1. */
static long m_end(const char *s, const char *end)
{
	size_t o = opt_space(s, end);

	if (s + o < end && s[o] == ',')
		return (long)o + 1;
	return s + o == end ? (long)o : -1;
}

/* Returns the total length when `s + o` continues with END, else 0. */
static size_t with_end(const char *s, const char *end, size_t o)
{
	long e = m_end(s + o, end);

	return e < 0 ? 0 : o + (size_t)e;
}

static size_t m_equal(const char *s, const char *end, struct span *k, struct span *v)
{
	size_t o = m_token(s, end, k);

	if (!o)
		return 0;
	o += opt_space(s + o, end);
	if (!lit(s + o, end, "="))
		return 0;
	o += lit(s + o, end, "==") ? 2 : 1;
	return with_end(s, end, o + m_path(s + o, end, v));
}

static size_t m_not_equal(const char *s, const char *end, struct span *k, struct span *v)
{
	size_t o = m_token(s, end, k);

	if (!o)
		return 0;
	o += opt_space(s + o, end);
	if (!lit(s + o, end, "!="))
		return 0;
	o += 2;
	return with_end(s, end, o + m_path(s + o, end, v));
}

/* " "? "(" [^)]+ ")" END at s + o; the parenthesised text into *in. */
static size_t m_paren(const char *s, const char *end, size_t o, struct span *in)
{
	const char *close;

	o += opt_space(s + o, end);
	if (!lit(s + o, end, "("))
		return 0;
	o++;
	close = memchr(s + o, ')', (size_t)(end - s) - o);
	if (!close || close == s + o)
		return 0;
	in->p = s + o;
	in->n = (size_t)(close - in->p);
	return with_end(s, end, o + in->n + 1);
}

static size_t m_in(const char *s, const char *end, bool negate, struct span *k,
		   struct span *in)
{
	size_t o = m_token(s, end, k);

	if (!o)
		return 0;
	if (negate) {
		if (!lit(s + o, end, " not"))
			return 0;
		o += 4;
		o += opt_space(s + o, end);
		if (!lit(s + o, end, "in"))
			return 0;
		o += 2;
	} else {
		if (!lit(s + o, end, " in"))
			return 0;
		o += 3;
	}
	return m_paren(s, end, o, in);
}

static size_t m_exists(const char *s, const char *end, bool negate, struct span *k)
{
	size_t o = 0, t;

	if (negate) {
		o = opt_space(s, end);
		if (!lit(s + o, end, "!"))
			return 0;
		o++;
	}
	if (!(t = m_token(s + o, end, k)))
		return 0;
	return with_end(s, end, o + t);
}

/* Adds key=value (spans) to `set`, honouring a ":prefix" key suffix. */
static int add_span(Protocol__LabelSet *set, struct span k, struct span v)
{
	char *name = strndup(k.p, k.n), *value = strndup(v.p, v.n);
	int rc = name && value ? gaz_labelset_add(set, name, value) : GAZ_ENOMEM;

	free(name);
	free(value);
	return rc;
}

/* Adds each value of the parenthesised text `in` under key `k`. */
static int add_set_values(Protocol__LabelSet *set, struct span k, struct span in,
			  const char *term, const char *end, struct gaz_status *st)
{
	const char *p = in.p, *stop = in.p + in.n;
	char q1[200], q2[200], ctx[220];

	while (p < stop) {
		struct span v;
		size_t o = m_path(p, stop, &v);
		long e = m_end(p + o, stop);
		int rc;

		if (e < 0) {
			snprintf(ctx, sizeof(ctx), "parsing %s",
				 gaz__quote(term, (size_t)(end - term), q1, sizeof(q1)));
			GAZ__VCTX(c, NULL, ctx, -1);
			return gaz__verr(st, &c,
					 "could not match %s to a label selector set expression",
					 gaz__quote(p, (size_t)(stop - p), q2, sizeof(q2)));
		}
		if ((rc = add_span(set, k, v)))
			return rc;
		p += o + (size_t)e;
	}
	return 0;
}

/* Parses one term at s into sel; returns bytes consumed or 0 with rc set. */
static size_t parse_term(Protocol__LabelSelector *sel, const char *s, const char *end,
			 int *rc, struct gaz_status *st)
{
	struct span k, v, none = {"", 0};
	size_t n;

	if ((n = m_equal(s, end, &k, &v)))
		*rc = add_span(sel->include, k, v);
	else if ((n = m_not_equal(s, end, &k, &v)))
		*rc = add_span(sel->exclude, k, v);
	else if ((n = m_in(s, end, false, &k, &v)))
		*rc = add_set_values(sel->include, k, v, s, end, st);
	else if ((n = m_in(s, end, true, &k, &v)))
		*rc = add_set_values(sel->exclude, k, v, s, end, st);
	else if ((n = m_exists(s, end, false, &k)))
		*rc = add_span(sel->include, k, none);
	else if ((n = m_exists(s, end, true, &k)))
		*rc = add_span(sel->exclude, k, none);
	else
		*rc = GAZ_EINVAL;
	return *rc ? 0 : n;
}

int gaz_selector_parse(const char *s, Protocol__LabelSelector **out, struct gaz_status *st)
{
	const char *end;
	Protocol__LabelSelector *sel = gaz_selector_new();
	int rc = 0;
	char q[300];

	*out = NULL;
	if (!sel)
		return gaz_status_set(st, GAZ_ENOMEM, "parsing selector: out of memory");
	s = gaz__str(s);
	end = s + strlen(s);
	while (s < end) {
		size_t n = parse_term(sel, s, end, &rc, st);

		if (rc == GAZ_EINVAL && (!st || st->code == 0))
			gaz__verr(st, NULL, "could not match %s to a label selector expression",
				  gaz__quote(s, (size_t)(end - s), q, sizeof(q)));
		if (rc)
			break;
		s += n;
	}
	if (!rc)
		rc = gaz__validate_selector(sel, NULL, st);
	if (rc == GAZ_ENOMEM)
		gaz_status_set(st, GAZ_ENOMEM, "parsing selector: out of memory");
	if (rc) {
		gaz_selector_free(sel);
		return rc;
	}
	*out = sel;
	return 0;
}

Protocol__LabelSelector *gaz_selector_new(void)
{
	Protocol__LabelSelector *sel = malloc(sizeof(*sel));

	if (!sel)
		return NULL;
	protocol__label_selector__init(sel);
	sel->include = gaz_labelset_new();
	sel->exclude = gaz_labelset_new();
	if (!sel->include || !sel->exclude) {
		gaz_selector_free(sel);
		return NULL;
	}
	return sel;
}

void gaz_selector_free(Protocol__LabelSelector *sel)
{
	if (!sel)
		return;
	gaz_labelset_free(sel->include);
	gaz_labelset_free(sel->exclude);
	free(sel);
}

/* ---- formatting ------------------------------------------------------------ */

struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void sb_put(struct sbuf *b, const char *s)
{
	size_t n = strlen(s);

	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = (b->len + n + 1) * 2;
		char *p = realloc(b->p, cap);

		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n + 1);
	b->len += n;
}

/* A label as displayed: name with ":prefix" appended for prefix labels. */
struct shown {
	char *name;
	const char *value;
};

static int shown_cmp(const void *a, const void *b)
{
	const struct shown *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->value, y->value);
}

/* Writes the terms of one group [l, l + n). */
static void put_group(struct sbuf *b, const struct shown *l, size_t n, bool exc)
{
	if (n == 1 && l[0].value[0] == '\0') {
		sb_put(b, exc ? "!" : "");
		sb_put(b, l[0].name);
		return;
	}
	sb_put(b, l[0].name);
	if (n == 1) {
		sb_put(b, exc ? "!=" : "=");
		sb_put(b, l[0].value);
		return;
	}
	sb_put(b, exc ? " notin (" : " in (");
	for (size_t i = 0; i < n; i++) {
		sb_put(b, i ? "," : "");
		sb_put(b, l[i].value);
	}
	sb_put(b, ")");
}

static void put_side(struct sbuf *b, const Protocol__LabelSet *set, bool exc)
{
	size_t n = set ? set->n_labels : 0, i, j;
	struct shown *l = n ? calloc(n, sizeof(*l)) : NULL;

	if (n && !l) {
		b->oom = true;
		return;
	}
	for (i = 0; i < n; i++) {
		const Protocol__Label *x = set->labels[i];
		size_t k = strlen(gaz__str(x->name));

		l[i].value = gaz__str(x->value);
		if (!(l[i].name = malloc(k + 8)))
			b->oom = true;
		else
			snprintf(l[i].name, k + 8, "%s%s", gaz__str(x->name), x->prefix ? ":prefix" : "");
	}
	if (n && !b->oom)
		qsort(l, n, sizeof(*l), shown_cmp);
	for (i = 0; !b->oom && i < n; i = j) {
		for (j = i + 1; j < n && !strcmp(l[j].name, l[i].name); j++)
			;
		put_group(b, l + i, j - i, exc);
		sb_put(b, j < n ? "," : "");
	}
	for (i = 0; i < n; i++)
		free(l[i].name);
	free(l);
}

int gaz_selector_format(const Protocol__LabelSelector *sel, char **out, struct gaz_status *st)
{
	struct sbuf b = {0};
	const Protocol__LabelSet *exc = sel ? sel->exclude : NULL;

	*out = NULL;
	sb_put(&b, "");
	put_side(&b, sel ? sel->include : NULL, false);
	if (b.len && exc && exc->n_labels)
		sb_put(&b, ",");
	put_side(&b, exc, true);
	if (b.oom) {
		free(b.p);
		return gaz_status_set(st, GAZ_ENOMEM, "formatting selector: out of memory");
	}
	*out = b.p;
	return 0;
}
