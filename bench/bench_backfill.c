/*
 * bench_backfill.c - `gazbench backfill`: reading a journal's persisted
 * history back from the S3 fragment store (bench/README.md "Backfill").
 *
 *   gazbench backfill --broker URL --prefix NAME --store S3URL --out FILE
 *                     [--broker-pid PID,..] [--mb 1024] [--par 1]
 *                     [--rate 500] [--secs 6] [--codec SNAPPY]
 *                     [--nice N] [--sched-idle]
 *                     [--isolate [--s3-pid PID] [--etcd-pid PID]]
 *                     [--lat-rounds 2]
 *
 * Phases, against one broker:
 *   1. history: Apply journal <prefix>/backfill (the store, the codec,
 *      fragment.length 64 MiB or less for small runs, refresh 1 s); write
 *      --mb MiB with 4 closed-loop 1 MiB appenders, then more 1 MiB appends,
 *      one at a time, until ListFragments shows a persisted run of
 *      fragments from 0 reaching --mb MiB (a spool is persisted once it
 *      rolls, which the next append past fragment.length does); that run
 *      is the history read below. Then wait until the
 *      broker no longer holds any of it locally (a do_not_proxy Read at each
 *      fragment answers with metadata only), so reads below go to the store;
 *   2. raw GET (a): plain libcurl GETs of the fragments' objects through the
 *      signed URLs ListFragments gives, bodies discarded, not decompressed:
 *      the S3 server's own rate, the ceiling of the reads below;
 *   2b. decoder limit: each object fetched into memory (untimed), then
 *      decoded on one thread with the codec the client reader uses
 *      (gaz_decoder_read), timed: the other ceiling of (b);
 *   3. direct (b0, b): the client library reads the history with
 *      do_not_proxy, so it follows fragment_url to the bucket and
 *      decompresses; with --par 1 one reader reads all of it (fragment
 *      after fragment, as a backfill does), first without read-ahead
 *      (b0), then with the library's default read-ahead (b); with more
 *      workers each claims fragments;
 *   4. proxied (c): the fragments read without do_not_proxy: the broker
 *      reads the store and streams the content;
 *   5. appends under backfill (d): open-loop 1 KiB appends at --rate per
 *      second to a second journal, in windows of --secs alternating alone,
 *      during a direct backfill (b's readers looping over the history)
 *      and during a proxied one (c's), two of each; p50/p99 from the
 *      scheduled send time, each condition's windows pooled. --nice N
 *      runs the backfill's reader threads (and the read-ahead threads
 *      they start) at niceness N, --sched-idle in SCHED_IDLE, standing in
 *      for a backfill on another machine (bench/README.md). --isolate
 *      runs the whole phase, windows alone included, with the backfill
 *      readers and the S3 server on one CPU and the brokers, etcd and
 *      the appenders on the others.
 * Phases 2-4 each read every fragment once. Rates count journal
 * (uncompressed) bytes over the phase's wall time, so (a), (b) and (c)
 * compare the same work; (a) also reports the object bytes fetched.
 *
 * The goals reported: direct >= 0.8x min(raw GET, decoder limit) (direct
 * / raw GET is reported too), p99 under backfill <= 1.2x unloaded. Every RPC and fetch has a deadline; every wait is bounded.
 * libcurl is used directly here (a measuring tool, not product code) so
 * that (a) is the plainest client of the S3 server there is.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench/bench.h"
#include "common/clock.h"
#include "fragment/codec.h"
#include "gazette/client.h"

#define BF_APPEND (1u << 20)       /* one history append */
#define BF_APPENDERS 4
#define BF_PAYLOAD (8u << 20)
#define BF_REC 1024                /* one latency append */
#define BF_LAT_WORKERS 16
#define BF_OP_TIMEOUT_MS 10000
#define BF_WAIT_S 600              /* bound on waiting for persistence */
#define BF_READ_BUF (1u << 20)
enum bf_mode { BF_RAW, BF_DIRECT, BF_PROXIED, BF_DIRECT_NO_RA, BF_SPIN };

struct bf_frag {
	int64_t begin, end;
	int64_t obj_bytes;         /* bytes of the object GET (a) fetched */
	char *url;                 /* signed GET URL */
};

struct bf {
	const char *broker, *prefix, *store;
	int pids[8], npids;
	int64_t mb;
	int par, codec;
	int nice;                  /* niceness of the backfill reader threads */
	bool sched_idle;           /* ... or SCHED_IDLE for them */
	bool isolate;              /* phase 5: the backfill on a CPU of its own */
	int s3_pid, etcd_pid;      /* with --isolate: the S3 server, etcd */
	cpu_set_t all_cpus, broker_cpus, backfill_cpus;
	int lat_rounds;            /* alternating windows per condition */
	double rate, secs;
	struct bench_out out;
	struct gaz_rpc_channel *ch;
	struct gaz_client *client;
	uint8_t *payload;
	char journal[256], lat_journal[256];
	int64_t frag_len, history;
	struct bf_frag *frags;
	size_t nfrags;
	/* a phase's shared state */
	atomic_size_t next;
	atomic_long bytes, errors;
	atomic_bool stop;
	int mode;                  /* enum bf_mode */
	bool loop;                 /* workers cycle until stop (phase 5) */
};

static void bf_put(struct bf *b, const char *metric, double v)
{
	char key[96];

	snprintf(key, sizeof(key), "backfill.%s", metric);
	bench_out_put(&b->out, key, v);
}

/* ---- 1. history -------------------------------------------------------- */

struct bf_appender {
	struct bf *b;
	size_t n;                  /* appends in all */
	atomic_size_t *next;
	pthread_t tid;
};

static void *appender_main(void *arg)
{
	struct bf_appender *a = arg;

	for (size_t i; (i = atomic_fetch_add(a->next, 1)) < a->n;) {
		const uint8_t *data = a->b->payload + (i * 4099u * 64u) % (BF_PAYLOAD - BF_APPEND);
		struct bench_append_result res;
		struct gaz_status st = {0};

		if (bench_append_retry(a->b->ch, a->b->journal, data, BF_APPEND,
				       gaz_mono_ns() + 30 * GAZ_NS_PER_S, &res, &st) &&
		    atomic_fetch_add(&a->b->errors, 1) == 0)
			fprintf(stderr, "gazbench: backfill append failed: %s\n", st.msg);
	}
	return NULL;
}

static int write_history(struct bf *b)
{
	struct bf_appender ap[BF_APPENDERS];
	atomic_size_t next = 0;
	size_t n = (size_t)(b->history / BF_APPEND);
	int64_t t0 = gaz_mono_ns(), t1;

	for (int i = 0; i < BF_APPENDERS; i++) {
		ap[i] = (struct bf_appender){.b = b, .n = n, .next = &next};
		pthread_create(&ap[i].tid, NULL, appender_main, &ap[i]);
	}
	for (int i = 0; i < BF_APPENDERS; i++)
		pthread_join(ap[i].tid, NULL);
	t1 = gaz_mono_ns();
	if (atomic_load(&b->errors))
		return GAZ_EIO;
	bf_put(b, "write_mbps", (double)b->history / 1e6 / ((double)(t1 - t0) / 1e9));
	printf("  wrote %lld MB in %.1f s (%.0f MB/s)\n", (long long)(b->history / 1000000),
	       (double)(t1 - t0) / 1e9, (double)b->history / 1e6 / ((double)(t1 - t0) / 1e9));
	return 0;
}

/* Lists the persisted fragments; sets b->frags to the run of them from 0
 * and returns the offset they cover to. */
static int64_t list_persisted(struct bf *b)
{
	struct gaz_fragments_opts o = {.journal = b->journal, .signature_ttl_ns = 3600 * GAZ_NS_PER_S};
	Protocol__FragmentsResponse *resp = NULL;
	struct gaz_status st = {0};
	int64_t covered = 0;

	if (gaz_client_list_fragments(b->client, &o, &resp, &st)) {
		fprintf(stderr, "gazbench: ListFragments: %s\n", st.msg);
		return -1;
	}
	for (size_t i = 0; i < b->nfrags; i++)
		free(b->frags[i].url);
	free(b->frags);
	b->frags = bench_xcalloc(resp->n_fragments + 1, sizeof(*b->frags));
	b->nfrags = 0;
	for (size_t i = 0; i < resp->n_fragments; i++) {
		const Protocol__Fragment *f = resp->fragments[i]->spec;
		const char *url = resp->fragments[i]->signed_url;
		if (!f || !f->backing_store || !f->backing_store[0] || f->begin != covered ||
		    !url || !url[0])
			break;
		b->frags[b->nfrags++] = (struct bf_frag){.begin = f->begin, .end = f->end,
							 .url = strdup(url)};
		covered = f->end;
	}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return covered;
}

/* Whether the broker now serves `off` from the store: a do_not_proxy Read
 * answers a remote fragment with metadata and ends, a local one with
 * content. Returns 1 remote, 0 local, < 0 error. */
static int served_remote(struct bf *b, int64_t off)
{
	Protocol__ReadRequest rq = PROTOCOL__READ_REQUEST__INIT;
	struct gaz_status st = {0};
	struct gaz_rpc_stream *s;
	int remote = -1, rc;

	rq.journal = b->journal;
	rq.offset = off;
	rq.do_not_proxy = true;
	s = gaz_rpc_stream_open(b->ch, "/protocol.Journal/Read",
				gaz_mono_ns() + BF_OP_TIMEOUT_MS * GAZ_NS_PER_MS, true, NULL, &st);
	if (!s || gaz_rpc_stream_send(s, &rq.base) || gaz_rpc_stream_close_send(s)) {
		gaz_rpc_stream_free(s);
		return -1;
	}
	for (int i = 0; i < 2; i++) {
		Protocol__ReadResponse *m = NULL;
		rc = gaz_rpc_stream_recv(s, &protocol__read_response__descriptor,
					 (ProtobufCMessage **)&m, gaz_mono_ns() + BF_OP_TIMEOUT_MS * GAZ_NS_PER_MS);
		if (rc == GAZ_EOF && i == 1) {
			remote = 1;
			break;
		}
		if (rc || m->status != PROTOCOL__STATUS__OK) {
			if (m)
				protobuf_c_message_free_unpacked(&m->base, NULL);
			break;
		}
		if (i == 1)
			remote = m->content.len ? 0 : 1;
		protobuf_c_message_free_unpacked(&m->base, NULL);
	}
	gaz_rpc_stream_cancel(s);
	gaz_rpc_stream_free(s);
	return remote;
}

static int await_persisted(struct bf *b)
{
	int64_t t0 = gaz_mono_ns(), deadline = t0 + BF_WAIT_S * GAZ_NS_PER_S, covered = 0;
	size_t i = 0;

	/* The spool is persisted once rolled, and it rolls when an append finds
	 * it at fragment.length: top it up with more appends until the
	 * persisted run from 0 reaches the history asked for. */
	while ((covered = list_persisted(b)) < b->history) {
		struct bench_append_result res;
		struct gaz_status st = {0};
		if (covered < 0 || gaz_mono_ns() > deadline) {
			fprintf(stderr, "gazbench: backfill: only [0, %lld) of %lld persisted\n",
				(long long)covered, (long long)b->history);
			return GAZ_ETIMEDOUT;
		}
		if (bench_append_retry(b->ch, b->journal, b->payload, BF_APPEND,
				       gaz_mono_ns() + 30 * GAZ_NS_PER_S, &res, &st)) {
			fprintf(stderr, "gazbench: backfill top-up append failed: %s\n", st.msg);
			return GAZ_EIO;
		}
		bench_sleep_until(gaz_mono_ns() + 200 * GAZ_NS_PER_MS);
	}
	b->history = covered;
	printf("  persisted [0, %lld) in %zu fragments, %.1f s after the writes\n", (long long)covered,
	       b->nfrags, (double)(gaz_mono_ns() - t0) / 1e9);
	while (i < b->nfrags) {
		int r = served_remote(b, b->frags[i].begin);
		if (r < 0 || gaz_mono_ns() > deadline) {
			fprintf(stderr, "gazbench: backfill: fragment at %lld is still read locally\n",
				(long long)b->frags[i].begin);
			return GAZ_ETIMEDOUT;
		}
		if (r == 1)
			i++;
		else
			bench_sleep_until(gaz_mono_ns() + 250 * GAZ_NS_PER_MS);
	}
	return 0;
}

/* ---- 2-4. reads ---------------------------------------------------------- */

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	*(int64_t *)arg += (int64_t)(size * n);
	return size * n;
}

static int raw_get(struct bf_frag *f)
{
	CURL *c = curl_easy_init();
	int64_t got = 0;
	long code = 0;
	CURLcode rc;

	if (!c)
		return GAZ_ENOMEM;
	curl_easy_setopt(c, CURLOPT_URL, f->url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	if (rc != CURLE_OK || code != 200) {
		fprintf(stderr, "gazbench: GET fragment [%lld, %lld): %s, HTTP %ld\n",
			(long long)f->begin, (long long)f->end, curl_easy_strerror(rc), code);
		return GAZ_EIO;
	}
	f->obj_bytes = got;
	return 0;
}

/* ---- the decompressor's limit -------------------------------------------- */

static size_t to_sink(char *p, size_t size, size_t n, void *arg)
{
	struct gaz_status st = {0};

	return gaz_mem_sink_write(arg, p, size * n, &st) ? 0 : size * n;
}

/* GETs fragment f's object into `obj` (emptied first). */
static int fetch_object(const struct bf_frag *f, struct gaz_mem_sink *obj)
{
	CURL *c = curl_easy_init();
	long code = 0;
	CURLcode rc;

	if (!c)
		return GAZ_ENOMEM;
	obj->len = 0;
	curl_easy_setopt(c, CURLOPT_URL, f->url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, to_sink);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, obj);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	return rc == CURLE_OK && code == 200 ? 0 : GAZ_EIO;
}

/* Decodes `obj` with the codec the client reader uses (lib/fragment
 * codec.c through gaz_decoder_read, into a buffer of the size
 * client_read's caller passes); returns the journal bytes or < 0. */
static int64_t decode_object(int codec, const struct gaz_mem_sink *obj, uint8_t *buf)
{
	struct gaz_mem_src src = {.data = obj->data, .len = obj->len};
	struct gaz_status st = {0};
	struct gaz_decoder *dec = NULL;
	int64_t total = 0;
	size_t n = 0;
	int rc;

	if (gaz_decoder_new(codec, gaz_mem_src_read, &src, &dec, &st))
		return -1;
	while ((rc = gaz_decoder_read(dec, buf, BF_READ_BUF, &n, &st)) == 0)
		total += (int64_t)n;
	gaz_decoder_free(dec);
	return rc == GAZ_EOF ? total : -1;
}

/* The decompressor's limit: each fragment's object is fetched into memory
 * (not timed), then decoded on this one thread (timed); returns journal
 * MB/s of decoding alone, or -1. */
static double decode_phase(struct bf *b)
{
	struct gaz_mem_sink obj = {.max = 1u << 30};
	uint8_t *buf = bench_xmalloc(BF_READ_BUF);
	int64_t dec_ns = 0, bytes = 0;
	double mbps = -1;
	size_t i;

	for (i = 0; i < b->nfrags; i++) {
		const struct bf_frag *f = &b->frags[i];
		int64_t t0, got;
		if (fetch_object(f, &obj))
			break;
		t0 = gaz_mono_ns();
		got = decode_object(b->codec, &obj, buf);
		dec_ns += gaz_mono_ns() - t0;
		if (got != f->end - f->begin)
			break;
		bytes += got;
	}
	if (i == b->nfrags && dec_ns > 0)
		mbps = (double)bytes / 1e6 / ((double)dec_ns / 1e9);
	else
		fprintf(stderr, "gazbench: decoding fragment %zu of %zu failed\n", i, b->nfrags);
	gaz_mem_sink_release(&obj);
	free(buf);
	bf_put(b, "decode_mbps", mbps);
	printf("  %-24s %8.1f MB/s (journal bytes), one thread, %.2f s of decoding\n",
	       "decompressor alone", mbps, (double)dec_ns / 1e9);
	return mbps;
}

/* Reads [begin, end) through the client library: direct (do_not_proxy,
 * with the default read-ahead or none) or proxied. */
static int client_read(struct bf *b, int64_t begin, int64_t end, int mode, uint8_t *buf)
{
	struct gaz_read_opts o = {.journal = b->journal, .offset = begin, .end_offset = end,
				  .do_not_proxy = mode != BF_PROXIED, .retry = true,
				  .read_ahead_bytes = mode == BF_DIRECT_NO_RA ? -1 : 0};
	struct gaz_status st = {0};
	struct gaz_reader *r = NULL;
	int64_t got = 0;
	int rc;

	if ((rc = gaz_reader_new(b->client, &o, &r, &st)) == 0) {
		for (;;) {
			size_t n = 0;
			rc = gaz_reader_read(r, buf, BF_READ_BUF, &n, &st);
			if (rc == 0) {
				got += (int64_t)n;
				atomic_fetch_add(&b->bytes, (long)n);
			} else if (rc != GAZ_READ_META) {
				break;
			}
			if (atomic_load(&b->stop))
				break;
		}
	}
	gaz_reader_free(r);
	if (rc == GAZ_EOF && got == end - begin)
		return 0;
	if (atomic_load(&b->stop))
		return 0;
	fprintf(stderr, "gazbench: %s read [%lld, %lld) ended after %lld B: %s (%d)\n",
		mode == BF_PROXIED ? "proxied" : "direct", (long long)begin, (long long)end,
		(long long)got, st.msg, rc);
	return GAZ_EIO;
}

/* One unit of a read worker's work: fragment i, or with one direct
 * reader the whole history through one reader (the client's own pace,
 * fragment after fragment, with its read-ahead). */
static int read_one(struct bf *b, size_t i, uint8_t *buf)
{
	const struct bf_frag *f = &b->frags[i];
	int rc;

	if (b->mode == BF_RAW) {
		if ((rc = raw_get(&b->frags[i])) == 0)
			atomic_fetch_add(&b->bytes, (long)(f->end - f->begin));
		return rc;
	}
	if (b->mode != BF_PROXIED && b->par == 1)
		return client_read(b, 0, b->history, b->mode, buf);
	return client_read(b, f->begin, f->end, b->mode, buf);
}

static void *read_worker(void *arg)
{
	struct bf *b = arg;
	uint8_t *buf = b->mode != BF_RAW ? bench_xmalloc(BF_READ_BUF) : NULL;
	size_t units = b->mode != BF_RAW && b->mode != BF_PROXIED && b->par == 1 ? 1 : b->nfrags;

	/* Threads the reader starts (its read-ahead) inherit this. */
	if (b->nice && setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), b->nice))
		perror("gazbench: setpriority");
	if (b->sched_idle) {
		struct sched_param sp = {0};
		if (sched_setscheduler((pid_t)syscall(SYS_gettid), SCHED_IDLE, &sp))
			perror("gazbench: sched_setscheduler SCHED_IDLE");
	}
	if (b->loop && b->isolate && sched_setaffinity(0, sizeof(b->backfill_cpus), &b->backfill_cpus))
		perror("gazbench: sched_setaffinity");
	if (b->mode == BF_SPIN) { /* the control: a busy CPU, no I/O, little memory */
		for (volatile uint64_t x = 0; !atomic_load_explicit(&b->stop, memory_order_relaxed);)
			for (int i = 0; i < 1 << 16; i++)
				x = x * 6364136223846793005u + 1;
		return NULL;
	}
	while (!atomic_load(&b->stop)) {
		size_t i = atomic_fetch_add(&b->next, 1);
		if (i >= units) {
			if (!b->loop)
				break;
			i %= units;
		}
		if (read_one(b, i, buf))
			atomic_fetch_add(&b->errors, 1);
	}
	free(buf);
	return NULL;
}

static void start_readers(struct bf *b, int mode, bool loop, pthread_t *tids)
{
	b->mode = mode;
	b->loop = loop;
	atomic_store(&b->next, 0);
	atomic_store(&b->bytes, 0);
	atomic_store(&b->errors, 0);
	atomic_store(&b->stop, false);
	for (int i = 0; i < b->par; i++)
		pthread_create(&tids[i], NULL, read_worker, b);
}

static void join_readers(struct bf *b, pthread_t *tids)
{
	for (int i = 0; i < b->par; i++)
		pthread_join(tids[i], NULL);
}

/* One read phase over the whole history; returns journal MB/s or -1. */
static double read_phase(struct bf *b, int mode, const char *key)
{
	static const char *const what[] = {"raw GET of the objects", "direct (fragment URLs)",
					   "proxied by the broker", "direct, no read-ahead"};
	pthread_t *tids = bench_xcalloc((size_t)b->par, sizeof(*tids));
	struct bench_cpu c0, c1;
	double secs, mbps;
	char k[64];

	bench_cpu_take(&c0, b->pids, b->npids);
	start_readers(b, mode, false, tids);
	join_readers(b, tids);
	bench_cpu_take(&c1, b->pids, b->npids);
	free(tids);
	secs = (double)(c1.wall_ns - c0.wall_ns) / 1e9;
	mbps = atomic_load(&b->errors) ? -1 : (double)atomic_load(&b->bytes) / 1e6 / secs;
	snprintf(k, sizeof(k), "%s_mbps", key);
	bf_put(b, k, mbps);
	snprintf(k, sizeof(k), "%s_broker_cpu", key);
	bf_put(b, k, bench_cpu_cores(&c0, &c1, true));
	snprintf(k, sizeof(k), "%s_client_cpu", key);
	bf_put(b, k, bench_cpu_cores(&c0, &c1, false));
	printf("  %-24s %8.1f MB/s (journal bytes) in %.2f s; cores: broker %.2f, gazbench %.2f;"
	       " errors %ld\n", what[mode], mbps, secs, bench_cpu_cores(&c0, &c1, true),
	       bench_cpu_cores(&c0, &c1, false), (long)atomic_load(&b->errors));
	if (mode == BF_RAW) {
		int64_t obj = 0;
		for (size_t i = 0; i < b->nfrags; i++)
			obj += b->frags[i].obj_bytes;
		bf_put(b, "raw_get_obj_mbps", mbps < 0 ? -1 : (double)obj / 1e6 / secs);
		bf_put(b, "stored_mb", (double)obj / 1e6);
		printf("  %-24s %8.1f MB/s of objects (%lld MB stored)\n", "", (double)obj / 1e6 / secs,
		       (long long)(obj / 1000000));
	}
	return mbps;
}

/* ---- 5. append latency with and without a backfill ------------------------ */

struct bf_lat {
	struct bf *b;
	size_t total;
	int64_t t0_ns, period_ns;
	atomic_size_t next;
	int64_t *lat;              /* per append, -1 = failed */
};

static void *lat_worker(void *arg)
{
	struct bf_lat *L = arg;
	uint8_t rec[BF_REC];

	memcpy(rec, L->b->payload, BF_REC);
	for (size_t i; (i = atomic_fetch_add(&L->next, 1)) < L->total;) {
		int64_t due = L->t0_ns + (int64_t)i * L->period_ns;
		struct bench_append_result res;
		struct gaz_status st = {0};

		bench_sleep_until(due);
		L->lat[i] = bench_append(L->b->ch, L->b->lat_journal, rec, BF_REC, BF_REC,
					 gaz_mono_ns() + BF_OP_TIMEOUT_MS * GAZ_NS_PER_MS, &res, &st)
				    ? -1
				    : res.acked_ns - due;
	}
	return NULL;
}

/* Runs the open loop once, adding each append's latency to `s`; returns
 * the number that failed. */
static size_t lat_run(struct bf *b, struct bench_samples *s)
{
	struct bf_lat L = {.b = b, .total = (size_t)(b->rate * b->secs),
			   .period_ns = (int64_t)(1e9 / b->rate)};
	pthread_t w[BF_LAT_WORKERS];
	size_t failed = 0;

	L.lat = bench_xcalloc(L.total, sizeof(*L.lat));
	L.t0_ns = gaz_mono_ns() + 100 * GAZ_NS_PER_MS;
	for (int i = 0; i < BF_LAT_WORKERS; i++)
		pthread_create(&w[i], NULL, lat_worker, &L);
	for (int i = 0; i < BF_LAT_WORKERS; i++)
		pthread_join(w[i], NULL);
	for (size_t i = 0; i < L.total; i++) {
		if (L.lat[i] < 0)
			failed++;
		else
			bench_samples_add(s, L.lat[i]);
	}
	free(L.lat);
	return failed;
}

/* Stores the pooled p50/p99 (us) of `s` under `key`; returns p99 us, or
 * -1 if appends failed. */
static double lat_report(struct bf *b, const char *key, const char *what,
			 struct bench_samples *s, size_t failed)
{
	double p50 = (double)bench_samples_pct(s, 0.5) / 1e3, p99 = (double)bench_samples_pct(s, 0.99) / 1e3;
	char k[64];

	snprintf(k, sizeof(k), "%s_p50_us", key);
	bf_put(b, k, p50);
	snprintf(k, sizeof(k), "%s_p99_us", key);
	bf_put(b, k, p99);
	snprintf(k, sizeof(k), "%s_errors", key);
	bf_put(b, k, (double)failed);
	printf("  %-22s %zu appends of 1 KiB at %.0f/s: p50 %.0f us, p99 %.0f us, errors %zu\n", what,
	       s->n, b->rate, p50, p99, failed);
	return failed ? -1 : p99;
}

/* ---- --isolate: the backfill on a CPU of its own ---------------------------- */

/* Sets the CPU affinity of every thread of process `pid`; threads created
 * later inherit their creator's. Two passes, so that a thread started
 * during the first by a thread not yet moved is moved by the second.
 * Returns the number of threads whose affinity could not be set. */
static int pin_process(int pid, const cpu_set_t *set)
{
	int failed = 0;

	for (int pass = 0; pass < 2; pass++) {
		char path[64];
		struct dirent *e;
		DIR *d;

		snprintf(path, sizeof(path), "/proc/%d/task", pid);
		if (!(d = opendir(path)))
			return 1;
		failed = 0;
		while ((e = readdir(d)))
			if (e->d_name[0] != '.' &&
			    sched_setaffinity((pid_t)atoi(e->d_name), sizeof(*set), set))
				failed++;
		closedir(d);
	}
	return failed;
}

/* pin_all gives gazbench, the brokers and etcd the CPUs `brokers`, the S3
 * server `backfill`; returns the threads that kept theirs. */
static int pin_all(struct bf *b, const cpu_set_t *brokers, const cpu_set_t *backfill)
{
	int failed = pin_process(getpid(), brokers);

	for (int i = 0; i < b->npids; i++)
		failed += pin_process(b->pids[i], brokers);
	if (b->etcd_pid)
		failed += pin_process(b->etcd_pid, brokers);
	if (b->s3_pid)
		failed += pin_process(b->s3_pid, backfill);
	return failed;
}

/* Splits the CPUs gazbench may use: the last for the backfill (its reader
 * threads, which pin themselves, and the S3 server), the others for the
 * brokers, etcd and the rest of gazbench (the appenders, gRPC's threads),
 * standing in for a backfill run from another machine against a bucket
 * served elsewhere. Returns 0, or GAZ_EINVAL with fewer than two CPUs. */
static int isolate_start(struct bf *b)
{
	int last = -1, failed;

	if (sched_getaffinity(0, sizeof(b->all_cpus), &b->all_cpus) || CPU_COUNT(&b->all_cpus) < 2) {
		fprintf(stderr, "gazbench: --isolate needs two CPUs or more\n");
		return GAZ_EINVAL;
	}
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &b->all_cpus))
			last = c;
	b->broker_cpus = b->all_cpus;
	CPU_CLR(last, &b->broker_cpus);
	CPU_ZERO(&b->backfill_cpus);
	CPU_SET(last, &b->backfill_cpus);
	if ((failed = pin_all(b, &b->broker_cpus, &b->backfill_cpus)))
		fprintf(stderr, "gazbench: --isolate: %d thread(s) kept their CPUs\n", failed);
	printf("  isolated: backfill readers%s on CPU %d; brokers, etcd, appenders on the others\n",
	       b->s3_pid ? " and the S3 server" : "", last);
	return 0;
}

/* Gives every process isolate_start pinned all of gazbench's CPUs again. */
static void isolate_end(struct bf *b)
{
	pin_all(b, &b->all_cpus, &b->all_cpus);
}

/* ---- where the broker's threads spend a window ------------------------------ */

#define BF_TGROUPS 12

/* CPU time and run-queue wait (schedstat: ns on a CPU, ns runnable but
 * waiting for one) summed per thread name over the brokers' threads. */
struct bf_tstat {
	int n;
	struct {
		char name[20];
		int64_t run_ns, wait_ns;
	} g[BF_TGROUPS];
};

static void tstat_add(struct bf_tstat *ts, const char *name, int64_t run, int64_t wait)
{
	int i;

	for (i = 0; i < ts->n && strcmp(ts->g[i].name, name); i++)
		;
	if (i == ts->n) {
		if (ts->n == BF_TGROUPS)
			i = BF_TGROUPS - 1; /* the last group takes the rest */
		else
			snprintf(ts->g[ts->n++].name, sizeof(ts->g[0].name), "%s", name);
	}
	ts->g[i].run_ns += run;
	ts->g[i].wait_ns += wait;
}

static void tstat_take(struct bf_tstat *ts, const int *pids, int npids)
{
	memset(ts, 0, sizeof(*ts));
	for (int p = 0; p < npids; p++) {
		char path[64], name[32] = "?";
		struct dirent *e;
		DIR *d;

		snprintf(path, sizeof(path), "/proc/%d/task", pids[p]);
		if (!(d = opendir(path)))
			continue;
		while ((e = readdir(d))) {
			long long run = 0, wait = 0;
			FILE *f;
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "/proc/%d/task/%.16s/comm", pids[p], e->d_name);
			if ((f = fopen(path, "r"))) {
				if (fgets(name, sizeof(name), f))
					name[strcspn(name, "\n")] = '\0';
				fclose(f);
			}
			snprintf(path, sizeof(path), "/proc/%d/task/%.16s/schedstat", pids[p], e->d_name);
			if ((f = fopen(path, "r"))) {
				if (fscanf(f, "%lld %lld", &run, &wait) == 2)
					tstat_add(ts, name, run, wait);
				fclose(f);
			}
		}
		closedir(d);
	}
}

/* tstat_diff adds after - before (per name) into acc. Threads that ended
 * within the window are missing from `after`: their time is not counted. */
static void tstat_diff(struct bf_tstat *acc, const struct bf_tstat *before,
		       const struct bf_tstat *after)
{
	for (int i = 0; i < after->n; i++) {
		int64_t run = after->g[i].run_ns, wait = after->g[i].wait_ns;
		for (int j = 0; j < before->n; j++)
			if (!strcmp(before->g[j].name, after->g[i].name)) {
				run -= before->g[j].run_ns;
				wait -= before->g[j].wait_ns;
			}
		tstat_add(acc, after->g[i].name, run > 0 ? run : 0, wait > 0 ? wait : 0);
	}
}

/* One condition of phase 5: its key, its backfill (BF_RAW: none), its
 * pooled samples. */
struct bf_cond {
	const char *key, *what;
	int mode;
	struct bench_samples s;
	size_t failed;
	int64_t bf_ns, win_ns;
	long bf_bytes;
	struct bf_tstat ts;        /* the brokers' threads over the windows */
};

/* lat_window runs one open-loop window under condition c. */
static void lat_window(struct bf *b, struct bf_cond *c, pthread_t *tids)
{
	struct bf_tstat t0s, t1s;
	int64_t t0;

	if (c->mode != BF_RAW) {
		start_readers(b, c->mode, true, tids);
		bench_sleep_until(gaz_mono_ns() + 500 * GAZ_NS_PER_MS); /* the backfill is under way */
	}
	tstat_take(&t0s, b->pids, b->npids);
	t0 = gaz_mono_ns();
	atomic_store(&b->bytes, 0);
	c->failed += lat_run(b, &c->s);
	c->bf_bytes += atomic_load(&b->bytes);
	c->win_ns += gaz_mono_ns() - t0;
	c->bf_ns += gaz_mono_ns() - t0;
	tstat_take(&t1s, b->pids, b->npids);
	tstat_diff(&c->ts, &t0s, &t1s);
	if (c->mode == BF_RAW)
		return;
	atomic_store(&b->stop, true);
	join_readers(b, tids);
}

/* Alternates windows alone, during a direct backfill (the product's path:
 * the brokers only answer with fragment URLs) and during a proxied one,
 * --lat-rounds of each, so that the machine's drift (other jobs) falls on
 * all; the percentiles pool each condition's samples. With --isolate a
 * fourth condition is the control: the backfill's CPU kept busy by a
 * spinning thread, which shows what any busy neighbour CPU costs the
 * appends on this machine (a VM's vCPUs share their host's cores). */
static int lat_phases(struct bf *b)
{
	struct bf_cond c[4] = {{"lat", "alone:", BF_RAW},
			       {"lat_bfd", "during direct backfill:", BF_DIRECT},
			       {"lat_bf", "during proxied backfill:", BF_PROXIED},
			       {"lat_spin", "beside a busy CPU:", BF_SPIN}};
	int nc = b->isolate ? 4 : 3;
	pthread_t *tids = bench_xcalloc((size_t)b->par, sizeof(*tids));
	size_t cap = (size_t)(b->rate * b->secs) * (size_t)b->lat_rounds;
	double p99[4] = {0};
	char k[64];
	int rc = 0;

	printf("appends, %d windows of %.0f s each alone, during a direct and during a proxied\n"
	       "backfill%s (%d reader(s), niceness %d%s%s):\n", b->lat_rounds, b->secs,
	       b->isolate ? " and beside a busy CPU" : "", b->par, b->nice,
	       b->sched_idle ? ", SCHED_IDLE" : "", b->isolate ? ", isolated" : "");
	if (b->isolate && isolate_start(b)) {
		free(tids);
		return GAZ_EINVAL;
	}
	for (int i = 0; i < nc; i++)
		bench_samples_init(&c[i].s, cap);
	for (int r = 0; r < b->lat_rounds; r++)
		for (int i = 0; i < nc; i++)
			lat_window(b, &c[i], tids);
	free(tids);
	if (b->isolate)
		isolate_end(b);
	for (int i = 0; i < nc; i++) {
		p99[i] = lat_report(b, c[i].key, c[i].what, &c[i].s, c[i].failed);
		bench_samples_release(&c[i].s);
		if (p99[i] <= 0)
			rc = GAZ_EIO;
	}
	bf_put(b, "nice", b->nice);
	bf_put(b, "sched_idle", b->sched_idle);
	bf_put(b, "isolated", b->isolate);
	for (int i = 1; i < nc; i++) {
		double mbps = c[i].bf_ns ? (double)c[i].bf_bytes / 1e6 / ((double)c[i].bf_ns / 1e9) : 0;
		snprintf(k, sizeof(k), "%s_read_mbps", c[i].key);
		bf_put(b, k, mbps);
		if (c[i].mode == BF_SPIN)
			printf("  %-26s (control)", c[i].what);
		else
			printf("  %-26s backfill meanwhile %.1f MB/s", c[i].what, mbps);
		if (p99[0] > 0 && p99[i] > 0) {
			snprintf(k, sizeof(k), "%s_p99_pct_of_alone", c[i].key);
			bf_put(b, k, 100 * p99[i] / p99[0]);
			printf("; p99 / alone %.2fx", p99[i] / p99[0]);
			if (c[i].mode != BF_SPIN)
				printf(" (goal <= 1.2x: %s)", p99[i] / p99[0] <= 1.2 ? "met" : "MISSED");
		}
		if (c[i].mode != BF_SPIN && nc == 4 && p99[3] > 0 && p99[i] > 0) {
			snprintf(k, sizeof(k), "%s_p99_pct_of_spin", c[i].key);
			bf_put(b, k, 100 * p99[i] / p99[3]);
			printf("; / beside a busy CPU %.2fx", p99[i] / p99[3]);
		}
		printf("\n");
	}
	for (int i = 0; i < nc; i++) {
		double secs = (double)c[i].win_ns / 1e9, run = 0, wait = 0;
		printf("  broker threads %-26s (cores on CPU / cores waiting for one):", c[i].what);
		for (int g = 0; g < c[i].ts.n; g++) {
			run += (double)c[i].ts.g[g].run_ns / 1e9 / secs;
			wait += (double)c[i].ts.g[g].wait_ns / 1e9 / secs;
			printf(" %s %.2f/%.3f", c[i].ts.g[g].name, (double)c[i].ts.g[g].run_ns / 1e9 / secs,
			       (double)c[i].ts.g[g].wait_ns / 1e9 / secs);
		}
		printf("; all %.2f/%.3f\n", run, wait);
		snprintf(k, sizeof(k), "%s_broker_rq_wait_cores", c[i].key);
		bf_put(b, k, wait);
	}
	return rc;
}

/* ---- command line ---------------------------------------------------------- */

static int parse(struct bf *b, int argc, char **argv, const char **out)
{
	static const struct option opts[] = {
		{"broker", required_argument, NULL, 'b'}, {"prefix", required_argument, NULL, 'p'},
		{"store", required_argument, NULL, 'S'},  {"out", required_argument, NULL, 'o'},
		{"broker-pid", required_argument, NULL, 'P'}, {"mb", required_argument, NULL, 'm'},
		{"par", required_argument, NULL, 'n'},    {"rate", required_argument, NULL, 'r'},
		{"secs", required_argument, NULL, 's'},   {"codec", required_argument, NULL, 'c'},
		{"nice", required_argument, NULL, 'N'},   {"sched-idle", no_argument, NULL, 'I'},
		{"isolate", no_argument, NULL, 'i'},      {"s3-pid", required_argument, NULL, '3'},
		{"etcd-pid", required_argument, NULL, 'e'}, {"lat-rounds", required_argument, NULL, 'R'},
		{NULL, 0, NULL, 0}};
	const ProtobufCEnumValue *ev;
	int c;

	optind = 1;
	*b = (struct bf){.mb = 1024, .par = 1, .rate = 500, .secs = 6,
			 .codec = PROTOCOL__COMPRESSION_CODEC__SNAPPY, .lat_rounds = 2};
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'b': b->broker = optarg; break;
		case 'p': b->prefix = optarg; break;
		case 'S': b->store = optarg; break;
		case 'o': *out = optarg; break;
		case 'P':
			for (char *p = optarg, *e; *p && b->npids < 8; p = *e ? e + 1 : e) {
				b->pids[b->npids++] = (int)strtol(p, &e, 10);
				if (e == p)
					return GAZ_EINVAL;
			}
			break;
		case 'm': b->mb = atoll(optarg); break;
		case 'n': b->par = atoi(optarg); break;
		case 'r': b->rate = atof(optarg); break;
		case 's': b->secs = atof(optarg); break;
		case 'N': b->nice = atoi(optarg); break;
		case 'I': b->sched_idle = true; break;
		case 'i': b->isolate = true; break;
		case '3': b->s3_pid = atoi(optarg); break;
		case 'e': b->etcd_pid = atoi(optarg); break;
		case 'R': b->lat_rounds = atoi(optarg); break;
		case 'c':
			if (!(ev = protobuf_c_enum_descriptor_get_value_by_name(
				      &protocol__compression_codec__descriptor, optarg)) || ev->value == 0)
				return GAZ_EINVAL;
			b->codec = ev->value;
			break;
		default: return GAZ_EINVAL;
		}
	}
	if (!b->broker || !b->prefix || !b->store || b->mb < 4 || b->mb > (1 << 20) || b->par < 1 ||
	    b->par > 64 || b->rate <= 0 || b->rate > 5000 || b->secs <= 0 || b->secs > 60 ||
	    b->nice < 0 || b->nice > 19 || b->s3_pid < 0 || b->etcd_pid < 0 ||
	    b->lat_rounds < 1 || b->lat_rounds > 20)
		return GAZ_EINVAL;
	/* fragment.length up to 64 MiB, at least 4 fragments */
	b->frag_len = (b->mb >= 256 ? 64 : b->mb / 4) * (int64_t)BF_APPEND;
	b->history = b->mb * (int64_t)BF_APPEND;
	return 0;
}

static int setup(struct bf *b)
{
	struct gaz_client_opts co = {.broker_address = b->broker, .route_cache_size = -1};
	struct bench_spec specs[2];
	struct gaz_status st = {0};

	snprintf(b->journal, sizeof(b->journal), "%s/backfill", b->prefix);
	snprintf(b->lat_journal, sizeof(b->lat_journal), "%s/backfill-lat", b->prefix);
	specs[0] = (struct bench_spec){.name = b->journal, .fragment_len = b->frag_len,
				       .store = b->store, .codec = b->codec, .refresh_s = 1};
	specs[1] = (struct bench_spec){.name = b->lat_journal, .fragment_len = 128 << 20,
				       .store = b->store};
	if (gaz_client_new(&co, &b->client, &st) || bench_apply(b->ch, specs, 2, &st)) {
		fprintf(stderr, "gazbench: backfill setup: %s\n", st.msg);
		return GAZ_EIO;
	}
	return 0;
}

static void teardown(struct bf *b)
{
	const char *names[2] = {b->journal, b->lat_journal};
	struct gaz_status st = {0};

	if (b->journal[0] && bench_delete(b->ch, names, 2, &st))
		fprintf(stderr, "gazbench: deleting the backfill journals: %s\n", st.msg);
	for (size_t i = 0; i < b->nfrags; i++)
		free(b->frags[i].url);
	free(b->frags);
	gaz_client_free(b->client);
}

static int run(struct bf *b)
{
	double raw, direct, decode;
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("backfill: %lld MiB of history in %lld MiB %s fragments, %d reader(s)\n",
	       (long long)(b->history >> 20), (long long)(b->frag_len >> 20),
	       protobuf_c_enum_descriptor_get_value(&protocol__compression_codec__descriptor, b->codec)->name,
	       b->par);
	bf_put(b, "readers", b->par);
	if ((rc = setup(b)) || (rc = write_history(b)) || (rc = await_persisted(b)))
		return rc;
	bf_put(b, "history_mb", (double)b->history / 1e6);
	raw = read_phase(b, BF_RAW, "raw_get");
	decode = decode_phase(b);
	read_phase(b, BF_DIRECT_NO_RA, "direct_no_ra");
	direct = read_phase(b, BF_DIRECT, "direct");
	read_phase(b, BF_PROXIED, "proxied");
	if (raw > 0 && direct > 0) {
		bf_put(b, "direct_vs_raw", direct / raw);
		bf_put(b, "direct_pct_of_raw", 100 * direct / raw);
		printf("  direct / raw GET: %.2fx\n", direct / raw);
	}
	if (raw > 0 && decode > 0 && direct > 0) {
		/* The goal's bound is the lower of the two ceilings: the S3
		 * server's rate or one thread's decoding rate. */
		double bound = raw < decode ? raw : decode;
		bf_put(b, "direct_vs_bound", direct / bound);
		bf_put(b, "direct_pct_of_bound", 100 * direct / bound);
		printf("  direct / min(raw GET, decoder) = direct / %s: %.2fx (goal >= 0.8x: %s)\n",
		       raw < decode ? "raw GET" : "decoder", direct / bound,
		       direct / bound >= 0.8 ? "met" : "MISSED");
	}
	return lat_phases(b);
}

int bench_backfill_main(int argc, char **argv)
{
	struct bf b;
	const char *out = NULL;
	int rc;

	if (parse(&b, argc, argv, &out)) {
		fprintf(stderr, "usage: gazbench backfill --broker URL --prefix NAME --store S3URL --out FILE\n"
				"         [--broker-pid PID,..] [--mb 1024] [--par 1] [--rate 500] [--secs 6]\n"
				"         [--codec SNAPPY] [--nice 0] [--sched-idle]\n"
				"         [--isolate [--s3-pid PID] [--etcd-pid PID]] [--lat-rounds 2]\n");
		return 2;
	}
	if (out && !(b.out.f = fopen(out, "w"))) {
		perror(out);
		return 1;
	}
	b.payload = bench_xmalloc(BF_PAYLOAD);
	bench_gen_payload(b.payload, BF_PAYLOAD);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (gaz_rpc_init(1) || !(b.ch = gaz_rpc_channel_new(b.broker, NULL))) {
		fprintf(stderr, "gazbench: cannot open a channel to %s\n", b.broker);
		return 1;
	}
	rc = run(&b);
	teardown(&b);
	gaz_rpc_channel_free(b.ch);
	gaz_rpc_shutdown();
	curl_global_cleanup();
	if (b.out.f)
		fclose(b.out.f);
	free(b.payload);
	return rc ? 1 : 0;
}
