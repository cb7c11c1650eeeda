/* test_conn_bufs.c - check suite for the buffers of a connection: when it
 * takes them and when it gives them back (conn.c), and the pump's cache
 * they go back to (bufcache.c).
 *
 * The point under test: a connection idle between requests, or one that
 * has sent nothing yet, holds no buffer at all; a busy one takes its
 * buffers from the cache rather than from malloc. The test thread is the
 * loop thread and the executor, as in test_conn.c.
 */
#include "config.h"

#include <check.h>

#include "tests/unit/buf_faults.h"
#include "tests/unit/harness.h"
#include "worker/loop/bufcache.h"

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
    hb_fail_after(-1);
    h_resp_free(&resp);
    h_client_close(&client);
    h_pump_down(&pump);
}

#define UP(...)                                                                \
    do {                                                                       \
        h_options(&opt, __VA_ARGS__);                                          \
        h_pump_up(&pump, &opt);                                                \
        h_connect(&pump, &client);                                             \
    } while (0)

/* Does C hold no memory beyond its pool entry? */
static bool holds_nothing(const sl_conn_t *c)
{
    return c->rbuf.data == NULL && c->tx.buf.data == NULL &&
           c->x.body.data == NULL && c->x.out.data == NULL &&
           c->x.resp_head.data == NULL && c->x.req.hbuf.data == NULL &&
           c->x.req.hdrs == NULL && c->x.req.client == NULL && c->x.ws == NULL;
}

static bool serving(void *arg)
{
    sl_conn_t *c = arg;

    h_pull(&client);
    return c->state == SL_CONN_SERVING || client.eof;
}

/* Run until C's request reaches the executor; its ticket into *T. */
static void take_request(sl_ticket_t *t)
{
    ck_assert(h_run_until(&pump, serving, client.conn));
    ck_assert_int_eq(client.conn->state, SL_CONN_SERVING);
    ck_assert(h_take_ticket(&pump, t));
    ck_assert_uint_eq(t->gen, client.conn->x.gen);
}

static void respond(uint32_t gen, const char *body)
{
    char head[128];
    struct iovec iov[2];

    snprintf(head, sizeof(head),
             "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", strlen(body));
    iov[0] = (struct iovec){head, strlen(head)};
    iov[1] = (struct iovec){(void *)body, strlen(body)};
    ck_assert_int_eq(sl_exch_send(&client.conn->x, gen, iov, 2, SL_SEND_END),
                     0);
}

/* One whole request and its answer, BODY. */
static void round_trip(const char *req, const char *body)
{
    sl_ticket_t t;

    h_sends(&client, req);
    take_request(&t);
    respond(t.gen, body);
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(resp.body, body);
}

static bool body_in(void *arg)
{
    sl_conn_t *c = arg;
    bool done;

    pthread_mutex_lock(&c->x.mu);
    done = c->x.body_done;
    pthread_mutex_unlock(&c->x.mu);
    return done;
}

static const char get[] = "GET /x HTTP/1.1\r\nHost: h\r\n\r\n";

/* ------------------------------------------------------------------ */

/* 1 KiB per idle connection in all: the pool entry, and the slots the
 * executors keep per pooled connection (the peer cache's 40 bytes, the
 * ASGI executor's 8) must fit in it with room for a few more fields. */
START_TEST(test_pool_entry_fits)
{
    ck_assert_uint_le(sizeof(sl_conn_t), 1024 - 40 - 8 - 64);
}
END_TEST

/* Accepted, readable at once (the accept feeds a read), nothing sent:
 * no read buffer is taken for a read that brought nothing. */
START_TEST(test_silent_connection_holds_nothing)
{
    UP(NULL);
    h_run_passes(&pump, 5);
    ck_assert_int_eq(client.conn->state, SL_CONN_READING);
    ck_assert(holds_nothing(client.conn));
    ck_assert_uint_eq(sl_bufcache_held(&pump.bufs), 0);
}
END_TEST

/* After its response, with nothing pipelined, every buffer went back to
 * the cache; the connection is still open and serves again. */
START_TEST(test_idle_after_response_holds_nothing)
{
    UP(NULL);
    round_trip(get, "one");
    ck_assert_int_eq(client.conn->state, SL_CONN_READING);
    ck_assert(holds_nothing(client.conn));
    ck_assert_uint_gt(sl_bufcache_held(&pump.bufs), 0);
    round_trip(get, "two");
    ck_assert(holds_nothing(client.conn));
}
END_TEST

/* A busy keep-alive connection allocates nothing per request once the
 * cache is warm: with every allocation failing, the next requests (one
 * with a body) are served all the same, and the cache holds as many
 * blocks after as before. */
START_TEST(test_warm_cache_serves_without_malloc)
{
    static const char post[] =
        "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc";
    unsigned held;
    int i;

    UP(NULL);
    round_trip(post, "warm");
    held = sl_bufcache_held(&pump.bufs);
    hb_fail_after(0);
    for (i = 0; i < 3; i++) {
        round_trip(get, "get");
        round_trip(post, "post");
        ck_assert(holds_nothing(client.conn));
        ck_assert_uint_eq(sl_bufcache_held(&pump.bufs), held);
    }
}
END_TEST

/* While serving, the request holds what it needs: its head's copy and
 * header array, the body it was sent. */
START_TEST(test_request_holds_its_head_and_body)
{
    sl_ticket_t t;
    char buf[8];

    UP(NULL);
    h_sends(&client, "POST /b HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n"
                     "Content-Length: 5\r\n\r\nhello");
    take_request(&t);
    ck_assert_ptr_nonnull(client.conn->x.req.hbuf.data);
    ck_assert_ptr_nonnull(client.conn->x.req.hdrs);
    ck_assert_int_eq(client.conn->x.req.nhdrs, 3);
    ck_assert(h_run_until(&pump, body_in, client.conn));
    ck_assert_int_eq(sl_exch_read_body(&client.conn->x, t.gen, buf, sizeof(buf),
                                       false, false),
                     5);
    respond(t.gen, "ok");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert(holds_nothing(client.conn));
}
END_TEST

/* A second request pipelined behind the first keeps the read buffer
 * (its bytes are in it) until it is served too. */
START_TEST(test_pipelined_keeps_read_buffer)
{
    sl_ticket_t t;

    UP(NULL);
    h_sends(&client, "GET /1 HTTP/1.1\r\nHost: h\r\n\r\n"
                     "GET /2 HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    respond(t.gen, "first");
    ck_assert(h_response(&pump, &client, &resp, false));
    take_request(&t);
    ck_assert_ptr_nonnull(client.conn->rbuf.data);
    respond(t.gen, "second");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "second");
    ck_assert(holds_nothing(client.conn));
}
END_TEST

static bool in_msg(void *arg)
{
    return ((sl_conn_t *)arg)->h1.in_msg;
}

/* Half a head is kept (it is no idle connection); the rest completes it. */
START_TEST(test_partial_head_keeps_read_buffer)
{
    sl_ticket_t t;

    UP(NULL);
    h_sends(&client, "GET /half HTTP/1.1\r\nHo");
    ck_assert(h_run_until(&pump, in_msg, client.conn));
    h_run_passes(&pump, 3);
    ck_assert_ptr_nonnull(client.conn->rbuf.data);
    h_sends(&client, "st: h\r\n\r\n");
    take_request(&t);
    respond(t.gen, "whole");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert(holds_nothing(client.conn));
}
END_TEST

/* A closed connection's slot holds nothing either. */
START_TEST(test_closed_slot_holds_nothing)
{
    sl_conn_t *c;
    h_nactive_t none = {&pump, 0};

    UP(NULL);
    c = client.conn;
    h_sends(&client, "GET /half HTTP/1.1\r\nHo");
    ck_assert(h_run_until(&pump, in_msg, c));
    h_client_close(&client);
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
    ck_assert_int_eq(c->state, SL_CONN_FREE);
    ck_assert(holds_nothing(c));
}
END_TEST

/* The forwarded client is allocated only when a trusted proxy's header
 * applies, and freed with its request. */
START_TEST(test_forwarded_client_only_when_applied)
{
    sl_ticket_t t;

    UP("--forwarded-allow-ips", "127.0.0.1", NULL);
    h_sends(&client, get);
    take_request(&t);
    ck_assert_ptr_null(client.conn->x.req.client);
    ck_assert_str_eq(sl_req_client(&client.conn->x.req)->addr, "");
    respond(t.gen, "plain");
    ck_assert(h_response(&pump, &client, &resp, false));

    h_sends(&client, "GET /f HTTP/1.1\r\nHost: h\r\n"
                     "X-Forwarded-For: 192.0.2.7\r\n\r\n");
    take_request(&t);
    ck_assert_ptr_nonnull(client.conn->x.req.client);
    ck_assert_str_eq(sl_req_client(&client.conn->x.req)->addr, "192.0.2.7");
    respond(t.gen, "fwd");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert(holds_nothing(client.conn));
}
END_TEST

/* An error answered by the loop (400) leaves nothing behind either. */
START_TEST(test_error_answer_frees)
{
    sl_conn_t *c;
    h_nactive_t none = {&pump, 0};

    UP(NULL);
    c = client.conn;
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\nBad Header\r\n\r\n");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 400);
    ck_assert(h_wait_eof(&pump, &client));
    h_client_close(&client); /* ends the server's lingering close */
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
    ck_assert(holds_nothing(c));
}
END_TEST

/* ------------------------------------------------------------------ */
/* the cache alone                                                    */

/* A block given back is the next one taken of its class. */
START_TEST(test_cache_reuses)
{
    sl_bufcache_t bc = {0};
    sl_buf_t b = {0};
    char *p;

    ck_assert_int_eq(sl_bufcache_get(&bc, &b, 100), 0);
    ck_assert_uint_eq(b.cap, 1024);
    p = b.data;
    sl_bufcache_put(&bc, &b);
    ck_assert_ptr_null(b.data);
    ck_assert_uint_eq(sl_bufcache_held(&bc), 1);
    ck_assert_int_eq(sl_bufcache_get(&bc, &b, 1000), 0);
    ck_assert_ptr_eq(b.data, p);
    ck_assert_uint_eq(sl_bufcache_held(&bc), 0);
    /* a bigger want is another class */
    sl_bufcache_put(&bc, &b);
    ck_assert_int_eq(sl_bufcache_get(&bc, &b, 1025), 0);
    ck_assert_uint_eq(b.cap, 2048);
    ck_assert_ptr_ne(b.data, p);
    sl_bufcache_put(&bc, &b);
    sl_bufcache_clear(&bc);
    ck_assert_uint_eq(sl_bufcache_held(&bc), 0);
}
END_TEST

/* A class keeps at most SL_BUFCACHE_CLASS_BYTES; blocks that are no
 * class (too big, or a size sl_buf_grow() never makes) are freed. */
START_TEST(test_cache_bounded)
{
    enum { N = SL_BUFCACHE_CLASS_BYTES / 1024 + 10 };
    sl_bufcache_t bc = {0};
    sl_buf_t b[N];
    int i;

    memset(b, 0, sizeof(b));
    for (i = 0; i < N; i++)
        ck_assert_int_eq(sl_bufcache_get(&bc, &b[i], 1), 0);
    for (i = 0; i < N; i++)
        sl_bufcache_put(&bc, &b[i]);
    ck_assert_uint_eq(sl_bufcache_held(&bc), SL_BUFCACHE_CLASS_BYTES / 1024);
    ck_assert_int_eq(sl_bufcache_get(&bc, &b[0], 200 * 1024), 0);
    sl_bufcache_put(&bc, &b[0]);
    b[1] = (sl_buf_t){.data = malloc(1500), .cap = 1500};
    sl_bufcache_put(&bc, &b[1]);
    ck_assert_uint_eq(sl_bufcache_held(&bc), SL_BUFCACHE_CLASS_BYTES / 1024);
    sl_bufcache_clear(&bc);
}
END_TEST

/* Out of memory, a get fails and leaves the buffer as it was. */
START_TEST(test_cache_out_of_memory)
{
    sl_bufcache_t bc = {0};
    sl_buf_t b = {0};

    hb_fail_after(0);
    ck_assert_int_eq(sl_bufcache_get(&bc, &b, 10), -1);
    ck_assert_ptr_null(b.data);
    ck_assert_ptr_null(sl_bufcache_take(&bc, 4096));
    hb_fail_after(-1);
}
END_TEST

static Suite *conn_bufs_suite(void)
{
    Suite *s = suite_create("conn_bufs");
    TCase *tc = tcase_create("lifecycle");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_pool_entry_fits);
    tcase_add_test(tc, test_silent_connection_holds_nothing);
    tcase_add_test(tc, test_idle_after_response_holds_nothing);
    tcase_add_test(tc, test_warm_cache_serves_without_malloc);
    tcase_add_test(tc, test_request_holds_its_head_and_body);
    tcase_add_test(tc, test_pipelined_keeps_read_buffer);
    tcase_add_test(tc, test_partial_head_keeps_read_buffer);
    tcase_add_test(tc, test_closed_slot_holds_nothing);
    tcase_add_test(tc, test_forwarded_client_only_when_applied);
    tcase_add_test(tc, test_error_answer_frees);
    suite_add_tcase(s, tc);

    tc = tcase_create("cache");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_cache_reuses);
    tcase_add_test(tc, test_cache_bounded);
    tcase_add_test(tc, test_cache_out_of_memory);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(conn_bufs_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
