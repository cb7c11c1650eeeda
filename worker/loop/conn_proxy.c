/* conn_proxy.c - the PROXY session: a connection's PROXY protocol header
 * (--proxy-protocol).
 *
 * With --proxy-protocol every connection must open with the header, from a
 * peer on --proxy-allow-from; it is the connection's first session, which
 * reads until the header is whole (proxy_pending set meanwhile), then hands
 * the connection to HTTP/1.1 (h1.c). It peeks, and takes off the socket the
 * header's bytes alone, so that what follows is the transport's from its
 * first byte: under TLS the handshake comes after the header, and OpenSSL
 * must read it from the socket. The header may come in pieces: the parser
 * (proxyproto.c) says "more" until it is whole, and the pieces so far wait
 * in the read buffer. The address it carries becomes the connection's peer,
 * so what comes after (forwarding headers, REMOTE_ADDR, the ASGI client)
 * sees the client as if it had connected itself. Refusals are logged, a few a
 * second at most: a scanner must not flood the log.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/metrics.h"
#include "worker/loop/conn.h"
#include "worker/loop/conn_proxy.h"
#include "worker/loop/h1.h"
#include "worker/loop/proxyproto.h"
#include "worker/loop/pump.h"

/* Refusals logged per second, at most. */
#define LOG_BURST 20

/* Log that C is refused for WHY (rate-limited), at LEVEL. */
static void refuse_log(sl_conn_t *c, int level, const char *why)
{
    static ev_tstamp window;
    static unsigned logged, dropped;
    ev_tstamp now = ev_now(c->pump->loop);
    char addr[INET6_ADDRSTRLEN];
    int port;

    if (now - window >= 1.0) {
        if (dropped > 0)
            sl_warn("PROXY protocol: %u more refusals not logged", dropped);
        window = now;
        logged = dropped = 0;
    }
    if (logged == LOG_BURST) {
        dropped++;
        return;
    }
    logged++;
    sl_conn_peer(c, addr, sizeof(addr), &port);
    if (c->peer.ss_family == AF_UNIX)
        snprintf(addr, sizeof(addr), "a unix: socket peer");
    sl_log(level,
           "PROXY protocol: closing the connection from %s port %d:"
           " %s",
           addr, port, why);
}

static bool proxy_allowed(sl_conn_t *c)
{
    if (sl_allow_match(&c->pump->opt->proxy_allow,
                       (const struct sockaddr *)&c->peer))
        return true;
    refuse_log(c, SL_LOG_WARNING,
               "peer not allowed to send a header (--proxy-allow-from)");
    return false;
}

static void proxy_timeout(sl_conn_t *c)
{
    refuse_log(c, SL_LOG_WARNING, "no header within --header-timeout");
}

/* Take the first N of the PEEKED bytes behind C's read buffer off the
 * socket, into it. 0, or -1 (C's caller closes). */
static int proxy_take(sl_conn_t *c, size_t n)
{
    sl_buf_t *b = &c->rbuf;
    ssize_t got = n > 0 ? sl_transport_take(&c->tp, b->data + b->len, n) : 0;

    if (got != (ssize_t)n)
        return -1;
    b->len += n;
    sl_metrics_add(&sl_metrics_self->bytes_in, (uint64_t)n);
    return 0;
}

/* Parse C's PROXY header: the bytes of it taken so far (its read buffer),
 * then PEEKED more the socket holds behind them. Only the header's own
 * bytes are taken off the socket, so what follows it is the transport's
 * from its first byte (a TLS handshake's too). 1 when it is read (the
 * peer is now its source), 0 when more bytes are needed, -1 when C was
 * closed (a bad or missing header, logged). */
static int proxy_parse(sl_conn_t *c, size_t peeked)
{
    sl_buf_t *b = &c->rbuf;
    size_t have = sl_buf_pending(b);
    sl_proxyproto_t pp;
    const char *why;
    long n;

    n = sl_proxyproto_parse((const uint8_t *)b->data + b->off, have + peeked,
                            &pp, &why);
    if (n == 0 && !c->peer_eof) {
        /* all of it is the header's: take it, or it would stay readable */
        if (proxy_take(c, peeked) < 0) {
            sl_conn_close(c);
            return -1;
        }
        return 0;
    }
    if (n == 0 && have == 0) {
        /* connected and left (a port probe): not worth a warning */
        refuse_log(c, SL_LOG_DEBUG, "closed before sending a header");
        sl_conn_close(c);
        return -1;
    }
    if (n <= 0) {
        refuse_log(c, SL_LOG_WARNING,
                   n == 0 ? "closed in the middle of the header" : why);
        sl_conn_close(c);
        return -1;
    }
    if (proxy_take(c, (size_t)n - have) < 0) {
        sl_conn_close(c);
        return -1;
    }
    sl_buf_consume(b, (size_t)n);
    if (pp.src.ss_family != AF_UNSPEC) {
        memcpy(&c->peer, &pp.src, pp.srclen);
        c->peerlen = (uint8_t)pp.srclen;
    }
    c->proxy_pending = false;
    return 1;
}

/* ------------------------------------------------------------------ */
/* the session's operations                                           */

void sl_conn_proxy_start(sl_conn_t *c)
{
    /* what comes after the header is HTTP/1.1's: set up for it now */
    sl_h1_start(c);
    c->sess = &sl_proxy_session;
    c->proxy_pending = true;
    if (!proxy_allowed(c))
        sl_conn_close(c);
}

/* Look at what came, once, without taking it: up to the rest of a
 * header's longest, into C's read buffer behind the bytes of it taken so
 * far, their count in *PEEKED. 1 if bytes came, 0 if none yet, -1 on EOF
 * or an error (peer_eof says which). */
static int proxy_peek(sl_conn_t *c, size_t *peeked)
{
    sl_buf_t *b = &c->rbuf;
    size_t room = SL_PROXYPROTO_V2_MAX - sl_buf_pending(b);
    ssize_t n;

    *peeked = 0;
    if (sl_buf_pending(b) >= SL_PROXYPROTO_V2_MAX)
        return 0; /* more than any header: the parser says so */
    if (room > SL_CONN_READ_CHUNK)
        room = SL_CONN_READ_CHUNK;
    if (sl_buf_reserve(b, room) < 0)
        return -1;
    n = sl_transport_peek(&c->tp, b->data + b->len, room);
    if (n > 0) {
        *peeked = (size_t)n;
        return 1;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    c->peer_eof = (n == 0);
    return -1;
}

/* Go on with C's header: PEEKED bytes more of it may be there; once it is
 * whole, HTTP/1.1 reads what follows at once. */
static void proxy_process(sl_conn_t *c, size_t peeked)
{
    int rc = proxy_parse(c, peeked);

    if (rc < 0)
        return;
    if (rc == 0) {
        sl_conn_watch(c, EV_READ);
        return;
    }
    c->sess = &sl_h1_session;
    c->sess->io(c, EV_READ);
}

static void proxy_io(sl_conn_t *c, int ready)
{
    size_t peeked = 0;

    if ((ready & EV_READ) && proxy_peek(c, &peeked) < 0 && !c->peer_eof) {
        sl_conn_close(c);
        return;
    }
    proxy_process(c, peeked);
}

static void proxy_complete(sl_conn_t *c)
{
    (void)c; /* no executor has it yet */
}

static void proxy_sweep(sl_conn_t *c, ev_tstamp now)
{
    if (c->deadline == 0 || now < c->deadline)
        return;
    c->deadline = 0;
    proxy_timeout(c);
    sl_conn_close(c);
}

/* A header (and a request) may sit in the kernel, read but for us: go on
 * with it; otherwise close once GRACE has passed. */
static bool proxy_drain(sl_conn_t *c, ev_tstamp now, ev_tstamp grace)
{
    size_t peeked;
    int rc = proxy_peek(c, &peeked);

    if (rc > 0 || (rc < 0 && c->peer_eof)) {
        proxy_process(c, peeked);
        return c->state == SL_CONN_FREE;
    }
    if (rc < 0 || now - c->idle_since >= grace) {
        sl_conn_close(c);
        return true;
    }
    return false;
}

static void proxy_going_away(sl_conn_t *c, unsigned code)
{
    (void)c;
    (void)code;
}

static void proxy_nothing(sl_conn_t *c)
{
    (void)c;
}

const sl_session_ops_t sl_proxy_session = {
    .name = "PROXY",
    .io = proxy_io,
    .complete = proxy_complete,
    .sweep = proxy_sweep,
    .drain = proxy_drain,
    .going_away = proxy_going_away,
    .abort = sl_conn_close,
    .close = proxy_nothing,
};
