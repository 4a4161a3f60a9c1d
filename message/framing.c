/*
 * framing.c - message framings (JSON lines, Gazette's fixed protobuf
 * framing) and the JSON message type (spec/gazette-facts.md §10.3).
 *
 * Frame scanning is pure: it looks at bytes a reader has buffered and
 * says how long the first frame is, whether more bytes are needed, or how
 * many bytes to skip past corruption. Nothing here reads or allocates
 * except the JSON type and gaz_message_frame.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gazette/message.h"

static const uint8_t FIXED_MAGIC[4] = {0x66, 0x33, 0x93, 0x36};

int gaz_framing_for_content_type(const char *content_type, enum gaz_framing *out, struct gaz_status *st)
{
	const char *ct = content_type ? content_type : "";
	size_t n = strcspn(ct, ";");
	while (n && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
		n--;
	if (n == strlen(GAZ_CONTENT_TYPE_JSON) && strncasecmp(ct, GAZ_CONTENT_TYPE_JSON, n) == 0)
		*out = GAZ_FRAMING_JSON;
	else if (n == strlen(GAZ_CONTENT_TYPE_FIXED) && strncasecmp(ct, GAZ_CONTENT_TYPE_FIXED, n) == 0)
		*out = GAZ_FRAMING_FIXED;
	else
		return gaz_status_set(st, GAZ_EINVAL, "no message framing for content-type \"%.*s\"", (int)n, ct);
	return 0;
}

const char *gaz_framing_content_type(enum gaz_framing f)
{
	return f == GAZ_FRAMING_FIXED ? GAZ_CONTENT_TYPE_FIXED : GAZ_CONTENT_TYPE_JSON;
}

void gaz_fixed_header(uint8_t out[GAZ_FIXED_HEADER_LEN], uint32_t payload_len)
{
	memcpy(out, FIXED_MAGIC, 4);
	out[4] = (uint8_t)payload_len;
	out[5] = (uint8_t)(payload_len >> 8);
	out[6] = (uint8_t)(payload_len >> 16);
	out[7] = (uint8_t)(payload_len >> 24);
}

/* desync: how many bytes of p to skip to reach the next magic after p[0]
 * (keeping 3 trailing bytes that may begin one), as Gazette's reader. */
static size_t desync_skip(const uint8_t *p, size_t n)
{
	if (n < 4)
		return n;
	size_t i = 1;
	for (; i + 4 <= n; i++)
		if (memcmp(p + i, FIXED_MAGIC, 4) == 0)
			return i;
	return n - 3;
}

static int fixed_next(const uint8_t *p, size_t n, bool at_eof, struct gaz_frame *f, struct gaz_status *st)
{
	if (n < GAZ_FIXED_HEADER_LEN) {
		/* As Gazette's reader: wait for a whole header; at the end a lone
		 * newline (which some writers leave) is consumed, else it is a
		 * truncated frame. */
		if (!at_eof)
			return GAZ_EOF;
		f->len = n;
		if (n == 0 || (n == 1 && p[0] == '\n'))
			return GAZ_EOF;
		return gaz_status_set(st, GAZ_EPROTO, "unexpected EOF in a frame header (%zu bytes)", n);
	}
	uint32_t len = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
	if (memcmp(p, FIXED_MAGIC, 4) != 0 || len > GAZ_MESSAGE_MAX_LEN) {
		f->len = desync_skip(p, n);
		return gaz_status_set(st, GAZ_EPROTO, "detected de-synchronization (%zu bytes skipped)", f->len);
	}
	size_t total = GAZ_FIXED_HEADER_LEN + (size_t)len;
	if (n < total) {
		f->len = at_eof ? n : 0;
		if (at_eof)
			return gaz_status_set(st, GAZ_EPROTO, "unexpected EOF reading a frame (size %zu, %zu bytes)",
					      total, n);
		return GAZ_EOF;
	}
	*f = (struct gaz_frame){.len = total, .payload_off = GAZ_FIXED_HEADER_LEN, .payload_len = len};
	return 0;
}

static int json_next(const uint8_t *p, size_t n, bool at_eof, struct gaz_frame *f, struct gaz_status *st)
{
	const uint8_t *nl = n ? memchr(p, '\n', n) : NULL;
	if (nl) {
		size_t len = (size_t)(nl - p) + 1;
		if (len - 1 > GAZ_MESSAGE_MAX_LEN) {
			f->len = len;
			return gaz_status_set(st, GAZ_EPROTO, "JSON line of %zu bytes exceeds %u", len, GAZ_MESSAGE_MAX_LEN);
		}
		*f = (struct gaz_frame){.len = len, .payload_off = 0, .payload_len = len - 1};
		return 0;
	}
	if (n > GAZ_MESSAGE_MAX_LEN) {
		f->len = n;
		return gaz_status_set(st, GAZ_EPROTO, "JSON line of more than %u bytes", GAZ_MESSAGE_MAX_LEN);
	}
	f->len = at_eof ? n : 0;
	if (at_eof && n > 0)
		return gaz_status_set(st, GAZ_EPROTO, "unexpected EOF in a JSON line (%zu bytes without a newline)", n);
	return GAZ_EOF;
}

int gaz_frame_next(enum gaz_framing framing, const uint8_t *p, size_t n, bool at_eof, struct gaz_frame *f,
		   struct gaz_status *st)
{
	*f = (struct gaz_frame){0};
	return framing == GAZ_FRAMING_FIXED ? fixed_next(p, n, at_eof, f, st) : json_next(p, n, at_eof, f, st);
}

int gaz_message_frame(enum gaz_framing framing, const struct gaz_message_type *type, const void *msg,
		      uint8_t **out, size_t *len, struct gaz_status *st)
{
	uint8_t *payload = NULL;
	size_t n = 0;
	int rc = type->encode(msg, &payload, &n, st, type->arg);
	if (rc != 0)
		return rc;
	if (n > GAZ_MESSAGE_MAX_LEN) {
		free(payload);
		return gaz_status_set(st, GAZ_ERANGE, "message of %zu bytes exceeds %u", n, GAZ_MESSAGE_MAX_LEN);
	}
	size_t head = framing == GAZ_FRAMING_FIXED ? GAZ_FIXED_HEADER_LEN : 0;
	uint8_t *b = malloc(head + n + 1);
	if (!b) {
		free(payload);
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory framing a message");
	}
	if (head)
		gaz_fixed_header(b, (uint32_t)n);
	memcpy(b + head, payload, n);
	free(payload);
	if (framing == GAZ_FRAMING_JSON)
		b[n++] = '\n';
	*out = b;
	*len = head + n;
	return 0;
}

/* ---- JSON messages ---------------------------------------------------- */

/* pointer_token copies the next reference token of an RFC 6901 pointer
 * (after its '/') into tok, unescaping ~1 and ~0; returns the rest of
 * the pointer, or NULL when the token is malformed or too long. */
static const char *pointer_token(const char *ptr, char *tok, size_t cap)
{
	size_t n = 0;
	for (ptr++; *ptr && *ptr != '/'; ptr++) {
		char c = *ptr;
		if (c == '~') {
			if (ptr[1] != '0' && ptr[1] != '1')
				return NULL;
			c = *++ptr == '1' ? '/' : '~';
		}
		if (n + 1 >= cap)
			return NULL;
		tok[n++] = c;
	}
	tok[n] = '\0';
	return ptr;
}

/* pointer_get: the value at ptr in doc (borrowed), or NULL. */
static json_t *pointer_get(json_t *doc, const char *ptr)
{
	char tok[256];
	while (doc && *ptr == '/') {
		if (!(ptr = pointer_token(ptr, tok, sizeof tok)))
			return NULL;
		if (json_is_object(doc)) {
			doc = json_object_get(doc, tok);
		} else if (json_is_array(doc)) {
			char *end;
			unsigned long i = strtoul(tok, &end, 10);
			doc = *tok && !*end ? json_array_get(doc, i) : NULL;
		} else {
			return NULL;
		}
	}
	return *ptr ? NULL : doc;
}

/* pointer_set sets value (a new reference, consumed) at ptr in the object
 * doc, making objects on the way. 0, GAZ_EINVAL (a step is not an object,
 * or the pointer is malformed), GAZ_ENOMEM. */
static int pointer_set(json_t *doc, const char *ptr, json_t *value)
{
	char tok[256];
	if (*ptr != '/' || !json_is_object(doc))
		goto bad;
	for (;;) {
		if (!(ptr = pointer_token(ptr, tok, sizeof tok)))
			goto bad;
		if (!*ptr)
			return json_object_set_new(doc, tok, value) == 0 ? 0 : GAZ_ENOMEM;
		json_t *next = json_object_get(doc, tok);
		if (!next) {
			if (!(next = json_object()) || json_object_set_new(doc, tok, next) != 0) {
				json_decref(value);
				return GAZ_ENOMEM;
			}
		} else if (!json_is_object(next)) {
			goto bad;
		}
		doc = next;
	}
bad:
	json_decref(value);
	return GAZ_EINVAL;
}

static const char *json_pointer_of(void *arg)
{
	return arg ? arg : GAZ_JSON_UUID_POINTER;
}

static int json_decode(const uint8_t *payload, size_t len, void **msg, struct gaz_status *st, void *arg)
{
	(void)arg;
	json_error_t err;
	json_t *doc = json_loadb((const char *)payload, len, JSON_DECODE_ANY, &err);
	/* jansson's integers are int64; a larger one (Go's uint64 sums, say)
	 * is read as a double rather than losing the whole message. */
	if (!doc && json_error_code(&err) == json_error_numeric_overflow)
		doc = json_loadb((const char *)payload, len, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, &err);
	if (!doc)
		return gaz_status_set(st, GAZ_EINVAL, "invalid JSON message: %s (column %d)", err.text, err.column);
	*msg = doc;
	return 0;
}

static int json_encode(const void *msg, uint8_t **out, size_t *len, struct gaz_status *st, void *arg)
{
	(void)arg;
	char *s = json_dumps(msg, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!s)
		return gaz_status_set(st, GAZ_ENOMEM, "encoding a JSON message failed");
	*out = (uint8_t *)s;
	*len = strlen(s);
	return 0;
}

static int json_get_uuid(const void *msg, gaz_uuid *out, void *arg)
{
	json_t *v = pointer_get((json_t *)msg, json_pointer_of(arg));
	if (!json_is_string(v))
		return GAZ_ENOTFOUND;
	return gaz_uuid_parse(json_string_value(v), json_string_length(v), out, NULL) == 0 ? 0 : GAZ_ENOTFOUND;
}

static int json_set_uuid(void *msg, const gaz_uuid *u, void *arg)
{
	char text[GAZ_UUID_STR_LEN + 1];
	gaz_uuid_format(u, text);
	json_t *v = json_string(text);
	return v ? pointer_set(msg, json_pointer_of(arg), v) : GAZ_ENOMEM;
}

static void *json_new_ack(const char *journal, void *arg)
{
	(void)journal;
	(void)arg;
	return json_object();
}

static void json_free(void *msg, void *arg)
{
	(void)arg;
	json_decref(msg);
}

struct gaz_message_type gaz_json_message_type(const char *uuid_pointer)
{
	return (struct gaz_message_type){
		.decode = json_decode,
		.encode = json_encode,
		.get_uuid = json_get_uuid,
		.set_uuid = json_set_uuid,
		.new_ack = json_new_ack,
		.free_msg = json_free,
		.arg = (void *)uuid_pointer,
	};
}
