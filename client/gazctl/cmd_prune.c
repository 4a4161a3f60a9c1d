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
#include "store/store.h"

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

/* One opened (or unopenable) store, by backing_store URL. */
struct store_slot {
	char *url;             /* owned */
	struct gaz_store *s;   /* one reference; NULL when opening failed */
	struct gaz_status err; /* why opening failed */
};

/* The run's state: stores opened so far, totals, journals that failed. */
struct pruner {
	struct gaz_client *c;
	struct timespec now; /* one clock reading for the whole run */
	struct store_slot *stores;
	size_t nstores;
	struct outcome total;
	size_t failed_journals;
};

static void tally_add(struct tally *t, int64_t bytes)
{
	t->n++;
	t->bytes += bytes;
}

/* store_for returns the slot for `url`, opening it on first use. */
static struct store_slot *store_for(struct pruner *p, const char *url)
{
	struct store_slot *slot;

	for (size_t i = 0; i < p->nstores; i++)
		if (!strcmp(p->stores[i].url, url))
			return &p->stores[i];
	p->stores = gazctl_xrealloc(p->stores, (p->nstores + 1) * sizeof(*p->stores));
	slot = &p->stores[p->nstores++];
	memset(slot, 0, sizeof(*slot));
	slot->url = gazctl_xstrdup(url);
	if (!strncasecmp(url, "file:", 5) && (!opt.file_root || !*opt.file_root)) {
		gaz_status_set(&slot->err, GAZ_EINVAL,
		               "file:// store \"%s\" needs --file-root (the directory that "
		               "roots it, as the broker's --broker.file-root)",
		               url);
		return slot;
	}
	if (gaz_store_open(url, opt.file_root, &slot->s, &slot->err))
		slot->s = NULL;
	return slot;
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

/* remove_fragment removes (or, dry, checks it could remove) one eligible
 * fragment, printing what happened. Returns 0, GAZ_ENOTFOUND (already
 * gone) or the failure, reported on stderr naming the fragment. */
static int remove_fragment(struct pruner *p, const Protocol__Fragment *pb, const char *journal)
{
	struct gaz_fragment f = {0};
	struct gaz_status st = {0};
	struct store_slot *slot = store_for(p, pb->backing_store);
	char path[GAZ_FRAGMENT_PATH_MAX] = "";
	int rc;

	if ((rc = gaz_fragment_from_proto(&f, pb, &st)) == 0)
		rc = gaz_fragment_content_path(&f, path, sizeof(path), &st);
	gaz_fragment_release(&f);
	if (rc == 0 && !slot->s)
		rc = gaz_status_set(&st, slot->err.code ? slot->err.code : GAZ_EINVAL, "%s",
		                    slot->err.msg);
	if (rc == 0 && !opt.dry_run)
		rc = gaz_store_remove(slot->s, path, &st);
	if (rc == 0)
		printf("%s %s%s (%lld bytes)\n", opt.dry_run ? "would prune" : "pruned",
		       pb->backing_store, path, (long long)(pb->end - pb->begin));
	else if (rc == GAZ_ENOTFOUND)
		gaz_warn("fragment was already removed from its store", "journal=%s fragment=%s%s",
		         journal, pb->backing_store, path);
	else
		fprintf(stderr,
		        "gazctl: failed to prune fragment %s%s [%lld, %lld) of \"%s\": %s\n",
		        pb->backing_store, path, (long long)pb->begin, (long long)pb->end, journal,
		        st.msg[0] ? st.msg : gaz_err_str(rc));
	return rc;
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
		rc = remove_fragment(p, f, journal);
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
	for (size_t i = 0; i < p->nstores; i++) {
		gaz_store_unref(p->stores[i].s);
		free(p->stores[i].url);
	}
	free(p->stores);
}

static int run(struct gaz_client *c, struct gaz_status *st)
{
	struct pruner p = {.c = c};
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
