/*
 * wsload: a WebSocket echo load client for bench/run.py --suite ws.
 *
 *   wsload -p PORT [-H 127.0.0.1] [-P /ws] [-c CONNS] [-d SECONDS]
 *          [-w WARMUP] [-s SIZE]
 *
 * Opens CONNS connections, upgrades each (RFC 6455, no extension offered,
 * so every frame is plain), then each sends one masked text message of
 * SIZE bytes, waits for its echo, and sends the next: a closed loop with
 * CONNS messages outstanding. WARMUP seconds of that are not counted; then
 * it prints "MEASURE\n" (the harness samples the server's CPU time when it
 * reads it), runs SECONDS more, and prints one JSON line: messages,
 * messages/s, latency percentiles (µs, 1 µs buckets up to 1 s) and its own
 * CPU time over the measured part (getrusage), so the report can show that
 * the client is not the bottleneck.
 *
 * One thread, epoll, non-blocking sockets. Pings from the server are
 * answered; a close frame or an error ends that connection and is counted.
 * Written for this benchmark only: not a general client.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RBUF    (256 * 1024)
#define HIST_US (1u << 20) /* latency buckets: 1 µs each, up to ~1 s */

enum { ST_HANDSHAKE, ST_OPEN, ST_DEAD };

struct conn {
    int fd;
    int state;
    int awaiting;     /* an echo is outstanding */
    int want_out;     /* EPOLLOUT is registered */
    uint64_t sent_ns; /* when the outstanding message was written */
    size_t rlen;
    size_t wlen, woff; /* unsent output: wbuf[woff..wlen) */
    unsigned char *rbuf;
    unsigned char *wbuf;
    size_t wcap;
};

static struct {
    uint32_t *hist;
    uint64_t over; /* latencies of 1 s and more */
    uint64_t max_ns;
    uint64_t messages;
    int measuring;
    uint64_t err_closed, err_io, err_proto, err_handshake;
    size_t size;
    unsigned char *payload;
    uint64_t rng;
} g;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t rnd32(void)
{
    /* xorshift64: mask keys need not be strong here, only varied */
    g.rng ^= g.rng << 13;
    g.rng ^= g.rng >> 7;
    g.rng ^= g.rng << 17;
    return (uint32_t)g.rng;
}

static void die(const char *what)
{
    perror(what);
    exit(2);
}

static int wbuf_reserve(struct conn *c, size_t extra)
{
    if (c->wlen + extra <= c->wcap)
        return 0;
    size_t cap = c->wcap ? c->wcap : 1024;
    while (cap < c->wlen + extra)
        cap *= 2;
    unsigned char *p = realloc(c->wbuf, cap);
    if (p == NULL)
        return -1;
    c->wbuf = p;
    c->wcap = cap;
    return 0;
}

/* Appends one masked client frame to C's output. */
static int queue_frame(struct conn *c, int opcode, const unsigned char *data,
                       size_t n)
{
    if (wbuf_reserve(c, n + 14) != 0)
        return -1;
    unsigned char *p = c->wbuf + c->wlen;
    *p++ = (unsigned char)(0x80 | opcode);
    if (n < 126) {
        *p++ = (unsigned char)(0x80 | n);
    } else if (n < 65536) {
        *p++ = 0x80 | 126;
        *p++ = (unsigned char)(n >> 8);
        *p++ = (unsigned char)n;
    } else {
        *p++ = 0x80 | 127;
        for (int i = 7; i >= 0; i--)
            *p++ = (unsigned char)((uint64_t)n >> (8 * i));
    }
    uint32_t key = rnd32();
    unsigned char k[4];
    memcpy(k, &key, 4);
    memcpy(p, k, 4);
    p += 4;
    for (size_t i = 0; i < n; i++)
        p[i] = data[i] ^ k[i & 3];
    c->wlen = (size_t)(p - c->wbuf) + n;
    return 0;
}

static void kill_conn(int ep, struct conn *c, uint64_t *counter)
{
    if (c->state == ST_DEAD)
        return;
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->state = ST_DEAD;
    (*counter)++;
}

/* Only a change costs a syscall: most writes complete at once. */
static void watch(int ep, struct conn *c, int want_out)
{
    if (c->want_out == want_out)
        return;
    struct epoll_event ev = {.events = EPOLLIN | (want_out ? EPOLLOUT : 0),
                             .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = want_out;
}

static void flush_out(int ep, struct conn *c)
{
    while (c->woff < c->wlen) {
        ssize_t w = write(c->fd, c->wbuf + c->woff, c->wlen - c->woff);
        if (w < 0) {
            if (errno == EAGAIN) {
                watch(ep, c, 1);
                return;
            }
            if (errno == EINTR)
                continue;
            kill_conn(ep, c, &g.err_io);
            return;
        }
        c->woff += (size_t)w;
    }
    c->woff = c->wlen = 0;
    watch(ep, c, 0);
}

static void send_message(int ep, struct conn *c)
{
    if (queue_frame(c, 1, g.payload, g.size) != 0) {
        kill_conn(ep, c, &g.err_io);
        return;
    }
    c->sent_ns = now_ns();
    c->awaiting = 1;
    flush_out(ep, c);
}

static void got_echo(int ep, struct conn *c)
{
    if (!c->awaiting)
        return;
    c->awaiting = 0;
    if (g.measuring) {
        uint64_t d = now_ns() - c->sent_ns;
        uint64_t us = d / 1000;
        if (us < HIST_US)
            g.hist[us]++;
        else
            g.over++;
        if (d > g.max_ns)
            g.max_ns = d;
        g.messages++;
    }
    send_message(ep, c);
}

/* Consumes whole frames from C's input. */
static void parse_frames(int ep, struct conn *c)
{
    size_t off = 0;
    while (c->state == ST_OPEN) {
        unsigned char *p = c->rbuf + off;
        size_t have = c->rlen - off, head = 2;
        if (have < 2)
            break;
        int fin = p[0] & 0x80, op = p[0] & 0x0f;
        uint64_t n = p[1] & 0x7f;
        if (p[1] & 0x80) { /* servers never mask */
            kill_conn(ep, c, &g.err_proto);
            return;
        }
        if (n == 126) {
            if (have < 4)
                break;
            n = ((uint64_t)p[2] << 8) | p[3];
            head = 4;
        } else if (n == 127) {
            if (have < 10)
                break;
            n = 0;
            for (int i = 0; i < 8; i++)
                n = (n << 8) | p[2 + i];
            head = 10;
        }
        if (n > RBUF - 16) {
            kill_conn(ep, c, &g.err_proto);
            return;
        }
        if (have < head + n)
            break;
        off += head + n;
        if (op == 9) {
            if (queue_frame(c, 10, p + head, (size_t)n) != 0)
                kill_conn(ep, c, &g.err_io);
            else
                flush_out(ep, c);
        } else if (op == 8) {
            kill_conn(ep, c, &g.err_closed);
            return;
        } else if (op != 10 && fin) {
            got_echo(ep, c);
        }
    }
    if (c->state == ST_DEAD)
        return;
    memmove(c->rbuf, c->rbuf + off, c->rlen - off);
    c->rlen -= off;
}

static void on_handshake(int ep, struct conn *c, int *open_count)
{
    unsigned char *end = memmem(c->rbuf, c->rlen, "\r\n\r\n", 4);
    if (end == NULL) {
        if (c->rlen == RBUF)
            kill_conn(ep, c, &g.err_handshake);
        return;
    }
    if (c->rlen < 12 || memcmp(c->rbuf, "HTTP/1.1 101", 12) != 0) {
        kill_conn(ep, c, &g.err_handshake);
        return;
    }
    size_t used = (size_t)(end - c->rbuf) + 4;
    memmove(c->rbuf, c->rbuf + used, c->rlen - used);
    c->rlen -= used;
    c->state = ST_OPEN;
    (*open_count)++;
    parse_frames(ep, c);
}

static void on_readable(int ep, struct conn *c, int *open_count)
{
    for (;;) {
        if (c->rlen == RBUF) {
            kill_conn(ep, c, &g.err_proto);
            return;
        }
        ssize_t r = read(c->fd, c->rbuf + c->rlen, RBUF - c->rlen);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                kill_conn(ep, c, &g.err_io);
            return;
        }
        if (r == 0) {
            kill_conn(ep, c, &g.err_closed);
            return;
        }
        c->rlen += (size_t)r;
        if (c->state == ST_HANDSHAKE)
            on_handshake(ep, c, open_count);
        else
            parse_frames(ep, c);
        if (c->state == ST_DEAD || (size_t)r < RBUF / 2)
            return;
    }
}

static void open_conn(int ep, struct conn *c, const char *host, int port,
                      const char *path)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        fprintf(stderr, "wsload: bad IPv4 address %s\n", host);
        exit(2);
    }
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        die("socket");
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        die("connect");
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->rbuf = malloc(RBUF);
    if (c->rbuf == NULL)
        die("malloc");
    unsigned char key[16];
    for (int i = 0; i < 16; i += 4) {
        uint32_t r = rnd32();
        memcpy(key + i, &r, 4);
    }
    static const char b64[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char k64[25];
    for (int i = 0, o = 0; i < 16; i += 3) {
        uint32_t v = (uint32_t)key[i] << 16;
        if (i + 1 < 16)
            v |= (uint32_t)key[i + 1] << 8;
        if (i + 2 < 16)
            v |= key[i + 2];
        k64[o++] = b64[(v >> 18) & 63];
        k64[o++] = b64[(v >> 12) & 63];
        k64[o++] = i + 1 < 16 ? b64[(v >> 6) & 63] : '=';
        k64[o++] = i + 2 < 16 ? b64[v & 63] : '=';
    }
    k64[24] = '\0';
    char req[512];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                     "Sec-WebSocket-Version: 13\r\n\r\n",
                     path, host, port, k64);
    if (write(c->fd, req, (size_t)n) != n)
        die("write handshake");
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    c->state = ST_HANDSHAKE;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
        die("epoll_ctl");
}

static double pct(double p)
{
    uint64_t total = g.over;
    for (uint32_t i = 0; i < HIST_US; i++)
        total += g.hist[i];
    if (total == 0)
        return 0;
    uint64_t want = (uint64_t)(p * (double)total), seen = 0;
    for (uint32_t i = 0; i < HIST_US; i++) {
        seen += g.hist[i];
        if (seen > want)
            return i;
    }
    return (double)g.max_ns / 1000.0;
}

/* User and system CPU time of this process, in seconds. */
static void cpu_s(double *user, double *sys)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *user = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
    *sys = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* Runs the loop until DEADLINE (monotonic ns). */
static void run(int ep, int *open_count, uint64_t deadline)
{
    struct epoll_event evs[256];
    while (now_ns() < deadline) {
        int n = epoll_wait(ep, evs, 256, 10);
        if (n < 0 && errno != EINTR)
            die("epoll_wait");
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if (c->state == ST_DEAD)
                continue;
            if (evs[i].events & EPOLLOUT)
                flush_out(ep, c);
            if (c->state != ST_DEAD &&
                (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                on_readable(ep, c, open_count);
        }
    }
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1", *path = "/ws";
    int port = 0, conns = 16, opt;
    double duration = 10, warmup = 2;
    g.size = 16;
    while ((opt = getopt(argc, argv, "H:p:P:c:d:w:s:")) != -1) {
        switch (opt) {
        case 'H':
            host = optarg;
            break;
        case 'p':
            port = atoi(optarg);
            break;
        case 'P':
            path = optarg;
            break;
        case 'c':
            conns = atoi(optarg);
            break;
        case 'd':
            duration = atof(optarg);
            break;
        case 'w':
            warmup = atof(optarg);
            break;
        case 's':
            g.size = (size_t)atol(optarg);
            break;
        default:
            fprintf(stderr, "usage: wsload -p PORT [-H HOST] [-P PATH] "
                            "[-c CONNS] [-d S] [-w S] [-s SIZE]\n");
            return 2;
        }
    }
    if (port <= 0 || conns <= 0 || duration <= 0 || g.size > 65536) {
        fprintf(stderr, "wsload: need -p PORT, -c > 0, -d > 0, -s <= 65536\n");
        return 2;
    }
    g.rng = now_ns() | 1;
    g.hist = calloc(HIST_US, sizeof *g.hist);
    g.payload = malloc(g.size + 1);
    struct conn *cs = calloc((size_t)conns, sizeof *cs);
    if (g.hist == NULL || g.payload == NULL || cs == NULL)
        die("calloc");
    for (size_t i = 0; i < g.size; i++)
        g.payload[i] = (unsigned char)('a' + i % 26);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");

    int open_count = 0;
    for (int i = 0; i < conns; i++)
        open_conn(ep, &cs[i], host, port, path);
    uint64_t give_up = now_ns() + 10000000000u;
    while (open_count + (int)g.err_handshake + (int)g.err_closed +
                   (int)g.err_io <
               conns &&
           now_ns() < give_up)
        run(ep, &open_count, now_ns() + 10000000u);
    if (open_count < conns) {
        printf("{\"error\": \"only %d of %d connections upgraded "
               "(handshake failures %llu, closed %llu, io %llu)\"}\n",
               open_count, conns, (unsigned long long)g.err_handshake,
               (unsigned long long)g.err_closed, (unsigned long long)g.err_io);
        return 1;
    }
    for (int i = 0; i < conns; i++)
        send_message(ep, &cs[i]);
    run(ep, &open_count, now_ns() + (uint64_t)(warmup * 1e9));

    printf("MEASURE\n");
    fflush(stdout);
    double user0, sys0, user1, sys1;
    cpu_s(&user0, &sys0);
    uint64_t t0 = now_ns();
    g.measuring = 1;
    run(ep, &open_count, t0 + (uint64_t)(duration * 1e9));
    g.measuring = 0;
    double wall = (double)(now_ns() - t0) / 1e9;
    cpu_s(&user1, &sys1);
    int alive = 0;
    for (int i = 0; i < conns; i++)
        alive += cs[i].state == ST_OPEN;
    printf("{\"conns\": %d, \"size\": %zu, \"wall_s\": %.3f, "
           "\"messages\": %llu, \"msgs_per_s\": %.1f, "
           "\"latency_us\": {\"p50\": %.0f, \"p90\": %.0f, \"p99\": %.0f, "
           "\"p999\": %.0f, \"max\": %.0f}, \"client_cpu_s\": %.3f, "
           "\"client_user_s\": %.3f, \"client_sys_s\": %.3f, "
           "\"alive_at_end\": %d, \"errors\": {\"closed\": %llu, "
           "\"io\": %llu, \"protocol\": %llu, \"handshake\": %llu}}\n",
           conns, g.size, wall, (unsigned long long)g.messages,
           (double)g.messages / wall, pct(0.50), pct(0.90), pct(0.99),
           pct(0.999), (double)g.max_ns / 1000.0,
           (user1 - user0) + (sys1 - sys0), user1 - user0, sys1 - sys0, alive,
           (unsigned long long)g.err_closed, (unsigned long long)g.err_io,
           (unsigned long long)g.err_proto,
           (unsigned long long)g.err_handshake);
    fflush(stdout);
    for (int i = 0; i < conns; i++)
        if (cs[i].state != ST_DEAD)
            close(cs[i].fd);
    return 0;
}
