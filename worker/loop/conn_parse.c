/* conn_parse.c - llhttp's callbacks for a connection.
 *
 * The callbacks record offsets and flags, never act: a head is a set of
 * offsets into the read buffer until it is complete, then copied once
 * (sl_http_head_complete()); the state machine in conn.c decides what
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
#include "worker/loop/pump.h"

static int fail(sl_conn_t *c, int status)
{
    if (c->http_error == 0)
        c->http_error = status;
    return HPE_USER;
}

static int on_message_begin(llhttp_t *h)
{
    sl_conn_t *c = h->data;
    sl_req_t *r = &c->req;

    r->url_len = 0;
    r->nhdrs = 0;
    c->in_value = false;
    c->head_done = false;
    c->msg_done = false;
    c->in_msg = true;
    c->req_start = c->rbuf.off;
    c->deadline = ev_now(c->pump->loop) + c->pump->opt->header_timeout;
    /* the last request's forwarded client must not stick to an error
     * answered before this head is complete */
    sl_forwarded_clear(r);
    return 0;
}

static int on_url(llhttp_t *h, const char *at, size_t len)
{
    sl_conn_t *c = h->data;
    sl_req_t *r = &c->req;
    int limit = c->pump->opt->limit_request_line;
    size_t mlen;

    if (r->url_len == 0)
        r->url_off = (uint32_t)(at - c->rbuf.data);
    r->url_len += (uint32_t)len;
    /* method, two spaces and "HTTP/1.1" make up the rest of the line */
    mlen = strlen(llhttp_method_name(llhttp_get_method(h)));
    if (limit > 0 && mlen + r->url_len + 10 > (uint32_t)limit)
        return fail(c, 414);
    return 0;
}

static bool field_too_big(sl_conn_t *c, const sl_hdr_t *hd)
{
    int limit = c->pump->opt->limit_request_field_size;

    return limit > 0 && hd->name_len + hd->val_len + 2 > (uint32_t)limit;
}

static int on_header_field(llhttp_t *h, const char *at, size_t len)
{
    sl_conn_t *c = h->data;
    sl_req_t *r = &c->req;
    sl_hdr_t *hd;

    if (c->head_done)
        return 0; /* chunked trailers: the executor is reading the head */
    if (r->nhdrs == 0 || c->in_value) {
        if (r->nhdrs >= c->pump->opt->limit_request_fields)
            return fail(c, 431);
        if (r->hdrs == NULL && sl_conn_hdrs_get(c) < 0)
            return fail(c, 503);
        hd = &r->hdrs[r->nhdrs++];
        hd->name_off = (uint32_t)(at - c->rbuf.data);
        hd->name_len = 0;
        hd->val_off = 0;
        hd->val_len = 0;
        c->in_value = false;
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
    sl_hdr_t *hd = &c->req.hdrs[c->req.nhdrs - 1];
    size_t i;

    if (c->head_done)
        return 0; /* trailers, ignored as above */
    for (i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)at[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            return fail(c, 400);
    }
    if (!c->in_value) {
        hd->val_off = (uint32_t)(at - c->rbuf.data);
        hd->val_len = 0;
        c->in_value = true;
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

    if (c->head_done)
        return 0;
    if (c->req.nhdrs == 0 || c->req.hdrs[c->req.nhdrs - 1].name_len == 0)
        return fail(c, 400);
    return 0;
}

static int on_headers_complete(llhttp_t *h)
{
    sl_conn_t *c = h->data;
    int status;

    /* the head's copy takes a cached block (it fits: the head lies
     * between req_start and the end of what was read) */
    if (c->req.hbuf.data == NULL &&
        sl_bufcache_get(&c->pump->bufs, &c->req.hbuf,
                        c->rbuf.len - c->req_start) < 0)
        return fail(c, 503);
    status = sl_http_head_complete(c);
    if (status != 0)
        return fail(c, status);
    sl_forwarded_apply(c);
    /* a WebSocket handshake for an executor that serves them: checked
     * here, answered here when bad; any other upgrade (or WSGI) is an
     * ordinary request, and the connection closes after its response:
     * what the client sends after it is in another protocol */
    if (c->parser.upgrade)
        c->req.keep_alive = false;
    if (c->pump->exec->websocket && sl_ws_is_upgrade(&c->req)) {
        status = sl_conn_ws_upgrade(c);
        if (status != 0)
            return fail(c, status);
    }
    c->head_done = true;
    c->deadline = 0;
    /* With a body, stop here so the request is handed over before its body
     * is parsed; without one, message_complete follows at once. */
    return c->req.has_body ? HPE_PAUSED : 0;
}

static int on_body(llhttp_t *h, const char *at, size_t len)
{
    sl_conn_t *c = h->data;
    long long limit = c->pump->opt->limit_request_body;
    int rc = 0;

    pthread_mutex_lock(&c->mu);
    c->body_total += len;
    if (limit > 0 && c->body_total > (unsigned long long)limit &&
        c->req.chunked) {
        /* a chunked body only shows its size as it arrives */
        c->aborted = true;
        rc = -1;
    } else if (c->resp_done) {
        /* answered already: the rest of the body is read and dropped so
         * the connection can carry the next request */
    } else if ((c->body.data == NULL &&
                sl_bufcache_get(&c->pump->bufs, &c->body, len) < 0) ||
               sl_buf_append(&c->body, at, len) < 0) {
        c->aborted = true;
        rc = -1;
    }
    sl_conn_wake(c);
    pthread_mutex_unlock(&c->mu);
    return rc < 0 ? fail(c, 413) : 0;
}

static int on_message_complete(llhttp_t *h)
{
    sl_conn_t *c = h->data;

    c->msg_done = true;
    pthread_mutex_lock(&c->mu);
    c->body_done = true;
    sl_conn_wake(c);
    pthread_mutex_unlock(&c->mu);
    return HPE_PAUSED;
}

static llhttp_settings_t settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_header_field_complete = on_header_field_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

void sl_conn_parser_init(sl_conn_t *c)
{
    llhttp_init(&c->parser, HTTP_REQUEST, &settings);
    c->parser.data = c;
}

/* Run llhttp over the unparsed bytes until it needs more, a message or a
 * head completes, or it fails. 0, or -1 when an error response is due. */
int sl_conn_parse(sl_conn_t *c)
{
    sl_buf_t *b = &c->rbuf;
    llhttp_errno_t err;
    const char *start, *pos;

    while (sl_buf_pending(b) > 0 && !c->msg_done) {
        start = b->data + b->off;
        err = llhttp_execute(&c->parser, start, sl_buf_pending(b));
        if (err == HPE_OK) {
            b->off = b->len;
            break;
        }
        if (err == HPE_PAUSED || err == HPE_PAUSED_UPGRADE) {
            pos = llhttp_get_error_pos(&c->parser);
            b->off = (size_t)(pos - b->data);
            /* HPE_PAUSED_UPGRADE: on_headers_complete took the request
             * as not keep-alive already */
            if (err == HPE_PAUSED)
                llhttp_resume(&c->parser);
            if (c->head_done && c->state == SL_CONN_READING)
                return 0; /* a head to dispatch */
            continue;
        }
        if (c->http_error == 0)
            c->http_error = 400;
        sl_debug("bad request from fd %d: %s", c->fd,
                 llhttp_get_error_reason(&c->parser));
        return -1;
    }
    return 0;
}
