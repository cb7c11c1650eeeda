/* acceptlimit.h - what a listener does when accept4() fails for want of
 * descriptors or memory.
 *
 * Such a failure (EMFILE, ENFILE, ENOBUFS, ENOMEM) leaves the connection
 * in the listen queue, so a level-triggered listener is ready again at
 * once: retrying spins a core and logs a line per try. The listener must
 * pause instead (nginx's accept disable) and the failure be logged at most
 * once a second, with the count of those held back. Both the worker's
 * listeners and the supervisor's metrics endpoint use this.
 */
#ifndef SL_ACCEPTLIMIT_H
#define SL_ACCEPTLIMIT_H

#include <stdbool.h>

/* How long a listener stays paused, unless a connection of its own closes
 * first (seconds). */
#define SL_ACCEPTLIMIT_PAUSE 0.5

/* At most one line per this many seconds. */
#define SL_ACCEPTLIMIT_EVERY 1.0

/* One listener's (or one process's) log state; zero it to start. */
typedef struct {
    double last;    /* when the last line went out; 0: never */
    unsigned held;  /* failures since then that no line told */
    unsigned total; /* failures ever: for tests and curiosity */
} sl_acceptlimit_t;

/* Is ERR (an accept4() errno) one to ignore and try again at once
 * (EAGAIN, EINTR, a firewall's EPERM, and the network errors Linux's
 * accept4() passes on from the new connection, which concern that
 * connection only)? Any other error fails the next try just the same
 * until something changes (EMFILE, ENFILE, ENOBUFS, ENOMEM, or a broken
 * listener): pause the listener. */
bool sl_acceptlimit_transient(int err);

/* Count one failure at NOW (any clock, seconds). Returns how many
 * failures the line due now tells (this one and those held back), or 0
 * when a line went out less than SL_ACCEPTLIMIT_EVERY ago. *SPAN: the
 * seconds since the previous line (0 before the first). */
unsigned sl_acceptlimit_hit(sl_acceptlimit_t *a, double now, double *span);

/* Count and, when due, log one failed accept4() with errno ERR at NOW:
 * "WHO: accept4() failed: <strerror>; accepting paused[, N times in the
 * last S s]" when PAUSED, "...; N times in ..." otherwise. */
void sl_acceptlimit_log(sl_acceptlimit_t *a, double now, int err,
                        const char *who, bool paused);

#endif
