/*
 * message_framing.c - fuzz target: journal content as the message layer
 * reads it (message/framing.c gaz_frame_next, walked over the whole input
 * the way reader.c's gaz_message_reader_next does at the end of a read),
 * each frame's payload decoded as a JSON message with its UUID
 * (gaz_json_message_type: decode, get_uuid, set_uuid, encode, and
 * re-framing with gaz_message_frame), UUID text (message/uuid.c
 * gaz_uuid_parse, whose result must format and parse back to itself), and
 * content-type labels (gaz_framing_for_content_type).
 *
 * Input: byte 0 picks the framing (0 JSON lines, 1 protobuf-fixed) or the
 * parser (2 UUID text, 3 content type); the rest is the content.
 */
#include "fuzz.h"

#include <stdio.h>

#include "gazette/message.h"

static void payload(const struct gaz_message_type *t, enum gaz_framing framing, const uint8_t *p,
		    size_t n)
{
	struct gaz_status st = {0};
	void *msg = NULL;
	gaz_uuid u;
	uint8_t *out = NULL;
	size_t len = 0;

	if (t->decode(p, n, &msg, &st, t->arg)) {
		if (msg)
			t->free_msg(msg, t->arg);
		return;
	}
	if (t->get_uuid(msg, &u, t->arg) == 0)
		t->set_uuid(msg, &u, t->arg);
	if (gaz_message_frame(framing, t, msg, &out, &len, &st) == 0)
		free(out);
	t->free_msg(msg, t->arg);
}

static void frames(enum gaz_framing framing, const uint8_t *p, size_t n)
{
	struct gaz_message_type t = gaz_json_message_type(NULL);
	size_t pos = 0;

	while (pos < n) {
		struct gaz_frame f = {0};
		struct gaz_status st = {0};
		int rc = gaz_frame_next(framing, p + pos, n - pos, true, &f, &st);
		if (rc != 0 && rc != GAZ_EPROTO)
			break; /* GAZ_EOF: nothing more (f.len may be a lone '\n') */
		if (f.len == 0 || f.len > n - pos ||
		    (rc == 0 && f.payload_off + f.payload_len > f.len)) {
			fprintf(stderr, "frame of %zu bytes (payload %zu+%zu) at %zu of %zu, rc %d\n",
				f.len, f.payload_off, f.payload_len, pos, n, rc);
			abort(); /* a reader would spin or read past its buffer */
		}
		if (rc == 0)
			payload(&t, framing, p + pos + f.payload_off, f.payload_len);
		pos += f.len;
	}
}

static void uuid_text(const uint8_t *p, size_t n)
{
	gaz_uuid u, v;
	char text[GAZ_UUID_STR_LEN + 1];

	if (gaz_uuid_parse((const char *)p, n, &u, NULL))
		return;
	gaz_uuid_format(&u, text);
	if (gaz_uuid_parse(text, strlen(text), &v, NULL) || memcmp(&u, &v, sizeof(u))) {
		fprintf(stderr, "UUID %s does not parse back\n", text);
		abort();
	}
	gaz_uuid_clock(&u);
	gaz_uuid_flags(&u);
	gaz_uuid_producer(&u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum gaz_framing f;

	if (size < 1)
		return 0;
	switch (data[0] % 4) {
	case 0:
		frames(GAZ_FRAMING_JSON, data + 1, size - 1);
		break;
	case 1:
		frames(GAZ_FRAMING_FIXED, data + 1, size - 1);
		break;
	case 2:
		uuid_text(data + 1, size - 1);
		break;
	default: {
		char *s = fuzz_str(data + 1, size - 1);
		gaz_framing_for_content_type(s, &f, NULL);
		free(s);
	}
	}
	return 0;
}
