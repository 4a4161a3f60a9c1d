/* test_word_count.c - word-count's words and N-grams (examples/word-count/
 * word_count.h) against what Gazette's counter makes of the same texts:
 * the vectors were printed by a throwaway Go program (go1.26.8, the
 * toolchain of Gazette's examples) that runs Counter.Publish's steps on
 * them: strings.ToLower, strings.FieldsFunc on !unicode.IsLetter, and the
 * START/END window. They hold non-ASCII letters (accents, ß, ẞ, Cyrillic,
 * Greek, Devanagari with its vowel signs, CJK, the Kelvin sign, İ),
 * digits, punctuation and marks as separators, bytes that are not UTF-8,
 * a NUL, and texts of no words. Also: NGramCount's bytes as Go's gogo
 * Marshal writes them, its ACK, and the modulo mapping of Gazette's own
 * word-count test (4 partitions). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "examples/word-count/word_count.h"

#define T(s) s, sizeof(s) - 1

static const struct vector {
	const char *text;
	size_t len;
	size_t n;
	const char *want[24]; /* NULL-ended */
} vectors[] = {
	{T("How much wood would a wood chuck chuck if a wood chuck could chuck wood?"), 2, {"START how", "how much", "much wood", "wood would", "would a", "a wood", "wood chuck", "chuck chuck", "chuck if", "if a", "a wood", "wood chuck", "chuck could", "could chuck", "chuck wood", "wood END", "END END", NULL}},
	{T("\303\211clair na\303\257ve \303\237"), 2, {"START \303\251clair", "\303\251clair na\303\257ve", "na\303\257ve \303\237", "\303\237 END", "END END", NULL}},
	{T("\303\211clair na\303\257ve \303\237"), 1, {"\303\251clair", "na\303\257ve", "\303\237", "END", NULL}},
	{T("\303\211clair na\303\257ve \303\237"), 3, {"START START \303\251clair", "START \303\251clair na\303\257ve", "\303\251clair na\303\257ve \303\237", "na\303\257ve \303\237 END", "\303\237 END END", "END END END", NULL}},
	{T("dog2cat dog_cat x-ray 3.14 \303\200B\011TAB\012new  line"), 2, {"START dog", "dog cat", "cat dog", "dog cat", "cat x", "x ray", "ray \303\240b", "\303\240b tab", "tab new", "new line", "line END", "END END", NULL}},
	{T(""), 1, {"END", NULL}},
	{T(""), 2, {"START END", "END END", NULL}},
	{T(""), 3, {"START START END", "START END END", "END END END", NULL}},
	{T("!!! 42 ..."), 2, {"START END", "END END", NULL}},
	{T("ab\377cd\303(ef\355\240\200gh\364\220\200\200ij\300\257kl\342\202"), 2, {"START ab", "ab cd", "cd ef", "ef gh", "gh ij", "ij kl", "kl END", "END END", NULL}},
	{T("a\000b"), 2, {"START a", "a b", "b END", "END END", NULL}},
	{T("\320\237\321\200\320\270\320\262\320\265\321\202, \320\234\320\230\320\240! \316\243\316\212\316\243\316\245\316\246\316\237\316\243 \304\260stanbul \342\204\252elvin"), 2, {"START \320\277\321\200\320\270\320\262\320\265\321\202", "\320\277\321\200\320\270\320\262\320\265\321\202 \320\274\320\270\321\200", "\320\274\320\270\321\200 \317\203\316\257\317\203\317\205\317\206\316\277\317\203", "\317\203\316\257\317\203\317\205\317\206\316\277\317\203 istanbul", "istanbul kelvin", "kelvin END", "END END", NULL}},
	{T("\340\244\250\340\244\256\340\244\270\340\245\215\340\244\244\340\245\207 \340\244\246\340\245\201\340\244\250\340\244\277\340\244\257\340\244\276"), 2, {"START \340\244\250\340\244\256\340\244\270", "\340\244\250\340\244\256\340\244\270 \340\244\244", "\340\244\244 \340\244\246", "\340\244\246 \340\244\250", "\340\244\250 \340\244\257", "\340\244\257 END", "END END", NULL}},
	{T("\331\243 apples \342\205\253 kings \307\205emal \341\272\236TRASSE \346\227\245\346\234\254\350\252\236\343\203\206\343\202\255\343\202\271\343\203\210"), 2, {"START apples", "apples kings", "kings \307\206emal", "\307\206emal \303\237trasse", "\303\237trasse \346\227\245\346\234\254\350\252\236\343\203\206\343\202\255\343\202\271\343\203\210", "\346\227\245\346\234\254\350\252\236\343\203\206\343\202\255\343\202\271\343\203\210 END", "END END", NULL}},
	{T("START end End"), 2, {"START start", "start end", "end end", "end END", "END END", NULL}},
};

static void check_vector(const struct vector *v)
{
	struct word_count_words w = {0};
	struct word_count_buf g = {0};
	size_t k = 0;

	assert_int_equal(word_count_split(v->text, v->len, &w), 0);
	while (v->want[k])
		k++;
	assert_int_equal(word_count_ngrams(&w, v->n), k);
	for (size_t i = 0; i < k; i++) {
		assert_int_equal(word_count_ngram(&w, v->n, i, &g), 0);
		if (strcmp(g.p, v->want[i]))
			fail_msg("text %zu bytes, N=%zu, N-gram %zu: got \"%s\", want \"%s\"", v->len, v->n, i, g.p,
				 v->want[i]);
		assert_int_equal(g.len, strlen(v->want[i]));
	}
	word_count_buf_release(&g);
	word_count_words_release(&w);
}

static void test_ngrams_as_go(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++)
		check_vector(&vectors[i]);
}

/* Where glibc's iswalpha and towlower would not do, the tables say what
 * Go's unicode package says. */
static void test_letters_and_lower_case(void **state)
{
	(void)state;
	assert_true(word_count_is_letter('a') && word_count_is_letter('Z') && word_count_is_letter(0xDF));
	assert_false(word_count_is_letter('0') || word_count_is_letter('_') || word_count_is_letter(' '));
	assert_false(word_count_is_letter(0x0660)); /* ARABIC-INDIC DIGIT ZERO: glibc calls it alpha */
	assert_false(word_count_is_letter(0x093E)); /* DEVANAGARI VOWEL SIGN AA (Mc) */
	assert_false(word_count_is_letter(0x0345)); /* COMBINING GREEK YPOGEGRAMMENI (Mn) */
	assert_false(word_count_is_letter(0x2160)); /* ROMAN NUMERAL ONE (Nl) */
	assert_false(word_count_is_letter(WORD_COUNT_RUNE_ERROR));
	assert_true(word_count_is_letter(0x01C5)); /* Dz with caron (Lt) */
	assert_true(word_count_is_letter(0x02B0)); /* MODIFIER LETTER SMALL H (Lm) */
	assert_true(word_count_is_letter(0x65E5)); /* CJK (Lo) */
	assert_true(word_count_is_letter(0x10400) && !word_count_is_letter(0x10FFFF));
	assert_int_equal(word_count_to_lower('A'), 'a');
	assert_int_equal(word_count_to_lower(0xC9), 0xE9);
	assert_int_equal(word_count_to_lower(0xDF), 0xDF);
	assert_int_equal(word_count_to_lower(0x1E9E), 0xDF);   /* ẞ */
	assert_int_equal(word_count_to_lower(0x0130), 'i');    /* İ, Go's simple mapping */
	assert_int_equal(word_count_to_lower(0x212A), 'k');    /* KELVIN SIGN */
	assert_int_equal(word_count_to_lower(0x01C5), 0x01C6); /* Lt */
	assert_int_equal(word_count_to_lower(0x0101), 0x0101); /* the lower of a stride-2 run */
	assert_int_equal(word_count_to_lower(0x0100), 0x0101);
	assert_int_equal(word_count_to_lower(0x10400), 0x10428);
	assert_int_equal(word_count_to_lower(0x2160), 0x2170); /* not a letter, but lowers */
	assert_string_equal(WORD_COUNT_UNICODE_VERSION, "15.0.0");
}

/* UTF-8 decoding as Go's utf8.DecodeRune. */
static void test_decode_rune(void **state)
{
	static const struct {
		const char *b;
		size_t n;
		uint32_t r;
		size_t len;
	} v[] = {
		{"a", 1, 'a', 1},
		{"\303\251", 2, 0xE9, 2},
		{"\342\202\254", 3, 0x20AC, 3},
		{"\360\237\230\200", 4, 0x1F600, 4},
		{"\303", 1, 0xFFFD, 1},            /* cut short */
		{"\303(", 2, 0xFFFD, 1},           /* bad continuation */
		{"\300\257", 2, 0xFFFD, 1},        /* overlong */
		{"\340\200\257", 3, 0xFFFD, 1},    /* overlong */
		{"\355\240\200", 3, 0xFFFD, 1},    /* surrogate */
		{"\364\220\200\200", 4, 0xFFFD, 1}, /* past U+10FFFF */
		{"\365\200\200\200", 4, 0xFFFD, 1},
		{"\200", 1, 0xFFFD, 1},            /* stray continuation */
		{"\357\277\275", 3, 0xFFFD, 3},    /* U+FFFD itself */
	};
	uint8_t enc[4];

	(void)state;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		uint32_t r;
		assert_int_equal(word_count_decode_rune((const uint8_t *)v[i].b, v[i].n, &r), v[i].len);
		assert_int_equal(r, v[i].r);
		if (v[i].len > 1) {
			assert_int_equal(word_count_encode_rune(r, enc), v[i].len);
			assert_memory_equal(enc, v[i].b, v[i].len);
		}
	}
}

/* Go: NGramCount{NGram: "naïve ß", Count: 300} with the UUID of producer
 * 01:02:03:04:05:06, clock 0x1ed2b3c4d5e6f7a1, OUTSIDE_TXN, Marshal'd. */
static const uint8_t GO_NGRAM_COUNT[] = {
	0x0a, 0x10, 0x4d, 0x5e, 0x6f, 0x7a, 0x2b, 0x3c, 0x11, 0xed, 0x84, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
	0x12, 0x09, 0x6e, 0x61, 0xc3, 0xaf, 0x76, 0x65, 0x20, 0xc3, 0x9f, 0x18, 0xac, 0x02,
};
/* Go: QueryResponse{Grams: [{NGram: "a b", Count: 2}]}. */
static const uint8_t GO_QUERY_RESPONSE[] = {0x0a, 0x07, 0x12, 0x03, 0x61, 0x20, 0x62, 0x18, 0x02};

static void test_ngram_count_message(void **state)
{
	const gaz_producer_id p = {{1, 2, 3, 4, 5, 6}};
	struct gaz_message_type t = word_count_ngram_count_type();
	WordCount__NGramCount m = WORD_COUNT__NGRAM_COUNT__INIT;
	gaz_uuid u, got;
	uint8_t *b = NULL;
	size_t n = 0;
	void *d = NULL;

	(void)state;
	assert_int_equal(gaz_uuid_build(&u, &p, 0x1ed2b3c4d5e6f7a1ull, GAZ_FLAG_OUTSIDE_TXN), 0);
	m.n_gram = "na\303\257ve \303\237";
	m.count = 300;
	assert_int_equal(t.get_uuid(&m, &got, t.arg), GAZ_ENOTFOUND);
	assert_int_equal(t.set_uuid(&m, &u, t.arg), 0);
	assert_int_equal(t.encode(&m, &b, &n, NULL, t.arg), 0);
	assert_int_equal(n, sizeof(GO_NGRAM_COUNT));
	assert_memory_equal(b, GO_NGRAM_COUNT, n);
	free(m.uuid.data);
	free(b);

	assert_int_equal(t.decode(GO_NGRAM_COUNT, sizeof(GO_NGRAM_COUNT), &d, NULL, t.arg), 0);
	assert_int_equal(t.get_uuid(d, &got, t.arg), 0);
	assert_memory_equal(got.b, u.b, 16);
	assert_string_equal(((WordCount__NGramCount *)d)->n_gram, "na\303\257ve \303\237");
	assert_int_equal(((WordCount__NGramCount *)d)->count, 300);
	t.free_msg(d, t.arg);
	assert_int_equal(t.decode((const uint8_t *)"\377\377", 2, &d, NULL, t.arg), GAZ_EINVAL);

	/* An ACK is an empty NGramCount: only its UUID is written. */
	void *ack = t.new_ack("examples/word-count/deltas/part-000", t.arg);
	assert_non_null(ack);
	assert_int_equal(t.encode(ack, &b, &n, NULL, t.arg), 0);
	assert_int_equal(n, 0); /* Go: Marshal of NewAcknowledgement is empty */
	free(b);
	assert_int_equal(t.set_uuid(ack, &u, t.arg), 0);
	assert_int_equal(t.encode(ack, &b, &n, NULL, t.arg), 0);
	assert_int_equal(n, 18);
	assert_memory_equal(b, GO_NGRAM_COUNT, 18);
	free(b);
	t.free_msg(ack, t.arg);

	WordCount__NGramCount g = WORD_COUNT__NGRAM_COUNT__INIT, *gp = &g;
	WordCount__QueryResponse q = WORD_COUNT__QUERY_RESPONSE__INIT;
	g.n_gram = "a b";
	g.count = 2;
	q.grams = &gp;
	q.n_grams = 1;
	uint8_t qb[16];
	assert_int_equal(word_count__query_response__pack(&q, qb), sizeof(GO_QUERY_RESPONSE));
	assert_memory_equal(qb, GO_QUERY_RESPONSE, sizeof(GO_QUERY_RESPONSE));
}

/* Gazette's word_count_test with 4 partitions: "START how" is consumed by
 * shard-001, "wood chuck" by shard-000, "wood END" and "wood would" by
 * shard-001 (the modulo of FNV-1a of the N-gram's bytes). */
static void test_modulo_mapping(void **state)
{
	(void)state;
	assert_int_equal(gaz_fnv1a32("START how", 9) % 4, 1);
	assert_int_equal(gaz_fnv1a32("wood chuck", 10) % 4, 0);
	assert_int_equal(gaz_fnv1a32("wood END", 8) % 4, 1);
	assert_int_equal(gaz_fnv1a32("wood would", 10) % 4, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ngrams_as_go),        cmocka_unit_test(test_letters_and_lower_case),
		cmocka_unit_test(test_decode_rune),         cmocka_unit_test(test_ngram_count_message),
		cmocka_unit_test(test_modulo_mapping),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
