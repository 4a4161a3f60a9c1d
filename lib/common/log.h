/*
 * log.h - structured, levelled logging (text or JSON), one line per event.
 *
 * Levels and names follow Gazette's --log.level (trace, debug, info, warn,
 * error, fatal). Calls check the level before formatting (Redis practice).
 * Context travels as key/value pairs:
 *
 *   GAZ_LOG(GAZ_LOG_INFO, "appended", "journal", name, "offset", "%lld", off);
 *
 * is awkward in C, so the API takes a preformatted "fields" string built with
 * gaz_log_kv helpers only where needed; most call sites use gaz_logf with a
 * message and a small fixed set of fields:
 *
 *   gaz_logf(GAZ_LOG_INFO, "journal=%s offset=%lld", "persisted fragment", j, off)
 *
 * Thread-safe: each line is written with one write(2) to stderr.
 */
#ifndef GAZ_COMMON_LOG_H
#define GAZ_COMMON_LOG_H

enum gaz_log_level {
	GAZ_LOG_TRACE = 0,
	GAZ_LOG_DEBUG,
	GAZ_LOG_INFO,
	GAZ_LOG_WARN,
	GAZ_LOG_ERROR,
	GAZ_LOG_FATAL,
};

extern int gaz_log_level_cur;

/* gaz_log_setup sets the level ("trace".."fatal") and format ("text",
 * "json" or "color", color being text here). Returns 0 or GAZ_EINVAL for an
 * unknown name, leaving the settings unchanged. Not thread-safe: call once
 * at start-up. */
int gaz_log_setup(const char *level, const char *format);

/* gaz_log_emit writes one event. `msg` is the human message; `fields` is a
 * sequence of key=value pairs separated by single spaces, values without
 * spaces or quoted with "..." (may be NULL). Prefer the gaz_log macro. */
void gaz_log_emit(enum gaz_log_level lvl, const char *msg, const char *fields_fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define gaz_log(lvl, msg, ...)                                     \
	do {                                                        \
		if ((lvl) >= gaz_log_level_cur)                     \
			gaz_log_emit((lvl), (msg), __VA_ARGS__);    \
	} while (0)

#define gaz_trace(msg, ...) gaz_log(GAZ_LOG_TRACE, msg, __VA_ARGS__)
#define gaz_debug(msg, ...) gaz_log(GAZ_LOG_DEBUG, msg, __VA_ARGS__)
#define gaz_info(msg, ...)  gaz_log(GAZ_LOG_INFO, msg, __VA_ARGS__)
#define gaz_warn(msg, ...)  gaz_log(GAZ_LOG_WARN, msg, __VA_ARGS__)
#define gaz_error(msg, ...) gaz_log(GAZ_LOG_ERROR, msg, __VA_ARGS__)

/* GAZ_BUG_ON: an impossible state. Always on: logs and aborts. */
#define GAZ_BUG_ON(cond)                                                        \
	do {                                                                     \
		if (cond) {                                                      \
			gaz_log_emit(GAZ_LOG_FATAL, "impossible state",          \
				     "cond=\"%s\" at=%s:%d", #cond, __FILE__,    \
				     __LINE__);                                  \
			abort();                                                 \
		}                                                                \
	} while (0)

#include <stdlib.h>

#endif
