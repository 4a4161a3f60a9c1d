/*
 * offsets.c - the offsets files of `journals read --offsets` and
 * `--offsets-out`: a JSON object mapping journal names to read offsets,
 * as Gazette reads it (json.Decoder into map[Journal]int64) and writes it
 * (json.Encoder: keys sorted, HTML-safe strings, a trailing newline).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "client/gazctl/gazctl.h"

/* find returns the index of `journal`, or where it would be inserted. */
static size_t find(const struct gazctl_offsets *o, const char *journal, bool *found)
{
	size_t lo = 0, hi = o->n;

	*found = false;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(o->v[mid].journal, journal);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

bool gazctl_offsets_get(const struct gazctl_offsets *o, const char *journal, int64_t *off)
{
	bool found;
	size_t i = find(o, journal, &found);

	if (found)
		*off = o->v[i].offset;
	return found;
}

void gazctl_offsets_set(struct gazctl_offsets *o, const char *journal, int64_t off)
{
	bool found;
	size_t i = find(o, journal, &found);

	if (!found) {
		o->v = gazctl_xrealloc(o->v, (o->n + 1) * sizeof(*o->v));
		memmove(o->v + i + 1, o->v + i, (o->n - i) * sizeof(*o->v));
		o->v[i].journal = gazctl_xstrdup(journal);
		o->n++;
	}
	o->v[i].offset = off;
}

int gazctl_offsets_parse(const char *text, size_t len, struct gazctl_offsets *out,
			 struct gaz_status *st)
{
	json_error_t err;
	json_t *root = json_loadb(text, len, JSON_DECODE_ANY, &err), *v;
	const char *key;

	memset(out, 0, sizeof(*out));
	if (!root)
		return gaz_status_set(st, GAZ_EINVAL, "failed to decode offsets: line %d: %s",
				      err.line, err.text);
	if (json_is_null(root)) { /* Go decodes null into an empty map */
		json_decref(root);
		return 0;
	}
	if (!json_is_object(root)) {
		json_decref(root);
		return gaz_status_set(st, GAZ_EINVAL,
				      "failed to decode offsets: expected a JSON object");
	}
	json_object_foreach(root, key, v) {
		if (!json_is_integer(v)) {
			gaz_status_set(st, GAZ_EINVAL,
				       "failed to decode offsets: offset of \"%s\" is not an integer",
				       key); /* before the decref frees `key` */
			gazctl_offsets_release(out);
			json_decref(root);
			return GAZ_EINVAL;
		}
		gazctl_offsets_set(out, key, (int64_t)json_integer_value(v));
	}
	json_decref(root);
	return 0;
}

void gazctl_offsets_write(const struct gazctl_offsets *o, FILE *out)
{
	fputc('{', out);
	for (size_t i = 0; i < o->n; i++) {
		if (i)
			fputc(',', out);
		gazctl_json_string(out, o->v[i].journal);
		fprintf(out, ":%lld", (long long)o->v[i].offset);
	}
	fputs("}\n", out);
}

void gazctl_offsets_release(struct gazctl_offsets *o)
{
	for (size_t i = 0; i < o->n; i++)
		free(o->v[i].journal);
	free(o->v);
	memset(o, 0, sizeof(*o));
}
