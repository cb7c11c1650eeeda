/* asgi_task.c - what current_task() is while an ASGI request runs.
 *
 * A request runs in a carrier's Task (asgi_carrier.c), and carriers are
 * kept from request to request. The app must not see that: what it keeps
 * of its Task (to cancel it later, to key a WeakKeyDictionary, to add a
 * done callback) would reach a later request. So current_task(), for
 * every step of a request, is the request's own task object, made with
 * it: a small stand-in with the Task interface asyncio, TaskGroup,
 * asyncio.timeout() and anyio use (cancel, cancelling, uncancel, done,
 * cancelled, result, exception, done callbacks, name, coroutine, loop).
 * While the request waits in a carrier, cancel() and the counts are the
 * carrier Task's, so cancellation works as asyncio's own; before that
 * (the first step, run at once from C) a cancel() is held and passed on
 * when the request is handed to its carrier, so its next await raises, as
 * in any Task. When the request ends the object is done: cancelling it is
 * refused, its done callbacks run, and it reaches no carrier any more.
 * Attributes set on it stay on it (asgiref's Local, under Django, keeps
 * its storage on the current task); others (_fut_waiter, _must_cancel,
 * get_stack, ...) are read from the carrier Task while it carries the
 * request.
 *
 * It is not an asyncio.Task instance (isinstance() says so), and
 * asyncio.all_tasks() lists the carriers, not these.
 */
#include "config.h"

#include <Python.h>
#include <structmember.h>

#include "common/log.h"
#include "worker/python/asgi_internal.h"
#include "worker/python/py.h"

typedef struct sl_asgi_task {
    PyObject_HEAD
    sl_asgi_t *x;         /* borrowed: the executor's context */
    sl_asgi_req_t *req;   /* borrowed: the request, until it ends */
    PyObject *name;       /* owned: made when asked, or set; or NULL */
    PyObject *callbacks;  /* owned list of (fn, context), or NULL */
    PyObject *cancel_msg; /* owned: a held cancel()'s message, or NULL */
    PyObject *weakrefs;
    PyObject *dict;   /* owned: attributes set on it (asgiref's Local keeps
                         its storage there), or NULL */
    int ncancel;      /* cancel requests, before the request is carried */
    bool must_cancel; /* a cancel() is held for the carrier */
    bool done;
    bool cancelled; /* it ended by its cancellation */
} task_t;

static PyTypeObject task_type;
static sl_py_free_t task_free; /* task objects, untracked */

static PyObject *current_tasks; /* owned: asyncio's _current_tasks dict */
static PyObject *kw_context;    /* owned: ("context",) */
static PyObject *invalid_state; /* owned: asyncio.InvalidStateError */

/* The carrier Task now carrying T's request, or NULL (borrowed). */
static PyObject *carrier_of(task_t *t)
{
    return t->req != NULL ? t->req->task : NULL;
}

/* ------------------------------------------------------------------ */
/* cancellation                                                       */

static PyObject *task_cancel(task_t *t, PyObject *const *args, Py_ssize_t n,
                             PyObject *kw)
{
    PyObject *msg = n > 0 ? args[0] : Py_None, *carrier = carrier_of(t);

    if (kw != NULL && PyTuple_GET_SIZE(kw) == 1 && n == 0)
        msg = args[0];
    else if (n > 1 || (kw != NULL && PyTuple_GET_SIZE(kw) > 0)) {
        PyErr_SetString(PyExc_TypeError, "cancel() takes one msg argument");
        return NULL;
    }
    if (t->done)
        Py_RETURN_FALSE;
    if (carrier != NULL)
        return PyObject_CallMethodOneArg(carrier, sl_asgi_names[N_CANCEL], msg);
    t->ncancel++;
    t->must_cancel = true;
    Py_XSETREF(t->cancel_msg, Py_NewRef(msg));
    Py_RETURN_TRUE;
}

static PyObject *task_cancelling(task_t *t, PyObject *unused)
{
    PyObject *carrier = carrier_of(t);

    (void)unused;
    if (carrier != NULL)
        return PyObject_CallMethodNoArgs(carrier, sl_asgi_names[N_CANCELLING]);
    return PyLong_FromLong(t->ncancel);
}

static PyObject *task_uncancel(task_t *t, PyObject *unused)
{
    PyObject *carrier = carrier_of(t);

    (void)unused;
    if (carrier != NULL)
        return PyObject_CallMethodNoArgs(carrier, sl_asgi_names[N_UNCANCEL]);
    if (t->ncancel > 0)
        t->ncancel--;
    return PyLong_FromLong(t->ncancel);
}

int sl_asgi_task_handed(PyObject *o, PyObject *carrier)
{
    task_t *t = (task_t *)o;
    PyObject *res;
    int i;

    if (!t->must_cancel && t->ncancel == 0)
        return 0;
    /* the held cancel() first, then the count as the app left it */
    res = PyObject_CallMethodOneArg(carrier, sl_asgi_names[N_CANCEL],
                                    t->cancel_msg ? t->cancel_msg : Py_None);
    for (i = 1; res != NULL && i < t->ncancel; i++) {
        Py_DECREF(res);
        res = PyObject_CallMethodNoArgs(carrier, sl_asgi_names[N_CANCEL]);
    }
    if (res != NULL && t->ncancel == 0) {
        Py_DECREF(res);
        res = PyObject_CallMethodNoArgs(carrier, sl_asgi_names[N_UNCANCEL]);
    }
    t->ncancel = 0;
    t->must_cancel = false;
    Py_CLEAR(t->cancel_msg);
    if (res == NULL)
        return -1;
    Py_DECREF(res);
    return 0;
}

/* ------------------------------------------------------------------ */
/* the end, and done callbacks                                        */

static int schedule_callback(task_t *t, PyObject *fn, PyObject *ctx)
{
    PyObject *args[4] = {t->x->loop, fn, (PyObject *)t, ctx};
    PyObject *res = PyObject_VectorcallMethod(sl_asgi_names[N_CALL_SOON], args,
                                              3, kw_context);

    /* call_soon(fn, task, context=ctx) */
    if (res == NULL)
        return -1;
    Py_DECREF(res);
    return 0;
}

void sl_asgi_task_finish(PyObject *o, bool cancelled)
{
    task_t *t = (task_t *)o;
    PyObject *cbs = t->callbacks;
    Py_ssize_t i;

    if (t->done)
        return;
    t->done = true;
    t->cancelled = cancelled;
    t->req = NULL;
    t->callbacks = NULL;
    Py_CLEAR(t->cancel_msg);
    if (cbs == NULL)
        return;
    for (i = 0; i < PyList_GET_SIZE(cbs); i++) {
        PyObject *pair = PyList_GET_ITEM(cbs, i);
        if (schedule_callback(t, PyTuple_GET_ITEM(pair, 0),
                              PyTuple_GET_ITEM(pair, 1)) < 0)
            sl_py_log_exception("ASGI: scheduling a task's done callback");
    }
    Py_DECREF(cbs);
}

static PyObject *task_add_done_callback(task_t *t, PyObject *const *args,
                                        Py_ssize_t n, PyObject *kw)
{
    PyObject *ctx = NULL, *pair;
    int rc;

    if (n != 1 || (kw != NULL && PyTuple_GET_SIZE(kw) > 1)) {
        PyErr_SetString(PyExc_TypeError,
                        "add_done_callback(fn, *, context=None)");
        return NULL;
    }
    if (kw != NULL && PyTuple_GET_SIZE(kw) == 1)
        ctx = args[1];
    ctx = ctx != NULL && ctx != Py_None ? Py_NewRef(ctx)
                                        : PyContext_CopyCurrent();
    if (ctx == NULL)
        return NULL;
    if (t->done) {
        rc = schedule_callback(t, args[0], ctx);
        Py_DECREF(ctx);
        if (rc < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    if (t->callbacks == NULL && (t->callbacks = PyList_New(0)) == NULL) {
        Py_DECREF(ctx);
        return NULL;
    }
    pair = PyTuple_Pack(2, args[0], ctx);
    Py_DECREF(ctx);
    if (pair == NULL)
        return NULL;
    rc = PyList_Append(t->callbacks, pair);
    Py_DECREF(pair);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *task_remove_done_callback(task_t *t, PyObject *fn)
{
    Py_ssize_t i, removed = 0;
    int eq;

    for (i = 0; t->callbacks != NULL && i < PyList_GET_SIZE(t->callbacks);) {
        PyObject *cb = PyTuple_GET_ITEM(PyList_GET_ITEM(t->callbacks, i), 0);
        eq = PyObject_RichCompareBool(cb, fn, Py_EQ);
        if (eq < 0)
            return NULL;
        if (eq && PySequence_DelItem(t->callbacks, i) == 0)
            removed++;
        else
            i++;
    }
    return PyLong_FromSsize_t(removed);
}

/* ------------------------------------------------------------------ */
/* the rest of the interface                                          */

static PyObject *task_done(task_t *t, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(t->done);
}

static PyObject *task_cancelled(task_t *t, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(t->done && t->cancelled);
}

/* result() and exception() alike: None once done (the app's return value
 * is None; its exceptions went to the error log), raising before that or
 * after a cancellation. */
static PyObject *task_outcome(task_t *t, const char *unset)
{
    if (!t->done) {
        PyErr_SetString(invalid_state, unset);
        return NULL;
    }
    if (t->cancelled) {
        PyErr_SetNone(t->x->cancelled_error);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *task_result(task_t *t, PyObject *unused)
{
    (void)unused;
    return task_outcome(t, "Result is not set.");
}

static PyObject *task_exception(task_t *t, PyObject *unused)
{
    (void)unused;
    return task_outcome(t, "Exception is not set.");
}

static PyObject *task_get_name(task_t *t, PyObject *unused)
{
    (void)unused;
    if (t->name == NULL && t->req != NULL)
        t->name = PyUnicode_DecodeLatin1(t->req->what,
                                         (Py_ssize_t)t->req->what_len, NULL);
    return t->name ? Py_NewRef(t->name) : PyUnicode_FromString("ASGI request");
}

PyObject *sl_asgi_task_name(PyObject *task)
{
    return task_get_name((task_t *)task, NULL);
}

static PyObject *task_set_name(task_t *t, PyObject *v)
{
    PyObject *s = PyObject_Str(v);

    if (s == NULL)
        return NULL;
    Py_XSETREF(t->name, s);
    Py_RETURN_NONE;
}

static PyObject *task_get_coro(task_t *t, PyObject *unused)
{
    (void)unused;
    if (t->req != NULL && t->req->coro != NULL)
        return Py_NewRef(t->req->coro);
    Py_RETURN_NONE;
}

static PyObject *task_get_loop(task_t *t, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(t->x->loop);
}

/* Unknown attributes are the carrier Task's while it carries the request
 * (_fut_waiter, _must_cancel, get_stack(), ...); before, the two anyio
 * reads have their plain answers. */
static PyObject *task_getattro(task_t *t, PyObject *name)
{
    PyObject *v = PyObject_GenericGetAttr((PyObject *)t, name), *carrier;

    if (v != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError))
        return v;
    carrier = carrier_of(t);
    if (carrier != NULL) {
        PyErr_Clear();
        return PyObject_GetAttr(carrier, name);
    }
    if (PyUnicode_CompareWithASCIIString(name, "_fut_waiter") == 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (PyUnicode_CompareWithASCIIString(name, "_must_cancel") == 0) {
        PyErr_Clear();
        return PyBool_FromLong(t->must_cancel);
    }
    return NULL;
}

static PyObject *task_repr(task_t *t)
{
    PyObject *name = task_get_name(t, NULL), *r;

    if (name == NULL)
        return NULL;
    r = PyUnicode_FromFormat("<sluice request task %R %s>", name,
                             !t->done       ? "pending"
                             : t->cancelled ? "cancelled"
                                            : "finished");
    Py_DECREF(name);
    return r;
}

static int task_traverse(task_t *t, visitproc visit, void *arg)
{
    Py_VISIT(t->name);
    Py_VISIT(t->callbacks);
    Py_VISIT(t->cancel_msg);
    Py_VISIT(t->dict);
    return 0;
}

static int task_clear(task_t *t)
{
    Py_CLEAR(t->name);
    Py_CLEAR(t->callbacks);
    Py_CLEAR(t->cancel_msg);
    Py_CLEAR(t->dict);
    return 0;
}

static void task_dealloc(task_t *t)
{
    PyObject_GC_UnTrack(t);
    if (t->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)t);
    task_clear(t);
    if (!sl_py_free_push(&task_free, (PyObject *)t))
        PyObject_GC_Del(t);
}

static PyMethodDef task_methods[] = {
    {"cancel", (PyCFunction)(void (*)(void))task_cancel,
     METH_FASTCALL | METH_KEYWORDS, NULL},
    {"cancelling", (PyCFunction)task_cancelling, METH_NOARGS, NULL},
    {"uncancel", (PyCFunction)task_uncancel, METH_NOARGS, NULL},
    {"done", (PyCFunction)task_done, METH_NOARGS, NULL},
    {"cancelled", (PyCFunction)task_cancelled, METH_NOARGS, NULL},
    {"result", (PyCFunction)task_result, METH_NOARGS, NULL},
    {"exception", (PyCFunction)task_exception, METH_NOARGS, NULL},
    {"add_done_callback", (PyCFunction)(void (*)(void))task_add_done_callback,
     METH_FASTCALL | METH_KEYWORDS, NULL},
    {"remove_done_callback", (PyCFunction)task_remove_done_callback, METH_O,
     NULL},
    {"get_name", (PyCFunction)task_get_name, METH_NOARGS, NULL},
    {"set_name", (PyCFunction)task_set_name, METH_O, NULL},
    {"get_coro", (PyCFunction)task_get_coro, METH_NOARGS, NULL},
    {"get_loop", (PyCFunction)task_get_loop, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject task_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice.RequestTask",
    .tp_basicsize = sizeof(task_t),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "current_task() of an ASGI request: its own, for its life",
    .tp_dealloc = (destructor)task_dealloc,
    .tp_traverse = (traverseproc)task_traverse,
    .tp_clear = (inquiry)task_clear,
    .tp_dictoffset = offsetof(task_t, dict),
    .tp_repr = (reprfunc)task_repr,
    .tp_getattro = (getattrofunc)task_getattro,
    .tp_weaklistoffset = offsetof(task_t, weakrefs),
    .tp_methods = task_methods,
};

int sl_asgi_task_enter(sl_asgi_t *x, PyObject *task, PyObject **prev)
{
    Py_hash_t h = x->loop_hash;

    *prev = NULL;
    if (x->task_stale) {
        /* what the batch's last step left, which stands for none */
        if (_PyDict_SetItem_KnownHash(current_tasks, x->loop, task, h) < 0)
            return -1;
        x->task_stale = false;
        return 0;
    }
    *prev = _PyDict_GetItem_KnownHash(current_tasks, x->loop, h);
    if (*prev == NULL && PyErr_Occurred())
        return -1;
    Py_XINCREF(*prev);
    if (_PyDict_SetItem_KnownHash(current_tasks, x->loop, task, h) < 0) {
        Py_CLEAR(*prev);
        return -1;
    }
    return 0;
}

/* Take LOOP's entry out: no task is current. */
static void task_unset(sl_asgi_t *x)
{
    if (_PyDict_DelItem_KnownHash(current_tasks, x->loop, x->loop_hash) < 0)
        sl_py_log_exception("ASGI: restoring the current task");
}

void sl_asgi_task_leave(sl_asgi_t *x, PyObject *prev)
{
    if (prev != NULL) {
        if (_PyDict_SetItem_KnownHash(current_tasks, x->loop, prev,
                                      x->loop_hash) < 0)
            sl_py_log_exception("ASGI: restoring the current task");
        Py_DECREF(prev);
    } else if (x->task_batch > 0) {
        x->task_stale = true; /* the batch's end, or its next step */
    } else {
        task_unset(x);
    }
}

void sl_asgi_task_batch(sl_asgi_t *x, bool on)
{
    x->task_batch += on ? 1 : -1;
    if (x->task_batch == 0 && x->task_stale) {
        x->task_stale = false;
        task_unset(x);
    }
}

PyObject *sl_asgi_task_new(sl_asgi_req_t *r)
{
    task_t *t = (task_t *)sl_py_free_pop(&task_free, &task_type);

    if (t == NULL)
        t = PyObject_GC_New(task_t, &task_type);
    if (t == NULL)
        return NULL;
    memset((char *)t + sizeof(PyObject), 0, sizeof(*t) - sizeof(PyObject));
    t->x = r->x;
    t->req = r;
    PyObject_GC_Track(t);
    return (PyObject *)t;
}

int sl_asgi_task_init(void)
{
    PyObject *mod;

    if (PyType_Ready(&task_type) < 0)
        return -1;
    mod = PyImport_ImportModule("asyncio");
    if (mod == NULL)
        return -1;
    invalid_state = PyObject_GetAttrString(mod, "InvalidStateError");
    Py_DECREF(mod);
    /* what asyncio.current_task() reads: CPython 3.11's tasks module and
     * its C Task step share this one dict */
    mod = PyImport_ImportModule("asyncio.tasks");
    if (mod == NULL)
        return -1;
    current_tasks = PyObject_GetAttrString(mod, "_current_tasks");
    Py_DECREF(mod);
    if (current_tasks != NULL && !PyDict_Check(current_tasks)) {
        PyErr_SetString(PyExc_TypeError,
                        "asyncio.tasks._current_tasks is not a dict");
        return -1;
    }
    kw_context = Py_BuildValue("(s)", "context");
    if (invalid_state == NULL || current_tasks == NULL || kw_context == NULL)
        return -1;
    return 0;
}
