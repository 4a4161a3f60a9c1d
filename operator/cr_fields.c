/*
 * cr_fields.c - field helpers of the CR conversions (see cr_fields.h).
 */
#include "operator/cr_fields.h"

#include <string.h>

#include "common/duration.h"
#include "gazette/duration.h"

int gaz_cr_field_err(struct gaz_status *st, const char *field, const char *what)
{
	return gaz_status_set(st, GAZ_EINVAL, "spec.%s: %s", field, what);
}

int gaz_cr_get_duration(const json_t *o, const char *key, const char *field,
			Google__Protobuf__Duration **out, struct gaz_status *st)
{
	const json_t *v = json_object_get(o, key);
	int64_t ns = 0;

	if (v && !json_is_string(v))
		return gaz_cr_field_err(st, field, "not a string");
	if (v && gaz_duration_parse(json_string_value(v), &ns, st)) {
		gaz_status_prefix(st, "spec.%s: ", field);
		return GAZ_EINVAL;
	}
	return (*out = gaz_duration_new_pb(ns)) ? 0 : GAZ_ENOMEM;
}

int64_t gaz_cr_dur_ns(const Google__Protobuf__Duration *d)
{
	int64_t ns = 0;

	if (d && gaz_duration_from_pb(d, &ns, NULL))
		ns = 0;
	return ns;
}

int gaz_cr_put_duration(json_t *o, const char *key, const Google__Protobuf__Duration *d)
{
	char buf[GAZ_DURATION_STR_MAX];
	int64_t ns = gaz_cr_dur_ns(d);

	return ns ? json_object_set_new(o, key, json_string(gaz_duration_format(ns, buf))) : 0;
}

bool gaz_cr_str_eq(const char *a, const char *b)
{
	return !strcmp(a ? a : "", b ? b : "");
}
