/*
 * consumer_checkpoint.c - fuzz target: what a consumer shard reads back
 * from its store and from etcd when it starts: a Checkpoint (consumer/
 * checkpoint.c gaz_checkpoint_decode: read-through offsets, producer
 * states, ACK intents), which must encode again (gaz_checkpoint_encode)
 * when it decodes, and a recovery log's FSMHints value, JSON or protobuf
 * (consumer/shard_api.c hints_decode, included here, as GetHints reads
 * the hints keys).
 *
 * Input: byte 0 even = Checkpoint bytes, odd = an FSMHints value.
 */
#include "fuzz.h"

#include <stdio.h>

#include "../../consumer/shard_api.c"
#include "gazette/consumer.h"

static void checkpoint(const uint8_t *p, size_t n)
{
	struct gaz_sequencer_checkpoint seq;
	struct gaz_ack_intent *acks = NULL;
	size_t n_acks = 0;
	struct gaz_status st = {0};
	uint8_t *out = NULL;
	size_t out_len = 0;

	if (gaz_checkpoint_decode(p, n, &seq, &acks, &n_acks, &st))
		return;
	if (gaz_checkpoint_encode(&seq, acks, n_acks, &out, &out_len, &st)) {
		fprintf(stderr, "a decoded checkpoint does not encode: %s\n", st.msg);
		abort();
	}
	free(out);
	gaz_sequencer_checkpoint_release(&seq);
	gaz_ack_intents_free(acks, n_acks);
}

static void hints(const uint8_t *p, size_t n)
{
	Recoverylog__FSMHints *h = NULL;
	struct gaz_status st = {0};

	if (hints_decode(p, n, &h, &st) == 0 && h)
		protobuf_c_message_free_unpacked(&h->base, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1)
		hints(data + 1, size - 1);
	else
		checkpoint(data + 1, size - 1);
	return 0;
}
