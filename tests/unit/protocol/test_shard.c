/*
 * test_shard.c - consumer ShardSpec validation against Gazette's
 * ShardSpec.Validate: each rule, in Gazette's order, with its context
 * path and wording, and the shard id token bounds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "protocol/shard.h"

struct fixture {
	Consumer__ShardSpec s;
	Consumer__ShardSpec__Source src[3], *srcs[3];
	Google__Protobuf__Duration max, min;
	Protocol__LabelSet ls;
	Protocol__Label l[3], *lp[3];
};

/* A valid spec: two sources, a recovery log, one label. */
static void setup(struct fixture *f)
{
	memset(f, 0, sizeof(*f));
	consumer__shard_spec__init(&f->s);
	for (int i = 0; i < 3; i++) {
		consumer__shard_spec__source__init(&f->src[i]);
		f->srcs[i] = &f->src[i];
		protocol__label__init(&f->l[i]);
		f->lp[i] = &f->l[i];
	}
	f->src[0].journal = "a/journal";
	f->src[1].journal = "b/journal;meta";
	f->s.sources = f->srcs;
	f->s.n_sources = 2;
	f->s.id = "shard-000";
	f->s.recovery_log_prefix = "recovery/logs";
	f->s.hint_prefix = "/hints";
	google__protobuf__duration__init(&f->max);
	google__protobuf__duration__init(&f->min);
	f->max.seconds = 1;
	f->s.max_txn_duration = &f->max;
	f->s.min_txn_duration = &f->min;
	protocol__label_set__init(&f->ls);
	f->l[0].name = "app.gazette.dev/tag";
	f->l[0].value = "x";
	f->ls.labels = f->lp;
	f->ls.n_labels = 1;
	f->s.labels = &f->ls;
}

static const char *check(const Consumer__ShardSpec *s)
{
	static struct gaz_status st;

	memset(&st, 0, sizeof(st));
	if (gaz_validate_shard_spec(s, &st) == 0)
		return NULL;
	assert_int_equal(st.code, GAZ_EINVAL);
	return st.msg;
}

static void test_valid(void **state)
{
	struct fixture f;

	(void)state;
	setup(&f);
	assert_null(check(&f.s));
	f.s.recovery_log_prefix = f.s.hint_prefix = ""; /* no recovery log at all */
	assert_null(check(&f.s));
	f.s.n_sources = 0;
	f.s.labels = NULL;
	assert_null(check(&f.s));
}

static void test_id(void **state)
{
	struct fixture f;

	(void)state;
	setup(&f);
	f.s.id = "abc";
	assert_string_equal(check(&f.s), "Id: invalid length (3; expected 4 <= length <= 512)");
	f.s.id = "shard#1";
	assert_non_null(strstr(check(&f.s), "Id: not a valid token"));
	f.s.id = NULL;
	assert_non_null(strstr(check(&f.s), "Id: invalid length (0;"));
	assert_int_equal(gaz_validate_shard_id("a/b/c.d-e_f+g", NULL), 0);
	assert_int_equal(gaz_validate_shard_id("a b c", NULL), GAZ_EINVAL);
}

static void test_recovery_log_and_hints(void **state)
{
	struct fixture f;

	(void)state;
	setup(&f);
	f.s.recovery_log_prefix = "/abs";
	assert_non_null(strstr(check(&f.s), "RecoveryLogPrefix: "));
	f.s.recovery_log_prefix = "logs";
	f.s.id = "a//b";
	assert_non_null(strstr(check(&f.s), "RecoveryLogPrefix: "));
	f.s.id = "shard-000";
	f.s.recovery_log_prefix = "";
	assert_string_equal(check(&f.s), "invalid non-empty HintPrefix with empty RecoveryLogPrefix (/hints)");
	f.s.recovery_log_prefix = "logs";
	f.s.hint_prefix = "hints";
	assert_string_equal(check(&f.s), "HintPrefix is not an absolute, clean, non-directory path (hints)");
	f.s.hint_prefix = "/hints/";
	assert_non_null(check(&f.s));
	f.s.hint_prefix = "/a/../b";
	assert_non_null(check(&f.s));
	f.s.hint_prefix = "";
	assert_non_null(check(&f.s));
	f.s.hint_prefix = "/";
	assert_null(check(&f.s));
	f.s.hint_backups = -1;
	assert_string_equal(check(&f.s), "invalid HintBackups (-1; expected >= 0)");
}

static void test_durations(void **state)
{
	struct fixture f;

	(void)state;
	setup(&f);
	f.min.seconds = -2;
	assert_string_equal(check(&f.s), "invalid MinTxnDuration (-2000000000; expected >= 0)");
	f.min.seconds = 0;
	f.max.seconds = 0;
	assert_string_equal(check(&f.s), "invalid MaxTxnDuration (0; expected > 0)");
	f.s.max_txn_duration = NULL; /* absent is zero */
	assert_string_equal(check(&f.s), "invalid MaxTxnDuration (0; expected > 0)");
	f.s.max_txn_duration = &f.max;
	f.max.nanos = 1;
	assert_null(check(&f.s));
}

static void test_labels(void **state)
{
	struct fixture f;

	(void)state;
	setup(&f);
	f.l[0].name = "id";
	f.l[0].value = "x";
	assert_string_equal(check(&f.s), "Labels cannot include label \"id\"");
	f.l[0].name = "content-type";
	f.l[0].value = "a/b";
	f.l[1].name = "content-type";
	f.l[1].value = "c/d";
	f.ls.n_labels = 2;
	assert_non_null(strstr(check(&f.s), "LabelSet: expected single-value Label has multiple values"));
	f.l[0].name = "zz";
	assert_non_null(strstr(check(&f.s), "LabelSet: "));  /* not sorted */
}

static void test_sources(void **state)
{
	struct fixture f;

	(void)state;
	setup(&f);
	f.src[1].journal = "a/journal";
	assert_string_equal(check(&f.s), "Sources.Journal not in unique, sorted order "
				     "(index 1; a/journal <= a/journal)");
	f.src[1].journal = "b/j";
	assert_non_null(strstr(check(&f.s), "Sources[1].Journal: invalid length (3;"));
	f.src[1].journal = "b/journal";
	f.src[0].min_offset = -1;
	assert_string_equal(check(&f.s), "Sources[0]: invalid MinOffset (-1; expected > 0)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_id),
		cmocka_unit_test(test_recovery_log_and_hints),
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_labels),
		cmocka_unit_test(test_sources),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
