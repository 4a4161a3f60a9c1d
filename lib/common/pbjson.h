/*
 * pbjson.h - protobuf messages <-> JSON (jansson) in the protobuf JSON
 * mapping as Gazette's REST gateway speaks it: grpc-gateway v1.16 with
 * gogo/gateway's JSONPb{EmitDefaults: true} (gogo/protobuf v1.3.2 jsonpb).
 *
 * Encoding (gaz_pbjson_encode), field by field in descriptor order:
 *   - names are the lowerCamelCase JSON names protoc derives ("write_head"
 *     -> "writeHead");
 *   - every field is emitted, defaults included (EmitDefaults);
 *   - int64, uint64 and their fixed/sint kin are decimal strings ("12");
 *     32-bit integers, floats and bools are JSON numbers and booleans;
 *   - enums are their value names ("OK"), or the number if unnamed;
 *   - bytes are standard base64 with padding; empty bytes are null (what
 *     Go's encoding/json writes for a nil []byte);
 *   - repeated fields are arrays ([] when empty); an absent message is null,
 *     except for the fields Gazette declares (gogoproto.nullable) = false,
 *     which Go always holds by value and so always emits as an object;
 *   - google.protobuf.Duration is a string of seconds with 0, 3, 6 or 9
 *     fractional digits and an "s" suffix ("1s", "1.500s").
 * Decoding (gaz_pbjson_decode) accepts what gogo jsonpb's Unmarshaler with
 * AllowUnknownFields accepts for these types: lowerCamelCase or original
 * field names, unknown fields ignored, null as the default, integers as
 * JSON integers or as strings holding one (spaces around it allowed, no
 * exponent, no leading zero, as Go reads a quoted number), enums as names
 * or numbers, bytes as standard or URL-safe base64 (padding optional),
 * Durations in Go duration syntax ("1.5s", "1m30s").
 *
 * Depends on protobuf-c and jansson only. Thread-safe: no globals are
 * written.
 */
#ifndef GAZ_COMMON_PBJSON_H
#define GAZ_COMMON_PBJSON_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

#include "common/err.h"

/* gaz_pbjson_encode returns a new JSON object for message `m` (borrowed),
 * or NULL with GAZ_ENOMEM in `st` (may be NULL). The caller owns the result
 * and releases it with json_decref. */
json_t *gaz_pbjson_encode(const ProtobufCMessage *m, struct gaz_status *st);

/* gaz_pbjson_decode builds a message of type `desc` from JSON object `in`
 * (borrowed). On success *out is a message the caller frees with
 * protobuf_c_message_free_unpacked(*out, NULL). Returns 0, GAZ_EINVAL with
 * the offending field and reason in `st` ("field \"offset\": not an
 * integer"), or GAZ_ENOMEM; *out is untouched on error. */
int gaz_pbjson_decode(const json_t *in, const ProtobufCMessageDescriptor *desc,
		      ProtobufCMessage **out, struct gaz_status *st);

/* gaz_pbjson_name writes the JSON name of proto field `name` into `buf`
 * (`cap` bytes, NUL-terminated, truncating): each '_' is dropped and the
 * letter after it upper-cased, as protoc's ToJsonName. Returns `buf`. */
char *gaz_pbjson_name(const char *name, char *buf, size_t cap);

#endif
