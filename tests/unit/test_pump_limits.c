/* test_pump_limits.c - check suite for worker/loop/pump.c: the pool's
 * limits (idle connections give up their slot to new ones, EMFILE pauses
 * accepting until a close, a timer or the drain).
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
/* limits: idle connections give up their slot, EMFILE pauses accepting */

/* CL sends a GET and the test executor answers it: afterwards CL's
 * connection is an idle keep-alive one. */
static void serve_one(h_client_t *cl)
{
    static const char r[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    struct iovec iov = {(void *)r, sizeof(r) - 1};
    h_resp_t got = {0};
    sl_ticket_t t;

    h_sends(cl, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_take_ticket(&pump, &t));
    ck_assert_int_eq(
        sl_exch_send(&pump.pool.conns[t.idx].x, t.gen, &iov, 1, SL_SEND_END),
        0);
    ck_assert(h_response(&pump, cl, &got, false));
    ck_assert_str_eq(got.body, "ok");
    h_resp_free(&got);
}

/* A client connected to the pump's listener, not yet accepted. */
static void connect_only(h_client_t *cl)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);

    memset(cl, 0, sizeof(*cl));
    ck_assert_int_eq(
        getsockname(pump.listeners[0].fd, (struct sockaddr *)&sin, &len), 0);
    cl->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(cl->fd, 0);
    ck_assert_int_eq(connect(cl->fd, (struct sockaddr *)&sin, len), 0);
}

/* With every slot taken, a new connection closes the longest-idle
 * keep-alive one and takes its slot, at once. */
START_TEST(test_idle_evicted_for_new)
{
    h_client_t second, third;
    uint64_t before = sl_metrics_self->idle_evictions;

    h_options(&opt, "--worker-connections", "2", NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    serve_one(&client);
    h_connect(&pump, &second);
    serve_one(&second);
    ck_assert_uint_eq(pump.pool.nidle, 2);
    ck_assert_ptr_eq(pump.pool.idle_tail, client.conn); /* idle the longest */
    ck_assert(pump.accepting); /* full, but idle ones can make room */
    connect_only(&third);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert(h_run_until(&pump, accepted, &third));
    ck_assert_uint_eq(pump.pool.nactive, 2);
    ck_assert_uint_eq(sl_metrics_self->idle_evictions, before + 1);
    /* the other idle one is untouched and still served */
    serve_one(&second);
    serve_one(&third);
    h_client_close(&second);
    h_client_close(&third);
}
END_TEST

/* An idle connection whose next request is already on the wire is not
 * the one evicted: its request is answered, the next idle one goes. */
START_TEST(test_idle_with_request_waiting_kept)
{
    h_client_t second, third;
    h_resp_t got = {0};
    sl_ticket_t t;
    static const char r[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    struct iovec iov = {(void *)r, sizeof(r) - 1};

    h_options(&opt, "--worker-connections", "2", NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    serve_one(&client);
    h_connect(&pump, &second);
    serve_one(&second);
    /* the oldest sends its next request; the loop has not read it yet */
    h_sends(&client, "GET /again HTTP/1.1\r\nHost: h\r\n\r\n");
    connect_only(&third);
    ck_assert(h_wait_eof(&pump, &second));
    ck_assert(h_take_ticket(&pump, &t));
    ck_assert_ptr_eq(&pump.pool.conns[t.idx], client.conn);
    ck_assert_int_eq(
        sl_exch_send(&pump.pool.conns[t.idx].x, t.gen, &iov, 1, SL_SEND_END),
        0);
    ck_assert(h_response(&pump, &client, &got, false));
    ck_assert_str_eq(got.body, "ok");
    h_resp_free(&got);
    ck_assert(h_run_until(&pump, accepted, &third));
    h_client_close(&second);
    h_client_close(&third);
}
END_TEST

/* A connection that never sent a byte is not idle in that sense: with
 * the pool used up by such, a new one waits in the backlog (the header
 * timeout is what frees those). */
START_TEST(test_fresh_connection_not_evicted)
{
    h_client_t second;

    h_options(&opt, "--worker-connections", "1", NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    ck_assert_uint_eq(pump.pool.nidle, 0);
    ck_assert(!pump.accepting);
    connect_only(&second);
    h_run_passes(&pump, 5);
    ck_assert_uint_eq(pump.pool.nactive, 1);
    ck_assert_ptr_eq(pump.pool.active.next, client.conn);
    ck_assert(!h_saw_eof(&client));
    h_client_close(&second);
}
END_TEST

/* The lowest free descriptor: a soft limit of this makes the next
 * accept4() fail with EMFILE. */
static int next_fd(void)
{
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

    ck_assert_int_ge(fd, 0);
    close(fd);
    return fd;
}

static void set_nofile(rlim_t soft)
{
    struct rlimit rl;

    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rl.rlim_cur = soft;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

static bool is_paused(void *arg)
{
    (void)arg;
    return pump.accept_paused;
}

static bool nactive_two(void *arg)
{
    (void)arg;
    return pump.pool.nactive == 2;
}

/* Out of descriptors, the listener stops (no retry loop: one failure, one
 * log line), and a connection of ours closing resumes it at once. */
START_TEST(test_emfile_pauses_until_a_close)
{
    h_client_t second, third;
    char path[128], buf[4096];
    struct rlimit saved;
    ev_tstamp closed;
    FILE *f;
    size_t n;

    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &saved), 0);
    snprintf(path, sizeof(path), "%s/emfile.log", h_test_dir());
    ck_assert_int_eq(sl_log_open(path), 0);
    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    connect_only(&second);
    connect_only(&third);
    set_nofile((rlim_t)next_fd());
    ck_assert(h_run_until(&pump, is_paused, NULL));
    ck_assert(!pump.accepting);
    h_run_passes(&pump, 20);
    ck_assert_uint_eq(pump.accept_limit.total, 1); /* tried once, no spin */
    ck_assert_uint_eq(pump.pool.nactive, 1);
    /* our first client leaves: its descriptor is the next one's, taken
     * without waiting for the pause to end */
    closed = ev_time();
    h_client_close(&client);
    ck_assert(h_run_until(&pump, accepted, &second));
    ck_assert_double_lt(ev_time() - closed, SL_ACCEPTLIMIT_PAUSE);
    /* the client's own descriptor is free too: the third may follow */
    ck_assert_uint_le(pump.accept_limit.total, 2);
    set_nofile(saved.rlim_cur);
    ck_assert(h_run_until(&pump, nactive_two, NULL));
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    ck_assert_ptr_nonnull(
        strstr(buf, "accept4() failed: Too many open files; accepting paused"));
    h_client_close(&second);
    h_client_close(&third);
}
END_TEST

/* With no connection of ours to close, the pause ends on its timer. */
START_TEST(test_emfile_pause_ends_on_timer)
{
    h_client_t second;
    rlim_t low;

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    sl_log_set_level(SL_LOG_CRITICAL); /* its error line is expected */
    connect_only(&second);
    low = (rlim_t)next_fd();
    set_nofile(low);
    ck_assert(h_run_until(&pump, is_paused, NULL));
    set_nofile(low + 16);
    ck_assert(h_run_until(&pump, accepted, &second));
    ck_assert(!pump.accept_paused);
    ck_assert(pump.accepting);
    ck_assert_uint_eq(pump.accept_limit.total, 1);
    h_client_close(&second);
}
END_TEST

/* A drain during a pause: the listeners close and nothing resumes them
 * (no timer left armed). */
START_TEST(test_emfile_pause_then_drain)
{
    h_client_t second;
    struct rlimit saved;

    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &saved), 0);
    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    sl_log_set_level(SL_LOG_CRITICAL); /* its error line is expected */
    connect_only(&second);
    set_nofile((rlim_t)next_fd());
    ck_assert(h_run_until(&pump, is_paused, NULL));
    ck_assert(ev_is_active(&pump.accept_timer));
    pump.drain.draining = true; /* as sl_drain_prepare() does first */
    sl_listen_stop(&pump);
    set_nofile(saved.rlim_cur);
    ck_assert(!pump.accept_paused);
    ck_assert(!ev_is_active(&pump.accept_timer));
    h_run_passes(&pump, 5);
    ck_assert(!pump.accepting);
    ck_assert_int_eq(pump.listeners[0].fd, -1);
    ck_assert_uint_eq(pump.pool.nactive, 0);
    h_client_close(&second);
}
END_TEST

static Suite *pump_limits_suite(void)
{
    Suite *s = suite_create("pump_limits");
    TCase *tc;

    tc = tcase_create("limits");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_idle_evicted_for_new);
    tcase_add_test(tc, test_idle_with_request_waiting_kept);
    tcase_add_test(tc, test_fresh_connection_not_evicted);
    tcase_add_test(tc, test_emfile_pauses_until_a_close);
    tcase_add_test(tc, test_emfile_pause_ends_on_timer);
    tcase_add_test(tc, test_emfile_pause_then_drain);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pump_limits_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
