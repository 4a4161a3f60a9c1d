/*
 * cmd_shards_apply.c - `gazctl shards apply`: apply a YAML shard set
 * (facts §9.3) as one Apply transaction, or batches of --max-txn-size, as
 * Gazette's gazctl does:
 *
 *   1. decode the set strictly and push `common:` down into each shard
 *      ("failed to decode shardspace from YAML: line N: ...");
 *   2. validate the ApplyRequest as the consumer will ("failed to validate
 *      ApplyRequest: Changes[0]: Upsert: ...");
 *   3. verify through --broker.address that every source journal exists
 *      with a message framing, and every recovery log exists with
 *      content-type application/x-gazette-recoverylog ("failed to validate
 *      journals of the ApplyRequest: Shard[id]: named journal does not
 *      exist (name)");
 *   4. --dry-run prints the request in protobuf text format; otherwise it
 *      is sent ("failed to apply shards: ETCD_TRANSACTION_FAILED" when an
 *      expected revision is stale) and "successfully applied" rev=N is
 *      logged at info level, whatever --log.level says.
 *
 * Nothing is sent unless steps 1-3 pass. `shards edit` (cmd_shards_edit.c)
 * runs the same steps through gazctl_shards_apply_yaml.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/gazctl/gazctl.h"
#include "common/log.h"
#include "gazette/shard_client.h"
#include "gazette/shardspec_yaml.h"
#include "protocol/labels.h"
#include "protocol/shard.h"

#define RECOVERYLOG_CONTENT_TYPE "application/x-gazette-recoverylog"

static struct {
	char *specs;
	bool dry_run;
	int64_t max_txn_size;
} opt;

static const struct gaz_flag flags[] = {
	{ .name = "specs", .type = GAZ_FLAG_STRING, .def = "-", .ptr = &opt.specs,
	  .help = "Input specifications path to apply. Use '-' for stdin",
	  .group = "shards.apply", .ini_name = "SpecsPath" },
	{ .name = "dry-run", .type = GAZ_FLAG_BOOL, .ptr = &opt.dry_run,
	  .help = "Perform a dry-run of the apply", .group = "shards.apply",
	  .ini_name = "DryRun" },
	{ .name = "max-txn-size", .type = GAZ_FLAG_INT64, .def = "0", .ptr = &opt.max_txn_size,
	  .help = "maximum number of specs to be processed within an apply transaction. If 0, "
		  "the default, all changes are issued in a single transaction",
	  .group = "shards.apply", .ini_name = "MaxTxnSize", .flags = GAZ_FLAG_UNSIGNED },
	{ 0 },
};

/* get_journal lists the journal `name` (its ";meta" stripped), as
 * Gazette's client.GetJournal. *out is freed by the caller. */
static int get_journal(struct gaz_client *bc, const char *name, Protocol__ListResponse **out,
		       struct gaz_status *st)
{
	Protocol__LabelSelector sel = PROTOCOL__LABEL_SELECTOR__INIT;
	Protocol__LabelSet inc = PROTOCOL__LABEL_SET__INIT;
	Protocol__Label l = PROTOCOL__LABEL__INIT, *ls[] = {&l};
	size_t n = strcspn(name, ";");
	char *bare = gazctl_xmalloc(n + 1);
	int rc;

	memcpy(bare, name, n);
	bare[n] = '\0';
	l.name = "name";
	l.value = bare;
	inc.labels = ls;
	inc.n_labels = 1;
	sel.include = &inc;
	rc = gaz_client_list(bc, &sel, out, st);
	free(bare);
	if (rc == 0 && (*out)->n_journals == 0) {
		protobuf_c_message_free_unpacked(&(*out)->base, NULL);
		*out = NULL;
		rc = gaz_status_set(st, GAZ_ENOTFOUND, "named journal does not exist (%s)", name);
	}
	return rc;
}

/* content_type: the journal's content-type label value ("" if none). */
static const char *content_type(const Protocol__ListResponse *j)
{
	const char *v = gaz_labelset_value_of(j->journals[0]->spec->labels, "content-type");

	return v ? v : "";
}

static bool has_framing(const char *ct)
{
	return !strcmp(ct, "application/x-ndjson") || !strcmp(ct, "application/x-protobuf-fixed") ||
	       !strcmp(ct, "text/csv");
}

/* verify_shard checks the journals one upsert refers to
 * (consumer.VerifyReferencedJournals). */
static int verify_shard(struct gaz_client *bc, const Consumer__ShardSpec *s, struct gaz_status *st)
{
	const char *prefix = s->recovery_log_prefix ? s->recovery_log_prefix : "";
	Protocol__ListResponse *j;
	char *log;
	int rc;

	for (size_t i = 0; i < s->n_sources; i++) {
		const char *src = s->sources[i]->journal;

		if ((rc = get_journal(bc, src, &j, st))) {
			gaz_status_prefix(st, "Shard[%s]: ", s->id);
			return rc;
		}
		if (!has_framing(content_type(j)))
			rc = gaz_status_set(st, GAZ_EINVAL,
					    "Shard[%s].Sources[%s] message framing: unrecognized "
					    "content-type (%s)",
					    s->id, src, content_type(j));
		protobuf_c_message_free_unpacked(&j->base, NULL);
		if (rc)
			return rc;
	}
	if (!*prefix)
		return 0;
	log = gazctl_xmalloc(strlen(prefix) + strlen(s->id) + 2);
	sprintf(log, "%s/%s", prefix, s->id);
	if ((rc = get_journal(bc, log, &j, st))) {
		gaz_status_prefix(st, "Shard[%s]: ", s->id);
	} else {
		if (strcmp(content_type(j), RECOVERYLOG_CONTENT_TYPE))
			rc = gaz_status_set(st, GAZ_EINVAL,
					    "Shard[%s]: expected %s to have content-type %s but "
					    "was '%s'",
					    s->id, log, RECOVERYLOG_CONTENT_TYPE, content_type(j));
		protobuf_c_message_free_unpacked(&j->base, NULL);
	}
	free(log);
	return rc;
}

int gazctl_shards_prepare(const char *yaml, size_t len, Consumer__ApplyRequest **out,
			  struct gaz_status *st)
{
	struct gaz_client *bc;
	Consumer__ApplyRequest *req;
	int rc;

	if ((rc = gaz_shardspec_yaml_parse(yaml, len, &req, st))) {
		gaz_status_prefix(st, "failed to decode shardspace from YAML: ");
		return rc;
	}
	if ((rc = gaz_validate_shard_apply_request(req, st))) {
		gaz_status_prefix(st, "failed to validate ApplyRequest: ");
	} else if (!(rc = gazctl_broker(&bc, st))) {
		for (size_t i = 0; !rc && i < req->n_changes; i++)
			if (req->changes[i]->upsert)
				rc = verify_shard(bc, req->changes[i]->upsert, st);
		if (rc)
			gaz_status_prefix(st, "failed to validate journals of the ApplyRequest: ");
	}
	if (rc) {
		gaz_shardspec_apply_free(req);
		return rc;
	}
	*out = req;
	return 0;
}

int gazctl_shards_send(struct gaz_client *c, const Consumer__ApplyRequest *req,
		       int64_t max_txn_size, struct gaz_status *st)
{
	int64_t revision = 0;
	int rc = gaz_shard_apply(c, req, (size_t)max_txn_size, &revision, st);

	if (rc)
		gaz_status_prefix(st, "failed to apply shards: ");
	else
		gaz_log_emit(GAZ_LOG_INFO, "successfully applied", "rev=%lld", (long long)revision);
	return rc;
}

static int run(struct gaz_client *c, struct gaz_status *st)
{
	Consumer__ApplyRequest *req = NULL;
	char *yaml = NULL;
	size_t len = 0;
	int rc;

	if ((rc = gazctl_read_file(opt.specs, &yaml, &len, st)))
		return rc;
	rc = gazctl_shards_prepare(yaml, len, &req, st);
	free(yaml);
	if (rc)
		return rc;
	if (opt.dry_run)
		gazctl_proto_text(stdout, &req->base);
	else
		rc = gazctl_shards_send(c, req, opt.max_txn_size, st);
	gaz_shardspec_apply_free(req);
	return rc;
}

const struct gazctl_cmd gazctl_cmd_shards_apply = {
	.name = "apply",
	.summary = "Apply shard specifications",
	.description =
		"Apply a collection of ShardSpec creations, updates, or deletions.\n\n"
		"ShardSpecs should be provided as a YAML list, the same format produced by\n"
		"\"gazctl shards list\". Consumers verify that the Etcd \"revision\" field of "
		"each\nShardSpec is correct, and will fail the entire apply operation if any "
		"have since\nbeen updated. A common operational pattern is to list, edit, and "
		"re-apply a\ncollection of ShardSpecs; this check ensures concurrent "
		"modifications are caught.\n\n"
		"You may explicitly inform the broker to apply your ShardSpecs regardless of "
		"the\ncurrent state of specifications in Etcd by passing in a revision value "
		"of -1.\nThis commonly done when operators keep ShardSpecs in version control "
		"as their\nsource of truth.\n\n"
		"ShardSpecs may be created by setting \"revision\" to zero or omitting it "
		"altogether.\n\n"
		"ShardSpecs may be deleted by setting their field \"delete\" to true.",
	.flags = flags,
	.needs_client = true,
	.run = run,
};
