/* accesslog.c - writes the access log on the loop thread.
 *
 * Lines are rendered by accesslog_render.c straight into the tail of the
 * write buffer, which keeps SL_ACCESSLOG_LINE_MAX bytes free for one.
 *
 * Writing: whole lines, one write(2) per buffer for a file opened with
 * O_APPEND, so the lines of several workers never mix. A pipe (stdout
 * under a process manager) gets its own non-blocking open file description
 * (a fresh open of /proc/self/fd/1, so the O_NONBLOCK does not leak into
 * the stdout the app and the supervisor share) and writes of whole lines
 * of at most PIPE_BUF bytes, which a pipe takes atomically or not at all.
 * Whatever cannot be written at once is dropped and counted: a log must
 * not stall the requests it logs.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "worker/loop/accesslog.h"
#include "worker/loop/conn.h"
#include "worker/loop/peer.h"

struct sl_accesslog {
    sl_logfmt_t fmt;
    sl_accesslog_clock_t clock;
    struct ev_loop *loop; /* borrowed */
    ev_timer timer;       /* embedded: the 1 s flush */
    const char *path;     /* borrowed from argv; NULL = stdout */
    int fd;               /* owned */
    bool pipe;            /* write whole lines of at most PIPE_BUF */
    bool sock;            /* stdout is a socket: send(MSG_DONTWAIT) */
    char *buf;            /* owned, SL_ACCESSLOG_BUF bytes */
    size_t len;
    uint64_t dropped;   /* lines dropped since the last report */
    const char *reason; /* why the last ones were */
    long pid;
};

/* ------------------------------------------------------------------ */
/* writing                                                            */

/* Count the lines in P[0..N). */
static uint64_t count_lines(const char *p, size_t n)
{
    const char *end = p + n;
    uint64_t lines = 0;

    while (p < end && (p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        lines++;
        p++;
    }
    return lines;
}

/* One write of P[0..N) that never waits. */
static ssize_t write_once(sl_accesslog_t *a, const char *p, size_t n)
{
    ssize_t w;

    do /* send(): not a client socket, the log's stdout */
        w = a->sock ? send(a->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL)
                    : write(a->fd, p, n);
    while (w < 0 && errno == EINTR);
    return w;
}

/* How much of P[0..N) to write at once: everything to a file; to a pipe,
 * the whole lines that fit in PIPE_BUF (a longer line alone). */
static size_t chunk(const sl_accesslog_t *a, const char *p, size_t n)
{
    const char *nl;

    if (!a->pipe || n <= PIPE_BUF)
        return n;
    /* the last line end within PIPE_BUF (a loop: GCC's UBSan build takes
     * memrchr's P for one that may be NULL) */
    for (size_t i = PIPE_BUF; i > 0; i--)
        if (p[i - 1] == '\n')
            return i;
    nl = memchr(p, '\n', n);
    return nl != NULL ? (size_t)(nl - p) + 1 : n;
}

int sl_accesslog_flush(sl_accesslog_t *a)
{
    size_t off = 0, n;
    ssize_t w;

    while (off < a->len) {
        n = chunk(a, a->buf + off, a->len - off);
        w = write_once(a, a->buf + off, n);
        if (w < 0 || (size_t)w < n) {
            /* what a short write left would tear a line: drop it too,
             * from its line's end on */
            if (w > 0) {
                const char *nl =
                    memchr(a->buf + off + w, '\n', a->len - off - (size_t)w);
                off = nl != NULL ? (size_t)(nl - a->buf) + 1 : a->len;
            }
            a->reason = w >= 0 ? "short write"
                        : errno == EAGAIN || errno == EWOULDBLOCK ? "EAGAIN"
                        : errno == ENOSPC                         ? "ENOSPC"
                        : errno == EPIPE                          ? "EPIPE"
                                         : "write error";
            a->dropped += count_lines(a->buf + off, a->len - off);
            a->len = 0;
            return -1;
        }
        off += n;
    }
    a->len = 0;
    return 0;
}

uint64_t sl_accesslog_report(sl_accesslog_t *a)
{
    uint64_t n = a->dropped;

    if (n > 0)
        sl_warn("access log: %llu lines dropped (%s)", (unsigned long long)n,
                a->reason);
    a->dropped = 0;
    return n;
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    sl_accesslog_t *a =
        (sl_accesslog_t *)((char *)w - offsetof(sl_accesslog_t, timer));

    (void)loop;
    (void)revents;
    if (a->len > 0)
        sl_accesslog_flush(a);
    sl_accesslog_report(a);
}

void sl_accesslog_add(sl_accesslog_t *a, const sl_accesslog_rec_t *rec)
{
    if (SL_ACCESSLOG_BUF - a->len < SL_ACCESSLOG_LINE_MAX)
        sl_accesslog_flush(a);
    a->len += sl_accesslog_render(&a->fmt, &a->clock, rec, a->buf + a->len,
                                  SL_ACCESSLOG_LINE_MAX);
}

/* "a.b.c.d" of IPv4 address A (network order) into BUF (16 bytes):
 * inet_ntop() goes through sprintf, a tenth of a hello world's cost. */
static const char *ipv4_text(const struct in_addr *a, char *buf)
{
    const unsigned char *b = (const unsigned char *)&a->s_addr;
    char *p = buf;
    int i;

    for (i = 0; i < 4; i++) {
        unsigned v = b[i];
        if (v >= 100)
            *p++ = (char)('0' + v / 100);
        if (v >= 10)
            *p++ = (char)('0' + v / 10 % 10);
        *p++ = (char)('0' + v % 10);
        *p++ = i < 3 ? '.' : '\0';
    }
    return buf;
}

const char *sl_accesslog_remote(const sl_exch_t *x, char *buf, size_t n)
{
    const sl_conn_t *c = x->conn;
    int port;

    if (sl_req_client(&x->req)->addr[0] != '\0')
        return sl_req_client(&x->req)
            ->addr; /* named by a trusted proxy's header */
    if (c->peer.ss_family == AF_INET && n >= INET_ADDRSTRLEN)
        return ipv4_text(&((const struct sockaddr_in *)&c->peer)->sin_addr,
                         buf);
    return sl_peer_text((const struct sockaddr *)&c->peer, buf, n, &port);
}

void sl_accesslog_request(sl_accesslog_t *a, const sl_exch_t *x, bool head)
{
    const sl_tls_info_t *ti;
    char peer[64];
    sl_accesslog_rec_t rec = {
        .req = head ? &x->req : NULL,
        .peer = sl_accesslog_remote(x, peer, sizeof(peer)),
        .status = x->resp_status,
        .body = x->resp_body,
        .start = x->req.start,
        .end = ev_time(),
        .pid = a->pid,
    };

    if (a->fmt.resp_headers && x->resp_head.len > 0) {
        rec.resp_head = x->resp_head.data;
        rec.resp_head_len = x->resp_head.len;
    }
    if (a->fmt.tls && (ti = sl_transport_tls_info(&x->conn->tp)) != NULL) {
        rec.tls_protocol = ti->protocol;
        rec.tls_cipher = ti->cipher_name;
    }
    sl_accesslog_add(a, &rec);
}

bool sl_accesslog_wants_head(const sl_accesslog_t *a)
{
    return a != NULL && a->fmt.resp_headers;
}

/* Open A's destination: the file by name, or a non-blocking description
 * of stdout of its own. The new descriptor, or -1 after logging. */
static int open_dest(sl_accesslog_t *a)
{
    struct stat st;
    int fd;

    if (a->path != NULL) {
        fd = open(a->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            sl_log_errno(SL_LOG_ERROR, "access log: open(%s) failed", a->path);
        a->pipe = a->sock = false;
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
            a->pipe = true;
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        }
        return fd;
    }
    if (fstat(STDOUT_FILENO, &st) < 0) {
        sl_log_errno(SL_LOG_ERROR, "access log: stdout is not open");
        return -1;
    }
    a->pipe = S_ISFIFO(st.st_mode);
    a->sock = S_ISSOCK(st.st_mode);
    /* a description of our own, so O_NONBLOCK stays ours; a socket (the
     * journal's stdout) cannot be opened again: send() says MSG_DONTWAIT */
    fd = a->sock ? -1
                 : open("/proc/self/fd/1",
                        O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
        sl_log_errno(SL_LOG_ERROR, "access log: dup(stdout) failed");
    return fd;
}

int sl_accesslog_open(sl_accesslog_t **out, struct ev_loop *loop,
                      const sl_options_t *o)
{
    sl_accesslog_t *a;
    char err[256];

    *out = NULL;
    if (o->access_logfile == NULL)
        return 0;
    a = calloc(1, sizeof(*a));
    if (a == NULL || (a->buf = malloc(SL_ACCESSLOG_BUF)) == NULL) {
        sl_error("access log: out of memory");
        goto out_free;
    }
    if (sl_logfmt_compile(&a->fmt, o->access_logformat, o->access_log_json, err,
                          sizeof(err)) < 0) {
        sl_error("access log: bad format: %s", err);
        goto out_free;
    }
    if (a->fmt.unknown)
        sl_warn("access log: the format names atoms gunicorn does not"
                " know; they are written '-'");
    a->path = strcmp(o->access_logfile, "-") == 0 ? NULL : o->access_logfile;
    a->clock.sec = -1;
    a->pid = (long)getpid();
    a->fd = open_dest(a);
    if (a->fd < 0)
        goto out_free;
    a->loop = loop;
    ev_timer_init(&a->timer, timer_cb, 1.0, 1.0);
    ev_timer_start(loop, &a->timer);
    ev_unref(loop); /* the log alone keeps no loop running */
    *out = a;
    return 0;

out_free:
    if (a != NULL)
        free(a->buf);
    free(a);
    return -1;
}

void sl_accesslog_reopen(sl_accesslog_t *a)
{
    int fd;

    if (a == NULL)
        return;
    sl_accesslog_flush(a);
    if (a->path == NULL)
        return; /* stdout: nothing to reopen */
    fd = open_dest(a);
    if (fd < 0)
        return; /* logged; the old file goes on */
    close(a->fd);
    a->fd = fd;
}

void sl_accesslog_close(sl_accesslog_t *a)
{
    if (a == NULL)
        return;
    if (a->len > 0)
        sl_accesslog_flush(a);
    sl_accesslog_report(a);
    if (a->loop != NULL) {
        ev_ref(a->loop);
        ev_timer_stop(a->loop, &a->timer);
    }
    close(a->fd);
    free(a->buf);
    free(a);
}
