/* test_wsgi_app.c - check suite for worker/wsgi.c: start_response,
 * write() and the app's errors, the result's close(), and
 * wsgi.file_wrapper.
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

/* A 500 from the server itself, the app's error logged with WHAT. */
static void assert_500(const char *what)
{
    ck_assert_int_eq(resp.status, 500);
    ck_assert_str_eq(resp.body, "Internal Server Error\n");
    assert_closed();
    ck_assert_msg(strstr(hp_log_text(), what) != NULL, "'%s' not in log: %s",
                  what, hp_log_text());
}

/* ------------------------------------------------------------------ */
/* start_response, write() and errors                                 */

START_TEST(test_exception_before_headers_is_500)
{
    UP(NULL);
    get("/raise_early");
    assert_500("ZeroDivisionError");
    ck_assert_ptr_nonnull(strstr(hp_log_text(), "GET /raise_early"));
    ck_assert_ptr_null(PyErr_Occurred());
}
END_TEST

/* After the head left, an error can only cut the response short: no
 * final chunk, and the connection closes. */
START_TEST(test_exception_after_headers_truncates)
{
    UP(NULL);
    h_sends(&client, "GET /raise_late HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert(strncmp(client.data, "HTTP/1.1 200 OK\r\n", 17) == 0);
    ck_assert_ptr_nonnull(strstr(client.data, "7\r\npartial\r\n"));
    ck_assert_ptr_null(strstr(client.data, "\r\n0\r\n\r\n"));
    ck_assert_ptr_nonnull(strstr(hp_log_text(), "KeyError"));
}
END_TEST

START_TEST(test_start_response_twice_is_an_error)
{
    UP(NULL);
    get("/twice");
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(resp.body, "RuntimeError");
}
END_TEST

/* exc_info before anything was sent: the new status and headers win. */
START_TEST(test_exc_info_replaces_head)
{
    UP(NULL);
    get("/exc_early");
    ck_assert(strncmp(resp.head, "HTTP/1.1 500 Oops\r\n", 19) == 0);
    ck_assert_ptr_null(hdr("X-First"));
    ck_assert_str_eq(hdr("X-Second"), "1");
    ck_assert_str_eq(resp.body, "error page");
}
END_TEST

/* exc_info after the head was sent: start_response re-raises it. */
START_TEST(test_exc_info_after_head_reraises)
{
    UP(NULL);
    get("/exc_late");
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(resp.body, "sent+reraised");
}
END_TEST

static const struct {
    const char *path;
    const char *logged;
} app_errors[] = {
    {"/bad_status", "bad status"},
    {"/bytes_status", "status must be str"},
    {"/crlf_header", "bad header"},
    {"/colon_name", "bad header"},
    {"/space_name", "bad header"},
    {"/non_latin1_header", "not latin-1"},
    {"/tuple_headers", "headers must be a list"},
    {"/bad_cl", "bad Content-Length"},
    {"/str_result", "must hold bytes"},
    {"/str_gen", "yielded str"},
    {"/no_sr", "without calling start_response"},
};

/* What the app got wrong becomes a 500, logged, never a broken head. */
START_TEST(test_app_mistakes_are_500)
{
    UP(NULL);
    get(app_errors[_i].path);
    ck_assert_ptr_null(strstr(resp.head, "Injected"));
    assert_500(app_errors[_i].logged);
}
END_TEST

/* The write() callable: bytes go out before the result's, chunked. */
START_TEST(test_write_callable)
{
    UP(NULL);
    get("/write");
    ck_assert(resp.chunked);
    ck_assert_str_eq(resp.body, "abc");
    assert_kept_alive();
}
END_TEST

START_TEST(test_write_wants_bytes)
{
    UP(NULL);
    get("/write_str");
    ck_assert_str_eq(resp.body, "TypeError");
}
END_TEST

/* A write() callable kept past its request (say, by a thread the app
 * left running) must not write into the next request on the lane. */
START_TEST(test_stale_write_callable)
{
    UP(NULL);
    get("/keep_write");
    ck_assert_str_eq(resp.body, "first");
    get("/stale_write");
    ck_assert_int_eq(resp.status, 200);
    ck_assert_msg(strstr(resp.body, "LEAK") == NULL,
                  "request 1's write() wrote into request 2: '%s'", resp.body);
}
END_TEST

/* close() of the result is called once the response is done. */
START_TEST(test_result_close_called)
{
    UP(NULL);
    get("/closing");
    ck_assert_str_eq(resp.body, "ab");
    ck_assert_str_eq(hp_eval("testapp", "state['closed']"), "1");
    get("/raise_early");
    ck_assert_str_eq(hp_eval("testapp", "state['closed']"), "1");
}
END_TEST

/* ------------------------------------------------------------------ */
/* wsgi.file_wrapper                                                  */

static char file_path[] = "/tmp/sl-test-wsgi-XXXXXX";

static void make_file(const char *content)
{
    int fd = mkstemp(file_path);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, content, strlen(content)), strlen(content));
    close(fd);
}

static void get_file(const char *route)
{
    char path[256];

    snprintf(path, sizeof(path), "/%s?%s", route, file_path);
    get(path);
    unlink(file_path);
}

START_TEST(test_file_wrapper_sendfile)
{
    UP(NULL);
    make_file("the file's contents\n");
    get_file("file");
    ck_assert_str_eq(hdr("Content-Length"), "20");
    ck_assert_str_eq(resp.body, "the file's contents\n");
    /* the wrapper closed the app's file object */
    ck_assert_str_eq(hp_eval("testapp", "state['file'].closed"), "True");
    assert_kept_alive();
}
END_TEST

START_TEST(test_file_wrapper_respects_position)
{
    UP(NULL);
    make_file("0123456789");
    get_file("file_seek");
    ck_assert_str_eq(hdr("Content-Length"), "7");
    ck_assert_str_eq(resp.body, "3456789");
    assert_kept_alive();
}
END_TEST

START_TEST(test_file_wrapper_app_content_length)
{
    UP(NULL);
    make_file("0123456789");
    get_file("file_cl");
    ck_assert_str_eq(hdr("Content-Length"), "4");
    ck_assert_str_eq(resp.body, "0123");
    assert_kept_alive();
}
END_TEST

START_TEST(test_file_wrapper_head)
{
    char raw[256];

    UP(NULL);
    make_file("0123456789");
    snprintf(raw, sizeof(raw), "HEAD /file?%s HTTP/1.1\r\nHost: h\r\n\r\n",
             file_path);
    exchange(raw);
    unlink(file_path);
    ck_assert_str_eq(hdr("Content-Length"), "10");
    assert_kept_alive();
}
END_TEST

/* write() began a chunked body: the file goes out in chunks too, never
 * raw behind them. */
START_TEST(test_file_wrapper_after_write)
{
    UP(NULL);
    make_file("from the file");
    get_file("file_after_write");
    ck_assert(resp.chunked);
    ck_assert_str_eq(resp.body, "written;from the file");
    assert_kept_alive();
}
END_TEST

/* Not a real file: iterated with the block size, and closed. */
START_TEST(test_file_wrapper_without_fileno)
{
    UP(NULL);
    get("/file_bytesio");
    ck_assert(resp.chunked);
    ck_assert_str_eq(resp.body, "0123456789");
    ck_assert_str_eq(hp_eval("testapp", "state['file'].closed"), "True");
}
END_TEST

static Suite *wsgi_app_suite(void)
{
    Suite *s = suite_create("wsgi_app");
    TCase *tc;

    tc = tcase_create("app");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_exception_before_headers_is_500);
    tcase_add_test(tc, test_exception_after_headers_truncates);
    tcase_add_test(tc, test_start_response_twice_is_an_error);
    tcase_add_test(tc, test_exc_info_replaces_head);
    tcase_add_test(tc, test_exc_info_after_head_reraises);
    tcase_add_loop_test(tc, test_app_mistakes_are_500, 0,
                        sizeof(app_errors) / sizeof(app_errors[0]));
    tcase_add_test(tc, test_write_callable);
    tcase_add_test(tc, test_write_wants_bytes);
    tcase_add_test(tc, test_stale_write_callable);
    tcase_add_test(tc, test_result_close_called);
    suite_add_tcase(s, tc);

    tc = tcase_create("file_wrapper");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_file_wrapper_sendfile);
    tcase_add_test(tc, test_file_wrapper_respects_position);
    tcase_add_test(tc, test_file_wrapper_app_content_length);
    tcase_add_test(tc, test_file_wrapper_head);
    tcase_add_test(tc, test_file_wrapper_without_fileno);
    tcase_add_test(tc, test_file_wrapper_after_write);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(wsgi_app_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
