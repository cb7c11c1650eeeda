/*
 * rateload: an open-loop (fixed-rate) HTTP/1.1 load client for bench/rate.py.
 *
 *   rateload -p PORT -r RATE [-H 127.0.0.1] [-P /] [-c CONNS] [-d SECONDS]
 *            [-w WARMUP] [-t TIMEOUT]
 *
 * Request i is due at t0 + i / RATE, whatever happened to the requests
 * before it. That is the one idea of this client: a closed-loop client
 * (wrk, ab) sends the next request only when an answer came back, so when
 * the server stalls it stops sending and the stall is recorded as one slow
 * request instead of the hundreds that a real arrival stream would have
 * queued behind it ("coordinated omission"). Here every latency is measured
 * from the request's INTENDED send time to the end of its response, so a
 * request that had to wait for a free connection is charged for the wait.
 *
 * CONNS keep-alive connections carry the requests, one outstanding request
 * per connection (no pipelining); a due request goes out on any idle one.
 * Requests due during the first WARMUP seconds are not counted; "MEASURE"
 * is printed when the measured window starts and "END" when its last
 * request is due (the harness samples the server's CPU time at both), then
 * requests still queued or in flight get up to TIMEOUT seconds to finish
 * and one JSON line is printed: the achieved rate (responses that arrived
 * within the window, over its length), counts of the window's requests
 * (sent, completed, never sent, errors), their latency percentiles
 * (exact to 1 µs below 1 s, to 1 ms above) and this process's own CPU time
 * over the measured window. Everything is bounded: the process exits by
 * WARMUP + SECONDS + TIMEOUT (+ the connect timeout) whatever the server
 * does. RATE 0 is a closed loop (each connection sends again as soon as it
 * is answered), for measuring a maximum rate with the same client.
 *
 * Responses are parsed enough to find their end: Content-Length, chunked
 * (with trailers), or the connection's close; 1xx interim answers are
 * skipped. One thread, epoll (epoll_pwait2(), Linux 5.11, for nanosecond
 * wake-ups). Written for this benchmark only: not a general client.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RBUF            (64 * 1024) /* a response head must fit in this */
#define FINE_BUCKETS    1000000u    /* 1 µs each: below 1 s */
#define COARSE_BUCKETS  1000000u    /* 1 ms each: 1 s to 1000 s */
#define CONNECT_TIMEOUT 5           /* s for every connection to be up */
#define RETRY_NS        100000000u  /* a failed reconnect waits 100 ms */
#define SCAN_NS         10000000u   /* timeouts are checked every 10 ms */
#define LATE_NS         1000000u    /* a send this late is counted late */

enum { C_DOWN, C_CONNECTING, C_IDLE, C_BUSY };
/* Response parser phases; P_NOBODY: a head that ends its response. */
enum {
    P_HEAD,
    P_NOBODY,
    P_LEN,
    P_CHUNK_SIZE,
    P_CHUNK_DATA,
    P_CHUNK_CRLF,
    P_TRAILER,
    P_EOF
};

struct conn {
    int fd;
    int state;
    int phase;         /* where the response parser is (P_*) */
    unsigned gen;      /* bumped per socket: a handler sees a replacement */
    bool want_out;     /* EPOLLOUT registered */
    bool close_after;  /* the response ends the connection */
    bool measured;     /* the outstanding request counts */
    int status;        /* of the response being read */
    uint64_t intended; /* due time of the outstanding request */
    uint64_t sent;     /* when it was written (for the timeout) */
    uint64_t retry_at; /* C_DOWN: reconnect from then on */
    uint64_t left;     /* body bytes still to come (P_LEN, P_CHUNK_DATA) */
    size_t woff;       /* request bytes already written */
    size_t rlen;
    struct conn *next_idle;
    char rbuf[RBUF];
};

static struct {
    /* options */
    struct sockaddr_in addr;
    double rate;
    int nconns;
    uint64_t warmup_ns, duration_ns, timeout_ns;
    /* the request, the same bytes every time */
    char *req;
    size_t reqlen;
    /* the schedule */
    uint64_t t0, t_measure, t_end;
    uint64_t next_i; /* index of the next request to send */
    uint64_t n_total;
    struct conn *idle;
    int busy;
    /* Counters of the requests due in the measured window, except
     * reconnects and connect errors: those count from the end of set-up. */
    uint64_t sent, completed, late, max_backlog, reconnects;
    uint64_t answered_in_window; /* any request's, for the achieved rate */
    /* Warm-up requests that timed out: a server that never answers some
     * connections keeps them busy with warm-up requests all run, and the
     * window's counters alone would not show it. */
    uint64_t other_timeouts;
    uint64_t err_connect, err_io, err_closed, err_timeout, err_status,
        err_parse;
    uint32_t *fine, *coarse;
    uint64_t max_ns, sum_us;
    int ep;
} g;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
    perror(what);
    exit(2);
}

/* Due time of request I (closed loop: none, every request is due now). */
static uint64_t due(uint64_t i)
{
    return g.t0 + (uint64_t)((double)i * 1e9 / g.rate);
}

static bool in_window(uint64_t t)
{
    return t >= g.t_measure && t < g.t_end;
}

static void record(uint64_t lat_ns)
{
    uint64_t us = lat_ns / 1000;
    if (us < FINE_BUCKETS)
        g.fine[us]++;
    else if (us / 1000 < COARSE_BUCKETS)
        g.coarse[us / 1000]++;
    else
        g.coarse[COARSE_BUCKETS - 1]++;
    if (lat_ns > g.max_ns)
        g.max_ns = lat_ns;
    g.sum_us += us;
}

/* Latency in µs below which a fraction P of the recorded ones lie. */
static uint64_t percentile(double p, uint64_t n)
{
    if (n == 0)
        return 0;
    uint64_t rank = (uint64_t)(p * (double)n + 0.999999), seen = 0;
    if (rank < 1)
        rank = 1;
    for (uint32_t i = 0; i < FINE_BUCKETS; i++) {
        seen += g.fine[i];
        if (seen >= rank)
            return i;
    }
    for (uint32_t i = 0; i < COARSE_BUCKETS; i++) {
        seen += g.coarse[i];
        if (seen >= rank)
            return (uint64_t)i * 1000;
    }
    return g.max_ns / 1000;
}

static void watch(struct conn *c, bool want_out)
{
    if (c->want_out == want_out)
        return;
    struct epoll_event ev = {.events = EPOLLIN | (want_out ? EPOLLOUT : 0),
                             .data.ptr = c};
    if (epoll_ctl(g.ep, EPOLL_CTL_MOD, c->fd, &ev) != 0)
        die("epoll_ctl(MOD)");
    c->want_out = want_out;
}

static void open_conn(struct conn *c, uint64_t now)
{
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        die("socket()");
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->rlen = 0;
    c->gen++;
    c->want_out = true;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
    if (epoll_ctl(g.ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
        die("epoll_ctl(ADD)");
    if (connect(c->fd, (struct sockaddr *)&g.addr, sizeof(g.addr)) != 0 &&
        errno != EINPROGRESS) {
        g.err_connect++;
        close(c->fd);
        c->fd = -1;
        c->state = C_DOWN;
        c->retry_at = now + RETRY_NS;
        return;
    }
    c->state = C_CONNECTING;
}

static void make_idle(struct conn *c)
{
    c->state = C_IDLE;
    c->next_idle = g.idle;
    g.idle = c;
}

/*
 * Ends C's connection; a request in flight on it is lost and counted in
 * COUNTER (when it belongs to the measured window). Idle connections are
 * unlinked from the idle list, which is short-lived enough to search.
 */
static void drop_conn(struct conn *c, uint64_t *counter, uint64_t now)
{
    if (c->state == C_DOWN && c->fd < 0)
        return;
    if (c->state == C_BUSY) {
        g.busy--;
        if (c->measured && counter != NULL)
            (*counter)++;
    } else if (c->state == C_IDLE) {
        for (struct conn **p = &g.idle; *p; p = &(*p)->next_idle) {
            if (*p == c) {
                *p = c->next_idle;
                break;
            }
        }
    }
    if (c->fd >= 0) {
        epoll_ctl(g.ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
    }
    /* A new connection at once: waiting for the next scan would hold
     * back the requests due meanwhile (servers that close after every
     * response need this). */
    g.reconnects++;
    open_conn(c, now);
}

/* Writes what is left of C's request; a short write waits for EPOLLOUT. */
static void flush_request(struct conn *c, uint64_t now)
{
    while (c->woff < g.reqlen) {
        ssize_t n =
            send(c->fd, g.req + c->woff, g.reqlen - c->woff, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            watch(c, true);
            return;
        }
        if (n < 0) {
            drop_conn(c, &g.err_io, now);
            return;
        }
        c->woff += (size_t)n;
    }
    watch(c, false);
}

static void send_request(struct conn *c, uint64_t intended, uint64_t now)
{
    c->state = C_BUSY;
    c->intended = intended;
    c->sent = now;
    c->measured = in_window(intended);
    c->phase = P_HEAD;
    c->close_after = false;
    c->woff = 0;
    g.busy++;
    if (c->measured) {
        g.sent++;
        if (now - intended > LATE_NS)
            g.late++;
    }
    flush_request(c, now);
}

/* Sends every request that is due while a connection is idle. */
static void dispatch(uint64_t now)
{
    if (g.rate <= 0) {
        while (g.idle != NULL && now < g.t_end) {
            struct conn *c = g.idle;
            g.idle = c->next_idle;
            send_request(c, now, now);
        }
        return;
    }
    while (g.next_i < g.n_total && due(g.next_i) <= now && g.idle != NULL) {
        struct conn *c = g.idle;
        g.idle = c->next_idle;
        send_request(c, due(g.next_i++), now);
    }
    /* Requests due but waiting for a connection: their wait is latency.
     * Request i is due when i <= (now - t0) * rate. */
    uint64_t last = (uint64_t)((double)(now - g.t0) * g.rate / 1e9) + 1;
    if (last > g.n_total)
        last = g.n_total;
    uint64_t backlog = last > g.next_i ? last - g.next_i : 0;
    if (backlog > g.max_backlog && in_window(now))
        g.max_backlog = backlog;
}

static void response_done(struct conn *c, uint64_t now)
{
    g.busy--;
    if (in_window(now))
        g.answered_in_window++;
    if (c->measured) {
        g.completed++;
        record(now - c->intended);
        if (c->status < 200 || c->status >= 400)
            g.err_status++;
    }
    if (c->close_after) {
        c->state = C_DOWN; /* not busy any more: nothing is lost */
        drop_conn(c, NULL, now);
        return;
    }
    make_idle(c);
}

/* Whether the header line LINE is a NAME header (NAME in lower case). */
static bool header_is(const char *line, const char *name)
{
    size_t n = strlen(name);
    return strncasecmp(line, name, n) == 0 && line[n] == ':';
}

/*
 * Parses a whole response head of LEN bytes (ending in the blank line) and
 * sets C's status, body mode and close flag. Returns -1 when it is not a
 * response.
 */
static int parse_head(struct conn *c, char *head, size_t len)
{
    head[len - 1] = '\0';
    if (strncmp(head, "HTTP/1.", 7) != 0 || len < 12)
        return -1;
    bool http10 = head[7] == '0', chunked = false, keep = !http10;
    long long clen = -1;
    c->status = atoi(head + 9);
    for (char *line = strstr(head, "\r\n"); line; line = strstr(line, "\r\n")) {
        line += 2;
        if (header_is(line, "content-length")) {
            clen = strtoll(line + 15, NULL, 10);
        } else if (header_is(line, "transfer-encoding")) {
            char *eol = strstr(line, "\r\n");
            chunked = memmem(line, eol ? (size_t)(eol - line) : strlen(line),
                             "chunked", 7) != NULL;
        } else if (header_is(line, "connection")) {
            char *v = line + 11;
            while (*v == ' ' || *v == '\t')
                v++;
            if (strncasecmp(v, "close", 5) == 0)
                keep = false;
            else if (strncasecmp(v, "keep-alive", 10) == 0)
                keep = true;
        }
    }
    c->close_after = !keep;
    if (c->status == 204 || c->status == 304 || (c->status / 100 == 1))
        c->phase = P_NOBODY;
    else if (chunked)
        c->phase = P_CHUNK_SIZE;
    else if (clen >= 0) {
        c->phase = P_LEN;
        c->left = (uint64_t)clen;
    } else {
        c->phase = P_EOF;
        c->close_after = true;
    }
    return 0;
}

/*
 * Consumes what C's buffer holds of the current response, completing it
 * when its end is there. Returns -1 on a protocol error. Anything after a
 * response's end is a stray byte (no pipelining here) and an error too.
 */
static int consume(struct conn *c, uint64_t now)
{
    size_t off = 0;
    unsigned gen = c->gen;
    for (;;) {
        if (c->gen != gen)
            return 0; /* a response that closed it: the buffer is reset */
        char *p = c->rbuf + off;
        size_t n = c->rlen - off;
        char *eol;
        if (c->state != C_BUSY) {
            if (n != 0)
                return -1;
            goto keep;
        }
        switch (c->phase) {
        case P_HEAD:
            eol = memmem(p, n, "\r\n\r\n", 4);
            if (eol == NULL) {
                if (n == RBUF)
                    return -1;
                goto keep;
            }
            if (parse_head(c, p, (size_t)(eol - p) + 4) != 0)
                return -1;
            off += (size_t)(eol - p) + 4;
            if (c->phase == P_NOBODY) {
                /* interim 1xx: the real head follows; 204/304: done */
                bool interim = c->status / 100 == 1;
                c->phase = P_HEAD;
                if (!interim)
                    response_done(c, now);
            }
            break;
        case P_LEN:
        case P_CHUNK_DATA:
            if (c->left > n) {
                c->left -= n;
                off += n;
                goto keep;
            }
            off += c->left;
            c->left = 0;
            if (c->phase == P_LEN)
                response_done(c, now);
            else
                c->phase = P_CHUNK_CRLF;
            break;
        case P_CHUNK_SIZE:
        case P_CHUNK_CRLF:
        case P_TRAILER:
            eol = memmem(p, n, "\r\n", 2);
            if (eol == NULL) {
                if (n == RBUF)
                    return -1;
                goto keep;
            }
            off += (size_t)(eol - p) + 2;
            if (c->phase == P_CHUNK_CRLF) {
                if (eol != p)
                    return -1;
                c->phase = P_CHUNK_SIZE;
            } else if (c->phase == P_TRAILER) {
                if (eol == p)
                    response_done(c, now);
            } else {
                char *end;
                c->left = strtoull(p, &end, 16);
                if (end == p)
                    return -1;
                c->phase = c->left ? P_CHUNK_DATA : P_TRAILER;
            }
            break;
        case P_NOBODY:
            return -1; /* not left in this phase */
        case P_EOF:
            off += n; /* the body runs to the connection's close */
            goto keep;
        }
    }
keep:
    memmove(c->rbuf, c->rbuf + off, c->rlen - off);
    c->rlen -= off;
    return 0;
}

/*
 * One recv() per readiness event: epoll is level-triggered, so bytes left
 * behind report again, and a second call would mostly return EAGAIN.
 */
static void on_readable(struct conn *c, uint64_t now)
{
    if (c->state != C_BUSY && c->state != C_IDLE)
        return;
    ssize_t n;
    do
        n = recv(c->fd, c->rbuf + c->rlen, RBUF - c->rlen, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN)
        return;
    if (n == 0 && c->state == C_BUSY && c->phase == P_EOF) {
        response_done(c, now); /* a body that runs to the close */
        return;
    }
    if (n <= 0) {
        /* a kept-alive connection the server ended (no loss), or a
         * request lost with it */
        drop_conn(c, n == 0 ? &g.err_closed : &g.err_io, now);
        return;
    }
    c->rlen += (size_t)n;
    if (consume(c, now) != 0)
        drop_conn(c, &g.err_parse, now);
}

static void on_event(struct conn *c, uint32_t events, uint64_t now)
{
    if (c->state == C_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0 || (events & (EPOLLERR | EPOLLHUP))) {
            close(c->fd); /* also leaves the epoll set */
            c->fd = -1;
            c->state = C_DOWN;
            c->retry_at = now + RETRY_NS;
            g.err_connect++;
            return;
        }
        watch(c, false);
        make_idle(c);
        return;
    }
    unsigned gen = c->gen;
    if ((events & EPOLLOUT) && c->state == C_BUSY)
        flush_request(c, now);
    if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) && c->gen == gen)
        on_readable(c, now);
}

/* Times out requests in flight too long; reopens closed connections. */
static void scan(struct conn *conns, uint64_t now, bool reopen)
{
    for (int i = 0; i < g.nconns; i++) {
        struct conn *c = &conns[i];
        if (c->state == C_BUSY && now - c->sent > g.timeout_ns) {
            g.other_timeouts += !c->measured;
            drop_conn(c, &g.err_timeout, now);
        }
        if (c->state == C_DOWN && reopen && now >= c->retry_at)
            open_conn(c, now);
    }
}

static double cpu_s(struct rusage *ru, bool user_only)
{
    double u = (double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec / 1e6;
    double s = (double)ru->ru_stime.tv_sec + ru->ru_stime.tv_usec / 1e6;
    return user_only ? u : u + s;
}

static void report(struct rusage *r0, struct rusage *r1)
{
    double dur = (double)g.duration_ns / 1e9;
    uint64_t n = g.completed;
    /* Measured requests never sent (still queued when the drain ended). */
    uint64_t unsent = 0;
    for (uint64_t i = g.next_i; g.rate > 0 && i < g.n_total; i++)
        unsent += in_window(due(i));
    printf(
        "{\"rate_target\": %.3f, \"conns\": %d, \"duration_s\": %.3f, "
        "\"warmup_s\": %.3f, \"sent\": %llu, \"completed\": %llu, "
        "\"achieved_rate\": %.3f, \"answered_in_window\": %llu, "
        "\"unsent\": %llu, \"late_sends\": %llu, "
        "\"max_backlog\": %llu, \"reconnects\": %llu, "
        "\"warmup_timeouts\": %llu, "
        "\"errors\": {\"connect\": %llu, \"io\": %llu, \"closed\": %llu, "
        "\"timeout\": %llu, \"status\": %llu, \"parse\": %llu}, "
        "\"latency_us\": {\"p50\": %llu, \"p90\": %llu, \"p99\": %llu, "
        "\"p99.9\": %llu, \"max\": %llu, \"mean\": %.1f}, "
        "\"client_cpu_s\": %.3f, \"client_user_s\": %.3f}\n",
        g.rate, g.nconns, dur, (double)g.warmup_ns / 1e9,
        (unsigned long long)g.sent, (unsigned long long)n,
        (double)g.answered_in_window / dur,
        (unsigned long long)g.answered_in_window, (unsigned long long)unsent,
        (unsigned long long)g.late, (unsigned long long)g.max_backlog,
        (unsigned long long)g.reconnects, (unsigned long long)g.other_timeouts,
        (unsigned long long)g.err_connect, (unsigned long long)g.err_io,
        (unsigned long long)g.err_closed, (unsigned long long)g.err_timeout,
        (unsigned long long)g.err_status, (unsigned long long)g.err_parse,
        (unsigned long long)percentile(0.50, n),
        (unsigned long long)percentile(0.90, n),
        (unsigned long long)percentile(0.99, n),
        (unsigned long long)percentile(0.999, n),
        (unsigned long long)(g.max_ns / 1000),
        n ? (double)g.sum_us / (double)n : 0.0,
        cpu_s(r1, false) - cpu_s(r0, false), cpu_s(r1, true) - cpu_s(r0, true));
    fflush(stdout);
}

static void usage(void)
{
    fprintf(stderr, "usage: rateload -p PORT -r RATE [-H HOST] [-P PATH] "
                    "[-c CONNS] [-d SECONDS] [-w WARMUP] [-t TIMEOUT]\n");
    exit(2);
}

static void parse_args(int argc, char **argv, const char **host,
                       const char **path, int *port)
{
    double d = 10, w = 2, t = 5;
    int opt;
    g.rate = -1;
    g.nconns = 16;
    while ((opt = getopt(argc, argv, "p:r:H:P:c:d:w:t:")) != -1) {
        switch (opt) {
        case 'p':
            *port = atoi(optarg);
            break;
        case 'r':
            g.rate = atof(optarg);
            break;
        case 'H':
            *host = optarg;
            break;
        case 'P':
            *path = optarg;
            break;
        case 'c':
            g.nconns = atoi(optarg);
            break;
        case 'd':
            d = atof(optarg);
            break;
        case 'w':
            w = atof(optarg);
            break;
        case 't':
            t = atof(optarg);
            break;
        default:
            usage();
        }
    }
    if (*port <= 0 || g.rate < 0 || g.nconns < 1 || d <= 0 || w < 0 || t <= 0)
        usage();
    g.duration_ns = (uint64_t)(d * 1e9);
    g.warmup_ns = (uint64_t)(w * 1e9);
    g.timeout_ns = (uint64_t)(t * 1e9);
}

/*
 * Handles the sockets' events until one is ready or the monotonic clock
 * reaches WAKE. epoll_pwait2() takes its timeout in nanoseconds: a request
 * due in 40 µs is sent then, not rounded to epoll_wait()'s milliseconds,
 * and no timerfd costs two more system calls per wake-up.
 */
static void wait_events(uint64_t wake)
{
    uint64_t now = now_ns(), rel = wake > now ? wake - now : 0;
    struct timespec ts = {.tv_sec = (time_t)(rel / 1000000000u),
                          .tv_nsec = (long)(rel % 1000000000u)};
    struct epoll_event evs[256];
    int n = epoll_pwait2(g.ep, evs, 256, &ts, NULL);
    if (n < 0 && errno != EINTR)
        die("epoll_pwait2()");
    now = now_ns();
    for (int i = 0; i < n; i++)
        on_event(evs[i].data.ptr, evs[i].events, now);
}

/* Opens every connection; exits when they are not all up in time. */
static struct conn *connect_all(void)
{
    struct conn *conns = calloc((size_t)g.nconns, sizeof(*conns));
    if (conns == NULL)
        die("calloc()");
    uint64_t now = now_ns(), deadline = now + CONNECT_TIMEOUT * 1000000000ull;
    for (int i = 0; i < g.nconns; i++) {
        conns[i].fd = -1;
        open_conn(&conns[i], now);
    }
    int up = 0;
    while (up < g.nconns) {
        wait_events(now + RETRY_NS);
        now = now_ns();
        scan(conns, now, true);
        up = 0;
        for (int i = 0; i < g.nconns; i++)
            up += conns[i].state == C_IDLE;
        if (now > deadline) {
            fprintf(stderr, "rateload: %d of %d connections up after %d s\n",
                    up, g.nconns, CONNECT_TIMEOUT);
            exit(1);
        }
    }
    /* connection set-up is not part of the measured counters */
    g.reconnects = g.err_connect = 0;
    return conns;
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1", *path = "/";
    int port = 0;
    parse_args(argc, argv, &host, &path, &port);
    g.addr.sin_family = AF_INET;
    g.addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &g.addr.sin_addr) != 1)
        usage();
    if (asprintf(&g.req, "GET %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n", path, host,
                 port) < 0)
        die("asprintf()");
    g.reqlen = strlen(g.req);
    g.fine = calloc(FINE_BUCKETS, sizeof(uint32_t));
    g.coarse = calloc(COARSE_BUCKETS, sizeof(uint32_t));
    g.ep = epoll_create1(EPOLL_CLOEXEC);
    if (g.fine == NULL || g.coarse == NULL || g.ep < 0)
        die("setup");

    struct conn *conns = connect_all();
    g.t0 = now_ns();
    g.t_measure = g.t0 + g.warmup_ns;
    g.t_end = g.t_measure + g.duration_ns;
    if (g.rate > 0) /* every request due before t_end */
        g.n_total = (uint64_t)((double)(g.t_end - g.t0) * g.rate / 1e9) + 1;
    uint64_t hard_end = g.t_end + g.timeout_ns, next_scan = g.t0;
    struct rusage r0, r1;
    int phase = 0; /* 0 warm-up, 1 measuring, 2 draining */
    getrusage(RUSAGE_SELF, &r0);

    for (;;) {
        uint64_t now = now_ns();
        if (phase == 0 && now >= g.t_measure) {
            getrusage(RUSAGE_SELF, &r0);
            printf("MEASURE\n");
            fflush(stdout);
            phase = 1;
        }
        if (phase == 1 && now >= g.t_end) {
            getrusage(RUSAGE_SELF, &r1);
            printf("END\n");
            fflush(stdout);
            phase = 2;
        }
        bool all_sent = g.rate > 0 ? g.next_i >= g.n_total : now >= g.t_end;
        if ((phase == 2 && all_sent && g.busy == 0) || now >= hard_end)
            break;
        if (now >= next_scan) {
            scan(conns, now, true);
            next_scan = now + SCAN_NS;
        }
        dispatch(now);

        /* Sleep until the next request is due (if a connection is free to
         * take it), the next scan, or the end of a phase. */
        uint64_t wake = next_scan;
        if (phase == 0 && g.t_measure < wake)
            wake = g.t_measure;
        if (phase == 1 && g.t_end < wake)
            wake = g.t_end;
        if (g.rate > 0 && g.idle != NULL && g.next_i < g.n_total &&
            due(g.next_i) < wake)
            wake = due(g.next_i);
        if (hard_end < wake)
            wake = hard_end;
        wait_events(wake);
    }
    if (phase < 2)
        getrusage(RUSAGE_SELF, &r1);
    /* Measured requests still in flight at the hard end never finished. */
    for (int i = 0; i < g.nconns; i++) {
        if (conns[i].state == C_BUSY && conns[i].measured)
            g.err_timeout++;
        else if (conns[i].state == C_BUSY)
            g.other_timeouts++;
    }
    report(&r0, &r1);
    return 0;
}
