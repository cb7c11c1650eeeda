/* wsgi_input.h - the wsgi.input object: a file-like view of the request
 * body that reads through the connection, never past the body's end. */
#ifndef SL_WSGI_INPUT_H
#define SL_WSGI_INPUT_H

#include <Python.h>

#include "worker/loop/exchange.h"

/* Ready the type. 0, or -1 with a Python exception. GIL held. */
int sl_wsgi_input_init(void);

/* A new wsgi.input for request GEN of C (new reference, NULL on error). */
PyObject *sl_wsgi_input_new(sl_exch_t *c, uint32_t gen);

#endif
