/*
 * metrics.h - the broker's Prometheus metrics, under Gazette's names
 * (facts §8.4): RPCs started/completed per operation and status, the
 * write head per journal, spool commits/rollbacks/completions and
 * persisted fragments, store operations, and allocator activity.
 */
#ifndef GAZ_BROKER_METRICS_H
#define GAZ_BROKER_METRICS_H

#include <stdbool.h>
#include <stdint.h>

struct gaz_metric_child;

/* gaz_broker_metrics_init registers every family (and the process
 * collector) in the default registry. Call once at start-up. */
int gaz_broker_metrics_init(void);

/* An RPC of `op` ("Append", "Read", ...) started / completed with
 * `status`, a label of gaz_metric_completed_label. */
void gaz_metric_rpc_started(const char *op);
void gaz_metric_rpc_completed(const char *op, const char *status);

/* gaz_metric_completed_label is Gazette's status label of a completed RPC
 * (broker/service.go, instrumentJournalServerRPC): "<error>" when it
 * ended with gRPC `code` != OK, else "ok" for Protocol__Status `status`
 * OK and otherwise the status's name ("JOURNAL_NOT_FOUND"). Static. */
const char *gaz_metric_completed_label(int code, int status);

void gaz_metric_write_head(const char *journal, int64_t head);
void gaz_metric_spool_commit(int64_t bytes);
void gaz_metric_spool_rollback(int64_t bytes);
void gaz_metric_spool_completed(void);
void gaz_metric_spool_persisted(void);
/* Ours, not Gazette's: a write to the spool of `journal` failed (disk
 * full, I/O error): gazette_spool_write_failures_total{journal}; and
 * whether its spool is failing now (the last write failed, none has
 * succeeded since): the gauge gazette_spool_write_failing{journal}. */
void gaz_metric_spool_write_failed(const char *journal);
void gaz_metric_spool_failing(const char *journal, bool failing);

/* The allocator's planned assignment changes (Gazette's
 * gazette_allocator_assignment_{added,packed,removed}_total; a promotion
 * to primary is a pack, as in allocator/item_state.go). */
void gaz_metric_allocator_ops(int64_t added, int64_t packed, int64_t removed);
/* One converge iteration of the leader over a new keyspace revision:
 * `solve_s` is what the assignment pass took (ours is greedy; Gazette
 * times its max-flow solve), with the member and item counts and the
 * desired replication slots summed over items. */
void gaz_metric_allocator_converged(double solve_s, int64_t members, int64_t items, int64_t slots);

/* An exiting broker's wait (gazette-c's own gauges): journals it still
 * holds an assignment of (and of those, as primary), and fragments still
 * to persist (and of those, the ones no peer holds a copy of). */
void gaz_metric_exit_held(int64_t journals, int64_t primaries);
void gaz_metric_exit_unpersisted(int64_t fragments, int64_t sole);

/* A scrape of /debug/metrics begins / ended with HTTP `code`
 * (promhttp_metric_handler_requests_in_flight and _total{code}). */
void gaz_metric_scrape_begin(void);
void gaz_metric_scrape_end(int code);

/* Bytes the journal gateway appended / read (Gazette's client Appender and
 * Reader count them in its gateway: gazette_append_bytes_total and
 * gazette_read_bytes_total{journal}). */
void gaz_metric_append_bytes(const char *journal, int64_t n);
void gaz_metric_read_bytes(const char *journal, int64_t n);
/* Ours, not Gazette's: content bytes a Read RPC sent
 * (gazette_read_served_bytes_total{source="spool"|"store"}), and signed
 * fragment URLs sent (gazette_read_fragment_urls_total): a backfill that
 * reads the bucket directly shows as URLs with few store bytes. */
void gaz_metric_read_served(bool from_store, int64_t n);
void gaz_metric_read_fragment_url(void);
/* Ours: a head group's round (read_fanout.c) reached `shared` waiting
 * readers and returned `returned` to their own reads
 * (gazette_read_head_deliveries_total{outcome}). */
void gaz_metric_read_head(int64_t shared, int64_t returned);
/* The counter of uncompressed bytes of persisted fragments of `journal`
 * with Protocol__CompressionCodec `codec` read (or, `discarded`, skipped
 * to reach the offset): gazette_{read,discard}_fragment_bytes_total. A
 * borrowed child, valid for the process. */
struct gaz_metric_child *gaz_metric_fragment_bytes(bool discarded, const char *journal, int codec);

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
/* A pulse's outcome (pulse.c): gazette_journal_pulses_total{path,outcome}. */
void gaz_metric_pulse(bool fast, bool ok);
/* A whole small append proxied from the pollers (gaz_proxy_append_fast). */
void gaz_metric_append_poller_proxy(void);

/* gaz_status_label names a Protocol__Status for metric labels. */
const char *gaz_status_label(int status);

#endif
