/* h2_frames.c - what nghttp2 tells the HTTP/2 session (h2.h) as it reads
 * the client's frames, and the session it is told in: its callbacks,
 * options and first SETTINGS.
 *
 * A request's fields go to its stream (h2_stream.c) as they come; a head
 * that is whole waits on the session's ready queue (h2_exec.c works it,
 * outside nghttp2's calls); body bytes go to the exchange's body buffer
 * under its mutex, and the executor waiting there hears of them.
 *
 * Flow control follows the executors. nghttp2's automatic WINDOW_UPDATE
 * is off: a stream's window opens only as its app reads the body
 * (h2_exec.c gives the bytes back with nghttp2_session_consume()), and
 * the connection's window is the streams' together, so one stream whose
 * app does not read stalls only itself.
 *
 * Floods nghttp2 counts itself (Debian's 1.52 carries the fixes): the
 * stream resets (CVE-2023-44487), CONTINUATION frames (CVE-2024-28182),
 * SETTINGS and the ACKs a peer makes us queue (PING, SETTINGS). Here on
 * top: a request whose fields pass the header list size is answered 431,
 * and far past it the connection ends (an HPACK bomb); empty DATA frames
 * and streams reset before their answer beyond a budget a second end it
 * with ENHANCE_YOUR_CALM; streams still with the executor after their
 * reset count against the concurrency, so resets cannot make the app do
 * more than --http2-max-concurrent-streams at once (twice over).
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

/* Per second: empty DATA frames, and streams reset by the client before
 * their answer, past which the connection ends (ENHANCE_YOUR_CALM). */
#define EMPTY_DATA_MAX 100
#define RESETS_FACTOR  2 /* times --http2-max-concurrent-streams */

/* How far past --http2-max-header-list-size a request's fields may go
 * before the connection, not only the stream, ends. */
#define HEADER_BOMB_FACTOR 4

static const sl_options_t *opts(const sl_h2_t *h2)
{
    return h2->c->pump->opt;
}

/* ------------------------------------------------------------------ */
/* nghttp2's callbacks                                                */

static void flood_tick(sl_h2_t *h2);
static int calm_down(sl_h2_t *h2, const char *what);

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f,
                            void *ud)
{
    sl_h2_t *h2 = ud;
    sl_h2_stream_t *s;
    uint32_t cap = (uint32_t)opts(h2)->http2_max_concurrent_streams;

    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    h2->got_stream = true;
    /* streams reset but still with the executor count too (rapid reset):
     * past twice the concurrency new ones are refused, and a client that
     * goes on opening them in the same second is flooding */
    if (h2->nstreams >= cap * RESETS_FACTOR) {
        flood_tick(h2);
        if (++h2->resets > cap * RESETS_FACTOR)
            return calm_down(h2, "streams opened and reset faster than they"
                                 " are served");
    }
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
        /* a body without a length, past the limit: the app stops, and
         * the answer is 413 unless its own has begun (h2_exec.c) */
        x->aborted = true;
        drop = true;
        sl_exch_wake(x);
        if (s->answered)
            (void)nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, sid,
                                            NGHTTP2_CANCEL);
        else
            s->http_error = 413;
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
    if (!s->resp_end && (code != NGHTTP2_NO_ERROR || !s->x.body_done)) {
        /* reset before its answer (even with NO_ERROR, when its body had
         * not ended: no more of it will come, and a reader waiting for
         * it must hear so): the app hears the client left */
        s->x.aborted = true;
        sl_exch_wake(&s->x);
        flood_tick(h2);
        if (!s->answered)
            h2->resets++; /* opened and dropped before its answer */
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
    const sl_req_t *r;

    (void)ud;
    /* the answer is whole while the client still sends its body: what is
     * left of it is read and dropped when its length is known and small
     * (as HTTP/1.1 does, SL_CONN_DISCARD_MAX), else the stream ends here
     * with NO_ERROR (RFC 9113 §8.1; some clients, curl 7.88 among them,
     * then drop the answer they have) */
    if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) &&
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
        (s = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id)) !=
            NULL &&
        nghttp2_session_get_stream_remote_close(ng, f->hd.stream_id) == 0) {
        r = &s->x.req;
        if (s->has_cl &&
            r->content_length - s->x.body_total <= SL_CONN_DISCARD_MAX)
            return 0;
        (void)nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, f->hd.stream_id,
                                        NGHTTP2_NO_ERROR);
    }
    return 0;
}

ssize_t sl_h2_data_read(nghttp2_session *ng, int32_t sid, uint8_t *buf,
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
    /* nghttp2's own count of resets (CVE-2023-44487) ends a session with
     * INTERNAL_ERROR; ours (on_stream_close) comes first, with
     * ENHANCE_YOUR_CALM, and nghttp2's stays behind it */
    nghttp2_option_set_stream_reset_rate_limit(opt, 10000, 1000);
    (void)o;
    return opt;
}

int sl_h2_session_new(sl_h2_t *h2)
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
