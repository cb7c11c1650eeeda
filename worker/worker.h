/* worker.h - a worker process: Python, the app, the loop, the drain.
 *
 * A worker is the sluice binary exec'd by the supervisor with the same argv
 * and these variables in its environment:
 *   SLUICE_WORKER_ID=N        its slot number in the supervisor's table
 *   SLUICE_LISTEN_FDS=3,4,... the inherited listening sockets
 *   SLUICE_CTL_FD=N           its end of the control socketpair (optional)
 */
#ifndef SL_WORKER_H
#define SL_WORKER_H

#include "common/options.h"

/* Run a worker until it has drained; returns the process exit status
 * (SL_EXIT_OK, SL_EXIT_FAIL, or SL_EXIT_APPLOAD when the app could not be
 * imported, after one clear error line in the log). */
int sl_worker_main(const sl_options_t *o, const int *listen_fds, int nfds,
                   int worker_id, int ctl_fd);

#endif
