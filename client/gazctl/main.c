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

/* As go-flags and Gazette's mainboilerplate answer (MustParseArgs): help
 * goes to stdout and exits 1 with the version on stderr; a missing
 * command says so on stderr with the group's help; an unknown command
 * or flag is one line on stderr. Exit 1 every time. */

static const struct gaz_flags_cmd top_commands[] = {
	{"journals", "Interact with broker journals"},
	{"print-config", "Print combined configuration and exit"},
	{0},
};

static struct gaz_flags_cmd journals_commands[NCOMMANDS + 1];

static void group_flags(struct gaz_flags *f, bool journals)
{
	*f = (struct gaz_flags){.prog = "gazctl", .usage = "[OPTIONS] <command>",
				.description = "gazctl is a tool for interacting with Gazette brokers.\n\n"
					       "See --help pages of each sub-command for documentation "
					       "and usage examples.\nOptionally configure gazctl with a "
					       "'gazctl.ini' file in the current working directory,\nor "
					       "with '~/.config/gazette/gazctl.ini'. Use the 'print-config' "
					       "sub-command to inspect\nthe tool's current configuration.",
				.commands = top_commands};
	if (!journals)
		return;
	for (size_t i = 0; i < NCOMMANDS; i++)
		journals_commands[i] = (struct gaz_flags_cmd){gazctl_journals_cmds[i]->name,
							      gazctl_journals_cmds[i]->summary};
	f->usage = "[OPTIONS] journals [journals-OPTIONS] <command>";
	f->description = NULL;
	f->table = gazctl_global_flags;
	f->commands = journals_commands;
}

/* Picks the command of a group (the top level, or `journals`) from argv;
 * returns its index, with argv[*at] the command, or -1 after telling the
 * user why not. */
static int pick_command(bool journals, int argc, char **argv, int *at)
{
	struct gaz_flags f;
	struct gaz_status st = {0};
	int rc;

	group_flags(&f, journals);
	rc = gaz_flags_find_command(&f, argc, argv, at, &st);
	if (rc >= 0 && rc != GAZ_FLAGS_HELP)
		return rc;
	if (rc == GAZ_FLAGS_HELP) {
		gaz_flags_print_help(&f, stdout);
		fflush(stdout);
		gaz_flags_print_version(stderr);
	} else if (rc == GAZ_ENOTFOUND) {
		fprintf(stderr, "%s\n\n", st.msg);
		gaz_flags_print_help(&f, stderr);
		gaz_flags_print_version(stderr);
	} else {
		fprintf(stderr, "%s\n", st.msg);
	}
	return -1;
}

/* ---- parsing ----------------------------------------------------------------- */

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
	const struct gazctl_cmd *cmd;
	int at = 0, i = pick_command(true, argc, argv, &at), rc;

	if (i < 0)
		return 1;
	cmd = gazctl_journals_cmds[i];
	memmove(argv + at, argv + at + 1, (size_t)(argc - at - 1) * sizeof(*argv));
	rc = parse_command(cmd, &f, argc - 1, argv, &st);
	if (rc == GAZ_FLAGS_HELP) {
		fflush(stdout);
		gaz_flags_print_version(stderr);
		rc = 1; /* go-flags' ErrHelp exits 1 */
		goto out;
	}
	if (rc) {
		fprintf(stderr, "%s\n", st.msg); /* a flag error, as go-flags prints it */
		rc = 1;
		goto out;
	}
	if ((rc = setup(cmd, &c, &st)) == 0) {
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
	rc = rc < 0 ? 1 : 0;
out:
	gaz_client_free(c);
	if (rpc_started)
		gaz_rpc_shutdown();
	gaz_flags_release(&f); /* uses the table: free it after */
	free((void *)f.table);
	return rc;
}

int main(int argc, char **argv)
{
	struct gaz_status st = {0};
	int rc, at = 0;

	signals_setup();
	switch (pick_command(false, argc - 1, argv + 1, &at)) {
	case 0: /* journals (the top level has no options: at is 0) */
		rc = run_journals(argc - 2 - at, argv + 2 + at);
		break;
	case 1:
		rc = gazctl_print_config(argc - 2 - at, argv + 2 + at, &st);
		if (rc < 0 && st.msg[0])
			fprintf(stderr, "%s\n", st.msg);
		rc = rc ? 1 : 0;
		break;
	default:
		rc = 1;
	}
	fflush(stdout);
	return rc;
}
