/* wsgi_harness.h - what the WSGI handler suites (test_wsgi*.c, for
 * worker/python/wsgi.c) share on top of py_harness.h: the test app (APP, a
 * module made from source that dispatches on the first path segment), a
 * pump in inline mode with its lane (setup/teardown as check fixtures),
 * and a request exchanged with it and the checks on what came back.
 */
#ifndef SL_TEST_WSGI_HARNESS_H
#define SL_TEST_WSGI_HARNESS_H

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

static inline void run_inline(sl_exch_t *x)
{
    sl_conn_t *c = x->conn;

    sl_wsgi_handle(lane, &c->x, c->x.gen);
}

static inline void setup(void)
{
    client.fd = -1;
    hp_log_to_file();
}

static inline void teardown(void)
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

static inline void serve_up(void);

static inline void up(void)
{
    ck_assert_int_eq(sl_py_init(&opt), 0);
    serve_up();
}

/* The app, an inline pump and a client, once Python runs. */
static inline void serve_up(void)
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
static inline void exchange(const char *raw)
{
    h_sends(&client, raw);
    ck_assert_msg(
        h_response(&pump, &client, &resp, strncmp(raw, "HEAD ", 5) == 0),
        "no complete response to %.40s", raw);
}

/* GET PATH on HTTP/1.1, response in resp. */
static inline void get(const char *path)
{
    char raw[1024];

    snprintf(raw, sizeof(raw), "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", path);
    exchange(raw);
}

static inline const char *hdr(const char *name)
{
    return h_header(resp.head, name, v, sizeof(v));
}

/* The connection is still open and in keep-alive: a second request on it
 * gets the right answer (so nothing stray was left after the first). */
static inline void assert_kept_alive(void)
{
    get("/hello");
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(resp.body, "hello");
}

static inline void assert_closed(void)
{
    ck_assert_str_eq(hdr("Connection"), "close");
    ck_assert(h_wait_eof(&pump, &client));
}

#endif
