/*
 * cmd_shards_prune.c - `gazctl shards prune`: delete the fragments of the
 * selected shards' recovery logs that no live file of any shard needs, as
 * Gazette's gazctl does (facts §9.1):
 *
 *   for each shard matched by -l: its recovery log "<prefix>/<id>" must
 *   exist and its fragment stores answer healthy (FragmentStoreHealth),
 *   else the log is skipped; GetHints gives its backup hints and primary
 *   hints. Each hints' live segments (FSMHints.LiveLogSegments: every
 *   FnodeSegments' segments reduced into one SegmentSet, the last
 *   segment's last_offset cleared so it covers everything after it) are
 *   added to the segments of their logs. A shard with a missing hints
 *   record, or hints without live files, makes its log skipped: nothing is
 *   deleted from a log unless every shard using it has proven which parts
 *   it needs. With no hints at all, nothing is deleted.
 *
 *   for each log with segments and not skipped: every fragment overlapping
 *   no segment (first_offset < end and (last_offset > begin or
 *   last_offset == 0)) is removed from its store (fragment_remove.c); a
 *   fragment not persisted yet overlapping nothing is a fatal error (the
 *   selector misses a shard using the log), as in Gazette.
 *
 * Output: "would prune"/"pruned <store><path> (N bytes)" per fragment and
 * "<log>: pruned N fragments (B bytes), kept M fragments (K bytes)" per
 * log on stdout (Gazette only logs these, at debug and info level); skipped
 * logs are warned about on stderr. file:// stores are rooted at
 * --file-root, which Gazette's gazctl does not have.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/gazctl/gazctl.h"
#include "common/log.h"
#include "gazette/shard_client.h"

static struct {
	char *selector, *file_root;
	bool dry_run;
} opt;

static const struct gaz_flag flags[] = {
	{ .name = "selector", .short_name = 'l', .type = GAZ_FLAG_STRING, .ptr = &opt.selector,
	  .help = "Label Selector query to filter on", .group = "shards.prune",
	  .ini_name = "Selector", .flags = GAZ_FLAG_REQUIRED },
	{ .name = "dry-run", .type = GAZ_FLAG_BOOL, .ptr = &opt.dry_run,
	  .help = "Perform a dry-run of the apply", .group = "shards.prune", .ini_name = "DryRun" },
	{ .name = "file-root", .type = GAZ_FLAG_STRING, .ptr = &opt.file_root,
	  .help = "Filesystem path which roots file:// fragment stores", .group = "shards.prune",
	  .ini_name = "FileRoot" },
	{ 0 },
};

/* ---- segment sets (recoverylog.SegmentSet) ------------------------------------ */

/* One segment of a log, as recoverylog.Segment (log borrowed). */
struct seg {
	uint32_t author;
	int64_t first_seq_no, first_offset, last_seq_no, last_offset;
	uint32_t first_checksum;
	const char *log;
};

/* A SegmentSet: strictly increasing, non-overlapping seq_no ranges. */
struct segset {
	struct seg *v;
	size_t n;
};

static bool nonzero_less(int64_t a, int64_t b)
{
	return a != 0 && a < b;
}

/* seg_reduce folds b into a where Gazette's reduceSegment does: 0 (reduced
 * into *out), 1 (not reducible) or GAZ_EINVAL (inconsistent hints). */
static int seg_reduce(struct seg a, struct seg b, struct seg *out)
{
	int same_log;

	if (a.first_seq_no > b.first_seq_no ||
	    (a.first_seq_no == b.first_seq_no && a.last_seq_no < b.last_seq_no)) {
		struct seg t = a;
		a = b;
		b = t;
	}
	same_log = !strcmp(a.log, b.log);
	if ((a.first_seq_no < b.first_seq_no && same_log && a.first_offset > b.first_offset) ||
	    (a.first_seq_no < b.first_seq_no && a.last_offset == 0 && b.last_offset != 0) ||
	    (a.last_offset == 0 && !same_log) ||
	    (a.last_seq_no <= b.last_seq_no && same_log && nonzero_less(b.last_offset, a.last_offset)) ||
	    (a.last_seq_no >= b.last_seq_no && same_log && nonzero_less(a.last_offset, b.last_offset)) ||
	    (a.first_seq_no == b.first_seq_no && a.first_checksum != b.first_checksum))
		return GAZ_EINVAL;
	if (a.last_seq_no + 1 < b.first_seq_no ||
	    (a.last_seq_no + 1 == b.first_seq_no && (a.author != b.author || !same_log)))
		return 1;
	if (a.author != b.author || !same_log)
		return GAZ_EINVAL;
	if (a.first_seq_no == b.first_seq_no && a.first_offset < b.first_offset)
		a.first_offset = b.first_offset;
	if (a.last_seq_no == b.last_seq_no && a.last_offset == 0)
		a.last_offset = b.last_offset;
	if (a.last_seq_no < b.last_seq_no) {
		a.last_seq_no = b.last_seq_no;
		a.last_offset = b.last_offset;
	}
	*out = a;
	return 0;
}

/* segset_add inserts s, reducing it with its neighbours (SegmentSet.Add). */
static int segset_add(struct segset *set, struct seg s)
{
	size_t begin = 0, end;
	int rc;

	if (s.author == 0 || s.first_seq_no <= 0 || s.first_offset < 0 ||
	    s.last_seq_no < s.first_seq_no || (s.last_offset && s.last_offset <= s.first_offset))
		return GAZ_EINVAL;
	while (begin < set->n && set->v[begin].first_seq_no < s.first_seq_no)
		begin++;
	if (begin > 0) {
		if ((rc = seg_reduce(set->v[begin - 1], s, &s)) < 0)
			return rc;
		if (rc == 0)
			begin--;
	}
	for (end = begin; end < set->n; end++) {
		if ((rc = seg_reduce(set->v[end], s, &s)) < 0)
			return rc;
		if (rc == 1)
			break;
	}
	if (begin == end) { /* insert at begin */
		set->v = gazctl_xrealloc(set->v, (set->n + 1) * sizeof(*set->v));
		memmove(set->v + begin + 1, set->v + begin, (set->n - begin) * sizeof(*set->v));
		set->n++;
	} else { /* replace [begin, end) by s */
		memmove(set->v + begin + 1, set->v + end, (set->n - end) * sizeof(*set->v));
		set->n -= end - begin - 1;
	}
	set->v[begin] = s;
	return 0;
}

/* live_segments is FSMHints.LiveLogSegments plus foldHintsIntoSegments'
 * cleared last offset: the segments hints need, appended to `all`. */
static int live_segments(const Recoverylog__FSMHints *h, struct segset *all, struct gaz_status *st)
{
	struct segset set = {0};
	int rc = 0;

	for (size_t i = 0; !rc && i < h->n_live_nodes; i++) {
		const Recoverylog__FnodeSegments *n = h->live_nodes[i];

		if (!n->n_segments || n->segments[0]->first_seq_no != n->fnode)
			rc = gaz_status_set(st, GAZ_EINVAL,
					    "expected Fnode to match Segment FirstSeqNo (fnode %lld)",
					    (long long)n->fnode);
		else if (i && h->live_nodes[i - 1]->fnode >= n->fnode)
			rc = gaz_status_set(st, GAZ_EINVAL, "expected monotonic Fnode ordering");
		for (size_t k = 0; !rc && k < n->n_segments; k++) {
			const Recoverylog__Segment *p = n->segments[k];
			struct seg s = {p->author, p->first_seq_no, p->first_offset, p->last_seq_no,
					p->last_offset, p->first_checksum,
					p->log && *p->log ? p->log : h->log};

			if (segset_add(&set, s))
				rc = gaz_status_set(st, GAZ_EINVAL, "inconsistent hinted segment "
								    "(seq_no %lld) of log \"%s\"",
						    (long long)p->first_seq_no, s.log);
		}
	}
	if (!rc && set.n == 0)
		rc = gaz_status_set(st, GAZ_EINVAL, "segment is empty");
	if (!rc && strcmp(set.v[set.n - 1].log, h->log))
		rc = gaz_status_set(st, GAZ_EINVAL,
				    "expected hints.Log %s to equal the last Segment Log %s", h->log,
				    set.v[set.n - 1].log);
	if (!rc) {
		set.v[set.n - 1].last_offset = 0;
		all->v = gazctl_xrealloc(all->v, (all->n + set.n) * sizeof(*all->v));
		memcpy(all->v + all->n, set.v, set.n * sizeof(*set.v));
		all->n += set.n;
	}
	free(set.v);
	if (rc)
		gaz_status_prefix(st, "unable to fetch hint segments: ");
	return rc;
}

/* overlaps: fragment [begin, end) of `log` meets a segment of that log. */
static bool overlaps(const struct segset *all, const char *log, const Protocol__Fragment *f)
{
	for (size_t i = 0; i < all->n; i++) {
		const struct seg *s = &all->v[i];

		if (!strcmp(s->log, log) && (s->first_offset < f->end || f->end == 0) &&
		    (s->last_offset > f->begin || s->last_offset == 0))
			return true;
	}
	return false;
}

/* ---- the run ---------------------------------------------------------------------- */

/* One recovery log of the run. */
struct rlog {
	char *name;
	bool skip;
};

struct run {
	struct gaz_client *c, *bc;
	struct rlog *logs;
	size_t nlogs;
	struct segset segs;           /* every hinted segment (logs borrowed from hints) */
	Consumer__GetHintsResponse **hints; /* kept for the segments' log names */
	size_t nhints;
	struct gazctl_remover rm;
};

static struct rlog *rlog_get(struct run *r, const char *name)
{
	for (size_t i = 0; i < r->nlogs; i++)
		if (!strcmp(r->logs[i].name, name))
			return &r->logs[i];
	r->logs = gazctl_xrealloc(r->logs, (r->nlogs + 1) * sizeof(*r->logs));
	r->logs[r->nlogs] = (struct rlog){gazctl_xstrdup(name), false};
	return &r->logs[r->nlogs++];
}

/* stores_healthy: the log exists and each of its stores answers OK
 * (checkRecoveryLogStoresHealth); false with a warning otherwise. */
static bool stores_healthy(struct run *r, const char *log)
{
	Protocol__LabelSelector sel = PROTOCOL__LABEL_SELECTOR__INIT;
	Protocol__LabelSet inc = PROTOCOL__LABEL_SET__INIT;
	Protocol__Label l = PROTOCOL__LABEL__INIT, *ls[] = {&l};
	Protocol__ListResponse *j = NULL;
	struct gaz_status st = {0};
	bool ok = true;

	l.name = "name";
	l.value = (char *)log;
	inc.labels = ls;
	inc.n_labels = 1;
	sel.include = &inc;
	if (gaz_client_list(r->bc, &sel, &j, &st) || j->n_journals == 0) {
		gaz_warn("failed to fetch journal spec for recovery log", "journal=%s error=%s", log,
			 st.msg[0] ? st.msg : "named journal does not exist");
		ok = false;
	}
	for (size_t i = 0; ok && j->journals[0]->spec->fragment &&
			   i < j->journals[0]->spec->fragment->n_stores; i++) {
		const char *store = j->journals[0]->spec->fragment->stores[i];
		Protocol__FragmentStoreHealthResponse *h;

		if (gaz_client_store_health(r->bc, store, &h, &st)) {
			gaz_warn("failed to check fragment store health", "journal=%s store=%s error=%s",
				 log, store, st.msg);
			ok = false;
		} else {
			if (h->status != PROTOCOL__STATUS__OK) {
				gaz_warn("fragment store is unhealthy", "journal=%s store=%s error=%s",
					 log, store, h->store_health_error);
				ok = false;
			}
			protobuf_c_message_free_unpacked(&h->base, NULL);
		}
	}
	if (j)
		protobuf_c_message_free_unpacked(&j->base, NULL);
	return ok;
}

/* fold_shard adds one shard's hinted segments, or marks its log skipped. */
static int fold_shard(struct run *r, const Consumer__ShardSpec *s, struct gaz_status *st)
{
	const char *prefix = s->recovery_log_prefix ? s->recovery_log_prefix : "";
	char *log = gazctl_xmalloc(strlen(prefix) + strlen(s->id) + 2);
	Consumer__GetHintsResponse *h;
	struct rlog *rl;
	int rc = 0;

	sprintf(log, "%s%s%s", prefix, *prefix ? "/" : "", *prefix ? s->id : "");
	rl = rlog_get(r, log);
	if (!*prefix || !stores_healthy(r, log)) {
		rl->skip = true;
		free(log);
		return 0;
	}
	if ((rc = gaz_shard_get_hints(r->c, s->id, &h, st))) {
		gaz_status_prefix(st, "failed to fetch hints: ");
		free(log);
		return rc;
	}
	r->hints = gazctl_xrealloc(r->hints, (r->nhints + 1) * sizeof(*r->hints));
	r->hints[r->nhints++] = h;
	for (size_t i = 0; !rc && i <= h->n_backup_hints; i++) {
		const Consumer__GetHintsResponse__ResponseHints *rh =
			i < h->n_backup_hints ? h->backup_hints[i] : h->primary_hints;
		const Recoverylog__FSMHints *hints = rh ? rh->hints : NULL;

		if (hints && hints->n_live_nodes) {
			rc = live_segments(hints, &r->segs, st);
			continue;
		}
		rl->skip = true;
		gaz_debug("will skip pruning recovery log journal", "shard=%s reason=%s journal=%s",
			  s->id, hints ? "hints have no live files"
				       : "has not written all hints required for pruning", log);
		break;
	}
	free(log);
	return rc;
}

/* prune_log removes the fragments of one log that no segment needs. */
static int prune_log(struct run *r, const char *log, struct gaz_status *st)
{
	struct gaz_fragments_opts fo = {.journal = log};
	Protocol__FragmentsResponse *resp;
	size_t pruned = 0, kept = 0, failed = 0;
	int64_t pruned_bytes = 0, kept_bytes = 0;
	int rc;

	if ((rc = gaz_client_list_fragments(r->bc, &fo, &resp, st))) {
		gaz_status_prefix(st, "failed to fetch fragments: ");
		return rc;
	}
	for (size_t i = 0; !rc && i < resp->n_fragments; i++) {
		const Protocol__Fragment *f = resp->fragments[i]->spec;
		int64_t len = f->end - f->begin;

		if (overlaps(&r->segs, log, f)) {
			kept++;
			kept_bytes += len;
			continue;
		}
		if (f->mod_time == 0) {
			rc = gaz_status_set(st, GAZ_EINVAL,
					    "unpersisted fragment [%lld, %lld) of \"%s\" does not "
					    "overlap any hinted segments (the label selector argument "
					    "does not include all shards using this log)",
					    (long long)f->begin, (long long)f->end, log);
			break;
		}
		gaz_debug("pruning fragment", "log=%s begin=%lld end=%lld size=%lld mod=%lld", log,
			  (long long)f->begin, (long long)f->end, (long long)len,
			  (long long)f->mod_time);
		if (gazctl_remove_fragment(&r->rm, f, log) == 0) {
			pruned++;
			pruned_bytes += len;
		} else {
			failed++;
		}
	}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	if (rc)
		return rc;
	printf("%s: %s %zu fragments (%lld bytes), %s %zu fragments (%lld bytes)\n", log,
	       opt.dry_run ? "would prune" : "pruned", pruned, (long long)pruned_bytes,
	       opt.dry_run ? "would keep" : "kept", kept, (long long)kept_bytes);
	gaz_info("finished pruning log", "journal=%s fragmentsPruned=%zu bytesPruned=%lld "
					 "fragmentsKept=%zu failedToRemove=%zu",
		 log, pruned, (long long)pruned_bytes, kept, failed);
	if (failed)
		return gaz_status_set(st, GAZ_EIO, "failed to remove %zu fragments of \"%s\"", failed,
				      log);
	return 0;
}

/* has_segments: some hinted segment is of `log`. */
static bool has_segments(const struct run *r, const char *log)
{
	for (size_t i = 0; i < r->segs.n; i++)
		if (!strcmp(r->segs.v[i].log, log))
			return true;
	return false;
}

/* segment_logs lists the distinct logs of the hinted segments, sorted. */
static size_t segment_logs(const struct run *r, const char ***out)
{
	const char **v = gazctl_xcalloc(r->segs.n + 1, sizeof(*v));
	size_t n = 0;

	for (size_t i = 0; i < r->segs.n; i++) {
		size_t k = 0;

		while (k < n && strcmp(v[k], r->segs.v[i].log))
			k++;
		if (k == n)
			v[n++] = r->segs.v[i].log;
	}
	for (size_t i = 1; i < n; i++) /* a handful: insertion sort */
		for (size_t k = i; k > 0 && strcmp(v[k - 1], v[k]) > 0; k--) {
			const char *t = v[k];
			v[k] = v[k - 1];
			v[k - 1] = t;
		}
	*out = v;
	return n;
}

static void run_release(struct run *r)
{
	for (size_t i = 0; i < r->nlogs; i++)
		free(r->logs[i].name);
	free(r->logs);
	free(r->segs.v);
	for (size_t i = 0; i < r->nhints; i++)
		protobuf_c_message_free_unpacked(&r->hints[i]->base, NULL);
	free(r->hints);
	gazctl_remover_release(&r->rm);
}

static int run(struct gaz_client *c, struct gaz_status *st)
{
	struct run r = {.c = c, .rm = {.file_root = opt.file_root, .dry_run = opt.dry_run}};
	Consumer__ListResponse *list;
	const char **logs = NULL;
	size_t nlogs;
	int rc;

	if ((rc = gazctl_broker(&r.bc, st)) || (rc = gazctl_list_shards(c, opt.selector, &list, st)))
		return rc;
	for (size_t i = 0; !rc && i < list->n_shards; i++)
		rc = fold_shard(&r, list->shards[i]->spec, st);
	nlogs = rc ? 0 : segment_logs(&r, &logs);
	for (size_t i = 0; !rc && i < nlogs; i++) {
		struct rlog *rl = rlog_get(&r, logs[i]);

		if (rl->skip) {
			gaz_warn("skipping journal because a shard is missing hints that cover it or "
				 "has unhealthy store", "journal=%s", logs[i]);
			printf("%s: skipped: a shard is missing hints that cover it or has an "
			       "unhealthy store\n", logs[i]);
		} else if (has_segments(&r, logs[i])) {
			rc = prune_log(&r, logs[i], st);
		}
	}
	free(logs);
	protobuf_c_message_free_unpacked(&list->base, NULL);
	run_release(&r);
	return rc;
}

const struct gazctl_cmd gazctl_cmd_shards_prune = {
	.name = "prune",
	.summary = "Removes fragments of a hinted recovery log which are no longer needed",
	.description =
		"Recovery logs capture every write which has ever occurred in a Shard DB.\n"
		"This includes all prior writes of client keys & values, and also RocksDB\n"
		"compactions, which can significantly inflate the total volume of writes\n"
		"relative to the data currently represented in a RocksDB.\n\n"
		"Prune log examines the provided hints to identify Fragments of the log\n"
		"which have no intersection with any live files of the DB, and can thus\n"
		"be safely deleted.\n\n"
		"CAUTION:\n\n"
		"When pruning recovery logs which have been forked from other logs,\n"
		"it's crucial that *all* shards which participate in the forked log\n"
		"history are included in the prune operation. When pruning a log,\n"
		"hints from all referencing shards are inspected to determine if a\n"
		"fragment is overlapped, and a failure to include a shard which\n"
		"references the log may cause data it depends on to be deleted.",
	.flags = flags,
	.needs_client = true,
	.run = run,
};
