/* h2.c - the HTTP/2 session (h2.h): nghttp2 driven from the loop thread.
 *
 * Bytes read go to nghttp2_session_mem_recv(), whose callbacks make
 * streams (h2_stream.c) and fill their requests and bodies; a stream
 * whose head is whole waits on the session's ready queue, which is worked
 * only outside nghttp2's calls (an on-loop executor runs the app right
 * there, and must be free to come back into the session). What nghttp2
 * has to send is taken with nghttp2_session_mem_send() into the
 * connection's write buffer and written through its transport.
 *
 * Flow control follows the executors. A stream's receive window opens
 * only as its app reads the body (nghttp2's automatic WINDOW_UPDATE is
 * off: sl_exch_read_body() notifies, and the loop gives the bytes back
 * with nghttp2_session_consume()); the connection's window is the
 * streams' together, so one stream whose app does not read stalls only
 * itself. On the send side a stream's response is taken from its
 * exchange as on HTTP/1.1, within the same credit, and framed as the
 * peer's windows allow; a data source with nothing yet is deferred and
 * resumed when the executor queues more.
 *
 * Floods nghttp2 counts itself (Debian's 1.52 carries the fixes): the
 * stream resets (CVE-2023-44487), CONTINUATION frames (CVE-2024-28182),
 * SETTINGS and the ACKs a peer makes us queue (PING, SETTINGS). The
 * session adds: a request whose fields exceed the header list size is
 * answered 431, and far past it the connection ends (an HPACK bomb);
 * empty DATA frames and streams reset before their answer beyond a budget
 * a second end it with ENHANCE_YOUR_CALM; streams still with the executor
 * after their reset count against the concurrency, so resets cannot make
 * the app do more than --http2-max-concurrent-streams at once.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/metrics.h"
#include "worker/loop/exec.h"
#include "worker/loop/h2_internal.h"
#include "worker/loop/http.h"
#include "worker/loop/inline.h"
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

/* Per second: empty DATA frames, and streams reset by the client before
 * their answer, past which the connection ends (ENHANCE_YOUR_CALM). */
#define EMPTY_DATA_MAX 100
#define RESETS_FACTOR  2 /* times --http2-max-concurrent-streams */

/* How far past --http2-max-header-list-size a request's fields may go
 * before the connection, not only the stream, ends. */
#define HEADER_BOMB_FACTOR 4

/* The drain waits this long for the PING that follows its first GOAWAY
 * before it sends the last one anyway. */
#define NOTICE_WAIT 1.0

static void session_process(sl_h2_t *h2);
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

static const sl_options_t *opts(const sl_h2_t *h2)
{
    return h2->c->pump->opt;
}

/* ------------------------------------------------------------------ */
/* nghttp2's callbacks                                                */

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f,
                            void *ud)
{
    sl_h2_t *h2 = ud;
    sl_h2_stream_t *s;
    uint32_t cap = (uint32_t)opts(h2)->http2_max_concurrent_streams;

    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    /* streams reset but still with the executor count too (rapid reset) */
    if (h2->nstreams >= cap * RESETS_FACTOR ||
        (s = sl_h2_stream_new(h2, f->hd.stream_id)) == NULL) {
        (void)nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, f->hd.stream_id,
                                        NGHTTP2_REFUSED_STREAM);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    nghttp2_session_set_stream_user_data(ng, f->hd.stream_id, s);
    return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *f,
                     const uint8_t *name, size_t nn, const uint8_t *value,
                     size_t vn, uint8_t flags, void *ud)
{
    sl_h2_t *h2 = ud;
    sl_h2_stream_t *s;
    size_t max = (size_t)opts(h2)->http2_max_header_list_size;
    int rc;

    (void)flags;
    if (f->hd.type != NGHTTP2_HEADERS)
        return 0;
    s = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
    if (s == NULL || s->head_done)
        return 0; /* trailer fields of a request: nothing takes them */
    s->head_bytes += (uint32_t)(nn + vn + 32);
    if (max > 0 && s->head_bytes > max * HEADER_BOMB_FACTOR) {
        /* an HPACK bomb: what it decodes to is not a request */
        (void)nghttp2_session_terminate_session(ng, NGHTTP2_ENHANCE_YOUR_CALM);
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    if (s->http_error != 0)
        return 0;
    if (max > 0 && s->head_bytes > max) {
        s->http_error = 431;
        return 0;
    }
    rc = sl_h2_stream_field(s, name, nn, value, vn);
    if (rc != 0)
        s->http_error = rc < 0 ? 500 : (uint16_t)rc;
    return 0;
}

/* S's head is whole: it waits for the session to dispatch it. */
static void ready_push(sl_h2_t *h2, sl_h2_stream_t *s)
{
    s->queued = true;
    s->ready = NULL;
    if (h2->ready_tail != NULL)
        h2->ready_tail->ready = s;
    else
        h2->ready_head = s;
    h2->ready_tail = s;
}

/* Body bytes of S are in (or its end): an executor waiting hears. */
static void body_end(sl_h2_stream_t *s)
{
    pthread_mutex_lock(&s->x.mu);
    s->x.body_done = true;
    sl_exch_wake(&s->x);
    pthread_mutex_unlock(&s->x.mu);
}

/* A second of floods: its counts start over. */
static void flood_tick(sl_h2_t *h2)
{
    ev_tstamp now = ev_now(h2->c->pump->loop);

    if (now - h2->flood_since >= 1.0) {
        h2->flood_since = now;
        h2->resets = 0;
        h2->empty_data = 0;
    }
}

/* The peer floods: the connection ends with ENHANCE_YOUR_CALM. */
static int calm_down(sl_h2_t *h2, const char *what)
{
    char peer[64];
    int port;

    sl_conn_peer(h2->c, peer, sizeof(peer), &port);
    sl_warn("HTTP/2: %s from %s: closing the connection", what, peer);
    (void)nghttp2_session_terminate_session(h2->ng, NGHTTP2_ENHANCE_YOUR_CALM);
    return NGHTTP2_ERR_CALLBACK_FAILURE;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    sl_h2_t *h2 = ud;
    sl_h2_stream_t *s;
    int rc;

    switch (f->hd.type) {
    case NGHTTP2_HEADERS:
        s = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
        if (s == NULL)
            return 0;
        if (!s->head_done) {
            rc = sl_h2_stream_head(s, f->hd.flags & NGHTTP2_FLAG_END_STREAM);
            if (rc != 0 && s->http_error == 0)
                s->http_error = (uint16_t)rc;
            s->x.body_done = !s->x.req.has_body;
            ready_push(h2, s);
        } else if (f->hd.flags & NGHTTP2_FLAG_END_STREAM) {
            body_end(s); /* trailer fields end the body */
        }
        return 0;
    case NGHTTP2_DATA:
        s = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
        if (f->hd.length == 0 && !(f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
            flood_tick(h2);
            if (++h2->empty_data > EMPTY_DATA_MAX)
                return calm_down(h2, "a flood of empty DATA frames");
        }
        if (s != NULL && (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
            body_end(s);
        return 0;
    case NGHTTP2_PING:
        if ((f->hd.flags & NGHTTP2_FLAG_ACK) && h2->notice_sent &&
            !h2->goaway_final) {
            /* a round trip after the notice: what the client sent before
             * it has come, so the last stream id is final (RFC 9113 §6.8) */
            h2->goaway_final = true;
            (void)nghttp2_submit_goaway(
                ng, NGHTTP2_FLAG_NONE,
                nghttp2_session_get_last_proc_stream_id(ng), NGHTTP2_NO_ERROR,
                NULL, 0);
        }
        return 0;
    default:
        return 0;
    }
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t sid,
                         const uint8_t *data, size_t len, void *ud)
{
    sl_h2_t *h2 = ud;
    sl_h2_stream_t *s = nghttp2_session_get_stream_user_data(ng, sid);
    const sl_options_t *o = opts(h2);
    sl_exch_t *x;
    bool drop;

    (void)flags;
    if (s == NULL) {
        (void)nghttp2_session_consume_connection(ng, len);
        return 0;
    }
    x = &s->x;
    pthread_mutex_lock(&x->mu);
    x->body_total += len;
    /* nobody will read it: a response already over, a request refused */
    drop = x->resp_done || s->resp_end || s->http_error != 0 || x->aborted;
    if (!drop && o->limit_request_body > 0 &&
        x->body_total > (uint64_t)o->limit_request_body) {
        /* a body without a length, past the limit: the stream ends */
        x->aborted = true;
        drop = true;
        (void)nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, sid,
                                        NGHTTP2_CANCEL);
    }
    if (!drop) {
        if (x->body.data == NULL)
            (void)sl_bufcache_get(&h2->c->pump->bufs, &x->body, len);
        if (sl_buf_append(&x->body, data, len) < 0) {
            x->aborted = true;
            drop = true;
            (void)nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, sid,
                                            NGHTTP2_INTERNAL_ERROR);
        }
    }
    if (drop) {
        s->consumed += len;
        (void)nghttp2_session_consume(ng, sid, len);
    } else {
        /* the app's reads must tell the loop: the window opens then */
        x->body_paused = true;
    }
    sl_exch_wake(x);
    pthread_mutex_unlock(&x->mu);
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t sid, uint32_t code,
                           void *ud)
{
    sl_h2_t *h2 = ud;
    sl_h2_stream_t *s = nghttp2_session_get_stream_user_data(ng, sid);
    uint64_t unread;

    if (s == NULL)
        return 0;
    s->closed = true;
    nghttp2_session_set_stream_user_data(ng, sid, NULL);
    /* body bytes nobody consumed still hold the connection's window */
    pthread_mutex_lock(&s->x.mu);
    unread = s->x.body_total - s->consumed;
    s->consumed = s->x.body_total;
    if (!s->resp_end && code != NGHTTP2_NO_ERROR) {
        /* reset before its answer: the app hears the client left */
        s->x.aborted = true;
        sl_exch_wake(&s->x);
        flood_tick(h2);
        if (s->with_exec || s->queued)
            h2->resets++;
    } else if (!s->resp_end) {
        s->x.peer_gone = true;
        sl_exch_wake(&s->x);
    }
    pthread_mutex_unlock(&s->x.mu);
    if (unread > 0)
        (void)nghttp2_session_consume_connection(ng, (size_t)unread);
    if (h2->resets >
        (uint32_t)opts(h2)->http2_max_concurrent_streams * RESETS_FACTOR)
        return calm_down(h2, "streams reset faster than they are served");
    if (!s->with_exec && !s->queued) {
        if (s->x.req.start > 0 && s->x.resp_status != 0 && !s->counted)
            sl_exch_done(h2->c->pump, &s->x, true);
        sl_h2_stream_free(s);
    }
    return 0;
}

static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    sl_h2_stream_t *s;

    (void)ud;
    /* the answer is whole while the client still sends its body: the
     * stream ends here (RFC 9113 §8.1) */
    if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) &&
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
        (s = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id)) !=
            NULL &&
        nghttp2_session_get_stream_remote_close(ng, f->hd.stream_id) == 0)
        (void)nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, f->hd.stream_id,
                                        NGHTTP2_NO_ERROR);
    return 0;
}

static ssize_t data_read(nghttp2_session *ng, int32_t sid, uint8_t *buf,
                         size_t len, uint32_t *flags, nghttp2_data_source *src,
                         void *ud)
{
    sl_h2_stream_t *s = src->ptr;
    sl_exch_t *x = &s->x;
    long n;

    (void)ng;
    (void)sid;
    (void)ud;
    n = sl_h2_stream_body(s, buf, len, flags);
    if (n == -2) {
        s->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    if (n < 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets the stream */
    s->progress = ev_now(s->x.conn->pump->loop);
    pthread_mutex_lock(&x->mu);
    x->inflight = sl_buf_pending(&s->raw);
    if (x->inflight + x->out.len <= SL_CONN_CREDIT / 2)
        sl_exch_wake(x);
    pthread_mutex_unlock(&x->mu);
    return n;
}

/* ------------------------------------------------------------------ */
/* streams and the executor                                           */

/* Submit S's response head once raw holds it, with the body to follow
 * from raw. */
static void answer(sl_h2_t *h2, sl_h2_stream_t *s)
{
    nghttp2_nv nv[SL_H2_FIELDS_MAX];
    nghttp2_data_provider dp = {.source.ptr = s, .read_callback = data_read};
    size_t n = 0;
    int status = 0, rc;

    rc = sl_h2_stream_head_out(s, nv, SL_H2_FIELDS_MAX, &n, &status);
    if (rc == 0 && !s->resp_end)
        return; /* more of the head to come */
    if (rc <= 0) {
        (void)nghttp2_submit_rst_stream(h2->ng, NGHTTP2_FLAG_NONE, s->sid,
                                        NGHTTP2_INTERNAL_ERROR);
        s->answered = true;
        return;
    }
    s->answered = true;
    if (s->no_body || (s->resp_end && s->sized && s->left == 0)) {
        s->resp = SL_H2_RESP_END;
        rc = nghttp2_submit_response(h2->ng, s->sid, nv, n, NULL);
    } else {
        rc = nghttp2_submit_response(h2->ng, s->sid, nv, n, &dp);
    }
    sl_buf_consume(&s->raw, s->head_len);
    if (s->resp == SL_H2_RESP_END)
        sl_buf_consume(&s->raw, sl_buf_pending(&s->raw));
    if (rc != 0)
        (void)nghttp2_submit_rst_stream(h2->ng, NGHTTP2_FLAG_NONE, s->sid,
                                        NGHTTP2_INTERNAL_ERROR);
}

/* The executor of S queued something: take it and frame it. */
static void stream_take(sl_h2_t *h2, sl_h2_stream_t *s)
{
    sl_exch_t *x = &s->x;
    uint64_t read;
    bool ended;

    pthread_mutex_lock(&x->mu);
    sl_h2_stream_take(s);
    ended = x->resp_done && !s->resp_end;
    if (ended)
        s->resp_end = true;
    /* the body the app read: its bytes go back to the peer's window */
    read = x->body_total - sl_buf_pending(&x->body);
    if (read > s->consumed && !s->closed) {
        (void)nghttp2_session_consume(h2->ng, s->sid,
                                      (size_t)(read - s->consumed));
        s->consumed = read;
    }
    if (!x->body_done)
        x->body_paused = true;
    pthread_mutex_unlock(&x->mu);
    if (ended) {
        s->with_exec = false;
        h2->nexec--;
        h2->c->pump->inflight--;
        if (x->aborted && !s->closed)
            (void)nghttp2_submit_rst_stream(h2->ng, NGHTTP2_FLAG_NONE, s->sid,
                                            NGHTTP2_INTERNAL_ERROR);
    }
    if (s->closed) {
        if (!s->with_exec) {
            if (!s->counted && x->resp_status != 0)
                sl_exch_done(h2->c->pump, x, true);
            sl_h2_stream_free(s);
        }
        return;
    }
    if (!s->answered) {
        answer(h2, s);
    } else if (s->deferred && (sl_buf_pending(&s->raw) > 0 || s->resp_end)) {
        s->deferred = false;
        (void)nghttp2_session_resume_data(h2->ng, s->sid);
    }
    if (ended && !s->counted && x->resp_status != 0) {
        /* the access log's line and the metrics: at the executor's END */
        s->counted = true;
        sl_exch_done(h2->c->pump, x, true);
    }
}

/* Answer S with a response the loop makes itself (STATUS, or the health
 * check's), as its executor would have. */
static void answer_self(sl_h2_t *h2, sl_h2_stream_t *s, int status)
{
    sl_exch_t *x = &s->x;
    sl_pump_t *p = h2->c->pump;
    size_t mark;

    if (x->req.start == 0)
        x->req.start = ev_now(p->loop);
    (void)sl_bufcache_get(&p->bufs, &s->raw, SL_BUFCACHE_MIN);
    mark = s->raw.len;
    if (status != 0)
        (void)sl_http_error_head(&s->raw, status);
    else
        (void)sl_http_health_head(&s->raw, &x->req,
                                  !p->drain.terminating || p->drain.restart);
    sl_exch_note_head(x, s->raw.data + mark, s->raw.len - mark, true);
    s->resp_end = true;
    answer(h2, s);
    if (!s->counted) {
        s->counted = true;
        sl_exch_done(p, x, status == 0 || x->req.method_len > 0);
    }
}

/* Hand S's request to the executor, or run it here (on-loop). */
static void dispatch(sl_h2_t *h2, sl_h2_stream_t *s)
{
    sl_pump_t *p = h2->c->pump;
    sl_exch_t *x = &s->x;

    if (s->http_error != 0) {
        answer_self(h2, s, s->http_error);
        return;
    }
    if (sl_http_is_health(&x->req, p->opt->health_path)) {
        answer_self(h2, s, 0);
        return;
    }
    pthread_mutex_lock(&x->mu);
    x->gen++;
    sl_conn_buf_ready(h2->c, &x->out);
    if (sl_accesslog_wants_head(p->alog))
        sl_conn_buf_ready(h2->c, &x->resp_head);
    pthread_mutex_unlock(&x->mu);
    if (x->req.expect_continue && !x->body_done) {
        static const nghttp2_nv cont[] = {
            {(uint8_t *)":status", (uint8_t *)"100", 7, 3, 0}};
        (void)nghttp2_submit_headers(h2->ng, NGHTTP2_FLAG_NONE, s->sid, NULL,
                                     cont, 1, NULL);
    }
    s->with_exec = true;
    h2->nexec++;
    if (p->exec->on_loop) {
        p->inflight++;
        x->picked = x->req.start;
        p->exec->run(x);
        ev_now_update(p->loop);
        if (s->h2 != NULL)
            stream_take(h2, s);
        return;
    }
    sl_exec_submit(p, x);
}

/* Work the ready queue: never inside nghttp2's calls, never twice at
 * once (an on-loop app that waits comes back into the session). */
static void dispatch_ready(sl_h2_t *h2)
{
    sl_h2_stream_t *s;

    if (h2->in_recv || h2->dispatching)
        return;
    h2->dispatching = true;
    while ((s = h2->ready_head) != NULL && !h2->failed) {
        h2->ready_head = s->ready;
        if (h2->ready_head == NULL)
            h2->ready_tail = NULL;
        s->queued = false;
        if (s->closed) {
            sl_h2_stream_free(s); /* reset before it was served */
            continue;
        }
        dispatch(h2, s);
    }
    h2->dispatching = false;
}

/* ------------------------------------------------------------------ */
/* bytes in and out                                                   */

/* Write what nghttp2 has to send. 1 when all is written, 0 when the
 * socket is full, -1 when the connection is broken. */
static int session_send(sl_h2_t *h2)
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
        if (rc == NGHTTP2_ERR_FLOODED) {
            char peer[64];
            int port;
            sl_conn_peer(h2->c, peer, sizeof(peer), &port);
            sl_warn("HTTP/2: %s floods control frames: closing the "
                    "connection",
                    peer);
        }
        h2->failed = true;
        return -1;
    }
    return 0;
}

/* Read what the socket has, up to READS_PER_IO chunks. 0, or -1 when
 * the peer left or broke the protocol. */
static int session_read(sl_h2_t *h2)
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
static void session_fail(sl_h2_t *h2)
{
    h2->failed = true;
    abort_streams(h2);
    if (h2->nexec == 0) {
        (void)session_send(h2);
        sl_conn_close(h2->c);
        return;
    }
    sl_conn_watch(h2->c, 0);
}

static void session_process(sl_h2_t *h2)
{
    sl_conn_t *c = h2->c;
    int events = 0, rc;

    if (h2->failed) {
        session_fail(h2);
        return;
    }
    dispatch_ready(h2);
    if (c->state == SL_CONN_FREE || h2->failed) {
        if (c->state != SL_CONN_FREE)
            session_fail(h2);
        return;
    }
    rc = session_send(h2);
    if (rc < 0) {
        session_fail(h2);
        return;
    }
    if (rc == 0)
        events |= EV_WRITE;
    if (h2->nstreams == 0 && h2->quiet_since == 0)
        h2->quiet_since = ev_now(c->pump->loop);
    else if (h2->nstreams > 0)
        h2->quiet_since = 0;
    if (!nghttp2_session_want_read(h2->ng) &&
        !nghttp2_session_want_write(h2->ng) && rc == 1 && h2->nexec == 0) {
        /* both sides are done: GOAWAY sent and every stream over */
        sl_conn_close(c);
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

    if ((ready & EV_READ) && session_read(h2) < 0)
        h2->failed = true;
    session_process(h2);
}

static void h2_complete(sl_conn_t *c)
{
    (void)c; /* streams complete one by one: sl_h2_complete() */
}

void sl_h2_complete(sl_exch_t *x)
{
    sl_h2_stream_t *s = (sl_h2_stream_t *)x;
    sl_h2_t *h2 = s->h2;

    if (h2 == NULL) {
        /* an orphan: its connection closed while the executor had it */
        pthread_mutex_lock(&x->mu);
        sl_h2_stream_take(s);
        pthread_mutex_unlock(&x->mu);
        if (x->resp_done) {
            x->conn->pump->inflight--;
            sl_h2_stream_free(s);
        }
        return;
    }
    if (!s->with_exec && !s->closed && s->resp_end)
        return; /* a stale notice */
    stream_take(h2, s);
    /* written at the pass's end, with the others' (sl_h2_flush()) */
    if (!h2->dirty && h2->c->sess == &sl_h2_session) {
        sl_pump_t *p = h2->c->pump;
        h2->dirty = true;
        h2->dirty_next = p->h2dirty;
        p->h2dirty = h2;
    }
}

void sl_h2_flush(sl_pump_t *p)
{
    sl_h2_t *h2;

    while ((h2 = p->h2dirty) != NULL) {
        p->h2dirty = h2->dirty_next;
        h2->dirty = false;
        if (!h2->in_recv)
            session_process(h2);
    }
}

double sl_h2_oldest(const sl_conn_t *c)
{
    const sl_h2_stream_t *s;
    ev_tstamp oldest = 0;

    for (s = c->h2->streams; s != NULL; s = s->next)
        if (s->with_exec && (oldest == 0 || s->x.req.start < oldest))
            oldest = s->x.req.start;
    return oldest;
}

static void h2_sweep(sl_conn_t *c, ev_tstamp now)
{
    sl_h2_t *h2 = h2_of(c);
    const sl_options_t *o = c->pump->opt;
    sl_h2_stream_t *s, *next;

    if (h2->failed)
        return;
    if (c->deadline > 0 && now >= c->deadline &&
        sl_buf_pending(&c->tx.buf) > 0) {
        /* the client takes nothing: --send-timeout for the connection */
        session_fail(h2);
        return;
    }
    if (h2->nstreams == 0 && h2->quiet_since > 0 &&
        now - h2->quiet_since >= o->keep_alive) {
        (void)nghttp2_session_terminate_session(h2->ng, NGHTTP2_NO_ERROR);
        h2->failed = true;
        session_fail(h2);
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
            session_fail(h2);
            return;
        }
    }
    /* a stream the peer's window holds: --send-timeout for the stream */
    for (s = h2->streams; s != NULL && o->send_timeout > 0; s = next) {
        next = s->next;
        if (s->answered && !s->deferred && s->resp != SL_H2_RESP_END &&
            !s->closed && now - s->progress >= o->send_timeout) {
            s->progress = now;
            (void)nghttp2_submit_rst_stream(h2->ng, NGHTTP2_FLAG_NONE, s->sid,
                                            NGHTTP2_CANCEL);
        }
    }
    session_process(h2);
}

static void h2_going_away(sl_conn_t *c, unsigned code)
{
    sl_h2_t *h2 = h2_of(c);

    (void)code;
    if (h2->notice_sent || h2->failed)
        return;
    /* RFC 9113 §6.8: the highest stream id first, and a PING; the last
     * stream id goes when its ACK comes (on_frame_recv) */
    h2->notice_sent = true;
    h2->notice_at = ev_now(c->pump->loop);
    (void)nghttp2_submit_shutdown_notice(h2->ng);
    /* nghttp2 sends a PING before a GOAWAY queued with it: the notice
     * goes first, so the ACK comes after the client has seen it */
    if (session_send(h2) < 0) {
        session_fail(h2);
        return;
    }
    (void)nghttp2_submit_ping(h2->ng, NGHTTP2_FLAG_NONE, NULL);
    session_process(h2);
}

static bool h2_drain(sl_conn_t *c, ev_tstamp now, ev_tstamp grace)
{
    sl_h2_t *h2 = h2_of(c);

    (void)grace;
    if (!h2->notice_sent)
        h2_going_away(c, 0);
    if (c->state == SL_CONN_FREE)
        return true;
    if (!h2->goaway_final && now - h2->notice_at >= NOTICE_WAIT) {
        h2->goaway_final = true;
        (void)nghttp2_submit_goaway(
            h2->ng, NGHTTP2_FLAG_NONE,
            nghttp2_session_get_last_proc_stream_id(h2->ng), NGHTTP2_NO_ERROR,
            NULL, 0);
    }
    if (h2->goaway_final && h2->nstreams == 0 && h2->nexec == 0 &&
        sl_buf_pending(&c->tx.buf) == 0) {
        (void)session_send(h2);
        sl_conn_close(c);
        return true;
    }
    session_process(h2);
    return c->state == SL_CONN_FREE;
}

static void h2_abort(sl_conn_t *c)
{
    session_fail(h2_of(c));
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

/* ------------------------------------------------------------------ */
/* start and end                                                      */

static nghttp2_session_callbacks *callbacks;

static int callbacks_make(void)
{
    if (callbacks != NULL)
        return 0;
    if (nghttp2_session_callbacks_new(&callbacks) != 0)
        return -1;
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks,
                                                            on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks,
                                                         on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks,
                                                              on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks,
                                                           on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(callbacks,
                                                         on_frame_send);
    return 0;
}

static nghttp2_option *options_make(const sl_options_t *o)
{
    nghttp2_option *opt;

    if (nghttp2_option_new(&opt) != 0)
        return NULL;
    nghttp2_option_set_no_auto_window_update(opt, 1);
    nghttp2_option_set_no_recv_client_magic(opt, 0);
    /* at most the streams allowed, ever open at once, and no more
     * remembered closed ones than that */
    nghttp2_option_set_max_reserved_remote_streams(opt, 0);
    (void)o;
    return opt;
}

static int session_new(sl_h2_t *h2)
{
    const sl_options_t *o = opts(h2);
    static nghttp2_option *opt;
    uint32_t window;
    nghttp2_settings_entry iv[5];
    int n = 0;

    if (callbacks_make() < 0)
        return -1;
    if (opt == NULL && (opt = options_make(o)) == NULL)
        return -1;
    if (nghttp2_session_server_new2(&h2->ng, callbacks, h2, opt) != 0)
        return -1;
    iv[n++] =
        (nghttp2_settings_entry){NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
                                 (uint32_t)o->http2_max_concurrent_streams};
    iv[n++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE,
                                       (uint32_t)o->http2_initial_window_size};
    iv[n++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_MAX_FRAME_SIZE,
                                       (uint32_t)o->http2_max_frame_size};
    iv[n++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
                                       (uint32_t)o->http2_max_header_list_size};
    iv[n++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_ENABLE_PUSH, 0};
    if (nghttp2_submit_settings(h2->ng, NGHTTP2_FLAG_NONE, iv, (size_t)n) != 0)
        return -1;
    /* the connection's window: every stream's together, so that one
     * stream's unread body never stalls the others */
    window = (uint64_t)o->http2_max_concurrent_streams *
                         (uint64_t)o->http2_initial_window_size >
                     0x7fffffff
                 ? 0x7fffffff
                 : (uint32_t)o->http2_max_concurrent_streams *
                       (uint32_t)o->http2_initial_window_size;
    if (window > 65535 &&
        nghttp2_session_set_local_window_size(h2->ng, NGHTTP2_FLAG_NONE, 0,
                                              (int32_t)window) != 0)
        return -1;
    return 0;
}

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
    c->pump->h2sessions++;
    sl_metrics_add(&sl_metrics_self->h2_conns, 1);
    c->sess = &sl_h2_session;
    c->state = SL_CONN_H2;
    c->deadline = 0;
    sl_pool_idle_remove(&c->pump->pool, c);
    h2->flood_since = ev_now(c->pump->loop);
    if (session_new(h2) < 0) {
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
    session_process(h2);
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
            continue;
        }
        s->h2 = NULL;
        sl_h2_stream_free(s);
    }
    nghttp2_session_del(h2->ng);
    h2->c->pump->h2sessions--;
    free(h2);
}

/* ------------------------------------------------------------------ */
/* on-loop executors                                                  */

void sl_h2_inline_notify(sl_exch_t *x)
{
    sl_h2_stream_t *s = (sl_h2_stream_t *)x;
    sl_h2_t *h2 = s->h2;

    if (h2 == NULL || h2->failed)
        return;
    /* what the app queued goes now, as far as the socket and the peer's
     * window take it (a streamed event must not sit in a buffer); mu is
     * let go while the session's calls take it */
    pthread_mutex_unlock(&x->mu);
    stream_take(h2, s);
    if (session_send(h2) < 0)
        h2->failed = true;
    pthread_mutex_lock(&x->mu);
}

int sl_h2_inline_wait(sl_exch_t *x, int what)
{
    sl_h2_stream_t *s = (sl_h2_stream_t *)x;
    sl_h2_t *h2 = s->h2;
    sl_conn_t *c;
    int rc = 0;

    if (h2 == NULL)
        return -1;
    c = h2->c;
    /* mu is held: the session's own calls take it, so it is let go
     * while they run */
    pthread_mutex_unlock(&x->mu);
    for (;;) {
        stream_take(h2, s);
        if (session_send(h2) < 0 || h2->failed) {
            rc = -1;
            break;
        }
        pthread_mutex_lock(&x->mu);
        if (x->aborted ||
            (what == SL_AWAIT_BODY &&
             (sl_buf_pending(&x->body) > 0 || x->body_done)) ||
            (what == SL_AWAIT_CREDIT &&
             x->out.len + x->inflight <= SL_CONN_CREDIT / 2)) {
            pthread_mutex_unlock(&x->mu);
            break;
        }
        pthread_mutex_unlock(&x->mu);
        if (!sl_inline_poll(c, what == SL_AWAIT_BODY ? EV_READ : EV_WRITE,
                            sl_buf_pending(&c->tx.buf) > 0)) {
            rc = -1;
            break;
        }
        if (session_read(h2) < 0) {
            rc = -1;
            break;
        }
    }
    pthread_mutex_lock(&x->mu);
    if (rc < 0)
        x->aborted = true;
    return x->aborted ? -1 : 0;
}
