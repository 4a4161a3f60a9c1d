/*
 * shard_cr.c - ShardSpec CR <-> protobuf (see shard_cr.h).
 *
 * Every part of a spec built here is its own heap allocation, so
 * protobuf_c_message_free_unpacked(msg, NULL) releases it, exactly like a
 * message protobuf-c unpacked; on error the partly built spec is freed
 * that way too.
 */
#include "operator/shard_cr.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "operator/cr_fields.h"
#include "operator/journal_cr.h"
#include "protocol/labels.h"

/* ---- CR -> protobuf ------------------------------------------------------- */

/* An optional integer within [lo, hi]; absent leaves *out unchanged. */
static int get_int(const json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out,
		   struct gaz_status *st)
{
	const json_t *v = json_object_get(o, key);

	if (!v)
		return 0;
	if (!json_is_integer(v))
		return gaz_cr_field_err(st, key, "not an integer");
	if (json_integer_value(v) < lo || json_integer_value(v) > hi)
		return gaz_cr_field_err(st, key, "out of range");
	*out = (int64_t)json_integer_value(v);
	return 0;
}

static int get_bool(const json_t *o, const char *key, protobuf_c_boolean *out,
		    struct gaz_status *st)
{
	const json_t *v = json_object_get(o, key);

	if (v && !json_is_boolean(v))
		return gaz_cr_field_err(st, key, "not a boolean");
	*out = json_is_true(v);
	return 0;
}

/* An optional string copied into *out ("" when absent). */
static int get_str(const json_t *o, const char *key, char **out, struct gaz_status *st)
{
	const json_t *v = json_object_get(o, key);

	if (v && !json_is_string(v))
		return gaz_cr_field_err(st, key, "not a string");
	return (*out = strdup(v ? json_string_value(v) : "")) ? 0 : GAZ_ENOMEM;
}

static int source_cmp(const void *a, const void *b)
{
	const Consumer__ShardSpec__Source *x = *(Consumer__ShardSpec__Source *const *)a;
	const Consumer__ShardSpec__Source *y = *(Consumer__ShardSpec__Source *const *)b;

	return strcmp(x->journal, y->journal);
}

static int convert_sources(const json_t *arr, Consumer__ShardSpec *s, struct gaz_status *st)
{
	size_t i, n = json_array_size(arr);
	const json_t *it;

	if (arr && !json_is_array(arr))
		return gaz_cr_field_err(st, "sources", "not a list");
	if (n && !(s->sources = calloc(n, sizeof(*s->sources))))
		return GAZ_ENOMEM;
	json_array_foreach(arr, i, it) {
		const char *j = json_string_value(json_object_get(it, "journal"));
		const json_t *off = json_object_get(it, "minOffset");
		Consumer__ShardSpec__Source *src;
		if (!j)
			return gaz_status_set(st, GAZ_EINVAL, "spec.sources[%zu].journal: missing", i);
		if (off && !json_is_integer(off))
			return gaz_status_set(st, GAZ_EINVAL, "spec.sources[%zu].minOffset: not an integer", i);
		if (!(src = malloc(sizeof(*src))))
			return GAZ_ENOMEM;
		consumer__shard_spec__source__init(src);
		s->sources[s->n_sources++] = src;
		src->min_offset = off ? (int64_t)json_integer_value(off) : 0;
		if (!(src->journal = strdup(j)))
			return GAZ_ENOMEM;
	}
	/* Gazette wants them in strictly ascending journal order; duplicates
	 * stay and fail validation with Gazette's message. */
	if (s->n_sources > 1)
		qsort(s->sources, s->n_sources, sizeof(*s->sources), source_cmp);
	return 0;
}

static int convert(const json_t *spec, Consumer__ShardSpec *s, struct gaz_status *st)
{
	int64_t backups = 0, standbys = 0, ring = 0, chan = 0;
	int rc;

	if (!json_is_object(spec))
		return gaz_status_set(st, GAZ_EINVAL, "spec: not an object");
	if ((rc = get_str(spec, "name", &s->id, st)) ||
	    (rc = convert_sources(json_object_get(spec, "sources"), s, st)) ||
	    (rc = get_str(spec, "recoveryLogPrefix", &s->recovery_log_prefix, st)) ||
	    (rc = get_str(spec, "hintPrefix", &s->hint_prefix, st)) ||
	    (rc = get_int(spec, "hintBackups", INT32_MIN, INT32_MAX, &backups, st)) ||
	    (rc = gaz_cr_get_duration(spec, "maxTxnDuration", "maxTxnDuration", &s->max_txn_duration, st)) ||
	    (rc = gaz_cr_get_duration(spec, "minTxnDuration", "minTxnDuration", &s->min_txn_duration, st)) ||
	    (rc = get_bool(spec, "disable", &s->disable, st)) ||
	    (rc = get_int(spec, "hotStandbys", 0, UINT32_MAX, &standbys, st)) ||
	    (rc = gaz_cr_labels_to_pb(json_object_get(spec, "labels"), &s->labels, st)) ||
	    (rc = get_bool(spec, "disableWaitForAck", &s->disable_wait_for_ack, st)) ||
	    (rc = get_int(spec, "ringBufferSize", 0, UINT32_MAX, &ring, st)) ||
	    (rc = get_int(spec, "readChannelSize", 0, UINT32_MAX, &chan, st)))
		return rc;
	s->hint_backups = (int32_t)backups;
	s->hot_standbys = (uint32_t)standbys;
	s->ring_buffer_size = (uint32_t)ring;
	s->read_channel_size = (uint32_t)chan;
	return 0;
}

int gaz_shard_cr_to_spec(const json_t *spec, Consumer__ShardSpec **out, struct gaz_status *st)
{
	Consumer__ShardSpec *s = malloc(sizeof(*s));
	int rc;

	if (!s)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	consumer__shard_spec__init(s);
	s->id = s->recovery_log_prefix = s->hint_prefix = NULL; /* not the shared "" */
	if ((rc = convert(spec, s, st))) {
		if (rc == GAZ_ENOMEM)
			gaz_status_set(st, rc, "out of memory");
		protobuf_c_message_free_unpacked(&s->base, NULL);
		return rc;
	}
	*out = s;
	return 0;
}

/* ---- protobuf -> CR ---------------------------------------------------------- */

static int put_str(json_t *o, const char *key, const char *v)
{
	return v && *v ? json_object_set_new(o, key, json_string(v)) : 0;
}

static int put_int(json_t *o, const char *key, int64_t v)
{
	return v ? json_object_set_new(o, key, json_integer(v)) : 0;
}

static int put_bool(json_t *o, const char *key, bool v)
{
	return v ? json_object_set_new(o, key, json_true()) : 0;
}

static int sources_to_cr(json_t *o, const Consumer__ShardSpec *s)
{
	json_t *arr;

	if (!s->n_sources)
		return 0;
	if (!(arr = json_array()))
		return -1;
	for (size_t i = 0; i < s->n_sources; i++) {
		json_t *src = json_pack("{s:s}", "journal", s->sources[i]->journal ?: "");
		if (!src || put_int(src, "minOffset", s->sources[i]->min_offset) ||
		    json_array_append_new(arr, src)) {
			json_decref(arr);
			return -1;
		}
	}
	return json_object_set_new(o, "sources", arr);
}

json_t *gaz_shard_spec_to_cr(const Consumer__ShardSpec *s)
{
	json_t *o = json_object();
	int bad = !o;

	bad = bad || json_object_set_new(o, "name", json_string(s->id ? s->id : "")) ||
	      sources_to_cr(o, s) || put_str(o, "recoveryLogPrefix", s->recovery_log_prefix) ||
	      put_str(o, "hintPrefix", s->hint_prefix) || put_int(o, "hintBackups", s->hint_backups) ||
	      gaz_cr_put_duration(o, "maxTxnDuration", s->max_txn_duration) ||
	      gaz_cr_put_duration(o, "minTxnDuration", s->min_txn_duration) ||
	      put_bool(o, "disable", s->disable) || put_int(o, "hotStandbys", s->hot_standbys) ||
	      gaz_cr_labels_from_pb(o, s->labels) ||
	      put_bool(o, "disableWaitForAck", s->disable_wait_for_ack) ||
	      put_int(o, "ringBufferSize", s->ring_buffer_size) ||
	      put_int(o, "readChannelSize", s->read_channel_size);
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ---- comparison ----------------------------------------------------------------- */

static bool sources_eq(const Consumer__ShardSpec *a, const Consumer__ShardSpec *b)
{
	if (a->n_sources != b->n_sources)
		return false;
	for (size_t i = 0; i < a->n_sources; i++)
		if (!gaz_cr_str_eq(a->sources[i]->journal, b->sources[i]->journal) ||
		    a->sources[i]->min_offset != b->sources[i]->min_offset)
			return false;
	return true;
}

bool gaz_shard_spec_equal(const Consumer__ShardSpec *a, const Consumer__ShardSpec *b)
{
	return gaz_cr_str_eq(a->id, b->id) && sources_eq(a, b) &&
	       gaz_cr_str_eq(a->recovery_log_prefix, b->recovery_log_prefix) &&
	       gaz_cr_str_eq(a->hint_prefix, b->hint_prefix) && a->hint_backups == b->hint_backups &&
	       gaz_cr_dur_ns(a->max_txn_duration) == gaz_cr_dur_ns(b->max_txn_duration) &&
	       gaz_cr_dur_ns(a->min_txn_duration) == gaz_cr_dur_ns(b->min_txn_duration) &&
	       !a->disable == !b->disable && a->hot_standbys == b->hot_standbys &&
	       gaz_labelset_equal(a->labels, b->labels) &&
	       !a->disable_wait_for_ack == !b->disable_wait_for_ack &&
	       a->ring_buffer_size == b->ring_buffer_size &&
	       a->read_channel_size == b->read_channel_size;
}
