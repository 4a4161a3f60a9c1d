/*
 * auth.c - the broker's side of authorization (gazette-facts §11) beyond
 * verifying calls (rpc/authorize.c, called from main.c's dispatch): a
 * journal's visibility to a call's claims where the resolver is skipped
 * (Append's fast path), and the tokens this broker signs for the calls it
 * makes on a client's behalf (proxied Read, Append and ListFragments,
 * Replicate to its peers, the HTTP gateway's loopback calls).
 *
 * Lock rule: b->auth is set once by configure() before the server starts
 * and is immutable after; gaz_journal_visible takes the keyspace read lock.
 */
#include "broker/broker.h"
#include "common/log.h"
#include "keyspace/journals.h"
#include "protocol/auth.h"
#include "protocol/labels.h"
#include "rpc/authorize.h"

#include <stdlib.h>
#include <string.h>

bool gaz_journal_visible(struct gaz_broker *b, struct gaz_rpc_call *call, const char *journal)
{
	const Protocol__LabelSelector *sel = gaz_rpc_claims_selector(call);
	const struct gaz_ks_entry *item;
	const char *semi;
	char *name;
	bool ok;

	if (!sel)
		return true;
	semi = strchr(journal, ';');
	if (!(name = semi ? strndup(journal, (size_t)(semi - journal)) : strdup(journal)))
		return false;
	gaz_keyspace_rlock(b->ks);
	item = gaz_ks_item(b->ks, b->root, name);
	ok = item && gaz_selector_matches_meta(
				   sel, name, ((const struct gaz_ks_value *)item->decoded)->spec->labels, 0);
	gaz_keyspace_runlock(b->ks);
	free(name);
	return ok;
}

char *gaz_broker_sign(struct gaz_broker *b, uint32_t cap, const char *journal)
{
	struct gaz_status st = {0};
	char *bearer = NULL;
	int rc;

	if (!b->auth)
		return NULL;
	rc = journal ? gaz_auth_sign_journal(b->auth, cap, journal, GAZ_AUTH_TTL_LONG, &bearer, &st)
		     : gaz_auth_sign(b->auth, cap, NULL, GAZ_AUTH_TTL_LONG, &bearer, &st);
	if (rc)
		gaz_warn("cannot sign an authorization token", "err=\"%s\"", st.msg);
	return bearer;
}
