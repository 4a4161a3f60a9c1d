/*
 * lifecycle.h - S3 bucket lifecycle configurations, for an owner that
 * manages some rules of a bucket and must keep everyone else's: read the
 * document (GET ?lifecycle), merge, write it back whole (PUT ?lifecycle,
 * or DELETE ?lifecycle when no rule is left, since S3 refuses an empty
 * one). Source of behaviour: the S3 API reference,
 * GetBucketLifecycleConfiguration / PutBucketLifecycleConfiguration /
 * DeleteBucketLifecycle (k8s.md §4.1): the PUT replaces the whole
 * configuration, at most 1,000 rules, IDs of at most 255 characters, a
 * Content-MD5 (or checksum) header is required.
 *
 * Two parts:
 *   gaz_lc_doc_*   the document: rules whose ID starts with the owner's
 *                  prefix are parsed (ID, Filter/Prefix, Status,
 *                  Expiration/Days); every other rule is kept as the exact
 *                  bytes of its <Rule> element and written back unchanged.
 *                  Pure; thread-safe on distinct documents.
 *   gaz_lc_bucket_* the HTTP calls, addressed, credentialed and signed
 *                  exactly as the s3:// fragment store of the same URL
 *                  (s3_config.c, sigv4.c).
 *
 * A document this parser cannot faithfully round-trip (namespace
 * prefixes, anything but <Rule> under the root, a rule without an ID) is
 * refused with GAZ_EPROTO rather than rewritten with rules lost.
 */
#ifndef GAZ_STORE_LIFECYCLE_H
#define GAZ_STORE_LIFECYCLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define GAZ_LC_RULES_MAX 1000   /* per bucket (S3's limit, not adjustable) */
#define GAZ_LC_ID_MAX 255       /* bytes of a rule ID */
#define GAZ_LC_DOC_MAX (8u << 20) /* largest document read or written */

/* A rule of the owner's: expire objects under `prefix` `days` after
 * creation. Strings owned by the document. */
struct gaz_lc_rule {
	char *id;
	char *prefix;     /* Filter/Prefix (or the legacy top-level Prefix) */
	int64_t days;     /* Expiration/Days; 0 when the rule has none */
	bool enabled;     /* Status == "Enabled" */
	bool plain;       /* nothing but ID, Filter/Prefix, Status, Expiration/Days */
};

/* A parsed lifecycle configuration. Release with gaz_lc_doc_release. */
struct gaz_lc_doc {
	char **foreign;           /* verbatim <Rule>...</Rule> of other owners */
	size_t n_foreign;
	struct gaz_lc_rule *owned;
	size_t n_owned;
	char *id_prefix;
};

/* gaz_lc_doc_parse parses a LifecycleConfiguration body (xml[0, len);
 * xml NULL or len 0: no configuration) into *doc, sorting rules by
 * whether their ID starts with `id_prefix` (borrowed, copied).
 * Errors: GAZ_EPROTO (not XML, not a LifecycleConfiguration, a shape
 * we would not write back faithfully), GAZ_ENOMEM. */
int gaz_lc_doc_parse(const char *xml, size_t len, const char *id_prefix, struct gaz_lc_doc *doc,
		     struct gaz_status *st);

/* gaz_lc_doc_set makes `doc` hold owned rule `id` (must start with the
 * prefix, at most GAZ_LC_ID_MAX bytes) as a plain enabled expiration of
 * objects under `prefix` after `days` (>= 1). *changed tells whether the
 * document differs from before. Errors: GAZ_EINVAL, GAZ_ENOMEM. */
int gaz_lc_doc_set(struct gaz_lc_doc *doc, const char *id, const char *prefix, int64_t days,
		   bool *changed, struct gaz_status *st);

/* gaz_lc_doc_remove drops owned rule `id`; *changed if it was there. */
void gaz_lc_doc_remove(struct gaz_lc_doc *doc, const char *id, bool *changed);

/* gaz_lc_doc_find returns the owned rule `id` (borrowed) or NULL. */
const struct gaz_lc_rule *gaz_lc_doc_find(const struct gaz_lc_doc *doc, const char *id);

/* Rules in the document, foreign and owned. */
size_t gaz_lc_doc_count(const struct gaz_lc_doc *doc);

/* gaz_lc_doc_render writes the document as a LifecycleConfiguration in
 * S3's namespace: foreign rules first, verbatim and in their order, then
 * owned rules sorted by ID. *xml is owned by the caller (free()).
 * Errors: GAZ_ENOMEM. */
int gaz_lc_doc_render(const struct gaz_lc_doc *doc, char **xml, size_t *len,
		      struct gaz_status *st);

void gaz_lc_doc_release(struct gaz_lc_doc *doc);

/* gaz_lc_xml_escape writes `s` with &, <, >, " and ' escaped into
 * out[cap]; returns the length, or -1 if it does not fit. */
int gaz_lc_xml_escape(const char *s, char *out, size_t cap);

/* ---- the bucket of an s3:// store URL ------------------------------------ */

struct gaz_lc_bucket;

/* gaz_lc_bucket_open resolves an s3:// fragment store URL (credentials,
 * region, endpoint and addressing as the store does; unknown parameters
 * fail as they do there). *out is owned (gaz_lc_bucket_close). Errors:
 * GAZ_EINVAL (not s3://, bad URL or parameter, no region), GAZ_EPERM (no
 * credentials), GAZ_ENOMEM. No network yet. Thread-safe. */
int gaz_lc_bucket_open(const char *store_url, struct gaz_lc_bucket **out, struct gaz_status *st);
void gaz_lc_bucket_close(struct gaz_lc_bucket *b);

/* The bucket's name, and the key prefix of the URL's path ("" or "a/b/"),
 * borrowed until close. */
const char *gaz_lc_bucket_name(const struct gaz_lc_bucket *b);

/* gaz_lc_bucket_key_prefix writes the object-key prefix of `journal`'s
 * fragments in this store into out[cap]: the URL's path prefix, then the
 * journal name with the store's find/replace rewrite applied (as every
 * store operation does), then '/'. GAZ_EINVAL if it does not fit. */
int gaz_lc_bucket_key_prefix(const struct gaz_lc_bucket *b, const char *journal, char *out,
			     size_t cap, struct gaz_status *st);

/* gaz_lc_bucket_get reads the configuration: *xml (caller frees) and
 * *len, or *xml NULL when the bucket has none
 * (NoSuchLifecycleConfiguration). Errors: GAZ_ENOTFOUND (no such
 * bucket), GAZ_EPERM (denied, bad credentials), GAZ_EUNAVAIL (transport, 5xx after retries), GAZ_EIO (other
 * answers, with S3's code and message), GAZ_ENOMEM. */
int gaz_lc_bucket_get(struct gaz_lc_bucket *b, char **xml, size_t *len, struct gaz_status *st);

/* gaz_lc_bucket_put writes xml[0, len) as the whole configuration
 * (Content-MD5 and the signed SHA-256 of the body sent). Errors as get. */
int gaz_lc_bucket_put(struct gaz_lc_bucket *b, const char *xml, size_t len,
		      struct gaz_status *st);

/* gaz_lc_bucket_delete removes the configuration (no rules left). */
int gaz_lc_bucket_delete(struct gaz_lc_bucket *b, struct gaz_status *st);

#endif
