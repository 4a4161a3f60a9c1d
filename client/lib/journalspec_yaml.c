/*
 * journalspec_yaml.c - YAML text of the journal hierarchy: a strict reader
 * (libyaml's document loader, then keyword tables per mapping) and a writer
 * (libyaml's emitter). Tree rules, flattening and hoisting are in
 * journalspec_tree.c.
 *
 * Reading mirrors yaml.v2 UnmarshalStrict into journalspace.Node: unknown
 * and duplicate keys fail; integers must be plain (unquoted) scalars; any
 * scalar reads as a string; plain "", "~" and "null" are null, i.e. the zero
 * value. Aliases are followed, but the number of YAML nodes visited and the
 * nesting of children are bounded, so alias bombs and alias cycles fail
 * instead of exhausting memory or stack.
 *
 * Writing omits zero values, prints enums by name, durations as Go text, and
 * double-quotes strings a YAML reader would take for a non-string.
 */
#include "gazette/journalspec_yaml.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "gazette/duration.h"
#include "journalspec_tree.h"

/* Most YAML nodes one parse may visit, counting each alias expansion. */
#define MAX_VISITS 1000000

struct pctx {
	yaml_document_t doc;
	struct gaz_status *st;
	size_t visits;
	int depth;
};

enum kind {
	K_IGNORE, K_STR, K_I32, K_I64, K_BOOL, K_DUR, K_FLAGS, K_CODEC, K_LEVEL,
	K_STORES, K_LABELS, K_FRAGMENT, K_SUSPEND, K_CHILDREN,
};

/* One YAML key of a mapping: where its value goes, relative to the struct
 * the mapping fills (nginx-style keyword table). */
struct key {
	const char *name;
	enum kind kind;
	size_t off;
};

#define NODE_OFF(f) offsetof(struct gaz__jnode, f)
#define SPEC_OFF(f) offsetof(struct gaz__jspec, f)

static const struct key node_keys[] = {
	{"name", K_STR, NODE_OFF(spec.name)},
	{"comment", K_IGNORE, 0},
	{"delete", K_BOOL, NODE_OFF(del)},
	{"revision", K_I64, NODE_OFF(revision)},
	{"children", K_CHILDREN, 0},
	{"replication", K_I32, NODE_OFF(spec.replication)},
	{"labels", K_LABELS, NODE_OFF(spec)},
	{"fragment", K_FRAGMENT, NODE_OFF(spec)},
	{"flags", K_FLAGS, NODE_OFF(spec.flags)},
	{"max_append_rate", K_I64, NODE_OFF(spec.max_append_rate)},
	{"suspend", K_SUSPEND, NODE_OFF(spec)},
};

static const struct key fragment_keys[] = {
	{"length", K_I64, SPEC_OFF(length)},
	{"compression_codec", K_CODEC, SPEC_OFF(codec)},
	{"stores", K_STORES, 0},
	{"refresh_interval", K_DUR, SPEC_OFF(refresh_ns)},
	{"retention", K_DUR, SPEC_OFF(retention_ns)},
	{"flush_interval", K_DUR, SPEC_OFF(flush_ns)},
	{"path_postfix_template", K_STR, SPEC_OFF(postfix)},
};

static const struct key suspend_keys[] = {
	{"level", K_LEVEL, SPEC_OFF(suspend_level)},
	{"offset", K_I64, SPEC_OFF(suspend_offset)},
};

static const struct key label_keys[] = {
	{"name", K_STR, offsetof(struct gaz__jlabel, name)},
	{"value", K_STR, offsetof(struct gaz__jlabel, value)},
};

#define NKEYS(t) (sizeof(t) / sizeof((t)[0]))

/* A scalar value as read: text, whether plain (unquoted), whether null. */
struct scalar {
	const char *text;
	int plain;
	int null;
};

static int line_of(const yaml_node_t *y)
{
	return (int)y->start_mark.line + 1;
}

static int bad_value(struct pctx *c, const yaml_node_t *y, const char *key, const char *why)
{
	return gaz_status_set(c->st, GAZ_EINVAL, "line %d: bad value for \"%s\": %s",
			      line_of(y), key, why);
}

/* 1 for a plain scalar yaml.v2 resolves to null: "", "~", "null" and kin. */
static int plain_null(const yaml_node_t *y)
{
	const char *t = (const char *)y->data.scalar.value;

	return y->type == YAML_SCALAR_NODE && y->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	       (!y->data.scalar.length || !strcmp(t, "~") || !strcmp(t, "null") ||
		!strcmp(t, "Null") || !strcmp(t, "NULL"));
}

static int get_scalar(struct pctx *c, const yaml_node_t *y, const char *key, struct scalar *sc)
{
	if (y->type != YAML_SCALAR_NODE)
		return bad_value(c, y, key, "want a scalar");
	sc->text = (const char *)y->data.scalar.value;
	if (memchr(sc->text, '\0', y->data.scalar.length))
		return bad_value(c, y, key, "contains a NUL byte");
	sc->plain = y->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
	sc->null = plain_null(y);
	return 0;
}

/* Plain integer scalar (decimal, 0x hex or 0-prefixed octal, as yaml.v2
 * resolves them) within [lo, hi]. Returns 0, 1 when not an integer, or an
 * error for one out of range. */
static int scalar_int(struct pctx *c, const yaml_node_t *y, const char *key,
		      const struct scalar *sc, long long lo, long long hi, long long *out)
{
	char *end;
	long long v;

	if (!sc->plain || sc->null || !sc->text[0] || sc->text[0] == ' ')
		return 1;
	errno = 0;
	v = strtoll(sc->text, &end, 0);
	if (*end)
		return 1;
	if (errno == ERANGE || v < lo || v > hi)
		return gaz_status_set(c->st, GAZ_EINVAL,
				      "line %d: bad value for \"%s\": %s is out of range [%lld, %lld]",
				      line_of(y), key, sc->text, lo, hi);
	*out = v;
	return 0;
}

static int set_int(struct pctx *c, const yaml_node_t *y, const char *key, long long lo,
		   long long hi, long long *out)
{
	struct scalar sc;
	int rc;

	if ((rc = get_scalar(c, y, key, &sc)))
		return rc;
	if (sc.null) {
		*out = 0;
		return 0;
	}
	if ((rc = scalar_int(c, y, key, &sc, lo, hi, out)) == 1)
		return gaz_status_set(c->st, GAZ_EINVAL,
				      "line %d: bad value for \"%s\": \"%s\" is not an integer",
				      line_of(y), key, sc.text);
	return rc;
}

static int set_str(struct pctx *c, const yaml_node_t *y, const char *key, char **out)
{
	struct scalar sc;
	int rc;

	if ((rc = get_scalar(c, y, key, &sc)) || sc.null)
		return rc;
	free(*out);
	if (!(*out = strdup(sc.text)))
		return gaz_status_set(c->st, GAZ_ENOMEM, "reading journal specs: out of memory");
	return 0;
}

static int set_bool(struct pctx *c, const yaml_node_t *y, const char *key, int *out)
{
	static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES",
					  "on", "On", "ON", "y", "Y"};
	static const char *const no[] = {"false", "False", "FALSE", "no", "No", "NO",
					 "off", "Off", "OFF", "n", "N"};
	struct scalar sc;
	int rc;

	if ((rc = get_scalar(c, y, key, &sc)) || sc.null)
		return rc;
	for (size_t i = 0; sc.plain && i < NKEYS(yes); i++) {
		if (!strcmp(sc.text, yes[i]) || !strcmp(sc.text, no[i])) {
			*out = !strcmp(sc.text, yes[i]);
			return 0;
		}
	}
	return gaz_status_set(c->st, GAZ_EINVAL,
			      "line %d: bad value for \"%s\": \"%s\" is not a boolean",
			      line_of(y), key, sc.text);
}

static int set_duration(struct pctx *c, const yaml_node_t *y, const char *key, int64_t *out)
{
	struct gaz_status sub = {0};
	struct scalar sc;
	int rc;

	if ((rc = get_scalar(c, y, key, &sc)))
		return rc;
	if (sc.null) {
		*out = 0;
		return 0;
	}
	rc = sc.plain ? gaz_duration_parse_spec(sc.text, out, &sub)
		      : gaz_duration_parse(sc.text, out, &sub);
	return rc ? bad_value(c, y, key, sub.msg) : 0;
}

/* An enum by name, or by integer as yaml.v2 takes Gazette's enums. */
static int set_enum(struct pctx *c, const yaml_node_t *y, const char *key,
		    const ProtobufCEnumDescriptor *d, long long lo, long long hi, long long *out)
{
	const ProtobufCEnumValue *ev;
	char names[256] = "";
	struct scalar sc;
	int rc;

	if ((rc = get_scalar(c, y, key, &sc)))
		return rc;
	if (sc.null) {
		*out = 0;
		return 0;
	}
	if ((rc = scalar_int(c, y, key, &sc, lo, hi, out)) != 1)
		return rc;
	if ((ev = protobuf_c_enum_descriptor_get_value_by_name(d, sc.text))) {
		*out = ev->value;
		return 0;
	}
	for (unsigned i = 0; i < d->n_values; i++) {
		size_t used = strlen(names);

		snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "",
			 d->values[i].name);
	}
	return gaz_status_set(c->st, GAZ_EINVAL,
			      "line %d: bad value for \"%s\": unknown name \"%s\" (want %s)",
			      line_of(y), key, sc.text, names);
}

static int visit(struct pctx *c, const yaml_node_t *y)
{
	if (++c->visits <= MAX_VISITS)
		return 0;
	return gaz_status_set(c->st, GAZ_ERANGE,
			      "line %d: document too large (over %d YAML nodes with aliases expanded)",
			      line_of(y), MAX_VISITS);
}

static yaml_node_t *node_at(struct pctx *c, yaml_node_item_t i)
{
	return yaml_document_get_node(&c->doc, i);
}

static int parse_map(struct pctx *c, const yaml_node_t *y, const struct key *keys,
		     size_t nkeys, void *base, const char *what);
static int parse_node(struct pctx *c, const yaml_node_t *y, struct gaz__jnode *n);

/* A sequence (or null: *n = 0) of `key`; the caller gets its item count. */
static int get_seq(struct pctx *c, const yaml_node_t *y, const char *key, size_t *n)
{
	*n = 0;
	if (plain_null(y))
		return 0;
	if (y->type != YAML_SEQUENCE_NODE)
		return bad_value(c, y, key, "want a list");
	*n = (size_t)(y->data.sequence.items.top - y->data.sequence.items.start);
	return 0;
}

static int parse_stores(struct pctx *c, const yaml_node_t *y, struct gaz__jspec *s)
{
	size_t n;
	int rc;

	if ((rc = get_seq(c, y, "stores", &n)) || !n)
		return rc;
	if (!(s->stores = calloc(n, sizeof(*s->stores))))
		return gaz_status_set(c->st, GAZ_ENOMEM, "reading journal specs: out of memory");
	for (; s->n_stores < n; s->n_stores++) {
		const yaml_node_t *it = node_at(c, y->data.sequence.items.start[s->n_stores]);

		if ((rc = visit(c, it)) || (rc = set_str(c, it, "stores", &s->stores[s->n_stores])))
			return rc;
		if (!s->stores[s->n_stores] && !(s->stores[s->n_stores] = strdup("")))
			return gaz_status_set(c->st, GAZ_ENOMEM, "reading journal specs: out of memory");
	}
	return 0;
}

static int label_order(const struct gaz__jlabel *a, const struct gaz__jlabel *b)
{
	int r = strcmp(a->name ? a->name : "", b->name ? b->name : "");

	return r ? r : strcmp(a->value ? a->value : "", b->value ? b->value : "");
}

static int parse_labels(struct pctx *c, const yaml_node_t *y, struct gaz__jspec *s)
{
	size_t n;
	int rc;

	if ((rc = get_seq(c, y, "labels", &n)) || !n)
		return rc;
	if (!(s->labels = calloc(n, sizeof(*s->labels))))
		return gaz_status_set(c->st, GAZ_ENOMEM, "reading journal specs: out of memory");
	while (s->n_labels < n) {
		const yaml_node_t *it = node_at(c, y->data.sequence.items.start[s->n_labels]);
		struct gaz__jlabel *l = &s->labels[s->n_labels++]; /* counted: freed on error */

		if ((rc = parse_map(c, it, label_keys, NKEYS(label_keys), l, "label")))
			return rc;
		if (s->n_labels > 1 && label_order(l - 1, l) >= 0)
			return gaz_status_set(c->st, GAZ_EINVAL,
					      "line %d: labels are not in sorted, unique order "
					      "(\"%s\" = \"%s\" after \"%s\" = \"%s\")",
					      line_of(it), l->name ? l->name : "",
					      l->value ? l->value : "", l[-1].name ? l[-1].name : "",
					      l[-1].value ? l[-1].value : "");
	}
	return 0;
}

static int parse_children(struct pctx *c, const yaml_node_t *y, struct gaz__jnode *n)
{
	size_t count;
	int rc;

	if ((rc = get_seq(c, y, "children", &count)) || !count)
		return rc;
	if (!(n->children = calloc(count, sizeof(*n->children))))
		return gaz_status_set(c->st, GAZ_ENOMEM, "reading journal specs: out of memory");
	while (n->n_children < count) {
		const yaml_node_t *it = node_at(c, y->data.sequence.items.start[n->n_children]);

		/* Counted first, so that release frees a partly parsed child. */
		if ((rc = parse_node(c, it, &n->children[n->n_children++])))
			return rc;
	}
	return 0;
}

/* `fragment:` or `suspend:`: a mapping filling the same spec, or null. */
static int parse_sub(struct pctx *c, const yaml_node_t *y, const struct key *k,
		     struct gaz__jspec *s)
{
	if (plain_null(y))
		return 0;
	if (y->type != YAML_MAPPING_NODE)
		return bad_value(c, y, k->name, "want a mapping");
	if (k->kind == K_FRAGMENT)
		return parse_map(c, y, fragment_keys, NKEYS(fragment_keys), s, "fragment");
	s->has_suspend = 1;
	return parse_map(c, y, suspend_keys, NKEYS(suspend_keys), s, "suspend");
}

static int set_bounded(struct pctx *c, const struct key *k, const yaml_node_t *y, void *dst)
{
	long long v = 0;
	int rc;

	switch (k->kind) {
	case K_I32:
		rc = set_int(c, y, k->name, INT32_MIN, INT32_MAX, &v);
		*(int32_t *)dst = rc ? 0 : (int32_t)v;
		return rc;
	case K_FLAGS:
		rc = set_enum(c, y, k->name, &protocol__journal_spec__flag__descriptor, 0,
			      UINT32_MAX, &v);
		*(uint32_t *)dst = rc ? 0 : (uint32_t)v;
		return rc;
	case K_CODEC:
		rc = set_enum(c, y, k->name, &protocol__compression_codec__descriptor, INT32_MIN,
			      INT32_MAX, &v);
		break;
	default: /* K_LEVEL */
		rc = set_enum(c, y, k->name, &protocol__journal_spec__suspend__level__descriptor,
			      INT32_MIN, INT32_MAX, &v);
		break;
	}
	*(int32_t *)dst = rc ? 0 : (int32_t)v;
	return rc;
}

static int set_field(struct pctx *c, const struct key *k, const yaml_node_t *y, void *dst)
{
	struct scalar sc;
	long long v = 0;
	int rc;

	switch (k->kind) {
	case K_IGNORE:
		return get_scalar(c, y, k->name, &sc);
	case K_STR:
		return set_str(c, y, k->name, dst);
	case K_I64:
		rc = set_int(c, y, k->name, INT64_MIN, INT64_MAX, &v);
		*(int64_t *)dst = rc ? 0 : (int64_t)v;
		return rc;
	case K_BOOL:
		return set_bool(c, y, k->name, dst);
	case K_DUR:
		return set_duration(c, y, k->name, dst);
	case K_STORES:
		return parse_stores(c, y, dst);
	case K_LABELS:
		return parse_labels(c, y, dst);
	case K_FRAGMENT:
	case K_SUSPEND:
		return parse_sub(c, y, k, dst);
	case K_CHILDREN:
		return parse_children(c, y, dst);
	default:
		return set_bounded(c, k, y, dst);
	}
}

static const struct key *find_key(const struct key *keys, size_t nkeys, const yaml_node_t *k)
{
	for (size_t i = 0; i < nkeys; i++)
		if (strlen(keys[i].name) == k->data.scalar.length &&
		    !memcmp(keys[i].name, k->data.scalar.value, k->data.scalar.length))
			return &keys[i];
	return NULL;
}

static int parse_map(struct pctx *c, const yaml_node_t *y, const struct key *keys,
		     size_t nkeys, void *base, const char *what)
{
	const char *in = what ? " in " : "", *w = what ? what : "";
	unsigned seen = 0;
	int rc;

	if ((rc = visit(c, y)))
		return rc;
	if (y->type != YAML_MAPPING_NODE)
		return gaz_status_set(c->st, GAZ_EINVAL, "line %d: want a mapping%s%s, not a %s",
				      line_of(y), in, w,
				      y->type == YAML_SCALAR_NODE ? "scalar" : "list");
	for (yaml_node_pair_t *p = y->data.mapping.pairs.start; p < y->data.mapping.pairs.top; p++) {
		const yaml_node_t *kn = node_at(c, p->key), *vn = node_at(c, p->value);
		const struct key *k;

		if ((rc = visit(c, vn)))
			return rc;
		if (kn->type != YAML_SCALAR_NODE)
			return gaz_status_set(c->st, GAZ_EINVAL, "line %d: non-scalar key%s%s",
					      line_of(kn), in, w);
		if (!(k = find_key(keys, nkeys, kn)))
			return gaz_status_set(c->st, GAZ_EINVAL, "line %d: unknown key \"%s\"%s%s",
					      line_of(kn), (const char *)kn->data.scalar.value, in, w);
		if (seen & (1u << (k - keys)))
			return gaz_status_set(c->st, GAZ_EINVAL, "line %d: duplicate key \"%s\"%s%s",
					      line_of(kn), k->name, in, w);
		seen |= 1u << (k - keys);
		if ((rc = set_field(c, k, vn, (char *)base + k->off)))
			return rc;
	}
	return 0;
}

static int parse_node(struct pctx *c, const yaml_node_t *y, struct gaz__jnode *n)
{
	int rc;

	n->del = -1;
	n->line = line_of(y);
	if (c->depth >= GAZ__JTREE_MAX_DEPTH)
		return gaz_status_set(c->st, GAZ_EINVAL, "line %d: children nest deeper than %d",
				      n->line, GAZ__JTREE_MAX_DEPTH);
	c->depth++;
	rc = parse_map(c, y, node_keys, NKEYS(node_keys), n, NULL);
	c->depth--;
	return rc;
}

static int yaml_failure(const yaml_parser_t *p, struct gaz_status *st)
{
	if (p->error == YAML_MEMORY_ERROR)
		return gaz_status_set(st, GAZ_ENOMEM, "reading journal specs: out of memory");
	if (p->error == YAML_READER_ERROR)
		return gaz_status_set(st, GAZ_EINVAL, "byte %zu: %s", p->problem_offset,
				      p->problem ? p->problem : "unreadable input");
	if (p->context)
		return gaz_status_set(st, GAZ_EINVAL, "line %zu column %zu: %s (%s at line %zu)",
				      p->problem_mark.line + 1, p->problem_mark.column + 1,
				      p->problem ? p->problem : "invalid YAML", p->context,
				      p->context_mark.line + 1);
	return gaz_status_set(st, GAZ_EINVAL, "line %zu column %zu: %s",
			      p->problem_mark.line + 1, p->problem_mark.column + 1,
			      p->problem ? p->problem : "invalid YAML");
}

int gaz_journalspec_yaml_parse(const char *yaml, size_t len, Protocol__ApplyRequest **out,
			       struct gaz_status *st)
{
	struct pctx c = {.st = st};
	struct gaz__jnode root = {.del = -1};
	yaml_parser_t parser;
	yaml_node_t *top;
	int rc;

	if (!yaml_parser_initialize(&parser))
		return gaz_status_set(st, GAZ_ENOMEM, "reading journal specs: out of memory");
	yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, len);
	if (!yaml_parser_load(&parser, &c.doc)) {
		rc = yaml_failure(&parser, st);
		yaml_parser_delete(&parser);
		return rc;
	}
	if (!(top = yaml_document_get_root_node(&c.doc)))
		rc = gaz_status_set(st, GAZ_EINVAL, "no journal specs: the document is empty");
	else if (!(rc = parse_node(&c, top, &root)) && !(rc = gaz__jnode_validate(&root, st)))
		rc = gaz__jnode_flatten(&root, out, st);
	gaz__jnode_release(&root);
	yaml_document_delete(&c.doc);
	yaml_parser_delete(&parser);
	return rc;
}

void gaz_journalspec_apply_free(Protocol__ApplyRequest *req)
{
	if (req)
		protocol__apply_request__free_unpacked(req, NULL);
}

/* ---- writing ---- */

/* Growable output, bounded by GAZ_JOURNALSPEC_YAML_MAX. */
struct obuf {
	char *p;
	size_t len, cap;
	int too_big;
};

static int obuf_write(void *data, unsigned char *b, size_t n)
{
	struct obuf *o = data;
	size_t cap = o->cap ? o->cap : 4096;
	char *p;

	if (n > GAZ_JOURNALSPEC_YAML_MAX - o->len) {
		o->too_big = 1;
		return 0;
	}
	while (cap < o->len + n + 1)
		cap *= 2;
	if (cap != o->cap) {
		if (!(p = realloc(o->p, cap)))
			return 0;
		o->p = p;
		o->cap = cap;
	}
	memcpy(o->p + o->len, b, n);
	o->len += n;
	o->p[o->len] = '\0';
	return 1;
}

/* 1 when a YAML 1.1 reader (yaml.v2) would resolve plain `s` to something
 * other than a string: null, a boolean, a number or a timestamp. */
static int needs_quotes(const char *s)
{
	static const char *const words[] = {
		"~", "null", "Null", "NULL", "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No",
		"NO", "true", "True", "TRUE", "false", "False", "FALSE", "on", "On", "ON",
		"off", "Off", "OFF",
	};

	if (!*s || strchr("0123456789+-.", *s))
		return 1;
	for (size_t i = 0; i < NKEYS(words); i++)
		if (!strcmp(s, words[i]))
			return 1;
	return 0;
}

static int put_scalar(yaml_emitter_t *e, const char *s, int quote)
{
	yaml_event_t ev;

	if (!yaml_scalar_event_initialize(&ev, NULL, (const yaml_char_t *)YAML_STR_TAG,
					  (const yaml_char_t *)s, (int)strlen(s), 1, 1,
					  quote ? YAML_DOUBLE_QUOTED_SCALAR_STYLE :
						  YAML_ANY_SCALAR_STYLE))
		return -1;
	return yaml_emitter_emit(e, &ev) ? 0 : -1;
}

static int put_str(yaml_emitter_t *e, const char *key, const char *s)
{
	return put_scalar(e, key, 0) || put_scalar(e, s, needs_quotes(s)) ? -1 : 0;
}

static int put_int(yaml_emitter_t *e, const char *key, long long v)
{
	char num[24];

	snprintf(num, sizeof(num), "%lld", v);
	return put_scalar(e, key, 0) || put_scalar(e, num, 0) ? -1 : 0;
}

static int put_enum(yaml_emitter_t *e, const char *key, const ProtobufCEnumDescriptor *d,
		    long long v)
{
	const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(d, (int)v);

	if (ev && ev->value == v)
		return put_scalar(e, key, 0) || put_scalar(e, ev->name, 0) ? -1 : 0;
	return put_int(e, key, v);
}

static int put_duration(yaml_emitter_t *e, const char *key, int64_t ns)
{
	char text[GAZ_DURATION_STR_MAX];

	return put_scalar(e, key, 0) || put_scalar(e, gaz_duration_format(ns, text), 0) ? -1 : 0;
}

static int put_begin(yaml_emitter_t *e, int mapping)
{
	yaml_event_t ev;
	int ok = mapping ? yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
							       YAML_BLOCK_MAPPING_STYLE)
			 : yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
								YAML_BLOCK_SEQUENCE_STYLE);

	return ok && yaml_emitter_emit(e, &ev) ? 0 : -1;
}

static int put_end(yaml_emitter_t *e, int mapping)
{
	yaml_event_t ev;
	int ok = mapping ? yaml_mapping_end_event_initialize(&ev)
			 : yaml_sequence_end_event_initialize(&ev);

	return ok && yaml_emitter_emit(e, &ev) ? 0 : -1;
}

static int put_labels(yaml_emitter_t *e, const struct gaz__jspec *s)
{
	if (!s->n_labels)
		return 0;
	if (put_scalar(e, "labels", 0) || put_begin(e, 0))
		return -1;
	for (size_t i = 0; i < s->n_labels; i++) {
		const struct gaz__jlabel *l = &s->labels[i];

		if (put_begin(e, 1) || put_str(e, "name", l->name ? l->name : ""))
			return -1;
		if (l->value && *l->value && put_str(e, "value", l->value))
			return -1;
		if (put_end(e, 1))
			return -1;
	}
	return put_end(e, 0);
}

static int put_stores(yaml_emitter_t *e, const struct gaz__jspec *s)
{
	if (!s->n_stores)
		return 0;
	if (put_scalar(e, "stores", 0) || put_begin(e, 0))
		return -1;
	for (size_t i = 0; i < s->n_stores; i++)
		if (put_scalar(e, s->stores[i], needs_quotes(s->stores[i])))
			return -1;
	return put_end(e, 0);
}

static int put_fragment(yaml_emitter_t *e, const struct gaz__jspec *s)
{
	int postfix = s->postfix && *s->postfix;

	if (!s->length && !s->codec && !s->n_stores && !s->refresh_ns && !s->retention_ns &&
	    !s->flush_ns && !postfix)
		return 0;
	if (put_scalar(e, "fragment", 0) || put_begin(e, 1) ||
	    (s->length && put_int(e, "length", s->length)) ||
	    (s->codec && put_enum(e, "compression_codec",
				  &protocol__compression_codec__descriptor, s->codec)) ||
	    put_stores(e, s) ||
	    (s->refresh_ns && put_duration(e, "refresh_interval", s->refresh_ns)) ||
	    (s->retention_ns && put_duration(e, "retention", s->retention_ns)) ||
	    (s->flush_ns && put_duration(e, "flush_interval", s->flush_ns)) ||
	    (postfix && put_str(e, "path_postfix_template", s->postfix)))
		return -1;
	return put_end(e, 1);
}

static int put_suspend(yaml_emitter_t *e, const struct gaz__jspec *s)
{
	if (!s->has_suspend)
		return 0;
	if (put_scalar(e, "suspend", 0) || put_begin(e, 1) ||
	    (s->suspend_level &&
	     put_enum(e, "level", &protocol__journal_spec__suspend__level__descriptor,
		      s->suspend_level)) ||
	    (s->suspend_offset && put_int(e, "offset", s->suspend_offset)))
		return -1;
	return put_end(e, 1);
}

/* Keys in journalspace.Node's yaml.v2 order: delete, the spec's fields,
 * revision, children. */
static int put_node(yaml_emitter_t *e, const struct gaz__jnode *n)
{
	const struct gaz__jspec *s = &n->spec;

	if (put_begin(e, 1) ||
	    (n->del >= 0 && (put_scalar(e, "delete", 0) || put_scalar(e, n->del ? "true" : "false", 0))) ||
	    (s->name && *s->name && put_str(e, "name", s->name)) ||
	    (s->replication && put_int(e, "replication", s->replication)) ||
	    put_labels(e, s) || put_fragment(e, s) ||
	    (s->flags && put_enum(e, "flags", &protocol__journal_spec__flag__descriptor, s->flags)) ||
	    (s->max_append_rate && put_int(e, "max_append_rate", s->max_append_rate)) ||
	    put_suspend(e, s) || (n->revision && put_int(e, "revision", n->revision)))
		return -1;
	if (n->n_children) {
		if (put_scalar(e, "children", 0) || put_begin(e, 0))
			return -1;
		for (size_t i = 0; i < n->n_children; i++)
			if (put_node(e, &n->children[i]))
				return -1;
		if (put_end(e, 0))
			return -1;
	}
	return put_end(e, 1);
}

static int put_document(yaml_emitter_t *e, const struct gaz__jnode *root)
{
	yaml_event_t ev;

	if (!yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) ||
	    !yaml_emitter_emit(e, &ev) ||
	    !yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) ||
	    !yaml_emitter_emit(e, &ev) || put_node(e, root) ||
	    !yaml_document_end_event_initialize(&ev, 1) || !yaml_emitter_emit(e, &ev) ||
	    !yaml_stream_end_event_initialize(&ev) || !yaml_emitter_emit(e, &ev))
		return -1;
	return yaml_emitter_flush(e) ? 0 : -1;
}

static int emit_tree(const struct gaz__jnode *root, char **out, size_t *out_len,
		     struct gaz_status *st)
{
	struct obuf o = {0};
	yaml_emitter_t e;
	int rc = 0;

	if (!yaml_emitter_initialize(&e))
		return gaz_status_set(st, GAZ_ENOMEM, "writing journal specs: out of memory");
	yaml_emitter_set_output(&e, obuf_write, &o);
	yaml_emitter_set_unicode(&e, 1);
	yaml_emitter_set_width(&e, -1);
	yaml_emitter_set_indent(&e, 2);
	if (put_document(&e, root)) {
		if (o.too_big)
			rc = gaz_status_set(st, GAZ_ERANGE, "writing journal specs: over %u bytes",
					    GAZ_JOURNALSPEC_YAML_MAX);
		else if (e.error == YAML_EMITTER_ERROR)
			rc = gaz_status_set(st, GAZ_EINVAL, "writing journal specs: %s",
					    e.problem ? e.problem : "emitter error");
		else
			rc = gaz_status_set(st, GAZ_ENOMEM, "writing journal specs: out of memory");
		free(o.p);
	} else {
		*out = o.p;
		if (out_len)
			*out_len = o.len;
	}
	yaml_emitter_delete(&e);
	return rc;
}

int gaz_journalspec_yaml_emit(const struct gaz_journal_rev *journals, size_t n, char **out,
			      size_t *out_len, struct gaz_status *st)
{
	struct gaz__jnode root = {.del = -1};
	int rc;

	if ((rc = gaz__jnode_hoisted(journals, n, &root, st)))
		return rc;
	rc = emit_tree(&root, out, out_len, st);
	gaz__jnode_release(&root);
	return rc;
}

int gaz_journalspec_yaml_emit_list(const Protocol__ListResponse *resp, char **out,
				   size_t *out_len, struct gaz_status *st)
{
	struct gaz_journal_rev *js = NULL;
	int rc;

	if (resp->n_journals && !(js = calloc(resp->n_journals, sizeof(*js))))
		return gaz_status_set(st, GAZ_ENOMEM, "writing journal specs: out of memory");
	for (size_t i = 0; i < resp->n_journals; i++) {
		js[i].spec = resp->journals[i]->spec;
		js[i].mod_revision = resp->journals[i]->mod_revision;
	}
	rc = gaz_journalspec_yaml_emit(js, resp->n_journals, out, out_len, st);
	free(js);
	return rc;
}
