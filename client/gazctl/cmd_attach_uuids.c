/*
 * cmd_attach_uuids.c - `gazctl attach-uuids`: for each line of each input
 * file (stdin without files), build a fresh message UUID and write
 * --template with the UUID and the line to stdout, as Gazette's gazctl:
 *
 *   - one random ProducerID for the run, a Clock started at the wall time
 *     and moved forward to it as time passes, one Clock tick per line, and
 *     flags OUTSIDE_TXN (committed at once): RFC 4122 version 1 UUIDs in
 *     Gazette's layout (message/include/gazette/message.h);
 *   - lines as bufio.Scanner splits them: the "\n" and a "\r" before it
 *     removed, a last line without "\n" kept; a line longer than
 *     --max-length fails ("bufio.Scanner: token too long");
 *   - --skip-header drops the first line of each input.
 *
 * --template is a Go text/template over {UUID, Line}; the actions
 * {{.UUID}} and {{.Line}} (spaces allowed inside the braces) and literal
 * text are supported, which is what attach-uuids templates use; any
 * other action is refused before anything is read.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/gazctl/gazctl.h"
#include "gazette/message.h"

static struct {
	char *tpl;
	int64_t max_length;
	bool skip_header;
} opt;

const struct gaz_flag gazctl_attach_uuids_flags[] = {
	{ .name = "template", .type = GAZ_FLAG_STRING, .def = "{{.UUID}},{{.Line}}\n",
	  .ptr = &opt.tpl, .help = "Go text/template for output", .group = "attach-uuids",
	  .ini_name = "Template" },
	{ .name = "max-length", .type = GAZ_FLAG_INT64, .def = "4194304", .ptr = &opt.max_length,
	  .help = "Maximum allowed byte-length of an input line", .group = "attach-uuids",
	  .ini_name = "MaxLength" },
	{ .name = "skip-header", .type = GAZ_FLAG_BOOL, .ptr = &opt.skip_header,
	  .help = "Omit the first line of each input file", .group = "attach-uuids",
	  .ini_name = "SkipHeader" },
	{ 0 },
};

/* A parsed template: literal text and the two fields, in order. */
enum piece_kind { P_TEXT, P_UUID, P_LINE };
struct piece {
	enum piece_kind kind;
	const char *text; /* P_TEXT: borrowed from the template */
	size_t len;
};

/* parse_action reads the action in s[0..n) ("{{" and "}}" excluded). */
static int parse_action(const char *s, size_t n, enum piece_kind *kind, struct gaz_status *st)
{
	while (n && *s == ' ')
		s++, n--;
	while (n && s[n - 1] == ' ')
		n--;
	if (n == 5 && !memcmp(s, ".UUID", 5))
		*kind = P_UUID;
	else if (n == 5 && !memcmp(s, ".Line", 5))
		*kind = P_LINE;
	else
		return gaz_status_set(st, GAZ_EINVAL,
				      "template: unsupported action {{%.*s}} (only {{.UUID}} and "
				      "{{.Line}} are supported)",
				      (int)n, s);
	return 0;
}

static int parse_template(const char *t, struct piece **out, size_t *n, struct gaz_status *st)
{
	struct piece *v = NULL;
	size_t k = 0;

	while (*t) {
		const char *open = strstr(t, "{{"), *close;
		struct piece p = {P_TEXT, t, open ? (size_t)(open - t) : strlen(t)};

		if (p.len) {
			v = gazctl_xrealloc(v, (k + 1) * sizeof(*v));
			v[k++] = p;
		}
		if (!open)
			break;
		if (!(close = strstr(open + 2, "}}"))) {
			free(v);
			return gaz_status_set(st, GAZ_EINVAL, "template: unclosed action");
		}
		v = gazctl_xrealloc(v, (k + 1) * sizeof(*v));
		v[k] = (struct piece){P_TEXT, NULL, 0};
		if (parse_action(open + 2, (size_t)(close - open - 2), &v[k].kind, st)) {
			free(v);
			return GAZ_EINVAL;
		}
		k++;
		t = close + 2;
	}
	*out = v;
	*n = k;
	return 0;
}

struct attach {
	struct piece *tpl;
	size_t ntpl;
	gaz_producer_id producer;
	gaz_clock clock;
	char *line; /* holds up to max_length + 2 bytes */
};

static void emit(struct attach *a, const char *line, size_t len)
{
	char text[GAZ_UUID_STR_LEN + 1];
	gaz_uuid u;

	gaz_clock_update_now(&a->clock);
	gaz_uuid_build(&u, &a->producer, gaz_clock_tick(&a->clock), GAZ_FLAG_OUTSIDE_TXN);
	gaz_uuid_format(&u, text);
	for (size_t i = 0; i < a->ntpl; i++) {
		if (a->tpl[i].kind == P_TEXT)
			fwrite(a->tpl[i].text, 1, a->tpl[i].len, stdout);
		else if (a->tpl[i].kind == P_UUID)
			fputs(text, stdout);
		else
			fwrite(line, 1, len, stdout);
	}
}

/* attach_file writes every line of `f` (named `name`). */
static int attach_file(struct attach *a, FILE *f, const char *name, struct gaz_status *st)
{
	bool skip = opt.skip_header;
	size_t cap = (size_t)opt.max_length + 2;

	for (;;) {
		size_t len = 0;
		int ch = EOF;

		while (len < cap && (ch = getc(f)) != EOF && ch != '\n')
			a->line[len++] = (char)ch;
		if (ch == EOF && ferror(f))
			return gaz_status_set(st, GAZ_EIO, "read %s: %s", name, strerror(errno));
		if (ch == EOF && len == 0)
			return 0;
		if (len && a->line[len - 1] == '\r' && ch == '\n')
			len--;
		if (len > (size_t)opt.max_length || (len == cap && ch != '\n'))
			return gaz_status_set(st, GAZ_ERANGE, "bufio.Scanner: token too long");
		if (skip)
			skip = false;
		else
			emit(a, a->line, len);
		if (ch == EOF)
			return 0;
	}
}

static int attach_all(struct attach *a, char **paths, int n, struct gaz_status *st)
{
	FILE **files = gazctl_xcalloc((size_t)n + 1, sizeof(*files));
	int rc = 0, opened = 0;

	for (; opened < n; opened++) /* every input opens before any is read, as Gazette */
		if (!(files[opened] = fopen(paths[opened], "rb"))) {
			rc = gaz_status_set(st, GAZ_EIO, "open %s: %s", paths[opened], strerror(errno));
			break;
		}
	if (!rc && n == 0)
		rc = attach_file(a, stdin, "/dev/stdin", st);
	for (int i = 0; !rc && i < n; i++)
		rc = attach_file(a, files[i], paths[i], st);
	for (int i = 0; i < opened; i++)
		fclose(files[i]);
	free(files);
	return rc;
}

int gazctl_attach_uuids(int argc, char **argv, struct gaz_status *st)
{
	static char ini[4096];
	struct gaz_flags f = {.prog = "gazctl",
			      .usage = "[OPTIONS] attach-uuids [attach-uuids-OPTIONS] "
				       "[Paths...]",
			      .description = gazctl_attach_uuids_description,
			      .table = gazctl_attach_uuids_flags};
	struct attach a = {0};
	int rc;

	f.ini_path = gaz_flags_find_ini("gazctl.ini", ini, sizeof(ini)) == 0 ? ini : NULL;
	if ((rc = gaz_flags_parse(&f, argc, argv, st))) {
		if (rc == GAZ_FLAGS_HELP) {
			fflush(stdout);
			gaz_flags_print_version(stderr);
		}
		gaz_flags_release(&f);
		return rc;
	}
	if (opt.max_length <= 0)
		rc = gaz_status_set(st, GAZ_EINVAL, "gazctl: --max-length must be > 0");
	else if ((rc = parse_template(opt.tpl, &a.tpl, &a.ntpl, st)) == 0 &&
		 (rc = gaz_producer_id_new(&a.producer)) != 0)
		gaz_status_set(st, rc, "gazctl: no randomness for a producer id");
	if (!rc) {
		a.line = gazctl_xmalloc((size_t)opt.max_length + 2);
		if ((rc = attach_all(&a, f.pos, f.npos, st)))
			gaz_status_prefix(st, "gazctl: ");
	} else if (st->msg[0] && strncmp(st->msg, "gazctl: ", 8)) {
		gaz_status_prefix(st, "gazctl: ");
	}
	fflush(stdout);
	free(a.line);
	free(a.tpl);
	gaz_flags_release(&f);
	return rc;
}

const char gazctl_attach_uuids_description[] =
	"For each line of each argument input file, generate a RFC 4122 v1 compatible\n"
	"UUID and, using the --template, combine it with the input line into output\n"
	"written to stdout. If no input file arguments are given, stdin is read instead.\n\n"
	"Exactly-once processing semantics require that messages carry a v1 UUID which\n"
	"is authored by Gazette. The UUID encodes a unique producer ID, monotonic Clock,\n"
	"and transaction flags.\n\n"
	"attach-uuids facilitates pre-processing text files or unix pipelines in\n"
	"preparation for appending to a journal, by associating each input with a\n"
	"corresponding UUID. UUIDs are flagged as committed, meaning they will be\n"
	"processed immediately by readers. attach-uuids may be used directly in a\n"
	"pipeline of streamed records.\n\n"
	"Prefix CSV rows with a UUID (using the default --template):\n"
	">  gazctl attach-uuids inputOne.csv inputTwo.csv inputN.csv\n\n"
	"Prefix CSV rows, but skip a initial header row of each input:\n"
	">  gazctl attach-uuids --skip-header inputOne.csv inputTwo.csv\n\n"
	"Postfix CSV rows with a UUID (use $'..' to correctly handle newline escape):\n"
	">  gazctl attach-uuids input.csv --template=$'{{.Line}},{{.UUID}}\\n'";
