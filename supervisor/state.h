/* state.h - the supervisor's state, shared by its two halves: supervisor.c
 * (signals, the cycle, stops, restarts and upgrades) and maintain.c (the
 * table towards its target). Nothing else includes it.
 */
#ifndef SL_STATE_H
#define SL_STATE_H

#include <ev.h>
#include <limits.h>
#include <stdbool.h>

#include "common/handoff.h"
#include "common/options.h"
#include "supervisor/listen.h"
#include "supervisor/reload.h"
#include "supervisor/scrape.h"
#include "supervisor/table.h"
#include "supervisor/tickets.h"
#include "supervisor/upgrade.h"
#include "supervisor/zygote.h"

#define BACKOFF_MIN    0.1  /* first respawn delay, seconds */
#define BACKOFF_MAX    10.0 /* ... doubling up to this */
#define FAST_STOP_KILL 5.0  /* SIGKILL after INT/QUIT, seconds */
#define KILL_GRACE     1.0  /* beyond a drain's own deadline, before SIGKILL */
#define ABORT_GRACE    1.0  /* SIGKILL this long after SIGABRT */
#define TICK           1.0  /* request rate and STATUS= refresh */
#define NOTE_MAX       256

/* A worker's drain that nobody here asked for is acted on this long after
 * it said so (see let_go_own_drains() in maintain.c). */
#define OWN_DRAIN_WAIT 0.005

typedef enum {
    STOP_NONE = 0,
    STOP_GRACEFUL, /* TERM: workers drain */
    STOP_FAST,     /* INT, QUIT: workers exit at once */
} stop_mode_t;

typedef struct {
    const sl_options_t *o;  /* borrowed */
    const char *worker_exe; /* borrowed: sluice-worker's path */
    char **argv;            /* borrowed: the command line, for upgrades */
    char **worker_argv;     /* borrowed: the effective one, for workers */
    char exe[PATH_MAX];     /* this binary's path, for USR2 */
    sl_listener_t *ls;      /* borrowed */
    int nls;
    int fds[SL_MAX_LISTENERS];
    struct ev_loop *loop; /* owned */
    sl_table_t table;
    sl_upgrade_t upgrade;
    sl_reload_t reload;   /* --reload's watcher; off without the option */
    sl_scrape_t *scrape;  /* owned: --metrics-bind's endpoint, NULL: off */
    sl_tickets_t tickets; /* TLS session ticket keys (with TLS) */
    sl_zygotes_t zygotes; /* --preload: one per generation */
    bool zygote_wanted;   /* the current one died after READY: another */

    ev_signal sig_watchers[9]; /* one per signal in init_loop() */
    ev_prepare cycle_watcher;
    ev_timer wake_timer;     /* the next deadline maintain() knows of */
    ev_timer tick_timer;     /* TICK: request rate, STATUS= */
    ev_timer watchdog_timer; /* WATCHDOG=1, when systemd asks for it */

    /* raised by the signal watchers, cleared by cycle() */
    bool child_flag;
    stop_mode_t stop_flag;
    int stop_signal; /* the signal that asked for the stop */
    bool reload_flag;
    bool change_flag; /* --reload saw the source change */
    bool upgrade_flag;
    bool reopen_flag;
    int more_workers; /* TTIN minus TTOU since the last cycle */

    int target;              /* workers wanted */
    unsigned gen_next;       /* generation of the workers spawned now */
    unsigned gen_min;        /* workers of an older one are outdated */
    double backoff;          /* delay after the next round of young deaths */
    ev_tstamp spawn_at;      /* no spawn before this */
    ev_tstamp boot_deadline; /* some worker must be ready by then */
    bool any_ready;          /* some worker has been READY */
    bool ready_notified;     /* READY=1 sent for the first generation */

    bool reloading;         /* a rolling restart is under way */
    bool reload_pending;    /* HUP during the first boot: restart after it */
    const char *reload_why; /* pending: "signal: hup" or a source change */
    ev_tstamp reload_started;
    int reload_replaced;        /* outdated workers drained so far */
    char reload_note[NOTE_MAX]; /* the last restart's failure, for STATUS= */

    stop_mode_t stopping;
    ev_tstamp kill_at; /* stopping: SIGKILL everything left after this */
    bool handed_over;  /* a binary upgrade's new supervisor took over */
    bool app_failed;   /* exit SL_EXIT_USAGE: the app cannot be imported */
    bool boot_failed;  /* exit SL_EXIT_FAIL: nothing became ready */
    bool unclean;      /* exit SL_EXIT_FAIL: a worker's stop went wrong */

    unsigned long long served; /* requests, summed over heartbeats */
    unsigned long long rate_served;
    ev_tstamp rate_at;
    double rps;
} supervisor_t;

/* ---- supervisor.c ---- */

/* Stop every worker: gracefully (TERM: drain) or fast; SIG is the signal
 * that asked. */
void sl_supervisor_begin_stop(supervisor_t *s, stop_mode_t mode, int sig);

/* HUP, or --reload's change: a rolling restart of every worker; WHY for
 * the log ("signal: hup"). */
void sl_supervisor_begin_reload(supervisor_t *s, const char *why);

/* End a rolling restart that cannot go on, saying why (log, STATUS=). */
void sl_supervisor_reload_failed(supervisor_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A worker died AGE seconds after it started: back off the next spawn. */
void sl_supervisor_died_young(supervisor_t *s, ev_tstamp age);

/* The STATUS= line: "4/4 workers ready, 120.5 req/s" and what goes on. */
void sl_supervisor_status_text(const supervisor_t *s, char *buf, size_t size);

/* ---- reconfig.c ---- */

/* HUP: build the effective command line anew (the -c file, re-read, with
 * SLUICE_CMD_ARGS and argv as at start) and make it the one new workers
 * get. 0 (also when there is no file to re-read), or -1 after one error
 * line in the log: the settings stay as they were. */
int sl_reconfig(supervisor_t *s);

/* ---- maintain.c ---- */

/* Deadlines, then the table towards its target; arms the wake timer for
 * the next deadline. */
void sl_maintain(supervisor_t *s);

/* TTIN and TTOU (more_workers): one worker more or fewer, between 1 and
 * the table size (less room for a restart's surge). sl_maintain() does
 * the rest. */
void sl_maintain_resize(supervisor_t *s);

/* --preload: the zygote of generation END->gen ended with STATUS
 * (reaped); what that means for the app and for its generation. */
void sl_maintain_zygote_ended(supervisor_t *s, const sl_zygote_end_t *end,
                              int status);

/* TERM to W, which drains within --shutdown-delay + --graceful-timeout;
 * WHY for the log. */
void sl_maintain_drain_worker(supervisor_t *s, sl_worker_t *w, const char *why);

/* Keep the earlier of *NEXT (0: none yet) and T in *NEXT. */
static inline void sl_earliest(ev_tstamp *next, ev_tstamp t)
{
    if (*next == 0 || t < *next)
        *next = t;
}

#endif
