/* writer.c - a response the app gave as Python objects, onto the wire.
 *
 * The framing rules live in the loop side's response.c and know nothing of
 * Python; this file turns header lists into calls on them, turns a broken
 * list into the exception the app sees, and keeps the one state machine of
 * a response that both interfaces drive: nothing sent, head waiting, body
 * under way, ended. The head is never queued on its own when a body part
 * follows at once: it waits in the scratch buffer and leaves in the same
 * sl_exch_send() as the first part, so a small response is one write.
 */
#include "config.h"

#include <Python.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/loop/http.h"
#include "worker/loop/response.h"
#include "worker/python/writer.h"

/* One header pair as bytes, borrowed from the app's objects. */
typedef struct {
    const char *name, *value;
    size_t nn, vn;
} field_t;

struct sl_writer_iface {
    const char *what; /* names the app's call in errors */
    /* Pair I of HEADERS into F; -1 with an exception when it is not of
     * the interface's shape. */
    int (*pair)(PyObject *headers, Py_ssize_t i, const char *what, field_t *f);
    bool checked; /* the rule was applied when the app sent the list */
};

/* ------------------------------------------------------------------ */
/* header lists                                                       */

/* Latin-1 bytes of a str without copying; NULL with an exception. */
static const char *latin1(PyObject *s, size_t *n, const char *what)
{
    if (!PyUnicode_Check(s)) {
        PyErr_Format(PyExc_TypeError, "%s must be str, not %s", what,
                     Py_TYPE(s)->tp_name);
        return NULL;
    }
    if (PyUnicode_KIND(s) != PyUnicode_1BYTE_KIND) {
        PyErr_Format(PyExc_ValueError, "%s is not latin-1: %R", what, s);
        return NULL;
    }
    *n = (size_t)PyUnicode_GET_LENGTH(s);
    return (const char *)PyUnicode_1BYTE_DATA(s);
}

/* WSGI: a (str, str) tuple (the app may have changed its list since
 * start_response() looked at it). */
static int pair_latin1(PyObject *headers, Py_ssize_t i, const char *what,
                       field_t *f)
{
    PyObject *t = PySequence_Fast_GET_ITEM(headers, i);

    (void)what;
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2) {
        PyErr_Format(PyExc_TypeError,
                     "headers must be (str, str) tuples, got %R", t);
        return -1;
    }
    f->name = latin1(PyTuple_GET_ITEM(t, 0), &f->nn, "header name");
    if (f->name == NULL)
        return -1;
    f->value = latin1(PyTuple_GET_ITEM(t, 1), &f->vn, "header value");
    return f->value != NULL ? 0 : -1;
}

/* ASGI: a [bytes, bytes] pair (list or tuple). */
static int pair_bytes(PyObject *headers, Py_ssize_t i, const char *what,
                      field_t *f)
{
    PyObject *t = PySequence_Fast_GET_ITEM(headers, i), *name, *value;

    if ((!PyTuple_Check(t) && !PyList_Check(t)) ||
        PySequence_Fast_GET_SIZE(t) != 2) {
        PyErr_Format(PyExc_TypeError,
                     "%s: each header must be a [name, value] pair of "
                     "bytes, got %R",
                     what, t);
        return -1;
    }
    name = PySequence_Fast_GET_ITEM(t, 0);
    value = PySequence_Fast_GET_ITEM(t, 1);
    if (!PyBytes_Check(name) || !PyBytes_Check(value)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: header names and values must be bytes, got %R", what,
                     t);
        return -1;
    }
    f->name = PyBytes_AS_STRING(name);
    f->nn = (size_t)PyBytes_GET_SIZE(name);
    f->value = PyBytes_AS_STRING(value);
    f->vn = (size_t)PyBytes_GET_SIZE(value);
    return 0;
}

const sl_writer_iface_t sl_writer_wsgi = {"start_response()", pair_latin1,
                                          false};
const sl_writer_iface_t sl_writer_asgi = {"http.response.start", pair_bytes,
                                          true};

/* The one header rule, for both interfaces: -1 with a ValueError naming
 * pair I of HEADERS when F breaks it. */
static int check_field(const field_t *f, PyObject *headers, Py_ssize_t i,
                       const char *what)
{
    if (!sl_response_bad_name(f->name, f->nn) &&
        !sl_response_bad_bytes(f->value, f->vn))
        return 0;
    PyErr_Format(PyExc_ValueError,
                 "%s: bad header %R: a name must be a token and a value may "
                 "not hold CR, LF or NUL",
                 what, PySequence_Fast_GET_ITEM(headers, i));
    return -1;
}

int sl_writer_check_headers(PyObject *headers, const char *what)
{
    Py_ssize_t i, n = PySequence_Fast_GET_SIZE(headers);
    field_t f;

    for (i = 0; i < n; i++)
        if (pair_bytes(headers, i, what, &f) < 0 ||
            check_field(&f, headers, i, what) < 0)
            return -1;
    return 0;
}

/* ------------------------------------------------------------------ */
/* the response                                                       */

void sl_writer_init(sl_writer_t *w, const sl_writer_iface_t *iface,
                    sl_buf_t *scratch, sl_exch_t *c, uint32_t gen)
{
    sl_writer_lent_collect();
    memset(w, 0, sizeof(*w));
    w->iface = iface;
    w->scratch = scratch;
    w->ex = c;
    w->gen = gen;
}

int sl_writer_start(sl_writer_t *w, int status, const char *line, size_t ln,
                    PyObject *headers, long long known, bool trailers)
{
    const sl_req_t *req = &w->ex->req;
    sl_buf_t *b = w->scratch;
    Py_ssize_t i, n = PySequence_Fast_GET_SIZE(headers);
    field_t f;
    int rc;

    if (sl_response_begin(&w->rs, b, req, status, line, ln) < 0)
        goto out_nomem;
    for (i = 0; i < n; i++) {
        if (w->iface->pair(headers, i, w->iface->what, &f) < 0 ||
            (!w->iface->checked &&
             check_field(&f, headers, i, w->iface->what) < 0))
            return -1;
        rc = sl_response_field(&w->rs, b, f.name, f.nn, f.value, f.vn);
        if (rc == -2) {
            PyErr_Format(PyExc_ValueError, "%s: bad Content-Length %R",
                         w->iface->what, PySequence_Fast_GET_ITEM(headers, i));
            return -1;
        }
        if (rc < 0)
            goto out_nomem;
    }
    if (sl_response_end(&w->rs, b, req, known, trailers,
                        sl_exch_must_close(w->ex, w->gen)) < 0)
        goto out_nomem;
    w->trailers = trailers;
    w->started = w->headed = true;
    return 0;

out_nomem:
    PyErr_NoMemory(); /* what was built never leaves the scratch */
    return -1;
}

/* Queue IOV[0..N) with FLAGS; past END the writer is done. */
static int queue(sl_writer_t *w, const struct iovec *iov, int n, int flags)
{
    int rc;

    /* the access log's body count: a response in one part is counted by
     * the loop, which saves this a lock */
    if ((flags & SL_SEND_END) && w->sent && w->started)
        sl_exch_note_body(w->ex, w->gen, w->rs.sent);
    rc = sl_exch_send(w->ex, w->gen, iov, n, flags);

    if (n > 0)
        w->sent = true;
    if (flags & SL_SEND_END)
        w->ended = true;
    if (rc < 0 || w->ended)
        w->gone = true;
    return rc;
}

/* Put the waiting head in IOV[*N]. */
static void take_head(sl_writer_t *w, struct iovec *iov, int *n)
{
    if (!w->headed)
        return;
    iov[*n].iov_base = w->scratch->data;
    iov[(*n)++].iov_len = w->scratch->len;
    w->headed = false;
}

/* The flags of the part that ends the response. */
static int end_flags(const sl_writer_t *w)
{
    return SL_SEND_END |
           (sl_response_ends_connection(&w->rs) ? SL_SEND_CLOSE : 0);
}

int sl_writer_body(sl_writer_t *w, const void *data, size_t len, bool last)
{
    struct iovec iov[4];
    char size_line[24];
    bool end = last && !w->trailers;
    int n = 0;

    if (w->gone) {
        /* END still has to reach the loop, which frees the request on it */
        if (end && !w->ended)
            queue(w, NULL, 0, SL_SEND_END | SL_SEND_CLOSE);
        return -1;
    }
    take_head(w, iov, &n);
    sl_response_frame(&w->rs, iov, &n, size_line, data, len, end);
    if (n == 0 && !end)
        return 0;
    return queue(w, iov, n, end ? end_flags(w) : 0);
}

/* Lent bytes the loop gave back, waiting for the GIL: an array grown as
 * needed under lent_mu; nlent is also read alone, atomically, so a
 * collect with nothing to do takes no lock. */
static pthread_mutex_t lent_mu = PTHREAD_MUTEX_INITIALIZER;
static PyObject **lent;
static size_t lent_cap;
static size_t nlent;

void sl_writer_lent_release(void *owner)
{
    size_t n;

    pthread_mutex_lock(&lent_mu);
    n = __atomic_load_n(&nlent, __ATOMIC_RELAXED);
    if (n == lent_cap) {
        size_t cap = lent_cap ? lent_cap * 2 : 64;
        PyObject **a = realloc(lent, cap * sizeof(*a));

        if (a == NULL) { /* out of memory: the bytes stay, not the worker */
            pthread_mutex_unlock(&lent_mu);
            return;
        }
        lent = a;
        lent_cap = cap;
    }
    lent[n] = owner;
    __atomic_store_n(&nlent, n + 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lent_mu);
}

void sl_writer_lent_collect(void)
{
    PyObject *batch[64];
    size_t i, n, all;

    while (__atomic_load_n(&nlent, __ATOMIC_RELAXED) > 0) {
        pthread_mutex_lock(&lent_mu);
        all = __atomic_load_n(&nlent, __ATOMIC_RELAXED);
        n = all < 64 ? all : 64;
        memcpy(batch, lent + all - n, n * sizeof(*batch));
        __atomic_store_n(&nlent, all - n, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&lent_mu);
        /* outside the lock: a bytes object's last reference frees it */
        for (i = 0; i < n; i++)
            Py_DECREF(batch[i]);
    }
}

/* Before a last part of LEN bytes that goes out by reference (lent
 * bytes, a file): queue the waiting head and count the bytes. 0, or -1
 * when the client is gone (the response is then ended). */
static int tail_head(sl_writer_t *w, uint64_t len)
{
    struct iovec iov[1];
    int n = 0;

    take_head(w, iov, &n);
    if (n > 0 && queue(w, iov, n, 0) < 0) {
        sl_writer_fail(w, 500); /* END still has to reach the loop */
        return -1;
    }
    w->rs.sent += len;
    sl_exch_note_body(w->ex, w->gen, w->rs.sent);
    return 0;
}

/* The last part went to the connection with result RC: the response is
 * over, by that part's END or by ours. 0, or -1 when the client is gone. */
static int tail_done(sl_writer_t *w, int rc)
{
    w->gone = true;
    if (rc < 0) {
        sl_writer_fail(w, 500); /* END still has to reach the loop */
        return -1;
    }
    w->ended = true; /* the last part carried the END */
    return 0;
}

int sl_writer_lend(sl_writer_t *w, PyObject *bytes)
{
    size_t len = (size_t)PyBytes_GET_SIZE(bytes);
    int rc;

    if (w->gone || !w->started || w->rs.chunked || w->rs.no_body ||
        w->trailers || len < SL_WRITER_LEND_MIN)
        return 1;
    if (w->rs.app_cl && w->rs.cl - w->rs.sent < len)
        len = (size_t)(w->rs.cl - w->rs.sent); /* never more than promised */
    if (tail_head(w, len) < 0)
        return -1;
    Py_INCREF(bytes);
    rc = sl_exch_sendmem(w->ex, w->gen, PyBytes_AS_STRING(bytes), len, bytes,
                         end_flags(w));
    if (rc < 0)
        Py_DECREF(bytes); /* nothing was lent */
    return tail_done(w, rc);
}

/* "name: value\r\n" into B. 0, or -1 when out of memory. */
static int put_field(sl_buf_t *b, const field_t *f)
{
    if (sl_buf_append(b, f->name, f->nn) < 0 ||
        SL_BUF_APPEND_LIT(b, ": ") < 0 || sl_buf_append(b, f->value, f->vn) < 0)
        return -1;
    return SL_BUF_APPEND_LIT(b, "\r\n");
}

/* "0\r\n", the trailer fields of HEADERS and the final CRLF into the
 * scratch. 0, or -1 with an exception (MemoryError when an append failed:
 * the scratch is then never sent). */
static int build_trailers(sl_writer_t *w, PyObject *headers)
{
    sl_buf_t *b = w->scratch;
    Py_ssize_t i, n;
    field_t f;

    b->len = b->off = 0;
    if (SL_BUF_APPEND_LIT(b, "0\r\n") < 0)
        goto out_nomem;
    n = headers != NULL ? PySequence_Fast_GET_SIZE(headers) : 0;
    for (i = 0; i < n; i++) {
        if (w->iface->pair(headers, i, "http.response.trailers", &f) < 0)
            return -1;
        if (put_field(b, &f) < 0)
            goto out_nomem;
    }
    if (SL_BUF_APPEND_LIT(b, "\r\n") < 0)
        goto out_nomem;
    return 0;

out_nomem:
    PyErr_NoMemory();
    return -1;
}

int sl_writer_end(sl_writer_t *w, PyObject *trailers)
{
    struct iovec iov;

    if (!w->trailers || !w->rs.trailers) {
        /* no place for trailers (not chunked): the body simply ends */
        w->trailers = false;
        return sl_writer_body(w, NULL, 0, true) < 0 ? -1 : 0;
    }
    w->trailers = false;
    if (w->gone) {
        sl_writer_fail(w, 500);
        return -1;
    }
    if (build_trailers(w, trailers) < 0) {
        sl_writer_fail(w, 500);
        return -1;
    }
    iov.iov_base = w->scratch->data;
    iov.iov_len = w->scratch->len;
    return queue(w, &iov, 1, end_flags(w)) < 0 ? -1 : 0;
}

int sl_writer_sendfile(sl_writer_t *w, int fd, off_t off, uint64_t len)
{
    int rc;

    if (w->rs.app_cl && w->rs.cl - w->rs.sent < len)
        len = w->rs.cl - w->rs.sent;
    if (w->rs.no_body || len == 0) {
        close(fd);
        return sl_writer_end(w, NULL);
    }
    if (w->gone) {
        close(fd);
        sl_writer_fail(w, 500);
        return -1;
    }
    if (tail_head(w, len) < 0) {
        close(fd);
        return -1;
    }
    rc = sl_exch_sendfile(w->ex, w->gen, fd, off, (size_t)len, end_flags(w));
    return tail_done(w, rc);
}

void sl_writer_fail(sl_writer_t *w, int status)
{
    struct iovec iov = {NULL, 0};
    int n = 0;

    if (w->ended)
        return;
    if (!w->sent && !w->gone) {
        w->scratch->len = w->scratch->off = 0;
        /* out of memory, the close alone says it */
        if (sl_http_error_head(w->scratch, status) == 0) {
            iov.iov_base = w->scratch->data;
            iov.iov_len = w->scratch->len;
            n = 1;
        }
    }
    w->headed = false;
    queue(w, &iov, n, SL_SEND_END | SL_SEND_CLOSE);
}
