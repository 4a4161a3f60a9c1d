/*
 * etcd_items.c - the operator's view of the brokers' keyspace: one item
 * key per journal, <root>/items/<journal>, holding JournalSpec protobuf
 * bytes (facts §4.1), written with Gazette's Apply compare (ModRevision ==
 * expected, 0 = must not exist; facts §2.5) through lib/etcd's txn
 * builder; and the journal's assignment keys, <root>/assign/<journal>#
 * <zone>#<suffix>#<slot>, for its route. Consumer keyspaces use the same
 * assignment layout for shards (gaz_item_route_at).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd/txn.h"
#include "keyspace/journals.h"
#include "operator/operator.h"
#include "protocol/validate.h"

void gaz_item_release(struct gaz_item *it)
{
	if (it->spec)
		protobuf_c_message_free_unpacked(&it->spec->base, NULL);
	memset(it, 0, sizeof(*it));
}

static void decode(struct gaz_item *out, const char *journal, const ProtobufCBinaryData *v)
{
	struct gaz_status vst = {0};

	out->spec = protocol__journal_spec__unpack(NULL, v->len, v->data);
	if (!out->spec) {
		snprintf(out->decode_err, sizeof(out->decode_err), "value is not a JournalSpec");
	} else if (strcmp(out->spec->name, journal)) {
		snprintf(out->decode_err, sizeof(out->decode_err), "value names journal \"%s\"",
			 out->spec->name);
	} else if (gaz_validate_journal_spec(out->spec, &vst)) {
		snprintf(out->decode_err, sizeof(out->decode_err), "invalid spec: %s", vst.msg);
	} else {
		return;
	}
	if (out->spec)
		protobuf_c_message_free_unpacked(&out->spec->base, NULL);
	out->spec = NULL;
}

int gaz_item_get(struct gaz_op *op, const char *journal, struct gaz_item *out,
		 struct gaz_status *st)
{
	Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
	Etcdserverpb__RangeResponse *resp = NULL;
	char *key = gaz_ks_item_key(op->cfg.etcd_prefix, journal);
	int rc;

	memset(out, 0, sizeof(*out));
	if (!key)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	req.key.data = (uint8_t *)key;
	req.key.len = strlen(key);
	rc = gaz_etcd_range(op->etcd, &req, &resp, st);
	free(key);
	if (rc)
		return rc;
	if (resp->n_kvs) {
		out->exists = true;
		out->mod_revision = resp->kvs[0]->mod_revision;
		decode(out, journal, &resp->kvs[0]->value);
	}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return 0;
}

int gaz_item_put(struct gaz_op *op, const Protocol__JournalSpec *spec, int64_t expect_mod,
		 bool *applied, int64_t *revision, struct gaz_status *st)
{
	size_t len = protocol__journal_spec__get_packed_size(spec);
	uint8_t *val = malloc(len ? len : 1);
	char *key = gaz_ks_item_key(op->cfg.etcd_prefix, spec->name);
	struct gaz_txn t;
	int rc;

	if (!val || !key) {
		free(val);
		free(key);
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	}
	protocol__journal_spec__pack(spec, val);
	gaz_txn_init(&t);
	gaz_txn_compare_mod(&t, key, expect_mod);
	gaz_txn_put(&t, key, val, len, 0, false);
	rc = gaz_txn_commit(op->etcd, &t, applied, revision, st);
	gaz_txn_release(&t);
	free(val);
	free(key);
	return rc;
}

int gaz_item_delete(struct gaz_op *op, const char *journal, int64_t expect_mod, bool *applied,
		    struct gaz_status *st)
{
	char *key = gaz_ks_item_key(op->cfg.etcd_prefix, journal);
	struct gaz_txn t;
	int rc;

	if (!key)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	gaz_txn_init(&t);
	gaz_txn_compare_mod(&t, key, expect_mod);
	gaz_txn_delete(&t, key);
	rc = gaz_txn_commit(op->etcd, &t, applied, NULL, st);
	gaz_txn_release(&t);
	free(key);
	return rc;
}

void gaz_item_route_release(struct gaz_item_route *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->members[i]);
		if (r->values)
			free(r->values[i].data);
	}
	free(r->members);
	free(r->values);
	memset(r, 0, sizeof(*r));
}

/* Parses "<zone>#<suffix>#<slot>" (the key after "<journal>#") into a
 * "zone/suffix" member and its slot. */
static char *parse_assignment(const char *rest, size_t len, long *slot)
{
	const char *h1 = memchr(rest, '#', len), *h2;
	char *m = NULL, *end;

	if (!h1 || !(h2 = memchr(h1 + 1, '#', len - (size_t)(h1 + 1 - rest))))
		return NULL;
	char num[24];
	size_t nl = len - (size_t)(h2 + 1 - rest);
	if (!nl || nl >= sizeof(num))
		return NULL;
	memcpy(num, h2 + 1, nl);
	num[nl] = '\0';
	*slot = strtol(num, &end, 10);
	if (*end || asprintf(&m, "%.*s/%.*s", (int)(h1 - rest), rest, (int)(h2 - h1 - 1), h1 + 1) < 0)
		return NULL;
	return m;
}

int gaz_item_route(struct gaz_op *op, const char *journal, struct gaz_item_route *out,
		   struct gaz_status *st)
{
	return gaz_item_route_at(op, op->cfg.etcd_prefix, journal, false, out, st);
}

int gaz_item_route_at(struct gaz_op *op, const char *root, const char *item, bool values,
		      struct gaz_item_route *out, struct gaz_status *st)
{
	Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
	Etcdserverpb__RangeResponse *resp = NULL;
	char *prefix = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	out->primary = -1;
	if (asprintf(&prefix, "%s/assign/%s#", root, item) < 0)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	size_t plen = strlen(prefix);
	uint8_t end[plen];
	gaz_etcd_prefix_end((const uint8_t *)prefix, plen, end);
	req.key.data = (uint8_t *)prefix;
	req.key.len = plen;
	req.range_end.data = end;
	req.range_end.len = plen;
	req.keys_only = !values;
	if ((rc = gaz_etcd_range(op->etcd, &req, &resp, st)) == 0) {
		out->members = calloc(resp->n_kvs ? resp->n_kvs : 1, sizeof(char *));
		if (values)
			out->values = calloc(resp->n_kvs ? resp->n_kvs : 1, sizeof(*out->values));
		for (size_t i = 0; out->members && i < resp->n_kvs; i++) {
			const ProtobufCBinaryData *k = &resp->kvs[i]->key;
			long slot = -1;
			char *m = parse_assignment((const char *)k->data + plen, k->len - plen, &slot);
			if (!m)
				continue;
			if (slot == 0)
				out->primary = (int)out->n;
			if (out->values && resp->kvs[i]->value.len &&
			    (out->values[out->n].data = malloc(resp->kvs[i]->value.len))) {
				memcpy(out->values[out->n].data, resp->kvs[i]->value.data,
				       resp->kvs[i]->value.len);
				out->values[out->n].len = resp->kvs[i]->value.len;
			}
			out->members[out->n++] = m;
		}
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	}
	free(prefix);
	return rc;
}
