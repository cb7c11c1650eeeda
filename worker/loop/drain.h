/* drain.h - a worker's shutdown, split so the loop never blocks in it:
 * prepare (stop taking work), step (is it over yet?), finish (log, close,
 * exit status). Loop thread only. */
#ifndef SL_DRAIN_H
#define SL_DRAIN_H

#include "worker/loop/pump.h"

/* SIGTERM: fail the health check at once, keep serving for
 * --shutdown-delay, then prepare. */
void sl_drain_begin(sl_pump_t *p);

/* Stop accepting, close idle connections, start the cadence. */
void sl_drain_prepare(sl_pump_t *p);

/* Done when nothing is active or the graceful timeout has passed; called by
 * the cadence and whenever a request or connection ends. */
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
bool sl_drain_closing(const sl_pump_t *p);

/* The request the loop thread itself is running (an on-loop executor;
 * NULL: none), for the backstop's log line. */
void sl_drain_note_running(const sl_conn_t *c);

/* SIGINT/SIGQUIT: close everything now and leave the loop. */
void sl_drain_fast(sl_pump_t *p);

#endif
