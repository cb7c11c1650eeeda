/* lane.c - WSGI's executors: lane threads, or the loop thread itself.
 *
 * A lane is a plain pthread that holds the GIL while it has work and waits
 * on the work queue without it. It pops without releasing the GIL first: when
 * a batch arrived, the next request is already there and a release/acquire
 * pair per request would only buy a chance for a context switch.
 *
 * Inline mode has one lane and no thread: the connection calls run() from
 * its dispatch on the loop thread, and the app's waits work the socket
 * (worker/loop/inline.c) instead of sleeping on the connection.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>

#include "common/log.h"
#include "worker/loop/drain.h"
#include "worker/loop/inline.h"
#include "worker/python/lane.h"
#include "worker/python/py.h"
#include "worker/python/writer.h"
#include "worker/python/wsgi.h"

#define MAX_LANES 256

typedef struct {
    pthread_t tid;
    sl_pump_t *pump; /* borrowed */
    bool running;
} lane_t;

static lane_t lanes[MAX_LANES];
static int nlanes;
static pthread_mutex_t exit_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t exit_cv = PTHREAD_COND_INITIALIZER;
static int nrunning;
static sl_wsgi_lane_t *inline_lane; /* owned: inline mode's one lane */

static void *lane_main(void *arg)
{
    lane_t *lane = arg;
    sl_pump_t *p = lane->pump;
    PyGILState_STATE gs = PyGILState_Ensure();
    sl_wsgi_lane_t *wl = sl_wsgi_lane_new();
    sl_ticket_t t;
    bool ok;

    if (wl == NULL) {
        sl_py_log_exception("cannot start an executor lane");
        goto out;
    }
    for (;;) {
        if (!sl_queue_try_pop(sl_pump_work(p), &t)) {
            Py_BEGIN_ALLOW_THREADS
            ok = sl_queue_pop_wait(sl_pump_work(p), &t);
            Py_END_ALLOW_THREADS
            if (!ok)
                break;
        }
        if (t.kind == SL_TICKET_SUBMIT) {
            sl_exch_started(sl_pump_exch(p, t.idx),
                            t.gen); /* queue time ends */
            sl_wsgi_handle(wl, sl_pump_exch(p, t.idx), t.gen);
        }
    }
    sl_wsgi_lane_free(wl);
out:
    PyGILState_Release(gs);
    pthread_mutex_lock(&exit_mu);
    lane->running = false;
    nrunning--;
    pthread_cond_broadcast(&exit_cv);
    pthread_mutex_unlock(&exit_mu);
    return NULL;
}

int sl_lane_start(sl_pump_t *p, int n)
{
    sigset_t all, old;
    int i, rc;

    if (n > MAX_LANES)
        n = MAX_LANES;
    /* lanes never take signals: the loop thread owns them */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (i = 0; i < n; i++) {
        lanes[i].pump = p;
        lanes[i].running = true;
        rc = pthread_create(&lanes[i].tid, NULL, lane_main, &lanes[i]);
        if (rc != 0) {
            errno = rc;
            sl_log_errno(SL_LOG_ERROR, "pthread_create() failed for lane %d",
                         i);
            break;
        }
        pthread_mutex_lock(&exit_mu);
        nrunning++;
        pthread_mutex_unlock(&exit_mu);
        nlanes++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return i == n ? 0 : -1;
}

static int lane_stop(sl_pump_t *p, double timeout)
{
    struct timespec ts;
    int i, left;

    sl_queue_close(sl_pump_work(p));
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)timeout;
    ts.tv_nsec += (long)((timeout - (double)(time_t)timeout) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&exit_mu);
    while (nrunning > 0 && pthread_cond_timedwait(&exit_cv, &exit_mu, &ts) == 0)
        ;
    left = nrunning;
    pthread_mutex_unlock(&exit_mu);
    for (i = 0; i < nlanes; i++)
        if (!lanes[i].running)
            pthread_join(lanes[i].tid, NULL);
    return left;
}

int sl_lane_start_inline(sl_pump_t *p)
{
    inline_lane = sl_wsgi_lane_new();
    if (inline_lane == NULL) {
        sl_py_log_exception("cannot set up the inline lane");
        return -1;
    }
    sl_py_release_gil_in_poll(sl_pump_loop(p));
    return 0;
}

static void inline_run(sl_exch_t *c)
{
    sl_drain_note_running(c);
    sl_wsgi_handle(inline_lane, c, c->gen);
    sl_drain_note_running(NULL);
}

static int inline_stop(sl_pump_t *p, double timeout)
{
    (void)p;
    (void)timeout;
    sl_wsgi_lane_free(inline_lane);
    inline_lane = NULL;
    return 0;
}

/* adopt (exec.h) of both WSGI executors. */
static int wsgi_adopt(sl_pump_t *p, void *app)
{
    return sl_wsgi_init(app, p);
}

/* describe (exec.h) of both WSGI executors. */
static void wsgi_describe(sl_pump_t *p, char *buf, size_t n)
{
    int threads = sl_pump_options(p)->threads;

    snprintf(buf, n, "%s mode, %d lane%s", sl_pump_exec(p)->name, threads,
             threads == 1 ? "" : "s");
}

/* start (exec.h) of pump mode: --threads lanes. */
static int lanes_start(sl_pump_t *p)
{
    return sl_lane_start(p, sl_pump_options(p)->threads);
}

const sl_exec_t sl_lane_exec = {
    .name = "pump",
    .hand_over = sl_exec_hand_over_queue,
    .notify = sl_exec_notify_handoff,
    .need_loop = sl_exec_loop_runs_anyway,
    .release = sl_writer_lent_release,
    .wake = sl_exec_wake_cv,
    .wait = sl_exec_wait_cv,
    .finish = sl_exec_finish_nothing,
    .adopt = wsgi_adopt,
    .start = lanes_start,
    .start_failed_exit = SL_EXIT_FAIL,
    .describe = wsgi_describe,
    .serve = sl_py_serve_released,
    .stop = lane_stop,
};

const sl_exec_t sl_lane_inline_exec = {
    .name = "inline",
    .on_loop = true,
    .holds_loop = true,
    .hand_over = sl_exec_hand_over_queue, /* never used: run() instead */
    .notify = sl_inline_notify,
    .need_loop = sl_exec_loop_runs_anyway, /* it blocks on the socket */
    .release = sl_writer_lent_release,
    .wake = sl_inline_wake,
    .wait = sl_inline_wait,
    .run = inline_run,
    .finish = sl_exec_finish_nothing,
    .adopt = wsgi_adopt,
    .start = sl_lane_start_inline,
    .start_failed_exit = SL_EXIT_FAIL,
    .describe = wsgi_describe,
    .serve = sl_py_serve_holding,
    .stop = inline_stop,
};
