/*
 * append_service.c - asynchronous, ordered, batched appends (see
 * gazette/append_service.h), after Gazette's AppendService
 * (broker/client/append_service.go, facts §7.4).
 *
 * Structure. Each journal with queued appends has a `sjournal`: a FIFO of
 * entries (an append's bytes, its handle, its register options) and a
 * `busy` flag. A journal with entries and not busy is on the ready list.
 * Worker threads take a journal off the ready list, detach a batch from
 * the head of its FIFO (busy = true), run the Append RPC (retrying) with
 * no lock held, complete the batch's handles, and put the journal back on
 * the ready list if more entries arrived, or drop it when it is empty.
 *
 *   (none) --append--> READY --worker--> BUSY --batch done--> READY (more queued)
 *                                          |                 --> (none) (empty, no error)
 *                                          +--terminal error--> FAILED (sticky; entries fail)
 *
 * Invariants (under svc->mu): a journal is on the ready list iff it has
 * entries, is not busy and has no error; a busy journal is owned by
 * exactly one worker, which alone touches its in-flight batch, so appends
 * to one journal are sent one batch at a time in FIFO order; `buffered`
 * counts the cost of every entry not yet completed (queued or in flight)
 * and never exceeds max_buffered. A journal is freed only when idle
 * without an error, or by gaz_append_service_free.
 *
 * Lock order: svc->mu, then a handle's mu. Neither is held across an RPC
 * or a sleep.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/client_int.h"
#include "common/clock.h"
#include "common/log.h"
#include "gazette/append_service.h"
#include "protocol/validate.h"

#define BUCKETS 256
#define WORKER_STACK_BYTES (1u << 20)
/* A worker idle this long exits: a service that appends now and then (a
 * consumer shard's ACKs) holds no thread between its appends. */
#define WORKER_IDLE_EXIT_NS (5 * GAZ_NS_PER_S)

struct gaz_append_handle {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int refs;                /* the caller's and the service's */
	bool done;
	int rc;
	struct gaz_status st;
	struct gaz_append_result res;
	void (*notify)(void *arg); /* gaz_append_handle_notify's, until done */
	void *notify_arg;
};

/* Register options of an append: the packed AppendRequest fields that
 * must be equal for appends to share a batch, and an unpacked copy to
 * send. NULL in an entry means "none" (the common case). */
struct params {
	size_t len;
	uint8_t *packed;
	Protocol__AppendRequest *req;
};

struct entry {
	struct entry *next;
	struct gaz_append_handle *h;
	struct params *p;
	uint64_t seq;            /* queue order over the whole service */
	size_t len;
	uint8_t data[];
};

struct sjournal {
	struct sjournal *hnext;  /* hash chain */
	struct sjournal *rnext;  /* ready list */
	char *name;
	struct entry *head, *tail;
	uint64_t inflight_seq;   /* first seq of the batch in flight, or UINT64_MAX */
	bool busy, ready;
	int err;                 /* sticky terminal error, or 0 */
	struct gaz_status err_st;
};

struct gaz_append_service {
	struct gaz_client *c;
	size_t max_buffered, max_batch;
	int max_workers;
	pthread_mutex_t mu;
	pthread_cond_t work_cv;  /* workers: a journal became ready, or stop */
	pthread_cond_t space_cv; /* producers: buffer space freed */
	pthread_cond_t done_cv;  /* flush/free: a batch completed */
	size_t buffered;         /* bytes counted against max_buffered */
	size_t outstanding;      /* entries not yet completed */
	uint64_t next_seq;
	struct sjournal *buckets[BUCKETS];
	struct sjournal *ready_head, *ready_tail;
	int nworkers, idle;      /* live workers (detached), and idle ones */
	bool closing, stopping;
};

/* cond_init_mono makes a condvar whose timed waits take monotonic
 * deadlines (gaz_abstime_of). */
static void cond_init_mono(pthread_cond_t *cv)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &a);
	pthread_condattr_destroy(&a);
}

/* ---- handles ------------------------------------------------------------------- */

static struct gaz_append_handle *handle_new(void)
{
	struct gaz_append_handle *h = calloc(1, sizeof(*h));

	if (h) {
		pthread_mutex_init(&h->mu, NULL);
		cond_init_mono(&h->cv);
		h->refs = 2;
	}
	return h;
}

static void handle_unref(struct gaz_append_handle *h)
{
	bool last;

	pthread_mutex_lock(&h->mu);
	last = --h->refs == 0;
	pthread_mutex_unlock(&h->mu);
	if (last) {
		pthread_cond_destroy(&h->cv);
		pthread_mutex_destroy(&h->mu);
		free(h);
	}
}

/* handle_complete records the outcome and drops the service's reference. */
static void handle_complete(struct gaz_append_handle *h, int rc, const struct gaz_status *st,
			    const struct gaz_append_result *res)
{
	void (*notify)(void *arg);
	void *notify_arg;

	pthread_mutex_lock(&h->mu);
	h->done = true;
	h->rc = rc;
	if (rc && st)
		h->st = *st;
	if (!rc && res)
		h->res = *res;
	notify = h->notify;
	notify_arg = h->notify_arg;
	h->notify = NULL;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	if (notify) /* after the unlock: it may look at the handle */
		notify(notify_arg);
	handle_unref(h);
}

void gaz_append_handle_notify(struct gaz_append_handle *h, void (*fn)(void *arg), void *arg)
{
	bool now;

	pthread_mutex_lock(&h->mu);
	if (!(now = h->done)) {
		h->notify = fn;
		h->notify_arg = arg;
	}
	pthread_mutex_unlock(&h->mu);
	if (now)
		fn(arg);
}

int gaz_append_handle_wait(struct gaz_append_handle *h, int64_t timeout_ms,
			   struct gaz_append_result *res, struct gaz_status *st)
{
	int64_t deadline = timeout_ms < 0 ? GAZ_DEADLINE_NEVER : gaz_deadline_in(timeout_ms);
	struct timespec at = gaz_abstime_of(deadline);
	int rc = 0;

	pthread_mutex_lock(&h->mu);
	while (!h->done && rc == 0)
		rc = timeout_ms == 0 ? 1 : pthread_cond_timedwait(&h->cv, &h->mu, &at);
	if (!h->done) {
		rc = gaz_status_set(st, GAZ_ETIMEDOUT, "append still pending");
	} else if ((rc = h->rc)) {
		gaz_status_set(st, rc, "%s", h->st.msg);
		if (st && st->code == rc)
			st->grpc = h->st.grpc;
	} else if (res) {
		*res = h->res;
	}
	pthread_mutex_unlock(&h->mu);
	return rc;
}

struct gaz_append_handle *gaz_append_handle_ref(struct gaz_append_handle *h)
{
	pthread_mutex_lock(&h->mu);
	h->refs++;
	pthread_mutex_unlock(&h->mu);
	return h;
}

void gaz_append_handle_free(struct gaz_append_handle *h)
{
	if (h)
		handle_unref(h);
}

/* ---- register options ------------------------------------------------------------ */

static void params_free(struct params *p)
{
	if (!p)
		return;
	if (p->req)
		protobuf_c_message_free_unpacked(&p->req->base, NULL);
	free(p->packed);
	free(p);
}

/* params_new copies o's register options (NULL *out when there are none). */
static int params_new(const struct gaz_append_opts *o, struct params **out)
{
	Protocol__AppendRequest req = PROTOCOL__APPEND_REQUEST__INIT;
	struct params *p;

	*out = NULL;
	if (!o->check_registers && !o->union_registers && !o->subtract_registers)
		return 0;
	req.check_registers = (Protocol__LabelSelector *)o->check_registers;
	req.union_registers = (Protocol__LabelSet *)o->union_registers;
	req.subtract_registers = (Protocol__LabelSet *)o->subtract_registers;
	if (!(p = calloc(1, sizeof(*p))))
		return GAZ_ENOMEM;
	p->len = protobuf_c_message_get_packed_size(&req.base);
	if (!(p->packed = malloc(p->len ? p->len : 1))) {
		params_free(p);
		return GAZ_ENOMEM;
	}
	protobuf_c_message_pack(&req.base, p->packed);
	/* Unpacking what we packed is the deep copy we send from. */
	p->req = (Protocol__AppendRequest *)protobuf_c_message_unpack(
		&protocol__append_request__descriptor, NULL, p->len, p->packed);
	if (!p->req) {
		params_free(p);
		return GAZ_ENOMEM;
	}
	*out = p;
	return 0;
}

static bool params_equal(const struct params *a, const struct params *b)
{
	if (!a || !b)
		return a == b;
	return a->len == b->len && !memcmp(a->packed, b->packed, a->len);
}

/* ---- journals (svc->mu held) -------------------------------------------------------- */

static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h % BUCKETS;
}

static struct sjournal *journal_find(struct gaz_append_service *svc, const char *name)
{
	struct sjournal *j = svc->buckets[name_hash(name)];

	while (j && strcmp(j->name, name))
		j = j->hnext;
	return j;
}

static struct sjournal *journal_get(struct gaz_append_service *svc, const char *name)
{
	struct sjournal *j = journal_find(svc, name);
	uint32_t b = name_hash(name);

	if (j)
		return j;
	if (!(j = calloc(1, sizeof(*j))) || !(j->name = strdup(name))) {
		free(j);
		return NULL;
	}
	j->inflight_seq = UINT64_MAX;
	j->hnext = svc->buckets[b];
	svc->buckets[b] = j;
	return j;
}

static void journal_remove(struct gaz_append_service *svc, struct sjournal *j)
{
	struct sjournal **l = &svc->buckets[name_hash(j->name)];

	while (*l != j)
		l = &(*l)->hnext;
	*l = j->hnext;
	free(j->name);
	free(j);
}

static void ready_push(struct gaz_append_service *svc, struct sjournal *j)
{
	if (j->ready || j->busy || j->err || !j->head)
		return;
	j->ready = true;
	j->rnext = NULL;
	if (svc->ready_tail)
		svc->ready_tail->rnext = j;
	else
		svc->ready_head = j;
	svc->ready_tail = j;
	pthread_cond_signal(&svc->work_cv);
}

static struct sjournal *ready_pop(struct gaz_append_service *svc)
{
	struct sjournal *j = svc->ready_head;

	if (j) {
		if (!(svc->ready_head = j->rnext))
			svc->ready_tail = NULL;
		j->ready = false;
	}
	return j;
}

static size_t entry_cost(const struct entry *e)
{
	return e->len + GAZ_APPEND_SERVICE_ENTRY_COST;
}

/* entry_done completes one entry, frees it and its buffer space. */
static void entry_done(struct gaz_append_service *svc, struct entry *e, int rc,
		       const struct gaz_status *st, const struct gaz_append_result *res)
{
	handle_complete(e->h, rc, st, res);
	svc->buffered -= entry_cost(e);
	svc->outstanding--;
	params_free(e->p);
	free(e);
}

/* fail_queued fails every entry still queued on j with j's error. */
static void fail_queued(struct gaz_append_service *svc, struct sjournal *j)
{
	while (j->head) {
		struct entry *e = j->head;
		j->head = e->next;
		entry_done(svc, e, j->err, &j->err_st, NULL);
	}
	j->tail = NULL;
}

/* ---- workers ------------------------------------------------------------------------ */

/* take_batch detaches the longest run of head entries with equal register
 * options whose content fits max_batch (at least one entry). */
static struct entry *take_batch(struct gaz_append_service *svc, struct sjournal *j)
{
	struct entry *first = j->head, *last = first;
	size_t total = first->len;

	while (last->next && params_equal(last->next->p, first->p) &&
	       total + last->next->len <= svc->max_batch) {
		last = last->next;
		total += last->len;
	}
	j->head = last->next;
	if (!j->head)
		j->tail = NULL;
	last->next = NULL;
	j->busy = true;
	j->inflight_seq = first->seq;
	return first;
}

/* batch_content: the batch's bytes, contiguous (*owned when allocated). */
static const uint8_t *batch_content(const struct entry *b, size_t *len, uint8_t **owned)
{
	size_t n = 0;
	uint8_t *p;

	*owned = NULL;
	for (const struct entry *e = b; e; e = e->next)
		n += e->len;
	*len = n;
	if (!b->next)
		return b->data;
	if (!(p = *owned = malloc(n ? n : 1)))
		return NULL;
	for (const struct entry *e = b; e; e = e->next) {
		memcpy(p, e->data, e->len);
		p += e->len;
	}
	return *owned;
}

/* result_of fills the batch part of a result from a commit fragment. */
static void result_of(const Protocol__AppendResponse *r, int attempts, struct gaz_append_result *res)
{
	struct gaz_fragment f = {0};

	memset(res, 0, sizeof(*res));
	res->batches = attempts;
	if (!r->commit || gaz_fragment_from_proto(&f, r->commit, NULL))
		return;
	res->batch_begin = f.begin;
	res->batch_end = f.end;
	memcpy(res->batch_sum, f.sum, sizeof(res->batch_sum));
	gaz_fragment_release(&f);
}

/* run_batch appends the batch as one transaction, retrying all but
 * terminal failures with the backoff table (Gazette's serveAppends). */
static int run_batch(struct gaz_append_service *svc, const char *journal, const struct entry *b,
		     struct gaz_append_result *res, struct gaz_status *st)
{
	struct gaz_append_opts o = {.journal = journal};
	struct gaz_append_src src = {.fd = -1};
	uint8_t *owned;
	int rc = 0;

	if (b->p) {
		o.check_registers = b->p->req->check_registers;
		o.union_registers = b->p->req->union_registers;
		o.subtract_registers = b->p->req->subtract_registers;
	}
	for (int attempt = 0;; attempt++) {
		Protocol__AppendResponse *r = NULL;
		struct gaz__failure f = {.status = -1};

		gaz_status_clear(st);
		if (!(src.buf = batch_content(b, &src.len, &owned)))
			rc = gaz_status_set(st, GAZ_ENOMEM, "out of memory batching appends");
		else
			rc = gaz__append_attempt(svc->c, &o, &src, &r, st);
		free(owned);
		f.rc = rc;
		f.grpc = rc == GAZ_ERPC && st ? st->grpc : 0;
		f.status = r ? (int)r->status : -1;
		if (rc == 0)
			result_of(r, attempt + 1, res);
		if (r)
			protobuf_c_message_free_unpacked(&r->base, NULL);
		if (rc == 0 || !gaz__service_retryable(&f, o.check_registers != NULL))
			return rc;
		if (attempt > 0)
			gaz_warn("failed to append to journal (will retry)",
				 "journal=%s err=%s attempt=%d", journal, st->msg, attempt);
		if (gaz__client_sleep(svc->c, gaz_client_backoff_ms(attempt))) {
			gaz_status_clear(st);
			return gaz_status_set(st, GAZ_ECANCELLED, "cancelled");
		}
	}
}

/* finish_batch completes the batch's entries (svc->mu held). */
static void finish_batch(struct gaz_append_service *svc, struct sjournal *j, struct entry *b,
			 int rc, const struct gaz_status *st, struct gaz_append_result *res)
{
	int64_t at = res->batch_begin;

	while (b) {
		struct entry *next = b->next;
		res->begin = at;
		res->end = at += (int64_t)b->len;
		entry_done(svc, b, rc, st, res);
		b = next;
	}
	if (rc) {
		j->err = rc;
		j->err_st = *st;
		gaz_status_prefix(&j->err_st, "append to \"%s\" failed earlier: ", j->name);
		fail_queued(svc, j);
	}
	j->busy = false;
	j->inflight_seq = UINT64_MAX;
	if (j->head)
		ready_push(svc, j);
	else if (!j->err)
		journal_remove(svc, j);
	pthread_cond_broadcast(&svc->space_cv);
	pthread_cond_broadcast(&svc->done_cv);
}

static void *worker_main(void *arg)
{
	struct gaz_append_service *svc = arg;

	pthread_mutex_lock(&svc->mu);
	for (;;) {
		struct gaz_append_result res = {0};
		struct gaz_status st = {0};
		struct sjournal *j = ready_pop(svc);
		struct entry *b;
		int rc;

		if (!j && svc->stopping)
			break;
		if (!j) {
			struct timespec at = gaz_abstime_of(gaz_mono_ns() + WORKER_IDLE_EXIT_NS);
			int err;
			svc->idle++;
			err = pthread_cond_timedwait(&svc->work_cv, &svc->mu, &at);
			svc->idle--;
			if (err && !svc->ready_head)
				break; /* idle long enough; start_worker starts another */
			continue;
		}
		b = take_batch(svc, j);
		pthread_mutex_unlock(&svc->mu);
		rc = run_batch(svc, j->name, b, &res, &st);
		pthread_mutex_lock(&svc->mu);
		finish_batch(svc, j, b, rc, &st, &res);
	}
	svc->nworkers--;
	pthread_cond_broadcast(&svc->done_cv); /* gaz_append_service_free waits */
	pthread_mutex_unlock(&svc->mu);
	return NULL;
}

/* start_worker starts one more worker if none is idle and the pool has
 * room (svc->mu held). Fails only when there would be no worker at all. */
static int start_worker(struct gaz_append_service *svc, struct gaz_status *st)
{
	pthread_attr_t attr;
	pthread_t t;
	int err;

	if (svc->idle > 0 || svc->nworkers >= svc->max_workers)
		return 0;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, WORKER_STACK_BYTES);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	err = pthread_create(&t, &attr, worker_main, svc);
	pthread_attr_destroy(&attr);
	if (err == 0)
		svc->nworkers++;
	else if (svc->nworkers == 0)
		return gaz_status_set(st, GAZ_ENOMEM, "cannot start an append worker thread");
	return 0;
}

/* ---- the service --------------------------------------------------------------------- */

int gaz_append_service_new(struct gaz_client *c, const struct gaz_append_service_opts *opts,
			   struct gaz_append_service **out, struct gaz_status *st)
{
	struct gaz_append_service_opts o = opts ? *opts : (struct gaz_append_service_opts){0};
	struct gaz_append_service *svc;

	if (!o.max_buffered_bytes)
		o.max_buffered_bytes = GAZ_APPEND_SERVICE_BUFFER_BYTES;
	if (!o.max_batch_bytes)
		o.max_batch_bytes = GAZ_APPEND_SERVICE_BATCH_BYTES < o.max_buffered_bytes
					    ? GAZ_APPEND_SERVICE_BATCH_BYTES
					    : o.max_buffered_bytes;
	if (o.max_workers <= 0)
		o.max_workers = GAZ_APPEND_SERVICE_WORKERS;
	if (o.max_batch_bytes > o.max_buffered_bytes)
		return gaz_status_set(st, GAZ_EINVAL, "max_batch_bytes %zu exceeds max_buffered_bytes %zu",
				      o.max_batch_bytes, o.max_buffered_bytes);
	if (!(svc = calloc(1, sizeof(*svc))))
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory creating append service");
	svc->c = c;
	svc->max_buffered = o.max_buffered_bytes;
	svc->max_batch = o.max_batch_bytes;
	svc->max_workers = o.max_workers;
	pthread_mutex_init(&svc->mu, NULL);
	cond_init_mono(&svc->work_cv);
	cond_init_mono(&svc->space_cv);
	cond_init_mono(&svc->done_cv);
	*out = svc;
	return 0;
}

/* check_opts validates what an append may ask for. */
static int check_opts(const struct gaz_append_opts *o, struct gaz_status *st)
{
	Protocol__AppendRequest req = PROTOCOL__APPEND_REQUEST__INIT;
	struct gaz_status vst = {0};

	if (!o || !o->journal || !*o->journal)
		return gaz_status_set(st, GAZ_EINVAL, "invalid AppendRequest: expected Journal");
	if (o->offset || o->suspend || o->do_not_proxy || o->progress)
		return gaz_status_set(st, GAZ_EINVAL, "append service appends take no offset, "
						      "suspend, do_not_proxy or progress");
	req.journal = (char *)o->journal;
	req.check_registers = (Protocol__LabelSelector *)o->check_registers;
	req.union_registers = (Protocol__LabelSet *)o->union_registers;
	req.subtract_registers = (Protocol__LabelSet *)o->subtract_registers;
	if (gaz_validate_append_request(&req, &vst))
		return gaz_status_set(st, GAZ_EINVAL, "invalid AppendRequest: %s", vst.msg);
	return 0;
}

/* wait_room blocks until `cost` fits in the buffer (svc->mu held). */
static int wait_room(struct gaz_append_service *svc, size_t cost, struct gaz_status *st)
{
	while (svc->buffered + cost > svc->max_buffered) {
		struct timespec at = gaz_abstime_of(gaz_deadline_in(GAZ__CLIENT_POLL_MS));

		if (gaz_client_cancelled(svc->c))
			return gaz_status_set(st, GAZ_ECANCELLED, "cancelled");
		if (svc->closing)
			return gaz_status_set(st, GAZ_ESTOPPED, "append service is closing");
		pthread_cond_timedwait(&svc->space_cv, &svc->mu, &at);
	}
	return 0;
}

/* enqueue adds e to its journal (svc->mu held). */
static int enqueue(struct gaz_append_service *svc, const char *journal, struct entry *e,
		   struct gaz_status *st)
{
	struct sjournal *j;
	int rc;

	if ((rc = wait_room(svc, entry_cost(e), st)))
		return rc;
	if (svc->closing)
		return gaz_status_set(st, GAZ_ESTOPPED, "append service is closing");
	if (!(j = journal_get(svc, journal)))
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory queueing append");
	if (j->err) {
		rc = gaz_status_set(st, j->err, "%s", j->err_st.msg);
		if (st && st->code == rc)
			st->grpc = j->err_st.grpc;
		return rc;
	}
	if ((rc = start_worker(svc, st))) {
		if (!j->head && !j->busy)
			journal_remove(svc, j);
		return rc;
	}
	e->seq = svc->next_seq++;
	if (j->tail)
		j->tail->next = e;
	else
		j->head = e;
	j->tail = e;
	svc->buffered += entry_cost(e);
	svc->outstanding++;
	ready_push(svc, j);
	return 0;
}

int gaz_append_service_append(struct gaz_append_service *svc, const struct gaz_append_opts *o,
			      const void *buf, size_t len, struct gaz_append_handle **out,
			      struct gaz_status *st)
{
	struct gaz_append_handle *h;
	struct entry *e;
	int rc;

	if (out)
		*out = NULL;
	if ((rc = check_opts(o, st)))
		return rc;
	if (len > svc->max_buffered || svc->max_buffered - len < GAZ_APPEND_SERVICE_ENTRY_COST)
		return gaz_status_set(st, GAZ_ERANGE, "append of %zu bytes exceeds the append "
						      "service's buffer (%zu bytes)", len, svc->max_buffered);
	if (gaz_client_cancelled(svc->c))
		return gaz_status_set(st, GAZ_ECANCELLED, "cancelled");
	if (!(e = calloc(1, sizeof(*e) + len)) || !(e->h = handle_new()) ||
	    params_new(o, &e->p)) {
		if (e)
			free(e->h);
		free(e);
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory queueing append");
	}
	if (len)
		memcpy(e->data, buf, len);
	e->len = len;
	/* Once queued, e belongs to the worker, which may complete and free
	 * it before we are back from the unlock: keep only our handle. */
	h = e->h;
	pthread_mutex_lock(&svc->mu);
	rc = enqueue(svc, o->journal, e, st);
	pthread_mutex_unlock(&svc->mu);
	if (rc) {
		handle_unref(h);
		handle_unref(h);
		params_free(e->p);
		free(e);
		return rc;
	}
	if (out)
		*out = h;
	else
		handle_unref(h);
	return 0;
}

/* pending_before: whether an entry with seq < target is not completed. */
static bool pending_before(const struct gaz_append_service *svc, uint64_t target)
{
	for (size_t b = 0; b < BUCKETS; b++)
		for (const struct sjournal *j = svc->buckets[b]; j; j = j->hnext)
			if (j->inflight_seq < target || (j->head && j->head->seq < target))
				return true;
	return false;
}

int gaz_append_service_flush(struct gaz_append_service *svc, struct gaz_status *st)
{
	int rc = 0;

	pthread_mutex_lock(&svc->mu);
	for (uint64_t target = svc->next_seq; pending_before(svc, target);) {
		struct timespec at = gaz_abstime_of(gaz_deadline_in(GAZ__CLIENT_POLL_MS));

		if (gaz_client_cancelled(svc->c)) {
			rc = gaz_status_set(st, GAZ_ECANCELLED, "cancelled");
			break;
		}
		pthread_cond_timedwait(&svc->done_cv, &svc->mu, &at);
	}
	pthread_mutex_unlock(&svc->mu);
	return rc;
}

void gaz_append_service_free(struct gaz_append_service *svc)
{
	if (!svc)
		return;
	pthread_mutex_lock(&svc->mu);
	svc->closing = true;
	pthread_cond_broadcast(&svc->space_cv);
	while (svc->outstanding > 0)
		pthread_cond_wait(&svc->done_cv, &svc->mu);
	svc->stopping = true;
	pthread_cond_broadcast(&svc->work_cv);
	while (svc->nworkers > 0) /* each says so as it exits */
		pthread_cond_wait(&svc->done_cv, &svc->mu);
	pthread_mutex_unlock(&svc->mu);
	for (size_t b = 0; b < BUCKETS; b++)
		while (svc->buckets[b])
			journal_remove(svc, svc->buckets[b]);
	pthread_cond_destroy(&svc->work_cv);
	pthread_cond_destroy(&svc->space_cv);
	pthread_cond_destroy(&svc->done_cv);
	pthread_mutex_destroy(&svc->mu);
	free(svc);
}
