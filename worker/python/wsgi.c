/* wsgi.c - PEP 3333 on top of a connection: the handler.
 *
 * One request from start to END on a lane: the environ (wsgi_environ.c),
 * the app's call with the lane's start_response (wsgi_objects.c), the
 * result sent as its kind allows, and close(). The response goes through
 * the writer both interfaces share (writer.c): the head waits in the
 * lane's buffer and leaves with the first body chunk, so a hello-world
 * response is one write; a list result of known length gets a
 * Content-Length instead of chunked framing, and a file wrapper over a
 * regular file goes by sendfile(2).
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "worker/loop/http.h"
#include "worker/loop/response.h"
#include "worker/python/py.h"
#include "worker/python/writer.h"
#include "worker/python/wsgi_internal.h"

static PyObject *app;        /* owned */
static PyObject *close_name; /* owned: "close", interned */

/* ------------------------------------------------------------------ */
/* the response                                                       */

/* Build the head from the app's status and headers. KNOWN is the body
 * length when the server knows it (a list result), or -1. 0, or -1 with a
 * Python exception. */
int sl_wsgi_head(sl_wsgi_lane_t *l, long long known)
{
    const char *s;
    Py_ssize_t sn;

    if (!PyUnicode_Check(l->status) ||
        PyUnicode_KIND(l->status) != PyUnicode_1BYTE_KIND) {
        PyErr_Format(PyExc_ValueError, "status is not latin-1: %R", l->status);
        return -1;
    }
    s = (const char *)PyUnicode_1BYTE_DATA(l->status);
    sn = PyUnicode_GET_LENGTH(l->status);
    if (sn < 4 || s[3] != ' ' || s[0] < '1' || s[0] > '5' || s[1] < '0' ||
        s[1] > '9' || s[2] < '0' || s[2] > '9' ||
        sl_response_bad_bytes(s, (size_t)sn)) {
        PyErr_Format(PyExc_ValueError, "bad status %R: want '200 OK'",
                     l->status);
        return -1;
    }
    return sl_writer_start(
        &l->w, (s[0] - '0') * 100 + (s[1] - '0') * 10 + (s[2] - '0'), s,
        (size_t)sn, l->headers, known, false);
}

/* Queue DATA (after the head when it waits); END finishes the response.
 * A large part goes SL_WRITER_SLICE bytes at a time, waiting for credit
 * between slices without the GIL, as between parts. 0, or -1 when the
 * client is gone (no exception set). */
int sl_wsgi_emit(sl_wsgi_lane_t *l, const char *data, size_t len, bool end)
{
    int rc;

    do {
        size_t n = len > SL_WRITER_SLICE ? SL_WRITER_SLICE : len;

        rc = sl_writer_body(&l->w, data, n, end && n == len);
        if (rc == 1) {
            Py_BEGIN_ALLOW_THREADS
            rc = sl_exch_wait_credit(l->w.ex, l->w.gen);
            Py_END_ALLOW_THREADS
        }
        if (rc < 0)
            return -1;
        if (n == len)
            return 0;
        data += n;
        len -= n;
    } while (true);
}

/* ------------------------------------------------------------------ */
/* the result                                                         */

/* A list or tuple of bytes: one queue operation, exact length. 0 or -1
 * (exception set when the app is at fault). */
static int send_sequence(sl_wsgi_lane_t *l, PyObject *seq)
{
    Py_ssize_t i, n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    long long total = 0;

    for (i = 0; i < n; i++) {
        if (!PyBytes_Check(items[i])) {
            PyErr_Format(PyExc_TypeError,
                         "the app's result must hold bytes, not %s",
                         Py_TYPE(items[i])->tp_name);
            return -1;
        }
        total += PyBytes_GET_SIZE(items[i]);
    }
    if (l->status == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "the app returned without calling start_response()");
        return -1;
    }
    if (!l->w.started && sl_wsgi_head(l, total) < 0)
        return -1;
    if (n == 1) { /* the common case: head and body in one write */
        if (!PyBytes_CheckExact(items[0]) ||
            sl_writer_lend(&l->w, items[0]) > 0)
            sl_wsgi_emit(l, PyBytes_AS_STRING(items[0]),
                         (size_t)PyBytes_GET_SIZE(items[0]), true);
        return 0;
    }
    for (i = 0; i < n; i++) {
        if (PyBytes_GET_SIZE(items[i]) == 0)
            continue;
        if (sl_wsgi_emit(l, PyBytes_AS_STRING(items[i]),
                         (size_t)PyBytes_GET_SIZE(items[i]), false) < 0)
            return 0;
    }
    sl_wsgi_emit(l, NULL, 0, true);
    return 0;
}

/* A file wrapper over a regular file: head, then sendfile(2). 1 when sent,
 * 0 when the file is not fit (iterate instead), -1 on error. */
static int send_file(sl_wsgi_lane_t *l, sl_wsgi_file_t *fw)
{
    PyObject *r;
    struct stat st;
    off_t off;
    uint64_t len;
    int fd;

    if (l->w.sent && l->w.rs.chunked)
        return 0; /* write() began a chunked body: sendfile cannot frame */
    r = PyObject_CallMethod(fw->filelike, "fileno", NULL);
    if (r == NULL) {
        PyErr_Clear();
        return 0;
    }
    fd = (int)PyLong_AsLong(r);
    Py_DECREF(r);
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        PyErr_Clear();
        return 0;
    }
    /* respect what the app already read or seeked past */
    r = PyObject_CallMethod(fw->filelike, "tell", NULL);
    if (r == NULL) {
        PyErr_Clear();
        off = lseek(fd, 0, SEEK_CUR);
    } else {
        off = (off_t)PyLong_AsLongLong(r);
        Py_DECREF(r);
    }
    if (off < 0)
        off = 0;
    len = st.st_size > off ? (uint64_t)(st.st_size - off) : 0;
    if (l->status == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "the app returned without calling start_response()");
        return -1;
    }
    /* the connection takes a descriptor of its own: the app closes its
     * file when the response is over, the loop sends it later */
    fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    if (!l->w.started && sl_wsgi_head(l, (long long)len) < 0) {
        close(fd);
        return -1;
    }
    sl_writer_sendfile(&l->w, fd, off, len);
    return 1;
}

/* Any other iterable: send as it comes; the head goes with the first
 * non-empty chunk. 0, or -1 with an exception. */
static int send_iter(sl_wsgi_lane_t *l, PyObject *result)
{
    PyObject *it = PyObject_GetIter(result), *chunk;

    if (it == NULL)
        return -1;
    while ((chunk = PyIter_Next(it)) != NULL) {
        if (!PyBytes_Check(chunk)) {
            PyErr_Format(PyExc_TypeError, "the app yielded %s, not bytes",
                         Py_TYPE(chunk)->tp_name);
            Py_DECREF(chunk);
            Py_DECREF(it);
            return -1;
        }
        if (PyBytes_GET_SIZE(chunk) > 0) {
            if (l->status == NULL) {
                PyErr_SetString(PyExc_RuntimeError,
                                "body before start_response()");
                Py_DECREF(chunk);
                Py_DECREF(it);
                return -1;
            }
            if (!l->w.started && sl_wsgi_head(l, -1) < 0) {
                Py_DECREF(chunk);
                Py_DECREF(it);
                return -1;
            }
            if (sl_wsgi_emit(l, PyBytes_AS_STRING(chunk),
                             (size_t)PyBytes_GET_SIZE(chunk), false) < 0) {
                Py_DECREF(chunk);
                break; /* the client left: stop, close() still runs */
            }
        }
        Py_DECREF(chunk);
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return -1;
    if (l->w.gone)
        return 0;
    if (l->status == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "the app returned without calling start_response()");
        return -1;
    }
    if (!l->w.started && sl_wsgi_head(l, 0) < 0)
        return -1;
    sl_wsgi_emit(l, NULL, 0, true);
    return 0;
}

static void call_close(sl_wsgi_lane_t *l, PyObject *result)
{
    PyObject *close, *r;
    char what[512];

    if (PyList_CheckExact(result) || PyTuple_CheckExact(result))
        return;
    close = PyObject_GetAttr(result, close_name);
    if (close == NULL) {
        PyErr_Clear();
        return;
    }
    r = PyObject_CallNoArgs(close);
    Py_DECREF(close);
    if (r == NULL) {
        sl_http_log_name(&l->w.ex->req, what, sizeof(what));
        sl_py_log_exception("error closing the result of %s", what);
    }
    Py_XDECREF(r);
}

static void log_app_error(sl_wsgi_lane_t *l)
{
    char what[512];

    sl_http_log_name(&l->w.ex->req, what, sizeof(what));
    sl_py_log_exception("error handling %s", what);
}

void sl_wsgi_handle(sl_wsgi_lane_t *l, sl_exch_t *c, uint32_t gen)
{
    PyObject *env, *result, *args[2];
    int rc;

    sl_writer_init(&l->w, &sl_writer_wsgi, &l->head, c, gen);

    env = sl_wsgi_environ_new(c, gen);
    if (env == NULL) {
        log_app_error(l);
        sl_writer_fail(&l->w, 500);
        return;
    }
    args[0] = env;
    args[1] = l->start_resp;
    result = PyObject_Vectorcall(app, args, 2, NULL);
    if (result == NULL) {
        log_app_error(l);
        sl_writer_fail(&l->w, 500);
        goto out;
    }
    rc = 0;
    if (PyList_CheckExact(result) || PyTuple_CheckExact(result))
        rc = send_sequence(l, result);
    else if (Py_TYPE(result) == &sl_wsgi_file_type)
        rc = send_file(l, (sl_wsgi_file_t *)result);
    if (rc == 0 && !l->w.gone)
        rc = send_iter(l, result);
    if (rc < 0) {
        log_app_error(l);
        sl_writer_fail(&l->w, 500);
    }
    call_close(l, result);
    Py_DECREF(result);
out:
    /* a client that left mid-response still needs its request ended */
    sl_writer_fail(&l->w, 500);
    Py_CLEAR(l->status);
    Py_CLEAR(l->headers);
    Py_DECREF(env);
    sl_wsgi_objects_renew(l);
}

/* ------------------------------------------------------------------ */
/* set-up                                                             */

sl_wsgi_lane_t *sl_wsgi_lane_new(void)
{
    sl_wsgi_lane_t *l = calloc(1, sizeof(*l));

    if (l == NULL)
        return NULL;
    if (sl_wsgi_objects_new(l) < 0) {
        free(l);
        return NULL;
    }
    return l;
}

void sl_wsgi_lane_free(sl_wsgi_lane_t *l)
{
    if (l == NULL)
        return;
    Py_XDECREF(l->start_resp);
    Py_XDECREF(l->write);
    sl_buf_free(&l->head);
    free(l);
}

int sl_wsgi_init(PyObject *the_app, sl_pump_t *p)
{
    app = Py_NewRef(the_app);
    close_name = PyUnicode_InternFromString("close");
    if (close_name == NULL || sl_wsgi_objects_init() < 0 ||
        sl_wsgi_environ_init(p) < 0) {
        sl_py_log_exception("cannot set up WSGI");
        return -1;
    }
    return 0;
}
