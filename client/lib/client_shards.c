/*
 * client_shards.c - the consumer.Shard service's calls (gazette/
 * shard_client.h): one unary RPC each, to the client's address (a
 * consumer's), response validated, status mapped, as Gazette's
 * consumer.ListShards, StatShard, ApplyShardsInBatches, FetchHints and
 * gazctl's Unassign call do.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/client_int.h"
#include "gazette/shard_client.h"
#include "protocol/shard.h"
#include "protocol/validate.h"

#define SHARD_LIST_PATH "/consumer.Shard/List"
#define SHARD_STAT_PATH "/consumer.Shard/Stat"
#define SHARD_APPLY_PATH "/consumer.Shard/Apply"
#define SHARD_HINTS_PATH "/consumer.Shard/GetHints"
#define SHARD_UNASSIGN_PATH "/consumer.Shard/Unassign"

const char *gaz_shard_status_name(int status, char *buf, size_t cap)
{
	const ProtobufCEnumValue *v =
		protobuf_c_enum_descriptor_get_value(&consumer__status__descriptor, status);

	if (v)
		snprintf(buf, cap, "%s", v->name);
	else
		snprintf(buf, cap, "Status(%d)", status);
	return buf;
}

int gaz_shard_status_err(int status)
{
	switch (status) {
	case CONSUMER__STATUS__OK:
		return 0;
	case CONSUMER__STATUS__SHARD_NOT_FOUND:
		return GAZ_ENOTFOUND;
	case CONSUMER__STATUS__NO_SHARD_PRIMARY:
	case CONSUMER__STATUS__NOT_SHARD_PRIMARY:
		return GAZ_EUNAVAIL;
	case CONSUMER__STATUS__ETCD_TRANSACTION_FAILED:
		return GAZ_EEXIST;
	case CONSUMER__STATUS__SHARD_STOPPED:
		return GAZ_ESTOPPED;
	default:
		return GAZ_EPROTO;
	}
}

/* status_fail: the status name as the error, as errors.New(Status.String()). */
static int status_fail(int status, struct gaz_status *st)
{
	char name[48];

	return gaz_status_set(st, gaz_shard_status_err(status), "%s",
			      gaz_shard_status_name(status, name, sizeof(name)));
}

static int invalid(const struct gaz_status *vst, struct gaz_status *st)
{
	if (vst->code == GAZ_ENOMEM)
		return gaz_status_set(st, GAZ_ENOMEM, "%s", vst->msg);
	return gaz_status_set(st, GAZ_EPROTO, "validating consumer response: %s", vst->msg);
}

/* call performs one unary call to the client's address, waiting for a
 * connection as Gazette's WaitForReady calls do. */
static int call(struct gaz_client *c, const char *path, const ProtobufCMessage *req,
		const ProtobufCMessageDescriptor *desc, ProtobufCMessage **resp,
		struct gaz_status *st)
{
	struct gaz__dispatch d;

	gaz__client_dispatch(c, NULL, false, NULL, &d);
	return gaz__client_unary(c, &d, path, req, desc, resp, true, st);
}

/* header_status checks a response's status and header (Stat, Apply). */
static int header_status(int status, const Protocol__Header *h, struct gaz_status *st)
{
	struct gaz_status vst = {0};

	if (gaz_validate_consumer_status(status, &vst)) {
		gaz_status_prefix(&vst, "Status: ");
		return invalid(&vst, st);
	}
	if (gaz_validate_header(h, &vst)) {
		gaz_status_prefix(&vst, "Header: ");
		return invalid(&vst, st);
	}
	return status != CONSUMER__STATUS__OK ? status_fail(status, st) : 0;
}

/* done frees *resp on failure and hands it out otherwise. */
static int done(int rc, ProtobufCMessage *resp, void *out)
{
	if (rc && resp)
		protobuf_c_message_free_unpacked(resp, NULL);
	else
		memcpy(out, &resp, sizeof(resp));
	return rc;
}

int gaz_shard_list(struct gaz_client *c, const Protocol__LabelSelector *sel,
		   Consumer__ListResponse **out, struct gaz_status *st)
{
	Consumer__ListRequest req = CONSUMER__LIST_REQUEST__INIT;
	Protocol__LabelSelector none = PROTOCOL__LABEL_SELECTOR__INIT;
	Consumer__ListResponse *resp = NULL;
	struct gaz_status vst = {0};
	int rc;

	*out = NULL;
	req.selector = sel ? (Protocol__LabelSelector *)sel : &none;
	rc = call(c, SHARD_LIST_PATH, &req.base, &consumer__list_response__descriptor,
		  (ProtobufCMessage **)&resp, st);
	if (!rc && gaz_validate_shard_list_response(resp, &vst))
		rc = invalid(&vst, st);
	else if (!rc && resp->status != CONSUMER__STATUS__OK)
		rc = status_fail((int)resp->status, st);
	return done(rc, resp ? &resp->base : NULL, out);
}

int gaz_shard_stat(struct gaz_client *c, const char *shard, Consumer__StatResponse **out,
		   struct gaz_status *st)
{
	Consumer__StatRequest req = CONSUMER__STAT_REQUEST__INIT;
	Consumer__StatResponse *resp = NULL;
	int rc;

	*out = NULL;
	req.shard = (char *)shard;
	if (gaz_validate_shard_id(shard, st)) {
		gaz_status_prefix(st, "invalid StatRequest: Shard: ");
		return GAZ_EINVAL;
	}
	rc = call(c, SHARD_STAT_PATH, &req.base, &consumer__stat_response__descriptor,
		  (ProtobufCMessage **)&resp, st);
	if (!rc)
		rc = header_status((int)resp->status, resp->header, st);
	return done(rc, resp ? &resp->base : NULL, out);
}

/* apply_batch sends changes [from, from + n) as one transaction. */
static int apply_batch(struct gaz_client *c, const Consumer__ApplyRequest *all, size_t from,
		       size_t n, int64_t *revision, struct gaz_status *st)
{
	Consumer__ApplyRequest req = CONSUMER__APPLY_REQUEST__INIT;
	Consumer__ApplyResponse *resp = NULL;
	int rc;

	req.n_changes = n;
	req.changes = n ? all->changes + from : NULL;
	rc = call(c, SHARD_APPLY_PATH, &req.base, &consumer__apply_response__descriptor,
		  (ProtobufCMessage **)&resp, st);
	if (rc)
		return rc;
	rc = header_status((int)resp->status, resp->header, st);
	if (!rc && revision && resp->header && resp->header->etcd)
		*revision = resp->header->etcd->revision;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

int gaz_shard_apply(struct gaz_client *c, const Consumer__ApplyRequest *req, size_t max_txn_size,
		    int64_t *revision, struct gaz_status *st)
{
	size_t total = req->n_changes, size = max_txn_size ? max_txn_size : total, off = 0;
	int rc;

	do {
		size_t n = total - off > size ? size : total - off;

		if (gaz_client_cancelled(c))
			return gaz_status_set(st, GAZ_ECANCELLED, "cancelled");
		if ((rc = apply_batch(c, req, off, n, revision, st)))
			return rc;
		off += n;
	} while (off < total);
	return 0;
}

int gaz_shard_get_hints(struct gaz_client *c, const char *shard, Consumer__GetHintsResponse **out,
			struct gaz_status *st)
{
	Consumer__GetHintsRequest req = CONSUMER__GET_HINTS_REQUEST__INIT;
	Consumer__GetHintsResponse *resp = NULL;
	struct gaz_status vst = {0};
	int rc;

	*out = NULL;
	req.shard = (char *)shard;
	if (gaz_validate_shard_id(shard, st)) {
		gaz_status_prefix(st, "invalid GetHintsRequest: Shard: ");
		return GAZ_EINVAL;
	}
	rc = call(c, SHARD_HINTS_PATH, &req.base, &consumer__get_hints_response__descriptor,
		  (ProtobufCMessage **)&resp, st);
	if (!rc && gaz_validate_consumer_status((int)resp->status, &vst)) {
		gaz_status_prefix(&vst, "Status: ");
		rc = invalid(&vst, st);
	} else if (!rc && resp->status != CONSUMER__STATUS__OK) {
		rc = status_fail((int)resp->status, st);
	}
	return done(rc, resp ? &resp->base : NULL, out);
}

int gaz_shard_unassign(struct gaz_client *c, const Consumer__UnassignRequest *req,
		       Consumer__UnassignResponse **out, struct gaz_status *st)
{
	Consumer__UnassignResponse *resp = NULL;
	struct gaz_status vst = {0};
	char name[48];
	int rc;

	*out = NULL;
	for (size_t i = 0; i < req->n_shards; i++) {
		if (gaz_validate_shard_id(req->shards[i], st)) {
			gaz_status_prefix(st, "invalid UnassignRequest: Shards[%zu]: ", i);
			return GAZ_EINVAL;
		}
	}
	rc = call(c, SHARD_UNASSIGN_PATH, &req->base, &consumer__unassign_response__descriptor,
		  (ProtobufCMessage **)&resp, st);
	if (!rc && gaz_validate_consumer_status((int)resp->status, &vst)) {
		gaz_status_prefix(&vst, "Status: ");
		rc = invalid(&vst, st);
	} else if (!rc && resp->status != CONSUMER__STATUS__OK) {
		rc = gaz_status_set(st, gaz_shard_status_err((int)resp->status), "bad status: %s",
				    gaz_shard_status_name((int)resp->status, name, sizeof(name)));
	}
	return done(rc, resp ? &resp->base : NULL, out);
}
