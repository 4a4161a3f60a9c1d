/*
 * cmd_suspend.c - `gazctl journals suspend`: suspend the selected (not
 * already FULL-suspended) journals with an empty Append whose suspend mode
 * is SUSPEND_IF_FLUSHED, or SUSPEND_NOW with --force (facts §9.1, §2.1
 * VALIDATE_PRECONDITIONS step 8). Status OK or SUSPENDED both count as
 * success; the resulting status is logged per journal.
 */
#include <string.h>

#include "client/gazctl/gazctl.h"
#include "common/log.h"

static struct {
	char *selector;
	bool force;
} opt;

static const struct gaz_flag flags[] = {
	{ .name = "selector", .short_name = 'l', .type = GAZ_FLAG_STRING, .ptr = &opt.selector,
	  .help = "Label Selector query to filter on", .group = "journals.suspend",
	  .ini_name = "Selector", .flags = GAZ_FLAG_REQUIRED },
	{ .name = "force", .short_name = 'f', .type = GAZ_FLAG_BOOL, .ptr = &opt.force,
	  .help = "Suspend journals even if they have local fragments",
	  .group = "journals.suspend", .ini_name = "Force" },
	{ 0 },
};

static int suspend_journal(struct gaz_client *c, const char *journal, struct gaz_status *st)
{
	struct gaz_append_opts o = {.journal = journal,
				    .suspend = opt.force ? PROTOCOL__APPEND_REQUEST__SUSPEND__SUSPEND_NOW
							 : PROTOCOL__APPEND_REQUEST__SUSPEND__SUSPEND_IF_FLUSHED};
	Protocol__AppendResponse *resp = NULL;
	struct gaz_appender *a;
	char name[48];
	int rc;

	if ((rc = gaz_appender_begin(c, &o, &a, st)) == 0)
		rc = gaz_appender_commit(a, &resp, st);
	if (rc && resp && resp->status == PROTOCOL__STATUS__SUSPENDED) {
		gaz_status_clear(st);
		rc = 0;
	}
	if (rc == 0)
		gaz_info("journal suspension status", "journal=%s status=%s", journal,
			 gaz_client_status_name(resp ? (int)resp->status : 0, name, sizeof(name)));
	else
		gaz_status_prefix(st, "failed to suspend journal %s: ", journal);
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

static int run(struct gaz_client *c, struct gaz_status *st)
{
	return gazctl_each_unsuspended(c, opt.selector, suspend_journal, st);
}

const struct gazctl_cmd gazctl_cmd_suspend = {
	.name = "suspend",
	.summary = "Suspend idle journals",
	.description = "Suspend idle journals to use fewer or zero broker replicas.\n\n"
		       "Suspension updates the replication factor of a journal to zero once its "
		       "fragments\nare persisted. Use --force to suspend journals even if they "
		       "have local\nfragments that are not yet persisted.",
	.flags = flags,
	.needs_client = true,
	.run = run,
};
