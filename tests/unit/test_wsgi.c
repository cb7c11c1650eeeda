/* test_wsgi.c - check suite for worker/wsgi.c.
 *
 * The embedded interpreter runs one test app (APP below, a module made from
 * source) that dispatches on the first path segment. The pump runs in
 * inline mode, so sl_wsgi_handle() is called on the test thread straight
 * from the parser, as with SLUICE_INLINE=1; requests go over a real
 * loopback connection and the tests read the response bytes the client
 * received: status line, framing, headers, body. Python starts once per
 * process, so every test runs forked and starts it in its fixture.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <regex.h>

#include "tests/unit/py_harness.h"
#include "worker/python/lane.h"
#include "worker/python/wsgi.h"

static const char APP[] =
    "import io, sys\n"
    "state = {'closed': 0}\n"
    "\n"
    "def hello(e, sr):\n"
    "    sr('200 OK', [('Content-Type', 'text/plain')])\n"
    "    return [b'hello']\n"
    "\n"
    "def reason(e, sr):\n"
    "    sr('404 Not Here', [])\n"
    "    return [b'nope']\n"
    "\n"
    "def parts(e, sr):\n"
    "    sr('200 OK', [])\n"
    "    return [b'a', b'', b'bc']\n"
    "\n"
    "def tup(e, sr):\n"
    "    sr('200 OK', [])\n"
    "    return (b'x', b'yz')\n"
    "\n"
    "def gen(e, sr):\n"
    "    sr('200 OK', [])\n" /* lazily: on the first next() */
    "    yield b'one'\n"
    "    yield b''\n"
    "    yield b'two'\n"
    "\n"
    "def empty_gen(e, sr):\n"
    "    sr('200 OK', [])\n"
    "    return iter([])\n"
    "\n"
    "def status(e, sr):\n"
    "    sr(e['QUERY_STRING'] + ' Whatever', [])\n"
    "    return [b'body']\n"
    "\n"
    "def status_gen(e, sr):\n"
    "    sr(e['QUERY_STRING'] + ' Whatever', [])\n"
    "    return iter([b'body'])\n"
    "\n"
    "def cl_short(e, sr):\n"
    "    sr('200 OK', [('Content-Length', '3')])\n"
    "    return iter([b'hello'])\n"
    "\n"
    "def cl_long(e, sr):\n"
    "    sr('200 OK', [('Content-Length', '10')])\n"
    "    return iter([b'hello'])\n"
    "\n"
    "def cl_gen(e, sr):\n"
    "    sr('200 OK', [('content-length', '5')])\n"
    "    return iter([b'hel', b'lo'])\n"
    "\n"
    "def conn_close(e, sr):\n"
    "    sr('200 OK', [('Connection', 'close')])\n"
    "    return [b'x']\n"
    "\n"
    "def te(e, sr):\n"
    "    sr('200 OK', [('Transfer-Encoding', 'chunked')])\n"
    "    return [b'framed by us']\n"
    "\n"
    "def own_headers(e, sr):\n"
    "    sr('200 OK', [('Server', 'mine'),\n"
    "                  ('Date', 'Thu, 01 Jan 1970 00:00:00 GMT'),\n"
    "                  ('Set-Cookie', 'a=1'), ('Set-Cookie', 'b=2')])\n"
    "    return [b'x']\n"
    "\n"
    "def raise_early(e, sr):\n"
    "    1 / 0\n"
    "\n"
    "def raise_late(e, sr):\n"
    "    sr('200 OK', [])\n"
    "    yield b'partial'\n"
    "    raise KeyError('late')\n"
    "\n"
    "def twice(e, sr):\n"
    "    sr('200 OK', [])\n"
    "    try:\n"
    "        sr('201 Again', [])\n"
    "    except RuntimeError as ex:\n"
    "        return [type(ex).__name__.encode()]\n"
    "    return [b'accepted twice']\n"
    "\n"
    "def exc_early(e, sr):\n"
    "    sr('200 OK', [('X-First', '1')])\n"
    "    try:\n"
    "        1 / 0\n"
    "    except ZeroDivisionError:\n"
    "        sr('500 Oops', [('X-Second', '1')], sys.exc_info())\n"
    "    return [b'error page']\n"
    "\n"
    "def exc_late(e, sr):\n"
    "    w = sr('200 OK', [])\n"
    "    w(b'sent')\n"
    "    try:\n"
    "        1 / 0\n"
    "    except ZeroDivisionError:\n"
    "        try:\n"
    "            sr('500 Oops', [], sys.exc_info())\n"
    "        except ZeroDivisionError:\n"
    "            return [b'+reraised']\n"
    "    return [b'+swallowed']\n"
    "\n"
    "def bad_status(e, sr):\n"
    "    sr('200', [])\n"
    "    return [b'x']\n"
    "\n"
    "def bytes_status(e, sr):\n"
    "    sr(b'200 OK', [])\n"
    "    return [b'x']\n"
    "\n"
    "def crlf_header(e, sr):\n"
    "    sr('200 OK', [('X-A', 'a\\r\\nInjected: 1')])\n"
    "    return [b'x']\n"
    "\n"
    "def colon_name(e, sr):\n"
    "    sr('200 OK', [('X:A', 'a')])\n"
    "    return [b'x']\n"
    "\n"
    "def space_name(e, sr):\n"
    "    sr('200 OK', [('X Injected', 'a')])\n"
    "    return [b'x']\n"
    "\n"
    "def non_latin1_header(e, sr):\n"
    "    sr('200 OK', [('X-A', '\\u20ac')])\n"
    "    return [b'x']\n"
    "\n"
    "def tuple_headers(e, sr):\n"
    "    sr('200 OK', (('X-A', 'b'),))\n"
    "    return [b'x']\n"
    "\n"
    "def bad_cl(e, sr):\n"
    "    sr('200 OK', [('Content-Length', '12x')])\n"
    "    return [b'x']\n"
    "\n"
    "def write(e, sr):\n"
    "    w = sr('200 OK', [])\n"
    "    w(b'a')\n"
    "    w(b'b')\n"
    "    return [b'c']\n"
    "\n"
    "def write_str(e, sr):\n"
    "    w = sr('200 OK', [('Content-Length', '9')])\n"
    "    try:\n"
    "        w('text')\n"
    "    except TypeError as ex:\n"
    "        return [type(ex).__name__.encode()]\n"
    "    return [b'accepted']\n"
    "\n"
    "def keep_write(e, sr):\n"
    "    state['write'] = sr('200 OK', [])\n"
    "    return [b'first']\n"
    "\n"
    "def stale_write(e, sr):\n"
    "    sr('200 OK', [])\n"
    "    try:\n"
    "        state['write'](b'LEAK')\n"
    "    except Exception as ex:\n"
    "        return [type(ex).__name__.encode()]\n"
    "    return [b'mine']\n"
    "\n"
    "def str_result(e, sr):\n"
    "    sr('200 OK', [])\n"
    "    return ['text']\n"
    "\n"
    "def str_gen(e, sr):\n"
    "    sr('200 OK', [])\n"
    "    return iter(['text'])\n"
    "\n"
    "def no_sr(e, sr):\n"
    "    return [b'x']\n"
    "\n"
    "class Closing:\n"
    "    def __iter__(self):\n"
    "        yield b'a'\n"
    "        yield b'b'\n"
    "    def close(self):\n"
    "        state['closed'] += 1\n"
    "\n"
    "def closing(e, sr):\n"
    "    sr('200 OK', [])\n"
    "    return Closing()\n"
    "\n"
    "def file(e, sr):\n"
    "    sr('200 OK', [])\n"
    "    f = open(e['QUERY_STRING'], 'rb')\n"
    "    state['file'] = f\n"
    "    return e['wsgi.file_wrapper'](f)\n"
    "\n"
    "def file_seek(e, sr):\n"
    "    sr('200 OK', [])\n"
    "    f = open(e['QUERY_STRING'], 'rb')\n"
    "    f.seek(3)\n"
    "    return e['wsgi.file_wrapper'](f)\n"
    "\n"
    "def file_cl(e, sr):\n"
    "    sr('200 OK', [('Content-Length', '4')])\n"
    "    return e['wsgi.file_wrapper'](open(e['QUERY_STRING'], 'rb'))\n"
    "\n"
    "def file_after_write(e, sr):\n"
    "    w = sr('200 OK', [])\n"
    "    w(b'written;')\n"
    "    return e['wsgi.file_wrapper'](open(e['QUERY_STRING'], 'rb'))\n"
    "\n"
    "def file_bytesio(e, sr):\n"
    "    sr('200 OK', [])\n"
    "    f = io.BytesIO(b'0123456789')\n"
    "    state['file'] = f\n"
    "    return e['wsgi.file_wrapper'](f, 4)\n"
    "\n"
    "def env(e, sr):\n"
    "    lines = ['']\n"
    "    for k in sorted(e):\n"
    "        v = e[k]\n"
    "        plain = isinstance(v, (str, bool, tuple))\n"
    "        lines.append('%s=%s:%s' % (k, type(v).__name__,\n"
    "                                   repr(v) if plain else '-'))\n"
    "    lines.append('keys-are-str=%s' % all(type(k) is str for k in e))\n"
    "    lines.append('')\n"
    "    sr('200 OK', [])\n"
    "    return ['\\n'.join(lines).encode('utf-8')]\n"
    "\n"
    "def path(e, sr):\n"
    "    sr('200 OK', [])\n"
    "    return [e['PATH_INFO'].encode('latin-1')]\n"
    "\n"
    "def errors(e, sr):\n"
    "    err = e['wsgi.errors']\n"
    "    err.write('hello from the app\\n')\n"
    "    err.writelines(['line one\\n', 'line two\\n'])\n"
    "    err.flush()\n"
    "    try:\n"
    "        err.write(b'bytes')\n"
    "    except TypeError as ex:\n"
    "        sr('200 OK', [])\n"
    "        return [type(ex).__name__.encode()]\n"
    "    sr('200 OK', [])\n"
    "    return [b'accepted bytes']\n"
    "\n"
    "import threading\n"
    "seen = threading.Event()\n"
    "\n"
    "def stream(e, sr):\n"
    "    sr('200 OK', [])\n"
    "    yield b'first'\n"
    "    yield b'+seen' if seen.wait(1) else b'+never seen'\n"
    "\n"
    "def app(e, sr):\n"
    "    parts = e['PATH_INFO'].split('/')\n"
    "    name = parts[1] if len(parts) > 1 and parts[1] else 'env'\n"
    "    return globals()[name](e, sr)\n";

static sl_options_t opt;
static sl_pump_t pump;
static h_client_t client;
static h_resp_t resp;
static sl_wsgi_lane_t *lane;
static char v[256]; /* header values read back */

static sl_exec_t inline_exec; /* WSGI inline's, running on our lane */

static void run_inline(sl_conn_t *c)
{
    sl_wsgi_handle(lane, c, c->gen);
}

static void setup(void)
{
    client.fd = -1;
    hp_log_to_file();
}

static void teardown(void)
{
    h_resp_free(&resp);
    h_client_close(&client);
}

/* Python, the app, an inline pump and a connected client, for
 * "sluice ARGS... testapp:app". */
#define UP(...)                                                                \
    do {                                                                       \
        h_options(&opt, __VA_ARGS__);                                          \
        up();                                                                  \
    } while (0)

static void serve_up(void);

static void up(void)
{
    ck_assert_int_eq(sl_py_init(&opt), 0);
    serve_up();
}

/* The app, an inline pump and a client, once Python runs. */
static void serve_up(void)
{
    PyObject *app;

    hp_module("testapp", APP);
    app = sl_py_load_app(&opt);
    hp_check(app, "load the app");
    inline_exec = sl_lane_inline_exec;
    inline_exec.run = run_inline; /* this suite's own lane */
    h_exec = &inline_exec;
    h_pump_up(&pump, &opt);
    ck_assert_int_eq(sl_wsgi_init(app, &pump), 0);
    Py_DECREF(app);
    lane = sl_wsgi_lane_new();
    ck_assert_ptr_nonnull(lane);
    h_connect(&pump, &client);
}

/* Send RAW and read the response into resp. */
static void exchange(const char *raw)
{
    h_sends(&client, raw);
    ck_assert_msg(
        h_response(&pump, &client, &resp, strncmp(raw, "HEAD ", 5) == 0),
        "no complete response to %.40s", raw);
}

/* GET PATH on HTTP/1.1, response in resp. */
static void get(const char *path)
{
    char raw[1024];

    snprintf(raw, sizeof(raw), "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", path);
    exchange(raw);
}

static const char *hdr(const char *name)
{
    return h_header(resp.head, name, v, sizeof(v));
}

/* The connection is still open and in keep-alive: a second request on it
 * gets the right answer (so nothing stray was left after the first). */
static void assert_kept_alive(void)
{
    get("/hello");
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(resp.body, "hello");
}

static void assert_closed(void)
{
    ck_assert_str_eq(hdr("Connection"), "close");
    ck_assert(h_wait_eof(&pump, &client));
}

/* A 500 from the server itself, the app's error logged with WHAT. */
static void assert_500(const char *what)
{
    ck_assert_int_eq(resp.status, 500);
    ck_assert_str_eq(resp.body, "Internal Server Error\n");
    assert_closed();
    ck_assert_msg(strstr(hp_log_text(), what) != NULL, "'%s' not in log: %s",
                  what, hp_log_text());
}

/* ------------------------------------------------------------------ */
/* framing                                                            */

START_TEST(test_hello)
{
    regex_t re;

    UP(NULL);
    get("/hello");
    ck_assert(strncmp(resp.head, "HTTP/1.1 200 OK\r\n", 17) == 0);
    ck_assert_str_eq(hdr("Content-Type"), "text/plain");
    ck_assert_str_eq(hdr("Content-Length"), "5");
    ck_assert_str_eq(hdr("Server"), "sluice");
    ck_assert_ptr_null(hdr("Transfer-Encoding"));
    ck_assert_ptr_null(hdr("Connection"));
    ck_assert_ptr_nonnull(hdr("Date"));
    ck_assert_int_eq(regcomp(&re,
                             "^[A-Z][a-z]{2}, [0-9]{2} [A-Z][a-z]{2} [0-9]{4} "
                             "[0-9]{2}:[0-9]{2}:[0-9]{2} GMT$",
                             REG_EXTENDED),
                     0);
    ck_assert(regexec(&re, v, 0, NULL, 0) == 0);
    regfree(&re);
    ck_assert_str_eq(resp.body, "hello");
    assert_kept_alive();
}
END_TEST

START_TEST(test_reason_phrase_kept)
{
    UP(NULL);
    get("/reason");
    ck_assert(strncmp(resp.head, "HTTP/1.1 404 Not Here\r\n", 23) == 0);
}
END_TEST

/* A list or tuple result gets an exact Content-Length. */
START_TEST(test_sequence_gets_content_length)
{
    UP(NULL);
    get("/parts");
    ck_assert_str_eq(hdr("Content-Length"), "3");
    ck_assert_str_eq(resp.body, "abc");
    get("/tup");
    ck_assert_str_eq(hdr("Content-Length"), "3");
    ck_assert_str_eq(resp.body, "xyz");
    assert_kept_alive();
}
END_TEST

/* Any other iterable streams: chunked on HTTP/1.1; an empty chunk from
 * the app does not end the body. */
START_TEST(test_iterable_is_chunked)
{
    UP(NULL);
    get("/gen");
    ck_assert(resp.chunked);
    ck_assert_str_eq(hdr("Transfer-Encoding"), "chunked");
    ck_assert_ptr_null(hdr("Content-Length"));
    ck_assert_str_eq(resp.body, "onetwo");
    assert_kept_alive();
}
END_TEST

START_TEST(test_empty_iterable)
{
    UP(NULL);
    get("/empty_gen");
    ck_assert_str_eq(hdr("Content-Length"), "0");
    ck_assert_str_eq(resp.body, "");
    assert_kept_alive();
}
END_TEST

/* HTTP/1.0 cannot chunk: the close ends the body. */
START_TEST(test_http10_iterable_is_close_delimited)
{
    UP(NULL);
    exchange("GET /gen HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    ck_assert(resp.closed);
    ck_assert_ptr_null(hdr("Content-Length"));
    ck_assert_ptr_null(hdr("Transfer-Encoding"));
    ck_assert_str_eq(hdr("Connection"), "close");
    ck_assert_str_eq(resp.body, "onetwo");
    ck_assert(strncmp(resp.head, "HTTP/1.1 200", 12) == 0);
}
END_TEST

START_TEST(test_http10_keep_alive)
{
    UP(NULL);
    exchange("GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    ck_assert_str_eq(hdr("Connection"), "keep-alive");
    ck_assert_str_eq(hdr("Content-Length"), "5");
    assert_kept_alive();
}
END_TEST

START_TEST(test_http10_default_close)
{
    UP(NULL);
    exchange("GET /hello HTTP/1.0\r\n\r\n");
    ck_assert_str_eq(resp.body, "hello");
    assert_closed();
}
END_TEST

/* HEAD: the GET's headers, no body bytes at all. */
START_TEST(test_head)
{
    UP(NULL);
    exchange("HEAD /hello HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(hdr("Content-Length"), "5");
    assert_kept_alive(); /* would read "hello" as a status line otherwise */
    exchange("HEAD /gen HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert_int_eq(resp.status, 200);
    ck_assert_ptr_null(hdr("Transfer-Encoding"));
    assert_kept_alive();
}
END_TEST

/* 1xx, 204 and 304 have no body and no framing headers. */
START_TEST(test_no_body_statuses)
{
    static const char *const paths[] = {"/status?204", "/status?304",
                                        "/status_gen?204", "/status_gen?304"};

    UP(NULL);
    get(paths[_i]);
    ck_assert_ptr_null(hdr("Content-Length"));
    ck_assert_ptr_null(hdr("Transfer-Encoding"));
    assert_kept_alive();
}
END_TEST

START_TEST(test_app_content_length_streams_unchunked)
{
    UP(NULL);
    get("/cl_gen");
    ck_assert(!resp.chunked);
    ck_assert_int_eq(h_header_count(resp.head, "Content-Length"), 1);
    ck_assert_str_eq(resp.body, "hello");
    assert_kept_alive();
}
END_TEST

/* Never more bytes than the app's Content-Length promised. */
START_TEST(test_app_content_length_truncates)
{
    UP(NULL);
    get("/cl_short");
    ck_assert_str_eq(resp.body, "hel");
    assert_kept_alive();
}
END_TEST

/* Fewer bytes than promised: only a close can end such a body. */
START_TEST(test_app_content_length_short_body_closes)
{
    UP(NULL);
    h_sends(&client, "GET /cl_long HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_ptr_nonnull(strstr(client.data, "\r\n\r\nhello"));
    ck_assert(strstr(client.data, "\r\n\r\nhello") + 9 ==
              client.data + client.len);
}
END_TEST

START_TEST(test_app_connection_close)
{
    UP(NULL);
    get("/conn_close");
    ck_assert_int_eq(h_header_count(resp.head, "Connection"), 1);
    assert_closed();
}
END_TEST

START_TEST(test_app_transfer_encoding_dropped)
{
    UP(NULL);
    get("/te");
    ck_assert_ptr_null(hdr("Transfer-Encoding"));
    ck_assert_str_eq(hdr("Content-Length"), "12");
    ck_assert_str_eq(resp.body, "framed by us");
    assert_kept_alive();
}
END_TEST

START_TEST(test_app_headers_kept)
{
    UP(NULL);
    get("/own_headers");
    ck_assert_int_eq(h_header_count(resp.head, "Server"), 1);
    ck_assert_str_eq(hdr("Server"), "mine");
    ck_assert_int_eq(h_header_count(resp.head, "Date"), 1);
    ck_assert_str_eq(hdr("Date"), "Thu, 01 Jan 1970 00:00:00 GMT");
    ck_assert_int_eq(h_header_count(resp.head, "Set-Cookie"), 2);
    ck_assert_ptr_nonnull(strstr(resp.head, "Set-Cookie: a=1\r\n"));
    ck_assert_ptr_nonnull(strstr(resp.head, "Set-Cookie: b=2\r\n"));
}
END_TEST

/* What the client received, watched from a thread of its own: once the
 * first block arrives it tells the app (which is waiting for that before
 * it yields the next block), through the app's threading.Event. */
typedef struct {
    int fd;
    char buf[4096];
    size_t len;
} watcher_t;

static void *watch_stream(void *arg)
{
    watcher_t *w = arg;
    bool told = false;

    while (w->len < sizeof(w->buf) - 1) {
        ssize_t n =
            recv(w->fd, w->buf + w->len, sizeof(w->buf) - 1 - w->len, 0);
        if (n <= 0)
            break;
        w->len += (size_t)n;
        w->buf[w->len] = '\0';
        /* only while the app still waits: it holds the GIL otherwise */
        if (!told && strstr(w->buf, "first") != NULL &&
            strstr(w->buf, "\r\n0\r\n\r\n") == NULL) {
            PyGILState_STATE gs = PyGILState_Ensure();
            PyRun_SimpleString("import testapp; testapp.seen.set()");
            PyGILState_Release(gs);
            told = true;
        }
        if (strstr(w->buf, "\r\n0\r\n\r\n") != NULL)
            break;
    }
    return NULL;
}

static bool served_one(void *arg)
{
    (void)arg;
    return pump.served == 1;
}

/* PEP 3333: each block the app yields goes to the client before the app
 * is asked for the next, even in inline mode. */
START_TEST(test_blocks_are_not_held_back)
{
    watcher_t w = {0};
    pthread_t th;
    struct timeval tv = {3, 0};

    UP(NULL);
    w.fd = client.fd;
    ck_assert_int_eq(
        setsockopt(client.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    ck_assert_int_eq(pthread_create(&th, NULL, watch_stream, &w), 0);
    h_sends(&client, "GET /stream HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_run_until(&pump, served_one, NULL));
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_msg(strstr(w.buf, "+seen") != NULL,
                  "the first block was held back: %s", w.buf);
}
END_TEST

/* Draining: every response says it is the last on its connection. */
START_TEST(test_draining_closes)
{
    UP(NULL);
    pump.drain.draining = true;
    pump.drain.stopping = true; /* keep the drain's own steps out of this test */
    get("/hello");
    ck_assert_str_eq(resp.body, "hello");
    assert_closed();
}
END_TEST

/* ------------------------------------------------------------------ */
/* start_response, write() and errors                                 */

START_TEST(test_exception_before_headers_is_500)
{
    UP(NULL);
    get("/raise_early");
    assert_500("ZeroDivisionError");
    ck_assert_ptr_nonnull(strstr(hp_log_text(), "GET /raise_early"));
    ck_assert_ptr_null(PyErr_Occurred());
}
END_TEST

/* After the head left, an error can only cut the response short: no
 * final chunk, and the connection closes. */
START_TEST(test_exception_after_headers_truncates)
{
    UP(NULL);
    h_sends(&client, "GET /raise_late HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert(strncmp(client.data, "HTTP/1.1 200 OK\r\n", 17) == 0);
    ck_assert_ptr_nonnull(strstr(client.data, "7\r\npartial\r\n"));
    ck_assert_ptr_null(strstr(client.data, "\r\n0\r\n\r\n"));
    ck_assert_ptr_nonnull(strstr(hp_log_text(), "KeyError"));
}
END_TEST

START_TEST(test_start_response_twice_is_an_error)
{
    UP(NULL);
    get("/twice");
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(resp.body, "RuntimeError");
}
END_TEST

/* exc_info before anything was sent: the new status and headers win. */
START_TEST(test_exc_info_replaces_head)
{
    UP(NULL);
    get("/exc_early");
    ck_assert(strncmp(resp.head, "HTTP/1.1 500 Oops\r\n", 19) == 0);
    ck_assert_ptr_null(hdr("X-First"));
    ck_assert_str_eq(hdr("X-Second"), "1");
    ck_assert_str_eq(resp.body, "error page");
}
END_TEST

/* exc_info after the head was sent: start_response re-raises it. */
START_TEST(test_exc_info_after_head_reraises)
{
    UP(NULL);
    get("/exc_late");
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(resp.body, "sent+reraised");
}
END_TEST

static const struct {
    const char *path;
    const char *logged;
} app_errors[] = {
    {"/bad_status", "bad status"},
    {"/bytes_status", "status must be str"},
    {"/crlf_header", "bad header"},
    {"/colon_name", "bad header"},
    {"/space_name", "bad header"},
    {"/non_latin1_header", "not latin-1"},
    {"/tuple_headers", "headers must be a list"},
    {"/bad_cl", "bad Content-Length"},
    {"/str_result", "must hold bytes"},
    {"/str_gen", "yielded str"},
    {"/no_sr", "without calling start_response"},
};

/* What the app got wrong becomes a 500, logged, never a broken head. */
START_TEST(test_app_mistakes_are_500)
{
    UP(NULL);
    get(app_errors[_i].path);
    ck_assert_ptr_null(strstr(resp.head, "Injected"));
    assert_500(app_errors[_i].logged);
}
END_TEST

/* The write() callable: bytes go out before the result's, chunked. */
START_TEST(test_write_callable)
{
    UP(NULL);
    get("/write");
    ck_assert(resp.chunked);
    ck_assert_str_eq(resp.body, "abc");
    assert_kept_alive();
}
END_TEST

START_TEST(test_write_wants_bytes)
{
    UP(NULL);
    get("/write_str");
    ck_assert_str_eq(resp.body, "TypeError");
}
END_TEST

/* A write() callable kept past its request (say, by a thread the app
 * left running) must not write into the next request on the lane. */
START_TEST(test_stale_write_callable)
{
    UP(NULL);
    get("/keep_write");
    ck_assert_str_eq(resp.body, "first");
    get("/stale_write");
    ck_assert_int_eq(resp.status, 200);
    ck_assert_msg(strstr(resp.body, "LEAK") == NULL,
                  "request 1's write() wrote into request 2: '%s'", resp.body);
}
END_TEST

/* close() of the result is called once the response is done. */
START_TEST(test_result_close_called)
{
    UP(NULL);
    get("/closing");
    ck_assert_str_eq(resp.body, "ab");
    ck_assert_str_eq(hp_eval("testapp", "state['closed']"), "1");
    get("/raise_early");
    ck_assert_str_eq(hp_eval("testapp", "state['closed']"), "1");
}
END_TEST

/* ------------------------------------------------------------------ */
/* wsgi.file_wrapper                                                  */

static char file_path[] = "/tmp/sl-test-wsgi-XXXXXX";

static void make_file(const char *content)
{
    int fd = mkstemp(file_path);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, content, strlen(content)), strlen(content));
    close(fd);
}

static void get_file(const char *route)
{
    char path[256];

    snprintf(path, sizeof(path), "/%s?%s", route, file_path);
    get(path);
    unlink(file_path);
}

START_TEST(test_file_wrapper_sendfile)
{
    UP(NULL);
    make_file("the file's contents\n");
    get_file("file");
    ck_assert_str_eq(hdr("Content-Length"), "20");
    ck_assert_str_eq(resp.body, "the file's contents\n");
    /* the wrapper closed the app's file object */
    ck_assert_str_eq(hp_eval("testapp", "state['file'].closed"), "True");
    assert_kept_alive();
}
END_TEST

START_TEST(test_file_wrapper_respects_position)
{
    UP(NULL);
    make_file("0123456789");
    get_file("file_seek");
    ck_assert_str_eq(hdr("Content-Length"), "7");
    ck_assert_str_eq(resp.body, "3456789");
    assert_kept_alive();
}
END_TEST

START_TEST(test_file_wrapper_app_content_length)
{
    UP(NULL);
    make_file("0123456789");
    get_file("file_cl");
    ck_assert_str_eq(hdr("Content-Length"), "4");
    ck_assert_str_eq(resp.body, "0123");
    assert_kept_alive();
}
END_TEST

START_TEST(test_file_wrapper_head)
{
    char raw[256];

    UP(NULL);
    make_file("0123456789");
    snprintf(raw, sizeof(raw), "HEAD /file?%s HTTP/1.1\r\nHost: h\r\n\r\n",
             file_path);
    exchange(raw);
    unlink(file_path);
    ck_assert_str_eq(hdr("Content-Length"), "10");
    assert_kept_alive();
}
END_TEST

/* write() began a chunked body: the file goes out in chunks too, never
 * raw behind them. */
START_TEST(test_file_wrapper_after_write)
{
    UP(NULL);
    make_file("from the file");
    get_file("file_after_write");
    ck_assert(resp.chunked);
    ck_assert_str_eq(resp.body, "written;from the file");
    assert_kept_alive();
}
END_TEST

/* Not a real file: iterated with the block size, and closed. */
START_TEST(test_file_wrapper_without_fileno)
{
    UP(NULL);
    get("/file_bytesio");
    ck_assert(resp.chunked);
    ck_assert_str_eq(resp.body, "0123456789");
    ck_assert_str_eq(hp_eval("testapp", "state['file'].closed"), "True");
}
END_TEST

/* ------------------------------------------------------------------ */
/* environ                                                            */

/* Line "KEY=TYPE:REPR" of the /env answer. */
static void assert_env(const char *line)
{
    char want[512];

    snprintf(want, sizeof(want), "\n%s\n", line);
    ck_assert_msg(strstr(resp.body, want) != NULL, "'%s' not in environ:%s",
                  line, resp.body);
}

static void assert_no_env(const char *key)
{
    char want[128];

    snprintf(want, sizeof(want), "\n%s=", key);
    ck_assert_msg(strstr(resp.body, want) == NULL, "'%s' in environ:%s", key,
                  resp.body);
}

START_TEST(test_environ_basics)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    char line[128];

    UP(NULL);
    get("/env/a%20b?x=1&y=%20#frag");
    ck_assert_int_eq(resp.status, 200);
    assert_env("keys-are-str=True");
    assert_env("REQUEST_METHOD=str:'GET'");
    assert_env("SCRIPT_NAME=str:''");
    assert_env("PATH_INFO=str:'/env/a b'");
    assert_env("QUERY_STRING=str:'x=1&y=%20'");
    assert_env("RAW_URI=str:'/env/a%20b?x=1&y=%20#frag'");
    assert_env("SERVER_PROTOCOL=str:'HTTP/1.1'");
    assert_env("SERVER_NAME=str:'127.0.0.1'");
    snprintf(line, sizeof(line), "SERVER_PORT=str:'%s'",
             pump.listeners[0].server_port);
    assert_env(line);
    assert_env("REMOTE_ADDR=str:'127.0.0.1'");
    ck_assert_int_eq(getsockname(client.fd, (struct sockaddr *)&sin, &len), 0);
    snprintf(line, sizeof(line), "REMOTE_PORT=str:'%u'", ntohs(sin.sin_port));
    assert_env(line);
    assert_env("HTTP_HOST=str:'h'");
    assert_env("wsgi.version=tuple:(1, 0)");
    assert_env("wsgi.url_scheme=str:'http'");
    assert_env("wsgi.multithread=bool:False");
    assert_env("wsgi.multiprocess=bool:False");
    assert_env("wsgi.run_once=bool:False");
    assert_env("wsgi.input_terminated=bool:True");
    assert_env("wsgi.input=Input:-");
    assert_env("wsgi.errors=Errors:-");
    assert_env("wsgi.file_wrapper=type:-");
    /* only when sent */
    assert_no_env("CONTENT_TYPE");
    assert_no_env("CONTENT_LENGTH");
}
END_TEST

START_TEST(test_environ_multi)
{
    UP("--threads", "4", "--workers", "2", NULL);
    get("/env");
    assert_env("wsgi.multithread=bool:True");
    assert_env("wsgi.multiprocess=bool:True");
}
END_TEST

START_TEST(test_environ_post_and_http10)
{
    UP(NULL);
    exchange("POST /env HTTP/1.0\r\nContent-Type: text/x-test\r\n"
             "Content-Length: 4\r\n\r\nbody");
    assert_env("REQUEST_METHOD=str:'POST'");
    assert_env("SERVER_PROTOCOL=str:'HTTP/1.0'");
    assert_env("CONTENT_TYPE=str:'text/x-test'");
    assert_env("CONTENT_LENGTH=str:'4'");
    assert_env("QUERY_STRING=str:''");
    assert_no_env("HTTP_CONTENT_TYPE");
    assert_no_env("HTTP_CONTENT_LENGTH");
    assert_no_env("HTTP_HOST");
}
END_TEST

/* The method names are made once, one reference per table slot: building
 * the table must not leak the placeholder a known name replaces (wsgi.c's
 * own table kept one "UNKNOWN" per known method). */
START_TEST(test_method_table_references)
{
    PyObject *unknown;
    Py_ssize_t before;
    int known = 0;

    h_options(&opt, NULL);
    ck_assert_int_eq(sl_py_init(&opt), 0);
    unknown = PyUnicode_InternFromString("UNKNOWN");
    hp_check(unknown, "UNKNOWN");
    before = Py_REFCNT(unknown);
    serve_up();
#define XX(num, name, string) known++;
    HTTP_METHOD_MAP(XX)
#undef XX
    ck_assert_int_eq(Py_REFCNT(unknown) - before, 64 - known);
    Py_DECREF(unknown);
}
END_TEST

/* Requests keep no reference to their method's name. */
START_TEST(test_method_name_not_leaked)
{
    PyObject *name;
    Py_ssize_t before;
    int i;

    UP(NULL);
    name = PyUnicode_InternFromString("M-SEARCH");
    hp_check(name, "M-SEARCH");
    exchange("M-SEARCH /env HTTP/1.1\r\nHost: h\r\n\r\n");
    before = Py_REFCNT(name);
    for (i = 0; i < 20; i++) {
        exchange("M-SEARCH /env HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_env("REQUEST_METHOD=str:'M-SEARCH'");
    }
    ck_assert_int_eq(Py_REFCNT(name), before);
    Py_DECREF(name);
}
END_TEST

START_TEST(test_environ_other_methods)
{
    UP(NULL);
    exchange("PURGE /env HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_env("REQUEST_METHOD=str:'PURGE'");
    exchange("OPTIONS /env HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_env("REQUEST_METHOD=str:'OPTIONS'");
}
END_TEST

/* Repeated request headers are joined with ',' (common and other names
 * alike); names with '_' are dropped so they cannot pose as a dashed one;
 * values are latin-1. */
START_TEST(test_environ_headers)
{
    UP(NULL);
    exchange("GET /env HTTP/1.1\r\nHost: h\r\n"
             "X-Multi: a\r\nAccept: text/a\r\nX-Multi: b\r\n"
             "Accept: text/b\r\nx-multi: c\r\n"
             "X-Under: good\r\nX_Under: evil\r\nX_Other: evil\r\n"
             "X-Latin: caf\xe9\r\n"
             "X-Empty:\r\n"
             "User-Agent: t/1\r\nCookie: a=1\r\nCookie: b=2\r\n\r\n");
    assert_env("HTTP_X_MULTI=str:'a,b,c'");
    assert_env("HTTP_ACCEPT=str:'text/a,text/b'");
    assert_env("HTTP_X_UNDER=str:'good'");
    assert_no_env("HTTP_X_OTHER");
    assert_env("HTTP_X_LATIN=str:'caf\xc3\xa9'"); /* repr of 'caf\xe9' */
    assert_env("HTTP_X_EMPTY=str:''");
    assert_env("HTTP_USER_AGENT=str:'t/1'");
    assert_env("HTTP_COOKIE=str:'a=1,b=2'");
}
END_TEST

/* PATH_INFO is percent-decoded and then read as latin-1: each byte is one
 * character, as PEP 3333 wants. */
START_TEST(test_path_info_decoding)
{
    static const struct {
        const char *url, *path;
    } cases[] = {
        {"/path/caf%C3%A9", "/path/caf\xc3\xa9"},
        {"/path/%41%2f%2F", "/path/A//"},
        {"/path/%e9", "/path/\xe9"},
        {"/path/100%", "/path/100%"},
        {"/path/%4", "/path/%4"},
        {"/path/%zz%", "/path/%zz%"},
        {"/path/a%20b?c%20d", "/path/a b"},
        {"/path/%00x", "/path/\0x"},
    };

    UP(NULL);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = strlen(cases[i].path);
        if (i == 7)
            n = 8;
        get(cases[i].url);
        ck_assert_int_eq(resp.status, 200);
        ck_assert_msg(resp.body_len == n &&
                          memcmp(resp.body, cases[i].path, n) == 0,
                      "%s: PATH_INFO '%s'", cases[i].url, resp.body);
    }
}
END_TEST

/* A proxy's absolute-form target: the path and query are what count. */
START_TEST(test_absolute_form)
{
    UP(NULL);
    get("http://example.com:8080/env/p?q=1");
    assert_env("PATH_INFO=str:'/env/p'");
    assert_env("QUERY_STRING=str:'q=1'");
    assert_env("RAW_URI=str:'http://example.com:8080/env/p?q=1'");
}
END_TEST

/* An absolute-form target with no path keeps its query. */
START_TEST(test_absolute_form_without_path)
{
    UP(NULL);
    exchange("GET http://example.com?q=1 HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert_int_eq(resp.status, 200);
    assert_env("RAW_URI=str:'http://example.com?q=1'");
    assert_env("QUERY_STRING=str:'q=1'");
}
END_TEST

/* wsgi.errors writes str to the error log. */
START_TEST(test_wsgi_errors)
{
    const char *log;

    UP(NULL);
    get("/errors");
    ck_assert_str_eq(resp.body, "TypeError");
    log = hp_log_text();
    ck_assert_ptr_nonnull(strstr(log, "hello from the app\n"));
    ck_assert_ptr_nonnull(strstr(log, "line one\nline two\n"));
}
END_TEST

static Suite *wsgi_suite(void)
{
    Suite *s = suite_create("wsgi");
    TCase *tc = tcase_create("framing");

    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_hello);
    tcase_add_test(tc, test_reason_phrase_kept);
    tcase_add_test(tc, test_sequence_gets_content_length);
    tcase_add_test(tc, test_iterable_is_chunked);
    tcase_add_test(tc, test_empty_iterable);
    tcase_add_test(tc, test_http10_iterable_is_close_delimited);
    tcase_add_test(tc, test_http10_keep_alive);
    tcase_add_test(tc, test_http10_default_close);
    tcase_add_test(tc, test_head);
    tcase_add_loop_test(tc, test_no_body_statuses, 0, 4);
    tcase_add_test(tc, test_app_content_length_streams_unchunked);
    tcase_add_test(tc, test_app_content_length_truncates);
    tcase_add_test(tc, test_app_content_length_short_body_closes);
    tcase_add_test(tc, test_app_connection_close);
    tcase_add_test(tc, test_app_transfer_encoding_dropped);
    tcase_add_test(tc, test_app_headers_kept);
    tcase_add_test(tc, test_blocks_are_not_held_back);
    tcase_add_test(tc, test_draining_closes);
    suite_add_tcase(s, tc);

    tc = tcase_create("app");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_exception_before_headers_is_500);
    tcase_add_test(tc, test_exception_after_headers_truncates);
    tcase_add_test(tc, test_start_response_twice_is_an_error);
    tcase_add_test(tc, test_exc_info_replaces_head);
    tcase_add_test(tc, test_exc_info_after_head_reraises);
    tcase_add_loop_test(tc, test_app_mistakes_are_500, 0,
                        sizeof(app_errors) / sizeof(app_errors[0]));
    tcase_add_test(tc, test_write_callable);
    tcase_add_test(tc, test_write_wants_bytes);
    tcase_add_test(tc, test_stale_write_callable);
    tcase_add_test(tc, test_result_close_called);
    suite_add_tcase(s, tc);

    tc = tcase_create("file_wrapper");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_file_wrapper_sendfile);
    tcase_add_test(tc, test_file_wrapper_respects_position);
    tcase_add_test(tc, test_file_wrapper_app_content_length);
    tcase_add_test(tc, test_file_wrapper_head);
    tcase_add_test(tc, test_file_wrapper_without_fileno);
    tcase_add_test(tc, test_file_wrapper_after_write);
    suite_add_tcase(s, tc);

    tc = tcase_create("environ");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_environ_basics);
    tcase_add_test(tc, test_environ_multi);
    tcase_add_test(tc, test_environ_post_and_http10);
    tcase_add_test(tc, test_environ_other_methods);
    tcase_add_test(tc, test_method_table_references);
    tcase_add_test(tc, test_method_name_not_leaked);
    tcase_add_test(tc, test_environ_headers);
    tcase_add_test(tc, test_path_info_decoding);
    tcase_add_test(tc, test_absolute_form);
    tcase_add_test(tc, test_absolute_form_without_path);
    tcase_add_test(tc, test_wsgi_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(wsgi_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
