/* harness_base.h - what every suite may share: scratch directories (and
 * the processes a test started, killed if it fails), the log in a file,
 * bounded waits for a condition, a child's exit or a pipe's EOF, a
 * NOTIFY_SOCKET of the test's own, a bounded runner for any libev loop,
 * and a loopback listener. It includes nothing of the worker's, so a
 * suite of the supervisor or of common/ links its own side's library
 * only; harness.h adds the loop side's fixtures on top.
 *
 * The one idea: nothing here sleeps for a fixed time. A test waits for the
 * event that proves the state it needs, and a wait that never ends fails
 * after a deadline instead of hanging. A test thread that runs a loop runs
 * it one pass at a time (EVRUN_ONCE, with a 10 ms guard timer so a pass
 * never blocks long) and checks its condition after every pass; elsewhere
 * it polls the condition, blocked on a descriptor that would announce the
 * change when there is one. Everything is static inline so a suite that
 * uses part of it still builds under -Wunused-function; suites run their
 * tests forked (check's default), so the globals here start fresh in every
 * test.
 */
#ifndef SL_TEST_HARNESS_BASE_H
#define SL_TEST_HARNESS_BASE_H

#include <check.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define H_DEADLINE 2.5 /* seconds any h_loop_until() may take */

/* ------------------------------------------------------------------ */
/* scratch files                                                      */

static char h_dir[64]; /* made by the runner, shared by a test case */

/* Unchecked fixture: it runs in the runner process, not in the forked
 * test, so h_dir_remove() cleans up even after a test that crashed before
 * its own teardown could run: the processes h_track() noted are killed,
 * then the directory goes. */
static inline void h_dir_make(void)
{
    snprintf(h_dir, sizeof(h_dir), "/tmp/sl-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(h_dir));
}

static inline void h_dir_remove(void)
{
    char cmd[96];
    FILE *f;

    snprintf(cmd, sizeof(cmd), "%s/pids", h_dir);
    if ((f = fopen(cmd, "r")) != NULL) {
        for (long pid; fscanf(f, "%ld", &pid) == 1;) {
            if (pid > 0)
                kill((pid_t)pid, SIGKILL);
        }
        fclose(f);
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", h_dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Note process PID (a child the test started) for h_dir_remove() to kill,
 * in case the test fails before it ends the child itself. */
static inline void h_track(pid_t pid)
{
    char path[96];
    FILE *f;

    snprintf(path, sizeof(path), "%s/pids", h_dir);
    f = fopen(path, "a");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%ld\n", (long)pid);
    fclose(f);
}

/* This test's own directory under h_dir (a path in a static buffer). */
static inline const char *h_test_dir(void)
{
    static char d[96];

    snprintf(d, sizeof(d), "%s/%ld", h_dir, (long)getpid());
    ck_assert_msg(mkdir(d, 0700) == 0 || errno == EEXIST, "mkdir %s: %s", d,
                  strerror(errno));
    return d;
}

/* The whole of file PATH (a static buffer, reused by the next call);
 * "" when it does not exist. */
static inline const char *h_file_text(const char *path)
{
    static char buf[1 << 16];
    FILE *f = fopen(path, "r");
    size_t n = 0;

    if (f != NULL) {
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
    }
    buf[n] = '\0';
    return buf;
}

static char h_logpath[128];

/* Send this process's log to error.log in h_test_dir(). */
static inline void h_log_to_file(void)
{
    snprintf(h_logpath, sizeof(h_logpath), "%s/error.log", h_test_dir());
    ck_assert_int_eq(sl_log_open(h_logpath), 0);
}

/* Everything logged since h_log_to_file() (h_file_text()'s buffer). */
static inline const char *h_log_text(void)
{
    return h_file_text(h_logpath);
}

/* ------------------------------------------------------------------ */
/* bounded waits                                                      */

static inline double h_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Until PRED(ARG) holds: true, or false after SECS. Between tries it
 * blocks up to 5 ms in poll() on FD, the descriptor that becomes readable
 * when the state may have changed (-1 when there is none), so a change
 * announced on FD is seen at once and anything else within 5 ms. */
static inline bool h_wait_fd_until(int fd, bool (*pred)(void *), void *arg,
                                   double secs)
{
    double end = h_now() + secs;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};

    while (!pred(arg)) {
        if (h_now() > end)
            return false;
        poll(&pfd, fd >= 0 ? 1 : 0, 5);
    }
    return true;
}

static inline bool h_wait_until(bool (*pred)(void *), void *arg, double secs)
{
    return h_wait_fd_until(-1, pred, arg, secs);
}

typedef struct {
    pid_t pid;
    int *status;
} h_child_t;

static inline bool h_reaped(void *arg)
{
    h_child_t *c = arg;
    pid_t r = waitpid(c->pid, c->status, WNOHANG);

    ck_assert_msg(r != -1, "waitpid(%ld): %s", (long)c->pid, strerror(errno));
    return r == c->pid;
}

/* Reap child PID into *STATUS within SECS; false (the child left running)
 * when it did not exit in time. */
static inline bool h_wait_exit(pid_t pid, int *status, double secs)
{
    h_child_t c = {pid, status};

    return h_wait_until(h_reaped, &c, secs);
}

/* Read FD into BUF (NUL-terminated, at most SIZE - 1 bytes kept) until
 * EOF: true, or false when SECS pass first. For what a child writes to a
 * pipe before it closes its end. */
static inline bool h_read_to_eof(int fd, char *buf, size_t size, double secs)
{
    double end = h_now() + secs;
    size_t len = 0;
    char sink[256];

    buf[0] = '\0';
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        double left = end - h_now();
        int r = left > 0 ? poll(&pfd, 1, (int)(left * 1000) + 1) : 0;
        if (r == 0 || (r < 0 && errno != EINTR))
            return false;
        if (r < 0)
            continue;
        char *to = len + 1 < size ? buf + len : sink;
        size_t room = len + 1 < size ? size - 1 - len : sizeof(sink);
        ssize_t n = read(fd, to, room);
        if (n == 0)
            return true;
        if (n < 0 && errno != EINTR && errno != EAGAIN)
            return false;
        if (n > 0 && to == buf + len) {
            len += (size_t)n;
            buf[len] = '\0';
        }
    }
}

/* ------------------------------------------------------------------ */
/* a NOTIFY_SOCKET of the test's own                                  */

#define H_MAX_NOTES 256

typedef struct {
    int fd;
    int n;                        /* datagrams received */
    char text[H_MAX_NOTES][1024]; /* each NUL-terminated */
    double at[H_MAX_NOTES];       /* h_now() when it was read */
    char name[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* as set */
} h_notify_t;

/* Bind a datagram socket and point NOTIFY_SOCKET at it: a file in
 * h_test_dir(), or with ABSTRACT a name in Linux's abstract namespace
 * ("@..."). What this process and its children send afterwards lands in
 * NT. Past H_MAX_NOTES, the last slot is overwritten. */
static inline void h_notify_open(h_notify_t *nt, bool abstract)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    socklen_t len;

    nt->n = 0;
    if (abstract) {
        snprintf(nt->name, sizeof(nt->name), "@sl-test-notify-%ld",
                 (long)getpid());
        memcpy(sun.sun_path + 1, nt->name + 1, strlen(nt->name) - 1);
        len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
                          strlen(nt->name));
    } else {
        snprintf(nt->name, sizeof(nt->name), "%s/notify", h_test_dir());
        strcpy(sun.sun_path, nt->name);
        len = sizeof(sun);
    }
    nt->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ck_assert_int_ne(nt->fd, -1);
    ck_assert_msg(bind(nt->fd, (struct sockaddr *)&sun, len) == 0,
                  "bind(%s): %s", nt->name, strerror(errno));
    ck_assert_int_eq(setenv("NOTIFY_SOCKET", nt->name, 1), 0);
}

static inline void h_notify_close(h_notify_t *nt)
{
    if (nt->fd >= 0)
        close(nt->fd);
    nt->fd = -1;
    unsetenv("NOTIFY_SOCKET");
}

/* Take every datagram waiting, without blocking. */
static inline void h_notify_read(h_notify_t *nt)
{
    for (;;) {
        int i = nt->n < H_MAX_NOTES ? nt->n : H_MAX_NOTES - 1;
        ssize_t got = recv(nt->fd, nt->text[i], sizeof(nt->text[i]) - 1, 0);
        if (got < 0)
            return;
        nt->text[i][got] = '\0';
        nt->at[i] = h_now();
        if (nt->n < H_MAX_NOTES)
            nt->n++;
    }
}

/* The index of the first datagram at or after FROM containing TEXT, or -1
 * (reading what is waiting first). */
static inline int h_notify_find(h_notify_t *nt, const char *text, int from)
{
    h_notify_read(nt);
    for (int i = from; i < nt->n; i++) {
        if (strstr(nt->text[i], text) != NULL)
            return i;
    }
    return -1;
}

/* Datagrams so far containing TEXT. */
static inline int h_notify_count(h_notify_t *nt, const char *text)
{
    int k = 0;

    h_notify_read(nt);
    for (int i = 0; i < nt->n; i++)
        k += strstr(nt->text[i], text) != NULL;
    return k;
}

typedef struct {
    h_notify_t *nt;
    const char *text;
    int from, found;
} h_note_t;

static inline bool h_note_came(void *arg)
{
    h_note_t *w = arg;

    w->found = h_notify_find(w->nt, w->text, w->from);
    return w->found >= 0;
}

/* Wait up to SECS for a datagram containing TEXT at or after index FROM;
 * its index, or -1. */
static inline int h_notify_wait(h_notify_t *nt, const char *text, int from,
                                double secs)
{
    h_note_t w = {nt, text, from, -1};

    h_wait_fd_until(nt->fd, h_note_came, &w, secs);
    return w.found;
}

/* ------------------------------------------------------------------ */
/* the loop                                                           */

static ev_timer h_guard; /* bounds one EVRUN_ONCE pass */

static inline void h_guard_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;
}

/* Run passes of LOOP until PRED(ARG) holds; false after H_DEADLINE. The
 * guard timer goes on the first loop run this way (one loop per test). */
static inline bool h_loop_until(struct ev_loop *loop, bool (*pred)(void *),
                                void *arg)
{
    double end = h_now() + H_DEADLINE;

    if (!ev_is_active(&h_guard)) {
        ev_timer_init(&h_guard, h_guard_cb, 0.01, 0.01);
        ev_timer_start(loop, &h_guard);
    }
    while (!pred(arg)) {
        if (h_now() > end)
            return false;
        ev_run(loop, EVRUN_ONCE);
    }
    return true;
}

/* ------------------------------------------------------------------ */
/* sockets                                                            */

/* A non-blocking listening socket on 127.0.0.1, port chosen by the kernel. */
static inline int h_listen(void)
{
    struct sockaddr_in sin = {.sin_family = AF_INET};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    ck_assert_int_ge(fd, 0);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    ck_assert_int_eq(listen(fd, 64), 0);
    return fd;
}

/* A client's bytes sent from a thread of its own, for when the test
 * thread must keep running a loop meanwhile: start h_send_all() on an
 * h_sender_t; it returns once all N bytes went, or at the first error. */
typedef struct {
    int fd;
    const char *data;
    size_t n;
} h_sender_t;

static inline void *h_send_all(void *arg)
{
    h_sender_t *s = arg;

    for (size_t at = 0; at < s->n;) {
        ssize_t w = send(s->fd, s->data + at, s->n - at, MSG_NOSIGNAL);
        if (w <= 0)
            return NULL;
        at += (size_t)w;
    }
    return NULL;
}

#endif
