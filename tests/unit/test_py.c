/* test_py.c - check suite for worker/py.c.
 *
 * Each test starts the interpreter the way a worker does (sl_py_init with
 * options parsed from an argv) in its own forked process, with real module
 * files in a temporary directory put on --pythonpath. The error log, where
 * the "one clear line" of a failure goes, is a temporary file.
 */
#include "config.h"

#include <check.h>
#include <signal.h>
#include <sys/stat.h>

#include "tests/unit/py_harness.h"
#include "worker/python/modules.h"

static sl_options_t opt;
static char dir[96]; /* modules live here */

static void put_file(const char *name, const char *text)
{
    char path[256];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void setup(void)
{
    snprintf(dir, sizeof(dir), "%s", h_test_dir());
    hp_log_to_file();
    put_file("mod_ok.py", "def app(environ, start_response):\n"
                          "    return [b'app']\n"
                          "application = app\n"
                          "class K:\n"
                          "    class Inner:\n"
                          "        @staticmethod\n"
                          "        def call(environ, start_response):\n"
                          "            return [b'inner']\n"
                          "value = 3\n");
    put_file("mod_bad.py", "x = 1\n"
                           "1 / 0\n");
}

/* Parse "sluice --pythonpath DIR [EXTRA] APP". */
static void options(const char *app, const char *extra)
{
    static char *argv[8];
    int argc = 0;

    argv[argc++] = "sluice";
    argv[argc++] = "--pythonpath";
    argv[argc++] = dir;
    if (extra != NULL)
        argv[argc++] = (char *)extra;
    argv[argc++] = (char *)app;
    argv[argc] = NULL;
    ck_assert_int_eq(sl_options_parse(&opt, argc, argv), 0);
}

/* How many lines of the log are at level ERROR. */
static int error_lines(void)
{
    int n = 0;

    for (const char *p = hp_log_text(); (p = strstr(p, "[ERROR]")); p++)
        n++;
    return n;
}

/* ------------------------------------------------------------------ */
/* start-up                                                           */

/* Is SIG one faulthandler takes (to dump tracebacks)? */
static bool fatal_signal(int sig)
{
    return sig == SIGSEGV || sig == SIGFPE || sig == SIGABRT || sig == SIGBUS ||
           sig == SIGILL;
}

START_TEST(test_init)
{
    char cwd[1024], want[2048];
    struct sigaction before[32], after;

    ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
    for (int sig = 1; sig < 32; sig++)
        sigaction(sig, NULL, &before[sig]);
    options("mod_ok:app", NULL);
    ck_assert_int_eq(sl_py_init(&opt), 0);
    ck_assert(Py_IsInitialized());
    /* the loop thread owns the signals: Python changed no disposition */
    for (int sig = 1; sig < 32; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP || fatal_signal(sig))
            continue;
        ck_assert_int_eq(sigaction(sig, NULL, &after), 0);
        ck_assert_msg(after.sa_handler == before[sig].sa_handler,
                      "Python took over signal %d", sig);
    }
    hp_module("probe", "import sys, faulthandler\n");
    /* --pythonpath first, then the working directory, like python -m */
    snprintf(want, sizeof(want), "['%s', '%s']", dir, cwd);
    ck_assert_str_eq(hp_eval("probe", "sys.path[:2]"), want);
    ck_assert_str_eq(hp_eval("probe", "faulthandler.is_enabled()"), "True");
    ck_assert_int_eq(error_lines(), 0);
}
END_TEST

START_TEST(test_pythonpath_order)
{
    char d2[128], arg[256], want[512];
    char *argv[] = {"sluice", "--pythonpath", arg, "mod_ok:app", NULL};

    snprintf(d2, sizeof(d2), "%s/second", dir);
    ck_assert_int_eq(mkdir(d2, 0700), 0);
    snprintf(arg, sizeof(arg), "%s,%s", dir, d2);
    ck_assert_int_eq(sl_options_parse(&opt, 4, argv), 0);
    ck_assert_int_eq(opt.npythonpath, 2);
    ck_assert_int_eq(sl_py_init(&opt), 0);
    hp_module("probe", "import sys\n");
    snprintf(want, sizeof(want), "['%s', '%s']", dir, d2);
    ck_assert_str_eq(hp_eval("probe", "sys.path[:2]"), want);
}
END_TEST

/* The working directory (after --chdir) is importable. */
START_TEST(test_cwd_on_path)
{
    char *argv[] = {"sluice", "here:app", NULL};

    ck_assert_int_eq(sl_options_parse(&opt, 2, argv), 0);
    ck_assert_int_eq(chdir(dir), 0);
    put_file("here.py", "def app(e, s):\n    return []\n");
    ck_assert_int_eq(sl_py_init(&opt), 0);
    PyObject *app = sl_py_load_app(&opt);
    hp_check(app, "import from the working directory");
    Py_DECREF(app);
}
END_TEST

START_TEST(test_venv_missing)
{
    options("mod_ok:app", "--venv=/nonexistent/venv");
    ck_assert_int_eq(sl_py_init(&opt), -1);
    ck_assert(!Py_IsInitialized());
    ck_assert_ptr_nonnull(strstr(
        hp_log_text(), "--venv /nonexistent/venv: no bin/python3 in it"));
    ck_assert_int_eq(error_lines(), 1);
}
END_TEST

/* A venv's site-packages is importable, as with the venv's own python. */
START_TEST(test_venv)
{
    char venv[128], path[256], arg[512];

    snprintf(venv, sizeof(venv), "%s/venv", dir);
    snprintf(path, sizeof(path), "%s/lib/python%d.%d/site-packages", venv,
             PY_MAJOR_VERSION, PY_MINOR_VERSION);
    snprintf(arg, sizeof(arg), "mkdir -p %s %s/bin", path, venv);
    ck_assert_int_eq(system(arg), 0);
    snprintf(arg, sizeof(arg), "%s/bin/python3", venv);
    ck_assert_int_eq(symlink("/usr/bin/python3", arg), 0);
    put_file("venv/pyvenv.cfg", "home = /usr/bin\n"
                                "include-system-site-packages = false\n");
    snprintf(arg, sizeof(arg), "venv/lib/python%d.%d/site-packages/in_venv.py",
             PY_MAJOR_VERSION, PY_MINOR_VERSION);
    put_file(arg, "def app(e, s):\n    return [b'venv']\n");
    snprintf(arg, sizeof(arg), "--venv=%s", venv);
    options("in_venv:app", arg);
    ck_assert_int_eq(sl_py_init(&opt), 0);
    hp_module("probe", "import sys\n");
    ck_assert_str_eq(hp_eval("probe", "sys.prefix"), venv);
    PyObject *app = sl_py_load_app(&opt);
    hp_check(app, "import from the venv");
    Py_DECREF(app);
}
END_TEST

/* ------------------------------------------------------------------ */
/* the app                                                            */

/* SPEC loads; calling the result with two Nones returns [WANT]. */
static void assert_loads(const char *spec, const char *want)
{
    PyObject *app, *r, *item;

    options(spec, NULL);
    ck_assert_int_eq(sl_py_init(&opt), 0);
    app = sl_py_load_app(&opt);
    hp_check(app, spec);
    r = PyObject_CallFunction(app, "OO", Py_None, Py_None);
    hp_check(r, spec);
    ck_assert(PyList_Check(r) && PyList_GET_SIZE(r) == 1);
    item = PyList_GET_ITEM(r, 0);
    ck_assert_str_eq(PyBytes_AsString(item), want);
    Py_DECREF(r);
    Py_DECREF(app);
    ck_assert_int_eq(error_lines(), 0);
}

START_TEST(test_load_app)
{
    assert_loads("mod_ok:app", "app");
}
END_TEST

/* "module" alone means module:application (the command line always
 * names the callable, so the spec is set directly). */
START_TEST(test_load_default_name)
{
    PyObject *app;

    options("mod_ok:app", NULL);
    ck_assert_int_eq(sl_py_init(&opt), 0);
    opt.app = "mod_ok";
    app = sl_py_load_app(&opt);
    hp_check(app, "mod_ok");
    hp_module("probe", "import mod_ok\n");
    ck_assert_ptr_eq(app, PyObject_GetAttrString(PyImport_AddModule("mod_ok"),
                                                 "application"));
    Py_DECREF(app);
}
END_TEST

START_TEST(test_load_dotted_attribute)
{
    assert_loads("mod_ok:K.Inner.call", "inner");
}
END_TEST

START_TEST(test_load_from_package)
{
    char sub[128];

    snprintf(sub, sizeof(sub), "%s/pkg", dir);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    put_file("pkg/__init__.py", "");
    put_file("pkg/web.py", "def app(e, s):\n    return [b'pkg']\n");
    assert_loads("pkg.web:app", "pkg");
}
END_TEST

static const struct {
    const char *spec;
    const char *line;
} load_errors[] = {
    {"nosuch:app",
     "cannot import module 'nosuch': ModuleNotFoundError: No module named "
     "'nosuch'"},
    {"mod_bad:app",
     "cannot import module 'mod_bad': ZeroDivisionError: division by zero"},
    {"mod_ok:nope", "module 'mod_ok' has no attribute 'nope'"},
    {"mod_ok:K.nope", "module 'mod_ok' has no attribute 'K.nope'"},
    {"mod_ok:value", "'mod_ok:value' is not callable"},
};

/* A bad app is one clear error line, and no Python error left behind. */
START_TEST(test_load_errors)
{
    options(load_errors[_i].spec, NULL);
    ck_assert_int_eq(sl_py_init(&opt), 0);
    ck_assert_ptr_null(sl_py_load_app(&opt));
    ck_assert_ptr_null(PyErr_Occurred());
    ck_assert_msg(strstr(hp_log_text(), load_errors[_i].line) != NULL,
                  "'%s' not in the log: %s", load_errors[_i].line,
                  hp_log_text());
    ck_assert_int_eq(error_lines(), 1);
}
END_TEST

/* Under --reload the failed import's line is followed by its traceback. */
START_TEST(test_load_error_traceback_under_reload)
{
    const char *log;

    options("mod_bad:app", "--reload");
    ck_assert_int_eq(sl_py_init(&opt), 0);
    ck_assert_ptr_null(sl_py_load_app(&opt));
    ck_assert_ptr_null(PyErr_Occurred());
    log = hp_log_text();
    ck_assert_ptr_nonnull(strstr(log, "cannot import module 'mod_bad': "
                                      "ZeroDivisionError: division by zero"));
    ck_assert_ptr_nonnull(strstr(log, "Traceback (most recent call last)"));
    ck_assert_ptr_nonnull(strstr(log, "mod_bad.py\", line 2"));
    ck_assert(strstr(log, "cannot import") < strstr(log, "Traceback"));
    ck_assert_int_eq(error_lines(), 1);
}
END_TEST

/* The text of the report sl_modules_report() wrote in RDIR. */
static const char *report_text(const char *rdir)
{
    char path[256];

    snprintf(path, sizeof(path), "%s/%ld", rdir, (long)getpid());
    return h_file_text(path);
}

/* --reload's report: the app's files, not Python's own; rewritten by its
 * thread once the app imports more. */
START_TEST(test_modules_report)
{
    char rdir[160], want[256], late[256];
    PyObject *app, *mod;
    double end;

    snprintf(rdir, sizeof(rdir), "%s/report", dir);
    ck_assert_int_eq(mkdir(rdir, 0700), 0);
    put_file("late_mod.py", "x = 1\n");
    options("mod_ok:app", "--reload");
    ck_assert_int_eq(sl_py_init(&opt), 0);
    app = sl_py_load_app(&opt);
    ck_assert_ptr_nonnull(app);
    Py_DECREF(app);
    ck_assert_int_eq(sl_modules_report(rdir, true), 0);
    snprintf(want, sizeof(want), "%s/mod_ok.py\n", dir);
    ck_assert_msg(strstr(report_text(rdir), want) != NULL, "%s not in: %s",
                  want, report_text(rdir));
    ck_assert_ptr_null(strstr(report_text(rdir), "/os.py"));
    ck_assert_ptr_null(strstr(report_text(rdir), "-packages/"));

    mod = PyImport_ImportModule("late_mod");
    hp_check(mod, "import late_mod");
    Py_DECREF(mod);
    snprintf(late, sizeof(late), "%s/late_mod.py\n", dir);
    end = h_now() + 5.0; /* the thread looks once a second */
    while (strstr(report_text(rdir), late) == NULL) {
        ck_assert_msg(h_now() < end, "late_mod.py never reported: %s",
                      report_text(rdir));
        Py_BEGIN_ALLOW_THREADS
        poll(NULL, 0, 10);
        Py_END_ALLOW_THREADS
    }
    ck_assert_ptr_nonnull(strstr(report_text(rdir), want));
}
END_TEST

/* ------------------------------------------------------------------ */
/* errors, the GIL, the end                                           */

START_TEST(test_log_exception)
{
    const char *log;

    options("mod_ok:app", NULL);
    ck_assert_int_eq(sl_py_init(&opt), 0);
    hp_module("failing", "def inner():\n"
                         "    raise ValueError('boom')\n");
    ck_assert_ptr_null(
        PyRun_String("inner()", Py_eval_input,
                     PyModule_GetDict(PyImport_AddModule("failing")),
                     PyModule_GetDict(PyImport_AddModule("failing"))));
    ck_assert_ptr_nonnull(PyErr_Occurred());
    sl_py_log_exception("error handling %s %d", "request", 7);
    ck_assert_ptr_null(PyErr_Occurred());
    log = hp_log_text();
    ck_assert_ptr_nonnull(strstr(log, "[ERROR] error handling request 7\n"));
    ck_assert_ptr_nonnull(strstr(log, "Traceback (most recent call last)"));
    ck_assert_ptr_nonnull(strstr(log, "in inner"));
    ck_assert_ptr_nonnull(strstr(log, "ValueError: boom"));
    /* the line comes before its traceback */
    ck_assert(strstr(log, "error handling request") < strstr(log, "Traceback"));
}
END_TEST

static void tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;
}

/* Inline mode: while libev polls, other Python threads get the GIL. */
START_TEST(test_gil_released_in_poll)
{
    struct ev_loop *loop;
    ev_timer tick;
    double end;

    options("mod_ok:app", NULL);
    ck_assert_int_eq(sl_py_init(&opt), 0);
    hp_module("gil", "import threading\n"
                     "state = {'ran': False}\n"
                     "go = threading.Event()\n"
                     "def work():\n"
                     "    go.wait()\n"
                     "    state['ran'] = True\n"
                     "t = threading.Thread(target=work, daemon=True)\n"
                     "t.start()\n");
    loop = ev_loop_new(EVFLAG_AUTO);
    ck_assert_ptr_nonnull(loop);
    sl_py_release_gil_in_poll(loop);
    ev_timer_init(&tick, tick_cb, 0.01, 0.01);
    ev_timer_start(loop, &tick);
    hp_eval("gil", "go.set()");
    end = h_now() + H_DEADLINE;
    while (strcmp(hp_eval("gil", "state['ran']"), "True") != 0) {
        ck_assert_msg(h_now() < end, "the thread never got the GIL");
        ev_run(loop, EVRUN_ONCE);
    }
    ev_loop_destroy(loop);
}
END_TEST

/* The method table: llhttp's numbers to interned names, "UNKNOWN" where
 * HTTP names none; built once, one reference per slot, all given back. */
START_TEST(test_methods)
{
    PyObject *unknown;
    Py_ssize_t before;
    int unnamed = 64;

#define XX(num, name, string) unnamed--;
    HTTP_METHOD_MAP(XX)
#undef XX
    options("mod_ok:app", NULL);
    ck_assert_int_eq(sl_py_init(&opt), 0);
    unknown = PyUnicode_InternFromString("UNKNOWN");
    hp_check(unknown, "UNKNOWN");
    before = Py_REFCNT(unknown);
    ck_assert_int_eq(sl_py_methods_init(), 0);
    ck_assert_str_eq(PyUnicode_AsUTF8(sl_py_method(HTTP_GET)), "GET");
    ck_assert_str_eq(PyUnicode_AsUTF8(sl_py_method(HTTP_MSEARCH)), "M-SEARCH");
    ck_assert_str_eq(PyUnicode_AsUTF8(sl_py_method(HTTP_SOURCE)), "SOURCE");
    ck_assert_ptr_eq(sl_py_method(HTTP_PRI), unknown);      /* not HTTP's */
    ck_assert_ptr_eq(sl_py_method(HTTP_DESCRIBE), unknown); /* RTSP's */
    ck_assert_ptr_eq(sl_py_method(63), unknown);
    ck_assert(PyUnicode_CHECK_INTERNED(sl_py_method(HTTP_POST)));
    ck_assert_int_eq(Py_REFCNT(unknown) - before, unnamed);
    ck_assert_int_eq(sl_py_methods_init(), 0); /* once */
    ck_assert_int_eq(Py_REFCNT(unknown) - before, unnamed);
    sl_py_methods_free();
    ck_assert_int_eq(Py_REFCNT(unknown), before);
    Py_DECREF(unknown);
}
END_TEST

START_TEST(test_finalize)
{
    options("mod_ok:app", NULL);
    ck_assert_int_eq(sl_py_init(&opt), 0);
    sl_py_finalize();
    ck_assert(!Py_IsInitialized());
}
END_TEST

static Suite *py_suite(void)
{
    Suite *s = suite_create("py");
    TCase *tc = tcase_create("init");

    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_init);
    tcase_add_test(tc, test_pythonpath_order);
    tcase_add_test(tc, test_cwd_on_path);
    tcase_add_test(tc, test_venv_missing);
    tcase_add_test(tc, test_venv);
    suite_add_tcase(s, tc);

    tc = tcase_create("app");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_load_app);
    tcase_add_test(tc, test_load_default_name);
    tcase_add_test(tc, test_load_dotted_attribute);
    tcase_add_test(tc, test_load_from_package);
    tcase_add_test(tc, test_load_error_traceback_under_reload);
    tcase_add_test(tc, test_modules_report);
    tcase_add_loop_test(tc, test_load_errors, 0,
                        sizeof(load_errors) / sizeof(load_errors[0]));
    suite_add_tcase(s, tc);

    tc = tcase_create("runtime");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_log_exception);
    tcase_add_test(tc, test_gil_released_in_poll);
    tcase_add_test(tc, test_methods);
    tcase_add_test(tc, test_finalize);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(py_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
