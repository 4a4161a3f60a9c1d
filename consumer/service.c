/*
 * service.c - the consumer process (runtime.h's gaz_consumer_main):
 * Gazette's runconsumer flags, the etcd session (a lease kept alive, the
 * ConsumerSpec under <prefix>/members/<zone>#<id> on it), the keyspace of
 * the application's prefix with Gazette's consumer decoders, the allocator
 * over shards (the brokers' code, lib/keyspace/allocator.c), the
 * consumer.Shard service and HTTP diagnostics on one port, and the exit:
 * on SIGTERM the member is marked exiting, the allocator moves its shards
 * to other members, and the process leaves once it holds none (Gazette's
 * allocator session), or at --consumer.exit-timeout.
 *
 * The application's init runs on the main thread before the server
 * starts, with the process's journal client made; its methods are
 * registered on the server beside the Shard service, each bound to the
 * process (struct gaz_consumer_app_method); its stop runs once the server
 * has shut down and the client is cancelled, before the client is freed.
 *
 * Locking: runtime_int.h. The process's struct is filled by the main
 * thread before any other thread starts; later, only its atomics and
 * what consumer->mu guards change.
 */
#include "consumer/runtime_int.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/http.h"
#include "common/log.h"
#include "common/metrics.h"
#include "keyspace/member.h"
#include "protocol/auth.h"
#include "protocol/validate.h"

static struct gaz_consumer consumer;

#define CONSUMER_FLAG(n, e, t, d, h, p) \
	{.name = "consumer." n, .env = "CONSUMER_" e, .type = t, .def = d, .help = h, .ptr = p, .group = "Consumer"}
#define BROKER_FLAG(n, e, t, d, h, p) \
	{.name = "broker." n, .env = "BROKER_" e, .type = t, .def = d, .help = h, .ptr = p, .group = "Broker"}

/* Gazette's runconsumer BaseConfig, in its order. */
static const struct gaz_flag runtime_flags[] = {
	CONSUMER_FLAG("zone", "ZONE", GAZ_FLAG_STRING, "local", "Availability zone within which this process is running", &consumer.cfg.zone),
	CONSUMER_FLAG("id", "ID", GAZ_FLAG_STRING, "", "Unique ID of this process (random if empty)", &consumer.cfg.id),
	CONSUMER_FLAG("host", "HOST", GAZ_FLAG_STRING, "", "Addressable, advertised hostname or IP of this process (OS hostname if empty)", &consumer.cfg.host),
	CONSUMER_FLAG("port", "PORT", GAZ_FLAG_STRING, "", "Service port for HTTP and gRPC requests (random if empty or 0), or unix:///path", &consumer.cfg.port),
	CONSUMER_FLAG("limit", "LIMIT", GAZ_FLAG_INT64, "32", "Maximum number of Shards this consumer process will allocate", &consumer.cfg.limit),
	CONSUMER_FLAG("max-hot-standbys", "MAX_HOT_STANDBYS", GAZ_FLAG_INT64, "3", "Maximum effective hot standbys of any one shard, which upper-bounds its stated hot-standbys.", &consumer.cfg.max_hot_standbys),
	CONSUMER_FLAG("watch-delay", "WATCH_DELAY", GAZ_FLAG_DURATION, "30ms", "Delay applied to the application of watched Etcd events. Larger values amortize the processing of fast-changing Etcd keys.", &consumer.cfg.watch_delay_ns),
	CONSUMER_FLAG("auth-keys", "AUTH_KEYS", GAZ_FLAG_STRING, "", "Whitespace or comma separated, base64-encoded keys used to sign (first key) and verify (all keys) Authorization tokens.", &consumer.cfg.auth_keys),
	CONSUMER_FLAG("exit-timeout", "EXIT_TIMEOUT", GAZ_FLAG_DURATION, "2m", "Bound on a graceful exit's wait for other members to take over this process's shards (gazette-c)", &consumer.cfg.exit_timeout_ns),
	CONSUMER_FLAG("server-cert-file", "SERVER_CERT_FILE", GAZ_FLAG_STRING, "", "Path to the server TLS certificate. This option toggles whether TLS is used. If absent, all other TLS settings are ignored.", &consumer.cfg.server_cert_file),
	CONSUMER_FLAG("server-cert-key-file", "SERVER_CERT_KEY_FILE", GAZ_FLAG_STRING, "", "Path to the server TLS private key", &consumer.cfg.server_cert_key_file),
	CONSUMER_FLAG("server-ca-file", "SERVER_CA_FILE", GAZ_FLAG_STRING, "", "Path to the trusted CA for server verification of client certificates. When present, client certificates are required and verified against this CA.", &consumer.cfg.server_ca_file),
	CONSUMER_FLAG("peer-cert-file", "PEER_CERT_FILE", GAZ_FLAG_STRING, "", "Path to the client TLS certificate for peer-to-peer requests", &consumer.cfg.peer_cert_file),
	CONSUMER_FLAG("peer-cert-key-file", "PEER_CERT_KEY_FILE", GAZ_FLAG_STRING, "", "Path to the client TLS private key for peer-to-peer requests", &consumer.cfg.peer_cert_key_file),
	CONSUMER_FLAG("peer-ca-file", "PEER_CA_FILE", GAZ_FLAG_STRING, "", "Path to the trusted CA for client verification of peer server certificates. When absent, the system CA pool is used instead.", &consumer.cfg.peer_ca_file),
	BROKER_FLAG("address", "ADDRESS", GAZ_FLAG_STRING, "http://localhost:8080", "Service address endpoint", &consumer.cfg.broker_address),
	BROKER_FLAG("auth-keys", "AUTH_KEYS", GAZ_FLAG_STRING, "", "Whitespace or comma separated, base64-encoded keys. The first key is used to sign Authorization tokens.", &consumer.cfg.broker_auth_keys),
	BROKER_FLAG("auth-token", "AUTH_TOKEN", GAZ_FLAG_STRING, "", "Bearer token to use for authentication.", &consumer.cfg.broker_auth_token),
	BROKER_FLAG("cert-file", "CERT_FILE", GAZ_FLAG_STRING, "", "Path to the client TLS certificate", &consumer.cfg.broker_cert_file),
	BROKER_FLAG("cert-key-file", "CERT_KEY_FILE", GAZ_FLAG_STRING, "", "Path to the client TLS private key", &consumer.cfg.broker_cert_key_file),
	BROKER_FLAG("trusted-ca-file", "TRUSTED_CA_FILE", GAZ_FLAG_STRING, "", "Path to the trusted CA for client verification of server certificates", &consumer.cfg.broker_trusted_ca_file),
	BROKER_FLAG("cache.size", "CACHE_SIZE", GAZ_FLAG_INT64, "0", "Size of client route cache. If <= zero, no cache is used (server always proxies)", &consumer.cfg.broker_cache_size),
	BROKER_FLAG("cache.ttl", "CACHE_TTL", GAZ_FLAG_DURATION, "1m", "Time-to-live of route cache entries.", &consumer.cfg.broker_cache_ttl_ns),
	BROKER_FLAG("file-root", "FILE_ROOT", GAZ_FLAG_STRING, "", "Local path which roots file:// fragment URLs which are being directly read (optional)", &consumer.cfg.broker_file_root),
	{.name = "etcd.address", .env = "ETCD_ADDRESS", .type = GAZ_FLAG_STRING, .def = "http://localhost:2379", .help = "Etcd service address endpoint", .ptr = &consumer.cfg.etcd_address, .group = "Etcd"},
	{.name = "etcd.cert-file", .env = "ETCD_CERT_FILE", .type = GAZ_FLAG_STRING, .def = "", .help = "Path to the client TLS certificate", .ptr = &consumer.cfg.etcd_cert_file, .group = "Etcd"},
	{.name = "etcd.cert-key-file", .env = "ETCD_CERT_KEY_FILE", .type = GAZ_FLAG_STRING, .def = "", .help = "Path to the client TLS private key", .ptr = &consumer.cfg.etcd_cert_key_file, .group = "Etcd"},
	{.name = "etcd.trusted-ca-file", .env = "ETCD_TRUSTED_CA_FILE", .type = GAZ_FLAG_STRING, .def = "", .help = "Path to the trusted CA for client verification of server certificates", .ptr = &consumer.cfg.etcd_trusted_ca_file, .group = "Etcd"},
	{.name = "etcd.lease", .env = "ETCD_LEASE_TTL", .type = GAZ_FLAG_DURATION, .def = "20s", .help = "Time-to-live of Etcd lease", .ptr = &consumer.cfg.etcd_lease_ns, .group = "Etcd"},
	{.name = "etcd.prefix", .env = "ETCD_PREFIX", .type = GAZ_FLAG_STRING, .def = "", .help = "Etcd prefix for the consumer group (default /gazette/consumers/<application>)", .ptr = &consumer.cfg.etcd_prefix, .group = "Etcd"},
	{.name = "log.level", .env = "LOG_LEVEL", .type = GAZ_FLAG_STRING, .def = "warn", .help = "Logging level", .ptr = &consumer.cfg.log_level, .group = "Logging", .choices = "trace|debug|info|warn|error|fatal"},
	{.name = "log.format", .env = "LOG_FORMAT", .type = GAZ_FLAG_STRING, .def = "text", .help = "Logging output format", .ptr = &consumer.cfg.log_format, .group = "Logging", .choices = "json|text|color"},
	{0},
};

/* ---- configuration ------------------------------------------------------ */

/* Gazette names an unset --consumer.id after the host and a random tail;
 * any token does: ours is "<host>-<hex>". */
/* configure_tls checks the TLS flags as the broker's (broker/main.c):
 * pairs given together, a server CA only with a server certificate, the
 * peer files loadable; TLS on a unix socket is ignored, as Gazette. */
static int configure_tls(struct gaz_consumer *c, struct gaz_status *st)
{
	const struct gaz_consumer_cfg *f = &c->cfg;
	const struct gaz_rpc_tls_flags t = {f->server_cert_file, f->server_cert_key_file, f->server_ca_file,
					    f->peer_cert_file, f->peer_cert_key_file, f->peer_ca_file};

	if (gaz_rpc_tls_flags_check("consumer", &t, f->port, &c->peer_tls, &c->tls, st))
		return GAZ_EINVAL;
	return 0;
}

static int configure(struct gaz_consumer *c, struct gaz_status *st)
{
	struct gaz_consumer_cfg *cfg = &c->cfg;
	char host[256];

	if (!cfg->host[0] && gethostname(host, sizeof(host)) == 0) {
		free(cfg->host);
		cfg->host = strdup(host);
	}
	if (!cfg->id[0]) {
		char *id = NULL;
		unsigned seed = (unsigned)(gaz_wall_ns() ^ getpid());
		if (asprintf(&id, "%s-%06x", cfg->host ? cfg->host : "consumer", rand_r(&seed) & 0xffffff) < 0)
			return GAZ_ENOMEM;
		free(cfg->id);
		cfg->id = id;
	}
	Protocol__ProcessSpec__ID id = PROTOCOL__PROCESS_SPEC__ID__INIT;
	id.zone = cfg->zone;
	id.suffix = cfg->id;
	if (gaz_validate_process_id(&id, st))
		return GAZ_EINVAL;
	if (cfg->limit < 0 || cfg->limit > UINT32_MAX)
		return gaz_status_set(st, GAZ_EINVAL, "--consumer.limit %lld out of range", (long long)cfg->limit);
	if (cfg->max_hot_standbys < 0 || cfg->max_hot_standbys > UINT32_MAX)
		return gaz_status_set(st, GAZ_EINVAL, "--consumer.max-hot-standbys %lld out of range",
				      (long long)cfg->max_hot_standbys);
	if (cfg->etcd_prefix[0]) {
		c->root = strdup(cfg->etcd_prefix);
	} else if (asprintf(&c->root, "/gazette/consumers/%s", c->app->name) < 0) {
		c->root = NULL;
	}
	if (!c->root)
		return GAZ_ENOMEM;
	size_t n = strlen(c->root);
	while (n > 1 && c->root[n - 1] == '/')
		c->root[--n] = '\0'; /* "/gazette/consumers/x/" names the same group */
	if (c->root[0] != '/' || n < 2)
		return gaz_status_set(st, GAZ_EINVAL, "--etcd.prefix %s is not an absolute path", cfg->etcd_prefix);
	if (cfg->auth_keys[0] && gaz_auth_new(cfg->auth_keys, &c->auth, st)) {
		gaz_status_prefix(st, "--consumer.auth-keys: ");
		return GAZ_EINVAL;
	}
	if (cfg->broker_auth_keys[0]) { /* checked here, used by every client made */
		struct gaz_auth *a = NULL;
		int rc = gaz_auth_new(cfg->broker_auth_keys, &a, st);
		gaz_auth_free(a);
		if (rc) {
			gaz_status_prefix(st, "--broker.auth-keys: ");
			return GAZ_EINVAL;
		}
	}
	c->member_key = gaz_ks_member_key(c->root, cfg->zone, cfg->id);
	c->type = c->app->type ? *c->app->type : gaz_json_message_type(NULL);
	c->publish_type = c->app->publish_type ? *c->app->publish_type : c->type;
	if (!c->member_key)
		return GAZ_ENOMEM;
	return configure_tls(c, st);
}

struct gaz_client_opts gaz_consumer_client_opts(const struct gaz_consumer *c)
{
	return (struct gaz_client_opts){
		.broker_address = c->cfg.broker_address,
		.zone = c->cfg.zone,
		.file_root = c->cfg.broker_file_root[0] ? c->cfg.broker_file_root : NULL,
		.auth_keys = c->cfg.broker_auth_keys,
		.auth_token = c->cfg.broker_auth_token,
		/* Gazette's --broker.cache.size 0: no cache */
		.route_cache_size = c->cfg.broker_cache_size > 0 ? c->cfg.broker_cache_size : -1,
		.route_cache_ttl_ms = c->cfg.broker_cache_ttl_ns / GAZ_NS_PER_MS,
		.cert_file = c->cfg.broker_cert_file,
		.cert_key_file = c->cfg.broker_cert_key_file,
		.trusted_ca_file = c->cfg.broker_trusted_ca_file,
	};
}

/* ---- for the application (runtime.h) ------------------------------------ */

struct gaz_client *gaz_consumer_client(struct gaz_consumer *c)
{
	return c->client;
}

int gaz_consumer_sleep(struct gaz_consumer *c, int64_t ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
	int64_t deadline = gaz_deadline_in(ms);

	for (;;) {
		if (sigtimedwait(c->sigs, NULL, &ts) > 0)
			return GAZ_ECANCELLED;
		int64_t left = deadline - gaz_mono_ns();
		if (left <= 0)
			return 0;
		ts = (struct timespec){.tv_sec = left / GAZ_NS_PER_S, .tv_nsec = left % GAZ_NS_PER_S};
	}
}

static void app_method(struct gaz_rpc_call *call, void *arg)
{
	const struct gaz_consumer_app_method *am = arg;

	am->m->fn(am->c->app->arg, am->c, call);
}

/* The application's methods, on the server beside the Shard service. */
static int register_app_methods(struct gaz_consumer *c, struct gaz_status *st)
{
	const struct gaz_consumer_method *m = c->app->methods;
	size_t n = 0;

	while (m && m[n].path)
		n++;
	if (!n)
		return 0;
	if (!(c->app_methods = calloc(n, sizeof(*c->app_methods))))
		return gaz_status_set(st, GAZ_ENOMEM, "registering the application's methods");
	for (size_t i = 0; i < n; i++) {
		c->app_methods[i] = (struct gaz_consumer_app_method){c, &m[i]};
		int rc = m[i].fn ? gaz_rpc_server_register(c->srv, m[i].path, app_method, &c->app_methods[i]) : GAZ_EINVAL;
		if (rc == GAZ_EINVAL)
			return gaz_status_set(st, rc, "registering the application's method %s: no handler, a malformed path, "
					      "or one already served", m[i].path);
		if (rc)
			return gaz_status_set(st, rc, "registering the application's method %s", m[i].path);
	}
	return 0;
}

/* ---- HTTP diagnostics --------------------------------------------------- */

static int http_ready(struct gaz_http_req *req, struct gaz_http_resp *resp, void *arg)
{
	struct gaz_consumer *c = arg;

	(void)req;
	if (atomic_load(&c->exiting))
		return gaz_http_resp_error(resp, 503, "exiting");
	if (!atomic_load(&c->announced))
		return gaz_http_resp_error(resp, 503, "not announced yet");
	gaz_http_resp_status(resp, 200);
	return gaz_http_resp_send(resp, "", 0);
}

static int http_metrics(struct gaz_http_req *req, struct gaz_http_resp *resp, void *arg)
{
	struct gaz_status st = {0};
	char *out = NULL;
	size_t len = 0;
	int rc;

	(void)req, (void)arg;
	if (gaz_metrics_render(gaz_metrics_default(), &out, &len, &st))
		return gaz_http_resp_error(resp, 500, "%s", st.msg);
	gaz_http_resp_status(resp, 200);
	gaz_http_resp_header(resp, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	rc = gaz_http_resp_send(resp, out, len);
	free(out);
	return rc;
}

static void http_conn(int fd, const char *peer, void *arg)
{
	const struct gaz_http_route routes[] = {
		{"GET", "/debug/ready", http_ready, arg},
		{"GET", "/debug/metrics", http_metrics, arg},
	};
	const struct gaz_http_routes r = {.routes = routes, .nroutes = 2};

	gaz_http_serve_conn(fd, peer, &r);
	close(fd);
}

/* ---- etcd session --------------------------------------------------------- */

static uint8_t *consumer_spec_pack(struct gaz_consumer *c, bool exiting, size_t *len)
{
	Consumer__ConsumerSpec spec = CONSUMER__CONSUMER_SPEC__INIT;
	Protocol__ProcessSpec ps = PROTOCOL__PROCESS_SPEC__INIT;
	Protocol__ProcessSpec__ID id = PROTOCOL__PROCESS_SPEC__ID__INIT;
	uint8_t *buf;

	id.zone = c->cfg.zone;
	id.suffix = c->cfg.id;
	ps.id = &id;
	ps.endpoint = c->endpoint;
	spec.process_spec = &ps;
	spec.shard_limit = (uint32_t)c->cfg.limit;
	spec.exiting = exiting;
	*len = consumer__consumer_spec__get_packed_size(&spec);
	if ((buf = malloc(*len ? *len : 1)))
		consumer__consumer_spec__pack(&spec, buf);
	return buf;
}

static void on_lease_lost(void *arg, const char *why)
{
	struct gaz_consumer *c = arg;

	gaz_error("unable to keep member lease alive", "err=%s", why);
	atomic_store(&c->lease_lost, true);
	kill(getpid(), SIGTERM);
}

static int announce(struct gaz_consumer *c, sigset_t *sigs, struct gaz_status *st)
{
	int64_t ttl_s = c->cfg.etcd_lease_ns / GAZ_NS_PER_S;
	struct timespec zero = {0, 0};
	size_t len;
	uint8_t *val;
	int rc;

	if (ttl_s < 1)
		ttl_s = 1;
	if ((rc = gaz_etcd_lease_grant(c->etcd, ttl_s, &c->lease_id, st)))
		return rc;
	c->keepalive = gaz_etcd_keepalive_start(c->etcd, c->lease_id, ttl_s, on_lease_lost, c, st);
	if (!c->keepalive)
		return st->code ? st->code : GAZ_EUNAVAIL;
	if (!(val = consumer_spec_pack(c, false, &len)))
		return gaz_status_set(st, GAZ_ENOMEM, "announce: out of memory");
	while ((rc = gaz_member_put_once(c->etcd, c->member_key, c->lease_id, val, len, st)) == GAZ_EEXIST) {
		/* A previous process of our id holds the key until its lease
		 * ends; Gazette retries too. */
		gaz_warn("member key already exists; retrying", "key=%s", c->member_key);
		gaz_status_clear(st);
		for (int i = 0; i < 20; i++) {
			if (sigtimedwait(sigs, NULL, &zero) > 0) {
				free(val);
				return gaz_status_set(st, GAZ_ECANCELLED, "signalled while announcing");
			}
			usleep(500 * 1000);
		}
	}
	free(val);
	if (!rc)
		atomic_store(&c->announced, true);
	return rc;
}

static int announce_exiting(struct gaz_consumer *c, struct gaz_status *st)
{
	size_t len;
	uint8_t *val = consumer_spec_pack(c, true, &len);
	int rc;

	if (!val)
		return gaz_status_set(st, GAZ_ENOMEM, "announce exiting: out of memory");
	rc = gaz_member_update(c->etcd, c->member_key, val, len, st);
	free(val);
	return rc;
}

/* ---- the allocator over shards ------------------------------------------ */

/* Gazette's ShardSpec.DesiredReplication: none for a disabled shard, else
 * the primary and its hot standbys, at most --consumer.max-hot-standbys. */
static int64_t shard_desired(void *arg, const struct gaz_ks_value *item)
{
	const struct gaz_consumer *c = arg;
	int64_t standbys = item->shard->hot_standbys;

	if (item->shard->disable)
		return 0;
	if (standbys > c->cfg.max_hot_standbys)
		standbys = c->cfg.max_hot_standbys;
	return 1 + standbys;
}

/* Gazette's ShardIsConsistent: a standby or primary is ready to take
 * over; an idle or backfilling one is not; a failed one is when the
 * primary has failed too (so a failed primary may be replaced). */
static bool shard_consistent(void *arg, const struct gaz_ks_value *const *assigns, size_t n, size_t i,
			     const struct gaz_route *route)
{
	Consumer__ReplicaStatus__Code code = assigns[i]->status ? assigns[i]->status->code : 0;

	(void)arg, (void)route;
	switch (code) {
	case CONSUMER__REPLICA_STATUS__CODE__STANDBY:
	case CONSUMER__REPLICA_STATUS__CODE__PRIMARY:
		return true;
	case CONSUMER__REPLICA_STATUS__CODE__FAILED:
		for (size_t k = 0; k < n; k++)
			if (assigns[k]->slot == 0 && assigns[k]->status &&
			    assigns[k]->status->code == CONSUMER__REPLICA_STATUS__CODE__FAILED)
				return true;
		return false;
	default:
		return false;
	}
}

static void on_keyspace(void *arg)
{
	struct gaz_consumer *c = arg;

	gaz_allocator_wake(c->allocator);
	gaz_consumer_resolver_wake(c);
}

/* ---- start and exit ------------------------------------------------------ */

static int start_serving(struct gaz_consumer *c, struct gaz_rpc_listener **listener, struct gaz_status *st)
{
	char addr[300];
	int port = 0;

	if (!(c->srv = gaz_rpc_server_new(NULL)))
		return gaz_status_set(st, GAZ_ENOMEM, "creating the gRPC server");
	if (gaz_consumer_register_api(c))
		return gaz_status_set(st, GAZ_ENOMEM, "registering the Shard service");
	int rc = register_app_methods(c, st);
	if (rc)
		return rc;
	if (gaz_rpc_server_start(c->srv, NULL, NULL))
		return gaz_status_set(st, GAZ_EIO, "starting the gRPC server");
	if (!strncmp(c->cfg.port, "unix://", 7))
		snprintf(addr, sizeof(addr), "%s", c->cfg.port);
	else
		snprintf(addr, sizeof(addr), "0.0.0.0:%s", c->cfg.port[0] ? c->cfg.port : "0");
	struct gaz_rpc_tls tls = {c->cfg.server_cert_file, c->cfg.server_cert_key_file,
				  c->cfg.server_ca_file};
	if (!(*listener = gaz_rpc_listen_tls(addr, c->srv, http_conn, c, c->tls ? &tls : NULL, &port,
					     st)))
		return st->code ? st->code : GAZ_EIO;
	if (strncmp(c->cfg.port, "unix://", 7)) {
		/* https:// under TLS, as Gazette's server.New advertises. */
		if (asprintf(&c->endpoint, "%s://%s:%d", c->tls ? "https" : "http", c->cfg.host, port) < 0)
			return GAZ_ENOMEM;
	} else if (asprintf(&c->endpoint, "unix://%s%s", c->cfg.host, c->cfg.port + 7) < 0) {
		return GAZ_ENOMEM;
	}
	return 0;
}

static int start_keyspace(struct gaz_consumer *c, sigset_t *sigs, struct gaz_status *st)
{
	struct timespec zero = {0, 0};
	int rc;

	struct gaz_rpc_tls tls = {c->cfg.etcd_cert_file, c->cfg.etcd_cert_key_file,
				  c->cfg.etcd_trusted_ca_file};

	c->etcd = gaz_etcd_new_tls(c->cfg.etcd_address, c->cfg.etcd_lease_ns / GAZ_NS_PER_MS / 4 + 1000,
				   &tls, st);
	if (!c->etcd)
		return st->code ? st->code : GAZ_EINVAL;
	if (!(c->ks = gaz_shards_keyspace_new(c->etcd, c->root)))
		return gaz_status_set(st, GAZ_ENOMEM, "creating the keyspace");
	gaz_keyspace_set_change_log(c->ks, 1 << 16);
	while ((rc = gaz_keyspace_load(c->ks, 0, st)) == GAZ_EUNAVAIL) {
		gaz_error("etcd is unavailable; retrying", "address=%s err=%s", c->cfg.etcd_address, st->msg);
		gaz_status_clear(st);
		if (sigtimedwait(sigs, NULL, &zero) > 0)
			return gaz_status_set(st, GAZ_ECANCELLED, "signalled while waiting for etcd");
		sleep(1);
	}
	gaz_keyspace_set_watch_delay(c->ks, c->cfg.watch_delay_ns);
	if (!rc)
		atomic_store(&c->ks_ready, true);
	return rc;
}

/* Our assignments in the keyspace now. */
static size_t assignments_held(struct gaz_consumer *c)
{
	char *prefix = NULL;
	size_t lo, hi, n = 0, zl = strlen(c->cfg.zone), il = strlen(c->cfg.id);

	if (asprintf(&prefix, "%s/assign/", c->root) < 0)
		return 1;
	gaz_keyspace_rlock(c->ks);
	gaz_keyspace_prefix(c->ks, prefix, &lo, &hi);
	for (size_t i = lo; i < hi; i++) {
		const struct gaz_ks_value *v = gaz_keyspace_at(c->ks, i)->decoded;
		n += strlen(v->zone) == zl && strlen(v->suffix) == il && !strcmp(v->zone, c->cfg.zone) &&
		     !strcmp(v->suffix, c->cfg.id);
	}
	gaz_keyspace_runlock(c->ks);
	free(prefix);
	return n;
}

/* The graceful exit: marked exiting, our shards go to other members (the
 * allocator sheds an exiting member's capacity); we leave once we hold no
 * assignment, the lease is lost, or the exit timeout passes. */
static void graceful_exit(struct gaz_consumer *c)
{
	struct gaz_status st = {0};
	int64_t deadline = gaz_mono_ns() + c->cfg.exit_timeout_ns;

	atomic_store(&c->exiting, true);
	if (atomic_load(&c->announced) && !atomic_load(&c->lease_lost)) {
		if (announce_exiting(c, &st))
			gaz_warn("marking member exiting failed", "err=%s", st.msg);
		while (assignments_held(c) && gaz_mono_ns() < deadline && !atomic_load(&c->lease_lost))
			gaz_keyspace_wait_revision(c->ks, gaz_keyspace_revision_now(c->ks) + 1, gaz_deadline_in(500));
		if (assignments_held(c))
			gaz_warn("exit timeout: leaving with shards still assigned", "shards=%zu", assignments_held(c));
	}
}

static void shutdown_all(struct gaz_consumer *c, struct gaz_rpc_listener *listener)
{
	struct gaz_status st = {0};

	gaz_allocator_stop(c->allocator);
	gaz_consumer_resolver_stop(c);
	if (listener)
		gaz_rpc_listener_close(listener);
	if (c->srv)
		gaz_rpc_server_shutdown(c->srv, 1000);
	/* No method runs now: the application lets go of the client. */
	if (c->client)
		gaz_client_cancel(c->client);
	if (c->app_inited && c->app->stop)
		c->app->stop(c->app->arg, c);
	gaz_client_free(c->client);
	c->client = NULL;
	if (c->keepalive)
		gaz_etcd_keepalive_stop(c->keepalive);
	if (c->lease_id && gaz_etcd_lease_revoke(c->etcd, c->lease_id, &st))
		gaz_warn("revoking the member lease failed", "err=%s", st.msg);
	gaz_keyspace_free(c->ks);
	gaz_allocator_free(c->allocator);
	gaz_rpc_server_free(c->srv);
	free(c->app_methods);
	gaz_auth_free(c->auth);
	c->auth = NULL;
	gaz_etcd_free(c->etcd);
	free(c->root), free(c->member_key), free(c->endpoint);
	free(c->shards);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->mu);
}

static int serve(struct gaz_consumer *c, sigset_t *sigs)
{
	struct gaz_rpc_listener *listener = NULL;
	struct gaz_status st = {0};
	pthread_condattr_t ca;
	int rc, sig = 0;

	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &ca);
	pthread_condattr_destroy(&ca);
	c->sigs = sigs;
	if ((rc = configure(c, &st)) || (rc = gaz_rpc_init(gaz_rpc_default_pollers())))
		goto fail;
	struct gaz_client_opts co = gaz_consumer_client_opts(c);
	if ((rc = gaz_client_new(&co, &c->client, &st)))
		goto fail;
	if (c->app->init && (rc = c->app->init(c->app->arg, c, &st)))
		goto fail;
	c->app_inited = true;
	if ((rc = start_serving(c, &listener, &st)) || (rc = start_keyspace(c, sigs, &st)))
		goto fail;
	struct gaz_allocator_cfg acfg = {
		.etcd = c->etcd,
		.ks = c->ks,
		.root = c->root,
		.member_key = c->member_key,
		.what = "shards",
		.ops = {shard_desired, shard_consistent, NULL, NULL},
		.arg = c,
	};
	/* Started before the member key exists, the allocator plans nothing
	 * until we are a member (and the leader). Both are started before the
	 * watch, which calls the observer that wakes them. */
	if (!(c->allocator = gaz_allocator_start(&acfg))) {
		rc = gaz_status_set(&st, GAZ_ENOMEM, "starting the allocator");
		goto fail;
	}
	if ((rc = gaz_consumer_resolver_start(c)))
		goto fail;
	gaz_keyspace_set_observer(c->ks, on_keyspace, c);
	if ((rc = gaz_keyspace_watch(c->ks, &st)) || (rc = announce(c, sigs, &st)))
		goto fail;
	gaz_allocator_wake(c->allocator);
	gaz_consumer_resolver_wake(c);
	gaz_info("consumer serving", "endpoint=%s id=%s zone=%s group=%s", c->endpoint, c->cfg.id, c->cfg.zone,
		 c->root);
	fprintf(stderr, "consumer: serving %s as %s#%s under %s\n", c->endpoint, c->cfg.zone, c->cfg.id, c->root);
	sigwait(sigs, &sig);
	gaz_info("signalled; exiting gracefully", "signal=%d", sig);
	graceful_exit(c);
	shutdown_all(c, listener);
	gaz_info("goodbye", NULL);
	return atomic_load(&c->lease_lost) ? 1 : 0;
fail:
	gaz_log_emit(GAZ_LOG_FATAL, "consumer failed to start", "err=%s", st.msg[0] ? st.msg : gaz_err_str(rc));
	atomic_store(&c->exiting, true);
	shutdown_all(c, listener);
	return 1;
}

/* ---- main ------------------------------------------------------------------ */

static const struct gaz_flags_cmd commands[] = {
	{"print-config", "Print combined configuration and exit"},
	{"serve", "Serve as Gazette consumer"},
	{0},
};

static const char serve_description[] =
	"serve a Gazette consumer with the provided configuration, until signaled to\n"
	"exit (via SIGTERM). Upon receiving a signal, the consumer will seek to discharge\n"
	"its responsible shards and will exit only when it can safely do so.\n";

/* The runtime's flags followed by the application's, in one table. */
static struct gaz_flag *flag_table(const struct gaz_consumer_app *app)
{
	size_t n = sizeof(runtime_flags) / sizeof(runtime_flags[0]) - 1, m = 0;
	struct gaz_flag *t;

	while (app->flags && app->flags[m].name)
		m++;
	if (!(t = calloc(n + m + 1, sizeof(*t))))
		return NULL;
	memcpy(t, runtime_flags, n * sizeof(*t));
	if (m)
		memcpy(t + n, app->flags, m * sizeof(*t));
	return t;
}

int gaz_consumer_main(const struct gaz_consumer_app *app, int argc, char **argv)
{
	struct gaz_flag *table = flag_table(app);
	struct gaz_flags top = {.prog = argv[0], .usage = "[OPTIONS] <print-config | serve>", .table = table,
				.commands = commands};
	struct gaz_flags f = {.prog = argv[0], .table = table};
	struct gaz_status st = {0};
	char ini[4096], ininame[256];
	sigset_t sigs;
	int rc, at = 0, cmd;

	if (!table)
		return 1;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	consumer.app = app;

	cmd = gaz_flags_find_command(&top, argc - 1, argv + 1, &at, &st);
	if (cmd < 0 || cmd == GAZ_FLAGS_HELP) {
		FILE *out = cmd == GAZ_FLAGS_HELP ? stdout : stderr;
		if (cmd != GAZ_FLAGS_HELP)
			fprintf(stderr, "%s\n\n", st.msg);
		gaz_flags_print_help(&top, out);
		free(table);
		return cmd == GAZ_FLAGS_HELP ? 0 : 1;
	}
	at++;
	memmove(argv + at, argv + at + 1, (size_t)(argc - at - 1) * sizeof(*argv));
	argc--;
	f.usage = cmd == 0 ? "[OPTIONS] print-config" : "[OPTIONS] serve";
	f.description = cmd == 0 ? NULL : serve_description;
	/* Gazette's consumers read <application>.ini (runconsumer's iniFilename). */
	snprintf(ininame, sizeof(ininame), "%s.ini", app->name);
	if (gaz_flags_find_ini(ininame, ini, sizeof(ini)) == 0)
		f.ini_path = ini;
	rc = gaz_flags_parse(&f, argc - 1, argv + 1, &st);
	if (rc == GAZ_FLAGS_HELP || rc) {
		if (rc != GAZ_FLAGS_HELP)
			fprintf(stderr, "%s\n", st.msg);
		gaz_flags_release(&f);
		free(table);
		return rc == GAZ_FLAGS_HELP ? 0 : 1;
	}
	if (cmd == 0) {
		gaz_flags_print_ini(&f, stdout);
		gaz_flags_release(&f);
		free(table);
		return 0;
	}
	gaz_log_setup(consumer.cfg.log_level, consumer.cfg.log_format);
	rc = serve(&consumer, &sigs);
	gaz_rpc_shutdown();
	gaz_flags_release(&f);
	free(table);
	return rc;
}
