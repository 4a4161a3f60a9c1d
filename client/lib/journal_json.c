/*
 * journal_json.c - a journal or shard ListResponse as gogo jsonpb prints
 * it (OrigName, EmitDefaults), built with jansson.
 *
 * Every builder returns a new json_t reference or NULL (out of memory, or a
 * string that is not UTF-8). jansson's *_set_new / *_append_new accept NULL
 * and report failure, so a NULL anywhere surfaces as a failed `add` and the
 * partial object is dropped by its owner. Non-nullable messages that
 * protobuf-c left NULL print as their zero value, as Go's value structs do.
 */
#include "gazette/journal_json.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gazette/duration.h"

static int add(json_t *obj, const char *key, json_t *v)
{
	return json_object_set_new(obj, key, v) ? -1 : 0;
}

static json_t *done(json_t *obj, int failed)
{
	if (failed) {
		json_decref(obj);
		return NULL;
	}
	return obj;
}

static json_t *str(const char *s)
{
	return json_string(s ? s : "");
}

static json_t *i64(int64_t v)
{
	char num[24];

	snprintf(num, sizeof(num), "%" PRId64, v);
	return json_string(num);
}

static json_t *u64(uint64_t v)
{
	char num[24];

	snprintf(num, sizeof(num), "%" PRIu64, v);
	return json_string(num);
}

/* A known value by name; an unknown one as a bare number, as jsonpb does. */
static json_t *enum_val(const ProtobufCEnumDescriptor *d, int v)
{
	const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(d, v);

	return ev ? json_string(ev->name) : json_integer(v);
}

static json_t *duration(const Google__Protobuf__Duration *d)
{
	char text[GAZ_DURATION_JSON_MAX];

	return json_string(gaz_duration_format_json(d ? d->seconds : 0, d ? d->nanos : 0, text));
}

static json_t *str_list(char *const *v, size_t n)
{
	json_t *a = json_array();
	int failed = !a;

	for (size_t i = 0; !failed && i < n; i++)
		failed = json_array_append_new(a, str(v[i])) != 0;
	return done(a, failed);
}

static json_t *process_id(const Protocol__ProcessSpec__ID *id)
{
	json_t *o = json_object();

	return done(o, !o || add(o, "zone", str(id ? id->zone : NULL)) ||
			       add(o, "suffix", str(id ? id->suffix : NULL)));
}

static json_t *members(const Protocol__Route *r)
{
	json_t *a = json_array();
	int failed = !a;

	for (size_t i = 0; !failed && r && i < r->n_members; i++)
		failed = json_array_append_new(a, process_id(r->members[i])) != 0;
	return done(a, failed);
}

static json_t *route(const Protocol__Route *r)
{
	json_t *o = json_object();

	return done(o, !o || add(o, "members", members(r)) ||
			       add(o, "primary", json_integer(r ? r->primary : 0)) ||
			       add(o, "endpoints",
				   r ? str_list(r->endpoints, r->n_endpoints) : json_array()));
}

static json_t *etcd(const Protocol__Header__Etcd *e)
{
	json_t *o = json_object();

	return done(o, !o || add(o, "cluster_id", u64(e ? e->cluster_id : 0)) ||
			       add(o, "member_id", u64(e ? e->member_id : 0)) ||
			       add(o, "revision", i64(e ? e->revision : 0)) ||
			       add(o, "raft_term", u64(e ? e->raft_term : 0)));
}

static json_t *header(const Protocol__Header *h)
{
	json_t *o = json_object();

	return done(o, !o || add(o, "process_id", process_id(h ? h->process_id : NULL)) ||
			       add(o, "route", route(h ? h->route : NULL)) ||
			       add(o, "etcd", etcd(h ? h->etcd : NULL)));
}

static json_t *label(const Protocol__Label *l)
{
	json_t *o = json_object();

	return done(o, !o || add(o, "name", str(l->name)) || add(o, "value", str(l->value)) ||
			       add(o, "prefix", json_boolean(l->prefix)));
}

static json_t *label_set(const Protocol__LabelSet *ls)
{
	json_t *o = json_object(), *a = json_array();
	int failed = !o || !a;

	for (size_t i = 0; !failed && ls && i < ls->n_labels; i++)
		failed = json_array_append_new(a, label(ls->labels[i])) != 0;
	if (failed) {
		json_decref(a);
		json_decref(o);
		return NULL;
	}
	return done(o, add(o, "labels", a));
}

static json_t *fragment(const Protocol__JournalSpec__Fragment *f)
{
	json_t *o = json_object();

	return done(o, !o || add(o, "length", i64(f ? f->length : 0)) ||
			       add(o, "compression_codec",
				   enum_val(&protocol__compression_codec__descriptor,
					    f ? (int)f->compression_codec : 0)) ||
			       add(o, "stores", f ? str_list(f->stores, f->n_stores) : json_array()) ||
			       add(o, "refresh_interval", duration(f ? f->refresh_interval : NULL)) ||
			       add(o, "retention", duration(f ? f->retention : NULL)) ||
			       add(o, "flush_interval", duration(f ? f->flush_interval : NULL)) ||
			       add(o, "path_postfix_template",
				   str(f ? f->path_postfix_template : NULL)));
}

static json_t *suspend(const Protocol__JournalSpec__Suspend *s)
{
	json_t *o;

	if (!s)
		return json_null();
	o = json_object();
	return done(o, !o || add(o, "level",
				 enum_val(&protocol__journal_spec__suspend__level__descriptor,
					  (int)s->level)) ||
			       add(o, "offset", i64(s->offset)));
}

static json_t *spec(const Protocol__JournalSpec *s)
{
	json_t *o = json_object();

	return done(o, !o || add(o, "name", str(s ? s->name : NULL)) ||
			       add(o, "replication", json_integer(s ? s->replication : 0)) ||
			       add(o, "labels", label_set(s ? s->labels : NULL)) ||
			       add(o, "fragment", fragment(s ? s->fragment : NULL)) ||
			       add(o, "flags", json_integer(s ? s->flags : 0)) ||
			       add(o, "max_append_rate", i64(s ? s->max_append_rate : 0)) ||
			       add(o, "suspend", suspend(s ? s->suspend : NULL)));
}

static json_t *journal(const Protocol__ListResponse__Journal *j)
{
	json_t *o = json_object();

	return done(o, !o || add(o, "spec", spec(j->spec)) ||
			       add(o, "mod_revision", i64(j->mod_revision)) ||
			       add(o, "route", route(j->route)) ||
			       add(o, "create_revision", i64(j->create_revision)));
}

static json_t *journals(const Protocol__ListResponse *r)
{
	json_t *a = json_array();
	int failed = !a;

	for (size_t i = 0; !failed && i < r->n_journals; i++)
		failed = json_array_append_new(a, journal(r->journals[i])) != 0;
	return done(a, failed);
}

static json_t *list_response(const Protocol__ListResponse *r)
{
	json_t *o = json_object();

	return done(o, !o || add(o, "status", enum_val(&protocol__status__descriptor,
						       (int)r->status)) ||
			       add(o, "header", header(r->header)) ||
			       add(o, "journals", journals(r)));
}

/* ---- consumer shards ------------------------------------------------------------ */

static json_t *source(const Consumer__ShardSpec__Source *src)
{
	json_t *o = json_object();

	return done(o, !o || add(o, "journal", str(src->journal)) ||
			       add(o, "min_offset", i64(src->min_offset)));
}

static json_t *sources(const Consumer__ShardSpec *s)
{
	json_t *a = json_array();
	int failed = !a;

	for (size_t i = 0; !failed && s && i < s->n_sources; i++)
		failed = json_array_append_new(a, source(s->sources[i])) != 0;
	return done(a, failed);
}

static json_t *shard_spec(const Consumer__ShardSpec *s)
{
	static const Consumer__ShardSpec zero = CONSUMER__SHARD_SPEC__INIT;
	json_t *o = json_object();

	s = s ? s : &zero;
	return done(o, !o || add(o, "id", str(s->id)) || add(o, "sources", sources(s)) ||
			       add(o, "recovery_log_prefix", str(s->recovery_log_prefix)) ||
			       add(o, "hint_prefix", str(s->hint_prefix)) ||
			       add(o, "hint_backups", json_integer(s->hint_backups)) ||
			       add(o, "max_txn_duration", duration(s->max_txn_duration)) ||
			       add(o, "min_txn_duration", duration(s->min_txn_duration)) ||
			       add(o, "disable", json_boolean(s->disable)) ||
			       add(o, "hot_standbys", json_integer(s->hot_standbys)) ||
			       add(o, "labels", label_set(s->labels)) ||
			       add(o, "disable_wait_for_ack", json_boolean(s->disable_wait_for_ack)) ||
			       add(o, "ring_buffer_size", json_integer(s->ring_buffer_size)) ||
			       add(o, "read_channel_size", json_integer(s->read_channel_size)));
}

static json_t *replica_status(const Consumer__ReplicaStatus *rs)
{
	json_t *o = json_object();

	return done(o, !o || add(o, "code", enum_val(&consumer__replica_status__code__descriptor,
						     (int)rs->code)) ||
			       add(o, "errors", str_list(rs->errors, rs->n_errors)));
}

static json_t *shard(const Consumer__ListResponse__Shard *sh)
{
	json_t *o = json_object(), *st = json_array();
	int failed = !o || !st;

	for (size_t i = 0; !failed && i < sh->n_status; i++)
		failed = json_array_append_new(st, replica_status(sh->status[i])) != 0;
	if (failed) {
		json_decref(st);
		json_decref(o);
		return NULL;
	}
	return done(o, add(o, "spec", shard_spec(sh->spec)) ||
			       add(o, "mod_revision", i64(sh->mod_revision)) ||
			       add(o, "route", route(sh->route)) || add(o, "status", st) ||
			       add(o, "create_revision", i64(sh->create_revision)));
}

static json_t *shard_list_response(const Consumer__ListResponse *r)
{
	json_t *o = json_object(), *a = json_array();
	int failed = !o || !a;

	for (size_t i = 0; !failed && i < r->n_shards; i++)
		failed = json_array_append_new(a, shard(r->shards[i])) != 0;
	if (failed) {
		json_decref(a);
		json_decref(o);
		return NULL;
	}
	return done(o, add(o, "status", enum_val(&consumer__status__descriptor, (int)r->status)) ||
			       add(o, "header", header(r->header)) || add(o, "shards", a) ||
			       add(o, "extension", json_null()));
}

/* The escape Go's encoding/json writes for byte run p[0:*n], or NULL. */
static const char *go_escape(const unsigned char *p, size_t left, size_t *n)
{
	*n = 1;
	switch (p[0]) {
	case '<': return "\\u003c";
	case '>': return "\\u003e";
	case '&': return "\\u0026";
	}
	if (left >= 3 && p[0] == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9)) {
		*n = 3;
		return p[2] == 0xa8 ? "\\u2028" : "\\u2029";
	}
	return NULL;
}

/* Rewrites `s` with Go's HTML-safe escapes. These bytes can only occur
 * inside JSON strings, so a byte-wise pass over the text is exact. */
static char *go_escapes(const char *s, size_t len, size_t *out_len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t need = 0, n, w = 0;
	const char *esc;
	char *out;

	for (size_t i = 0; i < len; i += n)
		need += (esc = go_escape(p + i, len - i, &n)) ? strlen(esc) : n;
	if (!(out = malloc(need + 1)))
		return NULL;
	for (size_t i = 0; i < len; i += n) {
		if ((esc = go_escape(p + i, len - i, &n))) {
			memcpy(out + w, esc, strlen(esc));
			w += strlen(esc);
		} else {
			memcpy(out + w, s + i, n);
			w += n;
		}
	}
	out[w] = '\0';
	*out_len = w;
	return out;
}

/* render dumps `doc` (consumed) compactly with Go's escapes. */
static int render(json_t *doc, const char *what, char **out, size_t *out_len,
		  struct gaz_status *st)
{
	char *text, *escaped;
	size_t len;

	if (!doc)
		return gaz_status_set(st, GAZ_EINVAL,
				      "rendering %s as json failed: out of memory or "
				      "a string is not valid UTF-8", what);
	text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(doc);
	if (!text)
		return gaz_status_set(st, GAZ_ENOMEM, "rendering %s as json: out of memory", what);
	escaped = go_escapes(text, strlen(text), &len);
	free(text);
	if (!escaped)
		return gaz_status_set(st, GAZ_ENOMEM, "rendering %s as json: out of memory", what);
	*out = escaped;
	if (out_len)
		*out_len = len;
	return 0;
}

int gaz_journal_json_list_response(const Protocol__ListResponse *resp, char **out,
				   size_t *out_len, struct gaz_status *st)
{
	return render(list_response(resp), "journals", out, out_len, st);
}

int gaz_shard_json_list_response(const Consumer__ListResponse *resp, char **out, size_t *out_len,
				 struct gaz_status *st)
{
	return render(shard_list_response(resp), "shards", out, out_len, st);
}
