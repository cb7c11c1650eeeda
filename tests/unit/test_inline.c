/* test_inline.c - check suite for worker/loop/inline.c, an executor's
 * blocking waits done on the socket.
 *
 * The executor table is WSGI inline's (sl_inline_notify, _wake, _wait and
 * the shared operations of exec.h) with a run() of this file: a C handler
 * per test, no Python. The test thread is the loop thread and, inside
 * run(), the executor too, so while a handler waits the loop cannot turn;
 * the client is therefore a second thread with blocking sockets, and the
 * two take turns through a stage counter: each side waits for the other's
 * step with a deadline (pthread_cond_timedwait), never a sleep, and a
 * client that gives up closes its socket, which ends any wait of the
 * handler at once.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <sys/time.h>

#include "tests/unit/harness.h"
#include "worker/loop/inline.h"

static sl_options_t opt;
static sl_pump_t pump;
static h_client_t client;
static h_resp_t resp;

/* ------------------------------------------------------------------ */
/* turns between the handler (test thread) and the client thread      */

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int handler; /* the handler's last step */
    int client;  /* the client's last step */
    bool client_done;
    char error[256]; /* the client's first failure, "" = none */
} turn = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void deadline(struct timespec *ts)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += (time_t)H_DEADLINE + 1;
}

/* Wait until *STEP >= WANT; false after the deadline. */
static bool await_step(const int *step, int want)
{
    struct timespec ts;
    bool ok;

    deadline(&ts);
    pthread_mutex_lock(&turn.mu);
    while (*step < want && pthread_cond_timedwait(&turn.cv, &turn.mu, &ts) == 0)
        ;
    ok = *step >= want;
    pthread_mutex_unlock(&turn.mu);
    return ok;
}

static void step(int *step, int n)
{
    pthread_mutex_lock(&turn.mu);
    *step = n;
    pthread_cond_broadcast(&turn.cv);
    pthread_mutex_unlock(&turn.mu);
}

/* The client thread's failure: noted once, and its socket closed so the
 * handler's waits end. */
static void *client_fail(const char *what)
{
    pthread_mutex_lock(&turn.mu);
    if (turn.error[0] == '\0')
        snprintf(turn.error, sizeof(turn.error), "client: %s (%s)", what,
                 strerror(errno));
    pthread_mutex_unlock(&turn.mu);
    shutdown(client.fd, SHUT_RDWR);
    return NULL;
}

/* Send all of S; false when the socket refused (errno says why). */
static bool client_send(const char *s)
{
    size_t n = strlen(s);

    while (n > 0) {
        ssize_t w = send(client.fd, s, n, MSG_NOSIGNAL);
        if (w <= 0)
            return false;
        s += w;
        n -= (size_t)w;
    }
    return true;
}

/* Read in pieces of at most PIECE bytes until the server closes. */
static bool client_read_to_eof(size_t piece)
{
    for (;;) {
        ssize_t n;

        if (client.cap - client.len < piece + 1) {
            client.cap = client.cap ? client.cap * 2 : 65536;
            client.data = realloc(client.data, client.cap + 1);
            if (client.data == NULL)
                return false;
        }
        n = recv(client.fd, client.data + client.len, piece, 0);
        if (n == 0)
            return true;
        if (n < 0)
            return false;
        client.len += (size_t)n;
        client.data[client.len] = '\0';
    }
}

static bool client_finished(void *arg)
{
    bool done;

    (void)arg;
    pthread_mutex_lock(&turn.mu);
    done = turn.client_done;
    pthread_mutex_unlock(&turn.mu);
    return done;
}

/* The client thread runs SCRIPT; the test thread runs the loop (and, in
 * it, the handler) until the script is over, then checks it went well. */
static void run_client(void *(*script)(void *))
{
    pthread_t th;

    ck_assert_int_eq(pthread_create(&th, NULL, script, NULL), 0);
    ck_assert_msg(h_run_until(&pump, client_finished, NULL),
                  "client script did not finish");
    pthread_join(th, NULL);
    ck_assert_msg(turn.error[0] == '\0', "%s", turn.error);
}

static void *script_end(void)
{
    pthread_mutex_lock(&turn.mu);
    turn.client_done = true;
    pthread_mutex_unlock(&turn.mu);
    return NULL;
}

/* ------------------------------------------------------------------ */
/* the executor                                                       */

static void (*handler)(sl_conn_t *c, uint32_t gen);
static bool handler_returned;

static void run(sl_exch_t *x)
{
    sl_conn_t *c = x->conn;

    handler(c, c->x.gen);
    handler_returned = true;
}

static const sl_exec_t inline_exec = {
    .name = "test inline",
    .on_loop = true,
    .holds_loop = true,
    .hand_over = sl_exec_hand_over_queue, /* never used: run() instead */
    .notify = sl_inline_notify,
    .wake = sl_inline_wake,
    .wait = sl_inline_wait,
    .run = run,
    .finish = sl_exec_finish_nothing,
    .stop = h_exec_stop,
};

static int send_str(sl_conn_t *c, uint32_t gen, const char *s, int flags)
{
    struct iovec iov = {(void *)s, strlen(s)};

    return sl_exch_send(&c->x, gen, &iov, 1, flags);
}

static void setup(void)
{
    client.fd = -1;
    sl_log_set_level(SL_LOG_ERROR);
}

static void teardown(void)
{
    h_resp_free(&resp);
    h_client_close(&client);
    h_pump_down(&pump);
}

/* An inline pump for "sluice ARGS... testapp:app", HANDLER as the app,
 * and a connected client whose reads never block past the deadline. */
#define UP(h, ...)                                                             \
    do {                                                                       \
        h_options(&opt, __VA_ARGS__);                                          \
        up(h);                                                                 \
    } while (0)

static void up(void (*h)(sl_conn_t *, uint32_t))
{
    struct timeval tv = {(time_t)H_DEADLINE + 1, 0};

    handler = h;
    h_exec = &inline_exec;
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    ck_assert_int_eq(
        setsockopt(client.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    ck_assert_int_eq(
        setsockopt(client.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)), 0);
}

/* ------------------------------------------------------------------ */
/* the body, read while it arrives                                    */

static struct {
    char body[64];
    size_t len;
    size_t at_step[4]; /* body bytes the handler had at each of its steps */
    long last;         /* the read that ended it: 0 end, -1 gone */
} got;

/* Read until N bytes in all (or the end, or an error). */
static long read_to(sl_conn_t *c, uint32_t gen, size_t n)
{
    long rc = 1;

    while (got.len < n && got.len < sizeof(got.body) - 1 &&
           (rc = sl_exch_read_body(&c->x, gen, got.body + got.len,
                                   sizeof(got.body) - 1 - got.len, false,
                                   true)) > 0)
        got.len += (size_t)rc;
    got.body[got.len] = '\0';
    return rc;
}

/* Three pieces of five bytes: after each, tell the client to send the
 * next, and wait for it in sl_conn_read_body(wait=true). */
static void echo_pieces(sl_conn_t *c, uint32_t gen)
{
    char head[128];
    int i;

    for (i = 1; i <= 3; i++) {
        got.last = read_to(c, gen, (size_t)i * 5);
        got.at_step[i] = got.len;
        step(&turn.handler, i);
    }
    got.last = read_to(c, gen, sizeof(got.body)); /* the end: 0 */
    snprintf(head, sizeof(head),
             "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", got.len);
    ck_assert_int_eq(send_str(c, gen, head, 0), 0);
    ck_assert_int_eq(send_str(c, gen, got.body, SL_SEND_END), 0);
}

static void *client_pieces(void *arg)
{
    static const char *const pieces[] = {"-worl", "d!!!!"};
    int i;

    (void)arg;
    if (!client_send("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 15\r\n"
                     "Connection: close\r\n\r\nhello"))
        return client_fail("sending");
    for (i = 0; i < 2; i++) {
        if (!await_step(&turn.handler, i + 1))
            return client_fail("the handler never took a piece");
        if (!client_send(pieces[i]))
            return client_fail("sending");
    }
    if (!client_read_to_eof(4096))
        return client_fail("reading the response");
    return script_end();
}

START_TEST(test_body_in_pieces)
{
    UP(echo_pieces, "--timeout", "5", NULL);
    run_client(client_pieces);
    ck_assert(handler_returned);
    /* each piece was read alone: the next was not sent before */
    ck_assert_uint_eq(got.at_step[1], 5);
    ck_assert_uint_eq(got.at_step[2], 10);
    ck_assert_uint_eq(got.at_step[3], 15);
    ck_assert_int_eq(got.last, 0);
    ck_assert_str_eq(got.body, "hello-world!!!!");
    ck_assert(h_take_response(&client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(resp.body, "hello-world!!!!");
}
END_TEST

/* A chunked body arrives in pieces as well; its end is the last chunk. */
static void read_chunked(sl_conn_t *c, uint32_t gen)
{
    got.last = read_to(c, gen, 3);
    got.at_step[1] = got.len;
    step(&turn.handler, 1);
    got.last = read_to(c, gen, sizeof(got.body));
    ck_assert_int_eq(send_str(c, gen,
                              "HTTP/1.1 204 No Content\r\n"
                              "Connection: close\r\n\r\n",
                              SL_SEND_END),
                     0);
}

static void *client_chunked(void *arg)
{
    (void)arg;
    if (!client_send(
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
            "Connection: close\r\n\r\n3\r\nabc\r\n"))
        return client_fail("sending");
    if (!await_step(&turn.handler, 1))
        return client_fail("the handler never took the first chunk");
    if (!client_send("4\r\ndefg\r\n0\r\n\r\n"))
        return client_fail("sending");
    if (!client_read_to_eof(4096))
        return client_fail("reading the response");
    return script_end();
}

START_TEST(test_chunked_body_in_pieces)
{
    UP(read_chunked, "--timeout", "5", NULL);
    run_client(client_chunked);
    ck_assert_uint_eq(got.at_step[1], 3);
    ck_assert_int_eq(got.last, 0);
    ck_assert_str_eq(got.body, "abcdefg");
    ck_assert(h_take_response(&client, &resp, false));
    ck_assert_int_eq(resp.status, 204);
}
END_TEST

/* ------------------------------------------------------------------ */
/* the client leaving, or going silent                                */

static void read_until_gone(sl_conn_t *c, uint32_t gen)
{
    got.last = read_to(c, gen, 10);
    got.at_step[1] = got.len;
    step(&turn.handler, 1);
    got.last = read_to(c, gen, sizeof(got.body));
    /* nothing more goes out, but END still ends the request */
    ck_assert_int_eq(send_str(c, gen, "HTTP/1.1 200 OK\r\n\r\n", SL_SEND_END),
                     -1);
}

static void *client_leaves(void *arg)
{
    (void)arg;
    if (!client_send("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 50\r\n\r\n"
                     "0123456789"))
        return client_fail("sending");
    if (!await_step(&turn.handler, 1))
        return client_fail("the handler never took the first part");
    shutdown(client.fd, SHUT_RDWR);
    return script_end();
}

START_TEST(test_client_gone_mid_body)
{
    h_nactive_t none = {&pump, 0};

    UP(read_until_gone, "--timeout", "5", NULL);
    run_client(client_leaves);
    ck_assert(handler_returned);
    ck_assert_uint_eq(got.at_step[1], 10);
    ck_assert_int_eq(got.last, -1);
    ck_assert_str_eq(got.body, "0123456789");
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
    ck_assert_uint_eq(pump.inflight, 0);
}
END_TEST

/* A client that sends part of its body and then nothing: the wait ends
 * after --timeout with -1, and the connection is closed. */
static void read_silent(sl_conn_t *c, uint32_t gen)
{
    got.last = read_to(c, gen, sizeof(got.body));
    ck_assert(c->x.aborted);
    ck_assert_int_eq(send_str(c, gen, "HTTP/1.1 200 OK\r\n\r\n", SL_SEND_END),
                     -1);
}

START_TEST(test_silent_client_times_out)
{
    h_nactive_t none = {&pump, 0};
    double start;

    UP(read_silent, "--timeout", "0.2", NULL);
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n"
                     "\r\nab");
    start = h_now();
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
    ck_assert(handler_returned);
    ck_assert_int_eq(got.last, -1);
    ck_assert_str_eq(got.body, "ab");
    /* the wait ended by the timeout, not by anything the client did */
    ck_assert(h_now() - start >= 0.19);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(client.len, 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* a response bigger than the credit, to a slow reader                */

enum { BIG = 4 * SL_CONN_CREDIT, BLOCK = 64 * 1024 };

static struct {
    int full;          /* sends that answered 1 (credit used up) */
    int waits;         /* sl_conn_wait_credit() calls, all returning 0 */
    size_t worst;      /* queued output seen right after a wait */
    size_t queued_max; /* queued output seen when a send said "full" */
    int end_rc;        /* the END send after a failed wait */
} credit;

static char pattern(size_t i)
{
    return (char)('a' + i % 23);
}

static size_t queued(sl_conn_t *c)
{
    size_t n;

    pthread_mutex_lock(&c->x.mu);
    n = c->x.out.len + c->x.inflight;
    pthread_mutex_unlock(&c->x.mu);
    return n;
}

static void send_big(sl_conn_t *c, uint32_t gen)
{
    static char block[BLOCK];
    char head[128];
    struct iovec iov = {block, BLOCK};
    size_t at, i, q;
    int rc;

    snprintf(head, sizeof(head),
             "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
             "Connection: close\r\n\r\n",
             BIG);
    ck_assert_int_eq(send_str(c, gen, head, 0), 0);
    for (at = 0; at < BIG; at += BLOCK) {
        for (i = 0; i < BLOCK; i++)
            block[i] = pattern(at + i);
        rc = sl_exch_send(&c->x, gen, &iov, 1,
                          at + BLOCK < BIG ? 0 : SL_SEND_END);
        ck_assert_int_ge(rc, 0);
        if (rc == 0)
            continue;
        credit.full++;
        q = queued(c);
        if (q > credit.queued_max)
            credit.queued_max = q;
        step(&turn.handler, 1); /* the client may start reading now */
        ck_assert_int_eq(sl_exch_wait_credit(&c->x, gen), 0);
        credit.waits++;
        q = queued(c);
        if (q > credit.worst)
            credit.worst = q;
    }
}

/* Reads nothing until the handler has used up its credit, then reads in
 * small pieces. */
static void *client_slow(void *arg)
{
    int small = 16 * 1024;

    (void)arg;
    setsockopt(client.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    if (!client_send("GET /big HTTP/1.1\r\nHost: h\r\n"
                     "Connection: close\r\n\r\n"))
        return client_fail("sending");
    if (!await_step(&turn.handler, 1))
        return client_fail("the handler never ran out of credit");
    if (!client_read_to_eof(4096))
        return client_fail("reading the response");
    return script_end();
}

START_TEST(test_credit_to_slow_reader)
{
    int small = 16 * 1024;
    size_t i;

    UP(send_big, "--timeout", "5", NULL);
    ck_assert_int_eq(setsockopt(client.conn->tp.fd, SOL_SOCKET, SO_SNDBUF,
                                &small, sizeof(small)),
                     0);
    run_client(client_slow);
    ck_assert(handler_returned);
    /* the handler was held back, and let go only below half the credit */
    ck_assert_int_ge(credit.full, 1);
    ck_assert_int_eq(credit.waits, credit.full);
    ck_assert_uint_gt(credit.queued_max, SL_CONN_CREDIT);
    ck_assert_uint_le(credit.worst, SL_CONN_CREDIT / 2);
    ck_assert(h_take_response(&client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
    ck_assert_uint_eq(resp.body_len, BIG);
    for (i = 0; i < BIG; i++)
        if (resp.body[i] != pattern(i))
            ck_abort_msg("body byte %zu is %c, wanted %c", i, resp.body[i],
                         pattern(i));
    ck_assert_uint_eq(client.len, 0); /* nothing after it */
}
END_TEST

/* The client leaves while the handler waits for credit: the wait ends with
 * -1 and the handler stops producing. */
static void send_to_leaver(sl_conn_t *c, uint32_t gen)
{
    static char block[BLOCK];
    struct iovec iov = {block, BLOCK};
    int rc = 0, i;

    memset(block, 'x', sizeof(block));
    ck_assert_int_eq(send_str(c, gen, "HTTP/1.1 200 OK\r\n\r\n", 0), 0);
    for (i = 0; i < 64 && rc == 0; i++)
        rc = sl_exch_send(&c->x, gen, &iov, 1, 0);
    ck_assert_int_eq(rc, 1);
    step(&turn.handler, 1);
    credit.waits = sl_exch_wait_credit(&c->x, gen);
    credit.end_rc = sl_exch_send(&c->x, gen, NULL, 0, SL_SEND_END);
}

static void *client_leaves_unread(void *arg)
{
    struct linger lg = {1, 0}; /* close with a reset */

    (void)arg;
    if (!client_send("GET /big HTTP/1.1\r\nHost: h\r\n"
                     "Connection: close\r\n\r\n"))
        return client_fail("sending");
    if (!await_step(&turn.handler, 1))
        return client_fail("the handler never ran out of credit");
    setsockopt(client.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(client.fd);
    client.fd = -1;
    return script_end();
}

START_TEST(test_client_gone_while_waiting_for_credit)
{
    int small = 16 * 1024;
    h_nactive_t none = {&pump, 0};

    UP(send_to_leaver, "--timeout", "5", NULL);
    ck_assert_int_eq(setsockopt(client.conn->tp.fd, SOL_SOCKET, SO_SNDBUF,
                                &small, sizeof(small)),
                     0);
    run_client(client_leaves_unread);
    ck_assert(handler_returned);
    ck_assert_int_eq(credit.waits, -1);
    /* the wait saw the client gone: so does every send after it */
    ck_assert_int_eq(credit.end_rc, -1);
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
    ck_assert_uint_eq(pump.inflight, 0);
}
END_TEST

/* A client that stops reading: the credit wait ends after --send-timeout
 * with -1, the handler hears the client is gone, and the connection closes
 * without the client doing anything. */
START_TEST(test_silent_reader_times_out)
{
    int small = 16 * 1024;
    h_nactive_t none = {&pump, 0};
    double start;

    UP(send_to_leaver, "--send-timeout", "0.2", NULL);
    ck_assert_int_eq(setsockopt(client.conn->tp.fd, SOL_SOCKET, SO_SNDBUF,
                                &small, sizeof(small)),
                     0);
    ck_assert_int_eq(
        setsockopt(client.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
    h_sends(&client, "GET /big HTTP/1.1\r\nHost: h\r\n\r\n");
    start = h_now();
    ck_assert_msg(h_run_until(&pump, h_nactive_is, &none),
                  "the silent reader's connection stays open (state %d)",
                  client.conn->state);
    ck_assert(handler_returned);
    ck_assert_int_eq(credit.waits, -1);
    ck_assert_int_eq(credit.end_rc, -1);
    ck_assert(h_now() - start >= 0.19);
}
END_TEST

/* ------------------------------------------------------------------ */
/* streaming                                                          */

static struct {
    bool seen_before_return; /* the client had the part while we ran */
    size_t held_at_end;      /* bytes of the END send still held */
} stream;

/* A part sent without END goes out now: the handler does not return until
 * the client says it has it. The END part is left for the dispatch. */
static void send_stream(sl_conn_t *c, uint32_t gen)
{
    ck_assert_int_eq(send_str(c, gen,
                              "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n"
                              "Connection: close\r\n\r\nfirst",
                              0),
                     0);
    stream.seen_before_return = await_step(&turn.client, 1);
    ck_assert_int_eq(send_str(c, gen, "+last", SL_SEND_END), 0);
    pthread_mutex_lock(&c->x.mu);
    stream.held_at_end = sl_buf_pending(&c->x.out) + sl_buf_pending(&c->tx.buf);
    pthread_mutex_unlock(&c->x.mu);
}

static void *client_stream(void *arg)
{
    (void)arg;
    if (!client_send("GET /stream HTTP/1.1\r\nHost: h\r\n"
                     "Connection: close\r\n\r\n"))
        return client_fail("sending");
    while (client.data == NULL || strstr(client.data, "first") == NULL) {
        char buf[4096];
        ssize_t n = recv(client.fd, buf, sizeof(buf) - 1, 0);
        if (n <= 0)
            return client_fail("waiting for the first part");
        client.data = realloc(client.data, client.len + (size_t)n + 1);
        memcpy(client.data + client.len, buf, (size_t)n);
        client.len += (size_t)n;
        client.data[client.len] = '\0';
        client.cap = client.len;
    }
    step(&turn.client, 1);
    if (!client_read_to_eof(4096))
        return client_fail("reading the rest");
    return script_end();
}

START_TEST(test_stream_reaches_client_before_return)
{
    UP(send_stream, "--timeout", "5", NULL);
    run_client(client_stream);
    ck_assert(handler_returned);
    ck_assert_msg(stream.seen_before_return,
                  "the streamed part sat in a buffer while the app ran");
    ck_assert_uint_eq(stream.held_at_end, 5);
    ck_assert(h_take_response(&client, &resp, false));
    ck_assert_str_eq(resp.body, "first+last");
}
END_TEST

/* sl_inline_wake has nothing to wake: the executor is the caller. It
 * changes nothing, and a wait that follows still works the socket. */
START_TEST(test_wake_is_nothing)
{
    sl_conn_t c;

    memset(&c, 0, sizeof(c));
    c.x.waiting = true;
    sl_inline_wake(&c.x);
    ck_assert(c.x.waiting);
    ck_assert(!c.x.aborted);
}
END_TEST

static Suite *inline_suite(void)
{
    Suite *s = suite_create("inline");
    TCase *tc = tcase_create("body");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_body_in_pieces);
    tcase_add_test(tc, test_chunked_body_in_pieces);
    tcase_add_test(tc, test_client_gone_mid_body);
    tcase_add_test(tc, test_silent_client_times_out);
    suite_add_tcase(s, tc);

    tc = tcase_create("output");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_credit_to_slow_reader);
    tcase_add_test(tc, test_client_gone_while_waiting_for_credit);
    tcase_add_test(tc, test_silent_reader_times_out);
    tcase_add_test(tc, test_stream_reaches_client_before_return);
    tcase_add_test(tc, test_wake_is_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(inline_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
