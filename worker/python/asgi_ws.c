/* asgi_ws.c - ASGI's websocket scope: the messages of one WebSocket.
 *
 * A WebSocket request is an ASGI request like any other (asgi_request.c
 * runs it, with its receive() and send() callables; asgi_io.c has their
 * waits); only its messages differ, and they are here: the websocket kind
 * (sl_asgi_ws), which a request picks when it is made. The protocol itself
 * lives on the loop thread (worker/loop/conn_ws.c): this side sees whole
 * messages and four calls, sl_conn_ws_accept/recv/send/close, which answer at
 * once or say that a WAKE will come - the same await/wake mechanism as an HTTP
 * body or credit, and the same completed awaitables when no wait is
 * needed.
 *
 * A WebSocket request goes through these states (ws_state):
 *   WS_CONNECTING  before websocket.accept: still an HTTP request, which a
 *                  denial (websocket.close: 403; the denial-response
 *                  extension: the app's own response) answers through
 *                  the writer, as an HTTP response that closes the
 *                  connection;
 *   WS_OPEN        accepted: messages both ways;
 *   WS_CLOSED      the app (or sluice, after a misuse) sent a close: the
 *                  close handshake runs on the loop; receive() still
 *                  hands out what came before the end;
 *   WS_OVER        the HTTP answer went out instead: nothing more can.
 * Whatever the state, the app's end sends END (finish()).
 */
#include "config.h"

#include <Python.h>
#include <stdarg.h>
#include <string.h>

#include "common/log.h"
#include "worker/loop/http.h"
#include "worker/loop/response.h"
#include "worker/python/asgi_done.h"
#include "worker/python/asgi_internal.h"
#include "worker/python/asgi_scope.h"
#include "worker/python/py.h"

enum { WS_CONNECTING, WS_OPEN, WS_CLOSED, WS_OVER };

/* sluice.ClientDisconnected: send() after the client went away (ASGI 2.4
 * wants an OSError subclass there, as uvicorn's). Owned. */
static PyObject *ws_disconnected;

static PyObject *ws_error(sl_asgi_req_t *r);

/* Header names the handshake's answer writes itself: an app's accept
 * may not add them (the subprotocol goes in "subprotocol"). */
static const char *const handshake_names[] = {
    "upgrade",
    "connection",
    "sec-websocket-accept",
    "sec-websocket-extensions",
    "sec-websocket-protocol",
    "content-length",
    "transfer-encoding",
};

/* ------------------------------------------------------------------ */
/* messages to the app                                                */

/* {"type": TYPE} plus KEY: VALUE (VALUE stolen; KEY NULL for none). */
static PyObject *msg_new(int type, int key, PyObject *value)
{
    PyObject *m = PyDict_New();

    if (m == NULL ||
        PyDict_SetItem(m, sl_asgi_names[N_TYPE], sl_asgi_names[type]) < 0 ||
        (key >= 0 &&
         (value == NULL || PyDict_SetItem(m, sl_asgi_names[key], value) < 0)))
        Py_CLEAR(m);
    Py_XDECREF(value);
    return m;
}

/* R's WebSocket is over: END says how (1006 when it never said). */
static void ws_end(sl_asgi_req_t *r, const sl_ws_end_t *end)
{
    if (r->ws_ended)
        return;
    r->ws_ended = true;
    r->ws_end_code = end != NULL ? end->code : SL_WS_CLOSE_ABNORMAL;
    if (end == NULL || end->reason[0] == '\0')
        return;
    r->ws_end_reason = PyUnicode_DecodeUTF8(
        end->reason, (Py_ssize_t)strlen(end->reason), "replace");
    if (r->ws_end_reason == NULL)
        PyErr_Clear(); /* out of memory: the end without its reason */
}

/* websocket.disconnect with R's end (1006 when none is known). */
static PyObject *disconnect_msg(sl_asgi_req_t *r)
{
    PyObject *m, *reason;

    ws_end(r, NULL);
    reason = r->ws_end_reason != NULL ? Py_NewRef(r->ws_end_reason)
                                      : PyUnicode_New(0, 0);
    if (reason == NULL)
        return NULL;
    m = msg_new(N_WS_DISCONNECT, N_CODE,
                PyLong_FromUnsignedLong(r->ws_end_code));
    if (m != NULL && PyDict_SetItem(m, sl_asgi_names[N_REASON], reason) < 0)
        Py_CLEAR(m);
    Py_DECREF(reason);
    return m;
}

/* A received message as websocket.receive; frees MSG's buffer. */
static PyObject *receive_msg(sl_ws_msg_t *msg)
{
    const char *p = msg->data.data + msg->data.off;
    Py_ssize_t n = (Py_ssize_t)sl_buf_pending(&msg->data);
    PyObject *m;

    if (msg->opcode == SL_WS_OP_TEXT)
        m = msg_new(N_WS_RECEIVE, N_TEXT,
                    PyUnicode_DecodeUTF8(p ? p : "", n, "strict"));
    else
        m = msg_new(N_WS_RECEIVE, N_BYTES,
                    PyBytes_FromStringAndSize(p ? p : "", n));
    sl_buf_free(&msg->data);
    return m;
}

/* receive()'s next message (the kind's recv_try). */
static PyObject *recv_try(sl_asgi_req_t *r)
{
    sl_ws_msg_t msg;
    sl_ws_end_t end;
    int rc;

    if (!r->ws_connected) {
        r->ws_connected = true;
        return msg_new(N_WS_CONNECT, -1, NULL);
    }
    if (r->ws_ended || r->gone || r->ws_state == WS_OVER)
        return disconnect_msg(r);
    if (r->ws_state == WS_CONNECTING) {
        /* nothing to receive before the accept; only the client leaving */
        rc = sl_exch_await(r->ex, r->gen, SL_AWAIT_DISCONNECT);
        if (rc != 1)
            return disconnect_msg(r);
    } else {
        memset(&msg, 0, sizeof(msg));
        rc = sl_exch_ws_recv(r->ex, r->gen, &msg, &end);
        if (rc == 0)
            return receive_msg(&msg);
        if (rc < 0) {
            ws_end(r, &end);
            return disconnect_msg(r);
        }
    }
    /* inline: the loop must run to read the frames or see the EOF */
    sl_exch_need_loop(r->ex);
    return NULL;
}

/* ------------------------------------------------------------------ */
/* errors                                                             */

/* Raise sluice.ClientDisconnected: the client went away, or the
 * WebSocket is closing (the drain's close went out): no misuse. */
static PyObject *disconnected(sl_asgi_req_t *r, const char *what)
{
    PyErr_Format(ws_disconnected,
                 "ASGI: %s: the WebSocket is closed or its client went away "
                 "(%s)",
                 what, r->what);
    return NULL;
}

/* A misuse by the app: raise EXC with the message in the app, keep it to
 * be logged once when the app ends, and end what can be ended - close
 * 1011 after the accept, 500 (or a cut connection) before. NULL. */
static PyObject *misuse(sl_asgi_req_t *r, PyObject *exc, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    PyErr_FormatV(exc, fmt, ap);
    va_end(ap);
    return ws_error(r);
}

/* The exception set is a misuse of R by the app: keep it to log once,
 * end R's WebSocket (1011) or response (500). Returns NULL, the exception
 * still set. */
static PyObject *ws_error(sl_asgi_req_t *r)
{
    PyObject *t, *v, *tb;

    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    if (r->ws_misuse == NULL && v != NULL)
        r->ws_misuse = Py_NewRef(v);
    if (r->ws_state == WS_OPEN) {
        sl_exch_ws_close(r->ex, r->gen, SL_WS_CLOSE_INTERNAL, NULL, 0);
        sl_exch_need_loop(r->ex);
        r->ws_state = WS_CLOSED;
    } else if (r->ws_state == WS_CONNECTING) {
        sl_asgi_io_fail(r, 500);
        r->ws_state = WS_OVER;
    }
    PyErr_Restore(t, v, tb);
    return NULL;
}

/* M's KEY (borrowed), NULL when missing or None. */
static PyObject *field(const sl_asgi_msg_t *m, int key)
{
    PyObject *v = m->v[key];

    return v == Py_None ? NULL : v;
}

/* ------------------------------------------------------------------ */
/* websocket.accept                                                   */

/* May the app's accept carry header NAME[0..N)? */
static bool handshake_owns(const char *name, size_t n)
{
    size_t i;

    for (i = 0; i < sizeof(handshake_names) / sizeof(handshake_names[0]); i++)
        if (sl_http_name_is(name, n, handshake_names[i]))
            return true;
    return false;
}

/* HEADERS (checked pairs) as "Name: value\r\n" lines into B. 0, or -1 with
 * an exception. */
static int format_headers(PyObject *seq, sl_buf_t *b)
{
    Py_ssize_t i, n = PySequence_Fast_GET_SIZE(seq);
    PyObject *pair, *name, *value;

    for (i = 0; i < n; i++) {
        pair = PySequence_Fast_GET_ITEM(seq, i);
        name = PySequence_Fast_GET_ITEM(pair, 0);
        value = PySequence_Fast_GET_ITEM(pair, 1);
        if (handshake_owns(PyBytes_AS_STRING(name),
                           (size_t)PyBytes_GET_SIZE(name))) {
            PyErr_Format(PyExc_ValueError,
                         "ASGI: websocket.accept: header %R is the "
                         "handshake's own (a subprotocol goes in "
                         "'subprotocol')",
                         name);
            return -1;
        }
        if (sl_buf_append(b, PyBytes_AS_STRING(name),
                          (size_t)PyBytes_GET_SIZE(name)) < 0 ||
            SL_BUF_APPEND_LIT(b, ": ") < 0 ||
            sl_buf_append(b, PyBytes_AS_STRING(value),
                          (size_t)PyBytes_GET_SIZE(value)) < 0 ||
            SL_BUF_APPEND_LIT(b, "\r\n") < 0) {
            PyErr_NoMemory();
            return -1;
        }
    }
    return 0;
}

/* The subprotocol of an accept: NULL for none, else a token. */
static int accept_subprotocol(const sl_asgi_msg_t *m, const char **sub)
{
    PyObject *v = field(m, N_SUBPROTOCOL);
    Py_ssize_t n;

    *sub = NULL;
    if (v == NULL)
        return 0;
    if (!PyUnicode_Check(v)) {
        PyErr_Format(PyExc_TypeError,
                     "ASGI: websocket.accept: 'subprotocol' must be str or "
                     "None, not %s",
                     Py_TYPE(v)->tp_name);
        return -1;
    }
    *sub = PyUnicode_AsUTF8AndSize(v, &n);
    if (*sub == NULL)
        return -1;
    if (n == 0 || sl_response_bad_name(*sub, (size_t)n)) {
        PyErr_Format(PyExc_ValueError,
                     "ASGI: websocket.accept: subprotocol %R is not a token",
                     v);
        return -1;
    }
    return 0;
}

PyObject *sl_asgi_ws_accept(sl_asgi_req_t *r, const sl_asgi_msg_t *m)
{
    const char *sub;
    PyObject *headers, *seq;
    sl_buf_t *b = &r->x->scratch;
    int rc;

    if (r->ws_state != WS_CONNECTING || r->state != RS_INIT)
        return misuse(r, PyExc_RuntimeError, "ASGI: websocket.accept %s (%s)",
                      r->ws_state == WS_CONNECTING
                          ? "after websocket.http.response.start"
                          : "sent twice, or after the WebSocket ended",
                      r->what);
    if (accept_subprotocol(m, &sub) < 0)
        return ws_error(r);
    headers = field(m, N_HEADERS);
    seq = PySequence_Fast(headers ? headers : r->x->empty_tuple,
                          "ASGI: websocket.accept: 'headers' must be a list "
                          "of [name, value] pairs");
    if (seq == NULL)
        return ws_error(r);
    b->len = b->off = 0;
    if (sl_writer_check_headers(seq, "ASGI: websocket.accept") < 0 ||
        format_headers(seq, b) < 0) {
        Py_DECREF(seq);
        return ws_error(r);
    }
    Py_DECREF(seq);
    rc = sl_exch_ws_accept(r->ex, r->gen, sub, b->data, b->len);
    b->len = b->off = 0;
    r->ws_state = WS_OPEN;
    sl_exch_need_loop(r->ex);
    if (rc < 0) {
        ws_end(r, NULL);
        return disconnected(r, "websocket.accept");
    }
    /* a receive() waiting for the accept now waits for messages */
    if (r->recv_waiter != NULL)
        sl_asgi_io_wake(r);
    return sl_asgi_done_none();
}

/* ------------------------------------------------------------------ */
/* websocket.send and websocket.close                                 */

/* Why R cannot send now, or NULL when it can. */
static const char *cannot_send(const sl_asgi_req_t *r)
{
    switch (r->ws_state) {
    case WS_CONNECTING:
        return "before websocket.accept";
    case WS_CLOSED:
        return "after websocket.close";
    case WS_OVER:
        return "after the WebSocket was refused";
    }
    return NULL;
}

PyObject *sl_asgi_ws_send(sl_asgi_req_t *r, const sl_asgi_msg_t *m)
{
    PyObject *bytes, *text;
    Py_buffer view;
    const char *why = cannot_send(r), *p;
    Py_ssize_t n;
    int rc;

    if (why != NULL)
        return misuse(r, PyExc_RuntimeError, "ASGI: websocket.send %s (%s)",
                      why, r->what);
    bytes = field(m, N_BYTES);
    text = field(m, N_TEXT);
    if ((bytes == NULL) == (text == NULL))
        return misuse(r, PyExc_ValueError,
                      "ASGI: websocket.send needs exactly one of 'bytes' "
                      "and 'text' (%s)",
                      r->what);
    if (r->ws_ended || r->gone)
        return disconnected(r, "websocket.send");
    if (text != NULL) {
        if (!PyUnicode_Check(text))
            return misuse(r, PyExc_TypeError,
                          "ASGI: websocket.send: 'text' must be str, not %s",
                          Py_TYPE(text)->tp_name);
        if ((p = PyUnicode_AsUTF8AndSize(text, &n)) == NULL)
            return ws_error(r);
        rc = sl_exch_ws_send(r->ex, r->gen, SL_WS_OP_TEXT, p, (size_t)n);
    } else {
        if (PyUnicode_Check(bytes) ||
            PyObject_GetBuffer(bytes, &view, PyBUF_SIMPLE) < 0) {
            PyErr_Clear();
            return misuse(r, PyExc_TypeError,
                          "ASGI: websocket.send: 'bytes' must be bytes, not "
                          "%s",
                          Py_TYPE(bytes)->tp_name);
        }
        rc = sl_exch_ws_send(r->ex, r->gen, SL_WS_OP_BINARY, view.buf,
                             (size_t)view.len);
        PyBuffer_Release(&view);
    }
    sl_exch_need_loop(r->ex);
    if (rc < 0) /* receive() will say how it ended */
        return disconnected(r, "websocket.send");
    return rc == 1 ? sl_asgi_io_wait_credit(r) : sl_asgi_done_none();
}

/* The code and reason of a close: CODE (default 1000) one an endpoint
 * may send, REASON str or None. */
static int close_args(sl_asgi_req_t *r, const sl_asgi_msg_t *m, unsigned *code,
                      const char **reason, Py_ssize_t *n)
{
    PyObject *c = field(m, N_CODE), *why = field(m, N_REASON);
    long v;

    *code = SL_WS_CLOSE_NORMAL;
    *reason = "";
    *n = 0;
    if (c != NULL) {
        if (!PyLong_Check(c) || PyBool_Check(c)) {
            misuse(r, PyExc_TypeError,
                   "ASGI: websocket.close: 'code' must be int, not %s",
                   Py_TYPE(c)->tp_name);
            return -2;
        }
        v = PyLong_AsLong(c);
        if (v == -1 && PyErr_Occurred())
            PyErr_Clear();
        if (v < 0 || v > 4999 || !sl_ws_close_code_valid((unsigned)v)) {
            misuse(r, PyExc_ValueError,
                   "ASGI: websocket.close: %R is not a close code an "
                   "endpoint may send",
                   c);
            return -2;
        }
        *code = (unsigned)v;
    }
    if (why != NULL) {
        if (!PyUnicode_Check(why)) {
            misuse(r, PyExc_TypeError,
                   "ASGI: websocket.close: 'reason' must be str, not %s",
                   Py_TYPE(why)->tp_name);
            return -2;
        }
        if ((*reason = PyUnicode_AsUTF8AndSize(why, n)) == NULL)
            return -1;
    }
    return 0;
}

PyObject *sl_asgi_ws_close(sl_asgi_req_t *r, const sl_asgi_msg_t *m)
{
    unsigned code;
    const char *reason;
    Py_ssize_t n;
    int rc = close_args(r, m, &code, &reason, &n);

    if (rc == -2)
        return NULL;
    if (rc < 0)
        return ws_error(r);
    switch (r->ws_state) {
    case WS_CONNECTING:
        if (r->state != RS_INIT)
            return misuse(r, PyExc_RuntimeError,
                          "ASGI: websocket.close after "
                          "websocket.http.response.start (%s)",
                          r->what);
        /* a refusal before the accept is a 403, as in uvicorn */
        sl_asgi_io_fail(r, 403);
        r->ws_state = WS_OVER;
        break;
    case WS_OPEN:
        if (!r->ws_ended && !r->gone)
            sl_exch_ws_close(r->ex, r->gen, code, reason, (size_t)n);
        sl_exch_need_loop(r->ex);
        r->ws_state = WS_CLOSED;
        break;
    default:
        break; /* closing twice changes nothing */
    }
    return sl_asgi_done_none();
}

/* ------------------------------------------------------------------ */
/* the denial response                                                */

PyObject *sl_asgi_ws_denial_start(sl_asgi_req_t *r, const sl_asgi_msg_t *m)
{
    PyObject *status, *headers, *seq;
    long code;

    if (r->ws_state != WS_CONNECTING || r->state != RS_INIT)
        return misuse(r, PyExc_RuntimeError,
                      "ASGI: websocket.http.response.start %s (%s)",
                      r->ws_state == WS_CONNECTING ? "sent twice"
                                                   : "after the accept",
                      r->what);
    status = field(m, N_STATUS);
    headers = field(m, N_HEADERS);
    if (status == NULL || !PyLong_CheckExact(status))
        return misuse(r, PyExc_TypeError,
                      "ASGI: websocket.http.response.start needs an int "
                      "'status', got %R",
                      status);
    code = PyLong_AsLong(status);
    if (code < 200 || code > 599)
        return misuse(r, PyExc_ValueError,
                      "ASGI: websocket.http.response.start: status %ld is "
                      "not a final HTTP status (200-599)",
                      code);
    seq = PySequence_Fast(headers ? headers : r->x->empty_tuple,
                          "ASGI: websocket.http.response.start: 'headers' "
                          "must be a list of [name, value] pairs");
    if (seq == NULL)
        return ws_error(r);
    if (sl_writer_check_headers(seq, "ASGI: websocket.http.response.start") <
        0) {
        Py_DECREF(seq);
        return ws_error(r);
    }
    r->status = (int)code;
    r->headers = seq;
    r->state = RS_STARTED;
    return sl_asgi_done_none();
}

PyObject *sl_asgi_ws_denial_body(sl_asgi_req_t *r, const sl_asgi_msg_t *m)
{
    PyObject *body, *more;
    Py_buffer view;
    int last, rc;

    if (r->ws_state != WS_CONNECTING ||
        (r->state != RS_STARTED && r->state != RS_BODY))
        return misuse(
            r, PyExc_RuntimeError, "ASGI: websocket.http.response.body %s (%s)",
            r->ws_state != WS_CONNECTING ? "after the accept"
            : r->state == RS_INIT ? "before websocket.http.response.start"
                                  : "after the response was complete",
            r->what);
    body = field(m, N_BODY);
    more = field(m, N_MORE_BODY);
    if (body == NULL)
        body = r->x->empty;
    if (PyUnicode_Check(body) ||
        PyObject_GetBuffer(body, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        return misuse(r, PyExc_TypeError,
                      "ASGI: websocket.http.response.body: 'body' must be "
                      "bytes, not %s",
                      Py_TYPE(body)->tp_name);
    }
    last = more ? !PyObject_IsTrue(more) : 1;
    rc = last < 0 ? -1 : sl_asgi_io_emit(r, view.buf, (size_t)view.len, last);
    PyBuffer_Release(&view);
    if (rc < 0)
        return ws_error(r);
    if (r->state == RS_DONE || r->state == RS_TRAILERS)
        r->ws_state = WS_OVER;
    return rc == 1 ? sl_asgi_io_wait_credit(r) : sl_asgi_done_none();
}

/* ------------------------------------------------------------------ */
/* the end                                                            */

/* Log what the app's end says about it: an exception it raised (RAISED,
 * set; cleared here), or a misuse it caught and went on from. Each error
 * once; a client leaving is no error. */
static void log_end(sl_asgi_req_t *r, bool raised)
{
    PyObject *t, *v, *tb;
    bool quiet = false;

    if (raised) {
        PyErr_Fetch(&t, &v, &tb);
        PyErr_NormalizeException(&t, &v, &tb);
        if ((r->cancelled || r->gone || r->ws_ended) &&
            PyErr_GivenExceptionMatches(t, r->x->cancelled_error))
            quiet = true;
        if (PyErr_GivenExceptionMatches(t, ws_disconnected))
            quiet = true; /* raised only when the client left */
        if (v != NULL && v == r->ws_misuse)
            Py_CLEAR(r->ws_misuse); /* its traceback says it all */
        if (quiet) {
            Py_XDECREF(t);
            Py_XDECREF(v);
            Py_XDECREF(tb);
        } else {
            PyErr_Restore(t, v, tb);
            sl_py_log_exception("error in WebSocket %s", r->what);
        }
    }
    if (r->ws_misuse != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(r->ws_misuse), r->ws_misuse);
        sl_py_log_exception("error in WebSocket %s (the app went on)", r->what);
        Py_CLEAR(r->ws_misuse);
    }
}

/* R's app ended (RAISED: with its exception set, which this logs and
 * clears): close or refuse what is left, send END. */
static void finish(sl_asgi_req_t *r, bool raised)
{
    unsigned code = SL_WS_CLOSE_NORMAL;

    if (r->finished) {
        if (raised)
            PyErr_Clear();
        return;
    }
    log_end(r, raised);
    switch (r->ws_state) {
    case WS_CONNECTING:
        if (r->state == RS_INIT && !raised)
            sl_info("ASGI app returned without accepting %s: 403", r->what);
        else if (!raised)
            sl_error("ASGI app returned without completing the denial "
                     "response to %s",
                     r->what);
        sl_asgi_io_fail(r, raised || r->state != RS_INIT ? 500 : 403);
        r->ws_state = WS_OVER;
        return;
    case WS_OPEN:
        if (raised)
            code = r->cancelled ? SL_WS_CLOSE_GOING_AWAY : SL_WS_CLOSE_INTERNAL;
        if (!r->ws_ended)
            sl_exch_ws_close(r->ex, r->gen, code, NULL, 0);
        /* fall through */
    case WS_CLOSED:
        sl_exch_send(r->ex, r->gen, NULL, 0, SL_SEND_END);
        sl_exch_need_loop(r->ex);
        r->w.ended = r->w.gone = true;
        r->ws_state = WS_OVER;
        sl_asgi_io_ended(r);
        return;
    default:
        sl_asgi_io_ended(r); /* the HTTP answer ended it */
        return;
    }
}

const sl_asgi_kind_t sl_asgi_ws = {
    .kind = SL_ASGI_WS,
    .name = "a websocket",
    .scope = sl_asgi_scope_new_ws,
    .recv_try = recv_try,
    .disconnect = disconnect_msg,
    .error = ws_error,
    .finish = finish,
};

int sl_asgi_ws_init(void)
{
    if (ws_disconnected != NULL)
        return 0;
    ws_disconnected = PyErr_NewExceptionWithDoc(
        "sluice.ClientDisconnected",
        "send() on a WebSocket whose client went away", PyExc_OSError, NULL);
    return ws_disconnected != NULL ? 0 : -1;
}
