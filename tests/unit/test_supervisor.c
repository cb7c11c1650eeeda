/* test_supervisor.c - check suite for supervisor/supervisor.c and spawn.c.
 *
 * The supervisor execs /proc/self/exe as its workers, so here the workers
 * are this test program: main() sees SLUICE_WORKER_ID and becomes a fake
 * worker that speaks the control channel, answers signals, and writes what
 * happened to it as one line per event in $FAKE_DIR/events. What a fake
 * worker does is chosen by $FAKE_MODE, set by the test before it forks the
 * supervisor. Each test then drives the supervisor with real signals and
 * reads the events back.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/ctl.h"
#include "common/log.h"
#include "common/options.h"
#include "supervisor/listen.h"
#include "supervisor/supervisor.h"

#define MAX_EVENTS 256

typedef struct {
    char what[16]; /* start, ready, term, int, usr1, exit, env-ok, ... */
    long pid;
    int id;    /* SLUICE_WORKER_ID */
    double at; /* CLOCK_MONOTONIC seconds */
} event_t;

static char dir[] = "/tmp/sl-test-sup-XXXXXX";
static char events_path[64];

/* ---- the fake worker ------------------------------------------------- */

static volatile sig_atomic_t got_signal;

static double mono_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void record(const char *what)
{
    char line[128];
    const char *fdir = getenv("FAKE_DIR");
    const char *id = getenv("SLUICE_WORKER_ID");
    char path[128];

    snprintf(path, sizeof(path), "%s/events", fdir ? fdir : ".");
    int n = snprintf(line, sizeof(line), "%s %ld %s %.6f\n", what,
                     (long)getpid(), id ? id : "-", mono_now());
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd >= 0) {
        ssize_t w = write(fd, line, (size_t)n);
        (void)w;
        close(fd);
    }
}

static void on_fake_signal(int sig)
{
    got_signal = sig;
}

static void send_ctl(int fd, uint32_t type)
{
    sl_ctl_msg_t m = {.type = type, .pid = (uint32_t)getpid()};
    sl_ctl_send(fd, &m);
}

/* What a worker is promised: the listeners open and listening, a SEQPACKET
 * control socket, SIGTERM on the supervisor's death, no blocked signal. */
static void check_inheritance(int ctl)
{
    const char *list = getenv("SLUICE_LISTEN_FDS");
    int type = 0, on = 0, sig = 0;
    socklen_t len = sizeof(type);
    sigset_t mask;

    if (list == NULL) {
        record("env-bad");
        return;
    }
    int lfd = atoi(list);
    socklen_t olen = sizeof(on);
    getsockopt(lfd, SOL_SOCKET, SO_ACCEPTCONN, &on, &olen);
    getsockopt(ctl, SOL_SOCKET, SO_TYPE, &type, &len);
    prctl(PR_GET_PDEATHSIG, &sig);
    sigprocmask(SIG_SETMASK, NULL, &mask);
    bool ok = on == 1 && type == SOCK_SEQPACKET && sig == SIGTERM &&
              !sigismember(&mask, SIGTERM) && !sigismember(&mask, SIGCHLD);
    record(ok ? "env-ok" : "env-bad");
}

/* FAKE_MODE: ready (READY, then wait for a signal), appload (exit 3),
 * crash (exit 1 at once), ignore-term (READY, deaf to TERM), retire (READY,
 * then RETIRE, the first worker only), late-appload (the first worker is
 * READY, every later one exits 3). */
static int fake_worker(void)
{
    const char *mode = getenv("FAKE_MODE");
    const char *ctl_env = getenv("SLUICE_CTL_FD");
    int ctl = ctl_env ? atoi(ctl_env) : -1;
    char marker[128];
    struct sigaction sa = {.sa_handler = on_fake_signal};
    sigset_t block, old;

    mode = mode ? mode : "ready";
    record("start");
    check_inheritance(ctl);
    snprintf(marker, sizeof(marker), "%s/first", getenv("FAKE_DIR"));
    bool first = open(marker, O_CREAT | O_EXCL | O_WRONLY, 0644) >= 0;

    if (strcmp(mode, "appload") == 0 ||
        (strcmp(mode, "late-appload") == 0 && !first)) {
        record("appload");
        return SL_EXIT_APPLOAD;
    }
    if (strcmp(mode, "crash") == 0) {
        return 1;
    }

    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGQUIT);
    sigaddset(&block, SIGUSR1);
    sigprocmask(SIG_BLOCK, &block, &old);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGQUIT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    if (strcmp(mode, "ignore-term") == 0) {
        signal(SIGTERM, SIG_IGN);
    } else {
        sigaction(SIGTERM, &sa, NULL);
    }

    /* recorded before sent: the supervisor may act on it at once */
    record("ready");
    send_ctl(ctl, SL_CTL_READY);
    if (strcmp(mode, "retire") == 0 && first) {
        record("retire");
        send_ctl(ctl, SL_CTL_RETIRE);
    }
    for (;;) {
        got_signal = 0;
        sigsuspend(&old);
        switch (got_signal) {
        case SIGUSR1:
            record("usr1");
            break;
        case SIGTERM:
            record("term");
            return 0;
        case SIGINT:
            record("int");
            return 0;
        case SIGQUIT:
            record("quit");
            return 0;
        default:
            break;
        }
    }
}

/* ---- the tests --------------------------------------------------------- */

static void setup(void)
{
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(events_path, sizeof(events_path), "%s/events", dir);
    setenv("FAKE_DIR", dir, 1);
    sl_log_set_level(SL_LOG_WARNING);
}

static void teardown(void)
{
    char cmd[64];

    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Fork a supervisor running MODE workers with "sluice ARGS... m:a"; ARGS
 * is NULL-terminated. Returns its pid. */
static pid_t start_supervisor(const char *mode, ...)
{
    va_list ap;
    char *argv[32];
    int argc = 0;

    setenv("FAKE_MODE", mode, 1);
    argv[argc++] = "test_supervisor";
    va_start(ap, mode);
    for (char *a; (a = va_arg(ap, char *)) != NULL;) {
        argv[argc++] = a;
    }
    va_end(ap);
    argv[argc++] = "m:a";
    argv[argc] = NULL;

    pid_t pid = fork();
    ck_assert_int_ne(pid, -1);
    if (pid == 0) {
        /* No ck_* here: this process is the supervisor now. */
        static sl_options_t o;
        sl_listener_t ls[1];
        if (sl_options_parse(&o, argc, argv) != 0) {
            _exit(100);
        }
        o.binds[0] = "127.0.0.1:0";
        o.nbinds = 1;
        if (sl_listen_open(&o, ls, 1) != 1) {
            _exit(101);
        }
        int rc = sl_supervisor_run(&o, argv, ls, 1);
        sl_listen_close(ls, 1, true);
        _exit(rc);
    }
    return pid;
}

/* Events so far, in file order. */
static int read_events(event_t *ev, int max)
{
    FILE *f = fopen(events_path, "r");
    int n = 0;

    if (f == NULL) {
        return 0;
    }
    while (n < max && fscanf(f, "%15s %ld %d %lf", ev[n].what, &ev[n].pid,
                             &ev[n].id, &ev[n].at) == 4) {
        n++;
    }
    fclose(f);
    return n;
}

static int count_events(const char *what)
{
    event_t ev[MAX_EVENTS];
    int n = read_events(ev, MAX_EVENTS), k = 0;

    for (int i = 0; i < n; i++) {
        k += strcmp(ev[i].what, what) == 0;
    }
    return k;
}

/* Wait up to SECS for at least N events WHAT. */
static void wait_events(const char *what, int n, double secs)
{
    double end = mono_now() + secs;

    while (count_events(what) < n) {
        ck_assert_msg(mono_now() < end, "waited %.1fs for %d '%s' events", secs,
                      n, what);
        usleep(10000);
    }
}

/* Wait up to SECS for PID to exit; returns its wait status. */
static int wait_exit(pid_t pid, double secs)
{
    double end = mono_now() + secs;
    int status;

    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        ck_assert_int_ne(r, -1);
        if (r == pid) {
            return status;
        }
        if (mono_now() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            ck_abort_msg("supervisor did not exit within %.1fs", secs);
        }
        usleep(10000);
    }
}

static void assert_exit(int status, int code)
{
    ck_assert_msg(WIFEXITED(status), "status %#x", status);
    ck_assert_int_eq(WEXITSTATUS(status), code);
}

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

START_TEST(test_int_and_quit_are_passed_on)
{
    pid_t sup = start_supervisor("ready", "-w", "2", NULL);

    wait_events("ready", 2, 10);
    kill(sup, SIGINT);
    assert_exit(wait_exit(sup, 10), SL_EXIT_OK);
    ck_assert_int_eq(count_events("int"), 2);

    ck_assert_int_eq(unlink(events_path), 0);
    sup = start_supervisor("ready", NULL);
    wait_events("ready", 1, 10);
    kill(sup, SIGQUIT);
    assert_exit(wait_exit(sup, 10), SL_EXIT_OK);
    ck_assert_int_eq(count_events("quit"), 1);
}
END_TEST

START_TEST(test_appload_stops_with_usage_status)
{
    pid_t sup = start_supervisor("appload", "-w", "3", NULL);

    assert_exit(wait_exit(sup, 10), SL_EXIT_USAGE);
    ck_assert_int_ge(count_events("appload"), 1);
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
    ck_assert_int_eq(waitpid(sup, NULL, WNOHANG), 0); /* still running */
    kill(sup, SIGTERM);
    assert_exit(wait_exit(sup, 15), SL_EXIT_OK);
}
END_TEST

START_TEST(test_crash_respawn_backs_off)
{
    event_t ev[MAX_EVENTS];
    double start[MAX_EVENTS];
    int k = 0;
    pid_t sup = start_supervisor("crash", NULL);

    usleep(1700 * 1000); /* backoff 0.1 0.2 0.4 0.8: ~5 starts */
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
    ck_assert_msg(k >= 4 && k <= 7, "%d starts in 1.7s", k);
    double first = start[1] - start[0];
    double last = start[k - 1] - start[k - 2];
    ck_assert_msg(last > 2 * first, "last gap %.3fs, first %.3fs: no backoff",
                  last, first);
}
END_TEST

START_TEST(test_graceful_timeout_ends_in_sigkill)
{
    pid_t sup =
        start_supervisor("ignore-term", "--graceful-timeout", "0.2", NULL);

    wait_events("ready", 1, 10);
    double t0 = mono_now();
    kill(sup, SIGTERM);
    int status = wait_exit(sup, 10);
    double took = mono_now() - t0;
    assert_exit(status, SL_EXIT_FAIL); /* a worker had to be killed */
    ck_assert_msg(took > 1.0 && took < 3.0, "stop took %.2fs", took);
}
END_TEST

/* RETIRE: the successor is started and READY before the old worker is
 * told to drain, so there is never a moment without a worker. */
START_TEST(test_retire_replaces_before_term)
{
    event_t ev[MAX_EVENTS];
    pid_t sup = start_supervisor("retire", NULL);

    wait_events("term", 1, 10);
    int n = read_events(ev, MAX_EVENTS);
    long old = 0;
    double old_term = 0, new_ready = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(ev[i].what, "retire") == 0) {
            old = ev[i].pid;
        }
    }
    ck_assert_int_ne(old, 0);
    for (int i = 0; i < n; i++) {
        if (strcmp(ev[i].what, "term") == 0 && ev[i].pid == old) {
            old_term = ev[i].at;
        }
        if (strcmp(ev[i].what, "ready") == 0 && ev[i].pid != old) {
            new_ready = ev[i].at;
            ck_assert_int_eq(ev[i].id, 0); /* the successor took slot 0 */
        }
    }
    ck_assert(new_ready > 0 && old_term > 0);
    ck_assert_msg(new_ready <= old_term,
                  "old worker stopped at %.3f, before"
                  " its successor was ready at %.3f",
                  old_term, new_ready);
    ck_assert_int_eq(waitpid(sup, NULL, WNOHANG), 0);
    kill(sup, SIGTERM);
    assert_exit(wait_exit(sup, 10), SL_EXIT_OK);
    ck_assert_int_eq(count_events("start"), 2);
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
    usleep(300 * 1000);
    ck_assert_int_eq(count_events("start"), 2); /* no replacement */
    kill(sup, SIGTERM);
    assert_exit(wait_exit(sup, 10), SL_EXIT_OK);
    ck_assert_int_eq(count_events("term"), 2);
}
END_TEST

START_TEST(test_pidfile)
{
    char path[96], buf[32] = "";

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

static Suite *supervisor_suite(void)
{
    Suite *s = suite_create("supervisor");
    TCase *tc = tcase_create("signals");

    tcase_set_timeout(tc, 30);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_term_stops_cleanly);
    tcase_add_test(tc, test_int_and_quit_are_passed_on);
    tcase_add_test(tc, test_appload_stops_with_usage_status);
    tcase_add_test(tc, test_appload_after_ready_is_retried);
    tcase_add_test(tc, test_crash_respawn_backs_off);
    tcase_add_test(tc, test_graceful_timeout_ends_in_sigkill);
    tcase_add_test(tc, test_retire_replaces_before_term);
    tcase_add_test(tc, test_ttin_ttou_usr1);
    tcase_add_test(tc, test_pidfile);
    suite_add_tcase(s, tc);
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
