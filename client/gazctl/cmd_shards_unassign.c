/*
 * cmd_shards_unassign.c - `gazctl shards unassign`: remove the assignments
 * of the shards matching --selector (with --failed, only of those with a
 * FAILED replica), so the allocator schedules them again, as Gazette's
 * gazctl: Unassign RPCs of at most 100 shard ids each, to any consumer.
 * --dry-run asks the consumer which assignments it would remove without
 * removing them. Each shard the consumer names is logged at info level
 * with its status and route members from before the call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/gazctl/gazctl.h"
#include "common/log.h"
#include "gazette/shard_client.h"

static struct {
	bool failed, dry_run;
	char *selector;
} opt;

static const struct gaz_flag flags[] = {
	{ .name = "failed", .type = GAZ_FLAG_BOOL, .ptr = &opt.failed,
	  .help = "Only remove assignments from failed shards", .group = "shards.unassign",
	  .ini_name = "Failed" },
	{ .name = "dry-run", .type = GAZ_FLAG_BOOL, .ptr = &opt.dry_run,
	  .help = "Perform a dry-run, printing matching shards", .group = "shards.unassign",
	  .ini_name = "DryRun" },
	{ .name = "selector", .short_name = 'l', .type = GAZ_FLAG_STRING, .ptr = &opt.selector,
	  .help = "Label Selector query to filter on", .group = "shards.unassign",
	  .ini_name = "Selector", .flags = GAZ_FLAG_REQUIRED },
	{ 0 },
};

static bool is_failed(const Consumer__ListResponse__Shard *sh)
{
	for (size_t i = 0; i < sh->n_status; i++)
		if (sh->status[i]->code == CONSUMER__REPLICA_STATUS__CODE__FAILED)
			return true;
	return false;
}

/* log_unassigned logs one unassigned shard with what it was. */
static void log_unassigned(const Consumer__ListResponse *list, const char *id)
{
	for (size_t i = 0; i < list->n_shards; i++) {
		const Consumer__ListResponse__Shard *sh = list->shards[i];
		char members[1024] = "";

		if (strcmp(sh->spec->id, id))
			continue;
		for (size_t k = 0; sh->route && k < sh->route->n_members; k++) {
			size_t n = strlen(members);

			snprintf(members + n, sizeof(members) - n, "%s%s#%s", k ? " " : "",
				 sh->route->members[k]->zone, sh->route->members[k]->suffix);
		}
		gaz_info("Successfully unassigned shard", "id=%s members=[%s]", id, members);
	}
}

static int run(struct gaz_client *c, struct gaz_status *st)
{
	Consumer__UnassignRequest req = CONSUMER__UNASSIGN_REQUEST__INIT;
	Consumer__ListResponse *list;
	char **ids;
	size_t n = 0;
	int rc;

	if ((rc = gazctl_list_shards(c, opt.selector, &list, st)))
		return rc;
	ids = gazctl_xcalloc(list->n_shards + 1, sizeof(*ids));
	for (size_t i = 0; i < list->n_shards; i++)
		if (!opt.failed || is_failed(list->shards[i]))
			ids[n++] = list->shards[i]->spec->id;
	req.only_failed = opt.failed;
	req.dry_run = opt.dry_run;
	for (size_t off = 0; !rc && off < n; off += GAZ_SHARD_UNASSIGN_BATCH) {
		Consumer__UnassignResponse *resp;

		req.shards = ids + off;
		req.n_shards = n - off > GAZ_SHARD_UNASSIGN_BATCH ? GAZ_SHARD_UNASSIGN_BATCH : n - off;
		if ((rc = gaz_shard_unassign(c, &req, &resp, st))) {
			gaz_status_prefix(st, "unassigning shard: ");
			break;
		}
		for (size_t k = 0; k < resp->n_shards; k++)
			log_unassigned(list, resp->shards[k]);
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	}
	free(ids);
	protobuf_c_message_free_unpacked(&list->base, NULL);
	return rc;
}

const struct gazctl_cmd gazctl_cmd_shards_unassign = {
	.name = "unassign",
	.summary = "Remove a shard assignment",
	.description = "Removes the assignment of a shard from its primary consumer process, "
		       "causing it\nto be shortly rescheduled by the allocator. This can be used "
		       "to restart a failed\nshard, or to move a shard off an overloaded node.\n\n"
		       "Use --selector to supply a LabelSelector which constrains the set of "
		       "returned\nshards. Shard selectors support an additional meta-label \"id\". "
		       "See the 'shards\nlist' command for more details about label selectors.",
	.flags = flags,
	.needs_client = true,
	.run = run,
};
