/*
 * cmd_reset_head.c - `gazctl journals reset-head`: move the write head of
 * each selected (not FULL-suspended) journal to the end of its fragment
 * index, clearing INDEX_HAS_GREATER_OFFSET (facts §9.1, §12 item 23):
 * a metadata-only, non-blocking Read at offset -1 reports the indexed head
 * (OFFSET_NOT_YET_AVAILABLE at that offset), then an empty Append with
 * offset = that head and suspend SUSPEND_KEEP makes the primary roll its
 * spool there. A WRONG_APPEND_OFFSET means someone appended meanwhile: it
 * is logged ("raced writes"), not an error. Brokers that predate
 * SUSPEND_KEEP (Gazette v0.103 rejects it as an invalid variant) get the
 * empty append again without a suspend mode, as their gazctl sends it.
 */
#include <string.h>

#include "client/gazctl/gazctl.h"
#include "common/log.h"

static char *selector;

static const struct gaz_flag flags[] = {
	{ .name = "selector", .short_name = 'l', .type = GAZ_FLAG_STRING, .ptr = &selector,
	  .help = "Label Selector query to filter on", .group = "journals.reset-head",
	  .ini_name = "Selector", .flags = GAZ_FLAG_REQUIRED },
	{ 0 },
};

/* read_head finds the indexed write head of `journal`. */
static int read_head(struct gaz_client *c, const char *journal, int64_t *head,
		     struct gaz_status *st)
{
	struct gaz_read_opts o = {.journal = journal, .offset = -1, .metadata_only = true};
	struct gaz_reader *r;
	char buf[1];
	size_t n;
	int rc;

	if ((rc = gaz_reader_new(c, &o, &r, st)))
		return rc;
	do
		rc = gaz_reader_read(r, buf, sizeof(buf), &n, st);
	while (rc == 0 || rc == GAZ_READ_JUMP || rc == GAZ_READ_META);
	if (rc == GAZ_READ_TAIL || rc == GAZ_EOF)
		rc = 0;
	*head = gaz_reader_offset(r);
	gaz_reader_free(r);
	if (rc)
		gaz_status_prefix(st, "failed to read head of journal: ");
	return rc;
}

static int reset_head(struct gaz_client *c, const char *journal, struct gaz_status *st)
{
	struct gaz_append_opts o = {.journal = journal,
				    .suspend = PROTOCOL__APPEND_REQUEST__SUSPEND__SUSPEND_KEEP};
	struct gaz_appender *a;
	Protocol__AppendResponse *resp = NULL;
	int rc;

	if ((rc = read_head(c, journal, &o.offset, st)))
		return rc;
	if ((rc = gaz_appender_begin(c, &o, &a, st)) == 0)
		rc = gaz_appender_commit(a, &resp, st);
	if (rc == GAZ_ERPC && strstr(st->msg, "invalid Suspend variant")) {
		/* A broker older than SUSPEND_KEEP (Gazette <= v0.103): retry as
		 * Gazette's gazctl of that version does, without a suspend mode. */
		gaz_status_clear(st);
		o.suspend = PROTOCOL__APPEND_REQUEST__SUSPEND__SUSPEND_RESUME;
		if ((rc = gaz_appender_begin(c, &o, &a, st)) == 0)
			rc = gaz_appender_commit(a, &resp, st);
	}
	if (rc == 0) {
		gaz_info("reset write head", "journal=%s offset=%lld", journal, (long long)o.offset);
	} else if (resp && resp->status == PROTOCOL__STATUS__WRONG_APPEND_OFFSET) {
		gaz_info("did not reset (raced writes)", "journal=%s", journal);
		gaz_status_clear(st);
		rc = 0;
	} else {
		gaz_status_prefix(st, "failed to reset journal offset: ");
	}
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

static int run(struct gaz_client *c, struct gaz_status *st)
{
	return gazctl_each_unsuspended(c, selector, reset_head, st);
}

const struct gazctl_cmd gazctl_cmd_reset_head = {
	.name = "reset-head",
	.summary = "Reset journal append offset (disaster recovery)",
	.description = "Reset the append offset of journals.\n\n"
		       "Gazette appends are transactional: all brokers must agree on the exact "
		       "offsets\nat which an append will occur. reset-head moves each selected "
		       "journal's write\nhead to the end of its fragment index (for example, "
		       "after a cluster lost its\nreplicated state but kept its fragment store).",
	.flags = flags,
	.needs_client = true,
	.run = run,
};
