/* asgi_done.c - an awaitable that is already complete.
 *
 * `await d` returns d's value at once: its am_send answers PYGEN_RETURN, so
 * the awaiting coroutine goes on without ever yielding to the event loop.
 * ASGI's receive() and send() hand one out whenever their answer is known
 * (the body is there, the credit allows the write), which is how a request
 * that never truly waits costs no Future and no loop iteration.
 */
#include "config.h"

#include <Python.h>

#include "worker/python/asgi_done.h"
#include "worker/python/freelist.h"

/* An awaitable that is already complete: `await` returns VALUE at once. */
typedef struct {
    PyObject_HEAD
    PyObject *value; /* owned */
} done_t;

static PyTypeObject done_type;
static PyObject *done_none; /* owned: the completed awaitable of None */
static sl_py_free_t done_free;

PyObject *sl_asgi_done_new(PyObject *value)
{
    done_t *d;

    if (value == NULL)
        return NULL;
    if (value == Py_None) {
        Py_DECREF(value);
        return sl_asgi_done_none();
    }
    d = (done_t *)sl_py_free_pop(&done_free, &done_type);
    if (d == NULL)
        d = PyObject_New(done_t, &done_type);
    if (d == NULL) {
        Py_DECREF(value);
        return NULL;
    }
    d->value = value;
    return (PyObject *)d;
}

static void done_dealloc(done_t *d)
{
    Py_XDECREF(d->value);
    if (!sl_py_free_push(&done_free, (PyObject *)d))
        PyObject_Free(d);
}

static PyObject *done_await(done_t *d)
{
    Py_INCREF(d);
    return (PyObject *)d;
}

static PySendResult done_am_send(done_t *d, PyObject *arg, PyObject **result)
{
    (void)arg;
    Py_INCREF(d->value);
    *result = d->value;
    return PYGEN_RETURN;
}

/* Raise StopIteration(V): a generator's way of returning V. */
static void set_stop_value(PyObject *v)
{
    PyObject *e;

    if (v == Py_None) {
        PyErr_SetNone(PyExc_StopIteration);
        return;
    }
    e = PyObject_CallOneArg(PyExc_StopIteration, v);
    if (e != NULL) {
        PyErr_SetObject(PyExc_StopIteration, e);
        Py_DECREF(e);
    }
}

static PyObject *done_iternext(done_t *d)
{
    if (d->value != Py_None)
        set_stop_value(d->value);
    return NULL;
}

static PyObject *done_send(done_t *d, PyObject *arg)
{
    (void)arg;
    set_stop_value(d->value);
    return NULL;
}

PyObject *sl_asgi_done_raise(PyObject *const *args, Py_ssize_t n)
{
    if (n < 1) {
        PyErr_SetString(PyExc_TypeError, "throw() takes an exception");
        return NULL;
    }
    if (PyExceptionInstance_Check(args[0])) {
        if (n > 1 && args[1] != Py_None)
            PyErr_SetString(PyExc_TypeError,
                            "instance exception may not have a separate "
                            "value");
        else
            PyErr_SetObject((PyObject *)Py_TYPE(args[0]), args[0]);
    } else if (PyExceptionClass_Check(args[0])) {
        PyErr_SetObject(args[0], n > 1 ? args[1] : NULL);
    } else {
        /* PyErr_SetObject() would make it a SystemError */
        PyErr_Format(PyExc_TypeError,
                     "exceptions must be classes or instances deriving "
                     "from BaseException, not %s",
                     Py_TYPE(args[0])->tp_name);
    }
    return NULL;
}

static PyObject *done_throw(done_t *d, PyObject *const *args, Py_ssize_t n)
{
    (void)d;
    return sl_asgi_done_raise(args, n);
}

static PyObject *done_close(done_t *d, PyObject *unused)
{
    (void)d;
    (void)unused;
    Py_RETURN_NONE;
}

static PyMethodDef done_methods[] = {
    {"send", (PyCFunction)done_send, METH_O, NULL},
    {"throw", (PyCFunction)(void (*)(void))done_throw, METH_FASTCALL, NULL},
    {"close", (PyCFunction)done_close, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyAsyncMethods done_async = {
    .am_await = (unaryfunc)done_await,
    .am_send = (sendfunc)done_am_send,
};

static PyTypeObject done_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice.Done",
    .tp_basicsize = sizeof(done_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "the result of an ASGI receive() or send() that needs no wait",
    .tp_dealloc = (destructor)done_dealloc,
    .tp_as_async = &done_async,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)done_iternext,
    .tp_methods = done_methods,
};

int sl_asgi_done_init(void)
{
    done_t *d;

    if (PyType_Ready(&done_type) < 0)
        return -1;
    d = PyObject_New(done_t, &done_type);
    if (d == NULL)
        return -1;
    d->value = Py_NewRef(Py_None);
    done_none = (PyObject *)d;
    return 0;
}

PyObject *sl_asgi_done_none(void)
{
    return Py_NewRef(done_none);
}
