/* test_conn_body.c - check suite for worker/loop/conn.c: request bodies
 * as the executor reads them (Content-Length, chunked, limits, the body
 * window, 100-continue, bodies left unread).
 *
 * A real pump in pump mode serves real loopback connections; the test
 * thread is both the loop thread (it runs libev passes until what it waits
 * for holds) and, where a request reaches the executor, the executor: it
 * takes the ticket from the work queue and answers with sl_conn_send() and
 * friends as a lane would. Where the executor side blocks (credit, body
 * reads), a second thread plays the lane while the test thread runs the
 * loop. The client reads what really went over the socket. What the
 * test_conn*.c suites share is tests/unit/conn_harness.h.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "tests/unit/buf_faults.h"
#include "tests/unit/conn_harness.h"
#include "tests/unit/harness.h"
#include "worker/loop/http.h"

/* ------------------------------------------------------------------ */
/* request bodies                                                     */

static bool body_done(void *arg)
{
    sl_conn_t *c = arg;
    bool done;

    pthread_mutex_lock(&c->x.mu);
    done = c->x.body_done || c->x.aborted;
    pthread_mutex_unlock(&c->x.mu);
    return done;
}

START_TEST(test_read_body)
{
    sl_ticket_t t;
    sl_conn_t *c;
    char buf[64];

    UP(NULL);
    c = client.conn;
    h_sends(&client,
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n");
    take_request(&t);
    /* nothing yet: without WAIT the caller is told to wait */
    ck_assert_int_eq(
        sl_exch_read_body(&c->x, t.gen, buf, sizeof(buf), false, false), -2);
    h_sends(&client, "ab\ncd\nefgh");
    ck_assert(h_run_until(&pump, body_done, c));
    ck_assert_int_eq(sl_exch_read_body(&c->x, t.gen, buf, 0, false, false), 0);
    ck_assert_int_eq(
        sl_exch_read_body(&c->x, t.gen, buf, sizeof(buf), true, false), 3);
    ck_assert(memcmp(buf, "ab\n", 3) == 0);
    ck_assert_int_eq(sl_exch_read_body(&c->x, t.gen, buf, 2, true, false), 2);
    ck_assert(memcmp(buf, "cd", 2) == 0);
    ck_assert_int_eq(
        sl_exch_read_body(&c->x, t.gen, buf, sizeof(buf), true, false), 1);
    ck_assert_int_eq(
        sl_exch_read_body(&c->x, t.gen, buf, sizeof(buf), false, false), 4);
    ck_assert(memcmp(buf, "efgh", 4) == 0);
    /* the end, however often it is asked for */
    ck_assert_int_eq(
        sl_exch_read_body(&c->x, t.gen, buf, sizeof(buf), false, true), 0);
    ck_assert_int_eq(
        sl_exch_read_body(&c->x, t.gen, buf, sizeof(buf), false, false), 0);
    /* a stale request reads nothing */
    ck_assert_int_eq(
        sl_exch_read_body(&c->x, t.gen + 1, buf, sizeof(buf), false, false),
        -1);
    ck_assert_int_eq(
        sl_exch_read_body(&c->x, t.gen - 1, buf, sizeof(buf), false, false),
        -1);
}
END_TEST

START_TEST(test_no_body_reads_end)
{
    sl_ticket_t t;
    char buf[8];

    UP(NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_int_eq(sl_exch_read_body(&client.conn->x, t.gen, buf, sizeof(buf),
                                       false, false),
                     0);
}
END_TEST

START_TEST(test_chunked_body)
{
    sl_ticket_t t;
    sl_conn_t *c;
    char buf[64] = {0};
    long n, got = 0;

    UP(NULL);
    c = client.conn;
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n"
                     "5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n"
                     "0\r\nX-Trailer: t\r\n\r\n");
    take_request(&t);
    ck_assert(h_run_until(&pump, body_done, c));
    while ((n = sl_exch_read_body(&c->x, t.gen, buf + got,
                                  sizeof(buf) - 1 - (size_t)got, false,
                                  false)) > 0)
        got += n;
    ck_assert_int_eq(n, 0);
    ck_assert_str_eq(buf, "hello 0123456789");
    /* the trailer is not a header of the request */
    ck_assert_int_eq(c->x.req.nhdrs, 2);
}
END_TEST

/* A lane that waits for body bytes is woken when they arrive. */
START_TEST(test_read_body_waits_for_bytes)
{
    sl_ticket_t t;
    pthread_t th;
    h_reader_t r = {0};

    UP(NULL);
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n");
    take_request(&t);
    r.c = client.conn;
    r.gen = t.gen;
    ck_assert_int_eq(pthread_create(&th, NULL, h_reader_main, &r), 0);
    ck_assert(h_run_until(&pump, h_executor_waiting, r.c));
    ck_assert(!h_reader_done(&r));
    h_sends(&client, "hello");
    ck_assert(h_run_until(&pump, h_reader_done, &r));
    pthread_join(th, NULL);
    ck_assert_int_eq(r.rc, 5);
    ck_assert_str_eq(r.buf, "hello");
}
END_TEST

/* A waiting lane learns that the client left half way through its body. */
START_TEST(test_client_gone_mid_body)
{
    sl_ticket_t t;
    pthread_t th;
    h_reader_t r = {0};
    h_nactive_t none = {&pump, 0};

    UP(NULL);
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 50\r\n"
                     "\r\n0123456789");
    take_request(&t);
    r.c = client.conn;
    r.gen = t.gen;
    ck_assert_int_eq(
        sl_exch_read_body(&r.c->x, t.gen, r.buf, sizeof(r.buf), false, true),
        10);
    ck_assert_int_eq(pthread_create(&th, NULL, h_reader_main, &r), 0);
    ck_assert(h_run_until(&pump, h_executor_waiting, r.c));
    close(client.fd);
    client.fd = -1;
    ck_assert(h_run_until(&pump, h_reader_done, &r));
    pthread_join(th, NULL);
    ck_assert_int_eq(r.rc, -1);
    ck_assert(r.c->x.aborted);
    /* sending fails, but END still ends the request and frees the slot */
    ck_assert_int_eq(send_str(t.gen, "x", SL_SEND_END), -1);
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
    ck_assert_uint_eq(pump.inflight, 0);
}
END_TEST

/* --limit-request-body over a chunked body, all in the first packet. */
START_TEST(test_chunked_body_over_limit)
{
    UP("--limit-request-body", "10", NULL);
    assert_refused("POST / HTTP/1.1\r\nHost: h\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n"
                   "8\r\n01234567\r\n8\r\n89abcdef\r\n0\r\n\r\n",
                   413);
}
END_TEST

/* The limit is on the body, not on what is buffered: a chunked body that
 * the app reads as it streams in is still refused past the limit. */
START_TEST(test_streamed_chunked_body_over_limit)
{
    sl_ticket_t t;
    sl_conn_t *c;
    char buf[64];
    long n, total = 0;

    UP("--limit-request-body", "10", NULL);
    c = client.conn;
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n");
    take_request(&t);
    h_sends(&client, "8\r\n01234567\r\n");
    ck_assert(h_run_until(&pump, body_pending, c));
    total += sl_exch_read_body(&c->x, t.gen, buf, sizeof(buf), false, false);
    ck_assert_int_eq(total, 8);
    h_sends(&client, "8\r\n89abcdef\r\n0\r\n\r\n");
    ck_assert(h_run_until(&pump, body_done, c));
    while ((n = sl_exch_read_body(&c->x, t.gen, buf, sizeof(buf), false,
                                  false)) > 0)
        total += n;
    ck_assert_msg(c->h1.http_error == 413,
                  "a %ld-byte chunked body passed --limit-request-body 10",
                  total);
}
END_TEST

/* The loop stops reading a body the app does not read: at most the body
 * window is buffered, and reading on resumes the flow. */
/* Body bytes the socket already holds are taken in one pass, up to the
 * window, not one read per pass: the app waiting for them hears once. */
START_TEST(test_body_burst_in_one_pass)
{
    enum { SIZE = 200 * 1024 };
    static char body[SIZE];
    int big = 4 * 1024 * 1024;
    sl_ticket_t t;
    sl_conn_t *c;
    char head[128];
    size_t buffered, queued = 0;

    UP(NULL);
    c = client.conn;
    ck_assert_int_eq(
        setsockopt(c->tp.fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big)), 0);
    memset(body, 'b', sizeof(body));
    snprintf(head, sizeof(head),
             "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n", SIZE);
    h_sends(&client, head);
    take_request(&t);
    h_send(&client, body, SIZE);
    /* wait until the kernel holds all of it on the server's side */
    for (int i = 0; i < 1000 && queued < SIZE; i++) {
        int n = 0;
        ck_assert_int_eq(ioctl(c->tp.fd, FIONREAD, &n), 0);
        queued = (size_t)n;
        if (queued < SIZE)
            usleep(1000);
    }
    ck_assert_uint_eq(queued, SIZE);
    ev_run(pump.loop, EVRUN_NOWAIT);
    pthread_mutex_lock(&c->x.mu);
    buffered = sl_buf_pending(&c->x.body);
    pthread_mutex_unlock(&c->x.mu);
    ck_assert_uint_eq(buffered, SIZE);
}
END_TEST

START_TEST(test_body_window)
{
    enum { SIZE = 2 * 1024 * 1024 };
    sl_ticket_t t;
    sl_conn_t *c;
    static char body[SIZE], got[SIZE];
    char head[128];
    long n, total = 0;
    int small = 64 * 1024;

    UP(NULL);
    c = client.conn;
    ck_assert_int_eq(
        setsockopt(c->tp.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
    ck_assert_int_eq(
        setsockopt(client.fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
    for (size_t i = 0; i < SIZE; i++)
        body[i] = (char)('a' + i % 23);
    snprintf(head, sizeof(head),
             "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n", SIZE);
    h_sends(&client, head);
    take_request(&t);
    /* the client's send would block: feed it from the loop side */
    ck_assert_int_eq(fcntl(client.fd, F_SETFL, O_NONBLOCK), 0);
    size_t sent = 0;
    for (int pass = 0; pass < 2000 && sent < SIZE; pass++) {
        ssize_t w = send(client.fd, body + sent, SIZE - sent, MSG_NOSIGNAL);
        if (w > 0)
            sent += (size_t)w;
        ev_run(pump.loop, EVRUN_NOWAIT);
    }
    ck_assert_uint_lt(sent, SIZE); /* the loop stopped taking it */
    pthread_mutex_lock(&c->x.mu);
    size_t buffered = sl_buf_pending(&c->x.body);
    pthread_mutex_unlock(&c->x.mu);
    /* the window, overshot by one read at most */
    ck_assert_uint_le(buffered, SL_CONN_BODY_WINDOW + SL_CONN_BODY_READ);
    ck_assert(!(c->io.events & EV_READ) || !ev_is_active(&c->io));
    /* read it all while the loop runs: everything arrives, in order */
    double end = h_now() + H_DEADLINE;
    while (total < SIZE && h_now() < end) {
        ssize_t w = sent < SIZE ? send(client.fd, body + sent, SIZE - sent,
                                       MSG_NOSIGNAL)
                                : 0;
        if (w > 0)
            sent += (size_t)w;
        ev_run(pump.loop, EVRUN_NOWAIT);
        while ((n = sl_exch_read_body(&c->x, t.gen, got + total,
                                      SIZE - (size_t)total, false, false)) > 0)
            total += n;
    }
    ck_assert_int_eq(total, SIZE);
    ck_assert(memcmp(got, body, SIZE) == 0);
}
END_TEST

/* Expect: 100-continue gets its interim response when the request is
 * handed over, before the body is sent. */
START_TEST(test_expect_continue)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    sl_ticket_t t;
    char buf[8];

    UP(NULL);
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n"
                     "Expect: 100-continue\r\n\r\n");
    take_request(&t);
    ck_assert(h_wait_bytes(&pump, &client, strlen(cont)));
    ck_assert_str_eq(client.data, cont);
    client.len = 0;
    ck_assert(!client.conn->tx.wrote_any); /* an error may still replace it */
    h_sends(&client, "body");
    ck_assert(h_run_until(&pump, body_done, client.conn));
    ck_assert_int_eq(sl_exch_read_body(&client.conn->x, t.gen, buf, sizeof(buf),
                                       false, false),
                     4);
    respond(t.gen, "ok");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
}
END_TEST

/* No memory for the interim answer: none is sent, and the response's
 * first bytes are the response's (they count as written). */
START_TEST(test_expect_continue_out_of_memory)
{
    sl_ticket_t t;

    UP(NULL);
    /* a fresh pump's cache is empty: the read buffer, the header array,
     * the head's copy and the executor's output buffer are new blocks;
     * the interim answer's cannot be */
    hb_fail_after(4);
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n"
                     "Expect: 100-continue\r\n\r\n");
    take_request(&t);
    hb_fail_after(-1);
    ck_assert_uint_eq(client.conn->tx.interim, 0);
    respond(t.gen, "ok");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
    ck_assert(client.conn->tx.wrote_any);
}
END_TEST

/* A body the app did not read is dropped, never taken for the next
 * request: what looks like a request inside it is body bytes. */
START_TEST(test_unread_body_closes)
{
    sl_ticket_t t;
    h_nactive_t none = {&pump, 0};
    char rest[66];

    UP(NULL);
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n"
                     "\r\nGET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    respond(t.gen, "no");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
    ck_assert_uint_eq(h_tickets(&pump), 0);
    /* the other 65 body bytes, then a real request */
    memset(rest, 'x', 65);
    rest[65] = '\0';
    h_sends(&client, rest);
    h_sends(&client, "GET /next HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_str_eq(url(), "/next");
    respond(t.gen, "yes");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
    close(client.fd);
    client.fd = -1;
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
}
END_TEST

/* A complete body the app ignored does not stop keep-alive. */
START_TEST(test_ignored_complete_body_keeps_alive)
{
    sl_ticket_t t;

    UP(NULL);
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
                     "\r\nabcGET /next HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert(h_run_until(&pump, body_done, client.conn));
    respond(t.gen, "1");
    take_request(&t);
    ck_assert_str_eq(url(), "/next");
}
END_TEST

static Suite *conn_body_suite(void)
{
    Suite *s = suite_create("conn_body");
    TCase *tc;

    tc = tcase_create("body");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_read_body);
    tcase_add_test(tc, test_no_body_reads_end);
    tcase_add_test(tc, test_chunked_body);
    tcase_add_test(tc, test_read_body_waits_for_bytes);
    tcase_add_test(tc, test_client_gone_mid_body);
    tcase_add_test(tc, test_chunked_body_over_limit);
    tcase_add_test(tc, test_streamed_chunked_body_over_limit);
    tcase_add_test(tc, test_body_window);
    tcase_add_test(tc, test_body_burst_in_one_pass);
    tcase_add_test(tc, test_expect_continue);
    tcase_add_test(tc, test_expect_continue_out_of_memory);
    tcase_add_test(tc, test_unread_body_closes);
    tcase_add_test(tc, test_ignored_complete_body_keeps_alive);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(conn_body_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
