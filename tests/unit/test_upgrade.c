/* test_upgrade.c - check suite for supervisor/upgrade.c, USR2's hand-over.
 *
 * The test plays the old supervisor: it starts a "new supervisor", runs
 * its loop (h_loop_until) until the pipe says what happened, reaps the
 * child itself and hands the status to sl_upgrade_reaped(), as cycle()
 * does. The new supervisor is either /bin/sh with a one-line script (any
 * binary will do) or this program again: main() sees "--successor" and
 * writes what it inherited to a file before it says 'R' and waits for a
 * signal. The new side (sl_upgrade_init() in a successor,
 * sl_upgrade_took_over()) runs in the test process with the variables set
 * by hand.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>

#include "supervisor/upgrade.h"
#include "tests/unit/harness_base.h"

#define WAIT_S 10.0

/* ---- the new supervisor ----------------------------------------------- */

/* argv: self --successor REPORT MODE. Write the SLUICE_UPGRADE_* variables
 * and every open descriptor to REPORT, then with MODE "ready" send 'R' on
 * the pipe; wait until a signal ends it. */
static int successor_main(char **argv)
{
    const char *vars[] = {"SLUICE_UPGRADE_FDS", "SLUICE_UPGRADE_PIPE",
                          "SLUICE_UPGRADE_WORKERS", "SLUICE_UPGRADE_FROM"};
    FILE *f = fopen(argv[2], "w");
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;

    if (f == NULL || d == NULL)
        return 3;
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        fprintf(f, "%s=%s\n", vars[i], getenv(vars[i]) ? getenv(vars[i]) : "");
    fprintf(f, "fds= ");
    while ((e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] != '.' && fd != dirfd(d) && fd != fileno(f))
            fprintf(f, "%d ", fd);
    }
    fprintf(f, "\n");
    closedir(d);
    fclose(f); /* complete before the byte that says so */
    if (strcmp(argv[3], "ready") == 0) {
        const char *pipe_env = getenv("SLUICE_UPGRADE_PIPE");
        ssize_t n = write(pipe_env ? atoi(pipe_env) : -1, "R", 1);
        (void)n;
    }
    for (;;)
        pause();
}

/* ---- the old supervisor ----------------------------------------------- */

static struct ev_loop *loop;
static sl_upgrade_t up;
static char self_exe[PATH_MAX];
static char report_path[160];
static sl_listener_t ls[2];

static struct {
    int calls;
    pid_t pid;
    bool ready;
    char why[256];
} done;

static void on_done(void *ctx, pid_t pid, bool ready, const char *why)
{
    ck_assert_ptr_eq(ctx, &up);
    done.calls++;
    done.pid = pid;
    done.ready = ready;
    snprintf(done.why, sizeof(done.why), "%s", why ? why : "(null)");
}

static void setup(void)
{
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);

    ck_assert_int_gt(n, 0);
    self_exe[n] = '\0';
    snprintf(report_path, sizeof(report_path), "%s/successor", h_test_dir());
    unsetenv("SLUICE_UPGRADE_PIPE");
    unsetenv("SLUICE_UPGRADE_FROM");
    memset(&done, 0, sizeof(done));
    loop = ev_loop_new(EVFLAG_AUTO);
    ck_assert_ptr_nonnull(loop);
    signal(SIGPIPE, SIG_IGN); /* as the supervisor has it */
    h_log_to_file();
}

/* Two listeners as the supervisor holds them: TCP, and a unix socket whose
 * file is ours ("u" in the list). */
static void open_listeners(void)
{
    ls[0] = (sl_listener_t){.fd = h_listen()};
    ls[1] = (sl_listener_t){.fd = h_listen(), .unlink = true};
}

static void init_old_side(void)
{
    sl_upgrade_init(&up, loop, on_done, &up);
    ck_assert(!sl_upgrade_is_successor(&up));
}

/* Start this program as the successor in MODE. */
static void start_successor(const char *mode)
{
    char *argv[] = {"test_upgrade", "--successor", report_path, (char *)mode,
                    NULL};

    ck_assert_int_eq(sl_upgrade_start(&up, self_exe, argv, ls, 2, 4), 0);
    ck_assert_int_gt(up.child, 0);
    h_track(up.child);
}

/* Start /bin/sh -c SCRIPT as the successor. */
static void start_sh(const char *script)
{
    char *argv[] = {"sh", "-c", (char *)script, NULL};

    ck_assert_int_eq(sl_upgrade_start(&up, "/bin/sh", argv, ls, 2, 4), 0);
    ck_assert_int_gt(up.child, 0);
    h_track(up.child);
}

static bool pipe_closed(void *arg)
{
    (void)arg;
    return up.pipe_fd == -1;
}

/* Run the loop until the pipe said 'R' or EOF (and was closed). */
static void wait_pipe(void)
{
    ck_assert_msg(h_loop_until(loop, pipe_closed, NULL),
                  "the upgrade pipe is still open (log: %s)", h_log_text());
}

/* Reap the successor as cycle() would and pass it on. */
static void reap_successor(int *status)
{
    pid_t pid = up.child;

    ck_assert_msg(h_wait_exit(pid, status, WAIT_S), "successor still runs");
    ck_assert(sl_upgrade_reaped(&up, pid, *status));
    ck_assert_int_eq(up.child, 0);
    ck_assert_int_eq(up.pipe_fd, -1);
}

/* The value of KEY= in the successor's report. */
static const char *reported(const char *key)
{
    static char value[256];
    char pat[64];
    const char *text = h_file_text(report_path);

    snprintf(pat, sizeof(pat), "%s=", key);
    const char *at = strstr(text, pat);
    ck_assert_msg(at != NULL, "no %s in the report: %s", key, text);
    at += strlen(pat);
    snprintf(value, sizeof(value), "%.*s", (int)strcspn(at, "\n"), at);
    return value;
}

static bool reported_fd(int fd)
{
    char pat[16];

    snprintf(pat, sizeof(pat), " %d ", fd);
    return strstr(reported("fds"), pat) != NULL;
}

/* ---- old side ---------------------------------------------------------- */

/* The successor inherits the listeners and the pipe's write end (and not
 * its read end), is told who it replaces and how many workers to run, and
 * its 'R' is the take-over: reported once, with its pid. */
START_TEST(test_successor_takes_over)
{
    char want[64];
    int status;

    open_listeners();
    init_old_side();
    ck_assert(!sl_upgrade_running(&up));
    start_successor("ready");
    ck_assert(sl_upgrade_running(&up));
    ck_assert_int_ge(up.pipe_fd, 0);
    int read_end = up.pipe_fd;
    pid_t child = up.child;
    wait_pipe();

    ck_assert_int_eq(done.calls, 1);
    ck_assert(done.ready);
    ck_assert_int_eq(done.pid, child);
    ck_assert(up.took_over);
    ck_assert(!sl_upgrade_running(&up)); /* alive, but in charge now */
    ck_assert_int_eq(up.child, child);

    snprintf(want, sizeof(want), "%d,u%d", ls[0].fd, ls[1].fd);
    ck_assert_str_eq(reported("SLUICE_UPGRADE_FDS"), want);
    ck_assert_str_eq(reported("SLUICE_UPGRADE_WORKERS"), "4");
    snprintf(want, sizeof(want), "%ld", (long)getpid());
    ck_assert_str_eq(reported("SLUICE_UPGRADE_FROM"), want);
    int write_end = atoi(reported("SLUICE_UPGRADE_PIPE"));
    ck_assert(reported_fd(ls[0].fd) && reported_fd(ls[1].fd));
    ck_assert(reported_fd(write_end));
    ck_assert_msg(!reported_fd(read_end), "the read end %d leaked: %s",
                  read_end, reported("fds"));
    ck_assert_int_eq(fcntl(write_end, F_GETFD), -1); /* not left open here */

    /* Its exit later is news, but not a failed upgrade. */
    ck_assert_int_eq(kill(child, SIGTERM), 0);
    reap_successor(&status);
    ck_assert_int_eq(done.calls, 1);
    ck_assert_ptr_nonnull(strstr(h_log_text(), "has exited"));
}
END_TEST

/* One upgrade at a time; USR2's TERM on a stop reaches the successor, and
 * its death is a failed upgrade with the signal named. */
START_TEST(test_second_start_refused_and_signal)
{
    int status;

    open_listeners();
    init_old_side();
    start_successor("wait");
    ck_assert_int_eq(
        sl_upgrade_start(&up, self_exe, (char *[]){"x", NULL}, ls, 2, 4), -1);
    ck_assert_ptr_nonnull(strstr(h_log_text(), "already under way"));
    sl_upgrade_signal(&up, SIGTERM);
    reap_successor(&status);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    ck_assert_int_eq(done.calls, 1);
    ck_assert(!done.ready);
    ck_assert_ptr_nonnull(strstr(done.why, "was killed by signal 15"));
    ck_assert(!sl_upgrade_running(&up));
    sl_upgrade_signal(&up, SIGKILL); /* nobody to signal: a no-op */
}
END_TEST

/* Dying before 'R' fails the upgrade with the exit code, whichever the
 * loop sees first, the EOF or the exit. */
START_TEST(test_exit_before_ready_fails)
{
    int status;

    open_listeners();
    init_old_side();
    start_sh("exit 3");
    wait_pipe(); /* EOF: nothing reported yet, the status will say why */
    ck_assert_int_eq(done.calls, 0);
    pid_t child = up.child;
    reap_successor(&status);
    ck_assert_int_eq(done.calls, 1);
    ck_assert(!done.ready);
    ck_assert_int_eq(done.pid, child);
    char want[96];
    snprintf(want, sizeof(want),
             "the new supervisor (pid %ld) exited with code 3", (long)child);
    ck_assert_str_eq(done.why, want);

    start_sh("exit 4");      /* and the next USR2 may try again */
    reap_successor(&status); /* reaped before the loop saw EOF */
    ck_assert_int_eq(done.calls, 2);
    ck_assert_ptr_nonnull(strstr(done.why, "exited with code 4"));
}
END_TEST

/* Only 'R' means ready; another byte followed by a clean exit is still a
 * failed upgrade. */
START_TEST(test_wrong_byte_is_not_ready)
{
    int status;

    open_listeners();
    init_old_side();
    start_sh("printf X > /proc/$$/fd/$SLUICE_UPGRADE_PIPE");
    wait_pipe();
    ck_assert_int_eq(done.calls, 0);
    ck_assert(!up.took_over);
    reap_successor(&status);
    ck_assert_int_eq(done.calls, 1);
    ck_assert(!done.ready);
    ck_assert_ptr_nonnull(strstr(done.why, "exited with code 0"));
}
END_TEST

/* A binary that cannot be exec'd: 127, a failed upgrade. */
START_TEST(test_exec_failure_fails)
{
    char *argv[] = {"sluice", NULL};
    int status;

    open_listeners();
    init_old_side();
    ck_assert_int_eq(
        sl_upgrade_start(&up, "/nonexistent/sluice", argv, ls, 2, 1), 0);
    h_track(up.child);
    reap_successor(&status);
    ck_assert_int_eq(done.calls, 1);
    ck_assert_ptr_nonnull(strstr(done.why, "exited with code 127"));
}
END_TEST

/* A list of listeners that does not fit the variable: -1, logged, nothing
 * started. */
START_TEST(test_too_many_listeners)
{
    static sl_listener_t many[100];
    char *argv[] = {"sluice", NULL};

    for (int i = 0; i < 100; i++)
        many[i] = (sl_listener_t){.fd = 1000000000, .unlink = true};
    init_old_side();
    ck_assert_int_eq(sl_upgrade_start(&up, "/bin/true", argv, many, 100, 1),
                     -1);
    ck_assert_ptr_nonnull(strstr(h_log_text(), "too many listeners"));
    ck_assert_int_eq(up.child, 0);
    ck_assert_int_eq(up.pipe_fd, -1);
    ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1);
    ck_assert_int_eq(errno, ECHILD);
}
END_TEST

/* Children that are not the successor are not its business. */
START_TEST(test_reaped_other_pid)
{
    int status;

    init_old_side();
    ck_assert(!sl_upgrade_reaped(&up, 12345, 0));
    open_listeners();
    start_successor("wait");
    ck_assert(!sl_upgrade_reaped(&up, up.child + 1, 0));
    ck_assert(sl_upgrade_running(&up));
    sl_upgrade_signal(&up, SIGKILL);
    reap_successor(&status);
    ck_assert_int_eq(done.calls, 1);
}
END_TEST

/* ---- new side ---------------------------------------------------------- */

START_TEST(test_init_without_variables)
{
    init_old_side();
    ck_assert_int_eq(sl_upgrade_parent(&up), 0);
    ck_assert_int_eq(up.parent_fd, -1);
    ck_assert_int_eq(up.pipe_fd, -1);
    ck_assert(!sl_upgrade_running(&up));
    sl_upgrade_took_over(&up); /* not a successor: nothing to tell */
}
END_TEST

/* A successor knows its parent, keeps the pipe from its own children
 * (close-on-exec), forgets the variables (its workers must not see them),
 * and says 'R' once. */
START_TEST(test_successor_side)
{
    int p[2];
    char num[16], byte;

    ck_assert_int_eq(pipe(p), 0);
    snprintf(num, sizeof(num), "%d", p[1]);
    setenv("SLUICE_UPGRADE_PIPE", num, 1);
    setenv("SLUICE_UPGRADE_FROM", "4321", 1);
    sl_upgrade_init(&up, loop, on_done, &up);
    ck_assert(sl_upgrade_is_successor(&up));
    ck_assert_int_eq(sl_upgrade_parent(&up), 4321);
    ck_assert_int_eq(up.parent_fd, p[1]);
    ck_assert(fcntl(p[1], F_GETFD) & FD_CLOEXEC);
    ck_assert_ptr_null(getenv("SLUICE_UPGRADE_PIPE"));
    ck_assert_ptr_null(getenv("SLUICE_UPGRADE_FROM"));

    sl_upgrade_took_over(&up);
    ck_assert(!sl_upgrade_is_successor(&up));
    ck_assert_int_eq(read(p[0], &byte, 1), 1);
    ck_assert_int_eq(byte, 'R');
    ck_assert_int_eq(read(p[0], &byte, 1), 0); /* and closed its end */
    sl_upgrade_took_over(&up);                 /* once only */
    ck_assert_str_eq(h_log_text(), "");
}
END_TEST

/* The old supervisor died before the hand-over: the write fails, is
 * logged, and the end is closed all the same. */
START_TEST(test_took_over_parent_gone)
{
    int p[2];
    char num[16];

    ck_assert_int_eq(pipe(p), 0);
    close(p[0]);
    snprintf(num, sizeof(num), "%d", p[1]);
    setenv("SLUICE_UPGRADE_PIPE", num, 1);
    sl_upgrade_init(&up, loop, on_done, &up);
    ck_assert_int_eq(sl_upgrade_parent(&up), 0); /* no FROM */
    sl_upgrade_took_over(&up);
    ck_assert_ptr_nonnull(
        strstr(h_log_text(), "write() to the old supervisor's pipe failed"));
    ck_assert_int_eq(up.parent_fd, -1);
    ck_assert_int_eq(fcntl(p[1], F_GETFD), -1);
}
END_TEST

static const char *const bad_values[] = {"",   "-1", "3x",
                                         "x3", " 3", "99999999999"};

/* Anything but a plain number is no successor and no parent. */
START_TEST(test_bad_variables_ignored)
{
    setenv("SLUICE_UPGRADE_PIPE", bad_values[_i], 1);
    setenv("SLUICE_UPGRADE_FROM", bad_values[_i], 1);
    sl_upgrade_init(&up, loop, on_done, &up);
    ck_assert(!sl_upgrade_is_successor(&up));
    ck_assert_int_eq(sl_upgrade_parent(&up), 0);
    ck_assert_ptr_null(getenv("SLUICE_UPGRADE_PIPE"));
}
END_TEST

static Suite *upgrade_suite(void)
{
    Suite *s = suite_create("upgrade");
    TCase *old = tcase_create("old side");
    TCase *succ = tcase_create("new side");
    TCase *all[] = {old, succ};

    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        tcase_set_timeout(all[i], 30);
        tcase_add_unchecked_fixture(all[i], h_dir_make, h_dir_remove);
        tcase_add_checked_fixture(all[i], setup, NULL);
        suite_add_tcase(s, all[i]);
    }
    tcase_add_test(old, test_successor_takes_over);
    tcase_add_test(old, test_second_start_refused_and_signal);
    tcase_add_test(old, test_exit_before_ready_fails);
    tcase_add_test(old, test_wrong_byte_is_not_ready);
    tcase_add_test(old, test_exec_failure_fails);
    tcase_add_test(old, test_too_many_listeners);
    tcase_add_test(old, test_reaped_other_pid);
    tcase_add_test(succ, test_init_without_variables);
    tcase_add_test(succ, test_successor_side);
    tcase_add_test(succ, test_took_over_parent_gone);
    tcase_add_loop_test(succ, test_bad_variables_ignored, 0,
                        sizeof(bad_values) / sizeof(bad_values[0]));
    return s;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && strcmp(argv[1], "--successor") == 0)
        return successor_main(argv);

    SRunner *sr = srunner_create(upgrade_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
