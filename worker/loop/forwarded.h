/* forwarded.h - who the client is, behind a trusted proxy.
 *
 * X-Forwarded-For, -Proto, -Host, -Port and RFC 7239 Forwarded are
 * believed only from a peer on --forwarded-allow-ips; the loop thread weighs
 * them once per request, when its head is complete, and keeps the verdict in
 * the request (sl_req_t.client), where both executors and the access log
 * read it through sl_exch_client() and sl_exch_scheme().
 */
#ifndef SL_FORWARDED_H
#define SL_FORWARDED_H

#include <stdbool.h>
#include <stddef.h>

#include "common/allow.h"
#include "worker/loop/request.h"

/* The forwarding headers of one request, each NULL when absent (a field
 * sent more than once is given joined with commas, as RFC 9110 allows). */
typedef struct {
    const char *forwarded; /* RFC 7239 Forwarded */
    size_t forwarded_len;
    const char *xff; /* X-Forwarded-For */
    size_t xff_len;
    const char *xfp; /* X-Forwarded-Proto */
    size_t xfp_len;
    const char *xfh; /* X-Forwarded-Host */
    size_t xfh_len;
    const char *xfport; /* X-Forwarded-Port */
    size_t xfport_len;
} sl_forwarded_hdrs_t;

/* Hops of one chain weighed at most: a longer header is ignored. */
#define SL_FORWARDED_HOPS 32

/* The pure part: given the headers H of a request whose peer is trusted,
 * fill *OUT with the client they name (addr "" when they name none), its
 * scheme (HTTPS, the connection's own, when they name none), and the host and
 * port it asked for (host "" and server_port 0 when not forwarded; server_port
 * is X-Forwarded-Port, else the host's port, else 443 or 80 by the scheme when
 * a host came without one). Forwarded wins over X-Forwarded-* as a whole; a
 * chain gives the right-most hop not on TRUST (the left-most when all are, or
 * with '*'), and a per-hop list (proto, host, port) that hop's entry when it is
 * as long as the chain, else its right-most. A malformed header is ignored (a
 * malformed Forwarded lets X-Forwarded-* apply), and so is a host that is
 * no host[:port] or a port that is not 1..65535. Never fails. */
void sl_forwarded_eval(const sl_allow_t *trust, const sl_forwarded_hdrs_t *h,
                       bool https, sl_client_t *out);

/* At head complete: set request R's client from its headers, if PEER is
 * in TRUST (--forwarded-allow-ips) and they name anything (then it is
 * allocated: owned by the request); else leave it as the request's start
 * cleared it (the peer is the client). Out of memory, the headers are
 * ignored. */
void sl_forwarded_apply(sl_req_t *r, const sl_allow_t *trust,
                        const struct sockaddr *peer);

/* Free R's forwarded client, if it has one (R's client is NULL after). */
void sl_forwarded_clear(sl_req_t *r);

#endif
