/* pipeline.c - Replicate streams from a primary to its peers. See
 * pipeline.h.
 *
 * Sends come from the holder of the replica's append token; gathers come
 * in ticket order from whichever thread proposed (an append that released
 * the token after proposing its commit, or the token holder). So several
 * appends may be in flight: the next one streams while the previous one
 * awaits its acknowledgements (facts §6.4's ordered read barrier).
 * Lock order: only `mu` (never held across stream I/O).
 */
#include "broker/pipeline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "broker/proxy.h"
#include "common/clock.h"
#include "common/log.h"
#include "protocol/auth.h"

#define GATHER_TIMEOUT_MS 30000 /* a peer that never answers fails the append */

struct peer {
	struct gaz_rpc_stream *s;
	Protocol__Header *header;    /* the resolved header, naming this peer */
	bool sent_first;
};

struct gaz_pipeline {
	struct gaz_route route;      /* members and primary it was built for */
	char *journal;
	struct peer *peers;
	size_t n;

	pthread_mutex_t mu;
	pthread_cond_t cv;           /* a gather done, failure, or a ref dropped */
	int refs;                    /* the owner's, and one per gatherer without the token */
	uint64_t sent;               /* acknowledged proposals sent (next ticket) */
	uint64_t gathered;           /* tickets gathered, in order */
	bool failed;                 /* a gather failed: later ones fail at once */
	bool gathering;              /* some thread is receiving from the peers */
	/* gaz_pipeline_gather_async: the gather in progress is the pollers'. */
	gaz_pipeline_gathered_fn async_fn;
	void *async_arg;
	size_t async_left;           /* peers yet to answer, plus one while starting */
};

size_t gaz_pipeline_peers(const struct gaz_pipeline *p) { return p->n; }

bool gaz_pipeline_matches(const struct gaz_pipeline *p, const struct gaz_route *route)
{
	return gaz_route_equivalent(&p->route, route);
}

/* cut_locked (p->mu held) fails the pipeline and, while a gather is
 * receiving, cancels its streams so that it ends now. */
static void cut_locked(struct gaz_pipeline *p)
{
	p->failed = true;
	if (p->gathering)
		for (size_t i = 0; i < p->n; i++)
			if (p->peers[i].s)
				gaz_rpc_stream_cancel(p->peers[i].s);
	pthread_cond_broadcast(&p->cv);
}

/* Copies a route's members and primary (no endpoints kept). */
static int route_copy(struct gaz_route *dst, const struct gaz_route *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->primary = src->primary;
	dst->zone = calloc(src->n + 1, sizeof(char *));
	dst->suffix = calloc(src->n + 1, sizeof(char *));
	dst->endpoint = calloc(src->n + 1, sizeof(char *));
	if (!dst->zone || !dst->suffix || !dst->endpoint)
		return GAZ_ENOMEM;
	for (size_t i = 0; i < src->n; i++, dst->n++) {
		dst->zone[i] = strdup(src->zone[i]);
		dst->suffix[i] = strdup(src->suffix[i]);
		dst->endpoint[i] = strdup(src->endpoint[i]);
	}
	return 0;
}

static void pipeline_free(struct gaz_pipeline *p)
{
	for (size_t i = 0; i < p->n; i++) {
		struct peer *pe = &p->peers[i];
		if (pe->s) {
			ProtobufCMessage *m = NULL;
			/* Half-close; the replica rolls back anything uncommitted and
			 * ends the stream. Drain what is left, bounded. */
			gaz_rpc_stream_close_send(pe->s);
			while (gaz_rpc_stream_recv(pe->s, &protocol__replicate_response__descriptor, &m,
						   gaz_deadline_in(2000)) == 0)
				protobuf_c_message_free_unpacked(m, NULL), m = NULL;
			gaz_rpc_stream_free(pe->s);
		}
		gaz_header_free(pe->header);
	}
	free(p->peers);
	gaz_route_release(&p->route);
	free(p->journal);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

void gaz_pipeline_close(struct gaz_pipeline *p)
{
	if (!p)
		return;
	int64_t deadline = gaz_deadline_in(GATHER_TIMEOUT_MS);

	pthread_mutex_lock(&p->mu);
	/* Appends that let go of the token get their acknowledgements first
	 * (a gather by the pollers is bounded here); after a failure, a
	 * gather still receiving is cut short. */
	while (p->refs > 1 && !p->failed) {
		struct timespec ts = gaz_abstime_of(deadline);
		if (pthread_cond_timedwait(&p->cv, &p->mu, &ts) == ETIMEDOUT)
			break;
	}
	cut_locked(p);
	while (p->refs > 1)
		pthread_cond_wait(&p->cv, &p->mu);
	pthread_mutex_unlock(&p->mu);
	pipeline_free(p);
}

void gaz_pipeline_ref(struct gaz_pipeline *p)
{
	pthread_mutex_lock(&p->mu);
	p->refs++;
	pthread_mutex_unlock(&p->mu);
}

void gaz_pipeline_unref(struct gaz_pipeline *p)
{
	pthread_mutex_lock(&p->mu);
	p->refs--;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

void gaz_pipeline_abandon(struct gaz_pipeline *p)
{
	pthread_mutex_lock(&p->mu);
	p->failed = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

void gaz_pipeline_cancel(struct gaz_pipeline *p)
{
	pthread_mutex_lock(&p->mu);
	cut_locked(p);
	pthread_mutex_unlock(&p->mu);
}

bool gaz_pipeline_failed(struct gaz_pipeline *p)
{
	bool f;

	pthread_mutex_lock(&p->mu);
	f = p->failed;
	pthread_mutex_unlock(&p->mu);
	return f;
}

int gaz_pipeline_open(struct gaz_broker *b, const struct gaz_resolution *res,
		      struct gaz_pipeline **out, struct gaz_status *st)
{
	struct gaz_pipeline *p = calloc(1, sizeof(*p));
	int rc = 0;

	if (!p)
		return gaz_status_set(st, GAZ_ENOMEM, "pipeline: out of memory");
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	p->refs = 1;
	if (route_copy(&p->route, &res->route) || !(p->journal = strdup(res->journal)) ||
	    !(p->peers = calloc(res->route.n + 1, sizeof(*p->peers)))) {
		gaz_pipeline_close(p);
		return gaz_status_set(st, GAZ_ENOMEM, "pipeline: out of memory");
	}
	/* Headers borrow their route strings from our own copy of the route,
	 * which lives as long as the pipeline. */
	struct gaz_resolution view = *res;
	view.route = p->route;
	for (size_t i = 0; i < p->route.n && !rc; i++) {
		struct gaz_rpc_channel *ch;
		struct peer *pe;
		char *auth = NULL;
		if ((int)i == res->local_index)
			continue;
		pe = &p->peers[p->n++];
		pe->header = gaz_header_build(b, &view);
		if (!pe->header) {
			rc = gaz_status_set(st, GAZ_ENOMEM, "pipeline: out of memory");
			break;
		}
		pe->header->process_id->zone = p->route.zone[i];
		pe->header->process_id->suffix = p->route.suffix[i];
		if (!p->route.endpoint[i][0] || !(ch = gaz_peer_channel(b, p->route.endpoint[i])))
			rc = gaz_status_set(st, GAZ_EUNAVAIL, "peer %s#%s has no endpoint",
					    p->route.zone[i], p->route.suffix[i]);
		else if (!(auth = gaz_broker_sign(b, GAZ_CAP_REPLICATE, p->journal)) && b->auth)
			rc = gaz_status_set(st, GAZ_ENOMEM, "pipeline: signing a token");
		/* Lazy: an idle pipeline holds no op in flight (its status
		 * is asked for when a gather finds the stream's end). */
		else if (!(pe->s = gaz_rpc_stream_open_lazy(ch, "/protocol.Journal/Replicate",
							    GAZ_DEADLINE_NEVER, false, auth, st)))
			rc = GAZ_EUNAVAIL;
		else /* the token holder never waits for a send to complete:
		      * content and proposal queue behind each other per peer,
		      * and every peer gets its proposal at once */
			gaz_rpc_stream_queue_sends(pe->s);
		free(auth);
	}
	if (rc) {
		gaz_pipeline_close(p);
		return rc;
	}
	*out = p;
	return 0;
}

int gaz_pipeline_propose(struct gaz_pipeline *p, const Protocol__Fragment *proposal,
			 const Protocol__LabelSet *registers, uint64_t *ticket, struct gaz_status *st)
{
	for (size_t i = 0; i < p->n; i++) {
		Protocol__ReplicateRequest m = PROTOCOL__REPLICATE_REQUEST__INIT;
		struct peer *pe = &p->peers[i];
		m.proposal = (Protocol__Fragment *)proposal;
		m.registers = (Protocol__LabelSet *)registers;
		m.acknowledge = true;
		if (!pe->sent_first) {
			m.header = pe->header;
			m.deprecated_journal = p->journal;
		}
		if (gaz_rpc_stream_send(pe->s, &m.base))
			return gaz_status_set(st, GAZ_EUNAVAIL, "replication to %s#%s failed",
					      pe->header->process_id->zone, pe->header->process_id->suffix);
		pe->sent_first = true;
	}
	pthread_mutex_lock(&p->mu);
	*ticket = p->sent++;
	pthread_mutex_unlock(&p->mu);
	return 0;
}

int gaz_pipeline_content(struct gaz_pipeline *p, const uint8_t *data, size_t len, int64_t delta,
			 struct gaz_status *st)
{
	Protocol__ReplicateRequest m = PROTOCOL__REPLICATE_REQUEST__INIT;
	struct gaz_rpc_packed *packed;
	int rc = 0;

	m.content.data = (uint8_t *)data;
	m.content.len = len;
	m.content_delta = delta;
	if (!(packed = gaz_rpc_pack_msg(&m.base))) /* once for every peer */
		return gaz_status_set(st, GAZ_ENOMEM, "replication: out of memory");
	/* Content is of no use to a peer before the proposal that commits it:
	 * it may wait in the transport to go out in the proposal's write, so
	 * the peer reads both at once (one write and one wake-up a peer per
	 * small commit instead of two). */
	for (size_t i = 0; i < p->n && !rc; i++)
		if (gaz_rpc_stream_send_packed(p->peers[i].s, packed, true))
			rc = gaz_status_set(st, GAZ_EUNAVAIL, "replication to %s#%s failed",
					    p->peers[i].header->process_id->zone,
					    p->peers[i].header->process_id->suffix);
	gaz_rpc_packed_free(packed);
	return rc;
}

/* peer_failed: no acknowledgement from `pe` (its receive returned
 * `err`). When the peer ended the stream, its status says why (a
 * replica whose spool's disk failed names the errno there), and st
 * carries it to the append's answer. */
static int peer_failed(struct peer *pe, int err, bool may_wait, struct gaz_status *st)
{
	struct gaz_status fin = {0};
	const char *zone = pe->header->process_id->zone, *suffix = pe->header->process_id->suffix;

	if (err == GAZ_EOF &&
	    (may_wait ? gaz_rpc_stream_finish(pe->s, &fin) : gaz_rpc_stream_status_now(pe->s, &fin)) &&
	    fin.msg[0])
		return gaz_status_set(st, GAZ_EUNAVAIL, "no acknowledgement from %s#%s: %s", zone,
				      suffix, fin.msg);
	return gaz_status_set(st, GAZ_EUNAVAIL, "no acknowledgement from %s#%s", zone, suffix);
}

int gaz_pipeline_gather(struct gaz_pipeline *p, uint64_t ticket,
			Protocol__ReplicateResponse **resp, struct gaz_status *st)
{
	int64_t turn_deadline = gaz_deadline_in(GATHER_TIMEOUT_MS), recv_deadline;
	int rc = 0;
	bool turn;

	for (size_t i = 0; i < p->n; i++)
		resp[i] = NULL;
	pthread_mutex_lock(&p->mu);
	while (p->gathered != ticket && !p->failed) {
		struct timespec ts = gaz_abstime_of(turn_deadline);
		if (pthread_cond_timedwait(&p->cv, &p->mu, &ts) == ETIMEDOUT &&
		    p->gathered != ticket) {
			p->failed = true; /* an earlier proposal is never gathered */
			pthread_cond_broadcast(&p->cv);
		}
	}
	if (p->failed)
		rc = gaz_status_set(st, GAZ_EUNAVAIL, "replication pipeline failed");
	turn = p->gathering = !rc;
	pthread_mutex_unlock(&p->mu);
	recv_deadline = gaz_deadline_in(GATHER_TIMEOUT_MS);
	/* Every peer's answer is received as it comes; this thread wakes for
	 * the first one it waits for, and usually finds the rest in. */
	for (size_t i = 0; i < p->n && !rc; i++)
		gaz_rpc_stream_recv_ahead(p->peers[i].s);
	/* A failed peer does not end the gather: the others' answers are
	 * still received (within the same deadline), as a failed sync must
	 * know which peers rolled forward onto the primary's end. */
	for (size_t i = 0; turn && i < p->n; i++) {
		int err = gaz_rpc_stream_recv(p->peers[i].s, &protocol__replicate_response__descriptor,
					      (ProtobufCMessage **)&resp[i], recv_deadline);
		if (err && !rc)
			rc = peer_failed(&p->peers[i], err, true, st);
	}
	pthread_mutex_lock(&p->mu);
	if (p->gathering) {
		p->gathering = false;
		p->gathered++;
		p->failed |= rc != 0;
	}
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return rc;
}

bool gaz_pipeline_idle(struct gaz_pipeline *p)
{
	bool idle;

	pthread_mutex_lock(&p->mu);
	idle = !p->failed && !p->gathering && p->gathered == p->sent;
	pthread_mutex_unlock(&p->mu);
	return idle;
}

/* async_done ends the pollers' gather once every peer answered: takes
 * each answer (already received), then hands them to the callback. */
static void async_done(struct gaz_pipeline *p)
{
	Protocol__ReplicateResponse **resp = calloc(p->n + 1, sizeof(*resp));
	gaz_pipeline_gathered_fn fn;
	struct gaz_status st = {0};
	void *arg;
	int rc = resp ? 0 : gaz_status_set(&st, GAZ_ENOMEM, "out of memory");

	for (size_t i = 0; i < p->n && !rc; i++) {
		int err = gaz_rpc_stream_recv(p->peers[i].s, &protocol__replicate_response__descriptor,
					      (ProtobufCMessage **)&resp[i], gaz_mono_ns());
		if (err)
			rc = peer_failed(&p->peers[i], err, false, &st);
	}
	pthread_mutex_lock(&p->mu);
	fn = p->async_fn;
	arg = p->async_arg;
	p->async_fn = NULL;
	p->gathering = false;
	p->gathered++;
	p->failed |= rc != 0;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	if (rc)
		gaz_warn("replication pipeline failed", "journal=%s err=%s", p->journal, st.msg);
	fn(arg, rc, rc ? st.msg : NULL, rc ? NULL : resp);
	for (size_t i = 0; resp && i < p->n; i++)
		if (resp[i])
			protobuf_c_message_free_unpacked(&resp[i]->base, NULL);
	free(resp);
	gaz_pipeline_unref(p); /* may let a close go on: p is not touched after */
}

/* A peer's answer (or its stream's end) is in. */
static void async_peer_in(void *arg)
{
	struct gaz_pipeline *p = arg;
	bool last;

	pthread_mutex_lock(&p->mu);
	last = --p->async_left == 0;
	pthread_mutex_unlock(&p->mu);
	if (last)
		async_done(p);
}

int gaz_pipeline_gather_async(struct gaz_pipeline *p, uint64_t ticket, gaz_pipeline_gathered_fn fn,
			      void *arg)
{
	bool failed;

	pthread_mutex_lock(&p->mu);
	if (p->gathered != ticket || p->gathering) {
		pthread_mutex_unlock(&p->mu);
		return GAZ_EINVAL;
	}
	failed = p->failed;
	if (!failed) {
		p->gathering = true;
		p->refs++;
		p->async_fn = fn;
		p->async_arg = arg;
		p->async_left = p->n + 1;
	}
	pthread_mutex_unlock(&p->mu);
	if (failed) {
		fn(arg, GAZ_EUNAVAIL, "replication pipeline failed", NULL);
		return 0;
	}
	for (size_t i = 0; i < p->n; i++)
		gaz_rpc_stream_recv_notify(p->peers[i].s, async_peer_in, p);
	async_peer_in(p); /* the starting count: the last answer may be in */
	return 0;
}
