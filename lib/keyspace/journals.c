/*
 * journals.c - decoding of Gazette's items/members/assign keys and route
 * derivation. See journals.h. Decoding rules are facts §4.1: anything that
 * does not decode and validate is left out of the keyspace.
 */
#include "keyspace/journals.h"

#include "common/strset.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/shard.h"
#include "protocol/validate.h"

struct journals_ctx {
	char *root; /* "/gazette/cluster" */
	size_t root_len;
	bool shards; /* a consumer application's keyspace */
};

static void value_free(void *arg, void *p)
{
	struct gaz_ks_value *v = p;

	(void)arg;
	if (!v)
		return;
	free(v->item);
	free(v->zone);
	free(v->suffix);
	if (v->spec)
		protobuf_c_message_free_unpacked(&v->spec->base, NULL);
	if (v->broker)
		protobuf_c_message_free_unpacked(&v->broker->base, NULL);
	if (v->route)
		protobuf_c_message_free_unpacked(&v->route->base, NULL);
	if (v->shard)
		protobuf_c_message_free_unpacked(&v->shard->base, NULL);
	if (v->consumer)
		protobuf_c_message_free_unpacked(&v->consumer->base, NULL);
	if (v->status)
		protobuf_c_message_free_unpacked(&v->status->base, NULL);
	free(v);
}

/* Splits `s` at '#' into at most `max` parts (copies). Returns the count. */
static int split_hash(const char *s, char **parts, int max)
{
	int n = 0;

	while (n < max) {
		const char *h = strchr(s, '#');
		size_t len = h ? (size_t)(h - s) : strlen(s);
		parts[n++] = strndup(s, len);
		if (!h)
			return n;
		s = h + 1;
	}
	return n + 1; /* too many parts */
}

/* A consumer application's item: a ShardSpec valid as Gazette's, of the
 * key's id. */
static struct gaz_ks_value *decode_shard(const char *id, const uint8_t *val, size_t len,
					 struct gaz_status *st)
{
	struct gaz_ks_value *v;
	Consumer__ShardSpec *spec = consumer__shard_spec__unpack(NULL, len, val);

	if (!spec) {
		gaz_status_set(st, GAZ_EINVAL, "ShardSpec does not unpack");
		return NULL;
	}
	if (gaz_validate_shard_spec(spec, st) || strcmp(spec->id ? spec->id : "", id)) {
		if (st && !st->code)
			gaz_status_set(st, GAZ_EINVAL, "ShardSpec id %s != key", spec->id ? spec->id : "");
		protobuf_c_message_free_unpacked(&spec->base, NULL);
		return NULL;
	}
	v = calloc(1, sizeof(*v));
	if (v) {
		v->kind = GAZ_KS_ITEM;
		v->shard = spec;
		if (!(v->item = strdup(id))) {
			protobuf_c_message_free_unpacked(&spec->base, NULL);
			free(v);
			v = NULL;
		}
	} else {
		protobuf_c_message_free_unpacked(&spec->base, NULL);
	}
	return v;
}

static struct gaz_ks_value *decode_item(const char *name, const uint8_t *val, size_t len, bool shards,
					struct gaz_status *st)
{
	struct gaz_ks_value *v;
	Protocol__JournalSpec *spec;

	if (strchr(name, '#')) {
		gaz_status_set(st, GAZ_EINVAL, "item key contains '#'");
		return NULL;
	}
	if (shards)
		return decode_shard(name, val, len, st);
	spec = protocol__journal_spec__unpack(NULL, len, val);
	if (!spec) {
		gaz_status_set(st, GAZ_EINVAL, "JournalSpec does not unpack");
		return NULL;
	}
	if (gaz_validate_journal_spec(spec, st) || strcmp(spec->name, name)) {
		gaz_status_set(st, GAZ_EINVAL, "JournalSpec name %s != key", spec->name);
		protobuf_c_message_free_unpacked(&spec->base, NULL);
		return NULL;
	}
	v = calloc(1, sizeof(*v));
	if (v) {
		v->kind = GAZ_KS_ITEM;
		v->spec = spec;
		v->item = strdup(name);
	}
	return v;
}

/* A consumer application's member: a ConsumerSpec of the key's process
 * id, with a valid ProcessSpec (Gazette's ConsumerSpec.Validate; its shard
 * limit takes any value). Takes p[0], p[1] on success. */
static struct gaz_ks_value *decode_consumer(char **p, const uint8_t *val, size_t len, struct gaz_status *st)
{
	Consumer__ConsumerSpec *c = consumer__consumer_spec__unpack(NULL, len, val);
	struct gaz_ks_value *v = NULL;
	const Protocol__ProcessSpec__ID *id = c && c->process_spec ? c->process_spec->id : NULL;

	if (!c || !id || gaz_validate_process_spec(c->process_spec, st) || strcmp(id->zone, p[0]) ||
	    strcmp(id->suffix, p[1])) {
		gaz_status_set(st, GAZ_EINVAL, "ConsumerSpec invalid or not of its key");
		goto out;
	}
	if (!(v = calloc(1, sizeof(*v))))
		goto out;
	v->kind = GAZ_KS_MEMBER;
	v->zone = p[0];
	v->suffix = p[1];
	v->consumer = c;
	v->item_limit = c->shard_limit;
	v->exiting = c->exiting;
	return v;
out:
	if (c)
		protobuf_c_message_free_unpacked(&c->base, NULL);
	return NULL;
}

static struct gaz_ks_value *decode_member(const char *rest, const uint8_t *val, size_t len, bool shards,
					  struct gaz_status *st)
{
	char *p[3] = {0};
	int n = split_hash(rest, p, 2);
	struct gaz_ks_value *v = NULL;
	Protocol__BrokerSpec *b = NULL;

	if (n != 2) {
		gaz_status_set(st, GAZ_EINVAL, "member key needs zone#suffix");
		goto out;
	}
	if (shards) {
		if ((v = decode_consumer(p, val, len, st)))
			return v;
		goto out;
	}
	b = protocol__broker_spec__unpack(NULL, len, val);
	if (!b || !b->process_spec || !b->process_spec->id ||
	    gaz_validate_broker_spec(b, st) || strcmp(b->process_spec->id->zone, p[0]) ||
	    strcmp(b->process_spec->id->suffix, p[1])) {
		gaz_status_set(st, GAZ_EINVAL, "BrokerSpec invalid or not of its key");
		goto out;
	}
	v = calloc(1, sizeof(*v));
	if (!v)
		goto out;
	v->kind = GAZ_KS_MEMBER;
	v->zone = p[0];
	v->suffix = p[1];
	v->broker = b;
	v->item_limit = b->journal_limit;
	v->exiting = b->exiting;
	return v;
out:
	if (b)
		protobuf_c_message_free_unpacked(&b->base, NULL);
	for (int i = 0; i < 3; i++)
		free(p[i]);
	return NULL;
}

static struct gaz_ks_value *decode_assign(const char *rest, const uint8_t *val, size_t len, bool shards,
					  struct gaz_status *st)
{
	char *p[5] = {0}, *end = NULL;
	int n = split_hash(rest, p, 4);
	struct gaz_ks_value *v = NULL;
	Protocol__Route *r = NULL;
	Consumer__ReplicaStatus *rs = NULL;
	long long slot = 0;

	if (n == 4)
		slot = strtoll(p[3], &end, 10);
	if (n != 4 || !*p[3] || *end || slot < 0) {
		gaz_status_set(st, GAZ_EINVAL, "assignment key needs journal#zone#suffix#slot");
		goto out;
	}
	if (shards) {
		/* Gazette's ReplicaStatus.Validate (an empty value is IDLE). */
		rs = consumer__replica_status__unpack(NULL, len, val);
		if (!rs || gaz_validate_replica_status(rs, st)) {
			gaz_status_set(st, GAZ_EINVAL, "assignment ReplicaStatus invalid");
			goto out;
		}
	} else if (len) {
		r = protocol__route__unpack(NULL, len, val);
		if (!r || gaz_validate_route(r, st)) {
			gaz_status_set(st, GAZ_EINVAL, "assignment Route invalid");
			goto out;
		}
	}
	v = calloc(1, sizeof(*v));
	if (!v)
		goto out;
	v->kind = GAZ_KS_ASSIGN;
	v->item = p[0];
	v->zone = p[1];
	v->suffix = p[2];
	v->slot = slot;
	v->route = r;
	v->status = rs;
	free(p[3]);
	return v;
out:
	if (r)
		protobuf_c_message_free_unpacked(&r->base, NULL);
	if (rs)
		protobuf_c_message_free_unpacked(&rs->base, NULL);
	for (int i = 0; i < 5; i++)
		free(p[i]);
	return NULL;
}

static void *decode(void *arg, const char *key, const uint8_t *val, size_t len,
		    struct gaz_status *st)
{
	struct journals_ctx *c = arg;
	const char *rest = key + c->root_len;

	if (strncmp(key, c->root, c->root_len) || *rest != '/') {
		gaz_status_set(st, GAZ_EINVAL, "key outside the root");
		return NULL;
	}
	if (!strncmp(rest, "/items/", 7))
		return decode_item(rest + 7, val, len, c->shards, st);
	if (!strncmp(rest, "/members/", 9))
		return decode_member(rest + 9, val, len, c->shards, st);
	if (!strncmp(rest, "/assign/", 8))
		return decode_assign(rest + 8, val, len, c->shards, st);
	gaz_status_set(st, GAZ_EINVAL, "unknown key kind");
	return NULL;
}

static void ctx_free(void *arg)
{
	struct journals_ctx *c = arg;

	free(c->root);
	free(c);
}

static struct gaz_keyspace *keyspace_new(struct gaz_etcd *etcd, const char *root, bool shards)
{
	struct journals_ctx *c = calloc(1, sizeof(*c));
	char *prefix = NULL;
	struct gaz_keyspace *ks = NULL;

	if (!c || !(c->root = strdup(root)) || asprintf(&prefix, "%s/", root) < 0) {
		if (c)
			free(c->root);
		free(c);
		return NULL;
	}
	c->root_len = strlen(root);
	c->shards = shards;
	ks = gaz_keyspace_new(etcd, prefix, decode, value_free, c);
	free(prefix);
	if (!ks) {
		ctx_free(c);
		return NULL;
	}
	gaz_keyspace_set_cleanup(ks, ctx_free);
	return ks;
}

struct gaz_keyspace *gaz_journals_keyspace_new(struct gaz_etcd *etcd, const char *root)
{
	return keyspace_new(etcd, root, false);
}

struct gaz_keyspace *gaz_shards_keyspace_new(struct gaz_etcd *etcd, const char *root)
{
	return keyspace_new(etcd, root, true);
}

const ProtobufCMessage *gaz_ks_assign_value(const struct gaz_ks_value *v)
{
	return v->status ? &v->status->base : v->route ? &v->route->base : NULL;
}

/* The keys of items and members (root, journal; root, zone, suffix). */
#define ITEM_KEY "%s/items/%s"
#define MEMBER_KEY "%s/members/%s#%s"

char *gaz_ks_item_key(const char *root, const char *journal)
{
	char *k = NULL;
	return asprintf(&k, ITEM_KEY, root, journal) < 0 ? NULL : k;
}

char *gaz_ks_member_key(const char *root, const char *zone, const char *suffix)
{
	char *k = NULL;
	return asprintf(&k, MEMBER_KEY, root, zone, suffix) < 0 ? NULL : k;
}

char *gaz_ks_assign_key(const char *root, const char *journal, const char *zone,
			const char *suffix, int64_t slot)
{
	char *k = NULL;
	return asprintf(&k, "%s/assign/%s#%s#%s#%lld", root, journal, zone, suffix,
			(long long)slot) < 0 ? NULL : k;
}

/* The endpoint a member (a broker or a consumer) serves at. */
static const char *member_endpoint(const struct gaz_ks_value *v)
{
	const Protocol__ProcessSpec *ps = v->broker ? v->broker->process_spec
					: v->consumer ? v->consumer->process_spec : NULL;
	return ps && ps->endpoint ? ps->endpoint : "";
}

/* get_key looks up the key `fmt` makes, formatted on the stack when it
 * fits (most do: this runs for every member of every route a resolve or a
 * pulse builds), else on the heap. NULL when absent or out of memory. */
__attribute__((format(printf, 2, 3))) static const struct gaz_ks_entry *
get_key(struct gaz_keyspace *ks, const char *fmt, ...)
{
	char buf[384], *k = buf;
	const struct gaz_ks_entry *e;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	if ((size_t)n >= sizeof(buf)) {
		if (!(k = malloc((size_t)n + 1)))
			return NULL;
		va_start(ap, fmt);
		vsnprintf(k, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	e = gaz_keyspace_get(ks, k);
	if (k != buf)
		free(k);
	return e;
}

const struct gaz_ks_entry *gaz_ks_item(struct gaz_keyspace *ks, const char *root,
				       const char *journal)
{
	return get_key(ks, ITEM_KEY, root, journal);
}

const struct gaz_ks_entry *gaz_ks_member(struct gaz_keyspace *ks, const char *root,
					 const char *zone, const char *suffix)
{
	return get_key(ks, MEMBER_KEY, root, zone, suffix);
}

void gaz_route_release(struct gaz_route *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->zone[i]);
		free(r->suffix[i]);
		free(r->endpoint[i]);
	}
	free(r->zone);
	free(r->suffix);
	free(r->endpoint);
	free(r->slot);
	free(r->mod_revision);
	free(r->consistent);
	memset(r, 0, sizeof(*r));
	r->primary = -1;
}

static int route_alloc(struct gaz_route *r, size_t n)
{
	memset(r, 0, sizeof(*r));
	r->primary = -1;
	if (!n)
		return 0;
	r->zone = calloc(n, sizeof(char *));
	r->suffix = calloc(n, sizeof(char *));
	r->endpoint = calloc(n, sizeof(char *));
	r->slot = calloc(n, sizeof(int64_t));
	r->mod_revision = calloc(n, sizeof(int64_t));
	r->consistent = calloc(n, sizeof(bool));
	if (!r->zone || !r->suffix || !r->endpoint || !r->slot || !r->mod_revision ||
	    !r->consistent) {
		gaz_route_release(r);
		return GAZ_ENOMEM;
	}
	return 0;
}

int gaz_route_build(struct gaz_keyspace *ks, const char *root, const char *journal,
		    struct gaz_route *r)
{
	char *prefix = NULL;
	size_t b, e;

	if (asprintf(&prefix, "%s/assign/%s#", root, journal) < 0)
		return GAZ_ENOMEM;
	gaz_keyspace_prefix(ks, prefix, &b, &e);
	free(prefix);
	if (route_alloc(r, e - b))
		return GAZ_ENOMEM;
	for (size_t i = b; i < e; i++) {
		const struct gaz_ks_value *v = gaz_keyspace_at(ks, i)->decoded;
		const struct gaz_ks_entry *m = gaz_ks_member(ks, root, v->zone, v->suffix);
		const char *ep = m ? member_endpoint(m->decoded)
				   : "";
		size_t j = r->n++;
		r->zone[j] = strdup(v->zone);
		r->suffix[j] = strdup(v->suffix);
		r->endpoint[j] = strdup(ep ? ep : "");
		r->slot[j] = v->slot;
		r->mod_revision[j] = gaz_keyspace_at(ks, i)->mod_revision;
		if (v->slot == 0)
			r->primary = (int)j;
		if (!r->zone[j] || !r->suffix[j] || !r->endpoint[j]) {
			gaz_route_release(r);
			return GAZ_ENOMEM;
		}
	}
	for (size_t i = b; i < e; i++) {
		const struct gaz_ks_value *v = gaz_keyspace_at(ks, i)->decoded;
		r->consistent[i - b] = v->route && gaz_proto_route_equivalent(v->route, r);
	}
	return 0;
}

int gaz_route_index(const struct gaz_route *r, const char *zone, const char *suffix)
{
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->zone[i], zone) && !strcmp(r->suffix[i], suffix))
			return (int)i;
	return -1;
}

bool gaz_route_equivalent(const struct gaz_route *a, const struct gaz_route *b)
{
	if (a->n != b->n || a->primary != b->primary)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->zone[i], b->zone[i]) || strcmp(a->suffix[i], b->suffix[i]))
			return false;
	return true;
}

bool gaz_proto_route_equivalent(const Protocol__Route *p, const struct gaz_route *r)
{
	if (p->n_members != r->n || p->primary != r->primary)
		return false;
	for (size_t i = 0; i < r->n; i++)
		if (strcmp(p->members[i]->zone, r->zone[i]) ||
		    strcmp(p->members[i]->suffix, r->suffix[i]))
			return false;
	return true;
}

Protocol__Route *gaz_route_to_proto(const struct gaz_route *r, bool with_endpoints)
{
	Protocol__Route *p = calloc(1, sizeof(*p));
	Protocol__ProcessSpec__ID *ids = NULL;

	if (!p)
		return NULL;
	protocol__route__init(p);
	p->primary = r->primary;
	if (!r->n)
		return p;
	p->members = calloc(r->n, sizeof(*p->members));
	ids = calloc(r->n, sizeof(*ids));
	if (with_endpoints)
		p->endpoints = calloc(r->n, sizeof(char *));
	if (!p->members || !ids || (with_endpoints && !p->endpoints)) {
		free(ids);
		gaz_route_proto_free(p);
		return NULL;
	}
	for (size_t i = 0; i < r->n; i++) {
		protocol__process_spec__id__init(&ids[i]);
		ids[i].zone = r->zone[i];
		ids[i].suffix = r->suffix[i];
		p->members[i] = &ids[i];
		if (with_endpoints)
			p->endpoints[i] = r->endpoint[i];
	}
	p->n_members = r->n;
	p->n_endpoints = with_endpoints ? r->n : 0;
	return p;
}

void gaz_route_proto_free(Protocol__Route *p)
{
	if (!p)
		return;
	if (p->members)
		free(p->members[0]);
	free(p->members);
	free(p->endpoints);
	free(p);
}

ProtobufCMessage *gaz_pb_copy(const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = malloc(n ? n : 1);
	ProtobufCMessage *c;

	if (!buf)
		return NULL;
	protobuf_c_message_pack(m, buf);
	c = protobuf_c_message_unpack(m->descriptor, NULL, n, buf);
	free(buf);
	return c;
}

Protocol__JournalSpec *gaz_ks_spec_copy(struct gaz_keyspace *ks, const char *root,
					const char *journal)
{
	const struct gaz_ks_entry *e;
	Protocol__JournalSpec *s = NULL;

	gaz_keyspace_rlock(ks);
	if ((e = gaz_ks_item(ks, root, journal)))
		s = (Protocol__JournalSpec *)gaz_pb_copy(&((struct gaz_ks_value *)e->decoded)->spec->base);
	gaz_keyspace_runlock(ks);
	return s;
}

const char *gaz_ks_key_journal(const char *root, size_t root_len, const char *key, size_t *len)
{
	const char *rest = key + root_len, *h;

	if (strncmp(key, root, root_len))
		return NULL;
	if (!strncmp(rest, "/items/", 7)) {
		*len = strlen(rest + 7);
		return rest + 7;
	}
	if (!strncmp(rest, "/assign/", 8) && (h = strchr(rest + 8, '#'))) {
		*len = (size_t)(h - (rest + 8));
		return rest + 8;
	}
	return NULL;
}

int gaz_ks_note_journal(struct gaz_strset *set, const char *root, size_t root_len, const char *key)
{
	char buf[512];
	size_t len;
	const char *j = gaz_ks_key_journal(root, root_len, key, &len);

	if (!j)
		return 0;
	if (len >= sizeof(buf))
		return -1;
	memcpy(buf, j, len);
	buf[len] = 0;
	return gaz_strset_add(set, buf) < 0 ? -1 : 1;
}

struct header_alloc {
	Protocol__Header h; /* first: gaz_header_free frees through it */
	Protocol__ProcessSpec__ID pid;
	Protocol__Header__Etcd etcd;
};

Protocol__Header *gaz_header_new(const struct gaz_etcd_header *eh, const char *zone, const char *suffix,
				 const struct gaz_route *r)
{
	struct header_alloc *a = calloc(1, sizeof(*a));
	struct gaz_route none = {.primary = -1};

	if (!a)
		return NULL;
	protocol__header__init(&a->h);
	protocol__process_spec__id__init(&a->pid);
	protocol__header__etcd__init(&a->etcd);
	a->etcd.cluster_id = eh->cluster_id;
	a->etcd.member_id = eh->member_id;
	a->etcd.revision = eh->revision;
	a->etcd.raft_term = eh->raft_term;
	a->h.etcd = &a->etcd;
	a->h.process_id = &a->pid;
	if (zone && suffix) {
		a->pid.zone = (char *)zone;
		a->pid.suffix = (char *)suffix;
	}
	a->h.route = gaz_route_to_proto(r ? r : &none, r != NULL);
	if (!a->h.route) {
		free(a);
		return NULL;
	}
	return &a->h;
}

void gaz_header_free(Protocol__Header *h)
{
	if (!h)
		return;
	gaz_route_proto_free(h->route);
	free(h);
}
