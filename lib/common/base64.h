/*
 * base64.h - base64 (RFC 4648 §4 standard and §5 URL-safe alphabets) with
 * the strictness each caller's format needs: Go's StdEncoding for auth
 * keys and kubeconfig data (padding required), RawURLEncoding for JWT
 * segments (padding refused), protobuf JSON's bytes (either alphabet,
 * padding optional). Reentrant; no state.
 */
#ifndef GAZ_COMMON_BASE64_H
#define GAZ_COMMON_BASE64_H

#include <stddef.h>
#include <stdint.h>

enum {
	GAZ_B64_STD = 1u << 0,   /* '+' and '/' (with GAZ_B64_URL: either) */
	GAZ_B64_URL = 1u << 1,   /* '-' and '_' */
	GAZ_B64_PAD = 1u << 2,   /* decode: '=' padding to a multiple of 4
	                          * required; encode: written */
	GAZ_B64_NOPAD = 1u << 3, /* decode: '=' refused (neither PAD nor
	                          * NOPAD: up to two trailing '=' optional) */
	GAZ_B64_SPACE = 1u << 4, /* decode: ASCII white space ignored */
};

/* gaz_b64_decode decodes s[0..n) under `flags`. On success *out is a
 * malloc'd buffer of *out_len bytes plus a NUL the length leaves out (the
 * caller frees it). Returns 0, GAZ_EINVAL (a symbol outside the alphabet,
 * '=' not at the end, a bad length or padding; *bad, when not NULL, gets
 * the offset of the first bad symbol, or where the length goes wrong,
 * counted after white space is dropped) or GAZ_ENOMEM. Symbols are checked
 * in order before the length, as Go's decoder reports them. */
int gaz_b64_decode(const char *s, size_t n, unsigned flags, uint8_t **out, size_t *out_len,
		   size_t *bad);

/* gaz_b64_encode encodes b[0..n) with the alphabet of `flags` (URL if
 * GAZ_B64_URL, else standard), padded if GAZ_B64_PAD. Returns a malloc'd
 * NUL-terminated string (the caller frees it), or NULL when out of
 * memory. */
char *gaz_b64_encode(const void *b, size_t n, unsigned flags);

#endif
