/* notify.h - what the supervisor tells systemd (sd_notify).
 *
 * Every call is a no-op when NOTIFY_SOCKET is not set, so the supervisor
 * calls these unconditionally. A failed send is logged once per kind of
 * message and otherwise ignored: systemd being unreachable is never a
 * reason to stop serving.
 */
#ifndef SL_NOTIFY_H
#define SL_NOTIFY_H

#include <stdbool.h>
#include <sys/types.h>

/* READY=1 with STATUS=STATUS: every worker of the generation is serving. */
void sl_notify_ready(const char *status);

/* RELOADING=1, MONOTONIC_USEC=now and STATUS=STATUS: a rolling restart
 * began; sl_notify_ready() ends it. */
void sl_notify_reloading(const char *status);

/* STOPPING=1 with STATUS=STATUS. */
void sl_notify_stopping(const char *status);

/* STATUS=STATUS, only when it differs from the last one sent. */
void sl_notify_status(const char *status);

/* MAINPID=PID (a binary upgrade hands the service over to PID), with
 * READY=1 as well when READY. */
void sl_notify_mainpid(pid_t pid, bool ready, const char *status);

/* WATCHDOG=1. */
void sl_notify_watchdog(void);

/* Seconds between WATCHDOG=1 pings: half of WATCHDOG_USEC when systemd
 * asked for them (and WATCHDOG_PID, if set, is this process), else 0. */
double sl_notify_watchdog_interval(void);

#endif
