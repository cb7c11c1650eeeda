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
#include "worker/python/asgi.h"
#include "worker/python/asgi_lifespan.h"
#include "worker/loop/drain.h"
#include "worker/python/lane.h"
#include "worker/loop/pump.h"
#include "worker/python/py.h"
#include "worker/worker.h"
#include "worker/python/wsgi.h"

static sl_wsgi_lane_t *inline_lane;

static void run_inline(sl_conn_t *c)
{
    sl_drain_note_inline(c);
    sl_wsgi_handle(inline_lane, c, c->gen);
    sl_drain_note_inline(NULL);
}

static void reset_signals(void)
{
    sigset_t none;

    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_IGN); /* sendfile(2) has no MSG_NOSIGNAL */
}

/* ASGI or WSGI: --interface, or for auto what the app looks like. 1, 0,
 * or -1 after logging. */
static int is_asgi(const sl_options_t *o, PyObject *app)
{
    if (o->interface == SL_IFACE_WSGI)
        return 0;
    if (sl_asgi_lifespan_init() < 0)
        return -1;
    if (o->interface == SL_IFACE_ASGI)
        return 1;
    return sl_asgi_lifespan_detect(app);
}

/* ASGI: lifespan startup before READY, one event loop, its shutdown after
 * the drain. Returns the exit status. */
static int serve_asgi(sl_pump_t *p, PyObject *app, int worker_id, int ctl_fd)
{
    PyThreadState *ts = NULL;
    int status, stuck;

    if (sl_asgi_init(app, p) < 0)
        return SL_EXIT_FAIL;
    Py_DECREF(app);
    if (sl_asgi_start(p) < 0)
        return SL_EXIT_APPLOAD; /* a failed boot, not a crash */
    sl_pump_set_ctl(p, ctl_fd);
    sl_pump_ctl(p, SL_CTL_READY);
    sl_info("worker %d serving %s (ASGI on %s, %s mode)", worker_id,
            p->opt->app, sl_asgi_loop_name(),
            p->inline_mode ? "inline" : "pump");
    if (p->inline_mode) {
        status = sl_asgi_run_inline(p);
        sl_asgi_stop(p);
        sl_py_finalize();
        return status;
    }
    ts = PyEval_SaveThread();
    status = sl_pump_run(p);
    stuck = sl_asgi_stop(p);
    if (stuck) {
        sl_warn("the ASGI lane is still inside the app at exit");
        return status;
    }
    PyEval_RestoreThread(ts);
    sl_py_finalize();
    return status;
}

int sl_worker_main(const sl_options_t *o, const int *listen_fds, int nfds,
                   int worker_id, int ctl_fd)
{
    static sl_pump_t pump;
    PyThreadState *ts = NULL;
    PyObject *app;
    int status, asgi, stuck = 0;

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
    asgi = is_asgi(o, app);
    if (asgi < 0)
        return SL_EXIT_APPLOAD;
    if (sl_pump_init(&pump, o, listen_fds, nfds) < 0)
        return SL_EXIT_FAIL;
    if (asgi) {
        /* one asyncio lane runs many requests: a long request is not a
         * stuck lane, so only a missing heartbeat may call it hung */
        pump.lanes = 0;
        sl_drain_backstop_margin(1.0);
        status = serve_asgi(&pump, app, worker_id, ctl_fd);
        sl_info("worker %d exiting (status %d)", worker_id, status);
        return status;
    }
    if (sl_wsgi_init(app, &pump) < 0)
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
        /* a forced drain already waited its graceful timeout: lanes
         * still inside the app are not waited for again */
        stuck = sl_lane_stop(&pump, status == SL_EXIT_OK ? 1.0 : 0.0);
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
