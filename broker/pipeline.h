/*
 * pipeline.h - the primary's replication pipeline of one journal (facts
 * §6.4): one long-lived Replicate stream to every other route member,
 * reused by successive appends while the route stays equivalent. Sends
 * are scattered to every peer; receives gather one response per peer, in
 * stream order. Owned by the holder of the replica's append token.
 */
#ifndef GAZ_BROKER_PIPELINE_H
#define GAZ_BROKER_PIPELINE_H

#include "broker/broker.h"

struct gaz_pipeline;

/* gaz_pipeline_open opens a Replicate stream to each route member other
 * than this broker. Nothing is sent yet. Returns 0, or GAZ_EUNAVAIL when a
 * peer has no endpoint or cannot be called. */
int gaz_pipeline_open(struct gaz_broker *b, const struct gaz_resolution *res,
		      struct gaz_pipeline **out, struct gaz_status *st);

/* gaz_pipeline_close waits for the appends that let go of the token to
 * gather their acknowledgements (cutting them short after a failure),
 * half-closes every stream, drains them and frees. Token holder only. */
void gaz_pipeline_close(struct gaz_pipeline *p);

/* gaz_pipeline_ref / _unref: an append that lets go of the token before
 * gathering its commit's acknowledgements holds a reference meanwhile, so
 * that a close by the next token holder waits for it. */
void gaz_pipeline_ref(struct gaz_pipeline *p);
void gaz_pipeline_unref(struct gaz_pipeline *p);

/* gaz_pipeline_abandon marks the pipeline failed (a proposal was sent
 * that will never be gathered): waiting gathers end. Token holder. */
void gaz_pipeline_abandon(struct gaz_pipeline *p);

/* gaz_pipeline_cancel marks the pipeline failed and, while a gather is
 * receiving, cancels its streams, so that the gather ends now (a pulse
 * gathered by the pollers that went unanswered too long, pulse.c). Any
 * thread; the caller keeps `p` alive (the gather holds a reference). */
void gaz_pipeline_cancel(struct gaz_pipeline *p);

/* gaz_pipeline_failed: a gather failed; the pipeline must be rebuilt. */
bool gaz_pipeline_failed(struct gaz_pipeline *p);

/* gaz_pipeline_matches: built for a route equivalent to `route`. */
bool gaz_pipeline_matches(const struct gaz_pipeline *p, const struct gaz_route *route);

/* gaz_pipeline_propose scatters a proposal, always acknowledged, and
 * stores in *ticket its place in the order of gathers. The first message
 * of each stream also carries its peer's Header and the deprecated journal
 * field. Token holder only. Sends queue behind the one in flight to each
 * peer (the caller does not wait for them to go out): a send that fails
 * after it was queued shows at a later send or at the gather. Returns 0
 * or GAZ_EUNAVAIL. */
int gaz_pipeline_propose(struct gaz_pipeline *p, const Protocol__Fragment *proposal,
			 const Protocol__LabelSet *registers, uint64_t *ticket, struct gaz_status *st);

/* gaz_pipeline_content scatters a content chunk at `delta`. */
int gaz_pipeline_content(struct gaz_pipeline *p, const uint8_t *data, size_t len, int64_t delta,
			 struct gaz_status *st);

/* gaz_pipeline_gather waits until every earlier ticket was gathered, then
 * receives one response per peer into resp[i] (caller frees each with
 * protobuf_c_message_free_unpacked); resp has gaz_pipeline_peers(p)
 * slots. Any thread may gather: the token holder, or an append holding a
 * reference (gaz_pipeline_ref). Returns 0, or
 * GAZ_EUNAVAIL when a peer failed now or an earlier gather failed; after
 * a peer failed now, resp[i] still holds each other peer's answer (NULL
 * for the peers that gave none), all received by one deadline. */
int gaz_pipeline_gather(struct gaz_pipeline *p, uint64_t ticket,
			Protocol__ReplicateResponse **resp, struct gaz_status *st);

size_t gaz_pipeline_peers(const struct gaz_pipeline *p);

/* gaz_pipeline_idle: not failed, and every proposal sent was gathered. */
bool gaz_pipeline_idle(struct gaz_pipeline *p);

/* A gather's outcome: rc 0 with one response per peer in resp[] (borrowed
 * for the call), or the gather's error with resp NULL and `why` (borrowed
 * for the call: the failed peer, and its own status text when it ended
 * its stream with one). */
typedef void (*gaz_pipeline_gathered_fn)(void *arg, int rc, const char *why,
					 Protocol__ReplicateResponse **resp);

/* gaz_pipeline_gather_async gathers `ticket` without a waiting thread:
 * fn(arg, ...) runs once every peer's answer is in, on the poller that
 * received the last one (or on this thread when they are in already, or
 * at once with GAZ_EUNAVAIL when the pipeline failed). It holds a
 * reference on the pipeline until fn returns, so a close waits for it, at
 * most the gather timeout (then the peers' streams are cancelled and fn
 * gets GAZ_EUNAVAIL). The caller must not touch what fn releases after
 * this call. Token holder, the ticket being the next to gather. Returns
 * 0, or GAZ_EINVAL (fn not called) when it is not: an earlier ticket is
 * still to be gathered. */
int gaz_pipeline_gather_async(struct gaz_pipeline *p, uint64_t ticket, gaz_pipeline_gathered_fn fn,
			      void *arg);

#endif
