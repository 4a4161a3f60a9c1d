/* test_file_store.c - FragmentStore URL rules and the file:// store:
 * put/list/get/exists/remove/sign, health check, fragment listing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fragment/coverset.h"
#include "store/store.h"

static char root[] = "/tmp/test_file_store.XXXXXX";

static int setup(void **state)
{
	(void)state;
	return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[256];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	return system(cmd);
}

static void mkdir_p(const char *rel)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/%s", root, rel);
	assert_int_equal(system(cmd), 0);
}

static void write_at(const char *rel, const char *body)
{
	char path[2048];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "wb");
	assert_non_null(f);
	fputs(body, f);
	fclose(f);
}

static bool file_exists(const char *rel)
{
	char path[2048];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	return access(path, F_OK) == 0;
}

/* An fd holding `body`, as the persister hands over a spool file. */
static int body_fd(const char *body)
{
	FILE *f = tmpfile();
	int fd;

	fputs(body, f);
	fflush(f);
	fd = dup(fileno(f));
	fclose(f);
	return fd;
}

/* facts §3.6 */
static void test_url_validation(void **state)
{
	static const char *good[] = {
		"s3://bucket/",
		"s3://my-bucket/a/prefix/",
		"S3://Bucket/p/",
		"s3://bucket/?endpoint=http%3A%2F%2F127.0.0.1%3A9000&region=us-east-1",
		"gs://bucket/prefix/",
		"azure://container/prefix/",
		"azure-ad://tenant-id/account/container/",
		"azure-ad://tenant-id/account/container/prefix/",
		"file:///",
		"file:///var/gazette/",
		"file:///path%20with%20space/",
	};
	static const char *bad[] = {
		"",
		"bucket/prefix/",
		"/abs/path/",
		"s3://bucket",
		"s3://bucket/prefix",
		"s3:///prefix/",
		"gs:///",
		"azure:///x/",
		"azure-ad://tenant/account/",
		"azure-ad://tenant/account//",
		"azure-ad:///account/container/",
		"file://host/path/",
		"file://",
		"http://host/path/",
		"ftp://host/path/",
		"s3:bucket/",
		"s3://bucket/%zz/",
		"s3://bucket/%2/",
		"s3://bu\ncket/",
	};
	struct gaz_store_url u;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct gaz_status st = {0};
		if (gaz_store_url_parse(good[i], &u, &st))
			fail_msg("rejected \"%s\": %s", good[i], st.msg);
		gaz_store_url_release(&u);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct gaz_status st = {0};
		if (gaz_store_url_parse(bad[i], &u, &st) != GAZ_EINVAL)
			fail_msg("accepted \"%s\"", bad[i]);
		assert_non_null(strstr(st.msg, "invalid fragment store URL"));
	}
}

static void test_url_parts(void **state)
{
	struct gaz_store_url u;
	struct gaz_store_param *p;
	struct gaz_status st = {0};
	size_t n;

	(void)state;
	assert_int_equal(gaz_store_url_parse("S3://my-bucket/a%2Fb/?Find=x%2F&REPLACE=y+z&endpoint",
					     &u, &st),
			 0);
	assert_string_equal(u.scheme, "s3");
	assert_string_equal(u.host, "my-bucket");
	assert_string_equal(u.path, "/a/b/");
	assert_string_equal(u.raw, "S3://my-bucket/a%2Fb/?Find=x%2F&REPLACE=y+z&endpoint");
	assert_int_equal(gaz_store_url_params(&u, &p, &n, &st), 0);
	assert_int_equal(n, 3);
	assert_string_equal(p[0].key, "find");
	assert_string_equal(p[0].value, "x/");
	assert_string_equal(p[1].key, "replace");
	assert_string_equal(p[1].value, "y z");
	assert_string_equal(p[2].key, "endpoint");
	assert_string_equal(p[2].value, "");
	gaz_store_params_free(p, n);
	gaz_store_url_release(&u);

	/* Go's net/url rejects ';' separators and bad escapes in queries. */
	assert_int_equal(gaz_store_url_parse("file:///x/?find=a;b", &u, &st), 0);
	assert_int_equal(gaz_store_url_params(&u, &p, &n, &st), GAZ_EINVAL);
	gaz_store_url_release(&u);
}

static void test_open(void **state)
{
	struct gaz_store *s;
	struct gaz_status st = {0};

	(void)state;
	assert_int_equal(gaz_store_open("file:///frag/?FIND=a&Replace=b", root, &s, &st), 0);
	assert_string_equal(gaz_store_param(s, "find"), "a");
	assert_string_equal(s->ops->provider, "fs");
	gaz_store_unref(s);

	gaz_status_clear(&st);
	assert_int_equal(gaz_store_open("file:///frag/?region=x", root, &s, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "unknown parameter \"region\""));
	assert_null(s);

	gaz_status_clear(&st);
	assert_int_equal(gaz_store_open("gs://bucket/p/", root, &s, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "not supported yet"));

	gaz_status_clear(&st);
	assert_int_equal(gaz_store_open("s3://bucket/p/?bogus=1", root, &s, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "unknown parameter"));

	gaz_status_clear(&st);
	assert_int_equal(gaz_store_open("file:///frag/", NULL, &s, &st), GAZ_EINVAL);
	gaz_status_clear(&st);
	assert_int_equal(gaz_store_open("file:///../etc/", root, &s, &st), GAZ_EINVAL);
	gaz_status_clear(&st);
	assert_int_equal(gaz_store_open("file://x/", root, &s, &st), GAZ_EINVAL);
}

/* PUT needs <file root><url path> to exist: a clear, auth-class error. */
static void test_missing_base_dir(void **state)
{
	struct gaz_store *s;
	struct gaz_status st = {0};
	int fd = body_fd("abc");

	(void)state;
	assert_int_equal(gaz_store_open("file:///nobase/", root, &s, &st), 0);
	assert_int_equal(gaz_store_put(s, "a/j/x", fd, 3, NULL, &st), GAZ_EPERM);
	assert_true(gaz_store_is_auth_error(GAZ_EPERM));
	assert_non_null(strstr(st.msg, "base directory"));
	assert_non_null(strstr(st.msg, "does not exist"));
	assert_false(file_exists("nobase"));
	gaz_status_clear(&st);
	assert_int_equal(gaz_store_health_check(s, &st), GAZ_EPERM);
	assert_non_null(strstr(st.msg, "health check failed at put"));
	gaz_store_unref(s);
	close(fd);
}

static void test_put_get_exists_remove_sign(void **state)
{
	struct gaz_store *s;
	struct gaz_store_reader *r;
	struct gaz_status st = {0};
	struct stat sb;
	char buf[64], *url;
	size_t n;
	bool ex;
	int fd = body_fd("hello, world\n");

	(void)state;
	mkdir_p("ops");
	assert_int_equal(gaz_store_open("file:///ops/", root, &s, &st), 0);
	assert_int_equal(gaz_store_exists(s, "a/j/obj", &ex, &st), 0);
	assert_false(ex);
	assert_int_equal(gaz_store_put(s, "a/j/obj", fd, 13, NULL, &st), 0);
	assert_int_equal(gaz_store_exists(s, "a/j/obj", &ex, &st), 0);
	assert_true(ex);
	assert_true(file_exists("ops/a/j/obj"));

	/* Directories are created 0750 (umask permitting). */
	snprintf(buf, sizeof(buf), "%s/ops/a/j", root);
	assert_int_equal(stat(buf, &sb), 0);
	assert_int_equal(sb.st_mode & 0027, 0);

	assert_int_equal(gaz_store_get(s, "a/j/obj", 0, &r, &st), 0);
	assert_int_equal(r->len, 13);
	assert_int_equal(gaz_store_reader_read(r, buf, sizeof(buf), &n, &st), 0);
	assert_int_equal(n, 13);
	assert_memory_equal(buf, "hello, world\n", 13);
	assert_int_equal(gaz_store_reader_read(r, buf, sizeof(buf), &n, &st), GAZ_EOF);
	gaz_store_reader_close(r);

	assert_int_equal(gaz_store_get(s, "a/j/obj", 7, &r, &st), 0);
	assert_int_equal(r->len, 6);
	assert_int_equal(gaz_store_reader_read(r, buf, sizeof(buf), &n, &st), 0);
	assert_memory_equal(buf, "world\n", 6);
	gaz_store_reader_close(r);
	assert_int_equal(gaz_store_get(s, "a/j/obj", 14, &r, &st), GAZ_EINVAL);
	gaz_status_clear(&st);
	assert_int_equal(gaz_store_get(s, "a/j/nope", 0, &r, &st), GAZ_ENOTFOUND);
	assert_null(r);

	assert_int_equal(gaz_store_sign_get(s, "a/j/obj", 60, &url, &st), 0);
	assert_string_equal(url, "file:///ops/a/j/obj");
	free(url);

	/* Overwrite is atomic and leaves no temp file behind. */
	assert_int_equal(gaz_store_put(s, "a/j/obj", fd, 5, NULL, &st), 0);
	snprintf(buf, sizeof(buf), "%s/ops/a/j/obj", root);
	assert_int_equal(stat(buf, &sb), 0);
	assert_int_equal(sb.st_size, 5);

	assert_int_equal(gaz_store_remove(s, "a/j/obj", &st), 0);
	assert_int_equal(gaz_store_exists(s, "a/j/obj", &ex, &st), 0);
	assert_false(ex);
	assert_int_equal(gaz_store_remove(s, "a/j/obj", &st), GAZ_ENOTFOUND);
	gaz_store_unref(s);
	close(fd);
}

/* A source shorter than the declared length fails the put: no object, no
 * ".partial-" file left. */
static void test_put_short_source(void **state)
{
	struct gaz_store *s;
	struct gaz_store_entry *e;
	struct gaz_status st = {0};
	size_t n;
	int fd = body_fd("short");

	(void)state;
	mkdir_p("short");
	assert_int_equal(gaz_store_open("file:///short/", root, &s, &st), 0);
	assert_int_equal(gaz_store_put(s, "j/obj", fd, 100, NULL, &st), GAZ_EIO);
	assert_non_null(strstr(st.msg, "source holds 5 of 100 bytes"));
	assert_false(file_exists("short/j/obj"));
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A %s/short/j)\"", root);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(gaz_store_list_all(s, "", 0, &e, &n, &st), 0);
	assert_int_equal(n, 0);
	gaz_store_entries_free(e, n);
	gaz_store_unref(s);
	close(fd);
}

static void test_bad_keys(void **state)
{
	struct gaz_store *s;
	struct gaz_status st = {0};
	bool ex;
	int fd = body_fd("x");

	(void)state;
	mkdir_p("keys");
	assert_int_equal(gaz_store_open("file:///keys/?find=a%2F&replace=..%2F", root, &s, &st), 0);
	assert_int_equal(gaz_store_put(s, "../escape", fd, 1, NULL, &st), GAZ_EINVAL);
	gaz_status_clear(&st);
	assert_int_equal(gaz_store_put(s, "/abs", fd, 1, NULL, &st), GAZ_EINVAL);
	gaz_status_clear(&st);
	assert_int_equal(gaz_store_exists(s, "x//y", &ex, &st), GAZ_EINVAL);
	gaz_status_clear(&st);
	/* A rewrite may not escape the base either. */
	assert_int_equal(gaz_store_put(s, "a/j", fd, 1, NULL, &st), GAZ_EINVAL);
	gaz_status_clear(&st);
	assert_int_equal(gaz_store_list(s, "no-slash", NULL, NULL, &st), GAZ_EINVAL);
	gaz_store_unref(s);
	close(fd);
}

static void test_list(void **state)
{
	struct gaz_store *s;
	struct gaz_store_entry *e;
	struct gaz_status st = {0};
	size_t n;

	(void)state;
	mkdir_p("ls/j/sub/deeper");
	mkdir_p("ls/.test");
	mkdir_p("ls/j/empty-dir");
	write_at("ls/j/b", "bb");
	write_at("ls/j/a", "a");
	write_at("ls/j/sub/deeper/c", "ccc");
	write_at("ls/j/.partial-a.XXXXXX", "partial");
	write_at("ls/.test/health-check", "health-check\n");
	write_at("ls/top", "t");
	char link[512];
	snprintf(link, sizeof(link), "%s/ls/j/dangling", root);
	assert_int_equal(symlink("/nonexistent", link), 0);

	assert_int_equal(gaz_store_open("file:///ls/", root, &s, &st), 0);
	assert_int_equal(gaz_store_list_all(s, "j/", 0, &e, &n, &st), 0);
	assert_int_equal(n, 3);
	assert_string_equal(e[0].path, "a");
	assert_string_equal(e[1].path, "b");
	assert_int_equal(e[1].size, 2);
	assert_true(e[1].mod_time > 1500000000);
	assert_string_equal(e[2].path, "sub/deeper/c");
	gaz_store_entries_free(e, n);

	/* The whole store: .test/ is hidden at the root. */
	assert_int_equal(gaz_store_list_all(s, "", 0, &e, &n, &st), 0);
	assert_int_equal(n, 4);
	assert_string_equal(e[3].path, "top");
	gaz_store_entries_free(e, n);

	/* ...but listed when asked for. */
	assert_int_equal(gaz_store_list_all(s, ".test/", 0, &e, &n, &st), 0);
	assert_int_equal(n, 1);
	assert_string_equal(e[0].path, "health-check");
	gaz_store_entries_free(e, n);

	/* Missing prefixes list nothing; limits are enforced. */
	assert_int_equal(gaz_store_list_all(s, "nope/", 0, &e, &n, &st), 0);
	assert_int_equal(n, 0);
	gaz_store_entries_free(e, n);
	assert_int_equal(gaz_store_list_all(s, "j/", 2, &e, &n, &st), GAZ_ERANGE);
	gaz_store_unref(s);
}

static void test_health_check(void **state)
{
	struct gaz_store *s;
	struct gaz_status st = {0};

	(void)state;
	mkdir_p("health");
	assert_int_equal(gaz_store_open("file:///health/", root, &s, &st), 0);
	assert_int_equal(gaz_store_health_check(s, &st), 0);
	assert_true(file_exists("health/.test/health-check"));
	gaz_store_unref(s);
}

static const char sum[] = "f572d396fae9206628714fb2ce00f72e94f2258f";

struct got {
	struct gaz_coverset set;
	int calls;
};

static int collect(void *arg, const struct gaz_fragment *f, struct gaz_status *st)
{
	struct got *g = arg;
	g->calls++;
	return gaz_coverset_add(&g->set, f, NULL, NULL, st);
}

/* Runs fn with stderr captured into out[cap]. */
static int list_capturing(struct gaz_store *s, const char *journal, struct got *g, char *out,
			  size_t cap)
{
	struct gaz_status st = {0};
	FILE *tmp = tmpfile();
	int saved = dup(2), rc;
	size_t n;

	dup2(fileno(tmp), 2);
	rc = gaz_store_list_fragments(s, journal, collect, g, &st);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	n = fread(out, 1, cap - 1, tmp);
	out[n] = 0;
	fclose(tmp);
	return rc;
}

/* The index's source of truth: real fragments are parsed with store and
 * mod_time; junk, cut uploads and directory keys are skipped with warnings
 * (cases BR-11), and the refresh still succeeds. */
static void test_list_fragments(void **state)
{
	struct gaz_store *s;
	struct gaz_status st = {0};
	struct got g = {0};
	char log[8192], path[512];
	const char *url = "file:///lf/";

	(void)state;
	mkdir_p("lf/a/j/date=2019-11-19");
	mkdir_p("lf/a/j/c");
	mkdir_p("lf/a/j/subdir");
	snprintf(path, sizeof(path), "lf/a/j/0000000000000000-000000000000000a-%s.raw", sum);
	write_at(path, "0123456789");
	snprintf(path, sizeof(path), "lf/a/j/date=2019-11-19/000000000000000a-0000000000000014-%s.GZ", sum);
	write_at(path, "gzip bytes");
	/* journal a/j/c's fragment shows up with postfix "c" (quirk). */
	snprintf(path, sizeof(path), "lf/a/j/c/0000000000000000-0000000000000005-%s.sz", sum);
	write_at(path, "snappy");
	/* junk */
	write_at("lf/a/j/README.txt", "hi");
	write_at("lf/a/j/0000000000000000-000000000000000a-zz.raw", "bad sum");
	snprintf(path, sizeof(path), "lf/a/j/0000000000000000-000000000000000a-%.38s.raw", sum);
	write_at(path, "19-byte sum");
	/* a cut upload: right name, no bytes */
	snprintf(path, sizeof(path), "lf/a/j/0000000000000014-0000000000000020-%s.raw", sum);
	write_at(path, "");
	/* an unfinished upload */
	snprintf(path, sizeof(path), "lf/a/j/.partial-0000000000000014-0000000000000020-%s.raw.ab12cd", sum);
	write_at(path, "in flight");
	/* another journal sharing the prefix string but not the directory */
	mkdir_p("lf/a/jj");
	snprintf(path, sizeof(path), "lf/a/jj/0000000000000000-0000000000000100-%s.raw", sum);
	write_at(path, "x");

	gaz_coverset_init(&g.set);
	assert_int_equal(gaz_store_open(url, root, &s, &st), 0);
	assert_int_equal(list_capturing(s, "a/j", &g, log, sizeof(log)), 0);

	assert_int_equal(g.calls, 3);
	/* [0,5) c-postfixed is covered by [0,10): the index keeps [0,10). */
	assert_int_equal(g.set.len, 2);
	assert_int_equal(g.set.v[0].frag.begin, 0);
	assert_int_equal(g.set.v[0].frag.end, 10);
	assert_string_equal(g.set.v[0].frag.backing_store, url);
	assert_string_equal(g.set.v[0].frag.journal, "a/j");
	assert_true(g.set.v[0].frag.mod_time > 1500000000);
	assert_null(g.set.v[0].frag.path_postfix);
	assert_int_equal(g.set.v[1].frag.begin, 10);
	assert_int_equal(g.set.v[1].frag.codec, PROTOCOL__COMPRESSION_CODEC__GZIP);
	assert_string_equal(g.set.v[1].frag.path_postfix, "date=2019-11-19");

	assert_non_null(strstr(log, "parsing fragment"));
	assert_non_null(strstr(log, "README.txt"));
	assert_non_null(strstr(log, "-zz.raw"));
	assert_non_null(strstr(log, "zero-length fragment"));
	assert_null(strstr(log, ".partial-"));
	assert_null(strstr(log, "subdir"));
	gaz_coverset_release(&g.set);
	gaz_store_unref(s);
}

/* find/replace: the object lands at the rewritten key, the signed URL names
 * that key, and listing still yields journal fragments (cases BR-09). */
static void test_rewrite(void **state)
{
	struct gaz_store *s;
	struct gaz_status st = {0};
	struct got g = {0};
	struct gaz_fragment f = {.journal = (char *)"url/a/b", .begin = 0, .end = 4,
				 .codec = PROTOCOL__COMPRESSION_CODEC__SNAPPY,
				 .path_postfix = (char *)"date=2024-01-02"};
	char path[GAZ_FRAGMENT_PATH_MAX], name[GAZ_FRAGMENT_NAME_MAX], want[1024], log[4096], *url;
	int fd = body_fd("data");
	const char *store_url = "file:///deep/pre/fix/?find=url%2Fa%2F&replace=old%2F";

	(void)state;
	mkdir_p("deep/pre/fix");
	assert_int_equal(gaz_store_open(store_url, root, &s, &st), 0);
	assert_int_equal(gaz_fragment_content_path(&f, path, sizeof(path), &st), 0);
	assert_int_equal(gaz_fragment_content_name(&f, name, sizeof(name), &st), 0);
	assert_int_equal(gaz_store_put(s, path, fd, 4, NULL, &st), 0);

	snprintf(want, sizeof(want), "deep/pre/fix/old/b/date=2024-01-02/%s", name);
	assert_true(file_exists(want));
	assert_int_equal(gaz_store_sign_get(s, path, 60, &url, &st), 0);
	snprintf(want, sizeof(want), "file:///deep/pre/fix/old/b/date=2024-01-02/%s", name);
	assert_string_equal(url, want);
	free(url);

	gaz_coverset_init(&g.set);
	assert_int_equal(list_capturing(s, "url/a/b", &g, log, sizeof(log)), 0);
	assert_int_equal(g.set.len, 1);
	assert_string_equal(g.set.v[0].frag.journal, "url/a/b");
	assert_string_equal(g.set.v[0].frag.path_postfix, "date=2024-01-02");
	assert_string_equal(g.set.v[0].frag.backing_store, store_url);
	gaz_coverset_release(&g.set);
	gaz_store_unref(s);
	close(fd);
}

/* Listing errors abort the refresh: the callback's error comes back. */
static int refuse(void *arg, const struct gaz_fragment *f, struct gaz_status *st)
{
	(void)arg, (void)f;
	return gaz_status_set(st, GAZ_ENOMEM, "full");
}

static void test_list_fragments_callback_error(void **state)
{
	struct gaz_store *s;
	struct gaz_status st = {0};

	(void)state;
	assert_int_equal(gaz_store_open("file:///lf/", root, &s, &st), 0);
	assert_int_equal(gaz_store_list_fragments(s, "a/j", refuse, NULL, &st), GAZ_ENOMEM);
	assert_string_equal(st.msg, "full");
	gaz_store_unref(s);
}

static void test_refcount(void **state)
{
	struct gaz_store *s;
	struct gaz_status st = {0};

	(void)state;
	assert_int_equal(gaz_store_open("file:///rc/", root, &s, &st), 0);
	assert_ptr_equal(gaz_store_ref(s), s);
	gaz_store_unref(s);
	assert_int_equal(atomic_load(&s->refs), 1);
	gaz_store_unref(s);
	gaz_store_unref(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_url_validation),
		cmocka_unit_test(test_url_parts),
		cmocka_unit_test(test_open),
		cmocka_unit_test(test_missing_base_dir),
		cmocka_unit_test(test_put_get_exists_remove_sign),
		cmocka_unit_test(test_put_short_source),
		cmocka_unit_test(test_bad_keys),
		cmocka_unit_test(test_list),
		cmocka_unit_test(test_health_check),
		cmocka_unit_test(test_list_fragments),
		cmocka_unit_test(test_rewrite),
		cmocka_unit_test(test_list_fragments_callback_error),
		cmocka_unit_test(test_refcount),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
