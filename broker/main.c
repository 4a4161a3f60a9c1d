/*
 * main.c - the `gazette` broker process: flags (Gazette's names and
 * environment variables, facts §8.2), start-up, and the graceful exit.
 *
 * Start-up: block SIGINT/SIGTERM (every thread inherits the mask; main
 * takes them with sigwait), start the gRPC server and the one-port
 * listener, connect to etcd (retrying while it is down), load and watch
 * the keyspace, announce the member key on a lease, then run the
 * maintenance, allocator and persister threads.
 *
 * Exit on SIGTERM/SIGINT: mark the member exiting so the allocator moves
 * our journals; keep serving until we hold none (the allocator removes us
 * from a route only once enough others are synchronised members of it),
 * bounded by --broker.exit-timeout; then tear down the replicas
 * (their spools roll and are persisted), drain the persister, stop
 * serving, and revoke the lease (etcd drops our member and assignment
 * keys). Exit 0, or 1 when acknowledged bytes were left unpersisted.
 * Fragments that no peer holds (a route of one) are waited for past the
 * exit timeout, reported every 30 s, until they are persisted or a second
 * SIGTERM/SIGINT ends the wait: dropping the only copy is the operator's
 * call, never the broker's.
 */
#include <malloc.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/metrics.h"
#include "broker/read_fanout.h"
#include "broker/persister.h"
#include "broker/proxy.h"
#include "broker/release.h"
#include "broker/replica.h"
#include "broker/stores.h"
#include "common/clock.h"
#include "common/flags.h"
#include "common/log.h"
#include "keyspace/allocator.h"
#include "protocol/auth.h"
#include "protocol/validate.h"
#include "rpc/authorize.h"

static struct gaz_broker broker;

#define BROKER_FLAG(n, e, t, d, h, p) \
	{.name = "broker." n, .env = "BROKER_" e, .type = t, .def = d, .help = h, .ptr = p, .group = "Broker"}

static const struct gaz_flag flag_table[] = {
	BROKER_FLAG("zone", "ZONE", GAZ_FLAG_STRING, "local", "Availability zone within which this process is running", &broker.cfg.zone),
	BROKER_FLAG("id", "ID", GAZ_FLAG_STRING, "", "Unique ID of this process (random if empty)", &broker.cfg.id),
	BROKER_FLAG("host", "HOST", GAZ_FLAG_STRING, "", "Addressable, advertised hostname or IP of this process (OS hostname if empty)", &broker.cfg.host),
	BROKER_FLAG("port", "PORT", GAZ_FLAG_STRING, "", "Service port for HTTP and gRPC requests (random if empty or 0), or unix:///path", &broker.cfg.port),
	BROKER_FLAG("file-root", "FILE_ROOT", GAZ_FLAG_STRING, "", "Local path which roots file:// fragment stores", &broker.cfg.file_root),
	BROKER_FLAG("limit", "LIMIT", GAZ_FLAG_INT64, "1024", "Maximum number of journals the broker will allocate", &broker.cfg.limit),
	BROKER_FLAG("max-replication", "MAX_REPLICATION", GAZ_FLAG_INT64, "9", "Maximum effective replication of any one journal", &broker.cfg.max_replication),
	BROKER_FLAG("min-append-rate", "MIN_APPEND_RATE", GAZ_FLAG_INT64, "65536", "Minimum rate (bytes/s) at which a client must stream Append content", &broker.cfg.min_append_rate),
	BROKER_FLAG("max-append-rate", "MAX_APPEND_RATE", GAZ_FLAG_INT64, "0", "Maximum rate (bytes/s) of appends to a journal with a non-zero max_append_rate (0 = none)", &broker.cfg.max_append_rate),
	BROKER_FLAG("max-grpc-recv-size", "MAX_GRPC_RECV_SIZE", GAZ_FLAG_INT64, "4194304", "Maximum size of inbound gRPC messages", &broker.cfg.max_grpc_recv_size),
	BROKER_FLAG("allow-origin", "ALLOW_ORIGIN", GAZ_FLAG_STRLIST, NULL, "Origin to allow in CORS contexts", &broker.cfg.allow_origin),
	BROKER_FLAG("watch-delay", "WATCH_DELAY", GAZ_FLAG_DURATION, "30ms", "Delay applied to the application of watched Etcd events", &broker.cfg.watch_delay_ns),
	BROKER_FLAG("auth-keys", "AUTH_KEYS", GAZ_FLAG_STRING, "", "Whitespace or comma separated, base64-encoded keys used to sign (first key) and verify (all keys) Authorization tokens", &broker.cfg.auth_keys),
	BROKER_FLAG("auto-suspend", "AUTO_SUSPEND", GAZ_FLAG_BOOL, "false", "Pulses may suspend idle, fully-persisted journals", &broker.cfg.auto_suspend),
	BROKER_FLAG("store-read-nice", "STORE_READ_NICE", GAZ_FLAG_INT64, "10", "Niceness (0-19) of the threads that stream persisted fragments from a store to proxied readers, so that backfills through the broker yield the CPU to appends (0 = stream on the handler thread, as Gazette; gazette-c)", &broker.cfg.store_read_nice),
	BROKER_FLAG("server-cert-file", "SERVER_CERT_FILE", GAZ_FLAG_STRING, "", "Path to the server TLS certificate. This option toggles whether TLS is used. If absent, all other TLS settings are ignored.", &broker.cfg.server_cert_file),
	BROKER_FLAG("server-cert-key-file", "SERVER_CERT_KEY_FILE", GAZ_FLAG_STRING, "", "Path to the server TLS private key", &broker.cfg.server_cert_key_file),
	BROKER_FLAG("server-ca-file", "SERVER_CA_FILE", GAZ_FLAG_STRING, "", "Path to the trusted CA for server verification of client certificates. When present, client certificates are required and verified against this CA.", &broker.cfg.server_ca_file),
	BROKER_FLAG("peer-cert-file", "PEER_CERT_FILE", GAZ_FLAG_STRING, "", "Path to the client TLS certificate for peer-to-peer requests", &broker.cfg.peer_cert_file),
	BROKER_FLAG("peer-cert-key-file", "PEER_CERT_KEY_FILE", GAZ_FLAG_STRING, "", "Path to the client TLS private key for peer-to-peer requests", &broker.cfg.peer_cert_key_file),
	BROKER_FLAG("peer-ca-file", "PEER_CA_FILE", GAZ_FLAG_STRING, "", "Path to the trusted CA for client verification of peer server certificates. When absent, the system CA pool is used instead.", &broker.cfg.peer_ca_file),
	BROKER_FLAG("max-read-streams", "MAX_READ_STREAMS", GAZ_FLAG_INT64, "200000", "Maximum concurrent Read streams the broker serves; a Read past it is answered RESOURCE_EXHAUSTED at once, and Append, Replicate and control calls are never counted (0 = no limit; gazette-c)", &broker.cfg.max_read_streams),
	BROKER_FLAG("max-read-streams-per-conn", "MAX_READ_STREAMS_PER_CONN", GAZ_FLAG_INT64, "100000", "Maximum concurrent Read streams of one client connection; past it, as --broker.max-read-streams (0 = no limit; gazette-c)", &broker.cfg.max_read_streams_per_conn),
	BROKER_FLAG("exit-timeout", "EXIT_TIMEOUT", GAZ_FLAG_DURATION, "2m", "Bound on a graceful exit's hand-off before spools are persisted and journals released (gazette-c)", &broker.cfg.exit_timeout_ns),
	{.name = "etcd.address", .env = "ETCD_ADDRESS", .type = GAZ_FLAG_STRING, .def = "http://localhost:2379", .help = "Etcd service address endpoint", .ptr = &broker.cfg.etcd_address, .group = "Etcd"},
	{.name = "etcd.prefix", .env = "ETCD_PREFIX", .type = GAZ_FLAG_STRING, .def = "/gazette/cluster", .help = "Etcd base prefix for broker state and coordination", .ptr = &broker.cfg.etcd_prefix, .group = "Etcd"},
	{.name = "etcd.cert-file", .env = "ETCD_CERT_FILE", .type = GAZ_FLAG_STRING, .def = "", .help = "Path to the client TLS certificate", .ptr = &broker.cfg.etcd_cert_file, .group = "Etcd"},
	{.name = "etcd.cert-key-file", .env = "ETCD_CERT_KEY_FILE", .type = GAZ_FLAG_STRING, .def = "", .help = "Path to the client TLS private key", .ptr = &broker.cfg.etcd_cert_key_file, .group = "Etcd"},
	{.name = "etcd.trusted-ca-file", .env = "ETCD_TRUSTED_CA_FILE", .type = GAZ_FLAG_STRING, .def = "", .help = "Path to the trusted CA for client verification of server certificates", .ptr = &broker.cfg.etcd_trusted_ca_file, .group = "Etcd"},
	{.name = "etcd.lease", .env = "ETCD_LEASE_TTL", .type = GAZ_FLAG_DURATION, .def = "20s", .help = "Time-to-live of Etcd lease", .ptr = &broker.cfg.etcd_lease_ns, .group = "Etcd"},
	{.name = "log.level", .env = "LOG_LEVEL", .type = GAZ_FLAG_STRING, .def = "warn", .help = "Logging level", .ptr = &broker.cfg.log_level, .group = "Logging", .choices = "trace|debug|info|warn|error|fatal"},
	{.name = "log.format", .env = "LOG_FORMAT", .type = GAZ_FLAG_STRING, .def = "text", .help = "Logging output format", .ptr = &broker.cfg.log_format, .group = "Logging", .choices = "json|text|color"},
	{0},
};

static const char *const words_a[] = {"amber", "brisk", "calm", "dapper", "eager", "fancy", "gentle",
				      "happy", "icy", "jolly", "keen", "lucid", "merry", "noble"};
static const char *const words_b[] = {"otter", "panda", "quail", "raven", "salmon", "tiger", "urchin",
				      "vole", "walrus", "yak", "zebra", "bison", "crane", "dingo"};

/* Gazette picks a random two-word name for an unset --broker.id. */
static void random_id(char **id)
{
	unsigned seed = (unsigned)(gaz_wall_ns() ^ getpid());
	char *s = NULL;

	if (asprintf(&s, "%s-%s-%04x", words_a[rand_r(&seed) % 14], words_b[rand_r(&seed) % 14],
		     rand_r(&seed) & 0xffff) >= 0) {
		free(*id);
		*id = s;
	}
}

/* configure_tls checks the TLS flags: files given in pairs, a server CA
 * only with a server certificate, and the peer files loadable (the server
 * files are loaded by the listener, the etcd ones by the etcd client, each
 * with the file named in the error). TLS on a unix socket is ignored, as
 * Gazette does (server.New: "clients cannot use the advertised endpoint
 * scheme to determine whether to expect TLS"). */
static int configure_tls(struct gaz_broker *b, struct gaz_status *st)
{
	const struct gaz_broker_config *c = &b->cfg;
	const struct gaz_rpc_tls_flags f = {c->server_cert_file, c->server_cert_key_file, c->server_ca_file,
					    c->peer_cert_file, c->peer_cert_key_file, c->peer_ca_file};

	if (gaz_rpc_tls_flags_check("broker", &f, c->port, &b->peer_tls, &b->tls, st))
		return GAZ_EINVAL;
	/* As Gazette's EtcdConfig.MustDial, the etcd files serve https:// only. */
	if ((c->etcd_cert_file[0] || c->etcd_trusted_ca_file[0]) && strncmp(c->etcd_address, "https://", 8))
		gaz_warn("--etcd.cert-file and --etcd.trusted-ca-file are used only with an https:// "
			 "--etcd.address", "address=%s", c->etcd_address);
	return 0;
}

static int configure(struct gaz_broker *b, struct gaz_status *st)
{
	char host[256];
	const char *tmp = getenv("TMPDIR");

	if (!b->cfg.id[0])
		random_id(&b->cfg.id);
	if (!b->cfg.host[0] && gethostname(host, sizeof(host)) == 0) {
		free(b->cfg.host);
		b->cfg.host = strdup(host);
	}
	Protocol__ProcessSpec__ID id = PROTOCOL__PROCESS_SPEC__ID__INIT;
	id.zone = b->cfg.zone;
	id.suffix = b->cfg.id;
	if (gaz_validate_process_id(&id, st))
		return GAZ_EINVAL;
	if (b->cfg.limit < 0 || b->cfg.limit > 131072)
		return gaz_status_set(st, GAZ_EINVAL, "--broker.limit %lld out of range [0, 131072]",
				      (long long)b->cfg.limit);
	if (b->cfg.max_read_streams < 0 || b->cfg.max_read_streams > INT32_MAX)
		return gaz_status_set(st, GAZ_EINVAL,
				      "--broker.max-read-streams %lld out of range [0, %d]",
				      (long long)b->cfg.max_read_streams, INT32_MAX);
	if (b->cfg.max_read_streams_per_conn < 0 || b->cfg.max_read_streams_per_conn > INT32_MAX)
		return gaz_status_set(st, GAZ_EINVAL,
				      "--broker.max-read-streams-per-conn %lld out of range [0, %d]",
				      (long long)b->cfg.max_read_streams_per_conn, INT32_MAX);
	if (b->cfg.etcd_prefix[0] != '/' || b->cfg.etcd_prefix[strlen(b->cfg.etcd_prefix) - 1] == '/')
		return gaz_status_set(st, GAZ_EINVAL, "--etcd.prefix %s must be absolute, without a trailing '/'",
				      b->cfg.etcd_prefix);
	if (strstr(b->cfg.etcd_prefix, "//") || strstr(b->cfg.etcd_prefix, "/./") ||
	    strstr(b->cfg.etcd_prefix, "/../"))
		return gaz_status_set(st, GAZ_EINVAL, "--etcd.prefix %s is not a clean path",
				      b->cfg.etcd_prefix);
	if (b->cfg.port[0] && strncmp(b->cfg.port, "unix://", 7)) {
		char *end = NULL;
		long port = strtol(b->cfg.port, &end, 10);
		/* 0, as empty, takes a random port (Gazette listens on ":0"). */
		if (end == b->cfg.port || *end || port < 0 || port > 65535)
			return gaz_status_set(st, GAZ_EINVAL,
					      "--broker.port %s: not a port number (0-65535; 0 or empty: "
					      "random) or unix:///path",
					      b->cfg.port);
	}
	/* As Gazette (it stats the root at start), and usable by us. */
	struct stat sb;
	if (b->cfg.file_root[0] && stat(b->cfg.file_root, &sb))
		return gaz_status_set(st, GAZ_EINVAL, "--broker.file-root %s: %m", b->cfg.file_root);
	if (b->cfg.file_root[0] && !S_ISDIR(sb.st_mode))
		return gaz_status_set(st, GAZ_EINVAL, "--broker.file-root %s: not a directory",
				      b->cfg.file_root);
	if (b->cfg.file_root[0] && access(b->cfg.file_root, R_OK | W_OK | X_OK))
		return gaz_status_set(st, GAZ_EINVAL, "--broker.file-root %s: %m", b->cfg.file_root);
	if (b->cfg.auth_keys[0] && gaz_auth_new(b->cfg.auth_keys, &b->auth, st)) {
		gaz_status_prefix(st, "--broker.auth-keys: ");
		return GAZ_EINVAL;
	}
	if (configure_tls(b, st))
		return GAZ_EINVAL;
	b->root = b->cfg.etcd_prefix;
	b->spool_dir = strdup(tmp && tmp[0] ? tmp : "/tmp");
	b->member_key = gaz_ks_member_key(b->root, b->cfg.zone, b->cfg.id);
	return b->spool_dir && b->member_key ? 0 : GAZ_ENOMEM;
}

/* Counts every RPC as Gazette's gazette_journal_server_*_totals do: started
 * when its handler (or Append's fast path) takes it, completed when it is
 * finished, wherever that happens (a parked append is answered by another
 * call's handler), through the server's finish observer. */
struct counted {
	const char *op;
	gaz_rpc_handler_fn fn;
	unsigned flags; /* GAZ_RPC_*: its streams; Append starts with its small request whole */
	bool fast;      /* Append's fast path (append_batch.c) */
	/* A client's cancellation is no error: Gazette's Append returns nil
	 * for it (append_api.go), so it counts "ok". */
	bool cancel_ok;
	uint32_t cap; /* what its token must grant (§11) */
};

static struct counted counted_methods[] = {
	{"List", gaz_handle_list, GAZ_RPC_SERVER_STREAMS, .cap = GAZ_CAP_LIST},
	{"Apply", gaz_handle_apply, .cap = GAZ_CAP_APPLY},
	/* Reads are what a client may hold open by the thousands while they
	 * wait at the write head: the one method bounded by
	 * --broker.max-read-streams[-per-conn]. */
	{"Read", gaz_handle_read, GAZ_RPC_SERVER_STREAMS | GAZ_RPC_LIMITED, .cap = GAZ_CAP_READ},
	{"Append", gaz_handle_append, GAZ_RPC_DISPATCH_READ | GAZ_RPC_CLIENT_STREAMS, true, true, GAZ_CAP_APPEND},
	{"ListFragments", gaz_handle_list_fragments, .cap = GAZ_CAP_READ},
	{"FragmentStoreHealth", gaz_handle_store_health, .cap = GAZ_CAP_READ},
	{"Replicate", gaz_handle_replicate, GAZ_RPC_CLIENT_STREAMS | GAZ_RPC_SERVER_STREAMS, .cap = GAZ_CAP_REPLICATE},
};

/* The server listens before the keyspace exists (the port must be known
 * to announce it): a call that comes first, as clients redialing a
 * restarted broker's port do, is answered UNAVAILABLE (retryable) rather
 * than reaching a keyspace being made. */
static bool starting(struct gaz_rpc_call *call)
{
	if (atomic_load(&broker.ks_ready))
		return false;
	gaz_rpc_finish(call, NULL, GAZ_GRPC_UNAVAILABLE, "broker is starting: its keyspace is not loaded yet");
	return true;
}

static void counted_handler(struct gaz_rpc_call *call, void *arg)
{
	struct counted *c = arg;

	gaz_metric_rpc_started(c->op);
	/* A call whose token does not grant its method's capability is
	 * answered UNAUTHENTICATED before its request is read (Gazette's
	 * VerifiedJournalServer). */
	if (!starting(call) && !gaz_rpc_refused(broker.auth, call, c->cap))
		c->fn(call, &broker);
}

static void counted_finished(void *arg, int code, int outcome)
{
	struct counted *c = arg;

	if (code == GAZ_GRPC_CANCELLED && c->cancel_ok)
		code = GAZ_GRPC_OK;
	gaz_metric_rpc_completed(c->op, gaz_metric_completed_label(code, outcome));
}

static bool counted_fast(struct gaz_rpc_call *call, void *arg)
{
	struct counted *c = arg;
	struct gaz_status st = {0};

	if (!atomic_load(&broker.ks_ready))
		return false; /* the handler thread answers it */
	if (gaz_rpc_authorize(broker.auth, call, c->cap, &st))
		return false; /* and its refusal */
	/* At the primary, a lone small append commits on the poller; at
	 * another broker, a whole small one is proxied from it. */
	return gaz_append_fast(call, &broker) || gaz_proxy_append_fast(call, &broker);
}

static int start_serving(struct gaz_broker *b, struct gaz_status *st)
{
	struct gaz_rpc_server_opts o = {
		.max_recv_bytes = (int)b->cfg.max_grpc_recv_size,
		.max_streams = (int)b->cfg.max_read_streams,
		.max_streams_per_conn = (int)b->cfg.max_read_streams_per_conn,
	};
	char addr[300], path[64];
	int port = 0;

	if (!(b->srv = gaz_rpc_server_new(&o)))
		return gaz_status_set(st, GAZ_ENOMEM, "creating the gRPC server");
	gaz_rpc_server_on_finish(b->srv, counted_finished);
	gaz_rpc_server_metrics(b->srv); /* go-grpc-prometheus's, as Gazette's server */
	for (size_t i = 0; i < sizeof(counted_methods) / sizeof(counted_methods[0]); i++) {
		snprintf(path, sizeof(path), "/protocol.Journal/%s", counted_methods[i].op);
		gaz_rpc_server_register_fast(b->srv, path, counted_handler,
					     counted_methods[i].fast ? counted_fast : NULL,
					     &counted_methods[i], counted_methods[i].flags);
	}
	if (gaz_rpc_server_start(b->srv, NULL, NULL))
		return gaz_status_set(st, GAZ_EIO, "starting the gRPC server");
	if (!strncmp(b->cfg.port, "unix://", 7))
		snprintf(addr, sizeof(addr), "%s", b->cfg.port);
	else
		snprintf(addr, sizeof(addr), "0.0.0.0:%s", b->cfg.port[0] ? b->cfg.port : "0");
	/* HTTP connections are served from the moment the listener exists, so
	 * what their handlers read is set before (a fixed port) or atomically
	 * (a port chosen at bind), and cfg is not changed after. */
	if (strncmp(b->cfg.port, "unix://", 7))
		atomic_store(&b->listen_port, atoi(b->cfg.port));
	struct gaz_rpc_tls tls = {b->cfg.server_cert_file, b->cfg.server_cert_key_file,
				  b->cfg.server_ca_file};
	b->listener = gaz_rpc_listen_tls(addr, b->srv, gaz_http_conn, b, b->tls ? &tls : NULL,
					 &port, st);
	if (!b->listener)
		return st->code ? st->code : GAZ_EIO;
	if (strncmp(b->cfg.port, "unix://", 7)) {
		atomic_store(&b->listen_port, port);
		/* Gazette advertises https:// when it serves TLS (server.New). */
		if (asprintf(&b->endpoint, "%s://%s:%d", b->tls ? "https" : "http", b->cfg.host,
			     port) < 0)
			return GAZ_ENOMEM;
	} else if (asprintf(&b->endpoint, "unix://%s%s", b->cfg.host, b->cfg.port + 7) < 0) {
		return GAZ_ENOMEM;
	}
	return 0;
}

/* Connects to etcd and loads the keyspace, retrying while etcd is down:
 * a broker started before its etcd waits for it (with a clear log line)
 * rather than crash-looping. */
static int start_keyspace(struct gaz_broker *b, sigset_t *sigs, struct gaz_status *st)
{
	struct timespec zero = {0, 0};
	int rc;

	struct gaz_rpc_tls tls = {b->cfg.etcd_cert_file, b->cfg.etcd_cert_key_file,
				  b->cfg.etcd_trusted_ca_file};
	b->etcd = gaz_etcd_new_tls(b->cfg.etcd_address, b->cfg.etcd_lease_ns / GAZ_NS_PER_MS / 4 + 1000,
				   &tls, st);
	if (!b->etcd)
		return st->code ? st->code : GAZ_EINVAL;
	b->ks = gaz_journals_keyspace_new(b->etcd, b->root);
	if (!b->ks)
		return gaz_status_set(st, GAZ_ENOMEM, "creating the keyspace");
	/* The allocator's leader follows changes, not the whole keyspace
	 * (allocator.c): a log of the last 65,536 changed keys. */
	gaz_keyspace_set_change_log(b->ks, 1 << 16);
	while ((rc = gaz_keyspace_load(b->ks, 0, st)) == GAZ_EUNAVAIL) {
		gaz_error("etcd is unavailable; retrying", "address=%s err=%s", b->cfg.etcd_address,
			  st->msg);
		gaz_status_clear(st);
		if (sigtimedwait(sigs, NULL, &zero) > 0)
			return gaz_status_set(st, GAZ_ECANCELLED, "signalled while waiting for etcd");
		sleep(1);
	}
	/* --broker.watch-delay: a burst of changes wakes the broker's threads
	 * once (Gazette's KeySpace.WatchApplyDelay). */
	gaz_keyspace_set_watch_delay(b->ks, b->cfg.watch_delay_ns);
	if (!rc)
		rc = gaz_keyspace_watch(b->ks, st);
	return rc;
}

/* After each keyspace update: wake the loops, and take up an exiting mark
 * that someone else wrote into our member key (gazette-operator does when
 * our pod is terminating; Gazette's allocator honours it the same way).
 * From then on we answer not-ready and persist before each hand-off, as
 * after SIGTERM; the process still exits only on a signal. */
static void on_keyspace(void *arg)
{
	struct gaz_broker *b = arg;
	bool marked = false;

	if (atomic_load(&b->announced) && !atomic_load(&b->exiting)) {
		gaz_keyspace_rlock(b->ks);
		const struct gaz_ks_entry *e = gaz_keyspace_get(b->ks, b->member_key);
		const struct gaz_ks_value *v = e ? e->decoded : NULL;
		/* Our key, not a previous process's under the same id that the
		 * mirror may still hold: it carries our lease. */
		marked = v && v->broker && v->broker->exiting && e->lease == b->lease_id;
		gaz_keyspace_runlock(b->ks);
	}
	if (marked && !atomic_exchange(&b->exiting, true))
		gaz_info("member marked exiting in etcd; handing off journals", "key=%s", b->member_key);
	gaz_broker_kick(b);
}

/* held_assignments counts the journals this broker holds an assignment
 * of, and `*primaries` those it is primary of, and names the first of
 * them in `names` (comma-separated, truncated to `cap`). */
static int64_t held_assignments(struct gaz_broker *b, int64_t *primaries, char *names, size_t cap)
{
	char *prefix = NULL;
	size_t lo, hi, used = 0;
	int64_t held = 0;

	*primaries = 0;
	names[0] = '\0';
	if (asprintf(&prefix, "%s/assign/", b->root) < 0)
		return -1;
	gaz_keyspace_rlock(b->ks);
	gaz_keyspace_prefix(b->ks, prefix, &lo, &hi);
	for (size_t i = lo; i < hi; i++) {
		const struct gaz_ks_value *v = gaz_keyspace_at(b->ks, i)->decoded;
		if (!gaz_broker_is_local(b, v->zone, v->suffix))
			continue;
		held++;
		*primaries += v->slot == 0;
		if (used + strlen(v->item) + 8 < cap)
			used += (size_t)snprintf(names + used, cap - used, "%s%s", used ? ", " : "",
						 v->item);
		else if (used + 5 < cap && !strstr(names, "..."))
			used += (size_t)snprintf(names + used, cap - used, ", ...");
	}
	gaz_keyspace_runlock(b->ks);
	free(prefix);
	return held;
}

char *gaz_broker_exit_report(struct gaz_broker *b)
{
	char *out = NULL;

	pthread_mutex_lock(&b->exit_mu);
	if (b->exit_report)
		out = strdup(b->exit_report);
	pthread_mutex_unlock(&b->exit_mu);
	return out;
}

/* set_exit_report replaces what /debug/ready says of the exit. */
static void set_exit_report(struct gaz_broker *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void set_exit_report(struct gaz_broker *b, const char *fmt, ...)
{
	char *text = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&text, fmt, ap) < 0)
		text = NULL;
	va_end(ap);
	pthread_mutex_lock(&b->exit_mu);
	free(b->exit_report);
	b->exit_report = text;
	pthread_mutex_unlock(&b->exit_mu);
}

/* hand_off waits, bounded by `deadline`, until this broker holds no
 * assignment: the allocator removes an exiting member from a route only
 * once enough other members are consistent (synchronised by the
 * primary's pulse) to meet the journal's replication, and sheds exiting
 * members oldest first and never below the largest replication
 * (allocator.c), so until then the broker keeps serving appends, reads
 * and replication of what it holds. A journal no other broker can take
 * (a lone broker, or no member to replace this one) is held until one
 * joins or the deadline passes. Says what it waits for in the log (every
 * 10 s), the metrics and /debug/ready. Returns the journals still held
 * (-1: not known, the keyspace could not be read for want of memory). */
static int64_t hand_off(struct gaz_broker *b, int64_t deadline)
{
	int64_t held = 0, primaries = 0, next_log = 0;
	char names[256];

	while (atomic_load(&b->announced) && !atomic_load(&b->lease_lost)) {
		int64_t now = gaz_mono_ns(), left_s = (deadline - now) / GAZ_NS_PER_S;
		if ((held = held_assignments(b, &primaries, names, sizeof(names))) == 0)
			break;
		if (held < 0) { /* out of memory: not known to be handed off */
			if (now >= deadline)
				break;
			gaz_keyspace_wait_revision(b->ks, INT64_MAX, gaz_deadline_in(250));
			continue;
		}
		gaz_metric_exit_held(held, primaries);
		set_exit_report(b, "exiting: handing off %lld journals (%lld as primary), exit timeout in "
			       "%lld s: %s", (long long)held, (long long)primaries, (long long)left_s, names);
		if (now >= deadline)
			break;
		if (now >= next_log) {
			gaz_info("exiting: waiting for journals to be taken over",
				 "journals=%lld primary=%lld timeout_in=%llds held=%s", (long long)held,
				 (long long)primaries, (long long)left_s, names);
			next_log = now + 10 * GAZ_NS_PER_S;
		}
		gaz_keyspace_wait_revision(b->ks, INT64_MAX, gaz_deadline_in(250));
	}
	gaz_metric_exit_held(held > 0 ? held : 0, held > 0 ? primaries : 0);
	return held;
}

/* drain_persister persists what the replicas left, bounded by `deadline`
 * (and at least 30 s), then past it while fragments no peer holds remain
 * and no second signal of `sigs` (NULL: none awaited) came. Returns the
 * fragments left unpersisted. */
static size_t drain_persister(struct gaz_broker *b, int64_t deadline, const sigset_t *sigs)
{
	int64_t until = deadline > gaz_deadline_in(30000) ? deadline : gaz_deadline_in(30000);
	int64_t next_report = 0;
	size_t sole = 0, left;

	left = gaz_persister_pending(b->persister);
	set_exit_report(b, "exiting: persisting %zu fragments", left);
	gaz_metric_exit_unpersisted((int64_t)left, 0);
	left = gaz_persister_drain(b->persister, until, &sole);
	while (sole && sigs) {
		set_exit_report(b, "exiting: exit timeout passed with %zu fragments unpersisted, %zu of them "
			       "held by no peer; still persisting", left, sole);
		gaz_metric_exit_unpersisted((int64_t)left, (int64_t)sole);
		struct timespec one_s = {1, 0};
		int sig;
		if (gaz_mono_ns() >= next_report) {
			gaz_error("exit timeout passed with acknowledged bytes no peer holds; still persisting "
				  "(a second SIGTERM or SIGINT exits without them)",
				  "fragments=%zu sole_copies=%zu", left, sole);
			gaz_persister_report(b->persister);
			next_report = gaz_deadline_in(30000);
		}
		if ((sig = sigtimedwait(sigs, NULL, &one_s)) > 0) {
			gaz_error("signalled again; exiting without persisting", "signal=%d", sig);
			break;
		}
		left = gaz_persister_drain(b->persister, 0, &sole);
	}
	return gaz_persister_stop(b->persister);
}

static void graceful_exit(struct gaz_broker *b, const sigset_t *sigs)
{
	struct gaz_status st = {0};
	int64_t deadline = gaz_mono_ns() + b->cfg.exit_timeout_ns;

	atomic_store(&b->exiting, true);
	if (atomic_load(&b->announced) && gaz_announce_exiting(b, &st))
		gaz_warn("marking member exiting failed", "err=%s", st.msg);
	gaz_broker_kick(b);
	set_exit_report(b, "exiting");
	int64_t held = hand_off(b, deadline);
	if (held)
		gaz_warn("exit timeout: releasing journals no other broker took over", "journals=%lld",
			 (long long)held);
	else
		gaz_info("handed off; stopping replicas", NULL);
	atomic_store(&b->stopping, true);
	gaz_broker_kick(b);
	if (b->threads_started) {
		pthread_join(b->maintain_thread, NULL);
		gaz_allocator_stop(atomic_load(&b->allocator));
		pthread_join(b->pulse_thread, NULL);
	}
	struct gaz_release_head *heads = NULL;
	struct gaz_replica **rs = NULL;
	size_t n_heads = 0, left = 0, n = gaz_replicas_snapshot(b, &rs);
	for (size_t i = 0; i < n; i++) {
		struct gaz_replica *r = rs[i];
		struct gaz_release_head *nh;
		gaz_replica_teardown(r);
		/* Readers still get every acknowledged byte while the persister
		 * drains (its only copy may be ours): a sealed replica serves
		 * them from the index, no longer taking appends. */
		gaz_replica_archive(r);
		if ((nh = realloc(heads, (n_heads + 1) * sizeof(*heads)))) {
			heads = nh;
			heads[n_heads].journal = strdup(r->journal);
			heads[n_heads++].head = r->spool.fragment.end;
		}
		gaz_replica_unref(r);
	}
	free(rs);
	if (n)
		gaz_info("serving reads only of released journals while their fragments persist",
			 "journals=%zu", n);
	if (b->persister)
		left = drain_persister(b, deadline, sigs);
	b->persister = NULL;
	b->unpersisted = left;
	/* The sealed replicas go now; their readers see the stream end. */
	n = gaz_replicas_snapshot(b, &rs);
	for (size_t i = 0; i < n; i++) {
		gaz_replica_teardown(rs[i]);
		gaz_replica_unref(rs[i]);
	}
	free(rs);
	/* Only when everything committed is in the store may the next primary
	 * continue from the recorded head. */
	if (!left && atomic_load(&b->announced) && !atomic_load(&b->lease_lost))
		gaz_release_record_heads(b, heads, n_heads);
	for (size_t i = 0; i < n_heads; i++)
		free(heads[i].journal);
	free(heads);
}

static void shutdown_all(struct gaz_broker *b)
{
	struct gaz_status st = {0};

	if (b->listener)
		gaz_rpc_listener_close(b->listener);
	if (b->srv)
		gaz_rpc_server_shutdown(b->srv, 1000); /* replicas are gone: only watches remain */
	gaz_read_fanout_stop(); /* every Read is over */
	if (b->keepalive)
		gaz_etcd_keepalive_stop(b->keepalive);
	if (b->lease_id && gaz_etcd_lease_revoke(b->etcd, b->lease_id, &st))
		gaz_warn("revoking the member lease failed", "err=%s", st.msg);
	gaz_keyspace_free(b->ks);
	gaz_allocator_free(atomic_exchange(&b->allocator, NULL));
	gaz_peers_close();
	gaz_stores_close_all();
	gaz_rpc_server_free(b->srv);
	gaz_etcd_free(b->etcd);
	gaz_rpc_shutdown();
}

static int serve(struct gaz_broker *b, sigset_t *sigs)
{
	struct gaz_status st = {0};
	int sig = 0, rc;

	pthread_mutex_init(&b->mu, NULL);
	pthread_mutex_init(&b->exit_mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&b->cond, &ca);
	pthread_mutex_init(&b->pulse_mu, NULL);
	pthread_mutex_init(&b->maintain_mu, NULL);
	pthread_cond_init(&b->pulse_cond, &ca);
	if ((rc = configure(b, &st)) || (rc = gaz_rpc_init(gaz_rpc_default_pollers())) || (rc = start_serving(b, &st)) ||
	    (rc = start_keyspace(b, sigs, &st)))
		goto fail;
	gaz_keyspace_set_observer(b->ks, on_keyspace, b);
	atomic_store(&b->ks_ready, true); /* publishes b->ks to handlers */
	b->persister = gaz_persister_start(b, 4);
	if ((rc = gaz_announce(b, &st)))
		goto fail;
	if ((rc = gaz_broker_allocator_start(b)))
		goto fail;
	pthread_create(&b->maintain_thread, NULL, gaz_maintain_thread, b);
	pthread_create(&b->pulse_thread, NULL, gaz_pulse_thread, b);
	b->threads_started = true;
	gaz_broker_kick(b);
	gaz_info("broker serving", "endpoint=%s id=%s zone=%s", b->endpoint, b->cfg.id, b->cfg.zone);
	fprintf(stderr, "gazette: serving %s as %s#%s\n", b->endpoint, b->cfg.zone, b->cfg.id);
	sigwait(sigs, &sig);
	gaz_info("signalled; exiting gracefully", "signal=%d", sig);
	graceful_exit(b, sigs);
	shutdown_all(b);
	gaz_info("goodbye", NULL);
	return atomic_load(&b->lease_lost) || b->unpersisted ? 1 : 0;
fail:
	gaz_log_emit(GAZ_LOG_FATAL, "broker failed to start", "err=%s", st.msg[0] ? st.msg : gaz_err_str(rc));
	FILE *tl = fopen("/dev/termination-log", "w");
	if (tl) {
		fprintf(tl, "%s\n", st.msg);
		fclose(tl);
	}
	graceful_exit(b, NULL);
	shutdown_all(b);
	return 1;
}

static const struct gaz_flags_cmd commands[] = {
	{"print-config", "Print combined configuration and exit"},
	{"serve", "Serve as Gazette broker"},
	{0},
};

static const char serve_description[] =
	"Serve a Gazette broker with the provided configuration, until signaled to\n"
	"exit (via SIGTERM). Upon receiving a signal, the broker will seek to discharge\n"
	"its responsible journals and will exit only when it can safely do so.\n";

static const char print_config_description[] =
	"print-config parses the combined configuration from gazette.ini, flags,\n"
	"and environment variables, and then writes the configuration to stdout in INI\n"
	"format.\n";

/* Picks the command as Gazette's go-flags parser does (mainboilerplate
 * MustParseArgs): help goes to stdout and exits 1 with the version on
 * stderr; a missing command says so, with the full help, on stderr;
 * an unknown one or a bad flag is one line on stderr. Returns the index
 * in `commands` with argv[*at] the command, or -1 to exit 1. */
static int pick_command(int argc, char **argv, int *at)
{
	struct gaz_flags top = {.prog = "gazette", .usage = "[OPTIONS] <print-config | serve>",
				.table = flag_table, .commands = commands};
	struct gaz_status st = {0};
	int rc = gaz_flags_find_command(&top, argc - 1, argv + 1, at, &st);

	if (rc >= 0 && rc != GAZ_FLAGS_HELP) {
		(*at)++;
		return rc;
	}
	if (rc == GAZ_FLAGS_HELP) {
		gaz_flags_print_help(&top, stdout);
		fflush(stdout);
		gaz_flags_print_version(stderr);
	} else if (rc == GAZ_ENOTFOUND) {
		fprintf(stderr, "%s\n\n", st.msg);
		gaz_flags_print_help(&top, stderr);
		gaz_flags_print_version(stderr);
	} else {
		fprintf(stderr, "%s\n", st.msg);
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct gaz_flags f = {.prog = "gazette", .table = flag_table};
	struct gaz_status st = {0};
	char ini[4096];
	sigset_t sigs;
	int rc, at = 0, cmd;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* Keep 1 MiB message buffers out of mmap churn (grpc-core.md §3). */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 512 << 20);

	if ((cmd = pick_command(argc, argv, &at)) < 0)
		return 1;
	/* Options may come before the command, as go-flags takes them. */
	memmove(argv + at, argv + at + 1, (size_t)(argc - at - 1) * sizeof(*argv));
	argc--;
	f.usage = cmd == 0 ? "[OPTIONS] print-config" : "[OPTIONS] serve";
	f.description = cmd == 0 ? print_config_description : serve_description;
	if (gaz_flags_find_ini("gazette.ini", ini, sizeof(ini)) == 0)
		f.ini_path = ini;
	rc = gaz_flags_parse(&f, argc - 1, argv + 1, &st);
	if (rc == GAZ_FLAGS_HELP) {
		fflush(stdout);
		gaz_flags_print_version(stderr);
		gaz_flags_release(&f); /* the help was printed; leak nothing */
		return 1;
	}
	if (rc) {
		fprintf(stderr, "%s\n", st.msg);
		gaz_flags_release(&f);
		return 1;
	}
	if (cmd == 0) {
		gaz_flags_print_ini(&f, stdout);
		gaz_flags_release(&f);
		return 0;
	}
	gaz_log_setup(broker.cfg.log_level, broker.cfg.log_format);
	gaz_broker_metrics_init();
	gaz_stores_metrics_init();
	rc = serve(&broker, &sigs);
	gaz_flags_release(&f);
	return rc;
}
