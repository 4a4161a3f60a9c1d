/*
 * read_fanout.c - one delivery per commit for the blocking Reads parked at
 * a journal's write head (issue 39, deliverable 3).
 *
 * A Read that reaches the write head after sending its first response
 * joins its replica's head group (gaz_head_join) and parks. The group
 * waits at one offset, the write head when its first member joined. On
 * each broadcast of the replica's notifier (a commit, an index change,
 * teardown) the group is scheduled on one of a few delivery threads, which
 * runs its rounds:
 *   ROUND_NONE      the group is empty, or nothing new is committed;
 *   ROUND_SEND      the committed bytes after the group's offset (up to
 *                   ROUND_CHUNKS chunks) are read from the spool's file
 *                   and packed once, a metadata response and its chunks,
 *                   exactly what each read would have sent itself; the
 *                   same packed messages are queued on every member whose
 *                   response queue has room, and the group moves on. The
 *                   round goes through the members a slice at a time, each
 *                   slice on a poller (send_round says why), and waits
 *                   between slices while grpc still holds more than
 *                   PACED_AHEAD of its first messages: the pollers then
 *                   serve other calls (appends) between slices, not after
 *                   the whole fan-out, and a fan-out that falls behind
 *                   its commits sends several of them in its next round;
 *   ROUND_DISSOLVE  the replica died, or the bytes are not in a local
 *                   unpersisted fragment (the store would be read, a URL
 *                   signed): every member is sent back to its own read.
 * A member whose queue has no room (a slow client), or whose call is
 * gone, is sent back to its own read too: it is woken, leaves the group
 * and goes on as any read does. Nothing here waits on a client.
 *
 * Locks: a replica's mu, then its group's mu, then a call's (sending,
 * waking, posting a slice). A slice on a poller takes the group's mu,
 * which no one holds for long (the delivery thread lets go of it while it
 * waits for the slice or paces). A member's fields are touched under the
 * group's mu only; `n` is also read without it, by the group's notifier
 * wake. The fan-out queue's lock (fq.mu) is a leaf; it guards the queue, the threads and each
 * group's queued/running/again. A scheduled group holds a reference on
 * its replica until its delivery ran.
 *
 * Gazette gives each reader a goroutine that reads and sends the new bytes
 * itself (broker/read_api.go); what the client receives is the same.
 */
#include "broker/read_fanout.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "broker/metrics.h"
#include "broker/replica.h"
#include "common/log.h"
#include "rpc/rpc.h"

#define ROUND_CHUNKS 4   /* chunks per round: with its metadata, fits a
			  * response queue that holds nothing else */
#define MAX_THREADS 4
#define SLICE 16            /* members a poller serves at a time */
#define PACED_AHEAD 256     /* first messages grpc may hold before a slice */
#define PACE_WAIT_MS 100    /* the longest wait before a slice */
#define FANOUT_NICE 10      /* the delivery threads' nice: below appends' */

/* The delivery threads and the groups scheduled for them. */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct gaz_head_group *head, *tail;
	pthread_t threads[MAX_THREADS];
	int nthreads;
	bool stopping;
} fq = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

enum round_plan { ROUND_NONE, ROUND_SEND, ROUND_DISSOLVE };

struct round {
	int64_t from, to, write_head;
	struct gaz_fragment frag;
	struct gaz_fragment_file *file;
	struct gaz_rpc_packed *msgs[1 + ROUND_CHUNKS];
	size_t n_msgs;
};

static void round_release(struct round *rd)
{
	for (size_t i = 0; i < rd->n_msgs; i++)
		gaz_rpc_packed_free(rd->msgs[i]);
	gaz_fragment_release(&rd->frag);
	gaz_fragment_file_unref(rd->file);
	memset(rd, 0, sizeof(*rd));
}

/* unlink_locked takes `m` out of `g` (g->mu held). */
static void unlink_locked(struct gaz_head_group *g, struct gaz_head_reader *m)
{
	if (g->cursor == m)
		g->cursor = m->next;
	if (m->prev)
		m->prev->next = m->next;
	else
		g->members = m->next;
	if (m->next)
		m->next->prev = m->prev;
	m->prev = m->next = NULL;
	m->member = false;
	atomic_fetch_sub(&g->n, 1);
}

/* send_back_locked returns `m` to its own read (g->mu held): out of the
 * group, then woken. Its resume waits for g->mu before it looks at its
 * state, so `m` and its call are alive through the wake. */
static void send_back_locked(struct gaz_head_group *g, struct gaz_head_reader *m)
{
	struct gaz_rpc_call *call = m->call;

	unlink_locked(g, m);
	gaz_rpc_wake(call);
}

static void dissolve(struct gaz_head_group *g)
{
	pthread_mutex_lock(&g->mu);
	while (g->members)
		send_back_locked(g, g->members);
	pthread_mutex_unlock(&g->mu);
}

/* plan_round looks at the replica for the group's next round; with
 * ROUND_SEND, `rd` holds the range and a copy of the fragment with a
 * reference to its file. */
static enum round_plan plan_round(struct gaz_head_group *g, struct round *rd)
{
	struct gaz_replica *r = g->r;
	enum round_plan plan = ROUND_NONE;
	const struct gaz_cover *e = NULL;
	bool found = false;
	size_t i;

	pthread_mutex_lock(&r->mu);
	pthread_mutex_lock(&g->mu);
	if (!atomic_load(&g->n))
		goto out;
	if (atomic_load(&r->dead)) {
		plan = ROUND_DISSOLVE;
		goto out;
	}
	gaz_coverset_summary(&r->index, NULL, &rd->write_head, NULL);
	rd->from = g->offset;
	if (rd->from == rd->write_head)
		goto out;
	i = gaz_coverset_lookup(&r->index, rd->from, &found);
	if (found)
		e = &r->index.v[i];
	/* A persisted fragment's reads may sign URLs or skip by mod time:
	 * the reads do those themselves. */
	if (rd->from > rd->write_head || !e || !e->file || e->frag.mod_time ||
	    gaz_fragment_copy(&rd->frag, &e->frag, NULL)) {
		plan = ROUND_DISSOLVE;
		goto out;
	}
	rd->file = gaz_fragment_file_ref(e->file);
	rd->to = e->frag.end < rd->write_head ? e->frag.end : rd->write_head;
	if (rd->to - rd->from > (int64_t)ROUND_CHUNKS * GAZ_READ_CHUNK)
		rd->to = rd->from + (int64_t)ROUND_CHUNKS * GAZ_READ_CHUNK;
	plan = ROUND_SEND;
out:
	pthread_mutex_unlock(&g->mu);
	pthread_mutex_unlock(&r->mu);
	return plan;
}

/* pack_round reads [from, to) from the fragment's file and packs the
 * responses a read at `from` sends: the metadata, then its chunks.
 * Returns 0, or GAZ_ENOMEM / GAZ_EIO. */
static int pack_round(struct round *rd)
{
	Protocol__ReadResponse resp = PROTOCOL__READ_RESPONSE__INIT;
	Protocol__Fragment frag = PROTOCOL__FRAGMENT__INIT;
	Protocol__SHA1Sum sum = PROTOCOL__SHA1_SUM__INIT;
	uint8_t *buf = malloc(GAZ_READ_CHUNK);
	int rc = 0;

	resp.status = PROTOCOL__STATUS__OK;
	resp.offset = rd->from;
	resp.write_head = rd->write_head;
	gaz_fragment_to_proto(&rd->frag, &frag, &sum);
	resp.fragment = &frag;
	if (!buf || !(rd->msgs[rd->n_msgs++] = gaz_rpc_pack_msg(&resp.base))) {
		free(buf);
		return GAZ_ENOMEM;
	}
	for (int64_t off = rd->from; off < rd->to;) {
		Protocol__ReadResponse chunk = PROTOCOL__READ_RESPONSE__INIT;
		size_t want = rd->to - off < GAZ_READ_CHUNK ? (size_t)(rd->to - off) : GAZ_READ_CHUNK;
		ssize_t got = pread(rd->file->fd, buf, want, off - rd->frag.begin);
		if (got <= 0) {
			rc = GAZ_EIO;
			break;
		}
		chunk.offset = off;
		chunk.content.data = buf;
		chunk.content.len = (size_t)got;
		if (!(rd->msgs[rd->n_msgs++] = gaz_rpc_pack_msg(&chunk.base))) {
			rd->n_msgs--;
			rc = GAZ_ENOMEM;
			break;
		}
		off += got;
	}
	free(buf);
	return rc;
}

/* pace waits (no lock held) while grpc holds more than PACED_AHEAD first
 * messages of fan-outs, at most PACE_WAIT_MS: a client that stopped
 * reading holds its one, and is not waited for long. */
static void pace(struct gaz_rpc_server *srv)
{
	for (int ms = 0; ms < PACE_WAIT_MS && gaz_rpc_server_packed_in_flight(srv) > PACED_AHEAD; ms++)
		usleep(1000);
}

/* A slice of a round's members. */
struct slice_job {
	struct gaz_head_group *g;
	const struct round *rd;
	int64_t delivered, returned;
	bool done; /* under g->mu */
};

/* serve_slice_locked (g->mu held) queues the round's messages on up to
 * SLICE members from the cursor, sending back those it cannot serve. */
static void serve_slice_locked(struct gaz_head_group *g, struct slice_job *j)
{
	struct gaz_head_reader *m;

	for (int i = 0; i < SLICE && (m = g->cursor); i++) {
		g->cursor = m->next;
		if (gaz_rpc_send_packed_now(m->call, j->rd->msgs, j->rd->n_msgs)) {
			send_back_locked(g, m);
			j->returned++;
		} else {
			m->offset = j->rd->to;
			j->delivered++;
		}
	}
}

/* slice_on_poller serves a slice on a poller (gaz_rpc_post), then lets
 * the delivery thread waiting in send_round go on; `j` is on its stack
 * and not touched after the unlock. */
static void slice_on_poller(void *arg)
{
	struct slice_job *j = arg;
	struct gaz_head_group *g = j->g;

	pthread_mutex_lock(&g->mu);
	serve_slice_locked(g, j);
	j->done = true;
	pthread_cond_signal(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

/* send_round queues the round's messages on every member (sending back
 * those it cannot) and moves the group on. Each slice runs on a poller:
 * a send started there completes into the queue its poller is draining,
 * where one started on this thread wakes the poller for its completion
 * (two thread switches per send, most of a delivery's cost before). The
 * slices queue behind the completions already there (an append's), one
 * at a time; the round waits between them (pace) while grpc holds too
 * many first messages. A slice with no poller to take it (its member's
 * call just finished) runs here. */
static void send_round(struct gaz_head_group *g, const struct round *rd)
{
	struct gaz_rpc_server *srv = g->r->b->srv;
	struct slice_job j = {.g = g, .rd = rd};

	pthread_mutex_lock(&g->mu);
	/* The group emptied and was joined at another offset meanwhile: the
	 * next round looks again. */
	if (!atomic_load(&g->n) || g->offset != rd->from) {
		pthread_mutex_unlock(&g->mu);
		return;
	}
	g->in_round = true;
	g->cursor = g->members;
	while (g->cursor) {
		j.done = false;
		if (gaz_rpc_post(g->cursor->call, slice_on_poller, &j) == 0) {
			while (!j.done)
				pthread_cond_wait(&g->cv, &g->mu);
		} else {
			serve_slice_locked(g, &j);
		}
		if (g->cursor && srv && gaz_rpc_server_packed_in_flight(srv) > PACED_AHEAD) {
			/* Members may leave meanwhile (unlink_locked moves the
			 * cursor past one that does); none joins. */
			pthread_mutex_unlock(&g->mu);
			pace(srv);
			pthread_mutex_lock(&g->mu);
		}
	}
	g->offset = rd->to;
	g->in_round = false;
	pthread_mutex_unlock(&g->mu);
	if (j.delivered)
		gaz_metric_read_served(false, j.delivered * (rd->to - rd->from));
	gaz_metric_read_head(j.delivered, j.returned);
}

/* deliver runs the group's rounds until nothing new is committed. */
static void deliver(struct gaz_head_group *g)
{
	for (;;) {
		struct round rd = {0};
		enum round_plan plan = plan_round(g, &rd);
		int rc;

		if (plan == ROUND_NONE)
			return;
		if (plan == ROUND_SEND && (rc = pack_round(&rd))) {
			gaz_warn("head readers' delivery failed; each reads on its own",
				 "journal=%s err=%s", g->r->journal, gaz_err_str(rc));
			plan = ROUND_DISSOLVE;
		}
		if (plan == ROUND_DISSOLVE) {
			round_release(&rd);
			dissolve(g);
			return;
		}
		send_round(g, &rd);
		round_release(&rd);
	}
}

static void *fanout_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "gaz-read-fanout");
	/* A delivery to 10,000 readers takes the cores for a while: the
	 * pollers and handlers that answer appends and control calls run
	 * first (Linux's nice is per thread). Failing that, deliveries run
	 * at the process's priority. */
	(void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), FANOUT_NICE);
	pthread_mutex_lock(&fq.mu);
	for (;;) {
		struct gaz_head_group *g = fq.head;
		bool again;

		if (!g) {
			if (fq.stopping)
				break;
			pthread_cond_wait(&fq.cv, &fq.mu);
			continue;
		}
		if (!(fq.head = g->next_queued))
			fq.tail = NULL;
		g->next_queued = NULL;
		g->queued = false;
		g->running = true;
		do {
			pthread_mutex_unlock(&fq.mu);
			deliver(g);
			pthread_mutex_lock(&fq.mu);
			again = g->again;
			g->again = false;
		} while (again);
		g->running = false;
		pthread_mutex_unlock(&fq.mu);
		gaz_replica_unref(g->r); /* the schedule's reference */
		pthread_mutex_lock(&fq.mu);
	}
	pthread_mutex_unlock(&fq.mu);
	return NULL;
}

/* threads_start_locked starts the delivery threads (fq.mu held): one per
 * core, at most MAX_THREADS. Returns whether at least one runs. */
static bool threads_start_locked(void)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	int want = cores < 1 ? 1 : cores > MAX_THREADS ? MAX_THREADS : (int)cores;

	while (fq.nthreads < want && pthread_create(&fq.threads[fq.nthreads], NULL, fanout_main, NULL) == 0)
		fq.nthreads++;
	if (!fq.nthreads)
		gaz_error("cannot start a head readers' delivery thread", NULL);
	return fq.nthreads > 0;
}

/* group_wake is the group's notifier wake (the notifier's mutex held, so
 * it only schedules): a delivery runs after this broadcast. */
static void group_wake(void *arg)
{
	struct gaz_head_group *g = arg;
	bool signal = false;

	if (!atomic_load(&g->n))
		return;
	pthread_mutex_lock(&fq.mu);
	if (fq.stopping || (!fq.nthreads && !threads_start_locked())) {
		pthread_mutex_unlock(&fq.mu);
		dissolve(g); /* no delivery: each member reads on its own */
		return;
	}
	if (g->running) {
		g->again = true;
	} else if (!g->queued) {
		g->queued = true;
		atomic_fetch_add(&g->r->refs, 1); /* the broadcaster holds one */
		if (fq.tail)
			fq.tail->next_queued = g;
		else
			fq.head = g;
		fq.tail = g;
		signal = true;
	}
	pthread_mutex_unlock(&fq.mu);
	if (signal)
		pthread_cond_signal(&fq.cv);
}

void gaz_head_group_init(struct gaz_head_group *g, struct gaz_replica *r)
{
	memset(g, 0, sizeof(*g));
	g->r = r;
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	atomic_init(&g->n, 0);
	g->w = (struct gaz_waiter){.wake = group_wake, .arg = g};
	gaz_notifier_add(&r->notifier, &g->w);
}

void gaz_head_group_release(struct gaz_head_group *g)
{
	pthread_cond_destroy(&g->cv);
	pthread_mutex_destroy(&g->mu);
}

bool gaz_head_join(struct gaz_head_group *g, struct gaz_head_reader *hr, int64_t offset)
{
	bool joined = false;

	pthread_mutex_lock(&g->mu);
	if (!atomic_load(&g->n) && !g->in_round)
		g->offset = offset;
	if (g->offset == offset && !g->in_round) {
		hr->prev = NULL;
		hr->next = g->members;
		if (g->members)
			g->members->prev = hr;
		g->members = hr;
		hr->offset = offset;
		hr->member = true;
		atomic_fetch_add(&g->n, 1);
		joined = true;
	}
	pthread_mutex_unlock(&g->mu);
	return joined;
}

int64_t gaz_head_leave(struct gaz_head_group *g, struct gaz_head_reader *hr)
{
	int64_t offset;

	pthread_mutex_lock(&g->mu);
	if (hr->member)
		unlink_locked(g, hr);
	offset = hr->offset;
	pthread_mutex_unlock(&g->mu);
	return offset;
}

void gaz_read_fanout_stop(void)
{
	pthread_mutex_lock(&fq.mu);
	fq.stopping = true;
	pthread_mutex_unlock(&fq.mu);
	pthread_cond_broadcast(&fq.cv);
	/* Each thread ends only with the queue empty, and nothing is queued
	 * once stopping is set (group_wake), so no reference is left. */
	for (int i = 0; i < fq.nthreads; i++)
		pthread_join(fq.threads[i], NULL);
	fq.nthreads = 0;
}
