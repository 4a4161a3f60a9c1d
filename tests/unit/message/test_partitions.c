/* test_partitions.c - the mappings over a list of partitions: FNV-1a-32
 * and the journals Gazette's ModuloMapping and RendezvousMapping (v0.103.0)
 * pick for the same keys over the same five journals; random picks stay
 * in range; an empty list and a journal without a framing are errors.
 * The polled list itself runs against real brokers in the integration
 * suite; here a snapshot is made by hand (this file includes the .c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "message/partitions.c"

static const char *JOURNALS[] = {"a/1", "a/2", "a/3", "b/x", "b/y"};

static const struct {
	const char *key;
	uint32_t fnv;
	const char *modulo, *rendezvous;
} VECS[] = {
	/* Printed by Gazette's message package over the journals above. */
	{"", 0x811c9dc5u, "a/2", "b/y"},
	{"k1", 0x983d80c1u, "b/y", "b/y"},
	{"k2", 0x953d7c08u, "a/3", "b/y"},
	{"hello", 0x4f9f2cabu, "b/x", "a/1"},
	{"stream-42", 0xa7f03b02u, "b/x", "b/x"},
	{"zzzzzz", 0x70849355u, "a/2", "a/2"},
};

/* partitions_of: a gaz_partitions holding the given journals, all JSON
 * but `no_framing` (an index, or -1). No thread runs. */
static struct gaz_partitions *partitions_of(const char **names, size_t n, int no_framing)
{
	struct gaz_partitions *p = calloc(1, sizeof *p);
	assert_non_null(p);
	pthread_mutex_init(&p->mu, NULL);
	p->snap = calloc(1, sizeof *p->snap);
	p->snap->parts = calloc(n ? n : 1, sizeof *p->snap->parts);
	for (size_t i = 0; i < n; i++) {
		struct part *pt = &p->snap->parts[p->snap->n++];
		pt->journal = strdup(names[i]);
		pt->name_hash = gaz_fnv1a32(names[i], strlen(names[i]));
		pt->framing = GAZ_FRAMING_JSON;
		pt->framing_rc = (int)i == no_framing ? GAZ_EINVAL : 0;
	}
	return p;
}

static void partitions_done(struct gaz_partitions *p)
{
	pthread_mutex_destroy(&p->mu);
	snapshot_free(p->snap);
	free(p);
}

static void test_gazette_picks(void **state)
{
	(void)state;
	struct gaz_partitions *p = partitions_of(JOURNALS, 5, -1);
	assert_int_equal(gaz_partitions_count(p), 5);
	for (size_t i = 0; i < sizeof VECS / sizeof VECS[0]; i++) {
		size_t n = strlen(VECS[i].key);
		assert_true(gaz_fnv1a32(VECS[i].key, n) == VECS[i].fnv);
		struct gaz_mapped m;
		assert_int_equal(gaz_map_modulo(p, VECS[i].key, n, &m, NULL), 0);
		assert_string_equal(m.journal, VECS[i].modulo);
		assert_int_equal(m.framing, GAZ_FRAMING_JSON);
		assert_int_equal(gaz_map_rendezvous(p, VECS[i].key, n, &m, NULL), 0);
		assert_string_equal(m.journal, VECS[i].rendezvous);
	}
	/* Random: always one of them, and not always the same. */
	bool seen[5] = {0};
	for (int i = 0; i < 200; i++) {
		struct gaz_mapped m;
		assert_int_equal(gaz_map_random(p, &m, NULL), 0);
		assert_true(m.journal[0] == 'a' || m.journal[0] == 'b');
		for (size_t k = 0; k < 5; k++)
			if (strcmp(m.journal, JOURNALS[k]) == 0)
				seen[k] = true;
	}
	int distinct = 0;
	for (size_t k = 0; k < 5; k++)
		distinct += seen[k];
	assert_true(distinct >= 2);
	partitions_done(p);
}

static void test_errors(void **state)
{
	(void)state;
	struct gaz_partitions *p = partitions_of(NULL, 0, -1);
	struct gaz_mapped m;
	struct gaz_status st = {0};
	assert_int_equal(gaz_map_modulo(p, "k", 1, &m, &st), GAZ_ENOTFOUND);
	assert_string_equal(st.msg, "empty ListResponse");
	partitions_done(p);
	/* "hello" goes to b/x by modulo: without a framing, it is an error. */
	p = partitions_of(JOURNALS, 5, 3);
	gaz_status_clear(&st);
	assert_int_equal(gaz_map_modulo(p, "hello", 5, &m, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "b/x"));
	partitions_done(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gazette_picks),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
