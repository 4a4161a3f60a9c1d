/*
 * test_token.c - §3.1 character classes and §3.2 journal names
 * (lib/protocol/token.c), with exact boundaries.
 */
#include "vcheck.h"

#include "protocol/validate.h"

static void test_rune_class(void **state)
{
	static const struct {
		uint32_t r;
		bool want;
	} cases[] = {
		{'a', true},     {'Z', true},     {'0', true},      {'9', true},     {'-', false},
		{'#', false},    {' ', false},    {0x00AA, true},   {0x00B2, true},  /* ª, ² (No) */
		{0x00B5, true},  {0x00D7, false}, {0x00E9, true},   /* µ, ×, é */
		{0x0301, false}, {0x0663, true},  {0x2167, true},   /* combining acute, ٣, Ⅷ (Nl) */
		{0x3007, true},  {0x4E2D, true},  {0xFFFD, false},  /* 〇, 中, replacement */
		{0x1F600, false}, {0x10FFFF, false}, {0x1D7CE, true}, /* 😀, max, 𝟎 */
		{0x20000, true}, {0xD800, false},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (gaz_rune_is_letter_or_number(cases[i].r) != cases[i].want)
			fail_msg("U+%04X: want %d", cases[i].r, cases[i].want);
}

static void test_token(void **state)
{
	(void)state;
	VCHECK(gaz_validate_token("ab", GAZ_TOKEN_SYMBOLS, 2, 64, &st), NULL);
	VCHECK(gaz_validate_token("a-_+/.9", GAZ_TOKEN_SYMBOLS, 2, 64, &st), NULL);
	VCHECK(gaz_validate_token("a", GAZ_TOKEN_SYMBOLS, 2, 64, &st),
	       "invalid length (1; expected 2 <= length <= 64)");
	VCHECK(gaz_validate_token(rep('x', 64), GAZ_TOKEN_SYMBOLS, 2, 64, &st), NULL);
	VCHECK(gaz_validate_token(rep('x', 65), GAZ_TOKEN_SYMBOLS, 2, 64, &st),
	       "invalid length (65; expected 2 <= length <= 64)");
	VCHECK(gaz_validate_token("a=b", GAZ_TOKEN_SYMBOLS, 2, 64, &st), "not a valid token (a=b)");
	VCHECK(gaz_validate_token("a=b%", GAZ_PATH_SYMBOLS, 2, 64, &st), NULL);
	VCHECK(gaz_validate_token("a b", GAZ_PATH_SYMBOLS, 0, 64, &st), "not a valid token (a b)");
	VCHECK(gaz_validate_token("a#b", GAZ_PATH_SYMBOLS, 0, 64, &st), "not a valid token (a#b)");
	VCHECK(gaz_validate_token("a;b", GAZ_PATH_SYMBOLS, 0, 64, &st), "not a valid token (a;b)");
	VCHECK(gaz_validate_token("", GAZ_PATH_SYMBOLS, 0, 64, &st), NULL);
	VCHECK(gaz_validate_token(NULL, GAZ_PATH_SYMBOLS, 1, 64, &st),
	       "invalid length (0; expected 1 <= length <= 64)");
	/* Unicode letters/numbers count, by bytes: "été" is 5 bytes. */
	VCHECK(gaz_validate_token("\xc3\xa9t\xc3\xa9", GAZ_TOKEN_SYMBOLS, 5, 5, &st), NULL);
	VCHECK(gaz_validate_token("\xc3\xa9t\xc3\xa9", GAZ_TOKEN_SYMBOLS, 2, 4, &st),
	       "invalid length (5; expected 2 <= length <= 4)");
	VCHECK(gaz_validate_token("x\xd9\xa3", GAZ_TOKEN_SYMBOLS, 2, 64, &st), NULL); /* x٣ */
	/* A combining mark (Mn) is neither letter nor number. */
	VCHECK(gaz_validate_token("e\xcc\x81", GAZ_TOKEN_SYMBOLS, 2, 64, &st),
	       "not a valid token (e\xcc\x81)");
	/* Malformed UTF-8: stray continuation, overlong '/', surrogate, truncated. */
	VCHECK(gaz_validate_token("a\x80", GAZ_TOKEN_SYMBOLS, 2, 64, &st),
	       "not a valid token (a\x80)");
	VCHECK(gaz_validate_token("a\xc0\xaf", GAZ_TOKEN_SYMBOLS, 2, 64, &st),
	       "not a valid token (a\xc0\xaf)");
	VCHECK(gaz_validate_token("a\xed\xa0\x80", GAZ_TOKEN_SYMBOLS, 2, 64, &st),
	       "not a valid token (a\xed\xa0\x80)");
	VCHECK(gaz_validate_token("a\xe4\xb8", GAZ_TOKEN_SYMBOLS, 2, 64, &st),
	       "not a valid token (a\xe4\xb8)");
}

static void test_path_is_clean(void **state)
{
	static const struct {
		const char *p;
		bool clean;
	} cases[] = {
		{"a", true},      {"a/b", true},     {".", true},       {"/", true},
		{"..", true},     {"../a", true},    {"../../a", true}, {"/a", true},
		{"...", true},    {"a/...", true},   {"", false},       {"a/", false},
		{"a//b", false},  {"//a", false},    {"./a", false},    {"a/.", false},
		{"a/./b", false}, {"a/..", false},   {"a/../b", false}, {"/..", false},
		{"../a/..", false}, {"a/b/", false}, {"./", false},     {"../", false},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (gaz_path_is_clean(cases[i].p, strlen(cases[i].p)) != cases[i].clean)
			fail_msg("\"%s\": want clean=%d", cases[i].p, cases[i].clean);
}

static void test_path_component(void **state)
{
	(void)state;
	VCHECK(gaz_validate_path_component("", 0, 512, &st), NULL);
	VCHECK(gaz_validate_path_component("a=1/b%20", 0, 512, &st), NULL);
	VCHECK(gaz_validate_path_component("../a", 0, 512, &st), NULL);
	VCHECK(gaz_validate_path_component(".", 0, 512, &st), NULL);
	VCHECK(gaz_validate_path_component("a//b", 0, 512, &st), "must be a clean path (a//b)");
	VCHECK(gaz_validate_path_component("a/b/", 0, 512, &st), "must be a clean path (a/b/)");
	VCHECK(gaz_validate_path_component("/a", 0, 512, &st), "cannot begin with '/' (/a)");
	VCHECK(gaz_validate_path_component("/", 0, 512, &st), "cannot begin with '/' (/)");
	VCHECK(gaz_validate_path_component("a b", 0, 512, &st), "not a valid token (a b)");
}

static void test_journal(void **state)
{
	char name[600];

	(void)state;
	VCHECK(gaz_validate_journal("a/journal", &st), NULL);
	VCHECK(gaz_validate_journal("foo/bar;meta", &st), NULL);
	VCHECK(gaz_validate_journal("abc", &st), "invalid length (3; expected 4 <= length <= 512)");
	VCHECK(gaz_validate_journal("abcd", &st), NULL);
	VCHECK(gaz_validate_journal(rep('a', 512), &st), NULL);
	VCHECK(gaz_validate_journal(rep('a', 513), &st),
	       "invalid length (513; expected 4 <= length <= 512)");
	VCHECK(gaz_validate_journal("/abs", &st), "cannot begin with '/' (/abs)");
	VCHECK(gaz_validate_journal("a//b", &st), "must be a clean path (a//b)");
	VCHECK(gaz_validate_journal("a/b/", &st), "must be a clean path (a/b/)");
	/* The name part is measured without its ";meta" suffix. */
	VCHECK(gaz_validate_journal("abc;meta", &st), "invalid length (3; expected 4 <= length <= 512)");
	VCHECK(gaz_validate_journal("ab/c;", &st),
	       "metadata path segment: invalid length (0; expected 1 <= length <= 512)");
	VCHECK(gaz_validate_journal("ab/c;x", &st), NULL);
	VCHECK(gaz_validate_journal("ab/c;m;n", &st), "metadata path segment: not a valid token (m;n)");
	VCHECK(gaz_validate_journal("ab/c;/m", &st), "metadata path segment: cannot begin with '/' (/m)");
	snprintf(name, sizeof(name), "ab/c;%s", rep('m', 512));
	VCHECK(gaz_validate_journal(name, &st), NULL);
	snprintf(name, sizeof(name), "ab/c;%s", rep('m', 513));
	VCHECK(gaz_validate_journal(name, &st),
	       "metadata path segment: invalid length (513; expected 1 <= length <= 512)");
	assert_int_equal(gaz_journal_name_len("foo/bar;meta"), 7);
	assert_int_equal(gaz_journal_name_len("foo/bar"), 7);
	assert_int_equal(gaz_journal_name_len(NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rune_class),     cmocka_unit_test(test_token),
		cmocka_unit_test(test_path_is_clean),  cmocka_unit_test(test_path_component),
		cmocka_unit_test(test_journal),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
