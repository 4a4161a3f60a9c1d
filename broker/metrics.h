/*
 * metrics.h - the broker's Prometheus metrics, under Gazette's names
 * (facts §8.4): RPCs started/completed per operation and status, the
 * write head per journal, spool commits/rollbacks/completions and
 * persisted fragments, store operations, and allocator activity.
 */
#ifndef GAZ_BROKER_METRICS_H
#define GAZ_BROKER_METRICS_H

#include <stdint.h>

/* gaz_broker_metrics_init registers every family (and the process
 * collector) in the default registry. Call once at start-up. */
int gaz_broker_metrics_init(void);

/* An RPC of `op` ("Append", "Read", ...) started / completed with `status`
 * ("ok", a Gazette status name, or an error word). */
void gaz_metric_rpc_started(const char *op);
void gaz_metric_rpc_completed(const char *op, const char *status);

void gaz_metric_write_head(const char *journal, int64_t head);
void gaz_metric_spool_commit(int64_t bytes);
void gaz_metric_spool_rollback(int64_t bytes);
void gaz_metric_spool_completed(void);
void gaz_metric_spool_persisted(void);
void gaz_metric_allocator_txn(const char *kind, int64_t n);

/* A commit of `members` appends together (append_batch.c); counted when
 * more than one (ours: Gazette commits each append alone). */
void gaz_metric_group_commit(int64_t members);
void gaz_metric_append_parked(void);
/* A group committed by the token holder of the group before it, with no
 * hand-off (append_local.c; ours). */
void gaz_metric_group_continued(void);
/* A lone append committed and answered by the pollers (append_local.c;
 * ours). */
void gaz_metric_append_poller_commit(void);

/* gaz_status_label names a Protocol__Status for metric labels. */
const char *gaz_status_label(int status);

#endif
