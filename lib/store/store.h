/*
 * store.h - fragment stores behind one small interface (design.md §4.5):
 * list by prefix, exists, get, put, remove, sign a GET URL, health check.
 *
 * A store is named by a FragmentStore URL (facts §3.6, §5.6):
 *
 *   file:///<path>/                  files under the broker's file root
 *   s3://<bucket>/<prefix>/          S3 or any S3-compatible service (s3.c)
 *   gs://<bucket>/<prefix>/, azure://<container>/<prefix>/,
 *   azure-ad://<tenant>/<account>/<container>/<prefix>/   (not yet)
 *
 * Paths given to the operations are "content paths" relative to the URL
 * path (e.g. "a/journal/<fragment name>", ".test/health-check"). Each is
 * first rewritten by the URL's `find`/`replace` parameters (first
 * occurrence of find replaced, Gazette's RewriterConfig), then resolved by
 * the backend: the same rewritten key is used by put, get, list and
 * sign_get, so signed URLs always name the stored object (cases BR-09).
 *
 * Errors: GAZ_EPERM is the "authorization error" class the persister may
 * skip to the next store on during shutdown (facts §5.5): permission
 * failures and, for file stores, a missing base directory. GAZ_ENOTFOUND
 * for absent objects; GAZ_EIO for other I/O; GAZ_EINVAL for bad input.
 *
 * Metrics: list, exists, get (opening), put, remove and sign_get are
 * counted as Gazette counts them (broker/stores/active_store.go):
 * gazette_store_operation_total and _duration_seconds{store, operation,
 * status=success|error}, gazette_store_put_bytes_total{store, encoding}
 * ("none" without a content encoding) and gazette_store_list_items_count
 * {store}, labelled by the store URL as given, in the process-wide
 * registry (lib/common/metrics.h).
 *
 * Thread safety: a gaz_store is immutable after open and reference
 * counted; every operation may run concurrently from any thread. The file
 * backend keeps no mutable state.
 */
#ifndef GAZ_STORE_STORE_H
#define GAZ_STORE_STORE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "fragment/fragment.h"

/* Longest rewritten key or signed URL the generic layer builds. */
#define GAZ_STORE_KEY_MAX 4096

/* One decoded query parameter; key lowercased (Gazette decodes parameter
 * names case-insensitively). */
struct gaz_store_param {
	char *key;
	char *value;
};

/* A parsed FragmentStore URL. All strings owned. */
struct gaz_store_url {
	char *raw;      /* the URL exactly as given: the Fragment backing_store */
	char *scheme;   /* lowercased: s3, gs, azure, azure-ad, file */
	char *host;     /* bucket, container or tenant; "" for file */
	char *path;     /* percent-decoded; starts and ends with '/' */
	char *query;    /* raw query (after '?', before '#'), "" if none */
};

/* gaz_store_url_parse validates `url` as a FragmentStore (facts §3.6): an
 * absolute URL of scheme s3, gs, azure, azure-ad or file; host required for
 * s3/gs/azure/azure-ad (tenant), empty for file; azure-ad path
 * "/<account>/<container>/..."; path non-empty and ending in '/'; valid
 * percent escapes; no control characters. Query parameters are not checked
 * here (unknown ones fail gaz_store_open, as in Gazette). Returns 0 (release
 * with gaz_store_url_release), GAZ_EINVAL with the reason, GAZ_ENOMEM. */
int gaz_store_url_parse(const char *url, struct gaz_store_url *out, struct gaz_status *st);

void gaz_store_url_release(struct gaz_store_url *u);

/* gaz_store_url_params decodes the query of `u` ('&'-separated, '+' is a
 * space, percent escapes; ';' rejected as Go's net/url does) into an owned
 * array (free with gaz_store_params_free). Returns 0, GAZ_EINVAL, GAZ_ENOMEM. */
int gaz_store_url_params(const struct gaz_store_url *u, struct gaz_store_param **params,
			 size_t *n, struct gaz_status *st);
void gaz_store_params_free(struct gaz_store_param *params, size_t n);

/* One listed object. `path` is relative to the listed prefix. */
struct gaz_store_obj {
	const char *path;  /* borrowed for the callback */
	int64_t size;      /* bytes as stored */
	int64_t mod_time;  /* last modified, unix seconds */
};

/* Listing callback: return 0 to go on, or an error code to stop (returned
 * by the listing call). Runs on the listing thread. */
typedef int (*gaz_store_list_fn)(void *arg, const struct gaz_store_obj *obj,
				 struct gaz_status *st);

/* An object opened for reading. Use gaz_store_reader_read/_close. */
struct gaz_store_reader {
	int (*read)(struct gaz_store_reader *r, void *buf, size_t cap, size_t *n,
		    struct gaz_status *st);
	void (*close)(struct gaz_store_reader *r);
	int64_t len;                /* bytes from the start offset to the end */
	char content_encoding[32];  /* "" or the object's Content-Encoding */
	int fd;                     /* file-backed readers: the open fd (owned
				     * by the reader, pread only), else -1 */
};

struct gaz_store;

/* Backend operations. `key` is the rewritten path relative to the store's
 * URL path; backends prefix it themselves. Same contracts as the public
 * wrappers below. */
struct gaz_store_ops {
	const char *provider; /* "fs", "s3", ... (metric label) */
	int (*list)(struct gaz_store *s, const char *key_prefix, gaz_store_list_fn cb, void *arg,
		    struct gaz_status *st);
	int (*exists)(struct gaz_store *s, const char *key, bool *exists, struct gaz_status *st);
	int (*get)(struct gaz_store *s, const char *key, int64_t off, struct gaz_store_reader **out,
		   struct gaz_status *st);
	int (*put)(struct gaz_store *s, const char *key, int fd, int64_t len,
		   const char *content_encoding, struct gaz_status *st);
	int (*remove)(struct gaz_store *s, const char *key, struct gaz_status *st);
	int (*sign_get)(struct gaz_store *s, const char *key, int64_t ttl_s, char **url,
			struct gaz_status *st);
	/* Optional: GET a URL from sign_get as a client would (no credentials
	 * of the store's own) into buf[cap]; 0 only for HTTP 200. The health
	 * check uses it for http(s) URLs. */
	int (*fetch)(struct gaz_store *s, const char *url, char *buf, size_t cap, size_t *n,
		     struct gaz_status *st);
	void (*destroy)(struct gaz_store *s);
};

struct gaz_store {
	const struct gaz_store_ops *ops;
	struct gaz_store_url url;
	char *find;       /* rewrite: NULL or "" = none */
	char *replace;
	struct gaz_store_param *params; /* all decoded query parameters */
	size_t nparams;
	atomic_int refs;
	void *impl;       /* backend state */
};

/* gaz_store_open parses and validates `url`, checks its query parameters
 * against the scheme's known set (unknown keys fail, facts §3.6/§5.6) and
 * opens the backend. file:// stores resolve to <file_root><url path>
 * (`file_root` borrowed, required for file://; the directory need not exist
 * yet, put checks it). s3:// stores resolve credentials and region now
 * (s3_int.h; no network yet). gs, azure, azure-ad: GAZ_EINVAL "not
 * supported yet". Returns 0 and *out with one reference (drop with
 * gaz_store_unref), GAZ_EINVAL, GAZ_EPERM (no credentials), GAZ_ENOMEM. */
int gaz_store_open(const char *url, const char *file_root, struct gaz_store **out,
		   struct gaz_status *st);

struct gaz_store *gaz_store_ref(struct gaz_store *s);
void gaz_store_unref(struct gaz_store *s);

/* gaz_store_param: value of a decoded query parameter (lowercase key), or
 * NULL. Borrowed for the store's lifetime. */
const char *gaz_store_param(const struct gaz_store *s, const char *key);

/* gaz_store_list calls `cb` for every object under `prefix` ("" or ending
 * in '/'), recursively, in key order, with paths relative to the prefix.
 * File stores skip ".partial-*" upload temp files and the store-level
 * ".test/" directory (unless that is what is listed). A missing prefix
 * lists nothing. Returns 0, the callback's error, GAZ_EPERM, GAZ_EIO,
 * GAZ_EINVAL (prefix), GAZ_ENOMEM. */
int gaz_store_list(struct gaz_store *s, const char *prefix, gaz_store_list_fn cb, void *arg,
		   struct gaz_status *st);

/* An owned listing entry from gaz_store_list_all. */
struct gaz_store_entry {
	char *path;
	int64_t size;
	int64_t mod_time;
};

/* gaz_store_list_all collects gaz_store_list into an array of at most
 * `max` entries (GAZ_ERANGE beyond; 0 = 1,000,000). Free with
 * gaz_store_entries_free. */
int gaz_store_list_all(struct gaz_store *s, const char *prefix, size_t max,
		       struct gaz_store_entry **out, size_t *n, struct gaz_status *st);
void gaz_store_entries_free(struct gaz_store_entry *e, size_t n);

/* gaz_store_exists: *exists says whether `path` is stored. Returns 0,
 * GAZ_EPERM, GAZ_EIO. */
int gaz_store_exists(struct gaz_store *s, const char *path, bool *exists, struct gaz_status *st);

/* gaz_store_get opens `path` for reading from stored byte `off`. Returns 0
 * and *out (close with gaz_store_reader_close), GAZ_ENOTFOUND, GAZ_EINVAL
 * (off beyond the object), GAZ_EPERM, GAZ_EIO. */
int gaz_store_get(struct gaz_store *s, const char *path, int64_t off,
		  struct gaz_store_reader **out, struct gaz_status *st);

/* Reads from an opened object: gaz_read_fn contract (0 with *n > 0,
 * GAZ_EOF, or error), so it plugs into gaz_decoder_new(..., r). */
int gaz_store_reader_read(void *r, void *buf, size_t cap, size_t *n, struct gaz_status *st);
void gaz_store_reader_close(struct gaz_store_reader *r);

/* gaz_store_put stores bytes [0, len) of `fd` (read with pread; borrowed)
 * as `path`, atomically: readers see the whole object or none. The
 * content_encoding (NULL or "gzip" for GZIP_OFFLOAD_DECOMPRESSION) is kept
 * by backends that have object metadata; file stores drop it. File stores
 * write "<dir>/.partial-<name>.XXXXXX" then rename, creating directories
 * with mode 0750, and require the base directory <file_root><url path> to
 * exist (else GAZ_EPERM). Returns 0, GAZ_EPERM, GAZ_EIO (also when fd holds
 * fewer than len bytes), GAZ_EINVAL. */
int gaz_store_put(struct gaz_store *s, const char *path, int fd, int64_t len,
		  const char *content_encoding, struct gaz_status *st);

/* gaz_store_remove deletes `path`. Returns 0, GAZ_ENOTFOUND, GAZ_EPERM,
 * GAZ_EIO. */
int gaz_store_remove(struct gaz_store *s, const char *path, struct gaz_status *st);

/* gaz_store_sign_get returns in *url (owned, free()) a URL by which a
 * client reads `path` directly for `ttl_s` seconds. file:// stores answer
 * "file://<url path><rewritten path>", unsigned and relative to the
 * reader's file root (facts §5.6). Returns 0, GAZ_EINVAL, GAZ_ENOMEM. */
int gaz_store_sign_get(struct gaz_store *s, const char *path, int64_t ttl_s, char **url,
		       struct gaz_status *st);

/* gaz_store_health_check runs one check (facts §5.7): PUT
 * ".test/health-check" = "health-check\n", GET and compare, LIST ".test/"
 * expecting "health-check", sign a GET for 5 minutes and, when the URL is
 * http(s) and the backend can fetch, GET it expecting 200 and the same
 * body. Blocking; the caller schedules and times it. Returns 0 or the
 * failing step's error, with the step named in st. */
int gaz_store_health_check(struct gaz_store *s, struct gaz_status *st);

/* Fragment listing callback: `f` is borrowed for the call (copy what you
 * keep, e.g. with gaz_coverset_add). Return 0 to go on or an error. */
typedef int (*gaz_store_fragment_fn)(void *arg, const struct gaz_fragment *f,
				     struct gaz_status *st);

/* gaz_store_list_fragments lists "<journal>/" recursively and parses each
 * object with gaz_fragment_parse_path, setting backing_store = the store
 * URL as given and mod_time. Objects that are not fragments, and
 * zero-length objects of non-empty fragments (cut uploads), are skipped
 * with a warning; keys ending in '/' silently. This listing is the index's
 * source of truth (facts §5.3). Returns 0 or the first listing/callback
 * error (the refresh is then abandoned). */
int gaz_store_list_fragments(struct gaz_store *s, const char *journal,
			     gaz_store_fragment_fn cb, void *arg, struct gaz_status *st);

/* gaz_store_is_auth_error: the code is of the authorization class. */
static inline bool gaz_store_is_auth_error(int code)
{
	return code == GAZ_EPERM;
}

/* --- for backends --- */

/* gaz__store_file_open sets s->ops/s->impl for a file:// store rooted at
 * file_root. */
int gaz__store_file_open(struct gaz_store *s, const char *file_root, struct gaz_status *st);

/* gaz__store_attempt_failed counts one failed attempt, started at t0_ns
 * (monotonic), of a backend's operation `op` ("get", "put", "list",
 * "exists", "remove") that the backend retries: as a failed operation in
 * gazette_store_operation_total and _duration_seconds{status="error"}.
 * The operation's outcome is still counted once by the public call. */
void gaz__store_attempt_failed(struct gaz_store *s, const char *op, int64_t t0_ns);

/* gaz__store_s3_open sets s->ops/s->impl for an s3:// store (s3.c);
 * file_root is unused. Errors: see gaz__s3_config_resolve (s3_int.h). */
int gaz__store_s3_open(struct gaz_store *s, const char *file_root, struct gaz_status *st);

#endif
