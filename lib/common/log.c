/* log.c - text/JSON log lines on stderr. See log.h. */
#include "common/log.h"
#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int gaz_log_level_cur = GAZ_LOG_WARN;
static int log_json;

static const char *level_names[] = {"trace", "debug", "info", "warning", "error", "fatal"};

int gaz_log_setup(const char *level, const char *format)
{
	static const char *in[] = {"trace", "debug", "info", "warn", "error", "fatal"};
	int lvl = -1;

	for (int i = 0; level && i < 6; i++)
		if (!strcmp(level, in[i]) || !strcmp(level, level_names[i]))
			lvl = i;
	if (level && lvl < 0)
		return GAZ_EINVAL;
	if (format && strcmp(format, "text") && strcmp(format, "json") && strcmp(format, "color"))
		return GAZ_EINVAL;
	if (lvl >= 0)
		gaz_log_level_cur = lvl;
	if (format)
		log_json = !strcmp(format, "json");
	return 0;
}

/* Appends `s` JSON-escaped to buf at *n (bounded by cap). */
static void json_str(char *buf, size_t cap, size_t *n, const char *s, size_t len)
{
	for (size_t i = 0; i < len && *n + 7 < cap; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\') {
			buf[(*n)++] = '\\';
			buf[(*n)++] = (char)c;
		} else if (c < 0x20) {
			*n += (size_t)snprintf(buf + *n, cap - *n, "\\u%04x", c);
		} else {
			buf[(*n)++] = (char)c;
		}
	}
}

/* Converts "k=v k2=\"v 2\"" into JSON members appended at *n. */
static void json_fields(char *buf, size_t cap, size_t *n, const char *f)
{
	while (*f && *n + 16 < cap) {
		const char *eq = strchr(f, '=');
		const char *v, *end;
		if (!eq)
			break;
		buf[(*n)++] = ',';
		buf[(*n)++] = '"';
		json_str(buf, cap, n, f, (size_t)(eq - f));
		buf[(*n)++] = '"';
		buf[(*n)++] = ':';
		buf[(*n)++] = '"';
		v = eq + 1;
		if (*v == '"') {
			v++;
			end = strchr(v, '"');
			if (!end)
				end = v + strlen(v);
			json_str(buf, cap, n, v, (size_t)(end - v));
			f = *end ? end + 1 : end;
		} else {
			end = strchr(v, ' ');
			if (!end)
				end = v + strlen(v);
			json_str(buf, cap, n, v, (size_t)(end - v));
			f = end;
		}
		buf[(*n)++] = '"';
		while (*f == ' ')
			f++;
	}
}

void gaz_log_emit(enum gaz_log_level lvl, const char *msg, const char *fields_fmt, ...)
{
	char fields[2048], line[4096], ts[40];
	struct timespec now;
	struct tm tm;
	size_t n = 0;
	va_list ap;

	fields[0] = 0;
	if (fields_fmt) {
		va_start(ap, fields_fmt);
		vsnprintf(fields, sizeof(fields), fields_fmt, ap);
		va_end(ap);
	}
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + n, sizeof(ts) - n, ".%03ldZ", now.tv_nsec / 1000000);

	if (log_json) {
		n = (size_t)snprintf(line, sizeof(line), "{\"time\":\"%s\",\"level\":\"%s\",\"msg\":\"", ts,
				     level_names[lvl]);
		json_str(line, sizeof(line), &n, msg, strlen(msg));
		line[n++] = '"';
		json_fields(line, sizeof(line), &n, fields);
		if (n + 2 > sizeof(line))
			n = sizeof(line) - 2;
		line[n++] = '}';
	} else {
		/* logfmt: the message is quoted, so quotes and controls in it are
		 * escaped (the JSON escaping is the same set). */
		n = (size_t)snprintf(line, sizeof(line), "time=%s level=%s msg=\"", ts, level_names[lvl]);
		json_str(line, sizeof(line) - 8, &n, msg, strlen(msg));
		n += (size_t)snprintf(line + n, sizeof(line) - n, "\"%s%s", fields[0] ? " " : "", fields);
		if (n > sizeof(line) - 2)
			n = sizeof(line) - 2;
	}
	line[n++] = '\n';
	(void)!write(STDERR_FILENO, line, n);
}
