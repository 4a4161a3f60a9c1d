/*
 * persister.c - completed spools to the fragment store (facts §5.5).
 *
 * A queue of completed fragments (each with its local file) is drained by
 * a few worker threads: most at once. A replica's fragment that the
 * primary confirmed holding is uploaded by that primary; the replica only
 * checks that the upload landed (after 1 s, then at doubling intervals),
 * and drops its copy when it has. It uploads itself only if nothing
 * landed within GAZ_REPLICA_PERSIST_DELAY_S (Gazette's replicas attempt
 * after two to three minutes), or once that primary leaves the route.
 * The store sees one upload per fragment, not one per replica, and a
 * replica holds its copy for seconds, not minutes.
 *
 * A job: look up the journal's spec; no spec or no stores → dropped
 * (nothing to persist to); compute the path postfix; skip if the object
 * exists; compress to a temporary file when the codec asks; put; then
 * swap the index entry for the persisted one. Failures
 * are retried with backoff (1 s doubling to 60 s), never dropped: the
 * local file keeps serving reads until the upload succeeds.
 *
 * The journal's first store is the one written. While the broker exits
 * (gaz_persister_drain), a store that refuses us (GAZ_EPERM: the
 * authorisation class, NoSuchBucket among it) is passed over for the
 * journal's next stores, as Gazette's exiting persister does
 * (fragment.Persist); delays end at once, failures keep their back-off
 * (capped at DRAIN_BACKOFF_MAX_MS).
 *
 * Locks: mu guards the queue, the in-flight list, pending, stop, draining
 * and every job field a worker does not own. A worker owns the job it
 * took (done, checks) until it puts it back under mu; attempts, store
 * and err change only under mu, so reports read them there.
 */
#include "broker/persister.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/metrics.h"
#include "broker/replica.h"
#include "broker/stores.h"
#include "common/clock.h"
#include "common/log.h"
#include "fragment/codec.h"
#include "protocol/validate.h"

/* A replica's first check for the primary's upload; later ones double,
 * up to 32 times this. */
#define REPLICA_CHECK_FIRST_MS 1000
/* Bytes of a job's last failed store kept for reports. */
#define JOB_STORE_MAX 256
/* Bound on a failed upload's back-off while exiting. */
#define DRAIN_BACKOFF_MAX_MS 8000

struct job {
	struct gaz_replica *r;
	struct gaz_spool_done done;
	int attempts;
	int64_t not_before_ns;
	/* A delayed job (gaz_persister_enqueue) only checks for the primary's
	 * upload until then; 0: uploads, as every job not delayed. Guarded
	 * by the persister's mu, as is check_only, which next_job sets for
	 * the attempt it hands out. */
	int64_t upload_by_ns;
	bool check_only;
	bool exiting;                /* this attempt may fall back to later stores */
	bool sole;                   /* committed with no peer holding it */
	int checks;                  /* existence checks that found nothing */
	char store[JOB_STORE_MAX];   /* the store of the last failed attempt */
	char err[256];               /* its error */
	struct job *next;
};

struct gaz_persister {
	struct gaz_broker *b;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct job *head, *tail;     /* queued */
	struct job *inflight;        /* taken by a worker (linked by next) */
	size_t pending;              /* queued + in flight */
	bool stop, draining;
	int n_workers;
	pthread_t workers[8];
};

static void job_free(struct job *j)
{
	gaz_spool_done_release(&j->done);
	gaz_replica_unref(j->r);
	free(j);
}

void gaz_persister_enqueue(struct gaz_persister *p, struct gaz_replica *r,
			   struct gaz_spool_done *done, bool at_once, bool sole)
{
	struct job *j = p ? calloc(1, sizeof(*j)) : NULL;

	if (!j) {
		gaz_error("persister: out of memory; fragment stays local", "journal=%s", r->journal);
		return;
	}
	atomic_fetch_add(&r->refs, 1);
	j->r = r;
	j->sole = sole;
	j->done = *done;
	memset(done, 0, sizeof(*done));
	if (!at_once) {
		j->upload_by_ns = gaz_mono_ns() + (int64_t)GAZ_REPLICA_PERSIST_DELAY_S * GAZ_NS_PER_S;
		j->not_before_ns = gaz_deadline_in(REPLICA_CHECK_FIRST_MS);
	}
	pthread_mutex_lock(&p->mu);
	if (p->tail)
		p->tail->next = j;
	else
		p->head = j;
	p->tail = j;
	p->pending++;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->mu);
}

void gaz_persister_expedite(struct gaz_persister *p, const struct gaz_replica *r)
{
	size_t n = 0;

	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	for (struct job *j = p->head; j; j = j->next)
		if (j->r == r && j->upload_by_ns) {
			j->upload_by_ns = 0;
			if (j->attempts == 0)
				j->not_before_ns = 0;
			n++;
		}
	for (struct job *j = p->inflight; j; j = j->next)
		if (j->r == r && j->upload_by_ns) {
			j->upload_by_ns = 0; /* its worker requeues it due at once */
			n++;
		}
	if (n)
		pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->mu);
	if (n)
		gaz_info("persisting a replica's fragments now: the route's primary changed",
			 "journal=%s fragments=%zu", r->journal, n);
}

size_t gaz_persister_pending(struct gaz_persister *p)
{
	size_t n;

	pthread_mutex_lock(&p->mu);
	n = p->pending;
	pthread_mutex_unlock(&p->mu);
	return n;
}

/* Compresses the spool file into an unlinked temp file when needed
 * (gaz_spool_tmpfile, in the spool directory).
 * Returns the fd to upload (the spool's own when NONE) and its length. */
static int encode(struct gaz_broker *b, const struct job *j, int *fd, int64_t *len,
		  struct gaz_status *st)
{
	const struct gaz_fragment *f = &j->done.fragment;
	int out, rc;

	*fd = j->done.file->fd;
	*len = f->end - f->begin;
	if (f->codec == PROTOCOL__COMPRESSION_CODEC__NONE)
		return 0;
	/* In the spool directory, made again if it went missing. */
	if ((rc = gaz_spool_tmpfile(b->spool_dir, f->journal, "compressed copy", &out, st)))
		return rc;
	if ((rc = gaz_codec_compress_file(f->codec, j->done.file->fd, out, st))) {
		close(out);
		return rc;
	}
	*fd = out;
	*len = lseek(out, 0, SEEK_END);
	return 0;
}

/* Names the fragment's path postfix from the spec's path_postfix_template
 * over the spool (facts §5.5; Gazette's evalPathPostfix). A template we
 * cannot evaluate (outside our subset) or whose result is not a valid
 * postfix leaves the postfix empty, with a warning: the fragment is still
 * persisted, under the journal's own prefix, where every reader finds it
 * (decisions.md, "Path postfix templates"). */
static int set_postfix(struct job *j, const Protocol__JournalSpec *spec, struct gaz_status *st)
{
	const char *tpl = spec->fragment->path_postfix_template;
	struct gaz_fragment *f = &j->done.fragment;
	struct gaz_postfix_data d = {.journal = j->r->journal, .begin = f->begin, .end = f->end,
				     .first_append_ns = j->done.first_append_ns,
				     .replication = spec->replication};
	char postfix[GAZ_POSTFIX_MAX + 1];
	struct gaz_status why = {0};

	if (!tpl || !*tpl)
		return gaz_fragment_set_str(&f->path_postfix, NULL, st);
	if (!gaz_postfix_template_exec(tpl, &d, postfix, sizeof(postfix), &why) &&
	    !gaz_fragment_postfix_valid(postfix))
		gaz_status_set(&why, GAZ_EINVAL, "path_postfix_template gave \"%s\", not a valid path postfix",
			       postfix);
	if (why.code) {
		gaz_warn("persisting fragment without a path postfix", "journal=%s begin=%lld err=%s",
			 j->r->journal, (long long)f->begin, why.msg);
		postfix[0] = 0;
	}
	return gaz_fragment_set_str(&f->path_postfix, postfix, st);
}

/* Whether the fragment is in, or now put to, `store`. Returns 0 when
 * persisted there (*uploaded says whether we put it), GAZ_ENOTFOUND when
 * a check-only attempt found nothing, or the store's error. */
static int persist_to(struct gaz_persister *p, struct job *j, const char *store, bool *uploaded,
		      struct gaz_status *st)
{
	struct gaz_fragment *f = &j->done.fragment;
	struct gaz_store *s = NULL;
	char path[GAZ_FRAGMENT_PATH_MAX];
	bool exists = false;
	int fd = -1, rc;
	int64_t len = 0;

	*uploaded = false;
	if ((rc = gaz_stores_get(p->b, store, &s, st)) ||
	    (rc = gaz_fragment_content_path(f, path, sizeof(path), st)) ||
	    (rc = gaz_store_exists(s, path, &exists, st)))
		goto out;
	if (!exists && j->check_only) {
		rc = GAZ_ENOTFOUND;
		goto out;
	}
	if (!exists) {
		if ((rc = encode(p->b, j, &fd, &len, st)))
			goto out;
		rc = gaz_store_put(s, path, fd, len,
				   f->codec == PROTOCOL__COMPRESSION_CODEC__GZIP_OFFLOAD_DECOMPRESSION
					   ? "gzip" : NULL, st);
		if (fd != j->done.file->fd)
			close(fd);
		*uploaded = !rc;
	}
out:
	gaz_store_unref(s);
	return rc;
}

/* One upload attempt. Returns 0 when persisted (or nothing to do), or
 * GAZ_ENOTFOUND when a replica's check found no upload yet and its delay
 * runs on. On a failure `failed_store` (JOB_STORE_MAX bytes) names
 * the store of the last attempt and st says why. */
static int persist(struct gaz_persister *p, struct job *j, char *failed_store,
		   struct gaz_status *st)
{
	Protocol__JournalSpec *spec = gaz_ks_spec_copy(p->b->ks, p->b->root, j->r->journal);
	struct gaz_fragment *f = &j->done.fragment;
	bool uploaded = false;
	size_t i = 0;
	int rc;

	if (!spec || !spec->fragment || !spec->fragment->n_stores) {
		gaz_info("not persisting fragment: journal has no stores", "journal=%s begin=%lld end=%lld",
			 j->r->journal, (long long)f->begin, (long long)f->end);
		rc = 0;
		goto out;
	}
	if ((rc = set_postfix(j, spec, st)))
		goto out;
	for (;;) {
		const char *store = spec->fragment->stores[i];
		rc = persist_to(p, j, store, &uploaded, st);
		if (rc && rc != GAZ_ENOTFOUND)
			snprintf(failed_store, JOB_STORE_MAX, "%s", store);
		if (rc == GAZ_EPERM && j->exiting && i + 1 < spec->fragment->n_stores) {
			gaz_warn("fragment store refuses us while exiting; trying the journal's next store",
				 "journal=%s begin=%lld end=%lld store=%s next=%s err=%s", j->r->journal,
				 (long long)f->begin, (long long)f->end, store,
				 spec->fragment->stores[i + 1], st->msg);
			i++;
			continue;
		}
		break;
	}
	if (rc)
		goto out;
	gaz_fragment_set_str(&f->backing_store, spec->fragment->stores[i], NULL);
	f->mod_time = gaz_wall_ns() / GAZ_NS_PER_S;
	gaz_replica_persisted(j->r, f);
	gaz_metric_spool_persisted();
	gaz_info("persisted fragment", "journal=%s begin=%lld end=%lld store=%s uploaded=%s",
		 j->r->journal, (long long)f->begin, (long long)f->end, spec->fragment->stores[i],
		 uploaded ? "true" : "false");
out:
	if (spec)
		protobuf_c_message_free_unpacked(&spec->base, NULL);
	return rc;
}

/* Takes the next job that is due; NULL when stopping with nothing left. */
static struct job *next_job(struct gaz_persister *p)
{
	pthread_mutex_lock(&p->mu);
	for (;;) {
		int64_t now = gaz_mono_ns(), wait_until = GAZ_DEADLINE_NEVER;
		if (p->stop) {
			pthread_mutex_unlock(&p->mu);
			return NULL;
		}
		struct job **pp = &p->head, *prev = NULL;
		for (; *pp; prev = *pp, pp = &(*pp)->next) {
			if ((*pp)->not_before_ns <= now) {
				struct job *j = *pp;
				j->check_only = !p->draining && j->upload_by_ns > now;
				j->exiting = p->draining;
				*pp = j->next;
				if (p->tail == j)
					p->tail = prev;
				j->next = p->inflight;
				p->inflight = j;
				pthread_mutex_unlock(&p->mu);
				return j;
			}
			if ((*pp)->not_before_ns < wait_until)
				wait_until = (*pp)->not_before_ns;
		}
		struct timespec ts = gaz_abstime_of(wait_until);
		pthread_cond_timedwait(&p->cond, &p->mu, &ts);
	}
}

/* Removes `j` from the in-flight list. mu held. */
static void inflight_remove(struct gaz_persister *p, struct job *j)
{
	for (struct job **pp = &p->inflight; *pp; pp = &(*pp)->next) {
		if (*pp == j) {
			*pp = j->next;
			j->next = NULL;
			return;
		}
	}
}

size_t gaz_persister_pending_for(struct gaz_persister *p, const char *journal)
{
	size_t n = 0;

	pthread_mutex_lock(&p->mu);
	for (struct job *j = p->head; j; j = j->next)
		n += !j->upload_by_ns && !strcmp(j->r->journal, journal);
	for (struct job *j = p->inflight; j; j = j->next)
		n += !j->upload_by_ns && !strcmp(j->r->journal, journal);
	pthread_mutex_unlock(&p->mu);
	return n;
}

static void *worker(void *arg)
{
	struct gaz_persister *p = arg;
	struct job *j;

	pthread_setname_np(pthread_self(), "gaz-persist");
	while ((j = next_job(p))) {
		struct gaz_status st = {0};
		char failed_store[JOB_STORE_MAX] = "";
		bool draining;
		int rc = persist(p, j, failed_store, &st);
		if (rc == 0) {
			pthread_mutex_lock(&p->mu);
			inflight_remove(p, j);
			job_free(j);
			p->pending--;
			pthread_cond_broadcast(&p->cond);
			pthread_mutex_unlock(&p->mu);
			continue;
		}
		pthread_mutex_lock(&p->mu);
		draining = p->draining; /* read under mu: the stop sets it */
		if (rc != GAZ_ENOTFOUND) {
			int64_t backoff_ms = j->attempts >= 6 ? 60000 : 1000 << j->attempts;
			if (draining && backoff_ms > DRAIN_BACKOFF_MAX_MS)
				backoff_ms = DRAIN_BACKOFF_MAX_MS;
			j->attempts++;
			j->not_before_ns = gaz_deadline_in(backoff_ms);
			snprintf(j->store, sizeof(j->store), "%s", failed_store);
			snprintf(j->err, sizeof(j->err), "%.255s", st.msg);
			gaz_warn("persisting fragment failed; will retry",
				 "journal=%s begin=%lld end=%lld store=%s attempt=%d retry_in_ms=%lld err=%s",
				 j->r->journal, (long long)j->done.fragment.begin,
				 (long long)j->done.fragment.end, j->store, j->attempts,
				 (long long)backoff_ms, st.msg);
		} else if (draining) {
			/* No longer delayed: upload now. */
			j->not_before_ns = 0;
			j->upload_by_ns = 0;
		} else {
			/* Not uploaded yet: check again later, and upload at
			 * upload_by_ns at the latest (at once if expedited). */
			int64_t next = gaz_deadline_in((int64_t)REPLICA_CHECK_FIRST_MS
						       << (j->checks < 5 ? ++j->checks : 5));
			j->not_before_ns = next < j->upload_by_ns ? next : j->upload_by_ns;
		}
		inflight_remove(p, j);
		if (p->tail)
			p->tail->next = j;
		else
			p->head = j;
		p->tail = j;
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->mu);
	}
	return NULL;
}

struct gaz_persister *gaz_persister_start(struct gaz_broker *b, int workers)
{
	struct gaz_persister *p = calloc(1, sizeof(*p));
	pthread_condattr_t ca;

	if (!p)
		return NULL;
	p->b = b;
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (workers > 8)
		workers = 8;
	for (int i = 0; i < workers; i++)
		if (pthread_create(&p->workers[p->n_workers], NULL, worker, p) == 0)
			p->n_workers++;
	return p;
}

size_t gaz_persister_drain(struct gaz_persister *p, int64_t deadline_ns, size_t *sole)
{
	struct timespec ts = gaz_abstime_of(deadline_ns);
	size_t left, n_sole = 0;

	pthread_mutex_lock(&p->mu);
	if (!p->draining) {
		/* Delays end: every queued job is uploaded from here, at once
		 * unless a failure's back-off runs. In-flight jobs are requeued
		 * by their workers, which see draining. */
		p->draining = true;
		for (struct job *j = p->head; j; j = j->next) {
			j->upload_by_ns = 0;
			if (j->attempts == 0)
				j->not_before_ns = 0;
		}
		pthread_cond_broadcast(&p->cond);
	}
	while (p->pending && gaz_mono_ns() < deadline_ns)
		if (pthread_cond_timedwait(&p->cond, &p->mu, &ts))
			break;
	left = p->pending;
	for (struct job *j = p->head; j; j = j->next)
		n_sole += j->sole;
	for (struct job *j = p->inflight; j; j = j->next)
		n_sole += j->sole;
	pthread_mutex_unlock(&p->mu);
	if (sole)
		*sole = n_sole;
	return left;
}

/* Logs one queued or in-flight job (mu held: its fields are copied by
 * the log call before the unlock). */
static void report_job(const struct job *j)
{
	gaz_error("fragment not persisted",
		  "journal=%s begin=%lld end=%lld sole_copy=%s attempts=%d store=%s err=%s",
		  j->r->journal, (long long)j->done.fragment.begin, (long long)j->done.fragment.end,
		  j->sole ? "true" : "false", j->attempts, j->store[0] ? j->store : "(none tried)",
		  j->err[0] ? j->err : "(no attempt ended yet)");
}

void gaz_persister_report(struct gaz_persister *p)
{
	pthread_mutex_lock(&p->mu);
	for (const struct job *j = p->head; j; j = j->next)
		report_job(j);
	for (const struct job *j = p->inflight; j; j = j->next)
		report_job(j);
	pthread_mutex_unlock(&p->mu);
}

size_t gaz_persister_stop(struct gaz_persister *p)
{
	size_t left;

	pthread_mutex_lock(&p->mu);
	left = p->pending;
	p->stop = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->mu);
	if (left) {
		gaz_persister_report(p);
		gaz_error("exiting with fragments not persisted", "count=%zu", left);
	}
	for (int i = 0; i < p->n_workers; i++)
		pthread_join(p->workers[i], NULL);
	while (p->head) {
		struct job *j = p->head;
		p->head = j->next;
		job_free(j);
	}
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cond);
	free(p);
	return left;
}
