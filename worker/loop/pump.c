/* pump.c - the loop thread: listeners, the pool, passes, housekeeping.
 *
 * Each libev pass reads and parses whatever is ready; heads that complete
 * during the pass are collected in `pending` and pushed to the executor in
 * one batch from the ev_prepare watcher, just before the loop would block.
 * Completions come back through `done` and one ev_async; the async callback
 * applies them all. One batch each way per pass is the whole point: at high
 * concurrency a wake-up is shared by many requests.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/ctl.h"
#include "common/date.h"
#include "common/log.h"
#include "common/metrics.h"
#include "worker/loop/conn_ws.h"
#include "worker/loop/drain.h"
#include "worker/loop/h1.h"
#include "worker/loop/listen.h"
#include "worker/loop/pool.h"
#include "worker/loop/pump.h"
#include "worker/loop/tlsmod.h"

/* ------------------------------------------------------------------ */
/* passes                                                             */

/* The pool's changed() (pool.h): listen again when there is room; a
 * connection given back during the drain steps it, once this callback is
 * over, not from inside it (the caller may be walking the connection
 * list). */
static void pool_changed(sl_pool_t *pool, bool released)
{
    sl_pump_t *p = (sl_pump_t *)((char *)pool - offsetof(sl_pump_t, pool));

    sl_listen_room(p, released);
    if (released && p->drain.draining && !p->drain.stopping)
        ev_feed_event(p->loop, &p->drain.timer, EV_TIMER);
}

/* Give the executor this pass's tickets. The batch moves to its own array
 * first: an executor on the loop thread may queue new tickets while it
 * handles these, and those belong to the next batch. */
static void hand_over(sl_pump_t *p)
{
    sl_ticket_t *batch;
    uint32_t n;

    /* HTTP/2 sessions that completions touched: one write each for the
     * pass (it may dispatch streams: their tickets go below) */
    if (p->h2dirty != NULL)
        sl_h2_flush(p);
    batch = p->pending;
    n = p->npending;

    if (n == 0)
        return;
    p->pending = p->handing;
    p->handing = batch;
    p->npending = 0;
    p->exec->hand_over(p, batch, n);
}

/* The gauges a scrape reads, as the pass leaves them: a few stores. */
static void metrics_gauges(const sl_pump_t *p)
{
    sl_metrics_slot_t *m = sl_metrics_self;
    /* an ASGI worker's one asyncio lane is busy while anything runs */
    uint32_t lanes = p->lanes > 0 ? (uint32_t)p->lanes : 1;

    sl_metrics_set(&m->conns_open, p->pool.nactive);
    sl_metrics_set(&m->inflight, p->inflight);
    sl_metrics_set(&m->lanes, lanes);
    sl_metrics_set(&m->lanes_busy, p->inflight < lanes ? p->inflight : lanes);
}

static void flush_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    sl_pump_t *p = ev_userdata(loop);

    (void)w;
    (void)revents;
    hand_over(p);
    metrics_gauges(p);
}

static void wake_cb(struct ev_loop *loop, ev_async *w, int revents)
{
    sl_pump_t *p = ev_userdata(loop);
    sl_ticket_t batch[256];
    uint32_t i, n;

    (void)w;
    (void)revents;
    while ((n = sl_queue_pop_all(&p->done, batch, 256)) > 0) {
        for (i = 0; i < n; i++) {
            sl_conn_t *c;
            if (sl_pump_exch_kind(p, batch[i].idx) != SL_EXCH_CONN) {
                sl_exec_complete(sl_pump_exch(p, batch[i].idx));
                continue;
            }
            c = &p->pool.conns[batch[i].idx];
            if (c->state != SL_CONN_FREE)
                sl_conn_complete(c);
        }
    }
}

/* exec.h: here, where both kinds of exchange are known (a connection's,
 * and a stream's, h2.h), above both. */
void sl_exec_complete(sl_exch_t *x)
{
    switch (sl_pump_exch_kind(x->conn->pump, x->id)) {
    case SL_EXCH_AHEAD:
        sl_h1_ahead_complete(x);
        break;
    case SL_EXCH_STREAM:
        sl_h2_complete(x);
        break;
    default:
        if (x->conn->state != SL_CONN_FREE)
            sl_conn_complete(x->conn);
    }
}

static void tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    sl_pump_t *p = ev_userdata(loop);
    ev_tstamp now = ev_now(loop), late;
    sl_conn_t *c, *next;

    (void)w;
    (void)revents;
    sl_date_update();
    /* A late tick means the loop was held (an inline app, a stop in a
     * debugger): that time was nobody's idleness, so deadlines move with it
     * and bytes waiting in the kernel get read before anyone times out. */
    late = p->last_tick > 0 ? now - p->last_tick - 1.0 : 0;
    if (p->last_tick > 0)
        sl_metrics_observe(&sl_metrics_self->lag, late);
    p->last_tick = now;
    sl_metrics_set(&sl_metrics_self->ws_open, sl_conn_ws_count(p));
    sl_metrics_set(&sl_metrics_self->h2_conns_open, p->h2sessions);
    sl_metrics_set(&sl_metrics_self->h2_streams_open, p->h2live);
    metrics_gauges(p);
    for (c = p->pool.active.next; c != &p->pool.active; c = next) {
        next = c->next;
        if (late > 0.25 && c->deadline > 0)
            c->deadline += late;
        sl_conn_sweep(c, now);
    }
    if (!p->drain.draining)
        sl_drain_ctl(p, SL_CTL_HEARTBEAT);
    if (p->drain.draining)
        sl_drain_step(p);
}

/* ------------------------------------------------------------------ */

/* The descriptor the next open() would get: where ev_loop_new() will put
 * its epoll instance. -1 when none can be opened. */
static int lowest_free_fd(void)
{
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

    if (fd >= 0)
        close(fd);
    return fd;
}

/* libev has no call that returns its backend fd, which a loop that drives
 * the pump from its own needs (to know when a pass is due). With the epoll
 * backend, ev_loop_new() opens exactly one descriptor, the epoll instance,
 * and it opens it first; at init nothing else runs that could take PROBE,
 * the slot it will have used. Checked: PROBE must be an epoll instance. */
static int backend_fd(struct ev_loop *loop, int probe)
{
    struct epoll_event ev = {.events = EPOLLIN};
    int efd, rc;

    if (probe < 0 || ev_backend(loop) != EVBACKEND_EPOLL)
        return -1;
    efd = eventfd(0, EFD_CLOEXEC);
    if (efd < 0)
        return -1;
    rc = epoll_ctl(probe, EPOLL_CTL_ADD, efd, &ev);
    if (rc == 0)
        epoll_ctl(probe, EPOLL_CTL_DEL, efd, &ev);
    close(efd);
    return rc == 0 ? probe : -1;
}

int sl_pump_init(sl_pump_t *p, const sl_options_t *o, const sl_exec_t *exec,
                 const int *fds, int nfds)
{
    int probe;

    memset(p, 0, sizeof(*p));
    if (nfds > SL_MAX_LISTENERS) {
        sl_error("handed %d listening sockets: the most is %d", nfds,
                 SL_MAX_LISTENERS);
        return -1;
    }
    p->opt = o;
    p->exec = exec;
    probe = lowest_free_fd();
    p->loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
    if (p->loop == NULL) {
        sl_error("ev_loop_new() failed");
        return -1;
    }
    ev_set_userdata(p->loop, p);
    p->backend_fd = backend_fd(p->loop, probe);
    sl_date_update();

    if (sl_pool_init(&p->pool, (uint32_t)o->worker_connections, p->loop) < 0 ||
        sl_h2_streams_init(p) < 0 || sl_ahead_init(p) < 0) {
        sl_error("out of memory for %u connections", p->pool.nconns);
        return -1;
    }
    /* a submit and a wake per exchange at most in one pass */
    p->npending_cap = sl_pump_exch_max(p) * 2;
    p->pending = malloc(p->npending_cap * sizeof(sl_ticket_t));
    p->handing = malloc(p->npending_cap * sizeof(sl_ticket_t));
    if (p->pending == NULL || p->handing == NULL) {
        sl_error("out of memory for %u connections", p->pool.nconns);
        return -1;
    }
    p->pool.changed = pool_changed;
    if (sl_queue_init(&p->work, p->pool.nconns * 2 + sl_pump_exch_max(p) * 2) <
            0 ||
        sl_queue_init(&p->done, p->pool.nconns * 2 + sl_pump_exch_max(p) * 2) <
            0) {
        sl_error("out of memory for the executor queues");
        return -1;
    }
    sl_listen_init(p, fds, nfds);
    sl_holdq_init(&p->holdq, p->loop, SL_CONN_HOLD_SECS, sl_h1_unhold);
    ev_async_init(&p->wake, wake_cb);
    ev_async_start(p->loop, &p->wake);
    ev_prepare_init(&p->flush, flush_cb);
    ev_prepare_start(p->loop, &p->flush);
    ev_timer_init(&p->tick, tick_cb, 1.0, 1.0);
    ev_timer_start(p->loop, &p->tick);
    sl_drain_init(p);
    if (sl_accesslog_open(&p->alog, p->loop, o) < 0)
        return -1;
    p->lanes = exec->shares_lane ? 0 : o->threads;
    return 0;
}

void sl_pump_start(sl_pump_t *p)
{
    sl_listen_start(p, true);
}

int sl_pump_run(sl_pump_t *p)
{
    sl_pump_start(p);
    ev_run(p->loop, 0);
    return p->drain.exit_status;
}

bool sl_pump_run_once(sl_pump_t *p)
{
    /* what was started before the pass is applied as it begins; what its
     * callbacks start sets this again */
    p->unsettled = false;
    ev_run(p->loop, EVRUN_NOWAIT);
    /* what the pass's callbacks queued would wait for the next pass's
     * prepare, which only comes when the driver runs us again */
    hand_over(p);
    return !p->drain.stopping;
}

bool sl_pump_settled(const sl_pump_t *p)
{
    return !p->unsettled;
}

void sl_pump_destroy(sl_pump_t *p)
{
    uint32_t i;

    if (p->pool.conns != NULL) {
        for (i = 0; i < p->pool.nfresh; i++) {
            sl_conn_t *c = &p->pool.conns[i];
            sl_transport_close(&c->tp);
            sl_conn_ws_free(c);
            sl_conn_free_bufs(c);
        }
    }
    sl_bufcache_clear(&p->bufs);
    sl_accesslog_close(p->alog);
    p->alog = NULL;
    sl_pool_destroy(&p->pool);
    sl_h2_streams_destroy(p);
    sl_ahead_destroy(p);
    free(p->pending);
    free(p->handing);
    sl_queue_destroy(&p->work);
    sl_queue_destroy(&p->done);
    if (p->tls_ctx != NULL)
        p->tls->ctx_free(p->tls_ctx);
    p->tls_ctx = NULL;
    if (p->loop != NULL)
        ev_loop_destroy(p->loop);
}
