/* accesslog_render.c - renders one access log line (see accesslog.h).
 *
 * Rendering walks the ops compiled at start (common/logfmt.c) and writes
 * into the tail of the write buffer itself (accesslog.c), so a line is
 * formatted once and copied never; the writer keeps SL_ACCESSLOG_LINE_MAX
 * bytes free for it. The one thing a line needs that changes per second,
 * the time, is cached per second.
 */
#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "worker/loop/accesslog.h"
#include "worker/loop/http.h"
#include "worker/loop/reqline.h"

/* Where a line is rendered: END keeps room for closing it. */
typedef struct {
    char *p, *end;
    bool full;   /* something did not fit: the line stops there */
    bool json;   /* JSON escapes and values */
    bool in_str; /* JSON: inside a string value */
} em_t;

#define EM_RESERVE 4 /* "\"}\n" */

/* The render's helpers are inlined so that the line's cursor can stay in
 * registers: the access log's cost per request is mostly here. */
#define INLINE inline __attribute__((always_inline))

static inline bool room(em_t *e, size_t n)
{
    if (e->full || (size_t)(e->end - e->p) < n) {
        e->full = true;
        return false;
    }
    return true;
}

/* Most pieces of a line are a few bytes: copied here, not by a call. */
static inline void put(em_t *e, const char *s, size_t n)
{
    if (!room(e, n))
        return;
    if (n <= 8) {
        while (n-- > 0)
            *e->p++ = *s++;
        return;
    }
    memcpy(e->p, s, n);
    e->p += n;
}

#define PUT_LIT(e, s) put((e), (s), sizeof(s) - 1)

/* The length of the valid UTF-8 character at S[0..N), 0 when invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0], lo = 0x80, hi = 0xBF;
    size_t len, i;

    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return len;
}

/* Bytes that go out as they are: bit 1 in text lines (not a control,
 * '"' or '\'), bit 2 in JSON (the same, and ASCII). Built once. */
static uint8_t plain_bits[256];

static void plain_init(void)
{
    int ch;

    for (ch = 0; ch < 256; ch++) {
        bool ok = !(ch < 0x20 || ch == 0x7f || ch == '"' || ch == '\\');
        plain_bits[ch] = (uint8_t)((ok ? 1 : 0) | (ok && ch < 0x80 ? 2 : 0));
    }
}

/* S[0..N) from the client, escaped so it cannot end a line, a quoted
 * field or a JSON string early. */
static INLINE void put_esc(em_t *e, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    uint8_t bit = e->json ? 2 : 1;
    size_t i = 0, run, k;
    char t[6];

    while (i < n && !e->full) {
        for (run = i; run < n && (plain_bits[u[run]] & bit); run++)
            ;
        put(e, s + i, run - i);
        if ((i = run) >= n)
            break;
        if (e->json && u[i] >= 0x80 && (k = utf8_len(u + i, n - i)) > 0) {
            put(e, s + i, k);
            i += k;
            continue;
        }
        if (e->json && (u[i] == '"' || u[i] == '\\')) {
            t[0] = '\\';
            t[1] = (char)u[i];
            put(e, t, 2);
        } else if (e->json) {
            memcpy(t, "\\u00", 4);
            t[4] = hex[u[i] >> 4];
            t[5] = hex[u[i] & 15];
            put(e, t, 6);
        } else {
            t[0] = '\\';
            t[1] = 'x';
            t[2] = hex[u[i] >> 4];
            t[3] = hex[u[i] & 15];
            put(e, t, 4);
        }
        i++;
    }
}

/* A string value: "-" (text) or null (JSON) when S is NULL. */
static INLINE void put_str(em_t *e, const char *s, size_t n)
{
    if (s == NULL) {
        if (e->json)
            PUT_LIT(e, "null");
        else
            PUT_LIT(e, "-");
        return;
    }
    if (e->json) {
        PUT_LIT(e, "\"");
        e->in_str = !e->full;
    }
    put_esc(e, s, n);
    if (e->json && !e->full) {
        PUT_LIT(e, "\"");
        e->in_str = false;
    }
}

/* Trusted text (ours: a time, a protocol): quoted in JSON, no escapes. */
static INLINE void put_text(em_t *e, const char *s, size_t n)
{
    if (e->json && room(e, n + 2)) {
        PUT_LIT(e, "\"");
        put(e, s, n);
        PUT_LIT(e, "\"");
    } else if (!e->json) {
        put(e, s, n);
    }
}

static INLINE void put_u64(em_t *e, uint64_t v)
{
    char d[24];
    size_t i = sizeof(d);

    do
        d[--i] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    put(e, d + i, sizeof(d) - i);
}

/* The value of header NAME[0..NN) (lower case) of REQ, or NULL. */
static INLINE const char *req_header(const sl_req_t *req, const char *name,
                                     size_t nn, size_t *vn)
{
    const char *base = req->hbuf.data;
    int i;

    for (i = 0; i < req->nhdrs; i++) {
        const sl_hdr_t *h = &req->hdrs[i];
        if (h->name_len == nn &&
            strncasecmp(base + h->name_off, name, nn) == 0) {
            *vn = h->val_len;
            return base + h->val_off;
        }
    }
    return NULL;
}

/* The value of field NAME[0..NN) in a response head, or NULL. */
static const char *resp_header(const char *head, size_t n, const char *name,
                               size_t nn, size_t *vn)
{
    const char *p = memchr(head, '\n', n), *end = head + n, *eol, *v;

    while (p != NULL && ++p < end) {
        eol = memchr(p, '\n', (size_t)(end - p));
        if (eol == NULL)
            eol = end;
        if ((size_t)(eol - p) > nn && p[nn] == ':' &&
            strncasecmp(p, name, nn) == 0) {
            v = p + nn + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            *vn = (size_t)(eol - v);
            while (*vn > 0 && (v[*vn - 1] == '\r' || v[*vn - 1] == ' ' ||
                               v[*vn - 1] == '\t'))
                (*vn)--;
            return v;
        }
        p = eol;
    }
    return NULL;
}

/* Decode base64 S[0..N) into OUT (room for N bytes): its length. Stops at
 * the first byte that is not base64 ('=' included). */
static size_t unbase64(const char *s, size_t n, char *out)
{
    unsigned acc = 0, bits = 0;
    size_t i, o = 0;
    int v;

    for (i = 0; i < n; i++) {
        char ch = s[i];
        if (ch >= 'A' && ch <= 'Z')
            v = ch - 'A';
        else if (ch >= 'a' && ch <= 'z')
            v = ch - 'a' + 26;
        else if (ch >= '0' && ch <= '9')
            v = ch - '0' + 52;
        else if (ch == '+')
            v = 62;
        else if (ch == '/')
            v = 63;
        else
            break;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    return o;
}

/* u: the user of a Basic Authorization, or '-'. */
static void put_user(em_t *e, const sl_req_t *req)
{
    char user[256];
    const char *v = NULL, *colon;
    size_t vn = 0, n;

    if (req != NULL)
        v = req_header(req, "authorization", 13, &vn);
    if (v == NULL || vn < 6 || strncasecmp(v, "basic ", 6) != 0) {
        put_str(e, NULL, 0);
        return;
    }
    v += 6;
    vn -= 6;
    while (vn > 0 && *v == ' ') {
        v++;
        vn--;
    }
    if (vn > sizeof(user))
        vn = sizeof(user);
    n = unbase64(v, vn, user);
    colon = memchr(user, ':', n);
    put_str(e, user, colon != NULL ? (size_t)(colon - user) : n);
}

/* U: the path, percent-decoded as PATH_INFO is. */
static void put_path(em_t *e, const sl_req_t *req)
{
    char path[4096];
    sl_target_t t;
    size_t n;

    sl_http_target(req->hbuf.data + req->url_off, req->url_len, &t);
    n = t.path_len < sizeof(path) ? t.path_len : sizeof(path);
    n = sl_http_unquote(t.path, n, path);
    put_str(e, path, n);
}

static void put_proto(em_t *e, const sl_req_t *req)
{
    char proto[] = "HTTP/1.1";

    proto[5] = (char)('0' + req->major % 10);
    proto[7] = (char)('0' + req->minor % 10);
    put_text(e, proto, sizeof(proto) - 1);
}

static INLINE void put_request_line(em_t *e, const sl_req_t *req)
{
    size_t mn;
    const char *m = sl_reqline_method_name(req, &mn);

    if (e->json) {
        PUT_LIT(e, "\"");
        e->in_str = !e->full;
    }
    put(e, m, mn);
    PUT_LIT(e, " ");
    put_esc(e, req->hbuf.data + req->url_off, req->url_len);
    PUT_LIT(e, " HTTP/1.1");
    if (!e->full) {
        e->p[-3] = (char)('0' + req->major % 10);
        e->p[-1] = (char)('0' + req->minor % 10);
    }
    if (e->json && !e->full) {
        PUT_LIT(e, "\"");
        e->in_str = false;
    }
}

/* A duration atom. */
static void put_duration(em_t *e, sl_atom_t atom, double secs)
{
    uint64_t us = secs > 0 ? (uint64_t)(secs * 1e6 + 0.5) : 0;
    char d[32];
    int n;

    switch (atom) {
    case SL_ATOM_SECS:
        put_u64(e, us / 1000000);
        break;
    case SL_ATOM_D:
        put_u64(e, us);
        break;
    case SL_ATOM_MS:
        put_u64(e, us / 1000);
        break;
    default:
        n = snprintf(d, sizeof(d), "%llu.%06llu",
                     (unsigned long long)(us / 1000000),
                     (unsigned long long)(us % 1000000));
        put(e, d, (size_t)n);
        break;
    }
}

/* One atom's value. */
static INLINE void put_atom(em_t *e, sl_atom_t atom, sl_accesslog_clock_t *clk,
                            const sl_accesslog_rec_t *r)
{
    const sl_req_t *req = r->req;
    const char *v = NULL;
    size_t vn = 0;

    switch (atom) {
    case SL_ATOM_H:
        put_str(e, r->peer[0] != '\0' ? r->peer : NULL, strlen(r->peer));
        break;
    case SL_ATOM_U:
        put_user(e, req);
        break;
    case SL_ATOM_T:
        sl_accesslog_clock_set(clk, (time_t)r->end);
        if (e->json)
            put_text(e, clk->iso, clk->iso_len);
        else
            put(e, clk->clf, clk->clf_len);
        break;
    case SL_ATOM_R:
        if (req != NULL)
            put_request_line(e, req);
        else
            put_str(e, NULL, 0);
        break;
    case SL_ATOM_M:
        if (req != NULL) {
            size_t mn;
            v = sl_reqline_method_name(req, &mn);
            put_str(e, v, mn);
        } else {
            put_str(e, NULL, 0);
        }
        break;
    case SL_ATOM_PATH:
        if (req != NULL)
            put_path(e, req);
        else
            put_str(e, NULL, 0);
        break;
    case SL_ATOM_Q:
        if (req != NULL) {
            sl_target_t t;
            sl_http_target(req->hbuf.data + req->url_off, req->url_len, &t);
            put_str(e, t.query != NULL ? t.query : "", t.query_len);
        } else {
            put_str(e, NULL, 0);
        }
        break;
    case SL_ATOM_PROTO:
        if (req != NULL)
            put_proto(e, req);
        else
            put_str(e, NULL, 0);
        break;
    case SL_ATOM_S:
        if (r->status > 0)
            put_u64(e, (uint64_t)r->status);
        else
            put_str(e, NULL, 0);
        break;
    case SL_ATOM_BYTES:
        put_u64(e, r->body);
        break;
    case SL_ATOM_B:
        if (r->body > 0)
            put_u64(e, r->body);
        else
            put_str(e, NULL, 0);
        break;
    case SL_ATOM_F:
    case SL_ATOM_A:
        if (req != NULL)
            v = atom == SL_ATOM_F ? req_header(req, "referer", 7, &vn)
                                  : req_header(req, "user-agent", 10, &vn);
        put_str(e, v, vn);
        break;
    case SL_ATOM_SECS:
    case SL_ATOM_D:
    case SL_ATOM_MS:
    case SL_ATOM_LSECS:
        put_duration(e, atom, r->end - r->start);
        break;
    case SL_ATOM_P:
        if (!e->json)
            PUT_LIT(e, "<");
        put_u64(e, (uint64_t)r->pid);
        if (!e->json)
            PUT_LIT(e, ">");
        break;
    case SL_ATOM_TLS_PROTOCOL:
    case SL_ATOM_TLS_CIPHER:
        v = atom == SL_ATOM_TLS_PROTOCOL ? r->tls_protocol : r->tls_cipher;
        put_str(e, v, v != NULL ? strlen(v) : 0);
        break;
    default: /* l, and the unknown */
        put_str(e, NULL, 0);
        break;
    }
}

/* A header or environment op's value. */
static void put_named(em_t *e, const sl_logfmt_t *f, const sl_logop_t *op,
                      const sl_accesslog_rec_t *r)
{
    const char *name = f->pool + op->name_off, *v = NULL;
    size_t vn = 0;

    if (op->kind == SL_OP_REQ_HDR && r->req != NULL)
        v = req_header(r->req, name, op->name_len, &vn);
    else if (op->kind == SL_OP_RESP_HDR && r->resp_head != NULL)
        v = resp_header(r->resp_head, r->resp_head_len, name, op->name_len,
                        &vn);
    else if (op->kind == SL_OP_ENV && op->val_len != UINT16_MAX) {
        v = f->pool + op->val_off;
        vn = op->val_len;
    }
    put_str(e, v, vn);
}

/* JSON: the key of OP, after a comma unless FIRST; false when the atom is
 * one an earlier op already gave (B and b share "bytes") or unknown. */
static bool put_key(em_t *e, const sl_logfmt_t *f, const sl_logop_t *op,
                    bool first, uint32_t *seen)
{
    static const char *const prefix[] = {
        [SL_OP_REQ_HDR] = "request_header:",
        [SL_OP_RESP_HDR] = "response_header:",
        [SL_OP_ENV] = "env:",
    };
    const char *key;
    uint32_t bit;

    if (op->kind == SL_OP_ATOM) {
        if (op->atom == SL_ATOM_UNKNOWN)
            return false;
        bit = 1u << (op->atom == SL_ATOM_B ? SL_ATOM_BYTES : op->atom);
        if (*seen & bit)
            return false;
        *seen |= bit;
        key = sl_logfmt_key((sl_atom_t)op->atom);
        if (!room(e, strlen(key) + 32))
            return false;
        if (!first)
            PUT_LIT(e, ",");
        PUT_LIT(e, "\"");
        put(e, key, strlen(key));
    } else {
        key = prefix[op->kind];
        if (!room(e, strlen(key) + op->name_len * 6 + 32))
            return false;
        if (!first)
            PUT_LIT(e, ",");
        PUT_LIT(e, "\"");
        put(e, key, strlen(key));
        put_esc(e, f->pool + op->name_off, op->name_len);
    }
    PUT_LIT(e, "\":");
    return !e->full;
}

size_t sl_accesslog_render(const sl_logfmt_t *f, sl_accesslog_clock_t *clk,
                           const sl_accesslog_rec_t *rec, char *out, size_t n)
{
    em_t e = {out, out + n - EM_RESERVE, false, f->json, false};
    uint32_t seen = 0;
    bool first = true;
    int i;

    if (plain_bits['a'] == 0)
        plain_init();
    if (f->json)
        PUT_LIT(&e, "{");
    for (i = 0; i < f->nops && !e.full; i++) {
        const sl_logop_t *op = &f->ops[i];
        if (op->kind == SL_OP_LIT) {
            if (!f->json)
                put(&e, f->pool + op->name_off, op->name_len);
            continue;
        }
        if (f->json && !put_key(&e, f, op, first, &seen))
            continue;
        first = false;
        if (op->kind == SL_OP_ATOM)
            put_atom(&e, (sl_atom_t)op->atom, clk, rec);
        else
            put_named(&e, f, op, rec);
    }
    /* the reserve: room for these whatever was cut */
    if (e.in_str)
        *e.p++ = '"';
    if (f->json)
        *e.p++ = '}';
    *e.p++ = '\n';
    return (size_t)(e.p - out);
}

void sl_accesslog_clock_set(sl_accesslog_clock_t *clk, time_t t)
{
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr",
                                       "May", "Jun", "Jul", "Aug",
                                       "Sep", "Oct", "Nov", "Dec"};
    struct tm tm;
    long off;
    char sign;
    int n;

    if (clk->sec == t && clk->clf_len > 0)
        return;
    localtime_r(&t, &tm);
    off = tm.tm_gmtoff;
    sign = off < 0 ? '-' : '+';
    off = off < 0 ? -off : off;
    n = snprintf(clk->clf, sizeof(clk->clf),
                 "[%02d/%s/%04d:%02d:%02d:%02d %c%02ld%02ld]", tm.tm_mday,
                 months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour,
                 tm.tm_min, tm.tm_sec, sign, off / 3600, off / 60 % 60);
    clk->clf_len = n > 0 ? (size_t)n : 0;
    n = snprintf(clk->iso, sizeof(clk->iso),
                 "%04d-%02d-%02dT%02d:%02d:%02d%c%02ld:%02ld",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                 tm.tm_min, tm.tm_sec, sign, off / 3600, off / 60 % 60);
    clk->iso_len = n > 0 ? (size_t)n : 0;
    clk->sec = t;
}
