/* asgi_io.c - what both ASGI scopes share below their messages: the waits
 * of receive() and send(), the response's body and credit, its end.
 *
 * The one idea: an await costs nothing when its answer is already known.
 * receive() and send() return a completed awaitable (its am_send answers
 * at once, so `await` never leaves the coroutine) whenever the message is
 * there, the credit allows the write, or the message is an error to raise.
 * Only a real wait creates a loop Future; the pump resolves it with a WAKE
 * ticket once the connection changes. A hello-world request thus costs no
 * Future. The response itself goes through the writer both interfaces
 * share (writer.c).
 *
 * Below the scopes' files (asgi_channel.c, asgi_ws.c) and the hub
 * (asgi_request.c), it calls none of them: what differs by scope (the
 * next message, the disconnect message) comes through the request's kind
 * table.
 */
#include "config.h"

#include <Python.h>

#include "worker/python/asgi_done.h"
#include "worker/python/asgi_internal.h"
#include "worker/python/py.h"
#include "worker/python/writer.h"

/* ------------------------------------------------------------------ */
/* futures                                                            */

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

/* ------------------------------------------------------------------ */
/* the end                                                            */

void sl_asgi_io_release(sl_asgi_req_t *r)
{
    PyObject *first = r->recv_waiter, *more = r->recv_more, *msg, *fut;
    Py_ssize_t i, n = more != NULL ? PyList_GET_SIZE(more) : 0;

    /* the connection's slot no longer names R */
    if (r->on_slot && r->x->slots[r->ex->id] == r)
        r->x->slots[r->ex->id] = NULL;
    r->on_slot = false;
    r->recv_waiter = r->recv_more = NULL;
    for (i = -1; first != NULL && i < n; i++) {
        msg = r->kind->disconnect(r);
        if (msg == NULL) {
            sl_py_log_exception("ASGI: the disconnect message");
            break;
        }
        fut_resolve(i < 0 ? first : PyList_GET_ITEM(more, i), msg);
        Py_DECREF(msg);
    }
    Py_XDECREF(first);
    Py_XDECREF(more);
    Py_CLEAR(r->body_rest);
    fut = r->send_waiter;
    r->send_waiter = NULL;
    if (fut != NULL) {
        fut_resolve(fut, Py_None);
        Py_DECREF(fut);
    }
}

void sl_asgi_io_ended(sl_asgi_req_t *r)
{
    if (r->state == RS_DONE)
        return;
    r->state = RS_DONE;
    Py_CLEAR(r->headers);
    Py_CLEAR(r->trailers);
    sl_asgi_io_release(r);
}

void sl_asgi_io_fail(sl_asgi_req_t *r, int status)
{
    sl_writer_fail(&r->w, status);
    sl_asgi_io_ended(r);
}

/* ------------------------------------------------------------------ */
/* receive()                                                          */

PyObject *sl_asgi_io_receive(sl_asgi_req_t *r)
{
    PyObject *m, *fut;

    if (r->recv_waiter == NULL) {
        m = r->kind->recv_try(r);
        if (m != NULL)
            return sl_asgi_done_new(m);
        if (PyErr_Occurred())
            return NULL;
    }
    fut = PyObject_CallNoArgs(r->x->create_future);
    if (fut == NULL)
        return NULL;
    if (r->recv_waiter == NULL) {
        r->recv_waiter = Py_NewRef(fut);
        return fut;
    }
    if (r->recv_more == NULL && (r->recv_more = PyList_New(0)) == NULL)
        goto out_fail;
    if (PyList_Append(r->recv_more, fut) < 0)
        goto out_fail;
    return fut;

out_fail:
    Py_DECREF(fut);
    return NULL;
}

/* The first waiting receive() is answered: the next one (if any) is
 * first now. 0, or -1 with an exception. */
static int next_receiver(sl_asgi_req_t *r)
{
    PyObject *more = r->recv_more;

    Py_CLEAR(r->recv_waiter); /* NULL already when R was released */
    if (more == NULL || PyList_GET_SIZE(more) == 0)
        return 0;
    r->recv_waiter = Py_NewRef(PyList_GET_ITEM(more, 0));
    return PyList_SetSlice(more, 0, 1, NULL);
}

/* A WAKE: hand out what the waiting receive()s can have now, in order. */
static void wake_receivers(sl_asgi_req_t *r)
{
    PyObject *fut, *m, *t, *v, *tb, *res;

    while (r->recv_waiter != NULL) {
        fut = Py_NewRef(r->recv_waiter);
        if (!fut_done(fut)) {
            m = r->kind->recv_try(r);
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
        if (next_receiver(r) < 0) {
            sl_py_log_exception("ASGI: receive() waiters");
            return;
        }
    }
}

/* ------------------------------------------------------------------ */
/* the body and the credit                                            */

int sl_asgi_io_start_body(sl_asgi_req_t *r, long long known)
{
    int rc = sl_writer_start(&r->w, r->status, NULL, 0, r->headers, known,
                             r->want_trailers);

    Py_CLEAR(r->headers);
    if (rc < 0)
        return -1;
    r->state = RS_BODY;
    return 0;
}

int sl_asgi_io_emit(sl_asgi_req_t *r, const void *data, size_t len, bool last)
{
    int rc;

    if (r->state == RS_STARTED &&
        sl_asgi_io_start_body(r, last && !r->want_trailers ? (long long)len
                                                           : -1) < 0)
        return -1;
    rc = sl_writer_body(&r->w, data, len, last);
    if (rc < 0)
        r->gone = true;
    if (r->w.ended)
        sl_asgi_io_ended(r);
    else if (last)
        r->state = RS_TRAILERS;
    return rc == 1 ? 1 : 0;
}

/* r->body_rest is queued SL_WRITER_SLICE bytes at a time until the output
 * is over the credit (ALL, or a client that is gone: the rest at once). */
int sl_asgi_io_emit_rest(sl_asgi_req_t *r, bool all)
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
        rc = sl_asgi_io_emit(r, PyBytes_AS_STRING(b) + r->body_off - n, n,
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
        rc = sl_exch_await(r->ex, r->gen, SL_AWAIT_CREDIT);
        if (rc == 1)
            return 1;
        if (rc < 0)
            r->gone = true;
        if (r->body_rest == NULL)
            return 0;
        rc = sl_asgi_io_emit_rest(r, false); /* the credit is there: go on */
        if (rc <= 0)
            return rc;
    }
}

PyObject *sl_asgi_io_wait_credit(sl_asgi_req_t *r)
{
    PyObject *fut;
    int rc = feed_rest(r);

    if (rc < 0)
        return NULL;
    if (rc == 0)
        return sl_asgi_done_none();
    fut = PyObject_CallNoArgs(r->x->create_future);
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

/* ------------------------------------------------------------------ */
/* the WAKE                                                           */

void sl_asgi_io_wake(sl_asgi_req_t *r)
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
