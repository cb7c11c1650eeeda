/* http.c - request head validation and the responses the loop writes.
 *
 * llhttp in strict mode rejects most malformed input by itself (bad tokens,
 * obs-fold, Content-Length together with Transfer-Encoding, bad chunk sizes);
 * what it leaves to us is what needs the whole head: Host on HTTP/1.1, the
 * body limit, Expect, and the HTTP version.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/date.h"
#include "worker/loop/http.h"
#include "worker/loop/reqline.h"

/* Called per header against tables of names: it stops at the first
 * differing byte (usually the first) instead of measuring NAME each time. */
void sl_http_trim(const char **p, size_t *n)
{
    while (*n > 0 && (**p == ' ' || **p == '\t'))
        (*p)++, (*n)--;
    while (*n > 0 && ((*p)[*n - 1] == ' ' || (*p)[*n - 1] == '\t'))
        (*n)--;
}

bool sl_http_list_next(const char **p, size_t *n, const char **item,
                       size_t *len)
{
    const char *comma;
    size_t span;

    if (*p == NULL)
        return false;
    comma = memchr(*p, ',', *n);
    span = comma ? (size_t)(comma - *p) : *n;
    *item = *p;
    *len = span;
    sl_http_trim(item, len);
    if (comma == NULL) {
        *p = NULL; /* that was the last item */
        *n = 0;
    } else {
        *p += span + 1;
        *n -= span + 1;
    }
    return true;
}

bool sl_http_name_is(const char *p, size_t n, const char *name)
{
    size_t i;

    for (i = 0; i < n; i++) {
        char ch = p[i];
        if (ch >= 'A' && ch <= 'Z')
            ch = (char)(ch + 32);
        if (name[i] == '\0' || ch != name[i])
            return false;
    }
    return name[n] == '\0';
}

/* Fields RFC 9110 §6.5.1 keeps out of trailers, lower case: framing,
 * routing, request modifiers (controls, conditionals, negotiation,
 * authentication, ranges), response control data, and what describes the
 * content; the forwarding headers too, which a proxy checks in the head.
 * A name ending in '-' stands for every name it begins. At most 32. */
static const char *const trailer_refused[] = {
    "transfer-encoding",
    "host",
    "trailer",
    "te",
    "connection",
    "keep-alive",
    "upgrade",
    "authorization",
    "cookie",
    "set-cookie",
    "cache-control",
    "expect",
    "max-forwards",
    "pragma",
    "range",
    "age",
    "date",
    "expires",
    "location",
    "retry-after",
    "vary",
    "www-authenticate",
    "accept",
    "forwarded",
    "x-real-ip",
    "content-",
    "proxy-",
    "if-",
    "accept-",
    "x-forwarded-",
};

#define NREFUSED (sizeof(trailer_refused) / sizeof(trailer_refused[0]))
_Static_assert(NREFUSED <= 32, "trailer_mask has 32 bits");

void sl_http_trailer_reset(sl_req_t *r)
{
    r->trailer_mask = (uint32_t)((1ull << NREFUSED) - 1);
    r->trailer_pos = 0;
    r->trailer_prefix_hit = false;
}

void sl_http_trailer_feed(sl_req_t *r, const char *p, size_t n)
{
    size_t k;

    for (k = 0; k < n && r->trailer_mask != 0; k++) {
        char ch = p[k];
        uint32_t m = r->trailer_mask;
        if (ch >= 'A' && ch <= 'Z')
            ch = (char)(ch + 32);
        while (m != 0) {
            int i = __builtin_ctz(m);
            const char *name = trailer_refused[i];
            m &= m - 1;
            if (name[r->trailer_pos] != ch) {
                r->trailer_mask &= ~(1u << i);
            } else if (ch == '-' && name[r->trailer_pos + 1] == '\0') {
                r->trailer_prefix_hit = true;
                r->trailer_mask &= ~(1u << i);
            }
        }
        r->trailer_pos++;
    }
}

bool sl_http_trailer_end(sl_req_t *r)
{
    bool bad = r->trailer_prefix_hit;
    uint32_t m = r->trailer_mask;

    while (!bad && m != 0) {
        int i = __builtin_ctz(m);
        m &= m - 1;
        bad = trailer_refused[i][r->trailer_pos] == '\0';
    }
    sl_http_trailer_reset(r);
    return bad;
}

size_t sl_http_log_name(const sl_req_t *r, char *buf, size_t n)
{
    size_t mn, un = r->url_len;
    const char *m = sl_reqline_method_name(r, &mn);

    if (n == 0)
        return 0;
    if (mn > n - 1)
        mn = n - 1;
    memcpy(buf, m, mn);
    if (mn < n - 1)
        buf[mn++] = ' ';
    if (un > n - 1 - mn)
        un = n - 1 - mn;
    memcpy(buf + mn, r->hbuf.data + r->url_off, un);
    buf[mn + un] = '\0';
    return mn + un;
}

const char *const sl_http_common_names[SL_HTTP_NCOMMON] = {
    "host",
    "user-agent",
    "accept",
    "accept-encoding",
    "accept-language",
    "connection",
    "cookie",
    "content-type",
    "content-length",
    "referer",
    "cache-control",
    "authorization",
    "origin",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-request-id",
    "if-none-match",
    "if-modified-since",
    "upgrade-insecure-requests",
    "transfer-encoding",
    "expect",
    "upgrade",
    "te",
};

int sl_http_common_index(const char *p, size_t n)
{
    int i;

    for (i = 0; i < SL_HTTP_NCOMMON; i++)
        if (sl_http_name_is(p, n, sl_http_common_names[i]))
            return i;
    return -1;
}

static void trim_value(const char *base, sl_hdr_t *hd)
{
    while (hd->val_len > 0 && (base[hd->val_off + hd->val_len - 1] == ' ' ||
                               base[hd->val_off + hd->val_len - 1] == '\t'))
        hd->val_len--;
}

/* Copy the URL and headers out of the read buffer, rebasing the offsets. */
static int copy_head(sl_req_t *r, const sl_buf_t *rbuf)
{
    uint32_t lo = r->method_len > 0 ? r->method_off : r->url_off;
    uint32_t hi = r->url_off + r->url_len;
    int i;

    for (i = 0; i < r->nhdrs; i++) {
        sl_hdr_t *hd = &r->hdrs[i];
        if (hd->val_len == 0)
            hd->val_off = hd->name_off + hd->name_len;
        if (hd->val_off + hd->val_len > hi)
            hi = hd->val_off + hd->val_len;
        /* a Host taken from an absolute-form target has its value in
         * the URL, before its name */
        if (hd->name_off + hd->name_len > hi)
            hi = hd->name_off + hd->name_len;
        if (hd->name_off < lo)
            lo = hd->name_off;
    }
    sl_buf_reset(&r->hbuf, 64 * 1024);
    if (sl_buf_append(&r->hbuf, rbuf->data + lo, hi - lo) < 0)
        return -1;
    r->method_off -= lo;
    r->url_off -= lo;
    for (i = 0; i < r->nhdrs; i++) {
        r->hdrs[i].name_off -= lo;
        r->hdrs[i].val_off -= lo;
    }
    return 0;
}

/* Transfer-Encoding, over every field of that name in order: a single
 * chunked, last, is what we serve (RFC 9112 §6.1). */
typedef struct {
    bool seen, chunked_last, bad, unknown;
} te_walk_t;

static void te_add(te_walk_t *w, const char *p, size_t n)
{
    const char *item;
    size_t len;

    w->seen = true;
    if (n == 0)
        w->bad = true;
    while (sl_http_list_next(&p, &n, &item, &len)) {
        if (len == 0 || w->chunked_last) {
            w->bad = true; /* an empty item, or anything after chunked */
        } else if (sl_http_name_is(item, len, "chunked")) {
            w->chunked_last = true;
        } else {
            w->unknown = true; /* a coding we do not decode */
        }
    }
}

/* 0, or the status for a Transfer-Encoding we will not serve: 400 when
 * the body's length is not chunked's to tell or the request is HTTP/1.0,
 * 501 for a coding before chunked we do not decode (gzip, identity...). */
static int te_status(const te_walk_t *w, const sl_req_t *r)
{
    if (!w->seen)
        return 0;
    if (r->minor == 0 || w->bad || !w->chunked_last)
        return 400;
    return w->unknown ? 501 : 0;
}

/* llhttp takes a bare LF for the end of the request line and of the head,
 * though not of a field line: we want CRLF throughout (RFC 9112 §2.2 lets
 * a server refuse; one that is lenient where another is not is how
 * requests get smuggled). Before the values are trimmed. */
static bool crlf_ends(const sl_req_t *r, const sl_buf_t *rbuf)
{
    const char *base = rbuf->data;
    size_t end;
    const sl_hdr_t *hd;

    if (base[r->url_off + r->url_len + 9] != '\r')
        return false;
    if (r->nhdrs == 0) {
        end = r->url_off + r->url_len + 9;
    } else {
        hd = &r->hdrs[r->nhdrs - 1];
        end = hd->val_len > 0 ? hd->val_off + hd->val_len
                              : hd->name_off + hd->name_len + 1;
        while (end < rbuf->len && (base[end] == ' ' || base[end] == '\t'))
            end++;
    }
    return end + 4 <= rbuf->len && memcmp(base + end, "\r\n\r\n", 4) == 0;
}

int sl_http_head_complete(llhttp_t *h, sl_req_t *r, const sl_buf_t *rbuf,
                          long long limit)
{
    const char *base = rbuf->data;
    te_walk_t te = {0};
    const char *auth;
    size_t alen = 0;
    int host = -1, i, status;

    /* r->method was taken from the request line (h1_parse.c): llhttp
     * parsed a stand-in */
    r->major = llhttp_get_http_major(h);
    r->minor = llhttp_get_http_minor(h);
    r->keep_alive = llhttp_should_keep_alive(h);
    r->chunked = (h->flags & F_CHUNKED) != 0;
    r->content_length = (h->flags & F_CONTENT_LENGTH) ? h->content_length : 0;
    r->has_body = r->chunked || r->content_length > 0;
    r->head = r->method == HTTP_HEAD;
    r->expect_continue = false;
    sl_http_trailer_reset(r);
    if (r->major != 1)
        return 505;
    if (r->url_len == 0)
        return 400;
    if (!crlf_ends(r, rbuf))
        return 400;
    status = sl_reqline_check_target(r, base, &auth, &alen);
    if (status != 0)
        return status;
    for (i = 0; i < r->nhdrs; i++) {
        sl_hdr_t *hd = &r->hdrs[i];
        const char *name = base + hd->name_off;
        trim_value(base, hd);
        if (sl_http_name_is(name, hd->name_len, "host")) {
            if (host >= 0)
                return 400; /* two Hosts: which one did the proxy check? */
            host = i;
        } else if (sl_http_name_is(name, hd->name_len, "expect")) {
            if (!sl_http_name_is(base + hd->val_off, hd->val_len,
                                 "100-continue"))
                return 417;
            r->expect_continue = r->minor >= 1;
        } else if (sl_http_name_is(name, hd->name_len, "transfer-encoding")) {
            te_add(&te, base + hd->val_off, hd->val_len);
        }
    }
    if (r->minor >= 1 && host < 0)
        return 400;
    status = te_status(&te, r);
    if (status != 0)
        return status;
    if (auth != NULL && host >= 0) {
        r->hdrs[host].val_off = (uint32_t)(auth - base);
        r->hdrs[host].val_len = (uint32_t)alen;
    }
    if (limit > 0 && !r->chunked && r->content_length > (uint64_t)limit)
        return 413;
    if (copy_head(r, rbuf) < 0)
        return 500;
    return 0;
}

const char *sl_http_reason(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 101:
        return "Switching Protocols";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 205:
        return "Reset Content";
    case 206:
        return "Partial Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 303:
        return "See Other";
    case 304:
        return "Not Modified";
    case 307:
        return "Temporary Redirect";
    case 308:
        return "Permanent Redirect";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 402:
        return "Payment Required";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 406:
        return "Not Acceptable";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 411:
        return "Length Required";
    case 412:
        return "Precondition Failed";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 416:
        return "Range Not Satisfiable";
    case 417:
        return "Expectation Failed";
    case 418:
        return "I'm a teapot";
    case 422:
        return "Unprocessable Entity";
    case 425:
        return "Too Early";
    case 426:
        return "Upgrade Required";
    case 428:
        return "Precondition Required";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 451:
        return "Unavailable For Legal Reasons";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Unknown";
    }
}

int sl_http_status_of(const char *p, size_t n)
{
    if (n < 12 || memcmp(p, "HTTP/1.", 7) != 0 || p[8] != ' ')
        return 0;
    for (int i = 9; i < 12; i++)
        if (p[i] < '0' || p[i] > '9')
            return 0;
    return (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
}

int sl_http_error_head(sl_buf_t *b, int status)
{
    char head[512];
    bool plain = status == SL_HTTP_PLAIN_TO_TLS;
    const char *reason = sl_http_reason(plain ? 400 : status);
    /* the loop's one 426 refuses a WebSocket version: it names ours */
    bool ws = status == 426;
    const char *text = ws      ? "WebSocket version 13 is the one supported"
                       : plain ? "The plain HTTP request was sent to HTTPS"
                                 " port"
                               : reason;
    int n;

    if (plain)
        status = 400;
    n = snprintf(head, sizeof(head),
                 "HTTP/1.1 %d %s\r\n"
                 "Server: sluice\r\n"
                 "%s"
                 "%s"
                 "Content-Type: text/plain; charset=utf-8\r\n"
                 "Content-Length: %zu\r\n"
                 "Connection: close\r\n"
                 "\r\n"
                 "%s\n",
                 status, reason, sl_date_line(),
                 ws ? "Sec-WebSocket-Version: 13\r\n" : "", strlen(text) + 1,
                 text);
    if (n <= 0 || (size_t)n >= sizeof(head))
        return -1; /* cannot happen: the reasons are short */
    return sl_buf_append(b, head, (size_t)n);
}

bool sl_http_is_health(const sl_req_t *r, const char *path)
{
    size_t n;

    if (path == NULL || r->has_body ||
        (r->method != HTTP_GET && r->method != HTTP_HEAD))
        return false;
    n = strlen(path);
    return r->url_len == n && memcmp(r->hbuf.data + r->url_off, path, n) == 0;
}

int sl_http_health_head(sl_buf_t *b, const sl_req_t *r, bool ok)
{
    char head[256];
    /* 503 tells a load balancer this host is going away. A worker stopping
     * for a rolling restart or a retirement is not: its replacement is
     * READY on the same sockets, and a 503 from it during --shutdown-delay
     * would take the whole host out (every host at once, on a fleet-wide
     * HUP) */
    const char *body = ok ? "OK\n" : "draining\n";
    int n;

    n = snprintf(head, sizeof(head),
                 "HTTP/1.1 %s\r\n"
                 "Server: sluice\r\n"
                 "%s"
                 "Content-Type: text/plain\r\n"
                 "Cache-Control: no-store\r\n"
                 "Content-Length: %zu\r\n"
                 "%s"
                 "\r\n"
                 "%s",
                 ok ? "200 OK" : "503 Service Unavailable", sl_date_line(),
                 strlen(body),
                 !r->keep_alive  ? "Connection: close\r\n"
                 : r->minor == 0 ? "Connection: keep-alive\r\n"
                                 : "",
                 r->head ? "" : body);
    if (n <= 0 || (size_t)n >= sizeof(head))
        return -1; /* cannot happen: the head is fixed text */
    return sl_buf_append(b, head, (size_t)n);
}

void sl_http_target(const char *url, size_t n, sl_target_t *t)
{
    const char *p, *end, *q;
    size_t off = 0;

    /* absolute-form (a proxy's request): skip scheme and authority */
    if (n > 0 && url[0] != '/' && (p = memchr(url, ':', n)) != NULL &&
        (size_t)(p - url) + 3 <= n && p[1] == '/' && p[2] == '/') {
        off = (size_t)(p - url) + 3;
        while (off < n && url[off] != '/' && url[off] != '?' && url[off] != '#')
            off++;
    }
    p = url + off;
    end = memchr(p, '#', n - off);
    if (end == NULL)
        end = url + n;
    q = memchr(p, '?', (size_t)(end - p));
    t->path = p;
    t->path_len = (size_t)((q ? q : end) - p);
    t->query = q ? q + 1 : NULL;
    t->query_len = q ? (size_t)(end - q - 1) : 0;
    if (t->path_len == 0 && off > 0) {
        t->path = "/";
        t->path_len = 1;
    }
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

size_t sl_http_unquote(const char *p, size_t n, char *out)
{
    size_t i, o = 0;
    int hi, lo;

    for (i = 0; i < n; i++) {
        if (p[i] == '%' && i + 2 < n && (hi = hexval(p[i + 1])) >= 0 &&
            (lo = hexval(p[i + 2])) >= 0) {
            out[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[o++] = p[i];
        }
    }
    return o;
}

int sl_http_parse_u64(const char *p, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    size_t i;

    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    while (n > 0 && (*p == ' ' || *p == '\t')) {
        p++;
        n--;
    }
    if (n == 0 || n > 19)
        return -1;
    for (i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    *out = v;
    return 0;
}
