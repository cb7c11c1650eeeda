/* test_asgi_lifespan.c - check suite for worker/python/asgi_lifespan.c.
 *
 * The embedded interpreter runs small ASGI apps (module "t", APPS below)
 * through what a worker does once: tell ASGI from WSGI, make the event
 * loop, lifespan startup under --lifespan auto/on/off, shutdown within a
 * budget, and cancelling what is left. The tests read back what the apps
 * recorded (t.events) and what went to the error log. Python starts once
 * per process, so every test runs forked and starts it in its fixture.
 */
#include "config.h"

#include <check.h>

#include "tests/unit/py_harness.h"
#include "worker/python/asgi_lifespan.h"

static const char APPS[] =
    "import asyncio, functools\n"
    "events = []\n"
    "\n"
    "async def asgi_fn(scope, receive, send):\n"
    "    pass\n"
    "\n"
    "class AsgiObj:\n"
    "    async def __call__(self, scope, receive, send):\n"
    "        pass\n"
    "\n"
    "def wsgi_fn(environ, start_response):\n"
    "    return []\n"
    "\n"
    "class WsgiObj:\n"
    "    def __call__(self, environ, start_response):\n"
    "        return []\n"
    "\n"
    "async def agen(scope, receive, send):\n"
    "    yield 1\n"
    "\n"
    "class Weird:\n"
    "    @property\n"
    "    def __call__(self):\n"
    "        raise RuntimeError('no looking')\n"
    "\n"
    "partial_asgi = functools.partial(asgi_fn)\n"
    "\n"
    "async def full(scope, receive, send):\n"
    "    events.append((scope['type'], scope['asgi']['version'],\n"
    "                   scope['asgi']['spec_version'],\n"
    "                   type(scope['state']).__name__))\n"
    "    events.append((await receive())['type'])\n"
    "    scope['state']['db'] = 'connected'\n"
    "    await send({'type': 'lifespan.startup.complete'})\n"
    "    events.append((await receive())['type'])\n"
    "    await send({'type': 'lifespan.shutdown.complete'})\n"
    "    events.append('done')\n"
    "\n"
    "async def raises(scope, receive, send):\n"
    "    events.append('called')\n"
    "    if scope['type'] != 'http':\n"
    "        raise ValueError('no lifespan here')\n"
    "\n"
    "async def returns(scope, receive, send):\n"
    "    events.append('called')\n"
    "\n"
    "async def fails(scope, receive, send):\n"
    "    await receive()\n"
    "    await send({'type': 'lifespan.startup.failed',\n"
    "                'message': 'db down'})\n"
    "\n"
    "async def fails_quietly(scope, receive, send):\n"
    "    await receive()\n"
    "    await send({'type': 'lifespan.startup.failed'})\n"
    "\n"
    "async def startup_only(scope, receive, send):\n"
    "    await receive()\n"
    "    await send({'type': 'lifespan.startup.complete'})\n"
    "\n"
    "async def silent_shutdown(scope, receive, send):\n"
    "    await receive()\n"
    "    await send({'type': 'lifespan.startup.complete'})\n"
    "    events.append((await receive())['type'])\n"
    "    try:\n"
    "        await asyncio.Event().wait()\n"
    "    except asyncio.CancelledError:\n"
    "        events.append('cancelled')\n"
    "        raise\n"
    "\n"
    "async def shutdown_fails(scope, receive, send):\n"
    "    await receive()\n"
    "    await send({'type': 'lifespan.startup.complete'})\n"
    "    await receive()\n"
    "    await send({'type': 'lifespan.shutdown.failed',\n"
    "                'message': 'flush failed'})\n"
    "\n"
    "async def forever():\n"
    "    try:\n"
    "        await asyncio.Event().wait()\n"
    "    except asyncio.CancelledError:\n"
    "        events.append('forever cancelled')\n"
    "        raise\n"
    "\n"
    "async def unwinds():\n"
    "    try:\n"
    "        await asyncio.Event().wait()\n"
    "    except asyncio.CancelledError:\n"
    "        await asyncio.sleep(0)\n"
    "        events.append('unwound')\n"
    "        raise\n"
    "\n"
    "async def stubborn():\n"
    "    while True:\n"
    "        try:\n"
    "            await asyncio.Event().wait()\n"
    "        except asyncio.CancelledError:\n"
    "            events.append('ignored a cancel')\n"
    "\n"
    "async def quick():\n"
    "    return 1\n";

static sl_options_t opt;
static PyObject *loop; /* owned */

static void setup(void)
{
    hp_log_to_file();
    sl_log_set_level(SL_LOG_DEBUG);
}

static void teardown(void)
{
    Py_CLEAR(loop);
}

/* Python for "sluice ARGS... testapp:app", the apps, and the helper. */
#define UP(...)                                                                \
    do {                                                                       \
        h_options(&opt, __VA_ARGS__);                                          \
        up();                                                                  \
    } while (0)

static void up(void)
{
    ck_assert_int_eq(sl_py_init(&opt), 0);
    hp_module("t", APPS);
    ck_assert_int_eq(sl_asgi_lifespan_init(), 0);
}

/* Attribute NAME of module t (a new reference). */
static PyObject *attr(const char *name)
{
    PyObject *o = PyObject_GetAttrString(PyImport_AddModule("t"), name);

    hp_check(o, name);
    return o;
}

/* An asyncio loop, as t.loop too. */
static void make_loop(void)
{
    const char *name = NULL;

    loop = sl_asgi_lifespan_loop(SL_LOOP_ASYNCIO, &name);
    ck_assert_ptr_nonnull(loop);
    ck_assert_str_eq(name, "asyncio");
    ck_assert_int_eq(
        PyObject_SetAttrString(PyImport_AddModule("t"), "loop", loop), 0);
}

/* Lifespan startup of app t.NAME on a new loop under --lifespan as
 * parsed; its result, *STATE as it returned. */
static int startup(const char *name, PyObject **state)
{
    PyObject *app = attr(name);
    int rc;

    make_loop();
    rc = sl_asgi_lifespan_startup(loop, app, opt.lifespan, state);
    ck_assert(!PyErr_Occurred());
    Py_DECREF(app);
    return rc;
}

static bool logged(const char *text)
{
    return strstr(hp_log_text(), text) != NULL;
}

/* ------------------------------------------------------------------ */
/* ASGI or WSGI                                                       */

static const struct {
    const char *app; /* an expression in t */
    int asgi;
} apps[] = {
    {"asgi_fn", 1},   {"AsgiObj()", 1}, {"partial_asgi", 1}, {"wsgi_fn", 0},
    {"WsgiObj()", 0}, {"agen", 0},      {"len", 0},          {"42", 0},
};

START_TEST(test_detect)
{
    PyObject *app;

    UP(NULL);
    hp_module("t", "probe = None\n");
    app = PyRun_String(apps[_i].app, Py_eval_input,
                       PyModule_GetDict(PyImport_AddModule("t")),
                       PyModule_GetDict(PyImport_AddModule("t")));
    hp_check(app, apps[_i].app);
    ck_assert_msg(sl_asgi_lifespan_detect(app) == apps[_i].asgi,
                  "%s: wanted %d", apps[_i].app, apps[_i].asgi);
    Py_DECREF(app);
}
END_TEST

/* Looking at the app may run its code: a failure is -1 and a log line,
 * with no exception left behind. */
START_TEST(test_detect_failure)
{
    PyObject *app;

    UP(NULL);
    hp_module("t", "weird = Weird()\n");
    app = attr("weird");
    ck_assert_int_eq(sl_asgi_lifespan_detect(app), -1);
    ck_assert(!PyErr_Occurred());
    Py_DECREF(app);
    ck_assert(logged("cannot tell whether the app is ASGI or WSGI"));
    ck_assert(logged("no looking"));
}
END_TEST

/* ------------------------------------------------------------------ */
/* the event loop                                                     */

START_TEST(test_loop_asyncio)
{
    UP(NULL);
    make_loop();
    ck_assert_str_eq(hp_eval("t", "type(loop).__module__.split('.')[0]"),
                     "asyncio");
    ck_assert_str_eq(hp_eval("t", "asyncio.get_event_loop() is loop"), "True");
    ck_assert_str_eq(hp_eval("t", "loop.is_running() or loop.is_closed()"),
                     "False");
    ck_assert_str_eq(hp_eval("t", "loop.run_until_complete(quick())"), "1");
}
END_TEST

static bool uvloop_installed(void)
{
    hp_module("t", "try:\n"
                   "    import uvloop\n"
                   "    have_uvloop = True\n"
                   "except ImportError:\n"
                   "    have_uvloop = False\n");
    return strcmp(hp_eval("t", "have_uvloop"), "True") == 0;
}

/* auto: uvloop when it can be imported, else asyncio. */
START_TEST(test_loop_auto)
{
    const char *name = NULL;
    bool uv;

    UP(NULL);
    uv = uvloop_installed();
    loop = sl_asgi_lifespan_loop(SL_LOOP_AUTO, &name);
    ck_assert_ptr_nonnull(loop);
    ck_assert_str_eq(name, uv ? "uvloop" : "asyncio");
    ck_assert_int_eq(
        PyObject_SetAttrString(PyImport_AddModule("t"), "loop", loop), 0);
    ck_assert_str_eq(hp_eval("t", "asyncio.get_event_loop() is loop"), "True");
    if (uv)
        ck_assert_str_eq(hp_eval("t", "isinstance(loop, uvloop.Loop)"), "True");
}
END_TEST

/* auto without uvloop (an import that fails): asyncio, no complaint. */
START_TEST(test_loop_auto_without_uvloop)
{
    const char *name = NULL;

    UP(NULL);
    hp_module("t", "import sys\nsys.modules['uvloop'] = None\n");
    loop = sl_asgi_lifespan_loop(SL_LOOP_AUTO, &name);
    ck_assert_ptr_nonnull(loop);
    ck_assert_str_eq(name, "asyncio");
    ck_assert(!logged("[ERROR]"));
}
END_TEST

/* --loop uvloop: uvloop, or a failure that names the package. */
START_TEST(test_loop_uvloop)
{
    const char *name = NULL;

    UP(NULL);
    if (!uvloop_installed()) {
        ck_assert_ptr_null(sl_asgi_lifespan_loop(SL_LOOP_UVLOOP, &name));
        ck_assert(logged("cannot create the ASGI event loop"));
        ck_assert(logged("python3-uvloop"));
        return;
    }
    loop = sl_asgi_lifespan_loop(SL_LOOP_UVLOOP, &name);
    ck_assert_ptr_nonnull(loop);
    ck_assert_str_eq(name, "uvloop");
    ck_assert_int_eq(
        PyObject_SetAttrString(PyImport_AddModule("t"), "loop", loop), 0);
    ck_assert_str_eq(hp_eval("t", "isinstance(loop, uvloop.Loop)"), "True");
    ck_assert_str_eq(hp_eval("t", "asyncio.get_event_loop() is loop"), "True");
}
END_TEST

START_TEST(test_loop_uvloop_missing)
{
    const char *name = NULL;

    UP(NULL);
    hp_module("t", "import sys\nsys.modules['uvloop'] = None\n");
    ck_assert_ptr_null(sl_asgi_lifespan_loop(SL_LOOP_UVLOOP, &name));
    ck_assert(!PyErr_Occurred());
    ck_assert(logged("cannot create the ASGI event loop"));
    ck_assert(logged("--loop uvloop: uvloop cannot be imported"));
    ck_assert(logged("python3-uvloop"));
}
END_TEST

/* ------------------------------------------------------------------ */
/* startup                                                            */

static const char *const serving_modes[] = {"auto", "on"};

/* An app with lifespan: its scope, startup, the state it filled in. */
START_TEST(test_startup_complete)
{
    PyObject *state = NULL;

    UP("--lifespan", serving_modes[_i], NULL);
    ck_assert_int_eq(startup("full", &state), 0);
    ck_assert_ptr_nonnull(state);
    ck_assert(PyDict_Check(state));
    ck_assert_int_eq(
        PyObject_SetAttrString(PyImport_AddModule("t"), "state", state), 0);
    Py_DECREF(state);
    ck_assert_str_eq(hp_eval("t", "state"), "{'db': 'connected'}");
    ck_assert_str_eq(hp_eval("t", "events"),
                     "[('lifespan', '3.0', '2.3', 'dict'), "
                     "'lifespan.startup']");
    ck_assert(logged("ASGI lifespan startup complete"));
    ck_assert(!logged("[ERROR]"));

    sl_asgi_lifespan_shutdown(loop, 2.0);
    ck_assert_str_eq(hp_eval("t", "events[2:]"),
                     "['lifespan.shutdown', 'done']");
    ck_assert_str_eq(hp_eval("t", "loop.is_closed()"), "True");
    ck_assert(!logged("[WARNING]"));
    ck_assert(!logged("[ERROR]"));
}
END_TEST

/* --lifespan off: the app is never called for lifespan. */
START_TEST(test_startup_off)
{
    PyObject *state = (PyObject *)&state;

    UP("--lifespan", "off", NULL);
    ck_assert_int_eq(startup("full", &state), 0);
    ck_assert_ptr_null(state);
    ck_assert_str_eq(hp_eval("t", "events"), "[]");
    sl_asgi_lifespan_shutdown(loop, 2.0);
    ck_assert_str_eq(hp_eval("t", "events"), "[]");
    ck_assert_str_eq(hp_eval("t", "loop.is_closed()"), "True");
}
END_TEST

/* An app that raises before answering: under auto it has no lifespan
 * and is served without; under on that fails the boot. */
START_TEST(test_startup_raises_auto)
{
    PyObject *state = (PyObject *)&state;

    UP("--lifespan", "auto", NULL);
    ck_assert_int_eq(startup("raises", &state), 0);
    ck_assert_ptr_null(state);
    ck_assert_str_eq(hp_eval("t", "events"), "['called']");
    ck_assert(logged("[INFO] ASGI lifespan not supported by the app (it "
                     "raised ValueError: no lifespan here before answering "
                     "lifespan.startup): serving without it"));
    ck_assert(!logged("[ERROR]"));
    /* no lifespan to shut down: the app is not called again */
    sl_asgi_lifespan_shutdown(loop, 2.0);
    ck_assert_str_eq(hp_eval("t", "events"), "['called']");
    ck_assert_str_eq(hp_eval("t", "loop.is_closed()"), "True");
}
END_TEST

START_TEST(test_startup_raises_on)
{
    PyObject *state = (PyObject *)&state;

    UP("--lifespan", "on", NULL);
    ck_assert_int_eq(startup("raises", &state), -1);
    ck_assert_ptr_null(state);
    ck_assert(logged("[ERROR] ASGI lifespan startup failed: the app raised "
                     "ValueError: no lifespan here before answering "
                     "lifespan.startup"));
}
END_TEST

/* An app that returns without answering is one without lifespan too. */
START_TEST(test_startup_returns)
{
    PyObject *state = (PyObject *)&state;
    bool on = _i == 1;

    UP("--lifespan", serving_modes[_i], NULL);
    ck_assert_int_eq(startup("returns", &state), (on ? -1 : 0));
    ck_assert_ptr_null(state);
    ck_assert_str_eq(hp_eval("t", "events"), "['called']");
    if (on)
        ck_assert(logged("[ERROR] ASGI lifespan startup failed: the app "
                         "returned before answering lifespan.startup"));
    else
        ck_assert(logged("(it returned before answering lifespan.startup)"));
}
END_TEST

/* lifespan.startup.failed fails the boot in any mode, with its message. */
START_TEST(test_startup_failed)
{
    PyObject *state = (PyObject *)&state;

    UP("--lifespan", serving_modes[_i], NULL);
    ck_assert_int_eq(startup("fails", &state), -1);
    ck_assert_ptr_null(state);
    ck_assert(logged("[ERROR] ASGI lifespan startup failed: db down"));
}
END_TEST

START_TEST(test_startup_failed_without_message)
{
    PyObject *state = (PyObject *)&state;

    UP("--lifespan", "auto", NULL);
    ck_assert_int_eq(startup("fails_quietly", &state), -1);
    ck_assert(logged("[ERROR] ASGI lifespan startup failed: (no message)"));
}
END_TEST

/* ------------------------------------------------------------------ */
/* shutdown                                                           */

/* An app that never answers lifespan.shutdown: given up after its
 * budget, cancelled, and the loop closed all the same. */
START_TEST(test_shutdown_never_answers)
{
    PyObject *state = NULL;
    double start;

    UP("--lifespan", "on", NULL);
    ck_assert_int_eq(startup("silent_shutdown", &state), 0);
    Py_XDECREF(state);
    start = h_now();
    sl_asgi_lifespan_shutdown(loop, 0.2);
    ck_assert(h_now() - start >= 0.19);
    ck_assert_msg(h_now() - start < H_DEADLINE, "shutdown overran its budget");
    ck_assert_str_eq(hp_eval("t", "events"),
                     "['lifespan.shutdown', 'cancelled']");
    ck_assert(logged("[WARNING] ASGI lifespan shutdown did not finish within "
                     "0.2s"));
    ck_assert_str_eq(hp_eval("t", "loop.is_closed()"), "True");
}
END_TEST

START_TEST(test_shutdown_failed)
{
    PyObject *state = NULL;

    UP("--lifespan", "auto", NULL);
    ck_assert_int_eq(startup("shutdown_fails", &state), 0);
    Py_XDECREF(state);
    sl_asgi_lifespan_shutdown(loop, 2.0);
    ck_assert(logged("[ERROR] ASGI lifespan shutdown failed: flush failed"));
    ck_assert_str_eq(hp_eval("t", "loop.is_closed()"), "True");
}
END_TEST

/* An app whose lifespan ended after startup has nothing to shut down. */
START_TEST(test_shutdown_after_app_returned)
{
    PyObject *state = NULL;

    UP("--lifespan", "on", NULL);
    ck_assert_int_eq(startup("startup_only", &state), 0);
    Py_XDECREF(state);
    sl_asgi_lifespan_shutdown(loop, 2.0);
    ck_assert(!logged("[WARNING]"));
    ck_assert(!logged("[ERROR]"));
    ck_assert_str_eq(hp_eval("t", "loop.is_closed()"), "True");
}
END_TEST

/* Tasks the app left running are cancelled before the loop closes. */
START_TEST(test_shutdown_cancels_leftovers)
{
    PyObject *state = NULL;

    UP("--lifespan", "off", NULL);
    ck_assert_int_eq(startup("full", &state), 0);
    hp_module("t", "left = loop.create_task(forever())\n"
                   "loop.run_until_complete(asyncio.sleep(0))\n");
    sl_asgi_lifespan_shutdown(loop, 2.0);
    ck_assert_str_eq(hp_eval("t", "events"), "['forever cancelled']");
    ck_assert_str_eq(hp_eval("t", "left.cancelled()"), "True");
    ck_assert_str_eq(hp_eval("t", "loop.is_closed()"), "True");
}
END_TEST

/* ------------------------------------------------------------------ */
/* cancel                                                             */

/* Start the named coroutines as tasks on the loop (t.tasks), and let each
 * reach its first await. */
static PyObject *tasks(const char *list)
{
    char src[512];

    snprintf(src, sizeof(src),
             "tasks = [loop.create_task(f()) for f in (%s)]\n"
             "loop.run_until_complete(asyncio.sleep(0))\n",
             list);
    hp_module("t", src);
    return attr("tasks");
}

START_TEST(test_cancel_all_unwind)
{
    PyObject *ts;

    UP(NULL);
    make_loop();
    ts = tasks("forever, unwinds, quick");
    ck_assert_int_eq(sl_asgi_lifespan_cancel(loop, ts, 2.0), 0);
    Py_DECREF(ts);
    ck_assert_str_eq(hp_eval("t", "sorted(events)"),
                     "['forever cancelled', 'unwound']");
    ck_assert_str_eq(hp_eval("t", "[t.done() for t in tasks]"),
                     "[True, True, True]");
    ck_assert_str_eq(hp_eval("t", "tasks[2].cancelled()"), "False");
}
END_TEST

/* A task that swallows its cancel is still running when the time is up:
 * counted, and the call returns within its timeout. */
START_TEST(test_cancel_counts_stubborn)
{
    PyObject *ts;
    double start;

    UP(NULL);
    make_loop();
    ts = tasks("stubborn, forever, stubborn");
    start = h_now();
    ck_assert_int_eq(sl_asgi_lifespan_cancel(loop, ts, 0.2), 2);
    ck_assert(h_now() - start >= 0.19);
    ck_assert(h_now() - start < H_DEADLINE);
    Py_DECREF(ts);
    ck_assert_str_eq(hp_eval("t", "events.count('ignored a cancel')"), "2");
    ck_assert_str_eq(hp_eval("t", "tasks[1].cancelled()"), "True");
    ck_assert_str_eq(hp_eval("t", "loop.is_running()"), "False");
}
END_TEST

START_TEST(test_cancel_nothing)
{
    PyObject *ts;

    UP(NULL);
    make_loop();
    ts = tasks("quick,");
    ck_assert_int_eq(sl_asgi_lifespan_cancel(loop, ts, 0.2), 0);
    Py_DECREF(ts);
    ts = PyList_New(0);
    ck_assert_int_eq(sl_asgi_lifespan_cancel(loop, ts, 0.2), 0);
    Py_DECREF(ts);
}
END_TEST

static Suite *asgi_lifespan_suite(void)
{
    Suite *s = suite_create("asgi_lifespan");
    TCase *tc = tcase_create("detect");

    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_detect, 0, sizeof(apps) / sizeof(apps[0]));
    tcase_add_test(tc, test_detect_failure);
    suite_add_tcase(s, tc);

    tc = tcase_create("loop");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_loop_asyncio);
    tcase_add_test(tc, test_loop_auto);
    tcase_add_test(tc, test_loop_auto_without_uvloop);
    tcase_add_test(tc, test_loop_uvloop);
    tcase_add_test(tc, test_loop_uvloop_missing);
    suite_add_tcase(s, tc);

    tc = tcase_create("startup");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_startup_complete, 0, 2);
    tcase_add_test(tc, test_startup_off);
    tcase_add_test(tc, test_startup_raises_auto);
    tcase_add_test(tc, test_startup_raises_on);
    tcase_add_loop_test(tc, test_startup_returns, 0, 2);
    tcase_add_loop_test(tc, test_startup_failed, 0, 2);
    tcase_add_test(tc, test_startup_failed_without_message);
    suite_add_tcase(s, tc);

    tc = tcase_create("shutdown");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_shutdown_never_answers);
    tcase_add_test(tc, test_shutdown_failed);
    tcase_add_test(tc, test_shutdown_after_app_returned);
    tcase_add_test(tc, test_shutdown_cancels_leftovers);
    tcase_add_test(tc, test_cancel_all_unwind);
    tcase_add_test(tc, test_cancel_counts_stubborn);
    tcase_add_test(tc, test_cancel_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(asgi_lifespan_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
