/* supervisor.c - the supervisor's loop: signal flags, then policy.
 *
 * Signal watchers only raise flags. All the work happens in one place,
 * cycle(), an ev_prepare watcher that runs before the loop sleeps, in a fixed
 * order: reap children, act on a stop, act on a reload, act on an upgrade,
 * reopen logs, resize, then maintain the table. Because every decision is
 * taken there, two signals arriving together are handled in that order no
 * matter which arrived first, and nothing is decided inside a callback.
 *
 * One rule replaces workers, whatever the reason. A worker is *outdated*
 * when a rolling restart (HUP) began after it was spawned, or when it asked
 * to retire (RETIRE, --max-requests). Outdated workers keep serving; new
 * ones are spawned beside them, never more than --reload-surge above the
 * target, and an outdated worker is sent TERM (it drains) only when enough
 * up-to-date workers are READY to keep the target serving without it. So
 * capacity never drops below the target, and a replacement that never
 * becomes ready costs nothing but the attempt: during a rolling restart it
 * ends the restart, and the old generation goes on serving.
 *
 * Health: a READY worker that sends no heartbeat for --timeout, or whose
 * every lane has been inside one request for longer than that, is sent
 * SIGABRT (Python's faulthandler writes every thread's traceback to the
 * error log), SIGKILL a second later, and replaced at once. A worker that
 * is not READY within --boot-timeout gets the same, and when no worker at
 * all has become ready that long after start the supervisor gives up.
 *
 * The table itself is kept towards its target by maintain.c, the last
 * step of every cycle; the state both share is in state.h.
 *
 * A worker that says it drains when nobody here asked was sent TERM by
 * someone else. Sent to that worker alone (gunicorn's way to replace one),
 * it is let go and replaced. Sent to the whole process group (timeout(1),
 * a process manager, "kill -TERM -- -PGID"), it is part of a stop: the
 * same kill() gave us a TERM, caught before the worker's word could be
 * read; but libev runs a signal's watcher only after its next poll, and
 * the word may have come in the poll before. So on_message() only notes
 * the time, and maintain.c lets the worker go OWN_DRAIN_WAIT later, in a
 * cycle() after at least one more poll: a stop begun by then wins.
 *
 * --preload: workers are forked by a zygote of their generation, which
 * maintain.c starts, restarts and lets go (zygote.h).
 *
 * Deaths: a worker that dies young is replaced after a delay that doubles
 * (0.1 s to 10 s) with every round of deaths; one that exits
 * SL_EXIT_APPLOAD before any worker was ever ready cannot import the app
 * and never will, so the supervisor stops and exits SL_EXIT_USAGE.
 */
#include "config.h"

#include <errno.h>
#include <ev.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/ctl.h"
#include "common/log.h"
#include "common/proctitle.h"
#include "supervisor/health.h"
#include "supervisor/notify.h"
#include "supervisor/pidfile.h"
#include "supervisor/state.h"
#include "supervisor/supervisor.h"
#include "supervisor/table.h"
#include "supervisor/upgrade.h"

static supervisor_t sup; /* one per process; its table is big */

static int init(supervisor_t *s, const sl_options_t *o, const char *worker_exe,
                char **argv, char **worker_argv, sl_listener_t *ls, int nls);
static int init_loop(supervisor_t *s);
static void on_signal(struct ev_loop *loop, ev_signal *w, int revents);
static void on_wake(struct ev_loop *loop, ev_timer *w, int revents);
static void on_tick(struct ev_loop *loop, ev_timer *w, int revents);
static void on_watchdog(struct ev_loop *loop, ev_timer *w, int revents);
static void on_message(void *ctx, sl_worker_t *w, const sl_ctl_msg_t *m);
static void on_upgrade(void *ctx, pid_t pid, bool ready, const char *why);
static void on_source_change(void *ctx, const char *path);
static void cycle(struct ev_loop *loop, ev_prepare *w, int revents);
static void reap(supervisor_t *s);
static void worker_exited(supervisor_t *s, sl_worker_t *w, int status);
static void log_exit(const sl_worker_t *w, int status, bool quiet_appload);
static sl_expo_cause_t restart_cause(const supervisor_t *s,
                                     const sl_worker_t *w);
static void begin_upgrade(supervisor_t *s);
static void reopen_logs(supervisor_t *s);
static void update_title(const supervisor_t *s);
static int exit_status(const supervisor_t *s);

int sl_supervisor_run(const sl_options_t *o, const char *worker_exe,
                      char **argv, char **worker_argv, sl_listener_t *ls,
                      int nls)
{
    supervisor_t *s = &sup;

    if (init(s, o, worker_exe, argv, worker_argv, ls, nls) == -1) {
        return SL_EXIT_FAIL;
    }
    if (o->metrics_bind != NULL) {
        s->scrape = sl_scrape_start(s->loop, o, &s->table,
                                    sl_upgrade_is_successor(&s->upgrade));
        if (s->scrape == NULL) {
            ev_loop_destroy(s->loop);
            return SL_EXIT_USAGE;
        }
        s->table.metrics_fd = sl_scrape_segment_fd(s->scrape);
        sl_scrape_set_target(s->scrape, s->target);
    }
    if (o->pidfile != NULL && !sl_upgrade_is_successor(&s->upgrade) &&
        sl_pidfile_write(o->pidfile) == -1) {
        sl_reload_close(&s->reload);
        ev_loop_destroy(s->loop);
        return SL_EXIT_USAGE;
    }

    ev_run(s->loop, 0); /* until cycle() sees the last worker gone */

    int rc = exit_status(s);
    sl_reload_close(&s->reload);
    if (o->pidfile != NULL) {
        sl_pidfile_remove(o->pidfile);
    }
    sl_info("Shutting down: Master (exit status %d)", rc);
    sl_scrape_destroy(s->scrape, !s->handed_over);
    ev_loop_destroy(s->loop);
    return rc;
}

static int init(supervisor_t *s, const sl_options_t *o, const char *worker_exe,
                char **argv, char **worker_argv, sl_listener_t *ls, int nls)
{
    memset(s, 0, sizeof(*s));
    s->o = o;
    s->worker_exe = worker_exe;
    s->argv = argv;
    s->worker_argv = worker_argv;
    s->ls = ls;
    s->nls = nls < SL_MAX_LISTENERS ? nls : SL_MAX_LISTENERS;
    for (int i = 0; i < s->nls; i++) {
        s->fds[i] = ls[i].fd;
    }
    s->target = o->workers < SL_TABLE_SLOTS ? o->workers : SL_TABLE_SLOTS;
    s->backoff = BACKOFF_MIN;
    ssize_t n = readlink("/proc/self/exe", s->exe, sizeof(s->exe) - 1);
    if (n == -1) {
        sl_log_errno(SL_LOG_WARNING, "readlink(\"/proc/self/exe\") failed:"
                                     " USR2 will not work");
        n = 0;
    }
    s->exe[n] = '\0';
    if (init_loop(s) == -1) {
        return -1;
    }
    s->boot_deadline = ev_now(s->loop) + o->boot_timeout;
    s->rate_at = ev_now(s->loop);
    update_title(s);
    if (sl_upgrade_is_successor(&s->upgrade)) {
        sl_info("Binary upgrade: taking over from supervisor %ld",
                (long)sl_upgrade_parent(&s->upgrade));
    }
    return 0;
}

/* The loop and its watchers; nothing runs until ev_run(). */
static int init_loop(supervisor_t *s)
{
    static const int sigs[] = {SIGTERM, SIGINT,  SIGQUIT, SIGCHLD, SIGHUP,
                               SIGUSR1, SIGUSR2, SIGTTIN, SIGTTOU};

    /* Not the default loop: that one reaps children itself for ev_child,
     * and we reap in cycle(), in our own order. */
    s->loop = ev_loop_new(EVFLAG_AUTO);
    if (s->loop == NULL) {
        sl_error("ev_loop_new() failed");
        return -1;
    }
    ev_set_userdata(s->loop, s);
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        sl_log_errno(SL_LOG_WARNING, "signal(SIGPIPE) failed");
    }
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        ev_signal_init(&s->sig_watchers[i], on_signal, sigs[i]);
        s->sig_watchers[i].data = s;
        ev_signal_start(s->loop, &s->sig_watchers[i]);
    }
    ev_prepare_init(&s->cycle_watcher, cycle);
    s->cycle_watcher.data = s;
    ev_prepare_start(s->loop, &s->cycle_watcher);
    ev_init(&s->wake_timer, on_wake);
    ev_timer_init(&s->tick_timer, on_tick, TICK, TICK);
    ev_timer_start(s->loop, &s->tick_timer);
    double wd = sl_notify_watchdog_interval();
    if (wd > 0) {
        ev_timer_init(&s->watchdog_timer, on_watchdog, 0, wd);
        ev_timer_start(s->loop, &s->watchdog_timer);
    }
    if (sl_table_init(&s->table, s->loop, on_message, s) < 0) {
        return -1;
    }
    /* --preload's workers are forked twice, to end up our children */
    sl_zygotes_init(&s->zygotes, s->loop);
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) == -1) {
        sl_log_errno(SL_LOG_WARNING, "prctl(PR_SET_CHILD_SUBREAPER) failed");
    }
    /* without random bytes the workers issue no tickets: not fatal */
    if (s->o->certfile != NULL && s->o->ticket_rotation > 0) {
        (void)sl_tickets_start(&s->tickets, s->loop, &s->table,
                               s->o->ticket_rotation);
    }
    sl_upgrade_init(&s->upgrade, s->loop, on_upgrade, s);
    return sl_reload_init(&s->reload, s->loop, s->o, on_source_change, s);
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
    supervisor_t *s = w->data;

    (void)loop;
    (void)revents;
    switch (w->signum) {
    case SIGCHLD:
        s->child_flag = true;
        break;
    case SIGTERM:
        if (s->stop_flag == STOP_NONE) {
            s->stop_flag = STOP_GRACEFUL;
            s->stop_signal = SIGTERM;
        }
        break;
    case SIGINT:
    case SIGQUIT:
        s->stop_flag = STOP_FAST;
        s->stop_signal = w->signum;
        break;
    case SIGHUP:
        s->reload_flag = true;
        break;
    case SIGUSR2:
        s->upgrade_flag = true;
        break;
    case SIGUSR1:
        s->reopen_flag = true;
        break;
    case SIGTTIN:
        s->more_workers++;
        break;
    case SIGTTOU:
        s->more_workers--;
        break;
    default:
        break;
    }
}

/* Nothing to do but wake the loop: cycle() looks at the clock. */
static void on_wake(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;
}

/* Once a second: the request rate over the last interval, and STATUS= when
 * it reads differently. */
static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
    supervisor_t *s = ev_userdata(loop);
    ev_tstamp now = ev_now(loop);
    char status[NOTE_MAX * 2];

    (void)w;
    (void)revents;
    if (now > s->rate_at) {
        s->rps = (double)(s->served - s->rate_served) / (now - s->rate_at);
    }
    s->rate_served = s->served;
    s->rate_at = now;
    if (s->scrape != NULL) {
        sl_scrape_set_target(s->scrape, s->target);
        sl_scrape_tick(s->scrape);
    }
    if (!s->handed_over) {
        sl_supervisor_status_text(s, status, sizeof(status));
        sl_notify_status(status);
    }
}

static void on_watchdog(struct ev_loop *loop, ev_timer *w, int revents)
{
    supervisor_t *s = ev_userdata(loop);

    (void)w;
    (void)revents;
    if (!s->handed_over) {
        sl_notify_watchdog();
    }
}

static void on_message(void *ctx, sl_worker_t *w, const sl_ctl_msg_t *m)
{
    supervisor_t *s = ctx;
    ev_tstamp now = ev_now(s->loop);

    w->heartbeat = now;
    if (m->served > w->last.served) {
        s->served += m->served - w->last.served;
    }
    w->last = *m;
    switch (m->type) {
    case SL_CTL_READY:
        if (w->state != SL_WORKER_BOOTING) {
            break;
        }
        w->state = SL_WORKER_READY;
        w->ready_at = now;
        s->any_ready = true;
        sl_info("Worker %d (pid %ld) is ready (booted in %.3fs)", w->id,
                (long)w->pid, now - w->started);
        if (s->scrape != NULL) {
            sl_scrape_worker_ready(s->scrape, now - w->started);
        }
        if (w->reopen_pending) {
            sl_table_kill(w, SIGUSR1);
        }
        if (sl_reload_on(&s->reload)) {
            /* unless its rename was seen first: then this finds none */
            int n = sl_reload_take_report(&s->reload, w->pid);
            if (n >= 0) {
                sl_debug("--reload: worker %d reported %d module files", w->id,
                         n);
            }
        }
        break;
    case SL_CTL_RETIRE:
        if (w->state == SL_WORKER_READY && !w->retire) {
            w->retire = true;
            sl_info("Worker %d (pid %ld) served %llu requests"
                    " (--max-requests): replacing it",
                    w->id, (long)w->pid, (unsigned long long)m->served);
        }
        break;
    case SL_CTL_DRAINING:
        /* Someone else sent it TERM: that worker alone, or the whole
         * process group, and then ours is on its way. cycle() decides,
         * a moment later (maintain.c, let_go_own_drains()). */
        if (sl_worker_live(w) && w->own_drain == 0) {
            w->own_drain = now;
        }
        break;
    default:
        break; /* HEARTBEAT: the time stamp and counters are all */
    }
}

static void on_upgrade(void *ctx, pid_t pid, bool ready, const char *why)
{
    supervisor_t *s = ctx;
    char status[NOTE_MAX];

    if (!ready) {
        sl_error("Binary upgrade failed: %s; this supervisor goes on serving",
                 why);
        snprintf(s->reload_note, sizeof(s->reload_note),
                 "binary upgrade failed: %s", why);
        return;
    }
    sl_info("Binary upgrade: supervisor %ld has taken over; draining this"
            " supervisor's workers",
            (long)pid);
    snprintf(status, sizeof(status), "Handed over to supervisor %ld",
             (long)pid);
    sl_notify_mainpid(pid, false, status);
    s->handed_over = true;
    for (int i = 0; i < s->nls; i++) {
        s->ls[i].unlink = false; /* the new supervisor's files now */
    }
    ev_timer_stop(s->loop, &s->watchdog_timer);
    if (s->scrape != NULL) {
        sl_scrape_stop_listening(s->scrape);
    }
    update_title(s);
    sl_supervisor_begin_stop(s, STOP_GRACEFUL, 0);
}

/* --reload: a burst of changes has ended. The restart is cycle()'s. */
static void on_source_change(void *ctx, const char *path)
{
    supervisor_t *s = ctx;

    sl_info("--reload: %s changed", path);
    s->change_flag = true;
}

static void cycle(struct ev_loop *loop, ev_prepare *w, int revents)
{
    supervisor_t *s = w->data;

    (void)revents;
    if (s->child_flag) {
        s->child_flag = false;
        reap(s);
    }
    if (s->stop_flag != STOP_NONE) {
        stop_mode_t mode = s->stop_flag;
        s->stop_flag = STOP_NONE;
        sl_supervisor_begin_stop(s, mode, s->stop_signal);
    }
    if (s->reload_flag || s->change_flag) {
        const char *why = s->reload_flag ? "signal: hup" : "a source change";
        if (s->change_flag) {
            /* new code: the backoff earned by the last broken edit's
             * worker says nothing about this one */
            s->backoff = BACKOFF_MIN;
            s->spawn_at = 0;
        }
        s->reload_flag = s->change_flag = false;
        sl_supervisor_begin_reload(s, why);
    }
    if (s->upgrade_flag) {
        s->upgrade_flag = false;
        begin_upgrade(s);
    }
    if (s->reopen_flag) {
        s->reopen_flag = false;
        reopen_logs(s);
    }
    if (s->more_workers != 0) {
        sl_maintain_resize(s);
    }
    sl_maintain(s);
    if (s->stopping != STOP_NONE && sl_table_count(&s->table) == 0 &&
        sl_zygotes_count(&s->zygotes) == 0 &&
        !sl_upgrade_running(&s->upgrade)) {
        ev_break(loop, EVBREAK_ALL);
    }
}

static void reap(supervisor_t *s)
{
    int status;

    for (;;) {
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid == 0) {
            return;
        }
        if (pid == -1) {
            if (errno == EINTR) {
                continue;
            }
            if (errno != ECHILD) {
                sl_log_errno(SL_LOG_ERROR, "waitpid() failed");
            }
            return;
        }
        sl_worker_t *w = sl_table_find(&s->table, pid);
        sl_zygote_end_t end;
        if (w != NULL) {
            worker_exited(s, w, status);
        } else if (sl_zygotes_reaped(&s->zygotes, pid, status, &end)) {
            sl_maintain_zygote_ended(s, &end, status);
        } else if (!sl_upgrade_reaped(&s->upgrade, pid, status)) {
            sl_debug("reaped pid %ld, not a worker", (long)pid);
        }
    }
}

static void worker_exited(supervisor_t *s, sl_worker_t *w, int status)
{
    ev_tstamp now = ev_now(s->loop);
    bool asked = sl_worker_leaving(w);
    bool booting = w->state == SL_WORKER_BOOTING;
    bool appload = WIFEXITED(status) && WEXITSTATUS(status) == SL_EXIT_APPLOAD;
    bool clean = (WIFEXITED(status) && WEXITSTATUS(status) == 0) ||
                 (WIFSIGNALED(status) && WTERMSIG(status) == w->stop_signal &&
                  !w->aborted);
    int id = w->id;
    long pid = (long)w->pid;
    unsigned gen = w->gen;
    ev_tstamp age = now - w->started;

    log_exit(w, status, appload && !s->any_ready);
    /* Only a worker that served can have left something undone; one that
     * was still booting has nothing to drain, and one aborted for hanging
     * before the stop (the health check judges no worker after it) was
     * never asked to drain: the stop skipped it. */
    if (s->stopping == STOP_GRACEFUL && !clean && w->ready_at > 0 &&
        !w->aborted) {
        s->unclean = true;
    }
    if (s->scrape != NULL) {
        sl_scrape_worker_gone(s->scrape, id, restart_cause(s, w));
    }
    sl_table_release(&s->table, w);
    if (asked || s->stopping != STOP_NONE) {
        return;
    }
    if (appload && !s->any_ready) {
        s->app_failed = true;
        sl_supervisor_begin_stop(s, STOP_GRACEFUL, 0);
        return;
    }
    if (booting && s->reloading && gen == s->gen_next) {
        sl_supervisor_reload_failed(
            s, "worker %d (pid %ld) exited before it was ready%s", id, pid,
            appload ? " (the application failed to load)" : "");
    }
    sl_supervisor_died_young(s, age);
}

/* Why W, just reaped, will be replaced, for the metrics: SL_EXPO_CAUSES
 * when it will not be (a stop, TTOU). */
static sl_expo_cause_t restart_cause(const supervisor_t *s,
                                     const sl_worker_t *w)
{
    if (s->stopping != STOP_NONE || s->handed_over) {
        return SL_EXPO_CAUSES;
    }
    if (w->aborted) {
        return SL_EXPO_TIMEOUT; /* the health check's SIGABRT */
    }
    if (!sl_worker_leaving(w)) {
        return SL_EXPO_CRASH; /* nobody asked it to go */
    }
    if (w->retire) {
        return SL_EXPO_MAX_REQUESTS;
    }
    return w->gen < s->gen_min ? SL_EXPO_RELOAD : SL_EXPO_CAUSES;
}

/* One line per exit, at a level that says whether it was news, and at
 * INFO when it was not: "Booting worker" is INFO, so every worker started
 * is seen to end, also one killed by a stop while it booted. QUIET_APPLOAD:
 * the worker has already said why it could not load the app. */
static void log_exit(const sl_worker_t *w, int status, bool quiet_appload)
{
    bool asked = sl_worker_leaving(w);
    long pid = (long)w->pid;

    if (WIFEXITED(status)) {
        int code = WEXITSTATUS(status);
        int level = code == 0       ? SL_LOG_INFO
                    : quiet_appload ? SL_LOG_DEBUG
                    : asked         ? SL_LOG_WARNING
                                    : SL_LOG_ERROR;
        sl_log(level, "Worker %d (pid %ld) exited with code %d%s", w->id, pid,
               code,
               code == SL_EXIT_APPLOAD ? ": the application failed to load"
                                       : "");
        return;
    }
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        bool answer = asked && sig == w->stop_signal;
        sl_log(w->aborted || answer ? SL_LOG_INFO : SL_LOG_ERROR,
               "Worker %d (pid %ld) was killed by signal %d (%s)", w->id, pid,
               sig, strsignal(sig));
    }
}

/* Young means it did not outlive the longest backoff. The delay doubles
 * once per round of deaths: workers dying together (a bad deploy) move it
 * one step, not one step each. */
void sl_supervisor_died_young(supervisor_t *s, ev_tstamp age)
{
    ev_tstamp now = ev_now(s->loop);

    if (age >= BACKOFF_MAX) {
        s->backoff = BACKOFF_MIN;
    }
    if (s->spawn_at > now) {
        return;
    }
    s->spawn_at = now + s->backoff;
    s->backoff = s->backoff * 2 < BACKOFF_MAX ? s->backoff * 2 : BACKOFF_MAX;
}

/* Ask every worker to exit: TERM drains, INT and QUIT are passed on as they
 * came. A fast stop may overtake a graceful one, never the reverse. SIG is
 * 0 when the supervisor decides to stop on its own. */
void sl_supervisor_begin_stop(supervisor_t *s, stop_mode_t mode, int sig)
{
    ev_tstamp now = ev_now(s->loop);
    const sl_options_t *o = s->o;
    char status[NOTE_MAX];

    if (s->stopping >= mode) {
        return;
    }
    if (sig != 0) {
        sl_info("Handling signal: %s", sig == SIGTERM  ? "term"
                                       : sig == SIGINT ? "int"
                                                       : "quit");
    }
    if (s->stopping == STOP_NONE && !s->handed_over) {
        snprintf(status, sizeof(status), "Stopping (%s)",
                 mode == STOP_GRACEFUL ? "draining" : "fast");
        sl_notify_stopping(status);
        sl_upgrade_signal(&s->upgrade, SIGTERM);
    }
    s->stopping = mode;
    s->reloading = false;
    sl_zygotes_kill_all(&s->zygotes, SIGTERM); /* nothing to drain there */
    s->kill_at =
        now + (mode == STOP_GRACEFUL
                   ? o->shutdown_delay + o->graceful_timeout + KILL_GRACE
                   : FAST_STOP_KILL);
    for (int i = 0; i < s->table.high; i++) {
        sl_worker_t *w = &s->table.slots[i];
        if (w->state == SL_WORKER_FREE || w->aborted) {
            continue;
        }
        if (mode == STOP_FAST && w->state == SL_WORKER_BOOTING) {
            /* Nothing to close yet; and INT would be lost in the window
             * where Python's own SIGINT handler is installed. */
            sl_table_stop(w, SIGKILL, s->kill_at);
            w->killed = true;
        } else if (mode == STOP_FAST) {
            sl_table_stop(w, sig ? sig : SIGQUIT, s->kill_at);
        } else if (sl_worker_live(w)) {
            sl_table_stop(w, SIGTERM, s->kill_at);
        }
    }
    /* The draining workers take what waits in the accept queue before they
     * close their copies of the listen sockets; the last copy to close
     * resets whatever is still queued, so it must not be ours. */
    if (mode == STOP_GRACEFUL) {
        for (int i = 0; i < s->nls; i++) {
            if (s->ls[i].fd != -1) {
                close(s->ls[i].fd);
                s->ls[i].fd = -1;
            }
            s->fds[i] = -1;
        }
    }
}

/* HUP, or a change --reload saw: a new generation. Deferred while the
 * first one is still booting: there is nothing to restart yet, and READY=1
 * must come first. WHY names the cause in the log. */
void sl_supervisor_begin_reload(supervisor_t *s, const char *why)
{
    char status[NOTE_MAX * 2];

    if (s->stopping != STOP_NONE || s->handed_over) {
        sl_info("Handling %s: ignored while stopping", why);
        return;
    }
    if (!s->ready_notified) {
        sl_info("Handling %s: the rolling restart begins once every"
                " worker is ready",
                why);
        s->reload_pending = true;
        s->reload_why = why;
        return;
    }
    if (sl_reconfig(s) == -1) {
        return; /* a bad file changes nothing */
    }
    if (s->o->certfile != NULL) {
        (void)sl_tickets_reschedule(&s->tickets, s->loop, &s->table,
                                    s->o->ticket_rotation);
    }
    s->gen_next++;
    s->gen_min = s->gen_next;
    s->reloading = true;
    s->reload_started = ev_now(s->loop);
    s->reload_replaced = 0;
    s->reload_note[0] = '\0';
    sl_info("Handling %s: rolling restart of %d workers, %d at a time", why,
            s->target, s->o->reload_surge);
    sl_supervisor_status_text(s, status, sizeof(status));
    sl_notify_reloading(status);
}

/* A replacement failed: stop replacing. Whatever is READY now, of either
 * generation, serves on; replacements still booting are sent away. */
void sl_supervisor_reload_failed(supervisor_t *s, const char *fmt, ...)
{
    char why[NOTE_MAX - 32];
    char status[NOTE_MAX * 2];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    s->reloading = false;
    snprintf(s->reload_note, sizeof(s->reload_note), "reload failed: %s", why);
    sl_error("Rolling restart stopped after %d of %d workers: %s; the others"
             " go on serving",
             s->reload_replaced, s->target, why);

    unsigned oldest = s->gen_next;
    for (int i = 0; i < s->table.high; i++) {
        sl_worker_t *w = &s->table.slots[i];
        if (w->state == SL_WORKER_BOOTING && w->gen == s->gen_next) {
            sl_maintain_drain_worker(s, w, "its rolling restart failed");
        } else if (w->state == SL_WORKER_READY && w->gen < oldest) {
            oldest = w->gen;
        }
    }
    s->gen_min = oldest;
    sl_supervisor_status_text(s, status, sizeof(status));
    sl_notify_ready(status);
}

static void begin_upgrade(supervisor_t *s)
{
    if (s->stopping != STOP_NONE || s->handed_over) {
        sl_info("Handling signal: usr2: ignored while stopping");
        return;
    }
    if (sl_upgrade_is_successor(&s->upgrade)) {
        sl_info("Handling signal: usr2: ignored until this supervisor has"
                " taken over");
        return;
    }
    if (s->exe[0] == '\0') {
        sl_error("Handling signal: usr2: this binary's path is unknown");
        return;
    }
    sl_info("Handling signal: usr2");
    if (sl_upgrade_start(&s->upgrade, s->exe, s->argv, s->ls, s->nls,
                         s->target) == 0) {
        s->reload_note[0] = '\0';
    }
}

static void reopen_logs(supervisor_t *s)
{
    if (sl_log_reopen() == -1) {
        sl_log_errno(SL_LOG_ERROR, "reopening the error log failed");
    }
    sl_info("Handling signal: usr1: log files reopened");
    for (int i = 0; i < s->table.high; i++) {
        sl_worker_t *w = &s->table.slots[i];
        if (w->ready_at > 0) {
            sl_table_kill(w, SIGUSR1);
        } else if (w->state == SL_WORKER_BOOTING) {
            /* USR1 would kill it: no handler before READY */
            w->reopen_pending = true;
        }
    }
}

/* STATUS=: "4/4 workers ready, 120.5 req/s", with what is going on. */
void sl_supervisor_status_text(const supervisor_t *s, char *buf, size_t size)
{
    char what[NOTE_MAX] = "";

    if (s->stopping != STOP_NONE) {
        snprintf(what, sizeof(what), "Stopping: %d workers left; ",
                 sl_table_count(&s->table));
    } else if (s->reloading) {
        snprintf(what, sizeof(what), "Reloading: %d of %d workers replaced; ",
                 s->reload_replaced, s->target);
    } else if (sl_upgrade_running(&s->upgrade)) {
        snprintf(what, sizeof(what),
                 "Upgrading: new supervisor %ld is"
                 " starting; ",
                 (long)s->upgrade.child);
    }
    sl_table_counts_t c = sl_table_counts(&s->table, s->gen_min);
    char ws[48] = "";

    /* as the live workers' last heartbeats counted them */
    if (c.websockets > 0)
        snprintf(ws, sizeof(ws), ", %u WebSockets open", c.websockets);
    snprintf(buf, size, "%s%d/%d workers ready, %.1f req/s%s%s%s", what,
             c.ready, s->target, s->rps, ws, s->reload_note[0] ? "; last " : "",
             s->reload_note);
}

static void update_title(const supervisor_t *s)
{
    const char *name = s->o->proc_name ? s->o->proc_name : "sluice";

    sl_proctitle_set(name, "%s: supervisor%s [%s]", name,
                     s->handed_over ? " (old, draining)" : "", s->o->app);
}

static int exit_status(const supervisor_t *s)
{
    if (s->app_failed) {
        return SL_EXIT_USAGE;
    }
    return s->boot_failed || s->unclean ? SL_EXIT_FAIL : SL_EXIT_OK;
}
