/* exec.c - the executor operations that several executors share.
 *
 * Handoff executors (lane threads) differ only in how they sleep: a WSGI
 * lane blocks on the connection's condition variable, an ASGI lane awaits a
 * future that a wake ticket resolves. Both take their work from p->work and
 * give output back through the pump's inbox, so those parts live here once.
 */
#include "config.h"

#include "common/log.h"
#include "worker/loop/conn.h"
#include "worker/loop/exec.h"
#include "worker/loop/pump.h"

/* ---- the two queues between the loop and the executor ---- */

void sl_exec_queue_ticket(sl_pump_t *p, sl_exch_t *x, uint32_t kind)
{
    sl_ticket_t *t;

    if (p->npending == p->npending_cap) {
        sl_error("executor batch overflow: dropping a ticket for conn %u",
                 x->id);
        return;
    }
    t = &p->pending[p->npending++];
    t->idx = x->id;
    t->gen = x->gen;
    t->kind = kind;
}

void sl_exec_submit(sl_pump_t *p, sl_exch_t *x)
{
    sl_exec_queue_ticket(p, x, SL_TICKET_SUBMIT);
    p->inflight++;
}

/* The executor thread's sl_exch_lock() depth and sl_exec_hold_wake()
 * depth, the pump whose loop a post made under them has yet to wake, and
 * whether one of those posts was for an answer that can leave now. */
static __thread int held;
static __thread int batch;
static __thread sl_pump_t *wake_due;
static __thread bool urgent;

static void wake_now(void)
{
    sl_pump_t *p = wake_due;

    if (p != NULL) {
        wake_due = NULL;
        urgent = false;
        ev_async_send(p->loop, &p->wake);
    }
}

/* Wake it unless a lock is held, or a batch is and nothing is urgent. */
static void wake_loop(void)
{
    if (held == 0 && (batch == 0 || urgent))
        wake_now();
}

void sl_exec_post(sl_pump_t *p, sl_exch_t *x)
{
    sl_ticket_t t = {.idx = x->id, .gen = x->gen};

    sl_queue_push(&p->done, &t, 1);
    wake_due = p;
    if (!x->wake_later)
        urgent = true;
    wake_loop();
}

void sl_exch_lock(sl_exch_t *x)
{
    pthread_mutex_lock(&x->mu);
    held++;
}

void sl_exch_unlock(sl_exch_t *x)
{
    pthread_mutex_unlock(&x->mu);
    held--;
    wake_loop();
}

void sl_exec_hold_wake(bool on)
{
    batch += on ? 1 : -1;
    wake_loop();
}

/* ---- shared implementations ---- */

void sl_exec_hand_over_queue(sl_pump_t *p, const sl_ticket_t *t, uint32_t n)
{
    if (sl_queue_push(&p->work, t, n) < 0)
        sl_error("executor queue overflow: %u tickets", n);
}

void sl_exec_notify_handoff(sl_exch_t *x)
{
    if (x->notified)
        return;
    x->notified = true;
    sl_exec_post(x->conn->pump, x);
}

/* The condition variable a lane thread waits on, whatever connection it
 * waits for: a thread waits for one at a time, always with that
 * connection's mu. */
static __thread pthread_cond_t lane_cv = PTHREAD_COND_INITIALIZER;

void sl_exec_wake_cv(sl_exch_t *x)
{
    if (x->waiter != NULL)
        pthread_cond_signal(x->waiter);
}

void sl_exec_wake_ticket(sl_exch_t *x)
{
    x->waiting = false;
    sl_exec_queue_ticket(x->conn->pump, x, SL_TICKET_WAKE);
}

int sl_exec_wait_cv(sl_exch_t *x, int what)
{
    (void)what;
    wake_now(); /* what it posted before it sleeps */
    x->waiting = true;
    x->waiter = &lane_cv;
    pthread_cond_wait(&lane_cv, &x->mu);
    x->waiter = NULL;
    x->waiting = false;
    return 0;
}

int sl_exec_wait_never(sl_exch_t *x, int what)
{
    (void)x;
    sl_error("executor error: a blocking wait (%d) from an executor that "
             "must not block",
             what);
    return -1;
}

void sl_exec_finish_nothing(sl_pump_t *p)
{
    (void)p;
}

void sl_exec_loop_runs_anyway(sl_exch_t *x)
{
    (void)x;
}
