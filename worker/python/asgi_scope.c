/* asgi_scope.c - the http and websocket scopes of an ASGI request, built
 * in C.
 *
 * What never changes (type, asgi, scheme, root_path, extensions) sits in a
 * prototype dict made once per scope type; a request copies its type's and
 * adds its own parts from the parsed head: path, query, headers with their
 * names in lower case (the common names are shared objects), client and
 * server - the same builder for both - then what only its type has: the
 * method (http), the subprotocols the client offers (websocket). The
 * client tuple is made once per connection (sl_py_peer()), or per request
 * when a trusted proxy's header names the client; such a header may also
 * make the scheme https or wss, and name the host and port the client
 * asked for, which become the server (the headers stay as sent).
 *
 * A TLS connection's scopes get the ASGI TLS extension, extensions["tls"]:
 * the prototypes share one extensions dict, so such a scope gets a copy
 * of it with "tls" added, made from what the loop read off the handshake
 * (sl_exch_tls()); a plain listener's requests never come near it.
 */
#include "config.h"

#include <Python.h>
#include <stdlib.h>
#include <string.h>

#include "worker/python/asgi_scope.h"
#include "worker/loop/http.h"
#include "worker/loop/transport.h"
#include "worker/python/dict_fill.h"
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
    K_WEBSOCKET,
    K_WS,
    K_SUBPROTOCOLS,
    K_1_0,
    K_1_1,
    K_2,
    K_HTTPS,
    K_WSS,
    K_TLS,
    K_SERVER_CERT,
    K_CLIENT_CERT_CHAIN,
    K_CLIENT_CERT_NAME,
    K_CLIENT_CERT_ERROR,
    K_TLS_VERSION,
    K_CIPHER_SUITE,
    K_COUNT
};
static const char *const key_names[K_COUNT] = {
    "type",
    "asgi",
    "http_version",
    "method",
    "scheme",
    "path",
    "raw_path",
    "query_string",
    "root_path",
    "headers",
    "client",
    "server",
    "state",
    "extensions",
    "http",
    "websocket",
    "ws",
    "subprotocols",
    "1.0",
    "1.1",
    "2",
    "https",
    "wss",
    "tls",
    "server_cert",
    "client_cert_chain",
    "client_cert_name",
    "client_cert_error",
    "tls_version",
    "cipher_suite",
};
static PyObject *names[K_COUNT];

/* sl_http_common_names as the scope has them (bytes), made once. */
static PyObject *common_names[SL_HTTP_NCOMMON];

/* Q's HTTP version as an index: 0 for 1.0, 1 for 1.1, 2 for 2. */
static int version_of(const sl_req_t *q)
{
    return q->major == 2 ? 2 : q->minor ? 1 : 0;
}

/* What every scope is made from. */
static struct {
    PyObject *proto;                    /* owned: the http prototype */
    PyObject *ws_proto;                 /* owned: the websocket prototype */
    PyObject *server[SL_MAX_LISTENERS]; /* owned: (host, port) or None */
    /* owned: the http prototype as most requests to listener L over
     * HTTP/1.0, 1.1 and 2 (version_of()) fill it in: its server, its
     * http_version, method GET and an empty query string already set, so a
     * request sets fewer keys */
    PyObject *http[SL_MAX_LISTENERS][3];
    PyObject *empty; /* owned: b"" */
    /* borrowed (the prototypes'): the extensions every http, and every
     * websocket, scope shares */
    PyObject *ext, *ws_ext;
    /* owned: the PEM text of the server certificate last shown, as str,
     * and the loop's text it was made from (sl_tls_info_t.server_cert,
     * which lives as long as the worker) */
    PyObject *server_pem;
    const char *server_pem_of;
    /* where each key's entry is in the http prototypes and their copies
     * (sl_py_dict_slot(); -1: not known) */
    Py_ssize_t slot[K_COUNT];
} parts;

/* SCOPE[names[K]] = V (stolen), SCOPE a copy of a prototype nobody else
 * has seen yet. 0, or -1 with an exception (V NULL: one is set). */
static int put(PyObject *scope, int k, PyObject *v)
{
    return sl_py_dict_put(scope, parts.slot[k], names[k], v);
}

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

static PyObject *scope_client(const sl_exch_t *c)
{
    PyObject *client;

    if (!sl_py_has_client(c))
        Py_RETURN_NONE;
    if (sl_py_peer(c, NULL, NULL, &client) < 0)
        return NULL;
    return Py_NewRef(client);
}

/* The listener's (host, port), or the one a trusted proxy names. */
static PyObject *scope_server(const sl_exch_t *c)
{
    const sl_client_t *cl = sl_req_client(&c->req);
    PyObject *server = parts.server[sl_exch_listener(c)];

    if (cl->server_port == 0)
        return Py_NewRef(server);
    if (cl->host[0] != '\0')
        return Py_BuildValue(
            "(Ni)",
            PyUnicode_DecodeLatin1(cl->host + cl->name_off, cl->name_len, NULL),
            cl->server_port);
    if (server == Py_None) /* a unix: socket has no name to go with it */
        return Py_NewRef(server);
    return Py_BuildValue("(Oi)", PyTuple_GET_ITEM(server, 0), cl->server_port);
}

/* S as str, or None when S is NULL. */
static PyObject *str_or_none(const char *s)
{
    if (s == NULL)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

/* The server certificate's PEM text PEM as str (None when unknown); the
 * last one is kept, as a worker serves one or a few. */
static PyObject *server_cert(const char *pem)
{
    if (pem == NULL)
        Py_RETURN_NONE;
    if (pem != parts.server_pem_of) {
        Py_CLEAR(parts.server_pem);
        parts.server_pem = str_or_none(pem);
        if (parts.server_pem == NULL)
            return NULL;
        parts.server_pem_of = pem;
    }
    return Py_NewRef(parts.server_pem);
}

/* The PEM blocks of CHAIN, one str each (an empty list for NULL). */
static PyObject *cert_chain(const char *chain)
{
    static const char end[] = "-----END CERTIFICATE-----\n";
    PyObject *list = PyList_New(0), *s;
    const char *p, *q;

    for (p = chain; list != NULL && p != NULL && (q = strstr(p, end)); p = q) {
        q += sizeof(end) - 1;
        s = PyUnicode_DecodeASCII(p, q - p, "replace");
        if (s == NULL || PyList_Append(list, s) < 0)
            Py_CLEAR(list);
        Py_XDECREF(s);
    }
    return list;
}

/* The ASGI TLS extension's dict for what TI says. */
static PyObject *tls_extension(const sl_tls_info_t *ti)
{
    PyObject *d = PyDict_New();

    if (d != NULL &&
        (set_steal(d, names[K_SERVER_CERT], server_cert(ti->server_cert)) < 0 ||
         set_steal(d, names[K_CLIENT_CERT_CHAIN],
                   cert_chain(ti->client_chain)) < 0 ||
         set_steal(d, names[K_CLIENT_CERT_NAME], str_or_none(ti->client_name)) <
             0 ||
         set_steal(d, names[K_CLIENT_CERT_ERROR],
                   str_or_none(ti->client_error)) < 0 ||
         set_steal(d, names[K_TLS_VERSION], PyLong_FromLong(ti->version)) < 0 ||
         set_steal(d, names[K_CIPHER_SUITE], PyLong_FromLong(ti->cipher)) < 0))
        Py_CLEAR(d);
    return d;
}

/* Does Q's scope need secure()? One over TLS, or one a trusted proxy
 * speaks for (it may say https or wss). Plain requests no proxy speaks
 * for, most of them, test no more than they always did. */
static inline bool is_secure(const sl_req_t *q)
{
    return q->client != NULL || q->tls;
}

/* SCOPE is a request of C that is_secure(): the scheme is SCHEME when
 * the client spoke https (wss) by the connection's or a trusted proxy's
 * word, and a TLS connection adds "tls" to a copy of EXT, the extensions
 * SCOPE shares with the others. 0, or -1 with an exception. */
static int secure(PyObject *scope, const sl_exch_t *c, int scheme,
                  PyObject *ext)
{
    const sl_tls_info_t *ti = sl_exch_tls(c);
    PyObject *own;

    if (sl_req_client(&c->req)->https &&
        PyDict_SetItem(scope, names[K_SCHEME], names[scheme]) < 0)
        return -1;
    if (ti == NULL)
        return 0;
    own = PyDict_Copy(ext);
    if (own == NULL || set_steal(own, names[K_TLS], tls_extension(ti)) < 0) {
        Py_XDECREF(own);
        return -1;
    }
    return set_steal(scope, names[K_EXTENSIONS], own);
}

/* A copy of PROTO with the parts of C's request both scope types have;
 * PRESET: PROTO is one of parts.http, for C's listener and version. */
static PyObject *scope_common(PyObject *proto, const sl_exch_t *c,
                              PyObject *state, bool preset)
{
    const sl_req_t *q = &c->req;
    sl_target_t t;
    PyObject *scope = PyDict_Copy(proto);

    if (scope == NULL)
        return NULL;
    sl_http_target(q->hbuf.data + q->url_off, q->url_len, &t);
    if ((!preset && put(scope, K_HTTP_VERSION,
                        Py_NewRef(names[K_1_0 + version_of(q)])) < 0) ||
        put(scope, K_PATH, sl_py_unquote_path(t.path, t.path_len, true)) < 0 ||
        put(scope, K_RAW_PATH,
            PyBytes_FromStringAndSize(t.path, (Py_ssize_t)t.path_len)) < 0 ||
        ((t.query || !preset) &&
         put(scope, K_QUERY_STRING,
             t.query
                 ? PyBytes_FromStringAndSize(t.query, (Py_ssize_t)t.query_len)
                 : Py_NewRef(parts.empty)) < 0) ||
        put(scope, K_HEADERS, scope_headers(q)) < 0 ||
        put(scope, K_CLIENT, scope_client(c)) < 0 ||
        ((!preset || sl_req_client(q)->server_port != 0) &&
         put(scope, K_SERVER, scope_server(c)) < 0) ||
        (state != NULL && put(scope, K_STATE, PyDict_Copy(state)) < 0)) {
        Py_DECREF(scope);
        return NULL;
    }
    return scope;
}

PyObject *sl_asgi_scope_new(const sl_exch_t *c, PyObject *state)
{
    const sl_req_t *q = &c->req;
    PyObject *scope = scope_common(
        parts.http[sl_exch_listener(c)][version_of(q)], c, state, true);

    if (scope != NULL &&
        ((q->method != HTTP_GET &&
          sl_py_set_method(scope, names[K_METHOD], q) < 0) ||
         (is_secure(q) && secure(scope, c, K_HTTPS, parts.ext) < 0)))
        Py_CLEAR(scope);
    return scope;
}

/* Append the comma-separated items of V[0..N) to LIST, trimmed of
 * spaces and tabs, empty ones skipped. 0, or -1 with an exception. */
static int split_tokens(PyObject *list, const char *v, size_t n)
{
    const char *item;
    size_t len;
    PyObject *s;

    while (sl_http_list_next(&v, &n, &item, &len)) {
        if (len == 0)
            continue;
        s = PyUnicode_DecodeLatin1(item, (Py_ssize_t)len, NULL);
        if (s == NULL || PyList_Append(list, s) < 0) {
            Py_XDECREF(s);
            return -1;
        }
        Py_DECREF(s);
    }
    return 0;
}

/* The subprotocols Q offers: every Sec-WebSocket-Protocol field, in
 * order, as one list of str. */
static PyObject *subprotocols(const sl_req_t *q)
{
    PyObject *list = PyList_New(0);
    const char *hb = q->hbuf.data;
    int i;

    if (list == NULL)
        return NULL;
    for (i = 0; i < q->nhdrs; i++) {
        const sl_hdr_t *hd = &q->hdrs[i];
        if (sl_http_name_is(hb + hd->name_off, hd->name_len,
                            "sec-websocket-protocol") &&
            split_tokens(list, hb + hd->val_off, hd->val_len) < 0) {
            Py_DECREF(list);
            return NULL;
        }
    }
    return list;
}

PyObject *sl_asgi_scope_new_ws(const sl_exch_t *c, PyObject *state)
{
    PyObject *scope = scope_common(parts.ws_proto, c, state, false);

    if (scope != NULL &&
        (set_steal(scope, names[K_SUBPROTOCOLS], subprotocols(&c->req)) < 0 ||
         (is_secure(&c->req) && secure(scope, c, K_WSS, parts.ws_ext) < 0)))
        Py_CLEAR(scope);
    return scope;
}

/* The keys a request sets, held as None in the prototypes: a copy then
 * has its full size, and setting them replaces values in place instead of
 * growing the table twice (K_COUNT ends the list). */
static const int request_keys[] = {
    K_HTTP_VERSION, K_PATH,   K_RAW_PATH, K_QUERY_STRING,
    K_HEADERS,      K_CLIENT, K_SERVER,   K_COUNT,
};

/* A prototype scope of TYPE: the keys every scope of it has; OWN is the
 * one key only TYPE's requests set. Steals ASGI and EXT. NULL with an
 * exception. */
static PyObject *make_proto(const sl_pump_t *p, int type, int scheme, int own,
                            PyObject *asgi, PyObject *ext)
{
    PyObject *d = PyDict_New();
    int i;

    if (d == NULL || asgi == NULL || ext == NULL) {
        Py_XDECREF(d);
        Py_XDECREF(asgi);
        Py_XDECREF(ext);
        return NULL;
    }
    if (PyDict_SetItem(d, names[K_TYPE], names[type]) < 0 ||
        set_steal(d, names[K_ASGI], asgi) < 0 ||
        PyDict_SetItem(d, names[K_SCHEME], names[scheme]) < 0 ||
        set_steal(d, names[K_ROOT_PATH],
                  PyUnicode_FromString(sl_pump_options(p)->root_path)) < 0 ||
        set_steal(d, names[K_EXTENSIONS], ext) < 0 ||
        PyDict_SetItem(d, names[own], Py_None) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    for (i = 0; request_keys[i] != K_COUNT; i++)
        if (PyDict_SetItem(d, names[request_keys[i]], Py_None) < 0) {
            Py_DECREF(d);
            return NULL;
        }
    return d;
}

/* Where the keys are in parts.proto, and so in its copies. */
static void find_slots(void)
{
    int k;

    for (k = 0; k < K_COUNT; k++)
        parts.slot[k] = sl_py_dict_slot(parts.proto, names[k]);
}

/* parts.http[L][V], from parts.proto and parts.server[L]. */
static PyObject *make_http_proto(int l, int v)
{
    PyObject *d = PyDict_Copy(parts.proto);
    sl_req_t get = {.method = HTTP_GET};

    if (d != NULL &&
        (PyDict_SetItem(d, names[K_SERVER], parts.server[l]) < 0 ||
         PyDict_SetItem(d, names[K_HTTP_VERSION], names[K_1_0 + v]) < 0 ||
         sl_py_set_method(d, names[K_METHOD], &get) < 0 ||
         PyDict_SetItem(d, names[K_QUERY_STRING], parts.empty) < 0))
        Py_CLEAR(d);
    return d;
}

/* The parts of every scope that never change. */
static int init_proto(const sl_pump_t *p)
{
    int k, m;

    parts.proto = make_proto(
        p, K_HTTP, K_HTTP, K_METHOD,
        Py_BuildValue("{ssss}", "version", "3.0", "spec_version", "2.3"),
        Py_BuildValue("{s{}s{}}", "http.response.pathsend",
                      "http.response.trailers"));
    parts.ws_proto = make_proto(
        p, K_WEBSOCKET, K_WS, K_SUBPROTOCOLS,
        Py_BuildValue("{ssss}", "version", "3.0", "spec_version", "2.4"),
        Py_BuildValue("{s{}}", "websocket.http.response"));
    if (parts.proto == NULL || parts.ws_proto == NULL)
        return -1;
    parts.ext = PyDict_GetItemWithError(parts.proto, names[K_EXTENSIONS]);
    parts.ws_ext = PyDict_GetItemWithError(parts.ws_proto, names[K_EXTENSIONS]);
    if (parts.ext == NULL || parts.ws_ext == NULL)
        return -1;
    find_slots();
    for (k = 0; k < sl_pump_nlisteners(p); k++) {
        if (sl_pump_listener(p, k)->unix_sock)
            parts.server[k] = Py_NewRef(Py_None);
        else
            parts.server[k] =
                Py_BuildValue("(si)", sl_pump_listener(p, k)->server_name,
                              atoi(sl_pump_listener(p, k)->server_port));
        if (parts.server[k] == NULL)
            return -1;
        for (m = 0; m < 3; m++)
            if ((parts.http[k][m] = make_http_proto(k, m)) == NULL)
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

int sl_asgi_scope_state(void)
{
    int l, m;

    /* every prototype gets the key at its end, where find_slots() sees it
     * in parts.proto */
    if (PyDict_SetItem(parts.proto, names[K_STATE], Py_None) < 0 ||
        PyDict_SetItem(parts.ws_proto, names[K_STATE], Py_None) < 0)
        return -1;
    for (l = 0; l < SL_MAX_LISTENERS; l++)
        for (m = 0; m < 3; m++)
            if (parts.http[l][m] != NULL &&
                PyDict_SetItem(parts.http[l][m], names[K_STATE], Py_None) < 0)
                return -1;
    find_slots();
    return 0;
}

int sl_asgi_scope_init(const sl_pump_t *p)
{
    return init_names() < 0 || init_proto(p) < 0 ? -1 : 0;
}
