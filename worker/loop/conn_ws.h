/* conn_ws.h - a connection after a WebSocket upgrade, and the calls an
 * executor uses to serve it.
 *
 * How a WebSocket goes:
 *   1. The loop parses a GET with Upgrade: websocket. When the executor
 *      serves WebSockets (p->exec->websocket), the loop checks the
 *      handshake (ws.h): a bad one is answered 400 or 426 by the loop alone.
 *      A good one sets c->x.req.websocket and is submitted like any request.
 *   2. The executor runs the app with a websocket scope. Before accepting,
 *      the request is an HTTP request: a denial (403, or the app's own
 *      response) goes out through sl_exch_send() with SL_SEND_CLOSE.
 *   3. sl_exch_ws_accept() sends 101 and turns the connection into a
 *      WebSocket (state SL_CONN_WS): from then on the loop reads frames,
 *      answers pings, queues whole messages for the app (a bounded queue:
 *      reading stops while it is full), pings idle peers, and runs the
 *      close handshake. The app sees only whole messages.
 *   4. The app's end: the executor calls sl_exch_ws_close() (if the app did
 *      not), then sl_exch_send(c, gen, NULL, 0, SL_SEND_END) as for any
 *      request. The connection closes once the close handshake is done or
 *      its time is up (SL_CONN_WS_CLOSE_WAIT).
 *
 * Waiting works as for HTTP requests (conn.h, sl_exch_await()): the calls
 * below answer 1 when the executor must wait, and a SL_TICKET_WAKE for the
 * request comes once something changed. Every call takes c->x.mu and checks
 * GEN, like the rest of conn.h.
 *
 * Drain: after --shutdown-delay each open WebSocket is sent close 1001 (1012
 * when the supervisor restarts the worker: a HUP or max-requests), and the
 * app's receive answers with that code; the app has until the graceful
 * timeout to finish.
 */
#ifndef SL_CONN_WS_H
#define SL_CONN_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "worker/loop/conn.h"
#include "worker/loop/ws.h"

/* Seconds a closing WebSocket waits for the peer's close frame (or its
 * EOF) before the connection is cut. */
#define SL_CONN_WS_CLOSE_WAIT 5.0

/* A received message, handed to the executor. */
typedef struct {
    int opcode;    /* SL_WS_OP_TEXT or SL_WS_OP_BINARY */
    sl_buf_t data; /* owned by the receiver once taken: sl_buf_free() */
} sl_ws_msg_t;

/* Bytes of a close reason kept, at most (a close frame's 125 less the
 * code's 2). */
#define SL_WS_REASON_MAX 123

/* How a WebSocket ended, for websocket.disconnect. */
typedef struct {
    unsigned code; /* the peer's close code, 1005 without one, 1006
                      without a close frame, 1001/1012 on a drain */
    char reason[SL_WS_REASON_MAX + 1]; /* NUL-terminated UTF-8 */
} sl_ws_end_t;

/* The per-connection WebSocket state (conn_ws.c); c->x.ws, NULL for HTTP. */
typedef struct sl_conn_ws sl_conn_ws_t;

/* ---- executor side (any thread; with an on-loop executor, the loop) ---- */

/* Accept request GEN's upgrade: send 101 with Sec-WebSocket-Accept, the
 * negotiated extensions, SUBPROTOCOL (NULL: none) and HEADERS[0..N), extra
 * header lines already checked and formatted "Name: value\r\n". 0, or -1
 * when stale or gone. */
int sl_exch_ws_accept(sl_exch_t *x, uint32_t gen, const char *subprotocol,
                      const char *headers, size_t n);

/* Take the next received message into *MSG. 0 when one was taken; 1 when
 * none is queued yet (a SL_TICKET_WAKE comes when one is); -1 when the
 * WebSocket has ended (and no message is left): *END says how. Stale: -1
 * with code 1006. */
int sl_exch_ws_recv(sl_exch_t *x, uint32_t gen, sl_ws_msg_t *msg,
                    sl_ws_end_t *end);

/* Send one message of OPCODE (text or binary). 0, 1 when the unsent
 * output is now over the credit (SL_CONN_CREDIT: wait with
 * sl_exch_await(..., SL_AWAIT_CREDIT) before sending more), or -1 when
 * the WebSocket is closing or gone (the message is dropped). */
int sl_exch_ws_send(sl_exch_t *x, uint32_t gen, int opcode, const void *data,
                    size_t n);

/* Start the close handshake with CODE and REASON (the app's close, or the
 * executor's 1000/1011 when the app ends without one). Idempotent; 0, or
 * -1 when already closed. */
int sl_exch_ws_close(sl_exch_t *x, uint32_t gen, unsigned code,
                     const char *reason, size_t n);

/* ---- loop thread: conn*.c, drain.c ---- */

/* A parsed head is a WebSocket handshake the executor will take: check it,
 * set c->x.req.websocket, keep the handshake's answer. 0 to submit; or the
 * HTTP status to answer at once (400, 426). */
int sl_conn_ws_upgrade(sl_conn_t *c);

/* C's socket is readable in state SL_CONN_WS: read (unless the queue of
 * received messages is full), then advance as sl_conn_ws_process(). */
void sl_conn_ws_read(sl_conn_t *c);

/* Advance a connection in state SL_CONN_WS: parse what rbuf holds, write
 * what is queued, close once the close handshake and the app are done. */
void sl_conn_ws_process(sl_conn_t *c);

/* The loop takes what the executor queued (conn.c, mu held): the switch
 * to SL_CONN_WS after an accept, the app's END, the app's close. */
void sl_conn_ws_take_locked(sl_conn_t *c);

/* Does the app still hold C's WebSocket (no END taken yet)? */
bool sl_conn_ws_app_running(const sl_conn_t *c);

/* Open WebSockets in P (the heartbeat's count). */
uint32_t sl_conn_ws_count(sl_pump_t *p);

/* The 1 Hz sweep: ping the idle peer, cut one that stopped answering, cut
 * a close handshake that timed out. */
void sl_conn_ws_sweep(sl_conn_t *c, ev_tstamp now);

/* Drain: send close CODE (1001 or 1012) once; the app is told. */
void sl_conn_ws_going_away(sl_conn_t *c, unsigned code);

/* Free C's WebSocket state (the connection closes or is reused). */
void sl_conn_ws_free(sl_conn_t *c);

/* The WebSocket session: a connection after its 101 (conn.h). */
extern const sl_session_ops_t sl_ws_session;

#endif
