/* zygote.h - --preload: a sluice-worker that loads the app once and forks
 * the workers of its generation (the channel: common/zygote.h).
 */
#ifndef SL_WORKER_ZYGOTE_H
#define SL_WORKER_ZYGOTE_H

#include "common/options.h"

/* What sl_zygote_run() returns in a forked worker. */
#define SL_ZYGOTE_CHILD (-1)

/* The app is loaded (worker.h: sl_worker_load(), LOAD_TIME seconds): make
 * its objects permanent for the collector (gc.freeze(), so that it does
 * not write to the pages the workers share), refuse to go on when a
 * thread is running (named in the error), say READY on FD and fork a
 * worker for every FORK. Returns the zygote's exit status: SL_EXIT_OK
 * when the supervisor has gone (EOF), SL_EXIT_APPLOAD when a thread runs.
 * In a forked worker it returns SL_ZYGOTE_CHILD with *WORKER_ID and
 * *CTL_FD (its control channel) set: the worker goes on to serve. */
int sl_zygote_run(int fd, double load_time, int *worker_id, int *ctl_fd);

#endif
