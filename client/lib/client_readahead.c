/*
 * client_readahead.c - the next persisted fragment of a direct read,
 * fetched and decoded ahead on a thread of its own (client_read.c starts
 * it while its caller consumes the fragment before).
 *
 * A read-ahead is one fragment and one thread:
 *
 *   ASKING --OK metadata + URL, clean end--> META --decoding--> ... done
 *      |                                        (ring full: wait)
 *      +--anything else--> NONE (done; the reader asks again itself)
 *
 * The thread sends the reader's ReadRequest at the fragment's offset
 * (block cleared), and only a plain "read it from the store" answer makes
 * it fetch; it then decodes into a ring of `cap` bytes that the reader
 * drains. Memory is bounded by `cap` plus the fetch's transfer buffer and
 * the decoder's state. Errors of the fetch or the decoder are kept and
 * returned by gaz__readahead_read once the ring is drained, which is when
 * the caller reaches the bytes that failed.
 *
 * Invariants: consumed <= produced <= consumed + cap; the thread writes
 * only [produced, consumed + cap) of the ring and the reader reads only
 * [consumed, produced), each outside `mu` (the counters move under it).
 * The answer (`resp`) belongs to the thread until `state` leaves ASKING.
 * Calls no other client_*.c file but client_core.c's call helpers and
 * client_fetch.c's fragment reader.
 */
#include <stdlib.h>
#include <string.h>

#include "client/lib/client_int.h"
#include "common/clock.h"

#define RA_PATH "/protocol.Journal/Read"
#define RA_CHUNK (1u << 20) /* most bytes decoded per step */

enum ra_state { RA_ASKING, RA_META, RA_NONE };

struct gaz__readahead {
	struct gaz_client *c;
	Protocol__ReadRequest req;     /* own copy; journal points at `journal` */
	char *journal;
	int64_t offset;                /* the offset it was started for */
	pthread_t tid;
	atomic_bool stop;              /* set by free: the thread winds down */
	pthread_mutex_t mu;
	pthread_cond_t cv;             /* any change below */
	enum ra_state state;           /* mu */
	Protocol__ReadResponse *resp;  /* RA_META: the answer, until taken */
	bool taken;
	uint8_t *ring;
	size_t cap;                    /* ring bytes */
	uint64_t produced, consumed;   /* mu: decoded bytes in / out of the ring */
	bool done;                     /* mu: the thread ended; `err` is final */
	struct gaz_status err;         /* code 0: the fragment's clean end */
};

/* ---- the thread ------------------------------------------------------------ */

/* ra_recv receives the next response, waking to look at `stop` and the
 * client's cancellation. */
static int ra_recv(struct gaz__readahead *ra, struct gaz_rpc_stream *s,
		   Protocol__ReadResponse **out)
{
	for (;;) {
		int rc;
		if (atomic_load(&ra->stop) || gaz_client_cancelled(ra->c)) {
			gaz_rpc_stream_cancel(s);
			return GAZ_ECANCELLED;
		}
		rc = gaz_rpc_stream_recv(s, &protocol__read_response__descriptor,
					 (ProtobufCMessage **)out, gaz_deadline_in(GAZ__CLIENT_POLL_MS));
		if (rc != GAZ_ETIMEDOUT)
			return rc;
	}
}

/* ra_ask sends the request; 0 and *out only for an OK metadata answer with
 * a fragment URL after which the stream ended with an OK status. */
static int ra_ask(struct gaz__readahead *ra, Protocol__ReadResponse **out)
{
	struct gaz__client_call call = {0};
	struct gaz__dispatch d;
	struct gaz_status st = {0};
	Protocol__ReadResponse *resp = NULL, *more = NULL;
	int rc;

	gaz__client_dispatch(ra->c, ra->journal, false, NULL, &d);
	if (gaz__client_open(ra->c, &d, RA_PATH, gaz__client_deadline(ra->c), false, &call, &st))
		return GAZ__RA_NONE;
	rc = gaz_rpc_stream_send(call.stream, &ra->req.base);
	if (rc == 0)
		rc = gaz_rpc_stream_close_send(call.stream);
	if (rc == 0)
		rc = ra_recv(ra, call.stream, &resp);
	if (rc == 0 && (gaz__check_read_response(resp, ra->offset, &st) ||
			resp->status != PROTOCOL__STATUS__OK || resp->content.len ||
			!resp->fragment || !resp->fragment_url || !*resp->fragment_url))
		rc = GAZ__RA_NONE;
	if (rc == 0 && (rc = ra_recv(ra, call.stream, &more)) == GAZ_EOF)
		rc = gaz_rpc_stream_finish(call.stream, &st) ? GAZ__RA_NONE : 0;
	else if (rc == 0)
		rc = GAZ__RA_NONE; /* more than the answer: not a fragment to fetch */
	if (more)
		protobuf_c_message_free_unpacked(&more->base, NULL);
	gaz__client_close(ra->c, &call);
	if (rc && resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	if (rc == 0)
		*out = resp;
	return rc;
}

/* ra_wait_space waits for free ring bytes; the count, or 0 when stopped. */
static size_t ra_wait_space(struct gaz__readahead *ra)
{
	size_t room;

	pthread_mutex_lock(&ra->mu);
	while ((room = ra->cap - (size_t)(ra->produced - ra->consumed)) == 0 &&
	       !atomic_load(&ra->stop))
		pthread_cond_wait(&ra->cv, &ra->mu);
	pthread_mutex_unlock(&ra->mu);
	return atomic_load(&ra->stop) ? 0 : room;
}

/* ra_decode fills the ring from the fragment until its end or an error;
 * returns GAZ_EOF at the clean end, else the error (in st). */
static int ra_decode(struct gaz__readahead *ra, struct gaz__frag_reader *fr,
		     struct gaz_status *st)
{
	for (;;) {
		size_t room = ra_wait_space(ra), at, n = 0;
		int rc;

		if (room == 0)
			return gaz_status_set(st, GAZ_ECANCELLED, "cancelled");
		at = (size_t)(ra->produced % ra->cap); /* only this thread moves it */
		if (room > ra->cap - at)
			room = ra->cap - at;
		if (room > RA_CHUNK)
			room = RA_CHUNK;
		if ((rc = gaz__frag_read(fr, ra->ring + at, room, &n, st)))
			return rc;
		pthread_mutex_lock(&ra->mu);
		ra->produced += n;
		pthread_cond_broadcast(&ra->cv);
		pthread_mutex_unlock(&ra->mu);
	}
}

/* ra_fetch opens the answered fragment and decodes it into the ring. */
static void ra_fetch(struct gaz__readahead *ra, const struct gaz_fragment *f, int64_t offset,
		     const char *url, struct gaz_status *st)
{
	struct gaz__frag_reader *fr = NULL;
	int rc = gaz__frag_open(ra->c, f, offset, url, &ra->stop, &fr, st);

	if (rc == 0)
		rc = ra_decode(ra, fr, st);
	gaz__frag_close(fr);
	if (rc == GAZ_EOF)
		gaz_status_clear(st);
}

static void *ra_main(void *arg)
{
	struct gaz__readahead *ra = arg;
	Protocol__ReadResponse *resp = NULL;
	struct gaz_fragment f = {0};
	struct gaz_status st = {0};
	char *url = NULL;
	int64_t offset = ra->offset;
	bool fetch = ra_ask(ra, &resp) == 0;

	if (fetch) { /* what the fetch needs, copied before resp is handed over */
		offset = resp->offset > offset ? resp->offset : offset;
		fetch = (url = strdup(resp->fragment_url)) &&
			gaz_fragment_from_proto(&f, resp->fragment, &st) == 0;
		if (!fetch)
			gaz_status_set(&st, GAZ_ENOMEM, "out of memory reading ahead");
	}
	pthread_mutex_lock(&ra->mu);
	ra->state = resp ? RA_META : RA_NONE;
	ra->resp = resp;
	pthread_cond_broadcast(&ra->cv);
	pthread_mutex_unlock(&ra->mu);
	if (fetch)
		ra_fetch(ra, &f, offset, url, &st);
	gaz_fragment_release(&f);
	free(url);
	pthread_mutex_lock(&ra->mu);
	ra->err = st;
	ra->done = true;
	pthread_cond_broadcast(&ra->cv);
	pthread_mutex_unlock(&ra->mu);
	return NULL;
}

/* ---- the reader's side -------------------------------------------------------- */

/* ra_release frees a read-ahead whose thread is not running; returns the ring. */
static uint8_t *ra_release(struct gaz__readahead *ra)
{
	uint8_t *ring = ra->ring;

	if (ra->resp)
		protobuf_c_message_free_unpacked(&ra->resp->base, NULL);
	pthread_cond_destroy(&ra->cv);
	pthread_mutex_destroy(&ra->mu);
	free(ra->journal);
	free(ra);
	return ring;
}

int gaz__readahead_start(struct gaz_client *c, const Protocol__ReadRequest *rq, int64_t offset,
			 size_t cap, uint8_t *ring, struct gaz__readahead **out)
{
	struct gaz__readahead *ra = calloc(1, sizeof(*ra));

	if (!ra || !(ra->journal = strdup(rq->journal)) || (!ring && !(ring = malloc(cap)))) {
		if (ra)
			free(ra->journal);
		free(ra);
		free(ring);
		return GAZ_ENOMEM;
	}
	ra->c = c;
	ra->req = *rq;
	ra->req.journal = ra->journal;
	ra->req.offset = ra->offset = offset;
	ra->req.block = false;
	ra->ring = ring;
	ra->cap = cap;
	ra->state = RA_ASKING;
	atomic_init(&ra->stop, false);
	pthread_mutex_init(&ra->mu, NULL);
	pthread_cond_init(&ra->cv, NULL);
	if (pthread_create(&ra->tid, NULL, ra_main, ra)) {
		free(ra_release(ra));
		return GAZ_EIO;
	}
	*out = ra;
	return 0;
}

int64_t gaz__readahead_offset(const struct gaz__readahead *ra)
{
	return ra->offset;
}

int gaz__readahead_take(struct gaz__readahead *ra, Protocol__ReadResponse **resp)
{
	int rc;

	pthread_mutex_lock(&ra->mu);
	while (ra->state == RA_ASKING)
		pthread_cond_wait(&ra->cv, &ra->mu); /* the thread honours cancellation */
	rc = ra->state == RA_META && !ra->taken ? 0 : GAZ__RA_NONE;
	if (rc == 0) {
		*resp = ra->resp;
		ra->resp = NULL;
		ra->taken = true;
	}
	pthread_mutex_unlock(&ra->mu);
	if (rc == GAZ__RA_NONE && gaz_client_cancelled(ra->c))
		rc = GAZ_ECANCELLED;
	return rc;
}

int gaz__readahead_read(struct gaz__readahead *ra, void *buf, size_t cap, size_t *n,
			struct gaz_status *st)
{
	size_t avail, at;

	*n = 0;
	pthread_mutex_lock(&ra->mu);
	while (ra->produced == ra->consumed && !ra->done)
		pthread_cond_wait(&ra->cv, &ra->mu);
	avail = (size_t)(ra->produced - ra->consumed);
	if (avail == 0) {
		int code = ra->err.code;
		pthread_mutex_unlock(&ra->mu);
		return code ? gaz_status_set(st, code, "%s", ra->err.msg) : GAZ_EOF;
	}
	pthread_mutex_unlock(&ra->mu);
	at = (size_t)(ra->consumed % ra->cap);
	if (avail > ra->cap - at)
		avail = ra->cap - at;
	*n = avail < cap ? avail : cap;
	memcpy(buf, ra->ring + at, *n);
	pthread_mutex_lock(&ra->mu);
	ra->consumed += *n;
	pthread_cond_broadcast(&ra->cv);
	pthread_mutex_unlock(&ra->mu);
	return 0;
}

uint8_t *gaz__readahead_free(struct gaz__readahead *ra)
{
	if (!ra)
		return NULL;
	pthread_mutex_lock(&ra->mu);
	atomic_store(&ra->stop, true);
	pthread_cond_broadcast(&ra->cv);
	pthread_mutex_unlock(&ra->mu);
	pthread_join(ra->tid, NULL);
	return ra_release(ra);
}
