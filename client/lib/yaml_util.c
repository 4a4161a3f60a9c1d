/*
 * yaml_util.c - strict YAML reading and yaml.v2-shaped writing shared by
 * the spec documents of gazctl (see yaml_util.h). Knows nothing of
 * journals or shards: the keyword tables and their kinds are the callers'.
 */
#include "yaml_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gazette/duration.h"

#define NELEMS(t) (sizeof(t) / sizeof((t)[0]))

int gaz__yaml_line(const yaml_node_t *y)
{
	return (int)y->start_mark.line + 1;
}

yaml_node_t *gaz__yaml_node(struct gaz__yaml_in *c, yaml_node_item_t i)
{
	return yaml_document_get_node(&c->doc, i);
}

int gaz__yaml_oom(struct gaz__yaml_in *c)
{
	return gaz_status_set(c->st, GAZ_ENOMEM, "reading %s: out of memory", c->what);
}

int gaz__yaml_visit(struct gaz__yaml_in *c, const yaml_node_t *y)
{
	if (++c->visits <= GAZ__YAML_MAX_VISITS)
		return 0;
	return gaz_status_set(c->st, GAZ_ERANGE,
			      "line %d: document too large (over %d YAML nodes with aliases expanded)",
			      gaz__yaml_line(y), GAZ__YAML_MAX_VISITS);
}

int gaz__yaml_bad_value(struct gaz__yaml_in *c, const yaml_node_t *y, const char *key,
			const char *why)
{
	return gaz_status_set(c->st, GAZ_EINVAL, "line %d: bad value for \"%s\": %s",
			      gaz__yaml_line(y), key, why);
}

int gaz__yaml_null(const yaml_node_t *y)
{
	const char *t = (const char *)y->data.scalar.value;

	return y->type == YAML_SCALAR_NODE && y->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	       (!y->data.scalar.length || !strcmp(t, "~") || !strcmp(t, "null") ||
		!strcmp(t, "Null") || !strcmp(t, "NULL"));
}

int gaz__yaml_scalar(struct gaz__yaml_in *c, const yaml_node_t *y, const char *key,
		     struct gaz__yaml_scalar *sc)
{
	if (y->type != YAML_SCALAR_NODE)
		return gaz__yaml_bad_value(c, y, key, "want a scalar");
	sc->text = (const char *)y->data.scalar.value;
	if (memchr(sc->text, '\0', y->data.scalar.length))
		return gaz__yaml_bad_value(c, y, key, "contains a NUL byte");
	sc->plain = y->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
	sc->null = gaz__yaml_null(y);
	return 0;
}

/* Plain integer scalar (decimal, 0x hex or 0-prefixed octal, as yaml.v2
 * resolves them) within [lo, hi]. Returns 0, 1 when not an integer, or an
 * error for one out of range. */
static int scalar_int(struct gaz__yaml_in *c, const yaml_node_t *y, const char *key,
		      const struct gaz__yaml_scalar *sc, long long lo, long long hi, long long *out)
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
				      gaz__yaml_line(y), key, sc->text, lo, hi);
	*out = v;
	return 0;
}

int gaz__yaml_int(struct gaz__yaml_in *c, const yaml_node_t *y, const char *key, long long lo,
		  long long hi, long long *out)
{
	struct gaz__yaml_scalar sc;
	int rc;

	if ((rc = gaz__yaml_scalar(c, y, key, &sc)))
		return rc;
	if (sc.null) {
		*out = 0;
		return 0;
	}
	if ((rc = scalar_int(c, y, key, &sc, lo, hi, out)) == 1)
		return gaz_status_set(c->st, GAZ_EINVAL,
				      "line %d: bad value for \"%s\": \"%s\" is not an integer",
				      gaz__yaml_line(y), key, sc.text);
	return rc;
}

int gaz__yaml_str(struct gaz__yaml_in *c, const yaml_node_t *y, const char *key, char **out)
{
	struct gaz__yaml_scalar sc;
	int rc;

	if ((rc = gaz__yaml_scalar(c, y, key, &sc)) || sc.null)
		return rc;
	free(*out);
	if (!(*out = strdup(sc.text)))
		return gaz__yaml_oom(c);
	return 0;
}

int gaz__yaml_bool(struct gaz__yaml_in *c, const yaml_node_t *y, const char *key, int *out)
{
	static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES",
					  "on", "On", "ON", "y", "Y"};
	static const char *const no[] = {"false", "False", "FALSE", "no", "No", "NO",
					 "off", "Off", "OFF", "n", "N"};
	struct gaz__yaml_scalar sc;
	int rc;

	if ((rc = gaz__yaml_scalar(c, y, key, &sc)) || sc.null)
		return rc;
	for (size_t i = 0; sc.plain && i < NELEMS(yes); i++) {
		if (!strcmp(sc.text, yes[i]) || !strcmp(sc.text, no[i])) {
			*out = !strcmp(sc.text, yes[i]);
			return 0;
		}
	}
	return gaz_status_set(c->st, GAZ_EINVAL,
			      "line %d: bad value for \"%s\": \"%s\" is not a boolean",
			      gaz__yaml_line(y), key, sc.text);
}

int gaz__yaml_duration(struct gaz__yaml_in *c, const yaml_node_t *y, const char *key,
		       int64_t *out)
{
	struct gaz_status sub = {0};
	struct gaz__yaml_scalar sc;
	int rc;

	if ((rc = gaz__yaml_scalar(c, y, key, &sc)))
		return rc;
	if (sc.null) {
		*out = 0;
		return 0;
	}
	rc = sc.plain ? gaz_duration_parse_spec(sc.text, out, &sub)
		      : gaz_duration_parse(sc.text, out, &sub);
	return rc ? gaz__yaml_bad_value(c, y, key, sub.msg) : 0;
}

int gaz__yaml_enum(struct gaz__yaml_in *c, const yaml_node_t *y, const char *key,
		   const ProtobufCEnumDescriptor *d, long long lo, long long hi, long long *out)
{
	const ProtobufCEnumValue *ev;
	char names[256] = "";
	struct gaz__yaml_scalar sc;
	int rc;

	if ((rc = gaz__yaml_scalar(c, y, key, &sc)))
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
			      gaz__yaml_line(y), key, sc.text, names);
}

int gaz__yaml_seq(struct gaz__yaml_in *c, const yaml_node_t *y, const char *key, size_t *n)
{
	*n = 0;
	if (gaz__yaml_null(y))
		return 0;
	if (y->type != YAML_SEQUENCE_NODE)
		return gaz__yaml_bad_value(c, y, key, "want a list");
	*n = (size_t)(y->data.sequence.items.top - y->data.sequence.items.start);
	return 0;
}

static const struct gaz__yaml_key *find_key(const struct gaz__yaml_key *keys, size_t nkeys,
					    const yaml_node_t *k)
{
	for (size_t i = 0; i < nkeys; i++)
		if (strlen(keys[i].name) == k->data.scalar.length &&
		    !memcmp(keys[i].name, k->data.scalar.value, k->data.scalar.length))
			return &keys[i];
	return NULL;
}

int gaz__yaml_map(struct gaz__yaml_in *c, const yaml_node_t *y, const struct gaz__yaml_key *keys,
		  size_t nkeys, void *base, const char *what, gaz__yaml_set_fn set)
{
	const char *in = what ? " in " : "", *w = what ? what : "";
	unsigned seen = 0;
	int rc;

	if ((rc = gaz__yaml_visit(c, y)))
		return rc;
	if (y->type != YAML_MAPPING_NODE)
		return gaz_status_set(c->st, GAZ_EINVAL, "line %d: want a mapping%s%s, not a %s",
				      gaz__yaml_line(y), in, w,
				      y->type == YAML_SCALAR_NODE ? "scalar" : "list");
	for (yaml_node_pair_t *p = y->data.mapping.pairs.start; p < y->data.mapping.pairs.top; p++) {
		const yaml_node_t *kn = gaz__yaml_node(c, p->key), *vn = gaz__yaml_node(c, p->value);
		const struct gaz__yaml_key *k;

		if ((rc = gaz__yaml_visit(c, vn)))
			return rc;
		if (kn->type != YAML_SCALAR_NODE)
			return gaz_status_set(c->st, GAZ_EINVAL, "line %d: non-scalar key%s%s",
					      gaz__yaml_line(kn), in, w);
		if (!(k = find_key(keys, nkeys, kn)))
			return gaz_status_set(c->st, GAZ_EINVAL, "line %d: unknown key \"%s\"%s%s",
					      gaz__yaml_line(kn), (const char *)kn->data.scalar.value,
					      in, w);
		if (seen & (1u << (k - keys)))
			return gaz_status_set(c->st, GAZ_EINVAL, "line %d: duplicate key \"%s\"%s%s",
					      gaz__yaml_line(kn), k->name, in, w);
		seen |= 1u << (k - keys);
		if ((rc = set(c, k, vn, (char *)base + k->off)))
			return rc;
	}
	return 0;
}

static int yaml_failure(struct gaz__yaml_in *c, const yaml_parser_t *p)
{
	if (p->error == YAML_MEMORY_ERROR)
		return gaz__yaml_oom(c);
	if (p->error == YAML_READER_ERROR)
		return gaz_status_set(c->st, GAZ_EINVAL, "byte %zu: %s", p->problem_offset,
				      p->problem ? p->problem : "unreadable input");
	if (p->context)
		return gaz_status_set(c->st, GAZ_EINVAL, "line %zu column %zu: %s (%s at line %zu)",
				      p->problem_mark.line + 1, p->problem_mark.column + 1,
				      p->problem ? p->problem : "invalid YAML", p->context,
				      p->context_mark.line + 1);
	return gaz_status_set(c->st, GAZ_EINVAL, "line %zu column %zu: %s",
			      p->problem_mark.line + 1, p->problem_mark.column + 1,
			      p->problem ? p->problem : "invalid YAML");
}

int gaz__yaml_load(struct gaz__yaml_in *c, const char *yaml, size_t len)
{
	yaml_parser_t parser;
	int rc = 0;

	if (!yaml_parser_initialize(&parser))
		return gaz__yaml_oom(c);
	yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, len);
	if (!yaml_parser_load(&parser, &c->doc))
		rc = yaml_failure(c, &parser);
	yaml_parser_delete(&parser);
	return rc;
}

void gaz__yaml_unload(struct gaz__yaml_in *c)
{
	yaml_document_delete(&c->doc);
}

/* ---- writing ---- */

/* Growable output, bounded by GAZ__YAML_OUT_MAX. */
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

	if (n > GAZ__YAML_OUT_MAX - o->len) {
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

int gaz__yaml_needs_quotes(const char *s)
{
	static const char *const words[] = {
		"~", "null", "Null", "NULL", "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No",
		"NO", "true", "True", "TRUE", "false", "False", "FALSE", "on", "On", "ON",
		"off", "Off", "OFF",
	};

	if (!*s || strchr("0123456789+-.", *s))
		return 1;
	for (size_t i = 0; i < NELEMS(words); i++)
		if (!strcmp(s, words[i]))
			return 1;
	return 0;
}

int gaz__yaml_put_scalar(yaml_emitter_t *e, const char *s, int quote)
{
	yaml_event_t ev;

	if (!yaml_scalar_event_initialize(&ev, NULL, (const yaml_char_t *)YAML_STR_TAG,
					  (const yaml_char_t *)s, (int)strlen(s), 1, 1,
					  quote ? YAML_DOUBLE_QUOTED_SCALAR_STYLE :
						  YAML_ANY_SCALAR_STYLE))
		return -1;
	return yaml_emitter_emit(e, &ev) ? 0 : -1;
}

int gaz__yaml_put_str(yaml_emitter_t *e, const char *key, const char *s)
{
	return gaz__yaml_put_scalar(e, key, 0) ||
			       gaz__yaml_put_scalar(e, s, gaz__yaml_needs_quotes(s))
		       ? -1
		       : 0;
}

int gaz__yaml_put_int(yaml_emitter_t *e, const char *key, long long v)
{
	char num[24];

	snprintf(num, sizeof(num), "%lld", v);
	return gaz__yaml_put_scalar(e, key, 0) || gaz__yaml_put_scalar(e, num, 0) ? -1 : 0;
}

int gaz__yaml_put_bool(yaml_emitter_t *e, const char *key, int v)
{
	return gaz__yaml_put_scalar(e, key, 0) || gaz__yaml_put_scalar(e, v ? "true" : "false", 0)
		       ? -1
		       : 0;
}

int gaz__yaml_put_enum(yaml_emitter_t *e, const char *key, const ProtobufCEnumDescriptor *d,
		       long long v)
{
	const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(d, (int)v);

	if (ev && ev->value == v)
		return gaz__yaml_put_scalar(e, key, 0) || gaz__yaml_put_scalar(e, ev->name, 0) ? -1
											     : 0;
	return gaz__yaml_put_int(e, key, v);
}

int gaz__yaml_put_duration(yaml_emitter_t *e, const char *key, int64_t ns)
{
	char text[GAZ_DURATION_STR_MAX];

	return gaz__yaml_put_scalar(e, key, 0) ||
			       gaz__yaml_put_scalar(e, gaz_duration_format(ns, text), 0)
		       ? -1
		       : 0;
}

static int put_begin_style(yaml_emitter_t *e, int mapping, int flow)
{
	yaml_event_t ev;
	int ok = mapping ? yaml_mapping_start_event_initialize(
				   &ev, NULL, NULL, 1,
				   flow ? YAML_FLOW_MAPPING_STYLE : YAML_BLOCK_MAPPING_STYLE)
			 : yaml_sequence_start_event_initialize(
				   &ev, NULL, NULL, 1,
				   flow ? YAML_FLOW_SEQUENCE_STYLE : YAML_BLOCK_SEQUENCE_STYLE);

	return ok && yaml_emitter_emit(e, &ev) ? 0 : -1;
}

int gaz__yaml_put_begin(yaml_emitter_t *e, int mapping)
{
	return put_begin_style(e, mapping, 0);
}

int gaz__yaml_put_begin_flow(yaml_emitter_t *e, int mapping)
{
	return put_begin_style(e, mapping, 1);
}

int gaz__yaml_put_end(yaml_emitter_t *e, int mapping)
{
	yaml_event_t ev;
	int ok = mapping ? yaml_mapping_end_event_initialize(&ev)
			 : yaml_sequence_end_event_initialize(&ev);

	return ok && yaml_emitter_emit(e, &ev) ? 0 : -1;
}

static int put_document(yaml_emitter_t *e, int (*body)(yaml_emitter_t *, const void *),
			const void *arg)
{
	yaml_event_t ev;

	if (!yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) ||
	    !yaml_emitter_emit(e, &ev) ||
	    !yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) ||
	    !yaml_emitter_emit(e, &ev) || body(e, arg) ||
	    !yaml_document_end_event_initialize(&ev, 1) || !yaml_emitter_emit(e, &ev) ||
	    !yaml_stream_end_event_initialize(&ev) || !yaml_emitter_emit(e, &ev))
		return -1;
	return yaml_emitter_flush(e) ? 0 : -1;
}

int gaz__yaml_emit(int (*body)(yaml_emitter_t *e, const void *arg), const void *arg,
		   const char *what, char **out, size_t *out_len, struct gaz_status *st)
{
	struct obuf o = {0};
	yaml_emitter_t e;
	int rc = 0;

	if (!yaml_emitter_initialize(&e))
		return gaz_status_set(st, GAZ_ENOMEM, "writing %s: out of memory", what);
	yaml_emitter_set_output(&e, obuf_write, &o);
	yaml_emitter_set_unicode(&e, 1);
	yaml_emitter_set_width(&e, -1);
	yaml_emitter_set_indent(&e, 2);
	if (put_document(&e, body, arg)) {
		if (o.too_big)
			rc = gaz_status_set(st, GAZ_ERANGE, "writing %s: over %u bytes", what,
					    GAZ__YAML_OUT_MAX);
		else if (e.error == YAML_EMITTER_ERROR)
			rc = gaz_status_set(st, GAZ_EINVAL, "writing %s: %s", what,
					    e.problem ? e.problem : "emitter error");
		else
			rc = gaz_status_set(st, GAZ_ENOMEM, "writing %s: out of memory", what);
		free(o.p);
	} else {
		*out = o.p;
		if (out_len)
			*out_len = o.len;
	}
	yaml_emitter_delete(&e);
	return rc;
}
