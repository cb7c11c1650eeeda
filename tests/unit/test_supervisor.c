/* test_supervisor.c - check suite for supervisor/supervisor.c, the loop:
 * signals, deaths and boots. Health, rolling restarts and what systemd is
 * told are test_supervisor_replace.c's; the modules it uses have suites
 * of their own.
 *
 * The supervisor is told to exec /proc/self/exe as its workers (instead
 * of sluice-worker), so here the workers are this test program: main()
 * sees SLUICE_WORKER_ID and becomes a fake worker that speaks the control
 * channel, answers signals, and writes what happened to it as one line per
 * event in $FAKE_DIR/events. What a fake worker does is chosen by $FAKE_MODE,
 * set by the test before it forks the supervisor. Each test then drives the
 * supervisor with real signals and reads the events back; the ones about
 * systemd also own a NOTIFY_SOCKET (harness_base.h's h_notify_*) and read what
 * the supervisor told it. The fake worker and the test's side of it are
 * tests/unit/supervisor_harness.h, which the test_supervisor*.c suites
 * share.
 *
 * Nothing waits for a fixed time. A test waits, bounded, for the event
 * that proves the state it needs: a worker's event line, a line in the
 * supervisor's own log (it logs to a file here, at INFO), a datagram, the
 * supervisor's exit. A worker that must not be READY yet waits at a gate
 * (a file the test creates). A check that something did *not* happen
 * first makes the supervisor show it has acted on everything it had
 * received (settle()), then reads the log, where the supervisor says what
 * it does in the same cycle() that does it.
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

/* Let every "drains" worker end its drain, now and from now on. */
static void open_drain_gate(void)
{
    char path[160];

    snprintf(path, sizeof(path), "%s/drained", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
}

/* ---- signals ----------------------------------------------------------- */

START_TEST(test_term_stops_cleanly)
{
    pid_t sup = start_supervisor("ready", "-w", "2", NULL);

    wait_events("ready", 2, 10);
    ck_assert_int_eq(count_events("env-ok"), 2);
    ck_assert_int_eq(count_events("env-bad"), 0);
    kill(sup, SIGTERM);
    assert_exit(wait_exit(sup, 10), SL_EXIT_OK);
    ck_assert_int_eq(count_events("term"), 2);
    ck_assert_int_eq(count_events("start"), 2);
}
END_TEST

/* gunicorn's way to replace one worker: TERM to that worker alone. The
 * supervisor lets it go and boots another while it drains; also when it
 * has nothing to drain and is gone at once. */
START_TEST(test_term_to_one_worker_replaces_it)
{
    event_t ev[MAX_EVENTS];
    pid_t sup = start_supervisor("drains", "-w", "2", NULL);

    wait_log("All 2 workers are ready", 1, WAIT_S);
    long first = first_pid("ready"), second = 0;
    int n = read_events(ev, MAX_EVENTS);
    for (int i = 0; i < n && second == 0; i++) {
        if (strcmp(ev[i].what, "ready") == 0 && ev[i].pid != first) {
            second = ev[i].pid;
        }
    }
    ck_assert_int_eq(kill((pid_t)first, SIGTERM), 0);
    wait_log("is draining on its own", 1, WAIT_S);
    wait_events("ready", 3, WAIT_S); /* its successor, while it drains */
    ck_assert_int_eq(log_count("exited with code"), 0);
    open_drain_gate();
    wait_log("exited with code 0", 1, WAIT_S);

    ck_assert_int_eq(kill((pid_t)second, SIGTERM), 0); /* gone at once */
    wait_events("ready", 4, WAIT_S);
    stop_supervisor(sup);
    ck_assert_int_eq(count_events("start"), 4);
    ck_assert_int_eq(log_count("Booting worker"), 4);
    ck_assert_int_eq(log_count("exited with code 0"), 4);
}
END_TEST

/* TERM to the whole process group (kill -- -PGID, timeout(1), a process
 * manager): every worker drains on its copy, and may say so before the
 * supervisor has acted on its own. That is a stop: no worker is replaced,
 * and every exit is logged. Which comes first is the scheduler's choice,
 * hence several rounds. */
START_TEST(test_term_to_the_group_replaces_nobody)
{
    own_group = true;
    open_drain_gate(); /* nothing in flight: each drain ends at once */
    for (int round = 0; round < 10; round++) {
        unlink(events_path);
        unlink(sup_log_path);
        pid_t sup = start_supervisor("drains", "-w", "2", NULL);
        wait_log("All 2 workers are ready", 1, WAIT_S);
        ck_assert_int_eq(kill(-sup, SIGTERM), 0);
        assert_exit(wait_exit(sup, WAIT_S), SL_EXIT_OK);
        ck_assert_msg(log_count("Booting worker") == 2 &&
                          log_count("exited with code 0") == 2,
                      "round %d: a worker replaced or an exit not logged:\n%s",
                      round, h_file_text(sup_log_path));
        ck_assert_int_eq(count_events("start"), 2);
    }
}
END_TEST

/* Every worker started has its exit in the log at INFO, as its boot: also
 * one that a stop killed while it booted (a fast stop: SIGKILL). */
START_TEST(test_every_exit_is_logged)
{
    setenv("FAKE_GATE_FROM", "2", 1); /* the second one stays booting */
    pid_t sup = start_supervisor("ready", "-w", "2", NULL);

    wait_events("start", 2, WAIT_S);
    wait_log("is ready", 1, WAIT_S);
    kill(sup, SIGINT);
    assert_exit(wait_exit(sup, WAIT_S), SL_EXIT_OK);
    ck_assert_int_eq(log_count("Booting worker"), 2);
    ck_assert_int_eq(log_count("exited with code 0"), 1);
    ck_assert_msg(log_count("was killed by signal 9") == 1, "log:\n%s",
                  h_file_text(sup_log_path));
}
END_TEST

/* A fast stop kills a worker the supervisor still counts as booting, so
 * each signal waits for READY=1: the supervisor has seen every worker's
 * ready message, not only the workers sent theirs. */
START_TEST(test_int_and_quit_are_passed_on)
{
    h_notify_open(&nt, false);
    pid_t sup = start_supervisor("ready", "-w", "2", NULL);

    wait_events("ready", 2, 10);
    int ready = wait_note("READY=1", 0, 10);
    kill(sup, SIGINT);
    assert_exit(wait_exit(sup, 10), SL_EXIT_OK);
    ck_assert_int_eq(count_events("int"), 2);

    ck_assert_int_eq(unlink(events_path), 0);
    sup = start_supervisor("ready", NULL);
    wait_events("ready", 1, 10);
    wait_note("READY=1", ready + 1, 10);
    kill(sup, SIGQUIT);
    assert_exit(wait_exit(sup, 10), SL_EXIT_OK);
    ck_assert_int_eq(count_events("quit"), 1);
}
END_TEST

START_TEST(test_graceful_timeout_ends_in_sigkill)
{
    pid_t sup =
        start_supervisor("ignore-term", "--graceful-timeout", "0.2", NULL);

    wait_events("ready", 1, 10);
    double t0 = h_now();
    kill(sup, SIGTERM);
    int status = wait_exit(sup, 10);
    double took = h_now() - t0;
    assert_exit(status, SL_EXIT_FAIL); /* a worker had to be killed */
    ck_assert_msg(took > 1.0 && took < 3.0, "stop took %.2fs", took);
}
END_TEST

START_TEST(test_ttin_ttou_usr1)
{
    pid_t sup = start_supervisor("ready", NULL);

    wait_events("ready", 1, 10);
    kill(sup, SIGTTIN);
    wait_events("ready", 2, 10);
    kill(sup, SIGUSR1);
    wait_events("usr1", 2, 10);
    kill(sup, SIGTTOU);
    wait_events("term", 1, 10);
    wait_log("exited with code 0", 1, WAIT_S); /* reaped */
    settle(sup); /* a replacement would be spawned by now */
    ck_assert_int_eq(log_count("Booting worker"), 2);
    ck_assert_int_eq(count_events("start"), 2); /* no replacement */
    kill(sup, SIGTERM);
    assert_exit(wait_exit(sup, 10), SL_EXIT_OK);
    ck_assert_int_eq(count_events("term"), 2);
}
END_TEST

START_TEST(test_pidfile)
{
    char path[160], buf[32] = "";

    snprintf(path, sizeof(path), "%s/sluice.pid", dir);
    pid_t sup = start_supervisor("ready", "--pid", path, NULL);
    wait_events("ready", 1, 10);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
    fclose(f);
    ck_assert_int_eq(atol(buf), sup);
    kill(sup, SIGTERM);
    assert_exit(wait_exit(sup, 10), SL_EXIT_OK);
    ck_assert_int_eq(access(path, F_OK), -1);
}
END_TEST

/* ---- deaths and boots -------------------------------------------------- */

START_TEST(test_appload_stops_with_usage_status)
{
    pid_t sup = start_supervisor("appload", "-w", "3", NULL);

    assert_exit(wait_exit(sup, 10), SL_EXIT_USAGE);
    ck_assert_int_ge(count_events("appload"), 1);
    ck_assert_int_le(count_events("start"), 3); /* no second round */
}
END_TEST

/* Once a worker has been ready, an import failure is a crash to retry (a
 * deploy may be half done), not a reason to stop serving. */
START_TEST(test_appload_after_ready_is_retried)
{
    event_t ev[MAX_EVENTS];
    pid_t sup = start_supervisor("late-appload", NULL);

    wait_events("ready", 1, 10);
    int n = read_events(ev, MAX_EVENTS);
    ck_assert_int_ge(n, 1);
    kill(ev[n - 1].pid, SIGKILL);
    wait_events("appload", 2, 10);
    stop_supervisor(sup);
}
END_TEST

START_TEST(test_crash_respawn_backs_off)
{
    event_t ev[MAX_EVENTS];
    double start[MAX_EVENTS];
    int k = 0;
    pid_t sup = start_supervisor("crash", NULL);

    wait_events("start", 5, WAIT_S); /* backoff 0.1 0.2 0.4 0.8: ~1.5s */
    kill(sup, SIGTERM);
    assert_exit(wait_exit(sup, 10), SL_EXIT_OK);

    int n = read_events(ev, MAX_EVENTS);
    for (int i = 0; i < n; i++) {
        if (strcmp(ev[i].what, "start") == 0) {
            start[k++] = ev[i].at;
        }
    }
    /* Without backoff it would be hundreds. The gaps are compared far
     * apart (0.1 s against 0.4 s or more) so that start-up jitter on a busy
     * machine cannot flip the comparison. */
    ck_assert_msg(k >= 4 && k <= 7, "%d starts when the fifth was seen", k);
    double first = start[1] - start[0];
    double last = start[k - 1] - start[k - 2];
    ck_assert_msg(last > 2 * first, "last gap %.3fs, first %.3fs: no backoff",
                  last, first);
}
END_TEST

/* Four workers dying together are one round of backoff, not four: the
 * delay must not jump to seconds after one bad deploy. */
START_TEST(test_backoff_counts_rounds_not_deaths)
{
    pid_t sup = start_supervisor("crash", "-w", "4", NULL);

    /* Rounds at 0, 0.1, 0.3, 0.7: 16 starts in under a second. Counted per
     * death, the delay would reach seconds after the first round. */
    wait_events("start", 16, 5);
    kill(sup, SIGTERM);
    assert_exit(wait_exit(sup, 10), SL_EXIT_OK);
    int k = count_events("start");
    ck_assert_msg(k >= 12 && k <= 24, "%d starts of 4 workers", k);
}
END_TEST

START_TEST(test_boot_timeout_gives_up)
{
    double t0 = h_now();
    pid_t sup =
        start_supervisor("slowboot", "-w", "2", "--boot-timeout", "0.5", NULL);

    int status = wait_exit(sup, 10);
    double took = h_now() - t0;
    assert_exit(status, SL_EXIT_FAIL);
    ck_assert_msg(took > 0.4 && took < 4.0, "gave up after %.2fs", took);
    ck_assert_int_eq(count_events("abrt"), 2); /* tracebacks asked for */
    ck_assert_int_eq(count_events("ready"), 0);
}
END_TEST

static Suite *supervisor_suite(void)
{
    Suite *s = suite_create("supervisor");
    TCase *sig = tcase_create("signals");
    TCase *life = tcase_create("deaths");
    TCase *all[] = {sig, life};

    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        tcase_set_timeout(all[i], 30);
        tcase_add_unchecked_fixture(all[i], h_dir_make, h_dir_remove);
        tcase_add_checked_fixture(all[i], setup, teardown);
        suite_add_tcase(s, all[i]);
    }
    tcase_add_test(sig, test_term_stops_cleanly);
    tcase_add_test(sig, test_term_to_one_worker_replaces_it);
    tcase_add_test(sig, test_term_to_the_group_replaces_nobody);
    tcase_add_test(sig, test_int_and_quit_are_passed_on);
    tcase_add_test(sig, test_every_exit_is_logged);
    tcase_add_test(sig, test_graceful_timeout_ends_in_sigkill);
    tcase_add_test(sig, test_ttin_ttou_usr1);
    tcase_add_test(sig, test_pidfile);
    tcase_add_test(life, test_appload_stops_with_usage_status);
    tcase_add_test(life, test_appload_after_ready_is_retried);
    tcase_add_test(life, test_crash_respawn_backs_off);
    tcase_add_test(life, test_backoff_counts_rounds_not_deaths);
    tcase_add_test(life, test_boot_timeout_gives_up);
    return s;
}

int main(void)
{
    if (getenv("SLUICE_WORKER_ID") != NULL) {
        return fake_worker();
    }

    SRunner *sr = srunner_create(supervisor_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
