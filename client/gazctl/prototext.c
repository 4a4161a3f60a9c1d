/*
 * prototext.c - protobuf text format as gogo/protobuf's proto.MarshalText
 * writes it (`journals apply --dry-run` prints the ApplyRequest so):
 *
 *   changes: <
 *     expect_mod_revision: -1
 *     upsert: <
 *       name: "a/journal"
 *       ...
 *     >
 *   >
 *
 * Fields in declaration (= field number) order, two spaces of indent per
 * level, messages in "< >", proto3 zero scalars omitted, enums by name,
 * strings with \n \r \t \" \\ escapes and other bytes outside printable
 * ASCII as three octal digits. Gogo prints non-nullable message fields
 * even when empty (JournalSpec.labels and .fragment here) and omits zero
 * time.Duration fields.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "client/gazctl/gazctl.h"
#include "google/protobuf/duration.pb-c.h"

static void indent(FILE *out, int depth)
{
	for (int i = 0; i < depth; i++)
		fputs("  ", out);
}

static void text_string(FILE *out, const uint8_t *s, size_t n)
{
	fputc('"', out);
	for (size_t i = 0; i < n; i++) {
		uint8_t c = s[i];
		if (c == '\n' || c == '\r' || c == '\t')
			fprintf(out, "\\%c", c == '\n' ? 'n' : c == '\r' ? 'r' : 't');
		else if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c >= 0x20 && c < 0x7f)
			fputc(c, out);
		else
			fprintf(out, "\\%03o", c);
	}
	fputc('"', out);
}

static void message(FILE *out, const ProtobufCMessage *m, int depth);

/* duration_zero: a NULL or zero google.protobuf.Duration. */
static bool duration_zero(const ProtobufCMessage *m)
{
	const Google__Protobuf__Duration *d = (const Google__Protobuf__Duration *)m;

	return !d || (d->seconds == 0 && d->nanos == 0);
}

/* non_nullable: gogo always prints these message fields. */
static bool non_nullable(const ProtobufCMessageDescriptor *parent, const ProtobufCFieldDescriptor *f)
{
	return parent == &protocol__journal_spec__descriptor &&
	       (!strcmp(f->name, "labels") || !strcmp(f->name, "fragment"));
}

/* scalar formats a numeric, bool or enum value into buf; returns the text
 * and sets *zero when it is the type's zero value. */
static const char *scalar(const ProtobufCFieldDescriptor *f, const void *p, char *buf, size_t cap,
			  bool *zero)
{
	const ProtobufCEnumValue *ev;

	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		*zero = *(const int32_t *)p == 0;
		snprintf(buf, cap, "%" PRId32, *(const int32_t *)p);
		return buf;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		*zero = *(const uint32_t *)p == 0;
		snprintf(buf, cap, "%" PRIu32, *(const uint32_t *)p);
		return buf;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		*zero = *(const int64_t *)p == 0;
		snprintf(buf, cap, "%" PRId64, *(const int64_t *)p);
		return buf;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		*zero = *(const uint64_t *)p == 0;
		snprintf(buf, cap, "%" PRIu64, *(const uint64_t *)p);
		return buf;
	case PROTOBUF_C_TYPE_BOOL:
		*zero = !*(const protobuf_c_boolean *)p;
		return *zero ? "false" : "true";
	case PROTOBUF_C_TYPE_ENUM:
		*zero = *(const int *)p == 0;
		if ((ev = protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)p)))
			return ev->name;
		snprintf(buf, cap, "%d", *(const int *)p);
		return buf;
	default:
		*zero = true; /* floats: none in these messages */
		return "";
	}
}

/* text_field writes `name: "<bytes>"` unless empty and not repeated. */
static bool text_field(FILE *out, const ProtobufCFieldDescriptor *f, const uint8_t *s, size_t n,
		       int depth, bool repeated)
{
	if (!repeated && n == 0)
		return false;
	indent(out, depth);
	fprintf(out, "%s: ", f->name);
	text_string(out, s ? s : (const uint8_t *)"", n);
	fputc('\n', out);
	return true;
}

/* message_field writes `name: < ... >`, or nothing when gogo omits it. */
static bool message_field(FILE *out, const ProtobufCMessageDescriptor *parent,
			  const ProtobufCFieldDescriptor *f, const ProtobufCMessage *m, int depth,
			  bool repeated)
{
	if (f->descriptor == &google__protobuf__duration__descriptor && duration_zero(m))
		return false;
	if (!m && !repeated && !non_nullable(parent, f))
		return false;
	indent(out, depth);
	fprintf(out, "%s: <\n", f->name);
	if (m)
		message(out, m, depth + 1);
	indent(out, depth);
	fputs(">\n", out);
	return true;
}

/* value writes one value of field f stored at p; false if it is omitted. */
static bool value(FILE *out, const ProtobufCMessageDescriptor *parent,
		  const ProtobufCFieldDescriptor *f, const void *p, int depth, bool repeated)
{
	char buf[32];
	const char *v, *s;
	bool zero;

	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING:
		s = *(char *const *)p;
		return text_field(out, f, (const uint8_t *)s, s ? strlen(s) : 0, depth, repeated);
	case PROTOBUF_C_TYPE_BYTES:
		return text_field(out, f, ((const ProtobufCBinaryData *)p)->data,
				  ((const ProtobufCBinaryData *)p)->len, depth, repeated);
	case PROTOBUF_C_TYPE_MESSAGE:
		return message_field(out, parent, f, *(ProtobufCMessage *const *)p, depth, repeated);
	default:
		v = scalar(f, p, buf, sizeof(buf), &zero);
		if (!repeated && zero)
			return false;
		indent(out, depth);
		fprintf(out, "%s: %s\n", f->name, v);
		return true;
	}
}

/* elem_size: bytes of one stored element of field f. */
static size_t elem_size(const ProtobufCFieldDescriptor *f)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	default:
		return 4;
	}
}

static void message(FILE *out, const ProtobufCMessage *m, int depth)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *base = (const char *)m + f->offset;

		if (f->label != PROTOBUF_C_LABEL_REPEATED) {
			value(out, d, f, base, depth, false);
			continue;
		}
		size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
		const char *arr = *(char *const *)base;
		for (size_t k = 0; k < n; k++)
			value(out, d, f, arr + k * elem_size(f), depth, true);
	}
}

void gazctl_proto_text(FILE *out, const ProtobufCMessage *m)
{
	message(out, m, 0);
}
