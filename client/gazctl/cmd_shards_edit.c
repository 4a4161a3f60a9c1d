/*
 * cmd_shards_edit.c - `gazctl shards edit`: list the shards matching
 * --selector as a YAML shard set, edit them (editor.c), and apply the
 * result as `shards apply` does. Decode, validation and journal
 * verification errors reopen the editor with the error; an Apply failure
 * (for example a stale revision: ETCD_TRANSACTION_FAILED) ends the command,
 * as Gazette's gazctl does. No shards matching is an error.
 */
#include <stdlib.h>
#include <string.h>

#include "client/gazctl/editor.h"
#include "client/gazctl/gazctl.h"
#include "gazette/shardspec_yaml.h"

static struct {
	char *selector;
	int64_t max_txn_size;
} opt;

static const struct gaz_flag flags[] = {
	{ .name = "selector", .short_name = 'l', .type = GAZ_FLAG_STRING, .ptr = &opt.selector,
	  .help = "Label Selector query to filter on", .group = "shards.edit",
	  .ini_name = "Selector", .flags = GAZ_FLAG_REQUIRED | GAZ_FLAG_NO_INI },
	{ .name = "max-txn-size", .type = GAZ_FLAG_INT64, .def = "0", .ptr = &opt.max_txn_size,
	  .help = "maximum number of specs to be processed within an apply transaction. If 0, "
		  "the default, all changes are issued in a single transaction",
	  .group = "shards.edit", .ini_name = "MaxTxnSize", .flags = GAZ_FLAG_UNSIGNED },
	{ 0 },
};

static int select_specs(void *arg, char **text, size_t *len, struct gaz_status *st)
{
	Consumer__ListResponse *resp;
	int rc;

	if ((rc = gazctl_list_shards(arg, opt.selector, &resp, st)))
		return rc;
	if (resp->n_shards == 0)
		rc = gaz_status_set(st, GAZ_ENOTFOUND, "no shards match selector \"%s\"",
				    opt.selector);
	else if ((rc = gaz_shardspec_yaml_emit_list(resp, text, len, st)))
		gaz_status_prefix(st, "failed to encode shards: ");
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

static int apply_specs(void *arg, const char *text, size_t len, bool *retry,
		       struct gaz_status *st)
{
	Consumer__ApplyRequest *req;
	int rc;

	if ((rc = gazctl_shards_prepare(text, len, &req, st))) {
		*retry = rc == GAZ_EINVAL || rc == GAZ_ENOTFOUND;
		return rc;
	}
	rc = gazctl_shards_send(arg, req, opt.max_txn_size, st);
	gaz_shardspec_apply_free(req);
	return rc;
}

static int run(struct gaz_client *c, struct gaz_status *st)
{
	struct gazctl_edit e = {.file_prefix = "gazctl-shards-edit-",
				.select = select_specs,
				.apply = apply_specs,
				.arg = c,
				.abort_if_unchanged = true};

	return gazctl_edit_loop(&e, st);
}

const struct gazctl_cmd gazctl_cmd_shards_edit = {
	.name = "edit",
	.summary = "Edit shard specifications",
	.description =
		"Edit and apply shard specifications.\n\n"
		"The edit command allows you to directly edit shard specifications matching\n"
		"the supplied LabelSelector. It will open the editor defined by your GAZ_EDITOR "
		"or\nEDITOR environment variables or fall back to 'vi'. Editing from Windows is\n"
		"currently not supported.\n\n"
		"Upon exiting the editor, if the file has been changed, it will be validated "
		"and\napplied. If the file is invalid or fails to apply, the editor is re-opened. "
		"Exiting\nthe editor with no changes or saving an empty file are interpreted as "
		"the user\naborting the edit attempt.\n\n"
		"Use --selector to supply a LabelSelector which constrains the set of returned\n"
		"shard specifications. See \"shards list --help\" for details and examples.",
	.flags = flags,
	.needs_client = true,
	.run = run,
};
