/*
 * reader.c - messages read from a journal: read uncommitted (every frame
 * decoded, with its offsets and UUID) and read committed (through a
 * sequencer, with replays of long transactions). Gazette's
 * ReadUncommittedIter and ReadCommittedIter.
 *
 * The uncommitted reader buffers journal bytes from the client library's
 * retrying reader: buf[pos..len) are unconsumed bytes starting at journal
 * offset buf_off + pos. The buffer grows to hold the largest frame, at
 * most GAZ_MESSAGE_MAX_LEN plus a header.
 *
 * Single-threaded: one thread owns a reader.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "gazette/client.h"
#include "gazette/message.h"
#include "protocol/labels.h"

#define READ_CHUNK (64u << 10)
#define BUF_MAX ((size_t)GAZ_MESSAGE_MAX_LEN + GAZ_FIXED_HEADER_LEN + READ_CHUNK)

struct gaz_message_reader {
	struct gaz_message_reader_opts o;
	char *journal;
	struct gaz_reader *rd;
	uint8_t *buf;
	size_t cap, pos, len;
	int64_t buf_off; /* journal offset of buf[0] */
	bool at_end;     /* the byte stream ended (end_offset, or the head) */
	uint64_t skipped;
	struct gaz_reader_wake *w; /* a try's wake while it runs, else NULL */
};

/* lookup_framing: the journal's framing from its content-type label. */
static int lookup_framing(struct gaz_client *c, const char *journal, enum gaz_framing *out, struct gaz_status *st)
{
	char sel_text[GAZ_MESSAGE_JOURNAL_MAX + 16];
	snprintf(sel_text, sizeof sel_text, "name=%s", journal);
	Protocol__LabelSelector *sel;
	int rc = gaz_selector_parse(sel_text, &sel, st);
	if (rc)
		return rc;
	Protocol__ListResponse *lr;
	rc = gaz_client_list(c, sel, &lr, st);
	gaz_selector_free(sel);
	if (rc)
		return rc;
	if (lr->n_journals != 1)
		rc = gaz_status_set(st, GAZ_ENOTFOUND, "journal \"%s\" not found", journal);
	else
		rc = gaz_framing_for_content_type(gaz_labelset_value_of(lr->journals[0]->spec->labels, "content-type"),
						  out, st);
	protobuf_c_message_free_unpacked(&lr->base, NULL);
	if (rc)
		gaz_status_prefix(st, "determining the framing of \"%s\": ", journal);
	return rc;
}

int gaz_message_reader_new(const struct gaz_message_reader_opts *o, struct gaz_message_reader **out,
			   struct gaz_status *st)
{
	if (!o || !o->client || !o->journal || !o->type || o->offset < 0)
		return gaz_status_set(st, GAZ_EINVAL, "a message reader needs a client, a journal, a type and an offset");
	struct gaz_message_reader *r = calloc(1, sizeof *r);
	if (!r || !(r->journal = strdup(o->journal))) {
		free(r);
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	}
	r->o = *o;
	r->o.journal = r->journal;
	r->buf_off = o->offset;
	int rc = 0;
	if (!r->o.framing)
		rc = lookup_framing(o->client, r->journal, &r->o.framing, st);
	struct gaz_read_opts ro = {.journal = r->journal,
				   .offset = o->offset,
				   .end_offset = o->end_offset,
				   .block = o->block,
				   .retry = true};
	if (!rc)
		rc = gaz_reader_new(o->client, &ro, &r->rd, st);
	if (rc) {
		free(r->journal);
		free(r);
		return rc;
	}
	*out = r;
	return 0;
}

void gaz_message_reader_free(struct gaz_message_reader *r)
{
	if (!r)
		return;
	gaz_reader_free(r->rd);
	free(r->buf);
	free(r->journal);
	free(r);
}

uint64_t gaz_message_reader_skipped(const struct gaz_message_reader *r)
{
	return r->skipped;
}

int64_t gaz_message_reader_offset(const struct gaz_message_reader *r)
{
	return r->buf_off + (int64_t)r->pos;
}

/* fill reads more journal bytes into the buffer: 0, GAZ_EOF when the
 * byte stream ended (r->at_end), GAZ_READ_WAIT for a try with none in
 * yet, or an error. */
static int fill(struct gaz_message_reader *r, struct gaz_status *st)
{
	if (r->pos > 0) { /* compact */
		memmove(r->buf, r->buf + r->pos, r->len - r->pos);
		r->buf_off += (int64_t)r->pos;
		r->len -= r->pos;
		r->pos = 0;
	}
	if (r->cap - r->len < READ_CHUNK) {
		size_t cap = r->cap ? r->cap * 2 : 2 * READ_CHUNK;
		if (cap > BUF_MAX)
			cap = BUF_MAX;
		if (cap - r->len < READ_CHUNK / 2)
			return gaz_status_set(st, GAZ_ERANGE, "a frame of \"%s\" at %lld exceeds the buffer", r->journal,
					      (long long)r->buf_off);
		uint8_t *nb = realloc(r->buf, cap);
		if (!nb)
			return gaz_status_set(st, GAZ_ENOMEM, "out of memory reading \"%s\"", r->journal);
		r->buf = nb;
		r->cap = cap;
	}
	for (;;) {
		size_t n = 0;
		int rc = r->w ? gaz_reader_try_read(r->rd, r->buf + r->len, r->cap - r->len, &n, r->w, st)
			      : gaz_reader_read(r->rd, r->buf + r->len, r->cap - r->len, &n, st);
		if (rc == GAZ_READ_WAIT)
			return rc;
		if (rc == GAZ_READ_META)
			continue;
		if (rc == GAZ_READ_JUMP) {
			int64_t to = gaz_reader_offset(r->rd);
			gaz_warn("source journal offset jump", "journal=%s from=%lld to=%lld", r->journal,
				 (long long)(r->buf_off + (int64_t)r->len), (long long)to);
			if (r->len > 0)
				r->skipped++;
			r->len = 0;
			r->buf_off = to;
			continue;
		}
		if (rc == GAZ_READ_TAIL || rc == GAZ_EOF) {
			r->at_end = true;
			return GAZ_EOF;
		}
		if (rc < 0)
			return rc;
		r->len += n;
		return 0;
	}
}

/* decode_frame turns the frame at buf[pos] into *env: 0, or 1 when it is
 * skipped (logged). */
static int decode_frame(struct gaz_message_reader *r, const struct gaz_frame *f, struct gaz_envelope *env)
{
	const struct gaz_message_type *t = r->o.type;
	int64_t begin = r->buf_off + (int64_t)r->pos;
	struct gaz_status st = {0};
	void *msg = NULL;
	int rc = t->decode(r->buf + r->pos + f->payload_off, f->payload_len, &msg, &st, t->arg);
	gaz_uuid u;
	if (rc == 0 && t->get_uuid(msg, &u, t->arg) != 0)
		rc = gaz_status_set(&st, GAZ_EINVAL, "message has no UUID");
	r->pos += f->len;
	if (rc) {
		if (msg)
			t->free_msg(msg, t->arg);
		r->skipped++;
		gaz_warn("skipping a message that does not decode", "journal=%s offset=%lld err=%s", r->journal,
			 (long long)begin, st.msg);
		return 1;
	}
	*env = (struct gaz_envelope){
		.journal = r->journal, .begin = begin, .end = begin + (int64_t)f->len, .uuid = u, .msg = msg};
	return 0;
}

int gaz_message_reader_next(struct gaz_message_reader *r, struct gaz_envelope *env, struct gaz_status *st)
{
	for (;;) {
		struct gaz_frame f;
		struct gaz_status fst = {0};
		int rc = gaz_frame_next(r->o.framing, r->buf + r->pos, r->len - r->pos, r->at_end, &f, &fst);
		if (rc == 0) {
			if (decode_frame(r, &f, env) == 0)
				return 0;
			continue;
		}
		if (rc == GAZ_EPROTO && r->at_end && !r->o.end_offset) {
			/* A non-blocking read stopped at the head inside a frame: it is
			 * not cut short, only not yet whole. */
			return GAZ_EOF;
		}
		if (rc == GAZ_EPROTO && r->at_end) {
			r->pos += f.len;
			return gaz_status_set(st, GAZ_EPROTO, "reading \"%s\" at %lld: %s", r->journal,
					      (long long)(r->buf_off + (int64_t)r->pos - (int64_t)f.len), fst.msg);
		}
		if (rc == GAZ_EPROTO) {
			gaz_warn("skipping bytes of a journal", "journal=%s offset=%lld bytes=%zu err=%s", r->journal,
				 (long long)(r->buf_off + (int64_t)r->pos), f.len, fst.msg);
			r->skipped++;
			r->pos += f.len;
			continue;
		}
		if (r->at_end) { /* GAZ_EOF: nothing left but what f.len consumes */
			r->pos += f.len;
			return GAZ_EOF;
		}
		if ((rc = fill(r, st)) != 0 && rc != GAZ_EOF)
			return rc;
	}
}

int gaz_message_reader_try_next(struct gaz_message_reader *r, struct gaz_envelope *env,
				struct gaz_reader_wake *w, struct gaz_status *st)
{
	int rc;

	r->w = w;
	rc = gaz_message_reader_next(r, env, st);
	r->w = NULL;
	return rc;
}

/* ---- read committed --------------------------------------------------- */

struct gaz_committed_reader {
	struct gaz_message_reader *rd;
	struct gaz_message_reader *replay; /* of the commit being dequeued */
	struct gaz_sequencer *seq;
	struct gaz_message_reader_opts o;
	struct gaz_status replay_st;
	uint64_t duplicates; /* envelopes the sequencer dropped as duplicates */
};

static void seq_free_msg(void *msg, void *arg)
{
	const struct gaz_message_type *t = arg;
	t->free_msg(msg, t->arg);
}

int gaz_committed_reader_new(const struct gaz_message_reader_opts *o, const struct gaz_sequencer_checkpoint *cp,
			     struct gaz_committed_reader **out, struct gaz_status *st)
{
	struct gaz_committed_reader *r = calloc(1, sizeof *r);
	if (!r)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	r->o = *o;
	for (size_t i = 0; cp && i < cp->n_offsets; i++)
		if (strcmp(cp->offsets[i].journal, o->journal) == 0)
			r->o.offset = cp->offsets[i].offset;
	struct gaz_sequencer_opts so = o->sequencer;
	so.free_msg = seq_free_msg;
	so.arg = (void *)o->type;
	int rc = gaz_sequencer_new(&so, cp ? cp->offsets : NULL, cp ? cp->n_offsets : 0, cp ? cp->states : NULL,
				   cp ? cp->n_states : 0, &r->seq);
	if (rc) {
		free(r);
		return gaz_status_set(st, rc, "out of memory");
	}
	if ((rc = gaz_message_reader_new(&r->o, &r->rd, st))) {
		gaz_sequencer_free(r->seq);
		free(r);
		return rc;
	}
	r->o.framing = r->rd->o.framing; /* replays need no lookup */
	r->o.journal = r->rd->journal;
	*out = r;
	return 0;
}

void gaz_committed_reader_free(struct gaz_committed_reader *r)
{
	if (!r)
		return;
	gaz_sequencer_free(r->seq);
	gaz_message_reader_free(r->replay);
	gaz_message_reader_free(r->rd);
	free(r);
}

struct gaz_sequencer *gaz_committed_reader_sequencer(struct gaz_committed_reader *r)
{
	return r->seq;
}

uint64_t gaz_committed_reader_skipped(const struct gaz_committed_reader *r)
{
	return gaz_message_reader_skipped(r->rd);
}

uint64_t gaz_committed_reader_duplicates(const struct gaz_committed_reader *r)
{
	return r->duplicates;
}

static int replay_next(void *arg, struct gaz_envelope *out)
{
	struct gaz_committed_reader *r = arg;
	return gaz_message_reader_next(r->replay, out, &r->replay_st);
}

/* start_replay opens a reader of the commit's range that left the ring. */
static int start_replay(struct gaz_committed_reader *r, struct gaz_status *st)
{
	const char *journal;
	int64_t begin, end;
	if (!gaz_sequencer_replay_range(r->seq, &journal, &begin, &end))
		return 0;
	struct gaz_message_reader_opts ro = r->o;
	ro.journal = journal;
	ro.offset = begin;
	ro.end_offset = end;
	ro.block = false;
	gaz_message_reader_free(r->replay);
	r->replay = NULL;
	int rc = gaz_message_reader_new(&ro, &r->replay, st);
	if (rc)
		return rc;
	gaz_status_clear(&r->replay_st);
	gaz_sequencer_start_replay(r->seq, replay_next, r);
	return 0;
}

int gaz_committed_reader_next(struct gaz_committed_reader *r, const struct gaz_envelope **env,
			      struct gaz_status *st)
{
	for (;;) {
		int rc = gaz_sequencer_step(r->seq, env);
		if (rc == 0)
			return 0;
		if (rc != GAZ_EOF) {
			if (r->replay_st.code)
				return gaz_status_set(st, rc, "replaying \"%s\": %s", r->o.journal, r->replay_st.msg);
			return gaz_status_set(st, rc, "reading committed messages of \"%s\" failed", r->o.journal);
		}
		gaz_message_reader_free(r->replay);
		r->replay = NULL;
		struct gaz_envelope e;
		if ((rc = gaz_message_reader_next(r->rd, &e, st)))
			return rc;
		enum gaz_queue_outcome outcome;
		if ((rc = gaz_sequencer_queue(r->seq, &e, &outcome)))
			return gaz_status_set(st, rc, "queueing a message of \"%s\" failed", r->o.journal);
		if (outcome == GAZ_QUEUE_OUTSIDE_ALREADY_ACKED || outcome == GAZ_QUEUE_CONTINUE_ALREADY_ACKED ||
		    outcome == GAZ_QUEUE_CONTINUE_CLOCK_LARGER)
			r->duplicates++;
		if (outcome == GAZ_QUEUE_ACK_COMMIT_REPLAY && (rc = start_replay(r, st)))
			return rc;
	}
}
