/* test_conn_proxy.c - check suite for a connection behind a proxy:
 * conn_proxy.c (the PROXY header read before HTTP) and forwarded.c's
 * connection side (the client set at head complete, read through
 * sl_conn_client() and sl_conn_scheme()).
 *
 * A real pump serves real loopback connections, the test thread being the
 * loop thread and the executor (as in test_conn.c). The parsers' own cases
 * are in test_proxyproto.c and test_forwarded.c; here it is about when the
 * connection applies them: at which byte, for which request, and what
 * becomes of a connection whose header is bad.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <sys/ioctl.h>

#include "tests/unit/harness.h"

static sl_options_t opt;
static sl_pump_t pump;
static h_client_t client;
static h_resp_t resp;

static void setup(void)
{
    client.fd = -1;
    sl_log_set_level(SL_LOG_CRITICAL);
}

static void teardown(void)
{
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

static bool conn_serving(void *arg)
{
    sl_conn_t *c = arg;

    h_pull(&client);
    return c->state == SL_CONN_SERVING || client.eof;
}

/* Run until the request is with the executor; its ticket in *T. */
static void take_request(sl_ticket_t *t)
{
    ck_assert(h_run_until(&pump, conn_serving, client.conn));
    ck_assert_int_eq(client.conn->state, SL_CONN_SERVING);
    ck_assert(h_take_ticket(&pump, t));
}

static void respond(uint32_t gen)
{
    static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    struct iovec iov = {(void *)ok, sizeof(ok) - 1};

    ck_assert_int_eq(sl_exch_send(&client.conn->x, gen, &iov, 1, SL_SEND_END),
                     0);
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
}

/* The client the executor would see, as "addr port scheme". */
static const char *seen(void)
{
    static char out[128];
    char addr[SL_CLIENT_ADDR_MAX];
    int port;

    sl_exch_client(&client.conn->x, addr, sizeof(addr), &port);
    snprintf(out, sizeof(out), "%s %d %s", addr, port,
             sl_exch_scheme(&client.conn->x));
    return out;
}

static int local_port(void)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);

    ck_assert_int_eq(getsockname(client.fd, (struct sockaddr *)&sin, &len), 0);
    return ntohs(sin.sin_port);
}

START_TEST(test_forwarded_client_per_request)
{
    sl_ticket_t t;
    char want[64];

    UP(NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n"
                     "X-Forwarded-For: 203.0.113.9:81\r\n"
                     "X-Forwarded-Proto: https\r\n\r\n");
    take_request(&t);
    ck_assert_str_eq(seen(), "203.0.113.9 81 https");
    respond(t.gen);
    /* the next request on the connection has no header: the peer */
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    snprintf(want, sizeof(want), "127.0.0.1 %d http", local_port());
    ck_assert_str_eq(seen(), want);
    respond(t.gen);
}
END_TEST

START_TEST(test_untrusted_peer)
{
    sl_ticket_t t;
    char want[64];

    UP("--forwarded-allow-ips", "10.0.0.0/8", NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n"
                     "X-Forwarded-For: 203.0.113.9\r\n"
                     "Forwarded: for=198.51.100.1;proto=https\r\n\r\n");
    take_request(&t);
    snprintf(want, sizeof(want), "127.0.0.1 %d http", local_port());
    ck_assert_str_eq(seen(), want);
    respond(t.gen);
}
END_TEST

/* A request refused before its head is complete must not keep the client
 * the request before it was forwarded for. */
START_TEST(test_refused_head_forgets_the_last_client)
{
    sl_ticket_t t;

    UP(NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n"
                     "X-Forwarded-For: 203.0.113.9\r\n\r\n");
    take_request(&t);
    respond(t.gen);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\nBad Header: x\r\n\r\n");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 400);
    ck_assert_str_eq(sl_req_client(&client.conn->x.req)->addr, "");
}
END_TEST

/* Run passes until the connection has read everything sent. */
static bool all_read(void *arg)
{
    sl_conn_t *c = arg;
    int unread = -1;

    ck_assert_int_eq(ioctl(c->tp.fd, FIONREAD, &unread), 0);
    return unread == 0;
}

START_TEST(test_proxy_header_byte_by_byte)
{
    static const char hdr[] = "PROXY TCP6 2001:db8::7 ::1 4711 80\r\n";
    sl_ticket_t t;
    size_t i;

    UP("--proxy-protocol", NULL);
    ck_assert(client.conn->proxy_pending);
    for (i = 0; i < sizeof(hdr) - 1; i++) {
        h_send(&client, hdr + i, 1);
        ck_assert(h_run_until(&pump, all_read, client.conn));
        h_run_passes(&pump, 2);
        ck_assert_int_eq(client.conn->state, SL_CONN_READING);
        ck_assert(client.conn->proxy_pending == (i < sizeof(hdr) - 2));
    }
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_str_eq(seen(), "2001:db8::7 4711 http");
    respond(t.gen);
    /* the keep-alive request after it is the same client's */
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    take_request(&t);
    ck_assert_str_eq(seen(), "2001:db8::7 4711 http");
    respond(t.gen);
}
END_TEST

START_TEST(test_proxy_header_and_request_in_one_read)
{
    sl_ticket_t t;

    UP("--proxy-protocol", NULL);
    h_sends(&client, "PROXY TCP4 192.0.2.7 127.0.0.1 5 80\r\n"
                     "GET / HTTP/1.1\r\nHost: h\r\n"
                     "X-Forwarded-For: 203.0.113.9\r\n\r\n");
    take_request(&t);
    /* 192.0.2.7 is the peer now, and it is not trusted */
    ck_assert_str_eq(seen(), "192.0.2.7 5 http");
    respond(t.gen);
}
END_TEST

START_TEST(test_proxy_bad_header_closes_without_answer)
{
    h_nactive_t none = {&pump, 0};

    UP("--proxy-protocol", NULL);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(client.len, 0);
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
    ck_assert_uint_eq(h_tickets(&pump), 0);
}
END_TEST

START_TEST(test_proxy_header_timeout_closes)
{
    h_nactive_t none = {&pump, 0};
    sl_conn_t *c;

    UP("--proxy-protocol", NULL);
    c = client.conn;
    h_sends(&client, "PROXY TCP4 ");
    ck_assert(h_run_until(&pump, all_read, c));
    sl_conn_sweep(c, c->deadline + 0.5);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(client.len, 0); /* no 408: not HTTP yet */
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
}
END_TEST

START_TEST(test_proxy_peer_not_allowed)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);

    h_options(&opt, "--proxy-protocol", "--proxy-allow-from", "10.0.0.1", NULL);
    h_pump_up(&pump, &opt);
    ck_assert_int_eq(
        getsockname(pump.listeners[0].fd, (struct sockaddr *)&sin, &len), 0);
    client.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(client.fd, 0);
    ck_assert_int_eq(connect(client.fd, (struct sockaddr *)&sin, len), 0);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(client.len, 0);
    ck_assert_uint_eq(pump.pool.nactive, 0);
}
END_TEST

static Suite *conn_proxy_suite(void)
{
    Suite *s = suite_create("conn_proxy");
    TCase *tc = tcase_create("forwarded");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_forwarded_client_per_request);
    tcase_add_test(tc, test_untrusted_peer);
    tcase_add_test(tc, test_refused_head_forgets_the_last_client);
    suite_add_tcase(s, tc);

    tc = tcase_create("proxy protocol");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_proxy_header_byte_by_byte);
    tcase_add_test(tc, test_proxy_header_and_request_in_one_read);
    tcase_add_test(tc, test_proxy_bad_header_closes_without_answer);
    tcase_add_test(tc, test_proxy_header_timeout_closes);
    tcase_add_test(tc, test_proxy_peer_not_allowed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(conn_proxy_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
