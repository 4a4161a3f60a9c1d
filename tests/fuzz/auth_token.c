/*
 * auth_token.c - fuzz target: authorization tokens (lib/protocol/auth.c),
 * which every broker and consumer verifies from a client's
 * "authorization" header: the Bearer prefix, the compact JWS's three
 * base64url segments, the header and claims JSON (cap, sel with its
 * labels, exp/iat/nbf, registered claims), the algorithm and the HMAC; the
 * key list of --broker.auth-keys; and claims signed with a real key, so
 * the time and capability checks and the selector matching behind a valid
 * signature are reached too.
 *
 * Input: byte 0 picks the mode, the rest is the text:
 *   0: an authorization header value as given;
 *   1: "Bearer " + the text;
 *   2: the text is the claims JSON, signed HS256 with the first key;
 *   3: a --broker.auth-keys value.
 */
#include "fuzz.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "protocol/auth.h"
#include "protocol/labels.h"

static const char KEYS[] = "Zmlyc3QgZnV6eiBrZXk= c2Vjb25kIGtleQ==";
static const char KEY1[] = "first fuzz key";

static char *b64url(const unsigned char *b, size_t n)
{
	static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	char *o = malloc(n / 3 * 4 + 5), *p = o;

	if (!o)
		abort();
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)b[i] << 16 | (i + 1 < n ? (unsigned)b[i + 1] << 8 : 0) |
			     (i + 2 < n ? b[i + 2] : 0);
		*p++ = t[v >> 18 & 63];
		*p++ = t[v >> 12 & 63];
		if (i + 1 < n)
			*p++ = t[v >> 6 & 63];
		if (i + 2 < n)
			*p++ = t[v & 63];
	}
	*p = '\0';
	return o;
}

static void verify(const struct gaz_auth *a, const char *authz)
{
	static const uint32_t caps[] = {GAZ_CAP_LIST, GAZ_CAP_READ, GAZ_CAP_APPEND | GAZ_CAP_READ, 1u << 20};
	struct gaz_claims c;
	struct gaz_status st = {0};

	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		if (gaz_auth_verify(a, authz, caps[i], 1750000000.0, &c, &st) == 0) {
			gaz_selector_matches_meta(c.sel, "a/journal", NULL, 0);
			gaz_selector_matches_meta(c.sel, "a/journal", NULL, GAZ_MATCH_PREFIX_META);
			gaz_claims_release(&c);
		}
		gaz_status_clear(&st);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gaz_auth *a;
	char *text, *authz, *h, *p;
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned mac_n = 0;

	if (!a && gaz_auth_new(KEYS, &a, NULL))
		abort();
	if (size < 1)
		return 0;
	text = fuzz_str(data + 1, size - 1);
	switch (data[0] % 4) {
	case 0:
		verify(a, text);
		break;
	case 1:
		if (!(authz = malloc(strlen(text) + 8)))
			abort();
		sprintf(authz, "Bearer %s", text);
		verify(a, authz);
		free(authz);
		break;
	case 2: {
		static const char header[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
		size_t n;
		h = b64url((const unsigned char *)header, strlen(header));
		p = b64url((const unsigned char *)text, strlen(text));
		n = strlen(h) + 1 + strlen(p);
		if (!(authz = malloc(7 + n + 1 + EVP_MAX_MD_SIZE * 2)))
			abort();
		sprintf(authz, "Bearer %s.%s", h, p);
		HMAC(EVP_sha256(), KEY1, (int)strlen(KEY1), (unsigned char *)authz + 7, n, mac, &mac_n);
		free(p);
		p = b64url(mac, mac_n);
		strcat(authz, ".");
		strcat(authz, p);
		verify(a, authz);
		free(h);
		free(p);
		free(authz);
		break;
	}
	default: {
		struct gaz_auth *k = NULL;
		char *bearer = NULL;
		if (gaz_auth_new(text, &k, NULL) == 0) {
			if (gaz_auth_sign_journal(k, GAZ_CAP_READ, "a/journal", 60, &bearer, NULL) == 0)
				free(bearer);
			gaz_auth_free(k);
		}
		break;
	}
	}
	free(text);
	return 0;
}
