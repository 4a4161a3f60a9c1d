/*
 * stream_sum.h - stream-sum's messages, shared by its programs (the
 * chunker, and a summer): Chunk and Sum with the JSON Gazette's Go
 * encoding/json writes for its structs (examples/stream-sum/
 * stream_sum.go at v0.103.0), their message types, the chunks mapping,
 * and the CRC-64 a Sum folds its Chunks into.
 *
 * Header-only (static inline), because the Makefile makes every .c of
 * examples/<app>/ a program of its own.
 *
 * The JSON, byte for byte as Go writes it (one line per message; the
 * framing adds the '\n'):
 *
 *   Chunk  {"UUID":"<8-4-4-4-12>","ID":[b0,...,b15],"SeqNo":<int>,"Data":<base64>|null}
 *   Sum    {"UUID":"<8-4-4-4-12>","ID":[b0,...,b15],"SeqNo":<int>,"Value":<uint64>}
 *
 * UUID is message.UUID (github.com/google/uuid: its canonical text, the
 * zero UUID when unset); ID is a [16]byte, which Go writes as an array
 * of 16 numbers; SeqNo is a Go int (int64 here); Data is a []byte:
 * standard padded base64, null when nil (the last chunk of a stream has
 * none); Value is a uint64.
 *
 * Why Value is parsed by hand. A CRC-64 is as often above INT64_MAX as
 * below it, and jansson holds integers as int64: a document with a
 * larger one fails with a numeric overflow, or with
 * JSON_DECODE_INT_AS_REAL reads as a double, exact only to 2^53. So the
 * decoder splits the top-level object into its members itself (strings,
 * nesting and commas; a few dozen lines), hands every member's key and
 * value but Value's to jansson, which parses and validates them exactly,
 * and reads Value's digits itself (0 | [1-9][0-9]*, at most
 * 18446744073709551615, as Go accepts into a uint64). Encoding needs no
 * parser: it is a fixed layout, written with snprintf.
 *
 * Decoding follows Go's Unmarshal where an input could differ: keys
 * match case-insensitively ("seqno"), unknown keys are ignored, the last
 * of repeated keys wins, null leaves a field as it is, an ID array
 * shorter than 16 leaves the rest zero and a longer one is cut, and a
 * number of the wrong kind (1.0 or 1e3 for SeqNo, -1 for Value, 256 in
 * ID) fails the message. One departure, the message layer's rule: a
 * message whose UUID is absent or null has none (get_uuid says
 * GAZ_ENOTFOUND), and readers skip it with a warning, where Go would
 * read it as the zero UUID.
 *
 * Thread safety: everything is pure except the CRC table, built once
 * (pthread_once) by the first stream_sum_crc64_update.
 */
#ifndef GAZ_EXAMPLES_STREAM_SUM_H
#define GAZ_EXAMPLES_STREAM_SUM_H

#include <inttypes.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/err.h"
#include "gazette/message.h"

/* Where the summer writes each stream's final sum (Gazette's
 * FinalSumsJournal). */
#define STREAM_SUM_FINAL_SUMS_JOURNAL "examples/stream-sum/sums"
/* The chunk journals: every journal so labelled (newChunkMapping). */
#define STREAM_SUM_CHUNKS_SELECTOR "app.gazette.dev/message-type=stream_sum.Chunk"
#define STREAM_SUM_ID_LEN 16
/* Bytes of data in each chunk but a stream's last (Gazette's generate). */
#define STREAM_SUM_CHUNK_DATA_LEN 32

/* An ordered slice of a stream's content (Gazette's Chunk). */
struct stream_sum_chunk {
	gaz_uuid uuid;
	bool has_uuid;                  /* a UUID was set or decoded */
	uint8_t id[STREAM_SUM_ID_LEN];  /* the stream's unique id */
	int64_t seq_no;                 /* 1, 2, ... along the stream */
	uint8_t *data;                  /* malloc'd, owned by the chunk; NULL
	                                 * is Go's nil (written as null) */
	size_t data_len;                /* empty: the stream's last chunk */
};

/* A partial or final CRC-64 of a stream (Gazette's Sum). */
struct stream_sum_sum {
	gaz_uuid uuid;
	bool has_uuid;
	uint8_t id[STREAM_SUM_ID_LEN];
	int64_t seq_no; /* SeqNo of the last chunk summed */
	uint64_t value; /* CRC-64 ECMA of the data through seq_no */
};

/* ---- CRC-64 ------------------------------------------------------------- */

/* Go's hash/crc64 ECMA: the ECMA-182 polynomial, reflected
 * (0xC96C5795D7870F42), LSB first; an update complements the running
 * value before and after (crc64.Update), so updates chain and 0 is the
 * sum of nothing. CRC-64/XZ of "123456789" is 0x995dc9bbdf1939fa. */
#define STREAM_SUM_CRC64_ECMA 0xC96C5795D7870F42ull

static uint64_t stream_sum__crc_table[256];
static pthread_once_t stream_sum__crc_once = PTHREAD_ONCE_INIT;

static inline void stream_sum__crc_init(void)
{
	for (unsigned i = 0; i < 256; i++) {
		uint64_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ STREAM_SUM_CRC64_ECMA : c >> 1;
		stream_sum__crc_table[i] = c;
	}
}

/* stream_sum_crc64_update folds n bytes at p into crc. */
static inline uint64_t stream_sum_crc64_update(uint64_t crc, const uint8_t *p, size_t n)
{
	pthread_once(&stream_sum__crc_once, stream_sum__crc_init);
	crc = ~crc;
	for (size_t i = 0; i < n; i++)
		crc = stream_sum__crc_table[(uint8_t)crc ^ p[i]] ^ (crc >> 8);
	return ~crc;
}

/* stream_sum_update folds chunk c into sum s (Gazette's Sum.Update):
 * c must be of s's stream and its next SeqNo. Sets *done when c is the
 * stream's last chunk (no data). Returns 0, or GAZ_EINVAL with the
 * reason (s unchanged). */
static inline int stream_sum_update(struct stream_sum_sum *s, const struct stream_sum_chunk *c, bool *done,
				    struct gaz_status *st)
{
	if (memcmp(c->id, s->id, STREAM_SUM_ID_LEN) != 0)
		return gaz_status_set(st, GAZ_EINVAL, "invalid chunk ID (not the sum's stream)");
	if (c->seq_no != s->seq_no + 1)
		return gaz_status_set(st, GAZ_EINVAL, "invalid chunk SeqNo %lld (sum's SeqNo %lld)",
				      (long long)c->seq_no, (long long)s->seq_no);
	s->seq_no = c->seq_no;
	s->value = stream_sum_crc64_update(s->value, c->data, c->data_len);
	*done = c->data_len == 0;
	return 0;
}

/* stream_sum_id_hex writes id as 32 lowercase hex digits and a NUL (Go's
 * %x of a StreamID, as its logs show it). */
static inline void stream_sum_id_hex(const uint8_t id[STREAM_SUM_ID_LEN], char out[2 * STREAM_SUM_ID_LEN + 1])
{
	for (int i = 0; i < STREAM_SUM_ID_LEN; i++)
		snprintf(out + 2 * i, 3, "%02x", id[i]);
}

/* ---- encoding ------------------------------------------------------------ */

/* stream_sum__head writes {"UUID":"...","ID":[...],"SeqNo":n, into b
 * (cap bytes, at least 200); returns its length. */
static inline size_t stream_sum__head(char *b, size_t cap, const gaz_uuid *u, const uint8_t *id, int64_t seq_no)
{
	char text[GAZ_UUID_STR_LEN + 1];
	gaz_uuid zero = {{0}};
	gaz_uuid_format(u ? u : &zero, text);
	size_t n = (size_t)snprintf(b, cap, "{\"UUID\":\"%s\",\"ID\":[", text);
	for (int i = 0; i < STREAM_SUM_ID_LEN; i++)
		n += (size_t)snprintf(b + n, cap - n, i ? ",%u" : "%u", id[i]);
	n += (size_t)snprintf(b + n, cap - n, "],\"SeqNo\":%lld,", (long long)seq_no);
	return n;
}

#define STREAM_SUM__HEAD_CAP 200 /* 47 + 16 * 4 + 30, rounded up */

/* stream_sum_chunk_encode writes c's JSON (no '\n') into a new buffer:
 * *out malloc'd, owned by the caller, *len bytes. 0 or GAZ_ENOMEM. */
static inline int stream_sum_chunk_encode(const struct stream_sum_chunk *c, uint8_t **out, size_t *len,
					  struct gaz_status *st)
{
	size_t cap = STREAM_SUM__HEAD_CAP + 4 * ((c->data_len + 2) / 3) + 16;
	char *b = malloc(cap);
	if (!b)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory encoding a chunk");
	size_t n = stream_sum__head(b, cap, c->has_uuid ? &c->uuid : NULL, c->id, c->seq_no);
	if (!c->data) {
		n += (size_t)snprintf(b + n, cap - n, "\"Data\":null}");
	} else {
		memcpy(b + n, "\"Data\":\"", 8);
		n += 8;
		n += (size_t)EVP_EncodeBlock((unsigned char *)b + n, c->data, (int)c->data_len);
		memcpy(b + n, "\"}", 2);
		n += 2;
	}
	*out = (uint8_t *)b;
	*len = n;
	return 0;
}

/* stream_sum_sum_encode writes s's JSON as stream_sum_chunk_encode. */
static inline int stream_sum_sum_encode(const struct stream_sum_sum *s, uint8_t **out, size_t *len,
					struct gaz_status *st)
{
	size_t cap = STREAM_SUM__HEAD_CAP + 32;
	char *b = malloc(cap);
	if (!b)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory encoding a sum");
	size_t n = stream_sum__head(b, cap, s->has_uuid ? &s->uuid : NULL, s->id, s->seq_no);
	n += (size_t)snprintf(b + n, cap - n, "\"Value\":%" PRIu64 "}", s->value);
	*out = (uint8_t *)b;
	*len = n;
	return 0;
}

/* ---- decoding ------------------------------------------------------------ */

/* One member of the top-level object: byte spans into the payload. */
struct stream_sum__member {
	size_t key_off, key_len; /* the key's JSON string, quotes included */
	size_t val_off, val_len; /* its value's JSON text */
};

static inline size_t stream_sum__ws(const uint8_t *p, size_t n, size_t i)
{
	while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
		i++;
	return i;
}

/* The end of the JSON string at p[i] == '"' (after its closing quote),
 * or 0 when it does not close. jansson validates its escapes later. */
static inline size_t stream_sum__string_end(const uint8_t *p, size_t n, size_t i)
{
	for (i++; i < n; i++) {
		if (p[i] == '"')
			return i + 1;
		if (p[i] == '\\')
			i++;
	}
	return 0;
}

/* The end of the JSON value starting at p[i], or 0: strings to their
 * quote, arrays and objects to their matching bracket (by depth; jansson
 * rejects a span whose brackets do not pair), anything else to the next
 * delimiter. */
static inline size_t stream_sum__value_end(const uint8_t *p, size_t n, size_t i)
{
	if (i >= n)
		return 0;
	if (p[i] == '"')
		return stream_sum__string_end(p, n, i);
	if (p[i] == '{' || p[i] == '[') {
		int depth = 0;
		while (i < n) {
			if (p[i] == '"') {
				if (!(i = stream_sum__string_end(p, n, i)))
					return 0;
				continue;
			}
			if (p[i] == '{' || p[i] == '[')
				depth++;
			else if ((p[i] == '}' || p[i] == ']') && --depth == 0)
				return i + 1;
			i++;
		}
		return 0;
	}
	size_t b = i;
	while (i < n && !strchr(",}] \t\r\n", p[i]) && p[i])
		i++;
	return i > b ? i : 0;
}

/* A member's handler: 0, or an error with the reason in st. */
typedef int (*stream_sum__member_fn)(const uint8_t *p, const struct stream_sum__member *m, void *arg,
				     struct gaz_status *st);

/* stream_sum__members splits a top-level JSON object into its members
 * and calls fn on each, in order. Returns 0, fn's error, or GAZ_EINVAL
 * with the reason in st when p[0..n) is not one object. */
static inline int stream_sum__members(const uint8_t *p, size_t n, stream_sum__member_fn fn, void *arg,
				      struct gaz_status *st)
{
	size_t i = stream_sum__ws(p, n, 0);
	if (i >= n || p[i] != '{')
		goto bad;
	i = stream_sum__ws(p, n, i + 1);
	if (i < n && p[i] == '}') {
		i++;
		goto end;
	}
	for (;;) {
		struct stream_sum__member m;
		size_t e;
		if (i >= n || p[i] != '"' || !(e = stream_sum__string_end(p, n, i)))
			goto bad;
		m.key_off = i;
		m.key_len = e - i;
		i = stream_sum__ws(p, n, e);
		if (i >= n || p[i] != ':')
			goto bad;
		i = stream_sum__ws(p, n, i + 1);
		if (!(e = stream_sum__value_end(p, n, i)))
			goto bad;
		m.val_off = i;
		m.val_len = e - i;
		int rc = fn(p, &m, arg, st);
		if (rc)
			return rc;
		i = stream_sum__ws(p, n, e);
		if (i < n && p[i] == ',') {
			i = stream_sum__ws(p, n, i + 1);
			continue;
		}
		if (i < n && p[i] == '}') {
			i++;
			break;
		}
		goto bad;
	}
end:
	if (stream_sum__ws(p, n, i) == n)
		return 0;
bad:
	return gaz_status_set(st, GAZ_EINVAL, "invalid JSON message (not one object, at byte %zu)", i);
}

/* Go's parse of a JSON number into a uint64: digits only (JSON forbids
 * leading zeros), at most UINT64_MAX. 0 or GAZ_EINVAL. */
static inline int stream_sum__uint64(const uint8_t *p, size_t n, uint64_t *out, struct gaz_status *st)
{
	uint64_t v = 0;
	bool ok = n > 0 && n <= 20 && !(n > 1 && p[0] == '0');
	for (size_t i = 0; ok && i < n; i++) {
		unsigned d = (unsigned)p[i] - '0';
		if (d > 9 || v > (UINT64_MAX - d) / 10)
			ok = false;
		else
			v = v * 10 + d;
	}
	if (!ok)
		return gaz_status_set(st, GAZ_EINVAL, "invalid message: Value %.*s is not a uint64",
				      (int)(n < 40 ? n : 40), (const char *)p);
	*out = v;
	return 0;
}

/* A member's key or value, parsed by jansson (a new reference), exactly
 * unless flags has JSON_DECODE_INT_AS_REAL. */
static inline json_t *stream_sum__load(const uint8_t *p, size_t off, size_t len, size_t flags,
				       struct gaz_status *st)
{
	json_error_t err;
	json_t *v = json_loadb((const char *)p + off, len, JSON_DECODE_ANY | flags, &err);
	if (!v)
		gaz_status_set(st, GAZ_EINVAL, "invalid JSON message: %s (at byte %zu)", err.text,
			       off + (size_t)(err.position > 0 ? err.position : 0));
	return v;
}

/* Standard padded base64 (Go's base64.StdEncoding, which also skips
 * '\r' and '\n'). *out malloc'd (never NULL on success, even when
 * empty). 0, GAZ_EINVAL, GAZ_ENOMEM. */
static inline int stream_sum__base64(const char *s, size_t n, uint8_t **out, size_t *out_len, struct gaz_status *st)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	uint8_t *b = malloc(n / 4 * 3 + 3);
	if (!b)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory decoding Data");
	size_t o = 0, q = 0, pad = 0;
	uint32_t acc = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '\r' || c == '\n')
			continue;
		const char *at = c && c != '=' ? strchr(abc, c) : NULL;
		if (c == '=' && q >= 2) {
			pad++;
		} else if (!at || pad) {
			free(b);
			return gaz_status_set(st, GAZ_EINVAL, "invalid message: illegal base64 data in Data");
		}
		acc = acc << 6 | (uint32_t)(at ? at - abc : 0);
		if (++q == 4) {
			b[o++] = (uint8_t)(acc >> 16);
			if (pad < 2)
				b[o++] = (uint8_t)(acc >> 8);
			if (pad < 1)
				b[o++] = (uint8_t)acc;
			q = 0;
			acc = 0;
			if (pad)
				pad = 3; /* nothing may follow the padded group */
		}
	}
	if (q != 0) {
		free(b);
		return gaz_status_set(st, GAZ_EINVAL, "invalid message: illegal base64 data in Data");
	}
	*out = b;
	*out_len = o;
	return 0;
}

/* The fields of either message; `data` only a Chunk's, `value` only a
 * Sum's (the other is ignored as Go ignores unknown keys). */
struct stream_sum__fields {
	gaz_uuid *uuid;
	bool *has_uuid;
	uint8_t *id;
	int64_t *seq_no;
	uint8_t **data; /* NULL: no Data field */
	size_t *data_len;
	uint64_t *value; /* NULL: no Value field */
};

static inline int stream_sum__field_id(json_t *v, uint8_t *id, struct gaz_status *st)
{
	if (json_is_null(v))
		return 0;
	if (!json_is_array(v))
		return gaz_status_set(st, GAZ_EINVAL, "invalid message: ID is not an array");
	uint8_t b[STREAM_SUM_ID_LEN] = {0};
	for (size_t i = 0; i < STREAM_SUM_ID_LEN && i < json_array_size(v); i++) {
		json_t *e = json_array_get(v, i);
		if (json_is_null(e))
			continue;
		if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > 255)
			return gaz_status_set(st, GAZ_EINVAL, "invalid message: ID[%zu] is not a byte", i);
		b[i] = (uint8_t)json_integer_value(e);
	}
	memcpy(id, b, sizeof b);
	return 0;
}

static inline int stream_sum__field(const struct stream_sum__fields *f, const char *key, const uint8_t *p,
				    const struct stream_sum__member *m, struct gaz_status *st)
{
	/* Exact matches and case-insensitive ones are the same field: Go
	 * prefers an exact match only among fields that fold alike. */
	if (f->value && !strcasecmp(key, "Value")) {
		if (m->val_len == 4 && !memcmp(p + m->val_off, "null", 4))
			return 0;
		return stream_sum__uint64(p + m->val_off, m->val_len, f->value, st);
	}
	bool known = !strcasecmp(key, "UUID") || !strcasecmp(key, "ID") || !strcasecmp(key, "SeqNo") ||
		     (f->data && !strcasecmp(key, "Data"));
	/* An unknown key's value is only validated (a large integer there is
	 * no error, so it is read as a double), then ignored. */
	json_t *v = stream_sum__load(p, m->val_off, m->val_len, known ? 0 : JSON_DECODE_INT_AS_REAL, st);
	if (!v)
		return GAZ_EINVAL;
	if (!known) {
		json_decref(v);
		return 0;
	}
	int rc = 0;
	if (json_is_null(v)) {
		if (f->data && !strcasecmp(key, "Data")) {
			free(*f->data);
			*f->data = NULL;
			*f->data_len = 0;
		}
	} else if (!strcasecmp(key, "UUID")) {
		if (!json_is_string(v) || gaz_uuid_parse(json_string_value(v), json_string_length(v), f->uuid, st))
			rc = gaz_status_set(st, GAZ_EINVAL, "invalid message: UUID is not a UUID");
		else
			*f->has_uuid = true;
	} else if (!strcasecmp(key, "ID")) {
		rc = stream_sum__field_id(v, f->id, st);
	} else if (!strcasecmp(key, "SeqNo")) {
		if (!json_is_integer(v))
			rc = gaz_status_set(st, GAZ_EINVAL, "invalid message: SeqNo is not an integer");
		else
			*f->seq_no = json_integer_value(v);
	} else if (!json_is_string(v)) {
		rc = gaz_status_set(st, GAZ_EINVAL, "invalid message: Data is not a base64 string");
	} else {
		uint8_t *b = NULL;
		size_t n = 0;
		if (!(rc = stream_sum__base64(json_string_value(v), json_string_length(v), &b, &n, st))) {
			free(*f->data);
			*f->data = b;
			*f->data_len = n;
		}
	}
	json_decref(v);
	return rc;
}

static inline int stream_sum__member_apply(const uint8_t *p, const struct stream_sum__member *m, void *arg,
					   struct gaz_status *st)
{
	json_t *key = stream_sum__load(p, m->key_off, m->key_len, 0, st);
	if (!key)
		return GAZ_EINVAL;
	int rc = stream_sum__field(arg, json_string_value(key), p, m, st);
	json_decref(key);
	return rc;
}

/* stream_sum__decode fills f from one JSON document. On error the
 * fields may be partly set (the caller frees and drops them). */
static inline int stream_sum__decode(const uint8_t *p, size_t n, const struct stream_sum__fields *f,
				     struct gaz_status *st)
{
	return stream_sum__members(p, n, stream_sum__member_apply, (void *)f, st);
}

/* stream_sum_chunk_release frees c's data (c itself is the caller's). */
static inline void stream_sum_chunk_release(struct stream_sum_chunk *c)
{
	free(c->data);
	c->data = NULL;
	c->data_len = 0;
}

/* stream_sum_chunk_decode reads a Chunk from payload[0..len) into *c
 * (zeroed first; c->data owned by c: stream_sum_chunk_release). 0, or
 * GAZ_EINVAL with the reason (c released), GAZ_ENOMEM. */
static inline int stream_sum_chunk_decode(const uint8_t *payload, size_t len, struct stream_sum_chunk *c,
					  struct gaz_status *st)
{
	*c = (struct stream_sum_chunk){0};
	struct stream_sum__fields f = {&c->uuid, &c->has_uuid, c->id, &c->seq_no, &c->data, &c->data_len, NULL};
	int rc = stream_sum__decode(payload, len, &f, st);
	if (rc)
		stream_sum_chunk_release(c);
	return rc;
}

/* stream_sum_sum_decode reads a Sum from payload[0..len) into *s. 0 or
 * GAZ_EINVAL with the reason. */
static inline int stream_sum_sum_decode(const uint8_t *payload, size_t len, struct stream_sum_sum *s,
					struct gaz_status *st)
{
	*s = (struct stream_sum_sum){0};
	struct stream_sum__fields f = {&s->uuid, &s->has_uuid, s->id, &s->seq_no, NULL, NULL, &s->value};
	return stream_sum__decode(payload, len, &f, st);
}

/* ---- message types ------------------------------------------------------- */

/* The message types for the message layer (gazette/message.h): messages
 * are heap structs (struct stream_sum_chunk *, struct stream_sum_sum *),
 * an ACK is an empty one (Gazette's NewAcknowledgement: new(Chunk),
 * new(Sum)). arg is unused. */

static inline int stream_sum__chunk_decode_msg(const uint8_t *p, size_t n, void **msg, struct gaz_status *st, void *arg)
{
	(void)arg;
	struct stream_sum_chunk *c = malloc(sizeof *c);
	if (!c)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	int rc = stream_sum_chunk_decode(p, n, c, st);
	if (rc) {
		free(c);
		return rc;
	}
	*msg = c;
	return 0;
}

static inline int stream_sum__sum_decode_msg(const uint8_t *p, size_t n, void **msg, struct gaz_status *st, void *arg)
{
	(void)arg;
	struct stream_sum_sum *s = malloc(sizeof *s);
	if (!s)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	int rc = stream_sum_sum_decode(p, n, s, st);
	if (rc) {
		free(s);
		return rc;
	}
	*msg = s;
	return 0;
}

static inline int stream_sum__chunk_encode_msg(const void *msg, uint8_t **out, size_t *len, struct gaz_status *st,
					       void *arg)
{
	(void)arg;
	return stream_sum_chunk_encode(msg, out, len, st);
}

static inline int stream_sum__sum_encode_msg(const void *msg, uint8_t **out, size_t *len, struct gaz_status *st,
					     void *arg)
{
	(void)arg;
	return stream_sum_sum_encode(msg, out, len, st);
}

static inline int stream_sum__chunk_get_uuid(const void *msg, gaz_uuid *out, void *arg)
{
	(void)arg;
	const struct stream_sum_chunk *c = msg;
	if (!c->has_uuid)
		return GAZ_ENOTFOUND;
	*out = c->uuid;
	return 0;
}

static inline int stream_sum__chunk_set_uuid(void *msg, const gaz_uuid *u, void *arg)
{
	(void)arg;
	struct stream_sum_chunk *c = msg;
	c->uuid = *u;
	c->has_uuid = true;
	return 0;
}

static inline int stream_sum__sum_get_uuid(const void *msg, gaz_uuid *out, void *arg)
{
	(void)arg;
	const struct stream_sum_sum *s = msg;
	if (!s->has_uuid)
		return GAZ_ENOTFOUND;
	*out = s->uuid;
	return 0;
}

static inline int stream_sum__sum_set_uuid(void *msg, const gaz_uuid *u, void *arg)
{
	(void)arg;
	struct stream_sum_sum *s = msg;
	s->uuid = *u;
	s->has_uuid = true;
	return 0;
}

static inline void *stream_sum__chunk_new(const char *journal, void *arg)
{
	(void)journal;
	(void)arg;
	return calloc(1, sizeof(struct stream_sum_chunk));
}

static inline void *stream_sum__sum_new(const char *journal, void *arg)
{
	(void)journal;
	(void)arg;
	return calloc(1, sizeof(struct stream_sum_sum));
}

static inline void stream_sum__chunk_free(void *msg, void *arg)
{
	(void)arg;
	if (msg)
		stream_sum_chunk_release(msg);
	free(msg);
}

static inline void stream_sum__sum_free(void *msg, void *arg)
{
	(void)arg;
	free(msg);
}

/* stream_sum_chunk_type: Chunks, as the summer reads them. */
static inline struct gaz_message_type stream_sum_chunk_type(void)
{
	return (struct gaz_message_type){
		.decode = stream_sum__chunk_decode_msg, .encode = stream_sum__chunk_encode_msg,
		.get_uuid = stream_sum__chunk_get_uuid, .set_uuid = stream_sum__chunk_set_uuid,
		.new_ack = stream_sum__chunk_new, .free_msg = stream_sum__chunk_free,
	};
}

/* stream_sum_sum_type: Sums, as the chunker reads them. */
static inline struct gaz_message_type stream_sum_sum_type(void)
{
	return (struct gaz_message_type){
		.decode = stream_sum__sum_decode_msg, .encode = stream_sum__sum_encode_msg,
		.get_uuid = stream_sum__sum_get_uuid, .set_uuid = stream_sum__sum_set_uuid,
		.new_ack = stream_sum__sum_new, .free_msg = stream_sum__sum_free,
	};
}

/* ---- mappings ------------------------------------------------------------ */

/* stream_sum_chunk_mapping maps a Chunk (msg) to its journal: the modulo
 * of its stream ID's 16 bytes over the chunk journals, `arg` the
 * gaz_partitions of STREAM_SUM_CHUNKS_SELECTOR (Gazette's
 * newChunkMapping). A gaz_mapping_fn. */
static inline int stream_sum_chunk_mapping(const void *msg, void *arg, struct gaz_mapped *out, struct gaz_status *st)
{
	const struct stream_sum_chunk *c = msg;
	return gaz_map_modulo(arg, c->id, STREAM_SUM_ID_LEN, out, st);
}

/* stream_sum_final_sums_mapping maps every Sum to the final sums
 * journal, as JSON lines (Gazette's finalSumsMapping). */
static inline int stream_sum_final_sums_mapping(const void *msg, void *arg, struct gaz_mapped *out,
						struct gaz_status *st)
{
	(void)msg;
	(void)arg;
	(void)st;
	snprintf(out->journal, sizeof out->journal, "%s", STREAM_SUM_FINAL_SUMS_JOURNAL);
	out->framing = GAZ_FRAMING_JSON;
	return 0;
}

#endif
