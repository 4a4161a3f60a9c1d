/* metrics.c - the broker's metric families. See metrics.h. */
#include "broker/metrics.h"

#include "common/metrics.h"
#include "protocol.pb-c.h"

static struct gaz_metric *started, *completed, *write_head, *commits, *commit_bytes, *rollbacks,
	*rollback_bytes, *completed_spools, *persisted, *alloc_ops, *group_commits, *group_members,
	*parked, *group_continued, *poller_commits;

int gaz_broker_metrics_init(void)
{
	struct gaz_metrics *r = gaz_metrics_default();
	struct gaz_status st = {0};

	started = gaz_metrics_counter(r, "gazette_journal_server_started_totals",
				      "Total number of started journal RPCs.", "operation");
	completed = gaz_metrics_counter(r, "gazette_journal_server_completed_totals",
					"Total number of completed journal RPCs.", "operation,status");
	write_head = gaz_metrics_gauge(r, "gazette_write_head",
				       "Current write head of the journal.", "journal");
	commits = gaz_metrics_counter(r, "gazette_spool_commits_total",
				      "Cumulative number of spool commits.", NULL);
	commit_bytes = gaz_metrics_counter(r, "gazette_spool_commit_bytes_total",
					   "Cumulative number of bytes committed to spools.", NULL);
	rollbacks = gaz_metrics_counter(r, "gazette_spool_rollbacks_total",
					"Cumulative number of spool rollbacks.", NULL);
	rollback_bytes = gaz_metrics_counter(r, "gazette_spool_rollback_bytes_total",
					     "Cumulative number of bytes rolled back.", NULL);
	completed_spools = gaz_metrics_counter(r, "gazette_spool_completed_total",
					       "Cumulative number of completed spools.", NULL);
	persisted = gaz_metrics_counter(r, "gazette_spool_persisted_total",
					"Cumulative number of persisted spools.", NULL);
	alloc_ops = gaz_metrics_counter(r, "gazette_allocator_assignment_total",
					"Cumulative allocator assignment operations by kind.", "kind");
	group_commits = gaz_metrics_counter(r, "gazette_append_group_commits_total",
					    "Commits that carried more than one append (group commit).", NULL);
	group_members = gaz_metrics_counter(r, "gazette_append_group_members_total",
					    "Appends committed as part of a group commit.", NULL);
	parked = gaz_metrics_counter(r, "gazette_append_parked_total",
				     "Appends queued for group commit with no handler thread.", NULL);
	group_continued = gaz_metrics_counter(r, "gazette_append_group_continued_total",
					      "Groups committed by the token holder of the group before "
					      "it, without a hand-off.", NULL);
	poller_commits = gaz_metrics_counter(r, "gazette_append_poller_commits_total",
					     "Lone appends committed and answered by the grpc pollers, "
					     "with no handler thread.", NULL);
	return gaz_metrics_process(r, &st);
}

void gaz_metric_append_parked(void) { gaz_metric_inc(gaz_metric_with(parked)); }

void gaz_metric_group_continued(void) { gaz_metric_inc(gaz_metric_with(group_continued)); }

void gaz_metric_append_poller_commit(void) { gaz_metric_inc(gaz_metric_with(poller_commits)); }

void gaz_metric_group_commit(int64_t members)
{
	if (members < 2)
		return;
	gaz_metric_inc(gaz_metric_with(group_commits));
	gaz_metric_add(gaz_metric_with(group_members), members);
}

void gaz_metric_rpc_started(const char *op) { gaz_metric_inc(gaz_metric_with(started, op)); }

void gaz_metric_rpc_completed(const char *op, const char *status)
{
	gaz_metric_inc(gaz_metric_with(completed, op, status));
}

void gaz_metric_write_head(const char *journal, int64_t head)
{
	gaz_metric_set(gaz_metric_with(write_head, journal), head);
}

void gaz_metric_spool_commit(int64_t bytes)
{
	gaz_metric_inc(gaz_metric_with(commits));
	gaz_metric_add(gaz_metric_with(commit_bytes), bytes);
}

void gaz_metric_spool_rollback(int64_t bytes)
{
	gaz_metric_inc(gaz_metric_with(rollbacks));
	gaz_metric_add(gaz_metric_with(rollback_bytes), bytes);
}

void gaz_metric_spool_completed(void) { gaz_metric_inc(gaz_metric_with(completed_spools)); }
void gaz_metric_spool_persisted(void) { gaz_metric_inc(gaz_metric_with(persisted)); }

void gaz_metric_allocator_txn(const char *kind, int64_t n)
{
	gaz_metric_add(gaz_metric_with(alloc_ops, kind), n);
}

const char *gaz_status_label(int status)
{
	const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(&protocol__status__descriptor,
									    status);
	return v ? v->name : "UNKNOWN";
}
