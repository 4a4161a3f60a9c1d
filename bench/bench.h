/*
 * bench.h - shared declarations of gazbench, the load generator that runs
 * the same workloads against gazette-c and Gazette's Go broker (bench/
 * README.md, perf.md Part C).
 *
 * Pieces:
 *   bench_ops.c     one Append RPC, one Read pass, Apply of specs (lib/rpc)
 *   bench_stats.c   latency samples, percentiles, CPU accounting, results
 *   bench_report.c  the side-by-side table from result files
 *   gazbench.c      command line and the workloads
 *
 * Everything here is a program, not a library: allocation failure aborts
 * through bench_xmalloc (style.md "Ownership and memory"). Functions still
 * return 0 or a negative GAZ_E* code for everything that can fail at run
 * time (RPCs, files). Times are CLOCK_MONOTONIC nanoseconds.
 */
#ifndef GAZ_BENCH_BENCH_H
#define GAZ_BENCH_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "protocol.pb-c.h"
#include "rpc/rpc.h"

/* ---- memory -------------------------------------------------------------- */

/* bench_xmalloc: malloc that aborts on failure (programs may, style.md). */
void *bench_xmalloc(size_t n);

/* bench_xcalloc: calloc that aborts on failure. */
void *bench_xcalloc(size_t n, size_t size);

/* ---- helpers (gazbench.c) ------------------------------------------------ */

/* bench_tls_ca: the CA file (PEM) trusted for https:// brokers
 * (gazbench run --tls-ca); NULL = the system's roots. */
extern const char *bench_tls_ca;

/* bench_channel opens a channel to a broker endpoint URL (http:// or
 * https://, the latter trusting bench_tls_ca); NULL when it cannot. */
struct gaz_rpc_channel *bench_channel(const char *url);

/* bench_report_goals: whether the report prints the goal column (off
 * when the two sides are one broker with and without TLS). */
extern bool bench_report_goals;

/* bench_sleep_until sleeps to a monotonic deadline (absolute ns). */
void bench_sleep_until(int64_t t_ns);

/* bench_gen_payload fills `len` bytes of buf with deterministic JSON lines
 * (~200 B each, fixed-seed xorshift). */
void bench_gen_payload(uint8_t *buf, size_t len);

/* ---- RPC operations (bench_ops.c) ---------------------------------------- */

/* Outcome of one Append RPC, beyond its return code. */
struct bench_append_result {
	int status;          /* Protocol__Status of the response, or -1 if none */
	int64_t commit_end;  /* commit.end offset when status is OK */
	int64_t acked_ns;    /* monotonic time the response arrived */
	char primary[128];   /* endpoint of the primary named by the response
	                      * header's route, or "" */
};

/* bench_append runs one Append RPC on `ch`: the request naming `journal`,
 * `len` bytes of `data` in content chunks of at most `chunk` bytes, the
 * empty commit message, a half-close, then the response and the stream's
 * end. `data` is borrowed for the call. Bounded by `deadline_ns`.
 * Returns 0 (committed), GAZ_EUNAVAIL (the broker answered a status worth
 * retrying: NO_JOURNAL_PRIMARY_BROKER, INSUFFICIENT_JOURNAL_BROKERS,
 * NOT_JOURNAL_PRIMARY_BROKER, or grpc UNAVAILABLE), GAZ_ERPC (any other
 * failure status or grpc error; detail in *st). Thread-safe across threads
 * sharing `ch` (each call is its own stream). */
int bench_append(struct gaz_rpc_channel *ch, const char *journal, const uint8_t *data,
		 size_t len, size_t chunk, int64_t deadline_ns, struct bench_append_result *res,
		 struct gaz_status *st);

/* bench_append_retry is bench_append retried every 50 ms while it returns
 * GAZ_EUNAVAIL (a journal not yet assigned right after Apply), until
 * `deadline_ns`. Returns bench_append's last code. */
int bench_append_retry(struct gaz_rpc_channel *ch, const char *journal, const uint8_t *data,
		       size_t len, int64_t deadline_ns, struct bench_append_result *res,
		       struct gaz_status *st);

/* bench_append_retries writes "STATUS n, ..." of the retries
 * bench_append_retry made since the last call (by the status that caused
 * each; UNAVAILABLE for a gRPC error) into buf, their sum into *total,
 * and starts counting anew. */
void bench_append_retries(char *buf, size_t cap, long *total);

/* Journal spec parameters the workloads vary. */
struct bench_spec {
	const char *name;       /* journal name, borrowed */
	int64_t fragment_len;   /* fragment.length, bytes */
	int replication;        /* 0 = 1 */
	const char *store;      /* fragment store URL, borrowed; NULL = "file:///" */
	int codec;              /* Protocol__CompressionCodec; 0 = NONE */
	int refresh_s;          /* refresh_interval, seconds; 0 = 30 */
};

/* bench_apply upserts `n` journal specs (their replication, codec, store
 * and refresh interval, defaulting to NONE, ["file:///"] and 30 s;
 * expect_mod_revision -1) in one Apply RPC. Returns 0, GAZ_ERPC (grpc error or a non-OK status, in *st). */
int bench_apply(struct gaz_rpc_channel *ch, const struct bench_spec *specs, size_t n,
		struct gaz_status *st);

/* bench_delete deletes `n` journals by name (expect_mod_revision -1) in one
 * Apply RPC. Same returns as bench_apply. */
int bench_delete(struct gaz_rpc_channel *ch, const char *const *names, size_t n,
		 struct gaz_status *st);

/* Called for each content chunk a read delivers: `off` is its journal
 * offset, `data`/`len` are borrowed for the call, `now_ns` the arrival
 * time. Returns true to keep reading. */
typedef bool (*bench_read_fn)(void *arg, int64_t off, const uint8_t *data, size_t len,
			      int64_t now_ns);

/* bench_read streams `journal` from `offset` (block = true: follow the
 * write head) and hands each content chunk to `fn` until `fn` returns
 * false, the stream reaches `end_offset` (> 0; 0 = no end), or
 * `deadline_ns` passes. The number of content bytes delivered is stored in
 * *got. Returns 0, GAZ_ETIMEDOUT (deadline passed first), GAZ_ERPC (a
 * non-OK status or grpc error, in *st). */
int bench_read(struct gaz_rpc_channel *ch, const char *journal, int64_t offset,
	       int64_t end_offset, bool block, int64_t deadline_ns, bench_read_fn fn,
	       void *arg, int64_t *got, struct gaz_status *st);

/* bench_retryable_status: whether an AppendResponse status (a
 * Protocol__Status) is one Gazette's client.Append retries. */
bool bench_retryable_status(int status);

/* ---- many blocking readers of one journal (bench_fanout.c) -------------- */

struct bench_fanout;

/* bench_fanout_open opens `n` blocking Reads of `journal` from `offset`,
 * spread over the `nch` channels `chs` (borrowed, outliving the fanout),
 * each ending by `deadline_ns`. No thread per reader: lib/rpc's pollers
 * count what each receives. Returns the fanout (free with
 * bench_fanout_close), or NULL with *st set when a stream cannot be
 * opened. */
struct bench_fanout *bench_fanout_open(struct gaz_rpc_channel *const *chs, int nch,
				       const char *journal, int64_t offset, int n,
				       int64_t deadline_ns, struct gaz_status *st);

/* bench_fanout_count: how many readers have received at least `bytes`
 * content bytes; *ended (if not NULL) how many streams ended (they should
 * not while the workload runs). */
int bench_fanout_count(struct bench_fanout *f, int64_t bytes, int *ended);

/* bench_fanout_bytes: content bytes received by all readers together. */
int64_t bench_fanout_bytes(struct bench_fanout *f);

/* bench_fanout_close cancels every stream and frees the fanout (NULL is
 * ignored). */
void bench_fanout_close(struct bench_fanout *f);

/* ---- closed-loop appenders on completion queues (bench_loops.c) --------- */

struct bench_samples;

/* One closed-loop appender of a throughput workload: Append RPCs of the
 * same size to `journal`, one after the other. */
struct bench_loop {
	const char *journal;             /* borrowed for the run */
	size_t off;                      /* payload offset of the next append */
	int64_t bytes, appends, errors;  /* appends acknowledged OK inside the
	                                  * window, and failed ones (any time) */
	struct bench_samples *lat;       /* start-to-ack ns of the counted ones */
	char first_err[512];             /* the first failure, "" if none */
};

/* bench_loops_run runs n loops against `target` (http://host:port) on a
 * channel of its own (one connection), driven by `threads` threads, each
 * polling its own completion queue for its share of the loops. Each append
 * is the RPC of bench_append with one content message of `size` bytes
 * sliced from `payload` (payload_len > size bytes, borrowed). Loops start
 * at once and start no append at or after end_ns; those acknowledged in
 * [start_ns, end_ns] (CLOCK_MONOTONIC ns) are counted. A failed append is
 * counted and, if retryable (UNAVAILABLE, or a status Gazette's client
 * retries), followed by a 10 ms pause. Returns when every loop's last RPC
 * has ended (each has a 10 s deadline): 0, or GAZ_EINVAL for bad
 * arguments. */
int bench_loops_run(const char *target, const uint8_t *payload, size_t payload_len,
		    size_t size, struct bench_loop *loops, int n, int threads, int64_t start_ns,
		    int64_t end_ns);

/* ---- samples and results (bench_stats.c) --------------------------------- */

/* A bounded array of latency samples (ns). Owned by its creator: release
 * with bench_samples_release. Not thread-safe: one writer; merge after. */
struct bench_samples {
	int64_t *v;
	size_t n, cap;     /* cap is the bound: samples past it are counted only */
	size_t dropped;
};

void bench_samples_init(struct bench_samples *s, size_t cap);
void bench_samples_release(struct bench_samples *s);

/* bench_samples_add records one sample (or counts it dropped when full). */
void bench_samples_add(struct bench_samples *s, int64_t ns);

/* bench_samples_merge appends src's samples to dst (growing dst's cap). */
void bench_samples_merge(struct bench_samples *dst, const struct bench_samples *src);

/* bench_samples_pct sorts once (in place) and returns the q-quantile
 * (0 <= q <= 1, nearest rank) in ns; 0 when empty. Exact: no bucketing. */
int64_t bench_samples_pct(struct bench_samples *s, double q);

/* CPU time of this process and of the broker under test, in ns. */
struct bench_cpu {
	int64_t self_ns;
	int64_t broker_ns;    /* -1 when no broker pid is known */
	int64_t wall_ns;
};

/* bench_cpu_take samples both; the broker's figure is the sum over the
 * `npids` broker processes (npids 0: not sampled). */
void bench_cpu_take(struct bench_cpu *c, const int *pids, int npids);

/* bench_proc_status_kib: the "<field>: N kB" line of /proc/<pid>/status
 * (e.g. "VmRSS"), in KiB; -1 when the process or the field is missing. */
int64_t bench_proc_status_kib(int pid, const char *field);

/* bench_sched_take snapshots the nanoseconds on a CPU of every thread of
 * the `npids` processes, from /proc/<pid>/task/<tid>/schedstat
 * (nanosecond resolution, where /proc/<pid>/stat counts 10 ms ticks);
 * NULL when a process is gone. bench_sched_delta gives the time spent
 * between two snapshots (-1 if either is NULL): each thread's growth, a
 * thread born since counted whole. A thread that ended between them is
 * left out, not subtracted: a pool thread ends after an idle time, so
 * what it ran in the window is all but nothing (summing the threads
 * alive at each end made the window's CPU negative when one ended). */
struct bench_sched;
struct bench_sched *bench_sched_take(const int *pids, int npids);
int64_t bench_sched_delta(const struct bench_sched *before, const struct bench_sched *after);
void bench_sched_free(struct bench_sched *s);

/* bench_cpu_cores: CPU cores used between two samples (self or broker). */
double bench_cpu_cores(const struct bench_cpu *a, const struct bench_cpu *b, bool broker);

/* The result file: "key value" lines, one metric each. */
struct bench_out {
	FILE *f;        /* NULL: no file */
	bool verbose;   /* echo every metric to stdout */
};

/* bench_out_put writes `key value` to the result file (and to stdout when
 * verbose). */
void bench_out_put(struct bench_out *o, const char *key, double value);

/* ---- backfill (bench_backfill.c) ----------------------------------------- */

/* bench_backfill_main is `gazbench backfill` (argv[0] = "backfill"): the
 * backfill workload against one broker with an S3 store. Returns the
 * process exit status. */
int bench_backfill_main(int argc, char **argv);

/* ---- report (bench_report.c) --------------------------------------------- */

/* bench_report reads the result files of broker A (ours) and broker B
 * (Gazette) and prints the side-by-side table. `a_files`/`b_files` are
 * comma-separated paths. Returns 0, GAZ_EIO (a file could not be read). */
int bench_report(const char *a_name, const char *a_files, const char *b_name,
		 const char *b_files);

#endif
