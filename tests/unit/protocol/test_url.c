/*
 * test_url.c - URL parsing with Go net/url acceptance (lib/protocol/url.c):
 * parsed fields, and the exact errors.
 */
#include "vcheck.h"

#include <stdlib.h>

#include "protocol/url.h"

static void test_fields(void **state)
{
	static const struct {
		const char *raw, *scheme, *opaque, *host, *path, *query, *frag;
	} cases[] = {
		{"s3://bucket/prefix/?profile=p", "s3", "", "bucket", "/prefix/", "profile=p", ""},
		{"S3://Bucket", "s3", "", "Bucket", "", "", ""},
		{"file:///x/", "file", "", "", "/x/", "", ""},
		{"file://host/x/", "file", "", "host", "/x/", "", ""},
		{"http://h:8080/a%2Fb/#fr%20ag", "http", "", "h:8080", "/a/b/", "", "fr ag"},
		{"unix://host/abs/sock", "unix", "", "host", "/abs/sock", "", ""},
		{"s3:bucket/", "s3", "bucket/", "", "", "", ""},
		{"https://user:pw@h/", "https", "", "h", "/", "", ""},
		{"http://[::1]:80/", "http", "", "[::1]:80", "/", "", ""},
		{"/rel/path?q", "", "", "", "/rel/path", "q", ""},
		{"//h/p", "", "", "h", "/p", "", ""},
		{"///p", "", "", "", "///p", "", ""},
		{"a?", "", "", "", "a", "", ""},
		{"*", "", "", "", "*", "", ""},
		{"", "", "", "", "", "", ""},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct gaz_status st = {0};
		struct gaz_url u;

		if (gaz_url_parse(cases[i].raw, &u, &st))
			fail_msg("%s: %s", cases[i].raw, st.msg);
		assert_string_equal(u.scheme, cases[i].scheme);
		assert_string_equal(u.opaque, cases[i].opaque);
		assert_string_equal(u.host, cases[i].host);
		assert_string_equal(u.path, cases[i].path);
		assert_string_equal(u.raw_query, cases[i].query);
		assert_string_equal(u.fragment, cases[i].frag);
		assert_int_equal(gaz_url_is_abs(&u), cases[i].scheme[0] != '\0');
		gaz_url_release(&u);
		gaz_url_release(&u); /* idempotent */
	}
}

static void test_userinfo(void **state)
{
	struct gaz_status st = {0};
	struct gaz_url u;

	(void)state;
	assert_int_equal(gaz_url_parse("https://us%20er:pw@h/", &u, &st), 0);
	assert_true(u.has_userinfo);
	assert_string_equal(u.userinfo, "us%20er:pw");
	assert_string_equal(u.host, "h");
	gaz_url_release(&u);
}

static int parse_err(const char *raw, struct gaz_status *st)
{
	struct gaz_url u;
	int rc = gaz_url_parse(raw, &u, st);

	if (rc == 0)
		gaz_url_release(&u);
	return rc;
}

static void test_errors(void **state)
{
	(void)state;
	VCHECK(parse_err(":foo", &st), "parse \":foo\": missing protocol scheme");
	VCHECK(parse_err("a:b/c:d", &st), NULL); /* scheme "a", opaque */
	VCHECK(parse_err("1a:b", &st), "parse \"1a:b\": first path segment in URL cannot contain colon");
	VCHECK(parse_err("s3://b c/", &st), "parse \"s3://b c/\": invalid character \" \" in host name");
	VCHECK(parse_err("s3://b{/", &st), "parse \"s3://b{/\": invalid character \"{\" in host name");
	VCHECK(parse_err("http://h:8x/", &st), "parse \"http://h:8x/\": invalid port \":8x\" after host");
	VCHECK(parse_err("http://h:1:2/", &st), "parse \"http://h:1:2/\": invalid port \":1:2\" after host");
	VCHECK(parse_err("s3://h:1:2/", &st), NULL); /* last colon for other schemes */
	VCHECK(parse_err("http://[::1/", &st), "parse \"http://[::1/\": missing ']' in host");
	VCHECK(parse_err("http://a[::1]/", &st), "parse \"http://a[::1]/\": invalid IP-literal");
	VCHECK(parse_err("http://[1.2.3.4]/", &st), "parse \"http://[1.2.3.4]/\": invalid IP-literal");
	VCHECK(parse_err("http://[zz]/", &st),
	       "parse \"http://[zz]/\": invalid host: ParseAddr(\"zz\"): unable to parse IP");
	VCHECK(parse_err("s3://b/%zz/", &st), "parse \"s3://b/%zz/\": invalid URL escape \"%zz\"");
	VCHECK(parse_err("s3://b/%4", &st), "parse \"s3://b/%4\": invalid URL escape \"%4\"");
	VCHECK(parse_err("s3://%41/", &st), "parse \"s3://%41/\": invalid URL escape \"%41\"");
	VCHECK(parse_err("s3://%c3%a9/", &st), NULL); /* non-ASCII may be escaped in a host */
	VCHECK(parse_err("s3://b/\x01", &st),
	       "parse \"s3://b/\\x01\": net/url: invalid control character in URL");
	VCHECK(parse_err("s3://b/\t", &st),
	       "parse \"s3://b/\\t\": net/url: invalid control character in URL");
	VCHECK(parse_err("s3://b/#%zz", &st), "parse \"s3://b/#%zz\": invalid URL escape \"%zz\"");
	VCHECK(parse_err("s3://a b@h/", &st), "parse \"s3://a b@h/\": net/url: invalid userinfo");
	VCHECK(parse_err("s3://a%zz@h/", &st), "parse \"s3://a%zz@h/\": invalid URL escape \"%zz\"");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fields),
		cmocka_unit_test(test_userinfo),
		cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
