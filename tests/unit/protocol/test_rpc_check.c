/*
 * test_rpc_check.c - §3.5 processes/brokers/routes/headers, §3.7 fragments
 * and §3.8 requests/responses (lib/protocol/route.c, rpc_check.c,
 * rpc_admin.c). Messages are built on the stack from the protobuf-c INIT
 * macros; each test starts from a valid message and breaks one rule.
 */
#include "vcheck.h"

#include <stdlib.h>

#include "protocol/labels.h"
#include "protocol/validate.h"

/* Valid route of two members with endpoints, and a valid header over it. */
struct hdr {
	Protocol__ProcessSpec__ID ids[3], pid;
	Protocol__ProcessSpec__ID *members[3];
	char *endpoints[3];
	Protocol__Route route;
	Protocol__Header__Etcd etcd;
	Protocol__Header header;
};

static void hdr_init(struct hdr *h)
{
	static const char *zones[] = {"us-east-1a", "us-east-1a", "us-east-1b"};
	static const char *suffixes[] = {"broker-1", "broker-2", "broker-1"};

	for (int i = 0; i < 3; i++) {
		protocol__process_spec__id__init(&h->ids[i]);
		h->ids[i].zone = (char *)zones[i];
		h->ids[i].suffix = (char *)suffixes[i];
		h->members[i] = &h->ids[i];
		h->endpoints[i] = "http://host:8080";
	}
	protocol__process_spec__id__init(&h->pid);
	protocol__route__init(&h->route);
	h->route.n_members = 3;
	h->route.members = h->members;
	h->route.primary = 0;
	h->route.n_endpoints = 3;
	h->route.endpoints = h->endpoints;
	protocol__header__etcd__init(&h->etcd);
	h->etcd.cluster_id = 1;
	h->etcd.member_id = 2;
	h->etcd.revision = 3;
	h->etcd.raft_term = 4;
	protocol__header__init(&h->header);
	h->header.process_id = &h->pid;
	h->header.route = &h->route;
	h->header.etcd = &h->etcd;
}

static Protocol__Fragment frag_valid(void)
{
	Protocol__Fragment f = PROTOCOL__FRAGMENT__INIT;

	f.journal = "a/journal";
	f.begin = 10;
	f.end = 20;
	f.compression_codec = PROTOCOL__COMPRESSION_CODEC__NONE;
	return f;
}

static void test_process_broker(void **state)
{
	Protocol__ProcessSpec__ID id = PROTOCOL__PROCESS_SPEC__ID__INIT;
	Protocol__ProcessSpec ps = PROTOCOL__PROCESS_SPEC__INIT;
	Protocol__BrokerSpec bs = PROTOCOL__BROKER_SPEC__INIT;

	(void)state;
	id.zone = "z";
	id.suffix = "abcd";
	VCHECK(gaz_validate_process_id(&id, &st), NULL);
	id.zone = "";
	VCHECK(gaz_validate_process_id(&id, &st), "Zone: invalid length (0; expected 1 <= length <= 32)");
	id.zone = (char *)rep('z', 32);
	VCHECK(gaz_validate_process_id(&id, &st), NULL);
	id.zone = (char *)rep('z', 33);
	VCHECK(gaz_validate_process_id(&id, &st), "Zone: invalid length (33; expected 1 <= length <= 32)");
	id.zone = "z";
	id.suffix = "abc";
	VCHECK(gaz_validate_process_id(&id, &st), "Suffix: invalid length (3; expected 4 <= length <= 128)");
	id.suffix = (char *)rep('s', 128);
	VCHECK(gaz_validate_process_id(&id, &st), NULL);
	id.suffix = (char *)rep('s', 129);
	VCHECK(gaz_validate_process_id(&id, &st),
	       "Suffix: invalid length (129; expected 4 <= length <= 128)");
	id.suffix = "b#12";
	VCHECK(gaz_validate_process_id(&id, &st), "Suffix: not a valid token (b#12)");
	id.suffix = "broker-1";

	ps.id = &id;
	ps.endpoint = "http://host:8080";
	VCHECK(gaz_validate_process_spec(&ps, &st), NULL);
	ps.endpoint = "";
	VCHECK(gaz_validate_process_spec(&ps, &st), "Endpoint: not absolute: ");
	ps.endpoint = "http://";
	VCHECK(gaz_validate_process_spec(&ps, &st), "Endpoint: missing host: http://");
	ps.endpoint = "unix://host/tmp/sock";
	VCHECK(gaz_validate_process_spec(&ps, &st), NULL);
	ps.id = NULL;
	VCHECK(gaz_validate_process_spec(&ps, &st), "Id.Zone: invalid length (0; expected 1 <= length <= 32)");
	ps.id = &id;

	bs.process_spec = &ps;
	bs.journal_limit = 131072;
	VCHECK(gaz_validate_broker_spec(&bs, &st), NULL);
	bs.journal_limit = 131073;
	VCHECK(gaz_validate_broker_spec(&bs, &st),
	       "invalid JournalLimit (131073; expected 0 <= JournalLimit <= 131072)");
	id.zone = "";
	VCHECK(gaz_validate_broker_spec(&bs, &st), "Id.Zone: invalid length (0; expected 1 <= length <= 32)");
}

static void test_route(void **state)
{
	struct hdr h;

	(void)state;
	hdr_init(&h);
	VCHECK(gaz_validate_route(&h.route, &st), NULL);
	h.route.primary = -1;
	VCHECK(gaz_validate_route(&h.route, &st), NULL);
	h.route.primary = 2;
	VCHECK(gaz_validate_route(&h.route, &st), NULL);
	h.route.primary = 3;
	VCHECK(gaz_validate_route(&h.route, &st), "invalid Primary (3; expected -1 <= Primary < 3)");
	h.route.primary = -2;
	VCHECK(gaz_validate_route(&h.route, &st), "invalid Primary (-2; expected -1 <= Primary < 3)");
	h.route.primary = 0;
	h.route.n_endpoints = 2;
	VCHECK(gaz_validate_route(&h.route, &st), "len(Endpoints) != 0, and != len(Members) (2 vs 3)");
	h.route.n_endpoints = 0;
	VCHECK(gaz_validate_route(&h.route, &st), NULL);
	h.route.n_endpoints = 3;
	h.endpoints[1] = "";
	VCHECK(gaz_validate_route(&h.route, &st), NULL);
	h.endpoints[2] = "host:8080/x";
	VCHECK(gaz_validate_route(&h.route, &st), "Endpoints[2]: missing host: host:8080/x");
	h.endpoints[2] = "http://h";
	h.members[1] = &h.ids[0]; /* duplicate */
	VCHECK(gaz_validate_route(&h.route, &st),
	       "Members not in unique, sorted order (index 1; {Zone:us-east-1a Suffix:broker-1} <= "
	       "{Zone:us-east-1a Suffix:broker-1})");
	h.members[1] = &h.ids[2];
	h.members[2] = &h.ids[1]; /* zone order wins over suffix order */
	VCHECK(gaz_validate_route(&h.route, &st),
	       "Members not in unique, sorted order (index 2; {Zone:us-east-1b Suffix:broker-1} <= "
	       "{Zone:us-east-1a Suffix:broker-2})");
	h.members[2] = &h.ids[2];
	h.members[1] = &h.ids[1];
	h.ids[1].suffix = "b";
	VCHECK(gaz_validate_route(&h.route, &st),
	       "Members[1].Suffix: invalid length (1; expected 4 <= length <= 128)");
	/* The empty route has primary 0 of 0 members: invalid, as in Gazette. */
	VCHECK(gaz_validate_route(NULL, &st), "invalid Primary (0; expected -1 <= Primary < 0)");
	Protocol__Route none = PROTOCOL__ROUTE__INIT;

	none.primary = -1;
	VCHECK(gaz_validate_route(&none, &st), NULL);
}

static void test_header(void **state)
{
	struct hdr h;

	(void)state;
	hdr_init(&h);
	VCHECK(gaz_validate_header(&h.header, &st), NULL); /* zero process_id is allowed */
	h.pid.zone = "z";
	VCHECK(gaz_validate_header(&h.header, &st),
	       "ProcessId.Suffix: invalid length (0; expected 4 <= length <= 128)");
	h.pid.suffix = "broker-1";
	VCHECK(gaz_validate_header(&h.header, &st), NULL);
	h.etcd.cluster_id = 0;
	VCHECK(gaz_validate_header(&h.header, &st), "Etcd: invalid ClusterId (expected != 0)");
	h.etcd.cluster_id = 1;
	h.etcd.member_id = 0;
	VCHECK(gaz_validate_header(&h.header, &st), "Etcd: invalid MemberId (expected != 0)");
	h.etcd.member_id = 2;
	h.etcd.revision = 0;
	VCHECK(gaz_validate_header(&h.header, &st), "Etcd: invalid Revision (0; expected 0 < revision)");
	h.etcd.revision = 1;
	h.etcd.raft_term = 0;
	VCHECK(gaz_validate_header(&h.header, &st), "Etcd: invalid RaftTerm (expected != 0)");
	h.etcd.raft_term = 1;
	h.route.primary = 7;
	VCHECK(gaz_validate_header(&h.header, &st), "Route: invalid Primary (7; expected -1 <= Primary < 3)");
	/* An absent (empty) header: route 0 of 0 members. */
	VCHECK(gaz_validate_header(NULL, &st), "Route: invalid Primary (0; expected -1 <= Primary < 0)");
	h.route.primary = -1;
	h.header.etcd = NULL;
	VCHECK(gaz_validate_header(&h.header, &st), "Etcd: invalid ClusterId (expected != 0)");
}

static void test_fragment(void **state)
{
	Protocol__Fragment f = frag_valid();

	(void)state;
	VCHECK(gaz_validate_fragment(&f, &st), NULL);
	f.begin = f.end = 20;
	VCHECK(gaz_validate_fragment(&f, &st), NULL);
	f.begin = 21;
	VCHECK(gaz_validate_fragment(&f, &st), "expected Begin <= End (have 21, 20)");
	f.begin = 10;
	f.compression_codec = 0;
	VCHECK(gaz_validate_fragment(&f, &st), "CompressionCodec: invalid value (INVALID)");
	f.compression_codec = 5;
	f.path_postfix = "date=2024-01-01/hour=00";
	VCHECK(gaz_validate_fragment(&f, &st), NULL);
	f.path_postfix = "a/";
	VCHECK(gaz_validate_fragment(&f, &st), "PathPostfix: must be a clean path (a/)");
	f.path_postfix = (char *)rep('p', 512);
	VCHECK(gaz_validate_fragment(&f, &st), NULL);
	f.path_postfix = (char *)rep('p', 513);
	VCHECK(gaz_validate_fragment(&f, &st),
	       "PathPostfix: invalid length (513; expected 0 <= length <= 512)");
	f.path_postfix = "";
	f.journal = "abc";
	VCHECK(gaz_validate_fragment(&f, &st), "Journal: invalid length (3; expected 4 <= length <= 512)");
	VCHECK(gaz_validate_status(15, &st), NULL);
	VCHECK(gaz_validate_status(16, &st), "invalid status (16)");
	VCHECK(gaz_validate_status(-1, &st), "invalid status (-1)");
}

static void test_read(void **state)
{
	Protocol__ReadRequest rq = PROTOCOL__READ_REQUEST__INIT;
	Protocol__ReadResponse rs = PROTOCOL__READ_RESPONSE__INIT;
	Protocol__Fragment f = frag_valid();
	struct hdr h;

	(void)state;
	hdr_init(&h);
	rq.journal = "a/journal;meta";
	VCHECK(gaz_validate_read_request(&rq, &st), NULL);
	rq.offset = -1;
	VCHECK(gaz_validate_read_request(&rq, &st), NULL);
	rq.offset = -2;
	VCHECK(gaz_validate_read_request(&rq, &st),
	       "invalid Offset (-2; expected -1 <= Offset <= MaxInt64)");
	rq.offset = 100;
	rq.end_offset = 99;
	VCHECK(gaz_validate_read_request(&rq, &st),
	       "invalid EndOffset (99; expected 0 or Offset <= EndOffset)");
	rq.end_offset = 100;
	VCHECK(gaz_validate_read_request(&rq, &st), NULL);
	rq.end_offset = -1;
	VCHECK(gaz_validate_read_request(&rq, &st),
	       "invalid EndOffset (-1; expected 0 or Offset <= EndOffset)");
	rq.end_offset = 0;
	rq.header = &h.header;
	h.etcd.revision = 0;
	VCHECK(gaz_validate_read_request(&rq, &st),
	       "Header.Etcd: invalid Revision (0; expected 0 < revision)");
	h.etcd.revision = 3;
	rq.journal = "abc";
	VCHECK(gaz_validate_read_request(&rq, &st),
	       "Journal: invalid length (3; expected 4 <= length <= 512)");

	/* Metadata responses. */
	VCHECK(gaz_validate_read_response(&rs, &st), NULL);
	rs.offset = 5;
	VCHECK(gaz_validate_read_response(&rs, &st), "unexpected Offset without Fragment or Content (5)");
	rs.status = PROTOCOL__STATUS__OFFSET_NOT_YET_AVAILABLE;
	VCHECK(gaz_validate_read_response(&rs, &st), NULL);
	rs.status = 99;
	VCHECK(gaz_validate_read_response(&rs, &st), "Status: invalid status (99)");
	rs.status = PROTOCOL__STATUS__OK;
	rs.fragment = &f;
	rs.offset = 10;
	rs.write_head = 20;
	rs.header = &h.header;
	rs.fragment_url = "https://bucket.s3/a/journal/x?sig=1";
	VCHECK(gaz_validate_read_response(&rs, &st), NULL);
	rs.offset = 20;
	VCHECK(gaz_validate_read_response(&rs, &st), "invalid Offset (20; expected 10 <= offset < 20)");
	rs.offset = 19;
	rs.write_head = 19;
	VCHECK(gaz_validate_read_response(&rs, &st), "invalid WriteHead (19; expected >= 20)");
	rs.write_head = 20;
	rs.fragment_url = "http://a b/";
	VCHECK(gaz_validate_read_response(&rs, &st),
	       "FragmentUrl: parse \"http://a b/\": invalid character \" \" in host name");
	rs.fragment = NULL;
	rs.offset = 0;
	VCHECK(gaz_validate_read_response(&rs, &st), "unexpected FragmentUrl without Fragment (http://a b/)");
	rs.fragment_url = "";
	rs.write_head = -1;
	VCHECK(gaz_validate_read_response(&rs, &st), "invalid WriteHead (-1; expected >= 0)");

	/* Content chunks carry only offset + content. */
	Protocol__ReadResponse chunk = PROTOCOL__READ_RESPONSE__INIT;

	chunk.content.data = (uint8_t *)"xyz";
	chunk.content.len = 3;
	chunk.offset = 12;
	VCHECK(gaz_validate_read_response(&chunk, &st), NULL);
	chunk.header = &h.header;
	VCHECK(gaz_validate_read_response(&chunk, &st), "unexpected Header with Content");
	chunk.header = NULL;
	chunk.write_head = 4;
	VCHECK(gaz_validate_read_response(&chunk, &st), "unexpected WriteHead with Content (4)");
	chunk.write_head = 0;
	chunk.fragment = &f;
	VCHECK(gaz_validate_read_response(&chunk, &st), "unexpected Fragment with Content");
	chunk.fragment = NULL;
	chunk.status = PROTOCOL__STATUS__NOT_ALLOWED;
	VCHECK(gaz_validate_read_response(&chunk, &st), "unexpected Status with Content (NOT_ALLOWED)");
}

static void test_append(void **state)
{
	Protocol__AppendRequest rq = PROTOCOL__APPEND_REQUEST__INIT;
	Protocol__AppendRequest chunk = PROTOCOL__APPEND_REQUEST__INIT;
	Protocol__LabelSet *regs = gaz_labelset_new(), *bad = gaz_labelset_new();
	Protocol__LabelSelector *check = NULL;
	struct gaz_status pst = {0};

	(void)state;
	assert_int_equal(gaz_labelset_add(regs, "author", "abc"), 0);
	assert_int_equal(gaz_labelset_add(bad, "a", "x"), 0);
	assert_int_equal(gaz_selector_parse("author=abc", &check, &pst), 0);
	rq.journal = "a/journal";
	rq.check_registers = check;
	rq.union_registers = regs;
	rq.subtract_registers = regs;
	rq.suspend = PROTOCOL__APPEND_REQUEST__SUSPEND__SUSPEND_KEEP;
	VCHECK(gaz_validate_append_request(&rq, &st), NULL);
	rq.suspend = 5;
	VCHECK(gaz_validate_append_request(&rq, &st), "Suspend: invalid Suspend variant (5)");
	rq.suspend = 0;
	rq.offset = -1;
	VCHECK(gaz_validate_append_request(&rq, &st), "invalid Offset (-1; expected >= 0)");
	rq.offset = 0;
	rq.content.data = (uint8_t *)"x";
	rq.content.len = 1;
	VCHECK(gaz_validate_append_request(&rq, &st), "unexpected Content");
	rq.content.len = 0;
	rq.union_registers = bad;
	VCHECK(gaz_validate_append_request(&rq, &st),
	       "UnionRegisters.Labels[0].Name: invalid length (1; expected 2 <= length <= 64)");
	rq.union_registers = NULL;
	rq.subtract_registers = bad;
	VCHECK(gaz_validate_append_request(&rq, &st),
	       "SubtractRegisters.Labels[0].Name: invalid length (1; expected 2 <= length <= 64)");
	rq.subtract_registers = NULL;
	check->include->labels[0]->name[0] = '#';
	VCHECK(gaz_validate_append_request(&rq, &st),
	       "CheckRegisters.Include.Labels[0].Name: not a valid token (#uthor)");

	/* Chunks and the empty commit message: nothing but content. */
	VCHECK(gaz_validate_append_request(&chunk, &st), NULL);
	chunk.content.data = (uint8_t *)"data";
	chunk.content.len = 4;
	VCHECK(gaz_validate_append_request(&chunk, &st), NULL);
	chunk.do_not_proxy = 1;
	VCHECK(gaz_validate_append_request(&chunk, &st), "unexpected DoNotProxy");
	chunk.do_not_proxy = 0;
	chunk.offset = 5;
	VCHECK(gaz_validate_append_request(&chunk, &st), "unexpected Offset");
	chunk.offset = 0;
	chunk.union_registers = regs;
	VCHECK(gaz_validate_append_request(&chunk, &st), "unexpected UnionRegisters");
	chunk.union_registers = NULL;
	chunk.check_registers = check;
	VCHECK(gaz_validate_append_request(&chunk, &st), "unexpected CheckRegisters");
	chunk.check_registers = NULL;
	chunk.suspend = PROTOCOL__APPEND_REQUEST__SUSPEND__SUSPEND_NOW;
	VCHECK(gaz_validate_append_request(&chunk, &st),
	       "unexpected Suspend (SUSPEND_NOW; expected SUSPEND_RESUMED)");
	gaz_selector_free(check);
	gaz_labelset_free(regs);
	gaz_labelset_free(bad);
}

static void test_append_response(void **state)
{
	Protocol__AppendResponse rs = PROTOCOL__APPEND_RESPONSE__INIT;
	Protocol__LabelSet regs = PROTOCOL__LABEL_SET__INIT;
	Protocol__Fragment f = frag_valid();
	struct hdr h;

	(void)state;
	hdr_init(&h);
	rs.header = &h.header;
	VCHECK(gaz_validate_append_response(&rs, &st), "expected Commit");
	rs.commit = &f;
	VCHECK(gaz_validate_append_response(&rs, &st), "expected Registers");
	rs.registers = &regs;
	VCHECK(gaz_validate_append_response(&rs, &st), NULL);
	rs.status = PROTOCOL__STATUS__REGISTER_MISMATCH;
	rs.commit = NULL;
	VCHECK(gaz_validate_append_response(&rs, &st), NULL);
	rs.registers = NULL;
	VCHECK(gaz_validate_append_response(&rs, &st), "expected Registers");
	rs.status = PROTOCOL__STATUS__WRONG_APPEND_OFFSET;
	VCHECK(gaz_validate_append_response(&rs, &st), NULL);
	rs.header = NULL;
	VCHECK(gaz_validate_append_response(&rs, &st),
	       "Header.Route: invalid Primary (0; expected -1 <= Primary < 0)");
	rs.header = &h.header;
	rs.status = PROTOCOL__STATUS__OK;
	rs.registers = &regs;
	rs.commit = &f;
	f.end = 1;
	VCHECK(gaz_validate_append_response(&rs, &st), "Commit: expected Begin <= End (have 10, 1)");
}

static void test_replicate(void **state)
{
	Protocol__ReplicateRequest rq = PROTOCOL__REPLICATE_REQUEST__INIT;
	Protocol__ReplicateResponse rs = PROTOCOL__REPLICATE_RESPONSE__INIT;
	Protocol__LabelSet regs = PROTOCOL__LABEL_SET__INIT;
	Protocol__Fragment f = frag_valid();
	struct hdr h;

	(void)state;
	hdr_init(&h);
	rq.proposal = &f; /* registers NULL: judged as empty */
	VCHECK(gaz_validate_replicate_request(&rq, &st), NULL);
	rq.header = &h.header;
	VCHECK(gaz_validate_replicate_request(&rq, &st), "expected Acknowledge with Header");
	rq.acknowledge = 1;
	rq.deprecated_journal = "a/journal";
	VCHECK(gaz_validate_replicate_request(&rq, &st), NULL);
	rq.deprecated_journal = "b/journal";
	VCHECK(gaz_validate_replicate_request(&rq, &st),
	       "DeprecatedJournal and Proposal.Journal mismatch (b/journal vs a/journal)");
	rq.deprecated_journal = "";
	rq.content_delta = 3;
	VCHECK(gaz_validate_replicate_request(&rq, &st), "unexpected ContentDelta with Proposal (3)");
	rq.content_delta = 0;
	rq.content.data = (uint8_t *)"";
	VCHECK(gaz_validate_replicate_request(&rq, &st), "unexpected Content with Proposal (len 0)");

	Protocol__ReplicateRequest chunk = PROTOCOL__REPLICATE_REQUEST__INIT;

	VCHECK(gaz_validate_replicate_request(&chunk, &st), "expected Content or Proposal");
	chunk.content.data = (uint8_t *)""; /* present, zero length */
	VCHECK(gaz_validate_replicate_request(&chunk, &st), NULL);
	chunk.content_delta = -1;
	VCHECK(gaz_validate_replicate_request(&chunk, &st), "invalid ContentDelta (-1; expected >= 0)");
	chunk.content_delta = 7;
	chunk.registers = &regs;
	VCHECK(gaz_validate_replicate_request(&chunk, &st), "unexpected Registers with Content");
	chunk.registers = NULL;
	chunk.acknowledge = 1;
	VCHECK(gaz_validate_replicate_request(&chunk, &st), "unexpected Acknowledge with Content");

	VCHECK(gaz_validate_replicate_response(&rs, &st), NULL);
	rs.status = PROTOCOL__STATUS__WRONG_ROUTE;
	VCHECK(gaz_validate_replicate_response(&rs, &st), "expected Header");
	rs.header = &h.header;
	VCHECK(gaz_validate_replicate_response(&rs, &st), NULL);
	rs.status = PROTOCOL__STATUS__PROPOSAL_MISMATCH;
	VCHECK(gaz_validate_replicate_response(&rs, &st), "unexpected Header");
	rs.header = NULL;
	VCHECK(gaz_validate_replicate_response(&rs, &st), "expected Fragment");
	rs.fragment = &f;
	VCHECK(gaz_validate_replicate_response(&rs, &st), "expected Registers");
	rs.registers = &regs;
	VCHECK(gaz_validate_replicate_response(&rs, &st), NULL);
	rs.status = PROTOCOL__STATUS__OK;
	VCHECK(gaz_validate_replicate_response(&rs, &st), "unexpected Fragment");
}

static void test_list(void **state)
{
	Protocol__ListRequest rq = PROTOCOL__LIST_REQUEST__INIT;
	Protocol__LabelSelector *sel = NULL;
	struct gaz_status pst = {0};

	(void)state;
	VCHECK(gaz_validate_list_request(&rq, &st), NULL); /* absent selector = empty */
	assert_int_equal(gaz_selector_parse("prefix=a/,aa=1,prefix notin (b/)", &sel, &pst), 0);
	rq.selector = sel;
	VCHECK(gaz_validate_list_request(&rq, &st), NULL);
	gaz_selector_free(sel);
	assert_int_equal(gaz_selector_parse("prefix=a", &sel, &pst), 0);
	rq.selector = sel;
	VCHECK(gaz_validate_list_request(&rq, &st),
	       "Selector.Include.Labels[\"prefix\"]: expected trailing '/' (a)");
	gaz_selector_free(sel);
	assert_int_equal(gaz_selector_parse("prefix!=b", &sel, &pst), 0);
	rq.selector = sel;
	VCHECK(gaz_validate_list_request(&rq, &st),
	       "Selector.Exclude.Labels[\"prefix\"]: expected trailing '/' (b)");
	gaz_selector_free(sel);
	assert_int_equal(gaz_selector_parse("prefix", &sel, &pst), 0);
	rq.selector = sel;
	VCHECK(gaz_validate_list_request(&rq, &st),
	       "Selector.Include.Labels[\"prefix\"]: expected trailing '/' ()");
	gaz_selector_free(sel);
}

static void test_apply(void **state)
{
	Protocol__ApplyRequest__Change ch = PROTOCOL__APPLY_REQUEST__CHANGE__INIT, *chs[1] = {&ch};
	Protocol__ApplyRequest rq = PROTOCOL__APPLY_REQUEST__INIT;
	Protocol__JournalSpec spec = PROTOCOL__JOURNAL_SPEC__INIT;

	(void)state;
	rq.n_changes = 1;
	rq.changes = chs;
	VCHECK(gaz_validate_apply_request(&rq, &st),
	       "Changes[0]: neither Upsert nor Delete are set (expected exactly one)");
	ch.delete_ = "a/journal";
	ch.expect_mod_revision = 1;
	VCHECK(gaz_validate_apply_request(&rq, &st), NULL);
	ch.expect_mod_revision = -1;
	VCHECK(gaz_validate_apply_change(&ch, &st), NULL);
	ch.expect_mod_revision = 0;
	VCHECK(gaz_validate_apply_change(&ch, &st), "invalid ExpectModRevision (0; expected > 0 or -1)");
	ch.expect_mod_revision = -2;
	VCHECK(gaz_validate_apply_change(&ch, &st), "invalid ExpectModRevision (-2; expected > 0 or -1)");
	ch.delete_ = "abc";
	ch.expect_mod_revision = 1;
	VCHECK(gaz_validate_apply_change(&ch, &st),
	       "Delete: invalid length (3; expected 4 <= length <= 512)");
	ch.upsert = &spec;
	VCHECK(gaz_validate_apply_change(&ch, &st),
	       "both Upsert and Delete are set (expected exactly one)");
	ch.delete_ = "";
	VCHECK(gaz_validate_apply_request(&rq, &st),
	       "Changes[0].Upsert.Name: invalid length (0; expected 4 <= length <= 512)");
}

static void test_apply_upsert_revisions(void **state)
{
	Protocol__ApplyRequest__Change ch = PROTOCOL__APPLY_REQUEST__CHANGE__INIT;
	Protocol__JournalSpec spec = PROTOCOL__JOURNAL_SPEC__INIT;
	Protocol__JournalSpec__Fragment frag = PROTOCOL__JOURNAL_SPEC__FRAGMENT__INIT;
	Google__Protobuf__Duration refresh = GOOGLE__PROTOBUF__DURATION__INIT;
	static const struct {
		int64_t rev;
		const char *want;
	} cases[] = {
		{0, NULL},
		{5, NULL},
		{-1, NULL},
		{-2, "invalid ExpectModRevision (-2; expected >= 0 or -1)"},
	};

	(void)state;
	refresh.seconds = 1;
	frag.length = 1024;
	frag.compression_codec = PROTOCOL__COMPRESSION_CODEC__NONE;
	frag.refresh_interval = &refresh;
	spec.name = "a/journal";
	spec.replication = 1;
	spec.fragment = &frag;
	ch.upsert = &spec;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ch.expect_mod_revision = cases[i].rev;
		VCHECK(gaz_validate_apply_change(&ch, &st), cases[i].want);
	}
}

static void test_fragments_request(void **state)
{
	Protocol__FragmentsRequest rq = PROTOCOL__FRAGMENTS_REQUEST__INIT;
	Google__Protobuf__Duration ttl = GOOGLE__PROTOBUF__DURATION__INIT;
	static const struct {
		int32_t limit;
		const char *want;
	} limits[] = {
		{-1, "invalid PageLimit (-1; must be >= 0 and <= 10000)"},
		{0, NULL},
		{10000, NULL},
		{10001, "invalid PageLimit (10001; must be >= 0 and <= 10000)"},
	};

	(void)state;
	rq.journal = "a/journal";
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		rq.page_limit = limits[i].limit;
		VCHECK(gaz_validate_fragments_request(&rq, &st), limits[i].want);
	}
	rq.page_limit = 0;
	rq.begin_mod_time = 10;
	rq.end_mod_time = 10;
	VCHECK(gaz_validate_fragments_request(&rq, &st), NULL);
	rq.end_mod_time = 9;
	VCHECK(gaz_validate_fragments_request(&rq, &st), "invalid EndModTime (9 must be after 10)");
	rq.end_mod_time = 0;
	rq.next_page_token = -1;
	VCHECK(gaz_validate_fragments_request(&rq, &st), "invalid NextPageToken (-1; must be >= 0)");
	rq.next_page_token = 0;
	rq.signaturettl = &ttl;
	VCHECK(gaz_validate_fragments_request(&rq, &st), "invalid SignatureTTL (0s; must be > 0s)");
	ttl.nanos = 1;
	VCHECK(gaz_validate_fragments_request(&rq, &st), NULL);
	ttl.seconds = -2;
	ttl.nanos = 0;
	VCHECK(gaz_validate_fragments_request(&rq, &st), "invalid SignatureTTL (-2s; must be > 0s)");
}

static void test_store_health(void **state)
{
	Protocol__FragmentStoreHealthRequest rq = PROTOCOL__FRAGMENT_STORE_HEALTH_REQUEST__INIT;
	static const struct {
		const char *prefix, *want;
	} cases[] = {
		{"", NULL},
		{"probe/", NULL},
		{"a/b/", NULL},
		{"probe", "CheckDeletePrefix: must end in '/' (probe)"},
		{"../", "CheckDeletePrefix: cannot traverse outside the store (../)"},
		{"../x/", "CheckDeletePrefix: cannot traverse outside the store (../x/)"},
		{"..x/", NULL},
		{"/", "CheckDeletePrefix: invalid length (0; expected 1 <= length <= 512)"},
		{"/a/", "CheckDeletePrefix: cannot begin with '/' (/a)"},
		{"a//", "CheckDeletePrefix: must be a clean path (a/)"},
		{"./", NULL}, /* "." is path.Clean-clean */
	};

	(void)state;
	rq.fragment_store = "s3://bucket/";
	rq.check_delete = 1;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		rq.check_delete_prefix = (char *)cases[i].prefix;
		VCHECK(gaz_validate_store_health_request(&rq, &st), cases[i].want);
	}
	rq.check_delete = 0;
	rq.check_delete_prefix = "probe/";
	VCHECK(gaz_validate_store_health_request(&rq, &st),
	       "CheckDeletePrefix: cannot be set when CheckDelete is false");
	rq.fragment_store = "s3://bucket";
	VCHECK(gaz_validate_store_health_request(&rq, &st),
	       "FragmentStore: path component doesn't end in '/' ()");
}

static void test_responses_with_header(void **state)
{
	Protocol__ListResponse lr = PROTOCOL__LIST_RESPONSE__INIT;
	Protocol__ListResponse__Journal j = PROTOCOL__LIST_RESPONSE__JOURNAL__INIT, *js[1] = {&j};
	Protocol__ApplyResponse ar = PROTOCOL__APPLY_RESPONSE__INIT;
	Protocol__FragmentsResponse fr = PROTOCOL__FRAGMENTS_RESPONSE__INIT;
	Protocol__FragmentsResponse__Fragment fe = PROTOCOL__FRAGMENTS_RESPONSE____FRAGMENT__INIT, *fes[1] = {&fe};
	Protocol__FragmentStoreHealthResponse hr = PROTOCOL__FRAGMENT_STORE_HEALTH_RESPONSE__INIT;
	Protocol__Fragment f = frag_valid();
	struct hdr h;

	(void)state;
	hdr_init(&h);
	ar.header = &h.header;
	VCHECK(gaz_validate_apply_response(&ar, &st), NULL);
	ar.status = 42;
	VCHECK(gaz_validate_apply_response(&ar, &st), "Status: invalid status (42)");
	hr.header = &h.header;
	hr.status = PROTOCOL__STATUS__FRAGMENT_STORE_UNHEALTHY;
	VCHECK(gaz_validate_store_health_response(&hr, &st), NULL);
	hr.header = NULL;
	VCHECK(gaz_validate_store_health_response(&hr, &st),
	       "Header.Route: invalid Primary (0; expected -1 <= Primary < 0)");

	fr.header = &h.header;
	fr.n_fragments = 1;
	fr.fragments = fes;
	fe.spec = &f;
	fe.signed_url = "https://b.s3/x?X-Amz-Signature=1";
	VCHECK(gaz_validate_fragments_response(&fr, &st), NULL);
	fe.signed_url = "%zz";
	VCHECK(gaz_validate_fragments_response(&fr, &st),
	       "Fragments[0].SignedUrl: parse \"%zz\": invalid URL escape \"%zz\"");
	fe.signed_url = "";
	f.compression_codec = 0;
	VCHECK(gaz_validate_fragments_response(&fr, &st),
	       "Fragments[0].Spec.CompressionCodec: invalid value (INVALID)");

	lr.header = &h.header;
	lr.n_journals = 1;
	lr.journals = js;
	h.route.primary = -1;
	j.route = &h.route;
	VCHECK(gaz_validate_list_response(&lr, &st),
	       "Journals[0].Spec.Name: invalid length (0; expected 4 <= length <= 512)");
	VCHECK(gaz_validate_list_journal(&j, &st), "Spec.Name: invalid length (0; expected 4 <= length <= 512)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_process_broker),
		cmocka_unit_test(test_route),
		cmocka_unit_test(test_header),
		cmocka_unit_test(test_fragment),
		cmocka_unit_test(test_read),
		cmocka_unit_test(test_append),
		cmocka_unit_test(test_append_response),
		cmocka_unit_test(test_replicate),
		cmocka_unit_test(test_list),
		cmocka_unit_test(test_apply),
		cmocka_unit_test(test_apply_upsert_revisions),
		cmocka_unit_test(test_fragments_request),
		cmocka_unit_test(test_store_health),
		cmocka_unit_test(test_responses_with_header),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
