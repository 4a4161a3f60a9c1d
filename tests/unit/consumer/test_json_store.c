/* test_json_store.c - the JSON-file consumer store on a real directory:
 * a checkpoint and state round trip; abort and a failed commit put the
 * state back and leave the file as it was; a second instance's restore
 * fences the first (its commit fails, its state never lands); a process
 * killed with SIGKILL mid-commit (between the temporary file and the
 * rename, and at random moments of a commit loop) leaves the last
 * committed file whole; a malformed file is a clear error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../../consumer/json_store.c"

#include <ftw.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

static char g_dir[64];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(p);
}

static int setup(void **state)
{
	(void)state;
	snprintf(g_dir, sizeof g_dir, "/tmp/test_json_store.XXXXXX");
	return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	json_store_before_rename = NULL;
	return nftw(g_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static struct gaz_store *open_store(const char *fqn)
{
	struct gaz_status st = {0};
	struct gaz_store *s = gaz_json_store_open(g_dir, fqn, &st);
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
	int rc = s->ops->begin(s, st);
	return rc ? rc : s->ops->commit(s, (const uint8_t *)cp, strlen(cp), st);
}

static json_int_t get_int(struct gaz_store *s, const char *key)
{
	return json_integer_value(json_object_get(gaz_json_store_state(s), key));
}

static void set_int(struct gaz_store *s, const char *key, json_int_t v)
{
	json_object_set_new(gaz_json_store_state(s), key, json_integer(v));
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *b = calloc(1, 1 << 20);
	if (f) {
		size_t n = fread(b, 1, (1 << 20) - 1, f);
		b[n] = 0;
		fclose(f);
	}
	return b;
}

static void path_of(const char *name, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s", g_dir, name);
}

static void test_round_trip(void **state)
{
	(void)state;
	struct gaz_status st = {0};
	struct gaz_store *s = open_store("/consumer.test/items/shard A");
	char *cp = restore(s), path[128];
	assert_string_equal(cp, "");
	free(cp);
	assert_int_equal(json_object_size(gaz_json_store_state(s)), 0);
	set_int(s, "count", 1);
	/* Binary checkpoint bytes, NUL included. */
	uint8_t bin[] = {0x0a, 0x00, 0xff, 0x10, 0x80};
	assert_int_equal(s->ops->begin(s, &st), 0);
	assert_int_equal(s->ops->commit(s, bin, sizeof bin, &st), 0);
	s->ops->close(s);

	/* The name: FQN escaped, so one flat file per shard. */
	path_of("%2Fconsumer.test%2Fitems%2Fshard%20A.json", path, sizeof path);
	assert_int_equal(access(path, F_OK), 0);

	s = open_store("/consumer.test/items/shard A");
	uint8_t *b;
	size_t n;
	assert_int_equal(s->ops->restore_checkpoint(s, &b, &n, &st), 0);
	assert_int_equal(n, sizeof bin);
	assert_memory_equal(b, bin, n);
	free(b);
	assert_int_equal(get_int(s, "count"), 1);
	s->ops->close(s);

	/* Each restore bumped the fence on disk: 1, then 2. */
	json_t *doc = json_load_file(path, 0, NULL);
	assert_int_equal(json_integer_value(json_object_get(doc, "fence")), 2);
	assert_string_equal(json_string_value(json_object_get(doc, "shard")), "/consumer.test/items/shard A");
	json_decref(doc);
}

static void test_abort_and_failed_commit_keep_nothing(void **state)
{
	(void)state;
	struct gaz_status st = {0};
	struct gaz_store *s = open_store("shard-abort");
	char path[128], tmp[160];
	free(restore(s));
	set_int(s, "n", 1);
	assert_int_equal(commit(s, "cp-1", &st), 0);

	/* abort: the in-memory state is the committed one again. */
	assert_int_equal(s->ops->begin(s, &st), 0);
	set_int(s, "n", 2);
	set_int(s, "other", 7);
	s->ops->abort(s);
	assert_int_equal(get_int(s, "n"), 1);
	assert_null(json_object_get(gaz_json_store_state(s), "other"));

	/* A commit that fails on I/O (its temporary file cannot be written:
	 * a directory is in the way) keeps neither the state nor the
	 * checkpoint, on disk or in memory. */
	path_of("shard-abort.json", path, sizeof path);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	char *before = slurp(path);
	assert_int_equal(mkdir(tmp, 0755), 0);
	set_int(s, "n", 3);
	assert_int_equal(commit(s, "cp-3", &st), GAZ_EIO);
	assert_non_null(strstr(st.msg, "commit of shard \"shard-abort\" failed"));
	assert_non_null(strstr(st.msg, ".tmp"));
	char *after = slurp(path);
	assert_string_equal(before, after);
	free(before), free(after);
	assert_int_equal(get_int(s, "n"), 1);
	assert_int_equal(rmdir(tmp), 0);

	/* And the store goes on: the next commit lands. */
	set_int(s, "n", 4);
	gaz_status_clear(&st);
	assert_int_equal(commit(s, "cp-4", &st), 0);
	s->ops->close(s);
	s = open_store("shard-abort");
	char *cp = restore(s);
	assert_string_equal(cp, "cp-4");
	assert_int_equal(get_int(s, "n"), 4);
	free(cp);
	s->ops->close(s);
}

/* Two instances of one shard (a zombie and the new primary): the second's
 * restore fences the first, whose commit fails with the fence error and
 * whose state never reaches the file. */
static void test_fencing_across_two_opens(void **state)
{
	(void)state;
	struct gaz_status st = {0};
	struct gaz_store *a = open_store("/c/items/shard-z"), *b = open_store("/c/items/shard-z");
	free(restore(a));
	set_int(a, "who", 1);
	assert_int_equal(commit(a, "a-1", &st), 0);

	assert_int_equal(a->ops->begin(a, &st), 0);
	set_int(a, "who", 2); /* the zombie's change, in flight */
	char *cp = restore(b);
	assert_string_equal(cp, "a-1"); /* b continues from a's last commit */
	free(cp);
	assert_int_equal(get_int(b, "who"), 1);

	assert_int_equal(a->ops->commit(a, (const uint8_t *)"a-2", 3, &st), GAZ_EFENCED);
	assert_non_null(strstr(st.msg, "checkpoint fence was updated (ie, by a new primary)"));
	assert_non_null(strstr(st.msg, "fence 2 in"));
	assert_int_equal(get_int(a, "who"), 1); /* put back */

	set_int(b, "who", 3);
	gaz_status_clear(&st);
	assert_int_equal(commit(b, "b-1", &st), 0);
	/* The zombie stays fenced. */
	set_int(a, "who", 4);
	assert_int_equal(commit(a, "a-3", &st), GAZ_EFENCED);
	a->ops->close(a);
	b->ops->close(b);

	struct gaz_store *c = open_store("/c/items/shard-z");
	cp = restore(c);
	assert_string_equal(cp, "b-1");
	assert_int_equal(get_int(c, "who"), 3);
	free(cp);
	c->ops->close(c);
}

static void die(const char *tmp_path)
{
	(void)tmp_path;
	raise(SIGKILL);
}

/* A child killed with SIGKILL after writing its temporary file, before the
 * rename: the file holds the previous commit, whole. */
static void test_kill_between_write_and_rename(void **state)
{
	(void)state;
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct gaz_status st = {0};
		struct gaz_store *s = gaz_json_store_open(g_dir, "shard-crash", &st);
		uint8_t *cp;
		size_t n;
		if (!s || s->ops->restore_checkpoint(s, &cp, &n, &st) != 0)
			_exit(2);
		set_int(s, "n", 1);
		if (commit(s, "1", &st) != 0)
			_exit(3);
		set_int(s, "n", 2);
		json_store_before_rename = die;
		commit(s, "2", &st);
		_exit(4); /* not reached */
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

	char tmp[160];
	path_of("shard-crash.json.tmp", tmp, sizeof tmp);
	char *t = slurp(tmp);
	assert_non_null(strstr(t, "\"n\": 2")); /* the commit was under way */
	free(t);

	struct gaz_store *s = open_store("shard-crash");
	char *cp = restore(s);
	assert_string_equal(cp, "1");
	assert_int_equal(get_int(s, "n"), 1);
	free(cp);
	/* The leftover temporary file is overwritten by the next commit. */
	struct gaz_status st = {0};
	set_int(s, "n", 5);
	assert_int_equal(commit(s, "5", &st), 0);
	assert_int_equal(access(tmp, F_OK), -1);
	s->ops->close(s);
}

/* A child commits n = 1, 2, ... (with a large state, so that a good part
 * of each commit is writing) and reports each n once its commit returned;
 * killed with SIGKILL at a random moment, the file must hold one whole
 * commit: n and its checkpoint agree, and it is the last one reported or
 * the one after it (done but not yet reported). */
static void test_kill_at_random_moments(void **state)
{
	(void)state;
	srand((unsigned)time(NULL) ^ (unsigned)getpid());
	for (int round = 0; round < 4; round++) {
		char fqn[32];
		int fds[2];
		snprintf(fqn, sizeof fqn, "shard-random-%d", round);
		assert_int_equal(pipe(fds), 0);
		fflush(NULL);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct gaz_status st = {0};
			struct gaz_store *s = gaz_json_store_open(g_dir, fqn, &st);
			uint8_t *cp;
			size_t n;
			close(fds[0]);
			if (!s || s->ops->restore_checkpoint(s, &cp, &n, &st) != 0)
				_exit(2);
			char *pad = malloc(256 << 10);
			memset(pad, 'x', (256 << 10) - 1);
			pad[(256 << 10) - 1] = 0;
			json_object_set_new(gaz_json_store_state(s), "pad", json_string(pad));
			for (int32_t i = 1;; i++) {
				char c[16];
				snprintf(c, sizeof c, "%d", i);
				set_int(s, "n", i);
				if (commit(s, c, &st) != 0)
					_exit(3);
				if (write(fds[1], &i, sizeof i) != sizeof i)
					_exit(4);
			}
		}
		close(fds[1]);
		usleep((useconds_t)(30000 + rand() % 120000));
		kill(pid, SIGKILL);
		int status;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFSIGNALED(status));
		int32_t i, acked = 0;
		while (read(fds[0], &i, sizeof i) == sizeof i)
			acked = i;
		close(fds[0]);

		struct gaz_store *s = open_store(fqn);
		char *cp = restore(s);
		json_int_t n = get_int(s, "n");
		char want[16];
		snprintf(want, sizeof want, "%lld", (long long)n);
		if (acked == 0 && n == 0) {
			assert_string_equal(cp, ""); /* killed before the first commit */
		} else {
			assert_string_equal(cp, want);
			assert_true(n == acked || n == acked + 1);
			assert_int_equal(strlen(json_string_value(json_object_get(gaz_json_store_state(s), "pad"))),
					 (256 << 10) - 1);
		}
		print_message("round %d: killed after %d acknowledged commits; the file holds commit %lld\n", round,
			      acked, (long long)n);
		free(cp);
		s->ops->close(s);
	}
}

static void test_malformed_file_and_misuse(void **state)
{
	(void)state;
	struct gaz_status st = {0};
	char path[128];
	uint8_t *cp;
	size_t n;
	path_of("shard-bad.json", path, sizeof path);
	FILE *f = fopen(path, "w");
	fputs("{\"fence\": \"one\"}\n", f);
	fclose(f);
	struct gaz_store *s = open_store("shard-bad");
	assert_int_equal(s->ops->restore_checkpoint(s, &cp, &n, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "is not a store file"));
	assert_null(cp);

	f = fopen(path, "w");
	fputs("{\"fence\": 1, \"checkpoint\": \"@@@@\", \"state\": {}}\n", f);
	fclose(f);
	gaz_status_clear(&st);
	assert_int_equal(s->ops->restore_checkpoint(s, &cp, &n, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "not base64"));

	/* A commit before any restore is refused. */
	gaz_status_clear(&st);
	assert_int_equal(s->ops->commit(s, (const uint8_t *)"x", 1, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "no restore_checkpoint"));
	s->ops->close(s);

	/* Not a JSON store: no state. */
	assert_null(gaz_json_store_state(NULL));
	gaz_status_clear(&st);
	assert_null(gaz_json_store_open(g_dir, "", &st));
	assert_int_equal(st.code, GAZ_EINVAL);
	char longname[300];
	memset(longname, '/', sizeof longname - 1);
	longname[sizeof longname - 1] = 0;
	gaz_status_clear(&st);
	assert_null(gaz_json_store_open(g_dir, longname, &st));
	assert_int_equal(st.code, GAZ_ERANGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_abort_and_failed_commit_keep_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fencing_across_two_opens, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kill_between_write_and_rename, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kill_at_random_moments, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed_file_and_misuse, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
