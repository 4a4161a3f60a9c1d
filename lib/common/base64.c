/*
 * base64.c - see base64.h. Lock rule: none (no shared state).
 */
#include "common/base64.h"

#include <stdlib.h>
#include <string.h>

#include "common/err.h"

static int value(unsigned char c, unsigned flags)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if ((flags & GAZ_B64_STD) && (c == '+' || c == '/'))
		return c == '+' ? 62 : 63;
	if ((flags & GAZ_B64_URL) && (c == '-' || c == '_'))
		return c == '-' ? 62 : 63;
	return -1;
}

static int fail(size_t at, size_t *bad)
{
	if (bad)
		*bad = at;
	return GAZ_EINVAL;
}

int gaz_b64_decode(const char *s, size_t n, unsigned flags, uint8_t **out, size_t *out_len,
		   size_t *bad)
{
	char *compact = NULL;
	size_t data = n, len = 0;
	uint32_t acc = 0;
	int bits = 0, rc = 0;
	uint8_t *o;

	if (flags & GAZ_B64_SPACE) {
		if (!(compact = malloc(n + 1)))
			return GAZ_ENOMEM;
		data = 0;
		for (size_t i = 0; i < n; i++)
			if (!s[i] || !strchr(" \t\r\n\v\f", s[i])) /* strchr finds a NUL too */
				compact[data++] = s[i];
		s = compact;
		n = data;
	}
	if (!(flags & GAZ_B64_NOPAD))
		while (data > 0 && n - data < 2 && s[data - 1] == '=')
			data--;
	for (size_t i = 0; i < data && !rc; i++)
		if (value((unsigned char)s[i], flags) < 0)
			rc = fail(i, bad);
	if (!rc && (flags & GAZ_B64_PAD) && n % 4)
		rc = fail(n - n % 4, bad);
	if (!rc && data % 4 == 1) /* a lone symbol holds no whole byte */
		rc = fail(data - 1, bad);
	if (!rc && !(o = malloc(data / 4 * 3 + 3)))
		rc = GAZ_ENOMEM;
	if (rc) {
		free(compact);
		return rc;
	}
	for (size_t i = 0; i < data; i++) {
		acc = (acc << 6) | (uint32_t)value((unsigned char)s[i], flags);
		if ((bits += 6) >= 8) {
			bits -= 8;
			o[len++] = (uint8_t)(acc >> bits);
		}
	}
	o[len] = '\0';
	free(compact);
	*out = o;
	*out_len = len;
	return 0;
}

char *gaz_b64_encode(const void *b, size_t n, unsigned flags)
{
	const char *tab = flags & GAZ_B64_URL
				  ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
				  : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const uint8_t *p = b;
	char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
			     (i + 2 < n ? p[i + 2] : 0);
		*o++ = tab[v >> 18];
		*o++ = tab[v >> 12 & 63];
		if (i + 1 < n)
			*o++ = tab[v >> 6 & 63];
		else if (flags & GAZ_B64_PAD)
			*o++ = '=';
		if (i + 2 < n)
			*o++ = tab[v & 63];
		else if (flags & GAZ_B64_PAD)
			*o++ = '=';
	}
	*o = '\0';
	return out;
}
