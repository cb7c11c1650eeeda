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
#include "supervisor/nofile.h"
#include "supervisor/spawn.h"
#include "supervisor/supervisor.h"

static int run_supervisor(sl_options_t *o, char **args, char **eff);
static int check_config(const sl_options_t *o, char **eff);
static int open_listeners(sl_options_t *o, sl_listener_t *ls);
static int tell_tls(const sl_listener_t *ls, int n);
static void give_files(const sl_listener_t *ls, int n);
static void give_error_log(const sl_options_t *o);
static int check_access_log(const sl_options_t *o);

int main(int argc, char **argv)
{
    sl_options_t o;
    char **args, **eff;
    int status;

    if (!sl_startup_supervisor(argc, argv, &o, &args, &eff, &status)) {
        return status;
    }
    if (o.print_config) {
        int n = 0;
        while (eff[n] != NULL) {
            n++;
        }
        sl_options_print(&o, n, eff, stdout);
        return fflush(stdout) == 0 ? SL_EXIT_OK : SL_EXIT_FAIL;
    }
    if (o.check_config) {
        return check_config(&o, eff);
    }
    if (sl_spawn_set_identity(o.user, o.group) == -1) {
        return SL_EXIT_USAGE;
    }
    return run_supervisor(&o, args, eff);
}

/* --check-config: what the options alone cannot tell (the --bind
 * addresses' shape, the user and group, the TLS certificate and key),
 * without binding or importing. */
static int check_config(const sl_options_t *o, char **eff)
{
    static char worker_exe[PATH_MAX];

    sl_addr_t a;

    for (int i = 0; i < o->nbinds; i++) {
        if (sl_listen_parse(o->binds[i], &a) == -1) {
            return SL_EXIT_USAGE;
        }
    }
    for (int i = 0; i < o->ninsecure_binds; i++) {
        if (sl_listen_parse(o->insecure_binds[i], &a) == -1) {
            return SL_EXIT_USAGE;
        }
    }
    if (sl_spawn_set_identity(o->user, o->group) == -1) {
        return SL_EXIT_USAGE;
    }
    if (o->certfile != NULL) {
        if (sl_spawn_find_worker(worker_exe, sizeof(worker_exe)) == -1) {
            return SL_EXIT_USAGE;
        }
        int rc = sl_spawn_check_tls(worker_exe, eff, false);
        if (rc != SL_EXIT_OK) {
            return rc;
        }
    }
    printf("sluice: configuration OK\n");
    return fflush(stdout) == 0 ? SL_EXIT_OK : SL_EXIT_FAIL;
}

static int run_supervisor(sl_options_t *o, char **args, char **eff)
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
    /* before the TLS check: it runs as the workers' user, and opens it */
    give_error_log(o);
    if (o->certfile != NULL) {
        int rc = sl_spawn_check_tls(worker_exe, eff, false);
        if (rc != SL_EXIT_OK) {
            return rc;
        }
    }
    sl_info("Starting sluice %s (workers: %s)", PACKAGE_VERSION, worker_exe);
    int n = open_listeners(o, ls);
    if (n == -1) {
        return SL_EXIT_USAGE;
    }
    if (tell_tls(ls, n) == -1) {
        sl_listen_close(ls, n, true);
        return SL_EXIT_USAGE;
    }
    give_files(ls, n);
    /* before any worker exists: they inherit it */
    (void)sl_nofile_fit(sl_nofile_need(o, n), o->worker_connections);
    int rc = sl_supervisor_run(o, worker_exe, args, eff, ls, n);
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

/* Which listeners speak TLS, for every worker (they inherit the
 * environment: common/handoff.h); set again by a binary upgrade's new
 * supervisor, from what the old one passed. */
static int tell_tls(const sl_listener_t *ls, int n)
{
    char list[1024];

    if (sl_listen_tls_fdlist(ls, n, list, sizeof(list)) == -1 ||
        setenv("SLUICE_TLS_FDS", list, 1) == -1) {
        sl_log_usage("cannot pass the TLS listeners to the workers");
        return -1;
    }
    return 0;
}

/* With --user/--group, what the workers must be able to open by name is
 * theirs, as gunicorn does it: the unix sockets this supervisor created
 * (so that the app's user owns its socket) and the error log (which
 * workers open, and reopen on USR1; so does the TLS check). A failure is
 * a warning: the operator may have arranged permissions otherwise. */
static void give_files(const sl_listener_t *ls, int n)
{
    uid_t uid;
    gid_t gid;

    if (!sl_spawn_identity(&uid, &gid)) {
        return;
    }
    for (int i = 0; i < n; i++) {
        if (ls[i].unlink && chown(ls[i].path, uid, gid) == -1) {
            sl_log_errno(SL_LOG_WARNING, "chown(\"%s\", %ld, %ld) failed",
                         ls[i].path, (long)uid, (long)gid);
        }
    }
}

static void give_error_log(const sl_options_t *o)
{
    uid_t uid;
    gid_t gid;

    if (o->error_logfile != NULL && sl_spawn_identity(&uid, &gid) &&
        chown(o->error_logfile, uid, gid) == -1) {
        sl_log_errno(SL_LOG_WARNING, "chown(\"%s\", %ld, %ld) failed",
                     o->error_logfile, (long)uid, (long)gid);
    }
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
