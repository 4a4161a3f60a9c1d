/*
 * bench_report.c - the side-by-side table of `make bench`: reads the
 * "key value" result files of each broker's runs and prints, per metric,
 * the median over runs of A (ours) and B (Gazette), the run-to-run spread,
 * the A/B ratio and the project's goal for it (>= 1.5x throughput,
 * <= 0.7x p99 latency, at replication 1; the replication-3 rows have no
 * goal). Rows no run has are left out.
 *
 * Missing metrics print as "-"; a file that cannot be read fails the
 * report. Nothing here talks to a broker.
 */
#include "bench/bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RUNS 8
#define MAX_KEYS 256

struct series {
	char key[64];
	double v[MAX_RUNS];
	int n;
};

struct side {
	const char *name;
	struct series s[MAX_KEYS];
	int n;
	int runs;
};

/* A table row: metric key, label, unit, and the goal on the A/B ratio
 * (goal > 0: ratio >= goal; goal < 0: ratio <= -goal; 0: none). A
 * `first_run` row shows each kind's first run, not the median: RSS growth
 * is seen once per broker process, and later rounds on the same brokers
 * reuse the memory the first one freed. */
struct row {
	const char *key, *label, *unit;
	double goal;
	bool first_run;
};

static const struct row rows[] = {
	{"append_1m_j1.mbps", "append 1 MiB, 4 appenders, 1 journal", "MB/s", 1.5},
	{"append_64k_j1.mbps", "append 64 KiB, 4 appenders, 1 journal", "MB/s", 1.5},
	{"append_1k_j1.mbps", "append 1 KiB, 32 appenders, 1 journal", "MB/s", 1.5},
	{"append_1k_j1.appends_s", "  same, in appends", "/s", 0},
	{"append_64k_j4.mbps", "append 64 KiB, 8 appenders, 4 journals", "MB/s", 1.5},
	{"lat_1k_500.p50_us", "latency 1 KiB @ 500/s open loop   p50", "us", 0},
	{"lat_1k_500.p99_us", "latency 1 KiB @ 500/s open loop   p99", "us", -0.7},
	{"lat_1k_500.p999_us", "latency 1 KiB @ 500/s open loop p99.9", "us", 0},
	{"lat_1k_1000.p50_us", "latency 1 KiB @ 1000/s open loop  p50", "us", 0},
	{"lat_1k_1000.p99_us", "latency 1 KiB @ 1000/s open loop  p99", "us", -0.7},
	{"lat_1k_1000.p999_us", "latency 1 KiB @ 1000/s open loop p99.9", "us", 0},
	{"lat_1k_2000.rate_done", "1 KiB @ 2000/s offered: achieved", "/s", 0},
	{"lat_1k_2000.p50_us", "latency 1 KiB @ 2000/s open loop  p50", "us", 0},
	{"lat_1k_2000.p99_us", "latency 1 KiB @ 2000/s open loop  p99", "us", 0},
	{"lat_1k_500.read_p50_us", "tail read delivery @ 500/s  p50", "us", 0},
	{"lat_1k_500.read_p99_us", "tail read delivery @ 500/s  p99", "us", -0.7},
	{"read_spool_r1.mbps", "read 64 MiB live spool, 1 reader", "MB/s", 1.5},
	{"read_spool_r4.mbps", "read 64 MiB live spool, 4 readers", "MB/s", 1.5},
	{"rf3_tput_1m.mbps", "RF=3 append 1 MiB, 4 appenders", "MB/s", 1.5},
	{"rf3_tput_64k.mbps", "RF=3 append 64 KiB, 4 appenders", "MB/s", 1.5},
	{"rf3_tput_1k.mbps", "RF=3 append 1 KiB, 32 appenders", "MB/s", 1.5},
	{"rf3_tput_1k.appends_s", "  same, in appends", "/s", 0},
	{"rf3_1m.p50_us", "RF=3 1 MiB @ 16/s, to primary   p50", "us", 0},
	{"rf3_1m.p99_us", "RF=3 1 MiB @ 16/s, to primary   p99", "us", -0.7},
	{"rf3_1m.rate_done", "  achieved", "/s", 0},
	{"rf3_64k.p50_us", "RF=3 64 KiB @ 100/s, to primary p50", "us", 0},
	{"rf3_64k.p99_us", "RF=3 64 KiB @ 100/s, to primary p99", "us", -0.7},
	{"rf3_64k.rate_done", "  achieved", "/s", 0},
	{"rf3_1k.p50_us", "RF=3 1 KiB @ 500/s, to primary  p50", "us", 0},
	{"rf3_1k.p99_us", "RF=3 1 KiB @ 500/s, to primary  p99", "us", -0.7},
	{"rf3_1k.rate_done", "  achieved", "/s", 0},
	{"fanout_1k.p99_us", "1,000 readers at the head: append p99", "us", 0},
	{"fanout_1k.p99_ratio", "  against its p99 with no reader", "x", 0},
	{"fanout_1k.readers_missing", "  readers that missed a record", "readers", 0},
	{"fanout_1k.rss_kib_per_reader", "  broker RSS per waiting reader (1st run)", "KiB", -1.0, true},
	{"fanout_1k.cpu_us_per_record", "  broker CPU per record delivered", "us", -1.0},
	{"fanout_1k.threads_max", "  OS threads of the broker", "threads", 0},
	{"fanout_10k.p99_us", "10,000 readers at the head: append p99", "us", 0},
	{"fanout_10k.p99_ratio", "  against its p99 with no reader", "x", 0},
	{"fanout_10k.readers_missing", "  readers that missed a record", "readers", 0},
	{"fanout_10k.rss_kib_per_reader", "  broker RSS per waiting reader (1st run)", "KiB", -1.0, true},
	{"fanout_10k.cpu_us_per_record", "  broker CPU per record delivered", "us", -1.0},
	{"fanout_10k.threads_max", "  OS threads of the broker", "threads", 0},
	{"idle_5k.cpu_cores", "5,000 idle journals: broker CPU", "cores", -1.0},
	{"idle_5k.rss_kib_per_journal", "  RSS per idle journal (1st run)", "KiB", -1.0, true},
	{"idle_5k.ready_s", "  all created and appendable in", "s", -1.0},
	{"idle_5k.threads_max", "  OS threads of the busiest broker", "threads", 0},
	{"idle_10k.cpu_cores", "10,000 idle journals: broker CPU", "cores", -1.0},
	{"idle_10k.rss_kib_per_journal", "  RSS per idle journal (1st run)", "KiB", -1.0, true},
	{"idle_10k.ready_s", "  all created and appendable in", "s", -1.0},
	{"idle_10k.threads_max", "  OS threads of the busiest broker", "threads", 0},
	{"idle_30k.cpu_cores", "30,000 idle journals: broker CPU", "cores", -1.0},
	{"idle_30k.rss_kib_per_journal", "  RSS per idle journal (1st run)", "KiB", -1.0, true},
	{"idle_30k.ready_s", "  all created and appendable in", "s", -1.0},
	{"idle_30k.threads_max", "  OS threads of the busiest broker", "threads", 0},
	/* gazbench backfill (S3 store); its goals are within one broker */
	{"backfill.history_mb", "backfill: S3 history read back", "MB", 0},
	{"backfill.raw_get_mbps", "backfill (a) raw GETs of the objects", "MB/s", 0},
	{"backfill.decode_mbps", "backfill decoder alone, one thread", "MB/s", 0},
	{"backfill.direct_no_ra_mbps", "backfill (b0) direct, no read-ahead", "MB/s", 0},
	{"backfill.direct_mbps", "backfill (b) direct, fragment URLs", "MB/s", 0},
	{"backfill.proxied_mbps", "backfill (c) proxied by the broker", "MB/s", 0},
	{"backfill.direct_pct_of_raw", "  (b) as % of (a)", "%", 0},
	{"backfill.direct_pct_of_bound", "  (b) as % of min((a), decoder): goal >= 80", "%", 0},
	{"backfill.lat_p99_us", "backfill (d) 1 KiB appends alone, p99", "us", 0},
	{"backfill.lat_bfd_p99_us", "  p99 during a direct backfill", "us", 0},
	{"backfill.lat_bfd_p99_pct_of_alone", "  direct: as % of alone: goal <= 120", "%", 0},
	{"backfill.lat_bf_p99_us", "  p99 during a proxied backfill", "us", 0},
	{"backfill.lat_bf_p99_pct_of_alone", "  proxied: as % of alone", "%", 0},
	{"backfill.lat_spin_p99_us", "  p99 beside a busy CPU (control)", "us", 0},
	{"backfill.lat_spin_p99_pct_of_alone", "  busy CPU: as % of alone", "%", 0},
	{"backfill.lat_bfd_p99_pct_of_spin", "  direct: as % of busy CPU", "%", 0},
};

/* CPU rows: cores used by the broker and by gazbench in each workload. */
static const char *const cpu_keys[] = {
	"append_1m_j1", "append_64k_j1", "append_1k_j1",  "append_64k_j4", "lat_1k_500",
	"lat_1k_1000",  "lat_1k_2000",   "read_spool_r1", "read_spool_r4", "rf3_tput_1m",
	"rf3_tput_64k", "rf3_tput_1k",   "rf3_1m",        "rf3_64k",       "rf3_1k",
};

/* find returns the series of `key` on side `sd`, or NULL. */
static struct series *find(struct side *sd, const char *key)
{
	for (int i = 0; i < sd->n; i++)
		if (strcmp(sd->s[i].key, key) == 0)
			return &sd->s[i];
	return NULL;
}

/* load_file adds one run's "key value" lines to `sd`. */
static int load_file(struct side *sd, const char *path)
{
	char key[64];
	double v;
	FILE *f = fopen(path, "r");

	if (!f) {
		fprintf(stderr, "gazbench report: cannot read \"%s\"\n", path);
		return GAZ_EIO;
	}
	while (fscanf(f, "%63s %lf", key, &v) == 2) {
		struct series *s = find(sd, key);

		if (!s && sd->n < MAX_KEYS) {
			s = &sd->s[sd->n++];
			snprintf(s->key, sizeof(s->key), "%s", key);
		}
		if (s && s->n < MAX_RUNS)
			s->v[s->n++] = v;
	}
	fclose(f);
	sd->runs++;
	return 0;
}

/* load_side loads the comma-separated result files of one broker. */
static int load_side(struct side *sd, const char *name, const char *files)
{
	char *list = strdup(files), *save = NULL;
	int rc = 0;

	if (!list)
		return GAZ_ENOMEM;
	sd->name = name;
	for (char *p = strtok_r(list, ",", &save); p && !rc; p = strtok_r(NULL, ",", &save))
		rc = load_file(sd, p);
	free(list);
	return rc;
}

/* cmp_double orders doubles ascending for qsort. */
static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* stats gives the median over runs (the mean of the middle two for an
 * even count: with 2 runs, the mean) and the spread ((max - min) / median,
 * in %) of a key. The median keeps one disturbed run from moving the
 * figure; the spread shows that it happened. */
static bool stats(struct side *sd, const char *key, double *median, double *spread)
{
	struct series *s = find(sd, key);
	double v[MAX_RUNS];

	if (!s || s->n == 0)
		return false;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		if (rows[i].first_run && !strcmp(rows[i].key, key)) {
			*median = s->v[0];
			*spread = 0;
			return true;
		}
	memcpy(v, s->v, (size_t)s->n * sizeof(v[0]));
	qsort(v, (size_t)s->n, sizeof(v[0]), cmp_double);
	*median = s->n % 2 ? v[s->n / 2] : (v[s->n / 2 - 1] + v[s->n / 2]) / 2;
	*spread = *median != 0 ? 100.0 * (v[s->n - 1] - v[0]) / fabs(*median) : 0;
	return true;
}

/* cell formats "median ±spread%" into buf. */
static void cell(char *buf, size_t len, bool ok, double mean, double spread)
{
	if (!ok)
		snprintf(buf, len, "-");
	else if (fabs(mean) >= 10000)
		snprintf(buf, len, "%9.0f ±%3.0f%%", mean, spread);
	else if (mean != 0 && fabs(mean) < 0.1)
		snprintf(buf, len, "%9.5f ±%3.0f%%", mean, spread); /* idle cores */
	else
		snprintf(buf, len, "%9.1f ±%3.0f%%", mean, spread);
}

/* print_row prints one metric with ratio and goal verdict. */
bool bench_report_goals = true;

static void print_row(struct side *a, struct side *b, const struct row *rw)
{
	double am = 0, as = 0, bm = 0, bs = 0;
	bool ha = stats(a, rw->key, &am, &as), hb = stats(b, rw->key, &bm, &bs);
	char ca[32], cb[32], ratio[16] = "-", goal[24] = "";

	if (!ha && !hb)
		return; /* a workload neither run had (another mode) */
	cell(ca, sizeof(ca), ha, am, as);
	cell(cb, sizeof(cb), hb, bm, bs);
	if (ha && hb && bm > 0) {
		double q = am / bm;

		snprintf(ratio, sizeof(ratio), "%.2fx", q);
		if (bench_report_goals && rw->goal > 0)
			snprintf(goal, sizeof(goal), ">= %.1fx %s", rw->goal,
				 q >= rw->goal ? "met" : "MISSED");
		else if (bench_report_goals && rw->goal < 0)
			snprintf(goal, sizeof(goal), "<= %.1fx %s", -rw->goal,
				 q <= -rw->goal ? "met" : "MISSED");
	}
	printf("%-40s %-5s %16s %16s %7s  %s\n", rw->label, rw->unit, ca, cb, ratio, goal);
}

/* print_cpu prints the cores each broker and the load generator used. */
static void print_cpu(struct side *a, struct side *b)
{
	printf("\nCPU cores used during each measured window (median over runs; a kind's brokers "
	       "summed; 2 cores in all)\n");
	printf("%-16s %14s %14s %14s %14s\n", "workload", "broker A", "gazbench(A)", "broker B",
	       "gazbench(B)");
	for (size_t i = 0; i < sizeof(cpu_keys) / sizeof(cpu_keys[0]); i++) {
		double v[4] = {0}, sp;
		bool h[4];
		char k[96];

		snprintf(k, sizeof(k), "%s.broker_cpu", cpu_keys[i]);
		h[0] = stats(a, k, &v[0], &sp);
		h[2] = stats(b, k, &v[2], &sp);
		snprintf(k, sizeof(k), "%s.client_cpu", cpu_keys[i]);
		h[1] = stats(a, k, &v[1], &sp);
		h[3] = stats(b, k, &v[3], &sp);
		if (!h[0] && !h[1] && !h[2] && !h[3])
			continue;
		printf("%-16s", cpu_keys[i]);
		for (int j = 0; j < 4; j++) {
			if (h[j])
				printf(" %14.2f", v[j]);
			else
				printf(" %14s", "-");
		}
		printf("\n");
	}
}

/* print_errors lists workloads where a broker failed appends or reads. */
static void print_errors(struct side *sd)
{
	for (int i = 0; i < sd->n; i++) {
		const char *dot = strrchr(sd->s[i].key, '.');
		double sum = 0;

		if (!dot || (strcmp(dot, ".errors") && strcmp(dot, ".read_missing")))
			continue;
		for (int j = 0; j < sd->s[i].n; j++)
			sum += sd->s[i].v[j];
		if (sum > 0)
			printf("note: %s: %s = %.0f over %d run(s)\n", sd->name, sd->s[i].key, sum,
			       sd->runs);
	}
}

int bench_report(const char *a_name, const char *a_files, const char *b_name,
		 const char *b_files)
{
	struct side *a = bench_xcalloc(1, sizeof(*a)), *b = bench_xcalloc(1, sizeof(*b));
	int rc = load_side(a, a_name, a_files);

	if (!rc)
		rc = load_side(b, b_name, b_files);
	if (!rc) {
		printf("\nA = %s (%d runs), B = %s (%d runs); each cell: median over runs "
		       "±(max-min)/median; ratio = A/B of the medians\n\n", a->name, a->runs, b->name,
		       b->runs);
		printf("%-40s %-5s %16s %16s %7s  %s\n", "workload (file:// store, backfill S3)", "unit",
		       "A", "B", "A/B", "goal");
		for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
			print_row(a, b, &rows[i]);
		print_cpu(a, b);
		print_errors(a);
		print_errors(b);
	}
	free(a);
	free(b);
	return rc;
}
