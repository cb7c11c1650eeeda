/* test_http.c - check suite for worker/loop/http.c.
 *
 * sl_http_head_complete() is driven the way the worker drives it: request
 * bytes go over a real loopback connection to a real pump (pump mode), and
 * the test looks at what the head recorded once the connection hands the
 * request to the executor, or at the response the loop wrote instead. The
 * pure helpers (reason phrases, name compare, the heads the loop writes)
 * are called directly. --health-path is test_http_health.c's, the request
 * line and RFC 9110/9112 conformance test_http_conformance.c's; what the
 * three share is tests/unit/http_harness.h.
 */
#include "config.h"

#include <check.h>
#include <regex.h>

#include "tests/unit/buf_faults.h"
#include "tests/unit/harness.h"
#include "tests/unit/http_harness.h"
#include "worker/loop/http.h"
#include "worker/loop/reqline.h"

/* ------------------------------------------------------------------ */
/* pure helpers                                                       */

START_TEST(test_name_is)
{
    ck_assert(sl_http_name_is("Content-Length", 14, "content-length"));
    ck_assert(sl_http_name_is("HOST", 4, "host"));
    ck_assert(sl_http_name_is("host", 4, "host"));
    ck_assert(!sl_http_name_is("hos", 3, "host"));
    ck_assert(!sl_http_name_is("hostx", 5, "host"));
    ck_assert(!sl_http_name_is("hosT2", 4, "host2")); /* length is N */
    ck_assert(sl_http_name_is("hosT2", 4, "host"));
    ck_assert(!sl_http_name_is("X_Host", 6, "x-host"));
    ck_assert(sl_http_name_is("", 0, ""));
}
END_TEST

START_TEST(test_common_index)
{
    int i;

    ck_assert_int_eq(sl_http_common_index("Host", 4), 0);
    ck_assert_int_eq(sl_http_common_index("CONTENT-length", 14),
                     sl_http_common_index("content-length", 14));
    ck_assert_int_ge(sl_http_common_index("te", 2), 0);
    ck_assert_int_eq(sl_http_common_index("hos", 3), -1);
    ck_assert_int_eq(sl_http_common_index("hostx", 5), -1);
    ck_assert_int_eq(sl_http_common_index("x-custom", 8), -1);
    ck_assert_int_eq(sl_http_common_index("", 0), -1);
    /* every name is found at its own index, so none shadows another */
    for (i = 0; i < SL_HTTP_NCOMMON; i++)
        ck_assert_int_eq(sl_http_common_index(sl_http_common_names[i],
                                              strlen(sl_http_common_names[i])),
                         i);
}
END_TEST

static void check_target(const char *url, const char *path, const char *query)
{
    sl_target_t t;

    sl_http_target(url, strlen(url), &t);
    ck_assert_msg(
        t.path_len == strlen(path) && memcmp(t.path, path, t.path_len) == 0,
        "%s: path '%.*s', want '%s'", url, (int)t.path_len, t.path, path);
    if (query == NULL) {
        ck_assert_msg(t.query == NULL, "%s: unexpected query", url);
    } else {
        ck_assert_msg(t.query != NULL && t.query_len == strlen(query) &&
                          memcmp(t.query, query, t.query_len) == 0,
                      "%s: query wrong, want '%s'", url, query);
    }
}

START_TEST(test_target)
{
    check_target("/a/b?x=1", "/a/b", "x=1");
    check_target("/a", "/a", NULL);
    check_target("/a?", "/a", "");
    check_target("/a#frag?no", "/a", NULL);
    check_target("/a?x#f", "/a", "x");
    check_target("*", "*", NULL);
    check_target("http://h:8/p/q?x=1", "/p/q", "x=1");
    check_target("http://h", "/", NULL);
    check_target("http://h?x=/y", "/", "x=/y");
    check_target("http://h#f", "/", NULL);
}
END_TEST

/* "METHOD url" for the log, cut to the buffer, always terminated. */
START_TEST(test_log_name)
{
    static char url[] = "/a/path?q=1";
    sl_req_t r = {.method = HTTP_GET, .url_len = 11};
    char buf[32];

    r.hbuf.data = url;
    ck_assert_uint_eq(sl_http_log_name(&r, buf, sizeof(buf)), 15);
    ck_assert_str_eq(buf, "GET /a/path?q=1");
    ck_assert_uint_eq(sl_http_log_name(&r, buf, 8), 7);
    ck_assert_str_eq(buf, "GET /a/");
    ck_assert_uint_eq(sl_http_log_name(&r, buf, 4), 3);
    ck_assert_str_eq(buf, "GET");
    ck_assert_uint_eq(sl_http_log_name(&r, buf, 3), 2);
    ck_assert_str_eq(buf, "GE");
    ck_assert_uint_eq(sl_http_log_name(&r, buf, 1), 0);
    ck_assert_str_eq(buf, "");
    buf[0] = 'x';
    ck_assert_uint_eq(sl_http_log_name(&r, buf, 0), 0);
    ck_assert_int_eq(buf[0], 'x'); /* no room: untouched */
    r.method = HTTP_MSEARCH;
    r.url_off = 3;
    r.url_len = 4;
    sl_http_log_name(&r, buf, sizeof(buf));
    ck_assert_str_eq(buf, "M-SEARCH path");
}
END_TEST

START_TEST(test_reason)
{
    ck_assert_str_eq(sl_http_reason(200), "OK");
    ck_assert_str_eq(sl_http_reason(400), "Bad Request");
    ck_assert_str_eq(sl_http_reason(408), "Request Timeout");
    ck_assert_str_eq(sl_http_reason(413), "Content Too Large");
    ck_assert_str_eq(sl_http_reason(414), "URI Too Long");
    ck_assert_str_eq(sl_http_reason(417), "Expectation Failed");
    ck_assert_str_eq(sl_http_reason(431), "Request Header Fields Too Large");
    ck_assert_str_eq(sl_http_reason(500), "Internal Server Error");
    ck_assert_str_eq(sl_http_reason(503), "Service Unavailable");
    ck_assert_str_eq(sl_http_reason(505), "HTTP Version Not Supported");
    ck_assert_str_eq(sl_http_reason(299), "Unknown");
    ck_assert_str_eq(sl_http_reason(0), "Unknown");
}
END_TEST

/* Every status the loop answers by itself gets a complete, well-framed
 * response: status line, Server, the cached Date, a body as long as its
 * Content-Length, and Connection: close. */
START_TEST(test_error_head)
{
    static const int codes[] = {400, 408, 413, 414, 417, 431, 500, 505};
    regex_t re;

    h_options(&opt, NULL);
    ck_assert_int_eq(sl_pump_init(&pump, &opt, h_exec, NULL, 0), 0);
    ck_assert_int_eq(
        regcomp(&re,
                "^HTTP/1\\.1 [0-9]{3} [A-Za-z ]+\r\n"
                "Server: sluice\r\n"
                "Date: [A-Z][a-z]{2}, [0-9]{2} [A-Z][a-z]{2} [0-9]{4} "
                "[0-9]{2}:[0-9]{2}:[0-9]{2} GMT\r\n"
                "Content-Type: text/plain; charset=utf-8\r\n"
                "Content-Length: [0-9]+\r\n"
                "Connection: close\r\n\r\n",
                REG_EXTENDED),
        0);
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        sl_buf_t b = {0};
        char line[64], want_body[64];
        const char *body;

        sl_http_error_head(&b, codes[i]);
        ck_assert(sl_buf_append(&b, "", 1) == 0);
        ck_assert_msg(regexec(&re, b.data, 0, NULL, 0) == 0, "bad head: %s",
                      b.data);
        snprintf(line, sizeof(line), "HTTP/1.1 %d %s\r\n", codes[i],
                 sl_http_reason(codes[i]));
        ck_assert(strncmp(b.data, line, strlen(line)) == 0);
        body = strstr(b.data, "\r\n\r\n") + 4;
        snprintf(want_body, sizeof(want_body), "%s\n",
                 sl_http_reason(codes[i]));
        ck_assert_str_eq(body, want_body);
        ck_assert_int_eq(h_header_count(b.data, "Content-Length"), 1);
        ck_assert_uint_eq(
            strtoul(strstr(b.data, "Content-Length: ") + 16, NULL, 10),
            strlen(body));
        sl_buf_free(&b);
    }
    regfree(&re);
    sl_pump_destroy(&pump);
}
END_TEST

START_TEST(test_error_head_appends)
{
    sl_buf_t b = {0};

    ck_assert(sl_buf_append(&b, "keep", 4) == 0);
    sl_http_error_head(&b, 400);
    ck_assert(b.len > 4);
    ck_assert(memcmp(b.data, "keepHTTP/1.1 400 Bad Request\r\n", 30) == 0);
    sl_buf_free(&b);
}
END_TEST

/* Out of memory: nothing appended, and the caller is told. */
START_TEST(test_error_head_out_of_memory)
{
    sl_buf_t b = {0};

    hb_fail_after(0);
    ck_assert_int_eq(sl_http_error_head(&b, 500), -1);
    ck_assert_uint_eq(b.len, 0);
    hb_fail_after(-1);
    ck_assert_int_eq(sl_http_error_head(&b, 500), 0);
    ck_assert(b.len > 0);
    sl_buf_free(&b);
}
END_TEST

/* ------------------------------------------------------------------ */
/* what a head records                                                */

START_TEST(test_get_head)
{
    h_options(&opt, NULL);
    ck_assert(submit("GET /a/b?x=1&y=2 HTTP/1.1\r\n"
                     "Host: example.com\r\n"
                     "User-Agent: t/1.0\r\n"
                     "X-Empty:\r\n"
                     "\r\n"));
    ck_assert_int_eq(req()->method, HTTP_GET);
    ck_assert_int_eq(req()->major, 1);
    ck_assert_int_eq(req()->minor, 1);
    assert_url("/a/b?x=1&y=2");
    ck_assert_int_eq(req()->nhdrs, 3);
    assert_hdr(0, "Host", "example.com");
    assert_hdr(1, "User-Agent", "t/1.0");
    assert_hdr(2, "X-Empty", "");
    ck_assert(req()->keep_alive);
    ck_assert(!req()->has_body);
    ck_assert(!req()->chunked);
    ck_assert(!req()->head);
    ck_assert(!req()->expect_continue);
    ck_assert_int_eq(client.conn->h1.http_error, 0);
}
END_TEST

START_TEST(test_values_are_trimmed)
{
    h_options(&opt, NULL);
    ck_assert(submit("GET / HTTP/1.1\r\nHost: h\r\n"
                     "X-Pad:   padded \t \r\n"
                     "X-In: a  b\r\n\r\n"));
    assert_hdr(1, "X-Pad", "padded");
    assert_hdr(2, "X-In", "a  b");
}
END_TEST

START_TEST(test_head_method)
{
    h_options(&opt, NULL);
    ck_assert(submit("HEAD /h HTTP/1.1\r\nHost: h\r\n\r\n"));
    ck_assert_int_eq(req()->method, HTTP_HEAD);
    ck_assert(req()->head);
}
END_TEST

START_TEST(test_content_length_body)
{
    h_options(&opt, NULL);
    ck_assert(submit("POST /p HTTP/1.1\r\nHost: h\r\n"
                     "Content-Length: 11\r\n\r\nhello world"));
    ck_assert_int_eq(req()->method, HTTP_POST);
    ck_assert(req()->has_body);
    ck_assert(!req()->chunked);
    ck_assert_uint_eq(req()->content_length, 11);
}
END_TEST

START_TEST(test_zero_content_length_is_no_body)
{
    h_options(&opt, NULL);
    ck_assert(submit("POST /p HTTP/1.1\r\nHost: h\r\n"
                     "Content-Length: 0\r\n\r\n"));
    ck_assert(!req()->has_body);
    ck_assert_uint_eq(req()->content_length, 0);
}
END_TEST

START_TEST(test_chunked_body)
{
    h_options(&opt, NULL);
    ck_assert(submit("POST /p HTTP/1.1\r\nHost: h\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n"));
    ck_assert(req()->has_body);
    ck_assert(req()->chunked);
}
END_TEST

START_TEST(test_keep_alive_rules)
{
    h_options(&opt, NULL);
    ck_assert(submit("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"));
    ck_assert(!req()->keep_alive);
}
END_TEST

START_TEST(test_http10_closes_by_default)
{
    h_options(&opt, NULL);
    ck_assert(submit("GET / HTTP/1.0\r\n\r\n")); /* no Host needed */
    ck_assert_int_eq(req()->minor, 0);
    ck_assert(!req()->keep_alive);
}
END_TEST

START_TEST(test_http10_keep_alive_when_asked)
{
    h_options(&opt, NULL);
    ck_assert(submit("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    ck_assert(req()->keep_alive);
}
END_TEST

START_TEST(test_expect_continue)
{
    h_options(&opt, NULL);
    ck_assert(submit("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
                     "Expect: 100-Continue\r\n\r\n"));
    ck_assert(req()->expect_continue);
}
END_TEST

START_TEST(test_expect_continue_ignored_on_http10)
{
    h_options(&opt, NULL);
    ck_assert(submit("POST / HTTP/1.0\r\nContent-Length: 3\r\n"
                     "Expect: 100-continue\r\n\r\n"));
    ck_assert(!req()->expect_continue);
}
END_TEST

START_TEST(test_body_at_limit_is_accepted)
{
    h_options(&opt, "--limit-request-body", "10", NULL);
    ck_assert(submit("POST / HTTP/1.1\r\nHost: h\r\n"
                     "Content-Length: 10\r\n\r\n0123456789"));
    ck_assert_uint_eq(req()->content_length, 10);
}
END_TEST

/* The head is copied out of the read buffer: pipelined bytes read after
 * it cannot change what the executor sees. */
START_TEST(test_head_survives_read_buffer_reuse)
{
    sl_conn_t *c;

    h_options(&opt, NULL);
    ck_assert(submit("GET /first HTTP/1.1\r\nHost: one\r\n\r\n"));
    c = client.conn;
    ck_assert_ptr_ne(c->x.req.hbuf.data, c->rbuf.data);
    memset(c->rbuf.data, 'Z', c->rbuf.len);
    assert_url("/first");
    assert_hdr(0, "Host", "one");
}
END_TEST

/* ------------------------------------------------------------------ */
/* what a head is refused for                                         */

START_TEST(test_missing_host_on_http11)
{
    assert_refused("GET / HTTP/1.1\r\nX-A: b\r\n\r\n", 400);
}
END_TEST

START_TEST(test_two_hosts)
{
    assert_refused("GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 400);
}
END_TEST

START_TEST(test_unknown_expectation)
{
    assert_refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n"
                   "Expect: 200-ok\r\n\r\nx",
                   417);
}
END_TEST

START_TEST(test_http_version_2)
{
    h_options(&opt, NULL);
    ck_assert(!submit("GET / HTTP/2.0\r\nHost: a\r\n\r\n"));
    ck_assert_int_eq(resp.status, 505);
}
END_TEST

START_TEST(test_content_length_over_limit)
{
    h_options(&opt, "--limit-request-body", "10", NULL);
    /* refused from the head alone: the body is never sent */
    ck_assert(!submit("POST / HTTP/1.1\r\nHost: h\r\n"
                      "Content-Length: 11\r\n\r\n"));
    ck_assert_int_eq(resp.status, 413);
    ck_assert_str_eq(resp.body, "Content Too Large\n");
}
END_TEST

/* The metrics read a response's status from its first bytes. */
START_TEST(test_status_of)
{
    ck_assert_int_eq(sl_http_status_of("HTTP/1.1 404 Not Found\r\n", 24), 404);
    ck_assert_int_eq(sl_http_status_of("HTTP/1.0 200 OK\r\n", 17), 200);
    ck_assert_int_eq(sl_http_status_of("HTTP/1.1 101 ", 13), 101);
    ck_assert_int_eq(sl_http_status_of("HTTP/1.1 20", 11), 0); /* short */
    ck_assert_int_eq(sl_http_status_of("HTTP/2.0 200 OK", 15), 0);
    ck_assert_int_eq(sl_http_status_of("HTTP/1.1 2x0 OK", 15), 0);
    ck_assert_int_eq(sl_http_status_of("\x81\x05hello world", 13), 0);
}
END_TEST

static Suite *http_suite(void)
{
    Suite *s = suite_create("http");
    TCase *tc;

    tc = tcase_create("helpers");
    tcase_add_test(tc, test_name_is);
    tcase_add_test(tc, test_common_index);
    tcase_add_test(tc, test_status_of);
    tcase_add_test(tc, test_target);
    tcase_add_test(tc, test_log_name);
    tcase_add_test(tc, test_reason);
    tcase_add_test(tc, test_error_head);
    tcase_add_test(tc, test_error_head_appends);
    tcase_add_test(tc, test_error_head_out_of_memory);
    suite_add_tcase(s, tc);

    tc = tcase_create("head");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_get_head);
    tcase_add_test(tc, test_values_are_trimmed);
    tcase_add_test(tc, test_head_method);
    tcase_add_test(tc, test_content_length_body);
    tcase_add_test(tc, test_zero_content_length_is_no_body);
    tcase_add_test(tc, test_chunked_body);
    tcase_add_test(tc, test_keep_alive_rules);
    tcase_add_test(tc, test_http10_closes_by_default);
    tcase_add_test(tc, test_http10_keep_alive_when_asked);
    tcase_add_test(tc, test_expect_continue);
    tcase_add_test(tc, test_expect_continue_ignored_on_http10);
    tcase_add_test(tc, test_body_at_limit_is_accepted);
    tcase_add_test(tc, test_head_survives_read_buffer_reuse);
    suite_add_tcase(s, tc);

    tc = tcase_create("refused");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_missing_host_on_http11);
    tcase_add_test(tc, test_two_hosts);
    tcase_add_test(tc, test_unknown_expectation);
    tcase_add_test(tc, test_http_version_2);
    tcase_add_test(tc, test_content_length_over_limit);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(http_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
