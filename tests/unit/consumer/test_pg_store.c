/* test_pg_store.c - the PostgreSQL consumer store against a real server:
 * a checkpoint (Gazette's Checkpoint bytes) round trip and the fence in
 * gazette_checkpoints; the application's rows and the checkpoint commit
 * together, and a commit that fails keeps neither; a zombie (a second
 * store of the same shard restored after the first) is fenced: its commit
 * fails with Gazette's fence error and its rows never appear; a server
 * that is down at open is a clear, retryable error; a server killed
 * mid-transaction fails the commit, and after its restart neither the
 * rows nor the checkpoint are there.
 *
 * The server is GAZ_TEST_PG (a libpq conninfo), else one this test starts
 * with scripts/pg-test.sh; the crash test always starts a private one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "gazette/consumer.h"
#include "gazette/store.h"

struct pg_proc {
	char conninfo[256];
	char dir[PATH_MAX];
};

static char g_script[PATH_MAX];
static struct pg_proc g_own;   /* ours, when GAZ_TEST_PG is unset */
static const char *g_conninfo;
static PGconn *g_db;           /* the test's own look at the tables */

/* find_script: scripts/pg-test.sh from the work tree (make runs tests
 * there) or relative to this binary (<tree>/<build>/tests/consumer/). */
static int find_script(void)
{
	char exe[PATH_MAX];
	ssize_t n;
	if (access("scripts/pg-test.sh", X_OK) == 0)
		return realpath("scripts/pg-test.sh", g_script) ? 0 : -1;
	if ((n = readlink("/proc/self/exe", exe, sizeof exe - 1)) < 0)
		return -1;
	exe[n] = 0;
	snprintf(g_script, sizeof g_script, "%s/../../../scripts/pg-test.sh", dirname(exe));
	return access(g_script, X_OK);
}

/* pg_run runs the script with verb (and dir); with out, reads its first
 * two lines (conninfo, dir) into *out. */
static int pg_run(const char *verb, const char *dir, struct pg_proc *out)
{
	char cmd[PATH_MAX * 2 + 32];
	snprintf(cmd, sizeof cmd, "'%s' %s %s", g_script, verb, dir ? dir : "");
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	if (out) {
		char line[PATH_MAX];
		if (fgets(out->conninfo, sizeof out->conninfo, p))
			out->conninfo[strcspn(out->conninfo, "\n")] = 0;
		if (!dir && fgets(line, sizeof line, p)) {
			line[strcspn(line, "\n")] = 0;
			snprintf(out->dir, sizeof out->dir, "%s", line);
		}
	}
	return pclose(p) == 0 ? 0 : -1;
}

static void sql(const char *q)
{
	PGresult *r = PQexec(g_db, q);
	if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
		fail_msg("%s: %s", q, PQerrorMessage(g_db));
	PQclear(r);
}

/* scalar: the first column of the first row of q, as text ("" if none). */
static const char *scalar(PGconn *c, const char *q)
{
	static char out[256];
	PGresult *r = PQexec(c, q);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		fail_msg("%s: %s", q, PQerrorMessage(c));
	snprintf(out, sizeof out, "%s", PQntuples(r) ? PQgetvalue(r, 0, 0) : "");
	PQclear(r);
	return out;
}

static void app_exec(struct gaz_store *s, const char *q)
{
	PGconn *c = gaz_pg_store_conn(s);
	PGresult *r = PQexec(c, q);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		fail_msg("%s: %s", q, PQerrorMessage(c));
	PQclear(r);
}

static struct gaz_store *open_store(const char *conninfo, const char *fqn)
{
	struct gaz_status st = {0};
	struct gaz_store *s = gaz_pg_store_open(conninfo, fqn, &st);
	if (!s)
		fail_msg("open: %s", st.msg);
	return s;
}

/* restore returns the checkpoint as a string (malloc'd; "" when none). */
static char *restore(struct gaz_store *s)
{
	struct gaz_status st = {0};
	uint8_t *cp;
	size_t n;
	if (s->ops->restore_checkpoint(s, &cp, &n, &st) != 0)
		fail_msg("restore: %s", st.msg);
	char *out = calloc(1, n + 1);
	memcpy(out, cp ? (char *)cp : "", n);
	free(cp);
	return out;
}

static int commit(struct gaz_store *s, const char *cp, struct gaz_status *st)
{
	return s->ops->commit(s, (const uint8_t *)cp, strlen(cp), st);
}

/* fqn makes a shard FQN unique to this run. */
static const char *fqn(const char *name)
{
	static char ring[4][96];
	static int next;
	char *out = ring[next++ % 4];
	snprintf(out, 96, "/gaz-test-%d/items/%s", (int)getpid(), name);
	return out;
}

static const char *fence_of(const char *shard)
{
	char q[256];
	snprintf(q, sizeof q, "SELECT fence FROM gazette_checkpoints WHERE shard_fqn = '%s'", shard);
	return scalar(g_db, q);
}

/* ---- the tests ----------------------------------------------------- */

static void test_checkpoint_round_trip(void **state)
{
	(void)state;
	const char *shard = fqn("round-trip");
	struct gaz_read_through rt = {.journal = "a/journal", .offset = 1234};
	struct gaz_producer_state ps = {
		.journal = "a/journal", .producer = {{1, 2, 3, 4, 5, 6}}, .last_ack = 0x1122334455667788ULL, .begin = -1};
	struct gaz_sequencer_checkpoint seq = {.offsets = &rt, .n_offsets = 1, .states = &ps, .n_states = 1};
	struct gaz_ack_intent ack = {.journal = "b/journal", .intent = (uint8_t *)"ack\0\n", .len = 5};
	struct gaz_status st = {0};
	uint8_t *b, *got;
	size_t n, got_n;
	assert_int_equal(gaz_checkpoint_encode(&seq, &ack, 1, &b, &n, &st), 0);

	struct gaz_store *s = open_store(g_conninfo, shard);
	assert_int_equal(s->ops->restore_checkpoint(s, &got, &got_n, &st), 0);
	assert_int_equal(got_n, 0); /* a shard's first start */
	assert_null(got);
	assert_string_equal(fence_of(shard), "1");
	assert_int_equal(s->ops->begin(s, &st), 0);
	assert_int_equal(s->ops->commit(s, b, n, &st), 0);
	s->ops->close(s);

	s = open_store(g_conninfo, shard);
	assert_int_equal(s->ops->restore_checkpoint(s, &got, &got_n, &st), 0);
	assert_int_equal(got_n, n);
	assert_memory_equal(got, b, n);
	assert_string_equal(fence_of(shard), "2");
	/* And it decodes to what was encoded. */
	struct gaz_sequencer_checkpoint back;
	struct gaz_ack_intent *acks;
	size_t n_acks;
	assert_int_equal(gaz_checkpoint_decode(got, got_n, &back, &acks, &n_acks, &st), 0);
	assert_true(back.n_offsets == 1 && back.offsets[0].offset == 1234);
	assert_true(n_acks == 1 && acks[0].len == 5 && !memcmp(acks[0].intent, "ack\0\n", 5));
	gaz_sequencer_checkpoint_release(&back);
	gaz_ack_intents_free(acks, n_acks);
	/* A commit without begin begins itself (an empty transaction). */
	assert_int_equal(s->ops->commit(s, (const uint8_t *)"", 0, &st), 0);
	s->ops->close(s);
	free(b), free(got);
}

static void test_app_rows_and_checkpoint_commit_together(void **state)
{
	(void)state;
	const char *shard = fqn("atomic");
	char q[256], table[64];
	struct gaz_status st = {0};
	snprintf(table, sizeof table, "app_atomic_%d", (int)getpid());
	snprintf(q, sizeof q, "CREATE TABLE %s (k TEXT PRIMARY KEY, v INTEGER)", table);
	sql(q);

	struct gaz_store *s = open_store(g_conninfo, shard);
	free(restore(s));
	assert_int_equal(s->ops->begin(s, &st), 0);
	snprintf(q, sizeof q, "INSERT INTO %s VALUES ('one', 1), ('two', 2)", table);
	app_exec(s, q);
	/* Not visible to others before the commit. */
	snprintf(q, sizeof q, "SELECT count(*) FROM %s", table);
	assert_string_equal(scalar(g_db, q), "0");
	assert_int_equal(commit(s, "cp-1", &st), 0);
	assert_string_equal(scalar(g_db, q), "2");

	/* A statement of the application's fails (a duplicate key): the
	 * commit fails, and neither the rows nor the checkpoint land. */
	assert_int_equal(s->ops->begin(s, &st), 0);
	snprintf(q, sizeof q, "INSERT INTO %s VALUES ('three', 3)", table);
	app_exec(s, q);
	snprintf(q, sizeof q, "INSERT INTO %s VALUES ('one', 9)", table);
	PQclear(PQexec(gaz_pg_store_conn(s), q));
	assert_int_equal(commit(s, "cp-2", &st), GAZ_EIO);
	assert_non_null(strstr(st.msg, "a statement of the transaction failed; rolled back"));
	snprintf(q, sizeof q, "SELECT count(*) FROM %s", table);
	assert_string_equal(scalar(g_db, q), "2");
	snprintf(q, sizeof q, "SELECT convert_from(checkpoint, 'UTF8') FROM gazette_checkpoints WHERE shard_fqn = '%s'",
		 shard);
	assert_string_equal(scalar(g_db, q), "cp-1");

	/* abort rolls back too. */
	assert_int_equal(s->ops->begin(s, &st), 0);
	snprintf(q, sizeof q, "INSERT INTO %s VALUES ('four', 4)", table);
	app_exec(s, q);
	s->ops->abort(s);
	snprintf(q, sizeof q, "SELECT count(*) FROM %s", table);
	assert_string_equal(scalar(g_db, q), "2");
	s->ops->close(s);
	snprintf(q, sizeof q, "DROP TABLE %s", table);
	sql(q);
}

/* The zombie: store A restored, is in a transaction; store B of the same
 * shard restores (a new primary). A's commit must fail with the fence
 * error, and its rows must not be visible; B goes on from A's last
 * checkpoint. */
static void test_zombie_is_fenced(void **state)
{
	(void)state;
	const char *shard = fqn("zombie");
	char q[256], table[64];
	struct gaz_status st = {0};
	snprintf(table, sizeof table, "app_zombie_%d", (int)getpid());
	snprintf(q, sizeof q, "CREATE TABLE %s (who TEXT)", table);
	sql(q);

	struct gaz_store *a = open_store(g_conninfo, shard), *b = open_store(g_conninfo, shard);
	free(restore(a));
	assert_int_equal(a->ops->begin(a, &st), 0);
	snprintf(q, sizeof q, "INSERT INTO %s VALUES ('a-1')", table);
	app_exec(a, q);
	assert_int_equal(commit(a, "a-1", &st), 0);

	assert_int_equal(a->ops->begin(a, &st), 0);
	snprintf(q, sizeof q, "INSERT INTO %s VALUES ('zombie')", table);
	app_exec(a, q);
	char *cp = restore(b);
	assert_string_equal(cp, "a-1");
	free(cp);
	assert_string_equal(fence_of(shard), "2");

	assert_int_equal(commit(a, "a-2", &st), GAZ_EFENCED);
	assert_non_null(strstr(st.msg, "checkpoint fence was updated (ie, by a new primary)"));
	assert_non_null(strstr(st.msg, shard));
	snprintf(q, sizeof q, "SELECT count(*) FROM %s WHERE who = 'zombie'", table);
	assert_string_equal(scalar(g_db, q), "0");

	assert_int_equal(b->ops->begin(b, &st), 0);
	snprintf(q, sizeof q, "INSERT INTO %s VALUES ('b-1')", table);
	app_exec(b, q);
	gaz_status_clear(&st);
	assert_int_equal(commit(b, "b-1", &st), 0);
	/* The zombie stays fenced. */
	assert_int_equal(commit(a, "a-3", &st), GAZ_EFENCED);
	snprintf(q, sizeof q, "SELECT string_agg(who, ',' ORDER BY who) FROM %s", table);
	assert_string_equal(scalar(g_db, q), "a-1,b-1");
	snprintf(q, sizeof q, "SELECT convert_from(checkpoint, 'UTF8') FROM gazette_checkpoints WHERE shard_fqn = '%s'",
		 shard);
	assert_string_equal(scalar(g_db, q), "b-1");
	a->ops->close(a);
	b->ops->close(b);
	snprintf(q, sizeof q, "DROP TABLE %s", table);
	sql(q);
}

static int free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	bind(fd, (struct sockaddr *)&a, sizeof a);
	getsockname(fd, (struct sockaddr *)&a, &len);
	close(fd);
	return ntohs(a.sin_port);
}

static void test_down_at_open_is_clear(void **state)
{
	(void)state;
	struct gaz_status st = {0};
	char ci[128], where[64];
	int port = free_port();
	snprintf(ci, sizeof ci, "host=127.0.0.1 port=%d user=postgres dbname=postgres", port);
	assert_null(gaz_pg_store_open(ci, fqn("down"), &st));
	assert_int_equal(st.code, GAZ_EUNAVAIL);
	snprintf(where, sizeof where, "cannot connect to server at 127.0.0.1:%d (retryable)", port);
	assert_non_null(strstr(st.msg, where));
	assert_non_null(strstr(st.msg, "Connection refused"));
	assert_null(strchr(st.msg, '\n'));

	gaz_status_clear(&st);
	assert_null(gaz_pg_store_open("host=127.0.0.1 nosuchkey=1", fqn("down"), &st));
	assert_int_equal(st.code, GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "invalid conninfo"));
	assert_null(gaz_pg_store_conn(NULL));
}

/* A private server, killed (every backend at once) while the store's
 * transaction is open: the commit fails; after a restart neither the rows
 * nor the checkpoint are there, and the old store reconnects at its next
 * restore. */
static void test_server_killed_mid_transaction(void **state)
{
	(void)state;
	struct pg_proc priv = {0};
	struct gaz_status st = {0};
	const char *shard = fqn("killed");
	if (pg_run("start", NULL, &priv) != 0)
		fail_msg("cannot start a private postgres with %s", g_script);
	PGconn *db = PQconnectdb(priv.conninfo);
	assert_int_equal(PQstatus(db), CONNECTION_OK);
	PQclear(PQexec(db, "CREATE TABLE app (k TEXT)"));

	struct gaz_store *s = open_store(priv.conninfo, shard);
	free(restore(s));
	assert_int_equal(s->ops->begin(s, &st), 0);
	app_exec(s, "INSERT INTO app VALUES ('kept')");
	assert_int_equal(commit(s, "cp-1", &st), 0);
	assert_int_equal(s->ops->begin(s, &st), 0);
	app_exec(s, "INSERT INTO app VALUES ('lost')");
	PQfinish(db);

	assert_int_equal(pg_run("crash", priv.dir, NULL), 0);
	int rc = commit(s, "cp-2", &st);
	assert_int_equal(rc, GAZ_EUNAVAIL);
	assert_non_null(strstr(st.msg, "connection to server at 127.0.0.1:"));
	assert_non_null(strstr(st.msg, "lost"));
	print_message("commit after the kill: %s\n", st.msg);
	/* While it is down, restore fails the same way. */
	uint8_t *cp;
	size_t n;
	gaz_status_clear(&st);
	assert_int_equal(s->ops->restore_checkpoint(s, &cp, &n, &st), GAZ_EUNAVAIL);
	assert_non_null(strstr(st.msg, "cannot reconnect"));

	struct pg_proc again = {0};
	assert_int_equal(pg_run("resume", priv.dir, &again), 0);
	db = PQconnectdb(again.conninfo);
	assert_int_equal(PQstatus(db), CONNECTION_OK);
	assert_string_equal(scalar(db, "SELECT string_agg(k, ',') FROM app"), "kept");
	char *got = restore(s); /* the old store reconnects */
	assert_string_equal(got, "cp-1");
	free(got);
	s->ops->close(s);
	PQfinish(db);
	pg_run("stop", priv.dir, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_checkpoint_round_trip),
		cmocka_unit_test(test_app_rows_and_checkpoint_commit_together),
		cmocka_unit_test(test_zombie_is_fenced),
		cmocka_unit_test(test_down_at_open_is_clear),
		cmocka_unit_test(test_server_killed_mid_transaction),
	};
	int rc;

	if (find_script() != 0) {
		fprintf(stderr, "test_pg_store: cannot find scripts/pg-test.sh\n");
		return 1;
	}
	g_conninfo = getenv("GAZ_TEST_PG");
	if (!g_conninfo || !*g_conninfo) {
		if (pg_run("start", NULL, &g_own) != 0) {
			fprintf(stderr, "test_pg_store: cannot start postgres with %s (set GAZ_TEST_PG)\n", g_script);
			return 1;
		}
		g_conninfo = g_own.conninfo;
	}
	g_db = PQconnectdb(g_conninfo);
	if (PQstatus(g_db) != CONNECTION_OK) {
		fprintf(stderr, "test_pg_store: cannot connect to %s: %s", g_conninfo, PQerrorMessage(g_db));
		rc = 1;
	} else {
		rc = cmocka_run_group_tests(tests, NULL, NULL);
	}
	PQfinish(g_db);
	if (g_own.dir[0])
		pg_run("stop", g_own.dir, NULL);
	return rc;
}
