/* supervisor.c - the supervisor's loop: signal flags, reaping, the table.
 *
 * Signal watchers only raise flags. All the work happens in one place,
 * cycle(), an ev_prepare watcher that runs before the loop sleeps, in a fixed
 * order: reap children, act on a stop, act on a reload, reopen logs, then
 * bring the worker table to its target. Because every decision is taken
 * there, two signals arriving together are handled in that order no matter
 * which arrived first, and nothing is decided inside a signal callback.
 *
 * The table has fixed slots. A slot whose worker died stays empty until its
 * respawn time: 0.1 s after the death, doubling (to 10 s) while workers keep
 * dying young, so a crashing application costs a little CPU, not a fork
 * storm. A worker that exits with SL_EXIT_APPLOAD before any worker has
 * said READY cannot import the app and never will: the supervisor stops the
 * others and exits SL_EXIT_USAGE. Once one has been ready, the same exit is
 * treated as a crash (the code may be mid-deploy) and retried with backoff.
 *
 * Workers talk back on the control channel (common/ctl.h). READY marks a
 * slot ready; RETIRE (--max-requests) moves the worker to a spare slot,
 * still serving, until its replacement in the old slot is READY, and only
 * then is it sent TERM, so capacity never dips.
 *
 * Not here yet (later issues): heartbeat timeouts and --boot-timeout,
 * rolling restart on HUP, binary upgrade on USR2, sd_notify.
 */
#include "config.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/ctl.h"
#include "common/log.h"
#include "supervisor/spawn.h"
#include "supervisor/supervisor.h"

#define BACKOFF_MIN    0.1  /* first respawn delay, seconds */
#define BACKOFF_MAX    10.0 /* ... doubling up to this */
#define FAST_STOP_KILL 5.0  /* SIGKILL after INT/QUIT, seconds */
#define KILL_GRACE     1.0  /* beyond --graceful-timeout, before SIGKILL */

typedef enum {
    SLOT_EMPTY = 0, /* no worker; filled again at respawn_at */
    SLOT_BOOTING,   /* spawned, not READY yet */
    SLOT_READY,     /* serving */
    SLOT_RETIRING,  /* serving until slot replaced_by is READY */
    SLOT_STOPPING,  /* asked to exit */
} slot_state_t;

typedef struct {
    slot_state_t state;
    pid_t pid;
    ev_tstamp started;    /* when it was spawned */
    ev_tstamp heartbeat;  /* when it last said anything */
    ev_tstamp respawn_at; /* SLOT_EMPTY: not before this */
    double backoff;       /* delay after its next young death */
    int replaced_by;      /* SLOT_RETIRING: the slot of its successor */
    int ctl_fd;           /* owned: our end of the control socketpair */
    ev_io ctl_watcher;    /* reads ctl_fd; data points to this slot */
} worker_slot_t;

typedef enum {
    STOP_NONE = 0,
    STOP_GRACEFUL, /* TERM: workers drain */
    STOP_FAST,     /* INT, QUIT: workers exit at once */
} stop_mode_t;

typedef struct {
    const sl_options_t *o; /* borrowed */
    char **argv;           /* borrowed */
    int fds[SL_MAX_LISTENERS];
    int nfds;
    struct ev_loop *loop; /* owned */

    ev_signal sig_watchers[9]; /* one per signal in sl_supervisor_run() */
    ev_prepare cycle_watcher;
    ev_timer wake_timer; /* next respawn or kill deadline */

    /* raised by the signal watchers, cleared by cycle() */
    bool child_flag;
    stop_mode_t stop_flag;
    int stop_signal; /* the signal that asked for the stop */
    bool reload_flag;
    bool upgrade_flag;
    bool reopen_flag;
    int more_workers; /* TTIN minus TTOU since the last cycle */

    stop_mode_t stopping;
    ev_tstamp kill_at; /* stopping: SIGKILL what is left after this */
    bool killed;       /* some worker needed SIGKILL */
    bool any_ready;    /* some worker has said READY */
    bool app_failed;   /* a worker exited SL_EXIT_APPLOAD before that */
    int target;
    worker_slot_t slots[SL_SUPERVISOR_MAX_WORKERS];
} supervisor_t;

static supervisor_t sup; /* one per process; its slots are big */

static int init_loop(supervisor_t *s);
static void on_signal(struct ev_loop *loop, ev_signal *w, int revents);
static void on_wake(struct ev_loop *loop, ev_timer *w, int revents);
static void on_ctl(struct ev_loop *loop, ev_io *w, int revents);
static void on_message(supervisor_t *s, worker_slot_t *w,
                       const sl_ctl_msg_t *m);
static void retire(supervisor_t *s, worker_slot_t *w);
static void close_ctl(supervisor_t *s, worker_slot_t *w);
static void cycle(struct ev_loop *loop, ev_prepare *w, int revents);
static void reap(supervisor_t *s);
static void worker_exited(supervisor_t *s, worker_slot_t *w, int status);
static void begin_stop(supervisor_t *s, stop_mode_t mode, int sig);
static void reopen_logs(supervisor_t *s);
static void resize(supervisor_t *s);
static void maintain(supervisor_t *s);
static int spawn_slot(supervisor_t *s, int id);
static void signal_workers(supervisor_t *s, int sig);
static int live_workers(const supervisor_t *s);
static int write_pidfile(const char *path);

int sl_supervisor_run(const sl_options_t *o, char **argv,
                      const sl_listener_t *ls, int nls)
{
    supervisor_t *s = &sup;
    int rc = SL_EXIT_USAGE;

    memset(s, 0, sizeof(*s));
    s->o = o;
    s->argv = argv;
    s->target = o->workers < SL_SUPERVISOR_MAX_WORKERS
                    ? o->workers
                    : SL_SUPERVISOR_MAX_WORKERS;
    for (int i = 0; i < nls && i < SL_MAX_LISTENERS; i++) {
        s->fds[s->nfds++] = ls[i].fd;
    }
    for (int i = 0; i < SL_SUPERVISOR_MAX_WORKERS; i++) {
        s->slots[i].ctl_fd = -1;
        s->slots[i].backoff = BACKOFF_MIN;
    }
    if (init_loop(s) == -1) {
        return SL_EXIT_FAIL;
    }
    if (o->pidfile != NULL && write_pidfile(o->pidfile) == -1) {
        goto out_loop;
    }

    ev_run(s->loop, 0); /* until cycle() sees the last worker gone */

    rc = s->app_failed ? SL_EXIT_USAGE : s->killed ? SL_EXIT_FAIL : SL_EXIT_OK;
    if (o->pidfile != NULL && unlink(o->pidfile) == -1) {
        sl_log_errno(SL_LOG_WARNING, "unlink(\"%s\") failed", o->pidfile);
    }
    sl_info("Shutting down: Master");

out_loop:
    ev_loop_destroy(s->loop);
    return rc;
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
    signal(SIGPIPE, SIG_IGN);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        ev_signal_init(&s->sig_watchers[i], on_signal, sigs[i]);
        s->sig_watchers[i].data = s;
        ev_signal_start(s->loop, &s->sig_watchers[i]);
    }
    ev_prepare_init(&s->cycle_watcher, cycle);
    s->cycle_watcher.data = s;
    ev_prepare_start(s->loop, &s->cycle_watcher);
    ev_init(&s->wake_timer, on_wake);
    return 0;
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

/* Everything the worker has sent, until the channel would block. EOF means
 * the worker is gone or going; its exit is handled when it is reaped. */
static void on_ctl(struct ev_loop *loop, ev_io *w, int revents)
{
    supervisor_t *s = ev_userdata(loop);
    worker_slot_t *ws = w->data;
    int fd = ws->ctl_fd;
    sl_ctl_msg_t m;

    (void)revents;
    for (;;) {
        int rc = sl_ctl_recv(fd, &m);
        if (rc == 1) {
            on_message(s, ws, &m);
            if (ws->ctl_fd != fd) {
                return; /* retired into another slot, watcher and all */
            }
            continue;
        }
        if (rc == -1 && errno == EAGAIN) {
            return;
        }
        if (rc == -1 && errno == EPROTO) {
            sl_warn("worker %ld sent a malformed control message",
                    (long)ws->pid);
            continue;
        }
        if (rc == -1) {
            sl_log_errno(SL_LOG_WARNING,
                         "recv() failed on worker %ld's control socket",
                         (long)ws->pid);
        }
        close_ctl(s, ws);
        return;
    }
}

static void on_message(supervisor_t *s, worker_slot_t *w, const sl_ctl_msg_t *m)
{
    w->heartbeat = ev_now(s->loop);
    switch (m->type) {
    case SL_CTL_READY:
        if (w->state != SLOT_BOOTING) {
            break;
        }
        w->state = SLOT_READY;
        s->any_ready = true;
        sl_debug("worker %ld is ready", (long)w->pid);
        /* its predecessors, if it replaces retiring workers, may go now */
        for (int i = 0; i < SL_SUPERVISOR_MAX_WORKERS; i++) {
            worker_slot_t *old = &s->slots[i];
            if (old->state == SLOT_RETIRING &&
                &s->slots[old->replaced_by] == w) {
                kill(old->pid, SIGTERM);
                old->state = SLOT_STOPPING;
            }
        }
        break;
    case SL_CTL_RETIRE:
        if (w->state == SLOT_READY && s->stopping == STOP_NONE) {
            retire(s, w);
        }
        break;
    case SL_CTL_DRAINING:
        sl_debug("worker %ld is draining", (long)w->pid);
        break;
    default:
        break; /* HEARTBEAT: the time stamp above is all, for now */
    }
}

/* Move W, still serving, to a spare slot above the target and leave its
 * own slot empty, due now: maintain() starts the successor there. Without
 * a spare slot (a table full to the brim) it is simply sent TERM. */
static void retire(supervisor_t *s, worker_slot_t *w)
{
    int from = (int)(w - s->slots);
    worker_slot_t *spare = NULL;

    sl_info("Worker (pid:%ld) asked to be replaced", (long)w->pid);
    for (int i = s->target; i < SL_SUPERVISOR_MAX_WORKERS; i++) {
        if (s->slots[i].state == SLOT_EMPTY) {
            spare = &s->slots[i];
            break;
        }
    }
    w->backoff = BACKOFF_MIN;
    if (spare == NULL) {
        kill(w->pid, SIGTERM);
        w->state = SLOT_STOPPING;
        return;
    }

    double spare_backoff = spare->backoff;
    *spare = *w;
    spare->backoff = spare_backoff;
    spare->state = SLOT_RETIRING;
    spare->replaced_by = from;
    if (w->ctl_fd != -1) {
        ev_io_stop(s->loop, &w->ctl_watcher);
        ev_io_init(&spare->ctl_watcher, on_ctl, spare->ctl_fd, EV_READ);
        spare->ctl_watcher.data = spare;
        ev_io_start(s->loop, &spare->ctl_watcher);
    }
    w->state = SLOT_EMPTY;
    w->pid = 0;
    w->ctl_fd = -1;
    w->respawn_at = ev_now(s->loop);
}

static void close_ctl(supervisor_t *s, worker_slot_t *w)
{
    if (w->ctl_fd != -1) {
        ev_io_stop(s->loop, &w->ctl_watcher);
        close(w->ctl_fd);
        w->ctl_fd = -1;
    }
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
        begin_stop(s, mode, s->stop_signal);
    }
    if (s->reload_flag) {
        s->reload_flag = false;
        sl_warn("Handling signal: hup; rolling restart is not implemented"
                " yet, ignored");
    }
    if (s->upgrade_flag) {
        s->upgrade_flag = false;
        sl_warn("Handling signal: usr2; binary upgrade is not implemented"
                " yet, ignored");
    }
    if (s->reopen_flag) {
        s->reopen_flag = false;
        reopen_logs(s);
    }
    if (s->more_workers != 0) {
        resize(s);
    }
    maintain(s);
    if (s->stopping != STOP_NONE && live_workers(s) == 0) {
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
        worker_slot_t *w = NULL;
        for (int i = 0; i < SL_SUPERVISOR_MAX_WORKERS; i++) {
            if (s->slots[i].state != SLOT_EMPTY && s->slots[i].pid == pid) {
                w = &s->slots[i];
                break;
            }
        }
        if (w == NULL) {
            sl_debug("reaped pid %ld, not a worker", (long)pid);
            continue;
        }
        worker_exited(s, w, status);
    }
}

static void worker_exited(supervisor_t *s, worker_slot_t *w, int status)
{
    ev_tstamp now = ev_now(s->loop);
    bool asked = w->state == SLOT_STOPPING || w->state == SLOT_RETIRING;
    bool appload = WIFEXITED(status) && WEXITSTATUS(status) == SL_EXIT_APPLOAD;
    long pid = (long)w->pid;

    if (appload && !s->any_ready) {
        /* The worker has said why; one more line would only be noise. */
        sl_debug("worker %ld could not load the application", pid);
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        sl_info("Worker exited (pid: %ld)", pid);
    } else if (WIFEXITED(status)) {
        sl_log(asked ? SL_LOG_WARNING : SL_LOG_ERROR,
               "Worker (pid:%ld) exited with code %d", pid,
               WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        /* Dying of the stop signal we sent (a worker still booting has no
         * handler for it yet) is an answer, not news. */
        int sig = WTERMSIG(status);
        bool answer =
            asked && (sig == SIGTERM || sig == SIGINT || sig == SIGQUIT);
        sl_log(answer  ? SL_LOG_DEBUG
               : asked ? SL_LOG_WARNING
                       : SL_LOG_ERROR,
               "Worker (pid:%ld) was killed by signal %d (%s)", pid, sig,
               strsignal(sig));
    }

    close_ctl(s, w);
    bool retiring = w->state == SLOT_RETIRING;
    w->state = SLOT_EMPTY;
    w->pid = 0;
    if (retiring || (int)(w - s->slots) >= s->target) {
        return; /* a spare slot: nothing to refill */
    }

    if (appload && !s->any_ready && s->stopping == STOP_NONE) {
        s->app_failed = true;
        begin_stop(s, STOP_GRACEFUL, 0);
        return;
    }
    /* Young means it did not outlive the longest backoff: keep doubling.
     * A worker that ran for a while starts the sequence over. */
    if (now - w->started >= BACKOFF_MAX) {
        w->backoff = BACKOFF_MIN;
    }
    w->respawn_at = now + w->backoff;
    w->backoff = w->backoff * 2 < BACKOFF_MAX ? w->backoff * 2 : BACKOFF_MAX;
}

/* Ask every worker to exit: TERM drains, INT and QUIT are passed on as they
 * came. A fast stop may overtake a graceful one, never the reverse. SIG is
 * 0 when the supervisor decides to stop on its own. */
static void begin_stop(supervisor_t *s, stop_mode_t mode, int sig)
{
    ev_tstamp now = ev_now(s->loop);

    if (s->stopping >= mode) {
        return;
    }
    if (sig != 0) {
        sl_info("Handling signal: %s", sig == SIGTERM  ? "term"
                                       : sig == SIGINT ? "int"
                                                       : "quit");
    }
    s->stopping = mode;
    if (mode == STOP_GRACEFUL) {
        signal_workers(s, SIGTERM);
        s->kill_at = now + s->o->graceful_timeout + KILL_GRACE;
    } else {
        signal_workers(s, sig);
        s->kill_at = now + FAST_STOP_KILL;
    }
}

static void reopen_logs(supervisor_t *s)
{
    sl_info("Handling signal: usr1");
    if (sl_log_reopen() == -1) {
        sl_log_errno(SL_LOG_ERROR, "reopening the error log failed");
    }
    for (int i = 0; i < SL_SUPERVISOR_MAX_WORKERS; i++) {
        if (s->slots[i].state != SLOT_EMPTY) {
            kill(s->slots[i].pid, SIGUSR1);
        }
    }
}

/* TTIN and TTOU: one worker more or fewer, between 1 and the table size. */
static void resize(supervisor_t *s)
{
    int target = s->target + s->more_workers;

    s->more_workers = 0;
    if (s->stopping != STOP_NONE) {
        return;
    }
    if (target < 1) {
        target = 1;
    }
    if (target > SL_SUPERVISOR_MAX_WORKERS) {
        target = SL_SUPERVISOR_MAX_WORKERS;
    }
    if (target != s->target) {
        sl_info("Number of workers: %d (was %d)", target, s->target);
        s->target = target;
    }
}

/* Bring the table to its target, or enforce a stop's deadline; then set the
 * wake-up timer for the next moment something is due. */
static void maintain(supervisor_t *s)
{
    ev_tstamp now = ev_now(s->loop);
    ev_tstamp next = 0;

    if (s->stopping != STOP_NONE) {
        if (now >= s->kill_at && live_workers(s) > 0) {
            sl_warn("Workers did not exit in time, sending SIGKILL");
            signal_workers(s, SIGKILL);
            s->killed = true;
            s->kill_at = now + 3600; /* the reaper will finish the job */
        }
        next = s->kill_at;
    } else {
        for (int i = 0; i < SL_SUPERVISOR_MAX_WORKERS; i++) {
            worker_slot_t *w = &s->slots[i];
            bool excess = i >= s->target &&
                          (w->state == SLOT_BOOTING || w->state == SLOT_READY);
            bool orphan = w->state == SLOT_RETIRING &&
                          w->replaced_by >= s->target; /* after TTOU */
            if (excess || orphan) {
                kill(w->pid, SIGTERM);
                w->state = SLOT_STOPPING;
            }
            if (i >= s->target || w->state != SLOT_EMPTY) {
                continue;
            }
            if (w->respawn_at <= now && spawn_slot(s, i) == 0) {
                continue;
            }
            if (next == 0 || w->respawn_at < next) {
                next = w->respawn_at;
            }
        }
    }

    ev_timer_stop(s->loop, &s->wake_timer);
    if (next != 0) {
        ev_timer_set(&s->wake_timer, next > now ? next - now : 0.001, 0);
        ev_timer_start(s->loop, &s->wake_timer);
    }
}

static int spawn_slot(supervisor_t *s, int id)
{
    worker_slot_t *w = &s->slots[id];
    ev_tstamp now = ev_now(s->loop);
    int pair[2];

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == -1) {
        sl_log_errno(SL_LOG_ERROR, "socketpair() failed for worker %d", id);
        goto out_backoff;
    }
    pid_t pid = sl_spawn_worker(s->argv, s->fds, s->nfds, id, pair[1]);
    close(pair[1]);
    if (pid == -1) {
        close(pair[0]);
        goto out_backoff;
    }
    if (fcntl(pair[0], F_SETFL, O_NONBLOCK) == -1) {
        sl_log_errno(SL_LOG_WARNING,
                     "fcntl(O_NONBLOCK) failed on worker"
                     " %d's control socket",
                     id);
    }
    w->state = SLOT_BOOTING;
    w->pid = pid;
    w->started = now;
    w->heartbeat = now;
    w->ctl_fd = pair[0];
    ev_io_init(&w->ctl_watcher, on_ctl, w->ctl_fd, EV_READ);
    w->ctl_watcher.data = w;
    ev_io_start(s->loop, &w->ctl_watcher);
    sl_info("Booting worker with pid: %ld", (long)pid);
    return 0;

out_backoff:
    w->respawn_at = now + w->backoff;
    w->backoff = w->backoff * 2 < BACKOFF_MAX ? w->backoff * 2 : BACKOFF_MAX;
    return -1;
}

static void signal_workers(supervisor_t *s, int sig)
{
    for (int i = 0; i < SL_SUPERVISOR_MAX_WORKERS; i++) {
        worker_slot_t *w = &s->slots[i];
        if (w->state == SLOT_EMPTY) {
            continue;
        }
        if (kill(w->pid, sig) == -1 && errno != ESRCH) {
            sl_log_errno(SL_LOG_ERROR, "kill(%ld, %d) failed", (long)w->pid,
                         sig);
        }
        w->state = SLOT_STOPPING;
    }
}

static int live_workers(const supervisor_t *s)
{
    int n = 0;

    for (int i = 0; i < SL_SUPERVISOR_MAX_WORKERS; i++) {
        n += s->slots[i].state != SLOT_EMPTY;
    }
    return n;
}

static int write_pidfile(const char *path)
{
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

    if (fd == -1 || write(fd, buf, (size_t)n) != n) {
        sl_log_usage("cannot write the pid file %s: %s", path, strerror(errno));
        if (fd != -1) {
            close(fd);
        }
        return -1;
    }
    close(fd);
    return 0;
}
