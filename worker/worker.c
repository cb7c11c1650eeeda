/* worker.c - a worker's life: Python, the app, the loop, the drain, exit.
 *
 * The exit status tells the supervisor what happened: 0 after a clean
 * drain, 1 when the drain was forced or something broke, and
 * SL_EXIT_APPLOAD when the app could not be loaded, which the supervisor
 * must not answer with a tight respawn loop.
 */
#include "config.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/ctl.h"
#include "common/log.h"
#include "worker/loop/drain.h"
#include "worker/loop/listen.h"
#include "worker/loop/pump.h"
#include "worker/loop/static.h"
#include "worker/loop/tlsmod.h"
#include "worker/python/asgi.h"
#include "worker/python/asgi_lifespan.h"
#include "worker/python/lane.h"
#include "worker/python/modules.h"
#include "worker/python/py.h"
#include "worker/worker.h"
#include "worker/zygote.h"

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
    int asgi;

    if (o->interface == SL_IFACE_WSGI)
        return 0;
    asgi = o->interface == SL_IFACE_ASGI ? 1 : sl_asgi_lifespan_detect(app);
    /* the helper imports asyncio: only for an app that will use it */
    if (asgi == 1 && sl_asgi_lifespan_init() < 0)
        return -1;
    return asgi;
}

/* The one choice of executor, made once: [ASGI?][inline?]. */
static const sl_exec_t *const executors[2][2] = {
    {&sl_lane_exec, &sl_lane_inline_exec},
    {&sl_asgi_lane_exec.ops, &sl_asgi_inline_exec.ops},
};

/* Set the executor up and take APP (its reference is passed on): the
 * lanes, or the event loop and lifespan startup. The exit status to leave
 * with on failure, else 0. */
static int exec_start(sl_pump_t *p, PyObject *app)
{
    const sl_exec_t *exec = sl_pump_exec(p);
    int rc = exec->adopt(p, app);

    Py_DECREF(app);
    if (rc < 0)
        return SL_EXIT_FAIL;
    return exec->start(p) < 0 ? exec->start_failed_exit : 0;
}

/* --reload: where the supervisor wants the module list (SLUICE_RELOAD_DIR),
 * taken out of the environment the app will see; "" when not wanted. */
static void take_report_dir(const sl_options_t *o, char *dir, size_t size)
{
    const char *env = getenv("SLUICE_RELOAD_DIR");

    dir[0] = '\0';
    if (o->reload && env != NULL)
        snprintf(dir, size, "%s", env);
    unsetenv("SLUICE_RELOAD_DIR");
}

/* The context of the TLS listeners the supervisor marked: built before
 * --chdir, so that a relative --certfile names the file the supervisor
 * checked at start. NULL after one error line. */
static SSL_CTX *tls_load(const sl_options_t *o, const sl_tls_module_t **m)
{
    char err[1024];
    SSL_CTX *ctx;

    if (o->certfile == NULL) {
        sl_error("listeners speak TLS (decided when sluice started), but the"
                 " settings name no --certfile and --keyfile");
        return NULL;
    }
    if ((*m = sl_tls_module_load()) == NULL)
        return NULL;
    ctx = (*m)->ctx_new(o, err, sizeof(err));
    if (ctx == NULL)
        sl_error("%s", err);
    return ctx;
}

static void drop_app(sl_worker_app_t *a)
{
    Py_XDECREF((PyObject *)a->app);
    a->app = NULL;
}

int sl_worker_load(const sl_options_t *o, int ntls, bool watch_modules,
                   sl_worker_app_t *a)
{
    memset(a, 0, sizeof(*a));
    reset_signals();
    take_report_dir(o, a->report_dir, sizeof(a->report_dir));
    if (sl_log_fd() != STDERR_FILENO)
        dup2(sl_log_fd(), STDERR_FILENO); /* Python's tracebacks: the log */
    /* a certificate that cannot serve will not on the next try either */
    if (ntls > 0 && (a->tls = tls_load(o, &a->tls_module)) == NULL)
        return SL_EXIT_APPLOAD;
    if (o->chdir != NULL && chdir(o->chdir) < 0) {
        sl_log_errno(SL_LOG_ERROR, "chdir(%s) failed", o->chdir);
        return SL_EXIT_APPLOAD;
    }
    /* after --chdir: a relative folder is the app's */
    if (sl_static_load(o, &a->statics) < 0)
        return SL_EXIT_APPLOAD;
    if (sl_py_init(o) < 0)
        return SL_EXIT_APPLOAD;
    a->app = sl_py_load_app(o);
    if (a->app == NULL)
        return SL_EXIT_APPLOAD;
    if (a->report_dir[0] != '\0') /* before READY: see modules.h */
        sl_modules_report(a->report_dir, watch_modules);
    a->asgi = is_asgi(o, a->app);
    if (a->asgi < 0) {
        drop_app(a);
        return SL_EXIT_APPLOAD;
    }
    return 0;
}

int sl_worker_main(const sl_options_t *o, const int *listen_fds, int nfds,
                   const int *tls_fds, int ntls, int worker_id, int ctl_fd)
{
    sl_worker_app_t a;
    int status = sl_worker_load(o, ntls, true, &a);

    if (status != 0)
        return status;
    return sl_worker_serve(o, &a, listen_fds, nfds, tls_fds, ntls, worker_id,
                           ctl_fd);
}

int sl_worker_serve(const sl_options_t *o, sl_worker_app_t *a,
                    const int *listen_fds, int nfds, const int *tls_fds,
                    int ntls, int worker_id, int ctl_fd)
{
    char what[128];
    static sl_pump_t pump;
    void *released = NULL;
    int status, stuck;

    if (sl_pump_init(&pump, o, executors[a->asgi][o->inline_mode], listen_fds,
                     nfds) < 0) {
        drop_app(a);
        return SL_EXIT_FAIL;
    }
    if (a->tls != NULL)
        (void)sl_listen_tls(&pump, a->tls_module, a->tls, tls_fds, ntls);
    pump.statics = a->statics; /* kept to the process's end */
    /* forked by a zygote, whose report was its own: this pid's, watched */
    if (a->parent != 0 && a->report_dir[0] != '\0')
        sl_modules_report(a->report_dir, true);
    if (a->parent != 0)
        sl_zygote_settle(a->parent);
    status = exec_start(&pump, a->app);
    a->app = NULL;
    if (status != 0)
        return status;
    sl_drain_set_ctl(&pump, ctl_fd);
    sl_drain_ctl(&pump, SL_CTL_READY);
    pump.exec->describe(&pump, what, sizeof(what));
    sl_info("worker %d serving %s (%s)", worker_id, o->app, what);

    /* until drained: lane threads need the GIL given up meanwhile, which
     * the worker takes back once they stopped (exec.h: serve) */
    status = pump.exec->serve(&pump, &released);

    /* a forced drain already waited its graceful timeout: lanes still
     * inside the app are not waited for again */
    stuck = pump.exec->stop(&pump, status == SL_EXIT_OK ? 1.0 : 0.0);
    /* lines of requests that ended during the drain's last pass */
    sl_accesslog_close(pump.alog);
    pump.alog = NULL;
    if (stuck > 0) {
        sl_warn("%d lane%s still inside the app at exit", stuck,
                stuck == 1 ? "" : "s");
    } else {
        if (released != NULL)
            PyEval_RestoreThread(released);
        sl_py_finalize();
    }
    sl_info("worker %d exiting (status %d)", worker_id, status);
    return status;
}
