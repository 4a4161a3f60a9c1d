/*
 * client_probe.c - a small program over the client library for the
 * integration tests (tests/integration/test_client.py): it drives the
 * library the way an application would and prints what happened, one
 * line per operation, so the tests can check offsets, order and routing
 * against real brokers.
 *
 *   client-probe append  ADDR JOURNAL COUNT SIZE [PAUSE_MS]
 *       COUNT one-shot appends (gaz_client_append, retrying) of SIZE-byte
 *       records "<seq>...\n"; prints "ok SEQ BEGIN END PRIMARY" for each
 *       (PRIMARY: the responding header's process suffix) or
 *       "fail SEQ CODE MESSAGE". Exit 1 if any failed.
 *   client-probe read    ADDR JOURNAL OFFSET END
 *       a retrying, blocking reader of [OFFSET, END); the bytes go to
 *       stdout, events to stderr. Exit 1 on error. PROBE_DO_NOT_PROXY=1
 *       makes it a do_not_proxy reader (persisted fragments are fetched
 *       by URL), PROBE_BLOCK=0 non-blocking (ends at the write head with
 *       "tail at OFFSET" on stderr), PROBE_RETRY=0 surfaces the first
 *       error instead of retrying.
 *   client-probe service ADDR JOURNALS THREADS RECORDS SIZE [BUFFER]
 *       THREADS threads each queue RECORDS appends to an AppendService,
 *       record i of thread t going to journal (t + i) % n of the
 *       comma-separated JOURNALS; waits for every handle and prints
 *       "ok T I JOURNAL BEGIN END BATCH_BEGIN" or "fail T I CODE MESSAGE".
 *
 *   client-probe tail    ADDR PREFIX COUNT RECORDS
 *       one thread tails journals PREFIX0 .. PREFIX<COUNT-1> at once with
 *       gaz_reader_try_read (blocking reads from offset 0, sleeping on a
 *       condition variable between wakes) until each holds RECORDS
 *       newline-ended records; prints "ready" once every reader is waiting
 *       at its head, "ok JOURNAL RECORDS" per journal, and "threads MAX",
 *       the most threads the process had while tailing. Exit 1 on error.
 *
 * Environment: PROBE_CACHE (route cache size; "-1" = none), PROBE_ZONE,
 * PROBE_CONNECT_MS, LOG_LEVEL.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "gazette/append_service.h"
#include "gazette/client.h"
#include "rpc/rpc.h"

static int64_t env_int(const char *name, int64_t def)
{
	const char *v = getenv(name);

	return v && *v ? strtoll(v, NULL, 10) : def;
}

static struct gaz_client *client(const char *address)
{
	struct gaz_client_opts o = {.broker_address = address};
	struct gaz_status st = {0};
	struct gaz_client *c;

	o.zone = getenv("PROBE_ZONE");
	o.route_cache_size = env_int("PROBE_CACHE", 0);
	o.connect_timeout_ms = env_int("PROBE_CONNECT_MS", 0);
	if (gaz_client_new(&o, &c, &st)) {
		fprintf(stderr, "client-probe: %s\n", st.msg);
		exit(2);
	}
	return c;
}

/* record fills buf[size] with "<tag>" then '.' padding and a final '\n'. */
static void record(char *buf, size_t size, const char *tag)
{
	size_t n = strlen(tag);

	memset(buf, '.', size);
	memcpy(buf, tag, n < size ? n : size);
	buf[size - 1] = '\n';
}

static int cmd_append(char **argv, int argc)
{
	struct gaz_client *c;
	long count, size, pause_ms;
	int failed = 0;
	char *buf, tag[32];

	if (argc < 4)
		return 2;
	c = client(argv[0]);
	count = atol(argv[2]);
	size = atol(argv[3]);
	pause_ms = argc > 4 ? atol(argv[4]) : 0;
	if (size < 16 || !(buf = malloc((size_t)size)))
		return 2;
	for (long i = 0; i < count; i++) {
		struct gaz_append_opts o = {.journal = argv[1]};
		struct gaz_status st = {0};
		Protocol__AppendResponse *r = NULL;
		struct gaz_append_src src = {.buf = buf, .len = (size_t)size, .fd = -1};
		int rc;

		snprintf(tag, sizeof(tag), "<%08ld>", i);
		record(buf, (size_t)size, tag);
		rc = gaz_client_append(c, &o, &src, &r, &st);
		if (rc == 0)
			printf("ok %ld %lld %lld %s\n", i, (long long)r->commit->begin,
			       (long long)r->commit->end, r->header->process_id->suffix);
		else
			printf("fail %ld %d %s\n", i, rc, st.msg), failed++;
		fflush(stdout);
		if (r)
			protobuf_c_message_free_unpacked(&r->base, NULL);
		if (pause_ms)
			usleep((useconds_t)pause_ms * 1000);
	}
	free(buf);
	gaz_client_free(c);
	return failed ? 1 : 0;
}

static int cmd_read(char **argv, int argc)
{
	struct gaz_read_opts o = {.block = env_int("PROBE_BLOCK", 1) != 0,
				  .retry = env_int("PROBE_RETRY", 1) != 0,
				  .do_not_proxy = env_int("PROBE_DO_NOT_PROXY", 0) != 0};
	struct gaz_status st = {0};
	struct gaz_reader *r;
	struct gaz_client *c;
	char buf[65536];
	int rc = 0;

	if (argc < 4)
		return 2;
	c = client(argv[0]);
	o.journal = argv[1];
	o.offset = atoll(argv[2]);
	o.end_offset = atoll(argv[3]);
	if (gaz_reader_new(c, &o, &r, &st)) {
		fprintf(stderr, "client-probe: %s\n", st.msg);
		return 1;
	}
	while (rc >= 0 && rc != GAZ_EOF) {
		size_t n = 0;

		rc = gaz_reader_read(r, buf, sizeof(buf), &n, &st);
		if (rc == 0 && (fwrite(buf, 1, n, stdout) != n || fflush(stdout)))
			rc = GAZ_EIO;
		else if (rc == GAZ_READ_JUMP)
			fprintf(stderr, "jump to %lld\n", (long long)gaz_reader_offset(r));
		else if (rc == GAZ_READ_TAIL)
			break;
	}
	if (rc == GAZ_READ_TAIL)
		fprintf(stderr, "tail at %lld\n", (long long)gaz_reader_offset(r));
	fflush(stdout);
	if (rc < 0)
		fprintf(stderr, "client-probe: read failed at %lld: %s\n",
			(long long)gaz_reader_offset(r), st.msg);
	gaz_reader_free(r);
	gaz_client_free(c);
	return rc < 0 ? 1 : 0;
}

/* ---- service ----------------------------------------------------------------------- */

struct svc_run {
	struct gaz_append_service *svc;
	char **journals;
	int njournals, thread;
	long records, size;
	struct gaz_append_handle **h;
	int rc;
};

static void *queue_main(void *arg)
{
	struct svc_run *t = arg;
	char *buf = malloc((size_t)t->size), tag[32];

	for (long i = 0; i < t->records; i++) {
		struct gaz_append_opts o = {.journal = t->journals[(t->thread + i) % t->njournals]};
		struct gaz_status st = {0};

		snprintf(tag, sizeof(tag), "t%02d:%06ld|", t->thread, i);
		record(buf, (size_t)t->size, tag);
		if ((t->rc = gaz_append_service_append(t->svc, &o, buf, (size_t)t->size, &t->h[i],
						      &st))) {
			fprintf(stderr, "client-probe: queue t%d #%ld: %s\n", t->thread, i, st.msg);
			break;
		}
	}
	free(buf);
	return NULL;
}

/* report waits for thread t's handles and prints them; returns failures. */
static int report(struct svc_run *t)
{
	int failed = 0;

	for (long i = 0; i < t->records && t->h[i]; i++) {
		struct gaz_append_result res;
		struct gaz_status st = {0};
		int rc = gaz_append_handle_wait(t->h[i], -1, &res, &st);

		if (rc == 0)
			printf("ok %d %ld %s %lld %lld %lld\n", t->thread, i,
			       t->journals[(t->thread + i) % t->njournals], (long long)res.begin,
			       (long long)res.end, (long long)res.batch_begin);
		else
			printf("fail %d %ld %d %s\n", t->thread, i, rc, st.msg), failed++;
		gaz_append_handle_free(t->h[i]);
	}
	return failed + (t->rc != 0);
}

static int cmd_service(char **argv, int argc)
{
	struct gaz_append_service_opts so = {0};
	struct gaz_append_service *svc;
	struct gaz_status st = {0};
	struct gaz_client *c;
	struct svc_run *runs;
	pthread_t *tids;
	char *journals[64], *list;
	int nj = 0, threads, failed = 0;

	if (argc < 5)
		return 2;
	c = client(argv[0]);
	list = strdup(argv[1]);
	for (char *p = strtok(list, ","); p && nj < 64; p = strtok(NULL, ","))
		journals[nj++] = p;
	threads = atoi(argv[2]);
	so.max_buffered_bytes = argc > 5 ? (size_t)atol(argv[5]) : 0;
	if (so.max_buffered_bytes && so.max_buffered_bytes < GAZ_APPEND_SERVICE_BATCH_BYTES)
		so.max_batch_bytes = so.max_buffered_bytes / 2;
	if (gaz_append_service_new(c, &so, &svc, &st)) {
		fprintf(stderr, "client-probe: %s\n", st.msg);
		return 1;
	}
	runs = calloc((size_t)threads, sizeof(*runs));
	tids = calloc((size_t)threads, sizeof(*tids));
	for (int t = 0; t < threads; t++) {
		runs[t] = (struct svc_run){.svc = svc, .journals = journals, .njournals = nj,
					   .thread = t, .records = atol(argv[3]),
					   .size = atol(argv[4])};
		runs[t].h = calloc((size_t)runs[t].records, sizeof(*runs[t].h));
		pthread_create(&tids[t], NULL, queue_main, &runs[t]);
	}
	for (int t = 0; t < threads; t++)
		pthread_join(tids[t], NULL);
	for (int t = 0; t < threads; t++) {
		failed += report(&runs[t]);
		free(runs[t].h);
	}
	gaz_append_service_free(svc);
	gaz_client_free(c);
	free(runs);
	free(tids);
	free(list);
	fflush(stdout);
	return failed ? 1 : 0;
}

struct tail_wakes {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int woken;
};

struct tail {
	struct tail_wakes *tw;
	struct gaz_reader *r;
	struct gaz_reader_wake w;
	bool ready;     /* under tw->mu: its wake came, or never tried */
	int64_t retry_at;
	long lines;
};

static void tail_woken(void *arg)
{
	struct tail *t = arg;

	pthread_mutex_lock(&t->tw->mu);
	t->ready = true;
	t->tw->woken++;
	pthread_cond_signal(&t->tw->cv);
	pthread_mutex_unlock(&t->tw->mu);
}

static int threads_now(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	int n = -1;

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "Threads:", 8))
			n = atoi(line + 8);
	if (f)
		fclose(f);
	return n;
}

static int cmd_tail(char **argv, int argc)
{
	struct tail_wakes tw = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct gaz_status st = {0};
	struct gaz_client *c;
	struct tail *ts;
	long count, records, done = 0;
	int max_threads = 0, rc = 0;
	bool announced = false;

	if (argc < 4)
		return 2;
	pthread_condattr_t ca; /* gaz_abstime_of is on the monotonic clock */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&tw.cv, &ca);
	c = client(argv[0]);
	count = atol(argv[2]);
	records = atol(argv[3]);
	ts = calloc((size_t)count, sizeof(*ts));
	for (long i = 0; i < count; i++) {
		char name[512];
		snprintf(name, sizeof(name), "%s%ld", argv[1], i);
		struct gaz_read_opts o = {.journal = name, .block = true, .retry = true};
		ts[i] = (struct tail){.tw = &tw, .ready = true, .w = {.fn = tail_woken, .arg = &ts[i]}};
		if (gaz_reader_new(c, &o, &ts[i].r, &st)) {
			fprintf(stderr, "client-probe: %s\n", st.msg);
			return 1;
		}
	}
	while (done < count && !rc) {
		int64_t wake_at = GAZ_DEADLINE_NEVER, waiting = 0;
		for (long i = 0; i < count && !rc; i++) {
			struct tail *t = &ts[i];
			bool ready;
			pthread_mutex_lock(&tw.mu);
			ready = t->ready;
			t->ready = false;
			pthread_mutex_unlock(&tw.mu);
			if (t->lines >= records || (!ready && t->retry_at > gaz_mono_ns())) {
				waiting += t->lines < records;
				if (t->lines < records && t->retry_at < wake_at)
					wake_at = t->retry_at;
				continue;
			}
			for (;;) {
				char buf[4096];
				size_t n = 0;
				int r = gaz_reader_try_read(t->r, buf, sizeof(buf), &n, &t->w, &st);
				if (r == GAZ_READ_WAIT) {
					t->retry_at = t->w.at_ns;
					if (t->retry_at < wake_at)
						wake_at = t->retry_at;
					waiting++;
					break;
				}
				if (r == GAZ_READ_META || r == GAZ_READ_JUMP)
					continue;
				if (r) {
					fprintf(stderr, "client-probe: %s: %s\n", gaz_reader_journal(t->r), st.msg);
					rc = 1;
					break;
				}
				for (size_t k = 0; k < n; k++)
					t->lines += buf[k] == '\n';
				if (t->lines >= records) {
					printf("ok %s %ld\n", gaz_reader_journal(t->r), t->lines);
					fflush(stdout);
					done++;
					break;
				}
			}
		}
		int nt = threads_now();
		if (nt > max_threads)
			max_threads = nt;
		if (!announced && waiting == count) {
			printf("ready\n");
			fflush(stdout);
			announced = true;
		}
		pthread_mutex_lock(&tw.mu);
		if (!tw.woken && done < count && !rc) {
			struct timespec at = gaz_abstime_of(wake_at);
			if (wake_at == GAZ_DEADLINE_NEVER)
				pthread_cond_wait(&tw.cv, &tw.mu);
			else
				pthread_cond_timedwait(&tw.cv, &tw.mu, &at);
		}
		tw.woken = 0;
		pthread_mutex_unlock(&tw.mu);
	}
	printf("threads %d\n", max_threads);
	for (long i = 0; i < count; i++)
		gaz_reader_free(ts[i].r);
	free(ts);
	gaz_client_free(c);
	fflush(stdout);
	return rc;
}

int main(int argc, char **argv)
{
	const char *level = getenv("LOG_LEVEL");
	int rc = 2;

	if (gaz_log_setup(level && *level ? level : "warn", "text") || gaz_rpc_init(1))
		return 2;
	if (argc > 1 && !strcmp(argv[1], "append"))
		rc = cmd_append(argv + 2, argc - 2);
	else if (argc > 1 && !strcmp(argv[1], "read"))
		rc = cmd_read(argv + 2, argc - 2);
	else if (argc > 1 && !strcmp(argv[1], "service"))
		rc = cmd_service(argv + 2, argc - 2);
	else if (argc > 1 && !strcmp(argv[1], "tail"))
		rc = cmd_tail(argv + 2, argc - 2);
	if (rc == 2)
		fprintf(stderr, "usage: client-probe append|read|service|tail ... (see client_probe.c)\n");
	gaz_rpc_shutdown();
	return rc;
}
