/* supervisor_harness.h - what the supervisor loop's suites
 * (test_supervisor*.c, for supervisor/supervisor.c) share: the fake worker
 * each test program becomes when the supervisor execs it (main() sees
 * SLUICE_WORKER_ID and calls fake_worker()), and the test's side: a
 * supervisor started in a child, its events, its log, the gates, and the
 * bounded waits on all of them (setup/teardown as check fixtures).
 */
#ifndef SL_TEST_SUPERVISOR_HARNESS_H
#define SL_TEST_SUPERVISOR_HARNESS_H

#include <check.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/prctl.h>

#include "common/ctl.h"
#include "supervisor/listen.h"
#include "supervisor/supervisor.h"
#include "tests/unit/harness_base.h"

#define MAX_EVENTS  512
#define HEARTBEAT_S 0.1 /* ten times faster than real workers */
#define GATE_POLL_S 0.01
#define WAIT_S      10.0

typedef struct {
    char what[16]; /* start, ready, term, int, usr1, abrt, env-ok, ... */
    long pid;
    int id;    /* SLUICE_WORKER_ID */
    double at; /* CLOCK_MONOTONIC seconds */
} event_t;

static char dir[96];   /* this test's directory, h_test_dir() */
static bool own_group; /* start_supervisor(): in a process group of its own */
static char events_path[128];
static char sup_log_path[128];
static h_notify_t nt = {.fd = -1};

/* ---- the fake worker ------------------------------------------------- */

static inline void record(const char *what)
{
    char line[128];
    const char *fdir = getenv("FAKE_DIR");
    const char *id = getenv("SLUICE_WORKER_ID");
    char path[128];

    snprintf(path, sizeof(path), "%s/events", fdir ? fdir : ".");
    int n = snprintf(line, sizeof(line), "%s %ld %s %.6f\n", what,
                     (long)getpid(), id ? id : "-", h_now());
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd >= 0) {
        ssize_t w = write(fd, line, (size_t)n);
        (void)w;
        close(fd);
    }
}

/* Add this process to $FAKE_PIDS, which h_dir_remove() kills: a worker
 * that ignores TERM must not outlive a failed test. */
static inline void note_pid(void)
{
    const char *path = getenv("FAKE_PIDS");
    FILE *f = path ? fopen(path, "a") : NULL;

    if (f != NULL) {
        fprintf(f, "%ld\n", (long)getpid());
        fclose(f);
    }
}

/* This worker's number in the test, 1, 2, ... in the order they started. */
static inline int take_number(void)
{
    char path[160];

    for (int n = 1; n < 10000; n++) {
        snprintf(path, sizeof(path), "%s/number.%d", getenv("FAKE_DIR"), n);
        int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
        if (fd >= 0) {
            close(fd);
            return n;
        }
        if (errno != EEXIST) {
            break;
        }
    }
    return -1;
}

/* Worker NUMBER may become READY: no gate, a gate for later workers only
 * ($FAKE_GATE_FROM), or the test has opened its gate. */
static inline bool gate_open(int number)
{
    const char *from = getenv("FAKE_GATE_FROM");
    char path[160];

    if (from == NULL || number < atoi(from)) {
        return true;
    }
    snprintf(path, sizeof(path), "%s/gate.%d", getenv("FAKE_DIR"), number);
    return access(path, F_OK) == 0;
}

static inline void send_ctl(int fd, uint32_t type, uint32_t lanes,
                            uint32_t busy, double oldest)
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
static inline void check_inheritance(int ctl)
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
 * one lane inside a request since READY, "busy-partial" one lane of two.
 * The first one that reports a request older than $FAKE_AGED seconds is
 * followed by an "aged" event. */
static inline void heartbeat(const char *mode, int ctl, double ready_at)
{
    static bool aged;
    const char *aged_env = getenv("FAKE_AGED");
    double age = h_now() - ready_at;

    if (strcmp(mode, "hang") == 0 || strcmp(mode, "hang-deaf") == 0) {
        return;
    }
    if (strcmp(mode, "busy") == 0) {
        send_ctl(ctl, SL_CTL_HEARTBEAT, 1, 1, age);
    } else if (strcmp(mode, "busy-partial") == 0) {
        send_ctl(ctl, SL_CTL_HEARTBEAT, 2, 1, age);
    } else {
        send_ctl(ctl, SL_CTL_HEARTBEAT, 1, 0, 0);
        return;
    }
    if (aged_env != NULL && !aged && age >= atof(aged_env)) {
        aged = true;
        record("aged");
    }
}

/* Signals, until one ends the worker: its exit status, or -1 to go on. */
static inline int on_fake_signal(const char *mode, int sig)
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
        if (strcmp(mode, "hang-deaf") == 0)
            return -1; /* stuck too hard: SIGKILL a second later */
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

/* "drains", a READY worker's answer to TERM, as a real one's: it says
 * DRAINING, then serves what it has in flight (silent: no heartbeat) until
 * the test opens the drain gate, and exits 0. */
static inline int drain(int ctl)
{
    char path[160];
    struct timespec poll = {0, (long)(GATE_POLL_S * 1e9)};

    record("draining"); /* before it is sent, as "ready" */
    send_ctl(ctl, SL_CTL_DRAINING, 1, 0, 0);
    snprintf(path, sizeof(path), "%s/drained", getenv("FAKE_DIR"));
    while (access(path, F_OK) != 0) {
        nanosleep(&poll, NULL);
    }
    return 0;
}

/* FAKE_MODE: ready (READY, heartbeats), appload (exit 3), crash (exit 1 at
 * once), ignore-term (READY, deaf to TERM), retire (READY, then RETIRE,
 * the first worker only), late-appload (the first worker is READY, every
 * later one exits 3), hang (READY, then silence), hang-deaf (the same,
 * and SIGABRT does not end it: SIGKILL does), busy and busy-partial
 * (see heartbeat()), slowboot (never READY), drains (READY; TERM: see
 * drain()). With $FAKE_GATE_FROM, a worker numbered that or higher is
 * READY only once its gate is open. */
static inline int fake_worker(void)
{
    const char *mode = getenv("FAKE_MODE");
    const char *ctl_env = getenv("SLUICE_CTL_FD");
    int ctl = ctl_env ? atoi(ctl_env) : -1;
    sigset_t set;

    mode = mode ? mode : "ready";
    note_pid();
    record("start");
    check_inheritance(ctl);
    int number = take_number();
    bool first = number == 1;

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

    bool boots = strcmp(mode, "slowboot") != 0, ready = false;
    double ready_at = 0;
    for (;;) {
        if (boots && !ready && gate_open(number)) {
            ready = true;
            ready_at = h_now();
            /* recorded before sent: the supervisor may act on it at once */
            record("ready");
            send_ctl(ctl, SL_CTL_READY, 1, 0, 0);
            if (strcmp(mode, "retire") == 0 && first) {
                record("retire");
                send_ctl(ctl, SL_CTL_RETIRE, 1, 0, 0);
            }
        }
        double wait_s = boots && !ready ? GATE_POLL_S : HEARTBEAT_S;
        struct timespec beat = {0, (long)(wait_s * 1e9)};
        int sig = sigtimedwait(&set, NULL, &beat);
        if (sig == -1) {
            if (ready) {
                heartbeat(mode, ctl, ready_at);
            }
            continue;
        }
        if (sig == SIGTERM && ready && strcmp(mode, "drains") == 0) {
            record("term");
            return drain(ctl);
        }
        int rc = on_fake_signal(mode, sig);
        if (rc >= 0) {
            return rc;
        }
    }
}

/* ---- the supervisor's side ------------------------------------------ */

static inline void setup(void)
{
    char pids[96];

    snprintf(dir, sizeof(dir), "%s", h_test_dir());
    snprintf(events_path, sizeof(events_path), "%s/events", dir);
    snprintf(sup_log_path, sizeof(sup_log_path), "%s/supervisor.log", dir);
    snprintf(pids, sizeof(pids), "%s/pids", h_dir);
    setenv("FAKE_DIR", dir, 1);
    setenv("FAKE_PIDS", pids, 1);
    unsetenv("FAKE_GATE_FROM");
    unsetenv("FAKE_AGED");
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    own_group = false;
    sl_log_set_level(SL_LOG_WARNING);
}

static inline void teardown(void)
{
    h_notify_close(&nt);
}

/* Fork a supervisor running MODE workers with "sluice ARGS... m:a"; ARGS
 * is NULL-terminated. It logs to supervisor.log at INFO. Returns its pid,
 * which is also its process group's id when own_group is set. */
static inline pid_t start_supervisor(const char *mode, ...)
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
    if (own_group) {
        setpgid(pid, pid); /* in both: a signal to the group may come first */
    }
    if (pid == 0) {
        /* No ck_* here: this process is the supervisor now. */
        static sl_options_t o;
        sl_listener_t ls[1];
        if (sl_log_open(sup_log_path) != 0) {
            _exit(102);
        }
        sl_log_set_level(SL_LOG_INFO);
        if (sl_options_parse(&o, argc, argv) != 0) {
            _exit(100);
        }
        o.binds[0] = "127.0.0.1:0";
        o.nbinds = 1;
        if (sl_listen_open(&o, ls, 1) != 1) {
            _exit(101);
        }
        int rc = sl_supervisor_run(&o, "/proc/self/exe", argv, argv, ls, 1);
        sl_listen_close(ls, 1, true);
        _exit(rc);
    }
    h_track(pid);
    return pid;
}

/* Events so far, in file order. */
static inline int read_events(event_t *ev, int max)
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

static inline int count_events(const char *what)
{
    event_t ev[MAX_EVENTS];
    int n = read_events(ev, MAX_EVENTS), k = 0;

    for (int i = 0; i < n; i++) {
        k += strcmp(ev[i].what, what) == 0;
    }
    return k;
}

/* Occurrences of TEXT in the supervisor's log. */
static inline int log_count(const char *text)
{
    int k = 0;

    for (const char *p = h_file_text(sup_log_path);
         (p = strstr(p, text)) != NULL; p++) {
        k++;
    }
    return k;
}

typedef struct {
    int (*count)(const char *);
    const char *what;
    int n;
} want_t;

static inline bool reached(void *arg)
{
    want_t *w = arg;

    return w->count(w->what) >= w->n;
}

/* Wait up to SECS for at least N events WHAT. */
static inline void wait_events(const char *what, int n, double secs)
{
    want_t w = {count_events, what, n};

    ck_assert_msg(h_wait_until(reached, &w, secs),
                  "waited %.1fs for %d '%s' events, saw %d", secs, n, what,
                  count_events(what));
}

/* Wait up to SECS for at least N lines containing TEXT in the log. */
static inline void wait_log(const char *text, int n, double secs)
{
    want_t w = {log_count, text, n};

    ck_assert_msg(h_wait_until(reached, &w, secs),
                  "waited %.1fs for %d '%s' in the log:\n%s", secs, n, text,
                  h_file_text(sup_log_path));
}

/* Make supervisor SUP show that whatever it had received when this is
 * called (a message, a child's exit, a signal) has been acted on by a
 * cycle() that has ended. Each USR1 gets a cycle() that logs "log files
 * reopened" before it maintains the table: the first may be the very
 * cycle that handles what was pending, the second begins only after that
 * one has ended. (The workers are sent USR1 too.) */
static inline void settle(pid_t sup)
{
    for (int i = 0; i < 2; i++) {
        int n = log_count("log files reopened");
        ck_assert_int_eq(kill(sup, SIGUSR1), 0);
        wait_log("log files reopened", n + 1, WAIT_S);
    }
}

/* Wait up to SECS for PID to exit; returns its wait status. */
static inline int wait_exit(pid_t pid, double secs)
{
    int status;

    if (!h_wait_exit(pid, &status, secs)) {
        kill(pid, SIGKILL);
        h_wait_exit(pid, &status, secs);
        ck_abort_msg("supervisor did not exit within %.1fs; its log:\n%s", secs,
                     h_file_text(sup_log_path));
    }
    return status;
}

static inline void assert_exit(int status, int code)
{
    ck_assert_msg(WIFEXITED(status), "status %#x", status);
    ck_assert_int_eq(WEXITSTATUS(status), code);
}

static inline void stop_supervisor(pid_t sup)
{
    ck_assert_int_eq(waitpid(sup, NULL, WNOHANG), 0); /* still running */
    kill(sup, SIGTERM);
    assert_exit(wait_exit(sup, WAIT_S), SL_EXIT_OK);
}

/* The pid of the first event WHAT, or 0. */
static inline long first_pid(const char *what)
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

/* A datagram containing TEXT at or after index FROM, within SECS. */
static inline int wait_note(const char *text, int from, double secs)
{
    int i = h_notify_wait(&nt, text, from, secs);

    ck_assert_msg(i >= 0, "waited %.1fs for a note '%s'", secs, text);
    return i;
}

#endif
