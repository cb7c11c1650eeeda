/* test_asgi_errors.c - check suite for worker/python/asgi.c, ASGI HTTP:
 * an app that raises before, during or after its response, and messages
 * it sends that ASGI does not allow.
 *
 * The real thing in one process, reached through asgi.h alone: the
 * embedded interpreter, the ASGI app (APP in tests/unit/asgi_harness.h,
 * which the suites share), the asyncio lane started by sl_asgi_start(),
 * and the pump's loop run by the test thread without the GIL, as the
 * worker's main thread runs it. Clients talk over loopback; the test takes
 * the GIL only to look at what the app recorded or to open one of its
 * gates.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>

#include "tests/unit/asgi_harness.h"
#include "tests/unit/py_harness.h"
#include "worker/python/asgi.h"
#include "worker/python/asgi_lifespan.h"

static bool log_has(void *text)
{
    return logged(text);
}

/* Run the loop until TEXT is in the log. The lane may log an error after
 * the response it ended went out (an invalid message: the 500 is sent
 * when send() raises, the traceback logged when it leaves the app). */
static bool wait_logged(const char *text)
{
    return h_run_until(&pump, log_has, (void *)text);
}

/* A 500 of the server's own, and the connection closed after it. */
static void assert_500(void)
{
    ck_assert_int_eq(resp.status, 500);
    ck_assert_str_eq(resp.body, "Internal Server Error\n");
    ck_assert_str_eq(hdr("Connection"), "close");
    ck_assert(h_wait_eof(&pump, &client));
}

/* ------------------------------------------------------------------ */
/* errors                                                             */

START_TEST(test_raise_before_sending)
{
    up();
    get("/raise_early");
    ck_assert(h_response(&pump, &client, &resp, false));
    assert_500();
    ck_assert(wait_logged("error handling GET /raise_early"));
    ck_assert(wait_logged("ZeroDivisionError"));
}
END_TEST

/* http.response.start alone puts nothing on the wire: an error after it
 * still gets a clean 500, the app's status never seen. */
START_TEST(test_raise_after_start_before_body)
{
    up();
    get("/raise_after_start");
    ck_assert(h_response(&pump, &client, &resp, false));
    assert_500();
    ck_assert_int_eq(received_count("HTTP/1.1 "), 0); /* nothing more */
    ck_assert(wait_logged("LookupError: after start"));
}
END_TEST

/* Once bytes of the response went out, an error can only cut it short:
 * the connection closes, no final chunk and no second head. */
START_TEST(test_raise_after_body_began)
{
    up();
    get("/raise_late");
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert(strncmp(client.data, "HTTP/1.1 200 OK\r\n", 17) == 0);
    ck_assert_int_eq(received_count("HTTP/1.1 "), 1);
    ck_assert_ptr_nonnull(strstr(client.data, "7\r\npartial\r\n"));
    ck_assert_ptr_null(strstr(client.data, "\r\n0\r\n\r\n"));
    ck_assert(wait_logged("error handling GET /raise_late"));
    ck_assert(wait_logged("KeyError: 'late'"));
}
END_TEST

/* What the app sends wrong: send() raises, the client gets a 500 and the
 * log says what was wrong. */
static const struct {
    const char *path, *error;
} mistakes[] = {
    {"/bad_type", "unexpected message type 'http.response.bogus'"},
    {"/not_dict", "send() takes a dict message, not list"},
    {"/no_type", "the message has no 'type'"},
    {"/str_status", "http.response.start needs an int 'status', got '200'"},
    {"/bad_status", "status 99 is not a final HTTP status"},
    {"/body_first", "http.response.body before http.response.start"},
    {"/start_twice", "http.response.start sent twice"},
    {"/str_body", "'body' must be bytes, not str"},
    {"/no_response", "ASGI app returned without starting a response to "
                     "GET /no_response"},
};

START_TEST(test_invalid_message)
{
    up();
    get(mistakes[_i].path);
    ck_assert_msg(h_response(&pump, &client, &resp, false), "%s: no response",
                  mistakes[_i].path);
    assert_500();
    ck_assert_msg(wait_logged(mistakes[_i].error),
                  "%s: '%s' not in the log: %s", mistakes[_i].path,
                  mistakes[_i].error, hp_log_text());
}
END_TEST

static Suite *asgi_errors_suite(void)
{
    Suite *s = suite_create("asgi_errors");
    TCase *tc;

    tc = tcase_create("asgi");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_raise_before_sending);
    tcase_add_test(tc, test_raise_after_start_before_body);
    tcase_add_test(tc, test_raise_after_body_began);
    tcase_add_loop_test(tc, test_invalid_message, 0,
                        sizeof(mistakes) / sizeof(mistakes[0]));
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(asgi_errors_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
