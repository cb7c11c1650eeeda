/* test_supervisor.c - check suite for supervisor/: the loop and its table
 * (supervisor.c, table.c, spawn.c), sd_notify (notify.c), the pid file,
 * process titles and inherited listeners.
 *
 * The supervisor is told to exec /proc/self/exe as its workers (instead of
 * sluice-worker), so here the workers are this test program: main() sees
 * SLUICE_WORKER_ID and becomes a fake
 * worker that speaks the control channel, answers signals, and writes what
 * happened to it as one line per event in $FAKE_DIR/events. What a fake
 * worker does is chosen by $FAKE_MODE, set by the test before it forks the
 * supervisor. Each test then drives the supervisor with real signals and
 * reads the events back; the ones about systemd also own a NOTIFY_SOCKET
 * and read what the supervisor told it.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/ctl.h"
#include "common/log.h"
#include "common/options.h"
#include "common/proctitle.h"
#include "supervisor/listen.h"
#include "supervisor/pidfile.h"
#include "supervisor/spawn.h"
#include "supervisor/supervisor.h"
#include "supervisor/table.h"

#define MAX_EVENTS  512
#define MAX_NOTES   256
#define HEARTBEAT_S 0.1 /* ten times faster than real workers */

typedef struct {
    char what[16]; /* start, ready, term, int, usr1, abrt, env-ok, ... */
    long pid;
    int id;    /* SLUICE_WORKER_ID */
    double at; /* CLOCK_MONOTONIC seconds */
} event_t;

static char base[64]; /* per test case, made by the runner */
static char dir[96];  /* per test: base/PID */
static char events_path[128];
static char notify_path[128];
static int notify_fd = -1;
static char notes[MAX_NOTES][512]; /* sd_notify datagrams received */
static int nnotes;

/* ---- the fake worker ------------------------------------------------- */

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

static void send_ctl(int fd, uint32_t type, uint32_t lanes, uint32_t busy,
                     double oldest)
{
    sl_ctl_msg_t m = {.type = type,
                      .pid = (uint32_t)getpid(),
                      .lanes = lanes,
                      .busy_lanes = busy,
                      .oldest = oldest};
    sl_ctl_send(fd, &m);
}

/* What a worker is promised: the listeners open and listening, a SEQPACKET
 * control socket, SIGTERM on the supervisor's death, no blocked signal,
 * none of systemd's variables. */
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
              !sigismember(&mask, SIGTERM) && !sigismember(&mask, SIGCHLD) &&
              getenv("NOTIFY_SOCKET") == NULL &&
              getenv("WATCHDOG_USEC") == NULL;
    record(ok ? "env-ok" : "env-bad");
}

/* One heartbeat as MODE shapes it: "hang" sends none, "busy" reports its
 * one lane inside a request since READY, "busy-partial" one lane of two. */
static void heartbeat(const char *mode, int ctl, double ready_at)
{
    double age = mono_now() - ready_at;

    if (strcmp(mode, "hang") == 0) {
        return;
    }
    if (strcmp(mode, "busy") == 0) {
        send_ctl(ctl, SL_CTL_HEARTBEAT, 1, 1, age);
    } else if (strcmp(mode, "busy-partial") == 0) {
        send_ctl(ctl, SL_CTL_HEARTBEAT, 2, 1, age);
    } else {
        send_ctl(ctl, SL_CTL_HEARTBEAT, 1, 0, 0);
    }
}

/* Signals, until one ends the worker: its exit status, or -1 to go on. */
static int on_fake_signal(const char *mode, int sig)
{
    switch (sig) {
    case SIGUSR1:
        record("usr1");
        return -1;
    case SIGTERM:
        record("term");
        return strcmp(mode, "ignore-term") == 0 ? -1 : 0;
    case SIGINT:
        record("int");
        return 0;
    case SIGQUIT:
        record("quit");
        return 0;
    case SIGABRT: {
        /* what faulthandler does: say something, then die of the signal */
        sigset_t abrt;
        record("abrt");
        sigemptyset(&abrt);
        sigaddset(&abrt, SIGABRT);
        signal(SIGABRT, SIG_DFL);
        sigprocmask(SIG_UNBLOCK, &abrt, NULL);
        raise(SIGABRT);
        return 1;
    }
    default:
        return -1;
    }
}

/* FAKE_MODE: ready (READY, heartbeats), appload (exit 3), crash (exit 1 at
 * once), ignore-term (READY, deaf to TERM), retire (READY, then RETIRE,
 * the first worker only), late-appload (the first worker is READY, every
 * later one exits 3), hang (READY, then silence), busy and busy-partial
 * (see heartbeat()), slowboot (never READY), late-ready (READY after
 * 0.4 s). */
static int fake_worker(void)
{
    const char *mode = getenv("FAKE_MODE");
    const char *ctl_env = getenv("SLUICE_CTL_FD");
    int ctl = ctl_env ? atoi(ctl_env) : -1;
    char marker[128];
    sigset_t set;

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

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGQUIT);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGABRT);
    sigprocmask(SIG_BLOCK, &set, NULL);

    bool ready = strcmp(mode, "slowboot") != 0;
    if (strcmp(mode, "late-ready") == 0) {
        usleep(400 * 1000);
    }
    double ready_at = mono_now();
    if (ready) {
        /* recorded before sent: the supervisor may act on it at once */
        record("ready");
        send_ctl(ctl, SL_CTL_READY, 1, 0, 0);
    }
    if (ready && strcmp(mode, "retire") == 0 && first) {
        record("retire");
        send_ctl(ctl, SL_CTL_RETIRE, 1, 0, 0);
    }
    for (;;) {
        struct timespec beat = {0, (long)(HEARTBEAT_S * 1e9)};
        int sig = sigtimedwait(&set, NULL, &beat);
        if (sig == -1) {
            if (ready) {
                heartbeat(mode, ctl, ready_at);
            }
            continue;
        }
        int rc = on_fake_signal(mode, sig);
        if (rc >= 0) {
            return rc;
        }
    }
}

/* ---- the harness ------------------------------------------------------- */

/* Unchecked fixture, in the runner process: it cleans up even after a test
 * that failed or crashed before it could stop its supervisor. */
static void base_make(void)
{
    snprintf(base, sizeof(base), "/tmp/sl-test-sup-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(base));
}

static void base_remove(void)
{
    char cmd[96];
    char path[128];
    FILE *f;

    snprintf(path, sizeof(path), "%s/supervisors", base);
    if ((f = fopen(path, "r")) != NULL) {
        for (long pid; fscanf(f, "%ld", &pid) == 1;) {
            kill((pid_t)pid, SIGKILL); /* its workers get SIGTERM */
        }
        fclose(f);
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
    ck_assert_int_eq(system(cmd), 0);
}

/* Checked, in the forked test: its own directory under base. */
static void setup(void)
{
    snprintf(dir, sizeof(dir), "%s/%ld", base, (long)getpid());
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(events_path, sizeof(events_path), "%s/events", dir);
    setenv("FAKE_DIR", dir, 1);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    nnotes = 0;
    sl_log_set_level(SL_LOG_WARNING);
}

static void teardown(void)
{
    if (notify_fd != -1) {
        close(notify_fd);
        notify_fd = -1;
    }
}

/* Note PID for base_remove(). */
static void remember_supervisor(pid_t pid)
{
    char path[128];

    snprintf(path, sizeof(path), "%s/supervisors", base);
    FILE *f = fopen(path, "a");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%ld\n", (long)pid);
    fclose(f);
}

/* A datagram socket the supervisors forked after this call report to. */
static void own_notify_socket(void)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};

    snprintf(notify_path, sizeof(notify_path), "%s/notify", dir);
    strcpy(sun.sun_path, notify_path);
    notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ck_assert_int_ne(notify_fd, -1);
    ck_assert_int_eq(bind(notify_fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
    setenv("NOTIFY_SOCKET", notify_path, 1);
}

/* Read every datagram waiting into notes[]. */
static void read_notes(void)
{
    for (;;) {
        ssize_t n = recv(notify_fd, notes[nnotes], sizeof(notes[0]) - 1, 0);
        if (n < 0) {
            return;
        }
        notes[nnotes][n] = '\0';
        if (nnotes < MAX_NOTES - 1) {
            nnotes++;
        }
    }
}

/* Index of the first note at or after FROM that contains TEXT, or -1. */
static int find_note(const char *text, int from)
{
    read_notes();
    for (int i = from; i < nnotes; i++) {
        if (strstr(notes[i], text) != NULL) {
            return i;
        }
    }
    return -1;
}

/* Wait up to SECS for a note containing TEXT at or after FROM. */
static int wait_note(const char *text, int from, double secs)
{
    double end = mono_now() + secs;
    int i;

    while ((i = find_note(text, from)) == -1) {
        ck_assert_msg(mono_now() < end, "waited %.1fs for a note '%s'", secs,
                      text);
        usleep(10000);
    }
    return i;
}

static int count_notes(const char *text)
{
    int k = 0;

    read_notes();
    for (int i = 0; i < nnotes; i++) {
        k += strstr(notes[i], text) != NULL;
    }
    return k;
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
        int rc = sl_supervisor_run(&o, "/proc/self/exe", argv, ls, 1);
        sl_listen_close(ls, 1, true);
        _exit(rc);
    }
    remember_supervisor(pid);
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

static void stop_supervisor(pid_t sup)
{
    ck_assert_int_eq(waitpid(sup, NULL, WNOHANG), 0); /* still running */
    kill(sup, SIGTERM);
    assert_exit(wait_exit(sup, 10), SL_EXIT_OK);
}

/* The pid of the first event WHAT, or 0. */
static long first_pid(const char *what)
{
    event_t ev[MAX_EVENTS];
    int n = read_events(ev, MAX_EVENTS);

    for (int i = 0; i < n; i++) {
        if (strcmp(ev[i].what, what) == 0) {
            return ev[i].pid;
        }
    }
    return 0;
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

/* Four workers dying together are one round of backoff, not four: the
 * delay must not jump to seconds after one bad deploy. */
START_TEST(test_backoff_counts_rounds_not_deaths)
{
    pid_t sup = start_supervisor("crash", "-w", "4", NULL);

    usleep(1000 * 1000); /* rounds at 0, 0.1, 0.3, 0.7: 16 starts */
    kill(sup, SIGTERM);
    assert_exit(wait_exit(sup, 10), SL_EXIT_OK);
    int k = count_events("start");
    ck_assert_msg(k >= 12 && k <= 24, "%d starts of 4 workers in 1s", k);
}
END_TEST

START_TEST(test_boot_timeout_gives_up)
{
    double t0 = mono_now();
    pid_t sup =
        start_supervisor("slowboot", "-w", "2", "--boot-timeout", "0.5", NULL);

    int status = wait_exit(sup, 10);
    double took = mono_now() - t0;
    assert_exit(status, SL_EXIT_FAIL);
    ck_assert_msg(took > 0.4 && took < 4.0, "gave up after %.2fs", took);
    ck_assert_int_eq(count_events("abrt"), 2); /* tracebacks asked for */
    ck_assert_int_eq(count_events("ready"), 0);
}
END_TEST

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

/* One lane of two stuck is a slow request, not a hung worker. */
START_TEST(test_some_lanes_busy_is_not_hung)
{
    pid_t sup = start_supervisor("busy-partial", "-t", "0.3", NULL);

    wait_events("ready", 1, 10);
    usleep(1200 * 1000);
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
 * more new worker is READY, and never more than 4 are alive at once. */
START_TEST(test_hup_replaces_new_before_old)
{
    event_t ev[MAX_EVENTS];
    pid_t sup = start_supervisor("ready", "-w", "3", NULL);

    wait_events("ready", 3, 10);
    kill(sup, SIGHUP);
    wait_events("term", 3, 10);
    int n = read_events(ev, MAX_EVENTS);
    long old[3];
    int nold = 0, new_ready = 0, terms = 0, alive = 0, most = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(ev[i].what, "ready") == 0 && nold < 3) {
            old[nold++] = ev[i].pid;
        } else if (strcmp(ev[i].what, "ready") == 0) {
            new_ready++;
        }
        if (strcmp(ev[i].what, "term") == 0) {
            terms++;
            alive--;
            ck_assert_msg(new_ready >= terms,
                          "old worker %ld stopped with"
                          " only %d replacements ready",
                          ev[i].pid, new_ready);
            ck_assert(ev[i].pid == old[0] || ev[i].pid == old[1] ||
                      ev[i].pid == old[2]);
        }
        if (strcmp(ev[i].what, "start") == 0) {
            alive++;
            most = alive > most ? alive : most;
        }
    }
    ck_assert_int_eq(new_ready, 3);
    ck_assert_msg(most <= 4, "%d workers alive at once (surge 1)", most);
    stop_supervisor(sup);
    ck_assert_int_eq(count_events("start"), 6);
}
END_TEST

/* --reload-surge 2 with 3 workers: two replacements boot at once, and
 * still never more than target + surge processes serve or boot. */
START_TEST(test_hup_surge)
{
    event_t ev[MAX_EVENTS];
    pid_t sup =
        start_supervisor("late-ready", "-w", "3", "--reload-surge", "2", NULL);

    wait_events("ready", 3, 10);
    kill(sup, SIGHUP);
    wait_events("term", 3, 10);
    int n = read_events(ev, MAX_EVENTS);
    int alive = 0, most = 0, starts = 0;
    double second_start = 0, first_new_ready = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(ev[i].what, "start") == 0) {
            alive++;
            most = alive > most ? alive : most;
            if (++starts == 5) {
                second_start = ev[i].at;
            }
        } else if (strcmp(ev[i].what, "term") == 0) {
            alive--;
        } else if (strcmp(ev[i].what, "ready") == 0 && starts > 3 &&
                   first_new_ready == 0) {
            first_new_ready = ev[i].at;
        }
    }
    ck_assert_msg(most == 5, "%d workers alive at once (3 + surge 2)", most);
    ck_assert_msg(second_start < first_new_ready,
                  "the second replacement waited for the first");
    stop_supervisor(sup);
}
END_TEST

/* A replacement that cannot load the app ends the rolling restart: the old
 * worker serves on, nothing else is tried, systemd hears why. */
START_TEST(test_hup_failure_keeps_old_generation)
{
    own_notify_socket();
    pid_t sup = start_supervisor("late-appload", NULL);

    wait_events("ready", 1, 10);
    wait_note("READY=1", 0, 10);
    long old = first_pid("ready");
    kill(sup, SIGHUP);
    int r = wait_note("RELOADING=1", 0, 10);
    int f = wait_note("READY=1", r + 1, 10);
    ck_assert_ptr_nonnull(strstr(notes[f], "reload failed"));
    usleep(500 * 1000);
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
    own_notify_socket();
    setenv("WATCHDOG_USEC", "200000", 1);
    pid_t sup = start_supervisor("late-ready", "-w", "2", NULL);

    usleep(100 * 1000);
    kill(sup, SIGHUP); /* workers still booting */
    int ready = wait_note("READY=1", 0, 10);
    ck_assert_int_eq(count_events("ready"), 2);
    ck_assert_ptr_nonnull(strstr(notes[ready], "STATUS=2/2 workers ready"));
    int reloading = wait_note("RELOADING=1", ready, 10);
    ck_assert_ptr_nonnull(strstr(notes[reloading], "MONOTONIC_USEC="));
    int again = wait_note("READY=1", reloading + 1, 10);
    ck_assert_int_eq(count_events("ready"), 4);
    usleep(400 * 1000);
    kill(sup, SIGTERM);
    assert_exit(wait_exit(sup, 10), SL_EXIT_OK);
    int stopping = wait_note("STOPPING=1", again, 2);
    ck_assert_int_eq(find_note("READY=1", stopping), -1);
    int pings = count_notes("WATCHDOG=1");
    ck_assert_msg(pings >= 5, "%d watchdog pings in about 1.5s", pings);
}
END_TEST

/* ---- helpers of the supervisor ---------------------------------------- */

START_TEST(test_pidfile_only_removes_its_own)
{
    char path[160], buf[32] = "";

    snprintf(path, sizeof(path), "%s/p.pid", dir);
    ck_assert_int_eq(sl_pidfile_write(path), 0);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
    fclose(f);
    ck_assert_int_eq(atol(buf), getpid());

    f = fopen(path, "w");
    fprintf(f, "1\n"); /* another supervisor took over */
    fclose(f);
    sl_pidfile_remove(path);
    ck_assert_int_eq(access(path, F_OK), 0);
    ck_assert_int_eq(sl_pidfile_write(path), 0);
    sl_pidfile_remove(path);
    ck_assert_int_eq(access(path, F_OK), -1);
    snprintf(path, sizeof(path), "%s/no/such/dir/p.pid", dir);
    ck_assert_int_eq(sl_pidfile_write(path), -1);
}
END_TEST

/* SLUICE_WORKER_BIN, when set, is the only candidate: it must be an
 * executable regular file. */
START_TEST(test_find_worker_honours_the_variable)
{
    char path[160], found[PATH_MAX];

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

START_TEST(test_listen_fdlist_round_trip)
{
    sl_listener_t ls[2], back[2];
    sl_options_t o;
    char list[64], want[64], unix_bind[160];

    snprintf(unix_bind, sizeof(unix_bind), "unix:%s/s.sock", dir);
    char *argv[] = {"t", "-b", "127.0.0.1:0", "-b", unix_bind, "m:a", NULL};
    ck_assert_int_eq(sl_options_parse(&o, 6, argv), 0);
    ck_assert_int_eq(sl_listen_open(&o, ls, 2), 2);
    ck_assert_int_eq(sl_listen_fdlist(ls, 2, list, sizeof(list)), 0);
    snprintf(want, sizeof(want), "%d,u%d", ls[0].fd, ls[1].fd);
    ck_assert_str_eq(list, want);
    ck_assert_int_eq(sl_listen_fdlist(ls, 2, list, 4), -1);

    ck_assert_int_eq(sl_listen_inherit(want, back, 2), 2);
    ck_assert_str_eq(back[0].name, ls[0].name);
    ck_assert(!back[0].unlink);
    ck_assert(back[1].unlink);
    ck_assert_str_eq(back[1].path, unix_bind + 5);
    ck_assert_int_eq(sl_listen_inherit("0", back, 2), -1); /* not a socket */
    ck_assert_int_eq(sl_listen_inherit("x3", back, 2), -1);
    ck_assert_int_eq(sl_listen_inherit("", back, 2), -1);
    sl_listen_close(ls, 2, true);
    ck_assert_int_eq(access(unix_bind + 5, F_OK), -1);
}
END_TEST

static int main_argc;
static char **main_argv;

/* In a child (the title is written over this program's real argv): ps
 * shows the title alone, and the environment and the arguments survive in
 * their copies. */
START_TEST(test_proctitle)
{
    pid_t pid = fork();

    ck_assert_int_ne(pid, -1);
    if (pid == 0) {
        char want[] = "sluice: worker 3 [m:a]";
        char got[256] = "";
        char *arg0 = strdup(main_argv[0]);
        char **copy = sl_proctitle_init(main_argc, main_argv);
        sl_proctitle_set("sluice", "%s: worker %d [%s]", "sluice", 3, "m:a");
        int fd = open("/proc/self/cmdline", O_RDONLY);
        ssize_t n = read(fd, got, sizeof(got) - 1);
        close(fd);
        bool ok = copy != NULL && strcmp(copy[0], arg0) == 0 &&
                  n > (ssize_t)strlen(want) && strcmp(got, want) == 0 &&
                  getenv("FAKE_DIR") != NULL &&
                  strcmp(getenv("FAKE_DIR"), dir) == 0 &&
                  setenv("SL_TITLE_TEST", "1", 1) == 0;
        _exit(ok ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    assert_exit(status, 0);
}
END_TEST

static Suite *supervisor_suite(void)
{
    Suite *s = suite_create("supervisor");
    TCase *sig = tcase_create("signals");
    TCase *life = tcase_create("deaths");
    TCase *health = tcase_create("health");
    TCase *replace = tcase_create("replacing");
    TCase *sd = tcase_create("systemd");
    TCase *help = tcase_create("helpers");
    TCase *all[] = {sig, life, health, replace, sd, help};

    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        tcase_set_timeout(all[i], 30);
        tcase_add_unchecked_fixture(all[i], base_make, base_remove);
        tcase_add_checked_fixture(all[i], setup, teardown);
        suite_add_tcase(s, all[i]);
    }
    tcase_add_test(sig, test_term_stops_cleanly);
    tcase_add_test(sig, test_int_and_quit_are_passed_on);
    tcase_add_test(sig, test_graceful_timeout_ends_in_sigkill);
    tcase_add_test(sig, test_ttin_ttou_usr1);
    tcase_add_test(sig, test_pidfile);
    tcase_add_test(life, test_appload_stops_with_usage_status);
    tcase_add_test(life, test_appload_after_ready_is_retried);
    tcase_add_test(life, test_crash_respawn_backs_off);
    tcase_add_test(life, test_backoff_counts_rounds_not_deaths);
    tcase_add_test(life, test_boot_timeout_gives_up);
    tcase_add_test(health, test_no_heartbeat_aborts_and_replaces);
    tcase_add_test(health, test_all_lanes_busy_aborts);
    tcase_add_test(health, test_some_lanes_busy_is_not_hung);
    tcase_add_test(replace, test_retire_replaces_before_term);
    tcase_add_test(replace, test_hup_replaces_new_before_old);
    tcase_add_test(replace, test_hup_surge);
    tcase_add_test(replace, test_hup_failure_keeps_old_generation);
    tcase_add_test(sd, test_notify_sequence);
    tcase_add_test(help, test_pidfile_only_removes_its_own);
    tcase_add_test(help, test_find_worker_honours_the_variable);
    tcase_add_test(help, test_listen_fdlist_round_trip);
    tcase_add_test(help, test_proctitle);
    return s;
}

int main(int argc, char **argv)
{
    main_argc = argc;
    main_argv = argv;
    if (getenv("SLUICE_WORKER_ID") != NULL) {
        return fake_worker();
    }

    SRunner *sr = srunner_create(supervisor_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
