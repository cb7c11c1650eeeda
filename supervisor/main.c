/* main.c - sluice's entry point: argv to options, then supervisor or worker.
 *
 * There is one binary. Started by a person or by systemd it is the
 * supervisor; exec'd by the supervisor with SLUICE_WORKER_ID in its
 * environment it is a worker; exec'd by a supervisor on USR2 with
 * SLUICE_UPGRADE_FDS it is the supervisor that takes over, with the old
 * one's sockets. All parse the same argv, so all see the same options, and
 * all set up the error log the same way before anything else can log.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/options.h"
#include "common/proctitle.h"
#include "supervisor/listen.h"
#include "supervisor/supervisor.h"
#include "worker/worker.h"

static int run_supervisor(sl_options_t *o, char **args);
static int open_listeners(sl_options_t *o, sl_listener_t *ls);
static int run_worker(const sl_options_t *o, const char *id);
static int parse_fd_list(const char *list, int *fds, int max);
static int parse_int(const char *s, int *out);

int main(int argc, char **argv)
{
    sl_options_t o;

    /* First, before anything keeps a pointer into argv or the environment:
     * process titles are written over that memory. ARGS is the copy every
     * exec uses as given; getopt_long() reorders PARSE, its twin. */
    static char **parse; /* kept: the options borrow its strings */
    char **args = sl_proctitle_init(argc, argv);
    parse = calloc((size_t)argc + 1, sizeof(*parse));
    if (args == NULL || parse == NULL) {
        sl_log_usage("out of memory");
        return SL_EXIT_FAIL;
    }
    memcpy(parse, args, (size_t)argc * sizeof(*parse));

    int rc = sl_options_parse(&o, argc, parse);
    if (rc != 0) {
        return rc == 1 ? SL_EXIT_OK : SL_EXIT_USAGE;
    }
    sl_log_set_level(o.log_level);
    if (o.error_logfile != NULL && sl_log_open(o.error_logfile) == -1) {
        sl_log_usage("cannot open the error log %s: %s", o.error_logfile,
                     strerror(errno));
        return SL_EXIT_USAGE;
    }

    const char *worker_id = getenv("SLUICE_WORKER_ID");
    if (worker_id != NULL) {
        return run_worker(&o, worker_id);
    }
    return run_supervisor(&o, args);
}

static int run_supervisor(sl_options_t *o, char **args)
{
    static sl_listener_t ls[SL_MAX_LISTENERS];
    int workers;

    /* A binary upgrade keeps the worker count TTIN/TTOU left behind. */
    const char *w = getenv("SLUICE_UPGRADE_WORKERS");
    if (w != NULL && parse_int(w, &workers) == 0 && workers > 0) {
        o->workers = workers;
    }
    unsetenv("SLUICE_UPGRADE_WORKERS");

    sl_info("Starting sluice %s", PACKAGE_VERSION);
    int n = open_listeners(o, ls);
    if (n == -1) {
        return SL_EXIT_USAGE;
    }
    int rc = sl_supervisor_run(o, args, ls, n);
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

/* Worker mode: take the descriptors the supervisor passed, mark them
 * close-on-exec again (so nothing the application starts inherits a
 * listener) and clear the SLUICE_* variables for the same reason. */
static int run_worker(const sl_options_t *o, const char *id)
{
    int fds[SL_MAX_LISTENERS];
    int worker_id, ctl_fd = -1;
    const char *list = getenv("SLUICE_LISTEN_FDS");
    const char *ctl = getenv("SLUICE_CTL_FD");

    if (parse_int(id, &worker_id) == -1) {
        sl_error("SLUICE_WORKER_ID='%s' is not a worker number", id);
        return SL_EXIT_FAIL;
    }
    int n = parse_fd_list(list ? list : "", fds, SL_MAX_LISTENERS);
    if (n <= 0) {
        sl_error("SLUICE_LISTEN_FDS='%s' is not a list of open descriptors",
                 list ? list : "");
        return SL_EXIT_FAIL;
    }
    if (ctl != NULL && (parse_fd_list(ctl, &ctl_fd, 1) != 1)) {
        sl_error("SLUICE_CTL_FD='%s' is not an open descriptor", ctl);
        return SL_EXIT_FAIL;
    }
    unsetenv("SLUICE_WORKER_ID");
    unsetenv("SLUICE_LISTEN_FDS");
    unsetenv("SLUICE_CTL_FD");

    const char *name = o->proc_name ? o->proc_name : "sluice";
    sl_proctitle_set(name, "%s: worker %d [%s]", name, worker_id, o->app);
    return sl_worker_main(o, fds, n, worker_id, ctl_fd);
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
        if (n == max || parse_int(tok, &fds[n]) == -1 ||
            fcntl(fds[n], F_SETFD, FD_CLOEXEC) == -1) {
            return -1;
        }
        n++;
    }
    return n;
}

static int parse_int(const char *s, int *out)
{
    char *end;

    errno = 0;
    long v = strtol(s, &end, 10);
    if (s[0] < '0' || s[0] > '9' || *end != '\0' || errno != 0 || v > INT_MAX) {
        return -1;
    }
    *out = (int)v;
    return 0;
}
