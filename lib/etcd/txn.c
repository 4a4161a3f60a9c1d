/* txn.c - the transaction builder. See txn.h. Every compare and op is one
 * heap allocation holding its key and value copies inline. */
#include "etcd/txn.h"

#include <stdlib.h>
#include <string.h>

void gaz_txn_init(struct gaz_txn *t)
{
	memset(t, 0, sizeof(*t));
	etcdserverpb__txn_request__init(&t->req);
}

void gaz_txn_release(struct gaz_txn *t)
{
	for (size_t i = 0; i < t->req.n_compare; i++)
		free(t->cmp[i]);
	for (size_t i = 0; i < t->req.n_success; i++)
		free(t->ops[i]);
	free(t->cmp);
	free(t->ops);
	gaz_txn_init(t);
}

static bool grow(void ***v, size_t *cap, size_t n)
{
	if (n < *cap)
		return true;
	size_t ncap = *cap ? *cap * 2 : 8;
	void **nv = realloc(*v, ncap * sizeof(void *));
	if (!nv)
		return false;
	*v = nv;
	*cap = ncap;
	return true;
}

static void compare(struct gaz_txn *t, const char *key, int64_t rev, bool create)
{
	size_t klen = strlen(key);
	Etcdserverpb__Compare *c = calloc(1, sizeof(*c) + klen + 1);

	if (!c || !grow((void ***)&t->cmp, &t->cap_cmp, t->req.n_compare)) {
		free(c);
		t->oom = true;
		return;
	}
	etcdserverpb__compare__init(c);
	memcpy(c + 1, key, klen + 1);
	c->key.data = (uint8_t *)(c + 1);
	c->key.len = klen;
	c->result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
	if (create) {
		c->target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
		c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
		c->create_revision = rev;
	} else {
		c->target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD;
		c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
		c->mod_revision = rev;
	}
	t->cmp[t->req.n_compare++] = c;
}

void gaz_txn_compare_mod(struct gaz_txn *t, const char *key, int64_t rev)
{
	compare(t, key, rev, false);
}

void gaz_txn_compare_create(struct gaz_txn *t, const char *key, int64_t rev)
{
	compare(t, key, rev, true);
}

/* One op block: the op, its request, then key and value bytes. */
struct op_block {
	Etcdserverpb__RequestOp op;
	union {
		Etcdserverpb__PutRequest put;
		Etcdserverpb__DeleteRangeRequest del;
	} u;
};

static struct op_block *op_new(struct gaz_txn *t, const char *key, size_t extra)
{
	size_t klen = strlen(key);
	struct op_block *b = calloc(1, sizeof(*b) + klen + 1 + extra);

	if (!b || !grow((void ***)&t->ops, &t->cap_ops, t->req.n_success)) {
		free(b);
		t->oom = true;
		return NULL;
	}
	etcdserverpb__request_op__init(&b->op);
	memcpy(b + 1, key, klen + 1);
	t->ops[t->req.n_success++] = &b->op;
	return b;
}

void gaz_txn_put(struct gaz_txn *t, const char *key, const uint8_t *val, size_t len,
		 int64_t lease, bool ignore_lease)
{
	struct op_block *b = op_new(t, key, len);
	uint8_t *kp;

	if (!b)
		return;
	kp = (uint8_t *)(b + 1);
	etcdserverpb__put_request__init(&b->u.put);
	b->u.put.key.data = kp;
	b->u.put.key.len = strlen(key);
	if (len)
		memcpy(kp + b->u.put.key.len + 1, val, len);
	b->u.put.value.data = len ? kp + b->u.put.key.len + 1 : NULL;
	b->u.put.value.len = len;
	b->u.put.lease = ignore_lease ? 0 : lease;
	b->u.put.ignore_lease = ignore_lease;
	b->op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
	b->op.request_put = &b->u.put;
}

void gaz_txn_delete(struct gaz_txn *t, const char *key)
{
	struct op_block *b = op_new(t, key, 0);

	if (!b)
		return;
	etcdserverpb__delete_range_request__init(&b->u.del);
	b->u.del.key.data = (uint8_t *)(b + 1);
	b->u.del.key.len = strlen(key);
	b->op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
	b->op.request_delete_range = &b->u.del;
}

size_t gaz_txn_compares(const struct gaz_txn *t)
{
	return t->req.n_compare;
}

size_t gaz_txn_ops(const struct gaz_txn *t)
{
	return t->req.n_success;
}

int gaz_txn_commit(struct gaz_etcd *e, struct gaz_txn *t, bool *succeeded, int64_t *revision,
		   struct gaz_status *st)
{
	Etcdserverpb__TxnResponse *resp = NULL;
	int rc;

	if (t->oom)
		return gaz_status_set(st, GAZ_ENOMEM, "etcd transaction: out of memory");
	t->req.compare = t->cmp;
	t->req.success = t->ops;
	if ((rc = gaz_etcd_txn(e, &t->req, &resp, st)))
		return rc;
	if (succeeded)
		*succeeded = resp->succeeded;
	if (revision && resp->header)
		*revision = resp->header->revision;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return 0;
}
