/* conn_exec.c - a connection as the executor sees it.
 *
 * Every call here may come from another thread (a lane) while the loop
 * thread works the same connection, so each takes the connection's mutex
 * and first compares the request generation: a call for a request that is
 * over (an app that kept wsgi.input, a send() after the client left)
 * touches nothing. The executor never writes to the socket; it queues
 * bytes in c->out and notifies the loop (exec.h), which takes them.
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

void sl_conn_drop_tail_locked(sl_conn_t *c)
{
    if (c->file_fd >= 0) {
        close(c->file_fd);
        c->file_fd = -1;
    }
    if (c->mem != NULL) {
        c->pump->exec->release(c->mem_owner);
        c->mem = NULL;
        c->mem_owner = NULL;
    }
}

void sl_conn_wake(sl_conn_t *c)
{
    if (c->waiting)
        c->pump->exec->wake(c);
}

/* Move what the executor queued in out behind wbuf (mu held): a swap of
 * the buffers when wbuf is empty, a copy otherwise. 0, or -1 when out of
 * memory. */
int sl_conn_take_out(sl_conn_t *c)
{
    int rc = 0;

    if (sl_buf_pending(&c->tx.buf) == 0) {
        sl_buf_t t = c->tx.buf;
        c->tx.buf = c->out;
        c->out = t;
    } else {
        rc = sl_buf_append(&c->tx.buf, c->out.data + c->out.off,
                           sl_buf_pending(&c->out));
    }
    sl_buf_reset(&c->out, SL_CONN_BUF_KEEP);
    c->inflight = sl_buf_pending(&c->tx.buf);
    return rc;
}

/* Response bytes of C's request queued and not yet written (mu held). */
static size_t credit_used(const sl_conn_t *c)
{
    return c->out.len + c->inflight;
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

void sl_conn_note_head(sl_conn_t *c, const char *p, size_t n, bool whole)
{
    int status = c->resp_status == 0 ? sl_http_status_of(p, n) : 0;
    size_t head;

    if (status == 0)
        return;
    c->resp_status = status; /* the metrics' too */
    if (c->pump->alog == NULL)
        return; /* the rest is only the access log's */
    head = whole ? head_length(p, n) : n; /* not WHOLE: P is the head */
    if (whole)
        c->resp_body = n - head;
    if (sl_accesslog_wants_head(c->pump->alog) &&
        sl_buf_append(&c->resp_head, p, head) < 0)
        c->resp_head.len = 0; /* out of memory: no response headers */
}

/* The first part of a response, IOV[0..N): the head is IOV[0] (the
 * writer's layout); when the part ends the response, the rest is all
 * body (a response in one part is never chunked). */
static void note_first(sl_conn_t *c, const struct iovec *iov, int n, int flags)
{
    bool end = (flags & SL_SEND_END) != 0;
    uint64_t rest = 0;
    int i;

    sl_conn_note_head(c, iov[0].iov_base, iov[0].iov_len, end && n == 1);
    if (!end || n == 1)
        return;
    for (i = 1; i < n; i++)
        rest += iov[i].iov_len;
    if (c->resp_status >= 200 && c->resp_status != 204 && c->resp_status != 304)
        c->resp_body = rest;
}

void sl_conn_note_body(sl_conn_t *c, uint32_t gen, uint64_t body)
{
    pthread_mutex_lock(&c->mu);
    if (c->gen == gen)
        c->resp_body = body;
    pthread_mutex_unlock(&c->mu);
}

int sl_conn_send(sl_conn_t *c, uint32_t gen, const struct iovec *iov,
                 int iovcnt, int flags)
{
    size_t mark;
    int i, rc = 0;

    pthread_mutex_lock(&c->mu);
    if (c->gen != gen || c->resp_done) {
        rc = -1;
        goto out_unlock;
    }
    if (c->aborted) {
        /* nothing more goes out, but END still frees the request */
        if (flags & SL_SEND_END) {
            c->resp_done = true;
            c->pump->exec->notify(c);
        }
        rc = -1;
        goto out_unlock;
    }
    if (c->resp_status == 0 && iovcnt > 0)
        note_first(c, iov, iovcnt, flags);
    mark = c->out.len;
    for (i = 0; i < iovcnt; i++) {
        if (sl_buf_append(&c->out, iov[i].iov_base, iov[i].iov_len) < 0) {
            /* out of memory: none of this part goes out (a part cut short
             * would corrupt the response), the connection closes, and END
             * still frees the request */
            c->out.len = mark;
            c->aborted = true;
            if (flags & SL_SEND_END)
                c->resp_done = true;
            c->pump->exec->notify(c);
            rc = -1;
            goto out_unlock;
        }
    }
    if (flags & SL_SEND_CLOSE)
        c->close_after = true;
    if (flags & SL_SEND_END)
        c->resp_done = true;
    c->pump->exec->notify(c);
    if (c->aborted)
        rc = -1;
    else if (!(flags & SL_SEND_END) && credit_used(c) > SL_CONN_CREDIT)
        rc = 1;
out_unlock:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int sl_conn_wait_credit(sl_conn_t *c, uint32_t gen)
{
    int rc = 0;

    pthread_mutex_lock(&c->mu);
    while (rc == 0 && c->gen == gen && !c->aborted &&
           credit_used(c) > SL_CONN_CREDIT / 2)
        rc = c->pump->exec->wait(c, SL_AWAIT_CREDIT);
    if (c->gen != gen || c->aborted)
        rc = -1;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

uint64_t sl_conn_body_left(sl_conn_t *c, uint32_t gen)
{
    uint64_t left;

    pthread_mutex_lock(&c->mu);
    if (c->gen != gen || c->body_done)
        left = 0;
    else if (c->req.chunked)
        left = UINT64_MAX;
    else
        left = c->req.content_length > c->body_total
                   ? c->req.content_length - c->body_total
                   : 0;
    pthread_mutex_unlock(&c->mu);
    return left;
}

int sl_conn_await(sl_conn_t *c, uint32_t gen, int what)
{
    int rc = 1;

    pthread_mutex_lock(&c->mu);
    if (c->gen != gen) {
        rc = -1;
    } else if (c->aborted || (c->peer_gone && what == SL_AWAIT_DISCONNECT)) {
        rc = what == SL_AWAIT_DISCONNECT ? 0 : -1;
    } else if (what == SL_AWAIT_BODY &&
               (sl_buf_pending(&c->body) > 0 || c->body_done)) {
        rc = 0;
    } else if (what == SL_AWAIT_CREDIT &&
               credit_used(c) <= SL_CONN_CREDIT / 2) {
        rc = 0;
    } else {
        c->waiting = true;
        /* the loop may have stopped reading at a full body window */
        if (what == SL_AWAIT_BODY && c->body_paused) {
            c->body_paused = false;
            c->pump->exec->notify(c);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

const char *sl_conn_peer(const sl_conn_t *c, char *buf, size_t n, int *port)
{
    return sl_peer_text((const struct sockaddr *)&c->peer, buf, n, port);
}

const char *sl_conn_client(const sl_conn_t *c, char *buf, size_t n, int *port)
{
    const sl_client_t *cl = sl_req_client(&c->req);

    if (cl->addr[0] == '\0')
        return sl_conn_peer(c, buf, n, port);
    snprintf(buf, n, "%s", cl->addr);
    *port = cl->port;
    return buf;
}

const char *sl_conn_scheme(const sl_conn_t *c)
{
    return sl_req_client(&c->req)->https ? "https" : "http";
}

void sl_conn_started(sl_conn_t *c, uint32_t gen)
{
    ev_tstamp now = ev_time();

    pthread_mutex_lock(&c->mu);
    if (c->gen == gen && c->picked == 0)
        c->picked = now;
    pthread_mutex_unlock(&c->mu);
}

/* May request GEN of C queue its last part, a file or lent bytes, after
 * out? Not when stale, ended, aborted, or when it has one (mu held). */
static bool tail_allowed(const sl_conn_t *c, uint32_t gen)
{
    return c->gen == gen && !c->aborted && !c->resp_done && c->file_fd < 0 &&
           c->mem == NULL;
}

/* The last part is queued: END, and the close when FLAGS ask (mu held). */
static void tail_queued(sl_conn_t *c, int flags)
{
    c->resp_done = true;
    if (flags & SL_SEND_CLOSE)
        c->close_after = true;
    c->pump->exec->notify(c);
}

int sl_conn_sendfile(sl_conn_t *c, uint32_t gen, int fd, off_t off, size_t len,
                     int flags)
{
    int rc = 0;

    pthread_mutex_lock(&c->mu);
    if (tail_allowed(c, gen)) {
        c->file_fd = fd;
        c->file_off = off;
        c->file_len = len;
        tail_queued(c, flags);
    } else {
        close(fd);
        rc = -1;
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int sl_conn_sendmem(sl_conn_t *c, uint32_t gen, const void *mem, size_t len,
                    void *owner, int flags)
{
    int rc = 0;

    pthread_mutex_lock(&c->mu);
    if (tail_allowed(c, gen)) {
        c->mem = mem;
        c->mem_len = len;
        c->mem_owner = owner;
        tail_queued(c, flags);
    } else {
        rc = -1;
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

long sl_conn_read_body(sl_conn_t *c, uint32_t gen, char *dst, size_t n,
                       bool stop_at_lf, bool wait)
{
    sl_buf_t *b = &c->body;
    long rc;
    size_t avail;
    char *nl;

    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (c->gen != gen) {
            rc = -1;
            goto out_unlock;
        }
        if (sl_buf_pending(b) > 0 || n == 0)
            break;
        if (c->body_done) {
            rc = 0;
            goto out_unlock;
        }
        if (c->aborted) {
            rc = -1;
            goto out_unlock;
        }
        if (!wait) {
            rc = -2;
            goto out_unlock;
        }
        if (c->pump->exec->wait(c, SL_AWAIT_BODY) < 0) {
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
    if (c->body_paused && sl_buf_pending(b) < SL_CONN_BODY_WINDOW / 2 &&
        !c->body_done) {
        c->body_paused = false;
        c->pump->exec->notify(c);
    }
out_unlock:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

bool sl_conn_must_close(sl_conn_t *c, uint32_t gen)
{
    return sl_drain_closing(&c->pump->drain) ||
           (c->req.has_body && sl_conn_body_left(c, gen) > SL_CONN_DISCARD_MAX);
}
