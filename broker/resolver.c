/*
 * resolver.c - journal resolution against the keyspace (facts §2.0): which
 * spec, route and broker answer an RPC for a journal, and the Header that
 * says so. Every journal-scoped RPC starts here.
 */
#include "broker/broker.h"
#include "rpc/authorize.h"
#include "protocol/labels.h"

#include <stdlib.h>
#include <string.h>

#include "broker/replica.h"
#include "common/clock.h"

int gaz_wait_revision(struct gaz_broker *b, struct gaz_rpc_call *call, int64_t rev,
		      int64_t deadline_ns)
{
	return gaz_keyspace_wait_call(b->ks, call, rev, deadline_ns);
}

bool gaz_broker_is_local(const struct gaz_broker *b, const char *zone, const char *suffix)
{
	return !strcmp(zone, b->cfg.zone) && !strcmp(suffix, b->cfg.id);
}

void gaz_resolution_release(struct gaz_resolution *res)
{
	free(res->journal);
	if (res->spec)
		protobuf_c_message_free_unpacked(&res->spec->base, NULL);
	gaz_route_release(&res->route);
	if (res->replica)
		gaz_replica_unref(res->replica);
	memset(res, 0, sizeof(*res));
}

/* Step 3: a proxied request's header must be ours. */
static int check_proxy_header(struct gaz_broker *b, const Protocol__Header *h, bool check_pid,
			      bool member_present, struct gaz_status *st)
{
	struct gaz_etcd_header eh;

	gaz_keyspace_rlock(b->ks);
	eh = gaz_keyspace_header(b->ks);
	gaz_keyspace_runlock(b->ks);
	if (h->etcd && h->etcd->cluster_id != eh.cluster_id)
		return gaz_status_set(st, GAZ_EINVAL,
				      "request Etcd ClusterId doesn't match our own (%llu vs %llu)",
				      (unsigned long long)h->etcd->cluster_id,
				      (unsigned long long)eh.cluster_id);
	if (check_pid && h->process_id && (h->process_id->zone[0] || h->process_id->suffix[0])) {
		const char *zone = member_present ? b->cfg.zone : "local-BrokerSpec";
		const char *suffix = member_present ? b->cfg.id : "missing-from-Etcd";
		if (strcmp(h->process_id->zone, zone) || strcmp(h->process_id->suffix, suffix))
			return gaz_status_set(st, GAZ_EINVAL,
					      "request ProcessId doesn't match our own (%s#%s)",
					      zone, suffix);
	}
	return 0;
}

/* Steps 6-10, with the keyspace read-locked. */
static int resolve_locked(struct gaz_broker *b, const struct gaz_resolve_opts *o,
			  struct gaz_resolution *res)
{
	const struct gaz_ks_entry *item = gaz_ks_item(b->ks, b->root, res->journal);
	const struct gaz_ks_value *iv = item ? item->decoded : NULL;
	const Protocol__LabelSelector *sel = gaz_rpc_claims_selector(o->call);
	bool member_present = gaz_keyspace_get(b->ks, b->member_key) != NULL;

	/* A journal the caller's claims do not match (its labels plus
	 * name=<journal>) does not exist for it: no spec, an empty route. */
	if (item && sel && !gaz_selector_matches_meta(sel, res->journal, iv->spec->labels, 0))
		item = NULL, iv = NULL;
	res->etcd = gaz_keyspace_header(b->ks);
	if (item && gaz_route_build(b->ks, b->root, res->journal, &res->route))
		return GAZ_ENOMEM;
	res->local_index = member_present ? gaz_route_index(&res->route, b->cfg.zone, b->cfg.id) : -1;
	if (item) {
		res->spec = (Protocol__JournalSpec *)gaz_pb_copy(&iv->spec->base);
		if (!res->spec)
			return GAZ_ENOMEM;
		res->item_create_revision = item->create_revision;
		res->item_mod_revision = item->mod_revision;
	}
	res->process_index = -1;
	if (o->require_primary && res->route.primary != -1)
		res->process_index = res->route.primary;
	else if (!o->require_primary && res->local_index >= 0)
		res->process_index = res->local_index;

	if (!item)
		res->status = PROTOCOL__STATUS__JOURNAL_NOT_FOUND;
	else if (res->spec->suspend &&
		 res->spec->suspend->level == PROTOCOL__JOURNAL_SPEC__SUSPEND__LEVEL__FULL)
		res->status = PROTOCOL__STATUS__SUSPENDED;
	else if (o->require_primary && res->route.primary == -1)
		res->status = PROTOCOL__STATUS__NO_JOURNAL_PRIMARY_BROKER;
	else if (res->route.n == 0)
		res->status = PROTOCOL__STATUS__INSUFFICIENT_JOURNAL_BROKERS;
	else if (!o->may_proxy && (res->process_index < 0 || res->process_index != res->local_index))
		res->status = o->require_primary ? PROTOCOL__STATUS__NOT_JOURNAL_PRIMARY_BROKER
						 : PROTOCOL__STATUS__NOT_JOURNAL_BROKER;
	else
		res->status = PROTOCOL__STATUS__OK;
	if (res->status != PROTOCOL__STATUS__OK)
		res->process_index = res->local_index; /* the responder (step 11) */
	return 0;
}

int gaz_resolve(struct gaz_broker *b, const char *journal, const struct gaz_resolve_opts *o,
		struct gaz_resolution *res, struct gaz_status *st)
{
	int64_t min_rev = o->min_etcd_revision;
	const char *semi = strchr(journal, ';');
	bool member_present;
	int rc;

	memset(res, 0, sizeof(*res));
	res->route.primary = -1;
	res->journal = semi ? strndup(journal, (size_t)(semi - journal)) : strdup(journal);
	if (!res->journal)
		return gaz_status_set(st, GAZ_ENOMEM, "resolve: out of memory");
	/* The cluster must match before waiting for its revision; the process
	 * id is checked after it: the header names us as of that revision,
	 * which our own mirror may not have reached yet. */
	if (o->proxy_header && (rc = check_proxy_header(b, o->proxy_header, false, false, st)))
		return rc;
	if (o->proxy_header && o->proxy_header->etcd && o->proxy_header->etcd->revision > min_rev)
		min_rev = o->proxy_header->etcd->revision;
	if (min_rev > 0 && o->no_wait) {
		gaz_keyspace_rlock(b->ks);
		rc = gaz_keyspace_revision(b->ks) < min_rev ? GAZ_ETIMEDOUT : 0;
		gaz_keyspace_runlock(b->ks);
		if (rc)
			return gaz_status_set(st, rc, "etcd revision %lld not reached yet",
					      (long long)min_rev);
	} else if (min_rev > 0) {
		rc = gaz_wait_revision(b, o->call, min_rev, GAZ_DEADLINE_NEVER);
		if (rc)
			return gaz_status_set(st, rc, "waiting for etcd revision %lld: %s",
					      (long long)min_rev, gaz_err_str(rc));
	}
	if (o->proxy_header) {
		gaz_keyspace_rlock(b->ks);
		member_present = gaz_keyspace_get(b->ks, b->member_key) != NULL;
		gaz_keyspace_runlock(b->ks);
		if ((rc = check_proxy_header(b, o->proxy_header, true, member_present, st)))
			return rc;
	}
	gaz_keyspace_rlock(b->ks);
	rc = resolve_locked(b, o, res);
	gaz_keyspace_runlock(b->ks);
	if (rc)
		return gaz_status_set(st, rc, "resolve: out of memory");
	if (res->status == PROTOCOL__STATUS__OK && res->local_index >= 0 &&
	    res->process_index == res->local_index && o->no_wait) {
		res->replica = gaz_replica_get(b, res->journal);
		if (res->replica && (res->replica->create_revision != res->item_create_revision ||
				     atomic_load(&b->stopping))) {
			gaz_replica_unref(res->replica);
			res->replica = NULL;
		}
	} else if (res->status == PROTOCOL__STATUS__OK && res->local_index >= 0 &&
	    res->process_index == res->local_index) {
		res->replica = gaz_replica_get(b, res->journal);
		/* Assigned, but maintenance has not created the replica yet:
		 * create it here, as the assignment is already ours. */
		if (!res->replica && atomic_load(&b->exiting))
			return gaz_status_set(st, GAZ_EUNAVAIL, "journal %s is being handed off",
					      res->journal);
		if (!res->replica && !atomic_load(&b->stopping) &&
		    gaz_replica_new(b, res->journal, res->item_create_revision)) {
			res->replica = gaz_replica_get(b, res->journal);
			gaz_maintain_look(b, res->journal); /* primacy, first listing */
		} else if (!res->replica) {
			res->replica = gaz_replica_get(b, res->journal);
		}
		if (res->replica && res->replica->create_revision != res->item_create_revision) {
			/* A replica of a deleted and re-created journal: retire it
			 * (its spool is persisted) and serve the new one. */
			gaz_replica_teardown(res->replica);
			gaz_replica_unref(res->replica);
			gaz_replica_new(b, res->journal, res->item_create_revision);
			res->replica = gaz_replica_get(b, res->journal);
			gaz_maintain_look(b, res->journal);
		}
		if (!res->replica ||
		    (atomic_load(&b->stopping) && !(res->replica->sealed && o->read_only)))
			return gaz_status_set(st, GAZ_ESTOPPED,
					      "resolver has stopped serving local replicas");
	}
	return 0;
}

/* ---- headers ------------------------------------------------------------- */

Protocol__Header *gaz_header_build(struct gaz_broker *b, const struct gaz_resolution *res)
{
	const char *zone = NULL, *suffix = NULL;

	if (res->process_index >= 0) {
		zone = res->route.zone[res->process_index];
		suffix = res->route.suffix[res->process_index];
	} else if (res->status != PROTOCOL__STATUS__OK) {
		/* The responder; not a route member (or shutting down). */
		bool present = atomic_load(&b->announced) && !atomic_load(&b->stopping);
		zone = present ? b->cfg.zone : "local-BrokerSpec";
		suffix = present ? b->cfg.id : "missing-from-Etcd";
	}
	return gaz_header_new(&res->etcd, zone, suffix, &res->route);
}

Protocol__Header *gaz_header_unrouted(struct gaz_broker *b, int64_t revision)
{
	struct gaz_etcd_header eh;
	bool announced = atomic_load(&b->announced);

	gaz_keyspace_rlock(b->ks);
	eh = gaz_keyspace_header(b->ks);
	gaz_keyspace_runlock(b->ks);
	if (revision)
		eh.revision = revision;
	return gaz_header_new(&eh, announced ? b->cfg.zone : NULL, announced ? b->cfg.id : NULL, NULL);
}

