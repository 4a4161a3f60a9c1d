/* test_flags.c - lib/common/flags and lib/common/duration. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/duration.h"
#include "common/flags.h"

/* ---- durations ---------------------------------------------------------- */

static void test_duration_parse(void **state)
{
	static const struct {
		const char *in;
		int64_t ns;
	} ok[] = {
		{"0", 0},
		{"-0", 0},
		{"5s", INT64_C(5000000000)},
		{"30ms", INT64_C(30000000)},
		{"1m", INT64_C(60000000000)},
		{"20s", INT64_C(20000000000)},
		{"1.5h", INT64_C(5400000000000)},
		{"1h2m3s4ms5us6ns", INT64_C(3723004005006)},
		{"-1.5s", INT64_C(-1500000000)},
		{"+2us", 2000},
		{"3\xc2\xb5s", 3000},
		{"3\xce\xbcs", 3000},
		{".5s", 500000000},
		{"1.s", 1000000000},
		{"100ns", 100},
		{"9223372036854775807ns", INT64_MAX},
		{"-9223372036854775808ns", INT64_MIN},
		{"0.000000001s", 1},
		{"1.0000000000000000000001s", 1000000000},
	};
	static const char *const bad[] = {
		"", "-", "1", "s", ".s", "1x", "1.2.3s", "9223372036854775808ns",
		"3000000h", "1s ", " 1s", "1sm", "--1s",
	};
	struct gaz_status st;
	(void)state;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		int64_t v = 42;
		gaz_status_clear(&st);
		int rc = gaz_duration_parse(ok[i].in, &v, &st);
		if (rc || v != ok[i].ns)
			fail_msg("parse \"%s\": rc %d v %lld want %lld (%s)", ok[i].in, rc,
				 (long long)v, (long long)ok[i].ns, st.msg);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int64_t v = 42;
		gaz_status_clear(&st);
		if (gaz_duration_parse(bad[i], &v, &st) != GAZ_EINVAL || v != 42)
			fail_msg("parse \"%s\" should fail", bad[i]);
		assert_non_null(strstr(st.msg, "time: "));
	}
	gaz_status_clear(&st);
	int64_t v;
	assert_int_equal(gaz_duration_parse("7parsecs", &v, &st), GAZ_EINVAL);
	assert_string_equal(st.msg, "time: unknown unit \"parsecs\" in duration \"7parsecs\"");
	gaz_status_clear(&st);
	assert_int_equal(gaz_duration_parse("7", &v, &st), GAZ_EINVAL);
	assert_string_equal(st.msg, "time: missing unit in duration \"7\"");
}

static void test_duration_format(void **state)
{
	static const struct {
		int64_t ns;
		const char *out;
	} cases[] = {
		{0, "0s"},
		{1, "1ns"},
		{999, "999ns"},
		{1000, "1\xc2\xb5s"},
		{1500, "1.5\xc2\xb5s"},
		{INT64_C(500000000), "500ms"},
		{INT64_C(30000000), "30ms"},
		{INT64_C(1500000000), "1.5s"},
		{INT64_C(20000000000), "20s"},
		{INT64_C(60000000000), "1m0s"},
		{INT64_C(90500000000), "1m30.5s"},
		{INT64_C(3600000000000), "1h0m0s"},
		{INT64_C(3723004005006), "1h2m3.004005006s"},
		{INT64_C(-1500000000), "-1.5s"},
		{INT64_C(-1), "-1ns"},
		{INT64_MAX, "2562047h47m16.854775807s"},
		{INT64_MIN, "-2562047h47m16.854775808s"},
	};
	char buf[GAZ_DURATION_STR_MAX];
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_string_equal(gaz_duration_format(cases[i].ns, buf), cases[i].out);
	/* Round trip through the parser. */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t v;
		assert_int_equal(gaz_duration_parse(cases[i].out, &v, NULL), 0);
		assert_true(v == cases[i].ns);
	}
}

/* ---- a sample program table ------------------------------------------- */

static struct {
	char *zone, *port, *id, *host, *format, *sel;
	int64_t limit, rate, level_n;
	int64_t delay_ns, lease_ns;
	bool suspend, primary, replicas, watch;
	struct gaz_strlist origins;
} cfg;

static const struct gaz_flag table[] = {
	{.name = "broker.zone", .env = "TF_BROKER_ZONE", .def = "local", .ptr = &cfg.zone,
	 .help = "Availability zone", .group = "Broker", .ini_name = "Zone"},
	{.name = "broker.port", .env = "TF_BROKER_PORT", .ptr = &cfg.port,
	 .help = "Service port", .group = "Broker", .ini_name = "Port"},
	{.name = "broker.id", .env = "TF_BROKER_ID", .ptr = &cfg.id, .group = "Broker"},
	{.name = "broker.host", .env = "TF_BROKER_HOST", .def = "defhost", .ptr = &cfg.host,
	 .group = "Broker"},
	{.name = "broker.limit", .env = "TF_BROKER_LIMIT", .type = GAZ_FLAG_INT64, .def = "1024",
	 .ptr = &cfg.limit, .help = "Max journals", .group = "Broker", .ini_name = "Limit",
	 .flags = GAZ_FLAG_UNSIGNED},
	{.name = "broker.watch-delay", .env = "TF_BROKER_WATCH_DELAY", .type = GAZ_FLAG_DURATION,
	 .def = "30ms", .ptr = &cfg.delay_ns, .group = "Broker", .ini_name = "WatchDelay"},
	{.name = "broker.auto-suspend", .env = "TF_BROKER_AUTO_SUSPEND", .type = GAZ_FLAG_BOOL,
	 .ptr = &cfg.suspend, .group = "Broker", .ini_name = "AutoSuspend"},
	{.name = "broker.allow-origin", .env = "TF_BROKER_ALLOW_ORIGIN", .type = GAZ_FLAG_STRLIST,
	 .ptr = &cfg.origins, .group = "Broker", .ini_name = "AllowOrigin", .env_delim = ','},
	{.name = "broker.max-append-rate", .type = GAZ_FLAG_INT64, .ptr = &cfg.rate,
	 .group = "Broker"},
	{.name = "etcd.lease", .env = "TF_ETCD_LEASE_TTL", .type = GAZ_FLAG_DURATION, .def = "20s",
	 .ptr = &cfg.lease_ns, .help = "Lease TTL"},
	{.name = "log.format", .env = "TF_LOG_FORMAT", .def = "text", .ptr = &cfg.format,
	 .choices = "json|text|color", .group = "Logging", .ini_name = "Format"},
	{.name = "selector", .short_name = 'l', .ptr = &cfg.sel, .help = "Label selector"},
	{.name = "primary", .short_name = 'p', .type = GAZ_FLAG_BOOL, .ptr = &cfg.primary},
	{.name = "replicas", .short_name = 'r', .type = GAZ_FLAG_BOOL, .ptr = &cfg.replicas},
	{.name = "watch", .type = GAZ_FLAG_BOOL, .def = "true", .ptr = &cfg.watch},
	{.name = "level", .short_name = 'n', .type = GAZ_FLAG_INT64, .ptr = &cfg.level_n},
	{0},
};

static const char *const envs[] = {
	"TF_BROKER_ZONE", "TF_BROKER_PORT", "TF_BROKER_ID", "TF_BROKER_HOST",
	"TF_BROKER_LIMIT", "TF_BROKER_WATCH_DELAY", "TF_BROKER_AUTO_SUSPEND",
	"TF_BROKER_ALLOW_ORIGIN", "TF_ETCD_LEASE_TTL", "TF_LOG_FORMAT",
};

static int setup(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(envs) / sizeof(envs[0]); i++)
		unsetenv(envs[i]);
	memset(&cfg, 0, sizeof(cfg));
	return 0;
}

static char ini_path[64];

static const char *write_ini(const char *text)
{
	int fd;

	snprintf(ini_path, sizeof(ini_path), "/tmp/test_flags_XXXXXX");
	fd = mkstemp(ini_path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return ini_path;
}

/* Collects the NULL-terminated arguments `ap` into `argv` (room for `cap`
 * pointers, the NULL included); fails the test if they do not fit.
 * Returns the count. */
static int collect_argv(char **argv, int cap, va_list ap)
{
	int argc = 0;

	for (char *a; (a = va_arg(ap, char *));) {
		assert_true(argc < cap - 1);
		argv[argc++] = a;
	}
	argv[argc] = NULL;
	return argc;
}

/* Parses a NULL-terminated argv with `ini` text (or none). */
static int parse(struct gaz_flags *f, const char *ini, struct gaz_status *st, ...)
{
	char *argv[32];
	int argc, rc;
	va_list ap;

	va_start(ap, st);
	argc = collect_argv(argv, 32, ap);
	va_end(ap);
	memset(f, 0, sizeof(*f));
	f->prog = "gazette";
	f->table = table;
	f->ini_path = ini ? write_ini(ini) : NULL;
	gaz_status_clear(st);
	rc = gaz_flags_parse(f, argc, argv, st);
	if (ini)
		unlink(ini_path);
	return rc;
}

static void test_defaults(void **state)
{
	struct gaz_flags f;
	struct gaz_status st;
	(void)state;

	assert_int_equal(parse(&f, NULL, &st, NULL), 0);
	assert_string_equal(cfg.zone, "local");
	assert_string_equal(cfg.port, "");
	assert_int_equal(cfg.limit, 1024);
	assert_true(cfg.delay_ns == 30 * 1000000LL);
	assert_true(cfg.lease_ns == 20 * 1000000000LL);
	assert_false(cfg.suspend);
	assert_true(cfg.watch);
	assert_int_equal(cfg.origins.n, 0);
	assert_int_equal(f.npos, 0);
	gaz_flags_release(&f);
	assert_null(cfg.zone);
	gaz_flags_release(&f); /* twice is fine */
}

static void test_precedence(void **state)
{
	struct gaz_flags f;
	struct gaz_status st;
	(void)state;

	/* zone: default only; host: INI; id: INI < env; port: INI < env < argv. */
	setenv("TF_BROKER_ID", "env-id", 1);
	setenv("TF_BROKER_PORT", "7000", 1);
	setenv("TF_BROKER_LIMIT", "5", 1);
	setenv("TF_BROKER_WATCH_DELAY", "1m", 1);
	assert_int_equal(parse(&f,
			       "[Broker]\nhost = ini-host\nid = ini-id\nPort = 6000\n"
			       "limit = 4\nwatch-delay = 5s\nmax-append-rate = 77\n"
			       "[etcd]\nlease = 40s\n",
			       &st, "--broker.port", "8080", "--broker.limit=6", NULL),
			 0);
	assert_string_equal(cfg.zone, "local");
	assert_string_equal(cfg.host, "ini-host");
	assert_string_equal(cfg.id, "env-id");
	assert_string_equal(cfg.port, "8080");
	assert_int_equal(cfg.limit, 6);
	assert_true(cfg.delay_ns == 60 * 1000000000LL);
	assert_int_equal(cfg.rate, 77);
	assert_true(cfg.lease_ns == 40 * 1000000000LL);
	gaz_flags_release(&f);
}

static void test_syntax_forms(void **state)
{
	struct gaz_flags f;
	struct gaz_status st;
	(void)state;

	assert_int_equal(parse(&f, NULL, &st, "pos1", "--broker.zone", "z1", "-l", "a=b",
			       "pos2", "--broker.host=h=x", "-pr", "--", "--not-a-flag", "-",
			       NULL),
			 0);
	assert_string_equal(cfg.zone, "z1");
	assert_string_equal(cfg.sel, "a=b");
	assert_string_equal(cfg.host, "h=x");
	assert_true(cfg.primary && cfg.replicas);
	assert_int_equal(f.npos, 4);
	assert_string_equal(f.pos[0], "pos1");
	assert_string_equal(f.pos[1], "pos2");
	assert_string_equal(f.pos[2], "--not-a-flag");
	assert_string_equal(f.pos[3], "-");
	assert_null(f.pos[4]);
	gaz_flags_release(&f);

	/* -lv, -l=v, combined bools then a value option, negative numbers. */
	assert_int_equal(parse(&f, NULL, &st, "-lapp=x", "-n", "-5", NULL), 0);
	assert_string_equal(cfg.sel, "app=x");
	assert_int_equal(cfg.level_n, -5);
	gaz_flags_release(&f);
	assert_int_equal(parse(&f, NULL, &st, "-l=sel", NULL), 0);
	assert_string_equal(cfg.sel, "sel");
	gaz_flags_release(&f);
	assert_int_equal(parse(&f, NULL, &st, "-prlfoo", NULL), 0);
	assert_true(cfg.primary && cfg.replicas);
	assert_string_equal(cfg.sel, "foo");
	gaz_flags_release(&f);
	assert_int_equal(parse(&f, NULL, &st, "-pl", "bar", NULL), 0);
	assert_string_equal(cfg.sel, "bar");
	gaz_flags_release(&f);
}

static void test_bool_forms(void **state)
{
	struct gaz_flags f;
	struct gaz_status st;
	(void)state;

	assert_int_equal(parse(&f, NULL, &st, "--broker.auto-suspend", "--watch=false", NULL), 0);
	assert_true(cfg.suspend);
	assert_false(cfg.watch);
	gaz_flags_release(&f);
	assert_int_equal(parse(&f, NULL, &st, "--broker.auto-suspend=0", "--watch=T", NULL), 0);
	assert_false(cfg.suspend);
	assert_true(cfg.watch);
	gaz_flags_release(&f);
	/* A bool never consumes the next argument. */
	assert_int_equal(parse(&f, NULL, &st, "--broker.auto-suspend", "false", NULL), 0);
	assert_true(cfg.suspend);
	assert_int_equal(f.npos, 1);
	gaz_flags_release(&f);
	assert_int_equal(parse(&f, NULL, &st, "--watch=maybe", NULL), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "--watch"));
	gaz_flags_release(&f);
	/* Environment and INI spellings. */
	setenv("TF_BROKER_AUTO_SUSPEND", "true", 1);
	assert_int_equal(parse(&f, "watch = false\n", &st, NULL), 0);
	assert_true(cfg.suspend);
	assert_false(cfg.watch);
	gaz_flags_release(&f);
	setenv("TF_BROKER_AUTO_SUSPEND", "False", 1);
	assert_int_equal(parse(&f, "[Broker]\nAutoSuspend =\n", &st, NULL), 0);
	assert_false(cfg.suspend); /* env beats INI's bare "AutoSuspend =" (true) */
	gaz_flags_release(&f);
	unsetenv("TF_BROKER_AUTO_SUSPEND");
	assert_int_equal(parse(&f, "[Broker]\nAutoSuspend =\n", &st, NULL), 0);
	assert_true(cfg.suspend);
	gaz_flags_release(&f);
}

static void test_errors(void **state)
{
	struct gaz_flags f;
	struct gaz_status st;
	(void)state;

	assert_int_equal(parse(&f, NULL, &st, "--broker.nope", "x", NULL), GAZ_EINVAL);
	assert_string_equal(st.msg, "unknown flag `broker.nope'");
	gaz_flags_release(&f);
	assert_int_equal(parse(&f, NULL, &st, "-z", NULL), GAZ_EINVAL);
	assert_string_equal(st.msg, "unknown flag `z'");
	gaz_flags_release(&f);
	assert_int_equal(parse(&f, NULL, &st, "--broker.zone", NULL), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "expected argument for flag `--broker.zone'"));
	gaz_flags_release(&f);
	assert_int_equal(parse(&f, NULL, &st, "--broker.zone", "--broker.id", "x", NULL),
			 GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "but got option `--broker.id'"));
	gaz_flags_release(&f);
	assert_int_equal(parse(&f, NULL, &st, "--broker.limit", "-1", NULL), GAZ_EINVAL);
	gaz_flags_release(&f);
	assert_int_equal(parse(&f, NULL, &st, "--broker.limit=12x", NULL), GAZ_EINVAL);
	gaz_flags_release(&f);
	assert_int_equal(parse(&f, NULL, &st, "--broker.watch-delay=10", NULL), GAZ_EINVAL);
	gaz_flags_release(&f);
	assert_int_equal(parse(&f, NULL, &st, "--log.format=xml", NULL), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "json|text|color"));
	gaz_flags_release(&f);
	setenv("TF_BROKER_LIMIT", "many", 1);
	assert_int_equal(parse(&f, NULL, &st, NULL), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "$TF_BROKER_LIMIT"));
	gaz_flags_release(&f);
	unsetenv("TF_BROKER_LIMIT");
	assert_int_equal(parse(&f, "[Broker]\nlimit = 1\njunk line\n", &st, NULL), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, ":3: malformed key=value (junk line)"));
	gaz_flags_release(&f);
	assert_int_equal(parse(&f, "[Broker\n", &st, NULL), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, ":1: malformed section header"));
	gaz_flags_release(&f);
}

static void test_ini_forms(void **state)
{
	struct gaz_flags f;
	struct gaz_status st;
	(void)state;

	/* Comments, quoted values, unknown sections and keys ignored, global
	 * section keys, short-name keys, namespace-named sections. */
	assert_int_equal(parse(&f,
			       "; comment\n# another\nwatch = false\nl = globalsel\n"
			       "[Nowhere]\nzone = ignored\n"
			       "[BROKER]\nZONE = \"us \\\"east\\\"\\t1\"\nunknown-key = 1\n"
			       "[log]\nformat = json\n",
			       &st, NULL),
			 0);
	assert_string_equal(cfg.zone, "us \"east\"\t1");
	assert_string_equal(cfg.format, "json");
	assert_string_equal(cfg.sel, "globalsel");
	assert_false(cfg.watch);
	gaz_flags_release(&f);
}

static void test_strlist(void **state)
{
	struct gaz_flags f;
	struct gaz_status st;
	(void)state;

	assert_int_equal(parse(&f, "[Broker]\nAllowOrigin = a\nAllowOrigin = b\n", &st, NULL), 0);
	assert_int_equal(cfg.origins.n, 2);
	assert_string_equal(cfg.origins.v[1], "b");
	gaz_flags_release(&f);
	setenv("TF_BROKER_ALLOW_ORIGIN", "x,y,z", 1);
	assert_int_equal(parse(&f, "[Broker]\nAllowOrigin = a\n", &st, NULL), 0);
	assert_int_equal(cfg.origins.n, 3);
	assert_string_equal(cfg.origins.v[0], "x");
	assert_string_equal(cfg.origins.v[2], "z");
	gaz_flags_release(&f);
	assert_int_equal(parse(&f, NULL, &st, "--broker.allow-origin", "o1",
			       "--broker.allow-origin=o2", NULL),
			 0);
	assert_int_equal(cfg.origins.n, 2);
	assert_string_equal(cfg.origins.v[0], "o1");
	assert_string_equal(cfg.origins.v[1], "o2");
	assert_null(cfg.origins.v[2]);
	gaz_flags_release(&f);
	assert_int_equal(cfg.origins.n, 0);
	assert_null(cfg.origins.v);
}

static void test_required(void **state)
{
	static char *sel;
	static const struct gaz_flag req[] = {
		{.name = "selector", .short_name = 'l', .ptr = &sel, .env = "TF_SEL",
		 .flags = GAZ_FLAG_REQUIRED},
		{0},
	};
	struct gaz_flags f = {.prog = "gazctl", .table = req};
	struct gaz_status st = {0};
	char *argv[] = {"-l", "x", NULL};
	(void)state;

	unsetenv("TF_SEL");
	assert_int_equal(gaz_flags_parse(&f, 0, argv, &st), GAZ_EINVAL);
	assert_string_equal(st.msg, "the required flag `-l, --selector' was not specified");
	gaz_flags_release(&f);
	gaz_status_clear(&st);
	assert_int_equal(gaz_flags_parse(&f, 2, argv, &st), 0);
	assert_string_equal(sel, "x");
	gaz_flags_release(&f);
	setenv("TF_SEL", "y", 1);
	assert_int_equal(gaz_flags_parse(&f, 0, argv, &st), 0);
	assert_string_equal(sel, "y");
	gaz_flags_release(&f);
	unsetenv("TF_SEL");
}

static void test_help(void **state)
{
	struct gaz_flags f;
	struct gaz_status st;
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	char *argv[] = {"serve", "--help", NULL};
	(void)state;

	memset(&f, 0, sizeof(f));
	f.prog = "gazette";
	f.usage = "[OPTIONS] serve";
	f.description = "Serve a Gazette broker.";
	f.table = table;
	f.help_out = out;
	assert_int_equal(gaz_flags_parse(&f, 2, argv, &st), GAZ_FLAGS_HELP);
	fclose(out);
	assert_non_null(strstr(text, "Usage:\n  gazette [OPTIONS] serve\n"));
	assert_non_null(strstr(text, "\nBroker:\n"));
	assert_non_null(strstr(text, "\netcd:\n"));
	assert_non_null(strstr(text, "\nLogging:\n"));
	assert_non_null(strstr(text, "\nApplication Options:\n"));
	assert_non_null(strstr(text, "Availability zone (default: local) [$TF_BROKER_ZONE]"));
	assert_non_null(strstr(text, "[$TF_BROKER_PORT]"));
	assert_non_null(strstr(text, "--log.format=[json|text|color]"));
	assert_non_null(strstr(text, "  -l, --selector="));
	assert_non_null(strstr(text, "      --broker.zone="));
	assert_non_null(strstr(text, "Help Options:\n  -h, --help"));
	/* Groups appear in table order, each once. */
	assert_true(strstr(text, "Broker:") < strstr(text, "etcd:"));
	assert_null(strstr(strstr(text, "Broker:") + 1, "Broker:"));
	free(text);
	gaz_flags_release(&f);

	out = open_memstream(&text, &len);
	f.help_out = out;
	char *argv2[] = {"-ph", NULL};
	assert_int_equal(gaz_flags_parse(&f, 1, argv2, &st), GAZ_FLAGS_HELP);
	fclose(out);
	assert_non_null(strstr(text, "Usage:"));
	free(text);
	gaz_flags_release(&f);
}

static const struct gaz_flags_cmd cmds[] = {
	{"print-config", "Print combined configuration and exit"},
	{"serve", "Serve as Gazette broker"},
	{0},
};

/* Picks the command from a NULL-terminated argv, as go-flags does. */
static int find_cmd(int *at, struct gaz_status *st, ...)
{
	struct gaz_flags f = {.prog = "gazette", .table = table, .commands = cmds};
	char *argv[16];
	int argc;
	va_list ap;

	va_start(ap, st);
	argc = collect_argv(argv, 16, ap);
	va_end(ap);
	gaz_status_clear(st);
	*at = -1;
	return gaz_flags_find_command(&f, argc, argv, at, st);
}

static void test_find_command(void **state)
{
	struct gaz_status st;
	int at;
	(void)state;

	assert_int_equal(find_cmd(&at, &st, "serve", "--broker.port", "1", NULL), 1);
	assert_int_equal(at, 0);
	/* The group's options before the command, with their values. */
	assert_int_equal(find_cmd(&at, &st, "--broker.zone", "serve", "print-config", NULL), 0);
	assert_int_equal(at, 2);
	assert_int_equal(find_cmd(&at, &st, "--broker.zone=z", "-l", "a=b", "-pr", "serve", NULL), 1);
	assert_int_equal(at, 4);
	assert_int_equal(find_cmd(&at, &st, "-lserve", "--broker.auto-suspend", "serve", NULL), 1);
	assert_int_equal(at, 2);
	/* Help before a command; none at all; an unknown one. */
	assert_int_equal(find_cmd(&at, &st, "--help", NULL), GAZ_FLAGS_HELP);
	assert_int_equal(find_cmd(&at, &st, "-ph", "serve", NULL), GAZ_FLAGS_HELP);
	assert_int_equal(find_cmd(&at, &st, NULL), GAZ_ENOTFOUND);
	assert_string_equal(st.msg, "Please specify one command of: print-config or serve");
	assert_int_equal(find_cmd(&at, &st, "--broker.zone", "z", NULL), GAZ_ENOTFOUND);
	assert_int_equal(find_cmd(&at, &st, "--", "serve", NULL), GAZ_ENOTFOUND);
	assert_int_equal(find_cmd(&at, &st, "bogus", "serve", NULL), GAZ_EINVAL);
	assert_string_equal(st.msg,
			    "Unknown command `bogus'. Please specify one command of: print-config or serve");
	assert_int_equal(find_cmd(&at, &st, "--bogus", "serve", NULL), GAZ_EINVAL);
	assert_string_equal(st.msg, "unknown flag `bogus'");
	assert_int_equal(find_cmd(&at, &st, "-x", NULL), GAZ_EINVAL);
	assert_string_equal(st.msg, "unknown flag `x'");
}

static void test_help_lists_commands(void **state)
{
	struct gaz_flags f = {.prog = "gazette", .usage = "[OPTIONS] <print-config | serve>",
			      .commands = cmds};
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	(void)state;

	gaz_flags_print_help(&f, out);
	gaz_flags_print_version(out);
	fclose(out);
	assert_non_null(strstr(text, "Usage:\n  gazette [OPTIONS] <print-config | serve>\n"));
	assert_non_null(strstr(text, "\nAvailable commands:\n"
				     "  print-config  Print combined configuration and exit\n"
				     "  serve         Serve as Gazette broker\n"));
	assert_non_null(strstr(text, "\nVersion development, built at unknown.\n"));
	free(text);
}

static void test_print_ini(void **state)
{
	struct gaz_flags f;
	struct gaz_status st;
	char *text = NULL;
	size_t len = 0;
	FILE *out;
	(void)state;

	assert_int_equal(parse(&f, NULL, &st, "--broker.port", "8080", "--broker.watch-delay",
			       "90s", "--broker.allow-origin", "http://a", NULL),
			 0);
	out = open_memstream(&text, &len);
	gaz_flags_print_ini(&f, out);
	fclose(out);
	assert_non_null(strstr(text, "[Broker]\n; Availability zone\n; Zone = local\n\n"));
	assert_non_null(strstr(text, "; Service port\nPort = 8080\n\n"));
	assert_non_null(strstr(text, "WatchDelay = 1m30s\n"));
	assert_non_null(strstr(text, "; Limit = 1024\n"));
	assert_non_null(strstr(text, "AllowOrigin = http://a\n"));
	assert_non_null(strstr(text, "; id =\n"));
	assert_non_null(strstr(text, "[etcd]\n; Lease TTL\n; lease = 20s\n"));
	assert_non_null(strstr(text, "[Logging]\n; Format = text\n"));
	assert_non_null(strstr(text, "[Application Options]\n"));

	/* The printed INI reads back to the same configuration. */
	{
		char *copy = strdup(text);
		gaz_flags_release(&f);
		assert_int_equal(parse(&f, copy, &st, NULL), 0);
		assert_string_equal(cfg.port, "8080");
		assert_true(cfg.delay_ns == 90 * 1000000000LL);
		assert_int_equal(cfg.origins.n, 1);
		free(copy);
	}
	free(text);
	gaz_flags_release(&f);
}

/* Unprintable values are quoted as Go's strconv.Quote does: "\n", "\t",
 * else "\xNN" (gazctl print-config's attach-uuids Template). */
static void test_print_ini_quotes(void **state)
{
	struct gaz_flags f;
	struct gaz_status st;
	char *text = NULL;
	size_t len = 0;
	FILE *out;
	(void)state;

	assert_int_equal(parse(&f, NULL, &st, "--broker.allow-origin", "a\tb\"c\x01\n", NULL), 0);
	out = open_memstream(&text, &len);
	gaz_flags_print_ini(&f, out);
	fclose(out);
	assert_non_null(strstr(text, "AllowOrigin = \"a\\tb\\\"c\\x01\\n\"\n"));
	free(text);
	gaz_flags_release(&f);
}

static void test_find_ini(void **state)
{
	char dir[] = "/tmp/test_flags_dirXXXXXX", path[512], want[512];
	FILE *fp;
	(void)state;

	assert_non_null(mkdtemp(dir));
	setenv("HOME", "/nonexistent-home", 1);
	unsetenv("UserProfile");
	setenv("APPLICATION_CONFIG_ROOT", dir, 1);
	assert_int_equal(gaz_flags_find_ini("tf-missing.ini", path, sizeof(path)), GAZ_ENOTFOUND);
	snprintf(want, sizeof(want), "%s/tf-cfg.ini", dir);
	fp = fopen(want, "w");
	assert_non_null(fp);
	fclose(fp);
	assert_int_equal(gaz_flags_find_ini("tf-cfg.ini", path, sizeof(path)), 0);
	assert_string_equal(path, want);
	unlink(want);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_duration_parse),
		cmocka_unit_test(test_duration_format),
		cmocka_unit_test_setup(test_defaults, setup),
		cmocka_unit_test_setup(test_precedence, setup),
		cmocka_unit_test_setup(test_syntax_forms, setup),
		cmocka_unit_test_setup(test_bool_forms, setup),
		cmocka_unit_test_setup(test_errors, setup),
		cmocka_unit_test_setup(test_ini_forms, setup),
		cmocka_unit_test_setup(test_strlist, setup),
		cmocka_unit_test_setup(test_required, setup),
		cmocka_unit_test_setup(test_help, setup),
		cmocka_unit_test_setup(test_find_command, setup),
		cmocka_unit_test_setup(test_help_lists_commands, setup),
		cmocka_unit_test_setup(test_print_ini, setup),
		cmocka_unit_test_setup(test_print_ini_quotes, setup),
		cmocka_unit_test_setup(test_find_ini, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
