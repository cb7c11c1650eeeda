/* sd.h - the three pieces of systemd's service protocol the supervisor
 * speaks: readiness notification (NOTIFY_SOCKET), the watchdog period
 * (WATCHDOG_USEC) and socket activation (LISTEN_FDS).
 *
 * Each is a few lines of environment parsing and one datagram, documented
 * in sd_notify(3), sd_watchdog_enabled(3) and sd_listen_fds(3); written
 * here rather than linked from libsystemd, which would map it and the six
 * libraries it pulls in (about 1 MB) into the supervisor, a process meant to
 * stay small.
 */
#ifndef SL_SD_H
#define SL_SD_H

#include <stdbool.h>
#include <stdint.h>

/* The first descriptor systemd passes (sd_listen_fds(3)). */
#define SL_SD_LISTEN_FDS_START 3

/* Send MSG as one datagram to $NOTIFY_SOCKET (a path, or '@' for the
 * abstract namespace). 1 when sent, 0 when there is no NOTIFY_SOCKET, or a
 * negative errno. */
int sl_sd_notify(const char *msg);

/* The watchdog period systemd asks for, from $WATCHDOG_USEC (and
 * $WATCHDOG_PID, which must name this process when set): 1 with *USEC set,
 * 0 when there is none, or -EINVAL when a variable is malformed. The
 * variables stay in the environment (a binary upgrade's new supervisor
 * reads them again). */
int sl_sd_watchdog(uint64_t *usec);

/* The sockets systemd passed: $LISTEN_FDS descriptors from
 * SL_SD_LISTEN_FDS_START when $LISTEN_PID names this process, each made
 * close-on-exec, with their $LISTEN_FDNAMES in *NAMES (a NULL-terminated,
 * owned array of owned strings; "unknown" where none was given), or NULL
 * for none. The LISTEN_* variables are removed from the environment.
 * Returns how many (0: not socket-activated), or a negative errno. */
int sl_sd_listen_fds(char ***names);

/* Is FD a listening stream socket (of any family)? */
bool sl_sd_is_listening_stream(int fd);

#endif
