/*
 * url.h - URL parsing with the acceptance rules of Go's net/url.Parse, which
 * Gazette uses to validate fragment store URLs, endpoints, fragment URLs and
 * signed URLs (gazette-facts §3.5, §3.6, §3.8).
 *
 * What is mirrored: fragment split at the first '#'; control bytes rejected;
 * the scheme (letter, then letters/digits/"+-."; "missing protocol scheme"
 * for a leading ':'); "?query" split; opaque form for "scheme:rest"; the
 * colon-in-first-segment rule for relative references; "//authority" with
 * userinfo, host character and port checks; %-escape checks and decoding of
 * host, path and fragment. Bracketed IPv6 hosts are checked for the closing
 * ']' and port only. Error texts are Go's: `parse "s3://a b/": invalid
 * character " " in host name`.
 */
#ifndef GAZ_PROTOCOL_URL_H
#define GAZ_PROTOCOL_URL_H

#include <stdbool.h>

#include "common/err.h"

/* A parsed URL. Every string field is non-NULL after a successful parse
 * (possibly "") and points into one buffer owned by the struct. */
struct gaz_url {
	char *scheme;    /* lowercased; "" for a relative reference */
	char *opaque;    /* rest of "scheme:rest" when rest lacks a leading '/' */
	char *userinfo;  /* raw userinfo before '@' ("" if none) */
	char *host;      /* "host[:port]", %-decoded */
	char *path;      /* %-decoded */
	char *raw_query; /* after '?', undecoded */
	char *fragment;  /* after '#', %-decoded */
	bool has_userinfo;
	char *buf_;      /* private: the single allocation */
};

/* gaz_url_parse parses NUL-terminated `raw` (borrowed) into `*u`, which the
 * caller owns and must release with gaz_url_release after success (on
 * failure nothing needs releasing). Returns 0, GAZ_EINVAL (reason in `st`,
 * may be NULL) or GAZ_ENOMEM. Thread-safe. */
int gaz_url_parse(const char *raw, struct gaz_url *u, struct gaz_status *st);

/* gaz_url_release frees what gaz_url_parse allocated; idempotent. */
void gaz_url_release(struct gaz_url *u);

/* gaz_url_is_abs: the URL has a scheme (Go's URL.IsAbs). */
static inline bool gaz_url_is_abs(const struct gaz_url *u)
{
	return u->scheme[0] != '\0';
}

#endif
