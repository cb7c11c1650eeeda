/* h1_ahead.c - HTTP/1.1 pipelining in pump mode: requests run ahead
 * (h1_ahead.h says how; docs/architecture.md, "Pipelining").
 */
#include "config.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "worker/loop/accesslog.h"
#include "worker/loop/conn.h"
#include "worker/loop/exec.h"
#include "worker/loop/h1_ahead.h"
#include "worker/loop/pump.h"

int sl_ahead_init(sl_pump_t *p)
{
    uint64_t n = (uint64_t)p->pool.nconns * SL_AHEAD_DEPTH;
    uint32_t max = p->exec->on_loop    ? 0
                   : n > SL_AHEAD_HARD ? SL_AHEAD_HARD
                                       : (uint32_t)n;

    return sl_slots_init(&p->aheads, max, p->h2s.base + p->h2s.max,
                         sizeof(sl_ahead_t));
}

void sl_ahead_destroy(sl_pump_t *p)
{
    sl_slots_destroy(&p->aheads);
}

/* A spare for C, or NULL when the worker has none left. */
static sl_ahead_t *spare_take(sl_conn_t *c)
{
    sl_ahead_t *s = (sl_ahead_t *)sl_slots_take(&c->pump->aheads);

    if (s == NULL)
        return NULL;
    s->next = NULL;
    s->x.conn = c;
    s->x.req.tls = c->x.req.tls;
    return s;
}

/* Give S back: no executor has it any more (or a parse left it unused). */
static void spare_put(sl_pump_t *p, sl_ahead_t *s)
{
    sl_exch_t *x = &s->x;

    sl_conn_free_req(x->conn, &x->req);
    pthread_mutex_lock(&x->mu);
    x->gen++; /* a call the app makes late finds a stale request */
    sl_exch_drop_tail_locked(x);
    sl_bufcache_put(&p->bufs, &x->body);
    sl_bufcache_put(&p->bufs, &x->out);
    sl_bufcache_put(&p->bufs, &x->resp_head);
    x->body_total = 0;
    x->body_done = false;
    x->resp_done = false;
    x->close_after = false;
    x->aborted = false;
    x->peer_gone = false;
    x->notified = false;
    x->body_paused = false;
    x->inflight = 0;
    x->picked = 0;
    x->resp_status = 0;
    x->resp_body = 0;
    pthread_mutex_unlock(&x->mu);
    memset(&x->req, 0, sizeof(x->req));
    s->orphan = false;
    sl_slots_put(&p->aheads, x);
}

/* The last request run ahead on C, or NULL. */
static sl_ahead_t *last_of(sl_conn_t *c)
{
    sl_ahead_t *s = c->h1.ahead;

    while (s != NULL && s->next != NULL)
        s = s->next;
    return s;
}

/* Hand S's request over, as conn_dispatch() does x's; it follows LAST
 * in C's queue (NULL: it is the first). */
static void dispatch(sl_conn_t *c, sl_ahead_t *last, sl_ahead_t *s)
{
    sl_pump_t *p = c->pump;
    sl_exch_t *x = &s->x;

    x->req.start = ev_now(p->loop);
    pthread_mutex_lock(&x->mu);
    x->gen++;
    x->body_done = true;
    x->wake_later = true; /* its answer waits for those before it */
    sl_conn_buf_ready(c, &x->out);
    if (sl_accesslog_wants_head(p->alog))
        sl_conn_buf_ready(c, &x->resp_head);
    pthread_mutex_unlock(&x->mu);
    if (last != NULL) {
        last->next = s;
    } else {
        c->h1.ahead = s;
        /* the request being served: its answer now waits for this one's
         * (the output's hold) */
        pthread_mutex_lock(&c->x.mu);
        c->x.wake_later = true;
        pthread_mutex_unlock(&c->x.mu);
    }
    c->nahead++;
    sl_exec_submit(p, x);
}

void sl_h1_ahead_run(sl_conn_t *c)
{
    sl_pump_t *p = c->pump;
    sl_ahead_t *s, *last;

    if (p->aheads.max == 0 || c->state != SL_CONN_SERVING || !c->h1.msg_done ||
        c->h1.http_error != 0 || sl_buf_pending(&c->rbuf) == 0 ||
        atomic_load(&p->drain.draining) || sl_exch_aborted(sl_conn_wx(c)))
        return;
    last = last_of(c);
    while (c->nahead < SL_AHEAD_DEPTH && p->npending < SL_AHEAD_PASS &&
           sl_buf_pending(&c->rbuf) > 0) {
        /* the request before it, too, must allow it */
        if (!sl_conn_may_run_ahead(last != NULL ? &last->x.req : &c->x.req))
            return;
        s = spare_take(c);
        if (s == NULL)
            return;
        if (sl_conn_parse_ahead(c, &s->x) != 1) {
            spare_put(p, s);
            return;
        }
        dispatch(c, last, s);
        last = s;
    }
}

bool sl_h1_ahead_next(sl_conn_t *c)
{
    if (c->h1.ahead == NULL)
        return false;
    c->ahead_writing = true; /* it stays first in the queue until its END */
    c->state = SL_CONN_SERVING;
    c->h1.head_done = true; /* its message is whole, parsed ahead */
    c->h1.msg_done = true;
    sl_output_begin(&c->tx);
    return true;
}

/* Y has ended: its request and response become x's (both mu held). */
static void move_into(sl_exch_t *x, sl_exch_t *y)
{
    sl_req_t rq = x->req;
    sl_buf_t b = x->resp_head;

    x->req = y->req;
    y->req = rq; /* what x kept of its last request, given back with y */
    x->resp_head = y->resp_head;
    y->resp_head = b;
    sl_tail_move(&x->tail, &y->tail);
    x->resp_status = y->resp_status;
    x->resp_body = y->resp_body;
    x->close_after = y->close_after;
    x->aborted = x->aborted || y->aborted;
    x->peer_gone = y->peer_gone;
    x->picked = y->picked;
    x->inflight = y->inflight;
    x->body_done = true;
    x->resp_done = true;
    x->notified = false;
    x->gen++; /* nothing of the request before may touch it now */
}

bool sl_h1_ahead_take(sl_conn_t *c)
{
    sl_ahead_t *s = c->h1.ahead;
    sl_exch_t *y = &s->x;

    pthread_mutex_lock(&y->mu);
    y->notified = false;
    if (sl_buf_pending(&y->out) > 0 && sl_conn_take_out(c, y) < 0) {
        /* out of memory: as conn_take() does, the executor stops and its
         * END closes the connection */
        y->aborted = true;
        sl_exch_wake(y);
    }
    if (!y->resp_done) {
        pthread_mutex_unlock(&y->mu);
        return false;
    }
    pthread_mutex_lock(&c->x.mu);
    move_into(&c->x, y);
    pthread_mutex_unlock(&c->x.mu);
    pthread_mutex_unlock(&y->mu);
    c->h1.ahead = s->next;
    c->nahead--;
    c->ahead_writing = false;
    spare_put(c->pump, s);
    return true;
}

void sl_h1_ahead_complete(sl_exch_t *x)
{
    sl_ahead_t *s = (sl_ahead_t *)x;
    sl_pump_t *p = x->conn->pump;
    bool done;

    if (s->orphan) {
        /* its connection closed while the executor had it: it is given
         * back at its END */
        pthread_mutex_lock(&x->mu);
        x->notified = false;
        sl_buf_reset(&x->out, SL_CONN_BUF_KEEP);
        done = x->resp_done;
        pthread_mutex_unlock(&x->mu);
        if (done) {
            p->inflight--;
            spare_put(p, s);
        }
        return;
    }
    /* one still waiting its turn keeps its output until then */
    if (sl_conn_wx(x->conn) == x)
        sl_conn_complete(x->conn);
}

/* Tell X the client is gone, or has closed its side. */
static void tell(sl_exch_t *x, bool aborted)
{
    pthread_mutex_lock(&x->mu);
    if (aborted)
        x->aborted = true;
    else
        x->peer_gone = true;
    sl_exch_wake(x);
    pthread_mutex_unlock(&x->mu);
}

void sl_h1_ahead_tell(sl_conn_t *c, bool aborted)
{
    sl_ahead_t *s;

    if (!c->ahead_writing)
        tell(&c->x, aborted);
    for (s = c->h1.ahead; s != NULL; s = s->next)
        tell(&s->x, aborted);
}

void sl_h1_ahead_drop(sl_conn_t *c)
{
    sl_pump_t *p = c->pump;
    sl_ahead_t *s, *next;
    bool done;

    for (s = c->h1.ahead; s != NULL; s = next) {
        next = s->next;
        pthread_mutex_lock(&s->x.mu);
        s->x.aborted = true;
        sl_exch_wake(&s->x);
        s->x.notified = false; /* its END must come here */
        done = s->x.resp_done;
        pthread_mutex_unlock(&s->x.mu);
        if (done) {
            p->inflight--;
            spare_put(p, s);
        } else {
            s->orphan = true;
        }
    }
    c->h1.ahead = NULL;
    c->nahead = 0;
    c->ahead_writing = false;
}
