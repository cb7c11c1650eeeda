/* acceptlimit.c - pausing a listener and rate-limiting its failure lines
 * (see acceptlimit.h).
 *
 * The counter is a plain function of the time it is given so that a test
 * can drive it; the log call is a thin layer over it.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "common/acceptlimit.h"
#include "common/log.h"

bool sl_acceptlimit_transient(int err)
{
    switch (err) {
    case EAGAIN:
#if EWOULDBLOCK != EAGAIN
    case EWOULDBLOCK:
#endif
    case EINTR:
    case ECONNABORTED:
    case EPERM: /* accept(2): "Firewall rules forbid connection" */
    /* accept(2): "Linux accept() passes already-pending network errors on
     * the new socket as an error code"; retry, as for EAGAIN */
    case ENETDOWN:
    case EPROTO:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
        return true;
    default:
        return false;
    }
}

unsigned sl_acceptlimit_hit(sl_acceptlimit_t *a, double now, double *span)
{
    unsigned n;

    a->total++;
    a->held++;
    if (a->last > 0 && now - a->last < SL_ACCEPTLIMIT_EVERY) {
        *span = 0;
        return 0;
    }
    *span = a->last > 0 ? now - a->last : 0;
    n = a->held;
    a->held = 0;
    a->last = now;
    return n;
}

void sl_acceptlimit_log(sl_acceptlimit_t *a, double now, int err,
                        const char *who, bool paused)
{
    char ebuf[128];
    const char *msg;
    double span;
    unsigned n = sl_acceptlimit_hit(a, now, &span);
    const char *what = paused ? "; accepting paused" : "";

    if (n == 0)
        return;
    msg = strerror_r(err, ebuf, sizeof(ebuf)); /* GNU: may not use ebuf */
    if (n == 1)
        sl_error("%s: accept4() failed: %s%s", who, msg, what);
    else
        sl_error("%s: accept4() failed: %s%s, %u times in the last %.1fs", who,
                 msg, what, n, span);
}
