/* test_asgi.c - check suite for worker/python/asgi.c, ASGI HTTP.
 *
 * The real thing in one process, reached through asgi.h alone (so the
 * suite holds however asgi.c is split): the embedded interpreter, the ASGI
 * app (APP below), the asyncio lane started by sl_asgi_start(), and the
 * pump's loop run by the test thread without the GIL, as the worker's main
 * thread runs it. Clients talk over loopback; the test takes the GIL only
 * to look at what the app recorded (testapp.state) or to open one of its
 * gates, which the app awaits when a test must act between two of its
 * steps. Inline mode, where the event loop runs on the test thread and
 * drives the pump, gets one case of its own with a client thread.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>

#include "tests/unit/py_harness.h"
#include "worker/python/asgi.h"
#include "worker/python/asgi_lifespan.h"

static const char APP[] =
    "import asyncio, hashlib\n"
    "state = {'startup': 0, 'shutdown': 0, 'entered': 0, 'cancelled': 0,\n"
    "         'got': None, 'sizes': [], 'more': [], 'sent': 0,\n"
    "         'suspended': 0, 'types': []}\n"
    "loop = None\n"
    "gates = {}\n"
    "\n"
    "def gate(name):\n"
    "    if name not in gates:\n"
    "        gates[name] = asyncio.Event()\n"
    "    return gates[name]\n"
    "\n"
    "def open_gate(name):\n" /* from the test thread */
    "    loop.call_soon_threadsafe(lambda: gate(name).set())\n"
    "\n"
    "def start(status=200, headers=()):\n"
    "    return {'type': 'http.response.start', 'status': status,\n"
    "            'headers': list(headers)}\n"
    "\n"
    "def body(data, more=False):\n"
    "    return {'type': 'http.response.body', 'body': data,\n"
    "            'more_body': more}\n"
    "\n"
    "async def lifespan(scope, receive, send):\n"
    "    global loop\n"
    "    loop = asyncio.get_running_loop()\n"
    "    while True:\n"
    "        m = await receive()\n"
    "        if m['type'] == 'lifespan.startup':\n"
    "            state['startup'] += 1\n"
    "            await send({'type': 'lifespan.startup.complete'})\n"
    "        else:\n"
    "            state['shutdown'] += 1\n"
    "            await send({'type': 'lifespan.shutdown.complete'})\n"
    "            return\n"
    "\n"
    "async def hello(scope, receive, send):\n"
    "    await send(start(200, [(b'content-type', b'text/plain')]))\n"
    "    await send(body(b'hello'))\n"
    "\n"
    "async def read_all(receive):\n"
    "    data = b''\n"
    "    while True:\n"
    "        m = await receive()\n"
    "        state['sizes'].append(len(m['body']))\n"
    "        state['more'].append(m['more_body'])\n"
    "        data += m['body']\n"
    "        if not m['more_body']:\n"
    "            return data\n"
    "\n"
    "async def echo(scope, receive, send):\n"
    "    data = await read_all(receive)\n"
    "    await send(start())\n"
    "    await send(body(data))\n"
    "\n"
    "async def digest(scope, receive, send):\n"
    "    h, n, calls = hashlib.sha1(), 0, 0\n"
    "    while True:\n"
    "        m = await receive()\n"
    "        h.update(m['body'])\n"
    "        n += len(m['body'])\n"
    "        calls += 1\n"
    "        if not m['more_body']:\n"
    "            break\n"
    "    state['calls'] = calls\n"
    "    await send(start())\n"
    "    await send(body(b'%d %s' % (n, h.hexdigest().encode())))\n"
    "\n"
    "async def stream(scope, receive, send):\n"
    "    await send(start())\n"
    "    await send(body(b'first', True))\n"
    "    await gate('stream').wait()\n"
    "    await send(body(b'+second', True))\n"
    "    await send(body(b''))\n"
    "\n"
    "BLOCK, BLOCKS = 64 * 1024, 128\n"
    "\n"
    "async def big(scope, receive, send):\n"
    "    await send(start(200, [(b'content-length',\n"
    "                            str(BLOCK * BLOCKS).encode())]))\n"
    "    for i in range(BLOCKS):\n"
    /* the callback runs before the await returns only if send()
     * suspended the request and the event loop ran meanwhile */
    "        ran = []\n"
    "        loop.call_soon(ran.append, 1)\n"
    "        await send(body(bytes([97 + i % 26]) * BLOCK, i < BLOCKS - 1))\n"
    "        state['suspended'] += bool(ran)\n"
    "        state['sent'] += 1\n"
    "\n"
    "async def trailers(scope, receive, send):\n"
    "    await send({'type': 'http.response.start', 'status': 200,\n"
    "                'headers': [], 'trailers': True})\n"
    "    await send(body(b'data', True))\n"
    "    await send(body(b'+more'))\n"
    "    await send({'type': 'http.response.trailers',\n"
    "                'headers': [(b'x-sum', b'abc')], 'more_trailers': True})\n"
    "    await send({'type': 'http.response.trailers',\n"
    "                'headers': [(b'x-count', b'2')]})\n"
    "\n"
    "async def pathsend(scope, receive, send):\n"
    "    await send(start(200, [(b'content-type', b'application/x-test')]))\n"
    "    await send({'type': 'http.response.pathsend',\n"
    "                'path': scope['query_string'].decode()})\n"
    "\n"
    "async def disconnect(scope, receive, send):\n"
    "    await receive()\n"
    "    state['entered'] += 1\n"
    "    state['got'] = (await receive())['type']\n"
    "\n"
    "async def partial_body(scope, receive, send):\n"
    "    while True:\n"
    "        m = await receive()\n"
    "        state['types'].append(m['type'])\n"
    "        if m['type'] == 'http.disconnect' or not m['more_body']:\n"
    "            return\n"
    "\n"
    "async def raise_early(scope, receive, send):\n"
    "    1 / 0\n"
    "\n"
    "async def raise_after_start(scope, receive, send):\n"
    "    await send(start())\n"
    "    raise LookupError('after start')\n"
    "\n"
    "async def raise_late(scope, receive, send):\n"
    "    await send(start())\n"
    "    await send(body(b'partial', True))\n"
    "    raise KeyError('late')\n"
    "\n"
    "async def bad_type(scope, receive, send):\n"
    "    await send({'type': 'http.response.bogus'})\n"
    "\n"
    "async def not_dict(scope, receive, send):\n"
    "    await send(['http.response.start'])\n"
    "\n"
    "async def no_type(scope, receive, send):\n"
    "    await send({'status': 200})\n"
    "\n"
    "async def str_status(scope, receive, send):\n"
    "    await send(start('200'))\n"
    "\n"
    "async def bad_status(scope, receive, send):\n"
    "    await send(start(99))\n"
    "\n"
    "async def body_first(scope, receive, send):\n"
    "    await send(body(b'x'))\n"
    "\n"
    "async def start_twice(scope, receive, send):\n"
    "    await send(start())\n"
    "    await send(start())\n"
    "\n"
    "async def str_body(scope, receive, send):\n"
    "    await send(start())\n"
    "    await send(body('text'))\n"
    "\n"
    "async def no_response(scope, receive, send):\n"
    "    pass\n"
    "\n"
    "async def forever(scope, receive, send):\n"
    "    state['entered'] += 1\n"
    "    try:\n"
    "        await asyncio.Event().wait()\n"
    "    except asyncio.CancelledError:\n"
    "        state['cancelled'] += 1\n"
    "        raise\n"
    "\n"
    "async def app(scope, receive, send):\n"
    "    if scope['type'] == 'lifespan':\n"
    "        return await lifespan(scope, receive, send)\n"
    "    await globals()[scope['path'].strip('/')](scope, receive, send)\n";

static sl_options_t opt;
static sl_pump_t pump;
static h_client_t client;
static h_resp_t resp;
static PyThreadState *main_ts; /* the main thread's, while it has no GIL */
static bool stopped;           /* the lane's stop() was called */
static char v[256];            /* a header's value */

static void setup(void)
{
    client.fd = -1;
    hp_log_to_file();
}

static void gil_take(void)
{
    PyEval_RestoreThread(main_ts);
}

static void gil_give(void)
{
    main_ts = PyEval_SaveThread();
}

/* The executor's stop: the lane's without the GIL, as the worker calls
 * it; inline, with the GIL the test thread never gave up. */
static int stop(void)
{
    stopped = true;
    return pump.exec->stop(&pump, 2.0);
}

static void teardown(void)
{
    if (!stopped && pump.exec != NULL)
        ck_assert_int_eq(stop(), 0);
    h_resp_free(&resp);
    h_client_close(&client);
}

/* Python, the app, a pump with executor EXEC, and lifespan startup done
 * (the GIL still held). */
static void boot(const sl_exec_t *exec)
{
    PyObject *app;

    h_options(&opt, NULL);
    ck_assert_int_eq(sl_py_init(&opt), 0);
    hp_module("testapp", APP);
    app = sl_py_load_app(&opt);
    hp_check(app, "load the app");
    ck_assert_int_eq(sl_asgi_lifespan_init(), 0); /* as the worker does */
    h_exec = exec;
    h_pump_up(&pump, &opt);
    ck_assert_ptr_eq(pump.exec, exec);
    ck_assert_int_eq(sl_asgi_init(app, &pump), 0);
    Py_DECREF(app);
    ck_assert_int_eq(sl_asgi_start(&pump), 0);
}

/* The same with the asyncio lane, a connected client, and the GIL
 * released for the lane. */
static void up(void)
{
    boot(&sl_asgi_lane_exec.ops);
    gil_give();
    h_connect(&pump, &client);
}

/* str() of EXPR in the app's module, taking the GIL for it. */
static const char *app_eval(const char *expr)
{
    const char *r;

    gil_take();
    r = hp_eval("testapp", expr);
    gil_give();
    return r;
}

typedef struct {
    const char *expr, *want;
} app_is_t;

static bool app_is(void *arg)
{
    app_is_t *a = arg;

    return strcmp(app_eval(a->expr), a->want) == 0;
}

/* Run the loop until str(EXPR) in the app is WANT. */
static bool until_app(const char *expr, const char *want)
{
    app_is_t a = {expr, want};

    return h_run_until(&pump, app_is, &a);
}

static void open_gate(const char *name)
{
    char expr[64];

    snprintf(expr, sizeof(expr), "open_gate('%s')", name);
    app_eval(expr);
}

static void get(const char *path)
{
    char raw[256];

    snprintf(raw, sizeof(raw), "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", path);
    h_sends(&client, raw);
}

static const char *hdr(const char *name)
{
    return h_header(resp.head, name, v, sizeof(v));
}

static bool logged(const char *text)
{
    return strstr(hp_log_text(), text) != NULL;
}

static bool log_has(void *text)
{
    return logged(text);
}

/* Run the loop until TEXT is in the log. The lane may log an error after
 * the response it ended went out (an invalid message: the 500 is sent
 * when send() raises, the traceback logged when it leaves the app). */
static bool wait_logged(const char *text)
{
    return h_run_until(&pump, log_has, (void *)text);
}

/* How many times TEXT occurs in what the client received. */
static int received_count(const char *text)
{
    int n = 0;

    for (const char *p = client.data; p && (p = strstr(p, text)); p++)
        n++;
    return n;
}

/* Has the client received TEXT (a string) so far? */
static bool received(void *text)
{
    h_pull(&client);
    return client.data != NULL && strstr(client.data, text) != NULL;
}

/* A 500 of the server's own, and the connection closed after it. */
static void assert_500(void)
{
    ck_assert_int_eq(resp.status, 500);
    ck_assert_str_eq(resp.body, "Internal Server Error\n");
    ck_assert_str_eq(hdr("Connection"), "close");
    ck_assert(h_wait_eof(&pump, &client));
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
/* errors                                                             */

START_TEST(test_raise_before_sending)
{
    up();
    get("/raise_early");
    ck_assert(h_response(&pump, &client, &resp, false));
    assert_500();
    ck_assert(wait_logged("error handling GET /raise_early"));
    ck_assert(wait_logged("ZeroDivisionError"));
}
END_TEST

/* http.response.start alone puts nothing on the wire: an error after it
 * still gets a clean 500, the app's status never seen. */
START_TEST(test_raise_after_start_before_body)
{
    up();
    get("/raise_after_start");
    ck_assert(h_response(&pump, &client, &resp, false));
    assert_500();
    ck_assert_int_eq(received_count("HTTP/1.1 "), 0); /* nothing more */
    ck_assert(wait_logged("LookupError: after start"));
}
END_TEST

/* Once bytes of the response went out, an error can only cut it short:
 * the connection closes, no final chunk and no second head. */
START_TEST(test_raise_after_body_began)
{
    up();
    get("/raise_late");
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert(strncmp(client.data, "HTTP/1.1 200 OK\r\n", 17) == 0);
    ck_assert_int_eq(received_count("HTTP/1.1 "), 1);
    ck_assert_ptr_nonnull(strstr(client.data, "7\r\npartial\r\n"));
    ck_assert_ptr_null(strstr(client.data, "\r\n0\r\n\r\n"));
    ck_assert(wait_logged("error handling GET /raise_late"));
    ck_assert(wait_logged("KeyError: 'late'"));
}
END_TEST

/* What the app sends wrong: send() raises, the client gets a 500 and the
 * log says what was wrong. */
static const struct {
    const char *path, *error;
} mistakes[] = {
    {"/bad_type", "unexpected message type 'http.response.bogus'"},
    {"/not_dict", "send() takes a dict message, not list"},
    {"/no_type", "the message has no 'type'"},
    {"/str_status", "http.response.start needs an int 'status', got '200'"},
    {"/bad_status", "status 99 is not a final HTTP status"},
    {"/body_first", "http.response.body before http.response.start"},
    {"/start_twice", "http.response.start sent twice"},
    {"/str_body", "'body' must be bytes, not str"},
    {"/no_response", "ASGI app returned without starting a response to "
                     "GET /no_response"},
};

START_TEST(test_invalid_message)
{
    up();
    get(mistakes[_i].path);
    ck_assert_msg(h_response(&pump, &client, &resp, false), "%s: no response",
                  mistakes[_i].path);
    assert_500();
    ck_assert_msg(wait_logged(mistakes[_i].error),
                  "%s: '%s' not in the log: %s", mistakes[_i].path,
                  mistakes[_i].error, hp_log_text());
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
    ck_assert_uint_eq(pump.nactive, 1);
    ck_assert_ptr_eq(pump.active.next, c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* finish and stop                                                    */

/* The drain's finish cancels a request that would wait forever: the app
 * sees CancelledError, the client a 503, and the log no error of the
 * app's. */
START_TEST(test_finish_cancels)
{
    up();
    get("/forever");
    ck_assert(until_app("state['entered']", "1"));
    pump.exec->finish(&pump);
    ck_assert(until_app("state['cancelled']", "1"));
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 503);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert(!logged("CancelledError"));
    ck_assert(!logged("[ERROR]"));
}
END_TEST

/* stop() runs lifespan shutdown, and the lane leaves. */
START_TEST(test_stop_runs_lifespan_shutdown)
{
    up();
    ck_assert_str_eq(app_eval("state['startup'], state['shutdown']"), "(1, 0)");
    get("/hello");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "hello");
    ck_assert_int_eq(stop(), 0);
    gil_take();
    ck_assert_str_eq(hp_eval("testapp", "state['startup'], state['shutdown']"),
                     "(1, 1)");
    ck_assert_str_eq(hp_eval("testapp", "loop.is_closed()"), "True");
    gil_give();
}
END_TEST

/* A request still waiting when stop() comes is cancelled first. */
START_TEST(test_stop_cancels_what_is_left)
{
    up();
    get("/forever");
    ck_assert(until_app("state['entered']", "1"));
    ck_assert_int_eq(stop(), 0);
    gil_take();
    ck_assert_str_eq(hp_eval("testapp", "state['cancelled']"), "1");
    ck_assert_str_eq(hp_eval("testapp", "state['shutdown']"), "1");
    gil_give();
    ck_assert(logged("ASGI: cancelling 1 request tasks"));
}
END_TEST

/* ------------------------------------------------------------------ */
/* inline mode                                                        */

/* Inline, the test thread runs the event loop (sl_asgi_run_inline()), so
 * the client is a thread of its own: it talks to the server, then asks
 * for the drain as the supervisor does (SIGTERM). It records what it got;
 * the test thread asserts. */
typedef struct {
    struct sockaddr_in to;
    char got[4096];
    size_t len;
    int answers; /* whole "hello" responses received */
    int err;     /* errno of the call that failed, or 0 */
} inline_client_t;

static bool read_until_hellos(int fd, inline_client_t *ic, int want)
{
    while (ic->answers < want) {
        ssize_t n =
            recv(fd, ic->got + ic->len, sizeof(ic->got) - 1 - ic->len, 0);
        if (n <= 0) {
            ic->err = n == 0 ? EPIPE : errno;
            return false;
        }
        ic->len += (size_t)n;
        ic->got[ic->len] = '\0';
        ic->answers = 0;
        for (const char *p = ic->got; (p = strstr(p, "\r\n\r\nhello")); p++)
            ic->answers++;
    }
    return true;
}

static void *inline_client(void *arg)
{
    static const char get2[] = "GET /hello HTTP/1.1\r\nHost: h\r\n\r\n";
    inline_client_t *ic = arg;
    struct timeval tv = {.tv_sec = 2};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
        connect(fd, (struct sockaddr *)&ic->to, sizeof(ic->to)) < 0) {
        ic->err = errno;
    } else {
        /* two requests, one after the other, on one connection */
        for (int i = 1; i <= 2 && ic->err == 0; i++) {
            if (send(fd, get2, sizeof(get2) - 1, MSG_NOSIGNAL) < 0)
                ic->err = errno;
            else
                read_until_hellos(fd, ic, i);
        }
    }
    if (fd >= 0)
        close(fd);
    kill(getpid(), SIGTERM); /* drain, whatever happened */
    return NULL;
}

/* The inline table: requests served by the event loop on this thread,
 * the drain ends sl_asgi_run_inline(), and stop runs lifespan shutdown. */
START_TEST(test_inline_serves_and_stops)
{
    inline_client_t ic = {0};
    socklen_t len = sizeof(ic.to);
    pthread_t th;
    int status;

    boot(&sl_asgi_inline_exec.ops);
    ck_assert_int_eq(
        getsockname(pump.listeners[0].fd, (struct sockaddr *)&ic.to, &len), 0);
    ck_assert_int_eq(pthread_create(&th, NULL, inline_client, &ic), 0);
    status = sl_asgi_run_inline(&pump);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(status, SL_EXIT_OK);
    ck_assert_msg(ic.err == 0, "client: %s (got: %s)", strerror(ic.err),
                  ic.got);
    ck_assert_int_eq(ic.answers, 2);
    ck_assert(strncmp(ic.got, "HTTP/1.1 200 OK\r\n", 17) == 0);
    ck_assert_uint_eq(pump.served, 2);
    ck_assert_str_eq(hp_eval("testapp", "state['shutdown']"), "0");
    ck_assert_int_eq(stop(), 0);
    ck_assert_str_eq(hp_eval("testapp", "state['startup'], state['shutdown']"),
                     "(1, 1)");
    ck_assert_str_eq(hp_eval("testapp", "loop.is_closed()"), "True");
}
END_TEST

static Suite *asgi_suite(void)
{
    Suite *s = suite_create("asgi");
    TCase *tc = tcase_create("asgi");

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
    tcase_add_test(tc, test_raise_before_sending);
    tcase_add_test(tc, test_raise_after_start_before_body);
    tcase_add_test(tc, test_raise_after_body_began);
    tcase_add_loop_test(tc, test_invalid_message, 0,
                        sizeof(mistakes) / sizeof(mistakes[0]));
    tcase_add_test(tc, test_keep_alive);
    tcase_add_test(tc, test_finish_cancels);
    tcase_add_test(tc, test_stop_runs_lifespan_shutdown);
    tcase_add_test(tc, test_stop_cancels_what_is_left);
    suite_add_tcase(s, tc);

    tc = tcase_create("inline");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_inline_serves_and_stops);
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
