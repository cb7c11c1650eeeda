/* wsgi_objects.c - the callables and types a WSGI app is handed:
 * start_response, write() and wsgi.file_wrapper.
 *
 * A lane keeps one start_response and one write() for request after
 * request (no allocation per request); one the app kept past its request
 * is cut loose (its calls then raise) so it can never write into a later
 * request, and the lane takes a new one. A file wrapper over a regular
 * file is sent by sendfile(2) (wsgi.c); any other iterates in blocks.
 */
#include "config.h"

#include <Python.h>

#include "worker/python/wsgi_internal.h"

typedef struct {
    PyObject_HEAD
    sl_wsgi_lane_t *lane; /* borrowed: lanes outlive their callables */
} lane_fn_t;

/* ------------------------------------------------------------------ */
/* wsgi.file_wrapper                                                  */

static PyObject *fw_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"filelike", "blksize", NULL};
    PyObject *filelike;
    Py_ssize_t blksize = 8192;
    sl_wsgi_file_t *fw;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|n", kwlist, &filelike,
                                     &blksize))
        return NULL;
    fw = (sl_wsgi_file_t *)type->tp_alloc(type, 0);
    if (fw == NULL)
        return NULL;
    Py_INCREF(filelike);
    fw->filelike = filelike;
    fw->blksize = blksize > 0 ? blksize : 8192;
    return (PyObject *)fw;
}

static void fw_dealloc(sl_wsgi_file_t *fw)
{
    Py_XDECREF(fw->filelike);
    Py_TYPE(fw)->tp_free((PyObject *)fw);
}

static PyObject *fw_iternext(sl_wsgi_file_t *fw)
{
    PyObject *data =
        PyObject_CallMethod(fw->filelike, "read", "n", fw->blksize);

    if (data != NULL && PyBytes_Check(data) && PyBytes_GET_SIZE(data) == 0) {
        Py_DECREF(data);
        return NULL;
    }
    return data;
}

static PyObject *fw_close(sl_wsgi_file_t *fw, PyObject *unused)
{
    (void)unused;
    if (PyObject_HasAttrString(fw->filelike, "close"))
        return PyObject_CallMethod(fw->filelike, "close", NULL);
    Py_RETURN_NONE;
}

static PyMethodDef fw_methods[] = {
    {"close", (PyCFunction)fw_close, METH_NOARGS, "close the file"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject sl_wsgi_file_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice.FileWrapper",
    .tp_basicsize = sizeof(sl_wsgi_file_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "wsgi.file_wrapper: sent with sendfile(2) when it can be",
    .tp_new = fw_new,
    .tp_dealloc = (destructor)fw_dealloc,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)fw_iternext,
    .tp_methods = fw_methods,
};

/* ------------------------------------------------------------------ */
/* start_response and write                                           */

static PyObject *start_response_call(lane_fn_t *self, PyObject *args,
                                     PyObject *kw)
{
    static char *kwlist[] = {"status", "headers", "exc_info", NULL};
    sl_wsgi_lane_t *l = self->lane;
    PyObject *status, *headers, *exc_info = Py_None;
    Py_ssize_t i, n;

    if (l == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "start_response() called after its request ended");
        return NULL;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O:start_response", kwlist,
                                     &status, &headers, &exc_info))
        return NULL;
    if (exc_info != Py_None) {
        if (l->w.sent) {
            /* too late to change the head: re-raise the app's error */
            PyObject *t, *v, *tb;
            if (!PyTuple_Check(exc_info) || PyTuple_GET_SIZE(exc_info) != 3) {
                PyErr_SetString(PyExc_TypeError, "exc_info must be a 3-tuple");
                return NULL;
            }
            t = PyTuple_GET_ITEM(exc_info, 0);
            v = PyTuple_GET_ITEM(exc_info, 1);
            tb = PyTuple_GET_ITEM(exc_info, 2);
            Py_INCREF(t);
            Py_INCREF(v);
            Py_INCREF(tb);
            PyErr_Restore(t, v, tb == Py_None ? NULL : tb);
            return NULL;
        }
    } else if (l->status != NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "start_response() called a second time without "
                        "exc_info");
        return NULL;
    }
    if (!PyUnicode_Check(status)) {
        PyErr_Format(PyExc_TypeError, "status must be str, not %s",
                     Py_TYPE(status)->tp_name);
        return NULL;
    }
    if (!PyList_Check(headers)) {
        PyErr_Format(PyExc_TypeError, "headers must be a list, not %s",
                     Py_TYPE(headers)->tp_name);
        return NULL;
    }
    n = PyList_GET_SIZE(headers);
    for (i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(headers, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2 ||
            !PyUnicode_Check(PyTuple_GET_ITEM(t, 0)) ||
            !PyUnicode_Check(PyTuple_GET_ITEM(t, 1))) {
            PyErr_Format(PyExc_TypeError,
                         "headers must be (str, str) tuples, got %R", t);
            return NULL;
        }
    }
    Py_INCREF(status);
    Py_XSETREF(l->status, status);
    Py_INCREF(headers);
    Py_XSETREF(l->headers, headers);
    Py_INCREF(l->write);
    return l->write;
}

static PyObject *write_call(lane_fn_t *self, PyObject *args, PyObject *kw)
{
    sl_wsgi_lane_t *l = self->lane;
    PyObject *data;

    if (l == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "write() called after its request ended");
        return NULL;
    }
    if (kw != NULL || !PyArg_ParseTuple(args, "O:write", &data))
        return NULL;
    if (!PyBytes_Check(data)) {
        PyErr_Format(PyExc_TypeError, "write() argument must be bytes, not %s",
                     Py_TYPE(data)->tp_name);
        return NULL;
    }
    if (l->status == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "write() before start_response()");
        return NULL;
    }
    if (!l->w.started && sl_wsgi_head(l, -1) < 0)
        return NULL;
    if (sl_wsgi_emit(l, PyBytes_AS_STRING(data), (size_t)PyBytes_GET_SIZE(data),
                     false) < 0) {
        PyErr_SetString(PyExc_OSError, "client disconnected");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyTypeObject start_response_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice.StartResponse",
    .tp_basicsize = sizeof(lane_fn_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_call = (ternaryfunc)start_response_call,
};

static PyTypeObject write_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice.Write",
    .tp_basicsize = sizeof(lane_fn_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_call = (ternaryfunc)write_call,
};

/* ------------------------------------------------------------------ */
/* a lane's callables                                                 */

/* The lane's start_response and write() serve one request after another;
 * one the app kept past its request is cut loose (its calls then raise) so
 * it can never write into a later request, and the lane takes a new one. */
static void renew_if_kept(PyObject **slot, PyTypeObject *type,
                          sl_wsgi_lane_t *l)
{
    lane_fn_t *fresh;

    if (Py_REFCNT(*slot) == 1)
        return;
    fresh = PyObject_New(lane_fn_t, type);
    if (fresh == NULL) {
        PyErr_Clear();
        return; /* keep the old one: still correct for honest apps */
    }
    fresh->lane = l;
    ((lane_fn_t *)*slot)->lane = NULL;
    Py_SETREF(*slot, (PyObject *)fresh);
}

void sl_wsgi_objects_renew(sl_wsgi_lane_t *l)
{
    renew_if_kept(&l->start_resp, &start_response_type, l);
    renew_if_kept(&l->write, &write_type, l);
}

int sl_wsgi_objects_new(sl_wsgi_lane_t *l)
{
    lane_fn_t *sr = PyObject_New(lane_fn_t, &start_response_type);
    lane_fn_t *wr = PyObject_New(lane_fn_t, &write_type);

    if (sr == NULL || wr == NULL) {
        Py_XDECREF(sr);
        Py_XDECREF(wr);
        return -1;
    }
    sr->lane = l;
    wr->lane = l;
    l->start_resp = (PyObject *)sr;
    l->write = (PyObject *)wr;
    return 0;
}

int sl_wsgi_objects_init(void)
{
    return PyType_Ready(&sl_wsgi_file_type) < 0 ||
                   PyType_Ready(&start_response_type) < 0 ||
                   PyType_Ready(&write_type) < 0
               ? -1
               : 0;
}
