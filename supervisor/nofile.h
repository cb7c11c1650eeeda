/* nofile.h - RLIMIT_NOFILE sized to --worker-connections.
 *
 * A worker holds one descriptor per connection, so a soft limit below
 * --worker-connections (1024 is a common default) turns a busy worker's
 * accept4() into EMFILE long before its pool is used up. The supervisor
 * raises its own soft limit before it spawns anyone: workers (and a binary
 * upgrade's successor) inherit it through fork and exec, and the one
 * warning, when the hard limit is too low, is written once, by one
 * process, instead of once per worker.
 */
#ifndef SL_NOFILE_H
#define SL_NOFILE_H

#include <sys/resource.h>

#include "common/options.h"

/* Descriptors besides the connections: a worker's listeners are added
 * apart; this covers its error and access logs, the control channel, the
 * metrics segment, libev's epoll and eventfd, Python's own (stdio,
 * imports, urandom) and a few files the application opens or sends. */
#define SL_NOFILE_SLACK 64

/* The soft limit a worker of O needs with NLISTENERS listening sockets:
 * worker_connections + NLISTENERS + SL_NOFILE_SLACK, or what the
 * supervisor needs for O's workers when that is more. */
rlim_t sl_nofile_need(const sl_options_t *o, int nlisteners);

/* Raise the soft RLIMIT_NOFILE to NEED, or up to the hard limit when that
 * is lower; never lowers it. Logs the raise at INFO, or one WARNING naming
 * the figures and the fix when NEED cannot be met (for WORKER_CONNECTIONS,
 * named in the lines). 0 when the limit now fits NEED, -1 when not. */
int sl_nofile_fit(rlim_t need, int worker_connections);

#endif
