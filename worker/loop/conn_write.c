/* conn_write.c - a connection's output side, on the loop thread.
 *
 * What the loop holds for a connection goes out in one order: the write
 * buffer (response heads, copied body parts, answers held for a pipelining
 * client), then the tail the executor handed over instead of copying, lent
 * bytes (sl_conn_sendmem()) or a file (sl_conn_sendfile()). The head and
 * the tail's first bytes leave in one call where the kernel allows, since
 * a segment of its own for a head costs the client a wake-up. Every byte
 * written moves the send timeout and gives credit back to an executor
 * that waits for room (conn.h). A pipelining client's finished answers may
 * wait, briefly, to leave with the next one (the hold list, at the end).
 */
#include "config.h"

#include <errno.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/metrics.h"
#include "worker/loop/conn.h"
#include "worker/loop/exec.h"
#include "worker/loop/pump.h"

static void fd_close(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* Give lent bytes back to the executor (sl_conn_sendmem()). */
static void mem_drop(sl_conn_t *c, const char **mem, void **owner)
{
    if (*mem != NULL) {
        c->pump->exec->release(*owner);
        *mem = NULL;
        *owner = NULL;
    }
}

void sl_conn_drop_tail(sl_conn_t *c)
{
    fd_close(&c->wfile_fd);
    mem_drop(c, &c->wmem, &c->wmem_owner);
}

void sl_conn_drop_tail_locked(sl_conn_t *c)
{
    fd_close(&c->file_fd);
    mem_drop(c, &c->mem, &c->mem_owner);
}

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

/* One write of what C's write buffer holds. Lent bytes behind it go in
 * the same call, and a file behind it is announced (SL_TRANSPORT_MORE,
 * MSG_MORE on a plain socket), so a response's head leaves with its
 * body's first bytes: one segment, one wake-up of the client, one call
 * fewer. The count may run past the buffer into the lent bytes; errno as
 * the transport's. */
static ssize_t send_buffered(sl_conn_t *c)
{
    struct iovec iov[2];
    int more = c->wfile_fd >= 0 && c->wfile_len > 0 ? SL_TRANSPORT_MORE : 0;

    iov[0].iov_base = c->wbuf.data + c->wbuf.off;
    iov[0].iov_len = sl_buf_pending(&c->wbuf);
    if (c->wmem == NULL || c->wmem_len == 0) /* the common case */
        return sl_transport_writev(&c->tp, iov, 1, more);
    iov[1].iov_base = (void *)c->wmem;
    iov[1].iov_len = c->wmem_len;
    return sl_transport_writev(&c->tp, iov, 2, 0);
}

/* Write what the loop holds for C, adding the count to *WRITTEN. 1 when
 * all is written, 0 when the socket is full, -1 when the client is gone. */
static int conn_write(sl_conn_t *c, size_t *written_out)
{
    sl_buf_t *w = &c->wbuf;
    ssize_t n;
    size_t written = 0;
    size_t from_buf;
    int rc = 1;

    while (sl_buf_pending(w) > 0) {
        n = send_buffered(c);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
            break;
        }
        from_buf =
            (size_t)n < sl_buf_pending(w) ? (size_t)n : sl_buf_pending(w);
        sl_buf_consume(w, from_buf);
        if ((size_t)n > from_buf) { /* lent bytes went along */
            c->wmem += (size_t)n - from_buf;
            c->wmem_len -= (size_t)n - from_buf;
        }
        sl_metrics_add(&sl_metrics_self->bytes_out, (uint64_t)n);
        written += (size_t)n;
        if ((size_t)n > c->interim) {
            c->wrote_any = true;
            c->interim = 0;
        } else {
            c->interim -= (size_t)n;
        }
    }
    while (rc == 1 && c->wmem != NULL && c->wmem_len > 0) {
        struct iovec iov = {.iov_base = (void *)c->wmem,
                            .iov_len = c->wmem_len};
        n = sl_transport_writev(&c->tp, &iov, 1, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
            break;
        }
        c->wmem += n;
        c->wmem_len -= (size_t)n;
        sl_metrics_add(&sl_metrics_self->bytes_out, (uint64_t)n);
        written += (size_t)n;
    }
    while (rc == 1 && c->wfile_fd >= 0 && c->wfile_len > 0) {
        n = sl_transport_sendfile(&c->tp, c->wfile_fd, &c->wfile_off,
                                  c->wfile_len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
            break;
        }
        if (n == 0) { /* the file shrank: the promised length is a lie */
            rc = -1;
            break;
        }
        c->wfile_len -= (size_t)n;
        sl_metrics_add(&sl_metrics_self->bytes_out, (uint64_t)n);
        written += (size_t)n;
    }
    if (rc == 1)
        sl_conn_drop_tail(c);
    send_deadline(c, rc, written);
    *written_out = written;
    return rc;
}

/* WRITTEN bytes of C's response left: their credit comes back, and an
 * executor waiting for it hears so below half the credit (mu held). */
static void credit_back(sl_conn_t *c, size_t written)
{
    if (written == 0 || (c->state != SL_CONN_SERVING && c->state != SL_CONN_WS))
        return;
    c->inflight -= written < c->inflight ? written : c->inflight;
    if (c->inflight + c->out.len <= SL_CONN_CREDIT / 2)
        sl_conn_wake(c);
}

int sl_conn_flush(sl_conn_t *c)
{
    size_t written;
    int rc;

    sl_conn_hold_end(c); /* what it held goes now */
    rc = conn_write(c, &written);

    if (written > 0 &&
        (c->state == SL_CONN_SERVING || c->state == SL_CONN_WS)) {
        pthread_mutex_lock(&c->mu);
        credit_back(c, written);
        pthread_mutex_unlock(&c->mu);
    }
    return rc;
}

int sl_conn_flush_locked(sl_conn_t *c)
{
    size_t written;
    int rc;

    sl_conn_hold_end(c);
    rc = conn_write(c, &written);

    credit_back(c, written);
    return rc;
}

/* ------------------------------------------------------------------ */
/* answers held back (pump mode, pipelining: conn.c's conn_hold())    */

static bool on_hold_list(const sl_conn_t *c)
{
    return c->hold_prev != NULL || c->pump->hold_head == c;
}

void sl_conn_hold_start(sl_conn_t *c)
{
    sl_pump_t *p = c->pump;

    if (on_hold_list(c))
        return;
    c->hold_since = ev_now(p->loop);
    c->hold_prev = p->hold_tail;
    c->hold_next = NULL;
    if (p->hold_tail != NULL)
        p->hold_tail->hold_next = c;
    else
        p->hold_head = c;
    p->hold_tail = c;
    if (!ev_is_active(&p->hold_timer)) {
        ev_timer_set(&p->hold_timer, p->hold_secs, 0.0);
        ev_timer_start(p->loop, &p->hold_timer);
    }
}

void sl_conn_hold_end(sl_conn_t *c)
{
    sl_pump_t *p = c->pump;

    if (!on_hold_list(c))
        return;
    if (c->hold_prev != NULL)
        c->hold_prev->hold_next = c->hold_next;
    else
        p->hold_head = c->hold_next;
    if (c->hold_next != NULL)
        c->hold_next->hold_prev = c->hold_prev;
    else
        p->hold_tail = c->hold_prev;
    c->hold_next = c->hold_prev = NULL;
}

bool sl_conn_holding(const sl_conn_t *c)
{
    return on_hold_list(c) && sl_buf_pending(&c->wbuf) == c->interim;
}

/* The apps behind the oldest held answers are taking their time: write
 * those answers, and wait again for the oldest left. Answers held more
 * recently keep waiting for their own next answer; one held again while
 * this runs is among those, so the loop ends. */
static void hold_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    sl_pump_t *p = ev_userdata(loop);
    ev_tstamp now = ev_now(loop);
    sl_conn_t *c;

    (void)w;
    (void)revents;
    /* the slack: the timer was set for since + secs, which need not come
     * out exactly equal when added up again */
    while ((c = p->hold_head) != NULL &&
           c->hold_since + p->hold_secs <= now + 1e-6) {
        sl_conn_hold_end(c);
        sl_conn_unhold(c);
    }
    if (p->hold_head != NULL) {
        ev_timer_set(&p->hold_timer,
                     p->hold_head->hold_since + p->hold_secs - now, 0.0);
        ev_timer_start(p->loop, &p->hold_timer);
    }
}

void sl_conn_hold_init(sl_pump_t *p)
{
    p->hold_secs = SL_CONN_HOLD_SECS;
    ev_timer_init(&p->hold_timer, hold_timer_cb, p->hold_secs, 0);
}
