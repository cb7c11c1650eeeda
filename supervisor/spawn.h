/* spawn.h - starts one worker process.
 *
 * A worker is this same binary, exec'd afresh (so it imports the application
 * anew) with the supervisor's argv and the SLUICE_* variables that
 * worker/worker.h describes.
 */
#ifndef SL_SPAWN_H
#define SL_SPAWN_H

#include <sys/types.h>

/* Fork and exec worker WORKER_ID: /proc/self/exe with ARGV, the listening
 * sockets FDS[0..NFDS) and CTL_FD (or -1) inherited, SLUICE_WORKER_ID,
 * SLUICE_LISTEN_FDS and SLUICE_CTL_FD set. Returns the child's pid, or -1
 * (logged) when fork() fails. The child exits 127 if exec() fails. */
pid_t sl_spawn_worker(char *const argv[], const int *fds, int nfds,
                      int worker_id, int ctl_fd);

#endif
