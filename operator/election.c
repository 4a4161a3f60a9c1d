/*
 * election.c - leader election on a coordination.k8s.io/v1 Lease, as
 * client-go's leaderelection (k8s.md §5.5):
 *
 *   follower: GET the Lease every retry period. Absent -> create it with
 *     us as holder. Held by another -> it has expired only when its
 *     resourceVersion has not changed for leaseDuration of OUR clock (no
 *     trust in the holder's renewTime across clock skew) -> take it over
 *     with a PUT carrying the observed resourceVersion (409: someone else
 *     won; keep following). Empty holder (released) -> take it at once.
 *   leader: renew (PUT renewTime) every retry period; when no renewal has
 *     succeeded for renewDeadline, leadership is lost: log and exit(1), so
 *     a deposed leader never keeps writing.
 *   stop: a leader releases the Lease (empty holder) so a successor need
 *     not wait for it to expire.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "operator/operator.h"

struct campaign {
	struct gaz_op *op;
	char path[512];            /* the Lease */
	char observed_rv[64];
	int64_t observed_at_ns;    /* monotonic time observed_rv was first seen */
	int64_t last_renew_ns;
};

static void nap_ns(struct gaz_op *op, int64_t ns)
{
	int64_t end = gaz_mono_ns() + ns;

	while (!atomic_load(&op->stop) && gaz_mono_ns() < end) {
		struct timespec ts = {0, 50 * 1000000L};
		nanosleep(&ts, NULL);
	}
}

static json_t *lease_spec(struct campaign *c, const json_t *old_spec, bool release)
{
	char now[40];
	const char *holder = json_string_value(json_object_get(old_spec, "holderIdentity"));
	int64_t transitions = json_integer_value(json_object_get(old_spec, "leaseTransitions"));
	bool changed = !holder || strcmp(holder, c->op->cfg.identity);
	json_t *acq = json_object_get(old_spec, "acquireTime");

	gaz_kube_now_rfc3339(now, sizeof(now), true);
	return json_pack("{s:s, s:I, s:o, s:s, s:I}", "holderIdentity",
			 release ? "" : c->op->cfg.identity, "leaseDurationSeconds",
			 (json_int_t)(release ? 1 : c->op->cfg.lease_duration_ns / GAZ_NS_PER_S),
			 "acquireTime", changed || !acq ? json_string(now) : json_incref(acq),
			 "renewTime", now, "leaseTransitions",
			 (json_int_t)(changed && old_spec && !release ? transitions + 1 : transitions));
}

static int create_lease(struct campaign *c, struct gaz_status *st)
{
	char path[512];
	json_t *body = json_pack("{s:s, s:s, s:{s:s, s:s}, s:o}", "apiVersion", "coordination.k8s.io/v1",
				 "kind", "Lease", "metadata", "name", c->op->cfg.lease_name,
				 "namespace", c->op->cfg.lease_namespace, "spec",
				 lease_spec(c, NULL, false));
	int rc;

	snprintf(path, sizeof(path), "/apis/coordination.k8s.io/v1/namespaces/%s/leases",
		 c->op->cfg.lease_namespace);
	rc = gaz_kube_requestj(c->op->kube, "POST", path, NULL, body, NULL, NULL, st);
	json_decref(body);
	return rc;
}

/* PUTs the Lease `cur` (borrowed) with us as holder, or released. */
static int update_lease(struct campaign *c, const json_t *cur, bool release, struct gaz_status *st)
{
	json_t *body = json_deep_copy(cur);
	int rc;

	json_object_set_new(body, "spec", lease_spec(c, json_object_get(cur, "spec"), release));
	rc = gaz_kube_requestj(c->op->kube, "PUT", c->path, NULL, body, NULL, NULL, st);
	json_decref(body);
	return rc;
}

/* One attempt to acquire or renew. Returns true when we hold the Lease. */
static bool try_hold(struct campaign *c)
{
	struct gaz_status st = {0};
	json_t *cur = NULL;
	int rc = gaz_kube_request(c->op->kube, "GET", c->path, NULL, NULL, &cur, NULL, &st);
	bool held = false;

	if (rc == GAZ_ENOTFOUND) {
		held = create_lease(c, &st) == 0;
	} else if (rc == 0) {
		const json_t *spec = json_object_get(cur, "spec");
		const char *holder = json_string_value(json_object_get(spec, "holderIdentity")) ?: "";
		const char *rv = json_string_value(json_object_get(json_object_get(cur, "metadata"),
								   "resourceVersion")) ?: "";
		if (strcmp(rv, c->observed_rv)) {
			snprintf(c->observed_rv, sizeof(c->observed_rv), "%s", rv);
			c->observed_at_ns = gaz_mono_ns();
		}
		bool mine = !strcmp(holder, c->op->cfg.identity);
		bool expired = gaz_mono_ns() - c->observed_at_ns > c->op->cfg.lease_duration_ns;
		if (mine || !*holder || expired)
			held = update_lease(c, cur, false, &st) == 0;
	}
	if (!held && st.code && st.code != GAZ_EEXIST)
		gaz_debug("lease attempt failed", "lease=%s err=%s", c->path, st.msg);
	json_decref(cur);
	return held;
}

static void release(struct campaign *c)
{
	struct gaz_status st = {0};
	json_t *cur = NULL;

	if (gaz_kube_request(c->op->kube, "GET", c->path, NULL, NULL, &cur, NULL, &st) == 0 &&
	    !strcmp(json_string_value(json_object_get(json_object_get(cur, "spec"), "holderIdentity")) ?: "",
		    c->op->cfg.identity) &&
	    update_lease(c, cur, true, &st) == 0)
		gaz_info("released leadership", "lease=%s", c->path);
	json_decref(cur);
}

void *gaz_election_run(void *arg)
{
	struct gaz_op *op = arg;
	struct campaign c = {.op = op, .observed_at_ns = gaz_mono_ns()};

	snprintf(c.path, sizeof(c.path), "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s",
		 op->cfg.lease_namespace, op->cfg.lease_name);
	gaz_info("campaigning for leadership", "lease=%s identity=%s", c.path, op->cfg.identity);
	while (!atomic_load(&op->stop)) {
		bool held = try_hold(&c);
		int64_t now = gaz_mono_ns();
		if (held) {
			c.last_renew_ns = now;
			if (!atomic_exchange(&op->leading, true))
				gaz_info("became leader", "lease=%s identity=%s", c.path, op->cfg.identity);
		} else if (atomic_load(&op->leading) &&
			   now - c.last_renew_ns > op->cfg.renew_deadline_ns) {
			gaz_error("lost leadership: could not renew the lease in time; exiting",
				  "lease=%s identity=%s", c.path, op->cfg.identity);
			exit(1);
		}
		nap_ns(op, op->cfg.retry_period_ns);
	}
	if (atomic_load(&op->leading))
		release(&c);
	return NULL;
}
