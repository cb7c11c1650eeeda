/* h2_stream.c - an HTTP/2 stream as an exchange: its slot, the request
 * made of its header fields, and the response turned back from the
 * HTTP/1.1 bytes executors write into what nghttp2 frames.
 *
 * Streams live in the pump's table (pump.h), one slot each, allocated on
 * first use and kept: an exchange's address must not change while an
 * executor may hold its id. Their ids follow the connections' in the
 * exchange id space, so tickets name them as they name HTTP/1.1's.
 *
 * The response: executors build an HTTP/1.1 head and frame the body as
 * response.c does for HTTP/1.1 (a Content-Length, or chunked when the
 * length is not known or trailers follow). That is our own output, well
 * formed, so reading it back is a small state machine here: the head
 * becomes a HEADERS frame (names lower-cased, the connection's own fields
 * dropped, RFC 9113 §8.2.2), chunks become DATA, trailer fields a last
 * HEADERS frame. Loop thread, except where x.mu is said to be held.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "worker/loop/forwarded.h"
#include "worker/loop/h2_internal.h"
#include "worker/loop/http.h"
#include "worker/loop/pump.h"
#include "worker/loop/reqline.h"

/* The most streams a worker has at once, whatever the options say. */
#define STREAMS_HARD 65536u

uint32_t sl_h2_streams_max(const sl_options_t *o, uint32_t nconns)
{
    uint64_t n;
    int i;

    for (i = 0; i < o->nhttp_protocols; i++)
        if (o->http_protocols[i] == SL_PROTO_H2)
            break;
    if (i == o->nhttp_protocols)
        return 0;
    /* a stream the client reset may still be with the executor: room for
     * as many again (h2.c refuses streams past it) */
    n = (uint64_t)nconns * (uint64_t)o->http2_max_concurrent_streams * 2;
    return n > STREAMS_HARD ? STREAMS_HARD : (uint32_t)n;
}

int sl_h2_streams_init(sl_pump_t *p)
{
    return sl_slots_init(&p->h2s, sl_h2_streams_max(p->opt, p->pool.nconns),
                         p->pool.nconns, sizeof(sl_h2_stream_t));
}

void sl_h2_streams_destroy(sl_pump_t *p)
{
    sl_slots_destroy(&p->h2s);
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

sl_h2_stream_t *sl_h2_stream_new(sl_h2_t *h2, int32_t sid)
{
    sl_conn_t *c = h2->c;
    sl_pump_t *p = c->pump;
    sl_h2_stream_t *s = (sl_h2_stream_t *)sl_slots_take(&p->h2s);

    if (s == NULL)
        return NULL;
    p->h2live++;
    s->h2 = h2;
    s->sid = sid;
    s->x.conn = c;
    s->x.req.tls = c->x.req.tls;
    s->x.req.major = 2;
    s->x.req.minor = 0;
    s->x.req.keep_alive = true;
    sl_tail_init(&s->tail);
    s->progress = ev_now(p->loop);
    s->prev = NULL;
    s->next = h2->streams;
    if (h2->streams != NULL)
        h2->streams->prev = s;
    h2->streams = s;
    h2->nstreams++;
    return s;
}

void sl_h2_stream_free(sl_h2_stream_t *s)
{
    sl_h2_t *h2 = s->h2;
    sl_pump_t *p = s->x.conn->pump;
    sl_bufcache_t *bc = &p->bufs;
    sl_exch_t *x = &s->x;

    if (h2 != NULL) {
        if (s->prev != NULL)
            s->prev->next = s->next;
        else
            h2->streams = s->next;
        if (s->next != NULL)
            s->next->prev = s->prev;
        h2->nstreams--;
    }
    sl_bufcache_put(bc, &x->req.hbuf);
    if (x->req.hdrs != NULL)
        sl_bufcache_give(bc, x->req.hdrs, sl_conn_hdrs_size(p->opt));
    if (x->req.client != NULL)
        sl_forwarded_clear(&x->req);
    memset(&x->req, 0, sizeof(x->req));
    sl_bufcache_put(bc, &s->raw);
    sl_tail_drop(&s->tail, p->exec->release);
    /* the exchange's own fields under its mutex, which a stale call of an
     * executor may be taking this moment: never zeroed whole */
    pthread_mutex_lock(&x->mu);
    sl_exch_drop_tail_locked(x);
    sl_bufcache_put(bc, &x->body);
    sl_bufcache_put(bc, &x->out);
    sl_bufcache_put(bc, &x->resp_head);
    x->gen++; /* what an executor still holds of it is stale */
    x->body_total = 0;
    x->body_done = x->resp_done = x->close_after = false;
    x->aborted = x->peer_gone = x->notified = false;
    x->body_paused = x->waiting = false;
    x->inflight = 0;
    x->picked = 0;
    x->resp_status = 0;
    x->resp_body = 0;
    pthread_mutex_unlock(&x->mu);
    /* the loop's side: all after the exchange (x->conn stays: executors
     * may still read through it) */
    memset((char *)s + sizeof(sl_exch_t), 0, sizeof(*s) - sizeof(sl_exch_t));
    sl_tail_init(&s->tail);
    sl_slots_put(&p->h2s, x);
    p->h2live--;
}

/* ------------------------------------------------------------------ */
/* the request                                                        */

static bool name_is(const uint8_t *p, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(p, lit, n) == 0;
}

/* Append P[0..N) to S's head bytes: its offset, or -1. */
static long head_put(sl_h2_stream_t *s, const void *p, size_t n)
{
    sl_buf_t *b = &s->x.req.hbuf;
    size_t off = b->len;

    if (b->data == NULL)
        (void)sl_bufcache_get(&s->x.conn->pump->bufs, b, SL_BUFCACHE_MIN);
    if (sl_buf_append(b, p, n) < 0)
        return -1;
    return (long)off;
}

static int pseudo_field(sl_h2_stream_t *s, const uint8_t *name, size_t nn,
                        const uint8_t *value, size_t vn)
{
    const sl_options_t *o = s->x.conn->pump->opt;
    sl_req_t *r = &s->x.req;
    long off;

    if (name_is(name, nn, ":method")) {
        if ((off = head_put(s, value, vn)) < 0)
            return -1;
        r->method_off = (uint32_t)off;
        r->method_len = (uint32_t)vn;
        r->method = sl_reqline_method_of((const char *)value, vn);
    } else if (name_is(name, nn, ":path")) {
        if (o->limit_request_line > 0 && vn > (size_t)o->limit_request_line)
            return 414;
        if ((off = head_put(s, value, vn)) < 0)
            return -1;
        r->url_off = (uint32_t)off;
        r->url_len = (uint32_t)vn;
    } else if (name_is(name, nn, ":authority")) {
        if ((off = head_put(s, value, vn)) < 0)
            return -1;
        s->auth_off = (uint32_t)off;
        s->auth_len = (uint32_t)vn;
    }
    /* :scheme is the connection's (or a trusted proxy's headers') */
    return 0;
}

/* Add the field NAME: VALUE, both already in hbuf. 0, -1 or 431. */
static int add_field(sl_h2_stream_t *s, uint32_t name_off, uint32_t nn,
                     uint32_t val_off, uint32_t vn)
{
    const sl_options_t *o = s->x.conn->pump->opt;
    sl_req_t *r = &s->x.req;
    sl_hdr_t *h;

    if (r->nhdrs >= o->limit_request_fields)
        return 431;
    if (r->hdrs == NULL &&
        (r->hdrs = sl_bufcache_take(&s->x.conn->pump->bufs,
                                    sl_conn_hdrs_size(o))) == NULL)
        return -1;
    h = &r->hdrs[r->nhdrs++];
    h->name_off = name_off;
    h->name_len = nn;
    h->val_off = val_off;
    h->val_len = vn;
    return 0;
}

int sl_h2_stream_field(sl_h2_stream_t *s, const uint8_t *name, size_t nn,
                       const uint8_t *value, size_t vn)
{
    const sl_options_t *o = s->x.conn->pump->opt;
    sl_req_t *r = &s->x.req;
    long noff, voff;

    if (nn > 0 && name[0] == ':')
        return pseudo_field(s, name, nn, value, vn);
    if (o->limit_request_field_size > 0 &&
        nn + vn > (size_t)o->limit_request_field_size)
        return 431;
    if (name_is(name, nn, "host")) {
        if (s->has_host)
            return 400;
        s->has_host = true;
    } else if (name_is(name, nn, "content-length")) {
        uint64_t v = 0;
        size_t i;
        if (vn == 0 || vn > 19)
            return 400;
        for (i = 0; i < vn; i++) {
            if (value[i] < '0' || value[i] > '9')
                return 400;
            v = v * 10 + (uint64_t)(value[i] - '0');
        }
        s->has_cl = true;
        r->content_length = v;
    } else if (name_is(name, nn, "expect")) {
        if (!(vn == 12 &&
              strncasecmp((const char *)value, "100-continue", 12) == 0))
            return 417;
        r->expect_continue = true;
    }
    if ((noff = head_put(s, name, nn)) < 0 ||
        (voff = head_put(s, value, vn)) < 0)
        return -1;
    return add_field(s, (uint32_t)noff, (uint32_t)nn, (uint32_t)voff,
                     (uint32_t)vn);
}

/* Cookie fields, which HTTP/2 lets a client split (RFC 9113 §8.2.3),
 * become one again, joined by "; ": the first holds them all, the others
 * leave. 0 or -1. */
static int join_cookies(sl_h2_stream_t *s)
{
    sl_req_t *r = &s->x.req;
    int i, first = -1, n = 0, k;
    size_t start;

    for (i = 0; i < r->nhdrs; i++)
        if (name_is((const uint8_t *)r->hbuf.data + r->hdrs[i].name_off,
                    r->hdrs[i].name_len, "cookie") &&
            n++ == 0)
            first = i;
    if (n < 2)
        return 0;
    start = r->hbuf.len;
    for (i = first, k = 0; i < r->nhdrs; i++) {
        sl_hdr_t *h = &r->hdrs[i];
        if (!name_is((const uint8_t *)r->hbuf.data + h->name_off, h->name_len,
                     "cookie"))
            continue;
        if ((k++ > 0 && sl_buf_append(&r->hbuf, "; ", 2) < 0) ||
            sl_buf_append(&r->hbuf, r->hbuf.data + h->val_off, h->val_len) < 0)
            return -1;
    }
    r->hdrs[first].val_off = (uint32_t)start;
    r->hdrs[first].val_len = (uint32_t)(r->hbuf.len - start);
    for (i = k = first + 1; i < r->nhdrs; i++)
        if (!name_is((const uint8_t *)r->hbuf.data + r->hdrs[i].name_off,
                     r->hdrs[i].name_len, "cookie"))
            r->hdrs[k++] = r->hdrs[i];
    r->nhdrs = k;
    return 0;
}

int sl_h2_stream_head(sl_h2_stream_t *s, bool end_stream)
{
    sl_conn_t *c = s->x.conn;
    const sl_options_t *o = c->pump->opt;
    sl_req_t *r = &s->x.req;
    const char *auth;
    size_t alen;
    long off;
    int i, rc;

    s->head_done = true;
    r->start = ev_now(c->pump->loop);
    r->has_body = !end_stream;
    r->chunked = r->has_body && !s->has_cl; /* a length not known */
    r->head = r->method == HTTP_HEAD;
    if (r->method_len == 0 || r->url_len == 0)
        return r->method == HTTP_CONNECT ? 501 : 400;
    if (s->auth_len > 0) {
        /* :authority stands for Host (RFC 9113 §8.3.1) */
        for (i = 0; i < r->nhdrs; i++)
            if (name_is((const uint8_t *)r->hbuf.data + r->hdrs[i].name_off,
                        r->hdrs[i].name_len, "host"))
                break;
        if (i < r->nhdrs) {
            r->hdrs[i].val_off = s->auth_off;
            r->hdrs[i].val_len = s->auth_len;
        } else {
            if ((off = head_put(s, "host", 4)) < 0)
                return 500;
            rc = add_field(s, (uint32_t)off, 4, s->auth_off, s->auth_len);
            if (rc != 0)
                return rc < 0 ? 500 : rc;
        }
    }
    if (join_cookies(s) < 0)
        return 500;
    if (sl_reqline_check_target(r, r->hbuf.data, &auth, &alen) != 0)
        return 400;
    if (o->limit_request_body > 0 && s->has_cl &&
        r->content_length > (uint64_t)o->limit_request_body)
        return 413;
    sl_forwarded_apply(r, &o->forwarded_allow,
                       (const struct sockaddr *)&c->peer);
    return 0;
}

/* ------------------------------------------------------------------ */
/* the response                                                       */

void sl_h2_stream_take(sl_h2_stream_t *s)
{
    sl_exch_t *x = &s->x;

    x->notified = false;
    if (sl_buf_pending(&x->out) > 0 &&
        sl_buf_move(&s->raw, &x->out, SL_CONN_BUF_KEEP) < 0) {
        x->aborted = true; /* out of memory: those bytes are lost */
        sl_exch_wake(x);
    }
    x->inflight = sl_buf_pending(&s->raw);
    if (x->resp_done && sl_tail_any(&x->tail))
        sl_tail_move(&s->tail, &x->tail);
}

/* A field HTTP/2 does not carry: the connection's own (RFC 9113
 * §8.2.2). N is the name's length, P lower case. */
static bool connection_field(const char *p, size_t n)
{
    return (n == 10 && memcmp(p, "connection", 10) == 0) ||
           (n == 10 && memcmp(p, "keep-alive", 10) == 0) ||
           (n == 16 && memcmp(p, "proxy-connection", 16) == 0) ||
           (n == 17 && memcmp(p, "transfer-encoding", 17) == 0) ||
           (n == 7 && memcmp(p, "upgrade", 7) == 0);
}

/* Fields "Name: value\r\n" in P[0..N) (a head without its status line, or
 * a trailer section, without the blank line) into NV (room for ROOM),
 * names lower-cased in place; their count, or -1 when they do not fit or
 * are bad. The framing fields are noted in S when HEAD. */
static long fields_out(sl_h2_stream_t *s, char *p, size_t n, nghttp2_nv *nv,
                       size_t room, bool head)
{
    char *end = p + n, *eol, *colon, *v;
    size_t k = 0, i, nn;

    while (p < end) {
        eol = memchr(p, '\n', (size_t)(end - p));
        if (eol == NULL || eol == p || eol[-1] != '\r')
            return -1;
        colon = memchr(p, ':', (size_t)(eol - p));
        if (colon == NULL || colon == p)
            return -1;
        nn = (size_t)(colon - p);
        for (i = 0; i < nn; i++)
            if (p[i] >= 'A' && p[i] <= 'Z')
                p[i] = (char)(p[i] - 'A' + 'a');
        v = colon + 1;
        while (v < eol - 1 && (*v == ' ' || *v == '\t'))
            v++;
        if (head && nn == 14 && memcmp(p, "content-length", 14) == 0) {
            s->sized = true;
            s->left = strtoull(v, NULL, 10);
        }
        if (head && nn == 17 && memcmp(p, "transfer-encoding", 17) == 0)
            s->resp = SL_H2_RESP_CHUNK; /* ours says chunked, only */
        if (!connection_field(p, nn)) {
            if (k == room)
                return -1;
            nv[k].name = (uint8_t *)p;
            nv[k].namelen = nn;
            nv[k].value = (uint8_t *)v;
            nv[k].valuelen = (size_t)(eol - 1 - v);
            nv[k].flags = NGHTTP2_NV_FLAG_NONE;
            k++;
        }
        p = eol + 1;
    }
    return (long)k;
}

/* The length of the block P[0..N) begins, up to and with its blank
 * line; 0 when it has not all come. */
static size_t block_length(const char *p, size_t n)
{
    const char *q = p, *end = p + n;

    if (n == 0)
        return 0; /* P may be NULL: a buffer never used */
    if (n >= 2 && p[0] == '\r' && p[1] == '\n')
        return 2;
    while ((q = memchr(q, '\n', (size_t)(end - q))) != NULL) {
        q++;
        if (end - q >= 2 && q[0] == '\r' && q[1] == '\n')
            return (size_t)(q + 2 - p);
    }
    return 0;
}

/* The block (a head, a trailer section) at the start of S's raw, once
 * whole: its length, *P its start; 0 while it has not all come. */
static size_t raw_block(sl_h2_stream_t *s, char **p)
{
    /* nothing yet: raw may have no buffer at all (an on-loop app that
     * answers later), and NULL + 0 is no pointer to scan */
    if (sl_buf_pending(&s->raw) == 0)
        return 0;
    *p = s->raw.data + s->raw.off;
    return block_length(*p, sl_buf_pending(&s->raw));
}

int sl_h2_stream_head_out(sl_h2_stream_t *s, nghttp2_nv *nv, size_t n,
                          size_t *count, int *status)
{
    char *p, *line;
    size_t len = raw_block(s, &p);
    long k;

    if (len == 0)
        return 0;
    /* "HTTP/1.1 200 OK\r\n" */
    line = memchr(p, '\n', len);
    if (line == NULL || line - p < 12 || n < 1)
        return -1;
    *status = sl_http_status_of(p, len);
    if (*status < 100)
        return -1;
    nv[0].name = (uint8_t *)":status";
    nv[0].namelen = 7;
    nv[0].value = (uint8_t *)p + 9;
    nv[0].valuelen = 3;
    nv[0].flags = NGHTTP2_NV_FLAG_NONE;
    s->resp = SL_H2_RESP_BODY;
    s->sized = false;
    k = fields_out(s, line + 1, (size_t)(p + len - 2 - (line + 1)), nv + 1,
                   n - 1, true);
    if (k < 0)
        return -1;
    *count = (size_t)k + 1;
    s->no_body =
        s->x.req.head || *status < 200 || *status == 204 || *status == 304;
    /* the head's bytes stay until the caller submitted it (nghttp2 copies
     * them): the body's start is recorded, the bytes consumed then */
    s->head_len = len;
    return 1;
}

/* Copy up to N (> 0) bytes of the tail (a file or lent bytes) into BUF:
 * the count, 0 when it is all sent, -1 when the file failed. The tail is
 * dropped (its file closed, its lent bytes given back) with its last
 * byte copied. */
static long tail_out(sl_h2_stream_t *s, uint8_t *buf, size_t n)
{
    ssize_t got;

    if (n > s->tail.len)
        n = s->tail.len;
    if (n == 0) {
        /* all sent, or an empty file's */
    } else if (s->tail.file_fd >= 0) {
        do
            got = pread(s->tail.file_fd, buf, n, s->tail.file_off);
        while (got < 0 && errno == EINTR);
        if (got <= 0)
            return -1; /* it shrank, or failed: the response is short */
        n = (size_t)got;
        s->tail.file_off += got;
    } else {
        memcpy(buf, s->tail.mem, n);
        s->tail.mem += n;
    }
    s->tail.len -= n;
    if (s->tail.len == 0 && sl_tail_any(&s->tail))
        sl_tail_drop(&s->tail, s->x.conn->pump->exec->release);
    return (long)n;
}

/* Parse a chunk size line at P[0..N): its size, the line's length in
 * *LEN; 0 with *LEN 0 when it is not whole; -1 with *LEN 1 when bad. */
static uint64_t chunk_size(const char *p, size_t n, size_t *len)
{
    const char *eol = n > 0 ? memchr(p, '\n', n) : NULL;
    uint64_t v = 0;
    const char *q;

    *len = 0;
    if (eol == NULL)
        return 0;
    for (q = p; q < eol && *q != '\r' && *q != ';'; q++) {
        int d = *q >= '0' && *q <= '9'   ? *q - '0'
                : *q >= 'a' && *q <= 'f' ? *q - 'a' + 10
                : *q >= 'A' && *q <= 'F' ? *q - 'A' + 10
                                         : -1;
        if (d < 0) {
            *len = 1;
            return (uint64_t)-1;
        }
        v = v * 16 + (uint64_t)d;
    }
    *len = (size_t)(eol + 1 - p);
    return v;
}

/* The trailer section at the head of raw, once whole: submitted as the
 * stream's last HEADERS. 1 when it was (or was empty: *NONE), 0 when it
 * has not all come, -1 when bad. */
static int trailers_out(sl_h2_stream_t *s, bool *none)
{
    nghttp2_nv nv[SL_H2_TRAILERS_MAX];
    char *p;
    size_t len = raw_block(s, &p);
    long k;

    *none = false;
    if (len == 0)
        return 0;
    if (len == 2) {
        *none = true;
        sl_buf_consume(&s->raw, 2);
        return 1;
    }
    k = fields_out(s, p, len - 2, nv, SL_H2_TRAILERS_MAX, false);
    if (k < 0 || nghttp2_submit_trailer(s->h2->ng, s->sid, nv, (size_t)k) != 0)
        return -1;
    s->trailers = true;
    sl_buf_consume(&s->raw, len);
    return 1;
}

long sl_h2_stream_body(sl_h2_stream_t *s, uint8_t *buf, size_t n,
                       uint32_t *flags)
{
    sl_buf_t *b = &s->raw;
    size_t got = 0, k, len;
    uint64_t size;
    long t;
    bool none;

    while (got < n) {
        size_t avail = sl_buf_pending(b);
        const char *p = avail > 0 ? b->data + b->off : NULL;

        switch (s->resp) {
        case SL_H2_RESP_BODY:
            if (avail > 0) {
                k = n - got < avail ? n - got : avail;
                if (s->sized && k > s->left)
                    k = (size_t)s->left;
                memcpy(buf + got, p, k);
                sl_buf_consume(b, k);
                got += k;
                if (s->sized) {
                    s->left -= k;
                    if (s->left == 0) {
                        s->resp = SL_H2_RESP_END;
                        sl_buf_consume(b, sl_buf_pending(b));
                    }
                }
                if (k > 0)
                    continue;
                s->resp = SL_H2_RESP_END; /* sized, and all of it sent */
                continue;
            }
            if (!s->resp_end)
                goto out;
            t = tail_out(s, buf + got, n - got);
            if (t < 0)
                return -1;
            if (t == 0) {
                s->resp = SL_H2_RESP_END;
                continue;
            }
            got += (size_t)t;
            continue;
        case SL_H2_RESP_CHUNK:
            size = chunk_size(p, avail, &len);
            if (len == 0)
                goto out;
            if (size == (uint64_t)-1)
                return -1;
            sl_buf_consume(b, len);
            if (size == 0) {
                s->resp = SL_H2_RESP_TRAILER;
            } else {
                s->left = size;
                s->resp = SL_H2_RESP_DATA;
            }
            continue;
        case SL_H2_RESP_DATA:
            if (avail == 0)
                goto out;
            k = n - got < avail ? n - got : avail;
            if (k > s->left)
                k = (size_t)s->left;
            memcpy(buf + got, p, k);
            sl_buf_consume(b, k);
            got += k;
            s->left -= k;
            if (s->left == 0)
                s->resp = SL_H2_RESP_CRLF;
            continue;
        case SL_H2_RESP_CRLF:
            if (avail < 2)
                goto out;
            sl_buf_consume(b, 2);
            s->resp = SL_H2_RESP_CHUNK;
            continue;
        case SL_H2_RESP_TRAILER:
            switch (trailers_out(s, &none)) {
            case 0:
                goto out;
            case -1:
                return -1;
            }
            s->resp = SL_H2_RESP_END;
            continue;
        default: /* END */
            *flags |= NGHTTP2_DATA_FLAG_EOF;
            if (s->trailers)
                *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
            return (long)got;
        }
    }
out:
    if (s->resp == SL_H2_RESP_END) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (s->trailers)
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
    if (got == 0 && s->resp != SL_H2_RESP_END) {
        /* nothing yet: a chunked body that ended (the executor's END)
         * without its last chunk is cut short */
        if (s->resp_end && s->resp != SL_H2_RESP_BODY && sl_buf_pending(b) == 0)
            return -1;
        return -2;
    }
    return (long)got;
}
