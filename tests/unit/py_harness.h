/* py_harness.h - the embedded-Python side of the unit tests: start the
 * interpreter as a worker does, define an app module from source text, read
 * values back from it, and keep the error log (where tracebacks go) in a
 * file of the test's own under h_dir (so test cases using it need the
 * h_dir_make/h_dir_remove unchecked fixture).
 *
 * CPython starts once per process, so suites using this run every test
 * forked (check's default) and start Python in the test's own fixture.
 */
#ifndef SL_TEST_PY_HARNESS_H
#define SL_TEST_PY_HARNESS_H

#include <Python.h>

#include "tests/unit/harness.h"
#include "worker/python/py.h"

/* Send the log, and fd 2 with Python's tracebacks, to a file (as the
 * worker does with --error-logfile). */
static inline void hp_log_to_file(void)
{
    h_log_to_file();
    ck_assert_int_ge(dup2(sl_log_fd(), STDERR_FILENO), 0);
}

/* Everything logged so far (a static buffer). */
static inline const char *hp_log_text(void)
{
    return h_log_text();
}

/* Print and fail on a pending Python exception. */
static inline void hp_check(PyObject *o, const char *what)
{
    if (o == NULL) {
        PyErr_Print();
        ck_abort_msg("Python failed: %s", what);
    }
}

/* Create module NAME (in sys.modules) from SRC. */
static inline void hp_module(const char *name, const char *src)
{
    PyObject *m = PyImport_AddModule(name); /* borrowed */
    PyObject *r;

    hp_check(m, name);
    r = PyRun_String(src, Py_file_input, PyModule_GetDict(m),
                     PyModule_GetDict(m));
    hp_check(r, src);
    Py_DECREF(r);
}

/* Evaluate EXPR in module NAME's namespace and return str() of it (a
 * static buffer). */
static inline const char *hp_eval(const char *name, const char *expr)
{
    static char buf[4096];
    PyObject *m = PyImport_AddModule(name), *r, *s;
    const char *u;

    hp_check(m, name);
    r = PyRun_String(expr, Py_eval_input, PyModule_GetDict(m),
                     PyModule_GetDict(m));
    hp_check(r, expr);
    s = PyObject_Str(r);
    hp_check(s, expr);
    u = PyUnicode_AsUTF8(s);
    if (u == NULL) {
        PyErr_Print();
        ck_abort_msg("str() of %s is not UTF-8", expr);
    }
    snprintf(buf, sizeof(buf), "%s", u);
    Py_DECREF(s);
    Py_DECREF(r);
    return buf;
}

#endif
