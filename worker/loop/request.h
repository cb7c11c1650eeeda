/* request.h - a parsed HTTP request head, as offsets into its own buffer.
 *
 * Its own header so that what only reads a request (response framing, the
 * executors' environ and scope) need not know connections.
 */
#ifndef SL_REQUEST_H
#define SL_REQUEST_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/buf.h"

/* Room for a client address given by a forwarding header, NUL included:
 * an IPv6 address, or an RFC 7239 obfuscated name of up to 63 bytes. */
#define SL_CLIENT_ADDR_MAX 64

/* Room for a forwarded host[:port], NUL included (255 bytes, RFC 1035's
 * longest name, and then some for a port). */
#define SL_CLIENT_HOST_MAX 256

/* The client as the forwarding headers of a trusted peer name it
 * (forwarded.h). */
typedef struct {
    char addr[SL_CLIENT_ADDR_MAX]; /* "" when none: the peer is the client */
    int port;                      /* 0 when unknown */
    bool https;                    /* the client spoke https (or wss) */
    /* the Host the client asked the proxy for, as host[:port]; "" when
     * none was forwarded (then the request's own Host stands) */
    char host[SL_CLIENT_HOST_MAX];
    uint16_t name_off, name_len; /* the name in host: no port, no [] */
    int server_port; /* the port the client asked for; 0 when not forwarded */
} sl_client_t;

/* All empty: the peer is the client (defined in forwarded.c). */
extern const sl_client_t sl_client_none;

/* The same, over TLS: https. */
extern const sl_client_t sl_client_tls;

typedef struct {
    uint32_t name_off, name_len; /* into sl_req_t.hbuf */
    uint32_t val_off, val_len;
} sl_hdr_t;

/* sl_req_t.method of a method token llhttp has no name for: the name is
 * the token itself (method_off, method_len). */
#define SL_METHOD_OTHER (-1)

/* The request a connection is serving. Written by the loop thread while it
 * parses; read-only to the executor from submit until END. */
typedef struct {
    sl_buf_t hbuf;       /* owned: method, URL and header bytes, stable while
                            served; no memory between requests */
    uint32_t method_off; /* into hbuf: the method token as the client sent
                            it (any RFC 9110 token) */
    uint32_t method_len; /* 0: none (a request made up in a test) */
    uint32_t url_off;    /* into hbuf; until the request line is whole,
                            the method's length once seen (h1_parse.c) */
    uint32_t url_len;    /* until the line is whole, how much of it was
                            checked */
    sl_hdr_t *hdrs;      /* owned, capacity limit_request_fields + 1; NULL
                            until the request's first header, freed with it;
                            when packed, inside hbuf's block */
    int nhdrs;
    int method; /* llhttp_method_t, or SL_METHOD_OTHER */
    uint8_t major, minor;
    bool keep_alive; /* as the client asked */
    bool has_body;
    bool expect_continue;
    bool head; /* HEAD: no response body */
    bool tls;  /* came over TLS (the connection's): the scheme is https
                  unless a trusted proxy says otherwise */
    /* loop thread: answered from a --static map (static.c), the metrics'
     * handler label; here, not in the exchange, as it fills a hole (an
     * idle connection's 1 KiB, test_conn_bufs.c) */
    bool from_static;
    uint64_t content_length; /* valid when has_body and !chunked */
    bool chunked;
    bool websocket; /* a valid WebSocket handshake (conn_ws.h) */
    bool packed;    /* hbuf and hdrs share one block of their exact size
                       (sl_conn_pack_head()); read-only until freed */
    /* loop thread, while chunked trailers are parsed: the forbidden
     * names (h1_parse.c) the current trailer name may still be, and how
     * much of it has been seen */
    bool trailer_prefix_hit;
    bool chunk_line; /* loop thread: a chunk's size line is next, read by
                        the loop (h1_parse.c), not llhttp */
    bool chunk_last; /* loop thread: the chunk being read is the last */
    uint16_t trailer_pos;
    uint32_t trailer_mask;
    ev_tstamp start; /* when the headers were complete */
    /* owned: what a trusted proxy's forwarding headers said, set at head
     * complete (sl_forwarded_apply()) and freed with the request; NULL
     * when none applies (most requests: so it is not carried inline).
     * Read it through sl_req_client(). */
    sl_client_t *client;
} sl_req_t;

/* May R's response be chunked (HTTP/1.1; and HTTP/2, whose session reads
 * the chunks back into frames, h2_stream.c)? Not for HTTP/1.0. */
static inline bool sl_req_chunks(const sl_req_t *r)
{
    return r->major > 1 || r->minor >= 1;
}

/* R's client as forwarding headers name it: never NULL. */
static inline const sl_client_t *sl_req_client(const sl_req_t *r)
{
    if (r->client != NULL)
        return r->client;
    return r->tls ? &sl_client_tls : &sl_client_none;
}

#endif
