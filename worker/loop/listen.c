/* listen.c - the listening sockets a worker inherited, and accepting.
 *
 * Accepting stops when the pool is used up with no idle connection to
 * evict, and for a moment when accept4() runs out of descriptors or
 * memory; the pool's changed() (sl_listen_room()) starts it again. A new
 * connection gets a pool entry (pool.h), closing the longest-idle
 * keep-alive one when there is no free entry, and starts its first
 * session (sl_conn_start(): the plain or the TLS transport, as its
 * listener speaks).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/metrics.h"
#include "worker/loop/conn_proxy.h"
#include "worker/loop/h1.h"
#include "worker/loop/listen.h"
#include "worker/loop/tlsmod.h"
#include "worker/loop/pool.h"
#include "worker/loop/pump.h"

/* Connections accepted from one listener in one go, at most. */
#define ACCEPT_BATCH 64

static void accept_unpause(sl_pump_t *p);

void sl_listen_start(sl_pump_t *p, bool on)
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

void sl_listen_stop(sl_pump_t *p)
{
    int i;

    sl_listen_start(p, false);
    accept_unpause(p);
    for (i = 0; i < p->nlisteners; i++) {
        if (p->listeners[i].fd >= 0) {
            close(p->listeners[i].fd);
            p->listeners[i].fd = -1;
        }
    }
}

/* Listen again, unless something says not to: the drain, a pause, or a
 * pool with no free slot and no idle connection to give one up. */
static void listeners_resume(sl_pump_t *p)
{
    if (p->accepting || p->drain.draining || p->accept_paused)
        return;
    if (!sl_pool_have_free(&p->pool) && p->pool.idle_tail == NULL)
        return;
    sl_listen_start(p, true);
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
 * one of our connections closes (sl_listen_room()). */
static void accept_pause(sl_pump_t *p, sl_pump_listener_t *l, int err)
{
    char who[32];

    snprintf(who, sizeof(who), "listener fd %d", l->fd);
    sl_acceptlimit_log(&p->accept_limit, ev_now(p->loop), err, who, true);
    sl_listen_start(p, false);
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

    for (i = 0;
         i < max && (sl_pool_have_free(&p->pool) || p->pool.idle_tail != NULL);
         i++) {
        /* the victim is chosen first and closed only once accept4() gave
         * a connection: with several workers on one socket, another may
         * have taken it */
        victim = sl_pool_have_free(&p->pool) ? NULL : sl_pool_victim(&p->pool);
        if (!sl_pool_have_free(&p->pool) && victim == NULL)
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
            if (!p->pool.evict_told)
                sl_warn("all %u connections (--worker-connections) are in "
                        "use: closing the longest-idle keep-alive ones to "
                        "make room (told once; counted in "
                        "sluice_idle_evictions_total)",
                        p->pool.nconns);
            p->pool.evict_told = true;
            sl_metrics_add(&sl_metrics_self->idle_evictions, 1);
            sl_conn_close(victim);
        }
        if (!l->unix_sock)
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c = sl_pool_take(&p->pool);
        if (c->pump == NULL &&
            sl_conn_init(c, p, (uint32_t)(c - p->pool.conns)) < 0) {
            sl_error("cannot set up connection %u of the pool",
                     (unsigned)(c - p->pool.conns));
            c->pump = NULL; /* set up again when taken again */
            sl_pool_unused(&p->pool, c);
            close(fd);
            continue;
        }
        sl_pool_activate(&p->pool, c);
        sl_metrics_add(&sl_metrics_self->conns_accepted, 1);
        sl_conn_start(c, fd, (int)(l - p->listeners), (struct sockaddr *)&ss,
                      len);
        if (p->opt->proxy_protocol)
            sl_conn_proxy_start(c);
        else
            sl_h1_start(c);
        if (c->state != SL_CONN_FREE)
            ev_feed_fd_event(loop, fd, EV_READ);
    }
    if (!sl_pool_have_free(&p->pool) && p->pool.idle_tail == NULL)
        sl_listen_start(p, false);
    return sl_pool_have_free(&p->pool) || p->pool.idle_tail != NULL;
}

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)revents;
    accept_some(ev_userdata(loop), (sl_pump_listener_t *)w, ACCEPT_BATCH);
}

void sl_listen_accept_pending(sl_pump_t *p)
{
    int i;

    for (i = 0; i < p->nlisteners; i++)
        if (p->listeners[i].fd >= 0)
            while (accept_some(p, &p->listeners[i], ACCEPT_BATCH))
                ;
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

int sl_listen_tls(sl_pump_t *p, const struct sl_tls_module *m,
                  struct ssl_ctx_st *ctx, const int *tls_fds, int n)
{
    int i, k, count = 0;

    for (i = 0; i < p->nlisteners; i++)
        for (k = 0; k < n; k++)
            if (p->listeners[i].fd == tls_fds[k]) {
                p->listeners[i].tls = true;
                count++;
            }
    if (count == 0) {
        m->ctx_free(ctx);
        return 0;
    }
    if (p->tls_ctx != NULL)
        p->tls->ctx_free(p->tls_ctx);
    p->tls = m;
    p->tls_ctx = ctx;
    return count;
}

void sl_listen_room(sl_pump_t *p, bool released)
{
    /* a descriptor is free again: a pause has done its work */
    if (released)
        accept_unpause(p);
    listeners_resume(p);
}

void sl_listen_init(sl_pump_t *p, const int *fds, int nfds)
{
    int k;

    for (k = 0; k < nfds; k++) {
        sl_pump_listener_t *l = &p->listeners[k];
        l->fd = fds[k];
        listener_describe(l);
        ev_io_init(&l->io, accept_cb, l->fd, EV_READ);
    }
    p->nlisteners = k;
    ev_timer_init(&p->accept_timer, accept_timer_cb, SL_ACCEPTLIMIT_PAUSE, 0);
}
