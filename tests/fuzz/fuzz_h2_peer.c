/* fuzz_h2_peer.c - fuzz_h2's stand-in for the rest of the worker around
 * the HTTP/2 session, and the client at the other end of its socket
 * (fuzz_h2.c says what they are for): the executor table, the pump's
 * part (tickets, completions, the pass's end), the client's writes and
 * reads and what it checks of the server's frames, a run's beginning and
 * end.
 */
#include "config.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <nghttp2/nghttp2.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/fuzz/fuzz_h2.h"
#include "worker/loop/h2.h"
#include "worker/loop/h2_internal.h" /* the session's nghttp2_session */

/* Rounds of io a piece of input may take before the session is said to
 * hang (it reads 8 chunks of 16 KiB a round at most). */
#define ROUNDS_MAX 10000

/* A body read at the end, at most (what is past it is told as a count). */
#define BODY_MAX 65536

/* A response larger than a stream's first window (65535). */
#define BIG_BODY 70000

fz_run_t fz_run;

/* ------------------------------------------------------------------ */
/* the executor                                                       */

static void tell(sl_buf_t *b, const void *p, size_t n)
{
    if (n == 0)
        return; /* P may be NULL: an empty buffer */
    CHECK(sl_buf_append(b, p, n) == 0);
}

static void tell_num(sl_buf_t *b, char tag, unsigned long long v)
{
    char s[32];
    int n = snprintf(s, sizeof(s), "%c%llu ", tag, v);

    tell(b, s, (size_t)n);
}

/* A slice of the request's head buffer, checked to be inside it. */
static void tell_slice(sl_buf_t *b, const sl_req_t *q, char tag, uint32_t off,
                       uint32_t len)
{
    CHECK((size_t)off + len <= q->hbuf.len);
    tell_num(b, tag, len);
    tell(b, q->hbuf.data + off, len);
}

/* The executor is given X: its head as the executors see it. */
static void take_request(sl_exch_t *x)
{
    const sl_req_t *q = &x->req;
    const sl_options_t *o = fz_run.p->pump.opt;
    held_t *h;
    char addr[SL_CLIENT_ADDR_MAX];
    int port, i;

    if (fz_run.nheld == fz_run.held_cap) {
        uint32_t cap = fz_run.held_cap * 2 + 16;
        fz_run.held = realloc(fz_run.held, cap * sizeof(*fz_run.held));
        CHECK(fz_run.held != NULL);
        memset(fz_run.held + fz_run.held_cap, 0,
               (cap - fz_run.held_cap) * sizeof(*fz_run.held));
        fz_run.held_cap = cap;
    }
    CHECK(sl_exch_is_stream(x));
    CHECK(x->conn == fz_run.c);
    h = &fz_run.held[fz_run.nheld++];
    h->x = x;
    h->gen = x->gen;
    h->head.len = h->head.off = 0;
    h->answered = false;
    sl_exch_started(x, x->gen);
    tell_num(&h->head, 'M', (unsigned)q->method);
    CHECK(q->method_len > 0 && q->url_len > 0);
    tell_slice(&h->head, q, 'm', q->method_off, q->method_len);
    tell_slice(&h->head, q, 'U', q->url_off, q->url_len);
    CHECK(q->major == 2 && q->minor == 0 && q->keep_alive);
    tell_num(&h->head, 'F',
             q->has_body * 1u + q->chunked * 2u + q->expect_continue * 4u +
                 q->head * 8u);
    if (q->has_body && !q->chunked) {
        tell_num(&h->head, 'L', q->content_length);
        if (o->limit_request_body > 0)
            CHECK(q->content_length <= (uint64_t)o->limit_request_body);
    }
    CHECK(q->nhdrs >= 0 && q->nhdrs <= o->limit_request_fields);
    for (i = 0; i < q->nhdrs; i++) {
        tell_slice(&h->head, q, 'H', q->hdrs[i].name_off, q->hdrs[i].name_len);
        tell_slice(&h->head, q, ':', q->hdrs[i].val_off, q->hdrs[i].val_len);
    }
    sl_exch_client(x, addr, sizeof(addr), &port);
    CHECK(memchr(addr, '\0', sizeof(addr)) != NULL);
    tell(&h->head, addr, strlen(addr) + 1);
    tell_num(&h->head, 'P', (unsigned)port);
    tell(&h->head, sl_exch_scheme(x), strlen(sl_exch_scheme(x)) + 1);
}

static void respond(sl_exch_t *x, uint32_t gen, unsigned k);

/* The Kth request held: its body read (without waiting), what it is
 * told, and its answer. */
static void answer(unsigned k)
{
    static char body[BODY_MAX];
    held_t *h = &fz_run.held[k];
    story_t *st = fz_run.story;
    size_t got = 0;
    long rc;

    while ((rc = sl_exch_read_body(h->x, h->gen, body + got, BODY_MAX - got,
                                   false, false)) > 0)
        got += (size_t)rc;
    if (rc == -1 || h->x->aborted || h->x->peer_gone) {
        st->gone++;
    } else {
        tell(&st->text, h->head.data, h->head.len);
        tell_num(&st->text, rc == 0 ? 'B' : 'b', got);
        tell(&st->text, body, got);
    }
    h->answered = true;
    /* the shape by stream id: which requests reach the executor may
     * depend on the reads (one reset before its dispatch does not), its
     * id does not */
    respond(h->x, h->gen, (unsigned)((sl_h2_stream_t *)h->x)->sid / 2);
}

/* on-loop: run() is the dispatch; the answer waits for the input's end,
 * or comes now (EXEC_ATONCE) */
void fz_exec_run(sl_exch_t *x)
{
    take_request(x);
    if (fz_run.p->exec.notify != sl_h2_inline_notify)
        return;
    /* an answer before the input is over races with it: what the body
     * had so far, a stream ended early */
    if (!fz_run.input_over)
        fz_run.story->raced = true;
    answer(fz_run.nheld - 1);
}

/* Something for the loop on X (mu held): applied by pump_round(). */
void fz_exec_notify(sl_exch_t *x)
{
    if (x->notified)
        return;
    x->notified = true;
    CHECK(fz_run.ndone < fz_run.p->pump.h2s.max);
    fz_run.done[fz_run.ndone++] = x;
}

void fz_exec_wake(sl_exch_t *x)
{
    (void)x; /* the executor never waits */
}

int fz_exec_wait(sl_exch_t *x, int what)
{
    (void)x;
    (void)what;
    CHECK(!"a blocking wait");
    return -1;
}

void fz_exec_release(void *owner)
{
    CHECK(owner == &fz_run.lent);
    fz_run.released++;
}

/* The session refuses a stream it has no slot for (h2.c,
 * on_begin_headers()): its RST_STREAM may never be written when the
 * session ends in the same read, so the call itself is watched. This
 * definition comes before libnghttp2's for the objects linked in here. */
int nghttp2_submit_rst_stream(nghttp2_session *ng, uint8_t flags, int32_t sid,
                              uint32_t code)
{
    static int (*real)(nghttp2_session *, uint8_t, int32_t, uint32_t);

    if (real == NULL) {
        *(void **)&real = dlsym(RTLD_NEXT, "nghttp2_submit_rst_stream");
        CHECK(real != NULL);
    }
    if (code == NGHTTP2_REFUSED_STREAM && fz_run.story != NULL)
        fz_run.story->refused = true;
    return real(ng, flags, sid, code);
}

/* ------------------------------------------------------------------ */
/* the pump's part                                                    */

/* The session's SUBMIT tickets of this pass (handoff executors). */
static void take_tickets(sl_pump_t *p)
{
    uint32_t i;

    for (i = 0; i < p->npending; i++) {
        sl_exch_t *x = sl_pump_exch(p, p->pending[i].idx);
        if (p->pending[i].kind != SL_TICKET_SUBMIT)
            continue;
        CHECK(x->gen == p->pending[i].gen);
        take_request(x);
    }
    p->npending = 0;
}

/* The executor's completions, then the sessions' writes (wake_cb, then
 * the prepare watcher's sl_h2_flush()). */
static void take_done(sl_pump_t *p)
{
    uint32_t i, n;

    while ((n = fz_run.ndone) > 0) {
        sl_exch_t *batch[n];
        memcpy(batch, fz_run.done, n * sizeof(*batch));
        fz_run.ndone = 0;
        for (i = 0; i < n; i++) {
            /* the pump's inbox: the flag goes as the ticket is taken */
            pthread_mutex_lock(&batch[i]->mu);
            batch[i]->notified = false;
            pthread_mutex_unlock(&batch[i]->mu);
            if (p->exec->on_loop)
                sl_exec_complete(batch[i]);
            else
                sl_h2_complete(batch[i]);
        }
    }
    if (p->h2dirty != NULL)
        sl_h2_flush(p);
}

/* ------------------------------------------------------------------ */
/* the client's end                                                   */

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

/* The frames the server wrote: what a client may expect of them. */
static void server_frames(void)
{
    sl_buf_t *b = &fz_run.rx;

    while (sl_buf_pending(b) >= 9) {
        const uint8_t *f = (const uint8_t *)b->data + b->off;
        uint32_t len = fz_be24(f), sid = be32(f + 5);
        uint8_t type = f[3];

        if (sl_buf_pending(b) < 9 + (size_t)len)
            break;
        CHECK(!(sid & 0x80000000u)); /* the reserved bit */
        if (!fz_run.settings_first) {
            CHECK(type == NGHTTP2_SETTINGS && !(f[4] & NGHTTP2_FLAG_ACK));
            fz_run.settings_first = true;
        }
        if (!fz_run.input_over &&
            (type == NGHTTP2_RST_STREAM ||
             ((type == NGHTTP2_HEADERS || type == NGHTTP2_DATA) &&
              (f[4] & NGHTTP2_FLAG_END_STREAM))))
            fz_run.story->raced = true;
        switch (type) {
        case NGHTTP2_DATA:
        case NGHTTP2_HEADERS:
        case NGHTTP2_CONTINUATION:
            CHECK(sid != 0 && sid % 2 == 1); /* the client's streams */
            CHECK(len <= 16384);             /* the client's frame size */
            break;
        case NGHTTP2_RST_STREAM:
            CHECK(sid != 0 && len == 4);
            if (be32(f + 9) == NGHTTP2_REFUSED_STREAM)
                fz_run.story->refused = true;
            break;
        case NGHTTP2_SETTINGS:
        case NGHTTP2_PING:
            CHECK(sid == 0);
            break;
        case NGHTTP2_GOAWAY:
            CHECK(sid == 0 && len >= 8);
            fz_run.story->goaway = (int)be32(f + 13);
            break;
        case NGHTTP2_WINDOW_UPDATE:
            CHECK(len == 4 && (be32(f + 9) & 0x7fffffffu) != 0);
            break;
        default:
            CHECK(!"a frame a server does not send");
        }
        sl_buf_consume(b, 9 + len);
    }
    sl_buf_compact(b);
}

/* Read what the server wrote, so that it never blocks. */
static void drain_client(void)
{
    char tmp[65536];
    ssize_t n;

    while ((n = read(fz_run.fd, tmp, sizeof(tmp))) > 0)
        tell(&fz_run.rx, tmp, (size_t)n);
    CHECK(n == 0 || errno == EAGAIN || errno == ECONNRESET);
    server_frames();
}

static bool alive(void)
{
    return fz_run.c->state != SL_CONN_FREE;
}

/* What the loop would do until it would wait: the session's io while
 * its socket is ready for what it watches, the executor's tickets and
 * completions. */
static void pump_round(void)
{
    sl_conn_t *c = fz_run.c;
    sl_pump_t *p = &fz_run.p->pump;
    int rounds, ready, unread;

    for (rounds = 0;; rounds++) {
        CHECK(rounds < ROUNDS_MAX);
        take_tickets(p);
        take_done(p);
        drain_client();
        if (!alive())
            return;
        ready = 0;
        if (ev_is_active(&c->io)) {
            CHECK(c->io.fd == c->tp.fd);
            if ((c->io.events & EV_READ) &&
                ioctl(c->tp.fd, FIONREAD, &unread) == 0 && unread > 0)
                ready |= EV_READ;
            if (c->io.events & EV_WRITE)
                ready |= EV_WRITE; /* drained: there is room */
        }
        if (ready == 0 && p->npending == 0 && fz_run.ndone == 0)
            return;
        if (ready != 0)
            c->sess->io(c, sl_transport_ready(&c->tp, ready));
    }
}

/* One piece of the input, as one write of the client. */
void fz_feed(const uint8_t *d, size_t n)
{
    size_t off = 0;
    ssize_t k;

    if (fz_run.stalled) {
        tell(&fz_run.backlog, d, n);
        return;
    }
    while (off < n && alive()) {
        k = send(fz_run.fd, d + off, n - off, MSG_NOSIGNAL);
        if (k < 0) {
            CHECK(errno == EAGAIN || errno == EPIPE || errno == ECONNRESET);
            if (errno != EAGAIN)
                return; /* the server closed its end */
        } else {
            off += (size_t)k;
        }
        pump_round();
        if (k < 0 && alive() &&
            !(ev_is_active(&fz_run.c->io) && (fz_run.c->io.events & EV_READ))) {
            /* the socket is full (a small write takes a lot of its
             * room) and the session reads no more for now (it waits for
             * the executor): the rest waits for the input's end, as it
             * would wait in the socket had it been written at once */
            fz_run.stalled = true;
            tell(&fz_run.backlog, d + off, n - off);
            return;
        }
    }
}

/* ------------------------------------------------------------------ */
/* a run                                                              */

void fz_pool_changed(sl_pool_t *pool, bool released)
{
    (void)pool;
    (void)released;
}

void fz_begin(profile_t *p, story_t *story)
{
    struct sockaddr_in in = {.sin_family = AF_INET,
                             .sin_port = htons(40000),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int sv[2];
    sl_conn_t *c;

    story->text.len = story->text.off = 0;
    story->goaway = -1;
    story->closed = false;
    story->gone = story->served = 0;
    story->raced = false;
    story->refused = false;
    fz_run.input_over = false;
    fz_run.stalled = false;
    fz_run.backlog.len = fz_run.backlog.off = 0;
    fz_run.p = p;
    fz_run.story = story;
    fz_run.nheld = fz_run.ndone = 0;
    fz_run.rx.len = fz_run.rx.off = 0;
    fz_run.settings_first = false;
    fz_run.lent = fz_run.released = 0;
    p->pump.served = 0;
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
                     sv) == 0);
    fz_run.fd = sv[0];
    c = sl_pool_take(&p->pump.pool);
    CHECK(c == &p->pump.pool.conns[0]);
    sl_pool_activate(&p->pump.pool, c);
    fz_run.c = c;
    sl_conn_start(c, sv[1], 0, (const struct sockaddr *)&in, sizeof(in));
    /* what HTTP/1.1's session read: the preface */
    sl_conn_buf_ready(c, &c->rbuf);
    tell(&c->rbuf, SL_H2_PREFACE, SL_H2_PREFACE_LEN);
    sl_h2_start(c);
    pump_round();
}

/* A response as an executor writes it, its shape chosen by K. */
static void respond(sl_exch_t *x, uint32_t gen, unsigned k)
{
    static const char sized[] = "HTTP/1.1 200 OK\r\n"
                                "Content-Type: text/plain\r\n"
                                "Content-Length: 2\r\n"
                                "\r\n"
                                "ok";
    static const char chunked[] = "HTTP/1.1 200 OK\r\n"
                                  "Transfer-Encoding: chunked\r\n"
                                  "Connection: keep-alive\r\n"
                                  "Trailer: X-Sum\r\n"
                                  "\r\n"
                                  "3\r\nabc\r\n"
                                  "2;ext=1\r\nde\r\n"
                                  "0\r\n"
                                  "X-Sum: 5\r\n"
                                  "\r\n";
    static const char empty[] = "HTTP/1.1 204 No Content\r\n"
                                "Set-Cookie: a=1\r\n"
                                "Set-Cookie: b=2\r\n"
                                "\r\n";
    static const char lent_head[] = "HTTP/1.1 200 OK\r\n"
                                    "Content-Length: 5\r\n"
                                    "\r\n";
    static const char file_head[] = "HTTP/1.1 201 Created\r\n"
                                    "Content-Length: 7\r\n"
                                    "\r\n";
    static char big[BIG_BODY + 64];
    struct iovec iov;
    int fd, n;

    switch (k % 6) {
    case 0:
        iov = (struct iovec){(void *)sized, sizeof(sized) - 1};
        (void)sl_exch_send(x, gen, &iov, 1, SL_SEND_END);
        return;
    case 1:
        /* in two parts: the head, then the body */
        iov = (struct iovec){(void *)chunked, 70};
        (void)sl_exch_send(x, gen, &iov, 1, 0);
        iov = (struct iovec){(void *)(chunked + 70), sizeof(chunked) - 71};
        (void)sl_exch_send(x, gen, &iov, 1, SL_SEND_END);
        return;
    case 2:
        iov = (struct iovec){(void *)empty, sizeof(empty) - 1};
        (void)sl_exch_send(x, gen, &iov, 1, SL_SEND_END);
        return;
    case 3:
        iov = (struct iovec){(void *)lent_head, sizeof(lent_head) - 1};
        if (sl_exch_send(x, gen, &iov, 1, 0) == 0 &&
            sl_exch_sendmem(x, gen, "lent!", 5, &fz_run.lent, SL_SEND_END) ==
                0) {
            fz_run.lent++;
            return;
        }
        (void)sl_exch_send(x, gen, NULL, 0, SL_SEND_END);
        return;
    case 4:
        iov = (struct iovec){(void *)file_head, sizeof(file_head) - 1};
        fd = memfd_create("fuzz_h2", MFD_CLOEXEC);
        CHECK(fd >= 0);
        CHECK(write(fd, "a file\n", 7) == 7);
        if (sl_exch_send(x, gen, &iov, 1, 0) != 0) {
            close(fd);
            (void)sl_exch_send(x, gen, NULL, 0, SL_SEND_END);
            return;
        }
        (void)sl_exch_sendfile(x, gen, fd, 0, 7, SL_SEND_END);
        return;
    default:
        n = snprintf(big, sizeof(big),
                     "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", BIG_BODY);
        memset(big + n, 'b', BIG_BODY);
        iov = (struct iovec){big, (size_t)n + BIG_BODY};
        (void)sl_exch_send(x, gen, &iov, 1, SL_SEND_END);
        return;
    }
}

/* The input is over: the executor reads and answers what it holds, the
 * session runs out, and the story ends. */
void fz_end(void)
{
    story_t *st = fz_run.story;
    uint32_t i = 0, k;
    int rounds;

    pump_round();
    /* no executor is left waiting for a body that will never come (it
     * would wait for good): a body not whole yet has an open stream on a
     * session that reads */
    for (k = 0; k < fz_run.nheld && alive(); k++) {
        const sl_exch_t *x = fz_run.held[k].x;
        if (fz_run.held[k].answered || x->body_done || x->aborted)
            continue;
        CHECK(nghttp2_session_want_read(fz_run.c->h2->ng));
        CHECK(!((const sl_h2_stream_t *)x)->closed);
    }
    if (fz_run.p->def->drain && alive()) {
        sl_conn_going_away(fz_run.c, 1001);
        pump_round();
    }
    for (;;) {
        sl_buf_t rest;
        /* requests may still come as the session reads on (it stopped
         * while the executor had some): answered too */
        for (; i < fz_run.nheld; i++) {
            if (fz_run.held[i].answered)
                continue;
            answer(i);
            /* the pass's end: what it queued is taken (the handoff's
             * inbox, the inline executor's dirty list) */
            pump_round();
        }
        pump_round();
        if (!fz_run.stalled || !alive())
            break;
        /* what could not be written: the session may read on now */
        rest = fz_run.backlog;
        memset(&fz_run.backlog, 0, sizeof(fz_run.backlog));
        fz_run.stalled = false;
        fz_feed((const uint8_t *)rest.data, rest.len);
        if (fz_run.stalled && fz_run.backlog.len == rest.len) {
            sl_buf_free(&rest);
            break; /* it reads no more: the rest stays unread */
        }
        sl_buf_free(&rest);
    }
    /* time passes: the drain's steps, or the sweep's deadlines */
    for (rounds = 1; rounds <= 3 && alive(); rounds++) {
        ev_tstamp later = ev_now(fz_run.p->pump.loop) + 1000.0 * rounds;
        if (fz_run.p->def->drain)
            (void)sl_conn_drain(fz_run.c, later, 0.1);
        else
            sl_conn_sweep(fz_run.c, later);
        pump_round();
    }
    st->closed = !alive();
    st->served = (unsigned)fz_run.p->pump.served;
    /* the client leaves: everything must be given back */
    shutdown(fz_run.fd, SHUT_WR);
    for (rounds = 0; alive(); rounds++) {
        CHECK(rounds < 8);
        pump_round();
        if (alive())
            fz_run.c->sess->io(fz_run.c, EV_READ);
    }
    close(fz_run.fd);
    for (i = 0; i < fz_run.nheld; i++)
        sl_buf_free(&fz_run.held[i].head);
    CHECK(fz_run.p->pump.h2live == 0);
    CHECK(fz_run.p->pump.h2sessions == 0);
    CHECK(fz_run.p->pump.inflight == 0);
    CHECK(fz_run.p->pump.h2dirty == NULL);
    CHECK(fz_run.p->pump.pool.nactive == 0);
    CHECK(fz_run.released == fz_run.lent);
    CHECK(fz_run.c->h2 == NULL);
}
