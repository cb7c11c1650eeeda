/* drain.h - a worker's life after it starts serving: its control channel
 * to the supervisor, its signals, and its shutdown, split so the loop
 * never blocks in it: prepare (stop taking work), step (is it over yet?),
 * finish (log, close, exit status). Loop thread, except where said.
 *
 * Every field of the worker's lifecycle lives in one sl_drain_t, embedded
 * in the pump (p->drain). The drain reaches connections through their
 * session's operations (conn.h: sl_session_ops_t), never by their kind.
 */
#ifndef SL_DRAIN_H
#define SL_DRAIN_H

#include <ev.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct sl_pump sl_pump_t;
typedef struct sl_conn sl_conn_t;
typedef struct sl_exch sl_exch_t;

typedef struct sl_drain {
    int ctl_fd;   /* control channel to the supervisor, -1 = none; owned */
    ev_io ctl_io; /* embedded: EOF = supervisor gone */
    ev_signal sigterm, sigint, sigquit, sigusr1; /* embedded */
    uint64_t retire_at;     /* served count that asks for RETIRE, 0 = never */
    bool retired;           /* RETIRE was sent */
    bool restart;           /* the supervisor sent SL_CTL_RESTART */
    unsigned ws_going_away; /* the close code of WebSockets (1001, 1012 for
                               a restart), 0 before the drain */
    bool terminating;       /* TERM arrived: health answers 503 (unless
                               restart: the host stays) */
    atomic_bool draining;   /* executors read it (Connection: close) */
    atomic_bool stopping;   /* the drain finished: executors stop too */
    int exit_status;
    ev_tstamp started;
    ev_tstamp deadline;
    ev_timer delay_timer; /* embedded: --shutdown-delay */
    ev_timer timer;       /* embedded: the drain's step cadence */
    /* what the signal handlers share (drain.c): TERM arrived, set by its
     * handler before the loop hears of it */
    volatile sig_atomic_t term_seen;
    bool shutdown_delay; /* --shutdown-delay is set */
} sl_drain_t;

/* Set up P's drain: its timers, its signal watchers, no control channel
 * yet. At pump init. */
void sl_drain_init(sl_pump_t *p);

/* Attach the control channel FD (from the supervisor; -1 for none). */
void sl_drain_set_ctl(sl_pump_t *p, int fd);

/* Read what the supervisor sent on the control channel (SL_CTL_RESTART
 * sets restart). 0 when all is read, -1 at EOF or on an error: the
 * supervisor is gone. */
int sl_drain_ctl_read(sl_pump_t *p);

/* Send a control message of TYPE with the current counters. */
void sl_drain_ctl(sl_pump_t *p, uint32_t type);

/* The served count reached retire_at: ask once to be replaced. */
void sl_drain_retire_check(sl_pump_t *p);

/* SIGTERM: fail the health check at once, keep serving for
 * --shutdown-delay, then prepare. */
void sl_drain_begin(sl_pump_t *p);

/* Stop accepting, close idle connections, start the cadence. */
void sl_drain_prepare(sl_pump_t *p);

/* Done when nothing is active or the graceful timeout has passed; called by
 * the cadence (every 100 ms and the 1 Hz tick) and, through the pool's
 * changed(), once a connection is given back. */
void sl_drain_step(sl_pump_t *p);

/* Take over SIGTERM's handler (after libev set its own): a flag that a
 * response made while the loop is held can see, and a backstop timer that
 * ends the worker at --shutdown-delay + --graceful-timeout even if the app
 * holds the loop: 0.1 s later when the executor says it may hold the loop
 * (exec.h: holds_loop), 1 s later otherwise, where the loop keeps time
 * itself (and ASGI runs lifespan shutdown after the drain). */
void sl_drain_signals(sl_pump_t *p);

/* Should a response now say Connection: close? (draining, or TERM arrived
 * with no --shutdown-delay). Any thread. */
static inline bool sl_drain_closing(const sl_drain_t *d)
{
    return atomic_load_explicit(&d->draining, memory_order_relaxed) ||
           (d->term_seen && !d->shutdown_delay);
}

/* The request the loop thread itself is running (an on-loop executor;
 * NULL: none), for the backstop's log line. */
void sl_drain_note_running(const sl_exch_t *x);

/* SIGINT/SIGQUIT: close everything now and leave the loop. */
void sl_drain_fast(sl_pump_t *p);

#endif
