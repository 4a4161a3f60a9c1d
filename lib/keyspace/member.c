/*
 * member.c - a process's member key (facts §4.2), shared by brokers and
 * consumers. See member.h.
 */
#include "keyspace/member.h"

#include <string.h>

int gaz_member_put_once(struct gaz_etcd *etcd, const char *member_key, int64_t lease, const uint8_t *val,
			size_t len, struct gaz_status *st)
{
	Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT;
	Etcdserverpb__Compare *cmps[1] = {&cmp};
	Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
	Etcdserverpb__RangeRequest get = ETCDSERVERPB__RANGE_REQUEST__INIT;
	Etcdserverpb__RequestOp op_put = ETCDSERVERPB__REQUEST_OP__INIT, op_get = op_put;
	Etcdserverpb__RequestOp *succ[1] = {&op_put}, *fail[1] = {&op_get};
	Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
	Etcdserverpb__TxnResponse *resp = NULL;
	ProtobufCBinaryData key = {strlen(member_key), (uint8_t *)member_key};
	int rc;

	cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
	cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VERSION;
	cmp.key = key;
	cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION;
	cmp.version = 0;
	put.key = key;
	put.value.data = (uint8_t *)val;
	put.value.len = len;
	put.lease = lease;
	op_put.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
	op_put.request_put = &put;
	get.key = key;
	op_get.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
	op_get.request_range = &get;
	txn.n_compare = 1;
	txn.compare = cmps;
	txn.n_success = 1;
	txn.success = succ;
	txn.n_failure = 1;
	txn.failure = fail;
	if ((rc = gaz_etcd_txn(etcd, &txn, &resp, st)))
		return rc;
	rc = 0;
	if (!resp->succeeded) {
		const Etcdserverpb__RangeResponse *r =
			resp->n_responses ? resp->responses[0]->response_range : NULL;
		if (!r || !r->n_kvs || r->kvs[0]->lease != lease)
			rc = gaz_status_set(st, GAZ_EEXIST, "member key %s is held by another lease",
					    member_key);
	}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}


int gaz_member_update(struct gaz_etcd *etcd, const char *member_key, const uint8_t *val, size_t len,
		      struct gaz_status *st)
{
	Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
	Etcdserverpb__PutResponse *resp = NULL;
	int rc;

	put.key.data = (uint8_t *)member_key;
	put.key.len = strlen(member_key);
	put.value.data = (uint8_t *)val;
	put.value.len = len;
	put.ignore_lease = true;
	if (!(rc = gaz_etcd_put(etcd, &put, &resp, st)))
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}
