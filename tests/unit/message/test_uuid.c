/* test_uuid.c - message UUIDs, Clocks and ProducerIDs against vectors
 * printed by Gazette's own message package (v0.103.0: BuildUUID,
 * NewClock, Clock.Tick over producer 01:23:45:67:89:ab), and the clock
 * rules of its uuid_test.go: ticks of 160, 100 ns precision, Update never
 * moving back, and the text forms Go's uuid package parses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gazette/message.h"

static const gaz_producer_id P = {{0x01, 0x23, 0x45, 0x67, 0x89, 0xab}};

/* Gazette: Update(time.Unix(1567304621, 981273734)); Tick(); Tick(). */
static const uint64_t VEC_CLOCK = 2205855587517004112ULL;
static const struct {
	unsigned flags;
	const char *text;
} VECS[] = {
	{0, "83fc2f95-cc5f-11e9-8000-0123456789ab"},
	{1, "83fc2f95-cc5f-11e9-8001-0123456789ab"},
	{2, "83fc2f95-cc5f-11e9-8002-0123456789ab"},
	{682, "83fc2f95-cc5f-11e9-82aa-0123456789ab"},
};

static void test_gazette_vectors(void **state)
{
	(void)state;
	gaz_clock c = 0;
	gaz_clock_update(&c, 1567304621, 981273734);
	gaz_clock_tick(&c);
	assert_true(gaz_clock_tick(&c) == VEC_CLOCK);

	for (size_t i = 0; i < sizeof VECS / sizeof VECS[0]; i++) {
		gaz_uuid u, back;
		char text[GAZ_UUID_STR_LEN + 1];
		assert_int_equal(gaz_uuid_build(&u, &P, VEC_CLOCK, VECS[i].flags), 0);
		gaz_uuid_format(&u, text);
		assert_string_equal(text, VECS[i].text);
		assert_int_equal(gaz_uuid_parse(VECS[i].text, strlen(VECS[i].text), &back, NULL), 0);
		assert_memory_equal(back.b, u.b, 16);
		assert_true(gaz_uuid_clock(&u) == VEC_CLOCK);
		assert_int_equal(gaz_uuid_flags(&u), VECS[i].flags);
		gaz_producer_id p = gaz_uuid_producer(&u);
		assert_memory_equal(p.b, P.b, 6);
		/* RFC 4122: version 1, variant 10. */
		assert_int_equal(u.b[6] >> 4, 1);
		assert_int_equal(u.b[8] >> 6, 2);
	}
	/* Two ticks of 1 µs on 981273734 ns (kept to 100 ns): 981275700. */
	int64_t sec, nsec;
	gaz_clock_to_unix(VEC_CLOCK, &sec, &nsec);
	assert_true(sec == 1567304621);
	assert_true(nsec == 981275700);
}

static void test_every_bit(void **state)
{
	(void)state;
	/* Gazette: BuildUUID(P, 0xfffffffffffffff7, 0x3ff). */
	gaz_uuid u;
	char text[GAZ_UUID_STR_LEN + 1];
	assert_int_equal(gaz_uuid_build(&u, &P, 0xfffffffffffffff7ULL, 0x3ff), 0);
	gaz_uuid_format(&u, text);
	assert_string_equal(text, "ffffffff-ffff-1fff-9fff-0123456789ab");
	assert_true(gaz_uuid_clock(&u) == 0xfffffffffffffff7ULL);
	assert_int_equal(gaz_uuid_flags(&u), 0x3ff);
	/* Flags beyond 10 bits are refused, the output untouched. */
	gaz_uuid keep = u;
	assert_int_equal(gaz_uuid_build(&u, &P, 1, 0x400), GAZ_EINVAL);
	assert_memory_equal(keep.b, u.b, 16);
	gaz_uuid zero = {{0}};
	assert_true(gaz_uuid_is_zero(&zero));
	assert_true(gaz_uuid_clock(&zero) == 0);
	assert_false(gaz_uuid_is_zero(&u));
}

static void test_clock_rules(void **state)
{
	(void)state;
	gaz_clock c = 0;
	/* Ticks move 160 units (1 µs), starting from zero. */
	assert_true(gaz_clock_tick(&c) == 160);
	assert_true(gaz_clock_tick(&c) == 320);
	/* Gazette: NewClock(time.Unix(12, 399)), then Tick. */
	gaz_clock_update(&c, 12, 300);
	assert_true(c == gaz_clock_from_unix(12, 399));
	assert_true(c == 1955086849920000048ULL);
	assert_true(gaz_clock_from_unix(12, 399) < gaz_clock_from_unix(12, 400));
	assert_true(gaz_clock_tick(&c) == 1955086849920000208ULL);
	int64_t sec, nsec;
	gaz_clock_to_unix(c, &sec, &nsec);
	assert_true(sec == 12 && nsec == 1300);
	/* Update never moves back. */
	uint64_t before = c;
	gaz_clock_update(&c, 11, 100);
	assert_true(c == before);
	/* A later time resets the sequence counter. */
	gaz_clock_update(&c, 12, 5000);
	assert_true(c == gaz_clock_from_unix(12, 5000));
	assert_true((c & 0xF) == 0);
	/* Gazette: Update(time.Unix(0, 0)). */
	assert_true(gaz_clock_from_unix(0, 0) == 1955086848000000000ULL);
}

static void test_producer_ids(void **state)
{
	(void)state;
	gaz_producer_id a, b;
	assert_int_equal(gaz_producer_id_new(&a), 0);
	assert_int_equal(gaz_producer_id_new(&b), 0);
	assert_true(a.b[0] & 1);
	assert_true(b.b[0] & 1);
	assert_memory_not_equal(a.b, b.b, 6);
}

static void test_parse_forms(void **state)
{
	(void)state;
	const char *ok[] = {
		"83fc2f95-cc5f-11e9-82aa-0123456789ab",
		"83FC2F95-CC5F-11E9-82AA-0123456789AB",
		"urn:uuid:83fc2f95-cc5f-11e9-82aa-0123456789ab",
		"{83fc2f95-cc5f-11e9-82aa-0123456789ab}",
		"83fc2f95cc5f11e982aa0123456789ab",
	};
	gaz_uuid want, got;
	assert_int_equal(gaz_uuid_build(&want, &P, VEC_CLOCK, 682), 0);
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		memset(&got, 0, sizeof got);
		assert_int_equal(gaz_uuid_parse(ok[i], strlen(ok[i]), &got, NULL), 0);
		assert_memory_equal(got.b, want.b, 16);
	}
	const char *bad[] = {
		"",
		"83fc2f95-cc5f-11e9-82aa-0123456789a",
		"83fc2f95-cc5f-11e9-82aa-0123456789abc",
		"83fc2f95xcc5f-11e9-82aa-0123456789ab",
		"83fc2f95-cc5f-11e9-82aa-0123456789ag",
		"{83fc2f95-cc5f-11e9-82aa-0123456789ab",
		"83fc2f95cc5f11e982aa0123456789a-",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct gaz_status st = {0};
		got = want;
		assert_int_equal(gaz_uuid_parse(bad[i], strlen(bad[i]), &got, &st), GAZ_EINVAL);
		assert_memory_equal(got.b, want.b, 16);
		assert_true(strstr(st.msg, "UUID") != NULL);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gazette_vectors),
		cmocka_unit_test(test_every_bit),
		cmocka_unit_test(test_clock_rules),
		cmocka_unit_test(test_producer_ids),
		cmocka_unit_test(test_parse_forms),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
