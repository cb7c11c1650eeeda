/* asgi_scope.c - the http scope of an ASGI request, built in C.
 *
 * What never changes (type, asgi, scheme, root_path, extensions) sits in a
 * prototype dict made once; a request copies it and adds its own parts from
 * the parsed head: method, path, query, headers with their names in lower
 * case (the common names are shared objects), client and server. The
 * client tuple is made once per connection (sl_py_peer()).
 */
#include "config.h"

#include <Python.h>
#include <stdlib.h>
#include <string.h>

#include "worker/python/asgi_scope.h"
#include "worker/loop/http.h"
#include "worker/python/py.h"

/* Interned names, built once from this table. */
enum {
    K_TYPE,
    K_ASGI,
    K_HTTP_VERSION,
    K_METHOD,
    K_SCHEME,
    K_PATH,
    K_RAW_PATH,
    K_QUERY_STRING,
    K_ROOT_PATH,
    K_HEADERS,
    K_CLIENT,
    K_SERVER,
    K_STATE,
    K_EXTENSIONS,
    K_HTTP,
    K_1_0,
    K_1_1,
    K_COUNT
};
static const char *const key_names[K_COUNT] = {
    "type",     "asgi",         "http_version", "method",  "scheme", "path",
    "raw_path", "query_string", "root_path",    "headers", "client", "server",
    "state",    "extensions",   "http",         "1.0",     "1.1",
};
static PyObject *names[K_COUNT];

/* sl_http_common_names as the scope has them (bytes), made once. */
static PyObject *common_names[SL_HTTP_NCOMMON];

/* What every scope is made from. */
static struct {
    PyObject *proto;                    /* owned: the prototype scope */
    PyObject *server[SL_MAX_LISTENERS]; /* owned: (host, port) or None */
    PyObject *empty;                    /* owned: b"" */
} parts;

static int set_steal(PyObject *d, PyObject *key, PyObject *v)
{
    int rc;

    if (v == NULL)
        return -1;
    rc = PyDict_SetItem(d, key, v);
    Py_DECREF(v);
    return rc;
}

/* A header name in lower case, as bytes (shared for the common ones). */
static PyObject *header_name(const char *name, size_t n)
{
    char stackbuf[256], *low = stackbuf;
    size_t i;
    PyObject *b;
    int k = sl_http_common_index(name, n);

    if (k >= 0)
        return Py_NewRef(common_names[k]);
    if (n > sizeof(stackbuf) && (low = malloc(n)) == NULL)
        return PyErr_NoMemory();
    for (i = 0; i < n; i++)
        low[i] =
            (name[i] >= 'A' && name[i] <= 'Z') ? (char)(name[i] + 32) : name[i];
    b = PyBytes_FromStringAndSize(low, (Py_ssize_t)n);
    if (low != stackbuf)
        free(low);
    return b;
}

static PyObject *scope_headers(const sl_req_t *q)
{
    const char *hb = q->hbuf.data;
    PyObject *list = PyList_New(q->nhdrs), *t, *name, *val;
    int i;

    if (list == NULL)
        return NULL;
    for (i = 0; i < q->nhdrs; i++) {
        const sl_hdr_t *hd = &q->hdrs[i];
        name = header_name(hb + hd->name_off, hd->name_len);
        val = PyBytes_FromStringAndSize(hb + hd->val_off, hd->val_len);
        t = PyTuple_New(2);
        if (name == NULL || val == NULL || t == NULL) {
            Py_XDECREF(name);
            Py_XDECREF(val);
            Py_XDECREF(t);
            Py_DECREF(list);
            return NULL;
        }
        PyTuple_SET_ITEM(t, 0, name);
        PyTuple_SET_ITEM(t, 1, val);
        PyList_SET_ITEM(list, i, t);
    }
    return list;
}

static PyObject *scope_client(const sl_conn_t *c)
{
    PyObject *client;

    if (c->peer.ss_family != AF_INET && c->peer.ss_family != AF_INET6)
        Py_RETURN_NONE;
    if (sl_py_peer(c, NULL, NULL, &client) < 0)
        return NULL;
    return Py_NewRef(client);
}

PyObject *sl_asgi_scope_new(const sl_conn_t *c, PyObject *state)
{
    const sl_req_t *q = &c->req;
    sl_target_t t;
    PyObject *scope = PyDict_Copy(parts.proto);

    if (scope == NULL)
        return NULL;
    sl_http_target(q->hbuf.data + q->url_off, q->url_len, &t);
    if (PyDict_SetItem(scope, names[K_HTTP_VERSION],
                       names[q->minor ? K_1_1 : K_1_0]) < 0 ||
        PyDict_SetItem(scope, names[K_METHOD], sl_py_method(q->method)) < 0 ||
        set_steal(scope, names[K_PATH],
                  sl_py_unquote_path(t.path, t.path_len, true)) < 0 ||
        set_steal(scope, names[K_RAW_PATH],
                  PyBytes_FromStringAndSize(t.path, (Py_ssize_t)t.path_len)) <
            0 ||
        set_steal(scope, names[K_QUERY_STRING],
                  t.query ? PyBytes_FromStringAndSize(t.query,
                                                      (Py_ssize_t)t.query_len)
                          : Py_NewRef(parts.empty)) < 0 ||
        set_steal(scope, names[K_HEADERS], scope_headers(q)) < 0 ||
        set_steal(scope, names[K_CLIENT], scope_client(c)) < 0 ||
        PyDict_SetItem(scope, names[K_SERVER], parts.server[c->listener]) < 0 ||
        (state != NULL &&
         set_steal(scope, names[K_STATE], PyDict_Copy(state)) < 0)) {
        Py_DECREF(scope);
        return NULL;
    }
    return scope;
}

bool sl_asgi_scope_is_websocket(const sl_req_t *q)
{
    int i;

    for (i = 0; i < q->nhdrs; i++) {
        const sl_hdr_t *hd = &q->hdrs[i];
        if (sl_http_name_is(q->hbuf.data + hd->name_off, hd->name_len,
                            "upgrade") &&
            hd->val_len == 9 &&
            sl_http_name_is(q->hbuf.data + hd->val_off, 9, "websocket"))
            return true;
    }
    return false;
}

/* The parts of every scope that never change. */
static int init_proto(const sl_pump_t *p)
{
    PyObject *asgi, *ext;
    int k, rc;

    parts.proto = PyDict_New();
    asgi = Py_BuildValue("{ssss}", "version", "3.0", "spec_version", "2.3");
    ext = Py_BuildValue("{s{}s{}}", "http.response.pathsend",
                        "http.response.trailers");
    if (parts.proto == NULL || asgi == NULL || ext == NULL) {
        Py_XDECREF(asgi);
        Py_XDECREF(ext);
        return -1;
    }
    rc = PyDict_SetItem(parts.proto, names[K_TYPE], names[K_HTTP]) < 0 ||
         set_steal(parts.proto, names[K_ASGI], asgi) < 0 ||
         PyDict_SetItem(parts.proto, names[K_SCHEME], names[K_HTTP]) < 0 ||
         set_steal(parts.proto, names[K_ROOT_PATH],
                   PyUnicode_FromString(p->opt->root_path)) < 0 ||
         set_steal(parts.proto, names[K_EXTENSIONS], ext) < 0;
    if (rc)
        return -1;
    for (k = 0; k < p->nlisteners; k++) {
        if (p->listeners[k].unix_sock)
            parts.server[k] = Py_NewRef(Py_None);
        else
            parts.server[k] = Py_BuildValue("(si)", p->listeners[k].server_name,
                                            atoi(p->listeners[k].server_port));
        if (parts.server[k] == NULL)
            return -1;
    }
    return 0;
}

static int init_names(void)
{
    size_t i;

    for (i = 0; i < K_COUNT; i++)
        if ((names[i] = PyUnicode_InternFromString(key_names[i])) == NULL)
            return -1;
    for (i = 0; i < SL_HTTP_NCOMMON; i++) {
        common_names[i] = PyBytes_FromString(sl_http_common_names[i]);
        if (common_names[i] == NULL)
            return -1;
    }
    if (sl_py_methods_init() < 0)
        return -1;
    parts.empty = PyBytes_FromStringAndSize(NULL, 0);
    return parts.empty != NULL ? 0 : -1;
}

int sl_asgi_scope_init(const sl_pump_t *p)
{
    return init_names() < 0 || init_proto(p) < 0 ? -1 : 0;
}
