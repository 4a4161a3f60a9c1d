/*
 * main.c - the gazette-operator process: flags (with environment
 * variables), the Kubernetes and etcd clients, the JournalSpec and
 * ShardSpec informers (shard_reconcile.c),
 * one reconcile worker with a periodic resync, optional Lease leader
 * election, and /healthz, /readyz and /metrics on one HTTP port.
 *
 * Threads: main (signals, then shutdown), the informer, the worker, the
 * election campaign (when enabled), the HTTP acceptor and one thread per
 * HTTP connection (at most HTTP_CONNS_MAX).
 *
 * Shutdown on SIGTERM/SIGINT: stop taking work, let the reconcile in
 * progress finish, stop the informer, release the Lease, exit 0.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/clock.h"
#include "common/flags.h"
#include "common/http.h"
#include "common/log.h"
#include "operator/drain.h"
#include "operator/operator.h"
#include "protocol/auth.h"
#include "rpc/rpc.h"

#define HTTP_CONNS_MAX 32
#define QUEUE_MAX 100000

static struct gaz_op op;
/* Broker drains (drain.h): flag storage, and the controller when enabled. */
static struct {
	char *selector, *namespace, *pdb;
	bool finalizer;
	int64_t max_replication, interval_ns;
} drain_flags;
static struct gaz_drain *drain;

#define F(n, e, t, d, h, p, g) {.name = n, .env = e, .type = t, .def = d, .help = h, .ptr = p, .group = g}

static const struct gaz_flag flag_table[] = {
	F("kubeconfig", "KUBECONFIG_PATH", GAZ_FLAG_STRING, "", "Path of a kubeconfig; empty: in-cluster when KUBERNETES_SERVICE_HOST is set, else $KUBECONFIG or ~/.kube/config", &op.cfg.kubeconfig, "Kubernetes"),
	F("kube.context", "KUBE_CONTEXT", GAZ_FLAG_STRING, "", "kubeconfig context (empty: its current-context)", &op.cfg.kube_context, "Kubernetes"),
	F("kube.service-account-dir", "KUBE_SERVICE_ACCOUNT_DIR", GAZ_FLAG_STRING, GAZ_KUBE_SA_DIR, "Where the in-cluster token, ca.crt and namespace are mounted", &op.cfg.sa_dir, "Kubernetes"),
	F("kube.watch-timeout", "KUBE_WATCH_TIMEOUT", GAZ_FLAG_DURATION, "5m", "Server-side timeout of each watch request (re-watched from the last version)", &op.cfg.watch_timeout_ns, "Kubernetes"),
	F("namespace", "WATCH_NAMESPACE", GAZ_FLAG_STRING, "", "Namespace whose JournalSpecs are managed (empty: all namespaces)", &op.cfg.namespace, "Kubernetes"),
	F("etcd.address", "ETCD_ADDRESS", GAZ_FLAG_STRING, "http://localhost:2379", "Etcd service address endpoint of the brokers", &op.cfg.etcd_address, "Etcd"),
	F("etcd.cert-file", "ETCD_CERT_FILE", GAZ_FLAG_STRING, "", "Path to the client TLS certificate", &op.cfg.etcd_cert_file, "Etcd"),
	F("etcd.cert-key-file", "ETCD_CERT_KEY_FILE", GAZ_FLAG_STRING, "", "Path to the client TLS private key", &op.cfg.etcd_cert_key_file, "Etcd"),
	F("etcd.trusted-ca-file", "ETCD_TRUSTED_CA_FILE", GAZ_FLAG_STRING, "", "Path to the trusted CA for client verification of server certificates", &op.cfg.etcd_trusted_ca_file, "Etcd"),
	F("etcd.prefix", "ETCD_PREFIX", GAZ_FLAG_STRING, "/gazette/cluster", "Etcd base prefix of the brokers (their --etcd.prefix)", &op.cfg.etcd_prefix, "Etcd"),
	F("consumer.etcd-prefix", "CONSUMER_ETCD_PREFIX", GAZ_FLAG_STRING, "", "Etcd prefix of the consumer application (its --etcd.prefix) for ShardSpecs without spec.etcdPrefix", &op.cfg.consumer_prefix, "Etcd"),
	F("broker.address", "BROKER_ADDRESS", GAZ_FLAG_STRING, "http://localhost:8080", "A broker, for suspending journals before deletion and for write heads (empty: no broker calls)", &op.cfg.broker_address, "Broker"),
	F("broker.cert-file", "BROKER_CERT_FILE", GAZ_FLAG_STRING, "", "Path to the client TLS certificate (for an https:// --broker.address)", &op.cfg.broker_cert_file, "Broker"),
	F("broker.cert-key-file", "BROKER_CERT_KEY_FILE", GAZ_FLAG_STRING, "", "Path to the client TLS private key", &op.cfg.broker_cert_key_file, "Broker"),
	F("broker.trusted-ca-file", "BROKER_TRUSTED_CA_FILE", GAZ_FLAG_STRING, "", "Path to the trusted CA for client verification of broker certificates", &op.cfg.broker_trusted_ca_file, "Broker"),
	F("broker.auth-keys", "BROKER_AUTH_KEYS", GAZ_FLAG_STRING, "", "Whitespace or comma separated, base64-encoded keys of the brokers' --broker.auth-keys: each broker call is signed with the first (empty: unsigned calls)", &op.cfg.broker_auth_keys, "Broker"),
	F("broker.auth-token", "BROKER_AUTH_TOKEN", GAZ_FLAG_STRING, "", "Bearer token sent with each broker call instead (ignored when --broker.auth-keys is set)", &op.cfg.broker_auth_token, "Broker"),
	F("broker.timeout", "BROKER_TIMEOUT", GAZ_FLAG_DURATION, "30s", "Bound on each broker call", &op.cfg.broker_timeout_ns, "Broker"),
	F("resync", "OPERATOR_RESYNC", GAZ_FLAG_DURATION, "1m", "Every JournalSpec is reconciled at least this often (drift correction)", &op.cfg.resync_ns, "Operator"),
	F("http.address", "OPERATOR_HTTP_ADDRESS", GAZ_FLAG_STRING, ":8081", "host:port serving /healthz, /readyz and /metrics", &op.cfg.http_address, "Operator"),
	F("bucket-lifecycle", "OPERATOR_BUCKET_LIFECYCLE", GAZ_FLAG_BOOL, "true", "Keep S3 bucket lifecycle rules expiring each journal's fragments after its retention", &op.cfg.bucket_lifecycle, "Operator"),
	F("leader-elect", "OPERATOR_LEADER_ELECT", GAZ_FLAG_BOOL, "false", "Run only while holding a coordination.k8s.io Lease", &op.cfg.leader_elect, "Leader election"),
	F("lease.name", "OPERATOR_LEASE_NAME", GAZ_FLAG_STRING, "gazette-operator", "Name of the Lease", &op.cfg.lease_name, "Leader election"),
	F("lease.namespace", "OPERATOR_LEASE_NAMESPACE", GAZ_FLAG_STRING, "", "Namespace of the Lease (empty: the configuration's namespace, else default)", &op.cfg.lease_namespace, "Leader election"),
	F("lease.duration", "OPERATOR_LEASE_DURATION", GAZ_FLAG_DURATION, "15s", "How long a Lease not renewed stays held", &op.cfg.lease_duration_ns, "Leader election"),
	F("lease.renew-deadline", "OPERATOR_LEASE_RENEW_DEADLINE", GAZ_FLAG_DURATION, "10s", "A leader that cannot renew within this exits", &op.cfg.renew_deadline_ns, "Leader election"),
	F("lease.retry-period", "OPERATOR_LEASE_RETRY_PERIOD", GAZ_FLAG_DURATION, "2s", "Interval of Lease attempts and renewals", &op.cfg.retry_period_ns, "Leader election"),
	F("identity", "POD_NAME", GAZ_FLAG_STRING, "", "Holder identity in the Lease (empty: hostname and pid)", &op.cfg.identity, "Leader election"),
	F("brokers.selector", "BROKERS_SELECTOR", GAZ_FLAG_STRING, "", "Label selector of the broker pods to drain (empty: no drains, no PDB)", &drain_flags.selector, "Drains"),
	F("brokers.namespace", "BROKERS_NAMESPACE", GAZ_FLAG_STRING, "", "Namespace of the broker pods (empty: --namespace, else the configuration's namespace, else default)", &drain_flags.namespace, "Drains"),
	F("brokers.pdb", "BROKERS_PDB", GAZ_FLAG_STRING, "", "PodDisruptionBudget kept over the broker pods (empty: none)", &drain_flags.pdb, "Drains"),
	F("brokers.finalizer", "BROKERS_FINALIZER", GAZ_FLAG_BOOL, "true", "Hold a terminating broker pod until its member key is gone from etcd", &drain_flags.finalizer, "Drains"),
	F("brokers.max-replication", "BROKERS_MAX_REPLICATION", GAZ_FLAG_INT64, "9", "The brokers' --broker.max-replication", &drain_flags.max_replication, "Drains"),
	F("drain.interval", "DRAIN_INTERVAL", GAZ_FLAG_DURATION, "5s", "Drains and the PDB are re-evaluated at least this often", &drain_flags.interval_ns, "Drains"),
	{.name = "log.level", .env = "LOG_LEVEL", .type = GAZ_FLAG_STRING, .def = "info", .help = "Logging level", .ptr = &op.cfg.log_level, .group = "Logging", .choices = "trace|debug|info|warn|error|fatal"},
	{.name = "log.format", .env = "LOG_FORMAT", .type = GAZ_FLAG_STRING, .def = "text", .help = "Logging output format", .ptr = &op.cfg.log_format, .group = "Logging", .choices = "json|text|color"},
	{0},
};

/* ---- HTTP: /healthz, /readyz, /metrics --------------------------------------- */

static atomic_int http_conns;

static int healthz(struct gaz_http_req *req, struct gaz_http_resp *resp, void *arg)
{
	(void)req, (void)arg;
	if (!atomic_load(&op.worker_alive))
		return gaz_http_resp_error(resp, 503, "reconcile worker stopped");
	return gaz_http_resp_send(resp, "ok", 2);
}

/* Held by readyz while it reads the informers, and once by main before
 * it frees them: after op.stop is set and this lock taken and released,
 * no readyz still reads them, and the later ones see op.stop. */
static pthread_mutex_t ready_mu = PTHREAD_MUTEX_INITIALIZER;

static int readyz_locked(struct gaz_http_resp *resp)
{
	if (atomic_load(&op.stop))
		return gaz_http_resp_error(resp, 503, "stopping");
	if (!op.journals || !gaz_informer_synced(op.journals))
		return gaz_http_resp_error(resp, 503, "JournalSpec cache not synced");
	if (!op.shards || !gaz_informer_synced(op.shards))
		return gaz_http_resp_error(resp, 503, "ShardSpec cache not synced");
	if (!gaz_drain_synced(drain))
		return gaz_http_resp_error(resp, 503, "broker pod cache not synced");
	if (!atomic_load(&op.leading))
		return gaz_http_resp_error(resp, 503, "not the leader");
	return gaz_http_resp_send(resp, "ok", 2);
}

static int readyz(struct gaz_http_req *req, struct gaz_http_resp *resp, void *arg)
{
	int rc;

	(void)req, (void)arg;
	pthread_mutex_lock(&ready_mu);
	rc = readyz_locked(resp);
	pthread_mutex_unlock(&ready_mu);
	return rc;
}

static int metrics(struct gaz_http_req *req, struct gaz_http_resp *resp, void *arg)
{
	struct gaz_status st = {0};
	char *out = NULL;
	size_t len = 0;
	int rc;

	(void)req, (void)arg;
	if (gaz_metrics_render(NULL, &out, &len, &st))
		return gaz_http_resp_error(resp, 500, "%s", st.msg);
	gaz_http_resp_header(resp, "Content-Type", "%s", GAZ_METRICS_CONTENT_TYPE);
	rc = gaz_http_resp_send(resp, out, len);
	free(out);
	return rc;
}

static void *http_conn(void *arg)
{
	static const struct gaz_http_route routes[] = {
		{.method = "GET", .pattern = "/healthz", .fn = healthz},
		{.method = "GET", .pattern = "/readyz", .fn = readyz},
		{.method = "GET", .pattern = "/metrics", .fn = metrics},
	};
	static const struct gaz_http_routes table = {.routes = routes, .nroutes = 3,
						     .idle_timeout_ms = 30000};
	int fd = (int)(intptr_t)arg;

	gaz_http_serve_conn(fd, NULL, &table);
	close(fd);
	atomic_fetch_sub(&http_conns, 1);
	return NULL;
}

static void *http_accept(void *arg)
{
	int lfd = (int)(intptr_t)arg;

	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		pthread_t t;
		pthread_attr_t a;
		if (fd < 0) { /* EMFILE and friends: do not spin */
			struct timespec ts = {0, 100 * 1000000L};
			nanosleep(&ts, NULL);
			continue;
		}
		if (atomic_fetch_add(&http_conns, 1) >= HTTP_CONNS_MAX) {
			atomic_fetch_sub(&http_conns, 1);
			close(fd);
			continue;
		}
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&a, 256 << 10);
		if (pthread_create(&t, &a, http_conn, (void *)(intptr_t)fd)) {
			close(fd);
			atomic_fetch_sub(&http_conns, 1);
		}
		pthread_attr_destroy(&a);
	}
	return NULL;
}

/* Binds "host:port" (empty host: every address) and starts accepting. */
static int http_start(const char *address, struct gaz_status *st)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE}, *ai = NULL;
	const char *colon = strrchr(address, ':');
	char host[256] = "";
	int fd = -1, one = 1;
	pthread_t t;

	if (!colon)
		return gaz_status_set(st, GAZ_EINVAL, "--http.address %s: want host:port", address);
	snprintf(host, sizeof(host), "%.*s", (int)(colon - address), address);
	if (getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &ai))
		return gaz_status_set(st, GAZ_EINVAL, "--http.address %s: cannot resolve", address);
	if ((fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 64)) {
		gaz_status_set(st, GAZ_EIO, "listening on %s: %m", address);
		freeaddrinfo(ai);
		if (fd >= 0)
			close(fd);
		return GAZ_EIO;
	}
	freeaddrinfo(ai);
	if (pthread_create(&t, NULL, http_accept, (void *)(intptr_t)fd)) {
		close(fd);
		return gaz_status_set(st, GAZ_ENOMEM, "starting the HTTP thread failed");
	}
	pthread_detach(t);
	gaz_info("serving HTTP", "address=%s", address);
	return 0;
}

/* ---- informer callback and worker ---------------------------------------------- */

static bool same_str(const json_t *a, const json_t *b)
{
	return json_equal((json_t *)a, (json_t *)b) || (!a && !b);
}

/* Status-only changes (our own writes, mostly) need no reconcile. */
static bool needs_reconcile(const json_t *old, const json_t *obj)
{
	const json_t *mo = json_object_get(old, "metadata"), *mn = json_object_get(obj, "metadata");

	if (!old || !obj)
		return true;
	return !same_str(json_object_get(mo, "generation"), json_object_get(mn, "generation")) ||
	       !same_str(json_object_get(mo, "deletionTimestamp"), json_object_get(mn, "deletionTimestamp")) ||
	       !same_str(json_object_get(mo, "finalizers"), json_object_get(mn, "finalizers"));
}

static void on_change(void *arg, const char *key, const json_t *old, const json_t *obj)
{
	struct gaz_op *o = arg;
	const char *name = json_string_value(json_object_get(json_object_get(obj ? obj : old, "spec"), "name"));

	if (!needs_reconcile(old, obj))
		return;
	gaz_queue_add_after(o->queue, key, 0);
	/* Who owns a journal can change with any claimant's arrival or exit. */
	if (name && (!old || !obj || json_object_get(json_object_get(obj, "metadata"), "deletionTimestamp")))
		gaz_journal_enqueue_related(o, name, key);
}

static void enqueue_all(struct gaz_op *o)
{
	json_t *all = gaz_informer_snapshot(o->journals), *v;
	const char *k;

	json_object_foreach(all, k, v)
		gaz_queue_add_after(o->queue, k, 0);
	json_decref(all);
}

static void *worker(void *arg)
{
	struct gaz_op *o = arg;
	int64_t next_resync = gaz_mono_ns() + o->cfg.resync_ns;

	atomic_store(&o->worker_alive, true);
	while (!atomic_load(&o->stop)) {
		if (!atomic_load(&o->leading) || !gaz_informer_synced(o->journals) ||
		    !gaz_informer_synced(o->shards)) {
			struct timespec ts = {0, 100 * 1000000L};
			nanosleep(&ts, NULL);
			continue;
		}
		if (gaz_mono_ns() >= next_resync) {
			enqueue_all(o);
			gaz_shard_enqueue_all(o);
			next_resync = gaz_mono_ns() + o->cfg.resync_ns;
		}
		char *key = gaz_queue_take(o->queue, 200);
		if (!key)
			continue;
		int64_t t0 = gaz_mono_ns(), requeue = 0;
		int rc = strncmp(key, GAZ_OP_SHARD_KEY, strlen(GAZ_OP_SHARD_KEY))
				 ? gaz_journal_reconcile(o, key, &requeue)
				 : gaz_shard_reconcile(o, key, &requeue);
		gaz_metric_observe(gaz_metric_with(o->m_duration), (double)(gaz_mono_ns() - t0) / 1e9);
		gaz_metric_inc(gaz_metric_with(o->m_reconciles, rc ? "error" : requeue ? "requeue" : "ok"));
		if (requeue)
			gaz_queue_add_after(o->queue, key, requeue);
		free(key);
	}
	atomic_store(&o->worker_alive, false);
	return NULL;
}

/* ---- start-up ----------------------------------------------------------------------- */

static int connect_kube(struct gaz_op *o, struct gaz_status *st)
{
	struct gaz_kube_config kc = {0};
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	int rc;

	if (!o->cfg.kubeconfig[0] && host && *host)
		rc = gaz_kube_config_in_cluster(o->cfg.sa_dir, &kc, st);
	else
		rc = gaz_kube_config_load(o->cfg.kubeconfig, o->cfg.kube_context, &kc, st);
	if (rc)
		return rc;
	gaz_info("kubernetes API", "server=%s namespace=%s", kc.server, kc.namespace ? kc.namespace : "");
	o->kube = gaz_kube_new(&kc, "gazette-operator/" GAZ_OP_VERSION, 30000, st);
	gaz_kube_config_release(&kc);
	return o->kube ? 0 : st->code;
}

static int configure(struct gaz_op *o, struct gaz_status *st)
{
	char host[256] = "localhost";
	const char *p = o->cfg.etcd_prefix;

	if (p[0] != '/' || p[strlen(p) - 1] == '/' || strstr(p, "//"))
		return gaz_status_set(st, GAZ_EINVAL, "--etcd.prefix %s must be absolute, without a trailing '/'", p);
	if (o->cfg.resync_ns < GAZ_NS_PER_S)
		return gaz_status_set(st, GAZ_EINVAL, "--resync must be at least 1s");
	if (o->cfg.broker_auth_keys[0]) { /* bad keys fail the start, not each call */
		struct gaz_auth *a = NULL;
		int rc = gaz_auth_new(o->cfg.broker_auth_keys, &a, st);
		gaz_auth_free(a);
		if (rc) {
			gaz_status_prefix(st, "--broker.auth-keys: ");
			return rc;
		}
		if (o->cfg.broker_auth_token[0])
			gaz_warn("--broker.auth-token is ignored: --broker.auth-keys signs each call", NULL);
	}
	if (!o->cfg.identity[0]) {
		gethostname(host, sizeof(host) - 1);
		free(o->cfg.identity);
		if (asprintf(&o->cfg.identity, "%s_%d", host, (int)getpid()) < 0)
			return GAZ_ENOMEM;
	}
	if (!o->cfg.lease_namespace[0]) {
		const char *ns = gaz_kube_namespace(o->kube);
		free(o->cfg.lease_namespace);
		o->cfg.lease_namespace = strdup(ns ? ns : "default");
	}
	o->m_reconciles = gaz_metrics_counter(NULL, "gazette_operator_reconciles_total", "JournalSpec reconciles by result", "result");
	o->m_writes = gaz_metrics_counter(NULL, "gazette_operator_etcd_writes_total", "Writes of journal specs to etcd by reason", "reason");
	o->m_duration = gaz_metrics_histogram(NULL, "gazette_operator_reconcile_seconds", "Time of one reconcile", NULL, NULL, 0);
	gaz_metrics_process(NULL, NULL);
	return 0;
}

static int start(struct gaz_op *o, pthread_t *wt, pthread_t *et, struct gaz_status *st)
{
	struct gaz_informer_opts io = {.api_path = GAZ_OP_API_PATH, .plural = "journalspecs",
				       .namespace = o->cfg.namespace,
				       .watch_timeout_s = o->cfg.watch_timeout_ns / GAZ_NS_PER_S,
				       .on_change = on_change, .arg = o};
	int rc;

	if ((rc = connect_kube(o, st)) || (rc = configure(o, st)))
		return rc;
	struct gaz_rpc_tls tls = {o->cfg.etcd_cert_file, o->cfg.etcd_cert_key_file,
				  o->cfg.etcd_trusted_ca_file};

	if (!(o->etcd = gaz_etcd_new_tls(o->cfg.etcd_address, 10000, &tls, st)))
		return st->code ? st->code : GAZ_EINVAL;
	if (!(o->queue = gaz_queue_new(QUEUE_MAX)))
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	io.kube = o->kube;
	if (!(o->journals = gaz_informer_start(&io, st)))
		return st->code;
	if ((rc = gaz_shard_informer_start(o, st)))
		return rc;
	if (drain_flags.selector[0]) {
		struct gaz_drain_config dc = {.selector = drain_flags.selector,
					      .namespace = drain_flags.namespace, .pdb_name = drain_flags.pdb,
					      .finalizer = drain_flags.finalizer,
					      .max_replication = drain_flags.max_replication,
					      .interval_ns = drain_flags.interval_ns};
		if (!(drain = gaz_drain_start(o, &dc, st)))
			return st->code;
	}
	/* After the informers and the drain exist: readyz reads them. */
	if ((rc = http_start(o->cfg.http_address, st)))
		return rc;
	atomic_store(&o->leading, !o->cfg.leader_elect);
	if (o->cfg.leader_elect && pthread_create(et, NULL, gaz_election_run, o))
		return gaz_status_set(st, GAZ_ENOMEM, "starting the election thread failed");
	if (pthread_create(wt, NULL, worker, o)) {
		if (o->cfg.leader_elect) {
			atomic_store(&o->stop, true);
			pthread_join(*et, NULL);
		}
		return gaz_status_set(st, GAZ_ENOMEM, "starting the worker thread failed");
	}
	gaz_info("gazette-operator started", "etcd=%s prefix=%s broker=%s broker_auth=%s namespace=%s resync=%llds",
		 o->cfg.etcd_address, o->cfg.etcd_prefix, o->cfg.broker_address,
		 o->cfg.broker_auth_keys[0] ? "keys" : o->cfg.broker_auth_token[0] ? "token" : "none",
		 o->cfg.namespace[0] ? o->cfg.namespace : "(all)",
		 (long long)(o->cfg.resync_ns / GAZ_NS_PER_S));
	return 0;
}

/* release frees what start made, in any state start left it; each free
 * takes NULL. The caller has stopped the worker and election threads. */
static void release(struct gaz_op *o, struct gaz_flags *f)
{
	pthread_mutex_lock(&ready_mu); /* readyz lets go of the informers */
	pthread_mutex_unlock(&ready_mu);
	gaz_drain_stop(drain);
	drain = NULL;
	gaz_informer_stop(o->journals);
	gaz_informer_stop(o->shards);
	gaz_etcd_free(o->etcd);
	gaz_kube_free(o->kube);
	gaz_queue_free(o->queue);
	gaz_flags_release(f);
}

int main(int argc, char **argv)
{
	struct gaz_flags f = {.prog = "gazette-operator", .table = flag_table,
			      .description = "Keeps Gazette journals and consumer shards in etcd in line with JournalSpec and ShardSpec resources."};
	struct gaz_status st = {0};
	pthread_t wt, et;
	sigset_t sigs;
	int rc, sig;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	rc = gaz_flags_parse(&f, argc - 1, argv + 1, &st);
	if (rc == GAZ_FLAGS_HELP) {
		gaz_flags_release(&f); /* the help was printed; leak nothing */
		return 0;
	}
	if (rc || f.npos || gaz_log_setup(op.cfg.log_level, op.cfg.log_format)) {
		fprintf(stderr, "gazette-operator: %s\n", rc ? st.msg : "unexpected arguments");
		return 2;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if ((rc = gaz_rpc_init(1)) || (rc = start(&op, &wt, &et, &st))) {
		gaz_log_emit(GAZ_LOG_FATAL, "start-up failed", "err=%s", st.msg);
		/* No thread of ours runs (start joins what it began); free what it made. */
		release(&op, &f);
		return 1;
	}
	sigwait(&sigs, &sig);
	gaz_info("signalled; stopping", "signal=%d", sig);
	atomic_store(&op.stop, true);
	gaz_queue_shutdown(op.queue);
	pthread_join(wt, NULL);
	if (op.cfg.leader_elect)
		pthread_join(et, NULL);
	release(&op, &f);
	gaz_info("goodbye", NULL);
	return 0;
}
