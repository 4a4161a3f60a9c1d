/*
 * shardspec_yaml.c - Gazette's shardspace.Set as YAML (gazette/
 * shardspec_yaml.h): keyword tables for the strict reader, the set algebra
 * of consumer/protocol (UnionShardSpecs, IntersectShardSpecs,
 * SubtractShardSpecs) on protobuf-c ShardSpecs, PushDown, Hoist, and the
 * writer, over yaml_util.c.
 *
 * Memory: every spec handled here is heap-owned in protobuf-c's unpacked
 * form (each string, source, label, duration malloc'd or the static
 * protobuf_c_empty_string), so consumer__shard_spec__free_unpacked frees
 * it. While parsing, string fields start NULL (yaml_util replaces them);
 * finish_spec turns remaining NULLs into the empty string before a spec
 * is handed out. Must not call: anything doing I/O or RPC.
 */
#include "gazette/shardspec_yaml.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "google/protobuf/duration.pb-c.h"
#include "gazette/duration.h"
#include "protocol/labels.h"
#include "yaml_util.h"

#define NKEYS(t) (sizeof(t) / sizeof((t)[0]))

/* ---- strings, durations, sources, labels of a heap spec ------------------------ */

static const char *str_of(const char *s)
{
	return s ? s : "";
}

static void str_free(char *s)
{
	if (s && s != protobuf_c_empty_string)
		free(s);
}

/* str_set replaces *dst with a copy of src (NULL or "" -> empty). */
static int str_set(char **dst, const char *src)
{
	char *d = (char *)protobuf_c_empty_string;

	if (src && *src && !(d = strdup(src)))
		return GAZ_ENOMEM;
	str_free(*dst);
	*dst = d;
	return 0;
}

static int64_t dur_ns(const Google__Protobuf__Duration *d)
{
	return d ? d->seconds * 1000000000LL + d->nanos : 0;
}

/* dur_set replaces *dst with a duration of ns (0: none). */
static int dur_set(Google__Protobuf__Duration **dst, int64_t ns)
{
	Google__Protobuf__Duration *d = NULL;

	if (ns && !(d = malloc(sizeof(*d))))
		return GAZ_ENOMEM;
	if (d) {
		google__protobuf__duration__init(d);
		gaz_duration_set_pb(d, ns);
	}
	if (*dst)
		google__protobuf__duration__free_unpacked(*dst, NULL);
	*dst = d;
	return 0;
}

static void sources_clear(Consumer__ShardSpec *s)
{
	for (size_t i = 0; i < s->n_sources; i++)
		protobuf_c_message_free_unpacked(&s->sources[i]->base, NULL);
	free(s->sources);
	s->sources = NULL;
	s->n_sources = 0;
}

static int sources_eq(const Consumer__ShardSpec *a, const Consumer__ShardSpec *b)
{
	if (a->n_sources != b->n_sources)
		return 0;
	for (size_t i = 0; i < a->n_sources; i++)
		if (strcmp(str_of(a->sources[i]->journal), str_of(b->sources[i]->journal)) ||
		    a->sources[i]->min_offset != b->sources[i]->min_offset)
			return 0;
	return 1;
}

/* sources_copy replaces a's sources with copies of b's. */
static int sources_copy(Consumer__ShardSpec *a, const Consumer__ShardSpec *b)
{
	Consumer__ShardSpec tmp = CONSUMER__SHARD_SPEC__INIT;

	if (b->n_sources && !(tmp.sources = calloc(b->n_sources, sizeof(*tmp.sources))))
		return GAZ_ENOMEM;
	for (; tmp.n_sources < b->n_sources; tmp.n_sources++) {
		Consumer__ShardSpec__Source *src = malloc(sizeof(*src));

		if (!src)
			goto oom;
		consumer__shard_spec__source__init(src);
		tmp.sources[tmp.n_sources] = src;
		if (str_set(&src->journal, b->sources[tmp.n_sources]->journal)) {
			tmp.n_sources++;
			goto oom;
		}
		src->min_offset = b->sources[tmp.n_sources]->min_offset;
	}
	sources_clear(a);
	a->sources = tmp.sources;
	a->n_sources = tmp.n_sources;
	return 0;
oom:
	sources_clear(&tmp);
	return GAZ_ENOMEM;
}

/* labels_put installs the labels of `set` (built by the labels.h helpers,
 * taken over) as a's label set. */
static int labels_put(Consumer__ShardSpec *a, Protocol__LabelSet *set)
{
	Protocol__LabelSet *heap = malloc(sizeof(*heap));

	if (!heap) {
		gaz_labelset_release(set);
		return GAZ_ENOMEM;
	}
	*heap = *set;
	if (a->labels)
		protocol__label_set__free_unpacked(a->labels, NULL);
	a->labels = heap;
	return 0;
}

enum label_op { L_UNION, L_INTERSECT, L_SUBTRACT };

/* labels_op sets a's labels to union(a, b), intersect(a, b) (names whose
 * value lists are identical: a - (a - b)) or subtract(a, b). */
static int labels_op(Consumer__ShardSpec *a, const Consumer__ShardSpec *b, enum label_op op)
{
	Protocol__LabelSet out = PROTOCOL__LABEL_SET__INIT, diff = PROTOCOL__LABEL_SET__INIT;
	int rc;

	if (op == L_UNION)
		rc = gaz_labelset_union(&out, a->labels, b->labels);
	else if (op == L_SUBTRACT)
		rc = gaz_labelset_subtract(&out, a->labels, b->labels);
	else if (!(rc = gaz_labelset_subtract(&diff, a->labels, b->labels)))
		rc = gaz_labelset_subtract(&out, a->labels, &diff);
	gaz_labelset_release(&diff);
	if (rc) {
		gaz_labelset_release(&out);
		return rc;
	}
	return labels_put(a, &out);
}

/* ---- the set algebra of consumer/protocol ------------------------------------------ */

/* spec_union: each zero field of a takes b's value (not the id); labels
 * unioned, a's values winning (UnionShardSpecs). */
static int spec_union(Consumer__ShardSpec *a, const Consumer__ShardSpec *b)
{
	int rc = 0;

	if (!a->n_sources)
		rc |= sources_copy(a, b);
	if (!*str_of(a->recovery_log_prefix))
		rc |= str_set(&a->recovery_log_prefix, b->recovery_log_prefix);
	if (!*str_of(a->hint_prefix))
		rc |= str_set(&a->hint_prefix, b->hint_prefix);
	if (!a->hint_backups)
		a->hint_backups = b->hint_backups;
	if (!dur_ns(a->max_txn_duration))
		rc |= dur_set(&a->max_txn_duration, dur_ns(b->max_txn_duration));
	if (!dur_ns(a->min_txn_duration))
		rc |= dur_set(&a->min_txn_duration, dur_ns(b->min_txn_duration));
	a->disable = a->disable || b->disable;
	if (!a->hot_standbys)
		a->hot_standbys = b->hot_standbys;
	rc |= labels_op(a, b, L_UNION);
	a->disable_wait_for_ack = a->disable_wait_for_ack || b->disable_wait_for_ack;
	if (!a->ring_buffer_size)
		a->ring_buffer_size = b->ring_buffer_size;
	if (!a->read_channel_size)
		a->read_channel_size = b->read_channel_size;
	return rc ? GAZ_ENOMEM : 0;
}

/* spec_keep zeroes each field of a that differs from b (keep_equal) or
 * that equals b's (!keep_equal): IntersectShardSpecs / SubtractShardSpecs. */
static int spec_keep(Consumer__ShardSpec *a, const Consumer__ShardSpec *b, int keep_equal)
{
	int rc = 0;

#define ZERO_IF(eq) (keep_equal ? !(eq) : (eq))
	if (ZERO_IF(sources_eq(a, b)))
		sources_clear(a);
	if (ZERO_IF(!strcmp(str_of(a->recovery_log_prefix), str_of(b->recovery_log_prefix))))
		rc |= str_set(&a->recovery_log_prefix, NULL);
	if (ZERO_IF(!strcmp(str_of(a->hint_prefix), str_of(b->hint_prefix))))
		rc |= str_set(&a->hint_prefix, NULL);
	if (ZERO_IF(a->hint_backups == b->hint_backups))
		a->hint_backups = 0;
	if (ZERO_IF(dur_ns(a->max_txn_duration) == dur_ns(b->max_txn_duration)))
		rc |= dur_set(&a->max_txn_duration, 0);
	if (ZERO_IF(dur_ns(a->min_txn_duration) == dur_ns(b->min_txn_duration)))
		rc |= dur_set(&a->min_txn_duration, 0);
	if (ZERO_IF(!a->disable == !b->disable))
		a->disable = 0;
	if (ZERO_IF(a->hot_standbys == b->hot_standbys))
		a->hot_standbys = 0;
	rc |= labels_op(a, b, keep_equal ? L_INTERSECT : L_SUBTRACT);
	if (ZERO_IF(!a->disable_wait_for_ack == !b->disable_wait_for_ack))
		a->disable_wait_for_ack = 0;
	if (ZERO_IF(a->ring_buffer_size == b->ring_buffer_size))
		a->ring_buffer_size = 0;
	if (ZERO_IF(a->read_channel_size == b->read_channel_size))
		a->read_channel_size = 0;
#undef ZERO_IF
	return rc ? GAZ_ENOMEM : 0;
}

/* spec_dup: a heap deep copy of s (through its wire form). */
static Consumer__ShardSpec *spec_dup(const Consumer__ShardSpec *s)
{
	size_t n = consumer__shard_spec__get_packed_size(s);
	uint8_t *buf = malloc(n ? n : 1);
	Consumer__ShardSpec *d = NULL;

	if (buf) {
		consumer__shard_spec__pack(s, buf);
		d = consumer__shard_spec__unpack(NULL, n, buf);
		free(buf);
	}
	return d;
}

/* spec_fields_free frees what a spec owns (not the struct itself) and
 * re-initializes it with NULL strings. */
static void spec_fields_free(Consumer__ShardSpec *s)
{
	str_free(s->id);
	str_free(s->recovery_log_prefix);
	str_free(s->hint_prefix);
	sources_clear(s);
	dur_set(&s->max_txn_duration, 0);
	dur_set(&s->min_txn_duration, 0);
	if (s->labels)
		protocol__label_set__free_unpacked(s->labels, NULL);
	consumer__shard_spec__init(s);
	s->id = s->recovery_log_prefix = s->hint_prefix = NULL;
}

/* finish_spec gives NULL strings the empty string, as unpacked specs have. */
static void finish_spec(Consumer__ShardSpec *s)
{
	char **strs[] = {&s->id, &s->recovery_log_prefix, &s->hint_prefix};

	for (size_t i = 0; i < NKEYS(strs); i++)
		if (!*strs[i])
			*strs[i] = (char *)protobuf_c_empty_string;
	for (size_t i = 0; i < s->n_sources; i++)
		if (!s->sources[i]->journal)
			s->sources[i]->journal = (char *)protobuf_c_empty_string;
}

/* ---- reading ------------------------------------------------------------------------ */

enum kind {
	K_IGNORE, K_STR, K_I32, K_U32, K_I64, K_BOOL, K_DUR, K_SOURCES, K_LABELS, K_DELETE,
	K_COMMON, K_SHARDS,
};

/* One shard (or `common:`) as read: the spec by value (strings NULL until
 * set) and the tool keys. */
struct rshard {
	Consumer__ShardSpec spec;
	int del;          /* -1 unset, 0 false, 1 true */
	int64_t revision; /* etcd ModRevision */
};

/* The whole set as read. */
struct rset {
	struct rshard common;
	struct rshard *shards;
	size_t n_shards;
};

#define SPEC_OFF(f) (offsetof(struct rshard, spec) + offsetof(Consumer__ShardSpec, f))
#define SPEC_KEYS                                                                  \
	{"id", K_STR, SPEC_OFF(id)},                                               \
	{"sources", K_SOURCES, SPEC_OFF(base)},                                    \
	{"recovery_log_prefix", K_STR, SPEC_OFF(recovery_log_prefix)},             \
	{"hint_prefix", K_STR, SPEC_OFF(hint_prefix)},                             \
	{"hint_backups", K_I32, SPEC_OFF(hint_backups)},                           \
	{"max_txn_duration", K_DUR, SPEC_OFF(max_txn_duration)},                   \
	{"min_txn_duration", K_DUR, SPEC_OFF(min_txn_duration)},                   \
	{"disable", K_BOOL, SPEC_OFF(disable)},                                    \
	{"hot_standbys", K_U32, SPEC_OFF(hot_standbys)},                           \
	{"labels", K_LABELS, SPEC_OFF(base)},                                      \
	{"disable_wait_for_ack", K_BOOL, SPEC_OFF(disable_wait_for_ack)},          \
	{"ring_buffer_size", K_U32, SPEC_OFF(ring_buffer_size)},                   \
	{"read_channel_size", K_U32, SPEC_OFF(read_channel_size)}

/* `common:` takes a ShardSpec; a shard also its tool keys. */
static const struct gaz__yaml_key common_keys[] = {SPEC_KEYS};
static const struct gaz__yaml_key shard_keys[] = {
	{"comment", K_IGNORE, 0},
	{"delete", K_DELETE, offsetof(struct rshard, del)},
	SPEC_KEYS,
	{"revision", K_I64, offsetof(struct rshard, revision)},
};

static const struct gaz__yaml_key source_keys[] = {
	{"journal", K_STR, offsetof(Consumer__ShardSpec__Source, journal)},
	{"min_offset", K_I64, offsetof(Consumer__ShardSpec__Source, min_offset)},
};

static const struct gaz__yaml_key label_keys[] = {
	{"name", K_STR, offsetof(Protocol__Label, name)},
	{"value", K_STR, offsetof(Protocol__Label, value)},
	{"prefix", K_BOOL, offsetof(Protocol__Label, prefix)},
};

static const struct gaz__yaml_key top_keys[] = {
	{"common", K_COMMON, offsetof(struct rset, common)},
	{"shards", K_SHARDS, 0},
};

static int set_field(struct gaz__yaml_in *c, const struct gaz__yaml_key *k, const yaml_node_t *y,
		     void *dst);

static void rshard_init(struct rshard *r)
{
	memset(r, 0, sizeof(*r));
	consumer__shard_spec__init(&r->spec);
	r->spec.id = r->spec.recovery_log_prefix = r->spec.hint_prefix = NULL;
	r->del = -1;
}

static int read_sources(struct gaz__yaml_in *c, const yaml_node_t *y, Consumer__ShardSpec *s)
{
	size_t n;
	int rc;

	if ((rc = gaz__yaml_seq(c, y, "sources", &n)) || !n)
		return rc;
	sources_clear(s);
	if (!(s->sources = calloc(n, sizeof(*s->sources))))
		return gaz__yaml_oom(c);
	while (s->n_sources < n) {
		const yaml_node_t *it = gaz__yaml_node(c, y->data.sequence.items.start[s->n_sources]);
		Consumer__ShardSpec__Source *src = malloc(sizeof(*src));

		if (!src)
			return gaz__yaml_oom(c);
		consumer__shard_spec__source__init(src);
		src->journal = NULL;
		s->sources[s->n_sources++] = src; /* counted: freed on error */
		if ((rc = gaz__yaml_map(c, it, source_keys, NKEYS(source_keys), src, "source",
					set_field)))
			return rc;
	}
	return 0;
}

/* read_label reads one {name, value, prefix} into a heap label. */
static int read_label(struct gaz__yaml_in *c, const yaml_node_t *y, Protocol__Label **out)
{
	Protocol__Label *l = malloc(sizeof(*l));
	int rc;

	if (!l)
		return gaz__yaml_oom(c);
	protocol__label__init(l);
	l->name = l->value = NULL;
	rc = gaz__yaml_map(c, y, label_keys, NKEYS(label_keys), l, "label", set_field);
	if (!rc && ((!l->name && !(l->name = strdup(""))) || (!l->value && !(l->value = strdup("")))))
		rc = gaz__yaml_oom(c);
	if (rc) {
		free(l->name);
		free(l->value);
		free(l);
		return rc;
	}
	*out = l;
	return 0;
}

/* Labels are taken in document order (Validate checks their order). */
static int read_labels(struct gaz__yaml_in *c, const yaml_node_t *y, Consumer__ShardSpec *s)
{
	Protocol__LabelSet set = PROTOCOL__LABEL_SET__INIT;
	size_t n;
	int rc;

	if ((rc = gaz__yaml_seq(c, y, "labels", &n)) || !n)
		return rc;
	if (!(set.labels = calloc(n, sizeof(*set.labels))))
		return gaz__yaml_oom(c);
	for (; set.n_labels < n; set.n_labels++) {
		const yaml_node_t *it = gaz__yaml_node(c, y->data.sequence.items.start[set.n_labels]);

		if ((rc = read_label(c, it, &set.labels[set.n_labels]))) {
			gaz_labelset_release(&set);
			return rc;
		}
	}
	return labels_put(s, &set) ? gaz__yaml_oom(c) : 0;
}

/* read_shards reads the `shards:` list into set->shards. */
static int read_shards(struct gaz__yaml_in *c, const yaml_node_t *y, struct rset *set)
{
	size_t n;
	int rc;

	if ((rc = gaz__yaml_seq(c, y, "shards", &n)) || !n)
		return rc;
	if (!(set->shards = calloc(n, sizeof(*set->shards))))
		return gaz__yaml_oom(c);
	while (set->n_shards < n) {
		const yaml_node_t *it = gaz__yaml_node(c, y->data.sequence.items.start[set->n_shards]);
		struct rshard *r = &set->shards[set->n_shards++];

		rshard_init(r);
		if ((rc = gaz__yaml_map(c, it, shard_keys, NKEYS(shard_keys), r, "shard",
					set_field)))
			return rc;
	}
	return 0;
}

static int set_number(struct gaz__yaml_in *c, const struct gaz__yaml_key *k, const yaml_node_t *y,
		      void *dst)
{
	long long v = 0;
	int rc;

	switch (k->kind) {
	case K_I32:
		rc = gaz__yaml_int(c, y, k->name, INT32_MIN, INT32_MAX, &v);
		*(int32_t *)dst = (int32_t)v;
		return rc;
	case K_U32:
		rc = gaz__yaml_int(c, y, k->name, 0, UINT32_MAX, &v);
		*(uint32_t *)dst = (uint32_t)v;
		return rc;
	default: /* K_I64 */
		rc = gaz__yaml_int(c, y, k->name, INT64_MIN, INT64_MAX, &v);
		*(int64_t *)dst = (int64_t)v;
		return rc;
	}
}

static int set_field(struct gaz__yaml_in *c, const struct gaz__yaml_key *k, const yaml_node_t *y,
		     void *dst)
{
	struct gaz__yaml_scalar sc;
	int64_t ns = 0;
	int rc;

	switch (k->kind) {
	case K_IGNORE:
		return gaz__yaml_scalar(c, y, k->name, &sc);
	case K_STR:
		return gaz__yaml_str(c, y, k->name, dst);
	case K_BOOL:
		return gaz__yaml_bool(c, y, k->name, dst);
	case K_DELETE:
		*(int *)dst = 0;
		return gaz__yaml_bool(c, y, k->name, dst);
	case K_DUR:
		if ((rc = gaz__yaml_duration(c, y, k->name, &ns)))
			return rc;
		return dur_set(dst, ns) ? gaz__yaml_oom(c) : 0;
	case K_SOURCES:
		return read_sources(c, y, dst);
	case K_LABELS:
		return read_labels(c, y, dst);
	case K_COMMON:
		if (gaz__yaml_null(y))
			return 0;
		return gaz__yaml_map(c, y, common_keys, NKEYS(common_keys), dst, "common",
				     set_field);
	case K_SHARDS:
		return read_shards(c, y, dst);
	default:
		return set_number(c, k, y, dst);
	}
}

static void rset_release(struct rset *set)
{
	spec_fields_free(&set->common.spec);
	for (size_t i = 0; i < set->n_shards; i++)
		spec_fields_free(&set->shards[i].spec);
	free(set->shards);
}

/* change_of builds the Change of one pushed-down shard, taking its spec. */
static int change_of(struct rshard *r, Consumer__ApplyRequest__Change **out)
{
	Consumer__ApplyRequest__Change *ch = malloc(sizeof(*ch));
	Consumer__ShardSpec *heap = malloc(sizeof(*heap));
	int del;

	if (!ch || !heap) {
		free(ch);
		free(heap);
		return GAZ_ENOMEM;
	}
	consumer__apply_request__change__init(ch);
	finish_spec(&r->spec);
	*heap = r->spec;
	ch->expect_mod_revision = r->revision;
	del = r->del == 1;
	rshard_init(r); /* the heap copy owns the fields now */
	if (del) {
		ch->delete_ = heap->id;
		heap->id = (char *)protobuf_c_empty_string;
		consumer__shard_spec__free_unpacked(heap, NULL);
	} else {
		ch->upsert = heap;
	}
	*out = ch;
	return 0;
}

/* push_down applies common to every shard and builds the request. */
static int push_down(struct rset *set, Consumer__ApplyRequest **out)
{
	Consumer__ApplyRequest *req = malloc(sizeof(*req));
	int rc = 0;

	if (!req)
		return GAZ_ENOMEM;
	consumer__apply_request__init(req);
	if (set->n_shards && !(req->changes = calloc(set->n_shards, sizeof(*req->changes))))
		rc = GAZ_ENOMEM;
	for (size_t i = 0; !rc && i < set->n_shards; i++) {
		if (!(rc = spec_union(&set->shards[i].spec, &set->common.spec)) &&
		    !(rc = change_of(&set->shards[i], &req->changes[req->n_changes])))
			req->n_changes++;
	}
	if (rc) {
		consumer__apply_request__free_unpacked(req, NULL);
		return rc;
	}
	*out = req;
	return 0;
}

int gaz_shardspec_yaml_parse(const char *yaml, size_t len, Consumer__ApplyRequest **out,
			     struct gaz_status *st)
{
	struct gaz__yaml_in c = {.st = st, .what = "shard specs"};
	struct rset set = {0};
	yaml_node_t *top;
	int rc;

	rshard_init(&set.common);
	if ((rc = gaz__yaml_load(&c, yaml, len)))
		return rc;
	top = yaml_document_get_root_node(&c.doc);
	if (top && !gaz__yaml_null(top))
		rc = gaz__yaml_map(&c, top, top_keys, NKEYS(top_keys), &set, NULL, set_field);
	if (!rc && (rc = push_down(&set, out)))
		rc = gaz_status_set(st, rc, "reading shard specs: out of memory");
	rset_release(&set);
	gaz__yaml_unload(&c);
	return rc;
}

void gaz_shardspec_apply_free(Consumer__ApplyRequest *req)
{
	if (req)
		consumer__apply_request__free_unpacked(req, NULL);
}

/* ---- hoisting and writing ------------------------------------------------------------- */

/* A hoisted set: common and each shard's remaining spec (heap copies). */
struct hset {
	Consumer__ShardSpec *common;
	Consumer__ShardSpec **specs;
	const struct gaz_shard_rev *shards;
	size_t n;
};

static void hset_release(struct hset *h)
{
	if (h->common)
		consumer__shard_spec__free_unpacked(h->common, NULL);
	for (size_t i = 0; h->specs && i < h->n; i++)
		if (h->specs[i])
			consumer__shard_spec__free_unpacked(h->specs[i], NULL);
	free(h->specs);
}

/* hoist: common = intersection of every spec (id cleared), each spec less
 * common (shardspace Set.Hoist). */
static int hoist(struct hset *h)
{
	if (h->n && !(h->specs = calloc(h->n, sizeof(*h->specs))))
		return GAZ_ENOMEM;
	for (size_t i = 0; i < h->n; i++) {
		if (!(h->specs[i] = spec_dup(h->shards[i].spec)))
			return GAZ_ENOMEM;
		if (i == 0) {
			if (!(h->common = spec_dup(h->shards[0].spec)) || str_set(&h->common->id, NULL))
				return GAZ_ENOMEM;
		} else if (spec_keep(h->common, h->specs[i], 1)) {
			return GAZ_ENOMEM;
		}
	}
	for (size_t i = 0; i < h->n; i++)
		if (spec_keep(h->specs[i], h->common, 0))
			return GAZ_ENOMEM;
	return 0;
}

static int put_sources(yaml_emitter_t *e, const Consumer__ShardSpec *s)
{
	if (!s->n_sources)
		return 0;
	if (gaz__yaml_put_scalar(e, "sources", 0) || gaz__yaml_put_begin(e, 0))
		return -1;
	for (size_t i = 0; i < s->n_sources; i++) {
		const Consumer__ShardSpec__Source *src = s->sources[i];

		if (gaz__yaml_put_begin(e, 1) || gaz__yaml_put_str(e, "journal", str_of(src->journal)) ||
		    (src->min_offset && gaz__yaml_put_int(e, "min_offset", src->min_offset)) ||
		    gaz__yaml_put_end(e, 1))
			return -1;
	}
	return gaz__yaml_put_end(e, 0);
}

/* Labels as yaml.v2 prints protocol.Label: name and value always, prefix
 * only when set. */
static int put_labels(yaml_emitter_t *e, const Protocol__LabelSet *ls)
{
	if (!ls || !ls->n_labels)
		return 0;
	if (gaz__yaml_put_scalar(e, "labels", 0) || gaz__yaml_put_begin(e, 0))
		return -1;
	for (size_t i = 0; i < ls->n_labels; i++) {
		const Protocol__Label *l = ls->labels[i];

		if (gaz__yaml_put_begin(e, 1) || gaz__yaml_put_str(e, "name", str_of(l->name)) ||
		    gaz__yaml_put_str(e, "value", str_of(l->value)) ||
		    (l->prefix && gaz__yaml_put_bool(e, "prefix", 1)) || gaz__yaml_put_end(e, 1))
			return -1;
	}
	return gaz__yaml_put_end(e, 0);
}

/* put_spec writes the non-zero fields of s in ShardSpec's field order. */
static int put_spec(yaml_emitter_t *e, const Consumer__ShardSpec *s)
{
	return (*str_of(s->id) && gaz__yaml_put_str(e, "id", s->id)) || put_sources(e, s) ||
	       (*str_of(s->recovery_log_prefix) &&
		gaz__yaml_put_str(e, "recovery_log_prefix", s->recovery_log_prefix)) ||
	       (*str_of(s->hint_prefix) && gaz__yaml_put_str(e, "hint_prefix", s->hint_prefix)) ||
	       (s->hint_backups && gaz__yaml_put_int(e, "hint_backups", s->hint_backups)) ||
	       (dur_ns(s->max_txn_duration) &&
		gaz__yaml_put_duration(e, "max_txn_duration", dur_ns(s->max_txn_duration))) ||
	       (dur_ns(s->min_txn_duration) &&
		gaz__yaml_put_duration(e, "min_txn_duration", dur_ns(s->min_txn_duration))) ||
	       (s->disable && gaz__yaml_put_bool(e, "disable", 1)) ||
	       (s->hot_standbys && gaz__yaml_put_int(e, "hot_standbys", s->hot_standbys)) ||
	       put_labels(e, s->labels) ||
	       (s->disable_wait_for_ack && gaz__yaml_put_bool(e, "disable_wait_for_ack", 1)) ||
	       (s->ring_buffer_size && gaz__yaml_put_int(e, "ring_buffer_size", s->ring_buffer_size)) ||
	       (s->read_channel_size &&
		gaz__yaml_put_int(e, "read_channel_size", s->read_channel_size))
		       ? -1
		       : 0;
}

/* put_set writes `common:` then `shards:`, as yaml.v2 prints shardspace.Set
 * (an empty mapping or list as "{}" / "[]"). */
static int put_set(yaml_emitter_t *e, const void *arg)
{
	const struct hset *h = arg;
	static const Consumer__ShardSpec zero = CONSUMER__SHARD_SPEC__INIT;
	const Consumer__ShardSpec *common = h->common ? h->common : &zero;

	/* libyaml writes an empty block collection as "{}" or "[]", as yaml.v2. */
	if (gaz__yaml_put_begin(e, 1) || gaz__yaml_put_scalar(e, "common", 0) ||
	    gaz__yaml_put_begin(e, 1) || put_spec(e, common) || gaz__yaml_put_end(e, 1) ||
	    gaz__yaml_put_scalar(e, "shards", 0) || gaz__yaml_put_begin(e, 0))
		return -1;
	for (size_t i = 0; i < h->n; i++) {
		if (gaz__yaml_put_begin(e, 1) || put_spec(e, h->specs[i]) ||
		    (h->shards[i].mod_revision &&
		     gaz__yaml_put_int(e, "revision", h->shards[i].mod_revision)) ||
		    gaz__yaml_put_end(e, 1))
			return -1;
	}
	return gaz__yaml_put_end(e, 0) || gaz__yaml_put_end(e, 1) ? -1 : 0;
}

int gaz_shardspec_yaml_emit(const struct gaz_shard_rev *shards, size_t n, char **out,
			    size_t *out_len, struct gaz_status *st)
{
	struct hset h = {.shards = shards, .n = n};
	int rc = hoist(&h);

	if (rc)
		rc = gaz_status_set(st, rc, "hoisting shard specs: out of memory");
	else
		rc = gaz__yaml_emit(put_set, &h, "shard specs", out, out_len, st);
	hset_release(&h);
	return rc;
}

int gaz_shardspec_yaml_emit_list(const Consumer__ListResponse *resp, char **out, size_t *out_len,
				 struct gaz_status *st)
{
	struct gaz_shard_rev *rs = NULL;
	int rc;

	if (resp->n_shards && !(rs = calloc(resp->n_shards, sizeof(*rs))))
		return gaz_status_set(st, GAZ_ENOMEM, "writing shard specs: out of memory");
	for (size_t i = 0; i < resp->n_shards; i++) {
		rs[i].spec = resp->shards[i]->spec;
		rs[i].mod_revision = resp->shards[i]->mod_revision;
	}
	rc = gaz_shardspec_yaml_emit(rs, resp->n_shards, out, out_len, st);
	free(rs);
	return rc;
}
