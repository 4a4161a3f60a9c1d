/*
 * rpc_shard.c - fuzz target: the consumer.Shard service's requests as a
 * consumer application receives them (consumer/shard_api.c: Stat, List,
 * Apply, GetHints, Unassign) and the List response gazctl's shard client
 * reads (client/lib/client_shards.c): protobuf-c unpack, then the same
 * checks in the handler's order (lib/protocol/shard.c and validate.h).
 *
 * Input: byte 0 picks the message, the rest is its wire encoding.
 */
#include "fuzz.h"

#include <stdio.h>

#include "common/err.h"
#include "consumer.pb-c.h"
#include "protocol/shard.h"
#include "protocol/validate.h"

static int stat_req(const ProtobufCMessage *m, struct gaz_status *st)
{
	const Consumer__StatRequest *r = (const Consumer__StatRequest *)m;

	if ((r->header && gaz_validate_header(r->header, st)) || gaz_validate_shard_id(r->shard, st))
		return GAZ_EINVAL;
	for (size_t i = 0; i < r->n_read_through; i++)
		if (gaz_validate_journal(r->read_through[i]->key, st) || r->read_through[i]->value < 0)
			return GAZ_EINVAL;
	return 0;
}

static int list_req(const ProtobufCMessage *m, struct gaz_status *st)
{
	const Consumer__ListRequest *r = (const Consumer__ListRequest *)m;

	return r->selector ? gaz_validate_selector(r->selector, st) : 0;
}

static int apply_req(const ProtobufCMessage *m, struct gaz_status *st)
{
	return gaz_validate_shard_apply_request((const Consumer__ApplyRequest *)m, st);
}

static int hints_req(const ProtobufCMessage *m, struct gaz_status *st)
{
	const Consumer__GetHintsRequest *r = (const Consumer__GetHintsRequest *)m;
	char msg[600];

	if (gaz_validate_shard_id(r->shard, st)) {
		snprintf(msg, sizeof(msg), "Shard: %s", st->msg);
		return GAZ_EINVAL;
	}
	return 0;
}

static int unassign_req(const ProtobufCMessage *m, struct gaz_status *st)
{
	const Consumer__UnassignRequest *r = (const Consumer__UnassignRequest *)m;
	char msg[600];

	for (size_t i = 0; i < r->n_shards; i++) {
		if (gaz_validate_shard_id(r->shards[i], st)) {
			snprintf(msg, sizeof(msg), "Shards[%zu]: %s", i, st->msg);
			return GAZ_EINVAL;
		}
	}
	return 0;
}

static int list_resp(const ProtobufCMessage *m, struct gaz_status *st)
{
	return gaz_validate_shard_list_response((const Consumer__ListResponse *)m, st);
}

static const struct fuzz_pb_kind kinds[] = {
	{&consumer__stat_request__descriptor, stat_req},
	{&consumer__list_request__descriptor, list_req},
	{&consumer__apply_request__descriptor, apply_req},
	{&consumer__get_hints_request__descriptor, hints_req},
	{&consumer__unassign_request__descriptor, unassign_req},
	{&consumer__list_response__descriptor, list_resp},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fuzz_pb_kinds(kinds, sizeof(kinds) / sizeof(kinds[0]), data, size);
}
