/* test_wsgi.c - check suite for worker/wsgi.c: a response's framing
 * (Content-Length, chunked, close-delimited, HEAD, bodiless statuses)
 * and the app's own framing headers.
 *
 * The embedded interpreter runs one test app (APP in
 * tests/unit/wsgi_harness.h, which the test_wsgi*.c suites share). The
 * pump runs in inline mode, so sl_wsgi_handle() is called on the test
 * thread straight from the parser, as with SLUICE_INLINE=1; requests go
 * over a real loopback connection and the tests read the response bytes
 * the client received. Python starts once per process, so every test runs
 * forked and starts it in its fixture.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <regex.h>

#include "tests/unit/py_harness.h"
#include "tests/unit/wsgi_harness.h"
#include "worker/python/lane.h"
#include "worker/python/wsgi.h"

/* ------------------------------------------------------------------ */
/* framing                                                            */

START_TEST(test_hello)
{
    regex_t re;

    UP(NULL);
    get("/hello");
    ck_assert(strncmp(resp.head, "HTTP/1.1 200 OK\r\n", 17) == 0);
    ck_assert_str_eq(hdr("Content-Type"), "text/plain");
    ck_assert_str_eq(hdr("Content-Length"), "5");
    ck_assert_str_eq(hdr("Server"), "sluice");
    ck_assert_ptr_null(hdr("Transfer-Encoding"));
    ck_assert_ptr_null(hdr("Connection"));
    ck_assert_ptr_nonnull(hdr("Date"));
    ck_assert_int_eq(regcomp(&re,
                             "^[A-Z][a-z]{2}, [0-9]{2} [A-Z][a-z]{2} [0-9]{4} "
                             "[0-9]{2}:[0-9]{2}:[0-9]{2} GMT$",
                             REG_EXTENDED),
                     0);
    ck_assert(regexec(&re, v, 0, NULL, 0) == 0);
    regfree(&re);
    ck_assert_str_eq(resp.body, "hello");
    assert_kept_alive();
}
END_TEST

START_TEST(test_reason_phrase_kept)
{
    UP(NULL);
    get("/reason");
    ck_assert(strncmp(resp.head, "HTTP/1.1 404 Not Here\r\n", 23) == 0);
}
END_TEST

/* A list or tuple result gets an exact Content-Length. */
START_TEST(test_sequence_gets_content_length)
{
    UP(NULL);
    get("/parts");
    ck_assert_str_eq(hdr("Content-Length"), "3");
    ck_assert_str_eq(resp.body, "abc");
    get("/tup");
    ck_assert_str_eq(hdr("Content-Length"), "3");
    ck_assert_str_eq(resp.body, "xyz");
    assert_kept_alive();
}
END_TEST

/* Any other iterable streams: chunked on HTTP/1.1; an empty chunk from
 * the app does not end the body. */
START_TEST(test_iterable_is_chunked)
{
    UP(NULL);
    get("/gen");
    ck_assert(resp.chunked);
    ck_assert_str_eq(hdr("Transfer-Encoding"), "chunked");
    ck_assert_ptr_null(hdr("Content-Length"));
    ck_assert_str_eq(resp.body, "onetwo");
    assert_kept_alive();
}
END_TEST

START_TEST(test_empty_iterable)
{
    UP(NULL);
    get("/empty_gen");
    ck_assert_str_eq(hdr("Content-Length"), "0");
    ck_assert_str_eq(resp.body, "");
    assert_kept_alive();
}
END_TEST

/* HTTP/1.0 cannot chunk: the close ends the body. */
START_TEST(test_http10_iterable_is_close_delimited)
{
    UP(NULL);
    exchange("GET /gen HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    ck_assert(resp.closed);
    ck_assert_ptr_null(hdr("Content-Length"));
    ck_assert_ptr_null(hdr("Transfer-Encoding"));
    ck_assert_str_eq(hdr("Connection"), "close");
    ck_assert_str_eq(resp.body, "onetwo");
    ck_assert(strncmp(resp.head, "HTTP/1.1 200", 12) == 0);
}
END_TEST

START_TEST(test_http10_keep_alive)
{
    UP(NULL);
    exchange("GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    ck_assert_str_eq(hdr("Connection"), "keep-alive");
    ck_assert_str_eq(hdr("Content-Length"), "5");
    assert_kept_alive();
}
END_TEST

START_TEST(test_http10_default_close)
{
    UP(NULL);
    exchange("GET /hello HTTP/1.0\r\n\r\n");
    ck_assert_str_eq(resp.body, "hello");
    assert_closed();
}
END_TEST

/* HEAD: the GET's headers, no body bytes at all. */
START_TEST(test_head)
{
    UP(NULL);
    exchange("HEAD /hello HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(hdr("Content-Length"), "5");
    assert_kept_alive(); /* would read "hello" as a status line otherwise */
    exchange("HEAD /gen HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert_int_eq(resp.status, 200);
    ck_assert_ptr_null(hdr("Transfer-Encoding"));
    assert_kept_alive();
}
END_TEST

/* 1xx, 204 and 304 have no body and no framing headers. */
START_TEST(test_no_body_statuses)
{
    static const char *const paths[] = {"/status?204", "/status?304",
                                        "/status_gen?204", "/status_gen?304"};

    UP(NULL);
    get(paths[_i]);
    ck_assert_ptr_null(hdr("Content-Length"));
    ck_assert_ptr_null(hdr("Transfer-Encoding"));
    assert_kept_alive();
}
END_TEST

START_TEST(test_app_content_length_streams_unchunked)
{
    UP(NULL);
    get("/cl_gen");
    ck_assert(!resp.chunked);
    ck_assert_int_eq(h_header_count(resp.head, "Content-Length"), 1);
    ck_assert_str_eq(resp.body, "hello");
    assert_kept_alive();
}
END_TEST

/* Never more bytes than the app's Content-Length promised. */
START_TEST(test_app_content_length_truncates)
{
    UP(NULL);
    get("/cl_short");
    ck_assert_str_eq(resp.body, "hel");
    assert_kept_alive();
}
END_TEST

/* Fewer bytes than promised: only a close can end such a body. */
START_TEST(test_app_content_length_short_body_closes)
{
    UP(NULL);
    h_sends(&client, "GET /cl_long HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_ptr_nonnull(strstr(client.data, "\r\n\r\nhello"));
    ck_assert(strstr(client.data, "\r\n\r\nhello") + 9 ==
              client.data + client.len);
}
END_TEST

START_TEST(test_app_connection_close)
{
    UP(NULL);
    get("/conn_close");
    ck_assert_int_eq(h_header_count(resp.head, "Connection"), 1);
    assert_closed();
}
END_TEST

START_TEST(test_app_transfer_encoding_dropped)
{
    UP(NULL);
    get("/te");
    ck_assert_ptr_null(hdr("Transfer-Encoding"));
    ck_assert_str_eq(hdr("Content-Length"), "12");
    ck_assert_str_eq(resp.body, "framed by us");
    assert_kept_alive();
}
END_TEST

START_TEST(test_app_headers_kept)
{
    UP(NULL);
    get("/own_headers");
    ck_assert_int_eq(h_header_count(resp.head, "Server"), 1);
    ck_assert_str_eq(hdr("Server"), "mine");
    ck_assert_int_eq(h_header_count(resp.head, "Date"), 1);
    ck_assert_str_eq(hdr("Date"), "Thu, 01 Jan 1970 00:00:00 GMT");
    ck_assert_int_eq(h_header_count(resp.head, "Set-Cookie"), 2);
    ck_assert_ptr_nonnull(strstr(resp.head, "Set-Cookie: a=1\r\n"));
    ck_assert_ptr_nonnull(strstr(resp.head, "Set-Cookie: b=2\r\n"));
}
END_TEST

/* What the client received, watched from a thread of its own: once the
 * first block arrives it tells the app (which is waiting for that before
 * it yields the next block), through the app's threading.Event. */
typedef struct {
    int fd;
    char buf[4096];
    size_t len;
} watcher_t;

static void *watch_stream(void *arg)
{
    watcher_t *w = arg;
    bool told = false;

    while (w->len < sizeof(w->buf) - 1) {
        ssize_t n =
            recv(w->fd, w->buf + w->len, sizeof(w->buf) - 1 - w->len, 0);
        if (n <= 0)
            break;
        w->len += (size_t)n;
        w->buf[w->len] = '\0';
        /* only while the app still waits: it holds the GIL otherwise */
        if (!told && strstr(w->buf, "first") != NULL &&
            strstr(w->buf, "\r\n0\r\n\r\n") == NULL) {
            PyGILState_STATE gs = PyGILState_Ensure();
            PyRun_SimpleString("import testapp; testapp.seen.set()");
            PyGILState_Release(gs);
            told = true;
        }
        if (strstr(w->buf, "\r\n0\r\n\r\n") != NULL)
            break;
    }
    return NULL;
}

static bool served_one(void *arg)
{
    (void)arg;
    return pump.served == 1;
}

/* PEP 3333: each block the app yields goes to the client before the app
 * is asked for the next, even in inline mode. */
START_TEST(test_blocks_are_not_held_back)
{
    watcher_t w = {0};
    pthread_t th;
    struct timeval tv = {3, 0};

    UP(NULL);
    w.fd = client.fd;
    ck_assert_int_eq(
        setsockopt(client.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    ck_assert_int_eq(pthread_create(&th, NULL, watch_stream, &w), 0);
    h_sends(&client, "GET /stream HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_run_until(&pump, served_one, NULL));
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_msg(strstr(w.buf, "+seen") != NULL,
                  "the first block was held back: %s", w.buf);
}
END_TEST

/* Draining: every response says it is the last on its connection. */
START_TEST(test_draining_closes)
{
    UP(NULL);
    pump.drain.draining = true;
    pump.drain.stopping =
        true; /* keep the drain's own steps out of this test */
    get("/hello");
    ck_assert_str_eq(resp.body, "hello");
    assert_closed();
}
END_TEST

static Suite *wsgi_suite(void)
{
    Suite *s = suite_create("wsgi");
    TCase *tc;

    tc = tcase_create("framing");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_hello);
    tcase_add_test(tc, test_reason_phrase_kept);
    tcase_add_test(tc, test_sequence_gets_content_length);
    tcase_add_test(tc, test_iterable_is_chunked);
    tcase_add_test(tc, test_empty_iterable);
    tcase_add_test(tc, test_http10_iterable_is_close_delimited);
    tcase_add_test(tc, test_http10_keep_alive);
    tcase_add_test(tc, test_http10_default_close);
    tcase_add_test(tc, test_head);
    tcase_add_loop_test(tc, test_no_body_statuses, 0, 4);
    tcase_add_test(tc, test_app_content_length_streams_unchunked);
    tcase_add_test(tc, test_app_content_length_truncates);
    tcase_add_test(tc, test_app_content_length_short_body_closes);
    tcase_add_test(tc, test_app_connection_close);
    tcase_add_test(tc, test_app_transfer_encoding_dropped);
    tcase_add_test(tc, test_app_headers_kept);
    tcase_add_test(tc, test_blocks_are_not_held_back);
    tcase_add_test(tc, test_draining_closes);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(wsgi_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
