/* proxy.h - forwarding RPCs to the route member that must serve them
 * (facts §2.0 "Proxy dispatch"). The forwarded request carries our
 * resolved Header, so the peer checks it resolved the same route. */
#ifndef GAZ_BROKER_PROXY_H
#define GAZ_BROKER_PROXY_H

#include "broker/broker.h"

/* Chooses the member to forward to: res->process_index when set, else a
 * route member in our zone, else the first. Returns its endpoint
 * (borrowed from res) or NULL when none has an endpoint. */
const char *gaz_proxy_pick(struct gaz_broker *b, const struct gaz_resolution *res, int *index);

/* Forwards a Read and relays every response, then ends the call. The
 * call may be parked when this returns (it waits for the upstream without
 * a thread): the caller must not touch it after. `req` and `res` stay the
 * caller's. */
void gaz_proxy_read(struct gaz_broker *b, struct gaz_rpc_call *call, Protocol__ReadRequest *req,
		    const struct gaz_resolution *res);

/* gaz_proxy_append_fast is the Append's fast path (gaz_rpc_fast_fn, on a
 * poller) for a whole small request to a journal whose primary is
 * another broker: it forwards the request and relays the answer without
 * a handler thread, and returns true once it took the call. False (the
 * call untouched) for anything the handler must do: not whole or too
 * large, do_not_proxy, a Header from an earlier hop, invalid, not
 * visible, this broker the primary, a route not ready to proxy to. */
bool gaz_proxy_append_fast(struct gaz_rpc_call *call, struct gaz_broker *b);

#endif
