/* nofile.c - raising RLIMIT_NOFILE to fit the pool (see nofile.h).
 *
 * Only the soft limit moves, and only up: the hard limit is the
 * operator's ceiling (systemd's LimitNOFILE=, ulimit -Hn), which sluice
 * does not lift even where it could, and a higher soft limit set on
 * purpose stays.
 */
#include "config.h"

#include <errno.h>

#include "common/log.h"
#include "supervisor/nofile.h"

/* The supervisor's own: its listeners and a control channel and a pipe
 * per worker; the metrics endpoint's clients, logs and pid file are in the
 * slack. */
#define SUPER_PER_WORKER 2

rlim_t sl_nofile_need(const sl_options_t *o, int nlisteners)
{
    rlim_t worker =
        (rlim_t)o->worker_connections + (rlim_t)nlisteners + SL_NOFILE_SLACK;
    rlim_t super = (rlim_t)nlisteners + (rlim_t)o->workers * SUPER_PER_WORKER +
                   SL_NOFILE_SLACK;

    return worker > super ? worker : super;
}

int sl_nofile_fit(rlim_t need, int worker_connections)
{
    struct rlimit rl, want;

    if (getrlimit(RLIMIT_NOFILE, &rl) == -1) {
        sl_log_errno(SL_LOG_WARNING, "getrlimit(RLIMIT_NOFILE) failed");
        return -1;
    }
    if (rl.rlim_cur >= need) {
        return 0;
    }
    want.rlim_cur = rl.rlim_max >= need ? need : rl.rlim_max;
    want.rlim_max = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &want) == -1) {
        sl_log_errno(SL_LOG_WARNING, "setrlimit(RLIMIT_NOFILE) failed");
        return -1;
    }
    if (want.rlim_cur == need) {
        sl_info("RLIMIT_NOFILE: soft limit raised from %llu to %llu for "
                "%d worker connections",
                (unsigned long long)rl.rlim_cur, (unsigned long long)need,
                worker_connections);
        return 0;
    }
    sl_warn("RLIMIT_NOFILE: %d worker connections need %llu descriptors per "
            "worker, but the hard limit is %llu: soft limit raised from %llu "
            "to %llu only; raise the hard limit (LimitNOFILE=, ulimit -Hn) or "
            "lower --worker-connections",
            worker_connections, (unsigned long long)need,
            (unsigned long long)rl.rlim_max, (unsigned long long)rl.rlim_cur,
            (unsigned long long)want.rlim_cur);
    return -1;
}
