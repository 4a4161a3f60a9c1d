/*
 * sigv4.h - AWS Signature Version 4 for S3 requests: header signing
 * (Authorization header) and query-string signing (presigned URLs).
 *
 * Source of behaviour: the AWS S3 API reference, "Signature Calculations
 * for the Authorization Header: Transferring Payload in a Single Chunk"
 * and "Authenticating Requests: Using Query Parameters (AWS Signature
 * Version 4)". The unit tests check every published example of those
 * pages byte for byte (tests/unit/store/test_sigv4.c).
 *
 *   canonical request = METHOD \n URI \n QUERY \n HEADERS \n \n SIGNED \n PAYLOAD
 *   string to sign    = "AWS4-HMAC-SHA256" \n DATE \n SCOPE \n hex(sha256(canonical))
 *   signing key       = HMAC(HMAC(HMAC(HMAC("AWS4"+secret, yyyymmdd), region), service),
 *                            "aws4_request")
 *
 * S3 flavour: the URI is the object path encoded once (never twice), '/'
 * kept; query names and values are encoded with the unreserved set
 * A-Z a-z 0-9 - _ . ~ and sorted by name, then value.
 *
 * Pure functions of their inputs (the time is a parameter): thread-safe,
 * no global state. Uses openssl's HMAC-SHA256 and SHA-256 only.
 */
#ifndef GAZ_STORE_SIGV4_H
#define GAZ_STORE_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/err.h"

/* Hex SHA-256 of the empty string, and the marker for an unhashed body. */
#define GAZ_SIGV4_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define GAZ_SIGV4_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"

/* Longest presigned query or Authorization value we build. */
#define GAZ_SIGV4_MAX 8192

/* Credentials. session_token is "" when there is none. */
struct gaz_sigv4_creds {
	char access_key[256];
	char secret_key[256];
	char session_token[4096];
};

/* A name and value, both borrowed. For query parameters they are raw
 * (unencoded); for headers the name may be of any case (it is lowercased)
 * and the value is trimmed and its inner runs of spaces folded. */
struct gaz_sigv4_kv {
	const char *key;
	const char *value;
};

/* One request to sign. All strings borrowed for the call. */
struct gaz_sigv4_req {
	const char *method;                /* "GET", "PUT", ... */
	const char *path;                  /* canonical URI, already encoded
					    * with gaz_sigv4_uri_encode ("/b/k") */
	const struct gaz_sigv4_kv *query;  /* raw query parameters, any order */
	size_t n_query;
	const struct gaz_sigv4_kv *headers; /* headers to sign; must include
					     * "host" (and, for header signing,
					     * x-amz-date and x-amz-content-sha256) */
	size_t n_headers;
	const char *payload_hash;          /* hex SHA-256 of the body, or
					    * GAZ_SIGV4_UNSIGNED_PAYLOAD */
	const char *region;                /* "us-east-1" */
	const char *service;               /* "s3" */
	time_t when;                       /* signing time, Unix seconds (UTC) */
};

/* What signing produced. canonical and string_to_sign are kept for tests
 * and for the debug log of a SignatureDoesNotMatch. */
struct gaz_sigv4_out {
	char amz_date[17];               /* "20130524T000000Z" */
	char signed_headers[1024];       /* "host;range;x-amz-date" */
	char signature[65];              /* lowercase hex */
	char authorization[GAZ_SIGV4_MAX]; /* full Authorization header value */
	char canonical[GAZ_SIGV4_MAX * 2];
	char string_to_sign[512];
};

/* gaz_sigv4_amz_date formats `when` as "YYYYMMDDTHHMMSSZ" into out[17]. */
void gaz_sigv4_amz_date(time_t when, char out[17]);

/* gaz_sigv4_sha256_hex writes the lowercase hex SHA-256 of data[0, len)
 * into out[65]. */
void gaz_sigv4_sha256_hex(const void *data, size_t len, char out[65]);

/* gaz_sigv4_uri_encode percent-encodes `in` into out[cap] as SigV4 wants:
 * unreserved characters stay, every other byte becomes %XX (uppercase);
 * '/' stays when keep_slash (object paths) and becomes %2F otherwise
 * (query names and values). Returns the encoded length, or -1 if it does
 * not fit in cap (including the NUL). */
int gaz_sigv4_uri_encode(const char *in, bool keep_slash, char *out, size_t cap);

/* gaz_sigv4_sign computes the canonical request, string to sign,
 * signature and Authorization header of `req` with `c` into *out. The
 * caller sends the headers it signed plus "Authorization: <out->authorization>".
 * Returns 0, or GAZ_EINVAL when an input is missing or too long for the
 * fixed buffers (reason in st). */
int gaz_sigv4_sign(const struct gaz_sigv4_req *req, const struct gaz_sigv4_creds *c,
		   struct gaz_sigv4_out *out, struct gaz_status *st);

/* gaz_sigv4_presign builds the query string of a presigned URL for `req`
 * (its headers must be exactly {host}, its payload_hash is ignored and
 * UNSIGNED-PAYLOAD used), valid `expires_s` seconds from req->when:
 * req->query plus X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date,
 * X-Amz-Expires, X-Amz-SignedHeaders, X-Amz-Security-Token (when the
 * credentials have a session token), all in canonical order, then
 * "&X-Amz-Signature=<hex>". Written to query[cap] without a leading '?'.
 * expires_s must be 1 .. 604800 (7 days, SigV4's limit). Returns 0 or
 * GAZ_EINVAL. */
int gaz_sigv4_presign(const struct gaz_sigv4_req *req, const struct gaz_sigv4_creds *c,
		      int64_t expires_s, char *query, size_t cap, struct gaz_sigv4_out *out,
		      struct gaz_status *st);

#endif
