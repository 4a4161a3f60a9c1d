/*
 * chunker.c - stream-sum's chunker: generates pseudo-random streams as
 * interleaved Chunks, publishes them to the chunk journals, and verifies
 * the final Sum a summer writes for each stream to
 * examples/stream-sum/sums (Gazette's examples/stream-sum/chunker and
 * GenerateAndVerifyStreams, v0.103.0). It runs with Gazette's summer or
 * ours, and beside Gazette's chunker.
 *
 *   stream-sum-chunker run [--chunker.workers 4] [--chunker.streams -1]
 *       [--chunker.chunks 100] [--broker.address URL] ...
 *
 * What a run does, as Gazette's:
 *   1. lists the journals labelled app.gazette.dev/message-type=
 *      stream_sum.Chunk (waiting until there is one): Chunks go to the
 *      modulo of their stream ID over them;
 *   2. writes an empty append (a barrier) to the sums journal; its commit
 *      end is where sums of this run's streams can begin;
 *   3. starts --chunker.workers workers sharing one publisher (one
 *      ProducerID). Each keeps a set of open streams and repeatedly picks
 *      one of them, or a new one while it has streams left to start, and
 *      publishes its next Chunk committed (OUTSIDE_TXN): 32 random bytes,
 *      or for the stream's chunk number chunks+1, no data, which ends it.
 *      After publishing a stream's last Chunk the worker waits for its
 *      Sum before publishing anything else (so sums of one worker arrive
 *      in the order its streams end), warning at each step of Gazette's
 *      schedule (0.1 s ... 35 s) and failing at 40 s;
 *   4. reads the sums journal read-committed from the barrier, with
 *      Gazette's ring of 16 (transactions longer than that are replayed
 *      from the journal) and checks each Sum of a stream a worker is
 *      waiting on: SeqNo and Value (CRC-64 ECMA of the stream's data)
 *      must be what the worker computed.
 *
 * Where this departs from Gazette's, and why:
 *   - One reader of the sums journal serves every worker, where Gazette
 *     opens one per worker: the same bytes once instead of N times, and
 *     a Sum of one of our verified streams seen again (a committed
 *     duplicate, which exactly-once forbids) is recognised and counted
 *     instead of passing unnoticed. Sums of streams this run did not
 *     make (another chunker's) are ignored, as Gazette's workers ignore
 *     each other's.
 *   - The append of a stream's last Chunk is waited for before its Sum:
 *     an append that fails is reported as such, not as a missing sum.
 *   - Failure ends the run with exit 1 after the workers stop, instead of
 *     log.Fatal from whichever goroutine saw it; the first failure is the
 *     one reported.
 *   - No diagnostics HTTP server (Gazette's chunker binds :8080).
 *
 * Output: log lines on stderr (--log.level, --log.format); on stdout one
 * summary line: "stream-sum-chunker: verified N streams, published N
 * chunks; the sums reader dropped N duplicates and skipped N frames;
 * N duplicate sums". Exit 0 when every stream's sum was verified, 1 on a
 * wrong or missing sum or any other failure, 2 for bad usage.
 *
 * Threads: main (flags, set-up, the clock's once-a-second update as
 * Gazette's ticker, shutdown), the workers, and the sums reader. Lock
 * order: pub_mu before mu (a worker holds pub_mu only around publish).
 */
#include <errno.h>
#include <inttypes.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/flags.h"
#include "common/log.h"
#include "examples/stream-sum/stream_sum.h"
#include "gazette/append_service.h"
#include "gazette/client.h"
#include "gazette/message.h"
#include "rpc/rpc.h"

#define PROG "stream-sum-chunker"

/* ---- configuration (Gazette's ChunkerConfig) ------------------------------ */

static struct {
	char *zone;
	int64_t streams, chunks, workers;
	char *broker_address, *auth_keys, *auth_token;
	int64_t cache_size, cache_ttl_ns;
	char *log_level, *log_format;
} cfg;

static const struct gaz_flag flag_table[] = {
	{.name = "chunker.zone", .env = "CHUNKER_ZONE", .def = "local", .ptr = &cfg.zone, .group = "Chunker",
	 .ini_name = "Zone", .help = "Availability zone within which this process is running"},
	{.name = "chunker.streams", .env = "CHUNKER_STREAMS", .type = GAZ_FLAG_INT64, .def = "-1",
	 .ptr = &cfg.streams, .group = "Chunker", .ini_name = "Streams",
	 .help = "Number of streams each worker should create. <0 for infinite"},
	{.name = "chunker.chunks", .env = "CHUNKER_CHUNKS", .type = GAZ_FLAG_INT64, .def = "100",
	 .ptr = &cfg.chunks, .group = "Chunker", .ini_name = "Chunks", .help = "Number of chunks per stream"},
	{.name = "chunker.workers", .env = "CHUNKER_WORKERS", .type = GAZ_FLAG_INT64, .def = "4",
	 .ptr = &cfg.workers, .group = "Chunker", .ini_name = "Workers", .help = "Number of parallel workers"},
	{.name = "broker.address", .env = "BROKER_ADDRESS", .def = "http://localhost:8080",
	 .ptr = &cfg.broker_address, .group = "Broker", .ini_name = "Address", .help = "Service address endpoint"},
	{.name = "broker.auth-keys", .env = "BROKER_AUTH_KEYS", .ptr = &cfg.auth_keys, .group = "Broker",
	 .ini_name = "AuthKeys",
	 .help = "Whitespace or comma separated, base64-encoded keys. The first key is used to sign Authorization tokens."},
	{.name = "broker.auth-token", .env = "BROKER_AUTH_TOKEN", .ptr = &cfg.auth_token, .group = "Broker",
	 .ini_name = "AuthToken", .help = "Bearer token to use for authentication."},
	{.name = "broker.cache.size", .env = "BROKER_CACHE_SIZE", .type = GAZ_FLAG_INT64, .def = "0",
	 .ptr = &cfg.cache_size, .group = "Broker", .ini_name = "Size",
	 .help = "Size of client route cache. If <= zero, no cache is used (server always proxies)"},
	{.name = "broker.cache.ttl", .env = "BROKER_CACHE_TTL", .type = GAZ_FLAG_DURATION, .def = "1m",
	 .ptr = &cfg.cache_ttl_ns, .group = "Broker", .ini_name = "TTL",
	 .help = "Time-to-live of route cache entries."},
	{.name = "log.level", .env = "LOG_LEVEL", .def = "warn", .ptr = &cfg.log_level, .group = "Logging",
	 .ini_name = "Level", .help = "Logging level", .choices = "trace|debug|info|warn|error|fatal"},
	{.name = "log.format", .env = "LOG_FORMAT", .def = "text", .ptr = &cfg.log_format, .group = "Logging",
	 .ini_name = "Format", .help = "Logging output format", .choices = "json|text|color"},
	{0},
};

/* Gazette's verify: warn at each of these delays (ms after the stream's
 * last chunk) but the last, at which the sum is missing. */
static const int64_t SUM_SCHEDULE_MS[] = {100,   250,   500,   1000,  2000,  4000,  6000, 8000,
					  10000, 15000, 20000, 25000, 30000, 35000, 40000};
#define NSCHEDULE (sizeof SUM_SCHEDULE_MS / sizeof SUM_SCHEDULE_MS[0])

/* ---- run state ------------------------------------------------------------ */

/* The stream a worker waits on, between publishing its last chunk and
 * seeing its sum (under chunker.mu). */
struct awaiting {
	bool active;
	bool verified;
	int64_t verified_ns; /* monotonic: when its sum was read */
	struct stream_sum_sum expect;
};

/* Stream IDs verified so far, to recognise a sum seen twice: an open-
 * addressing set keyed by the IDs' first 8 bytes (random), the zero ID
 * marking a free slot. Bounded: past VERIFIED_MAX streams (an endless
 * chunker) later ones are not remembered. Under chunker.mu. */
#define VERIFIED_MAX (1u << 22)
struct id_set {
	uint8_t (*ids)[STREAM_SUM_ID_LEN];
	size_t cap, n;
};

static struct chunker {
	struct gaz_client *client;
	struct gaz_append_service *svc;
	struct gaz_partitions *parts;
	struct gaz_message_type chunk_type, sum_type;
	gaz_clock clock;
	int64_t barrier; /* the sums journal's write head before any chunk */

	pthread_mutex_t pub_mu;
	struct gaz_publisher *pub;

	pthread_mutex_t mu;
	pthread_cond_t cond; /* CLOCK_MONOTONIC: a sum verified, a failure, a worker done */
	struct awaiting *await; /* one per worker */
	struct id_set verified;
	/* Per verified stream: from its last chunk's commit, as this process
	 * saw it, to its sum read back (ns); for the summary's percentiles. */
	int64_t *latency_ns;
	size_t n_latency, cap_latency;
	int workers_done;
	bool failed, stopping;
	char failure[768];

	atomic_uint_fast64_t chunks, streams, dup_sums, foreign_sums;
	uint64_t reader_duplicates, reader_skipped;
} ch = {.pub_mu = PTHREAD_MUTEX_INITIALIZER, .mu = PTHREAD_MUTEX_INITIALIZER};

/* fail records the run's first failure, wakes everyone and cancels the
 * client, so blocked appends and reads return. Any thread. */
__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
	va_list ap;
	pthread_mutex_lock(&ch.mu);
	bool first = !ch.failed;
	if (first) {
		ch.failed = true;
		va_start(ap, fmt);
		vsnprintf(ch.failure, sizeof ch.failure, fmt, ap);
		va_end(ap);
	}
	pthread_cond_broadcast(&ch.cond);
	pthread_mutex_unlock(&ch.mu);
	if (first && ch.client)
		gaz_client_cancel(ch.client);
}

static bool id_is_zero(const uint8_t *id)
{
	static const uint8_t zero[STREAM_SUM_ID_LEN];
	return !memcmp(id, zero, STREAM_SUM_ID_LEN);
}

static bool id_set_has(const struct id_set *s, const uint8_t *id)
{
	if (!s->cap)
		return false;
	uint64_t h;
	memcpy(&h, id, sizeof h); /* IDs are random: their bytes hash */
	for (size_t i = h & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if (id_is_zero(s->ids[i]))
			return false;
		if (!memcmp(s->ids[i], id, STREAM_SUM_ID_LEN))
			return true;
	}
}

static void id_set_put(struct id_set *s, const uint8_t *id)
{
	if (s->n >= VERIFIED_MAX)
		return;
	if (2 * (s->n + 1) > s->cap) {
		struct id_set g = {.cap = s->cap ? 2 * s->cap : 1024};
		if (!(g.ids = calloc(g.cap, sizeof *g.ids)))
			return; /* only duplicate detection suffers */
		for (size_t i = 0; i < s->cap; i++)
			if (!id_is_zero(s->ids[i]))
				id_set_put(&g, s->ids[i]);
		free(s->ids);
		*s = g;
	}
	uint64_t h;
	memcpy(&h, id, sizeof h);
	size_t i = h & (s->cap - 1);
	while (!id_is_zero(s->ids[i]))
		i = (i + 1) & (s->cap - 1);
	memcpy(s->ids[i], id, STREAM_SUM_ID_LEN);
	s->n++;
}

/* ---- the sums reader ------------------------------------------------------ */

/* check_sum matches one committed Sum against the waiting workers. */
static void check_sum(const struct stream_sum_sum *s, const char *journal, int64_t offset)
{
	char hex[2 * STREAM_SUM_ID_LEN + 1];
	pthread_mutex_lock(&ch.mu);
	for (int64_t w = 0; w < cfg.workers; w++) {
		struct awaiting *a = &ch.await[w];
		if (!a->active || a->verified || memcmp(a->expect.id, s->id, STREAM_SUM_ID_LEN))
			continue;
		if (a->expect.seq_no != s->seq_no || a->expect.value != s->value) {
			pthread_mutex_unlock(&ch.mu);
			stream_sum_id_hex(s->id, hex);
			fail("mis-matched sum of stream %s at %s:%lld: SeqNo %lld Value %" PRIu64
			     ", expected SeqNo %lld Value %" PRIu64,
			     hex, journal, (long long)offset, (long long)s->seq_no, s->value,
			     (long long)a->expect.seq_no, a->expect.value);
			return;
		}
		a->verified = true;
		a->verified_ns = gaz_mono_ns();
		id_set_put(&ch.verified, s->id);
		pthread_cond_broadcast(&ch.cond);
		pthread_mutex_unlock(&ch.mu);
		return;
	}
	bool dup = id_set_has(&ch.verified, s->id);
	pthread_mutex_unlock(&ch.mu);
	if (dup) {
		atomic_fetch_add(&ch.dup_sums, 1);
		stream_sum_id_hex(s->id, hex);
		gaz_warn("sum of a verified stream read again", "id=%s journal=%s offset=%lld", hex, journal,
			 (long long)offset);
	} else {
		atomic_fetch_add(&ch.foreign_sums, 1);
	}
}

static void *reader_main(void *arg)
{
	struct gaz_committed_reader *r = arg;
	for (;;) {
		const struct gaz_envelope *env;
		struct gaz_status st = {0};
		int rc = gaz_committed_reader_next(r, &env, &st);
		if (rc) {
			pthread_mutex_lock(&ch.mu);
			bool quiet = ch.stopping || ch.failed;
			pthread_mutex_unlock(&ch.mu);
			if (!quiet)
				fail("reading sums from %s at %lld failed: %s", STREAM_SUM_FINAL_SUMS_JOURNAL,
				     (long long)ch.barrier, st.msg[0] ? st.msg : gaz_err_str(rc));
			break;
		}
		if (gaz_uuid_flags(&env->uuid) == GAZ_FLAG_ACK_TXN)
			continue;
		check_sum(env->msg, env->journal, env->begin);
	}
	ch.reader_duplicates = gaz_committed_reader_duplicates(r);
	ch.reader_skipped = gaz_committed_reader_skipped(r);
	return NULL;
}

/* ---- workers -------------------------------------------------------------- */

/* random_bytes: from OpenSSL's generator (thread-safe); a run cannot go
 * on without it. */
static bool random_bytes(void *p, size_t n)
{
	if (RAND_bytes(p, (int)n) == 1)
		return true;
	fail("no random bytes from OpenSSL");
	return false;
}

static bool stopped(void)
{
	pthread_mutex_lock(&ch.mu);
	bool f = ch.failed;
	pthread_mutex_unlock(&ch.mu);
	return f;
}

/* await_sum waits for worker w's stream (a->expect) to be verified: first
 * for the append of its last chunk (h), then for its sum along Gazette's
 * schedule from t0_ns. Returns whether the run goes on. */
static bool await_sum(int64_t w, struct gaz_append_handle *h, int64_t t0_ns)
{
	struct awaiting *a = &ch.await[w];
	struct stream_sum_chunk key = {0};
	struct gaz_mapped m = {.journal = "?"};
	char hex[2 * STREAM_SUM_ID_LEN + 1];
	memcpy(key.id, a->expect.id, STREAM_SUM_ID_LEN);
	stream_sum_chunk_mapping(&key, ch.parts, &m, NULL);
	stream_sum_id_hex(a->expect.id, hex);

	struct gaz_status st = {0};
	int rc = gaz_append_handle_wait(h, SUM_SCHEDULE_MS[NSCHEDULE - 1], NULL, &st);
	gaz_append_handle_free(h);
	if (rc) {
		if (!stopped())
			fail("appending the last chunk of stream %s to %s failed: %s", hex, m.journal,
			     rc == GAZ_ETIMEDOUT ? "not committed within 40 s" : st.msg);
		return false;
	}
	size_t next = 0;
	int64_t committed_ns = gaz_mono_ns();
	pthread_mutex_lock(&ch.mu);
	while (!a->verified && !ch.failed) {
		int64_t due = t0_ns + SUM_SCHEDULE_MS[next] * GAZ_NS_PER_MS;
		struct timespec ts = gaz_abstime_of(due);
		if (pthread_cond_timedwait(&ch.cond, &ch.mu, &ts) != ETIMEDOUT || gaz_mono_ns() < due)
			continue;
		double delay_s = (double)(gaz_mono_ns() - t0_ns) / 1e9;
		if (++next == NSCHEDULE) {
			pthread_mutex_unlock(&ch.mu);
			fail("timeout waiting for the sum of stream %s (chunks in %s) after %.1f s", hex, m.journal,
			     delay_s);
			pthread_mutex_lock(&ch.mu);
			break;
		}
		pthread_mutex_unlock(&ch.mu);
		gaz_warn("delay waiting for expected sum", "expect=%s journal=%s delay=%.3f", hex, m.journal, delay_s);
		pthread_mutex_lock(&ch.mu);
	}
	bool ok = a->verified && !ch.failed;
	if (ok) {
		if (ch.n_latency == ch.cap_latency) {
			size_t cap = ch.cap_latency ? ch.cap_latency * 2 : 1024;
			int64_t *p = realloc(ch.latency_ns, cap * sizeof *p);
			if (p) {
				ch.latency_ns = p;
				ch.cap_latency = cap;
			}
		}
		/* The sum may be read before this thread saw the commit. */
		if (ch.n_latency < ch.cap_latency)
			ch.latency_ns[ch.n_latency++] = a->verified_ns > committed_ns ? a->verified_ns - committed_ns : 0;
	}
	a->active = a->verified = false;
	pthread_mutex_unlock(&ch.mu);
	if (ok) {
		atomic_fetch_add(&ch.streams, 1);
		gaz_debug("verified stream", "id=%s journal=%s", hex, m.journal);
	}
	return ok;
}

/* publish_chunk publishes c committed through the shared publisher; *h
 * (may be NULL) gets its append. */
static bool publish_chunk(struct stream_sum_chunk *c, struct gaz_append_handle **h)
{
	struct gaz_status st = {0};
	pthread_mutex_lock(&ch.pub_mu);
	int rc = gaz_publish_committed(ch.pub, stream_sum_chunk_mapping, ch.parts, c, h, &st);
	pthread_mutex_unlock(&ch.pub_mu);
	if (rc) {
		if (!stopped())
			fail("publishing a chunk failed: %s", st.msg);
		return false;
	}
	atomic_fetch_add(&ch.chunks, 1);
	return true;
}

/* One worker: Gazette's generate and verify, as one loop. */
static void *worker_main(void *arg)
{
	int64_t w = (int64_t)(intptr_t)arg;
	struct stream_sum_sum *open = NULL; /* open streams, in creation order */
	size_t nopen = 0, cap = 0;
	int64_t left = cfg.streams; /* streams still to start; < 0: no end */

	while (!stopped()) {
		size_t n = nopen + (left != 0);
		if (n == 0)
			break;
		uint8_t rnd[4 + STREAM_SUM_CHUNK_DATA_LEN];
		if (!random_bytes(rnd, sizeof rnd))
			break;
		size_t i = ((uint32_t)rnd[0] | (uint32_t)rnd[1] << 8 | (uint32_t)rnd[2] << 16 |
			    (uint32_t)rnd[3] << 24) % n;
		if (i == nopen) { /* a new stream */
			if (nopen == cap) {
				cap = cap ? 2 * cap : 16;
				struct stream_sum_sum *g = realloc(open, cap * sizeof *g);
				if (!g) {
					fail("out of memory");
					break;
				}
				open = g;
			}
			open[nopen] = (struct stream_sum_sum){0};
			if (!random_bytes(open[nopen].id, STREAM_SUM_ID_LEN))
				break;
			nopen++;
			if (left > 0)
				left--;
		}
		struct stream_sum_chunk c = {.seq_no = open[i].seq_no + 1};
		memcpy(c.id, open[i].id, STREAM_SUM_ID_LEN);
		if (open[i].seq_no < cfg.chunks) {
			c.data = rnd + 4;
			c.data_len = STREAM_SUM_CHUNK_DATA_LEN;
		}
		bool done = false;
		GAZ_BUG_ON(stream_sum_update(&open[i], &c, &done, NULL) != 0);
		if (!done) {
			if (!publish_chunk(&c, NULL))
				break;
			continue;
		}
		/* The last chunk: expect its sum before the chunk can be read. */
		pthread_mutex_lock(&ch.mu);
		ch.await[w] = (struct awaiting){.active = true, .expect = open[i]};
		pthread_mutex_unlock(&ch.mu);
		struct gaz_append_handle *h = NULL;
		int64_t t0 = gaz_mono_ns();
		if (!publish_chunk(&c, &h) || !await_sum(w, h, t0))
			break;
		memmove(open + i, open + i + 1, (nopen - i - 1) * sizeof *open);
		nopen--;
	}
	free(open);
	pthread_mutex_lock(&ch.mu);
	ch.workers_done++;
	pthread_cond_broadcast(&ch.cond);
	pthread_mutex_unlock(&ch.mu);
	return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* print_latency writes the sums' latency percentiles (a second summary
 * line), when any stream was verified. */
static void print_latency(void)
{
	size_t n = ch.n_latency;

	if (!n)
		return;
	qsort(ch.latency_ns, n, sizeof *ch.latency_ns, cmp_i64);
	printf(PROG ": sum latency after the last chunk's commit over %zu streams: p50 %.1f ms, p99 %.1f ms, "
	       "max %.1f ms\n",
	       n, (double)ch.latency_ns[n / 2] / 1e6, (double)ch.latency_ns[n * 99 / 100] / 1e6,
	       (double)ch.latency_ns[n - 1] / 1e6);
	free(ch.latency_ns);
}

/* ---- set-up --------------------------------------------------------------- */

/* setup makes the client, the chunk partitions (waiting for one), the
 * barrier and the publisher. 0, or an error with the reason in st. */
static int setup(struct gaz_status *st)
{
	struct gaz_client_opts co = {
		.broker_address = cfg.broker_address,
		.zone = cfg.zone,
		.auth_keys = cfg.auth_keys,
		.auth_token = cfg.auth_token,
		/* Gazette: a size <= 0 means no route cache. */
		.route_cache_size = cfg.cache_size > 0 ? cfg.cache_size : -1,
		.route_cache_ttl_ms = cfg.cache_ttl_ns > 0 ? cfg.cache_ttl_ns / GAZ_NS_PER_MS : 0,
	};
	int rc;
	if ((rc = gaz_client_new(&co, &ch.client, st)))
		return rc;
	if ((rc = gaz_partitions_new(ch.client, STREAM_SUM_CHUNKS_SELECTOR, 5000, &ch.parts, st))) {
		gaz_status_prefix(st, "building chunks mapping: ");
		return rc;
	}
	for (int64_t i = 0; gaz_partitions_count(ch.parts) == 0; i++) {
		if (i % 25 == 0)
			gaz_info("waiting for chunk partition journals to be created", "selector=%s",
				 STREAM_SUM_CHUNKS_SELECTOR);
		usleep(200 * 1000);
	}
	if ((rc = gaz_append_service_new(ch.client, NULL, &ch.svc, st)))
		return rc;
	/* The barrier: an empty append's commit is the write head of the
	 * sums journal before any chunk of this run is written. */
	struct gaz_append_opts ao = {.journal = STREAM_SUM_FINAL_SUMS_JOURNAL};
	struct gaz_append_handle *h;
	struct gaz_append_result res;
	if ((rc = gaz_append_service_append(ch.svc, &ao, "", 0, &h, st)))
		goto barrier_failed;
	rc = gaz_append_handle_wait(h, -1, &res, st);
	gaz_append_handle_free(h);
	if (rc)
		goto barrier_failed;
	ch.barrier = res.batch_end;
	ch.chunk_type = stream_sum_chunk_type();
	ch.sum_type = stream_sum_sum_type();
	gaz_clock_update_now(&ch.clock);
	struct gaz_publisher_opts po = {.appends = ch.svc, .type = &ch.chunk_type, .clock = &ch.clock};
	return gaz_publisher_new(&po, &ch.pub, st);
barrier_failed:
	gaz_status_prefix(st, "writing barrier to %s: ", STREAM_SUM_FINAL_SUMS_JOURNAL);
	return rc;
}

static int start_reader(pthread_t *t, struct gaz_committed_reader **r, struct gaz_status *st)
{
	struct gaz_message_reader_opts o = {
		.client = ch.client,
		.journal = STREAM_SUM_FINAL_SUMS_JOURNAL,
		.offset = ch.barrier,
		.block = true,
		.type = &ch.sum_type,
		.sequencer = {.ring_size = 16}, /* Gazette's pumpSums */
	};
	int rc = gaz_committed_reader_new(&o, NULL, r, st);
	if (rc)
		return rc;
	if (pthread_create(t, NULL, reader_main, *r)) {
		gaz_committed_reader_free(*r);
		return gaz_status_set(st, GAZ_ENOMEM, "starting the sums reader failed");
	}
	return 0;
}

/* run is Gazette's GenerateAndVerifyStreams: 0 when every stream of every
 * worker was verified, else 1 (the reason logged). */
static int run(void)
{
	struct gaz_status st = {0};
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ch.cond, &ca);
	int64_t nworkers = cfg.workers > 0 ? cfg.workers : 0;
	ch.await = calloc((size_t)nworkers + 1, sizeof *ch.await);
	pthread_t *workers = calloc((size_t)nworkers + 1, sizeof *workers);
	pthread_t reader;
	struct gaz_committed_reader *r = NULL;
	int64_t started = 0;
	bool reading = false;

	if (!ch.await || !workers) {
		fail("out of memory");
		goto out;
	}
	if (setup(&st) || start_reader(&reader, &r, &st)) {
		fail("%s", st.msg);
		goto out;
	}
	reading = true;
	gaz_info("starting chunker", "workers=%lld streams=%lld chunks=%lld barrier=%lld", (long long)cfg.workers,
		 (long long)cfg.streams, (long long)cfg.chunks, (long long)ch.barrier);
	for (; started < nworkers; started++)
		if (pthread_create(&workers[started], NULL, worker_main, (void *)(intptr_t)started)) {
			fail("starting worker %lld failed", (long long)started);
			break;
		}
	/* Gazette's ticker: the shared clock follows the wall once a second
	 * (the publisher ticks it per message in between). */
	pthread_mutex_lock(&ch.mu);
	while (ch.workers_done < started) {
		struct timespec ts = gaz_abstime_of(gaz_deadline_in(1000));
		if (pthread_cond_timedwait(&ch.cond, &ch.mu, &ts) == ETIMEDOUT)
			gaz_clock_update_now(&ch.clock);
	}
	ch.stopping = true;
	pthread_mutex_unlock(&ch.mu);
out:
	for (int64_t i = 0; i < started; i++)
		pthread_join(workers[i], NULL);
	if (ch.client)
		gaz_client_cancel(ch.client); /* ends the reader's blocking read */
	if (reading)
		pthread_join(reader, NULL);
	gaz_committed_reader_free(r);
	gaz_publisher_free(ch.pub);
	gaz_append_service_free(ch.svc);
	gaz_partitions_free(ch.parts);
	gaz_client_free(ch.client);
	free(workers);
	free(ch.await);
	free(ch.verified.ids);
	print_latency();

	printf(PROG ": verified %" PRIuFAST64 " streams, published %" PRIuFAST64
	       " chunks; the sums reader dropped %" PRIu64 " duplicates and skipped %" PRIu64
	       " frames; %" PRIuFAST64 " duplicate sums\n",
	       atomic_load(&ch.streams), atomic_load(&ch.chunks), ch.reader_duplicates, ch.reader_skipped,
	       atomic_load(&ch.dup_sums));
	fflush(stdout);
	if (ch.failed) {
		gaz_log_emit(GAZ_LOG_FATAL, "chunker failed", "err=%s", ch.failure);
		return 1;
	}
	gaz_info("chunker done", "streams=%" PRIuFAST64 " chunks=%" PRIuFAST64 " foreignSums=%" PRIuFAST64,
		 atomic_load(&ch.streams), atomic_load(&ch.chunks), atomic_load(&ch.foreign_sums));
	return 0;
}

/* ---- main ----------------------------------------------------------------- */

static const struct gaz_flags_cmd commands[] = {
	{"print-config", "Print combined configuration and exit"},
	{"run", "Run chunker"},
	{0},
};

static const char run_description[] =
	"run chunker with the provided configuration. chunker will emit streams\n"
	"of pseudo-random stream chunks. Upon completing each stream, it will confirm that\n"
	"the expected sum is read from " STREAM_SUM_FINAL_SUMS_JOURNAL;

/* Picks the command as go-flags does; -1 means exit 2 (after help or an
 * error, printed). */
static int pick_command(int argc, char **argv, int *at)
{
	struct gaz_flags top = {.prog = PROG, .usage = "[OPTIONS] <print-config | run>", .table = flag_table,
				.commands = commands};
	struct gaz_status st = {0};
	int rc = gaz_flags_find_command(&top, argc - 1, argv + 1, at, &st);
	if (rc >= 0 && rc != GAZ_FLAGS_HELP) {
		(*at)++;
		return rc;
	}
	if (rc == GAZ_FLAGS_HELP || rc == GAZ_ENOTFOUND) {
		if (rc == GAZ_ENOTFOUND)
			fprintf(stderr, "%s\n\n", st.msg);
		gaz_flags_print_help(&top, rc == GAZ_FLAGS_HELP ? stdout : stderr);
	} else {
		fprintf(stderr, "%s\n", st.msg);
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct gaz_flags f = {.prog = PROG, .table = flag_table};
	struct gaz_status st = {0};
	char ini[4096];
	int at = 0, cmd, rc;

	signal(SIGPIPE, SIG_IGN);
	if ((cmd = pick_command(argc, argv, &at)) < 0)
		return 2;
	memmove(argv + at, argv + at + 1, (size_t)(argc - at - 1) * sizeof *argv);
	argc--;
	f.usage = cmd == 0 ? "[OPTIONS] print-config" : "[OPTIONS] run";
	f.description = cmd == 0 ? NULL : run_description;
	if (gaz_flags_find_ini("chunker.ini", ini, sizeof ini) == 0)
		f.ini_path = ini;
	rc = gaz_flags_parse(&f, argc - 1, argv + 1, &st);
	if (rc == GAZ_FLAGS_HELP || rc) {
		if (rc != GAZ_FLAGS_HELP)
			fprintf(stderr, "%s\n", st.msg);
		gaz_flags_release(&f);
		return rc == GAZ_FLAGS_HELP ? 0 : 2;
	}
	if (cmd == 0) {
		gaz_flags_print_ini(&f, stdout);
		gaz_flags_release(&f);
		return 0;
	}
	if (gaz_log_setup(cfg.log_level, cfg.log_format) || gaz_rpc_init(1)) {
		fprintf(stderr, PROG ": start-up failed\n");
		gaz_flags_release(&f);
		return 1;
	}
	rc = run();
	gaz_flags_release(&f);
	return rc;
}
