/* fuzz_http.c - a libFuzzer target for the request parser as the loop
 * thread runs it: llhttp with the connection's callbacks (h1_parse.c),
 * the head's judge (http.c, forwarded.c, the WebSocket handshake), over a
 * real sl_conn_t, pipelined requests included.
 *
 * The property, beyond "no crash, no leak": what a connection makes of a
 * byte stream does not depend on how the stream was cut into reads. The
 * input is fed whole, then cut in two at every byte (inputs up to
 * SPLIT_ALL bytes; longer ones at SPLIT_SOME points the input's seed
 * chooses), then in chunks of seeded sizes, then byte by byte (up to
 * BYTEWISE bytes), and every run must tell the same story: the same
 * requests (method, target, version, headers, framing, client), the same
 * bodies, the same error, the same unfinished request at the end. One
 * leeway: a limit is enforced as the bytes arrive, so where the whole
 * input is refused as malformed (400) a run whose cut came before the
 * malformed byte may already have refused it as too long (414, 431).
 * Every other cut, and once more whole, the run also parses each next
 * request ahead as pump mode's pipelining does (try_ahead()), undoes it,
 * and must still tell the same story.
 *
 * What stands in for the rest of the worker is the least that lets the
 * parse path run as it does in conn.c: conn_process()'s READING and
 * SERVING steps (a body already read is checked before the request is
 * dispatched; an app that reads its whole body and answers at once),
 * conn_read()'s handling of the read buffer, and conn_reset_request()'s
 * reset of what the parser reads, copied here because conn.c keeps them
 * static: keep them in step. Not covered: the buffer-full 414/431 of
 * on_readable() (the limits there are far above the input's size),
 * timeouts, writing.
 *
 * The input's first byte chooses the options (a profile, below), its
 * second seeds the cuts. Built by a --enable-fuzzing configuration
 * (tests/fuzz/run.sh).
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/options.h"
#include "worker/loop/conn.h"
#include "worker/loop/conn_ws.h"
#include "worker/loop/forwarded.h"
#include "worker/loop/http.h"
#include "worker/loop/pump.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_http: %s:%d: %s\n", __FILE__, __LINE__,      \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

#define SPLIT_ALL  256  /* inputs this short are cut at every byte */
#define SPLIT_SOME 48   /* cut points tried in a longer one */
#define BYTEWISE   4096 /* inputs this short are also fed byte by byte */

/* The option sets byte 0 chooses from: the defaults with an executor that
 * serves WebSockets (ASGI), the defaults without (WSGI) and with a
 * health path (answered by the loop, told as a flag), tight limits so
 * that 413, 414 and 431 are a few bytes away, and a peer (always
 * 127.0.0.1) whose forwarding headers are not trusted. */
static const char *const profiles[][12] = {
    {NULL},
    {"--health-path", "/healthz", NULL},
    {"--limit-request-line", "40", "--limit-request-fields", "4",
     "--limit-request-field-size", "48", "--limit-request-body", "24", NULL},
    {"--forwarded-allow-ips", "10.0.0.0/8", "--ws-per-message-deflate", "false",
     NULL},
};
#define NPROFILES (sizeof(profiles) / sizeof(profiles[0]))

typedef struct {
    sl_options_t opt;
    sl_exec_t exec;
    sl_pump_t pump;
    sl_conn_t conn;
    sl_exch_t spare; /* what a pipelined request is run ahead into */
} profile_t;

static profile_t prof[NPROFILES];

enum { RUN_ON, RUN_OVER };

/* What a run made of the input. */
typedef struct {
    sl_buf_t text; /* what happened, in a form memcmp can compare */
    int error;     /* the error status it ended with, 0 = none */
} story_t;

/* One run over the input: the story so far. */
typedef struct {
    sl_conn_t *c;
    int state;  /* RUN_ON, or RUN_OVER: the connection would be closed */
    bool ahead; /* try each next request ahead (try_ahead()) */
    sl_exch_t *spare;
    story_t *story; /* borrowed */
    sl_buf_t head;  /* the request being served, told when it ends */
} run_t;

static void exec_notify(sl_exch_t *c)
{
    (void)c;
}

static int exec_wait(sl_exch_t *c, int what)
{
    (void)c;
    (void)what;
    return -1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    size_t i;

    (void)argc;
    (void)argv;
    CHECK(loop != NULL);
    sl_log_set_level(SL_LOG_CRITICAL); /* no "bad request" debug lines */
    for (i = 0; i < NPROFILES; i++) {
        profile_t *p = &prof[i];
        char *args[16] = {"sluice"};
        int n = 1;

        for (int k = 0; profiles[i][k] != NULL; k++)
            args[n++] = (char *)profiles[i][k];
        args[n++] = "app:app";
        CHECK(sl_options_parse(&p->opt, n, args) == 0);
        p->exec.name = "fuzz";
        p->exec.websocket = i != 1;
        p->exec.notify = exec_notify;
        p->exec.wake = exec_notify;
        p->exec.wait = exec_wait;
        p->pump.loop = loop;
        p->pump.opt = &p->opt;
        p->pump.exec = &p->exec;
        CHECK(sl_conn_init(&p->conn, &p->pump, 0) == 0);
        CHECK(pthread_mutex_init(&p->spare.mu, NULL) == 0);
        p->spare.conn = &p->conn;
        sl_tail_init(&p->spare.tail);
    }
    return 0;
}

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
static void tell_slice(run_t *r, sl_buf_t *b, char tag, uint32_t off,
                       uint32_t len)
{
    const sl_req_t *q = &r->c->x.req;

    CHECK((size_t)off + len <= q->hbuf.len);
    tell_num(b, tag, len);
    tell(b, q->hbuf.data + off, len);
}

/* What conn.c's conn_reset_request() resets that the parser reads. */
static void reset_request(sl_conn_t *c)
{
    c->h1.head_done = false;
    c->h1.msg_done = false;
    c->h1.in_msg = false;
    c->h1.http_error = 0;
    c->x.req.nhdrs = 0;
    c->x.req.url_len = 0;
    c->x.req.has_body = false;
    sl_buf_reset(&c->x.req.hbuf, SL_CONN_BUF_KEEP);
    sl_buf_reset(&c->x.body, SL_CONN_BUF_KEEP);
    c->x.body_done = false;
    c->x.body_total = 0;
    c->x.resp_done = false;
    c->x.close_after = false;
    if (c->x.req.client != NULL)
        sl_forwarded_clear(&c->x.req);
    sl_buf_compact(&c->rbuf);
    sl_conn_ws_free(c);
}

/* In pump mode the session parses what follows a whole request ahead
 * (h1_ahead.c): sl_conn_parse_ahead() into the spare. Whatever it says,
 * once undone the run goes on as if it never tried (runs with and
 * without it must tell one story); a request it took is whole, ends with
 * its head and may run ahead. */
static void try_ahead(run_t *r)
{
    sl_conn_t *c = r->c;
    sl_exch_t *x = r->spare;
    llhttp_t parser = c->h1.parser;
    size_t off = c->rbuf.off;
    const sl_req_t *q = &x->req;

    if (!sl_conn_may_run_ahead(&c->x.req))
        return;
    x->req.tls = c->x.req.tls;
    if (sl_conn_parse_ahead(c, x) == 1) {
        CHECK(c->rbuf.off > off);
        CHECK(sl_conn_may_run_ahead(q) && !q->websocket);
        CHECK((size_t)q->url_off + q->url_len <= q->hbuf.len);
        CHECK(q->nhdrs >= 0 && q->nhdrs <= c->pump->opt->limit_request_fields);
        c->h1.parser = parser; /* undone */
        c->rbuf.off = off;
    }
    CHECK(!c->ahead_parsing && c->rbuf.off == off);
    sl_conn_free_req(c, &x->req);
    memset(&x->req, 0, sizeof(x->req));
    x->body_done = false;
}

/* The head is complete: what the executor would be given. */
static void dispatch(run_t *r)
{
    sl_conn_t *c = r->c;
    const sl_req_t *q = &c->x.req;
    const sl_client_t *cl = sl_req_client(q);
    int i;

    c->state = SL_CONN_SERVING;
    c->x.body_done = !q->has_body || c->h1.msg_done;
    r->head.len = 0;
    tell_num(&r->head, 'M', (unsigned)q->method);
    if (q->method_len > 0)
        tell_slice(r, &r->head, 'm', q->method_off, q->method_len);
    tell_num(&r->head, 'V', q->major * 10u + q->minor);
    tell_num(&r->head, 'K', q->keep_alive);
    tell_num(&r->head, 'F',
             q->has_body * 1u + q->chunked * 2u + q->expect_continue * 4u +
                 q->head * 8u + q->websocket * 16u +
                 sl_http_is_health(&c->x.req, c->pump->opt->health_path) * 32u);
    if (q->has_body && !q->chunked)
        tell_num(&r->head, 'L', q->content_length);
    tell_slice(r, &r->head, 'U', q->url_off, q->url_len);
    CHECK(q->nhdrs >= 0 && q->nhdrs <= c->pump->opt->limit_request_fields);
    for (i = 0; i < q->nhdrs; i++) {
        tell_slice(r, &r->head, 'H', q->hdrs[i].name_off, q->hdrs[i].name_len);
        tell_slice(r, &r->head, ':', q->hdrs[i].val_off, q->hdrs[i].val_len);
    }
    CHECK(memchr(cl->addr, '\0', sizeof(cl->addr)) != NULL);
    CHECK(memchr(cl->host, '\0', sizeof(cl->host)) != NULL);
    tell(&r->head, cl->addr, strlen(cl->addr) + 1);
    tell(&r->head, cl->host, strlen(cl->host) + 1);
    tell_num(&r->head, 'P', (unsigned)cl->port);
    tell_num(&r->head, 'S', cl->https);
}

/* The request ends, whole or not: told with its body. */
static void request_over(run_t *r, bool whole)
{
    sl_conn_t *c = r->c;

    tell(&r->story->text, r->head.data, r->head.len);
    tell_num(&r->story->text, whole ? 'B' : 'b', sl_buf_pending(&c->x.body));
    if (c->x.body.data != NULL)
        tell(&r->story->text, c->x.body.data + c->x.body.off,
             sl_buf_pending(&c->x.body));
    r->head.len = 0;
}

static void fail(run_t *r)
{
    sl_conn_t *c = r->c;

    CHECK(c->h1.http_error >= 400 && c->h1.http_error <= 599);
    /* the loop's answer names it */
    CHECK(strcmp(sl_http_reason(c->h1.http_error), "Unknown") != 0);
    r->head.len = 0; /* the app's answer, if any, is replaced */
    tell(&r->story->text, "E", 1);
    r->story->error = c->h1.http_error;
    r->state = RUN_OVER;
}

/* conn_process()'s READING and SERVING steps, as far as they go. */
static void process(run_t *r)
{
    sl_conn_t *c = r->c;

    while (r->state == RUN_ON) {
        CHECK(c->rbuf.off <= c->rbuf.len);
        if (c->state == SL_CONN_READING) {
            if (sl_conn_parse(c) < 0) {
                fail(r);
                return;
            }
            if (c->h1.head_done && c->x.req.has_body && sl_conn_parse(c) < 0) {
                fail(r);
                return;
            }
            if (!c->h1.head_done)
                return; /* more to read */
            dispatch(r);
            if (c->x.req.websocket) {
                /* what follows is frames, for conn_ws.c */
                tell(&r->head, "W", 1);
                request_over(r, false);
                r->state = RUN_OVER;
                return;
            }
            continue;
        }
        /* SERVING: the body streams in */
        if (!c->h1.msg_done && sl_conn_parse(c) < 0) {
            fail(r);
            return;
        }
        if (!c->h1.msg_done)
            return;
        CHECK(c->x.body_total == c->x.body.len);
        /* a whole message carries exactly the length it announced */
        CHECK(c->x.req.chunked || c->x.body.len == c->x.req.content_length);
        if (r->ahead)
            try_ahead(r);
        request_over(r, true);
        if (!c->x.req.keep_alive) {
            r->state = RUN_OVER;
            return;
        }
        reset_request(c);
        c->state = SL_CONN_READING;
    }
}

/* One read of P[0..N), as conn_read() puts it in the buffer. */
static void feed(run_t *r, const uint8_t *p, size_t n)
{
    sl_conn_t *c = r->c;
    sl_buf_t *b = &c->rbuf;

    if (r->state != RUN_ON || n == 0)
        return;
    if (b->off == b->len && c->state != SL_CONN_READING)
        b->off = b->len = 0;
    if (c->state == SL_CONN_READING && b->off == b->len && !c->h1.in_msg)
        sl_buf_compact(b);
    CHECK(sl_buf_append(b, p, n) == 0);
    process(r);
}

static void run_begin(run_t *r, profile_t *p, story_t *story)
{
    sl_conn_t *c = &p->conn;
    struct sockaddr_in *in = (struct sockaddr_in *)&c->peer;

    memset(r, 0, sizeof(*r));
    r->c = c;
    r->spare = &p->spare;
    r->story = story;
    story->text.len = story->text.off = 0;
    story->error = 0;
    c->rbuf.len = c->rbuf.off = 0;
    c->state = SL_CONN_READING;
    c->x.aborted = false;
    c->x.waiting = false;
    sl_conn_parser_init(c);
    reset_request(c);
    memset(&c->peer, 0, sizeof(c->peer));
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    in->sin_port = htons(40000);
    c->peerlen = sizeof(*in);
}

/* The end of the input: what is left unfinished is part of the story. */
static void run_end(run_t *r)
{
    sl_conn_t *c = r->c;

    if (r->state == RUN_ON) {
        if (c->state == SL_CONN_SERVING)
            request_over(r, false);
        tell_num(&r->story->text, 'Z', c->h1.in_msg);
    }
    sl_buf_free(&r->head);
    reset_request(c);
    sl_buf_reset(&c->rbuf, SL_CONN_BUF_KEEP);
}

static void show(const char *what, const sl_buf_t *b)
{
    size_t i;

    fprintf(stderr, "%s (%zu bytes): ", what, b->len);
    for (i = 0; i < b->len; i++) {
        unsigned char ch = (unsigned char)b->data[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\')
            fputc(ch, stderr);
        else
            fprintf(stderr, "\\x%02x", ch);
    }
    fputc('\n', stderr);
}

static void agree(const story_t *want, const story_t *got, const char *how,
                  size_t arg)
{
    const sl_buf_t *w = &want->text, *g = &got->text;

    if (w->len == g->len &&
        (w->len == 0 || memcmp(w->data, g->data, w->len) == 0) &&
        (got->error == want->error ||
         (want->error == 400 && (got->error == 414 || got->error == 431))))
        return;
    fprintf(stderr, "fuzz_http: fed %s %zu, the story differs\n", how, arg);
    fprintf(stderr, "whole: error %d; %s: error %d\n", want->error, how,
            got->error);
    show("whole", w);
    show(how, g);
    abort();
}

static uint32_t next(uint32_t *rng)
{
    *rng = *rng * 1103515245u + 12345u;
    return *rng >> 16;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static story_t want, got;
    profile_t *p;
    const uint8_t *d;
    uint32_t rng;
    size_t n, k, pos;
    run_t r;

    if (size < 2)
        return 0;
    p = &prof[data[0] % NPROFILES];
    rng = data[1] | 0x100u;
    d = data + 2;
    n = size - 2;

    run_begin(&r, p, &want);
    feed(&r, d, n);
    run_end(&r);

    /* cut in two */
    for (k = 1; k < n; k++) {
        size_t cut = n <= SPLIT_ALL ? k : 1 + next(&rng) % (n - 1);
        if (n > SPLIT_ALL && k > SPLIT_SOME)
            break;
        run_begin(&r, p, &got);
        r.ahead = k % 2 == 1; /* every other cut tries requests ahead */
        feed(&r, d, cut);
        feed(&r, d + cut, n - cut);
        run_end(&r);
        agree(&want, &got, "cut at", cut);
    }
    /* chunks of seeded sizes, small and larger */
    for (k = 0; k < 2; k++) {
        run_begin(&r, p, &got);
        for (pos = 0; pos < n;) {
            size_t len = 1 + next(&rng) % (k == 0 ? 8 : 200);
            if (len > n - pos)
                len = n - pos;
            feed(&r, d + pos, len);
            pos += len;
        }
        run_end(&r);
        agree(&want, &got, "in chunks, pass", k);
    }
    /* whole, trying every next request ahead */
    run_begin(&r, p, &got);
    r.ahead = true;
    feed(&r, d, n);
    run_end(&r);
    agree(&want, &got, "whole, requests tried ahead; length", n);
    if (n <= BYTEWISE) {
        run_begin(&r, p, &got);
        for (pos = 0; pos < n; pos++)
            feed(&r, d + pos, 1);
        run_end(&r);
        agree(&want, &got, "byte by byte, length", n);
    }
    return 0;
}
