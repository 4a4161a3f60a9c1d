/*
 * pbjson.c - protobuf-c messages <-> jansson, walking protobuf-c's
 * descriptors (the mapping is described in pbjson.h).
 *
 * Memory: decoded messages are built with malloc'd parts exactly as
 * protobuf_c_message_unpack(…, NULL allocator) would lay them out, so that
 * protobuf_c_message_free_unpacked(m, NULL) releases them: strings are
 * malloc'd unless they are the field's default pointer, repeated arrays and
 * sub-messages are malloc'd.
 *
 * Must not call grpc or curl (lib/common).
 */
#include "common/pbjson.h"
#include "common/base64.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/duration.h"

#define NAME_MAX_LEN 128

/* Message fields Gazette's protocol.proto marks (gogoproto.nullable) =
 * false: Go holds them by value, so jsonpb emits an object even when the
 * wire had none. "<message full name>.<field name>". */
static const char *const non_nullable[] = {
	"protocol.LabelSelector.include",
	"protocol.LabelSelector.exclude",
	"protocol.JournalSpec.labels",
	"protocol.JournalSpec.fragment",
	"protocol.JournalSpec.Fragment.refresh_interval",
	"protocol.JournalSpec.Fragment.retention",
	"protocol.JournalSpec.Fragment.flush_interval",
	"protocol.ProcessSpec.id",
	"protocol.BrokerSpec.process_spec",
	"protocol.Fragment.sum",
	"protocol.AppendResponse.header",
	"protocol.ListRequest.selector",
	"protocol.ListResponse.header",
	"protocol.ListResponse.Journal.spec",
	"protocol.ListResponse.Journal.route",
	"protocol.ApplyResponse.header",
	"protocol.FragmentsResponse.header",
	"protocol.FragmentsResponse._Fragment.spec",
	"protocol.Header.process_id",
	"protocol.Header.route",
	"protocol.Header.etcd",
	"protocol.FragmentStoreHealthResponse.header",
};

static bool is_non_nullable(const ProtobufCMessageDescriptor *d, const ProtobufCFieldDescriptor *f)
{
	size_t n = strlen(d->name);

	for (size_t i = 0; i < sizeof(non_nullable) / sizeof(non_nullable[0]); i++) {
		const char *s = non_nullable[i];
		if (!strncmp(s, d->name, n) && s[n] == '.' && !strcmp(s + n + 1, f->name))
			return true;
	}
	return false;
}

static bool is_duration(const ProtobufCMessageDescriptor *d)
{
	return d && !strcmp(d->name, "google.protobuf.Duration");
}

char *gaz_pbjson_name(const char *name, char *buf, size_t cap)
{
	size_t o = 0;
	bool up = false;

	if (!cap)
		return buf;
	for (; *name && o + 1 < cap; name++) {
		if (*name == '_') {
			up = true;
			continue;
		}
		buf[o++] = (up && *name >= 'a' && *name <= 'z') ? (char)(*name - 'a' + 'A') : *name;
		up = false;
	}
	buf[o] = '\0';
	return buf;
}

/* ---- encode ----------------------------------------------------------- */

static json_t *encode_msg(const ProtobufCMessage *m);

static json_t *encode_duration(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	int64_t s = 0;
	int32_t ns = 0;
	char buf[48];
	size_t n;

	for (unsigned i = 0; i < d->n_fields; i++) {
		const char *p = (const char *)m + d->fields[i].offset;
		if (!strcmp(d->fields[i].name, "seconds"))
			memcpy(&s, p, sizeof(s));
		else if (!strcmp(d->fields[i].name, "nanos"))
			memcpy(&ns, p, sizeof(ns));
	}
	if (ns < 0 && s == 0)
		snprintf(buf, sizeof(buf), "-0.%09" PRId32, -ns);
	else
		snprintf(buf, sizeof(buf), "%" PRId64 ".%09" PRId32, s, ns < 0 ? -ns : ns);
	/* 9, 6, 3 or 0 fractional digits, as jsonpb writes them */
	n = strlen(buf);
	for (int k = 0; k < 2 && n > 3 && !strcmp(buf + n - 3, "000"); k++)
		buf[n -= 3] = '\0';
	if (n > 4 && !strcmp(buf + n - 4, ".000"))
		buf[n -= 4] = '\0';
	strcat(buf, "s");
	return json_string(buf);
}

static json_t *encode_scalar(const ProtobufCFieldDescriptor *f, const void *p)
{
	char num[32];

	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32: return json_integer(*(const int32_t *)p);
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32: return json_integer(*(const uint32_t *)p);
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		snprintf(num, sizeof(num), "%" PRId64, *(const int64_t *)p);
		return json_string(num);
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		snprintf(num, sizeof(num), "%" PRIu64, *(const uint64_t *)p);
		return json_string(num);
	case PROTOBUF_C_TYPE_FLOAT: return json_real(*(const float *)p);
	case PROTOBUF_C_TYPE_DOUBLE: return json_real(*(const double *)p);
	case PROTOBUF_C_TYPE_BOOL: return json_boolean(*(const protobuf_c_boolean *)p);
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumValue *v =
			protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)p);
		return v ? json_string(v->name) : json_integer(*(const int *)p);
	}
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)p;
		return json_string(s ? s : "");
	}
	case PROTOBUF_C_TYPE_BYTES: {
		const ProtobufCBinaryData *b = p;
		char *s;
		json_t *j;
		if (!b->len)
			return json_null();
		if (!(s = gaz_b64_encode(b->data, b->len, GAZ_B64_STD | GAZ_B64_PAD)))
			return NULL;
		j = json_string(s);
		free(s);
		return j;
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		const ProtobufCMessage *sub = *(ProtobufCMessage *const *)p;
		return sub ? encode_msg(sub) : json_null();
	}
	}
	return NULL;
}

static size_t elt_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64: return 8;
	case PROTOBUF_C_TYPE_DOUBLE: return sizeof(double);
	case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_ENUM: return sizeof(int);
	case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
	case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
	default: return 4;
	}
}

/* An absent non-nullable message field: encode a default instance. */
static json_t *encode_default(const ProtobufCMessageDescriptor *d)
{
	ProtobufCMessage *m = calloc(1, d->sizeof_message);
	json_t *j;

	if (!m)
		return NULL;
	protobuf_c_message_init(d, m);
	j = encode_msg(m);
	free(m);
	return j;
}

static json_t *encode_field(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	const char *p = (const char *)m + f->offset;

	if (f->label == PROTOBUF_C_LABEL_REPEATED) {
		size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
		const char *arr = *(char *const *)p;
		json_t *a = json_array();
		for (size_t i = 0; a && i < n; i++) {
			if (json_array_append_new(a, encode_scalar(f, arr + i * elt_size(f->type)))) {
				json_decref(a);
				a = NULL;
			}
		}
		return a;
	}
	if (f->type == PROTOBUF_C_TYPE_MESSAGE && !*(ProtobufCMessage *const *)p &&
	    is_non_nullable(m->descriptor, f))
		return encode_default(f->descriptor);
	return encode_scalar(f, p);
}

static json_t *encode_msg(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	json_t *o;

	if (is_duration(d))
		return encode_duration(m);
	if (!(o = json_object()))
		return NULL;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		char name[NAME_MAX_LEN];
		json_t *v;

		/* a oneof member is emitted only when it is the one set */
		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    *(const uint32_t *)((const char *)m + f->quantifier_offset) != f->id)
			continue;
		if (!(v = encode_field(m, f)) ||
		    json_object_set_new(o, gaz_pbjson_name(f->name, name, sizeof(name)), v)) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

json_t *gaz_pbjson_encode(const ProtobufCMessage *m, struct gaz_status *st)
{
	json_t *j = encode_msg(m);

	if (!j)
		gaz_status_set(st, GAZ_ENOMEM, "encoding %s as JSON: out of memory",
			       m->descriptor->name);
	return j;
}

/* ---- decode ----------------------------------------------------------- */

static int decode_msg(const json_t *in, const ProtobufCMessageDescriptor *d, ProtobufCMessage **out,
		      struct gaz_status *st);

static int bad(struct gaz_status *st, const ProtobufCFieldDescriptor *f, const char *why)
{
	return gaz_status_set(st, GAZ_EINVAL, "field \"%s\": %s", f->name, why);
}

/* Copies the JSON integer in quoted `s` to `out`: surrounding spaces
 * dropped, then -?(0|[1-9][0-9]*) (no '-' unless `is_signed`). jsonpb
 * parses the raw text between the quotes as a JSON number, so spaces are
 * the only whitespace it can meet there (others are escaped in a string). */
static bool json_number_text(const char *s, char *out, size_t cap, bool is_signed)
{
	size_t n, i = 0;

	s += strspn(s, " ");
	n = strlen(s);
	while (n && s[n - 1] == ' ')
		n--;
	if (n == 0 || n >= cap)
		return false;
	if (s[0] == '-' && (i = 1, !is_signed))
		return false;
	if (i == n || (s[i] == '0' && n > i + 1))
		return false;
	for (size_t k = i; k < n; k++)
		if (s[k] < '0' || s[k] > '9')
			return false;
	memcpy(out, s, n);
	out[n] = '\0';
	return true;
}

/* A JSON integer, or a string holding one, within [lo, hi] (signed) or
 * [0, uhi] (unsigned). */
static int decode_int(const json_t *v, const ProtobufCFieldDescriptor *f, bool is_signed, int64_t lo,
		      int64_t hi, uint64_t uhi, void *out, size_t width, struct gaz_status *st)
{
	int64_t i = 0;
	uint64_t u = 0;

	if (json_is_integer(v)) {
		i = json_integer_value(v);
		if (!is_signed && i < 0)
			return bad(st, f, "out of range");
		u = (uint64_t)i;
	} else if (json_is_string(v)) {
		char num[32];
		if (!json_number_text(json_string_value(v), num, sizeof(num), is_signed))
			return bad(st, f, "not an integer");
		errno = 0;
		if (is_signed)
			i = strtoll(num, NULL, 10);
		else
			u = strtoull(num, NULL, 10);
		if (errno == ERANGE)
			return bad(st, f, "out of range");
	} else {
		return bad(st, f, "not an integer");
	}
	if (is_signed ? (i < lo || i > hi) : u > uhi)
		return bad(st, f, "out of range");
	if (width == 8 && is_signed)
		memcpy(out, &i, 8);
	else if (width == 8)
		memcpy(out, &u, 8);
	else if (is_signed) {
		int32_t x = (int32_t)i;
		memcpy(out, &x, 4);
	} else {
		uint32_t x = (uint32_t)u;
		memcpy(out, &x, 4);
	}
	return 0;
}

static int decode_enum(const json_t *v, const ProtobufCFieldDescriptor *f, int *out,
		       struct gaz_status *st)
{
	const ProtobufCEnumDescriptor *ed = f->descriptor;

	if (json_is_string(v)) {
		const ProtobufCEnumValue *ev =
			protobuf_c_enum_descriptor_get_value_by_name(ed, json_string_value(v));
		if (!ev)
			return gaz_status_set(st, GAZ_EINVAL, "field \"%s\": unknown %s value \"%s\"",
					      f->name, ed->name, json_string_value(v));
		*out = ev->value;
		return 0;
	}
	if (json_is_integer(v) && json_integer_value(v) >= INT32_MIN &&
	    json_integer_value(v) <= INT32_MAX) {
		*out = (int)json_integer_value(v);
		return 0;
	}
	return bad(st, f, "not an enum name or number");
}

static int decode_duration(const json_t *v, const ProtobufCFieldDescriptor *f,
			   ProtobufCMessage **out, struct gaz_status *st)
{
	const ProtobufCMessageDescriptor *d = f->descriptor;
	ProtobufCMessage *m;
	int64_t ns, s;
	int32_t nanos;

	if (!json_is_string(v) || gaz_duration_parse(json_string_value(v), &ns, NULL))
		return bad(st, f, "not a duration");
	if (!(m = calloc(1, d->sizeof_message)))
		return GAZ_ENOMEM;
	protobuf_c_message_init(d, m);
	s = ns / 1000000000;
	nanos = (int32_t)(ns % 1000000000);
	for (unsigned i = 0; i < d->n_fields; i++) {
		char *p = (char *)m + d->fields[i].offset;
		if (!strcmp(d->fields[i].name, "seconds"))
			memcpy(p, &s, sizeof(s));
		else if (!strcmp(d->fields[i].name, "nanos"))
			memcpy(p, &nanos, sizeof(nanos));
	}
	*out = m;
	return 0;
}

/* Decodes one (non-repeated) value of field `f` into `p`. */
static int decode_value(const json_t *v, const ProtobufCFieldDescriptor *f, void *p,
			struct gaz_status *st)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		return decode_int(v, f, true, INT32_MIN, INT32_MAX, 0, p, 4, st);
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		return decode_int(v, f, false, 0, 0, UINT32_MAX, p, 4, st);
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		return decode_int(v, f, true, INT64_MIN, INT64_MAX, 0, p, 8, st);
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return decode_int(v, f, false, 0, 0, UINT64_MAX, p, 8, st);
	case PROTOBUF_C_TYPE_FLOAT:
	case PROTOBUF_C_TYPE_DOUBLE: {
		double x;
		if (!json_is_number(v))
			return bad(st, f, "not a number");
		x = json_number_value(v);
		if (f->type == PROTOBUF_C_TYPE_FLOAT)
			*(float *)p = (float)x;
		else
			*(double *)p = x;
		return 0;
	}
	case PROTOBUF_C_TYPE_BOOL:
		if (!json_is_boolean(v))
			return bad(st, f, "not a boolean");
		*(protobuf_c_boolean *)p = json_is_true(v);
		return 0;
	case PROTOBUF_C_TYPE_ENUM: return decode_enum(v, f, p, st);
	case PROTOBUF_C_TYPE_STRING: {
		char *s;
		if (!json_is_string(v))
			return bad(st, f, "not a string");
		if (!(s = strdup(json_string_value(v))))
			return GAZ_ENOMEM;
		*(char **)p = s;
		return 0;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		ProtobufCBinaryData *bd = p;
		int rc;
		if (!json_is_string(v))
			return bad(st, f, "not a base64 string");
		/* Either alphabet, padding optional, as protojson reads bytes. */
		rc = gaz_b64_decode(json_string_value(v), json_string_length(v), GAZ_B64_STD | GAZ_B64_URL,
				    &bd->data, &bd->len, NULL);
		return rc == GAZ_EINVAL ? bad(st, f, "not valid base64") : rc;
	}
	case PROTOBUF_C_TYPE_MESSAGE:
		if (is_duration(f->descriptor))
			return decode_duration(v, f, p, st);
		return decode_msg(v, f->descriptor, p, st);
	}
	return bad(st, f, "unsupported type");
}

static int decode_repeated(const json_t *v, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
			   struct gaz_status *st)
{
	size_t n = json_array_size(v), sz = elt_size(f->type);
	char *arr;
	int rc = 0;

	if (!json_is_array(v))
		return bad(st, f, "not an array");
	if (!n)
		return 0;
	if (!(arr = calloc(n, sz)))
		return GAZ_ENOMEM;
	/* Owned by the message from here: free_unpacked releases what was
	 * decoded so far if a later element fails. */
	*(char **)((char *)m + f->offset) = arr;
	for (size_t i = 0; i < n && rc == 0; i++) {
		if ((rc = decode_value(json_array_get(v, i), f, arr + i * sz, st)) == 0)
			(*(size_t *)((char *)m + f->quantifier_offset))++;
	}
	return rc;
}

static const ProtobufCFieldDescriptor *find_field(const ProtobufCMessageDescriptor *d, const char *key)
{
	char name[NAME_MAX_LEN];

	for (unsigned i = 0; i < d->n_fields; i++) {
		if (!strcmp(d->fields[i].name, key) ||
		    !strcmp(gaz_pbjson_name(d->fields[i].name, name, sizeof(name)), key))
			return &d->fields[i];
	}
	return NULL;
}

static int decode_field(const json_t *v, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
			struct gaz_status *st)
{
	void *p = (char *)m + f->offset;
	int rc;

	if (json_is_null(v))
		return 0; /* null is the default */
	if (f->label == PROTOBUF_C_LABEL_REPEATED) {
		if (*(size_t *)((char *)m + f->quantifier_offset))
			return bad(st, f, "given twice");
		return decode_repeated(v, m, f, st);
	}
	/* A field given twice (by both names): the last wins, as in Go; drop
	 * what the first one allocated. */
	if (f->type == PROTOBUF_C_TYPE_MESSAGE && *(ProtobufCMessage **)p) {
		protobuf_c_message_free_unpacked(*(ProtobufCMessage **)p, NULL);
		*(ProtobufCMessage **)p = NULL;
	} else if (f->type == PROTOBUF_C_TYPE_STRING && *(char **)p != f->default_value) {
		free(*(char **)p);
		*(char **)p = (char *)f->default_value;
	} else if (f->type == PROTOBUF_C_TYPE_BYTES) {
		free(((ProtobufCBinaryData *)p)->data);
		((ProtobufCBinaryData *)p)->data = NULL;
		((ProtobufCBinaryData *)p)->len = 0;
	}
	if ((rc = decode_value(v, f, p, st)))
		return rc;
	if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset)
		*(protobuf_c_boolean *)((char *)m + f->quantifier_offset) = 1;
	if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
		*(uint32_t *)((char *)m + f->quantifier_offset) = f->id;
	return 0;
}

static int decode_msg(const json_t *in, const ProtobufCMessageDescriptor *d, ProtobufCMessage **out,
		      struct gaz_status *st)
{
	ProtobufCMessage *m;
	const char *key;
	json_t *v;
	int rc = 0;

	if (!json_is_object(in))
		return gaz_status_set(st, GAZ_EINVAL, "%s: not a JSON object", d->name);
	if (!(m = calloc(1, d->sizeof_message)))
		return gaz_status_set(st, GAZ_ENOMEM, "decoding %s: out of memory", d->name);
	protobuf_c_message_init(d, m);
	json_object_foreach((json_t *)in, key, v) {
		const ProtobufCFieldDescriptor *f = find_field(d, key);
		if (f && (rc = decode_field(v, m, f, st)))
			break;
	}
	if (rc) {
		if (rc == GAZ_ENOMEM)
			gaz_status_set(st, GAZ_ENOMEM, "decoding %s: out of memory", d->name);
		protobuf_c_message_free_unpacked(m, NULL);
		return rc;
	}
	*out = m;
	return 0;
}

int gaz_pbjson_decode(const json_t *in, const ProtobufCMessageDescriptor *desc,
		      ProtobufCMessage **out, struct gaz_status *st)
{
	return decode_msg(in, desc, out, st);
}
