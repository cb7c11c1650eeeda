/* proxyproto.c - the PROXY protocol header parser (proxyproto.h).
 *
 * The first byte tells the versions apart ('P' for the text line, CR for
 * the binary signature), and every check is made on as many bytes as have
 * arrived, so a header cut anywhere gives "need more" exactly until it is
 * whole and a bad one is refused as soon as the byte that makes it bad is
 * here. Version 1 is strict about its grammar (single spaces, canonical
 * addresses, decimal ports without leading zeros) because anything lax
 * would accept headers no real proxy sends. Version 2 TLVs are skipped.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>

#include "worker/loop/proxyproto.h"

static const uint8_t v2_sig[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                   0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};
static const char v1_sig[] = "PROXY ";

static long fail(const char **why, const char *reason)
{
    *why = reason;
    return -1;
}

/* A v1 port: 1 to 5 digits, no leading zero, at most 65535. */
static int v1_port(const char *p, size_t n)
{
    long v = 0;
    size_t i;

    if (n == 0 || n > 5 || (p[0] == '0' && n > 1))
        return -1;
    for (i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v <= 65535 ? (int)v : -1;
}

/* The next space-separated field of the line *P..END: at most one space
 * between fields, none at either end. */
static bool v1_field(const char **p, const char *end, const char **f, size_t *n)
{
    const char *s = *p, *e = memchr(s, ' ', (size_t)(end - s));

    if (e == NULL)
        e = end;
    if (e == s)
        return false;
    *f = s;
    *n = (size_t)(e - s);
    *p = e < end ? e + 1 : end;
    return e == end || e + 1 < end; /* no trailing space */
}

/* Fill *OUT from the v1 addresses of FAMILY: the text in SRC and PORT. */
static int v1_addr(sl_proxyproto_t *out, int family, const char *src,
                   size_t srcn, const char *dst, size_t dstn, int port)
{
    char text[INET6_ADDRSTRLEN];
    uint8_t tmp[16];
    struct sockaddr_in *in = (struct sockaddr_in *)&out->src;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out->src;

    if (srcn >= sizeof(text) || dstn >= sizeof(text))
        return -1;
    memcpy(text, dst, dstn);
    text[dstn] = '\0';
    if (inet_pton(family, text, tmp) != 1)
        return -1;
    memcpy(text, src, srcn);
    text[srcn] = '\0';
    if (family == AF_INET) {
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        out->srclen = sizeof(*in);
        return inet_pton(AF_INET, text, &in->sin_addr) == 1 ? 0 : -1;
    }
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons((uint16_t)port);
    out->srclen = sizeof(*in6);
    return inet_pton(AF_INET6, text, &in6->sin6_addr) == 1 ? 0 : -1;
}

static long parse_v1(const uint8_t *buf, size_t len, sl_proxyproto_t *out,
                     const char **why)
{
    const char *s = (const char *)buf, *lf, *p, *end;
    const char *f[5];
    size_t fn[5],
        avail = len < SL_PROXYPROTO_V1_MAX ? len : SL_PROXYPROTO_V1_MAX;
    int i, family, sport;

    if (memcmp(buf, v1_sig, len < 6 ? len : 6) != 0)
        return fail(why, "not a PROXY protocol header");
    lf = memchr(s, '\n', avail);
    if (lf == NULL) {
        const char *cr = memchr(s, '\r', avail);
        if (cr != NULL && cr + 1 < s + avail)
            return fail(why, "v1: CR not followed by LF");
        return len < SL_PROXYPROTO_V1_MAX ? 0 : fail(why, "v1: line too long");
    }
    if (lf == s || lf[-1] != '\r' || lf - s < 7)
        return fail(why, "v1: line does not end in CRLF");
    end = lf - 1;
    p = s + 6;
    if (memchr(p, '\r', (size_t)(end - p)) != NULL)
        return fail(why, "v1: stray CR");
    if (!v1_field(&p, end, &f[0], &fn[0]))
        return fail(why, "v1: bad protocol field");
    memset(out, 0, sizeof(*out));
    out->version = 1;
    out->src.ss_family = AF_UNSPEC;
    if (fn[0] == 7 && memcmp(f[0], "UNKNOWN", 7) == 0)
        return lf - s + 1; /* whatever follows on the line is ignored */
    if (fn[0] == 4 && memcmp(f[0], "TCP4", 4) == 0)
        family = AF_INET;
    else if (fn[0] == 4 && memcmp(f[0], "TCP6", 4) == 0)
        family = AF_INET6;
    else
        return fail(why, "v1: protocol is not TCP4, TCP6 or UNKNOWN");
    for (i = 1; i < 5; i++)
        if (!v1_field(&p, end, &f[i], &fn[i]))
            return fail(why, "v1: missing or badly separated field");
    if (p != end)
        return fail(why, "v1: too many fields");
    sport = v1_port(f[3], fn[3]);
    if (sport < 0 || v1_port(f[4], fn[4]) < 0)
        return fail(why, "v1: bad port");
    if (v1_addr(out, family, f[1], fn[1], f[2], fn[2], sport) < 0)
        return fail(why, "v1: bad address");
    return lf - s + 1;
}

static long parse_v2(const uint8_t *buf, size_t len, sl_proxyproto_t *out,
                     const char **why)
{
    struct sockaddr_in *in = (struct sockaddr_in *)&out->src;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out->src;
    size_t total, body;
    int cmd;

    if (memcmp(buf, v2_sig, len < 12 ? len : 12) != 0)
        return fail(why, "not a PROXY protocol header");
    if (len > 12 && (buf[12] & 0xf0) != 0x20)
        return fail(why, "v2: version is not 2");
    if (len > 12 && (buf[12] & 0x0f) > 1)
        return fail(why, "v2: command is not LOCAL or PROXY");
    if (len < 16)
        return 0;
    body = (size_t)buf[14] << 8 | buf[15];
    total = 16 + body;
    cmd = buf[12] & 0x0f;
    /* the address block's size is known from the family byte: refuse a
     * length too short for it before waiting for the rest */
    if (cmd == 1 &&
        ((buf[13] == 0x11 && body < 12) || (buf[13] == 0x21 && body < 36)))
        return fail(why, "v2: length too short for the addresses");
    if (len < total)
        return 0;
    memset(out, 0, sizeof(*out));
    out->version = 2;
    out->src.ss_family = AF_UNSPEC;
    if (cmd == 0)
        return (long)total; /* LOCAL: the proxy's own connection */
    if (buf[13] == 0x11) {
        in->sin_family = AF_INET;
        memcpy(&in->sin_addr, buf + 16, 4);
        memcpy(&in->sin_port, buf + 24, 2);
        out->srclen = sizeof(*in);
    } else if (buf[13] == 0x21) {
        in6->sin6_family = AF_INET6;
        memcpy(&in6->sin6_addr, buf + 16, 16);
        memcpy(&in6->sin6_port, buf + 48, 2);
        out->srclen = sizeof(*in6);
    }
    /* UNSPEC, UDP or unix addresses: kept as the real peer, as the spec
     * asks of a receiver that does not use them */
    return (long)total;
}

long sl_proxyproto_parse(const uint8_t *buf, size_t len, sl_proxyproto_t *out,
                         const char **why)
{
    *why = NULL;
    if (len == 0)
        return 0;
    if (buf[0] == 'P')
        return parse_v1(buf, len, out, why);
    if (buf[0] == 0x0d)
        return parse_v2(buf, len, out, why);
    return fail(why, "no PROXY protocol header");
}
