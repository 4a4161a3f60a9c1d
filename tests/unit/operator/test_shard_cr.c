/*
 * test_shard_cr.c - ShardSpec CR <-> protobuf: field mapping, source and
 * label ordering, durations, errors naming the field, the round trip, and
 * value comparison as drift correction uses it (including against a spec
 * packed and unpacked again, as read back from etcd).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gazette/duration.h"
#include "operator/shard_cr.h"
#include "protocol/shard.h"

#define SEC INT64_C(1000000000)

static const char full[] =
	"{\"name\": \"shards/part-000\", \"etcdPrefix\": \"/gazette/consumers/app\","
	" \"deletionPolicy\": \"Delete\","
	" \"sources\": [{\"journal\": \"b/journal\", \"minOffset\": 1024},"
	"               {\"journal\": \"a/journal;meta\"}],"
	" \"recoveryLogPrefix\": \"recovery/app\", \"hintPrefix\": \"/gazette/hints\","
	" \"hintBackups\": 2, \"maxTxnDuration\": \"1s\", \"minTxnDuration\": \"10ms\","
	" \"disable\": true, \"hotStandbys\": 1,"
	" \"labels\": [{\"name\": \"app.gazette.dev/tag\", \"value\": \"b\"},"
	"              {\"name\": \"app.gazette.dev/tag\", \"value\": \"a\"}],"
	" \"disableWaitForAck\": true, \"ringBufferSize\": 4096, \"readChannelSize\": 4294967295}";

static json_t *load(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, 0, &e);

	assert_non_null(j);
	return j;
}

static int64_t ns_of(const Google__Protobuf__Duration *d)
{
	int64_t ns = -1;

	assert_int_equal(gaz_duration_from_pb(d, &ns, NULL), 0);
	return ns;
}

static void test_cr_to_spec(void **state)
{
	json_t *j = load(full);
	Consumer__ShardSpec *s = NULL;
	struct gaz_status st = {0};

	(void)state;
	assert_int_equal(gaz_shard_cr_to_spec(j, &s, &st), 0);
	assert_string_equal(s->id, "shards/part-000");
	assert_int_equal(s->n_sources, 2);
	assert_string_equal(s->sources[0]->journal, "a/journal;meta"); /* sorted */
	assert_int_equal(s->sources[0]->min_offset, 0);
	assert_string_equal(s->sources[1]->journal, "b/journal");
	assert_int_equal(s->sources[1]->min_offset, 1024);
	assert_string_equal(s->recovery_log_prefix, "recovery/app");
	assert_string_equal(s->hint_prefix, "/gazette/hints");
	assert_int_equal(s->hint_backups, 2);
	assert_int_equal(ns_of(s->max_txn_duration), SEC);
	assert_int_equal(ns_of(s->min_txn_duration), SEC / 100);
	assert_true(s->disable && s->disable_wait_for_ack);
	assert_int_equal(s->hot_standbys, 1);
	assert_int_equal(s->labels->n_labels, 2);
	assert_string_equal(s->labels->labels[0]->value, "a");
	assert_int_equal(s->ring_buffer_size, 4096);
	assert_int_equal(s->read_channel_size, UINT32_MAX);
	assert_int_equal(gaz_validate_shard_spec(s, &st), 0);
	protobuf_c_message_free_unpacked(&s->base, NULL);
	json_decref(j);
}

static void expect_error(const char *text, const char *msg)
{
	json_t *j = load(text);
	Consumer__ShardSpec *s = NULL;
	struct gaz_status st = {0};

	assert_int_equal(gaz_shard_cr_to_spec(j, &s, &st), GAZ_EINVAL);
	assert_null(s);
	if (!strstr(st.msg, msg))
		fail_msg("got \"%s\", want \"%s\"", st.msg, msg);
	json_decref(j);
}

static void test_errors(void **state)
{
	(void)state;
	expect_error("[]", "spec: not an object");
	expect_error("{\"name\": 7}", "spec.name: not a string");
	expect_error("{\"name\": \"abcd\", \"maxTxnDuration\": \"1d\"}", "spec.maxTxnDuration: ");
	expect_error("{\"name\": \"abcd\", \"hotStandbys\": -1}", "spec.hotStandbys: out of range");
	expect_error("{\"name\": \"abcd\", \"hotStandbys\": 4294967296}", "spec.hotStandbys: out of range");
	expect_error("{\"name\": \"abcd\", \"sources\": [{}]}", "spec.sources[0].journal: missing");
	expect_error("{\"name\": \"abcd\", \"sources\": [{\"journal\": \"a/b/c\", \"minOffset\": \"x\"}]}",
		     "spec.sources[0].minOffset: not an integer");
	expect_error("{\"name\": \"abcd\", \"disable\": \"yes\"}", "spec.disable: not a boolean");
	expect_error("{\"name\": \"abcd\", \"labels\": [{\"value\": \"x\"}]}", "spec.labels[0].name: missing");
}

static void test_round_trip_and_equal(void **state)
{
	json_t *j = load(full), *back;
	Consumer__ShardSpec *a = NULL, *b = NULL, *c;
	struct gaz_status st = {0};
	uint8_t buf[4096];

	(void)state;
	assert_int_equal(gaz_shard_cr_to_spec(j, &a, &st), 0);
	assert_non_null(back = gaz_shard_spec_to_cr(a));
	assert_string_equal(json_string_value(json_object_get(back, "maxTxnDuration")), "1s");
	assert_string_equal(json_string_value(json_object_get(back, "minTxnDuration")), "10ms");
	assert_null(json_object_get(back, "etcdPrefix"));
	assert_int_equal(gaz_shard_cr_to_spec(back, &b, &st), 0);
	assert_true(gaz_shard_spec_equal(a, b));
	/* As read back from etcd. */
	size_t n = consumer__shard_spec__pack(a, buf);
	assert_non_null(c = consumer__shard_spec__unpack(NULL, n, buf));
	assert_true(gaz_shard_spec_equal(a, c));
	/* Every field counts. */
	c->hot_standbys = 2;
	assert_false(gaz_shard_spec_equal(a, c));
	c->hot_standbys = a->hot_standbys;
	c->sources[1]->min_offset = 1;
	assert_false(gaz_shard_spec_equal(a, c));
	c->sources[1]->min_offset = a->sources[1]->min_offset;
	c->min_txn_duration->nanos += 1;
	assert_false(gaz_shard_spec_equal(a, c));
	c->min_txn_duration->nanos -= 1;
	c->read_channel_size = 0;
	assert_false(gaz_shard_spec_equal(a, c));
	c->read_channel_size = a->read_channel_size;
	assert_true(gaz_shard_spec_equal(a, c));
	/* A zero duration equals an absent one. */
	json_object_del(j, "minTxnDuration");
	protobuf_c_message_free_unpacked(&b->base, NULL);
	assert_int_equal(gaz_shard_cr_to_spec(j, &b, &st), 0);
	google__protobuf__duration__free_unpacked(c->min_txn_duration, NULL);
	c->min_txn_duration = NULL;
	assert_true(gaz_shard_spec_equal(b, c));
	protobuf_c_message_free_unpacked(&a->base, NULL);
	protobuf_c_message_free_unpacked(&b->base, NULL);
	protobuf_c_message_free_unpacked(&c->base, NULL);
	json_decref(back);
	json_decref(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cr_to_spec),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_round_trip_and_equal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
