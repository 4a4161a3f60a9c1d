/*
 * release.c - releasing journals that no other broker took over during a
 * graceful exit (a lone broker, or hand-off past --broker.exit-timeout).
 *
 * Gazette's broker waits forever in that case; ours persists the spools
 * and lets go. What the next primary must not do is append at an offset
 * the store already holds, and what it cannot know is whether the store's
 * end is the true write head (Gazette's INDEX_HAS_GREATER_OFFSET guard,
 * facts §6.6). Since this broker persisted everything it committed, it
 * records the write head in the spec's suspend.offset (level unchanged):
 * any broker (ours or Gazette's) then rolls its empty spool forward to
 * that offset before appending (facts §2.1 VALIDATE_PRECONDITIONS step 4),
 * so appends continue where they stopped, with no operator reset-head.
 * The write is guarded by the item's ModRevision and happens only while
 * we still hold the primary assignment (our lease is revoked after it).
 */
#include "broker/release.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "etcd/txn.h"

/* Whether we hold journal's slot-0 assignment (read lock held). */
static bool is_primary(struct gaz_broker *b, const char *journal)
{
	struct gaz_route r;
	bool p = false;

	if (gaz_route_build(b->ks, b->root, journal, &r))
		return false;
	p = r.primary >= 0 && gaz_broker_is_local(b, r.zone[r.primary], r.suffix[r.primary]);
	gaz_route_release(&r);
	return p;
}

/* Packs the item's spec with suspend.offset = head, or NULL when no write
 * is needed. Read lock held. */
static uint8_t *spec_with_head(const Protocol__JournalSpec *spec, int64_t head, size_t *len)
{
	Protocol__JournalSpec copy = *spec;
	Protocol__JournalSpec__Suspend sus = PROTOCOL__JOURNAL_SPEC__SUSPEND__INIT;
	uint8_t *buf;

	if (spec->suspend) {
		if (spec->suspend->offset >= head)
			return NULL;
		sus = *spec->suspend;
	}
	sus.offset = head;
	copy.suspend = &sus;
	*len = protocol__journal_spec__get_packed_size(&copy);
	buf = malloc(*len ? *len : 1);
	if (buf)
		protocol__journal_spec__pack(&copy, buf);
	return buf;
}

void gaz_release_record_heads(struct gaz_broker *b, const struct gaz_release_head *heads, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct gaz_ks_entry *e;
		struct gaz_status st = {0};
		struct gaz_txn t;
		uint8_t *val = NULL;
		size_t len = 0;
		char *key = gaz_ks_item_key(b->root, heads[i].journal);

		gaz_keyspace_rlock(b->ks);
		e = key ? gaz_keyspace_get(b->ks, key) : NULL;
		if (e && heads[i].head > 0 && is_primary(b, heads[i].journal))
			val = spec_with_head(((struct gaz_ks_value *)e->decoded)->spec, heads[i].head, &len);
		gaz_txn_init(&t);
		if (val) {
			gaz_txn_compare_mod(&t, key, e->mod_revision);
			gaz_txn_put(&t, key, val, len, 0, false);
		}
		gaz_keyspace_runlock(b->ks);
		if (val && gaz_txn_commit(b->etcd, &t, NULL, NULL, &st))
			gaz_warn("recording the write head of a released journal failed",
				 "journal=%s head=%lld err=%s", heads[i].journal,
				 (long long)heads[i].head, st.msg);
		else if (val)
			gaz_info("released journal", "journal=%s head=%lld", heads[i].journal,
				 (long long)heads[i].head);
		gaz_txn_release(&t);
		free(val);
		free(key);
	}
}
