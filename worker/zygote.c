/* zygote.c - --preload: fork the workers of a generation from one process
 * that has imported the app (see common/zygote.h for the channel).
 *
 * What is shared is what fork() shares: every page the import wrote,
 * copy-on-write, as long as nobody writes it again. Python's collector
 * would (it links every object it tracks into its lists, and a collection
 * walks and writes them all), so the zygote runs one collection and then
 * gc.freeze(): what the import made moves to a permanent generation that
 * later collections leave alone, in the zygote and in every worker.
 *
 * A thread cannot be forked: the child gets only the thread that called
 * fork(), and any lock another thread held stays held for good. An import
 * that starts a thread (a metrics exporter, a connection pool's keeper)
 * would give every worker a deadlock waiting to happen, so the zygote
 * refuses: it names the thread and exits as a failed app load. It looks
 * after loading and again before every fork.
 *
 * Each worker is forked twice (common/zygote.h): the middle process exits
 * at once and the worker becomes the supervisor's child. It waits for
 * that before asking the kernel for SIGTERM at the supervisor's death:
 * PR_SET_PDEATHSIG is about the parent of the moment.
 */
#include "config.h"

#include <Python.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/options.h"
#include "common/zygote.h"
#include "worker/zygote.h"

/* How long a forked worker waits to become the supervisor's child: the
 * middle process exits right after its fork, so this is never reached
 * unless the supervisor is not a subreaper. */
#define REPARENT_WAIT_NS (2 * 1000 * 1000 * 1000LL)

static int freeze(void);
static bool thread_running(void);
static int send_msg(int fd, const sl_zygote_msg_t *m);
static int recv_fork(int fd, sl_zygote_msg_t *m, int *passed);
static pid_t fork_worker(int *err);
static void become_worker(pid_t supervisor);

int sl_zygote_run(int fd, double load_time, int *worker_id, int *ctl_fd)
{
    pid_t supervisor = getppid();
    sl_zygote_msg_t m = {.type = SL_ZYGOTE_READY, .pid = (int32_t)getpid()};

    if (freeze() < 0 || thread_running())
        return SL_EXIT_APPLOAD;
    m.load_time = load_time;
    if (send_msg(fd, &m) < 0)
        return SL_EXIT_FAIL;
    for (;;) {
        int passed = -1, err = 0;
        int n = recv_fork(fd, &m, &passed);
        if (n == 0)
            return SL_EXIT_OK; /* the supervisor is gone, or let us go */
        if (n < 0)
            return SL_EXIT_FAIL;
        if (passed < 0) {
            sl_warn("zygote: a FORK for worker %d came without its channel",
                    m.worker_id);
            err = EINVAL;
        } else if (thread_running()) {
            close(passed);
            m = (sl_zygote_msg_t){.type = SL_ZYGOTE_FAILED,
                                  .worker_id = m.worker_id,
                                  .err = EAGAIN};
            (void)send_msg(fd, &m);
            return SL_EXIT_APPLOAD;
        }
        pid_t pid = err != 0 ? -1 : fork_worker(&err);
        if (pid == 0) {
            become_worker(supervisor);
            close(fd);
            *worker_id = m.worker_id;
            *ctl_fd = passed;
            return SL_ZYGOTE_CHILD;
        }
        if (passed >= 0)
            close(passed);
        m = (sl_zygote_msg_t){.type =
                                  pid > 0 ? SL_ZYGOTE_FORKED : SL_ZYGOTE_FAILED,
                              .worker_id = m.worker_id,
                              .pid = pid > 0 ? (int32_t)pid : 0,
                              .err = err};
        if (send_msg(fd, &m) < 0)
            return SL_EXIT_FAIL;
    }
}

/* gc.collect(), then gc.freeze(). 0, or -1 after one error line. */
static int freeze(void)
{
    PyObject *gc = PyImport_ImportModule("gc");
    PyObject *r = NULL;

    if (gc != NULL && (r = PyObject_CallMethod(gc, "collect", NULL)) != NULL) {
        Py_DECREF(r);
        r = PyObject_CallMethod(gc, "freeze", NULL);
    }
    Py_XDECREF(gc);
    if (r == NULL) {
        PyErr_Clear();
        sl_error("--preload: gc.freeze() failed in the zygote");
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

/* The name of thread TID into BUF: threading's name when the threading
 * module knows it, else the kernel's (/proc/self/task/TID/comm). */
static void thread_name(long tid, char *buf, size_t size)
{
    PyObject *g = PyDict_New(), *r = NULL, *name = NULL;
    char path[64];
    FILE *f;

    buf[0] = '\0';
    if (g != NULL)
        r = PyRun_String("import sys\n"
                         "t = sys.modules.get('threading')\n"
                         "names = {x.native_id: x.name for x in"
                         " t.enumerate()} if t else {}\n",
                         Py_file_input, g, g);
    if (r != NULL) {
        PyObject *key = PyLong_FromLong(tid);
        PyObject *names = PyDict_GetItemString(g, "names"); /* borrowed */
        if (key != NULL && names != NULL && PyDict_Check(names))
            name = PyDict_GetItem(names, key); /* borrowed */
        if (name != NULL && PyUnicode_Check(name))
            snprintf(buf, size, "%s", PyUnicode_AsUTF8(name));
        Py_XDECREF(key);
    }
    PyErr_Clear();
    Py_XDECREF(r);
    Py_XDECREF(g);
    if (buf[0] != '\0')
        return;
    snprintf(path, sizeof(path), "/proc/self/task/%ld/comm", tid);
    if ((f = fopen(path, "r")) != NULL) {
        if (fgets(buf, (int)size, f) != NULL)
            buf[strcspn(buf, "\n")] = '\0';
        fclose(f);
    }
}

/* Whether a thread other than this one runs; true after one error line
 * naming it. */
static bool thread_running(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    long tid = 0;
    char name[128];

    if (d == NULL) {
        sl_log_errno(SL_LOG_WARNING, "zygote: opendir(/proc/self/task)");
        return false; /* cannot look: fork as without the check */
    }
    while ((e = readdir(d)) != NULL && tid == 0) {
        long t = strtol(e->d_name, NULL, 10);
        if (t > 0 && t != (long)getpid())
            tid = t;
    }
    closedir(d);
    if (tid == 0)
        return false;
    thread_name(tid, name, sizeof(name));
    sl_error("--preload: a thread runs in the zygote ('%s', thread id %ld),"
             " started while the app was imported; a forked worker would not"
             " have it, and would wait forever on any lock it held. Start"
             " threads after the fork (in the first request, or ASGI"
             " lifespan startup), or serve without --preload",
             name[0] ? name : "?", tid);
    return true;
}

static int send_msg(int fd, const sl_zygote_msg_t *m)
{
    /* not a client socket: the supervisor's channel */
    while (send(fd, m, sizeof(*m), MSG_NOSIGNAL) == -1) {
        if (errno != EINTR) {
            sl_log_errno(SL_LOG_ERROR, "zygote: send() to the supervisor");
            return -1;
        }
    }
    return 0;
}

/* One FORK from the supervisor: 1 (*PASSED the descriptor that came with
 * it, or -1), 0 at EOF, -1 after logging. */
static int recv_fork(int fd, sl_zygote_msg_t *m, int *passed)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct iovec iov = {.iov_base = m, .iov_len = sizeof(*m)};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = ctl.buf,
                         .msg_controllen = sizeof(ctl.buf)};
    ssize_t n;

    /* not a client socket: the supervisor's channel */
    while ((n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC)) == -1 && errno == EINTR)
        ;
    if (n == 0)
        return 0;
    if (n == -1) {
        sl_log_errno(SL_LOG_ERROR, "zygote: recvmsg() from the supervisor");
        return -1;
    }
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (c != NULL && c->cmsg_level == SOL_SOCKET &&
        c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
        memcpy(passed, CMSG_DATA(c), sizeof(int));
    if ((size_t)n != sizeof(*m) || m->type != SL_ZYGOTE_FORK) {
        if (*passed >= 0)
            close(*passed);
        *passed = -1;
    }
    return 1;
}

/* Fork twice: the worker's pid in the zygote (or -1, *ERR set), 0 in the
 * worker. The middle process tells the worker's pid through a pipe. */
static pid_t fork_worker(int *err)
{
    int pipefd[2];
    int answer[2] = {-1, 0}; /* pid, errno */

    if (pipe2(pipefd, O_CLOEXEC) == -1) {
        *err = errno;
        return -1;
    }
    PyOS_BeforeFork();
    pid_t mid = fork();
    if (mid == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            close(pipefd[0]);
            close(pipefd[1]);
            return 0;
        }
        answer[0] = (int)pid;
        answer[1] = errno;
        ssize_t w = write(pipefd[1], answer, sizeof(answer));
        _exit(w == (ssize_t)sizeof(answer) ? 0 : 1);
    }
    *err = errno;
    PyOS_AfterFork_Parent();
    close(pipefd[1]);
    if (mid > 0) {
        ssize_t r;
        while ((r = read(pipefd[0], answer, sizeof(answer))) == -1 &&
               errno == EINTR)
            ;
        while (waitpid(mid, NULL, 0) == -1 && errno == EINTR)
            ;
        if (r != (ssize_t)sizeof(answer))
            answer[0] = -1, answer[1] = EPIPE;
        *err = answer[1];
    }
    close(pipefd[0]);
    return mid > 0 ? (pid_t)answer[0] : -1;
}

/* In the forked worker: once the supervisor is the parent, SIGTERM when
 * it dies (as an exec'd worker has it); then Python's own after-fork
 * work. Exits when the supervisor is gone or never becomes the parent. */
static void become_worker(pid_t supervisor)
{
    struct timespec pause = {.tv_nsec = 50 * 1000};
    long long waited = 0;

    while (getppid() != supervisor && waited < REPARENT_WAIT_NS) {
        nanosleep(&pause, NULL);
        waited += pause.tv_nsec;
    }
    if (getppid() != supervisor || prctl(PR_SET_PDEATHSIG, SIGTERM) == -1 ||
        getppid() != supervisor)
        _exit(SL_EXIT_FAIL); /* no supervisor to serve under */
    PyOS_AfterFork_Child();
}
