/*
 * log.h - structured, levelled logging (text or JSON), one line per event.
 *
 * Levels and names follow Gazette's --log.level (trace, debug, info, warn,
 * error, fatal). Calls check the level before formatting (Redis practice).
 *
 * Fields: how a call passes them (the API decision).
 *
 *   gaz_warn("append failed", "journal=%s offset=%lld err=%s", j, off, st.msg);
 *
 * The fields argument is a printf format of key=value pairs separated by
 * spaces, and the values are its arguments. The library splits the pairs on
 * the spaces *of the format*, never on the formatted text, formats each key
 * and each value on its own, then quotes and escapes each value for the
 * output format. So a value holding spaces, '=', quotes, backslashes,
 * newlines or any other byte stays one value and comes out intact:
 *
 *   text (logfmt, as logrus' TextFormatter, which Gazette logs through): a
 *     value is written bare when it holds only [A-Za-z0-9-._/@^+] (or is
 *     empty), else quoted as Go's %q does: \" \\ \n \t..., \xNN for other
 *     control bytes and for bytes that are not UTF-8, \uNNNN for invisible
 *     characters; valid UTF-8 is kept.
 *   json (as logrus' JSONFormatter, RFC 8259): every value a string;
 *     \" \\ \b \f \n \r \t, \u00NN for other control characters, \u2028 and
 *     \u2029 escaped as Go does; valid UTF-8 is kept and each byte that is
 *     not UTF-8 becomes U+FFFD, so the line always parses.
 *
 * Rules for the format:
 *   - never quote a value in the format ("err=\"%s\"" is wrong): a '"' there
 *     is a literal character of the value and comes out escaped;
 *   - a value may mix conversions and literal text ("at=%s:%d",
 *     "resync=%llds"); a key may be a conversion too ("%s=%s");
 *   - the first '=' of a pair ends its key; later ones belong to the value;
 *     a pair without '=' is a key with an empty value;
 *   - a literal space always separates pairs: a value with spaces is passed
 *     as an argument ("err=%s", "a peer did not acknowledge").
 *   - a key named time, level or msg is written as fields.time etc., as
 *     logrus does, so the line never has two members of one name.
 *
 * Why not a typed list (GAZ_STR("journal", j), GAZ_INT("offset", off), ...):
 * call sites stay one printf-style line, unambiguous whatever a value holds,
 * and the compiler still checks each argument against its conversion (the
 * format attribute below); a typed list would triple the text of some 150
 * call sites for no extra safety.
 *
 * Lines are at most 4096 bytes (PIPE_BUF): a longer value is cut at a
 * character boundary and the line stays well-formed.
 *
 * Thread-safe: a line is built on the caller's stack and written with one
 * write(2) to stderr; nothing here locks or allocates, so grpc's threads and
 * GAZ_BUG_ON may log from anywhere. gaz_log_setup is the one exception.
 * errno is preserved across a call (and %m prints it).
 */
#ifndef GAZ_COMMON_LOG_H
#define GAZ_COMMON_LOG_H

#include <stdlib.h>

enum gaz_log_level {
	GAZ_LOG_TRACE = 0,
	GAZ_LOG_DEBUG,
	GAZ_LOG_INFO,
	GAZ_LOG_WARN,
	GAZ_LOG_ERROR,
	GAZ_LOG_FATAL,
};

/* The current level; written only by gaz_log_setup. */
extern int gaz_log_level_cur;

/* gaz_log_setup sets the level ("trace".."fatal") and format ("text",
 * "json" or "color", color being text here). Returns 0 or GAZ_EINVAL for an
 * unknown name, leaving the settings unchanged. Not thread-safe: call once
 * at start-up, before any thread logs. */
int gaz_log_setup(const char *level, const char *format);

/* gaz_log_emit writes one event whatever the level (the gaz_log macros check
 * it first). `msg` is the message, written as given (not a format; borrowed).
 * `fields_fmt` is the fields format described above, or NULL for none; its
 * arguments follow. */
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
				     "cond=%s at=%s:%d", #cond, __FILE__,        \
				     __LINE__);                                  \
			abort();                                                 \
		}                                                                \
	} while (0)

#endif
