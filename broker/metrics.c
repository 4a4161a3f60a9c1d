/* metrics.c - the broker's metric families. See metrics.h. */
#include "broker/metrics.h"

#include "common/metrics.h"

#include <stdio.h>
#include "protocol.pb-c.h"

static struct gaz_metric *started, *completed, *write_head, *commits, *commit_bytes, *rollbacks,
	*rollback_bytes, *completed_spools, *persisted, *group_commits, *group_members,
	*parked, *group_continued, *poller_commits, *poller_proxies, *pulses;
/* Gazette's allocator (allocator/doc.go). */
static struct gaz_metric *alloc_added, *alloc_packed, *alloc_removed, *alloc_converge,
	*alloc_runtime, *alloc_slots, *alloc_items, *alloc_members;
/* Gazette's client metrics (broker/client/doc.go) that its broker moves:
 * the journal gateway reads and appends through a client Reader and
 * Appender, and reads of persisted fragments go through a FragmentReader. */
static struct gaz_metric *append_bytes, *read_bytes, *read_fragment_bytes, *discard_fragment_bytes;
/* client_golang's promhttp handler instrumentation of /debug/metrics. */
static struct gaz_metric *scrapes, *scrapes_in_flight;
/* An exiting broker's hand-off and persist waits (ours). */
static struct gaz_metric *exit_held, *exit_held_primary, *exit_unpersisted, *exit_sole;
static struct gaz_metric *spool_write_failures, *spool_write_failing;
/* What Read RPCs served (ours): content bytes by where they came from,
 * and signed fragment URLs handed out for readers to fetch themselves. */
static struct gaz_metric *read_served, *read_urls, *read_head;

/* Gazette's allocator families, unlabelled, so present (at 0) from the
 * start as promauto's are. */
static void allocator_init(struct gaz_metrics *r)
{
	alloc_added = gaz_metrics_counter(r, "gazette_allocator_assignment_added_total",
					  "Cumulative number of item / member assignments added by the allocator.", NULL);
	alloc_packed = gaz_metrics_counter(r, "gazette_allocator_assignment_packed_total",
					   "Cumulative number of item / member assignments packed by the allocator.", NULL);
	alloc_removed = gaz_metrics_counter(r, "gazette_allocator_assignment_removed_total",
					    "Cumulative number of item / member assignments removed by the allocator.", NULL);
	alloc_converge = gaz_metrics_counter(r, "gazette_allocator_converge_total",
					     "Cumulative number of converge iterations.", NULL);
	alloc_runtime = gaz_metrics_histogram(r, "gazette_allocator_max_flow_runtime_seconds",
					      "Duration required to re-solve for maximum assignment.", NULL,
					      NULL, 0);
	alloc_slots = gaz_metrics_gauge(r, "gazette_allocator_desired_replication_slots",
					"Number of desired item replication slots summed across all items.", NULL);
	alloc_items = gaz_metrics_gauge(r, "gazette_allocator_items",
					"Number of items known to the allocator.", NULL);
	alloc_members = gaz_metrics_gauge(r, "gazette_allocator_members",
					  "Number of members known to the allocator.", NULL);
	struct gaz_metric *all[] = {alloc_added, alloc_packed, alloc_removed, alloc_converge,
				    alloc_runtime, alloc_slots, alloc_items, alloc_members};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		(void)gaz_metric_with(all[i]);
}

static void client_init(struct gaz_metrics *r)
{
	append_bytes = gaz_metrics_counter(r, "gazette_append_bytes_total",
					   "Total number of journal bytes appended.", "journal");
	read_bytes = gaz_metrics_counter(r, "gazette_read_bytes_total",
					 "Total number of journal bytes read.", "journal");
	read_fragment_bytes = gaz_metrics_counter(
		r, "gazette_read_fragment_bytes_total",
		"Total number of uncompressed journal fragment bytes read, excluding discarded bytes.",
		"journal,codec");
	discard_fragment_bytes = gaz_metrics_counter(
		r, "gazette_discard_fragment_bytes_total",
		"Total number of uncompressed journal fragment bytes discarded while seeking to desired offset.",
		"journal,codec");
}

int gaz_broker_metrics_init(void)
{
	struct gaz_metrics *r = gaz_metrics_default();
	struct gaz_status st = {0};

	started = gaz_metrics_counter(r, "gazette_journal_server_started_totals",
				      "Total number of started JournalServer RPC invocations, by operation.", "operation");
	completed = gaz_metrics_counter(r, "gazette_journal_server_completed_totals",
					"Total number of completed JournalServer RPC invocations, by operation & response status", "operation,status");
	write_head = gaz_metrics_gauge(r, "gazette_write_head",
				       "Current write head of the journal (i.e., next byte offset to be written).", "journal");
	commits = gaz_metrics_counter(r, "gazette_spool_commits_total",
				      "Total number of commits of journal fragment spools.", NULL);
	commit_bytes = gaz_metrics_counter(r, "gazette_spool_commit_bytes_total",
					   "Total number of bytes committed to journal fragment spools.", NULL);
	rollbacks = gaz_metrics_counter(r, "gazette_spool_rollbacks_total",
					"Total number of rollbacks of journal fragment spools.", NULL);
	rollback_bytes = gaz_metrics_counter(r, "gazette_spool_rollback_bytes_total",
					     "Total number of bytes rolled-back from journal fragment spools.", NULL);
	completed_spools = gaz_metrics_counter(r, "gazette_spool_completed_total",
					       "Total number of journal fragment spools which have been completed, and are ready for persisting.", NULL);
	spool_write_failures = gaz_metrics_counter(r, "gazette_spool_write_failures_total",
						   "Writes to a journal's spool that failed (disk full, I/O error).",
						   "journal");
	spool_write_failing = gaz_metrics_gauge(r, "gazette_spool_write_failing",
						"1 while the last write to a journal's spool failed and none "
						"has succeeded since.", "journal");
	persisted = gaz_metrics_counter(r, "gazette_spool_persisted_total",
					"Total number of journal fragment spools which were persisted (by this server, or by another and then verified by this server).", NULL);
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
	poller_proxies = gaz_metrics_counter(r, "gazette_append_poller_proxies_total",
					     "Whole small appends proxied to their primary and answered "
					     "by the grpc pollers, with no handler thread.", NULL);
	pulses = gaz_metrics_counter(r, "gazette_journal_pulses_total",
				     "Pulses of journals this broker is primary of, by path (fast: "
				     "a periodic pulse proposed by the pulse thread and gathered by "
				     "the grpc pollers; handler: the Append handler on a pulse "
				     "runner) and outcome (ok, failed).", "path,outcome");
	allocator_init(r);
	client_init(r);
	read_served = gaz_metrics_counter(r, "gazette_read_served_bytes_total",
					  "Content bytes Read RPCs sent, by source: spool (local files) "
					  "or store (persisted fragments proxied).", "source");
	read_urls = gaz_metrics_counter(r, "gazette_read_fragment_urls_total",
					"Signed fragment URLs sent to readers, which fetch those "
					"fragments from the store themselves.", NULL);
	read_head = gaz_metrics_counter(r, "gazette_read_head_deliveries_total",
					"Deliveries to blocking Reads parked at a write head, by "
					"outcome: shared (one read and packing per commit, sent to "
					"every waiting reader) or returned (the reader was slow or "
					"gone, and reads on its own).", "outcome");
	(void)gaz_metric_with(read_head, "shared");
	(void)gaz_metric_with(read_head, "returned");
	(void)gaz_metric_with(read_served, "spool");
	(void)gaz_metric_with(read_served, "store");
	(void)gaz_metric_with(read_urls);
	exit_held = gaz_metrics_gauge(r, "gazette_exit_held_journals",
				      "Journals an exiting broker still holds an assignment of.", NULL);
	exit_held_primary = gaz_metrics_gauge(r, "gazette_exit_held_primary_journals",
					      "Journals an exiting broker is still primary of.", NULL);
	exit_unpersisted = gaz_metrics_gauge(r, "gazette_exit_unpersisted_fragments",
					     "Fragments an exiting broker still has to persist.", NULL);
	exit_sole = gaz_metrics_gauge(r, "gazette_exit_sole_copy_fragments",
				      "Fragments an exiting broker still has to persist and no peer holds.", NULL);
	struct gaz_metric *exit_all[] = {exit_held, exit_held_primary, exit_unpersisted, exit_sole};
	for (size_t i = 0; i < sizeof(exit_all) / sizeof(exit_all[0]); i++)
		(void)gaz_metric_with(exit_all[i]);
	scrapes = gaz_metrics_counter(r, "promhttp_metric_handler_requests_total",
				      "Total number of scrapes by HTTP status code.", "code");
	scrapes_in_flight = gaz_metrics_gauge(r, "promhttp_metric_handler_requests_in_flight",
					      "Current number of scrapes being served.", NULL);
	(void)gaz_metric_with(scrapes_in_flight);
	static const char *const codes[] = {"200", "500", "503"}; /* promhttp's, from the start */
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		(void)gaz_metric_with(scrapes, codes[i]);
	return gaz_metrics_process(r, &st);
}

void gaz_metric_append_parked(void) { gaz_metric_inc(gaz_metric_with(parked)); }

void gaz_metric_group_continued(void) { gaz_metric_inc(gaz_metric_with(group_continued)); }

void gaz_metric_append_poller_commit(void) { gaz_metric_inc(gaz_metric_with(poller_commits)); }
void gaz_metric_append_poller_proxy(void) { gaz_metric_inc(gaz_metric_with(poller_proxies)); }
void gaz_metric_pulse(bool fast, bool ok)
{
	gaz_metric_inc(gaz_metric_with(pulses, fast ? "fast" : "handler", ok ? "ok" : "failed"));
}

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

void gaz_metric_spool_write_failed(const char *journal)
{
	gaz_metric_inc(gaz_metric_with(spool_write_failures, journal));
}

void gaz_metric_spool_failing(const char *journal, bool failing)
{
	gaz_metric_set(gaz_metric_with(spool_write_failing, journal), failing ? 1 : 0);
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

void gaz_metric_allocator_ops(int64_t added, int64_t packed, int64_t removed)
{
	gaz_metric_add(gaz_metric_with(alloc_added), added);
	gaz_metric_add(gaz_metric_with(alloc_packed), packed);
	gaz_metric_add(gaz_metric_with(alloc_removed), removed);
}

void gaz_metric_allocator_converged(double solve_s, int64_t members, int64_t items, int64_t slots)
{
	gaz_metric_inc(gaz_metric_with(alloc_converge));
	gaz_metric_observe(gaz_metric_with(alloc_runtime), solve_s);
	gaz_metric_set(gaz_metric_with(alloc_members), members);
	gaz_metric_set(gaz_metric_with(alloc_items), items);
	gaz_metric_set(gaz_metric_with(alloc_slots), slots);
}

void gaz_metric_exit_held(int64_t journals, int64_t primaries)
{
	gaz_metric_set(gaz_metric_with(exit_held), journals);
	gaz_metric_set(gaz_metric_with(exit_held_primary), primaries);
}

void gaz_metric_exit_unpersisted(int64_t fragments, int64_t sole)
{
	gaz_metric_set(gaz_metric_with(exit_unpersisted), fragments);
	gaz_metric_set(gaz_metric_with(exit_sole), sole);
}

void gaz_metric_scrape_begin(void) { gaz_metric_add(gaz_metric_with(scrapes_in_flight), 1); }

void gaz_metric_scrape_end(int code)
{
	char c[16];

	snprintf(c, sizeof(c), "%d", code);
	gaz_metric_add(gaz_metric_with(scrapes_in_flight), -1);
	gaz_metric_inc(gaz_metric_with(scrapes, c));
}

void gaz_metric_append_bytes(const char *journal, int64_t n)
{
	gaz_metric_add(gaz_metric_with(append_bytes, journal), n);
}

void gaz_metric_read_served(bool from_store, int64_t n)
{
	gaz_metric_add(gaz_metric_with(read_served, from_store ? "store" : "spool"), n);
}

void gaz_metric_read_head(int64_t shared, int64_t returned)
{
	if (shared)
		gaz_metric_add(gaz_metric_with(read_head, "shared"), shared);
	if (returned)
		gaz_metric_add(gaz_metric_with(read_head, "returned"), returned);
}

void gaz_metric_read_fragment_url(void)
{
	gaz_metric_inc(gaz_metric_with(read_urls));
}

void gaz_metric_read_bytes(const char *journal, int64_t n)
{
	gaz_metric_add(gaz_metric_with(read_bytes, journal), n);
}

struct gaz_metric_child *gaz_metric_fragment_bytes(bool discarded, const char *journal, int codec)
{
	const ProtobufCEnumValue *v =
		protobuf_c_enum_descriptor_get_value(&protocol__compression_codec__descriptor, codec);

	return gaz_metric_with(discarded ? discard_fragment_bytes : read_fragment_bytes, journal,
			       v ? v->name : "INVALID");
}

const char *gaz_metric_completed_label(int code, int status)
{
	if (code != 0)
		return "<error>";
	return status == PROTOCOL__STATUS__OK ? "ok" : gaz_status_label(status);
}

const char *gaz_status_label(int status)
{
	const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(&protocol__status__descriptor,
									    status);
	return v ? v->name : "UNKNOWN";
}
