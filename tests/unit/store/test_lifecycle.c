/*
 * test_lifecycle.c - the bucket lifecycle document merge: foreign rules
 * survive byte for byte, owned rules are parsed, replaced, removed and
 * rendered, and documents that cannot round-trip are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/lifecycle.h"

#define OWN "gazette-operator/"

static const char foreign1[] =
	"<Rule><ID>archive</ID><Filter><And><Prefix>logs/</Prefix><Tag><Key>k</Key><Value>a&amp;b</Value>"
	"</Tag></And></Filter><Status>Enabled</Status><Transition><Days>30</Days>"
	"<StorageClass>GLACIER</StorageClass></Transition></Rule>";
static const char foreign2[] =
	"<Rule>\n  <ID>mpu</ID>\n  <Filter></Filter>\n  <Status>Enabled</Status>\n"
	"  <AbortIncompleteMultipartUpload><DaysAfterInitiation>2</DaysAfterInitiation>"
	"</AbortIncompleteMultipartUpload>\n</Rule>";

static char *doc_text(void)
{
	static char buf[4096];

	snprintf(buf, sizeof(buf),
		 "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		 "<LifecycleConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">%s"
		 "<Rule><ID>" OWN "frag/a/</ID><Filter><Prefix>frag/a/</Prefix></Filter>"
		 "<Status>Enabled</Status><Expiration><Days>7</Days></Expiration></Rule>\n%s"
		 "<Rule><Expiration><Days>3</Days></Expiration><ID>" OWN "legacy/</ID>"
		 "<Prefix>legacy/</Prefix><Status>Disabled</Status></Rule>"
		 "</LifecycleConfiguration>",
		 foreign1, foreign2);
	return buf;
}

static void test_parse(void **state)
{
	struct gaz_lc_doc d;
	struct gaz_status st = {0};
	const char *x = doc_text();
	const struct gaz_lc_rule *r;

	(void)state;
	assert_int_equal(gaz_lc_doc_parse(x, strlen(x), OWN, &d, &st), 0);
	assert_int_equal(d.n_foreign, 2);
	assert_string_equal(d.foreign[0], foreign1);
	assert_string_equal(d.foreign[1], foreign2);
	assert_int_equal(d.n_owned, 2);
	assert_int_equal(gaz_lc_doc_count(&d), 4);
	assert_non_null(r = gaz_lc_doc_find(&d, OWN "frag/a/"));
	assert_string_equal(r->prefix, "frag/a/");
	assert_int_equal(r->days, 7);
	assert_true(r->enabled && r->plain);
	assert_non_null(r = gaz_lc_doc_find(&d, OWN "legacy/"));
	assert_string_equal(r->prefix, "legacy/"); /* the legacy top-level Prefix */
	assert_int_equal(r->days, 3);
	assert_false(r->enabled);
	assert_null(gaz_lc_doc_find(&d, "archive")); /* foreign rules are not ours */
	gaz_lc_doc_release(&d);
	/* No configuration at all. */
	assert_int_equal(gaz_lc_doc_parse(NULL, 0, OWN, &d, &st), 0);
	assert_int_equal(gaz_lc_doc_count(&d), 0);
	gaz_lc_doc_release(&d);
}

static void test_merge_and_render(void **state)
{
	struct gaz_lc_doc d, back;
	struct gaz_status st = {0};
	const char *x = doc_text();
	char *out = NULL;
	size_t len = 0;
	bool changed;

	(void)state;
	assert_int_equal(gaz_lc_doc_parse(x, strlen(x), OWN, &d, &st), 0);
	assert_int_equal(gaz_lc_doc_set(&d, OWN "frag/a/", "frag/a/", 7, &changed, &st), 0);
	assert_false(changed); /* as it is */
	assert_int_equal(gaz_lc_doc_set(&d, OWN "frag/a/", "frag/a/", 8, &changed, &st), 0);
	assert_true(changed);
	assert_int_equal(gaz_lc_doc_set(&d, OWN "legacy/", "legacy/", 3, &changed, &st), 0);
	assert_true(changed); /* was Disabled */
	assert_int_equal(gaz_lc_doc_set(&d, OWN "new<&>/", "new<&>/", 1, &changed, &st), 0);
	assert_true(changed);
	gaz_lc_doc_remove(&d, OWN "legacy/", &changed);
	assert_true(changed);
	gaz_lc_doc_remove(&d, OWN "legacy/", &changed);
	assert_false(changed);
	gaz_lc_doc_remove(&d, "archive", &changed); /* not ours: untouched */
	assert_false(changed);
	assert_int_equal(gaz_lc_doc_set(&d, "archive", "x/", 1, &changed, &st), GAZ_EINVAL);
	assert_int_equal(gaz_lc_doc_set(&d, OWN "zero", "x/", 0, &changed, &st), GAZ_EINVAL);
	assert_int_equal(gaz_lc_doc_render(&d, &out, &len, &st), 0);
	assert_non_null(strstr(out, foreign1));
	assert_non_null(strstr(out, foreign2));
	assert_non_null(strstr(out, "<Rule><ID>" OWN "new&lt;&amp;&gt;/</ID><Filter><Prefix>new&lt;&amp;&gt;/"
				    "</Prefix></Filter><Status>Enabled</Status><Expiration><Days>1</Days>"
				    "</Expiration></Rule>"));
	/* What we render parses back to the same document. */
	assert_int_equal(gaz_lc_doc_parse(out, len, OWN, &back, &st), 0);
	assert_int_equal(back.n_foreign, 2);
	assert_string_equal(back.foreign[0], foreign1);
	assert_string_equal(back.foreign[1], foreign2);
	assert_int_equal(back.n_owned, 2);
	assert_int_equal(gaz_lc_doc_find(&back, OWN "frag/a/")->days, 8);
	assert_string_equal(gaz_lc_doc_find(&back, OWN "new<&>/")->prefix, "new<&>/");
	gaz_lc_doc_release(&back);
	free(out);
	gaz_lc_doc_release(&d);
}

static void test_owned_rule_not_plain_is_rewritten(void **state)
{
	static const char x[] =
		"<LifecycleConfiguration><Rule><ID>" OWN "j/</ID><Filter><Prefix>j/</Prefix></Filter>"
		"<Status>Enabled</Status><Expiration><Days>5</Days></Expiration>"
		"<NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays>"
		"</NoncurrentVersionExpiration></Rule></LifecycleConfiguration>";
	struct gaz_lc_doc d;
	struct gaz_status st = {0};
	bool changed;

	(void)state;
	assert_int_equal(gaz_lc_doc_parse(x, strlen(x), OWN, &d, &st), 0);
	assert_false(gaz_lc_doc_find(&d, OWN "j/")->plain);
	assert_int_equal(gaz_lc_doc_set(&d, OWN "j/", "j/", 5, &changed, &st), 0);
	assert_true(changed);
	gaz_lc_doc_release(&d);
}

static void refused(const char *x, const char *why)
{
	struct gaz_lc_doc d;
	struct gaz_status st = {0};

	assert_int_equal(gaz_lc_doc_parse(x, strlen(x), OWN, &d, &st), GAZ_EPROTO);
	if (!strstr(st.msg, why))
		fail_msg("got \"%s\", want \"%s\"", st.msg, why);
	assert_int_equal(d.n_foreign + d.n_owned, 0);
}

static void test_refused(void **state)
{
	(void)state;
	refused("not xml", "lifecycle configuration: ");
	refused("<ListBucketResult/>", "not a LifecycleConfiguration");
	refused("<s3:LifecycleConfiguration xmlns:s3=\"x\"><s3:Rule/></s3:LifecycleConfiguration>",
		"namespace prefixes");
	refused("<LifecycleConfiguration><Other/></LifecycleConfiguration>", "other than Rule");
	refused("<LifecycleConfiguration><Rule><Status>Enabled</Status></Rule></LifecycleConfiguration>",
		"without an ID");
	refused("<LifecycleConfiguration><Rule><ID>a</ID>", "lifecycle configuration: ");
}

static void test_escape(void **state)
{
	char out[32];

	(void)state;
	assert_int_equal(gaz_lc_xml_escape("a&b<c>'\"", out, sizeof(out)), 28);
	assert_string_equal(out, "a&amp;b&lt;c&gt;&apos;&quot;");
	assert_int_equal(gaz_lc_xml_escape("&&&&&&&&", out, 8), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_merge_and_render),
		cmocka_unit_test(test_owned_rule_not_plain_is_rewritten),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_escape),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
