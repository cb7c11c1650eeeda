/* zygote.h - --preload: a sluice-worker that loads the app once and forks
 * the workers of its generation (the channel: common/zygote.h).
 */
#ifndef SL_WORKER_ZYGOTE_H
#define SL_WORKER_ZYGOTE_H

#include <sys/types.h>

#include "common/handoff.h"
#include "common/options.h"

/* What sl_zygote_run() returns in a forked worker. */
#define SL_ZYGOTE_CHILD (-1)

/* What a forked worker is given. */
typedef struct {
    int worker_id;
    int ctl_fd;                /* its control channel */
    pid_t parent;              /* the supervisor */
    int fds[SL_MAX_LISTENERS]; /* the listeners, in the supervisor's order */
} sl_zygote_child_t;

/* The app is loaded (worker.h: sl_worker_load(), LOAD_TIME seconds): make
 * its objects permanent for the collector (gc.freeze(), so that it does
 * not write to the pages the workers share), refuse to go on when a
 * thread is running (named in the error), say READY on FD and fork a
 * worker for every FORK, which brings the worker's control channel and
 * the NLISTENERS listening sockets: the zygote holds no listener of its
 * own, so it is never the last to close one (which would reset the
 * connections waiting in its queue). Returns the zygote's exit status:
 * SL_EXIT_OK when the supervisor has gone (EOF), SL_EXIT_APPLOAD when a
 * thread runs. In a forked worker it returns SL_ZYGOTE_CHILD with *CHILD
 * filled: the worker goes on to serve, and calls sl_zygote_settle()
 * before its executor starts. */
int sl_zygote_run(int fd, double load_time, int nlisteners,
                  sl_zygote_child_t *child);

/* In a forked worker: wait until SUPERVISOR is the parent, then ask for
 * SIGTERM at its death, as an exec'd worker has it. Exits (SL_EXIT_FAIL,
 * logged) when the supervisor is gone or does not become the parent. */
void sl_zygote_settle(pid_t supervisor);

#endif
