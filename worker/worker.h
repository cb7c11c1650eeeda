/* worker.h - a worker process: Python, the app, the loop, the drain.
 *
 * A worker is the sluice-worker executable (worker/main.c), exec'd by the
 * supervisor with the supervisor's argv and the variables common/handoff.h
 * lists; main() turns those into the arguments below.
 */
#ifndef SL_WORKER_H
#define SL_WORKER_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "common/options.h"
#include "worker/loop/tlsmod.h"

/* What a worker has loaded before it serves: the app and, with TLS
 * listeners, their context. A zygote (worker/zygote.h) loads it once and
 * forks workers that serve it. */
typedef struct {
    void *app;    /* owned: the PyObject * of the app */
    int asgi;     /* 1: ASGI, 0: WSGI */
    SSL_CTX *tls; /* NULL: no TLS listener */
    const sl_tls_module_t *tls_module;
    char report_dir[PATH_MAX]; /* --reload: the report's directory, or "" */
    struct sl_static *statics; /* owned: the --static maps, NULL: none */
    pid_t parent; /* forked by a zygote: the supervisor to settle under
                     before its executor starts (worker/zygote.h); 0
                     when exec'd */
} sl_worker_app_t;

/* Load what a worker serves into *A: signals reset, TLS context, --chdir,
 * Python, the app, ASGI or WSGI. NTLS: how many listeners speak TLS.
 * WATCH_MODULES: --reload's report is written again as the app imports
 * more (a thread); a zygote writes it once. 0, or the exit status to
 * leave with (SL_EXIT_APPLOAD) after one error line. */
int sl_worker_load(const sl_options_t *o, int ntls, bool watch_modules,
                   sl_worker_app_t *a);

/* Serve A (its app reference is taken) on the listening sockets
 * LISTEN_FDS[0..NFDS), those among TLS_FDS[0..NTLS) speaking TLS, until
 * drained; returns the exit status, as sl_worker_main(). */
int sl_worker_serve(const sl_options_t *o, sl_worker_app_t *a,
                    const int *listen_fds, int nfds, const int *tls_fds,
                    int ntls, int worker_id, int ctl_fd);

/* Run a worker on the listening sockets LISTEN_FDS[0..NFDS), those among
 * TLS_FDS[0..NTLS) speaking TLS, until it has drained; returns the process
 * exit status (SL_EXIT_OK, SL_EXIT_FAIL, or SL_EXIT_APPLOAD when the app
 * could not be imported or the TLS certificate not loaded, after one clear
 * error line in the log). */
int sl_worker_main(const sl_options_t *o, const int *listen_fds, int nfds,
                   const int *tls_fds, int ntls, int worker_id, int ctl_fd);

#endif
