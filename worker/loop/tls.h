/* tls.h - the TLS transport: OpenSSL under the callers of the plain one.
 *
 * A second sl_transport_ops_t (transport.h), chosen at accept for a
 * listener that speaks TLS. Loop thread only, never blocking; the
 * handshake runs inside the first reads, so it counts against the
 * connection's header timeout like the request head it precedes.
 */
#ifndef SL_TLS_H
#define SL_TLS_H

#include "worker/loop/transport.h"

typedef struct ssl_ctx_st SSL_CTX;

/* The TLS table: SSL_read, SSL_write (gathered, or from a bounded copy of
 * a file: no kernel TLS), SSL_shutdown's close_notify then shutdown(2),
 * SSL_free and close(2), SSL_pending. Its state is the connection's SSL
 * (owned). */
extern const sl_transport_ops_t sl_transport_tls;

/* Start T on the accepted, non-blocking socket FD as a server connection
 * of CTX (borrowed: it outlives every connection); T owns FD from here.
 * Never fails: when OpenSSL cannot make the connection's SSL (out of
 * memory, logged) every operation fails with ENOMEM.
 *
 * The first read looks at the first byte before OpenSSL sees any: a TLS
 * handshake record goes on to the handshake; a letter (plain HTTP sent to
 * a TLS port) turns T into the plain transport and fails with
 * SL_TRANSPORT_EPLAIN, so the caller can answer in plain HTTP. */
void sl_tls_start(sl_transport_t *t, SSL_CTX *ctx, int fd);

#endif
