/*
 * authorize.c - see authorize.h. Lock rule: none (the claims are written
 * before they are shared, and immutable after).
 */
#include "rpc/authorize.h"

#include <stdlib.h>

#include "common/clock.h"

static void claims_free(void *p)
{
	struct gaz_claims *c = p;

	gaz_claims_release(c);
	free(c);
}

int gaz_rpc_authorize(const struct gaz_auth *keys, struct gaz_rpc_call *call, uint32_t require,
		      struct gaz_status *st)
{
	struct gaz_claims *c;
	double now, left;
	int rc;

	if (!keys || gaz_rpc_user(call))
		return 0;
	if (!(c = calloc(1, sizeof(*c))))
		return gaz_status_set(st, GAZ_ENOMEM, "allocating claims");
	now = gaz_auth_now();
	if ((rc = gaz_auth_verify(keys, gaz_rpc_metadata(call, "authorization"), require, now, c, st))) {
		free(c);
		return rc;
	}
	gaz_rpc_set_user(call, c, claims_free);
	/* The call lives no longer than its token: until `exp`, without the
	 * leeway its verification allows (Gazette's context.WithDeadline). */
	left = c->exp - now;
	gaz_rpc_expire_at(call, left <= 0    ? gaz_mono_ns()
				: left >= 9e9 ? GAZ_DEADLINE_NEVER
					      : gaz_mono_ns() + (int64_t)(left * 1e9));
	return 0;
}

bool gaz_rpc_refused(const struct gaz_auth *keys, struct gaz_rpc_call *call, uint32_t require)
{
	struct gaz_status st = {0};

	if (!gaz_rpc_authorize(keys, call, require, &st))
		return false;
	gaz_rpc_finish(call, NULL, st.grpc ? st.grpc : GAZ_GRPC_RESOURCE_EXHAUSTED, st.msg);
	return true;
}

const Protocol__LabelSelector *gaz_rpc_claims_selector(struct gaz_rpc_call *call)
{
	const struct gaz_claims *c = call ? gaz_rpc_user(call) : NULL;
	const Protocol__LabelSelector *s = c ? c->sel : NULL;

	if (s && (!s->include || !s->include->n_labels) && (!s->exclude || !s->exclude->n_labels))
		return NULL; /* matches everything */
	return s;
}
