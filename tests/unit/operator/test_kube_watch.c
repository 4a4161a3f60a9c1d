/*
 * test_kube_watch.c - the pure parts of watching: splitting a chunked
 * body into lines whatever the chunk boundaries, decoding watch events
 * (including the in-stream 410 that forces a relist), object keys, and
 * the work queue's de-duplication and ordering.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/clock.h"
#include "operator/informer.h"
#include "operator/kube.h"
#include "operator/queue.h"

struct collected {
	char lines[8][128];
	int n;
	int stop_after; /* return 99 after this many lines; 0 = never */
};

static int collect(void *arg, const char *line, size_t len)
{
	struct collected *c = arg;

	assert_true(len < sizeof(c->lines[0]));
	memcpy(c->lines[c->n], line, len);
	c->lines[c->n][len] = '\0';
	c->n++;
	return c->stop_after && c->n == c->stop_after ? 99 : 0;
}

static void test_lines_any_chunking(void **state)
{
	static const char body[] = "{\"a\":1}\n\r\n{\"b\":2}\r\n\n{\"c\":3}\n";
	size_t blen = strlen(body);

	(void)state;
	/* Every split into chunks of size k gives the same three lines. */
	for (size_t k = 1; k <= blen; k++) {
		struct gaz_kube_lines l = {.max = 64};
		struct collected c = {0};
		for (size_t off = 0; off < blen; off += k) {
			size_t n = blen - off < k ? blen - off : k;
			assert_int_equal(gaz_kube_lines_feed(&l, body + off, n, collect, &c), 0);
		}
		assert_int_equal(c.n, 3);
		assert_string_equal(c.lines[0], "{\"a\":1}");
		assert_string_equal(c.lines[1], "{\"b\":2}");
		assert_string_equal(c.lines[2], "{\"c\":3}");
		assert_int_equal(l.len, 0);
		gaz_kube_lines_release(&l);
	}
}

static void test_lines_bounds_and_stop(void **state)
{
	struct gaz_kube_lines l = {.max = 8};
	struct collected c = {.stop_after = 1};

	(void)state;
	assert_int_equal(gaz_kube_lines_feed(&l, "12345", 5, collect, &c), 0);
	assert_int_equal(gaz_kube_lines_feed(&l, "6789\n", 5, collect, &c), GAZ_ERANGE);
	gaz_kube_lines_release(&l);
	l.max = 64;
	assert_int_equal(gaz_kube_lines_feed(&l, "x\ny\n", 4, collect, &c), 99);
	assert_int_equal(c.n, 1);
	gaz_kube_lines_release(&l);
}

static void test_event_parse(void **state)
{
	static const char added[] = "{\"type\":\"ADDED\",\"object\":{\"kind\":\"JournalSpec\","
				    "\"metadata\":{\"name\":\"j\",\"namespace\":\"ns\",\"resourceVersion\":\"42\"}}}";
	static const char bookmark[] = "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"77\","
				       "\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}";
	static const char gone[] = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"status\":\"Failure\","
				   "\"message\":\"too old resource version: 5 (90)\",\"reason\":\"Expired\",\"code\":410}}";
	struct gaz_kube_event ev;
	struct gaz_status st = {0};
	char key[64];

	(void)state;
	assert_int_equal(gaz_kube_event_parse(added, strlen(added), &ev, &st), 0);
	assert_int_equal(ev.type, GAZ_KUBE_ADDED);
	assert_string_equal(ev.resource_version, "42");
	assert_string_equal(gaz_object_key(ev.object, key, sizeof(key)), "ns/j");
	gaz_kube_event_release(&ev);
	assert_int_equal(gaz_kube_event_parse(bookmark, strlen(bookmark), &ev, &st), 0);
	assert_int_equal(ev.type, GAZ_KUBE_BOOKMARK);
	assert_string_equal(ev.resource_version, "77");
	assert_null(gaz_object_key(ev.object, key, sizeof(key)));
	gaz_kube_event_release(&ev);
	assert_int_equal(gaz_kube_event_parse(gone, strlen(gone), &ev, &st), 0);
	assert_int_equal(ev.type, GAZ_KUBE_ERROR);
	assert_int_equal(ev.code, 410);
	assert_null(ev.resource_version);
	gaz_kube_event_release(&ev);
	/* A prefix of a line is not an event. */
	assert_int_equal(gaz_kube_event_parse(added, 20, &ev, &st), GAZ_EPROTO);
	assert_null(ev.object);
}

static void test_event_parse_rejects(void **state)
{
	static const char *const bad[] = {
		"not json", "[]", "{\"type\":\"ADDED\"}", "{\"type\":\"ADDED\",\"object\":[]}",
		"{\"type\":\"RENAMED\",\"object\":{}}", "{\"object\":{}}", "{\"type\":7,\"object\":{}}",
	};
	struct gaz_kube_event ev;
	struct gaz_status st;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&st, 0, sizeof(st));
		assert_int_equal(gaz_kube_event_parse(bad[i], strlen(bad[i]), &ev, &st), GAZ_EPROTO);
		assert_null(ev.object);
		assert_true(st.msg[0] != '\0');
	}
}

static void test_queue(void **state)
{
	struct gaz_queue *q = gaz_queue_new(3);
	char *k;

	(void)state;
	assert_non_null(q);
	assert_true(gaz_queue_add_after(q, "ns/b", 60000));
	assert_true(gaz_queue_add_after(q, "ns/a", 0));
	assert_true(gaz_queue_add_after(q, "ns/a", 0)); /* de-duplicated */
	assert_true(gaz_queue_add_after(q, "ns/c", 30));
	assert_int_equal(gaz_queue_len(q), 3);
	assert_false(gaz_queue_add_after(q, "ns/d", 0)); /* full */
	assert_non_null(k = gaz_queue_take(q, 0));
	assert_string_equal(k, "ns/a");
	free(k);
	int64_t t0 = gaz_mono_ns();
	assert_non_null(k = gaz_queue_take(q, 5000)); /* waits for ns/c's due time */
	assert_string_equal(k, "ns/c");
	assert_true(gaz_mono_ns() - t0 >= 20 * GAZ_NS_PER_MS);
	free(k);
	assert_null(gaz_queue_take(q, 50)); /* ns/b not due yet */
	assert_true(gaz_queue_add_after(q, "ns/b", 0)); /* earlier due time wins */
	assert_non_null(k = gaz_queue_take(q, 0));
	assert_string_equal(k, "ns/b");
	free(k);
	gaz_queue_shutdown(q);
	assert_false(gaz_queue_add_after(q, "ns/a", 0));
	assert_null(gaz_queue_take(q, 1000));
	gaz_queue_free(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines_any_chunking),
		cmocka_unit_test(test_lines_bounds_and_stop),
		cmocka_unit_test(test_event_parse),
		cmocka_unit_test(test_event_parse_rejects),
		cmocka_unit_test(test_queue),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
