/* main.c - sluice-worker's entry point: one worker process.
 *
 * The supervisor (sluice) forks and execs this executable for every worker,
 * with its own argv and the variables common/handoff.h lists; it is not
 * meant to be started by hand. It parses the same argv as the supervisor
 * did (common/startup.c), so both see the same options, takes the
 * descriptors it was handed, and runs sl_worker_main(). This is the only
 * executable that links Python: the supervisor never maps libpython.
 */
#include "config.h"

#include <fcntl.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/handoff.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/options.h"
#include "common/proctitle.h"
#include "common/startup.h"
#include "worker/loop/tlsmod.h"
#include "worker/worker.h"
#include "worker/zygote.h"

static bool same_handoff(void);
static int run_worker(const sl_options_t *o, const char *id);
static int parse_fd_list(const char *list, int *fds, int max);
static int take_metrics_fd(void);
static int run_zygote(const sl_options_t *o, const int *fds, int n,
                      const int *tls_fds, int ntls, int metrics_fd);
static void tune_malloc(void);

int main(int argc, char **argv)
{
    sl_options_t o;
    char **args;
    int status;

    tune_malloc();
    if (!sl_startup(argc, argv, &o, &args, &status)) {
        return status;
    }
    if (getenv("SLUICE_CHECK_TLS") != NULL) {
        /* the supervisor's check at start or at HUP (supervisor/spawn.h) */
        if (strcmp(getenv("SLUICE_CHECK_TLS"), "log") == 0)
            sl_log_usage_to_log("TLS check");
        const sl_tls_module_t *m =
            o.certfile != NULL ? sl_tls_module_load() : NULL;
        if (o.certfile != NULL && m == NULL)
            return SL_EXIT_USAGE;
        return m == NULL || m->check(&o) == 0 ? SL_EXIT_OK : SL_EXIT_USAGE;
    }
    const char *worker_id = getenv("SLUICE_WORKER_ID");
    if (worker_id == NULL && getenv("SLUICE_ZYGOTE_FD") != NULL) {
        worker_id = "0"; /* a zygote: its workers get theirs at the fork */
    }
    if (worker_id == NULL) {
        sl_log_usage("sluice-worker is started by the sluice supervisor,"
                     " not by hand (no SLUICE_WORKER_ID)");
        return SL_EXIT_USAGE;
    }
    if (!same_handoff()) {
        return SL_EXIT_APPLOAD; /* the next one would fail the same way */
    }
    return run_worker(&o, worker_id);
}

/* The supervisor speaks this worker's SL_HANDOFF_VERSION; false after one
 * error line when it does not. */
static bool same_handoff(void)
{
    const char *theirs = getenv("SLUICE_HANDOFF");
    int version;

    if (theirs != NULL && sl_startup_int(theirs, &version) == 0 &&
        version == SL_HANDOFF_VERSION) {
        unsetenv("SLUICE_HANDOFF");
        return true;
    }
    sl_error("this sluice-worker speaks handoff version %d, its supervisor"
             " %s: install sluice and sluice-worker from the same build",
             SL_HANDOFF_VERSION, theirs ? theirs : "none");
    return false;
}

/* Take the descriptors the supervisor passed, mark them close-on-exec
 * again (so nothing the application starts inherits a listener) and clear
 * the SLUICE_* variables for the same reason. */
static int run_worker(const sl_options_t *o, const char *id)
{
    int fds[SL_MAX_LISTENERS], tls_fds[SL_MAX_LISTENERS];
    int worker_id, ctl_fd = -1;
    const char *list = getenv("SLUICE_LISTEN_FDS");
    const char *tls = getenv("SLUICE_TLS_FDS");
    const char *ctl = getenv("SLUICE_CTL_FD");

    if (sl_startup_int(id, &worker_id) == -1) {
        sl_error("SLUICE_WORKER_ID='%s' is not a worker number", id);
        return SL_EXIT_FAIL;
    }
    int n = parse_fd_list(list ? list : "", fds, SL_MAX_LISTENERS);
    if (n <= 0) {
        sl_error("SLUICE_LISTEN_FDS='%s' is not a list of at most %d open"
                 " descriptors",
                 list ? list : "", SL_MAX_LISTENERS);
        return SL_EXIT_FAIL;
    }
    int ntls = parse_fd_list(tls ? tls : "", tls_fds, SL_MAX_LISTENERS);
    if (ntls < 0) {
        sl_error("SLUICE_TLS_FDS='%s' is not a list of at most %d open"
                 " descriptors",
                 tls, SL_MAX_LISTENERS);
        return SL_EXIT_FAIL;
    }
    if (ctl != NULL && (parse_fd_list(ctl, &ctl_fd, 1) != 1)) {
        sl_error("SLUICE_CTL_FD='%s' is not an open descriptor", ctl);
        return SL_EXIT_FAIL;
    }
    int metrics_fd = take_metrics_fd();
    unsetenv("SLUICE_WORKER_ID");
    unsetenv("SLUICE_LISTEN_FDS");
    unsetenv("SLUICE_TLS_FDS");
    unsetenv("SLUICE_CTL_FD");
    if (getenv("SLUICE_ZYGOTE_FD") != NULL) {
        return run_zygote(o, fds, n, tls_fds, ntls, metrics_fd);
    }
    if (metrics_fd >= 0) {
        (void)sl_metrics_attach(metrics_fd, worker_id);
    }

    const char *name = o->proc_name ? o->proc_name : "sluice";
    sl_proctitle_set(name, "%s: worker %d [%s]", name, worker_id, o->app);
    return sl_worker_main(o, fds, n, tls_fds, ntls, worker_id, ctl_fd);
}

/* The metrics segment's descriptor, when the supervisor passed one, else
 * -1. A worker that cannot map it serves anyway, uncounted (logged). */
static int take_metrics_fd(void)
{
    const char *env = getenv("SLUICE_METRICS_FD");
    int fd = -1;

    if (env != NULL && parse_fd_list(env, &fd, 1) != 1) {
        sl_error("SLUICE_METRICS_FD='%s' is not an open descriptor", env);
        fd = -1;
    }
    unsetenv("SLUICE_METRICS_FD");
    return fd;
}

/* --preload: load the app once, then fork workers on the supervisor's
 * word (worker/zygote.h). Returns the zygote's exit status, or, in a
 * forked worker, the worker's. */
static int run_zygote(const sl_options_t *o, const int *fds, int n,
                      const int *tls_fds, int ntls, int metrics_fd)
{
    const char *env = getenv("SLUICE_ZYGOTE_FD");
    const char *gen = getenv("SLUICE_ZYGOTE_GEN");
    const char *name = o->proc_name ? o->proc_name : "sluice";
    struct timespec t0, t1;
    sl_worker_app_t a;
    int zfd, worker_id, ctl_fd;

    if (parse_fd_list(env, &zfd, 1) != 1) {
        sl_error("SLUICE_ZYGOTE_FD='%s' is not an open descriptor", env);
        return SL_EXIT_FAIL;
    }
    sl_proctitle_set(name, "%s: zygote%s%s [%s]", name, gen ? " of gen " : "",
                     gen ? gen : "", o->app);
    unsetenv("SLUICE_ZYGOTE_FD");
    unsetenv("SLUICE_ZYGOTE_GEN");
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int status = sl_worker_load(o, ntls, false, &a);
    if (status != 0) {
        return status;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) +
                  (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    status = sl_zygote_run(zfd, took, &worker_id, &ctl_fd);
    if (status != SL_ZYGOTE_CHILD) {
        return status; /* nothing to finalize: the app never ran */
    }
    if (metrics_fd >= 0) {
        (void)sl_metrics_attach(metrics_fd, worker_id);
    }
    sl_proctitle_set(name, "%s: worker %d [%s]", name, worker_id, o->app);
    return sl_worker_serve(o, &a, fds, n, tls_fds, ntls, worker_id, ctl_fd);
}

/* "3,4,5" into fds[], each checked to be open and made close-on-exec.
 * Returns how many, or -1. */
static int parse_fd_list(const char *list, int *fds, int max)
{
    char buf[1024];
    int n = 0;

    if (strlen(list) >= sizeof(buf)) {
        return -1;
    }
    strcpy(buf, list);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        if (n == max || sl_startup_int(tok, &fds[n]) == -1 ||
            fcntl(fds[n], F_SETFD, FD_CLOEXEC) == -1) {
            return -1;
        }
        n++;
    }
    return n;
}

/* Bytes below which malloc serves from the heap, and free heap it keeps
 * at its top before giving memory back: see tune_malloc(). */
#define MALLOC_KEEP (4 * 1024 * 1024)

/* Whether the operator chose a malloc setting: the variable ENV, or NAME
 * in GLIBC_TUNABLES. */
static bool malloc_chosen(const char *env, const char *name)
{
    const char *t = getenv("GLIBC_TUNABLES");

    return getenv(env) != NULL || (t != NULL && strstr(t, name) != NULL);
}

/* glibc malloc for a worker, where the operator did not choose (the
 * MALLOC_*_ variables, or GLIBC_TUNABLES); before any thread exists, as
 * mallopt() wants.
 *
 * One arena. By default every thread that allocates gets an arena of its
 * own, and the executor's kept freed memory in pieces it did not give
 * back: over 700k ASGI soak requests the worker's RSS grew 1.25 MiB with
 * an arena per thread, 0.2 MiB with one (bench/results/soak.md). Python
 * allocates under its GIL, so one arena is contended by the loop thread
 * and one Python thread at most.
 *
 * Fixed heap thresholds. By default glibc gives the top of the heap back
 * once 128 KiB of it is free (the threshold climbs only after a block
 * over 128 KiB is freed, and then up to 64 MiB), so a worker streaming
 * large responses shrank and regrew its heap on every one and faulted the
 * pages in again: a 1 MiB WSGI body to 16 connections (queued 64 KiB at
 * a time, wsgi.c) cost 1.6 ms of CPU and 53 page faults per response;
 * 0.36 ms and 0.1 with 4 MiB kept. The price is at most 4 MiB of free heap
 * held after a burst. */
static void tune_malloc(void)
{
    /* mallopt() fails only under a sanitizer's allocator, which keeps its
     * own: nothing to tell */
    if (!malloc_chosen("MALLOC_ARENA_MAX", "arena_max"))
        (void)mallopt(M_ARENA_MAX, 1);
    if (!malloc_chosen("MALLOC_MMAP_THRESHOLD_", "mmap_threshold"))
        (void)mallopt(M_MMAP_THRESHOLD, MALLOC_KEEP);
    if (!malloc_chosen("MALLOC_TRIM_THRESHOLD_", "trim_threshold"))
        (void)mallopt(M_TRIM_THRESHOLD, MALLOC_KEEP);
}
