/* drain.h - a worker's shutdown, split so the loop never blocks in it:
 * prepare (stop taking work), step (is it over yet?), finish (log, close,
 * exit status). Loop thread only. */
#ifndef SL_DRAIN_H
#define SL_DRAIN_H

#include "worker/pump.h"

/* SIGTERM: fail the health check at once, keep serving for
 * --shutdown-delay, then prepare. */
void sl_drain_begin(sl_pump_t *p);

/* Stop accepting, close idle connections, start the cadence. */
void sl_drain_prepare(sl_pump_t *p);

/* Done when nothing is active or the graceful timeout has passed; called by
 * the cadence and whenever a request or connection ends. */
void sl_drain_step(sl_pump_t *p);

/* SIGINT/SIGQUIT: close everything now and leave the loop. */
void sl_drain_fast(sl_pump_t *p);

#endif
