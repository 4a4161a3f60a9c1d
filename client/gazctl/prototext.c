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

/* value writes one value of field f stored at p; false if it is omitted. */
static bool value(FILE *out, const ProtobufCMessageDescriptor *parent,
		  const ProtobufCFieldDescriptor *f, const void *p, int depth, bool repeated)
{
	char buf[32];
	const char *v = buf;

	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		snprintf(buf, sizeof(buf), "%" PRId32, *(const int32_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		snprintf(buf, sizeof(buf), "%" PRIu32, *(const uint32_t *)p);
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		snprintf(buf, sizeof(buf), "%" PRId64, *(const int64_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		snprintf(buf, sizeof(buf), "%" PRIu64, *(const uint64_t *)p);
		break;
	case PROTOBUF_C_TYPE_BOOL:
		v = *(const protobuf_c_boolean *)p ? "true" : "false";
		break;
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(
			f->descriptor, *(const int *)p);
		if (ev)
			v = ev->name;
		else
			snprintf(buf, sizeof(buf), "%d", *(const int *)p);
		break;
	}
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)p;
		if (!repeated && (!s || !*s))
			return false;
		indent(out, depth);
		fprintf(out, "%s: ", f->name);
		text_string(out, (const uint8_t *)(s ? s : ""), s ? strlen(s) : 0);
		fputc('\n', out);
		return true;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		const ProtobufCBinaryData *b = p;
		if (!repeated && b->len == 0)
			return false;
		indent(out, depth);
		fprintf(out, "%s: ", f->name);
		text_string(out, b->data, b->len);
		fputc('\n', out);
		return true;
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		const ProtobufCMessage *m = *(ProtobufCMessage *const *)p;
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
	default:
		return false; /* floats: none in these messages */
	}
	if (!repeated && (!strcmp(v, "0") || !strcmp(v, "false") ||
			  (f->type == PROTOBUF_C_TYPE_ENUM && *(const int *)p == 0)))
		return false;
	indent(out, depth);
	fprintf(out, "%s: %s\n", f->name, v);
	return true;
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
