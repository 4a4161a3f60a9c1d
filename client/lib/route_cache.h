/*
 * route_cache.h - the client's memory of journal routes (Gazette's
 * broker/client RouteCache, facts §7.1), and the choice of the member an
 * RPC goes to (Gazette's dispatcher preferences). Internal to the client
 * library; pure logic apart from the cache's own mutex, so it is unit
 * tested on its own (tests/unit/client/test_route_cache.c).
 *
 * The cache maps a journal name to the route last seen in a response
 * header (Append, Read) or a listing, with the etcd revision that header
 * carried. It holds at most `cap` journals, dropping the least recently
 * used; an entry older than the TTL is a miss. An update with an empty
 * route removes the entry, as does an invalidation (a transport failure or
 * a routing status of an RPC that used it). An update carrying an OLDER
 * revision than the entry's is ignored: a lagging broker's view never
 * replaces a newer one (revision 0 means "unknown" and always replaces).
 */
#ifndef GAZ_CLIENT_ROUTE_CACHE_H
#define GAZ_CLIENT_ROUTE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol.pb-c.h"

/* One member of a cached route. Strings are never NULL ("" when absent). */
struct gaz__route_member {
	const char *zone;
	const char *suffix;
	const char *endpoint; /* "" when the route carried no endpoint */
};

/* A route copied out of a Protocol__Route: one allocation holding the
 * members and their strings; free with free(). */
struct gaz__route {
	size_t n;                     /* members, sorted as in the route */
	int primary;                  /* index into m, or -1 */
	int64_t revision;             /* etcd revision of the header; 0 = unknown */
	struct gaz__route_member *m;  /* n members */
};

/* gaz__route_from_proto copies `rt` (borrowed) with `revision`. Returns
 * NULL on allocation failure. A primary outside the members becomes -1. */
struct gaz__route *gaz__route_from_proto(const Protocol__Route *rt, int64_t revision);

/* gaz__route_copy duplicates `r` (one allocation, free with free()). */
struct gaz__route *gaz__route_copy(const struct gaz__route *r);

/* gaz__route_pick chooses the member an RPC goes to, or -1 for "the broker
 * address". With `primary` (appends): the primary, if it has an endpoint
 * and its connection has not failed. Otherwise (reads, fragment
 * listings): among members with an endpoint, prefer one whose connection
 * has not failed, then one in `zone`, then one with a ready connection,
 * then the first in route order. failed[i] / ready[i] describe member i's
 * connection (either array may be NULL = unknown). Pure. */
int gaz__route_pick(const struct gaz__route *r, bool primary, const char *zone, const bool *failed,
		    const bool *ready);

struct gaz__route_cache;

/* gaz__route_cache_new makes a cache of at most `cap` (>= 1) journals whose
 * entries live `ttl_ns` (> 0). Returns 0 and *out, GAZ_EINVAL, GAZ_ENOMEM. */
int gaz__route_cache_new(size_t cap, int64_t ttl_ns, struct gaz__route_cache **out);

/* gaz__route_cache_free frees the cache and every entry. NULL ok. */
void gaz__route_cache_free(struct gaz__route_cache *rc);

/* gaz__route_cache_update records `route` (borrowed, copied) for `journal`
 * as seen at etcd `revision` at monotonic time now_ns, and marks it most
 * recently used. A route without members removes the entry. An entry with
 * a newer revision is kept (the update is ignored). Out of memory drops
 * the entry (the cache is only an optimisation). Thread-safe. */
void gaz__route_cache_update(struct gaz__route_cache *rc, const char *journal,
			     const Protocol__Route *route, int64_t revision, int64_t now_ns);

/* gaz__route_cache_invalidate removes `journal`'s entry, if any.
 * Thread-safe. */
void gaz__route_cache_invalidate(struct gaz__route_cache *rc, const char *journal);

/* gaz__route_cache_get returns a copy of `journal`'s route (caller frees
 * with free()), marking it most recently used, or NULL when there is none,
 * it expired (it is then removed), or memory ran out. Thread-safe. */
struct gaz__route *gaz__route_cache_get(struct gaz__route_cache *rc, const char *journal,
					int64_t now_ns);

/* gaz__route_cache_len: how many journals the cache holds. Thread-safe. */
size_t gaz__route_cache_len(struct gaz__route_cache *rc);

#endif
