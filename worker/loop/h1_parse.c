/* h1_parse.c - the HTTP/1.1 session's parser: llhttp's callbacks.
 *
 * The callbacks record offsets and flags, never act: a head is a set of
 * offsets into the read buffer until it is complete, then copied once
 * (sl_http_head_complete()); the state machine in h1.c decides what
 * happens next. The parser pauses after every head that has a body and
 * after every message, which is what keeps pipelined responses in order.
 */
#include "config.h"

#include <string.h>

#include "common/log.h"
#include "worker/loop/conn.h"
#include "worker/loop/conn_ws.h"
#include "worker/loop/forwarded.h"
#include "worker/loop/http.h"
#include "worker/loop/reqline.h"
#include "worker/loop/pump.h"
#include "worker/loop/static.h"

static int fail(sl_conn_t *c, int status)
{
    if (c->h1.http_error == 0)
        c->h1.http_error = status;
    return HPE_USER;
}

static int on_message_begin(llhttp_t *h)
{
    sl_conn_t *c = h->data;
    sl_exch_t *x = sl_conn_px(c);
    sl_req_t *r = &x->req;

    r->url_len = 0;
    r->nhdrs = 0;
    r->chunk_line = false;
    r->chunk_last = false;
    c->h1.in_value = false;
    c->h1.head_done = false;
    c->h1.msg_done = false;
    c->h1.in_msg = true;
    c->h1.req_start = c->rbuf.off;
    /* the last request's forwarded client must not stick to an error
     * answered before this head is complete */
    sl_forwarded_clear(r);
    return 0;
}

static bool field_too_big(sl_conn_t *c, const sl_hdr_t *hd)
{
    int limit = c->pump->opt->limit_request_field_size;

    /* name and value, as --limit-request-field-size counts them */
    return limit > 0 && hd->name_len + hd->val_len > (uint32_t)limit;
}

static int on_header_field(llhttp_t *h, const char *at, size_t len)
{
    sl_conn_t *c = h->data;
    sl_exch_t *x = sl_conn_px(c);
    sl_req_t *r = &x->req;
    sl_hdr_t *hd;

    if (c->h1.head_done) {
        /* chunked trailers: the executor is reading the head, so they
         * are never headers; only their names are checked */
        sl_http_trailer_feed(r, at, len);
        return 0;
    }
    if (r->nhdrs == 0 || c->h1.in_value) {
        if (r->nhdrs >= c->pump->opt->limit_request_fields)
            return fail(c, 431);
        if (r->hdrs == NULL && sl_conn_hdrs_get(c, r) < 0)
            return fail(c, 503);
        hd = &r->hdrs[r->nhdrs++];
        hd->name_off = (uint32_t)(at - c->rbuf.data);
        hd->name_len = 0;
        hd->val_off = 0;
        hd->val_len = 0;
        c->h1.in_value = false;
    }
    hd = &r->hdrs[r->nhdrs - 1];
    if (at != c->rbuf.data + hd->name_off + hd->name_len)
        return fail(c, 400);
    hd->name_len += (uint32_t)len;
    return field_too_big(c, hd) ? fail(c, 431) : 0;
}

static int on_header_value(llhttp_t *h, const char *at, size_t len)
{
    sl_conn_t *c = h->data;
    sl_exch_t *x = sl_conn_px(c);
    sl_hdr_t *hd = &x->req.hdrs[x->req.nhdrs - 1];
    size_t i;

    if (c->h1.head_done)
        return 0; /* trailers, ignored as above */
    for (i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)at[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            return fail(c, 400);
    }
    if (!c->h1.in_value) {
        /* the first piece: an empty value folded onto the next line
         * ("Name:\r\n value") would start after a line break (llhttp
         * gives an empty value as an empty piece past the line's end) */
        const char *p = c->rbuf.data + hd->name_off + hd->name_len;
        for (; len > 0 && p < at; p++)
            if (*p == '\r' || *p == '\n')
                return fail(c, 400);
        hd->val_off = (uint32_t)(at - c->rbuf.data);
        hd->val_len = 0;
        c->h1.in_value = true;
    } else if (at != c->rbuf.data + hd->val_off + hd->val_len) {
        return fail(c, 400); /* a piece after a gap: obs-fold */
    }
    hd->val_len += (uint32_t)len;
    return field_too_big(c, hd) ? fail(c, 431) : 0;
}

/* llhttp reports ": v" as a header with an empty name: refuse it */
static int on_header_field_complete(llhttp_t *h)
{
    sl_conn_t *c = h->data;
    sl_exch_t *x = sl_conn_px(c);

    if (c->h1.head_done)
        return sl_http_trailer_end(&x->req) ? fail(c, 400) : 0;
    if (x->req.nhdrs == 0 || x->req.hdrs[x->req.nhdrs - 1].name_len == 0)
        return fail(c, 400);
    return 0;
}

static int on_headers_complete(llhttp_t *h)
{
    sl_conn_t *c = h->data;
    sl_exch_t *x = sl_conn_px(c);
    int status;

    /* the head's copy takes a cached block (it fits: the head lies
     * between req_start and the end of what was read) */
    if (x->req.hbuf.data == NULL &&
        sl_bufcache_get(&c->pump->bufs, &x->req.hbuf,
                        c->rbuf.len - c->h1.req_start) < 0)
        return fail(c, 503);
    status = sl_http_head_complete(&c->h1.parser, &x->req, &c->rbuf,
                                   c->pump->opt->limit_request_body);
    if (status != 0)
        return fail(c, status);
    sl_forwarded_apply(&x->req, &c->pump->opt->forwarded_allow,
                       (const struct sockaddr *)&c->peer);
    /* a WebSocket handshake for an executor that serves them: checked
     * here, answered here when bad; any other upgrade (or WSGI) is an
     * ordinary request, and the connection closes after its response:
     * what the client sends after it is in another protocol */
    if (c->h1.parser.upgrade)
        x->req.keep_alive = false;
    /* run ahead (sl_conn_parse_ahead()): only a request that ends here
     * and leaves the connection as it is */
    if (x != &c->x &&
        (c->h1.parser.upgrade || x->req.has_body || sl_ws_is_upgrade(&x->req)))
        return HPE_USER;
    if (c->pump->exec->websocket && sl_ws_is_upgrade(&x->req)) {
        status = sl_conn_ws_upgrade(c);
        if (status != 0)
            return fail(c, status);
    }
    c->h1.head_done = true;
    x->req.chunk_line = x->req.chunked;
    c->deadline = 0;
    /* With a body, stop here so the request is handed over before its body
     * is parsed; without one, message_complete follows at once. */
    return x->req.has_body ? HPE_PAUSED : 0;
}

static int on_body(llhttp_t *h, const char *at, size_t len)
{
    sl_conn_t *c = h->data;
    sl_exch_t *x = sl_conn_px(c);
    long long limit = c->pump->opt->limit_request_body;
    int rc = 0;

    pthread_mutex_lock(&x->mu);
    x->body_total += len;
    if (limit > 0 && x->body_total > (unsigned long long)limit &&
        x->req.chunked) {
        /* a chunked body only shows its size as it arrives */
        x->aborted = true;
        rc = -1;
    } else if (x->resp_done) {
        /* answered already: the rest of the body is read and dropped so
         * the connection can carry the next request */
    } else if ((x->body.data == NULL &&
                sl_bufcache_get(&c->pump->bufs, &x->body, len) < 0) ||
               sl_buf_append(&x->body, at, len) < 0) {
        x->aborted = true;
        rc = -1;
    }
    sl_exch_wake(x);
    pthread_mutex_unlock(&x->mu);
    return rc < 0 ? fail(c, 413) : 0;
}

static int on_message_complete(llhttp_t *h)
{
    sl_conn_t *c = h->data;
    sl_exch_t *x = sl_conn_px(c);

    c->h1.msg_done = true;
    pthread_mutex_lock(&x->mu);
    x->body_done = true;
    sl_exch_wake(x);
    pthread_mutex_unlock(&x->mu);
    return HPE_PAUSED;
}

/* After each chunk but the last, pause: the next size line is the loop's
 * to read (chunk_line()). */
static int on_chunk_complete(llhttp_t *h)
{
    sl_conn_t *c = h->data;
    sl_exch_t *x = sl_conn_px(c);

    if (x->req.chunk_last)
        return 0;
    x->req.chunk_line = true;
    return HPE_PAUSED;
}

static llhttp_settings_t settings = {
    .on_message_begin = on_message_begin,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_header_field_complete = on_header_field_complete,
    .on_headers_complete = on_headers_complete,
    .on_chunk_complete = on_chunk_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

sl_exch_t *sl_conn_px(sl_conn_t *c)
{
    return c->ahead_parsing ? c->pump->ahead_px : &c->x;
}

void sl_conn_parser_init(sl_conn_t *c)
{
    llhttp_init(&c->h1.parser, HTTP_REQUEST, &settings);
    c->h1.parser.data = c;
}

/* At a message's start, take the request line's method and target
 * ourselves: llhttp knows only the methods it has names for and refuses
 * bytes 0x80-0xFF in a target, where RFC 9110 allows any token and PEP
 * 3333 any byte but controls. llhttp parses a stand-in of the same
 * framing instead ("CONNECT a:1" for CONNECT, "GET /" for the rest: no
 * other method changes how a request's body is framed), then the real
 * line from the space before the version. 1 when the line was taken, 0
 * when more bytes are needed, -1 when the request is refused. */
static int start_line(sl_conn_t *c)
{
    sl_exch_t *x = sl_conn_px(c);
    sl_buf_t *b = &c->rbuf;
    sl_req_t *r = &x->req;
    const char *p;
    size_t pos, mlen, tlen = 0;
    int method, rc;
    static const char via_connect[] = "CONNECT a:1", via_get[] = "GET /";

    /* RFC 9112 §2.2: empty lines before a request line are ignored */
    while (r->url_len == 0 && sl_buf_pending(b) > 0 &&
           (b->data[b->off] == '\r' || b->data[b->off] == '\n'))
        b->off++;
    /* until the line is whole, url_len holds how much of it was checked
     * and url_off the method's length once known: 0 when a request ends
     * (conn_reset_request()) and on_message_begin() */
    if (r->url_len == 0)
        r->url_off = 0;
    pos = r->url_len;
    mlen = r->url_off;
    p = b->data + b->off;
    rc = sl_reqline_scan(p, sl_buf_pending(b), c->pump->opt->limit_request_line,
                         &pos, &mlen, &tlen);
    /* the head's clock starts once: at accept for a connection's first
     * request, at the line's first byte for a later one (until then the
     * keep-alive timeout runs); it is never re-armed within a head */
    if (!c->h1.head_clock && pos > 0) {
        c->h1.head_clock = true;
        c->deadline = ev_now(c->pump->loop) + c->pump->opt->header_timeout;
    }
    if (rc == 0) {
        r->url_len = (uint32_t)pos;
        r->url_off = (uint32_t)mlen;
        return 0;
    }
    if (rc != 1) {
        c->h1.http_error = rc;
        return -1;
    }
    method = sl_reqline_method_of(p, mlen);
    if (method == HTTP_CONNECT)
        rc =
            llhttp_execute(&c->h1.parser, via_connect, sizeof(via_connect) - 1);
    else
        rc = llhttp_execute(&c->h1.parser, via_get, sizeof(via_get) - 1);
    if (rc != HPE_OK) {
        if (c->h1.http_error == 0)
            c->h1.http_error = 400;
        return -1;
    }
    r->method = method;
    r->method_off = (uint32_t)b->off;
    r->method_len = (uint32_t)mlen;
    r->url_off = (uint32_t)(b->off + mlen + 1);
    r->url_len = (uint32_t)tlen;
    b->off += mlen + 1 + tlen;
    return 1;
}

/* A chunk's size line, read by the loop (reqline.h): llhttp is handed its
 * size digits and a CRLF, never an extension. 1 when the line was taken,
 * 0 when more bytes are needed, -1 when the request is refused. */
static int chunk_line(sl_conn_t *c)
{
    sl_exch_t *x = sl_conn_px(c);
    sl_buf_t *b = &c->rbuf;
    const char *p = b->data + b->off;
    size_t digits, len, i;
    int rc;

    rc = sl_reqline_chunk(p, sl_buf_pending(b), &digits, &len);
    if (rc <= 0)
        return rc;
    for (i = 0; i < digits && p[i] == '0'; i++)
        ;
    x->req.chunk_last = i == digits;
    x->req.chunk_line = false;
    if (llhttp_execute(&c->h1.parser, p, digits) != HPE_OK ||
        llhttp_execute(&c->h1.parser, "\r\n", 2) != HPE_OK)
        return -1;
    b->off += len;
    return 1;
}

/* Run llhttp over the unparsed bytes until it needs more, a message or a
 * head completes, or it fails. 0, or -1 when an error response is due. */
int sl_conn_parse(sl_conn_t *c)
{
    sl_exch_t *x = sl_conn_px(c);
    sl_buf_t *b = &c->rbuf;
    llhttp_errno_t err;
    const char *start, *pos;
    bool had_head;
    int rc;

    while (sl_buf_pending(b) > 0 && !c->h1.msg_done) {
        if (!c->h1.in_msg) {
            rc = start_line(c);
            if (rc < 0) {
                sl_debug("bad request line from fd %d", c->tp.fd);
                return -1;
            }
            if (rc == 0)
                break;
        }
        if (x->req.chunk_line) {
            rc = chunk_line(c);
            if (rc < 0)
                goto out_bad;
            if (rc == 0)
                break;
            continue;
        }
        had_head = c->h1.head_done;
        start = b->data + b->off;
        err = llhttp_execute(&c->h1.parser, start, sl_buf_pending(b));
        if (err == HPE_OK) {
            b->off = b->len;
            break;
        }
        if (err != HPE_PAUSED && err != HPE_PAUSED_UPGRADE)
            goto out_bad;
        pos = llhttp_get_error_pos(&c->h1.parser);
        b->off = (size_t)(pos - b->data);
        /* HPE_PAUSED_UPGRADE: on_headers_complete took the request as
         * not keep-alive already */
        if (err == HPE_PAUSED)
            llhttp_resume(&c->h1.parser);
        if (!had_head && c->h1.head_done && c->state == SL_CONN_READING)
            return 0; /* a head to dispatch */
    }
    return 0;

out_bad:
    if (c->h1.http_error == 0)
        c->h1.http_error = 400;
    sl_debug("bad request from fd %d: %s", c->tp.fd,
             x->req.chunk_line ? "bad chunk size line"
                               : llhttp_get_error_reason(&c->h1.parser));
    return -1;
}

bool sl_conn_may_run_ahead(const sl_req_t *r)
{
    /* the safe methods (RFC 9110 §9.2.1): RFC 9112 §9.3.2 lets a server
     * process a pipelined sequence of those in parallel */
    bool safe = r->method == HTTP_GET || r->method == HTTP_HEAD ||
                r->method == HTTP_OPTIONS;

    return safe && r->keep_alive && !r->has_body && !r->expect_continue;
}

int sl_conn_parse_ahead(sl_conn_t *c, sl_exch_t *x)
{
    typeof(c->h1) saved = c->h1; /* the current request's, parser and all */
    size_t off = c->rbuf.off;
    ev_tstamp deadline = c->deadline;
    llhttp_errno_t err;
    const char *pos;
    bool ok = false;

    c->ahead_parsing = true;
    c->pump->ahead_px = x;
    c->h1.http_error = 0;
    c->h1.in_value = false;
    c->h1.head_done = false;
    c->h1.msg_done = false;
    c->h1.in_msg = false;
    c->h1.head_clock = true; /* no head deadline: it is whole or not run */
    if (start_line(c) == 1) {
        err = llhttp_execute(&c->h1.parser, c->rbuf.data + c->rbuf.off,
                             sl_buf_pending(&c->rbuf));
        if (err == HPE_PAUSED && c->h1.msg_done) {
            pos = llhttp_get_error_pos(&c->h1.parser);
            c->rbuf.off = (size_t)(pos - c->rbuf.data);
            llhttp_resume(&c->h1.parser);
            ok = c->h1.http_error == 0 && sl_conn_may_run_ahead(&x->req) &&
                 !sl_http_is_health(&x->req, c->pump->opt->health_path) &&
                 sl_static_match(c->pump->statics, &x->req) < 0;
        }
    }
    if (ok) {
        llhttp_t parser = c->h1.parser; /* where the next request begins */
        c->h1 = saved;
        c->h1.parser = parser;
        c->h1.parser.data = c;
    } else {
        c->h1 = saved; /* as if never read: parsed again in its turn */
        c->rbuf.off = off;
    }
    c->ahead_parsing = false;
    c->deadline = deadline;
    return ok ? 1 : 0;
}
