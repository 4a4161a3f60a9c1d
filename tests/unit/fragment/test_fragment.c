/* test_fragment.c - fragment names, parsing and SHA1Sum/proto conversion. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#include "fragment/fragment.h"

#define NONE PROTOCOL__COMPRESSION_CODEC__NONE
#define GZIP PROTOCOL__COMPRESSION_CODEC__GZIP
#define ZSTD PROTOCOL__COMPRESSION_CODEC__ZSTANDARD
#define SNAPPY PROTOCOL__COMPRESSION_CODEC__SNAPPY
#define GZOD PROTOCOL__COMPRESSION_CODEC__GZIP_OFFLOAD_DECOMPRESSION

static const char sum_hex[] = "f572d396fae9206628714fb2ce00f72e94f2258f";

static void hex_to_sum(const char *hex, uint8_t sum[GAZ_SHA1_LEN])
{
	for (int i = 0; i < GAZ_SHA1_LEN; i++) {
		unsigned v;
		sscanf(hex + 2 * i, "%2x", &v);
		sum[i] = (uint8_t)v;
	}
}

static struct gaz_fragment example(int codec, const char *postfix)
{
	struct gaz_fragment f = {.journal = (char *)"examples/foo", .begin = 1024, .end = 2048,
				 .codec = codec, .path_postfix = (char *)postfix};
	hex_to_sum(sum_hex, f.sum);
	return f;
}

/* facts §5.1's example, for every codec. */
static void test_content_names(void **state)
{
	static const struct {
		int codec;
		const char *ext;
	} cases[] = {{NONE, ".raw"}, {GZIP, ".gz"}, {ZSTD, ".zst"}, {SNAPPY, ".sz"}, {GZOD, ""}};
	char buf[GAZ_FRAGMENT_PATH_MAX], want[256];
	struct gaz_status st = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct gaz_fragment f = example(cases[i].codec, NULL);
		snprintf(want, sizeof(want), "0000000000000400-0000000000000800-%s%s", sum_hex,
			 cases[i].ext);
		assert_int_equal(gaz_fragment_content_name(&f, buf, sizeof(buf), &st), 0);
		assert_string_equal(buf, want);
	}
	struct gaz_fragment f = example(GZIP, "date=2019-11-19/hour=22");
	assert_int_equal(gaz_fragment_content_path(&f, buf, sizeof(buf), &st), 0);
	assert_string_equal(buf, "examples/foo/date=2019-11-19/hour=22/"
				 "0000000000000400-0000000000000800-f572d396fae9206628714fb2ce00f72e94f2258f.gz");
	f = example(NONE, "");
	assert_int_equal(gaz_fragment_content_path(&f, buf, sizeof(buf), &st), 0);
	assert_string_equal(buf, "examples/foo/0000000000000400-0000000000000800-"
				 "f572d396fae9206628714fb2ce00f72e94f2258f.raw");
}

static void test_content_name_errors(void **state)
{
	struct gaz_fragment f = example(PROTOCOL__COMPRESSION_CODEC__INVALID, NULL);
	struct gaz_status st = {0};
	char buf[GAZ_FRAGMENT_NAME_MAX];

	(void)state;
	assert_int_equal(gaz_fragment_content_name(&f, buf, sizeof(buf), &st), GAZ_EINVAL);
	f = example(NONE, NULL);
	f.begin = 4096;
	gaz_status_clear(&st);
	assert_int_equal(gaz_fragment_content_name(&f, buf, sizeof(buf), &st), GAZ_EINVAL);
	f = example(NONE, NULL);
	gaz_status_clear(&st);
	assert_int_equal(gaz_fragment_content_name(&f, buf, 20, &st), GAZ_ERANGE);
}

/* Every codec and postfix survives name -> parse. */
static void test_round_trip(void **state)
{
	static const int codecs[] = {NONE, GZIP, ZSTD, SNAPPY, GZOD};
	static const char *postfixes[] = {NULL, "date=2019-11-19", "date=2019-11-19/hour=22"};
	char path[GAZ_FRAGMENT_PATH_MAX];
	struct gaz_status st = {0};

	(void)state;
	for (size_t c = 0; c < 5; c++) {
		for (size_t p = 0; p < 3; p++) {
			struct gaz_fragment f = example(codecs[c], postfixes[p]), g;
			const char *rel;
			assert_int_equal(gaz_fragment_content_path(&f, path, sizeof(path), &st), 0);
			rel = path + strlen("examples/foo/");
			assert_int_equal(gaz_fragment_parse_path("examples/foo", rel, &g, &st), 0);
			assert_true(gaz_fragment_equal(&f, &g));
			assert_null(g.backing_store);
			assert_int_equal(g.mod_time, 0);
			gaz_fragment_release(&g);
		}
	}
}

static void test_parse_extensions(void **state)
{
	static const struct {
		const char *ext;
		int codec;
	} cases[] = {{".raw", NONE},   {".RAW", NONE},        {".gz", GZIP},    {".GZ", GZIP},
		     {".gzip", GZIP},  {".GZip", GZIP},       {".zst", ZSTD},   {".ZStandard", ZSTD},
		     {".sz", SNAPPY},  {".Snappy", SNAPPY},   {"", GZOD},       {".gzod", GZOD},
		     {".GZOD", GZOD}};
	char name[256];
	struct gaz_status st = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct gaz_fragment g;
		snprintf(name, sizeof(name), "00000000000000ff-0000000000000fff-%s%s", sum_hex,
			 cases[i].ext);
		assert_int_equal(gaz_fragment_parse_path("a/journal", name, &g, &st), 0);
		assert_int_equal(g.codec, cases[i].codec);
		assert_int_equal(g.begin, 0xff);
		assert_int_equal(g.end, 0xfff);
		assert_string_equal(g.journal, "a/journal");
		assert_null(g.path_postfix);
		gaz_fragment_release(&g);
	}
}

/* Hex case and length are Go-ParseInt tolerant; the re-rendered name is
 * canonical. */
static void test_parse_tolerant(void **state)
{
	struct gaz_fragment g;
	struct gaz_status st = {0};
	char buf[GAZ_FRAGMENT_NAME_MAX];

	(void)state;
	assert_int_equal(gaz_fragment_parse_path("a/journal",
						 "ABC-00000000000000000DEF-F572D396FAE9206628714FB2CE00F72E94F2258F.raw",
						 &g, &st),
			 0);
	assert_int_equal(g.begin, 0xabc);
	assert_int_equal(g.end, 0xdef);
	assert_int_equal(gaz_fragment_content_name(&g, buf, sizeof(buf), &st), 0);
	assert_string_equal(buf, "0000000000000abc-0000000000000def-f572d396fae9206628714fb2ce00f72e94f2258f.raw");
	gaz_fragment_release(&g);
	/* The largest int64 offset. */
	assert_int_equal(gaz_fragment_parse_path("a/journal",
						 "7fffffffffffffff-7fffffffffffffff-f572d396fae9206628714fb2ce00f72e94f2258f.raw",
						 &g, &st),
			 0);
	assert_int_equal(g.end, INT64_MAX);
	gaz_fragment_release(&g);
}

static void test_parse_foreign(void **state)
{
	static const char *bad[] = {
		"README.txt",
		"subdir/",
		"",
		"0000000000000000-000000000000000a-zz.raw",
		/* 19-byte and 21-byte sums */
		"0000000000000000-000000000000000a-f572d396fae9206628714fb2ce00f72e94f225.raw",
		"0000000000000000-000000000000000a-f572d396fae9206628714fb2ce00f72e94f2258f00.raw",
		"0000000000000000-000000000000000a.raw",
		"0000000000000000-000000000000000a-f572d396fae9206628714fb2ce00f72e94f2258f-x.raw",
		"0000000000000000-000000000000000a-f572d396fae9206628714fb2ce00f72e94f2258f.txt",
		"0000000000000000-000000000000000a-f572d396fae9206628714fb2ce00f72e94f2258f.lz4",
		/* begin > end, signs, prefixes, overflow, empty fields */
		"0000000000000010-000000000000000a-f572d396fae9206628714fb2ce00f72e94f2258f.raw",
		"+0-a-f572d396fae9206628714fb2ce00f72e94f2258f.raw",
		"0x0-0xa-f572d396fae9206628714fb2ce00f72e94f2258f.raw",
		"0-8000000000000000-f572d396fae9206628714fb2ce00f72e94f2258f.raw",
		"-000000000000000a-f572d396fae9206628714fb2ce00f72e94f2258f.raw",
		"0000000000000000-000000000000000g-f572d396fae9206628714fb2ce00f72e94f2258f.raw",
		/* unclean or invalid postfixes */
		"../0000000000000000-000000000000000a-f572d396fae9206628714fb2ce00f72e94f2258f.raw",
		"a//0000000000000000-000000000000000a-f572d396fae9206628714fb2ce00f72e94f2258f.raw",
		"/0000000000000000-000000000000000a-f572d396fae9206628714fb2ce00f72e94f2258f.raw",
		"./0000000000000000-000000000000000a-f572d396fae9206628714fb2ce00f72e94f2258f.raw",
		"a b/0000000000000000-000000000000000a-f572d396fae9206628714fb2ce00f72e94f2258f.raw",
		".partial-0000000000000000-000000000000000a-f572d396fae9206628714fb2ce00f72e94f2258f.raw.Xy12ab",
	};
	struct gaz_fragment g;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct gaz_status st = {0};
		int rc = gaz_fragment_parse_path("a/journal", bad[i], &g, &st);
		if (rc != GAZ_EINVAL)
			fail_msg("accepted foreign name \"%s\"", bad[i]);
		assert_non_null(strstr(st.msg, "is not a fragment"));
		assert_null(g.journal);
	}
}

/* Listing is recursive: journal a/b/c's fragments look like journal a/b's
 * with postfix "c" (facts §5.1 quirk). */
static void test_parse_nested_journal_quirk(void **state)
{
	struct gaz_fragment g;
	struct gaz_status st = {0};

	(void)state;
	assert_int_equal(gaz_fragment_parse_path(
				 "a/b", "c/0000000000000000-0000000000000010-f572d396fae9206628714fb2ce00f72e94f2258f.sz",
				 &g, &st),
			 0);
	assert_string_equal(g.journal, "a/b");
	assert_string_equal(g.path_postfix, "c");
	assert_int_equal(g.codec, SNAPPY);
	gaz_fragment_release(&g);
}

static const char sha1_empty_hex[] = "da39a3ee5e6b4b0d3255bfef95601890afd80709";

static void test_sha1sum_proto(void **state)
{
	Protocol__SHA1Sum pb = PROTOCOL__SHA1_SUM__INIT;
	uint8_t sum[GAZ_SHA1_LEN], back[GAZ_SHA1_LEN];
	uint8_t wire[64];
	size_t n;

	(void)state;
	hex_to_sum(sha1_empty_hex, sum);
	gaz_sha1sum_to_proto(sum, &pb);
	assert_true(pb.part1 == UINT64_C(0xda39a3ee5e6b4b0d));
	assert_true(pb.part2 == UINT64_C(0x3255bfef95601890));
	assert_true(pb.part3 == UINT32_C(0xafd80709));
	gaz_sha1sum_from_proto(&pb, back);
	assert_memory_equal(sum, back, GAZ_SHA1_LEN);

	/* On the wire: fixed64/fixed64/fixed32, little-endian (facts §1.2). */
	n = protocol__sha1_sum__pack(&pb, wire);
	assert_int_equal(n, 1 + 8 + 1 + 8 + 1 + 4);
	static const uint8_t want[] = {0x09, 0x0d, 0x4b, 0x6b, 0x5e, 0xee, 0xa3, 0x39, 0xda,
				       0x11, 0x90, 0x18, 0x60, 0x95, 0xef, 0xbf, 0x55, 0x32,
				       0x1d, 0x09, 0x07, 0xd8, 0xaf};
	assert_memory_equal(wire, want, sizeof(want));

	gaz_sha1sum_from_proto(NULL, back);
	for (int i = 0; i < GAZ_SHA1_LEN; i++)
		assert_int_equal(back[i], 0);
}

/* Fragment <-> proto, through real packing, and the zero sum of an empty
 * fragment. */
static void test_fragment_proto(void **state)
{
	struct gaz_fragment f = example(GZIP, "date=2019-11-19"), g, empty = {0};
	Protocol__Fragment pb = PROTOCOL__FRAGMENT__INIT, *un;
	Protocol__SHA1Sum spb = PROTOCOL__SHA1_SUM__INIT;
	struct gaz_status st = {0};
	uint8_t buf[512];
	size_t n;

	(void)state;
	f.backing_store = (char *)"s3://bucket/prefix/";
	f.mod_time = 1574200000;
	gaz_fragment_to_proto(&f, &pb, &spb);
	n = protocol__fragment__pack(&pb, buf);
	un = protocol__fragment__unpack(NULL, n, buf);
	assert_non_null(un);
	assert_int_equal(gaz_fragment_from_proto(&g, un, &st), 0);
	protocol__fragment__free_unpacked(un, NULL);
	assert_true(gaz_fragment_equal(&f, &g));
	assert_string_equal(g.backing_store, "s3://bucket/prefix/");
	gaz_fragment_release(&g);

	/* An empty fragment keeps the zero sum, not SHA1(""). */
	empty.journal = (char *)"a/journal";
	empty.begin = empty.end = 77;
	empty.codec = NONE;
	assert_true(gaz_fragment_sum_is_zero(&empty));
	pb = (Protocol__Fragment)PROTOCOL__FRAGMENT__INIT;
	gaz_fragment_to_proto(&empty, &pb, &spb);
	assert_true(pb.sum->part1 == 0 && pb.sum->part2 == 0 && pb.sum->part3 == 0);
	assert_string_equal(pb.backing_store, "");
	assert_string_equal(pb.path_postfix, "");

	/* An absent sum on the wire decodes as zero. */
	pb.sum = NULL;
	n = protocol__fragment__pack(&pb, buf);
	un = protocol__fragment__unpack(NULL, n, buf);
	assert_int_equal(gaz_fragment_from_proto(&g, un, &st), 0);
	protocol__fragment__free_unpacked(un, NULL);
	assert_true(gaz_fragment_sum_is_zero(&g));
	assert_int_equal(g.begin, 77);
	gaz_fragment_release(&g);
}

static void test_copy_equal_release(void **state)
{
	struct gaz_fragment f = example(ZSTD, "p"), g;
	struct gaz_status st = {0};

	(void)state;
	assert_int_equal(gaz_fragment_copy(&g, &f, &st), 0);
	assert_true(gaz_fragment_equal(&f, &g));
	assert_ptr_not_equal(g.journal, f.journal);
	g.sum[19] ^= 1;
	assert_false(gaz_fragment_equal(&f, &g));
	gaz_fragment_release(&g);
	gaz_fragment_release(&g); /* idempotent */
	assert_null(g.journal);

	/* NULL and "" compare alike. */
	f.path_postfix = (char *)"";
	g = example(ZSTD, NULL);
	assert_true(gaz_fragment_equal(&f, &g));
}

/* gaz_sha1 against FIPS 180-2's vectors, and the shared digest used
 * incrementally gives the same sum. */
static void test_sha1(void **state)
{
	static const uint8_t abc[GAZ_SHA1_LEN] = {0xa9, 0x99, 0x3e, 0x36, 0x47, 0x06, 0x81, 0x6a,
						  0xba, 0x3e, 0x25, 0x71, 0x78, 0x50, 0xc2, 0x6c,
						  0x9c, 0xd0, 0xd8, 0x9d};
	static const uint8_t empty[GAZ_SHA1_LEN] = {0xda, 0x39, 0xa3, 0xee, 0x5e, 0x6b, 0x4b, 0x0d,
						    0x32, 0x55, 0xbf, 0xef, 0x95, 0x60, 0x18, 0x90,
						    0xaf, 0xd8, 0x07, 0x09};
	uint8_t sum[GAZ_SHA1_LEN];
	unsigned int n = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();

	(void)state;
	assert_int_equal(gaz_sha1("abc", 3, sum), 0);
	assert_memory_equal(sum, abc, sizeof(abc));
	assert_int_equal(gaz_sha1("", 0, sum), 0);
	assert_memory_equal(sum, empty, sizeof(empty));
	assert_non_null(ctx);
	assert_ptr_equal(gaz_sha1_md(), gaz_sha1_md());
	assert_int_equal(EVP_DigestInit_ex(ctx, gaz_sha1_md(), NULL), 1);
	assert_int_equal(EVP_DigestUpdate(ctx, "a", 1), 1);
	assert_int_equal(EVP_DigestUpdate(ctx, "bc", 2), 1);
	assert_int_equal(EVP_DigestFinal_ex(ctx, sum, &n), 1);
	assert_int_equal(n, GAZ_SHA1_LEN);
	assert_memory_equal(sum, abc, sizeof(abc));
	EVP_MD_CTX_free(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sha1),
		cmocka_unit_test(test_content_names),
		cmocka_unit_test(test_content_name_errors),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_parse_extensions),
		cmocka_unit_test(test_parse_tolerant),
		cmocka_unit_test(test_parse_foreign),
		cmocka_unit_test(test_parse_nested_journal_quirk),
		cmocka_unit_test(test_sha1sum_proto),
		cmocka_unit_test(test_fragment_proto),
		cmocka_unit_test(test_copy_equal_release),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
