/* conn_proxy.c - a connection's PROXY protocol header (--proxy-protocol).
 *
 * With --proxy-protocol every connection must open with the header, from a
 * peer on --proxy-allow-from; until it has been read the connection is
 * READING with proxy_pending set, and conn_process() asks here before it
 * lets llhttp see a byte. The header may come in pieces: the parser
 * (proxyproto.c) says "more" until it is whole. The address it carries
 * becomes the connection's peer, so what comes after (forwarding headers,
 * REMOTE_ADDR, the ASGI client) sees the client as if it had connected
 * itself. Refusals are logged, a few a second at most: a scanner must not
 * flood the log.
 */
#include "config.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "worker/loop/conn.h"
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

bool sl_conn_proxy_allowed(sl_conn_t *c)
{
    if (sl_allow_match(&c->pump->opt->proxy_allow,
                       (const struct sockaddr *)&c->peer))
        return true;
    refuse_log(c, SL_LOG_WARNING,
               "peer not allowed to send a header (--proxy-allow-from)");
    return false;
}

void sl_conn_proxy_timeout(sl_conn_t *c)
{
    refuse_log(c, SL_LOG_WARNING, "no header within --header-timeout");
}

int sl_conn_proxy(sl_conn_t *c)
{
    sl_buf_t *b = &c->rbuf;
    sl_proxyproto_t pp;
    const char *why;
    long n;

    n = sl_proxyproto_parse((const uint8_t *)b->data + b->off,
                            sl_buf_pending(b), &pp, &why);
    if (n == 0 && !c->peer_eof)
        return 0;
    if (n == 0 && sl_buf_pending(b) == 0) {
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
    sl_buf_consume(b, (size_t)n);
    if (pp.src.ss_family != AF_UNSPEC) {
        memcpy(&c->peer, &pp.src, pp.srclen);
        c->peerlen = pp.srclen;
    }
    c->proxy_pending = false;
    return 1;
}
