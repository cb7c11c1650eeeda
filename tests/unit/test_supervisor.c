/* test_supervisor.c - check suite for supervisor/supervisor.c, the loop:
 * signals, deaths and boots, health, rolling restarts, what systemd is
 * told. The modules it uses have suites of their own.
 *
 * The supervisor is told to exec /proc/self/exe as its workers (instead
 * of sluice-worker), so here the workers are this test program: main()
 * sees SLUICE_WORKER_ID and becomes a fake worker that speaks the control
 * channel, answers signals, and writes what happened to it as one line per
 * event in $FAKE_DIR/events. What a fake worker does is chosen by $FAKE_MODE,
 * set by the test before it forks the supervisor. Each test then drives the
 * supervisor with real signals and reads the events back; the ones about
 * systemd also own a NOTIFY_SOCKET (harness_base.h's h_notify_*) and read what
 * the supervisor told it.
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

static void record(const char *what)
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
static void note_pid(void)
{
    const char *path = getenv("FAKE_PIDS");
    FILE *f = path ? fopen(path, "a") : NULL;

    if (f != NULL) {
        fprintf(f, "%ld\n", (long)getpid());
        fclose(f);
    }
}

/* This worker's number in the test, 1, 2, ... in the order they started. */
static int take_number(void)
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
static bool gate_open(int number)
{
    const char *from = getenv("FAKE_GATE_FROM");
    char path[160];

    if (from == NULL || number < atoi(from)) {
        return true;
    }
    snprintf(path, sizeof(path), "%s/gate.%d", getenv("FAKE_DIR"), number);
    return access(path, F_OK) == 0;
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
 * one lane inside a request since READY, "busy-partial" one lane of two.
 * The first one that reports a request older than $FAKE_AGED seconds is
 * followed by an "aged" event. */
static void heartbeat(const char *mode, int ctl, double ready_at)
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
static int drain(int ctl)
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
static int fake_worker(void)
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

static void setup(void)
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

static void teardown(void)
{
    h_notify_close(&nt);
}

/* Fork a supervisor running MODE workers with "sluice ARGS... m:a"; ARGS
 * is NULL-terminated. It logs to supervisor.log at INFO. Returns its pid,
 * which is also its process group's id when own_group is set. */
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

/* Occurrences of TEXT in the supervisor's log. */
static int log_count(const char *text)
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

static bool reached(void *arg)
{
    want_t *w = arg;

    return w->count(w->what) >= w->n;
}

/* Wait up to SECS for at least N events WHAT. */
static void wait_events(const char *what, int n, double secs)
{
    want_t w = {count_events, what, n};

    ck_assert_msg(h_wait_until(reached, &w, secs),
                  "waited %.1fs for %d '%s' events, saw %d", secs, n, what,
                  count_events(what));
}

/* Wait up to SECS for at least N lines containing TEXT in the log. */
static void wait_log(const char *text, int n, double secs)
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
static void settle(pid_t sup)
{
    for (int i = 0; i < 2; i++) {
        int n = log_count("log files reopened");
        ck_assert_int_eq(kill(sup, SIGUSR1), 0);
        wait_log("log files reopened", n + 1, WAIT_S);
    }
}

/* Let worker NUMBER become READY. */
static void open_gate(int number)
{
    char path[160];

    snprintf(path, sizeof(path), "%s/gate.%d", dir, number);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
}

/* Let every "drains" worker end its drain, now and from now on. */
static void open_drain_gate(void)
{
    char path[160];

    snprintf(path, sizeof(path), "%s/drained", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
}

/* Wait up to SECS for PID to exit; returns its wait status. */
static int wait_exit(pid_t pid, double secs)
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

static void assert_exit(int status, int code)
{
    ck_assert_msg(WIFEXITED(status), "status %#x", status);
    ck_assert_int_eq(WEXITSTATUS(status), code);
}

static void stop_supervisor(pid_t sup)
{
    ck_assert_int_eq(waitpid(sup, NULL, WNOHANG), 0); /* still running */
    kill(sup, SIGTERM);
    assert_exit(wait_exit(sup, WAIT_S), SL_EXIT_OK);
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

/* A datagram containing TEXT at or after index FROM, within SECS. */
static int wait_note(const char *text, int from, double secs)
{
    int i = h_notify_wait(&nt, text, from, secs);

    ck_assert_msg(i >= 0, "waited %.1fs for a note '%s'", secs, text);
    return i;
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

static Suite *supervisor_suite(void)
{
    Suite *s = suite_create("supervisor");
    TCase *sig = tcase_create("signals");
    TCase *life = tcase_create("deaths");
    TCase *health = tcase_create("health");
    TCase *replace = tcase_create("replacing");
    TCase *sd = tcase_create("systemd");
    TCase *all[] = {sig, life, health, replace, sd};

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

    SRunner *sr = srunner_create(supervisor_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
