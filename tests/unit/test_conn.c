/* test_conn.c - check suite for worker/loop/conn.c: reading and parsing
 * requests, keep-alive and pipelining, and a connection's lifetime
 * (deadlines, timeouts, the drain, aborts).
 *
 * A real pump in pump mode serves real loopback connections; the test
 * thread is both the loop thread (it runs libev passes until what it waits
 * for holds) and, where a request reaches the executor, the executor: it
 * takes the ticket from the work queue and answers with sl_conn_send() and
 * friends as a lane would. Where the executor side blocks (credit, body
 * reads), a second thread plays the lane while the test thread runs the
 * loop. The client reads what really went over the socket. What the
 * test_conn*.c suites share is tests/unit/conn_harness.h.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "common/metrics.h"
#include "tests/unit/buf_faults.h"
#include "tests/unit/conn_harness.h"
#include "tests/unit/harness.h"
#include "worker/loop/http.h"

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
           (!c->h1.in_msg || c->rbuf.off == c->rbuf.len);
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
    ck_assert_int_eq(c->x.req.nhdrs, 2);
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

/* The metrics' handler is the request's: one a --static map answered
 * (static.c marks it; here the test does) leaves the next request on the
 * connection the app's. */
START_TEST(test_keep_alive_request_forgets_static)
{
    sl_metrics_slot_t before = *sl_metrics_self;
    const sl_metrics_slot_t *now = sl_metrics_self;
    sl_ticket_t t;

    UP(NULL);
    for (int i = 0; i < 2; i++) {
        h_sends(&client, "GET /again HTTP/1.1\r\nHost: h\r\n\r\n");
        take_request(&t);
        ck_assert(!client.conn->x.req.from_static);
        client.conn->x.req.from_static = i == 0;
        respond(t.gen, "x");
        ck_assert(h_response(&pump, &client, &resp, false));
        ck_assert_int_eq(resp.status, 200);
    }
    ck_assert_uint_eq(
        now->requests[SL_METRICS_STATIC][SL_METRICS_GET][SL_METRICS_2XX] -
            before.requests[SL_METRICS_STATIC][SL_METRICS_GET][SL_METRICS_2XX],
        1);
    ck_assert_uint_eq(
        now->requests[SL_METRICS_APP][SL_METRICS_GET][SL_METRICS_2XX] -
            before.requests[SL_METRICS_APP][SL_METRICS_GET][SL_METRICS_2XX],
        1);
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
    ck_assert_int_eq(sl_exch_read_body(&client.conn->x, t2.gen, body,
                                       sizeof(body), false, false),
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

/* Pump mode, requests run ahead (h1_ahead.h): the GETs after the first
 * are handed over in the same pass, each an exchange of its own; they
 * may end in any order, and their answers leave in the order asked, in
 * one write, each with its own request's head behind it. A POST after
 * them waits for its turn. */
START_TEST(test_pipelined_run_ahead)
{
    sl_ticket_t t[4];
    sl_exch_t *x[3];
    int i;

    h_ahead = true;
    UP(NULL);
    h_ahead = false;
    h_sends(&client, THREE_GETS "POST /4 HTTP/1.1\r\nHost: h\r\n"
                                "Content-Length: 1\r\n\r\nz");
    take_request(&t[0]);
    for (i = 1; i < 3; i++) {
        ck_assert(h_take_ticket(&pump, &t[i]));
        ck_assert_uint_eq(t[i].kind, SL_TICKET_SUBMIT);
        ck_assert_uint_ge(t[i].idx, pump.pool.nconns);
    }
    ck_assert(!sl_queue_try_pop(&pump.work, &t[3])); /* not the POST */
    for (i = 0; i < 3; i++) {
        x[i] = sl_pump_exch(&pump, t[i].idx);
        ck_assert(sl_exch_is_ahead(x[i]) == (i > 0));
        ck_assert(!sl_exch_is_stream(x[i]));
        ck_assert_int_eq(x[i]->req.url_len, 2);
        ck_assert_int_eq(x[i]->req.hbuf.data[x[i]->req.url_off + 1], '1' + i);
    }
    respond_on_x(x[2], t[2].gen, "3");
    respond_on_x(x[1], t[1].gen, "2");
    ev_run(pump.loop, EVRUN_NOWAIT);
    h_pull(&client);
    ck_assert_msg(client.len == 0, "an answer left before the first");
    respond_on_x(x[0], t[0].gen, "1");
    for (i = 1; i <= 3; i++) {
        char body[2] = {(char)('0' + i), 0};
        ck_assert(h_response(&pump, &client, &resp, false));
        ck_assert_str_eq(resp.body, body);
    }
    ck_assert_uint_eq(pump.served, 3);
    take_request(&t[3]); /* the POST, once the GETs are answered */
    ck_assert_str_eq(url(), "/4");
    respond(t[3].gen, "4");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "4");
    ck_assert_uint_eq(pump.inflight, 0);
}
END_TEST

/* A connection aborted (the drain's end, a send timeout) while requests
 * run ahead: every one hears of it, and the ones still with the executor
 * when the connection closes are given back at their END. */
START_TEST(test_run_ahead_orphans)
{
    sl_ticket_t t[3];
    sl_exch_t *x[3];
    int i;

    h_ahead = true;
    UP(NULL);
    h_ahead = false;
    h_sends(&client, THREE_GETS);
    take_request(&t[0]);
    for (i = 1; i < 3; i++)
        ck_assert(h_take_ticket(&pump, &t[i]));
    for (i = 0; i < 3; i++)
        x[i] = sl_pump_exch(&pump, t[i].idx);
    respond_on_x(x[1], t[1].gen, "2");
    sl_conn_abort(client.conn);
    for (i = 0; i < 3; i++)
        ck_assert(conn_aborted(x[i]));
    ck_assert_int_eq(sl_exch_send(x[0], t[0].gen, NULL, 0, SL_SEND_END), -1);
    /* x[0]'s END closes the connection */
    ck_assert(h_run_until(&pump, conn_freed, &pump.pool.conns[0]));
    ck_assert_uint_eq(pump.inflight, 1); /* the third, with the executor */
    ck_assert_int_eq(sl_exch_send(x[2], t[2].gen, NULL, 0, SL_SEND_END), -1);
    ev_run(pump.loop, EVRUN_NOWAIT);
    ck_assert_uint_eq(pump.inflight, 0);
    ck_assert_uint_gt(pump.aheads.nfree, 0);
    ck_assert_ptr_eq(
        sl_slots_get(&pump.aheads, pump.aheads.base +
                                       pump.aheads.free[pump.aheads.nfree - 1]),
        x[2]); /* given back last */
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
    ck_assert_uint_eq(u.idx, other.conn->x.id);
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

/* An answer joining a hold restarts its time, so a quick burst leaves in
 * one write however long the whole burst took; past SL_OUTPUT_HOLD_JOINS
 * joins the time runs from the last restart. */
START_TEST(test_joining_answer_restarts_the_hold)
{
    sl_ticket_t t;
    ev_tstamp since;
    char body[2] = {0};
    int i;

    UP(NULL);
    pump.holdq.secs = 60;
    h_sends(&client, THREE_GETS "GET /4 HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    respond(t.gen, "1");
    take_request(&t);
    ck_assert(client.conn->tx.held);
    ck_assert_uint_eq(client.conn->tx.joined, 0);
    client.conn->tx.hold_since -= 59; /* the first answer waited 59 s */
    since = client.conn->tx.hold_since;
    respond(t.gen, "2");
    take_request(&t);
    ck_assert(client.conn->tx.held);
    ck_assert_uint_eq(client.conn->tx.joined, 1);
    ck_assert(client.conn->tx.hold_since > since + 58);
    /* the timer finds nothing due: 59 s old no more */
    ev_feed_event(pump.loop, &pump.holdq.timer, EV_TIMER);
    ev_run(pump.loop, EVRUN_NOWAIT);
    h_pull(&client);
    ck_assert_uint_eq(client.len, 0);
    /* at the limit, an answer joins without restarting the time */
    client.conn->tx.joined = SL_OUTPUT_HOLD_JOINS;
    client.conn->tx.hold_since -= 59;
    since = client.conn->tx.hold_since;
    respond(t.gen, "3");
    take_request(&t);
    ck_assert(client.conn->tx.held);
    ck_assert(client.conn->tx.hold_since == since);
    respond(t.gen, "4");
    for (i = 1; i <= 4; i++) {
        ck_assert(h_response(&pump, &client, &resp, false));
        body[0] = (char)('0' + i);
        ck_assert_str_eq(resp.body, body);
    }
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
    ck_assert_int_eq(sl_exch_read_body(&client.conn->x, t.gen, buf, sizeof(buf),
                                       false, true),
                     -1);
    ck_assert_int_eq(sl_exch_wait_credit(&client.conn->x, t.gen), -1);
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
    TCase *tc;

    tc = tcase_create("parse");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_simple_request_response);
    tcase_add_loop_test(tc, test_head_split_across_reads, 0,
                        sizeof(split_at) / sizeof(split_at[0]));
    tcase_add_test(tc, test_head_one_byte_per_read);
    tcase_add_test(tc, test_keep_alive_requests_get_new_generations);
    tcase_add_test(tc, test_keep_alive_request_forgets_static);
    tcase_add_test(tc, test_pipelined_in_order);
    tcase_add_test(tc, test_pipelined_before_eof_are_served);
    tcase_add_test(tc, test_pipelined_answers_leave_together);
    tcase_add_test(tc, test_pipelined_run_ahead);
    tcase_add_test(tc, test_run_ahead_orphans);
    tcase_add_test(tc, test_held_answer_leaves_on_time);
    tcase_add_test(tc, test_hold_timer_writes_the_oldest);
    tcase_add_test(tc, test_joining_answer_restarts_the_hold);
    tcase_add_test(tc, test_held_answer_leaves_with_the_next_bytes);
    tcase_add_test(tc, test_nothing_served_after_close);
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
