/* test_supervisor_replace.c - check suite for supervisor/supervisor.c,
 * the loop: health (hung workers aborted and replaced), replacing
 * workers (retiring, HUP's rolling restart, its surge, a new generation
 * that fails) and what systemd is told.
 *
 * The supervisor is told to exec /proc/self/exe as its workers (instead
 * of sluice-worker), so here the workers are this test program: main()
 * sees SLUICE_WORKER_ID and becomes a fake worker that speaks the control
 * channel, answers signals, and writes what happened to it as one line per
 * event in $FAKE_DIR/events. What a fake worker does is chosen by
 * $FAKE_MODE, set by the test before it forks the supervisor. Each test
 * then drives the supervisor with real signals and reads the events back.
 * The fake worker and the test's side of it are
 * tests/unit/supervisor_harness.h, which the test_supervisor*.c suites
 * share; how nothing here waits for a fixed time is said in
 * test_supervisor.c.
 */
#include "config.h"

#include <check.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/prctl.h>

#include "common/ctl.h"
#include "supervisor/listen.h"
#include "supervisor/supervisor.h"
#include "tests/unit/harness_base.h"
#include "tests/unit/supervisor_harness.h"

/* Let worker NUMBER become READY. */
static void open_gate(int number)
{
    char path[160];

    snprintf(path, sizeof(path), "%s/gate.%d", dir, number);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
}

/* LINE, LEN bytes long, contains TEXT. */
static bool line_has(const char *line, size_t len, const char *text)
{
    return memmem(line, len, text, strlen(text)) != NULL;
}

/* LINE, LEN bytes long, ends with TEXT. */
static bool line_ends(const char *line, size_t len, const char *text)
{
    size_t n = strlen(text);

    return len >= n && memcmp(line + len - n, text, n) == 0;
}

/* The most workers serving or booting at once, counted where the
 * supervisor decides: one more at each "Booting worker" in its log, one
 * fewer at each worker it tells to drain. --reload-surge bounds that; a
 * worker sent TERM no longer counts. The workers' events cannot count it:
 * the cycle that sends an old worker TERM starts a replacement at once,
 * which may record "start" before the old one records "term". */
static int most_serving(void)
{
    const char *line = h_file_text(sup_log_path);
    int alive = 0, most = 0;

    while (*line != '\0') {
        const char *eol = strchr(line, '\n');
        size_t len = eol != NULL ? (size_t)(eol - line) : strlen(line);
        if (line_has(line, len, "] Booting worker ")) {
            alive++;
            most = alive > most ? alive : most;
        } else if (line_ends(line, len, ": draining")) {
            alive--;
        }
        line += len + (eol != NULL);
    }
    return most;
}

/* ---- health ------------------------------------------------------------ */

/* Silence for --timeout: SIGABRT (tracebacks), then a replacement. */
START_TEST(test_no_heartbeat_aborts_and_replaces)
{
    pid_t sup = start_supervisor("hang", "-w", "2", "-t", "0.5", NULL);

    wait_events("abrt", 2, 10);
    wait_events("ready", 4, 10);
    event_t ev[MAX_EVENTS];
    int n = read_events(ev, MAX_EVENTS);
    for (int i = 0; i < n; i++) {
        if (strcmp(ev[i].what, "abrt") == 0) {
            /* 0.5 s of silence, measured from READY */
            ck_assert_msg(ev[i].at - ev[0].at > 0.4, "aborted too early");
        }
    }
    kill(sup, SIGTERM);
    assert_exit(wait_exit(sup, 10), SL_EXIT_OK);
}
END_TEST

/* A hung worker that dies only of the SIGKILL after its SIGABRT, with a
 * TERM to the supervisor in between: it was not asked to drain, so its
 * death is no unclean drain (exit 0). CI saw exit 1 once when a hung
 * worker was reaped after the stop began. */
START_TEST(test_hung_worker_killed_during_stop_is_not_unclean)
{
    pid_t sup = start_supervisor("hang-deaf", "-t", "0.5", NULL);

    wait_events("abrt", 1, 10);
    kill(sup, SIGTERM);
    assert_exit(wait_exit(sup, 10), SL_EXIT_OK);
}
END_TEST

/* Heartbeats keep coming, but every lane is stuck in one request. */
START_TEST(test_all_lanes_busy_aborts)
{
    pid_t sup = start_supervisor("busy", "-t", "0.5", NULL);

    wait_events("abrt", 1, 10);
    wait_events("ready", 2, 10);
    kill(sup, SIGTERM);
    assert_exit(wait_exit(sup, 10), SL_EXIT_OK);
}
END_TEST

/* One lane of two stuck is a slow request, not a hung worker: not after
 * a heartbeat that reports it stuck for four times --timeout. */
START_TEST(test_some_lanes_busy_is_not_hung)
{
    setenv("FAKE_AGED", "1.2", 1);
    pid_t sup = start_supervisor("busy-partial", "-t", "0.3", NULL);

    wait_events("ready", 1, 10);
    wait_events("aged", 1, WAIT_S);
    settle(sup); /* that heartbeat has been judged */
    ck_assert_int_eq(log_count("sending SIGABRT"), 0);
    ck_assert_int_eq(count_events("abrt"), 0);
    ck_assert_int_eq(count_events("start"), 1);
    stop_supervisor(sup);
}
END_TEST

/* ---- replacing workers ------------------------------------------------- */

/* RETIRE: the successor is started and READY before the old worker is
 * told to drain, so there is never a moment without a worker. */
START_TEST(test_retire_replaces_before_term)
{
    event_t ev[MAX_EVENTS];
    pid_t sup = start_supervisor("retire", NULL);

    wait_events("term", 1, 10);
    int n = read_events(ev, MAX_EVENTS);
    long old = first_pid("retire");
    double old_term = 0, new_ready = 0;
    ck_assert_int_ne(old, 0);
    for (int i = 0; i < n; i++) {
        if (strcmp(ev[i].what, "term") == 0 && ev[i].pid == old) {
            old_term = ev[i].at;
        }
        if (strcmp(ev[i].what, "ready") == 0 && ev[i].pid != old) {
            new_ready = ev[i].at;
        }
    }
    ck_assert(new_ready > 0 && old_term > 0);
    ck_assert_msg(new_ready <= old_term,
                  "old worker stopped at %.3f, before"
                  " its successor was ready at %.3f",
                  old_term, new_ready);
    stop_supervisor(sup);
    ck_assert_int_eq(count_events("start"), 2);
}
END_TEST

/* HUP with 3 workers, surge 1: every old worker is TERMed only after one
 * more new worker is READY, and never more than 4 serve or boot at once. */
START_TEST(test_hup_replaces_new_before_old)
{
    event_t ev[MAX_EVENTS];
    pid_t sup = start_supervisor("ready", "-w", "3", NULL);

    wait_events("ready", 3, 10);
    kill(sup, SIGHUP);
    wait_events("term", 3, 10);
    int n = read_events(ev, MAX_EVENTS);
    long old[3];
    int nold = 0, new_ready = 0, terms = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(ev[i].what, "ready") == 0 && nold < 3) {
            old[nold++] = ev[i].pid;
        } else if (strcmp(ev[i].what, "ready") == 0) {
            new_ready++;
        }
        if (strcmp(ev[i].what, "term") == 0) {
            terms++;
            ck_assert_msg(new_ready >= terms,
                          "old worker %ld stopped with"
                          " only %d replacements ready",
                          ev[i].pid, new_ready);
            ck_assert(ev[i].pid == old[0] || ev[i].pid == old[1] ||
                      ev[i].pid == old[2]);
        }
    }
    ck_assert_int_eq(new_ready, 3);
    int most = most_serving();
    ck_assert_msg(most <= 4, "%d serving or booting at once (surge 1)", most);
    stop_supervisor(sup);
    ck_assert_int_eq(count_events("start"), 6);
}
END_TEST

/* --reload-surge 2 with 3 workers: two replacements boot at once (both
 * start while neither may be READY), and still never more than target +
 * surge processes serve or boot. */
START_TEST(test_hup_surge)
{
    event_t ev[MAX_EVENTS];

    setenv("FAKE_GATE_FROM", "4", 1); /* the replacements wait */
    pid_t sup =
        start_supervisor("ready", "-w", "3", "--reload-surge", "2", NULL);

    wait_events("ready", 3, 10);
    kill(sup, SIGHUP);
    wait_events("start", 5, WAIT_S);
    settle(sup);
    ck_assert_int_eq(log_count("Booting worker"), 5); /* 3 + surge 2 */
    for (int i = 4; i <= 6; i++) {
        open_gate(i);
    }
    wait_events("term", 3, 10);
    int n = read_events(ev, MAX_EVENTS);
    int starts = 0;
    double second_start = 0, first_new_ready = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(ev[i].what, "start") == 0 && ++starts == 5) {
            second_start = ev[i].at;
        } else if (strcmp(ev[i].what, "ready") == 0 && starts > 3 &&
                   first_new_ready == 0) {
            first_new_ready = ev[i].at;
        }
    }
    int most = most_serving();
    ck_assert_msg(most == 5, "%d serving or booting at once (3 + surge 2)",
                  most);
    ck_assert_msg(second_start < first_new_ready,
                  "the second replacement waited for the first");
    stop_supervisor(sup);
}
END_TEST

/* A replacement that cannot load the app ends the rolling restart: the old
 * worker serves on, nothing else is tried, systemd hears why. */
START_TEST(test_hup_failure_keeps_old_generation)
{
    h_notify_open(&nt, false);
    setenv("WATCHDOG_USEC", "200000", 1); /* its clock, seen from here */
    pid_t sup = start_supervisor("late-appload", NULL);

    wait_events("ready", 1, 10);
    wait_note("READY=1", 0, 10);
    long old = first_pid("ready");
    kill(sup, SIGHUP);
    int r = wait_note("RELOADING=1", 0, 10);
    int f = wait_note("READY=1", r + 1, 10);
    ck_assert_ptr_nonnull(strstr(nt.text[f], "reload failed"));
    /* A retry would come after the 0.1 s backoff: wait for the supervisor
     * to ping the watchdog 0.5 s after the failure, then for a cycle after
     * that one to end. */
    double after = nt.at[f] + 0.5;
    int ping = f;
    do {
        ping = wait_note("WATCHDOG=1", ping + 1, WAIT_S);
    } while (nt.at[ping] < after);
    settle(sup);
    ck_assert_int_eq(log_count("Booting worker"), 2);
    ck_assert_int_eq(count_events("appload"), 1); /* no retry loop */
    ck_assert_int_eq(count_events("term"), 0);
    ck_assert_int_eq(kill(old, 0), 0);
    stop_supervisor(sup);
    ck_assert_int_eq(first_pid("term"), old);
}
END_TEST

/* ---- systemd ----------------------------------------------------------- */

/* READY=1 once every worker is ready (not when the first is), WATCHDOG=1
 * at half of WATCHDOG_USEC, a HUP that arrives during the first boot
 * deferred until after READY=1, STOPPING=1 on TERM. */
START_TEST(test_notify_sequence)
{
    h_notify_open(&nt, false);
    setenv("WATCHDOG_USEC", "200000", 1);
    setenv("FAKE_GATE_FROM", "1", 1); /* every worker waits at its gate */
    pid_t sup = start_supervisor("ready", "-w", "2", NULL);

    wait_events("start", 2, WAIT_S);
    kill(sup, SIGHUP); /* workers still booting */
    wait_log("the rolling restart begins once every worker is ready", 1,
             WAIT_S);
    open_gate(1);
    open_gate(2);
    int ready = wait_note("READY=1", 0, 10);
    ck_assert_int_eq(count_events("ready"), 2);
    ck_assert_ptr_nonnull(strstr(nt.text[ready], "STATUS=2/2 workers ready"));
    int reloading = wait_note("RELOADING=1", ready, 10);
    ck_assert_ptr_nonnull(strstr(nt.text[reloading], "MONOTONIC_USEC="));
    open_gate(3);
    open_gate(4);
    int again = wait_note("READY=1", reloading + 1, 10);
    ck_assert_int_eq(count_events("ready"), 4);
    int fifth = -1;
    for (int i = 0; i < 5; i++) {
        fifth = wait_note("WATCHDOG=1", fifth + 1, WAIT_S);
    }
    kill(sup, SIGTERM);
    assert_exit(wait_exit(sup, 10), SL_EXIT_OK);
    int stopping = wait_note("STOPPING=1", again, 2);
    ck_assert_int_eq(h_notify_find(&nt, "READY=1", stopping), -1);
    int pings = h_notify_count(&nt, "WATCHDOG=1");
    ck_assert_msg(pings >= 5, "%d watchdog pings", pings);
}
END_TEST

static Suite *supervisor_replace_suite(void)
{
    Suite *s = suite_create("supervisor_replace");
    TCase *health = tcase_create("health");
    TCase *replace = tcase_create("replacing");
    TCase *sd = tcase_create("systemd");
    TCase *all[] = {health, replace, sd};

    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        tcase_set_timeout(all[i], 30);
        tcase_add_unchecked_fixture(all[i], h_dir_make, h_dir_remove);
        tcase_add_checked_fixture(all[i], setup, teardown);
        suite_add_tcase(s, all[i]);
    }
    tcase_add_test(health, test_no_heartbeat_aborts_and_replaces);
    tcase_add_test(health, test_hung_worker_killed_during_stop_is_not_unclean);
    tcase_add_test(health, test_all_lanes_busy_aborts);
    tcase_add_test(health, test_some_lanes_busy_is_not_hung);
    tcase_add_test(replace, test_retire_replaces_before_term);
    tcase_add_test(replace, test_hup_replaces_new_before_old);
    tcase_add_test(replace, test_hup_surge);
    tcase_add_test(replace, test_hup_failure_keeps_old_generation);
    tcase_add_test(sd, test_notify_sequence);
    return s;
}

int main(void)
{
    if (getenv("SLUICE_WORKER_ID") != NULL) {
        return fake_worker();
    }

    SRunner *sr = srunner_create(supervisor_replace_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
