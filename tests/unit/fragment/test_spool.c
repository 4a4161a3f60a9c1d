/* test_spool.c - spool append/commit/rollback/roll against one-shot SHA-1. */
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

#include "fragment/codec.h"
#include "fragment/spool.h"

#define NONE PROTOCOL__COMPRESSION_CODEC__NONE
#define GZIP PROTOCOL__COMPRESSION_CODEC__GZIP

static char tmpdir[] = "/tmp/test_spool.XXXXXX";

static int setup(void **state)
{
	(void)state;
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return rmdir(tmpdir); /* spool files are unlinked: the dir is empty */
}

static void sha1(const void *buf, size_t len, uint8_t out[20])
{
	assert_int_equal(EVP_Digest(buf, len, out, NULL, EVP_sha1(), NULL), 1);
}

static void read_all(struct gaz_spool *s, int64_t off, uint8_t *buf, size_t len)
{
	struct gaz_status st = {0};
	size_t got = 0, n;

	while (got < len) {
		assert_int_equal(gaz_spool_pread(s, off + (int64_t)got, buf + got, len - got, &n, &st), 0);
		got += n;
	}
}

static void test_new_spool(void **state)
{
	struct gaz_spool s;
	struct gaz_status st = {0};
	struct gaz_fragment next;

	(void)state;
	assert_int_equal(gaz_spool_init(&s, "a/journal", tmpdir, &st), 0);
	assert_string_equal(s.fragment.journal, "a/journal");
	assert_int_equal(s.fragment.begin, 0);
	assert_int_equal(s.fragment.end, 0);
	assert_int_equal(s.fragment.codec, NONE);
	assert_true(gaz_fragment_sum_is_zero(&s.fragment));
	assert_null(gaz_spool_file(&s));
	/* Next() of an empty spool is itself, with the zero sum. */
	assert_int_equal(gaz_spool_next(&s, &next, &st), 0);
	assert_true(gaz_fragment_equal(&next, &s.fragment));
	gaz_fragment_release(&next);
	assert_int_equal(gaz_spool_commit(&s, &st), 0); /* nothing to commit */
	assert_int_equal(s.fragment.end, 0);
	gaz_spool_release(&s);
}

/* cases BR-08's fragment: "hello, world\n" = cd50d197... */
static void test_append_commit(void **state)
{
	static const uint8_t want[20] = {0xcd, 0x50, 0xd1, 0x97, 0x84, 0x89, 0x70, 0x85, 0xa8, 0xd0,
					 0xe3, 0xe4, 0x13, 0xf8, 0x61, 0x2b, 0x09, 0x7c, 0x03, 0xf1};
	struct gaz_spool s;
	struct gaz_status st = {0};
	struct gaz_fragment next;
	uint8_t buf[16];
	size_t n;
	struct stat sb;

	(void)state;
	assert_int_equal(gaz_spool_init(&s, "eo/j", tmpdir, &st), 0);
	assert_int_equal(gaz_spool_append(&s, "hello, ", 7, &st), 0);
	assert_int_equal(gaz_spool_append(&s, "world\n", 6, &st), 0);
	assert_int_equal(s.delta, 13);
	assert_int_equal(s.fragment.end, 0);
	/* Uncommitted bytes are not readable. */
	assert_int_equal(gaz_spool_pread(&s, 0, buf, sizeof(buf), &n, &st), GAZ_EOF);

	assert_int_equal(gaz_spool_next(&s, &next, &st), 0);
	assert_int_equal(next.end, 13);
	assert_memory_equal(next.sum, want, 20);
	assert_int_equal(s.fragment.end, 0); /* unchanged */

	assert_int_equal(gaz_spool_commit(&s, &st), 0);
	assert_true(gaz_fragment_equal(&next, &s.fragment));
	gaz_fragment_release(&next);
	assert_int_equal(s.delta, 0);
	assert_true(s.first_append_ns > 0);

	read_all(&s, 2, buf, 5);
	assert_memory_equal(buf, "llo, ", 5);
	assert_int_equal(gaz_spool_pread(&s, 13, buf, 1, &n, &st), GAZ_EOF);
	assert_int_equal(gaz_spool_pread(&s, 14, buf, 1, &n, &st), GAZ_EINVAL);

	/* The scratch file has no name. */
	assert_int_equal(fstat(gaz_spool_file(&s)->fd, &sb), 0);
	assert_int_equal(sb.st_nlink, 0);
	gaz_spool_release(&s);
}

static void test_rollback(void **state)
{
	struct gaz_spool s;
	struct gaz_status st = {0};
	uint8_t want[20], buf[32];

	(void)state;
	assert_int_equal(gaz_spool_init(&s, "a/journal", tmpdir, &st), 0);
	assert_int_equal(gaz_spool_append(&s, "hello, world\n", 13, &st), 0);
	assert_int_equal(gaz_spool_commit(&s, &st), 0);
	assert_int_equal(gaz_spool_append(&s, "GARBAGE-GARBAGE", 15, &st), 0);
	gaz_spool_rollback(&s);
	assert_int_equal(s.delta, 0);
	assert_int_equal(s.fragment.end, 13);
	/* The next append overwrites the discarded tail. */
	assert_int_equal(gaz_spool_append(&s, "more", 4, &st), 0);
	assert_int_equal(gaz_spool_commit(&s, &st), 0);
	sha1("hello, world\nmore", 17, want);
	assert_memory_equal(s.fragment.sum, want, 20);
	read_all(&s, 0, buf, 17);
	assert_memory_equal(buf, "hello, world\nmore", 17);
	gaz_spool_rollback(&s); /* nothing to roll back */
	assert_memory_equal(s.fragment.sum, want, 20);

	/* A lost digest context (a failed copy) is rebuilt from the file. */
	s.sha_broken = true;
	assert_int_equal(gaz_spool_append(&s, "!", 1, &st), 0);
	assert_int_equal(gaz_spool_commit(&s, &st), 0);
	assert_false(s.sha_broken);
	sha1("hello, world\nmore!", 18, want);
	assert_memory_equal(s.fragment.sum, want, 20);
	gaz_spool_release(&s);
}

/* Roll hands over the completed file, truncated to the committed bytes, and
 * starts an empty fragment at the new offset with the new codec. */
static void test_roll(void **state)
{
	struct gaz_spool s;
	struct gaz_spool_done done;
	struct gaz_status st = {0};
	uint8_t buf[64], want[20];
	struct stat sb;
	int rc;

	(void)state;
	assert_int_equal(gaz_spool_init(&s, "a/journal", tmpdir, &st), 0);
	/* Rolling an empty spool yields nothing but changes offset/codec. */
	assert_int_equal(gaz_spool_roll(&s, 100, GZIP, &done, &st), 0);
	assert_null(done.file);
	assert_int_equal(s.fragment.begin, 100);
	assert_int_equal(s.fragment.end, 100);
	assert_int_equal(s.fragment.codec, GZIP);

	assert_int_equal(gaz_spool_append(&s, "0123456789", 10, &st), 0);
	assert_int_equal(gaz_spool_commit(&s, &st), 0);
	assert_int_equal(gaz_spool_append(&s, "uncommitted", 11, &st), 0);
	read_all(&s, 104, buf, 3);
	assert_memory_equal(buf, "456", 3);

	assert_int_equal(gaz_spool_roll(&s, 110, NONE, &done, &st), 0);
	assert_non_null(done.file);
	assert_int_equal(done.fragment.begin, 100);
	assert_int_equal(done.fragment.end, 110);
	assert_int_equal(done.fragment.codec, GZIP);
	assert_true(done.first_append_ns > 0);
	sha1("0123456789", 10, want);
	assert_memory_equal(done.fragment.sum, want, 20);
	assert_int_equal(fstat(done.file->fd, &sb), 0);
	assert_int_equal(sb.st_size, 10);
	assert_int_equal(pread(done.file->fd, buf, sizeof(buf), 0), 10);
	assert_memory_equal(buf, "0123456789", 10);

	/* The new fragment: empty, zero sum, no file, no delta. */
	assert_int_equal(s.fragment.begin, 110);
	assert_int_equal(s.fragment.end, 110);
	assert_int_equal(s.fragment.codec, NONE);
	assert_int_equal(s.delta, 0);
	assert_int_equal(s.first_append_ns, 0);
	assert_true(gaz_fragment_sum_is_zero(&s.fragment));
	assert_null(gaz_spool_file(&s));

	/* The persister compresses the completed file; it decodes back. */
	FILE *out = tmpfile();
	struct gaz_fd_src src = {fileno(out), 0, -1};
	struct gaz_decoder *dec;
	size_t n;
	assert_int_equal(gaz_codec_compress_file(done.fragment.codec, done.file->fd, fileno(out), &st), 0);
	assert_int_equal(gaz_decoder_new(GZIP, gaz_fd_src_read, &src, &dec, &st), 0);
	assert_int_equal(gaz_decoder_read(dec, buf, sizeof(buf), &n, &st), 0);
	assert_int_equal(n, 10);
	assert_memory_equal(buf, "0123456789", 10);
	rc = gaz_decoder_read(dec, buf, sizeof(buf), &n, &st);
	assert_int_equal(rc, GAZ_EOF);
	gaz_decoder_free(dec);
	fclose(out);
	gaz_spool_done_release(&done);

	/* A later fragment's sum covers only its own bytes. */
	assert_int_equal(gaz_spool_append(&s, "abc", 3, &st), 0);
	assert_int_equal(gaz_spool_commit(&s, &st), 0);
	sha1("abc", 3, want);
	assert_memory_equal(s.fragment.sum, want, 20);
	read_all(&s, 110, buf, 3);
	assert_memory_equal(buf, "abc", 3);

	assert_int_equal(gaz_spool_roll(&s, -1, NONE, &done, &st), GAZ_EINVAL);
	assert_int_equal(s.fragment.end, 113); /* unchanged */
	gaz_spool_release(&s);
}

/* Readers keep the file after the spool moved on. */
static void test_file_shared_with_readers(void **state)
{
	struct gaz_spool s;
	struct gaz_spool_done done;
	struct gaz_status st = {0};
	struct gaz_fragment_file *held;
	char buf[8];

	(void)state;
	assert_int_equal(gaz_spool_init(&s, "a/journal", tmpdir, &st), 0);
	assert_int_equal(gaz_spool_append(&s, "data", 4, &st), 0);
	assert_int_equal(gaz_spool_commit(&s, &st), 0);
	held = gaz_fragment_file_ref(gaz_spool_file(&s));
	assert_int_equal(gaz_spool_roll(&s, 4, NONE, &done, &st), 0);
	gaz_spool_done_release(&done);
	gaz_spool_release(&s);
	assert_int_equal(pread(held->fd, buf, sizeof(buf), 0), 4);
	assert_memory_equal(buf, "data", 4);
	gaz_fragment_file_unref(held);
}

/* Megabytes of appends with interleaved commits and rollbacks: the sum is
 * always SHA-1 of exactly the committed bytes. */
static void test_many_commits_and_rollbacks(void **state)
{
	size_t cap = 3 << 20, committed = 0, pending = 0;
	uint8_t *model = malloc(cap), *chunk = malloc(70000), *back = malloc(cap), want[20];
	struct gaz_spool s;
	struct gaz_status st = {0};
	uint64_t x = 1234567;

	(void)state;
	assert_int_equal(gaz_spool_init(&s, "big/journal", tmpdir, &st), 0);
	while (committed + pending + 70000 < cap) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		size_t n = 1 + x % 70000;
		for (size_t i = 0; i < n; i++)
			chunk[i] = (uint8_t)(x >> (i % 56)) + (uint8_t)i;
		assert_int_equal(gaz_spool_append(&s, chunk, n, &st), 0);
		memcpy(model + committed + pending, chunk, n);
		pending += n;
		switch (x % 5) {
		case 0:
			gaz_spool_rollback(&s);
			pending = 0;
			break;
		case 1:
		case 2:
			assert_int_equal(gaz_spool_commit(&s, &st), 0);
			committed += pending;
			pending = 0;
			sha1(model, committed, want);
			assert_memory_equal(s.fragment.sum, want, 20);
			assert_int_equal(s.fragment.end, (int64_t)committed);
			break;
		}
	}
	read_all(&s, 0, back, committed);
	assert_memory_equal(back, model, committed);
	gaz_spool_release(&s);
	free(model);
	free(chunk);
	free(back);
}

/* A failure to create the file changes nothing, and says which journal,
 * directory and errno (text and symbol); the caller may retry. */
static void test_write_error(void **state)
{
	struct gaz_spool s;
	struct gaz_status st = {0};
	char file[300], dir[320], want[400];
	FILE *f;

	(void)state;
	snprintf(file, sizeof(file), "%s/file", tmpdir);
	snprintf(dir, sizeof(dir), "%s/sub", file);
	assert_non_null(f = fopen(file, "w"));
	fclose(f);
	assert_int_equal(gaz_spool_init(&s, "a/journal", dir, &st), 0);
	assert_int_equal(gaz_spool_append(&s, "x", 1, &st), GAZ_EIO);
	snprintf(want, sizeof(want),
		 "creating spool file of \"a/journal\" in \"%s\" failed: Not a directory (ENOTDIR)", dir);
	assert_string_equal(st.msg, want);
	assert_int_equal(s.delta, 0);
	assert_null(gaz_spool_file(&s));
	gaz_spool_release(&s);
	assert_int_equal(unlink(file), 0);
}

/* Appends, commits and reads back "abc" at the spool's end. */
static void append_abc(struct gaz_spool *s)
{
	struct gaz_status st = {0};
	uint8_t buf[3];
	int64_t at = s->fragment.end;

	assert_int_equal(gaz_spool_append(s, "abc", 3, &st), 0);
	assert_int_equal(gaz_spool_commit(s, &st), 0);
	read_all(s, at, buf, 3);
	assert_memory_equal(buf, "abc", 3);
}

/* A spool directory that is missing (never made, or removed under a
 * running spool by a tmp cleaner) is made again, with its parents, mode
 * 0700, when the next file is created; the open file lives on. */
static void test_missing_dir_is_recreated(void **state)
{
	struct gaz_spool s;
	struct gaz_spool_done done;
	struct gaz_status st = {0};
	char top[300], mid[310], dir[320];
	struct stat sb;

	(void)state;
	snprintf(top, sizeof(top), "%s/gone", tmpdir);
	snprintf(mid, sizeof(mid), "%s/a", top);
	snprintf(dir, sizeof(dir), "%s/b", mid);
	assert_int_equal(gaz_spool_init(&s, "a/journal", dir, &st), 0);
	append_abc(&s); /* creates gone/a/b */
	assert_int_equal(stat(dir, &sb), 0);
	assert_true(S_ISDIR(sb.st_mode));
	assert_int_equal(sb.st_mode & 0777, 0700);
	assert_int_equal(stat(top, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0700);

	/* Removed under the spool: the open file keeps its bytes and takes
	 * more; the next file (after a roll) re-creates the directory. */
	assert_int_equal(rmdir(dir), 0);
	assert_int_equal(rmdir(mid), 0);
	assert_int_equal(rmdir(top), 0);
	append_abc(&s);
	assert_int_equal(stat(dir, &sb), -1);
	assert_int_equal(gaz_spool_roll(&s, 6, NONE, &done, &st), 0);
	assert_int_equal(done.fragment.end, 6);
	gaz_spool_done_release(&done);
	append_abc(&s);
	assert_int_equal(s.fragment.begin, 6);
	assert_int_equal(s.fragment.end, 9);
	assert_int_equal(stat(dir, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0700);
	gaz_spool_release(&s);
	assert_int_equal(rmdir(dir), 0);
	assert_int_equal(rmdir(mid), 0);
	assert_int_equal(rmdir(top), 0);
}

/* When the directory cannot be made again, the error names both
 * failures; nothing changed, and a retry once it can be made succeeds. */
static void test_recreate_fails(void **state)
{
	struct gaz_spool s;
	struct gaz_status st = {0};
	char link[300], dir[320], want[600];

	(void)state;
	snprintf(link, sizeof(link), "%s/dangling", tmpdir);
	snprintf(dir, sizeof(dir), "%s/sub", link);
	assert_int_equal(symlink("/nonexistent/gazette-spool-test", link), 0);
	assert_int_equal(gaz_spool_init(&s, "a/journal", dir, &st), 0);
	assert_int_equal(gaz_spool_append(&s, "x", 1, &st), GAZ_EIO);
	snprintf(want, sizeof(want),
		 "creating spool file of \"a/journal\" in \"%s\" failed: No such file or directory "
		 "(ENOENT); re-creating the directory failed: No such file or directory (ENOENT)", dir);
	assert_string_equal(st.msg, want);
	assert_int_equal(s.delta, 0);
	assert_null(gaz_spool_file(&s));
	assert_int_equal(unlink(link), 0);
	gaz_status_clear(&st);
	append_abc(&s);
	assert_int_equal(s.fragment.end, 3);
	gaz_spool_release(&s);
	assert_int_equal(rmdir(dir), 0);
	assert_int_equal(rmdir(link), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_new_spool),
		cmocka_unit_test(test_append_commit),
		cmocka_unit_test(test_rollback),
		cmocka_unit_test(test_roll),
		cmocka_unit_test(test_file_shared_with_readers),
		cmocka_unit_test(test_many_commits_and_rollbacks),
		cmocka_unit_test(test_write_error),
		cmocka_unit_test(test_missing_dir_is_recreated),
		cmocka_unit_test(test_recreate_fails),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
