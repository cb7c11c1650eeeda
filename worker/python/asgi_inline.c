/* asgi_inline.c - ASGI in inline mode: the event loop drives libev.
 *
 * The asyncio loop runs on the loop thread itself and the pump becomes its
 * guest: libev runs one pass (sl_pump_run_once()) when its backend fd is
 * readable, after the app queued output (the connection is marked dirty,
 * and one call_soon per batch hands every dirty connection's output to the
 * loop side), and on a 100 ms timer for libev's own timers. Tickets are
 * handled at once, on this thread.
 *
 * Before the event loop blocks, libev must have applied what its passes
 * changed (sl_pump_settled()): it does so as a pass begins, so a socket
 * watched from the last pass's callbacks (a new connection with nothing
 * to read yet) would wake nobody until the timer.
 *
 * The context is the one of sl_asgi_inline_exec: the executor's operations
 * find it through their pump or connection, the event loop's callbacks as
 * their self.
 */
#include "config.h"

#include <Python.h>
#include <stdlib.h>

#include "common/log.h"
#include "worker/python/asgi.h"
#include "worker/python/asgi_internal.h"
#include "worker/python/py.h"
#include "worker/python/writer.h"

#define INLINE_TICK 0.1 /* libev timers run this often */

/* The driver's state. */
static struct {
    sl_exch_t **dirty; /* owned: connections with output or a window to
                          reopen (borrowed each) */
    bool *is_dirty;    /* owned: per connection */
    uint32_t ndirty;
    bool kick_scheduled; /* a call_soon of on_ev is pending */
    bool driving;        /* ev_drive() runs: it flushes what gets dirty */
    PyObject *on_ev;     /* owned: drive libev */
    PyObject *on_tick;   /* owned: the 100 ms timer */
} driver;

static PyObject *call_loop(sl_asgi_t *x, const char *meth, const char *fmt,
                           PyObject *a, double d)
{
    return fmt[0] == 'O' ? PyObject_CallMethod(x->loop, meth, fmt, a)
                         : PyObject_CallMethod(x->loop, meth, fmt, d, a);
}

/* Once per batch, after the tasks that are ready now. */
static void kick(sl_asgi_t *x)
{
    PyObject *res;

    if (driver.kick_scheduled || x->stopping)
        return;
    res = call_loop(x, "call_soon", "O", driver.on_ev, 0);
    if (res == NULL)
        sl_py_log_exception("ASGI: scheduling libev");
    else
        driver.kick_scheduled = true;
    Py_XDECREF(res);
}

/* C has output, a body window to reopen, or the app waits for it: run
 * libev soon. */
static void mark_dirty(sl_exch_t *c)
{
    if (driver.is_dirty[c->id])
        return;
    driver.is_dirty[c->id] = true;
    driver.dirty[driver.ndirty++] = c;
    /* a first step run from libev's pass (inside ev_drive()) is flushed
     * by the drive's next round */
    if (!driver.driving)
        kick(sl_asgi_of(sl_exch_pump(c)));
}

/* Hand the executor's output of every dirty connection to the loop. */
static void flush_dirty(void)
{
    uint32_t i;

    for (i = 0; i < driver.ndirty; i++) {
        sl_exch_t *c = driver.dirty[i];
        driver.is_dirty[c->id] = false;
        sl_exec_complete(c);
    }
    driver.ndirty = 0;
}

/* notify and need_loop (exec.h) of the inline executor: the connection
 * is dirty. */
static void inline_notify(sl_exch_t *c)
{
    mark_dirty(c);
}

/* hand_over (exec.h) of the inline executor: the tickets are handled at
 * once, on this thread. */
static void inline_hand_over(sl_pump_t *p, const sl_ticket_t *t, uint32_t n)
{
    sl_asgi_t *x = sl_asgi_of(p);
    uint32_t i;

    sl_asgi_task_batch(x, true);
    for (i = 0; i < n; i++)
        sl_asgi_req_ticket(x, &t[i]);
    sl_asgi_task_batch(x, false);
}

/* Run libev until the dirty connections' output is handed over and libev
 * has applied its watcher changes (a few rounds: each can make more);
 * once the drain finished, cancel what is left and stop the event loop. */
static void ev_drive(sl_asgi_t *x)
{
    int round;

    if (x->stopping)
        return;
    driver.driving = true;
    sl_asgi_task_batch(x, true); /* a loop callback: no task is current */
    for (round = 0; round < 4; round++) {
        flush_dirty();
        if (!sl_pump_run_once(x->p) ||
            (driver.ndirty == 0 && sl_pump_settled(x->p)))
            break;
    }
    sl_asgi_task_batch(x, false);
    driver.driving = false;
    if (driver.ndirty > 0 || !sl_pump_settled(x->p))
        kick(x); /* left for the next pass */
    if (sl_pump_stopping(x->p)) {
        PyObject *res;
        sl_asgi_req_cancel_all(x);
        x->stopping = true;
        res = PyObject_CallMethod(x->loop, "stop", NULL);
        if (res == NULL)
            sl_py_log_exception("ASGI: stopping the event loop");
        Py_XDECREF(res);
    }
}

/* The event loop's callbacks: SELF holds the context. */
static PyObject *on_ev(PyObject *self, PyObject *unused)
{
    (void)unused;
    driver.kick_scheduled = false;
    ev_drive(PyCapsule_GetPointer(self, NULL));
    Py_RETURN_NONE;
}

static PyObject *on_tick(PyObject *self, PyObject *unused)
{
    sl_asgi_t *x = PyCapsule_GetPointer(self, NULL);
    PyObject *res;

    (void)unused;
    ev_drive(x);
    if (x->stopping)
        Py_RETURN_NONE;
    res = call_loop(x, "call_later", "dO", driver.on_tick, INLINE_TICK);
    if (res == NULL)
        return NULL;
    Py_DECREF(res);
    Py_RETURN_NONE;
}

static PyMethodDef on_ev_def = {"sluice_ev", on_ev, METH_NOARGS, NULL};

static PyMethodDef on_tick_def = {"sluice_tick", on_tick, METH_NOARGS, NULL};

static void run_inline(sl_exch_t *c)
{
    sl_asgi_req_start(sl_asgi_of(sl_exch_pump(c)), c, c->gen);
}

int sl_asgi_run_inline(sl_pump_t *p)
{
    sl_asgi_t *x = sl_asgi_of(p);
    PyObject *res;
    int bfd;

    sl_pump_start(p);
    bfd = sl_pump_backend_fd(p);
    if (bfd < 0) {
        sl_error("ASGI inline mode needs libev's epoll backend");
        return SL_EXIT_FAIL;
    }
    res = PyObject_CallMethod(x->loop, "add_reader", "iO", bfd, driver.on_ev);
    if (res == NULL)
        goto out_fail;
    Py_DECREF(res);
    res = call_loop(x, "call_later", "dO", driver.on_tick, INLINE_TICK);
    if (res == NULL)
        goto out_fail;
    Py_DECREF(res);
    /* the first pass too runs inside the loop: a request's first step
     * runs at once and needs the running loop */
    res = call_loop(x, "call_soon", "O", driver.on_ev, 0);
    if (res == NULL)
        goto out_fail;
    Py_DECREF(res);
    driver.kick_scheduled = true;
    res = PyObject_CallMethod(x->loop, "run_forever", NULL);
    if (res == NULL)
        goto out_fail;
    Py_DECREF(res);
    return sl_pump_exit_status(p);

out_fail:
    sl_py_log_exception("ASGI: the inline event loop failed");
    return SL_EXIT_FAIL;
}

/* The event loop runs here and takes its tickets straight from the
 * pump. */
int sl_asgi_inline_start(sl_pump_t *p)
{
    sl_asgi_t *x = sl_asgi_of(p);
    PyObject *self;

    driver.dirty = calloc(sl_pump_exch_max(p), sizeof(*driver.dirty));
    driver.is_dirty = calloc(sl_pump_exch_max(p), sizeof(*driver.is_dirty));
    if (driver.dirty == NULL || driver.is_dirty == NULL) {
        sl_error("out of memory for %u connections", sl_pump_exch_max(p));
        return -1;
    }
    self = PyCapsule_New(x, NULL, NULL);
    if (self != NULL) {
        driver.on_ev = PyCFunction_New(&on_ev_def, self);
        driver.on_tick = PyCFunction_New(&on_tick_def, self);
        Py_DECREF(self);
    }
    if (driver.on_ev == NULL || driver.on_tick == NULL) {
        sl_py_log_exception("ASGI: inline mode");
        return -1;
    }
    if (sl_asgi_loop_create(x) < 0)
        return -1;
    return sl_asgi_started(p, sl_asgi_loop_startup(x));
}

/* stop (exec.h) of the inline executor: the event loop has stopped (the
 * drain's finish ended it); shut down here, on the loop thread. */
static int inline_stop(sl_pump_t *p, double timeout)
{
    sl_asgi_t *x = sl_asgi_of(p);

    (void)timeout; /* lifespan shutdown has its own budget */
    if (!x->started)
        return 0;
    x->budget = sl_asgi_shutdown_budget(p);
    sl_asgi_loop_shutdown(x);
    return 0;
}

/* serve (exec.h) of the inline executor: the event loop runs here, with
 * the GIL, and drives libev. */
static int inline_serve(sl_pump_t *p, void **released)
{
    *released = NULL;
    return sl_asgi_run_inline(p);
}

/* inline mode's context */
static sl_asgi_t inline_asgi;

const sl_asgi_exec_t sl_asgi_inline_exec = {
    .ops =
        {
            .name = "inline",
            .on_loop = true,
            .websocket = true,
            .shares_lane = true,
            .hand_over = inline_hand_over,
            .notify = inline_notify,
            .need_loop = inline_notify,
            .release = sl_writer_lent_release,
            .wake = sl_exec_wake_ticket,
            .wait = sl_exec_wait_never,
            .run = run_inline,
            .finish = sl_exec_finish_nothing,
            .adopt = sl_asgi_adopt,
            .start = sl_asgi_inline_start,
            .start_failed_exit = SL_EXIT_APPLOAD,
            .describe = sl_asgi_describe,
            .serve = inline_serve,
            .stop = inline_stop,
        },
    .x = &inline_asgi,
};
