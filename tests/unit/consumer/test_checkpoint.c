/* test_checkpoint.c - a shard's checkpoint encodes to the bytes Gazette's
 * BuildCheckpoint + Marshal (v0.103.0) make for the same read-through,
 * producer and ACK intent; decodes back (Gazette's Flatten*); a producer
 * on a journal without an offset gets a source of its own; an empty
 * input is an empty checkpoint; malformed input is a clear error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gazette/consumer.h"

static const char *GAZETTE =
	"0a300a09612f6a6f75726e616c122308d209121e0a06010203040506121409887766554433221110ffffffffffffffffff01"
	"12110a09622f6a6f75726e616c120461636b0a";

static size_t unhex(const char *h, uint8_t *out)
{
	size_t n = strlen(h) / 2;
	for (size_t i = 0; i < n; i++)
		sscanf(h + 2 * i, "%2hhx", &out[i]);
	return n;
}

static void test_gazette_bytes(void **state)
{
	(void)state;
	struct gaz_read_through rt = {.journal = "a/journal", .offset = 1234};
	struct gaz_producer_state ps = {.journal = "a/journal",
					.producer = {{1, 2, 3, 4, 5, 6}},
					.last_ack = 0x1122334455667788ULL,
					.begin = -1};
	struct gaz_sequencer_checkpoint seq = {.offsets = &rt, .n_offsets = 1, .states = &ps, .n_states = 1};
	struct gaz_ack_intent ack = {.journal = "b/journal", .intent = (uint8_t *)"ack\n", .len = 4};
	uint8_t *b, want[256];
	size_t n, wn = unhex(GAZETTE, want);
	assert_int_equal(gaz_checkpoint_encode(&seq, &ack, 1, &b, &n, NULL), 0);
	assert_int_equal(n, wn);
	assert_memory_equal(b, want, n);
	free(b);

	struct gaz_sequencer_checkpoint got;
	struct gaz_ack_intent *acks;
	size_t n_acks;
	assert_int_equal(gaz_checkpoint_decode(want, wn, &got, &acks, &n_acks, NULL), 0);
	assert_int_equal(got.n_offsets, 1);
	assert_string_equal(got.offsets[0].journal, "a/journal");
	assert_true(got.offsets[0].offset == 1234);
	assert_int_equal(got.n_states, 1);
	assert_memory_equal(got.states[0].producer.b, ps.producer.b, 6);
	assert_true(got.states[0].last_ack == ps.last_ack && got.states[0].begin == -1);
	assert_int_equal(n_acks, 1);
	assert_string_equal(acks[0].journal, "b/journal");
	assert_int_equal(acks[0].len, 4);
	assert_memory_equal(acks[0].intent, "ack\n", 4);
	gaz_sequencer_checkpoint_release(&got);
	gaz_ack_intents_free(acks, n_acks);
}

static void test_round_trip(void **state)
{
	(void)state;
	/* Two journals with offsets, producers on one of them and on a third
	 * journal with no offset; no ACKs. */
	struct gaz_read_through rt[] = {{.journal = "z/j", .offset = 9}, {.journal = "a/j", .offset = 5}};
	struct gaz_producer_state ps[] = {
		{.journal = "a/j", .producer = {{1, 1, 1, 1, 1, 1}}, .last_ack = 10, .begin = -1},
		{.journal = "m/j", .producer = {{2, 2, 2, 2, 2, 2}}, .last_ack = 20, .begin = 300},
		{.journal = "a/j", .producer = {{3, 3, 3, 3, 3, 3}}, .last_ack = 30, .begin = 7},
	};
	struct gaz_sequencer_checkpoint seq = {.offsets = rt, .n_offsets = 2, .states = ps, .n_states = 3};
	uint8_t *b;
	size_t n;
	assert_int_equal(gaz_checkpoint_encode(&seq, NULL, 0, &b, &n, NULL), 0);
	struct gaz_sequencer_checkpoint got;
	assert_int_equal(gaz_checkpoint_decode(b, n, &got, NULL, NULL, NULL), 0);
	free(b);
	/* Sources in name order; m/j has offset 0 (FlattenReadThrough). */
	assert_int_equal(got.n_offsets, 3);
	assert_string_equal(got.offsets[0].journal, "a/j");
	assert_true(got.offsets[0].offset == 5);
	assert_string_equal(got.offsets[1].journal, "m/j");
	assert_true(got.offsets[1].offset == 0);
	assert_string_equal(got.offsets[2].journal, "z/j");
	assert_int_equal(got.n_states, 3);
	assert_string_equal(got.states[0].journal, "a/j");
	assert_true(got.states[0].last_ack == 10);
	assert_string_equal(got.states[1].journal, "a/j");
	assert_true(got.states[1].last_ack == 30 && got.states[1].begin == 7);
	assert_string_equal(got.states[2].journal, "m/j");
	assert_true(got.states[2].begin == 300);
	gaz_sequencer_checkpoint_release(&got);
}

static void test_empty_and_bad(void **state)
{
	(void)state;
	struct gaz_sequencer_checkpoint got;
	struct gaz_ack_intent *acks;
	size_t n_acks;
	assert_int_equal(gaz_checkpoint_decode((const uint8_t *)"", 0, &got, &acks, &n_acks, NULL), 0);
	assert_int_equal(got.n_offsets, 0);
	assert_int_equal(n_acks, 0);
	gaz_sequencer_checkpoint_release(&got);
	gaz_ack_intents_free(acks, n_acks);

	struct gaz_status st = {0};
	static const uint8_t junk[] = {0xff, 0xff, 0xff};
	assert_int_equal(gaz_checkpoint_decode(junk, sizeof junk, &got, NULL, NULL, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "does not decode"));

	/* A producer id of 5 bytes: sources{"a": {producers: [{id: 0102030405}]}}. */
	static const uint8_t short_id[] = {0x0a, 0x0e, 0x0a, 0x01, 'a', 0x12, 0x09, 0x12, 0x07,
					   0x0a, 0x05, 1,    2,    3,   4,    5};
	gaz_status_clear(&st);
	assert_int_equal(gaz_checkpoint_decode(short_id, sizeof short_id, &got, NULL, NULL, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "producer id of 5 bytes"));
}

/* Regression (fuzz target consumer_checkpoint, docs/fuzzing.md): an ACK
 * intent with an empty value (protobuf-c leaves its data NULL) was copied
 * with memcpy(dst, NULL, 0), undefined behaviour that UBSan reports (this
 * test fails under `make SAN=1 unit` without the fix). It decodes as an
 * empty intent. ack_intents {key: "j"} and {key: "k", value: ""}. */
static void test_empty_ack_intent(void **state)
{
	static const uint8_t cp[] = {0x12, 0x03, 0x0a, 0x01, 'j', 0x12, 0x05, 0x0a, 0x01, 'k', 0x12, 0x00};
	struct gaz_sequencer_checkpoint got;
	struct gaz_ack_intent *acks;
	size_t n_acks;
	uint8_t *out = NULL;
	size_t len = 0;

	(void)state;
	assert_int_equal(gaz_checkpoint_decode(cp, sizeof cp, &got, &acks, &n_acks, NULL), 0);
	assert_int_equal(n_acks, 2);
	assert_string_equal(acks[0].journal, "j");
	assert_int_equal(acks[0].len, 0);
	assert_string_equal(acks[1].journal, "k");
	assert_int_equal(acks[1].len, 0);
	assert_int_equal(gaz_checkpoint_encode(&got, acks, n_acks, &out, &len, NULL), 0);
	free(out);
	gaz_sequencer_checkpoint_release(&got);
	gaz_ack_intents_free(acks, n_acks);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gazette_bytes),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_empty_and_bad),
		cmocka_unit_test(test_empty_ack_intent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
