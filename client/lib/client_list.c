/*
 * client_list.c - the listing and administrative RPCs of the client:
 * List (ListAllJournals), Apply in batches (ApplyJournalsInBatches),
 * paged ListFragments (ListAllFragments) and FragmentStoreHealth, facts
 * §7.5, §2.4-§2.7.
 *
 * Responses are unpacked with protobuf-c's default allocator, so journals
 * and fragments of later messages are moved (pointer and all) into the
 * first message's arrays before the later messages are freed.
 */
#include <stdlib.h>
#include <string.h>

#include "client/lib/client_int.h"
#include "common/clock.h"
#include "gazette/duration.h"
#include "protocol/validate.h"

#define LIST_PATH "/protocol.Journal/List"
#define APPLY_PATH "/protocol.Journal/Apply"
#define FRAGMENTS_PATH "/protocol.Journal/ListFragments"
#define STORE_HEALTH_PATH "/protocol.Journal/FragmentStoreHealth"

/* move_ptrs appends the *sn message pointers of the array held in the
 * field at `src_field` to the array in the field at `dst_field` (*dn long),
 * leaving the source empty. The fields are `T **` for some message type T;
 * they are read and written with memcpy to stay clear of type punning.
 * Returns 0 or GAZ_ENOMEM (nothing moved). */
static int move_ptrs(void *dst_field, size_t *dn, void *src_field, size_t *sn)
{
	void **dst, **src, **grown;

	if (*sn == 0)
		return 0;
	memcpy(&dst, dst_field, sizeof(dst));
	memcpy(&src, src_field, sizeof(src));
	if (!(grown = realloc(dst, (*dn + *sn) * sizeof(void *))))
		return GAZ_ENOMEM;
	memcpy(grown + *dn, src, *sn * sizeof(void *));
	memcpy(dst_field, &grown, sizeof(grown));
	*dn += *sn;
	*sn = 0;
	return 0;
}

/* list_first receives and checks the first ListResponse of the stream. */
static int list_first(struct gaz_client *c, struct gaz_rpc_stream *s, Protocol__ListResponse **out,
		      struct gaz_status *st)
{
	struct gaz_status vst = {0};
	int rc = gaz__client_recv(c, s, &protocol__list_response__descriptor,
				  (ProtobufCMessage **)out, st);

	if (rc == GAZ_EOF) {
		if ((rc = gaz_rpc_stream_finish(s, st)) == 0)
			rc = gaz_status_set(st, GAZ_EPROTO, "List ended without a response");
		return rc;
	}
	if (rc)
		return rc;
	if (gaz_validate_list_response(*out, &vst))
		return gaz__client_invalid(&vst, st);
	if ((*out)->status != PROTOCOL__STATUS__OK)
		return gaz__client_status_fail((int)(*out)->status, NULL, st);
	return 0;
}

/* list_rest appends the journals of continuation messages until EOF. */
static int list_rest(struct gaz_client *c, struct gaz_rpc_stream *s, Protocol__ListResponse *resp,
		     struct gaz_status *st)
{
	Protocol__ListResponse *next;
	struct gaz_status vst = {0};
	int rc;

	while ((rc = gaz__client_recv(c, s, &protocol__list_response__descriptor,
				      (ProtobufCMessage **)&next, st)) == 0) {
		if (next->n_journals == 0)
			rc = gaz_status_set(st, GAZ_EPROTO,
					    "unexpected empty ListResponse.Journals in unary listing");
		for (size_t i = 0; !rc && i < next->n_journals; i++)
			if (gaz_validate_list_journal(next->journals[i], &vst))
				rc = gaz__client_invalid(&vst, st);
		if (!rc && move_ptrs(&resp->journals, &resp->n_journals, &next->journals,
				     &next->n_journals))
			rc = gaz_status_set(st, GAZ_ENOMEM, "out of memory listing journals");
		protobuf_c_message_free_unpacked(&next->base, NULL);
		if (rc)
			return rc;
	}
	return rc == GAZ_EOF ? gaz_rpc_stream_finish(s, st) : rc;
}

/* observe_routes records each listed journal's route in the route cache,
 * as ListAllJournals does, at the listing's etcd revision. */
static void observe_routes(struct gaz_client *c, const Protocol__ListResponse *resp)
{
	Protocol__Header h = PROTOCOL__HEADER__INIT;

	h.etcd = resp->header ? resp->header->etcd : NULL;
	for (size_t i = 0; i < resp->n_journals; i++) {
		h.route = resp->journals[i]->route;
		gaz__client_observe(c, resp->journals[i]->spec->name, &h);
	}
}

int gaz_client_list(struct gaz_client *c, const Protocol__LabelSelector *sel,
		    Protocol__ListResponse **out, struct gaz_status *st)
{
	Protocol__ListRequest req = PROTOCOL__LIST_REQUEST__INIT;
	Protocol__LabelSelector none = PROTOCOL__LABEL_SELECTOR__INIT;
	Protocol__ListResponse *resp = NULL;
	struct gaz__client_call call;
	struct gaz__dispatch d;
	struct gaz_rpc_stream *s;
	int rc;

	*out = NULL;
	req.selector = sel ? (Protocol__LabelSelector *)sel : &none;
	gaz__client_dispatch(c, NULL, false, NULL, &d);
	if ((rc = gaz__client_open(c, &d, LIST_PATH, gaz__client_deadline(c), true, &call, st)))
		return rc;
	s = call.stream;
	if (gaz_rpc_stream_send(s, &req.base) || gaz_rpc_stream_close_send(s))
		rc = gaz_rpc_stream_finish(s, st) ? GAZ_ERPC
						  : gaz_status_set(st, GAZ_ERPC, "List send failed");
	else if (!(rc = list_first(c, s, &resp, st)))
		rc = list_rest(c, s, resp, st);
	gaz__client_close(c, &call);
	if (rc) {
		if (resp)
			protobuf_c_message_free_unpacked(&resp->base, NULL);
		return rc;
	}
	observe_routes(c, resp);
	*out = resp;
	return 0;
}

/* ---- Apply ------------------------------------------------------------------ */

/* apply_batch sends changes [from, from + n) as one transaction. */
static int apply_batch(struct gaz_client *c, const Protocol__ApplyRequest *all, size_t from,
		       size_t n, int64_t *revision, int *status, struct gaz_status *st)
{
	Protocol__ApplyRequest req = PROTOCOL__APPLY_REQUEST__INIT;
	Protocol__ApplyResponse *resp = NULL;
	struct gaz_status vst = {0};
	struct gaz__dispatch d;
	int rc;

	req.n_changes = n;
	req.changes = n ? all->changes + from : NULL;
	gaz__client_dispatch(c, NULL, false, NULL, &d);
	rc = gaz__client_unary(c, &d, APPLY_PATH, &req.base, &protocol__apply_response__descriptor,
			       (ProtobufCMessage **)&resp, true, st);
	if (rc)
		return rc;
	if (gaz_validate_apply_response(resp, &vst))
		rc = gaz__client_invalid(&vst, st);
	else if (resp->status != PROTOCOL__STATUS__OK)
		rc = gaz__client_status_fail((int)resp->status, NULL, st);
	if (status)
		*status = (int)resp->status;
	if (revision && resp->header && resp->header->etcd)
		*revision = resp->header->etcd->revision;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

int gaz_client_apply(struct gaz_client *c, const Protocol__ApplyRequest *req,
		     size_t max_txn_size, int64_t *revision, int *status, struct gaz_status *st)
{
	size_t total = req->n_changes, size = max_txn_size ? max_txn_size : total, off = 0;
	int rc;

	do {
		size_t n = total - off > size ? size : total - off;

		if (gaz_client_cancelled(c))
			return gaz_status_set(st, GAZ_ECANCELLED, "cancelled");
		if ((rc = apply_batch(c, req, off, n, revision, status, st)))
			return rc;
		off += n;
	} while (off < total);
	return 0;
}

/* ---- ListFragments ------------------------------------------------------------ */

/* fragments_page fetches and checks one page. */
static int fragments_page(struct gaz_client *c, const Protocol__FragmentsRequest *req,
			  Protocol__FragmentsResponse **out, struct gaz_status *st)
{
	struct gaz_status vst = {0};
	struct gaz__dispatch d;
	int rc;

	gaz__client_dispatch(c, req->journal, false, NULL, &d);
	rc = gaz__client_unary(c, &d, FRAGMENTS_PATH, &req->base,
			       &protocol__fragments_response__descriptor, (ProtobufCMessage **)out,
			       false, st);
	gaz__client_undispatch(c, &d);
	if (rc)
		return rc;
	if (gaz_validate_fragments_response(*out, &vst))
		return gaz__client_invalid(&vst, st);
	if ((*out)->status != PROTOCOL__STATUS__OK)
		return gaz__client_status_fail((int)(*out)->status, req->journal, st);
	return 0;
}

/* fragments_loop pages until next_page_token is 0, merging into *all. */
static int fragments_loop(struct gaz_client *c, Protocol__FragmentsRequest *req,
			  Protocol__FragmentsResponse **all, struct gaz_status *st)
{
	Protocol__FragmentsResponse *page;
	int rc;

	do {
		page = NULL;
		if (gaz_client_cancelled(c))
			return gaz_status_set(st, GAZ_ECANCELLED, "cancelled");
		if ((rc = fragments_page(c, req, &page, st))) {
			if (page)
				protobuf_c_message_free_unpacked(&page->base, NULL);
			return rc;
		}
		req->next_page_token = page->next_page_token;
		page->next_page_token = 0;
		if (!*all) {
			*all = page;
			continue;
		}
		rc = move_ptrs(&(*all)->fragments, &(*all)->n_fragments, &page->fragments,
			       &page->n_fragments);
		protobuf_c_message_free_unpacked(&page->base, NULL);
		if (rc)
			return gaz_status_set(st, GAZ_ENOMEM, "out of memory listing fragments");
	} while (req->next_page_token != 0);
	return 0;
}

int gaz_client_list_fragments(struct gaz_client *c, const struct gaz_fragments_opts *o,
			      Protocol__FragmentsResponse **out, struct gaz_status *st)
{
	Protocol__FragmentsRequest req = PROTOCOL__FRAGMENTS_REQUEST__INIT;
	Google__Protobuf__Duration ttl = GOOGLE__PROTOBUF__DURATION__INIT;
	struct gaz_status vst = {0};
	int rc;

	*out = NULL;
	req.journal = (char *)o->journal;
	req.begin_mod_time = o->begin_mod_time;
	req.end_mod_time = o->end_mod_time;
	req.page_limit = o->page_limit;
	if (o->signature_ttl_ns > 0) {
		gaz_duration_set_pb(&ttl, o->signature_ttl_ns);
		req.signaturettl = &ttl;
	}
	if (gaz_validate_fragments_request(&req, &vst))
		return gaz_status_set(st, GAZ_EINVAL, "invalid FragmentsRequest: %s", vst.msg);
	if ((rc = fragments_loop(c, &req, out, st)) && *out) {
		protobuf_c_message_free_unpacked(&(*out)->base, NULL);
		*out = NULL;
	}
	return rc;
}

/* ---- FragmentStoreHealth ---------------------------------------------------------- */

int gaz_client_store_health(struct gaz_client *c, const char *store,
			    Protocol__FragmentStoreHealthResponse **out, struct gaz_status *st)
{
	Protocol__FragmentStoreHealthRequest req = PROTOCOL__FRAGMENT_STORE_HEALTH_REQUEST__INIT;
	struct gaz_status vst = {0};
	struct gaz__dispatch d;
	int rc;

	*out = NULL;
	req.fragment_store = (char *)store;
	if (gaz_validate_store_health_request(&req, &vst))
		return gaz_status_set(st, GAZ_EINVAL, "invalid FragmentStoreHealthRequest: %s",
				      vst.msg);
	gaz__client_dispatch(c, NULL, false, NULL, &d);
	rc = gaz__client_unary(c, &d, STORE_HEALTH_PATH, &req.base,
			       &protocol__fragment_store_health_response__descriptor,
			       (ProtobufCMessage **)out, true, st);
	if (!rc && gaz_validate_store_health_response(*out, &vst))
		rc = gaz__client_invalid(&vst, st);
	if (rc && *out) {
		protobuf_c_message_free_unpacked(&(*out)->base, NULL);
		*out = NULL;
	}
	return rc;
}
