/*
 * stores.c - a small table of stores keyed by URL, their health tracking,
 * and fragment reads through them. See stores.h. Stores are opened on
 * first use and kept for the life of the process (a broker uses few
 * distinct URLs); a store that fails to open is not kept, so a fixed
 * environment or spec takes effect at the next use.
 *
 * Health (facts §5.7, Gazette's broker/stores/health_check.go): a URL
 * asked about by gaz_stores_health gets a slot that one checker thread
 * checks at once and then on Gazette's schedule: every 30 min after a
 * success; after consecutive failures 0, 0.1 s, 1 s, 1 s, 10 s, 10 s,
 * then every 100 s; each interval +-20 % jitter. A URL whose store cannot
 * be opened is "checked" by opening it again, so a store that failed to
 * initialise recovers without a restart. Slots not asked about for an
 * hour stop being checked (Gazette's sweep) until asked again.
 *
 * Invariants: slots only grow while the process runs (pointers into the
 * table are not kept across unlocks: slots are found by URL); the checker
 * holds no lock while it checks; stores_mu is a leaf lock.
 */
#include "broker/stores.h"
#include "broker/metrics.h"

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/metrics.h"
#include "fragment/codec.h"

#define HEALTH_OK_INTERVAL_NS (INT64_C(30) * 60 * GAZ_NS_PER_S)
#define HEALTH_IDLE_NS (INT64_C(3600) * GAZ_NS_PER_S)

struct store_slot {
	char *url;
	struct gaz_store *store;   /* NULL while it fails to open */
	/* health, under stores_mu */
	bool tracked;              /* the checker schedules it */
	bool checked;              /* a check has completed since tracking began */
	int health_rc;             /* 0 healthy, else the last check's error */
	char health_err[512];
	int attempt;               /* consecutive failed checks */
	int64_t next_check_ns;     /* monotonic */
	int64_t used_ns;           /* last gaz_stores_health, monotonic */
};

static pthread_mutex_t stores_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stores_cond;    /* a check completed, or stop */
static pthread_cond_t checker_cond;   /* work for the checker, or stop */
static struct store_slot *slots;
static size_t n_slots;
static pthread_t checker;
static bool checker_running, checker_stop;

/* Gazette's store health metrics (broker/stores/stores.go), registered on
 * first use: gazette_store_health_check_total{store, status=ok|error} and
 * gazette_store_active (stores whose health is being checked). */
static struct gaz_metric *m_health_checks, *m_active;
static pthread_once_t metrics_once = PTHREAD_ONCE_INIT;

static void metrics_init(void)
{
	struct gaz_metrics *r = gaz_metrics_default();

	m_health_checks = gaz_metrics_counter(r, "gazette_store_health_check_total",
					      "Total number of health checks performed", "store,status");
	m_active = gaz_metrics_gauge(r, "gazette_store_active", "Number of active fragment stores", NULL);
}

void gaz_stores_metrics_init(void)
{
	pthread_once(&metrics_once, metrics_init);
	(void)gaz_metric_with(m_active);
}

/* Finds the slot of `url`, adding an empty one; NULL when out of memory.
 * Called with stores_mu held. */
static struct store_slot *slot_of(const char *url)
{
	struct store_slot *ns;

	for (size_t i = 0; i < n_slots; i++)
		if (!strcmp(slots[i].url, url))
			return &slots[i];
	if (!(ns = realloc(slots, (n_slots + 1) * sizeof(*slots))))
		return NULL;
	slots = ns;
	memset(&slots[n_slots], 0, sizeof(*slots));
	if (!(slots[n_slots].url = strdup(url)))
		return NULL;
	return &slots[n_slots++];
}

int gaz_stores_get(struct gaz_broker *b, const char *url, struct gaz_store **out,
		   struct gaz_status *st)
{
	struct store_slot *sl;
	int rc = 0;

	pthread_mutex_lock(&stores_mu);
	for (size_t i = 0; i < n_slots; i++) {
		if (!strcmp(slots[i].url, url) && slots[i].store) {
			*out = gaz_store_ref(slots[i].store);
			pthread_mutex_unlock(&stores_mu);
			return 0;
		}
	}
	rc = gaz_store_open(url, b->cfg.file_root, out, st);
	if (!rc && (sl = slot_of(url)))
		sl->store = gaz_store_ref(*out);
	pthread_mutex_unlock(&stores_mu);
	return rc;
}

/* The wait after a check: Gazette's schedule, with +-20 % jitter. */
static int64_t next_interval_ns(bool ok, int attempt)
{
	static const int64_t fail_ms[] = {0, 100, 1000, 1000, 10000, 10000};
	int64_t ns = ok ? HEALTH_OK_INTERVAL_NS
		     : (attempt < 6 ? fail_ms[attempt] : 100000) * GAZ_NS_PER_MS;

	return ns + (int64_t)(((double)rand() / RAND_MAX - 0.5) * 0.4 * (double)ns);
}

/* Runs one check of `url` with no lock held: open the store if needed,
 * then gaz_store_health_check. */
static int check_one(struct gaz_broker *b, const char *url, struct gaz_status *st)
{
	struct gaz_store *s = NULL;
	int rc = gaz_stores_get(b, url, &s, st);

	if (!rc)
		rc = gaz_store_health_check(s, st);
	gaz_store_unref(s);
	return rc;
}

/* Records a check's result in the slot of `url` and schedules the next. */
static void record_check(const char *url, int rc, const struct gaz_status *st, int64_t now)
{
	struct store_slot *sl = slot_of(url);

	pthread_once(&metrics_once, metrics_init);
	gaz_metric_inc(gaz_metric_with(m_health_checks, url, rc ? "error" : "ok"));
	if (!sl)
		return;
	if (rc)
		gaz_warn("store health check failed", "store=%s attempt=%d err=%s", url,
			 sl->attempt, st->msg);
	else if (!sl->checked || sl->health_rc)
		gaz_info("store health check succeeded", "store=%s attempt=%d", url, sl->attempt);
	sl->checked = true;
	sl->health_rc = rc;
	snprintf(sl->health_err, sizeof(sl->health_err), "%s", rc ? st->msg : "");
	sl->next_check_ns = now + next_interval_ns(rc == 0, sl->attempt);
	sl->attempt = rc ? sl->attempt + 1 : 0;
}

/* The due tracked slot with the earliest check, or -1; *wake_ns receives
 * the earliest future check. Sweeps idle slots. Called with stores_mu. */
static ssize_t due_slot(int64_t now, int64_t *wake_ns)
{
	ssize_t due = -1;
	size_t active = 0;

	*wake_ns = now + HEALTH_OK_INTERVAL_NS;
	for (size_t i = 0; i < n_slots; i++) {
		struct store_slot *sl = &slots[i];
		if (sl->tracked && now - sl->used_ns > HEALTH_IDLE_NS) {
			gaz_info("stopped fragment store health checks", "store=%s", sl->url);
			sl->tracked = sl->checked = false;
		}
		if (!sl->tracked)
			continue;
		active++;
		if (sl->next_check_ns <= now &&
		    (due < 0 || sl->next_check_ns < slots[due].next_check_ns))
			due = (ssize_t)i;
		else if (sl->next_check_ns < *wake_ns)
			*wake_ns = sl->next_check_ns;
	}
	pthread_once(&metrics_once, metrics_init);
	gaz_metric_set(gaz_metric_with(m_active), (int64_t)active);
	return due;
}

static void *checker_main(void *arg)
{
	struct gaz_broker *b = arg;

	pthread_setname_np(pthread_self(), "gaz-store-check");
	pthread_mutex_lock(&stores_mu);
	while (!checker_stop) {
		int64_t now = gaz_mono_ns(), wake;
		ssize_t i = due_slot(now, &wake);
		if (i < 0) {
			struct timespec ts = gaz_abstime_of(wake);
			pthread_cond_timedwait(&checker_cond, &stores_mu, &ts);
			continue;
		}
		char *url = strdup(slots[i].url);
		struct gaz_status st = {0};
		int rc;
		slots[i].next_check_ns = INT64_MAX; /* not twice at once */
		pthread_mutex_unlock(&stores_mu);
		rc = url ? check_one(b, url, &st) : gaz_status_set(&st, GAZ_ENOMEM, "out of memory");
		pthread_mutex_lock(&stores_mu);
		if (url)
			record_check(url, rc, &st, gaz_mono_ns());
		free(url);
		pthread_cond_broadcast(&stores_cond);
	}
	pthread_mutex_unlock(&stores_mu);
	return NULL;
}

/* Starts the checker thread once. Called with stores_mu held. */
static int checker_start(struct gaz_broker *b, struct gaz_status *st)
{
	pthread_condattr_t ca;

	if (checker_running)
		return 0;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&stores_cond, &ca);
	pthread_cond_init(&checker_cond, &ca);
	pthread_condattr_destroy(&ca);
	checker_stop = false;
	if (pthread_create(&checker, NULL, checker_main, b))
		return gaz_status_set(st, GAZ_ENOMEM, "starting the store health checker failed");
	checker_running = true;
	return 0;
}

int gaz_stores_health(struct gaz_broker *b, const char *url, int64_t wait_ms,
		      struct gaz_status *st)
{
	int64_t deadline = gaz_deadline_in(wait_ms);
	struct store_slot *sl;
	int rc;

	pthread_mutex_lock(&stores_mu);
	if ((rc = checker_start(b, st)) || !(sl = slot_of(url))) {
		pthread_mutex_unlock(&stores_mu);
		return rc ? rc : gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	}
	sl->used_ns = gaz_mono_ns();
	if (!sl->tracked) {
		sl->tracked = true;
		sl->checked = false;
		sl->attempt = 0;
		sl->next_check_ns = 0;
		pthread_cond_signal(&checker_cond);
	}
	for (;;) {
		struct timespec ts = gaz_abstime_of(deadline);
		sl = slot_of(url); /* the table may have moved while we waited */
		if (!sl || sl->checked || checker_stop || gaz_mono_ns() >= deadline)
			break;
		pthread_cond_timedwait(&stores_cond, &stores_mu, &ts);
	}
	if (!sl || !sl->checked)
		rc = gaz_status_set(st, GAZ_ETIMEDOUT, "first health check hasn't completed yet");
	else if (sl->health_rc)
		rc = gaz_status_set(st, sl->health_rc, "%s", sl->health_err);
	pthread_mutex_unlock(&stores_mu);
	return rc;
}

void gaz_stores_close_all(void)
{
	pthread_mutex_lock(&stores_mu);
	if (checker_running) {
		checker_stop = true;
		pthread_cond_broadcast(&checker_cond);
		pthread_cond_broadcast(&stores_cond);
		pthread_mutex_unlock(&stores_mu);
		pthread_join(checker, NULL);
		pthread_mutex_lock(&stores_mu);
		checker_running = false;
	}
	for (size_t i = 0; i < n_slots; i++) {
		free(slots[i].url);
		gaz_store_unref(slots[i].store);
	}
	free(slots);
	slots = NULL;
	n_slots = 0;
	pthread_mutex_unlock(&stores_mu);
}

static int add_fragment(void *arg, const struct gaz_fragment *f, struct gaz_status *st)
{
	return gaz_coverset_add(arg, f, NULL, NULL, st);
}

int gaz_stores_list_fragments(struct gaz_broker *b, const char *url, const char *journal,
			      struct gaz_coverset *out, struct gaz_status *st)
{
	struct gaz_store *s = NULL;
	int rc = gaz_stores_get(b, url, &s, st);

	if (rc)
		return rc;
	rc = gaz_store_list_fragments(s, journal, add_fragment, out, st);
	gaz_store_unref(s);
	return rc;
}

struct gaz_fragment_reader {
	struct gaz_store_reader *raw;
	struct gaz_decoder *dec;
	int64_t remaining;     /* decompressed bytes left to the fragment end */
	/* Counts what is read: discarded bytes while seeking to the offset,
	 * then read bytes, as Gazette's FragmentReader (borrowed; NULL when
	 * metrics are not set up). */
	struct gaz_metric_child *counter;
};

void gaz_fragment_reader_close(struct gaz_fragment_reader *r)
{
	if (!r)
		return;
	gaz_decoder_free(r->dec);
	gaz_store_reader_close(r->raw);
	free(r);
}

int gaz_fragment_reader_read(struct gaz_fragment_reader *r, void *buf, size_t cap, size_t *n,
			     struct gaz_status *st)
{
	int rc;

	if (r->remaining <= 0)
		return GAZ_EOF;
	if ((int64_t)cap > r->remaining)
		cap = (size_t)r->remaining;
	rc = gaz_decoder_read(r->dec, buf, cap, n, st);
	if (rc == GAZ_EOF)
		return gaz_status_set(st, GAZ_EIO, "fragment ended %lld bytes early",
				      (long long)r->remaining);
	if (!rc) {
		r->remaining -= (int64_t)*n;
		gaz_metric_add(r->counter, (int64_t)*n);
	}
	return rc;
}

int gaz_fragment_reader_finish(struct gaz_fragment_reader *r, struct gaz_status *st)
{
	uint8_t extra[1];
	size_t n = 0;
	int rc;

	if (r->remaining > 0)
		return gaz_status_set(st, GAZ_EIO, "fragment not read to its end (%lld bytes left)",
				      (long long)r->remaining);
	rc = gaz_decoder_read(r->dec, extra, sizeof(extra), &n, st);
	if (rc == GAZ_EOF)
		return 0;
	if (rc == 0)
		return gaz_status_set(st, GAZ_EPROTO, "did not read EOF at expected Fragment.End");
	return rc;
}

/* Discards decompressed bytes up to the wanted offset. */
static int skip(struct gaz_fragment_reader *r, int64_t n, struct gaz_status *st)
{
	char buf[32768];

	while (n > 0) {
		size_t got = 0;
		int rc = gaz_fragment_reader_read(r, buf, n < (int64_t)sizeof(buf) ? (size_t)n : sizeof(buf),
						  &got, st);
		if (rc)
			return rc;
		n -= (int64_t)got;
	}
	return 0;
}

int gaz_stores_open_fragment(struct gaz_broker *b, const struct gaz_fragment *f, int64_t offset,
			     struct gaz_fragment_reader **out, struct gaz_status *st)
{
	char path[GAZ_FRAGMENT_PATH_MAX];
	struct gaz_fragment_reader *r = calloc(1, sizeof(*r));
	struct gaz_store *s = NULL;
	int codec = f->codec, rc;

	if (!r)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	if ((rc = gaz_fragment_content_path(f, path, sizeof(path), st)) ||
	    (rc = gaz_stores_get(b, f->backing_store, &s, st)))
		goto fail;
	rc = gaz_store_get(s, path, 0, &r->raw, st);
	gaz_store_unref(s);
	if (rc)
		goto fail;
	/* Offload-decompression objects are stored gzip with Content-Encoding:
	 * gzip. Stores answer them as stored (S3, MinIO, SeaweedFS) or decode
	 * them for a client that does not accept gzip (GCS); the answer's own
	 * Content-Encoding says which, so the content is decoded exactly once
	 * (case BR-13). File stores keep no metadata: always gzip. */
	if (codec == PROTOCOL__COMPRESSION_CODEC__GZIP_OFFLOAD_DECOMPRESSION)
		codec = r->raw->fd >= 0 || strstr(r->raw->content_encoding, "gzip")
				? PROTOCOL__COMPRESSION_CODEC__GZIP
				: PROTOCOL__COMPRESSION_CODEC__NONE;
	if ((rc = gaz_decoder_new(codec, gaz_store_reader_read, r->raw, &r->dec, st)))
		goto fail;
	r->remaining = f->end - f->begin;
	r->counter = gaz_metric_fragment_bytes(true, f->journal, f->codec);
	if ((rc = skip(r, offset - f->begin, st)))
		goto fail;
	r->counter = gaz_metric_fragment_bytes(false, f->journal, f->codec);
	*out = r;
	return 0;
fail:
	gaz_fragment_reader_close(r);
	return rc;
}

int gaz_stores_sign(struct gaz_broker *b, const struct gaz_fragment *f, int64_t ttl_s, char **url,
		    struct gaz_status *st)
{
	char path[GAZ_FRAGMENT_PATH_MAX];
	struct gaz_store *s = NULL;
	int rc;

	if ((rc = gaz_fragment_content_path(f, path, sizeof(path), st)) ||
	    (rc = gaz_stores_get(b, f->backing_store, &s, st)))
		return rc;
	rc = gaz_store_sign_get(s, path, ttl_s, url, st);
	gaz_store_unref(s);
	return rc;
}
