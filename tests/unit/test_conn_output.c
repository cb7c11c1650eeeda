/* test_conn_output.c - check suite for worker/loop/conn.c: the
 * executor's output (send rules, Connection: close, credit, sendfile,
 * lent bytes, out of memory) and executors that cannot block
 * (sl_conn_await).
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

#include "tests/unit/buf_faults.h"
#include "tests/unit/conn_harness.h"
#include "tests/unit/harness.h"
#include "worker/loop/http.h"

static bool conn_reading(void *arg)
{
    sl_conn_t *c = arg;

    return c->state == SL_CONN_READING;
}

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
    ck_assert_int_eq(sl_exch_send(&client.conn->x, t.gen, NULL, 0, 0), 0);
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
    bool done; /* under c->x.mu */
} waiter_t;

static void *wait_credit(void *arg)
{
    waiter_t *w = arg;
    int rc = sl_exch_wait_credit(&w->c->x, w->gen);

    pthread_mutex_lock(&w->c->x.mu);
    w->rc = rc;
    w->done = true;
    pthread_mutex_unlock(&w->c->x.mu);
    return NULL;
}

static bool waiter_done(void *arg)
{
    waiter_t *w = arg;
    bool done;

    pthread_mutex_lock(&w->c->x.mu);
    done = w->done;
    pthread_mutex_unlock(&w->c->x.mu);
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
    ck_assert_int_eq(sl_exch_send(&client.conn->x, t.gen, &iov, 1, 0), 1);
    w.c = client.conn;
    w.gen = t.gen;
    ck_assert_int_eq(pthread_create(&th, NULL, wait_credit, &w), 0);
    ck_assert(h_run_until(&pump, conn_blocked_on_write, client.conn));
    ck_assert(h_run_until(&pump, h_executor_waiting, client.conn));
    ck_assert(!waiter_done(&w));
    ck_assert(h_run_until(&pump, reading_until_done, &w));
    pthread_join(th, NULL);
    ck_assert_int_eq(w.rc, 0);
    ck_assert_int_eq(sl_exch_send(&client.conn->x, t.gen, NULL, 0, SL_SEND_END),
                     0);
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
    ck_assert_int_eq(sl_exch_wait_credit(&client.conn->x, t.gen), 0);
    ck_assert_int_eq(sl_exch_wait_credit(&client.conn->x, t.gen + 1), -1);
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
    ck_assert_int_eq(sl_exch_sendfile(&client.conn->x, t.gen, fd, 4, 8, 0), 0);
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
    ck_assert_int_eq(sl_exch_sendfile(&client.conn->x, t.gen + 1, fd, 0, 1, 0),
                     -1);
    ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
    fd = temp_file("y");
    ck_assert_int_eq(send_str(t.gen, "HTTP/1.1 204 No\r\n\r\n", SL_SEND_END),
                     0);
    ck_assert_int_eq(sl_exch_sendfile(&client.conn->x, t.gen, fd, 0, 1, 0), -1);
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
    ck_assert_int_eq(sl_exch_sendfile(&client.conn->x, t.gen, fd, 0, 10, 0), 0);
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
    ck_assert_int_eq(
        sl_exch_sendmem(&client.conn->x, t.gen, body, 10, &owner, 0), 0);
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
    ck_assert_int_eq(sl_exch_sendmem(&client.conn->x, t.gen, body, N, body, 0),
                     0);
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
    ck_assert_int_eq(
        sl_exch_sendmem(&client.conn->x, t.gen + 1, "x", 1, &owner, 0), -1);
    ck_assert_int_eq(send_str(t.gen, "HTTP/1.1 204 No\r\n\r\n", SL_SEND_END),
                     0);
    ck_assert_int_eq(sl_exch_sendmem(&client.conn->x, t.gen, "x", 1, &owner, 0),
                     -1);
    ck_assert(h_response(&pump, &client, &resp, true));
    ck_assert_int_eq(h_nreleased, 0);

    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_int_eq(
        send_str(t.gen, "HTTP/1.1 200 OK\r\nContent-Length: 8388608\r\n\r\n",
                 0),
        0);
    ck_assert_int_eq(sl_exch_sendmem(&client.conn->x, t.gen, body, N, body, 0),
                     0);
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
    ck_assert_int_eq(sl_exch_send(&client.conn->x, t.gen, iov, 2, SL_SEND_END),
                     -1);
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

    pthread_mutex_lock(&c->x.mu);
    taken = sl_buf_pending(&c->x.out) == 0;
    pthread_mutex_unlock(&c->x.mu);
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
    ck_assert_int_eq(sl_exch_send(&client.conn->x, t.gen, &ia, 1, 0), 1);
    ck_assert(h_run_until(&pump, conn_blocked_on_write, client.conn));
    /* B grows the executor's buffer; taking it behind A must grow the
     * loop's, which fails */
    hb_fail_after(1);
    ck_assert_int_eq(sl_exch_send(&client.conn->x, t.gen, &ib, 1, 0), 1);
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
    ck_assert_int_eq(sl_exch_await(&c->x, t.gen, SL_AWAIT_BODY), 1);
    ck_assert_int_eq(sl_exch_await(&c->x, t.gen, SL_AWAIT_CREDIT), 0);
    ck_assert_int_eq(sl_exch_await(&c->x, t.gen + 1, SL_AWAIT_BODY), -1);
    h_sends(&client, "hi");
    sl_ticket_t wake;
    ck_assert(h_take_ticket(&pump, &wake));
    ck_assert_uint_eq(wake.kind, SL_TICKET_WAKE);
    ck_assert_uint_eq(wake.idx, c->x.id);
    ck_assert_uint_eq(wake.gen, t.gen);
    ck_assert_int_eq(sl_exch_await(&c->x, t.gen, SL_AWAIT_BODY), 0);
    ck_assert_int_eq(sl_exch_await(&c->x, t.gen, SL_AWAIT_DISCONNECT), 1);
    ck_assert_int_eq(sl_exch_send(&c->x, t.gen, &iov, 1, 0), 1);
    ck_assert_int_eq(sl_exch_await(&c->x, t.gen, SL_AWAIT_CREDIT), 1);
    sl_conn_abort(c);
    ck_assert_int_eq(sl_exch_await(&c->x, t.gen, SL_AWAIT_DISCONNECT), 0);
    ck_assert_int_eq(sl_exch_await(&c->x, t.gen, SL_AWAIT_BODY), -1);
}
END_TEST

static Suite *conn_output_suite(void)
{
    Suite *s = suite_create("conn_output");
    TCase *tc;

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

    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(conn_output_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
