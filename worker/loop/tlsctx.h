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

#include "common/options.h"

typedef struct ssl_ctx_st SSL_CTX;

/* A server context from O's TLS settings (O->certfile and O->keyfile set):
 * the certificate chain and its key, the client CAs, TLS 1.2 or 1.3 up,
 * O's TLS 1.2 suites with the server's order, no renegotiation, no
 * compression, ALPN, buffers released while idle. The caller owns it
 * (SSL_CTX_free()). NULL when it cannot be built, with one line saying why
 * in ERR[SIZE] ("--keyfile k.pem does not match --certfile c.pem"). */
SSL_CTX *sl_tlsctx_new(const sl_options_t *o, char *err, size_t size);

/* SLUICE_CHECK_TLS's check: 0 when O asks for no TLS or its context
 * builds (an expired certificate is a warning), -1 after one
 * "sluice: error: ..." line. */
int sl_tlsctx_check(const sl_options_t *o);

#endif
