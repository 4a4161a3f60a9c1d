/*
 * flags.c - keyword-table option parsing: defaults, INI, environment, argv.
 *
 * Invariants:
 *  - f->src_[i] is the highest source (SRC_*) that assigned option i; a
 *    source may overwrite only values from lower or equal sources, which is
 *    how precedence holds regardless of the order sources are read.
 *  - After the defaults pass every STRING slot holds a heap string and
 *    every STRLIST slot a heap (or empty) list owned by this module; nothing
 *    from the caller's storage is ever freed before that pass.
 *  - Values parse the way go-flags converts them: Go ParseBool spellings
 *    (and "" = true for bools), base-10 ints, Go durations.
 * Must not call: anything outside libc and lib/common.
 */
#include "common/flags.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common/duration.h"

enum { SRC_NONE = 0, SRC_DEF, SRC_INI, SRC_ENV, SRC_ARG };

static const struct gaz_flag no_flags[1];
#define FL_FOR(f, fl) for (const struct gaz_flag *fl = (f)->table ? (f)->table : no_flags; fl->name; fl++)

static size_t fl_index(const struct gaz_flags *f, const struct gaz_flag *fl)
{
	return (size_t)(fl - f->table);
}

/* Group name of an option: explicit, else namespace, else go-flags' default. */
static const char *fl_group(const struct gaz_flag *fl, char *buf, size_t cap)
{
	const char *dot = strchr(fl->name, '.');

	if (fl->group)
		return fl->group;
	if (!dot)
		return "Application Options";
	snprintf(buf, cap, "%.*s", (int)(dot - fl->name), fl->name);
	return buf;
}

/* INI key of an option: explicit, else the long name after the namespace. */
static const char *fl_ini_key(const struct gaz_flag *fl)
{
	const char *dot = strchr(fl->name, '.');

	if (fl->ini_name)
		return fl->ini_name;
	return dot ? dot + 1 : fl->name;
}

static const char *type_name(enum gaz_flag_type t)
{
	switch (t) {
	case GAZ_FLAG_STRING: return "string";
	case GAZ_FLAG_INT64: return "int64";
	case GAZ_FLAG_BOOL: return "bool";
	case GAZ_FLAG_DURATION: return "duration";
	case GAZ_FLAG_STRLIST: return "string list";
	}
	return "?";
}

/* ---- value conversion ------------------------------------------------ */

static int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"", "1", "t", "T", "TRUE", "true", "True"};
	static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (!strcmp(s, yes[i]))
			return *out = true, 0;
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (!strcmp(s, no[i]))
			return *out = false, 0;
	return GAZ_EINVAL;
}

static int parse_int(const char *s, bool unsigned_only, int64_t *out)
{
	char *end;
	long long v;

	if (!*s || (unsigned_only && *s == '-'))
		return GAZ_EINVAL;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || end == s)
		return GAZ_EINVAL;
	*out = v;
	return 0;
}

static bool in_choices(const char *choices, const char *v)
{
	size_t n = strlen(v);

	for (const char *p = choices; p && *p;) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);
		if (len == n && !memcmp(p, v, n))
			return true;
		p = bar ? bar + 1 : p + len;
	}
	return false;
}

static int list_append(struct gaz_strlist *l, const char *v, size_t len)
{
	char **nv = realloc(l->v, (l->n + 2) * sizeof(*nv));

	if (!nv)
		return GAZ_ENOMEM;
	l->v = nv;
	if (!(nv[l->n] = strndup(v, len)))
		return GAZ_ENOMEM;
	nv[++l->n] = NULL;
	return 0;
}

static void list_clear(struct gaz_strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

/* Converts `val` into the option's storage. `origin` names the source in
 * messages ("flag `--x'", "$X", "file:3"). */
static int store(const struct gaz_flag *fl, const char *val, const char *origin,
		 struct gaz_status *st)
{
	int rc = 0;

	switch (fl->type) {
	case GAZ_FLAG_STRING: {
		char *dup = strdup(val);
		if (!dup)
			return gaz_status_set(st, GAZ_ENOMEM, "out of memory setting %s", origin);
		free(*(char **)fl->ptr);
		*(char **)fl->ptr = dup;
		return 0;
	}
	case GAZ_FLAG_STRLIST:
		rc = list_append(fl->ptr, val, strlen(val));
		if (rc)
			return gaz_status_set(st, rc, "out of memory setting %s", origin);
		return 0;
	case GAZ_FLAG_INT64:
		rc = parse_int(val, fl->flags & GAZ_FLAG_UNSIGNED, fl->ptr);
		break;
	case GAZ_FLAG_BOOL:
		rc = parse_bool(val, fl->ptr);
		break;
	case GAZ_FLAG_DURATION:
		rc = gaz_duration_parse(val, fl->ptr, NULL);
		break;
	}
	if (rc)
		return gaz_status_set(st, GAZ_EINVAL, "invalid argument for %s (expected %s%s): \"%s\"",
				      origin, (fl->flags & GAZ_FLAG_UNSIGNED) ? "unsigned " : "",
				      type_name(fl->type), val);
	return 0;
}

/* Applies one value from source `src`, honouring precedence and choices. */
static int set_value(struct gaz_flags *f, const struct gaz_flag *fl, const char *val, int src,
		     const char *origin, struct gaz_status *st)
{
	unsigned char *have = &f->src_[fl_index(f, fl)];

	if (*have > src)
		return 0;
	if (fl->choices && !in_choices(fl->choices, val))
		return gaz_status_set(st, GAZ_EINVAL,
				      "invalid value `%s' for %s; allowed values are: %s", val,
				      origin, fl->choices);
	if (fl->type == GAZ_FLAG_STRLIST && *have < src)
		list_clear(fl->ptr);
	*have = (unsigned char)src;
	return store(fl, val, origin, st);
}

/* ---- sources ----------------------------------------------------------- */

static int apply_defaults(struct gaz_flags *f, struct gaz_status *st)
{
	char origin[160];
	int rc;

	FL_FOR(f, fl) {
		if (fl->type == GAZ_FLAG_STRING)
			*(char **)fl->ptr = NULL;
		else if (fl->type == GAZ_FLAG_STRLIST)
			*(struct gaz_strlist *)fl->ptr = (struct gaz_strlist){0};
		else if (fl->type == GAZ_FLAG_BOOL)
			*(bool *)fl->ptr = false;
		else
			*(int64_t *)fl->ptr = 0;
	}
	FL_FOR(f, fl) {
		snprintf(origin, sizeof(origin), "default of `--%s'", fl->name);
		f->src_[fl_index(f, fl)] = SRC_DEF;
		if (fl->type == GAZ_FLAG_STRLIST && (!fl->def || !*fl->def))
			continue;
		if (!fl->def && fl->type != GAZ_FLAG_STRING)
			continue;
		rc = store(fl, fl->def ? fl->def : "", origin, st);
		if (rc)
			return rc;
	}
	return 0;
}

static int apply_env(struct gaz_flags *f, struct gaz_status *st)
{
	char origin[160];
	const char *v;
	int rc;

	FL_FOR(f, fl) {
		if (!fl->env || !(v = getenv(fl->env)))
			continue;
		snprintf(origin, sizeof(origin), "$%s", fl->env);
		if (fl->type != GAZ_FLAG_STRLIST || !fl->env_delim) {
			rc = set_value(f, fl, v, SRC_ENV, origin, st);
			if (rc)
				return rc;
			continue;
		}
		for (const char *p = v;; p++) {
			const char *d = strchr(p, fl->env_delim);
			char *part = strndup(p, d ? (size_t)(d - p) : strlen(p));
			if (!part)
				return gaz_status_set(st, GAZ_ENOMEM, "out of memory reading %s", origin);
			rc = set_value(f, fl, part, SRC_ENV, origin, st);
			free(part);
			if (rc)
				return rc;
			if (!d)
				break;
			p = d;
		}
	}
	return 0;
}

/* ---- INI ----------------------------------------------------------------- */

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
		*--e = '\0';
	return s;
}

/* Go strconv.Unquote for double-quoted strings, in place; common escapes. */
static int unquote(char *s)
{
	static const char from[] = "abfnrtv\\\"'", to[] = "\a\b\f\n\r\t\v\\\"'";
	size_t n = strlen(s), o = 0;

	if (n < 2 || s[n - 1] != '"')
		return GAZ_EINVAL;
	for (size_t i = 1; i < n - 1; i++) {
		if (s[i] == '"')
			return GAZ_EINVAL;
		if (s[i] != '\\') {
			s[o++] = s[i];
			continue;
		}
		const char *e = ++i < n - 1 ? strchr(from, s[i]) : NULL;
		if (e && *e) {
			s[o++] = to[e - from];
		} else if (s[i] == 'x' && i + 2 < n - 1) {
			char hex[3] = {s[i + 1], s[i + 2], 0}, *end;
			s[o++] = (char)strtol(hex, &end, 16);
			if (*end)
				return GAZ_EINVAL;
			i += 2;
		} else {
			return GAZ_EINVAL;
		}
	}
	s[o] = '\0';
	return 0;
}

static bool ini_section_matches(const struct gaz_flag *fl, const char *section)
{
	char buf[128];
	const char *dot = strchr(fl->name, '.');

	if (!*section || !strcasecmp(section, fl_group(fl, buf, sizeof(buf))))
		return true;
	return dot && strlen(section) == (size_t)(dot - fl->name) &&
	       !strncasecmp(section, fl->name, (size_t)(dot - fl->name));
}

static const struct gaz_flag *ini_option(const struct gaz_flags *f, const char *section,
					 const char *key)
{
	FL_FOR(f, fl) {
		if ((fl->flags & GAZ_FLAG_NO_INI) || !ini_section_matches(fl, section))
			continue;
		if (!strcasecmp(key, fl_ini_key(fl)) || !strcmp(key, fl->name) ||
		    (fl->short_name && key[0] == fl->short_name && !key[1]))
			return fl;
	}
	return NULL;
}

/* One non-empty, non-comment INI line; `section` is updated in place. */
static int ini_line(struct gaz_flags *f, char *line, char *section, size_t cap,
		    const char *origin, struct gaz_status *st)
{
	const struct gaz_flag *fl;
	char *eq, *key, *val;

	if (line[0] == '[') {
		if (line[strlen(line) - 1] != ']')
			return gaz_status_set(st, GAZ_EINVAL, "%s: malformed section header", origin);
		line[strlen(line) - 1] = '\0';
		key = trim(line + 1);
		if (!*key)
			return gaz_status_set(st, GAZ_EINVAL, "%s: empty section name", origin);
		snprintf(section, cap, "%s", key);
		return 0;
	}
	if (!(eq = strchr(line, '=')))
		return gaz_status_set(st, GAZ_EINVAL, "%s: malformed key=value (%s)", origin, line);
	*eq = '\0';
	key = trim(line);
	val = trim(eq + 1);
	if (val[0] == '"' && unquote(val))
		return gaz_status_set(st, GAZ_EINVAL, "%s: invalid quoted value", origin);
	if (!(fl = ini_option(f, section, key)))
		return 0; /* unknown keys are ignored, as Gazette configures go-flags */
	if (fl->type == GAZ_FLAG_BOOL && !*val)
		val = "true";
	return set_value(f, fl, val, SRC_INI, origin, st);
}

static int apply_ini(struct gaz_flags *f, struct gaz_status *st)
{
	char section[128] = "", origin[PATH_MAX + 32], *line = NULL;
	size_t cap = 0, lineno = 0;
	FILE *fp;
	int rc = 0;

	if (!f->ini_path)
		return 0;
	if (!(fp = fopen(f->ini_path, "r"))) {
		if (errno == ENOENT)
			return 0;
		return gaz_status_set(st, GAZ_EIO, "open of \"%s\" failed: %s", f->ini_path,
				      strerror(errno));
	}
	while (!rc && getline(&line, &cap, fp) >= 0) {
		char *l = trim(line);
		lineno++;
		if (!*l || *l == ';' || *l == '#')
			continue;
		snprintf(origin, sizeof(origin), "%s:%zu", f->ini_path, lineno);
		rc = ini_line(f, l, section, sizeof(section), origin, st);
	}
	if (!rc && ferror(fp))
		rc = gaz_status_set(st, GAZ_EIO, "read of \"%s\" failed", f->ini_path);
	free(line);
	fclose(fp);
	return rc;
}

/* ---- argv ---------------------------------------------------------------- */

static const struct gaz_flag *find_long(const struct gaz_flags *f, const char *name, size_t len)
{
	FL_FOR(f, fl)
		if (strlen(fl->name) == len && !memcmp(fl->name, name, len))
			return fl;
	return NULL;
}

static const struct gaz_flag *find_short(const struct gaz_flags *f, char c)
{
	FL_FOR(f, fl)
		if (fl->short_name == c)
			return fl;
	return NULL;
}

static bool looks_like_option(const char *a)
{
	return a[0] == '-' && a[1] != '\0';
}

/* The value for a non-bool option given without "=v": the next argument. */
static int next_value(const struct gaz_flag *fl, int argc, char **argv, int *i,
		      const char *origin, const char **val, struct gaz_status *st)
{
	const char *a;
	bool numeric = fl->type == GAZ_FLAG_INT64 || fl->type == GAZ_FLAG_DURATION;

	if (*i + 1 >= argc)
		return gaz_status_set(st, GAZ_EINVAL, "expected argument for %s", origin);
	a = argv[*i + 1];
	if (looks_like_option(a) && !(numeric && a[1] >= '0' && a[1] <= '9'))
		return gaz_status_set(st, GAZ_EINVAL, "expected argument for %s, but got option `%s'",
				      origin, a);
	*val = a;
	(*i)++;
	return 0;
}

static int parse_long(struct gaz_flags *f, int argc, char **argv, int *i, struct gaz_status *st)
{
	const char *name = argv[*i] + 2, *eq = strchr(name, '='), *val = eq ? eq + 1 : NULL;
	size_t len = eq ? (size_t)(eq - name) : strlen(name);
	const struct gaz_flag *fl = find_long(f, name, len);
	char origin[160];
	int rc;

	if (!fl && len == 4 && !memcmp(name, "help", 4))
		return GAZ_FLAGS_HELP;
	if (!fl)
		return gaz_status_set(st, GAZ_EINVAL, "unknown flag `%.*s'", (int)len, name);
	snprintf(origin, sizeof(origin), "flag `--%s'", fl->name);
	if (!val && fl->type == GAZ_FLAG_BOOL)
		val = "true";
	if (!val && (rc = next_value(fl, argc, argv, i, origin, &val, st)))
		return rc;
	return set_value(f, fl, val, SRC_ARG, origin, st);
}

static int parse_short(struct gaz_flags *f, int argc, char **argv, int *i, struct gaz_status *st)
{
	const char *s = argv[*i] + 1, *val;
	char origin[160];
	int rc;

	for (size_t j = 0; s[j]; j++) {
		const struct gaz_flag *fl = find_short(f, s[j]);
		if (!fl && s[j] == 'h')
			return GAZ_FLAGS_HELP;
		if (!fl)
			return gaz_status_set(st, GAZ_EINVAL, "unknown flag `%c'", s[j]);
		snprintf(origin, sizeof(origin), "flag `-%c, --%s'", fl->short_name, fl->name);
		if (j == 0 && s[1] == '=') /* -o=v */
			return set_value(f, fl, s + 2, SRC_ARG, origin, st);
		if (fl->type == GAZ_FLAG_BOOL) { /* -abc: a run of bools */
			if ((rc = set_value(f, fl, "true", SRC_ARG, origin, st)))
				return rc;
			continue;
		}
		val = s + j + 1; /* -ov: the rest is the value */
		if (!*val && (rc = next_value(fl, argc, argv, i, origin, &val, st)))
			return rc;
		return set_value(f, fl, val, SRC_ARG, origin, st);
	}
	return 0;
}

static int apply_argv(struct gaz_flags *f, int argc, char **argv, struct gaz_status *st)
{
	bool options = true;
	int rc;

	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (!options || !looks_like_option(a)) {
			f->pos[f->npos++] = argv[i];
		} else if (!strcmp(a, "--")) {
			options = false;
		} else {
			rc = a[1] == '-' ? parse_long(f, argc, argv, &i, st)
					 : parse_short(f, argc, argv, &i, st);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static int check_required(const struct gaz_flags *f, struct gaz_status *st)
{
	FL_FOR(f, fl) {
		if (!(fl->flags & GAZ_FLAG_REQUIRED) || f->src_[fl_index(f, fl)] > SRC_DEF)
			continue;
		if (fl->short_name)
			return gaz_status_set(st, GAZ_EINVAL,
					      "the required flag `-%c, --%s' was not specified",
					      fl->short_name, fl->name);
		return gaz_status_set(st, GAZ_EINVAL, "the required flag `--%s' was not specified",
				      fl->name);
	}
	return 0;
}

int gaz_flags_parse(struct gaz_flags *f, int argc, char **argv, struct gaz_status *st)
{
	size_t n = 0;
	int rc;

	FL_FOR(f, fl)
		n++;
	f->npos = 0;
	f->src_ = calloc(n + 1, 1);
	f->pos = calloc((size_t)argc + 1, sizeof(*f->pos));
	if (!f->src_ || !f->pos) {
		free(f->src_);
		free(f->pos);
		f->src_ = NULL;
		f->pos = NULL;
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory parsing flags");
	}
	if ((rc = apply_defaults(f, st)) || (rc = apply_ini(f, st)) ||
	    (rc = apply_env(f, st)) || (rc = apply_argv(f, argc, argv, st)))
		goto out;
	rc = check_required(f, st);
out:
	if (rc == GAZ_FLAGS_HELP)
		gaz_flags_print_help(f, f->help_out ? f->help_out : stdout);
	return rc;
}

void gaz_flags_release(struct gaz_flags *f)
{
	if (f->src_) {
		FL_FOR(f, fl) {
			if (fl->type == GAZ_FLAG_STRING) {
				free(*(char **)fl->ptr);
				*(char **)fl->ptr = NULL;
			} else if (fl->type == GAZ_FLAG_STRLIST) {
				list_clear(fl->ptr);
			}
		}
	}
	free(f->src_);
	free(f->pos);
	f->src_ = NULL;
	f->pos = NULL;
	f->npos = 0;
}

/* ---- output -------------------------------------------------------------- */

/* True if option `fl` is the first of its group in the table. */
static bool first_of_group(const struct gaz_flags *f, const struct gaz_flag *fl)
{
	char a[128], b[128];
	const char *g = fl_group(fl, a, sizeof(a));

	for (const struct gaz_flag *p = f->table; p != fl; p++)
		if (!strcmp(fl_group(p, b, sizeof(b)), g))
			return false;
	return true;
}

static bool same_group(const struct gaz_flag *x, const struct gaz_flag *y)
{
	char a[128], b[128];

	return !strcmp(fl_group(x, a, sizeof(a)), fl_group(y, b, sizeof(b)));
}

static int help_left(const struct gaz_flag *fl, char *buf, size_t cap)
{
	char sh[8] = "    ";

	if (fl->short_name)
		snprintf(sh, sizeof(sh), "-%c, ", fl->short_name);
	if (fl->type == GAZ_FLAG_BOOL)
		return snprintf(buf, cap, "  %s--%s", sh, fl->name);
	if (fl->choices)
		return snprintf(buf, cap, "  %s--%s=[%s]", sh, fl->name, fl->choices);
	return snprintf(buf, cap, "  %s--%s=", sh, fl->name);
}

static void help_option(const struct gaz_flag *fl, int width, FILE *out)
{
	char left[256];

	help_left(fl, left, sizeof(left));
	fprintf(out, "%-*s %s", width, left, fl->help ? fl->help : "");
	if (fl->def && *fl->def)
		fprintf(out, " (default: %s)", fl->def);
	if (fl->env)
		fprintf(out, " [$%s]", fl->env);
	fputc('\n', out);
}

void gaz_flags_print_help(const struct gaz_flags *f, FILE *out)
{
	char left[256], gb[128];
	int width = (int)strlen("  -h, --help");

	FL_FOR(f, fl) {
		int n = help_left(fl, left, sizeof(left));
		width = n > width ? n : width;
	}
	fprintf(out, "Usage:\n  %s %s\n", f->prog ? f->prog : "",
		f->usage ? f->usage : "[OPTIONS]");
	if (f->description)
		fprintf(out, "\n%s\n", f->description);
	FL_FOR(f, fl) {
		if (!first_of_group(f, fl))
			continue;
		fprintf(out, "\n%s:\n", fl_group(fl, gb, sizeof(gb)));
		for (const struct gaz_flag *o = fl; o->name; o++)
			if (same_group(fl, o))
				help_option(o, width, out);
	}
	fprintf(out, "\nHelp Options:\n%-*s Show this help message\n", width, "  -h, --help");
	if (!f->commands || !f->commands[0].name)
		return;
	width = 0;
	for (const struct gaz_flags_cmd *c = f->commands; c->name; c++)
		width = (int)strlen(c->name) > width ? (int)strlen(c->name) : width;
	fprintf(out, "\nAvailable commands:\n");
	for (const struct gaz_flags_cmd *c = f->commands; c->name; c++)
		fprintf(out, "  %-*s  %s\n", width, c->name, c->summary ? c->summary : "");
}

#ifndef GAZ_VERSION
#define GAZ_VERSION "development"
#endif
#ifndef GAZ_BUILD_DATE
#define GAZ_BUILD_DATE "unknown"
#endif

void gaz_flags_print_version(FILE *out)
{
	fprintf(out, "\nVersion %s, built at %s.\n", GAZ_VERSION, GAZ_BUILD_DATE);
}

/* go-flags' list of command names: "a, b or c". */
static void command_names(const struct gaz_flags_cmd *cmds, char *buf, size_t cap)
{
	size_t n = 0, at = 0;

	while (cmds && cmds[n].name)
		n++;
	buf[0] = '\0';
	for (size_t i = 0; i < n && at < cap; i++) {
		int w = snprintf(buf + at, cap - at, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ",
				 cmds[i].name);
		at += w > 0 ? (size_t)w : 0;
	}
}

/* Whether option argv[*i] is one of f's; steps *i over its value. */
static int command_option(const struct gaz_flags *f, int argc, char **argv, int *i,
			  struct gaz_status *st)
{
	const char *a = argv[*i];
	const struct gaz_flag *fl;

	if (a[1] == '-') {
		const char *name = a + 2, *eq = strchr(name, '=');
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		if (len == 4 && !memcmp(name, "help", 4))
			return GAZ_FLAGS_HELP;
		if (!(fl = find_long(f, name, len)))
			return gaz_status_set(st, GAZ_EINVAL, "unknown flag `%.*s'", (int)len, name);
		if (!eq && fl->type != GAZ_FLAG_BOOL && *i + 1 < argc)
			(*i)++;
		return 0;
	}
	for (size_t j = 1; a[j]; j++) {
		if (!(fl = find_short(f, a[j])) && a[j] == 'h')
			return GAZ_FLAGS_HELP;
		if (!fl)
			return gaz_status_set(st, GAZ_EINVAL, "unknown flag `%c'", a[j]);
		if (fl->type != GAZ_FLAG_BOOL) {
			if (!a[j + 1] && *i + 1 < argc)
				(*i)++;
			break;
		}
	}
	return 0;
}

int gaz_flags_find_command(const struct gaz_flags *f, int argc, char **argv, int *at,
			   struct gaz_status *st)
{
	char names[512];
	int rc;

	command_names(f->commands, names, sizeof(names));
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (looks_like_option(argv[i])) {
			if ((rc = command_option(f, argc, argv, &i, st)))
				return rc;
			continue;
		}
		for (int c = 0; f->commands && f->commands[c].name; c++) {
			if (!strcmp(argv[i], f->commands[c].name)) {
				*at = i;
				return c;
			}
		}
		return gaz_status_set(st, GAZ_EINVAL,
				      "Unknown command `%s'. Please specify one command of: %s",
				      argv[i], names);
	}
	return gaz_status_set(st, GAZ_ENOTFOUND, "Please specify one command of: %s", names);
}

/* go_short_escape: the letter of strconv.Quote's escape for control byte
 * c ('n' for '\n'), or 0. */
static char go_short_escape(unsigned char c)
{
	static const char ctl[] = "\a\b\f\n\r\t\v", letter[] = "abfnrtv";

	for (size_t i = 0; i < sizeof(ctl) - 1; i++)
		if (ctl[i] == (char)c)
			return letter[i];
	return 0;
}

/* Writes one "Key = value" line, quoting unprintable strings as Go's
 * strconv.Quote does (\n, \t and kin, else \xNN). */
static void ini_value_line(const char *key, const char *v, bool commented, FILE *out)
{
	bool printable = true;

	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		printable = printable && *p >= 0x20 && *p != 0x7f;
	fprintf(out, "%s%s =", commented ? "; " : "", key);
	if (!printable) {
		fputs(" \"", out);
		for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
			char esc = go_short_escape(*p);

			if (*p == '"' || *p == '\\')
				fprintf(out, "\\%c", *p);
			else if (esc)
				fprintf(out, "\\%c", esc);
			else if (*p < 0x20 || *p == 0x7f)
				fprintf(out, "\\x%02x", *p);
			else
				fputc(*p, out);
		}
		fputc('"', out);
	} else if (*v) {
		fprintf(out, " %s", v);
	}
	fputc('\n', out);
}

/* Current value of a scalar option as text, and whether it equals the default. */
static const char *ini_scalar(const struct gaz_flag *fl, char *buf, size_t cap, bool *is_def)
{
	const char *def = fl->def ? fl->def : "";
	int64_t dv = 0;
	bool db = false;

	switch (fl->type) {
	case GAZ_FLAG_STRING:
		*is_def = !strcmp(*(char **)fl->ptr, def);
		return *(char **)fl->ptr;
	case GAZ_FLAG_INT64:
		parse_int(def, false, &dv);
		*is_def = dv == *(int64_t *)fl->ptr;
		snprintf(buf, cap, "%lld", (long long)*(int64_t *)fl->ptr);
		return buf;
	case GAZ_FLAG_DURATION:
		if (*def)
			gaz_duration_parse(def, &dv, NULL);
		*is_def = dv == *(int64_t *)fl->ptr;
		return gaz_duration_format(*(int64_t *)fl->ptr, buf);
	case GAZ_FLAG_BOOL:
	default:
		if (*def)
			parse_bool(def, &db);
		*is_def = db == *(bool *)fl->ptr;
		return *(bool *)fl->ptr ? "true" : "false";
	}
}

static void ini_option_out(const struct gaz_flag *fl, FILE *out)
{
	char buf[64];
	bool is_def;

	if (fl->help && *fl->help)
		fprintf(out, "; %s\n", fl->help);
	if (fl->type == GAZ_FLAG_STRLIST) {
		const struct gaz_strlist *l = fl->ptr;
		bool same = fl->def && *fl->def ? l->n == 1 && !strcmp(l->v[0], fl->def) : !l->n;
		if (!l->n)
			ini_value_line(fl_ini_key(fl), "", true, out);
		for (size_t i = 0; i < l->n; i++)
			ini_value_line(fl_ini_key(fl), l->v[i], same, out);
	} else {
		const char *v = ini_scalar(fl, buf, sizeof(buf), &is_def);
		ini_value_line(fl_ini_key(fl), v ? v : "", is_def, out);
	}
	fputc('\n', out);
}

void gaz_flags_print_ini(const struct gaz_flags *f, FILE *out)
{
	char gb[128];

	FL_FOR(f, fl) {
		bool any = false;
		if (!first_of_group(f, fl))
			continue;
		for (const struct gaz_flag *o = fl; o->name; o++) {
			if (!same_group(fl, o) || (o->flags & GAZ_FLAG_NO_INI))
				continue;
			if (!any)
				fprintf(out, "[%s]\n", fl_group(fl, gb, sizeof(gb)));
			any = true;
			ini_option_out(o, out);
		}
	}
}

int gaz_flags_find_ini(const char *name, char *path, size_t cap)
{
	const char *roots[4] = {".", getenv("HOME"), getenv("UserProfile"),
				getenv("APPLICATION_CONFIG_ROOT")};
	struct stat sb;

	for (size_t i = 0; i < 4; i++) {
		if (!roots[i] || !*roots[i])
			continue;
		if (i == 1 || i == 2)
			snprintf(path, cap, "%s/.config/gazette/%s", roots[i], name);
		else
			snprintf(path, cap, "%s/%s", roots[i], name);
		if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
			return 0;
	}
	return GAZ_ENOTFOUND;
}
