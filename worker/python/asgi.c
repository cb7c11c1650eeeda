/* asgi.c - ASGI 3.0 HTTP and WebSockets on one asyncio event loop per
 * worker: set-up, and the event loop's life.
 *
 * The executor is spread over a few files (asgi_internal.h maps them):
 * the request and its messages are the same in both modes, and only who
 * runs the event loop differs - a lane thread woken by an eventfd (pump
 * mode, asgi_lane.c) or the loop thread itself, driving libev from the
 * event loop (inline mode, asgi_inline.c). What both modes do to the event
 * loop - create it, run lifespan startup, cancel what is left and run
 * lifespan shutdown - is here. Its context (sl_asgi_t) is the one of the
 * executor table the pump was given (sl_asgi_of()).
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

int sl_asgi_loop_create(sl_asgi_t *x)
{
    x->loop = sl_asgi_lifespan_loop(sl_pump_options(x->p)->loop, &x->loop_name);
    if (x->loop == NULL)
        return -1;
    x->loop_hash = PyObject_Hash(x->loop); /* current tasks are keyed by it */
    if (x->loop_hash == -1)
        goto out_pyerr;
    x->base_ctx = PyContext_CopyCurrent();
    if (x->base_ctx == NULL)
        goto out_pyerr;
    x->create_future = PyObject_GetAttrString(x->loop, "create_future");
    if (x->create_future == NULL)
        goto out_pyerr;
    return 0;

out_pyerr:
    sl_py_log_exception("ASGI: cannot set up the event loop");
    return -1;
}

int sl_asgi_loop_startup(sl_asgi_t *x)
{
    if (sl_asgi_lifespan_startup(
            x->loop, x->app, sl_pump_options(x->p)->lifespan, &x->state) < 0)
        return -1;
    if (x->state != NULL && sl_asgi_scope_state() < 0) {
        sl_py_log_exception("ASGI: cannot set up the scopes' state");
        return -1;
    }
    return 0;
}

void sl_asgi_loop_shutdown(sl_asgi_t *x)
{
    PyObject *tasks = PyList_New(0);
    sl_asgi_req_t *r;

    x->stopping = true;
    for (r = x->live; r != NULL && tasks != NULL; r = r->next) {
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
        sl_asgi_carrier_end_idle(x, tasks);
        if (sl_asgi_lifespan_cancel(x->loop, tasks, SL_ASGI_CANCEL_SECS) > 0)
            sl_warn("ASGI: request tasks ignored their cancellation");
        Py_DECREF(tasks);
    }
    sl_asgi_lifespan_shutdown(x->loop, x->budget);
}

/* What is left of --graceful-timeout (the supervisor kills after it),
 * within LIFESPAN_BUDGET. */
double sl_asgi_shutdown_budget(sl_pump_t *p)
{
    double left = LIFESPAN_BUDGET;

    ev_tstamp since;

    if (sl_pump_draining_since(p, &since)) {
        left = since + sl_pump_options(p)->graceful_timeout + 0.8 - ev_time();
        if (left > LIFESPAN_BUDGET)
            left = LIFESPAN_BUDGET;
        if (left < 0.5)
            left = 0.5;
    }
    return left;
}

int sl_asgi_start(sl_pump_t *p)
{
    return sl_pump_exec(p)->start(p);
}

int sl_asgi_adopt(sl_pump_t *p, void *app)
{
    return sl_asgi_init(app, p);
}

int sl_asgi_started(sl_pump_t *p, int rc)
{
    sl_asgi_of(p)->started = rc == 0;
    return rc;
}

void sl_asgi_describe(sl_pump_t *p, char *buf, size_t n)
{
    snprintf(buf, n, "ASGI on %s, %s mode", sl_asgi_loop_name(p),
             sl_pump_exec(p)->name);
}

const char *sl_asgi_loop_name(const sl_pump_t *p)
{
    const sl_asgi_t *x = sl_asgi_of(p);

    return x->loop_name ? x->loop_name : "?";
}

static int init_asyncio(sl_asgi_t *x)
{
    PyObject *asyncio = PyImport_ImportModule("asyncio");

    if (asyncio == NULL)
        return -1;
    x->task_type = PyObject_GetAttrString(asyncio, "Task");
    x->cancelled_error = PyObject_GetAttrString(asyncio, "CancelledError");
    Py_DECREF(asyncio);
    /* a name of our own: asyncio's default ("Task-%d") is a printf per
     * Task, a sixth of what making one costs */
    x->kw_task = Py_BuildValue("(sss)", "loop", "context", "name");
    if (x->task_type == NULL || x->cancelled_error == NULL ||
        x->kw_task == NULL)
        return -1;
    return 0;
}

int sl_asgi_init(PyObject *app, sl_pump_t *p)
{
    sl_asgi_t *x = sl_asgi_of(p);

    x->p = p;
    x->app = Py_NewRef(app);
    x->slots = calloc(sl_pump_exch_max(p), sizeof(*x->slots));
    if (x->slots == NULL) {
        sl_error("out of memory for %u connections", sl_pump_exch_max(p));
        return -1;
    }
    if (sl_asgi_done_init() < 0 || sl_asgi_names_init() < 0 ||
        init_asyncio(x) < 0 || sl_asgi_req_init() < 0 ||
        sl_asgi_carrier_init() < 0 || sl_asgi_task_init() < 0 ||
        sl_asgi_channel_init() < 0 || sl_asgi_ws_init() < 0 ||
        sl_asgi_scope_init(p) < 0)
        goto out_fail;
    x->empty = PyBytes_FromStringAndSize(NULL, 0);
    x->empty_tuple = PyTuple_New(0);
    if (x->empty == NULL || x->empty_tuple == NULL)
        goto out_fail;
    return 0;

out_fail:
    sl_py_log_exception("cannot set up ASGI");
    return -1;
}
