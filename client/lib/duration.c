/*
 * duration.c - conversions between Go duration text, int64 nanoseconds,
 * google.protobuf.Duration and its proto3 JSON form.
 *
 * Go text itself is parsed and formatted by lib/common/duration.c; this file
 * only adds what the client tools need on top. Invariants: magnitudes are
 * carried as uint64 so INT64_MIN never overflows; nothing allocates except
 * gaz_duration_new_pb.
 */
#include "gazette/duration.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_S INT64_C(1000000000)

/* True when `s` is an optional sign followed by one or more decimal digits. */
static int is_decimal_int(const char *s)
{
	if (*s == '-' || *s == '+')
		s++;
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

int gaz_duration_parse_spec(const char *s, int64_t *out_ns, struct gaz_status *st)
{
	long long v;
	char *end;

	if (!is_decimal_int(s))
		return gaz_duration_parse(s, out_ns, st);
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno == ERANGE || *end)
		return gaz_status_set(st, GAZ_EINVAL,
				      "invalid duration \"%s\": nanoseconds out of range", s);
	*out_ns = (int64_t)v;
	return 0;
}

int gaz_duration_from_pb(const Google__Protobuf__Duration *d, int64_t *out_ns,
			 struct gaz_status *st)
{
	int64_t secs;

	if (!d) {
		*out_ns = 0;
		return 0;
	}
	secs = d->seconds;
	if (d->nanos <= -NS_PER_S || d->nanos >= NS_PER_S ||
	    (secs > 0 && d->nanos < 0) || (secs < 0 && d->nanos > 0))
		return gaz_status_set(st, GAZ_EINVAL,
				      "invalid duration {seconds %lld, nanos %d}: bad nanos",
				      (long long)secs, (int)d->nanos);
	if (secs > INT64_MAX / NS_PER_S || secs < INT64_MIN / NS_PER_S ||
	    (secs == INT64_MAX / NS_PER_S && d->nanos > INT64_MAX % NS_PER_S) ||
	    (secs == INT64_MIN / NS_PER_S && d->nanos < INT64_MIN % NS_PER_S))
		return gaz_status_set(st, GAZ_EINVAL,
				      "invalid duration {seconds %lld, nanos %d}: out of range",
				      (long long)secs, (int)d->nanos);
	*out_ns = secs * NS_PER_S + d->nanos;
	return 0;
}

void gaz_duration_set_pb(Google__Protobuf__Duration *d, int64_t ns)
{
	d->seconds = ns / NS_PER_S; /* C division truncates: same sign */
	d->nanos = (int32_t)(ns % NS_PER_S);
}

Google__Protobuf__Duration *gaz_duration_new_pb(int64_t ns)
{
	Google__Protobuf__Duration *d = malloc(sizeof(*d));

	if (!d)
		return NULL;
	google__protobuf__duration__init(d);
	gaz_duration_set_pb(d, ns);
	return d;
}

char *gaz_duration_format_json(int64_t seconds, int32_t nanos, char *buf)
{
	int neg = seconds < 0 || nanos < 0;
	uint64_t s = seconds < 0 ? 0 - (uint64_t)seconds : (uint64_t)seconds;
	uint32_t ns = nanos < 0 ? 0 - (uint32_t)nanos : (uint32_t)nanos;
	const char *sign = neg ? "-" : "";

	if (ns == 0)
		snprintf(buf, GAZ_DURATION_JSON_MAX, "%s%llus", sign, (unsigned long long)s);
	else if (ns % 1000000 == 0)
		snprintf(buf, GAZ_DURATION_JSON_MAX, "%s%llu.%03us", sign,
			 (unsigned long long)s, (unsigned)(ns / 1000000));
	else if (ns % 1000 == 0)
		snprintf(buf, GAZ_DURATION_JSON_MAX, "%s%llu.%06us", sign,
			 (unsigned long long)s, (unsigned)(ns / 1000));
	else
		snprintf(buf, GAZ_DURATION_JSON_MAX, "%s%llu.%09us", sign,
			 (unsigned long long)s, (unsigned)ns);
	return buf;
}
