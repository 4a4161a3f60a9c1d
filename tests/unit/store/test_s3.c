/* test_s3.c - the s3:// store without a server: URL parameters,
 * credentials and region resolution, addressing style, presigned URLs
 * (through the generic layer's find/replace), and the XML answers
 * (ListObjectsV2 pages with continuation, errors, multipart upload ids).
 * The store against a real S3 server: tests/integration/test_s3.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../../lib/store/s3.c"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static char dir[] = "/tmp/test_s3.XXXXXX";

static void write_file(const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

static const char *const vars[] = {"AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY",
				   "AWS_SECRET_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
				   "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
				   "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", NULL};

static int setup(void **state)
{
	char path[256];

	(void)state;
	if (!mkdtemp(dir))
		return -1;
	for (const char *const *v = vars; *v; v++)
		unsetenv(*v);
	setenv("HOME", dir, 1); /* no ~/.aws of the machine */
	snprintf(path, sizeof(path), "%s/.aws", dir);
	mkdir(path, 0700);
	write_file(".aws/credentials", "# test profiles\n[default]\naws_access_key_id = HOMEKEY\n"
				       "aws_secret_access_key=homesecret\n\n[ci]\n"
				       "aws_access_key_id=CIKEY\naws_secret_access_key = cisecret \n"
				       "aws_session_token=citoken\n");
	write_file(".aws/config", "[default]\nregion = eu-central-1\n[profile ci]\nregion=ap-south-1\n"
				  "[profile cfgonly]\naws_access_key_id=CFGKEY\naws_secret_access_key=cfgsecret\n");
	return 0;
}

static int teardown(void **state)
{
	char cmd[256];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static void env_keys(void)
{
	setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
}

static void clear_env(void)
{
	for (const char *const *v = vars; *v; v++)
		unsetenv(*v);
}

static struct gaz_store *open_ok(const char *url)
{
	struct gaz_status st = {0};
	struct gaz_store *s = NULL;

	if (gaz_store_open(url, NULL, &s, &st))
		fail_msg("opening %s: %s", url, st.msg);
	return s;
}

static int open_err(const char *url, struct gaz_status *st)
{
	struct gaz_store *s = NULL;
	int rc;

	gaz_status_clear(st);
	rc = gaz_store_open(url, NULL, &s, st);
	assert_null(s);
	return rc;
}

static const struct gaz_s3_config *cfg_of(struct gaz_store *s)
{
	return &((struct s3_store *)s->impl)->cfg;
}

static void test_endpoint_forces_path_style(void **state)
{
	struct gaz_store *s;
	(void)state;
	clear_env();
	env_keys();
	s = open_ok("s3://frag/a/prefix/?endpoint=http%3A%2F%2F127.0.0.1%3A9000&region=us-east-1"
		    "&acl=bucket-owner-full-control&storageclass=STANDARD_IA&SSE=aws:kms&ssekmskeyid=k1");
	const struct gaz_s3_config *c = cfg_of(s);
	assert_string_equal(c->bucket, "frag");
	assert_string_equal(c->prefix, "a/prefix/");
	assert_true(c->path_style);
	assert_string_equal(c->base_url, "http://127.0.0.1:9000");
	assert_string_equal(c->host, "127.0.0.1:9000");
	assert_string_equal(c->path_prefix, "/frag");
	assert_string_equal(c->acl, "bucket-owner-full-control");
	assert_string_equal(c->storage_class, "STANDARD_IA");
	assert_string_equal(c->sse, "aws:kms"); /* parameter names are case-insensitive */
	assert_string_equal(c->sse_kms_key_id, "k1");
	assert_string_equal(c->creds.access_key, "ENVKEY");
	assert_string_equal(c->creds_source, "environment");
	gaz_store_unref(s);
	/* An endpoint without a scheme is https, as in the AWS SDK. */
	s = open_ok("s3://frag/?endpoint=minio.local:9000&region=us-east-1");
	assert_string_equal(cfg_of(s)->base_url, "https://minio.local:9000");
	gaz_store_unref(s);
}

static void test_aws_addressing(void **state)
{
	struct gaz_store *s;
	(void)state;
	clear_env();
	env_keys();
	s = open_ok("s3://my-bucket/p/?region=us-east-1");
	assert_false(cfg_of(s)->path_style);
	assert_string_equal(cfg_of(s)->base_url, "https://my-bucket.s3.amazonaws.com");
	assert_string_equal(cfg_of(s)->path_prefix, "");
	gaz_store_unref(s);
	s = open_ok("s3://my-bucket/p/?region=eu-west-1");
	assert_string_equal(cfg_of(s)->host, "my-bucket.s3.eu-west-1.amazonaws.com");
	gaz_store_unref(s);
	/* Dots cannot be a TLS virtual host: path-style. */
	s = open_ok("s3://my.bucket/p/?region=eu-west-1");
	assert_true(cfg_of(s)->path_style);
	assert_string_equal(cfg_of(s)->base_url, "https://s3.eu-west-1.amazonaws.com");
	assert_string_equal(cfg_of(s)->path_prefix, "/my.bucket");
	gaz_store_unref(s);
}

static void test_region_resolution(void **state)
{
	struct gaz_status st;
	struct gaz_store *s;
	(void)state;
	clear_env();
	env_keys();
	setenv("AWS_CONFIG_FILE", "/nonexistent", 1);
	assert_int_equal(open_err("s3://b/p/?endpoint=http://h:1", &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "missing AWS region configuration for profile \"default\""));
	setenv("AWS_DEFAULT_REGION", "us-west-1", 1);
	s = open_ok("s3://b/p/");
	assert_string_equal(cfg_of(s)->region, "us-west-1");
	gaz_store_unref(s);
	setenv("AWS_REGION", "us-west-2", 1);
	s = open_ok("s3://b/p/");
	assert_string_equal(cfg_of(s)->region, "us-west-2");
	gaz_store_unref(s);
	s = open_ok("s3://b/p/?region=sa-east-1");
	assert_string_equal(cfg_of(s)->region, "sa-east-1");
	gaz_store_unref(s);
	/* From ~/.aws/config, for the profile in use. */
	clear_env();
	env_keys();
	s = open_ok("s3://b/p/");
	assert_string_equal(cfg_of(s)->region, "eu-central-1");
	gaz_store_unref(s);
	s = open_ok("s3://b/p/?profile=ci");
	assert_string_equal(cfg_of(s)->region, "ap-south-1");
	gaz_store_unref(s);
	assert_int_equal(open_err("s3://b/p/?region=us%20east", &st), GAZ_EINVAL);
}

static void test_credentials_resolution(void **state)
{
	struct gaz_status st;
	struct gaz_store *s;
	(void)state;
	clear_env();
	/* No environment keys: the default profile of ~/.aws/credentials. */
	s = open_ok("s3://b/p/?region=us-east-1");
	assert_string_equal(cfg_of(s)->creds.access_key, "HOMEKEY");
	assert_string_equal(cfg_of(s)->creds.secret_key, "homesecret");
	assert_string_equal(cfg_of(s)->creds.session_token, "");
	gaz_store_unref(s);
	/* Environment keys win over the default profile... */
	env_keys();
	setenv("AWS_SESSION_TOKEN", "envtoken", 1);
	s = open_ok("s3://b/p/?region=us-east-1");
	assert_string_equal(cfg_of(s)->creds.access_key, "ENVKEY");
	assert_string_equal(cfg_of(s)->creds.session_token, "envtoken");
	gaz_store_unref(s);
	/* ...but a named profile parameter is read from the files first. */
	s = open_ok("s3://b/p/?region=us-east-1&profile=ci");
	assert_string_equal(cfg_of(s)->creds.access_key, "CIKEY");
	assert_string_equal(cfg_of(s)->creds.secret_key, "cisecret");
	assert_string_equal(cfg_of(s)->creds.session_token, "citoken");
	assert_string_equal(cfg_of(s)->creds_source, "shared files, profile ci");
	gaz_store_unref(s);
	/* Keys may also sit in the config file ("[profile x]"). */
	s = open_ok("s3://b/p/?region=us-east-1&profile=cfgonly");
	assert_string_equal(cfg_of(s)->creds.access_key, "CFGKEY");
	gaz_store_unref(s);
	/* A named profile that does not exist is an error, not a fallback. */
	assert_int_equal(open_err("s3://b/p/?region=us-east-1&profile=nope", &st), GAZ_EPERM);
	assert_non_null(strstr(st.msg, "fetching AWS credentials for profile \"nope\""));
	/* AWS_PROFILE and AWS_SHARED_CREDENTIALS_FILE. */
	clear_env();
	write_file("creds2", "[other]\naws_access_key_id=OTHERKEY\naws_secret_access_key=o\n");
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/tmp/nonexistent-gaz", 1);
	assert_int_equal(open_err("s3://b/p/?region=us-east-1", &st), GAZ_EPERM);
	char path[256];
	snprintf(path, sizeof(path), "%s/creds2", dir);
	setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
	setenv("AWS_PROFILE", "other", 1);
	s = open_ok("s3://b/p/?region=us-east-1");
	assert_string_equal(cfg_of(s)->creds.access_key, "OTHERKEY");
	gaz_store_unref(s);
	clear_env();
}

static void test_bad_parameters(void **state)
{
	struct gaz_status st;
	(void)state;
	clear_env();
	env_keys();
	/* Unknown parameters fail the store, as Gazette's schema decoder does. */
	assert_int_equal(open_err("s3://b/p/?region=us-east-1&bogus=1", &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "unknown parameter \"bogus\""));
	assert_int_equal(open_err("s3://b/p/?region=us-east-1&endpoint=ftp://h", &st), GAZ_EINVAL);
	assert_int_equal(open_err("s3://b/p/?region=us-east-1&endpoint=http://h:1/path", &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "no path"));
	assert_int_equal(open_err("s3://b/p/?region=us-east-1&endpoint=http://", &st), GAZ_EINVAL);
}

/* Our stalltimeout parameter: whole seconds from 1s to 1h, default 60 s. */
static void test_stall_timeout_parameter(void **state)
{
	static const char *const bad[] = {"0s", "500ms", "1.5s", "2h", "-1s", "soon", ""};
	struct gaz_status st;
	struct gaz_store *s;
	(void)state;
	clear_env();
	env_keys();
	s = open_ok("s3://b/p/?region=us-east-1");
	assert_int_equal(cfg_of(s)->stall_s, 60);
	gaz_store_unref(s);
	s = open_ok("s3://b/p/?region=us-east-1&stalltimeout=2s");
	assert_int_equal(cfg_of(s)->stall_s, 2);
	gaz_store_unref(s);
	s = open_ok("s3://b/p/?region=us-east-1&stalltimeout=1m30s");
	assert_int_equal(cfg_of(s)->stall_s, 90);
	gaz_store_unref(s);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char url[128];
		snprintf(url, sizeof(url), "s3://b/p/?region=us-east-1&stalltimeout=%s", bad[i]);
		assert_int_equal(open_err(url, &st), GAZ_EINVAL);
		assert_non_null(strstr(st.msg, "stalltimeout"));
	}
}

static void test_presigned_urls(void **state)
{
	struct gaz_status st = {0};
	struct gaz_store *s;
	char *url = NULL;
	(void)state;
	clear_env();
	env_keys();
	s = open_ok("s3://frag/deep/pre/fix/?endpoint=http://127.0.0.1:9000&region=us-east-1"
		    "&find=url%2Fa%2F&replace=old%2F");
	/* The key is prefix + rewritten path, exactly once (cases BR-09). */
	assert_int_equal(gaz_store_sign_get(s, "url/a/b/date=2026-01-02/x y.sz", 600, &url, &st), 0);
	const char *want = "http://127.0.0.1:9000/frag/deep/pre/fix/old/b/date%3D2026-01-02/x%20y.sz?"
			   "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=ENVKEY%2F";
	if (strncmp(url, want, strlen(want)))
		fail_msg("signed URL %s", url);
	assert_non_null(strstr(url, "&X-Amz-Expires=600&X-Amz-SignedHeaders=host&X-Amz-Signature="));
	free(url);
	assert_int_equal(gaz_store_sign_get(s, "j/x", 8 * 86400, &url, &st), GAZ_EINVAL);
	assert_null(url);
	gaz_store_unref(s);
	s = open_ok("s3://my-bucket/p/?region=us-east-1");
	gaz_status_clear(&st);
	assert_int_equal(gaz_store_sign_get(s, "j/x", 60, &url, &st), 0);
	want = "https://my-bucket.s3.amazonaws.com/p/j/x?X-Amz-";
	if (strncmp(url, want, strlen(want)))
		fail_msg("signed URL %s", url);
	free(url);
	gaz_store_unref(s);
}

static const char page1[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	"<Name>frag</Name><Prefix>p/j/</Prefix><KeyCount>3</KeyCount><MaxKeys>3</MaxKeys>"
	"<IsTruncated>true</IsTruncated>"
	"<Contents><Key>p/j/0000000000000000-000000000000000a-aa.raw</Key>"
	"<LastModified>2026-11-29T10:11:12.000Z</LastModified><ETag>\"x\"</ETag>"
	"<Size>10</Size><StorageClass>STANDARD</StorageClass></Contents>"
	"<Contents><Key>p/j/sub/</Key><Size>0</Size></Contents>"
	"<Contents><Key>p/j/a&amp;b &lt;c&gt;.txt</Key><Size>3</Size>"
	"<LastModified>2026-11-29T10:11:13Z</LastModified></Contents>"
	"<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
	"</ListBucketResult>";

static void test_parse_list_page(void **state)
{
	struct gaz_s3_list_page pg;
	struct gaz_status st = {0};
	(void)state;
	assert_int_equal(gaz__s3_parse_list(page1, strlen(page1), &pg, &st), 0);
	assert_int_equal(pg.n, 3);
	assert_true(pg.truncated);
	assert_string_equal(pg.next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
	assert_string_equal(pg.objs[0].key, "p/j/0000000000000000-000000000000000a-aa.raw");
	assert_int_equal(pg.objs[0].size, 10);
	assert_int_equal(pg.objs[0].mod_time, 1795947072); /* 2026-11-29T10:11:12Z */
	assert_string_equal(pg.objs[2].key, "p/j/a&b <c>.txt");
	assert_int_equal(pg.objs[2].mod_time, 1795947073);
	gaz__s3_list_page_release(&pg);
}

struct seen {
	char paths[8][128];
	int n;
};

static int seen_cb(void *arg, const struct gaz_store_obj *o, struct gaz_status *st)
{
	struct seen *s = arg;
	(void)st;
	snprintf(s->paths[s->n++], sizeof(s->paths[0]), "%s", o->path);
	return 0;
}

static void test_list_emit_skips_placeholders(void **state)
{
	struct gaz_s3_list_page pg;
	struct gaz_status st = {0};
	struct seen seen = {0};
	(void)state;
	assert_int_equal(gaz__s3_parse_list(page1, strlen(page1), &pg, &st), 0);
	assert_int_equal(list_emit(&pg, "p/j/", seen_cb, &seen, &st), 0);
	assert_int_equal(seen.n, 2); /* "sub/" is a directory placeholder */
	assert_string_equal(seen.paths[0], "0000000000000000-000000000000000a-aa.raw");
	assert_string_equal(seen.paths[1], "a&b <c>.txt");
	gaz__s3_list_page_release(&pg);
}

static void test_parse_last_page_and_bad_pages(void **state)
{
	static const char last[] = "<ListBucketResult><IsTruncated>false</IsTruncated>"
				   "<Contents><Key>p/j/z</Key><Size>1</Size></Contents></ListBucketResult>";
	static const char no_token[] = "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>";
	static const char empty[] = "<ListBucketResult><Name>b</Name><KeyCount>0</KeyCount>"
				    "<IsTruncated>false</IsTruncated></ListBucketResult>";
	struct gaz_s3_list_page pg;
	struct gaz_status st = {0};
	(void)state;
	assert_int_equal(gaz__s3_parse_list(last, strlen(last), &pg, &st), 0);
	assert_int_equal(pg.n, 1);
	assert_false(pg.truncated);
	assert_null(pg.next_token);
	gaz__s3_list_page_release(&pg);
	assert_int_equal(gaz__s3_parse_list(empty, strlen(empty), &pg, &st), 0);
	assert_int_equal(pg.n, 0);
	gaz__s3_list_page_release(&pg);
	/* A truncated page must say where to go on (s3-orchestrator#198). */
	assert_int_equal(gaz__s3_parse_list(no_token, strlen(no_token), &pg, &st), GAZ_EPROTO);
	assert_non_null(strstr(st.msg, "NextContinuationToken"));
	gaz_status_clear(&st);
	assert_int_equal(gaz__s3_parse_list("<html>oops", 10, &pg, &st), GAZ_EPROTO);
	gaz_status_clear(&st);
	assert_int_equal(gaz__s3_parse_list("<Error><Code>x</Code></Error>", 29, &pg, &st), GAZ_EPROTO);
	assert_non_null(strstr(st.msg, "expected ListBucketResult"));
	gaz_status_clear(&st);
	assert_int_equal(gaz__s3_parse_list("", 0, &pg, &st), GAZ_EPROTO);
}

static void test_parse_list_bounds(void **state)
{
	/* A key longer than the walker keeps is a protocol error. */
	size_t n = 20000;
	char *big = malloc(n + 200);
	struct gaz_s3_list_page pg;
	struct gaz_status st = {0};
	(void)state;
	strcpy(big, "<ListBucketResult><Contents><Key>");
	memset(big + strlen(big), 'k', n);
	strcpy(big + 33 + n, "</Key></Contents></ListBucketResult>");
	assert_int_equal(gaz__s3_parse_list(big, strlen(big), &pg, &st), GAZ_EPROTO);
	free(big);
}

static void test_parse_error_and_upload_id(void **state)
{
	static const char err[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchBucket</Code>"
				  "<Message>The specified bucket does not exist</Message>"
				  "<BucketName>x</BucketName><RequestId>r</RequestId></Error>";
	static const char up[] = "<InitiateMultipartUploadResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
				 "<Bucket>b</Bucket><Key>k</Key><UploadId>VXBsb2FkIElE</UploadId>"
				 "</InitiateMultipartUploadResult>";
	char code[64], msg[128], id[64];
	(void)state;
	assert_true(gaz__s3_parse_error(err, strlen(err), code, sizeof(code), msg, sizeof(msg)));
	assert_string_equal(code, "NoSuchBucket");
	assert_string_equal(msg, "The specified bucket does not exist");
	assert_false(gaz__s3_parse_error(up, strlen(up), code, sizeof(code), msg, sizeof(msg)));
	assert_false(gaz__s3_parse_error(NULL, 0, code, sizeof(code), msg, sizeof(msg)));
	assert_string_equal(code, "");
	assert_true(gaz__s3_parse_upload_id(up, strlen(up), id, sizeof(id)));
	assert_string_equal(id, "VXBsb2FkIElE");
	assert_false(gaz__s3_parse_upload_id(err, strlen(err), id, sizeof(id)));
	assert_int_equal(gaz__s3_parse_time("2013-05-24T00:00:00.000Z"), 1369353600);
	assert_int_equal(gaz__s3_parse_time("yesterday"), 0);
}

static void test_ini_lookup(void **state)
{
	char out[32], path[256];
	(void)state;
	write_file("ini", "k=top\n[a]\n; c\n k = v1 \n[ b ]\nk=v2\nlong=0123456789012345678901234567890123456789\n");
	snprintf(path, sizeof(path), "%s/ini", dir);
	assert_int_equal(gaz__s3_ini_lookup(path, "a", "k", out, sizeof(out)), 1);
	assert_string_equal(out, "v1");
	assert_int_equal(gaz__s3_ini_lookup(path, "b", "k", out, sizeof(out)), 1);
	assert_string_equal(out, "v2");
	assert_int_equal(gaz__s3_ini_lookup(path, "c", "k", out, sizeof(out)), 0);
	assert_int_equal(gaz__s3_ini_lookup(path, "b", "long", out, sizeof(out)), -1);
	assert_int_equal(gaz__s3_ini_lookup("/nonexistent", "a", "k", out, sizeof(out)), 0);
}

static void test_error_mapping(void **state)
{
	struct gaz_store *s;
	struct s3_store *s3;
	struct s3_call c;
	struct gaz_status st = {0};
	static const char denied[] = "<Error><Code>AccessDenied</Code><Message>no</Message></Error>";
	static const char slow[] = "<Error><Code>SlowDown</Code></Error>";
	(void)state;
	clear_env();
	env_keys();
	s = open_ok("s3://b/p/?endpoint=http://127.0.0.1:1&region=us-east-1");
	s3 = s->impl;
	call_init(&c, "PUT", "p/k", "put");
	c.resp.max = 4096;
	c.status = 403;
	assert_int_equal(call_error(s3, &c, 0, &st), GAZ_EPERM);
	assert_non_null(strstr(st.msg, "HTTP 403 Forbidden (access key ENVKEY from environment"));
	gaz_status_clear(&st);
	c.status = 400;
	rbuf_add(&c.resp, denied, strlen(denied));
	assert_int_equal(call_error(s3, &c, 0, &st), GAZ_EPERM);
	assert_false(retryable(&c, 0, "AccessDenied"));
	rbuf_free(&c.resp);
	gaz_status_clear(&st);
	c.status = 404;
	assert_int_equal(call_error(s3, &c, 0, &st), GAZ_ENOTFOUND);
	gaz_status_clear(&st);
	c.status = 503;
	assert_true(retryable(&c, 0, ""));
	assert_int_equal(call_error(s3, &c, 0, &st), GAZ_EUNAVAIL);
	c.status = 400;
	assert_true(retryable(&c, 0, "SlowDown"));
	rbuf_add(&c.resp, slow, strlen(slow));
	rbuf_free(&c.resp);
	c.status = 429;
	assert_true(retryable(&c, 0, ""));
	c.cc = CURLE_COULDNT_CONNECT;
	assert_true(retryable(&c, GAZ_EUNAVAIL, ""));
	gaz_status_clear(&st);
	assert_int_equal(call_error(s3, &c, GAZ_EUNAVAIL, &st), GAZ_EUNAVAIL);
	gaz_status_clear(&st);
	/* No server at all: the retries end in a clear unavailable error. */
	bool ex = true;
	assert_int_equal(gaz_store_exists(s, "k", &ex, &st), GAZ_EUNAVAIL);
	assert_non_null(strstr(st.msg, "http://127.0.0.1:1"));
	gaz_store_unref(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_endpoint_forces_path_style),
		cmocka_unit_test(test_aws_addressing),
		cmocka_unit_test(test_region_resolution),
		cmocka_unit_test(test_credentials_resolution),
		cmocka_unit_test(test_bad_parameters),
		cmocka_unit_test(test_stall_timeout_parameter),
		cmocka_unit_test(test_presigned_urls),
		cmocka_unit_test(test_parse_list_page),
		cmocka_unit_test(test_list_emit_skips_placeholders),
		cmocka_unit_test(test_parse_last_page_and_bad_pages),
		cmocka_unit_test(test_parse_list_bounds),
		cmocka_unit_test(test_parse_error_and_upload_id),
		cmocka_unit_test(test_ini_lookup),
		cmocka_unit_test(test_error_mapping),
	};
	return cmocka_run_group_tests_name("s3", tests, setup, teardown);
}
