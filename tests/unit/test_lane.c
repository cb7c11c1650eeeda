/* test_lane.c - check suite for worker/lane.c, the pump-mode executor.
 *
 * The real thing in one process: the embedded interpreter, the WSGI app
 * (APP below), N lane threads started by sl_lane_start(), and the pump's
 * loop run by the test thread without the GIL, as the worker's main thread
 * runs it. Clients talk over loopback; the test takes the GIL only to look
 * at the app's state.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>

#include "tests/unit/py_harness.h"
#include "worker/python/lane.h"
#include "worker/python/wsgi.h"

static const char APP[] =
    "import hashlib, signal, threading\n"
    "state = {'closed': 0, 'entered': 0}\n"
    "release = threading.Event()\n"
    "both = threading.Barrier(2, timeout=2)\n"
    "\n"
    "def hello(e):\n"
    "    return [b'hello']\n"
    "\n"
    "def together(e):\n"
    "    both.wait()\n"
    "    return [b'together']\n"
    "\n"
    "def thread(e):\n"
    "    return [threading.current_thread().name.encode()]\n"
    "\n"
    "def sigmask(e):\n"
    "    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])\n"
    "    return [str(signal.SIGTERM in mask and signal.SIGINT in mask)\n"
    "            .encode()]\n"
    "\n"
    "class Big:\n"
    "    def __iter__(self):\n"
    "        for i in range(32):\n"
    "            yield bytes([97 + i % 26]) * 65536\n"
    "    def close(self):\n"
    "        state['closed'] += 1\n"
    "\n"
    "def big(e):\n"
    "    return Big()\n"
    "\n"
    "class Endless:\n"
    "    def __iter__(self):\n"
    "        while True:\n"
    "            yield b'x' * 65536\n"
    "    def close(self):\n"
    "        state['closed'] += 1\n"
    "\n"
    "def endless(e):\n"
    "    return Endless()\n"
    "\n"
    "def digest(e):\n"
    "    data = e['wsgi.input'].read()\n"
    "    return [b'%d %s' % (len(data), "
    "hashlib.sha1(data).hexdigest().encode())]\n"
    "\n"
    "def block(e):\n"
    "    state['entered'] += 1\n"
    "    release.wait(5)\n"
    "    return [b'released']\n"
    "\n"
    "seen = threading.Event()\n"
    "\n"
    "def stream(e):\n"
    "    yield b'first'\n"
    "    yield b'+seen' if seen.wait(1) else b'+never seen'\n"
    "\n"
    "def app(e, sr):\n"
    "    body = globals()[e['PATH_INFO'].strip('/')](e)\n"
    "    sr('200 OK', [])\n"
    "    return body\n";

static sl_options_t opt;
static sl_pump_t pump;
static h_client_t client;
static h_resp_t resp;
static PyThreadState *main_ts; /* the main thread's, while it has no GIL */
static int stuck = -1;         /* sl_lane_stop()'s answer, -1 = not called */

static void setup(void)
{
    client.fd = -1;
    hp_log_to_file();
}

static void gil_take(void)
{
    PyEval_RestoreThread(main_ts);
}

static void gil_give(void)
{
    main_ts = PyEval_SaveThread();
}

static void teardown(void)
{
    if (stuck < 0)
        ck_assert_int_eq(sl_lane_exec.stop(&pump, 2.0), 0);
    h_resp_free(&resp);
    h_client_close(&client);
}

/* Python, the app, a pump-mode pump, LANES lanes, a connected client, and
 * the GIL released for the lanes. */
static void up(const char *lanes)
{
    PyObject *app;

    h_options(&opt, "--threads", lanes, NULL);
    ck_assert_int_eq(sl_py_init(&opt), 0);
    hp_module("testapp", APP);
    app = sl_py_load_app(&opt);
    hp_check(app, "load the app");
    h_exec = &sl_lane_exec;
    h_pump_up(&pump, &opt);
    ck_assert_ptr_eq(pump.exec, &sl_lane_exec);
    ck_assert_int_eq(sl_wsgi_init(app, &pump), 0);
    Py_DECREF(app);
    ck_assert_int_eq(sl_lane_start(&pump, opt.threads), 0);
    gil_give();
    h_connect(&pump, &client);
}

/* str() of EXPR in the app's module, taking the GIL for it. */
static const char *app_eval(const char *expr)
{
    const char *r;

    gil_take();
    r = hp_eval("testapp", expr);
    gil_give();
    return r;
}

static void get(h_client_t *cl, const char *path)
{
    char raw[256];

    snprintf(raw, sizeof(raw), "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", path);
    h_sends(cl, raw);
}

START_TEST(test_request_served_by_a_lane)
{
    up("1");
    get(&client, "/hello");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(resp.body, "hello");
    /* on a thread of its own, not the loop's */
    get(&client, "/thread");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_ne(resp.body, "MainThread");
    ck_assert_uint_eq(pump.served, 2);
    ck_assert_uint_eq(pump.inflight, 0);
}
END_TEST

/* Two lanes serve two requests at the same time: each waits for the
 * other at a barrier (one lane would leave it broken: a 500). */
START_TEST(test_lanes_run_in_parallel)
{
    h_client_t other;

    up("2");
    h_connect(&pump, &other);
    get(&client, "/together");
    get(&other, "/together");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "together");
    ck_assert(h_response(&pump, &other, &resp, false));
    ck_assert_str_eq(resp.body, "together");
    h_client_close(&other);
}
END_TEST

/* Lanes never take the process's signals: the loop thread owns them. */
START_TEST(test_lanes_block_signals)
{
    up("1");
    get(&client, "/sigmask");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "True");
}
END_TEST

/* Once the first block of a stream reaches the client, tell the app,
 * which waits for that before it yields the next block. */
static bool first_block_seen(void *arg)
{
    (void)arg;
    h_pull(&client);
    if (strstr(client.data ? client.data : "", "first") == NULL)
        return false;
    app_eval("seen.set()");
    return true;
}

/* Each block the app yields goes out while the app works on the next. */
START_TEST(test_blocks_are_not_held_back)
{
    up("1");
    get(&client, "/stream");
    ck_assert(h_run_until(&pump, first_block_seen, NULL));
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "first+seen");
}
END_TEST

/* A response far above the credit streams out whole: the lane waits for
 * the loop to write, the loop wakes it. */
START_TEST(test_large_response_through_credit)
{
    up("1");
    get(&client, "/big");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
    ck_assert_uint_eq(resp.body_len, 32 * 65536);
    for (size_t i = 0; i < 32; i++) {
        char want[65536];
        memset(want, 'a' + (int)i % 26, sizeof(want));
        ck_assert(memcmp(resp.body + i * 65536, want, sizeof(want)) == 0);
    }
    ck_assert_str_eq(app_eval("state['closed']"), "1");
}
END_TEST

/* A request body far above the body window reaches the lane whole. */
START_TEST(test_large_request_body)
{
    enum { SIZE = 3 * 1024 * 1024 };
    static char body[SIZE], head[128];
    h_sender_t s = {.data = body, .n = SIZE};
    pthread_t th;
    const char *want;

    up("1");
    for (size_t i = 0; i < SIZE; i++)
        body[i] = (char)(i % 253);
    snprintf(head, sizeof(head),
             "POST /digest HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n",
             SIZE);
    h_sends(&client, head);
    s.fd = client.fd;
    ck_assert_int_eq(pthread_create(&th, NULL, h_send_all, &s), 0);
    ck_assert(h_response(&pump, &client, &resp, false));
    pthread_join(th, NULL);
    gil_take();
    hp_module("want", "import hashlib\n"
                      "b = bytes(i % 253 for i in range(3 * 1024 * 1024))\n"
                      "d = '%d %s' % (len(b), hashlib.sha1(b).hexdigest())\n");
    want = hp_eval("want", "d");
    gil_give();
    ck_assert_str_eq(resp.body, want);
}
END_TEST

static bool closed_and_freed(void *arg)
{
    (void)arg;
    return pump.pool.nactive == 0 &&
           strcmp(app_eval("state['closed']"), "1") == 0;
}

/* The client leaves in the middle of an endless response: the lane stops
 * producing, closes the result, and the slot is freed. */
START_TEST(test_client_gone_stops_the_lane)
{
    up("1");
    get(&client, "/endless");
    ck_assert(h_wait_bytes(&pump, &client, 1024 * 1024));
    h_client_close(&client);
    ck_assert(h_run_until(&pump, closed_and_freed, NULL));
    ck_assert_uint_eq(pump.inflight, 0);
}
END_TEST

/* Tickets meant for an asyncio lane are not requests to a WSGI lane. */
START_TEST(test_wake_tickets_ignored)
{
    sl_ticket_t wake = {.idx = 0, .gen = 0, .kind = SL_TICKET_WAKE};

    up("1");
    ck_assert_int_eq(sl_queue_push(&pump.work, &wake, 1), 0);
    get(&client, "/hello");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "hello");
    ck_assert_uint_eq(pump.served, 1);
}
END_TEST

static bool app_entered(void *arg)
{
    (void)arg;
    return strcmp(app_eval("state['entered']"), "1") == 0;
}

/* stop returns once idle lanes have left; a lane stuck in the app is
 * reported after the timeout instead of waited for. */
START_TEST(test_stop_reports_stuck_lane)
{
    double t0;

    up("1");
    get(&client, "/block");
    ck_assert(h_run_until(&pump, app_entered, NULL));
    t0 = h_now();
    stuck = sl_lane_exec.stop(&pump, 0.2);
    ck_assert_int_eq(stuck, 1);
    ck_assert(h_now() - t0 >= 0.19);
    ck_assert(h_now() - t0 < 1.5);
    /* let it go: it finishes its request, then leaves */
    app_eval("release.set()");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "released");
}
END_TEST

START_TEST(test_stop_idle_lanes)
{
    double t0;

    up("3");
    t0 = h_now();
    stuck = sl_lane_exec.stop(&pump, 2.0);
    ck_assert_int_eq(stuck, 0);
    ck_assert(h_now() - t0 < 1.0);
    ck_assert(pump.work.closed);
}
END_TEST

static Suite *lane_suite(void)
{
    Suite *s = suite_create("lane");
    TCase *tc = tcase_create("lane");

    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_request_served_by_a_lane);
    tcase_add_test(tc, test_lanes_run_in_parallel);
    tcase_add_test(tc, test_lanes_block_signals);
    tcase_add_test(tc, test_blocks_are_not_held_back);
    tcase_add_test(tc, test_large_response_through_credit);
    tcase_add_test(tc, test_large_request_body);
    tcase_add_test(tc, test_client_gone_stops_the_lane);
    tcase_add_test(tc, test_wake_tickets_ignored);
    tcase_add_test(tc, test_stop_reports_stuck_lane);
    tcase_add_test(tc, test_stop_idle_lanes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(lane_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
