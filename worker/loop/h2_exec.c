/* h2_exec.c - the HTTP/2 session's streams and the executor: dispatch
 * (a submit, or a run on the loop thread), what an executor queued taken
 * and framed, the body it read given back to the peer's window, the
 * answers the loop makes itself (errors, the health check), and the
 * blocking waits of an executor on the loop thread (WSGI inline).
 *
 * The response goes out as executors write it for HTTP/1.1 (h2_stream.c
 * reads it back): a HEADERS frame once its head is whole, then DATA as
 * the peer's windows allow, from a data source that is deferred while
 * nothing is there and resumed when the executor queues more. Sessions
 * that completions touched write once, at the pass's end (sl_h2_flush()).
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
#include "worker/loop/pump.h"
#include "worker/loop/served.h"
#include "worker/loop/static.h"

/* ------------------------------------------------------------------ */
/* streams and the executor                                           */

/* Submit S's response head once raw holds it, with the body to follow
 * from raw. */
static void answer(sl_h2_t *h2, sl_h2_stream_t *s)
{
    nghttp2_nv nv[SL_H2_FIELDS_MAX];
    nghttp2_data_provider dp = {.source.ptr = s,
                                .read_callback = sl_h2_data_read};
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
static void answer_self(sl_h2_t *h2, sl_h2_stream_t *s, int status);

void sl_h2_stream_take_out(sl_h2_t *h2, sl_h2_stream_t *s)
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
        if (s->http_error != 0 && !s->answered && !s->closed) {
            /* the body was refused (413) and the app's answer never
             * began: say so instead */
            sl_buf_reset(&s->raw, SL_CONN_BUF_KEEP);
            pthread_mutex_lock(&x->mu);
            x->resp_status = 0;
            x->resp_head.len = 0;
            pthread_mutex_unlock(&x->mu);
            answer_self(h2, s, s->http_error);
            return;
        }
        if (x->aborted && !s->closed)
            (void)nghttp2_submit_rst_stream(h2->ng, NGHTTP2_FLAG_NONE, s->sid,
                                            NGHTTP2_INTERNAL_ERROR);
    }
    if (s->closed) {
        /* one still on the ready queue is given back there */
        if (!s->with_exec && !s->queued) {
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

/* S's answer, made by the loop itself and noted: framed, and counted once
 * (HEAD: its request's head was whole). */
static void answered_here(sl_h2_t *h2, sl_h2_stream_t *s, bool head)
{
    s->resp_end = true;
    answer(h2, s);
    if (!s->counted) {
        s->counted = true;
        sl_exch_done(h2->c->pump, &s->x, head);
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
    answered_here(h2, s, status == 0 || x->req.method_len > 0);
}

/* Answer S from the --static map MAP (static.h): the head, then the file
 * as the stream's tail. */
static void answer_static(sl_h2_t *h2, sl_h2_stream_t *s, int map)
{
    sl_exch_t *x = &s->x;
    sl_pump_t *p = h2->c->pump;
    sl_static_body_t body;
    size_t mark;

    x->req.start = ev_now(p->loop);
    x->req.from_static = true;
    (void)sl_bufcache_get(&p->bufs, &s->raw, SL_BUFCACHE_MIN);
    mark = s->raw.len;
    if (sl_static_answer(p->statics, map, &x->req, &s->raw, &body) < 0) {
        answer_self(h2, s, 500); /* out of memory: nothing was added */
        return;
    }
    sl_exch_note_head(x, s->raw.data + mark, s->raw.len - mark, true);
    if (body.fd >= 0) {
        s->tail.file_fd = body.fd;
        s->tail.file_off = body.off;
        s->tail.len = body.len;
        x->resp_body = body.len;
    }
    answered_here(h2, s, true);
}

/* Hand S's request to the executor, or run it here (on-loop). */
static void dispatch(sl_h2_t *h2, sl_h2_stream_t *s)
{
    sl_pump_t *p = h2->c->pump;
    sl_exch_t *x = &s->x;
    int map;

    if (s->http_error != 0) {
        answer_self(h2, s, s->http_error);
        return;
    }
    if (sl_http_is_health(&x->req, p->opt->health_path)) {
        answer_self(h2, s, 0);
        return;
    }
    if ((map = sl_static_match(p->statics, &x->req)) >= 0) {
        answer_static(h2, s, map);
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
            sl_h2_stream_take_out(h2, s);
        return;
    }
    sl_exec_submit(p, x);
}

/* Work the ready queue: never inside nghttp2's calls, never twice at
 * once (an on-loop app that waits comes back into the session). */
void sl_h2_dispatch_ready(sl_h2_t *h2)
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

void sl_h2_complete(sl_exch_t *x)
{
    sl_h2_stream_t *s = (sl_h2_stream_t *)x;
    sl_h2_t *h2 = s->h2;
    bool done;

    if (s->orphan) {
        /* its connection closed while the executor had it: it ends at
         * the executor's END */
        pthread_mutex_lock(&x->mu);
        sl_h2_stream_take(s);
        done = x->resp_done;
        pthread_mutex_unlock(&x->mu);
        if (done) {
            x->conn->pump->inflight--;
            sl_h2_stream_free(s);
        }
        return;
    }
    if (h2 == NULL)
        return; /* a stale notice for a stream given back */
    if (!s->with_exec && !s->closed && s->resp_end)
        return; /* a stale notice */
    sl_h2_stream_take_out(h2, s);
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
            sl_h2_process(h2);
    }
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
    sl_h2_stream_take_out(h2, s);
    if (sl_h2_send(h2) < 0)
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
        sl_h2_stream_take_out(h2, s);
        if (sl_h2_send(h2) < 0 || h2->failed) {
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
        if (!sl_conn_poll(c, what == SL_AWAIT_BODY ? EV_READ : EV_WRITE,
                          sl_buf_pending(&c->tx.buf) > 0)) {
            rc = -1;
            break;
        }
        if (sl_h2_read(h2) < 0) {
            rc = -1;
            break;
        }
    }
    pthread_mutex_lock(&x->mu);
    if (rc < 0)
        x->aborted = true;
    return x->aborted ? -1 : 0;
}
