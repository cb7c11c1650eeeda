/* asgi_request.c - one ASGI request: the hub its leaves are called from.
 *
 * A request runs its app's first step at once, in a carrier's Task
 * (asgi_carrier.c), and later ones in that Task if the app awaits: to its
 * carrier the request is a coroutine (am_send runs a step, throw() and
 * close() are its app's). Each step runs in the request's own context,
 * with its own task object current (asgi_task.c). The request ends the
 * moment the app returns or raises, with no done-callback round trip
 * through the loop. The live list holds every request whose app still
 * runs (the drain cancels them); a connection's slot names the request
 * whose response it carries (WAKE tickets find it there).
 *
 * A request picks its scope's kind once, when it is made: http
 * (asgi_channel.c) or websocket (asgi_ws.c), a table of what differs. Its
 * receive() and send() callables are here: receive() is asgi_io.c's wait
 * on the kind's next message, and send() reads the message's type once
 * and dispatches through one table of routes to the kind's handlers.
 */
#include "config.h"

#include <Python.h>
#include <stdarg.h>
#include <string.h>

#include "common/log.h"
#include "worker/loop/http.h"
#include "worker/python/asgi_done.h"
#include "worker/python/asgi_internal.h"
#include "worker/python/py.h"

static void req_finish(sl_asgi_req_t *r, bool raised);

static sl_py_free_t req_free;  /* request objects */
static sl_py_free_t chan_free; /* receive and send callables */

/* ------------------------------------------------------------------ */
/* the live list                                                      */

static void live_insert(sl_asgi_req_t *r)
{
    r->prev = NULL;
    r->next = r->x->live;
    if (r->x->live != NULL)
        r->x->live->prev = r;
    r->x->live = r; /* the list keeps the reference it was given */
}

static void live_remove(sl_asgi_req_t *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        r->x->live = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
    Py_DECREF(r);
}

/* ------------------------------------------------------------------ */
/* the request object, and a step of its app                         */

static void req_dealloc(sl_asgi_req_t *r)
{
    Py_XDECREF(r->coro);
    Py_XDECREF(r->task);
    Py_XDECREF(r->recv_waiter);
    Py_XDECREF(r->recv_more);
    Py_XDECREF(r->send_waiter);
    Py_XDECREF(r->headers);
    Py_XDECREF(r->trailers);
    Py_XDECREF(r->body_rest);
    Py_XDECREF(r->ws_misuse);
    Py_XDECREF(r->ws_end_reason);
    Py_XDECREF(r->ctx);
    Py_XDECREF(r->ptask);
    if (!sl_py_free_push(&req_free, (PyObject *)r))
        PyObject_Free(r);
}

/* The app's coroutine came to an end (RAISED: with the exception set). */
static void req_finish(sl_asgi_req_t *r, bool raised)
{
    bool cancelled = false;

    Py_INCREF(r);
    if (raised)
        cancelled = PyErr_ExceptionMatches(r->x->cancelled_error);
    r->kind->finish(r, raised);
    if (!r->finished) {
        r->finished = true;
        sl_asgi_io_release(r);
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
        if (sl_asgi_task_enter(r->x, r->ptask, prev) == 0)
            return true;
        if (PyContext_Exit(r->ctx) < 0)
            PyErr_Clear(); /* the enter's error is the one to log */
    }
    req_finish(r, true);
    return false;
}

static void req_leave(sl_asgi_req_t *r, PyObject *prev)
{
    sl_asgi_task_leave(r->x, prev);
    if (PyContext_Exit(r->ctx) < 0)
        sl_py_log_exception("ASGI: leaving the context of %s", r->what);
}

/* One step of R's app, in R's context: send ARG in (am_send). PYGEN_NEXT
 * with what it yielded in *RESULT; or PYGEN_RETURN (None in *RESULT) once
 * the app returned or raised, which ended R. */
static PySendResult req_step(sl_asgi_req_t *r, PyObject *arg, PyObject **result)
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

/* throw(ARGS) into R's app, in R's context: what it yielded, or NULL
 * with StopIteration once the app ended (R ended as by a step); with the
 * exception itself when the app had ended before. */
static PyObject *req_throw(sl_asgi_req_t *r, PyObject *const *args,
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

/* close(): close R's app coroutine (its Task is going away), end R. */
static PyObject *req_close(sl_asgi_req_t *r, PyObject *unused)
{
    PyObject *res;

    (void)unused;
    if (r->coro == NULL)
        Py_RETURN_NONE;
    res = PyObject_CallMethodNoArgs(r->coro, sl_asgi_names[N_CLOSE]);
    if (res == NULL)
        PyErr_Clear();
    Py_XDECREF(res);
    r->gone = true;
    req_finish(r, false);
    Py_RETURN_NONE;
}

static PyObject *req_repr(sl_asgi_req_t *r)
{
    return PyUnicode_FromFormat("<sluice ASGI request %s>", r->what);
}

static PyMethodDef req_methods[] = {
    {"throw", (PyCFunction)(void (*)(void))req_throw, METH_FASTCALL, NULL},
    {"close", (PyCFunction)req_close, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyAsyncMethods req_async = {
    .am_send = (sendfunc)req_step,
};

static PyTypeObject req_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice.ASGIRequest",
    .tp_basicsize = sizeof(sl_asgi_req_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "one ASGI request: its app's coroutine and its response",
    .tp_dealloc = (destructor)req_dealloc,
    .tp_repr = (reprfunc)req_repr,
    .tp_as_async = &req_async,
    .tp_methods = req_methods,
};

/* ------------------------------------------------------------------ */
/* receive() and send()                                               */

/* receive and send: one small callable each per request. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    sl_asgi_req_t *req; /* owned */
} chan_t;

/* send()'s routes: a message type of a scope kind, and its handler. */
static const struct {
    int kind; /* SL_ASGI_HTTP, SL_ASGI_WS */
    int name; /* N_*: the message's type */
    sl_asgi_send_fn fn;
} routes[] = {
    {SL_ASGI_HTTP, N_RESPONSE_BODY, sl_asgi_http_body},
    {SL_ASGI_HTTP, N_RESPONSE_START, sl_asgi_http_start},
    {SL_ASGI_HTTP, N_RESPONSE_TRAILERS, sl_asgi_http_trailers},
    {SL_ASGI_HTTP, N_RESPONSE_PATHSEND, sl_asgi_http_pathsend},
    {SL_ASGI_WS, N_WS_SEND, sl_asgi_ws_send},
    {SL_ASGI_WS, N_WS_ACCEPT, sl_asgi_ws_accept},
    {SL_ASGI_WS, N_WS_CLOSE, sl_asgi_ws_close},
    {SL_ASGI_WS, N_WS_RESPONSE_START, sl_asgi_ws_denial_start},
    {SL_ASGI_WS, N_WS_RESPONSE_BODY, sl_asgi_ws_denial_body},
};

#define NROUTES (sizeof(routes) / sizeof(routes[0]))

/* The last type str each route matched (owned): apps send the same
 * literal each time, found again by its address. */
static PyObject *route_seen[NROUTES];

/* An error in what the app sent: raise EXC in the app, and let R's kind
 * end what must be. NULL. */
static PyObject *send_fail(sl_asgi_req_t *r, PyObject *exc, const char *fmt,
                           ...)
{
    va_list ap;

    va_start(ap, fmt);
    PyErr_FormatV(exc, fmt, ap);
    va_end(ap);
    return r->kind->error(r);
}

static PyObject *req_send(sl_asgi_req_t *r, PyObject *msg)
{
    sl_asgi_msg_t m;
    PyObject *type;
    size_t i;

    /* an app that sends again before its last send() is done: what that
     * one left goes first, whole */
    if (r->body_rest != NULL && sl_asgi_io_emit_rest(r, true) < 0)
        return r->kind->error(r);
    if (!PyDict_Check(msg))
        return send_fail(r, PyExc_TypeError,
                         "ASGI: send() takes a dict message, not %s",
                         Py_TYPE(msg)->tp_name);
    if (sl_asgi_msg_read(msg, &m) < 0)
        return r->kind->error(r);
    type = m.v[N_TYPE];
    if (type == NULL)
        return send_fail(r, PyExc_KeyError,
                         "ASGI: send(): the message has no 'type'");
    for (i = 0; i < NROUTES; i++)
        if (type == route_seen[i] && routes[i].kind == r->kind->kind)
            return routes[i].fn(r, &m);
    for (i = 0; i < NROUTES; i++)
        if (routes[i].kind == r->kind->kind &&
            sl_asgi_str_is(type, sl_asgi_names[routes[i].name])) {
            if (PyUnicode_CheckExact(type))
                Py_XSETREF(route_seen[i], Py_NewRef(type));
            return routes[i].fn(r, &m);
        }
    return send_fail(r, PyExc_ValueError,
                     "ASGI: send(): unexpected message type %R for %s scope",
                     type, r->kind->name);
}

static PyObject *receive_vc(PyObject *self, PyObject *const *args,
                            size_t nargsf, PyObject *kw)
{
    (void)args;
    if (PyVectorcall_NARGS(nargsf) != 0 || kw != NULL) {
        PyErr_SetString(PyExc_TypeError, "receive() takes no arguments");
        return NULL;
    }
    return sl_asgi_io_receive(((chan_t *)self)->req);
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
    if (!sl_py_free_push(&chan_free, (PyObject *)ch))
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

/* R's receive() (SEND false) or send() callable; a new reference, or NULL
 * with an exception. */
static PyObject *chan_new(sl_asgi_req_t *r, bool send)
{
    PyTypeObject *tp = send ? &send_type : &receive_type;
    chan_t *ch = (chan_t *)sl_py_free_pop(&chan_free, tp);

    if (ch == NULL)
        ch = PyObject_New(chan_t, tp);

    if (ch == NULL)
        return NULL;
    ch->vectorcall = send ? send_vc : receive_vc;
    Py_INCREF(r);
    ch->req = r;
    return (PyObject *)ch;
}

/* ------------------------------------------------------------------ */
/* starting a request                                                 */

/* Answer request GEN of C with STATUS without starting it. */
static void refuse(sl_asgi_t *x, sl_exch_t *c, uint32_t gen, int status)
{
    sl_writer_t w;

    sl_writer_init(&w, &sl_writer_asgi, &x->scratch, c, gen);
    sl_writer_fail(&w, status);
}

static sl_asgi_req_t *req_new(sl_asgi_t *x, sl_exch_t *c, uint32_t gen)
{
    sl_asgi_req_t *r = (sl_asgi_req_t *)sl_py_free_pop(&req_free, &req_type);
    const sl_req_t *q = &c->req;

    if (r == NULL)
        r = PyObject_New(sl_asgi_req_t, &req_type);
    if (r == NULL)
        return NULL;
    memset((char *)r + sizeof(PyObject), 0, sizeof(*r) - sizeof(PyObject));
    r->x = x;
    r->ex = c;
    r->gen = gen;
    sl_writer_init(&r->w, &sl_writer_asgi, &x->scratch, c, gen);
    r->body_left = q->chunked ? 0 : q->content_length;
    /* a WebSocket's HTTP answer (a denial) ends the connection: the loop
     * took its request as not keep-alive, as every upgrade */
    r->kind = q->websocket ? &sl_asgi_ws : &sl_asgi_http;
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

/* R's first step yielded: the carrier's Task takes R over. Pass on what
 * cancel() held meanwhile; all_tasks() shows the carrier by R's name. */
static void req_handed(sl_asgi_req_t *r)
{
    PyObject *name, *res;

    if (r->ptask != NULL && sl_asgi_task_handed(r->ptask, r->task) < 0)
        sl_py_log_exception("ASGI: passing a cancel() on to %s", r->what);
    name = r->ptask ? sl_asgi_task_name(r->ptask) : NULL;
    if (name != NULL) {
        res =
            PyObject_CallMethodOneArg(r->task, sl_asgi_names[N_SET_NAME], name);
        if (res == NULL)
            PyErr_Clear();
        Py_XDECREF(res);
        Py_DECREF(name);
    } else {
        PyErr_Clear();
    }
}

/* R's first step, at once; if the app awaits something not complete, a
 * carrier's Task (asgi_carrier.c) carries R on, taken only then: most
 * requests never wait. 0, or -1 with an exception (R waits, no carrier
 * took it). */
static int first_step(sl_asgi_req_t *r)
{
    sl_asgi_carrier_t *k;
    PyObject *res;

    if (req_step(r, Py_None, &res) != PYGEN_NEXT) {
        Py_XDECREF(res);
        return 0;
    }
    k = sl_asgi_carrier_take(r->x);
    if (k == NULL) {
        Py_DECREF(res);
        return -1;
    }
    sl_asgi_carrier_hold(k, r, res);
    req_handed(r);
    sl_asgi_carrier_put(k);
    return 0;
}

void sl_asgi_req_start(sl_asgi_t *x, sl_exch_t *c, uint32_t gen)
{
    PyObject *args[3] = {NULL, NULL, NULL}, *aw;
    sl_asgi_req_t *r = req_new(x, c, gen);

    if (r == NULL) {
        sl_py_log_exception("ASGI: cannot start a request");
        refuse(x, c, gen, 500);
        return;
    }
    live_insert(r);
    args[0] = r->kind->scope(c, x->state);
    args[1] = chan_new(r, false);
    args[2] = chan_new(r, true);
    /* each request gets a fresh copy of the loop's base context, never of
     * the context a callback happens to run in (in inline mode that can
     * be the previous request's) */
    r->ctx = PyContext_Copy(x->base_ctx);
    r->ptask = sl_asgi_task_new(r);
    if (args[0] == NULL || args[1] == NULL || args[2] == NULL ||
        r->ctx == NULL || r->ptask == NULL)
        goto out_fail;
    aw = PyObject_Vectorcall(x->app, args, 3, NULL);
    if (aw == NULL || (r->coro = awaitable_iter(aw)) == NULL)
        goto out_fail;
    Py_CLEAR(args[0]);
    Py_CLEAR(args[1]);
    Py_CLEAR(args[2]);
    x->slots[c->id] = r;
    r->on_slot = true;
    if (first_step(r) < 0) {
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

void sl_asgi_req_ticket(sl_asgi_t *x, const sl_ticket_t *t)
{
    sl_exch_t *c = sl_pump_exch(x->p, t->idx);
    sl_asgi_req_t *r;

    if (t->kind == SL_TICKET_SUBMIT) {
        sl_exch_started(c, t->gen); /* queue time ends */
        sl_asgi_req_start(x, c, t->gen);
    } else {
        r = x->slots[t->idx];
        if (r != NULL && r->gen == t->gen)
            sl_asgi_io_wake(r);
    }
    if (PyErr_Occurred())
        sl_py_log_exception("ASGI: unexpected error on a ticket");
}

void sl_asgi_req_cancel_all(sl_asgi_t *x)
{
    sl_asgi_req_t *r, *next;
    PyObject *res;

    for (r = x->live; r != NULL; r = next) {
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
    if (PyType_Ready(&req_type) < 0 || PyType_Ready(&receive_type) < 0 ||
        PyType_Ready(&send_type) < 0)
        return -1;
    return 0;
}
