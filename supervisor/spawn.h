/* spawn.h - starts one worker, or the supervisor that replaces this one.
 *
 * A worker is the sluice-worker executable, exec'd afresh (so it imports
 * the application anew) with the supervisor's argv and the SLUICE_*
 * variables that common/handoff.h describes. Which sluice-worker is decided
 * once, when the supervisor starts: SLUICE_WORKER_BIN when set, else the
 * one in the directory of the supervisor's own executable (a build tree,
 * or a copy deployed side by side), else the installed one under the root
 * the supervisor itself runs from (ROOT/usr/bin/sluice finds
 * ROOT/usr/libexec/sluice/sluice-worker: an installed tree unpacked
 * elsewhere, as by "dpkg -x"), else the one installed with it
 * ($(pkglibexecdir)/sluice-worker). A binary upgrade (USR2) execs the
 * binary found at the supervisor's own path, which may by then be a newer
 * build, and that one looks for its worker afresh.
 */
#ifndef SL_SPAWN_H
#define SL_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The worker executable, as above, into BUF[0..SIZE): the first candidate
 * that is an executable regular file. SLUICE_WORKER_BIN, when set, is the
 * only candidate. 0, or -1 after one "sluice: error: ..." line naming what
 * was tried. */
int sl_spawn_find_worker(char *buf, size_t size);

/* The installed path INSTALLED moved to the root EXE runs from: when EXE's
 * directory is BINDIR under a root ROOT ("/r/usr/bin/sluice" with BINDIR
 * "/usr/bin": ROOT "/r"), true with ROOT followed by INSTALLED in
 * BUF[0..SIZE). False (BUF "") when it is not, when ROOT is empty (EXE is
 * where it was installed) or when the path does not fit. */
bool sl_spawn_relocate(const char *exe, const char *bindir,
                       const char *installed, char *buf, size_t size);

/* Workers spawned from now on run as USER and GROUP (names or decimal
 * ids; either may be NULL): the child calls initgroups() (setgroups() for
 * a uid the user database does not know), setgid() and setuid() before
 * exec, and exits SL_EXIT_APPLOAD, logged, when one fails. GROUP defaults
 * to USER's login group. 0; or -1 after one "sluice: error: ..." line when
 * a name is unknown, or when this process is not root and is asked for
 * another uid or gid (asking for its own is a no-op). */
int sl_spawn_set_identity(const char *user, const char *group);

/* The uid and gid workers switch to: true, or false (and *UID, *GID
 * untouched) when they run as the supervisor does. */
bool sl_spawn_identity(uid_t *uid, gid_t *gid);

/* Fork and exec worker WORKER_ID: EXE with ARGV, the listening sockets
 * FDS[0..NFDS) and CTL_FD (or -1) inherited, SLUICE_WORKER_ID,
 * SLUICE_LISTEN_FDS, SLUICE_CTL_FD and SLUICE_HANDOFF set, systemd's
 * NOTIFY_SOCKET and WATCHDOG_* removed (they are the supervisor's), and
 * METRICS_FD (or -1: none) inherited as SLUICE_METRICS_FD. The child
 * gets SIGTERM when the supervisor dies. Returns the child's pid, or -1
 * (logged) when fork() fails. The child exits 127 if exec() fails. */
pid_t sl_spawn_worker(const char *exe, char *const argv[], const int *fds,
                      int nfds, int worker_id, int ctl_fd, int metrics_fd);

/* Fork and exec the --preload zygote of generation GEN (worker/zygote.h):
 * as sl_spawn_worker() with no worker id and no control channel, its end
 * of the zygote channel ZYGOTE_FD inherited as SLUICE_ZYGOTE_FD. */
pid_t sl_spawn_zygote(const char *exe, char *const argv[], const int *fds,
                      int nfds, int zygote_fd, unsigned gen, int metrics_fd);

/* With --certfile, build the TLS context as a worker will, in EXE (the
 * worker, which loads OpenSSL: the supervisor does not) run with ARGV,
 * SLUICE_CHECK_TLS and the workers' identity, and wait for it: 0 when it
 * builds (an expired certificate warned of), or its exit status after the
 * one line it wrote (SL_EXIT_USAGE for a file that cannot serve) to
 * stderr, or with TO_LOG to the error log (a HUP's check, long after
 * start). */
int sl_spawn_check_tls(const char *exe, char *const argv[], bool to_log);

/* Fork and exec EXE with ARGV as a new supervisor: KEEP[0..NKEEP) stay open
 * across the exec, ENV (NULL-terminated "NAME=VALUE" strings) is added to
 * the environment, and WATCHDOG_PID, when set, becomes the child's own pid.
 * Returns the child's pid, or -1 (logged). The child exits 127 if exec()
 * fails. */
pid_t sl_spawn_supervisor(const char *exe, char *const argv[], const int *keep,
                          int nkeep, char *const env[]);

#endif
