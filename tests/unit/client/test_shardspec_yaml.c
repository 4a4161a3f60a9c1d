/*
 * test_shardspec_yaml.c - the shard set YAML (gazctl shards apply / list
 * -o yaml): PushDown of `common:` into every shard (each field, sources
 * only when none, labels unioned by name, id never), delete and revision,
 * strictness with line numbers, the hoisted layout yaml.v2 prints for a
 * shardspace.Set, parse(emit(x)) == x, and the ApplyRequest validation in
 * Gazette's words.
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
#include "gazette/shardspec_yaml.h"
#include "protocol/shard.h"

#define SEC INT64_C(1000000000)

static Consumer__ApplyRequest *parse_ok(const char *yaml)
{
	struct gaz_status st = {0};
	Consumer__ApplyRequest *req = NULL;

	if (gaz_shardspec_yaml_parse(yaml, strlen(yaml), &req, &st))
		fail_msg("parse failed: %s\n%s", st.msg, yaml);
	assert_non_null(req);
	return req;
}

static void parse_fails(const char *yaml, const char *msg)
{
	struct gaz_status st = {0};
	Consumer__ApplyRequest *req = NULL;

	assert_int_equal(gaz_shardspec_yaml_parse(yaml, strlen(yaml), &req, &st), GAZ_EINVAL);
	assert_null(req);
	if (!strstr(st.msg, msg))
		fail_msg("message \"%s\", want \"%s\"", st.msg, msg);
}

static int64_t dur(const Google__Protobuf__Duration *d)
{
	int64_t ns = -1;

	if (!d)
		return 0;
	assert_int_equal(gaz_duration_from_pb(d, &ns, NULL), 0);
	return ns;
}

static const char *const SET =
	"common:\n"
	"  id: ignored-by-push-down\n"
	"  sources: [{journal: a/common}]\n"
	"  recovery_log_prefix: examples/logs\n"
	"  hint_prefix: /hints\n"
	"  hint_backups: 2\n"
	"  max_txn_duration: 1s\n"
	"  min_txn_duration: 10ms\n"
	"  disable: true\n"
	"  hot_standbys: 1\n"
	"  labels: [{name: app, value: common}, {name: tier, value: gold}]\n"
	"  disable_wait_for_ack: true\n"
	"  ring_buffer_size: 16\n"
	"  read_channel_size: 32\n"
	"shards:\n"
	"  - id: shard-000\n"
	"    comment: inherits everything\n"
	"  - id: shard-001\n"
	"    sources:\n"
	"      - journal: a/one\n"
	"        min_offset: 100\n"
	"      - journal: a/two\n"
	"    hint_backups: 5\n"
	"    max_txn_duration: 2000000000\n"
	"    labels: [{name: app, value: own}]\n"
	"    revision: 42\n"
	"  - id: shard-002\n"
	"    delete: true\n"
	"    revision: -1\n";

static void test_push_down(void **state)
{
	Consumer__ApplyRequest *req = parse_ok(SET);
	const Consumer__ShardSpec *a, *b;

	(void)state;
	assert_int_equal(req->n_changes, 3);
	a = req->changes[0]->upsert;
	b = req->changes[1]->upsert;
	assert_string_equal(a->id, "shard-000");
	assert_int_equal(a->n_sources, 1);
	assert_string_equal(a->sources[0]->journal, "a/common");
	assert_string_equal(a->recovery_log_prefix, "examples/logs");
	assert_string_equal(a->hint_prefix, "/hints");
	assert_int_equal(a->hint_backups, 2);
	assert_int_equal(dur(a->max_txn_duration), SEC);
	assert_int_equal(dur(a->min_txn_duration), SEC / 100);
	assert_true(a->disable && a->disable_wait_for_ack);
	assert_int_equal(a->hot_standbys, 1);
	assert_int_equal(a->ring_buffer_size, 16);
	assert_int_equal(a->read_channel_size, 32);
	assert_int_equal(a->labels->n_labels, 2);
	assert_int_equal(req->changes[0]->expect_mod_revision, 0);

	assert_string_equal(b->id, "shard-001");
	assert_int_equal(b->n_sources, 2); /* its own, not common's */
	assert_int_equal(b->sources[0]->min_offset, 100);
	assert_int_equal(b->hint_backups, 5);
	assert_int_equal(dur(b->max_txn_duration), 2 * SEC);
	assert_int_equal(b->labels->n_labels, 2); /* app=own wins, tier=gold added */
	assert_string_equal(b->labels->labels[0]->value, "own");
	assert_string_equal(b->labels->labels[1]->name, "tier");
	assert_int_equal(req->changes[1]->expect_mod_revision, 42);

	assert_null(req->changes[2]->upsert);
	assert_string_equal(req->changes[2]->delete_, "shard-002");
	assert_int_equal(req->changes[2]->expect_mod_revision, -1);
	gaz_shardspec_apply_free(req);
}

static void test_empty_and_null(void **state)
{
	Consumer__ApplyRequest *req = parse_ok("");

	(void)state;
	assert_int_equal(req->n_changes, 0);
	gaz_shardspec_apply_free(req);
	req = parse_ok("common: ~\nshards:\n  - id: abcd\n    labels: ~\n");
	assert_int_equal(req->n_changes, 1);
	assert_string_equal(req->changes[0]->upsert->id, "abcd");
	assert_string_equal(req->changes[0]->upsert->hint_prefix, "");
	gaz_shardspec_apply_free(req);
}

static void test_strict(void **state)
{
	(void)state;
	parse_fails("shards:\n  - id: abcd\n    bogus: 1\n", "line 3: unknown key \"bogus\" in shard");
	parse_fails("common:\n  revision: 3\n", "line 2: unknown key \"revision\" in common");
	parse_fails("shard: []\n", "line 1: unknown key \"shard\"");
	parse_fails("shards:\n  - id: abcd\n    id: efgh\n", "line 3: duplicate key \"id\"");
	parse_fails("shards:\n  - hot_standbys: -1\n", "out of range");
	parse_fails("shards:\n  - max_txn_duration: soon\n", "line 2: bad value for \"max_txn_duration\"");
	parse_fails("shards:\n  - disable: maybe\n", "is not a boolean");
	parse_fails("shards:\n  - sources: [{journal: a/b, offset: 1}]\n",
		    "unknown key \"offset\" in source");
	parse_fails("shards: [\n", "line 2");
}

/* Specs as a listing holds them: unpacked from their wire form. */
static Consumer__ShardSpec *listed(const char *id, const char *source, const char *store)
{
	Consumer__ShardSpec s = CONSUMER__SHARD_SPEC__INIT;
	Consumer__ShardSpec__Source src = CONSUMER__SHARD_SPEC__SOURCE__INIT, *srcs[] = {&src};
	Protocol__Label l1 = PROTOCOL__LABEL__INIT, l2 = PROTOCOL__LABEL__INIT, *ls[] = {&l1, &l2};
	Protocol__LabelSet set = PROTOCOL__LABEL_SET__INIT;
	Google__Protobuf__Duration max = GOOGLE__PROTOBUF__DURATION__INIT;
	uint8_t buf[1024];
	size_t n;

	s.id = (char *)id;
	src.journal = (char *)source;
	s.sources = srcs;
	s.n_sources = 1;
	s.recovery_log_prefix = "examples/logs";
	s.hint_prefix = "/hints";
	s.hint_backups = 2;
	max.seconds = 1;
	s.max_txn_duration = &max;
	s.hot_standbys = 1;
	l1.name = "role";
	l1.value = "";
	l2.name = "store";
	l2.value = (char *)store;
	set.labels = ls;
	set.n_labels = 2;
	s.labels = &set;
	n = consumer__shard_spec__pack(&s, buf);
	return consumer__shard_spec__unpack(NULL, n, buf);
}

static void test_hoist(void **state)
{
	struct gaz_status st = {0};
	struct gaz_shard_rev rs[2];
	Consumer__ApplyRequest *req;
	char *y = NULL;

	(void)state;
	rs[0].spec = listed("part-000", "a/part-000", "rocksdb");
	rs[0].mod_revision = 11;
	rs[1].spec = listed("part-001", "a/part-001", "sqlite");
	rs[1].mod_revision = 12;
	assert_int_equal(gaz_shardspec_yaml_emit(rs, 2, &y, NULL, &st), 0);
	assert_string_equal(y, "common:\n"
			       "  recovery_log_prefix: examples/logs\n"
			       "  hint_prefix: /hints\n"
			       "  hint_backups: 2\n"
			       "  max_txn_duration: 1s\n"
			       "  hot_standbys: 1\n"
			       "  labels:\n"
			       "  - name: role\n"
			       "    value: \"\"\n"
			       "shards:\n"
			       "- id: part-000\n"
			       "  sources:\n"
			       "  - journal: a/part-000\n"
			       "  labels:\n"
			       "  - name: store\n"
			       "    value: rocksdb\n"
			       "  revision: 11\n"
			       "- id: part-001\n"
			       "  sources:\n"
			       "  - journal: a/part-001\n"
			       "  labels:\n"
			       "  - name: store\n"
			       "    value: sqlite\n"
			       "  revision: 12\n");
	/* Round trip: pushing the hoisted set down gives the listed specs. */
	req = parse_ok(y);
	assert_int_equal(req->n_changes, 2);
	for (size_t i = 0; i < 2; i++) {
		uint8_t a[1024], b[1024];
		size_t na = consumer__shard_spec__pack(req->changes[i]->upsert, a);
		size_t nb = consumer__shard_spec__pack(rs[i].spec, b);

		assert_int_equal(na, nb);
		assert_memory_equal(a, b, na);
		assert_int_equal(req->changes[i]->expect_mod_revision, rs[i].mod_revision);
	}
	gaz_shardspec_apply_free(req);
	free(y);
	assert_int_equal(gaz_shardspec_yaml_emit(rs, 0, &y, NULL, &st), 0);
	assert_string_equal(y, "common: {}\nshards: []\n");
	free(y);
	assert_int_equal(gaz_shardspec_yaml_emit(rs, 1, &y, NULL, &st), 0);
	assert_non_null(strstr(y, "shards:\n- id: part-000\n  revision: 11\n"));
	free(y);
	consumer__shard_spec__free_unpacked((Consumer__ShardSpec *)rs[0].spec, NULL);
	consumer__shard_spec__free_unpacked((Consumer__ShardSpec *)rs[1].spec, NULL);
}

static void validate_fails(const char *yaml, const char *msg)
{
	Consumer__ApplyRequest *req = parse_ok(yaml);
	struct gaz_status st = {0};

	assert_int_equal(gaz_validate_shard_apply_request(req, &st), GAZ_EINVAL);
	if (strcmp(st.msg, msg))
		fail_msg("message \"%s\", want \"%s\"", st.msg, msg);
	gaz_shardspec_apply_free(req);
}

static void test_validate(void **state)
{
	Consumer__ApplyRequest *req;
	struct gaz_status st = {0};

	(void)state;
	req = parse_ok(SET);
	/* shard-001's labels are fine; the set as a whole passes except that
	 * common's sources give shard-000 a valid spec too. */
	assert_int_equal(gaz_validate_shard_apply_request(req, &st), 0);
	gaz_shardspec_apply_free(req);
	validate_fails("shards:\n  - id: abc\n    max_txn_duration: 1s\n",
		       "Changes[0].Upsert.Id: invalid length (3; expected 4 <= length <= 512)");
	validate_fails("shards:\n  - id: abcd\n",
		       "Changes[0].Upsert: invalid MaxTxnDuration (0; expected > 0)");
	validate_fails("common: {max_txn_duration: 1s}\nshards:\n  - id: abcd\n"
		       "    sources: [{journal: b/two}, {journal: a/one}]\n",
		       "Changes[0].Upsert: Sources.Journal not in unique, sorted order "
		       "(index 1; a/one <= b/two)");
	validate_fails("common: {max_txn_duration: 1s}\nshards:\n  - id: abcd\n"
		       "    recovery_log_prefix: logs\n",
		       "Changes[0].Upsert: HintPrefix is not an absolute, clean, "
		       "non-directory path ()");
	validate_fails("common: {max_txn_duration: 1s}\nshards:\n  - id: abcd\n"
		       "    labels: [{name: id, value: x}]\n",
		       "Changes[0].Upsert: Labels cannot include label \"id\"");
	validate_fails("shards:\n  - id: abcd\n    delete: true\n",
		       "Changes[0]: invalid ExpectModRevision (0; expected > 0 or -1)");
	validate_fails("common: {max_txn_duration: 1s}\nshards:\n  - id: abcd\n    revision: -2\n",
		       "Changes[0]: invalid ExpectModRevision (-2; expected >= 0 or -1)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_push_down),
		cmocka_unit_test(test_empty_and_null),
		cmocka_unit_test(test_strict),
		cmocka_unit_test(test_hoist),
		cmocka_unit_test(test_validate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
