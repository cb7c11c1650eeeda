/* proxyproto.h - HAProxy's PROXY protocol header, versions 1 and 2.
 *
 * A pure parser: bytes in, a verdict out, no I/O and no allocation, so the
 * loop thread can run it over whatever part of the header has arrived and
 * the tests can feed it every split point. The connection code
 * (conn_proxy.c) decides what to do with the verdict.
 */
#ifndef SL_PROXYPROTO_H
#define SL_PROXYPROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* A version 1 line is 107 bytes at most, CRLF included (the spec's
 * figure); a version 2 header 16 bytes plus its length field. */
#define SL_PROXYPROTO_V1_MAX 107
#define SL_PROXYPROTO_V2_MAX (16 + 65535)

typedef struct {
    int version; /* 1 or 2 */
    /* The client's address and port as the proxy saw them, or ss_family
     * AF_UNSPEC when the header carries none (v1 UNKNOWN, v2 LOCAL, a v2
     * family other than TCP over IPv4 or IPv6): keep the real peer. */
    struct sockaddr_storage src;
    socklen_t srclen;
} sl_proxyproto_t;

/* Parse the header at the start of BUF[0..LEN). Returns the header's
 * length (> 0: the HTTP request starts after it) with *OUT filled, 0 when
 * BUF is a valid beginning and more bytes are needed, or -1 when it is no
 * valid header; then *WHY points to a static reason. */
long sl_proxyproto_parse(const uint8_t *buf, size_t len, sl_proxyproto_t *out,
                         const char **why);

#endif
