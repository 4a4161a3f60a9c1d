/*
 * client_read.c - reading a journal: Gazette's Reader and RetryReader
 * (facts §2.2, §7.2), with direct reads of fragments by URL (§7.3, in
 * client_fetch.c).
 *
 * A reader is in one of three sources at a time:
 *
 *   (none) --first read--> STREAM --EOF after OK metadata + URL--> DIRECT
 *      ^                      |                                      |
 *      +------ end, error or status (RetryReader restarts) ---------+
 *
 * READ-AHEAD: entering a directly read fragment starts a read-ahead of the
 * next one (client_readahead.c): its own Read RPC at the fragment's end
 * and, when that answers with a URL, the fetch and decoding into a
 * bounded ring on another thread. When req.offset reaches it and no stream
 * is open, its answer is handled as if this reader's stream had sent it
 * (the same validation, metadata event and offset rules), and the ring is
 * the DIRECT source. Whatever else it saw, the reader asks itself, so
 * every byte and event comes out as without read-ahead; a fetch error
 * comes out when the content reaches the failed bytes.
 *
 * STREAM: one Read RPC. Each response is validated; a metadata response
 * updates `meta` and is reported (GAZ_READ_META, or GAZ_READ_JUMP when its
 * offset is past the requested one); a content response is kept in `chunk`
 * and copied out across calls. After a non-OK status the stream's end is
 * read, then the status becomes the result. DIRECT: the fragment file,
 * fetched and decoded, until exactly its end.
 *
 * Invariant: req.offset is the next offset to hand to the caller; it only
 * grows (content copied out, or a jump forward).
 */
#include <stdlib.h>
#include <string.h>

#include "client/lib/client_int.h"
#include "common/clock.h"
#include "common/log.h"
#include "protocol/validate.h"

#define READ_PATH "/protocol.Journal/Read"
/* Internal result: receive the next message (not a GAZ_* value). */
#define READ_AGAIN 100

struct gaz_reader {
	struct gaz_client *c;
	char *journal;
	Protocol__ReadRequest req;     /* req.journal = journal; offset advances */
	bool retry;
	struct gaz__client_call call;  /* call.stream == NULL: no open stream */
	Protocol__ReadResponse *chunk; /* content being copied out, or NULL */
	Protocol__Header *hdr;         /* last response header (dispatch route) */
	bool direct_pending;           /* last response: OK metadata with URL */
	int last_status;               /* status of the last response */
	int fail_status;               /* broker status of the last failure, or -1 */
	struct gaz__frag_reader *direct;
	struct gaz__readahead *cur;    /* DIRECT source that was read ahead */
	bool cur_open;                 /* its metadata event was handed out */
	struct gaz__readahead *ahead;  /* the next fragment, or NULL */
	uint8_t *spare;                /* a ring for the next read-ahead */
	size_t ra_bytes;               /* ring size; 0 = no read-ahead */
	struct gaz_read_meta meta;
	char *url;                     /* meta.fragment_url storage */
	/* gaz_reader_try_read: its wake while a try runs (NULL in a
	 * blocking read), the retry count across tries, and when a retry's
	 * backoff ends (0: none pending). */
	struct gaz_reader_wake *w;
	int attempt;
	int64_t retry_at;
};

int gaz_reader_new(struct gaz_client *c, const struct gaz_read_opts *o, struct gaz_reader **out,
		   struct gaz_status *st)
{
	struct gaz_status vst = {0};
	struct gaz_reader *r = calloc(1, sizeof(*r));

	if (!r || !(r->journal = strdup(o->journal ? o->journal : ""))) {
		free(r);
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory creating reader");
	}
	protocol__read_request__init(&r->req);
	r->c = c;
	r->req.journal = r->journal;
	r->req.offset = o->offset;
	r->req.end_offset = o->end_offset;
	r->req.block = o->block;
	r->req.do_not_proxy = o->do_not_proxy;
	r->req.metadata_only = o->metadata_only;
	r->req.begin_mod_time = o->begin_mod_time;
	r->retry = o->retry;
	r->ra_bytes = o->read_ahead_bytes < 0	 ? 0
		      : o->read_ahead_bytes == 0 ? (size_t)GAZ_READ_AHEAD_DEFAULT
						 : (size_t)o->read_ahead_bytes;
	r->fail_status = -1;
	r->meta.fragment_url = "";
	if (gaz_validate_read_request(&r->req, &vst)) {
		gaz_reader_free(r);
		return gaz_status_set(st, GAZ_EINVAL, "invalid ReadRequest: %s", vst.msg);
	}
	*out = r;
	return 0;
}

/* drop_ra frees a read-ahead, keeping its ring for the next one. */
static void drop_ra(struct gaz_reader *r, struct gaz__readahead **ra)
{
	uint8_t *ring = gaz__readahead_free(*ra);

	*ra = NULL;
	if (ring && !r->spare)
		r->spare = ring;
	else
		free(ring);
}

/* reset drops the stream, the direct fetch and any pending content; a
 * read-ahead of a later fragment stays. */
static void reset(struct gaz_reader *r)
{
	gaz__client_close(r->c, &r->call);
	gaz__frag_close(r->direct);
	r->direct = NULL;
	drop_ra(r, &r->cur);
	r->cur_open = false;
	if (r->chunk)
		protobuf_c_message_free_unpacked(&r->chunk->base, NULL);
	r->chunk = NULL;
	r->direct_pending = false;
}

void gaz_reader_free(struct gaz_reader *r)
{
	if (!r)
		return;
	reset(r);
	drop_ra(r, &r->ahead);
	free(r->spare);
	if (r->hdr)
		protobuf_c_message_free_unpacked(&r->hdr->base, NULL);
	gaz_fragment_release(&r->meta.fragment);
	free(r->url);
	free(r->journal);
	free(r);
}

int64_t gaz_reader_offset(const struct gaz_reader *r)
{
	return r->req.offset;
}

const char *gaz_reader_journal(const struct gaz_reader *r)
{
	return r->journal;
}

const struct gaz_read_meta *gaz_reader_meta(const struct gaz_reader *r)
{
	return &r->meta;
}

/* ---- one Read RPC (Gazette's Reader) --------------------------------------- */

/* set_meta records a metadata response as the reader's `meta`. */
static int set_meta(struct gaz_reader *r, const Protocol__ReadResponse *resp, struct gaz_status *st)
{
	char *url = resp->fragment_url && *resp->fragment_url ? strdup(resp->fragment_url) : NULL;

	gaz_fragment_release(&r->meta.fragment);
	free(r->url);
	r->url = url;
	r->meta.fragment_url = url ? url : "";
	r->meta.status = (int)resp->status;
	r->meta.offset = resp->offset;
	r->meta.write_head = resp->write_head;
	r->meta.has_fragment = resp->fragment != NULL;
	if ((resp->fragment_url && *resp->fragment_url && !url) ||
	    (resp->fragment && gaz_fragment_from_proto(&r->meta.fragment, resp->fragment, st))) {
		r->meta.has_fragment = false;
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory reading");
	}
	return 0;
}

/* open_stream starts the Read RPC at a member of the route the last
 * response header named, when there is one (used once: a restart whose
 * stream never answered falls back), else of the cached route, else at
 * the broker address: Gazette's Reader dispatch (facts §7.1, §7.2). A
 * do_not_proxy read relies on it to reach a replica after a
 * NOT_JOURNAL_BROKER answer. */
static int open_stream(struct gaz_reader *r, struct gaz_status *st)
{
	struct gaz__dispatch d;
	int rc;

	gaz__client_dispatch(r->c, r->journal, false, r->hdr ? r->hdr->route : NULL, &d);
	if (r->hdr)
		protobuf_c_message_free_unpacked(&r->hdr->base, NULL);
	r->hdr = NULL;
	if ((rc = gaz__client_open(r->c, &d, READ_PATH, GAZ_DEADLINE_NEVER, false, &r->call, st)))
		return rc;
	r->last_status = PROTOCOL__STATUS__OK;
	if (gaz_rpc_stream_send(r->call.stream, &r->req.base) == 0)
		gaz_rpc_stream_close_send(r->call.stream);
	return 0; /* a failed send shows as the stream's end */
}

/* copy_chunk copies pending content at req.offset; *n = 0 if none left. */
static void copy_chunk(struct gaz_reader *r, void *buf, size_t cap, size_t *n)
{
	int64_t d = r->req.offset - r->chunk->offset;
	size_t left = r->chunk->content.len - (size_t)d;

	*n = left < cap ? left : cap;
	memcpy(buf, r->chunk->content.data + d, *n);
	r->req.offset += (int64_t)*n;
}

/* on_response handles one validated response; it is consumed. Returns a
 * reader result, or READ_AGAIN to receive the next message (after a non-OK
 * status or a content chunk with nothing to report). */
static int on_response(struct gaz_reader *r, Protocol__ReadResponse *resp, struct gaz_status *st)
{
	bool jump = r->req.offset < resp->offset;
	bool content = resp->content.data != NULL || resp->content.len > 0;
	int rc;

	if (resp->header) {
		gaz__client_observe(r->c, r->journal, resp->header);
		if (r->hdr)
			protobuf_c_message_free_unpacked(&r->hdr->base, NULL);
		r->hdr = resp->header; /* moved out of the response */
		resp->header = NULL;
	}
	if (resp->status == PROTOCOL__STATUS__NOT_JOURNAL_BROKER ||
	    resp->status == PROTOCOL__STATUS__INSUFFICIENT_JOURNAL_BROKERS)
		gaz__client_forget(r->c, r->journal);
	if (jump)
		r->req.offset = resp->offset;
	r->last_status = (int)resp->status;
	r->direct_pending = resp->status == PROTOCOL__STATUS__OK && !content &&
			    resp->fragment_url && *resp->fragment_url;
	if (content) {
		r->chunk = resp;
		return jump ? GAZ_READ_JUMP : READ_AGAIN;
	}
	if ((rc = set_meta(r, resp, st)) == 0 && resp->status == PROTOCOL__STATUS__OK)
		rc = jump ? GAZ_READ_JUMP : GAZ_READ_META;
	else if (rc == 0)
		rc = READ_AGAIN; /* the broker closes the stream next; read that */
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

/* start_ahead starts the read-ahead of the fragment after the one
 * entering DIRECT (in r->meta), unless there is one, or the read ends
 * there. A read-ahead that cannot start is no error: the reader asks. */
static void start_ahead(struct gaz_reader *r)
{
	int64_t next = r->meta.fragment.end;

	if (!r->ra_bytes || r->ahead || (r->req.end_offset != 0 && next >= r->req.end_offset))
		return;
	if (gaz__readahead_start(r->c, &r->req, next, r->ra_bytes, r->spare, &r->ahead) == 0)
		r->spare = NULL;
	else if (r->spare) /* the ring went with the failed start */
		r->spare = NULL;
}

/* adopt takes the read-ahead's answer as this reader's response at
 * req.offset. Returns its event (GAZ_READ_META, or GAZ_READ_JUMP), an
 * error, or READ_AGAIN when there is none to take (the reader asks). */
static int adopt(struct gaz_reader *r, struct gaz_status *st)
{
	Protocol__ReadResponse *resp = NULL;
	int rc;

	if (!r->ahead || gaz__readahead_offset(r->ahead) > r->req.offset)
		return READ_AGAIN; /* none, or for later: a retry of earlier bytes */
	if (gaz__readahead_offset(r->ahead) < r->req.offset ||
	    (rc = gaz__readahead_take(r->ahead, &resp)) == GAZ__RA_NONE) {
		drop_ra(r, &r->ahead);
		return READ_AGAIN;
	}
	if (rc)
		return gaz_status_set(st, rc, "cancelled");
	r->cur = r->ahead;
	r->ahead = NULL;
	r->cur_open = false;
	if ((rc = gaz__check_read_response(resp, r->req.offset, st))) {
		protobuf_c_message_free_unpacked(&resp->base, NULL);
		return rc;
	}
	return on_response(r, resp, st);
}

/* on_end handles the end of the stream: a direct fetch, or the status. */
static int on_end(struct gaz_reader *r, struct gaz_status *st)
{
	int rc = gaz_rpc_stream_finish(r->call.stream, st);

	gaz__client_call_failed(r->c, &r->call, rc);
	gaz__client_close(r->c, &r->call);
	if (rc)
		return rc;
	if (!r->req.metadata_only && r->direct_pending && r->meta.has_fragment) {
		r->direct_pending = false;
		rc = gaz__frag_open(r->c, &r->meta.fragment, r->req.offset, r->url, NULL, &r->direct,
				    st);
		if (rc == 0)
			start_ahead(r);
		return rc ? rc : READ_AGAIN;
	}
	switch (r->last_status) {
	case PROTOCOL__STATUS__OK:
		return GAZ_EOF;
	case PROTOCOL__STATUS__OFFSET_NOT_YET_AVAILABLE:
		r->fail_status = r->last_status;
		return GAZ_READ_TAIL;
	default:
		r->fail_status = r->last_status;
		return gaz__client_status_fail(r->last_status, r->journal, st);
	}
}

/* read_direct yields content of the directly fetched fragment. */
static int read_direct(struct gaz_reader *r, void *buf, size_t cap, size_t *n,
		       struct gaz_status *st)
{
	int rc = GAZ_EOF;

	if (r->req.end_offset != 0) {
		int64_t left = r->req.end_offset - r->req.offset;
		cap = left <= 0 ? 0 : left < (int64_t)cap ? (size_t)left : cap;
	}
	if (cap && r->cur)
		rc = gaz__readahead_read(r->cur, buf, cap, n, st);
	else if (cap)
		rc = gaz__frag_read(r->direct, buf, cap, n, st);
	if (rc == 0) {
		r->req.offset += (int64_t)*n;
		return 0;
	}
	gaz__frag_close(r->direct);
	r->direct = NULL;
	drop_ra(r, &r->cur);
	r->cur_open = false;
	return rc;
}

/* recv_next receives and validates the next response of the stream;
 * GAZ_READ_WAIT (r->w armed) when a try finds none in yet. */
static int recv_next(struct gaz_reader *r, struct gaz_status *st)
{
	Protocol__ReadResponse *resp = NULL;
	int rc = r->w ? gaz__client_try_recv(r->c, r->call.stream, &protocol__read_response__descriptor,
					     (ProtobufCMessage **)&resp, r->w->fn, r->w->arg, st)
		      : gaz__client_recv(r->c, r->call.stream, &protocol__read_response__descriptor,
					 (ProtobufCMessage **)&resp, st);

	if (rc == GAZ_READ_WAIT)
		return rc;

	if (rc == GAZ_EOF)
		return on_end(r, st);
	if (rc)
		return rc;
	if ((rc = gaz__check_read_response(resp, r->req.offset, st))) {
		protobuf_c_message_free_unpacked(&resp->base, NULL);
		return rc;
	}
	return on_response(r, resp, st);
}

/* read_once is one step of Gazette's Reader.Read; failures leave the
 * reader to be reset. */
static int read_once(struct gaz_reader *r, void *buf, size_t cap, size_t *n,
		     struct gaz_status *st)
{
	int rc;

	*n = 0;
	r->fail_status = -1;
	for (;;) {
		if (r->cur && !r->cur_open && r->direct_pending && !r->req.metadata_only) {
			/* the adopted answer's metadata is out: its content next,
			 * as on_end would fetch it */
			r->direct_pending = false;
			r->cur_open = true;
			start_ahead(r);
		} else if (r->cur && !r->cur_open) {
			drop_ra(r, &r->cur); /* cannot happen: only URL answers are adopted */
		}
		if (r->direct || r->cur)
			return read_direct(r, buf, cap, n, st);
		if (r->chunk && r->chunk->offset + (int64_t)r->chunk->content.len > r->req.offset) {
			copy_chunk(r, buf, cap, n);
			return 0;
		}
		if (r->chunk)
			protobuf_c_message_free_unpacked(&r->chunk->base, NULL);
		r->chunk = NULL;
		if (!r->call.stream && (rc = adopt(r, st)) != READ_AGAIN)
			return rc;
		if (!r->call.stream && (rc = open_stream(r, st)))
			return rc;
		if ((rc = recv_next(r, st)) != READ_AGAIN)
			return rc;
	}
}

/* ---- RetryReader -------------------------------------------------------- */

/* retry_read is RetryReader's loop over read_once, from attempt
 * r->attempt. A try (r->w) returns GAZ_READ_WAIT where a read would
 * wait: for the stream (r->w armed by recv_next) or a backoff (r->w->at_ns
 * and r->retry_at set; the next try goes on from there, at the same
 * attempt). */
static int retry_read(struct gaz_reader *r, void *buf, size_t cap, size_t *n, struct gaz_status *st)
{
	for (;; r->attempt++) {
		struct gaz_status lst = {0};
		enum gaz__read_verdict verdict;
		int rc;

		if (r->retry_at) {
			if (gaz_client_cancelled(r->c))
				return gaz_status_set(st, GAZ_ECANCELLED, "cancelled");
			if (r->w && gaz_mono_ns() < r->retry_at) {
				*n = 0;
				r->w->at_ns = r->retry_at;
				return GAZ_READ_WAIT;
			}
			r->retry_at = 0;
		}
		rc = read_once(r, buf, cap, n, &lst);
		if (rc == 0 || rc == GAZ_READ_META || rc == GAZ_READ_JUMP)
			return rc;
		if (rc == GAZ_READ_WAIT) {
			r->w->at_ns = GAZ_DEADLINE_NEVER;
			return rc;
		}
		reset(r); /* the Reader is spent: a later read starts a new RPC */
		if (gaz_client_cancelled(r->c))
			return gaz_status_set(st, GAZ_ECANCELLED, "cancelled");
		if (!r->retry || (rc == GAZ_EOF && r->req.end_offset != 0 &&
				  r->req.offset >= r->req.end_offset))
			return rc < 0 ? gaz_status_set(st, rc, "%s", lst.msg) : rc;
		verdict = gaz__read_policy(rc, r->fail_status, r->req.block, &r->attempt);
		if (verdict == GAZ__READ_SURFACE)
			return rc < 0 ? gaz_status_set(st, rc, "%s", lst.msg) : rc;
		if (verdict == GAZ__READ_RETRY)
			gaz_warn("read failure (will retry)", "journal=%s offset=%lld err=%s attempt=%d",
				 r->journal, (long long)r->req.offset, lst.msg, r->attempt);
		if (r->w) {
			r->retry_at = gaz_mono_ns() + gaz_client_backoff_ms(r->attempt) * GAZ_NS_PER_MS;
			continue; /* the check above answers GAZ_READ_WAIT */
		}
		if (gaz__client_sleep(r->c, gaz_client_backoff_ms(r->attempt)))
			return gaz_status_set(st, GAZ_ECANCELLED, "cancelled");
	}
}

int gaz_reader_read(struct gaz_reader *r, void *buf, size_t cap, size_t *n,
		    struct gaz_status *st)
{
	/* A read counts its retries from its own start. */
	r->attempt = 0;
	r->retry_at = 0;
	r->w = NULL;
	return retry_read(r, buf, cap, n, st);
}

int gaz_reader_try_read(struct gaz_reader *r, void *buf, size_t cap, size_t *n,
			struct gaz_reader_wake *w, struct gaz_status *st)
{
	int rc;

	r->w = w;
	rc = retry_read(r, buf, cap, n, st);
	r->w = NULL;
	if (rc != GAZ_READ_WAIT) /* the read is over: the next counts afresh */
		r->attempt = 0;
	return rc;
}
