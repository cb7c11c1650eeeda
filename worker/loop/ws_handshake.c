/* ws_handshake.c - the server's side of the opening handshake (RFC 6455
 * §4.2) and the permessage-deflate negotiation (RFC 7692 §5, §7.1).
 *
 * Sec-WebSocket-Accept needs SHA-1 and base64 over 60 bytes, once per
 * connection: a small SHA-1 of our own (FIPS 180-4, tested against its
 * vectors) spares every worker a libcrypto dependency for 28 bytes of
 * output. SHA-1's weakness does not matter here: the accept key only
 * proves the server understood the handshake.
 *
 * The deflate offers are parsed forgivingly: an offer we cannot honour or
 * cannot read is declined (the connection goes on uncompressed), never a
 * reason to refuse the handshake.
 */
#include "config.h"

#include <llhttp.h>
#include <string.h>

#include "worker/loop/http.h"
#include "worker/loop/ws.h"
#include "worker/loop/ws_internal.h"

_Static_assert(sizeof(((sl_ws_handshake_t *)0)->extensions) >=
                   SL_WS_EXTENSIONS_MAX,
               "every response value must fit");

static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/* ---- SHA-1 (FIPS 180-4 §6.1) ---- */

static uint32_t rol(uint32_t x, int n)
{
    return (x << n) | (x >> (32 - n));
}

static void sha1_block(uint32_t h[5], const uint8_t *p)
{
    uint32_t w[80], a, b, c, d, e, f, k, t;
    int i;

    for (i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (i = 16; i < 80; i++)
        w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (i = 0; i < 80; i++) {
        if (i < 20) {
            f = (b & c) | (~b & d);
            k = 0x5A827999;
        } else if (i < 40) {
            f = b ^ c ^ d;
            k = 0x6ED9EBA1;
        } else if (i < 60) {
            f = (b & c) | (b & d) | (c & d);
            k = 0x8F1BBCDC;
        } else {
            f = b ^ c ^ d;
            k = 0xCA62C1D6;
        }
        t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol(b, 30);
        b = a;
        a = t;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
}

void sl_ws_sha1(const void *data, size_t n, uint8_t out[20])
{
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476,
                     0xC3D2E1F0};
    const uint8_t *p = data;
    uint8_t last[128];
    uint64_t bits = (uint64_t)n * 8;
    size_t rest, pad, i;

    for (; n >= 64; n -= 64, p += 64)
        sha1_block(h, p);
    /* the tail, a 1 bit, zeros, and the length: one or two blocks */
    rest = n;
    if (rest > 0)
        memcpy(last, p, rest);
    last[rest] = 0x80;
    pad = rest < 56 ? 64 : 128;
    memset(last + rest + 1, 0, pad - rest - 1);
    for (i = 0; i < 8; i++)
        last[pad - 1 - i] = (uint8_t)(bits >> (8 * i));
    sha1_block(h, last);
    if (pad == 128)
        sha1_block(h, last + 64);
    for (i = 0; i < 5; i++) {
        out[4 * i] = (uint8_t)(h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(h[i] >> 8);
        out[4 * i + 3] = (uint8_t)h[i];
    }
}

/* ---- base64 (RFC 4648 §4) ---- */

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void sl_ws_accept_key(const char *key, size_t n, char out[29])
{
    uint8_t buf[128], md[20];
    size_t i, o = 0;

    /* keys are 24 bytes; a longer one (never accepted) is cut to fit */
    if (n > sizeof(buf) - (sizeof(ws_guid) - 1))
        n = sizeof(buf) - (sizeof(ws_guid) - 1);
    if (n > 0)
        memcpy(buf, key, n);
    memcpy(buf + n, ws_guid, sizeof(ws_guid) - 1);
    sl_ws_sha1(buf, n + sizeof(ws_guid) - 1, md);
    for (i = 0; i < 18; i += 3) {
        uint32_t v =
            (uint32_t)md[i] << 16 | (uint32_t)md[i + 1] << 8 | md[i + 2];
        out[o++] = b64[v >> 18];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = b64[(v >> 6) & 63];
        out[o++] = b64[v & 63];
    }
    /* 20 = 18 + 2: the last two bytes and one '=' */
    {
        uint32_t v = (uint32_t)md[18] << 16 | (uint32_t)md[19] << 8;
        out[o++] = b64[v >> 18];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = b64[(v >> 6) & 63];
        out[o++] = '=';
    }
    out[o] = '\0';
}

static int b64_value(char ch)
{
    const char *p = ch ? strchr(b64, ch) : NULL;

    return p ? (int)(p - b64) : -1;
}

/* Is P[0..N) base64 of exactly 16 bytes (22 digits and "==", the last
 * digit's unused bits zero: the one canonical form)? */
static bool key_valid(const char *p, size_t n)
{
    size_t i;
    int last;

    if (n != 24 || p[22] != '=' || p[23] != '=')
        return false;
    for (i = 0; i < 22; i++)
        if (b64_value(p[i]) < 0)
            return false;
    last = b64_value(p[21]);
    return (last & 15) == 0;
}

/* ---- headers ---- */

/* Does the comma-separated list P[0..N) hold TOKEN (any case)? */
static bool list_has(const char *p, size_t n, const char *token)
{
    const char *item;
    size_t len;

    while (sl_http_list_next(&p, &n, &item, &len))
        if (sl_http_name_is(item, len, token))
            return true;
    return false;
}

static const char *hdr_value(const sl_req_t *req, int i, size_t *n)
{
    const char *p = req->hbuf.data + req->hdrs[i].val_off;

    *n = req->hdrs[i].val_len;
    sl_http_trim(&p, n);
    return p;
}

static bool hdr_named(const sl_req_t *req, int i, const char *lower)
{
    return sl_http_name_is(req->hbuf.data + req->hdrs[i].name_off,
                           req->hdrs[i].name_len, lower);
}

/* Does any NAME header of REQ list TOKEN? */
static bool any_has(const sl_req_t *req, const char *name, const char *token)
{
    int i;

    for (i = 0; i < req->nhdrs; i++) {
        size_t n;
        const char *v;

        if (!hdr_named(req, i, name))
            continue;
        v = hdr_value(req, i, &n);
        if (list_has(v, n, token))
            return true;
    }
    return false;
}

/* The one NAME header of REQ: its value, or NULL when there is none
 * (*COUNT says how many there were). */
static const char *only(const sl_req_t *req, const char *name, size_t *n,
                        int *count)
{
    const char *v = NULL;
    int i;

    *count = 0;
    for (i = 0; i < req->nhdrs; i++) {
        if (!hdr_named(req, i, name))
            continue;
        if (++*count == 1)
            v = hdr_value(req, i, n);
    }
    return *count == 1 ? v : NULL;
}

bool sl_ws_is_upgrade(const sl_req_t *req)
{
    return any_has(req, "upgrade", "websocket") &&
           any_has(req, "connection", "upgrade");
}

bool sl_ws_close_code_valid(unsigned code)
{
    /* 1004 is reserved, 1005, 1006 and 1015 are never sent, 1012-1014
     * are IANA's (restart, try again later, bad gateway) */
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
           (code >= 3000 && code <= 4999);
}

int sl_ws_handshake(const sl_req_t *req, bool deflate, sl_ws_handshake_t *hs)
{
    const char *key, *ver;
    size_t klen = 0, vlen = 0;
    int count, i;

    memset(hs, 0, sizeof(*hs));
    if (req->method != HTTP_GET)
        return 400;
    if (req->major != 1 || req->minor < 1)
        return 400;
    /* no body: after the 101 the bytes that follow the head are frames, so
     * a body's end would be the client's word against the frames' */
    if (req->has_body)
        return 400;
    if (only(req, "host", &klen, &count) == NULL && count == 0)
        return 400;
    if (!sl_ws_is_upgrade(req))
        return 400;
    key = only(req, "sec-websocket-key", &klen, &count);
    if (key == NULL || !key_valid(key, klen))
        return 400;
    ver = only(req, "sec-websocket-version", &vlen, &count);
    if (count > 1)
        return 400;
    if (ver == NULL || vlen != 2 || memcmp(ver, "13", 2) != 0)
        return 426;
    sl_ws_accept_key(key, klen, hs->accept);
    if (!deflate)
        return 0;
    for (i = 0; i < req->nhdrs && !hs->deflate.on; i++) {
        size_t n;
        const char *v;

        if (!hdr_named(req, i, "sec-websocket-extensions"))
            continue;
        v = hdr_value(req, i, &n);
        sl_ws_deflate_offer(v, n, &hs->deflate);
    }
    sl_ws_deflate_response(&hs->deflate, hs->extensions,
                           sizeof(hs->extensions));
    return 0;
}

/* ---- permessage-deflate offers (RFC 7692 §5, §7.1) ---- */

/* The length of P[0..N) up to the first SEP outside a quoted string. */
static size_t span_to(const char *p, size_t n, char sep)
{
    bool quoted = false;
    size_t i;

    for (i = 0; i < n; i++) {
        if (quoted && p[i] == '\\' && i + 1 < n)
            i++;
        else if (p[i] == '"')
            quoted = !quoted;
        else if (!quoted && p[i] == sep)
            return i;
    }
    return n;
}

/* A window-bits value, token or quoted ("10" and "\"10\"" alike), as RFC
 * 7692 §7.1.2 writes it: 8..15, no leading zero. -1 when it is not one. */
static int window_bits(const char *p, size_t n)
{
    char d[2];
    size_t i, k = 0;

    if (n >= 2 && p[0] == '"' && p[n - 1] == '"') {
        for (i = 1; i + 1 < n; i++) {
            if (p[i] == '\\' && i + 2 < n)
                i++;
            if (k == sizeof(d))
                return -1;
            d[k++] = p[i];
        }
    } else {
        if (n > sizeof(d))
            return -1;
        memcpy(d, p, n);
        k = n;
    }
    if (k == 1 && d[0] >= '8' && d[0] <= '9')
        return d[0] - '0';
    if (k == 2 && d[0] == '1' && d[1] >= '0' && d[1] <= '5')
        return 10 + d[1] - '0';
    return -1;
}

enum { P_SNCT = 1, P_CNCT = 2, P_SMWB = 4, P_CMWB = 8 };

/* Read one parameter P[0..N) of a permessage-deflate offer into *D;
 * SEEN collects the names met. False: decline the offer. */
static bool offer_param(const char *p, size_t n, sl_ws_deflate_params_t *d,
                        unsigned *seen)
{
    size_t eq = span_to(p, n, '=');
    const char *name = p, *val = NULL;
    size_t nlen = eq, vlen = 0;
    unsigned bit;
    int bits = -1;

    sl_http_trim(&name, &nlen);
    if (eq < n) {
        val = p + eq + 1;
        vlen = n - eq - 1;
        sl_http_trim(&val, &vlen);
        bits = window_bits(val, vlen);
    }
    if (sl_http_name_is(name, nlen, "server_no_context_takeover"))
        bit = P_SNCT;
    else if (sl_http_name_is(name, nlen, "client_no_context_takeover"))
        bit = P_CNCT;
    else if (sl_http_name_is(name, nlen, "server_max_window_bits"))
        bit = P_SMWB;
    else if (sl_http_name_is(name, nlen, "client_max_window_bits"))
        bit = P_CMWB;
    else
        return false; /* unknown: §7.1 says decline */
    if (*seen & bit)
        return false; /* a name twice */
    *seen |= bit;
    switch (bit) {
    case P_SNCT:
    case P_CNCT:
        if (val != NULL)
            return false;
        if (bit == P_CNCT)
            d->client_no_context_takeover = true;
        return true;
    case P_SMWB:
        if (bits < 0)
            return false;
        d->server_max_window_bits = bits;
        return true;
    default:
        /* without a value: the client merely supports the parameter */
        if (val == NULL)
            return true;
        if (bits < 0)
            return false;
        d->client_max_window_bits = bits;
        return true;
    }
}

/* Accept the offer P[0..N) ("permessage-deflate; params") into *D? */
static bool offer_one(const char *p, size_t n, sl_ws_deflate_params_t *d)
{
    size_t len = span_to(p, n, ';');
    const char *name = p;
    size_t nlen = len;
    unsigned seen = 0;

    sl_http_trim(&name, &nlen);
    if (!sl_http_name_is(name, nlen, "permessage-deflate"))
        return false;
    memset(d, 0, sizeof(*d));
    d->server_max_window_bits = 15;
    d->client_max_window_bits = 15;
    while (len < n) {
        const char *q = p + len + 1;
        size_t rest = n - len - 1, plen = span_to(q, rest, ';');
        if (!offer_param(q, plen, d, &seen))
            return false;
        p = q;
        n = rest;
        len = plen;
    }
    /* Both sides drop their context after each message, whatever the
     * offer: then neither our deflater nor our inflater holds anything
     * between messages, and an idle WebSocket costs a few hundred bytes
     * instead of zlib's window (~40 kB for the inflater). RFC 7692 lets a
     * server say server_no_context_takeover unasked (§7.1.1.1), and ask
     * client_no_context_takeover of a client that did not offer it
     * (§7.1.1.2). The price: repeated small messages compress less. */
    d->server_no_context_takeover = true;
    d->client_no_context_takeover = true;
    d->on = true;
    return true;
}

bool sl_ws_deflate_offer(const char *p, size_t n, sl_ws_deflate_params_t *out)
{
    while (n > 0) {
        size_t len = span_to(p, n, ',');
        sl_ws_deflate_params_t d;

        if (offer_one(p, len, &d)) {
            *out = d;
            return true;
        }
        if (len == n)
            break;
        p += len + 1;
        n -= len + 1;
    }
    return false;
}

/* Append "; NAME=BITS" at OUT + *LEN. */
static void put_bits(char *out, size_t *len, const char *name, int bits)
{
    size_t n = strlen(name);

    memcpy(out + *len, name, n);
    *len += n;
    if (bits >= 10)
        out[(*len)++] = '1';
    out[(*len)++] = (char)('0' + bits % 10);
}

size_t sl_ws_deflate_response(const sl_ws_deflate_params_t *d, char *out,
                              size_t cap)
{
    static const char pmd[] = "permessage-deflate",
                      snct[] = "; server_no_context_takeover",
                      cnct[] = "; client_no_context_takeover";
    char tmp[SL_WS_EXTENSIONS_MAX];
    size_t len = 0;

    if (cap > 0)
        out[0] = '\0';
    if (d == NULL || !d->on)
        return 0;
    memcpy(tmp, pmd, sizeof(pmd) - 1);
    len = sizeof(pmd) - 1;
    if (d->server_no_context_takeover) {
        memcpy(tmp + len, snct, sizeof(snct) - 1);
        len += sizeof(snct) - 1;
    }
    if (d->client_no_context_takeover) {
        memcpy(tmp + len, cnct, sizeof(cnct) - 1);
        len += sizeof(cnct) - 1;
    }
    /* 15 is the default: said only when smaller, which an offer asked */
    if (d->server_max_window_bits >= 8 && d->server_max_window_bits < 15)
        put_bits(tmp, &len,
                 "; server_max_window_bits=", d->server_max_window_bits);
    if (d->client_max_window_bits >= 8 && d->client_max_window_bits < 15)
        put_bits(tmp, &len,
                 "; client_max_window_bits=", d->client_max_window_bits);
    if (len + 1 > cap)
        return 0;
    memcpy(out, tmp, len);
    out[len] = '\0';
    return len;
}
