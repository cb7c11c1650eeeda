/* wsgi.c - PEP 3333 on top of a connection.
 *
 * Everything constant about an environ is built once: the keys are interned
 * from a table, the wsgi.* entries live in a prototype dict that each request
 * copies, and the common header names map to ready-made HTTP_* keys. Per
 * request what remains is the dict copy, a handful of small strings, and the
 * call. The response head is formatted into a lane-owned buffer and queued
 * together with the first body chunk, so a hello-world response leaves in
 * one write; a list result of known length gets a Content-Length instead of
 * chunked framing.
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "worker/loop/drain.h"
#include "worker/loop/http.h"
#include "worker/python/py.h"
#include "worker/loop/response.h"
#include "worker/python/wsgi.h"
#include "worker/python/wsgi_input.h"
#include "worker/python/writer.h"

struct sl_wsgi_lane {
    sl_buf_t head;        /* owned: the writer's scratch */
    PyObject *start_resp; /* owned: this lane's start_response */
    PyObject *write;      /* owned: this lane's write() */
    PyObject *status;     /* owned, set by start_response */
    PyObject *headers;    /* owned, set by start_response */
    sl_writer_t w;        /* the response of the request being served */
};

typedef struct {
    PyObject_HEAD
    sl_wsgi_lane_t *lane; /* borrowed: lanes outlive their callables */
} lane_fn_t;

typedef struct {
    PyObject_HEAD
    PyObject *filelike; /* owned */
    Py_ssize_t blksize;
} file_wrapper_t;

static PyObject *app;   /* owned */
static sl_pump_t *pump; /* borrowed */
static PyObject *proto; /* owned: the prototype environ */
static PyObject *errors_obj;
static PyObject *listener_name[SL_MAX_LISTENERS];
static PyObject *listener_port[SL_MAX_LISTENERS];

/* Interned keys, built once from this table. */
enum {
    K_REQUEST_METHOD,
    K_SCRIPT_NAME,
    K_PATH_INFO,
    K_QUERY_STRING,
    K_CONTENT_TYPE,
    K_CONTENT_LENGTH,
    K_SERVER_NAME,
    K_SERVER_PORT,
    K_SERVER_PROTOCOL,
    K_REMOTE_ADDR,
    K_REMOTE_PORT,
    K_RAW_URI,
    K_WSGI_INPUT,
    K_HTTP_1_0,
    K_HTTP_1_1,
    K_EMPTY,
    K_CLOSE,
    K_COUNT
};
static const char *const key_names[K_COUNT] = {
    "REQUEST_METHOD",  "SCRIPT_NAME",    "PATH_INFO",   "QUERY_STRING",
    "CONTENT_TYPE",    "CONTENT_LENGTH", "SERVER_NAME", "SERVER_PORT",
    "SERVER_PROTOCOL", "REMOTE_ADDR",    "REMOTE_PORT", "RAW_URI",
    "wsgi.input",      "HTTP/1.0",       "HTTP/1.1",    "",
    "close",
};
static PyObject *keys[K_COUNT];

/* The environ keys of sl_http_common_names, made once. */
static PyObject *common_keys[SL_HTTP_NCOMMON];

/* ------------------------------------------------------------------ */
/* wsgi.errors                                                        */

static PyObject *errors_write(PyObject *self, PyObject *arg)
{
    Py_ssize_t n;
    const char *s;

    (void)self;
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "write() argument must be str, not %s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    s = PyUnicode_AsUTF8AndSize(arg, &n);
    if (s == NULL)
        return NULL;
    while (n > 0) {
        ssize_t w = write(sl_log_fd(), s, (size_t)n);
        if (w <= 0)
            break;
        s += w;
        n -= w;
    }
    Py_RETURN_NONE;
}

static PyObject *errors_writelines(PyObject *self, PyObject *seq)
{
    PyObject *it = PyObject_GetIter(seq), *item, *r;

    if (it == NULL)
        return NULL;
    while ((item = PyIter_Next(it)) != NULL) {
        r = errors_write(self, item);
        Py_DECREF(item);
        if (r == NULL) {
            Py_DECREF(it);
            return NULL;
        }
        Py_DECREF(r);
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *errors_flush(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    Py_RETURN_NONE;
}

static PyMethodDef errors_methods[] = {
    {"write", errors_write, METH_O, "write(str)"},
    {"writelines", errors_writelines, METH_O, "writelines(seq)"},
    {"flush", errors_flush, METH_NOARGS, "flush()"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject errors_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice.Errors",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "wsgi.errors: the error log",
    .tp_methods = errors_methods,
};

/* ------------------------------------------------------------------ */
/* wsgi.file_wrapper                                                  */

static PyObject *fw_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"filelike", "blksize", NULL};
    PyObject *filelike;
    Py_ssize_t blksize = 8192;
    file_wrapper_t *fw;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|n", kwlist, &filelike,
                                     &blksize))
        return NULL;
    fw = (file_wrapper_t *)type->tp_alloc(type, 0);
    if (fw == NULL)
        return NULL;
    Py_INCREF(filelike);
    fw->filelike = filelike;
    fw->blksize = blksize > 0 ? blksize : 8192;
    return (PyObject *)fw;
}

static void fw_dealloc(file_wrapper_t *fw)
{
    Py_XDECREF(fw->filelike);
    Py_TYPE(fw)->tp_free((PyObject *)fw);
}

static PyObject *fw_iternext(file_wrapper_t *fw)
{
    PyObject *data =
        PyObject_CallMethod(fw->filelike, "read", "n", fw->blksize);

    if (data != NULL && PyBytes_Check(data) && PyBytes_GET_SIZE(data) == 0) {
        Py_DECREF(data);
        return NULL;
    }
    return data;
}

static PyObject *fw_close(file_wrapper_t *fw, PyObject *unused)
{
    (void)unused;
    if (PyObject_HasAttrString(fw->filelike, "close"))
        return PyObject_CallMethod(fw->filelike, "close", NULL);
    Py_RETURN_NONE;
}

static PyMethodDef fw_methods[] = {
    {"close", (PyCFunction)fw_close, METH_NOARGS, "close the file"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject fw_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice.FileWrapper",
    .tp_basicsize = sizeof(file_wrapper_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "wsgi.file_wrapper: sent with sendfile(2) when it can be",
    .tp_new = fw_new,
    .tp_dealloc = (destructor)fw_dealloc,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)fw_iternext,
    .tp_methods = fw_methods,
};

/* ------------------------------------------------------------------ */
/* the response                                                       */

/* Build the head from the app's status and headers. KNOWN is the body
 * length when the server knows it (a list result), or -1. 0, or -1 with a
 * Python exception. */
static int head_build(sl_wsgi_lane_t *l, long long known)
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
 * Waits for credit without the GIL. 0, or -1 when the client is gone (no
 * exception set). */
static int emit(sl_wsgi_lane_t *l, const char *data, size_t len, bool end)
{
    int rc = sl_writer_body(&l->w, data, len, end);

    if (rc == 1) {
        Py_BEGIN_ALLOW_THREADS
        rc = sl_conn_wait_credit(l->w.c, l->w.gen);
        Py_END_ALLOW_THREADS
    }
    return rc < 0 ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* start_response and write                                           */

static PyObject *start_response_call(lane_fn_t *self, PyObject *args,
                                     PyObject *kw)
{
    static char *kwlist[] = {"status", "headers", "exc_info", NULL};
    sl_wsgi_lane_t *l = self->lane;
    PyObject *status, *headers, *exc_info = Py_None;
    Py_ssize_t i, n;

    if (l == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "start_response() called after its request ended");
        return NULL;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O:start_response", kwlist,
                                     &status, &headers, &exc_info))
        return NULL;
    if (exc_info != Py_None) {
        if (l->w.sent) {
            /* too late to change the head: re-raise the app's error */
            PyObject *t, *v, *tb;
            if (!PyTuple_Check(exc_info) || PyTuple_GET_SIZE(exc_info) != 3) {
                PyErr_SetString(PyExc_TypeError, "exc_info must be a 3-tuple");
                return NULL;
            }
            t = PyTuple_GET_ITEM(exc_info, 0);
            v = PyTuple_GET_ITEM(exc_info, 1);
            tb = PyTuple_GET_ITEM(exc_info, 2);
            Py_INCREF(t);
            Py_INCREF(v);
            Py_INCREF(tb);
            PyErr_Restore(t, v, tb == Py_None ? NULL : tb);
            return NULL;
        }
    } else if (l->status != NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "start_response() called a second time without "
                        "exc_info");
        return NULL;
    }
    if (!PyUnicode_Check(status)) {
        PyErr_Format(PyExc_TypeError, "status must be str, not %s",
                     Py_TYPE(status)->tp_name);
        return NULL;
    }
    if (!PyList_Check(headers)) {
        PyErr_Format(PyExc_TypeError, "headers must be a list, not %s",
                     Py_TYPE(headers)->tp_name);
        return NULL;
    }
    n = PyList_GET_SIZE(headers);
    for (i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(headers, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2 ||
            !PyUnicode_Check(PyTuple_GET_ITEM(t, 0)) ||
            !PyUnicode_Check(PyTuple_GET_ITEM(t, 1))) {
            PyErr_Format(PyExc_TypeError,
                         "headers must be (str, str) tuples, got %R", t);
            return NULL;
        }
    }
    Py_INCREF(status);
    Py_XSETREF(l->status, status);
    Py_INCREF(headers);
    Py_XSETREF(l->headers, headers);
    Py_INCREF(l->write);
    return l->write;
}

static PyObject *write_call(lane_fn_t *self, PyObject *args, PyObject *kw)
{
    sl_wsgi_lane_t *l = self->lane;
    PyObject *data;

    if (l == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "write() called after its request ended");
        return NULL;
    }
    if (kw != NULL || !PyArg_ParseTuple(args, "O:write", &data))
        return NULL;
    if (!PyBytes_Check(data)) {
        PyErr_Format(PyExc_TypeError, "write() argument must be bytes, not %s",
                     Py_TYPE(data)->tp_name);
        return NULL;
    }
    if (l->status == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "write() before start_response()");
        return NULL;
    }
    if (!l->w.started && head_build(l, -1) < 0)
        return NULL;
    if (emit(l, PyBytes_AS_STRING(data), (size_t)PyBytes_GET_SIZE(data),
             false) < 0) {
        PyErr_SetString(PyExc_OSError, "client disconnected");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyTypeObject start_response_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice.StartResponse",
    .tp_basicsize = sizeof(lane_fn_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_call = (ternaryfunc)start_response_call,
};

static PyTypeObject write_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice.Write",
    .tp_basicsize = sizeof(lane_fn_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_call = (ternaryfunc)write_call,
};

/* ------------------------------------------------------------------ */
/* environ                                                            */

static int set_str(PyObject *env, PyObject *key, const char *s, Py_ssize_t n)
{
    PyObject *v = PyUnicode_DecodeLatin1(s, n, NULL);
    int rc;

    if (v == NULL)
        return -1;
    rc = PyDict_SetItem(env, key, v);
    Py_DECREF(v);
    return rc;
}

/* HTTP_NAME_IN_CAPS, or CONTENT_TYPE / CONTENT_LENGTH (CGI's). */
static PyObject *make_key(const char *name, size_t n)
{
    char stackbuf[256], *key = stackbuf;
    size_t i, pre = 5;
    PyObject *k;

    if (sl_http_name_is(name, n, "content-type") ||
        sl_http_name_is(name, n, "content-length"))
        pre = 0;
    if (n + pre > sizeof(stackbuf) && (key = malloc(n + pre)) == NULL)
        return PyErr_NoMemory();
    memcpy(key, "HTTP_", pre);
    for (i = 0; i < n; i++) {
        char ch = name[i];
        if (ch >= 'a' && ch <= 'z')
            ch = (char)(ch - 32);
        else if (ch == '-')
            ch = '_';
        key[pre + i] = ch;
    }
    k = PyUnicode_DecodeLatin1(key, (Py_ssize_t)(n + pre), NULL);
    if (key != stackbuf)
        free(key);
    return k;
}

/* The environ key for a header name; new reference, NULL with an
 * exception, or Py_None (new ref) when the header is to be dropped. */
static PyObject *header_key(const char *name, size_t n)
{
    int i = sl_http_common_index(name, n);

    if (i >= 0)
        return Py_NewRef(common_keys[i]);
    if (memchr(name, '_', n) != NULL)
        Py_RETURN_NONE; /* would alias the dashed name in environ */
    return make_key(name, n);
}

static int set_headers(PyObject *env, const sl_req_t *r)
{
    const char *hb = r->hbuf.data;
    int i, rc;

    for (i = 0; i < r->nhdrs; i++) {
        const sl_hdr_t *hd = &r->hdrs[i];
        PyObject *key, *val, *old, *joined;

        key = header_key(hb + hd->name_off, hd->name_len);
        if (key == NULL)
            return -1;
        if (key == Py_None) {
            Py_DECREF(key);
            continue;
        }
        val = PyUnicode_DecodeLatin1(hb + hd->val_off, hd->val_len, NULL);
        if (val == NULL) {
            Py_DECREF(key);
            return -1;
        }
        old = PyDict_GetItemWithError(env, key); /* borrowed */
        if (old != NULL) {
            joined = PyUnicode_FromFormat("%U,%U", old, val);
            Py_DECREF(val);
            val = joined;
        }
        rc = val == NULL ? -1 : PyDict_SetItem(env, key, val);
        Py_DECREF(key);
        Py_XDECREF(val);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static PyObject *build_environ(sl_conn_t *c, uint32_t gen)
{
    const sl_req_t *r = &c->req;
    const char *url = r->hbuf.data + r->url_off;
    size_t n = r->url_len;
    sl_target_t t;
    PyObject *env, *input, *v;
    int li = c->listener;

    env = PyDict_Copy(proto);
    if (env == NULL)
        return NULL;
    if (PyDict_SetItem(env, keys[K_REQUEST_METHOD], sl_py_method(r->method)) <
            0 ||
        PyDict_SetItem(env, keys[K_SERVER_PROTOCOL],
                       keys[r->minor ? K_HTTP_1_1 : K_HTTP_1_0]) < 0 ||
        PyDict_SetItem(env, keys[K_SERVER_NAME], listener_name[li]) < 0 ||
        PyDict_SetItem(env, keys[K_SERVER_PORT], listener_port[li]) < 0 ||
        set_str(env, keys[K_RAW_URI], url, (Py_ssize_t)n) < 0)
        goto out_fail;

    sl_http_target(url, n, &t);
    v = sl_py_unquote_path(t.path, t.path_len, false);
    if (v == NULL || PyDict_SetItem(env, keys[K_PATH_INFO], v) < 0) {
        Py_XDECREF(v);
        goto out_fail;
    }
    Py_DECREF(v);
    if (t.query != NULL) {
        if (set_str(env, keys[K_QUERY_STRING], t.query,
                    (Py_ssize_t)t.query_len) < 0)
            goto out_fail;
    } else if (PyDict_SetItem(env, keys[K_QUERY_STRING], keys[K_EMPTY]) < 0) {
        goto out_fail;
    }

    if (c->peer.ss_family != AF_UNIX) {
        PyObject *addr, *port;
        if (sl_py_peer(c, &addr, &port, NULL) < 0 ||
            PyDict_SetItem(env, keys[K_REMOTE_ADDR], addr) < 0 ||
            PyDict_SetItem(env, keys[K_REMOTE_PORT], port) < 0)
            goto out_fail;
    }
    if (set_headers(env, r) < 0)
        goto out_fail;

    input = sl_wsgi_input_new(c, gen);
    if (input == NULL || PyDict_SetItem(env, keys[K_WSGI_INPUT], input) < 0) {
        Py_XDECREF(input);
        goto out_fail;
    }
    Py_DECREF(input);
    return env;

out_fail:
    Py_DECREF(env);
    return NULL;
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
    if (!l->w.started && head_build(l, total) < 0)
        return -1;
    if (n == 1) { /* the common case: head and body in one write */
        emit(l, PyBytes_AS_STRING(items[0]), (size_t)PyBytes_GET_SIZE(items[0]),
             true);
        return 0;
    }
    for (i = 0; i < n; i++) {
        if (PyBytes_GET_SIZE(items[i]) == 0)
            continue;
        if (emit(l, PyBytes_AS_STRING(items[i]),
                 (size_t)PyBytes_GET_SIZE(items[i]), false) < 0)
            return 0;
    }
    emit(l, NULL, 0, true);
    return 0;
}

/* A file wrapper over a regular file: head, then sendfile(2). 1 when sent,
 * 0 when the file is not fit (iterate instead), -1 on error. */
static int send_file(sl_wsgi_lane_t *l, file_wrapper_t *fw)
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
    if (!l->w.started && head_build(l, (long long)len) < 0) {
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
            if (!l->w.started && head_build(l, -1) < 0) {
                Py_DECREF(chunk);
                Py_DECREF(it);
                return -1;
            }
            if (emit(l, PyBytes_AS_STRING(chunk),
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
    if (!l->w.started && head_build(l, 0) < 0)
        return -1;
    emit(l, NULL, 0, true);
    return 0;
}

static void call_close(sl_wsgi_lane_t *l, PyObject *result)
{
    PyObject *close, *r;
    char what[512];

    if (PyList_CheckExact(result) || PyTuple_CheckExact(result))
        return;
    close = PyObject_GetAttr(result, keys[K_CLOSE]);
    if (close == NULL) {
        PyErr_Clear();
        return;
    }
    r = PyObject_CallNoArgs(close);
    Py_DECREF(close);
    if (r == NULL) {
        sl_http_log_name(&l->w.c->req, what, sizeof(what));
        sl_py_log_exception("error closing the result of %s", what);
    }
    Py_XDECREF(r);
}

/* The lane's start_response and write() serve one request after another;
 * one the app kept past its request is cut loose (its calls then raise) so
 * it can never write into a later request, and the lane takes a new one. */
static void renew_if_kept(PyObject **slot, PyTypeObject *type,
                          sl_wsgi_lane_t *l)
{
    lane_fn_t *fresh;

    if (Py_REFCNT(*slot) == 1)
        return;
    fresh = PyObject_New(lane_fn_t, type);
    if (fresh == NULL) {
        PyErr_Clear();
        return; /* keep the old one: still correct for honest apps */
    }
    fresh->lane = l;
    ((lane_fn_t *)*slot)->lane = NULL;
    Py_SETREF(*slot, (PyObject *)fresh);
}

static void log_app_error(sl_wsgi_lane_t *l)
{
    char what[512];

    sl_http_log_name(&l->w.c->req, what, sizeof(what));
    sl_py_log_exception("error handling %s", what);
}

void sl_wsgi_handle(sl_wsgi_lane_t *l, sl_conn_t *c, uint32_t gen)
{
    PyObject *env, *result, *args[2];
    int rc;

    sl_writer_init(&l->w, &sl_writer_wsgi, &l->head, c, gen);

    env = build_environ(c, gen);
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
    else if (Py_TYPE(result) == &fw_type)
        rc = send_file(l, (file_wrapper_t *)result);
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
    renew_if_kept(&l->start_resp, &start_response_type, l);
    renew_if_kept(&l->write, &write_type, l);
}

/* ------------------------------------------------------------------ */
/* set-up                                                             */

sl_wsgi_lane_t *sl_wsgi_lane_new(void)
{
    sl_wsgi_lane_t *l = calloc(1, sizeof(*l));
    lane_fn_t *sr, *wr;

    if (l == NULL)
        return NULL;
    sr = PyObject_New(lane_fn_t, &start_response_type);
    wr = PyObject_New(lane_fn_t, &write_type);
    if (sr == NULL || wr == NULL) {
        Py_XDECREF(sr);
        Py_XDECREF(wr);
        free(l);
        return NULL;
    }
    sr->lane = l;
    wr->lane = l;
    l->start_resp = (PyObject *)sr;
    l->write = (PyObject *)wr;
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

static int proto_set(const char *key, PyObject *v)
{
    int rc;

    if (v == NULL)
        return -1;
    rc = PyDict_SetItemString(proto, key, v);
    Py_DECREF(v);
    return rc;
}

int sl_wsgi_init(PyObject *the_app, sl_pump_t *p)
{
    size_t i;
    int k;

    app = the_app;
    Py_INCREF(app);
    pump = p;
    if (PyType_Ready(&errors_type) < 0 || PyType_Ready(&fw_type) < 0 ||
        PyType_Ready(&start_response_type) < 0 ||
        PyType_Ready(&write_type) < 0 || sl_wsgi_input_init() < 0)
        goto out_fail;
    for (i = 0; i < K_COUNT; i++)
        if ((keys[i] = PyUnicode_InternFromString(key_names[i])) == NULL)
            goto out_fail;
    for (i = 0; i < SL_HTTP_NCOMMON; i++) {
        const char *name = sl_http_common_names[i];
        if ((common_keys[i] = make_key(name, strlen(name))) == NULL)
            goto out_fail;
        PyUnicode_InternInPlace(&common_keys[i]);
    }
    if (sl_py_methods_init() < 0)
        goto out_fail;
    for (k = 0; k < p->nlisteners; k++) {
        listener_name[k] = PyUnicode_FromString(p->listeners[k].server_name);
        listener_port[k] = PyUnicode_FromString(p->listeners[k].server_port);
        if (listener_name[k] == NULL || listener_port[k] == NULL)
            goto out_fail;
    }
    errors_obj = PyObject_New(PyObject, &errors_type);
    proto = PyDict_New();
    if (errors_obj == NULL || proto == NULL)
        goto out_fail;
    Py_INCREF(errors_obj);
    if (proto_set("wsgi.version", Py_BuildValue("(ii)", 1, 0)) < 0 ||
        proto_set("wsgi.url_scheme", PyUnicode_FromString("http")) < 0 ||
        proto_set("wsgi.errors", errors_obj) < 0 ||
        proto_set("wsgi.multithread", PyBool_FromLong(p->opt->threads > 1)) <
            0 ||
        proto_set("wsgi.multiprocess", PyBool_FromLong(p->opt->workers > 1)) <
            0 ||
        proto_set("wsgi.run_once", PyBool_FromLong(0)) < 0 ||
        proto_set("wsgi.input_terminated", PyBool_FromLong(1)) < 0 ||
        proto_set("SCRIPT_NAME", PyUnicode_FromString("")) < 0)
        goto out_fail;
    Py_INCREF(&fw_type);
    if (proto_set("wsgi.file_wrapper", (PyObject *)&fw_type) < 0)
        goto out_fail;
    return 0;

out_fail:
    sl_py_log_exception("cannot set up WSGI");
    return -1;
}
