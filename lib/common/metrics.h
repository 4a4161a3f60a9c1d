/*
 * metrics.h - a Prometheus registry: counters, gauges and fixed-bucket
 * histograms with labels, rendered in the text exposition format 0.0.4
 * (what Gazette's /debug/metrics serves through client_golang).
 *
 * Model (as client_golang): a *family* (struct gaz_metric) has a name, help,
 * type and label names fixed at registration; a *child* (struct
 * gaz_metric_child) is one combination of label values. Look a child up once
 * and keep it when the label values are fixed:
 *
 *   static struct gaz_metric *started;
 *   started = gaz_metrics_counter(NULL, "gazette_journal_server_started_totals",
 *                                 "Total number of started RPCs", "operation");
 *   gaz_metric_inc(gaz_metric_with(started, "Append"));
 *
 * Cost: value updates are single atomic operations (a CAS loop for doubles);
 * child lookup is a lock-free hash probe; only creating a child, registering
 * a family and rendering take a mutex. Children are never removed before the
 * registry is freed, so pointers stay valid for its lifetime.
 *
 * NULL tolerance: the convenience registration calls return NULL on failure
 * (out of memory, invalid or conflicting definition, logged at error level);
 * gaz_metric_with(NULL, ...) returns NULL and every value operation on a
 * NULL child is a no-op, so instrumentation never crashes a broker.
 *
 * Must not include grpc or curl; the process collector reads /proc.
 */
#ifndef GAZ_COMMON_METRICS_H
#define GAZ_COMMON_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Content-Type of gaz_metrics_render output. */
#define GAZ_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Upper bound on rendered text; past it render fails with GAZ_ERANGE. */
#define GAZ_METRICS_RENDER_MAX (64u << 20)

/* client_golang's prometheus.DefBuckets, in seconds. */
#define GAZ_METRICS_DEF_BUCKETS_N 11
extern const double gaz_metrics_def_buckets[GAZ_METRICS_DEF_BUCKETS_N];

enum gaz_metric_type {
	GAZ_METRIC_COUNTER = 0,
	GAZ_METRIC_GAUGE,
	GAZ_METRIC_HISTOGRAM,
};

struct gaz_metrics;       /* a registry */
struct gaz_metric;        /* a family */
struct gaz_metric_child;  /* one series (label values) of a family */

struct gaz_metric_opts {
	enum gaz_metric_type type;
	const char *name;          /* [a-zA-Z_:][a-zA-Z0-9_:]* */
	const char *help;          /* may be NULL */
	const char *labels;        /* comma-separated label names, "operation,status";
	                            * NULL or "" = none; "le" is reserved for histograms */
	bool is_double;            /* counter/gauge values are doubles, else int64 */
	const double *buckets;     /* histogram upper bounds, strictly increasing;
	                            * NULL = gaz_metrics_def_buckets; +Inf is implicit */
	size_t nbuckets;
};

/* gaz_metrics_default returns the process-wide registry (created on first
 * use, never freed). Thread-safe. NULL only if that allocation failed. */
struct gaz_metrics *gaz_metrics_default(void);

/* gaz_metrics_new creates an empty registry into *out (free with
 * gaz_metrics_free). Returns 0 or GAZ_ENOMEM. */
int gaz_metrics_new(struct gaz_metrics **out);

/* gaz_metrics_free releases a registry, its families and children. No other
 * thread may use it or anything registered in it. NULL is a no-op. */
void gaz_metrics_free(struct gaz_metrics *r);

/* gaz_metrics_register adds a family to `r` (NULL = default registry) and
 * returns it in *out (borrowed; valid for the registry's lifetime).
 * Registering a name again with the same type, kind, labels and buckets
 * returns the existing family (so modules may register idempotently).
 * Returns 0, GAZ_EINVAL (bad name, label or buckets), GAZ_EEXIST (name taken
 * by a different definition) or GAZ_ENOMEM; detail in `st`. Thread-safe. */
int gaz_metrics_register(struct gaz_metrics *r, const struct gaz_metric_opts *o,
			 struct gaz_metric **out, struct gaz_status *st);

/* Convenience registration; NULL on failure (see above). `labels` as in
 * gaz_metric_opts. Counters and gauges are int64 unless suffixed `f`. */
struct gaz_metric *gaz_metrics_counter(struct gaz_metrics *r, const char *name,
				       const char *help, const char *labels);
struct gaz_metric *gaz_metrics_counterf(struct gaz_metrics *r, const char *name,
					const char *help, const char *labels);
struct gaz_metric *gaz_metrics_gauge(struct gaz_metrics *r, const char *name,
				     const char *help, const char *labels);
struct gaz_metric *gaz_metrics_gaugef(struct gaz_metrics *r, const char *name,
				      const char *help, const char *labels);
struct gaz_metric *gaz_metrics_histogram(struct gaz_metrics *r, const char *name,
					 const char *help, const char *labels,
					 const double *buckets, size_t nbuckets);

/* gaz_metric_with returns the child for the given label values: exactly as
 * many `const char *` arguments as the family has labels (none for an
 * unlabelled family); a NULL value is taken as "". Creates the child on
 * first use. Returns a borrowed pointer valid for the registry's lifetime,
 * or NULL if `m` is NULL or memory ran out. Thread-safe. */
struct gaz_metric_child *gaz_metric_with(struct gaz_metric *m, ...);

/* gaz_metric_withv is gaz_metric_with taking an array of label values. */
struct gaz_metric_child *gaz_metric_withv(struct gaz_metric *m, const char *const *values);

/* Value operations; thread-safe, lock-free, no-ops on a NULL child. On an
 * int64 family the double forms round to the nearest integer; on a double
 * family the int64 forms convert. `set` on a counter is meant for mirrored
 * external totals (e.g. process_cpu_seconds_total) only. */
void gaz_metric_inc(struct gaz_metric_child *c);
void gaz_metric_add(struct gaz_metric_child *c, int64_t v);
void gaz_metric_addf(struct gaz_metric_child *c, double v);
void gaz_metric_set(struct gaz_metric_child *c, int64_t v);
void gaz_metric_setf(struct gaz_metric_child *c, double v);

/* gaz_metric_observe records `v` (e.g. seconds) into a histogram child. */
void gaz_metric_observe(struct gaz_metric_child *c, double v);

/* gaz_metric_value reads a counter or gauge (a histogram's count). 0 for NULL. */
double gaz_metric_value(const struct gaz_metric_child *c);

/* gaz_metrics_on_render registers `fn(arg)`, called at the start of every
 * render of `r` (NULL = default) to refresh gauges from outside state. At most
 * 16 per registry. Returns 0, GAZ_ERANGE or GAZ_EINVAL. */
int gaz_metrics_on_render(struct gaz_metrics *r, void (*fn)(void *arg), void *arg);

/* gaz_metrics_process registers process_cpu_seconds_total,
 * process_resident_memory_bytes, process_virtual_memory_bytes,
 * process_virtual_memory_max_bytes, process_network_receive_bytes_total,
 * process_network_transmit_bytes_total, process_open_fds, process_max_fds
 * and process_start_time_seconds (as client_golang's process collector),
 * refreshed from /proc at render time.
 * Idempotent. Returns 0 or a registration error. */
int gaz_metrics_process(struct gaz_metrics *r, struct gaz_status *st);

/* gaz_metrics_render writes every family of `r` (NULL = default) with at
 * least one child, sorted by name, children sorted by label values, in text
 * format 0.0.4: "# HELP", "# TYPE", samples with escaped label values,
 * histograms as cumulative _bucket{le=...}, _sum and _count. *out receives a
 * NUL-terminated heap buffer (free with free()) and *len its length.
 * Returns 0, GAZ_ENOMEM or GAZ_ERANGE (over GAZ_METRICS_RENDER_MAX).
 * Thread-safe; values are read atomically one by one (a histogram's count is
 * the sum of its buckets, so the two always agree). */
int gaz_metrics_render(struct gaz_metrics *r, char **out, size_t *len, struct gaz_status *st);

#endif
