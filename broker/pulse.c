/*
 * pulse.c - the pulse of each journal this broker is primary of (facts
 * §4.8): an EMPTY append, run through the very same Append handler as a
 * client's (a local call, lib/rpc), with do_not_proxy and SUSPEND_NO_RESUME
 * (SUSPEND_IF_FLUSHED once --broker.auto-suspend finds the journal idle).
 *
 * One pulse does what an append does before its content: resolve, take the
 * append token, open and synchronise the pipeline (so a peer that just
 * joined the route gets the spool's offset and registers), write the route
 * into inconsistent assignments (§4.6; only then may the allocator remove
 * an exiting member or move the primary), and roll the spool when the
 * flush interval or the first-fragment rule says so (§6.3), across every
 * replica. So pulses are what make a graceful hand-off synchronised, close
 * idle fragments on time, and heal routes after a member dies.
 *
 * A primary replica pulses: when it starts, whenever its route changes
 * (its assignments are then inconsistent), when its spool is due for a
 * flush-interval roll or holds the journal's first known write (BR-01),
 * and every PULSE_PERIOD otherwise. One thread decides the pulses,
 * looking at a replica only when one may be due: a keyspace change
 * touched its journal (the keyspace's change log), it was kicked, or its
 * time in a queue ordered by due time came (gaz_pulse_thread).
 *
 * Two paths: the periodic pulse of a journal with nothing else to do (its
 * route written, its pipeline built and idle, no roll due: most pulses of
 * an idle broker) is proposed by the pulse thread itself and gathered by
 * the grpc pollers (gaz_append_pulse_fast; no thread waits for it; one
 * unanswered for PULSE_TIMEOUT has its pipeline cut, fast_sweep). Every
 * other pulse runs the Append handler on a runner: up to PULSE_RUNNERS at
 * once, a thread each (such a pulse waits on its peers and on etcd, and
 * 10,000 new journals must not wait on each other's round trips, as
 * Gazette's goroutines do not). A replica has at most one pulse in
 * flight, and its outcome comes back to the pulse thread. Each pulse is
 * bounded by PULSE_TIMEOUT; a failed one is retried no sooner than
 * PULSE_RETRY, and its retry takes a runner.
 *
 * Locks: the replica's pulse_* fields belong to the pulse thread alone
 * (a runner reads only the job it was handed; fast_done only its job's
 * list links and outcome, under pulse_runners.mu). pulse_runners.mu
 * guards the runners' queues and counts and the fast pulses in flight;
 * it is taken before a pipeline's mu (fast_sweep cancels under it) and
 * released before a runner or fast_done kicks the pulse thread
 * (pulse_mu).
 *
 * Must not: hold the keyspace lock or a replica's mu across a pulse.
 */
#include "broker/broker.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "broker/metrics.h"
#include "broker/pipeline.h"
#include "broker/replica.h"
#include "common/clock.h"
#include "common/dueq.h"
#include "common/log.h"
#include "common/strset.h"

#define PULSE_TICK_MS 20 /* scans at least this far apart */
#define PULSE_PERIOD (60 * GAZ_NS_PER_S) /* Gazette's healthCheckInterval */
#define PULSE_TIMEOUT (30 * GAZ_NS_PER_S)

/* The period and the timeout in use: PULSE_PERIOD and PULSE_TIMEOUT, or
 * for tests GAZ_PULSE_PERIOD_MS with half of it as the timeout (read once
 * by gaz_pulse_thread, before any other reader). */
static int64_t period_ns = PULSE_PERIOD, timeout_ns = PULSE_TIMEOUT;
#define PULSE_RETRY (GAZ_NS_PER_S / 2)
#define AUTO_SUSPEND_TICKS 15 /* periodic pulses with an unchanged route */
#define PULSE_RUNNERS 32      /* pulses in flight at once, a thread each */
#define RUNNER_IDLE (30 * GAZ_NS_PER_S) /* a runner with no pulse this long exits */

/* What the keyspace says of `journal` for the pulse: whether its
 * assignments disagree with the route derived from them (a route change no
 * pulse has written yet), and its flush interval in seconds (0 = none).
 * Reads the mirror in place: this runs every tick for every primary. */
static bool route_inconsistent(struct gaz_broker *b, const char *journal, int64_t *flush_s)
{
	struct gaz_route route = {.primary = -1};
	const struct gaz_ks_entry *item;
	bool bad = false;

	*flush_s = 0;
	gaz_keyspace_rlock(b->ks);
	item = gaz_ks_item(b->ks, b->root, journal);
	if (item) {
		const Protocol__JournalSpec *spec = ((const struct gaz_ks_value *)item->decoded)->spec;
		if (spec && spec->fragment && spec->fragment->flush_interval)
			*flush_s = spec->fragment->flush_interval->seconds;
	}
	if (!gaz_route_build(b->ks, b->root, journal, &route))
		for (size_t i = 0; i < route.n; i++)
			bad |= !route.consistent[i];
	gaz_keyspace_runlock(b->ks);
	gaz_route_release(&route);
	return bad;
}

/* Whether the spool holds content from an earlier flush interval. If it
 * holds content of the current one, *due_ns (monotonic) is lowered to
 * when that interval ends. */
static bool flush_due(struct gaz_replica *r, int64_t interval_s, int64_t now, int64_t *due_ns)
{
	bool due = false;

	if (interval_s > 0) {
		int64_t wall = gaz_wall_ns(), iv = interval_s * GAZ_NS_PER_S;
		pthread_mutex_lock(&r->mu);
		if (r->spool.first_append_ns && r->spool.fragment.end > r->spool.fragment.begin) {
			due = r->spool.first_append_ns / iv != wall / iv;
			int64_t at = now + ((r->spool.first_append_ns / iv + 1) * iv - wall);
			if (!due && at < *due_ns)
				*due_ns = at;
		}
		pthread_mutex_unlock(&r->mu);
	}
	return due;
}

/* Whether the spool holds the journal's first known write (its begin is
 * the index's first offset) and has content: rolled and persisted at once
 * so the bucket shows the journal was written to (case BR-01, Gazette
 * PR #367), rather than at the next append or periodic pulse. Requires a
 * listed index: before its first listing the store may hold more. */
static bool first_write_due(struct gaz_replica *r)
{
	int64_t imin, imax, mod;
	bool due;

	pthread_mutex_lock(&r->mu);
	gaz_coverset_summary(&r->index, &imin, &imax, &mod);
	due = r->index_ready && r->spool.fragment.end > r->spool.fragment.begin &&
	      r->spool.fragment.begin == imin;
	pthread_mutex_unlock(&r->mu);
	return due;
}

/* Runs one pulse of `r`. Returns true when it committed (OK). */
static bool pulse(struct gaz_broker *b, struct gaz_replica *r, bool auto_suspend)
{
	Protocol__AppendRequest first = PROTOCOL__APPEND_REQUEST__INIT;
	Protocol__AppendRequest intent = PROTOCOL__APPEND_REQUEST__INIT;
	const ProtobufCMessage *reqs[] = {&first.base, &intent.base};
	Protocol__AppendResponse *resp = NULL;
	struct gaz_rpc_call *call;
	const char *msg = NULL;
	int code, status = -1;

	first.journal = r->journal;
	first.do_not_proxy = true;
	first.suspend = auto_suspend ? PROTOCOL__APPEND_REQUEST__SUSPEND__SUSPEND_IF_FLUSHED
				     : PROTOCOL__APPEND_REQUEST__SUSPEND__SUSPEND_NO_RESUME;
	if (!(call = gaz_rpc_local_new(reqs, 2, gaz_mono_ns() + timeout_ns)))
		return false;
	gaz_handle_append(call, b);
	code = gaz_rpc_local_result(call, &protocol__append_response__descriptor,
				    (ProtobufCMessage **)&resp, &msg);
	if (resp)
		status = resp->status;
	if (code != GAZ_GRPC_OK)
		gaz_warn("journal pulse failed", "journal=%s code=%d err=%s", r->journal, code,
			 msg ? msg : "");
	else if (status != PROTOCOL__STATUS__OK && status != PROTOCOL__STATUS__SUSPENDED)
		gaz_info("journal pulse not committed", "journal=%s status=%s", r->journal,
			 gaz_status_label(status));
	else
		gaz_debug("journal pulse", "journal=%s status=%s", r->journal, gaz_status_label(status));
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	gaz_rpc_local_free(call);
	return code == GAZ_GRPC_OK && status == PROTOCOL__STATUS__OK;
}

/* What one scan knows of the keyspace: its revision, and the journals
 * whose keys changed since the previous scan's (`all`: the change log did
 * not reach back, so any may have). */
struct pulse_scan {
	int64_t rev;
	bool all;
	struct gaz_strset changed;
	const char *root;
	size_t root_len;
};

/* Collects the journals of changed items and assignments (gaz_ks_change_fn). */
static void scan_on_change(void *arg, const char *key, enum gaz_ks_change kind)
{
	struct pulse_scan *sc = arg;
	(void)kind;

	if (gaz_ks_note_journal(&sc->changed, sc->root, sc->root_len, key) < 0)
		sc->all = true;
}

/* scan_begin reads the revision and the journals changed since
 * `prev_rev` (a revision an earlier scan read). */
static void scan_begin(struct gaz_broker *b, struct pulse_scan *sc, int64_t prev_rev)
{
	sc->root = b->root;
	sc->root_len = strlen(b->root);
	sc->all = false;
	gaz_strset_clear(&sc->changed);
	gaz_keyspace_rlock(b->ks);
	sc->rev = gaz_keyspace_revision(b->ks);
	if (sc->rev != prev_rev && (prev_rev < 0 || !gaz_keyspace_changes(b->ks, prev_rev, scan_on_change, sc)))
		sc->all = true;
	gaz_keyspace_runlock(b->ks);
}

/* One pulse handed to a runner, or proposed by the pulse thread and
 * gathered by the pollers (a fast one): what the pulse thread decided,
 * and the outcome set before it is handed back. */
struct pulse_job {
	struct pulse_job *next;
	struct gaz_replica *r;  /* a reference, dropped with the job */
	bool auto_suspend;      /* SUSPEND_IF_FLUSHED rather than NO_RESUME */
	bool changed, periodic; /* why it runs */
	bool ok;                /* the outcome: committed (OK) */
	bool fast;              /* proposed by the pulse thread (fast_start) */
	int64_t done_ns;        /* when the outcome came (monotonic), set with ok */
	/* A fast pulse in flight: linked in pr->fast (pr->mu) until its
	 * outcome comes; pln is the pipeline it is gathered on (alive while
	 * linked), cut once it went unanswered past PULSE_TIMEOUT. */
	struct pulse_runners *pr;
	struct pulse_job *fprev, *fnext;
	struct gaz_pipeline *pln;
	int64_t started_ns;
	bool cut;
};

/* The runners: detached threads, started as jobs find none idle, up to
 * PULSE_RUNNERS; one that finds no job for RUNNER_IDLE exits, so that a
 * burst of new journals leaves no threads behind; all stop with the
 * pulse thread, which waits until n_threads is 0. */
struct pulse_runners {
	struct gaz_broker *b;
	pthread_mutex_t mu;
	pthread_cond_t cond;                 /* a job or stop (runners wait) */
	pthread_cond_t gone;                 /* a runner exited (runners_stop waits) */
	struct pulse_job *todo, **todo_tail; /* FIFO (mu) */
	struct pulse_job *done;              /* outcomes, LIFO (mu) */
	size_t n_threads, n_idle;            /* (mu) */
	bool stop;                           /* (mu) */
	/* Fast pulses in flight, oldest first (mu); runners_stop waits
	 * until there are none, as for the threads. */
	struct pulse_job *fast, *fast_tail;
	size_t n_fast;
};

static void *runner_main(void *arg)
{
	struct pulse_runners *pr = arg;

	pthread_setname_np(pthread_self(), "gaz-pulse-run");
	pthread_mutex_lock(&pr->mu);
	for (;;) {
		int64_t idle_until = gaz_mono_ns() + RUNNER_IDLE;
		bool idled_out = false;
		while (!pr->todo && !pr->stop && !idled_out) {
			struct timespec ts = gaz_abstime_of(idle_until);
			pr->n_idle++;
			idled_out = pthread_cond_timedwait(&pr->cond, &pr->mu, &ts) == ETIMEDOUT &&
				    !pr->todo;
			pr->n_idle--;
		}
		if (pr->stop || idled_out)
			break;
		struct pulse_job *j = pr->todo;
		if (!(pr->todo = j->next))
			pr->todo_tail = &pr->todo;
		pthread_mutex_unlock(&pr->mu);
		j->ok = pulse(pr->b, j->r, j->auto_suspend);
		j->done_ns = gaz_mono_ns();
		pthread_mutex_lock(&pr->mu);
		j->next = pr->done;
		pr->done = j;
		pthread_mutex_unlock(&pr->mu);
		gaz_pulse_kick(pr->b);
		pthread_mutex_lock(&pr->mu);
	}
	/* The last touch of pr: runners_stop frees it once n_threads is 0,
	 * which it reads under mu, so after this unlock. */
	pr->n_threads--;
	pthread_cond_broadcast(&pr->gone);
	pthread_mutex_unlock(&pr->mu);
	return NULL;
}

/* runner_start starts a detached runner (pr->mu held); false if it could
 * not. */
static bool runner_start(struct pulse_runners *pr)
{
	pthread_attr_t attr;
	pthread_t t;
	bool ok;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	ok = pthread_create(&t, &attr, runner_main, pr) == 0;
	pthread_attr_destroy(&attr);
	if (ok)
		pr->n_threads++;
	return ok;
}

/* Hands `j` to a runner, starting one if none is idle and the bound
 * allows. Returns 0, or -1 when no runner exists and none could start
 * (the job is not queued). */
static int runners_push(struct pulse_runners *pr, struct pulse_job *j)
{
	int rc = 0;

	j->next = NULL;
	pthread_mutex_lock(&pr->mu);
	if (pr->n_idle == 0 && pr->n_threads < PULSE_RUNNERS)
		runner_start(pr);
	if (pr->n_threads == 0) {
		rc = -1;
	} else {
		*pr->todo_tail = j;
		pr->todo_tail = &j->next;
		pthread_cond_signal(&pr->cond);
	}
	pthread_mutex_unlock(&pr->mu);
	return rc;
}

/* Takes the outcomes the runners handed back (a list the caller frees). */
static struct pulse_job *runners_take_done(struct pulse_runners *pr)
{
	pthread_mutex_lock(&pr->mu);
	struct pulse_job *d = pr->done;
	pr->done = NULL;
	pthread_mutex_unlock(&pr->mu);
	return d;
}

static void job_free(struct pulse_job *j)
{
	gaz_replica_unref(j->r);
	free(j);
}

/* Stops the runners once their pulses end, and drops the jobs left. */
static void runners_stop(struct pulse_runners *pr)
{
	pthread_mutex_lock(&pr->mu);
	pr->stop = true;
	pthread_cond_broadcast(&pr->cond);
	for (struct pulse_job *j = pr->fast; j; j = j->fnext)
		if (j->pln && !j->cut) {
			gaz_pipeline_cancel(j->pln); /* the gathers end now */
			j->cut = true;
		}
	while (pr->n_threads || pr->n_fast)
		pthread_cond_wait(&pr->gone, &pr->mu);
	pthread_mutex_unlock(&pr->mu);
	for (struct pulse_job *j = pr->todo, *next; j; j = next) {
		next = j->next;
		job_free(j);
	}
	for (struct pulse_job *j = pr->done, *next; j; j = next) {
		next = j->next;
		job_free(j);
	}
	pthread_cond_destroy(&pr->cond);
	pthread_cond_destroy(&pr->gone);
	pthread_mutex_destroy(&pr->mu);
}

/* fast_unlink (pr->mu held) takes `j` out of the in-flight list. */
static void fast_unlink(struct pulse_runners *pr, struct pulse_job *j)
{
	*(j->fprev ? &j->fprev->fnext : &pr->fast) = j->fnext;
	*(j->fnext ? &j->fnext->fprev : &pr->fast_tail) = j->fprev;
	j->fprev = j->fnext = NULL;
	pr->n_fast--;
}

/* A fast pulse's outcome (gaz_pulse_done_fn; on a poller, or in
 * fast_start): handed back like a runner's. A committed periodic pulse
 * needs no kick: the pulse thread takes it in at its next pass (at most a
 * second away), and it is due again a period after done_ns. */
static void fast_done(void *arg, bool ok)
{
	struct pulse_job *j = arg;
	struct pulse_runners *pr = j->pr;
	struct gaz_broker *b = pr->b;

	pthread_mutex_lock(&pr->mu);
	fast_unlink(pr, j);
	j->ok = ok;
	j->done_ns = gaz_mono_ns();
	j->next = pr->done;
	pr->done = j;
	if (pr->stop)
		pthread_cond_broadcast(&pr->gone);
	pthread_mutex_unlock(&pr->mu);
	/* pr may be gone once the unlock let runners_stop see n_fast 0, but
	 * the broker outlives the pulse thread. */
	if (!ok)
		gaz_pulse_kick(b);
}

/* fast_start proposes `j`'s periodic pulse from this thread, gathered by
 * the pollers (gaz_append_pulse_fast); false when it needs a runner. */
static bool fast_start(struct pulse_runners *pr, struct pulse_job *j, int64_t now)
{
	j->pr = pr;
	j->started_ns = now;
	pthread_mutex_lock(&pr->mu);
	j->fprev = pr->fast_tail;
	*(pr->fast_tail ? &pr->fast_tail->fnext : &pr->fast) = j;
	pr->fast_tail = j;
	pr->n_fast++;
	pthread_mutex_unlock(&pr->mu);
	/* j may be in pr->done once this returns true, but only this thread
	 * reads j->fast, later (pulse_outcome). */
	if ((j->fast = gaz_append_pulse_fast(pr->b, j->r, fast_done, j, &j->pln)))
		return true;
	pthread_mutex_lock(&pr->mu);
	fast_unlink(pr, j);
	pthread_mutex_unlock(&pr->mu);
	return false;
}

/* fast_sweep cuts the gathers of fast pulses unanswered for PULSE_TIMEOUT
 * (a peer that stopped answering but holds its stream open): each then
 * fails, and its retry takes a runner, which rebuilds the pipeline. */
static void fast_sweep(struct pulse_runners *pr, int64_t now)
{
	pthread_mutex_lock(&pr->mu);
	for (struct pulse_job *j = pr->fast; j && now - j->started_ns >= timeout_ns; j = j->fnext)
		if (j->pln && !j->cut) {
			gaz_warn("journal pulse unanswered; cutting its pipeline", "journal=%s",
				 j->r->journal);
			gaz_pipeline_cancel(j->pln);
			j->cut = true;
		}
	pthread_mutex_unlock(&pr->mu);
}

/* Decides whether `r` pulses now (`sc`: the scan's view of the keyspace),
 * and hands the pulse to a runner; lowers *due_ns (monotonic) to when it
 * is due next as far as timers tell. A replica whose pulse is in flight
 * waits for its outcome (pulse_outcome queues it anew). */
static void maybe_pulse(struct gaz_broker *b, struct pulse_runners *pr, struct gaz_replica *r,
			const struct pulse_scan *sc, int64_t now, int64_t *due_ns)
{
	int64_t rev = sc->rev;
	bool periodic, changed;
	int64_t flush_s;

	/* The route is rebuilt only when the journal's keys changed since it
	 * was last found consistent: an idle journal, or one no change
	 * touched, costs no route build. Every scan visits each journal its
	 * change log names (or all of them, when the log does not reach
	 * back), so a replica whose check is older than a change sees it
	 * here, whether or not it pulses now. A check made in this scan
	 * (pulse_checked_rev == rev) read the keyspace after the change. */
	if (r->pulse_checked_rev && r->pulse_checked_rev != rev &&
	    (sc->all || gaz_strset_has(&sc->changed, r->journal)))
		r->pulse_checked_rev = 0;
	if (!r->primary || r->dead || r->pulse_in_flight)
		return;
	if (now < r->pulse_retry_ns) {
		*due_ns = r->pulse_retry_ns < *due_ns ? r->pulse_retry_ns : *due_ns;
		return;
	}
	periodic = now >= r->pulse_next_ns;
	if (!r->pulse_checked_rev) {
		changed = route_inconsistent(b, r->journal, &flush_s);
		r->pulse_checked_rev = changed ? 0 : rev;
		r->pulse_flush_s = flush_s;
	} else {
		changed = false;
		flush_s = r->pulse_flush_s;
	}
	bool flush = flush_due(r, flush_s, now, due_ns), first = !flush && first_write_due(r);
	if (!periodic && !changed && !flush && !first) {
		*due_ns = r->pulse_next_ns < *due_ns ? r->pulse_next_ns : *due_ns;
		return;
	}
	if (changed)
		r->pulse_stable_ticks = 0;
	else if (periodic && r->pulse_next_ns)
		r->pulse_stable_ticks++;

	struct pulse_job *j = calloc(1, sizeof(*j));
	if (j) {
		j->r = gaz_replica_ref(r);
		j->auto_suspend = b->cfg.auto_suspend && r->pulse_stable_ticks >= AUTO_SUSPEND_TICKS;
		j->changed = changed;
		j->periodic = periodic;
	}
	/* A periodic pulse that does nothing else (no route to write, no
	 * roll, no suspension) is proposed right here and gathered by the
	 * pollers, when the journal is fit for it (gaz_append_pulse_fast);
	 * every other pulse runs the Append handler on a runner. */
	if (j && periodic && !changed && !flush && !first && !j->auto_suspend &&
	    fast_start(pr, j, now)) {
		r->pulse_in_flight = true;
		return;
	}
	if (!j || runners_push(pr, j) < 0) {
		if (j)
			job_free(j);
		r->pulse_retry_ns = now + PULSE_RETRY; /* out of memory or threads */
		*due_ns = r->pulse_retry_ns < *due_ns ? r->pulse_retry_ns : *due_ns;
		return;
	}
	r->pulse_in_flight = true;
}

/* Takes in the outcome of the pulse of j->r: when it is due again. A
 * replica whose route was still to be written is due again one tick on
 * (its write reaches the keyspace mirror first), a failed pulse after
 * PULSE_RETRY, and otherwise at the period. */
static void pulse_outcome(struct pulse_job *j, struct gaz_dueq *q)
{
	struct gaz_replica *r = j->r;
	int64_t now = j->done_ns, next;

	gaz_metric_pulse(j->fast, j->ok);
	r->pulse_in_flight = false;
	r->pulse_retry_ns = j->ok ? 0 : now + PULSE_RETRY;
	if (j->ok || j->periodic)
		r->pulse_next_ns = now + period_ns;
	next = j->ok ? (j->changed ? now + PULSE_TICK_MS * GAZ_NS_PER_MS : r->pulse_next_ns)
		     : r->pulse_retry_ns;
	if (next != r->pulse_heap_due && gaz_dueq_push(q, next, r->journal) == 0)
		r->pulse_heap_due = next;
}

void gaz_pulse_kick(struct gaz_broker *b)
{
	pthread_mutex_lock(&b->pulse_mu);
	b->pulse_kicked = true;
	pthread_cond_signal(&b->pulse_cond);
	pthread_mutex_unlock(&b->pulse_mu);
}

void gaz_pulse_kick_journal(struct gaz_broker *b, const char *journal)
{
	pthread_mutex_lock(&b->pulse_mu);
	b->pulse_kicked = true;
	if (gaz_strset_add(&b->pulse_journals, journal) < 0)
		b->pulse_kick_all = true; /* out of memory: look at every journal */
	pthread_cond_signal(&b->pulse_cond);
	pthread_mutex_unlock(&b->pulse_mu);
}

/* visit decides on `r`'s pulse (maybe_pulse) and queues it by the time
 * it is due next, if that moved. The queue keeps stale entries: each
 * replica remembers the due time of its latest (pulse_heap_due), and a
 * popped entry that is not it is dropped. */
static void visit(struct gaz_broker *b, struct pulse_runners *pr, struct gaz_replica *r,
		  const struct pulse_scan *sc, struct gaz_dueq *q)
{
	int64_t due = INT64_MAX;

	if (atomic_load(&b->stopping))
		return;
	maybe_pulse(b, pr, r, sc, gaz_mono_ns(), &due);
	if (due != INT64_MAX && due != r->pulse_heap_due && gaz_dueq_push(q, due, r->journal) == 0)
		r->pulse_heap_due = due;
}

static void visit_journal(struct gaz_broker *b, struct pulse_runners *pr, const char *journal,
			  const struct pulse_scan *sc, struct gaz_dueq *q)
{
	struct gaz_replica *r = gaz_replica_get(b, journal);

	if (r) {
		visit(b, pr, r, sc, q);
		gaz_replica_unref(r);
	}
}

/* The pulse thread looks at a replica only when a pulse may be due: the
 * keyspace changed its journal's keys (a route change: the change log
 * says which), it was kicked (its spool got its first content, its index
 * its first listing, it became primary), or its time in the queue came
 * (periodic pulse, retry, flush interval). Every PULSE_PERIOD, and when
 * the change log does not reach back, it looks at all of them. Between
 * passes it sleeps until kicked, the queue's earliest time, or a second;
 * passes are at least PULSE_TICK_MS apart, so a burst of kicks costs one. */
void *gaz_pulse_thread(void *arg)
{
	struct gaz_broker *b = arg;
	struct pulse_scan sc = {0};
	struct gaz_dueq q = {0};
	struct pulse_runners pr = {.b = b};
	int64_t scanned_rev = -1, next_full_ns = 0;

	pthread_setname_np(pthread_self(), "gaz-pulse");
	const char *e = getenv("GAZ_PULSE_PERIOD_MS");
	if (e && atoll(e) > 0) {
		period_ns = atoll(e) * GAZ_NS_PER_MS;
		timeout_ns = period_ns / 2 < PULSE_TIMEOUT ? period_ns / 2 : PULSE_TIMEOUT;
	}
	pthread_mutex_init(&pr.mu, NULL);
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* gaz_abstime_of's deadlines */
	pthread_cond_init(&pr.cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&pr.gone, NULL); /* untimed waits only */
	pr.todo_tail = &pr.todo;
	while (!atomic_load(&b->stopping)) {
		size_t n_kicked = 0;
		bool all;
		char **kicked;

		for (struct pulse_job *j = runners_take_done(&pr), *next; j; j = next) {
			next = j->next;
			pulse_outcome(j, &q);
			job_free(j);
		}
		int64_t now = gaz_mono_ns();

		fast_sweep(&pr, now);

		pthread_mutex_lock(&b->pulse_mu);
		kicked = b->pulse_journals.n ? gaz_strset_drain(&b->pulse_journals, &n_kicked) : NULL;
		all = b->pulse_kick_all || (b->pulse_journals.n && !kicked);
		b->pulse_kick_all = false;
		pthread_mutex_unlock(&b->pulse_mu);
		scan_begin(b, &sc, scanned_rev);
		scanned_rev = sc.rev;
		if (all || sc.all || now >= next_full_ns) {
			struct gaz_replica **rs = NULL;
			size_t n = gaz_replicas_snapshot(b, &rs);
			next_full_ns = now + period_ns;
			for (size_t i = 0; i < n; i++) {
				visit(b, &pr, rs[i], &sc, &q);
				gaz_replica_unref(rs[i]);
			}
			free(rs);
		} else {
			/* maybe_pulse reads sc.changed too: iterated, not drained. */
			size_t pos = 0;
			for (const char *j; (j = gaz_strset_next(&sc.changed, &pos));)
				visit_journal(b, &pr, j, &sc, &q);
			for (size_t i = 0; i < n_kicked; i++)
				visit_journal(b, &pr, kicked[i], &sc, &q);
			/* Due by the pass's start only: a replica due again at once
			 * (its route write not yet in the keyspace) waits for the
			 * next pass, PULSE_TICK_MS on, rather than pulsing in a loop. */
			struct gaz_due e;
			while (gaz_dueq_due_by(&q, now) && !atomic_load(&b->stopping) &&
			       gaz_dueq_pop(&q, &e)) {
				struct gaz_replica *r = gaz_replica_get(b, e.name);
				if (r && r->pulse_heap_due == e.due_ns) {
					r->pulse_heap_due = 0; /* popped: its next due is queued anew */
					visit(b, &pr, r, &sc, &q);
				}
				if (r)
					gaz_replica_unref(r);
				free(e.name);
			}
		}
		for (size_t i = 0; i < n_kicked; i++)
			free(kicked[i]);
		free(kicked);
		int64_t until = gaz_deadline_in(1000);
		if (gaz_dueq_earliest(&q) < until)
			until = gaz_dueq_earliest(&q);
		struct timespec ts = gaz_abstime_of(until);
		pthread_mutex_lock(&b->pulse_mu);
		while (!b->pulse_kicked && !atomic_load(&b->stopping))
			if (pthread_cond_timedwait(&b->pulse_cond, &b->pulse_mu, &ts))
				break;
		b->pulse_kicked = false;
		pthread_mutex_unlock(&b->pulse_mu);
		int64_t next = now + PULSE_TICK_MS * GAZ_NS_PER_MS - gaz_mono_ns();
		if (next > 0 && !atomic_load(&b->stopping))
			usleep((useconds_t)(next / 1000));
	}
	runners_stop(&pr);
	gaz_strset_release(&sc.changed);
	gaz_dueq_release(&q);
	return NULL;
}
