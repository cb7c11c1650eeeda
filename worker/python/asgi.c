/* asgi.c - ASGI 3.0 HTTP and WebSockets on one asyncio event loop per
 * worker: set-up, and the event loop's life.
 *
 * The executor is spread over a few files (asgi_internal.h lists them):
 * the request and its messages are the same in both modes, and only who
 * runs the event loop differs - a lane thread woken by an eventfd (pump
 * mode, asgi_lane.c) or the loop thread itself, driving libev from the
 * event loop (inline mode, asgi_inline.c). What both modes do to the event
 * loop - create it, run lifespan startup, cancel what is left and run
 * lifespan shutdown - is here.
 */
#include "config.h"

#include <Python.h>
#include <stdlib.h>

#include "common/log.h"
#include "worker/python/asgi.h"
#include "worker/python/asgi_done.h"
#include "worker/python/asgi_internal.h"
#include "worker/python/asgi_lifespan.h"
#include "worker/python/asgi_scope.h"
#include "worker/python/py.h"

#define LIFESPAN_BUDGET 5.0 /* lifespan shutdown, at most */

sl_asgi_t sl_asgi;
PyObject *sl_asgi_names[N_COUNT];

static const char *const name_text[N_COUNT] = {
    "type",
    "path",
    "headers",
    "body",
    "more_body",
    "status",
    "trailers",
    "more_trailers",
    "http.request",
    "http.disconnect",
    "http.response.start",
    "http.response.body",
    "http.response.trailers",
    "http.response.pathsend",
    "set_result",
    "done",
    "cancel",
    "throw",
    "close",
    "text",
    "bytes",
    "code",
    "reason",
    "subprotocol",
    "websocket.connect",
    "websocket.receive",
    "websocket.disconnect",
    "websocket.accept",
    "websocket.send",
    "websocket.close",
    "websocket.http.response.start",
    "websocket.http.response.body",
    "cancelling",
    "uncancel",
    "set_name",
    "call_soon",
    "_asyncio_future_blocking",
};

int sl_asgi_loop_create(void)
{
    sl_asgi.loop =
        sl_asgi_lifespan_loop(sl_asgi.p->opt->loop, &sl_asgi.loop_name);
    if (sl_asgi.loop == NULL)
        return -1;
    sl_asgi.base_ctx = PyContext_CopyCurrent();
    if (sl_asgi.base_ctx == NULL)
        goto out_pyerr;
    sl_asgi.create_future =
        PyObject_GetAttrString(sl_asgi.loop, "create_future");
    if (sl_asgi.create_future == NULL)
        goto out_pyerr;
    return 0;

out_pyerr:
    sl_py_log_exception("ASGI: cannot set up the event loop");
    return -1;
}

int sl_asgi_loop_startup(void)
{
    return sl_asgi_lifespan_startup(sl_asgi.loop, sl_asgi.app,
                                    sl_asgi.p->opt->lifespan, &sl_asgi.state);
}

void sl_asgi_loop_shutdown(void)
{
    PyObject *tasks = PyList_New(0);
    sl_asgi_req_t *r;

    sl_asgi.stopping = true;
    for (r = sl_asgi.live; r != NULL && tasks != NULL; r = r->next) {
        r->cancelled = true;
        if (r->task != NULL && PyList_Append(tasks, r->task) < 0)
            Py_CLEAR(tasks);
    }
    if (tasks == NULL) {
        sl_py_log_exception("ASGI: listing the tasks left");
    } else {
        if (PyList_GET_SIZE(tasks) > 0)
            sl_info("ASGI: cancelling %zd request tasks",
                    PyList_GET_SIZE(tasks));
        sl_asgi_carrier_end_idle(tasks);
        if (sl_asgi_lifespan_cancel(sl_asgi.loop, tasks, SL_ASGI_CANCEL_SECS) >
            0)
            sl_warn("ASGI: request tasks ignored their cancellation");
        Py_DECREF(tasks);
    }
    sl_asgi_lifespan_shutdown(sl_asgi.loop, sl_asgi.budget);
}

/* What is left of --graceful-timeout (the supervisor kills after it),
 * within LIFESPAN_BUDGET. */
double sl_asgi_shutdown_budget(sl_pump_t *p)
{
    double left = LIFESPAN_BUDGET;

    if (p->drain.draining) {
        left = p->drain.started + p->opt->graceful_timeout + 0.8 - ev_time();
        if (left > LIFESPAN_BUDGET)
            left = LIFESPAN_BUDGET;
        if (left < 0.5)
            left = 0.5;
    }
    return left;
}

int sl_asgi_start(sl_pump_t *p)
{
    int rc = p->exec->start(p);

    sl_asgi.started = rc == 0;
    return rc;
}

const char *sl_asgi_loop_name(void)
{
    return sl_asgi.loop_name ? sl_asgi.loop_name : "?";
}

static int init_names(void)
{
    size_t i;

    for (i = 0; i < N_COUNT; i++)
        if ((sl_asgi_names[i] = PyUnicode_InternFromString(name_text[i])) ==
            NULL)
            return -1;
    return 0;
}

static int init_asyncio(void)
{
    PyObject *asyncio = PyImport_ImportModule("asyncio");

    if (asyncio == NULL)
        return -1;
    sl_asgi.task_type = PyObject_GetAttrString(asyncio, "Task");
    sl_asgi.cancelled_error = PyObject_GetAttrString(asyncio, "CancelledError");
    Py_DECREF(asyncio);
    /* a name of our own: asyncio's default ("Task-%d") is a printf per
     * Task, a sixth of what making one costs */
    sl_asgi.kw_task = Py_BuildValue("(sss)", "loop", "context", "name");
    if (sl_asgi.task_type == NULL || sl_asgi.cancelled_error == NULL ||
        sl_asgi.kw_task == NULL)
        return -1;
    return 0;
}

int sl_asgi_init(PyObject *app, sl_pump_t *p)
{
    sl_asgi.p = p;
    sl_asgi.app = Py_NewRef(app);
    sl_asgi.slots = calloc(p->pool.nconns, sizeof(*sl_asgi.slots));
    if (sl_asgi.slots == NULL) {
        sl_error("out of memory for %u connections", p->pool.nconns);
        return -1;
    }
    if (sl_asgi_done_init() < 0 || init_names() < 0 || init_asyncio() < 0 ||
        sl_asgi_req_init() < 0 || sl_asgi_carrier_init() < 0 ||
        sl_asgi_task_init() < 0 || sl_asgi_channel_init() < 0 ||
        sl_asgi_ws_init() < 0 || sl_asgi_scope_init(p) < 0)
        goto out_fail;
    sl_asgi.empty = PyBytes_FromStringAndSize(NULL, 0);
    sl_asgi.empty_tuple = PyTuple_New(0);
    if (sl_asgi.empty == NULL || sl_asgi.empty_tuple == NULL)
        goto out_fail;
    return 0;

out_fail:
    sl_py_log_exception("cannot set up ASGI");
    return -1;
}
