/* test_conn.c - check suite for worker/loop/conn.c.
 *
 * A real pump in pump mode serves real loopback connections; the test
 * thread is both the loop thread (it runs libev passes until what it waits
 * for holds) and, where a request reaches the executor, the executor: it
 * takes the ticket from the work queue and answers with sl_conn_send() and
 * friends as a lane would. Where the executor side blocks (credit, body
 * reads), a second thread plays the lane while the test thread runs the
 * loop. The client reads what really went over the socket.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "tests/unit/buf_faults.h"
#include "tests/unit/harness.h"
#include "worker/loop/http.h"

static sl_options_t opt;
static sl_pump_t pump;
static h_client_t client;
static h_resp_t resp;

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

/* A pump for "sluice ARGS... testapp:app" with one connected client. */
#define UP(...)                                                                \
    do {                                                                       \
        h_options(&opt, __VA_ARGS__);                                          \
        h_pump_up(&pump, &opt);                                                \
        h_connect(&pump, &client);                                             \
    } while (0)

static bool conn_serving(void *arg)
{
    sl_conn_t *c = arg;

    h_pull(&client);
    return c->state == SL_CONN_SERVING || client.eof;
}

static bool conn_reading(void *arg)
{
    sl_conn_t *c = arg;

    return c->state == SL_CONN_READING;
}

/* Everything sent so far is read and parsed: a message begun, not done,
 * or a request line not yet whole, held until it is (or the loop stopped
 * reading the head: it answered it). */
static bool parsed_all(void *arg)
{
    sl_conn_t *c = arg;
    int unread = -1;

    if (c->state != SL_CONN_READING)
        return true;
    ck_assert_int_eq(ioctl(c->tp.fd, FIONREAD, &unread), 0);
    return unread == 0 && c->rbuf.len > 0 &&
           (!c->in_msg || c->rbuf.off == c->rbuf.len);
}

/* Run until the connection hands a request to the executor; take the
 * ticket and check it names this connection and its current request. */
static void take_request(sl_ticket_t *t)
{
    sl_conn_t *c = client.conn;

    ck_assert_msg(h_run_until(&pump, conn_serving, c),
                  "no request dispatched (state %d)", c->state);
    if (c->state != SL_CONN_SERVING) {
        bool got = h_take_response(&client, &resp, false);
        ck_abort_msg("request refused by the loop with %d",
                     got ? resp.status : 0);
    }
    ck_assert(h_take_ticket(&pump, t));
    ck_assert_uint_eq(t->kind, SL_TICKET_SUBMIT);
    ck_assert_uint_eq(t->idx, c->idx);
    ck_assert_uint_eq(t->gen, c->gen);
}

static int send_str(uint32_t gen, const char *s, int flags)
{
    struct iovec iov = {(void *)s, strlen(s)};

    return sl_conn_send(client.conn, gen, &iov, 1, flags);
}

/* Answer request GEN of C with a 200 whose body is BODY, in one END send. */
static void respond_on(sl_conn_t *c, uint32_t gen, const char *body)
{
    char head[128];
    struct iovec iov[2];

    snprintf(head, sizeof(head),
             "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", strlen(body));
    iov[0] = (struct iovec){head, strlen(head)};
    iov[1] = (struct iovec){(void *)body, strlen(body)};
    ck_assert_int_eq(sl_conn_send(c, gen, iov, 2, SL_SEND_END), 0);
}

static void respond(uint32_t gen, const char *body)
{
    respond_on(client.conn, gen, body);
}

static const char *url(void)
{
    static char buf[4096];
    const sl_req_t *r = &client.conn->req;

    snprintf(buf, sizeof(buf), "%.*s", (int)r->url_len,
             r->hbuf.data + r->url_off);
    return buf;
}

/* The value of request header I, as text. */
static const char *hdr_value(int i)
{
    static char buf[4096];
    const sl_req_t *r = &client.conn->req;

    ck_assert_int_lt(i, r->nhdrs);
    snprintf(buf, sizeof(buf), "%.*s", (int)r->hdrs[i].val_len,
             r->hbuf.data + r->hdrs[i].val_off);
    return buf;
}

/* RAW is refused by the loop with STATUS and a close; the app never sees
 * it, nor the valid request pipelined after it. */
static void assert_refused(const char *raw, int status)
{
    char v[32];

    h_sends(&client, raw);
    h_sends(&client, "GET /after HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_run_until(&pump, conn_serving, client.conn));
    ck_assert_msg(client.conn->state != SL_CONN_SERVING,
                  "request reached the app, wanted %d", status);
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, status);
    ck_assert_str_eq(h_header(resp.head, "Connection", v, sizeof(v)), "close");
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(client.len, 0); /* nothing after the error */
    ck_assert_uint_eq(h_tickets(&pump), 0);
    ck_assert_uint_eq(pump.inflight, 0);
}

/* ------------------------------------------------------------------ */
/* reading and parsing                                                */

START_TEST(test_simple_request_response)
{
    sl_ticket_t t;

    UP(NULL);
    h_sends(&client, "GET /hello HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_str_eq(url(), "/hello");
    ck_assert_uint_eq(pump.inflight, 1);
    respond(t.gen, "hi");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(resp.body, "hi");
    ck_assert_int_eq(client.conn->state, SL_CONN_READING);
    ck_assert_uint_eq(pump.inflight, 0);
    ck_assert_uint_eq(pump.served, 1);
}
END_TEST

/* A head that arrives in several reads is the same head: offsets recorded
 * while parsing the first part must still point at it after the next read.
 * Each case splits the same request at a different place. */
static const char split_req[] = "GET /split/path?q=1 HTTP/1.1\r\n"
                                "Host: example\r\nX-Two: 2\r\n\r\n";
static const size_t split_at[] = {
    8,  /* inside the URL */
    30, /* request line alone, then the headers */
    32, /* inside a header name */
    38, /* inside a header value */
};

START_TEST(test_head_split_across_reads)
{
    sl_ticket_t t;
    sl_conn_t *c;
    size_t at = split_at[_i];

    UP(NULL);
    c = client.conn;
    h_send(&client, split_req, at);
    ck_assert(h_run_until(&pump, parsed_all, c));
    h_send(&client, split_req + at, strlen(split_req) - at);
    take_request(&t);
    ck_assert_str_eq(url(), "/split/path?q=1");
    ck_assert_int_eq(c->req.nhdrs, 2);
    ck_assert_str_eq(hdr_value(0), "example");
    ck_assert_str_eq(hdr_value(1), "2");
}
END_TEST

/* One byte per read, each parsed before the next arrives. */
START_TEST(test_head_one_byte_per_read)
{
    sl_ticket_t t;
    sl_conn_t *c;
    size_t n = strlen(split_req);

    UP(NULL);
    c = client.conn;
    for (size_t i = 0; i + 1 < n; i++) {
        h_send(&client, split_req + i, 1);
        ck_assert(h_run_until(&pump, parsed_all, c));
        ck_assert_msg(c->state == SL_CONN_READING,
                      "request refused after byte %zu ('%c')", i, split_req[i]);
    }
    h_send(&client, split_req + n - 1, 1);
    take_request(&t);
    ck_assert_str_eq(url(), "/split/path?q=1");
    ck_assert_str_eq(hdr_value(0), "example");
}
END_TEST

START_TEST(test_keep_alive_requests_get_new_generations)
{
    sl_ticket_t t;
    uint32_t gen0 = 0;

    UP(NULL);
    for (int i = 0; i < 3; i++) {
        h_sends(&client, "GET /again HTTP/1.1\r\nHost: h\r\n\r\n");
        take_request(&t);
        if (i > 0)
            ck_assert_uint_eq(t.gen, gen0 + (uint32_t)i);
        else
            gen0 = t.gen;
        respond(t.gen, "x");
        ck_assert(h_response(&pump, &client, &resp, false));
        ck_assert_int_eq(resp.status, 200);
    }
    ck_assert_uint_eq(pump.served, 3);
    ck_assert_uint_eq(pump.pool.nactive, 1);
}
END_TEST

/* Requests pipelined in one packet are served one at a time, in order:
 * the second reaches the executor only after the first response ended. */
START_TEST(test_pipelined_in_order)
{
    sl_ticket_t t1, t2;

    UP(NULL);
    h_sends(&client, "GET /one HTTP/1.1\r\nHost: h\r\n\r\n"
                     "POST /two HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
                     "\r\nabc"
                     "GET /three HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t1);
    ck_assert_str_eq(url(), "/one");
    h_run_passes(&pump, 3);
    ck_assert_uint_eq(h_tickets(&pump), 0);
    respond(t1.gen, "1");
    take_request(&t2);
    ck_assert_uint_ne(t2.gen, t1.gen);
    ck_assert_str_eq(url(), "/two");
    char body[8] = {0};
    ck_assert_int_eq(sl_conn_read_body(client.conn, t2.gen, body, sizeof(body),
                                       false, false),
                     3);
    ck_assert_str_eq(body, "abc");
    respond(t2.gen, "2");
    take_request(&t1);
    ck_assert_str_eq(url(), "/three");
    respond(t1.gen, "3");
    for (int i = 1; i <= 3; i++) {
        char want[2] = {(char)('0' + i), 0};
        ck_assert(h_response(&pump, &client, &resp, false));
        ck_assert_str_eq(resp.body, want);
    }
}
END_TEST

#define THREE_GETS                                                             \
    "GET /1 HTTP/1.1\r\nHost: h\r\n\r\n"                                       \
    "GET /2 HTTP/1.1\r\nHost: h\r\n\r\n"                                       \
    "GET /3 HTTP/1.1\r\nHost: h\r\n\r\n"

/* Pump mode, pipelining: a finished answer waits while the next request,
 * already read, is with the executor, and leaves with the next answer in
 * one write; the last of what the client sent writes them all. */
START_TEST(test_pipelined_answers_leave_together)
{
    sl_ticket_t t;
    char body[2] = {0};
    int i;

    UP(NULL);
    pump.holdq.secs = 60; /* the hold timer out of the way */
    h_sends(&client, THREE_GETS);
    for (i = 1; i <= 3; i++) {
        take_request(&t);
        h_pull(&client);
        ck_assert_msg(client.len == 0, "answer written before request %d", i);
        body[0] = (char)('0' + i);
        respond(t.gen, body);
    }
    for (i = 1; i <= 3; i++) {
        ck_assert(h_response(&pump, &client, &resp, false));
        body[0] = (char)('0' + i);
        ck_assert_str_eq(resp.body, body);
    }
}
END_TEST

/* A held answer does not wait for a slow next request: the hold timer
 * writes it while that request is still with the executor. */
START_TEST(test_held_answer_leaves_on_time)
{
    sl_ticket_t t;

    UP(NULL);
    h_sends(&client, THREE_GETS);
    take_request(&t);
    respond(t.gen, "1");
    take_request(&t);
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "1");
    ck_assert_int_eq(client.conn->state, SL_CONN_SERVING);
    ck_assert_ptr_null(pump.holdq.head);
    respond(t.gen, "2");
    take_request(&t);
    respond(t.gen, "3");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "2");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "3");
}
END_TEST

/* Each held answer waits its own time: the timer writes those held
 * longest and leaves younger ones to wait for their next answer. */
START_TEST(test_hold_timer_writes_the_oldest)
{
    h_client_t other;
    sl_ticket_t t, u;

    UP(NULL);
    pump.holdq.secs = 60;
    h_connect(&pump, &other);
    h_sends(&client, THREE_GETS);
    take_request(&t);
    respond(t.gen, "1");
    take_request(&t);
    h_sends(&other, THREE_GETS);
    ck_assert(h_take_ticket(&pump, &u));
    ck_assert_uint_eq(u.idx, other.conn->idx);
    respond_on(other.conn, u.gen, "a");
    ck_assert(h_take_ticket(&pump, &u));
    ck_assert_ptr_eq(pump.holdq.head, &client.conn->tx);
    ck_assert_ptr_eq(pump.holdq.tail, &other.conn->tx);
    client.conn->tx.hold_since -= 60; /* as if held a minute ago */
    ev_feed_event(pump.loop, &pump.holdq.timer, EV_TIMER);
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "1");
    ck_assert_ptr_eq(pump.holdq.head, &other.conn->tx);
    ck_assert(ev_is_active(&pump.holdq.timer));
    h_pull(&other);
    ck_assert_uint_eq(other.len, 0);
    h_client_close(&other);
}
END_TEST

/* Nor for a next response that streams: its first bytes take the held
 * answer along, and a client that leaves takes the hold with it. */
static bool gone_or_ticket(void *arg)
{
    (void)arg;
    return pump.pool.nactive == 0 || h_tickets(&pump) > 0;
}

START_TEST(test_held_answer_leaves_with_the_next_bytes)
{
    sl_ticket_t t;
    int i;

    UP(NULL);
    pump.holdq.secs = 60;
    h_sends(&client, THREE_GETS);
    take_request(&t);
    respond(t.gen, "1");
    take_request(&t);
    ck_assert_int_eq(
        send_str(t.gen, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n", 0), 0);
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "1");
    ck_assert_ptr_null(pump.holdq.head);
    ck_assert_int_eq(send_str(t.gen, "2", SL_SEND_END), 0);
    take_request(&t); /* the end of the second answer is held in turn */
    respond(t.gen, "3");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "2");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "3");

    h_sends(&client, THREE_GETS);
    take_request(&t);
    respond(t.gen, "1");
    take_request(&t);
    ck_assert_ptr_eq(pump.holdq.head, &client.conn->tx);
    h_client_close(&client);
    for (i = 0; i < 3 && pump.pool.nactive > 0; i++) {
        (void)send_str(t.gen, "HTTP/1.1 204 No\r\n\r\n", SL_SEND_END);
        ck_assert(h_run_until(&pump, gone_or_ticket, NULL));
        if (h_tickets(&pump) > 0)
            ck_assert(h_take_ticket(&pump, &t));
    }
    ck_assert_uint_eq(pump.pool.nactive, 0);
    ck_assert_ptr_null(pump.holdq.head);
}
END_TEST

/* Nothing pipelined after "Connection: close" is served. */
START_TEST(test_nothing_served_after_close)
{
    sl_ticket_t t;

    UP(NULL);
    h_sends(&client, "GET /last HTTP/1.1\r\nHost: h\r\nConnection: close\r\n"
                     "\r\nGET /never HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_str_eq(url(), "/last");
    respond(t.gen, "bye");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(client.len, 0);
    ck_assert_uint_eq(h_tickets(&pump), 0);
}
END_TEST

/* Requests the client pipelined before closing its side still count. */
START_TEST(test_pipelined_before_eof_are_served)
{
    sl_ticket_t t;

    UP(NULL);
    h_sends(&client, "GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
                     "GET /b HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert_int_eq(shutdown(client.fd, SHUT_WR), 0);
    take_request(&t);
    ck_assert_str_eq(url(), "/a");
    respond(t.gen, "a");
    take_request(&t);
    ck_assert_str_eq(url(), "/b");
    respond(t.gen, "b");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "a");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "b");
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(pump.pool.nactive, 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* refused by the loop                                                */

static const struct {
    const char *name;
    const char *raw;
} bad_requests[] = {
    {"obs-fold", "GET / HTTP/1.1\r\nHost: h\r\nX-A: one\r\n two\r\n\r\n"},
    {"obs-fold-tab", "GET / HTTP/1.1\r\nHost: h\r\nX-A: one\r\n\ttwo\r\n\r\n"},
    {"ctl-in-value", "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\001b\r\n\r\n"},
    {"del-in-value", "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\177b\r\n\r\n"},
    {"nul-in-value", "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\0b\r\n\r\n"},
    {"cl-and-te", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
    {"te-and-cl", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                  "Content-Length: 5\r\n\r\n0\r\n\r\n"},
    {"two-cls", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                "Content-Length: 6\r\n\r\nhello!"},
    {"same-cl-twice", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                      "Content-Length: 5\r\n\r\nhello"},
    {"bad-chunk-size", "POST / HTTP/1.1\r\nHost: h\r\n"
                       "Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n"
                       "0\r\n\r\n"},
    {"chunk-too-long", "POST / HTTP/1.1\r\nHost: h\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n"
                       "0\r\n\r\n"},
    {"space-in-name", "GET / HTTP/1.1\r\nHost: h\r\nBad Name: v\r\n\r\n"},
    {"garbage", "GARBAGE\r\n\r\n"},
    {"bare-lf-in-value", "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\nb\r\n\r\n"},
    {"te-not-chunked", "POST / HTTP/1.1\r\nHost: h\r\n"
                       "Transfer-Encoding: gzip\r\n\r\nabc"},
    {"te-chunked-not-last", "POST / HTTP/1.1\r\nHost: h\r\n"
                            "Transfer-Encoding: chunked, gzip\r\n\r\n"
                            "3\r\nabc\r\n0\r\n\r\n"},
    {"plus-content-length", "POST / HTTP/1.1\r\nHost: h\r\n"
                            "Content-Length: +3\r\n\r\nabc"},
};

START_TEST(test_bad_request_is_400)
{
    UP(NULL);
    /* strlen() would stop at the NUL of "nul-in-value" */
    const char *raw = bad_requests[_i].raw;
    size_t n = strlen(raw);
    if (strcmp(bad_requests[_i].name, "nul-in-value") == 0)
        n = strlen(raw) + 1 + strlen(raw + strlen(raw) + 1);
    h_send(&client, raw, n);
    h_sends(&client, "GET /after HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert_msg(h_response(&pump, &client, &resp, false),
                  "%s: no response (state %d)", bad_requests[_i].name,
                  client.conn->state);
    ck_assert_msg(resp.status == 400, "%s: got %d", bad_requests[_i].name,
                  resp.status);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(client.len, 0);
    ck_assert_uint_eq(h_tickets(&pump), 0);
}
END_TEST

/* A request line longer than --limit-request-line: 414. */
START_TEST(test_request_line_too_long)
{
    char raw[512];

    UP("--limit-request-line", "100", NULL);
    snprintf(raw, sizeof(raw), "GET /%0200d HTTP/1.1\r\nHost: h\r\n\r\n", 0);
    assert_refused(raw, 414);
}
END_TEST

/* The limit is on the request line: a line of exactly the limit passes,
 * one byte more does not, whatever the method's length. */
START_TEST(test_request_line_at_limit)
{
    char raw[512], path[128];
    sl_ticket_t t;

    UP("--limit-request-line", "100", NULL);
    /* "GET " + path + " HTTP/1.1" = 100 bytes */
    memset(path, 'a', sizeof(path));
    path[0] = '/';
    path[100 - 13] = '\0';
    snprintf(raw, sizeof(raw), "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", path);
    ck_assert_uint_eq(strstr(raw, "\r\n") - raw, 100);
    h_sends(&client, raw);
    take_request(&t);
    ck_assert_str_eq(url(), path);
}
END_TEST

START_TEST(test_request_line_over_limit_by_one)
{
    char raw[512], path[128];

    UP("--limit-request-line", "100", NULL);
    memset(path, 'a', sizeof(path));
    path[0] = '/';
    path[101 - 13] = '\0';
    snprintf(raw, sizeof(raw), "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", path);
    assert_refused(raw, 414);
}
END_TEST

/* --help: "longest request line, 0 = 8190". */
START_TEST(test_request_line_limit_zero_means_8190)
{
    static char raw[10000];

    UP("--limit-request-line", "0", NULL);
    snprintf(raw, sizeof(raw), "GET /%09000d HTTP/1.1\r\nHost: h\r\n\r\n", 0);
    assert_refused(raw, 414);
}
END_TEST

START_TEST(test_too_many_headers)
{
    UP("--limit-request-fields", "3", NULL);
    assert_refused("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n",
                   431);
}
END_TEST

START_TEST(test_headers_at_field_limit)
{
    sl_ticket_t t;

    UP("--limit-request-fields", "3", NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n");
    take_request(&t);
    ck_assert_int_eq(client.conn->req.nhdrs, 3);
}
END_TEST

/* --help: "most header fields, 0 = 32768". */
START_TEST(test_field_limit_zero_means_32768)
{
    sl_ticket_t t;

    UP("--limit-request-fields", "0", NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n");
    take_request(&t);
    ck_assert_int_eq(client.conn->req.nhdrs, 3);
}
END_TEST

START_TEST(test_header_field_too_big)
{
    char raw[512];

    UP("--limit-request-field-size", "50", NULL);
    /* name 5 + value 46 = 51: the limit counts name and value */
    snprintf(raw, sizeof(raw),
             "GET / HTTP/1.1\r\nHost: h\r\nX-Big: %046d\r\n\r\n", 0);
    assert_refused(raw, 431);
}
END_TEST

START_TEST(test_header_field_at_size_limit)
{
    char raw[512];
    sl_ticket_t t;

    UP("--limit-request-field-size", "50", NULL);
    /* name 5 + value 45 = 50 */
    snprintf(raw, sizeof(raw),
             "GET / HTTP/1.1\r\nHost: h\r\nX-Big: %045d\r\n\r\n", 0);
    h_sends(&client, raw);
    take_request(&t);
    ck_assert_int_eq(strlen(hdr_value(1)), 45);
}
END_TEST

START_TEST(test_huge_header_name_is_431)
{
    static char raw[20000];

    UP("--limit-request-field-size", "100", NULL);
    memset(raw, 0, sizeof(raw));
    strcpy(raw, "GET / HTTP/1.1\r\nHost: h\r\nX");
    memset(raw + strlen(raw), 'n', 300);
    strcat(raw, ": v\r\n\r\n");
    assert_refused(raw, 431);
}
END_TEST

/* Send N bytes without blocking while the loop runs, until all are sent
 * or the loop stops reading a head (it answered it, or dispatched it). */
static void feed(const char *data, size_t n)
{
    double end = h_now() + H_DEADLINE;
    size_t at = 0;

    while (at < n && client.conn->state == SL_CONN_READING && h_now() < end) {
        ssize_t w =
            send(client.fd, data + at, n - at, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0)
            at += (size_t)w;
        else if (errno != EAGAIN && errno != EWOULDBLOCK)
            break;
        ev_run(pump.loop, EVRUN_NOWAIT);
    }
}

static bool answered_or_serving(void *arg)
{
    sl_conn_t *c = arg;

    h_pull(&client);
    return c->state == SL_CONN_SERVING || client.len > 0 || client.eof;
}

/* Without a per-field limit, a head is still capped as a whole (4 MB). */
START_TEST(test_head_hard_cap)
{
    enum { SIZE = 5 * 1024 * 1024 };
    static char raw[SIZE];
    const char *start = "GET / HTTP/1.1\r\nHost: h\r\nX-Huge: ";

    UP("--limit-request-field-size", "0", NULL);
    memset(raw, 'v', SIZE);
    memcpy(raw, start, strlen(start));
    memcpy(raw + SIZE - 4, "\r\n\r\n", 4);
    feed(raw, SIZE);
    ck_assert(h_run_until(&pump, answered_or_serving, client.conn));
    ck_assert_msg(client.conn->state != SL_CONN_SERVING,
                  "a %d-byte head reached the app (rbuf holds %zu bytes)", SIZE,
                  client.conn->rbuf.len);
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 431);
}
END_TEST

/* A bad chunk in the packet that carries the head: the app never runs. */
START_TEST(test_bad_first_chunk_never_reaches_app)
{
    UP(NULL);
    assert_refused("POST / HTTP/1.1\r\nHost: h\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n5\r\nhelloXX\r\n",
                   400);
}
END_TEST

static bool body_pending(void *arg)
{
    sl_conn_t *c = arg;
    bool some;

    pthread_mutex_lock(&c->mu);
    some = sl_buf_pending(&c->body) > 0;
    pthread_mutex_unlock(&c->mu);
    return some;
}

static bool has_error(void *arg)
{
    sl_conn_t *c = arg;

    return c->http_error != 0;
}

/* A bad chunk after the app began: it sees the body end with an error,
 * and the client gets a 400 instead of the app's unsent answer. */
START_TEST(test_bad_later_chunk_is_400)
{
    sl_ticket_t t;
    char buf[64];
    sl_conn_t *c;

    UP(NULL);
    c = client.conn;
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
    take_request(&t);
    ck_assert(h_run_until(&pump, body_pending, c));
    ck_assert_int_eq(
        sl_conn_read_body(c, t.gen, buf, sizeof(buf), false, false), 3);
    h_sends(&client, "zz\r\n");
    ck_assert(h_run_until(&pump, has_error, c));
    ck_assert_int_eq(c->http_error, 400);
    ck_assert(c->aborted);
    ck_assert_int_eq(
        sl_conn_read_body(c, t.gen, buf, sizeof(buf), false, false), -1);
    ck_assert_int_eq(send_str(t.gen, "HTTP/1.1 200 OK\r\n\r\n", SL_SEND_END),
                     -1);
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 400);
    ck_assert(h_wait_eof(&pump, &client));
}
END_TEST

/* ------------------------------------------------------------------ */
/* request bodies                                                     */

static bool body_done(void *arg)
{
    sl_conn_t *c = arg;
    bool done;

    pthread_mutex_lock(&c->mu);
    done = c->body_done || c->aborted;
    pthread_mutex_unlock(&c->mu);
    return done;
}

START_TEST(test_read_body)
{
    sl_ticket_t t;
    sl_conn_t *c;
    char buf[64];

    UP(NULL);
    c = client.conn;
    h_sends(&client,
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n");
    take_request(&t);
    /* nothing yet: without WAIT the caller is told to wait */
    ck_assert_int_eq(
        sl_conn_read_body(c, t.gen, buf, sizeof(buf), false, false), -2);
    h_sends(&client, "ab\ncd\nefgh");
    ck_assert(h_run_until(&pump, body_done, c));
    ck_assert_int_eq(sl_conn_read_body(c, t.gen, buf, 0, false, false), 0);
    ck_assert_int_eq(sl_conn_read_body(c, t.gen, buf, sizeof(buf), true, false),
                     3);
    ck_assert(memcmp(buf, "ab\n", 3) == 0);
    ck_assert_int_eq(sl_conn_read_body(c, t.gen, buf, 2, true, false), 2);
    ck_assert(memcmp(buf, "cd", 2) == 0);
    ck_assert_int_eq(sl_conn_read_body(c, t.gen, buf, sizeof(buf), true, false),
                     1);
    ck_assert_int_eq(
        sl_conn_read_body(c, t.gen, buf, sizeof(buf), false, false), 4);
    ck_assert(memcmp(buf, "efgh", 4) == 0);
    /* the end, however often it is asked for */
    ck_assert_int_eq(sl_conn_read_body(c, t.gen, buf, sizeof(buf), false, true),
                     0);
    ck_assert_int_eq(
        sl_conn_read_body(c, t.gen, buf, sizeof(buf), false, false), 0);
    /* a stale request reads nothing */
    ck_assert_int_eq(
        sl_conn_read_body(c, t.gen + 1, buf, sizeof(buf), false, false), -1);
    ck_assert_int_eq(
        sl_conn_read_body(c, t.gen - 1, buf, sizeof(buf), false, false), -1);
}
END_TEST

START_TEST(test_no_body_reads_end)
{
    sl_ticket_t t;
    char buf[8];

    UP(NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_int_eq(
        sl_conn_read_body(client.conn, t.gen, buf, sizeof(buf), false, false),
        0);
}
END_TEST

START_TEST(test_chunked_body)
{
    sl_ticket_t t;
    sl_conn_t *c;
    char buf[64] = {0};
    long n, got = 0;

    UP(NULL);
    c = client.conn;
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n"
                     "5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n"
                     "0\r\nX-Trailer: t\r\n\r\n");
    take_request(&t);
    ck_assert(h_run_until(&pump, body_done, c));
    while ((n = sl_conn_read_body(c, t.gen, buf + got,
                                  sizeof(buf) - 1 - (size_t)got, false,
                                  false)) > 0)
        got += n;
    ck_assert_int_eq(n, 0);
    ck_assert_str_eq(buf, "hello 0123456789");
    /* the trailer is not a header of the request */
    ck_assert_int_eq(c->req.nhdrs, 2);
}
END_TEST

/* A lane that waits for body bytes is woken when they arrive. */
START_TEST(test_read_body_waits_for_bytes)
{
    sl_ticket_t t;
    pthread_t th;
    h_reader_t r = {0};

    UP(NULL);
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n");
    take_request(&t);
    r.c = client.conn;
    r.gen = t.gen;
    ck_assert_int_eq(pthread_create(&th, NULL, h_reader_main, &r), 0);
    ck_assert(h_run_until(&pump, h_executor_waiting, r.c));
    ck_assert(!h_reader_done(&r));
    h_sends(&client, "hello");
    ck_assert(h_run_until(&pump, h_reader_done, &r));
    pthread_join(th, NULL);
    ck_assert_int_eq(r.rc, 5);
    ck_assert_str_eq(r.buf, "hello");
}
END_TEST

/* A waiting lane learns that the client left half way through its body. */
START_TEST(test_client_gone_mid_body)
{
    sl_ticket_t t;
    pthread_t th;
    h_reader_t r = {0};
    h_nactive_t none = {&pump, 0};

    UP(NULL);
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 50\r\n"
                     "\r\n0123456789");
    take_request(&t);
    r.c = client.conn;
    r.gen = t.gen;
    ck_assert_int_eq(
        sl_conn_read_body(r.c, t.gen, r.buf, sizeof(r.buf), false, true), 10);
    ck_assert_int_eq(pthread_create(&th, NULL, h_reader_main, &r), 0);
    ck_assert(h_run_until(&pump, h_executor_waiting, r.c));
    close(client.fd);
    client.fd = -1;
    ck_assert(h_run_until(&pump, h_reader_done, &r));
    pthread_join(th, NULL);
    ck_assert_int_eq(r.rc, -1);
    ck_assert(r.c->aborted);
    /* sending fails, but END still ends the request and frees the slot */
    ck_assert_int_eq(send_str(t.gen, "x", SL_SEND_END), -1);
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
    ck_assert_uint_eq(pump.inflight, 0);
}
END_TEST

/* --limit-request-body over a chunked body, all in the first packet. */
START_TEST(test_chunked_body_over_limit)
{
    UP("--limit-request-body", "10", NULL);
    assert_refused("POST / HTTP/1.1\r\nHost: h\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n"
                   "8\r\n01234567\r\n8\r\n89abcdef\r\n0\r\n\r\n",
                   413);
}
END_TEST

/* The limit is on the body, not on what is buffered: a chunked body that
 * the app reads as it streams in is still refused past the limit. */
START_TEST(test_streamed_chunked_body_over_limit)
{
    sl_ticket_t t;
    sl_conn_t *c;
    char buf[64];
    long n, total = 0;

    UP("--limit-request-body", "10", NULL);
    c = client.conn;
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n");
    take_request(&t);
    h_sends(&client, "8\r\n01234567\r\n");
    ck_assert(h_run_until(&pump, body_pending, c));
    total += sl_conn_read_body(c, t.gen, buf, sizeof(buf), false, false);
    ck_assert_int_eq(total, 8);
    h_sends(&client, "8\r\n89abcdef\r\n0\r\n\r\n");
    ck_assert(h_run_until(&pump, body_done, c));
    while ((n = sl_conn_read_body(c, t.gen, buf, sizeof(buf), false, false)) >
           0)
        total += n;
    ck_assert_msg(c->http_error == 413,
                  "a %ld-byte chunked body passed --limit-request-body 10",
                  total);
}
END_TEST

/* The loop stops reading a body the app does not read: at most the body
 * window is buffered, and reading on resumes the flow. */
/* Body bytes the socket already holds are taken in one pass, up to the
 * window, not one read per pass: the app waiting for them hears once. */
START_TEST(test_body_burst_in_one_pass)
{
    enum { SIZE = 200 * 1024 };
    static char body[SIZE];
    int big = 4 * 1024 * 1024;
    sl_ticket_t t;
    sl_conn_t *c;
    char head[128];
    size_t buffered, queued = 0;

    UP(NULL);
    c = client.conn;
    ck_assert_int_eq(
        setsockopt(c->tp.fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big)), 0);
    memset(body, 'b', sizeof(body));
    snprintf(head, sizeof(head),
             "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n", SIZE);
    h_sends(&client, head);
    take_request(&t);
    h_send(&client, body, SIZE);
    /* wait until the kernel holds all of it on the server's side */
    for (int i = 0; i < 1000 && queued < SIZE; i++) {
        int n = 0;
        ck_assert_int_eq(ioctl(c->tp.fd, FIONREAD, &n), 0);
        queued = (size_t)n;
        if (queued < SIZE)
            usleep(1000);
    }
    ck_assert_uint_eq(queued, SIZE);
    ev_run(pump.loop, EVRUN_NOWAIT);
    pthread_mutex_lock(&c->mu);
    buffered = sl_buf_pending(&c->body);
    pthread_mutex_unlock(&c->mu);
    ck_assert_uint_eq(buffered, SIZE);
}
END_TEST

START_TEST(test_body_window)
{
    enum { SIZE = 2 * 1024 * 1024 };
    sl_ticket_t t;
    sl_conn_t *c;
    static char body[SIZE], got[SIZE];
    char head[128];
    long n, total = 0;
    int small = 64 * 1024;

    UP(NULL);
    c = client.conn;
    ck_assert_int_eq(
        setsockopt(c->tp.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
    ck_assert_int_eq(
        setsockopt(client.fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
    for (size_t i = 0; i < SIZE; i++)
        body[i] = (char)('a' + i % 23);
    snprintf(head, sizeof(head),
             "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n", SIZE);
    h_sends(&client, head);
    take_request(&t);
    /* the client's send would block: feed it from the loop side */
    ck_assert_int_eq(fcntl(client.fd, F_SETFL, O_NONBLOCK), 0);
    size_t sent = 0;
    for (int pass = 0; pass < 2000 && sent < SIZE; pass++) {
        ssize_t w = send(client.fd, body + sent, SIZE - sent, MSG_NOSIGNAL);
        if (w > 0)
            sent += (size_t)w;
        ev_run(pump.loop, EVRUN_NOWAIT);
    }
    ck_assert_uint_lt(sent, SIZE); /* the loop stopped taking it */
    pthread_mutex_lock(&c->mu);
    size_t buffered = sl_buf_pending(&c->body);
    pthread_mutex_unlock(&c->mu);
    /* the window, overshot by one read at most */
    ck_assert_uint_le(buffered, SL_CONN_BODY_WINDOW + SL_CONN_BODY_READ);
    ck_assert(!(c->io.events & EV_READ) || !ev_is_active(&c->io));
    /* read it all while the loop runs: everything arrives, in order */
    double end = h_now() + H_DEADLINE;
    while (total < SIZE && h_now() < end) {
        ssize_t w = sent < SIZE ? send(client.fd, body + sent, SIZE - sent,
                                       MSG_NOSIGNAL)
                                : 0;
        if (w > 0)
            sent += (size_t)w;
        ev_run(pump.loop, EVRUN_NOWAIT);
        while ((n = sl_conn_read_body(c, t.gen, got + total,
                                      SIZE - (size_t)total, false, false)) > 0)
            total += n;
    }
    ck_assert_int_eq(total, SIZE);
    ck_assert(memcmp(got, body, SIZE) == 0);
}
END_TEST

/* Expect: 100-continue gets its interim response when the request is
 * handed over, before the body is sent. */
START_TEST(test_expect_continue)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    sl_ticket_t t;
    char buf[8];

    UP(NULL);
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n"
                     "Expect: 100-continue\r\n\r\n");
    take_request(&t);
    ck_assert(h_wait_bytes(&pump, &client, strlen(cont)));
    ck_assert_str_eq(client.data, cont);
    client.len = 0;
    ck_assert(!client.conn->tx.wrote_any); /* an error may still replace it */
    h_sends(&client, "body");
    ck_assert(h_run_until(&pump, body_done, client.conn));
    ck_assert_int_eq(
        sl_conn_read_body(client.conn, t.gen, buf, sizeof(buf), false, false),
        4);
    respond(t.gen, "ok");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
}
END_TEST

/* No memory for the interim answer: none is sent, and the response's
 * first bytes are the response's (they count as written). */
START_TEST(test_expect_continue_out_of_memory)
{
    sl_ticket_t t;

    UP(NULL);
    /* a fresh pump's cache is empty: the read buffer, the header array,
     * the head's copy and the executor's output buffer are new blocks;
     * the interim answer's cannot be */
    hb_fail_after(4);
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n"
                     "Expect: 100-continue\r\n\r\n");
    take_request(&t);
    hb_fail_after(-1);
    ck_assert_uint_eq(client.conn->tx.interim, 0);
    respond(t.gen, "ok");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
    ck_assert(client.conn->tx.wrote_any);
}
END_TEST

/* A body the app did not read is dropped, never taken for the next
 * request: what looks like a request inside it is body bytes. */
START_TEST(test_unread_body_closes)
{
    sl_ticket_t t;
    h_nactive_t none = {&pump, 0};
    char rest[66];

    UP(NULL);
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n"
                     "\r\nGET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    respond(t.gen, "no");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
    ck_assert_uint_eq(h_tickets(&pump), 0);
    /* the other 65 body bytes, then a real request */
    memset(rest, 'x', 65);
    rest[65] = '\0';
    h_sends(&client, rest);
    h_sends(&client, "GET /next HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_str_eq(url(), "/next");
    respond(t.gen, "yes");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
    close(client.fd);
    client.fd = -1;
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
}
END_TEST

/* A complete body the app ignored does not stop keep-alive. */
START_TEST(test_ignored_complete_body_keeps_alive)
{
    sl_ticket_t t;

    UP(NULL);
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
                     "\r\nabcGET /next HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert(h_run_until(&pump, body_done, client.conn));
    respond(t.gen, "1");
    take_request(&t);
    ck_assert_str_eq(url(), "/next");
}
END_TEST

/* ------------------------------------------------------------------ */
/* the executor's output                                              */

START_TEST(test_send_rules)
{
    sl_ticket_t t;

    UP(NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_int_eq(send_str(t.gen + 1, "stale", 0), -1);
    ck_assert_int_eq(send_str(t.gen, "HTTP/1.1 200 OK\r\n", 0), 0);
    ck_assert_int_eq(send_str(t.gen, "Content-Length: 2\r\n\r\n", 0), 0);
    ck_assert_int_eq(sl_conn_send(client.conn, t.gen, NULL, 0, 0), 0);
    ck_assert_int_eq(send_str(t.gen, "ok", SL_SEND_END), 0);
    ck_assert_int_eq(send_str(t.gen, "late", 0), -1);
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "ok");
    h_run_passes(&pump, 3);
    h_pull(&client);
    ck_assert_uint_eq(client.len, 0); /* neither "stale" nor "late" */
}
END_TEST

START_TEST(test_send_close)
{
    sl_ticket_t t;

    UP(NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_int_eq(send_str(t.gen,
                              "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
                              SL_SEND_END | SL_SEND_CLOSE),
                     0);
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert(h_wait_eof(&pump, &client));
}
END_TEST

START_TEST(test_connection_close_request)
{
    sl_ticket_t t;
    h_nactive_t none = {&pump, 0};

    UP(NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    take_request(&t);
    respond(t.gen, "bye");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert(h_wait_eof(&pump, &client));
    /* lingering until the client closes too */
    ck_assert_int_eq(client.conn->state, SL_CONN_CLOSING);
    close(client.fd);
    client.fd = -1;
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
}
END_TEST

START_TEST(test_http10_closes)
{
    sl_ticket_t t;

    UP(NULL);
    h_sends(&client, "GET / HTTP/1.0\r\n\r\n");
    take_request(&t);
    respond(t.gen, "bye");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert(h_wait_eof(&pump, &client));
}
END_TEST

typedef struct {
    sl_conn_t *c;
    uint32_t gen;
    int rc;
    bool done; /* under c->mu */
} waiter_t;

static void *wait_credit(void *arg)
{
    waiter_t *w = arg;
    int rc = sl_conn_wait_credit(w->c, w->gen);

    pthread_mutex_lock(&w->c->mu);
    w->rc = rc;
    w->done = true;
    pthread_mutex_unlock(&w->c->mu);
    return NULL;
}

static bool waiter_done(void *arg)
{
    waiter_t *w = arg;
    bool done;

    pthread_mutex_lock(&w->c->mu);
    done = w->done;
    pthread_mutex_unlock(&w->c->mu);
    return done;
}

static bool conn_blocked_on_write(void *arg)
{
    sl_conn_t *c = arg;

    return ev_is_active(&c->io) && (c->io.events & EV_WRITE);
}

/* The client reads what it gets until the credit waiter returns. */
static bool reading_until_done(void *arg)
{
    h_pull(&client);
    return waiter_done(arg);
}

/* Past the credit, send says so and wait_credit blocks until the client
 * has taken enough. */
START_TEST(test_credit)
{
    enum { SIZE = 600 * 1024 };
    static char data[SIZE];
    sl_ticket_t t;
    pthread_t th;
    waiter_t w = {0};
    int small = 16 * 1024;
    struct iovec iov = {data, SIZE};

    UP(NULL);
    ck_assert_int_eq(
        setsockopt(client.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
    ck_assert_int_eq(setsockopt(client.conn->tp.fd, SOL_SOCKET, SO_SNDBUF,
                                &small, sizeof(small)),
                     0);
    memset(data, 'c', SIZE);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_int_eq(send_str(t.gen, "small", 0), 0);
    ck_assert_int_eq(sl_conn_send(client.conn, t.gen, &iov, 1, 0), 1);
    w.c = client.conn;
    w.gen = t.gen;
    ck_assert_int_eq(pthread_create(&th, NULL, wait_credit, &w), 0);
    ck_assert(h_run_until(&pump, conn_blocked_on_write, client.conn));
    ck_assert(h_run_until(&pump, h_executor_waiting, client.conn));
    ck_assert(!waiter_done(&w));
    ck_assert(h_run_until(&pump, reading_until_done, &w));
    pthread_join(th, NULL);
    ck_assert_int_eq(w.rc, 0);
    ck_assert_int_eq(sl_conn_send(client.conn, t.gen, NULL, 0, SL_SEND_END), 0);
    ck_assert(h_wait_bytes(&pump, &client, SIZE + 5));
    ck_assert_uint_eq(client.len, SIZE + 5);
    ck_assert(h_run_until(&pump, conn_reading, client.conn));
}
END_TEST

START_TEST(test_credit_wait_on_stale_request)
{
    sl_ticket_t t;

    UP(NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_int_eq(sl_conn_wait_credit(client.conn, t.gen), 0);
    ck_assert_int_eq(sl_conn_wait_credit(client.conn, t.gen + 1), -1);
}
END_TEST

static bool h_released_one(void *arg)
{
    (void)arg;
    return h_nreleased == 1;
}

/* An unlinked temporary file holding CONTENT. */
static int temp_file(const char *content)
{
    char path[] = "/tmp/sl-test-conn-XXXXXX";
    int fd = mkstemp(path);

    ck_assert_int_ge(fd, 0);
    unlink(path);
    ck_assert_int_eq(write(fd, content, strlen(content)), strlen(content));
    return fd;
}

START_TEST(test_sendfile)
{
    sl_ticket_t t;
    int fd = temp_file("0123456789abcdef");

    UP(NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_int_eq(
        send_str(t.gen, "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n", 0), 0);
    ck_assert_int_eq(sl_conn_sendfile(client.conn, t.gen, fd, 4, 8, 0), 0);
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "456789ab");
    /* the connection owned the descriptor and closed it */
    ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
    ck_assert_int_eq(errno, EBADF);
    ck_assert_int_eq(client.conn->state, SL_CONN_READING);
}
END_TEST

START_TEST(test_sendfile_refused_closes_fd)
{
    sl_ticket_t t;
    int fd = temp_file("x");

    UP(NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_int_eq(sl_conn_sendfile(client.conn, t.gen + 1, fd, 0, 1, 0), -1);
    ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
    fd = temp_file("y");
    ck_assert_int_eq(send_str(t.gen, "HTTP/1.1 204 No\r\n\r\n", SL_SEND_END),
                     0);
    ck_assert_int_eq(sl_conn_sendfile(client.conn, t.gen, fd, 0, 1, 0), -1);
    ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
}
END_TEST

/* A file that shrank below the promised length ends the connection
 * instead of leaving the client waiting for bytes that never come. */
START_TEST(test_sendfile_short_file_closes)
{
    sl_ticket_t t;
    int fd = temp_file("abc");

    UP(NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_int_eq(
        send_str(t.gen, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", 0), 0);
    ck_assert_int_eq(sl_conn_sendfile(client.conn, t.gen, fd, 0, 10, 0), 0);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert(strstr(client.data, "\r\n\r\nabc") != NULL);
}
END_TEST

/* Lent bytes go out after the head without being copied, and their owner
 * comes back once, when they are written. */
START_TEST(test_sendmem)
{
    static const char body[] = "lent-bytes";
    static int owner;
    sl_ticket_t t;

    h_nreleased = 0;
    UP(NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_int_eq(
        send_str(t.gen, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", 0), 0);
    ck_assert_int_eq(sl_conn_sendmem(client.conn, t.gen, body, 10, &owner, 0),
                     0);
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "lent-bytes");
    ck_assert_int_eq(h_nreleased, 1);
    ck_assert_ptr_eq(h_released[0], &owner);
    ck_assert_int_eq(client.conn->state, SL_CONN_READING);
}
END_TEST

/* A lent body larger than the socket takes at once: written over several
 * passes, whole, given back only at its end. */
START_TEST(test_sendmem_large)
{
    enum { N = 8 * 1024 * 1024 };
    char *body = malloc(N), head[80];
    sl_ticket_t t;
    size_t i;

    ck_assert_ptr_nonnull(body);
    for (i = 0; i < N; i++)
        body[i] = (char)(i % 251);
    h_nreleased = 0;
    UP(NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    snprintf(head, sizeof(head),
             "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", N);
    ck_assert_int_eq(send_str(t.gen, head, 0), 0);
    ck_assert_int_eq(sl_conn_sendmem(client.conn, t.gen, body, N, body, 0), 0);
    h_run_passes(&pump, 4);
    ck_assert_int_eq(h_nreleased, 0); /* the client has not read it yet */
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_uint_eq(resp.body_len, N);
    ck_assert(memcmp(resp.body, body, N) == 0);
    ck_assert_int_eq(h_nreleased, 1);
    ck_assert_ptr_eq(h_released[0], body);
    free(body);
}
END_TEST

/* Refused (a stale request, or after END), nothing is lent: the owner
 * stays the caller's and is never given back. A client that leaves in
 * the middle gets the owner given back with the connection. */
START_TEST(test_sendmem_refused_and_dropped)
{
    enum { N = 8 * 1024 * 1024 };
    static int owner;
    char *body = calloc(1, N);
    sl_ticket_t t;

    ck_assert_ptr_nonnull(body);
    h_nreleased = 0;
    UP(NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_int_eq(sl_conn_sendmem(client.conn, t.gen + 1, "x", 1, &owner, 0),
                     -1);
    ck_assert_int_eq(send_str(t.gen, "HTTP/1.1 204 No\r\n\r\n", SL_SEND_END),
                     0);
    ck_assert_int_eq(sl_conn_sendmem(client.conn, t.gen, "x", 1, &owner, 0),
                     -1);
    ck_assert(h_response(&pump, &client, &resp, true));
    ck_assert_int_eq(h_nreleased, 0);

    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_int_eq(
        send_str(t.gen, "HTTP/1.1 200 OK\r\nContent-Length: 8388608\r\n\r\n",
                 0),
        0);
    ck_assert_int_eq(sl_conn_sendmem(client.conn, t.gen, body, N, body, 0), 0);
    h_run_passes(&pump, 4);
    ck_assert_int_eq(h_nreleased, 0);
    h_client_close(&client);
    ck_assert(h_run_until(&pump, h_released_one, NULL));
    ck_assert_ptr_eq(h_released[0], body);
    free(body);
}
END_TEST

/* Out of memory while a part is queued: none of it goes out, END still
 * ends the request, and the connection closes without another byte. */
START_TEST(test_send_out_of_memory_drops_the_part)
{
    static char big[2000];
    struct iovec iov[2] = {{"Content-Length: 2000\r\n\r\n", 24},
                           {big, sizeof(big)}};
    sl_ticket_t t;

    UP(NULL);
    memset(big, 'b', sizeof(big));
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_int_eq(send_str(t.gen, "HTTP/1.1 200 OK\r\n", 0), 0);
    hb_fail_after(0); /* the first part fits, the second needs growth */
    ck_assert_int_eq(sl_conn_send(client.conn, t.gen, iov, 2, SL_SEND_END), -1);
    hb_fail_after(-1);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_msg(memmem(client.data, client.len, "Content-Length", 14) == NULL,
                  "a part cut short went out: %.*s", (int)client.len,
                  client.data);
    ck_assert_uint_eq(pump.inflight, 0);
}
END_TEST

static bool out_taken(void *arg)
{
    sl_conn_t *c = arg;
    bool taken;

    pthread_mutex_lock(&c->mu);
    taken = sl_buf_pending(&c->out) == 0;
    pthread_mutex_unlock(&c->mu);
    return taken;
}

/* Out of memory while the loop takes the executor's output behind bytes
 * still being written: what follows the lost bytes never goes out. */
START_TEST(test_take_out_of_memory_closes)
{
    enum { A = 512 * 1024 - 10, B = 1000 };
    static char a[A], b[B];
    struct iovec ia = {a, A}, ib = {b, B};
    sl_ticket_t t;
    int small = 16 * 1024;

    UP(NULL);
    ck_assert_int_eq(
        setsockopt(client.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
    ck_assert_int_eq(setsockopt(client.conn->tp.fd, SOL_SOCKET, SO_SNDBUF,
                                &small, sizeof(small)),
                     0);
    memset(a, 'a', A);
    memset(b, 'b', B);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_int_eq(sl_conn_send(client.conn, t.gen, &ia, 1, 0), 1);
    ck_assert(h_run_until(&pump, conn_blocked_on_write, client.conn));
    /* B grows the executor's buffer; taking it behind A must grow the
     * loop's, which fails */
    hb_fail_after(1);
    ck_assert_int_eq(sl_conn_send(client.conn, t.gen, &ib, 1, 0), 1);
    ck_assert_int_eq(send_str(t.gen, "zzz", SL_SEND_END), 0);
    ck_assert(h_run_until(&pump, out_taken, client.conn));
    hb_fail_after(-1);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_le(client.len, A);
    ck_assert_ptr_null(memchr(client.data, 'b', client.len));
    ck_assert_ptr_null(memchr(client.data, 'z', client.len));
    ck_assert_uint_eq(pump.inflight, 0);
}
END_TEST

START_TEST(test_peer)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    char buf[64];
    int port;

    UP(NULL);
    ck_assert_int_eq(getsockname(client.fd, (struct sockaddr *)&sin, &len), 0);
    ck_assert_str_eq(sl_conn_peer(client.conn, buf, sizeof(buf), &port),
                     "127.0.0.1");
    ck_assert_int_eq(port, ntohs(sin.sin_port));
}
END_TEST

/* ------------------------------------------------------------------ */
/* executors that cannot block (sl_conn_await)                        */

START_TEST(test_await)
{
    sl_ticket_t t;
    sl_conn_t *c;
    enum { BIG = 300 * 1024 };
    static char data[BIG];
    struct iovec iov = {data, BIG};

    h_exec = &h_exec_await;
    UP(NULL);
    c = client.conn;
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n");
    take_request(&t);
    ck_assert_int_eq(sl_conn_await(c, t.gen, SL_AWAIT_BODY), 1);
    ck_assert_int_eq(sl_conn_await(c, t.gen, SL_AWAIT_CREDIT), 0);
    ck_assert_int_eq(sl_conn_await(c, t.gen + 1, SL_AWAIT_BODY), -1);
    h_sends(&client, "hi");
    sl_ticket_t wake;
    ck_assert(h_take_ticket(&pump, &wake));
    ck_assert_uint_eq(wake.kind, SL_TICKET_WAKE);
    ck_assert_uint_eq(wake.idx, c->idx);
    ck_assert_uint_eq(wake.gen, t.gen);
    ck_assert_int_eq(sl_conn_await(c, t.gen, SL_AWAIT_BODY), 0);
    ck_assert_int_eq(sl_conn_await(c, t.gen, SL_AWAIT_DISCONNECT), 1);
    ck_assert_int_eq(sl_conn_send(c, t.gen, &iov, 1, 0), 1);
    ck_assert_int_eq(sl_conn_await(c, t.gen, SL_AWAIT_CREDIT), 1);
    sl_conn_abort(c);
    ck_assert_int_eq(sl_conn_await(c, t.gen, SL_AWAIT_DISCONNECT), 0);
    ck_assert_int_eq(sl_conn_await(c, t.gen, SL_AWAIT_BODY), -1);
}
END_TEST

/* ------------------------------------------------------------------ */
/* deadlines, drain, abort                                            */

START_TEST(test_deadlines)
{
    sl_ticket_t t;
    sl_conn_t *c;
    ev_tstamp now;

    UP("--header-timeout", "3", "--keep-alive", "7", NULL);
    c = client.conn;
    now = ev_now(pump.loop);
    ck_assert(c->deadline > now + 2.5 && c->deadline <= now + 3.0);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert(c->deadline == 0); /* the app takes as long as it takes */
    sl_conn_sweep(c, now + 1000);
    ck_assert_int_eq(c->state, SL_CONN_SERVING);
    respond(t.gen, "x");
    ck_assert(h_response(&pump, &client, &resp, false));
    now = ev_now(pump.loop);
    ck_assert(c->deadline > now + 6.5 && c->deadline <= now + 7.0);
    /* the next request line begun, not whole: the header timeout again */
    h_sends(&client, "PURGE! /pa");
    ck_assert(h_run_until(&pump, parsed_all, c));
    now = ev_now(pump.loop);
    ck_assert(c->deadline > now + 2.5 && c->deadline <= now + 3.0);
}
END_TEST

/* An idle keep-alive connection past its deadline is closed silently. */
START_TEST(test_idle_timeout_closes_silently)
{
    h_nactive_t none = {&pump, 0};

    UP(NULL);
    sl_conn_sweep(client.conn, client.conn->deadline - 0.5);
    ck_assert_uint_eq(pump.pool.nactive, 1);
    sl_conn_sweep(client.conn, client.conn->deadline + 0.5);
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(client.len, 0);
}
END_TEST

/* A head that is not complete by its deadline gets a 408. */
START_TEST(test_header_timeout_is_408)
{
    sl_conn_t *c;

    UP(NULL);
    c = client.conn;
    h_sends(&client, "GET /slow HTTP/1.1\r\nHost:");
    ck_assert(h_run_until(&pump, parsed_all, c));
    sl_conn_sweep(c, c->deadline + 0.5);
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 408);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(h_tickets(&pump), 0);
}
END_TEST

START_TEST(test_linger_timeout)
{
    sl_ticket_t t;
    h_nactive_t none = {&pump, 0};

    UP(NULL);
    h_sends(&client, "GET / HTTP/1.0\r\n\r\n");
    take_request(&t);
    respond(t.gen, "x");
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_int_eq(client.conn->state, SL_CONN_CLOSING);
    sl_conn_sweep(client.conn, client.conn->deadline + 0.1);
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
}
END_TEST

START_TEST(test_drain_closes_idle)
{
    h_nactive_t none = {&pump, 0};

    UP(NULL);
    /* within the grace an idle connection stays: a request may be coming */
    ck_assert(!sl_conn_drain(client.conn, client.conn->idle_since, 0.1));
    ck_assert_uint_eq(pump.pool.nactive, 1);
    ck_assert(sl_conn_drain(client.conn, client.conn->idle_since + 1.0, 0.1));
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
    ck_assert(h_wait_eof(&pump, &client));
}
END_TEST

/* A connection with a head under way is not idle: drain lets it finish. */
START_TEST(test_drain_keeps_partial_head)
{
    sl_conn_t *c;

    UP(NULL);
    c = client.conn;
    h_sends(&client, "GET / HTTP/1.1\r\n");
    ck_assert(h_run_until(&pump, parsed_all, c));
    ck_assert(!sl_conn_drain(c, c->idle_since + 1.0, 0.1));
    ck_assert_uint_eq(pump.pool.nactive, 1);
    ck_assert_int_eq(c->state, SL_CONN_READING);
}
END_TEST

START_TEST(test_abort_while_serving)
{
    sl_ticket_t t;
    h_nactive_t none = {&pump, 0};
    char buf[8];

    UP(NULL);
    h_sends(&client, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n");
    take_request(&t);
    sl_conn_abort(client.conn);
    ck_assert_uint_eq(pump.pool.nactive, 1); /* the executor still holds it */
    ck_assert_int_eq(
        sl_conn_read_body(client.conn, t.gen, buf, sizeof(buf), false, true),
        -1);
    ck_assert_int_eq(sl_conn_wait_credit(client.conn, t.gen), -1);
    ck_assert_int_eq(send_str(t.gen, "x", SL_SEND_END), -1);
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
    ck_assert_uint_eq(pump.inflight, 0);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(client.len, 0);
}
END_TEST

START_TEST(test_abort_idle)
{
    UP(NULL);
    sl_conn_abort(client.conn);
    ck_assert_uint_eq(pump.pool.nactive, 0);
    ck_assert(h_wait_eof(&pump, &client));
}
END_TEST
static Suite *conn_suite(void)
{
    Suite *s = suite_create("conn");
    TCase *tc = tcase_create("parse");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_simple_request_response);
    tcase_add_loop_test(tc, test_head_split_across_reads, 0,
                        sizeof(split_at) / sizeof(split_at[0]));
    tcase_add_test(tc, test_head_one_byte_per_read);
    tcase_add_test(tc, test_keep_alive_requests_get_new_generations);
    tcase_add_test(tc, test_pipelined_in_order);
    tcase_add_test(tc, test_pipelined_before_eof_are_served);
    tcase_add_test(tc, test_pipelined_answers_leave_together);
    tcase_add_test(tc, test_held_answer_leaves_on_time);
    tcase_add_test(tc, test_hold_timer_writes_the_oldest);
    tcase_add_test(tc, test_held_answer_leaves_with_the_next_bytes);
    tcase_add_test(tc, test_nothing_served_after_close);
    suite_add_tcase(s, tc);

    tc = tcase_create("refused");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_bad_request_is_400, 0,
                        sizeof(bad_requests) / sizeof(bad_requests[0]));
    tcase_add_test(tc, test_request_line_too_long);
    tcase_add_test(tc, test_request_line_at_limit);
    tcase_add_test(tc, test_request_line_over_limit_by_one);
    tcase_add_test(tc, test_request_line_limit_zero_means_8190);
    tcase_add_test(tc, test_too_many_headers);
    tcase_add_test(tc, test_headers_at_field_limit);
    tcase_add_test(tc, test_field_limit_zero_means_32768);
    tcase_add_test(tc, test_header_field_too_big);
    tcase_add_test(tc, test_header_field_at_size_limit);
    tcase_add_test(tc, test_huge_header_name_is_431);
    tcase_add_test(tc, test_head_hard_cap);
    tcase_add_test(tc, test_bad_first_chunk_never_reaches_app);
    tcase_add_test(tc, test_bad_later_chunk_is_400);
    suite_add_tcase(s, tc);

    tc = tcase_create("body");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_read_body);
    tcase_add_test(tc, test_no_body_reads_end);
    tcase_add_test(tc, test_chunked_body);
    tcase_add_test(tc, test_read_body_waits_for_bytes);
    tcase_add_test(tc, test_client_gone_mid_body);
    tcase_add_test(tc, test_chunked_body_over_limit);
    tcase_add_test(tc, test_streamed_chunked_body_over_limit);
    tcase_add_test(tc, test_body_window);
    tcase_add_test(tc, test_body_burst_in_one_pass);
    tcase_add_test(tc, test_expect_continue);
    tcase_add_test(tc, test_expect_continue_out_of_memory);
    tcase_add_test(tc, test_unread_body_closes);
    tcase_add_test(tc, test_ignored_complete_body_keeps_alive);
    suite_add_tcase(s, tc);

    tc = tcase_create("output");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_send_rules);
    tcase_add_test(tc, test_send_close);
    tcase_add_test(tc, test_connection_close_request);
    tcase_add_test(tc, test_http10_closes);
    tcase_add_test(tc, test_credit);
    tcase_add_test(tc, test_credit_wait_on_stale_request);
    tcase_add_test(tc, test_sendfile);
    tcase_add_test(tc, test_sendfile_refused_closes_fd);
    tcase_add_test(tc, test_sendfile_short_file_closes);
    tcase_add_test(tc, test_sendmem);
    tcase_add_test(tc, test_sendmem_large);
    tcase_add_test(tc, test_sendmem_refused_and_dropped);
    tcase_add_test(tc, test_send_out_of_memory_drops_the_part);
    tcase_add_test(tc, test_take_out_of_memory_closes);
    tcase_add_test(tc, test_peer);
    tcase_add_test(tc, test_await);
    suite_add_tcase(s, tc);

    tc = tcase_create("lifetime");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_deadlines);
    tcase_add_test(tc, test_idle_timeout_closes_silently);
    tcase_add_test(tc, test_header_timeout_is_408);
    tcase_add_test(tc, test_linger_timeout);
    tcase_add_test(tc, test_drain_closes_idle);
    tcase_add_test(tc, test_drain_keeps_partial_head);
    tcase_add_test(tc, test_abort_while_serving);
    tcase_add_test(tc, test_abort_idle);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(conn_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
