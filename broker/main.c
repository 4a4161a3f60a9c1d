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
 * our journals; wait until we hold none, or no other broker can take
 * them, bounded by --broker.exit-timeout; then tear down the replicas
 * (their spools roll and are persisted), drain the persister, stop
 * serving, and revoke the lease (etcd drops our member and assignment
 * keys). Exit 0.
 */
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/metrics.h"
#include "broker/persister.h"
#include "broker/release.h"
#include "broker/replica.h"
#include "broker/stores.h"
#include "common/clock.h"
#include "common/flags.h"
#include "common/log.h"
#include "protocol/validate.h"

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
	BROKER_FLAG("auto-suspend", "AUTO_SUSPEND", GAZ_FLAG_BOOL, "false", "Pulses may suspend idle, fully-persisted journals", &broker.cfg.auto_suspend),
	BROKER_FLAG("store-read-nice", "STORE_READ_NICE", GAZ_FLAG_INT64, "10", "Niceness (0-19) of the threads that stream persisted fragments from a store to proxied readers, so that backfills through the broker yield the CPU to appends (0 = stream on the handler thread, as Gazette; gazette-c)", &broker.cfg.store_read_nice),
	BROKER_FLAG("exit-timeout", "EXIT_TIMEOUT", GAZ_FLAG_DURATION, "2m", "Bound on a graceful exit's hand-off before spools are persisted and journals released (gazette-c)", &broker.cfg.exit_timeout_ns),
	{.name = "etcd.address", .env = "ETCD_ADDRESS", .type = GAZ_FLAG_STRING, .def = "http://localhost:2379", .help = "Etcd service address endpoint", .ptr = &broker.cfg.etcd_address, .group = "Etcd"},
	{.name = "etcd.prefix", .env = "ETCD_PREFIX", .type = GAZ_FLAG_STRING, .def = "/gazette/cluster", .help = "Etcd base prefix for broker state and coordination", .ptr = &broker.cfg.etcd_prefix, .group = "Etcd"},
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
	if (b->cfg.file_root[0] && access(b->cfg.file_root, R_OK | W_OK | X_OK))
		return gaz_status_set(st, GAZ_EINVAL, "--broker.file-root %s: %m", b->cfg.file_root);
	b->root = b->cfg.etcd_prefix;
	b->spool_dir = strdup(tmp && tmp[0] ? tmp : "/tmp");
	b->member_key = gaz_ks_member_key(b->root, b->cfg.zone, b->cfg.id);
	return b->spool_dir && b->member_key ? 0 : GAZ_ENOMEM;
}

/* Counts every RPC as Gazette's gazette_journal_server_*_totals do. Append
 * and Read record their own completion status (a Gazette status name). */
struct counted {
	const char *op;
	gaz_rpc_handler_fn fn;
	bool self_completes;
	unsigned flags; /* GAZ_RPC_*: Append starts with its small request whole */
	bool fast;      /* Append's fast path (append_batch.c) */
};

static struct counted counted_methods[] = {
	{"List", gaz_handle_list, false},
	{"Apply", gaz_handle_apply, false},
	{"Read", gaz_handle_read, true},
	{"Append", gaz_handle_append, true, GAZ_RPC_DISPATCH_READ, true},
	{"ListFragments", gaz_handle_list_fragments, false},
	{"FragmentStoreHealth", gaz_handle_store_health, false},
	{"Replicate", gaz_handle_replicate, false},
};

static void counted_handler(struct gaz_rpc_call *call, void *arg)
{
	struct counted *c = arg;

	gaz_metric_rpc_started(c->op);
	c->fn(call, &broker);
	if (!c->self_completes)
		gaz_metric_rpc_completed(c->op, "ok");
}

static bool counted_fast(struct gaz_rpc_call *call, void *arg)
{
	(void)arg;
	return gaz_append_fast(call, &broker);
}

static int start_serving(struct gaz_broker *b, struct gaz_status *st)
{
	struct gaz_rpc_server_opts o = {.max_recv_bytes = (int)b->cfg.max_grpc_recv_size};
	char addr[300], path[64];
	int port = 0;

	if (!(b->srv = gaz_rpc_server_new(&o)))
		return gaz_status_set(st, GAZ_ENOMEM, "creating the gRPC server");
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
	b->listener = gaz_rpc_listen(addr, b->srv, gaz_http_conn, b, &port, st);
	if (!b->listener)
		return st->code ? st->code : GAZ_EIO;
	if (strncmp(b->cfg.port, "unix://", 7)) {
		char p[16];
		snprintf(p, sizeof(p), "%d", port);
		free(b->cfg.port);
		b->cfg.port = strdup(p);
		if (asprintf(&b->endpoint, "http://%s:%d", b->cfg.host, port) < 0)
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

	b->etcd = gaz_etcd_new(b->cfg.etcd_address, b->cfg.etcd_lease_ns / GAZ_NS_PER_MS / 4 + 1000, st);
	if (!b->etcd)
		return st->code ? st->code : GAZ_EINVAL;
	b->ks = gaz_journals_keyspace_new(b->etcd, b->root);
	if (!b->ks)
		return gaz_status_set(st, GAZ_ENOMEM, "creating the keyspace");
	while ((rc = gaz_keyspace_load(b->ks, 0, st)) == GAZ_EUNAVAIL) {
		gaz_error("etcd is unavailable; retrying", "address=%s err=\"%s\"", b->cfg.etcd_address,
			  st->msg);
		gaz_status_clear(st);
		if (sigtimedwait(sigs, NULL, &zero) > 0)
			return gaz_status_set(st, GAZ_ECANCELLED, "signalled while waiting for etcd");
		sleep(1);
	}
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

/* Whether a live member outside `journal`'s route could take our place
 * (read lock held; `live` lists live members' "zone#suffix"). */
static bool movable(struct gaz_broker *b, const char *journal, char **live, size_t n_live)
{
	struct gaz_route r;
	bool any = false;

	if (gaz_route_build(b->ks, b->root, journal, &r))
		return false;
	for (size_t i = 0; i < n_live && !any; i++) {
		bool in_route = false;
		for (size_t j = 0; j < r.n; j++) {
			char id[300];
			snprintf(id, sizeof(id), "%s#%s", r.zone[j], r.suffix[j]);
			in_route |= !strcmp(id, live[i]);
		}
		any = !in_route;
	}
	gaz_route_release(&r);
	return any;
}

/* Whether this broker still holds an assignment that another member could
 * take. Where none can (a lone broker, or every live broker already holds
 * a replica), waiting would only delay the exit: the other replicas keep
 * every acknowledged byte, and a lone broker releases through the store. */
static bool must_hand_off(struct gaz_broker *b)
{
	char *prefix = NULL, **live = NULL;
	size_t lo, hi, n_live = 0;
	bool wait = false;

	gaz_keyspace_rlock(b->ks);
	if (asprintf(&prefix, "%s/members/", b->root) >= 0) {
		gaz_keyspace_prefix(b->ks, prefix, &lo, &hi);
		live = calloc(hi - lo + 1, sizeof(char *));
		for (size_t i = lo; live && i < hi; i++) {
			const struct gaz_ks_value *v = gaz_keyspace_at(b->ks, i)->decoded;
			if (!v->broker->exiting && v->broker->journal_limit > 0 &&
			    asprintf(&live[n_live], "%s#%s", v->zone, v->suffix) >= 0)
				n_live++;
		}
	}
	free(prefix);
	prefix = NULL;
	if (n_live && asprintf(&prefix, "%s/assign/", b->root) >= 0) {
		gaz_keyspace_prefix(b->ks, prefix, &lo, &hi);
		for (size_t i = lo; i < hi && !wait; i++) {
			const struct gaz_ks_value *v = gaz_keyspace_at(b->ks, i)->decoded;
			wait = gaz_broker_is_local(b, v->zone, v->suffix) &&
			       movable(b, v->journal, live, n_live);
		}
	}
	gaz_keyspace_runlock(b->ks);
	for (size_t i = 0; i < n_live; i++)
		free(live[i]);
	free(live);
	free(prefix);
	return wait;
}

static void graceful_exit(struct gaz_broker *b)
{
	struct gaz_status st = {0};
	int64_t deadline = gaz_mono_ns() + b->cfg.exit_timeout_ns;

	atomic_store(&b->exiting, true);
	if (atomic_load(&b->announced) && gaz_announce_exiting(b, &st))
		gaz_warn("marking member exiting failed", "err=\"%s\"", st.msg);
	gaz_broker_kick(b);
	while (atomic_load(&b->announced) && must_hand_off(b) && gaz_mono_ns() < deadline &&
	       !atomic_load(&b->lease_lost))
		gaz_keyspace_wait_revision(b->ks, INT64_MAX, gaz_deadline_in(250));
	gaz_info("handed off; stopping replicas", "%s", "");
	atomic_store(&b->stopping, true);
	gaz_broker_kick(b);
	if (b->threads_started) {
		pthread_join(b->maintain_thread, NULL);
		pthread_join(b->alloc_thread, NULL);
		pthread_join(b->pulse_thread, NULL);
	}
	struct gaz_release_head *heads = NULL;
	size_t n_heads = 0, left = 0;
	for (;;) {
		struct gaz_replica *r = NULL;
		struct gaz_release_head *nh;
		pthread_mutex_lock(&b->mu);
		if (b->n_replicas) {
			r = b->replicas[0];
			atomic_fetch_add(&r->refs, 1);
		}
		pthread_mutex_unlock(&b->mu);
		if (!r)
			break;
		gaz_replica_teardown(r);
		if ((nh = realloc(heads, (n_heads + 1) * sizeof(*heads)))) {
			heads = nh;
			heads[n_heads].journal = strdup(r->journal);
			heads[n_heads++].head = r->spool.fragment.end;
		}
		gaz_replica_unref(r);
	}
	if (b->persister)
		left = gaz_persister_stop(b->persister, deadline > gaz_mono_ns() + 30 * GAZ_NS_PER_S
								? deadline : gaz_deadline_in(30000));
	b->persister = NULL;
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
	if (b->keepalive)
		gaz_etcd_keepalive_stop(b->keepalive);
	if (b->lease_id && gaz_etcd_lease_revoke(b->etcd, b->lease_id, &st))
		gaz_warn("revoking the member lease failed", "err=\"%s\"", st.msg);
	gaz_keyspace_free(b->ks);
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
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&b->cond, &ca);
	if ((rc = configure(b, &st)) || (rc = gaz_rpc_init(gaz_rpc_default_pollers())) || (rc = start_serving(b, &st)) ||
	    (rc = start_keyspace(b, sigs, &st)))
		goto fail;
	gaz_keyspace_set_observer(b->ks, on_keyspace, b);
	b->persister = gaz_persister_start(b, 4);
	if ((rc = gaz_announce(b, &st)))
		goto fail;
	pthread_create(&b->maintain_thread, NULL, gaz_maintain_thread, b);
	pthread_create(&b->alloc_thread, NULL, gaz_allocator_thread, b);
	pthread_create(&b->pulse_thread, NULL, gaz_pulse_thread, b);
	b->threads_started = true;
	gaz_broker_kick(b);
	gaz_info("broker serving", "endpoint=%s id=%s zone=%s", b->endpoint, b->cfg.id, b->cfg.zone);
	fprintf(stderr, "gazette: serving %s as %s#%s\n", b->endpoint, b->cfg.zone, b->cfg.id);
	sigwait(sigs, &sig);
	gaz_info("signalled; exiting gracefully", "signal=%d", sig);
	graceful_exit(b);
	shutdown_all(b);
	gaz_info("goodbye", "%s", "");
	return atomic_load(&b->lease_lost) ? 1 : 0;
fail:
	gaz_log_emit(GAZ_LOG_FATAL, "broker failed to start", "err=\"%s\"", st.msg[0] ? st.msg : gaz_err_str(rc));
	FILE *tl = fopen("/dev/termination-log", "w");
	if (tl) {
		fprintf(tl, "%s\n", st.msg);
		fclose(tl);
	}
	graceful_exit(b);
	shutdown_all(b);
	return 1;
}

int main(int argc, char **argv)
{
	struct gaz_flags f = {.prog = "gazette", .usage = "serve [OPTIONS]", .table = flag_table};
	struct gaz_status st = {0};
	char ini[4096];
	sigset_t sigs;
	int rc;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* Keep 1 MiB message buffers out of mmap churn (grpc-core.md §3). */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 512 << 20);

	if (argc < 2 || (strcmp(argv[1], "serve") && strcmp(argv[1], "print-config"))) {
		fprintf(stderr, "Usage: gazette <serve|print-config> [OPTIONS]\n"
				"gazette-c broker, wire-compatible with Gazette.\n");
		return 1;
	}
	if (gaz_flags_find_ini("gazette.ini", ini, sizeof(ini)) == 0)
		f.ini_path = ini;
	rc = gaz_flags_parse(&f, argc - 2, argv + 2, &st);
	if (rc == GAZ_FLAGS_HELP) {
		gaz_flags_release(&f); /* the help was printed; leak nothing */
		return 0;
	}
	if (rc) {
		fprintf(stderr, "gazette: %s\n", st.msg);
		return 1;
	}
	if (!strcmp(argv[1], "print-config")) {
		gaz_flags_print_ini(&f, stdout);
		return 0;
	}
	gaz_log_setup(broker.cfg.log_level, broker.cfg.log_format);
	gaz_broker_metrics_init();
	rc = serve(&broker, &sigs);
	gaz_flags_release(&f);
	return rc;
}
