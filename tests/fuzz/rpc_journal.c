/*
 * rpc_journal.c - fuzz target: the protocol.Journal service's messages as
 * a broker (requests) and the client library (responses) receive them:
 * protobuf-c unpack, as lib/rpc's gaz_rpc_recv does, then the validation
 * the receiver runs before acting on it (lib/protocol/rpc_check.c, vctx.c,
 * token.c, labels.c, url.c, template.c).
 *
 * Input: byte 0 picks the message (modulo the table), the rest is its wire
 * encoding. Requests repeat the handler's own checks in its order:
 * broker/append_fsm.c (first message names a journal), replicate.c (header and
 * proposal present), list_apply.c (each change, "Changes[i]." context).
 */
#include "fuzz.h"

#include "common/err.h"
#include "protocol.pb-c.h"
#include "protocol/validate.h"

static int read_req(const ProtobufCMessage *m, struct gaz_status *st)
{
	return gaz_validate_read_request((const Protocol__ReadRequest *)m, st);
}

static int append_req(const ProtobufCMessage *m, struct gaz_status *st)
{
	const Protocol__AppendRequest *r = (const Protocol__AppendRequest *)m;

	if (!r->journal[0])
		return gaz_status_set(st, GAZ_EINVAL, "expected first AppendRequest to have a Journal");
	return gaz_validate_append_request(r, st);
}

static int replicate_req(const ProtobufCMessage *m, struct gaz_status *st)
{
	const Protocol__ReplicateRequest *r = (const Protocol__ReplicateRequest *)m;

	if (!r->header || !r->proposal)
		return GAZ_EINVAL;
	return gaz_validate_replicate_request(r, st);
}

static int list_req(const ProtobufCMessage *m, struct gaz_status *st)
{
	return gaz_validate_list_request((const Protocol__ListRequest *)m, st);
}

static int apply_req(const ProtobufCMessage *m, struct gaz_status *st)
{
	const Protocol__ApplyRequest *r = (const Protocol__ApplyRequest *)m;

	for (size_t i = 0; i < r->n_changes; i++) {
		if (gaz_validate_apply_change(r->changes[i], st)) {
			gaz_status_prefix(st, "Changes[%zu].", i);
			return GAZ_EINVAL;
		}
	}
	/* The whole-request check the client runs before sending. */
	return gaz_validate_apply_request(r, st);
}

static int fragments_req(const ProtobufCMessage *m, struct gaz_status *st)
{
	return gaz_validate_fragments_request((const Protocol__FragmentsRequest *)m, st);
}

static int health_req(const ProtobufCMessage *m, struct gaz_status *st)
{
	return gaz_validate_store_health_request((const Protocol__FragmentStoreHealthRequest *)m, st);
}

static int read_resp(const ProtobufCMessage *m, struct gaz_status *st)
{
	return gaz_validate_read_response((const Protocol__ReadResponse *)m, st);
}

static int append_resp(const ProtobufCMessage *m, struct gaz_status *st)
{
	return gaz_validate_append_response((const Protocol__AppendResponse *)m, st);
}

static int replicate_resp(const ProtobufCMessage *m, struct gaz_status *st)
{
	return gaz_validate_replicate_response((const Protocol__ReplicateResponse *)m, st);
}

static int list_resp(const ProtobufCMessage *m, struct gaz_status *st)
{
	const Protocol__ListResponse *r = (const Protocol__ListResponse *)m;
	int rc = gaz_validate_list_response(r, st);

	/* client_list.c checks each journal of a continued page too. */
	for (size_t i = 0; i < r->n_journals; i++)
		rc |= gaz_validate_list_journal(r->journals[i], NULL);
	return rc;
}

static int apply_resp(const ProtobufCMessage *m, struct gaz_status *st)
{
	return gaz_validate_apply_response((const Protocol__ApplyResponse *)m, st);
}

static int fragments_resp(const ProtobufCMessage *m, struct gaz_status *st)
{
	return gaz_validate_fragments_response((const Protocol__FragmentsResponse *)m, st);
}

static int health_resp(const ProtobufCMessage *m, struct gaz_status *st)
{
	return gaz_validate_store_health_response((const Protocol__FragmentStoreHealthResponse *)m,
						  st);
}

static const struct fuzz_pb_kind kinds[] = {
	{&protocol__read_request__descriptor, read_req},
	{&protocol__append_request__descriptor, append_req},
	{&protocol__replicate_request__descriptor, replicate_req},
	{&protocol__list_request__descriptor, list_req},
	{&protocol__apply_request__descriptor, apply_req},
	{&protocol__fragments_request__descriptor, fragments_req},
	{&protocol__fragment_store_health_request__descriptor, health_req},
	{&protocol__read_response__descriptor, read_resp},
	{&protocol__append_response__descriptor, append_resp},
	{&protocol__replicate_response__descriptor, replicate_resp},
	{&protocol__list_response__descriptor, list_resp},
	{&protocol__apply_response__descriptor, apply_resp},
	{&protocol__fragments_response__descriptor, fragments_resp},
	{&protocol__fragment_store_health_response__descriptor, health_resp},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fuzz_pb_kinds(kinds, sizeof(kinds) / sizeof(kinds[0]), data, size);
}
