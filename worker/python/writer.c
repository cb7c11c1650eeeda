/* writer.c - a response the app gave as Python objects, onto the wire.
 *
 * The framing rules live in the loop side's response.c and know nothing of
 * Python; this file turns header lists (ASGI's [bytes, bytes] pairs) into
 * calls on them, and turns a broken list into the exception the app sees.
 */
#include "config.h"

#include <Python.h>

#include "worker/loop/response.h"
#include "worker/python/writer.h"

/* The pair at HEADERS[I] as name and value bytes; -1 with an exception. */
static int pair_at(PyObject *headers, Py_ssize_t i, PyObject **name,
                   PyObject **value, const char *what)
{
    PyObject *t = PySequence_Fast_GET_ITEM(headers, i);

    if ((!PyTuple_Check(t) && !PyList_Check(t)) ||
        PySequence_Fast_GET_SIZE(t) != 2) {
        PyErr_Format(PyExc_TypeError,
                     "%s: each header must be a [name, value] pair of "
                     "bytes, got %R",
                     what, t);
        return -1;
    }
    *name = PySequence_Fast_GET_ITEM(t, 0);
    *value = PySequence_Fast_GET_ITEM(t, 1);
    if (!PyBytes_Check(*name) || !PyBytes_Check(*value)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: header names and values must be bytes, got %R", what,
                     t);
        return -1;
    }
    return 0;
}

int sl_writer_check_headers(PyObject *headers, const char *what)
{
    Py_ssize_t i, n = PySequence_Fast_GET_SIZE(headers);
    PyObject *name, *value;

    for (i = 0; i < n; i++) {
        if (pair_at(headers, i, &name, &value, what) < 0)
            return -1;
        if (sl_response_bad_name(PyBytes_AS_STRING(name),
                                 (size_t)PyBytes_GET_SIZE(name)) ||
            sl_response_bad_bytes(PyBytes_AS_STRING(value),
                                  (size_t)PyBytes_GET_SIZE(value))) {
            PyErr_Format(PyExc_ValueError,
                         "%s: invalid header %R: a name must be a token and "
                         "neither may hold CR, LF or NUL",
                         what, PySequence_Fast_GET_ITEM(headers, i));
            return -1;
        }
    }
    return 0;
}

int sl_writer_head(sl_response_t *rs, sl_buf_t *b, const sl_req_t *req,
                   int status, PyObject *headers, long long known,
                   bool trailers, bool close)
{
    Py_ssize_t i, n = PySequence_Fast_GET_SIZE(headers);
    PyObject *name, *value;

    sl_response_begin(rs, b, req, status);
    sl_response_status_line(b, status);
    for (i = 0; i < n; i++) {
        if (pair_at(headers, i, &name, &value, "http.response.start") < 0)
            return -1;
        if (sl_response_field(rs, b, PyBytes_AS_STRING(name),
                              (size_t)PyBytes_GET_SIZE(name),
                              PyBytes_AS_STRING(value),
                              (size_t)PyBytes_GET_SIZE(value)) < 0) {
            PyErr_Format(PyExc_ValueError,
                         "http.response.start: bad content-length %R", value);
            return -1;
        }
    }
    sl_response_end(rs, b, req, known, trailers, close);
    return 0;
}

int sl_writer_trailers(sl_buf_t *b, PyObject *headers)
{
    Py_ssize_t i, n;
    PyObject *name, *value;

    b->len = b->off = 0;
    SL_BUF_APPEND_LIT(b, "0\r\n");
    n = headers != NULL ? PySequence_Fast_GET_SIZE(headers) : 0;
    for (i = 0; i < n; i++) {
        if (pair_at(headers, i, &name, &value, "http.response.trailers") < 0)
            return -1;
        sl_buf_append(b, PyBytes_AS_STRING(name),
                      (size_t)PyBytes_GET_SIZE(name));
        SL_BUF_APPEND_LIT(b, ": ");
        sl_buf_append(b, PyBytes_AS_STRING(value),
                      (size_t)PyBytes_GET_SIZE(value));
        SL_BUF_APPEND_LIT(b, "\r\n");
    }
    return SL_BUF_APPEND_LIT(b, "\r\n");
}
