/* exchange.c - an exchange as the executor sees it (exchange.h).
 *
 * Every call here may come from another thread (a lane) while the loop
 * thread works the same exchange, so each takes the exchange's mutex and
 * first compares the request generation: a call for a request that is
 * over (an app that kept wsgi.input, a send() after the client left)
 * touches nothing. The executor never writes to the socket; it queues
 * bytes in x->out and notifies the loop (exec.h), which takes them. The
 * loop side's part is at the top: the wake, the tail dropped, the output
 * taken behind the connection's write buffer (sl_conn_take_out()).
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "worker/loop/accesslog.h"
#include "worker/loop/conn.h"
#include "worker/loop/drain.h"
#include "worker/loop/http.h"
#include "worker/loop/peer.h"
#include "worker/loop/pump.h"

void sl_exch_drop_tail_locked(sl_exch_t *x)
{
    sl_tail_drop(&x->tail, x->conn->pump->exec->release);
}

bool sl_exch_aborted(sl_exch_t *x)
{
    bool aborted;

    pthread_mutex_lock(&x->mu);
    aborted = x->aborted;
    pthread_mutex_unlock(&x->mu);
    return aborted;
}

void sl_exch_wake(sl_exch_t *x)
{
    if (x->waiting)
        x->conn->pump->exec->wake(x);
}

int sl_conn_take_out(sl_conn_t *c, sl_exch_t *x)
{
    int rc = sl_buf_move(&c->tx.buf, &x->out, SL_CONN_BUF_KEEP);

    x->inflight = sl_buf_pending(&c->tx.buf);
    return rc;
}

/* Response bytes of C's request queued and not yet written (mu held). */
static size_t credit_used(const sl_exch_t *x)
{
    return x->out.len + x->inflight;
}

/* The length of the head that begins P[0..N): up to and with its blank
 * line; N when there is none. A memchr a line: glibc's memmem costs
 * several hundred instructions on a short response. */
static size_t head_length(const char *p, size_t n)
{
    const char *q = p, *end = p + n;

    while ((q = memchr(q, '\n', (size_t)(end - q))) != NULL) {
        q++;
        if (end - q >= 2 && q[0] == '\r' && q[1] == '\n')
            return (size_t)(q + 2 - p);
    }
    return n;
}

void sl_exch_note_head(sl_exch_t *x, const char *p, size_t n, bool whole)
{
    int status = x->resp_status == 0 ? sl_http_status_of(p, n) : 0;
    size_t head;

    if (status == 0)
        return;
    x->resp_status = status; /* the metrics' too */
    if (x->conn->pump->alog == NULL)
        return; /* the rest is only the access log's */
    head = whole ? head_length(p, n) : n; /* not WHOLE: P is the head */
    if (whole)
        x->resp_body = n - head;
    if (sl_accesslog_wants_head(x->conn->pump->alog) &&
        sl_buf_append(&x->resp_head, p, head) < 0)
        x->resp_head.len = 0; /* out of memory: no response headers */
}

/* The first part of a response, IOV[0..N): the head is IOV[0] (the
 * writer's layout); when the part ends the response, the rest is all
 * body (a response in one part is never chunked). */
static void note_first(sl_exch_t *x, const struct iovec *iov, int n, int flags)
{
    bool end = (flags & SL_SEND_END) != 0;
    uint64_t rest = 0;
    int i;

    sl_exch_note_head(x, iov[0].iov_base, iov[0].iov_len, end && n == 1);
    if (!end || n == 1)
        return;
    for (i = 1; i < n; i++)
        rest += iov[i].iov_len;
    if (x->resp_status >= 200 && x->resp_status != 204 && x->resp_status != 304)
        x->resp_body = rest;
}

void sl_exch_note_body(sl_exch_t *x, uint32_t gen, uint64_t body)
{
    sl_exch_lock(x);
    if (x->gen == gen)
        x->resp_body = body;
    sl_exch_unlock(x);
}

int sl_exch_send(sl_exch_t *x, uint32_t gen, const struct iovec *iov,
                 int iovcnt, int flags)
{
    size_t mark;
    int i, rc = 0;

    sl_exch_lock(x);
    if (x->gen != gen || x->resp_done) {
        rc = -1;
        goto out_unlock;
    }
    if (x->aborted) {
        /* nothing more goes out, but END still frees the request */
        if (flags & SL_SEND_END) {
            x->resp_done = true;
            x->conn->pump->exec->notify(x);
        }
        rc = -1;
        goto out_unlock;
    }
    if (x->resp_status == 0 && iovcnt > 0)
        note_first(x, iov, iovcnt, flags);
    mark = x->out.len;
    for (i = 0; i < iovcnt; i++) {
        if (sl_buf_append(&x->out, iov[i].iov_base, iov[i].iov_len) < 0) {
            /* out of memory: none of this part goes out (a part cut short
             * would corrupt the response), the connection closes, and END
             * still frees the request */
            x->out.len = mark;
            x->aborted = true;
            if (flags & SL_SEND_END)
                x->resp_done = true;
            x->conn->pump->exec->notify(x);
            rc = -1;
            goto out_unlock;
        }
    }
    if (flags & SL_SEND_CLOSE)
        x->close_after = true;
    if (flags & SL_SEND_END)
        x->resp_done = true;
    x->conn->pump->exec->notify(x);
    if (x->aborted)
        rc = -1;
    else if (!(flags & SL_SEND_END) && credit_used(x) > SL_CONN_CREDIT)
        rc = 1;
out_unlock:
    sl_exch_unlock(x);
    return rc;
}

int sl_exch_wait_credit(sl_exch_t *x, uint32_t gen)
{
    int rc = 0;

    sl_exch_lock(x);
    while (rc == 0 && x->gen == gen && !x->aborted &&
           credit_used(x) > SL_CONN_CREDIT / 2)
        rc = x->conn->pump->exec->wait(x, SL_AWAIT_CREDIT);
    if (x->gen != gen || x->aborted)
        rc = -1;
    sl_exch_unlock(x);
    return rc;
}

uint64_t sl_exch_body_left(sl_exch_t *x, uint32_t gen)
{
    uint64_t left;

    sl_exch_lock(x);
    if (x->gen != gen || x->body_done)
        left = 0;
    else if (x->req.chunked)
        left = UINT64_MAX;
    else
        left = x->req.content_length > x->body_total
                   ? x->req.content_length - x->body_total
                   : 0;
    sl_exch_unlock(x);
    return left;
}

int sl_exch_await(sl_exch_t *x, uint32_t gen, int what)
{
    int rc = 1;

    sl_exch_lock(x);
    if (x->gen != gen) {
        rc = -1;
    } else if (x->aborted || (x->peer_gone && what == SL_AWAIT_DISCONNECT)) {
        rc = what == SL_AWAIT_DISCONNECT ? 0 : -1;
    } else if (what == SL_AWAIT_BODY &&
               (sl_buf_pending(&x->body) > 0 || x->body_done)) {
        rc = 0;
    } else if (what == SL_AWAIT_CREDIT &&
               credit_used(x) <= SL_CONN_CREDIT / 2) {
        rc = 0;
    } else {
        x->waiting = true;
        /* the loop may have stopped reading at a full body window */
        if (what == SL_AWAIT_BODY && x->body_paused) {
            x->body_paused = false;
            x->conn->pump->exec->notify(x);
        }
    }
    sl_exch_unlock(x);
    return rc;
}

const char *sl_conn_peer(const sl_conn_t *c, char *buf, size_t n, int *port)
{
    return sl_peer_text((const struct sockaddr *)&c->peer, buf, n, port);
}

const char *sl_exch_client(const sl_exch_t *x, char *buf, size_t n, int *port)
{
    const sl_client_t *cl = sl_req_client(&x->req);

    if (cl->addr[0] == '\0')
        return sl_conn_peer(x->conn, buf, n, port);
    snprintf(buf, n, "%s", cl->addr);
    *port = cl->port;
    return buf;
}

const char *sl_exch_scheme(const sl_exch_t *x)
{
    return sl_req_client(&x->req)->https ? "https" : "http";
}

void sl_exch_started(sl_exch_t *x, uint32_t gen)
{
    ev_tstamp now = ev_time();

    sl_exch_lock(x);
    if (x->gen == gen && x->picked == 0)
        x->picked = now;
    sl_exch_unlock(x);
}

/* May request GEN of C queue its last part, a file or lent bytes, after
 * out? Not when stale, ended, aborted, or when it has one (mu held). */
static bool tail_allowed(const sl_exch_t *x, uint32_t gen)
{
    return x->gen == gen && !x->aborted && !x->resp_done &&
           !sl_tail_any(&x->tail);
}

/* The last part is queued: END, and the close when FLAGS ask (mu held). */
static void tail_queued(sl_exch_t *x, int flags)
{
    x->resp_done = true;
    if (flags & SL_SEND_CLOSE)
        x->close_after = true;
    x->conn->pump->exec->notify(x);
}

int sl_exch_sendfile(sl_exch_t *x, uint32_t gen, int fd, off_t off, size_t len,
                     int flags)
{
    int rc = 0;

    sl_exch_lock(x);
    if (tail_allowed(x, gen)) {
        x->tail.file_fd = fd;
        x->tail.file_off = off;
        x->tail.len = len;
        tail_queued(x, flags);
    } else {
        close(fd);
        rc = -1;
    }
    sl_exch_unlock(x);
    return rc;
}

int sl_exch_sendmem(sl_exch_t *x, uint32_t gen, const void *mem, size_t len,
                    void *owner, int flags)
{
    int rc = 0;

    sl_exch_lock(x);
    if (tail_allowed(x, gen)) {
        x->tail.mem = mem;
        x->tail.len = len;
        x->tail.mem_owner = owner;
        tail_queued(x, flags);
    } else {
        rc = -1;
    }
    sl_exch_unlock(x);
    return rc;
}

long sl_exch_read_body(sl_exch_t *x, uint32_t gen, char *dst, size_t n,
                       bool stop_at_lf, bool wait)
{
    sl_buf_t *b = &x->body;
    long rc;
    size_t avail;
    char *nl;

    sl_exch_lock(x);
    for (;;) {
        if (x->gen != gen) {
            rc = -1;
            goto out_unlock;
        }
        if (sl_buf_pending(b) > 0 || n == 0)
            break;
        if (x->body_done) {
            rc = 0;
            goto out_unlock;
        }
        if (x->aborted) {
            rc = -1;
            goto out_unlock;
        }
        if (!wait) {
            rc = -2;
            goto out_unlock;
        }
        if (x->conn->pump->exec->wait(x, SL_AWAIT_BODY) < 0) {
            rc = -1;
            goto out_unlock;
        }
    }
    avail = sl_buf_pending(b);
    if (n > avail)
        n = avail;
    if (stop_at_lf && (nl = memchr(b->data + b->off, '\n', n)) != NULL)
        n = (size_t)(nl - (b->data + b->off)) + 1;
    memcpy(dst, b->data + b->off, n);
    sl_buf_consume(b, n);
    rc = (long)n;
    /* the loop stopped reading when the window filled: let it go on */
    if (x->body_paused && sl_buf_pending(b) < SL_CONN_BODY_WINDOW / 2 &&
        !x->body_done) {
        x->body_paused = false;
        x->conn->pump->exec->notify(x);
    }
out_unlock:
    sl_exch_unlock(x);
    return rc;
}

bool sl_exch_is_stream(const sl_exch_t *x)
{
    return sl_pump_exch_kind(x->conn->pump, x->id) == SL_EXCH_STREAM;
}

bool sl_exch_is_ahead(const sl_exch_t *x)
{
    return sl_pump_exch_kind(x->conn->pump, x->id) == SL_EXCH_AHEAD;
}

bool sl_exch_must_close(sl_exch_t *x, uint32_t gen)
{
    /* a stream ends alone: its connection stays, and the drain's GOAWAY
     * says the rest */
    if (sl_exch_is_stream(x))
        return false;
    return sl_drain_closing(&x->conn->pump->drain) ||
           (x->req.has_body && sl_exch_body_left(x, gen) > SL_CONN_DISCARD_MAX);
}

const sl_tls_info_t *sl_exch_tls(const sl_exch_t *x)
{
    return x->req.tls ? sl_transport_tls_info(&x->conn->tp) : NULL;
}

int sl_exch_listener(const sl_exch_t *x)
{
    return x->conn->listener;
}

uint32_t sl_exch_serial(const sl_exch_t *x)
{
    return x->conn->serial;
}

bool sl_exch_peer_is_ip(const sl_exch_t *x)
{
    return x->conn->peer.ss_family == AF_INET ||
           x->conn->peer.ss_family == AF_INET6;
}

sl_pump_t *sl_exch_pump(const sl_exch_t *x)
{
    return x->conn->pump;
}

void sl_exch_need_loop(sl_exch_t *x)
{
    x->conn->pump->exec->need_loop(x);
}
