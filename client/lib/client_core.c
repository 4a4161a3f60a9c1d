/*
 * client_core.c - the client object: its channel to the broker address
 * and channels to route members, dispatch by route (cache or hint),
 * bounded connection waits, cancellation of blocked calls, broker Status
 * names and codes, the retry backoff table, and the response checks shared
 * by the RPC files.
 *
 * Invariants: `calls` holds every open streaming call of the client while
 * it may block; gaz_client_cancel sets `cancelled` first and then cancels
 * each listed stream, and gaz__client_open refuses to open after the flag
 * is set, so no stream opened by this client outlives a cancel unnoticed.
 * A member channel (peers[]) is freed only while no call references it
 * (refs == 0). Lock order: the route cache's mutex is never held while
 * `mu` is taken, nor the other way round.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/lib/client_int.h"
#include "common/clock.h"
#include "protocol/auth.h"
#include "protocol/validate.h"

static int dup_opt(char **dst, const char *src)
{
	*dst = NULL;
	if (!src || !*src)
		return 0;
	return (*dst = strdup(src)) ? 0 : GAZ_ENOMEM;
}

static int client_strings(struct gaz_client *c, const struct gaz_client_opts *o)
{
	const char *addr = o->broker_address && *o->broker_address ? o->broker_address
								    : GAZ_CLIENT_DEFAULT_ADDRESS;
	int rc = dup_opt(&c->address, addr) | dup_opt(&c->zone, o->zone ? o->zone : "local") |
		 dup_opt(&c->file_root, o->file_root) | dup_opt(&c->cert_file, o->cert_file) |
		 dup_opt(&c->cert_key_file, o->cert_key_file) |
		 dup_opt(&c->trusted_ca_file, o->trusted_ca_file);

	if (rc)
		return GAZ_ENOMEM;
	c->tls = (struct gaz_rpc_tls){c->cert_file, c->cert_key_file, c->trusted_ca_file};
	if (o->auth_token && *o->auth_token) {
		if (!(c->auth = malloc(strlen(o->auth_token) + 8)))
			return GAZ_ENOMEM;
		sprintf(c->auth, "Bearer %s", o->auth_token);
	}
	return 0;
}

/* client_routes makes the route cache the options ask for (or none). */
static int client_routes(struct gaz_client *c, const struct gaz_client_opts *o)
{
	int64_t size = o->route_cache_size ? o->route_cache_size : GAZ_CLIENT_ROUTE_CACHE_SIZE;
	int64_t ttl_ms = o->route_cache_ttl_ms > 0 ? o->route_cache_ttl_ms
						   : GAZ_CLIENT_ROUTE_CACHE_TTL_MS;

	if (size < 0)
		return 0;
	return gaz__route_cache_new((size_t)size, ttl_ms * GAZ_NS_PER_MS, &c->routes);
}

int gaz_client_new(const struct gaz_client_opts *opts, struct gaz_client **out,
		   struct gaz_status *st)
{
	struct gaz_client_opts none = {0};
	struct gaz_rpc_channel_opts co = {0};
	struct gaz_client *c = calloc(1, sizeof(*c));
	int rc;

	if (!opts)
		opts = &none;
	if (!c || client_strings(c, opts)) {
		gaz_client_free(c);
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory creating client");
	}
	if (opts->auth_keys && *opts->auth_keys && (rc = gaz_auth_new(opts->auth_keys, &c->keys, st))) {
		gaz_client_free(c);
		gaz_status_prefix(st, "auth-keys: ");
		return rc;
	}
	if ((rc = client_routes(c, opts))) {
		gaz_client_free(c);
		return gaz_status_set(st, rc, "cannot create a route cache of %lld journals",
				      (long long)opts->route_cache_size);
	}
	co.max_recv_bytes = opts->max_recv_bytes > 0 ? opts->max_recv_bytes
						     : GAZ_CLIENT_MAX_RECV_BYTES;
	co.tls = &c->tls;
	/* Checked also for http://, where they are not used: a typo in a path
	 * fails now rather than when a route names an https:// member. */
	if ((rc = gaz_rpc_tls_check(&c->tls, st))) {
		gaz_client_free(c);
		return rc;
	}
	if (!(c->chan = gaz_rpc_channel_new(c->address, &co))) {
		struct gaz_status why = {0};

		if (gaz_rpc_target_check(c->address, &why) == 0)
			gaz_status_set(&why, GAZ_ENOMEM, "out of memory");
		gaz_status_set(st, GAZ_EINVAL, "invalid broker address \"%s\": %s", c->address,
			       why.msg);
		gaz_client_free(c);
		return GAZ_EINVAL;
	}
	c->rpc_timeout_ms = opts->rpc_timeout_ms;
	c->connect_timeout_ms = opts->connect_timeout_ms ? opts->connect_timeout_ms
							 : GAZ_CLIENT_CONNECT_TIMEOUT_MS;
	pthread_mutex_init(&c->mu, NULL);
	c->calls.next = c->calls.prev = &c->calls;
	atomic_init(&c->cancelled, 0);
	*out = c;
	return 0;
}

void gaz_client_free(struct gaz_client *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < GAZ__CLIENT_PEERS_MAX; i++) {
		if (c->peers[i].chan)
			gaz_rpc_channel_free(c->peers[i].chan);
		free(c->peers[i].endpoint);
	}
	if (c->chan) {
		gaz_rpc_channel_free(c->chan);
		pthread_mutex_destroy(&c->mu);
	}
	gaz__route_cache_free(c->routes);
	free(c->address);
	free(c->zone);
	free(c->auth);
	gaz_auth_free(c->keys);
	free(c->file_root);
	free(c->cert_file);
	free(c->cert_key_file);
	free(c->trusted_ca_file);
	free(c);
}

void gaz_client_cancel(struct gaz_client *c)
{
	atomic_store(&c->cancelled, 1);
	pthread_mutex_lock(&c->mu);
	for (struct gaz__client_call *k = c->calls.next; k != &c->calls; k = k->next)
		gaz_rpc_stream_cancel(k->stream);
	pthread_mutex_unlock(&c->mu);
}

bool gaz_client_cancelled(const struct gaz_client *c)
{
	return atomic_load(&((struct gaz_client *)c)->cancelled) != 0;
}

/* ---- member channels (c->mu held) ------------------------------------------- */

static struct gaz__client_peer *peer_find(struct gaz_client *c, const char *endpoint)
{
	for (size_t i = 0; i < GAZ__CLIENT_PEERS_MAX; i++)
		if (c->peers[i].endpoint && !strcmp(c->peers[i].endpoint, endpoint))
			return &c->peers[i];
	return NULL;
}

/* peer_slot returns a free slot, closing the least recently used idle
 * channel if every slot is taken, or NULL when all are in use. */
static struct gaz__client_peer *peer_slot(struct gaz_client *c)
{
	struct gaz__client_peer *lru = NULL;

	for (size_t i = 0; i < GAZ__CLIENT_PEERS_MAX; i++) {
		struct gaz__client_peer *p = &c->peers[i];
		if (!p->endpoint)
			return p;
		if (p->refs == 0 && (!lru || p->last_used_ns < lru->last_used_ns))
			lru = p;
	}
	if (lru) {
		gaz_rpc_channel_free(lru->chan);
		free(lru->endpoint);
		memset(lru, 0, sizeof(*lru));
	}
	return lru;
}

/* peer_sweep closes channels nobody used for GAZ__CLIENT_PEER_IDLE_MS. */
static void peer_sweep(struct gaz_client *c, int64_t now_ns)
{
	for (size_t i = 0; i < GAZ__CLIENT_PEERS_MAX; i++) {
		struct gaz__client_peer *p = &c->peers[i];
		if (p->endpoint && p->refs == 0 &&
		    now_ns - p->last_used_ns > GAZ__CLIENT_PEER_IDLE_MS * GAZ_NS_PER_MS) {
			gaz_rpc_channel_free(p->chan);
			free(p->endpoint);
			memset(p, 0, sizeof(*p));
		}
	}
}

/* peer_get returns a referenced channel to `endpoint`, or NULL. */
static struct gaz__client_peer *peer_get(struct gaz_client *c, const char *endpoint, int64_t now_ns)
{
	struct gaz_rpc_channel_opts co = {.max_recv_bytes = GAZ_CLIENT_MAX_RECV_BYTES,
					  .tls = &c->tls};
	struct gaz__client_peer *p = peer_find(c, endpoint);

	if (!p && (p = peer_slot(c))) {
		if (!(p->endpoint = strdup(endpoint)) ||
		    !(p->chan = gaz_rpc_channel_new(endpoint, &co))) {
			free(p->endpoint);
			p->endpoint = NULL;
			return NULL;
		}
	}
	if (p) {
		p->refs++;
		p->last_used_ns = now_ns;
	}
	return p;
}

/* member_states fills failed[i] / ready[i] from the channels we hold to
 * each member's endpoint (members without a channel: neither). */
static void member_states(struct gaz_client *c, const struct gaz__route *r, bool *failed,
			  bool *ready)
{
	for (size_t i = 0; i < r->n; i++) {
		struct gaz__client_peer *p = *r->m[i].endpoint ? peer_find(c, r->m[i].endpoint) : NULL;
		enum gaz_rpc_conn_state s = p ? gaz_rpc_channel_state(p->chan, false)
					      : GAZ_RPC_CONN_IDLE;
		failed[i] = s == GAZ_RPC_CONN_TRANSIENT_FAILURE;
		ready[i] = s == GAZ_RPC_CONN_READY;
	}
}

/* ---- dispatch ------------------------------------------------------------------ */

static void dispatch_default(struct gaz_client *c, struct gaz__dispatch *d)
{
	d->ch = c->chan;
	d->target = c->address;
	d->peer = NULL;
	d->journal = NULL;
}

/* Routes up to this many members have their connection states consulted
 * (replication is at most 5). */
#define ROUTE_STATES_MAX 16

/* dispatch_route picks a member of `r` and references its channel; false
 * when none is usable (the cache entry, if r came from it, is dropped). */
static bool dispatch_route(struct gaz_client *c, const char *journal, bool primary,
			   const struct gaz__route *r, bool cached, struct gaz__dispatch *d)
{
	bool failed[ROUTE_STATES_MAX], ready[ROUTE_STATES_MAX], known = r->n <= ROUTE_STATES_MAX;
	int64_t now = gaz_mono_ns();
	int m;

	pthread_mutex_lock(&c->mu);
	peer_sweep(c, now);
	if (known)
		member_states(c, r, failed, ready);
	m = gaz__route_pick(r, primary, c->zone, known ? failed : NULL, known ? ready : NULL);
	if (m >= 0 && (d->peer = peer_get(c, r->m[m].endpoint, now))) {
		d->ch = d->peer->chan;
		d->target = d->peer->endpoint;
		d->journal = cached ? journal : NULL;
	}
	pthread_mutex_unlock(&c->mu);
	if (m < 0 && cached && r->n > 0 && (!primary || r->primary >= 0))
		gaz__client_forget(c, journal); /* its choice is unusable right now */
	return d->peer != NULL;
}

void gaz__client_dispatch(struct gaz_client *c, const char *journal, bool primary,
			  const Protocol__Route *hint, struct gaz__dispatch *d)
{
	struct gaz__route *r = NULL;
	bool cached = false;

	dispatch_default(c, d);
	d->claims_journal = journal;
	if (!journal)
		return;
	if (hint && hint->n_members > 0)
		r = gaz__route_from_proto(hint, 0);
	else if (c->routes && (r = gaz__route_cache_get(c->routes, journal, gaz_mono_ns())))
		cached = true;
	if (r && !dispatch_route(c, journal, primary, r, cached, d))
		dispatch_default(c, d);
	free(r);
}

void gaz__client_undispatch(struct gaz_client *c, struct gaz__dispatch *d)
{
	if (!d->peer)
		return;
	pthread_mutex_lock(&c->mu);
	d->peer->refs--;
	d->peer->last_used_ns = gaz_mono_ns();
	pthread_mutex_unlock(&c->mu);
	d->peer = NULL;
}

void gaz__client_observe(struct gaz_client *c, const char *journal, const Protocol__Header *h)
{
	if (!c->routes || !h || !journal)
		return;
	gaz__route_cache_update(c->routes, journal, h->route, h->etcd ? h->etcd->revision : 0,
				gaz_mono_ns());
}

void gaz__client_forget(struct gaz_client *c, const char *journal)
{
	if (c->routes && journal)
		gaz__route_cache_invalidate(c->routes, journal);
}

void gaz__client_call_failed(struct gaz_client *c, const struct gaz__client_call *call, int rc)
{
	if (rc == GAZ_ERPC && call->d.journal)
		gaz__client_forget(c, call->d.journal);
}

/* ---- connections and calls ---------------------------------------------------------- */

int gaz__client_connect(struct gaz_client *c, const struct gaz__dispatch *d, bool wait_for_ready,
			struct gaz_status *st)
{
	int64_t start = gaz_mono_ns(), limit = c->connect_timeout_ms;
	int64_t deadline = limit < 0 ? GAZ_DEADLINE_NEVER : start + limit * GAZ_NS_PER_MS;
	enum gaz_rpc_conn_state s = gaz_rpc_channel_state(d->ch, true);
	int rc = 0;

	/* Wait in slices, so gaz_client_cancel is honoured within a poll. A
	 * fail-fast call stops at a channel already failing; any call stops
	 * as soon as a connection attempt fails (a refused connection fails
	 * at once; only an attempt still connecting waits up to the limit). */
	while (s != GAZ_RPC_CONN_READY &&
	       (wait_for_ready || s != GAZ_RPC_CONN_TRANSIENT_FAILURE)) {
		int64_t now = gaz_mono_ns(), slice = now + GAZ__CLIENT_POLL_MS * GAZ_NS_PER_MS;

		if (gaz_client_cancelled(c))
			return gaz_status_set(st, GAZ_ECANCELLED, "cancelled");
		if (now >= deadline)
			break;
		rc = gaz_rpc_channel_wait_ready(d->ch, slice < deadline ? slice : deadline, &s);
		if (rc == 0)
			return 0;
		if (rc == GAZ_EUNAVAIL)
			break;
	}
	if (s == GAZ_RPC_CONN_READY)
		return 0;
	if (st && !st->code)
		st->grpc = GAZ_GRPC_UNAVAILABLE;
	if (s == GAZ_RPC_CONN_TRANSIENT_FAILURE && (!wait_for_ready || rc == GAZ_EUNAVAIL))
		return gaz_status_set(st, GAZ_ERPC, "broker \"%s\" unreachable: connection failed",
				      d->target);
	return gaz_status_set(st, GAZ_ERPC,
			      "broker \"%s\" unreachable: no connection within %.1fs (%s)", d->target,
			      (double)limit / 1000.0,
			      s == GAZ_RPC_CONN_TRANSIENT_FAILURE ? "connection failed"
								  : gaz_rpc_conn_state_name(s));
}

int64_t gaz__client_deadline(const struct gaz_client *c)
{
	return c->rpc_timeout_ms > 0 ? gaz_deadline_in(c->rpc_timeout_ms) : GAZ_DEADLINE_NEVER;
}

/* The claims Gazette's clients sign for each method (its AuthJournalClient
 * and the consumer's AuthShardClient): capability, whether the token
 * names the journal, and its lifetime. An application's own method gets
 * READ for a minute. */
static const struct {
	const char *path;
	uint32_t cap;
	bool named;
	int64_t ttl_s;
} method_claims[] = {
	{"/protocol.Journal/List", GAZ_CAP_LIST, false, GAZ_AUTH_TTL_LONG},
	{"/protocol.Journal/Apply", GAZ_CAP_APPLY, false, GAZ_AUTH_TTL_SHORT},
	{"/protocol.Journal/Read", GAZ_CAP_READ, true, GAZ_AUTH_TTL_LONG},
	{"/protocol.Journal/Append", GAZ_CAP_APPEND, true, GAZ_AUTH_TTL_LONG},
	{"/protocol.Journal/ListFragments", GAZ_CAP_READ, true, GAZ_AUTH_TTL_LONG},
	{"/protocol.Journal/FragmentStoreHealth", GAZ_CAP_READ, false, GAZ_AUTH_TTL_LONG},
	{"/consumer.Shard/Stat", GAZ_CAP_READ, false, GAZ_AUTH_TTL_SHORT},
	{"/consumer.Shard/List", GAZ_CAP_LIST, false, GAZ_AUTH_TTL_SHORT},
	{"/consumer.Shard/Apply", GAZ_CAP_APPLY, false, GAZ_AUTH_TTL_SHORT},
	{"/consumer.Shard/GetHints", GAZ_CAP_READ, false, GAZ_AUTH_TTL_SHORT},
	{"/consumer.Shard/Unassign", GAZ_CAP_APPLY, false, GAZ_AUTH_TTL_SHORT},
};

/* call_auth: the authorization value of a call to `path`: the client's
 * fixed token, or one signed now with its keys (*owned, freed by the
 * caller), or NULL. */
static const char *call_auth(struct gaz_client *c, const struct gaz__dispatch *d, const char *path,
			     char **owned, struct gaz_status *st)
{
	uint32_t cap = GAZ_CAP_READ;
	bool named = false;
	int64_t ttl = GAZ_AUTH_TTL_SHORT;

	*owned = NULL;
	if (!c->keys)
		return c->auth;
	for (size_t i = 0; i < sizeof(method_claims) / sizeof(method_claims[0]); i++)
		if (!strcmp(path, method_claims[i].path)) {
			cap = method_claims[i].cap;
			named = method_claims[i].named;
			ttl = method_claims[i].ttl_s;
			break;
		}
	if (named && d->claims_journal)
		gaz_auth_sign_journal(c->keys, cap, d->claims_journal, ttl, owned, st);
	else
		gaz_auth_sign(c->keys, cap, NULL, ttl, owned, st);
	return *owned;
}

int gaz__client_unary(struct gaz_client *c, const struct gaz__dispatch *d, const char *path,
		      const ProtobufCMessage *req, const ProtobufCMessageDescriptor *resp_desc,
		      ProtobufCMessage **resp, bool wait_for_ready, struct gaz_status *st)
{
	int rc;

	*resp = NULL;
	if (gaz_client_cancelled(c))
		return gaz_status_set(st, GAZ_ECANCELLED, "cancelled");
	if (!(rc = gaz__client_connect(c, d, wait_for_ready, st))) {
		char *owned;
		const char *auth = call_auth(c, d, path, &owned, st);

		rc = c->keys && !auth ? GAZ_ENOMEM
				      : gaz_rpc_unary(d->ch, path, req, resp_desc, resp,
						      gaz__client_deadline(c), wait_for_ready, auth, st);
		free(owned);
	}
	if (rc == GAZ_ERPC && d->journal)
		gaz__client_forget(c, d->journal);
	return rc;
}

int gaz__client_open(struct gaz_client *c, struct gaz__dispatch *d, const char *path,
		     int64_t deadline_ns, bool wait_for_ready, struct gaz__client_call *call,
		     struct gaz_status *st)
{
	struct gaz_status ost = {0};
	struct gaz_rpc_stream *s = NULL;
	char *owned = NULL;
	const char *auth;
	int rc;

	call->stream = NULL;
	call->next = call->prev = call;
	call->d = *d;
	d->peer = NULL; /* the call owns it now */
	if (gaz_client_cancelled(c))
		rc = gaz_status_set(st, GAZ_ECANCELLED, "cancelled");
	else if ((rc = gaz__client_connect(c, &call->d, wait_for_ready, st)) == 0 &&
		 (!(auth = call_auth(c, &call->d, path, &owned, st)) && c->keys))
		rc = GAZ_ENOMEM;
	else if (rc == 0 && !(s = gaz_rpc_stream_open(call->d.ch, path, deadline_ns, wait_for_ready,
						      auth, &ost)))
		rc = gaz_status_set(st, ost.code ? ost.code : GAZ_ERPC, "%s", ost.msg);
	free(owned);
	if (rc) {
		gaz__client_call_failed(c, call, rc);
		gaz__client_undispatch(c, &call->d);
		return rc;
	}
	pthread_mutex_lock(&c->mu);
	call->stream = s;
	call->next = c->calls.next;
	call->prev = &c->calls;
	c->calls.next->prev = call;
	c->calls.next = call;
	if (atomic_load(&c->cancelled))
		gaz_rpc_stream_cancel(s); /* raced with gaz_client_cancel */
	pthread_mutex_unlock(&c->mu);
	return 0;
}

void gaz__client_close(struct gaz_client *c, struct gaz__client_call *call)
{
	if (!call->stream)
		return;
	pthread_mutex_lock(&c->mu);
	call->prev->next = call->next;
	call->next->prev = call->prev;
	call->next = call->prev = call;
	pthread_mutex_unlock(&c->mu);
	gaz_rpc_stream_free(call->stream);
	call->stream = NULL;
	gaz__client_undispatch(c, &call->d);
}

/* cancel_check: once the client is cancelled, cancels s as well and
 * returns GAZ_ECANCELLED; else 0. */
static int cancel_check(struct gaz_client *c, struct gaz_rpc_stream *s, struct gaz_status *st)
{
	if (!gaz_client_cancelled(c))
		return 0;
	gaz_rpc_stream_cancel(s);
	return gaz_status_set(st, GAZ_ECANCELLED, "cancelled");
}

/* recv_outcome gives a receive's GAZ_EPROTO its text; other results
 * pass through. */
static int recv_outcome(int rc, bool last, const ProtobufCMessageDescriptor *desc, struct gaz_status *st)
{
	if (rc != GAZ_EPROTO)
		return rc;
	return gaz_status_set(st, GAZ_EPROTO, "broker sent a message that is not a %s%s", desc->name,
			      last ? ", or more than one" : "");
}

static int client_recv(struct gaz_client *c, struct gaz_rpc_stream *s,
		       const ProtobufCMessageDescriptor *desc, ProtobufCMessage **out, bool last,
		       struct gaz_status *st)
{
	int rc;

	do {
		if ((rc = cancel_check(c, s, st)))
			return rc;
		rc = (last ? gaz_rpc_stream_recv_last : gaz_rpc_stream_recv)(
			s, desc, out, gaz_deadline_in(GAZ__CLIENT_POLL_MS));
	} while (rc == GAZ_ETIMEDOUT);
	return recv_outcome(rc, last, desc, st);
}

int gaz__client_recv(struct gaz_client *c, struct gaz_rpc_stream *s,
		     const ProtobufCMessageDescriptor *desc, ProtobufCMessage **out,
		     struct gaz_status *st)
{
	return client_recv(c, s, desc, out, false, st);
}

int gaz__client_try_recv(struct gaz_client *c, struct gaz_rpc_stream *s,
			 const ProtobufCMessageDescriptor *desc, ProtobufCMessage **out,
			 void (*fn)(void *arg), void *arg, struct gaz_status *st)
{
	int rc;

	if ((rc = cancel_check(c, s, st)))
		return rc;
	rc = gaz_rpc_stream_try_recv(s, desc, out, fn, arg);
	return rc == GAZ_ETIMEDOUT ? GAZ_READ_WAIT : recv_outcome(rc, false, desc, st);
}

int gaz__client_recv_last(struct gaz_client *c, struct gaz_rpc_stream *s,
			  const ProtobufCMessageDescriptor *desc, ProtobufCMessage **out,
			  struct gaz_status *st)
{
	return client_recv(c, s, desc, out, true, st);
}

int gaz__client_sleep(struct gaz_client *c, int64_t ms)
{
	int64_t deadline = gaz_deadline_in(ms);

	for (;;) {
		int64_t left = deadline - gaz_mono_ns();
		struct timespec ts;

		if (gaz_client_cancelled(c))
			return GAZ_ECANCELLED;
		if (left <= 0)
			return 0;
		if (left > GAZ__CLIENT_POLL_MS * GAZ_NS_PER_MS)
			left = GAZ__CLIENT_POLL_MS * GAZ_NS_PER_MS;
		ts.tv_sec = left / GAZ_NS_PER_S;
		ts.tv_nsec = left % GAZ_NS_PER_S;
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
}

/* ---- statuses, backoff, response checks ----------------------------------- */

const char *gaz_client_status_name(int status, char *buf, size_t cap)
{
	const ProtobufCEnumValue *v =
		protobuf_c_enum_descriptor_get_value(&protocol__status__descriptor, status);

	if (v)
		snprintf(buf, cap, "%s", v->name);
	else
		snprintf(buf, cap, "Status(%d)", status);
	return buf;
}

int gaz_client_status_err(int status)
{
	switch (status) {
	case PROTOCOL__STATUS__OK:
		return 0;
	case PROTOCOL__STATUS__JOURNAL_NOT_FOUND:
		return GAZ_ENOTFOUND;
	case PROTOCOL__STATUS__NO_JOURNAL_PRIMARY_BROKER:
	case PROTOCOL__STATUS__NOT_JOURNAL_PRIMARY_BROKER:
	case PROTOCOL__STATUS__NOT_JOURNAL_BROKER:
	case PROTOCOL__STATUS__INSUFFICIENT_JOURNAL_BROKERS:
	case PROTOCOL__STATUS__FRAGMENT_STORE_UNHEALTHY:
		return GAZ_EUNAVAIL;
	case PROTOCOL__STATUS__WRONG_APPEND_OFFSET:
	case PROTOCOL__STATUS__INDEX_HAS_GREATER_OFFSET:
		return GAZ_ERANGE;
	case PROTOCOL__STATUS__REGISTER_MISMATCH:
	case PROTOCOL__STATUS__ETCD_TRANSACTION_FAILED:
		return GAZ_EEXIST;
	case PROTOCOL__STATUS__NOT_ALLOWED:
	case PROTOCOL__STATUS__SUSPENDED:
		return GAZ_EPERM;
	case PROTOCOL__STATUS__OFFSET_NOT_YET_AVAILABLE:
		return GAZ_ETIMEDOUT;
	default:
		return GAZ_EPROTO;
	}
}

int64_t gaz_client_backoff_ms(int attempt)
{
	if (attempt < 0)
		return 0;
	if (attempt <= 1)
		return 50;
	if (attempt <= 3)
		return 100;
	if (attempt <= 5)
		return 1000;
	return 5000;
}

int gaz__client_status_fail(int status, const char *what, struct gaz_status *st)
{
	char name[48];
	int code = gaz_client_status_err(status);

	gaz_client_status_name(status, name, sizeof(name));
	if (what)
		gaz_status_set(st, code, "journal \"%s\": %s", what, name);
	else
		gaz_status_set(st, code, "%s", name);
	return code;
}

int gaz__client_invalid(const struct gaz_status *vst, struct gaz_status *st)
{
	if (vst->code == GAZ_ENOMEM)
		return gaz_status_set(st, GAZ_ENOMEM, "%s", vst->msg);
	return gaz_status_set(st, GAZ_EPROTO, "validating broker response: %s", vst->msg);
}

int gaz__check_read_response(const Protocol__ReadResponse *r, int64_t req_offset,
			     struct gaz_status *st)
{
	struct gaz_status vst = {0};

	if (gaz_validate_read_response(r, &vst))
		return gaz__client_invalid(&vst, st);
	if (r->status == PROTOCOL__STATUS__OK && r->offset < req_offset)
		return gaz_status_set(st, GAZ_EPROTO,
				      "validating broker response: invalid ReadResponse offset "
				      "(%lld; expected >= %lld)",
				      (long long)r->offset, (long long)req_offset);
	return 0;
}
