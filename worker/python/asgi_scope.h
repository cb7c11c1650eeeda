/* asgi_scope.h - the http and websocket scopes of an ASGI request
 * (asgi_scope.c). */
#ifndef SL_ASGI_SCOPE_H
#define SL_ASGI_SCOPE_H

#include <Python.h>
#include <stdbool.h>

#include "worker/loop/exchange.h"
#include "worker/loop/pump.h"

/* Build the names and the prototype scope for pump P (--root-path, its
 * listeners). 0, or -1 with a Python exception. GIL held. */
int sl_asgi_scope_init(const sl_pump_t *p);

/* The lifespan gave a state: every scope will have "state" (its copy),
 * which the prototypes now hold too. 0, or -1 with an exception. */
int sl_asgi_scope_state(void);

/* The http scope of C's request: a new dict, or NULL with an exception.
 * STATE, the lifespan state or NULL, goes in as a shallow copy. GIL held. */
PyObject *sl_asgi_scope_new(const sl_exch_t *c, PyObject *state);

/* The websocket scope of C's request (a WebSocket handshake), the same
 * way: scheme "ws", subprotocols from Sec-WebSocket-Protocol. */
PyObject *sl_asgi_scope_new_ws(const sl_exch_t *c, PyObject *state);

#endif
