/*
 * main.c - gazctl's entry point: picks `journals <command>`, `shards
 * <command>`, `attach-uuids` or `print-config` from argv, parses the
 * command's flags (gazctl.ini, environment, argv) as go-flags does for
 * Gazette's gazctl, sets up logging, signals and the client, and runs the
 * command (facts §9.1). A `journals` command's client talks to
 * --broker.address; a `shards` command's to --consumer.address, and
 * gazctl_broker() gives it a second client of --broker.address for journal
 * lookups.
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

#define CLIENT_FLAG(grp, ns, envns, n, e, t, d, h, ini, p)                                \
	{ .name = ns "." n, .env = envns "_" e, .type = t, .def = d, .help = h, .ptr = p,   \
	  .group = grp, .ini_name = ini }

/* The options of an mbp.ClientConfig under namespace `ns` (broker,
 * consumer), into the fields of `cfg` named by `pfx`. */
#define CLIENT_FLAGS(grp, ns, envns, pfx)                                                         \
	CLIENT_FLAG(grp, ns, envns, "address", "ADDRESS", GAZ_FLAG_STRING, "http://localhost:8080", \
		    "Service address endpoint", "Address", &gazctl_cfg.pfx##address),            \
	CLIENT_FLAG(grp, ns, envns, "cert-file", "CERT_FILE", GAZ_FLAG_STRING, "",                \
		    "Path to the client TLS certificate", "CertFile", &gazctl_cfg.pfx##cert_file), \
	CLIENT_FLAG(grp, ns, envns, "cert-key-file", "CERT_KEY_FILE", GAZ_FLAG_STRING, "",        \
		    "Path to the client TLS private key", "CertKeyFile",                         \
		    &gazctl_cfg.pfx##cert_key_file),                                             \
	CLIENT_FLAG(grp, ns, envns, "trusted-ca-file", "TRUSTED_CA_FILE", GAZ_FLAG_STRING, "",    \
		    "Path to the trusted CA for client verification of server certificates",     \
		    "TrustedCAFile", &gazctl_cfg.pfx##trusted_ca_file),                          \
	CLIENT_FLAG(grp, ns, envns, "auth-keys", "AUTH_KEYS", GAZ_FLAG_STRING, NULL,              \
		    "Whitespace or comma separated, base64-encoded keys. The first key is used " \
		    "to sign Authorization tokens.",                                              \
		    "AuthKeys", &gazctl_cfg.pfx##auth_keys),                                     \
	CLIENT_FLAG(grp, ns, envns, "auth-token", "AUTH_TOKEN", GAZ_FLAG_STRING, NULL,            \
		    "Bearer token to use for authentication.", "AuthToken",                      \
		    &gazctl_cfg.pfx##auth_token),                                                \
	CLIENT_FLAG(grp, ns, envns, "cache.size", "CACHE_SIZE", GAZ_FLAG_INT64, "0",              \
		    "Size of client route cache. If <= zero, no cache is used (server always "   \
		    "proxies)",                                                                   \
		    "Size", &gazctl_cfg.pfx##cache_size),                                        \
	CLIENT_FLAG(grp, ns, envns, "cache.ttl", "CACHE_TTL", GAZ_FLAG_DURATION, "1m",            \
		    "Time-to-live of route cache entries.", "TTL", &gazctl_cfg.pfx##cache_ttl_ns)

/* The BaseConfig of a command group (zone and logging), in `grp`. */
#define BASE_FLAGS(grp)                                                                         \
	{ .name = "zone", .env = "ZONE", .def = "local", .ptr = &gazctl_cfg.zone,             \
	  .help = "Availability zone within which this process is running", .group = grp,     \
	  .ini_name = "Zone" },                                                                 \
	{ .name = "log.level", .env = "LOG_LEVEL", .def = "warn", .ptr = &gazctl_cfg.log_level, \
	  .help = "Logging level", .group = grp ".Logging", .ini_name = "Level",              \
	  .choices = "trace|debug|info|warn|error|fatal" },                                    \
	{ .name = "log.format", .env = "LOG_FORMAT", .def = "text",                            \
	  .ptr = &gazctl_cfg.log_format, .help = "Logging output format",                      \
	  .group = grp ".Logging", .ini_name = "Format", .choices = "json|text|color" }

const struct gaz_flag gazctl_global_flags[] = {
	BASE_FLAGS("journals"),
	CLIENT_FLAGS("journals.Broker", "broker", "BROKER", broker_),
	{ 0 },
};

/* Gazette's ShardsCfg: the consumer's service, and brokers for journal
 * lookups. */
const struct gaz_flag gazctl_shards_flags[] = {
	BASE_FLAGS("shards"),
	CLIENT_FLAGS("shards.Consumer", "consumer", "CONSUMER", consumer_),
	CLIENT_FLAGS("shards.Broker", "broker", "BROKER", broker_),
	{ 0 },
};

/* In the order go-flags lists them: by name. */
const struct gazctl_cmd *const gazctl_journals_cmds[] = {
	&gazctl_cmd_append, &gazctl_cmd_apply, &gazctl_cmd_fragments, &gazctl_cmd_list,
	&gazctl_cmd_prune,  &gazctl_cmd_read,  &gazctl_cmd_reset_head, &gazctl_cmd_suspend,
	NULL,
};

const struct gazctl_cmd *const gazctl_shards_cmds[] = {
	&gazctl_cmd_shards_apply, &gazctl_cmd_shards_edit,     &gazctl_cmd_shards_list,
	&gazctl_cmd_shards_prune, &gazctl_cmd_shards_unassign, NULL,
};

/* A command group of gazctl: `journals` or `shards`. */
struct group {
	const char *name;
	const struct gaz_flag *flags;
	const struct gazctl_cmd *const *cmds;
};

static const struct group journals_group = {"journals", gazctl_global_flags,
					    gazctl_journals_cmds};
static const struct group shards_group = {"shards", gazctl_shards_flags, gazctl_shards_cmds};

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
	{"attach-uuids", "Generate and attach UUIDs to text input records"},
	{"journals", "Interact with broker journals"},
	{"print-config", "Print combined configuration and exit"},
	{"shards", "Interact with consumer shards"},
	{0},
};
enum { TOP_ATTACH, TOP_JOURNALS, TOP_PRINT_CONFIG, TOP_SHARDS };

/* Subcommands of the group being run, for help and picking. */
static struct gaz_flags_cmd group_commands[16];

static void group_flags(struct gaz_flags *f, const struct group *g)
{
	static char usage[96];
	size_t n = 0;

	*f = (struct gaz_flags){.prog = "gazctl", .usage = "[OPTIONS] <command>",
				.description = "gazctl is a tool for interacting with Gazette brokers "
					       "and consumer applications.\n\n"
					       "See --help pages of each sub-command for documentation "
					       "and usage examples.\nOptionally configure gazctl with a "
					       "'gazctl.ini' file in the current working directory,\nor "
					       "with '~/.config/gazette/gazctl.ini'. Use the 'print-config' "
					       "sub-command to inspect\nthe tool's current configuration.",
				.commands = top_commands};
	if (!g)
		return;
	for (; g->cmds[n] && n + 1 < sizeof(group_commands) / sizeof(group_commands[0]); n++)
		group_commands[n] = (struct gaz_flags_cmd){g->cmds[n]->name, g->cmds[n]->summary};
	group_commands[n] = (struct gaz_flags_cmd){0};
	snprintf(usage, sizeof(usage), "[OPTIONS] %s [%s-OPTIONS] <command>", g->name, g->name);
	f->usage = usage;
	f->description = NULL;
	f->table = g->flags;
	f->commands = group_commands;
}

/* Picks the command of a group (the top level when g is NULL) from argv;
 * returns its index, with argv[*at] the command, or -1 after telling the
 * user why not. */
static int pick_command(const struct group *g, int argc, char **argv, int *at)
{
	struct gaz_flags f;
	struct gaz_status st = {0};
	int rc;

	group_flags(&f, g);
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

/* concat_flags: a table of the group's options followed by `own`. */
static struct gaz_flag *concat_flags(const struct gaz_flag *group, const struct gaz_flag *own)
{
	size_t a = 0, b = 0;
	struct gaz_flag *t;

	while (group[a].name)
		a++;
	while (own && own[b].name)
		b++;
	t = gazctl_xcalloc(a + b + 1, sizeof(*t));
	memcpy(t, group, a * sizeof(*t));
	if (b)
		memcpy(t + a, own, b * sizeof(*t));
	return t;
}

static int parse_command(const struct group *g, const struct gazctl_cmd *cmd, struct gaz_flags *f,
			 int argc, char **argv, struct gaz_status *st)
{
	static char usage_buf[160], ini[4096];

	snprintf(usage_buf, sizeof(usage_buf), "[OPTIONS] %s [%s-OPTIONS] %s [%s-OPTIONS]%s",
		 g->name, g->name, cmd->name, cmd->name, cmd->usage_tail ? cmd->usage_tail : "");
	f->prog = "gazctl";
	f->usage = usage_buf;
	f->description = cmd->description;
	f->table = concat_flags(g->flags, cmd->flags);
	f->ini_path = gaz_flags_find_ini("gazctl.ini", ini, sizeof(ini)) == 0 ? ini : NULL;
	return gaz_flags_parse(f, argc, argv, st);
}

/* ---- running ------------------------------------------------------------------ */

static bool rpc_started;
static struct gaz_client *broker_client; /* of a shards command, made on demand */
char **gazctl_args;
int gazctl_nargs;

/* client_tls sets the TLS files of options namespace `ns` ("broker",
 * "consumer"): --<ns>.cert-file, --<ns>.cert-key-file and
 * --<ns>.trusted-ca-file, used for https:// addresses (mbp.ClientConfig). */
static void client_tls(const char *ns, struct gaz_client_opts *o)
{
	bool consumer = !strcmp(ns, "consumer");

	o->cert_file = consumer ? gazctl_cfg.consumer_cert_file : gazctl_cfg.broker_cert_file;
	o->cert_key_file = consumer ? gazctl_cfg.consumer_cert_key_file : gazctl_cfg.broker_cert_key_file;
	o->trusted_ca_file = consumer ? gazctl_cfg.consumer_trusted_ca_file
				      : gazctl_cfg.broker_trusted_ca_file;
}

/* new_client makes a client of `address` with the auth token and route
 * cache settings of options namespace `ns` ("broker", "consumer"). */
static int new_client(const char *ns, const char *address, const char *auth_keys,
		      const char *auth_token, int64_t cache_size, int64_t cache_ttl_ns,
		      const char *file_root, struct gaz_client **c, struct gaz_status *st)
{
	struct gaz_client_opts o = {0};
	int rc;

	o.broker_address = address;
	o.zone = gazctl_cfg.zone;
	o.auth_token = auth_token;
	o.auth_keys = auth_keys; /* signs with the first key; wins over the token */
	o.file_root = file_root;
	/* Gazette's gazctl: no route cache unless --*.cache.size > 0. */
	o.route_cache_size = cache_size > 0 ? cache_size : -1;
	o.route_cache_ttl_ms = cache_ttl_ns > 0 ? (cache_ttl_ns + GAZ_NS_PER_MS - 1) / GAZ_NS_PER_MS
						: 0;
	client_tls(ns, &o);
	if ((rc = gaz_client_new(&o, c, st)) && auth_keys && *auth_keys)
		gaz_status_prefix(st, "--%s.", ns);
	return rc;
}

int gazctl_broker(struct gaz_client **out, struct gaz_status *st)
{
	int rc = 0;

	if (!broker_client)
		rc = new_client("broker", gazctl_cfg.broker_address, gazctl_cfg.broker_auth_keys,
				gazctl_cfg.broker_auth_token, gazctl_cfg.broker_cache_size, gazctl_cfg.broker_cache_ttl_ns,
				NULL, &broker_client, st);
	*out = broker_client;
	return rc;
}

static int setup(const struct group *g, const struct gazctl_cmd *cmd, struct gaz_client **c,
		 struct gaz_status *st)
{
	if (gaz_log_setup(gazctl_cfg.log_level, gazctl_cfg.log_format))
		return gaz_status_set(st, GAZ_EINVAL, "invalid logging configuration");
	if (!cmd->needs_client)
		return 0;
	if (gaz_rpc_init(1))
		return gaz_status_set(st, GAZ_EINVAL, "cannot start grpc");
	rpc_started = true;
	if (g == &shards_group)
		return new_client("consumer", gazctl_cfg.consumer_address, gazctl_cfg.consumer_auth_keys,
				  gazctl_cfg.consumer_auth_token, gazctl_cfg.consumer_cache_size,
				  gazctl_cfg.consumer_cache_ttl_ns, NULL, c, st);
	return new_client("broker", gazctl_cfg.broker_address, gazctl_cfg.broker_auth_keys,
			  gazctl_cfg.broker_auth_token,
			  gazctl_cfg.broker_cache_size, gazctl_cfg.broker_cache_ttl_ns,
			  cmd == &gazctl_cmd_read ? gazctl_read_file_root : NULL, c, st);
}

static int run_group(const struct group *g, int argc, char **argv)
{
	struct gaz_status st = {0};
	struct gaz_flags f = {0};
	struct gaz_client *c = NULL;
	const struct gazctl_cmd *cmd;
	int at = 0, i = pick_command(g, argc, argv, &at), rc;

	if (i < 0)
		return 1;
	cmd = g->cmds[i];
	memmove(argv + at, argv + at + 1, (size_t)(argc - at - 1) * sizeof(*argv));
	rc = parse_command(g, cmd, &f, argc - 1, argv, &st);
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
	gazctl_args = f.pos;
	gazctl_nargs = f.npos;
	if ((rc = setup(g, cmd, &c, &st)) == 0) {
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
	gaz_client_free(broker_client);
	broker_client = NULL;
	if (rpc_started)
		gaz_rpc_shutdown();
	gaz_flags_release(&f); /* uses the table: free it after */
	free((void *)f.table);
	return rc;
}

/* run_top runs a top-level command that is not a group: print-config or
 * attach-uuids (flags parsed by the command itself). */
static int run_top(int (*fn)(int, char **, struct gaz_status *), int argc, char **argv)
{
	struct gaz_status st = {0};
	int rc = fn(argc, argv, &st);

	if (rc < 0 && st.msg[0])
		fprintf(stderr, "%s\n", st.msg);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	int rc, at = 0;

	signals_setup();
	switch (pick_command(NULL, argc - 1, argv + 1, &at)) {
	case TOP_JOURNALS: /* the top level has no options: at is 0 */
		rc = run_group(&journals_group, argc - 2 - at, argv + 2 + at);
		break;
	case TOP_SHARDS:
		rc = run_group(&shards_group, argc - 2 - at, argv + 2 + at);
		break;
	case TOP_PRINT_CONFIG:
		rc = run_top(gazctl_print_config, argc - 2 - at, argv + 2 + at);
		break;
	case TOP_ATTACH:
		rc = run_top(gazctl_attach_uuids, argc - 2 - at, argv + 2 + at);
		break;
	default:
		rc = 1;
	}
	fflush(stdout);
	return rc;
}
