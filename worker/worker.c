/* worker.c - a worker's life: Python, the app, the loop, the drain, exit.
 *
 * The exit status tells the supervisor what happened: 0 after a clean
 * drain, 1 when the drain was forced or something broke, and
 * SL_EXIT_APPLOAD when the app could not be loaded, which the supervisor
 * must not answer with a tight respawn loop.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/ctl.h"
#include "common/log.h"
#include "worker/lane.h"
#include "worker/pump.h"
#include "worker/py.h"
#include "worker/worker.h"
#include "worker/wsgi.h"

static sl_wsgi_lane_t *inline_lane;

static void run_inline(sl_conn_t *c)
{
    sl_wsgi_handle(inline_lane, c, c->gen);
}

static void reset_signals(void)
{
    sigset_t none;

    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_IGN); /* sendfile(2) has no MSG_NOSIGNAL */
}

int sl_worker_main(const sl_options_t *o, const int *listen_fds, int nfds,
                   int worker_id, int ctl_fd)
{
    static sl_pump_t pump;
    PyThreadState *ts = NULL;
    PyObject *app;
    int status, stuck = 0;

    reset_signals();
    if (sl_log_fd() != STDERR_FILENO)
        dup2(sl_log_fd(), STDERR_FILENO); /* Python's tracebacks: the log */
    if (o->chdir != NULL && chdir(o->chdir) < 0) {
        sl_log_errno(SL_LOG_ERROR, "chdir(%s) failed", o->chdir);
        return SL_EXIT_APPLOAD;
    }
    if (sl_py_init(o) < 0)
        return SL_EXIT_APPLOAD;
    app = sl_py_load_app(o);
    if (app == NULL)
        return SL_EXIT_APPLOAD;
    if (sl_pump_init(&pump, o, listen_fds, nfds) < 0 ||
        sl_wsgi_init(app, &pump) < 0)
        return SL_EXIT_FAIL;
    Py_DECREF(app);

    if (pump.inline_mode) {
        inline_lane = sl_wsgi_lane_new();
        if (inline_lane == NULL) {
            sl_py_log_exception("cannot set up the inline lane");
            return SL_EXIT_FAIL;
        }
        pump.run_inline = run_inline;
        sl_py_release_gil_in_poll(pump.loop);
    } else {
        if (sl_lane_start(&pump, o->threads) < 0)
            return SL_EXIT_FAIL;
        ts = PyEval_SaveThread();
    }
    sl_pump_set_ctl(&pump, ctl_fd);
    sl_pump_ctl(&pump, SL_CTL_READY);
    sl_info("worker %d serving %s (%s mode, %d lane%s)", worker_id, o->app,
            pump.inline_mode ? "inline" : "pump", o->threads,
            o->threads == 1 ? "" : "s");

    status = sl_pump_run(&pump);

    if (!pump.inline_mode) {
        stuck = sl_lane_stop(&pump, 1.0);
        PyEval_RestoreThread(ts);
    }
    if (stuck == 0) {
        sl_wsgi_lane_free(inline_lane);
        sl_py_finalize();
    } else {
        sl_warn("%d lanes still inside the app at exit", stuck);
    }
    sl_info("worker %d exiting (status %d)", worker_id, status);
    return status;
}
