/*
 * v1_json.c - fuzz target: the JSON bodies of the broker's /v1/ REST
 * gateway (broker/http_v1.c decode_body, included here: jansson, then
 * lib/common/pbjson.c's gaz_pbjson_decode as grpc-gateway's JSONPb), as a
 * ListRequest or ReadRequest, validated as the broker's handlers do; a
 * decoded request must encode back to JSON (gaz_pbjson_encode) and decode
 * again. The same JSON decoder reads FSMHints and other messages, so the
 * input is also decoded as an ApplyRequest (JournalSpecs, durations,
 * enums, labels).
 *
 * Input: byte 0 picks the message (0 ListRequest, 1 ReadRequest, 2
 * ApplyRequest), the rest is the body.
 */
#include "fuzz.h"

#include <stdio.h>

#include "../../broker/http_v1.c"
#include "protocol/validate.h"

static const ProtobufCMessageDescriptor *const descs[] = {
	&protocol__list_request__descriptor,
	&protocol__read_request__descriptor,
	&protocol__apply_request__descriptor,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const ProtobufCMessageDescriptor *desc;
	ProtobufCMessage *m = NULL, *again = NULL;
	struct gaz_status st = {0};
	json_t *enc;

	if (size < 1)
		return 0;
	desc = descs[data[0] % 3];
	if (decode_body((const char *)data + 1, size - 1, desc, &m, &st))
		return 0;
	if (desc == &protocol__list_request__descriptor)
		gaz_validate_list_request((Protocol__ListRequest *)m, &st);
	else if (desc == &protocol__read_request__descriptor)
		gaz_validate_read_request((Protocol__ReadRequest *)m, &st);
	else
		gaz_validate_apply_request((Protocol__ApplyRequest *)m, &st);
	enc = gaz_pbjson_encode(m, NULL);
	if (!enc || gaz_pbjson_decode(enc, desc, &again, &st)) {
		fprintf(stderr, "a decoded %s does not encode and decode again: %s\n", desc->name,
			st.msg);
		abort();
	}
	json_decref(enc);
	protobuf_c_message_free_unpacked(again, NULL);
	protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}
