/*
 * cmd_prune.c - `gazctl journals prune`: delete the persisted fragments of
 * the selected journals that are older than each journal's
 * fragment.retention (facts §5.5, §9.1; case BR-22). Brokers never delete
 * fragments; this tool does, through the fragment store.
 *
 * For each journal matched by -l (List), in name order:
 *   - a FULL-suspended journal is skipped with a logged reason (its
 *     ListFragments would answer SUSPENDED; Gazette once aborted the whole
 *     run on that) and the run goes on;
 *   - every fragment of the index is listed (ListFragments, paged);
 *   - a fragment is ELIGIBLE when it is persisted (backing_store non-empty
 *     and mod_time != 0) and now - mod_time >= retention. Retention <= 0
 *     (unset) keeps everything forever, as the proto documents; Gazette's
 *     gazctl would delete every persisted fragment instead (decisions.md,
 *     "journals prune: retention 0 keeps forever");
 *   - eligible fragments are removed from their backing store at their
 *     content path (gaz_fragment_content_path). file:// stores are rooted
 *     at --file-root; s3:// stores use the credentials of the environment
 *     and shared files (lib/store/s3_config.c); gs/azure are not supported
 *     yet.
 *
 * Invariants: the spool fragment (no backing_store) is never touched, and
 * nothing is counted as pruned unless its removal succeeded. A removal that
 * fails is reported on stderr naming the fragment, the run goes on, and
 * the command fails (exit 1) at the end. A fragment already absent from the
 * store (a stale index after an earlier run) is reported as absent, not as
 * a failure. --dry-run opens the stores (so a run that cannot work says so)
 * but removes nothing.
 *
 * Output (stdout): one line per eligible fragment ("would prune" or
 * "pruned"), then per journal "<journal>: pruned N fragments (B bytes),
 * kept ..." (or "skipped: ..."), then a total line. Bytes are content
 * lengths (end - begin), as Gazette's prune metrics count them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "client/gazctl/gazctl.h"
#include "common/log.h"
#include "gazette/duration.h"

static struct {
	char *selector, *file_root;
	bool dry_run;
} opt;

#define PRUNE_FLAG(n, s, t, h, ini, p, fl)                                                         \
	{                                                                                          \
		.name = n, .short_name = s, .type = t, .help = h, .ptr = p,                        \
		.group = "journals.prune", .ini_name = ini, .flags = fl                            \
	}

static const struct gaz_flag flags[] = {
    PRUNE_FLAG("selector", 'l', GAZ_FLAG_STRING, "Label Selector query to filter on", "Selector",
               &opt.selector, GAZ_FLAG_REQUIRED),
    PRUNE_FLAG("dry-run", 0, GAZ_FLAG_BOOL,
               "Perform a dry-run of the prune, printing what would be deleted", "DryRun",
               &opt.dry_run, 0),
    PRUNE_FLAG("file-root", 0, GAZ_FLAG_STRING,
               "Filesystem path which roots file:// fragment stores", "FileRoot", &opt.file_root,
               0),
    {0},
};

/* A count of fragments and their content bytes. */
struct tally {
	size_t n;
	int64_t bytes;
};

/* What became of one journal's fragments (or of all journals'). */
struct outcome {
	struct tally pruned; /* removed (dry run: would be removed) */
	struct tally kept;   /* not eligible: local, young, or retention <= 0 */
	struct tally failed; /* eligible, but removal failed */
	struct tally absent; /* eligible, already gone from the store */
};

/* The run's state: stores opened so far, totals, journals that failed. */
struct pruner {
	struct gaz_client *c;
	struct timespec now; /* one clock reading for the whole run */
	struct gazctl_remover rm;
	struct outcome total;
	size_t failed_journals;
};

static void tally_add(struct tally *t, int64_t bytes)
{
	t->n++;
	t->bytes += bytes;
}

/* eligible: the fragment is persisted and at least `retention_ns` old. */
static bool eligible(const struct pruner *p, const Protocol__Fragment *f, int64_t retention_ns)
{
	int64_t age_s, ret_s = retention_ns / 1000000000, ret_ns = retention_ns % 1000000000;

	if (retention_ns <= 0 || !f->backing_store || !*f->backing_store || f->mod_time == 0)
		return false;
	if (f->mod_time > (int64_t)p->now.tv_sec)
		return false; /* modified in the future: not old */
	age_s = (int64_t)p->now.tv_sec - f->mod_time;
	return age_s > ret_s || (age_s == ret_s && p->now.tv_nsec >= ret_ns);
}

static void print_outcome(const char *name, const struct outcome *o, const char *note)
{
	printf("%s: %s %zu fragments (%lld bytes), %s %zu fragments (%lld bytes)", name,
	       opt.dry_run ? "would prune" : "pruned", o->pruned.n, (long long)o->pruned.bytes,
	       opt.dry_run ? "would keep" : "kept", o->kept.n, (long long)o->kept.bytes);
	if (o->failed.n)
		printf(", failed %zu fragments (%lld bytes)", o->failed.n,
		       (long long)o->failed.bytes);
	if (o->absent.n)
		printf(", already absent %zu fragments (%lld bytes)", o->absent.n,
		       (long long)o->absent.bytes);
	printf("%s%s\n", note ? "; " : "", note ? note : "");
}

static void tally_merge(struct tally *to, const struct tally *t)
{
	to->n += t->n;
	to->bytes += t->bytes;
}

static void outcome_add(struct outcome *to, const struct outcome *o)
{
	tally_merge(&to->pruned, &o->pruned);
	tally_merge(&to->kept, &o->kept);
	tally_merge(&to->failed, &o->failed);
	tally_merge(&to->absent, &o->absent);
}

/* prune_fragments applies the retention to a journal's listed fragments. */
static void prune_fragments(struct pruner *p, const char *journal,
                            const Protocol__FragmentsResponse *resp, int64_t retention_ns,
                            struct outcome *o)
{
	for (size_t k = 0; k < resp->n_fragments; k++) {
		const Protocol__Fragment *f = resp->fragments[k]->spec;
		int64_t len = f->end - f->begin;
		int rc;

		if (!eligible(p, f, retention_ns)) {
			tally_add(&o->kept, len);
			continue;
		}
		rc = gazctl_remove_fragment(&p->rm, f, journal);
		tally_add(rc == 0               ? &o->pruned
		          : rc == GAZ_ENOTFOUND ? &o->absent
		                                : &o->failed,
		          len);
	}
}

/* skip_journal reports a journal that is not pruned at all. */
static void skip_journal(const char *journal, const char *reason)
{
	gaz_warn("skipping journal", "journal=%s reason=%s", journal, reason);
	printf("%s: skipped: %s\n", journal, reason);
}

/* list_failed handles a failed ListFragments: a journal suspended since
 * the List is skipped; anything else fails the journal. */
static void list_failed(struct pruner *p, const char *journal, const struct gaz_status *st)
{
	size_t n = strlen(st->msg), s = strlen("SUSPENDED");

	if (n >= s && !strcmp(st->msg + n - s, "SUSPENDED")) {
		skip_journal(journal, "journal is suspended");
		return;
	}
	fprintf(stderr, "gazctl: failed to list fragments of \"%s\": %s\n", journal, st->msg);
	p->failed_journals++;
}

static void prune_journal(struct pruner *p, const Protocol__JournalSpec *spec)
{
	struct gaz_fragments_opts fo = {.journal = spec->name};
	Protocol__FragmentsResponse *resp = NULL;
	struct gaz_status st = {0};
	struct outcome o = {0};
	int64_t retention_ns = 0;

	if (gaz_duration_from_pb(spec->fragment ? spec->fragment->retention : NULL, &retention_ns,
	                         &st)) {
		fprintf(stderr, "gazctl: invalid retention of \"%s\": %s\n", spec->name, st.msg);
		p->failed_journals++;
		return;
	}
	if (gaz_client_list_fragments(p->c, &fo, &resp, &st)) {
		list_failed(p, spec->name, &st);
		return;
	}
	prune_fragments(p, spec->name, resp, retention_ns, &o);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	print_outcome(spec->name, &o, retention_ns <= 0 ? "retention unset: kept forever" : NULL);
	gaz_info("finished pruning journal",
	         "journal=%s pruned=%zu pruned_bytes=%lld kept=%zu "
	         "failed=%zu dry_run=%d",
	         spec->name, o.pruned.n, (long long)o.pruned.bytes, o.kept.n, o.failed.n,
	         opt.dry_run);
	outcome_add(&p->total, &o);
}

static void pruner_release(struct pruner *p)
{
	gazctl_remover_release(&p->rm);
}

static int run(struct gaz_client *c, struct gaz_status *st)
{
	struct pruner p = {.c = c, .rm = {.file_root = opt.file_root, .dry_run = opt.dry_run}};
	Protocol__ListResponse *list;
	int rc;

	if ((rc = gazctl_list_selector(c, opt.selector, &list, st)))
		return rc;
	clock_gettime(CLOCK_REALTIME, &p.now);
	for (size_t i = 0; i < list->n_journals; i++) {
		const Protocol__JournalSpec *spec = list->journals[i]->spec;

		if (gazctl_is_full_suspended(list->journals[i]))
			skip_journal(spec->name, "journal is FULL-suspended");
		else
			prune_journal(&p, spec);
	}
	print_outcome("total", &p.total, NULL);
	if (p.total.failed.n || p.failed_journals)
		rc = gaz_status_set(st, GAZ_EIO,
		                    "prune incomplete: %zu fragments could not be "
		                    "pruned, %zu journals could not be listed",
		                    p.total.failed.n, p.failed_journals);
	pruner_release(&p);
	protobuf_c_message_free_unpacked(&list->base, NULL);
	return rc;
}

const struct gazctl_cmd gazctl_cmd_prune = {
    .name = "prune",
    .summary = "Deletes fragments older than the configured retention",
    .description = "Deletes fragments across all configured fragment stores of matching "
                   "journals that are\nolder than the configured retention.\n\n"
                   "Only persisted fragments (having a backing store) are deleted; the "
                   "fragment being\nwritten is never touched. A journal whose retention is "
                   "unset (or <= 0) keeps its\nfragments forever. FULL-suspended journals "
                   "are skipped. Fragments of file://\nstores are deleted under --file-root. "
                   "Use --dry-run to print what would be deleted.",
    .flags = flags,
    .needs_client = true,
    .run = run,
};
