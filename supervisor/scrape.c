/* scrape.c - GET /metrics on the supervisor's loop (see scrape.h).
 *
 * The endpoint is deliberately tiny: one request per connection, a head of
 * at most SCRAPE_HEAD bytes read without blocking within SCRAPE_TIMEOUT,
 * then the answer and a close. At most SCRAPE_MAX connections are open at
 * once; past that the listener is not watched, so further clients wait in
 * the backlog rather than cost the supervisor anything. Everything a
 * scrape reports is read from memory the supervisor already has: its own
 * counters and the workers' shared slots.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/acceptlimit.h"
#include "common/log.h"
#include "common/metrics.h"
#include "supervisor/listen.h"
#include "supervisor/scrape.h"

#define SCRAPE_MAX     8    /* connections at once */
#define SCRAPE_HEAD    2048 /* bytes of request head, at most */
#define SCRAPE_TIMEOUT 5.0  /* seconds for a whole exchange */

typedef struct {
    ev_io io;        /* embedded */
    ev_timer timer;  /* embedded: SCRAPE_TIMEOUT */
    int fd;          /* owned; -1 when the entry is free */
    size_t hlen;     /* bytes in head */
    bool answering;  /* out holds the answer; writing it */
    sl_buf_t out;    /* owned: the answer */
    sl_scrape_t *sc; /* borrowed */
    char head[SCRAPE_HEAD];
} scrape_conn_t;

struct sl_scrape {
    struct ev_loop *loop;    /* borrowed */
    const sl_options_t *o;   /* borrowed */
    const sl_table_t *table; /* borrowed */
    sl_listener_t l;         /* fd -1 while not bound */
    ev_io accept_io;         /* embedded */
    bool paused;             /* accept4() ran out of descriptors */
    ev_timer pause_timer;    /* embedded: its end */
    sl_acceptlimit_t limit;  /* its log lines, once a second */
    bool retry;              /* bind again on every tick */
    sl_metrics_seg_t *seg;   /* owned mapping */
    int seg_fd;              /* owned */
    sl_metrics_slot_t retired;
    sl_expo_super_t sup;
    sl_expo_worker_t *snap; /* owned: SL_TABLE_SLOTS, a scrape's copy */
    sl_buf_t body;          /* owned: the text, reused */
    int nconns;
    scrape_conn_t conns[SCRAPE_MAX];
};

static int bind_listener(sl_scrape_t *sc);
static void watch_listener(sl_scrape_t *sc);
static void on_accept(struct ev_loop *loop, ev_io *w, int revents);
static void on_pause_end(struct ev_loop *loop, ev_timer *w, int revents);
static void on_conn(struct ev_loop *loop, ev_io *w, int revents);
static void on_timeout(struct ev_loop *loop, ev_timer *w, int revents);
static void conn_read(scrape_conn_t *c);
static void conn_answer(scrape_conn_t *c);
static void conn_write(scrape_conn_t *c);
static void conn_close(scrape_conn_t *c);
static int render(sl_scrape_t *sc);

sl_scrape_t *sl_scrape_start(struct ev_loop *loop, const sl_options_t *o,
                             const sl_table_t *t, bool retry)
{
    sl_scrape_t *sc = calloc(1, sizeof(*sc));

    if (sc == NULL) {
        sl_error("out of memory for the metrics endpoint");
        return NULL;
    }
    sc->loop = loop;
    sc->o = o;
    sc->table = t;
    sc->l.fd = -1;
    sc->seg_fd = -1;
    for (int i = 0; i < SCRAPE_MAX; i++) {
        sc->conns[i].fd = -1;
        sc->conns[i].sc = sc;
    }
    sc->snap = calloc(SL_TABLE_SLOTS, sizeof(*sc->snap));
    if (sc->snap == NULL) {
        sl_error("out of memory for the metrics endpoint");
        goto out_free;
    }
    sc->seg = sl_metrics_create(SL_TABLE_SLOTS, &sc->seg_fd);
    if (sc->seg == NULL) {
        goto out_free;
    }
    ev_init(&sc->accept_io, on_accept);
    sc->accept_io.data = sc;
    ev_timer_init(&sc->pause_timer, on_pause_end, SL_ACCEPTLIMIT_PAUSE, 0);
    sc->pause_timer.data = sc;
    if (bind_listener(sc) == -1) {
        if (!retry) {
            goto out_free;
        }
        sl_warn("metrics: %s is busy (the old supervisor's?): trying again"
                " every second",
                o->metrics_bind);
        sc->retry = true;
    }
    return sc;

out_free:
    sl_scrape_destroy(sc, false);
    return NULL;
}

int sl_scrape_segment_fd(const sl_scrape_t *sc)
{
    return sc->seg_fd;
}

void sl_scrape_worker_gone(sl_scrape_t *sc, int id, sl_expo_cause_t cause)
{
    if (id >= 1 && id <= SL_TABLE_SLOTS) {
        sl_metrics_fold(&sc->retired, &sc->seg->slots[id - 1]);
    }
    if (cause < SL_EXPO_CAUSES) {
        sc->sup.restarts[cause]++;
    }
}

void sl_scrape_worker_ready(sl_scrape_t *sc, double boot)
{
    sc->sup.boots++;
    sl_metrics_observe(&sc->sup.boot_time, boot);
}

void sl_scrape_set_target(sl_scrape_t *sc, int target)
{
    sc->sup.target = target;
}

void sl_scrape_tick(sl_scrape_t *sc)
{
    if (sc->retry && bind_listener(sc) == 0) {
        sc->retry = false;
    }
}

void sl_scrape_stop_listening(sl_scrape_t *sc)
{
    sc->retry = false;
    ev_timer_stop(sc->loop, &sc->pause_timer);
    sc->paused = false;
    if (sc->l.fd != -1) {
        ev_io_stop(sc->loop, &sc->accept_io);
        sl_listen_close(&sc->l, 1, false);
        sc->l.fd = -1;
    }
}

void sl_scrape_destroy(sl_scrape_t *sc, bool remove_file)
{
    if (sc == NULL) {
        return;
    }
    for (int i = 0; i < SCRAPE_MAX; i++) {
        conn_close(&sc->conns[i]);
    }
    ev_timer_stop(sc->loop, &sc->pause_timer);
    if (sc->l.fd != -1) {
        ev_io_stop(sc->loop, &sc->accept_io);
        sl_listen_close(&sc->l, 1, remove_file);
    }
    if (sc->seg_fd != -1) {
        close(sc->seg_fd);
    }
    sl_buf_free(&sc->body);
    free(sc->snap);
    free(sc); /* the mapping goes with the process */
}

static int bind_listener(sl_scrape_t *sc)
{
    if (sl_listen_bind(sc->o, sc->o->metrics_bind, &sc->l) == -1) {
        sc->l.fd = -1;
        return -1;
    }
    ev_io_set(&sc->accept_io, sc->l.fd, EV_READ);
    watch_listener(sc);
    sl_info("metrics: listening at %s/metrics", sc->l.name);
    return 0;
}

/* Watch the listener only while there is room for one more scrape, and
 * not during a pause. */
static void watch_listener(sl_scrape_t *sc)
{
    if (sc->l.fd == -1) {
        return;
    }
    if (sc->nconns < SCRAPE_MAX && !sc->paused) {
        ev_io_start(sc->loop, &sc->accept_io);
    } else {
        ev_io_stop(sc->loop, &sc->accept_io);
    }
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
    sl_scrape_t *sc = w->data;

    (void)revents;
    for (int i = 0; i < SCRAPE_MAX && sc->nconns < SCRAPE_MAX; i++) {
        scrape_conn_t *c = &sc->conns[i];
        if (c->fd != -1) {
            continue;
        }
        c->fd = accept4(sc->l.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c->fd == -1) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                break;
            }
            if (sl_acceptlimit_transient(errno)) {
                continue;
            }
            /* out of descriptors or memory: the client stays queued and
             * the listener ready, so retrying now would spin; pause */
            sl_acceptlimit_log(&sc->limit, ev_now(loop), errno, "metrics",
                               true);
            sc->paused = true;
            /* set again: a one-shot timer that fired keeps a stale time */
            ev_timer_set(&sc->pause_timer, SL_ACCEPTLIMIT_PAUSE, 0);
            ev_timer_start(loop, &sc->pause_timer);
            break;
        }
        sc->nconns++;
        c->hlen = 0;
        c->answering = false;
        ev_io_init(&c->io, on_conn, c->fd, EV_READ);
        c->io.data = c;
        ev_io_start(loop, &c->io);
        ev_timer_init(&c->timer, on_timeout, SCRAPE_TIMEOUT, 0);
        c->timer.data = c;
        ev_timer_start(loop, &c->timer);
    }
    watch_listener(sc);
}

static void on_pause_end(struct ev_loop *loop, ev_timer *w, int revents)
{
    sl_scrape_t *sc = w->data;

    (void)loop;
    (void)revents;
    sc->paused = false;
    watch_listener(sc);
}

static void on_conn(struct ev_loop *loop, ev_io *w, int revents)
{
    scrape_conn_t *c = w->data;

    (void)loop;
    (void)revents;
    if (c->answering) {
        conn_write(c);
    } else {
        conn_read(c);
    }
}

static void on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    conn_close(w->data);
}

/* What the client sent, until its head is complete. */
static void conn_read(scrape_conn_t *c)
{
    for (;;) {
        ssize_t n =
            recv(c->fd, c->head + c->hlen, sizeof(c->head) - c->hlen, 0);
        if (n > 0) {
            c->hlen += (size_t)n;
            if (memmem(c->head, c->hlen, "\r\n\r\n", 4) != NULL ||
                memmem(c->head, c->hlen, "\n\n", 2) != NULL ||
                c->hlen == sizeof(c->head)) {
                conn_answer(c);
                return;
            }
            continue;
        }
        if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return;
        }
        if (n == -1 && errno == EINTR) {
            continue;
        }
        conn_close(c); /* EOF before a whole head, or an error */
        return;
    }
}

/* Does the head begin with METHOD and the /metrics path (a query may
 * follow)? */
static bool asks(const scrape_conn_t *c, const char *method)
{
    size_t m = strlen(method);
    const char *p = c->head + m;

    /* METHOD, " /metrics", then ' ' or '?': M + 10 bytes at least */
    if (c->hlen < m + 10 || memcmp(c->head, method, m) != 0 ||
        memcmp(p, " /metrics", 9) != 0) {
        return false;
    }
    return p[9] == ' ' || p[9] == '?';
}

static void conn_answer(scrape_conn_t *c)
{
    sl_scrape_t *sc = c->sc;
    bool get = asks(c, "GET");
    bool head = asks(c, "HEAD");
    const char *status = "404 Not Found";
    const char *type = "text/plain; charset=utf-8";
    const char *text = "Not Found: try GET /metrics\n";
    size_t len = strlen(text);
    char line[256];

    if (c->hlen == sizeof(c->head) &&
        memmem(c->head, c->hlen, "\n\n", 2) == NULL &&
        memmem(c->head, c->hlen, "\r\n\r\n", 4) == NULL) {
        status = "431 Request Header Fields Too Large";
        text = "Request head too large\n";
        len = strlen(text);
    } else if (get || head) {
        if (render(sc) == 0) {
            status = "200 OK";
            type = SL_EXPO_CONTENT_TYPE;
            text = sc->body.data;
            len = sc->body.len;
        } else {
            status = "500 Internal Server Error";
            text = "Out of memory\n";
            len = strlen(text);
        }
    }
    int n = snprintf(line, sizeof(line),
                     "HTTP/1.1 %s\r\nServer: sluice\r\nContent-Type: %s\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     status, type, len);
    c->out.len = c->out.off = 0;
    if (sl_buf_append(&c->out, line, (size_t)n) < 0 ||
        (!head && sl_buf_append(&c->out, text, len) < 0)) {
        conn_close(c);
        return;
    }
    c->answering = true;
    ev_io_stop(sc->loop, &c->io);
    ev_io_set(&c->io, c->fd, EV_WRITE);
    ev_io_start(sc->loop, &c->io);
    conn_write(c);
}

static void conn_write(scrape_conn_t *c)
{
    while (sl_buf_pending(&c->out) > 0) {
        ssize_t n = send(c->fd, c->out.data + c->out.off,
                         sl_buf_pending(&c->out), MSG_NOSIGNAL);
        if (n == -1 && errno == EINTR) {
            continue;
        }
        if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return; /* the watcher waits for room */
        }
        if (n == -1) {
            break;
        }
        sl_buf_consume(&c->out, (size_t)n);
    }
    conn_close(c);
}

static void conn_close(scrape_conn_t *c)
{
    sl_scrape_t *sc = c->sc;

    if (c->fd == -1) {
        return;
    }
    ev_io_stop(sc->loop, &c->io);
    ev_timer_stop(sc->loop, &c->timer);
    close(c->fd);
    c->fd = -1;
    sl_buf_reset(&c->out, 64 * 1024);
    sc->nconns--;
    if (sc->paused) { /* a descriptor is free again */
        sc->paused = false;
        ev_timer_stop(sc->loop, &sc->pause_timer);
    }
    watch_listener(sc);
}

/* The exposition into sc->body, NUL-terminated. */
static int render(sl_scrape_t *sc)
{
    const sl_table_t *t = sc->table;
    int nw = 0;

    for (int i = 0; i < t->high; i++) {
        const sl_worker_t *w = &t->slots[i];
        if (w->state == SL_WORKER_FREE) {
            continue;
        }
        sc->snap[nw].id = i + 1;
        sc->snap[nw].up = w->state == SL_WORKER_READY;
        sl_metrics_read(&sc->seg->slots[i], &sc->snap[nw].m);
        nw++;
    }
    sc->body.len = sc->body.off = 0;
    int nup = t->high > sc->sup.target ? t->high : sc->sup.target;
    if (sl_expo_format(&sc->body, &sc->retired, sc->snap, nw, nup, &sc->sup) ==
            -1 ||
        sl_buf_append(&sc->body, "", 1) == -1) {
        return -1;
    }
    sc->body.len--; /* the NUL is not sent */
    return 0;
}
