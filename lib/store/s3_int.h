/*
 * s3_int.h - what the s3:// store's files share: its configuration (from
 * the URL, the environment and the AWS shared files), and the XML answers
 * it parses. Internal to lib/store; the public face is store.h.
 *
 *   s3_config.c  URL parameters, credentials, region, endpoint/addressing
 *   s3_xml.c     ListObjectsV2, Error, InitiateMultipartUpload bodies
 *   s3.c         HTTP (libcurl, SigV4, retries) and the store operations
 */
#ifndef GAZ_STORE_S3_INT_H
#define GAZ_STORE_S3_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/sigv4.h"
#include "store/store.h"

/* Everything an s3:// store needs to address and sign a request. All
 * strings owned; immutable once resolved. */
struct gaz_s3_config {
	char *bucket;
	char *prefix;        /* URL path without its leading '/': "" or "a/b/" */
	char *profile;       /* `profile` parameter, "" = default chain */
	char *endpoint;      /* `endpoint` parameter as given, "" = AWS */
	char *region;        /* resolved region */
	char *acl, *storage_class, *sse, *sse_kms_key_id; /* "" = not sent */
	char *base_url;      /* "http://127.0.0.1:9000" or "https://b.s3.amazonaws.com" */
	char *host;          /* Host header value: authority of base_url */
	char *path_prefix;   /* "/<bucket>" with path-style addressing, else "" */
	bool path_style;     /* forced by `endpoint`, as Gazette's store does */
	char creds_source[64]; /* "environment", "shared file profile x" (for logs) */
	struct gaz_sigv4_creds creds;
	long stall_s;        /* a request that moves no byte either way for this
	                      * long fails (and is retried): the `stalltimeout`
	                      * parameter (ours, not Gazette's), whole seconds,
	                      * default GAZ_S3_STALL_S */
};

/* The default stall timeout, seconds. Why 60: a healthy S3 never leaves a
 * request this long without moving a byte (AWS itself drops an upload
 * whose client sends nothing for about 20 s, RequestTimeout), the common
 * SDKs time a silent socket out after 50-60 s (boto3's read timeout,
 * the Java SDK's socket timeout), and it cuts a dead upload five times
 * sooner than the 5-minute total that Gazette gives a persist, while a
 * slow upload that still moves (any rate above a byte a second) is never
 * cut by it. The total timeouts stay as they were. */
#define GAZ_S3_STALL_S 60
/* Bounds of `stalltimeout`. */
#define GAZ_S3_STALL_MAX_S 3600

/* gaz__s3_config_resolve fills `c` from store `s` (its URL and decoded
 * parameters), the environment (AWS_ACCESS_KEY_ID / AWS_ACCESS_KEY,
 * AWS_SECRET_ACCESS_KEY / AWS_SECRET_KEY, AWS_SESSION_TOKEN, AWS_PROFILE /
 * AWS_DEFAULT_PROFILE, AWS_REGION / AWS_DEFAULT_REGION,
 * AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE, HOME) and the shared files.
 * Order, as aws-sdk-go v1's session (which Gazette's s3 store uses):
 * an explicit `profile` parameter reads that profile from the shared
 * files first; otherwise keys in the environment win, then the profile of
 * AWS_PROFILE (or "default") from the shared files. Region: `region`
 * parameter, then AWS_REGION, AWS_DEFAULT_REGION, then the profile's
 * `region` in the config file. Our own `stalltimeout` parameter (a Go
 * duration of whole seconds, 1s to 1h) sets stall_s. Errors: GAZ_EPERM
 * when no credentials
 * resolve (the authorization class), GAZ_EINVAL for a missing region or a
 * bad endpoint, GAZ_ENOMEM. Release with gaz__s3_config_release. */
int gaz__s3_config_resolve(const struct gaz_store *s, struct gaz_s3_config *c,
			   struct gaz_status *st);
void gaz__s3_config_release(struct gaz_s3_config *c);

/* gaz__s3_ini_lookup reads key `key` of section `section` from an INI
 * file (the AWS shared files' format: "[name]" headers, "k = v" lines,
 * '#'/';' comments) into out[cap]. Returns 1 found, 0 not found (or no
 * file), -1 value too long. */
int gaz__s3_ini_lookup(const char *path, const char *section, const char *key, char *out,
		       size_t cap);

/* One listed object, as parsed. */
struct gaz_s3_obj {
	char *key;
	int64_t size;
	int64_t mod_time; /* Unix seconds; 0 when absent or unparseable */
};

/* One parsed ListObjectsV2 page (ListBucketResult). Owned; release with
 * gaz__s3_list_page_release. */
struct gaz_s3_list_page {
	struct gaz_s3_obj *objs;
	size_t n, cap;
	bool truncated;          /* IsTruncated */
	char *next_token;        /* NextContinuationToken, NULL if none */
};

/* gaz__s3_parse_list parses a ListBucketResult body. Returns 0, GAZ_EPROTO
 * (not XML, or not a ListBucketResult, or truncated without a token),
 * GAZ_ENOMEM. */
int gaz__s3_parse_list(const char *body, size_t len, struct gaz_s3_list_page *page,
		       struct gaz_status *st);
void gaz__s3_list_page_release(struct gaz_s3_list_page *page);

/* gaz__s3_parse_error extracts <Error><Code> and <Message> from an S3
 * error body into code[code_cap] / msg[msg_cap] ("" when absent). Returns
 * true if the body is an <Error> document. */
bool gaz__s3_parse_error(const char *body, size_t len, char *code, size_t code_cap, char *msg,
			 size_t msg_cap);

/* gaz__s3_parse_upload_id extracts <UploadId> of an
 * InitiateMultipartUploadResult into out[cap]. Returns true if found. */
bool gaz__s3_parse_upload_id(const char *body, size_t len, char *out, size_t cap);

/* gaz__s3_parse_time parses an ISO 8601 UTC time as S3 writes it
 * ("2009-10-12T17:50:30.000Z") into Unix seconds; 0 if malformed. */
int64_t gaz__s3_parse_time(const char *s);

#endif
