/*
 * journalspec_tree.c - operations on the journal hierarchy: shape checks,
 * flattening a tree into ApplyRequest changes, and building the hoisted tree
 * of listed journals. YAML text is journalspec_yaml.c's business.
 *
 * Field semantics mirror Gazette's protocol.UnionJournalSpecs (fill zero
 * fields from the parent; labels unioned by name, child groups win; stores
 * only when the child has none), IntersectJournalSpecs (keep equal fields;
 * label groups whose value lists are identical) and SubtractJournalSpecs
 * (zero fields equal to the parent's). None of them touch `suspend`: it is
 * neither inherited nor hoisted.
 *
 * Invariants: label arrays stay sorted by (name, value), so a name's labels
 * form one contiguous "group"; every string is heap-owned or NULL ("").
 * Must not call: anything doing I/O or RPC.
 */
#include "journalspec_tree.h"

#include <stdlib.h>
#include <string.h>

#include "gazette/duration.h"

static const char *str_of(const char *s)
{
	return s ? s : "";
}

static int str_eq(const char *a, const char *b)
{
	return strcmp(str_of(a), str_of(b)) == 0;
}

static void strs_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void labels_strs_free(struct gaz__jlabel *l, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(l[i].name);
		free(l[i].value);
	}
}

static void labels_free(struct gaz__jlabel *l, size_t n)
{
	labels_strs_free(l, n);
	free(l);
}

void gaz__jspec_release(struct gaz__jspec *s)
{
	free(s->name);
	labels_free(s->labels, s->n_labels);
	strs_free(s->stores, s->n_stores);
	free(s->postfix);
	memset(s, 0, sizeof(*s));
}

void gaz__jnode_release(struct gaz__jnode *n)
{
	for (size_t i = 0; i < n->n_children; i++)
		gaz__jnode_release(&n->children[i]);
	free(n->children);
	gaz__jspec_release(&n->spec);
	memset(n, 0, sizeof(*n));
	n->del = -1;
}

int gaz__jnode_is_dir(const struct gaz__jnode *n)
{
	const char *name = str_of(n->spec.name);
	size_t len = strlen(name);

	return len == 0 || name[len - 1] == '/';
}

/* ---- string lists and label groups ---- */

static int strs_copy(char ***dst, size_t *n_dst, char *const *src, size_t n)
{
	char **v;

	if (n == 0)
		return 0;
	if (!(v = calloc(n, sizeof(*v))))
		return GAZ_ENOMEM;
	*dst = v;
	for (*n_dst = 0; *n_dst < n; (*n_dst)++)
		if (!(v[*n_dst] = strdup(str_of(src[*n_dst]))))
			return GAZ_ENOMEM;
	return 0;
}

static int strs_eq(char *const *a, size_t na, char *const *b, size_t nb)
{
	if (na != nb)
		return 0;
	for (size_t i = 0; i < na; i++)
		if (!str_eq(a[i], b[i]))
			return 0;
	return 1;
}

static int label_cmp(const void *x, const void *y)
{
	const struct gaz__jlabel *a = x, *b = y;
	int c = strcmp(str_of(a->name), str_of(b->name));

	return c ? c : strcmp(str_of(a->value), str_of(b->value));
}

/* Index just past the group of labels named like l[i]. */
static size_t group_end(const struct gaz__jlabel *l, size_t n, size_t i)
{
	size_t e = i + 1;

	while (e < n && str_eq(l[e].name, l[i].name))
		e++;
	return e;
}

/* Start of the group named `name` in l[0:n], or n when absent. */
static size_t group_find(const struct gaz__jlabel *l, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (str_eq(l[i].name, name))
			return i;
	return n;
}

/* 1 when o holds a group with a[i:e]'s name and exactly its values. */
static int group_in(const struct gaz__jlabel *a, size_t i, size_t e,
		    const struct gaz__jlabel *o, size_t no)
{
	size_t j = group_find(o, no, a[i].name);

	if (j == no || group_end(o, no, j) - j != e - i)
		return 0;
	for (; i < e; i++, j++)
		if (!str_eq(a[i].value, o[j].value))
			return 0;
	return 1;
}

/* Keeps the groups of l that `o` holds identically (keep_equal = 1, an
 * intersection) or does not (keep_equal = 0, a subtraction). In place. */
static void labels_filter(struct gaz__jlabel *l, size_t *n, const struct gaz__jlabel *o,
			  size_t no, int keep_equal)
{
	size_t i = 0, w = 0, e;

	for (; i < *n; i = e) {
		int keep;

		e = group_end(l, *n, i);
		keep = group_in(l, i, e, o, no) == keep_equal;
		for (size_t k = i; k < e; k++) {
			if (keep) {
				l[w++] = l[k];
			} else {
				labels_strs_free(&l[k], 1);
			}
		}
	}
	*n = w;
}

/* c's labels plus every group of p whose name c lacks. */
static int labels_union(struct gaz__jspec *c, const struct gaz__jspec *p)
{
	size_t add = 0, n = c->n_labels, i;
	struct gaz__jlabel *v;

	for (i = 0; i < p->n_labels; i++)
		add += group_find(c->labels, c->n_labels, p->labels[i].name) == c->n_labels;
	if (add == 0)
		return 0;
	if (!(v = calloc(n + add, sizeof(*v))))
		return GAZ_ENOMEM;
	if (n)
		memcpy(v, c->labels, n * sizeof(*v));
	for (i = 0; i < p->n_labels; i++) {
		if (group_find(c->labels, c->n_labels, p->labels[i].name) != c->n_labels)
			continue;
		v[n].name = strdup(str_of(p->labels[i].name));
		v[n].value = strdup(str_of(p->labels[i].value));
		if (!v[n].name || !v[n].value) {
			/* c keeps its own labels; drop only the copies. */
			labels_strs_free(v + c->n_labels, n + 1 - c->n_labels);
			free(v);
			return GAZ_ENOMEM;
		}
		n++;
	}
	free(c->labels);
	c->labels = v;
	c->n_labels = n;
	qsort(v, n, sizeof(*v), label_cmp);
	return 0;
}

/* ---- union, intersection and subtraction of partial specs ---- */

static int fragment_union(struct gaz__jspec *c, const struct gaz__jspec *p)
{
	if (!c->length)
		c->length = p->length;
	if (!c->codec)
		c->codec = p->codec;
	if (!c->n_stores && p->n_stores) {
		free(c->stores);
		c->stores = NULL;
		if (strs_copy(&c->stores, &c->n_stores, p->stores, p->n_stores))
			return GAZ_ENOMEM;
	}
	if (!c->refresh_ns)
		c->refresh_ns = p->refresh_ns;
	if (!c->retention_ns)
		c->retention_ns = p->retention_ns;
	if (!c->flush_ns)
		c->flush_ns = p->flush_ns;
	if (!*str_of(c->postfix) && *str_of(p->postfix)) {
		free(c->postfix);
		if (!(c->postfix = strdup(p->postfix)))
			return GAZ_ENOMEM;
	}
	return 0;
}

/* Fills each zero field of c from p (UnionJournalSpecs(c, p)). */
static int spec_union(struct gaz__jspec *c, const struct gaz__jspec *p)
{
	if (!c->replication)
		c->replication = p->replication;
	if (!c->flags)
		c->flags = p->flags;
	if (!c->max_append_rate)
		c->max_append_rate = p->max_append_rate;
	if (labels_union(c, p))
		return GAZ_ENOMEM;
	return fragment_union(c, p);
}

static void str_clear(char **s)
{
	free(*s);
	*s = NULL;
}

static void stores_clear(struct gaz__jspec *s)
{
	strs_free(s->stores, s->n_stores);
	s->stores = NULL;
	s->n_stores = 0;
}

/* Zeroes each field of a that b does not share (IntersectJournalSpecs). */
static void spec_intersect(struct gaz__jspec *a, const struct gaz__jspec *b)
{
	a->replication = a->replication == b->replication ? a->replication : 0;
	a->length = a->length == b->length ? a->length : 0;
	a->codec = a->codec == b->codec ? a->codec : 0;
	a->refresh_ns = a->refresh_ns == b->refresh_ns ? a->refresh_ns : 0;
	a->retention_ns = a->retention_ns == b->retention_ns ? a->retention_ns : 0;
	a->flush_ns = a->flush_ns == b->flush_ns ? a->flush_ns : 0;
	a->flags = a->flags == b->flags ? a->flags : 0;
	a->max_append_rate = a->max_append_rate == b->max_append_rate ? a->max_append_rate : 0;
	if (!strs_eq(a->stores, a->n_stores, b->stores, b->n_stores))
		stores_clear(a);
	if (!str_eq(a->postfix, b->postfix))
		str_clear(&a->postfix);
	labels_filter(a->labels, &a->n_labels, b->labels, b->n_labels, 1);
}

/* Zeroes each field of a that equals b's (SubtractJournalSpecs). */
static void spec_subtract(struct gaz__jspec *a, const struct gaz__jspec *b)
{
	a->replication = a->replication == b->replication ? 0 : a->replication;
	a->length = a->length == b->length ? 0 : a->length;
	a->codec = a->codec == b->codec ? 0 : a->codec;
	a->refresh_ns = a->refresh_ns == b->refresh_ns ? 0 : a->refresh_ns;
	a->retention_ns = a->retention_ns == b->retention_ns ? 0 : a->retention_ns;
	a->flush_ns = a->flush_ns == b->flush_ns ? 0 : a->flush_ns;
	a->flags = a->flags == b->flags ? 0 : a->flags;
	a->max_append_rate = a->max_append_rate == b->max_append_rate ? 0 : a->max_append_rate;
	if (strs_eq(a->stores, a->n_stores, b->stores, b->n_stores))
		stores_clear(a);
	if (str_eq(a->postfix, b->postfix))
		str_clear(&a->postfix);
	labels_filter(a->labels, &a->n_labels, b->labels, b->n_labels, 0);
}

/* ---- shape checks ---- */

static int validate_children(const struct gaz__jnode *n, int depth, struct gaz_status *st);

static int validate_node(const struct gaz__jnode *n, int depth, struct gaz_status *st)
{
	const char *name = str_of(n->spec.name);

	if (depth > GAZ__JTREE_MAX_DEPTH)
		return gaz_status_set(st, GAZ_EINVAL, "line %d: \"%s\" nests deeper than %d levels",
				      n->line, name, GAZ__JTREE_MAX_DEPTH);
	if (!gaz__jnode_is_dir(n)) {
		if (n->n_children)
			return gaz_status_set(st, GAZ_EINVAL,
					      "line %d: journal \"%s\" has children "
					      "(only directories, named \"\" or ending in '/', may)",
					      n->line, name);
		return 0;
	}
	if (n->revision)
		return gaz_status_set(st, GAZ_EINVAL,
				      "line %d: directory \"%s\" has revision %lld "
				      "(only journals may)", n->line, name, (long long)n->revision);
	if (!n->n_children)
		return gaz_status_set(st, GAZ_EINVAL, "line %d: directory \"%s\" has no children",
				      n->line, name);
	return validate_children(n, depth, st);
}

static int validate_children(const struct gaz__jnode *n, int depth, struct gaz_status *st)
{
	const char *name = str_of(n->spec.name);
	size_t len = strlen(name);
	int rc;

	for (size_t i = 0; i < n->n_children; i++) {
		const struct gaz__jnode *c = &n->children[i];
		const char *cname = str_of(c->spec.name);
		const char *prev = i ? str_of(n->children[i - 1].spec.name) : NULL;

		if (strncmp(cname, name, len) != 0)
			return gaz_status_set(st, GAZ_EINVAL,
					      "line %d: child \"%s\" is not under directory \"%s\"",
					      c->line, cname, name);
		if (prev && strcmp(prev, cname) >= 0)
			return gaz_status_set(st, GAZ_EINVAL,
					      "line %d: children of \"%s\" are not in strictly "
					      "ascending order (\"%s\" after \"%s\")",
					      c->line, name, cname, prev);
		if ((rc = validate_node(c, depth + 1, st)))
			return rc;
	}
	return 0;
}

int gaz__jnode_validate(const struct gaz__jnode *root, struct gaz_status *st)
{
	return validate_node(root, 0, st);
}

/* ---- flattening into an ApplyRequest ---- */

static int push_down(struct gaz__jnode *n)
{
	int rc;

	for (size_t i = 0; i < n->n_children; i++) {
		struct gaz__jnode *c = &n->children[i];

		if (c->del < 0)
			c->del = n->del;
		if ((rc = spec_union(&c->spec, &n->spec)) || (rc = push_down(c)))
			return rc;
	}
	return 0;
}

static int labels_to_pb(const struct gaz__jspec *s, Protocol__LabelSet **out)
{
	Protocol__LabelSet *ls = malloc(sizeof(*ls));

	if (!(*out = ls))
		return GAZ_ENOMEM;
	protocol__label_set__init(ls);
	if (s->n_labels && !(ls->labels = calloc(s->n_labels, sizeof(*ls->labels))))
		return GAZ_ENOMEM;
	for (size_t i = 0; i < s->n_labels; i++) {
		Protocol__Label *l = malloc(sizeof(*l));

		if (!l)
			return GAZ_ENOMEM;
		protocol__label__init(l);
		ls->labels[ls->n_labels++] = l;
		l->name = strdup(str_of(s->labels[i].name));
		l->value = strdup(str_of(s->labels[i].value));
		if (!l->name || !l->value)
			return GAZ_ENOMEM;
	}
	return 0;
}

static int fragment_to_pb(const struct gaz__jspec *s, Protocol__JournalSpec__Fragment **out)
{
	Protocol__JournalSpec__Fragment *f = malloc(sizeof(*f));

	if (!(*out = f))
		return GAZ_ENOMEM;
	protocol__journal_spec__fragment__init(f);
	f->length = s->length;
	f->compression_codec = (Protocol__CompressionCodec)s->codec;
	if (strs_copy(&f->stores, &f->n_stores, s->stores, s->n_stores))
		return GAZ_ENOMEM;
	f->refresh_interval = gaz_duration_new_pb(s->refresh_ns);
	f->retention = gaz_duration_new_pb(s->retention_ns);
	f->flush_interval = gaz_duration_new_pb(s->flush_ns);
	f->path_postfix_template = strdup(str_of(s->postfix));
	if (!f->refresh_interval || !f->retention || !f->flush_interval ||
	    !f->path_postfix_template)
		return GAZ_ENOMEM;
	return 0;
}

/* Builds a full JournalSpec; on error *out holds what was built so far. */
static int spec_to_pb(const struct gaz__jspec *s, Protocol__JournalSpec **out)
{
	Protocol__JournalSpec *j = malloc(sizeof(*j));

	if (!(*out = j))
		return GAZ_ENOMEM;
	protocol__journal_spec__init(j);
	j->replication = s->replication;
	j->flags = s->flags;
	j->max_append_rate = s->max_append_rate;
	if (!(j->name = strdup(str_of(s->name))) || labels_to_pb(s, &j->labels) ||
	    fragment_to_pb(s, &j->fragment))
		return GAZ_ENOMEM;
	if (s->has_suspend) {
		if (!(j->suspend = malloc(sizeof(*j->suspend))))
			return GAZ_ENOMEM;
		protocol__journal_spec__suspend__init(j->suspend);
		j->suspend->level = (Protocol__JournalSpec__Suspend__Level)s->suspend_level;
		j->suspend->offset = s->suspend_offset;
	}
	return 0;
}

static size_t count_journals(const struct gaz__jnode *n)
{
	size_t c = 0;

	if (!gaz__jnode_is_dir(n))
		return 1;
	for (size_t i = 0; i < n->n_children; i++)
		c += count_journals(&n->children[i]);
	return c;
}

static int add_changes(const struct gaz__jnode *n, Protocol__ApplyRequest *req)
{
	Protocol__ApplyRequest__Change *c;
	int rc;

	if (gaz__jnode_is_dir(n)) {
		for (size_t i = 0; i < n->n_children; i++)
			if ((rc = add_changes(&n->children[i], req)))
				return rc;
		return 0;
	}
	if (!(c = malloc(sizeof(*c))))
		return GAZ_ENOMEM;
	protocol__apply_request__change__init(c);
	req->changes[req->n_changes++] = c;
	c->expect_mod_revision = n->revision;
	if (n->del == 1)
		return (c->delete_ = strdup(str_of(n->spec.name))) ? 0 : GAZ_ENOMEM;
	return spec_to_pb(&n->spec, &c->upsert);
}

int gaz__jnode_flatten(struct gaz__jnode *root, Protocol__ApplyRequest **out,
		       struct gaz_status *st)
{
	Protocol__ApplyRequest *req;
	size_t n = count_journals(root);
	int rc;

	if ((rc = push_down(root)))
		return gaz_status_set(st, rc, "flattening journal specs: out of memory");
	if (!(req = malloc(sizeof(*req))))
		return gaz_status_set(st, GAZ_ENOMEM, "flattening journal specs: out of memory");
	protocol__apply_request__init(req);
	if (n && !(req->changes = calloc(n, sizeof(*req->changes)))) {
		free(req);
		return gaz_status_set(st, GAZ_ENOMEM, "flattening journal specs: out of memory");
	}
	if ((rc = add_changes(root, req))) {
		protocol__apply_request__free_unpacked(req, NULL);
		return gaz_status_set(st, rc, "flattening journal specs: out of memory");
	}
	*out = req;
	return 0;
}

/* ---- hoisting listed journals ---- */

static int labels_from_pb(const Protocol__LabelSet *ls, struct gaz__jspec *s)
{
	if (!ls || !ls->n_labels)
		return 0;
	if (!(s->labels = calloc(ls->n_labels, sizeof(*s->labels))))
		return GAZ_ENOMEM;
	for (; s->n_labels < ls->n_labels; s->n_labels++) {
		struct gaz__jlabel *l = &s->labels[s->n_labels];

		l->name = strdup(str_of(ls->labels[s->n_labels]->name));
		l->value = strdup(str_of(ls->labels[s->n_labels]->value));
		if (!l->name || !l->value) {
			s->n_labels++;
			return GAZ_ENOMEM;
		}
	}
	/* Brokers keep labels sorted; sort anyway, grouping relies on it. */
	qsort(s->labels, s->n_labels, sizeof(*s->labels), label_cmp);
	return 0;
}

static int durations_from_pb(const Protocol__JournalSpec__Fragment *f, struct gaz__jspec *s,
			     struct gaz_status *st)
{
	struct gaz_status sub = {0};

	if (gaz_duration_from_pb(f->refresh_interval, &s->refresh_ns, &sub) ||
	    gaz_duration_from_pb(f->retention, &s->retention_ns, &sub) ||
	    gaz_duration_from_pb(f->flush_interval, &s->flush_ns, &sub))
		return gaz_status_set(st, GAZ_EINVAL, "journal \"%s\": %s", str_of(s->name),
				      sub.msg);
	return 0;
}

static int fragment_from_pb(const Protocol__JournalSpec__Fragment *f, struct gaz__jspec *s,
			    struct gaz_status *st)
{
	if (!f)
		return 0;
	s->length = f->length;
	s->codec = (int32_t)f->compression_codec;
	if (strs_copy(&s->stores, &s->n_stores, f->stores, f->n_stores))
		return gaz_status_set(st, GAZ_ENOMEM, "copying journal specs: out of memory");
	if (*str_of(f->path_postfix_template) && !(s->postfix = strdup(f->path_postfix_template)))
		return gaz_status_set(st, GAZ_ENOMEM, "copying journal specs: out of memory");
	return durations_from_pb(f, s, st);
}

static int spec_from_pb(const Protocol__JournalSpec *p, struct gaz__jspec *s,
			struct gaz_status *st)
{
	if (!(s->name = strdup(str_of(p->name))) || labels_from_pb(p->labels, s))
		return gaz_status_set(st, GAZ_ENOMEM, "copying journal specs: out of memory");
	s->replication = p->replication;
	s->flags = p->flags;
	s->max_append_rate = p->max_append_rate;
	if (p->suspend) {
		s->has_suspend = 1;
		s->suspend_level = (int32_t)p->suspend->level;
		s->suspend_offset = p->suspend->offset;
	}
	return fragment_from_pb(p->fragment, s, st);
}

/* Length of the '/'-terminated prefix a and b share (journalspace's
 * sharedPrefix): "a/b/c" and "a/b/d" share 4, "a/x" and "b/x" share 0. */
static size_t shared_prefix(const char *a, const char *b)
{
	size_t l = 0;
	const char *slash;

	while ((slash = strchr(a + l, '/'))) {
		size_t n = (size_t)(slash - (a + l)) + 1;

		if (strncmp(a + l, b + l, n) != 0)
			break;
		l += n;
	}
	return l;
}

static size_t min_shared_prefix(const struct gaz__jnode *v, size_t n)
{
	size_t m = SIZE_MAX;

	for (size_t i = 1; i < n; i++) {
		size_t l = shared_prefix(v[i - 1].spec.name, v[i].spec.name);

		m = l < m ? l : m;
	}
	return m;
}

/* Moves v[0:n] (n >= 2, sorted) under a new directory `dir` named by their
 * shortest adjacent shared prefix m. Runs of adjacent nodes sharing more than
 * m become sub-directories, recursively. The result equals journalspace's
 * extractTree, which repeatedly wraps the longest run of maximal shared
 * prefix; this builds the same tree top-down in O(n * depth). */
static int build_dir(struct gaz__jnode *v, size_t n, struct gaz__jnode *dir, int depth)
{
	size_t m = min_shared_prefix(v, n), segs = 1, b = 0, i;
	int rc;

	if (depth > GAZ__JTREE_MAX_DEPTH)
		return GAZ_ERANGE;
	for (i = 1; i < n; i++)
		segs += shared_prefix(v[i - 1].spec.name, v[i].spec.name) == m;
	dir->del = -1;
	if (!(dir->spec.name = strndup(v[0].spec.name, m)) ||
	    !(dir->children = calloc(segs, sizeof(*dir->children))))
		return GAZ_ENOMEM;
	for (i = 1; i <= n; i++) {
		struct gaz__jnode *c;

		if (i < n && shared_prefix(v[i - 1].spec.name, v[i].spec.name) != m)
			continue;
		c = &dir->children[dir->n_children++];
		c->del = -1;
		if (i - b == 1) {
			*c = v[b];
			memset(&v[b], 0, sizeof(v[b]));
			v[b].del = -1;
		} else if ((rc = build_dir(v + b, i - b, c, depth + 1))) {
			return rc;
		}
		b = i;
	}
	return 0;
}

/* Bottom-up: a directory takes what all its children share, and the
 * children drop it (journalspace Node.Hoist, less `suspend`). */
static int hoist(struct gaz__jnode *n)
{
	int rc;

	if (!gaz__jnode_is_dir(n) || !n->n_children)
		return 0;
	for (size_t i = 0; i < n->n_children; i++)
		if ((rc = hoist(&n->children[i])))
			return rc;
	if ((rc = spec_union(&n->spec, &n->children[0].spec)))
		return rc;
	for (size_t i = 1; i < n->n_children; i++)
		spec_intersect(&n->spec, &n->children[i].spec);
	for (size_t i = 0; i < n->n_children; i++)
		spec_subtract(&n->children[i].spec, &n->spec);
	return 0;
}

static int leaves_from_pb(const struct gaz_journal_rev *js, size_t n, struct gaz__jnode *v,
			  struct gaz_status *st)
{
	int rc;

	for (size_t i = 0; i < n; i++) {
		v[i].del = -1;
		if (!js[i].spec)
			return gaz_status_set(st, GAZ_EINVAL, "journal %zu has no spec", i);
		if (i && strcmp(str_of(js[i - 1].spec->name), str_of(js[i].spec->name)) >= 0)
			return gaz_status_set(st, GAZ_EINVAL,
					      "journals are not sorted by name (\"%s\" after \"%s\")",
					      str_of(js[i].spec->name), str_of(js[i - 1].spec->name));
		if ((rc = spec_from_pb(js[i].spec, &v[i].spec, st)))
			return rc;
		v[i].revision = js[i].mod_revision;
	}
	return 0;
}

int gaz__jnode_hoisted(const struct gaz_journal_rev *js, size_t n, struct gaz__jnode *root,
		       struct gaz_status *st)
{
	struct gaz__jnode *v = NULL;
	int rc = 0;

	root->del = -1;
	if (n == 0)
		return 0;
	if (!(v = calloc(n, sizeof(*v))))
		return gaz_status_set(st, GAZ_ENOMEM, "hoisting journal specs: out of memory");
	if ((rc = leaves_from_pb(js, n, v, st)))
		goto out;
	if (n == 1) {
		*root = v[0];
		memset(&v[0], 0, sizeof(v[0]));
	} else if ((rc = build_dir(v, n, root, 0))) {
		gaz_status_set(st, rc, rc == GAZ_ERANGE ?
			       "hoisting journal specs: names nest too deeply" :
			       "hoisting journal specs: out of memory");
		goto out;
	}
	if ((rc = hoist(root)))
		gaz_status_set(st, rc, "hoisting journal specs: out of memory");
out:
	for (size_t i = 0; i < n; i++)
		gaz__jnode_release(&v[i]);
	free(v);
	if (rc)
		gaz__jnode_release(root);
	return rc;
}
