/* test_notify.c - check suite for supervisor/notify.c, what the supervisor
 * tells systemd.
 *
 * Each test owns the NOTIFY_SOCKET (harness_base.h's h_notify_*: a datagram
 * socket bound in the test's directory) and reads back the exact
 * datagrams; how they travel (a path or an abstract name) is sd.c's, and
 * test_sd's. A message that must *not* be sent is checked by sending a
 * marker after it (WATCHDOG=1) and finding the marker next: datagrams from
 * one sender arrive in order.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>

#include "supervisor/notify.h"
#include "tests/unit/harness_base.h"

#define WAIT_S 2.0

static h_notify_t nt = {.fd = -1};

static void setup(void)
{
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    h_log_to_file();
}

static void teardown(void)
{
    h_notify_close(&nt);
}

/* Wait until N datagrams have come; the Nth (1-based). */
static const char *note(int n)
{
    ck_assert_msg(h_notify_wait(&nt, "", n - 1, WAIT_S) == n - 1,
                  "%d datagrams, waited for %d", nt.n, n);
    return nt.text[n - 1];
}

/* Occurrences of TEXT in the log. */
static int log_count(const char *text)
{
    int k = 0;

    for (const char *p = h_log_text(); (p = strstr(p, text)) != NULL; p++)
        k++;
    return k;
}

/* ---- the messages ----------------------------------------------------- */

START_TEST(test_ready)
{
    h_notify_open(&nt, false);
    sl_notify_ready("2/2 workers ready");
    ck_assert_str_eq(note(1), "READY=1\nSTATUS=2/2 workers ready");
}
END_TEST

/* RELOADING=1 carries the moment on CLOCK_MONOTONIC, in microseconds, as
 * systemd's Type=notify-reload wants it. */
START_TEST(test_reloading_carries_monotonic_usec)
{
    struct timespec ts;
    unsigned long long usec, before, after;
    char status[64];

    h_notify_open(&nt, false);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    before = (unsigned long long)ts.tv_sec * 1000000 +
             (unsigned long long)ts.tv_nsec / 1000;
    sl_notify_reloading("Reloading");
    clock_gettime(CLOCK_MONOTONIC, &ts);
    after = (unsigned long long)ts.tv_sec * 1000000 +
            (unsigned long long)ts.tv_nsec / 1000;
    const char *m = note(1);
    ck_assert_msg(sscanf(m, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=%63[^\n]",
                         &usec, status) == 2,
                  "not a RELOADING message: %s", m);
    ck_assert_str_eq(status, "Reloading");
    ck_assert_msg(usec >= before && usec <= after, "%llu not in [%llu, %llu]",
                  usec, before, after);
}
END_TEST

START_TEST(test_stopping)
{
    h_notify_open(&nt, false);
    sl_notify_stopping("Stopping (draining)");
    ck_assert_str_eq(note(1), "STOPPING=1\nSTATUS=Stopping (draining)");
}
END_TEST

START_TEST(test_mainpid)
{
    h_notify_open(&nt, false);
    sl_notify_mainpid(4321, true, "taken over");
    sl_notify_mainpid(4321, false, "handed over");
    ck_assert_str_eq(note(1), "MAINPID=4321\nREADY=1\nSTATUS=taken over");
    ck_assert_str_eq(note(2), "MAINPID=4321\nSTATUS=handed over");
}
END_TEST

START_TEST(test_watchdog)
{
    h_notify_open(&nt, false);
    sl_notify_watchdog();
    ck_assert_str_eq(note(1), "WATCHDOG=1");
}
END_TEST

/* The variable stays: the supervisor notifies for as long as it lives, and
 * a binary upgrade's new supervisor needs it too. */
START_TEST(test_socket_variable_is_kept)
{
    h_notify_open(&nt, false);
    sl_notify_ready("one");
    sl_notify_watchdog();
    ck_assert_str_eq(getenv("NOTIFY_SOCKET"), nt.name);
    ck_assert_str_eq(note(2), "WATCHDOG=1");
}
END_TEST

/* ---- STATUS= ---------------------------------------------------------- */

START_TEST(test_status_only_when_changed)
{
    h_notify_open(&nt, false);
    sl_notify_status("a");
    sl_notify_status("a");
    sl_notify_status("b");
    sl_notify_status("b");
    sl_notify_status("a");
    sl_notify_watchdog(); /* the marker */
    ck_assert_str_eq(note(1), "STATUS=a");
    ck_assert_str_eq(note(2), "STATUS=b");
    ck_assert_str_eq(note(3), "STATUS=a");
    ck_assert_str_eq(note(4), "WATCHDOG=1");
}
END_TEST

/* The state changes carry a STATUS= too; a refresh with the same text
 * after them is not news. */
START_TEST(test_state_changes_set_the_last_status)
{
    h_notify_open(&nt, false);
    sl_notify_ready("serving");
    sl_notify_status("serving");
    sl_notify_stopping("stopping");
    sl_notify_status("stopping");
    sl_notify_mainpid(99, false, "over");
    sl_notify_status("over");
    sl_notify_reloading("reloading");
    sl_notify_status("reloading");
    sl_notify_status("done");
    sl_notify_watchdog();
    ck_assert_ptr_nonnull(strstr(note(1), "READY=1"));
    ck_assert_ptr_nonnull(strstr(note(2), "STOPPING=1"));
    ck_assert_ptr_nonnull(strstr(note(3), "MAINPID=99"));
    ck_assert_ptr_nonnull(strstr(note(4), "RELOADING=1"));
    ck_assert_str_eq(note(5), "STATUS=done");
    ck_assert_str_eq(note(6), "WATCHDOG=1");
}
END_TEST

/* A status longer than a datagram's room is cut, not dropped. */
START_TEST(test_long_status_is_cut)
{
    char status[1000];

    memset(status, 'x', sizeof(status) - 1);
    status[sizeof(status) - 1] = '\0';
    h_notify_open(&nt, false);
    sl_notify_status(status);
    sl_notify_status(status);
    sl_notify_watchdog();
    const char *m = note(1);
    ck_assert_int_eq(strncmp(m, "STATUS=xxx", 10), 0);
    ck_assert_uint_gt(strlen(m), 500);
    ck_assert_uint_lt(strlen(m), strlen(status));
    ck_assert_str_eq(note(2), "WATCHDOG=1");
}
END_TEST

/* ---- without systemd -------------------------------------------------- */

/* No NOTIFY_SOCKET: nothing is sent and nothing is logged. */
START_TEST(test_no_socket_is_a_no_op)
{
    sl_notify_ready("r");
    sl_notify_reloading("r");
    sl_notify_stopping("s");
    sl_notify_status("s");
    sl_notify_mainpid(1, true, "m");
    sl_notify_watchdog();
    ck_assert_str_eq(h_log_text(), "");
}
END_TEST

/* A socket nobody listens on: the supervisor goes on, with a warning. */
START_TEST(test_unreachable_socket_is_logged_not_fatal)
{
    char path[160];

    snprintf(path, sizeof(path), "%s/nobody", h_test_dir());
    setenv("NOTIFY_SOCKET", path, 1);
    sl_notify_ready("r");
    sl_notify_ready("r");
    ck_assert_int_eq(log_count("sd_notify(READY) failed"), 1);
    ck_assert_int_eq(log_count("[WARNING]"), 1);
}
END_TEST

/* notify.h: "A failed send is logged once per kind of message": the
 * operator learns that READY could not be sent even when WATCHDOG failed
 * first, and the once-a-second pings do not flood the log. */
START_TEST(test_failed_send_logged_once_per_kind)
{
    char path[160];

    snprintf(path, sizeof(path), "%s/nobody", h_test_dir());
    setenv("NOTIFY_SOCKET", path, 1);
    sl_notify_watchdog();
    sl_notify_watchdog();
    sl_notify_ready("r");
    sl_notify_ready("r");
    sl_notify_status("a");
    sl_notify_status("b");
    sl_notify_stopping("s");
    sl_notify_watchdog();
    ck_assert_int_eq(log_count("sd_notify(WATCHDOG) failed"), 1);
    ck_assert_int_eq(log_count("sd_notify(READY) failed"), 1);
    ck_assert_int_eq(log_count("sd_notify(STATUS) failed"), 1);
    ck_assert_int_eq(log_count("sd_notify(STOPPING) failed"), 1);
    ck_assert_int_eq(log_count("[WARNING]"), 4);
}
END_TEST

/* ---- the watchdog interval -------------------------------------------- */

START_TEST(test_watchdog_interval)
{
    char pid[32];

    ck_assert(sl_notify_watchdog_interval() == 0); /* not asked for */
    setenv("WATCHDOG_USEC", "200000", 1);
    ck_assert(sl_notify_watchdog_interval() == 0.1);
    snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    setenv("WATCHDOG_PID", pid, 1);
    ck_assert(sl_notify_watchdog_interval() == 0.1);
    /* kept for a binary upgrade's new supervisor */
    ck_assert_str_eq(getenv("WATCHDOG_USEC"), "200000");
    ck_assert_str_eq(getenv("WATCHDOG_PID"), pid);

    snprintf(pid, sizeof(pid), "%ld", (long)getppid());
    setenv("WATCHDOG_PID", pid, 1); /* meant for another process */
    ck_assert(sl_notify_watchdog_interval() == 0);
    ck_assert_str_eq(h_log_text(), "");
}
END_TEST

START_TEST(test_bad_watchdog_usec_is_logged)
{
    setenv("WATCHDOG_USEC", "soon", 1);
    ck_assert(sl_notify_watchdog_interval() == 0);
    ck_assert_int_eq(log_count("WATCHDOG_USEC='soon' is not a number"), 1);
}
END_TEST

static Suite *notify_suite(void)
{
    Suite *s = suite_create("notify");
    TCase *msg = tcase_create("messages");
    TCase *status = tcase_create("status");
    TCase *none = tcase_create("without systemd");
    TCase *wd = tcase_create("watchdog");
    TCase *all[] = {msg, status, none, wd};

    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        tcase_add_unchecked_fixture(all[i], h_dir_make, h_dir_remove);
        tcase_add_checked_fixture(all[i], setup, teardown);
        suite_add_tcase(s, all[i]);
    }
    tcase_add_test(msg, test_ready);
    tcase_add_test(msg, test_reloading_carries_monotonic_usec);
    tcase_add_test(msg, test_stopping);
    tcase_add_test(msg, test_mainpid);
    tcase_add_test(msg, test_watchdog);
    tcase_add_test(msg, test_socket_variable_is_kept);
    tcase_add_test(status, test_status_only_when_changed);
    tcase_add_test(status, test_state_changes_set_the_last_status);
    tcase_add_test(status, test_long_status_is_cut);
    tcase_add_test(none, test_no_socket_is_a_no_op);
    tcase_add_test(none, test_unreachable_socket_is_logged_not_fatal);
    tcase_add_test(none, test_failed_send_logged_once_per_kind);
    tcase_add_test(wd, test_watchdog_interval);
    tcase_add_test(wd, test_bad_watchdog_usec_is_logged);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(notify_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
