/* test_conn_refused.c - check suite for worker/loop/conn.c: requests the
 * loop refuses itself (400, 414, 431, the head's hard cap, bad chunks)
 * before the app sees them.
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
/* refused by the loop                                                */

static const struct {
    const char *name;
    const char *raw;
} bad_requests[] = {
    {"obs-fold", "GET / HTTP/1.1\r\nHost: h\r\nX-A: one\r\n two\r\n\r\n"},
    {"obs-fold-tab", "GET / HTTP/1.1\r\nHost: h\r\nX-A: one\r\n\ttwo\r\n\r\n"},
    {"ctl-in-value", "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\001b\r\n\r\n"},
    {"del-in-value", "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\177b\r\n\r\n"},
    {"nul-in-value", "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\0b\r\n\r\n"},
    {"cl-and-te", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
    {"te-and-cl", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                  "Content-Length: 5\r\n\r\n0\r\n\r\n"},
    {"two-cls", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                "Content-Length: 6\r\n\r\nhello!"},
    {"same-cl-twice", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                      "Content-Length: 5\r\n\r\nhello"},
    {"bad-chunk-size", "POST / HTTP/1.1\r\nHost: h\r\n"
                       "Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n"
                       "0\r\n\r\n"},
    {"chunk-too-long", "POST / HTTP/1.1\r\nHost: h\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n"
                       "0\r\n\r\n"},
    {"space-in-name", "GET / HTTP/1.1\r\nHost: h\r\nBad Name: v\r\n\r\n"},
    {"garbage", "GARBAGE\r\n\r\n"},
    {"bare-lf-in-value", "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\nb\r\n\r\n"},
    {"te-not-chunked", "POST / HTTP/1.1\r\nHost: h\r\n"
                       "Transfer-Encoding: gzip\r\n\r\nabc"},
    {"te-chunked-not-last", "POST / HTTP/1.1\r\nHost: h\r\n"
                            "Transfer-Encoding: chunked, gzip\r\n\r\n"
                            "3\r\nabc\r\n0\r\n\r\n"},
    {"plus-content-length", "POST / HTTP/1.1\r\nHost: h\r\n"
                            "Content-Length: +3\r\n\r\nabc"},
};

START_TEST(test_bad_request_is_400)
{
    UP(NULL);
    /* strlen() would stop at the NUL of "nul-in-value" */
    const char *raw = bad_requests[_i].raw;
    size_t n = strlen(raw);
    if (strcmp(bad_requests[_i].name, "nul-in-value") == 0)
        n = strlen(raw) + 1 + strlen(raw + strlen(raw) + 1);
    h_send(&client, raw, n);
    h_sends(&client, "GET /after HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert_msg(h_response(&pump, &client, &resp, false),
                  "%s: no response (state %d)", bad_requests[_i].name,
                  client.conn->state);
    ck_assert_msg(resp.status == 400, "%s: got %d", bad_requests[_i].name,
                  resp.status);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(client.len, 0);
    ck_assert_uint_eq(h_tickets(&pump), 0);
}
END_TEST

/* A request line longer than --limit-request-line: 414. */
START_TEST(test_request_line_too_long)
{
    char raw[512];

    UP("--limit-request-line", "100", NULL);
    snprintf(raw, sizeof(raw), "GET /%0200d HTTP/1.1\r\nHost: h\r\n\r\n", 0);
    assert_refused(raw, 414);
}
END_TEST

/* The limit is on the request line: a line of exactly the limit passes,
 * one byte more does not, whatever the method's length. */
START_TEST(test_request_line_at_limit)
{
    char raw[512], path[128];
    sl_ticket_t t;

    UP("--limit-request-line", "100", NULL);
    /* "GET " + path + " HTTP/1.1" = 100 bytes */
    memset(path, 'a', sizeof(path));
    path[0] = '/';
    path[100 - 13] = '\0';
    snprintf(raw, sizeof(raw), "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", path);
    ck_assert_uint_eq(strstr(raw, "\r\n") - raw, 100);
    h_sends(&client, raw);
    take_request(&t);
    ck_assert_str_eq(url(), path);
}
END_TEST

START_TEST(test_request_line_over_limit_by_one)
{
    char raw[512], path[128];

    UP("--limit-request-line", "100", NULL);
    memset(path, 'a', sizeof(path));
    path[0] = '/';
    path[101 - 13] = '\0';
    snprintf(raw, sizeof(raw), "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", path);
    assert_refused(raw, 414);
}
END_TEST

/* --help: "longest request line, 0 = 8190". */
START_TEST(test_request_line_limit_zero_means_8190)
{
    static char raw[10000];

    UP("--limit-request-line", "0", NULL);
    snprintf(raw, sizeof(raw), "GET /%09000d HTTP/1.1\r\nHost: h\r\n\r\n", 0);
    assert_refused(raw, 414);
}
END_TEST

START_TEST(test_too_many_headers)
{
    UP("--limit-request-fields", "3", NULL);
    assert_refused("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n",
                   431);
}
END_TEST

START_TEST(test_headers_at_field_limit)
{
    sl_ticket_t t;

    UP("--limit-request-fields", "3", NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n");
    take_request(&t);
    ck_assert_int_eq(client.conn->x.req.nhdrs, 3);
}
END_TEST

/* --help: "most header fields, 0 = 32768". */
START_TEST(test_field_limit_zero_means_32768)
{
    sl_ticket_t t;

    UP("--limit-request-fields", "0", NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n");
    take_request(&t);
    ck_assert_int_eq(client.conn->x.req.nhdrs, 3);
}
END_TEST

START_TEST(test_header_field_too_big)
{
    char raw[512];

    UP("--limit-request-field-size", "50", NULL);
    /* name 5 + value 46 = 51: the limit counts name and value */
    snprintf(raw, sizeof(raw),
             "GET / HTTP/1.1\r\nHost: h\r\nX-Big: %046d\r\n\r\n", 0);
    assert_refused(raw, 431);
}
END_TEST

START_TEST(test_header_field_at_size_limit)
{
    char raw[512];
    sl_ticket_t t;

    UP("--limit-request-field-size", "50", NULL);
    /* name 5 + value 45 = 50 */
    snprintf(raw, sizeof(raw),
             "GET / HTTP/1.1\r\nHost: h\r\nX-Big: %045d\r\n\r\n", 0);
    h_sends(&client, raw);
    take_request(&t);
    ck_assert_int_eq(strlen(hdr_value(1)), 45);
}
END_TEST

START_TEST(test_huge_header_name_is_431)
{
    static char raw[20000];

    UP("--limit-request-field-size", "100", NULL);
    memset(raw, 0, sizeof(raw));
    strcpy(raw, "GET / HTTP/1.1\r\nHost: h\r\nX");
    memset(raw + strlen(raw), 'n', 300);
    strcat(raw, ": v\r\n\r\n");
    assert_refused(raw, 431);
}
END_TEST

/* Send N bytes without blocking while the loop runs, until all are sent
 * or the loop stops reading a head (it answered it, or dispatched it). */
static void feed(const char *data, size_t n)
{
    double end = h_now() + H_DEADLINE;
    size_t at = 0;

    while (at < n && client.conn->state == SL_CONN_READING && h_now() < end) {
        ssize_t w =
            send(client.fd, data + at, n - at, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0)
            at += (size_t)w;
        else if (errno != EAGAIN && errno != EWOULDBLOCK)
            break;
        ev_run(pump.loop, EVRUN_NOWAIT);
    }
}

static bool answered_or_serving(void *arg)
{
    sl_conn_t *c = arg;

    h_pull(&client);
    return c->state == SL_CONN_SERVING || client.len > 0 || client.eof;
}

/* Without a per-field limit, a head is still capped as a whole (4 MB). */
START_TEST(test_head_hard_cap)
{
    enum { SIZE = 5 * 1024 * 1024 };
    static char raw[SIZE];
    const char *start = "GET / HTTP/1.1\r\nHost: h\r\nX-Huge: ";

    UP("--limit-request-field-size", "0", NULL);
    memset(raw, 'v', SIZE);
    memcpy(raw, start, strlen(start));
    memcpy(raw + SIZE - 4, "\r\n\r\n", 4);
    feed(raw, SIZE);
    ck_assert(h_run_until(&pump, answered_or_serving, client.conn));
    ck_assert_msg(client.conn->state != SL_CONN_SERVING,
                  "a %d-byte head reached the app (rbuf holds %zu bytes)", SIZE,
                  client.conn->rbuf.len);
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 431);
}
END_TEST

/* A bad chunk in the packet that carries the head: the app never runs. */
START_TEST(test_bad_first_chunk_never_reaches_app)
{
    UP(NULL);
    assert_refused("POST / HTTP/1.1\r\nHost: h\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n5\r\nhelloXX\r\n",
                   400);
}
END_TEST

static bool has_error(void *arg)
{
    sl_conn_t *c = arg;

    return c->h1.http_error != 0;
}

/* A bad chunk after the app began: it sees the body end with an error,
 * and the client gets a 400 instead of the app's unsent answer. */
START_TEST(test_bad_later_chunk_is_400)
{
    sl_ticket_t t;
    char buf[64];
    sl_conn_t *c;

    UP(NULL);
    c = client.conn;
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
    take_request(&t);
    ck_assert(h_run_until(&pump, body_pending, c));
    ck_assert_int_eq(
        sl_exch_read_body(&c->x, t.gen, buf, sizeof(buf), false, false), 3);
    h_sends(&client, "zz\r\n");
    ck_assert(h_run_until(&pump, has_error, c));
    ck_assert_int_eq(c->h1.http_error, 400);
    ck_assert(c->x.aborted);
    ck_assert_int_eq(
        sl_exch_read_body(&c->x, t.gen, buf, sizeof(buf), false, false), -1);
    ck_assert_int_eq(send_str(t.gen, "HTTP/1.1 200 OK\r\n\r\n", SL_SEND_END),
                     -1);
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 400);
    ck_assert(h_wait_eof(&pump, &client));
}
END_TEST

static Suite *conn_refused_suite(void)
{
    Suite *s = suite_create("conn_refused");
    TCase *tc;

    tc = tcase_create("refused");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_bad_request_is_400, 0,
                        sizeof(bad_requests) / sizeof(bad_requests[0]));
    tcase_add_test(tc, test_request_line_too_long);
    tcase_add_test(tc, test_request_line_at_limit);
    tcase_add_test(tc, test_request_line_over_limit_by_one);
    tcase_add_test(tc, test_request_line_limit_zero_means_8190);
    tcase_add_test(tc, test_too_many_headers);
    tcase_add_test(tc, test_headers_at_field_limit);
    tcase_add_test(tc, test_field_limit_zero_means_32768);
    tcase_add_test(tc, test_header_field_too_big);
    tcase_add_test(tc, test_header_field_at_size_limit);
    tcase_add_test(tc, test_huge_header_name_is_431);
    tcase_add_test(tc, test_head_hard_cap);
    tcase_add_test(tc, test_bad_first_chunk_never_reaches_app);
    tcase_add_test(tc, test_bad_later_chunk_is_400);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(conn_refused_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
