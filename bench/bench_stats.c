/*
 * bench_stats.c - latency samples, CPU accounting and the result file.
 *
 * Latencies are kept as exact samples (bounded arrays, sorted once for the
 * quantiles) rather than bucketed: a workload here records at most a few
 * hundred thousand, and exact ranks give far more than the 3 significant
 * digits perf.md asks for. A full array stops recording and counts the
 * overflow, so memory stays bounded whatever the rate.
 *
 * CPU: this process from getrusage, the broker from /proc/<pid>/stat
 * (utime + stime), so each workload reports the cores each side used.
 */
#include "bench/bench.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/clock.h"

void bench_samples_init(struct bench_samples *s, size_t cap)
{
	s->v = bench_xmalloc(cap * sizeof(*s->v));
	s->n = 0;
	s->cap = cap;
	s->dropped = 0;
}

void bench_samples_release(struct bench_samples *s)
{
	free(s->v);
	s->v = NULL;
	s->n = s->cap = s->dropped = 0;
}

void bench_samples_add(struct bench_samples *s, int64_t ns)
{
	if (s->n < s->cap)
		s->v[s->n++] = ns;
	else
		s->dropped++;
}

void bench_samples_merge(struct bench_samples *dst, const struct bench_samples *src)
{
	if (dst->n + src->n > dst->cap) {
		int64_t *v = realloc(dst->v, (dst->n + src->n) * sizeof(*v));

		if (!v) {
			fprintf(stderr, "gazbench: out of memory merging samples\n");
			abort();
		}
		dst->v = v;
		dst->cap = dst->n + src->n;
	}
	memcpy(dst->v + dst->n, src->v, src->n * sizeof(*src->v));
	dst->n += src->n;
	dst->dropped += src->dropped;
}

/* cmp_i64 orders int64 samples ascending for qsort. */
static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

int64_t bench_samples_pct(struct bench_samples *s, double q)
{
	size_t rank;

	if (s->n == 0)
		return 0;
	/* Sorting an already sorted array is cheap; keep it simple. */
	qsort(s->v, s->n, sizeof(*s->v), cmp_i64);
	rank = (size_t)(q * (double)s->n + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > s->n)
		rank = s->n;
	return s->v[rank - 1];
}

/* proc_cpu_ns reads utime + stime of `pid` from /proc; -1 on failure. */
static int64_t proc_cpu_ns(int pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (!(f = fopen(path, "r")))
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* Fields after the command name in parentheses: state is field 3,
	 * utime field 14, stime field 15 (proc(5)). */
	if (!(p = strrchr(buf, ')')) ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (int64_t)((ut + st) * (GAZ_NS_PER_S / (hz > 0 ? hz : 100)));
}

void bench_cpu_take(struct bench_cpu *c, const int *pids, int npids)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	c->self_ns = (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * GAZ_NS_PER_S +
		     (int64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
	c->broker_ns = npids > 0 ? 0 : -1;
	for (int i = 0; i < npids && c->broker_ns >= 0; i++) {
		int64_t ns = pids[i] > 0 ? proc_cpu_ns(pids[i]) : -1;
		c->broker_ns = ns < 0 ? -1 : c->broker_ns + ns;
	}
	c->wall_ns = gaz_mono_ns();
}

double bench_cpu_cores(const struct bench_cpu *a, const struct bench_cpu *b, bool broker)
{
	int64_t wall = b->wall_ns - a->wall_ns;

	if (wall <= 0)
		return 0;
	if (broker)
		return a->broker_ns < 0 || b->broker_ns < 0
			       ? -1
			       : (double)(b->broker_ns - a->broker_ns) / (double)wall;
	return (double)(b->self_ns - a->self_ns) / (double)wall;
}

void bench_out_put(struct bench_out *o, const char *key, double value)
{
	if (o->f) {
		fprintf(o->f, "%s %.6g\n", key, value);
		fflush(o->f);
	}
	if (o->verbose) {
		printf("  %-28s %12.6g\n", key, value);
		fflush(stdout);
	}
}

/* One thread's time on a CPU at a snapshot. */
struct sched_entry {
	int pid, tid;
	int64_t ns;
};

struct bench_sched {
	struct sched_entry *v;
	size_t n, cap;
};

struct bench_sched *bench_sched_take(const int *pids, int npids)
{
	struct bench_sched *s = calloc(1, sizeof(*s));

	for (int p = 0; s && p < npids; p++) {
		char path[64];
		struct dirent *e;
		DIR *d;

		snprintf(path, sizeof(path), "/proc/%d/task", pids[p]);
		if (!(d = opendir(path))) {
			bench_sched_free(s);
			return NULL;
		}
		while ((e = readdir(d))) {
			long long run = 0;
			FILE *f;
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "/proc/%d/task/%.16s/schedstat", pids[p], e->d_name);
			if (!(f = fopen(path, "r")))
				continue; /* ended meanwhile */
			if (fscanf(f, "%lld", &run) == 1) {
				if (s->n == s->cap) {
					size_t cap = s->cap ? 2 * s->cap : 256;
					struct sched_entry *nv = realloc(s->v, cap * sizeof(*nv));
					if (!nv) {
						fclose(f);
						closedir(d);
						bench_sched_free(s);
						return NULL;
					}
					s->v = nv;
					s->cap = cap;
				}
				s->v[s->n++] = (struct sched_entry){.pid = pids[p], .tid = atoi(e->d_name), .ns = run};
			}
			fclose(f);
		}
		closedir(d);
	}
	return s;
}

int64_t bench_sched_delta(const struct bench_sched *before, const struct bench_sched *after)
{
	int64_t sum = 0;

	if (!before || !after)
		return -1;
	for (size_t i = 0; i < after->n; i++) {
		const struct sched_entry *e = &after->v[i];
		int64_t was = 0;
		for (size_t k = 0; k < before->n; k++)
			if (before->v[k].pid == e->pid && before->v[k].tid == e->tid) {
				was = before->v[k].ns;
				break;
			}
		sum += e->ns - was;
	}
	return sum;
}

void bench_sched_free(struct bench_sched *s)
{
	if (s)
		free(s->v);
	free(s);
}

int64_t bench_proc_status_kib(int pid, const char *field)
{
	char path[64], line[256];
	long long kib = -1;
	size_t fl = strlen(field);
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, fl) && sscanf(line + fl, ": %lld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}
