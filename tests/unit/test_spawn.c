/* test_spawn.c - check suite for supervisor/spawn.c: what a spawned worker
 * or new supervisor gets.
 *
 * The child is this test program again: main() sees "--report" and writes
 * what it was given (descriptors, environment, parent-death signal, signal
 * mask and dispositions) to the pipe named on its command line, closes it,
 * and exits, or with "wait" waits for a signal to end it. The test reads
 * the report to EOF (bounded) and reaps the child (bounded).
 *
 * Where the worker executable comes from (sl_spawn_find_worker()) is
 * checked on files made in the test's directory. fork() failing is forced
 * with a seccomp filter that answers clone() with EAGAIN.
 */
#include "config.h"

#include <check.h>
#include <limits.h>
#include <pwd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "common/handoff.h"
#include "supervisor/spawn.h"
#include "tests/unit/harness_base.h"

#define WAIT_S 10.0 /* an exec of a sanitized binary is slow */

static char report[8192];
static char self_exe[PATH_MAX];

/* ---- the child's side ------------------------------------------------- */

static const char *const reported_env[] = {
    "SLUICE_WORKER_ID",   "SLUICE_LISTEN_FDS",   "SLUICE_CTL_FD",
    "NOTIFY_SOCKET",      "WATCHDOG_USEC",       "WATCHDOG_PID",
    "SLUICE_UPGRADE_FDS", "SLUICE_UPGRADE_PIPE", "SLUICE_UPGRADE_WORKERS",
    "SL_TEST_KEPT",       "SL_TEST_ADDED",       "SLUICE_HANDOFF",
    "SLUICE_CMD_ARGS",    "SLUICE_METRICS_FD",
};

/* argv: self --report FD MODE [PROBE_FD...] */
static int report_main(int argc, char **argv)
{
    int fd = atoi(argv[2]), sig = -1;
    sigset_t mask;
    char line[256];

    dprintf(fd, "pid=%ld\nppid=%ld\n", (long)getpid(), (long)getppid());
    dprintf(fd, "uid=%ld\ngid=%ld\ngroups=%d\n", (long)getuid(), (long)getgid(),
            getgroups(0, NULL));
    prctl(PR_GET_PDEATHSIG, &sig);
    dprintf(fd, "pdeathsig=%d\n", sig);
    sigprocmask(SIG_SETMASK, NULL, &mask);
    dprintf(fd, "blocked=");
    for (int s = 1; s < 32; s++) {
        if (sigismember(&mask, s) == 1)
            dprintf(fd, "%d,", s);
    }
    dprintf(fd, "\nignored=");
    for (int s = 1; s < 32; s++) {
        struct sigaction sa;
        if (sigaction(s, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
            dprintf(fd, "%d,", s);
    }
    dprintf(fd, "\n");
    for (size_t i = 0; i < sizeof(reported_env) / sizeof(char *); i++) {
        const char *v = getenv(reported_env[i]);
        snprintf(line, sizeof(line), "env:%s=%s\n", reported_env[i],
                 v ? v : "(unset)");
        dprintf(fd, "%s", line);
    }
    for (int i = 4; i < argc; i++) {
        int probe = atoi(argv[i]);
        dprintf(fd, "fd:%d=%s\n", probe,
                fcntl(probe, F_GETFD) == -1 ? "closed" : "open");
    }
    close(fd);
    if (strcmp(argv[3], "wait") == 0) {
        for (;;)
            pause();
    }
    return 0;
}

/* ---- the test's side -------------------------------------------------- */

/* The value of KEY in the report, or fail. */
static const char *field(const char *key)
{
    static char value[512];
    char pat[128];

    snprintf(pat, sizeof(pat), "\n%s=", key);
    const char *at = strstr(report, pat); /* report[0] is a newline */
    ck_assert_msg(at != NULL, "no '%s' in the report:%s", key, report);
    at += strlen(pat);
    snprintf(value, sizeof(value), "%.*s", (int)strcspn(at, "\n"), at);
    return value;
}

static const char *env_of(const char *name)
{
    char key[128];

    snprintf(key, sizeof(key), "env:%s", name);
    return field(key);
}

static const char *fd_state(int fd)
{
    char key[32];

    snprintf(key, sizeof(key), "fd:%d", fd);
    return field(key);
}

/* The report pipe: [0] ours, [1] the child's (inherited: no CLOEXEC). */
static int rpipe[2] = {-1, -1};
static char rfd_arg[16];
static char *child_argv[16];

/* argv for a reporting child in MODE probing the fds in PROBES (-1 ends). */
static char **report_argv(const char *mode, const int *probes)
{
    static char probe_args[8][16];
    int argc = 0;

    ck_assert_int_eq(pipe(rpipe), 0);
    snprintf(rfd_arg, sizeof(rfd_arg), "%d", rpipe[1]);
    child_argv[argc++] = "test_spawn";
    child_argv[argc++] = "--report";
    child_argv[argc++] = rfd_arg;
    child_argv[argc++] = (char *)mode;
    for (int i = 0; probes != NULL && probes[i] >= 0; i++) {
        ck_assert_int_lt(i, 8);
        snprintf(probe_args[i], sizeof(probe_args[i]), "%d", probes[i]);
        child_argv[argc++] = probe_args[i];
    }
    child_argv[argc] = NULL;
    return child_argv;
}

/* After the spawn: drop our copy of the child's end, read its report. */
static void read_report(void)
{
    close(rpipe[1]);
    rpipe[1] = -1;
    report[0] = '\n';
    ck_assert_msg(
        h_read_to_eof(rpipe[0], report + 1, sizeof(report) - 1, WAIT_S),
        "no report from the child (so far:%s)", report);
    close(rpipe[0]);
    rpipe[0] = -1;
}

static int reap(pid_t pid)
{
    int status;

    ck_assert_msg(h_wait_exit(pid, &status, WAIT_S), "child %ld still runs",
                  (long)pid);
    return status;
}

static void assert_exit(int status, int code)
{
    ck_assert_msg(WIFEXITED(status), "status %#x", status);
    ck_assert_int_eq(WEXITSTATUS(status), code);
}

static int metrics_fd = -1; /* what spawn_worker() passes as the segment */

/* This program as worker ID, reporting in MODE. */
static pid_t spawn_worker(const char *mode, const int *fds, int nfds, int id,
                          int ctl_fd, const int *probes)
{
    pid_t pid = sl_spawn_worker(self_exe, report_argv(mode, probes), fds, nfds,
                                id, ctl_fd, metrics_fd);

    if (pid > 0)
        h_track(pid);
    return pid;
}

static int cloexec_fd(void)
{
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

    ck_assert_int_ge(fd, 0);
    return fd;
}

static bool has_cloexec(int fd)
{
    return (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
}

/* What the supervisor itself does to its signals before it spawns. */
static void on_usr1(int sig)
{
    (void)sig;
}

static void supervisor_like_signals(sigset_t *blocked)
{
    struct sigaction sa = {.sa_handler = on_usr1};

    signal(SIGPIPE, SIG_IGN);
    signal(SIGUSR2, SIG_IGN);
    sigaction(SIGUSR1, &sa, NULL);
    sigemptyset(blocked);
    sigaddset(blocked, SIGTERM);
    sigaddset(blocked, SIGCHLD);
    sigprocmask(SIG_BLOCK, blocked, NULL);
}

/* The parent's mask is as it was before the spawn. */
static void assert_mask_restored(void)
{
    sigset_t now;

    sigprocmask(SIG_SETMASK, NULL, &now);
    ck_assert(sigismember(&now, SIGTERM));
    ck_assert(sigismember(&now, SIGCHLD));
    ck_assert(!sigismember(&now, SIGHUP));
}

static void setup(void)
{
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);

    ck_assert_int_gt(n, 0);
    self_exe[n] = '\0';
    report[0] = '\0';
    h_log_to_file();
}

/* ---- a worker --------------------------------------------------------- */

/* The listeners and the control socket stay open across exec (the rest of
 * the supervisor's close-on-exec descriptors do not), named in SLUICE_*;
 * systemd's variables and the upgrade's are gone; PR_SET_PDEATHSIG is
 * SIGTERM; nothing is blocked or ignored; the parent is the caller. */
START_TEST(test_worker_gets_fds_env_and_pdeathsig)
{
    int l1 = cloexec_fd(), l2 = cloexec_fd(), other = cloexec_fd(), ctl[2];
    int fds[] = {l1, l2};
    char want[64];
    sigset_t blocked;

    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl),
                     0);
    setenv("NOTIFY_SOCKET", "/run/systemd/notify", 1);
    setenv("WATCHDOG_USEC", "1000000", 1);
    setenv("WATCHDOG_PID", "1", 1);
    setenv("SLUICE_UPGRADE_FDS", "3", 1);
    setenv("SLUICE_UPGRADE_PIPE", "4", 1);
    setenv("SLUICE_UPGRADE_WORKERS", "2", 1);
    setenv("SLUICE_CMD_ARGS", "-w 2", 1);
    setenv("SL_TEST_KEPT", "kept", 1);
    supervisor_like_signals(&blocked);

    int probes[] = {l1, l2, ctl[1], other, -1};
    pid_t pid = spawn_worker("exit", fds, 2, 7, ctl[1], probes);
    ck_assert_int_gt(pid, 0);
    assert_mask_restored();
    read_report();
    assert_exit(reap(pid), 0);

    ck_assert_str_eq(env_of("SLUICE_WORKER_ID"), "7");
    snprintf(want, sizeof(want), "%d", SL_HANDOFF_VERSION);
    ck_assert_str_eq(env_of("SLUICE_HANDOFF"), want);
    snprintf(want, sizeof(want), "%d,%d", l1, l2);
    ck_assert_str_eq(env_of("SLUICE_LISTEN_FDS"), want);
    snprintf(want, sizeof(want), "%d", ctl[1]);
    ck_assert_str_eq(env_of("SLUICE_CTL_FD"), want);
    ck_assert_str_eq(fd_state(l1), "open");
    ck_assert_str_eq(fd_state(l2), "open");
    ck_assert_str_eq(fd_state(ctl[1]), "open");
    ck_assert_str_eq(fd_state(other), "closed");
    ck_assert(has_cloexec(l1) && has_cloexec(ctl[1])); /* ours unchanged */
    const char *gone[] = {"NOTIFY_SOCKET",       "WATCHDOG_USEC",
                          "WATCHDOG_PID",        "SLUICE_UPGRADE_FDS",
                          "SLUICE_UPGRADE_PIPE", "SLUICE_UPGRADE_WORKERS",
                          "SLUICE_CMD_ARGS"};
    for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++)
        ck_assert_msg(strcmp(env_of(gone[i]), "(unset)") == 0,
                      "%s reached the worker", gone[i]);
    ck_assert_str_eq(env_of("SL_TEST_KEPT"), "kept");
    ck_assert_str_eq(field("pdeathsig"), "15");
    ck_assert_str_eq(field("blocked"), "");
    ck_assert_str_eq(field("ignored"), "");
    snprintf(want, sizeof(want), "%ld", (long)getpid());
    ck_assert_str_eq(field("ppid"), want);
    ck_assert_str_eq(getenv("NOTIFY_SOCKET"), "/run/systemd/notify"); /* ours */
}
END_TEST

/* The metrics segment stays open across exec, named in SLUICE_METRICS_FD;
 * without one the variable is unset, even one the supervisor inherited. */
START_TEST(test_worker_gets_metrics_fd)
{
    char want[32];
    int fd = cloexec_fd();
    int probes[] = {fd, -1};

    metrics_fd = fd;
    pid_t pid = spawn_worker("exit", NULL, 0, 2, -1, probes);
    metrics_fd = -1;
    ck_assert_int_gt(pid, 0);
    read_report();
    assert_exit(reap(pid), 0);
    snprintf(want, sizeof(want), "%d", fd);
    ck_assert_str_eq(env_of("SLUICE_METRICS_FD"), want);
    ck_assert_str_eq(fd_state(fd), "open");

    setenv("SLUICE_METRICS_FD", "9", 1);
    pid = spawn_worker("exit", NULL, 0, 2, -1, probes);
    ck_assert_int_gt(pid, 0);
    read_report();
    assert_exit(reap(pid), 0);
    ck_assert_str_eq(env_of("SLUICE_METRICS_FD"), "(unset)");
    ck_assert_str_eq(fd_state(fd), "closed");
    unsetenv("SLUICE_METRICS_FD");
    close(fd);
}
END_TEST

/* No control socket: no SLUICE_CTL_FD, even one the supervisor inherited;
 * no listeners: an empty list. */
START_TEST(test_worker_without_ctl_fd)
{
    setenv("SLUICE_CTL_FD", "9", 1);
    pid_t pid = spawn_worker("exit", NULL, 0, 1, -1, NULL);
    ck_assert_int_gt(pid, 0);
    read_report();
    assert_exit(reap(pid), 0);
    ck_assert_str_eq(env_of("SLUICE_CTL_FD"), "(unset)");
    ck_assert_str_eq(env_of("SLUICE_LISTEN_FDS"), "");
    ck_assert_str_eq(env_of("SLUICE_WORKER_ID"), "1");
}
END_TEST

/* --user: the worker runs as that user, its group and its groups only;
 * the caller stays as it was. Needs root. */
START_TEST(test_worker_drops_to_user)
{
    struct passwd *pw = getpwnam("nobody");
    char want[32];

    if (geteuid() != 0 || pw == NULL) {
        return; /* nothing to switch to */
    }
    ck_assert_int_eq(sl_spawn_set_identity("nobody", NULL), 0);
    uid_t uid;
    gid_t gid;
    ck_assert(sl_spawn_identity(&uid, &gid));
    ck_assert_int_eq(uid, pw->pw_uid);
    pid_t pid = spawn_worker("exit", NULL, 0, 1, -1, NULL);
    ck_assert_int_gt(pid, 0);
    read_report();
    assert_exit(reap(pid), 0);
    snprintf(want, sizeof(want), "%ld", (long)pw->pw_uid);
    ck_assert_str_eq(field("uid"), want);
    snprintf(want, sizeof(want), "%ld", (long)pw->pw_gid);
    ck_assert_str_eq(field("gid"), want);
    ck_assert_str_eq(field("groups"), "1"); /* nogroup, not root's */
    ck_assert_int_eq(geteuid(), 0);
}
END_TEST

/* What sl_spawn_set_identity() refuses, and what it takes as a no-op. */
START_TEST(test_identity_checks)
{
    uid_t uid;
    gid_t gid;
    char self[32];

    ck_assert_int_eq(sl_spawn_set_identity("no-such-user-here", NULL), -1);
    ck_assert_int_eq(sl_spawn_set_identity(NULL, "no-such-group-here"), -1);
    /* a uid with no name needs its group spelled out */
    ck_assert_int_eq(sl_spawn_set_identity("4000000000", NULL), -1);
    snprintf(self, sizeof(self), "%ld", (long)geteuid());
    ck_assert_int_eq(sl_spawn_set_identity(self, NULL), 0);
    ck_assert(!sl_spawn_identity(&uid, &gid)); /* already there */
    if (geteuid() == 0) {
        ck_assert_int_eq(sl_spawn_set_identity("4000000000", "0"), 0);
        ck_assert(sl_spawn_identity(&uid, &gid));
        ck_assert_int_eq(uid, 4000000000u);
        ck_assert_int_eq(gid, 0);
    } else {
        ck_assert_int_eq(sl_spawn_set_identity("0", "0"), -1);
    }
}
END_TEST

/* A worker whose supervisor is SIGKILLed gets SIGTERM from the kernel.
 * This test is a child subreaper, so the orphan becomes its child and its
 * end can be reaped here. */
START_TEST(test_worker_gets_sigterm_when_its_parent_dies)
{
    int pidpipe[2];
    pid_t worker;

    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    ck_assert_int_eq(pipe(pidpipe), 0);
    char **argv = report_argv("wait", NULL);
    pid_t sup = fork();
    ck_assert_int_ge(sup, 0);
    if (sup == 0) {
        pid_t pid = sl_spawn_worker(self_exe, argv, NULL, 0, 1, -1, -1);
        close(rpipe[1]); /* the worker's copy is the one to close */
        ssize_t w = write(pidpipe[1], &pid, sizeof(pid));
        (void)w;
        for (;;)
            pause();
    }
    h_track(sup);
    close(pidpipe[1]);
    ck_assert_int_eq(read(pidpipe[0], &worker, sizeof(worker)), sizeof(worker));
    ck_assert_int_gt(worker, 0);
    h_track(worker);
    read_report(); /* it runs, PR_SET_PDEATHSIG set */
    ck_assert_str_eq(field("pdeathsig"), "15");

    ck_assert_int_eq(kill(sup, SIGKILL), 0);
    int status = reap(sup);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    status = reap(worker);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM,
                  "worker status %#x", status);
}
END_TEST

/* A descriptor that cannot be kept fails the child before exec(): 127,
 * with the reason in the log. */
START_TEST(test_worker_bad_fd_exits_127)
{
    int bad[] = {1000};

    pid_t pid = spawn_worker("exit", bad, 1, 1, -1, NULL);
    ck_assert_int_gt(pid, 0);
    assert_exit(reap(pid), 127);
    ck_assert_ptr_nonnull(strstr(h_log_text(), "fcntl(1000, F_SETFD) failed"));

    pid = spawn_worker("exit", NULL, 0, 1, 1001, NULL); /* the ctl fd */
    ck_assert_int_gt(pid, 0);
    assert_exit(reap(pid), 127);
    ck_assert_ptr_nonnull(strstr(h_log_text(), "fcntl(1001, F_SETFD) failed"));
}
END_TEST

/* A worker executable that cannot be exec'd: 127, logged. */
START_TEST(test_worker_exec_failure_exits_127)
{
    char *argv[] = {"sluice-worker", NULL};

    pid_t pid =
        sl_spawn_worker("/nonexistent/sluice-worker", argv, NULL, 0, 1, -1, -1);
    ck_assert_int_gt(pid, 0);
    h_track(pid);
    assert_exit(reap(pid), 127);
    ck_assert_ptr_nonnull(
        strstr(h_log_text(), "execv(\"/nonexistent/sluice-worker\") failed"));
}
END_TEST

/* ---- finding the worker ----------------------------------------------- */

/* SLUICE_WORKER_BIN, when set, is the only candidate: it must be an
 * executable regular file. */
START_TEST(test_find_worker_honours_the_variable)
{
    char path[160], found[PATH_MAX];
    const char *dir = h_test_dir();

    snprintf(path, sizeof(path), "%s/no-such-worker", dir);
    setenv("SLUICE_WORKER_BIN", path, 1);
    ck_assert_int_eq(sl_spawn_find_worker(found, sizeof(found)), -1);
    setenv("SLUICE_WORKER_BIN", dir, 1); /* a directory */
    ck_assert_int_eq(sl_spawn_find_worker(found, sizeof(found)), -1);

    int fd = open(path, O_CREAT | O_WRONLY, 0644);
    ck_assert_int_ge(fd, 0);
    close(fd);
    setenv("SLUICE_WORKER_BIN", path, 1);
    ck_assert_int_eq(sl_spawn_find_worker(found, sizeof(found)), -1);
    ck_assert_int_eq(chmod(path, 0755), 0);
    ck_assert_int_eq(sl_spawn_find_worker(found, sizeof(found)), 0);
    ck_assert_str_eq(found, path);
    unsetenv("SLUICE_WORKER_BIN");
}
END_TEST

/* A path that does not fit the caller's buffer is refused, not cut. */
START_TEST(test_find_worker_path_too_long)
{
    char found[8];

    setenv("SLUICE_WORKER_BIN", self_exe, 1);
    ck_assert_int_eq(sl_spawn_find_worker(found, sizeof(found)), -1);
    unsetenv("SLUICE_WORKER_BIN");
}
END_TEST

/* An installed tree moved under another root finds its worker under that
 * root; a binary not in BINDIR, or in BINDIR itself (root "/"), does not
 * relocate anything, and a look-alike directory does not count. */
START_TEST(test_relocate_to_the_binary_root)
{
    char buf[PATH_MAX], tiny[16];
    const char *w = "/usr/libexec/sluice/sluice-worker";

    ck_assert(sl_spawn_relocate("/tmp/r/usr/bin/sluice", "/usr/bin", w, buf,
                                sizeof(buf)));
    ck_assert_str_eq(buf, "/tmp/r/usr/libexec/sluice/sluice-worker");
    ck_assert(sl_spawn_relocate("/x/usr/local/bin/sluice", "/usr/local/bin/",
                                "/usr/local/libexec/sluice/sluice-worker", buf,
                                sizeof(buf)));
    ck_assert_str_eq(buf, "/x/usr/local/libexec/sluice/sluice-worker");

    ck_assert(
        !sl_spawn_relocate("/usr/bin/sluice", "/usr/bin", w, buf, sizeof(buf)));
    ck_assert_str_eq(buf, "");
    ck_assert(!sl_spawn_relocate("/tmp/r/xusr/bin/sluice", "/usr/bin", w, buf,
                                 sizeof(buf)));
    ck_assert(!sl_spawn_relocate("/tmp/r/usr/bin/x/sluice", "/usr/bin", w, buf,
                                 sizeof(buf)));
    ck_assert(!sl_spawn_relocate("/tmp/build/sluice", "/usr/bin", w, buf,
                                 sizeof(buf)));
    ck_assert(!sl_spawn_relocate("sluice", "/usr/bin", w, buf, sizeof(buf)));
    ck_assert(!sl_spawn_relocate("", "/usr/bin", w, buf, sizeof(buf)));
    ck_assert(!sl_spawn_relocate("/tmp/r/usr/bin/sluice", "/usr/bin", w, tiny,
                                 sizeof(tiny)));
    ck_assert_str_eq(tiny, "");
}
END_TEST

/* ---- a new supervisor ------------------------------------------------- */

/* The kept descriptors and the added variables reach it; systemd's do
 * too (the new supervisor talks to systemd); no parent-death signal (it
 * must outlive the old supervisor); signals as after a fresh start. */
START_TEST(test_supervisor_keeps_fds_and_adds_env)
{
    int keep1 = cloexec_fd(), keep2 = cloexec_fd(), other = cloexec_fd();
    int keep[] = {keep1, keep2};
    char added[] = "SL_TEST_ADDED=yes";
    char *env[] = {added, NULL};
    char want[32];
    sigset_t blocked;

    setenv("NOTIFY_SOCKET", "/run/systemd/notify", 1);
    supervisor_like_signals(&blocked);
    int probes[] = {keep1, keep2, other, -1};
    char **argv = report_argv("exit", probes);
    pid_t pid = sl_spawn_supervisor(self_exe, argv, keep, 2, env);
    ck_assert_int_gt(pid, 0);
    h_track(pid);
    assert_mask_restored();
    read_report();
    assert_exit(reap(pid), 0);

    ck_assert_str_eq(fd_state(keep1), "open");
    ck_assert_str_eq(fd_state(keep2), "open");
    ck_assert_str_eq(fd_state(other), "closed");
    ck_assert_str_eq(env_of("SL_TEST_ADDED"), "yes");
    ck_assert_str_eq(env_of("NOTIFY_SOCKET"), "/run/systemd/notify");
    ck_assert_str_eq(env_of("WATCHDOG_PID"), "(unset)");
    ck_assert_ptr_null(getenv("SL_TEST_ADDED")); /* not in ours */
    ck_assert_str_eq(field("pdeathsig"), "0");
    ck_assert_str_eq(field("blocked"), "");
    ck_assert_str_eq(field("ignored"), "");
    snprintf(want, sizeof(want), "%ld", (long)getpid());
    ck_assert_str_eq(field("ppid"), want);
}
END_TEST

/* systemd sends watchdog pings' deadline to WATCHDOG_PID: the new
 * supervisor's own pid, once it runs. */
START_TEST(test_supervisor_watchdog_pid_is_its_own)
{
    char *env[] = {NULL};
    char pid_s[32];

    snprintf(pid_s, sizeof(pid_s), "%ld", (long)getpid());
    setenv("WATCHDOG_PID", pid_s, 1);
    pid_t pid =
        sl_spawn_supervisor(self_exe, report_argv("exit", NULL), NULL, 0, env);
    ck_assert_int_gt(pid, 0);
    h_track(pid);
    read_report();
    assert_exit(reap(pid), 0);
    snprintf(pid_s, sizeof(pid_s), "%ld", (long)pid);
    ck_assert_str_eq(env_of("WATCHDOG_PID"), pid_s);
    ck_assert_str_eq(field("pid"), pid_s);
}
END_TEST

START_TEST(test_supervisor_exec_failure_exits_127)
{
    char *argv[] = {"sluice", NULL};
    char *env[] = {NULL};
    int bad[] = {1000};

    pid_t pid = sl_spawn_supervisor("/nonexistent/sluice", argv, NULL, 0, env);
    ck_assert_int_gt(pid, 0);
    assert_exit(reap(pid), 127);
    ck_assert_ptr_nonnull(
        strstr(h_log_text(), "execv(\"/nonexistent/sluice\") failed"));

    pid = sl_spawn_supervisor(self_exe, argv, bad, 1, env);
    ck_assert_int_gt(pid, 0);
    assert_exit(reap(pid), 127);
    ck_assert_ptr_nonnull(strstr(h_log_text(), "fcntl(1000, F_SETFD) failed"));
}
END_TEST

/* ---- fork() failing ---------------------------------------------------- */

/* From here on, clone() and clone3() fail with EAGAIN in this process. */
static void forbid_fork(void)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 2, 0),
#ifdef __NR_clone3
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 1, 0),
#else
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 1, 0),
#endif
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EAGAIN),
    };
    struct sock_fprog prog = {sizeof(code) / sizeof(code[0]), code};

    ck_assert_int_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
    ck_assert_int_eq(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog), 0);
}

/* -1, logged, and the caller's signal mask as it was. */
START_TEST(test_fork_failure)
{
    char *argv[] = {"sluice", NULL};
    char *env[] = {NULL};
    sigset_t blocked;

    supervisor_like_signals(&blocked);
    forbid_fork();
    ck_assert_int_eq(sl_spawn_worker(self_exe, argv, NULL, 0, 3, -1, -1), -1);
    assert_mask_restored();
    ck_assert_int_eq(sl_spawn_supervisor(self_exe, argv, NULL, 0, env), -1);
    assert_mask_restored();
    const char *log = h_log_text();
    ck_assert_msg(strstr(log, "fork() failed for worker 3: Resource"
                              " temporarily unavailable") != NULL,
                  "log: %s", log);
    ck_assert_ptr_nonnull(strstr(log, "fork() failed for the new supervisor"));
}
END_TEST

static Suite *spawn_suite(void)
{
    Suite *s = suite_create("spawn");
    TCase *worker = tcase_create("worker");
    TCase *sup = tcase_create("supervisor");
    TCase *find = tcase_create("finding the worker");
    TCase *fail = tcase_create("fork failure");
    TCase *all[] = {worker, find, sup, fail};

    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        tcase_set_timeout(all[i], 30);
        tcase_add_unchecked_fixture(all[i], h_dir_make, h_dir_remove);
        tcase_add_checked_fixture(all[i], setup, NULL);
        suite_add_tcase(s, all[i]);
    }
    tcase_add_test(worker, test_worker_gets_fds_env_and_pdeathsig);
    tcase_add_test(worker, test_worker_without_ctl_fd);
    tcase_add_test(worker, test_worker_drops_to_user);
    tcase_add_test(worker, test_identity_checks);
    tcase_add_test(worker, test_worker_gets_metrics_fd);
    tcase_add_test(worker, test_worker_gets_sigterm_when_its_parent_dies);
    tcase_add_test(worker, test_worker_bad_fd_exits_127);
    tcase_add_test(worker, test_worker_exec_failure_exits_127);
    tcase_add_test(find, test_find_worker_honours_the_variable);
    tcase_add_test(find, test_find_worker_path_too_long);
    tcase_add_test(find, test_relocate_to_the_binary_root);
    tcase_add_test(sup, test_supervisor_keeps_fds_and_adds_env);
    tcase_add_test(sup, test_supervisor_watchdog_pid_is_its_own);
    tcase_add_test(sup, test_supervisor_exec_failure_exits_127);
    tcase_add_test(fail, test_fork_failure);
    return s;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && strcmp(argv[1], "--report") == 0)
        return report_main(argc, argv);

    SRunner *sr = srunner_create(spawn_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
