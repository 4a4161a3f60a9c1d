/* test_consumer_wire.c - the consumer and recoverylog messages encode to
 * the bytes Gazette's own (v0.103.0, gogoproto Marshal) produce for the
 * same values, and Gazette's bytes decode to those values: a Checkpoint
 * (a source with a producer, an ACK intent), FSMHints, and a
 * StatResponse with a header and both offset maps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "consumer.pb-c.h"
#include "recoverylog.pb-c.h"

static size_t unhex(const char *h, uint8_t *out)
{
	size_t n = strlen(h) / 2;
	for (size_t i = 0; i < n; i++)
		sscanf(h + 2 * i, "%2hhx", &out[i]);
	return n;
}

static void expect_bytes(const ProtobufCMessage *m, const char *hex)
{
	uint8_t want[512], got[512];
	size_t n = unhex(hex, want);
	assert_int_equal(protobuf_c_message_get_packed_size(m), n);
	assert_int_equal(protobuf_c_message_pack(m, got), n);
	assert_memory_equal(got, want, n);
}

static const char *CHECKPOINT =
	"0a300a09612f6a6f75726e616c122308d209121e0a06010203040506121409887766554433221110ffffffffffffffffff01"
	"12110a09622f6a6f75726e616c120461636b0a";

static void test_checkpoint(void **state)
{
	(void)state;
	Consumer__Checkpoint__ProducerState ps = CONSUMER__CHECKPOINT__PRODUCER_STATE__INIT;
	ps.last_ack = 0x1122334455667788ULL;
	ps.begin = -1;
	uint8_t id[6] = {1, 2, 3, 4, 5, 6};
	Consumer__Checkpoint__Source__ProducerEntry pe = CONSUMER__CHECKPOINT__SOURCE__PRODUCER_ENTRY__INIT;
	pe.id = (ProtobufCBinaryData){6, id};
	pe.state = &ps;
	Consumer__Checkpoint__Source__ProducerEntry *pes[] = {&pe};
	Consumer__Checkpoint__Source src = CONSUMER__CHECKPOINT__SOURCE__INIT;
	src.read_through = 1234;
	src.n_producers = 1;
	src.producers = pes;
	Consumer__Checkpoint__SourcesEntry se = CONSUMER__CHECKPOINT__SOURCES_ENTRY__INIT;
	se.key = "a/journal";
	se.value = &src;
	Consumer__Checkpoint__SourcesEntry *ses[] = {&se};
	Consumer__Checkpoint__AckIntentsEntry ae = CONSUMER__CHECKPOINT__ACK_INTENTS_ENTRY__INIT;
	ae.key = "b/journal";
	ae.value = (ProtobufCBinaryData){4, (uint8_t *)"ack\n"};
	Consumer__Checkpoint__AckIntentsEntry *aes[] = {&ae};
	Consumer__Checkpoint cp = CONSUMER__CHECKPOINT__INIT;
	cp.n_sources = 1;
	cp.sources = ses;
	cp.n_ack_intents = 1;
	cp.ack_intents = aes;
	expect_bytes(&cp.base, CHECKPOINT);

	uint8_t b[512];
	size_t n = unhex(CHECKPOINT, b);
	Consumer__Checkpoint *d = consumer__checkpoint__unpack(NULL, n, b);
	assert_non_null(d);
	assert_int_equal(d->n_sources, 1);
	assert_string_equal(d->sources[0]->key, "a/journal");
	assert_true(d->sources[0]->value->read_through == 1234);
	assert_true(d->sources[0]->value->producers[0]->state->last_ack == 0x1122334455667788ULL);
	assert_true(d->sources[0]->value->producers[0]->state->begin == -1);
	assert_memory_equal(d->sources[0]->value->producers[0]->id.data, id, 6);
	assert_string_equal(d->ack_intents[0]->key, "b/journal");
	consumer__checkpoint__free_unpacked(d, NULL);
}

static void test_hints(void **state)
{
	(void)state;
	Recoverylog__Segment seg = RECOVERYLOG__SEGMENT__INIT;
	seg.author = 0xdeadbeef;
	seg.first_seq_no = 1;
	seg.first_offset = 10;
	seg.first_checksum = 0x01020304;
	seg.last_seq_no = 9;
	seg.last_offset = 900;
	seg.log = "rec/log";
	Recoverylog__Segment *segs[] = {&seg};
	Recoverylog__FnodeSegments fs = RECOVERYLOG__FNODE_SEGMENTS__INIT;
	fs.fnode = 7;
	fs.n_segments = 1;
	fs.segments = segs;
	Recoverylog__FnodeSegments *fss[] = {&fs};
	Recoverylog__Property prop = RECOVERYLOG__PROPERTY__INIT;
	prop.path = "/IDENTITY";
	prop.content = "x";
	Recoverylog__Property *props[] = {&prop};
	Recoverylog__FSMHints h = RECOVERYLOG__FSMHINTS__INIT;
	h.log = "rec/log";
	h.n_live_nodes = 1;
	h.live_nodes = fss;
	h.n_properties = 1;
	h.properties = props;
	expect_bytes(&h.base,
		     "0a077265632f6c6f6712200807121c0defbeadde1001180a250403020128093084073a077265632f6c6f671a0e0a092f"
		     "4944454e54495459120178");
}

static void test_stat_response(void **state)
{
	(void)state;
	Protocol__ProcessSpec__ID pid = PROTOCOL__PROCESS_SPEC__ID__INIT;
	pid.zone = "z";
	pid.suffix = "s";
	Protocol__Route route = PROTOCOL__ROUTE__INIT;
	route.primary = -1;
	Protocol__Header__Etcd etcd = PROTOCOL__HEADER__ETCD__INIT;
	etcd.cluster_id = 1;
	etcd.member_id = 2;
	etcd.revision = 3;
	etcd.raft_term = 4;
	Protocol__Header hdr = PROTOCOL__HEADER__INIT;
	hdr.process_id = &pid;
	hdr.route = &route;
	hdr.etcd = &etcd;
	Consumer__StatResponse__ReadThroughEntry rt = CONSUMER__STAT_RESPONSE__READ_THROUGH_ENTRY__INIT;
	rt.key = "a/j";
	rt.value = 5;
	Consumer__StatResponse__ReadThroughEntry *rts[] = {&rt};
	Consumer__StatResponse__PublishAtEntry pa = CONSUMER__STAT_RESPONSE__PUBLISH_AT_ENTRY__INIT;
	pa.key = "b/j";
	pa.value = 6;
	Consumer__StatResponse__PublishAtEntry *pas[] = {&pa};
	Consumer__StatResponse r = CONSUMER__STAT_RESPONSE__INIT;
	r.status = CONSUMER__STATUS__NOT_SHARD_PRIMARY;
	r.header = &hdr;
	r.n_read_through = 1;
	r.read_through = rts;
	r.n_publish_at = 1;
	r.publish_at = pas;
	expect_bytes(&r.base, "0803121f0a060a017a120173120b10ffffffffffffffffff011a0808011002180320041a070a03612f6a1005"
			      "22070a03622f6a1006");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_checkpoint),
		cmocka_unit_test(test_hints),
		cmocka_unit_test(test_stat_response),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
