/* log.h - one error log for supervisor and workers.
 *
 * Lines look like gunicorn's: "[2026-11-29 08:55:00 +0000] [pid] [LEVEL] msg"
 * so the operator's grep habits carry over. Writes are single write(2) calls
 * of a whole line, so lines from several processes sharing the file do not
 * interleave. Safe to call from any thread.
 */
#ifndef SL_LOG_H
#define SL_LOG_H

#include <stdarg.h>

enum {
    SL_LOG_DEBUG = 0,
    SL_LOG_INFO,
    SL_LOG_WARNING,
    SL_LOG_ERROR,
    SL_LOG_CRITICAL,
};

/* Parse "debug|info|warning|error|critical"; -1 if unknown. */
int sl_log_level_parse(const char *name);

/* Set the minimum level written. */
void sl_log_set_level(int level);

/* Direct the log to PATH (appended, created 0644), or stderr when NULL.
 * Returns 0, or -1 with errno set; the previous target stays on failure. */
int sl_log_open(const char *path);

/* Reopen the current log file (after logrotate moved it). 0 or -1. */
int sl_log_reopen(void);

/* The fd the log writes to (for wsgi.errors and Python tracebacks). */
int sl_log_fd(void);

/* Write one line at LEVEL (printf format, no trailing newline needed). */
void sl_log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void sl_log_v(int level, const char *fmt, va_list ap);

#define sl_debug(...) sl_log(SL_LOG_DEBUG, __VA_ARGS__)
#define sl_info(...)  sl_log(SL_LOG_INFO, __VA_ARGS__)
#define sl_warn(...)  sl_log(SL_LOG_WARNING, __VA_ARGS__)
#define sl_error(...) sl_log(SL_LOG_ERROR, __VA_ARGS__)

/* Log "CALL() failed: strerror(errno)" style: FMT names the call and the
 * context, errno is appended. */
void sl_log_errno(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* One "sluice: error: ..." line on stderr, for command-line failures. */
void sl_log_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Until the next call, sl_log_usage() puts "CONTEXT: " before its message
 * (none when NULL; borrowed): how a configuration file's errors name their
 * line. */
void sl_log_usage_context(const char *context);

/* Until the next call, sl_log_usage() writes to the error log, at ERROR
 * level, "PREFIX: " and its message, instead of "sluice: error: ..." to
 * stderr; NULL goes back to stderr. How a re-read on HUP reports. */
void sl_log_usage_to_log(const char *prefix);

#endif
