/* h2.h - the HTTP/2 session: many exchanges on one connection.
 *
 * libnghttp2 frames and compresses; this session drives it from the loop
 * thread (docs/architecture.md, "HTTP/2"). Each stream is an exchange of
 * its own (exchange.h) that executors serve as they serve HTTP/1.1's:
 * the same request record, the same calls, the response written as
 * HTTP/1.1 bytes that the session turns into frames. A connection comes
 * to it from HTTP/1.1's session, before any request: when ALPN settled
 * on "h2", or when the first bytes on a plain listener are the client's
 * preface and --http2-cleartext prior-knowledge allows it.
 */
#ifndef SL_H2_H
#define SL_H2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sl_conn sl_conn_t;
typedef struct sl_exch sl_exch_t;
typedef struct sl_pump sl_pump_t;
typedef struct sl_session_ops sl_session_ops_t;

extern const sl_session_ops_t sl_h2_session;

/* The client's connection preface (RFC 9113 §3.4), its first 24 bytes. */
#define SL_H2_PREFACE     "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define SL_H2_PREFACE_LEN 24

/* Do the first bytes of a connection, P[0..N), begin the preface? 1 when
 * they hold it whole, 0 when they are a part of it so far, -1 when not. */
int sl_h2_preface(const char *p, size_t n);

/* Speak HTTP/2 on C from here: the bytes C's read buffer holds are the
 * first the client sent. Loop thread. */
void sl_h2_start(sl_conn_t *c);

/* The pump's streams: set up room for as many as the options allow
 * (none when no listener may speak HTTP/2). 0, or -1 when out of memory.
 * Freed by sl_h2_streams_destroy(). */
int sl_h2_streams_init(sl_pump_t *p);
void sl_h2_streams_destroy(sl_pump_t *p);

/* The executor queued something on X, a stream (its ticket came back,
 * or an on-loop executor completed it): take it and frame it. */
void sl_h2_complete(sl_exch_t *x);

/* When the oldest request of C's streams still with the executor began;
 * 0 when none is. */
double sl_h2_oldest(const sl_conn_t *c);

/* Frame and write what the completions of this pass gave the sessions
 * (once a pass, before its tickets are handed over). */
void sl_h2_flush(sl_pump_t *p);

/* On-loop executors (inline.c): the executor queued something on X, a
 * stream; and a blocking wait for SL_AWAIT_* WHAT on it. */
void sl_h2_inline_notify(sl_exch_t *x);
int sl_h2_inline_wait(sl_exch_t *x, int what);

#endif
