/* h2.c - the HTTP/2 session (h2.h): nghttp2 driven from the loop thread,
 * and the session's operations (conn.h) that the connection and the
 * drain call.
 *
 * Bytes read go to nghttp2_session_mem_recv(), whose callbacks
 * (h2_frames.c) make streams (h2_stream.c) and fill their requests and
 * bodies; the streams whose head is whole are then dispatched (h2_exec.c),
 * never inside nghttp2's calls: an on-loop executor runs the app right
 * there, and must be free to come back into the session. What nghttp2 has
 * to send is taken with nghttp2_session_mem_send() into the connection's
 * write buffer and written through its transport.
 *
 * The drain (RFC 9113 §6.8): a GOAWAY with the highest stream id and a
 * PING; the last stream id once its ACK comes (or NOTICE_WAIT passed);
 * streams in flight finish; the connection closes when none is left.
 * Time: --keep-alive for a connection without streams, --send-timeout for
 * a stream the peer's window holds and for a socket that takes nothing,
 * --header-timeout for a header block never finished.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/metrics.h"
#include "worker/loop/exec.h"
#include "worker/loop/h1.h"
#include "worker/loop/h2_internal.h"
#include "worker/loop/http.h"
#include "worker/loop/pump.h"
#include "worker/loop/served.h"

/* Bytes taken from nghttp2 before a write: one write for many frames. */
#define SEND_BATCH (64 * 1024)

/* Reading stops while this much waits to be written (a peer that sends
 * and does not read). */
#define SEND_BACKLOG (256 * 1024)

/* Reads of SL_CONN_READ_CHUNK one readiness may take, at most (fairness
 * to the other connections). */
#define READS_PER_IO 8

/* The drain waits this long for the PING that follows its first GOAWAY
 * before it sends the last one anyway. */
#define NOTICE_WAIT 1.0

static void session_close(sl_h2_t *h2);

int sl_h2_preface(const char *p, size_t n)
{
    size_t k = n < SL_H2_PREFACE_LEN ? n : SL_H2_PREFACE_LEN;

    if (memcmp(p, SL_H2_PREFACE, k) != 0)
        return -1;
    return n >= SL_H2_PREFACE_LEN ? 1 : 0;
}

static sl_h2_t *h2_of(const sl_conn_t *c)
{
    return c->h2;
}

/* ------------------------------------------------------------------ */
/* bytes in and out                                                   */

/* Write what nghttp2 has to send. 1 when all is written, 0 when the
 * socket is full, -1 when the connection is broken. */
int sl_h2_send(sl_h2_t *h2)
{
    sl_conn_t *c = h2->c;
    const uint8_t *data;
    ssize_t n;
    size_t written;
    int rc;

    for (;;) {
        while (sl_buf_pending(&c->tx.buf) < SEND_BATCH) {
            n = nghttp2_session_mem_send(h2->ng, &data);
            if (n < 0)
                return -1;
            if (n == 0)
                break;
            sl_conn_buf_ready(c, &c->tx.buf);
            if (sl_buf_append(&c->tx.buf, data, (size_t)n) < 0)
                return -1;
        }
        if (sl_buf_pending(&c->tx.buf) == 0) {
            sl_bufcache_put(&c->pump->bufs, &c->tx.buf);
            c->deadline = 0;
            return 1;
        }
        written = 0;
        rc = sl_output_write(&c->tx, &c->tp, &written);
        if (written > 0 || c->deadline == 0)
            c->deadline =
                c->pump->opt->send_timeout > 0
                    ? ev_now(c->pump->loop) + c->pump->opt->send_timeout
                    : 0;
        if (rc < 0)
            return -1;
        if (rc == 0)
            return 0;
    }
}

static char read_buf[SL_CONN_READ_CHUNK];

/* Feed N bytes at P to nghttp2. 0, or -1 when the session is over. */
static int session_recv(sl_h2_t *h2, const uint8_t *p, size_t n)
{
    ssize_t rc;

    h2->in_recv = true;
    rc = nghttp2_session_mem_recv(h2->ng, p, n);
    h2->in_recv = false;
    if (rc < 0) {
        char peer[64];
        int port;
        sl_conn_peer(h2->c, peer, sizeof(peer), &port);
        if (rc == NGHTTP2_ERR_FLOODED)
            sl_warn("HTTP/2: %s floods control frames: closing the "
                    "connection",
                    peer);
        else if (rc != NGHTTP2_ERR_CALLBACK_FAILURE) /* said already */
            sl_warn("HTTP/2: %s from %s: closing the connection",
                    nghttp2_strerror((int)rc), peer);
        /* the peer hears why (a GOAWAY queued by a callback stays) */
        if (rc == NGHTTP2_ERR_FLOODED ||
            rc == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS)
            (void)nghttp2_session_terminate_session(h2->ng,
                                                    NGHTTP2_ENHANCE_YOUR_CALM);
        else if (rc != NGHTTP2_ERR_CALLBACK_FAILURE)
            (void)nghttp2_session_terminate_session(h2->ng,
                                                    NGHTTP2_PROTOCOL_ERROR);
        h2->failed = true;
        return -1;
    }
    return 0;
}

/* Read what the socket has, up to READS_PER_IO chunks. 0, or -1 when
 * the peer left or broke the protocol. */
int sl_h2_read(sl_h2_t *h2)
{
    sl_conn_t *c = h2->c;
    ssize_t n;
    int i;

    for (i = 0; i < READS_PER_IO; i++) {
        if (sl_buf_pending(&c->tx.buf) >= SEND_BACKLOG)
            return 0;
        n = sl_transport_read(&c->tp, read_buf, sizeof(read_buf));
        if (n > 0) {
            sl_metrics_add(&sl_metrics_self->bytes_in, (uint64_t)n);
            if (session_recv(h2, (const uint8_t *)read_buf, (size_t)n) < 0)
                return -1;
            if ((size_t)n < sizeof(read_buf) &&
                sl_transport_pending(&c->tp) == 0)
                return 0;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n < 0 && errno == EINTR)
            continue;
        c->peer_eof = true;
        return -1;
    }
    return 0;
}

/* Every stream the executor still has hears that the client is gone. */
static void abort_streams(sl_h2_t *h2)
{
    sl_h2_stream_t *s;

    for (s = h2->streams; s != NULL; s = s->next) {
        pthread_mutex_lock(&s->x.mu);
        if (!s->resp_end) {
            s->x.aborted = true;
            sl_exch_wake(&s->x);
        }
        pthread_mutex_unlock(&s->x.mu);
    }
}

/* The session is over (the peer left, broke the protocol, or we ended
 * it): what is queued goes if it can, then the connection closes once no
 * executor holds a stream of it. */
void sl_h2_fail(sl_h2_t *h2)
{
    sl_conn_t *c = h2->c;

    h2->failed = true;
    abort_streams(h2);
    if (h2->nexec > 0) {
        sl_conn_watch(c, 0);
        return;
    }
    if (sl_h2_send(h2) == 1 && !c->peer_eof) {
        /* a GOAWAY is out, and the client may still be sending: closing
         * now would reset the connection and destroy it on its way, so
         * the session ends and the connection lingers as HTTP/1.1's
         * does after its last answer */
        session_close(h2);
        c->h2 = NULL;
        sl_h1_linger(c);
        return;
    }
    sl_conn_close(c);
}

void sl_h2_process(sl_h2_t *h2)
{
    sl_conn_t *c = h2->c;
    int events = 0, rc;

    if (h2->failed) {
        sl_h2_fail(h2);
        return;
    }
    sl_h2_dispatch_ready(h2);
    if (c->state == SL_CONN_FREE || h2->failed) {
        if (c->state != SL_CONN_FREE)
            sl_h2_fail(h2);
        return;
    }
    rc = sl_h2_send(h2);
    if (rc < 0) {
        sl_h2_fail(h2);
        return;
    }
    if (rc == 0)
        events |= EV_WRITE;
    if (h2->nstreams == 0 && h2->quiet_since == 0)
        h2->quiet_since = ev_now(c->pump->loop);
    else if (h2->nstreams > 0)
        h2->quiet_since = 0;
    if (!nghttp2_session_want_read(h2->ng) &&
        !nghttp2_session_want_write(h2->ng) && rc == 1) {
        /* both sides are done: a GOAWAY sent and every stream over, or a
         * connection error nghttp2 raised itself (a frame too large, a
         * stream past the limit the client acknowledged): what an executor
         * still serves hears the client is gone, and the connection closes
         * at the last one's END */
        sl_h2_fail(h2);
        return;
    }
    if (nghttp2_session_want_read(h2->ng) &&
        sl_buf_pending(&c->tx.buf) < SEND_BACKLOG && !c->peer_eof)
        events |= EV_READ;
    sl_conn_watch(c, events);
}

/* ------------------------------------------------------------------ */
/* the session's operations                                           */

static void h2_io(sl_conn_t *c, int ready)
{
    sl_h2_t *h2 = h2_of(c);

    if ((ready & EV_READ) && sl_h2_read(h2) < 0)
        h2->failed = true;
    sl_h2_process(h2);
}

static void h2_complete(sl_conn_t *c)
{
    (void)c; /* streams complete one by one: sl_h2_complete() */
}

static void h2_sweep(sl_conn_t *c, ev_tstamp now)
{
    sl_h2_t *h2 = h2_of(c);
    const sl_options_t *o = c->pump->opt;
    sl_h2_stream_t *s, *next;

    if (h2->failed)
        return;
    /* what waits in the kernel is read before anything times out: a loop
     * held by an app on it (inline mode) left it there, and that time was
     * nobody's idleness */
    if (sl_transport_waiting(&c->tp)) {
        if (sl_h2_read(h2) < 0)
            h2->failed = true;
        sl_h2_process(h2);
        if (c->state == SL_CONN_FREE || h2->failed)
            return;
    }
    if (c->deadline > 0 && now >= c->deadline &&
        sl_buf_pending(&c->tx.buf) > 0) {
        /* the client takes nothing: --send-timeout for the connection */
        sl_h2_fail(h2);
        return;
    }
    if (h2->nstreams == 0 && h2->quiet_since > 0 &&
        now - h2->quiet_since >= o->keep_alive) {
        (void)nghttp2_session_terminate_session(h2->ng, NGHTTP2_NO_ERROR);
        h2->failed = true;
        sl_h2_fail(h2);
        return;
    }
    for (s = h2->streams; s != NULL; s = s->next) {
        if (!s->head_done && o->header_timeout > 0 &&
            now - s->progress >= o->header_timeout) {
            /* a header block never finished (CONTINUATION frames held
             * back): --header-timeout, and the connection ends, since
             * nothing else may come on it meanwhile */
            (void)nghttp2_session_terminate_session(h2->ng,
                                                    NGHTTP2_PROTOCOL_ERROR);
            sl_h2_fail(h2);
            return;
        }
    }
    for (s = h2->streams; s != NULL; s = next) {
        next = s->next;
        if (s->closed || !s->answered)
            continue;
        if (s->resp != SL_H2_RESP_END && !s->deferred && o->send_timeout > 0 &&
            now - s->progress >= o->send_timeout) {
            /* the peer's window holds it: --send-timeout for the stream */
            s->progress = now;
            (void)nghttp2_submit_rst_stream(h2->ng, NGHTTP2_FLAG_NONE, s->sid,
                                            NGHTTP2_CANCEL);
        } else if (s->resp == SL_H2_RESP_END && o->keep_alive > 0 &&
                   now - s->progress >= o->keep_alive) {
            /* answered, and the rest of its body never comes */
            s->progress = now;
            (void)nghttp2_submit_rst_stream(h2->ng, NGHTTP2_FLAG_NONE, s->sid,
                                            NGHTTP2_NO_ERROR);
        }
    }
    sl_h2_process(h2);
}

static void h2_going_away(sl_conn_t *c, unsigned code)
{
    sl_h2_t *h2 = h2_of(c);

    (void)code;
    if (h2->notice_sent || h2->failed)
        return;
    /* a connection that has sent no request yet gets HTTP/1.1's grace for
     * its first (SL_CONN_FRESH_GRACE): after a GOAWAY a client may open
     * no stream at all, and one that has not sent its first yet may not
     * try again elsewhere (HAProxy's health check does not); h2_drain()
     * sends the notice once the grace is over or a stream came */
    if (!h2->got_stream &&
        ev_now(c->pump->loop) - h2->started < SL_CONN_FRESH_GRACE)
        return;
    /* RFC 9113 §6.8: the highest stream id first, and a PING; the last
     * stream id goes when its ACK comes (on_frame_recv) */
    h2->notice_sent = true;
    h2->notice_at = ev_now(c->pump->loop);
    (void)nghttp2_submit_shutdown_notice(h2->ng);
    /* nghttp2 sends a PING before a GOAWAY queued with it: the notice
     * goes first, so the ACK comes after the client has seen it */
    if (sl_h2_send(h2) < 0) {
        sl_h2_fail(h2);
        return;
    }
    (void)nghttp2_submit_ping(h2->ng, NGHTTP2_FLAG_NONE, NULL);
    sl_h2_process(h2);
}

static bool h2_drain(sl_conn_t *c, ev_tstamp now, ev_tstamp grace)
{
    sl_h2_t *h2 = h2_of(c);

    (void)grace;
    if (!h2->notice_sent)
        h2_going_away(c, 0);
    if (c->state == SL_CONN_FREE)
        return true;
    if (!h2->notice_sent) { /* a fresh one's grace (h2_going_away()) */
        sl_h2_process(h2);
        return c->state == SL_CONN_FREE;
    }
    if (!h2->goaway_final && now - h2->notice_at >= NOTICE_WAIT) {
        h2->goaway_final = true;
        (void)nghttp2_submit_goaway(
            h2->ng, NGHTTP2_FLAG_NONE,
            nghttp2_session_get_last_proc_stream_id(h2->ng), NGHTTP2_NO_ERROR,
            NULL, 0);
    }
    if (h2->goaway_final && h2->nstreams == 0 && h2->nexec == 0 &&
        sl_buf_pending(&c->tx.buf) == 0) {
        (void)sl_h2_send(h2);
        sl_conn_close(c);
        return true;
    }
    sl_h2_process(h2);
    return c->state == SL_CONN_FREE;
}

static void h2_abort(sl_conn_t *c)
{
    sl_h2_fail(h2_of(c));
}

static void h2_close(sl_conn_t *c)
{
    session_close(h2_of(c));
    c->h2 = NULL;
}

const sl_session_ops_t sl_h2_session = {
    .name = "HTTP/2",
    .io = h2_io,
    .complete = h2_complete,
    .sweep = h2_sweep,
    .drain = h2_drain,
    .going_away = h2_going_away,
    .abort = h2_abort,
    .close = h2_close,
};

void sl_h2_start(sl_conn_t *c)
{
    sl_h2_t *h2 = calloc(1, sizeof(*h2));
    size_t n = sl_buf_pending(&c->rbuf);

    if (h2 == NULL) {
        sl_error("HTTP/2: out of memory for a session");
        sl_conn_close(c);
        return;
    }
    h2->c = c;
    c->h2 = h2;
    h2->started = ev_now(c->pump->loop);
    c->pump->h2sessions++;
    sl_metrics_add(&sl_metrics_self->h2_conns, 1);
    c->sess = &sl_h2_session;
    c->state = SL_CONN_H2;
    c->deadline = 0;
    sl_pool_idle_remove(&c->pump->pool, c);
    h2->flood_since = ev_now(c->pump->loop);
    if (sl_h2_session_new(h2) < 0) {
        sl_error("HTTP/2: out of memory for a session");
        h2->failed = true;
        sl_conn_close(c);
        return;
    }
    /* what HTTP/1.1's session read: the preface and what followed */
    if (n > 0 &&
        session_recv(h2, (const uint8_t *)c->rbuf.data + c->rbuf.off, n) < 0)
        h2->failed = true;
    sl_bufcache_put(&c->pump->bufs, &c->rbuf);
    sl_h2_process(h2);
}

static void session_close(sl_h2_t *h2)
{
    sl_h2_stream_t *s, *next;

    if (h2 == NULL)
        return;
    if (h2->dirty) {
        sl_h2_t **pp = &h2->c->pump->h2dirty;
        while (*pp != h2)
            pp = &(*pp)->dirty_next;
        *pp = h2->dirty_next;
    }
    for (s = h2->streams; s != NULL; s = next) {
        next = s->next;
        if (s->with_exec) {
            /* its executor still runs: it ends alone (sl_h2_complete()) */
            pthread_mutex_lock(&s->x.mu);
            s->x.aborted = true;
            sl_exch_wake(&s->x);
            pthread_mutex_unlock(&s->x.mu);
            s->h2 = NULL;
            s->orphan = true;
            continue;
        }
        s->h2 = NULL;
        sl_h2_stream_free(s);
    }
    nghttp2_session_del(h2->ng);
    h2->c->pump->h2sessions--;
    free(h2);
}
