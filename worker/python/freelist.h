/* freelist.h - freed Python objects kept for the next ones of their type.
 * Header only: a request's own objects (asgi_request.c, asgi_task.c,
 * asgi_done.c) cost an allocation and a free less each. */
#ifndef SL_FREELIST_H
#define SL_FREELIST_H

#include <Python.h>
#include <stdbool.h>

/* Freed objects of one type kept for the next ones of the same size: an
 * allocation and a free less for each of a request's own objects. GIL
 * held; a GC type's are untracked while kept. */
#define SL_PY_FREE_MAX 64
typedef struct {
    PyObject *o[SL_PY_FREE_MAX];
    int n;
} sl_py_free_t;

/* A kept object made an object of TP anew (one reference), or NULL. */
static inline PyObject *sl_py_free_pop(sl_py_free_t *f, PyTypeObject *tp)
{
    return f->n > 0 ? PyObject_Init(f->o[--f->n], tp) : NULL;
}

/* Keep O, freed (its members released); false when F is full. */
static inline bool sl_py_free_push(sl_py_free_t *f, PyObject *o)
{
    if (f->n == SL_PY_FREE_MAX)
        return false;
    f->o[f->n++] = o;
    return true;
}

#endif
