/* py.c - interpreter start-up, app import, GIL helpers.
 *
 * The worker configures CPython with PyConfig rather than environment
 * tricks: a --venv becomes the interpreter's executable (so getpath finds
 * pyvenv.cfg and site adds the venv's site-packages exactly as the venv's own
 * python would), --pythonpath and --chdir go in front of sys.path like
 * gunicorn's, and Python's signal handlers stay out: the loop thread owns
 * the signals.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "worker/loop/http.h"
#include "worker/loop/reqline.h"
#include "worker/loop/pump.h"
#include "worker/python/py.h"
#include "worker/python/writer.h"

static int prepend_path(PyConfig *cfg, const char *dir)
{
    wchar_t *w = Py_DecodeLocale(dir, NULL);
    PyStatus st;

    if (w == NULL)
        return -1;
    st = PyWideStringList_Insert(&cfg->module_search_paths, 0, w);
    PyMem_RawFree(w);
    return PyStatus_Exception(st) ? -1 : 0;
}

static int add_sys_path(const char *dir)
{
    PyObject *path = PySys_GetObject("path"); /* borrowed */
    PyObject *s;
    int rc;

    if (path == NULL)
        return -1;
    s = PyUnicode_DecodeFSDefault(dir);
    if (s == NULL)
        return -1;
    rc = PyList_Insert(path, 0, s);
    Py_DECREF(s);
    return rc;
}

int sl_py_init(const sl_options_t *o)
{
    PyConfig cfg;
    PyStatus st;
    char exe[4096], cwd[4096];
    int i;

    (void)prepend_path;
    PyConfig_InitPythonConfig(&cfg);
    cfg.install_signal_handlers = 0;
    cfg.parse_argv = 0;
    cfg.buffered_stdio = 0;
    if (o->venv != NULL) {
        snprintf(exe, sizeof(exe), "%s/bin/python3", o->venv);
        if (access(exe, X_OK) != 0) {
            sl_error("--venv %s: no bin/python3 in it", o->venv);
            PyConfig_Clear(&cfg);
            return -1;
        }
        st = PyConfig_SetBytesString(&cfg, &cfg.program_name, exe);
        if (PyStatus_Exception(st))
            goto out_fail;
    }
    st = Py_InitializeFromConfig(&cfg);
    if (PyStatus_Exception(st))
        goto out_fail;
    PyConfig_Clear(&cfg);

    /* tracebacks of every thread on a fatal signal, and on the SIGABRT the
     * supervisor sends a worker that stopped answering */
    if (PyRun_SimpleString(
            "import faulthandler, sys\n"
            "faulthandler.enable(sys.stderr, all_threads=True)\n") < 0)
        sl_warn("faulthandler could not be enabled");

    /* sys.path: the working directory first (like `python -m`), then each
     * --pythonpath in order, in front of everything else */
    if (getcwd(cwd, sizeof(cwd)) == NULL || add_sys_path(cwd) < 0)
        goto out_pyerr;
    for (i = o->npythonpath - 1; i >= 0; i--)
        if (add_sys_path(o->pythonpath[i]) < 0)
            goto out_pyerr;
    return 0;

out_fail:
    sl_error("cannot start Python: %s", st.err_msg ? st.err_msg : "?");
    PyConfig_Clear(&cfg);
    return -1;
out_pyerr:
    sl_py_log_exception("cannot set up sys.path");
    return -1;
}

/* "ExcType: message" for the exception VALUE of TYPE. */
static void exc_summary(PyObject *type, PyObject *value, char *out, size_t n)
{
    PyObject *s = NULL;
    const char *name = "?", *msg = "";

    if (type != NULL && PyType_Check(type))
        name = ((PyTypeObject *)type)->tp_name;
    if (value != NULL && (s = PyObject_Str(value)) != NULL)
        msg = PyUnicode_AsUTF8(s);
    if (msg == NULL)
        msg = "";
    snprintf(out, n, "%s%s%s", name, *msg ? ": " : "", msg);
    Py_XDECREF(s);
    PyErr_Clear(); /* str() of the value may have failed */
}

/* One error line, "WHAT: ExcType: message", for the current exception,
 * then its traceback to sys.stderr (the error log) when TRACEBACK, and
 * clear it. PyErr_Display(), not PyErr_Print(): a SystemExit raised by
 * the app is a failure to report here, not a request to exit. */
static void log_app_error(bool traceback, const char *what)
{
    PyObject *type, *value, *tb;
    char err[1024];

    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL)
        PyException_SetTraceback(value, tb);
    exc_summary(type, value, err, sizeof(err));
    sl_error("%s: %s", what, err);
    if (traceback && type != NULL)
        PyErr_Display(type, value, tb);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    PyErr_Clear();
}

/* O->app split: the module's name and the attribute path after the colon
 * ("application" when none) without a trailing "()" (gunicorn's spelling
 * of a factory, which sl_options_parse() turned into o->factory, having
 * refused anything inside the parentheses). */
static void split_app(const sl_options_t *o, char *mod, size_t nmod, char *attr,
                      size_t nattr)
{
    const char *colon = strchr(o->app, ':');
    size_t n;

    snprintf(mod, nmod, "%.*s",
             colon ? (int)(colon - o->app) : (int)strlen(o->app), o->app);
    snprintf(attr, nattr, "%s", colon ? colon + 1 : "application");
    n = strlen(attr);
    if (n > 2 && strcmp(attr + n - 2, "()") == 0)
        attr[n - 2] = '\0';
}

/* MOD's attribute at the dotted PATH (a new reference), or NULL after
 * logging. */
static PyObject *lookup(PyObject *mod, const char *modname, const char *path)
{
    char buf[512], *dot, *save = NULL;
    PyObject *obj = Py_NewRef(mod);

    snprintf(buf, sizeof(buf), "%s", path);
    for (dot = strtok_r(buf, ".", &save); dot != NULL;
         dot = strtok_r(NULL, ".", &save)) {
        PyObject *next = PyObject_GetAttrString(obj, dot);
        Py_DECREF(obj);
        if (next == NULL) {
            PyErr_Clear();
            sl_error("module '%s' has no attribute '%s'", modname, path);
            return NULL;
        }
        obj = next;
    }
    return obj;
}

/* The app FACTORY (named NAME in logs) makes: a new reference to a
 * callable, or NULL after one error line (and the traceback of what it
 * raised). Takes FACTORY's reference. */
static PyObject *call_factory(PyObject *factory, const char *name)
{
    PyObject *app = PyObject_CallNoArgs(factory);
    char what[700];

    Py_DECREF(factory);
    if (app == NULL) {
        snprintf(what, sizeof(what), "the app factory '%s()' raised", name);
        log_app_error(true, what);
        return NULL;
    }
    if (!PyCallable_Check(app)) {
        sl_error("'%s()' returned a %s, not a callable app", name,
                 Py_TYPE(app)->tp_name);
        Py_DECREF(app);
        return NULL;
    }
    return app;
}

PyObject *sl_py_load_app(const sl_options_t *o)
{
    char modname[256], attr[256], what[600];
    PyObject *mod, *obj;

    split_app(o, modname, sizeof(modname), attr, sizeof(attr));

    mod = PyImport_ImportModule(modname);
    if (mod == NULL) {
        /* --reload: a developer's edit broke the import; the traceback
         * says where (without it: one line, for the service's log) */
        snprintf(what, sizeof(what), "cannot import module '%s'", modname);
        log_app_error(o->reload, what);
        return NULL;
    }
    obj = lookup(mod, modname, attr);
    Py_DECREF(mod);
    if (obj == NULL)
        return NULL;
    if (!PyCallable_Check(obj)) {
        sl_error("'%s:%s' is not callable", modname, attr);
        Py_DECREF(obj);
        return NULL;
    }
    snprintf(what, sizeof(what), "%s:%s", modname, attr);
    /* with --preload, once in the zygote: every worker shares its app */
    return o->factory ? call_factory(obj, what) : obj;
}

void sl_py_log_exception(const char *what, ...)
{
    char line[1024];
    va_list ap;

    va_start(ap, what);
    vsnprintf(line, sizeof(line), what, ap);
    va_end(ap);
    sl_error("%s", line);
    /* the traceback goes through sys.stderr, which is the error log */
    PyErr_PrintEx(0);
}

static PyThreadState *poll_tstate;

static void release_gil(struct ev_loop *loop)
{
    (void)loop;
    poll_tstate = PyEval_SaveThread();
}

static void acquire_gil(struct ev_loop *loop)
{
    (void)loop;
    PyEval_RestoreThread(poll_tstate);
}

void sl_py_release_gil_in_poll(struct ev_loop *loop)
{
    ev_set_loop_release_cb(loop, release_gil, acquire_gil);
}

int sl_py_serve_released(sl_pump_t *p, void **released)
{
    *released = PyEval_SaveThread();
    return sl_pump_run(p);
}

int sl_py_serve_holding(sl_pump_t *p, void **released)
{
    *released = NULL;
    return sl_pump_run(p);
}

static PyObject *decode(const char *p, size_t n, bool utf8)
{
    return utf8 ? PyUnicode_DecodeUTF8(p, (Py_ssize_t)n, "replace")
                : PyUnicode_DecodeLatin1(p, (Py_ssize_t)n, NULL);
}

PyObject *sl_py_unquote_path(const char *p, size_t n, bool utf8)
{
    char stackbuf[1024], *buf = stackbuf;
    PyObject *s;

    if (memchr(p, '%', n) == NULL)
        return decode(p, n, utf8);
    if (n > sizeof(stackbuf) && (buf = malloc(n)) == NULL)
        return PyErr_NoMemory();
    s = decode(buf, sl_http_unquote(p, n, buf), utf8);
    if (buf != stackbuf)
        free(buf);
    return s;
}

/* One slot per pooled connection, filled on a connection's first request.
 * An idle keep-alive connection keeps what is in its slot, so the slot
 * holds only what was asked for, and the address is shared (below). */
static struct peer_cache {
    uint32_t serial; /* of the connection the objects are for; 0 = none */
    uint32_t gen;    /* of the request, when a forwarding header named them */
    bool forwarded;  /* made from a forwarding header (per request) */
    int num;         /* the port */
    PyObject *addr, *port, *client; /* owned; port and client made when
                                       first asked for */
} * peers;
static uint32_t npeers;

/* The last address made into a str: the connections of one client (or of
 * one proxy) share it rather than each keeping a copy. */
static char last_text[SL_CLIENT_ADDR_MAX];
static PyObject *last_addr; /* owned */

static PyObject *addr_object(const char *text)
{
    PyObject *o;

    if (last_addr != NULL && strcmp(text, last_text) == 0)
        return Py_NewRef(last_addr);
    o = PyUnicode_FromString(text);
    if (o == NULL)
        return NULL;
    Py_XSETREF(last_addr, Py_NewRef(o));
    snprintf(last_text, sizeof(last_text), "%s", text);
    return o;
}

/* Fill PC for C. 0, or -1 with a Python exception. */
static int peer_fill(struct peer_cache *pc, const sl_exch_t *c, bool fwd)
{
    char text[SL_CLIENT_ADDR_MAX];

    Py_CLEAR(pc->addr);
    Py_CLEAR(pc->port);
    Py_CLEAR(pc->client);
    pc->serial = 0;
    pc->forwarded = fwd;
    pc->gen = c->gen;
    sl_exch_client(c, text, sizeof(text), &pc->num);
    pc->addr = addr_object(text);
    if (pc->addr == NULL)
        return -1;
    pc->serial = sl_exch_serial(c);
    return 0;
}

int sl_py_peer(const sl_exch_t *c, PyObject **addr, PyObject **port,
               PyObject **client)
{
    struct peer_cache *pc;
    bool fwd;

    if (peers == NULL) {
        peers = calloc(sl_pump_exch_max(sl_exch_pump(c)), sizeof(*peers));
        if (peers == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        npeers = sl_pump_exch_max(sl_exch_pump(c));
    }
    if (c->id >= npeers) {
        PyErr_SetString(PyExc_SystemError, "connection outside the pool");
        return -1;
    }
    pc = &peers[c->id];
    fwd = sl_req_client(&c->req)->addr[0] != '\0';
    /* serials start at 1: 0 is "none"; a forwarded client is the
     * request's, not the connection's */
    if ((pc->serial != sl_exch_serial(c) || pc->forwarded != fwd ||
         (fwd && pc->gen != c->gen)) &&
        peer_fill(pc, c, fwd) < 0)
        return -1;
    if (port != NULL && pc->port == NULL &&
        (pc->port = PyUnicode_FromFormat("%d", pc->num)) == NULL)
        return -1;
    if (client != NULL && pc->client == NULL &&
        (pc->client = Py_BuildValue("(Oi)", pc->addr, pc->num)) == NULL)
        return -1;
    if (addr != NULL)
        *addr = pc->addr;
    if (port != NULL)
        *port = pc->port;
    if (client != NULL)
        *client = pc->client;
    return 0;
}

/* Method names by llhttp's number; a power of two, so any number maps
 * into the table (llhttp's are below 64). */
#define NMETHODS 64
static PyObject *method_names[NMETHODS]; /* owned, one reference each */

int sl_py_methods_init(void)
{
    static const char *const known[NMETHODS] = {
#define XX(num, name, string) [num] = #string,
        HTTP_METHOD_MAP(XX)
#undef XX
    };
    size_t i;

    if (method_names[0] != NULL)
        return 0;
    for (i = 0; i < NMETHODS; i++) {
        method_names[i] =
            PyUnicode_InternFromString(known[i] ? known[i] : "UNKNOWN");
        if (method_names[i] == NULL) {
            sl_py_methods_free();
            return -1;
        }
    }
    return 0;
}

PyObject *sl_py_method(int method)
{
    return method_names[(unsigned)method & (NMETHODS - 1)];
}

int sl_py_set_method(PyObject *dict, PyObject *key, const sl_req_t *r)
{
    PyObject *v;
    size_t n;
    const char *m;
    int rc;

    if (r->method != SL_METHOD_OTHER)
        return PyDict_SetItem(dict, key, sl_py_method(r->method));
    m = sl_reqline_method_name(r, &n);
    v = PyUnicode_DecodeASCII(m, (Py_ssize_t)n, NULL); /* a token */
    if (v == NULL)
        return -1;
    rc = PyDict_SetItem(dict, key, v);
    Py_DECREF(v);
    return rc;
}

void sl_py_methods_free(void)
{
    size_t i;

    for (i = 0; i < NMETHODS; i++)
        Py_CLEAR(method_names[i]);
}

void sl_py_finalize(void)
{
    uint32_t i;

    sl_py_methods_free();

    for (i = 0; i < npeers; i++) {
        Py_CLEAR(peers[i].addr);
        Py_CLEAR(peers[i].port);
        Py_CLEAR(peers[i].client);
    }
    free(peers);
    peers = NULL;
    npeers = 0;
    Py_CLEAR(last_addr);
    sl_writer_lent_collect(); /* the loop has closed every connection */
    Py_FinalizeEx();
}
