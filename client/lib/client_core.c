/*
 * client_core.c - the client object: its one channel to the broker
 * address, dispatch (where a route cache will plug in), cancellation of
 * blocked calls, broker Status names and codes, the retry backoff table,
 * and the response checks shared by the RPC files.
 *
 * Invariants: `calls` holds every open streaming call of the client while
 * it may block; gaz_client_cancel sets `cancelled` first and then cancels
 * each listed stream, and gaz__client_open refuses to open after the flag
 * is set, so no stream opened by this client outlives a cancel unnoticed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/lib/client_int.h"
#include "common/clock.h"
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
		 dup_opt(&c->file_root, o->file_root);

	if (rc)
		return GAZ_ENOMEM;
	if (o->auth_token && *o->auth_token) {
		if (!(c->auth = malloc(strlen(o->auth_token) + 8)))
			return GAZ_ENOMEM;
		sprintf(c->auth, "Bearer %s", o->auth_token);
	}
	return 0;
}

int gaz_client_new(const struct gaz_client_opts *opts, struct gaz_client **out,
		   struct gaz_status *st)
{
	struct gaz_client_opts none = {0};
	struct gaz_rpc_channel_opts co = {0};
	struct gaz_client *c = calloc(1, sizeof(*c));

	if (!opts)
		opts = &none;
	if (!c || client_strings(c, opts)) {
		gaz_client_free(c);
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory creating client");
	}
	co.max_recv_bytes = opts->max_recv_bytes > 0 ? opts->max_recv_bytes
						     : GAZ_CLIENT_MAX_RECV_BYTES;
	if (!(c->chan = gaz_rpc_channel_new(c->address, &co))) {
		gaz_status_set(st, GAZ_EINVAL, "invalid broker address \"%s\"", c->address);
		gaz_client_free(c);
		return GAZ_EINVAL;
	}
	c->rpc_timeout_ms = opts->rpc_timeout_ms;
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
	for (size_t i = 0; i < c->npeers; i++) {
		gaz_rpc_channel_free(c->peers[i].chan);
		free(c->peers[i].endpoint);
	}
	if (c->chan) {
		gaz_rpc_channel_free(c->chan);
		pthread_mutex_destroy(&c->mu);
	}
	free(c->address);
	free(c->zone);
	free(c->auth);
	free(c->file_root);
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

/* ---- dispatch and calls --------------------------------------------------- */

struct gaz_rpc_channel *gaz__client_channel(struct gaz_client *c, const Protocol__Route *route)
{
	(void)route; /* no route cache yet: the broker address proxies */
	return c->chan;
}

/* pick_member: the index of the member to dispatch to, or -1. */
static int pick_member(const struct gaz_client *c, const Protocol__Route *rt)
{
	int any = -1;

	for (size_t i = 0; i < rt->n_members; i++) {
		const char *ep = rt->endpoints[i], *zone = rt->members[i]->zone;
		if (!ep || !*ep)
			continue;
		if (zone && !strcmp(zone, c->zone))
			return (int)i;
		if (any < 0 || (int32_t)i == rt->primary)
			any = (int)i;
	}
	return any;
}

struct gaz_rpc_channel *gaz__client_member_channel(struct gaz_client *c,
						   const Protocol__Route *route)
{
	struct gaz_rpc_channel *ch = c->chan;
	const char *ep;
	int m;

	if (!route || route->n_endpoints != route->n_members || (m = pick_member(c, route)) < 0)
		return c->chan;
	ep = route->endpoints[m];
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->npeers; i++)
		if (!strcmp(c->peers[i].endpoint, ep))
			ch = c->peers[i].chan;
	if (ch == c->chan && c->npeers < GAZ__CLIENT_PEERS_MAX) {
		struct gaz_rpc_channel_opts co = {.max_recv_bytes = GAZ_CLIENT_MAX_RECV_BYTES};
		struct gaz__client_peer *p = &c->peers[c->npeers];
		if ((p->endpoint = strdup(ep)) && (p->chan = gaz_rpc_channel_new(ep, &co))) {
			ch = p->chan;
			c->npeers++;
		} else {
			free(p->endpoint);
			p->endpoint = NULL;
		}
	}
	pthread_mutex_unlock(&c->mu);
	return ch;
}

int64_t gaz__client_deadline(const struct gaz_client *c)
{
	return c->rpc_timeout_ms > 0 ? gaz_deadline_in(c->rpc_timeout_ms) : GAZ_DEADLINE_NEVER;
}

int gaz__client_open(struct gaz_client *c, struct gaz_rpc_channel *ch, const char *path,
		     bool wait_for_ready, struct gaz__client_call *call, struct gaz_status *st)
{
	struct gaz_status ost = {0};
	struct gaz_rpc_stream *s;

	call->stream = NULL;
	call->next = call->prev = call;
	if (gaz_client_cancelled(c))
		return gaz_status_set(st, GAZ_ECANCELLED, "cancelled");
	if (!(s = gaz_rpc_stream_open(ch, path, GAZ_DEADLINE_NEVER, wait_for_ready, c->auth,
				       &ost)))
		return gaz_status_set(st, ost.code ? ost.code : GAZ_ERPC, "%s", ost.msg);
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
}

int gaz__client_recv(struct gaz_client *c, struct gaz_rpc_stream *s,
		     const ProtobufCMessageDescriptor *desc, ProtobufCMessage **out,
		     struct gaz_status *st)
{
	int rc;

	for (;;) {
		if (gaz_client_cancelled(c)) {
			gaz_rpc_stream_cancel(s);
			return gaz_status_set(st, GAZ_ECANCELLED, "cancelled");
		}
		rc = gaz_rpc_stream_recv(s, desc, out, gaz_deadline_in(GAZ__CLIENT_POLL_MS));
		if (rc != GAZ_ETIMEDOUT)
			break;
	}
	if (rc == GAZ_EPROTO)
		return gaz_status_set(st, GAZ_EPROTO, "broker sent a message that is not a %s",
				      desc->name);
	return rc;
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
