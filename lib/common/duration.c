/*
 * duration.c - Go duration syntax for flags, INI files and logs.
 *
 * Invariants: magnitudes are carried as uint64 so that the most negative
 * int64 (-2562047h47m16.854775808s) parses and formats like Go; nothing
 * here allocates or touches global state.
 */
#include "common/duration.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define DUR_LIMIT (UINT64_C(1) << 63) /* |min int64| */

static const struct {
	const char *name;
	uint64_t ns;
} dur_units[] = {
	{"ns", 1},
	{"us", 1000},
	{"\xc2\xb5s", 1000}, /* µs, U+00B5 micro sign */
	{"\xce\xbcs", 1000}, /* μs, U+03BC greek mu */
	{"ms", 1000000},
	{"s", UINT64_C(1000000000)},
	{"m", UINT64_C(60000000000)},
	{"h", UINT64_C(3600000000000)},
};

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Integer digits at *p into *v; false on overflow past 2^63. */
static bool lead_int(const char **p, uint64_t *v)
{
	uint64_t x = 0;

	for (; is_digit(**p); (*p)++) {
		if (x > DUR_LIMIT / 10)
			return false;
		x = x * 10 + (uint64_t)(**p - '0');
		if (x > DUR_LIMIT)
			return false;
	}
	*v = x;
	return true;
}

/* Fraction digits at *p; digits past uint64 precision are dropped (as Go). */
static void lead_frac(const char **p, uint64_t *f, double *scale)
{
	bool full = false;

	*f = 0;
	*scale = 1;
	for (; is_digit(**p); (*p)++) {
		if (full)
			continue;
		if (*f > (DUR_LIMIT - 1) / 10) {
			full = true;
			continue;
		}
		*f = *f * 10 + (uint64_t)(**p - '0');
		*scale *= 10;
	}
}

/* The unit at *p (up to the next digit or '.'); *len gets its length. */
static int unit_of(const char **p, uint64_t *unit, size_t *len)
{
	const char *s = *p;
	size_t n = 0;

	while (s[n] && s[n] != '.' && !is_digit(s[n]))
		n++;
	*len = n;
	for (size_t i = 0; i < sizeof(dur_units) / sizeof(dur_units[0]); i++) {
		if (strlen(dur_units[i].name) == n && !memcmp(dur_units[i].name, s, n)) {
			*unit = dur_units[i].ns;
			*p = s + n;
			return 0;
		}
	}
	return n ? GAZ_ENOTFOUND : GAZ_EINVAL;
}

/* One "<number><unit>" component, added to *total. */
static int parse_component(const char **p, uint64_t *total, const char *orig,
			   struct gaz_status *st)
{
	const char *start = *p;
	uint64_t v, f, unit;
	double scale;
	size_t ulen;
	int rc;

	if (!lead_int(p, &v))
		return gaz_status_set(st, GAZ_EINVAL, "time: invalid duration \"%s\"", orig);
	bool pre = *p != start;
	bool post = false;
	if (**p == '.') {
		const char *fs = ++(*p);
		lead_frac(p, &f, &scale);
		post = *p != fs;
	} else {
		f = 0;
		scale = 1;
	}
	if (!pre && !post)
		return gaz_status_set(st, GAZ_EINVAL, "time: invalid duration \"%s\"", orig);
	rc = unit_of(p, &unit, &ulen);
	if (rc == GAZ_EINVAL)
		return gaz_status_set(st, GAZ_EINVAL, "time: missing unit in duration \"%s\"", orig);
	if (rc)
		return gaz_status_set(st, GAZ_EINVAL, "time: unknown unit \"%.*s\" in duration \"%s\"",
				      (int)ulen, *p, orig);
	if (v > DUR_LIMIT / unit)
		return gaz_status_set(st, GAZ_EINVAL, "time: invalid duration \"%s\"", orig);
	v *= unit;
	if (f > 0) {
		v += (uint64_t)((double)f * ((double)unit / scale));
		if (v > DUR_LIMIT)
			return gaz_status_set(st, GAZ_EINVAL, "time: invalid duration \"%s\"", orig);
	}
	*total += v;
	if (*total > DUR_LIMIT)
		return gaz_status_set(st, GAZ_EINVAL, "time: invalid duration \"%s\"", orig);
	return 0;
}

int gaz_duration_parse(const char *s, int64_t *out_ns, struct gaz_status *st)
{
	const char *p = s;
	uint64_t total = 0;
	bool neg = false;
	int rc;

	if (*p == '-' || *p == '+')
		neg = *p++ == '-';
	if (!strcmp(p, "0")) {
		*out_ns = 0;
		return 0;
	}
	if (!*p)
		return gaz_status_set(st, GAZ_EINVAL, "time: invalid duration \"%s\"", s);
	while (*p) {
		rc = parse_component(&p, &total, s, st);
		if (rc)
			return rc;
	}
	if (!neg && total > DUR_LIMIT - 1)
		return gaz_status_set(st, GAZ_EINVAL, "time: invalid duration \"%s\"", s);
	*out_ns = neg ? (int64_t)(0 - total) : (int64_t)total;
	return 0;
}

/* Appends v / 10^prec with up to prec fraction digits, trailing zeros cut. */
static int put_frac(char *out, size_t cap, uint64_t v, int prec)
{
	uint64_t pow = 1;
	char frac[24];
	int n;

	for (int i = 0; i < prec; i++)
		pow *= 10;
	n = snprintf(frac, sizeof(frac), "%0*llu", prec, (unsigned long long)(v % pow));
	while (n > 0 && frac[n - 1] == '0')
		frac[--n] = '\0';
	if (n == 0)
		return snprintf(out, cap, "%llu", (unsigned long long)(v / pow));
	return snprintf(out, cap, "%llu.%s", (unsigned long long)(v / pow), frac);
}

char *gaz_duration_format(int64_t ns, char *buf)
{
	uint64_t u = ns < 0 ? 0 - (uint64_t)ns : (uint64_t)ns;
	size_t cap = GAZ_DURATION_STR_MAX, n = 0;

	if (ns < 0)
		buf[n++] = '-';
	if (u == 0) {
		snprintf(buf, cap, "0s");
	} else if (u < 1000) {
		snprintf(buf + n, cap - n, "%lluns", (unsigned long long)u);
	} else if (u < 1000000) {
		n += (size_t)put_frac(buf + n, cap - n, u, 3);
		snprintf(buf + n, cap - n, "\xc2\xb5s");
	} else if (u < UINT64_C(1000000000)) {
		n += (size_t)put_frac(buf + n, cap - n, u, 6);
		snprintf(buf + n, cap - n, "ms");
	} else {
		uint64_t secs = u / UINT64_C(1000000000);
		if (secs >= 3600)
			n += (size_t)snprintf(buf + n, cap - n, "%lluh",
					      (unsigned long long)(secs / 3600));
		if (secs >= 60)
			n += (size_t)snprintf(buf + n, cap - n, "%llum",
					      (unsigned long long)(secs / 60 % 60));
		n += (size_t)put_frac(buf + n, cap - n,
				      (secs % 60) * UINT64_C(1000000000) + u % UINT64_C(1000000000), 9);
		snprintf(buf + n, cap - n, "s");
	}
	return buf;
}
