/* asgi.h - ASGI 3.0 HTTP: the asyncio lane, receive() and send(), drain.
 *
 * Pump mode: one lane thread runs the event loop and takes the pump's
 * tickets in batches. Inline mode (SLUICE_INLINE=1): the event loop runs on
 * the loop thread and drives the pump.
 */
#ifndef SL_ASGI_H
#define SL_ASGI_H

#include <stddef.h>

#include "worker/loop/exec.h"
#include "worker/loop/pump.h"

struct _object; /* PyObject */

/* The executor's context (asgi_internal.h): one per table below. */
typedef struct sl_asgi sl_asgi_t;

/* An ASGI executor's table: the operations the loop side calls (what the
 * pump is given: &table.ops), then the context they work on. */
typedef struct {
    sl_exec_t ops;
    sl_asgi_t *x;
} sl_asgi_exec_t;

/* The operations of the two ASGI executors (exec.h): one lane thread
 * running the event loop (pump mode), or the event loop on the loop thread
 * (inline mode). Their stop() cancels what is left, runs lifespan shutdown
 * within its budget and closes the event loop: for the lane, called without
 * the GIL (returns 1 when the lane did not exit in time); inline, GIL
 * held. */
extern const sl_asgi_exec_t sl_asgi_lane_exec;
extern const sl_asgi_exec_t sl_asgi_inline_exec;

/* Take APP (a new reference is kept) and build the interned names, the
 * prototype scope and the types for pump P, whose executor is one of the
 * two above. 0, or -1 after logging. GIL held. */
int sl_asgi_init(struct _object *app, sl_pump_t *p);

/* Create the event loop and run lifespan startup: in a new lane thread
 * (pump mode; the caller holds the GIL and keeps it) or on this thread
 * (inline mode). 0 when the worker may serve, -1 after logging the reason
 * (a failed boot). */
int sl_asgi_start(sl_pump_t *p);

/* adopt (exec.h) of both ASGI executors: sl_asgi_init(). */
int sl_asgi_adopt(sl_pump_t *p, void *app);

/* For the ASGI executors' start: note that P's start returned RC (0: the
 * worker serves, and its stop must run lifespan shutdown); RC again. */
int sl_asgi_started(sl_pump_t *p, int rc);

/* describe (exec.h) of both ASGI executors. */
void sl_asgi_describe(sl_pump_t *p, char *buf, size_t n);

/* "uvloop" or "asyncio", once P's executor started. */
const char *sl_asgi_loop_name(const sl_pump_t *p);

/* Inline mode: serve until the drain ends, the event loop driving libev.
 * Returns the worker's exit status. GIL held. */
int sl_asgi_run_inline(sl_pump_t *p);

#endif
