/* test_http_health.c - check suite for worker/loop/http.c: --health-path,
 * the loop's own answer to a health check, and what is not one.
 *
 * Request bytes go over a real loopback connection to a real pump (pump
 * mode), and the test looks at what the head recorded once the connection
 * hands the request to the executor, or at the response the loop wrote
 * instead. What the test_http*.c suites share is
 * tests/unit/http_harness.h.
 */
#include "config.h"

#include <check.h>
#include <regex.h>

#include "tests/unit/buf_faults.h"
#include "tests/unit/harness.h"
#include "tests/unit/http_harness.h"
#include "worker/loop/http.h"
#include "worker/loop/reqline.h"

/* A header list walks item by item, trimmed, empty items included. */
START_TEST(test_list_next)
{
    static const char v[] = " a, b\t,, c d ";
    const char *p = v, *item;
    size_t n = sizeof(v) - 1, len;
    const char *want[] = {"a", "b", "", "c d"};
    int i = 0;

    while (sl_http_list_next(&p, &n, &item, &len)) {
        ck_assert_int_lt(i, 4);
        ck_assert_uint_eq(len, strlen(want[i]));
        ck_assert(memcmp(item, want[i], len) == 0);
        i++;
    }
    ck_assert_int_eq(i, 4);
}
END_TEST

/* ------------------------------------------------------------------ */
/* --health-path                                                      */

START_TEST(test_health_ok)
{
    char v[64];

    h_options(&opt, "--health-path", "/healthz", NULL);
    ck_assert(!submit("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"));
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(resp.body, "OK\n");
    ck_assert_ptr_nonnull(h_header(resp.head, "Cache-Control", v, sizeof(v)));
    ck_assert_str_eq(v, "no-store");
    ck_assert_ptr_nonnull(h_header(resp.head, "Date", v, sizeof(v)));
    ck_assert_ptr_null(h_header(resp.head, "Connection", v, sizeof(v)));
    /* keep-alive: the same connection serves the next request */
    h_sends(&client, "GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
    ck_assert_uint_eq(h_tickets(&pump), 0);
}
END_TEST

/* No memory for the health answer: the connection closes rather than
 * leave the client waiting for an answer on a kept-alive connection. */
START_TEST(test_health_out_of_memory)
{
    h_options(&opt, "--health-path", "/healthz", NULL);
    up();
    /* the read buffer, the header array and the head's copy are new
     * blocks (a fresh pump's cache is empty); the answer's cannot be */
    hb_fail_after(3);
    h_sends(&client, "GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_wait_eof(&pump, &client));
    hb_fail_after(-1);
    ck_assert_uint_eq(client.len, 0);
    ck_assert_uint_eq(h_tickets(&pump), 0);
}
END_TEST

/* No memory for an error answer: the close alone says it. */
START_TEST(test_error_answer_out_of_memory)
{
    h_options(&opt, NULL);
    up();
    hb_fail_after(2); /* the read buffer and the header array */
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\nBad Header\r\n\r\n");
    ck_assert(h_wait_eof(&pump, &client));
    hb_fail_after(-1);
    ck_assert_uint_eq(client.len, 0);
    ck_assert_uint_eq(h_tickets(&pump), 0);
}
END_TEST

START_TEST(test_health_head_has_no_body)
{
    char v[64];

    h_options(&opt, "--health-path", "/healthz", NULL);
    ck_assert(!submit("HEAD /healthz HTTP/1.1\r\nHost: h\r\n\r\n"));
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(h_header(resp.head, "Content-Length", v, sizeof(v)), "3");
    h_sends(&client, "GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200); /* not body bytes of the HEAD */
    ck_assert_str_eq(resp.body, "OK\n");
}
END_TEST

START_TEST(test_health_fails_once_terminating)
{
    h_options(&opt, "--health-path", "/healthz", NULL);
    up();
    pump.drain.terminating = true;
    h_sends(&client, "GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 503);
    ck_assert_str_eq(resp.body, "draining\n");
    ck_assert_int_eq(h_header_count(resp.head, "Connection"), 1);
    ck_assert(strstr(resp.head, "Connection: keep-alive\r\n") != NULL);
}
END_TEST

START_TEST(test_health_http10_close)
{
    char v[64];

    h_options(&opt, "--health-path", "/healthz", NULL);
    ck_assert(!submit("GET /healthz HTTP/1.0\r\n\r\n"));
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(h_header(resp.head, "Connection", v, sizeof(v)), "close");
    ck_assert(h_wait_eof(&pump, &client));
}
END_TEST

/* Only GET and HEAD of exactly that path, without a body, are the health
 * check; everything else is the app's. */
START_TEST(test_not_health)
{
    static const char *const reqs[] = {
        "GET /healthz/ HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET /healthz?x=1 HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET /health HTTP/1.1\r\nHost: h\r\n\r\n",
        "DELETE /healthz HTTP/1.1\r\nHost: h\r\n\r\n",
        "POST /healthz HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nx",
    };

    h_options(&opt, "--health-path", "/healthz", NULL);
    ck_assert_msg(submit(reqs[_i]), "'%s' answered by the loop", reqs[_i]);
    ck_assert(!sl_http_is_health(&client.conn->x.req, pump.opt->health_path));
}
END_TEST

START_TEST(test_no_health_path)
{
    h_options(&opt, NULL);
    ck_assert(submit("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"));
    ck_assert(!sl_http_is_health(&client.conn->x.req, pump.opt->health_path));
}
END_TEST

static Suite *http_health_suite(void)
{
    Suite *s = suite_create("http_health");
    TCase *tc;

    tc = tcase_create("health");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_health_ok);
    tcase_add_test(tc, test_health_head_has_no_body);
    tcase_add_test(tc, test_health_fails_once_terminating);
    tcase_add_test(tc, test_health_http10_close);
    tcase_add_loop_test(tc, test_not_health, 0, 5);
    tcase_add_test(tc, test_no_health_path);
    tcase_add_test(tc, test_health_out_of_memory);
    tcase_add_test(tc, test_error_answer_out_of_memory);
    tcase_add_test(tc, test_list_next);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(http_health_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
