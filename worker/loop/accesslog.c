/* accesslog.c - renders and writes the access log on the loop thread.
 *
 * Rendering walks the ops compiled at start and writes into the tail of
 * the write buffer itself, so a line is formatted once and copied never;
 * the writer keeps SL_ACCESSLOG_LINE_MAX bytes free for it. The one thing
 * a line needs that changes per second, the time, is cached per second.
 *
 * Writing: whole lines, one write(2) per buffer for a file opened with
 * O_APPEND, so the lines of several workers never mix. A pipe (stdout
 * under a process manager) gets its own non-blocking open file description
 * (a fresh open of /proc/self/fd/1, so the O_NONBLOCK does not leak into
 * the stdout the app and the supervisor share) and writes of whole lines
 * of at most PIPE_BUF bytes, which a pipe takes atomically or not at all.
 * Whatever cannot be written at once is dropped and counted: a log must
 * not stall the requests it logs.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "worker/loop/accesslog.h"
#include "worker/loop/conn.h"
#include "worker/loop/http.h"
#include "worker/loop/reqline.h"

struct sl_accesslog {
    sl_logfmt_t fmt;
    sl_accesslog_clock_t clock;
    struct ev_loop *loop; /* borrowed */
    ev_timer timer;       /* embedded: the 1 s flush */
    const char *path;     /* borrowed from argv; NULL = stdout */
    int fd;               /* owned */
    bool pipe;            /* write whole lines of at most PIPE_BUF */
    bool sock;            /* stdout is a socket: send(MSG_DONTWAIT) */
    char *buf;            /* owned, SL_ACCESSLOG_BUF bytes */
    size_t len;
    uint64_t dropped;   /* lines dropped since the last report */
    const char *reason; /* why the last ones were */
    long pid;
};

/* ------------------------------------------------------------------ */
/* rendering                                                          */

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

/* ------------------------------------------------------------------ */
/* writing                                                            */

/* Count the lines in P[0..N). */
static uint64_t count_lines(const char *p, size_t n)
{
    const char *end = p + n;
    uint64_t lines = 0;

    while (p < end && (p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        lines++;
        p++;
    }
    return lines;
}

/* One write of P[0..N) that never waits. */
static ssize_t write_once(sl_accesslog_t *a, const char *p, size_t n)
{
    ssize_t w;

    do
        w = a->sock ? send(a->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL)
                    : write(a->fd, p, n);
    while (w < 0 && errno == EINTR);
    return w;
}

/* How much of P[0..N) to write at once: everything to a file; to a pipe,
 * the whole lines that fit in PIPE_BUF (a longer line alone). */
static size_t chunk(const sl_accesslog_t *a, const char *p, size_t n)
{
    const char *nl;

    if (!a->pipe || n <= PIPE_BUF)
        return n;
    /* the last line end within PIPE_BUF (a loop: GCC's UBSan build takes
     * memrchr's P for one that may be NULL) */
    for (size_t i = PIPE_BUF; i > 0; i--)
        if (p[i - 1] == '\n')
            return i;
    nl = memchr(p, '\n', n);
    return nl != NULL ? (size_t)(nl - p) + 1 : n;
}

int sl_accesslog_flush(sl_accesslog_t *a)
{
    size_t off = 0, n;
    ssize_t w;

    while (off < a->len) {
        n = chunk(a, a->buf + off, a->len - off);
        w = write_once(a, a->buf + off, n);
        if (w < 0 || (size_t)w < n) {
            /* what a short write left would tear a line: drop it too,
             * from its line's end on */
            if (w > 0) {
                const char *nl =
                    memchr(a->buf + off + w, '\n', a->len - off - (size_t)w);
                off = nl != NULL ? (size_t)(nl - a->buf) + 1 : a->len;
            }
            a->reason = w >= 0 ? "short write"
                        : errno == EAGAIN || errno == EWOULDBLOCK ? "EAGAIN"
                        : errno == ENOSPC                         ? "ENOSPC"
                        : errno == EPIPE                          ? "EPIPE"
                                         : "write error";
            a->dropped += count_lines(a->buf + off, a->len - off);
            a->len = 0;
            return -1;
        }
        off += n;
    }
    a->len = 0;
    return 0;
}

uint64_t sl_accesslog_report(sl_accesslog_t *a)
{
    uint64_t n = a->dropped;

    if (n > 0)
        sl_warn("access log: %llu lines dropped (%s)", (unsigned long long)n,
                a->reason);
    a->dropped = 0;
    return n;
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    sl_accesslog_t *a =
        (sl_accesslog_t *)((char *)w - offsetof(sl_accesslog_t, timer));

    (void)loop;
    (void)revents;
    if (a->len > 0)
        sl_accesslog_flush(a);
    sl_accesslog_report(a);
}

void sl_accesslog_add(sl_accesslog_t *a, const sl_accesslog_rec_t *rec)
{
    if (SL_ACCESSLOG_BUF - a->len < SL_ACCESSLOG_LINE_MAX)
        sl_accesslog_flush(a);
    a->len += sl_accesslog_render(&a->fmt, &a->clock, rec, a->buf + a->len,
                                  SL_ACCESSLOG_LINE_MAX);
}

/* "a.b.c.d" of IPv4 address A (network order) into BUF (16 bytes):
 * inet_ntop() goes through sprintf, a tenth of a hello world's cost. */
static const char *ipv4_text(const struct in_addr *a, char *buf)
{
    const unsigned char *b = (const unsigned char *)&a->s_addr;
    char *p = buf;
    int i;

    for (i = 0; i < 4; i++) {
        unsigned v = b[i];
        if (v >= 100)
            *p++ = (char)('0' + v / 100);
        if (v >= 10)
            *p++ = (char)('0' + v / 10 % 10);
        *p++ = (char)('0' + v % 10);
        *p++ = i < 3 ? '.' : '\0';
    }
    return buf;
}

const char *sl_accesslog_remote(const sl_conn_t *c, char *buf, size_t n)
{
    int port;

    if (sl_req_client(&c->req)->addr[0] != '\0')
        return sl_req_client(&c->req)
            ->addr; /* named by a trusted proxy's header */
    if (c->peer.ss_family == AF_INET && n >= INET_ADDRSTRLEN)
        return ipv4_text(&((const struct sockaddr_in *)&c->peer)->sin_addr,
                         buf);
    return sl_conn_peer(c, buf, n, &port);
}

void sl_accesslog_request(sl_accesslog_t *a, sl_conn_t *c)
{
    char peer[64];
    sl_accesslog_rec_t rec = {
        .req = c->head_done ? &c->req : NULL,
        .peer = sl_accesslog_remote(c, peer, sizeof(peer)),
        .status = c->resp_status,
        .body = c->resp_body,
        .start = c->req.start,
        .end = ev_time(),
        .pid = a->pid,
    };

    if (a->fmt.resp_headers && c->resp_head.len > 0) {
        rec.resp_head = c->resp_head.data;
        rec.resp_head_len = c->resp_head.len;
    }
    sl_accesslog_add(a, &rec);
}

bool sl_accesslog_wants_head(const sl_accesslog_t *a)
{
    return a != NULL && a->fmt.resp_headers;
}

/* Open A's destination: the file by name, or a non-blocking description
 * of stdout of its own. The new descriptor, or -1 after logging. */
static int open_dest(sl_accesslog_t *a)
{
    struct stat st;
    int fd;

    if (a->path != NULL) {
        fd = open(a->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            sl_log_errno(SL_LOG_ERROR, "access log: open(%s) failed", a->path);
        a->pipe = a->sock = false;
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
            a->pipe = true;
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        }
        return fd;
    }
    if (fstat(STDOUT_FILENO, &st) < 0) {
        sl_log_errno(SL_LOG_ERROR, "access log: stdout is not open");
        return -1;
    }
    a->pipe = S_ISFIFO(st.st_mode);
    a->sock = S_ISSOCK(st.st_mode);
    /* a description of our own, so O_NONBLOCK stays ours; a socket (the
     * journal's stdout) cannot be opened again: send() says MSG_DONTWAIT */
    fd = a->sock ? -1
                 : open("/proc/self/fd/1",
                        O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
        sl_log_errno(SL_LOG_ERROR, "access log: dup(stdout) failed");
    return fd;
}

int sl_accesslog_open(sl_accesslog_t **out, struct ev_loop *loop,
                      const sl_options_t *o)
{
    sl_accesslog_t *a;
    char err[256];

    *out = NULL;
    if (o->access_logfile == NULL)
        return 0;
    a = calloc(1, sizeof(*a));
    if (a == NULL || (a->buf = malloc(SL_ACCESSLOG_BUF)) == NULL) {
        sl_error("access log: out of memory");
        goto out_free;
    }
    if (sl_logfmt_compile(&a->fmt, o->access_logformat, o->access_log_json, err,
                          sizeof(err)) < 0) {
        sl_error("access log: bad format: %s", err);
        goto out_free;
    }
    if (a->fmt.unknown)
        sl_warn("access log: the format names atoms gunicorn does not"
                " know; they are written '-'");
    a->path = strcmp(o->access_logfile, "-") == 0 ? NULL : o->access_logfile;
    a->clock.sec = -1;
    a->pid = (long)getpid();
    a->fd = open_dest(a);
    if (a->fd < 0)
        goto out_free;
    a->loop = loop;
    ev_timer_init(&a->timer, timer_cb, 1.0, 1.0);
    ev_timer_start(loop, &a->timer);
    ev_unref(loop); /* the log alone keeps no loop running */
    *out = a;
    return 0;

out_free:
    if (a != NULL)
        free(a->buf);
    free(a);
    return -1;
}

void sl_accesslog_reopen(sl_accesslog_t *a)
{
    int fd;

    if (a == NULL)
        return;
    sl_accesslog_flush(a);
    if (a->path == NULL)
        return; /* stdout: nothing to reopen */
    fd = open_dest(a);
    if (fd < 0)
        return; /* logged; the old file goes on */
    close(a->fd);
    a->fd = fd;
}

void sl_accesslog_close(sl_accesslog_t *a)
{
    if (a == NULL)
        return;
    if (a->len > 0)
        sl_accesslog_flush(a);
    sl_accesslog_report(a);
    if (a->loop != NULL) {
        ev_ref(a->loop);
        ev_timer_stop(a->loop, &a->timer);
    }
    close(a->fd);
    free(a->buf);
    free(a);
}
