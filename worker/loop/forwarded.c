/* forwarded.c - the client behind a proxy, from its forwarding headers.
 *
 * Each proxy on the way appends the address it received the request
 * from, so a chain reads left to right from the client towards us. Only
 * the entries written by proxies we trust can be believed, and the
 * right-most entry that is not a trusted proxy is the first one a trusted
 * proxy wrote about someone else: that is the client (what uvicorn does).
 * Anything to its left could have been made up by the client itself.
 * What a proxy says per hop (the scheme, the host and port the client
 * asked for) is read for that same hop.
 *
 * Everything is done on the loop thread, in place, with the hops of a
 * chain on the stack: no allocation per request. A header we cannot read
 * is ignored rather than half-believed.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "worker/loop/forwarded.h"
#include "worker/loop/http.h"

const sl_client_t sl_client_none;
const sl_client_t sl_client_tls = {.https = true};

/* A node as written: "[2001:db8::1]:4711" is the longest real one. */
#define NODE_MAX 72

/* Bytes of one forwarding field joined from its repeated lines. */
#define JOIN_MAX 4096

typedef struct {
    char node[NODE_MAX]; /* the for= value, unquoted; "" when none */
    size_t node_len;
    int proto;      /* 1 https, 0 http, -1 not given or another scheme */
    size_t host_at; /* Forwarded: where the host= value starts; 0 none */
} hop_t;

/* RFC 7239's obfuscated identifier: '_' then ALPHA / DIGIT / . _ - */
static bool obfuscated(const char *s, size_t n)
{
    size_t i;

    if (n < 2 || s[0] != '_')
        return false;
    for (i = 1; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

static bool is_ip(int family, const char *s, size_t n)
{
    char buf[INET6_ADDRSTRLEN];
    unsigned char tmp[16];

    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return inet_pton(family, buf, tmp) == 1;
}

/* A node's port: decimal, or obfuscated (then 0). */
static bool node_port(const char *s, size_t n, int *port)
{
    long v = 0;
    size_t i;

    if (obfuscated(s, n)) {
        *port = 0;
        return true;
    }
    if (n == 0 || n > 5)
        return false;
    for (i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v > 65535)
        return false;
    *port = (int)v;
    return true;
}

/* A port as a Host has it: 1..65535, in at most 5 digits. */
static bool port_num(const char *s, size_t n, int *port)
{
    int v = 0;
    size_t i;

    if (n == 0 || n > 5)
        return false;
    for (i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v < 1 || v > 65535)
        return false;
    *port = v;
    return true;
}

static bool is_hex(char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') ||
           (ch >= 'A' && ch <= 'F');
}

/* RFC 3986's reg-name (which an IPv4 address also is), not empty:
 * unreserved, sub-delims and %XX. */
static bool reg_name(const char *s, size_t n)
{
    size_t i;

    if (n == 0)
        return false;
    for (i = 0; i < n; i++) {
        char ch = s[i];
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
            (ch >= '0' && ch <= '9') ||
            (ch != '\0' && strchr("-._~!$&'()*+,;=", ch) != NULL))
            continue;
        if (ch != '%' || i + 2 >= n || !is_hex(s[i + 1]) || !is_hex(s[i + 2]))
            return false;
        i += 2;
    }
    return true;
}

/* Is S[0..N) a Host: host[:port], the host a reg-name, an IPv4 or an
 * [IPv6] address, N under SL_CLIENT_HOST_MAX? Then the name (without the
 * brackets) is S[*OFF..*OFF + *LEN) and *PORT its port, 0 when none. */
static bool host_split(const char *s, size_t n, size_t *off, size_t *len,
                       int *port)
{
    const char *rb, *colon;
    size_t end;

    *port = 0;
    if (n == 0 || n >= SL_CLIENT_HOST_MAX)
        return false;
    if (s[0] == '[') {
        rb = memchr(s, ']', n);
        if (rb == NULL || !is_ip(AF_INET6, s + 1, (size_t)(rb - s - 1)))
            return false;
        *off = 1;
        *len = (size_t)(rb - s - 1);
        end = (size_t)(rb - s) + 1;
    } else {
        colon = memchr(s, ':', n);
        end = colon != NULL ? (size_t)(colon - s) : n;
        if (!reg_name(s, end))
            return false;
        *off = 0;
        *len = end;
    }
    if (end == n)
        return true;
    return s[end] == ':' && port_num(s + end + 1, n - end - 1, port);
}

/* Split the node S[0..N) ("192.0.2.1", "192.0.2.1:80", "[2001:db8::1]",
 * "[2001:db8::1]:80", a bare IPv6 address, "unknown", "_hidden") into its
 * address *ADDR[0..*ALEN) and port. False when it is no node. */
static bool node_split(const char *s, size_t n, const char **addr, size_t *alen,
                       int *port)
{
    const char *colon, *rb;

    *port = 0;
    if (n > 0 && s[0] == '[') {
        rb = memchr(s, ']', n);
        if (rb == NULL || !is_ip(AF_INET6, s + 1, (size_t)(rb - s - 1)))
            return false;
        *addr = s + 1;
        *alen = (size_t)(rb - s - 1);
        if (rb + 1 == s + n)
            return true;
        return rb[1] == ':' &&
               node_port(rb + 2, (size_t)(s + n - rb - 2), port);
    }
    colon = memchr(s, ':', n);
    *addr = s;
    *alen = n;
    if (colon != NULL && memchr(colon + 1, ':', (size_t)(s + n - colon - 1)) ==
                             NULL) { /* one colon: host:port */
        *alen = (size_t)(colon - s);
        if (!node_port(colon + 1, (size_t)(s + n - colon - 1), port))
            return false;
    }
    return is_ip(AF_INET, *addr, *alen) || is_ip(AF_INET6, *addr, *alen) ||
           obfuscated(*addr, *alen) ||
           (*alen == 7 && strncasecmp(*addr, "unknown", 7) == 0);
}

/* 1 for https or wss, 0 for http or ws, -1 for anything else. */
static int scheme_of(const char *s, size_t n)
{
    if ((n == 5 && strncasecmp(s, "https", 5) == 0) ||
        (n == 3 && strncasecmp(s, "wss", 3) == 0))
        return 1;
    if ((n == 4 && strncasecmp(s, "http", 4) == 0) ||
        (n == 2 && strncasecmp(s, "ws", 2) == 0))
        return 0;
    return -1;
}

static bool is_ows(char ch)
{
    return ch == ' ' || ch == '\t';
}

/* Read a Forwarded value at P[*I..N), a token or a quoted-string, into
 * DST (CAP bytes), unquoted. False when malformed or too long. */
static bool fwd_value(const char *p, size_t n, size_t *i, char *dst, size_t cap,
                      size_t *len)
{
    size_t k = 0, j = *i;

    if (j < n && p[j] == '"') {
        for (j++; j < n && p[j] != '"'; j++) {
            if (p[j] == '\\' && ++j == n)
                return false;
            if (k == cap - 1)
                return false;
            dst[k++] = p[j];
        }
        if (j == n)
            return false;
        j++; /* the closing quote */
    } else {
        for (; j < n && p[j] != ';' && p[j] != ',' && !is_ows(p[j]); j++) {
            if (p[j] == '"' || k == cap - 1)
                return false;
            dst[k++] = p[j];
        }
    }
    dst[k] = '\0';
    *len = k;
    *i = j;
    return true;
}

/* One "name=value" pair at P[*I..N) into HOP. False when malformed. */
static bool fwd_pair(const char *p, size_t n, size_t *i, hop_t *hop)
{
    char val[SL_CLIENT_HOST_MAX];
    const char *name = p + *i, *eq, *a;
    size_t vlen, alen, at;
    int port;
    bool host;

    eq = memchr(name, '=', n - *i);
    if (eq == NULL || eq == name)
        return false;
    host = eq - name == 4 && strncasecmp(name, "host", 4) == 0;
    at = *i = (size_t)(eq - p) + 1;
    if (!fwd_value(p, n, i, val, host ? sizeof(val) : NODE_MAX, &vlen))
        return false;
    if (host) {
        if (hop->host_at > 0) /* once per element (RFC 7239, 4) */
            return false;
        hop->host_at = at; /* read again if this hop is the client's */
    } else if (eq - name == 3 && strncasecmp(name, "for", 3) == 0) {
        if (hop->node_len > 0 || !node_split(val, vlen, &a, &alen, &port))
            return false;
        memcpy(hop->node, val, vlen + 1);
        hop->node_len = vlen;
    } else if (eq - name == 5 && strncasecmp(name, "proto", 5) == 0) {
        hop->proto = scheme_of(val, vlen);
    } else {
        /* by= and extensions: allowed, not used; a name must be a
         * token */
        for (a = name; a < eq; a++)
            if (is_ows(*a) || *a == ';' || *a == ',' || *a == '"')
                return false;
    }
    return true;
}

/* Parse a Forwarded field P[0..N) into HOPS. The count, or -1 when it is
 * malformed or longer than SL_FORWARDED_HOPS. */
static int fwd_parse(const char *p, size_t n, hop_t *hops)
{
    size_t i = 0;
    int k = 0, pairs = 0;

    hops[0].node_len = 0;
    hops[0].node[0] = '\0';
    hops[0].proto = -1;
    hops[0].host_at = 0;
    for (;;) {
        while (i < n && is_ows(p[i]))
            i++;
        if (i < n && p[i] != ';' && p[i] != ',') {
            if (!fwd_pair(p, n, &i, &hops[k]))
                return -1;
            pairs++;
            while (i < n && is_ows(p[i]))
                i++;
        }
        if (i < n && p[i] == ';') {
            i++;
            continue;
        }
        if (i < n && p[i] != ',')
            return -1;
        if (pairs > 0) /* an empty element of the list is no hop */
            k++;
        if (i == n)
            return k;
        i++;
        if (k == SL_FORWARDED_HOPS)
            return -1;
        pairs = 0;
        hops[k].node_len = 0;
        hops[k].node[0] = '\0';
        hops[k].proto = -1;
        hops[k].host_at = 0;
    }
}

/* Is the node HOP names one of ours? A hop without for= never is. */
static bool hop_trusted(const sl_allow_t *trust, const hop_t *hop)
{
    const char *a;
    size_t alen;
    int port;

    if (hop->node_len == 0 ||
        !node_split(hop->node, hop->node_len, &a, &alen, &port))
        return false;
    return sl_allow_match_text(trust, a, alen);
}

/* The hop among HOPS[0..N) that is the client (see the top). */
static int pick(const sl_allow_t *trust, const hop_t *hops, int n)
{
    int i;

    if (trust->any)
        return 0;
    for (i = n - 1; i >= 0; i--)
        if (!hop_trusted(trust, &hops[i]))
            return i;
    return 0; /* all trusted: the client is a proxy of ours */
}

static void set_client(sl_client_t *out, const hop_t *hop)
{
    const char *a;
    size_t alen;
    int port;

    if (hop->node_len == 0 ||
        !node_split(hop->node, hop->node_len, &a, &alen, &port) ||
        alen >= sizeof(out->addr))
        return;
    memcpy(out->addr, a, alen);
    out->addr[alen] = '\0';
    out->port = port;
}

/* The comma-separated list P[0..N) into HOPS, as nodes (NODES) or
 * schemes. The count, or -1 when malformed or too long. */
static int list_parse(const char *p, size_t n, hop_t *hops, bool nodes)
{
    const char *item, *a;
    size_t len, alen;
    int k = 0, port;

    while (sl_http_list_next(&p, &n, &item, &len)) {
        if (len == 0)
            continue;
        if (k == SL_FORWARDED_HOPS || len >= NODE_MAX)
            return -1;
        if (nodes && !node_split(item, len, &a, &alen, &port))
            return -1;
        memcpy(hops[k].node, item, len);
        hops[k].node[len] = '\0';
        hops[k].node_len = len;
        hops[k].proto = nodes ? -1 : scheme_of(item, len);
        hops[k].host_at = 0;
        k++;
    }
    return k;
}

/* The entry of the per-hop list P[0..N) that speaks for hop I of a chain
 * of NHOPS (I -1 when there is none): the same hop when the list is as
 * long as the chain, else its right-most entry, the one the proxy next to
 * us wrote. False when the list is empty or longer than
 * SL_FORWARDED_HOPS. */
static bool list_entry(const char *p, size_t n, int i, int nhops,
                       const char **item, size_t *len)
{
    const char *q = p;
    size_t m = n;
    int count = 0, want;

    while (sl_http_list_next(&q, &m, item, len))
        if (*len > 0)
            count++;
    if (count == 0 || count > SL_FORWARDED_HOPS)
        return false;
    want = count == nhops && i >= 0 ? i : count - 1;
    count = 0;
    while (sl_http_list_next(&p, &n, item, len))
        if (*len > 0 && count++ == want)
            return true;
    return false;
}

/* OUT's host from S[0..N), unless it is no host[:port]; its port. */
static int set_host(sl_client_t *out, const char *s, size_t n)
{
    size_t off, len;
    int port;

    if (!host_split(s, n, &off, &len, &port))
        return 0;
    memcpy(out->host, s, n);
    out->host[n] = '\0';
    out->name_off = (uint16_t)off;
    out->name_len = (uint16_t)len;
    return port;
}

/* OUT's server port: PORT (X-Forwarded-Port) when given, else the
 * forwarded host's HPORT, else the scheme's own when a host came. */
static void set_server_port(sl_client_t *out, int port, int hport)
{
    if (port > 0)
        out->server_port = port;
    else if (out->host[0] != '\0')
        out->server_port = hport > 0 ? hport : out->https ? 443 : 80;
}

/* The client's hop of a Forwarded field P[0..N) named host=: read it
 * again, this time whole, into OUT. */
static void fwd_host(sl_client_t *out, const char *p, size_t n,
                     const hop_t *hop)
{
    char val[SL_CLIENT_HOST_MAX];
    size_t at = hop->host_at, len;

    if (at > 0 && fwd_value(p, n, &at, val, sizeof(val), &len))
        set_server_port(out, 0, set_host(out, val, len));
}

/* X-Forwarded-Host and -Port for hop I of the NHOPS of X-Forwarded-For. */
static void xf_host(sl_client_t *out, const sl_forwarded_hdrs_t *h, int i,
                    int nhops)
{
    const char *item;
    size_t len;
    int hport = 0, port = 0;

    if (h->xfh != NULL && list_entry(h->xfh, h->xfh_len, i, nhops, &item, &len))
        hport = set_host(out, item, len);
    if (h->xfport != NULL &&
        list_entry(h->xfport, h->xfport_len, i, nhops, &item, &len) &&
        !port_num(item, len, &port))
        port = 0;
    set_server_port(out, port, hport);
}

void sl_forwarded_eval(const sl_allow_t *trust, const sl_forwarded_hdrs_t *h,
                       bool https, sl_client_t *out)
{
    hop_t hops[SL_FORWARDED_HOPS], protos[SL_FORWARDED_HOPS];
    int n = -1, np = -1, i;

    memset(out, 0, sizeof(*out));
    out->https = https;
    if (h->forwarded != NULL)
        n = fwd_parse(h->forwarded, h->forwarded_len, hops);
    if (n > 0) {
        i = pick(trust, hops, n);
        set_client(out, &hops[i]);
        if (hops[i].proto >= 0)
            out->https = hops[i].proto == 1;
        fwd_host(out, h->forwarded, h->forwarded_len, &hops[i]);
        return;
    }
    n = h->xff != NULL ? list_parse(h->xff, h->xff_len, hops, true) : -1;
    np = h->xfp != NULL ? list_parse(h->xfp, h->xfp_len, protos, false) : -1;
    i = -1;
    if (n > 0) {
        i = pick(trust, hops, n);
        set_client(out, &hops[i]);
    }
    /* one scheme per hop: the client's hop's; otherwise the right-most,
     * the one the proxy next to us wrote */
    if (np > 0)
        out->https = protos[np == n && i >= 0 ? i : np - 1].proto == 1;
    xf_host(out, h, i, n);
}

/* ------------------------------------------------------------------ */
/* the connection's side                                              */

/* The value of the header NAME of R, in *V[0..*N): its one line as it
 * is, or its lines joined with ", " into BUF (JOIN_MAX bytes). False
 * when absent, or too long to join. */
static bool field(const sl_req_t *r, const char *name, char *buf,
                  const char **v, size_t *n)
{
    const char *hb = r->hbuf.data;
    size_t len = 0;
    int i, count = 0;

    *v = NULL;
    *n = 0;
    for (i = 0; i < r->nhdrs; i++) {
        const sl_hdr_t *hd = &r->hdrs[i];
        if (!sl_http_name_is(hb + hd->name_off, hd->name_len, name))
            continue;
        if (count++ == 0) {
            *v = hb + hd->val_off;
            *n = hd->val_len;
            continue;
        }
        if (count == 2) {
            if (*n > JOIN_MAX)
                goto out_too_long;
            memcpy(buf, *v, *n);
            len = *n;
        }
        if (len + 2 + hd->val_len > JOIN_MAX)
            goto out_too_long;
        memcpy(buf + len, ", ", 2);
        memcpy(buf + len + 2, hb + hd->val_off, hd->val_len);
        len += 2 + hd->val_len;
        *v = buf;
        *n = len;
    }
    return count > 0;

out_too_long:
    *v = NULL;
    *n = 0;
    return false;
}

/* Could R carry a forwarding header? One cheap pass, by the length and the
 * first letter of each name, so that a request with none (most, and every
 * one that does not come through a proxy) costs no more than that. */
static bool may_forward(const sl_req_t *r)
{
    const char *hb = r->hbuf.data;

    for (int i = 0; i < r->nhdrs; i++) {
        uint32_t n = r->hdrs[i].name_len;
        char first = (char)(hb[r->hdrs[i].name_off] | 0x20);
        if ((n == 9 && first == 'f') || (n >= 15 && n <= 17 && first == 'x'))
            return true; /* forwarded, x-forwarded-{for,host,port,proto} */
    }
    return false;
}

/* Weigh H for R; keep the result only when it names anything. */
static void set_req_client(sl_req_t *r, const sl_allow_t *trust,
                           const sl_forwarded_hdrs_t *h)
{
    const sl_client_t *none = r->tls ? &sl_client_tls : &sl_client_none;
    sl_client_t cl = {0};
    sl_client_t *own;

    sl_forwarded_eval(trust, h, r->tls, &cl);
    if (memcmp(&cl, none, sizeof(cl)) == 0)
        return;
    own = malloc(sizeof(*own));
    if (own == NULL)
        return;
    *own = cl;
    r->client = own;
}

void sl_forwarded_apply(sl_req_t *r, const sl_allow_t *trust,
                        const struct sockaddr *peer)
{
    sl_forwarded_hdrs_t h = {0};
    char b1[JOIN_MAX], b2[JOIN_MAX], b3[JOIN_MAX], b4[JOIN_MAX], b5[JOIN_MAX];
    bool any;

    /* r->client was cleared when the request began */
    sl_forwarded_clear(r);
    if (!may_forward(r) || !sl_allow_match(trust, peer))
        return;
    any = field(r, "forwarded", b1, &h.forwarded, &h.forwarded_len);
    any |= field(r, "x-forwarded-for", b2, &h.xff, &h.xff_len);
    any |= field(r, "x-forwarded-proto", b3, &h.xfp, &h.xfp_len);
    any |= field(r, "x-forwarded-host", b4, &h.xfh, &h.xfh_len);
    any |= field(r, "x-forwarded-port", b5, &h.xfport, &h.xfport_len);
    if (any)
        set_req_client(r, trust, &h);
}

void sl_forwarded_clear(sl_req_t *r)
{
    free(r->client);
    r->client = NULL;
}
