/* wsgi.h - PEP 3333: environ, start_response, write(), the result. */
#ifndef SL_WSGI_H
#define SL_WSGI_H

#include <Python.h>

#include "common/buf.h"
#include "worker/loop/exchange.h"
#include "worker/loop/pump.h"

/* One executor lane's WSGI state; one request at a time. */
typedef struct sl_wsgi_lane sl_wsgi_lane_t;

/* Build the interned keys, the prototype environ and the types for APP,
 * served by pump P. 0, or -1 after logging. GIL held. */
int sl_wsgi_init(PyObject *app, sl_pump_t *p);

/* A lane's state (owned by the caller, freed with sl_wsgi_lane_free).
 * NULL on error. GIL held. */
sl_wsgi_lane_t *sl_wsgi_lane_new(void);
void sl_wsgi_lane_free(sl_wsgi_lane_t *l);

/* Serve request GEN of C from start to END: environ, the app, the
 * response, close(). Never raises: errors become a 500 or a closed
 * connection, with the traceback in the log. GIL held. */
void sl_wsgi_handle(sl_wsgi_lane_t *l, sl_exch_t *c, uint32_t gen);

#endif
