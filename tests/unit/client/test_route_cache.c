/*
 * test_route_cache.c - the client's route cache and member choice
 * (client/lib/route_cache.c): copies of protobuf routes, LRU bound and
 * order, TTL expiry, removal by an empty route and by invalidation,
 * revision ordering of updates, and the dispatch preferences (primary for
 * appends; zone, healthy and ready members for reads).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/lib/route_cache.h"
#include "common/clock.h"
#include "common/err.h"

#define S(n) ((int64_t)(n) * GAZ_NS_PER_S)

/* A route of up to 4 members "z<zone>/b<i>" with endpoints "http://b<i>". */
struct proute {
	Protocol__Route rt;
	Protocol__ProcessSpec__ID ids[4], *idp[4];
	char zones[4][8], suffixes[4][8], eps[4][16], *epp[4];
};

static void mkroute(struct proute *p, const char *zones, int primary, bool endpoints)
{
	size_t n = strlen(zones);

	protocol__route__init(&p->rt);
	for (size_t i = 0; i < n; i++) {
		protocol__process_spec__id__init(&p->ids[i]);
		snprintf(p->zones[i], sizeof(p->zones[i]), "z%c", zones[i]);
		snprintf(p->suffixes[i], sizeof(p->suffixes[i]), "b%c", (char)('0' + i));
		snprintf(p->eps[i], sizeof(p->eps[i]), "http://b%c", (char)('0' + i));
		p->ids[i].zone = p->zones[i];
		p->ids[i].suffix = p->suffixes[i];
		p->idp[i] = &p->ids[i];
		p->epp[i] = p->eps[i];
	}
	p->rt.n_members = n;
	p->rt.members = p->idp;
	p->rt.primary = primary;
	p->rt.n_endpoints = endpoints ? n : 0;
	p->rt.endpoints = endpoints ? p->epp : NULL;
}

static struct gaz__route_cache *cache(size_t cap, int64_t ttl_ns)
{
	struct gaz__route_cache *rc = NULL;

	assert_int_equal(gaz__route_cache_new(cap, ttl_ns, &rc), 0);
	return rc;
}

/* primary_of: the cached primary's endpoint, or NULL. */
static char *primary_of(struct gaz__route_cache *rc, const char *j, int64_t now)
{
	static char buf[64];
	struct gaz__route *r = gaz__route_cache_get(rc, j, now);
	int m = gaz__route_pick(r, true, NULL, NULL, NULL);

	if (m >= 0)
		snprintf(buf, sizeof(buf), "%s", r->m[m].endpoint);
	free(r);
	return m >= 0 ? buf : NULL;
}

static void test_from_proto(void **state)
{
	struct proute p;
	struct gaz__route *r, *c;

	(void)state;
	mkroute(&p, "ab", 1, true);
	r = gaz__route_from_proto(&p.rt, 42);
	assert_non_null(r);
	assert_int_equal(r->n, 2);
	assert_int_equal(r->primary, 1);
	assert_int_equal(r->revision, 42);
	assert_string_equal(r->m[1].zone, "zb");
	assert_string_equal(r->m[1].suffix, "b1");
	assert_string_equal(r->m[1].endpoint, "http://b1");
	c = gaz__route_copy(r);
	free(r);
	assert_string_equal(c->m[0].endpoint, "http://b0");
	assert_int_equal(c->primary, 1);
	free(c);
	/* No endpoints: members kept with "" endpoints; a primary out of
	 * range is no primary. */
	mkroute(&p, "a", 3, false);
	r = gaz__route_from_proto(&p.rt, 0);
	assert_string_equal(r->m[0].endpoint, "");
	assert_int_equal(r->primary, -1);
	free(r);
}

static void test_update_get_invalidate(void **state)
{
	struct gaz__route_cache *rc = cache(8, S(60));
	struct proute p;

	(void)state;
	assert_null(gaz__route_cache_get(rc, "a/j", 0));
	mkroute(&p, "aaa", 2, true);
	gaz__route_cache_update(rc, "a/j", &p.rt, 10, 0);
	assert_string_equal(primary_of(rc, "a/j", 1), "http://b2");
	assert_null(gaz__route_cache_get(rc, "a/other", 1));
	gaz__route_cache_invalidate(rc, "a/j");
	assert_null(gaz__route_cache_get(rc, "a/j", 1));
	assert_int_equal(gaz__route_cache_len(rc), 0);
	/* An empty route removes the entry (Gazette's UpdateRoute). */
	gaz__route_cache_update(rc, "a/j", &p.rt, 10, 0);
	mkroute(&p, "", -1, true);
	gaz__route_cache_update(rc, "a/j", &p.rt, 11, 0);
	assert_null(gaz__route_cache_get(rc, "a/j", 1));
	gaz__route_cache_update(rc, "a/j", NULL, 0, 0);
	gaz__route_cache_invalidate(rc, "never/seen");
	gaz__route_cache_free(rc);
}

static void test_revision_order(void **state)
{
	struct gaz__route_cache *rc = cache(8, S(60));
	struct proute p;

	(void)state;
	mkroute(&p, "aaa", 1, true);
	gaz__route_cache_update(rc, "a/j", &p.rt, 20, 0);
	/* An older header (a lagging broker) does not replace a newer one. */
	p.rt.primary = 0;
	gaz__route_cache_update(rc, "a/j", &p.rt, 19, 0);
	assert_string_equal(primary_of(rc, "a/j", 0), "http://b1");
	/* The same or a newer revision does; 0 (unknown) always does. */
	gaz__route_cache_update(rc, "a/j", &p.rt, 20, 0);
	assert_string_equal(primary_of(rc, "a/j", 0), "http://b0");
	p.rt.primary = 2;
	gaz__route_cache_update(rc, "a/j", &p.rt, 0, 0);
	assert_string_equal(primary_of(rc, "a/j", 0), "http://b2");
	/* An empty route of any revision removes it. */
	mkroute(&p, "", -1, true);
	gaz__route_cache_update(rc, "a/j", &p.rt, 1, 0);
	assert_null(primary_of(rc, "a/j", 0));
	gaz__route_cache_free(rc);
}

static void test_ttl(void **state)
{
	struct gaz__route_cache *rc = cache(8, S(60));
	struct proute p;

	(void)state;
	mkroute(&p, "a", 0, true);
	gaz__route_cache_update(rc, "a/j", &p.rt, 5, S(100));
	assert_non_null(primary_of(rc, "a/j", S(160)));
	/* Reading does not refresh the TTL; an update does. */
	assert_null(primary_of(rc, "a/j", S(161)));
	assert_int_equal(gaz__route_cache_len(rc), 0);
	gaz__route_cache_update(rc, "a/j", &p.rt, 5, S(200));
	gaz__route_cache_update(rc, "a/j", &p.rt, 5, S(250));
	assert_non_null(primary_of(rc, "a/j", S(300)));
	gaz__route_cache_free(rc);
}

static void test_lru_bound(void **state)
{
	struct gaz__route_cache *rc = cache(3, S(60));
	struct proute p;
	char name[32];

	(void)state;
	mkroute(&p, "a", 0, true);
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "j/%d", i);
		gaz__route_cache_update(rc, name, &p.rt, 1, 0);
	}
	/* Touch j/0: j/1 becomes the least recently used and is evicted. */
	assert_non_null(primary_of(rc, "j/0", 0));
	gaz__route_cache_update(rc, "j/3", &p.rt, 1, 0);
	assert_int_equal(gaz__route_cache_len(rc), 3);
	assert_null(primary_of(rc, "j/1", 0));
	assert_non_null(primary_of(rc, "j/0", 0));
	assert_non_null(primary_of(rc, "j/2", 0));
	assert_non_null(primary_of(rc, "j/3", 0));
	/* Many more journals than the bound: still 3, the newest ones. */
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "many/%d", i);
		gaz__route_cache_update(rc, name, &p.rt, 1, 0);
	}
	assert_int_equal(gaz__route_cache_len(rc), 3);
	assert_non_null(primary_of(rc, "many/999", 0));
	assert_non_null(primary_of(rc, "many/997", 0));
	assert_null(primary_of(rc, "many/996", 0));
	gaz__route_cache_free(rc);
}

static void test_new_rejects(void **state)
{
	struct gaz__route_cache *rc = NULL;

	(void)state;
	assert_int_equal(gaz__route_cache_new(0, S(1), &rc), GAZ_EINVAL);
	assert_int_equal(gaz__route_cache_new(4, 0, &rc), GAZ_EINVAL);
	assert_null(rc);
}

static void test_pick_primary(void **state)
{
	struct proute p;
	struct gaz__route *r;
	bool failed[3] = {false, true, false};

	(void)state;
	mkroute(&p, "abc", 1, true);
	r = gaz__route_from_proto(&p.rt, 0);
	assert_int_equal(gaz__route_pick(r, true, "za", NULL, NULL), 1);
	/* A failed primary connection, or no primary: the broker address. */
	assert_int_equal(gaz__route_pick(r, true, "za", failed, NULL), -1);
	r->primary = -1;
	assert_int_equal(gaz__route_pick(r, true, "za", NULL, NULL), -1);
	free(r);
	/* No endpoints: nothing to dial. */
	mkroute(&p, "abc", 1, false);
	r = gaz__route_from_proto(&p.rt, 0);
	assert_int_equal(gaz__route_pick(r, true, NULL, NULL, NULL), -1);
	assert_int_equal(gaz__route_pick(r, false, "za", NULL, NULL), -1);
	free(r);
	assert_int_equal(gaz__route_pick(NULL, true, NULL, NULL, NULL), -1);
}

static void test_pick_member(void **state)
{
	struct proute p;
	struct gaz__route *r;
	bool failed[3] = {false, false, false}, ready[3] = {false, false, false};

	(void)state;
	mkroute(&p, "abb", 0, true);
	r = gaz__route_from_proto(&p.rt, 0);
	/* Our zone first, the first of it in route order. */
	assert_int_equal(gaz__route_pick(r, false, "zb", NULL, NULL), 1);
	assert_int_equal(gaz__route_pick(r, false, "za", NULL, NULL), 0);
	/* No member in our zone: the first member. */
	assert_int_equal(gaz__route_pick(r, false, "zq", NULL, NULL), 0);
	/* Among equals, a ready connection wins. */
	ready[2] = true;
	assert_int_equal(gaz__route_pick(r, false, "zb", failed, ready), 2);
	/* A failed connection loses even to another zone. */
	failed[1] = failed[2] = true;
	assert_int_equal(gaz__route_pick(r, false, "zb", failed, ready), 0);
	/* All failed: zone preference again (someone must be tried). */
	failed[0] = true;
	assert_int_equal(gaz__route_pick(r, false, "zb", failed, NULL), 1);
	free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_from_proto),     cmocka_unit_test(test_update_get_invalidate),
		cmocka_unit_test(test_revision_order), cmocka_unit_test(test_ttl),
		cmocka_unit_test(test_lru_bound),      cmocka_unit_test(test_new_rejects),
		cmocka_unit_test(test_pick_primary),   cmocka_unit_test(test_pick_member),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
