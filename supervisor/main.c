/* main.c - sluice's entry point: the supervisor.
 *
 * Started by a person or by systemd, sluice is the supervisor; exec'd by a
 * supervisor on USR2 with SLUICE_UPGRADE_FDS it is the supervisor that
 * takes over, with the old one's sockets. Workers are another executable,
 * sluice-worker (worker/main.c), exec'd with the same argv; this one never
 * links Python. Which sluice-worker is found once, here, before anything
 * is bound (supervisor/spawn.h says where it looks), so a missing one is
 * one error line and exit status 2, not a worker that dies on every spawn.
 */
#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/options.h"
#include "common/startup.h"
#include "supervisor/listen.h"
#include "supervisor/spawn.h"
#include "supervisor/supervisor.h"

static int run_supervisor(sl_options_t *o, char **args);
static int open_listeners(sl_options_t *o, sl_listener_t *ls);
static int check_access_log(const sl_options_t *o);

int main(int argc, char **argv)
{
    sl_options_t o;
    char **args;
    int status;

    if (!sl_startup(argc, argv, &o, &args, &status)) {
        return status;
    }
    return run_supervisor(&o, args);
}

static int run_supervisor(sl_options_t *o, char **args)
{
    static sl_listener_t ls[SL_MAX_LISTENERS];
    static char worker_exe[PATH_MAX];
    int workers;

    /* A binary upgrade keeps the worker count TTIN/TTOU left behind. */
    const char *w = getenv("SLUICE_UPGRADE_WORKERS");
    if (w != NULL && sl_startup_int(w, &workers) == 0 && workers > 0) {
        o->workers = workers;
    }
    unsetenv("SLUICE_UPGRADE_WORKERS");

    if (sl_spawn_find_worker(worker_exe, sizeof(worker_exe)) == -1) {
        return SL_EXIT_USAGE;
    }
    if (check_access_log(o) == -1) {
        return SL_EXIT_USAGE;
    }
    sl_info("Starting sluice %s (workers: %s)", PACKAGE_VERSION, worker_exe);
    int n = open_listeners(o, ls);
    if (n == -1) {
        return SL_EXIT_USAGE;
    }
    int rc = sl_supervisor_run(o, worker_exe, args, ls, n);
    sl_listen_close(ls, n, true);
    return rc;
}

/* The old supervisor's sockets after USR2, else systemd's or --bind's. */
static int open_listeners(sl_options_t *o, sl_listener_t *ls)
{
    const char *inherited = getenv("SLUICE_UPGRADE_FDS");

    if (inherited == NULL) {
        return sl_listen_open(o, ls, SL_MAX_LISTENERS);
    }
    char list[1024];
    snprintf(list, sizeof(list), "%s", inherited);
    unsetenv("SLUICE_UPGRADE_FDS");
    return sl_listen_inherit(list, ls, SL_MAX_LISTENERS);
}

/* The workers open the access log (after --chdir); one they cannot open
 * is said once, here, instead of by every worker in a respawn loop. */
static int check_access_log(const sl_options_t *o)
{
    const char *f = o->access_logfile;
    char path[PATH_MAX];

    if (f == NULL || strcmp(f, "-") == 0) {
        return 0;
    }
    if (f[0] != '/' && o->chdir != NULL) {
        snprintf(path, sizeof(path), "%s/%s", o->chdir, f);
        f = path;
    }
    int fd = open(f, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd == -1) {
        sl_log_errno(SL_LOG_ERROR, "cannot open the access log %s", f);
        return -1;
    }
    close(fd);
    return 0;
}
