/* conn.c - one connection below its session: the socket (through its
 * transport), the watcher, the buffers, writing, closing.
 *
 * What a connection does with its bytes is its session's (sl_session_ops_t
 * in conn.h): the PROXY header's (conn_proxy.c), then HTTP/1.1's (h1.c),
 * after an upgrade a WebSocket's (conn_ws.c). This file holds what every
 * session shares and calls none of them by name: the watcher's readiness,
 * a completion, the housekeeping, the drain and a close each go to the
 * current session's operation. The calls an executor makes are in
 * exchange.c; the output's bytes and its hold in output.c.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>

#include <stddef.h>
#include <string.h>

#include "worker/loop/conn.h"
#include "worker/loop/exec.h"
#include "worker/loop/forwarded.h"
#include "worker/loop/pool.h"
#include "worker/loop/pump.h"
#include "worker/loop/tlsmod.h"

static void conn_io_cb(struct ev_loop *loop, ev_io *w, int revents);

/* ------------------------------------------------------------------ */
/* watcher and buffers                                                */

void sl_conn_watch(sl_conn_t *c, int events)
{
    int on = sl_transport_events(&c->tp, events);

    if (c->io.events != on || !ev_is_active(&c->io)) {
        ev_io_stop(c->pump->loop, &c->io);
        if (events == 0)
            return;
        ev_io_set(&c->io, c->tp.fd, on);
        sl_pump_io_start(c->pump, &c->io);
    }
    /* bytes the transport holds make no readiness (transport.h), whether
     * the watcher was on already or not */
    if ((events & EV_READ) && sl_transport_pending(&c->tp) > 0)
        ev_feed_event(c->pump->loop, &c->io, c->tp.read_wait);
}

int sl_conn_init(sl_conn_t *c, sl_pump_t *p, uint32_t idx)
{
    memset(c, 0, sizeof(*c));
    c->pump = p;
    c->x.id = idx;
    c->x.conn = c;
    c->tp.fd = -1;
    sl_tail_init(&c->x.tail);
    sl_output_init(&c->tx);
    ev_io_init(&c->io, conn_io_cb, -1, 0);
    if (pthread_mutex_init(&c->x.mu, NULL) != 0)
        return -1;
    return 0;
}

size_t sl_conn_hdrs_size(const sl_options_t *o)
{
    return sl_bufcache_size(((size_t)o->limit_request_fields + 1) *
                            sizeof(sl_hdr_t));
}

int sl_conn_hdrs_get(sl_conn_t *c, sl_req_t *r)
{
    r->hdrs = sl_bufcache_take(&c->pump->bufs, sl_conn_hdrs_size(c->pump->opt));
    return r->hdrs != NULL ? 0 : -1;
}

/* The request's head and header array, back to the cache (or freed with
 * the block they share, when packed). */
static void give_head(sl_conn_t *c, sl_req_t *r)
{
    if (r->packed) {
        r->packed = false;
        sl_buf_free(&r->hbuf); /* the header array with it */
        r->hdrs = NULL;
        return;
    }
    sl_bufcache_put(&c->pump->bufs, &r->hbuf);
    if (r->hdrs != NULL) {
        sl_bufcache_give(&c->pump->bufs, r->hdrs,
                         sl_conn_hdrs_size(c->pump->opt));
        r->hdrs = NULL;
    }
}

/* Give the request's own memory back: head, header array, forwarded
 * client. Loop thread, no executor on the request. */
void sl_conn_free_req(sl_conn_t *c, sl_req_t *r)
{
    give_head(c, r);
    r->nhdrs = 0;
    if (r->client != NULL)
        sl_forwarded_clear(r);
}

void sl_conn_free_head(sl_conn_t *c)
{
    sl_conn_free_req(c, &c->x.req);
}

void sl_conn_pack_head(sl_conn_t *c)
{
    sl_req_t *r = &c->x.req;
    size_t hlen = r->hbuf.len, at = (hlen + 15) & ~(size_t)15;
    size_t nh = r->nhdrs > 0 ? (size_t)r->nhdrs : 0;
    char *p;

    if (r->packed || r->hbuf.data == NULL ||
        (p = malloc(at + nh * sizeof(sl_hdr_t))) == NULL)
        return;
    memcpy(p, r->hbuf.data, hlen);
    if (nh > 0)
        memcpy(p + at, r->hdrs, nh * sizeof(sl_hdr_t));
    give_head(c, r);
    r->hbuf.data = p;
    r->hbuf.len = hlen;
    r->hbuf.cap = at;
    r->hdrs = nh > 0 ? (sl_hdr_t *)(void *)(p + at) : NULL;
    r->packed = true;
}

void sl_conn_free_bufs(sl_conn_t *c)
{
    sl_bufcache_t *bc = &c->pump->bufs;

    sl_conn_free_head(c);
    pthread_mutex_lock(&c->x.mu);
    sl_bufcache_put(bc, &c->x.body);
    sl_bufcache_put(bc, &c->x.out);
    sl_bufcache_put(bc, &c->x.resp_head);
    pthread_mutex_unlock(&c->x.mu);
    sl_bufcache_put(bc, &c->rbuf);
    sl_bufcache_put(bc, &c->tx.buf);
}

/* Where a connection without a read buffer reads: only what comes is
 * copied into a buffer of its own. Loop thread. */
static char read_scratch[SL_CONN_READ_CHUNK];

ssize_t sl_conn_recv(sl_conn_t *c, size_t room)
{
    sl_buf_t *b = &c->rbuf;
    ssize_t n;

    if (b->data != NULL) {
        if (sl_buf_reserve(b, room) < 0)
            goto out_nomem;
        return sl_transport_read(&c->tp, b->data + b->len, room);
    }
    n = sl_transport_read(&c->tp, read_scratch, room);
    if (n <= 0)
        return n;
    if (sl_bufcache_get(&c->pump->bufs, b, (size_t)n) < 0)
        goto out_nomem;
    memcpy(b->data, read_scratch, (size_t)n);
    return n;

out_nomem:
    errno = ENOMEM;
    return -1;
}

/* Give an empty BUF of C a cached block, so what is appended next does not
 * malloc (out of memory the append tries itself). */
void sl_conn_buf_ready(sl_conn_t *c, sl_buf_t *b)
{
    if (b->data == NULL)
        (void)sl_bufcache_get(&c->pump->bufs, b, SL_BUFCACHE_MIN);
}

/* ------------------------------------------------------------------ */
/* answers the loop makes itself                                      */

/* ------------------------------------------------------------------ */
/* writing (the output's, output.h): credit and the send timeout      */

/* The send timeout (nginx's send_timeout): while a response waits on a
 * full socket, C's deadline is the time its client last took a byte plus
 * --send-timeout; anything written moves it, a socket that takes all
 * disarms it. So an app that is slow to answer is never cut, a reader that
 * is slow but reading never is, and one that stopped reading is, before it
 * holds a lane (and at --timeout the whole worker) forever. A WebSocket's
 * output is timed the same way (conn_ws.c cuts it). */
static void send_deadline(sl_conn_t *c, int rc, size_t written)
{
    double secs = c->pump->opt->send_timeout;

    if (c->state != SL_CONN_SERVING && c->state != SL_CONN_WRITING &&
        c->state != SL_CONN_WS)
        return;
    if (rc != 0 || secs <= 0)
        c->deadline = 0;
    else if (written > 0 || c->deadline == 0)
        c->deadline = ev_now(c->pump->loop) + secs;
}

/* WRITTEN bytes of C's response left: their credit comes back, and an
 * executor waiting for it hears so below half the credit (mu held). */
static void credit_back(sl_conn_t *c, size_t written)
{
    sl_exch_t *x = sl_conn_wx(c);

    if (written == 0 || (c->state != SL_CONN_SERVING && c->state != SL_CONN_WS))
        return;
    x->inflight -= written < x->inflight ? written : x->inflight;
    if (x->inflight + x->out.len <= SL_CONN_CREDIT / 2)
        sl_exch_wake(x);
}

/* Write what C's output holds (its hold ends: what it held goes now);
 * the tail, once written, is dropped. */
static int conn_write(sl_conn_t *c, size_t *written)
{
    int rc;

    sl_output_unhold(&c->tx, &c->pump->holdq);
    rc = sl_output_write(&c->tx, &c->tp, written);
    if (rc == 1 && sl_tail_any(&c->tx.tail))
        sl_tail_drop(&c->tx.tail, c->pump->exec->release);
    send_deadline(c, rc, *written);
    return rc;
}

int sl_conn_flush(sl_conn_t *c)
{
    size_t written = 0;
    int rc = conn_write(c, &written);

    if (written > 0 &&
        (c->state == SL_CONN_SERVING || c->state == SL_CONN_WS)) {
        pthread_mutex_lock(&sl_conn_wx(c)->mu);
        credit_back(c, written);
        pthread_mutex_unlock(&sl_conn_wx(c)->mu);
    }
    return rc;
}

int sl_conn_flush_locked(sl_conn_t *c)
{
    size_t written = 0;
    int rc = conn_write(c, &written);

    credit_back(c, written);
    return rc;
}

/* ------------------------------------------------------------------ */
/* loop side                                                          */

/* ------------------------------------------------------------------ */
/* life, and what its session does                                    */

void sl_conn_start(sl_conn_t *c, int fd, int listener,
                   const struct sockaddr *sa, socklen_t salen)
{
    bool tls = c->pump->listeners[listener].tls;

    if (tls)
        c->pump->tls->start(&c->tp, c->pump->tls_ctx, fd);
    else
        sl_transport_start(&c->tp, &sl_transport_plain, fd);
    c->x.req.tls = tls;
    c->serial++;
    c->listener = (uint8_t)listener;
    memcpy(&c->peer, sa, salen);
    c->peerlen = (uint8_t)salen;
    c->nahead = 0;
    c->ahead_writing = false;
    c->ahead_parsing = false;
    c->state = SL_CONN_READING;
    c->tx.wrote_any = false;
    c->peer_eof = false;
    c->x.peer_gone = false;
    c->x.aborted = false;
    c->x.notified = false;
    c->x.waiting = false;
    c->rbuf.len = c->rbuf.off = 0;
}

static void conn_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    sl_conn_t *c = (sl_conn_t *)w;

    (void)loop;
    c->sess->io(c, sl_transport_ready(&c->tp, revents));
}

bool sl_conn_poll(sl_conn_t *c, int what, bool write)
{
    struct pollfd pfd = {.fd = c->tp.fd, .events = POLLIN};
    const sl_options_t *o = c->pump->opt;
    int ms = (int)((what == EV_WRITE ? o->send_timeout : o->timeout) * 1000);

    if (write || (c->tp.read_wait & EV_WRITE))
        pfd.events |= POLLOUT;
    if (sl_transport_pending(&c->tp) > 0)
        return true;
    return poll(&pfd, 1, ms > 0 ? ms : -1) > 0;
}

void sl_conn_close(sl_conn_t *c)
{
    sl_conn_watch(c, 0);
    sl_output_unhold(&c->tx, &c->pump->holdq);
    sl_tail_drop(&c->tx.tail, c->pump->exec->release);
    pthread_mutex_lock(&c->x.mu);
    sl_exch_drop_tail_locked(&c->x);
    pthread_mutex_unlock(&c->x.mu);
    c->sess->close(c);
    sl_conn_free_bufs(c);
    sl_transport_close(&c->tp);
    c->state = SL_CONN_FREE;
    c->deadline = 0;
    sl_pool_release(&c->pump->pool, c);
}

void sl_conn_complete(sl_conn_t *c)
{
    c->sess->complete(c);
}

void sl_conn_sweep(sl_conn_t *c, ev_tstamp now)
{
    c->sess->sweep(c, now);
}

bool sl_conn_drain(sl_conn_t *c, ev_tstamp now, ev_tstamp grace)
{
    return c->sess->drain(c, now, grace);
}

void sl_conn_going_away(sl_conn_t *c, unsigned code)
{
    c->sess->going_away(c, code);
}

void sl_conn_abort(sl_conn_t *c)
{
    sl_exch_t *x = sl_conn_wx(c);

    pthread_mutex_lock(&x->mu);
    x->aborted = true;
    sl_exch_wake(x);
    pthread_mutex_unlock(&x->mu);
    c->sess->abort(c);
}
