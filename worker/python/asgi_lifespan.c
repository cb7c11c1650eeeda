/* asgi_lifespan.c - ASGI start-up and shutdown, where speed does not matter.
 *
 * Everything here runs once per worker, so it is written in Python, kept
 * in the string below and compiled into a private module at start-up; C
 * only calls it and logs what it reports. The per-request path (asgi.c) is
 * C from end to end. Lifespan follows uvicorn's "auto": an app that raises
 * before answering lifespan.startup does not support lifespan and is served
 * without it; with --lifespan on that is a failed boot, as is
 * lifespan.startup.failed in any mode.
 */
#include "config.h"

#include <string.h>

#include "common/log.h"
#include "worker/python/asgi_lifespan.h"
#include "worker/python/py.h"

static const char helper_src[] =
    "import asyncio\n"
    "\n"
    "ASGI = {'version': '3.0', 'spec_version': '2.3'}\n"
    "\n"
    "def new_loop(kind):\n"
    "    if kind != 1:\n"
    "        try:\n"
    "            import uvloop\n"
    "        except ImportError:\n"
    "            if kind == 2:\n"
    "                raise RuntimeError('--loop uvloop: uvloop cannot be '\n"
    "                                   'imported (Debian package '\n"
    "                                   'python3-uvloop)') from None\n"
    "        else:\n"
    "            loop = uvloop.new_event_loop()\n"
    "            asyncio.set_event_loop(loop)\n"
    "            return loop, 'uvloop'\n"
    "    loop = asyncio.new_event_loop()\n"
    "    asyncio.set_event_loop(loop)\n"
    "    return loop, 'asyncio'\n"
    "\n"
    "def _summary(exc):\n"
    "    text = str(exc)\n"
    "    return type(exc).__name__ + (': ' + text if text else '')\n"
    "\n"
    "class Lifespan:\n"
    "    def __init__(self, app, loop):\n"
    "        self.app, self.loop = app, loop\n"
    "        self.state = {}\n"
    "        self.error = None\n"
    "        self.asked = False\n"
    "        self.started = loop.create_future()\n"
    "        self.stopped = loop.create_future()\n"
    "        self.stop_asked = loop.create_future()\n"
    "        self.task = None\n"
    "\n"
    "    async def receive(self):\n"
    "        if not self.asked:\n"
    "            self.asked = True\n"
    "            return {'type': 'lifespan.startup'}\n"
    "        await asyncio.shield(self.stop_asked)\n"
    "        return {'type': 'lifespan.shutdown'}\n"
    "\n"
    "    async def send(self, message):\n"
    "        kind = message.get('type') if isinstance(message, dict) else "
    "None\n"
    "        text = str(message.get('message', '')) if kind else ''\n"
    "        if kind == 'lifespan.startup.complete':\n"
    "            fut, result = self.started, ('ok', '')\n"
    "        elif kind == 'lifespan.startup.failed':\n"
    "            fut, result = self.started, ('failed', text)\n"
    "        elif kind == 'lifespan.shutdown.complete':\n"
    "            fut, result = self.stopped, ('ok', '')\n"
    "        elif kind == 'lifespan.shutdown.failed':\n"
    "            fut, result = self.stopped, ('failed', text)\n"
    "        else:\n"
    "            raise RuntimeError('unexpected ASGI lifespan message %r'\n"
    "                               % (message,))\n"
    "        if fut.done():\n"
    "            raise RuntimeError('%s sent twice, or too late' % kind)\n"
    "        fut.set_result(result)\n"
    "\n"
    "    async def main(self):\n"
    "        scope = {'type': 'lifespan', 'asgi': ASGI, 'state': self.state}\n"
    "        try:\n"
    "            await self.app(scope, self.receive, self.send)\n"
    "        except BaseException as exc:\n"
    "            self.error = exc\n"
    "        finally:\n"
    "            why = 'raised ' + _summary(self.error) if self.error \\\n"
    "                else 'returned'\n"
    "            for fut in (self.started, self.stopped):\n"
    "                if not fut.done():\n"
    "                    fut.set_result(('ended', why))\n"
    "\n"
    "    def startup(self):\n"
    "        self.task = self.loop.create_task(self.main())\n"
    "        return self.loop.run_until_complete(self.started)\n"
    "\n"
    "    def shutdown(self, budget):\n"
    "        if self.task is None or self.task.done():\n"
    "            return ('ok', '')\n"
    "        self.stop_asked.set_result(None)\n"
    "        wait = asyncio.wait_for(asyncio.shield(self.stopped), budget)\n"
    "        try:\n"
    "            result = self.loop.run_until_complete(wait)\n"
    "        except asyncio.TimeoutError:\n"
    "            result = ('timeout', '%.1fs' % budget)\n"
    "        cancel_tasks(self.loop, [self.task], 0.5)\n"
    "        return result\n"
    "\n"
    "def cancel_tasks(loop, tasks, timeout):\n"
    "    tasks = [t for t in tasks if not t.done()]\n"
    "    for t in tasks:\n"
    "        t.cancel()\n"
    "    if tasks:\n"
    "        loop.run_until_complete(asyncio.wait(tasks, timeout=timeout))\n"
    "    return sum(1 for t in tasks if not t.done())\n"
    "\n"
    "def close_loop(loop):\n"
    "    left = cancel_tasks(loop, asyncio.all_tasks(loop), 1.0)\n"
    "    try:\n"
    "        loop.run_until_complete(asyncio.wait_for(\n"
    "            loop.shutdown_asyncgens(), 1.0))\n"
    "        loop.run_until_complete(asyncio.wait_for(\n"
    "            loop.shutdown_default_executor(), 2.0))\n"
    "    except asyncio.TimeoutError:\n"
    "        left += 1\n"
    "    if not left:\n"
    "        loop.close()\n"
    "    return left\n";

static PyObject *helper;   /* owned: the compiled module */
static PyObject *lifespan; /* owned: the running Lifespan, or NULL */

int sl_asgi_lifespan_init(void)
{
    PyObject *code;

    if (helper != NULL)
        return 0;
    code = Py_CompileString(helper_src, "<sluice-asgi>", Py_file_input);
    if (code == NULL)
        goto out_fail;
    helper = PyImport_ExecCodeModule("_sluice_asgi", code);
    Py_DECREF(code);
    if (helper == NULL)
        goto out_fail;
    return 0;

out_fail:
    sl_py_log_exception("cannot set up ASGI");
    return -1;
}

/* *OUT = OBJ.NAME (new reference), or NULL when OBJ has no such
 * attribute. 0, or -1 with an exception other than AttributeError. */
static int optional_attr(PyObject *obj, const char *name, PyObject **out)
{
    *out = PyObject_GetAttrString(obj, name);
    if (*out != NULL)
        return 0;
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return -1;
    PyErr_Clear();
    return 0;
}

/* F itself, or what it wraps when it is a bound method or a
 * functools.partial, as inspect.iscoroutinefunction() unwraps it (new
 * reference, or NULL with an exception). The partial is known by its type's
 * name so that functools need not be imported to ask. */
static PyObject *unwrap(PyObject *f)
{
    Py_INCREF(f);
    for (;;) {
        PyObject *inner;
        if (PyMethod_Check(f)) {
            inner = PyMethod_GET_FUNCTION(f);
            Py_INCREF(inner);
        } else if (strcmp(Py_TYPE(f)->tp_name, "functools.partial") == 0) {
            inner = PyObject_GetAttrString(f, "func");
        } else {
            return f;
        }
        Py_DECREF(f);
        if (inner == NULL)
            return NULL;
        f = inner;
    }
}

/* Whether F (unwrapped) is a function whose code is a coroutine's: 1, 0,
 * or -1 with an exception. */
static int is_coroutine_function(PyObject *f)
{
    PyObject *code;
    int rc = 0;

    f = unwrap(f);
    if (f == NULL)
        return -1;
    if (PyFunction_Check(f)) {
        code = PyFunction_GET_CODE(f);
        Py_INCREF(code);
    } else if (optional_attr(f, "__code__", &code) < 0) {
        Py_DECREF(f);
        return -1;
    }
    if (code != NULL && PyCode_Check(code))
        rc = (((PyCodeObject *)code)->co_flags & CO_COROUTINE) != 0;
    Py_XDECREF(code);
    Py_DECREF(f);
    return rc;
}

/* Told in C rather than with inspect: a WSGI app's worker then never
 * imports inspect or asyncio (the helper) at all. */
int sl_asgi_lifespan_detect(PyObject *app)
{
    PyObject *call;
    int rc = is_coroutine_function(app);

    if (rc == 0) {
        if (optional_attr(app, "__call__", &call) < 0) {
            rc = -1;
        } else if (call != NULL) {
            rc = is_coroutine_function(call);
            Py_DECREF(call);
        }
    }
    if (rc < 0)
        sl_py_log_exception("cannot tell whether the app is ASGI or WSGI");
    return rc;
}

PyObject *sl_asgi_lifespan_loop(sl_loop_t kind, const char **name)
{
    static char name_buf[16];
    PyObject *r, *loop;

    r = PyObject_CallMethod(helper, "new_loop", "i", (int)kind);
    if (r == NULL) {
        sl_py_log_exception("cannot create the ASGI event loop");
        return NULL;
    }
    loop = PyTuple_GET_ITEM(r, 0);
    snprintf(name_buf, sizeof(name_buf), "%s",
             PyUnicode_AsUTF8(PyTuple_GET_ITEM(r, 1)));
    *name = name_buf;
    Py_INCREF(loop);
    Py_DECREF(r);
    return loop;
}

/* RESULT is (what, text) from the helper; the text as UTF-8. */
static const char *result_text(PyObject *result, const char **what)
{
    const char *s;

    *what = PyUnicode_AsUTF8(PyTuple_GET_ITEM(result, 0));
    s = PyUnicode_AsUTF8(PyTuple_GET_ITEM(result, 1));
    if (*what == NULL || s == NULL) {
        PyErr_Clear();
        *what = *what ? *what : "?";
        return "?";
    }
    return s;
}

int sl_asgi_lifespan_startup(PyObject *loop, PyObject *app, sl_lifespan_t mode,
                             PyObject **state)
{
    PyObject *r;
    const char *what, *text;

    *state = NULL;
    if (mode == SL_LIFESPAN_OFF)
        return 0;
    lifespan = PyObject_CallMethod(helper, "Lifespan", "OO", app, loop);
    if (lifespan == NULL) {
        sl_py_log_exception("cannot start ASGI lifespan");
        return -1;
    }
    r = PyObject_CallMethod(lifespan, "startup", NULL);
    if (r == NULL) {
        sl_py_log_exception("ASGI lifespan startup failed");
        return -1;
    }
    text = result_text(r, &what);
    if (strcmp(what, "ok") == 0) {
        Py_DECREF(r);
        *state = PyObject_GetAttrString(lifespan, "state");
        if (*state == NULL) {
            sl_py_log_exception("ASGI lifespan state");
            return -1;
        }
        sl_debug("ASGI lifespan startup complete");
        return 0;
    }
    if (strcmp(what, "ended") == 0 && mode == SL_LIFESPAN_AUTO) {
        sl_info("ASGI lifespan not supported by the app (it %s before "
                "answering lifespan.startup): serving without it",
                text);
        Py_DECREF(r);
        Py_CLEAR(lifespan);
        return 0;
    }
    if (strcmp(what, "failed") == 0)
        sl_error("ASGI lifespan startup failed: %s",
                 *text ? text : "(no message)");
    else
        sl_error("ASGI lifespan startup failed: the app %s before "
                 "answering lifespan.startup",
                 text);
    Py_DECREF(r);
    return -1;
}

int sl_asgi_lifespan_cancel(PyObject *loop, PyObject *tasks, double timeout)
{
    PyObject *r;
    long left;

    r = PyObject_CallMethod(helper, "cancel_tasks", "OOd", loop, tasks,
                            timeout);
    if (r == NULL) {
        sl_py_log_exception("cancelling ASGI tasks failed");
        return -1;
    }
    left = PyLong_AsLong(r);
    Py_DECREF(r);
    return (int)left;
}

void sl_asgi_lifespan_shutdown(PyObject *loop, double budget)
{
    PyObject *r;
    const char *what, *text;

    if (lifespan != NULL) {
        r = PyObject_CallMethod(lifespan, "shutdown", "d", budget);
        if (r == NULL) {
            sl_py_log_exception("ASGI lifespan shutdown failed");
        } else {
            text = result_text(r, &what);
            if (strcmp(what, "failed") == 0)
                sl_error("ASGI lifespan shutdown failed: %s",
                         *text ? text : "(no message)");
            else if (strcmp(what, "timeout") == 0)
                sl_warn("ASGI lifespan shutdown did not finish within %s",
                        text);
            else if (strcmp(what, "ended") == 0)
                sl_warn("ASGI lifespan: the app %s before "
                        "lifespan.shutdown.complete",
                        text);
            Py_DECREF(r);
        }
        Py_CLEAR(lifespan);
    }
    r = PyObject_CallMethod(helper, "close_loop", "O", loop);
    if (r == NULL)
        sl_py_log_exception("closing the ASGI event loop failed");
    else if (PyLong_AsLong(r) > 0)
        sl_warn("ASGI: tasks still running at exit");
    Py_XDECREF(r);
}
