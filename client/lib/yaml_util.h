/*
 * yaml_util.h - internal: the strict YAML reading and the writing shared by
 * gazctl's spec documents, the journal hierarchy (journalspec_yaml.c) and
 * the shard set (shardspec_yaml.c). Not a public header.
 *
 * Reading mirrors yaml.v2 UnmarshalStrict into Go structs: a document is
 * loaded whole with libyaml, then each mapping is read through a keyword
 * table (struct gaz__yaml_key) whose entries say where a value goes;
 * unknown and duplicate keys fail naming the line; integers must be plain
 * (unquoted) scalars; any scalar reads as a string; plain "", "~" and
 * "null" are null, i.e. the zero value. Aliases are followed, but every
 * node visited is counted (GAZ__YAML_MAX_VISITS), so alias bombs fail.
 *
 * Writing goes through libyaml's emitter with yaml.v2's layout (two-space
 * indent, sequences not indented under their key, no line folding) into a
 * buffer bounded by GAZ__YAML_OUT_MAX.
 *
 * Errors carry the document's subject (`what`, e.g. "journal specs") in
 * out-of-memory messages: "reading journal specs: out of memory".
 */
#ifndef GAZ_CLIENT_YAML_UTIL_H
#define GAZ_CLIENT_YAML_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include <protobuf-c/protobuf-c.h>

#include "common/err.h"

/* Most YAML nodes one parse may visit, counting each alias expansion. */
#define GAZ__YAML_MAX_VISITS 1000000
/* Largest YAML text one emit builds (bytes). */
#define GAZ__YAML_OUT_MAX (64u << 20)

/* A document being read. */
struct gaz__yaml_in {
	yaml_document_t doc;
	struct gaz_status *st;
	const char *what; /* "journal specs", "shard specs" */
	size_t visits;
	int depth;
};

/* A scalar value as read: text, whether plain (unquoted), whether null. */
struct gaz__yaml_scalar {
	const char *text;
	int plain;
	int null;
};

/* One YAML key of a mapping: where its value goes, relative to the struct
 * the mapping fills (nginx-style keyword table). `kind` is the caller's. */
struct gaz__yaml_key {
	const char *name;
	int kind;
	size_t off;
};

/* Stores the value `y` of key `k` at `dst` (= base + k->off). */
typedef int (*gaz__yaml_set_fn)(struct gaz__yaml_in *c, const struct gaz__yaml_key *k,
				const yaml_node_t *y, void *dst);

/* gaz__yaml_load loads the first document of yaml[0..len) into c->doc
 * (release with gaz__yaml_unload). GAZ_EINVAL with libyaml's line, column
 * and problem, GAZ_ENOMEM. */
int gaz__yaml_load(struct gaz__yaml_in *c, const char *yaml, size_t len);
void gaz__yaml_unload(struct gaz__yaml_in *c);

int gaz__yaml_line(const yaml_node_t *y);
yaml_node_t *gaz__yaml_node(struct gaz__yaml_in *c, yaml_node_item_t i);
/* Counts one visited node; GAZ_ERANGE past GAZ__YAML_MAX_VISITS. */
int gaz__yaml_visit(struct gaz__yaml_in *c, const yaml_node_t *y);
/* "line N: bad value for \"key\": why" */
int gaz__yaml_bad_value(struct gaz__yaml_in *c, const yaml_node_t *y, const char *key,
			const char *why);
int gaz__yaml_oom(struct gaz__yaml_in *c);
/* 1 for a plain scalar yaml.v2 resolves to null. */
int gaz__yaml_null(const yaml_node_t *y);
int gaz__yaml_scalar(struct gaz__yaml_in *c, const yaml_node_t *y, const char *key,
		     struct gaz__yaml_scalar *sc);

/* Typed values; null leaves the zero value (strings: unchanged). */
int gaz__yaml_int(struct gaz__yaml_in *c, const yaml_node_t *y, const char *key, long long lo,
		  long long hi, long long *out);
int gaz__yaml_str(struct gaz__yaml_in *c, const yaml_node_t *y, const char *key, char **out);
int gaz__yaml_bool(struct gaz__yaml_in *c, const yaml_node_t *y, const char *key, int *out);
/* Go duration text ("1m30s"), or plain integer nanoseconds. */
int gaz__yaml_duration(struct gaz__yaml_in *c, const yaml_node_t *y, const char *key,
		       int64_t *out);
/* An enum of `d` by name, or an integer in [lo, hi]. */
int gaz__yaml_enum(struct gaz__yaml_in *c, const yaml_node_t *y, const char *key,
		   const ProtobufCEnumDescriptor *d, long long lo, long long hi, long long *out);
/* A sequence (or null: *n = 0); *n is its item count. */
int gaz__yaml_seq(struct gaz__yaml_in *c, const yaml_node_t *y, const char *key, size_t *n);

/* gaz__yaml_map reads mapping `y` through `keys` (at most 32) into `base`
 * with `set`; `what` names the mapping in messages (may be NULL). */
int gaz__yaml_map(struct gaz__yaml_in *c, const yaml_node_t *y, const struct gaz__yaml_key *keys,
		  size_t nkeys, void *base, const char *what, gaz__yaml_set_fn set);

/* ---- writing ------------------------------------------------------------ */

/* 1 when a YAML 1.1 reader (yaml.v2) would resolve plain `s` to something
 * other than a string. */
int gaz__yaml_needs_quotes(const char *s);
int gaz__yaml_put_scalar(yaml_emitter_t *e, const char *s, int quote);
int gaz__yaml_put_str(yaml_emitter_t *e, const char *key, const char *s);
int gaz__yaml_put_int(yaml_emitter_t *e, const char *key, long long v);
int gaz__yaml_put_enum(yaml_emitter_t *e, const char *key, const ProtobufCEnumDescriptor *d,
		       long long v);
int gaz__yaml_put_duration(yaml_emitter_t *e, const char *key, int64_t ns);
int gaz__yaml_put_bool(yaml_emitter_t *e, const char *key, int v);
/* Block mapping (mapping = 1) or sequence start / end; flow = 1 for "{}"/"[]". */
int gaz__yaml_put_begin(yaml_emitter_t *e, int mapping);
int gaz__yaml_put_begin_flow(yaml_emitter_t *e, int mapping);
int gaz__yaml_put_end(yaml_emitter_t *e, int mapping);

/* gaz__yaml_emit runs body(e, arg) between stream and document events and
 * hands out the text: *out (free()), *out_len (may be NULL). `what` as for
 * reading ("writing journal specs: ..."). GAZ_ERANGE past
 * GAZ__YAML_OUT_MAX, GAZ_EINVAL for an emitter error, GAZ_ENOMEM. */
int gaz__yaml_emit(int (*body)(yaml_emitter_t *e, const void *arg), const void *arg,
		   const char *what, char **out, size_t *out_len, struct gaz_status *st);

#endif
