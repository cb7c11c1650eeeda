/* asgi_lifespan.h - the ASGI side that runs once per worker, not per
 * request: telling ASGI from WSGI, making the event loop, lifespan startup
 * and shutdown, and the last cancellations. GIL held for every call. */
#ifndef SL_ASGI_LIFESPAN_H
#define SL_ASGI_LIFESPAN_H

#include <Python.h>

#include "common/options.h"

/* Load the helper (it imports asyncio: only for an app that is ASGI). 0,
 * or -1 after logging. */
int sl_asgi_lifespan_init(void);

/* Is APP an ASGI app (a coroutine function, or an object whose __call__
 * is one)? 1 yes, 0 no, -1 after logging. Needs no sl_asgi_lifespan_init()
 * and imports nothing. */
int sl_asgi_lifespan_detect(PyObject *app);

/* A new event loop for KIND, set as this thread's loop; *NAME becomes
 * "uvloop" or "asyncio". New reference, or NULL after logging. */
PyObject *sl_asgi_lifespan_loop(sl_loop_t kind, const char **name);

/* Run lifespan startup of APP on LOOP (not running) per MODE. 0 when the
 * worker may serve: *STATE is then the lifespan state dict (new reference)
 * or NULL when the app has no lifespan. -1 after logging the app's reason:
 * a failed boot. */
int sl_asgi_lifespan_startup(PyObject *loop, PyObject *app, sl_lifespan_t mode,
                             PyObject **state);

/* Cancel TASKS (an iterable) and run LOOP up to TIMEOUT seconds while they
 * unwind. Returns how many did not finish. */
int sl_asgi_lifespan_cancel(PyObject *loop, PyObject *tasks, double timeout);

/* Lifespan shutdown within BUDGET seconds, then cancel what the app left
 * running and close LOOP. Logs what went wrong; never fails. */
void sl_asgi_lifespan_shutdown(PyObject *loop, double budget);

#endif
