/* lane.h - WSGI's two executors: lane threads fed by the pump (pump mode),
 * or the loop thread itself (inline mode). */
#ifndef SL_LANE_H
#define SL_LANE_H

#include "worker/loop/exec.h"
#include "worker/loop/pump.h"

/* The operations of each (exec.h); the pump takes one at init. */
extern const sl_exec_t sl_lane_exec;
extern const sl_exec_t sl_lane_inline_exec;

/* Start N lanes taking requests from P's work queue. Called with the GIL
 * held by the main thread, which must release it before the lanes can run.
 * 0, or -1 after logging. */
int sl_lane_start(sl_pump_t *p, int n);

/* Inline mode: set up the one lane the loop thread runs requests on, and
 * let libev drop the GIL around its poll. 0, or -1 after logging. GIL
 * held. */
int sl_lane_start_inline(sl_pump_t *p);

#endif
