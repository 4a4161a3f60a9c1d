/*
 * append_etcd.c - the etcd writes of an append (facts §2.1, §4.6): the
 * route consistency write of UPDATE_ASSIGNMENTS, and the suspension writes
 * (UPDATE_SUSPEND). Each is one transaction guarded by the mod revisions
 * of the resolution's view; where the next resolution reads through
 * follows from its outcome. The append machine (append_fsm.c) calls them.
 */
#include "broker/broker.h"

#include <stdlib.h>

#include "broker/append_int.h"
#include "common/log.h"
#include "keyspace/keyspace.h"

/* read_through_txn sets where the next resolution reads through after a
 * transaction guarded by the resolution's view (at res.etcd.revision):
 * applied, its own revision, which is in our prefix; failed, one past the
 * view. A compare failed because a compared key changed after the view,
 * and the keyspace will hold that change; the response's revision is
 * etcd's, which our watch of the prefix never reaches when other keys
 * (another prefix, a consumer's) moved it last: waiting for it hung an
 * append that lost the route write to a pulse (Gazette waits for it). */
static void read_through_txn(struct append_ctx *a, bool applied, int64_t revision)
{
	a->read_through_rev = applied ? revision : a->res.etcd.revision + 1;
}

/* Appends to a txn: for every assignment compare its mod revision, and put
 * the derived route (no endpoints) into each inconsistent one (§4.6). */
int gaz__append_update_assignments(struct append_ctx *a, bool *wrote)
{
	struct gaz_route *r = &a->res.route;
	struct gaz_txn t;
	Protocol__Route *p = gaz_route_to_proto(r, false);
	size_t len = p ? protocol__route__get_packed_size(p) : 0;
	uint8_t *val = p ? malloc(len ? len : 1) : NULL;
	struct gaz_status st = {0};
	int rc = 0;

	*wrote = false;
	if (!p || !val) {
		gaz_route_proto_free(p);
		free(val);
		return GAZ_ENOMEM;
	}
	protocol__route__pack(p, val);
	gaz_route_proto_free(p);
	gaz_txn_init(&t);
	for (size_t i = 0; i < r->n; i++) {
		char *key = gaz_ks_assign_key(a->b->root, a->res.journal, r->zone[i], r->suffix[i],
					      r->slot[i]);
		if (!key) {
			rc = GAZ_ENOMEM;
			break;
		}
		gaz_txn_compare_mod(&t, key, r->mod_revision[i]);
		if (!r->consistent[i]) {
			gaz_txn_put(&t, key, val, len, 0, true);
			*wrote = true;
		}
		free(key);
	}
	if (!rc && *wrote) {
		bool applied = false;
		int64_t rev = 0;
		if (!(rc = gaz_txn_commit(a->b->etcd, &t, &applied, &rev, &st)))
			read_through_txn(a, applied, rev);
	}
	gaz_txn_release(&t);
	free(val);
	if (rc)
		gaz_warn("route consistency write failed", "journal=%s err=%s", a->res.journal,
			 st.msg);
	return rc;
}

/* Writes the item with a new suspension, guarded by the item's and every
 * assignment's mod revision (UPDATE_SUSPEND). */
int gaz__append_update_suspend(struct append_ctx *a, int level, int64_t offset)
{
	Protocol__JournalSpec__Suspend sus = PROTOCOL__JOURNAL_SPEC__SUSPEND__INIT;
	Protocol__JournalSpec__Suspend *old = a->res.spec->suspend;
	struct gaz_route *r = &a->res.route;
	char *ikey = gaz_ks_item_key(a->b->root, a->res.journal);
	struct gaz_status st = {0};
	struct gaz_txn t;
	uint8_t *val;
	size_t len;
	bool ok = false;
	int rc;

	sus.level = level;
	sus.offset = offset;
	a->res.spec->suspend = &sus;
	len = protocol__journal_spec__get_packed_size(a->res.spec);
	val = malloc(len ? len : 1);
	if (val)
		protocol__journal_spec__pack(a->res.spec, val);
	a->res.spec->suspend = old;
	if (!val || !ikey) {
		free(val);
		free(ikey);
		return GAZ_ENOMEM;
	}
	gaz_txn_init(&t);
	gaz_txn_compare_mod(&t, ikey, a->res.item_mod_revision);
	for (size_t i = 0; i < r->n; i++) {
		char *key = gaz_ks_assign_key(a->b->root, a->res.journal, r->zone[i], r->suffix[i],
					      r->slot[i]);
		if (key)
			gaz_txn_compare_mod(&t, key, r->mod_revision[i]);
		free(key);
	}
	gaz_txn_put(&t, ikey, val, len, 0, false);
	int64_t rev = 0;
	rc = gaz_txn_commit(a->b->etcd, &t, &ok, &rev, &st);
	gaz_txn_release(&t);
	free(val);
	free(ikey);
	if (!rc) {
		read_through_txn(a, ok, rev);
		gaz_info("journal suspension updated",
			 "journal=%s suspend_level=%d offset=%lld ok=%d", a->res.journal, level,
			 (long long)offset, ok);
	}
	return rc;
}

