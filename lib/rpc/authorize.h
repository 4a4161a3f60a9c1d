/*
 * authorize.h - a served call's authorization (gazette-facts §11), shared
 * by the broker's Journal service and the consumer's Shard service: the
 * call's "authorization" metadata verified for the capability its method
 * requires, the verified claims kept with the call, and the call ended at
 * the token's expiry (Gazette's Verifier sets the context deadline there).
 *
 * Lock rule: none of its own. The claims are written once by the thread
 * that takes the call, before any other thread reads them (see
 * gaz_rpc_set_user), and freed with the call.
 */
#ifndef GAZ_RPC_AUTHORIZE_H
#define GAZ_RPC_AUTHORIZE_H

#include <stdint.h>

#include "common/err.h"
#include "protocol.pb-c.h"
#include "protocol/auth.h"
#include "rpc/rpc.h"

/* gaz_rpc_authorize verifies `call` for `require` (GAZ_CAP_*) with `keys`
 * (NULL: no authorization, everything passes). A call verified once passes
 * again without a second check. Returns 0, or GAZ_EPERM with st->grpc
 * UNAUTHENTICATED and Gazette's message (answer the call with it), or
 * GAZ_ENOMEM. */
int gaz_rpc_authorize(const struct gaz_auth *keys, struct gaz_rpc_call *call, uint32_t require,
		      struct gaz_status *st);

/* gaz_rpc_refused: gaz_rpc_authorize, and on failure the call is finished
 * with the verifier's status and message; true when it was refused. */
bool gaz_rpc_refused(const struct gaz_auth *keys, struct gaz_rpc_call *call, uint32_t require);

/* gaz_rpc_claims_selector: the verified claims' selector of `call` (NULL
 * call allowed), or NULL when it matches everything (no keys, no claims,
 * or an empty selector). Borrowed for the call's life. */
const Protocol__LabelSelector *gaz_rpc_claims_selector(struct gaz_rpc_call *call);

#endif
