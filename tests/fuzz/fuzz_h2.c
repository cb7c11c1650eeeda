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
 * shape the request's stream id picks: sized, chunked with trailers, no body,
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
 *   reads (continuation_split());
 * - what follows the client's GOAWAY in a later read, when no stream
 *   is open: the session closes at the end of the read that brought it
 *   (goaway_split()).
 * The loop's time stands still (the ev_now() of a loop that never runs;
 * an on-loop dispatch moves it on by the little a run takes), so the
 * per-second budgets of h2.c count alike whatever the cuts.
 *
 * What stands in for the rest of the worker (fuzz_h2_peer.c): the pump's fields
 * the session reads (options, the stream table of sl_h2_streams_init(), the
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

#include <nghttp2/nghttp2.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "tests/fuzz/fuzz_h2.h"
#include "worker/loop/h2.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define SPLIT_ALL  96  /* inputs this short are cut at every byte */
#define SPLIT_SOME 24  /* cut points tried in a longer one */
#define BYTEWISE   512 /* inputs this short are also fed byte by byte */

/* The profiles byte 0 chooses from. */
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
     * before the input's last piece (fuzz_h2_peer.c, fz_exec_run()) */
    {{"--http2-max-concurrent-streams", "3", "--http2-initial-window-size",
      "100", NULL},
     EXEC_ATONCE,
     false},
};
#define NPROFILES (sizeof(defs) / sizeof(defs[0]))

static profile_t prof[NPROFILES];

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
    /* libnghttp2's count of CONTINUATION frames (continuation_split()):
     * the session ends, its GOAWAY ENHANCE_YOUR_CALM */
    if (got->split_cont &&
        (got->goaway == -1 || got->goaway == NGHTTP2_ENHANCE_YOUR_CALM) &&
        got->text.len <= want->text.len) {
        compared--;
        return;
    }
    /* The client's GOAWAY, read while no stream is open, leaves nghttp2
     * wanting nothing more (nghttp2_session_want_read()): the session
     * ends at the end of that read, so what follows in a later read is
     * never read (a connection error in it never told), and requests
     * after it are not served; in the same read it is. Either way the
     * connection ends alike: closed, or lingering (alive) when the
     * client may still be sending. */
    if (got->split_goaway && got->closed == want->closed &&
        got->text.len <= want->text.len &&
        memcmp(got->text.data, want->text.data, got->text.len) == 0) {
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
    struct ev_loop *loop;
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
        p->def = &defs[i];
        p->exec.notify =
            defs[i].exec == EXEC_ATONCE ? sl_h2_inline_notify : fz_exec_notify;
        p->exec.need_loop = fz_exec_notify;
        p->exec.wake = fz_exec_wake;
        p->exec.wait = fz_exec_wait;
        p->exec.release = fz_exec_release;
        p->exec.run = fz_exec_run;
        pump->loop = loop;
        pump->opt = &p->opt;
        pump->exec = &p->exec;
        CHECK(sl_pool_init(&pump->pool, 1, loop) == 0);
        pump->pool.changed = fz_pool_changed;
        CHECK(sl_h2_streams_init(pump) == 0);
        CHECK(pump->h2s.max > 0);
        pump->npending_cap = pump->h2s.max * 2;
        pump->pending = calloc(pump->npending_cap, sizeof(sl_ticket_t));
        CHECK(pump->pending != NULL);
        CHECK(sl_conn_init(&pump->pool.conns[0], pump, 0) == 0);
    }
    return 0;
}

/* The lowest free descriptor (one left open moves it). */
static int probe_fd(void)
{
    int fd = dup(2);

    CHECK(fd >= 0);
    close(fd);
    return fd;
}

/* Does one of CUTS fall inside the 9-byte header of a frame that follows
 * a header block's unfinished frame in D[0..N) (its frames walked as far
 * as they go)? libnghttp2 counts a CONTINUATION against its limit (8,
 * CVE-2024-28182) once per read that finds that header unfinished, not
 * once per frame, and before it knows the frame's type (nghttp2 issue
 * #2817): a header cut often enough ends the session
 * (NGHTTP2_ERR_TOO_MANY_CONTINUATIONS: h2.c says ENHANCE_YOUR_CALM). */
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
        pos += 9 + fz_be24(d + pos);
    }
    return false;
}

/* Does one of CUTS fall after the end of a GOAWAY frame of the client's
 * in D[0..N) (its frames walked as far as they go), and before N? */
static bool goaway_split(const uint8_t *d, size_t n, const size_t *cuts,
                         size_t ncuts)
{
    size_t pos = 0, end, i;

    while (pos + 9 <= n) {
        end = pos + 9 + fz_be24(d + pos);
        if (d[pos + 3] == NGHTTP2_GOAWAY && end <= n)
            for (i = 0; i < ncuts; i++)
                if (cuts[i] >= end && cuts[i] < n)
                    return true;
        pos = end;
    }
    return false;
}

static void one_run(profile_t *p, story_t *st, const uint8_t *d, size_t n,
                    const size_t *cuts, size_t ncuts)
{
    size_t i, pos = 0;

    fz_begin(p, st);
    st->split_cont = continuation_split(d, n, cuts, ncuts);
    st->split_goaway = goaway_split(d, n, cuts, ncuts);
    for (i = 0; i < ncuts; i++) {
        fz_feed(d + pos, cuts[i] - pos);
        pos = cuts[i];
    }
    fz_run.input_over = true;
    fz_feed(d + pos, n - pos);
    fz_end();
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
            if (prof[k].pump.h2s.max > hmax)
                hmax = prof[k].pump.h2s.max;
        done = calloc(hmax, sizeof(*done));
        CHECK(done != NULL);
    }
    fz_run.done = done;
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
