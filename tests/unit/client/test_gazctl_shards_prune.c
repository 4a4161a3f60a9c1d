/*
 * test_gazctl_shards_prune.c - what `gazctl shards prune` keeps: the live
 * segments of hints (FSMHints.LiveLogSegments: segments of one author
 * reduced into one, the last one's last_offset cleared), Gazette's
 * consistency errors, and the overlap rule that decides which fragments
 * go (a fragment after the last hinted segment is always kept).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/gazctl/cmd_shards_prune.c"
#include "client/gazctl/fragment_remove.c"
#include "client/gazctl/util.c"

/* The rest of gazctl, which these tests do not reach. */
int gazctl_broker(struct gaz_client **out, struct gaz_status *st)
{
	(void)st;
	*out = NULL;
	return GAZ_EINVAL;
}

int gazctl_list_shards(struct gaz_client *c, const char *selector, Consumer__ListResponse **out,
		       struct gaz_status *st)
{
	(void)c, (void)selector, (void)st;
	*out = NULL;
	return GAZ_EINVAL;
}

static Recoverylog__Segment SEGS[8];
static Recoverylog__Segment *SEGP[8];
static Recoverylog__FnodeSegments NODES[4];
static Recoverylog__FnodeSegments *NODEP[4];

/* seg fills SEGS[i]: author, seq_no range, offset range. */
static void seg(int i, uint32_t author, int64_t fs, int64_t ls, int64_t fo, int64_t lo)
{
	recoverylog__segment__init(&SEGS[i]);
	SEGS[i].author = author;
	SEGS[i].first_seq_no = fs;
	SEGS[i].last_seq_no = ls;
	SEGS[i].first_offset = fo;
	SEGS[i].last_offset = lo;
	SEGP[i] = &SEGS[i];
}

/* node makes NODES[i] the fnode of `n` segments starting at SEGS[first]. */
static void node(int i, int first, size_t n)
{
	recoverylog__fnode_segments__init(&NODES[i]);
	NODES[i].fnode = SEGS[first].first_seq_no;
	NODES[i].segments = &SEGP[first];
	NODES[i].n_segments = n;
	NODEP[i] = &NODES[i];
}

static Recoverylog__FSMHints hints(size_t n)
{
	Recoverylog__FSMHints h = RECOVERYLOG__FSMHINTS__INIT;

	h.log = "a/log";
	h.live_nodes = NODEP;
	h.n_live_nodes = n;
	return h;
}

static Protocol__Fragment frag(int64_t begin, int64_t end)
{
	Protocol__Fragment f = PROTOCOL__FRAGMENT__INIT;

	f.journal = "a/log";
	f.begin = begin;
	f.end = end;
	return f;
}

static void test_live_segments_reduce_and_clear_last(void **state)
{
	struct gaz_status st = {0};
	struct segset all = {0};
	Recoverylog__FSMHints h;
	Protocol__Fragment f;

	(void)state;
	/* fnode 10: two adjacent runs of author 7 (one segment once reduced);
	 * fnode 20: author 9, later in the log. */
	seg(0, 7, 10, 14, 100, 200);
	seg(1, 7, 15, 19, 200, 300);
	seg(2, 9, 20, 25, 500, 600);
	node(0, 0, 2);
	node(1, 2, 1);
	h = hints(2);
	assert_int_equal(live_segments(&h, &all, &st), 0);
	assert_int_equal(all.n, 2);
	assert_int_equal(all.v[0].first_offset, 100);
	assert_int_equal(all.v[0].last_offset, 300);
	assert_int_equal(all.v[0].last_seq_no, 19);
	assert_int_equal(all.v[1].first_offset, 500);
	assert_int_equal(all.v[1].last_offset, 0); /* the last: covers what follows */
	assert_string_equal(all.v[1].log, "a/log");

	f = frag(0, 100);
	assert_false(overlaps(&all, "a/log", &f)); /* before every live segment */
	f = frag(300, 500);
	assert_false(overlaps(&all, "a/log", &f)); /* between them */
	f = frag(250, 310);
	assert_true(overlaps(&all, "a/log", &f));
	f = frag(9000, 9100);
	assert_true(overlaps(&all, "a/log", &f)); /* after the last hinted segment */
	f = frag(0, 100);
	assert_false(overlaps(&all, "other/log", &f));
	free(all.v);
}

static void test_live_segments_errors(void **state)
{
	struct gaz_status st = {0};
	struct segset all = {0};
	Recoverylog__FSMHints h;

	(void)state;
	seg(0, 7, 10, 14, 100, 200);
	node(0, 0, 1);
	NODES[0].fnode = 11;
	h = hints(1);
	assert_int_equal(live_segments(&h, &all, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "unable to fetch hint segments: expected Fnode to match"));

	gaz_status_clear(&st);
	seg(0, 7, 10, 14, 100, 200);
	seg(1, 8, 12, 16, 150, 250); /* overlaps author 7's seq_nos */
	node(0, 0, 1);
	node(1, 1, 1);
	h = hints(2);
	assert_int_equal(live_segments(&h, &all, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "inconsistent hinted segment"));

	gaz_status_clear(&st);
	seg(0, 0, 10, 14, 100, 200); /* author zero */
	node(0, 0, 1);
	h = hints(1);
	assert_int_equal(live_segments(&h, &all, &st), GAZ_EINVAL);
	assert_int_equal(all.n, 0);
}

static void test_segset_identity_and_cover(void **state)
{
	struct segset set = {0};
	struct seg a = {7, 10, 100, 20, 0, 5, "a/log"}, b = {7, 12, 120, 15, 0, 0, "a/log"};

	(void)state;
	/* a: seq 10-20, offsets 100-?; b inside it: reduces into a. */
	a.last_offset = 400;
	b.last_offset = 200;
	b.first_checksum = 0;
	assert_int_equal(segset_add(&set, a), 0);
	assert_int_equal(segset_add(&set, a), 0); /* identity */
	assert_int_equal(segset_add(&set, b), 0);
	assert_int_equal(set.n, 1);
	assert_int_equal(set.v[0].last_offset, 400);
	/* A later segment of the log ending before an earlier one: Gazette's
	 * "expected monotonic LastOffset". */
	b = (struct seg){7, 21, 150, 30, 350, 0, "a/log"};
	assert_int_equal(segset_add(&set, b), GAZ_EINVAL);
	free(set.v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_live_segments_reduce_and_clear_last),
		cmocka_unit_test(test_live_segments_errors),
		cmocka_unit_test(test_segset_identity_and_cover),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
