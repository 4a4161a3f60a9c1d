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

#include <string.h>

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
