/* fuzz_h2.c - a libFuzzer target for the HTTP/2 session (h2.c,
 * h2_stream.c) over libnghttp2: a real session on a real sl_conn_t whose
 * plain transport is one end of a socketpair, the harness the client at
 * the other end.
 *
 * The property, beyond "no crash, no leak": what the session makes of a
 * client's byte stream does not depend on how the stream was cut into
 * reads. The input (after the client's preface, which the harness sends
 * first) is written to the socket whole, then cut in two at every byte
 * (inputs up to SPLIT_ALL bytes; longer ones at SPLIT_SOME points the
 * input's seed chooses), then in chunks of seeded sizes, then byte by
 * byte (up to BYTEWISE bytes), the session's io called after each piece;
 * every run must tell the same story: the same requests as the executor
 * sees them (method, target, fields, framing, client, body bytes and how
 * the body ended), the same GOAWAY error code, the same end (the
 * connection closed, or alive).
 *
 * The executor answers nothing until the input is over (but in one
 * profile, below): a server that answers while the client still sends
 * legitimately makes of the rest what the timing allows (a stream it
 * reset ignores the client's late frames, one it answered frees a slot
 * for the next), and that is no property of the cuts. Then every request
 * it holds reads its body (without waiting) and is answered (a response
 * shape the request's index picks: sized, chunked with trailers, no body,
 * lent bytes, a file, one larger than a stream's first window), time
 * passes (the drain's steps, or the 1 Hz sweep far in the future), the
 * story's end is told, and the client closes its end: every stream,
 * buffer, lent block and descriptor must be given back, and the frames
 * the server wrote must be ones a server may send.
 *
 * What the story leaves out, since the timing decides it, not the bytes:
 * - a request the client reset (RST_STREAM, with any code), or whose
 *   connection failed, before the executor answered: whether it reached
 *   the executor at all depends on whether the session dispatched it
 *   before the reset came (a reset stream still queued is never
 *   dispatched), so requests the executor sees aborted or left
 *   (peer_gone) when it answers are not told, only counted;
 * - a run where the server ended a stream (its answer, a reset) before
 *   the input was over, where ENHANCE_YOUR_CALM ended one run and not
 *   the other, or where a stream was refused for want of a slot
 *   (agree() says why): it is let go, counted (FUZZ_RACES=1
 *   shows each), and a crash, a leak or a broken invariant in it still
 *   counts;
 * - libnghttp2's count of CONTINUATION frames, which depends on the
 *   reads (continuation_split()).
 * The loop's time stands still (the ev_now() of a loop that never runs;
 * an on-loop dispatch moves it on by the little a run takes), so the
 * per-second budgets of h2.c count alike whatever the cuts.
 *
 * What stands in for the rest of the worker: the pump's fields the
 * session reads (options, the stream table of sl_h2_streams_init(), the
 * buffer cache, a pool of one connection), and an executor table in one
 * of three shapes: a handoff executor (lanes: the session's SUBMIT
 * tickets are taken from the pump's batch, its completions go through
 * sl_h2_complete() and sl_h2_flush() as the pump's wake_cb and prepare
 * do), an on-loop one that does not block (ASGI inline: run() is called
 * from the dispatch, completions through sl_exec_complete()), and an
 * on-loop one that answers in run() (WSGI inline, its output sent as it
 * is queued by sl_h2_inline_notify(); it never waits for the body, which
 * would block on the socket).
 *
 * Input: byte 0 chooses the profile (options and executor, below), byte
 * 1 seeds the cuts, the rest is what the client sends after its preface.
 * Built by a --enable-fuzzing configuration (tests/fuzz/run.sh).
 */
#include "config.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/options.h"
#include "worker/loop/conn.h"
#include "worker/loop/exec.h"
#include "worker/loop/h2.h"
#include "worker/loop/h2_internal.h" /* the session's nghttp2_session */
#include "worker/loop/pump.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_h2: %s:%d: %s\n", __FILE__, __LINE__,        \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

#define SPLIT_ALL  96  /* inputs this short are cut at every byte */
#define SPLIT_SOME 24  /* cut points tried in a longer one */
#define BYTEWISE   512 /* inputs this short are also fed byte by byte */

/* Rounds of io a piece of input may take before the session is said to
 * hang (it reads 8 chunks of 16 KiB a round at most). */
#define ROUNDS_MAX 10000

/* A body read at the end, at most (what is past it is told as a count). */
#define BODY_MAX 65536

/* A response larger than a stream's first window (65535). */
#define BIG_BODY 70000

/* The executor: lanes (handoff), ASGI inline (on the loop, answers
 * later), WSGI inline (on the loop, answers in run(), its output sent as
 * it is queued: sl_h2_inline_notify()). */
enum { EXEC_HANDOFF, EXEC_ONLOOP, EXEC_ATONCE };

/* The profiles byte 0 chooses from. */
typedef struct {
    const char *args[24];
    int exec;   /* EXEC_* */
    bool drain; /* at the input's end the worker drains (GOAWAY notice,
                   its PING, the last GOAWAY); else the 1 Hz sweep runs
                   far in the future (keep-alive, send and header
                   timeouts) after the answers */
} profile_def_t;

static const profile_def_t defs[] = {
    /* the defaults, lanes */
    {{NULL}, EXEC_HANDOFF, false},
    /* the defaults, ASGI inline */
    {{NULL}, EXEC_ONLOOP, true},
    /* tight limits: a window, a header list, fields, a body a few bytes
     * away; two streams at once */
    {{"--http2-max-concurrent-streams", "2", "--http2-initial-window-size",
      "48", "--http2-max-header-list-size", "300", "--limit-request-fields",
      "4", "--limit-request-field-size", "64", "--limit-request-line", "40",
      "--limit-request-body", "24", NULL},
     EXEC_HANDOFF,
     false},
    /* the loop's own answers (a health path) and a trusted proxy's
     * headers applied */
    {{"--health-path", "/healthz", "--forwarded-allow-ips", "127.0.0.1",
      "--http2-max-concurrent-streams", "5", NULL},
     EXEC_ONLOOP,
     true},
    /* an app that answers at once, whatever of the body is there: the
     * story is held to the whole input's only when no request came
     * before the input's last piece (below, exec_run()) */
    {{"--http2-max-concurrent-streams", "3", "--http2-initial-window-size",
      "100", NULL},
     EXEC_ATONCE,
     false},
};
#define NPROFILES (sizeof(defs) / sizeof(defs[0]))

typedef struct {
    sl_options_t opt;
    sl_exec_t exec;
    sl_pump_t pump;
} profile_t;

static profile_t prof[NPROFILES];
static struct ev_loop *loop;

/* A request the executor holds until the input is over. */
typedef struct {
    sl_exch_t *x;
    uint32_t gen;
    sl_buf_t head; /* what it was given, told at the end */
    bool answered;
} held_t;

/* What a run made of the input. */
typedef struct {
    sl_buf_t text;   /* the requests, in a form memcmp can compare */
    int goaway;      /* the last GOAWAY's error code, -1: none */
    bool closed;     /* the connection closed before the client did */
    unsigned gone;   /* requests the executor saw aborted (not told) */
    unsigned served; /* requests answered, by the executor or the loop */
    bool raced;      /* a stream ended by the server before the input did */
    bool refused;    /* a stream was refused (RST_STREAM REFUSED_STREAM) */
    bool split_cont; /* a cut fell inside a CONTINUATION frame's header */
} story_t;

/* The run under way (one at a time). */
static struct {
    profile_t *p;
    sl_conn_t *c;
    int fd; /* the client's end */
    story_t *story;
    held_t *held; /* every request the executor was given, in order */
    uint32_t nheld, held_cap;
    sl_exch_t **done; /* completions to apply: h2max entries */
    uint32_t ndone;
    sl_buf_t rx; /* what the server wrote, frames not yet whole */
    bool settings_first;
    bool input_over;  /* the last piece of the input is written */
    bool stalled;     /* the socket is full and the session does not read */
    sl_buf_t backlog; /* the input not written yet, when stalled */
    unsigned lent, released;
} run;

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
    const sl_options_t *o = run.p->pump.opt;
    held_t *h;
    char addr[SL_CLIENT_ADDR_MAX];
    int port, i;

    if (run.nheld == run.held_cap) {
        uint32_t cap = run.held_cap * 2 + 16;
        run.held = realloc(run.held, cap * sizeof(*run.held));
        CHECK(run.held != NULL);
        memset(run.held + run.held_cap, 0,
               (cap - run.held_cap) * sizeof(*run.held));
        run.held_cap = cap;
    }
    CHECK(sl_exch_is_stream(x));
    CHECK(x->conn == run.c);
    h = &run.held[run.nheld++];
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
    held_t *h = &run.held[k];
    story_t *st = run.story;
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
    respond(h->x, h->gen, k);
}

/* on-loop: run() is the dispatch; the answer waits for the input's end,
 * or comes now (EXEC_ATONCE) */
static void exec_run(sl_exch_t *x)
{
    take_request(x);
    if (run.p->exec.notify != sl_h2_inline_notify)
        return;
    /* an answer before the input is over races with it: what the body
     * had so far, a stream ended early */
    if (!run.input_over)
        run.story->raced = true;
    answer(run.nheld - 1);
}

/* Something for the loop on X (mu held): applied by pump_round(). */
static void exec_notify(sl_exch_t *x)
{
    if (x->notified)
        return;
    x->notified = true;
    CHECK(run.ndone < run.p->pump.h2max);
    run.done[run.ndone++] = x;
}

static void exec_wake(sl_exch_t *x)
{
    (void)x; /* the executor never waits */
}

static int exec_wait(sl_exch_t *x, int what)
{
    (void)x;
    (void)what;
    CHECK(!"a blocking wait");
    return -1;
}

static void exec_release(void *owner)
{
    CHECK(owner == &run.lent);
    run.released++;
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
    if (code == NGHTTP2_REFUSED_STREAM && run.story != NULL)
        run.story->refused = true;
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

    while ((n = run.ndone) > 0) {
        sl_exch_t *batch[n];
        memcpy(batch, run.done, n * sizeof(*batch));
        run.ndone = 0;
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

static uint32_t be24(const uint8_t *p)
{
    return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

/* The frames the server wrote: what a client may expect of them. */
static void server_frames(void)
{
    sl_buf_t *b = &run.rx;

    while (sl_buf_pending(b) >= 9) {
        const uint8_t *f = (const uint8_t *)b->data + b->off;
        uint32_t len = be24(f), sid = be32(f + 5);
        uint8_t type = f[3];

        if (sl_buf_pending(b) < 9 + (size_t)len)
            break;
        CHECK(!(sid & 0x80000000u)); /* the reserved bit */
        if (!run.settings_first) {
            CHECK(type == NGHTTP2_SETTINGS && !(f[4] & NGHTTP2_FLAG_ACK));
            run.settings_first = true;
        }
        if (!run.input_over &&
            (type == NGHTTP2_RST_STREAM ||
             ((type == NGHTTP2_HEADERS || type == NGHTTP2_DATA) &&
              (f[4] & NGHTTP2_FLAG_END_STREAM))))
            run.story->raced = true;
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
                run.story->refused = true;
            break;
        case NGHTTP2_SETTINGS:
        case NGHTTP2_PING:
            CHECK(sid == 0);
            break;
        case NGHTTP2_GOAWAY:
            CHECK(sid == 0 && len >= 8);
            run.story->goaway = (int)be32(f + 13);
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

    while ((n = read(run.fd, tmp, sizeof(tmp))) > 0)
        tell(&run.rx, tmp, (size_t)n);
    CHECK(n == 0 || errno == EAGAIN || errno == ECONNRESET);
    server_frames();
}

static bool alive(void)
{
    return run.c->state != SL_CONN_FREE;
}

/* What the loop would do until it would wait: the session's io while
 * its socket is ready for what it watches, the executor's tickets and
 * completions. */
static void pump_round(void)
{
    sl_conn_t *c = run.c;
    sl_pump_t *p = &run.p->pump;
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
        if (ready == 0 && p->npending == 0 && run.ndone == 0)
            return;
        if (ready != 0)
            c->sess->io(c, sl_transport_ready(&c->tp, ready));
    }
}

/* One piece of the input, as one write of the client. */
static void feed(const uint8_t *d, size_t n)
{
    size_t off = 0;
    ssize_t k;

    if (run.stalled) {
        tell(&run.backlog, d, n);
        return;
    }
    while (off < n && alive()) {
        k = send(run.fd, d + off, n - off, MSG_NOSIGNAL);
        if (k < 0) {
            CHECK(errno == EAGAIN || errno == EPIPE || errno == ECONNRESET);
            if (errno != EAGAIN)
                return; /* the server closed its end */
        } else {
            off += (size_t)k;
        }
        pump_round();
        if (k < 0 && alive() &&
            !(ev_is_active(&run.c->io) && (run.c->io.events & EV_READ))) {
            /* the socket is full (a small write takes a lot of its
             * room) and the session reads no more for now (it waits for
             * the executor): the rest waits for the input's end, as it
             * would wait in the socket had it been written at once */
            run.stalled = true;
            tell(&run.backlog, d + off, n - off);
            return;
        }
    }
}

/* ------------------------------------------------------------------ */
/* a run                                                              */

static void pool_changed(sl_pool_t *pool, bool released)
{
    (void)pool;
    (void)released;
}

static int probe_fd(void)
{
    int fd = dup(2);

    CHECK(fd >= 0);
    close(fd);
    return fd;
}

static void run_begin(profile_t *p, story_t *story)
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
    run.input_over = false;
    run.stalled = false;
    run.backlog.len = run.backlog.off = 0;
    run.p = p;
    run.story = story;
    run.nheld = run.ndone = 0;
    run.rx.len = run.rx.off = 0;
    run.settings_first = false;
    run.lent = run.released = 0;
    p->pump.served = 0;
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
                     sv) == 0);
    run.fd = sv[0];
    c = sl_pool_take(&p->pump.pool);
    CHECK(c == &p->pump.pool.conns[0]);
    sl_pool_activate(&p->pump.pool, c);
    run.c = c;
    sl_conn_start(c, sv[1], 0, (const struct sockaddr *)&in, sizeof(in));
    /* what HTTP/1.1's session read: the preface */
    sl_conn_buf_ready(c, &c->rbuf);
    tell(&c->rbuf, SL_H2_PREFACE, SL_H2_PREFACE_LEN);
    sl_h2_start(c);
    pump_round();
}

/* The response to the Kth request held, as an executor writes it. */
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
            sl_exch_sendmem(x, gen, "lent!", 5, &run.lent, SL_SEND_END) == 0) {
            run.lent++;
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
static void run_end(void)
{
    story_t *st = run.story;
    uint32_t i = 0, k;
    int rounds;

    pump_round();
    /* no executor is left waiting for a body that will never come (it
     * would wait for good): a body not whole yet has an open stream on a
     * session that reads */
    for (k = 0; k < run.nheld && alive(); k++) {
        const sl_exch_t *x = run.held[k].x;
        if (run.held[k].answered || x->body_done || x->aborted)
            continue;
        CHECK(nghttp2_session_want_read(run.c->h2->ng));
        CHECK(!((const sl_h2_stream_t *)x)->closed);
    }
    if (defs[run.p - prof].drain && alive()) {
        sl_conn_going_away(run.c, 1001);
        pump_round();
    }
    for (;;) {
        sl_buf_t rest;
        /* requests may still come as the session reads on (it stopped
         * while the executor had some): answered too */
        for (; i < run.nheld; i++) {
            if (run.held[i].answered)
                continue;
            answer(i);
            /* the pass's end: what it queued is taken (the handoff's
             * inbox, the inline executor's dirty list) */
            pump_round();
        }
        pump_round();
        if (!run.stalled || !alive())
            break;
        /* what could not be written: the session may read on now */
        rest = run.backlog;
        memset(&run.backlog, 0, sizeof(run.backlog));
        run.stalled = false;
        feed((const uint8_t *)rest.data, rest.len);
        if (run.stalled && run.backlog.len == rest.len) {
            sl_buf_free(&rest);
            break; /* it reads no more: the rest stays unread */
        }
        sl_buf_free(&rest);
    }
    /* time passes: the drain's steps, or the sweep's deadlines */
    for (rounds = 1; rounds <= 3 && alive(); rounds++) {
        ev_tstamp later = ev_now(loop) + 1000.0 * rounds;
        if (defs[run.p - prof].drain)
            (void)sl_conn_drain(run.c, later, 0.1);
        else
            sl_conn_sweep(run.c, later);
        pump_round();
    }
    st->closed = !alive();
    st->served = (unsigned)run.p->pump.served;
    /* the client leaves: everything must be given back */
    shutdown(run.fd, SHUT_WR);
    for (rounds = 0; alive(); rounds++) {
        CHECK(rounds < 8);
        pump_round();
        if (alive())
            run.c->sess->io(run.c, EV_READ);
    }
    close(run.fd);
    for (i = 0; i < run.nheld; i++)
        sl_buf_free(&run.held[i].head);
    CHECK(run.p->pump.h2live == 0);
    CHECK(run.p->pump.h2sessions == 0);
    CHECK(run.p->pump.inflight == 0);
    CHECK(run.p->pump.h2dirty == NULL);
    CHECK(run.p->pump.pool.nactive == 0);
    CHECK(run.released == run.lent);
    CHECK(run.c->h2 == NULL);
}

/* ------------------------------------------------------------------ */
/* stories                                                            */

static void show(const char *what, const story_t *s)
{
    const sl_buf_t *b = &s->text;
    size_t i;

    fprintf(stderr,
            "%s: goaway %d, %s, %u requests served, %u not told (aborted); "
            "requests (%zu bytes): ",
            what, s->goaway, s->closed ? "closed" : "alive", s->served, s->gone,
            b->len);
    for (i = 0; i < b->len; i++) {
        unsigned char ch = (unsigned char)b->data[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\')
            fputc(ch, stderr);
        else
            fprintf(stderr, "\\x%02x", ch);
    }
    fputc('\n', stderr);
}

static bool same(const story_t *w, const story_t *g)
{
    return w->text.len == g->text.len &&
           (w->text.len == 0 ||
            memcmp(w->text.data, g->text.data, w->text.len) == 0) &&
           w->goaway == g->goaway && w->closed == g->closed;
}

/* Runs compared, and those let go (a race, below). */
static unsigned long long compared, raced;

static void agree(const story_t *want, story_t *got, const char *how,
                  size_t arg)
{
    compared++;
    if (same(want, got))
        return;
    /* The server ended a stream (its answer, a reset) while the client
     * still sent: what comes after may fairly be read otherwise (a slot
     * freed under the concurrency limit, late frames on a closed stream
     * ignored rather than a connection error). Its story is not held to
     * the whole input's; a crash, a leak or a broken invariant still
     * counts. FUZZ_RACES=1 shows them. */
    /* libnghttp2's count of CONTINUATION frames (above): the session
     * ends, without a GOAWAY */
    if (got->split_cont && got->closed && got->goaway == -1 &&
        got->text.len <= want->text.len) {
        compared--;
        return;
    }
    /* Streams the client reset count against a per-second budget, and
     * take a slot until the session frees them, after the read that
     * brought them: within one read the slots run out first (the next
     * streams are refused, not counted), over several reads the budget
     * does (ENHANCE_YOUR_CALM). Either way the flood ends, but how
     * depends on the reads. */
    if ((got->goaway == NGHTTP2_ENHANCE_YOUR_CALM) !=
        (want->goaway == NGHTTP2_ENHANCE_YOUR_CALM))
        got->raced = true;
    /* The same slots decide which streams are refused (REFUSED_STREAM)
     * and which are served. */
    if (got->refused || want->refused)
        got->raced = true;
    if (got->raced) {
        raced++;
        if (getenv("FUZZ_RACES") != NULL) {
            fprintf(stderr, "fuzz_h2: fed %s %zu, a race (%llu of %llu)\n", how,
                    arg, raced, compared);
            show("whole", want);
            show(how, got);
        }
        return;
    }
    fprintf(stderr, "fuzz_h2: fed %s %zu, the story differs\n", how, arg);
    show("whole", want);
    show(how, got);
    abort();
}

static uint32_t next(uint32_t *rng)
{
    *rng = *rng * 1103515245u + 12345u;
    return *rng >> 16;
}

static void report(void)
{
    fprintf(stderr,
            "fuzz_h2: %llu runs compared, %llu of them let go (a race)\n",
            compared, raced);
}

/* ------------------------------------------------------------------ */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    size_t i;

    (void)argc;
    (void)argv;
    loop = ev_loop_new(EVFLAG_AUTO);
    CHECK(loop != NULL);
    atexit(report);
    /* no flood warnings, unless FUZZ_LOG=1 asks */
    sl_log_set_level(getenv("FUZZ_LOG") != NULL ? SL_LOG_DEBUG
                                                : SL_LOG_CRITICAL);
    for (i = 0; i < NPROFILES; i++) {
        profile_t *p = &prof[i];
        sl_pump_t *pump = &p->pump;
        char *args[32] = {"sluice", "--http-protocols", "h2,h1",
                          "--http2-cleartext", "prior-knowledge"};
        int n = 5;

        for (int k = 0; defs[i].args[k] != NULL; k++)
            args[n++] = (char *)defs[i].args[k];
        args[n++] = "app:app";
        CHECK(sl_options_parse(&p->opt, n, args) == 0);
        p->exec.name = "fuzz";
        p->exec.on_loop = defs[i].exec != EXEC_HANDOFF;
        p->exec.notify =
            defs[i].exec == EXEC_ATONCE ? sl_h2_inline_notify : exec_notify;
        p->exec.need_loop = exec_notify;
        p->exec.wake = exec_wake;
        p->exec.wait = exec_wait;
        p->exec.release = exec_release;
        p->exec.run = exec_run;
        pump->loop = loop;
        pump->opt = &p->opt;
        pump->exec = &p->exec;
        CHECK(sl_pool_init(&pump->pool, 1, loop) == 0);
        pump->pool.changed = pool_changed;
        CHECK(sl_h2_streams_init(pump) == 0);
        CHECK(pump->h2max > 0);
        pump->npending_cap = pump->h2max * 2;
        pump->pending = calloc(pump->npending_cap, sizeof(sl_ticket_t));
        CHECK(pump->pending != NULL);
        CHECK(sl_conn_init(&pump->pool.conns[0], pump, 0) == 0);
    }
    return 0;
}

/* Does one of CUTS fall inside the 9-byte header of a frame that follows
 * a header block's unfinished frame in D[0..N) (its frames walked as far
 * as they go)? libnghttp2 counts a CONTINUATION against its limit (8,
 * CVE-2024-28182) once per read that finds that header unfinished, not
 * once per frame, and before it knows the frame's type (nghttp2 issue
 * #2817): a header cut often enough ends the session
 * (NGHTTP2_ERR_TOO_MANY_CONTINUATIONS, no GOAWAY). */
static bool continuation_split(const uint8_t *d, size_t n, const size_t *cuts,
                               size_t ncuts)
{
    size_t pos = 0, i;
    bool expect = false;

    while (pos + 9 <= n) {
        uint8_t type = d[pos + 3];
        if (expect)
            for (i = 0; i < ncuts; i++)
                if (cuts[i] > pos && cuts[i] < pos + 9)
                    return true;
        expect = (type == NGHTTP2_HEADERS || type == NGHTTP2_PUSH_PROMISE ||
                  type == NGHTTP2_CONTINUATION) &&
                 !(d[pos + 4] & NGHTTP2_FLAG_END_HEADERS);
        pos += 9 + be24(d + pos);
    }
    return false;
}

static void one_run(profile_t *p, story_t *st, const uint8_t *d, size_t n,
                    const size_t *cuts, size_t ncuts)
{
    size_t i, pos = 0;

    run_begin(p, st);
    st->split_cont = continuation_split(d, n, cuts, ncuts);
    for (i = 0; i < ncuts; i++) {
        feed(d + pos, cuts[i] - pos);
        pos = cuts[i];
    }
    run.input_over = true;
    feed(d + pos, n - pos);
    run_end();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static story_t want, got;
    static sl_exch_t **done;
    static size_t *cuts;
    static size_t cuts_cap;
    profile_t *p;
    const uint8_t *d;
    uint32_t rng, hmax = 0;
    size_t n, k, pos, nc;
    int fd0;

    if (size < 2)
        return 0;
    if (done == NULL) {
        for (k = 0; k < NPROFILES; k++)
            if (prof[k].pump.h2max > hmax)
                hmax = prof[k].pump.h2max;
        done = calloc(hmax, sizeof(*done));
        CHECK(done != NULL);
    }
    run.done = done;
    p = &prof[data[0] % NPROFILES];
    rng = data[1] | 0x100u;
    d = data + 2;
    n = size - 2;
    if (cuts_cap < n + 1) {
        free(cuts);
        cuts_cap = n + 1;
        cuts = malloc(cuts_cap * sizeof(*cuts));
        CHECK(cuts != NULL);
    }
    fd0 = probe_fd();

    one_run(p, &want, d, n, NULL, 0);

    /* cut in two */
    for (k = 1; k < n; k++) {
        size_t cut = n <= SPLIT_ALL ? k : 1 + next(&rng) % (n - 1);
        if (n > SPLIT_ALL && k > SPLIT_SOME)
            break;
        one_run(p, &got, d, n, &cut, 1);
        agree(&want, &got, "cut at", cut);
    }
    /* chunks of seeded sizes, small and larger */
    for (k = 0; k < 2; k++) {
        for (pos = 0, nc = 0; pos < n;) {
            pos += 1 + next(&rng) % (k == 0 ? 8 : 200);
            if (pos < n)
                cuts[nc++] = pos;
        }
        one_run(p, &got, d, n, cuts, nc);
        agree(&want, &got, "in chunks, pass", k);
    }
    if (n <= BYTEWISE) {
        for (pos = 1, nc = 0; pos < n; pos++)
            cuts[nc++] = pos;
        one_run(p, &got, d, n, cuts, nc);
        agree(&want, &got, "byte by byte, length", n);
    }
    CHECK(probe_fd() == fd0); /* no descriptor left open */
    return 0;
}
