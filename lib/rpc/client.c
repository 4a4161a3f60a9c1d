/*
 * client.c - grpc client side: channels, unary calls and streaming calls,
 * all on the shared completion queue so connects always make progress
 * (grpc-core.md §7.6). Callers block on a condvar that the poller signals
 * when their batch completes (never grpc_completion_queue_pluck).
 *
 * Invariants:
 * - A stream starts, at open, one batch with SEND_INITIAL_METADATA +
 *   RECV_INITIAL_METADATA and another with RECV_STATUS_ON_CLIENT: without a
 *   pending RECV_INITIAL_METADATA a trailers-only error never completes the
 *   status (pitfall P2). A lazy stream (gaz_rpc_stream_open_lazy) starts
 *   RECV_STATUS_ON_CLIENT only once a receive finds the end or a caller
 *   wants the status (status_want); "the status is in" is status_in().
 * - At most one op of each kind is in flight (grpc's rule). A receive that
 *   timed out stays in flight and its result goes to the next receive.
 * - A stream is freed only when no op is in flight (s->inflight == 0).
 * - A stream's mu is held only briefly; never while starting a batch.
 */
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "rpc/rpc_int.h"

struct gaz_rpc_channel {
	grpc_channel *gc;
};

/* port_check (st may be NULL): the port after the host of `hostport`
 * (after "]" of an IPv6 literal), when there is one, is 1-65535. grpc
 * would take a bad one as an address it cannot resolve and report only
 * that the broker is unreachable. */
static int port_check(const char *hostport, struct gaz_status *st)
{
	const char *b = strrchr(hostport, ']'), *c = strrchr(b ? b : hostport, ':');
	char *end;
	long port;

	if (!c)
		return 0;
	port = strtol(c + 1, &end, 10);
	if (c[1] < '0' || c[1] > '9' || *end || port < 1 || port > 65535)
		return gaz_status_set(st, GAZ_EINVAL, "invalid port \"%s\": want 1-65535", c + 1);
	return 0;
}

/* convert_target maps a broker endpoint URL to a grpc target (gazette-facts
 * §1.1: unix://host/path dials unix:///path; http without port means :80,
 * https :443). *tls (may be NULL) says whether it is https://. Returns a
 * malloc'd string, or NULL with the reason in st (may be NULL). */
static char *convert_target(const char *t, bool *tls, struct gaz_status *st)
{
	const char *p, *end, *scheme = "http://";
	char *out;
	size_t n;

	if (!t || !*t) {
		gaz_status_set(st, GAZ_EINVAL, "no address");
		return NULL;
	}
	if (strncmp(t, "unix:", 5) == 0) {
		if (!(p = gaz__rpc_unix_path(t))) {
			gaz_status_set(st, GAZ_EINVAL, "a unix address needs an absolute path");
			return NULL;
		}
		if (!(out = malloc(strlen(p) + 8)))
			return NULL;
		sprintf(out, "unix://%s", p);
		return out;
	}
	if (strncmp(t, "https://", 8) == 0)
		scheme = "https://";
	else if (strncmp(t, "http://", 7) != 0)
		return port_check(t, st) ? NULL : strdup(t);
	if (tls)
		*tls = scheme[4] == 's';
	p = t + strlen(scheme);
	end = strchr(p, '/');
	n = end ? (size_t)(end - p) : strlen(p);
	if (n == 0) {
		gaz_status_set(st, GAZ_EINVAL, "no host after %s", scheme);
		return NULL;
	}
	if (!(out = malloc(n + 5)))
		return NULL;
	memcpy(out, p, n);
	out[n] = '\0';
	if (port_check(out, st)) {
		free(out);
		return NULL;
	}
	/* No port after the host (or after "]" of an IPv6 literal): the
	 * scheme's. */
	end = strrchr(out, ']');
	if (!strchr(end ? end : out, ':'))
		strcat(out, scheme[4] == 's' ? ":443" : ":80");
	return out;
}

int gaz_rpc_target_check(const char *target, struct gaz_status *st)
{
	struct gaz_status local = {0};
	char *t = convert_target(target, NULL, st ? st : &local);

	if (t) {
		free(t);
		return 0;
	}
	return st && st->code ? st->code : gaz_status_set(st, GAZ_ENOMEM, "out of memory");
}

/* Reconnect back-off and pings per peer kind (rpc.h, enum gaz_rpc_peer). */
static const struct {
	int initial_ms, max_ms; /* grpc grows the delay 1.6x between, with 20% jitter */
	bool ping_without_calls;
} peer_conf[] = {
	[GAZ_RPC_PEER_CLIENT] = {1000, 5000, true},
	[GAZ_RPC_PEER_BROKER] = {500, 500, true},
	[GAZ_RPC_PEER_ETCD] = {500, 500, false},
};

/* How often a channel's certificate files are looked at for a renewal
 * (grpc's file watcher reads them again and keeps the last set that
 * loads; a half-written pair, key and certificate not matching, is
 * skipped until it matches). */
#define TLS_REFRESH_SECONDS 5

/* ssl_creds makes grpc TLS credentials of the files of `tls`: checked and
 * read now, so that a bad file is a clear error at once, then watched by
 * grpc's file watcher, so that every later handshake of the channel (a
 * reconnect after a peer's restart, say) presents and trusts what the
 * files hold then: a certificate (or CA) renewed on disk is used without
 * a restart, as Gazette's clients reload theirs. Without a CA file the
 * system's roots (OpenSSL's default file, as Go's nil RootCAs) are the
 * trusted roots, watched the same way (where that file is missing, grpc's
 * static credentials with grpc's own roots, read once). Servers'
 * certificates are verified
 * and their names checked (grpc's default verifier). NULL with st set. */
static grpc_channel_credentials *ssl_creds(const struct gaz_rpc_tls *tls, struct gaz_status *st)
{
	struct gaz__tls_pems p;
	grpc_ssl_pem_key_cert_pair pair;
	grpc_channel_credentials *creds;
	bool files = tls && ((tls->cert_file && *tls->cert_file) || (tls->ca_file && *tls->ca_file));
	const char *env = getenv(X509_get_default_cert_file_env());
	const char *roots = files && tls->ca_file && *tls->ca_file ? tls->ca_file
			    : env && *env ? env : X509_get_default_cert_file();

	if (gaz__tls_pems_read(tls, false, &p, st))
		return NULL;
	if (files && access(roots, R_OK) == 0) {
		grpc_tls_credentials_options *o = grpc_tls_credentials_options_create();
		grpc_tls_certificate_provider *w = grpc_tls_certificate_provider_file_watcher_create(
			p.cert ? tls->key_file : NULL, p.cert ? tls->cert_file : NULL, roots, TLS_REFRESH_SECONDS);

		grpc_tls_credentials_options_set_certificate_provider(o, w);
		grpc_tls_certificate_provider_release(w); /* o holds it */
		grpc_tls_credentials_options_watch_root_certs(o);
		if (p.cert)
			grpc_tls_credentials_options_watch_identity_key_cert_pairs(o);
		creds = grpc_tls_credentials_create(o); /* takes o */
	} else {
		if (!p.ca) /* Go's nil RootCAs: the system pool */
			p.ca = gaz__tls_system_roots();
		pair.private_key = p.key;
		pair.cert_chain = p.cert;
		creds = grpc_ssl_credentials_create(p.ca, p.cert ? &pair : NULL, NULL, NULL);
	}
	gaz__tls_pems_free(&p); /* grpc copied what it needs */
	if (!creds)
		gaz_status_set(st, GAZ_EINVAL, "cannot make TLS credentials");
	return creds;
}

struct gaz_rpc_channel *gaz_rpc_channel_new(const char *target,
					    const struct gaz_rpc_channel_opts *opts)
{
	struct gaz_status st = {0};
	struct gaz_rpc_channel *ch = gaz_rpc_channel_open(target, opts, &st);

	if (!ch && opts && opts->tls && st.code && st.code != GAZ_ENOMEM)
		gaz_warn("cannot open a channel", "target=%s err=%s", target ? target : "", st.msg);
	return ch;
}

struct gaz_rpc_channel *gaz_rpc_channel_open(const char *target,
					     const struct gaz_rpc_channel_opts *opts,
					     struct gaz_status *st)
{
	struct gaz_rpc_channel_opts o = {0};
	struct gaz_rpc_channel *ch;
	grpc_channel_credentials *creds;
	grpc_arg a[12] = {0};
	int n = 0;
	bool tls = false;
	char *t = convert_target(target, &tls, st);

	if (opts)
		o = *opts;
	if ((unsigned)o.peer >= sizeof(peer_conf) / sizeof(peer_conf[0])) {
		gaz_status_set(st, GAZ_EINVAL, "unknown peer kind %d", (int)o.peer);
		free(t);
		return NULL;
	}
	if (!t)
		return NULL;
	creds = tls ? ssl_creds(o.tls, st) : grpc_insecure_credentials_create();
	if (!creds || !(ch = calloc(1, sizeof(*ch)))) {
		gaz_status_set(st, GAZ_ENOMEM, "out of memory");
		if (creds)
			grpc_channel_credentials_release(creds);
		free(t);
		return NULL;
	}
#define INT_ARG(k, v) (a[n].type = GRPC_ARG_INTEGER, a[n].key = (char *)(k), a[n++].value.integer = (v))
	INT_ARG(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, o.max_recv_bytes > 0 ? o.max_recv_bytes : 64 << 20);
	INT_ARG(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, -1);
	INT_ARG(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, peer_conf[o.peer].initial_ms);
	INT_ARG(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, peer_conf[o.peer].max_ms);
	/* P4: keep pinging idle streams (Read, Watch) so dead peers surface. */
	INT_ARG(GRPC_ARG_KEEPALIVE_TIME_MS, o.keepalive_ms > 0 ? o.keepalive_ms : 10000);
	INT_ARG(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, peer_conf[o.peer].ping_without_calls);
	INT_ARG(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
	/* Each channel gets its own connection, as each Go ClientConn does. */
	INT_ARG(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
	/* Retries would buffer streamed messages; Gazette's clients retry
	 * themselves. */
	INT_ARG(GRPC_ARG_ENABLE_RETRIES, 0);
#undef INT_ARG
	if (tls && o.tls_server_name && *o.tls_server_name) {
		a[n].type = GRPC_ARG_STRING;
		a[n].key = (char *)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG;
		a[n++].value.string = (char *)o.tls_server_name;
	}
	grpc_channel_args args = {.num_args = (size_t)n, .args = a};
	ch->gc = grpc_channel_create(t, creds, &args);
	grpc_channel_credentials_release(creds);
	free(t);
	return ch;
}

void gaz_rpc_channel_free(struct gaz_rpc_channel *ch)
{
	if (!ch)
		return;
	grpc_channel_destroy(ch->gc);
	free(ch);
}

enum gaz_rpc_conn_state gaz_rpc_channel_state(struct gaz_rpc_channel *ch, bool try_connect)
{
	return (enum gaz_rpc_conn_state)grpc_channel_check_connectivity_state(ch->gc, try_connect);
}

const char *gaz_rpc_conn_state_name(enum gaz_rpc_conn_state s)
{
	static const char *const names[] = {"IDLE", "CONNECTING", "READY", "TRANSIENT_FAILURE",
					    "SHUTDOWN"};

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "UNKNOWN";
}

/* A connectivity watch: completes (on a poller) when the state changed
 * from the watched one or the watch's deadline passed. */
struct watch {
	struct gaz__tag tag;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
};

static void watch_cb(void *tag, int ok)
{
	struct watch *w = tag;

	(void)ok; /* 0 = deadline passed: the caller re-reads the state */
	pthread_mutex_lock(&w->mu);
	w->done = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

int gaz_rpc_channel_wait_ready(struct gaz_rpc_channel *ch, int64_t deadline_ns,
			       enum gaz_rpc_conn_state *last)
{
	struct watch w = {.tag.cb = watch_cb};
	grpc_connectivity_state s = grpc_channel_check_connectivity_state(ch->gc, 1);
	grpc_connectivity_state prev = s;
	int rc = 0;

	pthread_mutex_init(&w.mu, NULL);
	pthread_cond_init(&w.cv, NULL);
	while (s != GRPC_CHANNEL_READY) {
		if (s == GRPC_CHANNEL_TRANSIENT_FAILURE && prev != s) {
			rc = GAZ_EUNAVAIL; /* an attempt made while we waited failed */
			break;
		}
		if (s == GRPC_CHANNEL_SHUTDOWN || gaz_mono_ns() >= deadline_ns) {
			rc = GAZ_ETIMEDOUT;
			break;
		}
		prev = s;
		w.done = false;
		/* The watch always completes by its deadline, so waiting for it
		 * keeps `w` alive exactly as long as grpc needs it. */
		gaz__rpc_tag_give(&w);
		grpc_channel_watch_connectivity_state(ch->gc, s, gaz__rpc_to_gpr(deadline_ns),
						      gaz__rpc_cq(), &w);
		pthread_mutex_lock(&w.mu);
		while (!w.done)
			pthread_cond_wait(&w.cv, &w.mu);
		pthread_mutex_unlock(&w.mu);
		s = grpc_channel_check_connectivity_state(ch->gc, 1);
	}
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.mu);
	if (last)
		*last = (enum gaz_rpc_conn_state)s;
	return rc;
}

static grpc_call *call_create(struct gaz_rpc_channel *ch, const char *path, int64_t deadline_ns)
{
	grpc_slice m = grpc_slice_from_copied_string(path);
	grpc_call *gc = grpc_channel_create_call(ch->gc, NULL, GRPC_PROPAGATE_DEFAULTS,
						 gaz__rpc_cq(), m, NULL,
						 gaz__rpc_to_gpr(deadline_ns), NULL);
	grpc_slice_unref(m);
	return gc;
}

/* init_md_op fills a SEND_INITIAL_METADATA op; `auth` (caller-owned, alive
 * until the batch completes) carries md_auth when non-NULL. */
static void init_md_op(grpc_op *op, grpc_metadata *auth, const char *md_auth, bool wait_for_ready)
{
	op->op = GRPC_OP_SEND_INITIAL_METADATA;
	op->flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY_EXPLICITLY_SET |
		    (wait_for_ready ? GRPC_INITIAL_METADATA_WAIT_FOR_READY : 0);
	if (md_auth) {
		auth->key = grpc_slice_from_static_string("authorization");
		auth->value = grpc_slice_from_copied_string(md_auth);
		op->data.send_initial_metadata.count = 1;
		op->data.send_initial_metadata.metadata = auth;
	}
}

/* rpc_error records a non-OK grpc status in st (code and detail text). */
static int rpc_error(struct gaz_status *st, grpc_status_code code, grpc_slice details)
{
	char *d = grpc_slice_to_c_string(details);

	if (st && st->code == 0)
		st->grpc = (int)code;
	gaz_status_set(st, GAZ_ERPC, "%s", d);
	gpr_free(d);
	return GAZ_ERPC;
}

/* ---- unary ------------------------------------------------------------ */

struct unary {
	struct gaz__tag tag;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	grpc_metadata auth;
	grpc_metadata_array init_md, trailing_md;
	grpc_byte_buffer *req_bb, *resp_bb;
	grpc_status_code status;
	grpc_slice details;
	const char *error_string;
};

static void unary_cb(void *tag, int ok)
{
	struct unary *u = tag;

	(void)ok; /* the status tells */
	pthread_mutex_lock(&u->mu);
	u->done = true;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
}

static grpc_call_error unary_start(struct unary *u, grpc_call *gc, const char *md_auth,
				   bool wait_for_ready)
{
	grpc_op ops[6] = {{0}};

	init_md_op(&ops[0], &u->auth, md_auth, wait_for_ready);
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = u->req_bb;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &u->init_md;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &u->resp_bb;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &u->trailing_md;
	ops[5].data.recv_status_on_client.status = &u->status;
	ops[5].data.recv_status_on_client.status_details = &u->details;
	ops[5].data.recv_status_on_client.error_string = &u->error_string;
	return gaz__rpc_start_batch(gc, ops, 6, u);
}

static int unary_result(struct unary *u, const ProtobufCMessageDescriptor *resp_desc,
			ProtobufCMessage **resp, struct gaz_status *st)
{
	if (u->status != GRPC_STATUS_OK)
		return rpc_error(st, u->status, u->details);
	if (!u->resp_bb)
		return gaz_status_set(st, GAZ_EPROTO, "server sent no response message");
	return gaz__rpc_unpack(u->resp_bb, resp_desc, resp, st);
}

int gaz_rpc_unary(struct gaz_rpc_channel *ch, const char *path, const ProtobufCMessage *req,
		  const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
		  int64_t deadline_ns, bool wait_for_ready, const char *md_auth,
		  struct gaz_status *st)
{
	struct unary u = {.tag.cb = unary_cb, .details = grpc_empty_slice()};
	grpc_call *gc;
	int rc;

	*resp = NULL;
	if (!(gc = call_create(ch, path, deadline_ns)))
		return gaz_status_set(st, GAZ_EINVAL, "cannot create call to %s", path);
	pthread_mutex_init(&u.mu, NULL);
	pthread_cond_init(&u.cv, NULL);
	grpc_metadata_array_init(&u.init_md);
	grpc_metadata_array_init(&u.trailing_md);
	u.req_bb = gaz__rpc_pack(req);
	if (unary_start(&u, gc, md_auth, wait_for_ready) == GRPC_CALL_OK) {
		pthread_mutex_lock(&u.mu);
		while (!u.done)
			pthread_cond_wait(&u.cv, &u.mu);
		pthread_mutex_unlock(&u.mu);
		rc = unary_result(&u, resp_desc, resp, st);
	} else {
		rc = gaz_status_set(st, GAZ_EINVAL, "cannot start call to %s", path);
	}
	grpc_byte_buffer_destroy(u.req_bb);
	if (u.resp_bb)
		grpc_byte_buffer_destroy(u.resp_bb);
	grpc_metadata_array_destroy(&u.init_md);
	grpc_metadata_array_destroy(&u.trailing_md);
	grpc_slice_unref(u.details);
	grpc_slice_unref(u.auth.value);
	gpr_free((void *)u.error_string);
	grpc_call_unref(gc);
	pthread_cond_destroy(&u.cv);
	pthread_mutex_destroy(&u.mu);
	return rc;
}

/* ---- streams ---------------------------------------------------------- */

struct sop {
	struct gaz__tag tag;
	struct gaz_rpc_stream *s;
	bool pending, done;
	int ok;
	int waiters;  /* threads waiting for this op: only they are woken */
};

/* A queued stream's sends wait behind the one in flight up to this many
 * messages or bytes; the sender then waits (flow control). */
#define SENDQ_MAX 8
#define SENDQ_BYTES (2u << 20)

struct gaz_rpc_stream {
	grpc_call *gc;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* any op completion */
	int inflight;
	struct sop start_op, status_op, send_op, close_op, recv_op;
	grpc_byte_buffer *send_bb;  /* the send in flight's message, freed once done */
	/* gaz_rpc_stream_queue_sends: messages queued behind the send in
	 * flight, in order, and a half-close after them; the poller starts
	 * each as the one before completes. */
	bool queue_sends;
	grpc_byte_buffer *sendq[SENDQ_MAX];
	uint32_t sendq_flags[SENDQ_MAX];    /* each message's write flags */
	size_t sendq_n, sendq_bytes;
	bool close_queued;          /* half-close once the queue is out */
	bool send_failed;           /* a queued send failed: the rest were dropped */
	bool freeing;               /* gaz_rpc_stream_free waits for every op */
	bool free_when_idle;        /* gaz_rpc_stream_free_later: the last op frees */
	/* gaz_rpc_stream_recv_notify: called once the receive in flight
	 * completes, on the poller. */
	void (*recv_notify)(void *arg);
	void *recv_notify_arg;
	bool eof;
	bool status_started;        /* RECV_STATUS_ON_CLIENT asked for (status_want) */
	/* gaz_rpc_stream_recv_last: the poller receives on through the end
	 * of the stream, holding the message, and wakes the caller once. */
	bool recv_last;
	bool last_done;             /* the end (or a failure) came */
	bool last_extra;            /* a second message came */
	grpc_byte_buffer *last_bb;  /* the message, until the caller takes it */
	grpc_metadata auth;
	grpc_metadata_array init_md, trailing_md;
	grpc_byte_buffer *recv_bb;
	grpc_status_code status;
	grpc_slice details;
	const char *error_string;
};

static void send_completed(struct gaz_rpc_stream *s, int ok);
static bool recv_last_step(struct gaz_rpc_stream *s);
static bool sop_start(struct gaz_rpc_stream *s, struct sop *o, const grpc_op *ops, size_t n);

/* status_in (s->mu held): the final status has come (or could not be
 * asked for, and stays UNKNOWN). */
static bool status_in(const struct gaz_rpc_stream *s)
{
	return s->status_started && !s->status_op.pending;
}

/* status_want (s->mu held, released meanwhile) asks grpc for the final
 * status, once: at open, or for a lazy stream when it is wanted. False
 * when it could not (the status then reads UNKNOWN, and is "in"). */
static bool status_want(struct gaz_rpc_stream *s)
{
	grpc_op b = {.op = GRPC_OP_RECV_STATUS_ON_CLIENT};

	if (s->status_started)
		return true;
	s->status_started = true;
	b.data.recv_status_on_client.trailing_metadata = &s->trailing_md;
	b.data.recv_status_on_client.status = &s->status;
	b.data.recv_status_on_client.status_details = &s->details;
	b.data.recv_status_on_client.error_string = &s->error_string;
	if (sop_start(s, &s->status_op, &b, 1))
		return true;
	s->status = GRPC_STATUS_UNKNOWN; /* "in": nothing more will come */
	return false;
}

/* last_ready (s->mu held): a gaz_rpc_stream_recv_last caller may return. */
static bool last_ready(const struct gaz_rpc_stream *s)
{
	return s->last_done && status_in(s);
}

/* notify_ready (s->mu held): a receive's notify may run: a message is
 * in, or the stream's end is, with its status. */
static bool notify_ready(const struct gaz_rpc_stream *s)
{
	if (s->recv_op.done && s->recv_op.ok && s->recv_bb)
		return true;
	return (s->recv_op.done || s->eof) && status_in(s);
}

static void stream_release(struct gaz_rpc_stream *s);

static void sop_cb(void *tag, int ok)
{
	struct sop *o = tag;
	struct gaz_rpc_stream *s = o->s;
	void (*notify)(void *arg) = NULL;
	void *notify_arg = NULL;
	bool wake, cancel = false;

	/* The completed op keeps its count in s->inflight until the end of
	 * this callback: starting the next queued send or receive, or
	 * cancelling, lets go of s->mu, and gaz_rpc_stream_free must not
	 * free the stream meanwhile. */
	pthread_mutex_lock(&s->mu);
	o->pending = false;
	o->done = true;
	o->ok = ok;
	if (o == &s->send_op && s->queue_sends)
		send_completed(s, ok);
	/* A lazy stream's receive found the end: now the status is wanted
	 * (its completion comes back here, and notifies or wakes then). */
	if (o == &s->recv_op && !s->status_started && (!ok || !s->recv_bb))
		status_want(s);
	/* Wake only who waits for this op (a gatherer waiting for a reply
	 * must not wake for each send completing), or the final free. A
	 * receive through the end wakes its caller once, when the end and
	 * the status are both in. */
	if (s->recv_last && o == &s->recv_op) {
		cancel = recv_last_step(s);
		wake = o->waiters && last_ready(s);
	} else {
		wake = o->waiters || (s->recv_last && o == &s->status_op && s->recv_op.waiters &&
				      last_ready(s));
	}
	/* A receive that found the stream's end notifies once the status is
	 * in too, so the notified may read why it ended
	 * (gaz_rpc_stream_status_now) without waiting on a poller. */
	if (s->recv_notify && (o == &s->recv_op || o == &s->status_op) && notify_ready(s)) {
		notify = s->recv_notify;
		notify_arg = s->recv_notify_arg;
		s->recv_notify = NULL;
	}
	if (cancel) {
		pthread_mutex_unlock(&s->mu);
		grpc_call_cancel(s->gc, NULL);
		pthread_mutex_lock(&s->mu);
	}
	if (notify) { /* still counted in flight: the stream stays */
		pthread_mutex_unlock(&s->mu);
		notify(notify_arg);
		pthread_mutex_lock(&s->mu);
	}
	s->inflight--;
	if (s->free_when_idle && s->inflight == 0) {
		pthread_mutex_unlock(&s->mu);
		stream_release(s);
		return;
	}
	if (wake || s->freeing)
		pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

/* sop_start starts a batch on `o`; s->mu held (released meanwhile).
 * Returns true if started. */
static bool sop_start(struct gaz_rpc_stream *s, struct sop *o, const grpc_op *ops, size_t n)
{
	grpc_call_error err;

	o->pending = true;
	o->done = false;
	s->inflight++;
	pthread_mutex_unlock(&s->mu);
	err = gaz__rpc_start_batch(s->gc, ops, n, o);
	pthread_mutex_lock(&s->mu);
	if (err == GRPC_CALL_OK)
		return true;
	gaz_error("grpc_call_start_batch failed", "err=%d", (int)err);
	o->pending = false;
	s->inflight--;
	return false;
}

/* sop_run starts a batch and waits for it; returns its ok. */
static int sop_run(struct gaz_rpc_stream *s, struct sop *o, const grpc_op *ops, size_t n)
{
	int ok = 0;

	pthread_mutex_lock(&s->mu);
	if (sop_start(s, o, ops, n)) {
		o->waiters++;
		while (!o->done)
			pthread_cond_wait(&s->cv, &s->mu);
		o->waiters--;
		o->done = false;
		ok = o->ok;
	}
	pthread_mutex_unlock(&s->mu);
	return ok;
}

static struct gaz_rpc_stream *stream_new(grpc_call *gc)
{
	struct gaz_rpc_stream *s = calloc(1, sizeof(*s));
	struct sop *ops[] = {&s->start_op, &s->status_op, &s->send_op, &s->close_op, &s->recv_op};

	if (!s)
		return NULL;
	s->gc = gc;
	pthread_mutex_init(&s->mu, NULL);
	gaz__rpc_cond_init(&s->cv);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		ops[i]->tag.cb = sop_cb;
		ops[i]->s = s;
	}
	grpc_metadata_array_init(&s->init_md);
	grpc_metadata_array_init(&s->trailing_md);
	s->details = grpc_empty_slice();
	s->auth.value = grpc_empty_slice();
	return s;
}

static bool stream_begin(struct gaz_rpc_stream *s, const char *md_auth, bool wait_for_ready,
			 bool lazy)
{
	grpc_op a[2] = {{0}};
	bool ok;

	init_md_op(&a[0], &s->auth, md_auth, wait_for_ready);
	a[1].op = GRPC_OP_RECV_INITIAL_METADATA;
	a[1].data.recv_initial_metadata.recv_initial_metadata = &s->init_md;
	pthread_mutex_lock(&s->mu);
	ok = sop_start(s, &s->start_op, a, 2) && (lazy || status_want(s));
	pthread_mutex_unlock(&s->mu);
	return ok;
}

static struct gaz_rpc_stream *stream_open(struct gaz_rpc_channel *ch, const char *path,
					  int64_t deadline_ns, bool wait_for_ready, bool lazy,
					  const char *md_auth, struct gaz_status *st)
{
	grpc_call *gc = ch ? call_create(ch, path, deadline_ns) : NULL;
	struct gaz_rpc_stream *s;

	if (!gc) {
		gaz_status_set(st, GAZ_EINVAL, "cannot create call to %s", path);
		return NULL;
	}
	if (!(s = stream_new(gc))) {
		grpc_call_unref(gc);
		gaz_status_set(st, GAZ_ENOMEM, "out of memory opening %s", path);
		return NULL;
	}
	if (!stream_begin(s, md_auth, wait_for_ready, lazy)) {
		gaz_rpc_stream_free(s);
		gaz_status_set(st, GAZ_EINVAL, "cannot start call to %s", path);
		return NULL;
	}
	return s;
}

struct gaz_rpc_stream *gaz_rpc_stream_open(struct gaz_rpc_channel *ch, const char *path,
					   int64_t deadline_ns, bool wait_for_ready,
					   const char *md_auth, struct gaz_status *st)
{
	return stream_open(ch, path, deadline_ns, wait_for_ready, false, md_auth, st);
}

struct gaz_rpc_stream *gaz_rpc_stream_open_lazy(struct gaz_rpc_channel *ch, const char *path,
						int64_t deadline_ns, bool wait_for_ready,
						const char *md_auth, struct gaz_status *st)
{
	return stream_open(ch, path, deadline_ns, wait_for_ready, true, md_auth, st);
}

/* sendq_drop (s->mu held) fails a queued stream's sending side. */
static void sendq_drop(struct gaz_rpc_stream *s)
{
	s->send_failed = true;
	s->close_queued = false;
	while (s->sendq_n)
		grpc_byte_buffer_destroy(s->sendq[--s->sendq_n]);
	s->sendq_bytes = 0;
}

/* sendq_next (s->mu held, nothing in flight) starts the next queued
 * message, with the half-close in the same batch when it is the last, or
 * the queued half-close alone. */
static void sendq_next(struct gaz_rpc_stream *s)
{
	grpc_op ops[2] = {{.op = GRPC_OP_SEND_MESSAGE}, {.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT}};
	size_t n = 0;

	if (s->sendq_n) {
		s->send_bb = s->sendq[0];
		s->sendq_bytes -= grpc_byte_buffer_length(s->send_bb);
		ops[n].flags = s->sendq_flags[0];
		memmove(s->sendq, s->sendq + 1, --s->sendq_n * sizeof(*s->sendq));
		memmove(s->sendq_flags, s->sendq_flags + 1, s->sendq_n * sizeof(*s->sendq_flags));
		ops[n++].data.send_message.send_message = s->send_bb;
	}
	if (!s->sendq_n && s->close_queued) {
		s->close_queued = false;
		ops[n++] = (grpc_op){.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT};
	}
	if (!n)
		return;
	/* sop_start drops s->mu around grpc_call_start_batch; the completion
	 * goes to the queue, never inline. */
	if (!sop_start(s, &s->send_op, ops, n)) {
		if (s->send_bb)
			grpc_byte_buffer_destroy(s->send_bb);
		s->send_bb = NULL;
		sendq_drop(s);
	}
}

/* send_completed (s->mu held, on a poller) frees the message of a queued
 * stream's send that completed and starts what is queued behind it. */
static void send_completed(struct gaz_rpc_stream *s, int ok)
{
	if (s->send_bb)
		grpc_byte_buffer_destroy(s->send_bb);
	s->send_bb = NULL;
	s->send_op.done = false;
	if (!ok || s->freeing)
		sendq_drop(s);
	else
		sendq_next(s);
}

/* send_settle (s->mu held) waits for the send in flight, if any, frees
 * its message and returns whether it went out. grpc allows one send at a
 * time; the previous one has usually completed by the next send. */
static bool send_settle(struct gaz_rpc_stream *s)
{
	bool ok = true;

	s->send_op.waiters++;
	while (s->send_op.pending)
		pthread_cond_wait(&s->cv, &s->mu);
	s->send_op.waiters--;
	if (s->send_op.done) {
		s->send_op.done = false;
		ok = s->send_op.ok;
	}
	if (s->send_bb) {
		grpc_byte_buffer_destroy(s->send_bb);
		s->send_bb = NULL;
	}
	return ok;
}

struct gaz_rpc_packed *gaz_rpc_pack_msg(const ProtobufCMessage *msg)
{
	struct gaz_rpc_packed *p = malloc(sizeof(*p));
	size_t len = protobuf_c_message_get_packed_size(msg);

	if (!p)
		return NULL;
	p->slice = grpc_slice_malloc(len);
	protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(p->slice));
	return p;
}

void gaz_rpc_packed_free(struct gaz_rpc_packed *p)
{
	if (!p)
		return;
	grpc_slice_unref(p->slice);
	free(p);
}

static int stream_send_bb(struct gaz_rpc_stream *s, grpc_byte_buffer *bb, uint32_t flags);

int gaz_rpc_stream_send_packed(struct gaz_rpc_stream *s, const struct gaz_rpc_packed *p,
			       bool buffer)
{
	grpc_slice slice = p->slice;

	/* The byte buffer takes its own reference: no copy. */
	return stream_send_bb(s, grpc_raw_byte_buffer_create(&slice, 1),
			      buffer ? GRPC_WRITE_BUFFER_HINT : 0);
}

void gaz_rpc_stream_queue_sends(struct gaz_rpc_stream *s)
{
	pthread_mutex_lock(&s->mu);
	s->queue_sends = true;
	pthread_mutex_unlock(&s->mu);
}

int gaz_rpc_stream_send(struct gaz_rpc_stream *s, const ProtobufCMessage *msg)
{
	return stream_send_bb(s, gaz__rpc_pack(msg), 0);
}

int gaz_rpc_stream_send_buffered(struct gaz_rpc_stream *s, const ProtobufCMessage *msg)
{
	return stream_send_bb(s, gaz__rpc_pack(msg), GRPC_WRITE_BUFFER_HINT);
}

static int stream_send_bb(struct gaz_rpc_stream *s, grpc_byte_buffer *bb, uint32_t flags)
{
	grpc_op op = {.op = GRPC_OP_SEND_MESSAGE, .flags = flags};
	bool ok;

	pthread_mutex_lock(&s->mu);
	if (s->queue_sends) {
		size_t len = grpc_byte_buffer_length(bb);
		bool full;

		s->send_op.waiters++;
		while ((full = !s->send_failed && s->send_op.pending &&
			       (s->sendq_n == SENDQ_MAX ||
				(s->sendq_n && s->sendq_bytes + len > SENDQ_BYTES))) &&
		       !gaz__rpc_on_poller())
			pthread_cond_wait(&s->cv, &s->mu);
		s->send_op.waiters--;
		/* A poller cannot wait for its own completions: a full queue
		 * fails this send (nothing queued) instead. */
		if ((ok = !s->send_failed && !full)) {
			s->sendq_flags[s->sendq_n] = flags;
			s->sendq[s->sendq_n++] = bb;
			s->sendq_bytes += len;
			bb = NULL;
			if (!s->send_op.pending)
				sendq_next(s);
		}
		pthread_mutex_unlock(&s->mu);
		if (bb)
			grpc_byte_buffer_destroy(bb);
		return ok ? 0 : GAZ_ERPC;
	}
	ok = send_settle(s);
	if (ok) {
		op.data.send_message.send_message = s->send_bb = bb;
		if (!(ok = sop_start(s, &s->send_op, &op, 1)))
			s->send_bb = NULL;
	}
	pthread_mutex_unlock(&s->mu);
	if (!ok)
		grpc_byte_buffer_destroy(bb);
	return ok ? 0 : GAZ_ERPC;
}

int gaz_rpc_stream_close_send(struct gaz_rpc_stream *s)
{
	grpc_op op = {.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT};
	bool sent;

	pthread_mutex_lock(&s->mu);
	if (s->queue_sends) {
		/* Behind the queue, or alone now; its outcome shows in the
		 * call's status. */
		if ((sent = !s->send_failed)) {
			s->close_queued = true;
			if (!s->send_op.pending)
				sendq_next(s);
		}
		pthread_mutex_unlock(&s->mu);
		return sent ? 0 : GAZ_ERPC;
	}
	sent = send_settle(s);
	pthread_mutex_unlock(&s->mu);
	return sop_run(s, &s->close_op, &op, 1) && sent ? 0 : GAZ_ERPC;
}

/* recv_wait (s->mu held) waits for the in-flight receive; true if done. */
static bool recv_wait(struct gaz_rpc_stream *s, int64_t deadline_ns)
{
	bool done = true;

	s->recv_op.waiters++;
	while (!s->recv_op.done)
		if (gaz__rpc_timedwait(&s->cv, &s->mu, deadline_ns)) {
			done = s->recv_op.done;
			break;
		}
	s->recv_op.waiters--;
	return done;
}

/* recv_start (s->mu held) keeps one receive in flight unless one is in
 * flight or unread; false when none could be started (the stream is
 * then over). */
static bool recv_start(struct gaz_rpc_stream *s)
{
	grpc_op op = {.op = GRPC_OP_RECV_MESSAGE};

	if (s->eof || s->recv_op.pending || s->recv_op.done)
		return !s->eof;
	op.data.recv_message.recv_message = &s->recv_bb;
	if (!sop_start(s, &s->recv_op, &op, 1))
		s->eof = true;
	return !s->eof;
}

void gaz_rpc_stream_recv_ahead(struct gaz_rpc_stream *s)
{
	pthread_mutex_lock(&s->mu);
	if (!s->recv_last)
		(void)recv_start(s);
	pthread_mutex_unlock(&s->mu);
}

/* ready_or_arm (s->mu held, released meanwhile) keeps a receive in
 * flight and returns true when its outcome can be taken now (a message,
 * or the end with its status, which a lazy stream asks for here);
 * otherwise it arms fn(arg) for the poller that completes it. */
static bool ready_or_arm(struct gaz_rpc_stream *s, void (*fn)(void *arg), void *arg)
{
	(void)recv_start(s);
	if (s->eof || s->recv_op.done)
		status_want(s);
	if (notify_ready(s)) {
		s->recv_notify = NULL;
		return true;
	}
	s->recv_notify = fn;
	s->recv_notify_arg = arg;
	return false;
}

void gaz_rpc_stream_recv_notify(struct gaz_rpc_stream *s, void (*fn)(void *arg), void *arg)
{
	bool now;

	pthread_mutex_lock(&s->mu);
	now = s->recv_last || ready_or_arm(s, fn, arg);
	pthread_mutex_unlock(&s->mu);
	if (now)
		fn(arg);
}

int gaz_rpc_stream_try_recv(struct gaz_rpc_stream *s, const ProtobufCMessageDescriptor *desc,
			    ProtobufCMessage **out, void (*fn)(void *arg), void *arg)
{
	bool ready;

	*out = NULL;
	pthread_mutex_lock(&s->mu);
	ready = ready_or_arm(s, fn, arg);
	pthread_mutex_unlock(&s->mu);
	/* In: the receive below takes it without waiting. */
	return ready ? gaz_rpc_stream_recv(s, desc, out, 0) : GAZ_ETIMEDOUT;
}

int gaz_rpc_stream_recv(struct gaz_rpc_stream *s, const ProtobufCMessageDescriptor *desc,
			ProtobufCMessage **out, int64_t deadline_ns)
{
	grpc_byte_buffer *bb = NULL;
	int rc;

	*out = NULL;
	pthread_mutex_lock(&s->mu);
	(void)recv_start(s);
	if (s->eof || !recv_wait(s, deadline_ns)) {
		rc = s->eof ? GAZ_EOF : GAZ_ETIMEDOUT; /* a timed-out receive stays in flight */
		pthread_mutex_unlock(&s->mu);
		return rc;
	}
	s->recv_op.done = false;
	if (s->recv_op.ok)
		bb = s->recv_bb;
	else if (s->recv_bb)
		grpc_byte_buffer_destroy(s->recv_bb);
	s->recv_bb = NULL;
	s->eof = bb == NULL; /* end of stream or failed call */
	pthread_mutex_unlock(&s->mu);
	if (!bb)
		return GAZ_EOF;
	rc = gaz__rpc_unpack(bb, desc, out, NULL);
	grpc_byte_buffer_destroy(bb);
	return rc;
}

/* recv_last_step (s->mu held; on a poller, or in the caller for a
 * receive that completed before recv_last was set) takes the completed
 * receive: the first message is held and the next receive started at
 * once; the end of the stream, a failure or a second message ends it.
 * Returns true if the call must be cancelled (a second message: the
 * status comes only once the call ends); the caller cancels once it has
 * let go of s->mu. */
static bool recv_last_step(struct gaz_rpc_stream *s)
{
	grpc_op op = {.op = GRPC_OP_RECV_MESSAGE};
	grpc_byte_buffer *bb = s->recv_op.ok ? s->recv_bb : NULL;

	if (!s->recv_op.ok && s->recv_bb)
		grpc_byte_buffer_destroy(s->recv_bb);
	s->recv_bb = NULL;
	s->recv_op.done = false;
	if (bb && s->freeing) {
		grpc_byte_buffer_destroy(bb);
		bb = NULL;
	}
	if (!bb) {
		s->last_done = true;
	} else if (s->last_bb) {
		grpc_byte_buffer_destroy(bb); /* dropped; the call is failed */
		s->last_extra = s->last_done = true;
		return s->status_op.pending;
	} else {
		s->last_bb = bb;
		op.data.recv_message.recv_message = &s->recv_bb;
		/* sop_start drops s->mu around grpc_call_start_batch; the
		 * completion goes to the queue, never inline. */
		if (!sop_start(s, &s->recv_op, &op, 1))
			s->last_done = true;
	}
	return false;
}

int gaz_rpc_stream_recv_last(struct gaz_rpc_stream *s, const ProtobufCMessageDescriptor *desc,
			     ProtobufCMessage **out, int64_t deadline_ns)
{
	grpc_op op = {.op = GRPC_OP_RECV_MESSAGE};
	grpc_byte_buffer *bb;
	bool extra;
	int rc;

	*out = NULL;
	op.data.recv_message.recv_message = &s->recv_bb;
	pthread_mutex_lock(&s->mu);
	status_want(s); /* last_ready waits for it */
	if (!s->recv_last) {
		s->recv_last = true;
		if (s->eof)
			s->last_done = true;
		else if (s->recv_op.done) /* an earlier receive completed unread: */
			(void)recv_last_step(s); /* the first message, never a cancel */
		else if (!s->recv_op.pending && !sop_start(s, &s->recv_op, &op, 1))
			s->last_done = true;
	}
	s->recv_op.waiters++;
	while (!last_ready(s))
		if (gaz__rpc_timedwait(&s->cv, &s->mu, deadline_ns))
			break;
	s->recv_op.waiters--;
	if (!last_ready(s)) {
		pthread_mutex_unlock(&s->mu); /* the receive stays in flight */
		return GAZ_ETIMEDOUT;
	}
	bb = s->last_bb;
	s->last_bb = NULL;
	extra = s->last_extra;
	s->eof = true;
	pthread_mutex_unlock(&s->mu);
	if (!bb)
		return GAZ_EOF;
	rc = extra ? GAZ_EPROTO : gaz__rpc_unpack(bb, desc, out, NULL);
	grpc_byte_buffer_destroy(bb);
	return rc;
}

int gaz_rpc_stream_status_now(struct gaz_rpc_stream *s, struct gaz_status *st)
{
	int rc = 0;

	pthread_mutex_lock(&s->mu);
	if (!status_in(s))
		rc = GAZ_ETIMEDOUT;
	else if (s->status != GRPC_STATUS_OK)
		rc = rpc_error(st, s->status, s->details);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int gaz_rpc_stream_finish(struct gaz_rpc_stream *s, struct gaz_status *st)
{
	int rc = 0;

	pthread_mutex_lock(&s->mu);
	status_want(s);
	s->status_op.waiters++;
	while (s->status_op.pending)
		pthread_cond_wait(&s->cv, &s->mu);
	s->status_op.waiters--;
	if (s->status != GRPC_STATUS_OK)
		rc = rpc_error(st, s->status, s->details);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

void gaz_rpc_stream_cancel(struct gaz_rpc_stream *s)
{
	grpc_call_cancel(s->gc, NULL);
}

void gaz_rpc_stream_free(struct gaz_rpc_stream *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->freeing = true;
	if (s->inflight > 0)
		grpc_call_cancel(s->gc, NULL); /* a no-op once the status is in */
	while (s->inflight > 0)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	stream_release(s);
}

void gaz_rpc_stream_free_later(struct gaz_rpc_stream *s)
{
	bool now;

	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	now = s->inflight == 0;
	if (!now) {
		/* Under mu, as gaz_rpc_stream_free cancels: the last op's
		 * sop_cb frees the stream, and waits for mu to do it. */
		s->free_when_idle = true;
		grpc_call_cancel(s->gc, NULL); /* a no-op once the status is in */
		pthread_mutex_unlock(&s->mu);
		return;
	}
	pthread_mutex_unlock(&s->mu);
	stream_release(s);
}

/* stream_release frees `s`, no op in flight. */
static void stream_release(struct gaz_rpc_stream *s)
{
	if (s->recv_bb)
		grpc_byte_buffer_destroy(s->recv_bb);
	if (s->last_bb)
		grpc_byte_buffer_destroy(s->last_bb);
	if (s->send_bb)
		grpc_byte_buffer_destroy(s->send_bb);
	while (s->sendq_n)
		grpc_byte_buffer_destroy(s->sendq[--s->sendq_n]);
	grpc_metadata_array_destroy(&s->init_md);
	grpc_metadata_array_destroy(&s->trailing_md);
	grpc_slice_unref(s->details);
	grpc_slice_unref(s->auth.value);
	gpr_free((void *)s->error_string);
	grpc_call_unref(s->gc);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
