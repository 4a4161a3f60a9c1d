/*
 * url.c - URL parsing with Go net/url.Parse acceptance rules (see url.h).
 *
 * Invariant: all fields of a parsed URL are carved out of one buffer of
 * strlen(raw) + 8 bytes. The fields are disjoint substrings of raw, and
 * %-decoding only shrinks, so seven NUL terminators fit in the slack.
 */
#include "common/hex.h"
#include "protocol/url.h"
#include "protocol/vctx.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum esc_mode { ESC_PATH, ESC_HOST, ESC_ZONE, ESC_FRAGMENT, ESC_USERINFO };

struct carve {
	char *p;
	char why[160]; /* reason of the failure, without the `parse "..."` part */
};

static bool is_alnum(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Go's shouldEscape(c, encodeHost) for ASCII c. */
static bool host_char_bad(unsigned char c)
{
	return !is_alnum(c) && !strchr("-_.~!$&'()*+,;=:[]<>\"", c);
}

/* RFC 6874 zones may escape anything but what a host can't hold. */
static bool zone_escape_bad(const char *esc, enum esc_mode m, int v)
{
	return m == ESC_ZONE && strncmp(esc, "%25", 3) != 0 && v != ' ' &&
	       (v >= 0x80 || host_char_bad((unsigned char)v));
}

static char *carve_copy(struct carve *cv, const char *s, size_t n)
{
	char *d = cv->p;

	memcpy(d, s, n);
	d[n] = '\0';
	cv->p += n + 1;
	return d;
}

/* Decodes %XX escapes of s[0..n) into the carve buffer; NULL on a bad
 * escape or (host mode) a bad character, with cv->why set. */
static char *carve_unescape(struct carve *cv, const char *s, size_t n, enum esc_mode m)
{
	char *d = cv->p, q[16];
	size_t o = 0;

	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];

		if (c == '%') {
			int hi = i + 2 < n ? gaz_hex_digit(s[i + 1]) : -1;
			int lo = i + 2 < n ? gaz_hex_digit(s[i + 2]) : -1;
			size_t k = n - i < 3 ? n - i : 3;

			if (hi < 0 || lo < 0 || zone_escape_bad(s + i, m, hi << 4 | lo) ||
			    (m == ESC_HOST && hi < 8 && strncmp(s + i, "%25", 3) != 0)) {
				snprintf(cv->why, sizeof(cv->why), "invalid URL escape %s",
					 gaz__quote(s + i, k, q, sizeof(q)));
				return NULL;
			}
			d[o++] = (char)(hi << 4 | lo);
			i += 3;
			continue;
		}
		if ((m == ESC_HOST || m == ESC_ZONE) && c < 0x80 && host_char_bad(c)) {
			snprintf(cv->why, sizeof(cv->why), "invalid character %s in host name",
				 gaz__quote(s + i, 1, q, sizeof(q)));
			return NULL;
		}
		d[o++] = (char)c;
		i++;
	}
	d[o] = '\0';
	cv->p += o + 1;
	return d;
}

static bool valid_optional_port(const char *p, size_t n)
{
	if (n == 0)
		return true;
	if (p[0] != ':')
		return false;
	for (size_t i = 1; i < n; i++)
		if (p[i] < '0' || p[i] > '9')
			return false;
	return true;
}

static const char *last_of(const char *s, size_t n, char ch)
{
	while (n-- > 0)
		if (s[n] == ch)
			return s + n;
	return NULL;
}

static int bad_port(struct carve *cv, const char *port, size_t n)
{
	char q[96];

	snprintf(cv->why, sizeof(cv->why), "invalid port %s after host",
		 gaz__quote(port, n, q, sizeof(q)));
	return -1;
}

/* "[IPv6(%25zone)]:port": the literal must be an IPv6 address (not IPv4). */
static int parse_ip_literal(struct carve *cv, const char *h, size_t n, struct gaz_url *u)
{
	const char *rb = last_of(h, n, ']'), *zone;
	unsigned char addr[16];
	char ip[64], q[96];
	size_t iplen;

	if (!rb) {
		snprintf(cv->why, sizeof(cv->why), "missing ']' in host");
		return -1;
	}
	if (!valid_optional_port(rb + 1, (size_t)(h + n - rb - 1)))
		return bad_port(cv, rb + 1, (size_t)(h + n - rb - 1));
	zone = memmem(h + 1, (size_t)(rb - h - 1), "%25", 3);
	iplen = (size_t)((zone ? zone : rb) - h - 1);
	if (iplen >= sizeof(ip) || (memcpy(ip, h + 1, iplen), ip[iplen] = '\0',
				    inet_pton(AF_INET6, ip, addr) != 1)) {
		if (iplen < sizeof(ip) && inet_pton(AF_INET, ip, addr) == 1)
			snprintf(cv->why, sizeof(cv->why), "invalid IP-literal");
		else
			snprintf(cv->why, sizeof(cv->why),
				 "invalid host: ParseAddr(%s): unable to parse IP",
				 gaz__quote(h + 1, (size_t)(rb - h - 1), q, sizeof(q)));
		return -1;
	}
	u->host = carve_unescape(cv, h, n, ESC_ZONE);
	return u->host ? 0 : -1;
}

/* Go's parseHost (Go 1.26 rules): for http(s) the FIRST ':' starts the port
 * (strict colons), for other schemes the last. */
static int parse_host(struct carve *cv, const char *h, size_t n, struct gaz_url *u)
{
	const char *lb = last_of(h, n, '['), *colon;

	if (lb && lb != h) {
		snprintf(cv->why, sizeof(cv->why), "invalid IP-literal");
		return -1;
	}
	if (lb)
		return parse_ip_literal(cv, h, n, u);
	colon = memchr(h, ':', n);
	if (colon && strcmp(u->scheme, "http") && strcmp(u->scheme, "https"))
		colon = last_of(h, n, ':');
	if (colon && !valid_optional_port(colon, (size_t)(h + n - colon)))
		return bad_port(cv, colon, (size_t)(h + n - colon));
	u->host = carve_unescape(cv, h, n, ESC_HOST);
	return u->host ? 0 : -1;
}

static bool valid_userinfo(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!is_alnum(c) && (c >= 0x80 || !strchr("-._:~!$&'()*+,;=%@", c)))
			return false;
	}
	return true;
}

static int parse_authority(struct carve *cv, const char *a, size_t n, struct gaz_url *u)
{
	const char *at = last_of(a, n, '@');
	size_t hoff = at ? (size_t)(at - a) + 1 : 0;

	if (parse_host(cv, a + hoff, n - hoff, u))
		return -1;
	if (!at)
		return 0;
	if (!valid_userinfo(a, hoff - 1)) {
		snprintf(cv->why, sizeof(cv->why), "net/url: invalid userinfo");
		return -1;
	}
	/* Go unescapes user and password: only the escape check matters, so
	 * the decoded copy is dropped and the raw text kept (one carve). */
	char *mark = cv->p;

	if (!carve_unescape(cv, a, hoff - 1, ESC_USERINFO))
		return -1;
	cv->p = mark;
	u->userinfo = carve_copy(cv, a, hoff - 1);
	u->has_userinfo = true;
	return 0;
}

/* Length of a scheme ending at a ':' (> 0), 0 for none, -1 for ":..." */
static long scheme_len(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
			continue;
		if ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.') {
			if (i == 0)
				return 0;
			continue;
		}
		if (c == ':')
			return i == 0 ? -1 : (long)i;
		return 0;
	}
	return 0;
}

/* Splits "?query" off rest[0..*n) (Go's ForceQuery rule included). */
static void split_query(struct carve *cv, const char *rest, size_t *n, struct gaz_url *u)
{
	const char *q = memchr(rest, '?', *n);

	if (q && q == rest + *n - 1) {
		u->raw_query = carve_copy(cv, "", 0);
		*n -= 1;
	} else if (q) {
		u->raw_query = carve_copy(cv, q + 1, (size_t)(rest + *n - q - 1));
		*n = (size_t)(q - rest);
	} else {
		u->raw_query = carve_copy(cv, "", 0);
	}
}

/* Authority and path of rest[0..n) (after scheme and query are split). */
static int parse_hier(struct carve *cv, const char *rest, size_t n, struct gaz_url *u)
{
	bool abs = u->scheme[0] != '\0';

	if (n == 0 || rest[0] != '/') {
		const char *slash = memchr(rest, '/', n);
		size_t seg = slash ? (size_t)(slash - rest) : n;

		if (abs) {
			u->opaque = carve_copy(cv, rest, n);
			return 0;
		}
		if (memchr(rest, ':', seg)) {
			snprintf(cv->why, sizeof(cv->why),
				 "first path segment in URL cannot contain colon");
			return -1;
		}
	}
	if ((abs || !(n >= 3 && !strncmp(rest, "///", 3))) && n >= 2 && !strncmp(rest, "//", 2)) {
		const char *slash = memchr(rest + 2, '/', n - 2);
		size_t alen = slash ? (size_t)(slash - rest - 2) : n - 2;

		if (parse_authority(cv, rest + 2, alen, u))
			return -1;
		n -= 2 + alen;
		rest += 2 + alen;
	}
	u->path = carve_unescape(cv, rest, n, ESC_PATH);
	return u->path ? 0 : -1;
}

/* Everything before the '#': s[0..n). */
static int parse_main(struct carve *cv, const char *s, size_t n, struct gaz_url *u)
{
	long sl;

	for (size_t i = 0; i < n; i++) {
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) {
			snprintf(cv->why, sizeof(cv->why),
				 "net/url: invalid control character in URL");
			return -1;
		}
	}
	if (n == 1 && s[0] == '*') {
		u->path = carve_copy(cv, "*", 1);
		return 0;
	}
	if ((sl = scheme_len(s, n)) < 0) {
		snprintf(cv->why, sizeof(cv->why), "missing protocol scheme");
		return -1;
	}
	u->scheme = carve_copy(cv, s, (size_t)sl);
	for (char *p = u->scheme; *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	if (sl > 0)
		s += sl + 1, n -= (size_t)sl + 1;
	split_query(cv, s, &n, u);
	return parse_hier(cv, s, n, u);
}

static void fill_empty(struct carve *cv, struct gaz_url *u)
{
	char **fields[] = {&u->scheme, &u->opaque, &u->userinfo, &u->host,
			   &u->path, &u->raw_query, &u->fragment};

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (!*fields[i])
			*fields[i] = carve_copy(cv, "", 0);
}

int gaz_url_parse(const char *raw, struct gaz_url *u, struct gaz_status *st)
{
	const char *hash;
	struct carve cv;
	size_t len, ulen;
	char q[300];

	raw = gaz__str(raw);
	memset(u, 0, sizeof(*u));
	len = strlen(raw);
	hash = strchr(raw, '#');
	ulen = hash ? (size_t)(hash - raw) : len;
	if (!(u->buf_ = malloc(len + 8)))
		return gaz_status_set(st, GAZ_ENOMEM, "parse url: out of memory");
	cv.p = u->buf_;
	cv.why[0] = '\0';
	if (parse_main(&cv, raw, ulen, u)) {
		gaz_url_release(u);
		return gaz_status_set(st, GAZ_EINVAL, "parse %s: %s",
				      gaz__quote(raw, ulen, q, sizeof(q)), cv.why);
	}
	if (hash && hash[1] &&
	    !(u->fragment = carve_unescape(&cv, hash + 1, len - ulen - 1, ESC_FRAGMENT))) {
		gaz_url_release(u);
		return gaz_status_set(st, GAZ_EINVAL, "parse %s: %s",
				      gaz__quote(raw, len, q, sizeof(q)), cv.why);
	}
	fill_empty(&cv, u);
	return 0;
}

void gaz_url_release(struct gaz_url *u)
{
	free(u->buf_);
	memset(u, 0, sizeof(*u));
}
