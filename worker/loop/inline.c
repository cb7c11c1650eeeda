/* inline.c - blocking on the socket instead of on a lane's condition
 * variable.
 *
 * In inline mode the app runs on the loop thread, inside the connection's
 * dispatch: nobody else will read its body or write its response while it
 * waits, so its waits must do that work themselves, with poll(2) on the one
 * socket. This is the only place on the loop side that blocks, and only an
 * executor that says so (exec.h: wait) ever gets here. The GIL is released
 * around these waits by the caller, as for a lane.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>

#include "common/metrics.h"
#include "common/options.h"
#include "worker/loop/h2.h"
#include "worker/loop/inline.h"
#include "worker/loop/pump.h"

/* Wait until C's transport can go on with WHAT (EV_READ: a read, EV_WRITE:
 * a write), up to --timeout for input and up to --send-timeout for room to
 * write. false: the client is silent (or not reading) or the socket
 * broke. */
static bool poll_socket(sl_conn_t *c, int what)
{
    int on = sl_transport_events(&c->tp, what);
    struct pollfd pfd = {.fd = c->tp.fd,
                         .events = (short)((on & EV_READ ? POLLIN : 0) |
                                           (on & EV_WRITE ? POLLOUT : 0))};
    const sl_options_t *o = c->pump->opt;
    int ms = (int)((what == EV_WRITE ? o->send_timeout : o->timeout) * 1000);

    return poll(&pfd, 1, ms > 0 ? ms : -1) > 0;
}

void sl_inline_notify(sl_exch_t *x)
{
    sl_conn_t *c = x->conn;

    if (sl_exch_is_stream(x)) {
        sl_h2_inline_notify(x);
        return;
    }
    /* the end of the response waits for the dispatch to take it, which
     * may still replace it with an error answer (a bad body) */
    if (c->x.aborted || c->x.resp_done || sl_buf_pending(&c->x.out) == 0)
        return;
    if (sl_conn_take_out(c, &c->x) < 0 || sl_conn_flush_locked(c) < 0)
        c->x.aborted = true;
}

void sl_inline_wake(sl_exch_t *x)
{
    (void)x;
}

/* Write out everything queued, waiting on the socket. A client that
 * cannot take it (gone, or taking nothing for --send-timeout) is marked gone,
 * as a failed body read marks it: later sends say so, and the dispatch closes
 * the connection instead of leaving it to wait for a writable socket. */
static int drain_out(sl_conn_t *c)
{
    int rc;

    if (sl_conn_take_out(c, &c->x) < 0)
        goto out_gone;
    while ((rc = sl_conn_flush_locked(c)) == 0)
        if (!poll_socket(c, EV_WRITE))
            goto out_gone;
    if (rc < 0)
        goto out_gone;
    return 0;

out_gone:
    c->x.aborted = true;
    return -1;
}

/* Read and parse until the body has bytes or ends. The parser's body
 * callback takes mu, so it is dropped around the parse. */
static int pull_body(sl_conn_t *c)
{
    bool want_more = false;
    ssize_t n;
    int rc;

    while (sl_buf_pending(&c->x.body) == 0 && !c->x.body_done &&
           !c->x.aborted) {
        /* what a parse leaves (part of a chunk's size line) waits for
         * more bytes: parse again only once some came */
        if (sl_buf_pending(&c->rbuf) > 0 && !want_more) {
            want_more = true;
            pthread_mutex_unlock(&c->x.mu);
            rc = sl_conn_parse(c);
            pthread_mutex_lock(&c->x.mu);
            if (rc < 0)
                return -1;
            continue;
        }
        sl_buf_compact(&c->rbuf);
        if (sl_buf_reserve(&c->rbuf, SL_CONN_READ_CHUNK) < 0)
            return -1;
        n = sl_transport_read(&c->tp, c->rbuf.data + c->rbuf.len,
                              SL_CONN_READ_CHUNK);
        if (n > 0) {
            c->rbuf.len += (size_t)n;
            want_more = false;
            sl_metrics_add(&sl_metrics_self->bytes_in, (uint64_t)n);
        } else if (n == 0) {
            c->peer_eof = true;
            c->x.aborted = true;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            /* answers held for pipelining (conn.c: conn_hold()) go out
             * first: the client may wait for them before sending more */
            if (sl_buf_pending(&c->tx.buf) > 0 && drain_out(c) < 0)
                return -1;
            if (!poll_socket(c, EV_READ))
                c->x.aborted = true;
        } else if (errno != EINTR) {
            c->x.aborted = true;
        }
    }
    return c->x.aborted && sl_buf_pending(&c->x.body) == 0 ? -1 : 0;
}

int sl_inline_wait(sl_exch_t *x, int what)
{
    sl_conn_t *c = x->conn;

    if (sl_exch_is_stream(x))
        return sl_h2_inline_wait(x, what);
    return what == SL_AWAIT_BODY ? pull_body(c) : drain_out(c);
}
