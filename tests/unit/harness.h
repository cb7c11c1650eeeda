/* harness.h - what the suites share. For every suite: scratch
 * directories, the log in a file, bounded waits for a condition or a
 * child's exit, and a NOTIFY_SOCKET of the test's own. For the loop-side
 * suites: options from an argv, a real pump on a loopback listener, clients
 * connected to it, and a bounded loop runner.
 *
 * The one idea: nothing here sleeps for a fixed time. A test waits for the
 * event that proves the state it needs, and a wait that never ends fails
 * after a deadline instead of hanging. Where the test thread is a loop
 * thread, it runs libev one pass at a time (EVRUN_ONCE, with a 10 ms guard
 * timer so a pass never blocks long) and checks its condition after every
 * pass; elsewhere it polls the condition, blocked on a descriptor that
 * would announce the change when there is one. Everything is static inline
 * so a suite that uses part of it still builds under -Wunused-function;
 * suites run their tests forked (check's default), so the globals here
 * start fresh in every test.
 */
#ifndef SL_TEST_HARNESS_H
#define SL_TEST_HARNESS_H

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/options.h"
#include "worker/loop/conn.h"
#include "worker/loop/exec.h"
#include "worker/loop/pump.h"

#define H_DEADLINE 2.5 /* seconds any h_run_until() may take */
#define H_MAX_ARGS 32

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
/* options                                                            */

/* Parse "sluice ARGS... testapp:app" (ARGS NULL-terminated) into *O. */
static inline void h_options(sl_options_t *o, ...)
{
    static char *argv[H_MAX_ARGS + 3];
    va_list ap;
    int argc = 0;

    argv[argc++] = "sluice";
    va_start(ap, o);
    for (char *a; (a = va_arg(ap, char *)) != NULL;) {
        ck_assert_int_lt(argc, H_MAX_ARGS);
        argv[argc++] = a;
    }
    va_end(ap);
    argv[argc++] = "testapp:app";
    argv[argc] = NULL;
    ck_assert_int_eq(sl_options_parse(o, argc, argv), 0);
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

/* Run passes of P's loop until PRED(ARG) holds; false after H_DEADLINE. */
static inline bool h_run_until(sl_pump_t *p, bool (*pred)(void *), void *arg)
{
    return h_loop_until(p->loop, pred, arg);
}

/* A few passes with nothing expected to change: for asserting that
 * something did *not* happen once everything ready has been processed. */
static inline void h_run_passes(sl_pump_t *p, int n)
{
    while (n-- > 0)
        ev_run(p->loop, EVRUN_NOWAIT);
}

/* ------------------------------------------------------------------ */
/* the pump                                                           */

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

/* ------------------------------------------------------------------ */
/* executors                                                          */

static inline int h_exec_stop(sl_pump_t *p, double timeout)
{
    (void)p;
    (void)timeout;
    return 0;
}

/* The loop-side suites' executor: a lane thread's operations, with the
 * test thread as the lane (it pops p->work itself, h_take_ticket()). */
static const sl_exec_t h_exec_lanes = {
    .name = "test lanes",
    .hand_over = sl_exec_hand_over_queue,
    .notify = sl_exec_notify_handoff,
    .wake = sl_exec_wake_cv,
    .wait = sl_exec_wait_cv,
    .finish = sl_exec_finish_nothing,
    .stop = h_exec_stop,
};

/* The same, for an executor that awaits instead of blocking (ASGI's
 * shape): waits end with a SL_TICKET_WAKE in p->work. */
static const sl_exec_t h_exec_await = {
    .name = "test await",
    .hand_over = sl_exec_hand_over_queue,
    .notify = sl_exec_notify_handoff,
    .wake = sl_exec_wake_ticket,
    .wait = sl_exec_wait_never,
    .finish = sl_exec_finish_nothing,
    .stop = h_exec_stop,
};

/* What h_pump_up() gives the pump; a suite may point it elsewhere first. */
static const sl_exec_t *h_exec = &h_exec_lanes;

/* sl_pump_init() P for O on a fresh loopback listener, accepting (what
 * sl_pump_run() does before it enters the loop), with h_exec. */
static inline void h_pump_up(sl_pump_t *p, const sl_options_t *o)
{
    int fd = h_listen();

    ck_assert_int_eq(sl_pump_init(p, o, h_exec, &fd, 1), 0);
    ck_assert_int_eq(p->nlisteners, 1);
    p->accepting = true;
    ev_io_start(p->loop, &p->listeners[0].io);
}

static inline void h_pump_down(sl_pump_t *p)
{
    if (p->nlisteners > 0 && p->listeners[0].fd >= 0)
        close(p->listeners[0].fd);
    sl_pump_destroy(p);
}

/* ------------------------------------------------------------------ */
/* clients                                                            */

typedef struct {
    int fd;
    char *data; /* received, not yet taken by h_response(); owned */
    size_t len, cap;
    bool eof;
    sl_conn_t *conn; /* the server side of it */
} h_client_t;

typedef struct {
    sl_pump_t *p;
    uint32_t want;
} h_nactive_t;

static inline bool h_nactive_is(void *arg)
{
    h_nactive_t *n = arg;

    return n->p->nactive == n->want;
}

/* Connect a client to P's listener and run the loop until P accepted it. */
static inline void h_connect(sl_pump_t *p, h_client_t *cl)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    h_nactive_t n = {p, p->nactive + 1};

    memset(cl, 0, sizeof(*cl));
    ck_assert_int_eq(
        getsockname(p->listeners[0].fd, (struct sockaddr *)&sin, &len), 0);
    cl->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(cl->fd, 0);
    ck_assert_int_eq(connect(cl->fd, (struct sockaddr *)&sin, len), 0);
    ck_assert_msg(h_run_until(p, h_nactive_is, &n), "connection not accepted");
    cl->conn = p->active.next; /* accept puts the newest first */
}

static inline void h_send(h_client_t *cl, const void *data, size_t n)
{
    const char *s = data;

    while (n > 0) {
        ssize_t w = send(cl->fd, s, n, MSG_NOSIGNAL);
        ck_assert_msg(w > 0, "send(): %s", strerror(errno));
        s += w;
        n -= (size_t)w;
    }
}

static inline void h_sends(h_client_t *cl, const char *s)
{
    h_send(cl, s, strlen(s));
}

/* Take whatever the server has sent so far, without waiting. */
static inline void h_pull(h_client_t *cl)
{
    for (;;) {
        if (cl->cap - cl->len < 65536) {
            cl->cap = cl->cap ? cl->cap * 2 : 131072;
            cl->data = realloc(cl->data, cl->cap + 1);
            ck_assert_ptr_nonnull(cl->data);
        }
        ssize_t n =
            recv(cl->fd, cl->data + cl->len, cl->cap - cl->len, MSG_DONTWAIT);
        if (n > 0) {
            cl->len += (size_t)n;
            cl->data[cl->len] = '\0';
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            cl->eof = true;
        return;
    }
}

static inline void h_client_close(h_client_t *cl)
{
    if (cl->fd >= 0)
        close(cl->fd);
    cl->fd = -1;
    free(cl->data);
    cl->data = NULL;
    cl->len = cl->cap = 0;
}

typedef struct {
    h_client_t *cl;
    size_t n;
} h_bytes_t;

static inline bool h_has_bytes(void *arg)
{
    h_bytes_t *b = arg;

    h_pull(b->cl);
    return b->cl->len >= b->n || b->cl->eof;
}

/* Run the loop until the client holds N bytes (or saw EOF). */
static inline bool h_wait_bytes(sl_pump_t *p, h_client_t *cl, size_t n)
{
    h_bytes_t b = {cl, n};

    return h_run_until(p, h_has_bytes, &b);
}

static inline bool h_saw_eof(void *arg)
{
    h_client_t *cl = arg;

    h_pull(cl);
    return cl->eof;
}

/* Run the loop until the server closed the client's connection. */
static inline bool h_wait_eof(sl_pump_t *p, h_client_t *cl)
{
    return h_run_until(p, h_saw_eof, cl);
}

/* ------------------------------------------------------------------ */
/* responses, as a client sees them                                   */

typedef struct {
    int status;
    char head[16384]; /* status line and headers, NUL-terminated */
    char *body;       /* de-chunked body, NUL-terminated; owned */
    size_t body_len;
    bool chunked;
    bool closed; /* the body was ended by the close */
} h_resp_t;

/* The value of header NAME in HEAD (first one), copied into BUF; NULL
 * when absent. */
static inline const char *h_header(const char *head, const char *name,
                                   char *buf, size_t n)
{
    size_t nl = strlen(name);
    const char *p = strstr(head, "\r\n");

    while (p != NULL && p[2] != '\r' && p[2] != '\0') {
        const char *line = p + 2, *end = strstr(line, "\r\n");
        if (end == NULL)
            return NULL;
        if ((size_t)(end - line) > nl && line[nl] == ':' &&
            strncasecmp(line, name, nl) == 0) {
            const char *v = line + nl + 1;
            while (*v == ' ')
                v++;
            snprintf(buf, n, "%.*s", (int)(end - v), v);
            return buf;
        }
        p = end;
    }
    return NULL;
}

/* How many times header NAME appears in HEAD. */
static inline int h_header_count(const char *head, const char *name)
{
    char pat[128];
    int count = 0;

    snprintf(pat, sizeof(pat), "\r\n%s:", name);
    for (const char *p = head; (p = strcasestr(p, pat)) != NULL; p++)
        count++;
    return count;
}

/* Decode a chunked body at S (N bytes) into R; the bytes it took, or 0
 * when it is not complete yet. */
static inline size_t h_dechunk(const char *s, size_t n, h_resp_t *r)
{
    size_t at = 0;

    for (;;) {
        const char *eol = memmem(s + at, n - at, "\r\n", 2);
        char *end;
        unsigned long size;

        if (eol == NULL)
            return 0;
        size = strtoul(s + at, &end, 16);
        ck_assert_msg(end != s + at, "bad chunk size line");
        at = (size_t)(eol - s) + 2;
        if (size == 0) {
            const char *fin = memmem(s + at - 2, n - at + 2, "\r\n\r\n", 4);
            return fin ? (size_t)(fin - s) + 4 : 0;
        }
        if (n - at < size + 2)
            return 0;
        ck_assert_msg(memcmp(s + at + size, "\r\n", 2) == 0,
                      "chunk not followed by CRLF");
        r->body = realloc(r->body, r->body_len + size + 1);
        memcpy(r->body + r->body_len, s + at, size);
        r->body_len += size;
        r->body[r->body_len] = '\0';
        at += size + 2;
    }
}

/* Split one complete response off the front of CL's bytes into R. A
 * response to HEAD (NO_BODY) has no body whatever its headers say. */
static inline bool h_take_response(h_client_t *cl, h_resp_t *r, bool no_body)
{
    char v[64];
    const char *end;
    size_t hlen, used;

    h_pull(cl);
    if (cl->len == 0)
        return false;
    end = memmem(cl->data, cl->len, "\r\n\r\n", 4);
    if (end == NULL)
        return false;
    hlen = (size_t)(end - cl->data) + 4;
    ck_assert_uint_lt(hlen, sizeof(r->head));
    free(r->body);
    memset(r, 0, sizeof(*r));
    memcpy(r->head, cl->data, hlen);
    r->head[hlen] = '\0';
    ck_assert_msg(sscanf(r->head, "HTTP/1.%*d %d", &r->status) == 1,
                  "not a status line: %.60s", r->head);
    r->body = calloc(1, 1);
    used = hlen;
    if (no_body || r->status < 200 || r->status == 204 || r->status == 304) {
        /* nothing follows the head */
    } else if (h_header(r->head, "Transfer-Encoding", v, sizeof(v))) {
        size_t took = h_dechunk(cl->data + hlen, cl->len - hlen, r);
        r->chunked = true;
        if (took == 0)
            return false;
        used += took;
    } else if (h_header(r->head, "Content-Length", v, sizeof(v))) {
        size_t want = strtoul(v, NULL, 10);
        if (cl->len - hlen < want)
            return false;
        r->body = realloc(r->body, want + 1);
        memcpy(r->body, cl->data + hlen, want);
        r->body[want] = '\0';
        r->body_len = want;
        used += want;
    } else {
        if (!cl->eof)
            return false;
        r->body_len = cl->len - hlen;
        r->body = realloc(r->body, r->body_len + 1);
        memcpy(r->body, cl->data + hlen, r->body_len);
        r->body[r->body_len] = '\0';
        r->closed = true;
        used = cl->len;
    }
    memmove(cl->data, cl->data + used, cl->len - used);
    cl->len -= used;
    cl->data[cl->len] = '\0';
    return true;
}

typedef struct {
    h_client_t *cl;
    h_resp_t *r;
    bool no_body;
    bool done;
} h_want_resp_t;

static inline bool h_got_response(void *arg)
{
    h_want_resp_t *w = arg;

    if (!w->done)
        w->done = h_take_response(w->cl, w->r, w->no_body);
    return w->done || w->cl->eof;
}

/* Run the loop until CL has a whole response, and take it into R. */
static inline bool h_response(sl_pump_t *p, h_client_t *cl, h_resp_t *r,
                              bool no_body)
{
    h_want_resp_t w = {cl, r, no_body, false};

    return h_run_until(p, h_got_response, &w) && w.done;
}

/* ------------------------------------------------------------------ */
/* the executor's side of pump mode                                   */

static inline bool h_ticket_ready(void *arg)
{
    sl_pump_t *p = arg;

    return p->work.count > 0;
}

/* Run until the pump pushed a ticket to the executor, and take it. */
static inline bool h_take_ticket(sl_pump_t *p, sl_ticket_t *t)
{
    return h_run_until(p, h_ticket_ready, p) && sl_queue_try_pop(&p->work, t);
}

/* Tickets submitted but not taken: this pass's batch and the queue. */
static inline uint32_t h_tickets(const sl_pump_t *p)
{
    return p->npending + p->work.count;
}

static inline void h_resp_free(h_resp_t *r)
{
    free(r->body);
    r->body = NULL;
}

#endif
