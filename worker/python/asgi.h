/* asgi.h - ASGI 3.0 HTTP: the asyncio lane, receive() and send(), drain.
 *
 * Pump mode: one lane thread runs the event loop and takes the pump's
 * tickets in batches. Inline mode (SLUICE_INLINE=1): the event loop runs on
 * the loop thread and drives libev. Kept free of Python.h so drain.c can
 * call the finish hook.
 */
#ifndef SL_ASGI_H
#define SL_ASGI_H

#include "worker/loop/pump.h"

struct _object; /* PyObject */

/* Take APP (a new reference is kept) and build the interned names, the
 * prototype scope and the types for pump P. 0, or -1 after logging. GIL
 * held. */
int sl_asgi_init(struct _object *app, sl_pump_t *p);

/* Create the event loop and run lifespan startup: in a new lane thread
 * (pump mode; the caller holds the GIL and keeps it) or on this thread
 * (inline mode). 0 when the worker may serve, -1 after logging the reason
 * (a failed boot). */
int sl_asgi_start(sl_pump_t *p);

/* "uvloop" or "asyncio", once started. */
const char *sl_asgi_loop_name(void);

/* Inline mode: serve until the drain ends, the event loop driving libev.
 * Returns the worker's exit status. GIL held. */
int sl_asgi_run_inline(sl_pump_t *p);

/* Drain finish (loop thread): cancel every request task still running.
 * Does nothing when ASGI is not in use. */
void sl_asgi_finish(sl_pump_t *p);

/* After the pump loop ended: cancel what is left, run lifespan shutdown
 * within its budget, close the event loop. Pump mode: call without the
 * GIL; returns 0, or 1 when the lane did not exit in time. Inline mode:
 * GIL held; returns 0. */
int sl_asgi_stop(sl_pump_t *p);

#endif
