/* wsgi_internal.h - what the files of the WSGI side share, and no one
 * else:
 *
 *   wsgi.c          the handler: one request from the app's call to close()
 *   wsgi_environ.c  the environ: interned keys, the prototype, wsgi.errors
 *   wsgi_objects.c  start_response, write() and wsgi.file_wrapper
 *
 * All of it runs with the GIL held, on the lane serving the request.
 */
#ifndef SL_WSGI_INTERNAL_H
#define SL_WSGI_INTERNAL_H

#include <Python.h>
#include <stdbool.h>

#include "common/buf.h"
#include "worker/loop/exchange.h"
#include "worker/loop/pump.h"
#include "worker/python/writer.h"
#include "worker/python/wsgi.h"

/* One lane's WSGI state: it serves one request at a time. */
struct sl_wsgi_lane {
    sl_buf_t head;        /* owned: the writer's scratch */
    PyObject *start_resp; /* owned: this lane's start_response */
    PyObject *write;      /* owned: this lane's write() */
    PyObject *status;     /* owned, set by start_response */
    PyObject *headers;    /* owned, set by start_response */
    sl_writer_t w;        /* the response of the request being served */
};

/* A wsgi.file_wrapper (wsgi_objects.c). */
typedef struct {
    PyObject_HEAD
    PyObject *filelike; /* owned */
    Py_ssize_t blksize;
} sl_wsgi_file_t;

extern PyTypeObject sl_wsgi_file_type;

/* ---- wsgi.c: the response ---- */

/* Build L's head from the app's status and headers; KNOWN is the body
 * length when the server knows it, or -1. 0, or -1 with an exception. */
int sl_wsgi_head(sl_wsgi_lane_t *l, long long known);

/* Queue DATA (after the head when it waits); END finishes the response.
 * Waits for credit without the GIL. 0, or -1 when the client is gone (no
 * exception set). */
int sl_wsgi_emit(sl_wsgi_lane_t *l, const char *data, size_t len, bool end);

/* ---- wsgi_environ.c ---- */

/* Intern the keys, build the prototype environ for pump P. 0, or -1 with
 * an exception. After sl_wsgi_objects_init(). */
int sl_wsgi_environ_init(sl_pump_t *p);

/* The environ of request GEN of C: a new reference, or NULL with an
 * exception. */
PyObject *sl_wsgi_environ_new(sl_exch_t *c, uint32_t gen);

/* ---- wsgi_objects.c ---- */

/* Ready the types. 0, or -1 with an exception. */
int sl_wsgi_objects_init(void);

/* Give L its start_response and write(). 0, or -1 with an exception. */
int sl_wsgi_objects_new(sl_wsgi_lane_t *l);

/* After a request: a start_response or write() the app kept is cut loose
 * (its calls then raise) and L gets fresh ones. */
void sl_wsgi_objects_renew(sl_wsgi_lane_t *l);

#endif
