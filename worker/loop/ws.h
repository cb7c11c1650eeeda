/* ws.h - the WebSocket protocol (RFC 6455, RFC 7692) as a codec: bytes in,
 * events out; messages in, bytes out. No sockets, no libev, no Python: the
 * connection (worker/loop/conn_ws.c) drives it on the loop thread, unit
 * tests and the fuzzer drive it from buffers.
 *
 *   ws_handshake.c  the opening handshake: checks, Sec-WebSocket-Accept
 *                   (SHA-1 and base64 of our own), the deflate offer
 *   ws_rx.c         the frame parser: unmasking, reassembly, control frames
 *                   between fragments, UTF-8 across fragments, limits
 *   ws_tx.c         the frame writer (server frames are never masked)
 *   ws_deflate.c    permessage-deflate over zlib, with a bounded inflate
 */
#ifndef SL_WS_H
#define SL_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "worker/loop/request.h"

enum {
    SL_WS_OP_CONT = 0x0,
    SL_WS_OP_TEXT = 0x1,
    SL_WS_OP_BINARY = 0x2,
    SL_WS_OP_CLOSE = 0x8,
    SL_WS_OP_PING = 0x9,
    SL_WS_OP_PONG = 0xA,
};

/* Close codes sluice sends or reports (RFC 6455 §7.4.1). */
enum {
    SL_WS_CLOSE_NORMAL = 1000,
    SL_WS_CLOSE_GOING_AWAY = 1001,
    SL_WS_CLOSE_PROTOCOL = 1002,
    SL_WS_CLOSE_NO_STATUS = 1005,    /* reported only: close without a code */
    SL_WS_CLOSE_ABNORMAL = 1006,     /* reported only: no close frame */
    SL_WS_CLOSE_INVALID_DATA = 1007, /* text that is not UTF-8 */
    SL_WS_CLOSE_TOO_BIG = 1009,
    SL_WS_CLOSE_INTERNAL = 1011,
    SL_WS_CLOSE_RESTART = 1012,
};

/* May an endpoint send CODE in a close frame (RFC 6455 §7.4, 3000-4999
 * for applications)? */
bool sl_ws_close_code_valid(unsigned code);

/* ---- the opening handshake (ws_handshake.c) ---- */

/* permessage-deflate parameters as negotiated. */
typedef struct {
    bool on;
    bool server_no_context_takeover; /* we reset our deflater per message */
    bool client_no_context_takeover; /* the client resets its own */
    int server_max_window_bits;      /* 8..15: our deflater's window */
    int client_max_window_bits;      /* 8..15: our inflater's window */
} sl_ws_deflate_params_t;

/* Room for the longest Sec-WebSocket-Extensions value we answer, with its
 * NUL: "permessage-deflate" and all four parameters take 128 bytes. */
#define SL_WS_EXTENSIONS_MAX 160

/* What the answer to a valid handshake request needs. (Subprotocols are
 * the executor's: it reads Sec-WebSocket-Protocol from the request.) */
typedef struct {
    char accept[29];                /* Sec-WebSocket-Accept, NUL-terminated */
    sl_ws_deflate_params_t deflate; /* what we accept of the offer */
    /* our Sec-WebSocket-Extensions value, "" = none */
    char extensions[SL_WS_EXTENSIONS_MAX];
} sl_ws_handshake_t;

/* Is REQ an attempt at a WebSocket upgrade (GET or not, with Upgrade:
 * websocket in a Connection: upgrade request)? */
bool sl_ws_is_upgrade(const sl_req_t *req);

/* Check REQ (an upgrade attempt) against RFC 6455 §4.2.1 and fill *HS.
 * DEFLATE: accept permessage-deflate if the client offers it (the first
 * acceptable offer; we always answer server_no_context_takeover). Returns
 * 0, or the HTTP status to answer: 400 (not GET, not HTTP/1.1, a body, no
 * Host, no Upgrade: websocket or Connection: upgrade, a key that is not
 * base64 of 16 bytes, two keys or two versions), or 426
 * (Sec-WebSocket-Version missing or not 13: answer with
 * "Sec-WebSocket-Version: 13"). Never allocates. */
int sl_ws_handshake(const sl_req_t *req, bool deflate, sl_ws_handshake_t *hs);

/* Sec-WebSocket-Accept for KEY (the header's value as sent, 24 bytes of
 * base64): base64(SHA-1(KEY + GUID)), written to OUT with a NUL. */
void sl_ws_accept_key(const char *key, size_t n, char out[29]);

/* SHA-1 of DATA (ws_handshake.c; FIPS 180-4). */
void sl_ws_sha1(const void *data, size_t n, uint8_t out[20]);

/* ---- receiving (ws_rx.c) ---- */

typedef struct sl_ws_rx sl_ws_rx_t;

enum {
    SL_WS_EV_NONE = 0, /* need more bytes */
    SL_WS_EV_MESSAGE,  /* a whole text or binary message */
    SL_WS_EV_PING,     /* answer with a pong carrying the same data */
    SL_WS_EV_PONG,
    SL_WS_EV_CLOSE, /* the peer's close frame: code and reason */
    SL_WS_EV_ERROR, /* a protocol error: close with code, reason says why */
};

typedef struct {
    int kind;   /* SL_WS_EV_* */
    int opcode; /* MESSAGE: SL_WS_OP_TEXT or SL_WS_OP_BINARY */
    /* MESSAGE: the payload, taken with sl_ws_rx_take() or valid until the
     * next feed (may be NULL when LEN is 0); PING/PONG: the control payload
     * (valid until the next feed or trim; NULL when LEN is 0) */
    const uint8_t *data;
    size_t len;
    unsigned code;      /* CLOSE: the peer's code (1005 for none);
                           ERROR: the code to close with */
    const char *reason; /* CLOSE: the peer's reason (UTF-8, not
                           NUL-terminated, valid until the next trim);
                           ERROR: a static text */
    size_t reason_len;
} sl_ws_event_t;

/* A parser for one connection's client frames. MAX_SIZE bounds a message
 * (after inflating); DEFLATE may be NULL or off. NULL when out of memory. */
sl_ws_rx_t *sl_ws_rx_new(size_t max_size, const sl_ws_deflate_params_t *d);
void sl_ws_rx_free(sl_ws_rx_t *rx);

/* Parse from DATA[0..N): returns the bytes consumed and sets *EV to the
 * first event those bytes complete (EV_NONE: all consumed, more needed).
 * Call again with the rest after each event. After EV_ERROR or EV_CLOSE
 * the parser takes nothing more. -1 when out of memory. */
long sl_ws_rx_feed(sl_ws_rx_t *rx, const uint8_t *data, size_t n,
                   sl_ws_event_t *ev);

/* Move the message of the last EV_MESSAGE into *OUT (which it replaces;
 * the parser starts the next message in a fresh buffer). */
void sl_ws_rx_take(sl_ws_rx_t *rx, sl_buf_t *out);

/* Give back what the parser holds between messages (an idle connection). */
void sl_ws_rx_trim(sl_ws_rx_t *rx);

/* ---- sending (ws_tx.c) ---- */

typedef struct sl_ws_tx sl_ws_tx_t;

/* A writer for one connection's server frames; D may be NULL or off. NULL
 * when out of memory. */
sl_ws_tx_t *sl_ws_tx_new(const sl_ws_deflate_params_t *d);
void sl_ws_tx_free(sl_ws_tx_t *tx);

/* Append one whole frame of OPCODE carrying DATA[0..N) to OUT, compressed
 * when deflate is on and OPCODE is text or binary. 0, or -1 when out of
 * memory (OUT unchanged). */
int sl_ws_tx_frame(sl_ws_tx_t *tx, sl_buf_t *out, int opcode, const void *data,
                   size_t n);

/* Append a close frame with CODE (0: none) and REASON (cut at 123 bytes on
 * a UTF-8 boundary). 0 or -1. */
int sl_ws_tx_close(sl_buf_t *out, unsigned code, const char *reason, size_t n);

/* Give back what the writer holds between messages. */
void sl_ws_tx_trim(sl_ws_tx_t *tx);

#endif
