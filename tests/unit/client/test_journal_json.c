/*
 * test_journal_json.c - `journals list -o json`: a ListResponse rendered as
 * gogo jsonpb (OrigName, EmitDefaults) renders it, compared byte for byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gazette/journal_json.h"

static char *render(const Protocol__ListResponse *resp)
{
	struct gaz_status st = {0};
	char *out = NULL;
	size_t len = 0;
	int rc = gaz_journal_json_list_response(resp, &out, &len, &st);

	if (rc)
		fail_msg("render failed (%d): %s", rc, st.msg);
	assert_int_equal(len, strlen(out));
	return out;
}

static const char want_full[] =
	"{\"status\":\"OK\","
	"\"header\":{\"process_id\":{\"zone\":\"local\",\"suffix\":\"broker-1\"},"
	"\"route\":{\"members\":[],\"primary\":0,\"endpoints\":[]},"
	"\"etcd\":{\"cluster_id\":\"12\",\"member_id\":\"34\",\"revision\":\"56\","
	"\"raft_term\":\"18446744073709551615\"}},"
	"\"journals\":[{\"spec\":{\"name\":\"a/b\",\"replication\":3,"
	"\"labels\":{\"labels\":[{\"name\":\"app\",\"value\":\"x\\u003cy\\u003e \\\"q\\\"\\u2028\","
	"\"prefix\":false}]},"
	"\"fragment\":{\"length\":\"1024\",\"compression_codec\":\"SNAPPY\","
	"\"stores\":[\"s3://b/?a=1\\u0026b=2\"],\"refresh_interval\":\"60s\","
	"\"retention\":\"1.500s\",\"flush_interval\":\"0s\",\"path_postfix_template\":\"t\"},"
	"\"flags\":4,\"max_append_rate\":\"-5\",\"suspend\":null},"
	"\"mod_revision\":\"42\","
	"\"route\":{\"members\":[{\"zone\":\"z\",\"suffix\":\"s1\"},{\"zone\":\"z\",\"suffix\":\"s2\"}],"
	"\"primary\":-1,\"endpoints\":[\"http://s1:8080\",\"\"]},"
	"\"create_revision\":\"40\"},"
	"{\"spec\":{\"name\":\"c\",\"replication\":0,\"labels\":{\"labels\":[]},"
	"\"fragment\":{\"length\":\"0\",\"compression_codec\":\"INVALID\",\"stores\":[],"
	"\"refresh_interval\":\"0s\",\"retention\":\"0s\",\"flush_interval\":\"0s\","
	"\"path_postfix_template\":\"\"},"
	"\"flags\":0,\"max_append_rate\":\"0\",\"suspend\":{\"level\":\"FULL\",\"offset\":\"9\"}},"
	"\"mod_revision\":\"0\",\"route\":{\"members\":[],\"primary\":0,\"endpoints\":[]},"
	"\"create_revision\":\"0\"}]}";

static void test_list_response(void **state)
{
	Protocol__ProcessSpec__ID hid = PROTOCOL__PROCESS_SPEC__ID__INIT;
	Protocol__Header__Etcd etcd = PROTOCOL__HEADER__ETCD__INIT;
	Protocol__Header hdr = PROTOCOL__HEADER__INIT;
	Protocol__Label lab = PROTOCOL__LABEL__INIT, *labp = &lab;
	Protocol__LabelSet ls = PROTOCOL__LABEL_SET__INIT;
	Google__Protobuf__Duration refresh = GOOGLE__PROTOBUF__DURATION__INIT;
	Google__Protobuf__Duration retention = GOOGLE__PROTOBUF__DURATION__INIT;
	Protocol__JournalSpec__Fragment frag = PROTOCOL__JOURNAL_SPEC__FRAGMENT__INIT;
	Protocol__JournalSpec spec = PROTOCOL__JOURNAL_SPEC__INIT;
	Protocol__JournalSpec bare = PROTOCOL__JOURNAL_SPEC__INIT;
	Protocol__JournalSpec__Suspend susp = PROTOCOL__JOURNAL_SPEC__SUSPEND__INIT;
	Protocol__ProcessSpec__ID m1 = PROTOCOL__PROCESS_SPEC__ID__INIT;
	Protocol__ProcessSpec__ID m2 = PROTOCOL__PROCESS_SPEC__ID__INIT;
	Protocol__ProcessSpec__ID *members[] = {&m1, &m2};
	char *stores[] = {"s3://b/?a=1&b=2"}, *endpoints[] = {"http://s1:8080", ""};
	Protocol__Route route = PROTOCOL__ROUTE__INIT;
	Protocol__ListResponse__Journal j1 = PROTOCOL__LIST_RESPONSE__JOURNAL__INIT;
	Protocol__ListResponse__Journal j2 = PROTOCOL__LIST_RESPONSE__JOURNAL__INIT;
	Protocol__ListResponse__Journal *js[] = {&j1, &j2};
	Protocol__ListResponse resp = PROTOCOL__LIST_RESPONSE__INIT;
	char *out;

	(void)state;
	hid.zone = "local";
	hid.suffix = "broker-1";
	etcd.cluster_id = 12;
	etcd.member_id = 34;
	etcd.revision = 56;
	etcd.raft_term = UINT64_MAX;
	hdr.process_id = &hid;
	hdr.etcd = &etcd; /* route left NULL: prints as its zero value */
	lab.name = "app";
	lab.value = "x<y> \"q\"\u2028";
	ls.labels = &labp;
	ls.n_labels = 1;
	refresh.seconds = 60;
	retention.seconds = 1;
	retention.nanos = 500000000;
	frag.length = 1024;
	frag.compression_codec = PROTOCOL__COMPRESSION_CODEC__SNAPPY;
	frag.stores = stores;
	frag.n_stores = 1;
	frag.refresh_interval = &refresh;
	frag.retention = &retention; /* flush_interval NULL: "0s" */
	frag.path_postfix_template = "t";
	spec.name = "a/b";
	spec.replication = 3;
	spec.labels = &ls;
	spec.fragment = &frag;
	spec.flags = PROTOCOL__JOURNAL_SPEC__FLAG__O_RDWR;
	spec.max_append_rate = -5;
	m1.zone = m2.zone = "z";
	m1.suffix = "s1";
	m2.suffix = "s2";
	route.members = members;
	route.n_members = 2;
	route.primary = -1;
	route.endpoints = endpoints;
	route.n_endpoints = 2;
	j1.spec = &spec;
	j1.mod_revision = 42;
	j1.route = &route;
	j1.create_revision = 40;
	bare.name = "c";
	susp.level = PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__FULL;
	susp.offset = 9;
	bare.suspend = &susp;
	j2.spec = &bare; /* labels and fragment NULL, route NULL */
	resp.header = &hdr;
	resp.journals = js;
	resp.n_journals = 2;

	out = render(&resp);
	assert_string_equal(out, want_full);
	free(out);
}

static void test_empty_and_unknown_enum(void **state)
{
	Protocol__ListResponse resp = PROTOCOL__LIST_RESPONSE__INIT;
	char *out;

	(void)state;
	out = render(&resp);
	assert_string_equal(out, "{\"status\":\"OK\",\"header\":{\"process_id\":{\"zone\":\"\","
				 "\"suffix\":\"\"},\"route\":{\"members\":[],\"primary\":0,"
				 "\"endpoints\":[]},\"etcd\":{\"cluster_id\":\"0\",\"member_id\":"
				 "\"0\",\"revision\":\"0\",\"raft_term\":\"0\"}},\"journals\":[]}");
	free(out);
	resp.status = (Protocol__Status)99; /* jsonpb prints unknown values bare */
	out = render(&resp);
	assert_int_equal(strncmp(out, "{\"status\":99,", 13), 0);
	free(out);
	resp.status = PROTOCOL__STATUS__JOURNAL_NOT_FOUND;
	out = render(&resp);
	assert_int_equal(strncmp(out, "{\"status\":\"JOURNAL_NOT_FOUND\",", 30), 0);
	free(out);
}

static void test_invalid_utf8(void **state)
{
	Protocol__ListResponse resp = PROTOCOL__LIST_RESPONSE__INIT;
	Protocol__ListResponse__Journal j = PROTOCOL__LIST_RESPONSE__JOURNAL__INIT, *jp = &j;
	Protocol__JournalSpec spec = PROTOCOL__JOURNAL_SPEC__INIT;
	struct gaz_status st = {0};
	char *out = NULL;

	(void)state;
	spec.name = "bad\xff";
	j.spec = &spec;
	resp.journals = &jp;
	resp.n_journals = 1;
	assert_int_equal(gaz_journal_json_list_response(&resp, &out, NULL, &st), GAZ_EINVAL);
	assert_null(out);
	assert_non_null(strstr(st.msg, "UTF-8"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_list_response),
		cmocka_unit_test(test_empty_and_unknown_enum),
		cmocka_unit_test(test_invalid_utf8),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
