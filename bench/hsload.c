/*
 * hsload: a TLS handshake load client for bench/tlshs.py.
 *
 *   hsload -p PORT [-H 127.0.0.1] [-P /] [-c CONNS] [-d SECONDS]
 *          [-w WARMUP] [-r] [-t TIMEOUT]
 *
 * CONNS connections are in flight at once; each one connects, does a TLS
 * handshake, sends one "GET PATH HTTP/1.1" with "Connection: close",
 * reads the response to the server's close (close_notify or EOF), sends
 * its own close_notify and closes; a new connection takes its place at
 * once. So every request costs the server one new handshake, as it does
 * a client without keep-alive. With -r the client keeps the session of
 * the first connection that completed and offers it on every later one
 * (a TLS 1.3 ticket, read with the response; a TLS 1.2 ticket): resumed
 * handshakes; SSL_session_reused() says whether the server took it.
 *
 * The certificate is not checked (the harness made it), but the handshake
 * verifies the server's signature as any client does: that is the
 * client's share of a full handshake's cost, about the server's for
 * ECDSA, so one client CPU may not keep up with one server CPU; the
 * harness compares the two CPU figures.
 *
 * Connections completed during the first WARMUP seconds are not counted;
 * "MEASURE" is printed when the measured window starts and "END" when it
 * ends (the harness samples the server's CPU time at both), then one JSON
 * line: handshakes completed in the window (response read), how many were
 * resumed, errors, the time from connect() to the response's end
 * (percentiles from 10 µs buckets) and this process's CPU time over the
 * window. A connection that makes no progress for TIMEOUT seconds (5)
 * counts as a timeout and is replaced. One thread, epoll, non-blocking
 * sockets and SSL objects. Written for this benchmark only.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#define BUCKETS 100000u /* 10 µs each: up to 1 s */
#define MAXCONN 1024

enum { S_CONNECT, S_HANDSHAKE, S_WRITE, S_READ, S_SHUTDOWN };

struct conn {
    int fd;
    int state;
    SSL *ssl;
    uint64_t start_ns;    /* connect() */
    uint64_t progress_ns; /* last event */
    size_t sent;
    bool head_ok; /* the response began "HTTP/1.x 2" */
    size_t got;
    char head[16];
};

static struct {
    const char *host, *path;
    int port, conns;
    double duration, warmup, timeout;
    bool resume;
} opt = {"127.0.0.1", "/", 0, 8, 10, 2, 5, false};

static SSL_CTX *ctx;
static SSL_SESSION *session; /* -r: the one offered */
static struct sockaddr_in addr;
static int ep;
static char request[512];
static size_t request_len;
static bool measuring;
static struct {
    uint64_t done, resumed, connect, tls, http, timeout;
} count;
static uint32_t *hist;
static uint64_t over; /* slower than 1 s */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void watch(struct conn *c, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = c};
    if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) != 0) {
        perror("epoll_ctl");
        exit(2);
    }
}

static void start(struct conn *c);

/* Ends C's connection (counted under ERR unless NULL) and opens another. */
static void finish(struct conn *c, uint64_t *err)
{
    if (err != NULL && measuring)
        (*err)++;
    if (c->ssl != NULL)
        SSL_free(c->ssl);
    c->ssl = NULL;
    close(c->fd);
    start(c);
}

static void start(struct conn *c)
{
    int one = 1;
    struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};

    memset(c, 0, sizeof *c);
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        perror("socket");
        exit(2);
    }
    (void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->start_ns = c->progress_ns = now_ns();
    c->state = S_CONNECT;
    if (connect(c->fd, (struct sockaddr *)&addr, sizeof addr) != 0 &&
        errno != EINPROGRESS) {
        if (measuring)
            count.connect++;
        ev.events = EPOLLOUT; /* reported at once: retried there */
    }
    if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        perror("epoll_ctl");
        exit(2);
    }
}

/* What the SSL call that returned RET wants: 1 wait (events set), 0 an
 * error (the connection is ended). */
static int wait_for(struct conn *c, int ret)
{
    switch (SSL_get_error(c->ssl, ret)) {
    case SSL_ERROR_WANT_READ:
        watch(c, EPOLLIN);
        return 1;
    case SSL_ERROR_WANT_WRITE:
        watch(c, EPOLLOUT);
        return 1;
    default:
        ERR_clear_error();
        finish(c, &count.tls);
        return 0;
    }
}

static void done(struct conn *c)
{
    uint64_t us;

    if (!c->head_ok) {
        finish(c, &count.http);
        return;
    }
    if (opt.resume && session == NULL)
        session = SSL_get1_session(c->ssl);
    if (measuring) {
        count.done++;
        if (SSL_session_reused(c->ssl))
            count.resumed++;
        us = (now_ns() - c->start_ns) / 1000u;
        if (us / 10u < BUCKETS)
            hist[us / 10u]++;
        else
            over++;
    }
    c->state = S_SHUTDOWN;
    /* our close_notify; the server's came (or its EOF): no wait */
    (void)SSL_shutdown(c->ssl);
    ERR_clear_error();
    finish(c, NULL);
}

static void step(struct conn *c)
{
    int ret, err = 0;
    socklen_t len = sizeof err;
    char buf[16384];

    c->progress_ns = now_ns();
    for (;;) {
        switch (c->state) {
        case S_CONNECT:
            if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 ||
                err != 0) {
                finish(c, &count.connect);
                return;
            }
            c->ssl = SSL_new(ctx);
            if (c->ssl == NULL || SSL_set_fd(c->ssl, c->fd) != 1) {
                fprintf(stderr, "SSL_new failed\n");
                exit(2);
            }
            if (opt.resume && session != NULL)
                (void)SSL_set_session(c->ssl, session);
            c->state = S_HANDSHAKE;
            break;
        case S_HANDSHAKE:
            ret = SSL_connect(c->ssl);
            if (ret != 1) {
                (void)wait_for(c, ret);
                return;
            }
            c->state = S_WRITE;
            break;
        case S_WRITE:
            ret = SSL_write(c->ssl, request + c->sent, request_len - c->sent);
            if (ret <= 0) {
                (void)wait_for(c, ret);
                return;
            }
            c->sent += (size_t)ret;
            if (c->sent == request_len)
                c->state = S_READ;
            break;
        case S_READ:
            ret = SSL_read(c->ssl, buf, sizeof buf);
            if (ret <= 0) {
                int e = SSL_get_error(c->ssl, ret);
                if (e == SSL_ERROR_ZERO_RETURN ||
                    (e == SSL_ERROR_SYSCALL && ret == 0) ||
                    (e == SSL_ERROR_SSL && c->got > 0)) {
                    ERR_clear_error();
                    done(c); /* the server closed: the response is whole */
                    return;
                }
                (void)wait_for(c, ret);
                return;
            }
            if (c->got < sizeof c->head) {
                size_t n = sizeof c->head - c->got;
                memcpy(c->head + c->got, buf,
                       (size_t)ret < n ? (size_t)ret : n);
            }
            c->got += (size_t)ret;
            if (c->got >= 10)
                c->head_ok =
                    memcmp(c->head, "HTTP/1.", 7) == 0 && c->head[9] == '2';
            break;
        default:
            return;
        }
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: hsload -p PORT [-H HOST] [-P PATH] [-c CONNS] "
                    "[-d SECONDS] [-w WARMUP] [-r] [-t TIMEOUT]\n");
    exit(2);
}

static uint64_t percentile(uint64_t total, double p)
{
    uint64_t want = (uint64_t)(p * (double)total + 0.5), seen = 0;
    for (uint32_t i = 0; i < BUCKETS; i++) {
        seen += hist[i];
        if (seen >= want && seen > 0)
            return (uint64_t)i * 10u + 5u;
    }
    return 1000000u;
}

int main(int argc, char **argv)
{
    int o;
    struct conn *conns;
    struct epoll_event evs[64];
    uint64_t t0, t_measure, t_end, last_scan;
    double cpu0 = 0, cpu1;

    while ((o = getopt(argc, argv, "p:H:P:c:d:w:rt:")) != -1) {
        switch (o) {
        case 'p':
            opt.port = atoi(optarg);
            break;
        case 'H':
            opt.host = optarg;
            break;
        case 'P':
            opt.path = optarg;
            break;
        case 'c':
            opt.conns = atoi(optarg);
            break;
        case 'd':
            opt.duration = atof(optarg);
            break;
        case 'w':
            opt.warmup = atof(optarg);
            break;
        case 'r':
            opt.resume = true;
            break;
        case 't':
            opt.timeout = atof(optarg);
            break;
        default:
            usage();
        }
    }
    if (opt.port <= 0 || opt.conns < 1 || opt.conns > MAXCONN ||
        opt.duration <= 0 || opt.warmup < 0 || opt.timeout <= 0)
        usage();
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)opt.port);
    if (inet_pton(AF_INET, opt.host, &addr.sin_addr) != 1)
        usage();
    request_len = (size_t)snprintf(request, sizeof request,
                                   "GET %s HTTP/1.1\r\nHost: %s:%d\r\n"
                                   "Connection: close\r\n\r\n",
                                   opt.path, opt.host, opt.port);
    hist = calloc(BUCKETS, sizeof *hist);
    conns = calloc((size_t)opt.conns, sizeof *conns);
    ctx = SSL_CTX_new(TLS_client_method());
    if (hist == NULL || conns == NULL || ctx == NULL) {
        fprintf(stderr, "out of memory\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN); /* a close_notify to a closed socket */
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    /* sessions are kept by hand (-r), not in a cache */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) {
        perror("epoll_create1");
        return 2;
    }

    t0 = last_scan = now_ns();
    t_measure = t0 + (uint64_t)(opt.warmup * 1e9);
    t_end = t_measure + (uint64_t)(opt.duration * 1e9);
    measuring = opt.warmup == 0;
    if (measuring) {
        cpu0 = cpu_s();
        printf("MEASURE\n");
        fflush(stdout);
    }
    for (int i = 0; i < opt.conns; i++)
        start(&conns[i]);
    for (;;) {
        uint64_t now = now_ns();
        int n;

        if (!measuring && now >= t_measure) {
            measuring = true;
            cpu0 = cpu_s();
            printf("MEASURE\n");
            fflush(stdout);
        }
        if (now >= t_end)
            break;
        if (now - last_scan > 100000000u) { /* 100 ms */
            last_scan = now;
            for (int i = 0; i < opt.conns; i++)
                if (now - conns[i].progress_ns > (uint64_t)(opt.timeout * 1e9))
                    finish(&conns[i], &count.timeout);
        }
        n = epoll_wait(ep, evs, 64, 10);
        if (n < 0 && errno != EINTR) {
            perror("epoll_wait");
            return 2;
        }
        for (int i = 0; i < n; i++)
            step(evs[i].data.ptr);
    }
    cpu1 = cpu_s();
    printf("END\n");
    {
        double secs = (double)(now_ns() - t_measure) / 1e9;
        uint64_t total = count.done - over;
        printf(
            "{\"handshakes\":%llu,\"resumed\":%llu,\"duration_s\":%.3f,"
            "\"rate\":%.1f,\"errors\":{\"connect\":%llu,\"tls\":%llu,"
            "\"http\":%llu,\"timeout\":%llu},\"latency_us\":{\"p50\":%llu,"
            "\"p99\":%llu,\"over_1s\":%llu},\"client_cpu_s\":%.3f,"
            "\"client_cpu_pct\":%.1f,\"resume\":%s}\n",
            (unsigned long long)count.done, (unsigned long long)count.resumed,
            secs, secs > 0 ? (double)count.done / secs : 0.0,
            (unsigned long long)count.connect, (unsigned long long)count.tls,
            (unsigned long long)count.http, (unsigned long long)count.timeout,
            (unsigned long long)percentile(total, 0.5),
            (unsigned long long)percentile(total, 0.99),
            (unsigned long long)over, cpu1 - cpu0,
            secs > 0 ? 100.0 * (cpu1 - cpu0) / secs : 0.0,
            opt.resume ? "true" : "false");
    }
    fflush(stdout);
    return 0;
}
