/*
 * main.c - gazctl's entry point: picks `journals <command>` or
 * `print-config` from argv, parses the command's flags (gazctl.ini,
 * environment, argv) as go-flags does for Gazette's gazctl, sets up
 * logging, signals and the client, and runs the command (facts §9.1).
 *
 * Signals: SIGINT and SIGTERM are blocked in every thread (before grpc
 * starts its own) and taken by a sigwait thread. For a cancellable command
 * (read) the first one cancels the client so the command can finish
 * cleanly (write its offsets); otherwise, or on a second signal, the
 * process dies of the signal as a Go program without a handler would.
 *
 * Exit status: 0 on success, 1 with "gazctl: <reason>" on stderr.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/gazctl/gazctl.h"
#include "common/clock.h"
#include "common/log.h"
#include "rpc/rpc.h"

struct gazctl_global gazctl_cfg;
struct gaz_client *volatile gazctl_cancel_client;

#define BROKER(n, e, t, d, h, ini, p)                                                         \
	{ .name = "broker." n, .env = "BROKER_" e, .type = t, .def = d, .help = h, .ptr = p, \
	  .group = "journals.Broker", .ini_name = ini }

const struct gaz_flag gazctl_global_flags[] = {
	{ .name = "zone", .env = "ZONE", .def = "local", .ptr = &gazctl_cfg.zone,
	  .help = "Availability zone within which this process is running", .group = "journals",
	  .ini_name = "Zone" },
	{ .name = "log.level", .env = "LOG_LEVEL", .def = "warn", .ptr = &gazctl_cfg.log_level,
	  .help = "Logging level", .group = "journals.Logging", .ini_name = "Level",
	  .choices = "trace|debug|info|warn|error|fatal" },
	{ .name = "log.format", .env = "LOG_FORMAT", .def = "text", .ptr = &gazctl_cfg.log_format,
	  .help = "Logging output format", .group = "journals.Logging", .ini_name = "Format",
	  .choices = "json|text|color" },
	BROKER("address", "ADDRESS", GAZ_FLAG_STRING, "http://localhost:8080",
	       "Service address endpoint", "Address", &gazctl_cfg.broker_address),
	BROKER("cert-file", "CERT_FILE", GAZ_FLAG_STRING, "", "Path to the client TLS certificate",
	       "CertFile", &gazctl_cfg.cert_file),
	BROKER("cert-key-file", "CERT_KEY_FILE", GAZ_FLAG_STRING, "",
	       "Path to the client TLS private key", "CertKeyFile", &gazctl_cfg.cert_key_file),
	BROKER("trusted-ca-file", "TRUSTED_CA_FILE", GAZ_FLAG_STRING, "",
	       "Path to the trusted CA for client verification of server certificates",
	       "TrustedCAFile", &gazctl_cfg.trusted_ca_file),
	BROKER("auth-keys", "AUTH_KEYS", GAZ_FLAG_STRING, NULL,
	       "Whitespace or comma separated, base64-encoded keys. The first key is used to sign "
	       "Authorization tokens.",
	       "AuthKeys", &gazctl_cfg.auth_keys),
	BROKER("auth-token", "AUTH_TOKEN", GAZ_FLAG_STRING, NULL,
	       "Bearer token to use for authentication.", "AuthToken", &gazctl_cfg.auth_token),
	BROKER("cache.size", "CACHE_SIZE", GAZ_FLAG_INT64, "0",
	       "Size of client route cache. If <= zero, no cache is used (server always proxies)",
	       "Size", &gazctl_cfg.cache_size),
	BROKER("cache.ttl", "CACHE_TTL", GAZ_FLAG_DURATION, "1m",
	       "Time-to-live of route cache entries.", "TTL", &gazctl_cfg.cache_ttl_ns),
	{ 0 },
};

/* In the order go-flags lists them: by name. */
const struct gazctl_cmd *const gazctl_journals_cmds[] = {
	&gazctl_cmd_append, &gazctl_cmd_apply, &gazctl_cmd_fragments, &gazctl_cmd_list,
	&gazctl_cmd_prune,  &gazctl_cmd_read,  &gazctl_cmd_reset_head, &gazctl_cmd_suspend,
	NULL,
};
#define NCOMMANDS (sizeof(gazctl_journals_cmds) / sizeof(gazctl_journals_cmds[0]) - 1)

/* ---- signals ---------------------------------------------------------------- */

static sigset_t sigs;

static void *sig_main(void *arg)
{
	bool cancelled = false;
	int sig;

	(void)arg;
	for (;;) {
		if (sigwait(&sigs, &sig))
			continue;
		if (gazctl_cancel_client && !cancelled) {
			cancelled = true;
			gaz_client_cancel(gazctl_cancel_client);
			continue;
		}
		signal(sig, SIG_DFL);
		pthread_sigmask(SIG_UNBLOCK, &sigs, NULL);
		raise(sig);
		_exit(128 + sig);
	}
	return NULL;
}

static void signals_setup(void)
{
	pthread_t t;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	if (pthread_create(&t, NULL, sig_main, NULL) == 0)
		pthread_detach(t);
}

/* ---- usage ------------------------------------------------------------------- */

static void command_list(FILE *out)
{
	fprintf(out, "Please specify one command of: ");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(out, "%s%s", gazctl_journals_cmds[i]->name,
			i + 2 < NCOMMANDS ? ", " : i + 1 < NCOMMANDS ? " or " : "\n");
}

static void usage(FILE *out)
{
	fprintf(out, "Usage:\n  gazctl [OPTIONS] <command>\n\n"
		     "gazctl is a tool for interacting with Gazette brokers.\n\n"
		     "Available commands:\n"
		     "  journals      Interact with broker journals\n"
		     "  print-config  Print combined configuration and exit\n\n"
		     "Journals commands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(out, "  %-12s  %s\n", gazctl_journals_cmds[i]->name, gazctl_journals_cmds[i]->summary);
}

/* ---- parsing ----------------------------------------------------------------- */

/* takes_value: whether global option `arg` ("--broker.address") consumes
 * the next argument. */
static bool takes_value(const char *arg)
{
	if (strncmp(arg, "--", 2) || strchr(arg, '='))
		return false;
	for (const struct gaz_flag *f = gazctl_global_flags; f->name; f++)
		if (!strcmp(arg + 2, f->name))
			return f->type != GAZ_FLAG_BOOL;
	return false;
}

/* find_command returns the index in argv of the journals subcommand. */
static int find_command(int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			return -1;
		if (argv[i][0] != '-')
			return i;
		if (takes_value(argv[i]))
			i++;
	}
	return -1;
}

/* concat_flags: a table of the global options followed by `own`. */
static struct gaz_flag *concat_flags(const struct gaz_flag *own)
{
	size_t a = 0, b = 0;
	struct gaz_flag *t;

	while (gazctl_global_flags[a].name)
		a++;
	while (own && own[b].name)
		b++;
	t = gazctl_xcalloc(a + b + 1, sizeof(*t));
	memcpy(t, gazctl_global_flags, a * sizeof(*t));
	if (b)
		memcpy(t + a, own, b * sizeof(*t));
	return t;
}

static int parse_command(const struct gazctl_cmd *cmd, struct gaz_flags *f, int argc,
			 char **argv, struct gaz_status *st)
{
	static char usage_buf[128], ini[4096];

	snprintf(usage_buf, sizeof(usage_buf),
		 "[OPTIONS] journals [journals-OPTIONS] %s [%s-OPTIONS]", cmd->name, cmd->name);
	f->prog = "gazctl";
	f->usage = usage_buf;
	f->description = cmd->description;
	f->table = concat_flags(cmd->flags);
	f->ini_path = gaz_flags_find_ini("gazctl.ini", ini, sizeof(ini)) == 0 ? ini : NULL;
	return gaz_flags_parse(f, argc, argv, st);
}

/* ---- running ------------------------------------------------------------------ */

static bool rpc_started;

static int setup(const struct gazctl_cmd *cmd, struct gaz_client **c, struct gaz_status *st)
{
	struct gaz_client_opts o = {0};

	if (gaz_log_setup(gazctl_cfg.log_level, gazctl_cfg.log_format))
		return gaz_status_set(st, GAZ_EINVAL, "invalid logging configuration");
	if (gazctl_cfg.auth_keys && *gazctl_cfg.auth_keys)
		return gaz_status_set(st, GAZ_EINVAL, "--broker.auth-keys is not supported yet "
						      "(use --broker.auth-token)");
	if (!cmd->needs_client)
		return 0;
	if (gaz_rpc_init(1))
		return gaz_status_set(st, GAZ_EINVAL, "cannot start grpc");
	rpc_started = true;
	o.broker_address = gazctl_cfg.broker_address;
	o.zone = gazctl_cfg.zone;
	o.auth_token = gazctl_cfg.auth_token;
	o.file_root = cmd == &gazctl_cmd_read ? gazctl_read_file_root : NULL;
	/* Gazette's gazctl: no route cache unless --broker.cache.size > 0. */
	o.route_cache_size = gazctl_cfg.cache_size > 0 ? gazctl_cfg.cache_size : -1;
	o.route_cache_ttl_ms = gazctl_cfg.cache_ttl_ns > 0
				       ? (gazctl_cfg.cache_ttl_ns + GAZ_NS_PER_MS - 1) / GAZ_NS_PER_MS
				       : 0;
	return gaz_client_new(&o, c, st);
}

static int run_journals(int argc, char **argv)
{
	struct gaz_status st = {0};
	struct gaz_flags f = {0};
	struct gaz_client *c = NULL;
	const struct gazctl_cmd *cmd = NULL;
	int at = find_command(argc, argv), rc;

	for (size_t i = 0; at >= 0 && i < NCOMMANDS; i++)
		if (!strcmp(argv[at], gazctl_journals_cmds[i]->name))
			cmd = gazctl_journals_cmds[i];
	if (!cmd) {
		if (at < 0)
			command_list(stderr);
		else
			fprintf(stderr, "gazctl: unknown command `%s'\n", argv[at]);
		return 1;
	}
	memmove(argv + at, argv + at + 1, (size_t)(argc - at - 1) * sizeof(*argv));
	rc = parse_command(cmd, &f, argc - 1, argv, &st);
	if (rc == GAZ_FLAGS_HELP) {
		rc = 0;
	} else if (rc == 0 && (rc = setup(cmd, &c, &st)) == 0) {
		if (cmd->cancellable)
			gazctl_cancel_client = c;
		rc = cmd->run(c, &st);
		gazctl_cancel_client = NULL;
		if (rc >= 0 && fflush(stdout) != 0)
			rc = gaz_status_set(&st, GAZ_EIO, "writing output failed: %s",
					    strerror(errno));
	}
	if (rc < 0)
		fprintf(stderr, "gazctl: %s\n", st.msg[0] ? st.msg : gaz_err_str(rc));
	gaz_client_free(c);
	if (rpc_started)
		gaz_rpc_shutdown();
	gaz_flags_release(&f); /* uses the table: free it after */
	free((void *)f.table);
	return rc < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct gaz_status st = {0};
	int rc;

	signals_setup();
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 1 : 0;
	}
	if (!strcmp(argv[1], "print-config")) {
		if ((rc = gazctl_print_config(argc - 2, argv + 2, &st)) < 0)
			fprintf(stderr, "gazctl: %s\n", st.msg);
		return rc < 0 ? 1 : 0;
	}
	if (strcmp(argv[1], "journals") != 0) {
		fprintf(stderr, "gazctl: unknown command `%s'\n", argv[1]);
		return 1;
	}
	rc = run_journals(argc - 2, argv + 2);
	fflush(stdout);
	return rc;
}
