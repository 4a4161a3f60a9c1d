/*
 * txn.h - building and committing one etcd transaction of compares and
 * puts/deletes (the success branch), with the buffers it needs owned by
 * the builder. Used by the allocator, Apply, and the broker's route and
 * suspension writes.
 */
#ifndef GAZ_ETCD_TXN_H
#define GAZ_ETCD_TXN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd/etcd.h"

struct gaz_txn {
	Etcdserverpb__TxnRequest req;
	Etcdserverpb__Compare **cmp;
	Etcdserverpb__RequestOp **ops;
	size_t cap_cmp, cap_ops;
	bool oom;                      /* an add failed; commit refuses */
};

void gaz_txn_init(struct gaz_txn *t);
void gaz_txn_release(struct gaz_txn *t);

/* Adds compare ModRevision(key) == rev (rev 0: the key must not exist). */
void gaz_txn_compare_mod(struct gaz_txn *t, const char *key, int64_t rev);
/* Adds compare CreateRevision(key) == rev. */
void gaz_txn_compare_create(struct gaz_txn *t, const char *key, int64_t rev);
/* Adds a put of `val[len]` (copied) with `lease` (0 = none), or keeping the
 * key's current lease when ignore_lease. */
void gaz_txn_put(struct gaz_txn *t, const char *key, const uint8_t *val, size_t len,
		 int64_t lease, bool ignore_lease);
/* Adds a delete of exactly `key`. */
void gaz_txn_delete(struct gaz_txn *t, const char *key);
/* gaz_txn_ops: operations added so far. */
size_t gaz_txn_ops(const struct gaz_txn *t);
/* gaz_txn_compares: compares added so far (etcd bounds both counts by its
 * --max-txn-ops, 128 by default). */
size_t gaz_txn_compares(const struct gaz_txn *t);

/* gaz_txn_commit sends the transaction. *succeeded (may be NULL) says
 * whether the compares held; *revision (may be NULL) receives the response
 * header revision. Returns 0, GAZ_ENOMEM (an add failed earlier), or the
 * errors of gaz_etcd_txn. */
int gaz_txn_commit(struct gaz_etcd *e, struct gaz_txn *t, bool *succeeded, int64_t *revision,
		   struct gaz_status *st);

#endif
