/* wsgi_input.c - wsgi.input in C.
 *
 * Reads go straight to the connection's body buffer: without waiting when
 * bytes are there (the common case, GIL kept), otherwise with the GIL
 * released while the loop thread (pump mode) or the socket (inline mode)
 * delivers more. The request generation is checked on every read, so an
 * input object kept past its request reads nothing of the next one.
 */
#include "config.h"

#include "worker/python/wsgi_input.h"

typedef struct {
    PyObject_HEAD
    sl_exch_t *ex; /* borrowed: exchanges outlive every request */
    uint32_t gen;
} input_t;

static PyTypeObject input_type;

#define READ_ALL_CHUNK 65536

/* Read up to N bytes into DST: count, 0 at the end, -1 with an exception. */
static long input_fill(input_t *in, char *dst, size_t n, bool line)
{
    long rc = sl_exch_read_body(in->ex, in->gen, dst, n, line, false);

    if (rc == -2) {
        Py_BEGIN_ALLOW_THREADS
        rc = sl_exch_read_body(in->ex, in->gen, dst, n, line, true);
        Py_END_ALLOW_THREADS
    }
    if (rc < 0) {
        PyErr_SetString(PyExc_OSError,
                        "request body unavailable: client disconnected or "
                        "request finished");
        return -1;
    }
    return rc;
}

/* Read up to LIMIT bytes (-1: all), stopping after '\n' when LINE. */
static PyObject *input_read_upto(input_t *in, Py_ssize_t limit, bool line)
{
    PyObject *out;
    Py_ssize_t have = 0, cap;
    long n;

    cap = (limit >= 0 && limit < READ_ALL_CHUNK) ? limit : READ_ALL_CHUNK;
    out = PyBytes_FromStringAndSize(NULL, cap);
    if (out == NULL)
        return NULL;
    while (limit < 0 || have < limit) {
        if (have == cap) {
            cap = cap * 2;
            if (limit >= 0 && cap > limit)
                cap = limit;
            if (_PyBytes_Resize(&out, cap) < 0)
                return NULL;
        }
        n = input_fill(in, PyBytes_AS_STRING(out) + have, (size_t)(cap - have),
                       line);
        if (n < 0) {
            Py_DECREF(out);
            return NULL;
        }
        if (n == 0)
            break;
        have += n;
        if (line && PyBytes_AS_STRING(out)[have - 1] == '\n')
            break;
    }
    if (have != cap && _PyBytes_Resize(&out, have) < 0)
        return NULL;
    return out;
}

static int size_arg(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t *n)
{
    *n = -1;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "expected at most 1 argument");
        return -1;
    }
    if (nargs == 1 && args[0] != Py_None) {
        *n = PyNumber_AsSsize_t(args[0], PyExc_OverflowError);
        if (*n == -1 && PyErr_Occurred())
            return -1;
        if (*n < 0)
            *n = -1;
    }
    return 0;
}

static PyObject *input_read(input_t *in, PyObject *const *args,
                            Py_ssize_t nargs)
{
    Py_ssize_t n;

    if (size_arg(args, nargs, &n) < 0)
        return NULL;
    return input_read_upto(in, n, false);
}

static PyObject *input_readline(input_t *in, PyObject *const *args,
                                Py_ssize_t nargs)
{
    Py_ssize_t n;

    if (size_arg(args, nargs, &n) < 0)
        return NULL;
    return input_read_upto(in, n, true);
}

static PyObject *input_readlines(input_t *in, PyObject *const *args,
                                 Py_ssize_t nargs)
{
    Py_ssize_t hint, total = 0;
    PyObject *list, *line;

    if (size_arg(args, nargs, &hint) < 0)
        return NULL;
    list = PyList_New(0);
    if (list == NULL)
        return NULL;
    for (;;) {
        line = input_read_upto(in, -1, true);
        if (line == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        if (PyBytes_GET_SIZE(line) == 0) {
            Py_DECREF(line);
            break;
        }
        total += PyBytes_GET_SIZE(line);
        if (PyList_Append(list, line) < 0) {
            Py_DECREF(line);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(line);
        if (hint > 0 && total >= hint)
            break;
    }
    return list;
}

static PyObject *input_iternext(input_t *in)
{
    PyObject *line = input_read_upto(in, -1, true);

    if (line != NULL && PyBytes_GET_SIZE(line) == 0) {
        Py_DECREF(line);
        return NULL; /* StopIteration */
    }
    return line;
}

static PyMethodDef input_methods[] = {
    {"read", (PyCFunction)(void (*)(void))input_read, METH_FASTCALL,
     "read([size]) -> bytes"},
    {"readline", (PyCFunction)(void (*)(void))input_readline, METH_FASTCALL,
     "readline([size]) -> bytes"},
    {"readlines", (PyCFunction)(void (*)(void))input_readlines, METH_FASTCALL,
     "readlines([hint]) -> list of bytes"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject input_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice.Input",
    .tp_basicsize = sizeof(input_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "wsgi.input: the request body",
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)input_iternext,
    .tp_methods = input_methods,
};

int sl_wsgi_input_init(void)
{
    return PyType_Ready(&input_type);
}

PyObject *sl_wsgi_input_new(sl_exch_t *c, uint32_t gen)
{
    input_t *in = PyObject_New(input_t, &input_type);

    if (in == NULL)
        return NULL;
    in->ex = c;
    in->gen = gen;
    return (PyObject *)in;
}
