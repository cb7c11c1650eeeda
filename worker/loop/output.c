/* output.c - a connection's write side, on the loop thread (output.h).
 *
 * What the loop holds for a client goes out in one order: the buffer, then
 * the tail, lent bytes or a file. The head and the tail's first bytes
 * leave in one call where the kernel allows, since a segment of its own
 * for a head costs the client a wake-up. A pipelining client's finished
 * answers may wait, briefly, to leave with the next one (the hold queue,
 * at the end).
 */
#include "config.h"

#include <errno.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/metrics.h"
#include "worker/loop/output.h"

void sl_output_init(sl_output_t *o)
{
    sl_tail_init(&o->tail);
}

/* One write of what O's buffer holds. Lent bytes behind it go in the same
 * call, and a file behind it is announced (SL_TRANSPORT_MORE, MSG_MORE on
 * a plain socket), so a response's head leaves with its body's first
 * bytes: one segment, one wake-up of the client, one call fewer. The count
 * may run past the buffer into the lent bytes; errno as the transport's. */
static ssize_t write_buffered(sl_output_t *o, sl_transport_t *tp)
{
    struct iovec iov[2];
    int more = o->tail.file_fd >= 0 && o->tail.len > 0 ? SL_TRANSPORT_MORE : 0;

    iov[0].iov_base = o->buf.data + o->buf.off;
    iov[0].iov_len = sl_buf_pending(&o->buf);
    if (o->tail.mem == NULL || o->tail.len == 0) /* the common case */
        return sl_transport_writev(tp, iov, 1, more);
    iov[1].iov_base = (void *)o->tail.mem;
    iov[1].iov_len = o->tail.len;
    return sl_transport_writev(tp, iov, 2, 0);
}

/* The result of a failed write: 0 when the socket is full, -1 when the
 * client is gone, 2 to try again (EINTR). */
static int write_failed(void)
{
    if (errno == EINTR)
        return 2;
    return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
}

int sl_output_write(sl_output_t *o, sl_transport_t *tp, size_t *written_out)
{
    sl_buf_t *w = &o->buf;
    ssize_t n;
    size_t written = 0;
    size_t from_buf;
    int rc = 1;

    while (sl_buf_pending(w) > 0) {
        n = write_buffered(o, tp);
        if (n < 0) {
            if ((rc = write_failed()) == 2) {
                rc = 1;
                continue;
            }
            break;
        }
        from_buf =
            (size_t)n < sl_buf_pending(w) ? (size_t)n : sl_buf_pending(w);
        sl_buf_consume(w, from_buf);
        if ((size_t)n > from_buf) { /* lent bytes went along */
            o->tail.mem += (size_t)n - from_buf;
            o->tail.len -= (size_t)n - from_buf;
        }
        sl_metrics_add(&sl_metrics_self->bytes_out, (uint64_t)n);
        written += (size_t)n;
        if ((size_t)n > o->interim) {
            o->wrote_any = true;
            o->interim = 0;
        } else {
            o->interim -= (size_t)n;
        }
    }
    while (rc == 1 && o->tail.mem != NULL && o->tail.len > 0) {
        struct iovec iov = {.iov_base = (void *)o->tail.mem,
                            .iov_len = o->tail.len};
        n = sl_transport_writev(tp, &iov, 1, 0);
        if (n < 0) {
            if ((rc = write_failed()) == 2) {
                rc = 1;
                continue;
            }
            break;
        }
        o->tail.mem += n;
        o->tail.len -= (size_t)n;
        sl_metrics_add(&sl_metrics_self->bytes_out, (uint64_t)n);
        written += (size_t)n;
    }
    while (rc == 1 && o->tail.file_fd >= 0 && o->tail.len > 0) {
        n = sl_transport_sendfile(tp, o->tail.file_fd, &o->tail.file_off,
                                  o->tail.len);
        if (n < 0) {
            if ((rc = write_failed()) == 2) {
                rc = 1;
                continue;
            }
            break;
        }
        if (n == 0) { /* the file shrank: the promised length is a lie */
            rc = -1;
            break;
        }
        o->tail.len -= (size_t)n;
        sl_metrics_add(&sl_metrics_self->bytes_out, (uint64_t)n);
        written += (size_t)n;
    }
    *written_out = written;
    return rc;
}

/* ------------------------------------------------------------------ */
/* answers held back                                                  */

void sl_output_hold(sl_output_t *o, sl_holdq_t *hq, ev_tstamp now)
{
    uint16_t joined = 0;

    if (o->held) {
        if (o->joined >= SL_OUTPUT_HOLD_JOINS)
            return;
        /* to the queue's tail, its time from now: the queue stays
         * ordered by hold_since */
        joined = (uint16_t)(o->joined + 1);
        sl_output_unhold(o, hq);
    }
    o->joined = joined;
    o->held = true;
    o->hold_since = now;
    o->hold_prev = hq->tail;
    o->hold_next = NULL;
    if (hq->tail != NULL)
        hq->tail->hold_next = o;
    else
        hq->head = o;
    hq->tail = o;
    if (!ev_is_active(&hq->timer)) {
        ev_timer_set(&hq->timer, hq->secs, 0.0);
        ev_timer_start(hq->loop, &hq->timer);
    }
}

void sl_output_unhold(sl_output_t *o, sl_holdq_t *hq)
{
    if (!o->held)
        return;
    o->held = false;
    if (o->hold_prev != NULL)
        o->hold_prev->hold_next = o->hold_next;
    else
        hq->head = o->hold_next;
    if (o->hold_next != NULL)
        o->hold_next->hold_prev = o->hold_prev;
    else
        hq->tail = o->hold_prev;
    o->hold_next = o->hold_prev = NULL;
}

/* The apps behind the oldest held answers are taking their time: their
 * owners write them, and the queue waits again for the oldest left.
 * Answers held more recently keep waiting for their own next answer; one
 * held again while this runs is among those, so the loop ends. */
static void hold_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    sl_holdq_t *hq = w->data;
    ev_tstamp now = ev_now(loop);
    sl_output_t *o;

    (void)revents;
    /* the slack: the timer was set for since + secs, which need not come
     * out exactly equal when added up again */
    while ((o = hq->head) != NULL && o->hold_since + hq->secs <= now + 1e-6) {
        sl_output_unhold(o, hq);
        hq->expired(o);
    }
    if (hq->head != NULL) {
        ev_timer_set(&hq->timer, hq->head->hold_since + hq->secs - now, 0.0);
        ev_timer_start(hq->loop, &hq->timer);
    }
}

void sl_holdq_init(sl_holdq_t *hq, struct ev_loop *loop, ev_tstamp secs,
                   void (*expired)(sl_output_t *o))
{
    hq->loop = loop;
    hq->head = hq->tail = NULL;
    hq->secs = secs;
    hq->expired = expired;
    ev_timer_init(&hq->timer, hold_timer_cb, secs, 0);
    hq->timer.data = hq;
}
