/*
 * vctx.c - context-path error formatting and small helpers shared by the
 * validators (see vctx.h). No allocation; bounded text.
 */
#include "protocol/vctx.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define VCTX_DEPTH_MAX 16

/* Renders the chain outermost first, "A.B[2].C", into buf. */
static void vctx_render(const struct gaz__vctx *c, char *buf, size_t cap)
{
	const struct gaz__vctx *chain[VCTX_DEPTH_MAX];
	size_t n = 0, off = 0;

	for (; c && n < VCTX_DEPTH_MAX; c = c->up)
		chain[n++] = c;
	buf[0] = '\0';
	while (n-- > 0 && off < cap) {
		const struct gaz__vctx *f = chain[n];
		const char *dot = off ? "." : "";
		int w;

		if (f->idx >= 0)
			w = snprintf(buf + off, cap - off, "%s%s[%ld]", dot, f->name, f->idx);
		else
			w = snprintf(buf + off, cap - off, "%s%s", dot, f->name);
		if (w < 0)
			break;
		off += (size_t)w;
	}
}

int gaz__verr(struct gaz_status *st, const struct gaz__vctx *c, const char *fmt, ...)
{
	char path[256], msg[sizeof(st->msg)];
	va_list ap;

	if (!st || st->code != 0)
		return GAZ_EINVAL;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	vctx_render(c, path, sizeof(path));
	if (path[0])
		return gaz_status_set(st, GAZ_EINVAL, "%s: %s", path, msg);
	return gaz_status_set(st, GAZ_EINVAL, "%s", msg);
}

/* Go's one-letter escape for control byte `ch`, or 0. */
static char short_escape(unsigned char ch)
{
	static const char map[][2] = {{'\a', 'a'}, {'\b', 'b'}, {'\t', 't'}, {'\n', 'n'},
				      {'\v', 'v'}, {'\f', 'f'}, {'\r', 'r'}};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (map[i][0] == (char)ch)
			return map[i][1];
	return 0;
}

char *gaz__quote(const char *s, size_t n, char *buf, size_t cap)
{
	size_t o = 0;

	buf[o++] = '"';
	for (size_t i = 0, w = 1; i < n; i += w) {
		unsigned char ch = (unsigned char)s[i];
		char esc[5];
		size_t k;

		w = 1;
		if (ch >= 0x80)
			(void)gaz__utf8_decode((const unsigned char *)s + i, n - i, &w);
		if (w > 1)
			memcpy(esc, s + i, w), k = w; /* valid UTF-8 stays as is */
		else if (ch >= 0x80)
			k = (size_t)snprintf(esc, sizeof(esc), "\\x%02x", ch);
		else if (ch == '"' || ch == '\\')
			k = (size_t)snprintf(esc, sizeof(esc), "\\%c", ch);
		else if (short_escape(ch))
			k = (size_t)snprintf(esc, sizeof(esc), "\\%c", short_escape(ch));
		else if (ch < 0x20 || ch == 0x7f)
			k = (size_t)snprintf(esc, sizeof(esc), "\\x%02x", ch);
		else
			esc[0] = (char)ch, esc[1] = '\0', k = 1;
		if (o + k + 2 > cap)
			break;
		memcpy(buf + o, esc, k);
		o += k;
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}

const char *gaz__enum_name(const ProtobufCEnumDescriptor *d, int v, char *buf, size_t cap)
{
	const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(d, v);

	if (ev)
		snprintf(buf, cap, "%s", ev->name);
	else
		snprintf(buf, cap, "%d", v);
	return buf;
}

int64_t gaz__duration_ns(const Google__Protobuf__Duration *d)
{
	const int64_t lim = INT64_MAX / 1000000000;
	int64_t ns;

	if (!d)
		return 0;
	if (d->seconds > lim)
		return INT64_MAX;
	if (d->seconds < -lim)
		return INT64_MIN;
	ns = d->seconds * 1000000000;
	if (d->nanos > 0 && ns > INT64_MAX - d->nanos)
		return INT64_MAX;
	if (d->nanos < 0 && ns < INT64_MIN - d->nanos)
		return INT64_MIN;
	return ns + d->nanos;
}
