/* upgrade.c - binary upgrade on USR2 (see upgrade.h).
 *
 * Why a new process and not an exec in place: exec'ing over the running
 * supervisor would bet the service on the new binary starting at all. Here
 * the old supervisor and its workers keep serving until the new supervisor
 * has proved itself (every one of its workers READY), and a new binary
 * that fails for any reason costs nothing but a log line. Both generations
 * of workers accept from the same sockets meanwhile, so nothing waiting in
 * a backlog is lost.
 *
 * The pipe carries one byte, 'R'. EOF without it means the new supervisor
 * gave up (its exit status, reaped by the old one, says why).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "common/startup.h"
#include "supervisor/spawn.h"
#include "supervisor/upgrade.h"

#define READY_BYTE 'R'

static void on_pipe(struct ev_loop *loop, ev_io *io, int revents);
static void close_pipe(sl_upgrade_t *u);
static int env_int(const char *name);

void sl_upgrade_init(sl_upgrade_t *u, struct ev_loop *loop, sl_upgrade_cb *done,
                     void *ctx)
{
    memset(u, 0, sizeof(*u));
    u->loop = loop;
    u->done = done;
    u->ctx = ctx;
    u->pipe_fd = -1;
    u->parent_fd = env_int("SLUICE_UPGRADE_PIPE");
    int parent = env_int("SLUICE_UPGRADE_FROM");
    u->parent = parent > 0 ? (pid_t)parent : 0;
    if (u->parent_fd >= 0 && fcntl(u->parent_fd, F_SETFD, FD_CLOEXEC) == -1) {
        sl_log_errno(SL_LOG_WARNING, "fcntl(%d, FD_CLOEXEC) failed",
                     u->parent_fd);
    }
    unsetenv("SLUICE_UPGRADE_PIPE");
    unsetenv("SLUICE_UPGRADE_FROM");
}

bool sl_upgrade_is_successor(const sl_upgrade_t *u)
{
    return u->parent_fd >= 0;
}

pid_t sl_upgrade_parent(const sl_upgrade_t *u)
{
    return u->parent;
}

int sl_upgrade_start(sl_upgrade_t *u, const char *exe, char **argv,
                     const sl_listener_t *ls, int nls, int workers)
{
    char fdlist[1024], e_fds[1100], e_pipe[64], e_workers[64], e_from[64];
    int keep[SL_MAX_LISTENERS + 1];
    int p[2];

    if (u->child != 0) {
        sl_warn("a binary upgrade is already under way (new supervisor pid"
                " %ld)",
                (long)u->child);
        return -1;
    }
    if (sl_listen_fdlist(ls, nls, fdlist, sizeof(fdlist)) == -1) {
        sl_error("binary upgrade: too many listeners to pass on");
        return -1;
    }
    if (pipe2(p, O_CLOEXEC) == -1) {
        sl_log_errno(SL_LOG_ERROR, "pipe2() failed for the binary upgrade");
        return -1;
    }
    snprintf(e_fds, sizeof(e_fds), "SLUICE_UPGRADE_FDS=%s", fdlist);
    snprintf(e_pipe, sizeof(e_pipe), "SLUICE_UPGRADE_PIPE=%d", p[1]);
    snprintf(e_workers, sizeof(e_workers), "SLUICE_UPGRADE_WORKERS=%d",
             workers);
    snprintf(e_from, sizeof(e_from), "SLUICE_UPGRADE_FROM=%ld", (long)getpid());
    char *env[] = {e_fds, e_pipe, e_workers, e_from, NULL};
    int nkeep = 0;
    for (int i = 0; i < nls && i < SL_MAX_LISTENERS; i++) {
        keep[nkeep++] = ls[i].fd;
    }
    keep[nkeep++] = p[1];

    pid_t pid = sl_spawn_supervisor(exe, argv, keep, nkeep, env);
    close(p[1]);
    if (pid == -1) {
        close(p[0]);
        return -1;
    }
    if (fcntl(p[0], F_SETFL, O_NONBLOCK) == -1) {
        sl_log_errno(SL_LOG_WARNING, "fcntl(O_NONBLOCK) failed on the"
                                     " upgrade pipe");
    }
    u->child = pid;
    u->took_over = false;
    u->pipe_fd = p[0];
    ev_io_init(&u->pipe_watcher, on_pipe, u->pipe_fd, EV_READ);
    u->pipe_watcher.data = u;
    ev_io_start(u->loop, &u->pipe_watcher);
    sl_info("Binary upgrade: started a new supervisor (pid %ld) from %s",
            (long)pid, exe);
    return 0;
}

void sl_upgrade_took_over(sl_upgrade_t *u)
{
    char byte = READY_BYTE;

    if (u->parent_fd < 0) {
        return;
    }
    ssize_t n;
    do {
        n = write(u->parent_fd, &byte, 1);
    } while (n == -1 && errno == EINTR);
    if (n != 1) {
        sl_log_errno(SL_LOG_WARNING, "write() to the old supervisor's pipe"
                                     " failed");
    }
    close(u->parent_fd);
    u->parent_fd = -1;
}

bool sl_upgrade_reaped(sl_upgrade_t *u, pid_t pid, int status)
{
    char why[128];

    if (u->child == 0 || pid != u->child) {
        return false;
    }
    u->child = 0;
    close_pipe(u);
    if (u->took_over) {
        sl_warn("the new supervisor (pid %ld) has exited", (long)pid);
        return true;
    }
    if (WIFEXITED(status)) {
        snprintf(why, sizeof(why),
                 "the new supervisor (pid %ld) exited with code %d", (long)pid,
                 WEXITSTATUS(status));
    } else {
        snprintf(why, sizeof(why),
                 "the new supervisor (pid %ld) was killed by signal %d (%s)",
                 (long)pid, WTERMSIG(status), strsignal(WTERMSIG(status)));
    }
    u->done(u->ctx, pid, false, why);
    return true;
}

bool sl_upgrade_running(const sl_upgrade_t *u)
{
    return u->child != 0 && !u->took_over;
}

void sl_upgrade_signal(const sl_upgrade_t *u, int sig)
{
    if (sl_upgrade_running(u) && kill(u->child, sig) == -1 && errno != ESRCH) {
        sl_log_errno(SL_LOG_ERROR,
                     "kill(%ld, %s) failed on the new"
                     " supervisor",
                     (long)u->child, strsignal(sig));
    }
}

/* The one byte, or EOF. A failure is reported when the child is reaped,
 * with its exit status; here EOF only stops the watcher. */
static void on_pipe(struct ev_loop *loop, ev_io *io, int revents)
{
    sl_upgrade_t *u = io->data;
    char byte;

    (void)loop;
    (void)revents;
    ssize_t n = read(u->pipe_fd, &byte, 1);
    if (n == -1 && (errno == EAGAIN || errno == EINTR)) {
        return;
    }
    if (n == -1) {
        sl_log_errno(SL_LOG_WARNING, "read() failed on the upgrade pipe");
    }
    close_pipe(u);
    if (n == 1 && byte == READY_BYTE && u->child != 0) {
        u->took_over = true;
        u->done(u->ctx, u->child, true, NULL);
    }
}

static void close_pipe(sl_upgrade_t *u)
{
    if (u->pipe_fd != -1) {
        ev_io_stop(u->loop, &u->pipe_watcher);
        close(u->pipe_fd);
        u->pipe_fd = -1;
    }
}

/* A non-negative integer from the environment, or -1. */
static int env_int(const char *name)
{
    const char *v = getenv(name);
    int n;

    if (v == NULL || sl_startup_int(v, &n) == -1) {
        return -1;
    }
    return n;
}
