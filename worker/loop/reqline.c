/* reqline.c - the request line's method and target, read before llhttp.
 *
 * llhttp 8.1 knows only the methods it has names for, and in strict mode
 * refuses bytes 0x80-0xFF in a target; RFC 9110 allows any token for a
 * method, and PEP 3333 (nginx, gunicorn) any target byte but controls,
 * space and DEL. So the loop reads "method SP target SP" itself, once
 * however it arrives (h1_parse.c), and hands llhttp a stand-in with the
 * same framing. What llhttp's URL parser also did, telling the target's
 * four forms apart (RFC 9112 §3.2) and checking an authority, is here
 * too, run once the head is complete (http.c).
 *
 * A chunked body's size lines are read here too. llhttp 8.1 refuses
 * whitespace around a chunk extension's ';' and '=', which RFC 9112
 * §7.1.1 allows (BWS), and a value that ends on ';'; the loop checks the
 * whole line itself and hands llhttp the size digits alone (h1_parse.c),
 * so llhttp never sees an extension.
 */
#include "config.h"

#include <string.h>

#include "llhttp.h"
#include "worker/loop/reqline.h"

static const struct {
    const char *name;
    size_t len;
    int method;
} methods[] = {
#define XX(num, name, string) {#string, sizeof(#string) - 1, num},
    HTTP_METHOD_MAP(XX)
#undef XX
};

int sl_reqline_method_of(const char *p, size_t n)
{
    size_t i;

    if (n == 3 && memcmp(p, "GET", 3) == 0)
        return HTTP_GET;
    for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (methods[i].len == n && memcmp(methods[i].name, p, n) == 0)
            return methods[i].method;
    return SL_METHOD_OTHER;
}

const char *sl_reqline_method_name(const sl_req_t *r, size_t *len)
{
    const char *m;

    if (r->method_len > 0) {
        *len = r->method_len;
        return r->hbuf.data + r->method_off;
    }
    m = r->method >= 0 ? llhttp_method_name(r->method) : "";
    *len = strlen(m);
    return m;
}

/* What a byte may be in a request line: 1 a method's (RFC 9110 §5.6.2
 * tchar), 2 a target's (anything but controls, space and DEL). One load a
 * byte: the line is read for every request. */
enum { TCHAR = 1, TARGET = 2 };
/* clang-format off */
static const unsigned char line_class[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x00 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x10 */
    0, 3, 2, 3, 3, 3, 3, 3, 2, 2, 3, 3, 2, 3, 3, 2, /* 0x20 */
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, /* 0x30 */
    2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, /* 0x40 */
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 3, 3, /* 0x50 */
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, /* 0x60 */
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 3, 2, 3, 0, /* 0x70 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0x80 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0x90 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xA0 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xB0 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xC0 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xD0 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xE0 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xF0 */
};
/* clang-format on */

int sl_reqline_scan(const char *p, size_t n, int limit, size_t *pos,
                    size_t *mlen, size_t *tlen)
{
    /* the line is method SP target SP "HTTP/1.1": 10 bytes beyond the two
     * tokens, as the limit has always been counted */
    size_t max = limit > 0 ? (size_t)limit : (size_t)-1;
    const unsigned char *u = (const unsigned char *)p;
    size_t i = *pos, t;

    if (*mlen == 0) {
        while (i < n && (line_class[u[i]] & TCHAR))
            i++;
        if (i == n) {
            *pos = i;
            return i + 10 > max ? 414 : 0;
        }
        if (i == 0 || u[i] != ' ')
            return 400;
        *mlen = i++;
    }
    for (t = i; t < n && (line_class[u[t]] & TARGET); t++)
        ;
    if (t + 9 > max)
        return 414;
    if (t == n) {
        *pos = t;
        return 0;
    }
    if (u[t] != ' ' || t == *mlen + 1)
        return 400;
    *tlen = t - *mlen - 1;
    return 1;
}

static bool is_hex(char ch)
{
    return (ch >= '0' && ch <= '9') ||
           ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f');
}

/* RFC 3986 reg-name: unreserved / pct-encoded / sub-delims */
static bool reg_name_char(char ch)
{
    if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z')
        return true;
    if (ch >= '0' && ch <= '9')
        return true;
    return ch != 0 && strchr("-._~!$&'()*+,;=", ch) != NULL;
}

bool sl_reqline_authority_ok(const char *p, size_t n, bool need_port)
{
    size_t i = 0, digits = 0;
    unsigned long port = 0;

    if (n > 0 && p[0] == '[') {
        for (i = 1; i < n && p[i] != ']'; i++)
            if (!is_hex(p[i]) && p[i] != ':' && p[i] != '.')
                return false;
        if (i == n || i == 1)
            return false;
        i++;
    } else {
        for (; i < n && p[i] != ':'; i++) {
            if (p[i] == '%') {
                if (i + 2 >= n || !is_hex(p[i + 1]) || !is_hex(p[i + 2]))
                    return false;
                i += 2;
            } else if (!reg_name_char(p[i])) {
                return false; /* '@' (userinfo) among them */
            }
        }
        if (i == 0)
            return false;
    }
    if (i == n)
        return !need_port;
    if (p[i++] != ':')
        return false;
    for (; i < n; i++, digits++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        port = port * 10 + (unsigned long)(p[i] - '0');
        if (port > 65535)
            return false;
    }
    return digits > 0 || !need_port;
}

/* RFC 3986 scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) */
static bool scheme_char(char ch, size_t i)
{
    if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z')
        return true;
    return i > 0 &&
           ((ch >= '0' && ch <= '9') || ch == '+' || ch == '-' || ch == '.');
}

int sl_reqline_check_target(const sl_req_t *r, const char *base,
                            const char **auth, size_t *alen)
{
    const char *u = base + r->url_off;
    size_t n = r->url_len, i, end;

    *auth = NULL;
    if (r->method == HTTP_CONNECT)
        return sl_reqline_authority_ok(u, n, true) ? 0 : 400;
    if (u[0] == '/')
        return 0;
    if (n == 1 && u[0] == '*')
        return r->method == HTTP_OPTIONS ? 0 : 400;
    for (i = 0; i < n && scheme_char(u[i], i); i++)
        ;
    if (i == 0 || i + 3 > n || memcmp(u + i, "://", 3) != 0)
        return 400;
    i += 3;
    for (end = i; end < n && u[end] != '/' && u[end] != '?' && u[end] != '#';
         end++)
        ;
    if (!sl_reqline_authority_ok(u + i, end - i, false))
        return 400;
    *auth = u + i;
    *alen = end - i;
    return 0;
}

static bool is_bws(unsigned char ch)
{
    return ch == ' ' || ch == '\t';
}

/* A quoted-string (RFC 9110 §5.6.4) at U[*I..END), *I at its opening
 * quote: true with *I past the closing one. */
static bool quoted_string(const unsigned char *u, size_t *i, size_t end)
{
    size_t k = *i + 1;

    for (; k < end; k++) {
        if (u[k] == '"') {
            *i = k + 1;
            return true;
        }
        if (u[k] == '\\' && ++k == end)
            return false;
        /* qdtext and quoted-pair alike: HTAB, SP, VCHAR, obs-text */
        if (u[k] != '\t' && (u[k] < 0x20 || u[k] == 0x7f))
            return false;
    }
    return false;
}

/* A token at U[*I..END): true with *I past it when there is one. */
static bool token(const unsigned char *u, size_t *i, size_t end)
{
    size_t k = *i;

    while (k < end && (line_class[u[k]] & TCHAR))
        k++;
    if (k == *i)
        return false;
    *i = k;
    return true;
}

int sl_reqline_chunk(const char *p, size_t n, size_t *digits, size_t *len)
{
    const unsigned char *u = (const unsigned char *)p;
    const char *lf =
        memchr(p, '\n', n < SL_REQLINE_CHUNK_MAX ? n : SL_REQLINE_CHUNK_MAX);
    size_t i = 0, end;

    if (lf == NULL)
        return n < SL_REQLINE_CHUNK_MAX ? 0 : -1;
    end = (size_t)(lf - p);
    if (end == 0 || p[end - 1] != '\r')
        return -1; /* a bare LF ends no line here (RFC 9112 §2.2) */
    end--;
    while (i < end && is_hex(p[i]))
        i++;
    if (i == 0)
        return -1;
    *digits = i;
    while (i < end) {
        while (i < end && is_bws(u[i]))
            i++;
        if (i == end || u[i++] != ';')
            return -1; /* whitespace ends nothing: a ';' must follow */
        while (i < end && is_bws(u[i]))
            i++;
        if (!token(u, &i, end))
            return -1;
        size_t name_end = i;
        while (i < end && is_bws(u[i]))
            i++;
        if (i == end || u[i] != '=') {
            i = name_end; /* a name alone: what follows is the next ';' */
            continue;
        }
        i++;
        while (i < end && is_bws(u[i]))
            i++;
        if (i < end && u[i] == '"' ? !quoted_string(u, &i, end)
                                   : !token(u, &i, end))
            return -1;
    }
    *len = end + 2;
    return 1;
}
