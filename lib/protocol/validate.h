/*
 * validate.h - Gazette's validation rules over the protobuf-c messages of
 * proto/protocol.proto (gazette-facts §3, all numbers exact).
 *
 * Every validator mirrors the Validate() method Gazette's broker/protocol
 * package has for the same message, in the same check order, and reports the
 * first violation with Gazette's dotted context path and wording, e.g.
 * `Fragment.Stores[0]: path component doesn't end in '/' (/x)`.
 *
 * Common contract of the gaz_validate_*() functions:
 * - Inputs are borrowed and never modified; a NULL message pointer is the
 *   message's zero value (protobuf-c leaves absent non-nullable Gazette
 *   fields NULL), a NULL string is "".
 * - Return 0 when valid, GAZ_EINVAL with the reason in `st` (may be NULL),
 *   or GAZ_ENOMEM (only those that parse URLs: stores, endpoints and the
 *   messages holding them).
 * - Thread-safe; no global state.
 * - Lengths are bytes of UTF-8. A C string ends at its first NUL, so a wire
 *   string with an embedded NUL is judged on its prefix (Go would reject the
 *   NUL; protobuf-c does not let us see it).
 */
#ifndef GAZ_PROTOCOL_VALIDATE_H
#define GAZ_PROTOCOL_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "protocol.pb-c.h"

/* §3.1 symbol sets. No allowed character is <= '#' (the etcd key separator). */
#define GAZ_TOKEN_SYMBOLS "-_+/."
#define GAZ_PATH_SYMBOLS "-_+/.=%"

/* Limits of §3, exact. */
#define GAZ_JOURNAL_NAME_MIN 4
#define GAZ_JOURNAL_NAME_MAX 512
#define GAZ_LABEL_NAME_MIN 2
#define GAZ_LABEL_NAME_MAX 64
#define GAZ_LABEL_VALUE_MAX 1024
#define GAZ_REPLICATION_MAX 5
#define GAZ_FRAGMENT_LEN_MIN 1024LL
#define GAZ_FRAGMENT_LEN_MAX (1LL << 34)
#define GAZ_REFRESH_MIN_NS 1000000000LL          /* 1s */
#define GAZ_REFRESH_MAX_NS (86400LL * 1000000000LL) /* 24h */
#define GAZ_FLUSH_MIN_NS (60LL * 1000000000LL)      /* 1m */
#define GAZ_ZONE_MIN 1
#define GAZ_ZONE_MAX 32
#define GAZ_SUFFIX_MIN 4
#define GAZ_SUFFIX_MAX 128
#define GAZ_JOURNAL_LIMIT_MAX (1u << 17)
#define GAZ_PAGE_LIMIT_MAX 10000

/* ---- §3.1 character classes ------------------------------------------- */

/* gaz_rune_is_letter_or_number reports whether code point `r` is in a Unicode
 * L* or N* category (Unicode 15.0, the tables Go's unicode package has; see
 * unicode_tab.h). This is an exact table, not a locale approximation. */
bool gaz_rune_is_letter_or_number(uint32_t r);

/* gaz_validate_token: `s` is min_len..max_len bytes and every UTF-8 rune is a
 * letter, a number or one of `symbols` (ASCII). Invalid UTF-8 is rejected
 * (Go decodes it to U+FFFD, which is neither). Mirrors ValidateToken. */
int gaz_validate_token(const char *s, const char *symbols, size_t min_len, size_t max_len,
		       struct gaz_status *st);

/* gaz_validate_path_component: a token over GAZ_PATH_SYMBOLS that, unless
 * empty, equals its Go path.Clean form and does not begin with '/'. Note that
 * path.Clean keeps leading ".." elements, so "../a" and "." are clean.
 * Mirrors ValidatePathComponent. */
int gaz_validate_path_component(const char *s, size_t min_len, size_t max_len,
				struct gaz_status *st);

/* gaz_path_is_clean reports whether the `n` bytes at `s` equal Go's
 * path.Clean of themselves ("" is not: it cleans to "."). */
bool gaz_path_is_clean(const char *s, size_t n);

/* ---- §3.2 journals ----------------------------------------------------- */

/* gaz_journal_name_len returns the length of `journal` without its ";meta"
 * suffix (everything from the first ';'), as Journal.StripMeta. */
size_t gaz_journal_name_len(const char *journal);

/* gaz_validate_journal: the part before the first ';' is a path component of
 * 4..512 bytes; a ";meta" part, if present, is a path component of 1..512
 * bytes after the ';'. Mirrors Journal.Validate. */
int gaz_validate_journal(const char *journal, struct gaz_status *st);

/* ---- §3.3 labels (matching and set helpers live in labels.h) ----------- */

/* gaz_validate_label: name token 2..64 over GAZ_TOKEN_SYMBOLS, value token
 * 0..1024 over GAZ_PATH_SYMBOLS, prefix only when `allow_prefix`. */
int gaz_validate_label(const Protocol__Label *l, bool allow_prefix, struct gaz_status *st);

/* gaz_validate_labelset: each label valid; strictly ascending (name, value);
 * a name with value "" has no other value. Mirrors LabelSet.Validate (with
 * allow_prefix=false) and its selector form (true). */
int gaz_validate_labelset(const Protocol__LabelSet *set, bool allow_prefix,
			  struct gaz_status *st);

/* gaz_validate_selector: include and exclude are label sets with prefix
 * allowed. Mirrors LabelSelector.Validate. */
int gaz_validate_selector(const Protocol__LabelSelector *sel, struct gaz_status *st);

/* gaz_validate_single_value_labels: content-type, app.gazette.dev/instance,
 * managed-by, message-subtype, message-type and region have one value at
 * most. Mirrors ValidateSingleValueLabels. */
int gaz_validate_single_value_labels(const Protocol__LabelSet *set, struct gaz_status *st);

/* gaz_validate_media_type: `s` parses as an RFC 1521 media type the way Go's
 * mime.ParseMediaType does: trimmed, "type" or "type/subtype" of RFC 2045
 * tokens, then optional "; attr=value" parameters (value a token or a quoted
 * string, a trailing lone ';' ignored). Unlike Go, duplicate parameter names
 * are not detected and only ASCII whitespace is trimmed; a label value can
 * hold neither ';' nor spaces, so labels are judged exactly. Messages are Go's
 * ("mime: expected slash after first token", ...). */
int gaz_validate_media_type(const char *s, struct gaz_status *st);

/* ---- §3.4 JournalSpec --------------------------------------------------- */

/* gaz_validate_postfix_template checks a path_postfix_template. Gazette
 * requires it to parse as a Go text/template and execute against a zero
 * value; we do not have Go templates yet, so this accepts "" or text whose
 * {{ }} actions are closed, non-empty (comments allowed), with quoted
 * strings honoured and if/range/with/block/define balanced by end. Field
 * references are not checked. Messages follow Go's
 * ("template: postfix:1: unclosed action"). */
int gaz_validate_postfix_template(const char *tpl, struct gaz_status *st);

/* What a path_postfix_template executes against: the fields of Gazette's
 * struct{Spool; *JournalSpec} that gaz_postfix_template_exec knows. */
struct gaz_postfix_data {
	const char *journal;      /* Spool.Journal = JournalSpec.Name; borrowed */
	int64_t begin, end;       /* Spool.Begin, Spool.End (offsets) */
	int64_t first_append_ns;  /* Spool.FirstAppendTime, wall ns, UTC; 0 = Go's zero time */
	int32_t replication;      /* JournalSpec.Replication */
};

/* gaz_postfix_template_exec executes `tpl` (NULL = "") against `d` into
 * out[cap] (NUL-terminated), as Gazette names persisted fragments (facts
 * §5.5, broker/fragment/stores.go evalPathPostfix with Go text/template
 * and time.Format). The subset: text, comments, trim markers, and single
 * field actions: .Spool.FirstAppendTime.Format "LAYOUT" (Go layouts:
 * 2006 06 01 1 Jan January 02 2 _2 002 Mon Monday 15 03 3 04 4 05 5 PM pm
 * MST Z07:00 -0700 ..., fractions .000/.999), .FirstAppendTime[.Unix
 * .Year .YearDay .Day .Hour .Minute], .Begin .End .Journal .Name
 * .Replication (the "Spool", "Fragment", "JournalSpec" names of embedded
 * structs may be given or left out), and string constants. Times are UTC.
 * Returns 0; GAZ_EINVAL naming the unsupported action, a template that
 * does not validate, or a result longer than cap - 1. Thread-safe. */
int gaz_postfix_template_exec(const char *tpl, const struct gaz_postfix_data *d, char *out,
			      size_t cap, struct gaz_status *st);

/* gaz_validate_codec: one of NONE..GZIP_OFFLOAD_DECOMPRESSION (1..5). */
int gaz_validate_codec(int codec, struct gaz_status *st);

/* gaz_validate_fragment_store checks a fragment store URL (§3.6): parses
 * (url.h), absolute, scheme s3/gs/azure with a bucket host, azure-ad with a
 * tenant host and /<account>/<container>/ path, or file with no host; path
 * ends in '/'. May return GAZ_ENOMEM. */
int gaz_validate_fragment_store(const char *url, struct gaz_status *st);

/* gaz_validate_fragment_spec: JournalSpec.Fragment rules of §3.4: length
 * 1024..2^34, codec, stores (file:// first store forbids
 * GZIP_OFFLOAD_DECOMPRESSION), refresh 1s..24h, flush 0 or >= 1m, template. */
int gaz_validate_fragment_spec(const Protocol__JournalSpec__Fragment *f, struct gaz_status *st);

/* gaz_validate_journal_spec: every row of §3.4, in Gazette's order: name (no
 * ";meta"), replication 1..5, labels (no "name"/"prefix", single-value
 * labels, content-type media type, message-type needs content-type,
 * message-subtype needs message-type), fragment, flags exactly 0/1/2/4,
 * max_append_rate >= 0, suspend level 0..2 and offset >= 0. */
int gaz_validate_journal_spec(const Protocol__JournalSpec *spec, struct gaz_status *st);

/* MayRead: flags 0, O_RDONLY or O_RDWR. MayWrite: flags 0, O_WRONLY or O_RDWR. */
bool gaz_journal_may_read(uint32_t flags);
bool gaz_journal_may_write(uint32_t flags);

/* ---- §3.5 processes, brokers, routes, headers; §3.7 fragments ---------- */

int gaz_validate_process_id(const Protocol__ProcessSpec__ID *id, struct gaz_status *st);
/* Endpoint: parses, absolute, non-empty host. May return GAZ_ENOMEM. */
int gaz_validate_endpoint(const char *url, struct gaz_status *st);
int gaz_validate_process_spec(const Protocol__ProcessSpec *ps, struct gaz_status *st);
/* BrokerSpec: process spec (no context prefix, as Gazette), journal_limit
 * <= 131072. */
int gaz_validate_broker_spec(const Protocol__BrokerSpec *bs, struct gaz_status *st);
/* Route: members valid and strictly ascending by (zone, suffix);
 * -1 <= primary < len(members); endpoints empty or len(members), each
 * non-empty one valid. NULL is the empty route, which is INVALID (primary 0
 * of 0 members), as in Gazette. */
int gaz_validate_route(const Protocol__Route *rt, struct gaz_status *st);
/* Header: process_id valid unless all-empty; route; etcd cluster_id,
 * member_id, raft_term != 0 and revision > 0. */
int gaz_validate_header(const Protocol__Header *hdr, struct gaz_status *st);
/* Fragment: journal, begin <= end, codec, path_postfix path component
 * 0..512. */
int gaz_validate_fragment(const Protocol__Fragment *frag, struct gaz_status *st);
/* Status: a value of the protocol.Status enum. */
int gaz_validate_status(int status, struct gaz_status *st);

/* ---- §3.8 requests and responses ---------------------------------------
 * "Content present" means content.data != NULL or content.len > 0: Go tells
 * an empty-but-present bytes field from an absent one, protobuf-c cannot,
 * so a hand-built message marks presence with a non-NULL data pointer. */

int gaz_validate_read_request(const Protocol__ReadRequest *req, struct gaz_status *st);
int gaz_validate_read_response(const Protocol__ReadResponse *resp, struct gaz_status *st);
/* A message with journal != "" is the first (parameters) message; otherwise
 * it is a content chunk or the empty commit message. */
int gaz_validate_append_request(const Protocol__AppendRequest *req, struct gaz_status *st);
int gaz_validate_append_response(const Protocol__AppendResponse *resp, struct gaz_status *st);
/* A proposal with NULL registers is judged with empty registers (Gazette's
 * migration shim) but the request is not modified. */
int gaz_validate_replicate_request(const Protocol__ReplicateRequest *req,
				   struct gaz_status *st);
int gaz_validate_replicate_response(const Protocol__ReplicateResponse *resp,
				    struct gaz_status *st);
int gaz_validate_list_request(const Protocol__ListRequest *req, struct gaz_status *st);
int gaz_validate_list_response(const Protocol__ListResponse *resp, struct gaz_status *st);
int gaz_validate_list_journal(const Protocol__ListResponse__Journal *j, struct gaz_status *st);
int gaz_validate_apply_change(const Protocol__ApplyRequest__Change *ch, struct gaz_status *st);
int gaz_validate_apply_request(const Protocol__ApplyRequest *req, struct gaz_status *st);
int gaz_validate_apply_response(const Protocol__ApplyResponse *resp, struct gaz_status *st);
int gaz_validate_fragments_request(const Protocol__FragmentsRequest *req,
				   struct gaz_status *st);
int gaz_validate_fragments_response(const Protocol__FragmentsResponse *resp,
				    struct gaz_status *st);
int gaz_validate_store_health_request(const Protocol__FragmentStoreHealthRequest *req,
				      struct gaz_status *st);
int gaz_validate_store_health_response(const Protocol__FragmentStoreHealthResponse *resp,
				       struct gaz_status *st);

#endif
