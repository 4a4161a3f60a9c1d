/*
 * test_append_service.c - AppendService (client/lib/append_service.c)
 * against a scripted broker: a real gRPC server in this process (lib/rpc)
 * keeping one journal's bytes, which can hold an Append RPC until the test
 * releases it (so later appends queue up behind it) and answer each RPC as
 * the test scripts (OK, a broker status, a gRPC error).
 *
 * What is checked: FIFO order and batching of queued appends into one
 * RPC, with each handle's offsets; batches split where register options
 * differ; retries of routing statuses and transport errors until commit;
 * a terminal status failing the batch, what is queued behind it and later
 * appends (sticky); the check_registers exception (retried); back-pressure
 * when the buffer is full; flush; cancellation.
 *
 * Lock rule: S.mu guards all of S. The handler (a lib/rpc handler thread)
 * and the tests (the main thread) read and write S only under S.mu, the
 * tests through the helpers below: the RPC's way through grpc orders them
 * in fact, but ThreadSanitizer sees no order there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/lib/client_int.h"
#include "common/clock.h"
#include "gazette/append_service.h"

#define J "a/journal"
#define GRPC_UNAVAILABLE_ACTION (-1)
#define MAX_RPCS 64

static struct gaz_rpc_server *g_srv;
static char g_addr[64];

/* What the scripted broker saw, and how it answers. */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int calls;
	int hold;                  /* call number held until released, or -1 */
	bool holding;              /* that call is waiting for release */
	int (*script)(int n);      /* status or GRPC_UNAVAILABLE_ACTION; NULL = OK */
	char data[1 << 16];        /* the journal */
	size_t len;
	size_t rpc_bytes[MAX_RPCS];
	bool rpc_regs[MAX_RPCS];   /* the RPC carried union_registers */
} S = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static Protocol__ProcessSpec__ID g_pid = PROTOCOL__PROCESS_SPEC__ID__INIT;
static Protocol__ProcessSpec__ID *g_members[1] = {&g_pid};
static Protocol__Route g_route = PROTOCOL__ROUTE__INIT;
static Protocol__Header__Etcd g_etcd = PROTOCOL__HEADER__ETCD__INIT;
static Protocol__Header g_hdr = PROTOCOL__HEADER__INIT;

static void init_header(void)
{
	g_pid.zone = "local";
	g_pid.suffix = "broker-1";
	g_route.n_members = 1;
	g_route.members = g_members;
	g_etcd.cluster_id = 1;
	g_etcd.member_id = 2;
	g_etcd.revision = 3;
	g_etcd.raft_term = 4;
	g_hdr.process_id = &g_pid;
	g_hdr.route = &g_route;
	g_hdr.etcd = &g_etcd;
}

/* recv_append collects the content of one Append stream into buf[*len];
 * false when it ended without the commit message. */
static bool recv_append(struct gaz_rpc_call *call, char *buf, size_t cap, size_t *len,
			bool *regs)
{
	Protocol__AppendRequest *m = NULL;
	bool first = true, commit = false;

	*len = 0;
	while (gaz_rpc_recv(call, &protocol__append_request__descriptor, (ProtobufCMessage **)&m,
			    GAZ_DEADLINE_NEVER) == 0) {
		if (first)
			*regs = m->union_registers != NULL;
		if (!first && m->content.len && *len + m->content.len <= cap) {
			memcpy(buf + *len, m->content.data, m->content.len);
			*len += m->content.len;
		}
		commit = !first && m->content.len == 0;
		first = false;
		protobuf_c_message_free_unpacked(&m->base, NULL);
	}
	return commit;
}

/* answer sends the scripted response for call n of `len` bytes. */
static void answer(struct gaz_rpc_call *call, int action, const char *buf, size_t len)
{
	Protocol__AppendResponse r = PROTOCOL__APPEND_RESPONSE__INIT;
	Protocol__Fragment commit = PROTOCOL__FRAGMENT__INIT;
	Protocol__LabelSet regs = PROTOCOL__LABEL_SET__INIT;

	if (action == GRPC_UNAVAILABLE_ACTION) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_UNAVAILABLE, "scripted outage");
		return;
	}
	r.status = (Protocol__Status)action;
	r.header = &g_hdr;
	if (action == PROTOCOL__STATUS__OK) {
		pthread_mutex_lock(&S.mu);
		commit.begin = (int64_t)S.len;
		memcpy(S.data + S.len, buf, len);
		S.len += len;
		commit.end = (int64_t)S.len;
		pthread_mutex_unlock(&S.mu);
		commit.journal = J;
		commit.compression_codec = PROTOCOL__COMPRESSION_CODEC__NONE;
		r.commit = &commit;
	}
	if (action == PROTOCOL__STATUS__OK || action == PROTOCOL__STATUS__REGISTER_MISMATCH)
		r.registers = &regs;
	gaz_rpc_finish(call, &r.base, GAZ_GRPC_OK, NULL);
}

static void h_append(struct gaz_rpc_call *call, void *arg)
{
	static char buf[1 << 16];
	static pthread_mutex_t one = PTHREAD_MUTEX_INITIALIZER;
	size_t len;
	bool regs = false;
	int n, action;

	(void)arg;
	pthread_mutex_lock(&one); /* the service sends one RPC at a time */
	if (!recv_append(call, buf, sizeof(buf), &len, &regs)) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_UNKNOWN, "unexpected EOF");
		pthread_mutex_unlock(&one);
		return;
	}
	pthread_mutex_lock(&S.mu);
	n = S.calls++;
	if (n < MAX_RPCS) {
		S.rpc_bytes[n] = len;
		S.rpc_regs[n] = regs;
	}
	while (S.hold == n) {
		S.holding = true;
		pthread_cond_broadcast(&S.cv);
		pthread_cond_wait(&S.cv, &S.mu);
	}
	S.holding = false;
	action = S.script ? S.script(n) : PROTOCOL__STATUS__OK;
	pthread_mutex_unlock(&S.mu);
	answer(call, action, buf, len);
	pthread_mutex_unlock(&one);
}

/* ---- helpers ------------------------------------------------------------------ */

static struct gaz_client *g_client;
static struct gaz_append_service *g_svc;

static int reset(void **state)
{
	struct gaz_client_opts o = {.broker_address = g_addr};
	struct gaz_status st = {0};

	(void)state;
	pthread_mutex_lock(&S.mu);
	S.calls = 0;
	S.hold = -1;
	S.holding = false;
	S.script = NULL;
	S.len = 0;
	memset(S.rpc_bytes, 0, sizeof(S.rpc_bytes));
	memset(S.rpc_regs, 0, sizeof(S.rpc_regs));
	pthread_mutex_unlock(&S.mu);
	return gaz_client_new(&o, &g_client, &st);
}

static int cleanup(void **state)
{
	(void)state;
	gaz_append_service_free(g_svc);
	g_svc = NULL;
	gaz_client_free(g_client);
	g_client = NULL;
	return 0;
}

static void service(size_t buffer, size_t batch)
{
	struct gaz_append_service_opts o = {.max_buffered_bytes = buffer, .max_batch_bytes = batch};
	struct gaz_status st = {0};

	assert_int_equal(gaz_append_service_new(g_client, &o, &g_svc, &st), 0);
}

static struct gaz_append_handle *queue(const char *text, const Protocol__LabelSet *regs)
{
	struct gaz_append_opts o = {.journal = J, .union_registers = regs};
	struct gaz_append_handle *h = NULL;
	struct gaz_status st = {0};

	assert_int_equal(gaz_append_service_append(g_svc, &o, text, strlen(text), &h, &st), 0);
	return h;
}

/* hold_first holds the next RPC (call n) and waits until it arrived. */
static void hold_call(int n)
{
	pthread_mutex_lock(&S.mu);
	S.hold = n;
	pthread_mutex_unlock(&S.mu);
}

static void wait_held(void)
{
	pthread_mutex_lock(&S.mu);
	while (!S.holding)
		pthread_cond_wait(&S.cv, &S.mu);
	pthread_mutex_unlock(&S.mu);
}

static void release(void)
{
	pthread_mutex_lock(&S.mu);
	S.hold = -1;
	pthread_cond_broadcast(&S.cv);
	pthread_mutex_unlock(&S.mu);
}

static int calls(void)
{
	int n;

	pthread_mutex_lock(&S.mu);
	n = S.calls;
	pthread_mutex_unlock(&S.mu);
	return n;
}

/* set_script makes the broker answer call n with script(n). */
static void set_script(int (*script)(int n))
{
	pthread_mutex_lock(&S.mu);
	S.script = script;
	pthread_mutex_unlock(&S.mu);
}

/* journal_len: the journal's length in bytes. */
static size_t journal_len(void)
{
	size_t len;

	pthread_mutex_lock(&S.mu);
	len = S.len;
	pthread_mutex_unlock(&S.mu);
	return len;
}

/* journal_is: whether the journal starts with want[0, len). */
static bool journal_is(const char *want, size_t len)
{
	bool eq;

	pthread_mutex_lock(&S.mu);
	eq = S.len >= len && memcmp(S.data, want, len) == 0;
	pthread_mutex_unlock(&S.mu);
	return eq;
}

/* rpc_bytes: the content bytes RPC n carried. */
static size_t rpc_bytes(int n)
{
	size_t len;

	pthread_mutex_lock(&S.mu);
	len = S.rpc_bytes[n];
	pthread_mutex_unlock(&S.mu);
	return len;
}

/* rpc_regs: whether RPC n carried union_registers. */
static bool rpc_regs(int n)
{
	bool regs;

	pthread_mutex_lock(&S.mu);
	regs = S.rpc_regs[n];
	pthread_mutex_unlock(&S.mu);
	return regs;
}

static void expect_ok(struct gaz_append_handle *h, int64_t begin, int64_t end)
{
	struct gaz_append_result res;
	struct gaz_status st = {0};

	assert_int_equal(gaz_append_handle_wait(h, 10000, &res, &st), 0);
	assert_int_equal(res.begin, begin);
	assert_int_equal(res.end, end);
	assert_true(res.batch_begin <= begin && end <= res.batch_end);
	gaz_append_handle_free(h);
}

static int expect_fail(struct gaz_append_handle *h, const char *needle)
{
	struct gaz_status st = {0};
	int rc = gaz_append_handle_wait(h, 10000, NULL, &st);

	assert_true(rc < 0);
	assert_non_null(strstr(st.msg, needle));
	gaz_append_handle_free(h);
	return rc;
}

/* ---- tests ------------------------------------------------------------------------ */

/* Appends queued behind an RPC in flight go together, in queue order. */
static void test_order_and_batching(void **state)
{
	struct gaz_append_handle *h[50];
	char rec[16], want[1024] = "";

	(void)state;
	service(0, 0);
	hold_call(0);
	h[0] = queue("r00,", NULL);
	wait_held();
	for (int i = 1; i < 50; i++) {
		snprintf(rec, sizeof(rec), "r%02d,", i);
		h[i] = queue(rec, NULL);
	}
	release();
	for (int i = 0; i < 50; i++) {
		snprintf(rec, sizeof(rec), "r%02d,", i);
		strcat(want, rec);
		expect_ok(h[i], i * 4, i * 4 + 4);
	}
	assert_int_equal(journal_len(), 200);
	assert_true(journal_is(want, 200));
	assert_int_equal(calls(), 2); /* the held one, then one batch of 49 */
	assert_int_equal(rpc_bytes(1), 49 * 4);
}

/* A batch never exceeds max_batch_bytes; register options split batches. */
static void test_batch_bounds(void **state)
{
	Protocol__Label l = PROTOCOL__LABEL__INIT, *lp = &l;
	Protocol__LabelSet regs = PROTOCOL__LABEL_SET__INIT;
	struct gaz_append_handle *h[8];

	(void)state;
	l.name = "owner";
	l.value = "me";
	regs.n_labels = 1;
	regs.labels = &lp;
	service(4096, 8);
	hold_call(0);
	h[0] = queue("aaaa", NULL);
	wait_held();
	h[1] = queue("bbbb", NULL);
	h[2] = queue("cccc", NULL);
	h[3] = queue("dddd", NULL); /* b+c fill 8 bytes: d starts a new batch */
	h[4] = queue("eeee", &regs);
	h[5] = queue("ffff", &regs);
	h[6] = queue("gggg", NULL);
	release();
	for (int i = 0; i < 7; i++)
		expect_ok(h[i], i * 4, i * 4 + 4);
	assert_true(journal_is("aaaabbbbccccddddeeeeffffgggg", 28));
	assert_int_equal(calls(), 5); /* a | b c | d | e f | g */
	assert_int_equal(rpc_bytes(1), 8);
	assert_int_equal(rpc_bytes(2), 4);
	assert_int_equal(rpc_bytes(3), 8);
	assert_true(rpc_regs(3));
	assert_false(rpc_regs(4));
}

static int script_retry(int n)
{
	return n == 0 ? GRPC_UNAVAILABLE_ACTION
		      : n == 1 ? PROTOCOL__STATUS__NOT_JOURNAL_PRIMARY_BROKER
			       : n == 2 ? PROTOCOL__STATUS__SUSPENDED : PROTOCOL__STATUS__OK;
}

/* Transport errors and non-terminal statuses are retried until commit. */
static void test_retries(void **state)
{
	struct gaz_append_result res;
	struct gaz_append_handle *h;
	struct gaz_status st = {0};

	(void)state;
	service(0, 0);
	set_script(script_retry);
	h = queue("hello", NULL);
	assert_int_equal(gaz_append_handle_wait(h, 10000, &res, &st), 0);
	assert_int_equal(res.batches, 4);
	assert_int_equal(res.begin, 0);
	assert_int_equal(res.end, 5);
	gaz_append_handle_free(h);
	assert_int_equal(journal_len(), 5); /* written once: failed attempts commit nothing */
	assert_int_equal(calls(), 4);
}

static int script_wrong_offset(int n)
{
	return n == 0 ? PROTOCOL__STATUS__WRONG_APPEND_OFFSET : PROTOCOL__STATUS__OK;
}

/* A terminal status fails the batch, what queued behind it, and later
 * appends; nothing after it is written. */
static void test_terminal_is_sticky(void **state)
{
	struct gaz_append_opts o = {.journal = J};
	struct gaz_append_handle *a, *b, *c, *d = NULL;
	struct gaz_status st = {0};

	(void)state;
	service(0, 0);
	set_script(script_wrong_offset);
	hold_call(0);
	a = queue("first", NULL);
	wait_held();
	b = queue("second", NULL);
	c = queue("third", NULL);
	release();
	assert_int_equal(expect_fail(a, "WRONG_APPEND_OFFSET"), GAZ_ERANGE);
	assert_int_equal(expect_fail(b, "failed earlier"), GAZ_ERANGE);
	assert_int_equal(expect_fail(c, "WRONG_APPEND_OFFSET"), GAZ_ERANGE);
	assert_int_equal(gaz_append_service_append(g_svc, &o, "later", 5, &d, &st), GAZ_ERANGE);
	assert_null(d);
	assert_non_null(strstr(st.msg, "WRONG_APPEND_OFFSET"));
	assert_int_equal(calls(), 1);
	assert_int_equal(journal_len(), 0);
}

static int script_mismatch_once(int n)
{
	return n == 0 ? PROTOCOL__STATUS__REGISTER_MISMATCH : PROTOCOL__STATUS__OK;
}

/* With check_registers, even REGISTER_MISMATCH is retried (Gazette). */
static void test_check_registers_retried(void **state)
{
	Protocol__LabelSelector sel = PROTOCOL__LABEL_SELECTOR__INIT;
	Protocol__LabelSet inc = PROTOCOL__LABEL_SET__INIT;
	Protocol__Label l = PROTOCOL__LABEL__INIT, *lp = &l;
	struct gaz_append_opts o = {.journal = J, .check_registers = &sel};
	struct gaz_append_handle *h = NULL;
	struct gaz_append_result res;
	struct gaz_status st = {0};

	(void)state;
	l.name = "owner";
	l.value = "me";
	inc.n_labels = 1;
	inc.labels = &lp;
	sel.include = &inc;
	service(0, 0);
	set_script(script_mismatch_once);
	assert_int_equal(gaz_append_service_append(g_svc, &o, "fenced", 6, &h, &st), 0);
	assert_int_equal(gaz_append_handle_wait(h, 10000, &res, &st), 0);
	assert_int_equal(res.batches, 2);
	gaz_append_handle_free(h);
}

struct producer {
	int n;
	atomic_int queued;
};

static void *produce(void *arg)
{
	struct producer *p = arg;
	char rec[200];

	memset(rec, 'x', sizeof(rec));
	for (int i = 0; i < p->n; i++) {
		struct gaz_append_opts o = {.journal = J};
		struct gaz_status st = {0};

		if (gaz_append_service_append(g_svc, &o, rec, sizeof(rec), NULL, &st))
			break;
		atomic_fetch_add(&p->queued, 1);
	}
	return NULL;
}

/* A full buffer blocks the producer until a batch completes. */
static void test_back_pressure(void **state)
{
	struct producer p = {.n = 20};
	struct gaz_status st = {0};
	pthread_t t;
	int stalled;

	(void)state;
	/* Room for 3 appends of 200 (+128) bytes. */
	service(3 * (200 + GAZ_APPEND_SERVICE_ENTRY_COST), 400);
	hold_call(0);
	atomic_init(&p.queued, 0);
	pthread_create(&t, NULL, produce, &p);
	wait_held();
	usleep(200 * 1000);
	stalled = atomic_load(&p.queued);
	assert_int_equal(stalled, 3);
	release();
	pthread_join(t, NULL);
	assert_int_equal(atomic_load(&p.queued), 20);
	assert_int_equal(gaz_append_service_flush(g_svc, &st), 0);
	assert_int_equal(journal_len(), 20 * 200);
	/* Too big for the whole buffer: refused, not blocked forever. */
	{
		struct gaz_append_opts o = {.journal = J};
		static char big[2000];
		assert_int_equal(gaz_append_service_append(g_svc, &o, big, sizeof(big), NULL, &st),
				 GAZ_ERANGE);
	}
}

static int script_down(int n)
{
	(void)n;
	return GRPC_UNAVAILABLE_ACTION;
}

/* Cancelling the client ends retries: pending appends fail promptly. */
static void test_cancel(void **state)
{
	struct gaz_append_handle *h;
	struct gaz_status st = {0};
	int64_t t0;

	(void)state;
	service(0, 0);
	set_script(script_down);
	h = queue("never", NULL);
	while (calls() < 3)
		usleep(10 * 1000);
	t0 = gaz_mono_ns();
	gaz_client_cancel(g_client);
	assert_int_equal(gaz_append_handle_wait(h, 5000, NULL, &st), GAZ_ECANCELLED);
	assert_true(gaz_mono_ns() - t0 < 2 * GAZ_NS_PER_S);
	gaz_append_handle_free(h);
	assert_int_equal(gaz_append_service_flush(g_svc, &st), 0); /* nothing pending */
	gaz_status_clear(&st);
	h = NULL;
	{
		struct gaz_append_opts o = {.journal = J};
		assert_int_equal(gaz_append_service_append(g_svc, &o, "x", 1, &h, &st),
				 GAZ_ECANCELLED);
	}
	assert_null(h);
}

/* Invalid options are refused at queue time. */
static void test_rejects(void **state)
{
	struct gaz_append_opts o = {.journal = J, .offset = 10};
	struct gaz_status st = {0};

	(void)state;
	service(0, 0);
	assert_int_equal(gaz_append_service_append(g_svc, &o, "x", 1, NULL, &st), GAZ_EINVAL);
	o.offset = 0;
	o.journal = "bad journal name";
	assert_int_equal(gaz_append_service_append(g_svc, &o, "x", 1, NULL, &st), GAZ_EINVAL);
	{
		struct gaz_append_service_opts so = {.max_buffered_bytes = 10, .max_batch_bytes = 20};
		struct gaz_append_service *s2 = NULL;
		assert_int_equal(gaz_append_service_new(g_client, &so, &s2, &st), GAZ_EINVAL);
	}
}

static int group_setup(void **state)
{
	int port;

	(void)state;
	init_header();
	if (gaz_rpc_init(1) || !(g_srv = gaz_rpc_server_new(NULL)))
		return -1;
	gaz_rpc_server_register(g_srv, "/protocol.Journal/Append", h_append, NULL);
	if (gaz_rpc_server_start(g_srv, "127.0.0.1:0", &port))
		return -1;
	snprintf(g_addr, sizeof(g_addr), "http://127.0.0.1:%d", port);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	gaz_rpc_server_free(g_srv);
	gaz_rpc_shutdown();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_order_and_batching, reset, cleanup),
		cmocka_unit_test_setup_teardown(test_batch_bounds, reset, cleanup),
		cmocka_unit_test_setup_teardown(test_retries, reset, cleanup),
		cmocka_unit_test_setup_teardown(test_terminal_is_sticky, reset, cleanup),
		cmocka_unit_test_setup_teardown(test_check_registers_retried, reset, cleanup),
		cmocka_unit_test_setup_teardown(test_back_pressure, reset, cleanup),
		cmocka_unit_test_setup_teardown(test_cancel, reset, cleanup),
		cmocka_unit_test_setup_teardown(test_rejects, reset, cleanup),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
