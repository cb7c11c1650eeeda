/* test_conn_ws.c - a connection after a WebSocket upgrade (conn_ws.c), on
 * the loop harness: a real pump, a real socket for the client, and the test
 * thread as the executor (an ASGI-shaped one: it awaits, and wake tickets
 * come through p->work). The client's frames are built here, by hand, so
 * the codec is checked from outside too.
 */
#include "config.h"

#include <check.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <zlib.h>

#include "common/ctl.h"
#include "tests/unit/harness.h"
#include "worker/loop/conn_ws.h"
#include "worker/loop/drain.h"

/* A sanitizer's allocator is not glibc's: mallinfo2() says nothing there,
 * and the memory tests only report. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define HEAP_MEASURED 0
#else
#define HEAP_MEASURED 1
#endif

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

static void setup(void)
{
    client.fd = -1;
    sl_log_set_level(SL_LOG_CRITICAL);
    h_exec = &ws_exec;
}

static void teardown(void)
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
static void send_frame(int opcode, const void *payload, size_t n)
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

static void send_close(unsigned code, const char *reason)
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
static bool take_frame(frame_t *f)
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

static bool frame_ready(void *arg)
{
    want_frame_t *w = arg;

    if (!w->got)
        w->got = take_frame(w->f);
    return w->got || client.eof;
}

/* Run the loop until the client holds a whole frame, and take it. */
static void wait_frame(frame_t *f)
{
    want_frame_t w = {f, false};

    ck_assert_msg(h_run_until(&pump, frame_ready, &w) && w.got,
                  "no frame from the server (eof %d)", client.eof);
}

static void assert_close(const frame_t *f, unsigned code)
{
    ck_assert_int_eq(f->opcode, SL_WS_OP_CLOSE);
    ck_assert_uint_ge(f->len, 2);
    ck_assert_uint_eq((unsigned)f->data[0] << 8 | f->data[1], code);
}

/* ------------------------------------------------------------------ */
/* the executor                                                       */

static bool conn_serving(void *arg)
{
    sl_conn_t *c = arg;

    h_pull(&client);
    return c->state == SL_CONN_SERVING || client.eof;
}

/* Handshake, accept with SUBPROTOCOL, read the 101; the request's gen. */
static uint32_t open_ws(const char *subprotocol, const char *headers)
{
    sl_ticket_t t;
    sl_conn_t *c = client.conn;

    h_sends(&client, HANDSHAKE(""));
    ck_assert(h_run_until(&pump, conn_serving, c));
    ck_assert_int_eq(c->state, SL_CONN_SERVING);
    ck_assert(c->req.websocket);
    ck_assert(h_take_ticket(&pump, &t));
    ck_assert_uint_eq(t.kind, SL_TICKET_SUBMIT);
    ck_assert_int_eq(sl_conn_ws_accept(c, t.gen, subprotocol, headers,
                                       headers ? strlen(headers) : 0),
                     0);
    ck_assert_int_eq(sl_conn_ws_accept(c, t.gen, NULL, NULL, 0), -1);
    ck_assert(h_wait_bytes(&pump, &client, 1));
    ck_assert(h_response(&pump, &client, &resp, true));
    ck_assert_int_eq(resp.status, 101);
    ck_assert_int_eq(c->state, SL_CONN_WS);
    return t.gen;
}

/* Run until a wake ticket for C comes (the test is the executor). */
static void wait_wake(void)
{
    sl_ticket_t t;

    ck_assert(h_take_ticket(&pump, &t));
    ck_assert_uint_eq(t.kind, SL_TICKET_WAKE);
    ck_assert_uint_eq(t.idx, client.conn->idx);
}

/* The next message, waiting for its wake when none is queued yet. */
static void recv_msg(uint32_t gen, sl_ws_msg_t *m)
{
    sl_ws_end_t end;
    int rc = sl_conn_ws_recv(client.conn, gen, m, &end);

    if (rc == 1) {
        wait_wake();
        rc = sl_conn_ws_recv(client.conn, gen, m, &end);
    }
    ck_assert_int_eq(rc, 0);
}

/* The end the app hears, waiting for it. */
static sl_ws_end_t recv_end(uint32_t gen)
{
    sl_ws_msg_t m;
    sl_ws_end_t end;
    int rc = sl_conn_ws_recv(client.conn, gen, &m, &end);

    if (rc == 1) {
        wait_wake();
        rc = sl_conn_ws_recv(client.conn, gen, &m, &end);
    }
    ck_assert_int_eq(rc, -1);
    return end;
}

/* The app ends: END (-1 when the WebSocket is over already, which it
 * still ends), then the server closes once the handshake is done. */
static void app_end(uint32_t gen)
{
    ck_assert_int_ge(sl_conn_send(client.conn, gen, NULL, 0, SL_SEND_END), -1);
    ck_assert(client.conn->resp_done);
}

/* ------------------------------------------------------------------ */
/* handshakes                                                         */

START_TEST(test_handshake_101)
{
    char v[128];

    UP(NULL);
    open_ws("chat", "X-Extra: 1\r\n");
    ck_assert_str_eq(h_header(resp.head, "Sec-WebSocket-Accept", v, sizeof(v)),
                     "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    ck_assert_str_eq(h_header(resp.head, "Upgrade", v, sizeof(v)), "websocket");
    ck_assert_str_eq(h_header(resp.head, "Connection", v, sizeof(v)),
                     "Upgrade");
    ck_assert_str_eq(
        h_header(resp.head, "Sec-WebSocket-Protocol", v, sizeof(v)), "chat");
    ck_assert_str_eq(h_header(resp.head, "X-Extra", v, sizeof(v)), "1");
    ck_assert_ptr_null(
        h_header(resp.head, "Sec-WebSocket-Extensions", v, sizeof(v)));
    ck_assert_uint_eq(sl_conn_ws_count(&pump), 1);
}
END_TEST

START_TEST(test_handshake_deflate)
{
    char v[200];
    sl_ticket_t t;

    UP(NULL);
    h_sends(&client,
            HANDSHAKE("Sec-WebSocket-Extensions: permessage-deflate\r\n"));
    ck_assert(h_take_ticket(&pump, &t));
    ck_assert_int_eq(sl_conn_ws_accept(client.conn, t.gen, NULL, NULL, 0), 0);
    ck_assert(h_response(&pump, &client, &resp, true));
    ck_assert_int_eq(resp.status, 101);
    ck_assert_ptr_nonnull(
        h_header(resp.head, "Sec-WebSocket-Extensions", v, sizeof(v)));
    ck_assert(strncmp(v, "permessage-deflate", 18) == 0);
}
END_TEST

START_TEST(test_handshake_refused)
{
    char v[64];

    UP(NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: " KEY "\r\n"
                     "Sec-WebSocket-Version: 8\r\n\r\n");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 426);
    ck_assert_str_eq(h_header(resp.head, "Sec-WebSocket-Version", v, sizeof(v)),
                     "13");
    ck_assert_str_eq(h_header(resp.head, "Connection", v, sizeof(v)), "close");
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(h_tickets(&pump), 0);

    h_client_close(&client);
    h_nactive_t none = {&pump, 0};
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
    h_connect(&pump, &client);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                     "\r\n");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 400);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(h_tickets(&pump), 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* messages                                                           */

START_TEST(test_echo)
{
    static uint8_t big[70000];
    sl_ws_msg_t m;
    frame_t f;
    uint32_t gen;

    UP(NULL);
    gen = open_ws(NULL, NULL);
    send_frame(SL_WS_OP_TEXT, "hello", 5);
    recv_msg(gen, &m);
    ck_assert_int_eq(m.opcode, SL_WS_OP_TEXT);
    ck_assert_uint_eq(sl_buf_pending(&m.data), 5);
    ck_assert(memcmp(m.data.data + m.data.off, "hello", 5) == 0);
    ck_assert_int_eq(sl_conn_ws_send(client.conn, gen, m.opcode,
                                     m.data.data + m.data.off, 5),
                     0);
    sl_buf_free(&m.data);
    wait_frame(&f);
    ck_assert_int_eq(f.opcode, SL_WS_OP_TEXT);
    ck_assert_uint_eq(f.len, 5);
    ck_assert(memcmp(f.data, "hello", 5) == 0);

    memset(big, 0xa5, sizeof(big));
    send_frame(SL_WS_OP_BINARY, big, sizeof(big));
    recv_msg(gen, &m);
    ck_assert_int_eq(m.opcode, SL_WS_OP_BINARY);
    ck_assert_uint_eq(sl_buf_pending(&m.data), sizeof(big));
    ck_assert_int_eq(sl_conn_ws_send(client.conn, gen, SL_WS_OP_BINARY,
                                     m.data.data + m.data.off, sizeof(big)),
                     0);
    sl_buf_free(&m.data);
    wait_frame(&f);
    ck_assert_int_eq(f.opcode, SL_WS_OP_BINARY);
    ck_assert_uint_eq(f.len, sizeof(big));
    /* stale requests touch nothing */
    ck_assert_int_eq(
        sl_conn_ws_send(client.conn, gen + 1, SL_WS_OP_TEXT, "x", 1), -1);
}
END_TEST

START_TEST(test_ping_answered_on_loop)
{
    frame_t f;

    UP(NULL);
    open_ws(NULL, NULL);
    send_frame(SL_WS_OP_PING, "are you there", 13);
    wait_frame(&f);
    ck_assert_int_eq(f.opcode, SL_WS_OP_PONG);
    ck_assert_uint_eq(f.len, 13);
    ck_assert(memcmp(f.data, "are you there", 13) == 0);
    ck_assert_uint_eq(h_tickets(&pump), 0); /* the executor never heard */
}
END_TEST

START_TEST(test_server_ping_and_timeout)
{
    frame_t f;
    uint32_t gen;
    sl_ws_end_t end;
    ev_tstamp now;

    UP("--ws-ping-interval", "2", "--ws-ping-timeout", "3", NULL);
    gen = open_ws(NULL, NULL);
    now = ev_now(pump.loop);
    sl_conn_ws_sweep(client.conn, now + 1);
    h_run_passes(&pump, 3);
    h_pull(&client);
    ck_assert_uint_eq(client.len, 0); /* not idle long enough */
    sl_conn_ws_sweep(client.conn, now + 2.5);
    wait_frame(&f);
    ck_assert_int_eq(f.opcode, SL_WS_OP_PING);
    /* the pong comes: no close */
    send_frame(SL_WS_OP_PONG, NULL, 0);
    h_run_passes(&pump, 5);
    sl_conn_ws_sweep(client.conn, now + 1.5);
    h_run_passes(&pump, 3);
    h_pull(&client);
    ck_assert_uint_eq(client.len, 0);
    /* a ping never answered: 1011 */
    sl_conn_ws_sweep(client.conn, now + 10);
    wait_frame(&f);
    ck_assert_int_eq(f.opcode, SL_WS_OP_PING);
    sl_conn_ws_sweep(client.conn, now + 14);
    wait_frame(&f);
    assert_close(&f, SL_WS_CLOSE_INTERNAL);
    end = recv_end(gen);
    ck_assert_uint_eq(end.code, SL_WS_CLOSE_INTERNAL);
}
END_TEST

START_TEST(test_ping_disabled)
{
    UP("--ws-ping-interval", "0", NULL);
    open_ws(NULL, NULL);
    sl_conn_ws_sweep(client.conn, ev_now(pump.loop) + 1000);
    h_run_passes(&pump, 3);
    h_pull(&client);
    ck_assert_uint_eq(client.len, 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* closing                                                            */

START_TEST(test_peer_closes)
{
    frame_t f;
    uint32_t gen;
    sl_ws_end_t end;

    UP(NULL);
    gen = open_ws(NULL, NULL);
    send_frame(SL_WS_OP_TEXT, "last", 4);
    send_close(4001, "bye");
    wait_frame(&f);
    assert_close(&f, 4001); /* echoed */
    /* the queued message first, then the end */
    sl_ws_msg_t m;
    recv_msg(gen, &m);
    sl_buf_free(&m.data);
    end = recv_end(gen);
    ck_assert_uint_eq(end.code, 4001);
    ck_assert_str_eq(end.reason, "bye");
    ck_assert_int_eq(sl_conn_ws_send(client.conn, gen, SL_WS_OP_TEXT, "x", 1),
                     -1);
    ck_assert_int_eq(sl_conn_ws_close(client.conn, gen, 1000, NULL, 0), -1);
    app_end(gen);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(pump.nactive, 0);
    ck_assert_uint_eq(pump.inflight, 0);
}
END_TEST

START_TEST(test_peer_closes_without_code)
{
    frame_t f;
    uint32_t gen;

    UP(NULL);
    gen = open_ws(NULL, NULL);
    send_frame(SL_WS_OP_CLOSE, NULL, 0);
    wait_frame(&f);
    ck_assert_int_eq(f.opcode, SL_WS_OP_CLOSE);
    ck_assert_uint_eq(f.len, 0); /* answered without a code too */
    ck_assert_uint_eq(recv_end(gen).code, SL_WS_CLOSE_NO_STATUS);
    app_end(gen);
    ck_assert(h_wait_eof(&pump, &client));
}
END_TEST

START_TEST(test_app_closes)
{
    frame_t f;
    uint32_t gen;

    UP(NULL);
    gen = open_ws(NULL, NULL);
    ck_assert_int_eq(sl_conn_ws_close(client.conn, gen, 4000, "done", 4), 0);
    ck_assert_int_eq(sl_conn_ws_close(client.conn, gen, 4000, "done", 4), 0);
    ck_assert_int_eq(sl_conn_ws_send(client.conn, gen, SL_WS_OP_TEXT, "x", 1),
                     -1);
    app_end(gen);
    wait_frame(&f);
    assert_close(&f, 4000);
    ck_assert(memcmp(f.data + 2, "done", 4) == 0);
    h_run_passes(&pump, 3);
    ck_assert_uint_eq(pump.nactive, 1); /* waits for the peer's close */
    send_close(4000, "");
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(pump.nactive, 0);
}
END_TEST

START_TEST(test_peer_eof_is_1006)
{
    uint32_t gen;

    UP(NULL);
    gen = open_ws(NULL, NULL);
    shutdown(client.fd, SHUT_WR);
    ck_assert_uint_eq(recv_end(gen).code, SL_WS_CLOSE_ABNORMAL);
    app_end(gen);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(pump.nactive, 0);
}
END_TEST

START_TEST(test_close_wait_cut)
{
    frame_t f;
    uint32_t gen;

    UP(NULL);
    gen = open_ws(NULL, NULL);
    ck_assert_int_eq(sl_conn_ws_close(client.conn, gen, 1000, NULL, 0), 0);
    app_end(gen);
    wait_frame(&f);
    assert_close(&f, 1000);
    sl_conn_ws_sweep(client.conn, ev_now(pump.loop) + 1);
    h_run_passes(&pump, 3);
    ck_assert_uint_eq(pump.nactive, 1);
    /* the client never answers */
    sl_conn_ws_sweep(client.conn,
                     ev_now(pump.loop) + SL_CONN_WS_CLOSE_WAIT + 0.5);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(pump.nactive, 0);
}
END_TEST

START_TEST(test_protocol_error)
{
    frame_t f;
    uint8_t unmasked[] = {0x81, 0x02, 'h', 'i'};
    uint32_t gen;

    UP(NULL);
    gen = open_ws(NULL, NULL);
    h_send(&client, unmasked, sizeof(unmasked));
    wait_frame(&f);
    assert_close(&f, SL_WS_CLOSE_PROTOCOL);
    ck_assert_uint_eq(recv_end(gen).code, SL_WS_CLOSE_PROTOCOL);
    app_end(gen);
    shutdown(client.fd, SHUT_WR);
    ck_assert(h_wait_eof(&pump, &client));
}
END_TEST

START_TEST(test_too_big_1009)
{
    static uint8_t big[2000];
    frame_t f;
    uint32_t gen;

    UP("--ws-max-size", "1000", NULL);
    gen = open_ws(NULL, NULL);
    send_frame(SL_WS_OP_BINARY, big, sizeof(big));
    wait_frame(&f);
    assert_close(&f, SL_WS_CLOSE_TOO_BIG);
    ck_assert_uint_eq(recv_end(gen).code, SL_WS_CLOSE_TOO_BIG);
}
END_TEST

/* ------------------------------------------------------------------ */
/* backpressure                                                       */

/* Send up to LIMIT bytes of 60 kB messages without blocking; how many
 * went before the socket filled (LIMIT when it never did). */
static size_t flood(size_t limit)
{
    static uint8_t frame[60000 + 14];
    size_t sent = 0;

    /* one masked binary frame, the mask all zero: the payload as is */
    frame[0] = 0x82;
    frame[1] = 0x80 | 126;
    frame[2] = (uint8_t)(60000 >> 8);
    frame[3] = (uint8_t)(60000 & 0xff);
    while (sent < limit) {
        ssize_t n =
            send(client.fd, frame + sent % (60000 + 8),
                 60000 + 8 - sent % (60000 + 8), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            ck_assert_int_eq(errno, EAGAIN);
            return sent;
        }
        sent += (size_t)n;
        h_run_passes(&pump, 1);
    }
    return sent;
}

START_TEST(test_queue_full_stops_reading)
{
    sl_ws_msg_t m;
    uint32_t gen;
    size_t sent;
    int i;

    UP("--ws-max-queue", "2", NULL);
    gen = open_ws(NULL, NULL);
    sent = flood(64 * 1024 * 1024);
    /* the loop stopped reading: the kernel's buffers filled long before
     * 64 MB, though the app took nothing */
    ck_assert_uint_lt(sent, 64 * 1024 * 1024);
    ck_assert_uint_lt(client.conn->rbuf.cap, 4 * 65536);
    /* taking messages lets reading go on */
    for (i = 0; i < 20; i++) {
        recv_msg(gen, &m);
        ck_assert_uint_eq(sl_buf_pending(&m.data), 60000);
        sl_buf_free(&m.data);
    }
}
END_TEST

static bool woken(void *arg)
{
    sl_ticket_t *t = arg;

    h_pull(&client);
    client.len = 0; /* the client reads and drops */
    return pump.work.count > 0 && sl_queue_try_pop(&pump.work, t);
}

START_TEST(test_send_credit)
{
    static uint8_t chunk[64 * 1024];
    sl_ticket_t t;
    uint32_t gen;
    int rc = 0, i;

    UP(NULL);
    gen = open_ws(NULL, NULL);
    /* the client does not read: the unsent output grows to the credit */
    for (i = 0; i < 1000 && rc == 0; i++) {
        rc = sl_conn_ws_send(client.conn, gen, SL_WS_OP_BINARY, chunk,
                             sizeof(chunk));
        h_run_passes(&pump, 1);
    }
    ck_assert_int_eq(rc, 1);
    ck_assert_int_eq(sl_conn_await(client.conn, gen, SL_AWAIT_CREDIT), 1);
    /* the client reads: the wake comes below half the credit */
    ck_assert(h_run_until(&pump, woken, &t));
    ck_assert_uint_eq(t.kind, SL_TICKET_WAKE);
    ck_assert_int_eq(sl_conn_await(client.conn, gen, SL_AWAIT_CREDIT), 0);
}
END_TEST

/* An executor on a thread of its own (a handoff executor's shape): it
 * echoes WANT messages, sleeping on the work queue for its wake tickets
 * while the test thread runs the loop. */
typedef struct {
    uint32_t gen;
    int want, done;
} echo_t;

static void *echo_main(void *arg)
{
    echo_t *e = arg;
    sl_conn_t *c = client.conn;
    sl_ws_msg_t m;
    sl_ws_end_t end;
    sl_ticket_t t;
    int rc;

    while (e->done < e->want) {
        rc = sl_conn_ws_recv(c, e->gen, &m, &end);
        if (rc == 1) {
            if (!sl_queue_pop_wait(&pump.work, &t))
                break;
            continue;
        }
        if (rc < 0)
            break;
        rc = sl_conn_ws_send(c, e->gen, m.opcode, m.data.data,
                             sl_buf_pending(&m.data));
        sl_buf_free(&m.data);
        if (rc < 0)
            break;
        e->done++;
    }
    return NULL;
}

typedef struct {
    int want, got;
} frames_t;

static bool frames_in(void *arg)
{
    frames_t *n = arg;
    frame_t f;

    while (take_frame(&f)) {
        ck_assert_int_eq(f.opcode, SL_WS_OP_TEXT);
        n->got++;
    }
    return n->got >= n->want || client.eof;
}

START_TEST(test_echo_from_another_thread)
{
    enum { N = 300 };
    echo_t e = {.want = N};
    frames_t n = {.want = N};
    pthread_t th;
    char text[64];

    UP(NULL);
    e.gen = open_ws(NULL, NULL);
    ck_assert_int_eq(pthread_create(&th, NULL, echo_main, &e), 0);
    for (int i = 0; i < N; i++) {
        snprintf(text, sizeof(text), "message %d", i);
        send_frame(SL_WS_OP_TEXT, text, strlen(text));
        if (i % 50 == 0)
            h_run_passes(&pump, 1);
    }
    ck_assert(h_run_until(&pump, frames_in, &n));
    ck_assert_int_eq(n.got, N);
    pthread_join(th, NULL);
    ck_assert_int_eq(e.done, N);
}
END_TEST

/* ------------------------------------------------------------------ */
/* drain                                                              */

START_TEST(test_drain_1001)
{
    frame_t f;
    uint32_t gen;

    UP(NULL);
    gen = open_ws(NULL, NULL);
    sl_drain_prepare(&pump);
    wait_frame(&f);
    assert_close(&f, SL_WS_CLOSE_GOING_AWAY);
    ck_assert_uint_eq(recv_end(gen).code, SL_WS_CLOSE_GOING_AWAY);
    send_close(SL_WS_CLOSE_GOING_AWAY, "");
    app_end(gen);
    ck_assert(h_wait_eof(&pump, &client));
}
END_TEST

START_TEST(test_restart_1012)
{
    sl_ctl_msg_t m = {.type = SL_CTL_RESTART};
    frame_t f;
    uint32_t gen;
    int sv[2];

    UP(NULL);
    gen = open_ws(NULL, NULL);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv),
                     0);
    sl_pump_set_ctl(&pump, sv[0]);
    /* written just before the TERM: the drain reads it itself */
    ck_assert_int_eq(sl_ctl_send(sv[1], &m), 0);
    sl_drain_prepare(&pump);
    wait_frame(&f);
    assert_close(&f, SL_WS_CLOSE_RESTART);
    ck_assert_uint_eq(recv_end(gen).code, SL_WS_CLOSE_RESTART);
    ev_io_stop(pump.loop, &pump.ctl_io);
    close(sv[0]);
    close(sv[1]);
    pump.ctl_fd = -1;
}
END_TEST

/* ------------------------------------------------------------------ */
/* memory                                                             */

/* Echo three 100 kB messages on the client's WebSocket GEN. */
static void traffic(uint32_t gen)
{
    static uint8_t big[100000];
    sl_ws_msg_t m;
    frame_t f;

    for (int i = 0; i < 3; i++) {
        send_frame(SL_WS_OP_BINARY, big, sizeof(big));
        recv_msg(gen, &m);
        ck_assert_int_eq(sl_conn_ws_send(client.conn, gen, SL_WS_OP_BINARY,
                                         m.data.data, sizeof(big)),
                         0);
        sl_buf_free(&m.data);
        wait_frame(&f);
    }
}

START_TEST(test_idle_memory)
{
    sl_conn_t *c;
    uint32_t gen;
    size_t before, after;
    h_nactive_t none = {&pump, 0};

    UP("--ws-per-message-deflate", "false", NULL);
    /* a first WebSocket grows what the process grows once (libev's
     * arrays, the ticket queues): not a connection's cost */
    gen = open_ws(NULL, NULL);
    traffic(gen);
    app_end(gen);
    h_client_close(&client);
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
    h_connect(&pump, &client);
    c = client.conn;
    /* the test's own buffer, grown beforehand; and the heap without this
     * connection's buffers (a fresh connection holds a read buffer) */
    client.cap = 1 << 20;
    client.data = realloc(client.data, client.cap + 1);
    ck_assert_ptr_nonnull(client.data);
    h_run_passes(&pump, 2);
    before =
        mallinfo2().uordblks - malloc_usable_size(c->rbuf.data) -
        malloc_usable_size(c->wbuf.data) - malloc_usable_size(c->out.data) -
        malloc_usable_size(c->body.data) -
        malloc_usable_size(c->req.hbuf.data) - malloc_usable_size(resp.body);
    gen = open_ws(NULL, NULL);
    traffic(gen);
    h_run_passes(&pump, 3);
    sl_conn_ws_sweep(c, ev_now(pump.loop) + 1.5);
    after = mallinfo2().uordblks - malloc_usable_size(resp.body);
    fprintf(stderr,
            "idle WebSocket after traffic: %zu bytes malloc'd, of them %zu "
            "the request head\n",
            after - before, malloc_usable_size(c->req.hbuf.data));
    if (HEAP_MEASURED)
        ck_assert_uint_le(after - before, 2048);
}
END_TEST

/* Send TEXT compressed (RFC 7692: raw deflate, the flush's empty block
 * cut off, RSV1 on the frame). */
static void send_deflated(const char *text)
{
    z_stream z;
    uint8_t out[512], frame[600];
    size_t n, h = 0;

    memset(&z, 0, sizeof(z));
    ck_assert_int_eq(
        deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (Bytef *)text;
    z.avail_in = (uInt)strlen(text);
    z.next_out = out;
    z.avail_out = sizeof(out);
    ck_assert_int_eq(deflate(&z, Z_SYNC_FLUSH), Z_OK);
    n = sizeof(out) - z.avail_out - 4;
    deflateEnd(&z);
    ck_assert_uint_lt(n, 126);
    frame[h++] = 0x80 | 0x40 | SL_WS_OP_TEXT;
    frame[h++] = (uint8_t)(0x80 | n);
    memset(frame + h, 0, 4); /* a zero mask: the payload as is */
    h += 4;
    memcpy(frame + h, out, n);
    h_send(&client, frame, h + n);
}

/* With permessage-deflate and a client that keeps its context (what
 * browsers offer), the inflater's window is part of the stream and stays:
 * measured and reported, bounded by zlib's own size. */
START_TEST(test_idle_memory_deflate)
{
    sl_conn_t *c;
    sl_ticket_t t;
    sl_ws_msg_t m;
    size_t before, after;

    UP(NULL);
    c = client.conn;
    client.cap = 1 << 20;
    client.data = realloc(client.data, client.cap + 1);
    ck_assert_ptr_nonnull(client.data);
    before = mallinfo2().uordblks - malloc_usable_size(c->rbuf.data) -
             malloc_usable_size(c->req.hbuf.data);
    h_sends(&client, HANDSHAKE("Sec-WebSocket-Extensions: permessage-deflate;"
                               " client_max_window_bits\r\n"));
    ck_assert(h_take_ticket(&pump, &t));
    ck_assert_int_eq(sl_conn_ws_accept(c, t.gen, NULL, NULL, 0), 0);
    ck_assert(h_response(&pump, &client, &resp, true));
    ck_assert_int_eq(resp.status, 101);
    send_deflated("hello hello hello hello");
    recv_msg(t.gen, &m);
    ck_assert_uint_eq(sl_buf_pending(&m.data), 23);
    ck_assert(memcmp(m.data.data, "hello hello hello hello", 23) == 0);
    sl_buf_free(&m.data);
    h_run_passes(&pump, 3);
    sl_conn_ws_sweep(c, ev_now(pump.loop) + 1.5);
    after = mallinfo2().uordblks - malloc_usable_size(resp.body);
    fprintf(stderr,
            "idle WebSocket with permessage-deflate, client context kept: "
            "%zu bytes malloc'd\n",
            after - before);
    if (HEAP_MEASURED)
        ck_assert_uint_le(after - before, 64 * 1024);
}
END_TEST

static Suite *conn_ws_suite(void)
{
    Suite *s = suite_create("conn_ws");
    TCase *tc = tcase_create("conn_ws");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_handshake_101);
    tcase_add_test(tc, test_handshake_deflate);
    tcase_add_test(tc, test_handshake_refused);
    tcase_add_test(tc, test_echo);
    tcase_add_test(tc, test_ping_answered_on_loop);
    tcase_add_test(tc, test_server_ping_and_timeout);
    tcase_add_test(tc, test_ping_disabled);
    tcase_add_test(tc, test_peer_closes);
    tcase_add_test(tc, test_peer_closes_without_code);
    tcase_add_test(tc, test_app_closes);
    tcase_add_test(tc, test_peer_eof_is_1006);
    tcase_add_test(tc, test_close_wait_cut);
    tcase_add_test(tc, test_protocol_error);
    tcase_add_test(tc, test_too_big_1009);
    tcase_add_test(tc, test_queue_full_stops_reading);
    tcase_add_test(tc, test_send_credit);
    tcase_add_test(tc, test_echo_from_another_thread);
    tcase_add_test(tc, test_drain_1001);
    tcase_add_test(tc, test_restart_1012);
    tcase_add_test(tc, test_idle_memory);
    tcase_add_test(tc, test_idle_memory_deflate);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(conn_ws_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
