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
	int checks;                  /* existence checks that found nothing */
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
			   struct gaz_spool_done *done, bool at_once)
{
	struct job *j = p ? calloc(1, sizeof(*j)) : NULL;

	if (!j) {
		gaz_error("persister: out of memory; fragment stays local", "journal=%s", r->journal);
		return;
	}
	atomic_fetch_add(&r->refs, 1);
	j->r = r;
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

/* Compresses the spool file into an unlinked temp file when needed.
 * Returns the fd to upload (the spool's own when NONE) and its length. */
static int encode(struct gaz_broker *b, const struct job *j, int *fd, int64_t *len,
		  struct gaz_status *st)
{
	const struct gaz_fragment *f = &j->done.fragment;
	char tmpl[4096];
	int out, rc;

	*fd = j->done.file->fd;
	*len = f->end - f->begin;
	if (f->codec == PROTOCOL__COMPRESSION_CODEC__NONE)
		return 0;
	snprintf(tmpl, sizeof(tmpl), "%s/gazette-persist-XXXXXX", b->spool_dir);
	if ((out = mkstemp(tmpl)) < 0)
		return gaz_status_set(st, GAZ_EIO, "creating %s: %m", tmpl);
	unlink(tmpl);
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
		gaz_warn("persisting fragment without a path postfix", "journal=%s begin=%lld err=\"%s\"",
			 j->r->journal, (long long)f->begin, why.msg);
		postfix[0] = 0;
	}
	return gaz_fragment_set_str(&f->path_postfix, postfix, st);
}

/* One upload attempt. Returns 0 when persisted (or nothing to do), or
 * GAZ_ENOTFOUND when a replica's check found no upload yet and its delay
 * runs on. */
static int persist(struct gaz_persister *p, struct job *j, struct gaz_status *st)
{
	Protocol__JournalSpec *spec = gaz_ks_spec_copy(p->b->ks, p->b->root, j->r->journal);
	struct gaz_fragment *f = &j->done.fragment;
	struct gaz_store *s = NULL;
	char path[GAZ_FRAGMENT_PATH_MAX];
	bool exists = false;
	int fd = -1, rc;
	int64_t len = 0;

	if (!spec || !spec->fragment || !spec->fragment->n_stores) {
		gaz_info("not persisting fragment: journal has no stores", "journal=%s begin=%lld end=%lld",
			 j->r->journal, (long long)f->begin, (long long)f->end);
		rc = 0;
		goto out;
	}
	if ((rc = set_postfix(j, spec, st)))
		goto out;
	if ((rc = gaz_stores_get(p->b, spec->fragment->stores[0], &s, st)) ||
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
		if (rc)
			goto out;
	}
	gaz_fragment_set_str(&f->backing_store, spec->fragment->stores[0], NULL);
	f->mod_time = gaz_wall_ns() / GAZ_NS_PER_S;
	gaz_replica_persisted(j->r, f);
	gaz_metric_spool_persisted();
	gaz_info("persisted fragment", "journal=%s begin=%lld end=%lld store=%s uploaded=%s",
		 j->r->journal, (long long)f->begin, (long long)f->end, spec->fragment->stores[0],
		 exists ? "false" : "true");
out:
	gaz_store_unref(s);
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
			if ((*pp)->not_before_ns <= now || p->draining) {
				struct job *j = *pp;
				j->check_only = !p->draining && j->upload_by_ns > now;
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

	while ((j = next_job(p))) {
		struct gaz_status st = {0};
		bool draining;
		int rc = persist(p, j, &st);
		if (rc == 0) {
			pthread_mutex_lock(&p->mu);
			inflight_remove(p, j);
			job_free(j);
			p->pending--;
			pthread_cond_broadcast(&p->cond);
			pthread_mutex_unlock(&p->mu);
			continue;
		}
		if (rc != GAZ_ENOTFOUND) {
			j->attempts++;
			gaz_warn("persisting fragment failed; will retry",
				 "journal=%s begin=%lld attempt=%d err=\"%s\"", j->r->journal,
				 (long long)j->done.fragment.begin, j->attempts, st.msg);
			int64_t backoff_ms = j->attempts > 6 ? 60000 : 1000 << (j->attempts - 1);
			j->not_before_ns = gaz_deadline_in(backoff_ms);
		}
		pthread_mutex_lock(&p->mu);
		if (rc == GAZ_ENOTFOUND) {
			/* Not uploaded yet: check again later, and upload at
			 * upload_by_ns at the latest (at once if expedited). */
			int64_t next = gaz_deadline_in((int64_t)REPLICA_CHECK_FIRST_MS
						       << (j->checks < 5 ? ++j->checks : 5));
			j->not_before_ns = next < j->upload_by_ns ? next : j->upload_by_ns;
		}
		inflight_remove(p, j);
		draining = p->draining; /* read under mu: the stop sets it */
		if (draining)
			j->not_before_ns = gaz_deadline_in(200);
		if (p->tail)
			p->tail->next = j;
		else
			p->head = j;
		p->tail = j;
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->mu);
		if (draining)
			usleep(200 * 1000);
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

size_t gaz_persister_stop(struct gaz_persister *p, int64_t deadline_ns)
{
	struct timespec ts = gaz_abstime_of(deadline_ns);
	size_t left;

	pthread_mutex_lock(&p->mu);
	p->draining = true;
	pthread_cond_broadcast(&p->cond);
	while (p->pending && gaz_mono_ns() < deadline_ns)
		if (pthread_cond_timedwait(&p->cond, &p->mu, &ts))
			break;
	if (p->pending)
		gaz_error("exiting with fragments not persisted", "count=%zu", p->pending);
	left = p->pending;
	p->stop = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->mu);
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
