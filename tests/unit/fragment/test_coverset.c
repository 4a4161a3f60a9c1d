/* test_coverset.c - CoverSet add/lookup/summary/difference/replace_remote. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "fragment/coverset.h"

static bool add_full(struct gaz_coverset *cs, int64_t begin, int64_t end, const char *store,
		     struct gaz_fragment_file *file)
{
	struct gaz_fragment f = {.journal = (char *)"a/journal", .begin = begin, .end = end,
				 .codec = PROTOCOL__COMPRESSION_CODEC__NONE,
				 .backing_store = (char *)store, .mod_time = store ? end : 0};
	struct gaz_status st = {0};
	bool added;

	assert_int_equal(gaz_coverset_add(cs, &f, file, &added, &st), 0);
	return added;
}

static bool add(struct gaz_coverset *cs, int64_t begin, int64_t end)
{
	return add_full(cs, begin, end, NULL, NULL);
}

/* Asserts the set's ranges equal pairs[0:2n). */
static void expect(const struct gaz_coverset *cs, const int64_t *pairs, size_t n)
{
	assert_int_equal(cs->len, n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(cs->v[i].frag.begin, pairs[2 * i]);
		assert_int_equal(cs->v[i].frag.end, pairs[2 * i + 1]);
	}
	for (size_t i = 1; i < n; i++) {
		assert_true(cs->v[i - 1].frag.begin < cs->v[i].frag.begin);
		assert_true(cs->v[i - 1].frag.end < cs->v[i].frag.end);
	}
}

#define EXPECT(cs, ...)                                                     \
	do {                                                                \
		static const int64_t p_[] = {__VA_ARGS__};                  \
		expect((cs), p_, sizeof(p_) / sizeof(p_[0]) / 2);           \
	} while (0)

static void test_add_append_and_overlap(void **state)
{
	struct gaz_coverset cs;

	(void)state;
	gaz_coverset_init(&cs);
	assert_true(add(&cs, 10, 20));
	assert_true(add(&cs, 20, 30));
	assert_true(add(&cs, 25, 35)); /* overlaps, covers nothing */
	EXPECT(&cs, 10, 20, 20, 30, 25, 35);
	assert_true(add(&cs, 5, 10)); /* before the first */
	EXPECT(&cs, 5, 10, 10, 20, 20, 30, 25, 35);
	assert_true(add(&cs, 50, 60)); /* after a gap */
	EXPECT(&cs, 5, 10, 10, 20, 20, 30, 25, 35, 50, 60);
	gaz_coverset_release(&cs);
	assert_int_equal(cs.len, 0);
}

static void test_add_replaces_covered(void **state)
{
	struct gaz_coverset cs;

	(void)state;
	gaz_coverset_init(&cs);
	for (int64_t b = 0; b < 500; b += 100)
		assert_true(add(&cs, b, b + 100));
	/* Middle: covers [100,200) [200,300) [300,400) exactly. */
	assert_true(add(&cs, 100, 400));
	EXPECT(&cs, 0, 100, 100, 400, 400, 500);
	/* Overhanging both neighbours, covering only the middle. */
	assert_true(add(&cs, 50, 450));
	EXPECT(&cs, 0, 100, 50, 450, 400, 500);
	/* At the end: the last fragment grows (a spool commit). */
	assert_true(add(&cs, 400, 510));
	EXPECT(&cs, 0, 100, 50, 450, 400, 510);
	assert_true(add(&cs, 399, 520)); /* begins before the last: replaces it */
	EXPECT(&cs, 0, 100, 50, 450, 399, 520);
	/* At the beginning. */
	assert_true(add(&cs, 0, 120));
	EXPECT(&cs, 0, 120, 50, 450, 399, 520);
	/* Everything. */
	assert_true(add(&cs, 0, 1000));
	EXPECT(&cs, 0, 1000);
	gaz_coverset_release(&cs);
}

static void test_add_ignores_covered_and_empty(void **state)
{
	struct gaz_coverset cs;
	struct gaz_status st = {0};

	(void)state;
	gaz_coverset_init(&cs);
	assert_true(add(&cs, 100, 200));
	assert_true(add(&cs, 200, 300));
	assert_false(add(&cs, 101, 200));
	assert_false(add(&cs, 100, 199));
	assert_false(add(&cs, 150, 160));
	assert_false(add(&cs, 201, 300));
	assert_false(add(&cs, 250, 250)); /* empty */
	assert_false(add(&cs, 0, 0));
	EXPECT(&cs, 100, 200, 200, 300);

	/* The same range replaces (e.g. a persisted copy of a local one). */
	assert_true(add_full(&cs, 100, 200, "file:///store/", NULL));
	EXPECT(&cs, 100, 200, 200, 300);
	assert_string_equal(cs.v[0].frag.backing_store, "file:///store/");
	assert_int_equal(cs.v[0].frag.mod_time, 200);

	/* The set holds copies, not the caller's strings. */
	struct gaz_fragment f = {.journal = (char *)"x/y", .begin = 300, .end = 301, .codec = 1};
	assert_int_equal(gaz_coverset_add(&cs, &f, NULL, NULL, &st), 0);
	assert_ptr_not_equal(cs.v[2].frag.journal, f.journal);
	gaz_coverset_release(&cs);
}

static void test_lookup(void **state)
{
	static const struct {
		int64_t off;
		bool found;
		size_t ind;
	} cases[] = {
		{0, false, 0},   {9, false, 0},   {10, true, 0},  {24, true, 0},  {25, true, 1},
		{39, true, 1},   {40, true, 2},   {59, true, 2},  {60, true, 3},  {64, true, 3},
		{65, true, 4},   {79, true, 4},   {80, false, 5}, {99, false, 5}, {100, true, 5},
		{109, true, 5},  {110, false, 6}, {1 << 20, false, 6},
	};
	struct gaz_coverset cs;
	bool found;

	(void)state;
	gaz_coverset_init(&cs);
	add(&cs, 10, 40);
	add(&cs, 25, 41);
	add(&cs, 40, 65);
	add(&cs, 60, 70);
	add(&cs, 65, 80);
	add(&cs, 100, 110);
	EXPECT(&cs, 10, 40, 25, 41, 40, 65, 60, 70, 65, 80, 100, 110);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t ind = gaz_coverset_lookup(&cs, cases[i].off, &found);
		if (found != cases[i].found || ind != cases[i].ind)
			fail_msg("lookup(%lld) = (%zu, %d), want (%zu, %d)", (long long)cases[i].off,
				 ind, found, cases[i].ind, cases[i].found);
	}
	gaz_coverset_release(&cs);
	assert_int_equal(gaz_coverset_lookup(&cs, 5, &found), 0);
	assert_false(found);
}

static void test_summary(void **state)
{
	struct gaz_coverset cs;
	int64_t b = -1, e = -1, m = -1;

	(void)state;
	gaz_coverset_init(&cs);
	gaz_coverset_summary(&cs, &b, &e, &m);
	assert_true(b == 0 && e == 0 && m == 0);
	add_full(&cs, 100, 150, "file:///s/", NULL);
	add(&cs, 140, 250);
	gaz_coverset_summary(&cs, &b, &e, &m);
	assert_true(b == 100 && e == 250 && m == 0);
	add_full(&cs, 50, 100, "file:///s/", NULL);
	add_full(&cs, 140, 260, "file:///s/", NULL);
	gaz_coverset_summary(&cs, &b, NULL, &m);
	assert_true(b == 50 && m == 260);
	gaz_coverset_release(&cs);
}

static void test_covered_and_difference(void **state)
{
	struct gaz_coverset a, b;

	(void)state;
	gaz_coverset_init(&a);
	gaz_coverset_init(&b);
	add(&b, 1000, 1100);
	add(&b, 1050, 1125);
	add(&b, 1125, 1150);
	add(&b, 1150, 1200);
	add(&b, 1201, 1300);

	assert_true(gaz_coverset_covered(&b, 1000, 1200));
	assert_false(gaz_coverset_covered(&b, 1000, 1201)); /* one-byte gap */
	assert_false(gaz_coverset_covered(&b, 999, 1001));

	add(&a, 990, 1005);  /* starts before b: kept */
	add(&a, 1000, 1010); /* covered by one: dropped */
	add(&a, 1020, 1110); /* covered by two chained: dropped */
	add(&a, 1050, 1125); /* equal to one: dropped */
	add(&a, 1051, 1200); /* covered by three: dropped */
	add(&a, 1052, 1201); /* crosses the gap: kept */
	add(&a, 1200, 1250); /* starts in the gap: kept */
	add(&a, 1201, 1260); /* covered: dropped */
	add(&a, 1260, 1301); /* past the end: kept */
	add(&a, 1300, 1400); /* outside: kept */
	assert_int_equal(a.len, 10);
	gaz_coverset_difference(&a, &b);
	EXPECT(&a, 990, 1005, 1052, 1201, 1200, 1250, 1260, 1301, 1300, 1400);
	gaz_coverset_release(&a);
	gaz_coverset_release(&b);
}

static struct gaz_fragment_file *devnull_file(void)
{
	struct gaz_fragment_file *f;
	struct gaz_status st = {0};

	assert_int_equal(gaz_fragment_file_new(open("/dev/null", O_RDONLY), &f, &st), 0);
	return f;
}

/* Index refresh (facts §5.3): remote listing replaces remote entries; local
 * fragments the listing covers go (their file references with them); the
 * rest stay. */
static void test_replace_remote(void **state)
{
	struct gaz_coverset set, local, remote;
	struct gaz_fragment_file *f1 = devnull_file(), *f2 = devnull_file();
	struct gaz_status st = {0};

	(void)state;
	gaz_coverset_init(&set);
	gaz_coverset_init(&local);
	gaz_coverset_init(&remote);
	/* The index: an old remote fragment, then two local (spool) ones. */
	add_full(&set, 0, 100, "file:///s/", NULL);
	add_full(&set, 100, 200, NULL, f1);
	add_full(&set, 200, 250, NULL, f2);
	add_full(&local, 100, 200, NULL, f1);
	add_full(&local, 200, 250, NULL, f2);
	assert_int_equal(atomic_load(&f1->refs), 3);

	/* The listing: [0,100) and the persisted [100,200). */
	add_full(&remote, 0, 100, "file:///s/", NULL);
	add_full(&remote, 100, 200, "file:///s/", NULL);
	assert_int_equal(gaz_coverset_replace_remote(&set, &local, &remote, &st), 0);

	EXPECT(&set, 0, 100, 100, 200, 200, 250);
	assert_string_equal(set.v[1].frag.backing_store, "file:///s/");
	assert_null(set.v[1].file);
	assert_ptr_equal(set.v[2].file, f2);
	EXPECT(&local, 200, 250);
	assert_int_equal(remote.len, 0);
	assert_int_equal(atomic_load(&f1->refs), 1); /* only ours is left */
	assert_int_equal(atomic_load(&f2->refs), 3);

	/* A later listing without [0,100) (deleted by retention). */
	add_full(&remote, 100, 200, "file:///s/", NULL);
	assert_int_equal(gaz_coverset_replace_remote(&set, &local, &remote, &st), 0);
	EXPECT(&set, 100, 200, 200, 250);

	gaz_coverset_release(&set);
	gaz_coverset_release(&local);
	gaz_coverset_release(&remote);
	assert_int_equal(atomic_load(&f2->refs), 1);
	gaz_fragment_file_unref(f1);
	gaz_fragment_file_unref(f2);
}

/* Replacing or releasing entries drops their file references. */
static void test_file_references(void **state)
{
	struct gaz_coverset cs;
	struct gaz_fragment_file *f = devnull_file();

	(void)state;
	gaz_coverset_init(&cs);
	add_full(&cs, 0, 10, NULL, f);
	add_full(&cs, 0, 20, NULL, f); /* spool grew: replaces, same file */
	assert_int_equal(cs.len, 1);
	assert_int_equal(atomic_load(&f->refs), 2);
	add_full(&cs, 0, 30, "file:///s/", NULL);
	assert_int_equal(atomic_load(&f->refs), 1);
	gaz_coverset_release(&cs);
	gaz_fragment_file_unref(f);
}

/* Many random adds keep the invariants, and lookup agrees with a scan. */
static void test_random_invariants(void **state)
{
	struct gaz_coverset cs;
	uint64_t x = 88172645463325252ull;
	bool found;

	(void)state;
	gaz_coverset_init(&cs);
	for (int i = 0; i < 5000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		int64_t b = (int64_t)(x % 10000), len = (int64_t)((x >> 20) % 300);
		add(&cs, b, b + len);
		if (i % 500)
			continue;
		for (size_t k = 1; k < cs.len; k++) {
			assert_true(cs.v[k - 1].frag.begin < cs.v[k].frag.begin);
			assert_true(cs.v[k - 1].frag.end < cs.v[k].frag.end);
		}
	}
	for (int64_t off = 0; off < 10400; off += 7) {
		size_t ind = gaz_coverset_lookup(&cs, off, &found), want = cs.len;
		for (size_t k = 0; k < cs.len; k++)
			if (cs.v[k].frag.begin <= off && off < cs.v[k].frag.end)
				want = k; /* last covering = furthest-extending */
		if (want == cs.len) {
			assert_false(found);
			assert_true(ind == cs.len || cs.v[ind].frag.begin > off);
		} else {
			assert_true(found);
			assert_int_equal(ind, want);
		}
	}
	gaz_coverset_release(&cs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_add_append_and_overlap),
		cmocka_unit_test(test_add_replaces_covered),
		cmocka_unit_test(test_add_ignores_covered_and_empty),
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_summary),
		cmocka_unit_test(test_covered_and_difference),
		cmocka_unit_test(test_replace_remote),
		cmocka_unit_test(test_file_references),
		cmocka_unit_test(test_random_invariants),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
