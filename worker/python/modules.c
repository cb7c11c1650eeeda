/* modules.c - --reload: the worker reports the files of its modules.
 *
 * The list is sys.modules' __file__ values, less what lives under the
 * standard library's directories or in a site-packages / dist-packages
 * directory, written to the directory the supervisor named in
 * SLUICE_RELOAD_DIR. The supervisor needs the directories, not the
 * modules: it watches those for any .py file that changes.
 *
 * Later imports (a view module imported on the first request) are found
 * by a daemon thread that looks at len(sys.modules) once a second and
 * writes the list again when it has changed. It is a Python thread, not a
 * look from the loop thread's heartbeat, because the loop thread never
 * takes the GIL; it costs one GIL round trip a second, and only under
 * --reload.
 */
#include "config.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "worker/python/modules.h"
#include "worker/python/py.h"

#define RECHECK_EVERY 1.0 /* seconds between looks at sys.modules */

static char report_dir[PATH_MAX]; /* "" until sl_modules_report() */
static Py_ssize_t reported;       /* len(sys.modules) at the last report */

static int write_report(void);
static int start_watcher(void);

int sl_modules_report(const char *dir, bool watch)
{
    int n = snprintf(report_dir, sizeof(report_dir), "%s", dir);

    if (n < 0 || (size_t)n >= sizeof(report_dir)) {
        sl_warn("--reload: the report directory's name is too long");
        report_dir[0] = '\0';
        return -1;
    }
    if (write_report() < 0)
        return -1;
    return watch ? start_watcher() : 0;
}

/* The standard library's directories (sysconfig's stdlib and platstdlib),
 * each with a trailing '/', into OUT; "" for one that cannot be had. */
static void stdlib_dirs(char out[2][PATH_MAX])
{
    static const char *const names[2] = {"stdlib", "platstdlib"};
    PyObject *sysconfig = PyImport_ImportModule("sysconfig");

    for (int i = 0; i < 2; i++) {
        PyObject *p = NULL;
        const char *s = NULL;
        out[i][0] = '\0';
        if (sysconfig != NULL)
            p = PyObject_CallMethod(sysconfig, "get_path", "s", names[i]);
        if (p != NULL && PyUnicode_Check(p))
            s = PyUnicode_AsUTF8(p);
        if (s != NULL)
            snprintf(out[i], PATH_MAX, "%s/", s);
        Py_XDECREF(p);
        PyErr_Clear();
    }
    Py_XDECREF(sysconfig);
}

/* Whether a module file at PATH is the app's rather than Python's own or
 * an installed package's. */
static bool is_app_file(const char *path, char std[2][PATH_MAX])
{
    for (int i = 0; i < 2; i++)
        if (std[i][0] != '\0' && strncmp(path, std[i], strlen(std[i])) == 0)
            return false;
    return strstr(path, "/site-packages/") == NULL &&
           strstr(path, "/dist-packages/") == NULL;
}

/* MODULE's __file__ as a C string, or NULL (built-in, namespace package,
 * or not a str). Borrowed from *KEEP, which the caller releases. */
static const char *module_file(PyObject *module, PyObject **keep)
{
    const char *s = NULL;

    *keep = PyObject_GetAttrString(module, "__file__");
    if (*keep != NULL && PyUnicode_Check(*keep))
        s = PyUnicode_AsUTF8(*keep);
    PyErr_Clear();
    return s;
}

static int write_modules(FILE *f, PyObject *modules, const char *cwd)
{
    char std[2][PATH_MAX];
    Py_ssize_t n = PyList_GET_SIZE(modules);

    stdlib_dirs(std);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *keep;
        const char *file = module_file(PyList_GET_ITEM(modules, i), &keep);
        char abs[PATH_MAX * 2];
        if (file != NULL) {
            snprintf(abs, sizeof(abs), "%s%s%s", file[0] == '/' ? "" : cwd,
                     file[0] == '/' ? "" : "/", file);
            if (is_app_file(abs, std) && strchr(abs, '\n') == NULL)
                fprintf(f, "%s\n", abs);
        }
        Py_XDECREF(keep);
    }
    return ferror(f) ? -1 : 0;
}

static int write_report(void)
{
    char tmp[PATH_MAX + 40], path[PATH_MAX + 32], cwd[PATH_MAX];
    PyObject *sysmods = PySys_GetObject("modules"); /* borrowed */
    PyObject *modules;
    FILE *f;
    int rc;

    if (sysmods == NULL || !PyDict_Check(sysmods) ||
        getcwd(cwd, sizeof(cwd)) == NULL) {
        sl_warn("--reload: cannot list the imported modules");
        return -1;
    }
    /* a copy: looking up __file__ may run code that imports */
    reported = PyDict_GET_SIZE(sysmods);
    modules = PyDict_Values(sysmods);
    if (modules == NULL) {
        sl_py_log_exception("--reload: cannot list the imported modules");
        return -1;
    }
    snprintf(path, sizeof(path), "%s/%ld", report_dir, (long)getpid());
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    if (f == NULL) {
        sl_log_errno(SL_LOG_WARNING, "--reload: cannot write %s", tmp);
        Py_DECREF(modules);
        return -1;
    }
    rc = write_modules(f, modules, cwd);
    Py_DECREF(modules);
    if (fclose(f) != 0 || rc < 0 || rename(tmp, path) < 0) {
        sl_log_errno(SL_LOG_WARNING, "--reload: cannot write %s", path);
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* The watcher thread's look: a new report when sys.modules changed size. */
static PyObject *recheck(PyObject *self, PyObject *unused)
{
    PyObject *sysmods = PySys_GetObject("modules"); /* borrowed */

    (void)self;
    (void)unused;
    if (sysmods != NULL && PyDict_Check(sysmods) &&
        PyDict_GET_SIZE(sysmods) != reported)
        write_report();
    Py_RETURN_NONE;
}

static PyMethodDef recheck_def = {"recheck", recheck, METH_NOARGS, NULL};

/* start(check, every): a daemon thread calling check() every few seconds.
 * Daemon: it must not hold up the worker's exit. */
static const char watcher_src[] =
    "import threading, time\n"
    "def start(check, every):\n"
    "    def run():\n"
    "        while True:\n"
    "            time.sleep(every)\n"
    "            check()\n"
    "    threading.Thread(target=run, name='sluice-reload',\n"
    "                     daemon=True).start()\n";

static int start_watcher(void)
{
    PyObject *globals, *ran = NULL, *check = NULL, *started = NULL;
    PyObject *start;

    globals = PyDict_New();
    if (globals == NULL ||
        PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) < 0)
        goto out;
    ran = PyRun_String(watcher_src, Py_file_input, globals, globals);
    if (ran == NULL)
        goto out;
    start = PyDict_GetItemString(globals, "start"); /* borrowed */
    check = PyCFunction_New(&recheck_def, NULL);
    if (start == NULL || check == NULL)
        goto out;
    started = PyObject_CallFunction(start, "Od", check, RECHECK_EVERY);
out:
    if (started == NULL)
        sl_py_log_exception("--reload: cannot watch for later imports");
    Py_XDECREF(started);
    Py_XDECREF(check);
    Py_XDECREF(ran);
    Py_XDECREF(globals);
    return started == NULL ? -1 : 0;
}
