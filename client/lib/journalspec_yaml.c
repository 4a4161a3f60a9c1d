/*
 * journalspec_yaml.c - YAML text of the journal hierarchy: the keyword
 * tables of journalspace.Node for the strict reader, and the writer of a
 * hoisted tree, both over yaml_util.c (libyaml). Tree rules, flattening and
 * hoisting are in journalspec_tree.c.
 *
 * Reading mirrors yaml.v2 UnmarshalStrict into journalspace.Node (see
 * yaml_util.h for the scalar rules and the bound on visited nodes); the
 * nesting of children is bounded too, so alias cycles fail instead of
 * exhausting the stack.
 *
 * Writing omits zero values, prints enums by name, durations as Go text, and
 * double-quotes strings a YAML reader would take for a non-string.
 */
#include "gazette/journalspec_yaml.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "journalspec_tree.h"
#include "yaml_util.h"

/* Kinds of the keyword tables' values (struct gaz__yaml_key.kind). */
enum kind {
	K_IGNORE, K_STR, K_I32, K_I64, K_BOOL, K_DUR, K_FLAGS, K_CODEC, K_LEVEL,
	K_STORES, K_LABELS, K_FRAGMENT, K_SUSPEND, K_CHILDREN,
};

#define NODE_OFF(f) offsetof(struct gaz__jnode, f)
#define SPEC_OFF(f) offsetof(struct gaz__jspec, f)

static const struct gaz__yaml_key node_keys[] = {
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

static const struct gaz__yaml_key fragment_keys[] = {
	{"length", K_I64, SPEC_OFF(length)},
	{"compression_codec", K_CODEC, SPEC_OFF(codec)},
	{"stores", K_STORES, 0},
	{"refresh_interval", K_DUR, SPEC_OFF(refresh_ns)},
	{"retention", K_DUR, SPEC_OFF(retention_ns)},
	{"flush_interval", K_DUR, SPEC_OFF(flush_ns)},
	{"path_postfix_template", K_STR, SPEC_OFF(postfix)},
};

static const struct gaz__yaml_key suspend_keys[] = {
	{"level", K_LEVEL, SPEC_OFF(suspend_level)},
	{"offset", K_I64, SPEC_OFF(suspend_offset)},
};

static const struct gaz__yaml_key label_keys[] = {
	{"name", K_STR, offsetof(struct gaz__jlabel, name)},
	{"value", K_STR, offsetof(struct gaz__jlabel, value)},
};

#define NKEYS(t) (sizeof(t) / sizeof((t)[0]))

static int parse_map(struct gaz__yaml_in *c, const yaml_node_t *y, const struct gaz__yaml_key *keys,
		     size_t nkeys, void *base, const char *what);
static int parse_node(struct gaz__yaml_in *c, const yaml_node_t *y, struct gaz__jnode *n);

static int parse_stores(struct gaz__yaml_in *c, const yaml_node_t *y, struct gaz__jspec *s)
{
	size_t n;
	int rc;

	if ((rc = gaz__yaml_seq(c, y, "stores", &n)) || !n)
		return rc;
	if (!(s->stores = calloc(n, sizeof(*s->stores))))
		return gaz__yaml_oom(c);
	for (; s->n_stores < n; s->n_stores++) {
		const yaml_node_t *it = gaz__yaml_node(c, y->data.sequence.items.start[s->n_stores]);

		if ((rc = gaz__yaml_visit(c, it)) || (rc = gaz__yaml_str(c, it, "stores", &s->stores[s->n_stores])))
			return rc;
		if (!s->stores[s->n_stores] && !(s->stores[s->n_stores] = strdup("")))
			return gaz__yaml_oom(c);
	}
	return 0;
}

static int label_order(const struct gaz__jlabel *a, const struct gaz__jlabel *b)
{
	int r = strcmp(a->name ? a->name : "", b->name ? b->name : "");

	return r ? r : strcmp(a->value ? a->value : "", b->value ? b->value : "");
}

static int parse_labels(struct gaz__yaml_in *c, const yaml_node_t *y, struct gaz__jspec *s)
{
	size_t n;
	int rc;

	if ((rc = gaz__yaml_seq(c, y, "labels", &n)) || !n)
		return rc;
	if (!(s->labels = calloc(n, sizeof(*s->labels))))
		return gaz__yaml_oom(c);
	while (s->n_labels < n) {
		const yaml_node_t *it = gaz__yaml_node(c, y->data.sequence.items.start[s->n_labels]);
		struct gaz__jlabel *l = &s->labels[s->n_labels++]; /* counted: freed on error */

		if ((rc = parse_map(c, it, label_keys, NKEYS(label_keys), l, "label")))
			return rc;
		if (s->n_labels > 1 && label_order(l - 1, l) >= 0)
			return gaz_status_set(c->st, GAZ_EINVAL,
					      "line %d: labels are not in sorted, unique order "
					      "(\"%s\" = \"%s\" after \"%s\" = \"%s\")",
					      gaz__yaml_line(it), l->name ? l->name : "",
					      l->value ? l->value : "", l[-1].name ? l[-1].name : "",
					      l[-1].value ? l[-1].value : "");
	}
	return 0;
}

static int parse_children(struct gaz__yaml_in *c, const yaml_node_t *y, struct gaz__jnode *n)
{
	size_t count;
	int rc;

	if ((rc = gaz__yaml_seq(c, y, "children", &count)) || !count)
		return rc;
	if (!(n->children = calloc(count, sizeof(*n->children))))
		return gaz__yaml_oom(c);
	while (n->n_children < count) {
		const yaml_node_t *it = gaz__yaml_node(c, y->data.sequence.items.start[n->n_children]);

		/* Counted first, so that release frees a partly parsed child. */
		if ((rc = parse_node(c, it, &n->children[n->n_children++])))
			return rc;
	}
	return 0;
}

/* `fragment:` or `suspend:`: a mapping filling the same spec, or null. */
static int parse_sub(struct gaz__yaml_in *c, const yaml_node_t *y, const struct gaz__yaml_key *k,
		     struct gaz__jspec *s)
{
	if (gaz__yaml_null(y))
		return 0;
	if (y->type != YAML_MAPPING_NODE)
		return gaz__yaml_bad_value(c, y, k->name, "want a mapping");
	if (k->kind == K_FRAGMENT)
		return parse_map(c, y, fragment_keys, NKEYS(fragment_keys), s, "fragment");
	s->has_suspend = 1;
	return parse_map(c, y, suspend_keys, NKEYS(suspend_keys), s, "suspend");
}

static int set_bounded(struct gaz__yaml_in *c, const struct gaz__yaml_key *k, const yaml_node_t *y, void *dst)
{
	long long v = 0;
	int rc;

	switch (k->kind) {
	case K_I32:
		rc = gaz__yaml_int(c, y, k->name, INT32_MIN, INT32_MAX, &v);
		*(int32_t *)dst = rc ? 0 : (int32_t)v;
		return rc;
	case K_FLAGS:
		rc = gaz__yaml_enum(c, y, k->name, &protocol__journal_spec__flag__descriptor, 0,
			      UINT32_MAX, &v);
		*(uint32_t *)dst = rc ? 0 : (uint32_t)v;
		return rc;
	case K_CODEC:
		rc = gaz__yaml_enum(c, y, k->name, &protocol__compression_codec__descriptor, INT32_MIN,
			      INT32_MAX, &v);
		break;
	default: /* K_LEVEL */
		rc = gaz__yaml_enum(c, y, k->name, &protocol__journal_spec__suspend__level__descriptor,
			      INT32_MIN, INT32_MAX, &v);
		break;
	}
	*(int32_t *)dst = rc ? 0 : (int32_t)v;
	return rc;
}

static int set_field(struct gaz__yaml_in *c, const struct gaz__yaml_key *k, const yaml_node_t *y, void *dst)
{
	struct gaz__yaml_scalar sc;
	long long v = 0;
	int rc;

	switch (k->kind) {
	case K_IGNORE:
		return gaz__yaml_scalar(c, y, k->name, &sc);
	case K_STR:
		return gaz__yaml_str(c, y, k->name, dst);
	case K_I64:
		rc = gaz__yaml_int(c, y, k->name, INT64_MIN, INT64_MAX, &v);
		*(int64_t *)dst = rc ? 0 : (int64_t)v;
		return rc;
	case K_BOOL:
		return gaz__yaml_bool(c, y, k->name, dst);
	case K_DUR:
		return gaz__yaml_duration(c, y, k->name, dst);
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

static int parse_map(struct gaz__yaml_in *c, const yaml_node_t *y, const struct gaz__yaml_key *keys,
		     size_t nkeys, void *base, const char *what)
{
	return gaz__yaml_map(c, y, keys, nkeys, base, what, set_field);
}

static int parse_node(struct gaz__yaml_in *c, const yaml_node_t *y, struct gaz__jnode *n)
{
	int rc;

	n->del = -1;
	n->line = gaz__yaml_line(y);
	if (c->depth >= GAZ__JTREE_MAX_DEPTH)
		return gaz_status_set(c->st, GAZ_EINVAL, "line %d: children nest deeper than %d",
				      n->line, GAZ__JTREE_MAX_DEPTH);
	c->depth++;
	rc = parse_map(c, y, node_keys, NKEYS(node_keys), n, NULL);
	c->depth--;
	return rc;
}

int gaz_journalspec_yaml_parse(const char *yaml, size_t len, Protocol__ApplyRequest **out,
			       struct gaz_status *st)
{
	struct gaz__yaml_in c = {.st = st, .what = "journal specs"};
	struct gaz__jnode root = {.del = -1};
	yaml_node_t *top;
	int rc;

	if ((rc = gaz__yaml_load(&c, yaml, len)))
		return rc;
	if (!(top = yaml_document_get_root_node(&c.doc)))
		rc = gaz_status_set(st, GAZ_EINVAL, "no journal specs: the document is empty");
	else if (!(rc = parse_node(&c, top, &root)) && !(rc = gaz__jnode_validate(&root, st)))
		rc = gaz__jnode_flatten(&root, out, st);
	gaz__jnode_release(&root);
	gaz__yaml_unload(&c);
	return rc;
}

void gaz_journalspec_apply_free(Protocol__ApplyRequest *req)
{
	if (req)
		protocol__apply_request__free_unpacked(req, NULL);
}

/* ---- writing ---- */

static int put_labels(yaml_emitter_t *e, const struct gaz__jspec *s)
{
	if (!s->n_labels)
		return 0;
	if (gaz__yaml_put_scalar(e, "labels", 0) || gaz__yaml_put_begin(e, 0))
		return -1;
	for (size_t i = 0; i < s->n_labels; i++) {
		const struct gaz__jlabel *l = &s->labels[i];

		if (gaz__yaml_put_begin(e, 1) || gaz__yaml_put_str(e, "name", l->name ? l->name : ""))
			return -1;
		if (l->value && *l->value && gaz__yaml_put_str(e, "value", l->value))
			return -1;
		if (gaz__yaml_put_end(e, 1))
			return -1;
	}
	return gaz__yaml_put_end(e, 0);
}

static int put_stores(yaml_emitter_t *e, const struct gaz__jspec *s)
{
	if (!s->n_stores)
		return 0;
	if (gaz__yaml_put_scalar(e, "stores", 0) || gaz__yaml_put_begin(e, 0))
		return -1;
	for (size_t i = 0; i < s->n_stores; i++)
		if (gaz__yaml_put_scalar(e, s->stores[i], gaz__yaml_needs_quotes(s->stores[i])))
			return -1;
	return gaz__yaml_put_end(e, 0);
}

static int put_fragment(yaml_emitter_t *e, const struct gaz__jspec *s)
{
	int postfix = s->postfix && *s->postfix;

	if (!s->length && !s->codec && !s->n_stores && !s->refresh_ns && !s->retention_ns &&
	    !s->flush_ns && !postfix)
		return 0;
	if (gaz__yaml_put_scalar(e, "fragment", 0) || gaz__yaml_put_begin(e, 1) ||
	    (s->length && gaz__yaml_put_int(e, "length", s->length)) ||
	    (s->codec && gaz__yaml_put_enum(e, "compression_codec",
				  &protocol__compression_codec__descriptor, s->codec)) ||
	    put_stores(e, s) ||
	    (s->refresh_ns && gaz__yaml_put_duration(e, "refresh_interval", s->refresh_ns)) ||
	    (s->retention_ns && gaz__yaml_put_duration(e, "retention", s->retention_ns)) ||
	    (s->flush_ns && gaz__yaml_put_duration(e, "flush_interval", s->flush_ns)) ||
	    (postfix && gaz__yaml_put_str(e, "path_postfix_template", s->postfix)))
		return -1;
	return gaz__yaml_put_end(e, 1);
}

static int put_suspend(yaml_emitter_t *e, const struct gaz__jspec *s)
{
	if (!s->has_suspend)
		return 0;
	if (gaz__yaml_put_scalar(e, "suspend", 0) || gaz__yaml_put_begin(e, 1) ||
	    (s->suspend_level &&
	     gaz__yaml_put_enum(e, "level", &protocol__journal_spec__suspend__level__descriptor,
		      s->suspend_level)) ||
	    (s->suspend_offset && gaz__yaml_put_int(e, "offset", s->suspend_offset)))
		return -1;
	return gaz__yaml_put_end(e, 1);
}

/* Keys in journalspace.Node's yaml.v2 order: delete, the spec's fields,
 * revision, children. */
static int put_node(yaml_emitter_t *e, const struct gaz__jnode *n)
{
	const struct gaz__jspec *s = &n->spec;

	if (gaz__yaml_put_begin(e, 1) ||
	    (n->del >= 0 && (gaz__yaml_put_scalar(e, "delete", 0) || gaz__yaml_put_scalar(e, n->del ? "true" : "false", 0))) ||
	    (s->name && *s->name && gaz__yaml_put_str(e, "name", s->name)) ||
	    (s->replication && gaz__yaml_put_int(e, "replication", s->replication)) ||
	    put_labels(e, s) || put_fragment(e, s) ||
	    (s->flags && gaz__yaml_put_enum(e, "flags", &protocol__journal_spec__flag__descriptor, s->flags)) ||
	    (s->max_append_rate && gaz__yaml_put_int(e, "max_append_rate", s->max_append_rate)) ||
	    put_suspend(e, s) || (n->revision && gaz__yaml_put_int(e, "revision", n->revision)))
		return -1;
	if (n->n_children) {
		if (gaz__yaml_put_scalar(e, "children", 0) || gaz__yaml_put_begin(e, 0))
			return -1;
		for (size_t i = 0; i < n->n_children; i++)
			if (put_node(e, &n->children[i]))
				return -1;
		if (gaz__yaml_put_end(e, 0))
			return -1;
	}
	return gaz__yaml_put_end(e, 1);
}

static int put_root(yaml_emitter_t *e, const void *root)
{
	return put_node(e, root);
}

int gaz_journalspec_yaml_emit(const struct gaz_journal_rev *journals, size_t n, char **out,
			      size_t *out_len, struct gaz_status *st)
{
	struct gaz__jnode root = {.del = -1};
	int rc;

	if ((rc = gaz__jnode_hoisted(journals, n, &root, st)))
		return rc;
	rc = gaz__yaml_emit(put_root, &root, "journal specs", out, out_len, st);
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
