/* exec.h - the executor interface: what the loop side asks of whoever runs
 * the application.
 *
 * The loop side (pump, connections, drain) never knows whether WSGI or ASGI
 * is served, nor whether the app runs on lane threads or on the loop thread
 * itself. It knows one table of operations, chosen once at worker start
 * (worker/worker.c picks one of four: WSGI lanes, WSGI inline, ASGI lane,
 * ASGI inline) and reached through p->exec. This is the one place where the
 * four differ; everything downstream asks the table, never "which one".
 *
 * Two families share most of their operations, and the loop side offers
 * those shared implementations below:
 *   - handoff executors run the app on other threads: the pass's tickets go
 *     to the work queue, output comes back through the pump's inbox;
 *   - on-loop executors (inline mode) run the app on the loop thread: run()
 *     is called straight from the connection, and blocking waits become
 *     loops over the socket (worker/loop/inline.c).
 */
#ifndef SL_EXEC_H
#define SL_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/queue.h"

typedef struct sl_pump sl_pump_t;
typedef struct sl_exch sl_exch_t;

typedef struct sl_exec {
    const char *name; /* "pump" or "inline", for the log */

    /* The app runs on the loop thread (inline mode): a complete head is
     * run at once (run), never submitted as a ticket, and a pipelining
     * client's answers need no timer to bound their hold (the next one
     * is written before the loop waits again). */
    bool on_loop;

    /* The app runs on the loop thread and may hold it for a whole request
     * (WSGI inline): the drain's backstop must fire close to the graceful
     * timeout, since the loop cannot keep time itself meanwhile. */
    bool holds_loop;

    /* The executor serves WebSockets (conn_ws.h): the loop checks upgrade
     * handshakes and submits them. Otherwise an upgrade reaches the app as
     * an ordinary request and the connection closes after the response. */
    bool websocket;

    /* Take this pass's tickets (SL_TICKET_SUBMIT, SL_TICKET_WAKE), at the
     * end of the pass; T is only valid during the call. Loop thread. */
    void (*hand_over)(sl_pump_t *p, const sl_ticket_t *t, uint32_t n);

    /* The executor queued something for the loop on X (output, END, a body
     * window to reopen). Called by the executor side with x->mu held. */
    void (*notify)(sl_exch_t *x);

    /* Something the executor waits for on X may have changed (body bytes,
     * credit, the client leaving). Loop thread, x->mu held, x->waiting set. */
    void (*wake)(sl_exch_t *x);

    /* Block until X's request may have what SL_AWAIT_* WHAT asks for; x->mu
     * held (released while waiting). 0, or -1: stop waiting, the client is
     * gone. Never called by executors that cannot block (ASGI). */
    int (*wait)(sl_exch_t *x, int what);

    /* The executor needs the loop to look at X soon: it is about to wait
     * for something there without blocking (sl_exch_await() said 1, no
     * WebSocket message yet), or it changed X by a call that may not have
     * notified (one refused as stale). An executor on the loop thread must
     * have the loop run for it; for one on a thread of its own the loop
     * runs anyway (sl_exec_loop_runs_anyway()). Executor side, x->mu not
     * held. */
    void (*need_loop)(sl_exch_t *x);

    /* Give back OWNER, of bytes lent by sl_exch_sendmem(), once they are
     * written or dropped. Loop thread, any locks held (x->mu among them):
     * it must only note the owner for later. */
    void (*release)(void *owner);

    /* On-loop executors (on_loop): run X's request now, on the loop
     * thread. Not called for handoff executors, whose requests are
     * submitted as tickets. */
    void (*run)(sl_exch_t *x);

    /* Drain finish: cancel what still runs (its clients are being closed).
     * Loop thread. */
    void (*finish)(sl_pump_t *p);

    /* One lane runs many requests at once (an event loop): the metrics
     * count one lane, and the supervisor's hang check counts none, since a
     * long request there is no stuck lane. */
    bool shares_lane;

    /* Worker life, not the loop side: take APP (the app object, borrowed;
     * opaque here) and set up what serves it (WSGI's environ prototype,
     * ASGI's context), before start. 0 or -1 (logged). */
    int (*adopt)(sl_pump_t *p, void *app);

    /* Worker life. Start serving P (the lanes, or the event loop and the
     * lifespan startup), the app adopted: 0 or -1 (logged). */
    int (*start)(sl_pump_t *p);

    /* The worker's exit status when start fails: SL_EXIT_APPLOAD when it
     * ran the app's own start-up (ASGI lifespan), which the supervisor
     * must not answer with a tight respawn loop; else SL_EXIT_FAIL. */
    int start_failed_exit;

    /* Worker life: what the worker's "serving" line says of P's executor
     * ("pump mode, 4 lanes", "ASGI on uvloop, inline mode") into BUF. */
    void (*describe)(sl_pump_t *p, char *buf, size_t n);

    /* Worker life: run P's loop until the drain ends; its exit status.
     * What it released for the lanes (the GIL's thread state) is left in
     * *RELEASED for the worker to take back once they stopped (NULL:
     * nothing was released). */
    int (*serve)(sl_pump_t *p, void **released);

    /* After the loop ended (worker life, not the loop side): stop taking
     * work and wait up to TIMEOUT seconds for what still runs. Returns how
     * many lanes are still inside the app. */
    int (*stop)(sl_pump_t *p, double timeout);
} sl_exec_t;

/* ---- the two queues between the loop and the executor ---- */

/* Loop side: queue a ticket of KIND for C, sent with this pass's batch
 * (exec->hand_over, at the end of the pass). */
void sl_exec_queue_ticket(sl_pump_t *p, sl_exch_t *x, uint32_t kind);

/* Loop side: hand X's request to the executor (a SL_TICKET_SUBMIT). */
void sl_exec_submit(sl_pump_t *p, sl_exch_t *x);

/* Executor side: X has something for the loop: it goes to the pump's
 * inbox, and the loop wakes. Thread-safe. */
void sl_exec_post(sl_pump_t *p, sl_exch_t *x);

/* On-loop executors: apply now what the executor queued for X (its
 * connection's completion), unless the connection closed meanwhile. Loop
 * thread. */
void sl_exec_complete(sl_exch_t *x);

/* ---- shared implementations ---- */

/* hand_over for lane threads: push the tickets to p->work. */
void sl_exec_hand_over_queue(sl_pump_t *p, const sl_ticket_t *t, uint32_t n);

/* notify for handoff executors: X goes to the pump's inbox once per
 * completion (thread-safe; coalesced by x->notified). Under
 * sl_exch_lock() the loop's wake-up waits for sl_exch_unlock(). */
void sl_exec_notify_handoff(sl_exch_t *x);

/* x->mu, taken and given back by an executor's thread. A completion
 * posted meanwhile wakes the loop thread only after the unlock: woken
 * while the mutex is held, the loop (on the same CPU it preempts the
 * executor) would find it taken, sleep on it and be woken again, two
 * more futex calls and two more switches per completion. */
void sl_exch_lock(sl_exch_t *x);
void sl_exch_unlock(sl_exch_t *x);

/* A hold for a run of work on the executor's thread (ON true, then
 * false), the ASGI lane's batch of first steps: a completion posted
 * meanwhile for an exchange whose answer waits for others' anyway
 * (x->wake_later: pipelining) wakes the loop only at the end, one
 * wake-up for the batch; woken at each, the loop (on the same CPU)
 * would preempt the batch, take a few answers and sleep again. Any
 * other completion wakes it as without the hold, so no answer that
 * could leave waits for the rest of the batch. */
void sl_exec_hold_wake(bool on);

/* wake for executors that sleep in sl_exec_wait_cv() (WSGI lanes). */
void sl_exec_wake_cv(sl_exch_t *x);

/* wake for executors that await (ASGI): a SL_TICKET_WAKE for X travels
 * with this pass's batch. */
void sl_exec_wake_ticket(sl_exch_t *x);

/* wait for lane threads: sleep on the thread's own condition variable,
 * named in x->waiter, until woken. */
int sl_exec_wait_cv(sl_exch_t *x, int what);

/* wait for executors that never block: refuses (-1). */
int sl_exec_wait_never(sl_exch_t *x, int what);

/* finish for executors with nothing to cancel. */
void sl_exec_finish_nothing(sl_pump_t *p);

/* need_loop for executors on a thread of their own (or that block on the
 * socket instead, WSGI inline): the loop runs anyway. */
void sl_exec_loop_runs_anyway(sl_exch_t *x);

#endif
