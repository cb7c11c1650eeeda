/* maintain.c - the worker table towards its target, once per cycle.
 *
 * What supervisor.c's cycle() does last, after it acted on the signals:
 * deadlines first (kills due, hung workers, the first boot), then the
 * table: workers draining on their own let go, outdated workers replaced
 * (never below the target), extra ones drained, missing ones spawned
 * (after the backoff), and the moments worth telling systemd (READY=1, a
 * restart complete). It decides from the table and the clock alone, so it
 * can run as often as cycle() likes.
 */
#include "config.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "supervisor/health.h"
#include "supervisor/notify.h"
#include "supervisor/pidfile.h"
#include "supervisor/state.h"

static void enforce_kills(supervisor_t *s, ev_tstamp now, ev_tstamp *next);
static void check_health(supervisor_t *s, ev_tstamp now, ev_tstamp *next);
static void check_first_boot(supervisor_t *s, ev_tstamp now, ev_tstamp *next);
static void abort_worker(supervisor_t *s, sl_worker_t *w, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void let_go_own_drains(supervisor_t *s, ev_tstamp now, ev_tstamp *next);
static void replace_outdated(supervisor_t *s);
static void trim_excess(supervisor_t *s);
static void spawn_missing(supervisor_t *s, ev_tstamp now, ev_tstamp *next);
static void check_progress(supervisor_t *s);
static void keep_zygotes(supervisor_t *s, ev_tstamp now, ev_tstamp *next);
static sl_zygote_t *zygote_for_spawn(supervisor_t *s, ev_tstamp now,
                                     ev_tstamp *next);

/* Deadlines first (kills, health, the first boot), then the table towards
 * its target; last, the timer for the next deadline. */
void sl_maintain(supervisor_t *s)
{
    ev_tstamp now = ev_now(s->loop);
    ev_tstamp next = 0;

    enforce_kills(s, now, &next);
    if (s->stopping == STOP_NONE) {
        check_health(s, now, &next);
        check_first_boot(s, now, &next);
    }
    if (s->stopping == STOP_NONE) {
        let_go_own_drains(s, now, &next);
        keep_zygotes(s, now, &next);
        replace_outdated(s);
        trim_excess(s);
        spawn_missing(s, now, &next);
        check_progress(s);
    }
    ev_timer_stop(s->loop, &s->wake_timer);
    if (next != 0) {
        ev_timer_set(&s->wake_timer, next > now ? next - now : 0.001, 0);
        ev_timer_start(s->loop, &s->wake_timer);
    }
}

/* SIGKILL for every worker past its deadline; at a stop's deadline, for a
 * new supervisor that has not gone either. */
static void enforce_kills(supervisor_t *s, ev_tstamp now, ev_tstamp *next)
{
    for (int i = 0; i < s->table.high; i++) {
        sl_worker_t *w = &s->table.slots[i];
        if (w->state != SL_WORKER_STOPPING || w->killed) {
            continue;
        }
        if (now < w->kill_at) {
            sl_earliest(next, w->kill_at);
            continue;
        }
        sl_warn("Worker %d (pid %ld) is still alive %.1fs after %s:"
                " sending SIGKILL",
                w->id, (long)w->pid, now - w->started,
                w->stop_signal ? strsignal(w->stop_signal) : "draining");
        sl_table_kill(w, SIGKILL);
        w->killed = true;
        /* a hung worker's kill is the health check's, not the stop's */
        if (s->stopping != STOP_NONE && !w->aborted) {
            s->unclean = true;
        }
    }
    if (s->stopping != STOP_NONE && now >= s->kill_at) {
        sl_zygotes_kill_all(&s->zygotes, SIGKILL);
    }
    if (s->stopping != STOP_NONE && sl_upgrade_running(&s->upgrade)) {
        if (now >= s->kill_at) {
            sl_upgrade_signal(&s->upgrade, SIGKILL);
        } else {
            sl_earliest(next, s->kill_at);
        }
    }
}

/* Every worker against --timeout and --boot-timeout; a replacement that
 * is late ends its rolling restart. */
static void check_health(supervisor_t *s, ev_tstamp now, ev_tstamp *next)
{
    const sl_options_t *o = s->o;
    char why[NOTE_MAX - 64];

    for (int i = 0; i < s->table.high; i++) {
        sl_worker_t *w = &s->table.slots[i];
        sl_health_t h = sl_health_check(w, now, o->timeout, o->boot_timeout,
                                        why, sizeof(why), next);
        if (h == SL_HEALTH_OK) {
            continue;
        }
        abort_worker(s, w, "%s", why);
        if (h == SL_HEALTH_LATE) {
            sl_supervisor_died_young(s, now - w->started);
        }
        if (h == SL_HEALTH_LATE && s->reloading && w->gen == s->gen_next) {
            sl_supervisor_reload_failed(s, "worker %d (pid %ld) %s", w->id,
                                        (long)w->pid, why);
        }
    }
}

/* No worker ready at all, --boot-timeout after start: give up, with the
 * tracebacks of the ones still booting (where are they stuck?). */
static void check_first_boot(supervisor_t *s, ev_tstamp now, ev_tstamp *next)
{
    double limit = s->o->boot_timeout;

    if (s->any_ready || limit <= 0) {
        return;
    }
    if (now < s->boot_deadline) {
        sl_earliest(next, s->boot_deadline);
        return;
    }
    sl_error("No worker became ready within %.1fs (--boot-timeout): giving up",
             limit);
    for (int i = 0; i < s->table.high; i++) {
        sl_worker_t *w = &s->table.slots[i];
        if (w->state == SL_WORKER_BOOTING) {
            abort_worker(s, w, "did not become ready within %.1fs", limit);
        }
    }
    s->boot_failed = true;
    sl_supervisor_begin_stop(s, STOP_GRACEFUL, 0);
}

/* SIGABRT: faulthandler writes the Python tracebacks of every thread to
 * the error log and the process dies; SIGKILL follows if it does not. */
static void abort_worker(supervisor_t *s, sl_worker_t *w, const char *fmt, ...)
{
    char why[NOTE_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    sl_error("Worker %d (pid %ld) %s: sending SIGABRT (tracebacks follow)"
             " and replacing it",
             w->id, (long)w->pid, why);
    w->aborted = true;
    sl_table_stop(w, SIGABRT, ev_now(s->loop) + ABORT_GRACE);
}

/* Workers that said they drain, unasked, OWN_DRAIN_WAIT ago: someone sent
 * that one worker TERM; it is let go, and spawn_missing() replaces it.
 * Not at once: a TERM sent to the whole process group is queued for us by
 * the same kill() that reaches the workers, so its handler has run before
 * we can read their answer, but libev runs our watcher only after its
 * next poll, and the answer may have come in the poll before. ev_now()
 * moves only at a poll: once it is past the wait, that watcher has run,
 * cycle() has begun the stop, and this is not reached. */
static void let_go_own_drains(supervisor_t *s, ev_tstamp now, ev_tstamp *next)
{
    for (int i = 0; i < s->table.high; i++) {
        sl_worker_t *w = &s->table.slots[i];
        if (!sl_worker_live(w) || w->own_drain == 0) {
            continue;
        }
        if (now < w->own_drain + OWN_DRAIN_WAIT) {
            sl_earliest(next, w->own_drain + OWN_DRAIN_WAIT);
            continue;
        }
        sl_info("Worker %d (pid %ld) is draining on its own", w->id,
                (long)w->pid);
        sl_table_stop(w, 0, w->own_drain + s->o->graceful_timeout + KILL_GRACE);
    }
}

/* TERM outdated workers while the up-to-date READY ones alone, with the
 * outdated ones left, still make the target. */
static void replace_outdated(supervisor_t *s)
{
    sl_table_counts_t c = sl_table_counts(&s->table, s->gen_min);

    for (int excess = c.current_ready + c.outdated - s->target;
         excess > 0 && c.outdated > 0; excess--, c.outdated--) {
        sl_worker_t *w = sl_table_pick_outdated(&s->table, s->gen_min);
        if (w->gen < s->gen_min) {
            s->reload_replaced++;
        }
        /* a replacement: its WebSocket clients are told to come back
         * (1012), not that the service goes away */
        sl_table_send_restart(w);
        sl_maintain_drain_worker(s, w, w->retire ? "retired" : "replaced");
    }
}

/* More up-to-date workers than the target (TTOU, a failed restart's
 * leftovers): TERM the extra ones. */
static void trim_excess(supervisor_t *s)
{
    sl_table_counts_t c = sl_table_counts(&s->table, s->gen_min);

    for (; c.current > s->target; c.current--) {
        sl_maintain_drain_worker(s, sl_table_pick_excess(&s->table, s->gen_min),
                                 "not needed");
    }
}

/* Start up-to-date workers until the target is met, never more than the
 * surge above it, and not before a backoff delay has passed. */
static void spawn_missing(supervisor_t *s, ev_tstamp now, ev_tstamp *next)
{
    sl_table_counts_t c = sl_table_counts(&s->table, s->gen_min);

    for (; c.current < s->target && c.live < s->target + s->o->reload_surge;
         c.current++, c.live++) {
        sl_zygote_t *z = NULL;
        if (now < s->spawn_at) {
            sl_earliest(next, s->spawn_at);
            return;
        }
        if (s->o->preload && (z = zygote_for_spawn(s, now, next)) == NULL) {
            return;
        }
        sl_worker_t *w =
            sl_table_spawn(&s->table, s->worker_exe, s->worker_argv, s->fds,
                           s->nls, s->gen_next, &s->zygotes, z);
        if (w == NULL) {
            sl_supervisor_died_young(s, 0);
            sl_earliest(next, s->spawn_at);
            return;
        }
        sl_info("Booting worker %d with pid: %ld%s", w->id, (long)w->pid,
                z != NULL ? " (forked by the zygote)" : "");
    }
}

/* --preload: the ready zygote of the generation being spawned, or NULL:
 * then one boots (its READY wakes the loop), or is started now, or after
 * the backoff. */
static sl_zygote_t *zygote_for_spawn(supervisor_t *s, ev_tstamp now,
                                     ev_tstamp *next)
{
    sl_zygote_t *z = sl_zygotes_find(&s->zygotes, s->gen_next);

    if (z != NULL) {
        return z->ready ? z : NULL;
    }
    if (now < s->spawn_at) {
        sl_earliest(next, s->spawn_at);
        return NULL;
    }
    s->zygote_wanted = false;
    if (sl_zygotes_start(&s->zygotes, s->worker_exe, s->worker_argv, s->fds,
                         s->nls, s->gen_next, s->table.metrics_fd) == NULL) {
        sl_supervisor_died_young(s, 0);
        sl_earliest(next, s->spawn_at);
    }
    return NULL;
}

/* Whether a worker of generation GEN is in the table. */
static bool gen_has_workers(const sl_table_t *t, unsigned gen)
{
    for (int i = 0; i < t->high; i++) {
        if (t->slots[i].state != SL_WORKER_FREE && t->slots[i].gen == gen) {
            return true;
        }
    }
    return false;
}

/* --preload's zygotes: the current one started again when it died after
 * READY (its workers serve on), one that cannot load the app within
 * --boot-timeout aborted, and an older generation's let go after its last
 * worker. */
static void keep_zygotes(supervisor_t *s, ev_tstamp now, ev_tstamp *next)
{
    double limit = s->o->boot_timeout;

    if (s->zygote_wanted && s->o->preload) {
        (void)zygote_for_spawn(s, now, next);
    }
    for (int i = 0; i < SL_ZYGOTES; i++) {
        sl_zygote_t *z = &s->zygotes.z[i];
        if (z->pid == 0 || z->asked) {
            continue;
        }
        if (z->gen != s->gen_next && !gen_has_workers(&s->table, z->gen)) {
            sl_info("The zygote of generation %u (pid %ld) has no worker"
                    " left: stopping it",
                    z->gen, (long)z->pid);
            sl_zygotes_kill(z, SIGTERM);
        } else if (!z->ready && limit > 0 && now >= z->started + limit) {
            sl_error("The zygote of generation %u (pid %ld) did not load the"
                     " app within %.1fs (--boot-timeout): sending SIGABRT"
                     " (tracebacks follow)",
                     z->gen, (long)z->pid, limit);
            sl_zygotes_kill(z, SIGABRT);
            sl_supervisor_died_young(s, now - z->started);
            if (s->reloading && z->gen == s->gen_next) {
                sl_supervisor_reload_failed(
                    s, "its zygote did not load the app within %.1fs", limit);
            }
        } else if (!z->ready && limit > 0) {
            sl_earliest(next, z->started + limit);
        }
    }
}

void sl_maintain_zygote_ended(supervisor_t *s, const sl_zygote_end_t *end,
                              int status)
{
    bool appload = WIFEXITED(status) && WEXITSTATUS(status) == SL_EXIT_APPLOAD;

    if (end->asked || s->stopping != STOP_NONE) {
        return;
    }
    if (appload && !s->any_ready) {
        s->app_failed = true; /* as a worker's failed import: exit 2 */
        sl_supervisor_begin_stop(s, STOP_GRACEFUL, 0);
        return;
    }
    if (s->reloading && end->gen == s->gen_next && !end->ready) {
        sl_supervisor_reload_failed(s, "its zygote %s",
                                    appload ? "could not load the application"
                                            : "exited before it was ready");
    }
    sl_supervisor_died_young(s, end->age);
    if (end->ready && end->gen == s->gen_next) {
        s->zygote_wanted = true;
    }
}

/* The moments to tell someone: the first generation is all READY (systemd,
 * or the old supervisor after USR2), a rolling restart is complete. */
static void check_progress(supervisor_t *s)
{
    char status[NOTE_MAX * 2];
    sl_table_counts_t c = sl_table_counts(&s->table, s->gen_min);

    if (!s->ready_notified && c.current_ready >= s->target) {
        s->ready_notified = true;
        sl_info("All %d workers are ready", c.current_ready);
        sl_supervisor_status_text(s, status, sizeof(status));
        if (sl_upgrade_is_successor(&s->upgrade)) {
            if (s->o->pidfile != NULL) {
                sl_pidfile_write(s->o->pidfile);
            }
            sl_notify_mainpid(getpid(), true, status);
            sl_upgrade_took_over(&s->upgrade);
        } else {
            sl_notify_ready(status);
        }
    }
    if (s->reloading && c.current_ready >= s->target && c.older == 0) {
        s->reloading = false;
        sl_info("Rolling restart done: %d workers replaced in %.1fs",
                s->reload_replaced, ev_now(s->loop) - s->reload_started);
        sl_supervisor_status_text(s, status, sizeof(status));
        sl_notify_ready(status);
    }
    if (s->reload_pending && s->ready_notified) {
        s->reload_pending = false;
        sl_supervisor_begin_reload(s, s->reload_why);
    }
}

/* TERM: W drains within --graceful-timeout (after --shutdown-delay). */
void sl_maintain_drain_worker(supervisor_t *s, sl_worker_t *w, const char *why)
{
    const sl_options_t *o = s->o;
    ev_tstamp deadline =
        ev_now(s->loop) + o->shutdown_delay + o->graceful_timeout + KILL_GRACE;

    sl_info("Worker %d (pid %ld) %s: draining", w->id, (long)w->pid, why);
    sl_table_stop(w, SIGTERM, deadline);
}

void sl_maintain_resize(supervisor_t *s)
{
    int target = s->target + s->more_workers;
    int most = SL_TABLE_SLOTS - s->o->reload_surge;

    s->more_workers = 0;
    if (s->stopping != STOP_NONE) {
        return;
    }
    target = target < 1 ? 1 : target > most ? most : target;
    if (target != s->target) {
        sl_info("Handling signal: %s: %d workers (was %d)",
                target > s->target ? "ttin" : "ttou", target, s->target);
        s->target = target;
    }
}
