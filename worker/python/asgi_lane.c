/* asgi_lane.c - ASGI in pump mode: one lane thread runs the event loop.
 *
 * The lane holds the GIL while the loop runs (the loop's poll releases
 * it). The pump hands over a pass's tickets through the work queue and
 * writes the lane's eventfd once for all the passes until on_tickets()
 * has taken their tickets; the answers of a batch's first steps that wait
 * for others' anyway (pipelining) wake the loop once (exec.h:
 * sl_exec_hold_wake()). The loop thread reaches the lane only through
 * that queue and the eventfd, and two flags (finish, stop) read on the
 * lane's side. The context is the one of sl_asgi_lane_exec: the lane
 * thread gets it as its argument, the eventfd's reader as its self.
 */
#include "config.h"

#include <Python.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "worker/python/asgi.h"
#include "worker/python/asgi_internal.h"
#include "worker/python/py.h"
#include "worker/python/writer.h"

#define TICKET_BATCH 256

/* The lane thread and how the loop thread talks to it. */
static struct {
    int efd; /* wakes the event loop: tickets, finish, stop */
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int boot; /* 0 booting, 1 serving, -1 failed */
    bool exited;
    atomic_bool finish_asked;
    atomic_bool stop_asked;
    /* the eventfd was written, or on_tickets() is taking tickets: a
     * later batch needs no write of its own (on_tickets() takes it
     * before it returns) */
    atomic_bool signalled;
} lane = {.efd = -1};

static void efd_write(void)
{
    uint64_t one = 1;

    if (lane.efd >= 0 && write(lane.efd, &one, sizeof(one)) < 0 &&
        errno != EAGAIN)
        sl_log_errno(SL_LOG_ERROR, "write() to the ASGI lane's eventfd");
}

/* Every ticket queued now, run to its first await; what their answers
 * may wait to tell the loop, it is told once a TICKET_BATCH. */
static void take_tickets(sl_asgi_t *x)
{
    sl_ticket_t batch[TICKET_BATCH];
    uint32_t i, n;

    while ((n = sl_queue_pop_all(sl_pump_work(x->p), batch, TICKET_BATCH)) >
           0) {
        sl_exec_hold_wake(true);
        for (i = 0; i < n; i++)
            sl_asgi_req_ticket(x, &batch[i]);
        sl_exec_hold_wake(false);
    }
}

/* The eventfd's reader: the tickets of the passes since it last ran. */
static PyObject *on_tickets(PyObject *self, PyObject *unused)
{
    sl_asgi_t *x = PyCapsule_GetPointer(self, NULL);
    uint64_t v;

    (void)unused;
    if (read(lane.efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
        sl_log_errno(SL_LOG_ERROR, "read() of the ASGI lane's eventfd");
    sl_asgi_task_batch(x, true);
    do {
        take_tickets(x);
        /* Tickets pushed while this ran wrote nothing (the flag was set):
         * they were taken above, or are still queued. Cleared only now,
         * a batch pushed from here on writes; one pushed between the last
         * take and the clear is taken once more, and the flag set again
         * unless that batch's write is on its way. Cleared before the
         * read, the flag could stay set with the write it stood for read
         * already, and the next batch would wait for ever. */
        atomic_store(&lane.signalled, false);
    } while (sl_queue_count(sl_pump_work(x->p)) > 0 &&
             !atomic_exchange(&lane.signalled, true));
    sl_asgi_task_batch(x, false);
    if (atomic_exchange(&lane.finish_asked, false))
        sl_asgi_req_cancel_all(x);
    if (atomic_load(&lane.stop_asked) && !x->stopping) {
        PyObject *res = PyObject_CallMethod(x->loop, "stop", NULL);
        if (res == NULL)
            sl_py_log_exception("ASGI: stopping the event loop");
        Py_XDECREF(res);
        x->stopping = true;
    }
    Py_RETURN_NONE;
}

static PyMethodDef on_tickets_def = {"sluice_tickets", on_tickets, METH_NOARGS,
                                     NULL};

static void boot_report(int state)
{
    pthread_mutex_lock(&lane.mu);
    lane.boot = state;
    pthread_cond_broadcast(&lane.cv);
    pthread_mutex_unlock(&lane.mu);
}

/* Create the event loop, listen for tickets, run lifespan startup. 0, or
 * -1 after logging. */
static int lane_boot(sl_asgi_t *x)
{
    PyObject *fn, *self, *res;

    if (sl_asgi_loop_create(x) < 0)
        return -1;
    self = PyCapsule_New(x, NULL, NULL);
    if (self == NULL)
        goto out_pyerr;
    fn = PyCFunction_New(&on_tickets_def, self);
    Py_DECREF(self);
    if (fn == NULL)
        goto out_pyerr;
    res = PyObject_CallMethod(x->loop, "add_reader", "iO", lane.efd, fn);
    Py_DECREF(fn);
    if (res == NULL)
        goto out_pyerr;
    Py_DECREF(res);
    return sl_asgi_loop_startup(x);

out_pyerr:
    sl_py_log_exception("ASGI: cannot set up the event loop");
    return -1;
}

/* No more tickets; then what every mode does at the end. */
static void lane_shutdown(sl_asgi_t *x)
{
    PyObject *res;

    x->stopping = true;
    res = PyObject_CallMethod(x->loop, "remove_reader", "i", lane.efd);
    if (res == NULL)
        PyErr_Clear();
    Py_XDECREF(res);
    sl_asgi_loop_shutdown(x);
}

/* The lane thread; ARG is the context. */
static void *lane_main(void *arg)
{
    PyGILState_STATE gs = PyGILState_Ensure();
    sl_asgi_t *x = arg;
    PyObject *res;
    int rc;

    rc = lane_boot(x);
    boot_report(rc == 0 ? 1 : -1);
    if (rc == 0) {
        res = PyObject_CallMethod(x->loop, "run_forever", NULL);
        if (res == NULL)
            sl_py_log_exception("ASGI: the event loop failed");
        Py_XDECREF(res);
        lane_shutdown(x);
    }
    PyGILState_Release(gs);
    pthread_mutex_lock(&lane.mu);
    lane.exited = true;
    pthread_cond_broadcast(&lane.cv);
    pthread_mutex_unlock(&lane.mu);
    return NULL;
}

/* start (exec.h) of pump mode: start the lane thread and wait for its
 * event loop to boot. 0 or -1. */
static int lane_begin(sl_pump_t *p)
{
    sigset_t all, old;
    int rc;

    lane.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (lane.efd < 0) {
        sl_log_errno(SL_LOG_ERROR, "eventfd() for the ASGI lane");
        return -1;
    }
    pthread_mutex_init(&lane.mu, NULL);
    pthread_cond_init(&lane.cv, NULL);
    /* the lane never takes signals: the loop thread owns them */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = pthread_create(&lane.tid, NULL, lane_main, sl_asgi_of(p));
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        errno = rc;
        sl_log_errno(SL_LOG_ERROR, "pthread_create() for the ASGI lane");
        return -1;
    }
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&lane.mu);
    while (lane.boot == 0)
        pthread_cond_wait(&lane.cv, &lane.mu);
    pthread_mutex_unlock(&lane.mu);
    Py_END_ALLOW_THREADS
    if (lane.boot < 0) {
        pthread_join(lane.tid, NULL);
        return -1;
    }
    return 0;
}

/* finish (exec.h) of the lane: cancel the tasks on the lane's thread. */
static void lane_finish(sl_pump_t *p)
{
    if (!sl_asgi_of(p)->started)
        return;
    atomic_store(&lane.finish_asked, true);
    efd_write();
}

/* hand_over (exec.h) of the lane: the batch goes to the work queue, the
 * eventfd wakes the event loop once for all of it, and not at all when
 * an earlier write is still unanswered (on_tickets() takes this batch
 * with that one). */
static void lane_hand_over(sl_pump_t *p, const sl_ticket_t *t, uint32_t n)
{
    sl_exec_hand_over_queue(p, t, n);
    if (!atomic_exchange(&lane.signalled, true))
        efd_write();
}

/* stop (exec.h) of the lane: the lane stops its event loop, shuts down
 * and exits; wait for that, within the shutdown's budget and a margin. */
static int lane_stop(sl_pump_t *p, double timeout)
{
    sl_asgi_t *x = sl_asgi_of(p);
    struct timespec ts;
    int rc = 0;

    (void)timeout; /* lifespan shutdown has its own budget */
    if (!x->started)
        return 0;
    x->budget = sl_asgi_shutdown_budget(p);
    atomic_store(&lane.stop_asked, true);
    efd_write();
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(x->budget + SL_ASGI_CANCEL_SECS + 4);
    pthread_mutex_lock(&lane.mu);
    while (!lane.exited && rc == 0)
        rc = pthread_cond_timedwait(&lane.cv, &lane.mu, &ts);
    rc = lane.exited ? 0 : 1;
    pthread_mutex_unlock(&lane.mu);
    if (rc == 0)
        pthread_join(lane.tid, NULL);
    return rc;
}

/* start (exec.h) of pump mode: the lane thread and lifespan startup. */
static int lane_start(sl_pump_t *p)
{
    return sl_asgi_started(p, lane_begin(p));
}

/* pump mode's context */
static sl_asgi_t lane_asgi;

const sl_asgi_exec_t sl_asgi_lane_exec = {
    .ops =
        {
            .name = "pump",
            .websocket = true,
            .shares_lane = true,
            .hand_over = lane_hand_over,
            .notify = sl_exec_notify_handoff,
            .need_loop = sl_exec_loop_runs_anyway,
            .release = sl_writer_lent_release,
            .wake = sl_exec_wake_ticket,
            .wait = sl_exec_wait_never,
            .finish = lane_finish,
            .adopt = sl_asgi_adopt,
            .start = lane_start,
            .start_failed_exit = SL_EXIT_APPLOAD,
            .describe = sl_asgi_describe,
            .serve = sl_py_serve_released,
            .stop = lane_stop,
        },
    .x = &lane_asgi,
};
