/* tlsmod.h - TLS as a module the worker loads only when it serves TLS.
 *
 * OpenSSL is linked into sluice-tls.so (tls.c, the transport, and
 * tlsctx.c, the context), not into sluice-worker: mapping libcrypto and
 * libssl adds about 1.7 MiB to a process's memory, which a worker serving
 * plain HTTP (the common case, behind a proxy) has no use for. A worker
 * whose listeners speak TLS, or that checks the TLS settings for the
 * supervisor, loads the module from beside its own executable and reaches
 * it through this table alone; the module calls back the few worker
 * functions it needs (the log, the plain transport), which the worker
 * exports for it (Makefile.am).
 */
#ifndef SL_TLSMOD_H
#define SL_TLSMOD_H

#include <stddef.h>

#include <stdint.h>

#include "common/ctl.h"
#include "common/options.h"
#include "worker/loop/transport.h"

typedef struct ssl_ctx_st SSL_CTX;

/* The file, beside sluice-worker, and the table it exports. */
#define SL_TLS_MODULE_FILE   "sluice-tls.so"
#define SL_TLS_MODULE_SYMBOL "sl_tls_module"

typedef struct sl_tls_module {
    /* tlsctx.h's sl_tlsctx_new(), sl_tlsctx_check() */
    SSL_CTX *(*ctx_new)(const sl_options_t *o, char *err, size_t size);
    int (*check)(const sl_options_t *o);
    void (*ctx_free)(SSL_CTX *ctx);
    /* tls.h's sl_tls_start(): T becomes a TLS transport on FD */
    void (*start)(sl_transport_t *t, SSL_CTX *ctx, int fd);
    /* tlsctx.h's sl_tlsctx_ticket_keys(): the supervisor's ticket keys */
    void (*ticket_keys)(const uint8_t (*keys)[SL_CTL_TICKET_KEY], int n);
} sl_tls_module_t;

/* The module, loaded on the first call (later calls return the same).
 * NULL after one error line saying why it could not be loaded. */
const sl_tls_module_t *sl_tls_module_load(void);

#endif
