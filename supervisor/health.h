/* health.h - is a worker hung, or too slow to boot?
 *
 * A judgement on one worker's slot at one moment, nothing more: the
 * supervisor decides what to do about it (SIGABRT for the tracebacks,
 * SIGKILL, a replacement).
 */
#ifndef SL_HEALTH_H
#define SL_HEALTH_H

#include <stddef.h>

#include "supervisor/table.h"

typedef enum {
    SL_HEALTH_OK = 0,
    SL_HEALTH_HUNG, /* READY, but silent or with every lane stuck */
    SL_HEALTH_LATE, /* not READY within the boot timeout */
} sl_health_t;

/* Judge W at NOW. A READY worker is hung when it sent nothing for TIMEOUT
 * seconds, or when its last heartbeat had every lane inside a request older
 * than TIMEOUT (heartbeats come from the loop thread, so a stuck lane does
 * not silence them). A BOOTING worker is late BOOT_TIMEOUT seconds after
 * its start. A worker leaving (sl_worker_leaving(): STOPPING, or it said it
 * drains) is not judged. A limit of 0 is no limit. On HUNG or LATE the
 * reason goes to WHY ("timed out: no heartbeat for 31.0s"); on OK, *NEXT is
 * lowered (0: unset) to the moment the verdict could change without a new
 * message. */
sl_health_t sl_health_check(const sl_worker_t *w, ev_tstamp now, double timeout,
                            double boot_timeout, char *why, size_t size,
                            ev_tstamp *next);

#endif
