/*
 * journal_cr.c - JournalSpec CR <-> protobuf (see journal_cr.h).
 *
 * Every part of a spec built here is its own heap allocation, so
 * protobuf_c_message_free_unpacked(msg, NULL) releases it, exactly like a
 * message protobuf-c unpacked. On any error the partly built spec is freed
 * that way too.
 */
#include "operator/journal_cr.h"

#include <stdlib.h>
#include <string.h>

#include "operator/cr_fields.h"

static const char *const codec_names[] = {"INVALID", "NONE", "GZIP", "ZSTANDARD", "SNAPPY",
					  "GZIP_OFFLOAD_DECOMPRESSION"};
static const char *const level_names[] = {"NONE", "PARTIAL", "FULL"};
static const struct {
	const char *name;
	uint32_t value;
} flag_names[] = {{"O_RDONLY", 1}, {"O_WRONLY", 2}, {"O_RDWR", 4}};

const char *gaz_codec_name(int codec)
{
	return codec >= 0 && codec <= 5 ? codec_names[codec] : "INVALID";
}

const char *gaz_suspend_level_name(int level)
{
	return level >= 0 && level <= 2 ? level_names[level] : "UNKNOWN";
}

/* ---- CR -> protobuf ------------------------------------------------------- */

/* Reads an optional integer field; absent leaves *out unchanged. */
static int get_int(const json_t *o, const char *key, const char *field, int64_t *out,
		   struct gaz_status *st)
{
	const json_t *v = json_object_get(o, key);

	if (!v)
		return 0;
	if (!json_is_integer(v))
		return gaz_cr_field_err(st, field, "not an integer");
	*out = (int64_t)json_integer_value(v);
	return 0;
}

/* Reads an optional string field; absent gives NULL. */
static int get_str(const json_t *o, const char *key, const char *field, const char **out,
		   struct gaz_status *st)
{
	const json_t *v = json_object_get(o, key);

	*out = NULL;
	if (!v)
		return 0;
	if (!json_is_string(v))
		return gaz_cr_field_err(st, field, "not a string");
	*out = json_string_value(v);
	return 0;
}

static int label_cmp(const void *a, const void *b)
{
	const Protocol__Label *x = *(Protocol__Label *const *)a, *y = *(Protocol__Label *const *)b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->value, y->value);
}

int gaz_cr_labels_to_pb(const json_t *arr, Protocol__LabelSet **out, struct gaz_status *st)
{
	Protocol__LabelSet *set = malloc(sizeof(*set));
	size_t i, n = json_array_size(arr);
	const json_t *it;

	if (!set)
		return GAZ_ENOMEM;
	protocol__label_set__init(set);
	*out = set;
	if (arr && !json_is_array(arr))
		return gaz_cr_field_err(st, "labels", "not a list");
	if (n && !(set->labels = calloc(n, sizeof(*set->labels))))
		return GAZ_ENOMEM;
	json_array_foreach(arr, i, it) {
		const char *name = json_string_value(json_object_get(it, "name"));
		const char *value = json_string_value(json_object_get(it, "value"));
		Protocol__Label *l;
		if (!name)
			return gaz_status_set(st, GAZ_EINVAL, "spec.labels[%zu].name: missing", i);
		if (!(l = malloc(sizeof(*l))))
			return GAZ_ENOMEM;
		protocol__label__init(l);
		set->labels[set->n_labels++] = l;
		if (!(l->name = strdup(name)) || !(l->value = strdup(value ? value : "")))
			return GAZ_ENOMEM;
	}
	if (set->n_labels > 1)
		qsort(set->labels, set->n_labels, sizeof(*set->labels), label_cmp);
	size_t w = 0; /* drop exact duplicates */
	for (size_t r = 0; r < set->n_labels; r++) {
		if (w && !label_cmp(&set->labels[r], &set->labels[w - 1]))
			protobuf_c_message_free_unpacked(&set->labels[r]->base, NULL);
		else
			set->labels[w++] = set->labels[r];
	}
	set->n_labels = w;
	return 0;
}

static int convert_codec(const json_t *frag, Protocol__JournalSpec__Fragment *f,
			 struct gaz_status *st)
{
	const char *codec;
	int rc;

	if ((rc = get_str(frag, "compressionCodec", "fragment.compressionCodec", &codec, st)))
		return rc;
	if (!codec)
		return 0; /* INVALID: validation reports it */
	for (int c = 1; c <= 5; c++)
		if (!strcmp(codec, codec_names[c])) {
			f->compression_codec = (Protocol__CompressionCodec)c;
			return 0;
		}
	return gaz_status_set(st, GAZ_EINVAL, "spec.fragment.compressionCodec: unknown codec \"%s\"",
			      codec);
}

static int convert_stores(const json_t *arr, Protocol__JournalSpec__Fragment *f,
			  struct gaz_status *st)
{
	size_t i, n = json_array_size(arr);
	const json_t *it;

	if (arr && !json_is_array(arr))
		return gaz_cr_field_err(st, "fragment.stores", "not a list");
	if (n && !(f->stores = calloc(n, sizeof(*f->stores))))
		return GAZ_ENOMEM;
	json_array_foreach(arr, i, it) {
		if (!json_is_string(it))
			return gaz_status_set(st, GAZ_EINVAL, "spec.fragment.stores[%zu]: not a string", i);
		if (!(f->stores[f->n_stores] = strdup(json_string_value(it))))
			return GAZ_ENOMEM;
		f->n_stores++;
	}
	return 0;
}

static int convert_fragment(const json_t *frag, Protocol__JournalSpec__Fragment **out,
			    struct gaz_status *st)
{
	Protocol__JournalSpec__Fragment *f = malloc(sizeof(*f));
	const char *tpl;
	int rc;

	if (!f)
		return GAZ_ENOMEM;
	protocol__journal_spec__fragment__init(f);
	f->path_postfix_template = NULL;
	*out = f;
	if (frag && !json_is_object(frag))
		return gaz_cr_field_err(st, "fragment", "not an object");
	if ((rc = get_int(frag, "length", "fragment.length", &f->length, st)) ||
	    (rc = convert_codec(frag, f, st)) ||
	    (rc = convert_stores(json_object_get(frag, "stores"), f, st)) ||
	    (rc = gaz_cr_get_duration(frag, "refreshInterval", "fragment.refreshInterval",
				 &f->refresh_interval, st)) ||
	    (rc = gaz_cr_get_duration(frag, "retention", "fragment.retention", &f->retention, st)) ||
	    (rc = gaz_cr_get_duration(frag, "flushInterval", "fragment.flushInterval", &f->flush_interval,
				 st)) ||
	    (rc = get_str(frag, "pathPostfixTemplate", "fragment.pathPostfixTemplate", &tpl, st)))
		return rc;
	return (f->path_postfix_template = strdup(tpl ? tpl : "")) ? 0 : GAZ_ENOMEM;
}

static int convert_flags(const json_t *spec, uint32_t *flags, struct gaz_status *st)
{
	const char *s;
	int rc;

	if ((rc = get_str(spec, "flags", "flags", &s, st)) || !s)
		return rc;
	for (size_t i = 0; i < sizeof(flag_names) / sizeof(flag_names[0]); i++)
		if (!strcmp(s, flag_names[i].name)) {
			*flags = flag_names[i].value;
			return 0;
		}
	return gaz_status_set(st, GAZ_EINVAL, "spec.flags: unknown flag \"%s\"", s);
}

static int convert(const json_t *spec, Protocol__JournalSpec *js, struct gaz_status *st)
{
	const char *name;
	int64_t repl = 0, rate = 0;
	int rc;

	if (!json_is_object(spec))
		return gaz_status_set(st, GAZ_EINVAL, "spec: not an object");
	if ((rc = get_str(spec, "name", "name", &name, st)))
		return rc;
	if (!(js->name = strdup(name ? name : "")))
		return GAZ_ENOMEM;
	if ((rc = get_int(spec, "replication", "replication", &repl, st)) ||
	    (rc = get_int(spec, "maxAppendRate", "maxAppendRate", &rate, st)))
		return rc;
	if (repl < INT32_MIN || repl > INT32_MAX)
		return gaz_cr_field_err(st, "replication", "out of range");
	js->replication = (int32_t)repl;
	js->max_append_rate = rate;
	if ((rc = gaz_cr_labels_to_pb(json_object_get(spec, "labels"), &js->labels, st)) ||
	    (rc = convert_fragment(json_object_get(spec, "fragment"), &js->fragment, st)))
		return rc;
	return convert_flags(spec, &js->flags, st);
}

int gaz_journal_cr_to_spec(const json_t *spec, Protocol__JournalSpec **out,
			   struct gaz_status *st)
{
	Protocol__JournalSpec *js = malloc(sizeof(*js));
	int rc;

	if (!js)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	protocol__journal_spec__init(js);
	js->name = NULL;
	if ((rc = convert(spec, js, st))) {
		if (rc == GAZ_ENOMEM)
			gaz_status_set(st, rc, "out of memory");
		protobuf_c_message_free_unpacked(&js->base, NULL);
		return rc;
	}
	*out = js;
	return 0;
}

enum gaz_deletion_policy gaz_journal_cr_policy(const json_t *spec)
{
	const char *p = json_string_value(json_object_get(spec, "deletionPolicy"));

	return p && !strcmp(p, "Delete") ? GAZ_DELETION_DELETE : GAZ_DELETION_RETAIN;
}

/* ---- protobuf -> CR ---------------------------------------------------------- */

static json_t *fragment_to_cr(const Protocol__JournalSpec__Fragment *f)
{
	json_t *o = json_object(), *stores = json_array();
	int bad = !o || !stores;

	if (!bad && f->length)
		bad |= json_object_set_new(o, "length", json_integer(f->length));
	if (!bad && f->compression_codec)
		bad |= json_object_set_new(o, "compressionCodec",
					   json_string(gaz_codec_name(f->compression_codec)));
	for (size_t i = 0; !bad && i < f->n_stores; i++)
		bad |= json_array_append_new(stores, json_string(f->stores[i]));
	if (!bad && f->n_stores)
		bad |= json_object_set(o, "stores", stores);
	if (!bad)
		bad |= gaz_cr_put_duration(o, "refreshInterval", f->refresh_interval) ||
		       gaz_cr_put_duration(o, "retention", f->retention) ||
		       gaz_cr_put_duration(o, "flushInterval", f->flush_interval);
	if (!bad && f->path_postfix_template && *f->path_postfix_template)
		bad |= json_object_set_new(o, "pathPostfixTemplate",
					   json_string(f->path_postfix_template));
	json_decref(stores);
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int gaz_cr_labels_from_pb(json_t *o, const Protocol__LabelSet *set)
{
	json_t *arr;

	if (!set || !set->n_labels)
		return 0;
	if (!(arr = json_array()))
		return -1;
	for (size_t i = 0; i < set->n_labels; i++)
		if (json_array_append_new(arr, json_pack("{s:s, s:s}", "name", set->labels[i]->name,
							 "value", set->labels[i]->value))) {
			json_decref(arr);
			return -1;
		}
	return json_object_set_new(o, "labels", arr);
}

json_t *gaz_journal_spec_to_cr(const Protocol__JournalSpec *spec)
{
	json_t *o = json_object(), *frag = NULL;
	int bad = !o;

	if (!bad)
		bad |= json_object_set_new(o, "name", json_string(spec->name ? spec->name : ""));
	if (!bad && spec->replication)
		bad |= json_object_set_new(o, "replication", json_integer(spec->replication));
	if (!bad)
		bad |= gaz_cr_labels_from_pb(o, spec->labels);
	if (!bad && spec->fragment && !(frag = fragment_to_cr(spec->fragment)))
		bad = 1;
	if (!bad && frag)
		bad |= json_object_set_new(o, "fragment", frag);
	for (size_t i = 0; !bad && i < sizeof(flag_names) / sizeof(flag_names[0]); i++)
		if (spec->flags == flag_names[i].value)
			bad |= json_object_set_new(o, "flags", json_string(flag_names[i].name));
	if (!bad && spec->max_append_rate)
		bad |= json_object_set_new(o, "maxAppendRate", json_integer(spec->max_append_rate));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ---- comparison ----------------------------------------------------------------- */

static bool labels_eq(const Protocol__LabelSet *a, const Protocol__LabelSet *b)
{
	size_t na = a ? a->n_labels : 0, nb = b ? b->n_labels : 0;

	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (!gaz_cr_str_eq(a->labels[i]->name, b->labels[i]->name) ||
		    !gaz_cr_str_eq(a->labels[i]->value, b->labels[i]->value) ||
		    a->labels[i]->prefix != b->labels[i]->prefix)
			return false;
	return true;
}

static bool fragment_eq(const Protocol__JournalSpec__Fragment *a,
			const Protocol__JournalSpec__Fragment *b)
{
	static const Protocol__JournalSpec__Fragment zero = PROTOCOL__JOURNAL_SPEC__FRAGMENT__INIT;

	a = a ? a : &zero;
	b = b ? b : &zero;
	if (a->length != b->length || a->compression_codec != b->compression_codec ||
	    a->n_stores != b->n_stores || gaz_cr_dur_ns(a->refresh_interval) != gaz_cr_dur_ns(b->refresh_interval) ||
	    gaz_cr_dur_ns(a->retention) != gaz_cr_dur_ns(b->retention) ||
	    gaz_cr_dur_ns(a->flush_interval) != gaz_cr_dur_ns(b->flush_interval) ||
	    !gaz_cr_str_eq(a->path_postfix_template, b->path_postfix_template))
		return false;
	for (size_t i = 0; i < a->n_stores; i++)
		if (!gaz_cr_str_eq(a->stores[i], b->stores[i]))
			return false;
	return true;
}

bool gaz_journal_spec_equal(const Protocol__JournalSpec *a, const Protocol__JournalSpec *b)
{
	int la = a->suspend ? a->suspend->level : 0, lb = b->suspend ? b->suspend->level : 0;
	int64_t oa = a->suspend ? a->suspend->offset : 0, ob = b->suspend ? b->suspend->offset : 0;

	return gaz_cr_str_eq(a->name, b->name) && a->replication == b->replication &&
	       labels_eq(a->labels, b->labels) && fragment_eq(a->fragment, b->fragment) &&
	       a->flags == b->flags && a->max_append_rate == b->max_append_rate && la == lb &&
	       oa == ob;
}
