/* test_asgi.c - check suite for worker/python/asgi.c, ASGI HTTP: responses
 * (streamed, trailers, pathsend, a slow reader), receive() (bodies in
 * pieces, disconnects) and keep-alive.
 *
 * The real thing in one process, reached through asgi.h alone (so the
 * suite holds however asgi.c is split): the embedded interpreter, the ASGI
 * app (APP in tests/unit/asgi_harness.h), the asyncio lane started by
 * sl_asgi_start(), and the pump's loop run by the test thread without the
 * GIL, as the worker's main thread runs it. Clients talk over loopback; the
 * test takes the GIL only to look at what the app recorded (testapp.state)
 * or to open one of its gates, which the app awaits when a test must act
 * between two of its steps. The app's errors are test_asgi_errors.c's,
 * finish, stop and inline mode test_asgi_stop.c's.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>

#include "tests/unit/asgi_harness.h"
#include "tests/unit/py_harness.h"
#include "worker/python/asgi.h"
#include "worker/python/asgi_lifespan.h"

static void open_gate(const char *name)
{
    char expr[64];

    snprintf(expr, sizeof(expr), "open_gate('%s')", name);
    app_eval(expr);
}

/* Has the client received TEXT (a string) so far? */
static bool received(void *text)
{
    h_pull(&client);
    return client.data != NULL && strstr(client.data, text) != NULL;
}

/* ------------------------------------------------------------------ */
/* responses                                                          */

START_TEST(test_hello)
{
    up();
    get("/hello");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert(strncmp(resp.head, "HTTP/1.1 200 OK\r\n", 17) == 0);
    ck_assert_str_eq(hdr("Content-Type"), "text/plain");
    ck_assert_str_eq(hdr("Content-Length"), "5"); /* one body message */
    ck_assert_ptr_null(hdr("Transfer-Encoding"));
    ck_assert_ptr_null(hdr("Connection"));
    ck_assert_str_eq(resp.body, "hello");
    ck_assert(!logged("[ERROR]"));
}
END_TEST

/* A response in several body messages goes out chunked, each message as
 * it is sent: the first reaches the client while the app still waits to
 * send the next. */
START_TEST(test_streamed_with_more_body)
{
    up();
    get("/stream");
    ck_assert(h_run_until(&pump, received, "5\r\nfirst\r\n"));
    ck_assert_int_eq(received_count("second"), 0);
    open_gate("stream");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
    ck_assert(resp.chunked);
    ck_assert_ptr_null(hdr("Content-Length"));
    ck_assert_str_eq(resp.body, "first+second");
}
END_TEST

/* Trailers asked for in http.response.start follow the last chunk, from
 * every http.response.trailers message. */
START_TEST(test_trailers)
{
    up();
    get("/trailers");
    ck_assert(h_run_until(&pump, received, "x-count: 2\r\n\r\n"));
    ck_assert_ptr_nonnull(strstr(client.data, "Transfer-Encoding: chunked"));
    ck_assert_ptr_nonnull(strstr(client.data, "\r\n\r\n4\r\ndata\r\n"
                                              "5\r\n+more\r\n"
                                              "0\r\nx-sum: abc\r\n"
                                              "x-count: 2\r\n\r\n"));
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "data+more");
    ck_assert_uint_eq(client.len, 0); /* nothing after the trailers */
}
END_TEST

/* http.response.pathsend: the file whole, sized, and the connection kept
 * for the next request. */
START_TEST(test_pathsend)
{
    enum { SIZE = 300 * 1000 };
    static char data[SIZE];
    char path[160], raw[320];
    FILE *f;

    for (size_t i = 0; i < SIZE; i++)
        data[i] = (char)('a' + i % 23);
    snprintf(path, sizeof(path), "%s/file.bin", h_test_dir());
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, SIZE, f), SIZE);
    fclose(f);
    up();
    snprintf(raw, sizeof(raw), "GET /pathsend?%s HTTP/1.1\r\nHost: h\r\n\r\n",
             path);
    h_sends(&client, raw);
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(hdr("Content-Type"), "application/x-test");
    ck_assert_str_eq(hdr("Content-Length"), "300000");
    ck_assert_uint_eq(resp.body_len, SIZE);
    ck_assert(memcmp(resp.body, data, SIZE) == 0);
    get("/hello");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "hello");
}
END_TEST

/* A response far above SL_CONN_CREDIT to a client that reads nothing at
 * first: send() suspends the app instead of queueing without bound, and
 * once the client reads, every byte arrives in order. */
START_TEST(test_large_response_to_slow_reader)
{
    enum { BLOCK = 64 * 1024, BLOCKS = 128 };
    char want[BLOCK];

    ck_assert_int_gt((long)BLOCK * BLOCKS, 8 * SL_CONN_CREDIT);
    up();
    get("/big");
    ck_assert_msg(until_app("state['suspended'] > 0", "True"),
                  "send() never suspended (%s blocks sent)",
                  app_eval("state['sent']"));
    ck_assert_str_ne(app_eval("state['sent']"), "128");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
    ck_assert_uint_eq(resp.body_len, (size_t)BLOCK * BLOCKS);
    for (int i = 0; i < BLOCKS; i++) {
        memset(want, 'a' + i % 26, sizeof(want));
        ck_assert_msg(memcmp(resp.body + (size_t)i * BLOCK, want, BLOCK) == 0,
                      "block %d differs", i);
    }
    ck_assert(until_app("state['sent']", "128"));
    ck_assert(!logged("[ERROR]"));
}
END_TEST

/* ------------------------------------------------------------------ */
/* receive()                                                          */

/* A body sent in pieces, each only after the app took the one before:
 * one receive() per piece, each woken by the bytes' arrival. */
START_TEST(test_body_in_pieces)
{
    const char *pieces[] = {"aaaaa", "bbbbb", "ccccc"};
    char expr[64];

    up();
    h_sends(&client, "POST /echo HTTP/1.1\r\nHost: h\r\n"
                     "Content-Length: 15\r\n\r\n");
    for (int i = 0; i < 3; i++) {
        h_sends(&client, pieces[i]);
        snprintf(expr, sizeof(expr), "len(state['sizes']) == %d", i + 1);
        ck_assert_msg(until_app(expr, "True"), "piece %d not received", i);
    }
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(resp.body, "aaaaabbbbbccccc");
    ck_assert_str_eq(app_eval("state['sizes']"), "[5, 5, 5]");
    ck_assert_str_eq(app_eval("state['more']"), "[True, True, False]");
}
END_TEST

/* The same with a chunked request body: the pieces in order, the last
 * message says more_body False. */
START_TEST(test_chunked_body_in_pieces)
{
    const char *pieces[] = {"5\r\naaaaa\r\n", "5\r\nbbbbb\r\n",
                            "5\r\nccccc\r\n"};
    char expr[64];

    up();
    h_sends(&client, "POST /echo HTTP/1.1\r\nHost: h\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 3; i++) {
        h_sends(&client, pieces[i]);
        snprintf(expr, sizeof(expr), "len(state['sizes']) == %d", i + 1);
        ck_assert_msg(until_app(expr, "True"), "piece %d not received", i);
    }
    h_sends(&client, "0\r\n\r\n");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "aaaaabbbbbccccc");
    ck_assert_str_eq(app_eval("[s for s in state['sizes'] if s]"), "[5, 5, 5]");
    ck_assert_str_eq(app_eval("state['more'][:3]"), "[True, True, True]");
    ck_assert_str_eq(app_eval("state['more'][-1]"), "False");
}
END_TEST

/* A body far above the loop's body window reaches the app whole: the
 * window reopens as receive() takes the bytes. */
START_TEST(test_large_request_body)
{
    enum { SIZE = 3 * 1024 * 1024 };
    static char data[SIZE];
    char head[128];
    const char *want;
    h_sender_t s = {.data = data, .n = SIZE};
    pthread_t th;

    ck_assert_int_gt(SIZE, 4 * SL_CONN_BODY_WINDOW);
    up();
    for (size_t i = 0; i < SIZE; i++)
        data[i] = (char)(i % 253);
    snprintf(head, sizeof(head),
             "POST /digest HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n",
             SIZE);
    h_sends(&client, head);
    s.fd = client.fd;
    ck_assert_int_eq(pthread_create(&th, NULL, h_send_all, &s), 0);
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    gil_take();
    hp_module("want", "import hashlib\n"
                      "b = bytes(i % 253 for i in range(3 * 1024 * 1024))\n"
                      "d = '%d %s' % (len(b), hashlib.sha1(b).hexdigest())\n");
    want = hp_eval("want", "d");
    ck_assert_str_eq(resp.body, want);
    gil_give();
    ck_assert_int_gt(atoi(app_eval("state['calls']")), 1);
}
END_TEST

/* With the body read, receive() waits for the client to leave and then
 * says so. */
START_TEST(test_disconnect_when_client_closes)
{
    up();
    get("/disconnect");
    ck_assert(until_app("state['entered']", "1"));
    ck_assert_str_eq(app_eval("state['got']"), "None");
    h_client_close(&client);
    ck_assert(until_app("state['got']", "http.disconnect"));
    ck_assert(h_run_until(&pump, h_nactive_is, &(h_nactive_t){&pump, 0}));
}
END_TEST

/* A client that leaves in the middle of its body: the receive() waiting
 * for the rest gets http.disconnect. */
START_TEST(test_disconnect_mid_body)
{
    up();
    h_sends(&client, "POST /partial_body HTTP/1.1\r\nHost: h\r\n"
                     "Content-Length: 10\r\n\r\n12345");
    ck_assert(until_app("state['types']", "['http.request']"));
    h_client_close(&client);
    ck_assert(
        until_app("state['types']", "['http.request', 'http.disconnect']"));
    ck_assert(h_run_until(&pump, h_nactive_is, &(h_nactive_t){&pump, 0}));
}
END_TEST

/* ------------------------------------------------------------------ */
/* connections                                                        */

/* Two requests, one connection: the body of the first consumed, the
 * second answered on the same socket. */
START_TEST(test_keep_alive)
{
    sl_conn_t *c;

    up();
    c = client.conn;
    h_sends(&client, "POST /echo HTTP/1.1\r\nHost: h\r\n"
                     "Content-Length: 3\r\n\r\nabc");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "abc");
    ck_assert_ptr_null(hdr("Connection"));
    get("/hello");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(resp.body, "hello");
    ck_assert(!client.eof);
    ck_assert_uint_eq(pump.served, 2);
    ck_assert_uint_eq(pump.pool.nactive, 1);
    ck_assert_ptr_eq(pump.pool.active.next, c);
}
END_TEST

static Suite *asgi_suite(void)
{
    Suite *s = suite_create("asgi");
    TCase *tc;

    tc = tcase_create("asgi");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_hello);
    tcase_add_test(tc, test_streamed_with_more_body);
    tcase_add_test(tc, test_trailers);
    tcase_add_test(tc, test_pathsend);
    tcase_add_test(tc, test_large_response_to_slow_reader);
    tcase_add_test(tc, test_body_in_pieces);
    tcase_add_test(tc, test_chunked_body_in_pieces);
    tcase_add_test(tc, test_large_request_body);
    tcase_add_test(tc, test_disconnect_when_client_closes);
    tcase_add_test(tc, test_disconnect_mid_body);
    tcase_add_test(tc, test_keep_alive);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(asgi_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
