/* spawn.h - starts one worker, or the supervisor that replaces this one.
 *
 * A worker is this same binary, exec'd afresh (so it imports the application
 * anew) with the supervisor's argv and the SLUICE_* variables that
 * worker/worker.h describes. A binary upgrade (USR2) execs the binary found
 * at the supervisor's own path, which may by then be a newer build.
 */
#ifndef SL_SPAWN_H
#define SL_SPAWN_H

#include <sys/types.h>

/* Fork and exec worker WORKER_ID: /proc/self/exe with ARGV, the listening
 * sockets FDS[0..NFDS) and CTL_FD (or -1) inherited, SLUICE_WORKER_ID,
 * SLUICE_LISTEN_FDS and SLUICE_CTL_FD set, systemd's NOTIFY_SOCKET and
 * WATCHDOG_* removed (they are the supervisor's). The child gets SIGTERM
 * when the supervisor dies. Returns the child's pid, or -1 (logged) when
 * fork() fails. The child exits 127 if exec() fails. */
pid_t sl_spawn_worker(char *const argv[], const int *fds, int nfds,
                      int worker_id, int ctl_fd);

/* Fork and exec EXE with ARGV as a new supervisor: KEEP[0..NKEEP) stay open
 * across the exec, ENV (NULL-terminated "NAME=VALUE" strings) is added to
 * the environment, and WATCHDOG_PID, when set, becomes the child's own pid.
 * Returns the child's pid, or -1 (logged). The child exits 127 if exec()
 * fails. */
pid_t sl_spawn_supervisor(const char *exe, char *const argv[], const int *keep,
                          int nkeep, char *const env[]);

#endif
