/* test_conn_ws.c - a connection after a WebSocket upgrade (conn_ws.c), on
 * the loop harness: handshakes, messages, pings and every way to close.
 * Backpressure, other executors, the drain and memory are in
 * test_conn_ws_flow.c; what both use is in ws_harness.h.
 */
#include "config.h"

#include <check.h>
#include <malloc.h>

#include "tests/unit/ws_harness.h"
#include "worker/loop/accesslog.h"

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
    ck_assert_int_eq(sl_exch_ws_accept(&client.conn->x, t.gen, NULL, NULL, 0),
                     0);
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

/* Once the 101 is out, the handshake's head and header array move into
 * one block of their size (conn.c: sl_conn_pack_head()) and the two cache
 * blocks go back; the access-log line written at the end reads them. */
START_TEST(test_head_packed_once_accepted)
{
    sl_conn_t *c;
    sl_ticket_t t;
    sl_logfmt_t f;
    sl_accesslog_clock_t clk = {.sec = -1};
    sl_accesslog_rec_t rec = {.peer = "p", .status = 101};
    char err[128], line[512];
    unsigned held;
    size_t n, size;

    UP(NULL);
    c = client.conn;
    h_sends(&client, "GET /chat?room=7 HTTP/1.1\r\nHost: h\r\n"
                     "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: " KEY "\r\n"
                     "Sec-WebSocket-Version: 13\r\n"
                     "User-Agent: ua-test/1.0\r\nX-Last: z\r\n\r\n");
    ck_assert(h_take_ticket(&pump, &t));
    ck_assert(!c->x.req.packed);
    ck_assert_uint_eq(c->x.req.nhdrs, 7);
    held = sl_bufcache_held(&pump.bufs);
    ck_assert_int_eq(sl_exch_ws_accept(&c->x, t.gen, NULL, NULL, 0), 0);
    ck_assert(h_response(&pump, &client, &resp, true));
    ck_assert_int_eq(resp.status, 101);
    ck_assert_int_eq(c->state, SL_CONN_WS);
    ck_assert(c->x.req.packed);
    /* one block: the head's bytes, then 7 entries (not 1 KiB + 2 KiB) */
    size = malloc_usable_size(c->x.req.hbuf.data);
    ck_assert_uint_lt(size, c->x.req.hbuf.len + 16 + 7 * sizeof(sl_hdr_t) + 32);
    ck_assert((char *)c->x.req.hdrs >= c->x.req.hbuf.data + c->x.req.hbuf.len);
    ck_assert((char *)(c->x.req.hdrs + 7) <= c->x.req.hbuf.data + size);
    ck_assert_uint_ge(sl_bufcache_held(&pump.bufs), held + 2);

    ck_assert_int_eq(sl_logfmt_compile(&f,
                                       "\"%(r)s\" %(U)s %(q)s %({host}i)s "
                                       "%({user-agent}i)s %({x-last}i)s",
                                       false, err, sizeof(err)),
                     0);
    rec.req = &c->x.req;
    n = sl_accesslog_render(&f, &clk, &rec, line, sizeof(line) - 1);
    line[n] = '\0';
    ck_assert_str_eq(line, "\"GET /chat?room=7 HTTP/1.1\" /chat room=7 h "
                           "ua-test/1.0 z\n");
    send_close(1000, "");
    ck_assert_uint_eq(recv_end(t.gen).code, 1000);
    app_end(t.gen);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(pump.pool.nactive, 0);
    ck_assert(!c->x.req.packed); /* freed with the connection */
    ck_assert_ptr_null(c->x.req.hdrs);
    ck_assert_ptr_null(c->x.req.hbuf.data);
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
    ck_assert_int_eq(sl_exch_ws_send(&client.conn->x, gen, m.opcode,
                                     m.data.data + m.data.off, 5),
                     0);
    sl_buf_free(&m.data);
    wait_frame(&f);
    ck_assert_int_eq(f.opcode, SL_WS_OP_TEXT);
    ck_assert_uint_eq(f.len, 5);
    ck_assert(memcmp(f.data, "hello", 5) == 0);
    /* between messages, at once (not only after the idle sweep): no read
     * or write buffer held */
    h_run_passes(&pump, 2);
    ck_assert_ptr_null(client.conn->rbuf.data);
    ck_assert_ptr_null(client.conn->tx.buf.data);
    ck_assert_ptr_null(client.conn->x.out.data); /* none for the app */

    memset(big, 0xa5, sizeof(big));
    send_frame(SL_WS_OP_BINARY, big, sizeof(big));
    recv_msg(gen, &m);
    ck_assert_int_eq(m.opcode, SL_WS_OP_BINARY);
    ck_assert_uint_eq(sl_buf_pending(&m.data), sizeof(big));
    ck_assert_int_eq(sl_exch_ws_send(&client.conn->x, gen, SL_WS_OP_BINARY,
                                     m.data.data + m.data.off, sizeof(big)),
                     0);
    sl_buf_free(&m.data);
    wait_frame(&f);
    ck_assert_int_eq(f.opcode, SL_WS_OP_BINARY);
    ck_assert_uint_eq(f.len, sizeof(big));
    /* stale requests touch nothing */
    ck_assert_int_eq(
        sl_exch_ws_send(&client.conn->x, gen + 1, SL_WS_OP_TEXT, "x", 1), -1);
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

/* The ping's payload is kept only while its pong waits: pings of every
 * size, one after another, each answered with its own. */
START_TEST(test_pings_of_every_size)
{
    uint8_t p[125];
    frame_t f;
    size_t n;

    UP(NULL);
    open_ws(NULL, NULL);
    for (n = 0; n <= sizeof(p); n += n < 8 ? 1 : 39) {
        memset(p, (int)('a' + n % 26), n);
        send_frame(SL_WS_OP_PING, p, n);
        wait_frame(&f);
        ck_assert_int_eq(f.opcode, SL_WS_OP_PONG);
        ck_assert_uint_eq(f.len, n);
        ck_assert(n == 0 || memcmp(f.data, p, n) == 0);
    }
    memset(p, 'z', sizeof(p));
    send_frame(SL_WS_OP_PING, p, sizeof(p));
    wait_frame(&f);
    ck_assert_uint_eq(f.len, sizeof(p));
    ck_assert(memcmp(f.data, p, sizeof(p)) == 0);
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
    ck_assert_int_eq(
        sl_exch_ws_send(&client.conn->x, gen, SL_WS_OP_TEXT, "x", 1), -1);
    ck_assert_int_eq(sl_exch_ws_close(&client.conn->x, gen, 1000, NULL, 0), -1);
    app_end(gen);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(pump.pool.nactive, 0);
    ck_assert_uint_eq(pump.inflight, 0);
}
END_TEST

/* The peer's reason, as long as a close frame allows (123 bytes), reaches
 * the app whole. */
START_TEST(test_peer_close_reason_whole)
{
    char reason[SL_WS_REASON_MAX + 1];
    frame_t f;
    uint32_t gen;
    sl_ws_end_t end;

    UP(NULL);
    gen = open_ws(NULL, NULL);
    memset(reason, 'r', SL_WS_REASON_MAX);
    reason[SL_WS_REASON_MAX - 1] = 'R';
    reason[SL_WS_REASON_MAX] = '\0';
    send_close(4002, reason);
    wait_frame(&f);
    assert_close(&f, 4002);
    end = recv_end(gen);
    ck_assert_uint_eq(end.code, 4002);
    ck_assert_str_eq(end.reason, reason);
    end = recv_end(gen); /* asked again: the same */
    ck_assert_str_eq(end.reason, reason);
    app_end(gen);
    ck_assert(h_wait_eof(&pump, &client));
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
    ck_assert_int_eq(sl_exch_ws_close(&client.conn->x, gen, 4000, "done", 4),
                     0);
    ck_assert_int_eq(sl_exch_ws_close(&client.conn->x, gen, 4000, "done", 4),
                     0);
    ck_assert_int_eq(
        sl_exch_ws_send(&client.conn->x, gen, SL_WS_OP_TEXT, "x", 1), -1);
    app_end(gen);
    wait_frame(&f);
    assert_close(&f, 4000);
    ck_assert(memcmp(f.data + 2, "done", 4) == 0);
    h_run_passes(&pump, 3);
    ck_assert_uint_eq(pump.pool.nactive, 1); /* waits for the peer's close */
    send_close(4000, "");
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(pump.pool.nactive, 0);
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
    ck_assert_uint_eq(pump.pool.nactive, 0);
}
END_TEST

START_TEST(test_close_wait_cut)
{
    frame_t f;
    uint32_t gen;

    UP(NULL);
    gen = open_ws(NULL, NULL);
    ck_assert_int_eq(sl_exch_ws_close(&client.conn->x, gen, 1000, NULL, 0), 0);
    app_end(gen);
    wait_frame(&f);
    assert_close(&f, 1000);
    sl_conn_ws_sweep(client.conn, ev_now(pump.loop) + 1);
    h_run_passes(&pump, 3);
    ck_assert_uint_eq(pump.pool.nactive, 1);
    /* the client never answers */
    sl_conn_ws_sweep(client.conn,
                     ev_now(pump.loop) + SL_CONN_WS_CLOSE_WAIT + 0.5);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(pump.pool.nactive, 0);
}
END_TEST

static bool no_conns(void *arg)
{
    return ((sl_pump_t *)arg)->pool.nactive == 0;
}

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
    /* failed (RFC 6455 §7.1.7): EOF right behind the close frame, though
     * the client has not answered it and the app still runs */
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(recv_end(gen).code, SL_WS_CLOSE_PROTOCOL);
    app_end(gen);
    ck_assert_uint_eq(pump.pool.nactive, 1); /* reading on until the client */
    shutdown(client.fd, SHUT_WR);
    ck_assert(h_run_until(&pump, no_conns, &pump));
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

static Suite *conn_ws_suite(void)
{
    Suite *s = suite_create("conn_ws");
    TCase *tc = tcase_create("conn_ws");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_handshake_101);
    tcase_add_test(tc, test_handshake_deflate);
    tcase_add_test(tc, test_handshake_refused);
    tcase_add_test(tc, test_head_packed_once_accepted);
    tcase_add_test(tc, test_echo);
    tcase_add_test(tc, test_ping_answered_on_loop);
    tcase_add_test(tc, test_pings_of_every_size);
    tcase_add_test(tc, test_server_ping_and_timeout);
    tcase_add_test(tc, test_ping_disabled);
    tcase_add_test(tc, test_peer_closes);
    tcase_add_test(tc, test_peer_close_reason_whole);
    tcase_add_test(tc, test_peer_closes_without_code);
    tcase_add_test(tc, test_app_closes);
    tcase_add_test(tc, test_peer_eof_is_1006);
    tcase_add_test(tc, test_close_wait_cut);
    tcase_add_test(tc, test_protocol_error);
    tcase_add_test(tc, test_too_big_1009);
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
