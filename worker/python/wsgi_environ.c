/* wsgi_environ.c - the environ of a WSGI request.
 *
 * Everything constant about an environ is built once: the keys are interned
 * from a table, the wsgi.* entries live in a prototype dict that each request
 * copies, and the common header names map to ready-made HTTP_* keys. Per
 * request what remains is the dict copy, a handful of small strings, and the
 * call. wsgi.errors, one object for every request, writes to the error log.
 *
 * A TLS connection's requests also get what mod_ssl and nginx call the
 * connection's TLS facts, by mod_ssl's names: HTTPS, SSL_PROTOCOL,
 * SSL_CIPHER, SSL_CLIENT_VERIFY and, when the client showed a
 * certificate, SSL_CLIENT_S_DN and SSL_CLIENT_CERT (docs/http.md). They
 * come from what the loop read off the handshake (sl_exch_tls()).
 */
#include "config.h"

#include <Python.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "worker/loop/http.h"
#include "worker/loop/transport.h"
#include "worker/python/py.h"
#include "worker/python/wsgi_input.h"
#include "worker/python/wsgi_internal.h"

static PyObject *proto; /* owned: the prototype environ */
static PyObject *listener_name[SL_MAX_LISTENERS]; /* owned: SERVER_NAME */
static PyObject *listener_port[SL_MAX_LISTENERS]; /* owned: SERVER_PORT */

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
    K_HTTP_2,
    K_EMPTY,
    K_URL_SCHEME,
    K_HTTPS,
    K_HTTP_HOST,
    K_HTTPS_VAR,
    K_ON,
    K_SSL_PROTOCOL,
    K_SSL_CIPHER,
    K_SSL_CLIENT_VERIFY,
    K_SSL_CLIENT_S_DN,
    K_SSL_CLIENT_CERT,
    K_NONE,
    K_SUCCESS,
    K_COUNT
};
static const char *const key_names[K_COUNT] = {
    "REQUEST_METHOD",
    "SCRIPT_NAME",
    "PATH_INFO",
    "QUERY_STRING",
    "CONTENT_TYPE",
    "CONTENT_LENGTH",
    "SERVER_NAME",
    "SERVER_PORT",
    "SERVER_PROTOCOL",
    "REMOTE_ADDR",
    "REMOTE_PORT",
    "RAW_URI",
    "wsgi.input",
    "HTTP/1.0",
    "HTTP/1.1",
    "HTTP/2",
    "",
    "wsgi.url_scheme",
    "https",
    "HTTP_HOST",
    "HTTPS",
    "on",
    "SSL_PROTOCOL",
    "SSL_CIPHER",
    "SSL_CLIENT_VERIFY",
    "SSL_CLIENT_S_DN",
    "SSL_CLIENT_CERT",
    "NONE",
    "SUCCESS",
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
/* environ                                                            */

/* ENV[KEY] = V, a new reference this takes (NULL: the error it raised). */
static int set_new(PyObject *env, PyObject *key, PyObject *v)
{
    int rc;

    if (v == NULL)
        return -1;
    rc = PyDict_SetItem(env, key, v);
    Py_DECREF(v);
    return rc;
}

static int set_str(PyObject *env, PyObject *key, const char *s, Py_ssize_t n)
{
    return set_new(env, key, PyUnicode_DecodeLatin1(s, n, NULL));
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

/* ENV[KEY] = S (UTF-8, never NULL). */
static int set_utf8(PyObject *env, PyObject *key, const char *s, size_t n)
{
    return set_new(env, key, PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, "replace"));
}

/* The client certificate's check: SUCCESS, NONE (none shown) or
 * FAILED:why, as mod_ssl says it. */
static int set_verify(PyObject *env, const sl_tls_info_t *ti)
{
    char why[256];
    int n;

    if (ti->client_chain == NULL && ti->client_name == NULL)
        return PyDict_SetItem(env, keys[K_SSL_CLIENT_VERIFY], keys[K_NONE]);
    if (ti->client_error == NULL)
        return PyDict_SetItem(env, keys[K_SSL_CLIENT_VERIFY], keys[K_SUCCESS]);
    n = snprintf(why, sizeof(why), "FAILED:%s", ti->client_error);
    return set_utf8(env, keys[K_SSL_CLIENT_VERIFY], why,
                    n < (int)sizeof(why) ? (size_t)n : sizeof(why) - 1);
}

/* What C's TLS connection says of itself: HTTPS=on (as CGI servers and
 * nginx's $https mean it: the connection's, never a proxy's word), and
 * mod_ssl's SSL_* variables. */
static int set_tls(PyObject *env, const sl_exch_t *c)
{
    static const char end[] = "-----END CERTIFICATE-----\n";
    const sl_tls_info_t *ti = sl_exch_tls(c);
    const char *cert;

    if (PyDict_SetItem(env, keys[K_HTTPS_VAR], keys[K_ON]) < 0)
        return -1;
    if (ti == NULL)
        return 0;
    if (set_utf8(env, keys[K_SSL_PROTOCOL], ti->protocol,
                 strlen(ti->protocol)) < 0 ||
        (ti->cipher_name != NULL &&
         set_utf8(env, keys[K_SSL_CIPHER], ti->cipher_name,
                  strlen(ti->cipher_name)) < 0) ||
        set_verify(env, ti) < 0 ||
        (ti->client_name != NULL &&
         set_utf8(env, keys[K_SSL_CLIENT_S_DN], ti->client_name,
                  strlen(ti->client_name)) < 0))
        return -1;
    /* the client's own certificate: the first block of the chain */
    cert = ti->client_chain != NULL ? strstr(ti->client_chain, end) : NULL;
    if (cert != NULL &&
        set_utf8(env, keys[K_SSL_CLIENT_CERT], ti->client_chain,
                 (size_t)(cert - ti->client_chain) + sizeof(end) - 1) < 0)
        return -1;
    return 0;
}

/* What a trusted proxy says the client asked for (forwarded.h): its Host
 * as HTTP_HOST, that host's name as SERVER_NAME, and the port. After the
 * headers, whose Host it replaces. */
static int set_forwarded_host(PyObject *env, const sl_client_t *cl)
{
    char port[8];
    int n;

    if (cl->host[0] != '\0' &&
        (set_str(env, keys[K_HTTP_HOST], cl->host,
                 (Py_ssize_t)strlen(cl->host)) < 0 ||
         set_str(env, keys[K_SERVER_NAME], cl->host + cl->name_off,
                 cl->name_len) < 0))
        return -1;
    if (cl->server_port > 0) {
        n = snprintf(port, sizeof(port), "%d", cl->server_port);
        if (set_str(env, keys[K_SERVER_PORT], port, n) < 0)
            return -1;
    }
    return 0;
}

PyObject *sl_wsgi_environ_new(sl_exch_t *c, uint32_t gen)
{
    const sl_req_t *r = &c->req;
    const char *url = r->hbuf.data + r->url_off;
    size_t n = r->url_len;
    sl_target_t t;
    PyObject *env, *input, *v;
    int li = sl_exch_listener(c);

    env = PyDict_Copy(proto);
    if (env == NULL)
        return NULL;
    if (sl_py_set_method(env, keys[K_REQUEST_METHOD], r) < 0 ||
        PyDict_SetItem(env, keys[K_SERVER_PROTOCOL],
                       keys[r->major == 2 ? K_HTTP_2
                            : r->minor    ? K_HTTP_1_1
                                          : K_HTTP_1_0]) < 0 ||
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

    /* the prototype says "http"; TLS or a trusted proxy may say otherwise */
    if (sl_req_client(r)->https &&
        PyDict_SetItem(env, keys[K_URL_SCHEME], keys[K_HTTPS]) < 0)
        goto out_fail;
    if (r->tls && set_tls(env, c) < 0)
        goto out_fail;
    if (sl_py_has_client(c)) {
        PyObject *addr, *port;
        if (sl_py_peer(c, &addr, &port, NULL) < 0 ||
            PyDict_SetItem(env, keys[K_REMOTE_ADDR], addr) < 0 ||
            PyDict_SetItem(env, keys[K_REMOTE_PORT], port) < 0)
            goto out_fail;
    }
    if (set_headers(env, r) < 0 ||
        set_forwarded_host(env, sl_req_client(r)) < 0)
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
/* set-up                                                             */

static int proto_set(const char *key, PyObject *v)
{
    int rc;

    if (v == NULL)
        return -1;
    rc = PyDict_SetItemString(proto, key, v);
    Py_DECREF(v);
    return rc;
}

int sl_wsgi_environ_init(sl_pump_t *p)
{
    PyObject *errors;
    size_t i;
    int k;

    if (PyType_Ready(&errors_type) < 0 || sl_wsgi_input_init() < 0 ||
        sl_py_methods_init() < 0)
        return -1;
    for (i = 0; i < K_COUNT; i++)
        if ((keys[i] = PyUnicode_InternFromString(key_names[i])) == NULL)
            return -1;
    for (i = 0; i < SL_HTTP_NCOMMON; i++) {
        const char *name = sl_http_common_names[i];
        if ((common_keys[i] = make_key(name, strlen(name))) == NULL)
            return -1;
        PyUnicode_InternInPlace(&common_keys[i]);
    }
    for (k = 0; k < sl_pump_nlisteners(p); k++) {
        listener_name[k] =
            PyUnicode_FromString(sl_pump_listener(p, k)->server_name);
        listener_port[k] =
            PyUnicode_FromString(sl_pump_listener(p, k)->server_port);
        if (listener_name[k] == NULL || listener_port[k] == NULL)
            return -1;
    }
    errors = PyObject_New(PyObject, &errors_type);
    proto = PyDict_New();
    if (errors == NULL || proto == NULL) {
        Py_XDECREF(errors);
        return -1;
    }
    Py_INCREF(&sl_wsgi_file_type);
    if (proto_set("wsgi.version", Py_BuildValue("(ii)", 1, 0)) < 0 ||
        proto_set("wsgi.url_scheme", PyUnicode_FromString("http")) < 0 ||
        proto_set("wsgi.errors", errors) < 0 ||
        proto_set("wsgi.multithread",
                  PyBool_FromLong(sl_pump_options(p)->threads > 1)) < 0 ||
        proto_set("wsgi.multiprocess",
                  PyBool_FromLong(sl_pump_options(p)->workers > 1)) < 0 ||
        proto_set("wsgi.run_once", PyBool_FromLong(0)) < 0 ||
        proto_set("wsgi.input_terminated", PyBool_FromLong(1)) < 0 ||
        proto_set("SCRIPT_NAME", PyUnicode_FromString("")) < 0 ||
        proto_set("wsgi.file_wrapper", (PyObject *)&sl_wsgi_file_type) < 0)
        return -1;
    return 0;
}
