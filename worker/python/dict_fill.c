/* dict_fill.c - a prototype's copy filled in place (dict_fill.h).
 *
 * The one file that reads CPython's dict layout (its internal header,
 * for the version sluice is built with); what it writes is a value in an
 * entry whose key it checked, in a dict no other code holds yet.
 */
#include "config.h"

#include <Python.h>

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define SL_DICT_LAYOUT 1 /* 3.11's: unicode entries after the index */
#define Py_BUILD_CORE
#include <internal/pycore_dict.h>
#undef Py_BUILD_CORE
#endif

#include "worker/python/dict_fill.h"

Py_ssize_t sl_py_dict_slot(PyObject *proto, PyObject *key)
{
    Py_ssize_t pos = 0;
    PyObject *k, *v;

    /* PyDict_Next() leaves POS one past the entry it returned */
    while (PyDict_Next(proto, &pos, &k, &v))
        if (k == key)
            return pos - 1;
    return -1;
}

#ifdef SL_DICT_LAYOUT
/* D's unicode entry SLOT when it holds KEY, or NULL. */
static PyDictUnicodeEntry *entry(PyObject *d, Py_ssize_t slot, PyObject *key)
{
    PyDictObject *mp = (PyDictObject *)d;
    PyDictKeysObject *dk = mp->ma_keys;
    PyDictUnicodeEntry *e;

    if (slot < 0 || !PyDict_CheckExact(d) || mp->ma_values != NULL ||
        dk->dk_kind != DICT_KEYS_UNICODE || slot >= dk->dk_nentries)
        return NULL;
    e = &DK_UNICODE_ENTRIES(dk)[slot];
    return e->me_key == key && e->me_value != NULL ? e : NULL;
}
#endif

int sl_py_dict_put(PyObject *d, Py_ssize_t slot, PyObject *key, PyObject *v)
{
    int rc;

#ifdef SL_DICT_LAYOUT
    PyDictUnicodeEntry *e;
    PyObject *old;

    if (v == NULL)
        return -1;
    /* the dict's tracking by the GC: a copy of a tracked prototype is
     * tracked already; an untracked one goes the long way */
    e = entry(d, slot, key);
    if (e != NULL && PyObject_GC_IsTracked(d)) {
        old = e->me_value;
        e->me_value = v;
        Py_DECREF(old);
        return 0;
    }
#else
    (void)slot;
    if (v == NULL)
        return -1;
#endif
    rc = PyDict_SetItem(d, key, v);
    Py_DECREF(v);
    return rc;
}
