/* test_codec.c - every codec round-trips 5 MiB; interop with gzip/zstd CLIs
 * and Go's snappy framing; damaged input never decodes as complete. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "fragment/codec.h"
#include "fragment/fragment.h"

#define NONE PROTOCOL__COMPRESSION_CODEC__NONE
#define GZIP PROTOCOL__COMPRESSION_CODEC__GZIP
#define ZSTD PROTOCOL__COMPRESSION_CODEC__ZSTANDARD
#define SNAPPY PROTOCOL__COMPRESSION_CODEC__SNAPPY
#define GZOD PROTOCOL__COMPRESSION_CODEC__GZIP_OFFLOAD_DECOMPRESSION

static const int all_codecs[] = {NONE, GZIP, ZSTD, SNAPPY, GZOD};

#define DATA_LEN (5 * 1024 * 1024)
static uint8_t *data;
static char tmpdir[] = "/tmp/test_codec.XXXXXX";

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Log-like text interleaved with incompressible runs, so codecs take both
 * their compressed and their stored paths. */
static int setup(void **state)
{
	static const char *words[] = {"journal", "fragment", "offset", "append", "broker",
				      "replica", "{\"uuid\":", "0123456789", "\n", ", "};
	size_t off = 0;

	(void)state;
	data = malloc(DATA_LEN);
	assert_non_null(mkdtemp(tmpdir));
	while (off < DATA_LEN) {
		if (next_rand() % 4096 == 0) {
			size_t run = 1 + next_rand() % 16384;
			for (size_t i = 0; i < run && off < DATA_LEN; i++)
				data[off++] = (uint8_t)next_rand();
		} else {
			const char *w = words[next_rand() % 10];
			for (size_t i = 0; w[i] && off < DATA_LEN; i++)
				data[off++] = (uint8_t)w[i];
		}
	}
	return 0;
}

static int teardown(void **state)
{
	char cmd[256];

	(void)state;
	free(data);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd);
}

/* Encodes buf with writes of random sizes. */
static void encode(int codec, const uint8_t *buf, size_t len, struct gaz_mem_sink *out)
{
	struct gaz_encoder *enc;
	struct gaz_status st = {0};
	size_t off = 0;

	memset(out, 0, sizeof(*out));
	assert_int_equal(gaz_encoder_new(codec, gaz_mem_sink_write, out, &enc, &st), 0);
	while (off < len) {
		size_t n = 1 + next_rand() % 300000;
		if (n > len - off)
			n = len - off;
		assert_int_equal(gaz_encoder_write(enc, buf + off, n, &st), 0);
		off += n;
	}
	assert_int_equal(gaz_encoder_finish(enc, &st), 0);
	assert_int_equal(gaz_encoder_finish(enc, &st), 0); /* idempotent */
	assert_int_equal(gaz_encoder_bytes_in(enc), (int64_t)len);
	assert_int_equal(gaz_encoder_write(enc, "x", 1, &st), GAZ_EINVAL);
	gaz_encoder_free(enc);
}

/* Decodes src with reads of random sizes into out; returns the final code. */
static int decode(int codec, const uint8_t *src, size_t len, struct gaz_mem_sink *out,
		  struct gaz_status *st)
{
	struct gaz_mem_src in = {src, len, 0};
	struct gaz_decoder *dec;
	uint8_t buf[100000];
	size_t n;
	int rc;

	memset(out, 0, sizeof(*out));
	assert_int_equal(gaz_decoder_new(codec, gaz_mem_src_read, &in, &dec, st), 0);
	while ((rc = gaz_decoder_read(dec, buf, 1 + next_rand() % sizeof(buf), &n, st)) == 0) {
		assert_true(n > 0);
		assert_int_equal(gaz_mem_sink_write(out, buf, n, st), 0);
	}
	/* Errors and the end are sticky. */
	assert_int_equal(gaz_decoder_read(dec, buf, sizeof(buf), &n, NULL), rc);
	gaz_decoder_free(dec);
	return rc;
}

static void test_round_trip_all_codecs(void **state)
{
	(void)state;
	for (size_t c = 0; c < 5; c++) {
		struct gaz_mem_sink enc, dec;
		struct gaz_status st = {0};
		encode(all_codecs[c], data, DATA_LEN, &enc);
		if (all_codecs[c] != NONE)
			assert_true(enc.len < DATA_LEN);
		assert_int_equal(decode(all_codecs[c], enc.data, enc.len, &dec, &st), GAZ_EOF);
		assert_int_equal(dec.len, DATA_LEN);
		assert_memory_equal(dec.data, data, DATA_LEN);
		gaz_mem_sink_release(&enc);
		gaz_mem_sink_release(&dec);
	}
}

/* Counts gzip members by inflating one at a time with zlib itself. */
static int count_gzip_members(const uint8_t *buf, size_t len)
{
	static uint8_t out[1 << 16];
	z_stream zs = {0};
	int members = 0, zr;

	assert_int_equal(inflateInit2(&zs, 16 + 15), Z_OK);
	zs.next_in = (Bytef *)buf;
	zs.avail_in = (uInt)len;
	while (zs.avail_in > 0) {
		do {
			zs.next_out = out;
			zs.avail_out = sizeof(out);
			zr = inflate(&zs, Z_NO_FLUSH);
		} while (zr == Z_OK);
		assert_int_equal(zr, Z_STREAM_END);
		members++;
		inflateReset(&zs);
	}
	inflateEnd(&zs);
	return members;
}

/* GZIP closes a member per >= 1 MiB of input; GZIP_OFFLOAD_DECOMPRESSION
 * stays one member (stores transcode it as one gzip body). */
static void test_gzip_members(void **state)
{
	struct gaz_mem_sink gz, od;

	(void)state;
	encode(GZIP, data, DATA_LEN, &gz);
	encode(GZOD, data, DATA_LEN, &od);
	assert_in_range(count_gzip_members(gz.data, gz.len), 3, 5);
	assert_int_equal(count_gzip_members(od.data, od.len), 1);
	gaz_mem_sink_release(&gz);
	gaz_mem_sink_release(&od);

	/* An empty GZIP stream is still one valid member. */
	encode(GZIP, data, 0, &gz);
	assert_int_equal(count_gzip_members(gz.data, gz.len), 1);
	gaz_mem_sink_release(&gz);
}

static void write_file(const char *path, const void *buf, size_t len)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, len, f), len);
	fclose(f);
}

static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	struct stat sb;
	uint8_t *buf;

	assert_non_null(f);
	assert_int_equal(fstat(fileno(f), &sb), 0);
	*len = (size_t)sb.st_size;
	buf = malloc(*len + 1);
	assert_int_equal(fread(buf, 1, *len, f), *len);
	fclose(f);
	return buf;
}

static void run(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0)
		fail_msg("command failed: %s", cmd);
}

/* Two `gzip` outputs concatenated decode as one stream (cases BR-12). */
static void test_gzip_cli_multi_member(void **state)
{
	char a[256], b[256], ab[256];
	struct gaz_mem_sink dec;
	struct gaz_status st = {0};
	uint8_t *buf, sum[20];
	size_t len;

	(void)state;
	snprintf(a, sizeof(a), "%s/a", tmpdir);
	snprintf(b, sizeof(b), "%s/b", tmpdir);
	snprintf(ab, sizeof(ab), "%s/ab.gz", tmpdir);
	write_file(a, "0123456789", 10);
	write_file(b, "abcdefghij", 10);
	run("gzip -nc %s > %s && gzip -nc %s >> %s", a, ab, b, ab);
	buf = read_file(ab, &len);
	assert_int_equal(count_gzip_members(buf, len), 2);
	for (int codec = GZIP; codec <= GZOD; codec += GZOD - GZIP) {
		assert_int_equal(decode(codec, buf, len, &dec, &st), GAZ_EOF);
		assert_int_equal(dec.len, 20);
		assert_memory_equal(dec.data, "0123456789abcdefghij", 20);
		gaz_mem_sink_release(&dec);
	}
	/* The digest BR-12 names the fragment by. */
	EVP_Digest("0123456789abcdefghij", 20, sum, NULL, EVP_sha1(), NULL);
	static const uint8_t want[20] = {0x7c, 0x8e, 0x1d, 0xc5, 0xa4, 0xfd, 0x22, 0xf1, 0x31, 0x1a,
					 0x7a, 0x1f, 0x3e, 0x34, 0x01, 0x21, 0x5c, 0x0c, 0xca, 0xb3};
	assert_memory_equal(sum, want, 20);
	free(buf);
}

/* Our GZIP and ZSTANDARD files are readable by the reference CLIs. */
static void test_cli_reads_ours(void **state)
{
	static const struct {
		int codec;
		const char *cmd;
	} cases[] = {{GZIP, "gzip -dc"}, {GZOD, "gzip -dc"}, {ZSTD, "zstd -qdc"}};
	char enc_path[256], out_path[256];
	size_t len;

	(void)state;
	for (size_t i = 0; i < 3; i++) {
		struct gaz_mem_sink enc;
		uint8_t *back;
		encode(cases[i].codec, data, DATA_LEN, &enc);
		snprintf(enc_path, sizeof(enc_path), "%s/ours.%zu", tmpdir, i);
		snprintf(out_path, sizeof(out_path), "%s/ours.%zu.out", tmpdir, i);
		write_file(enc_path, enc.data, enc.len);
		run("%s %s > %s", cases[i].cmd, enc_path, out_path);
		back = read_file(out_path, &len);
		assert_int_equal(len, DATA_LEN);
		assert_memory_equal(back, data, DATA_LEN);
		free(back);
		gaz_mem_sink_release(&enc);
	}
}

/* zstd CLI output (two frames concatenated) decodes as one stream. */
static void test_zstd_cli_frames(void **state)
{
	char raw[256], z[256];
	struct gaz_mem_sink dec;
	struct gaz_status st = {0};
	uint8_t *buf;
	size_t len;

	(void)state;
	snprintf(raw, sizeof(raw), "%s/z.raw", tmpdir);
	snprintf(z, sizeof(z), "%s/z.zst", tmpdir);
	write_file(raw, data, DATA_LEN / 2);
	run("zstd -qc %s > %s && zstd -qc %s >> %s", raw, z, raw, z);
	buf = read_file(z, &len);
	assert_int_equal(decode(ZSTD, buf, len, &dec, &st), GAZ_EOF);
	assert_int_equal(dec.len, DATA_LEN);
	assert_memory_equal(dec.data, data, DATA_LEN / 2);
	assert_memory_equal(dec.data + DATA_LEN / 2, data, DATA_LEN / 2);
	gaz_mem_sink_release(&dec);
	free(buf);
}

/* Streams written by Go's snappy.NewBufferedWriter (github.com/golang/snappy
 * v1.0.0, the writer Gazette uses): a compressed chunk, and a stored one. */
static const uint8_t go_snappy_compressed[] = {
	0xff, 0x06, 0x00, 0x00, 0x73, 0x4e, 0x61, 0x50, 0x70, 0x59, 0x00, 0x27, 0x00, 0x00,
	0x0a, 0x9f, 0xfa, 0x81, 0xb8, 0x01, 0x58, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x2c, 0x20,
	0x73, 0x6e, 0x61, 0x70, 0x70, 0x79, 0x20, 0x66, 0x72, 0x61, 0x6d, 0x69, 0x6e, 0x67,
	0x21, 0x20, 0xfe, 0x17, 0x00, 0xfe, 0x17, 0x00, 0x82, 0x17, 0x00};
static const uint8_t go_snappy_stored[] = {
	0xff, 0x06, 0x00, 0x00, 0x73, 0x4e, 0x61, 0x50, 0x70, 0x59, 0x01, 0x14, 0x00, 0x00,
	0x7e, 0x70, 0xbf, 0xc5, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39,
	0x61, 0x62, 0x63, 0x64, 0x65, 0x66};

static void test_snappy_go_vectors(void **state)
{
	char want[256] = "";
	struct gaz_mem_sink dec, enc;
	struct gaz_status st = {0};
	uint8_t both[sizeof(go_snappy_compressed) + sizeof(go_snappy_stored)];

	(void)state;
	for (int i = 0; i < 8; i++)
		strcat(want, "hello, snappy framing! ");
	assert_int_equal(decode(SNAPPY, go_snappy_compressed, sizeof(go_snappy_compressed), &dec, &st),
			 GAZ_EOF);
	assert_int_equal(dec.len, strlen(want));
	assert_memory_equal(dec.data, want, dec.len);
	gaz_mem_sink_release(&dec);

	/* Concatenated streams (repeated identifier) are one stream. */
	memcpy(both, go_snappy_compressed, sizeof(go_snappy_compressed));
	memcpy(both + sizeof(go_snappy_compressed), go_snappy_stored, sizeof(go_snappy_stored));
	assert_int_equal(decode(SNAPPY, both, sizeof(both), &dec, &st), GAZ_EOF);
	assert_int_equal(dec.len, strlen(want) + 16);
	assert_memory_equal(dec.data + strlen(want), "0123456789abcdef", 16);
	gaz_mem_sink_release(&dec);

	/* And we write the same bytes for the stored case. */
	encode(SNAPPY, (const uint8_t *)"0123456789abcdef", 16, &enc);
	assert_int_equal(enc.len, sizeof(go_snappy_stored));
	assert_memory_equal(enc.data, go_snappy_stored, enc.len);
	gaz_mem_sink_release(&enc);
}

static void test_crc32c(void **state)
{
	(void)state;
	/* The CRC-32C check value (RFC 3720 B.4 / iSCSI). */
	assert_int_equal(gaz_crc32c(0, "123456789", 9), 0xe3069283);
	assert_int_equal(gaz_crc32c(gaz_crc32c(0, "1234", 4), "56789", 5), 0xe3069283);
	assert_int_equal(gaz_crc32c(0, "", 0), 0);
	/* the SSE4.2 path (or the table) against the bitwise definition, at every alignment and
	 * length around its 8-byte steps */
	uint8_t buf[200];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	for (size_t off = 0; off < 9; off++)
		for (size_t len = 0; len + off <= sizeof(buf); len += 13) {
			uint32_t want = ~0u;
			for (size_t i = 0; i < len; i++) { /* bit at a time: the definition */
				want ^= buf[off + i];
				for (int k = 0; k < 8; k++)
					want = (want & 1) ? (want >> 1) ^ 0x82f63b78u : want >> 1;
			}
			want = ~want;
			assert_int_equal(gaz_crc32c(0, buf + off, len), want);
		}
}

/* Damaged input of every kind ends in GAZ_EPROTO, never a clean end. */
static void expect_damaged(int codec, const uint8_t *buf, size_t len, const char *what)
{
	struct gaz_mem_sink dec;
	struct gaz_status st = {0};
	int rc = decode(codec, buf, len, &dec, &st);

	if (rc != GAZ_EPROTO)
		fail_msg("codec %d, %s: got %d (%s), want GAZ_EPROTO", codec, what, rc, st.msg);
	assert_true(st.msg[0] != 0);
	gaz_mem_sink_release(&dec);
}

static void test_damaged_input(void **state)
{
	uint8_t junk[] = "junk!";

	(void)state;
	for (size_t c = 1; c < 5; c++) {
		int codec = all_codecs[c];
		struct gaz_mem_sink enc;
		uint8_t *buf;
		encode(codec, data, 200000, &enc);
		buf = malloc(enc.len + 5);
		memcpy(buf, enc.data, enc.len);
		expect_damaged(codec, buf, enc.len - 8, "truncated trailer");
		expect_damaged(codec, buf, enc.len / 2, "cut in half");
		memcpy(buf + enc.len, junk, 5);
		expect_damaged(codec, buf, enc.len + 5, "trailing garbage");
		memcpy(buf, enc.data, enc.len);
		buf[enc.len / 2] ^= 0x5a;
		expect_damaged(codec, buf, enc.len, "flipped byte");
		free(buf);
		gaz_mem_sink_release(&enc);
	}
}

static void test_snappy_framing_errors(void **state)
{
	uint8_t buf[sizeof(go_snappy_stored)];
	struct gaz_mem_sink dec;
	struct gaz_status st = {0};

	(void)state;
	/* Data before the stream identifier. */
	expect_damaged(SNAPPY, go_snappy_stored + 10, sizeof(go_snappy_stored) - 10, "no identifier");
	/* Checksum mismatch. */
	memcpy(buf, go_snappy_stored, sizeof(buf));
	buf[14] ^= 1;
	expect_damaged(SNAPPY, buf, sizeof(buf), "bad crc");
	/* Reserved unskippable chunk type. */
	memcpy(buf, go_snappy_stored, sizeof(buf));
	buf[10] = 0x02;
	expect_damaged(SNAPPY, buf, sizeof(buf), "unskippable");
	/* A skippable chunk (0x80) is skipped; padding too. */
	static const uint8_t skip[] = {0xff, 0x06, 0x00, 0x00, 's', 'N', 'a', 'P', 'p', 'Y',
				       0x80, 0x03, 0x00, 0x00, 1, 2, 3,
				       0xfe, 0x00, 0x00, 0x00};
	assert_int_equal(decode(SNAPPY, skip, sizeof(skip), &dec, &st), GAZ_EOF);
	assert_int_equal(dec.len, 0);
	gaz_mem_sink_release(&dec);
}

/* Empty sources: a clean empty stream except for gzip (as `gzip -d`). */
static void test_empty_input(void **state)
{
	struct gaz_mem_sink dec;
	struct gaz_status st = {0};

	(void)state;
	assert_int_equal(decode(NONE, NULL, 0, &dec, &st), GAZ_EOF);
	assert_int_equal(decode(ZSTD, NULL, 0, &dec, &st), GAZ_EOF);
	assert_int_equal(decode(SNAPPY, NULL, 0, &dec, &st), GAZ_EOF);
	assert_int_equal(decode(GZIP, NULL, 0, &dec, &st), GAZ_EPROTO);
	gaz_status_clear(&st);
	assert_int_equal(decode(GZOD, NULL, 0, &dec, &st), GAZ_EPROTO);
}

static void test_invalid_codec(void **state)
{
	struct gaz_encoder *enc;
	struct gaz_decoder *dec;
	struct gaz_status st = {0};

	(void)state;
	assert_int_equal(gaz_encoder_new(0, gaz_mem_sink_write, NULL, &enc, &st), GAZ_EINVAL);
	assert_null(enc);
	assert_int_equal(gaz_decoder_new(6, gaz_mem_src_read, NULL, &dec, &st), GAZ_EINVAL);
	assert_null(dec);
}

/* A failing sink's error comes back and sticks. */
static int failing_sink(void *arg, const void *buf, size_t len, struct gaz_status *st)
{
	(void)arg, (void)buf, (void)len;
	return gaz_status_set(st, GAZ_EIO, "disk full");
}

static void test_sink_error(void **state)
{
	struct gaz_encoder *enc;
	struct gaz_status st = {0};

	(void)state;
	assert_int_equal(gaz_encoder_new(GZIP, failing_sink, NULL, &enc, &st), 0);
	assert_int_equal(gaz_encoder_write(enc, data, 3 << 20, &st), GAZ_EIO);
	assert_string_equal(st.msg, "disk full");
	assert_int_equal(gaz_encoder_finish(enc, NULL), GAZ_EIO);
	gaz_encoder_free(enc);
}

/* Whole-file compression and fd-sourced decoding (the persister's path). */
static void test_compress_file(void **state)
{
	char in_path[256], out_path[256];

	(void)state;
	snprintf(in_path, sizeof(in_path), "%s/in", tmpdir);
	write_file(in_path, data, DATA_LEN);
	for (size_t c = 0; c < 5; c++) {
		FILE *in = fopen(in_path, "rb"), *out;
		struct gaz_status st = {0};
		struct gaz_decoder *dec;
		struct gaz_fd_src src;
		uint8_t *back = malloc(DATA_LEN + 1);
		size_t got = 0, n;
		int rc;

		snprintf(out_path, sizeof(out_path), "%s/out.%zu", tmpdir, c);
		out = fopen(out_path, "w+b");
		assert_int_equal(gaz_codec_compress_file(all_codecs[c], fileno(in), fileno(out), &st), 0);
		src = (struct gaz_fd_src){fileno(out), 0, -1};
		assert_int_equal(gaz_decoder_new(all_codecs[c], gaz_fd_src_read, &src, &dec, &st), 0);
		while ((rc = gaz_decoder_read(dec, back + got, DATA_LEN + 1 - got, &n, &st)) == 0)
			got += n;
		assert_int_equal(rc, GAZ_EOF);
		assert_int_equal(got, DATA_LEN);
		assert_memory_equal(back, data, DATA_LEN);
		gaz_decoder_free(dec);
		free(back);
		fclose(in);
		fclose(out);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip_all_codecs),
		cmocka_unit_test(test_gzip_members),
		cmocka_unit_test(test_gzip_cli_multi_member),
		cmocka_unit_test(test_cli_reads_ours),
		cmocka_unit_test(test_zstd_cli_frames),
		cmocka_unit_test(test_snappy_go_vectors),
		cmocka_unit_test(test_crc32c),
		cmocka_unit_test(test_damaged_input),
		cmocka_unit_test(test_snappy_framing_errors),
		cmocka_unit_test(test_empty_input),
		cmocka_unit_test(test_invalid_codec),
		cmocka_unit_test(test_sink_error),
		cmocka_unit_test(test_compress_file),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
