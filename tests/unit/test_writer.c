/* test_writer.c - check suite for worker/python/writer.c.
 *
 * A real pump in pump mode serves a real loopback connection; the test
 * thread is the loop thread and, once it took the request's ticket, the
 * executor: it drives one sl_writer_t over the request as WSGI's lane or
 * ASGI's send() would, with header lists made by the embedded interpreter,
 * and then reads what the client received. Out-of-memory cases make the
 * scratch buffer's growth fail (buf_faults.h). Python starts once per
 * process, so every test runs forked and starts it in its fixture.
 */
#include "config.h"

#include <check.h>
#include <fcntl.h>

#include "tests/unit/buf_faults.h"
#include "tests/unit/py_harness.h"
#include "worker/python/writer.h"

static sl_options_t opt;
static sl_pump_t pump;
static h_client_t client;
static h_resp_t resp;
static sl_buf_t scratch;
static sl_writer_t w;
static sl_ticket_t ticket;
static char v[256]; /* header values read back */

static void setup(void)
{
    client.fd = -1;
    hp_log_to_file();
}

static void teardown(void)
{
    h_resp_free(&resp);
    h_client_close(&client);
    sl_buf_free(&scratch);
}

/* Python, a pump and a connected client, for "sluice ARGS... testapp:app". */
#define UP(...)                                                                \
    do {                                                                       \
        h_options(&opt, __VA_ARGS__);                                          \
        up();                                                                  \
    } while (0)

static void up(void)
{
    ck_assert_int_eq(sl_py_init(&opt), 0);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
}

static bool conn_reading(void *arg)
{
    sl_conn_t *c = arg;

    return c->state == SL_CONN_READING;
}

static bool conn_serving(void *arg)
{
    sl_conn_t *c = arg;

    return c->state == SL_CONN_SERVING;
}

/* Send RAW, take its ticket and set W up for it, for an app of IFACE. */
static void request(const char *raw, const sl_writer_iface_t *iface)
{
    h_sends(&client, raw);
    ck_assert(h_run_until(&pump, conn_serving, client.conn));
    ck_assert(h_take_ticket(&pump, &ticket));
    ck_assert_uint_eq(ticket.gen, client.conn->x.gen);
    sl_writer_init(&w, iface, &scratch, &client.conn->x, ticket.gen);
}

static void get(const sl_writer_iface_t *iface)
{
    request("GET / HTTP/1.1\r\nHost: h\r\n\r\n", iface);
}

/* A Python value (new reference) from EXPR. */
static PyObject *py(const char *expr)
{
    PyObject *m = PyImport_AddModule("__main__"), *r;

    hp_check(m, "__main__");
    r = PyRun_String(expr, Py_eval_input, PyModule_GetDict(m),
                     PyModule_GetDict(m));
    hp_check(r, expr);
    return r;
}

/* start() with header list EXPR; its result. */
static int start(int status, const char *line, const char *headers,
                 long long known, bool trailers)
{
    PyObject *h = py(headers);
    int rc = sl_writer_start(&w, status, line, line ? strlen(line) : 0, h,
                             known, trailers);

    Py_DECREF(h);
    return rc;
}

static int body(const char *s, bool last)
{
    return sl_writer_body(&w, s, strlen(s), last);
}

/* Bytes the writer queued and the loop did not take yet. */
static size_t queued(void)
{
    size_t n;

    pthread_mutex_lock(&client.conn->x.mu);
    n = sl_buf_pending(&client.conn->x.out);
    pthread_mutex_unlock(&client.conn->x.mu);
    return n;
}

static void response(bool no_body)
{
    ck_assert_msg(h_response(&pump, &client, &resp, no_body),
                  "no complete response: %.*s", (int)client.len,
                  client.data ? client.data : "");
}

static const char *hdr(const char *name)
{
    return h_header(resp.head, name, v, sizeof(v));
}

/* The exception now pending is of type EXC and says WORDS; cleared. */
static void assert_raised(PyObject *exc, const char *words)
{
    PyObject *t, *val, *tb, *s;

    ck_assert_ptr_nonnull(PyErr_Occurred());
    ck_assert(PyErr_ExceptionMatches(exc));
    PyErr_Fetch(&t, &val, &tb);
    s = PyObject_Str(val);
    hp_check(s, "str(exception)");
    ck_assert_msg(strstr(PyUnicode_AsUTF8(s), words) != NULL,
                  "'%s' not in '%s'", words, PyUnicode_AsUTF8(s));
    Py_DECREF(s);
    Py_XDECREF(t);
    Py_XDECREF(val);
    Py_XDECREF(tb);
}

static bool closed_and_done(void *arg)
{
    (void)arg;
    h_pull(&client);
    return client.eof && pump.inflight == 0;
}

/* ------------------------------------------------------------------ */
/* the head and the body                                              */

/* The head waits for the body and leaves with it, sized. */
START_TEST(test_small_response)
{
    UP(NULL);
    get(&sl_writer_asgi);
    ck_assert_int_eq(
        start(200, NULL, "[[b'content-type', b'text/plain']]", 5, false), 0);
    ck_assert(w.started && !w.sent);
    ck_assert_uint_eq(queued(), 0);
    ck_assert_int_eq(body("hello", true), 0);
    ck_assert(w.sent && w.ended && w.gone);
    response(false);
    ck_assert(strncmp(resp.head, "HTTP/1.1 200 OK\r\n", 17) == 0);
    ck_assert_str_eq(hdr("content-type"), "text/plain");
    ck_assert_str_eq(hdr("Content-Length"), "5");
    ck_assert_str_eq(hdr("Server"), "sluice");
    ck_assert_ptr_nonnull(hdr("Date"));
    ck_assert_ptr_null(hdr("Connection"));
    ck_assert_str_eq(resp.body, "hello");
    ck_assert(h_run_until(&pump, conn_reading, client.conn)); /* kept */
}
END_TEST

/* WSGI's status line is the app's text; ASGI's reason is the server's. */
START_TEST(test_status_line)
{
    UP(NULL);
    get(&sl_writer_wsgi);
    ck_assert_int_eq(start(404, "404 Not Here", "[('X-A', 'b')]", 0, false), 0);
    ck_assert_int_eq(sl_writer_end(&w, NULL), 0);
    response(false);
    ck_assert(strncmp(resp.head, "HTTP/1.1 404 Not Here\r\n", 23) == 0);
    ck_assert_str_eq(hdr("X-A"), "b");
    ck_assert_str_eq(hdr("Content-Length"), "0");

    get(&sl_writer_asgi);
    ck_assert_int_eq(start(404, NULL, "[]", 0, false), 0);
    ck_assert_int_eq(sl_writer_end(&w, NULL), 0);
    response(false);
    ck_assert(strncmp(resp.head, "HTTP/1.1 404 Not Found\r\n", 24) == 0);
}
END_TEST

/* An unknown length streams chunked; an empty part sends nothing. */
START_TEST(test_streamed_body)
{
    UP(NULL);
    get(&sl_writer_asgi);
    ck_assert_int_eq(start(200, NULL, "()", -1, false), 0);
    ck_assert_int_eq(body("ab", false), 0);
    ck_assert(w.sent && !w.ended);
    ck_assert_int_eq(body("", false), 0);
    ck_assert_int_eq(body("c", false), 0);
    ck_assert_int_eq(sl_writer_end(&w, NULL), 0);
    ck_assert(w.ended);
    response(false);
    ck_assert(resp.chunked);
    ck_assert_str_eq(resp.body, "abc");
}
END_TEST

/* Past the credit the writer says so; the caller decides how to wait. */
START_TEST(test_over_credit)
{
    static char big[SL_CONN_CREDIT + 1];

    UP(NULL);
    get(&sl_writer_asgi);
    memset(big, 'x', sizeof(big) - 1);
    ck_assert_int_eq(start(200, NULL, "[]", -1, false), 0);
    ck_assert_int_eq(body("small", false), 0);
    ck_assert_int_eq(body(big, false), 1);
    ck_assert_int_eq(sl_writer_end(&w, NULL), 0);
    response(false);
    ck_assert_uint_eq(resp.body_len, 5 + sizeof(big) - 1);
}
END_TEST

/* Nothing sent yet: a broken response becomes the error answer. */
START_TEST(test_fail_before_anything_sent)
{
    UP(NULL);
    get(&sl_writer_wsgi);
    ck_assert_int_eq(start(200, "200 OK", "[('X-A', 'b')]", -1, false), 0);
    sl_writer_fail(&w, 500);
    ck_assert(w.ended && w.gone);
    response(false);
    ck_assert_int_eq(resp.status, 500);
    ck_assert_ptr_null(hdr("X-A"));
    ck_assert_str_eq(hdr("Connection"), "close");
    ck_assert_str_eq(resp.body, "Internal Server Error\n");
    ck_assert(h_wait_eof(&pump, &client));
}
END_TEST

/* Once bytes went out, a broken response can only be cut short. */
START_TEST(test_fail_after_bytes_sent)
{
    UP(NULL);
    get(&sl_writer_asgi);
    ck_assert_int_eq(start(200, NULL, "[]", -1, false), 0);
    ck_assert_int_eq(body("partial", false), 0);
    sl_writer_fail(&w, 500);
    ck_assert(h_run_until(&pump, closed_and_done, NULL));
    ck_assert(strncmp(client.data, "HTTP/1.1 200 OK\r\n", 17) == 0);
    ck_assert_ptr_nonnull(strstr(client.data, "7\r\npartial\r\n"));
    ck_assert_ptr_null(strstr(client.data, "\r\n0\r\n\r\n"));
}
END_TEST

/* A response ends once: after END nothing more goes out. */
START_TEST(test_ends_once)
{
    UP(NULL);
    get(&sl_writer_asgi);
    ck_assert_int_eq(start(200, NULL, "[]", 2, false), 0);
    ck_assert_int_eq(body("ok", true), 0);
    sl_writer_fail(&w, 500);
    ck_assert_int_eq(body("late", false), -1);
    ck_assert_int_eq(sl_writer_end(&w, NULL), -1);
    response(false);
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(resp.body, "ok");
    get(&sl_writer_asgi); /* kept alive, nothing stray before the next */
    ck_assert_int_eq(start(204, NULL, "[]", -1, false), 0);
    ck_assert_int_eq(sl_writer_end(&w, NULL), 0);
    response(false);
    ck_assert_int_eq(resp.status, 204);
}
END_TEST

/* A writer for a request that is over touches nothing. */
START_TEST(test_stale_request)
{
    sl_writer_t stale;
    PyObject *h;

    UP(NULL);
    get(&sl_writer_asgi);
    sl_writer_init(&stale, &sl_writer_asgi, &scratch, &client.conn->x,
                   ticket.gen - 1);
    h = py("[]");
    ck_assert_int_eq(sl_writer_start(&stale, 200, NULL, 0, h, -1, false), 0);
    Py_DECREF(h);
    ck_assert_int_eq(sl_writer_body(&stale, "stale", 5, false), -1);
    ck_assert(stale.gone && !stale.ended);
    sl_writer_fail(&stale, 500);
    ck_assert_uint_eq(queued(), 0);
    ck_assert_int_eq(start(200, NULL, "[]", 4, false), 0);
    ck_assert_int_eq(body("mine", true), 0);
    response(false);
    ck_assert_str_eq(resp.body, "mine");
}
END_TEST

/* The head the worker sends while it drains closes the connection. */
START_TEST(test_draining_closes)
{
    UP(NULL);
    get(&sl_writer_asgi);
    pump.drain.draining = true;
    pump.drain.stopping =
        true; /* keep the drain's own steps out of this test */
    ck_assert_int_eq(start(200, NULL, "[]", 2, false), 0);
    ck_assert_int_eq(body("ok", true), 0);
    response(false);
    ck_assert_str_eq(hdr("Connection"), "close");
    ck_assert(h_wait_eof(&pump, &client));
}
END_TEST

/* ------------------------------------------------------------------ */
/* trailers                                                           */

START_TEST(test_trailers)
{
    PyObject *t;

    UP(NULL);
    get(&sl_writer_asgi);
    ck_assert_int_eq(start(200, NULL, "[]", -1, true), 0);
    ck_assert_int_eq(body("ab", true), 0);
    ck_assert(!w.ended); /* the trailers end it */
    t = py("[[b'x-sum', b'42']]");
    ck_assert_int_eq(sl_writer_end(&w, t), 0);
    Py_DECREF(t);
    ck_assert(w.ended);
    response(false);
    ck_assert_str_eq(hdr("Transfer-Encoding"), "chunked");
    ck_assert_str_eq(resp.body, "ab");
    ck_assert_ptr_null(hdr("Connection"));
}
END_TEST

/* The same bytes on the wire, before the client's parser took them. */
START_TEST(test_trailers_on_the_wire)
{
    static const char want[] = "2\r\nab\r\n0\r\nx-sum: 42\r\n\r\n";
    PyObject *t;

    UP(NULL);
    get(&sl_writer_asgi);
    ck_assert_int_eq(start(200, NULL, "[]", -1, true), 0);
    ck_assert_int_eq(body("ab", true), 0);
    t = py("[[b'x-sum', b'42']]");
    ck_assert_int_eq(sl_writer_end(&w, t), 0);
    Py_DECREF(t);
    ck_assert_msg(memmem(client.conn->x.out.data, client.conn->x.out.len, want,
                         sizeof(want) - 1) != NULL,
                  "queued: %.*s", (int)client.conn->x.out.len,
                  client.conn->x.out.data);
}
END_TEST

/* HTTP/1.0 cannot carry trailers: the close ends the body instead. */
START_TEST(test_trailers_without_chunking)
{
    PyObject *t;

    UP(NULL);
    request("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            &sl_writer_asgi);
    ck_assert_int_eq(start(200, NULL, "[]", -1, true), 0);
    ck_assert_int_eq(body("ab", true), 0);
    ck_assert(!w.ended);
    t = py("[[b'x-sum', b'42']]");
    ck_assert_int_eq(sl_writer_end(&w, t), 0);
    Py_DECREF(t);
    ck_assert(h_wait_eof(&pump, &client));
    response(false);
    ck_assert(resp.closed);
    ck_assert_str_eq(resp.body, "ab");
    ck_assert_ptr_null(strstr(client.data, "x-sum"));
}
END_TEST

/* Trailers announced over a Content-Length the body fell short of: only
 * a close can end such a response. */
START_TEST(test_trailers_short_body_closes)
{
    UP(NULL);
    get(&sl_writer_asgi);
    ck_assert_int_eq(start(200, NULL, "[[b'content-length', b'10']]", -1, true),
                     0);
    ck_assert_int_eq(body("ab", true), 0);
    ck_assert_int_eq(sl_writer_end(&w, NULL), 0);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_ptr_nonnull(strstr(client.data, "\r\n\r\nab"));
}
END_TEST

/* ------------------------------------------------------------------ */
/* sendfile                                                           */

static char file_path[] = "/tmp/sl-test-writer-XXXXXX";

/* A file holding "0123456789", open for reading (unlinked already). */
static int ten_bytes(void)
{
    int fd = mkstemp(file_path);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "0123456789", 10), 10);
    unlink(file_path);
    return fd;
}

static bool fd_closed(int fd)
{
    return fcntl(fd, F_GETFD) < 0 && errno == EBADF;
}

START_TEST(test_sendfile)
{
    int fd;

    UP(NULL);
    get(&sl_writer_wsgi);
    fd = ten_bytes();
    ck_assert_int_eq(start(200, "200 OK", "[]", 8, false), 0);
    ck_assert_int_eq(sl_writer_sendfile(&w, fd, 2, 8), 0);
    ck_assert(w.ended);
    response(false);
    ck_assert_str_eq(hdr("Content-Length"), "8");
    ck_assert_str_eq(resp.body, "23456789");
    get(&sl_writer_wsgi); /* kept alive */
    ck_assert_int_eq(start(204, "204 No Content", "[]", -1, false), 0);
    ck_assert_int_eq(sl_writer_end(&w, NULL), 0);
    response(false);
    ck_assert_int_eq(resp.status, 204);
}
END_TEST

/* Never more than the app's Content-Length. */
START_TEST(test_sendfile_cut_to_content_length)
{
    UP(NULL);
    get(&sl_writer_asgi);
    ck_assert_int_eq(start(200, NULL, "[[b'content-length', b'4']]", 10, false),
                     0);
    ck_assert_int_eq(sl_writer_sendfile(&w, ten_bytes(), 0, 10), 0);
    response(false);
    ck_assert_int_eq(h_header_count(resp.head, "Content-Length"), 1);
    ck_assert_str_eq(resp.body, "0123");
}
END_TEST

/* HEAD: the head alone; the file is closed unsent. */
START_TEST(test_sendfile_head)
{
    int fd;

    UP(NULL);
    request("HEAD / HTTP/1.1\r\nHost: h\r\n\r\n", &sl_writer_asgi);
    fd = ten_bytes();
    ck_assert_int_eq(start(200, NULL, "[]", 10, false), 0);
    ck_assert_int_eq(sl_writer_sendfile(&w, fd, 0, 10), 0);
    ck_assert(fd_closed(fd));
    response(true);
    ck_assert_str_eq(hdr("Content-Length"), "10");
    get(&sl_writer_asgi); /* nothing stray after the head */
    ck_assert_int_eq(start(200, NULL, "[]", 2, false), 0);
    ck_assert_int_eq(body("ok", true), 0);
    response(false);
    ck_assert_str_eq(resp.body, "ok");
}
END_TEST

/* A request that is over: the file is closed, the writer is done. */
START_TEST(test_sendfile_stale_closes_fd)
{
    sl_writer_t stale;
    PyObject *h;
    int fd;

    UP(NULL);
    get(&sl_writer_asgi);
    fd = ten_bytes();
    sl_writer_init(&stale, &sl_writer_asgi, &scratch, &client.conn->x,
                   ticket.gen - 1);
    h = py("[]");
    ck_assert_int_eq(sl_writer_start(&stale, 200, NULL, 0, h, 10, false), 0);
    Py_DECREF(h);
    ck_assert_int_eq(sl_writer_sendfile(&stale, fd, 0, 10), -1);
    ck_assert(fd_closed(fd));
    ck_assert(stale.ended && stale.gone);
    ck_assert_uint_eq(queued(), 0);
    sl_writer_fail(&w, 500);
    response(false);
    ck_assert_int_eq(resp.status, 500);
}
END_TEST

/* ------------------------------------------------------------------ */
/* what the app got wrong                                             */

/* A bad Content-Length raises, and nothing was queued. */
START_TEST(test_bad_content_length)
{
    UP(NULL);
    get(&sl_writer_wsgi);
    ck_assert_int_eq(
        start(200, "200 OK", "[('Content-Length', '12x')]", -1, false), -1);
    assert_raised(PyExc_ValueError, "bad Content-Length");
    ck_assert_uint_eq(queued(), 0);
    sl_writer_fail(&w, 500);
    response(false);
    ck_assert_int_eq(resp.status, 500);
}
END_TEST

static const struct {
    const char *headers;
    PyObject **exc;
    const char *words;
} wsgi_mistakes[] = {
    {"[['X-A', 'b']]", &PyExc_TypeError, "(str, str) tuples"},
    {"[('X-A',)]", &PyExc_TypeError, "(str, str) tuples"},
    {"[(b'X-A', 'b')]", &PyExc_TypeError, "header name must be str"},
    {"[('X-A', '\\u20ac')]", &PyExc_ValueError, "not latin-1"},
};

/* WSGI's pairs are looked at again when the head is built: the app may
 * have changed its list since start_response(). */
START_TEST(test_wsgi_pairs_checked)
{
    UP(NULL);
    get(&sl_writer_wsgi);
    ck_assert_int_eq(start(200, "200 OK", wsgi_mistakes[_i].headers, -1, false),
                     -1);
    assert_raised(*wsgi_mistakes[_i].exc, wsgi_mistakes[_i].words);
    ck_assert_uint_eq(queued(), 0);
}
END_TEST

/* One rule for both interfaces: a name is an RFC 9110 token, a value
 * holds no CR, LF or NUL. WSGI's pairs are checked when the head is built,
 * ASGI's when the app sends them (sl_writer_check_headers()). */
static const struct {
    const char *wsgi, *asgi;
} bad_fields[] = {
    {"[('X Injected', 'yes')]", "[[b'X Injected', b'yes']]"},
    {"[('X-A:', 'b')]", "[[b'X-A:', b'b']]"},
    {"[('', 'b')]", "[[b'', b'b']]"},
    {"[('(x)', 'b')]", "[[b'(x)', b'b']]"},
    {"[('X-A', 'a\\r\\nX-Injected: 1')]", "[[b'X-A', b'a\\nX: 1']]"},
    {"[('X-A', 'a\\x00b')]", "[[b'X-A', b'a\\x00b']]"},
};

START_TEST(test_header_rule_wsgi)
{
    UP(NULL);
    get(&sl_writer_wsgi);
    ck_assert_int_eq(start(200, "200 OK", bad_fields[_i].wsgi, -1, false), -1);
    assert_raised(PyExc_ValueError, "bad header");
    ck_assert_uint_eq(queued(), 0);
}
END_TEST

START_TEST(test_header_rule_asgi)
{
    PyObject *h;

    UP(NULL);
    h = py(bad_fields[_i].asgi);
    ck_assert_int_eq(sl_writer_check_headers(h, "ASGI: test"), -1);
    Py_DECREF(h);
    assert_raised(PyExc_ValueError, "CR, LF or NUL");
}
END_TEST

/* Every tchar is welcome in a name, for both. */
START_TEST(test_token_names_pass)
{
    PyObject *h;

    UP(NULL);
    h = py("[[b\"x!#$%&'*+-.^_`|~9\", b'v']]");
    ck_assert_int_eq(sl_writer_check_headers(h, "ASGI: test"), 0);
    Py_DECREF(h);
    get(&sl_writer_wsgi);
    ck_assert_int_eq(
        start(200, "200 OK", "[(\"x!#$%&'*+-.^_`|~9\", 'v')]", 0, false), 0);
    ck_assert_int_eq(sl_writer_end(&w, NULL), 0);
    response(false);
    ck_assert_str_eq(h_header(resp.head, "x!#$%&'*+-.^_`|~9", v, sizeof(v)),
                     "v");
}
END_TEST

/* ------------------------------------------------------------------ */
/* out of memory                                                      */

/* The head cannot be built whole: MemoryError, nothing queued (the
 * fields after the failed one would fit, and must not go out without
 * it); the error answer still can be, and goes. */
START_TEST(test_head_out_of_memory)
{
    UP(NULL);
    get(&sl_writer_asgi);
    hb_fail_after(1); /* the status line grows the scratch; X-Long cannot */
    ck_assert_int_eq(start(200, NULL,
                           "[[b'x-long', b'v' * 3000], [b'x-after', b'1']]", -1,
                           false),
                     -1);
    hb_fail_after(-1);
    assert_raised(PyExc_MemoryError, "");
    ck_assert(!w.started && !w.headed);
    ck_assert_uint_eq(queued(), 0);
    sl_writer_fail(&w, 500);
    response(false);
    ck_assert_int_eq(resp.status, 500);
    ck_assert_ptr_null(hdr("x-after"));
}
END_TEST

/* Not even the error answer fits: the close alone says it. */
START_TEST(test_fail_out_of_memory_closes)
{
    UP(NULL);
    get(&sl_writer_wsgi);
    hb_fail_after(0);
    sl_writer_fail(&w, 500);
    hb_fail_after(-1);
    ck_assert(w.ended);
    ck_assert(h_run_until(&pump, closed_and_done, NULL));
    ck_assert_uint_eq(client.len, 0);
}
END_TEST

/* The trailers cannot be built: MemoryError, and the body is cut short
 * (no last chunk) by the close. */
START_TEST(test_trailers_out_of_memory)
{
    PyObject *t;

    UP(NULL);
    get(&sl_writer_asgi);
    ck_assert_int_eq(start(200, NULL, "[]", -1, true), 0);
    ck_assert_int_eq(body("ab", true), 0);
    t = py("[[b'x-long', b'v' * 3000]]");
    hb_fail_after(0);
    ck_assert_int_eq(sl_writer_end(&w, t), -1);
    hb_fail_after(-1);
    Py_DECREF(t);
    assert_raised(PyExc_MemoryError, "");
    ck_assert(w.ended);
    ck_assert(h_run_until(&pump, closed_and_done, NULL));
    ck_assert_ptr_nonnull(strstr(client.data, "2\r\nab\r\n"));
    ck_assert_ptr_null(strstr(client.data, "ab\r\n0"));
}
END_TEST

static Suite *writer_suite(void)
{
    Suite *s = suite_create("writer");
    TCase *tc = tcase_create("response");

    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_small_response);
    tcase_add_test(tc, test_status_line);
    tcase_add_test(tc, test_streamed_body);
    tcase_add_test(tc, test_over_credit);
    tcase_add_test(tc, test_fail_before_anything_sent);
    tcase_add_test(tc, test_fail_after_bytes_sent);
    tcase_add_test(tc, test_ends_once);
    tcase_add_test(tc, test_stale_request);
    tcase_add_test(tc, test_draining_closes);
    suite_add_tcase(s, tc);

    tc = tcase_create("trailers");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_trailers);
    tcase_add_test(tc, test_trailers_on_the_wire);
    tcase_add_test(tc, test_trailers_without_chunking);
    tcase_add_test(tc, test_trailers_short_body_closes);
    suite_add_tcase(s, tc);

    tc = tcase_create("sendfile");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_sendfile);
    tcase_add_test(tc, test_sendfile_cut_to_content_length);
    tcase_add_test(tc, test_sendfile_head);
    tcase_add_test(tc, test_sendfile_stale_closes_fd);
    suite_add_tcase(s, tc);

    tc = tcase_create("app mistakes");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_bad_content_length);
    tcase_add_loop_test(tc, test_wsgi_pairs_checked, 0,
                        sizeof(wsgi_mistakes) / sizeof(wsgi_mistakes[0]));
    tcase_add_loop_test(tc, test_header_rule_wsgi, 0,
                        sizeof(bad_fields) / sizeof(bad_fields[0]));
    tcase_add_loop_test(tc, test_header_rule_asgi, 0,
                        sizeof(bad_fields) / sizeof(bad_fields[0]));
    tcase_add_test(tc, test_token_names_pass);
    suite_add_tcase(s, tc);

    tc = tcase_create("out of memory");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_head_out_of_memory);
    tcase_add_test(tc, test_fail_out_of_memory_closes);
    tcase_add_test(tc, test_trailers_out_of_memory);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(writer_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
