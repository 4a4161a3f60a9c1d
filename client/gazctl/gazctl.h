/*
 * gazctl.h - shared pieces of gazctl, the gazette-c command-line tool
 * mirroring Gazette's `gazctl` (facts §9.1): the command table, the
 * `journals` global configuration, and output helpers (tables, humanized
 * sizes and times, Go-style JSON strings, offsets files, progress lines).
 *
 * One file per subcommand (cmd_<name>.c) defines a struct gazctl_cmd;
 * main.c picks the command from argv, parses flags (INI, environment,
 * argv) with lib/common/flags.h and runs it. A command returns 0 or a
 * negative GAZ_E* code with a one-line reason in its status; main prints
 * "gazctl: <reason>" and exits 1.
 *
 * Programs may abort on OOM: gazctl_xmalloc and friends do.
 */
#ifndef GAZ_GAZCTL_GAZCTL_H
#define GAZ_GAZCTL_GAZCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "common/flags.h"
#include "consumer.pb-c.h"
#include "gazette/client.h"

/* ---- configuration and commands ------------------------------------------ */

/* The global options of the `journals` group (journals, journals.Logging,
 * journals.Broker) and of the `shards` group (shards, shards.Logging,
 * shards.Consumer, shards.Broker): broker_ fields are --broker.*,
 * consumer_ ones --consumer.*. Strings are owned by the flags parser. */
struct gazctl_global {
	char *zone;
	char *log_level;
	char *log_format;
	char *broker_address;
	char *broker_cert_file, *broker_cert_key_file, *broker_trusted_ca_file;
	char *broker_auth_keys, *broker_auth_token;
	int64_t broker_cache_size;   /* route cache entries; <= 0: none */
	int64_t broker_cache_ttl_ns; /* route cache entry lifetime */
	char *consumer_address;
	char *consumer_cert_file, *consumer_cert_key_file, *consumer_trusted_ca_file;
	char *consumer_auth_keys, *consumer_auth_token;
	int64_t consumer_cache_size;
	int64_t consumer_cache_ttl_ns;
};

extern struct gazctl_global gazctl_cfg;

/* `journals read --file-root`, read by main to configure the client. */
extern char *gazctl_read_file_root;
extern const struct gaz_flag gazctl_global_flags[];

/* Set by main for commands that handle SIGINT/SIGTERM themselves (read):
 * the signal then cancels the client instead of killing the process. */
extern struct gaz_client *volatile gazctl_cancel_client;

struct gazctl_cmd {
	const char *name;         /* "list" */
	const char *summary;      /* one line, for the command listing */
	const char *description;  /* --help paragraph */
	const struct gaz_flag *flags; /* the command's own options */
	bool needs_client;        /* main creates the client before run */
	bool cancellable;         /* SIGINT/SIGTERM cancel instead of kill */
	int (*run)(struct gaz_client *c, struct gaz_status *st);
	const char *usage_tail;   /* after the options in "Usage:"; NULL = none */
};

extern const struct gazctl_cmd gazctl_cmd_list, gazctl_cmd_apply, gazctl_cmd_append,
	gazctl_cmd_read, gazctl_cmd_fragments, gazctl_cmd_prune, gazctl_cmd_reset_head,
	gazctl_cmd_suspend;
extern const struct gazctl_cmd gazctl_cmd_shards_list, gazctl_cmd_shards_apply,
	gazctl_cmd_shards_edit, gazctl_cmd_shards_unassign, gazctl_cmd_shards_prune;

/* Every `journals` command, by name, NULL-terminated (main.c); the same
 * for `shards`, whose global options are gazctl_shards_flags. */
extern const struct gazctl_cmd *const gazctl_journals_cmds[];
extern const struct gazctl_cmd *const gazctl_shards_cmds[];
extern const struct gaz_flag gazctl_shards_flags[];

/* The positional arguments of the command being run (borrowed from argv). */
extern char **gazctl_args;
extern int gazctl_nargs;

/* gazctl_broker hands a `shards` command a client of --broker.address
 * (made on first use, owned and freed by main). 0 or the client error. */
int gazctl_broker(struct gaz_client **out, struct gaz_status *st);

/* gazctl_attach_uuids runs `gazctl attach-uuids` (cmd_attach_uuids.c):
 * parses its own flags, returns 0, GAZ_FLAGS_HELP after help, or an error
 * with its text in `st`. */
int gazctl_attach_uuids(int argc, char **argv, struct gaz_status *st);
extern const char gazctl_attach_uuids_description[];
extern const struct gaz_flag gazctl_attach_uuids_flags[];

/* gazctl_print_config runs `gazctl print-config`: every journals option
 * of every command, merged from INI and environment, written as INI.
 * Returns 0, GAZ_FLAGS_HELP after printing help (and the version line),
 * or a flag error with its text in `st`. */
int gazctl_print_config(int argc, char **argv, struct gaz_status *st);

/* gazctl_list_selector parses `selector` (gazctl -l grammar; "" = all) and
 * lists the matching journals. *out is freed by the caller. */
int gazctl_list_selector(struct gaz_client *c, const char *selector,
			 Protocol__ListResponse **out, struct gaz_status *st);

/* gazctl_list_shards parses `selector` and lists the matching shards of
 * the consumer client `c`. *out is freed by the caller. */
int gazctl_list_shards(struct gaz_client *c, const char *selector, Consumer__ListResponse **out,
		       struct gaz_status *st);

/* gazctl_is_full_suspended: the journal's spec is FULL suspended (such
 * journals are skipped by read, fragments, reset-head and suspend). */
bool gazctl_is_full_suspended(const Protocol__ListResponse__Journal *j);

/* gazctl_each_unsuspended lists the journals matching `selector` and calls
 * fn(c, journal name, st) for each one that is not FULL suspended, in name
 * order, stopping at the first non-zero return, which it returns (or the
 * List error). */
int gazctl_each_unsuspended(struct gaz_client *c, const char *selector,
			    int (*fn)(struct gaz_client *c, const char *journal, struct gaz_status *st),
			    struct gaz_status *st);

/* Largest specs file gazctl_read_file reads (bytes). */
#define GAZCTL_SPECS_MAX (256u << 20)

/* gazctl_read_file reads a whole file ("-" = stdin) into *buf (malloc'd,
 * NUL-terminated, *len bytes). GAZ_EIO "failed to read YAML input ...". */
int gazctl_read_file(const char *path, char **buf, size_t *len, struct gaz_status *st);

/* gazctl_shards_prepare decodes a shard set, validates the ApplyRequest and
 * verifies its journals through gazctl_broker() (cmd_shards_apply.c); the
 * errors name the failed step as Gazette's gazctl does. *out is freed with
 * gaz_shardspec_apply_free. */
int gazctl_shards_prepare(const char *yaml, size_t len, Consumer__ApplyRequest **out,
			  struct gaz_status *st);

/* gazctl_shards_send applies a prepared request in batches of
 * `max_txn_size` (0 = one) and logs the revision. */
int gazctl_shards_send(struct gaz_client *c, const Consumer__ApplyRequest *req,
		       int64_t max_txn_size, struct gaz_status *st);

/* gazctl_label_values joins the values of label `name` in `set` with ','
 * (a list column of `list -L`); "<none>" when absent. Returns a malloc'd
 * string. */
char *gazctl_label_values(const Protocol__LabelSet *set, const char *name);

/* ---- removing fragments (fragment_remove.c) ------------------------------- */

/* Stores opened by a prune run, by URL. */
struct gazctl_store_slot;
struct gazctl_remover {
	const char *file_root;  /* roots file:// stores; NULL: they fail */
	bool dry_run;           /* open stores, remove nothing */
	struct gazctl_store_slot *stores;
	size_t nstores;
};

/* gazctl_remove_fragment removes (dry run: checks it could remove) the
 * persisted fragment `f` of `journal` from its backing store, printing
 * what happened. Returns 0, GAZ_ENOTFOUND (already gone; warned) or the
 * failure (reported on stderr naming the fragment). */
int gazctl_remove_fragment(struct gazctl_remover *r, const Protocol__Fragment *f,
			   const char *journal);
void gazctl_remover_release(struct gazctl_remover *r);

/* ---- memory --------------------------------------------------------------- */

void *gazctl_xmalloc(size_t n);
void *gazctl_xcalloc(size_t n, size_t size);
void *gazctl_xrealloc(void *p, size_t n);
char *gazctl_xstrdup(const char *s);

/* ---- tables (tablewriter v1 default style, as Gazette prints) -------------- */

/* A table: a header row and data rows of `ncols` strings, all owned. */
struct gazctl_table {
	size_t ncols;
	char **header;   /* ncols strings, as given (formatted when rendered) */
	char ***rows;    /* nrows arrays of ncols strings */
	size_t nrows;
};

/* gazctl_table_init sets the header (copied). */
void gazctl_table_init(struct gazctl_table *t, size_t ncols, const char *const *header);

/* gazctl_table_add appends a row of ncols strings (copied; NULL = ""). */
void gazctl_table_add(struct gazctl_table *t, const char *const *cells);

/* gazctl_table_render writes the table as olekukonko/tablewriter v1.1.0
 * renders it by default: light box-drawing borders, one space of padding,
 * header cells split at letter/digit/symbol boundaries, upper-cased and
 * centred (extra space right), data cells trimmed and left-aligned, no
 * separator line when there are no rows. */
void gazctl_table_render(const struct gazctl_table *t, FILE *out);

/* gazctl_table_release frees everything the table owns. */
void gazctl_table_release(struct gazctl_table *t);

/* gazctl_header_title formats a header cell as tablewriter does
 * (Title(SplitCamelCase(s))): "content-type" -> "CONTENT - TYPE",
 * "SHA1" -> "SHA 1". Returns a malloc'd string. */
char *gazctl_header_title(const char *s);

/* gazctl_display_width: terminal columns of UTF-8 `s` (one per rune). */
size_t gazctl_display_width(const char *s);

/* ---- humanized values (dustin/go-humanize v1.0.1) -------------------------- */

/* gazctl_ibytes writes humanize.IBytes(n): "8 B", "575 KiB", "1.5 MiB". */
char *gazctl_ibytes(uint64_t n, char *buf, size_t cap);

/* gazctl_reltime writes humanize.Time of unix second `then` relative to
 * `now`: "now", "1 second ago", "5 minutes ago", "2 days from now". */
char *gazctl_reltime(int64_t then, int64_t now, char *buf, size_t cap);

/* ---- JSON in Go's encoding/json style ---------------------------------------- */

/* gazctl_json_string writes `s` as a JSON string as Go's encoding/json does
 * (HTML-safe: <, >, & as \u003c \u003e \u0026; U+2028/9 escaped; invalid
 * UTF-8 as \ufffd). */
void gazctl_json_string(FILE *out, const char *s);

/* gazctl_fragment_json writes one FragmentsResponse._Fragment as Go's
 * json.Encoder does for `journals fragments -o json`, plus a newline. */
void gazctl_fragment_json(FILE *out, const Protocol__FragmentsResponse__Fragment *f);

/* gazctl_proto_text writes `m` in protobuf text format as gogo/protobuf's
 * proto.MarshalText does (`journals apply --dry-run`). */
void gazctl_proto_text(FILE *out, const ProtobufCMessage *m);

/* ---- read offsets files ------------------------------------------------------ */

struct gazctl_offset {
	char *journal;  /* owned */
	int64_t offset;
};

struct gazctl_offsets {
	struct gazctl_offset *v; /* sorted by journal (byte order) */
	size_t n;
};

/* gazctl_offsets_parse decodes a JSON object of journal -> integer offset
 * (`journals read --offsets`). Returns 0, GAZ_EINVAL with the reason. */
int gazctl_offsets_parse(const char *text, size_t len, struct gazctl_offsets *out,
			 struct gaz_status *st);

/* gazctl_offsets_get looks `journal` up; true and *off if present. */
bool gazctl_offsets_get(const struct gazctl_offsets *o, const char *journal, int64_t *off);

/* gazctl_offsets_set inserts or replaces journal's offset. */
void gazctl_offsets_set(struct gazctl_offsets *o, const char *journal, int64_t off);

/* gazctl_offsets_write writes {"journal":offset,...} sorted by key, then a
 * newline, as Go's json.Encoder encodes a map. */
void gazctl_offsets_write(const struct gazctl_offsets *o, FILE *out);

void gazctl_offsets_release(struct gazctl_offsets *o);

/* ---- progress on a terminal ---------------------------------------------------- */

/* A progress line on stderr: shown only when stderr is a terminal and the
 * operation has run for at least one second; redrawn at most 4 times a
 * second; thread-safe. */
struct gazctl_progress {
	const char *verb;      /* "appended", "read" */
	bool enabled;
	bool shown;
	int64_t start_ns, last_ns;
};

void gazctl_progress_init(struct gazctl_progress *p, const char *verb, bool enabled);
void gazctl_progress_update(struct gazctl_progress *p, int64_t bytes);
/* gazctl_progress_done draws the final line (if any was shown) and ends it. */
void gazctl_progress_done(struct gazctl_progress *p, int64_t bytes);

#endif
