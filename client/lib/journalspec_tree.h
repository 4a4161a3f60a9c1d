/*
 * journalspec_tree.h - internal: the journal hierarchy as a tree of partial
 * specs, shared by the YAML parser/emitter (journalspec_yaml.c) and the tree
 * operations (journalspec_tree.c). Not a public header.
 *
 * A partial spec uses zero for "unset" in every field, exactly as Gazette's
 * UnionJournalSpecs / IntersectJournalSpecs / SubtractJournalSpecs do; only
 * `suspend` has an explicit presence bit, because it is a nullable message.
 * Every pointer in these structs is owned by the struct (heap, freed by the
 * _release functions); NULL strings read as "".
 */
#ifndef GAZ_CLIENT_JOURNALSPEC_TREE_H
#define GAZ_CLIENT_JOURNALSPEC_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "gazette/journalspec_yaml.h"
#include "protocol.pb-c.h"

struct gaz__jlabel {
	char *name;
	char *value;
};

struct gaz__jspec {
	char *name;
	int32_t replication;
	struct gaz__jlabel *labels; /* sorted by (name, value), unique */
	size_t n_labels;
	int64_t length;             /* fragment.length, bytes */
	int32_t codec;              /* Protocol__CompressionCodec */
	char **stores;              /* fragment store URLs, in order */
	size_t n_stores;
	int64_t refresh_ns;         /* fragment.refresh_interval */
	int64_t retention_ns;       /* fragment.retention */
	int64_t flush_ns;           /* fragment.flush_interval */
	char *postfix;              /* fragment.path_postfix_template */
	uint32_t flags;             /* Protocol__JournalSpec__Flag value */
	int64_t max_append_rate;    /* bytes per second */
	int has_suspend;
	int32_t suspend_level;      /* Protocol__JournalSpec__Suspend__Level */
	int64_t suspend_offset;
};

struct gaz__jnode {
	struct gaz__jspec spec;
	int del;                    /* -1 unset, 0 false, 1 true */
	int64_t revision;           /* etcd ModRevision; journals only */
	struct gaz__jnode *children;
	size_t n_children;
	int line;                   /* 1-based source line, 0 if built */
};

/* Most nesting levels of directories accepted in either direction. */
#define GAZ__JTREE_MAX_DEPTH 256

void gaz__jspec_release(struct gaz__jspec *s);
/* Releases `n` and its subtree; leaves `n` zeroed with del = -1. */
void gaz__jnode_release(struct gaz__jnode *n);

/* 1 when the node name is "" or ends in '/'. */
int gaz__jnode_is_dir(const struct gaz__jnode *n);

/* gaz__jnode_validate checks the tree-shape rules of a parsed hierarchy
 * (journalspace Node.Validate, less the journal-name check): GAZ_EINVAL with
 * "line N: ..." naming the node. */
int gaz__jnode_validate(const struct gaz__jnode *root, struct gaz_status *st);

/* gaz__jnode_flatten pushes parent values down into the children (the tree
 * is modified in place) and builds one Change per journal, in tree order.
 * `*out` is owned by the caller (gaz_journalspec_apply_free). */
int gaz__jnode_flatten(struct gaz__jnode *root, Protocol__ApplyRequest **out,
		       struct gaz_status *st);

/* gaz__jnode_hoisted builds the hoisted tree of sorted journals into `*root`
 * (zeroed by the caller; release with gaz__jnode_release). */
int gaz__jnode_hoisted(const struct gaz_journal_rev *js, size_t n, struct gaz__jnode *root,
		       struct gaz_status *st);

#endif
