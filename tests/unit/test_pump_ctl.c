/* test_pump_ctl.c - check suite for worker/loop/pump.c: the control
 * channel (a socketpair standing in for the supervisor: heartbeats, the
 * tick, retiring, metrics, EOF) and the signals the pump owns, with
 * sl_pump_run().
 *
 * The pump runs on a loopback listener (or a unix one); the test thread
 * is its loop thread and runs libev passes until what it waits for holds.
 * What the test_pump*.c suites share is tests/unit/pump_harness.h.
 */
#include "config.h"

#include <check.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "common/date.h"
#include "common/ctl.h"
#include "common/metrics.h"
#include "tests/unit/harness.h"
#include "tests/unit/pump_harness.h"

/* ------------------------------------------------------------------ */
/* the control channel                                                */

static void ctl_up(void)
{
    ck_assert_int_eq(
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, ctl), 0);
    sl_drain_set_ctl(&pump, ctl[0]);
    ck_assert_int_eq(pump.drain.ctl_fd, ctl[0]);
}

static bool ctl_readable(void *arg)
{
    sl_ctl_msg_t *m = arg;

    return sl_ctl_recv(ctl[1], m) == 1;
}

START_TEST(test_heartbeat)
{
    sl_ctl_msg_t m;
    sl_ticket_t t;

    h_options(&opt, "--threads", "4", NULL);
    h_pump_up(&pump, &opt);
    ctl_up();
    h_connect(&pump, &client);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_take_ticket(&pump, &t));
    pump.served = 41;
    sl_drain_ctl(&pump, SL_CTL_HEARTBEAT);
    ck_assert_int_eq(sl_ctl_recv(ctl[1], &m), 1);
    ck_assert_uint_eq(m.type, SL_CTL_HEARTBEAT);
    ck_assert_uint_eq(m.pid, (uint32_t)getpid());
    ck_assert(m.served == 41);
    ck_assert_uint_eq(m.active, 1);
    ck_assert_uint_eq(m.conns, 1);
    ck_assert_uint_eq(m.lanes, 4);
    ck_assert_uint_eq(m.busy_lanes, 1);
    ck_assert(m.oldest >= 0 && m.oldest < 5);
}
END_TEST

/* The housekeeping tick sends a heartbeat (and sweeps, and dates). */
START_TEST(test_tick_sends_heartbeat)
{
    sl_ctl_msg_t m;

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    ctl_up();
    ev_feed_event(pump.loop, &pump.tick, EV_TIMER);
    ck_assert(h_run_until(&pump, ctl_readable, &m));
    ck_assert_uint_eq(m.type, SL_CTL_HEARTBEAT);
}
END_TEST

/* The tick closes connections whose deadline passed. */
START_TEST(test_tick_sweeps)
{
    h_options(&opt, "--keep-alive", "1", "--header-timeout", "0.01", NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(pump.pool.nactive, 0);
}
END_TEST

START_TEST(test_retire_once)
{
    sl_ctl_msg_t m;

    h_options(&opt, "--max-requests", "2", NULL);
    h_pump_up(&pump, &opt);
    ctl_up();
    ck_assert_uint_eq(pump.drain.retire_at, 2);
    sl_request_done(&pump, &pump.pool.conns[0]);
    ck_assert_int_eq(sl_ctl_recv(ctl[1], &m), -1);
    sl_request_done(&pump, &pump.pool.conns[0]);
    ck_assert_int_eq(sl_ctl_recv(ctl[1], &m), 1);
    ck_assert_uint_eq(m.type, SL_CTL_RETIRE);
    ck_assert(m.served == 2);
    sl_request_done(&pump, &pump.pool.conns[0]);
    ck_assert_int_eq(sl_ctl_recv(ctl[1], &m), -1);
    ck_assert(pump.served == 3);
}
END_TEST

/* How many more requests of HANDLER, METHOD and CODE this worker counted
 * than BEFORE did. */
static uint64_t requests_since(const sl_metrics_slot_t *before, int handler,
                               int method, int code)
{
    return sl_metrics_self->requests[handler][method][code] -
           before->requests[handler][method][code];
}

/* A finished request is counted by method and status class, with its
 * duration and queue time; one refused before its head was whole counts
 * as "other" with no times. */
START_TEST(test_request_done_counts_metrics)
{
    sl_metrics_slot_t before = *sl_metrics_self;
    sl_conn_t *c;

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    c = &pump.pool.conns[0];
    c->h1.head_done = true;
    c->x.req.method = HTTP_POST;
    c->x.resp_status = 503;
    c->x.req.start = ev_now(pump.loop) - 0.2;
    c->x.picked = c->x.req.start + 0.1;
    sl_request_done(&pump, c);
    ck_assert_uint_eq(requests_since(&before, SL_METRICS_APP, SL_METRICS_POST,
                                     SL_METRICS_5XX),
                      1);
    /* 0.1 s queued: the 0.1 bucket (le is inclusive); 0.2 s in all */
    ck_assert_uint_eq(sl_metrics_self->queue.bucket[7] - before.queue.bucket[7],
                      1);
    ck_assert_uint_eq(
        sl_metrics_self->duration.bucket[8] - before.duration.bucket[8], 1);

    c->h1.head_done = false;
    c->x.resp_status = 0;
    c->x.req.start = 0;
    before = *sl_metrics_self;
    sl_request_done(&pump, c);
    ck_assert_uint_eq(requests_since(&before, SL_METRICS_APP, SL_METRICS_OTHER,
                                     SL_METRICS_NONE),
                      1);
    ck_assert(memcmp(&sl_metrics_self->duration, &before.duration,
                     sizeof(before.duration)) == 0);
}
END_TEST

/* A response from a --static map counts under handler "static", and only
 * there. */
START_TEST(test_request_done_counts_static)
{
    sl_metrics_slot_t before = *sl_metrics_self;
    sl_conn_t *c;

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    c = &pump.pool.conns[0];
    c->h1.head_done = true;
    c->x.req.method = HTTP_GET;
    c->x.resp_status = 304;
    c->x.req.start = ev_now(pump.loop);
    c->x.req.from_static = true;
    sl_request_done(&pump, c);
    ck_assert_uint_eq(requests_since(&before, SL_METRICS_STATIC, SL_METRICS_GET,
                                     SL_METRICS_3XX),
                      1);
    ck_assert_uint_eq(
        requests_since(&before, SL_METRICS_APP, SL_METRICS_GET, SL_METRICS_3XX),
        0);
}
END_TEST

START_TEST(test_retire_jitter)
{
    h_options(&opt, "--max-requests", "10", "--max-requests-jitter", "5", NULL);
    ck_assert_int_eq(sl_pump_init(&pump, &opt, h_exec, NULL, 0), 0);
    ck_assert_uint_ge(pump.drain.retire_at, 10);
    ck_assert_uint_le(pump.drain.retire_at, 15);
}
END_TEST

static bool pump_stopping(void *arg)
{
    sl_pump_t *p = arg;

    return p->drain.stopping;
}

/* EOF on the control channel: the supervisor is gone, drain and stop. */
START_TEST(test_ctl_eof_drains)
{
    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    ctl_up();
    close(ctl[1]);
    ctl[1] = -1;
    ck_assert(h_run_until(&pump, pump_stopping, &pump));
    ck_assert(pump.drain.draining);
    ck_assert_int_eq(pump.drain.exit_status, SL_EXIT_OK);
    ck_assert_int_eq(pump.listeners[0].fd, -1);
}
END_TEST

/* ------------------------------------------------------------------ */
/* signals and sl_pump_run                                            */

START_TEST(test_sigterm_drains)
{
    sl_ctl_msg_t m;

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    ctl_up();
    ck_assert_int_eq(kill(getpid(), SIGTERM), 0);
    ck_assert(h_run_until(&pump, pump_stopping, &pump));
    ck_assert(pump.drain.terminating);
    ck_assert_int_eq(pump.drain.exit_status, SL_EXIT_OK);
    ck_assert_int_eq(sl_ctl_recv(ctl[1], &m), 1);
    ck_assert_uint_eq(m.type, SL_CTL_DRAINING);
}
END_TEST

START_TEST(test_sigint_and_sigquit_stop_fast)
{
    static const int sigs[] = {SIGINT, SIGQUIT};

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    ck_assert_int_eq(kill(getpid(), sigs[_i]), 0);
    ck_assert(h_run_until(&pump, pump_stopping, &pump));
    ck_assert_uint_eq(pump.pool.nactive, 0);
    ck_assert(h_wait_eof(&pump, &client));
}
END_TEST

static bool file_exists(void *arg)
{
    struct stat st;

    return stat(arg, &st) == 0;
}

/* USR1 reopens the log: after logrotate moved it, a new file appears. */
START_TEST(test_sigusr1_reopens_log)
{
    char path[128], moved[128], line[256] = {0};
    int saved = dup(STDERR_FILENO);
    FILE *f;

    snprintf(path, sizeof(path), "%s/error.log", h_test_dir());
    snprintf(moved, sizeof(moved), "%s/error.log.1", h_test_dir());
    ck_assert_int_eq(sl_log_open(path), 0);
    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    ck_assert_int_eq(rename(path, moved), 0);
    ck_assert_int_eq(kill(getpid(), SIGUSR1), 0);
    ck_assert(h_run_until(&pump, file_exists, path));
    sl_log(SL_LOG_ERROR, "after the reopen");
    dup2(saved, STDERR_FILENO);
    close(saved);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
    fclose(f);
    ck_assert_ptr_nonnull(strstr(line, "after the reopen"));
}
END_TEST

/* sl_pump_run() starts the listeners and returns the drain's status. */
START_TEST(test_run_until_term)
{
    int fd = h_listen();

    h_options(&opt, NULL);
    ck_assert_int_eq(sl_pump_init(&pump, &opt, h_exec, &fd, 1), 0);
    ck_assert(!pump.accepting);
    ck_assert_int_eq(kill(getpid(), SIGTERM), 0);
    alarm(5);
    ck_assert_int_eq(sl_pump_run(&pump), SL_EXIT_OK);
    alarm(0);
    ck_assert(pump.drain.stopping);
    ck_assert_int_eq(pump.listeners[0].fd, -1);
}
END_TEST

static Suite *pump_ctl_suite(void)
{
    Suite *s = suite_create("pump_ctl");
    TCase *tc;

    tc = tcase_create("ctl");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_heartbeat);
    tcase_add_test(tc, test_tick_sends_heartbeat);
    tcase_add_test(tc, test_tick_sweeps);
    tcase_add_test(tc, test_retire_once);
    tcase_add_test(tc, test_request_done_counts_metrics);
    tcase_add_test(tc, test_request_done_counts_static);
    tcase_add_test(tc, test_retire_jitter);
    tcase_add_test(tc, test_ctl_eof_drains);
    suite_add_tcase(s, tc);

    tc = tcase_create("signals");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_sigterm_drains);
    tcase_add_loop_test(tc, test_sigint_and_sigquit_stop_fast, 0, 2);
    tcase_add_test(tc, test_sigusr1_reopens_log);
    tcase_add_test(tc, test_run_until_term);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pump_ctl_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
