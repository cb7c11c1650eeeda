/* ws_harness.h - what the WebSocket connection suites (test_conn_ws*.c)
 * share on top of harness.h: an ASGI-shaped test executor (it awaits; wake
 * tickets come through p->work and the test thread takes them), a client
 * that builds its frames by hand, so the codec is checked from outside
 * too, and the executor's calls with their waits. The state is one
 * pump and one client per test (setup/teardown as check fixtures).
 */
#ifndef SL_TEST_WS_HARNESS_H
#define SL_TEST_WS_HARNESS_H

#include "tests/unit/harness.h"
#include "worker/loop/conn_ws.h"

static const sl_exec_t ws_exec = {
    .name = "test websocket",
    .websocket = true,
    .hand_over = sl_exec_hand_over_queue,
    .notify = sl_exec_notify_handoff,
    .wake = sl_exec_wake_ticket,
    .wait = sl_exec_wait_never,
    .finish = sl_exec_finish_nothing,
    .stop = h_exec_stop,
};

static sl_options_t opt;
static sl_pump_t pump;
static h_client_t client;
static h_resp_t resp;

static inline void setup(void)
{
    client.fd = -1;
    h_client_rcvbuf = 0;
    sl_log_set_level(SL_LOG_CRITICAL);
    h_exec = &ws_exec;
}

static inline void teardown(void)
{
    h_resp_free(&resp);
    h_client_close(&client);
    h_pump_down(&pump);
}

#define UP(...)                                                                \
    do {                                                                       \
        h_options(&opt, __VA_ARGS__);                                          \
        h_pump_up(&pump, &opt);                                                \
        h_connect(&pump, &client);                                             \
    } while (0)

#define KEY "dGhlIHNhbXBsZSBub25jZQ=="
#define HANDSHAKE(extra)                                                       \
    "GET /chat HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"                  \
    "Connection: Upgrade\r\nSec-WebSocket-Key: " KEY "\r\n"                    \
    "Sec-WebSocket-Version: 13\r\n" extra "\r\n"

/* ------------------------------------------------------------------ */
/* the client's frames                                                */

/* Send one masked frame: FIN set, OPCODE, PAYLOAD[0..N). */
static inline void send_frame(int opcode, const void *payload, size_t n)
{
    static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
    uint8_t *f = malloc(n + 14);
    size_t h = 0;

    ck_assert_ptr_nonnull(f);
    f[h++] = (uint8_t)(0x80 | opcode);
    if (n < 126) {
        f[h++] = (uint8_t)(0x80 | n);
    } else if (n < 65536) {
        f[h++] = 0x80 | 126;
        f[h++] = (uint8_t)(n >> 8);
        f[h++] = (uint8_t)n;
    } else {
        f[h++] = 0x80 | 127;
        for (int i = 7; i >= 0; i--)
            f[h++] = (uint8_t)((uint64_t)n >> (8 * i));
    }
    memcpy(f + h, mask, 4);
    h += 4;
    for (size_t i = 0; i < n; i++)
        f[h + i] = ((const uint8_t *)payload)[i] ^ mask[i % 4];
    h_send(&client, f, h + n);
    free(f);
}

static inline void send_close(unsigned code, const char *reason)
{
    uint8_t p[125];
    size_t n = strlen(reason);

    p[0] = (uint8_t)(code >> 8);
    p[1] = (uint8_t)code;
    memcpy(p + 2, reason, n);
    send_frame(SL_WS_OP_CLOSE, p, n + 2);
}

typedef struct {
    int opcode;
    size_t len;
    uint8_t data[256]; /* the first bytes of the payload */
} frame_t;

/* Take one whole server frame off the client's bytes; false when none is
 * complete yet. Server frames are never masked. */
static inline bool take_frame(frame_t *f)
{
    const uint8_t *d;
    size_t h = 2, n;

    h_pull(&client);
    d = (const uint8_t *)client.data;
    if (client.len < 2)
        return false;
    ck_assert_msg(!(d[1] & 0x80), "a masked server frame");
    n = d[1] & 0x7f;
    if (n == 126) {
        if (client.len < 4)
            return false;
        n = (size_t)d[2] << 8 | d[3];
        h = 4;
    } else if (n == 127) {
        if (client.len < 10)
            return false;
        n = 0;
        for (int i = 0; i < 8; i++)
            n = n << 8 | d[2 + i];
        h = 10;
    }
    if (client.len < h + n)
        return false;
    f->opcode = d[0] & 0x0f;
    f->len = n;
    memcpy(f->data, d + h, n < sizeof(f->data) ? n : sizeof(f->data));
    memmove(client.data, client.data + h + n, client.len - h - n);
    client.len -= h + n;
    return true;
}

typedef struct {
    frame_t *f;
    bool got;
} want_frame_t;

static inline bool frame_ready(void *arg)
{
    want_frame_t *w = arg;

    if (!w->got)
        w->got = take_frame(w->f);
    return w->got || client.eof;
}

/* Run the loop until the client holds a whole frame, and take it. */
static inline void wait_frame(frame_t *f)
{
    want_frame_t w = {f, false};

    ck_assert_msg(h_run_until(&pump, frame_ready, &w) && w.got,
                  "no frame from the server (eof %d)", client.eof);
}

static inline void assert_close(const frame_t *f, unsigned code)
{
    ck_assert_int_eq(f->opcode, SL_WS_OP_CLOSE);
    ck_assert_uint_ge(f->len, 2);
    ck_assert_uint_eq((unsigned)f->data[0] << 8 | f->data[1], code);
}

/* ------------------------------------------------------------------ */
/* the executor                                                       */

static inline bool conn_serving(void *arg)
{
    sl_conn_t *c = arg;

    h_pull(&client);
    return c->state == SL_CONN_SERVING || client.eof;
}

/* Handshake, accept with SUBPROTOCOL, read the 101; the request's gen. */
static inline uint32_t open_ws(const char *subprotocol, const char *headers)
{
    sl_ticket_t t;
    sl_conn_t *c = client.conn;

    h_sends(&client, HANDSHAKE(""));
    ck_assert(h_run_until(&pump, conn_serving, c));
    ck_assert_int_eq(c->state, SL_CONN_SERVING);
    ck_assert(c->x.req.websocket);
    ck_assert(h_take_ticket(&pump, &t));
    ck_assert_uint_eq(t.kind, SL_TICKET_SUBMIT);
    ck_assert_int_eq(sl_exch_ws_accept(&c->x, t.gen, subprotocol, headers,
                                       headers ? strlen(headers) : 0),
                     0);
    ck_assert_int_eq(sl_exch_ws_accept(&c->x, t.gen, NULL, NULL, 0), -1);
    ck_assert(h_wait_bytes(&pump, &client, 1));
    ck_assert(h_response(&pump, &client, &resp, true));
    ck_assert_int_eq(resp.status, 101);
    ck_assert_int_eq(c->state, SL_CONN_WS);
    return t.gen;
}

/* Run until a wake ticket for C comes (the test is the executor). */
static inline void wait_wake(void)
{
    sl_ticket_t t;

    ck_assert(h_take_ticket(&pump, &t));
    ck_assert_uint_eq(t.kind, SL_TICKET_WAKE);
    ck_assert_uint_eq(t.idx, client.conn->x.id);
}

/* The next message, waiting for its wake when none is queued yet. */
static inline void recv_msg(uint32_t gen, sl_ws_msg_t *m)
{
    sl_ws_end_t end;
    int rc = sl_exch_ws_recv(&client.conn->x, gen, m, &end);

    if (rc == 1) {
        wait_wake();
        rc = sl_exch_ws_recv(&client.conn->x, gen, m, &end);
    }
    ck_assert_int_eq(rc, 0);
}

/* The end the app hears, waiting for it. */
static inline sl_ws_end_t recv_end(uint32_t gen)
{
    sl_ws_msg_t m;
    sl_ws_end_t end;
    int rc = sl_exch_ws_recv(&client.conn->x, gen, &m, &end);

    if (rc == 1) {
        wait_wake();
        rc = sl_exch_ws_recv(&client.conn->x, gen, &m, &end);
    }
    ck_assert_int_eq(rc, -1);
    return end;
}

/* The app ends: END (-1 when the WebSocket is over already, which it
 * still ends), then the server closes once the handshake is done. */
static inline void app_end(uint32_t gen)
{
    ck_assert_int_ge(sl_exch_send(&client.conn->x, gen, NULL, 0, SL_SEND_END),
                     -1);
    ck_assert(client.conn->x.resp_done);
}

#endif
