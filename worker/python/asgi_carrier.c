/* asgi_carrier.c - the Tasks that ASGI requests run in.
 *
 * Making an asyncio Task per request is most of what ASGI costs over WSGI
 * on CPython 3.11: Task.__init__ (its first step scheduled through
 * loop.call_soon, a Python WeakSet.add into asyncio's _all_tasks), a loop
 * pass to run that step, then the WeakSet's removal callback when the
 * Task dies; about 10,000 instructions, where the whole of a WSGI request
 * is 12,000. And most requests never need a Task at all: their first step
 * (scope in, response out, every await answered at once) runs to the end.
 *
 * So a request's first step runs at once, from C, on a carrier: a real
 * Task, kept from request to request, whose coroutine is the carrier
 * object below. The request (asgi_request.c, which runs that step and,
 * only if the app waits, takes a carrier and hands the request over) is a
 * coroutine to the carrier: it
 * drives it through PyIter_Send() and its throw() and close(), and calls
 * nothing of the request's file. For that step the request's own task
 * object (asgi_task.c) is made current (asyncio's _current_tasks[loop],
 * what current_task() reads) and the request's own context entered, so
 * current_task(), asyncio.timeout(), TaskGroup, anyio's cancel scopes and
 * contextvars see what a Task of its own would show them. If the step ends
 * the request, no carrier was taken; no Task was made, nothing was
 * scheduled. If the app awaits something not complete, the request goes
 * to an idle carrier (or a new one): the carrier's Task is woken and its
 * next step yields what the app's step yielded; from then on the Task
 * drives the request as any Task drives its coroutine, cancellation
 * included (the request's task object passes cancel() on to it), until the
 * app returns, and the carrier waits for the next request again. Every
 * step of the request runs with the request's task object current, not the
 * carrier's Task.
 *
 * The idle carriers are a stack (in the context). Taking one checks that
 * nobody cancelled its Task meanwhile (asyncio.all_tasks() lists carriers,
 * and whoever cancels one from there): such a carrier is let go, never
 * handed a request. At most IDLE_MAX wait; more end when their request
 * does. At shutdown the idle ones are cancelled and end.
 */
#include "config.h"

#include <Python.h>
#include <string.h>

#include "common/log.h"
#include "worker/python/asgi_done.h"
#include "worker/python/asgi_internal.h"
#include "worker/python/py.h"

#define IDLE_MAX 64 /* idle carriers kept; more end with their request */

typedef struct sl_asgi_carrier {
    PyObject_HEAD
    sl_asgi_t *x;       /* borrowed: the executor's context */
    PyObject *task;     /* owned: the Task running this, until it ends */
    PyObject *waiter;   /* owned: the Future an idle carrier's Task waits
                           on, or NULL (its first step not run yet) */
    sl_asgi_req_t *req; /* owned: the request it carries, or NULL */
    PyObject *pending;  /* owned: what req's first step yielded, until the
                           Task's next step yields it; or NULL */
    struct sl_asgi_carrier *next_idle;
    bool idle; /* on the idle stack, which holds a reference */
} carrier_t;

static PyTypeObject carrier_type;

static PyObject *idle_name; /* owned: "sluice ASGI", an idle Task's name */

/* O.NAME(ARG) (or O.NAME()), its result and any error dropped: for calls
 * whose failure changes nothing the caller could act on. */
static void call_quiet(PyObject *o, int name, PyObject *arg)
{
    PyObject *res = arg ? PyObject_CallMethodOneArg(o, sl_asgi_names[name], arg)
                        : PyObject_CallMethodNoArgs(o, sl_asgi_names[name]);

    if (res == NULL)
        PyErr_Clear();
    Py_XDECREF(res);
}

/* ------------------------------------------------------------------ */
/* the idle stack                                                     */

static void idle_push(carrier_t *k)
{
    Py_INCREF(k);
    k->idle = true;
    k->next_idle = k->x->idle;
    k->x->idle = k;
    k->x->nidle++;
}

/* Take K off the stack; the caller gets the stack's reference. */
static void idle_remove(carrier_t *k)
{
    carrier_t **pp;

    for (pp = &k->x->idle; *pp != NULL; pp = &(*pp)->next_idle)
        if (*pp == k) {
            *pp = k->next_idle;
            break;
        }
    k->idle = false;
    k->next_idle = NULL;
    k->x->nidle--;
}

/* Has anyone asked K's Task to cancel? Then it carries nothing more. */
static bool cancel_asked(carrier_t *k)
{
    /* looked up each time: a bound method kept per carrier would cost
     * every carried request (an idle WebSocket holds its carrier) */
    PyObject *n =
        k->task != NULL
            ? PyObject_CallMethodNoArgs(k->task, sl_asgi_names[N_CANCELLING])
            : NULL;
    long v;

    if (n == NULL) {
        PyErr_Clear();
        return true;
    }
    v = PyLong_AsLong(n);
    Py_DECREF(n);
    if (v == -1 && PyErr_Occurred())
        PyErr_Clear();
    return v != 0;
}

/* The carrier's Task ends (its coroutine returns or raises next). */
static void carrier_end(carrier_t *k)
{
    if (k->idle) {
        idle_remove(k);
        Py_DECREF(k);
    }
    Py_CLEAR(k->waiter);
    Py_CLEAR(k->task); /* the Task holds us: break the cycle */
}

/* ------------------------------------------------------------------ */
/* the carrier: the coroutine of its Task                             */

static void carrier_dealloc(carrier_t *k)
{
    Py_XDECREF(k->task);
    Py_XDECREF(k->waiter);
    Py_XDECREF((PyObject *)k->req);
    Py_XDECREF(k->pending);
    PyObject_Free(k);
}

/* Wait for a request: yield a fresh Future into *RESULT and be idle; or,
 * when enough carriers wait or K's Task was cancelled, end. */
static PySendResult carrier_wait(carrier_t *k, PyObject **result)
{
    PyObject *w;

    if (k->x->stopping || k->task == NULL ||
        (!k->idle && k->x->nidle >= IDLE_MAX) || cancel_asked(k))
        goto out_end;
    w = PyObject_CallNoArgs(k->x->create_future);
    if (w == NULL ||
        PyObject_SetAttr(w, sl_asgi_names[N_FUTURE_BLOCKING], Py_True) < 0) {
        Py_XDECREF(w);
        sl_py_log_exception("ASGI: a carrier Task cannot wait");
        goto out_end;
    }
    Py_XSETREF(k->waiter, Py_NewRef(w));
    if (!k->idle)
        idle_push(k);
    *result = w;
    return PYGEN_NEXT;

out_end:
    carrier_end(k);
    *result = Py_NewRef(Py_None);
    return PYGEN_RETURN;
}

/* K's request is over: let it go and wait for the next. */
static PySendResult carrier_done(carrier_t *k, PyObject **result)
{
    Py_CLEAR(k->req);
    return carrier_wait(k, result);
}

static PySendResult carrier_am_send(carrier_t *k, PyObject *arg,
                                    PyObject **result)
{
    PySendResult st;

    if (k->req == NULL)
        return carrier_wait(k, result);
    if (k->pending != NULL) { /* the Task takes over the request */
        *result = k->pending;
        k->pending = NULL;
        return PYGEN_NEXT;
    }
    st = PyIter_Send((PyObject *)k->req, arg, result);
    if (st == PYGEN_NEXT)
        return st;
    Py_CLEAR(*result);
    return carrier_done(k, result);
}

static PyObject *carrier_iternext(carrier_t *k)
{
    PyObject *res;

    if (carrier_am_send(k, Py_None, &res) == PYGEN_NEXT)
        return res;
    Py_XDECREF(res);
    return NULL;
}

static PyObject *carrier_send_meth(carrier_t *k, PyObject *arg)
{
    PyObject *res;
    PySendResult st = carrier_am_send(k, arg, &res);

    if (st == PYGEN_NEXT)
        return res;
    Py_DECREF(res);
    PyErr_SetNone(PyExc_StopIteration);
    return NULL;
}

/* R's throw(ARGS): what its app yielded, or NULL with StopIteration once
 * the app ended (R ended); with the exception itself when it had ended
 * before. */
static PyObject *req_throw(sl_asgi_req_t *r, PyObject *const *args,
                           Py_ssize_t n)
{
    PyObject *a[4];
    Py_ssize_t i;

    if (n < 1 || n > 3) {
        PyErr_SetString(PyExc_TypeError, "throw() takes 1 to 3 arguments");
        return NULL;
    }
    a[0] = (PyObject *)r;
    for (i = 0; i < n; i++)
        a[i + 1] = args[i];
    return PyObject_VectorcallMethod(sl_asgi_names[N_THROW], a, (size_t)(n + 1),
                                     NULL);
}

/* throw(exc): how a Task delivers cancellation. An idle carrier ends with
 * it; a busy one hands it to its request, as a Task would have. */
static PyObject *carrier_throw(carrier_t *k, PyObject *const *args,
                               Py_ssize_t n)
{
    PyObject *res;

    if (k->req == NULL) {
        carrier_end(k);
        return sl_asgi_done_raise(args, n);
    }
    if (k->pending != NULL) {
        /* cancelled before its Task took the request over: what the app
         * waits on is cancelled with it, as the Task's own waiter is */
        call_quiet(k->pending, N_CANCEL, NULL);
        Py_CLEAR(k->pending);
    }
    res = req_throw(k->req, args, n);
    if (res != NULL)
        return res;
    if (!PyErr_ExceptionMatches(PyExc_StopIteration)) {
        Py_CLEAR(k->req); /* its app had already ended: end too */
        carrier_end(k);
        return NULL;
    }
    PyErr_Clear();
    if (carrier_done(k, &res) == PYGEN_NEXT)
        return res;
    Py_DECREF(res);
    PyErr_SetNone(PyExc_StopIteration);
    return NULL;
}

static PyObject *carrier_close(carrier_t *k, PyObject *unused)
{
    (void)unused;
    Py_CLEAR(k->pending);
    if (k->req != NULL) {
        call_quiet((PyObject *)k->req, N_CLOSE, NULL);
        Py_CLEAR(k->req);
    }
    carrier_end(k);
    Py_RETURN_NONE;
}

/* The rest of the coroutine interface (cr_frame, __qualname__, ...) is the
 * request's app coroutine's, for asyncio's and anyio's introspection. */
static PyObject *carrier_getattro(carrier_t *k, PyObject *name)
{
    PyObject *v = PyObject_GenericGetAttr((PyObject *)k, name);

    if (v != NULL || k->req == NULL || k->req->coro == NULL ||
        !PyErr_ExceptionMatches(PyExc_AttributeError))
        return v;
    PyErr_Clear();
    return PyObject_GetAttr(k->req->coro, name);
}

static PyObject *carrier_repr(carrier_t *k)
{
    if (k->req != NULL)
        return PyObject_Repr((PyObject *)k->req);
    return PyUnicode_FromString("<sluice ASGI carrier, idle>");
}

/* The carrier is its own awaitable (a Task's coroutine never is awaited,
 * but asyncio's checks want am_await). */
static PyObject *self_await(PyObject *o)
{
    return Py_NewRef(o);
}

static PyMethodDef carrier_methods[] = {
    {"send", (PyCFunction)carrier_send_meth, METH_O, NULL},
    {"throw", (PyCFunction)(void (*)(void))carrier_throw, METH_FASTCALL, NULL},
    {"close", (PyCFunction)carrier_close, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyAsyncMethods carrier_async = {
    .am_await = self_await,
    .am_send = (sendfunc)carrier_am_send,
};

static PyTypeObject carrier_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice.ASGICarrier",
    .tp_basicsize = sizeof(carrier_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "the coroutine of a Task that runs ASGI requests",
    .tp_dealloc = (destructor)carrier_dealloc,
    .tp_repr = (reprfunc)carrier_repr,
    .tp_getattro = (getattrofunc)carrier_getattro,
    .tp_as_async = &carrier_async,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)carrier_iternext,
    .tp_methods = carrier_methods,
};

/* ------------------------------------------------------------------ */
/* taking a carrier, running a first step                             */

/* A new carrier and its Task (whose first step, later, finds it either
 * idle or handed a request). A new reference, or NULL with an exception. */
static carrier_t *carrier_new(sl_asgi_t *x)
{
    carrier_t *k = PyObject_New(carrier_t, &carrier_type);
    PyObject *targs[4];

    if (k == NULL)
        return NULL;
    memset((char *)k + sizeof(PyObject), 0, sizeof(*k) - sizeof(PyObject));
    k->x = x;
    targs[0] = (PyObject *)k;
    targs[1] = x->loop;
    targs[2] = PyContext_Copy(x->base_ctx);
    targs[3] = idle_name;
    if (targs[2] == NULL) {
        Py_DECREF(k);
        return NULL;
    }
    k->task = PyObject_Vectorcall(x->task_type, targs, 1, x->kw_task);
    Py_DECREF(targs[2]);
    if (k->task == NULL) {
        Py_DECREF(k);
        return NULL;
    }
    return k;
}

sl_asgi_carrier_t *sl_asgi_carrier_take(sl_asgi_t *x)
{
    carrier_t *k;

    while ((k = x->idle) != NULL) {
        idle_remove(k);
        if (!cancel_asked(k))
            return k;
        /* its Task will throw the cancellation in, and it ends */
        Py_DECREF(k);
    }
    return carrier_new(x);
}

void sl_asgi_carrier_hold(sl_asgi_carrier_t *k, sl_asgi_req_t *r,
                          PyObject *pending)
{
    k->req = (sl_asgi_req_t *)Py_NewRef((PyObject *)r);
    k->pending = pending;
    Py_XSETREF(r->task, Py_NewRef(k->task));
}

void sl_asgi_carrier_put(sl_asgi_carrier_t *k)
{
    PyObject *w;

    if (k->req == NULL) {
        if (k->task != NULL)
            idle_push(k); /* free for the next request */
    } else if ((w = k->waiter) != NULL) {
        /* an idle Task wakes for the request (a new one's first step
         * finds it); this fails only when the app's step cancelled its own
         * Task, which then wakes with the cancellation: for the request,
         * as it should */
        k->waiter = NULL;
        call_quiet(w, N_SET_RESULT, Py_None);
        Py_DECREF(w);
    }
    Py_DECREF(k);
}

void sl_asgi_carrier_end_idle(sl_asgi_t *x, PyObject *tasks)
{
    carrier_t *k;

    while ((k = x->idle) != NULL) {
        idle_remove(k);
        if (k->task != NULL) {
            if (tasks != NULL && PyList_Append(tasks, k->task) < 0)
                PyErr_Clear();
            call_quiet(k->task, N_CANCEL, NULL);
        }
        Py_DECREF(k);
    }
}

/* asyncio.Task takes coroutines only: the carrier registers as one. */
int sl_asgi_carrier_init(void)
{
    PyObject *mod, *abc, *r;

    if (PyType_Ready(&carrier_type) < 0)
        return -1;
    mod = PyImport_ImportModule("collections.abc");
    if (mod == NULL)
        return -1;
    abc = PyObject_GetAttrString(mod, "Coroutine");
    Py_DECREF(mod);
    if (abc == NULL)
        return -1;
    r = PyObject_CallMethod(abc, "register", "O", (PyObject *)&carrier_type);
    Py_DECREF(abc);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    idle_name = PyUnicode_InternFromString("sluice ASGI");
    return idle_name == NULL ? -1 : 0;
}
