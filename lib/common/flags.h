/*
 * flags.h - command-line, environment and INI configuration as keyword
 * tables (nginx style), mirroring the go-flags behaviour Gazette's binaries
 * expose: `--broker.port 8080`, `--broker.port=8080`, `-l sel`, `-lsel`,
 * `-l=sel`, combined short bools `-pr`, `--watch` / `--watch=false`,
 * `[OPTIONS]` interleaved with positional args, `--` ending options,
 * `-h` / `--help`, per-option environment variables and an optional
 * go-flags INI file (sections named after groups, unknown keys ignored).
 *
 * One table per program (or per subcommand: the caller picks the command
 * and passes the argv that follows it):
 *
 *   static char *zone; static int64_t limit; static int64_t delay_ns;
 *   static const struct gaz_flag broker_flags[] = {
 *       { .name = "broker.zone", .env = "BROKER_ZONE", .type = GAZ_FLAG_STRING,
 *         .def = "local", .help = "Availability zone ...", .ptr = &zone,
 *         .group = "Broker", .ini_name = "Zone" },
 *       { .name = "broker.limit", .env = "BROKER_LIMIT", .type = GAZ_FLAG_INT64,
 *         .def = "1024", .ptr = &limit, .group = "Broker", .ini_name = "Limit" },
 *       { .name = "broker.watch-delay", .type = GAZ_FLAG_DURATION, .def = "30ms",
 *         .ptr = &delay_ns, ... },
 *       { 0 },
 *   };
 *
 * Precedence, lowest first: the table default, the INI file, the
 * environment, the command line. (Note: go-flags itself lets INI values
 * beat environment variables; this ordering is gazette-c's documented
 * choice.) For a string list, each source replaces what lower sources gave;
 * repeats within one source append.
 *
 * Storage: GAZ_FLAG_STRING -> `char **` (heap string, never NULL after a
 * successful parse), GAZ_FLAG_INT64 -> `int64_t *`, GAZ_FLAG_BOOL ->
 * `bool *`, GAZ_FLAG_DURATION -> `int64_t *` nanoseconds,
 * GAZ_FLAG_STRLIST -> `struct gaz_strlist *`. Strings and lists are owned by
 * the parser until gaz_flags_release. Not thread-safe: parse once at start-up
 * (getenv is read).
 */
#ifndef GAZ_COMMON_FLAGS_H
#define GAZ_COMMON_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"

/* gaz_flags_parse returns this (positive, not an error) after printing help
 * for -h/--help: the program should exit 0. */
#define GAZ_FLAGS_HELP 100

enum gaz_flag_type {
	GAZ_FLAG_STRING = 0,
	GAZ_FLAG_INT64,
	GAZ_FLAG_BOOL,
	GAZ_FLAG_DURATION,
	GAZ_FLAG_STRLIST,
};

/* gaz_flag.flags bits. */
#define GAZ_FLAG_REQUIRED 0x1u /* must be set by INI, environment or argv */
#define GAZ_FLAG_UNSIGNED 0x2u /* GAZ_FLAG_INT64 rejects negatives (Go uint) */
#define GAZ_FLAG_NO_INI 0x4u   /* not read from nor written to INI */

/* A repeatable string option's values; `v[n]` is NULL. */
struct gaz_strlist {
	char **v;
	size_t n;
};

/* One option. A table is an array ended by an entry whose `name` is NULL. */
struct gaz_flag {
	const char *name;     /* long name with namespace, "broker.port"; NULL ends */
	char short_name;      /* '\0' = none */
	const char *env;      /* environment variable, "BROKER_PORT"; NULL = none */
	enum gaz_flag_type type;
	const char *def;      /* default as text ("30ms", "1024", "true"); NULL = zero */
	const char *help;     /* one-line description */
	void *ptr;            /* storage, typed as described above */
	const char *group;    /* help/INI group, "Broker"; NULL = namespace (text
	                       * before the first '.') or "Application Options" */
	const char *ini_name; /* INI key as go-flags writes it (the Go field name,
	                       * "Port"); NULL = name after the namespace */
	const char *choices;  /* "json|text|color" restricts values; NULL = any */
	char env_delim;       /* STRLIST: split the env value on this; '\0' = one */
	unsigned flags;       /* GAZ_FLAG_* bits */
};

/* A subcommand of a command group ("serve" of gazette, "list" of gazctl
 * journals): what help lists under "Available commands:" and what
 * gaz_flags_find_command picks from. An array ends with a NULL name. */
struct gaz_flags_cmd {
	const char *name;    /* "serve" */
	const char *summary; /* one line, "Serve as Gazette broker" */
};

/* A program's parser. Fill the inputs; gaz_flags_parse fills the results. */
struct gaz_flags {
	/* Inputs (borrowed; must outlive the struct). */
	const char *prog;            /* "gazette" */
	const char *usage;           /* after prog in "Usage:"; NULL = "[OPTIONS]" */
	const char *description;     /* help paragraph; NULL = none */
	const struct gaz_flag *table; /* NULL = no options (gaz_flags_find_command only) */
	const struct gaz_flags_cmd *commands; /* a group's subcommands; NULL = none */
	const char *ini_path;        /* INI file; NULL = none; missing = ignored */
	FILE *help_out;              /* where --help goes; NULL = stdout */
	/* Results, owned until gaz_flags_release. */
	char **pos;                  /* positional args (borrowed from argv) */
	int npos;
	/* Internal. */
	unsigned char *src_;         /* per-option highest source applied */
};

/* gaz_flags_parse applies defaults, then `f->ini_path`, then the
 * environment, then argv[0..argc) (argv[0] is an argument, not the program
 * name). Positional arguments are collected into f->pos in order.
 *
 * Returns 0; GAZ_FLAGS_HELP after printing help (nothing else parsed
 * matters); GAZ_EINVAL for an unknown flag ("unknown flag `x'"), a missing
 * or invalid value, a value outside `choices`, a missing required flag, or
 * a malformed INI line (with file:line); GAZ_EIO if the INI file exists but
 * cannot be read; GAZ_ENOMEM. Detail in `st`. On error the storage may be
 * partly assigned; call gaz_flags_release either way. */
int gaz_flags_parse(struct gaz_flags *f, int argc, char **argv, struct gaz_status *st);

/* gaz_flags_release frees strings and lists the parser stored (setting them
 * to NULL/empty) and f->pos. Safe to call twice. */
void gaz_flags_release(struct gaz_flags *f);

/* gaz_flags_print_help writes go-flags style usage: "Usage:", the
 * description, then each group's options with "(default: x)" and "[$ENV]",
 * then "Help Options", then f->commands under "Available commands:". */
void gaz_flags_print_help(const struct gaz_flags *f, FILE *out);

/* gaz_flags_find_command picks the subcommand of a command group from
 * argv[0..argc) as go-flags does: the options before it must be the
 * group's own (f->table; those taking a value skip it), and the first
 * positional argument names it. Returns the command's index in
 * f->commands (which holds fewer than GAZ_FLAGS_HELP) with its argv
 * index in *at; GAZ_FLAGS_HELP for -h/--help
 * before any command (nothing printed); GAZ_ENOTFOUND when there is none
 * ("Please specify one command of: a, b or c"); GAZ_EINVAL for an unknown
 * command ("Unknown command `x'. Please specify one command of: ...") or
 * an unknown option before it ("unknown flag `x'"). Text in `st`. */
int gaz_flags_find_command(const struct gaz_flags *f, int argc, char **argv, int *at,
			   struct gaz_status *st);

/* gaz_flags_print_version writes what Gazette's programs write to stderr
 * after help: "\nVersion <v>, built at <date>.\n" (GAZ_VERSION and
 * GAZ_BUILD_DATE, by default "development" and "unknown" as an unstamped
 * Go build says). */
void gaz_flags_print_version(FILE *out);

/* gaz_flags_print_ini writes the merged configuration as go-flags does for
 * `print-config` (IniIncludeComments|IniIncludeDefaults|IniCommentDefaults):
 * "[Group]", "; help", then "Key = value", commented out ("; Key = value")
 * when the value equals the default, one line per list element. Call after
 * a successful gaz_flags_parse. */
void gaz_flags_print_ini(const struct gaz_flags *f, FILE *out);

/* gaz_flags_find_ini looks for `name` ("gazette.ini") where Gazette does:
 * ".", "$HOME/.config/gazette", "$UserProfile/.config/gazette",
 * "$APPLICATION_CONFIG_ROOT", and writes the first existing path into
 * `path` (`cap` bytes). Returns 0 or GAZ_ENOTFOUND. */
int gaz_flags_find_ini(const char *name, char *path, size_t cap);

#endif
