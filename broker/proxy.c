/*
 * proxy.c - channels to peer brokers and the forwarding of Read, Append
 * and ListFragments to the member that must serve them.
 *
 * Locks: peers_mu guards the peer channel cache (and the retired channels
 * and the peer TLS files' last fingerprint); it is held for a lookup and
 * while a channel is made, and no other lock is taken under it.
 */
#include "broker/proxy.h"

#include <stdlib.h>
#include <string.h>

#include "broker/append_int.h"
#include "broker/metrics.h"
#include "common/clock.h"
#include "common/log.h"
#include "protocol/auth.h"
#include "protocol/validate.h"

struct peer {
	char *endpoint;
	struct gaz_rpc_channel *ch;
	uint64_t tls_version; /* of the --broker.peer-* files ch was made with */
};

/* Locks: peers_mu guards everything below; held only for lookups and
 * channel creation (which reads the TLS files). */
static pthread_mutex_t peers_mu = PTHREAD_MUTEX_INITIALIZER;
static struct peer *peers;
static size_t n_peers;
/* Channels replaced after the peer files changed: callers may still hold
 * them (borrowed until gaz_peers_close), so they are freed only there. */
static struct gaz_rpc_channel **retired;
static size_t n_retired;
static uint64_t tls_version;     /* of the peer files at the last check */
static int64_t tls_next_check_ns;

/* peer_tls_version (peers_mu held) re-stats the peer files at most once
 * a second: a rotated certificate is then used by channels made after. */
static uint64_t peer_tls_version(struct gaz_broker *b)
{
	int64_t now = gaz_mono_ns();

	if (now >= tls_next_check_ns) {
		tls_version = gaz_rpc_tls_version(&b->peer_tls);
		tls_next_check_ns = now + GAZ_NS_PER_S;
	}
	return tls_version;
}

/* peer_renew (peers_mu held) replaces p's channel by one made with the
 * current files, when they changed since and the endpoint is https://. */
static void peer_renew(struct peer *p, const struct gaz_rpc_channel_opts *o, uint64_t version)
{
	struct gaz_rpc_channel *ch, **nr;

	if (p->tls_version == version || strncmp(p->endpoint, "https://", 8))
		return;
	if (!(nr = realloc(retired, (n_retired + 1) * sizeof(*retired))))
		return;
	retired = nr;
	p->tls_version = version; /* tried once per change of the files */
	if (!(ch = gaz_rpc_channel_new(p->endpoint, o)))
		return; /* files that do not load (logged): keep the channel we have */
	retired[n_retired++] = p->ch;
	p->ch = ch;
	gaz_info("peer TLS files changed; new channel", "endpoint=%s", p->endpoint);
}

/* peer_channel returns the cached channel to `endpoint`, made on first
 * use (and again once the peer files changed). TLS by the endpoint's
 * scheme, with --broker.peer-* files, as Gazette's dispatched credentials
 * (protocol.NewDispatchedCredentials); `server_name` (NULL = the
 * endpoint's host) is the name its certificate must carry. */
static struct gaz_rpc_channel *peer_channel(struct gaz_broker *b, const char *endpoint,
					    const char *server_name)
{
	struct gaz_rpc_channel_opts o = {.max_recv_bytes = (int)b->cfg.max_grpc_recv_size * 4,
					 .peer = GAZ_RPC_PEER_BROKER, .tls = &b->peer_tls,
					 .tls_server_name = server_name};
	struct gaz_rpc_channel *ch = NULL;
	struct peer *np;
	uint64_t version;

	pthread_mutex_lock(&peers_mu);
	version = peer_tls_version(b);
	for (size_t i = 0; i < n_peers && !ch; i++) {
		if (strcmp(peers[i].endpoint, endpoint))
			continue;
		peer_renew(&peers[i], &o, version);
		ch = peers[i].ch;
	}
	if (!ch && (ch = gaz_rpc_channel_new(endpoint, &o)) &&
	    (np = realloc(peers, (n_peers + 1) * sizeof(*peers)))) {
		peers = np;
		peers[n_peers].endpoint = strdup(endpoint);
		peers[n_peers].ch = ch;
		peers[n_peers].tls_version = version;
		n_peers++;
	}
	pthread_mutex_unlock(&peers_mu);
	return ch;
}

struct gaz_rpc_channel *gaz_peer_channel(struct gaz_broker *b, const char *endpoint)
{
	return peer_channel(b, endpoint, NULL);
}

struct gaz_rpc_channel *gaz_self_channel(struct gaz_broker *b)
{
	int port = atomic_load(&b->listen_port);
	char target[300];

	/* cfg.port is not changed once serving starts: the unix path is it. */
	if (!strncmp(b->cfg.port, "unix://", 7))
		snprintf(target, sizeof(target), "%s", b->cfg.port);
	else if (port > 0)
		snprintf(target, sizeof(target), "%s://127.0.0.1:%d", b->tls ? "https" : "http", port);
	else
		return NULL;
	/* Over TLS our certificate is checked against our advertised host
	 * (the name it carries), as Gazette's loopback dials its endpoint. */
	return peer_channel(b, target, b->tls ? b->cfg.host : NULL);
}

void gaz_peers_close(void)
{
	pthread_mutex_lock(&peers_mu);
	for (size_t i = 0; i < n_peers; i++) {
		gaz_rpc_channel_free(peers[i].ch);
		free(peers[i].endpoint);
	}
	free(peers);
	peers = NULL;
	n_peers = 0;
	for (size_t i = 0; i < n_retired; i++)
		gaz_rpc_channel_free(retired[i]);
	free(retired);
	retired = NULL;
	n_retired = 0;
	pthread_mutex_unlock(&peers_mu);
}

const char *gaz_proxy_pick(struct gaz_broker *b, const struct gaz_resolution *res, int *index)
{
	const struct gaz_route *r = &res->route;
	int pick = res->process_index;

	/* Our own endpoint under another member's name is a stale route. */
	if (pick >= 0 && !strcmp(r->endpoint[pick], b->endpoint))
		pick = -1;

	for (size_t i = 0; pick < 0 && i < r->n; i++)
		if (!strcmp(r->zone[i], b->cfg.zone) && r->endpoint[i][0] &&
		    strcmp(r->endpoint[i], b->endpoint))
			pick = (int)i;
	for (size_t i = 0; pick < 0 && i < r->n; i++)
		if (r->endpoint[i][0] && strcmp(r->endpoint[i], b->endpoint))
			pick = (int)i;
	*index = pick;
	return pick >= 0 && r->endpoint[pick][0] ? r->endpoint[pick] : NULL;
}

/* Relays the upstream's status (or transport error) to our client. */
static void relay_answer(struct gaz_rpc_call *call, int rc, const struct gaz_status *st,
			 const ProtobufCMessage *resp, bool want_resp)
{
	if (rc && !resp)
		gaz_rpc_finish(call, NULL, st->grpc ? st->grpc : GAZ_GRPC_UNAVAILABLE, st->msg);
	else if (!resp && want_resp)
		gaz_rpc_finish(call, NULL, GAZ_GRPC_UNAVAILABLE, "the upstream ended without a response");
	else
		gaz_rpc_finish(call, resp, GAZ_GRPC_OK, NULL);
}

/* relay_finish waits for the upstream's status and relays it
 * (relay_answer). */
static void relay_finish(struct gaz_rpc_call *call, struct gaz_rpc_stream *s,
			 const ProtobufCMessage *resp, bool want_resp)
{
	struct gaz_status st = {0};
	int rc = gaz_rpc_stream_finish(s, &st);

	relay_answer(call, rc, &st, resp, want_resp);
}

/* A proxied Read, from the member we forward to back to our client.
 * States: PROXY_OPEN (gaz_proxy_read: the upstream stream opened and the
 * request sent), PROXY_WAIT (parked: the upstream's next message is
 * awaited by a receive notify, which wakes the call; or, with a full
 * response queue, room to send), PROXY_RELAY (proxy_resume: every
 * message received is sent on), PROXY_DONE (proxy_end). A proxied reader
 * at the write head holds no thread here, as it holds none upstream. */
struct proxy_read {
	struct gaz_rpc_call *call;
	struct gaz_rpc_stream *s;
	char *journal, *upstream; /* for the log */
	ProtobufCMessage *held;   /* received, waiting for room in our queue */
};

static void proxy_resume(struct gaz_rpc_call *call, void *arg);

/* proxy_end (PROXY_DONE): relays the upstream's end (rc GAZ_EOF) or
 * abandons it (the client went away, a send failed), then finishes the
 * call. The upstream is freed first: its receive notify may still be
 * running (it wakes our call, which must be alive then). */
static void proxy_end(struct proxy_read *p, int rc)
{
	struct gaz_status st = {0};
	int frc = 0;

	gaz_debug("proxied read ended", "journal=%s upstream=%s rc=%s", p->journal, p->upstream,
		  gaz_err_str(rc));
	if (rc == GAZ_EOF)
		frc = gaz_rpc_stream_finish(p->s, &st);
	else
		gaz_rpc_stream_cancel(p->s);
	gaz_rpc_stream_free(p->s);
	if (p->held)
		protobuf_c_message_free_unpacked(p->held, NULL);
	if (rc != GAZ_EOF)
		gaz_rpc_finish(p->call, NULL, GAZ_GRPC_CANCELLED, "proxied read ended");
	else if (frc)
		gaz_rpc_finish(p->call, NULL, st.grpc ? st.grpc : GAZ_GRPC_UNAVAILABLE, st.msg);
	else
		gaz_rpc_finish(p->call, NULL, GAZ_GRPC_OK, NULL);
	free(p->journal);
	free(p->upstream);
	free(p);
}

/* upstream_ready runs on a poller (or at once) when the upstream's next
 * receive completed: the parked call resumes to relay it. */
static void upstream_ready(void *arg)
{
	gaz_rpc_wake(((struct proxy_read *)arg)->call);
}

/* proxy_park (PROXY_WAIT): parks until the upstream's next message, or
 * with `for_room` until our response queue has room for p->held. */
static void proxy_park(struct proxy_read *p, bool for_room)
{
	if (!for_room)
		gaz_rpc_stream_recv_notify(p->s, upstream_ready, p);
	gaz_rpc_park(p->call, proxy_resume, p, GAZ_DEADLINE_NEVER, for_room ? GAZ_RPC_PARK_SEND : 0);
}

/* proxy_resume (PROXY_RELAY): sends on what was held and every message
 * already received, without waiting on either side, then parks again. */
static void proxy_resume(struct gaz_rpc_call *call, void *arg)
{
	struct proxy_read *p = arg;
	int rc = 0;

	if (gaz_rpc_poll(call) == GAZ_ECANCELLED) {
		proxy_end(p, GAZ_ECANCELLED);
		return;
	}
	for (;;) {
		if (!p->held) {
			rc = gaz_rpc_stream_recv(p->s, &protocol__read_response__descriptor, &p->held, 0);
			if (rc == GAZ_ETIMEDOUT) { /* not in yet: its notify wakes us */
				proxy_park(p, false);
				return;
			}
			if (rc)
				break;
		}
		if (!gaz_rpc_send_room(call)) {
			proxy_park(p, true);
			return;
		}
		rc = gaz_rpc_send(call, p->held);
		protobuf_c_message_free_unpacked(p->held, NULL);
		p->held = NULL;
		if (rc)
			break;
	}
	proxy_end(p, rc);
}

/* The blocking relay of a local call (which cannot park), on its runner's
 * thread. */
static void proxy_relay_blocking(struct proxy_read *p)
{
	int rc = 0;

	while (!rc) {
		ProtobufCMessage *m = NULL;
		rc = gaz_rpc_stream_recv(p->s, &protocol__read_response__descriptor, &m,
					 gaz_deadline_in(500));
		if (rc == GAZ_ETIMEDOUT) {
			rc = gaz_rpc_cancelled(p->call) ? GAZ_ECANCELLED : 0;
			continue;
		}
		if (rc)
			break;
		rc = gaz_rpc_send(p->call, m);
		protobuf_c_message_free_unpacked(m, NULL);
	}
	proxy_end(p, rc);
}

void gaz_proxy_read(struct gaz_broker *b, struct gaz_rpc_call *call, Protocol__ReadRequest *req,
		    const struct gaz_resolution *res)
{
	struct gaz_status st = {0};
	struct gaz_rpc_stream *s = NULL;
	struct gaz_rpc_channel *ch;
	Protocol__Header *h = gaz_header_build(b, res), *orig;
	struct proxy_read *p = calloc(1, sizeof(*p));
	int idx, rc = 0;
	const char *ep = gaz_proxy_pick(b, res, &idx);
	/* Signed by us for the client we verified (Gazette re-signs too). */
	char *auth = gaz_broker_sign(b, GAZ_CAP_READ, req->journal);

	if (!p || !ep || !h || !(ch = gaz_peer_channel(b, ep)) ||
	    !(s = gaz_rpc_stream_open(ch, "/protocol.Journal/Read", GAZ_DEADLINE_NEVER, false, auth,
				      &st)) ||
	    !(p->journal = strdup(req->journal)) || !(p->upstream = strdup(ep))) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_UNAVAILABLE, "no route member to proxy to");
		gaz_rpc_stream_free(s);
		gaz_header_free(h);
		free(auth);
		if (p) {
			free(p->journal);
			free(p);
		}
		return;
	}
	free(auth);
	p->call = call;
	p->s = s;
	/* Name the member we forward to: it checks that it is that member, so
	 * a stale route (say, a dead member's lease still holding the
	 * assignment at our own address) fails instead of looping. */
	h->process_id->zone = res->route.zone[idx];
	h->process_id->suffix = res->route.suffix[idx];
	/* The request may carry the header of an earlier proxy hop: it stays
	 * the request's (freed with it); ours goes out in its place. */
	orig = req->header;
	req->header = h;
	rc = gaz_rpc_stream_send(s, &req->base);
	req->header = orig;
	gaz_header_free(h);
	if (!rc)
		rc = gaz_rpc_stream_close_send(s);
	if (rc)
		proxy_end(p, rc);
	else if (gaz_rpc_is_local(call))
		proxy_relay_blocking(p);
	else
		proxy_park(p, false);
}

/* ---- an Append proxied to its primary ------------------------------------- */

/* The steps of PROXY (a->proxy_step), in order: the upstream Append is
 * opened and the request sent (PROXY_OPEN), each client chunk is sent on
 * as it arrives (PROXY_RELAY, waiting parked between chunks,
 * gaz__append_await_chunk), and once the client's half-close is passed
 * on, the primary's answer is awaited parked, a receive notify waking the
 * call (PROXY_ANSWER), then relayed with the upstream's status. A client
 * that goes away or breaks its stream aborts the upstream, which rolls
 * the append back; a primary that fails passes its status on, as Gazette
 * does, so clients see UNAVAILABLE and retry. A client pausing mid-append
 * costs no thread here, as at the primary. */
enum { PROXY_OPEN, PROXY_RELAY, PROXY_ANSWER };

#define PROXY_FAILED_WAIT_MS 2000 /* for the status of an upstream that failed */

/* proxy_done frees the upstream (its receive notify, which wakes our
 * call, may still be running until then) and answers the client, unless
 * answered. */
static int proxy_done(struct append_ctx *a, bool cancel, int code, const char *msg)
{
	if (cancel)
		gaz_rpc_stream_cancel(a->proxy_s);
	gaz_rpc_stream_free(a->proxy_s);
	a->proxy_s = NULL;
	if (code >= 0)
		gaz_rpc_finish(a->call, NULL, code, msg);
	return 0;
}

/* upstream_answered runs on a poller (or at once) when the upstream's
 * answer, or its end, is in: the parked append resumes to relay it. */
static void upstream_answered(void *arg)
{
	gaz_rpc_wake(((struct append_ctx *)arg)->call);
}

static int proxy_open(struct append_ctx *a)
{
	struct gaz_status st = {0};
	struct gaz_rpc_channel *ch;
	Protocol__Header *h = gaz_header_build(a->b, &a->res), *orig;
	int idx, rc;
	const char *ep = gaz_proxy_pick(a->b, &a->res, &idx);
	char *auth = gaz_broker_sign(a->b, GAZ_CAP_APPEND, a->req->journal);

	if (!ep || !h || !(ch = gaz_peer_channel(a->b, ep)) ||
	    !(a->proxy_s = gaz_rpc_stream_open(ch, "/protocol.Journal/Append", GAZ_DEADLINE_NEVER,
					       false, auth, &st))) {
		gaz_rpc_finish(a->call, NULL, GAZ_GRPC_UNAVAILABLE, "no primary to proxy to");
		gaz_header_free(h);
		free(auth);
		return GAZ_EUNAVAIL;
	}
	free(auth);
	/* The request, its content and the half-close queue behind each
	 * other and go out without waiting on each (a lone small append in
	 * one write, the half-close with its last message). */
	gaz_rpc_stream_queue_sends(a->proxy_s);
	orig = a->req->header; /* an earlier hop's, freed with the request */
	a->req->header = h;
	rc = gaz_rpc_stream_send(a->proxy_s, &a->req->base);
	a->req->header = orig;
	gaz_header_free(h);
	return rc;
}

/* proxy_relay (PROXY_RELAY) sends on every client chunk there is; 1 once
 * the half-close is passed on, APPEND_AWAIT_PARKED while waiting for the
 * next, or an error: *upstream tells whether the upstream failed (else
 * the client did). */
static int proxy_relay(struct append_ctx *a, bool *upstream)
{
	for (;;) {
		Protocol__AppendRequest *m = NULL;
		int rc = gaz__append_await_chunk(a, &m, GAZ_DEADLINE_NEVER);

		*upstream = false;
		if (rc == APPEND_AWAIT_PARKED)
			return rc;
		if (rc == GAZ_EOF) {
			*upstream = true;
			return gaz_rpc_stream_close_send(a->proxy_s) ? GAZ_EUNAVAIL : 1;
		}
		if (rc)
			return rc;
		rc = gaz_rpc_stream_send(a->proxy_s, &m->base);
		protobuf_c_message_free_unpacked(&m->base, NULL);
		if (rc) {
			*upstream = true;
			return rc;
		}
	}
}

/* proxy_answer (PROXY_ANSWER) relays the primary's answer once it is in;
 * else parks until it is (or the client goes away, or an upstream that
 * failed gives no status by a->proxy_deadline). A local call waits here. */
static int proxy_answer(struct append_ctx *a)
{
	ProtobufCMessage *resp = NULL;
	int rc;

	for (;;) {
		if (gaz_rpc_poll(a->call) == GAZ_ECANCELLED) /* the client gave up */
			return proxy_done(a, true, GAZ_GRPC_CANCELLED, "proxied append aborted");
		rc = gaz_rpc_stream_recv(a->proxy_s, &protocol__append_response__descriptor, &resp,
					 gaz_rpc_is_local(a->call) ? gaz_deadline_in(500) : 0);
		if (rc != GAZ_ETIMEDOUT)
			break;
		if (gaz_mono_ns() >= a->proxy_deadline)
			return proxy_done(a, true, GAZ_GRPC_UNAVAILABLE, "the primary stopped answering");
		if (gaz_rpc_is_local(a->call))
			continue;
		gaz_rpc_stream_recv_notify(a->proxy_s, upstream_answered, a);
		if (gaz_rpc_park(a->call, gaz__append_resume, a, a->proxy_deadline, 0) == 0)
			return APPEND_AWAIT_PARKED;
	}
	/* The answer, then the upstream's status (which follows it); or the
	 * upstream's end without one: its status. */
	relay_finish(a->call, a->proxy_s, rc == 0 ? resp : NULL, true);
	if (resp)
		protobuf_c_message_free_unpacked(resp, NULL);
	return proxy_done(a, false, -1, NULL);
}

int gaz__append_proxy(struct append_ctx *a)
{
	bool upstream = true;
	int rc = 0;

	a->finished = true; /* answered here, whatever happens */
	switch (a->proxy_step) {
	case PROXY_OPEN:
		if ((rc = proxy_open(a)) != 0) {
			if (!a->proxy_s)
				return 0; /* answered: no upstream */
			break;
		}
		a->proxy_step = PROXY_RELAY;
		/* fall through */
	case PROXY_RELAY:
		rc = proxy_relay(a, &upstream);
		if (rc == APPEND_AWAIT_PARKED)
			return rc;
		if (rc < 0)
			break;
		a->proxy_step = PROXY_ANSWER;
		a->proxy_deadline = GAZ_DEADLINE_NEVER;
		return proxy_answer(a);
	case PROXY_ANSWER:
		return proxy_answer(a);
	}
	if (!upstream) /* the client went away or broke the stream */
		return proxy_done(a, true, GAZ_GRPC_CANCELLED, "proxied append aborted");
	/* The upstream failed (say, the primary died): its status is passed
	 * on once it comes, for a bounded time. */
	a->proxy_step = PROXY_ANSWER;
	a->proxy_deadline = gaz_deadline_in(PROXY_FAILED_WAIT_MS);
	return proxy_answer(a);
}

/* ---- a whole small Append proxied on the pollers --------------------------- */

/* A client's Append that arrived whole (its half-close seen) at a broker
 * that is not the journal's primary goes to the primary without a
 * handler thread, as the primary's own fast path commits a lone append
 * without one: the poller that read it opens the upstream stream and
 * queues every message on it (our Header on the first), and the poller
 * that completes the upstream's receive relays the answer and the end.
 * A proxied append through a handler paid two thread switches at this
 * broker (bench/README, "where the creation time goes").
 *
 *   FWD_SENT (gaz_proxy_append_fast) --answer in--> FWD_ANSWERED
 *      --end and status in--> relayed: fwd_end
 *
 * Only the first hop of a plain request: no Header yet (a request an
 * earlier broker proxied goes to the handler, which checks it), at most
 * FWD_MAX_MSGS messages and FWD_MAX_BYTES, so that every send queues
 * without waiting (gaz_rpc_stream_queue_sends). Everything else, and a
 * request this broker may not proxy yet (a route short of its
 * replication, a suspended journal), takes the handler's path. A client
 * that cancels after its whole request was sent does not stop the
 * primary's commit here, as it may not there either. */
#define FWD_MAX_MSGS 8
#define FWD_MAX_BYTES (1 << 20)

struct append_fwd {
	struct gaz_rpc_call *call;   /* the client's, taken from its fast path */
	struct gaz_rpc_stream *up;   /* to the primary */
	ProtobufCMessage *resp;      /* FWD_ANSWERED: the primary's answer */
};

/* fwd_end relays the upstream's outcome to the client as the handler's
 * path does (relay_answer), with the status already in (a poller must
 * not wait for it), and lets go of both calls: the upstream is freed
 * once its last op is done (gaz_rpc_stream_free_later). */
static void fwd_end(struct append_fwd *f, int rc)
{
	struct gaz_status st = {0};
	int frc = rc == GAZ_EPROTO ? GAZ_EPROTO : gaz_rpc_stream_status_now(f->up, &st);

	if (frc == GAZ_EPROTO) { /* an answer that did not decode, or a second one */
		gaz_status_set(&st, GAZ_EPROTO, "the primary's answer was not an AppendResponse");
		st.grpc = GAZ_GRPC_UNAVAILABLE;
		if (f->resp)
			protobuf_c_message_free_unpacked(f->resp, NULL);
		f->resp = NULL;
	}
	relay_answer(f->call, frc, &st, f->resp, true);
	gaz_rpc_unpark(f->call);
	gaz_rpc_stream_free_later(f->up);
	if (f->resp)
		protobuf_c_message_free_unpacked(f->resp, NULL);
	free(f);
}

/* fwd_in runs when the upstream's receive completed (on a poller, or at
 * once): the answer (then the end is awaited), or the end. */
static void fwd_in(void *arg)
{
	struct append_fwd *f = arg;
	ProtobufCMessage *m = NULL;
	int rc = gaz_rpc_stream_recv(f->up, &protocol__append_response__descriptor, &m, 0);

	if (rc == 0 && !f->resp) {
		f->resp = m; /* FWD_ANSWERED */
		gaz_rpc_stream_recv_notify(f->up, fwd_in, f);
		return;
	}
	if (rc == 0) { /* a second answer: not an Append's */
		protobuf_c_message_free_unpacked(m, NULL);
		rc = GAZ_EPROTO;
	}
	fwd_end(f, rc);
}

/* fwd_fits resolves `req`'s journal without waiting: true when this
 * broker would proxy it to a primary at the journal's replication (the
 * handler's RESOLVE, ROUTE and AWAIT_DESIRED_REPLICAS would go to PROXY
 * at once), `res` then filled (release it). */
static bool fwd_fits(struct gaz_broker *b, const Protocol__AppendRequest *req,
		     struct gaz_resolution *res)
{
	struct gaz_resolve_opts o = {.may_proxy = true, .require_primary = true,
				     .min_etcd_revision = req->min_etcd_revision, .no_wait = true};
	struct gaz_status st = {0};

	*res = (struct gaz_resolution){.route.primary = -1};
	if (gaz_resolve(b, req->journal, &o, res, &st))
		return false;
	/* Another broker's primary: not ours, whose replica a no_wait
	 * resolution leaves out while maintenance has yet to make it. */
	if (res->status == PROTOCOL__STATUS__OK && !res->replica && res->spec &&
	    res->process_index >= 0 && res->process_index != res->local_index &&
	    res->process_index == res->route.primary &&
	    (int64_t)res->route.n == gaz__append_desired_replication(b, res->spec))
		return true;
	gaz_resolution_release(res);
	return false;
}

bool gaz_proxy_append_fast(struct gaz_rpc_call *call, struct gaz_broker *b)
{
	const ProtobufCMessageDescriptor *d = &protocol__append_request__descriptor;
	Protocol__AppendRequest *req = NULL;
	struct gaz_resolution res;
	struct gaz_status st = {0};
	struct append_fwd *f = NULL;
	struct gaz_rpc_stream *up = NULL;
	Protocol__Header *h = NULL;
	const char *ep;
	char *auth = NULL;
	size_t n, bytes;
	int idx;

	if (gaz_rpc_peek_size(call, &n, &bytes) != GAZ_EOF || n == 0 || n > FWD_MAX_MSGS ||
	    bytes > FWD_MAX_BYTES || atomic_load(&b->stopping))
		return false;
	if (gaz_rpc_peek(call, 0, d, (ProtobufCMessage **)&req) || !req->journal[0] ||
	    req->do_not_proxy || req->header || gaz_validate_append_request(req, &st) ||
	    !gaz_journal_visible(b, call, req->journal)) {
		if (req)
			protobuf_c_message_free_unpacked(&req->base, NULL);
		return false;
	}
	if (!fwd_fits(b, req, &res)) {
		protobuf_c_message_free_unpacked(&req->base, NULL);
		return false;
	}
	struct gaz_rpc_channel *ch;
	if (!(ep = gaz_proxy_pick(b, &res, &idx)) || !(h = gaz_header_build(b, &res)) ||
	    !(ch = gaz_peer_channel(b, ep)) || !(f = calloc(1, sizeof(*f))))
		goto fallback;
	auth = gaz_broker_sign(b, GAZ_CAP_APPEND, req->journal);
	if (!(up = gaz_rpc_stream_open(ch, "/protocol.Journal/Append", GAZ_DEADLINE_NEVER, false,
				       auth, &st)))
		goto fallback;
	free(auth);
	auth = NULL;
	/* Taken from here: the upstream's end answers the client, whatever
	 * it is (a failed send shows in the upstream's status). */
	gaz_metric_rpc_started("Append");
	gaz_metric_append_poller_proxy();
	*f = (struct append_fwd){.call = call, .up = up};
	gaz_rpc_stream_queue_sends(up);
	req->header = h;
	int rc = gaz_rpc_stream_send(up, &req->base);
	req->header = NULL;
	for (size_t i = 1; i < n && rc == 0; i++) {
		ProtobufCMessage *m = NULL;
		if ((rc = gaz_rpc_peek(call, i, d, &m)) == 0)
			rc = gaz_rpc_stream_send(up, m);
		if (m)
			protobuf_c_message_free_unpacked(m, NULL);
	}
	if (rc == 0)
		rc = gaz_rpc_stream_close_send(up);
	if (rc)
		gaz_rpc_stream_cancel(up); /* an unfinished request must not commit */
	gaz_header_free(h);
	gaz_resolution_release(&res);
	protobuf_c_message_free_unpacked(&req->base, NULL);
	gaz_rpc_stream_recv_notify(up, fwd_in, f); /* FWD_SENT */
	return true;
fallback:
	free(auth);
	free(f);
	if (h)
		gaz_header_free(h);
	gaz_resolution_release(&res);
	protobuf_c_message_free_unpacked(&req->base, NULL);
	return false;
}
