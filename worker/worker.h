/* worker.h - a worker process: Python, the app, the loop, the drain.
 *
 * A worker is the sluice-worker executable (worker/main.c), exec'd by the
 * supervisor with the supervisor's argv and the variables common/handoff.h
 * lists; main() turns those into the arguments below.
 */
#ifndef SL_WORKER_H
#define SL_WORKER_H

#include "common/options.h"

/* Run a worker on the listening sockets LISTEN_FDS[0..NFDS), those among
 * TLS_FDS[0..NTLS) speaking TLS, until it has drained; returns the process
 * exit status (SL_EXIT_OK, SL_EXIT_FAIL, or SL_EXIT_APPLOAD when the app
 * could not be imported or the TLS certificate not loaded, after one clear
 * error line in the log). */
int sl_worker_main(const sl_options_t *o, const int *listen_fds, int nfds,
                   const int *tls_fds, int ntls, int worker_id, int ctl_fd);

#endif
