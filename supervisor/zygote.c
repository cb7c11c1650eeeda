/* zygote.c - --preload: start zygotes, ask them for workers (zygote.h).
 *
 * A zygote's channel is read from the loop only until READY: after that
 * it says nothing unasked, and the answer to a FORK is read here, at once,
 * by sl_zygotes_fork(). Waiting on the loop instead would leave a slot in
 * the table without a pid (and kill(0, ...) signals the whole process
 * group), and a worker that exits at once could be reaped before its pid
 * was known. A fork answers in a millisecond or two.
 *
 * EOF on the channel needs no action of its own: the zygote's exit is
 * seen when it is reaped.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/handoff.h"
#include "common/log.h"
#include "common/options.h"
#include "common/zygote.h"
#include "supervisor/spawn.h"
#include "supervisor/zygote.h"

static void on_channel(struct ev_loop *loop, ev_io *io, int revents);
static void close_channel(sl_zygotes_t *zs, sl_zygote_t *z);

void sl_zygotes_init(sl_zygotes_t *zs, struct ev_loop *loop)
{
    memset(zs, 0, sizeof(*zs));
    zs->loop = loop;
    for (int i = 0; i < SL_ZYGOTES; i++) {
        zs->z[i].fd = -1;
    }
}

sl_zygote_t *sl_zygotes_find(sl_zygotes_t *zs, unsigned gen)
{
    for (int i = 0; i < SL_ZYGOTES; i++) {
        sl_zygote_t *z = &zs->z[i];
        if (z->pid != 0 && z->gen == gen && !z->asked) {
            return z;
        }
    }
    return NULL;
}

sl_zygote_t *sl_zygotes_start(sl_zygotes_t *zs, const char *exe, char **argv,
                              const int *fds, int nfds, unsigned gen,
                              int metrics_fd)
{
    sl_zygote_t *z = NULL;
    int pair[2];

    for (int i = 0; i < SL_ZYGOTES && z == NULL; i++) {
        if (zs->z[i].pid == 0) {
            z = &zs->z[i];
        }
    }
    if (z == NULL) {
        sl_error("cannot start a zygote: %d are alive already", SL_ZYGOTES);
        return NULL;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == -1) {
        sl_log_errno(SL_LOG_ERROR, "socketpair() failed for a zygote");
        return NULL;
    }
    pid_t pid = sl_spawn_zygote(exe, argv, fds, nfds, pair[1], gen, metrics_fd);
    close(pair[1]);
    if (pid == -1) {
        close(pair[0]);
        return NULL;
    }
    *z = (sl_zygote_t){
        .pid = pid, .fd = pair[0], .gen = gen, .started = ev_now(zs->loop)};
    ev_io_init(&z->io, on_channel, z->fd, EV_READ);
    z->io.data = zs;
    ev_io_start(zs->loop, &z->io);
    sl_info("Booting the zygote of generation %u with pid: %ld", gen,
            (long)pid);
    return z;
}

/* READY (or EOF, or garbage) from a zygote that has not said READY. */
static void on_channel(struct ev_loop *loop, ev_io *io, int revents)
{
    sl_zygotes_t *zs = io->data;
    sl_zygote_t *z = (sl_zygote_t *)((char *)io - offsetof(sl_zygote_t, io));
    sl_zygote_msg_t m;
    ssize_t n;

    (void)revents;
    while ((n = recv(z->fd, &m, sizeof(m), 0)) == -1 && errno == EINTR)
        ;
    if (n == -1 && errno == EAGAIN) {
        return;
    }
    if (n == (ssize_t)sizeof(m) && m.type == SL_ZYGOTE_READY) {
        z->ready = true;
        ev_io_stop(loop, &z->io);
        sl_info("The zygote of generation %u (pid %ld) is ready (app loaded"
                " in %.3fs, %.3fs after its start)",
                z->gen, (long)z->pid, m.load_time, ev_now(loop) - z->started);
        return;
    }
    if (n > 0) {
        sl_error("the zygote of generation %u (pid %ld) sent %zd bytes that"
                 " are not READY: sending SIGKILL",
                 z->gen, (long)z->pid, n);
        sl_zygotes_kill(z, SIGKILL);
    }
    close_channel(zs, z); /* EOF: its end is seen when it is reaped */
}

pid_t sl_zygotes_fork(sl_zygotes_t *zs, sl_zygote_t *z, int worker_id,
                      int ctl_fd, const int *fds, int nfds)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int) * (1 + SL_MAX_LISTENERS))];
    } ctl;
    sl_zygote_msg_t m = {.type = SL_ZYGOTE_FORK, .worker_id = worker_id};
    struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = ctl.buf,
                         .msg_controllen = sizeof(ctl.buf)};
    struct cmsghdr *c;
    struct pollfd pfd = {.fd = z->fd, .events = POLLIN};
    ssize_t n;
    int r;

    if (!z->ready || z->fd < 0) {
        return -1;
    }
    if (nfds > SL_MAX_LISTENERS) {
        return -1; /* the supervisor never has more */
    }
    memset(ctl.buf, 0, sizeof(ctl.buf));
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)(1 + nfds));
    c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)(1 + nfds));
    memcpy(CMSG_DATA(c), &ctl_fd, sizeof(int));
    if (nfds > 0) {
        memcpy(CMSG_DATA(c) + sizeof(int), fds, sizeof(int) * (size_t)nfds);
    }
    while ((n = sendmsg(z->fd, &msg, MSG_NOSIGNAL)) == -1 && errno == EINTR)
        ;
    if (n != (ssize_t)sizeof(m)) {
        sl_log_errno(SL_LOG_ERROR,
                     "cannot ask the zygote of generation %u (pid %ld) for"
                     " worker %d",
                     z->gen, (long)z->pid, worker_id);
        return -1;
    }
    while ((r = poll(&pfd, 1, (int)(SL_ZYGOTE_ANSWER_WAIT * 1000))) == -1 &&
           errno == EINTR)
        ;
    n = r == 1 ? recv(z->fd, &m, sizeof(m), 0) : -1;
    if (n == (ssize_t)sizeof(m) && m.worker_id == worker_id &&
        m.type == SL_ZYGOTE_FORKED && m.pid > 0) {
        return (pid_t)m.pid;
    }
    if (n == (ssize_t)sizeof(m) && m.type == SL_ZYGOTE_FAILED) {
        sl_error("the zygote of generation %u (pid %ld) could not fork worker"
                 " %d: %s",
                 z->gen, (long)z->pid, worker_id, strerror(m.err));
        return -1;
    }
    if (n == 0) {
        sl_error("the zygote of generation %u (pid %ld) closed its channel"
                 " when asked for worker %d",
                 z->gen, (long)z->pid, worker_id);
        close_channel(zs, z);
        return -1;
    }
    sl_error("the zygote of generation %u (pid %ld) did not answer for"
             " worker %d within %.0fs: sending SIGKILL",
             z->gen, (long)z->pid, worker_id, SL_ZYGOTE_ANSWER_WAIT);
    sl_zygotes_kill(z, SIGKILL);
    return -1;
}

void sl_zygotes_kill(sl_zygote_t *z, int sig)
{
    if (z->pid > 0 && kill(z->pid, sig) == -1 && errno != ESRCH) {
        sl_log_errno(SL_LOG_ERROR, "kill(%ld, %s) failed on a zygote",
                     (long)z->pid, strsignal(sig));
    }
    z->asked = true;
}

void sl_zygotes_kill_all(sl_zygotes_t *zs, int sig)
{
    for (int i = 0; i < SL_ZYGOTES; i++) {
        if (zs->z[i].pid != 0) {
            sl_zygotes_kill(&zs->z[i], sig);
        }
    }
}

void sl_zygotes_reopen_logs(sl_zygotes_t *zs)
{
    for (int i = 0; i < SL_ZYGOTES; i++) {
        /* one not READY yet has no handler: it opens the log of now */
        if (zs->z[i].pid != 0 && zs->z[i].ready && !zs->z[i].asked) {
            (void)kill(zs->z[i].pid, SIGUSR1);
        }
    }
}

bool sl_zygotes_reaped(sl_zygotes_t *zs, pid_t pid, int status,
                       sl_zygote_end_t *end)
{
    sl_zygote_t *z = NULL;

    /* pid 0 is a free slot's */
    for (int i = 0; i < SL_ZYGOTES && z == NULL && pid > 0; i++) {
        if (zs->z[i].pid == pid) {
            z = &zs->z[i];
        }
    }
    if (z == NULL) {
        return false;
    }
    *end = (sl_zygote_end_t){.gen = z->gen,
                             .ready = z->ready,
                             .asked = z->asked,
                             .age = ev_now(zs->loop) - z->started};
    if (WIFEXITED(status)) {
        int code = WEXITSTATUS(status);
        sl_log(code == 0 || z->asked                  ? SL_LOG_INFO
               : code == SL_EXIT_APPLOAD && !z->ready ? SL_LOG_WARNING
                                                      : SL_LOG_ERROR,
               "The zygote of generation %u (pid %ld) exited with code %d%s",
               z->gen, (long)pid, code,
               code == SL_EXIT_APPLOAD ? ": the application failed to load"
                                       : "");
    } else if (WIFSIGNALED(status)) {
        sl_log(z->asked ? SL_LOG_INFO : SL_LOG_ERROR,
               "The zygote of generation %u (pid %ld) was killed by signal %d"
               " (%s)%s",
               z->gen, (long)pid, WTERMSIG(status), strsignal(WTERMSIG(status)),
               z->asked ? "" : "; its workers serve on");
    }
    close_channel(zs, z);
    *z = (sl_zygote_t){.fd = -1};
    return true;
}

int sl_zygotes_count(const sl_zygotes_t *zs)
{
    int n = 0;

    for (int i = 0; i < SL_ZYGOTES; i++) {
        n += zs->z[i].pid != 0;
    }
    return n;
}

static void close_channel(sl_zygotes_t *zs, sl_zygote_t *z)
{
    if (z->fd >= 0) {
        ev_io_stop(zs->loop, &z->io);
        close(z->fd);
        z->fd = -1;
    }
}
