/* test_metrics.c - lib/common/metrics: registry, values, text format 0.0.4. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/metrics.h"

static char *render(struct gaz_metrics *r)
{
	struct gaz_status st = {0};
	char *out = NULL;
	size_t len = 0;

	assert_int_equal(gaz_metrics_render(r, &out, &len, &st), 0);
	assert_int_equal(strlen(out), len);
	return out;
}

static void test_counter_labels_exact(void **state)
{
	struct gaz_metrics *r;
	struct gaz_metric *m, *g;
	char *text;
	(void)state;

	assert_int_equal(gaz_metrics_new(&r), 0);
	m = gaz_metrics_counter(r, "gazette_journal_server_completed_totals",
				"Total number of completed RPCs", "operation,status");
	assert_non_null(m);
	gaz_metric_inc(gaz_metric_with(m, "Read", "ok"));
	gaz_metric_add(gaz_metric_with(m, "Append", "ok"), 41);
	gaz_metric_inc(gaz_metric_with(m, "Append", "ok"));
	gaz_metric_inc(gaz_metric_with(m, "Append", "WRONG_APPEND_OFFSET"));
	g = gaz_metrics_gauge(r, "aaa_first", "Sorted first", NULL);
	gaz_metric_set(gaz_metric_with(g), 3);
	text = render(r);
	assert_string_equal(text,
			    "# HELP aaa_first Sorted first\n"
			    "# TYPE aaa_first gauge\n"
			    "aaa_first 3\n"
			    "# HELP gazette_journal_server_completed_totals Total number of completed RPCs\n"
			    "# TYPE gazette_journal_server_completed_totals counter\n"
			    "gazette_journal_server_completed_totals{operation=\"Append\",status=\"WRONG_APPEND_OFFSET\"} 1\n"
			    "gazette_journal_server_completed_totals{operation=\"Append\",status=\"ok\"} 42\n"
			    "gazette_journal_server_completed_totals{operation=\"Read\",status=\"ok\"} 1\n");
	free(text);
	/* Rendering is stable. */
	text = render(r);
	assert_non_null(strstr(text, "status=\"ok\"} 42\n"));
	free(text);
	gaz_metrics_free(r);
}

static void test_escaping(void **state)
{
	struct gaz_metrics *r;
	struct gaz_metric *m;
	char *text;
	(void)state;

	assert_int_equal(gaz_metrics_new(&r), 0);
	m = gaz_metrics_counter(r, "esc_total", "Help with \\ and\nnewline \"quoted\"", "journal");
	gaz_metric_inc(gaz_metric_with(m, "a\"b\\c\nd"));
	gaz_metric_inc(gaz_metric_with(m, NULL));
	text = render(r);
	assert_string_equal(text, "# HELP esc_total Help with \\\\ and\\nnewline \"quoted\"\n"
				  "# TYPE esc_total counter\n"
				  "esc_total{journal=\"\"} 1\n"
				  "esc_total{journal=\"a\\\"b\\\\c\\nd\"} 1\n");
	free(text);
	gaz_metrics_free(r);
}

static void test_histogram(void **state)
{
	static const double b[] = {0.1, 0.5, 1};
	struct gaz_metrics *r;
	struct gaz_metric *h;
	struct gaz_metric_child *c;
	char *text;
	(void)state;

	assert_int_equal(gaz_metrics_new(&r), 0);
	h = gaz_metrics_histogram(r, "grpc_server_handling_seconds", "RPC latency", "grpc_method",
				  b, 3);
	assert_non_null(h);
	c = gaz_metric_with(h, "Read");
	gaz_metric_observe(c, 0.05);
	gaz_metric_observe(c, 0.25);
	gaz_metric_observe(c, 0.5); /* upper bounds are inclusive */
	gaz_metric_observe(c, 2);
	assert_true(gaz_metric_value(c) == 4);
	text = render(r);
	assert_string_equal(text,
			    "# HELP grpc_server_handling_seconds RPC latency\n"
			    "# TYPE grpc_server_handling_seconds histogram\n"
			    "grpc_server_handling_seconds_bucket{grpc_method=\"Read\",le=\"0.1\"} 1\n"
			    "grpc_server_handling_seconds_bucket{grpc_method=\"Read\",le=\"0.5\"} 3\n"
			    "grpc_server_handling_seconds_bucket{grpc_method=\"Read\",le=\"1\"} 3\n"
			    "grpc_server_handling_seconds_bucket{grpc_method=\"Read\",le=\"+Inf\"} 4\n"
			    "grpc_server_handling_seconds_sum{grpc_method=\"Read\"} 2.8\n"
			    "grpc_server_handling_seconds_count{grpc_method=\"Read\"} 4\n");
	free(text);

	/* Default buckets, no labels. */
	h = gaz_metrics_histogram(r, "lat_seconds", "x", NULL, NULL, 0);
	gaz_metric_observe(gaz_metric_with(h), 0.007);
	text = render(r);
	assert_non_null(strstr(text, "lat_seconds_bucket{le=\"0.005\"} 0\n"
				     "lat_seconds_bucket{le=\"0.01\"} 1\n"));
	assert_non_null(strstr(text, "lat_seconds_bucket{le=\"2.5\"} 1\n"));
	assert_non_null(strstr(text, "lat_seconds_bucket{le=\"10\"} 1\n"
				     "lat_seconds_bucket{le=\"+Inf\"} 1\n"
				     "lat_seconds_sum 0.007\n"
				     "lat_seconds_count 1\n"));
	free(text);
	gaz_metrics_free(r);
}

static void test_gauges(void **state)
{
	struct gaz_metrics *r;
	struct gaz_metric *gi, *gf;
	struct gaz_metric_child *ci, *cf;
	char *text;
	(void)state;

	assert_int_equal(gaz_metrics_new(&r), 0);
	gi = gaz_metrics_gauge(r, "gazette_write_head", "Write head", "journal");
	gf = gaz_metrics_gaugef(r, "ratio", "A double", NULL);
	ci = gaz_metric_with(gi, "a/b");
	cf = gaz_metric_with(gf);
	gaz_metric_set(ci, 10);
	gaz_metric_add(ci, -3);
	gaz_metric_setf(cf, 1.5);
	gaz_metric_addf(cf, 0.25);
	gaz_metric_add(cf, 2);
	assert_true(gaz_metric_value(ci) == 7);
	assert_true(gaz_metric_value(cf) == 3.75);
	assert_ptr_equal(gaz_metric_with(gi, "a/b"), ci);
	text = render(r);
	assert_non_null(strstr(text, "# TYPE gazette_write_head gauge\n"
				     "gazette_write_head{journal=\"a/b\"} 7\n"));
	assert_non_null(strstr(text, "ratio 3.75\n"));
	free(text);

	/* Go 'g' shortest formatting of doubles. */
	static const struct {
		double v;
		const char *s;
	} fmts[] = {
		{1e6, "1e+06"},       {123456, "123456"}, {1234567, "1.234567e+06"},
		{0.005, "0.005"},     {1e-5, "1e-05"},    {-0.25, "-0.25"},
		{0.1 + 0.2, "0.30000000000000004"},       {0, "0"},
		{INFINITY, "+Inf"},   {-INFINITY, "-Inf"}, {NAN, "NaN"},
	};
	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
		char want[64];
		gaz_metric_setf(cf, fmts[i].v);
		text = render(r);
		snprintf(want, sizeof(want), "\nratio %s\n", fmts[i].s);
		if (!strstr(text, want))
			fail_msg("want \"%s\" in:\n%s", fmts[i].s, text);
		free(text);
	}
	gaz_metrics_free(r);
}

static void test_registration(void **state)
{
	struct gaz_metrics *r;
	struct gaz_metric *a, *b;
	struct gaz_status st = {0};
	struct gaz_metric_opts o = {.type = GAZ_METRIC_COUNTER, .name = "x_total", .labels = "a"};
	char *text;
	(void)state;

	assert_int_equal(gaz_metrics_new(&r), 0);
	assert_int_equal(gaz_metrics_register(r, &o, &a, &st), 0);
	assert_int_equal(gaz_metrics_register(r, &o, &b, &st), 0);
	assert_ptr_equal(a, b);
	o.labels = "b";
	assert_int_equal(gaz_metrics_register(r, &o, &b, &st), GAZ_EEXIST);
	o.labels = "a";
	o.type = GAZ_METRIC_GAUGE;
	gaz_status_clear(&st);
	assert_int_equal(gaz_metrics_register(r, &o, &b, &st), GAZ_EEXIST);
	assert_null(gaz_metrics_counter(r, "bad-name", "x", NULL));
	assert_null(gaz_metrics_counter(r, "9bad", "x", NULL));
	assert_null(gaz_metrics_counter(r, "ok_total", "x", "good,bad label"));
	assert_null(gaz_metrics_counter(r, "ok_total", "x", "__reserved"));
	assert_null(gaz_metrics_histogram(r, "h_seconds", "x", "le", NULL, 0));
	static const double unsorted[] = {1, 0.5};
	assert_null(gaz_metrics_histogram(r, "h_seconds", "x", NULL, unsorted, 2));
	assert_non_null(gaz_metrics_counter(r, "ns:sub_total", "colons ok", NULL));
	/* NULL tolerance. */
	assert_null(gaz_metric_with(NULL, "x"));
	gaz_metric_inc(NULL);
	gaz_metric_observe(NULL, 1);
	/* A labelled family without children is not rendered; an unlabelled one is, at 0. */
	text = render(r);
	assert_null(strstr(text, "x_total"));
	assert_non_null(strstr(text, "ns:sub_total 0\n"));
	free(text);
	gaz_metrics_free(r);
}

#define THREADS 4
#define ITERS 200000

struct worker {
	struct gaz_metric *m, *f, *h;
	int id;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	static const char *const ops[] = {"Read", "Append", "List", "Apply", "Replicate"};

	for (int i = 0; i < ITERS; i++) {
		/* Look the child up every time, racing its creation with peers. */
		gaz_metric_inc(gaz_metric_with(w->m, ops[(i + w->id) % 5]));
		gaz_metric_addf(gaz_metric_with(w->f), 0.5);
		if (i % 16 == 0)
			gaz_metric_observe(gaz_metric_with(w->h, "x"), 0.25);
	}
	return NULL;
}

static void test_concurrent(void **state)
{
	struct gaz_metrics *r;
	struct worker w[THREADS];
	pthread_t t[THREADS];
	double total = 0;
	(void)state;

	assert_int_equal(gaz_metrics_new(&r), 0);
	struct gaz_metric *m = gaz_metrics_counter(r, "ops_total", "x", "operation");
	struct gaz_metric *f = gaz_metrics_counterf(r, "bytes_total", "x", NULL);
	struct gaz_metric *h = gaz_metrics_histogram(r, "lat_seconds", "x", "k", NULL, 0);
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){m, f, h, i};
		assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	static const char *const ops[] = {"Read", "Append", "List", "Apply", "Replicate"};
	for (int i = 0; i < 5; i++)
		total += gaz_metric_value(gaz_metric_with(m, ops[i]));
	assert_true(total == (double)THREADS * ITERS);
	assert_true(gaz_metric_value(gaz_metric_with(f)) == THREADS * ITERS * 0.5);
	assert_true(gaz_metric_value(gaz_metric_with(h, "x")) == THREADS * (ITERS / 16));
	char *text = render(r);
	char want[128];
	snprintf(want, sizeof(want), "bytes_total %d\n", THREADS * ITERS / 2);
	assert_non_null(strstr(text, want));
	/* Exactly five children of ops_total. */
	int n = 0;
	for (char *p = text; (p = strstr(p, "ops_total{")); p++)
		n++;
	assert_int_equal(n, 5);
	free(text);
	gaz_metrics_free(r);
}

static void test_process(void **state)
{
	struct gaz_metrics *r;
	struct gaz_status st = {0};
	char *text, *p;
	(void)state;

	assert_int_equal(gaz_metrics_new(&r), 0);
	assert_int_equal(gaz_metrics_process(r, &st), 0);
	assert_int_equal(gaz_metrics_process(r, &st), 0); /* idempotent */
	text = render(r);
	assert_non_null(strstr(text, "# TYPE process_cpu_seconds_total counter\n"));
	assert_non_null(strstr(text, "# TYPE process_open_fds gauge\n"));
	assert_non_null(p = strstr(text, "\nprocess_resident_memory_bytes "));
	assert_true(strtod(p + strlen("\nprocess_resident_memory_bytes "), NULL) > 1e5);
	assert_non_null(p = strstr(text, "\nprocess_start_time_seconds "));
	assert_true(strtod(p + strlen("\nprocess_start_time_seconds "), NULL) > 1.5e9);
	assert_non_null(p = strstr(text, "\nprocess_open_fds "));
	assert_true(strtod(p + strlen("\nprocess_open_fds "), NULL) >= 3);
	assert_non_null(strstr(text, "\nprocess_max_fds "));
	/* One TYPE line per family even after two registrations. */
	assert_null(strstr(strstr(text, "# TYPE process_open_fds") + 1, "# TYPE process_open_fds"));
	free(text);
	gaz_metrics_free(r);
}

static void test_default_registry(void **state)
{
	struct gaz_metric *m;
	char *text;
	(void)state;

	assert_ptr_equal(gaz_metrics_default(), gaz_metrics_default());
	m = gaz_metrics_counter(NULL, "default_reg_total", "in the default registry", NULL);
	assert_non_null(m);
	gaz_metric_add(gaz_metric_with(m), 5);
	text = render(NULL);
	assert_non_null(strstr(text, "default_reg_total 5\n"));
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counter_labels_exact),
		cmocka_unit_test(test_escaping),
		cmocka_unit_test(test_histogram),
		cmocka_unit_test(test_gauges),
		cmocka_unit_test(test_registration),
		cmocka_unit_test(test_concurrent),
		cmocka_unit_test(test_process),
		cmocka_unit_test(test_default_registry),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
