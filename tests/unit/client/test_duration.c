/*
 * test_duration.c - client duration helpers: Go text as Gazette writes and
 * reads it (tables taken from Go's time.Duration behaviour), integer
 * nanoseconds as yaml.v2 decodes them, google.protobuf.Duration conversion
 * and the proto3 JSON form.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gazette/duration.h"

#define NS INT64_C(1)
#define US (1000 * NS)
#define MS (1000 * US)
#define SEC (1000 * MS)
#define MIN (60 * SEC)
#define HOUR (60 * MIN)

static const struct {
	int64_t ns;
	const char *text;
} format_cases[] = {
	{0, "0s"},
	{1, "1ns"},
	{999, "999ns"},
	{1000, "1µs"},
	{1100, "1.1µs"},
	{2200 * US, "2.2ms"},
	{500 * MS, "500ms"},
	{3300 * MS, "3.3s"},
	{1500 * MS, "1.5s"},
	{MIN, "1m0s"},
	{4 * MIN + 5 * SEC, "4m5s"},
	{4 * MIN + 5001 * MS, "4m5.001s"},
	{5 * HOUR + 6 * MIN + 7001 * MS, "5h6m7.001s"},
	{8 * HOUR + 1, "8h0m0.000000001s"},
	{HOUR + 500 * MS, "1h0m0.5s"},
	{10 * MIN, "10m0s"},
	{720 * HOUR, "720h0m0s"},
	{-SEC, "-1s"},
	{-1500 * MS, "-1.5s"},
	{-1, "-1ns"},
	{INT64_MAX, "2562047h47m16.854775807s"},
	{INT64_MIN, "-2562047h47m16.854775808s"},
};

static void test_format(void **state)
{
	char buf[GAZ_DURATION_STR_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(format_cases) / sizeof(format_cases[0]); i++) {
		gaz_duration_format(format_cases[i].ns, buf);
		if (strcmp(buf, format_cases[i].text))
			fail_msg("format(%lld) = %s, want %s", (long long)format_cases[i].ns, buf,
				 format_cases[i].text);
	}
}

static const struct {
	const char *text;
	int64_t ns;
} parse_cases[] = {
	{"0", 0},
	{"-0", 0},
	{"+0", 0},
	{"5s", 5 * SEC},
	{"30s", 30 * SEC},
	{"1478s", 1478 * SEC},
	{"-5s", -5 * SEC},
	{"+5s", 5 * SEC},
	{"5.0s", 5 * SEC},
	{"5.6s", 5 * SEC + 600 * MS},
	{"5.s", 5 * SEC},
	{".5s", 500 * MS},
	{"1.004s", 1004 * MS},
	{"100.00100s", 100 * SEC + 1 * MS},
	{"10ns", 10},
	{"2us", 2 * US},
	{"2µs", 2 * US},      /* U+00B5 micro sign */
	{"12\xce\xbcs", 12 * US}, /* U+03BC greek mu */
	{"300ms", 300 * MS},
	{"1.5s", 1500 * MS},
	{"1m", MIN},
	{"15m", 15 * MIN},
	{"16h", 16 * HOUR},
	{"1h30m", 90 * MIN},
	{"1m0s", MIN},
	{"720h0m0s", 720 * HOUR},
	{"1h0m0.5s", HOUR + 500 * MS},
	{"10.5s4m", 4 * MIN + 10500 * MS},
	{"-2m3.4s", -(2 * MIN + 3400 * MS)},
	{"1h2m3s4ms5us6ns", HOUR + 2 * MIN + 3 * SEC + 4 * MS + 5 * US + 6},
	{"39h9m14.425s", 39 * HOUR + 9 * MIN + 14425 * MS},
	{"0.3333333333333333333h", 20 * MIN},
	{"9007199254740993ns", INT64_C(9007199254740993)},
	{"9223372036854775807ns", INT64_MAX},
	{"9223372036854775.807us", INT64_MAX},
	{"9223372036s854ms775us807ns", INT64_MAX},
	{"-9223372036854775808ns", INT64_MIN},
	{"-9223372036854775.808us", INT64_MIN},
	{"0.100000000000000000000h", 6 * MIN},
	{"0.830103483285477580700h", 49 * MIN + 48 * SEC + 372539827},
};

static void test_parse(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(parse_cases) / sizeof(parse_cases[0]); i++) {
		struct gaz_status st = {0};
		int64_t ns = 42;
		int rc = gaz_duration_parse(parse_cases[i].text, &ns, &st);

		if (rc || ns != parse_cases[i].ns)
			fail_msg("parse(%s) = %d/%lld (%s), want %lld", parse_cases[i].text, rc,
				 (long long)ns, st.msg, (long long)parse_cases[i].ns);
	}
}

static void test_parse_errors(void **state)
{
	static const char *const bad[] = {
		"", "3", "1.5", "-", "s", ".", "-.", ".s", "+.s", "1d", "1sec", "\x85\x85",
		"\xff" "ff", "hello \xff" "ff world", "5s ", " 5s", "1e3s", "9223372036854775808ns",
		"9223372036854775.808us", "9223372036854ms775us808ns", "-9223372036854775809ns",
		"10000000000000000000000h",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct gaz_status st = {0};
		int64_t ns = 42;

		if (gaz_duration_parse(bad[i], &ns, &st) != GAZ_EINVAL)
			fail_msg("parse(\"%s\") accepted as %lld", bad[i], (long long)ns);
		assert_int_equal(ns, 42); /* untouched on error */
		assert_int_equal(st.code, GAZ_EINVAL);
		assert_non_null(strstr(st.msg, "duration"));
	}
}

/* Every formatted duration parses back to itself, as in Go. */
static void test_format_parse_round_trip(void **state)
{
	char buf[GAZ_DURATION_STR_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(format_cases) / sizeof(format_cases[0]); i++) {
		int64_t ns = 0;

		assert_int_equal(gaz_duration_parse(gaz_duration_format(format_cases[i].ns, buf),
						     &ns, NULL), 0);
		assert_int_equal(ns, format_cases[i].ns);
	}
}

/* yaml.v2 decodes a plain YAML integer into time.Duration as nanoseconds. */
static void test_parse_spec_integers(void **state)
{
	struct gaz_status st = {0};
	int64_t ns = 0;

	(void)state;
	assert_int_equal(gaz_duration_parse_spec("10", &ns, NULL), 0);
	assert_int_equal(ns, 10);
	assert_int_equal(gaz_duration_parse_spec("-5", &ns, NULL), 0);
	assert_int_equal(ns, -5);
	assert_int_equal(gaz_duration_parse_spec("+60000000000", &ns, NULL), 0);
	assert_int_equal(ns, MIN);
	assert_int_equal(gaz_duration_parse_spec("9223372036854775807", &ns, NULL), 0);
	assert_int_equal(ns, INT64_MAX);
	assert_int_equal(gaz_duration_parse_spec("1m30s", &ns, NULL), 0);
	assert_int_equal(ns, 90 * SEC);
	ns = 7;
	assert_int_equal(gaz_duration_parse_spec("9223372036854775808", &ns, &st), GAZ_EINVAL);
	assert_int_equal(ns, 7);
	assert_non_null(strstr(st.msg, "out of range"));
	gaz_status_clear(&st);
	assert_int_equal(gaz_duration_parse_spec("1.5", &ns, &st), GAZ_EINVAL);
	assert_int_equal(gaz_duration_parse_spec("-", &ns, NULL), GAZ_EINVAL);
	assert_int_equal(ns, 7);
}

static void test_pb(void **state)
{
	static const int64_t values[] = {0, 1, -1, 1500 * MS, -1500 * MS, 720 * HOUR,
					 INT64_MAX, INT64_MIN};
	Google__Protobuf__Duration d = GOOGLE__PROTOBUF__DURATION__INIT;
	Google__Protobuf__Duration *h;
	int64_t ns = 0;

	(void)state;
	gaz_duration_set_pb(&d, 1500 * MS);
	assert_int_equal(d.seconds, 1);
	assert_int_equal(d.nanos, 500000000);
	gaz_duration_set_pb(&d, -1500 * MS);
	assert_int_equal(d.seconds, -1);
	assert_int_equal(d.nanos, -500000000);
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		gaz_duration_set_pb(&d, values[i]);
		assert_int_equal(gaz_duration_from_pb(&d, &ns, NULL), 0);
		assert_int_equal(ns, values[i]);
	}
	assert_int_equal(gaz_duration_from_pb(NULL, &ns, NULL), 0);
	assert_int_equal(ns, 0);
	assert_non_null(h = gaz_duration_new_pb(60 * SEC));
	assert_int_equal(h->seconds, 60);
	assert_int_equal(h->nanos, 0);
	google__protobuf__duration__free_unpacked(h, NULL);
}

static void test_pb_invalid(void **state)
{
	static const struct {
		int64_t seconds;
		int32_t nanos;
	} bad[] = {
		{1, -1}, {-1, 1}, {0, 1000000000}, {0, -1000000000},
		{INT64_MAX / SEC + 1, 0}, {INT64_MIN / SEC - 1, 0},
		{INT64_MAX / SEC, 854775808}, {INT64_MIN / SEC, -854775809},
	};
	Google__Protobuf__Duration d = GOOGLE__PROTOBUF__DURATION__INIT;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct gaz_status st = {0};
		int64_t ns = 9;

		d.seconds = bad[i].seconds;
		d.nanos = bad[i].nanos;
		assert_int_equal(gaz_duration_from_pb(&d, &ns, &st), GAZ_EINVAL);
		assert_int_equal(ns, 9);
		assert_non_null(strstr(st.msg, "invalid duration"));
	}
}

static void test_json(void **state)
{
	static const struct {
		int64_t seconds;
		int32_t nanos;
		const char *text;
	} cases[] = {
		{0, 0, "0s"},
		{60, 0, "60s"},
		{2592000, 0, "2592000s"},
		{1, 500000000, "1.500s"},
		{1, 1000, "1.000001s"},
		{0, 10000, "0.000010s"},
		{1, 1, "1.000000001s"},
		{0, -1, "-0.000000001s"},
		{-1, -500000000, "-1.500s"},
		{-60, 0, "-60s"},
		{315576000000, 0, "315576000000s"},
	};
	char buf[GAZ_DURATION_JSON_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_string_equal(gaz_duration_format_json(cases[i].seconds, cases[i].nanos, buf),
				    cases[i].text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_format_parse_round_trip),
		cmocka_unit_test(test_parse_spec_integers),
		cmocka_unit_test(test_pb),
		cmocka_unit_test(test_pb_invalid),
		cmocka_unit_test(test_json),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
