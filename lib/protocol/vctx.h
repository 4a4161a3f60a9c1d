/*
 * vctx.h - internal plumbing shared by the lib/protocol validators.
 *
 * Gazette reports a validation failure with the dotted path of the field that
 * failed, e.g. `Fragment.Stores[0]: path component doesn't end in '/' (...)`.
 * Rather than patching text on the way up, each validator receives the chain
 * of enclosing field names (struct gaz__vctx, innermost first, living on the
 * callers' stacks) and the failing leaf formats the whole path once. The
 * public gaz_validate_*() entry points are these functions with a NULL chain.
 *
 * Nothing here allocates; everything is reentrant. Other modules that nest
 * our validators inside their own (e.g. a consumer ShardSpec) may use the
 * gaz__ functions declared here.
 */
#ifndef GAZ_PROTOCOL_VCTX_H
#define GAZ_PROTOCOL_VCTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "common/err.h"
#include "protocol.pb-c.h"

/* One enclosing field: `name` (borrowed), rendered as "name" when idx < 0 and
 * as "name[idx]" otherwise. `up` is the next outer field or NULL. */
struct gaz__vctx {
	const struct gaz__vctx *up;
	const char *name;
	long idx;
};

/* Declares a context frame `var` nested in `parent`. */
#define GAZ__VCTX(var, parent, nm, ix) \
	const struct gaz__vctx var = {.up = (parent), .name = (nm), .idx = (ix)}

/* gaz__verr records a validation failure: st->msg becomes
 * "<outer>.<...>.<inner>: <message>" (or just the message when `c` is NULL)
 * and st->code GAZ_EINVAL, unless `st` already holds an error. Returns
 * GAZ_EINVAL. `st` may be NULL. */
int gaz__verr(struct gaz_status *st, const struct gaz__vctx *c, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* gaz__utf8_decode decodes the rune at s[0..n) (n >= 1) as Go's range
 * loop does: a malformed sequence gives U+FFFD with width 1. The width is
 * stored in *w. */
uint32_t gaz__utf8_decode(const unsigned char *s, size_t n, size_t *w);

/* gaz__str maps a NULL protobuf-c string to "". */
static inline const char *gaz__str(const char *s)
{
	return s ? s : "";
}

/* gaz__quote writes `n` bytes of `s` into `buf` (capacity `cap` > 2) as a Go
 * %q-style quoted string: '"' and '\\' escaped, control bytes as \xNN,
 * truncated to fit. Returns buf. */
char *gaz__quote(const char *s, size_t n, char *buf, size_t cap);

/* gaz__enum_name writes the name of enum value `v` of `d`, or its decimal
 * value when it has no name (as Go's generated String() does), into `buf`
 * of `cap` bytes and returns it. */
const char *gaz__enum_name(const ProtobufCEnumDescriptor *d, int v, char *buf, size_t cap);

/* gaz__duration_ns converts a google.protobuf.Duration to nanoseconds,
 * saturating at INT64_MIN/INT64_MAX. NULL (an absent non-nullable Gazette
 * duration) is 0. */
int64_t gaz__duration_ns(const Google__Protobuf__Duration *d);

/* Length-bounded forms of the public token/path/journal validators: `s`
 * holds `n` bytes (no NUL needed). */
int gaz__validate_token(const char *s, size_t n, const char *symbols, size_t min_len,
			size_t max_len, const struct gaz__vctx *c, struct gaz_status *st);
int gaz__validate_path_component(const char *s, size_t n, size_t min_len, size_t max_len,
				 const struct gaz__vctx *c, struct gaz_status *st);
int gaz__validate_journal(const char *journal, const struct gaz__vctx *c,
			  struct gaz_status *st);

/* Context-taking forms of public validators, for nesting. */
int gaz__validate_labelset(const Protocol__LabelSet *set, bool allow_prefix,
			   const struct gaz__vctx *c, struct gaz_status *st);
int gaz__validate_selector(const Protocol__LabelSelector *sel, const struct gaz__vctx *c,
			   struct gaz_status *st);
int gaz__validate_fragment_store(const char *url, const struct gaz__vctx *c,
				 struct gaz_status *st);
int gaz__validate_endpoint(const char *url, const struct gaz__vctx *c, struct gaz_status *st);
int gaz__validate_codec(int codec, const struct gaz__vctx *c, struct gaz_status *st);
int gaz__validate_status(int status, const struct gaz__vctx *c, struct gaz_status *st);
int gaz__validate_postfix_template(const char *tpl, const struct gaz__vctx *c,
				   struct gaz_status *st);
int gaz__validate_journal_spec(const Protocol__JournalSpec *spec, const struct gaz__vctx *c,
			       struct gaz_status *st);
int gaz__validate_route(const Protocol__Route *rt, const struct gaz__vctx *c,
			struct gaz_status *st);
int gaz__validate_header(const Protocol__Header *hdr, const struct gaz__vctx *c,
			 struct gaz_status *st);
int gaz__validate_fragment(const Protocol__Fragment *frag, const struct gaz__vctx *c,
			   struct gaz_status *st);

#endif
