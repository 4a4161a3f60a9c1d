/*
 * append_batch.c - group commit of small appends on the primary.
 *
 * Gazette commits each append as its own replicated transaction: with many
 * small concurrent appends to one journal, the per-transaction cost (a
 * proposal and an acknowledgement per peer, a spool commit everywhere)
 * bounds throughput. Here an append whose whole request is small reads its
 * content before it waits for the append token, then waits in the
 * replica's group-commit queue. Whichever append next holds the token (as
 * the group's leader) checks the preconditions once, writes every queued
 * member's content after its own and commits them all with one proposal.
 * Each member still gets its own commit range and SHA-1, exactly as if it
 * had committed alone right after the previous one; if the transaction
 * fails, every member fails with the leader (the client retries, as for
 * any failed append).
 *
 * Only appends that cannot differ in their preconditions are grouped: no
 * offset, no register checks or changes, default suspension, non-empty
 * content, fully received (the empty commit-intent chunk and EOF seen).
 * A whole plain append arriving while the token is free is committed by
 * the poller that read it (the poller commit), an empty one too (it
 * proposes the spool's fragment unchanged and answers the write head).
 * Everything else, and any request larger than PREFETCH_MAX_BYTES, takes
 * the ordinary path; content read ahead is then replayed first. A grouped
 * append is received and hashed before it waits, so concurrent appends
 * to one journal do that work in parallel; the token holder only writes.
 */
#include <stdlib.h>
#include <string.h>

#include "broker/append_int.h"
#include "broker/metrics.h"
#include "common/clock.h"
#include "common/log.h"
#include "keyspace/keyspace.h"
#include "protocol/labels.h"
#include "protocol/validate.h"

#define PREFETCH_MAX_BYTES (4 << 20)   /* content of one grouped append */
#define PREFETCH_MAX_MSGS 256
#define PREFETCH_BUDGET (64 << 20)     /* read ahead by all appends of the broker */
#define PREFETCH_WAIT_MS 20            /* for the next message of a request */

/* The request may share preconditions with any other such request. */
static bool plain_request(const Protocol__AppendRequest *q)
{
	return q->offset == 0 && q->suspend == PROTOCOL__APPEND_REQUEST__SUSPEND__SUSPEND_RESUME &&
	       !(q->check_registers &&
		 ((q->check_registers->include && q->check_registers->include->n_labels) ||
		  (q->check_registers->exclude && q->check_registers->exclude->n_labels))) &&
	       !(q->union_registers && q->union_registers->n_labels) &&
	       !(q->subtract_registers && q->subtract_registers->n_labels);
}

static bool push_msg(struct append_prefetch *p, Protocol__AppendRequest *m)
{
	Protocol__AppendRequest **grown;

	if (p->n % 4 == 0) {
		grown = realloc(p->msgs, (p->n + 4) * sizeof(*grown));
		if (!grown)
			return false;
		p->msgs = grown;
	}
	p->msgs[p->n++] = m;
	return true;
}

/* One message after the first, in a groupable request: content chunks
 * (valid, none naming a journal), the empty commit intent last. Returns
 * false for anything else, *intent set by the intent. */
static bool next_chunk_ok(const Protocol__AppendRequest *m, bool *intent)
{
	struct gaz_status st = {0};

	if (*intent || m->journal[0] || gaz_validate_append_request(m, &st))
		return false;
	*intent = m->content.len == 0;
	return true;
}

/* The prefetched messages form one complete groupable request: content
 * chunks, then the empty commit intent, then EOF. */
static bool complete_request(const struct append_prefetch *p)
{
	bool intent = false;

	if (p->end_rc != GAZ_EOF || p->n < 2)
		return false;
	for (size_t i = 0; i < p->n; i++)
		if (!next_chunk_ok(p->msgs[i], &intent))
			return false;
	return intent;
}

static int make_entry(struct append_ctx *a)
{
	struct append_prefetch *p = &a->pre;
	struct gaz_batch_entry *e = &a->entry;
	size_t off = 0;

	*e = (struct gaz_batch_entry){.a = a, .len = p->bytes};
	if (p->n == 2) {
		e->data = p->msgs[0]->content.data;
		goto sum;
	}
	if (!(e->owned = malloc(p->bytes)))
		return GAZ_ENOMEM;
	for (size_t i = 0; i + 1 < p->n; i++) {
		memcpy(e->owned + off, p->msgs[i]->content.data, p->msgs[i]->content.len);
		off += p->msgs[i]->content.len;
	}
	e->data = e->owned;
sum:	/* The append's own SHA-1, before it waits for the journal. */
	return gaz_sha1(e->data, e->len, e->sum);
}

void gaz__append_prefetch(struct append_ctx *a)
{
	struct append_prefetch *p = &a->pre;
	atomic_llong *budget = &a->b->append_prefetched;

	if (p->tried)
		return;
	p->tried = true;
	if (!plain_request(a->req) || gaz_rpc_is_local(a->call))
		return;
	while (!p->end_rc && p->n < PREFETCH_MAX_MSGS && p->bytes <= PREFETCH_MAX_BYTES &&
	       atomic_load(budget) < PREFETCH_BUDGET) {
		Protocol__AppendRequest *m = NULL;
		int rc = gaz_rpc_recv(a->call, &protocol__append_request__descriptor,
				      (ProtobufCMessage **)&m, gaz_deadline_in(PREFETCH_WAIT_MS));
		if (rc == GAZ_ETIMEDOUT)
			break; /* a slow client streams on the ordinary path */
		if (rc) {
			p->end_rc = rc;
			break;
		}
		if (!push_msg(p, m)) {
			protobuf_c_message_free_unpacked(&m->base, NULL);
			p->end_rc = GAZ_ENOMEM;
			break;
		}
		p->bytes += m->content.len;
		atomic_fetch_add(budget, (long long)m->content.len);
	}
	a->batchable = p->bytes <= PREFETCH_MAX_BYTES && complete_request(p) && make_entry(a) == 0;
}

int gaz__append_next_prefetched(struct append_ctx *a, Protocol__AppendRequest **m)
{
	struct append_prefetch *p = &a->pre;

	*m = NULL;
	if (p->next < p->n) {
		*m = p->msgs[p->next];
		p->msgs[p->next++] = NULL;
		return 0;
	}
	if (p->end_rc)
		return p->end_rc == GAZ_ENOMEM ? GAZ_ECANCELLED : p->end_rc;
	return APPEND_NONE_PREFETCHED;
}

void gaz__append_prefetch_release(struct append_ctx *a)
{
	struct append_prefetch *p = &a->pre;

	for (size_t i = 0; i < p->n; i++)
		if (p->msgs[i])
			protobuf_c_message_free_unpacked(&p->msgs[i]->base, NULL);
	free(p->msgs);
	free(a->entry.owned);
	atomic_fetch_sub(&a->b->append_prefetched, (long long)p->bytes);
	*p = (struct append_prefetch){.tried = true};
	a->entry.owned = NULL;
	a->batchable = false;
}

/* A member answered by another append's group commit. */
static void respond_as_member(struct append_ctx *a)
{
	struct gaz_batch_entry *e = &a->entry;

	if (e->code != GAZ_GRPC_OK) {
		gaz__append_respond_error(a, e->code, e->msg);
	} else if (e->status != PROTOCOL__STATUS__OK) {
		gaz__append_respond_status(a, e->status);
	} else {
		a->commit_begin = e->begin;
		a->commit_end = e->end;
		a->commit_codec = e->codec;
		memcpy(a->commit_sum, e->sum, sizeof(a->commit_sum));
		a->total_chunks = (int64_t)a->pre.n - 1;
		gaz__append_respond_commit(a);
	}
}

int gaz__append_acquire(struct append_ctx *a)
{
	struct gaz_replica *r = a->res.replica;
	int rc;

	a->batch = NULL;
	if (!a->batchable)
		return gaz_replica_acquire(r, a->call);
	if (!a->registers && !(a->registers = gaz_labelset_new()))
		return gaz_replica_acquire(r, a->call);
	rc = gaz_replica_acquire_queued(r, a->call, &a->entry.link);
	if (rc == 1) {
		respond_as_member(a);
		return 1;
	}
	if (rc == 0)
		a->batch = &a->entry;
	return rc;
}

struct take_budget {
	size_t bytes, max_bytes;
};

static bool fits(struct gaz_batch_link *l, void *arg)
{
	struct take_budget *t = arg;
	const struct gaz_batch_entry *e = (const struct gaz_batch_entry *)l;

	if (t->bytes + e->len > t->max_bytes)
		return false;
	t->bytes += e->len;
	return true;
}

size_t gaz__append_batch_take(struct append_ctx *a, struct gaz_batch_link **out, size_t max,
			      size_t max_bytes)
{
	struct take_budget t = {.max_bytes = max_bytes};

	return gaz_replica_take_queued(a->res.replica, out, max, fits, &t);
}

/* ---- the fast path: appends parked without a thread ---------------------- */

/* Gives a parked call back its handler thread (the token went free with
 * it queued, or the replica died). The request is still read ahead. */
static void parked_dispatch(struct gaz_batch_link *l)
{
	struct gaz_batch_entry *e = (struct gaz_batch_entry *)l;
	struct gaz_rpc_call *call = l->call;

	free(e->owned);
	free(e);
	gaz_rpc_dispatch(call);
}

void gaz__append_answer_parked(struct append_ctx *a, struct gaz_batch_entry *e)
{
	/* Answer through the leader's resolution (header, journal) and
	 * registers, on the parked call: a borrowed, read-only view. */
	struct append_ctx pa = {.b = a->b, .call = e->link.call, .res = a->res,
				.registers = a->registers, .total_chunks = e->chunks};

	gaz_metric_rpc_started("Append");
	if (e->code != GAZ_GRPC_OK) {
		gaz__append_respond_error(&pa, e->code, e->msg);
	} else if (e->status != PROTOCOL__STATUS__OK) {
		gaz__append_respond_status(&pa, e->status);
	} else {
		pa.commit_begin = e->begin;
		pa.commit_end = e->end;
		pa.commit_codec = e->codec;
		memcpy(pa.commit_sum, e->sum, sizeof(pa.commit_sum));
		gaz__append_respond_commit(&pa);
	}
	gaz_rpc_unpark(e->link.call);
	free(e->owned);
	free(e);
}

/* Reads the whole request by peeking (nothing is consumed, so a handler
 * can still run it): a plain first message and its content. Returns the
 * first message, or NULL when the request does not qualify. */
static Protocol__AppendRequest *peek_request(struct gaz_rpc_call *call, uint8_t **data,
					     size_t *len, int64_t *chunks)
{
	const ProtobufCMessageDescriptor *d = &protocol__append_request__descriptor;
	Protocol__AppendRequest *req = NULL, *m = NULL;
	struct gaz_status st = {0};
	bool intent = false;
	size_t n, bytes;
	int rc;

	*data = NULL;
	*len = 0;
	*chunks = 0;
	/* Only a whole request, small enough to group, is worth unpacking. */
	if (gaz_rpc_peek_size(call, &n, &bytes) != GAZ_EOF || n < 2 || bytes > PREFETCH_MAX_BYTES)
		return NULL;
	if (gaz_rpc_peek(call, 0, d, (ProtobufCMessage **)&req) || !req->journal[0] ||
	    gaz_validate_append_request(req, &st) || !plain_request(req))
		goto fail;
	for (size_t i = 1;; i++) {
		uint8_t *grown;
		if ((rc = gaz_rpc_peek(call, i, d, (ProtobufCMessage **)&m)) == GAZ_EOF)
			break;
		if (rc || !next_chunk_ok(m, &intent))
			goto fail;
		if (!intent) {
			if (!(grown = realloc(*data, *len + m->content.len)))
				goto fail;
			memcpy(grown + *len, m->content.data, m->content.len);
			*data = grown;
			*len += m->content.len;
			++*chunks;
		}
		protobuf_c_message_free_unpacked(&m->base, NULL);
		m = NULL;
	}
	if (intent)
		return req; /* *len 0: an empty append (the poller commit only) */
fail:
	if (m)
		protobuf_c_message_free_unpacked(&m->base, NULL);
	if (req)
		protobuf_c_message_free_unpacked(&req->base, NULL);
	free(*data);
	*data = NULL;
	return NULL;
}

/* The replica that serves an append to `journal` by the fast path,
 * without resolving again: a resolution at the keyspace's current
 * revision found it fit (fast_rev), so nothing it looked at has changed.
 * Returns a reference, or NULL to resolve. */
static struct gaz_replica *fast_replica(struct gaz_broker *b, const Protocol__AppendRequest *req)
{
	struct gaz_replica *r;
	int64_t rev;

	/* A proxied request's header is checked by a full resolution. */
	if (req->header || strchr(req->journal, ';') || atomic_load(&b->stopping) ||
	    !(r = gaz_replica_get(b, req->journal)))
		return NULL;
	gaz_keyspace_rlock(b->ks);
	rev = gaz_keyspace_revision(b->ks);
	gaz_keyspace_runlock(b->ks);
	if (rev == atomic_load(&r->fast_rev) && req->min_etcd_revision <= rev)
		return r;
	gaz_replica_unref(r);
	return NULL;
}

/* What the handler would do before grouping, none of which applies to a
 * fast-path append: route fix-ups to write (a member inconsistent, or the
 * route not at the desired replication), a suspension to lift, writes
 * not allowed. */
static bool fast_fit(struct gaz_broker *b, const struct gaz_resolution *res)
{
	const Protocol__JournalSpec *spec = res->spec;

	if ((int64_t)res->route.n != gaz__append_desired_replication(b, spec) ||
	    (spec->suspend && spec->suspend->level != PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__NONE) ||
	    !gaz_journal_may_write(spec->flags))
		return false;
	for (size_t i = 0; i < res->route.n; i++)
		if (!res->route.consistent[i])
			return false;
	return true;
}

/* How the fast path resolves: as the handler would for the primary (a
 * proxied request's header checked as ours, its revision reached), but
 * never waiting for a newer revision (a poller must not block). */
static struct gaz_resolve_opts fast_opts(const Protocol__AppendRequest *req)
{
	return (struct gaz_resolve_opts){
		.may_proxy = true,
		.require_primary = true,
		.min_etcd_revision = req->min_etcd_revision,
		.proxy_header = req->header,
		.no_wait = true,
	};
}

/* A full resolution: the replica if the append may take the fast path,
 * with its fast_rev noted. Returns a reference, or NULL. */
static struct gaz_replica *resolve_fast(struct gaz_broker *b, const Protocol__AppendRequest *req)
{
	struct gaz_resolution res = {.route.primary = -1};
	struct gaz_status st = {0};
	struct gaz_replica *r = NULL;
	struct gaz_resolve_opts o = fast_opts(req);

	if (gaz_resolve(b, req->journal, &o, &res, &st) || res.status != PROTOCOL__STATUS__OK ||
	    !res.replica || !fast_fit(b, &res))
		goto out;
	r = res.replica;
	atomic_fetch_add(&r->refs, 1);
	if (!strchr(req->journal, ';'))
		atomic_store(&r->fast_rev, res.etcd.revision);
out:
	gaz_resolution_release(&res);
	return r;
}

/* ---- the poller's commit: a lone append with no handler thread ---------- */

void gaz__append_poller_done(struct append_ctx *a)
{
	struct gaz_rpc_call *call = a->call;

	free(a->entry.owned);
	gaz_labelset_free(a->registers);
	gaz_resolution_release(&a->res);
	protobuf_c_message_free_unpacked(&a->req->base, NULL);
	free(a);
	gaz_rpc_unpark(call);
}

/* With the token held and the request read (`e`, its first message
 * `req`, both handed over): a context of its own for the append, resolved
 * again (the commit needs the spec and route), then the poller commit.
 * Returns true once that took the append; false with the token still
 * held, and `e` and `req` freed, for the handler's path. */
static bool poller_commit(struct gaz_rpc_call *call, struct gaz_broker *b,
			  Protocol__AppendRequest *req, struct gaz_replica *r,
			  struct gaz_batch_entry *e)
{
	struct gaz_status st = {0};
	struct append_ctx *a = NULL;
	struct gaz_resolve_opts o = fast_opts(req);

	if (!gaz__append_poller_may_commit(r, e) || !(a = calloc(1, sizeof(*a))))
		goto fallback;
	*a = (struct append_ctx){.b = b, .call = call, .req = req, .entry = *e,
				 .registers = gaz_labelset_new()};
	a->res.route.primary = -1;
	if (!a->registers || gaz_resolve(b, req->journal, &o, &a->res, &st) ||
	    a->res.status != PROTOCOL__STATUS__OK || a->res.replica != r || !fast_fit(b, &a->res))
		goto fallback;
	a->entry.data = a->entry.owned;
	if (gaz__append_poller_commit(a, &a->entry) == 0) {
		gaz_metric_rpc_started("Append");
		gaz_metric_append_poller_commit();
		free(e);
		return true;
	}
fallback:
	if (a) {
		gaz_labelset_free(a->registers);
		gaz_resolution_release(&a->res);
		free(a);
	}
	free(e->owned);
	free(e);
	protobuf_c_message_free_unpacked(&req->base, NULL);
	return false;
}

bool gaz_append_fast(struct gaz_rpc_call *call, struct gaz_broker *b)
{
	struct gaz_batch_entry *e = NULL;
	struct gaz_replica *r = NULL;
	Protocol__AppendRequest *req;
	uint8_t *data;
	size_t len;
	int64_t chunks;
	bool parked = false;
	int rc;

	if (!(req = peek_request(call, &data, &len, &chunks)))
		return false;
	if (!gaz_journal_visible(b, call, req->journal))
		goto out; /* the handler answers JOURNAL_NOT_FOUND */
	if (!(r = fast_replica(b, req)) && !(r = resolve_fast(b, req)))
		goto out;
	if (!(e = calloc(1, sizeof(*e))))
		goto out;
	e->link.parked = true;
	e->link.call = call;
	e->link.unpark = parked_dispatch;
	e->data = e->owned = data;
	e->len = len;
	e->chunks = chunks;
	if (gaz_sha1(data, len, e->sum))
		goto out;
	/* In a busy journal (its last transaction a group), appends keep
	 * to the handler's path, which gathers the next group. An empty
	 * append is never grouped (a group's members carry content): it
	 * commits here while the token is free, or takes the handler's path. */
	if (len == 0)
		rc = atomic_load(&r->last_group_n) <= 1 && gaz_replica_try_acquire(r) ? 2 : 0;
	else if (atomic_load(&r->last_group_n) > 1)
		rc = gaz_replica_park(r, &e->link) ? 1 : 0;
	else
		rc = gaz_replica_park_or_acquire(r, &e->link);
	if (rc == 1) {
		parked = true;
		gaz_metric_append_parked();
	} else if (rc == 2) {
		/* The token was free: commit here, else let it go and take
		 * the handler's path. */
		parked = poller_commit(call, b, req, r, e);
		if (!parked)
			gaz_replica_release(r);
		gaz_replica_unref(r);
		return parked;
	}
out:
	if (!parked) {
		free(e);
		free(data);
	}
	gaz_replica_unref(r);
	protobuf_c_message_free_unpacked(&req->base, NULL);
	return parked;
}

/* ---- the periodic pulse without a thread --------------------------------- */

/* A pulse's request: empty, shared by every pulse and never written. */
static Protocol__AppendRequest pulse_request = PROTOCOL__APPEND_REQUEST__INIT;

bool gaz_append_pulse_fast(struct gaz_broker *b, struct gaz_replica *r, gaz_pulse_done_fn done,
			   void *arg, struct gaz_pipeline **pln)
{
	struct gaz_resolve_opts o = {.require_primary = true, .no_wait = true};
	struct gaz_status st = {0};
	struct append_ctx *a;

	if (atomic_load(&b->stopping) || atomic_load(&b->exiting) || !(a = calloc(1, sizeof(*a))))
		return false;
	*a = (struct append_ctx){.b = b, .req = &pulse_request, .pulse_done = done,
				 .pulse_arg = arg, .registers = gaz_labelset_new()};
	a->res.route.primary = -1;
	if (!a->registers || !gaz_replica_try_acquire(r))
		goto fail;
	if (gaz_resolve(b, r->journal, &o, &a->res, &st) || a->res.status != PROTOCOL__STATUS__OK ||
	    a->res.replica != r || !fast_fit(b, &a->res) || gaz__append_pulse_commit(a, pln)) {
		gaz_replica_release(r);
		goto fail;
	}
	return true;
fail:
	gaz_labelset_free(a->registers);
	gaz_resolution_release(&a->res);
	free(a);
	return false;
}
