/* asgi.c - ASGI 3.0 HTTP on one asyncio event loop per worker.
 *
 * The one idea: an await costs nothing when its answer is already known.
 * receive() and send() are C callables that return a completed awaitable
 * (its am_send answers at once, so `await` never leaves the coroutine)
 * whenever the body bytes are there, the credit allows the write, or the
 * message is an error to raise. Only a real wait creates a loop Future; the
 * pump resolves it with a WAKE ticket once the connection changes. A
 * hello-world request thus costs one Task and no Future.
 *
 * Each request is a real asyncio Task, so current_task(), contextvars and
 * cancellation are asyncio's own. The Task's coroutine is the request
 * object itself: a thin C coroutine that forwards to the app's and ends
 * the request the moment the app returns or raises, with no done-callback
 * round trip through the loop.
 *
 * Pump mode: a lane thread runs the loop holding the GIL (released in the
 * loop's poll); the pump writes an eventfd once per pass and on_tickets()
 * takes the whole batch. Inline mode: the same loop runs on the loop thread
 * and drives libev (ev_run(EVRUN_NOWAIT)) when libev's backend fd is
 * readable, after the app queued output, and on a 100 ms timer.
 */
#include "config.h"

#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "worker/python/asgi.h"
#include "worker/python/asgi_done.h"
#include "worker/python/asgi_lifespan.h"
#include "worker/python/asgi_scope.h"
#include "worker/loop/http.h"
#include "worker/python/py.h"
#include "worker/python/writer.h"

#define BODY_MSG_MAX    (256 * 1024) /* a sized body message, at most */
#define BODY_MSG_CHUNK  (64 * 1024)  /* a chunked body message, at most */
#define INLINE_TICK     0.1          /* inline: libev timers run this often */
#define CANCEL_SECS     1.0          /* time cancelled requests get to unwind */
#define LIFESPAN_BUDGET 5.0          /* lifespan shutdown, at most */
#define TICKET_BATCH    256

enum { RS_INIT, RS_STARTED, RS_BODY, RS_TRAILERS, RS_DONE };

/* One request: the Task's coroutine and the state of its response. */
typedef struct req {
    PyObject_HEAD
    sl_conn_t *c; /* borrowed: pool slots outlive requests */
    uint32_t gen;
    struct req *prev, *next; /* the live list, which holds a reference */
    PyObject *coro;          /* owned: the app's awaitable, while it runs */
    PyObject *task;          /* owned while the coroutine runs */
    PyObject *recv_waiters;  /* owned list of Futures, or NULL */
    PyObject *send_waiter;   /* owned Future, or NULL */
    PyObject *headers;       /* owned: http.response.start's, until sent */
    PyObject *trailers;      /* owned list of trailer pairs, or NULL */
    sl_writer_t w;           /* the response */
    int status;              /* http.response.start's, until sent */
    int state;               /* RS_* */
    uint64_t body_left;      /* sized request body not yet received */
    bool want_trailers;      /* http.response.start said trailers: True */
    bool body_done;          /* receive() gave more_body: False */
    bool gone;               /* the client left, or the request is stale */
    bool finished;           /* the app's coroutine is over */
    bool on_slot;            /* slots[] points here */
    bool cancelled;          /* cancelled by the drain */
    char what[96];           /* "GET /path", for the log */
} req_t;

/* receive and send: one small callable each per request. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    req_t *req; /* owned */
} chan_t;

static struct {
    sl_pump_t *p;              /* borrowed */
    PyObject *app;             /* owned */
    PyObject *loop;            /* owned */
    PyObject *create_future;   /* owned: loop.create_future */
    PyObject *task_type;       /* owned: asyncio.Task */
    PyObject *kw_task;         /* owned: ("loop", "context") */
    PyObject *base_ctx;        /* owned: the context every Task copies */
    PyObject *cancelled_error; /* owned: asyncio.CancelledError */
    PyObject *state;           /* owned: lifespan state, or NULL */
    PyObject *empty;           /* owned: b"" */
    PyObject *empty_tuple;     /* owned: () */
    req_t **slots;             /* per connection: the request whose
                                  response it carries (borrowed) */
    req_t *live;               /* every request whose app still runs */
    sl_buf_t scratch;          /* a head or trailers being sent */
    const char *loop_name;
    bool started;
    bool inline_mode;
    bool stopping;

    /* pump mode: the lane thread */
    int efd;
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int boot; /* 0 booting, 1 serving, -1 failed */
    bool exited;
    atomic_bool finish_asked;
    atomic_bool stop_asked;
    double budget; /* for lifespan shutdown */

    /* inline mode */
    sl_conn_t **dirty; /* connections with output or a window to reopen */
    bool *is_dirty;
    uint32_t ndirty;
    bool kick_scheduled;
    PyObject *on_ev;   /* owned: drive libev */
    PyObject *on_tick; /* owned: the 100 ms timer */
} L = {.efd = -1};

/* Interned names, built once from this table. */
enum {
    K_TYPE,
    K_PATH,
    K_HEADERS,
    K_BODY,
    K_MORE_BODY,
    K_STATUS,
    K_TRAILERS,
    K_MORE_TRAILERS,
    K_HTTP_REQUEST,
    K_HTTP_DISCONNECT,
    K_RESPONSE_START,
    K_RESPONSE_BODY,
    K_RESPONSE_TRAILERS,
    K_RESPONSE_PATHSEND,
    K_SET_RESULT,
    K_DONE,
    K_CANCEL,
    K_THROW,
    K_CLOSE,
    K_COUNT
};
static const char *const key_names[K_COUNT] = {
    "type",
    "path",
    "headers",
    "body",
    "more_body",
    "status",
    "trailers",
    "more_trailers",
    "http.request",
    "http.disconnect",
    "http.response.start",
    "http.response.body",
    "http.response.trailers",
    "http.response.pathsend",
    "set_result",
    "done",
    "cancel",
    "throw",
    "close",
};
static PyObject *K[K_COUNT];

static PyTypeObject req_type, receive_type, send_type;

static void req_finish(req_t *r, bool raised);
static void mark_dirty(sl_conn_t *c);

/* ------------------------------------------------------------------ */
/* small helpers                                                      */

/* Is S the interned string KEY? Apps write message types as literals that
 * are not interned (they hold dots), so compare the text when needed. */
static bool str_is(PyObject *s, PyObject *key)
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
    PyObject *r = PyObject_CallMethodNoArgs(fut, K[K_DONE]);
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
    r = PyObject_CallMethodOneArg(fut, K[K_SET_RESULT], v);
    if (r == NULL)
        sl_py_log_exception("ASGI: resolving a future failed");
    Py_XDECREF(r);
}

static PyObject *disconnect_msg(void)
{
    PyObject *m = PyDict_New();

    if (m != NULL && PyDict_SetItem(m, K[K_TYPE], K[K_HTTP_DISCONNECT]) < 0)
        Py_CLEAR(m);
    return m;
}

/* {"type": "http.request", "body": BODY, "more_body": MORE}; steals BODY. */
static PyObject *request_msg(PyObject *body, bool more)
{
    PyObject *m = PyDict_New();

    if (m == NULL || PyDict_SetItem(m, K[K_TYPE], K[K_HTTP_REQUEST]) < 0 ||
        PyDict_SetItem(m, K[K_BODY], body) < 0 ||
        PyDict_SetItem(m, K[K_MORE_BODY], more ? Py_True : Py_False) < 0)
        Py_CLEAR(m);
    Py_DECREF(body);
    return m;
}

static void efd_write(void)
{
    uint64_t one = 1;

    if (L.efd >= 0 && write(L.efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        sl_log_errno(SL_LOG_ERROR, "write() to the ASGI lane's eventfd");
}

/* The request is its own awaitable (a Task's coroutine never is awaited,
 * but asyncio's checks want am_await). */
static PyObject *self_await(PyObject *o)
{
    return Py_NewRef(o);
}

/* ------------------------------------------------------------------ */
/* the live list and the slots                                        */

static void live_insert(req_t *r)
{
    r->prev = NULL;
    r->next = L.live;
    if (L.live != NULL)
        L.live->prev = r;
    L.live = r; /* the list keeps the reference it was given */
}

static void live_remove(req_t *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        L.live = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
    Py_DECREF(r);
}

static void slot_clear(req_t *r)
{
    if (r->on_slot && L.slots[r->c->idx] == r)
        L.slots[r->c->idx] = NULL;
    r->on_slot = false;
}

/* Every receive() still waiting gets http.disconnect; a send() waiting for
 * credit returns. */
static void release_waiters(req_t *r)
{
    PyObject *list = r->recv_waiters, *msg, *fut;
    Py_ssize_t i;

    r->recv_waiters = NULL;
    if (list != NULL) {
        for (i = 0; i < PyList_GET_SIZE(list); i++) {
            msg = disconnect_msg();
            if (msg == NULL) {
                sl_py_log_exception("ASGI: http.disconnect");
                break;
            }
            fut_resolve(PyList_GET_ITEM(list, i), msg);
            Py_DECREF(msg);
        }
        Py_DECREF(list);
    }
    fut = r->send_waiter;
    r->send_waiter = NULL;
    if (fut != NULL) {
        fut_resolve(fut, Py_None);
        Py_DECREF(fut);
    }
}

/* ------------------------------------------------------------------ */
/* the response's end                                                 */

/* The writer ended the response (the connection moved on): what waits
 * for this request is released. Once per request. */
static void req_ended(req_t *r)
{
    if (r->state == RS_DONE)
        return;
    r->state = RS_DONE;
    Py_CLEAR(r->headers);
    Py_CLEAR(r->trailers);
    slot_clear(r);
    release_waiters(r);
}

/* End a broken response: an error answer when nothing went out yet, a
 * closed connection otherwise. */
static void req_end_error(req_t *r, int status)
{
    sl_writer_fail(&r->w, status);
    req_ended(r);
}

/* An error in what the app sent: the exception stays set for the app to
 * see, the connection gets a 500 or is closed. Returns NULL. */
static PyObject *proto_error(req_t *r)
{
    PyObject *t, *v, *tb;

    PyErr_Fetch(&t, &v, &tb);
    req_end_error(r, 500);
    PyErr_Restore(t, v, tb);
    return NULL;
}

static PyObject *proto_fail(req_t *r, PyObject *exc, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    PyErr_FormatV(exc, fmt, ap);
    va_end(ap);
    return proto_error(r);
}

/* ------------------------------------------------------------------ */
/* the request object: the Task's coroutine                           */

static void req_dealloc(req_t *r)
{
    Py_XDECREF(r->coro);
    Py_XDECREF(r->task);
    Py_XDECREF(r->recv_waiters);
    Py_XDECREF(r->send_waiter);
    Py_XDECREF(r->headers);
    Py_XDECREF(r->trailers);
    PyObject_Free(r);
}

/* The app's coroutine came to an end (RAISED: with the exception set). */
static void req_finish(req_t *r, bool raised)
{
    PyObject *t, *v, *tb;
    bool quiet;

    Py_INCREF(r);
    if (raised) {
        PyErr_Fetch(&t, &v, &tb);
        PyErr_NormalizeException(&t, &v, &tb);
        /* a cancellation we caused, or one after the client left, is no
         * error of the app's */
        quiet = (r->cancelled || r->gone) &&
                PyErr_GivenExceptionMatches(t, L.cancelled_error);
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
        req_end_error(r, r->cancelled ? 503 : 500);
    } else if (!r->w.ended) {
        if (r->state == RS_INIT)
            sl_error("ASGI app returned without starting a response to %s",
                     r->what);
        else
            sl_error("ASGI app returned without completing the response "
                     "to %s",
                     r->what);
        req_end_error(r, 500);
    }
    if (!r->finished) {
        r->finished = true;
        slot_clear(r);
        release_waiters(r);
        Py_CLEAR(r->coro);
        Py_CLEAR(r->task); /* the Task holds us: break the cycle */
        live_remove(r);
    }
    Py_DECREF(r);
}

static PySendResult req_am_send(req_t *r, PyObject *arg, PyObject **result)
{
    PySendResult st;

    if (r->coro == NULL) {
        *result = NULL;
        PyErr_SetString(PyExc_RuntimeError,
                        "the ASGI request's coroutine has finished");
        return PYGEN_ERROR;
    }
    st = PyIter_Send(r->coro, arg, result);
    if (st == PYGEN_NEXT)
        return st;
    if (st == PYGEN_RETURN)
        Py_CLEAR(*result);
    req_finish(r, st == PYGEN_ERROR);
    Py_INCREF(Py_None);
    *result = Py_None;
    return PYGEN_RETURN;
}

static PyObject *req_iternext(req_t *r)
{
    PyObject *res;

    if (req_am_send(r, Py_None, &res) == PYGEN_NEXT)
        return res;
    Py_XDECREF(res);
    return NULL;
}

static PyObject *req_send_meth(req_t *r, PyObject *arg)
{
    PyObject *res;
    PySendResult st = req_am_send(r, arg, &res);

    if (st == PYGEN_NEXT)
        return res;
    if (st == PYGEN_RETURN) {
        Py_DECREF(res);
        PyErr_SetNone(PyExc_StopIteration);
    }
    return NULL;
}

/* throw(exc): how a Task delivers cancellation. */
static PyObject *req_throw(req_t *r, PyObject *const *args, Py_ssize_t n)
{
    PyObject *a[4], *res;
    Py_ssize_t i;

    if (n < 1 || n > 3) {
        PyErr_SetString(PyExc_TypeError, "throw() takes 1 to 3 arguments");
        return NULL;
    }
    if (r->coro == NULL)
        return sl_asgi_done_raise(args, n);
    a[0] = r->coro;
    for (i = 0; i < n; i++)
        a[i + 1] = args[i];
    res = PyObject_VectorcallMethod(K[K_THROW], a, (size_t)(n + 1), NULL);
    if (res != NULL)
        return res;
    if (PyErr_ExceptionMatches(PyExc_StopIteration)) {
        PyErr_Clear();
        req_finish(r, false);
    } else {
        req_finish(r, true);
    }
    PyErr_SetNone(PyExc_StopIteration);
    return NULL;
}

static PyObject *req_close(req_t *r, PyObject *unused)
{
    PyObject *res;

    (void)unused;
    if (r->coro == NULL)
        Py_RETURN_NONE;
    res = PyObject_CallMethodNoArgs(r->coro, K[K_CLOSE]);
    if (res == NULL)
        PyErr_Clear();
    Py_XDECREF(res);
    r->gone = true;
    req_finish(r, false);
    Py_RETURN_NONE;
}

/* The rest of the coroutine interface (cr_frame, __qualname__, ...) is the
 * app's coroutine's, for asyncio's and anyio's introspection. */
static PyObject *req_getattro(req_t *r, PyObject *name)
{
    PyObject *v = PyObject_GenericGetAttr((PyObject *)r, name);

    if (v != NULL || r->coro == NULL ||
        !PyErr_ExceptionMatches(PyExc_AttributeError))
        return v;
    PyErr_Clear();
    return PyObject_GetAttr(r->coro, name);
}

static PyObject *req_repr(req_t *r)
{
    return PyUnicode_FromFormat("<sluice ASGI request %s>", r->what);
}

static PyMethodDef req_methods[] = {
    {"send", (PyCFunction)req_send_meth, METH_O, NULL},
    {"throw", (PyCFunction)(void (*)(void))req_throw, METH_FASTCALL, NULL},
    {"close", (PyCFunction)req_close, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyAsyncMethods req_async = {
    .am_await = self_await,
    .am_send = (sendfunc)req_am_send,
};

static PyTypeObject req_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice.ASGIRequest",
    .tp_basicsize = sizeof(req_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "one ASGI HTTP request: the coroutine its Task runs",
    .tp_dealloc = (destructor)req_dealloc,
    .tp_repr = (reprfunc)req_repr,
    .tp_getattro = (getattrofunc)req_getattro,
    .tp_as_async = &req_async,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)req_iternext,
    .tp_methods = req_methods,
};

/* ------------------------------------------------------------------ */
/* receive()                                                          */

/* The next body message if bytes (or the end) are there; NULL without an
 * exception when they must be waited for or the client left. */
static PyObject *read_body(req_t *r)
{
    const sl_req_t *q = &r->c->req; /* read-only until END */
    size_t want, have = 0;
    PyObject *b;
    bool end = false;
    long n;

    if (!q->has_body) {
        r->body_done = true;
        Py_INCREF(L.empty);
        return request_msg(L.empty, false);
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
static PyObject *recv_try(req_t *r)
{
    PyObject *m;
    int rc;

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
            if (L.inline_mode)
                mark_dirty(r->c);
            return NULL;
        }
    }
}

static PyObject *req_receive(req_t *r)
{
    PyObject *m, *fut;

    if (r->recv_waiters == NULL || PyList_GET_SIZE(r->recv_waiters) == 0) {
        m = recv_try(r);
        if (m != NULL)
            return sl_asgi_done_new(m);
        if (PyErr_Occurred())
            return NULL;
    }
    fut = PyObject_CallNoArgs(L.create_future);
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
static void wake_receivers(req_t *r)
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

/* ------------------------------------------------------------------ */
/* send()                                                             */

/* send() must wait until the client took enough of the output. */
static PyObject *wait_credit(req_t *r)
{
    PyObject *fut;

    int rc = sl_conn_await(r->c, r->gen, SL_AWAIT_CREDIT);

    if (rc < 0)
        r->gone = true;
    if (rc != 1)
        return sl_asgi_done_none();
    fut = PyObject_CallNoArgs(L.create_future);
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

/* Queue LEN body bytes (the head first if it is not out yet); LAST is
 * more_body False. 0, 1 when over the credit, -1 with an exception. */
static int emit(req_t *r, const void *data, size_t len, bool last)
{
    int rc;

    if (r->state == RS_STARTED) {
        rc = sl_writer_start(&r->w, r->status, NULL, 0, r->headers,
                             last && !r->want_trailers ? (long long)len : -1,
                             r->want_trailers);
        Py_CLEAR(r->headers);
        if (rc < 0)
            return -1;
        r->state = RS_BODY;
    }
    rc = sl_writer_body(&r->w, data, len, last);
    if (rc < 0)
        r->gone = true;
    if (r->w.ended)
        req_ended(r);
    else if (last)
        r->state = RS_TRAILERS;
    return rc == 1 ? 1 : 0;
}

static PyObject *send_start(req_t *r, PyObject *msg)
{
    PyObject *status, *headers, *seq, *trailers;
    long code;
    int t;

    if (r->state != RS_INIT)
        return proto_fail(r, PyExc_RuntimeError,
                          "ASGI: http.response.start sent twice, or after "
                          "the body began (%s)",
                          r->what);
    status = PyDict_GetItemWithError(msg, K[K_STATUS]);
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
    headers = PyDict_GetItemWithError(msg, K[K_HEADERS]);
    if (headers == NULL && PyErr_Occurred())
        return proto_error(r);
    seq = PySequence_Fast(headers ? headers : L.empty_tuple,
                          "ASGI: http.response.start: 'headers' must be a "
                          "list of [name, value] pairs");
    if (seq == NULL)
        return proto_error(r);
    if (sl_writer_check_headers(seq, "ASGI: http.response.start") < 0) {
        Py_DECREF(seq);
        return proto_error(r);
    }
    trailers = PyDict_GetItemWithError(msg, K[K_TRAILERS]);
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

static PyObject *send_body(req_t *r, PyObject *msg)
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
    body = PyDict_GetItemWithError(msg, K[K_BODY]);
    more = PyDict_GetItemWithError(msg, K[K_MORE_BODY]);
    if (PyErr_Occurred())
        return proto_error(r);
    if (body == NULL)
        body = L.empty;
    if (PyObject_GetBuffer(body, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        return proto_fail(r, PyExc_TypeError,
                          "ASGI: http.response.body: 'body' must be bytes, "
                          "not %s",
                          Py_TYPE(body)->tp_name);
    }
    last = more ? !PyObject_IsTrue(more) : 1;
    rc = last < 0 ? -1 : emit(r, view.buf, (size_t)view.len, last);
    PyBuffer_Release(&view);
    if (rc < 0)
        return proto_error(r);
    if (rc == 1)
        return wait_credit(r);
    return sl_asgi_done_none();
}

static PyObject *send_trailers(req_t *r, PyObject *msg)
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
    headers = PyDict_GetItemWithError(msg, K[K_HEADERS]);
    more = PyDict_GetItemWithError(msg, K[K_MORE_TRAILERS]);
    if (PyErr_Occurred())
        return proto_error(r);
    seq = PySequence_Fast(headers ? headers : L.empty_tuple,
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
        req_ended(r);
        if (PyErr_Occurred())
            return NULL;
    }
    return sl_asgi_done_none();

out_fail:
    Py_DECREF(seq);
    return proto_error(r);
}

/* http.response.pathsend: the head, then the file by sendfile(2). */
static PyObject *send_pathsend(req_t *r, PyObject *msg)
{
    PyObject *path, *fs = NULL;
    struct stat st;
    int fd, rc;

    if (r->state != RS_STARTED)
        return proto_fail(r, PyExc_RuntimeError,
                          "ASGI: http.response.pathsend must come right "
                          "after http.response.start (%s)",
                          r->what);
    path = PyDict_GetItemWithError(msg, K[K_PATH]);
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
    req_ended(r);
    return sl_asgi_done_none();
}

static PyObject *req_send(req_t *r, PyObject *msg)
{
    PyObject *type;

    if (!PyDict_Check(msg))
        return proto_fail(r, PyExc_TypeError,
                          "ASGI: send() takes a dict message, not %s",
                          Py_TYPE(msg)->tp_name);
    type = PyDict_GetItemWithError(msg, K[K_TYPE]);
    if (type == NULL)
        return PyErr_Occurred() ? proto_error(r)
                                : proto_fail(r, PyExc_KeyError,
                                             "ASGI: send(): the message has "
                                             "no 'type'");
    if (str_is(type, K[K_RESPONSE_BODY]))
        return send_body(r, msg);
    if (str_is(type, K[K_RESPONSE_START]))
        return send_start(r, msg);
    if (str_is(type, K[K_RESPONSE_TRAILERS]))
        return send_trailers(r, msg);
    if (str_is(type, K[K_RESPONSE_PATHSEND]))
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

static PyObject *chan_new(PyTypeObject *type, req_t *r)
{
    chan_t *ch = PyObject_New(chan_t, type);

    if (ch == NULL)
        return NULL;
    ch->vectorcall = type == &receive_type ? receive_vc : send_vc;
    Py_INCREF(r);
    ch->req = r;
    return (PyObject *)ch;
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

/* ------------------------------------------------------------------ */
/* starting a request                                                 */

/* Answer request GEN of C with STATUS without starting it. */
static void refuse(sl_conn_t *c, uint32_t gen, int status)
{
    sl_writer_t w;

    sl_writer_init(&w, &sl_writer_asgi, &L.scratch, c, gen);
    sl_writer_fail(&w, status);
}

static req_t *req_new(sl_conn_t *c, uint32_t gen)
{
    req_t *r = PyObject_New(req_t, &req_type);
    const sl_req_t *q = &c->req;

    if (r == NULL)
        return NULL;
    memset((char *)r + sizeof(PyObject), 0, sizeof(*r) - sizeof(PyObject));
    r->c = c;
    r->gen = gen;
    sl_writer_init(&r->w, &sl_writer_asgi, &L.scratch, c, gen);
    r->body_left = q->chunked ? 0 : q->content_length;
    sl_http_log_name(q, r->what, sizeof(r->what));
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

static void req_start(sl_conn_t *c, uint32_t gen)
{
    PyObject *args[3] = {NULL, NULL, NULL}, *aw, *targs[3];
    req_t *r;

    if (sl_asgi_scope_is_websocket(&c->req)) {
        sl_debug("refusing a WebSocket upgrade: not supported yet");
        refuse(c, gen, 501);
        return;
    }
    r = req_new(c, gen);
    if (r == NULL) {
        sl_py_log_exception("ASGI: cannot start a request");
        refuse(c, gen, 500);
        return;
    }
    live_insert(r);
    args[0] = sl_asgi_scope_new(c, L.state);
    args[1] = chan_new(&receive_type, r);
    args[2] = chan_new(&send_type, r);
    if (args[0] == NULL || args[1] == NULL || args[2] == NULL)
        goto out_fail;
    aw = PyObject_Vectorcall(L.app, args, 3, NULL);
    if (aw == NULL || (r->coro = awaitable_iter(aw)) == NULL)
        goto out_fail;
    /* each Task gets a fresh copy of the loop's base context, never of the
     * context a callback happens to run in (in inline mode that can be the
     * previous request's) */
    targs[0] = (PyObject *)r;
    targs[1] = L.loop;
    targs[2] = PyContext_Copy(L.base_ctx);
    if (targs[2] == NULL)
        goto out_fail;
    r->task = PyObject_Vectorcall(L.task_type, targs, 1, L.kw_task);
    Py_DECREF(targs[2]);
    if (r->task == NULL)
        goto out_fail;
    L.slots[c->idx] = r;
    r->on_slot = true;
    Py_DECREF(args[0]);
    Py_DECREF(args[1]);
    Py_DECREF(args[2]);
    return;

out_fail:
    Py_XDECREF(args[0]);
    Py_XDECREF(args[1]);
    Py_XDECREF(args[2]);
    req_finish(r, true);
}

/* A WAKE: re-check whatever the request waits for. */
static void req_wake(req_t *r)
{
    PyObject *fut;
    int rc;

    Py_INCREF(r);
    wake_receivers(r);
    fut = r->send_waiter;
    if (fut != NULL) {
        rc = fut_done(fut) ? -1 : sl_conn_await(r->c, r->gen, SL_AWAIT_CREDIT);
        if (rc != 1) {
            r->send_waiter = NULL;
            fut_resolve(fut, Py_None);
            Py_DECREF(fut);
        }
    }
    Py_DECREF(r);
}

static void handle_ticket(const sl_ticket_t *t)
{
    sl_conn_t *c = &L.p->conns[t->idx];
    req_t *r;

    if (t->kind == SL_TICKET_SUBMIT) {
        req_start(c, t->gen);
    } else {
        r = L.slots[t->idx];
        if (r != NULL && r->gen == t->gen)
            req_wake(r);
    }
    if (PyErr_Occurred())
        sl_py_log_exception("ASGI: unexpected error on a ticket");
}

/* Cancel every request task: the drain's finish. */
static void cancel_all(void)
{
    req_t *r, *next;
    PyObject *res;

    for (r = L.live; r != NULL; r = next) {
        Py_INCREF(r);
        r->cancelled = true;
        if (r->task != NULL) {
            res = PyObject_CallMethodNoArgs(r->task, K[K_CANCEL]);
            if (res == NULL)
                sl_py_log_exception("ASGI: cancelling %s", r->what);
            Py_XDECREF(res);
        }
        next = r->next;
        Py_DECREF(r);
    }
}

/* The eventfd's reader: this pass's tickets, in one batch. */
static PyObject *on_tickets(PyObject *self, PyObject *unused)
{
    sl_ticket_t batch[TICKET_BATCH];
    uint64_t v;
    uint32_t i, n;

    (void)self;
    (void)unused;
    if (read(L.efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
        sl_log_errno(SL_LOG_ERROR, "read() of the ASGI lane's eventfd");
    while ((n = sl_queue_pop_all(&L.p->work, batch, TICKET_BATCH)) > 0)
        for (i = 0; i < n; i++)
            handle_ticket(&batch[i]);
    if (atomic_exchange(&L.finish_asked, false))
        cancel_all();
    if (atomic_load(&L.stop_asked) && !L.stopping) {
        PyObject *res = PyObject_CallMethod(L.loop, "stop", NULL);
        if (res == NULL)
            sl_py_log_exception("ASGI: stopping the event loop");
        Py_XDECREF(res);
        L.stopping = true;
    }
    Py_RETURN_NONE;
}

static PyMethodDef on_tickets_def = {"sluice_tickets", on_tickets, METH_NOARGS,
                                     NULL};

/* ------------------------------------------------------------------ */
/* inline mode: the event loop drives libev                           */

static PyObject *call_loop(const char *meth, const char *fmt, PyObject *a,
                           double d)
{
    return fmt[0] == 'O' ? PyObject_CallMethod(L.loop, meth, fmt, a)
                         : PyObject_CallMethod(L.loop, meth, fmt, d, a);
}

/* C has output or a body window to reopen: run libev soon (once per
 * batch, after the tasks that are ready now). */
static void mark_dirty(sl_conn_t *c)
{
    PyObject *res;

    if (!L.inline_mode || L.is_dirty[c->idx])
        return;
    L.is_dirty[c->idx] = true;
    L.dirty[L.ndirty++] = c;
    if (L.kick_scheduled || L.stopping)
        return;
    res = call_loop("call_soon", "O", L.on_ev, 0);
    if (res == NULL)
        sl_py_log_exception("ASGI: scheduling libev");
    else
        L.kick_scheduled = true;
    Py_XDECREF(res);
}

/* Hand the executor's output of every dirty connection to the loop. */
static void flush_dirty(void)
{
    uint32_t i;

    for (i = 0; i < L.ndirty; i++) {
        sl_conn_t *c = L.dirty[i];
        L.is_dirty[c->idx] = false;
        if (c->state != SL_CONN_FREE)
            sl_conn_complete(c);
    }
    L.ndirty = 0;
}

/* notify (exec.h) of the inline executor: the connection is dirty. */
static void inline_notify(sl_conn_t *c)
{
    mark_dirty(c);
}

/* hand_over (exec.h) of the inline executor: the tickets are handled at
 * once, on this thread. */
static void inline_hand_over(sl_pump_t *p, const sl_ticket_t *t, uint32_t n)
{
    uint32_t i;

    (void)p;
    for (i = 0; i < n; i++)
        handle_ticket(&t[i]);
}

static void ev_drive(void)
{
    int round;

    if (L.stopping)
        return;
    for (round = 0; round < 4; round++) {
        flush_dirty();
        if (!sl_pump_run_once(L.p) || L.ndirty == 0)
            break;
    }
    if (L.p->stopping) {
        PyObject *res;
        cancel_all();
        L.stopping = true;
        res = PyObject_CallMethod(L.loop, "stop", NULL);
        if (res == NULL)
            sl_py_log_exception("ASGI: stopping the event loop");
        Py_XDECREF(res);
    }
}

static PyObject *on_ev(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    L.kick_scheduled = false;
    ev_drive();
    Py_RETURN_NONE;
}

static PyObject *on_tick(PyObject *self, PyObject *unused)
{
    PyObject *res;

    (void)self;
    (void)unused;
    ev_drive();
    if (L.stopping)
        Py_RETURN_NONE;
    res = call_loop("call_later", "dO", L.on_tick, INLINE_TICK);
    if (res == NULL)
        return NULL;
    Py_DECREF(res);
    Py_RETURN_NONE;
}

static PyMethodDef on_ev_def = {"sluice_ev", on_ev, METH_NOARGS, NULL};
static PyMethodDef on_tick_def = {"sluice_tick", on_tick, METH_NOARGS, NULL};

static void run_inline(sl_conn_t *c)
{
    req_start(c, c->gen);
}

int sl_asgi_run_inline(sl_pump_t *p)
{
    PyObject *res;
    int bfd;

    sl_pump_start(p);
    bfd = p->backend_fd;
    if (bfd < 0) {
        sl_error("ASGI inline mode needs libev's epoll backend");
        return SL_EXIT_FAIL;
    }
    res = PyObject_CallMethod(L.loop, "add_reader", "iO", bfd, L.on_ev);
    if (res == NULL)
        goto out_fail;
    Py_DECREF(res);
    res = call_loop("call_later", "dO", L.on_tick, INLINE_TICK);
    if (res == NULL)
        goto out_fail;
    Py_DECREF(res);
    ev_drive();
    res = PyObject_CallMethod(L.loop, "run_forever", NULL);
    if (res == NULL)
        goto out_fail;
    Py_DECREF(res);
    return p->exit_status;

out_fail:
    sl_py_log_exception("ASGI: the inline event loop failed");
    return SL_EXIT_FAIL;
}

/* ------------------------------------------------------------------ */
/* the lane                                                           */

/* Create the loop, listen for tickets, run lifespan startup. 0 or -1. */
static int lane_boot(void)
{
    PyObject *res, *fn;

    L.loop = sl_asgi_lifespan_loop(L.p->opt->loop, &L.loop_name);
    if (L.loop == NULL)
        return -1;
    L.base_ctx = PyContext_CopyCurrent();
    if (L.base_ctx == NULL)
        goto out_pyerr;
    L.create_future = PyObject_GetAttrString(L.loop, "create_future");
    if (L.create_future == NULL)
        goto out_pyerr;
    if (L.efd >= 0) {
        fn = PyCFunction_New(&on_tickets_def, NULL);
        if (fn == NULL)
            goto out_pyerr;
        res = PyObject_CallMethod(L.loop, "add_reader", "iO", L.efd, fn);
        Py_DECREF(fn);
        if (res == NULL)
            goto out_pyerr;
        Py_DECREF(res);
    }
    return sl_asgi_lifespan_startup(L.loop, L.app, L.p->opt->lifespan,
                                    &L.state);

out_pyerr:
    sl_py_log_exception("ASGI: cannot set up the event loop");
    return -1;
}

/* Cancel what is left, lifespan shutdown, close the loop. */
static void lane_shutdown(void)
{
    PyObject *tasks = PyList_New(0), *res;
    req_t *r;

    L.stopping = true;
    if (L.efd >= 0) {
        res = PyObject_CallMethod(L.loop, "remove_reader", "i", L.efd);
        if (res == NULL)
            PyErr_Clear();
        Py_XDECREF(res);
    }
    for (r = L.live; r != NULL && tasks != NULL; r = r->next) {
        r->cancelled = true;
        if (r->task != NULL && PyList_Append(tasks, r->task) < 0)
            Py_CLEAR(tasks);
    }
    if (tasks == NULL) {
        sl_py_log_exception("ASGI: listing the tasks left");
    } else {
        if (PyList_GET_SIZE(tasks) > 0)
            sl_info("ASGI: cancelling %zd request tasks",
                    PyList_GET_SIZE(tasks));
        if (sl_asgi_lifespan_cancel(L.loop, tasks, CANCEL_SECS) > 0)
            sl_warn("ASGI: request tasks ignored their cancellation");
        Py_DECREF(tasks);
    }
    sl_asgi_lifespan_shutdown(L.loop, L.budget);
}

static void boot_report(int state)
{
    pthread_mutex_lock(&L.mu);
    L.boot = state;
    pthread_cond_broadcast(&L.cv);
    pthread_mutex_unlock(&L.mu);
}

static void *lane_main(void *arg)
{
    PyGILState_STATE gs = PyGILState_Ensure();
    PyObject *res;
    int rc;

    (void)arg;
    rc = lane_boot();
    boot_report(rc == 0 ? 1 : -1);
    if (rc == 0) {
        res = PyObject_CallMethod(L.loop, "run_forever", NULL);
        if (res == NULL)
            sl_py_log_exception("ASGI: the event loop failed");
        Py_XDECREF(res);
        lane_shutdown();
    }
    PyGILState_Release(gs);
    pthread_mutex_lock(&L.mu);
    L.exited = true;
    pthread_cond_broadcast(&L.cv);
    pthread_mutex_unlock(&L.mu);
    return NULL;
}

static int start_lane(void)
{
    sigset_t all, old;
    int rc;

    L.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (L.efd < 0) {
        sl_log_errno(SL_LOG_ERROR, "eventfd() for the ASGI lane");
        return -1;
    }
    pthread_mutex_init(&L.mu, NULL);
    pthread_cond_init(&L.cv, NULL);
    /* the lane never takes signals: the loop thread owns them */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = pthread_create(&L.tid, NULL, lane_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        errno = rc;
        sl_log_errno(SL_LOG_ERROR, "pthread_create() for the ASGI lane");
        return -1;
    }
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&L.mu);
    while (L.boot == 0)
        pthread_cond_wait(&L.cv, &L.mu);
    pthread_mutex_unlock(&L.mu);
    Py_END_ALLOW_THREADS
    if (L.boot < 0) {
        pthread_join(L.tid, NULL);
        return -1;
    }
    return 0;
}

/* Inline: the loop runs here and takes its tickets straight from the
 * pump. */
static int start_inline(sl_pump_t *p)
{
    L.dirty = calloc(p->nconns, sizeof(*L.dirty));
    L.is_dirty = calloc(p->nconns, sizeof(*L.is_dirty));
    if (L.dirty == NULL || L.is_dirty == NULL) {
        sl_error("out of memory for %u connections", p->nconns);
        return -1;
    }
    L.on_ev = PyCFunction_New(&on_ev_def, NULL);
    L.on_tick = PyCFunction_New(&on_tick_def, NULL);
    if (L.on_ev == NULL || L.on_tick == NULL) {
        sl_py_log_exception("ASGI: inline mode");
        return -1;
    }
    return lane_boot();
}

int sl_asgi_start(sl_pump_t *p)
{
    int rc = L.inline_mode ? start_inline(p) : start_lane();

    L.started = rc == 0;
    return rc;
}

const char *sl_asgi_loop_name(void)
{
    return L.loop_name ? L.loop_name : "?";
}

/* finish (exec.h) of the lane: cancel the tasks on the lane's thread.
 * Inline, the driver sees p->stopping after its pass and cancels them. */
static void lane_finish(sl_pump_t *p)
{
    (void)p;
    if (!L.started)
        return;
    atomic_store(&L.finish_asked, true);
    efd_write();
}

/* hand_over (exec.h) of the lane: the batch goes to the work queue, the
 * eventfd wakes the event loop once for all of it. */
static void lane_hand_over(sl_pump_t *p, const sl_ticket_t *t, uint32_t n)
{
    sl_exec_hand_over_queue(p, t, n);
    efd_write();
}

/* What is left of --graceful-timeout (the supervisor kills after it),
 * within LIFESPAN_BUDGET. */
static double shutdown_budget(sl_pump_t *p)
{
    double left = LIFESPAN_BUDGET;

    if (p->draining) {
        left = p->drain_started + p->opt->graceful_timeout + 0.8 - ev_time();
        if (left > LIFESPAN_BUDGET)
            left = LIFESPAN_BUDGET;
        if (left < 0.5)
            left = 0.5;
    }
    return left;
}

static int asgi_stop(sl_pump_t *p, double timeout)
{
    struct timespec ts;
    int rc = 0;

    (void)timeout; /* lifespan shutdown has its own budget */
    if (!L.started)
        return 0;
    L.budget = shutdown_budget(p);
    if (L.inline_mode) {
        lane_shutdown();
        return 0;
    }
    atomic_store(&L.stop_asked, true);
    efd_write();
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(L.budget + CANCEL_SECS + 4);
    pthread_mutex_lock(&L.mu);
    while (!L.exited && rc == 0)
        rc = pthread_cond_timedwait(&L.cv, &L.mu, &ts);
    rc = L.exited ? 0 : 1;
    pthread_mutex_unlock(&L.mu);
    if (rc == 0)
        pthread_join(L.tid, NULL);
    return rc;
}

/* ------------------------------------------------------------------ */
/* set-up                                                             */

static int init_names(void)
{
    size_t i;

    for (i = 0; i < K_COUNT; i++)
        if ((K[i] = PyUnicode_InternFromString(key_names[i])) == NULL)
            return -1;
    return 0;
}

static int init_asyncio(void)
{
    PyObject *asyncio = PyImport_ImportModule("asyncio"), *abc, *coro, *r;

    if (asyncio == NULL)
        return -1;
    L.task_type = PyObject_GetAttrString(asyncio, "Task");
    L.cancelled_error = PyObject_GetAttrString(asyncio, "CancelledError");
    Py_DECREF(asyncio);
    L.kw_task = Py_BuildValue("(ss)", "loop", "context");
    if (L.task_type == NULL || L.cancelled_error == NULL || L.kw_task == NULL)
        return -1;
    /* asyncio.Task takes coroutines only: the request is one */
    abc = PyImport_ImportModule("collections.abc");
    if (abc == NULL)
        return -1;
    coro = PyObject_GetAttrString(abc, "Coroutine");
    Py_DECREF(abc);
    if (coro == NULL)
        return -1;
    r = PyObject_CallMethod(coro, "register", "O", (PyObject *)&req_type);
    Py_DECREF(coro);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

int sl_asgi_init(PyObject *app, sl_pump_t *p)
{
    L.p = p;
    L.app = Py_NewRef(app);
    L.inline_mode = p->exec->run != NULL;
    L.slots = calloc(p->nconns, sizeof(*L.slots));
    if (L.slots == NULL) {
        sl_error("out of memory for %u connections", p->nconns);
        return -1;
    }
    if (sl_asgi_done_init() < 0 || PyType_Ready(&req_type) < 0 ||
        PyType_Ready(&receive_type) < 0 || PyType_Ready(&send_type) < 0 ||
        init_names() < 0 || sl_asgi_scope_init(p) < 0 || init_asyncio() < 0)
        goto out_fail;
    L.empty = PyBytes_FromStringAndSize(NULL, 0);
    L.empty_tuple = PyTuple_New(0);
    if (L.empty == NULL || L.empty_tuple == NULL)
        goto out_fail;
    return 0;

out_fail:
    sl_py_log_exception("cannot set up ASGI");
    return -1;
}

const sl_exec_t sl_asgi_lane_exec = {
    .name = "pump",
    .hand_over = lane_hand_over,
    .notify = sl_exec_notify_handoff,
    .wake = sl_exec_wake_ticket,
    .wait = sl_exec_wait_never,
    .finish = lane_finish,
    .stop = asgi_stop,
};

const sl_exec_t sl_asgi_inline_exec = {
    .name = "inline",
    .hand_over = inline_hand_over,
    .notify = inline_notify,
    .wake = sl_exec_wake_ticket,
    .wait = sl_exec_wait_never,
    .run = run_inline,
    .finish = sl_exec_finish_nothing,
    .stop = asgi_stop,
};
