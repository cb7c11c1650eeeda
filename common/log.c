/* log.c - the error log: whole lines, one write(2) each.
 *
 * A line is formatted into one buffer and written with a single write(2) on
 * an O_APPEND descriptor, so lines from several threads and processes that
 * share the file never interleave and need no lock.
 *
 * The one idea to keep in mind: once a log file is open, the descriptor
 * number never changes. Reopening (logrotate, USR1) opens the new file and
 * dup2()s it over the old number, so a thread writing at that moment writes
 * to either the old file or the new one, never to a closed or reused fd, and
 * whoever holds sl_log_fd() (wsgi.errors, faulthandler) follows along.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define LOG_LINE_MAX 2048 /* longer lines are formatted on the heap */

static const char *level_names[] = {
    [SL_LOG_DEBUG] = "DEBUG",       [SL_LOG_INFO] = "INFO",
    [SL_LOG_WARNING] = "WARNING",   [SL_LOG_ERROR] = "ERROR",
    [SL_LOG_CRITICAL] = "CRITICAL",
};

static int log_level = SL_LOG_INFO;
static int log_fd = STDERR_FILENO; /* read by any thread, atomically */
static char *log_path;             /* owned; NULL while logging to stderr */
static pthread_mutex_t log_open_lock = PTHREAD_MUTEX_INITIALIZER;

static int open_log_file(const char *path);
static void write_all(int fd, const char *p, size_t n);
static size_t format_prefix(char *buf, size_t size, int level);

int sl_log_level_parse(const char *name)
{
    for (int i = SL_LOG_DEBUG; i <= SL_LOG_CRITICAL; i++) {
        if (strcasecmp(name, level_names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

void sl_log_set_level(int level)
{
    __atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
}

int sl_log_open(const char *path)
{
    int rc = 0;
    char *copy = NULL;

    pthread_mutex_lock(&log_open_lock);
    int cur = __atomic_load_n(&log_fd, __ATOMIC_RELAXED);

    if (path == NULL) {
        /* Back to stderr: keep the number, point it at stderr. */
        if (cur != STDERR_FILENO && dup2(STDERR_FILENO, cur) == -1) {
            rc = -1;
            goto out_unlock;
        }
        free(log_path);
        log_path = NULL;
        goto out_unlock;
    }

    copy = strdup(path);
    if (copy == NULL) {
        rc = -1;
        goto out_unlock;
    }
    int fd = open_log_file(path);
    if (fd == -1) {
        rc = -1;
        goto out_free_copy;
    }
    if (cur == STDERR_FILENO) {
        __atomic_store_n(&log_fd, fd, __ATOMIC_RELEASE);
    } else {
        int saved;
        if (dup3(fd, cur, O_CLOEXEC) == -1) {
            saved = errno;
            close(fd);
            errno = saved;
            rc = -1;
            goto out_free_copy;
        }
        close(fd);
    }
    free(log_path);
    log_path = copy;
    goto out_unlock;

out_free_copy:
    free(copy);
out_unlock:
    pthread_mutex_unlock(&log_open_lock);
    return rc;
}

int sl_log_reopen(void)
{
    int rc = 0;

    pthread_mutex_lock(&log_open_lock);
    if (log_path == NULL) {
        goto out_unlock;
    }
    int fd = open_log_file(log_path);
    if (fd == -1) {
        rc = -1;
        goto out_unlock;
    }
    int cur = __atomic_load_n(&log_fd, __ATOMIC_RELAXED);
    if (dup3(fd, cur, O_CLOEXEC) == -1) {
        rc = -1;
    }
    int saved = errno;
    close(fd);
    errno = saved;

out_unlock:
    pthread_mutex_unlock(&log_open_lock);
    return rc;
}

int sl_log_fd(void)
{
    return __atomic_load_n(&log_fd, __ATOMIC_ACQUIRE);
}

void sl_log(int level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    sl_log_v(level, fmt, ap);
    va_end(ap);
}

void sl_log_v(int level, const char *fmt, va_list ap)
{
    char stack[LOG_LINE_MAX];
    char *buf = stack;
    size_t size = sizeof(stack);
    va_list again;

    if (level < __atomic_load_n(&log_level, __ATOMIC_RELAXED)) {
        return;
    }
    if (level < SL_LOG_DEBUG || level > SL_LOG_CRITICAL) {
        level = SL_LOG_ERROR;
    }

    int saved_errno = errno;
    size_t head = format_prefix(buf, size, level);

    va_copy(again, ap);
    int n = vsnprintf(buf + head, size - head, fmt, ap);
    if (n < 0) {
        n = 0;
    }
    size_t len = head + (size_t)n;
    if (len + 2 > size) {
        /* Too long for the stack buffer: one heap buffer, still one write.
         * Should malloc fail, the truncated stack copy is written. */
        char *big = malloc(len + 2);
        if (big != NULL) {
            memcpy(big, buf, head);
            vsnprintf(big + head, len + 2 - head, fmt, again);
            buf = big;
            size = len + 2;
        } else {
            len = size - 2;
        }
    }
    va_end(again);

    while (len > head && buf[len - 1] == '\n') {
        len--;
    }
    buf[len++] = '\n';
    write_all(sl_log_fd(), buf, len);

    if (buf != stack) {
        free(buf);
    }
    errno = saved_errno;
}

void sl_log_errno(int level, const char *fmt, ...)
{
    char msg[LOG_LINE_MAX / 2];
    char ebuf[128];
    va_list ap;
    int err = errno;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    sl_log(level, "%s: %s", msg, strerror_r(err, ebuf, sizeof(ebuf)));
    errno = err;
}

static const char *usage_context; /* borrowed: sl_log_usage_context() */
static const char *usage_prefix;  /* borrowed: sl_log_usage_to_log() */

void sl_log_usage_context(const char *context)
{
    usage_context = context;
}

void sl_log_usage_to_log(const char *prefix)
{
    usage_prefix = prefix;
}

void sl_log_usage(const char *fmt, ...)
{
    char buf[LOG_LINE_MAX];
    va_list ap;
    int err = errno;

    int head =
        snprintf(buf, sizeof(buf), "sluice: error: %s%s",
                 usage_context ? usage_context : "", usage_context ? ": " : "");
    if (head < 0 || head >= (int)sizeof(buf) / 2) { /* a runaway context */
        head = snprintf(buf, sizeof(buf), "sluice: error: ");
    }
    va_start(ap, fmt);
    int n = vsnprintf(buf + head, sizeof(buf) - head - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)head + (n < 0 ? 0 : (size_t)n);
    if (len > sizeof(buf) - 2) {
        len = sizeof(buf) - 2;
    }
    if (usage_prefix != NULL) {
        buf[len] = '\0';
        sl_error("%s: %s", usage_prefix, buf + strlen("sluice: error: "));
        errno = err;
        return;
    }
    buf[len++] = '\n';
    write_all(STDERR_FILENO, buf, len);
    errno = err;
}

static int open_log_file(const char *path)
{
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY,
                0644);
}

/* One write(2) in all but pathological cases (a full disk, a signal in the
 * middle of a pipe write); then the rest follows rather than being lost. */
static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return; /* nowhere left to report it */
        }
        p += w;
        n -= (size_t)w;
    }
}

/* "[2026-11-29 08:55:00 +0000] [pid] [LEVEL] " into buf; returns its
 * length. Always UTC, so lines from every process sort together. */
static size_t format_prefix(char *buf, size_t size, int level)
{
    struct tm tm;
    time_t now = time(NULL);

    gmtime_r(&now, &tm);
    size_t n = strftime(buf, size, "[%Y-%m-%d %H:%M:%S +0000] ", &tm);
    int m = snprintf(buf + n, size - n, "[%ld] [%s] ", (long)getpid(),
                     level_names[level]);
    return n + (size_t)m;
}
