/* nofile.c - raising RLIMIT_NOFILE to fit the pool (see nofile.h).
 *
 * Only the soft limit is the process's to raise; the hard one moves only
 * for a process with CAP_SYS_RESOURCE (root, or a unit's LimitNOFILE=),
 * so that is tried once and its EPERM is the warning's cue. The limit is
 * never lowered: an operator who set a higher one meant it.
 */
#include "config.h"

#include <errno.h>

#include "common/log.h"
#include "supervisor/nofile.h"

/* The supervisor's own: its listeners, a control channel and a pipe per
 * worker, the metrics endpoint's clients, the logs and pid file. */
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
    want.rlim_cur = need;
    want.rlim_max = rl.rlim_max >= need ? rl.rlim_max : need;
    if (setrlimit(RLIMIT_NOFILE, &want) == 0) {
        sl_info("RLIMIT_NOFILE: soft limit raised from %llu to %llu for "
                "%d worker connections",
                (unsigned long long)rl.rlim_cur, (unsigned long long)need,
                worker_connections);
        return 0;
    }
    if (errno != EPERM && errno != EINVAL) {
        sl_log_errno(SL_LOG_WARNING, "setrlimit(RLIMIT_NOFILE) failed");
    }
    /* as far as the hard limit goes */
    want.rlim_cur = rl.rlim_max;
    want.rlim_max = rl.rlim_max;
    if (want.rlim_cur > rl.rlim_cur && setrlimit(RLIMIT_NOFILE, &want) == 0) {
        rl.rlim_cur = want.rlim_cur;
    }
    sl_warn("RLIMIT_NOFILE: %d worker connections need %llu descriptors per "
            "worker, but the hard limit is %llu: soft limit %llu; raise the "
            "hard limit (LimitNOFILE=, ulimit -Hn) or lower "
            "--worker-connections",
            worker_connections, (unsigned long long)need,
            (unsigned long long)rl.rlim_max, (unsigned long long)rl.rlim_cur);
    return -1;
}
