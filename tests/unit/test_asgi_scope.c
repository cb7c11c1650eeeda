/* test_asgi_scope.c - check suite for worker/python/asgi_scope.c.
 *
 * A real pump parses a real request from a loopback client; once the
 * request is with the executor (the test thread takes its ticket, as a
 * lane would), the scope is built from that connection and handed to
 * Python as `scope` in module "t", where the tests read it back. Python
 * starts once per process, so every test runs forked and starts it in its
 * own fixture.
 */
#include "config.h"

#include <check.h>

#include "tests/unit/py_harness.h"
#include "worker/python/asgi_scope.h"

static sl_options_t opt;
static sl_pump_t pump;
static h_client_t client;

static void setup(void)
{
    client.fd = -1;
    hp_log_to_file();
}

static void teardown(void)
{
    h_client_close(&client);
}

/* Python, a pump for "sluice ARGS... testapp:app" with its scope
 * prototype, and a connected client. */
#define UP(...)                                                                \
    do {                                                                       \
        h_options(&opt, __VA_ARGS__);                                          \
        up();                                                                  \
    } while (0)

static void up(void)
{
    ck_assert_int_eq(sl_py_init(&opt), 0);
    hp_module("t", "scope = None\n");
    h_pump_up(&pump, &opt);
    if (sl_asgi_scope_init(&pump) < 0)
        hp_check(NULL, "sl_asgi_scope_init");
    h_connect(&pump, &client);
}

static bool conn_serving(void *arg)
{
    sl_conn_t *c = arg;

    h_pull(&client);
    return c->state == SL_CONN_SERVING || client.eof;
}

/* Send RAW and run until its head is with the executor. */
static void request(const char *raw)
{
    sl_ticket_t t;

    h_sends(&client, raw);
    ck_assert_msg(h_run_until(&pump, conn_serving, client.conn),
                  "request not dispatched");
    ck_assert_msg(client.conn->state == SL_CONN_SERVING,
                  "request refused by the loop: %s", client.data);
    ck_assert(h_take_ticket(&pump, &t));
    ck_assert_uint_eq(t.idx, client.conn->x.id);
}

/* The scope of the request with the executor, with STATE, as t.scope:
 * the websocket scope when WS. */
static void scope_as(PyObject *state, bool ws)
{
    PyObject *s = ws ? sl_asgi_scope_new_ws(&client.conn->x, state)
                     : sl_asgi_scope_new(&client.conn->x, state);

    hp_check(s, "sl_asgi_scope_new");
    ck_assert(PyDict_CheckExact(s));
    ck_assert_int_eq(
        PyObject_SetAttrString(PyImport_AddModule("t"), "scope", s), 0);
    Py_DECREF(s);
}

static void scope(PyObject *state)
{
    scope_as(state, false);
}

/* Send RAW and build its scope without state. */
static void scope_of(const char *raw)
{
    request(raw);
    scope(NULL);
}

/* str() of EXPR evaluated with the scope at hand. */
static const char *ev(const char *expr)
{
    return hp_eval("t", expr);
}

/* The client's own port and the listener's, as the server sees them. */
static int local_port(int fd)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);

    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
    return ntohs(sin.sin_port);
}

/* ------------------------------------------------------------------ */
/* the fixed parts                                                    */

START_TEST(test_fixed_keys)
{
    UP(NULL);
    scope_of("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert_str_eq(ev("repr(scope['type'])"), "'http'");
    ck_assert_str_eq(ev("repr(scope['asgi'])"),
                     "{'version': '3.0', 'spec_version': '2.3'}");
    ck_assert_str_eq(ev("repr(scope['scheme'])"), "'http'");
    ck_assert_str_eq(ev("repr(scope['root_path'])"), "''");
    ck_assert_str_eq(ev("sorted(scope['extensions'])"),
                     "['http.response.pathsend', 'http.response.trailers']");
    ck_assert_str_eq(ev("'state' in scope"), "False");
    ck_assert_str_eq(ev("sorted(scope)"),
                     "['asgi', 'client', 'extensions', 'headers', "
                     "'http_version', 'method', 'path', 'query_string', "
                     "'raw_path', 'root_path', 'scheme', 'server', 'type']");
}
END_TEST

START_TEST(test_root_path)
{
    UP("--root-path", "/api/v1", NULL);
    scope_of("GET /x HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert_str_eq(ev("repr(scope['root_path'])"), "'/api/v1'");
}
END_TEST

/* Every request gets its own dict: what an app sets in one scope is not
 * in the next. (Only the top level: the nested "asgi" and "extensions"
 * dicts come from the prototype as they are.) */
START_TEST(test_scope_is_fresh_per_request)
{
    UP(NULL);
    request("GET /one HTTP/1.1\r\nHost: h\r\n\r\n");
    scope(NULL);
    hp_module("t", "first = scope\n"
                   "scope['type'] = 'changed'\n"
                   "scope['mine'] = 1\n"
                   "del scope['root_path']\n");
    scope(NULL);
    ck_assert_str_eq(ev("scope is not first"), "True");
    ck_assert_str_eq(ev("scope['type']"), "http");
    ck_assert_str_eq(ev("scope['path']"), "/one");
    ck_assert_str_eq(ev("'mine' in scope"), "False");
    ck_assert_str_eq(ev("repr(scope['root_path'])"), "''");
}
END_TEST

/* ------------------------------------------------------------------ */
/* the request line                                                   */

static const struct {
    const char *raw;
    const char *method, *version;
} request_lines[] = {
    {"GET / HTTP/1.1\r\nHost: h\r\n\r\n", "GET", "1.1"},
    {"GET / HTTP/1.0\r\n\r\n", "GET", "1.0"},
    {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", "POST", "1.1"},
    {"DELETE / HTTP/1.1\r\nHost: h\r\n\r\n", "DELETE", "1.1"},
    {"PATCH / HTTP/1.0\r\nContent-Length: 0\r\n\r\n", "PATCH", "1.0"},
    {"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", "OPTIONS", "1.1"},
    {"HEAD / HTTP/1.1\r\nHost: h\r\n\r\n", "HEAD", "1.1"},
    {"PURGE / HTTP/1.1\r\nHost: h\r\n\r\n", "PURGE", "1.1"},
};

START_TEST(test_method_and_version)
{
    UP(NULL);
    scope_of(request_lines[_i].raw);
    ck_assert_str_eq(ev("scope['method']"), request_lines[_i].method);
    ck_assert_str_eq(ev("scope['http_version']"), request_lines[_i].version);
    ck_assert_str_eq(ev("type(scope['method']).__name__"), "str");
}
END_TEST

static const struct {
    const char *target;
    const char *path;         /* repr() */
    const char *raw_path;     /* repr() */
    const char *query_string; /* repr() */
} targets[] = {
    {"/", "'/'", "b'/'", "b''"},
    {"/plain/path", "'/plain/path'", "b'/plain/path'", "b''"},
    {"/a%20b/caf%C3%A9", "'/a b/caf\xc3\xa9'", "b'/a%20b/caf%C3%A9'", "b''"},
    {"/x%2Fy", "'/x/y'", "b'/x%2Fy'", "b''"},
    {"/bad%FFutf8", "'/bad\xef\xbf\xbdutf8'", "b'/bad%FFutf8'", "b''"},
    {"/q?x=1&y=%20z", "'/q'", "b'/q'", "b'x=1&y=%20z'"},
    {"/q?", "'/q'", "b'/q'", "b''"},
    {"/q?a=1?b=2", "'/q'", "b'/q'", "b'a=1?b=2'"},
    {"/p%3Fq?r", "'/p?q'", "b'/p%3Fq'", "b'r'"},
    {"http://example.com/abs?k=v", "'/abs'", "b'/abs'", "b'k=v'"},
    {"http://example.com", "'/'", "b'/'", "b''"},
};

START_TEST(test_path_and_query)
{
    char raw[256];

    UP(NULL);
    snprintf(raw, sizeof(raw), "GET %s HTTP/1.1\r\nHost: h\r\n\r\n",
             targets[_i].target);
    scope_of(raw);
    ck_assert_str_eq(ev("repr(scope['path'])"), targets[_i].path);
    ck_assert_str_eq(ev("repr(scope['raw_path'])"), targets[_i].raw_path);
    ck_assert_str_eq(ev("repr(scope['query_string'])"),
                     targets[_i].query_string);
}
END_TEST

/* ------------------------------------------------------------------ */
/* headers, client, server, state                                     */

START_TEST(test_headers)
{
    UP(NULL);
    scope_of("GET / HTTP/1.1\r\n"
             "Host: example.com\r\n"
             "X-Custom:   Mixed Case Value  \r\n"
             "ACCEPT: */*\r\n"
             "x-custom: two\r\n"
             "Content-TYPE: text/plain\r\n"
             "X-Empty:\r\n"
             "\r\n");
    ck_assert_str_eq(ev("repr(scope['headers'])"),
                     "[(b'host', b'example.com'), "
                     "(b'x-custom', b'Mixed Case Value'), "
                     "(b'accept', b'*/*'), "
                     "(b'x-custom', b'two'), "
                     "(b'content-type', b'text/plain'), "
                     "(b'x-empty', b'')]");
    ck_assert_str_eq(
        ev("all(type(h) is tuple and len(h) == 2 and type(h[0]) is bytes "
           "and type(h[1]) is bytes for h in scope['headers'])"),
        "True");
}
END_TEST

/* A name longer than a stack buffer is lower-cased whole. */
START_TEST(test_long_header_name)
{
    char name[1001], raw[1200], want[1100];

    UP(NULL);
    for (int i = 0; i < 1000; i++)
        name[i] = (char)('A' + i % 26);
    name[1000] = '\0';
    snprintf(raw, sizeof(raw), "GET / HTTP/1.1\r\nHost: h\r\n%s: v\r\n\r\n",
             name);
    scope_of(raw);
    for (int i = 0; i < 1000; i++)
        name[i] = (char)('a' + i % 26);
    snprintf(want, sizeof(want), "b'%s'", name);
    ck_assert_str_eq(ev("repr(scope['headers'][1][0])"), want);
}
END_TEST

START_TEST(test_no_headers)
{
    UP(NULL);
    scope_of("GET / HTTP/1.0\r\n\r\n");
    ck_assert_str_eq(ev("repr(scope['headers'])"), "[]");
}
END_TEST

START_TEST(test_client_and_server)
{
    char want[64];

    UP(NULL);
    scope_of("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    snprintf(want, sizeof(want), "('127.0.0.1', %d)", local_port(client.fd));
    ck_assert_str_eq(ev("repr(scope['client'])"), want);
    snprintf(want, sizeof(want), "('127.0.0.1', %d)",
             local_port(pump.listeners[0].fd));
    ck_assert_str_eq(ev("repr(scope['server'])"), want);
}
END_TEST

/* The client tuple follows the connection: a second client on the same
 * pool slot is not taken for the first. */
START_TEST(test_client_per_connection)
{
    char want[64];
    h_nactive_t none = {&pump, 0};

    struct iovec iov = {"HTTP/1.1 204 No Content\r\n\r\n", 27};
    uint32_t idx;

    UP(NULL);
    scope_of("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    idx = client.conn->x.id;
    ck_assert_int_eq(sl_exch_send(&client.conn->x, client.conn->x.gen, &iov, 1,
                                  SL_SEND_END | SL_SEND_CLOSE),
                     0);
    ck_assert(h_wait_eof(&pump, &client));
    h_client_close(&client);
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
    h_connect(&pump, &client);
    ck_assert_uint_eq(client.conn->x.id, idx); /* the same slot */
    scope_of("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    snprintf(want, sizeof(want), "('127.0.0.1', %d)", local_port(client.fd));
    ck_assert_str_eq(ev("repr(scope['client'])"), want);
}
END_TEST

/* The lifespan state goes in as a shallow copy: the app's own keys stay
 * in its request, the objects they hold are shared. */
START_TEST(test_state)
{
    PyObject *state;

    UP(NULL);
    hp_module("t", "state = {'db': ['conn'], 'n': 1}\n");
    state = PyObject_GetAttrString(PyImport_AddModule("t"), "state");
    hp_check(state, "state");
    request("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    scope(state);
    Py_DECREF(state);
    ck_assert_str_eq(ev("scope['state'] == state"), "True");
    ck_assert_str_eq(ev("scope['state'] is not state"), "True");
    ck_assert_str_eq(ev("scope['state']['db'] is state['db']"), "True");
    hp_module("t", "scope['state']['n'] = 2\n");
    ck_assert_str_eq(ev("state['n']"), "1");
}
END_TEST

/* ------------------------------------------------------------------ */
/* WebSocket                                                          */

/* The pump of these tests does not take WebSockets: the handshake is an
 * ordinary request to the loop, and only the scope differs. */
#define HANDSHAKE                                                              \
    "Connection: Upgrade\r\nUpgrade: websocket\r\n"                            \
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"                          \
    "Sec-WebSocket-Version: 13\r\n"

START_TEST(test_ws_fixed_keys)
{
    UP("--root-path", "/r", NULL);
    request("GET /chat HTTP/1.1\r\nHost: h\r\n" HANDSHAKE "\r\n");
    scope_as(NULL, true);
    ck_assert_str_eq(ev("repr(scope['type'])"), "'websocket'");
    ck_assert_str_eq(ev("repr(scope['asgi'])"),
                     "{'version': '3.0', 'spec_version': '2.4'}");
    ck_assert_str_eq(ev("repr(scope['scheme'])"), "'ws'");
    ck_assert_str_eq(ev("repr(scope['root_path'])"), "'/r'");
    ck_assert_str_eq(ev("repr(scope['extensions'])"),
                     "{'websocket.http.response': {}}");
    ck_assert_str_eq(ev("repr(scope['subprotocols'])"), "[]");
    ck_assert_str_eq(ev("sorted(scope)"),
                     "['asgi', 'client', 'extensions', 'headers', "
                     "'http_version', 'path', 'query_string', 'raw_path', "
                     "'root_path', 'scheme', 'server', 'subprotocols', "
                     "'type']");
}
END_TEST

/* The parts both scope types have come from the one builder: the same
 * values as the http scope of the same request, state included. */
START_TEST(test_ws_shares_the_http_parts)
{
    PyObject *state;

    UP(NULL);
    hp_module("t", "state = {'k': [1]}\n");
    state = PyObject_GetAttrString(PyImport_AddModule("t"), "state");
    hp_check(state, "state");
    request("GET /a%20b/c?x=1&y=%20 HTTP/1.1\r\nHost: h\r\n" HANDSHAKE
            "X-Mixed: Val\r\n\r\n");
    scope_as(state, false);
    hp_module("t", "http = scope\n");
    scope_as(state, true);
    Py_DECREF(state);
    ck_assert_str_eq(ev("scope['path']"), "/a b/c");
    ck_assert_str_eq(ev("scope['raw_path']"), "b'/a%20b/c'");
    ck_assert_str_eq(ev("scope['query_string']"), "b'x=1&y=%20'");
    ck_assert_str_eq(ev("scope['headers'][-1]"), "(b'x-mixed', b'Val')");
    ck_assert_str_eq(ev("[k for k in http if k not in ('type', 'asgi', "
                        "'scheme', 'extensions', 'method') and "
                        "http[k] != scope[k]]"),
                     "[]");
    ck_assert_str_eq(ev("scope['state'] == state"), "True");
    ck_assert_str_eq(ev("scope['state'] is not state"), "True");
    ck_assert_str_eq(ev("scope['http_version']"), "1.1");
}
END_TEST

static const struct {
    const char *fields, *want;
} offers[] = {
    {"", "[]"},
    {"Sec-WebSocket-Protocol: chat\r\n", "['chat']"},
    {"Sec-WebSocket-Protocol: chat, superchat\r\n", "['chat', 'superchat']"},
    {"Sec-WebSocket-Protocol:  a ,\tb\t,c \r\n", "['a', 'b', 'c']"},
    {"Sec-WebSocket-Protocol: a,,b,\r\n", "['a', 'b']"},
    {"Sec-WebSocket-Protocol: , \r\n", "[]"},
    {"sec-websocket-protocol: one\r\nX-Other: two\r\n"
     "SEC-WEBSOCKET-PROTOCOL: three, four\r\n",
     "['one', 'three', 'four']"},
    {"Sec-WebSocket-Protocols: no\r\n", "[]"},
};

START_TEST(test_ws_subprotocols)
{
    char raw[512];

    UP(NULL);
    snprintf(raw, sizeof(raw),
             "GET /ws HTTP/1.1\r\nHost: h\r\n" HANDSHAKE "%s\r\n",
             offers[_i].fields);
    request(raw);
    scope_as(NULL, true);
    ck_assert_str_eq(ev("scope['subprotocols']"), offers[_i].want);
}
END_TEST

static Suite *asgi_scope_suite(void)
{
    Suite *s = suite_create("asgi_scope");
    TCase *tc = tcase_create("scope");

    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_fixed_keys);
    tcase_add_test(tc, test_root_path);
    tcase_add_test(tc, test_scope_is_fresh_per_request);
    tcase_add_loop_test(tc, test_method_and_version, 0,
                        sizeof(request_lines) / sizeof(request_lines[0]));
    tcase_add_loop_test(tc, test_path_and_query, 0,
                        sizeof(targets) / sizeof(targets[0]));
    tcase_add_test(tc, test_headers);
    tcase_add_test(tc, test_long_header_name);
    tcase_add_test(tc, test_no_headers);
    tcase_add_test(tc, test_client_and_server);
    tcase_add_test(tc, test_client_per_connection);
    tcase_add_test(tc, test_state);
    suite_add_tcase(s, tc);

    tc = tcase_create("websocket");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_ws_fixed_keys);
    tcase_add_test(tc, test_ws_shares_the_http_parts);
    tcase_add_loop_test(tc, test_ws_subprotocols, 0,
                        sizeof(offers) / sizeof(offers[0]));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(asgi_scope_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
