/*
 * token.c - gazette-facts §3.1/§3.2: the token and path-component character
 * rules and journal names.
 *
 * Runes are decoded from UTF-8 the way Go's `for _, r := range s` does: a
 * malformed sequence (bad lead or continuation byte, overlong form,
 * surrogate, > U+10FFFF, truncation) yields U+FFFD and advances one byte.
 * U+FFFD is neither a letter nor a number nor a symbol, so malformed UTF-8
 * is never a valid token. Letters/numbers come from the exact Unicode table
 * in unicode_tab.h. Lengths are bytes.
 */
#include "protocol/validate.h"
#include "protocol/vctx.h"
#include "protocol/unicode_tab.h"

#include <string.h>

#define RUNE_ERROR 0xFFFDu

uint32_t gaz__utf8_decode(const unsigned char *s, size_t n, size_t *w)
{
	static const uint32_t min_cp[4] = {0, 0x80, 0x800, 0x10000};
	uint32_t r;
	size_t len;

	*w = 1;
	if (s[0] < 0x80)
		return s[0];
	if (s[0] >= 0xC2 && s[0] <= 0xDF)
		len = 2, r = s[0] & 0x1Fu;
	else if (s[0] >= 0xE0 && s[0] <= 0xEF)
		len = 3, r = s[0] & 0x0Fu;
	else if (s[0] >= 0xF0 && s[0] <= 0xF4)
		len = 4, r = s[0] & 0x07u;
	else
		return RUNE_ERROR;
	if (len > n)
		return RUNE_ERROR;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return RUNE_ERROR;
		r = (r << 6) | (s[i] & 0x3Fu);
	}
	if (r < min_cp[len - 1] || r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF))
		return RUNE_ERROR;
	*w = len;
	return r;
}

bool gaz_rune_is_letter_or_number(uint32_t r)
{
	size_t lo = 0, hi = sizeof(gaz__unicode_ln) / sizeof(gaz__unicode_ln[0]);

	if (r < 0x80)
		return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9');
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r < gaz__unicode_ln[mid][0])
			hi = mid;
		else if (r > gaz__unicode_ln[mid][1])
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

int gaz__validate_token(const char *s, size_t n, const char *symbols, size_t min_len,
			size_t max_len, const struct gaz__vctx *c, struct gaz_status *st)
{
	const unsigned char *u = (const unsigned char *)s;

	if (n < min_len || n > max_len)
		return gaz__verr(st, c, "invalid length (%zu; expected %zu <= length <= %zu)", n,
				 min_len, max_len);
	for (size_t i = 0, w; i < n; i += w) {
		uint32_t r = gaz__utf8_decode(u + i, n - i, &w);

		if (gaz_rune_is_letter_or_number(r))
			continue;
		if (r != 0 && r < 0x80 && strchr(symbols, (int)r))
			continue;
		return gaz__verr(st, c, "not a valid token (%.*s)", (int)n, s);
	}
	return 0;
}

int gaz_validate_token(const char *s, const char *symbols, size_t min_len, size_t max_len,
		       struct gaz_status *st)
{
	s = gaz__str(s);
	return gaz__validate_token(s, strlen(s), symbols, min_len, max_len, NULL, st);
}

/*
 * path.Clean(p) == p for non-empty p exactly when p is "." or "/", or: it has
 * no trailing '/', no empty element ("//"), no "." element, and ".."
 * elements only as a leading run of a relative path (Clean keeps those, and
 * removes every other "..").
 */
bool gaz_path_is_clean(const char *s, size_t n)
{
	bool rooted, leading;
	size_t i;

	if (n == 0)
		return false;
	if (n == 1 && (s[0] == '.' || s[0] == '/'))
		return true;
	if (s[n - 1] == '/')
		return false;
	rooted = s[0] == '/';
	leading = !rooted;
	for (i = rooted ? 1 : 0; i < n;) {
		size_t j = i;

		while (j < n && s[j] != '/')
			j++;
		if (j == i || (j - i == 1 && s[i] == '.'))
			return false;
		if (j - i == 2 && s[i] == '.' && s[i + 1] == '.') {
			if (!leading)
				return false;
		} else {
			leading = false;
		}
		i = j + 1;
	}
	return true;
}

int gaz__validate_path_component(const char *s, size_t n, size_t min_len, size_t max_len,
				 const struct gaz__vctx *c, struct gaz_status *st)
{
	int rc = gaz__validate_token(s, n, GAZ_PATH_SYMBOLS, min_len, max_len, c, st);

	if (rc)
		return rc;
	if (n != 0 && !gaz_path_is_clean(s, n))
		return gaz__verr(st, c, "must be a clean path (%.*s)", (int)n, s);
	if (n != 0 && s[0] == '/')
		return gaz__verr(st, c, "cannot begin with '/' (%.*s)", (int)n, s);
	return 0;
}

int gaz_validate_path_component(const char *s, size_t min_len, size_t max_len,
				struct gaz_status *st)
{
	s = gaz__str(s);
	return gaz__validate_path_component(s, strlen(s), min_len, max_len, NULL, st);
}

size_t gaz_journal_name_len(const char *journal)
{
	const char *semi;

	journal = gaz__str(journal);
	semi = strchr(journal, ';');
	return semi ? (size_t)(semi - journal) : strlen(journal);
}

int gaz__validate_journal(const char *journal, const struct gaz__vctx *c,
			  struct gaz_status *st)
{
	size_t name_len, len;
	int rc;

	journal = gaz__str(journal);
	len = strlen(journal);
	name_len = gaz_journal_name_len(journal);
	rc = gaz__validate_path_component(journal, name_len, GAZ_JOURNAL_NAME_MIN,
					  GAZ_JOURNAL_NAME_MAX, c, st);
	if (rc || name_len == len)
		return rc;
	GAZ__VCTX(meta, c, "metadata path segment", -1);
	return gaz__validate_path_component(journal + name_len + 1, len - name_len - 1, 1,
					    GAZ_JOURNAL_NAME_MAX, &meta, st);
}

int gaz_validate_journal(const char *journal, struct gaz_status *st)
{
	return gaz__validate_journal(journal, NULL, st);
}
