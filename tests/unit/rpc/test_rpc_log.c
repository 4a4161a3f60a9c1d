/*
 * test_rpc_log.c - grpc core's own log lines go out through common/log
 * (the function gaz_rpc_init installs with gpr_set_log_function).
 *
 * Lines are made by grpc itself: gpr_log, which checks grpc's verbosity and
 * calls the installed function, and GRPC_TRACE's tracers. stderr is
 * captured and each line read back with jansson.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "rpc/rpc_int.h"
#include "tests/unit/capture.h"


/* The first JSON line of `out` whose msg contains `needle` (caller
 * decrefs), or NULL. Every line must parse. */
static json_t *find_line(const char *out, const char *needle)
{
	for (const char *l = out; *l;) {
		const char *nl = strchr(l, '\n');
		json_error_t err;
		json_t *o;

		if (!nl)
			fail_msg("unterminated line: %s", l);
		o = json_loadb(l, (size_t)(nl - l), 0, &err);
		if (!o)
			fail_msg("not JSON (%s): %.*s", err.text, (int)(nl - l), l);
		const char *m = json_string_value(json_object_get(o, "msg"));
		if (m && strstr(m, needle))
			return o;
		json_decref(o);
		l = nl + 1;
	}
	return NULL;
}

static const char *jstr(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	if (!s)
		fail_msg("no %s", key);
	return s;
}

/* grpc's ERROR line (its default verbosity lets only these through) comes
 * as one structured line: grpc's text as msg, quotes and all, its trailing
 * newline dropped, the source file and line as a field. */
static void test_grpc_error_line(void **state)
{
	char at[64];
	int line;
	(void)state;
	gaz_log_setup("warn", "json");
	cap_begin();
	line = __LINE__ + 1;
	gpr_log(GPR_ERROR, "call failed: \"%s\" at a=b\n", "/etcdserverpb.KV/Range");
	json_t *o = find_line(cap_end(), "call failed");
	assert_non_null(o);
	assert_string_equal(jstr(o, "msg"), "call failed: \"/etcdserverpb.KV/Range\" at a=b");
	assert_string_equal(jstr(o, "level"), "error");
	assert_string_equal(jstr(o, "component"), "grpc");
	snprintf(at, sizeof(at), "test_rpc_log.c:%d", line);
	assert_string_equal(jstr(o, "file"), at);
	json_decref(o);
}

/* Without GRPC_VERBOSITY grpc drops its INFO and DEBUG lines itself, as
 * before; and our --log.level applies to its errors. */
static void test_grpc_default_verbosity(void **state)
{
	(void)state;
	gaz_log_setup("trace", "json");
	cap_begin();
	gpr_log(GPR_INFO, "an info line");
	gpr_log(GPR_DEBUG, "a debug line");
	assert_string_equal(cap_end(), "");
	gaz_log_setup("fatal", "json");
	cap_begin();
	gpr_log(GPR_ERROR, "an error line");
	assert_string_equal(cap_end(), "");
}

/* The installed function maps each severity and strips the file's
 * directories. */
static void test_hook_direct(void **state)
{
	static const struct {
		gpr_log_severity sev;
		const char *level;
	} m[] = {
		{GPR_LOG_SEVERITY_DEBUG, "debug"},
		{GPR_LOG_SEVERITY_INFO, "info"},
		{GPR_LOG_SEVERITY_ERROR, "error"},
	};
	(void)state;
	gaz_log_setup("trace", "json");
	for (size_t i = 0; i < 3; i++) {
		gpr_log_func_args a = {"src/core/lib/surface/call.cc", 42, m[i].sev, "direct\tline"};
		cap_begin();
		gaz__rpc_log(&a);
		json_t *o = find_line(cap_end(), "direct");
		assert_non_null(o);
		assert_string_equal(jstr(o, "msg"), "direct\tline");
		assert_string_equal(jstr(o, "level"), m[i].level);
		assert_string_equal(jstr(o, "file"), "call.cc:42");
		json_decref(o);
	}
}

/* GRPC_VERBOSITY and GRPC_TRACE keep working: in a child (grpc reads them
 * at grpc_init), DEBUG lets grpc's debug lines and the api tracer's lines
 * through, over our default level. Returns the child's verdict. */
static int child_env(void)
{
	const char *out;
	json_t *a, *b;
	int ok;

	setenv("GRPC_VERBOSITY", "DEBUG", 1);
	setenv("GRPC_TRACE", "api", 1);
	gaz_log_setup("warn", "json");
	cap_begin();
	if (gaz_rpc_init(1))
		return 2;
	gpr_log(GPR_DEBUG, "a debug line");
	out = cap_end();
	a = find_line(out, "a debug line");
	b = find_line(out, "grpc_completion_queue_create");
	ok = a && b && !strcmp(jstr(a, "level"), "debug") &&
	     !strcmp(jstr(b, "component"), "grpc");
	if (!ok)
		fprintf(stderr, "child saw:\n%s", out);
	json_decref(a);
	json_decref(b);
	return ok ? 0 : 1;
}

static void test_grpc_env(void **state)
{
	int status;
	pid_t pid;
	(void)state;

	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child_env());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static int setup(void **state)
{
	(void)state;
	unsetenv("GRPC_VERBOSITY");
	unsetenv("GRPC_TRACE");
	return gaz_rpc_init(1);
}

static int teardown(void **state)
{
	(void)state;
	gaz_rpc_shutdown();
	return 0;
}

int main(void)
{
	/* The child must start before this process starts grpc. */
	const struct CMUnitTest before[] = {
		cmocka_unit_test(test_grpc_env),
	};
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grpc_error_line),
		cmocka_unit_test(test_grpc_default_verbosity),
		cmocka_unit_test(test_hook_direct),
	};
	return cmocka_run_group_tests_name("grpc env", before, NULL, NULL) |
	       cmocka_run_group_tests_name("grpc log", tests, setup, teardown);
}
