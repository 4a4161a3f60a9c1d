/*
 * auth.h - authorization tokens (gazette-facts §11): pre-shared HMAC keys,
 * JWTs carrying a capability mask and a journal LabelSelector, signed and
 * verified the way Gazette's auth package does (HS256 to sign; HS256 or
 * HS384 and any configured key to verify; `exp` required; `iat` not in the
 * future; 5 s leeway), with Gazette's Unauthenticated messages.
 *
 * A struct gaz_auth is immutable after gaz_auth_new and may be shared by
 * every thread without a lock.
 */
#ifndef GAZ_PROTOCOL_AUTH_H
#define GAZ_PROTOCOL_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "protocol.pb-c.h"

/* Capability bits (Gazette's pb.Capability). Bits from 1<<16 up are the
 * applications'. */
enum {
	GAZ_CAP_LIST = 1u << 1,
	GAZ_CAP_APPLY = 1u << 2,
	GAZ_CAP_READ = 1u << 3,
	GAZ_CAP_APPEND = 1u << 4,
	GAZ_CAP_REPLICATE = 1u << 5,
	GAZ_CAP_ALL = 0xFFFFFFFFu,
};

/* Token lifetimes Gazette's clients and brokers give what they sign
 * (seconds): an hour for List, Read, Append, Replicate, ListFragments and
 * FragmentStoreHealth, a minute for Apply and the Shard service's calls. */
#define GAZ_AUTH_TTL_LONG 3600
#define GAZ_AUTH_TTL_SHORT 60

struct gaz_auth;

/* Verified claims. `sel` is a heap selector (gaz_selector_free; the empty
 * selector when the token has none) owned by the claims; times are Unix
 * seconds (fractions kept, as NumericDate is); iat 0 when absent. */
struct gaz_claims {
	uint32_t cap;
	Protocol__LabelSelector *sel;
	double exp, iat;
};

/* gaz_auth_new parses `base64_keys`: STANDARD base64 keys separated by
 * whitespace and/or commas. The first key signs; any verifies. The entry
 * "AA==" (one zero byte) is not a key: it lets requests WITHOUT an
 * authorization header through (rollouts). At least one real key is
 * required. *out is freed with gaz_auth_free. Returns 0, GAZ_EINVAL
 * ("failed to decode key at index N: ...", "at least one key must be
 * provided") or GAZ_ENOMEM. Mirrors auth.NewKeyedAuth. */
int gaz_auth_new(const char *base64_keys, struct gaz_auth **out, struct gaz_status *st);
void gaz_auth_free(struct gaz_auth *a);

/* gaz_auth_sign signs claims {cap, sel, iat=now, exp=now+ttl_s} with the
 * first key (HS256) and returns "Bearer <token>" in *bearer (malloc'd; the
 * caller frees). `sel` NULL is the empty selector. Returns 0 or
 * GAZ_ENOMEM. Mirrors KeyedAuth.Authorize. */
int gaz_auth_sign(const struct gaz_auth *a, uint32_t cap, const Protocol__LabelSelector *sel,
		  int64_t ttl_s, char **bearer, struct gaz_status *st);

/* gaz_auth_sign_journal: gaz_auth_sign with the selector name=<journal>
 * (the journal without its ";meta" suffix), as Gazette's clients and
 * brokers scope Read, Append, ListFragments and Replicate. */
int gaz_auth_sign_journal(const struct gaz_auth *a, uint32_t cap, const char *journal,
			  int64_t ttl_s, char **bearer, struct gaz_status *st);

/* gaz_auth_verify checks the "authorization" metadata value
 * `authorization` (NULL or "" when absent) against the keys and requires
 * every bit of `require`. `now` is Unix seconds (gaz_auth_now()). On
 * success fills *out (release with gaz_claims_release) and returns 0. A
 * missing header with "AA==" configured yields {require, empty selector,
 * exp = now + 1 h}. Failures return GAZ_EPERM with st->grpc
 * UNAUTHENTICATED and Gazette's text: "missing or empty Authorization
 * token", "invalid or unsupported Authorization header (expected
 * 'Bearer')", "verifying Authorization: <jwt error>" (e.g. "token has
 * invalid claims: token is expired", "token signature is invalid:
 * signature is invalid", "token is malformed: ..."), "authorization is
 * missing required READ capability"; GAZ_ENOMEM on allocation failure.
 * Mirrors KeyedAuth.Verify. */
int gaz_auth_verify(const struct gaz_auth *a, const char *authorization, uint32_t require,
		    double now, struct gaz_claims *out, struct gaz_status *st);

/* gaz_claims_release frees claims' selector; the struct is left zeroed. */
void gaz_claims_release(struct gaz_claims *c);

/* gaz_auth_now: the wall clock as Unix seconds with fractions. */
double gaz_auth_now(void);

/* gaz_capability_check: 0 if `have` holds every bit of `require`, else
 * GAZ_EPERM (UNAUTHENTICATED) with Gazette's "authorization is missing
 * required <NAME> capability" or "(have <bin>, but require <bin>)". */
int gaz_capability_check(uint32_t have, uint32_t require, struct gaz_status *st);

#endif
