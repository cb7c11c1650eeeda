/* lane.h - pump-mode executor lanes: Python threads fed by the loop. */
#ifndef SL_LANE_H
#define SL_LANE_H

#include "worker/loop/pump.h"

/* Start N lanes taking requests from P's work queue. Called with the GIL
 * held by the main thread, which must release it before the lanes can run.
 * 0, or -1 after logging. */
int sl_lane_start(sl_pump_t *p, int n);

/* Close the work queue and wait up to TIMEOUT seconds for the lanes to
 * leave; returns how many are still running (stuck in the app). */
int sl_lane_stop(sl_pump_t *p, double timeout);

#endif
