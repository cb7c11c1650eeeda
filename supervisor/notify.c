/* notify.c - sd_notify messages: READY, RELOADING, STOPPING, STATUS,
 * WATCHDOG and MAINPID.
 *
 * sd.c sends them; this file decides the exact text, so that the
 * sequence systemd (or a test that owns NOTIFY_SOCKET) sees is the one
 * docs/architecture.md ("Processes and threads") promises. STATUS= lines
 * ride along with the state changes and are otherwise sent only when they
 * change, because the supervisor refreshes its status every second and
 * systemd need not hear the same line again.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "supervisor/notify.h"
#include "supervisor/sd.h"

#define STATUS_MAX 512

/* The kinds of message, each with its own "send failed" warning. */
typedef enum {
    MSG_READY,
    MSG_RELOADING,
    MSG_STOPPING,
    MSG_STATUS,
    MSG_MAINPID,
    MSG_WATCHDOG,
    MSG_KINDS,
} msg_kind_t;

static const char *const kind_names[MSG_KINDS] = {
    "READY", "RELOADING", "STOPPING", "STATUS", "MAINPID", "WATCHDOG",
};

static char last_status[STATUS_MAX];
static bool send_failed_logged[MSG_KINDS];

static void notify_send(msg_kind_t kind, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void remember(const char *status);

void sl_notify_ready(const char *status)
{
    notify_send(MSG_READY, "READY=1\nSTATUS=%s", status);
    remember(status);
}

void sl_notify_reloading(const char *status)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_MONOTONIC, &ts) == -1) {
        sl_log_errno(SL_LOG_WARNING, "clock_gettime(CLOCK_MONOTONIC) failed");
        ts = (struct timespec){0, 0};
    }
    unsigned long long usec = (unsigned long long)ts.tv_sec * 1000000ULL +
                              (unsigned long long)ts.tv_nsec / 1000ULL;
    notify_send(MSG_RELOADING, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=%s",
                usec, status);
    remember(status);
}

void sl_notify_stopping(const char *status)
{
    notify_send(MSG_STOPPING, "STOPPING=1\nSTATUS=%s", status);
    remember(status);
}

void sl_notify_status(const char *status)
{
    if (strncmp(status, last_status, sizeof(last_status) - 1) == 0) {
        return;
    }
    notify_send(MSG_STATUS, "STATUS=%s", status);
    remember(status);
}

void sl_notify_mainpid(pid_t pid, bool ready, const char *status)
{
    notify_send(MSG_MAINPID, "MAINPID=%ld\n%sSTATUS=%s", (long)pid,
                ready ? "READY=1\n" : "", status);
    remember(status);
}

void sl_notify_watchdog(void)
{
    notify_send(MSG_WATCHDOG, "WATCHDOG=1");
}

double sl_notify_watchdog_interval(void)
{
    uint64_t usec = 0;

    int rc = sl_sd_watchdog(&usec);
    if (rc < 0) {
        sl_warn("WATCHDOG_USEC='%s' is not a number of microseconds: no "
                "watchdog",
                getenv("WATCHDOG_USEC"));
        return 0;
    }
    return rc > 0 ? (double)usec / 2e6 : 0;
}

/* One datagram to NOTIFY_SOCKET, if there is one. A failure is logged the
 * first time for each KIND: the once-a-second WATCHDOG=1 must not flood
 * the log, nor hide that READY=1 failed too. */
static void notify_send(msg_kind_t kind, const char *fmt, ...)
{
    char buf[STATUS_MAX + 128];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    int rc = sl_sd_notify(buf);
    if (rc < 0 && !send_failed_logged[kind]) {
        errno = -rc;
        sl_log_errno(SL_LOG_WARNING, "sd_notify(%s) failed", kind_names[kind]);
        send_failed_logged[kind] = true;
    }
}

static void remember(const char *status)
{
    snprintf(last_status, sizeof(last_status), "%s", status);
}
