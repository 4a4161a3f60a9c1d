/*
 * test_etcd.c - lib/etcd against a real etcd (no stubs).
 *
 * The shared tests use the etcd at $GAZ_TEST_ETCD ("http://127.0.0.1:P",
 * e.g. from scripts/etcd-test.sh) or, when unset, one this binary starts on
 * free loopback ports in a temp dir and kills at the end. Keys live under a
 * prefix unique to the run, so a shared etcd can be reused. The restart and
 * compaction test always runs its own private etcd, since it stops it and
 * compacts its history.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "etcd/etcd.h"
#include "keyspace/keyspace.h"
#include "rpc/rpc.h"

extern char **environ;

/* ---- a throwaway etcd ------------------------------------------------ */

struct etcd_proc {
	pid_t pid;
	int cport, pport;
	char dir[256];
	char endpoint[80];
};

static int free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* etcd_env copies the environment without ETCD_* variables: etcd reads
 * them as flags, and ETCD_NAME next to --name is fatal (test-rig.md §1.1). */
static char **etcd_env(void)
{
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 1, sizeof(*env));
	for (size_t i = 0; env && i < n; i++)
		if (strncmp(environ[i], "ETCD_", 5) != 0)
			env[k++] = environ[i];
	return env;
}

static int wait_ready(const char *endpoint, int64_t limit_ms)
{
	Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
	Etcdserverpb__RangeResponse *resp;
	struct gaz_etcd *e = gaz_etcd_new(endpoint, 1000, NULL);
	int64_t end = gaz_deadline_in(limit_ms);
	int rc = -1;

	req.key = (ProtobufCBinaryData){6, (uint8_t *)"health"};
	while (e && rc != 0 && gaz_mono_ns() < end) {
		rc = gaz_etcd_range(e, &req, &resp, NULL);
		if (rc == 0)
			protobuf_c_message_free_unpacked(&resp->base, NULL);
		else
			usleep(100 * 1000);
	}
	gaz_etcd_free(e);
	return rc;
}

/* etcd_path finds etcd in PATH (before fork: the child may not malloc). */
static int etcd_path(char *out, size_t len)
{
	const char *path = getenv("PATH");
	char dirs[4096];

	snprintf(dirs, sizeof(dirs), "%s", path ? path : "/usr/bin:/bin");
	for (char *save, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(out, len, "%s/etcd", d);
		if (access(out, X_OK) == 0)
			return 0;
	}
	return -1;
}

/* spawn runs etcd with output to `log`. The child dies with this process
 * (PR_SET_PDEATHSIG), so a killed test leaves no etcd behind, and gets an
 * empty signal mask: rpc.h asks programs to block SIGTERM, which would
 * otherwise make etcd unstoppable. */
static pid_t spawn(const char *exe, char **argv, char **env, const char *log)
{
	pid_t parent = getpid(), pid;
	sigset_t none;
	int fd;

	sigemptyset(&none);
	pid = fork();
	if (pid != 0)
		return pid;
	/* Child: async-signal-safe calls only. */
	fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
		_exit(126);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
		_exit(126);
	execve(exe, argv, env);
	_exit(127);
}

/* etcd_start starts etcd in p->dir on p's ports (fresh: pick both first). */
static int etcd_start(struct etcd_proc *p, bool fresh)
{
	char name[] = "test", data[300], log[300], curl[80], purl[80], cluster[100], exe[512];
	char **env = etcd_env();

	if (fresh) {
		p->cport = free_port();
		p->pport = free_port();
	}
	snprintf(data, sizeof(data), "%s/data", p->dir);
	snprintf(log, sizeof(log), "%s/etcd.log", p->dir);
	snprintf(curl, sizeof(curl), "http://127.0.0.1:%d", p->cport);
	snprintf(purl, sizeof(purl), "http://127.0.0.1:%d", p->pport);
	snprintf(cluster, sizeof(cluster), "test=%s", purl);
	snprintf(p->endpoint, sizeof(p->endpoint), "%s", curl);
	char *argv[] = {"etcd", "--name", name, "--data-dir", data, "--listen-client-urls", curl,
			"--advertise-client-urls", curl, "--listen-peer-urls", purl,
			"--initial-advertise-peer-urls", purl, "--initial-cluster", cluster,
			"--initial-cluster-state", "new", "--logger", "zap", "--log-outputs",
			"stderr", "--log-level", "warn", NULL};
	p->pid = env && etcd_path(exe, sizeof(exe)) == 0 ? spawn(exe, argv, env, log) : -1;
	free(env);
	if (p->pid < 0)
		return -1;
	if (wait_ready(p->endpoint, 30000) != 0) {
		fprintf(stderr, "etcd at %s not ready; see %s\n", p->endpoint, log);
		return -1;
	}
	return 0;
}

static void etcd_stop(struct etcd_proc *p)
{
	int status;

	if (p->pid <= 0)
		return;
	kill(p->pid, SIGTERM);
	for (int i = 0; i < 200; i++) {
		if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
			p->pid = 0;
			return;
		}
		usleep(50 * 1000);
	}
	kill(p->pid, SIGKILL);
	waitpid(p->pid, &status, 0);
	p->pid = 0;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	remove(path);
	return 0;
}

static int etcd_new_proc(struct etcd_proc *p)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->dir, sizeof(p->dir), "/dev/shm/gaz-etcd-test.XXXXXX");
	if (!mkdtemp(p->dir)) {
		snprintf(p->dir, sizeof(p->dir), "/tmp/gaz-etcd-test.XXXXXX");
		if (!mkdtemp(p->dir))
			return -1;
	}
	/* A port taken between probe and bind: retry once (test-rig.md §0). */
	if (etcd_start(p, true) == 0)
		return 0;
	etcd_stop(p);
	return etcd_start(p, true);
}

static void etcd_drop_proc(struct etcd_proc *p)
{
	etcd_stop(p);
	if (p->dir[0])
		nftw(p->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	p->dir[0] = 0;
}

/* ---- shared fixtures and helpers -------------------------------------- */

static struct etcd_proc g_proc;    /* ours, when GAZ_TEST_ETCD is unset */
static const char *g_endpoint;
static struct gaz_etcd *g_e;
static char g_prefix[64];          /* unique per run */

static ProtobufCBinaryData bin(const char *s)
{
	return (ProtobufCBinaryData){strlen(s), (uint8_t *)s};
}

/* key formats "<g_prefix><suffix>" into a static ring of buffers. */
static const char *key(const char *fmt, ...)
{
	static __thread char ring[8][128];
	static __thread int next;
	char *out = ring[next++ % 8];
	int n = snprintf(out, 128, "%s", g_prefix);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(out + n, 128 - (size_t)n, fmt, ap);
	va_end(ap);
	return out;
}

static int64_t put_lease(struct gaz_etcd *e, const char *k, const char *v, int64_t lease)
{
	Etcdserverpb__PutRequest req = ETCDSERVERPB__PUT_REQUEST__INIT;
	Etcdserverpb__PutResponse *resp;
	struct gaz_status st = {0};
	int64_t rev;

	req.key = bin(k);
	req.value = bin(v);
	req.lease = lease;
	assert_int_equal(gaz_etcd_put(e, &req, &resp, &st), 0);
	rev = resp->header->revision;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rev;
}

static int64_t put(struct gaz_etcd *e, const char *k, const char *v)
{
	return put_lease(e, k, v, 0);
}

/* get returns the value of k (static buffer) or NULL when absent. */
static const char *get(struct gaz_etcd *e, const char *k, int64_t *lease)
{
	static char val[256];
	Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
	Etcdserverpb__RangeResponse *resp;
	struct gaz_status st = {0};
	const char *out = NULL;

	req.key = bin(k);
	assert_int_equal(gaz_etcd_range(e, &req, &resp, &st), 0);
	if (resp->n_kvs == 1) {
		snprintf(val, sizeof(val), "%.*s", (int)resp->kvs[0]->value.len,
			 (char *)resp->kvs[0]->value.data);
		if (lease)
			*lease = resp->kvs[0]->lease;
		out = val;
	}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return out;
}

static int64_t mono_ms(void)
{
	return gaz_mono_ns() / GAZ_NS_PER_MS;
}

/* ---- watch recorder -------------------------------------------------- */

struct rec_event {
	int type;               /* ETCDSERVERPB__EVENT__EVENT_TYPE__* */
	char key[128];
	char val[64];
	int64_t mod_rev;
};

struct rec {
	pthread_mutex_t mu;
	int n;                  /* events recorded */
	struct rec_event ev[64];
	int empty;              /* responses without events delivered (a bug) */
	int ends;               /* end_fn calls */
	int end_code;
	int stop_after;         /* fn returns non-zero at this many events; 0 never */
};

static void rec_init(struct rec *r)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->mu, NULL);
}

static int rec_fn(void *arg, const Etcdserverpb__WatchResponse *resp)
{
	struct rec *r = arg;
	int stop;

	pthread_mutex_lock(&r->mu);
	/* Only responses with events may come. No cmocka assert here: it would
	 * longjmp across threads. */
	if (resp->n_events == 0)
		r->empty++;
	for (size_t i = 0; i < resp->n_events && r->n < 64; i++) {
		const Etcdserverpb__KeyValue *kv = resp->events[i]->kv;
		struct rec_event *e = &r->ev[r->n++];

		e->type = resp->events[i]->type;
		snprintf(e->key, sizeof(e->key), "%.*s", (int)kv->key.len, (char *)kv->key.data);
		snprintf(e->val, sizeof(e->val), "%.*s", (int)kv->value.len, (char *)kv->value.data);
		e->mod_rev = kv->mod_revision;
	}
	stop = r->stop_after && r->n >= r->stop_after;
	pthread_mutex_unlock(&r->mu);
	return stop;
}

static void rec_end(void *arg, int code, const char *why)
{
	struct rec *r = arg;

	(void)why;
	pthread_mutex_lock(&r->mu);
	r->ends++;
	r->end_code = code;
	pthread_mutex_unlock(&r->mu);
}

/* rec_wait polls until `n` events (or, with n < 0, an end) or limit_ms. */
static bool rec_wait(struct rec *r, int n, int64_t limit_ms)
{
	int64_t end = mono_ms() + limit_ms;
	bool done;

	for (;;) {
		pthread_mutex_lock(&r->mu);
		done = n < 0 ? r->ends > 0 : r->n >= n;
		pthread_mutex_unlock(&r->mu);
		if (done || mono_ms() > end)
			return done;
		usleep(20 * 1000);
	}
}

static void expect_event(struct rec *r, int i, int type, const char *k, int64_t rev)
{
	assert_true(i < r->n);
	assert_int_equal(r->ev[i].type, type);
	assert_string_equal(r->ev[i].key, k);
	if (rev)
		assert_int_equal(r->ev[i].mod_rev, rev);
}

/* ---- tests ----------------------------------------------------------- */

static void test_prefix_end(void **state)
{
	uint8_t out[4];

	(void)state;
	gaz_etcd_prefix_end((const uint8_t *)"abc", 3, out);
	assert_memory_equal(out, "abd", 3);
	assert_int_equal(gaz_etcd_prefix_range_end((const uint8_t *)"/a/", 3, out), 3);
	assert_memory_equal(out, "/a0", 3);
	assert_int_equal(gaz_etcd_prefix_range_end((const uint8_t *)"a\xff\xff", 3, out), 1);
	assert_memory_equal(out, "b", 1);
	assert_int_equal(gaz_etcd_prefix_range_end((const uint8_t *)"\xff", 1, out), 1);
	assert_int_equal(out[0], 0);
}

static void test_bad_endpoint(void **state)
{
	struct gaz_status st = {0};

	(void)state;
	assert_null(gaz_etcd_new("ftp://127.0.0.1:2379", 1000, &st));
	assert_int_equal(st.code, GAZ_EINVAL);
	gaz_status_clear(&st);
	/* https:// reads its TLS files at once and names the one that fails. */
	assert_null(gaz_etcd_new_tls("https://127.0.0.1:2379", 1000,
				     &(struct gaz_rpc_tls){.ca_file = "/nonexistent/ca.pem"}, &st));
	assert_int_equal(st.code, GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "/nonexistent/ca.pem"));
	gaz_status_clear(&st);
	gaz_etcd_free(gaz_etcd_new("https://127.0.0.1:2379", 1000, &st));
	assert_int_equal(st.code, 0);
	assert_null(gaz_etcd_new("http://127.0.0.1:2379", 0, &st));
	assert_int_equal(st.code, GAZ_EINVAL);
}

static int64_t range_count(const char *prefix, const char **first_key)
{
	static char k0[128];
	uint8_t end[128];
	Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
	Etcdserverpb__RangeResponse *resp;
	struct gaz_status st = {0};
	int64_t n;

	req.key = bin(prefix);
	gaz_etcd_prefix_end(req.key.data, req.key.len, end);
	req.range_end = (ProtobufCBinaryData){req.key.len, end};
	assert_int_equal(gaz_etcd_range(g_e, &req, &resp, &st), 0);
	n = (int64_t)resp->n_kvs;
	assert_int_equal(resp->count, n);
	if (first_key && n > 0)
		snprintf(k0, sizeof(k0), "%.*s", (int)resp->kvs[0]->key.len,
			 (char *)resp->kvs[0]->key.data);
	if (first_key)
		*first_key = n > 0 ? k0 : NULL;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return n;
}

static void test_put_range_delete(void **state)
{
	Etcdserverpb__DeleteRangeRequest del = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
	Etcdserverpb__DeleteRangeResponse *dresp;
	struct gaz_status st = {0};
	const char *first;
	uint8_t end[128];
	int64_t r1, r2;

	(void)state;
	r1 = put(g_e, key("kv/b"), "2");
	r2 = put(g_e, key("kv/a"), "1");
	put(g_e, key("kv0"), "outside the prefix");
	assert_true(r2 > r1);
	assert_string_equal(get(g_e, key("kv/a"), NULL), "1");
	assert_null(get(g_e, key("kv/none"), NULL));
	assert_int_equal(range_count(key("kv/"), &first), 2);
	assert_string_equal(first, key("kv/a")); /* etcd ranges in key order */

	del.key = bin(key("kv/"));
	gaz_etcd_prefix_end(del.key.data, del.key.len, end);
	del.range_end = (ProtobufCBinaryData){del.key.len, end};
	assert_int_equal(gaz_etcd_delete(g_e, &del, &dresp, &st), 0);
	assert_int_equal(dresp->deleted, 2);
	assert_true(dresp->header->revision > r2);
	protobuf_c_message_free_unpacked(&dresp->base, NULL);
	assert_int_equal(range_count(key("kv/"), NULL), 0);
	assert_string_equal(get(g_e, key("kv0"), NULL), "outside the prefix");
}

/* txn: IF mod_revision(k) == rev THEN put k=val ELSE range k. */
static Etcdserverpb__TxnResponse *txn_mod(const char *k, int64_t rev, const char *val)
{
	Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT;
	Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
	Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
	Etcdserverpb__RequestOp ok = ETCDSERVERPB__REQUEST_OP__INIT;
	Etcdserverpb__RequestOp bad = ETCDSERVERPB__REQUEST_OP__INIT;
	Etcdserverpb__Compare *cmps[] = {&cmp};
	Etcdserverpb__RequestOp *oks[] = {&ok}, *bads[] = {&bad};
	Etcdserverpb__TxnRequest req = ETCDSERVERPB__TXN_REQUEST__INIT;
	Etcdserverpb__TxnResponse *resp;
	struct gaz_status st = {0};

	cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
	cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD;
	cmp.key = bin(k);
	cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
	cmp.mod_revision = rev;
	p.key = bin(k);
	p.value = bin(val);
	ok.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
	ok.request_put = &p;
	r.key = bin(k);
	bad.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
	bad.request_range = &r;
	req = (Etcdserverpb__TxnRequest)ETCDSERVERPB__TXN_REQUEST__INIT;
	req.n_compare = 1, req.compare = cmps;
	req.n_success = 1, req.success = oks;
	req.n_failure = 1, req.failure = bads;
	assert_int_equal(gaz_etcd_txn(g_e, &req, &resp, &st), 0);
	assert_int_equal(resp->n_responses, 1);
	return resp;
}

static void test_txn(void **state)
{
	Etcdserverpb__TxnResponse *t;
	const Etcdserverpb__RangeResponse *rr;
	int64_t rev;

	(void)state;
	rev = put(g_e, key("txn/k"), "v1");
	t = txn_mod(key("txn/k"), rev, "v2");
	assert_true(t->succeeded);
	assert_int_equal(t->responses[0]->response_case,
			 ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT);
	protobuf_c_message_free_unpacked(&t->base, NULL);
	assert_string_equal(get(g_e, key("txn/k"), NULL), "v2");

	t = txn_mod(key("txn/k"), rev, "v3"); /* stale: failure branch */
	assert_false(t->succeeded);
	assert_int_equal(t->responses[0]->response_case,
			 ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE);
	rr = t->responses[0]->response_range;
	assert_int_equal(rr->n_kvs, 1);
	assert_memory_equal(rr->kvs[0]->value.data, "v2", 2);
	assert_true(rr->kvs[0]->mod_revision > rev);
	protobuf_c_message_free_unpacked(&t->base, NULL);

	t = txn_mod(key("txn/new"), 0, "created"); /* MOD == 0: create if absent */
	assert_true(t->succeeded);
	protobuf_c_message_free_unpacked(&t->base, NULL);
	t = txn_mod(key("txn/new"), 0, "again");
	assert_false(t->succeeded);
	protobuf_c_message_free_unpacked(&t->base, NULL);
	assert_string_equal(get(g_e, key("txn/new"), NULL), "created");
}

static void test_lease_revoke(void **state)
{
	Etcdserverpb__PutRequest req = ETCDSERVERPB__PUT_REQUEST__INIT;
	Etcdserverpb__PutResponse *resp;
	struct gaz_status st = {0};
	int64_t id = 0, lease = 0;

	(void)state;
	assert_int_equal(gaz_etcd_lease_grant(g_e, 30, &id, &st), 0);
	assert_true(id != 0);
	put_lease(g_e, key("lease/k"), "v", id);
	assert_non_null(get(g_e, key("lease/k"), &lease));
	assert_true(lease == id);
	assert_int_equal(gaz_etcd_lease_revoke(g_e, id, &st), 0);
	assert_null(get(g_e, key("lease/k"), NULL)); /* revoke deleted it */

	/* A revoked lease: etcd answers NOT_FOUND (grpc-core.md §6). */
	req.key = bin(key("lease/k2"));
	req.value = bin("v");
	req.lease = id;
	assert_int_equal(gaz_etcd_put(g_e, &req, &resp, &st), GAZ_ERPC);
	assert_int_equal(st.grpc, GAZ_GRPC_NOT_FOUND);
	assert_null(resp);
}

struct lost {
	pthread_mutex_t mu;
	int n;
	int64_t at_ms;
	char why[256];
};

static void lost_fn(void *arg, const char *why)
{
	struct lost *l = arg;

	pthread_mutex_lock(&l->mu);
	l->n++;
	l->at_ms = mono_ms();
	snprintf(l->why, sizeof(l->why), "%s", why);
	pthread_mutex_unlock(&l->mu);
}

static int lost_count(struct lost *l)
{
	int n;

	pthread_mutex_lock(&l->mu);
	n = l->n;
	pthread_mutex_unlock(&l->mu);
	return n;
}

static void test_keepalive(void **state)
{
	struct lost l = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct gaz_etcd_keepalive *ka;
	struct gaz_status st = {0};
	int64_t id = 0, t0;

	(void)state;
	assert_int_equal(gaz_etcd_lease_grant(g_e, 2, &id, &st), 0);
	put_lease(g_e, key("ka/k"), "v", id);
	ka = gaz_etcd_keepalive_start(g_e, id, 2, lost_fn, &l, &st);
	assert_non_null(ka);
	sleep(5); /* 2.5 TTLs: without keep-alives the key would be gone */
	assert_string_equal(get(g_e, key("ka/k"), NULL), "v");
	assert_int_equal(lost_count(&l), 0);

	/* Revoked under it: the next answer has TTL 0 and lost() fires once,
	 * within about one keep-alive interval (2/3 s). */
	t0 = mono_ms();
	assert_int_equal(gaz_etcd_lease_revoke(g_e, id, &st), 0);
	while (lost_count(&l) == 0 && mono_ms() - t0 < 3000)
		usleep(20 * 1000);
	assert_int_equal(lost_count(&l), 1);
	assert_non_null(strstr(l.why, "expired or revoked"));
	gaz_etcd_keepalive_stop(ka);
	assert_int_equal(lost_count(&l), 1);
	assert_null(get(g_e, key("ka/k"), NULL));
}

static void test_keepalive_stop(void **state)
{
	struct lost l = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct gaz_etcd_keepalive *ka;
	struct gaz_status st = {0};
	int64_t id = 0;

	(void)state;
	assert_int_equal(gaz_etcd_lease_grant(g_e, 2, &id, &st), 0);
	put_lease(g_e, key("kastop/k"), "v", id);
	ka = gaz_etcd_keepalive_start(g_e, id, 2, lost_fn, &l, &st);
	assert_non_null(ka);
	usleep(300 * 1000);
	gaz_etcd_keepalive_stop(ka); /* stops keep-alives, never calls lost() */
	sleep(4);                    /* so the lease expires */
	assert_null(get(g_e, key("kastop/k"), NULL));
	assert_int_equal(lost_count(&l), 0);
}

static void test_watch_events(void **state)
{
	uint8_t end[128];
	struct gaz_status st = {0};
	struct gaz_etcd_watch *w;
	Etcdserverpb__DeleteRangeRequest del = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
	Etcdserverpb__DeleteRangeResponse *dresp;
	const char *p = key("watch/");
	int64_t r1, r2, r3, r4;
	struct rec r;

	(void)state;
	rec_init(&r);
	put(g_e, key("watch0"), "outside");
	r1 = put(g_e, key("watch/a"), "1");
	r2 = put(g_e, key("watch/b"), "2");
	del.key = bin(key("watch/a"));
	assert_int_equal(gaz_etcd_delete(g_e, &del, &dresp, &st), 0);
	r3 = dresp->header->revision;
	protobuf_c_message_free_unpacked(&dresp->base, NULL);
	put(g_e, key("watch0"), "outside again");

	gaz_etcd_prefix_end((const uint8_t *)p, strlen(p), end);
	w = gaz_etcd_watch_start(g_e, (const uint8_t *)p, strlen(p), end, strlen(p), r1, rec_fn,
				 rec_end, &r, &st);
	assert_non_null(w);
	assert_true(rec_wait(&r, 3, 10000));
	r4 = put(g_e, key("watch/c"), "3"); /* a live event after the backlog */
	assert_true(rec_wait(&r, 4, 10000));
	usleep(200 * 1000);                 /* nothing else may arrive */
	gaz_etcd_watch_stop(w);

	assert_int_equal(r.n, 4);
	expect_event(&r, 0, ETCDSERVERPB__EVENT__EVENT_TYPE__PUT, key("watch/a"), r1);
	expect_event(&r, 1, ETCDSERVERPB__EVENT__EVENT_TYPE__PUT, key("watch/b"), r2);
	expect_event(&r, 2, ETCDSERVERPB__EVENT__EVENT_TYPE__DELETE, key("watch/a"), r3);
	expect_event(&r, 3, ETCDSERVERPB__EVENT__EVENT_TYPE__PUT, key("watch/c"), r4);
	assert_string_equal(r.ev[1].val, "2");
	assert_int_equal(r.ends, 1);
	assert_int_equal(r.end_code, GAZ_ECANCELLED);
	assert_int_equal(r.empty, 0);
}

static void test_watch_fn_stops(void **state)
{
	struct gaz_status st = {0};
	struct gaz_etcd_watch *w;
	const char *k = key("wstop/k");
	struct rec r;

	(void)state;
	rec_init(&r);
	r.stop_after = 1;
	w = gaz_etcd_watch_start(g_e, (const uint8_t *)k, strlen(k), NULL, 0, 0, rec_fn, rec_end,
				 &r, &st);
	assert_non_null(w);
	usleep(500 * 1000); /* "from now": let the watch be created first */
	put(g_e, k, "1");
	assert_true(rec_wait(&r, -1, 10000));
	assert_int_equal(r.n, 1);
	assert_int_equal(r.end_code, GAZ_ECANCELLED);
	put(g_e, k, "2");
	usleep(200 * 1000);
	gaz_etcd_watch_stop(w);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.ends, 1);
}

/* dead_etcd: a client of a loopback port nobody listens on. */
static struct gaz_etcd *dead_etcd(int64_t timeout_ms)
{
	char ep[64];

	snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", free_port());
	return gaz_etcd_new(ep, timeout_ms, NULL);
}

static void test_dead_unary(void **state)
{
	Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
	Etcdserverpb__RangeResponse *resp = NULL;
	struct gaz_status st = {0};
	struct gaz_etcd *e = dead_etcd(500);
	int64_t t0, took;

	(void)state;
	assert_non_null(e);
	req.key = bin("k");
	t0 = mono_ms();
	assert_int_equal(gaz_etcd_range(e, &req, &resp, &st), GAZ_EUNAVAIL);
	took = mono_ms() - t0;
	assert_null(resp);
	assert_true(st.grpc == GAZ_GRPC_UNAVAILABLE || st.grpc == GAZ_GRPC_DEADLINE_EXCEEDED);
	assert_true(took <= 500 + 1000);
	gaz_etcd_free(e);
}

/* Unreachable past the TTL: lost() once, about one TTL after the start. */
static void test_dead_keepalive(void **state)
{
	struct lost l = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct gaz_etcd *e = dead_etcd(500);
	struct gaz_etcd_keepalive *ka;
	struct gaz_status st = {0};
	int64_t t0 = mono_ms();

	(void)state;
	ka = gaz_etcd_keepalive_start(e, 12345, 2, lost_fn, &l, &st);
	assert_non_null(ka);
	while (lost_count(&l) == 0 && mono_ms() - t0 < 6000)
		usleep(20 * 1000);
	assert_int_equal(lost_count(&l), 1);
	assert_true(l.at_ms - t0 >= 1900 && l.at_ms - t0 <= 4000);
	assert_non_null(strstr(l.why, "no keep-alive answered"));
	gaz_etcd_keepalive_stop(ka);
	gaz_etcd_free(e);
}

/* A watch waiting for an unreachable etcd stops promptly. */
static void test_dead_watch(void **state)
{
	struct gaz_etcd *e = dead_etcd(500);
	struct gaz_status st = {0};
	struct gaz_etcd_watch *w;
	int64_t t0;
	struct rec r;

	(void)state;
	rec_init(&r);
	w = gaz_etcd_watch_start(e, (const uint8_t *)"k", 1, NULL, 0, 1, rec_fn, rec_end, &r, &st);
	assert_non_null(w);
	usleep(300 * 1000);
	t0 = mono_ms();
	gaz_etcd_watch_stop(w);
	assert_true(mono_ms() - t0 < 2000);
	assert_int_equal(r.ends, 1);
	assert_int_equal(r.end_code, GAZ_ECANCELLED);
	assert_int_equal(r.n, 0);
	gaz_etcd_free(e);
}

static struct etcd_proc g_priv;   /* the restart tests' own */
static struct gaz_etcd *g_priv_e;
static struct gaz_etcd_watch *g_priv_w; /* so a failed test still stops it */
static struct gaz_etcd_keepalive *g_priv_ka;

/* put_retry puts through an etcd that is coming back: GAZ_EUNAVAIL is
 * what callers retry on. */
static int64_t put_retry(struct gaz_etcd *e, const char *k, const char *v, int64_t limit_ms)
{
	Etcdserverpb__PutRequest req = ETCDSERVERPB__PUT_REQUEST__INIT;
	Etcdserverpb__PutResponse *resp;
	struct gaz_status st;
	int64_t end = mono_ms() + limit_ms, rev;
	int rc;

	req.key = bin(k);
	req.value = bin(v);
	do {
		gaz_status_clear(&st);
		rc = gaz_etcd_put(e, &req, &resp, &st);
	} while (rc == GAZ_EUNAVAIL && mono_ms() < end && usleep(100 * 1000) == 0);
	assert_int_equal(rc, 0);
	rev = resp->header->revision;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rev;
}

static void watch_restart(struct etcd_proc *p, struct gaz_etcd *e)
{
	struct gaz_status st = {0};
	struct gaz_etcd_watch *w;
	int64_t r0, r1, r2;
	static struct rec r; /* outlives a failed test's watch */

	rec_init(&r);
	r0 = put(e, "/r/x0", "0");
	w = gaz_etcd_watch_start(e, (const uint8_t *)"/r/", 3, (const uint8_t *)"/r0", 3, r0 + 1,
				 rec_fn, rec_end, &r, &st);
	g_priv_w = w;
	assert_non_null(w);
	r1 = put(e, "/r/a", "1");
	assert_true(rec_wait(&r, 1, 10000));

	etcd_stop(p);
	usleep(500 * 1000);
	assert_int_equal(etcd_start(p, false), 0); /* same data dir and ports */
	r2 = put_retry(e, "/r/b", "2", 20000);
	assert_true(rec_wait(&r, 2, 30000));
	usleep(300 * 1000); /* a resume from the wrong revision would repeat "a" */
	gaz_etcd_watch_stop(w);
	g_priv_w = NULL;
	assert_int_equal(r.n, 2);
	expect_event(&r, 0, ETCDSERVERPB__EVENT__EVENT_TYPE__PUT, "/r/a", r1);
	expect_event(&r, 1, ETCDSERVERPB__EVENT__EVENT_TYPE__PUT, "/r/b", r2);
	assert_int_equal(r.ends, 1);
	assert_int_equal(r.end_code, GAZ_ECANCELLED);
}

static atomic_int g_resyncs;
static int64_t g_resync_rev;

/* A resync that "re-read" state at g_resync_rev. */
static int64_t resync_fn(void *arg)
{
	(void)arg;
	atomic_fetch_add(&g_resyncs, 1);
	return g_resync_rev;
}

static void watch_compacted(struct etcd_proc *p, struct gaz_etcd *e)
{
	struct gaz_status st = {0};
	struct gaz_etcd_watch *w;
	char cmd[256];
	int64_t r1, r2;
	static struct rec r; /* outlives a failed test's watch */

	rec_init(&r);
	r1 = put(e, "/c/a", "1");
	r2 = put(e, "/c/a", "2");
	snprintf(cmd, sizeof(cmd), "etcdctl --endpoints=%s compact %lld >/dev/null", p->endpoint,
		 (long long)r2);
	assert_int_equal(system(cmd), 0);
	w = gaz_etcd_watch_start(e, (const uint8_t *)"/c/", 3, (const uint8_t *)"/c0", 3, r1,
				 rec_fn, rec_end, &r, &st);
	g_priv_w = w;
	assert_non_null(w);
	assert_true(rec_wait(&r, -1, 10000));
	assert_int_equal(r.end_code, GAZ_ERANGE);
	gaz_etcd_watch_stop(w);
	g_priv_w = NULL;
	assert_int_equal(r.ends, 1);
	assert_int_equal(r.n, 0);

	/* With a resync callback the watch re-reads and resumes after the
	 * revision it returns: later changes arrive, earlier ones are the
	 * re-read's business, and the watch does not end. */
	rec_init(&r);
	g_resync_rev = put(e, "/c/b", "3");
	g_resyncs = 0;
	w = gaz_etcd_watch_start_resync(e, (const uint8_t *)"/c/", 3, (const uint8_t *)"/c0", 3, r1,
					rec_fn, rec_end, resync_fn, &r, &st);
	g_priv_w = w;
	assert_non_null(w);
	while (atomic_load(&g_resyncs) == 0 && !rec_wait(&r, -1, 50))
		;
	put(e, "/c/d", "4");
	assert_true(rec_wait(&r, 1, 10000));
	gaz_etcd_watch_stop(w);
	g_priv_w = NULL;
	assert_int_equal(atomic_load(&g_resyncs), 1);
	assert_int_equal(r.ends, 1); /* only the stop */
	assert_int_equal(r.end_code, GAZ_ECANCELLED);
	assert_int_equal(r.n, 1);
	expect_event(&r, 0, ETCDSERVERPB__EVENT__EVENT_TYPE__PUT, "/c/d", 0);
}

/* A 5 s lease kept alive while etcd is SIGKILLed 0.1 s after the first
 * answer and started again 2.3 s later (on the same data: etcd renews its
 * leases' TTLs when it starts). The keep-alive must be answered again
 * within the TTL: a back-off growing as the watch's (2 s, then 3 s)
 * retried at 2.1 s and next at 5.1 s, and lost the lease at 5 s. */
static void test_keepalive_across_restart(void **state)
{
	static struct lost l = {.mu = PTHREAD_MUTEX_INITIALIZER}; /* outlives a failed test */
	struct gaz_status st = {0};
	int64_t id = 0, t0;
	int status;

	(void)state;
	if (etcd_new_proc(&g_priv) != 0)
		fail_msg("cannot start a private etcd");
	g_priv_e = gaz_etcd_new(g_priv.endpoint, 2000, NULL);
	assert_non_null(g_priv_e);
	assert_int_equal(gaz_etcd_lease_grant(g_priv_e, 5, &id, &st), 0);
	put_lease(g_priv_e, "/ka/k", "v", id);
	t0 = mono_ms();
	g_priv_ka = gaz_etcd_keepalive_start(g_priv_e, id, 5, lost_fn, &l, &st);
	assert_non_null(g_priv_ka);
	usleep(100 * 1000);
	kill(g_priv.pid, SIGKILL); /* SIGTERM would drain the stream for seconds */
	waitpid(g_priv.pid, &status, 0);
	g_priv.pid = 0;
	usleep(2300 * 1000);
	assert_int_equal(etcd_start(&g_priv, false), 0);
	assert_true(mono_ms() - t0 < 4500); /* else the TTL leaves no time to reconnect */
	while (mono_ms() - t0 < 7000)
		usleep(50 * 1000);
	assert_int_equal(lost_count(&l), 0);
	assert_string_equal(get(g_priv_e, "/ka/k", NULL), "v");
	gaz_etcd_keepalive_stop(g_priv_ka);
	g_priv_ka = NULL;
}

/* ---- an idle channel's connection ------------------------------------ */

/* Whether socket inode `ino` is open in this process (/proc/self/fd's
 * links read "socket:[ino]"): connections other processes make to the
 * same etcd (a shared one, tests beside this one) are not ours. */
static bool own_socket(unsigned long ino)
{
	char want[64], path[300], link[64];
	struct dirent *e;
	DIR *d = opendir("/proc/self/fd");
	bool found = false;

	if (!d)
		return false;
	snprintf(want, sizeof(want), "socket:[%lu]", ino);
	while (!found && (e = readdir(d))) {
		ssize_t n;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		if ((n = readlink(path, link, sizeof(link) - 1)) > 0) {
			link[n] = 0;
			found = !strcmp(link, want);
		}
	}
	closedir(d);
	return found;
}

/* Local ports of this process's established TCP connections to port
 * `port` (/proc/net/tcp and tcp6: grpc's sockets are IPv6 with
 * IPv4-mapped addresses). Both ends of a loopback connection are listed;
 * the client's end is the one whose remote port is `port`. */
static size_t conns_to(int port, int *out, size_t max)
{
	static const char *const tables[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	char line[512];
	size_t n = 0;

	for (size_t t = 0; t < 2; t++) {
		FILE *f = fopen(tables[t], "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			unsigned lport, rport, state;
			unsigned long ino;
			if (sscanf(line, " %*d: %*[0-9A-Fa-f]:%X %*[0-9A-Fa-f]:%X %X %*s %*s %*s %*s %*s %lu",
				   &lport, &rport, &state, &ino) == 4 &&
			    (int)rport == port && state == 1 && n < max && own_socket(ino))
				out[n++] = (int)lport;
		}
		fclose(f);
	}
	return n;
}

static bool has_port(const int *v, size_t n, int port)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == port)
			return true;
	return false;
}

/* The connection a new channel opened: its one port not in before[]. */
static int new_conn(int port, const int *before, size_t nb)
{
	int now[256], found = 0;
	size_t n = conns_to(port, now, 256);

	for (size_t i = 0; i < n; i++)
		if (!has_port(before, nb, now[i])) {
			assert_int_equal(found, 0);
			found = now[i];
		}
	return found;
}

static void range_once(struct gaz_rpc_channel *ch)
{
	Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;
	struct gaz_status st = {0};

	req.key.data = (uint8_t *)key("idle/k");
	req.key.len = strlen((char *)req.key.data);
	assert_int_equal(gaz_rpc_unary(ch, "/etcdserverpb.KV/Range", &req.base,
				       &etcdserverpb__range_response__descriptor, &resp,
				       gaz_deadline_in(5000), true, NULL, &st), 0);
	protobuf_c_message_free_unpacked(resp, NULL);
}

/* Whether a channel of `peer` kind with keepalive every `keepalive_ms`
 * still holds the connection of its first call after `idle_s` seconds
 * without calls. */
static bool idle_channel_kept(enum gaz_rpc_peer peer, int keepalive_ms, int idle_s)
{
	int port = 0, before[256], conn;
	size_t nb;
	struct gaz_rpc_channel *ch;
	bool kept;

	assert_int_equal(sscanf(g_endpoint, "http://127.0.0.1:%d", &port), 1);
	nb = conns_to(port, before, 256);
	ch = gaz_rpc_channel_new(g_endpoint, &(struct gaz_rpc_channel_opts){
		.peer = peer, .keepalive_ms = keepalive_ms});
	assert_non_null(ch);
	range_once(ch);
	conn = new_conn(port, before, nb);
	assert_int_not_equal(conn, 0);
	sleep((unsigned)idle_s);
	range_once(ch);
	{
		int now[256];
		size_t n = conns_to(port, now, 256);
		kept = has_port(now, n, conn);
	}
	gaz_rpc_channel_free(ch);
	return kept;
}

/* etcd answers keepalive pings on a connection with no open call with a
 * GOAWAY "too_many_pings" after two of them (its PermitWithoutStream is
 * false): an etcd channel pings only while a call is open and so keeps
 * its connection across idle time (the operator lost it about 40 s after
 * start, at 10 s pings). At 2 s pings the GOAWAY comes within 12 s; the
 * control, a channel of the kind that pings without calls, shows that
 * the test sees it. */
static void test_idle_etcd_channel_keeps_its_connection(void **state)
{
	(void)state;
	if (strncmp(g_endpoint, "http://127.0.0.1:", 17))
		skip();
	assert_true(idle_channel_kept(GAZ_RPC_PEER_ETCD, 2000, 12));
	assert_false(idle_channel_kept(GAZ_RPC_PEER_BROKER, 2000, 12));
}

/* ---- the keyspace's watch delay --------------------------------------- */

struct ks_obs {
	pthread_mutex_t mu;
	int calls;
	int64_t first_ms;
};

static void *ks_decode(void *arg, const char *k, const uint8_t *val, size_t len,
		       struct gaz_status *st)
{
	char *out = strndup((const char *)val, len);

	(void)arg;
	(void)k;
	if (!out)
		gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	return out;
}

static void ks_free(void *arg, void *decoded)
{
	(void)arg;
	free(decoded);
}

static void ks_observe(void *arg)
{
	struct ks_obs *o = arg;

	pthread_mutex_lock(&o->mu);
	if (!o->calls++)
		o->first_ms = mono_ms();
	pthread_mutex_unlock(&o->mu);
}

/* ks_len: keys in the mirror. */
static size_t ks_len(struct gaz_keyspace *ks)
{
	size_t len;

	gaz_keyspace_rlock(ks);
	len = gaz_keyspace_len(ks);
	gaz_keyspace_runlock(ks);
	return len;
}

/* ks_wait_len waits (up to 10 s from t0_ms) until the mirror holds `n`
 * keys. */
static void ks_wait_len(struct gaz_keyspace *ks, size_t n, int64_t t0_ms)
{
	while (ks_len(ks) < n && mono_ms() - t0_ms < 10000)
		usleep(5 * 1000);
	assert_int_equal(ks_len(ks), n);
}

/* Observer calls for `n` puts under a fresh prefix, with watch delay
 * `delay_ms`; *first_ms: from before the first put to the first call.
 * `one_by_one`: each put waits until the mirror has the one before it, so
 * each comes in a watch response of its own (etcd puts events that
 * arrive together into one response); else they go back to back. */
static int observed_publishes(int64_t delay_ms, int n, bool one_by_one, int64_t *first_ms)
{
	struct ks_obs o = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct gaz_status st = {0};
	char prefix[128];
	struct gaz_keyspace *ks;
	int64_t t0;
	int calls;

	snprintf(prefix, sizeof(prefix), "%s", key("wd%lld/", (long long)delay_ms));
	ks = gaz_keyspace_new(g_e, prefix, ks_decode, ks_free, NULL);
	assert_non_null(ks);
	assert_int_equal(gaz_keyspace_load(ks, 0, &st), 0);
	gaz_keyspace_set_observer(ks, ks_observe, &o);
	gaz_keyspace_set_watch_delay(ks, delay_ms * GAZ_NS_PER_MS);
	assert_int_equal(gaz_keyspace_watch(ks, &st), 0);
	t0 = mono_ms();
	for (int i = 0; i < n; i++) {
		put(g_e, key("wd%lld/k%d", (long long)delay_ms, i), "v");
		if (one_by_one)
			ks_wait_len(ks, (size_t)i + 1, t0);
	}
	ks_wait_len(ks, (size_t)n, t0);
	usleep((useconds_t)(delay_ms + 300) * 1000); /* the last window closes */
	gaz_keyspace_free(ks);
	pthread_mutex_lock(&o.mu);
	calls = o.calls;
	*first_ms = o.first_ms - t0;
	pthread_mutex_unlock(&o.mu);
	return calls;
}

/* --broker.watch-delay (Gazette's KeySpace.WatchApplyDelay): without a
 * delay each watch response wakes the observer (ten responses, ten calls);
 * with one, a burst of changes wakes it once the delay after the first has
 * passed. The changes themselves are in the mirror as they arrive. */
static void test_keyspace_watch_delay_coalesces(void **state)
{
	int64_t first = 0;
	int undelayed, delayed;

	(void)state;
	undelayed = observed_publishes(0, 10, true, &first);
	assert_int_equal(undelayed, 10);
	delayed = observed_publishes(1000, 10, false, &first);
	assert_true(delayed >= 1 && delayed <= 2);
	assert_true(first >= 950);
}

/* ---- the keyspace's batches, pages and change log ----------------------- */

/* txn_ops commits one transaction of puts (vals[i] non-NULL) and deletes
 * (vals[i] NULL) of keys[0..n); returns its revision. */
static int64_t txn_ops(const char **keys, const char **vals, size_t n)
{
	Etcdserverpb__PutRequest *puts = calloc(n, sizeof(*puts));
	Etcdserverpb__DeleteRangeRequest *dels = calloc(n, sizeof(*dels));
	Etcdserverpb__RequestOp *ops = calloc(n, sizeof(*ops)), **opp = calloc(n, sizeof(*opp));
	Etcdserverpb__TxnRequest req = ETCDSERVERPB__TXN_REQUEST__INIT;
	Etcdserverpb__TxnResponse *resp;
	struct gaz_status st = {0};
	int64_t rev;

	assert_true(puts && dels && ops && opp);
	for (size_t i = 0; i < n; i++) {
		ops[i] = (Etcdserverpb__RequestOp)ETCDSERVERPB__REQUEST_OP__INIT;
		if (vals[i]) {
			puts[i] = (Etcdserverpb__PutRequest)ETCDSERVERPB__PUT_REQUEST__INIT;
			puts[i].key = bin(keys[i]);
			puts[i].value = bin(vals[i]);
			ops[i].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
			ops[i].request_put = &puts[i];
		} else {
			dels[i] = (Etcdserverpb__DeleteRangeRequest)ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
			dels[i].key = bin(keys[i]);
			ops[i].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
			ops[i].request_delete_range = &dels[i];
		}
		opp[i] = &ops[i];
	}
	req.n_success = n, req.success = opp;
	assert_int_equal(gaz_etcd_txn(g_e, &req, &resp, &st), 0);
	assert_true(resp->succeeded);
	rev = resp->header->revision;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	free(puts), free(dels), free(ops), free(opp);
	return rev;
}

/* The mirror is sorted, and holds `want` keys. */
static void ks_check_sorted(struct gaz_keyspace *ks, size_t want)
{
	gaz_keyspace_rlock(ks);
	assert_int_equal(gaz_keyspace_len(ks), want);
	for (size_t i = 1; i < gaz_keyspace_len(ks); i++)
		assert_true(strcmp(gaz_keyspace_at(ks, i - 1)->key, gaz_keyspace_at(ks, i)->key) < 0);
	gaz_keyspace_runlock(ks);
}

struct ks_changes {
	char keys[16][128];
	enum gaz_ks_change kinds[16];
	int n;
};

static void ks_on_change(void *arg, const char *k, enum gaz_ks_change kind)
{
	struct ks_changes *c = arg;

	if (c->n < 16) {
		snprintf(c->keys[c->n], sizeof(c->keys[0]), "%s", k);
		c->kinds[c->n++] = kind;
	}
}

static const char *ks_value(struct gaz_keyspace *ks, const char *k)
{
	static char out[64];
	const struct gaz_ks_entry *e;

	gaz_keyspace_rlock(ks);
	e = gaz_keyspace_get(ks, k);
	snprintf(out, sizeof(out), "%s", e ? (const char *)e->decoded : "(absent)");
	gaz_keyspace_runlock(ks);
	return out;
}

/* A load larger than one Range page (10,000 keys) reads every key once, in
 * order, at one revision; a watch response of one transaction applies as
 * one batch (a key created between others, one updated, one deleted) and
 * is logged as exactly those changes; once the log overflows, a reader
 * from before the overflow is told to rescan. */
static void test_keyspace_pages_batches_change_log(void **state)
{
	enum { N = 25000, PER_TXN = 125 };
	static const char *keys[PER_TXN], *vals[PER_TXN];
	static char names[PER_TXN][160];
	struct gaz_status st = {0};
	struct ks_changes ch = {0};
	struct gaz_keyspace *ks;
	char prefix[96];
	int64_t loaded, rev = 0;
	(void)state;

	snprintf(prefix, sizeof(prefix), "%s", key("kb/"));
	for (int i = 0; i < N; i += PER_TXN) {
		for (int j = 0; j < PER_TXN; j++) {
			snprintf(names[j], sizeof(names[j]), "%sk%05d", prefix, i + j);
			keys[j] = names[j];
			vals[j] = "v0";
		}
		txn_ops(keys, vals, PER_TXN);
	}
	ks = gaz_keyspace_new(g_e, prefix, ks_decode, ks_free, NULL);
	assert_non_null(ks);
	gaz_keyspace_set_change_log(ks, 8);
	assert_int_equal(gaz_keyspace_load(ks, 0, &st), 0);
	ks_check_sorted(ks, N);
	assert_string_equal(ks_value(ks, key("kb/k24999")), "v0");
	loaded = gaz_keyspace_revision_now(ks);
	assert_int_equal(gaz_keyspace_watch(ks, &st), 0);

	const char *k3[] = {key("kb/k12345x"), key("kb/k00005"), key("kb/k00007")};
	const char *v3[] = {"new", "v1", NULL};
	rev = txn_ops(k3, v3, 3);
	assert_int_equal(gaz_keyspace_wait_revision(ks, rev, gaz_deadline_in(10000)), 0);
	ks_check_sorted(ks, N);
	assert_string_equal(ks_value(ks, key("kb/k12345x")), "new");
	assert_string_equal(ks_value(ks, key("kb/k00005")), "v1");
	assert_string_equal(ks_value(ks, key("kb/k00007")), "(absent)");
	gaz_keyspace_rlock(ks);
	assert_true(gaz_keyspace_changes(ks, loaded, ks_on_change, &ch));
	gaz_keyspace_runlock(ks);
	assert_int_equal(ch.n, 3);
	for (int i = 0; i < 3; i++) {
		enum gaz_ks_change want = !strcmp(ch.keys[i], key("kb/k12345x")) ? GAZ_KS_CREATED
					: !strcmp(ch.keys[i], key("kb/k00005"))  ? GAZ_KS_UPDATED
										 : GAZ_KS_DELETED;
		if (want == GAZ_KS_DELETED)
			assert_string_equal(ch.keys[i], key("kb/k00007"));
		assert_int_equal(ch.kinds[i], want);
	}

	/* Insertions before and after a deletion, at both ends. */
	const char *k4[] = {key("kb/a"), key("kb/k24999"), key("kb/k00007"), key("kb/k24998x")};
	const char *v4[] = {"first", NULL, "again", "late"};
	rev = txn_ops(k4, v4, 4);
	assert_int_equal(gaz_keyspace_wait_revision(ks, rev, gaz_deadline_in(10000)), 0);
	ks_check_sorted(ks, N + 2);
	assert_string_equal(ks_value(ks, key("kb/a")), "first");
	assert_string_equal(ks_value(ks, key("kb/k24999")), "(absent)");
	assert_string_equal(ks_value(ks, key("kb/k00007")), "again");
	assert_string_equal(ks_value(ks, key("kb/k24998x")), "late");
	assert_string_equal(ks_value(ks, key("kb/k24998")), "v0");
	const char *k5[] = {key("kb/a"), key("kb/k24998x")};
	const char *v5[] = {NULL, NULL};
	rev = txn_ops(k5, v5, 2);
	assert_int_equal(gaz_keyspace_wait_revision(ks, rev, gaz_deadline_in(10000)), 0);
	ks_check_sorted(ks, N);

	/* Eight more changes overflow the log of eight past `rev`'s three. */
	int64_t before_last = 0;
	for (int i = 0; i < 8; i++) {
		const char *k1[] = {key("kb/z%d", i)}, *v1[] = {"z"};
		before_last = rev;
		rev = txn_ops(k1, v1, 1);
	}
	assert_int_equal(gaz_keyspace_wait_revision(ks, rev, gaz_deadline_in(10000)), 0);
	ch.n = 0;
	gaz_keyspace_rlock(ks);
	assert_false(gaz_keyspace_changes(ks, loaded, ks_on_change, &ch));
	assert_int_equal(ch.n, 0);
	assert_true(gaz_keyspace_changes(ks, before_last, ks_on_change, &ch));
	gaz_keyspace_runlock(ks);
	assert_int_equal(ch.n, 1);
	assert_string_equal(ch.keys[0], key("kb/z7"));
	assert_int_equal(ch.kinds[0], GAZ_KS_CREATED);
	ks_check_sorted(ks, N + 8);
	gaz_keyspace_free(ks);
}

/* Its own etcd: it restarts etcd and compacts the history. */
static void test_watch_restart_compact(void **state)
{
	(void)state;
	if (etcd_new_proc(&g_priv) != 0)
		fail_msg("cannot start a private etcd");
	g_priv_e = gaz_etcd_new(g_priv.endpoint, 2000, NULL);
	assert_non_null(g_priv_e);
	watch_restart(&g_priv, g_priv_e);
	watch_compacted(&g_priv, g_priv_e);
}

/* Runs even when the test failed half-way (the watches it started have
 * been stopped or leak with the failure; etcd must not). */
static int drop_priv(void **state)
{
	(void)state;
	gaz_etcd_watch_stop(g_priv_w);
	g_priv_w = NULL;
	gaz_etcd_keepalive_stop(g_priv_ka);
	g_priv_ka = NULL;
	gaz_etcd_free(g_priv_e);
	g_priv_e = NULL;
	etcd_drop_proc(&g_priv);
	return 0;
}

static void drop_prefix(void)
{
	Etcdserverpb__DeleteRangeRequest del = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
	Etcdserverpb__DeleteRangeResponse *resp;
	uint8_t end[sizeof(g_prefix)];

	del.key = bin(g_prefix);
	gaz_etcd_prefix_end(del.key.data, del.key.len, end);
	del.range_end = (ProtobufCBinaryData){del.key.len, end};
	if (gaz_etcd_delete(g_e, &del, &resp, NULL) == 0)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prefix_end),
		cmocka_unit_test(test_bad_endpoint),
		cmocka_unit_test(test_put_range_delete),
		cmocka_unit_test(test_txn),
		cmocka_unit_test(test_lease_revoke),
		cmocka_unit_test(test_keepalive),
		cmocka_unit_test(test_keepalive_stop),
		cmocka_unit_test(test_watch_events),
		cmocka_unit_test(test_watch_fn_stops),
		cmocka_unit_test(test_dead_unary),
		cmocka_unit_test(test_dead_keepalive),
		cmocka_unit_test(test_dead_watch),
		cmocka_unit_test(test_idle_etcd_channel_keeps_its_connection),
		cmocka_unit_test(test_keyspace_watch_delay_coalesces),
		cmocka_unit_test(test_keyspace_pages_batches_change_log),
		cmocka_unit_test_teardown(test_keepalive_across_restart, drop_priv),
		cmocka_unit_test_teardown(test_watch_restart_compact, drop_priv),
	};
	int rc;

	if (gaz_rpc_init(2) != 0)
		return 1;
	g_endpoint = getenv("GAZ_TEST_ETCD");
	if (!g_endpoint || !g_endpoint[0]) {
		if (etcd_new_proc(&g_proc) != 0) {
			fprintf(stderr, "cannot start etcd (is it in PATH?)\n");
			etcd_drop_proc(&g_proc);
			return 1;
		}
		g_endpoint = g_proc.endpoint;
	}
	g_e = gaz_etcd_new(g_endpoint, 5000, NULL);
	snprintf(g_prefix, sizeof(g_prefix), "/gaz-test-etcd/%d-%lld/", (int)getpid(),
		 (long long)(gaz_wall_ns() / GAZ_NS_PER_MS));
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	drop_prefix();
	gaz_etcd_free(g_e);
	etcd_drop_proc(&g_proc);
	gaz_rpc_shutdown();
	return rc;
}
