/*
 * replica.c - local journal replicas. See replica.h.
 */
#include "broker/replica.h"

#include <stdlib.h>
#include <string.h>

#include "broker/metrics.h"
#include "broker/persister.h"
#include "broker/pipeline.h"
#include "broker/stores.h"
#include "common/clock.h"
#include "common/log.h"
#include "protocol/labels.h"

static int find_index(struct gaz_broker *b, const char *journal, bool *found)
{
	size_t lo = 0, hi = b->n_replicas;

	*found = false;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(b->replicas[mid]->journal, journal);
		if (!c) {
			*found = true;
			return (int)mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (int)lo;
}

struct gaz_replica *gaz_replica_get(struct gaz_broker *b, const char *journal)
{
	struct gaz_replica *r = NULL;
	bool found;
	int i;

	pthread_mutex_lock(&b->mu);
	i = find_index(b, journal, &found);
	if (found) {
		r = b->replicas[i];
		atomic_fetch_add(&r->refs, 1);
	}
	pthread_mutex_unlock(&b->mu);
	return r;
}

struct gaz_replica *gaz_replica_ref(struct gaz_replica *r)
{
	atomic_fetch_add(&r->refs, 1);
	return r;
}

void gaz_replica_unref(struct gaz_replica *r)
{
	if (!r || atomic_fetch_sub(&r->refs, 1) != 1)
		return;
	gaz_spool_release(&r->spool);
	gaz_coverset_release(&r->index);
	gaz_coverset_release(&r->persisted_during);
	gaz_labelset_free(r->registers);
	gaz_head_group_release(&r->head);
	gaz_notifier_release(&r->notifier);
	pthread_mutex_destroy(&r->mu);
	free(r->route_primary);
	free(r->journal);
	free(r);
}

size_t gaz_replicas_snapshot(struct gaz_broker *b, struct gaz_replica ***out)
{
	size_t n;

	pthread_mutex_lock(&b->mu);
	n = b->n_replicas;
	*out = calloc(n + 1, sizeof(**out));
	for (size_t i = 0; *out && i < n; i++) {
		(*out)[i] = b->replicas[i];
		atomic_fetch_add(&b->replicas[i]->refs, 1);
	}
	pthread_mutex_unlock(&b->mu);
	return *out ? n : 0;
}

/* replica_alloc: a replica of `journal` outside any table (one
 * reference), or NULL. */
static struct gaz_replica *replica_alloc(struct gaz_broker *b, const char *journal,
					 int64_t create_revision)
{
	struct gaz_replica *r = calloc(1, sizeof(*r));
	struct gaz_status st = {0};

	if (!r || !(r->journal = strdup(journal)) ||
	    gaz_spool_init(&r->spool, journal, b->spool_dir, &st) ||
	    !(r->registers = gaz_labelset_new())) {
		gaz_error("creating replica failed", "journal=%s err=%s", journal, st.msg);
		if (r) {
			free(r->journal);
			free(r);
		}
		return NULL;
	}
	r->b = b;
	r->published_begin = -1;
	r->create_revision = create_revision;
	atomic_init(&r->refs, 1);
	pthread_mutex_init(&r->mu, NULL);
	gaz_notifier_init(&r->notifier);
	gaz_head_group_init(&r->head, r);
	gaz_coverset_init(&r->index);
	gaz_coverset_init(&r->persisted_during);
	return r;
}

/* table_insert puts `r` (its one reference becomes the table's) into the
 * broker's table; false, and `r` dropped, when the journal already has
 * one there or out of memory. */
static bool table_insert(struct gaz_broker *b, struct gaz_replica *r)
{
	bool found;
	int i;

	pthread_mutex_lock(&b->mu);
	i = find_index(b, r->journal, &found);
	if (!found && b->n_replicas == b->cap_replicas) {
		size_t ncap = b->cap_replicas ? b->cap_replicas * 2 : 64;
		void *n = realloc(b->replicas, ncap * sizeof(*b->replicas));
		if (n) {
			b->replicas = n;
			b->cap_replicas = ncap;
		}
	}
	if (found || b->n_replicas == b->cap_replicas) {
		pthread_mutex_unlock(&b->mu);
		gaz_replica_unref(r);
		return false;
	}
	memmove(&b->replicas[i + 1], &b->replicas[i], (b->n_replicas - (size_t)i) * sizeof(r));
	b->replicas[i] = r;
	b->n_replicas++;
	pthread_mutex_unlock(&b->mu);
	return true;
}

struct gaz_replica *gaz_replica_new(struct gaz_broker *b, const char *journal,
				    int64_t create_revision)
{
	struct gaz_replica *r = replica_alloc(b, journal, create_revision);

	if (!r || !table_insert(b, r))
		return NULL;
	gaz_info("serving journal replica", "journal=%s", journal);
	return r;
}

struct gaz_replica *gaz_replica_archive(struct gaz_replica *dead)
{
	struct gaz_replica *r = replica_alloc(dead->b, dead->journal, dead->create_revision);
	struct gaz_status st = {0};
	int rc = 0;

	if (!r)
		return NULL;
	pthread_mutex_lock(&dead->mu);
	for (size_t i = 0; !rc && i < dead->index.len; i++)
		rc = gaz_coverset_add(&r->index, &dead->index.v[i].frag, dead->index.v[i].file, NULL,
				      &st);
	pthread_mutex_unlock(&dead->mu);
	r->index_ready = true;
	r->sealed = true;
	if (rc) {
		gaz_warn("keeping reads of a released journal failed", "journal=%s err=%s",
			 dead->journal, st.msg);
		gaz_replica_unref(r);
		return NULL;
	}
	return table_insert(r->b, r) ? r : NULL;
}

static void wake_call(void *arg) { gaz_rpc_wake(arg); }

/* Waits (cancellable) until `ready(r)` holds, with mu held on return when
 * 0 is returned. */
static int wait_until(struct gaz_replica *r, struct gaz_rpc_call *call,
		      bool (*ready)(struct gaz_replica *))
{
	struct gaz_waiter w = {.wake = wake_call, .arg = call};
	int rc = 0;

	gaz_notifier_add(&r->notifier, &w);
	pthread_mutex_lock(&r->mu);
	while (!r->dead && !ready(r)) {
		pthread_mutex_unlock(&r->mu);
		rc = call ? gaz_rpc_wait(call, gaz_deadline_in(1000)) : (usleep(10000), 0);
		if (rc == GAZ_ETIMEDOUT)
			rc = 0;
		pthread_mutex_lock(&r->mu);
		if (rc)
			break;
	}
	if (!rc && r->dead)
		rc = GAZ_ESTOPPED;
	if (rc)
		pthread_mutex_unlock(&r->mu);
	gaz_notifier_remove(&r->notifier, &w);
	return rc;
}

static bool index_ready(struct gaz_replica *r) { return r->index_ready; }

static void queue_remove(struct gaz_replica *r, struct gaz_token_waiter *w)
{
	for (struct gaz_token_waiter **pp = &r->token_queue; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			return;
		}
}

static void batch_remove(struct gaz_replica *r, struct gaz_batch_link *l)
{
	for (struct gaz_batch_link **pp = &r->batch_queue; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			return;
		}
}

/* Both acquires: `l`, when not NULL, is queued for group commit along
 * with the token wait (gaz_replica_acquire_queued). */
static int acquire(struct gaz_replica *r, struct gaz_rpc_call *call, struct gaz_batch_link *l)
{
	struct gaz_token_waiter w = {.call = call}, **tail;
	struct gaz_batch_link **ltail;
	int rc = 0;

	pthread_mutex_lock(&r->mu);
	if (r->dead) {
		pthread_mutex_unlock(&r->mu);
		return GAZ_ESTOPPED;
	}
	if (!r->token_held && !r->token_queue) {
		r->token_held = true;
		pthread_mutex_unlock(&r->mu);
		return 0;
	}
	if (l) {
		*l = (struct gaz_batch_link){.waiter = &w, .call = call};
		for (ltail = &r->batch_queue; *ltail; ltail = &(*ltail)->next)
			;
		*ltail = l;
	}
	for (tail = &r->token_queue; *tail; tail = &(*tail)->next)
		;
	*tail = &w;
	while (!w.granted && !(l && l->taken) && !r->dead && !rc) {
		pthread_mutex_unlock(&r->mu);
		rc = call ? gaz_rpc_wait(call, gaz_deadline_in(1000)) : (usleep(10000), 0);
		if (rc == GAZ_ETIMEDOUT)
			rc = 0;
		pthread_mutex_lock(&r->mu);
	}
	if (l && l->taken) {
		/* The taker reads our content until it is done with it. */
		while (!l->done) {
			pthread_mutex_unlock(&r->mu);
			if (gaz_rpc_wait(call, gaz_deadline_in(1000)) == GAZ_ECANCELLED)
				usleep(1000);
			pthread_mutex_lock(&r->mu);
		}
		pthread_mutex_unlock(&r->mu);
		return 1;
	}
	if (l)
		batch_remove(r, l);
	if (!w.granted)
		queue_remove(r, &w);
	pthread_mutex_unlock(&r->mu);
	if (w.granted && (rc || r->dead)) {
		gaz_replica_release(r); /* pass it on */
		return rc ? rc : GAZ_ESTOPPED;
	}
	return w.granted ? 0 : (rc ? rc : GAZ_ESTOPPED);
}

int gaz_replica_acquire(struct gaz_replica *r, struct gaz_rpc_call *call)
{
	return acquire(r, call, NULL);
}

/* token_queue (gaz_replica_token_park): 0 with the token, 1 with `w`
 * queued, GAZ_ESTOPPED. */
static int token_queue(struct gaz_replica *r, struct gaz_token_waiter *w)
{
	struct gaz_token_waiter **tail;
	int rc = 1;

	pthread_mutex_lock(&r->mu);
	if (r->dead) {
		rc = GAZ_ESTOPPED;
	} else if (!r->token_held && !r->token_queue) {
		r->token_held = true;
		rc = 0;
	} else {
		w->granted = false;
		w->next = NULL;
		for (tail = &r->token_queue; *tail; tail = &(*tail)->next)
			;
		*tail = w;
	}
	pthread_mutex_unlock(&r->mu);
	return rc;
}

/* token_settle: a queued waiter's outcome (gaz_replica_token_resumed's
 * returns); with `give_up`, or torn down, `w` leaves the queue. */
static int token_settle(struct gaz_replica *r, struct gaz_token_waiter *w, bool give_up)
{
	int rc;

	pthread_mutex_lock(&r->mu);
	rc = give_up ? GAZ_ECANCELLED : r->dead ? GAZ_ESTOPPED : w->granted ? 0 : 1;
	if (rc < 0 && !w->granted)
		queue_remove(r, w);
	pthread_mutex_unlock(&r->mu);
	if (rc < 0 && w->granted)
		gaz_replica_release(r); /* pass it on */
	return rc;
}

int gaz_replica_token_park(struct gaz_replica *r, struct gaz_token_waiter *w,
			   struct gaz_rpc_call *call, gaz_rpc_handler_fn resume, void *arg)
{
	int rc;

	w->call = call;
	rc = token_queue(r, w);
	if (rc == 1 && gaz_rpc_park(call, resume, arg, GAZ_DEADLINE_NEVER, 0) != 0)
		rc = token_settle(r, w, true);
	return rc;
}

int gaz_replica_token_resumed(struct gaz_replica *r, struct gaz_token_waiter *w,
			      struct gaz_rpc_call *call, gaz_rpc_handler_fn resume, void *arg)
{
	int rc = token_settle(r, w, gaz_rpc_poll(call) == GAZ_ECANCELLED);

	if (rc == 1 && gaz_rpc_park(call, resume, arg, GAZ_DEADLINE_NEVER, 0) != 0)
		rc = token_settle(r, w, true);
	return rc;
}

int gaz_replica_acquire_queued(struct gaz_replica *r, struct gaz_rpc_call *call,
			       struct gaz_batch_link *l)
{
	return acquire(r, call, l);
}

bool gaz_replica_park(struct gaz_replica *r, struct gaz_batch_link *l)
{
	struct gaz_batch_link **tail;
	bool ok;

	pthread_mutex_lock(&r->mu);
	ok = r->token_held && !r->dead;
	if (ok) {
		l->next = NULL;
		l->waiter = NULL;
		l->taken = l->done = false;
		for (tail = &r->batch_queue; *tail; tail = &(*tail)->next)
			;
		*tail = l;
	}
	pthread_mutex_unlock(&r->mu);
	return ok;
}

bool gaz_replica_try_acquire(struct gaz_replica *r)
{
	bool held = false;

	pthread_mutex_lock(&r->mu);
	if (!r->dead && !r->token_held && !r->token_queue && !r->batch_queue)
		held = r->token_held = true;
	pthread_mutex_unlock(&r->mu);
	return held;
}

int gaz_replica_park_or_acquire(struct gaz_replica *r, struct gaz_batch_link *l)
{
	int rc = 0;

	pthread_mutex_lock(&r->mu);
	if (!r->dead && !r->token_held && !r->token_queue && !r->batch_queue) {
		r->token_held = true;
		rc = 2;
	}
	pthread_mutex_unlock(&r->mu);
	if (rc == 0 && gaz_replica_park(r, l))
		rc = 1;
	return rc;
}

/* unpark_all (r->mu held) detaches every parked link into a list. */
static struct gaz_batch_link *unpark_all(struct gaz_replica *r)
{
	struct gaz_batch_link *out = NULL, **pp = &r->batch_queue;

	while (*pp) {
		struct gaz_batch_link *l = *pp;
		if (l->parked) {
			*pp = l->next;
			l->next = out;
			out = l;
		} else {
			pp = &l->next;
		}
	}
	return out;
}

static void unpark_list(struct gaz_batch_link *l)
{
	while (l) {
		struct gaz_batch_link *next = l->next;
		l->unpark(l);
		l = next;
	}
}

size_t gaz_replica_take_queued(struct gaz_replica *r, struct gaz_batch_link **out, size_t max,
			       bool (*accept)(struct gaz_batch_link *l, void *arg), void *arg)
{
	size_t n = 0;

	pthread_mutex_lock(&r->mu);
	while (n < max && r->batch_queue && accept(r->batch_queue, arg)) {
		struct gaz_batch_link *l = r->batch_queue;
		r->batch_queue = l->next;
		l->next = NULL;
		if (l->waiter)
			queue_remove(r, l->waiter);
		l->waiter = NULL;
		l->taken = true;
		out[n++] = l;
	}
	pthread_mutex_unlock(&r->mu);
	return n;
}

bool gaz_replica_only_queued_waiters(const struct gaz_replica *r)
{
	size_t waiters = 0, queued = 0;

	for (const struct gaz_token_waiter *w = r->token_queue; w; w = w->next)
		waiters++;
	for (const struct gaz_batch_link *l = r->batch_queue; l; l = l->next)
		queued += l->waiter != NULL;
	return waiters == queued;
}

void gaz_replica_done_queued(struct gaz_replica *r, struct gaz_batch_link **links, size_t n)
{
	pthread_mutex_lock(&r->mu);
	for (size_t i = 0; i < n; i++) {
		links[i]->done = true;
		gaz_rpc_wake(links[i]->call);
	}
	pthread_mutex_unlock(&r->mu);
}

void gaz_replica_release(struct gaz_replica *r)
{
	struct gaz_token_waiter *w;
	struct gaz_batch_link *parked = NULL;

	pthread_mutex_lock(&r->mu);
	if ((w = r->token_queue)) {
		/* Hand the token straight to the next waiter: it stays held. */
		r->token_queue = w->next;
		w->granted = true;
		if (w->call)
			gaz_rpc_wake(w->call);
	} else {
		r->token_held = false;
		/* With no waiter left, every queued link is parked: the first
		 * gets a thread, to take the token and commit the rest. */
		if ((parked = r->batch_queue)) {
			r->batch_queue = parked->next;
			parked->next = NULL;
		}
	}
	pthread_mutex_unlock(&r->mu);
	if (parked)
		parked->unpark(parked);
}

int gaz_replica_wait_ready(struct gaz_replica *r, struct gaz_rpc_call *call)
{
	int rc = wait_until(r, call, index_ready);

	if (!rc)
		pthread_mutex_unlock(&r->mu);
	return rc;
}

int gaz_replica_publish_spool(struct gaz_replica *r, struct gaz_status *st)
{
	struct gaz_fragment_file *f = gaz_spool_file(&r->spool);

	if (r->spool.fragment.begin == r->spool.fragment.end)
		return 0;
	if (r->published_begin != r->spool.fragment.begin) {
		/* The spool's first content: a flush interval or the first-write
		 * roll may now fall due (pulse.c). */
		r->published_begin = r->spool.fragment.begin;
		gaz_pulse_kick_journal(r->b, r->journal);
	}
	return gaz_coverset_add(&r->index, &r->spool.fragment, f, NULL, st);
}

int gaz_replica_roll(struct gaz_replica *r, int64_t offset, int codec, bool at_once, bool sole,
		     struct gaz_status *st)
{
	struct gaz_spool_done done = {0};
	int rc;

	pthread_mutex_lock(&r->mu);
	rc = gaz_spool_roll(&r->spool, offset, codec, &done, st);
	pthread_mutex_unlock(&r->mu);
	if (rc)
		return rc;
	if (done.file) {
		gaz_metric_spool_completed();
		gaz_persister_enqueue(r->b->persister, r, &done, at_once, sole);
	}
	gaz_spool_done_release(&done);
	gaz_notifier_broadcast(&r->notifier);
	return 0;
}

void gaz_replica_close_pipeline(struct gaz_replica *r)
{
	gaz_pipeline_close(r->pipeline);
	r->pipeline = NULL;
	atomic_store(&r->pipelined, false);
}

void gaz_replica_spool_failed(struct gaz_replica *r, const char *why, bool sole)
{
	struct gaz_status st = {0};
	int64_t end;
	int codec;

	pthread_mutex_lock(&r->mu);
	gaz_metric_spool_rollback(r->spool.delta);
	gaz_spool_rollback(&r->spool);
	snprintf(r->spool_fault, sizeof(r->spool_fault), "%s", why);
	end = r->spool.fragment.end;
	codec = r->spool.fragment.codec;
	pthread_mutex_unlock(&r->mu);
	if (!atomic_exchange(&r->spool_failing, true))
		gaz_metric_spool_failing(r->journal, true);
	gaz_metric_spool_write_failed(r->journal);
	gaz_error("spool write failed; rolling the spool at its last commit to persist and free it",
		  "journal=%s offset=%lld err=%s", r->journal, (long long)end, why);
	if (gaz_replica_roll(r, end, codec, true, sole, &st))
		gaz_error("rolling a failed spool failed", "journal=%s err=%s", r->journal, st.msg);
}

void gaz_replica_spool_ok(struct gaz_replica *r)
{
	if (!atomic_load(&r->spool_failing))
		return;
	pthread_mutex_lock(&r->mu);
	r->spool_fault[0] = 0;
	pthread_mutex_unlock(&r->mu);
	atomic_store(&r->spool_failing, false);
	gaz_metric_spool_failing(r->journal, false);
	gaz_info("spool writes work again", "journal=%s", r->journal);
}

char *gaz_replica_spool_faults(struct gaz_broker *b)
{
	struct gaz_replica **rs = NULL;
	size_t n = gaz_replicas_snapshot(b, &rs);
	char *out = NULL;
	size_t len = 0;
	FILE *f = NULL;

	for (size_t i = 0; i < n; i++) {
		if (atomic_load(&rs[i]->spool_failing) && (f || (f = open_memstream(&out, &len)))) {
			pthread_mutex_lock(&rs[i]->mu);
			if (rs[i]->spool_fault[0])
				fprintf(f, "spool write failing: %s\n", rs[i]->spool_fault);
			pthread_mutex_unlock(&rs[i]->mu);
		}
		gaz_replica_unref(rs[i]);
	}
	free(rs);
	if (f)
		fclose(f);
	if (out && !out[0]) {
		free(out);
		out = NULL;
	}
	return out;
}

/* holder_pause sleeps while a token holder is waited for, in pauses
 * from 50 us doubling up to 5 ms (*pause starts at 0): a woken holder
 * (a parked Replicate stream) lets go within a poller's round trip, and
 * maintenance waits on one replica after another (10,000 deleted
 * journals), so a fixed 5 ms each held back new replicas for most of a
 * minute. */
static void holder_pause(useconds_t *pause)
{
	*pause = *pause == 0 ? 50 : *pause < 5000 ? *pause * 2 : 5000;
	usleep(*pause);
}

void gaz_replica_demote(struct gaz_replica *r)
{
	bool took, done;
	useconds_t pause = 0;

	r->primary = false;
	/* Not gaz_replica_acquire: the new primary's Replicate stream may
	 * hold the token for as long as it lives, and it closed the pipeline
	 * when it took the token (replicate.c). So wait only while a holder
	 * still leaves a pipeline open: an append of our time as primary,
	 * which ends on its own. */
	for (;;) {
		pthread_mutex_lock(&r->mu);
		took = !r->dead && !r->token_held;
		done = r->dead || !atomic_load(&r->pipelined);
		if (took)
			r->token_held = true;
		pthread_mutex_unlock(&r->mu);
		if (took || done)
			break;
		holder_pause(&pause);
	}
	if (!took)
		return;
	gaz_replica_close_pipeline(r);
	gaz_replica_release(r);
}

void gaz_replica_teardown(struct gaz_replica *r)
{
	struct gaz_broker *b = r->b;
	struct gaz_status st = {0};
	bool found, sole;
	int i;

	struct gaz_batch_link *parked;

	pthread_mutex_lock(&r->mu);
	r->dead = true;
	parked = unpark_all(r);
	if (r->token_stream) /* a Replicate stream parked between proposals */
		gaz_rpc_wake(r->token_stream);
	/* Waiters for the token, parked or on a thread, learn it at once. */
	for (struct gaz_token_waiter *w = r->token_queue; w; w = w->next)
		if (w->call)
			gaz_rpc_wake(w->call);
	pthread_mutex_unlock(&r->mu);
	unpark_list(parked);
	gaz_notifier_broadcast(&r->notifier);
	/* Wait for an append in progress to let go of the spool. */
	useconds_t pause = 0;
	pthread_mutex_lock(&r->mu);
	while (r->token_held) {
		pthread_mutex_unlock(&r->mu);
		holder_pause(&pause);
		pthread_mutex_lock(&r->mu);
	}
	r->token_held = true;
	pthread_mutex_unlock(&r->mu);
	/* teardown runs on maintenance, or at exit after it stopped: r->primary
	 * is maintenance's. A primary without a pipeline had a route of one. */
	sole = r->primary && !r->pipeline;
	gaz_replica_close_pipeline(r);
	/* Persisted at once: whoever leads the route now may not hold these
	 * bytes (with replication 1, nobody else does). */
	if (!r->sealed &&
	    gaz_replica_roll(r, r->spool.fragment.end, r->spool.fragment.codec, true, sole, &st))
		gaz_error("rolling spool at teardown failed", "journal=%s err=%s", r->journal,
			  st.msg);
	pthread_mutex_lock(&b->mu);
	i = find_index(b, r->journal, &found);
	if (found && b->replicas[i] == r) {
		memmove(&b->replicas[i], &b->replicas[i + 1],
			(b->n_replicas - (size_t)i - 1) * sizeof(r));
		b->n_replicas--;
	} else {
		found = false;
	}
	pthread_mutex_unlock(&b->mu);
	gaz_info("released journal replica", "journal=%s", r->journal);
	if (found)
		gaz_replica_unref(r);
}

/* index_signature (r->mu held): a hash of what readers see of the index
 * (each fragment's range and mod time), so that a listing that changed
 * nothing wakes no reader: a journal's parked readers would otherwise all
 * resume at every refresh interval. */
static uint64_t index_signature(const struct gaz_replica *r)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (size_t i = 0; i < r->index.len; i++) {
		const struct gaz_fragment *f = &r->index.v[i].frag;
		const int64_t v[3] = {f->begin, f->end, f->mod_time};
		const unsigned char *p = (const unsigned char *)v;
		for (size_t k = 0; k < sizeof(v); k++)
			h = (h ^ p[k]) * 1099511628211ull;
	}
	return h ^ r->index.len;
}

/* refresh_done_locked (r->mu held): a listing ended; the last one out
 * forgets what was persisted meanwhile. */
static void refresh_done_locked(struct gaz_replica *r)
{
	if (--r->refreshing == 0) {
		gaz_coverset_release(&r->persisted_during);
		gaz_coverset_init(&r->persisted_during);
	}
}

int gaz_replica_refresh(struct gaz_replica *r, const Protocol__JournalSpec *spec,
			struct gaz_status *st)
{
	struct gaz_coverset remote, local;
	uint64_t before;
	bool was_ready, changed;
	int rc = 0;

	gaz_coverset_init(&remote);
	gaz_coverset_init(&local);
	pthread_mutex_lock(&r->mu);
	r->refreshing++;
	pthread_mutex_unlock(&r->mu);
	for (size_t i = 0; spec->fragment && i < spec->fragment->n_stores; i++) {
		rc = gaz_stores_list_fragments(r->b, spec->fragment->stores[i], r->journal, &remote, st);
		if (rc)
			break;
	}
	if (rc) {
		gaz_coverset_release(&remote);
		pthread_mutex_lock(&r->mu);
		snprintf(r->store_error, sizeof(r->store_error), "%.255s", st->msg);
		/* A store that cannot even be opened (unsupported scheme, bad
		 * parameters), or that refuses us (credentials, missing bucket:
		 * the authorization class), will not get better by waiting: let
		 * requests proceed and answer FRAGMENT_STORE_UNHEALTHY instead of
		 * hanging, as Gazette's append does once its store health check
		 * fails. A later successful refresh installs the store's index and
		 * clears the error before any append is accepted. */
		if ((rc == GAZ_EINVAL || rc == GAZ_EPERM) && !r->index_ready) {
			r->index_ready = true;
			gaz_pulse_kick_journal(r->b, r->journal);
		}
		refresh_done_locked(r);
		pthread_mutex_unlock(&r->mu);
		gaz_notifier_broadcast(&r->notifier);
		return rc;
	}
	pthread_mutex_lock(&r->mu);
	was_ready = r->index_ready;
	before = index_signature(r);
	r->store_error[0] = 0;
	/* The local part of the index: every entry with a file. */
	for (size_t i = 0; i < r->index.len && !rc; i++)
		if (r->index.v[i].file)
			rc = gaz_coverset_add(&local, &r->index.v[i].frag, r->index.v[i].file, NULL, st);
	/* A fragment persisted while the listing ran has left the local
	 * part, and the listing may predate its upload: it is in the store,
	 * so it stays in the remote part (else readers would find a hole
	 * until the next listing). */
	for (size_t i = 0; i < r->persisted_during.len && !rc; i++)
		rc = gaz_coverset_add(&remote, &r->persisted_during.v[i].frag, NULL, NULL, st);
	if (!rc)
		rc = gaz_coverset_replace_remote(&r->index, &local, &remote, st);
	if (!rc && !r->index_ready) {
		r->index_ready = true;
		gaz_pulse_kick_journal(r->b, r->journal); /* the first-write roll may be due */
	}
	changed = !was_ready || index_signature(r) != before;
	refresh_done_locked(r);
	pthread_mutex_unlock(&r->mu);
	gaz_coverset_release(&local);
	gaz_coverset_release(&remote);
	if (changed)
		gaz_notifier_broadcast(&r->notifier);
	return rc;
}

void gaz_replica_persisted(struct gaz_replica *r, const struct gaz_fragment *frag)
{
	struct gaz_status st = {0};

	pthread_mutex_lock(&r->mu);
	/* A remote fragment of the same range replaces the local entry; its
	 * file reference is dropped once no reader holds it. */
	if (gaz_coverset_add(&r->index, frag, NULL, NULL, &st) ||
	    (r->refreshing && gaz_coverset_add(&r->persisted_during, frag, NULL, NULL, &st)))
		gaz_warn("index update after persist failed", "journal=%s err=%s", r->journal,
			 st.msg);
	pthread_mutex_unlock(&r->mu);
	gaz_notifier_broadcast(&r->notifier);
}
