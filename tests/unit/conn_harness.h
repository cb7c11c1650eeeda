/* conn_harness.h - what the HTTP connection suites (test_conn*.c, for
 * worker/loop/conn.c and its conn_*.c) share on top of harness.h: one pump
 * in pump mode and one client per test (setup/teardown as check
 * fixtures), the test thread taking the executor's tickets, answers sent
 * as a lane would, and the checks on a request the loop refuses.
 */
#ifndef SL_TEST_CONN_HARNESS_H
#define SL_TEST_CONN_HARNESS_H

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

static inline void setup(void)
{
    client.fd = -1;
    sl_log_set_level(SL_LOG_ERROR);
}

static inline void teardown(void)
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

static inline bool conn_serving(void *arg)
{
    sl_conn_t *c = arg;

    h_pull(&client);
    return c->state == SL_CONN_SERVING || client.eof;
}

/* Run until the connection hands a request to the executor; take the
 * ticket and check it names this connection and its current request. */
static inline void take_request(sl_ticket_t *t)
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
    ck_assert_uint_eq(t->idx, c->x.id);
    ck_assert_uint_eq(t->gen, c->x.gen);
}

static inline int send_str(uint32_t gen, const char *s, int flags)
{
    struct iovec iov = {(void *)s, strlen(s)};

    return sl_exch_send(&client.conn->x, gen, &iov, 1, flags);
}

/* The same on exchange X (a request run ahead, h1_ahead.h). */
static inline void respond_on_x(sl_exch_t *x, uint32_t gen, const char *body)
{
    char head[128];
    struct iovec iov[2];

    snprintf(head, sizeof(head),
             "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", strlen(body));
    iov[0] = (struct iovec){head, strlen(head)};
    iov[1] = (struct iovec){(void *)body, strlen(body)};
    ck_assert_int_eq(sl_exch_send(x, gen, iov, 2, SL_SEND_END), 0);
}

static inline bool conn_aborted(void *arg)
{
    return sl_exch_aborted(arg);
}

static inline bool conn_freed(void *arg)
{
    return ((sl_conn_t *)arg)->state == SL_CONN_FREE;
}

/* Answer request GEN of C with a 200 whose body is BODY, in one END send. */
static inline void respond_on(sl_conn_t *c, uint32_t gen, const char *body)
{
    respond_on_x(&c->x, gen, body);
}

static inline void respond(uint32_t gen, const char *body)
{
    respond_on(client.conn, gen, body);
}

static inline const char *url(void)
{
    static char buf[4096];
    const sl_req_t *r = &client.conn->x.req;

    snprintf(buf, sizeof(buf), "%.*s", (int)r->url_len,
             r->hbuf.data + r->url_off);
    return buf;
}

/* The value of request header I, as text. */
static inline const char *hdr_value(int i)
{
    static char buf[4096];
    const sl_req_t *r = &client.conn->x.req;

    ck_assert_int_lt(i, r->nhdrs);
    snprintf(buf, sizeof(buf), "%.*s", (int)r->hdrs[i].val_len,
             r->hbuf.data + r->hdrs[i].val_off);
    return buf;
}

/* RAW is refused by the loop with STATUS and a close; the app never sees
 * it, nor the valid request pipelined after it. */
static inline void assert_refused(const char *raw, int status)
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

static inline bool body_pending(void *arg)
{
    sl_conn_t *c = arg;
    bool some;

    pthread_mutex_lock(&c->x.mu);
    some = sl_buf_pending(&c->x.body) > 0;
    pthread_mutex_unlock(&c->x.mu);
    return some;
}

#endif
