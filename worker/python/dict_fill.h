/* dict_fill.h - filling in a fresh copy of a prototype dict cheaply.
 *
 * A scope is a copy of a prototype whose keys are all there, most holding
 * a placeholder the request replaces. PyDict_SetItem() costs about 150
 * instructions a key for that (a lookup by hash, the tracking and version
 * bookkeeping); a copy's entries sit where the prototype's do, so the
 * value can be put in place at once. These calls do that for the CPython
 * they were built with, after checking the entry does hold the key (any
 * other dict, or a layout not known here, takes PyDict_SetItem()). GIL
 * held. */
#ifndef SL_DICT_FILL_H
#define SL_DICT_FILL_H

#include <Python.h>

/* Where KEY's entry is in dict PROTO, for sl_py_dict_put() on copies of
 * it; -1 when unknown (then put falls back). */
Py_ssize_t sl_py_dict_slot(PyObject *proto, PyObject *key);

/* D[KEY] = V (stolen; NULL: fail at once, as after a failed call that
 * made V), D being a copy of the prototype SLOT was found in that nobody
 * else has seen yet: at entry SLOT when it holds KEY, else by
 * PyDict_SetItem(). 0, or -1 with an exception. */
int sl_py_dict_put(PyObject *d, Py_ssize_t slot, PyObject *key, PyObject *v);

#endif
