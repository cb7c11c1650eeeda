/* spawn.c - fork + exec of one worker.
 *
 * Between fork() and exec() the child runs supervisor code with the
 * supervisor's signal handlers, which write to the supervisor's libev wake-up
 * pipe. So every signal is blocked across fork(); the child resets all
 * dispositions to their defaults before unblocking, and a signal meant for
 * the supervisor waits in the parent until it has restored its mask.
 *
 * The child asks the kernel for SIGTERM when the supervisor dies
 * (PR_SET_PDEATHSIG survives exec), so an orphaned worker drains and exits
 * even if the supervisor was SIGKILLed before it could tell anyone.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "common/log.h"
#include "supervisor/spawn.h"

#define FDLIST_MAX 1024 /* "3,4,...": room for SL_MAX_LISTENERS numbers */

static void exec_worker(char *const argv[], const int *fds, int nfds,
                        int worker_id, int ctl_fd, pid_t parent)
    __attribute__((noreturn));
static int keep_across_exec(int fd);

pid_t sl_spawn_worker(char *const argv[], const int *fds, int nfds,
                      int worker_id, int ctl_fd)
{
    sigset_t all, old;
    pid_t parent = getpid();

    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &old);

    pid_t pid = fork();
    if (pid == 0) {
        exec_worker(argv, fds, nfds, worker_id, ctl_fd, parent);
    }
    int err = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid == -1) {
        errno = err;
        sl_log_errno(SL_LOG_ERROR, "fork() failed for worker %d", worker_id);
    }
    return pid;
}

static void exec_worker(char *const argv[], const int *fds, int nfds,
                        int worker_id, int ctl_fd, pid_t parent)
{
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigset_t none;
    char buf[16];
    char list[FDLIST_MAX];
    size_t len = 0;

    for (int sig = 1; sig < NSIG; sig++) {
        sigaction(sig, &dfl, NULL); /* fails harmlessly for KILL, STOP */
    }
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) == -1) {
        sl_log_errno(SL_LOG_ERROR, "prctl(PR_SET_PDEATHSIG) failed");
        _exit(127);
    }
    if (getppid() != parent) {
        _exit(1); /* the supervisor died before prctl() took effect */
    }

    list[0] = '\0';
    for (int i = 0; i < nfds; i++) {
        if (keep_across_exec(fds[i]) == -1) {
            _exit(127);
        }
        len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%d",
                                i ? "," : "", fds[i]);
    }
    snprintf(buf, sizeof(buf), "%d", worker_id);
    if (setenv("SLUICE_WORKER_ID", buf, 1) == -1 ||
        setenv("SLUICE_LISTEN_FDS", list, 1) == -1) {
        sl_log_errno(SL_LOG_ERROR, "setenv() failed");
        _exit(127);
    }
    if (ctl_fd >= 0) {
        snprintf(buf, sizeof(buf), "%d", ctl_fd);
        if (keep_across_exec(ctl_fd) == -1 ||
            setenv("SLUICE_CTL_FD", buf, 1) == -1) {
            _exit(127);
        }
    } else {
        unsetenv("SLUICE_CTL_FD");
    }

    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execv("/proc/self/exe", argv);
    sl_log_errno(SL_LOG_ERROR, "execv(\"/proc/self/exe\") failed");
    _exit(127);
}

static int keep_across_exec(int fd)
{
    if (fcntl(fd, F_SETFD, 0) == -1) {
        sl_log_errno(SL_LOG_ERROR, "fcntl(%d, F_SETFD) failed", fd);
        return -1;
    }
    return 0;
}
