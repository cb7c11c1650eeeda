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
#include "worker/loop/pump.h"

#define ACCEPT_BATCH 64
/* Idle connections looked at, at most, to find one to evict for a new
 * connection: one whose next request is already on the wire is skipped. */
#define EVICT_TRIES 16

static void accept_unpause(sl_pump_t *p);

/* ------------------------------------------------------------------ */
/* listeners and the pool                                             */

static void listeners_start(sl_pump_t *p, bool on)
{
    int i;

    if (p->accepting == on)
        return;
    p->accepting = on;
    for (i = 0; i < p->nlisteners; i++) {
        if (p->listeners[i].fd < 0)
            continue;
        if (on)
            sl_pump_io_start(p, &p->listeners[i].io);
        else
            ev_io_stop(p->loop, &p->listeners[i].io);
    }
}

void sl_pump_stop_listening(sl_pump_t *p)
{
    int i;

    listeners_start(p, false);
    accept_unpause(p);
    for (i = 0; i < p->nlisteners; i++) {
        if (p->listeners[i].fd >= 0) {
            close(p->listeners[i].fd);
            p->listeners[i].fd = -1;
        }
    }
}

/* ------------------------------------------------------------------ */
/* running out: descriptors (pause), slots (evict the longest idle)   */

/* Whether a pool entry can be had without closing an idle connection. */
static bool have_free(const sl_pump_t *p)
{
    return p->free_list != NULL || p->nfresh < p->nconns;
}

/* A free pool entry (have_free() said there is one): one given back, else
 * the next that was never used, set up now. Taking the used ones first
 * keeps the pages touched as few as the peak of connections needs. NULL
 * after logging when a fresh one cannot be set up. */
static sl_conn_t *take_free(sl_pump_t *p)
{
    sl_conn_t *c = p->free_list;

    if (c != NULL) {
        p->free_list = c->next;
        return c;
    }
    c = &p->conns[p->nfresh];
    if (sl_conn_init(c, p, p->nfresh) < 0) {
        sl_error("cannot set up connection %u of the pool", p->nfresh);
        return NULL;
    }
    p->nfresh++;
    return c;
}

/* Listen again, unless something says not to: the drain, a pause, or a
 * pool with no free slot and no idle connection to give one up. */
static void listeners_resume(sl_pump_t *p)
{
    if (p->accepting || p->drain.draining || p->accept_paused)
        return;
    if (!have_free(p) && p->idle_tail == NULL)
        return;
    listeners_start(p, true);
}

static void accept_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    sl_pump_t *p = ev_userdata(loop);

    (void)w;
    (void)revents;
    p->accept_paused = false;
    listeners_resume(p);
}

/* accept4() on L failed with ERR for want of descriptors or memory: the
 * connection stays queued and the listener ready, so trying again now
 * would spin. Stop listening for a moment (SL_ACCEPTLIMIT_PAUSE), or until
 * one of our connections closes (sl_pump_release()). */
static void accept_pause(sl_pump_t *p, sl_pump_listener_t *l, int err)
{
    char who[32];

    snprintf(who, sizeof(who), "listener fd %d", l->fd);
    sl_acceptlimit_log(&p->accept_limit, ev_now(p->loop), err, who, true);
    listeners_start(p, false);
    if (p->drain.draining)
        return; /* the listeners close now; nothing to resume */
    p->accept_paused = true;
    ev_timer_set(&p->accept_timer, SL_ACCEPTLIMIT_PAUSE, 0);
    ev_timer_start(p->loop, &p->accept_timer);
}

static void accept_unpause(sl_pump_t *p)
{
    if (!p->accept_paused)
        return;
    p->accept_paused = false;
    ev_timer_stop(p->loop, &p->accept_timer);
}

void sl_pump_idle_add(sl_pump_t *p, sl_conn_t *c)
{
    if (c->idle_prev != NULL || p->idle_head == c)
        return;
    c->idle_prev = NULL;
    c->idle_next = p->idle_head;
    if (p->idle_head != NULL)
        p->idle_head->idle_prev = c;
    else
        p->idle_tail = c;
    p->idle_head = c;
    p->nidle++;
    /* a full pool stopped the listeners: this one can make room */
    listeners_resume(p);
}

void sl_pump_idle_remove(sl_pump_t *p, sl_conn_t *c)
{
    if (c->idle_prev == NULL && p->idle_head != c)
        return;
    if (c->idle_prev != NULL)
        c->idle_prev->idle_next = c->idle_next;
    else
        p->idle_head = c->idle_next;
    if (c->idle_next != NULL)
        c->idle_next->idle_prev = c->idle_prev;
    else
        p->idle_tail = c->idle_prev;
    c->idle_next = c->idle_prev = NULL;
    p->nidle--;
}

/* Is C's next request already on its way (bytes we have not read, in its
 * transport or the kernel)? Then closing it would reset that request: not
 * a victim. */
static bool request_waiting(sl_conn_t *c)
{
    return sl_transport_waiting(&c->tp);
}

/* The pool is used up: the longest-idle keep-alive connection, to close
 * for a new one, or NULL. A client whose next request is on the wire (or
 * that left: EOF) is not one: it is dropped from the list and read in this
 * pass. Looks at EVICT_TRIES at most; the ones passed over leave the list,
 * so the next call goes on from there. */
static sl_conn_t *idle_victim(sl_pump_t *p)
{
    sl_conn_t *c;
    unsigned tries;

    for (tries = 0; p->idle_tail != NULL && tries < EVICT_TRIES; tries++) {
        c = p->idle_tail;
        /* the list is kept by conn.c; a stale entry is only dropped */
        if (c->state != SL_CONN_READING || c->in_msg ||
            sl_buf_pending(&c->rbuf) > 0) {
            sl_pump_idle_remove(p, c);
            continue;
        }
        if (request_waiting(c)) {
            sl_pump_idle_remove(p, c);
            ev_feed_fd_event(p->loop, c->tp.fd, EV_READ);
            continue;
        }
        return c;
    }
    return NULL;
}

/* Accept up to MAX connections from L; false once its queue is empty (or
 * accepting had to stop). */
static bool accept_some(sl_pump_t *p, sl_pump_listener_t *l, unsigned max)
{
    struct ev_loop *loop = p->loop;
    struct sockaddr_storage ss;
    socklen_t len;
    sl_conn_t *c, *victim;
    unsigned i;
    int fd, one = 1;

    for (i = 0; i < max && (have_free(p) || p->idle_tail != NULL); i++) {
        /* the victim is chosen first and closed only once accept4() gave
         * a connection: with several workers on one socket, another may
         * have taken it */
        victim = have_free(p) ? NULL : idle_victim(p);
        if (!have_free(p) && victim == NULL)
            continue; /* none among EVICT_TRIES: look on, until the list
                         is empty (the loop's test) */
        len = sizeof(ss);
        fd = accept4(l->fd, (struct sockaddr *)&ss, &len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return false;
            if (sl_acceptlimit_transient(errno))
                continue;
            /* out of descriptors or memory, or a broken listener: either
             * way the next try fails alike */
            accept_pause(p, l, errno);
            return false;
        }
        if (victim != NULL) {
            if (!p->evict_told)
                sl_warn("all %u connections (--worker-connections) are in "
                        "use: closing the longest-idle keep-alive ones to "
                        "make room (told once; counted in "
                        "sluice_idle_evictions_total)",
                        p->nconns);
            p->evict_told = true;
            sl_metrics_add(&sl_metrics_self->idle_evictions, 1);
            sl_conn_close(victim);
        }
        if (!l->unix_sock)
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c = take_free(p);
        if (c == NULL) {
            close(fd);
            continue;
        }
        c->next = p->active.next;
        c->prev = &p->active;
        p->active.next->prev = c;
        p->active.next = c;
        p->nactive++;
        sl_metrics_add(&sl_metrics_self->conns_accepted, 1);
        sl_conn_start(c, fd, (int)(l - p->listeners), (struct sockaddr *)&ss,
                      len);
        if (c->state != SL_CONN_FREE)
            ev_feed_fd_event(loop, fd, EV_READ);
    }
    if (!have_free(p) && p->idle_tail == NULL)
        listeners_start(p, false);
    return have_free(p) || p->idle_tail != NULL;
}

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)revents;
    accept_some(ev_userdata(loop), (sl_pump_listener_t *)w, ACCEPT_BATCH);
}

void sl_pump_accept_pending(sl_pump_t *p)
{
    int i;

    for (i = 0; i < p->nlisteners; i++)
        if (p->listeners[i].fd >= 0)
            while (accept_some(p, &p->listeners[i], ACCEPT_BATCH))
                ;
}

void sl_pump_release(sl_pump_t *p, sl_conn_t *c)
{
    sl_transport_close(&c->tp);
    c->state = SL_CONN_FREE;
    c->deadline = 0;
    sl_pump_idle_remove(p, c);
    c->prev->next = c->next;
    c->next->prev = c->prev;
    c->next = p->free_list;
    c->prev = NULL;
    p->free_list = c;
    p->nactive--;
    /* a descriptor is free again: a pause has done its work */
    accept_unpause(p);
    listeners_resume(p);
    /* step the drain once this callback is over, not from inside it: the
     * caller may be walking the connection list */
    if (p->drain.draining && !p->drain.stopping)
        ev_feed_event(p->loop, &p->drain.timer, EV_TIMER);
}

static void listener_describe(sl_pump_listener_t *l)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    strcpy(l->server_name, "localhost");
    strcpy(l->server_port, "80");
    if (getsockname(l->fd, (struct sockaddr *)&ss, &len) < 0)
        return;
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &in->sin_addr, l->server_name,
                  sizeof(l->server_name));
        snprintf(l->server_port, sizeof(l->server_port), "%u",
                 ntohs(in->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, l->server_name,
                  sizeof(l->server_name));
        snprintf(l->server_port, sizeof(l->server_port), "%u",
                 ntohs(in6->sin6_port));
    } else {
        l->unix_sock = true;
    }
}

/* ------------------------------------------------------------------ */
/* passes                                                             */

void sl_pump_queue_ticket(sl_pump_t *p, sl_conn_t *c, uint32_t kind)
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

void sl_pump_submit(sl_pump_t *p, sl_conn_t *c)
{
    sl_pump_queue_ticket(p, c, SL_TICKET_SUBMIT);
    p->inflight++;
}

/* Give the executor this pass's tickets. The batch moves to its own array
 * first: an executor on the loop thread may queue new tickets while it
 * handles these, and those belong to the next batch. */
static void hand_over(sl_pump_t *p)
{
    sl_ticket_t *batch = p->pending;
    uint32_t n = p->npending;

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

    sl_metrics_set(&m->conns_open, p->nactive);
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

void sl_pump_notify(sl_pump_t *p, sl_conn_t *c)
{
    sl_ticket_t t = {.idx = c->idx, .gen = c->gen};

    sl_queue_push(&p->done, &t, 1);
    ev_async_send(p->loop, &p->wake);
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
            sl_conn_t *c = &p->conns[batch[i].idx];
            if (c->state != SL_CONN_FREE)
                sl_conn_complete(c);
        }
    }
}

static int method_class(int method)
{
    switch (method) {
    case HTTP_GET:
        return SL_METRICS_GET;
    case HTTP_HEAD:
        return SL_METRICS_HEAD;
    case HTTP_POST:
        return SL_METRICS_POST;
    case HTTP_PUT:
        return SL_METRICS_PUT;
    case HTTP_DELETE:
        return SL_METRICS_DELETE;
    case HTTP_PATCH:
        return SL_METRICS_PATCH;
    case HTTP_OPTIONS:
        return SL_METRICS_OPTIONS;
    default:
        return SL_METRICS_OTHER;
    }
}

/* C's request, counted by method and status class, with its duration and
 * queue time. The executor is done with it: resp_status and picked are
 * final. */
static void metrics_request(sl_pump_t *p, const sl_conn_t *c)
{
    sl_metrics_slot_t *m = sl_metrics_self;
    ev_tstamp start = c->req.start;
    int method = c->head_done ? method_class(c->req.method) : SL_METRICS_OTHER;
    int status = c->resp_status;
    int code =
        status >= 100 && status < 600 ? status / 100 - 1 : SL_METRICS_NONE;

    sl_metrics_add(&m->requests[method][code], 1);
    if (start <= 0)
        return; /* refused before it began (a bad head) */
    sl_metrics_observe(&m->duration, ev_now(p->loop) - start);
    if (c->picked > 0)
        sl_metrics_observe(&m->queue, c->picked - start);
}

void sl_pump_request_done(sl_pump_t *p, sl_conn_t *c)
{
    metrics_request(p, c);
    if (p->alog != NULL)
        sl_accesslog_request(p->alog, c);
    p->served++;
    sl_drain_retire_check(p);
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
    metrics_gauges(p);
    for (c = p->active.next; c != &p->active; c = next) {
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
    int k, probe;

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

    p->nconns = (uint32_t)o->worker_connections;
    p->conns = calloc(p->nconns, sizeof(sl_conn_t));
    /* a submit and a wake per connection at most in one pass */
    p->npending_cap = p->nconns * 2;
    p->pending = calloc(p->npending_cap, sizeof(sl_ticket_t));
    p->handing = calloc(p->npending_cap, sizeof(sl_ticket_t));
    if (p->conns == NULL || p->pending == NULL || p->handing == NULL) {
        sl_error("out of memory for %u connections", p->nconns);
        return -1;
    }
    p->active.next = p->active.prev = &p->active;
    if (sl_queue_init(&p->work, p->nconns * 4) < 0 ||
        sl_queue_init(&p->done, p->nconns * 4) < 0) {
        sl_error("out of memory for the executor queues");
        return -1;
    }

    for (k = 0; k < nfds; k++) {
        sl_pump_listener_t *l = &p->listeners[k];
        l->fd = fds[k];
        listener_describe(l);
        ev_io_init(&l->io, accept_cb, l->fd, EV_READ);
    }
    p->nlisteners = k;

    ev_timer_init(&p->accept_timer, accept_timer_cb, SL_ACCEPTLIMIT_PAUSE, 0);
    sl_holdq_init(&p->holdq, p->loop, SL_CONN_HOLD_SECS, sl_conn_unhold);
    ev_async_init(&p->wake, wake_cb);
    ev_async_start(p->loop, &p->wake);
    ev_prepare_init(&p->flush, flush_cb);
    ev_prepare_start(p->loop, &p->flush);
    ev_timer_init(&p->tick, tick_cb, 1.0, 1.0);
    ev_timer_start(p->loop, &p->tick);
    sl_drain_init(p);
    if (sl_accesslog_open(&p->alog, p->loop, o) < 0)
        return -1;
    p->lanes = o->threads;
    return 0;
}

void sl_pump_start(sl_pump_t *p)
{
    listeners_start(p, true);
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

void sl_pump_io_start(sl_pump_t *p, ev_io *w)
{
    ev_io_start(p->loop, w);
    p->unsettled = true;
}

void sl_pump_destroy(sl_pump_t *p)
{
    uint32_t i;

    if (p->conns != NULL) {
        for (i = 0; i < p->nfresh; i++) {
            sl_conn_t *c = &p->conns[i];
            sl_transport_close(&c->tp);
            sl_conn_ws_free(c);
            sl_conn_free_bufs(c);
        }
    }
    sl_bufcache_clear(&p->bufs);
    sl_accesslog_close(p->alog);
    p->alog = NULL;
    free(p->conns);
    free(p->pending);
    free(p->handing);
    sl_queue_destroy(&p->work);
    sl_queue_destroy(&p->done);
    if (p->loop != NULL)
        ev_loop_destroy(p->loop);
}
