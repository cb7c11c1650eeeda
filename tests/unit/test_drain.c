/* test_drain.c - check suite for worker/loop/drain.c.
 *
 * A real pump in pump mode with real loopback clients; the test thread is
 * the loop (and, where a request is in flight, its executor). The drain is
 * started the way the worker starts it - from inside a loop pass, by a
 * signal or a direct call - and the tests poll for p->drain.stopping, the flag
 * finish sets, rather than for the loop to return.
 */
#include "config.h"

#include <check.h>
#include <signal.h>
#include <sys/wait.h>

#include "common/ctl.h"
#include "tests/unit/harness.h"
#include "worker/loop/drain.h"

static sl_options_t opt;
static sl_pump_t pump;
static h_client_t clients[3];
static h_resp_t resp;
static char logpath[128];

static void setup(void)
{
    for (int i = 0; i < 3; i++)
        clients[i].fd = -1;
    snprintf(logpath, sizeof(logpath), "%s/error.log", h_test_dir());
    ck_assert_int_eq(sl_log_open(logpath), 0);
}

static void teardown(void)
{
    h_resp_free(&resp);
    for (int i = 0; i < 3; i++)
        h_client_close(&clients[i]);
    h_pump_down(&pump);
}

/* The whole error log so far. */
static const char *log_text(void)
{
    static char buf[65536];
    FILE *f = fopen(logpath, "r");
    size_t n;

    ck_assert_ptr_nonnull(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

#define UP(...)                                                                \
    do {                                                                       \
        h_options(&opt, __VA_ARGS__);                                          \
        h_pump_up(&pump, &opt);                                                \
    } while (0)

static bool stopping(void *arg)
{
    (void)arg;
    return pump.drain.stopping;
}

static bool is_draining(void *arg)
{
    (void)arg;
    return pump.drain.draining;
}

/* Client I sends a request and the test takes its ticket. */
static sl_ticket_t start_request(int i, const char *raw)
{
    sl_ticket_t t;

    h_sends(&clients[i], raw);
    ck_assert(h_take_ticket(&pump, &t));
    ck_assert_uint_eq(t.idx, clients[i].conn->x.id);
    return t;
}

static void respond(int i, uint32_t gen)
{
    static const char r[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    struct iovec iov = {(void *)r, sizeof(r) - 1};

    ck_assert_int_eq(
        sl_exch_send(&clients[i].conn->x, gen, &iov, 1, SL_SEND_END), 0);
}

/* A request served to the end on client I, the connection left lingering
 * (CLOSING) because it was HTTP/1.0. */
static void leave_lingering(int i)
{
    sl_ticket_t t = start_request(i, "GET / HTTP/1.0\r\n\r\n");

    respond(i, t.gen);
    ck_assert(h_wait_eof(&pump, &clients[i]));
    ck_assert_int_eq(clients[i].conn->state, SL_CONN_CLOSING);
}

/* ------------------------------------------------------------------ */

START_TEST(test_prepare_when_idle_finishes_at_once)
{
    int ctl[2];
    sl_ctl_msg_t m;

    UP(NULL);
    ck_assert_int_eq(
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, ctl), 0);
    sl_drain_set_ctl(&pump, ctl[0]);
    sl_drain_prepare(&pump);
    ck_assert(pump.drain.draining);
    ck_assert(pump.drain.terminating);
    ck_assert(pump.drain.stopping);
    ck_assert_int_eq(pump.drain.exit_status, SL_EXIT_OK);
    ck_assert(!pump.accepting);
    ck_assert_int_eq(pump.listeners[0].fd, -1);
    ck_assert_int_eq(sl_ctl_recv(ctl[1], &m), 1);
    ck_assert_uint_eq(m.type, SL_CTL_DRAINING);
    close(ctl[1]);
}
END_TEST

/* Finished means finished: nothing of the drain stays armed. */
START_TEST(test_finish_leaves_no_timer)
{
    UP(NULL);
    h_connect(&pump, &clients[0]);
    sl_drain_prepare(&pump);
    /* the idle connection gets its short grace, then the drain ends */
    ck_assert(h_run_until(&pump, stopping, NULL));
    ck_assert(!ev_is_active(&pump.drain.timer));
}
END_TEST

/* Idle keep-alive connections are closed after a short grace; a request in
 * flight is answered, then its connection closes and the drain ends clean. */
START_TEST(test_in_flight_request_finishes)
{
    sl_ticket_t t;

    UP(NULL);
    h_connect(&pump, &clients[0]);
    h_connect(&pump, &clients[1]);
    t = start_request(0, "GET /busy HTTP/1.1\r\nHost: h\r\n\r\n");
    sl_drain_prepare(&pump);
    ck_assert(h_wait_eof(&pump, &clients[1]));
    ck_assert_uint_eq(clients[1].len, 0);
    ck_assert(!pump.drain.stopping);
    ck_assert_uint_eq(pump.pool.nactive, 1);
    h_run_passes(&pump, 3);
    ck_assert(!pump.drain.stopping);
    respond(0, t.gen);
    ck_assert(h_response(&pump, &clients[0], &resp, false));
    ck_assert_str_eq(resp.body, "ok");
    ck_assert(h_wait_eof(&pump, &clients[0])); /* no keep-alive now */
    ck_assert(h_run_until(&pump, stopping, NULL));
    ck_assert_int_eq(pump.drain.exit_status, SL_EXIT_OK);
}
END_TEST

/* A request that outlives --graceful-timeout is abandoned: logged, its
 * executor told to stop, and the worker exits non-zero. */
START_TEST(test_graceful_timeout)
{
    sl_ticket_t t;
    sl_conn_t *c;

    UP("--graceful-timeout", "0.2", NULL);
    h_connect(&pump, &clients[0]);
    t = start_request(0, "GET /slow/path HTTP/1.1\r\nHost: h\r\n\r\n");
    c = clients[0].conn;
    sl_drain_prepare(&pump);
    ck_assert(!pump.drain.stopping);
    ck_assert(h_run_until(&pump, stopping, NULL));
    ck_assert_int_eq(pump.drain.exit_status, SL_EXIT_FAIL);
    ck_assert(c->x.aborted);
    ck_assert_int_eq(sl_exch_wait_credit(&c->x, t.gen), -1);
    ck_assert_ptr_nonnull(strstr(log_text(), "graceful timeout (0.2s)"));
    ck_assert_ptr_nonnull(
        strstr(log_text(), "drain: abandoning request GET /slow/path after"));
}
END_TEST

/* Run the backstop's handler in a child that noted RUNNING (NULL: none)
 * as the request on the loop thread; the child's exit status. */
static int backstop_child(const char *running)
{
    static char url[64];
    static sl_conn_t c;
    sl_pump_t p = {0};
    int status;
    pid_t pid = fork();

    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        p.opt = &opt;
        p.exec = &h_exec_lanes;
        snprintf(url, sizeof(url), "%s", running ? running : "");
        c.x.req.method = HTTP_POST;
        c.x.req.hbuf.data = url;
        c.x.req.url_len = (uint32_t)strlen(url);
        sl_drain_signals(&p);
        sl_drain_note_running(running ? &c.x : NULL);
        memset(url, 'x', strlen(url)); /* the copy is what is shown */
        raise(SIGALRM);
        _exit(99);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* The backstop's last words name the request the loop thread runs, from
 * the copy made when it started: the handler cannot format. */
START_TEST(test_backstop_names_running_request)
{
    h_options(&opt, NULL);
    ck_assert_int_eq(backstop_child("/stuck/here"), SL_EXIT_FAIL);
    ck_assert_ptr_nonnull(strstr(log_text(), "graceful timeout: exiting; "
                                             "abandoning POST /stuck/here\n"));
    ck_assert_int_eq(backstop_child(NULL), SL_EXIT_FAIL);
    ck_assert_ptr_nonnull(
        strstr(log_text(), "\nsluice: worker graceful timeout: exiting\n"));
}
END_TEST

/* A drain started from a signal inside the loop, with work in flight. */
START_TEST(test_sigterm_waits_for_request)
{
    sl_ticket_t t;

    UP(NULL);
    h_connect(&pump, &clients[0]);
    t = start_request(0, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert_int_eq(kill(getpid(), SIGTERM), 0);
    ck_assert(h_run_until(&pump, is_draining, NULL));
    ck_assert(!pump.drain.stopping);
    respond(0, t.gen);
    ck_assert(h_run_until(&pump, stopping, NULL));
    ck_assert_int_eq(pump.drain.exit_status, SL_EXIT_OK);
    ck_assert(h_response(&pump, &clients[0], &resp, false));
    ck_assert_int_eq(resp.status, 200);
}
END_TEST

/* --shutdown-delay: TERM fails the health check at once but keeps
 * accepting and serving until the delay is over, then drains. */
START_TEST(test_shutdown_delay)
{
    UP("--shutdown-delay", "1", NULL); /* long enough for a loaded TSan run */
    sl_drain_begin(&pump);
    ck_assert(pump.drain.terminating);
    ck_assert(!pump.drain.draining);
    ck_assert(pump.accepting);
    h_connect(&pump, &clients[0]); /* still accepted */
    sl_drain_begin(&pump);         /* a second TERM changes nothing */
    ck_assert(!pump.drain.draining);
    ck_assert(h_run_until(&pump, stopping, NULL));
    ck_assert(pump.drain.draining);
    ck_assert_int_eq(pump.drain.exit_status, SL_EXIT_OK);
    ck_assert(h_wait_eof(&pump, &clients[0]));
}
END_TEST

START_TEST(test_begin_without_delay_prepares)
{
    UP(NULL);
    sl_drain_begin(&pump);
    ck_assert(pump.drain.terminating);
    ck_assert(pump.drain.draining);
    ck_assert(pump.drain.stopping);
}
END_TEST

/* Lingering closes are not worth waiting for: they do not hold up the
 * drain, and finish closes them. */
START_TEST(test_lingering_connection_does_not_hold_drain)
{
    UP(NULL);
    h_connect(&pump, &clients[0]);
    leave_lingering(0);
    sl_drain_prepare(&pump);
    ck_assert(pump.drain.stopping);
    ck_assert_int_eq(pump.drain.exit_status, SL_EXIT_OK);
    ck_assert_uint_eq(pump.pool.nactive, 0);
}
END_TEST

/* Two lingering connections when the last request ends: finish closes
 * each, and every close steps the drain again. */
START_TEST(test_finish_with_two_lingering_connections)
{
    sl_ticket_t t;

    UP(NULL);
    h_connect(&pump, &clients[0]);
    h_connect(&pump, &clients[1]);
    h_connect(&pump, &clients[2]);
    leave_lingering(0);
    leave_lingering(1);
    t = start_request(2, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    sl_drain_prepare(&pump);
    ck_assert(!pump.drain.stopping);
    respond(2, t.gen);
    ck_assert(h_run_until(&pump, stopping, NULL));
    ck_assert_int_eq(pump.drain.exit_status, SL_EXIT_OK);
    ck_assert_uint_eq(pump.pool.nactive, 0);
}
END_TEST

/* TERM while one connection is idle and an older one lingers. */
START_TEST(test_prepare_with_idle_and_lingering)
{
    UP(NULL);
    h_connect(&pump, &clients[0]);
    leave_lingering(0);
    h_connect(&pump, &clients[1]); /* newer: first in the active list */
    sl_drain_prepare(&pump);
    ck_assert(h_run_until(&pump, stopping, NULL));
    ck_assert_int_eq(pump.drain.exit_status, SL_EXIT_OK);
    ck_assert_uint_eq(pump.pool.nactive, 0);
}
END_TEST

START_TEST(test_fast_with_one_idle_connection)
{
    UP(NULL);
    h_connect(&pump, &clients[0]);
    sl_drain_fast(&pump);
    ck_assert(pump.drain.stopping);
    ck_assert_int_eq(pump.drain.exit_status, SL_EXIT_OK);
    ck_assert_uint_eq(pump.pool.nactive, 0);
    ck_assert(h_wait_eof(&pump, &clients[0]));
    ck_assert_ptr_null(strstr(log_text(), "graceful timeout"));
}
END_TEST

/* INT/QUIT close everything now, however many connections there are. */
START_TEST(test_fast_with_idle_connections)
{
    UP(NULL);
    h_connect(&pump, &clients[0]);
    h_connect(&pump, &clients[1]);
    h_connect(&pump, &clients[2]);
    sl_drain_fast(&pump);
    ck_assert(pump.drain.stopping);
    ck_assert_int_eq(pump.drain.exit_status, SL_EXIT_OK);
    ck_assert_uint_eq(pump.pool.nactive, 0);
    for (int i = 0; i < 3; i++)
        ck_assert(h_wait_eof(&pump, &clients[i]));
    /* a fast stop has no graceful timeout to report */
    ck_assert_ptr_null(strstr(log_text(), "graceful timeout"));
}
END_TEST

/* A fast stop with a request in flight exits non-zero and leaves the
 * executor a connection that refuses everything. */
START_TEST(test_fast_with_request_in_flight)
{
    sl_ticket_t t;
    sl_conn_t *c;

    UP(NULL);
    h_connect(&pump, &clients[0]);
    t = start_request(0, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    c = clients[0].conn;
    sl_drain_fast(&pump);
    ck_assert(pump.drain.stopping);
    ck_assert_int_eq(pump.drain.exit_status, SL_EXIT_FAIL);
    ck_assert_int_eq(sl_exch_wait_credit(&c->x, t.gen), -1);
    sl_drain_fast(&pump); /* again: nothing happens */
    ck_assert_int_eq(pump.drain.exit_status, SL_EXIT_FAIL);
}
END_TEST

/* step does nothing unless draining, and nothing once stopped. */
START_TEST(test_step_guards)
{
    UP(NULL);
    sl_drain_step(&pump);
    ck_assert(!pump.drain.stopping);
    ck_assert(pump.accepting);
}
END_TEST

static Suite *drain_suite(void)
{
    Suite *s = suite_create("drain");
    TCase *tc = tcase_create("drain");

    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_prepare_when_idle_finishes_at_once);
    tcase_add_test(tc, test_finish_leaves_no_timer);
    tcase_add_test(tc, test_in_flight_request_finishes);
    tcase_add_test(tc, test_graceful_timeout);
    tcase_add_test(tc, test_backstop_names_running_request);
    tcase_add_test(tc, test_sigterm_waits_for_request);
    tcase_add_test(tc, test_shutdown_delay);
    tcase_add_test(tc, test_begin_without_delay_prepares);
    tcase_add_test(tc, test_lingering_connection_does_not_hold_drain);
    tcase_add_test(tc, test_finish_with_two_lingering_connections);
    tcase_add_test(tc, test_prepare_with_idle_and_lingering);
    tcase_add_test(tc, test_fast_with_one_idle_connection);
    tcase_add_test(tc, test_fast_with_idle_connections);
    tcase_add_test(tc, test_fast_with_request_in_flight);
    tcase_add_test(tc, test_step_guards);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(drain_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
