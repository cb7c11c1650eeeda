/* asgi_channel.c - ASGI's http scope: the messages of one HTTP request.
 *
 * The http kind of request (sl_asgi_http, which a request picks when it is
 * made): receive()'s http.request and http.disconnect, send()'s
 * http.response.start, body, trailers and pathsend (the hub's one
 * dispatch by message type calls them), and what the app's end means for
 * the response. The waits and the body's credit are asgi_io.c's.
 */
#include "config.h"

#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "worker/python/asgi_done.h"
#include "worker/python/asgi_internal.h"
#include "worker/python/asgi_scope.h"
#include "worker/python/py.h"
#include "worker/python/writer.h"

#define BODY_MSG_MAX   (256 * 1024) /* a sized body message, at most */
#define BODY_MSG_CHUNK (64 * 1024)  /* a chunked body message, at most */

/* ------------------------------------------------------------------ */
/* small helpers                                                      */

static PyObject *disconnect_msg(sl_asgi_req_t *r)
{
    PyObject *m = PyDict_New();

    (void)r;
    if (m != NULL && PyDict_SetItem(m, sl_asgi_names[N_TYPE],
                                    sl_asgi_names[N_HTTP_DISCONNECT]) < 0)
        Py_CLEAR(m);
    return m;
}

/* {"type": "http.request", "body": b"", "more_body": False}, copied for
 * each message: a copy is one allocation, three inserts into a new dict
 * are more, and a request without a body needs nothing else. */
static PyObject *request_proto;

/* {"type": "http.request", "body": BODY, "more_body": MORE}; steals BODY. */
static PyObject *request_msg(PyObject *body, bool more)
{
    PyObject *m = PyDict_Copy(request_proto);

    if (m != NULL &&
        ((PyBytes_GET_SIZE(body) > 0 &&
          PyDict_SetItem(m, sl_asgi_names[N_BODY], body) < 0) ||
         (more && PyDict_SetItem(m, sl_asgi_names[N_MORE_BODY], Py_True) < 0)))
        Py_CLEAR(m);
    Py_DECREF(body);
    return m;
}

/* An error in what the app sent: the exception stays set for the app to
 * see, the connection gets a 500 or is closed. Returns NULL. */
static PyObject *proto_error(sl_asgi_req_t *r)
{
    PyObject *t, *v, *tb;

    PyErr_Fetch(&t, &v, &tb);
    sl_asgi_io_fail(r, 500);
    PyErr_Restore(t, v, tb);
    return NULL;
}

static PyObject *proto_fail(sl_asgi_req_t *r, PyObject *exc, const char *fmt,
                            ...)
{
    va_list ap;

    va_start(ap, fmt);
    PyErr_FormatV(exc, fmt, ap);
    va_end(ap);
    return proto_error(r);
}

/* ------------------------------------------------------------------ */
/* receive()                                                          */

/* The next body message if bytes (or the end) are there; NULL without an
 * exception when they must be waited for or the client left. */
static PyObject *read_body(sl_asgi_req_t *r)
{
    const sl_req_t *q = &r->ex->req; /* read-only until END */
    size_t want, have = 0;
    PyObject *b;
    bool end = false;
    long n;

    if (!q->has_body) {
        r->body_done = true;
        Py_INCREF(r->x->empty);
        return request_msg(r->x->empty, false);
    }
    want = q->chunked                    ? BODY_MSG_CHUNK
           : r->body_left < BODY_MSG_MAX ? (size_t)r->body_left
                                         : BODY_MSG_MAX;
    b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(want ? want : 1));
    if (b == NULL)
        return NULL;
    while (have < want) {
        n = sl_exch_read_body(r->ex, r->gen, PyBytes_AS_STRING(b) + have,
                              want - have, false, false);
        if (n > 0) {
            have += (size_t)n;
            continue;
        }
        if (n == 0)
            end = true;
        else if (n == -1)
            r->gone = true;
        break;
    }
    if (!q->chunked) {
        r->body_left -= have;
        end = end || r->body_left == 0;
    }
    if (have == 0 && !end) {
        Py_DECREF(b);
        return NULL;
    }
    if (have != want && _PyBytes_Resize(&b, (Py_ssize_t)have) < 0)
        return NULL;
    if (end)
        r->body_done = true;
    return request_msg(b, !end);
}

/* The next message when it is known now (new reference); NULL without an
 * exception when a WAKE ticket will come (the wait is armed); NULL with
 * one on error. */
static PyObject *recv_try(sl_asgi_req_t *r)
{
    PyObject *m;
    int rc;

    for (;;) {
        if (r->gone || r->w.ended)
            return disconnect_msg(r);
        if (!r->body_done) {
            m = read_body(r);
            if (m != NULL || PyErr_Occurred())
                return m;
            if (r->gone)
                continue;
            rc = sl_exch_await(r->ex, r->gen, SL_AWAIT_BODY);
        } else {
            rc = sl_exch_await(r->ex, r->gen, SL_AWAIT_DISCONNECT);
            if (rc == 0)
                r->gone = true;
        }
        if (rc < 0)
            r->gone = true;
        if (rc == 1) {
            /* inline: the loop must run to see the bytes or the EOF */
            sl_exch_need_loop(r->ex);
            return NULL;
        }
    }
}

/* ------------------------------------------------------------------ */
/* send()                                                             */

PyObject *sl_asgi_http_start(sl_asgi_req_t *r, const sl_asgi_msg_t *m)
{
    PyObject *status, *headers, *seq, *trailers;
    long code;
    int t;

    if (r->state != RS_INIT)
        return proto_fail(r, PyExc_RuntimeError,
                          "ASGI: http.response.start sent twice, or after "
                          "the body began (%s)",
                          r->what);
    status = m->v[N_STATUS];
    if (status == NULL || !PyLong_CheckExact(status))
        return PyErr_Occurred()
                   ? proto_error(r)
                   : proto_fail(r, PyExc_TypeError,
                                "ASGI: http.response.start needs an int "
                                "'status', got %R",
                                status);
    code = PyLong_AsLong(status);
    if (code < 200 || code > 599)
        return proto_fail(r, PyExc_ValueError,
                          "ASGI: http.response.start: status %ld is not a "
                          "final HTTP status (200-599)",
                          code);
    headers = m->v[N_HEADERS];
    if (headers == NULL && PyErr_Occurred())
        return proto_error(r);
    seq = PySequence_Fast(headers ? headers : r->x->empty_tuple,
                          "ASGI: http.response.start: 'headers' must be a "
                          "list of [name, value] pairs");
    if (seq == NULL)
        return proto_error(r);
    if (sl_writer_check_headers(seq, "ASGI: http.response.start") < 0) {
        Py_DECREF(seq);
        return proto_error(r);
    }
    trailers = m->v[N_TRAILERS];
    t = trailers ? PyObject_IsTrue(trailers) : 0;
    if (t < 0 || PyErr_Occurred()) {
        Py_DECREF(seq);
        return proto_error(r);
    }
    r->status = (int)code;
    r->headers = seq;
    r->want_trailers = t;
    r->state = RS_STARTED;
    return sl_asgi_done_none();
}

PyObject *sl_asgi_http_body(sl_asgi_req_t *r, const sl_asgi_msg_t *m)
{
    PyObject *body, *more;
    Py_buffer view;
    int last, rc;

    if (r->state != RS_STARTED && r->state != RS_BODY)
        return proto_fail(
            r, PyExc_RuntimeError, "ASGI: http.response.body %s (%s)",
            r->state == RS_INIT       ? "before http.response.start"
            : r->state == RS_TRAILERS ? "after the last body message"
                                      : "after the response was complete",
            r->what);
    body = m->v[N_BODY];
    more = m->v[N_MORE_BODY];
    if (PyErr_Occurred())
        return proto_error(r);
    if (body == NULL)
        body = r->x->empty;
    if (PyObject_GetBuffer(body, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        return proto_fail(r, PyExc_TypeError,
                          "ASGI: http.response.body: 'body' must be bytes, "
                          "not %s",
                          Py_TYPE(body)->tp_name);
    }
    last = more ? !PyObject_IsTrue(more) : 1;
    if (last > 0 && PyBytes_CheckExact(body) && !r->want_trailers &&
        view.len >= SL_WRITER_LEND_MIN) {
        /* the last part, large: lent to the loop rather than copied */
        if (r->state == RS_STARTED &&
            sl_asgi_io_start_body(r, (long long)view.len) < 0) {
            PyBuffer_Release(&view);
            return proto_error(r);
        }
        rc = sl_writer_lend(&r->w, body);
        if (rc <= 0) {
            PyBuffer_Release(&view);
            if (rc < 0)
                r->gone = true;
            sl_asgi_io_ended(r);
            return sl_asgi_done_none();
        }
    }
    if (last >= 0 && PyBytes_CheckExact(body) && view.len > SL_WRITER_SLICE) {
        /* bytes cannot change while the loop takes them piece by piece */
        PyBuffer_Release(&view);
        if (r->state == RS_STARTED &&
            sl_asgi_io_start_body(r, last && !r->want_trailers
                                         ? (long long)PyBytes_GET_SIZE(body)
                                         : -1) < 0)
            return proto_error(r);
        Py_INCREF(body);
        r->body_rest = body;
        r->body_off = 0;
        r->body_rest_last = last;
        rc = sl_asgi_io_emit_rest(r, false);
        if (rc < 0)
            return proto_error(r);
        return rc > 0 ? sl_asgi_io_wait_credit(r) : sl_asgi_done_none();
    }
    rc = last < 0 ? -1 : sl_asgi_io_emit(r, view.buf, (size_t)view.len, last);
    PyBuffer_Release(&view);
    if (rc < 0)
        return proto_error(r);
    if (rc == 1)
        return sl_asgi_io_wait_credit(r);
    return sl_asgi_done_none();
}

PyObject *sl_asgi_http_trailers(sl_asgi_req_t *r, const sl_asgi_msg_t *m)
{
    PyObject *headers, *more, *seq;
    int more_t;

    if (r->state != RS_TRAILERS)
        return proto_fail(r, PyExc_RuntimeError,
                          "ASGI: http.response.trailers %s (%s)",
                          r->want_trailers ? "before the last body message"
                                           : "without trailers: True in "
                                             "http.response.start",
                          r->what);
    headers = m->v[N_HEADERS];
    more = m->v[N_MORE_TRAILERS];
    if (PyErr_Occurred())
        return proto_error(r);
    seq = PySequence_Fast(headers ? headers : r->x->empty_tuple,
                          "ASGI: http.response.trailers: 'headers' must be "
                          "a list of [name, value] pairs");
    if (seq == NULL)
        return proto_error(r);
    if (sl_writer_check_headers(seq, "ASGI: http.response.trailers") < 0)
        goto out_fail;
    if (r->trailers == NULL && (r->trailers = PyList_New(0)) == NULL)
        goto out_fail;
    if (PyList_SetSlice(r->trailers, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, seq) < 0)
        goto out_fail;
    Py_DECREF(seq);
    more_t = more ? PyObject_IsTrue(more) : 0;
    if (more_t < 0)
        return proto_error(r);
    if (!more_t) {
        if (sl_writer_end(&r->w, r->trailers) < 0 && !PyErr_Occurred())
            r->gone = true;
        sl_asgi_io_ended(r);
        if (PyErr_Occurred())
            return NULL;
    }
    return sl_asgi_done_none();

out_fail:
    Py_DECREF(seq);
    return proto_error(r);
}

/* http.response.pathsend: the head, then the file by sendfile(2). */
PyObject *sl_asgi_http_pathsend(sl_asgi_req_t *r, const sl_asgi_msg_t *m)
{
    PyObject *path, *fs = NULL;
    struct stat st;
    int fd, rc;

    if (r->state != RS_STARTED)
        return proto_fail(r, PyExc_RuntimeError,
                          "ASGI: http.response.pathsend must come right "
                          "after http.response.start (%s)",
                          r->what);
    path = m->v[N_PATH];
    if (path == NULL || !PyUnicode_Check(path))
        return PyErr_Occurred()
                   ? proto_error(r)
                   : proto_fail(r, PyExc_TypeError,
                                "ASGI: http.response.pathsend needs a str "
                                "'path'");
    if (!PyUnicode_FSConverter(path, &fs))
        return proto_error(r);
    fd = open(PyBytes_AS_STRING(fs), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0) {
            close(fd);
            errno = EISDIR;
        }
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
        Py_DECREF(fs);
        return proto_error(r);
    }
    Py_DECREF(fs);
    r->want_trailers = false;
    rc = sl_writer_start(&r->w, r->status, NULL, 0, r->headers,
                         (long long)st.st_size, false);
    Py_CLEAR(r->headers);
    if (rc < 0) {
        close(fd);
        return proto_error(r);
    }
    if (sl_writer_sendfile(&r->w, fd, 0, (uint64_t)st.st_size) < 0)
        r->gone = true;
    sl_asgi_io_ended(r);
    return sl_asgi_done_none();
}

/* ------------------------------------------------------------------ */
/* the app's end                                                      */

static void finish(sl_asgi_req_t *r, bool raised)
{
    PyObject *t, *v, *tb;
    bool quiet;

    if (raised) {
        PyErr_Fetch(&t, &v, &tb);
        PyErr_NormalizeException(&t, &v, &tb);
        /* a cancellation we caused, or one after the client left, is no
         * error of the app's */
        quiet = (r->cancelled || r->gone) &&
                PyErr_GivenExceptionMatches(t, r->x->cancelled_error);
        if (quiet) {
            Py_XDECREF(t);
            Py_XDECREF(v);
            Py_XDECREF(tb);
        } else {
            PyErr_Restore(t, v, tb);
            sl_py_log_exception(r->w.ended ? "error in %s after its response"
                                           : "error handling %s",
                                r->what);
        }
        sl_asgi_io_fail(r, r->cancelled ? 503 : 500);
    } else if (!r->w.ended) {
        /* an app that stops when its client left (Starlette's streaming
         * responses do) did nothing wrong, as under uvicorn */
        if (!r->gone)
            sl_error(r->state == RS_INIT
                         ? "ASGI app returned without starting a response "
                           "to %s"
                         : "ASGI app returned without completing the "
                           "response to %s",
                     r->what);
        sl_asgi_io_fail(r, 500);
    }
}

const sl_asgi_kind_t sl_asgi_http = {
    .kind = SL_ASGI_HTTP,
    .name = "an http",
    .scope = sl_asgi_scope_new,
    .recv_try = recv_try,
    .disconnect = disconnect_msg,
    .error = proto_error,
    .finish = finish,
};

int sl_asgi_channel_init(void)
{
    request_proto = Py_BuildValue(
        "{OOOyOO}", sl_asgi_names[N_TYPE], sl_asgi_names[N_HTTP_REQUEST],
        sl_asgi_names[N_BODY], "", sl_asgi_names[N_MORE_BODY], Py_False);
    return request_proto != NULL ? 0 : -1;
}
