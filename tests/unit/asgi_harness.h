/* asgi_harness.h - what the ASGI HTTP suites (test_asgi.c,
 * test_asgi_errors.c, test_asgi_stop.c) share on top of py_harness.h: the
 * ASGI test app (APP, with its gates and its record, testapp.state), the
 * interpreter and the asyncio lane booted per test (setup/teardown as
 * check fixtures), the GIL taken and given back around a look at the app,
 * and the waits on what it recorded or logged.
 */
#ifndef SL_TEST_ASGI_HARNESS_H
#define SL_TEST_ASGI_HARNESS_H

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

static inline void setup(void)
{
    client.fd = -1;
    hp_log_to_file();
}

static inline void gil_take(void)
{
    PyEval_RestoreThread(main_ts);
}

static inline void gil_give(void)
{
    main_ts = PyEval_SaveThread();
}

/* The executor's stop: the lane's without the GIL, as the worker calls
 * it; inline, with the GIL the test thread never gave up. */
static inline int stop(void)
{
    stopped = true;
    return pump.exec->stop(&pump, 2.0);
}

static inline void teardown(void)
{
    if (!stopped && pump.exec != NULL)
        ck_assert_int_eq(stop(), 0);
    h_resp_free(&resp);
    h_client_close(&client);
}

/* Python, the app, a pump with executor EXEC, and lifespan startup done
 * (the GIL still held). */
static inline void boot(const sl_exec_t *exec)
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
static inline void up(void)
{
    boot(&sl_asgi_lane_exec.ops);
    gil_give();
    h_connect(&pump, &client);
}

/* str() of EXPR in the app's module, taking the GIL for it. */
static inline const char *app_eval(const char *expr)
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

static inline bool app_is(void *arg)
{
    app_is_t *a = arg;

    return strcmp(app_eval(a->expr), a->want) == 0;
}

/* Run the loop until str(EXPR) in the app is WANT. */
static inline bool until_app(const char *expr, const char *want)
{
    app_is_t a = {expr, want};

    return h_run_until(&pump, app_is, &a);
}

static inline void get(const char *path)
{
    char raw[256];

    snprintf(raw, sizeof(raw), "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", path);
    h_sends(&client, raw);
}

static inline const char *hdr(const char *name)
{
    return h_header(resp.head, name, v, sizeof(v));
}

static inline bool logged(const char *text)
{
    return strstr(hp_log_text(), text) != NULL;
}

/* How many times TEXT occurs in what the client received. */
static inline int received_count(const char *text)
{
    int n = 0;

    for (const char *p = client.data; p && (p = strstr(p, text)); p++)
        n++;
    return n;
}

#endif
