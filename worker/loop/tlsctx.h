/* tlsctx.h - the TLS context of the listeners, built from the options.
 *
 * Built into sluice-tls.so with tls.c (tlsmod.h): only a worker that
 * serves TLS maps OpenSSL (libcrypto would more than double the
 * supervisor's memory, and add 1.7 MiB to a plain worker's). Every worker
 * builds its own context to serve with (an SSL_CTX cannot cross the exec that
 * makes a worker); the supervisor, at start and for --check-config, runs
 * sluice-worker with SLUICE_CHECK_TLS=1 to build one and throw it away, so
 * that what could not serve is refused before anything is bound.
 */
#ifndef SL_TLSCTX_H
#define SL_TLSCTX_H

#include <stddef.h>

#include "common/ctl.h"
#include "common/options.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct x509_st X509;

/* A server context from O's TLS settings (O->certfile and O->keyfile set):
 * the certificate chains and their keys, the client CAs, TLS 1.2 or 1.3
 * up, O's TLS 1.2 suites with the server's order, no renegotiation, no
 * compression, ALPN, buffers released while idle. With several pairs it
 * is the first pair's, and moves a connection to the context of the
 * certificate its server name (SNI) names, which it owns (tlsctx.c). The
 * caller owns it (SSL_CTX_free()). NULL when it cannot be built, with one
 * line saying why in ERR[SIZE] ("--keyfile k.pem does not match
 * --certfile c.pem"). */
SSL_CTX *sl_tlsctx_new(const sl_options_t *o, char *err, size_t size);

/* The PEM text of CERT, a certificate a context of sl_tlsctx_new()
 * serves: borrowed, it lives as long as CERT. NULL for any other. */
const char *sl_tlsctx_cert_pem(const X509 *cert);

/* The session ticket keys from the supervisor (SL_CTL_TICKET_KEYS):
 * KEYS[0] seals new tickets, KEYS[0..N) open them. Until the first call
 * no ticket is issued. Loop thread. */
void sl_tlsctx_ticket_keys(const uint8_t (*keys)[SL_CTL_TICKET_KEY], int n);

/* SLUICE_CHECK_TLS's check: 0 when O asks for no TLS or its context
 * builds (an expired certificate is a warning), -1 after one
 * "sluice: error: ..." line. */
int sl_tlsctx_check(const sl_options_t *o);

#endif
