/* py.h - the embedded interpreter: start-up, the app, the GIL. */
#ifndef SL_PY_H
#define SL_PY_H

#include <Python.h>
#include <ev.h>

#include "common/options.h"
#include "worker/loop/exchange.h"

/* Start CPython for O (venv, --pythonpath, --chdir) without Python's own
 * signal handlers. 0, or -1 after one clear log line. */
int sl_py_init(const sl_options_t *o);

/* Import O->app ("module:callable", "module" meaning module:application)
 * and, with --factory or "module:name()", call that with no arguments: the
 * app is what it returns. Returns a new reference to a callable, or NULL
 * after one clear error line naming the module (or the factory) and the
 * Python error; what a factory raised gets its traceback too. GIL held. */
PyObject *sl_py_load_app(const sl_options_t *o);

/* Log the current Python exception with its traceback, prefixed by a line
 * saying what failed, and clear it. GIL held. */
void sl_py_log_exception(const char *what, ...)
    __attribute__((format(printf, 1, 2)));

/* Inline mode: let libev drop the GIL around its blocking poll. */
void sl_py_release_gil_in_poll(struct ev_loop *loop);

/* serve (exec.h) for executors whose lanes are threads of their own: the
 * GIL is given up for them, its thread state left in *RELEASED, and P's
 * loop runs until the drain ends. */
int sl_py_serve_released(sl_pump_t *p, void **released);

/* serve for an executor on the loop thread that keeps the GIL (it lets go
 * of it in libev's poll, sl_py_release_gil_in_poll()). */
int sl_py_serve_holding(sl_pump_t *p, void **released);

/* C's client (sl_exch_client()) as Python objects, made once per
 * connection (every keep-alive request shares them) unless a forwarding
 * header names it, then once per request: ADDR the address and PORT the port as
 * str (WSGI's REMOTE_ADDR/REMOTE_PORT), CLIENT the (address, port) tuple
 * (ASGI's scope["client"]); pass NULL for what is not wanted. Borrowed
 * references, good until C's slot takes another connection. 0, or -1 with
 * a Python exception. GIL held; C must have a client (sl_py_has_client()). */
/* Has C a client address to show (an IP peer, or a forwarded client)? */
static inline bool sl_py_has_client(const sl_exch_t *c)
{
    return sl_exch_peer_is_ip(c) || sl_req_client(&c->req)->addr[0] != '\0';
}

int sl_py_peer(const sl_exch_t *c, PyObject **addr, PyObject **port,
               PyObject **client);

/* A request path percent-decoded, as str: UTF-8 with bad bytes replaced
 * (ASGI's path, as uvicorn), or latin-1 (WSGI's PATH_INFO). A new
 * reference, or NULL with an exception. */
PyObject *sl_py_unquote_path(const char *p, size_t n, bool utf8);

/* Make the request method names (str, interned) once per process, for
 * WSGI's REQUEST_METHOD and ASGI's scope["method"] alike; later calls do
 * nothing. 0, or -1 with a Python exception. GIL held. */
int sl_py_methods_init(void);

/* The name of llhttp method METHOD (sl_req_t.method): a borrowed
 * reference, "UNKNOWN" for a number HTTP does not name. After
 * sl_py_methods_init(). */
PyObject *sl_py_method(int method);

/* DICT[KEY] = request R's method as the client wrote it: the interned
 * name for a method llhttp names, a new str for any other token. 0, or -1
 * with a Python exception. GIL held. */
int sl_py_set_method(PyObject *dict, PyObject *key, const sl_req_t *r);

/* Drop the method names (sl_py_finalize() does). GIL held. */
void sl_py_methods_free(void);

/* Stop the interpreter (GIL held by this thread). */
void sl_py_finalize(void);

#endif
