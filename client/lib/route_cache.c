/*
 * route_cache.c - journal routes remembered by the client (see
 * route_cache.h), and the member choice for dispatch.
 *
 * Structure: a hash table of `nbuckets` chains (FNV-1a of the journal
 * name) over entries that are also on one doubly linked LRU list, most
 * recently used first. Invariants: every entry is on exactly one chain and
 * on the list; len <= cap; an entry's route is never NULL. All access is
 * under `mu`; nothing is called while it is held except malloc/free.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/route_cache.h"
#include "common/err.h"

struct entry {
	struct entry *chain;       /* next in the bucket */
	struct entry *prev, *next; /* LRU list */
	int64_t at_ns;             /* when recorded (monotonic) */
	struct gaz__route *route;
	char journal[];
};

struct gaz__route_cache {
	pthread_mutex_t mu;
	size_t cap, len, nbuckets;
	int64_t ttl_ns;
	struct entry **buckets;
	struct entry lru; /* sentinel: lru.next = most recent */
};

/* ---- routes --------------------------------------------------------------- */

static size_t str_size(const char *s)
{
	return (s ? strlen(s) : 0) + 1;
}

/* put_str copies s ("" for NULL) at *p and advances it. */
static const char *put_str(char **p, const char *s)
{
	char *at = *p;
	size_t n = str_size(s);

	memcpy(at, s ? s : "", n);
	*p += n;
	return at;
}

/* route_alloc sizes one block for n members and `strings` bytes. */
static struct gaz__route *route_alloc(size_t n, size_t strings)
{
	struct gaz__route *r = malloc(sizeof(*r) + n * sizeof(struct gaz__route_member) + strings);

	if (r) {
		r->n = n;
		r->m = (struct gaz__route_member *)(r + 1);
	}
	return r;
}

struct gaz__route *gaz__route_from_proto(const Protocol__Route *rt, int64_t revision)
{
	bool eps = rt->n_endpoints == rt->n_members;
	size_t strings = 0;
	struct gaz__route *r;
	char *p;

	for (size_t i = 0; i < rt->n_members; i++)
		strings += str_size(rt->members[i]->zone) + str_size(rt->members[i]->suffix) +
			   str_size(eps ? rt->endpoints[i] : NULL);
	if (!(r = route_alloc(rt->n_members, strings)))
		return NULL;
	p = (char *)(r->m + r->n);
	for (size_t i = 0; i < rt->n_members; i++) {
		r->m[i].zone = put_str(&p, rt->members[i]->zone);
		r->m[i].suffix = put_str(&p, rt->members[i]->suffix);
		r->m[i].endpoint = put_str(&p, eps ? rt->endpoints[i] : NULL);
	}
	r->primary = rt->primary >= 0 && (size_t)rt->primary < rt->n_members ? rt->primary : -1;
	r->revision = revision;
	return r;
}

struct gaz__route *gaz__route_copy(const struct gaz__route *src)
{
	size_t strings = 0;
	struct gaz__route *r;
	char *p;

	for (size_t i = 0; i < src->n; i++)
		strings += str_size(src->m[i].zone) + str_size(src->m[i].suffix) +
			   str_size(src->m[i].endpoint);
	if (!(r = route_alloc(src->n, strings)))
		return NULL;
	p = (char *)(r->m + r->n);
	for (size_t i = 0; i < src->n; i++) {
		r->m[i].zone = put_str(&p, src->m[i].zone);
		r->m[i].suffix = put_str(&p, src->m[i].suffix);
		r->m[i].endpoint = put_str(&p, src->m[i].endpoint);
	}
	r->primary = src->primary;
	r->revision = src->revision;
	return r;
}

/* better: whether member a is preferred over member b (b may be -1). */
static bool better(const struct gaz__route *r, int a, int b, const char *zone, const bool *failed,
		   const bool *ready)
{
	bool fa, fb, za, zb;

	if (b < 0)
		return true;
	fa = failed && failed[a], fb = failed && failed[b];
	if (fa != fb)
		return !fa;
	za = zone && !strcmp(r->m[a].zone, zone), zb = zone && !strcmp(r->m[b].zone, zone);
	if (za != zb)
		return za;
	return ready && ready[a] && !ready[b];
}

int gaz__route_pick(const struct gaz__route *r, bool primary, const char *zone, const bool *failed,
		    const bool *ready)
{
	int best = -1;

	if (!r)
		return -1;
	if (primary) {
		int p = r->primary;
		return p >= 0 && *r->m[p].endpoint && !(failed && failed[p]) ? p : -1;
	}
	for (size_t i = 0; i < r->n; i++)
		if (*r->m[i].endpoint && better(r, (int)i, best, zone, failed, ready))
			best = (int)i;
	return best;
}

/* ---- the cache ----------------------------------------------------------------- */

static uint32_t hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

int gaz__route_cache_new(size_t cap, int64_t ttl_ns, struct gaz__route_cache **out)
{
	struct gaz__route_cache *rc;
	size_t nb = 16;

	if (cap == 0 || ttl_ns <= 0 || cap > ((size_t)1 << 24))
		return GAZ_EINVAL;
	while (nb < cap)
		nb *= 2;
	if (!(rc = calloc(1, sizeof(*rc))) || !(rc->buckets = calloc(nb, sizeof(*rc->buckets)))) {
		free(rc);
		return GAZ_ENOMEM;
	}
	pthread_mutex_init(&rc->mu, NULL);
	rc->cap = cap;
	rc->nbuckets = nb;
	rc->ttl_ns = ttl_ns;
	rc->lru.next = rc->lru.prev = &rc->lru;
	*out = rc;
	return 0;
}

void gaz__route_cache_free(struct gaz__route_cache *rc)
{
	if (!rc)
		return;
	for (struct entry *e = rc->lru.next, *n; e != &rc->lru; e = n) {
		n = e->next;
		free(e->route);
		free(e);
	}
	pthread_mutex_destroy(&rc->mu);
	free(rc->buckets);
	free(rc);
}

/* find returns the entry of `journal` and, in *link, the pointer to it. */
static struct entry *find(struct gaz__route_cache *rc, const char *journal, struct entry ***link)
{
	struct entry **l = &rc->buckets[hash(journal) & (rc->nbuckets - 1)];

	while (*l && strcmp((*l)->journal, journal))
		l = &(*l)->chain;
	*link = l;
	return *l;
}

static void lru_unlink(struct entry *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
}

static void lru_front(struct gaz__route_cache *rc, struct entry *e)
{
	e->next = rc->lru.next;
	e->prev = &rc->lru;
	rc->lru.next->prev = e;
	rc->lru.next = e;
}

/* drop removes the entry at *link. */
static void drop(struct gaz__route_cache *rc, struct entry **link)
{
	struct entry *e = *link;

	*link = e->chain;
	lru_unlink(e);
	free(e->route);
	free(e);
	rc->len--;
}

/* evict_oldest drops the least recently used entry. */
static void evict_oldest(struct gaz__route_cache *rc)
{
	struct entry **link;

	find(rc, rc->lru.prev->journal, &link);
	drop(rc, link);
}

/* insert adds a new entry for journal owning `r` (freed on failure). */
static void insert(struct gaz__route_cache *rc, struct entry **link, const char *journal,
		   struct gaz__route *r, int64_t now_ns)
{
	size_t n = strlen(journal) + 1;
	struct entry *e = malloc(sizeof(*e) + n);

	if (!e) {
		free(r);
		return;
	}
	memcpy(e->journal, journal, n);
	e->route = r;
	e->at_ns = now_ns;
	e->chain = NULL;
	*link = e;
	lru_front(rc, e);
	if (++rc->len > rc->cap)
		evict_oldest(rc);
}

void gaz__route_cache_update(struct gaz__route_cache *rc, const char *journal,
			     const Protocol__Route *route, int64_t revision, int64_t now_ns)
{
	struct gaz__route *r = NULL;
	struct entry **link, *e;

	if (route && route->n_members > 0 && !(r = gaz__route_from_proto(route, revision))) {
		gaz__route_cache_invalidate(rc, journal);
		return;
	}
	pthread_mutex_lock(&rc->mu);
	e = find(rc, journal, &link);
	if (e && r && revision != 0 && e->route->revision > revision) {
		free(r); /* an older view than the one we hold */
	} else if (e && r) {
		free(e->route);
		e->route = r;
		e->at_ns = now_ns;
		lru_unlink(e);
		lru_front(rc, e);
	} else if (e) {
		drop(rc, link);
	} else if (r) {
		insert(rc, link, journal, r, now_ns);
	}
	pthread_mutex_unlock(&rc->mu);
}

void gaz__route_cache_invalidate(struct gaz__route_cache *rc, const char *journal)
{
	struct entry **link;

	pthread_mutex_lock(&rc->mu);
	if (find(rc, journal, &link))
		drop(rc, link);
	pthread_mutex_unlock(&rc->mu);
}

struct gaz__route *gaz__route_cache_get(struct gaz__route_cache *rc, const char *journal,
					int64_t now_ns)
{
	struct gaz__route *r = NULL;
	struct entry **link, *e;

	pthread_mutex_lock(&rc->mu);
	if ((e = find(rc, journal, &link)) && now_ns - e->at_ns > rc->ttl_ns) {
		drop(rc, link);
	} else if (e) {
		lru_unlink(e);
		lru_front(rc, e);
		r = gaz__route_copy(e->route);
	}
	pthread_mutex_unlock(&rc->mu);
	return r;
}

size_t gaz__route_cache_len(struct gaz__route_cache *rc)
{
	size_t n;

	pthread_mutex_lock(&rc->mu);
	n = rc->len;
	pthread_mutex_unlock(&rc->mu);
	return n;
}
