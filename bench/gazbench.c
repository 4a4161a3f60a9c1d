/*
 * gazbench.c - the load generator of `make bench`: the same append and read
 * workloads against any Gazette-protocol broker (ours or Gazette's), one
 * result file per run, and the side-by-side report (bench/README.md).
 *
 *   gazbench run --broker URL --prefix bench/x --out FILE [--broker-pid PID,..]
 *                [--secs 4] [--warmup 1] [--only KEY,KEY] [--chunk BYTES]
 *                [--replication N] [--tls-ca FILE] [--verbose]   (echo every metric written to FILE)
 *   gazbench report NAME_A FILE[,FILE..] NAME_B FILE[,FILE..] [--no-goals]
 *   gazbench backfill ...   (bench_backfill.c: reads of persisted history)
 *
 * Workloads (perf.md Part C, sized for a 2-core machine, RF=1):
 *   append_<size>_j<J>  closed loop: A appenders, each one Append RPC after
 *                       the other, spread over J journals; committed MB/s
 *                       (10^6 B) counted by ack time inside the window
 *   lat_1k_<rate>       open loop: 1 KiB appends on a fixed schedule; latency
 *                       from the scheduled send time (queueing behind a
 *                       stall counts); a blocking reader follows the journal
 *                       and times delivery of each record
 *   read_spool_r<R>     R readers each re-read a 64 MiB journal held in its
 *                       live spool (fragment 128 MiB), MB/s summed
 *   rf3_tput_<size>     (only with --replication > 1, with rf3_<size>) the
 *                       closed loop of append_<size>_j1, sent to the
 *                       journal's primary
 *   rf3_<size>          (only with --replication > 1) open loop at a fixed
 *                       rate, appends of 1 MiB / 64 KiB / 1 KiB sent to the
 *                       journal's primary; p50/p99 latency from the
 *                       scheduled send time
 *   fanout_1k, fanout_10k  1,000 (10,000) blocking readers at the head of
 *                       one journal while 1 KiB records are appended at a
 *                       fixed rate: append p99 against the same schedule
 *                       with no reader, records missed, the broker's RSS
 *                       per reader, CPU per delivery, threads
 *   idle_5k, idle_10k   5,000 (10,000) journals made ready, then left
 *                       alone: the broker's CPU cores over 62 s (one
 *                       health-pulse period of every journal) and its
 *                       RSS growth per journal (run last); idle_30k the
 *                       same with 30,000, only when BENCH_ONLY names it
 *
 * Invariants: every RPC has a deadline; every phase ends by its wall-clock
 * bound; every journal a run creates is named under --prefix and deleted
 * at the end (best effort). Nothing here retries silently: errors are
 * counted and reported per workload.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "bench/bench.h"
#include "common/clock.h"
#include "common/log.h"

#define PAYLOAD_LEN (8u << 20)    /* generated JSONL the appends slice */
#define FRAGMENT_LEN (128 << 20)  /* fragment.length of every journal */
#define READ_LEN (64 << 20)       /* pre-written bytes of the read journal */
#define REC_LEN 1024              /* one record of the latency workloads */
#define OP_TIMEOUT_MS 10000       /* deadline of each RPC */
#define MAX_SAMPLES (1u << 20)    /* bound of each latency sample array */
#define MAX_JOURNALS 16

struct run {
	const char *broker;       /* endpoint URL, borrowed from argv */
	const char *prefix;       /* journal name prefix */
	int broker_pids[8];       /* for CPU accounting (summed) */
	int npids;                /* 0 = unknown */
	int replication;          /* of every journal; > 1 runs the rf workloads */
	double secs, warmup_s;    /* measured window and warm-up per workload */
	size_t chunk;             /* content bytes per Append message */
	int loop_threads;         /* threads driving the closed-loop appenders
	                           * (bench_loops.c), or 0 for a blocked thread
	                           * per appender (also used when --chunk splits
	                           * an append's content) */
	const char *only;         /* comma list of workload keys, or NULL */
	struct gaz_rpc_channel *ch;
	struct bench_out out;
	uint8_t *payload;         /* PAYLOAD_LEN bytes */
	char *journals[4 * MAX_JOURNALS]; /* every journal created, to delete */
	size_t n_journals;
	bool fatal;               /* Apply failed: the broker is unusable */
};

/* ---- helpers -------------------------------------------------------------- */

/* bench_sleep_until sleeps to a monotonic deadline (absolute, so no drift). */
void bench_sleep_until(int64_t t_ns)
{
	struct timespec ts = {.tv_sec = t_ns / GAZ_NS_PER_S, .tv_nsec = t_ns % GAZ_NS_PER_S};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
		;
}

/* bench_gen_payload fills buf with deterministic JSON lines (xorshift, fixed
 * seed) of ~200 B, like perf.md's genjson. */
void bench_gen_payload(uint8_t *buf, size_t len)
{
	static const char *kinds[] = {"view", "click", "purchase", "signup"};
	uint64_t x = 0x9E3779B97F4A7C15u;
	size_t off = 0;
	char line[320];

	while (off < len) {
		int n;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		n = snprintf(line, sizeof(line),
			     "{\"id\":\"%016llx\",\"ts\":%llu,\"kind\":\"%s\",\"user\":%u,"
			     "\"score\":%.3f,\"ua\":\"Mozilla/5.0 (X11; Linux x86_64)\","
			     "\"flags\":{\"a\":%s,\"b\":%u}}\n",
			     (unsigned long long)x, (unsigned long long)(x >> 20) % 2000000000ull,
			     kinds[x % 4], (unsigned)(x >> 40) % 100000,
			     (double)(x % 100000) / 1000.0, (x & 1) ? "true" : "false",
			     (unsigned)(x >> 50) % 64);
		if (n > (int)(len - off))
			n = (int)(len - off);
		memcpy(buf + off, line, (size_t)n);
		off += (size_t)n;
	}
}

/* selected: whether workload `key` runs under --only. */
static bool selected(const struct run *r, const char *key)
{
	size_t k = strlen(key);

	for (const char *p = r->only; p && *p;) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (n == k && strncmp(p, key, n) == 0)
			return true;
		p = e ? e + 1 : NULL;
	}
	return r->only == NULL;
}

/* put writes "<key>.<metric> value". */
static void put(struct run *r, const char *key, const char *metric, double v)
{
	char k[128];

	snprintf(k, sizeof(k), "%s.%s", key, metric);
	bench_out_put(&r->out, k, v);
}

/* put_lat writes p50/p99/p99.9/max of `s` in microseconds. */
static void put_lat(struct run *r, const char *key, const char *what, struct bench_samples *s)
{
	static const struct {
		const char *name;
		double q;
	} qs[] = {{"p50_us", 0.5}, {"p99_us", 0.99}, {"p999_us", 0.999}, {"max_us", 1.0}};
	char m[64];

	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		snprintf(m, sizeof(m), "%s%s", what, qs[i].name);
		put(r, key, m, (double)bench_samples_pct(s, qs[i].q) / 1e3);
	}
}

/* make_journals applies `n` journals named <prefix>/<key>-<i> and waits
 * (retrying appends of nothing) until each accepts appends; first[i] (if
 * first is non-NULL) gets that empty append's result: the write head and
 * the primary's endpoint. names[0..n) are set in every
 * case (malloc'd: free with free_names) and copied to r->journals for the
 * final delete. Returns 0 or a GAZ_E* code. */
static int make_journals(struct run *r, const char *key, size_t n, char **names,
			 struct bench_append_result *first)
{
	struct bench_spec specs[MAX_JOURNALS] = {{0}};
	struct gaz_status st = {0};
	int rc;

	GAZ_BUG_ON(n > MAX_JOURNALS);
	for (size_t i = 0; i < n; i++) {
		names[i] = bench_xmalloc(strlen(r->prefix) + strlen(key) + 16);
		sprintf(names[i], "%s/%s-%zu", r->prefix, key, i);
		specs[i] = (struct bench_spec){.name = names[i], .fragment_len = FRAGMENT_LEN,
					       .replication = r->replication};
		if (r->n_journals < sizeof(r->journals) / sizeof(r->journals[0]))
			r->journals[r->n_journals++] = strcpy(bench_xmalloc(strlen(names[i]) + 1),
							      names[i]);
	}
	if ((rc = bench_apply(r->ch, specs, n, &st))) {
		fprintf(stderr, "gazbench: apply of %s journals failed: %s\n", key, st.msg);
		r->fatal = true;
		return rc;
	}
	for (size_t i = 0; i < n; i++) {
		struct bench_append_result res;

		rc = bench_append_retry(r->ch, names[i], NULL, 0, gaz_deadline_in(30000), &res,
					&st);
		if (rc) {
			fprintf(stderr, "gazbench: journal not ready: %s\n", st.msg);
			return rc;
		}
		if (first)
			first[i] = res;
	}
	return 0;
}

/* free_names frees `n` names from make_journals. */
static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
}

/* ---- closed-loop append throughput ----------------------------------------- */

struct tput_def {
	const char *key;
	size_t size;      /* bytes per append */
	int appenders;    /* concurrent appenders (threads) */
	int journals;     /* spread round-robin over this many journals */
};

static const struct tput_def tput_defs[] = {
	{"append_1m_j1", 1 << 20, 4, 1},
	{"append_64k_j1", 64 << 10, 4, 1},
	{"append_1k_j1", 1 << 10, 32, 1},
	{"append_64k_j4", 64 << 10, 8, 4},
};

/* The same closed loops at replication > 1, straight to the primary. */
static const struct tput_def rf_tput_defs[] = {
	{"rf3_tput_1m", 1 << 20, 4, 1},
	{"rf3_tput_64k", 64 << 10, 4, 1},
	{"rf3_tput_1k", 1 << 10, 32, 1},
};

struct appender {
	pthread_t tid;
	struct run *r;
	struct gaz_rpc_channel *ch;  /* to the broker, or to the primary */
	const struct tput_def *d;
	int64_t start_ns, end_ns;    /* the measured window */
	struct bench_loop *o;        /* journal, payload offset, counts */
};

/* appender_main appends back to back until the window ends; counts what
 * is acknowledged inside the window (--loop-threads 0: a thread per
 * appender, each waiting for its own RPCs). */
static void *appender_main(void *arg)
{
	struct appender *a = arg;
	struct bench_loop *o = a->o;
	size_t span = PAYLOAD_LEN - a->d->size;

	for (int64_t t; (t = gaz_mono_ns()) < a->end_ns;) {
		struct bench_append_result res;
		struct gaz_status st = {0};
		int rc = bench_append(a->ch, o->journal, a->r->payload + o->off, a->d->size,
				      a->r->chunk, t + OP_TIMEOUT_MS * GAZ_NS_PER_MS, &res, &st);
		int64_t done = res.acked_ns ? res.acked_ns : gaz_mono_ns();

		o->off = (o->off + a->d->size * 13) % span;
		if (rc) {
			if (o->errors++ == 0)
				snprintf(o->first_err, sizeof(o->first_err), "%s", st.msg);
			if (rc == GAZ_EUNAVAIL)
				nanosleep(&(struct timespec){.tv_nsec = 10 * GAZ_NS_PER_MS}, NULL);
			continue;
		}
		if (done >= a->start_ns && done <= a->end_ns) {
			o->bytes += (int64_t)a->d->size;
			o->appends++;
			bench_samples_add(o->lat, done - t);
		}
	}
	return NULL;
}

/* tput_report merges the appenders' counts and writes the metrics. */
static void tput_report(struct run *r, const struct tput_def *d, struct bench_loop *lp,
			const struct bench_cpu *c0, const struct bench_cpu *c1)
{
	struct bench_samples lat;
	int64_t bytes = 0, appends = 0, errors = 0;
	double secs = (double)(c1->wall_ns - c0->wall_ns) / 1e9;

	bench_samples_init(&lat, 1);
	for (int i = 0; i < d->appenders; i++) {
		bytes += lp[i].bytes;
		appends += lp[i].appends;
		errors += lp[i].errors;
		bench_samples_merge(&lat, lp[i].lat);
		if (lp[i].errors && lp[i].first_err[0])
			fprintf(stderr, "gazbench: %s: %lld errors, first: %s\n", d->key,
				(long long)lp[i].errors, lp[i].first_err);
	}
	put(r, d->key, "mbps", (double)bytes / 1e6 / secs);
	put(r, d->key, "appends_s", (double)appends / secs);
	put(r, d->key, "p50_us", (double)bench_samples_pct(&lat, 0.5) / 1e3);
	put(r, d->key, "p99_us", (double)bench_samples_pct(&lat, 0.99) / 1e3);
	put(r, d->key, "broker_cpu", bench_cpu_cores(c0, c1, true));
	put(r, d->key, "client_cpu", bench_cpu_cores(c0, c1, false));
	put(r, d->key, "errors", (double)errors);
	printf("  %.1f MB/s, %.0f appends/s, p50 %.2f ms, p99 %.2f ms; cores: broker %.2f, "
	       "gazbench %.2f; errors %lld\n", (double)bytes / 1e6 / secs, (double)appends / secs,
	       (double)bench_samples_pct(&lat, 0.5) / 1e6, (double)bench_samples_pct(&lat, 0.99) / 1e6,
	       bench_cpu_cores(c0, c1, true), bench_cpu_cores(c0, c1, false), (long long)errors);
	bench_samples_release(&lat);
}

/* One bench_loops_run in a thread of its own. */
struct loops_arg {
	const char *target;
	struct run *r;
	const struct tput_def *d;
	struct bench_loop *lp;
	int64_t start_ns, end_ns;
	int rc;
};

static void *loops_main(void *arg)
{
	struct loops_arg *la = arg;

	la->rc = bench_loops_run(la->target, la->r->payload, PAYLOAD_LEN, la->d->size, la->lp,
				 la->d->appenders, la->r->loop_threads, la->start_ns, la->end_ns);
	return NULL;
}

/* run_tput runs one closed-loop throughput workload. */
static int run_tput(struct run *r, const struct tput_def *d)
{
	struct appender *ap = bench_xcalloc((size_t)d->appenders, sizeof(*ap));
	struct bench_loop *lp = bench_xcalloc((size_t)d->appenders, sizeof(*lp));
	struct bench_samples *lat = bench_xcalloc((size_t)d->appenders, sizeof(*lat));
	char *names[MAX_JOURNALS];
	struct bench_append_result first[MAX_JOURNALS];
	struct gaz_rpc_channel *ch = r->ch, *direct = NULL;
	const char *target = r->broker;
	struct bench_cpu c0, c1;
	int64_t start_ns, end_ns;
	size_t span = PAYLOAD_LEN - d->size;
	bool loops = r->loop_threads > 0 && d->size <= r->chunk;
	struct loops_arg la;
	pthread_t loops_tid;
	int rc;

	printf("%s: %zu B appends, %d appenders, %d journal(s), %.0f s + %.1f s warm-up\n",
	       d->key, d->size, d->appenders, d->journals, r->secs, r->warmup_s);
	if ((rc = make_journals(r, d->key, (size_t)d->journals, names, first)))
		goto out;
	/* At replication > 1, straight to the primary (no proxy hop). */
	if (r->replication > 1 && d->journals == 1 && first[0].primary[0] &&
	    (direct = bench_channel(first[0].primary))) {
		ch = direct;
		target = first[0].primary;
		printf("  appending to the primary at %s\n", first[0].primary);
	}
	for (int i = 0; i < d->appenders; i++) {
		bench_samples_init(&lat[i], MAX_SAMPLES / (size_t)d->appenders);
		lp[i] = (struct bench_loop){.journal = names[i % d->journals], .lat = &lat[i],
					    .off = ((size_t)i * 7919u * 4096u) % span};
	}
	start_ns = gaz_mono_ns() + (int64_t)(r->warmup_s * 1e9);
	end_ns = start_ns + (int64_t)(r->secs * 1e9);
	/* The loops run on driver threads (bench_loops.c) or on a thread
	 * each, beside this one, which samples CPU over the window. */
	if (loops) {
		la = (struct loops_arg){.target = target, .r = r, .d = d, .lp = lp,
					.start_ns = start_ns, .end_ns = end_ns};
		pthread_create(&loops_tid, NULL, loops_main, &la);
	} else {
		for (int i = 0; i < d->appenders; i++) {
			ap[i] = (struct appender){.r = r, .ch = ch, .d = d, .o = &lp[i],
						  .start_ns = start_ns, .end_ns = end_ns};
			pthread_create(&ap[i].tid, NULL, appender_main, &ap[i]);
		}
	}
	bench_sleep_until(start_ns);
	bench_cpu_take(&c0, r->broker_pids, r->npids);
	bench_sleep_until(end_ns);
	bench_cpu_take(&c1, r->broker_pids, r->npids);
	if (loops) {
		pthread_join(loops_tid, NULL);
		if (la.rc)
			fprintf(stderr, "gazbench: %s: cannot drive appenders to %s\n", d->key, target);
	} else {
		for (int i = 0; i < d->appenders; i++)
			pthread_join(ap[i].tid, NULL);
	}
	tput_report(r, d, lp, &c0, &c1);
	for (int i = 0; i < d->appenders; i++)
		bench_samples_release(&lat[i]);
out:
	gaz_rpc_channel_free(direct);
	free_names(names, (size_t)d->journals);
	free(ap);
	free(lp);
	free(lat);
	return rc;
}

/* ---- open-loop append latency, with a tail reader ---------------------------- */

struct lat_def {
	const char *key;
	int rate;       /* appends per second, on a fixed schedule */
	double secs;    /* length of the schedule */
	size_t size;    /* bytes per append */
	bool tail;      /* a tail reader times delivery (REC_LEN records only) */
};

static const struct lat_def lat_defs[] = {
	{"lat_1k_500", 500, 6, REC_LEN, true},
	{"lat_1k_1000", 1000, 4, REC_LEN, true},
	{"lat_1k_2000", 2000, 3, REC_LEN, true},
};

/* Replication 3 (run with --replication 3): open-loop appends of each size
 * at a fixed offered rate, sent to the journal's primary as a client with
 * a route cache does; the append latency is the figure. Rates are sized so
 * that three brokers, etcd and gazbench share 2 cores without saturating. */
static const struct lat_def rf_defs[] = {
	{"rf3_1m", 16, 6, 1 << 20, false},
	{"rf3_64k", 100, 6, 64 << 10, false},
	{"rf3_1k", 500, 6, REC_LEN, false},
};

#define LAT_WORKERS 32  /* senders; more than rate x latency ever needs */

struct lat_run {
	struct run *r;
	struct gaz_rpc_channel *ch; /* where appends go */
	size_t size;               /* bytes per append */
	const char *journal;
	int64_t t0_ns, period_ns;  /* append i is due at t0 + i * period */
	size_t total;
	atomic_size_t next;        /* next append index to send */
	int64_t *ack_lat;          /* [i]: ack - due, or -1 if it failed */
	int64_t *lag;              /* [i]: send start - due (client lateness) */
	int64_t *deliver_ns;       /* [i]: when the tail reader got it, or 0 */
	size_t skip;               /* the first `skip` appends are warm-up */
	atomic_long errors;
};

/* fill_record writes record `seq`: a JSON line of exactly REC_LEN bytes
 * whose first bytes name its sequence number, so that the tail reader can
 * tell which append each record of the journal came from. */
static void fill_record(uint8_t *rec, const uint8_t *payload, size_t seq)
{
	int n = snprintf((char *)rec, REC_LEN, "{\"seq\":%010zu,\"pad\":\"", seq);

	for (size_t i = (size_t)n; i < REC_LEN - 3; i++) {
		uint8_t c = payload[(seq * 131 + i) % PAYLOAD_LEN];

		rec[i] = c == '"' || c == '\n' || c == '\\' ? '_' : c;
	}
	memcpy(rec + REC_LEN - 3, "\"}\n", 3);
}

/* lat_worker sends the appends it claims, each at its due time. */
static void *lat_worker(void *arg)
{
	struct lat_run *L = arg;
	uint8_t rec[REC_LEN];

	for (size_t i; (i = atomic_fetch_add(&L->next, 1)) < L->total;) {
		int64_t due = L->t0_ns + (int64_t)i * L->period_ns, t;
		const uint8_t *data = rec;
		struct bench_append_result res;
		struct gaz_status st = {0};
		int rc;

		if (L->size == REC_LEN)
			fill_record(rec, L->r->payload, i);
		else /* a slice of the payload: no copy of large appends */
			data = L->r->payload + (i * 4099u * 64u) % (PAYLOAD_LEN - L->size);
		bench_sleep_until(due);
		t = gaz_mono_ns();
		rc = bench_append(L->ch, L->journal, data, L->size,
				  L->size < L->r->chunk ? L->size : L->r->chunk,
				  t + OP_TIMEOUT_MS * GAZ_NS_PER_MS, &res, &st);
		L->lag[i] = t - due;
		L->ack_lat[i] = rc ? -1 : res.acked_ns - due;
		if (rc && atomic_fetch_add(&L->errors, 1) == 0)
			fprintf(stderr, "gazbench: latency append failed: %s\n", st.msg);
	}
	return NULL;
}

struct tail {
	struct lat_run *L;
	int64_t next_off;         /* journal offset of the next byte expected */
	uint8_t rec[REC_LEN];     /* the record being assembled */
	size_t fill, got;
};

/* tail_record notes the delivery of one complete record. */
static void tail_record(struct tail *t, int64_t now_ns)
{
	char *end;
	unsigned long long seq;

	t->fill = 0;
	if (memcmp(t->rec, "{\"seq\":", 7) != 0)
		return;
	seq = strtoull((char *)t->rec + 7, &end, 10);
	if (end != (char *)t->rec + 17 || seq >= t->L->total || t->L->deliver_ns[seq])
		return;
	t->L->deliver_ns[seq] = now_ns;
	t->got++;
}

/* tail_fn assembles records from read chunks (bench_read_fn). */
static bool tail_fn(void *arg, int64_t off, const uint8_t *data, size_t len, int64_t now_ns)
{
	struct tail *t = arg;

	if (off < t->next_off) { /* a re-sent overlap: skip what we have */
		size_t skip = (size_t)(t->next_off - off) < len ? (size_t)(t->next_off - off) : len;

		data += skip, len -= skip, off += (int64_t)skip;
	}
	t->next_off = off + (int64_t)len;
	while (len > 0) {
		size_t n = REC_LEN - t->fill < len ? REC_LEN - t->fill : len;

		memcpy(t->rec + t->fill, data, n);
		t->fill += n, data += n, len -= n;
		if (t->fill == REC_LEN)
			tail_record(t, now_ns);
	}
	return t->got < t->L->total;
}

struct tail_thread {
	pthread_t tid;
	struct tail t;
	struct gaz_rpc_channel *ch;
	int64_t deadline_ns;
	int rc;
	struct gaz_status st;
};

/* tail_main follows the journal from its head until every record came. */
static void *tail_main(void *arg)
{
	struct tail_thread *tt = arg;
	int64_t got;

	tt->rc = bench_read(tt->ch, tt->t.L->journal, tt->t.next_off, 0, true, tt->deadline_ns,
			    tail_fn, &tt->t, &got, &tt->st);
	return NULL;
}

/* lat_report turns the per-append arrays into the workload's metrics. */
static void lat_report(struct run *r, const struct lat_def *d, struct lat_run *L,
		       const struct bench_cpu *c0, const struct bench_cpu *c1)
{
	struct bench_samples ack, lag, del;
	int64_t first_due = L->t0_ns + (int64_t)L->skip * L->period_ns, last_ack = first_due;

	bench_samples_init(&ack, L->total);
	bench_samples_init(&lag, L->total);
	bench_samples_init(&del, L->total);
	for (size_t i = L->skip; i < L->total; i++) {
		int64_t due = L->t0_ns + (int64_t)i * L->period_ns;

		bench_samples_add(&lag, L->lag[i]);
		if (L->ack_lat[i] >= 0) {
			bench_samples_add(&ack, L->ack_lat[i]);
			if (due + L->ack_lat[i] > last_ack)
				last_ack = due + L->ack_lat[i];
		}
		if (L->deliver_ns[i])
			bench_samples_add(&del, L->deliver_ns[i] - due);
	}
	put_lat(r, d->key, "", &ack);
	put(r, d->key, "rate_done", (double)ack.n / ((double)(last_ack - first_due) / 1e9));
	put(r, d->key, "send_lag_p99_us", (double)bench_samples_pct(&lag, 0.99) / 1e3);
	if (d->tail) {
		put(r, d->key, "read_p50_us", (double)bench_samples_pct(&del, 0.5) / 1e3);
		put(r, d->key, "read_p99_us", (double)bench_samples_pct(&del, 0.99) / 1e3);
		put(r, d->key, "read_missing", (double)(L->total - L->skip - del.n));
	}
	put(r, d->key, "broker_cpu", bench_cpu_cores(c0, c1, true));
	put(r, d->key, "client_cpu", bench_cpu_cores(c0, c1, false));
	put(r, d->key, "errors", (double)atomic_load(&L->errors));
	printf("  %zu appends: p50 %.0f us, p99 %.0f us, p99.9 %.0f us", ack.n,
	       (double)bench_samples_pct(&ack, 0.5) / 1e3, (double)bench_samples_pct(&ack, 0.99) / 1e3,
	       (double)bench_samples_pct(&ack, 0.999) / 1e3);
	if (d->tail)
		printf("; tail read p50 %.0f us, p99 %.0f us", (double)bench_samples_pct(&del, 0.5) / 1e3,
		       (double)bench_samples_pct(&del, 0.99) / 1e3);
	printf("; cores: broker %.2f, gazbench %.2f; errors %ld\n", bench_cpu_cores(c0, c1, true),
	       bench_cpu_cores(c0, c1, false), (long)atomic_load(&L->errors));
	bench_samples_release(&ack);
	bench_samples_release(&lag);
	bench_samples_release(&del);
}

/* lat_drive starts the senders and the tail reader, waits for both. */
static void lat_drive(struct run *r, const struct lat_def *d, struct lat_run *L, int64_t head)
{
	pthread_t w[LAT_WORKERS];
	struct tail_thread tt = {.t = {.L = L, .next_off = head}};
	struct bench_cpu c0, c1;
	int64_t end_ns = L->t0_ns + (int64_t)L->total * L->period_ns;

	tt.ch = d->tail ? bench_channel(r->broker) : NULL;
	/* The last append may take up to its own deadline to commit. */
	tt.deadline_ns = end_ns + OP_TIMEOUT_MS * GAZ_NS_PER_MS;
	if (tt.ch)
		pthread_create(&tt.tid, NULL, tail_main, &tt);
	for (int i = 0; i < LAT_WORKERS; i++)
		pthread_create(&w[i], NULL, lat_worker, L);
	bench_sleep_until(L->t0_ns + (int64_t)L->skip * L->period_ns);
	bench_cpu_take(&c0, r->broker_pids, r->npids);
	bench_sleep_until(end_ns);
	bench_cpu_take(&c1, r->broker_pids, r->npids);
	for (int i = 0; i < LAT_WORKERS; i++)
		pthread_join(w[i], NULL);
	if (tt.ch) {
		pthread_join(tt.tid, NULL);
		if (tt.rc)
			fprintf(stderr, "gazbench: %s: tail reader: %s (%s)\n", d->key,
				gaz_err_str(tt.rc), tt.st.msg);
		gaz_rpc_channel_free(tt.ch);
	}
	lat_report(r, d, L, &c0, &c1);
}

/* run_lat runs one open-loop latency workload. */
static int run_lat(struct run *r, const struct lat_def *d)
{
	struct lat_run L = {.r = r, .period_ns = GAZ_NS_PER_S / d->rate, .size = d->size,
			    .ch = r->ch};
	struct bench_append_result first[1];
	struct gaz_rpc_channel *direct = NULL;
	char *names[1];
	int rc;

	printf("%s: %zu B appends at %d/s open loop, %.0f s + %.1f s warm-up, %d senders%s\n",
	       d->key, d->size, d->rate, d->secs, r->warmup_s, LAT_WORKERS,
	       d->tail ? ", 1 tail reader" : "");
	if ((rc = make_journals(r, d->key, 1, names, first)) == 0) {
		/* At replication > 1, straight to the primary (no proxy hop). */
		if (r->replication > 1 && first[0].primary[0] &&
		    (direct = bench_channel(first[0].primary))) {
			L.ch = direct;
			printf("  appending to the primary at %s\n", first[0].primary);
		}
		L.journal = names[0];
		L.skip = (size_t)(d->rate * r->warmup_s);
		L.total = L.skip + (size_t)(d->rate * d->secs);
		L.ack_lat = bench_xcalloc(L.total, sizeof(int64_t));
		L.lag = bench_xcalloc(L.total, sizeof(int64_t));
		L.deliver_ns = bench_xcalloc(L.total, sizeof(int64_t));
		/* Start 200 ms out so that the reader is in place; the first
		 * warm-up seconds of the schedule are sent but not counted. */
		L.t0_ns = gaz_mono_ns() + 200 * GAZ_NS_PER_MS;
		lat_drive(r, d, &L, first[0].commit_end);
		free(L.ack_lat);
		free(L.lag);
		free(L.deliver_ns);
	}
	gaz_rpc_channel_free(direct);
	free_names(names, 1);
	return rc;
}

/* ---- read from the live spool ------------------------------------------------ */

struct read_def {
	const char *key;
	int readers;   /* concurrent readers, one connection each */
};

static const struct read_def read_defs[] = {
	{"read_spool_r1", 1},
	{"read_spool_r4", 4},
};

struct reader {
	pthread_t tid;
	struct gaz_rpc_channel *ch;
	const char *journal;
	int64_t head;              /* read [0, head) over and over */
	int64_t start_ns, end_ns;  /* the measured window */
	int64_t bytes, passes, errors;
};

/* reader_fn counts bytes that arrive inside the window (bench_read_fn). */
static bool reader_fn(void *arg, int64_t off, const uint8_t *data, size_t len, int64_t now_ns)
{
	struct reader *rd = arg;

	(void)off, (void)data;
	if (now_ns >= rd->start_ns && now_ns <= rd->end_ns)
		rd->bytes += (int64_t)len;
	return now_ns < rd->end_ns;
}

/* reader_main re-reads the journal until the window ends. */
static void *reader_main(void *arg)
{
	struct reader *rd = arg;

	while (gaz_mono_ns() < rd->end_ns) {
		struct gaz_status st = {0};
		int64_t got;
		int rc = bench_read(rd->ch, rd->journal, 0, rd->head, false,
				    rd->end_ns + OP_TIMEOUT_MS * GAZ_NS_PER_MS, reader_fn, rd, &got,
				    &st);

		if (rc) {
			if (rd->errors++ == 0)
				fprintf(stderr, "gazbench: read failed: %s\n", st.msg);
			nanosleep(&(struct timespec){.tv_nsec = 10 * GAZ_NS_PER_MS}, NULL);
		} else if (got >= rd->head) {
			rd->passes++;
		}
	}
	return NULL;
}

/* prewrite fills the read journal with READ_LEN bytes of 1 MiB appends,
 * less than a fragment, so the readers read the live spool. */
static int prewrite(struct run *r, const char *journal, int64_t *head)
{
	for (int64_t n = 0; n < READ_LEN; n += 1 << 20) {
		struct bench_append_result res;
		struct gaz_status st = {0};
		int rc = bench_append_retry(r->ch, journal, r->payload + (size_t)n % (PAYLOAD_LEN / 2),
					    1 << 20, gaz_deadline_in(OP_TIMEOUT_MS), &res, &st);

		if (rc) {
			fprintf(stderr, "gazbench: pre-writing the read journal: %s\n", st.msg);
			return rc;
		}
		*head = res.commit_end;
	}
	return 0;
}

/* read_report sums the readers and writes the metrics. */
static void read_report(struct run *r, const struct read_def *d, struct reader *rd,
			const struct bench_cpu *c0, const struct bench_cpu *c1)
{
	int64_t bytes = 0, passes = 0, errors = 0;
	double secs = (double)(c1->wall_ns - c0->wall_ns) / 1e9;

	for (int i = 0; i < d->readers; i++) {
		bytes += rd[i].bytes;
		passes += rd[i].passes;
		errors += rd[i].errors;
	}
	put(r, d->key, "mbps", (double)bytes / 1e6 / secs);
	put(r, d->key, "passes", (double)passes);
	put(r, d->key, "broker_cpu", bench_cpu_cores(c0, c1, true));
	put(r, d->key, "client_cpu", bench_cpu_cores(c0, c1, false));
	put(r, d->key, "errors", (double)errors);
	printf("  %.1f MB/s in %lld passes; cores: broker %.2f, gazbench %.2f; errors %lld\n",
	       (double)bytes / 1e6 / secs, (long long)passes, bench_cpu_cores(c0, c1, true),
	       bench_cpu_cores(c0, c1, false), (long long)errors);
}

/* run_read runs one read workload over the (once) pre-written journal. */
static int run_read(struct run *r, const struct read_def *d, const char *journal, int64_t head)
{
	struct reader *rd = bench_xcalloc((size_t)d->readers, sizeof(*rd));
	int64_t start_ns = gaz_mono_ns() + (int64_t)(r->warmup_s * 1e9);
	struct bench_cpu c0, c1;

	printf("%s: %d reader(s) re-reading %lld B of a live spool, %.0f s + %.1f s warm-up\n",
	       d->key, d->readers, (long long)head, r->secs, r->warmup_s);
	for (int i = 0; i < d->readers; i++) {
		rd[i] = (struct reader){.journal = journal, .head = head, .start_ns = start_ns};
		rd[i].end_ns = start_ns + (int64_t)(r->secs * 1e9);
		if (!(rd[i].ch = bench_channel(r->broker)))
			abort(); /* the same URL worked for the main channel */
		pthread_create(&rd[i].tid, NULL, reader_main, &rd[i]);
	}
	bench_sleep_until(start_ns);
	bench_cpu_take(&c0, r->broker_pids, r->npids);
	bench_sleep_until(rd[0].end_ns);
	bench_cpu_take(&c1, r->broker_pids, r->npids);
	for (int i = 0; i < d->readers; i++) {
		pthread_join(rd[i].tid, NULL);
		gaz_rpc_channel_free(rd[i].ch);
	}
	read_report(r, d, rd, &c0, &c1);
	free(rd);
	return 0;
}

/* run_reads pre-writes the read journal if any read workload is selected
 * and runs them. */
static int run_reads(struct run *r)
{
	char *names[1] = {NULL};
	int64_t head = 0;
	bool any = false;
	int rc;

	for (size_t i = 0; i < sizeof(read_defs) / sizeof(read_defs[0]); i++)
		any |= selected(r, read_defs[i].key);
	if (!any)
		return 0;
	if ((rc = make_journals(r, "read", 1, names, NULL)) == 0 &&
	    (rc = prewrite(r, names[0], &head)) == 0) {
		for (size_t i = 0; i < sizeof(read_defs) / sizeof(read_defs[0]) && !rc; i++)
			if (selected(r, read_defs[i].key))
				rc = run_read(r, &read_defs[i], names[0], head);
	}
	free_names(names, 1);
	return rc;
}

/* ---- idle journals ------------------------------------------------------------ */

#define IDLE_BATCH 100            /* specs per Apply (etcd allows 128 ops per txn) */
#define IDLE_SETTLE_S 5           /* after the last journal is ready, before measuring */
/* One whole health-pulse period (both kinds pulse each primary journal
 * once a minute) and then some: a shorter window counts the periodic
 * pulses of whichever kind's journals happen to fall due in it, which
 * depends on how fast each kind created them, not on what they cost. */
#define IDLE_MEASURE_S 62
#define IDLE_SLOW_NS (10 * GAZ_NS_PER_MS) /* an append that waited for its journal */
#define IDLE_AGAIN 2000 /* journals appended to again once all are ready */

/* proc_rss_kib sums VmRSS of the broker processes; -1 when unknown. */
static int64_t proc_rss_kib(const struct run *r)
{
	int64_t sum = 0;

	for (int i = 0; i < r->npids; i++) {
		int64_t kib = bench_proc_status_kib(r->broker_pids[i], "VmRSS");
		if (kib < 0)
			return -1;
		sum += kib;
	}
	return r->npids ? sum : -1;
}

/* idle_names makes the names <prefix>/idle-<i> of journals [lo, hi). */
static void idle_names(const struct run *r, size_t lo, size_t hi, char **names)
{
	for (size_t i = lo; i < hi; i++) {
		names[i - lo] = bench_xmalloc(strlen(r->prefix) + 32);
		sprintf(names[i - lo], "%s/idle-%05zu", r->prefix, i);
	}
}

/* idle_again appends once more to the first `n` journals, all ready now,
 * and prints the round trips' p50 apart for journals whose primary is
 * the broker the bench talks to and for those it proxies to another:
 * what a ready journal's append costs, beside what the creation did. */
static void idle_again(struct run *r, const char *key, size_t n)
{
	struct bench_samples direct, proxied;
	struct gaz_status st = {0};
	char *names[1];

	bench_samples_init(&direct, n);
	bench_samples_init(&proxied, n);
	for (size_t i = 0; i < n; i++) {
		struct bench_append_result res;
		int64_t t0 = gaz_mono_ns();

		idle_names(r, i, i + 1, names);
		if (bench_append(r->ch, names[0], NULL, 0, 0, gaz_deadline_in(10000), &res, &st) == 0)
			bench_samples_add(strcmp(res.primary, r->broker) ? &proxied : &direct,
					  gaz_mono_ns() - t0);
		free_names(names, 1);
	}
	printf("  %s: again to %zu ready journals: p50 %.2f ms at the primary (%zu), %.2f ms"
	       " proxied to it (%zu)\n",
	       key, n, (double)bench_samples_pct(&direct, 0.5) / 1e6, direct.n,
	       (double)bench_samples_pct(&proxied, 0.5) / 1e6, proxied.n);
	fflush(stdout);
	bench_samples_release(&direct);
	bench_samples_release(&proxied);
}

/* run_idle (idle_5k, idle_10k): `count` journals at the run's
 * replication, refresh interval 5 minutes, each made ready by an empty
 * append and then left alone; the broker's CPU over IDLE_MEASURE_S is
 * what idle journals cost it (issue: 0.36 cores for ours against 0.01 for
 * Gazette's at 5,000), and its RSS growth per journal what they hold. The
 * journals are deleted at the end. */
static int run_idle(struct run *r, const char *key, size_t count)
{
	struct gaz_status st = {0};
	struct bench_cpu a, b;
	int64_t rss0 = proc_rss_kib(r), rss1, t_apply = gaz_mono_ns();
	char *names[IDLE_BATCH];
	int rc = 0;

	printf("  %s: %zu journals\n", key, count);
	fflush(stdout);
	for (size_t lo = 0; lo < count && !rc; lo += IDLE_BATCH) {
		struct bench_spec specs[IDLE_BATCH] = {{0}};
		size_t n = count - lo < IDLE_BATCH ? count - lo : IDLE_BATCH;

		idle_names(r, lo, lo + n, names);
		for (size_t i = 0; i < n; i++)
			specs[i] = (struct bench_spec){.name = names[i], .fragment_len = FRAGMENT_LEN,
						       .replication = r->replication, .refresh_s = 300};
		if ((rc = bench_apply(r->ch, specs, n, &st)))
			fprintf(stderr, "gazbench: apply of %s journals failed: %s\n", key, st.msg);
		free_names(names, n);
	}
	int64_t t_applied = gaz_mono_ns();
	long ignored;
	char ignored_why[8];

	struct bench_samples lat;
	int64_t slow_ns = 0, n_slow = 0, half_ns = -1;

	bench_samples_init(&lat, count);
	bench_append_retries(ignored_why, sizeof(ignored_why), &ignored); /* count from here */
	for (size_t i = 0; i < count && !rc; i++) {
		struct bench_append_result res;
		int64_t t0 = gaz_mono_ns(), took;

		idle_names(r, i, i + 1, names);
		if ((rc = bench_append_retry(r->ch, names[0], NULL, 0, gaz_deadline_in(30000), &res, &st)))
			fprintf(stderr, "gazbench: %s not ready: %s\n", names[0], st.msg);
		free_names(names, 1);
		took = gaz_mono_ns() - t0;
		bench_samples_add(&lat, took);
		if (took > IDLE_SLOW_NS) {
			n_slow++;
			slow_ns += took;
		}
		if (i + 1 == count / 2)
			half_ns = gaz_mono_ns() - t_applied;
	}
	if (!rc) {
		/* From the first Apply to the last journal answering its append:
		 * how soon a broker serves that many new journals. */
		put(r, key, "ready_s", (double)(gaz_mono_ns() - t_apply) / 1e9);
		char why[256];
		long retries;

		bench_append_retries(why, sizeof(why), &retries);
		printf("  %s: applied in %.1f s, then appended to one by one in %.1f s"
		       " (half of them in %.1f s; %ld retries after 50 ms%s%s)\n",
		       key, (double)(t_applied - t_apply) / 1e9,
		       (double)(gaz_mono_ns() - t_applied) / 1e9, (double)half_ns / 1e9, retries,
		       retries ? ": " : "", why);
		/* Where that time went: appends waiting for their journal (a
		 * pulse, a route write) against the round trip of a ready one. */
		printf("  %s: each append p50 %.2f ms, p99 %.1f ms, max %.0f ms; %lld over %d ms took"
		       " %.1f s\n",
		       key, (double)bench_samples_pct(&lat, 0.5) / 1e6,
		       (double)bench_samples_pct(&lat, 0.99) / 1e6,
		       (double)bench_samples_pct(&lat, 1.0) / 1e6, (long long)n_slow,
		       (int)(IDLE_SLOW_NS / GAZ_NS_PER_MS), (double)slow_ns / 1e9);
		fflush(stdout);
		idle_again(r, key, count < IDLE_AGAIN ? count : IDLE_AGAIN);
		bench_sleep_until(gaz_deadline_in(IDLE_SETTLE_S * 1000));
		rss1 = proc_rss_kib(r);
		int64_t t0 = gaz_mono_ns();
		struct bench_sched *s0 = bench_sched_take(r->broker_pids, r->npids);
		bench_cpu_take(&a, r->broker_pids, r->npids);
		bench_sleep_until(gaz_deadline_in(IDLE_MEASURE_S * 1000));
		bench_cpu_take(&b, r->broker_pids, r->npids);
		struct bench_sched *s1 = bench_sched_take(r->broker_pids, r->npids);
		int64_t t1 = gaz_mono_ns(), ran = bench_sched_delta(s0, s1);
		bench_sched_free(s0);
		bench_sched_free(s1);
		/* schedstat's nanoseconds: at these figures /proc's 10 ms ticks
		 * count one or two in the window. */
		put(r, key, "cpu_cores", ran < 0 ? bench_cpu_cores(&a, &b, true)
						 : (double)ran / (double)(t1 - t0));
		put(r, key, "rss_kib_per_journal",
		    rss0 < 0 || rss1 < 0 ? -1 : (double)(rss1 - rss0) / count);
		/* The most OS threads of any one broker, holding them all
		 * (/proc's "Threads:" line, read by the kB-line parser). */
		int64_t most = -1;
		for (int i = 0; i < r->npids; i++) {
			int64_t t = bench_proc_status_kib(r->broker_pids[i], "Threads");
			most = t > most ? t : most;
		}
		put(r, key, "threads_max", (double)most);
	}
	bench_samples_release(&lat);
	for (size_t lo = 0; lo < count; lo += IDLE_BATCH) {
		size_t n = count - lo < IDLE_BATCH ? count - lo : IDLE_BATCH;

		idle_names(r, lo, lo + n, names);
		if (bench_delete(r->ch, (const char *const *)names, n, &st))
			fprintf(stderr, "gazbench: deleting %s journals: %s\n", key, st.msg);
		free_names(names, n);
	}
	return rc;
}

/* ---- blocking readers at the write head --------------------------------------- */

struct fanout_def {
	const char *key;
	int readers;  /* blocking Reads of the one journal, all at its head */
	int rate;     /* REC_LEN appends per second while they read */
	double secs;
};

static const struct fanout_def fanout_defs[] = {
	{"fanout_1k", 1000, 50, 4},
	{"fanout_10k", 10000, 2, 10},
};

#define FANOUT_CHANNELS 4      /* connections the readers share */
#define FANOUT_WAIT_MS 60000   /* for every reader to have every record */

/* fanout_appends sends rate x secs records to L->journal on run_lat's
 * schedule and senders, and keeps the latency of each acknowledged one
 * in *ack (initialised here). */
static void fanout_appends(struct lat_run *L, int rate, double secs, struct bench_samples *ack)
{
	pthread_t w[LAT_WORKERS];

	L->period_ns = GAZ_NS_PER_S / rate;
	L->size = REC_LEN;
	L->skip = 0;
	L->total = (size_t)(rate * secs);
	atomic_store(&L->next, 0);
	L->ack_lat = bench_xcalloc(L->total, sizeof(int64_t));
	L->lag = bench_xcalloc(L->total, sizeof(int64_t));
	L->t0_ns = gaz_mono_ns() + 50 * GAZ_NS_PER_MS;
	for (int i = 0; i < LAT_WORKERS; i++)
		pthread_create(&w[i], NULL, lat_worker, L);
	for (int i = 0; i < LAT_WORKERS; i++)
		pthread_join(w[i], NULL);
	bench_samples_init(ack, L->total);
	for (size_t i = 0; i < L->total; i++)
		if (L->ack_lat[i] >= 0)
			bench_samples_add(ack, L->ack_lat[i]);
	free(L->ack_lat);
	free(L->lag);
}

/* fanout_wait waits up to FANOUT_WAIT_MS for every reader to hold `bytes`;
 * returns how many do. */
static int fanout_wait(struct bench_fanout *f, int readers, int64_t bytes)
{
	int64_t deadline = gaz_deadline_in(FANOUT_WAIT_MS);
	int have, ended;

	while ((have = bench_fanout_count(f, bytes, &ended)) < readers && ended == 0 &&
	       gaz_mono_ns() < deadline)
		bench_sleep_until(gaz_deadline_in(20));
	return have;
}

/* run_fanout (fanout_1k, fanout_10k): `readers` blocking Reads wait at
 * the head of one journal while records are appended to it at a fixed
 * rate; the same schedule runs first with no reader. Figures: the append
 * p99 with the readers and without (and their ratio: issue 39 asks at
 * most 2), readers that missed a record, the broker's RSS per waiting
 * reader, its CPU per record delivered to one reader, and its threads. */
static int run_fanout(struct run *r, const struct fanout_def *d)
{
	struct gaz_rpc_channel *chs[FANOUT_CHANNELS] = {0};
	struct lat_run L = {.r = r, .ch = r->ch};
	struct bench_append_result first[1], mark;
	struct bench_samples base, with;
	struct bench_fanout *f = NULL;
	struct gaz_status st = {0};
	uint8_t rec[REC_LEN];
	char *names[1];
	int rc;

	printf("%s: %d blocking readers at the head, %d records/s for %.0f s\n", d->key,
	       d->readers, d->rate, d->secs);
	if ((rc = make_journals(r, d->key, 1, names, first)))
		return rc;
	L.journal = names[0];
	fanout_appends(&L, d->rate, d->secs, &base);
	int64_t rss0 = proc_rss_kib(r);
	fill_record(rec, r->payload, 0);
	for (int i = 0; i < FANOUT_CHANNELS; i++)
		if (!(chs[i] = bench_channel(r->broker)))
			rc = GAZ_EUNAVAIL;
	/* Readers from the write head; a first record reaches them all
	 * before the measured appends start. */
	if (!rc && !(rc = bench_append(r->ch, names[0], rec, REC_LEN, REC_LEN,
				       gaz_deadline_in(OP_TIMEOUT_MS), &mark, &st)) &&
	    !(f = bench_fanout_open(chs, FANOUT_CHANNELS, names[0], mark.commit_end, d->readers,
				    gaz_deadline_in(300000), &st)))
		rc = GAZ_ERPC;
	if (!rc && (rc = bench_append(r->ch, names[0], rec, REC_LEN, REC_LEN,
				      gaz_deadline_in(OP_TIMEOUT_MS), &mark, &st)) == 0 &&
	    fanout_wait(f, d->readers, REC_LEN) < d->readers) {
		gaz_status_set(&st, GAZ_ETIMEDOUT, "the first record did not reach every reader");
		rc = GAZ_ETIMEDOUT;
	}
	if (!rc) {
		int64_t rss1 = proc_rss_kib(r), most = -1;
		for (int i = 0; i < r->npids; i++) {
			int64_t t = bench_proc_status_kib(r->broker_pids[i], "Threads");
			most = t > most ? t : most;
		}
		struct bench_sched *s0 = bench_sched_take(r->broker_pids, r->npids);
		int64_t t0 = gaz_mono_ns();
		fanout_appends(&L, d->rate, d->secs, &with);
		int have = fanout_wait(f, d->readers, REC_LEN * (int64_t)(1 + L.total)), ended = 0;
		struct bench_sched *s1 = bench_sched_take(r->broker_pids, r->npids);
		int64_t t1 = gaz_mono_ns(), ran = bench_sched_delta(s0, s1);
		bench_sched_free(s0);
		bench_sched_free(s1);
		double delivered = (double)(bench_fanout_bytes(f) / REC_LEN) - d->readers;

		bench_fanout_count(f, 0, &ended);
		put(r, d->key, "p99_us", (double)bench_samples_pct(&with, 0.99) / 1e3);
		put(r, d->key, "base_p99_us", (double)bench_samples_pct(&base, 0.99) / 1e3);
		put(r, d->key, "p99_ratio", (double)bench_samples_pct(&with, 0.99) /
					      (double)(bench_samples_pct(&base, 0.99) ? bench_samples_pct(&base, 0.99) : 1));
		put(r, d->key, "readers_missing", (double)(d->readers - have));
		put(r, d->key, "streams_ended", (double)ended);
		put(r, d->key, "rss_kib_per_reader",
		    rss0 < 0 || rss1 < 0 ? -1 : (double)(rss1 - rss0) / d->readers);
		put(r, d->key, "cpu_us_per_record", ran < 0 || delivered <= 0 ? -1
						    : (double)ran / 1e3 / delivered);
		put(r, d->key, "deliver_s", (double)(t1 - t0) / 1e9);
		put(r, d->key, "threads_max", (double)most);
		put(r, d->key, "errors", (double)atomic_load(&L.errors));
		printf("  p99 %.0f us with readers, %.0f us without; %d of %d readers got every "
		       "record in %.1f s; %.1f KiB RSS per reader; %.2f us CPU per delivery; %lld threads\n",
		       (double)bench_samples_pct(&with, 0.99) / 1e3,
		       (double)bench_samples_pct(&base, 0.99) / 1e3, have, d->readers,
		       (double)(t1 - t0) / 1e9, rss0 < 0 || rss1 < 0 ? -1.0 : (double)(rss1 - rss0) / d->readers,
		       ran < 0 || delivered <= 0 ? -1.0 : (double)ran / 1e3 / delivered,
		       (long long)most);
		bench_samples_release(&with);
	} else {
		fprintf(stderr, "gazbench: %s: %s\n", d->key, st.msg);
	}
	bench_samples_release(&base);
	bench_fanout_close(f);
	for (int i = 0; i < FANOUT_CHANNELS; i++)
		gaz_rpc_channel_free(chs[i]);
	free_names(names, 1);
	return rc;
}

/* ---- main -------------------------------------------------------------------- */

/* run_all runs every selected workload in a fixed order; a failed
 * workload is reported and the next one still runs, unless Apply itself
 * failed (nothing else can work then). */
static int run_all(struct run *r)
{
	struct bench_cpu c;
	int rc = 0, one;

	if (r->replication > 1) {
		for (size_t i = 0; i < sizeof(rf_tput_defs) / sizeof(rf_tput_defs[0]) && !r->fatal; i++)
			if (selected(r, rf_tput_defs[i].key) && (one = run_tput(r, &rf_tput_defs[i])))
				rc = one;
		for (size_t i = 0; i < sizeof(rf_defs) / sizeof(rf_defs[0]) && !r->fatal; i++)
			if (selected(r, rf_defs[i].key) && (one = run_lat(r, &rf_defs[i])))
				rc = one;
		goto done;
	}
	for (size_t i = 0; i < sizeof(tput_defs) / sizeof(tput_defs[0]) && !r->fatal; i++)
		if (selected(r, tput_defs[i].key) && (one = run_tput(r, &tput_defs[i])))
			rc = one;
	for (size_t i = 0; i < sizeof(lat_defs) / sizeof(lat_defs[0]) && !r->fatal; i++)
		if (selected(r, lat_defs[i].key) && (one = run_lat(r, &lat_defs[i])))
			rc = one;
	if (!r->fatal && (one = run_reads(r)))
		rc = one;
	for (size_t i = 0; i < sizeof(fanout_defs) / sizeof(fanout_defs[0]) && !r->fatal; i++)
		if (selected(r, fanout_defs[i].key) && (one = run_fanout(r, &fanout_defs[i])))
			rc = one;
done:
	if (!r->fatal && selected(r, "idle_5k") && (one = run_idle(r, "idle_5k", 5000)))
		rc = one;
	if (!r->fatal && selected(r, "idle_10k") && (one = run_idle(r, "idle_10k", 10000)))
		rc = one;
	/* Only when named: at replication 3, 90,000 replicas to create. */
	if (!r->fatal && r->only && selected(r, "idle_30k") && (one = run_idle(r, "idle_30k", 30000)))
		rc = one;
	bench_cpu_take(&c, r->broker_pids, r->npids);
	bench_out_put(&r->out, "run.broker_cpu_s", c.broker_ns < 0 ? -1 : (double)c.broker_ns / 1e9);
	return rc;
}

/* cleanup deletes the run's journals (best effort) and frees their names. */
static void cleanup(struct run *r)
{
	struct gaz_status st = {0};

	if (r->n_journals && bench_delete(r->ch, (const char *const *)r->journals,
					  r->n_journals, &st))
		fprintf(stderr, "gazbench: deleting the run's journals: %s\n", st.msg);
	for (size_t i = 0; i < r->n_journals; i++)
		free(r->journals[i]);
	r->n_journals = 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: gazbench run --broker URL --prefix NAME --out FILE [--broker-pid PID[,PID..]]\n"
		"                    [--secs S] [--warmup S] [--chunk BYTES] [--only KEY,...]\n"
		"                    [--replication N] [--loop-threads N] [--tls-ca FILE] [--verbose]\n"
		"       gazbench report NAME_A FILE[,FILE...] NAME_B FILE[,FILE...] [--no-goals]\n");
}

const char *bench_tls_ca;

struct gaz_rpc_channel *bench_channel(const char *url)
{
	struct gaz_rpc_tls tls = {.ca_file = bench_tls_ca};
	struct gaz_rpc_channel_opts o = {.tls = &tls};
	struct gaz_status st = {0};
	struct gaz_rpc_channel *ch = gaz_rpc_channel_open(url, &o, &st);

	if (!ch)
		fprintf(stderr, "gazbench: channel to %s: %s\n", url, st.msg);
	return ch;
}

/* parse_pids reads a comma list of process ids into pids[max]; returns
 * the count, or -1 for a malformed list. */
static int parse_pids(const char *list, int *pids, int max)
{
	int n = 0;

	for (const char *p = list; *p && n < max;) {
		char *end;
		long v = strtol(p, &end, 10);

		if (end == p || v <= 0 || (*end && *end != ','))
			return -1;
		pids[n++] = (int)v;
		p = *end ? end + 1 : end;
	}
	return n;
}

/* parse_run fills r from the options of `gazbench run`. Returns 0 or
 * GAZ_EINVAL. */
static int parse_run(struct run *r, int argc, char **argv, const char **out)
{
	static const struct option opts[] = {
		{"broker", required_argument, NULL, 'b'}, {"prefix", required_argument, NULL, 'p'},
		{"out", required_argument, NULL, 'o'},    {"broker-pid", required_argument, NULL, 'P'},
		{"secs", required_argument, NULL, 's'},   {"warmup", required_argument, NULL, 'w'},
		{"chunk", required_argument, NULL, 'c'},  {"only", required_argument, NULL, 'O'},
		{"verbose", no_argument, NULL, 'v'},      {"replication", required_argument, NULL, 'R'},
		{"loop-threads", required_argument, NULL, 'L'}, {"tls-ca", required_argument, NULL, 'T'},
		{NULL, 0, NULL, 0}};
	int c;

	*r = (struct run){.secs = 4, .warmup_s = 1, .chunk = 1 << 20, .replication = 1,
			  .loop_threads = 2};
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'b': r->broker = optarg; break;
		case 'p': r->prefix = optarg; break;
		case 'o': *out = optarg; break;
		case 'P': r->npids = parse_pids(optarg, r->broker_pids, 8); break;
		case 'R': r->replication = atoi(optarg); break;
		case 's': r->secs = atof(optarg); break;
		case 'w': r->warmup_s = atof(optarg); break;
		case 'c': r->chunk = (size_t)atol(optarg); break;
		case 'O': r->only = optarg; break;
		case 'v': r->out.verbose = true; break;
		case 'L': r->loop_threads = atoi(optarg); break;
		case 'T': bench_tls_ca = optarg; break;
		default: return GAZ_EINVAL;
		}
	}
	if (!r->broker || !r->prefix || r->secs <= 0 || r->secs > 60 || r->warmup_s < 0 ||
	    r->warmup_s > 30 || r->chunk < 1024 || r->chunk > (4u << 20) - 1024 ||
	    r->replication < 1 || r->replication > 5 || r->npids < 0 || r->loop_threads < 0 ||
	    r->loop_threads > 64)
		return GAZ_EINVAL;
	return 0;
}

/* cmd_run is `gazbench run`. Returns the process exit status. */
static int cmd_run(int argc, char **argv)
{
	struct run r;
	const char *out = NULL;
	int rc;

	if (parse_run(&r, argc, argv, &out)) {
		usage();
		return 2;
	}
	if (out && !(r.out.f = fopen(out, "w"))) {
		perror(out);
		return 1;
	}
	/* Timer slack defaults to 50 us: open-loop sends would start late. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	r.payload = bench_xmalloc(PAYLOAD_LEN);
	bench_gen_payload(r.payload, PAYLOAD_LEN);
	if (gaz_rpc_init(1) || !(r.ch = bench_channel(r.broker))) {
		fprintf(stderr, "gazbench: cannot open a channel to %s\n", r.broker);
		return 1;
	}
	printf("gazbench: %s, journals under %s/\n", r.broker, r.prefix);
	rc = run_all(&r);
	cleanup(&r);
	gaz_rpc_channel_free(r.ch);
	gaz_rpc_shutdown();
	if (r.out.f)
		fclose(r.out.f);
	free(r.payload);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	gaz_log_setup("warn", "text");
	if (argc >= 2 && strcmp(argv[1], "run") == 0)
		return cmd_run(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "backfill") == 0)
		return bench_backfill_main(argc - 1, argv + 1);
	if ((argc == 6 || (argc == 7 && !strcmp(argv[6], "--no-goals"))) &&
	    strcmp(argv[1], "report") == 0) {
		bench_report_goals = argc == 6;
		return bench_report(argv[2], argv[3], argv[4], argv[5]) ? 1 : 0;
	}
	usage();
	return 2;
}
