/* asgi_channel.c - receive() and send(): an ASGI request's messages.
 *
 * The one idea: an await costs nothing when its answer is already known.
 * receive() and send() are C callables that return a completed awaitable
 * (its am_send answers at once, so `await` never leaves the coroutine)
 * whenever the body bytes are there, the credit allows the write, or the
 * message is an error to raise. Only a real wait creates a loop Future; the
 * pump resolves it with a WAKE ticket once the connection changes. A
 * hello-world request thus costs one Task and no Future. The response
 * itself goes through the writer both interfaces share (writer.c).
 */
#include "config.h"

#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "worker/python/asgi_done.h"
#include "worker/python/asgi_internal.h"
#include "worker/python/py.h"
#include "worker/python/writer.h"

#define BODY_MSG_MAX   (256 * 1024) /* a sized body message, at most */
#define BODY_MSG_CHUNK (64 * 1024)  /* a chunked body message, at most */

/* receive and send: one small callable each per request. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    sl_asgi_req_t *req; /* owned */
} chan_t;

/* ------------------------------------------------------------------ */
/* small helpers                                                      */

/* Is S the interned string KEY? Apps write message types as literals that
 * are not interned (they hold dots), so compare the text when needed. */
bool sl_asgi_str_is(PyObject *s, PyObject *key)
{
    if (s == key)
        return true;
    if (!PyUnicode_Check(s))
        return false;
    if (PyUnicode_CheckExact(s) && PyUnicode_IS_COMPACT_ASCII(s))
        return PyUnicode_GET_LENGTH(s) == PyUnicode_GET_LENGTH(key) &&
               memcmp(PyUnicode_DATA(s), PyUnicode_DATA(key),
                      (size_t)PyUnicode_GET_LENGTH(s)) == 0;
    return PyUnicode_Compare(s, key) == 0;
}

static bool fut_done(PyObject *fut)
{
    PyObject *r = PyObject_CallMethodNoArgs(fut, sl_asgi_names[N_DONE]);
    bool done = r == NULL || r == Py_True;

    if (r == NULL)
        PyErr_Clear();
    Py_XDECREF(r);
    return done;
}

/* Resolve FUT with V (borrowed) unless it is done (cancelled). */
static void fut_resolve(PyObject *fut, PyObject *v)
{
    PyObject *r;

    if (fut_done(fut))
        return;
    r = PyObject_CallMethodOneArg(fut, sl_asgi_names[N_SET_RESULT], v);
    if (r == NULL)
        sl_py_log_exception("ASGI: resolving a future failed");
    Py_XDECREF(r);
}

static PyObject *disconnect_msg(void)
{
    PyObject *m = PyDict_New();

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

static int feed_rest(sl_asgi_req_t *r);

void sl_asgi_channel_release(sl_asgi_req_t *r)
{
    PyObject *list = r->recv_waiters, *msg, *fut;
    Py_ssize_t i;

    r->recv_waiters = NULL;
    if (list != NULL) {
        for (i = 0; i < PyList_GET_SIZE(list); i++) {
            msg = r->ws ? sl_asgi_ws_disconnect_msg(r) : disconnect_msg();
            if (msg == NULL) {
                sl_py_log_exception("ASGI: the disconnect message");
                break;
            }
            fut_resolve(PyList_GET_ITEM(list, i), msg);
            Py_DECREF(msg);
        }
        Py_DECREF(list);
    }
    Py_CLEAR(r->body_rest);
    fut = r->send_waiter;
    r->send_waiter = NULL;
    if (fut != NULL) {
        fut_resolve(fut, Py_None);
        Py_DECREF(fut);
    }
}

/* An error in what the app sent: the exception stays set for the app to
 * see, the connection gets a 500 or is closed. Returns NULL. */
static PyObject *proto_error(sl_asgi_req_t *r)
{
    PyObject *t, *v, *tb;

    PyErr_Fetch(&t, &v, &tb);
    sl_asgi_req_fail(r, 500);
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
    const sl_req_t *q = &r->c->req; /* read-only until END */
    size_t want, have = 0;
    PyObject *b;
    bool end = false;
    long n;

    if (!q->has_body) {
        r->body_done = true;
        Py_INCREF(sl_asgi.empty);
        return request_msg(sl_asgi.empty, false);
    }
    want = q->chunked                    ? BODY_MSG_CHUNK
           : r->body_left < BODY_MSG_MAX ? (size_t)r->body_left
                                         : BODY_MSG_MAX;
    b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(want ? want : 1));
    if (b == NULL)
        return NULL;
    while (have < want) {
        n = sl_conn_read_body(r->c, r->gen, PyBytes_AS_STRING(b) + have,
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

    if (r->ws)
        return sl_asgi_ws_recv_try(r);
    for (;;) {
        if (r->gone || r->w.ended)
            return disconnect_msg();
        if (!r->body_done) {
            m = read_body(r);
            if (m != NULL || PyErr_Occurred())
                return m;
            if (r->gone)
                continue;
            rc = sl_conn_await(r->c, r->gen, SL_AWAIT_BODY);
        } else {
            rc = sl_conn_await(r->c, r->gen, SL_AWAIT_DISCONNECT);
            if (rc == 0)
                r->gone = true;
        }
        if (rc < 0)
            r->gone = true;
        if (rc == 1) {
            /* inline: the loop must run to see the bytes or the EOF */
            r->c->pump->exec->need_loop(r->c);
            return NULL;
        }
    }
}

static PyObject *req_receive(sl_asgi_req_t *r)
{
    PyObject *m, *fut;

    if (r->recv_waiters == NULL || PyList_GET_SIZE(r->recv_waiters) == 0) {
        m = recv_try(r);
        if (m != NULL)
            return sl_asgi_done_new(m);
        if (PyErr_Occurred())
            return NULL;
    }
    fut = PyObject_CallNoArgs(sl_asgi.create_future);
    if (fut == NULL)
        return NULL;
    if (r->recv_waiters == NULL && (r->recv_waiters = PyList_New(0)) == NULL)
        goto out_fail;
    if (PyList_Append(r->recv_waiters, fut) < 0)
        goto out_fail;
    return fut;

out_fail:
    Py_DECREF(fut);
    return NULL;
}

/* A WAKE: hand out what the waiting receive()s can have now, in order. */
static void wake_receivers(sl_asgi_req_t *r)
{
    PyObject *fut, *m, *t, *v, *tb, *res;

    while (r->recv_waiters != NULL && PyList_GET_SIZE(r->recv_waiters) > 0) {
        fut = PyList_GET_ITEM(r->recv_waiters, 0);
        Py_INCREF(fut);
        if (!fut_done(fut)) {
            m = recv_try(r);
            if (m == NULL && !PyErr_Occurred()) {
                Py_DECREF(fut);
                return; /* armed again */
            }
            if (m != NULL) {
                fut_resolve(fut, m);
                Py_DECREF(m);
            } else {
                PyErr_Fetch(&t, &v, &tb);
                PyErr_NormalizeException(&t, &v, &tb);
                res = PyObject_CallMethod(fut, "set_exception", "O", v);
                if (res == NULL)
                    PyErr_Clear();
                Py_XDECREF(res);
                Py_XDECREF(t);
                Py_XDECREF(v);
                Py_XDECREF(tb);
            }
        }
        Py_DECREF(fut);
        if (r->recv_waiters != NULL &&
            PyList_SetSlice(r->recv_waiters, 0, 1, NULL) < 0) {
            sl_py_log_exception("ASGI: receive() waiters");
            return;
        }
    }
}

/* A WAKE: re-check whatever the request waits for. */
void sl_asgi_channel_wake(sl_asgi_req_t *r)
{
    PyObject *fut;
    int rc;

    Py_INCREF(r);
    wake_receivers(r);
    fut = r->send_waiter;
    if (fut != NULL) {
        Py_INCREF(fut);
        if (fut_done(fut)) {
            Py_CLEAR(r->body_rest); /* the app stopped waiting */
            rc = 0;
        } else if ((rc = feed_rest(r)) < 0) {
            sl_py_log_exception("ASGI: the body of %s", r->what);
        }
        if (rc != 1 && r->send_waiter == fut) { /* not let go by the end */
            r->send_waiter = NULL;
            fut_resolve(fut, Py_None);
            Py_DECREF(fut);
        }
        Py_DECREF(fut);
    }
    Py_DECREF(r);
}

/* ------------------------------------------------------------------ */
/* send()                                                             */

/* send() must wait until the client took enough of the output. */
PyObject *sl_asgi_channel_wait_credit(sl_asgi_req_t *r)
{
    PyObject *fut;
    int rc = feed_rest(r);

    if (rc < 0)
        return NULL;
    if (rc == 0)
        return sl_asgi_done_none();
    fut = PyObject_CallNoArgs(sl_asgi.create_future);
    if (fut == NULL)
        return NULL;
    if (r->send_waiter != NULL) { /* two send()s at once: let one go */
        fut_resolve(r->send_waiter, Py_None);
        Py_DECREF(r->send_waiter);
    }
    Py_INCREF(fut);
    r->send_waiter = fut;
    return fut;
}

/* The head of the response, for a body of KNOWN bytes (-1: not known,
 * chunked). 0, or -1 with an exception. */
static int start_body(sl_asgi_req_t *r, long long known)
{
    int rc = sl_writer_start(&r->w, r->status, NULL, 0, r->headers, known,
                             r->want_trailers);

    Py_CLEAR(r->headers);
    if (rc < 0)
        return -1;
    r->state = RS_BODY;
    return 0;
}

/* Queue LEN body bytes (the head first if it is not out yet); LAST is
 * more_body False. 0, 1 when over the credit, -1 with an exception. */
int sl_asgi_channel_emit(sl_asgi_req_t *r, const void *data, size_t len,
                         bool last)
{
    int rc;

    if (r->state == RS_STARTED &&
        start_body(r, last && !r->want_trailers ? (long long)len : -1) < 0)
        return -1;
    rc = sl_writer_body(&r->w, data, len, last);
    if (rc < 0)
        r->gone = true;
    if (r->w.ended)
        sl_asgi_req_ended(r);
    else if (last)
        r->state = RS_TRAILERS;
    return rc == 1 ? 1 : 0;
}

/* Queue what is left of r->body_rest, SL_WRITER_SLICE bytes at a time until
 * the output is over the credit (ALL, or a client that is gone: the rest
 * at once). 0 when all is queued, 1 when all is and the output is over the
 * credit, 2 when bytes are left, -1 with an exception. */
static int emit_rest(sl_asgi_req_t *r, bool all)
{
    PyObject *b = r->body_rest;
    size_t len, n;
    int rc = 0;

    if (b == NULL)
        return 0;
    Py_INCREF(b); /* the last slice ends the request, which drops it */
    len = (size_t)PyBytes_GET_SIZE(b);
    while (r->body_rest == b && r->body_off < len) {
        n = len - r->body_off;
        if (!all && !r->gone && n > SL_WRITER_SLICE)
            n = SL_WRITER_SLICE;
        r->body_off += n;
        rc = sl_asgi_channel_emit(r, PyBytes_AS_STRING(b) + r->body_off - n, n,
                                  r->body_rest_last && r->body_off == len);
        if (rc < 0)
            break;
        if (rc == 1 && r->body_off < len) {
            Py_DECREF(b);
            return 2;
        }
    }
    if (r->body_rest == b)
        Py_CLEAR(r->body_rest);
    Py_DECREF(b);
    return rc;
}

/* Wait for credit, queuing what is left of a large body each time it is
 * there. 1 when the output is over the credit (armed: a WAKE comes), 0
 * when nothing is left to wait for, -1 with an exception. */
static int feed_rest(sl_asgi_req_t *r)
{
    int rc;

    for (;;) {
        rc = sl_conn_await(r->c, r->gen, SL_AWAIT_CREDIT);
        if (rc == 1)
            return 1;
        if (rc < 0)
            r->gone = true;
        if (r->body_rest == NULL)
            return 0;
        rc = emit_rest(r, false); /* the credit is there: go on */
        if (rc <= 0)
            return rc;
    }
}

static PyObject *send_start(sl_asgi_req_t *r, PyObject *msg)
{
    PyObject *status, *headers, *seq, *trailers;
    long code;
    int t;

    if (r->state != RS_INIT)
        return proto_fail(r, PyExc_RuntimeError,
                          "ASGI: http.response.start sent twice, or after "
                          "the body began (%s)",
                          r->what);
    status = PyDict_GetItemWithError(msg, sl_asgi_names[N_STATUS]);
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
    headers = PyDict_GetItemWithError(msg, sl_asgi_names[N_HEADERS]);
    if (headers == NULL && PyErr_Occurred())
        return proto_error(r);
    seq = PySequence_Fast(headers ? headers : sl_asgi.empty_tuple,
                          "ASGI: http.response.start: 'headers' must be a "
                          "list of [name, value] pairs");
    if (seq == NULL)
        return proto_error(r);
    if (sl_writer_check_headers(seq, "ASGI: http.response.start") < 0) {
        Py_DECREF(seq);
        return proto_error(r);
    }
    trailers = PyDict_GetItemWithError(msg, sl_asgi_names[N_TRAILERS]);
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

static PyObject *send_body(sl_asgi_req_t *r, PyObject *msg)
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
    body = PyDict_GetItemWithError(msg, sl_asgi_names[N_BODY]);
    more = PyDict_GetItemWithError(msg, sl_asgi_names[N_MORE_BODY]);
    if (PyErr_Occurred())
        return proto_error(r);
    if (body == NULL)
        body = sl_asgi.empty;
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
        if (r->state == RS_STARTED && start_body(r, (long long)view.len) < 0) {
            PyBuffer_Release(&view);
            return proto_error(r);
        }
        rc = sl_writer_lend(&r->w, body);
        if (rc <= 0) {
            PyBuffer_Release(&view);
            if (rc < 0)
                r->gone = true;
            sl_asgi_req_ended(r);
            return sl_asgi_done_none();
        }
    }
    if (last >= 0 && PyBytes_CheckExact(body) && view.len > SL_WRITER_SLICE) {
        /* bytes cannot change while the loop takes them piece by piece */
        PyBuffer_Release(&view);
        if (r->state == RS_STARTED &&
            start_body(r, last && !r->want_trailers
                              ? (long long)PyBytes_GET_SIZE(body)
                              : -1) < 0)
            return proto_error(r);
        Py_INCREF(body);
        r->body_rest = body;
        r->body_off = 0;
        r->body_rest_last = last;
        rc = emit_rest(r, false);
        if (rc < 0)
            return proto_error(r);
        return rc > 0 ? sl_asgi_channel_wait_credit(r) : sl_asgi_done_none();
    }
    rc = last < 0 ? -1
                  : sl_asgi_channel_emit(r, view.buf, (size_t)view.len, last);
    PyBuffer_Release(&view);
    if (rc < 0)
        return proto_error(r);
    if (rc == 1)
        return sl_asgi_channel_wait_credit(r);
    return sl_asgi_done_none();
}

static PyObject *send_trailers(sl_asgi_req_t *r, PyObject *msg)
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
    headers = PyDict_GetItemWithError(msg, sl_asgi_names[N_HEADERS]);
    more = PyDict_GetItemWithError(msg, sl_asgi_names[N_MORE_TRAILERS]);
    if (PyErr_Occurred())
        return proto_error(r);
    seq = PySequence_Fast(headers ? headers : sl_asgi.empty_tuple,
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
        sl_asgi_req_ended(r);
        if (PyErr_Occurred())
            return NULL;
    }
    return sl_asgi_done_none();

out_fail:
    Py_DECREF(seq);
    return proto_error(r);
}

/* http.response.pathsend: the head, then the file by sendfile(2). */
static PyObject *send_pathsend(sl_asgi_req_t *r, PyObject *msg)
{
    PyObject *path, *fs = NULL;
    struct stat st;
    int fd, rc;

    if (r->state != RS_STARTED)
        return proto_fail(r, PyExc_RuntimeError,
                          "ASGI: http.response.pathsend must come right "
                          "after http.response.start (%s)",
                          r->what);
    path = PyDict_GetItemWithError(msg, sl_asgi_names[N_PATH]);
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
    sl_asgi_req_ended(r);
    return sl_asgi_done_none();
}

static PyObject *req_send(sl_asgi_req_t *r, PyObject *msg)
{
    PyObject *type;

    if (r->ws)
        return sl_asgi_ws_send(r, msg);
    /* an app that sends again before its last send() is done: what that
     * one left goes first, whole */
    if (r->body_rest != NULL && emit_rest(r, true) < 0)
        return proto_error(r);
    if (!PyDict_Check(msg))
        return proto_fail(r, PyExc_TypeError,
                          "ASGI: send() takes a dict message, not %s",
                          Py_TYPE(msg)->tp_name);
    type = PyDict_GetItemWithError(msg, sl_asgi_names[N_TYPE]);
    if (type == NULL)
        return PyErr_Occurred() ? proto_error(r)
                                : proto_fail(r, PyExc_KeyError,
                                             "ASGI: send(): the message has "
                                             "no 'type'");
    if (sl_asgi_str_is(type, sl_asgi_names[N_RESPONSE_BODY]))
        return send_body(r, msg);
    if (sl_asgi_str_is(type, sl_asgi_names[N_RESPONSE_START]))
        return send_start(r, msg);
    if (sl_asgi_str_is(type, sl_asgi_names[N_RESPONSE_TRAILERS]))
        return send_trailers(r, msg);
    if (sl_asgi_str_is(type, sl_asgi_names[N_RESPONSE_PATHSEND]))
        return send_pathsend(r, msg);
    return proto_fail(r, PyExc_ValueError,
                      "ASGI: send(): unexpected message type %R for an http "
                      "scope",
                      type);
}

/* ------------------------------------------------------------------ */
/* the receive and send callables                                     */

static PyObject *receive_vc(PyObject *self, PyObject *const *args,
                            size_t nargsf, PyObject *kw)
{
    (void)args;
    if (PyVectorcall_NARGS(nargsf) != 0 || kw != NULL) {
        PyErr_SetString(PyExc_TypeError, "receive() takes no arguments");
        return NULL;
    }
    return req_receive(((chan_t *)self)->req);
}

static PyObject *send_vc(PyObject *self, PyObject *const *args, size_t nargsf,
                         PyObject *kw)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || kw != NULL) {
        PyErr_SetString(PyExc_TypeError, "send() takes one message");
        return NULL;
    }
    return req_send(((chan_t *)self)->req, args[0]);
}

static void chan_dealloc(chan_t *ch)
{
    Py_XDECREF(ch->req);
    PyObject_Free(ch);
}

static PyTypeObject receive_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice.Receive",
    .tp_basicsize = sizeof(chan_t),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "ASGI receive(): the request body, then http.disconnect",
    .tp_dealloc = (destructor)chan_dealloc,
    .tp_vectorcall_offset = offsetof(chan_t, vectorcall),
    .tp_call = PyVectorcall_Call,
};

static PyTypeObject send_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice.Send",
    .tp_basicsize = sizeof(chan_t),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "ASGI send(): the response",
    .tp_dealloc = (destructor)chan_dealloc,
    .tp_vectorcall_offset = offsetof(chan_t, vectorcall),
    .tp_call = PyVectorcall_Call,
};

PyObject *sl_asgi_channel_new(sl_asgi_req_t *r, bool send)
{
    chan_t *ch = PyObject_New(chan_t, send ? &send_type : &receive_type);

    if (ch == NULL)
        return NULL;
    ch->vectorcall = send ? send_vc : receive_vc;
    Py_INCREF(r);
    ch->req = r;
    return (PyObject *)ch;
}

int sl_asgi_channel_init(void)
{
    if (PyType_Ready(&receive_type) < 0 || PyType_Ready(&send_type) < 0)
        return -1;
    request_proto = Py_BuildValue(
        "{OOOyOO}", sl_asgi_names[N_TYPE], sl_asgi_names[N_HTTP_REQUEST],
        sl_asgi_names[N_BODY], "", sl_asgi_names[N_MORE_BODY], Py_False);
    return request_proto != NULL ? 0 : -1;
}
