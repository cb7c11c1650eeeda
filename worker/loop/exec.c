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

void sl_exec_queue_ticket(sl_pump_t *p, sl_conn_t *c, uint32_t kind)
{
    sl_ticket_t *t;

    if (p->npending == p->npending_cap) {
        sl_error("executor batch overflow: dropping a ticket for conn %u",
                 c->idx);
        return;
    }
    t = &p->pending[p->npending++];
    t->idx = c->idx;
    t->gen = c->gen;
    t->kind = kind;
}

void sl_exec_submit(sl_pump_t *p, sl_conn_t *c)
{
    sl_exec_queue_ticket(p, c, SL_TICKET_SUBMIT);
    p->inflight++;
}

void sl_exec_post(sl_pump_t *p, sl_conn_t *c)
{
    sl_ticket_t t = {.idx = c->idx, .gen = c->gen};

    sl_queue_push(&p->done, &t, 1);
    ev_async_send(p->loop, &p->wake);
}

/* ---- shared implementations ---- */

void sl_exec_hand_over_queue(sl_pump_t *p, const sl_ticket_t *t, uint32_t n)
{
    if (sl_queue_push(&p->work, t, n) < 0)
        sl_error("executor queue overflow: %u tickets", n);
}

void sl_exec_notify_handoff(sl_conn_t *c)
{
    if (c->notified)
        return;
    c->notified = true;
    sl_exec_post(c->pump, c);
}

/* The condition variable a lane thread waits on, whatever connection it
 * waits for: a thread waits for one at a time, always with that
 * connection's mu. */
static __thread pthread_cond_t lane_cv = PTHREAD_COND_INITIALIZER;

void sl_exec_wake_cv(sl_conn_t *c)
{
    if (c->waiter != NULL)
        pthread_cond_signal(c->waiter);
}

void sl_exec_wake_ticket(sl_conn_t *c)
{
    c->waiting = false;
    sl_exec_queue_ticket(c->pump, c, SL_TICKET_WAKE);
}

int sl_exec_wait_cv(sl_conn_t *c, int what)
{
    (void)what;
    c->waiting = true;
    c->waiter = &lane_cv;
    pthread_cond_wait(&lane_cv, &c->mu);
    c->waiter = NULL;
    c->waiting = false;
    return 0;
}

int sl_exec_wait_never(sl_conn_t *c, int what)
{
    (void)c;
    sl_error("executor error: a blocking wait (%d) from an executor that "
             "must not block",
             what);
    return -1;
}

void sl_exec_finish_nothing(sl_pump_t *p)
{
    (void)p;
}

void sl_exec_loop_runs_anyway(sl_conn_t *c)
{
    (void)c;
}
