/* h1.c - the HTTP/1.1 session: read, parse, hand off, write, keep alive.
 *
 * A connection speaking HTTP/1.1 is a small state machine driven by
 * conn_process(), the one place that moves it from state to state, so
 * pipelined requests, requests run on the loop thread and completions from
 * the executor all take the same path:
 *
 *   READING  --head parsed-->  SERVING  --executor END-->  WRITING
 *      ^                                                      |
 *      +------------------ keep-alive ------------------------+
 *                                                             v
 *                                       CLOSING (lingering) -> FREE
 *
 * The parser is paused after every message, so bytes of a pipelined request
 * wait in the read buffer until the response before them is written; that is
 * what keeps responses in order. Request heads are parsed as offsets into the
 * read buffer and copied once into the request's own buffer when complete,
 * which frees the read buffer to move while the body streams.
 *
 * The parser's callbacks live in h1_parse.c; what the connection is below
 * any session (its socket, buffers, watcher, writing) in conn.c; the calls
 * an executor makes in exchange.c. A request that upgrades to a WebSocket
 * hands the connection to that session (conn_ws.c) once the app accepts.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "common/metrics.h"
#include "worker/loop/conn.h"
#include "worker/loop/conn_ws.h"
#include "worker/loop/exec.h"
#include "worker/loop/forwarded.h"
#include "worker/loop/h1.h"
#include "worker/loop/h2.h"
#include "worker/loop/http.h"
#include "worker/loop/pool.h"
#include "worker/loop/h1_ahead.h"
#include "worker/loop/pump.h"
#include "worker/loop/served.h"
#include "worker/loop/static.h"

#define LINGER_SECS   2.0
#define MAX_HEAD_HARD (4 * 1024 * 1024)

static void conn_process(sl_conn_t *c);
static void conn_take(sl_conn_t *c);

/* Give back the read and write buffers when they hold nothing: what
 * makes an idle connection cost its pool entry alone. */
static void conn_free_idle_io(sl_conn_t *c)
{
    if (sl_buf_pending(&c->rbuf) == 0 && !c->h1.in_msg)
        sl_bufcache_put(&c->pump->bufs, &c->rbuf);
    if (sl_buf_pending(&c->tx.buf) == 0)
        sl_bufcache_put(&c->pump->bufs, &c->tx.buf);
}

/* Between requests. An idle connection gives every buffer back; one with
 * the next request already in its read buffer keeps them for it (the
 * request would take them again at once). */
static void conn_reset_request(sl_conn_t *c)
{
    sl_bufcache_t *bc = &c->pump->bufs;
    bool busy = sl_buf_pending(&c->rbuf) > 0 || c->h1.ahead != NULL;

    c->h1.head_done = false;
    c->h1.msg_done = false;
    c->h1.in_msg = false;
    c->h1.http_error = 0;
    c->x.req.url_len = 0;
    c->x.req.has_body = false;
    if (busy && !c->x.req.packed) {
        c->x.req.nhdrs = 0;
        sl_buf_reset(&c->x.req.hbuf, SL_CONN_BUF_KEEP);
        if (c->x.req.client != NULL)
            sl_forwarded_clear(&c->x.req);
    } else {
        sl_conn_free_head(c);
    }
    pthread_mutex_lock(&c->x.mu);
    if (busy) {
        sl_buf_reset(&c->x.body, SL_CONN_BUF_KEEP);
        sl_buf_reset(&c->x.out, SL_CONN_BUF_KEEP);
        sl_buf_reset(&c->x.resp_head, SL_CONN_BUF_KEEP);
    } else {
        sl_bufcache_put(bc, &c->x.body);
        sl_bufcache_put(bc, &c->x.out);
        sl_bufcache_put(bc, &c->x.resp_head);
    }
    c->x.body_done = false;
    c->x.body_paused = false;
    c->x.body_total = 0;
    c->x.resp_done = false;
    c->x.close_after = false;
    c->x.inflight = 0;
    c->x.picked = 0;
    c->x.resp_status = 0;
    c->x.resp_body = 0;
    pthread_mutex_unlock(&c->x.mu);
    c->x.req.start = 0;
    c->x.req.from_static = false;
    sl_buf_compact(&c->rbuf);
    if (!busy)
        conn_free_idle_io(c);
    sl_conn_ws_free(c);
}

/* The request line, each field at its limit (name + value) with ": " and
 * CRLF, and the empty line. */
static size_t max_head(const sl_options_t *o)
{
    size_t n = (size_t)o->limit_request_line + 2 +
               (size_t)o->limit_request_fields *
                   ((size_t)o->limit_request_field_size + 4) +
               2;

    if (o->limit_request_line == 0 || o->limit_request_field_size == 0 ||
        n > MAX_HEAD_HARD)
        n = MAX_HEAD_HARD;
    return n;
}

/* Close after a response: shut our side, then read until the client closes
 * too, so unread input cannot turn our close into a reset that destroys the
 * response on its way. */
static void conn_linger(sl_conn_t *c)
{
    if (c->peer_eof || sl_transport_shutdown(&c->tp) < 0) {
        sl_conn_close(c);
        return;
    }
    c->state = SL_CONN_CLOSING;
    c->deadline = ev_now(c->pump->loop) + LINGER_SECS;
    sl_conn_watch(c, EV_READ);
}

/* The response is written: next request, or close. A response that told
 * the client to keep the connection (its head was made before a drain
 * began) keeps it during a drain too: the client may be sending its next
 * request already, which then gets its answer, with Connection: close,
 * rather than EOF; the drain closes the connection once it has been quiet
 * for its grace (h1_drain()). */
static void conn_finish_request(sl_conn_t *c)
{
    /* after the client's EOF, requests it pipelined before it still count */
    bool keep =
        c->x.req.keep_alive && !c->x.close_after && c->h1.msg_done &&
        (!c->peer_eof || sl_buf_pending(&c->rbuf) > 0 || c->h1.ahead != NULL);

    sl_request_done(c->pump, c);
    if (!keep)
        sl_h1_ahead_drop(c); /* answered by nobody: the client is told */
    conn_reset_request(c);
    if (!keep) {
        conn_linger(c);
        return;
    }
    if (sl_h1_ahead_next(c)) {
        /* the oldest request run ahead is written next */
        conn_take(c);
        return;
    }
    c->state = SL_CONN_READING;
    c->idle_since = ev_now(c->pump->loop);
    c->deadline = c->idle_since + c->pump->opt->keep_alive;
    c->h1.head_clock = false;
    /* idle: evictable when the pool runs out (pump.h); a pipelined request
     * already read makes it busy at once */
    if (sl_buf_pending(&c->rbuf) == 0)
        sl_pool_idle_add(&c->pump->pool, c);
}

/* Hand a complete head to the executor, or have it run the request here
 * on the loop thread (exec->on_loop: exec->run). */
static void conn_dispatch(sl_conn_t *c)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

    c->state = SL_CONN_SERVING;
    sl_output_begin(&c->tx); /* what it holds: answers held (conn_hold()) */
    c->x.req.start = ev_now(c->pump->loop);
    pthread_mutex_lock(&c->x.mu);
    c->x.gen++; /* under mu: a stale executor compares it there */
    c->x.body_done = !c->x.req.has_body || c->h1.msg_done;
    c->x.wake_later = false; /* until a request runs ahead behind it */
    /* what the executor writes goes into cached blocks: in its thread an
     * append would malloc */
    sl_conn_buf_ready(c, &c->x.out);
    if (sl_accesslog_wants_head(c->pump->alog))
        sl_conn_buf_ready(c, &c->x.resp_head);
    pthread_mutex_unlock(&c->x.mu);
    /* out of memory, no interim answer: the client sends the body after
     * its own wait; the response's first bytes must not count as it */
    if (c->x.req.expect_continue && c->x.req.has_body) {
        sl_conn_buf_ready(c, &c->tx.buf);
        if (sl_buf_append(&c->tx.buf, cont, sizeof(cont) - 1) == 0)
            c->tx.interim += sizeof(cont) - 1; /* not part of the response */
    }
    if (c->pump->exec->on_loop) {
        /* a 100 Continue goes now (the client waits for it); answers held
         * for pipelining go with this request's */
        if (c->tx.interim > 0 && c->x.req.expect_continue &&
            c->x.req.has_body && sl_conn_flush(c) < 0)
            c->x.aborted = true;
        c->pump->inflight++;
        c->x.picked = c->x.req.start; /* no queue: it runs now, here */
        c->pump->exec->run(&c->x);
        /* the app held the loop: deadlines set from here on need the real
         * time, not the time the pass began */
        ev_now_update(c->pump->loop);
        conn_take(c);
        return;
    }
    sl_exec_submit(c->pump, &c->x);
}

/* Read once, up to ROOM bytes, their count in *GOT. 1 if bytes came, 0 if
 * none yet, -1 on EOF or error. */
static int conn_read(sl_conn_t *c, size_t room, size_t limit, size_t *got)
{
    sl_buf_t *b = &c->rbuf;
    ssize_t n;

    *got = 0;
    if (b->off == b->len && c->state != SL_CONN_READING)
        b->off = b->len = 0;
    if (c->state == SL_CONN_READING && b->off == b->len && !c->h1.in_msg)
        sl_buf_compact(b);
    if (b->len + room > limit)
        room = limit > b->len ? limit - b->len : 0;
    if (room == 0)
        return 0;
    n = sl_conn_recv(c, room);
    if (n > 0) {
        b->len += (size_t)n;
        *got = (size_t)n;
        sl_metrics_add(&sl_metrics_self->bytes_in, (uint64_t)n);
        sl_pool_idle_remove(&c->pump->pool, c); /* a request begins */
        c->h1.fresh = false;
        return 1;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        if (c->state == SL_CONN_READING)
            conn_free_idle_io(c); /* a wake-up for nothing */
        return 0;
    }
    c->peer_eof = (n == 0);
    return -1;
}

/* Read while a request is served: a body's bytes up to the body window
 * while reads come back full, so that an executor waiting for them hears
 * once for what the socket held (an ASGI app gets it in one message), not
 * once per read; after the body, one read (pipelined requests, EOF). 1, 0
 * or -1 as conn_read(). */
static int conn_read_serving(sl_conn_t *c)
{
    size_t limit = c->rbuf.off + SL_CONN_BODY_WINDOW, got;
    int rc, more;

    if (c->h1.msg_done)
        return conn_read(c, SL_CONN_READ_CHUNK, limit, &got);
    rc = conn_read(c, SL_CONN_BODY_READ, limit, &got);
    while (rc == 1 && got == SL_CONN_BODY_READ) {
        more = conn_read(c, SL_CONN_BODY_READ, limit, &got);
        if (more < 0) {
            /* the end comes again at the next read, once what came
             * before it is parsed */
            c->peer_eof = false;
        }
        if (more != 1)
            break;
    }
    return rc;
}

/* Does C, whose first bytes just came, speak HTTP/2? 1 when ALPN
 * settled on h2, or when the bytes are the client's preface on a plain
 * listener that takes it (--http2-cleartext prior-knowledge); 0 when they
 * are a part of the preface so far; -1: HTTP/1.1. */
static int h2_wanted(sl_conn_t *c)
{
    const sl_tls_info_t *ti = sl_transport_tls_info(&c->tp);
    int rc;

    c->h2_maybe = false;
    if (ti != NULL)
        return ti->alpn != NULL && strcmp(ti->alpn, "h2") == 0 ? 1 : -1;
    if (!c->pump->opt->http2_prior_knowledge || c->x.req.tls)
        return -1;
    rc = sl_h2_preface(c->rbuf.data + c->rbuf.off, sl_buf_pending(&c->rbuf));
    c->h2_maybe = rc == 0;
    return rc;
}

static void on_readable(sl_conn_t *c)
{
    size_t limit, got;
    bool fresh;
    int rc;

    switch (c->state) {
    case SL_CONN_CLOSING: {
        char sink[4096];
        ssize_t n = sl_transport_read(&c->tp, sink, sizeof(sink));
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            sl_conn_close(c);
        return;
    }
    case SL_CONN_READING:
        limit = (c->h1.in_msg ? c->h1.req_start : c->rbuf.off) +
                max_head(c->pump->opt);
        fresh = c->h1.fresh;
        rc = conn_read(c, SL_CONN_READ_CHUNK, limit, &got);
        if (rc == 1 && (fresh || c->h2_maybe)) {
            switch (h2_wanted(c)) {
            case 1:
                sl_h2_start(c);
                return;
            case 0: /* a part of the preface: wait for the rest */
                sl_conn_watch(c, EV_READ);
                return;
            }
        }
        if (rc == 0 && c->rbuf.len >= limit) {
            c->h1.http_error = c->x.req.nhdrs > 0 ? 431 : 414;
            sl_h1_answer_error(c, c->h1.http_error);
            break;
        }
        if (rc < 0 && !c->peer_eof && errno == SL_TRANSPORT_EPLAIN) {
            /* HTTP to a TLS port: the transport is plain now */
            sl_h1_answer_error(c, SL_HTTP_PLAIN_TO_TLS);
            break;
        }
        if (rc < 0 && !c->peer_eof && errno == SL_TRANSPORT_EREFUSED) {
            /* the transport refused the client and told it why: let that
             * arrive */
            conn_linger(c);
            return;
        }
        if (rc < 0 && !c->peer_eof) {
            sl_conn_close(c);
            return;
        }
        break;
    default: /* SERVING or WRITING: body bytes, pipelined requests, EOF */
        rc = conn_read_serving(c);
        if (rc < 0 && (!c->peer_eof || !c->h1.msg_done)) {
            /* gone, or hung up half way through its body */
            sl_h1_ahead_tell(c, true);
        } else if (rc < 0) {
            /* EOF after a whole request: a WSGI response still goes out
             * (the client may have only half-closed), but an ASGI app
             * awaiting http.disconnect hears of it, as under uvicorn */
            sl_h1_ahead_tell(c, false);
        }
        break;
    }
    conn_process(c);
}

/* Take what the executor queued: output, END, and its close request. */
static void conn_take(sl_conn_t *c)
{
    if (c->ahead_writing && !sl_h1_ahead_take(c))
        return; /* a request run ahead, being written: not over yet */
    pthread_mutex_lock(&c->x.mu);
    c->x.notified = false;
    if (sl_buf_pending(&c->x.out) > 0 && sl_conn_take_out(c, &c->x) < 0) {
        /* out of memory: those bytes are lost, so nothing after them may
         * go out either; the executor stops, END closes the connection */
        c->x.aborted = true;
        sl_exch_wake(&c->x);
    }
    if (c->x.resp_done && sl_tail_any(&c->x.tail))
        sl_tail_move(&c->tx.tail, &c->x.tail);
    if (c->x.ws != NULL)
        sl_conn_ws_take_locked(c);
    if (c->x.resp_done && c->state == SL_CONN_SERVING) {
        c->state = SL_CONN_WRITING;
        c->pump->inflight--;
        if (c->x.aborted)
            c->x.close_after = true; /* the client left */
    }
    pthread_mutex_unlock(&c->x.mu);
    if (c->state == SL_CONN_WRITING && c->h1.http_error && !c->tx.wrote_any) {
        /* the body was bad and the app's answer never left: say so */
        if (c->tx.interim == 0) /* keep what is not this response's */
            sl_buf_reset(&c->tx.buf, SL_CONN_BUF_KEEP);
        else
            c->tx.buf.len = c->tx.buf.off + c->tx.interim;
        sl_tail_drop(&c->tx.tail, c->pump->exec->release);
        sl_h1_answer_error(c, c->h1.http_error);
        c->x.aborted = false;
    }
    if (c->x.aborted && c->state == SL_CONN_WRITING) {
        sl_request_done(c->pump, c);
        sl_conn_close(c);
        return;
    }
}

/* Hold C's finished response back instead of writing it now? Only when
 * the client pipelined: the next request is already read, the connection
 * is kept, nothing must follow the response's own bytes (a file, lent
 * bytes) and little is waiting. The next response's write takes both: one
 * write instead of one per response. The READING state writes what is
 * held before it waits for the client, inline.c before a body read
 * blocks. In pump mode the next request runs on another thread and may
 * take its time, so the pump's hold timer bounds the wait, and the
 * SERVING state writes what is held as soon as the next response sends
 * anything. */
static bool conn_hold(const sl_conn_t *c)
{
    return c->h1.msg_done && !c->x.close_after && !c->x.aborted &&
           c->x.req.keep_alive && !c->pump->drain.draining &&
           !sl_tail_any(&c->tx.tail) &&
           (sl_buf_pending(&c->rbuf) > 0 || c->h1.ahead != NULL) &&
           sl_buf_pending(&c->tx.buf) <= SL_CONN_HOLD_MAX;
}

/* The one driver: advance C as far as it can go without waiting. */
static void conn_process(sl_conn_t *c)
{
    int rc, map;
    int events;
    sl_exch_t *w;

    for (;;) {
        switch (c->state) {
        case SL_CONN_READING:
            if (sl_conn_parse(c) < 0) {
                sl_h1_answer_error(c, c->h1.http_error);
                continue;
            }
            /* a body already here is checked before the app sees it, so
             * a bad chunk in the first packet never reaches the app */
            if (c->h1.head_done && c->x.req.has_body && sl_conn_parse(c) < 0) {
                sl_h1_answer_error(c, c->h1.http_error);
                continue;
            }
            if (c->h1.head_done &&
                sl_http_is_health(&c->x.req, c->pump->opt->health_path)) {
                sl_h1_answer_health(c);
                continue;
            }
            if (c->h1.head_done &&
                (map = sl_static_match(c->pump->statics, &c->x.req)) >= 0) {
                sl_h1_answer_static(c, map);
                continue;
            }
            if (c->h1.head_done) {
                conn_dispatch(c);
                if (c->state == SL_CONN_FREE)
                    return;
                continue;
            }
            if (sl_buf_pending(&c->tx.buf) > 0) { /* answers held */
                rc = sl_conn_flush(c);
                if (rc < 0) {
                    sl_conn_close(c);
                    return;
                }
                if (rc == 0) {
                    sl_conn_watch(c,
                                  c->peer_eof ? EV_WRITE : EV_READ | EV_WRITE);
                    return;
                }
            }
            if (c->peer_eof) {
                sl_conn_close(c);
                return;
            }
            sl_conn_watch(c, EV_READ);
            return;

        case SL_CONN_SERVING:
            /* pump mode: stream the body in, the response out; the
             * pipelined requests after a whole one run ahead */
            if (!c->h1.msg_done && sl_conn_parse(c) < 0)
                sl_h1_ahead_tell(c, true); /* x's: none runs ahead */
            sl_h1_ahead_run(c);
            rc = sl_output_holding(&c->tx) ? 1 : sl_conn_flush(c);
            if (rc < 0) {
                sl_h1_ahead_tell(c, true);
                sl_conn_watch(c, 0);
                return;
            }
            events = rc == 0 ? EV_WRITE : 0;
            w = sl_conn_wx(c);
            pthread_mutex_lock(&w->mu);
            w->body_paused = sl_buf_pending(&w->body) >= SL_CONN_BODY_WINDOW ||
                             sl_buf_pending(&c->rbuf) >= SL_CONN_BODY_WINDOW;
            if (!w->body_paused && !c->peer_eof && !w->aborted)
                events |= EV_READ;
            pthread_mutex_unlock(&w->mu);
            sl_conn_watch(c, events);
            return;

        case SL_CONN_WRITING:
            if (conn_hold(c)) {
                if (!c->pump->exec->on_loop)
                    sl_output_hold(&c->tx, &c->pump->holdq,
                                   ev_now(c->pump->loop));
                rc = 1;
            } else {
                rc = sl_conn_flush(c);
            }
            if (rc < 0) {
                sl_request_done(c->pump, c);
                sl_conn_close(c);
                return;
            }
            if (rc == 0) {
                sl_conn_watch(c, EV_WRITE);
                return;
            }
            /* a body the app did not read: drop it, then go on */
            if (!c->h1.msg_done && !c->x.close_after && !c->x.aborted) {
                if (sl_conn_parse(c) < 0) {
                    c->x.close_after = true;
                } else if (!c->h1.msg_done) {
                    if (c->peer_eof) {
                        sl_request_done(c->pump, c);
                        sl_conn_close(c);
                        return;
                    }
                    sl_conn_watch(c, EV_READ);
                    return;
                }
            }
            conn_finish_request(c);
            if (c->state != SL_CONN_READING && c->state != SL_CONN_SERVING &&
                c->state != SL_CONN_WRITING)
                return;
            continue;

        case SL_CONN_WS:
            sl_conn_ws_process(c);
            return;

        default:
            return;
        }
    }
}

static void h1_sweep(sl_conn_t *c, ev_tstamp now)
{
    if (c->deadline == 0 || now < c->deadline)
        return;
    switch (c->state) {
    case SL_CONN_READING:
        c->deadline = 0;
        if (c->h1.in_msg || c->rbuf.len > c->rbuf.off) {
            sl_h1_answer_error(c, 408);
            conn_process(c);
        } else {
            sl_conn_close(c);
        }
        break;
    case SL_CONN_CLOSING:
        sl_conn_close(c);
        break;
    case SL_CONN_SERVING: /* the send timeout: the app hears of it */
        c->deadline = 0;
        sl_conn_abort(c);
        break;
    case SL_CONN_WRITING:
        sl_request_done(c->pump, c);
        sl_conn_close(c);
        break;
    default:
        break;
    }
}

static bool h1_drain(sl_conn_t *c, ev_tstamp now, ev_tstamp grace)
{
    size_t got;
    int rc;

    /* busy ones: their response says Connection: close (the drain began
     * before its head was made), or they come back here once it is written */
    if (c->state != SL_CONN_READING || c->rbuf.off != c->rbuf.len ||
        c->h1.in_msg || sl_buf_pending(&c->tx.buf) > 0)
        return false;
    /* a request may sit in the kernel, read but for us: serve it */
    rc = conn_read(c, SL_CONN_READ_CHUNK, c->rbuf.off + max_head(c->pump->opt),
                   &got);
    if (rc > 0 || (rc < 0 && c->peer_eof)) {
        conn_process(c);
        return c->state == SL_CONN_FREE;
    }
    if (rc == 0 && sl_transport_opening(&c->tp)) {
        /* a handshake under way is not quiet: the grace counts from its
         * end, as a plain connection's does from its accept (a stalled
         * one ends at the header timeout) */
        c->idle_since = now;
        return false;
    }
    if (c->h1.fresh && grace < SL_CONN_FRESH_GRACE)
        grace = SL_CONN_FRESH_GRACE;
    if (rc < 0 || now - c->idle_since >= grace) {
        sl_conn_close(c);
        return true;
    }
    return false;
}

/* The executor of C's request hears of the abort (sl_conn_abort()); a
 * connection it still serves is released when its END comes. */
static void h1_abort(sl_conn_t *c)
{
    sl_h1_ahead_tell(c, true);
    if (c->state == SL_CONN_SERVING) {
        sl_conn_watch(c, 0);
        return;
    }
    sl_conn_close(c);
}

/* ------------------------------------------------------------------ */
/* the session's operations                                           */

void sl_h1_start(sl_conn_t *c)
{
    c->sess = &sl_h1_session;
    sl_conn_parser_init(c);
    conn_reset_request(c);
    c->idle_since = ev_now(c->pump->loop);
    c->deadline = c->idle_since + c->pump->opt->header_timeout;
    c->h1.head_clock = true;
    c->h1.fresh = true;
    c->h2_maybe = false;
    sl_conn_watch(c, EV_READ);
}

void sl_h1_linger(sl_conn_t *c)
{
    c->sess = &sl_h1_session;
    conn_linger(c);
}

void sl_h1_process(sl_conn_t *c)
{
    conn_process(c);
}

void sl_h1_unhold(sl_output_t *o)
{
    conn_process((sl_conn_t *)((char *)o - offsetof(sl_conn_t, tx)));
}

static void h1_io(sl_conn_t *c, int ready)
{
    if (ready & EV_READ) {
        on_readable(c);
        return;
    }
    conn_process(c);
}

static void h1_complete(sl_conn_t *c)
{
    conn_take(c);
    conn_process(c);
}

static void h1_going_away(sl_conn_t *c, unsigned code)
{
    (void)c; /* a response in progress says Connection: close */
    (void)code;
}

/* An upgrade the app has not accepted yet still holds its WebSocket
 * state. */
static void h1_close(sl_conn_t *c)
{
    sl_h1_ahead_drop(c);
    sl_conn_ws_free(c);
}

const sl_session_ops_t sl_h1_session = {
    .name = "HTTP/1.1",
    .io = h1_io,
    .complete = h1_complete,
    .sweep = h1_sweep,
    .drain = h1_drain,
    .going_away = h1_going_away,
    .abort = h1_abort,
    .close = h1_close,
};
