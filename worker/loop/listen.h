/* listen.h - a worker's listening sockets and accepting (listen.c). Loop
 * thread only. */
#ifndef SL_WORKER_LISTEN_H
#define SL_WORKER_LISTEN_H

#include <stdbool.h>

typedef struct sl_pump sl_pump_t;
struct ssl_ctx_st; /* OpenSSL's SSL_CTX */
struct sl_tls_module;

/* Take FDS[0..NFDS) as P's listeners (at most SL_MAX_LISTENERS; the
 * caller checked). */
void sl_listen_init(sl_pump_t *p, const int *fds, int nfds);

/* The listeners of P whose fds are among TLS_FDS[0..N) speak TLS through
 * module M, with CTX, which P owns from here (freed with it, and here when
 * no listener takes it). The count of them. */
int sl_listen_tls(sl_pump_t *p, const struct sl_tls_module *m,
                  struct ssl_ctx_st *ctx, const int *tls_fds, int n);

/* Start (ON) or stop watching the listeners. */
void sl_listen_start(sl_pump_t *p, bool on);

/* Stop accepting and close this worker's listeners (drain). */
void sl_listen_stop(sl_pump_t *p);

/* Accept every connection waiting in the listen queues (drain: whoever
 * closes a listener last would otherwise reset them). */
void sl_listen_accept_pending(sl_pump_t *p);

/* A pool entry may be had again (the pool's changed()): a connection was
 * given back (RELEASED: a descriptor too) or became idle. Listen again
 * unless the drain, a pause or a full pool says not to. */
void sl_listen_room(sl_pump_t *p, bool released);

#endif
