/* health.c - the verdict on one worker (see health.h).
 *
 * Why two rules for a serving worker: silence catches a worker whose loop
 * thread is stuck (inline mode, where the application runs on it, or a
 * bug), and "every lane busy past the timeout" catches the common case of
 * pump mode, where the loop thread goes on beating while every executor
 * lane is stuck in the application. One lane stuck out of several is a slow
 * request, not a hung worker: the others still serve.
 */
#include "config.h"

#include <stdio.h>

#include "supervisor/health.h"

static void earliest(ev_tstamp *next, ev_tstamp t);

sl_health_t sl_health_check(const sl_worker_t *w, ev_tstamp now, double timeout,
                            double boot_timeout, char *why, size_t size,
                            ev_tstamp *next)
{
    const sl_ctl_msg_t *m = &w->last;

    if (sl_worker_leaving(w)) {
        return SL_HEALTH_OK; /* its drain has a deadline of its own */
    }
    if (w->state == SL_WORKER_BOOTING && boot_timeout > 0) {
        if (now >= w->started + boot_timeout) {
            snprintf(why, size,
                     "did not become ready within %.1fs (--boot-timeout)",
                     boot_timeout);
            return SL_HEALTH_LATE;
        }
        earliest(next, w->started + boot_timeout);
        return SL_HEALTH_OK;
    }
    if (w->state != SL_WORKER_READY || timeout <= 0) {
        return SL_HEALTH_OK;
    }
    if (now - w->heartbeat >= timeout) {
        snprintf(why, size, "timed out: no heartbeat for %.1fs",
                 now - w->heartbeat);
        return SL_HEALTH_HUNG;
    }
    if (m->lanes > 0 && m->busy_lanes >= m->lanes && m->oldest >= timeout) {
        snprintf(why, size,
                 "timed out: all %u lanes busy with a request for %.1fs",
                 m->lanes, m->oldest);
        return SL_HEALTH_HUNG;
    }
    earliest(next, w->heartbeat + timeout);
    return SL_HEALTH_OK;
}

static void earliest(ev_tstamp *next, ev_tstamp t)
{
    if (*next == 0 || t < *next) {
        *next = t;
    }
}
