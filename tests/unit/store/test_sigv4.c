/* test_sigv4.c - SigV4 against the examples AWS publishes in the S3 API
 * reference ("Signature Calculations for the Authorization Header:
 * Transferring Payload in a Single Chunk": GET Object, PUT Object, GET
 * Bucket Lifecycle, GET Bucket (List Objects); and "Authenticating
 * Requests: Using Query Parameters": the presigned GET of test.txt).
 * Every canonical request, string to sign and signature below is copied
 * from those pages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "store/sigv4.h"

/* 2013-05-24T00:00:00Z */
#define WHEN ((time_t)1369353600)

static const struct gaz_sigv4_creds creds = {
	.access_key = "AKIAIOSFODNN7EXAMPLE",
	.secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
};

static struct gaz_sigv4_out out;

static void sign(const char *method, const char *path, const struct gaz_sigv4_kv *q, size_t nq,
		 const struct gaz_sigv4_kv *h, size_t nh, const char *payload)
{
	struct gaz_sigv4_req req = {method, path, q, nq, h, nh, payload, "us-east-1", "s3", WHEN};
	struct gaz_status st = {0};

	assert_int_equal(gaz_sigv4_sign(&req, &creds, &out, &st), 0);
}

static void test_get_object(void **state)
{
	const struct gaz_sigv4_kv h[] = {
		{"Host", "examplebucket.s3.amazonaws.com"},
		{"Range", "bytes=0-9"},
		{"x-amz-content-sha256", GAZ_SIGV4_EMPTY_SHA256},
		{"x-amz-date", "20130524T000000Z"},
	};
	(void)state;
	sign("GET", "/test.txt", NULL, 0, h, 4, GAZ_SIGV4_EMPTY_SHA256);
	assert_string_equal(out.canonical,
			    "GET\n/test.txt\n\n"
			    "host:examplebucket.s3.amazonaws.com\n"
			    "range:bytes=0-9\n"
			    "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
			    "x-amz-date:20130524T000000Z\n\n"
			    "host;range;x-amz-content-sha256;x-amz-date\n"
			    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	assert_string_equal(out.string_to_sign,
			    "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
			    "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
	assert_string_equal(out.signature,
			    "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
	assert_string_equal(out.authorization,
			    "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
			    "aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
			    "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

static void test_put_object(void **state)
{
	const char *body = "Welcome to Amazon S3.";
	char sha[65], path[64];
	/* Given out of order and with a differently cased name on purpose. */
	const struct gaz_sigv4_kv h[] = {
		{"x-amz-storage-class", "REDUCED_REDUNDANCY"},
		{"Date", "Fri, 24 May 2013 00:00:00 GMT"},
		{"Host", "examplebucket.s3.amazonaws.com"},
		{"x-amz-date", "20130524T000000Z"},
		{"X-Amz-Content-Sha256", "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"},
	};
	(void)state;
	gaz_sigv4_sha256_hex(body, strlen(body), sha);
	assert_string_equal(sha, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
	assert_int_equal(gaz_sigv4_uri_encode("/test$file.text", true, path, sizeof(path)), 17);
	assert_string_equal(path, "/test%24file.text");
	sign("PUT", path, NULL, 0, h, 5, sha);
	assert_string_equal(out.canonical,
			    "PUT\n/test%24file.text\n\n"
			    "date:Fri, 24 May 2013 00:00:00 GMT\n"
			    "host:examplebucket.s3.amazonaws.com\n"
			    "x-amz-content-sha256:44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072\n"
			    "x-amz-date:20130524T000000Z\n"
			    "x-amz-storage-class:REDUCED_REDUNDANCY\n\n"
			    "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class\n"
			    "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
	assert_string_equal(out.string_to_sign,
			    "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
			    "9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d");
	assert_string_equal(out.signature,
			    "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

static const struct gaz_sigv4_kv bucket_headers[] = {
	{"host", "examplebucket.s3.amazonaws.com"},
	{"x-amz-content-sha256", GAZ_SIGV4_EMPTY_SHA256},
	{"x-amz-date", "20130524T000000Z"},
};

static void test_get_bucket_lifecycle(void **state)
{
	const struct gaz_sigv4_kv q[] = {{"lifecycle", ""}};
	(void)state;
	sign("GET", "/", q, 1, bucket_headers, 3, GAZ_SIGV4_EMPTY_SHA256);
	assert_non_null(strstr(out.canonical, "GET\n/\nlifecycle=\nhost:"));
	assert_string_equal(out.string_to_sign,
			    "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
			    "9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca");
	assert_string_equal(out.signature,
			    "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

static void test_list_objects(void **state)
{
	/* Out of order: the canonical query sorts by name. */
	const struct gaz_sigv4_kv q[] = {{"prefix", "J"}, {"max-keys", "2"}};
	(void)state;
	sign("GET", "/", q, 2, bucket_headers, 3, GAZ_SIGV4_EMPTY_SHA256);
	assert_non_null(strstr(out.canonical, "GET\n/\nmax-keys=2&prefix=J\nhost:"));
	assert_string_equal(out.string_to_sign,
			    "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
			    "df57d21db20da04d7fa30298dd4488ba3a2b47ca3a489c74750e0f1e7df1b9b7");
	assert_string_equal(out.signature,
			    "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

static void test_presigned_get(void **state)
{
	const struct gaz_sigv4_kv h[] = {{"host", "examplebucket.s3.amazonaws.com"}};
	struct gaz_sigv4_req req = {"GET", "/test.txt", NULL, 0, h, 1, NULL, "us-east-1", "s3", WHEN};
	struct gaz_status st = {0};
	char q[2048];
	(void)state;
	assert_int_equal(gaz_sigv4_presign(&req, &creds, 86400, q, sizeof(q), &out, &st), 0);
	assert_string_equal(q, "X-Amz-Algorithm=AWS4-HMAC-SHA256"
			       "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
			       "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
			       "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
	assert_non_null(strstr(out.canonical, "\nhost:examplebucket.s3.amazonaws.com\n\nhost\nUNSIGNED-PAYLOAD"));
	/* SigV4 caps presigned URLs at 7 days. */
	assert_int_equal(gaz_sigv4_presign(&req, &creds, 604801, q, sizeof(q), &out, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "7 days"));
}

static void test_presign_with_session_token(void **state)
{
	const struct gaz_sigv4_kv h[] = {{"host", "127.0.0.1:9000"}};
	struct gaz_sigv4_req req = {"GET", "/b/k", NULL, 0, h, 1, NULL, "us-east-1", "s3", WHEN};
	struct gaz_sigv4_creds c = creds;
	struct gaz_status st = {0};
	char q[2048];
	(void)state;
	snprintf(c.session_token, sizeof(c.session_token), "tok/en+=");
	assert_int_equal(gaz_sigv4_presign(&req, &c, 60, q, sizeof(q), &out, &st), 0);
	/* The token is signed and carried, encoded, in canonical order. */
	assert_non_null(strstr(q, "&X-Amz-Security-Token=tok%2Fen%2B%3D&X-Amz-SignedHeaders=host&X-Amz-Signature="));
	assert_non_null(strstr(out.canonical, "X-Amz-Security-Token=tok%2Fen%2B%3D"));
}

static void test_uri_encode(void **state)
{
	char buf[64];
	(void)state;
	assert_int_equal(gaz_sigv4_uri_encode("a b/c~d_e.f-g", true, buf, sizeof(buf)), 15);
	assert_string_equal(buf, "a%20b/c~d_e.f-g");
	gaz_sigv4_uri_encode("a/b=c&d+e\xc3\xa9", false, buf, sizeof(buf));
	assert_string_equal(buf, "a%2Fb%3Dc%26d%2Be%C3%A9");
	assert_int_equal(gaz_sigv4_uri_encode("abcd", false, buf, 4), -1);
	assert_int_equal(gaz_sigv4_uri_encode("abc", false, buf, 4), 3);
}

static void test_header_values_trimmed(void **state)
{
	const struct gaz_sigv4_kv h[] = {{"host", "  h   x  "}, {"x-amz-meta-a", "1  2"}};
	(void)state;
	sign("GET", "/", NULL, 0, h, 2, GAZ_SIGV4_UNSIGNED_PAYLOAD);
	assert_non_null(strstr(out.canonical, "host:h x\nx-amz-meta-a:1 2\n\nhost;x-amz-meta-a\n"));
}

static void test_rejects_incomplete(void **state)
{
	const struct gaz_sigv4_kv h[] = {{"x-amz-date", "x"}};
	struct gaz_sigv4_req req = {"GET", "/", NULL, 0, h, 1, NULL, "us-east-1", "s3", WHEN};
	struct gaz_sigv4_creds none = {0};
	struct gaz_status st = {0};
	(void)state;
	assert_int_equal(gaz_sigv4_sign(&req, &creds, &out, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "host"));
	gaz_status_clear(&st);
	assert_int_equal(gaz_sigv4_sign(&req, &none, &out, &st), GAZ_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_get_object),
		cmocka_unit_test(test_put_object),
		cmocka_unit_test(test_get_bucket_lifecycle),
		cmocka_unit_test(test_list_objects),
		cmocka_unit_test(test_presigned_get),
		cmocka_unit_test(test_presign_with_session_token),
		cmocka_unit_test(test_uri_encode),
		cmocka_unit_test(test_header_values_trimmed),
		cmocka_unit_test(test_rejects_incomplete),
	};
	return cmocka_run_group_tests_name("sigv4", tests, NULL, NULL);
}
