/* harness.h - what the loop-side suites share, on top of harness_base.h
 * (scratch directories, bounded waits, the loop runner): options from an
 * argv, a real pump on a loopback listener with a test executor, clients
 * connected to it, and the responses they read.
 *
 * The test thread *is* the loop thread: it runs the pump's loop with
 * h_run_until(), one pass at a time, and checks its condition after every
 * pass, so nothing here sleeps for a fixed time and a broken condition
 * fails after H_DEADLINE seconds instead of hanging.
 */
#ifndef SL_TEST_HARNESS_H
#define SL_TEST_HARNESS_H

#include <stdarg.h>
#include <strings.h>

#include "common/options.h"
#include "tests/unit/harness_base.h"
#include "worker/loop/conn.h"
#include "worker/loop/exec.h"
#include "worker/loop/pump.h"
#include "worker/loop/listen.h"
#include "worker/loop/served.h"

#define H_MAX_ARGS 32

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
/* the pump and its executors                                         */

static inline int h_exec_stop(sl_pump_t *p, double timeout)
{
    (void)p;
    (void)timeout;
    return 0;
}

/* Owners of lent bytes (sl_conn_sendmem()) the loop gave back, in order;
 * the loop thread is the test's, so no lock. */
static void *h_released[8];
static int h_nreleased;

static inline void h_release(void *owner)
{
    if (h_nreleased < 8)
        h_released[h_nreleased] = owner;
    h_nreleased++;
}

/* The loop-side suites' executor: a lane thread's operations, with the
 * test thread as the lane (it pops p->work itself, h_take_ticket()). */
static const sl_exec_t h_exec_lanes = {
    .name = "test lanes",
    .hand_over = sl_exec_hand_over_queue,
    .notify = sl_exec_notify_handoff,
    .release = h_release,
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
    .release = h_release,
    .wake = sl_exec_wake_ticket,
    .wait = sl_exec_wait_never,
    .finish = sl_exec_finish_nothing,
    .stop = h_exec_stop,
};

/* What h_pump_up() gives the pump; a suite may point it elsewhere first. */
static const sl_exec_t *h_exec = &h_exec_lanes;

/* Whether h_pump_up()'s pump runs pipelined requests ahead (h1_ahead.h).
 * Off unless a test says: most suites' lanes take one ticket per
 * connection, its own exchange's; the queues are sized for it anyway. */
static bool h_ahead;

/* sl_pump_init() P for O on a fresh loopback listener, accepting (what
 * sl_pump_run() does before it enters the loop), with h_exec. */
static inline void h_pump_up(sl_pump_t *p, const sl_options_t *o)
{
    int fd = h_listen();

    ck_assert_int_eq(sl_pump_init(p, o, h_exec, &fd, 1), 0);
    ck_assert_int_eq(p->nlisteners, 1);
    if (!h_ahead)
        p->aheads.max = 0;
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

    return n->p->pool.nactive == n->want;
}

/* SO_RCVBUF of the clients h_connect() makes from then on, 0 = the
 * system's: a small one makes a client that does not read fill the
 * connection after a few kilobytes (set before connect(), as a window
 * once offered is never taken back). */
static int h_client_rcvbuf;

/* Connect a client to P's listener and run the loop until P accepted it. */
static inline void h_connect(sl_pump_t *p, h_client_t *cl)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    h_nactive_t n = {p, p->pool.nactive + 1};

    memset(cl, 0, sizeof(*cl));
    ck_assert_int_eq(
        getsockname(p->listeners[0].fd, (struct sockaddr *)&sin, &len), 0);
    cl->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(cl->fd, 0);
    if (h_client_rcvbuf > 0)
        ck_assert_int_eq(setsockopt(cl->fd, SOL_SOCKET, SO_RCVBUF,
                                    &h_client_rcvbuf, sizeof(h_client_rcvbuf)),
                         0);
    ck_assert_int_eq(connect(cl->fd, (struct sockaddr *)&sin, len), 0);
    ck_assert_msg(h_run_until(p, h_nactive_is, &n), "connection not accepted");
    cl->conn = p->pool.active.next; /* accept puts the newest first */
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

/* A lane blocked in a body read, on a thread of its own: start
 * h_reader_main() on an h_reader_t naming the connection and the request's
 * generation; it reads up to sizeof(buf) - 1 bytes with
 * sl_conn_read_body(), waiting. h_reader_done() says when it returned
 * (rc holds the result). */
typedef struct {
    sl_conn_t *c;
    uint32_t gen;
    char buf[64];
    long rc;
    bool done; /* under c->x.mu */
} h_reader_t;

static inline void *h_reader_main(void *arg)
{
    h_reader_t *r = arg;
    long rc = sl_exch_read_body(&r->c->x, r->gen, r->buf, sizeof(r->buf) - 1,
                                false, true);

    pthread_mutex_lock(&r->c->x.mu);
    r->rc = rc;
    r->done = true;
    pthread_mutex_unlock(&r->c->x.mu);
    return NULL;
}

static inline bool h_reader_done(void *arg)
{
    h_reader_t *r = arg;
    bool done;

    pthread_mutex_lock(&r->c->x.mu);
    done = r->done;
    pthread_mutex_unlock(&r->c->x.mu);
    return done;
}

/* Does the executor on connection ARG say it waits (c->x.waiting)? */
static inline bool h_executor_waiting(void *arg)
{
    sl_conn_t *c = arg;
    bool w;

    pthread_mutex_lock(&c->x.mu);
    w = c->x.waiting;
    pthread_mutex_unlock(&c->x.mu);
    return w;
}

static inline void h_resp_free(h_resp_t *r)
{
    free(r->body);
    r->body = NULL;
}

#endif
