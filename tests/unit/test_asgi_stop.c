/* test_asgi_stop.c - check suite for worker/python/asgi.c, ASGI HTTP:
 * finish and stop (requests cancelled, lifespan shutdown), and inline
 * mode, where the event loop runs on the test thread and drives the pump,
 * with a client thread.
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

/* ------------------------------------------------------------------ */
/* finish and stop                                                    */

/* The drain's finish cancels a request that would wait forever: the app
 * sees CancelledError, the client a 503, and the log no error of the
 * app's. */
START_TEST(test_finish_cancels)
{
    up();
    get("/forever");
    ck_assert(until_app("state['entered']", "1"));
    pump.exec->finish(&pump);
    ck_assert(until_app("state['cancelled']", "1"));
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 503);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert(!logged("CancelledError"));
    ck_assert(!logged("[ERROR]"));
}
END_TEST

/* stop() runs lifespan shutdown, and the lane leaves. */
START_TEST(test_stop_runs_lifespan_shutdown)
{
    up();
    ck_assert_str_eq(app_eval("state['startup'], state['shutdown']"), "(1, 0)");
    get("/hello");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "hello");
    ck_assert_int_eq(stop(), 0);
    gil_take();
    ck_assert_str_eq(hp_eval("testapp", "state['startup'], state['shutdown']"),
                     "(1, 1)");
    ck_assert_str_eq(hp_eval("testapp", "loop.is_closed()"), "True");
    gil_give();
}
END_TEST

/* A request still waiting when stop() comes is cancelled first. */
START_TEST(test_stop_cancels_what_is_left)
{
    up();
    get("/forever");
    ck_assert(until_app("state['entered']", "1"));
    ck_assert_int_eq(stop(), 0);
    gil_take();
    ck_assert_str_eq(hp_eval("testapp", "state['cancelled']"), "1");
    ck_assert_str_eq(hp_eval("testapp", "state['shutdown']"), "1");
    gil_give();
    ck_assert(logged("ASGI: cancelling 1 request tasks"));
}
END_TEST

/* ------------------------------------------------------------------ */
/* inline mode                                                        */

/* Inline, the test thread runs the event loop (sl_asgi_run_inline()), so
 * the client is a thread of its own: it talks to the server, then asks
 * for the drain as the supervisor does (SIGTERM). It records what it got;
 * the test thread asserts. */
typedef struct {
    struct sockaddr_in to;
    char got[4096];
    size_t len;
    int answers; /* whole "hello" responses received */
    int err;     /* errno of the call that failed, or 0 */
} inline_client_t;

static bool read_until_hellos(int fd, inline_client_t *ic, int want)
{
    while (ic->answers < want) {
        ssize_t n =
            recv(fd, ic->got + ic->len, sizeof(ic->got) - 1 - ic->len, 0);
        if (n <= 0) {
            ic->err = n == 0 ? EPIPE : errno;
            return false;
        }
        ic->len += (size_t)n;
        ic->got[ic->len] = '\0';
        ic->answers = 0;
        for (const char *p = ic->got; (p = strstr(p, "\r\n\r\nhello")); p++)
            ic->answers++;
    }
    return true;
}

static void *inline_client(void *arg)
{
    static const char get2[] = "GET /hello HTTP/1.1\r\nHost: h\r\n\r\n";
    inline_client_t *ic = arg;
    struct timeval tv = {.tv_sec = 2};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
        connect(fd, (struct sockaddr *)&ic->to, sizeof(ic->to)) < 0) {
        ic->err = errno;
    } else {
        /* two requests, one after the other, on one connection */
        for (int i = 1; i <= 2 && ic->err == 0; i++) {
            if (send(fd, get2, sizeof(get2) - 1, MSG_NOSIGNAL) < 0)
                ic->err = errno;
            else
                read_until_hellos(fd, ic, i);
        }
    }
    if (fd >= 0)
        close(fd);
    kill(getpid(), SIGTERM); /* drain, whatever happened */
    return NULL;
}

/* The inline table: requests served by the event loop on this thread,
 * the drain ends sl_asgi_run_inline(), and stop runs lifespan shutdown. */
START_TEST(test_inline_serves_and_stops)
{
    inline_client_t ic = {0};
    socklen_t len = sizeof(ic.to);
    pthread_t th;
    int status;

    boot(&sl_asgi_inline_exec.ops);
    ck_assert_int_eq(
        getsockname(pump.listeners[0].fd, (struct sockaddr *)&ic.to, &len), 0);
    ck_assert_int_eq(pthread_create(&th, NULL, inline_client, &ic), 0);
    status = sl_asgi_run_inline(&pump);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(status, SL_EXIT_OK);
    ck_assert_msg(ic.err == 0, "client: %s (got: %s)", strerror(ic.err),
                  ic.got);
    ck_assert_int_eq(ic.answers, 2);
    ck_assert(strncmp(ic.got, "HTTP/1.1 200 OK\r\n", 17) == 0);
    ck_assert_uint_eq(pump.served, 2);
    ck_assert_str_eq(hp_eval("testapp", "state['shutdown']"), "0");
    ck_assert_int_eq(stop(), 0);
    ck_assert_str_eq(hp_eval("testapp", "state['startup'], state['shutdown']"),
                     "(1, 1)");
    ck_assert_str_eq(hp_eval("testapp", "loop.is_closed()"), "True");
}
END_TEST

static Suite *asgi_stop_suite(void)
{
    Suite *s = suite_create("asgi_stop");
    TCase *tc;

    tc = tcase_create("asgi");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_finish_cancels);
    tcase_add_test(tc, test_stop_runs_lifespan_shutdown);
    tcase_add_test(tc, test_stop_cancels_what_is_left);
    suite_add_tcase(s, tc);

    tc = tcase_create("inline");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_inline_serves_and_stops);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(asgi_stop_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
