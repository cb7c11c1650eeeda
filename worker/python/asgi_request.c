/* asgi_request.c - one ASGI request: its app's coroutine, start and end.
 *
 * A request runs its app's first step at once, in a carrier's Task
 * (asgi_carrier.c), and later ones in that Task if the app awaits; each
 * step runs in the request's own context. The request ends the moment the
 * app returns or raises, with no done-callback round trip through the
 * loop. The live list holds every request whose app still runs (the drain
 * cancels them); a connection's slot names the request whose response it
 * carries (WAKE tickets find it there).
 */
#include "config.h"

#include <Python.h>
#include <string.h>

#include "common/log.h"
#include "worker/loop/http.h"
#include "worker/python/asgi_done.h"
#include "worker/python/asgi_internal.h"
#include "worker/python/asgi_scope.h"
#include "worker/python/py.h"

static void req_finish(sl_asgi_req_t *r, bool raised);

/* ------------------------------------------------------------------ */
/* the live list and the slots                                        */

static void live_insert(sl_asgi_req_t *r)
{
    r->prev = NULL;
    r->next = sl_asgi.live;
    if (sl_asgi.live != NULL)
        sl_asgi.live->prev = r;
    sl_asgi.live = r; /* the list keeps the reference it was given */
}

static void live_remove(sl_asgi_req_t *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        sl_asgi.live = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
    Py_DECREF(r);
}

static void slot_clear(sl_asgi_req_t *r)
{
    if (r->on_slot && sl_asgi.slots[r->c->idx] == r)
        sl_asgi.slots[r->c->idx] = NULL;
    r->on_slot = false;
}

/* ------------------------------------------------------------------ */
/* the response's end                                                 */

void sl_asgi_req_ended(sl_asgi_req_t *r)
{
    if (r->state == RS_DONE)
        return;
    r->state = RS_DONE;
    Py_CLEAR(r->headers);
    Py_CLEAR(r->trailers);
    slot_clear(r);
    sl_asgi_channel_release(r);
}

void sl_asgi_req_fail(sl_asgi_req_t *r, int status)
{
    sl_writer_fail(&r->w, status);
    sl_asgi_req_ended(r);
}

/* ------------------------------------------------------------------ */
/* the request object, and a step of its app                         */

static void req_dealloc(sl_asgi_req_t *r)
{
    Py_XDECREF(r->coro);
    Py_XDECREF(r->task);
    Py_XDECREF(r->recv_waiters);
    Py_XDECREF(r->send_waiter);
    Py_XDECREF(r->headers);
    Py_XDECREF(r->trailers);
    Py_XDECREF(r->body_rest);
    Py_XDECREF(r->ws_misuse);
    Py_XDECREF(r->ctx);
    Py_XDECREF(r->ptask);
    PyObject_Free(r);
}

/* The app's coroutine came to an end (RAISED: with the exception set). */
static void req_finish(sl_asgi_req_t *r, bool raised)
{
    PyObject *t, *v, *tb;
    bool quiet, cancelled = false;

    Py_INCREF(r);
    if (raised)
        cancelled = PyErr_ExceptionMatches(sl_asgi.cancelled_error);
    if (r->ws) {
        if (!r->finished)
            sl_asgi_ws_finish(r, raised);
        else if (raised)
            PyErr_Clear();
    } else if (raised) {
        PyErr_Fetch(&t, &v, &tb);
        PyErr_NormalizeException(&t, &v, &tb);
        /* a cancellation we caused, or one after the client left, is no
         * error of the app's */
        quiet = (r->cancelled || r->gone) &&
                PyErr_GivenExceptionMatches(t, sl_asgi.cancelled_error);
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
        sl_asgi_req_fail(r, r->cancelled ? 503 : 500);
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
        sl_asgi_req_fail(r, 500);
    }
    if (!r->finished) {
        r->finished = true;
        slot_clear(r);
        sl_asgi_channel_release(r);
        Py_CLEAR(r->coro);
        Py_CLEAR(r->task); /* the Task holds us: break the cycle */
        if (r->ptask != NULL) {
            sl_asgi_task_finish(r->ptask, cancelled);
            Py_CLEAR(r->ptask);
        }
        live_remove(r);
    }
    Py_DECREF(r);
}

/* Enter R for a step of its app: its context entered, its own task
 * current (*PREV: what was, for req_leave()). False (R ended as failed)
 * when that cannot be done. */
static bool req_enter(sl_asgi_req_t *r, PyObject **prev)
{
    if (PyContext_Enter(r->ctx) == 0) {
        if (sl_asgi_task_enter(r->ptask, prev) == 0)
            return true;
        if (PyContext_Exit(r->ctx) < 0)
            PyErr_Clear(); /* the enter's error is the one to log */
    }
    req_finish(r, true);
    return false;
}

static void req_leave(sl_asgi_req_t *r, PyObject *prev)
{
    sl_asgi_task_leave(prev);
    if (PyContext_Exit(r->ctx) < 0)
        sl_py_log_exception("ASGI: leaving the context of %s", r->what);
}

PySendResult sl_asgi_req_step(sl_asgi_req_t *r, PyObject *arg,
                              PyObject **result)
{
    PyObject *prev;
    PySendResult st;

    *result = NULL;
    if (r->coro == NULL || !req_enter(r, &prev)) {
        *result = Py_NewRef(Py_None);
        return PYGEN_RETURN;
    }
    Py_INCREF(r); /* req_finish() may drop the last reference */
    st = PyIter_Send(r->coro, arg, result);
    if (st != PYGEN_NEXT) {
        if (st == PYGEN_RETURN)
            Py_CLEAR(*result);
        req_finish(r, st == PYGEN_ERROR);
        *result = Py_NewRef(Py_None);
        st = PYGEN_RETURN;
    }
    req_leave(r, prev);
    Py_DECREF(r);
    return st;
}

PyObject *sl_asgi_req_throw(sl_asgi_req_t *r, PyObject *const *args,
                            Py_ssize_t n)
{
    PyObject *a[4], *res, *prev;
    Py_ssize_t i;

    if (n < 1 || n > 3) {
        PyErr_SetString(PyExc_TypeError, "throw() takes 1 to 3 arguments");
        return NULL;
    }
    if (r->coro == NULL)
        return sl_asgi_done_raise(args, n);
    if (!req_enter(r, &prev)) {
        PyErr_SetNone(PyExc_StopIteration);
        return NULL;
    }
    Py_INCREF(r);
    a[0] = r->coro;
    for (i = 0; i < n; i++)
        a[i + 1] = args[i];
    res = PyObject_VectorcallMethod(sl_asgi_names[N_THROW], a, (size_t)(n + 1),
                                    NULL);
    if (res == NULL) {
        if (PyErr_ExceptionMatches(PyExc_StopIteration)) {
            PyErr_Clear();
            req_finish(r, false);
        } else {
            req_finish(r, true);
        }
    }
    req_leave(r, prev);
    if (res == NULL)
        PyErr_SetNone(PyExc_StopIteration);
    Py_DECREF(r);
    return res;
}

void sl_asgi_req_close(sl_asgi_req_t *r)
{
    PyObject *res;

    if (r->coro == NULL)
        return;
    res = PyObject_CallMethodNoArgs(r->coro, sl_asgi_names[N_CLOSE]);
    if (res == NULL)
        PyErr_Clear();
    Py_XDECREF(res);
    r->gone = true;
    req_finish(r, false);
}

static PyObject *req_repr(sl_asgi_req_t *r)
{
    return PyUnicode_FromFormat("<sluice ASGI request %s>", r->what);
}

static PyTypeObject req_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice.ASGIRequest",
    .tp_basicsize = sizeof(sl_asgi_req_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "one ASGI request: its app's coroutine and its response",
    .tp_dealloc = (destructor)req_dealloc,
    .tp_repr = (reprfunc)req_repr,
};

/* ------------------------------------------------------------------ */
/* starting a request                                                 */

/* Answer request GEN of C with STATUS without starting it. */
static void refuse(sl_conn_t *c, uint32_t gen, int status)
{
    sl_writer_t w;

    sl_writer_init(&w, &sl_writer_asgi, &sl_asgi.scratch, c, gen);
    sl_writer_fail(&w, status);
}

static sl_asgi_req_t *req_new(sl_conn_t *c, uint32_t gen)
{
    sl_asgi_req_t *r = PyObject_New(sl_asgi_req_t, &req_type);
    const sl_req_t *q = &c->req;

    if (r == NULL)
        return NULL;
    memset((char *)r + sizeof(PyObject), 0, sizeof(*r) - sizeof(PyObject));
    r->c = c;
    r->gen = gen;
    sl_writer_init(&r->w, &sl_writer_asgi, &sl_asgi.scratch, c, gen);
    r->body_left = q->chunked ? 0 : q->content_length;
    /* a WebSocket's HTTP answer (a denial) ends the connection: the loop
     * took its request as not keep-alive, as every upgrade */
    r->ws = q->websocket;
    r->what_len = sl_http_log_name(q, r->what, sizeof(r->what));
    return r;
}

/* The app's awaitable as an iterator the request can drive. */
static PyObject *awaitable_iter(PyObject *aw)
{
    PyAsyncMethods *am = Py_TYPE(aw)->tp_as_async;
    PyObject *it;

    if (PyCoro_CheckExact(aw))
        return aw;
    if (am == NULL || am->am_await == NULL) {
        PyErr_Format(PyExc_TypeError,
                     "the ASGI app returned %s, not an awaitable",
                     Py_TYPE(aw)->tp_name);
        Py_DECREF(aw);
        return NULL;
    }
    it = am->am_await(aw);
    Py_DECREF(aw);
    return it;
}

void sl_asgi_req_start(sl_conn_t *c, uint32_t gen)
{
    PyObject *args[3] = {NULL, NULL, NULL}, *aw;
    sl_asgi_req_t *r = req_new(c, gen);

    if (r == NULL) {
        sl_py_log_exception("ASGI: cannot start a request");
        refuse(c, gen, 500);
        return;
    }
    live_insert(r);
    args[0] = r->ws ? sl_asgi_scope_new_ws(c, sl_asgi.state)
                    : sl_asgi_scope_new(c, sl_asgi.state);
    args[1] = sl_asgi_channel_new(r, false);
    args[2] = sl_asgi_channel_new(r, true);
    /* each request gets a fresh copy of the loop's base context, never of
     * the context a callback happens to run in (in inline mode that can
     * be the previous request's) */
    r->ctx = PyContext_Copy(sl_asgi.base_ctx);
    r->ptask = sl_asgi_task_new(r);
    if (args[0] == NULL || args[1] == NULL || args[2] == NULL ||
        r->ctx == NULL || r->ptask == NULL)
        goto out_fail;
    aw = PyObject_Vectorcall(sl_asgi.app, args, 3, NULL);
    if (aw == NULL || (r->coro = awaitable_iter(aw)) == NULL)
        goto out_fail;
    Py_CLEAR(args[0]);
    Py_CLEAR(args[1]);
    Py_CLEAR(args[2]);
    sl_asgi.slots[c->idx] = r;
    r->on_slot = true;
    /* the first step, at once (asgi_carrier.c) */
    if (sl_asgi_carrier_run(r) < 0) {
        PyObject *t, *v, *tb, *res;
        PyErr_Fetch(&t, &v, &tb);
        res = PyObject_CallMethodNoArgs(r->coro, sl_asgi_names[N_CLOSE]);
        if (res == NULL)
            PyErr_Clear();
        Py_XDECREF(res);
        PyErr_Restore(t, v, tb);
        req_finish(r, true);
    }
    return;

out_fail:
    Py_XDECREF(args[0]);
    Py_XDECREF(args[1]);
    Py_XDECREF(args[2]);
    req_finish(r, true);
}

void sl_asgi_req_ticket(const sl_ticket_t *t)
{
    sl_conn_t *c = &sl_asgi.p->pool.conns[t->idx];
    sl_asgi_req_t *r;

    if (t->kind == SL_TICKET_SUBMIT) {
        sl_conn_started(c, t->gen); /* queue time ends */
        sl_asgi_req_start(c, t->gen);
    } else {
        r = sl_asgi.slots[t->idx];
        if (r != NULL && r->gen == t->gen)
            sl_asgi_channel_wake(r);
    }
    if (PyErr_Occurred())
        sl_py_log_exception("ASGI: unexpected error on a ticket");
}

void sl_asgi_req_cancel_all(void)
{
    sl_asgi_req_t *r, *next;
    PyObject *res;

    for (r = sl_asgi.live; r != NULL; r = next) {
        Py_INCREF(r);
        r->cancelled = true;
        if (r->task != NULL) {
            res = PyObject_CallMethodNoArgs(r->task, sl_asgi_names[N_CANCEL]);
            if (res == NULL)
                sl_py_log_exception("ASGI: cancelling %s", r->what);
            Py_XDECREF(res);
        }
        next = r->next;
        Py_DECREF(r);
    }
}

int sl_asgi_req_init(void)
{
    return PyType_Ready(&req_type);
}
