/* drain.c - prepare / step / finish, driven by libev.
 *
 * The seed server's drain waited inside a callback and so blocked the very
 * requests it was waiting for. Here nothing waits: prepare changes state and
 * returns, a 100 ms timer (and the end of every request) calls step, and
 * step calls finish once the worker is idle or out of time. Every in-flight
 * response gets "Connection: close" because conn_finish_request() looks at
 * p->draining.
 */
#include "config.h"

#include "common/ctl.h"
#include "common/log.h"
#include "common/options.h"
#include "worker/asgi.h"
#include "worker/drain.h"

#define STEP_SECS 0.1

static void drain_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)w;
    (void)revents;
    sl_drain_step(ev_userdata(loop));
}

static void drain_finish(sl_pump_t *p, bool forced)
{
    ev_tstamp now = ev_now(p->loop);
    sl_conn_t *c, *next;

    /* first: connections released below must not step the drain again */
    p->stopping = true;
    ev_timer_stop(p->loop, &p->drain_timer);
    sl_asgi_finish(p); /* ASGI: cancel the request tasks still running */
    for (c = p->active.next; c != &p->active; c = next) {
        next = c->next;
        if (c->state == SL_CONN_SERVING || c->state == SL_CONN_WRITING)
            sl_warn("drain: abandoning request %s %.*s after %.1fs",
                    llhttp_method_name(c->req.method), (int)c->req.url_len,
                    c->req.hbuf.data + c->req.url_off, now - c->req.start);
        sl_conn_abort(c);
    }
    p->exit_status = forced ? SL_EXIT_FAIL : SL_EXIT_OK;
    ev_break(p->loop, EVBREAK_ALL);
}

static void delay_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)w;
    (void)revents;
    sl_drain_prepare(ev_userdata(loop));
}

void sl_drain_begin(sl_pump_t *p)
{
    if (p->terminating)
        return;
    p->terminating = true;
    if (p->opt->shutdown_delay <= 0) {
        sl_drain_prepare(p);
        return;
    }
    sl_info("TERM: serving %.1fs more before draining (--shutdown-delay)",
            p->opt->shutdown_delay);
    ev_timer_init(&p->delay_timer, delay_cb, p->opt->shutdown_delay, 0);
    ev_timer_start(p->loop, &p->delay_timer);
}

void sl_drain_prepare(sl_pump_t *p)
{
    sl_conn_t *c, *next;

    if (p->draining)
        return;
    ev_timer_stop(p->loop, &p->delay_timer);
    p->terminating = true;
    p->draining = true;
    p->drain_started = ev_now(p->loop);
    p->drain_deadline = p->drain_started + p->opt->graceful_timeout;
    sl_info("draining: %u connections open, %u requests in flight", p->nactive,
            p->inflight);
    sl_pump_stop_listening(p);
    sl_pump_ctl(p, SL_CTL_DRAINING);
    ev_timer_init(&p->drain_timer, drain_timer_cb, STEP_SECS, STEP_SECS);
    ev_timer_start(p->loop, &p->drain_timer);
    for (c = p->active.next; c != &p->active; c = next) {
        next = c->next;
        sl_conn_drain(c);
    }
    sl_drain_step(p);
}

/* Connections still worth waiting for: lingering closes are not. */
static uint32_t busy_conns(sl_pump_t *p)
{
    sl_conn_t *c;
    uint32_t n = 0;

    for (c = p->active.next; c != &p->active; c = c->next)
        n += c->state != SL_CONN_CLOSING;
    return n;
}

void sl_drain_step(sl_pump_t *p)
{
    if (!p->draining || p->stopping)
        return;
    if (p->inflight == 0 && busy_conns(p) == 0) {
        drain_finish(p, false);
        return;
    }
    if (ev_now(p->loop) >= p->drain_deadline) {
        sl_warn("graceful timeout (%.1fs) reached with %u requests in flight",
                p->opt->graceful_timeout, p->inflight);
        drain_finish(p, true);
    }
}

void sl_drain_fast(sl_pump_t *p)
{
    if (p->stopping)
        return;
    p->draining = true;
    p->drain_started = ev_now(p->loop);
    p->drain_deadline = p->drain_started;
    sl_pump_stop_listening(p);
    drain_finish(p, p->inflight > 0);
}
