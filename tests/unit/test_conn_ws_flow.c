/* test_conn_ws_flow.c - a WebSocket connection's flow (conn_ws.c):
 * backpressure both ways, an executor on another thread and one on the
 * loop thread, peers that do not read (ping floods, the send timeout, a
 * ping that cannot go out), the drain's close codes, and what an idle
 * WebSocket costs.
 */
#include "config.h"

#include <check.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <zlib.h>

#include "common/ctl.h"
#include "tests/unit/ws_harness.h"
#include "worker/loop/drain.h"

/* A sanitizer's allocator is not glibc's: mallinfo2() says nothing there,
 * and the memory tests only report. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define HEAP_MEASURED 0
#else
#define HEAP_MEASURED 1
#endif

/* ------------------------------------------------------------------ */
/* backpressure                                                       */

#define FLOOD_MSG   60000
#define FLOOD_FRAME (FLOOD_MSG + 8)
#define FLOOD_LIMIT (64 * 1024 * 1024)

/* Send 60 kB messages without blocking until the socket is full, going on
 * from *TOTAL bytes sent before; the bytes sent now. */
static size_t flood(size_t *total)
{
    static uint8_t frame[FLOOD_FRAME];
    size_t sent = 0;

    /* one masked binary frame, the mask all zero: the payload as is */
    frame[0] = 0x82;
    frame[1] = 0x80 | 126;
    frame[2] = (uint8_t)(FLOOD_MSG >> 8);
    frame[3] = (uint8_t)(FLOOD_MSG & 0xff);
    while (*total < FLOOD_LIMIT) {
        size_t at = *total % FLOOD_FRAME;
        ssize_t n = send(client.fd, frame + at, FLOOD_FRAME - at,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            ck_assert_int_eq(errno, EAGAIN);
            break;
        }
        *total += (size_t)n;
        sent += (size_t)n;
    }
    return sent;
}

START_TEST(test_queue_full_stops_reading)
{
    sl_ws_msg_t m;
    uint32_t gen;
    size_t total = 0;
    int idle = 0, unread = 0, i;

    UP("--ws-max-queue", "2", NULL);
    gen = open_ws(NULL, NULL);
    /* the app takes nothing: fill the socket, let the loop read what it
     * will, again, until twenty rounds of passes take nothing more */
    while (total < FLOOD_LIMIT && idle < 20) {
        idle = flood(&total) == 0 ? idle + 1 : 0;
        h_run_passes(&pump, 5);
    }
    ck_assert_msg(idle == 20, "the loop read %zu bytes without stopping",
                  total);
    /* ... with bytes waiting in the kernel, and little in the loop */
    ck_assert_int_eq(ioctl(client.conn->tp.fd, FIONREAD, &unread), 0);
    ck_assert_int_gt(unread, 0);
    ck_assert_uint_lt(client.conn->rbuf.cap, 4 * 65536);
    /* a peer we do not read is not pinged, nor timed out */
    sl_conn_ws_sweep(client.conn, ev_now(pump.loop) + 100);
    sl_conn_ws_sweep(client.conn, ev_now(pump.loop) + 200);
    h_run_passes(&pump, 3);
    h_pull(&client);
    ck_assert_uint_eq(client.len, 0);
    /* taking messages lets reading go on */
    for (i = 0; i < 20; i++) {
        recv_msg(gen, &m);
        ck_assert_uint_eq(sl_buf_pending(&m.data), FLOOD_MSG);
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
        rc = sl_exch_ws_send(&client.conn->x, gen, SL_WS_OP_BINARY, chunk,
                             sizeof(chunk));
        h_run_passes(&pump, 1);
    }
    ck_assert_int_eq(rc, 1);
    ck_assert_int_eq(sl_exch_await(&client.conn->x, gen, SL_AWAIT_CREDIT), 1);
    /* the client reads: the wake comes below half the credit */
    ck_assert(h_run_until(&pump, woken, &t));
    ck_assert_uint_eq(t.kind, SL_TICKET_WAKE);
    ck_assert_int_eq(sl_exch_await(&client.conn->x, gen, SL_AWAIT_CREDIT), 0);
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
        rc = sl_exch_ws_recv(&c->x, e->gen, &m, &end);
        if (rc == 1) {
            if (!sl_queue_pop_wait(&pump.work, &t))
                break;
            continue;
        }
        if (rc < 0)
            break;
        rc = sl_exch_ws_send(&c->x, e->gen, m.opcode, m.data.data,
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

/* An on-loop executor (ASGI inline's shape): run() is called from the
 * dispatch, its output waits until its driver hands the connection back
 * (sl_conn_complete(), here the test), and wakes come as tickets handed
 * over on the loop thread. */
static struct {
    sl_conn_t *ran, *dirty;
    uint32_t gen;
    int wakes;
} inl;

static void inl_run(sl_exch_t *x)
{
    sl_conn_t *c = x->conn;

    inl.ran = c;
    inl.gen = c->x.gen;
}

static void inl_notify(sl_exch_t *x)
{
    sl_conn_t *c = x->conn;

    inl.dirty = c;
}

static void inl_hand_over(sl_pump_t *p, const sl_ticket_t *t, uint32_t n)
{
    (void)p;
    for (uint32_t i = 0; i < n; i++)
        inl.wakes += t[i].kind == SL_TICKET_WAKE;
}

static const sl_exec_t ws_inline_exec = {
    .name = "test websocket inline",
    .on_loop = true,
    .websocket = true,
    .hand_over = inl_hand_over,
    .notify = inl_notify,
    .wake = sl_exec_wake_ticket,
    .wait = sl_exec_wait_never,
    .run = inl_run,
    .finish = sl_exec_finish_nothing,
    .stop = h_exec_stop,
};

static bool inl_ran(void *arg)
{
    (void)arg;
    return inl.ran != NULL;
}

static bool inl_woken(void *arg)
{
    (void)arg;
    return inl.wakes > 0;
}

/* The executor's driver: hand back what it queued. */
static void inl_drive(void)
{
    if (inl.dirty != NULL) {
        sl_conn_t *c = inl.dirty;
        inl.dirty = NULL;
        sl_conn_complete(c);
    }
}

START_TEST(test_on_loop_executor)
{
    sl_ws_msg_t m;
    sl_ws_end_t end;
    frame_t f;

    memset(&inl, 0, sizeof(inl));
    h_exec = &ws_inline_exec;
    UP(NULL);
    h_sends(&client, HANDSHAKE(""));
    ck_assert(h_run_until(&pump, inl_ran, NULL));
    ck_assert_int_eq(sl_exch_ws_accept(&inl.ran->x, inl.gen, NULL, NULL, 0), 0);
    inl_drive();
    ck_assert(h_response(&pump, &client, &resp, true));
    ck_assert_int_eq(resp.status, 101);
    ck_assert_int_eq(sl_exch_ws_recv(&inl.ran->x, inl.gen, &m, &end), 1);
    send_frame(SL_WS_OP_TEXT, "inline", 6);
    ck_assert(h_run_until(&pump, inl_woken, NULL));
    ck_assert_int_eq(sl_exch_ws_recv(&inl.ran->x, inl.gen, &m, &end), 0);
    ck_assert_int_eq(sl_exch_ws_send(&inl.ran->x, inl.gen, SL_WS_OP_TEXT,
                                     m.data.data, sl_buf_pending(&m.data)),
                     0);
    sl_buf_free(&m.data);
    inl_drive();
    wait_frame(&f);
    ck_assert_uint_eq(f.len, 6);
    ck_assert(memcmp(f.data, "inline", 6) == 0);
    send_close(1000, "");
    wait_frame(&f);
    assert_close(&f, 1000);
    ck_assert_int_eq(sl_exch_ws_recv(&inl.ran->x, inl.gen, &m, &end), -1);
    ck_assert_uint_eq(end.code, 1000);
    sl_exch_send(&inl.ran->x, inl.gen, NULL, 0, SL_SEND_END);
    inl_drive();
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(pump.inflight, 0);
    ck_assert_uint_eq(pump.pool.nactive, 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* peers that do not read                                             */

/* Run the loop until the server has closed the client's connection (it
 * holds unread bytes for it: the client need not take them all). */
static bool server_closed(void)
{
    h_nactive_t n = {&pump, 0};

    return h_run_until(&pump, h_nactive_is, &n);
}

/* The app sends until it is over the credit while the client reads
 * nothing: output waits for the peer in the loop's buffer. */
static void stall_output(uint32_t gen)
{
    static uint8_t chunk[64 * 1024];
    int rc = 0, i;

    for (i = 0; i < 1000 && rc == 0; i++) {
        rc = sl_exch_ws_send(&client.conn->x, gen, SL_WS_OP_BINARY, chunk,
                             sizeof(chunk));
        h_run_passes(&pump, 1);
    }
    ck_assert_int_eq(rc, 1);
    ck_assert_uint_gt(sl_buf_pending(&client.conn->tx.buf), 0);
}

/* Send ping N (a payload of 120 digits) from the client, running the
 * loop while the socket takes no more: the server must read for the
 * client to go on. */
static void send_ping(int n)
{
    static const uint8_t mask[4] = {0, 0, 0, 0};
    uint8_t f[6 + 128];
    size_t len, off = 0;
    int tries = 0;
    ssize_t w;

    f[0] = 0x80 | SL_WS_OP_PING;
    len = (size_t)snprintf((char *)f + 6, sizeof(f) - 6, "%0120d", n);
    f[1] = (uint8_t)(0x80 | len);
    memcpy(f + 2, mask, 4); /* a zero mask: the payload as is */
    len += 6;
    while (off < len) {
        w = send(client.fd, f + off, len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        ck_assert_int_eq(errno, EAGAIN);
        ck_assert_int_lt(tries++, 1000);
        h_run_passes(&pump, 1);
    }
}

START_TEST(test_ping_flood_answers_the_latest)
{
    static uint8_t chunk[16 * 1024];
    char p[128];
    frame_t f;
    size_t waiting;
    uint32_t gen;
    int i, n, pongs = 0;

    h_client_rcvbuf = 4096;
    UP(NULL);
    gen = open_ws(NULL, NULL);
    /* output the client does not read waits in the loop's buffer, below
     * the credit: the loop goes on reading */
    for (i = 0; i < 1000 && sl_buf_pending(&client.conn->tx.buf) == 0; i++) {
        ck_assert_int_eq(sl_exch_ws_send(&client.conn->x, gen, SL_WS_OP_BINARY,
                                         chunk, sizeof(chunk)),
                         0);
        h_run_passes(&pump, 2);
    }
    waiting = sl_buf_pending(&client.conn->tx.buf);
    ck_assert_uint_gt(waiting, 0);
    /* ten thousand pings are read and add nothing to it */
    for (i = 0; i < 10000; i++)
        send_ping(i);
    h_run_passes(&pump, 5);
    ck_assert_uint_eq(sl_buf_pending(&client.conn->rbuf), 0);
    ck_assert_uint_le(sl_buf_pending(&client.conn->tx.buf), waiting);
    /* the client reads: the data, and pongs for the latest ping of each
     * read the loop answered (RFC 6455 §5.5.3), the last ping's last */
    n = snprintf(p, sizeof(p), "%0120d", i - 1);
    for (i = 0; i < 20000; i++) {
        wait_frame(&f);
        if (f.opcode != SL_WS_OP_PONG)
            continue;
        pongs++;
        if (f.len == (size_t)n && memcmp(f.data, p, (size_t)n) == 0)
            break;
    }
    ck_assert_int_lt(i, 20000);
    ck_assert_int_lt(pongs, 1000);
    h_run_passes(&pump, 5);
    h_pull(&client);
    ck_assert_uint_eq(client.len, 0);
}
END_TEST

START_TEST(test_send_timeout_cuts_a_stalled_reader)
{
    sl_conn_t *c;
    uint32_t gen;

    h_client_rcvbuf = 4096;
    UP("--send-timeout", "2", "--ws-ping-interval", "0", NULL);
    gen = open_ws(NULL, NULL);
    c = client.conn;
    stall_output(gen);
    ck_assert(c->deadline > 0); /* armed once the socket was full */
    sl_conn_ws_sweep(c, ev_now(pump.loop) + 1);
    ck_assert_int_eq(c->state, SL_CONN_WS);
    /* nothing taken for --send-timeout: cut, and the app hears 1006 */
    sl_conn_ws_sweep(c, ev_now(pump.loop) + 2.5);
    ck_assert_uint_eq(recv_end(gen).code, SL_WS_CLOSE_ABNORMAL);
    ck_assert_int_eq(sl_exch_ws_send(&c->x, gen, SL_WS_OP_TEXT, "x", 1), -1);
    app_end(gen);
    ck_assert(server_closed());
}
END_TEST

START_TEST(test_ping_behind_unread_output_times_out)
{
    sl_ws_msg_t m;
    sl_conn_t *c;
    uint32_t gen;
    ev_tstamp now;

    h_client_rcvbuf = 4096;
    UP("--send-timeout", "0", "--ws-ping-interval", "2", "--ws-ping-timeout",
       "2", "--ws-max-queue", "1", NULL);
    gen = open_ws(NULL, NULL);
    c = client.conn;
    /* the app takes no message (the queue is full: reading stops) and
     * its output waits for a client that does not read */
    send_frame(SL_WS_OP_TEXT, "a", 1);
    h_run_passes(&pump, 3);
    stall_output(gen);
    now = ev_now(pump.loop);
    sl_conn_ws_sweep(c, now + 3); /* the ping is due: it cannot go out */
    ck_assert_int_eq(c->state, SL_CONN_WS);
    sl_conn_ws_sweep(c, now + 4);
    ck_assert_int_eq(c->state, SL_CONN_WS);
    /* unanswered, as a ping that cannot be written is: cut */
    sl_conn_ws_sweep(c, now + 5.5);
    recv_msg(gen, &m);
    sl_buf_free(&m.data);
    ck_assert_uint_eq(recv_end(gen).code, SL_WS_CLOSE_ABNORMAL);
    app_end(gen);
    ck_assert(server_closed());
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
    sl_drain_set_ctl(&pump, sv[0]);
    /* the heartbeat counts it */
    sl_drain_ctl(&pump, SL_CTL_HEARTBEAT);
    ck_assert_int_eq(sl_ctl_recv(sv[1], &m), 1);
    ck_assert_uint_eq(m.websockets, 1);
    ck_assert_uint_eq(m.conns, 1);
    m = (sl_ctl_msg_t){.type = SL_CTL_RESTART};
    /* written just before the TERM: the drain reads it itself */
    ck_assert_int_eq(sl_ctl_send(sv[1], &m), 0);
    sl_drain_prepare(&pump);
    wait_frame(&f);
    assert_close(&f, SL_WS_CLOSE_RESTART);
    ck_assert_uint_eq(recv_end(gen).code, SL_WS_CLOSE_RESTART);
    ev_io_stop(pump.loop, &pump.drain.ctl_io);
    close(sv[0]);
    close(sv[1]);
    pump.drain.ctl_fd = -1;
}
END_TEST

/* A WebSocket the app accepts while the worker drains is closed at once,
 * with the drain's code. */
START_TEST(test_accepted_during_drain)
{
    sl_ticket_t t;
    frame_t f;

    UP(NULL);
    h_sends(&client, HANDSHAKE(""));
    ck_assert(h_take_ticket(&pump, &t));
    sl_drain_prepare(&pump);
    ck_assert_int_eq(sl_exch_ws_accept(&client.conn->x, t.gen, NULL, NULL, 0),
                     0);
    ck_assert(h_response(&pump, &client, &resp, true));
    ck_assert_int_eq(resp.status, 101);
    wait_frame(&f);
    assert_close(&f, SL_WS_CLOSE_GOING_AWAY);
    ck_assert_uint_eq(recv_end(t.gen).code, SL_WS_CLOSE_GOING_AWAY);
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
        ck_assert_int_eq(sl_exch_ws_send(&client.conn->x, gen, SL_WS_OP_BINARY,
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
        malloc_usable_size(c->tx.buf.data) - malloc_usable_size(c->x.out.data) -
        malloc_usable_size(c->x.body.data) -
        malloc_usable_size(c->x.req.hbuf.data) - malloc_usable_size(resp.body);
    gen = open_ws(NULL, NULL);
    traffic(gen);
    h_run_passes(&pump, 3);
    sl_conn_ws_sweep(c, ev_now(pump.loop) + 1.5);
    after = mallinfo2().uordblks - malloc_usable_size(resp.body);
    fprintf(stderr,
            "idle WebSocket after traffic: %zu bytes malloc'd, of them %zu "
            "the request head\n",
            after - before, malloc_usable_size(c->x.req.hbuf.data));
    if (HEAP_MEASURED)
        ck_assert_uint_le(after - before, 1024);
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

/* Open a WebSocket offering permessage-deflate as browsers do (no
 * client_no_context_takeover of their own), and have one compressed
 * message echoed; the request's gen. */
static uint32_t deflate_exchange(void)
{
    sl_ticket_t t;
    sl_ws_msg_t m;
    frame_t f;
    char v[200];

    h_sends(&client, HANDSHAKE("Sec-WebSocket-Extensions: permessage-deflate;"
                               " client_max_window_bits\r\n"));
    ck_assert(h_take_ticket(&pump, &t));
    ck_assert_int_eq(sl_exch_ws_accept(&client.conn->x, t.gen, NULL, NULL, 0),
                     0);
    ck_assert(h_response(&pump, &client, &resp, true));
    ck_assert_int_eq(resp.status, 101);
    ck_assert_ptr_nonnull(
        h_header(resp.head, "Sec-WebSocket-Extensions", v, sizeof(v)));
    send_deflated("hello hello hello hello");
    recv_msg(t.gen, &m);
    ck_assert_uint_eq(sl_buf_pending(&m.data), 23);
    ck_assert(memcmp(m.data.data, "hello hello hello hello", 23) == 0);
    ck_assert_int_eq(
        sl_exch_ws_send(&client.conn->x, t.gen, SL_WS_OP_TEXT, m.data.data, 23),
        0);
    sl_buf_free(&m.data);
    wait_frame(&f);
    ck_assert_int_eq(f.opcode, SL_WS_OP_TEXT);
    return t.gen;
}

/* With permessage-deflate, an idle WebSocket holds no zlib state: the
 * server asks every client for client_no_context_takeover (the codec's
 * answer), so the inflater goes after each message, and the deflater
 * keeps nothing between messages either. */
START_TEST(test_idle_memory_deflate)
{
    sl_conn_t *c;
    uint32_t gen;
    size_t before, after;
    h_nactive_t none = {&pump, 0};

    UP(NULL);
    gen = deflate_exchange(); /* warm-up, as in test_idle_memory */
    app_end(gen);
    h_client_close(&client);
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
    h_connect(&pump, &client);
    c = client.conn;
    client.cap = 1 << 20;
    client.data = realloc(client.data, client.cap + 1);
    ck_assert_ptr_nonnull(client.data);
    h_run_passes(&pump, 2);
    before = mallinfo2().uordblks - malloc_usable_size(c->rbuf.data) -
             malloc_usable_size(c->x.req.hbuf.data) -
             malloc_usable_size(resp.body);
    deflate_exchange();
    h_run_passes(&pump, 3);
    sl_conn_ws_sweep(c, ev_now(pump.loop) + 1.5);
    after = mallinfo2().uordblks - malloc_usable_size(resp.body);
    fprintf(stderr,
            "idle WebSocket with permessage-deflate after traffic: %zu bytes "
            "malloc'd\n",
            after - before);
    if (HEAP_MEASURED)
        ck_assert_uint_le(after - before, 1024);
}
END_TEST

static Suite *conn_ws_flow_suite(void)
{
    Suite *s = suite_create("conn_ws_flow");
    TCase *tc = tcase_create("conn_ws_flow");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_queue_full_stops_reading);
    tcase_add_test(tc, test_send_credit);
    tcase_add_test(tc, test_echo_from_another_thread);
    tcase_add_test(tc, test_ping_flood_answers_the_latest);
    tcase_add_test(tc, test_send_timeout_cuts_a_stalled_reader);
    tcase_add_test(tc, test_ping_behind_unread_output_times_out);
    tcase_add_test(tc, test_on_loop_executor);
    tcase_add_test(tc, test_drain_1001);
    tcase_add_test(tc, test_restart_1012);
    tcase_add_test(tc, test_accepted_during_drain);
    tcase_add_test(tc, test_idle_memory);
    tcase_add_test(tc, test_idle_memory_deflate);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(conn_ws_flow_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
