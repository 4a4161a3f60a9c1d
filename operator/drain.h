/*
 * drain.h - broker drains on Kubernetes: the operator watches the broker
 * pods (a label selector), maps each pod to its member key in the
 * brokers' etcd, and
 *
 *   - when a pod is terminating (metadata.deletionTimestamp set), marks
 *     its member exiting (BrokerSpec.exiting = true, the mark a broker
 *     writes itself on SIGTERM; facts §4.2), so the allocator starts
 *     moving its journals at once, even before the container sees SIGTERM;
 *   - reports the drain on the pod (annotations gazette-c.dev/drain,
 *     -assignments, -message), as Events (DrainStarted, Drained) and as
 *     metrics;
 *   - holds the pod object with the finalizer gazette-c.dev/drain until
 *     the member key is gone from etcd (the broker revokes its lease only
 *     after every spool was persisted), so a StatefulSet never starts the
 *     replacement pod (same name, same broker id) while the old member
 *     still holds journals;
 *   - keeps a PodDisruptionBudget over the broker pods whose
 *     maxUnavailable is 0 while any journal has fewer live, consistent
 *     replicas than its desired replication or any member is exiting, and
 *     1 otherwise (facts §4.3 for the desired replication, §4.4 for
 *     consistency).
 *
 * Pod to member: the broker's id (--broker.id, BROKER_ID) is the pod's
 * name, so the member key is <prefix>/members/<zone>#<pod name> for
 * whatever zone the broker announced; the operator finds it by suffix.
 *
 * Threads: one thread of its own evaluates everything at most every
 * interval, sooner when a pod or the keyspace changes, and only while
 * op->leading. It shares op->kube and op->etcd (both thread-safe) and
 * nothing else with the JournalSpec worker.
 */
#ifndef GAZ_OPERATOR_DRAIN_H
#define GAZ_OPERATOR_DRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

struct gaz_op;

#define GAZ_DRAIN_FINALIZER "gazette-c.dev/drain"
#define GAZ_DRAIN_ANNOTATION "gazette-c.dev/drain"

/* Drain settings, from gazette-operator's flags. Strings are borrowed and
 * must outlive the drain controller. */
struct gaz_drain_config {
	const char *selector;    /* label selector of broker pods; "" = off */
	const char *namespace;   /* their namespace; "" = the operator's --namespace,
	                          * else the configuration's, else "default" */
	const char *pdb_name;    /* PodDisruptionBudget to keep; "" = none. Needs an
	                          * equality-only selector ("a=b,c=d") */
	bool finalizer;          /* hold terminating pods until the member is gone */
	int64_t max_replication; /* the brokers' --broker.max-replication */
	int64_t interval_ns;     /* evaluate at least this often */
};

struct gaz_drain;

/* gaz_drain_start validates `cfg` (copied; its strings borrowed), starts
 * the pod informer, the keyspace mirror of op->cfg.etcd_prefix and the
 * drain thread. `op` is borrowed and must outlive the controller. Returns
 * NULL with st set: GAZ_EINVAL (a selector the PDB cannot express), the
 * errors of gaz_keyspace_load, GAZ_ENOMEM. */
struct gaz_drain *gaz_drain_start(struct gaz_op *op, const struct gaz_drain_config *cfg,
				  struct gaz_status *st);

/* gaz_drain_synced: the pod cache has completed its first list. NULL-safe
 * (a NULL controller is synced). */
bool gaz_drain_synced(struct gaz_drain *d);

/* gaz_drain_stop ends the thread (within about a second) and frees
 * everything. NULL-safe. */
void gaz_drain_stop(struct gaz_drain *d);

/* gaz_drain_parse_selector turns an equality-only label selector
 * ("app=gazette,tier=broker"; spaces around items allowed) into a
 * matchLabels object (new reference). NULL for anything else (set-based
 * or negated requirements, empty keys). Pure. */
struct json_t *gaz_drain_parse_selector(const char *selector);

#endif
