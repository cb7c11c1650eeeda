/* asgi_done.h - an awaitable that is already complete (asgi_done.c). */
#ifndef SL_ASGI_DONE_H
#define SL_ASGI_DONE_H

#include <Python.h>

/* Ready the type and the shared awaitable of None. 0, or -1 with a Python
 * exception. GIL held. */
int sl_asgi_done_init(void);

/* An awaitable whose await returns VALUE at once. Steals VALUE (NULL
 * passes through as NULL). A new reference, or NULL with an exception. */
PyObject *sl_asgi_done_new(PyObject *value);

/* The shared completed awaitable of None: a new reference. */
PyObject *sl_asgi_done_none(void);

/* Raise what throw(ARGS) names, as a generator's throw() does: an
 * exception instance, or a type and an optional value. Returns NULL. */
PyObject *sl_asgi_done_raise(PyObject *const *args, Py_ssize_t n);

#endif
