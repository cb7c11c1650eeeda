/* test_options.c - check suite for common/options.c.
 *
 * Every test parses a real argv and, for a bad one, reads back what went to
 * stderr: a usage error must be exactly one "sluice: error: ..." line that
 * names the offending argument. Tests run forked (check's default), so
 * setenv() and getopt's globals do not leak between them.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <malloc.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/options.h"

#define MAX_ARGS 64

static char out_text[16384]; /* what the last parse wrote to stdout */
static char err_text[4096];  /* ... and to stderr */
static char *last_argv[MAX_ARGS + 2];

/* Read back everything written to the temporary file FILE, then close it. */
static void slurp(FILE *file, char *buf, size_t size)
{
    size_t n;

    rewind(file);
    n = fread(buf, 1, size - 1, file);
    buf[n] = '\0';
    fclose(file);
}

/* Parse "sluice" followed by the NULL-terminated arguments; stdout and
 * stderr are captured into out_text and err_text. */
static int parse(sl_options_t *o, ...)
{
    va_list ap;
    int argc = 0;
    FILE *out = tmpfile(), *err = tmpfile();
    int saved_out = dup(STDOUT_FILENO), saved_err = dup(STDERR_FILENO);

    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_nonnull(err);
    last_argv[argc++] = "sluice";
    va_start(ap, o);
    for (char *a; (a = va_arg(ap, char *)) != NULL;) {
        ck_assert_int_lt(argc, MAX_ARGS);
        last_argv[argc++] = a;
    }
    va_end(ap);
    last_argv[argc] = NULL;

    fflush(stdout);
    dup2(fileno(out), STDOUT_FILENO);
    dup2(fileno(err), STDERR_FILENO);
    int rc = sl_options_parse(o, argc, last_argv);
    fflush(stdout);
    dup2(saved_out, STDOUT_FILENO);
    dup2(saved_err, STDERR_FILENO);
    close(saved_out);
    close(saved_err);
    slurp(out, out_text, sizeof(out_text));
    slurp(err, err_text, sizeof(err_text));
    return rc;
}

/* The parse failed with one usage line on stderr containing WHAT. */
static void assert_usage_error(int rc, const char *what)
{
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(strncmp(err_text, "sluice: error: ", 15) == 0,
                  "no 'sluice: error:' prefix in '%s'", err_text);
    ck_assert_msg(strchr(err_text, '\n') == err_text + strlen(err_text) - 1,
                  "not exactly one line: '%s'", err_text);
    ck_assert_msg(strstr(err_text, what) != NULL, "'%s' not in '%s'", what,
                  err_text);
}

START_TEST(test_defaults)
{
    sl_options_t o;

    unsetenv("SLUICE_INLINE");
    ck_assert_int_eq(parse(&o, "hello:app", NULL), 0);
    ck_assert_str_eq(err_text, "");
    ck_assert_str_eq(o.app, "hello:app");
    ck_assert_int_eq(o.nbinds, 1);
    ck_assert_str_eq(o.binds[0], "127.0.0.1:8000");
    ck_assert_int_eq(o.workers, 1);
    ck_assert_int_eq(o.threads, 1);
    ck_assert_int_eq(o.worker_connections, 1000);
    ck_assert_int_eq(o.interface, SL_IFACE_AUTO);
    ck_assert_int_eq(o.log_level, SL_LOG_INFO);
    ck_assert_ptr_null(o.error_logfile);
    ck_assert_int_eq(o.limit_request_line, 4094);
    ck_assert_int_eq(o.limit_request_fields, 100);
    ck_assert_int_eq(o.limit_request_field_size, 8190);
    ck_assert(o.limit_request_body == 0);
    ck_assert_double_eq(o.header_timeout, 30);
    ck_assert_double_eq(o.keep_alive, 5);
    ck_assert_double_eq(o.timeout, 30);
    ck_assert_double_eq(o.graceful_timeout, 30);
    ck_assert_double_eq(o.boot_timeout, 30);
    ck_assert_double_eq(o.shutdown_delay, 0);
    ck_assert_int_eq(o.max_requests, 0);
    ck_assert_int_eq(o.max_requests_jitter, 0);
    ck_assert_int_eq(o.reload_surge, 1);
    ck_assert_int_eq(o.backlog, 2048);
    ck_assert_int_eq(o.umask, -1);
    ck_assert_int_eq(o.npythonpath, 0);
    ck_assert_ptr_null(o.chdir);
    ck_assert_ptr_null(o.venv);
    ck_assert_ptr_null(o.health_path);
    ck_assert_ptr_null(o.pidfile);
    ck_assert_ptr_null(o.proc_name);
    ck_assert(!o.inline_mode);
}
END_TEST

START_TEST(test_every_option)
{
    sl_options_t o;

    ck_assert_int_eq(
        parse(&o, "-w", "3", "--threads", "4", "--worker-connections=50",
              "--chdir", "/srv", "--venv", "/venv", "--interface", "asgi",
              "--log-level", "DEBUG", "--error-logfile", "/var/log/x",
              "--limit-request-line", "8190", "--limit-request-fields", "32768",
              "--limit-request-field-size", "0", "--limit-request-body",
              "10000000000", "--header-timeout", "2.5", "--keep-alive", ".5",
              "--timeout", "0", "--graceful-timeout", "12", "--boot-timeout",
              "60", "--shutdown-delay", "1.25", "--max-requests", "1000",
              "--max-requests-jitter", "50", "--reload-surge", "2",
              "--health-path", "/healthz", "--pid", "/run/s.pid", "--backlog",
              "16", "--umask", "0o027", "--name", "shop", "mod.sub:make_app()",
              NULL),
        0);
    ck_assert_str_eq(err_text, "");
    ck_assert_int_eq(o.workers, 3);
    ck_assert_int_eq(o.threads, 4);
    ck_assert_int_eq(o.worker_connections, 50);
    ck_assert_str_eq(o.chdir, "/srv");
    ck_assert_str_eq(o.venv, "/venv");
    ck_assert_int_eq(o.interface, SL_IFACE_ASGI);
    ck_assert_int_eq(o.log_level, SL_LOG_DEBUG);
    ck_assert_str_eq(o.error_logfile, "/var/log/x");
    ck_assert_int_eq(o.limit_request_line, 8190);
    ck_assert_int_eq(o.limit_request_fields, 32768);
    ck_assert_int_eq(o.limit_request_field_size, 0);
    ck_assert(o.limit_request_body == 10000000000LL);
    ck_assert_double_eq(o.header_timeout, 2.5);
    ck_assert_double_eq(o.keep_alive, 0.5);
    ck_assert_double_eq(o.timeout, 0);
    ck_assert_double_eq(o.graceful_timeout, 12);
    ck_assert_double_eq(o.boot_timeout, 60);
    ck_assert_double_eq(o.shutdown_delay, 1.25);
    ck_assert_int_eq(o.max_requests, 1000);
    ck_assert_int_eq(o.max_requests_jitter, 50);
    ck_assert_int_eq(o.reload_surge, 2);
    ck_assert_str_eq(o.health_path, "/healthz");
    ck_assert_str_eq(o.pidfile, "/run/s.pid");
    ck_assert_int_eq(o.backlog, 16);
    ck_assert_int_eq(o.umask, 027);
    ck_assert_str_eq(o.proc_name, "shop");
    ck_assert_str_eq(o.app, "mod.sub:make_app()");
}
END_TEST

START_TEST(test_short_options_and_order)
{
    sl_options_t o;

    /* Options may follow the application, as with gunicorn. */
    ck_assert_int_eq(parse(&o, "m:a", "-w", "2", "-t", "7", "-p", "/p", "-n",
                           "n", "-m", "022", NULL),
                     0);
    ck_assert_int_eq(o.workers, 2);
    ck_assert_double_eq(o.timeout, 7);
    ck_assert_str_eq(o.pidfile, "/p");
    ck_assert_str_eq(o.proc_name, "n");
    ck_assert_int_eq(o.umask, 022);
    ck_assert_str_eq(o.app, "m:a");
}
END_TEST

START_TEST(test_parse_twice)
{
    sl_options_t o;

    ck_assert_int_eq(parse(&o, "-w", "2", "a:b", NULL), 0);
    ck_assert_int_eq(parse(&o, "--workers", "5", "c:d", NULL), 0);
    ck_assert_int_eq(o.workers, 5);
    ck_assert_str_eq(o.app, "c:d");
}
END_TEST

START_TEST(test_binds)
{
    sl_options_t o;

    ck_assert_int_eq(parse(&o, "-b", "0.0.0.0:80", "--bind", "[::1]:8080",
                           "--bind=unix:/run/s.sock", "-b", "fd://3", "m:a",
                           NULL),
                     0);
    ck_assert_int_eq(o.nbinds, 4);
    ck_assert_str_eq(o.binds[0], "0.0.0.0:80");
    ck_assert_str_eq(o.binds[1], "[::1]:8080");
    ck_assert_str_eq(o.binds[2], "unix:/run/s.sock");
    ck_assert_str_eq(o.binds[3], "fd://3");
}
END_TEST

START_TEST(test_too_many_binds)
{
    sl_options_t o;
    char *args[2 * SL_MAX_BINDS + 6];
    int n = 0;

    args[n++] = "sluice";
    for (int i = 0; i <= SL_MAX_BINDS; i++) {
        args[n++] = "-b";
        args[n++] = "127.0.0.1:0";
    }
    args[n++] = "m:a";
    args[n] = NULL;
    FILE *err = tmpfile();
    int saved = dup(STDERR_FILENO);
    dup2(fileno(err), STDERR_FILENO);
    int rc = sl_options_parse(&o, n, args);
    dup2(saved, STDERR_FILENO);
    close(saved);
    slurp(err, err_text, sizeof(err_text));
    assert_usage_error(rc, "at most 16");
}
END_TEST

/* --certfile and --keyfile pair up in order; the first pair is the one
 * the rest of the options know as certfile and keyfile. */
START_TEST(test_cert_pairs)
{
    sl_options_t o;

    ck_assert_int_eq(parse(&o, "--certfile", "a.pem", "--keyfile", "a.key",
                           "--certfile=b.pem", "--keyfile=b.key", "m:a", NULL),
                     0);
    ck_assert_int_eq(o.ncertfiles, 2);
    ck_assert_int_eq(o.nkeyfiles, 2);
    ck_assert_str_eq(o.certfiles[1], "b.pem");
    ck_assert_str_eq(o.keyfiles[1], "b.key");
    ck_assert_str_eq(o.certfile, "a.pem");
    ck_assert_str_eq(o.keyfile, "a.key");
    assert_usage_error(parse(&o, "--certfile", "a.pem", "--keyfile", "a.key",
                             "--certfile", "b.pem", "m:a", NULL),
                       "each --certfile needs its own --keyfile");
    assert_usage_error(parse(&o, "--keyfile", "a.key", "m:a", NULL),
                       "TLS needs both --certfile and --keyfile");
}
END_TEST

START_TEST(test_pythonpath)
{
    sl_options_t o;

    ck_assert_int_eq(parse(&o, "--pythonpath", "/a,/b", "--pythonpath", ",/c,,",
                           "m:a", NULL),
                     0);
    ck_assert_int_eq(o.npythonpath, 3);
    ck_assert_str_eq(o.pythonpath[0], "/a");
    ck_assert_str_eq(o.pythonpath[1], "/b");
    ck_assert_str_eq(o.pythonpath[2], "/c");
    /* argv itself is left whole for the workers' exec */
    ck_assert_str_eq(last_argv[2], "/a,/b");
}
END_TEST

/* Checking a --pythonpath value (what the configuration file's lines and
 * SLUICE_CMD_ARGS go through, on every HUP too) keeps none of the copies
 * it makes: fuzz_config found them leaked. Counted by glibc's allocator;
 * under ASan, whose allocator it does not see, LeakSanitizer tells. */
START_TEST(test_check_pythonpath_keeps_nothing)
{
    struct mallinfo2 before, after;

    ck_assert_int_eq(sl_options_check("pythonpath", "/a,/b,/c"), 0);
    before = mallinfo2();
    for (int i = 0; i < 10000; i++)
        ck_assert_int_eq(sl_options_check("pythonpath", "/a,/b,/c"), 0);
    after = mallinfo2();
    ck_assert_msg(after.uordblks < before.uordblks + 64 * 1024,
                  "%zu bytes more in use after 10000 checks",
                  after.uordblks - before.uordblks);
}
END_TEST

/* --reload is a flag (it takes no value); --reload-extra-file repeats and
 * means nothing without it. */
START_TEST(test_reload_options)
{
    sl_options_t o;

    ck_assert_int_eq(parse(&o, "m:a", NULL), 0);
    ck_assert(!o.reload);
    ck_assert_int_eq(o.nreload_extra_files, 0);
    ck_assert_int_eq(parse(&o, "--reload", "--reload-extra-file", "a.txt",
                           "--reload-extra-file", "/b/c.ini", "m:a", NULL),
                     0);
    ck_assert(o.reload);
    ck_assert_int_eq(o.nreload_extra_files, 2);
    ck_assert_str_eq(o.reload_extra_files[0], "a.txt");
    ck_assert_str_eq(o.reload_extra_files[1], "/b/c.ini");
    assert_usage_error(parse(&o, "--reload-extra-file", "a.txt", "m:a", NULL),
                       "--reload-extra-file: only means something with"
                       " --reload");
    assert_usage_error(
        parse(&o, "--reload", "--reload-extra-file", "", "m:a", NULL),
        "--reload-extra-file: must not be empty");
    assert_usage_error(parse(&o, "--reload=yes", "m:a", NULL),
                       "unrecognized option '--reload=yes'");
}
END_TEST

START_TEST(test_interface_and_levels)
{
    sl_options_t o;
    static const char *levels[] = {"debug", "info", "warning", "error",
                                   "critical"};

    ck_assert_int_eq(parse(&o, "--interface", "wsgi", "m:a", NULL), 0);
    ck_assert_int_eq(o.interface, SL_IFACE_WSGI);
    ck_assert_int_eq(parse(&o, "--interface", "auto", "m:a", NULL), 0);
    ck_assert_int_eq(o.interface, SL_IFACE_AUTO);
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(parse(&o, "--log-level", levels[i], "m:a", NULL), 0);
        ck_assert_int_eq(o.log_level, SL_LOG_DEBUG + i);
    }
    ck_assert_int_eq(parse(&o, "--error-logfile", "-", "m:a", NULL), 0);
    ck_assert_ptr_null(o.error_logfile);
    ck_assert_int_eq(parse(&o, "--log-file", "x.log", "m:a", NULL), 0);
    ck_assert_str_eq(o.error_logfile, "x.log");

    assert_usage_error(parse(&o, "--interface", "cgi", "m:a", NULL),
                       "--interface: invalid choice: 'cgi'");
    assert_usage_error(parse(&o, "--log-level", "loud", "m:a", NULL),
                       "--log-level: invalid choice: 'loud'");
}
END_TEST

/* Values no option may take, each with the words the error must say. */
static const struct {
    const char *opt, *value, *expect;
} bad_values[] = {
    {"--workers", "abc", "-w/--workers: invalid integer: 'abc'"},
    {"--workers", "", "-w/--workers: invalid integer: ''"},
    {"--workers", "0", "-w/--workers: '0' is out of range 1..1024"},
    {"--workers", "-1", "-w/--workers: '-1' is out of range"},
    {"--workers", "1.5", "invalid integer: '1.5'"},
    {"--workers", " 2", "invalid integer: ' 2'"},
    {"--workers", "+2", "invalid integer: '+2'"},
    {"--workers", "0x10", "invalid integer: '0x10'"},
    {"--workers", "99999999999999999999", "out of range"},
    {"--threads", "0", "--threads: '0' is out of range"},
    {"--worker-connections", "0", "out of range"},
    {"--limit-request-line", "8191", "'8191' is out of range 0..8190"},
    {"--limit-request-line", "-1", "out of range"},
    {"--limit-request-fields", "32769", "out of range 0..32768"},
    {"--limit-request-field-size", "-5", "out of range"},
    {"--limit-request-body", "-1", "out of range"},
    {"--limit-request-body", "1k", "invalid integer: '1k'"},
    {"--timeout", "-1", "-t/--timeout: '-1' is out of range"},
    {"--timeout", "soon", "invalid number of seconds: 'soon'"},
    {"--timeout", "1.2.3", "invalid number of seconds"},
    {"--timeout", "inf", "invalid number of seconds"},
    {"--timeout", "nan", "invalid number of seconds"},
    {"--timeout", "1e3", "invalid number of seconds"},
    {"--keep-alive", ".", "invalid number of seconds"},
    {"--graceful-timeout", "-0.5", "out of range"},
    {"--header-timeout", "x", "--header-timeout: invalid"},
    {"--boot-timeout", "", "invalid number of seconds"},
    {"--shutdown-delay", "-3", "out of range"},
    {"--max-requests", "-1", "out of range"},
    {"--max-requests-jitter", "many", "invalid integer"},
    {"--reload-surge", "0", "out of range"},
    {"--backlog", "0", "--backlog: '0' is out of range"},
    {"--backlog", "70000", "out of range"},
    {"--umask", "8", "-m/--umask: invalid octal mode: '8'"},
    {"--umask", "01000", "out of range 0..0777"},
    {"--umask", "-1", "invalid octal mode"},
    {"--umask", "0o", "invalid octal mode"},
    {"--chdir", "", "--chdir: must not be empty"},
    {"--bind", "", "-b/--bind: must not be empty"},
    {"--error-logfile", "", "must not be empty"},
    {"--ws-max-size", "0", "--ws-max-size: '0' is out of range"},
    {"--ws-max-queue", "0", "out of range"},
    {"--ws-ping-interval", "-1", "out of range"},
    {"--ws-ping-timeout", "soon", "invalid number of seconds"},
    {"--ws-per-message-deflate", "yes", "invalid choice: 'yes'"},
    {"--http-protocols", "", "--http-protocols: must not be empty"},
    {"--http-protocols", "h3", "--http-protocols: invalid choice: 'h3'"},
    {"--http-protocols", "h2,http/1.1", "invalid choice: 'http/1.1'"},
    {"--http-protocols", "h2,h1,h2", "h2 is named twice in 'h2,h1,h2'"},
    {"--http-protocols", "h1,H1", "h1 is named twice"},
    {"--http-protocols", "h2,,h1", "an empty name in 'h2,,h1'"},
    {"--http-protocols", "h2,", "an empty name in 'h2,'"},
    {"--http-protocols", " ", "an empty name"},
    {"--http2-cleartext", "on", "--http2-cleartext: invalid choice: 'on'"},
    {"--http2-cleartext", "upgrade", "Upgrade: h2c is not served"},
    {"--http2-cleartext", "both", "invalid choice: 'both'"},
    {"--http2-max-concurrent-streams", "0",
     "--http2-max-concurrent-streams: '0' is out of range 1..2147483647"},
    {"--http2-max-concurrent-streams", "many", "invalid integer: 'many'"},
    {"--http2-initial-window-size", "2147483648",
     "'2147483648' is out of range 1..2147483647"},
    {"--http2-initial-window-size", "0", "out of range"},
    {"--http2-max-frame-size", "16383",
     "--http2-max-frame-size: '16383' is out of range 16384..16777215"},
    {"--http2-max-frame-size", "16777216", "out of range 16384..16777215"},
    {"--http2-max-header-list-size", "-1",
     "--http2-max-header-list-size: '-1' is out of range 0..2147483647"},
    {"--http2-max-header-list-size", "64k", "invalid integer: '64k'"},
};

START_TEST(test_bad_value)
{
    sl_options_t o;
    const char *opt = bad_values[_i].opt;
    const char *value = bad_values[_i].value;

    assert_usage_error(parse(&o, opt, value, "m:a", NULL),
                       bad_values[_i].expect);
}
END_TEST

START_TEST(test_command_line_errors)
{
    sl_options_t o;

    assert_usage_error(parse(&o, NULL), "missing the application");
    assert_usage_error(parse(&o, "-w", "2", NULL), "missing the application");
    assert_usage_error(parse(&o, "a:b", "c:d", NULL),
                       "unexpected argument 'c:d'");
    assert_usage_error(parse(&o, "hello", NULL), "'hello' must be");
    assert_usage_error(parse(&o, ":app", NULL), "no module before ':'");
    assert_usage_error(parse(&o, "hello:", NULL), "no callable after ':'");
    assert_usage_error(parse(&o, "--nope", "m:a", NULL),
                       "unrecognized option '--nope'");
    assert_usage_error(parse(&o, "-x", "m:a", NULL),
                       "unrecognized option '-x'");
    assert_usage_error(parse(&o, "m:a", "-w", NULL),
                       "-w/--workers: expected one argument");
    assert_usage_error(parse(&o, "m:a", "--timeout", NULL),
                       "-t/--timeout: expected one argument");
    assert_usage_error(parse(&o, "--help=yes", "m:a", NULL),
                       "unrecognized option '--help=yes'");
}
END_TEST

/* --factory, or gunicorn's MODULE:NAME() for it; arguments inside the
 * parentheses are refused. */
START_TEST(test_factory)
{
    sl_options_t o;

    ck_assert_int_eq(parse(&o, "m:make", NULL), 0);
    ck_assert(!o.factory);
    ck_assert_int_eq(parse(&o, "--factory", "m:make", NULL), 0);
    ck_assert(o.factory);
    ck_assert_int_eq(parse(&o, "m:pkg.make()", NULL), 0);
    ck_assert(o.factory);
    ck_assert_str_eq(o.app, "m:pkg.make()");
    assert_usage_error(parse(&o, "m:make(1)", NULL),
                       "'m:make(1)': a factory is called with no arguments");
    assert_usage_error(parse(&o, "m:make(", NULL), "with no arguments");
    assert_usage_error(parse(&o, "m:make() ", NULL), "with no arguments");
    assert_usage_error(parse(&o, "m:()", NULL), "with no arguments");
}
END_TEST

/* HTTP/2 options: gunicorn's names and defaults, the protocols in the
 * order given, and prior knowledge only with h2. */
START_TEST(test_http2_options)
{
    sl_options_t o;

    ck_assert_int_eq(parse(&o, "m:a", NULL), 0);
    ck_assert_int_eq(o.nhttp_protocols, 1);
    ck_assert_int_eq(o.http_protocols[0], SL_PROTO_H1);
    ck_assert(!o.http2_prior_knowledge);
    ck_assert_int_eq(o.http2_max_concurrent_streams, 100);
    ck_assert_int_eq(o.http2_initial_window_size, 65535);
    ck_assert_int_eq(o.http2_max_frame_size, 16384);
    ck_assert_int_eq(o.http2_max_header_list_size, 65536);

    ck_assert_int_eq(parse(&o, "--http-protocols", "h2,h1", "--http2-cleartext",
                           "prior-knowledge", "--http2-max-concurrent-streams",
                           "7", "--http2-initial-window-size", "2147483647",
                           "--http2-max-frame-size", "16777215",
                           "--http2-max-header-list-size", "1", "m:a", NULL),
                     0);
    ck_assert_str_eq(err_text, "");
    ck_assert_int_eq(o.nhttp_protocols, 2);
    ck_assert_int_eq(o.http_protocols[0], SL_PROTO_H2);
    ck_assert_int_eq(o.http_protocols[1], SL_PROTO_H1);
    ck_assert(o.http2_prior_knowledge);
    ck_assert_int_eq(o.http2_max_concurrent_streams, 7);
    ck_assert_int_eq(o.http2_initial_window_size, 2147483647);
    ck_assert_int_eq(o.http2_max_frame_size, 16777215);
    ck_assert_int_eq(o.http2_max_header_list_size, 1);

    /* a file's "h2, h1", any case; the last --http-protocols wins whole */
    ck_assert_int_eq(parse(&o, "--http-protocols", " H1 , h2", "m:a", NULL), 0);
    ck_assert_int_eq(o.nhttp_protocols, 2);
    ck_assert_int_eq(o.http_protocols[0], SL_PROTO_H1);
    ck_assert_int_eq(o.http_protocols[1], SL_PROTO_H2);
    ck_assert_int_eq(parse(&o, "--http-protocols=h1,h2", "--http-protocols=h2",
                           "--http2-cleartext=PRIOR-KNOWLEDGE",
                           "--http2-cleartext=off", "m:a", NULL),
                     0);
    ck_assert_int_eq(o.nhttp_protocols, 1);
    ck_assert_int_eq(o.http_protocols[0], SL_PROTO_H2);
    ck_assert(!o.http2_prior_knowledge);
    ck_assert_int_eq(parse(&o, "--http2-max-frame-size=16384",
                           "--http2-max-header-list-size=0", "m:a", NULL),
                     0);
    ck_assert_int_eq(o.http2_max_frame_size, 16384);
    ck_assert_int_eq(o.http2_max_header_list_size, 2147483647);

    assert_usage_error(
        parse(&o, "--http2-cleartext", "prior-knowledge", "m:a", NULL),
        "argument --http2-cleartext: prior-knowledge needs h2"
        " in --http-protocols");
    assert_usage_error(parse(&o, "--http-protocols", "h2",
                             "--http2-cleartext=prior-knowledge",
                             "--http-protocols", "h1", "m:a", NULL),
                       "prior-knowledge needs h2");
}
END_TEST

/* WebSocket options: uvicorn's defaults, and its true/false words. */
START_TEST(test_websocket_options)
{
    sl_options_t o;

    ck_assert_int_eq(parse(&o, "m:a", NULL), 0);
    ck_assert_int_eq(o.ws_max_size, 16777216);
    ck_assert_int_eq(o.ws_max_queue, 32);
    ck_assert_double_eq(o.ws_ping_interval, 20);
    ck_assert_double_eq(o.ws_ping_timeout, 20);
    ck_assert(o.ws_per_message_deflate);
    ck_assert_int_eq(parse(&o, "--ws-max-size", "1024", "--ws-max-queue", "4",
                           "--ws-ping-interval", "0", "--ws-ping-timeout",
                           "2.5", "--ws-per-message-deflate", "false", "m:a",
                           NULL),
                     0);
    ck_assert_int_eq(o.ws_max_size, 1024);
    ck_assert_int_eq(o.ws_max_queue, 4);
    ck_assert_double_eq(o.ws_ping_interval, 0);
    ck_assert_double_eq(o.ws_ping_timeout, 2.5);
    ck_assert(!o.ws_per_message_deflate);
    ck_assert_int_eq(parse(&o, "--ws-per-message-deflate", "True", "m:a", NULL),
                     0);
    ck_assert(o.ws_per_message_deflate);
}
END_TEST

START_TEST(test_proxy_options)
{
    sl_options_t o;
    struct sockaddr_in in = {.sin_family = AF_INET};

    in.sin_addr.s_addr = htonl(0x7f000001);
    ck_assert_int_eq(parse(&o, "m:a", NULL), 0);
    ck_assert(!o.proxy_protocol);
    ck_assert_int_eq(o.forwarded_allow.n, 2); /* 127.0.0.1 and ::1 */
    ck_assert(sl_allow_match(&o.forwarded_allow, (struct sockaddr *)&in));
    ck_assert(sl_allow_match(&o.proxy_allow, (struct sockaddr *)&in));

    ck_assert_int_eq(parse(&o, "--proxy-protocol", "--forwarded-allow-ips",
                           "10.0.0.0/8", "--proxy-allow-from", "*", "m:a",
                           NULL),
                     0);
    ck_assert(o.proxy_protocol);
    ck_assert(!sl_allow_match(&o.forwarded_allow, (struct sockaddr *)&in));
    ck_assert(o.proxy_allow.any);

    /* the environment's list, unless the command line gives one */
    setenv("FORWARDED_ALLOW_IPS", "*", 1);
    ck_assert_int_eq(parse(&o, "m:a", NULL), 0);
    ck_assert(o.forwarded_allow.any);
    ck_assert_int_eq(parse(&o, "--forwarded-allow-ips", "::1", "m:a", NULL), 0);
    ck_assert(!o.forwarded_allow.any);
    setenv("FORWARDED_ALLOW_IPS", "nonsense", 1);
    assert_usage_error(parse(&o, "m:a", NULL),
                       "--forwarded-allow-ips: 'nonsense' is no address");

    assert_usage_error(
        parse(&o, "--forwarded-allow-ips", "10.0.0.0/33", "m:a", NULL),
        "argument --forwarded-allow-ips: '10.0.0.0/33' is no address");
    assert_usage_error(
        parse(&o, "--proxy-allow-from", "localhost", "m:a", NULL),
        "argument --proxy-allow-from: 'localhost' is no address");
    /* a switch takes no value */
    assert_usage_error(parse(&o, "--proxy-protocol=yes", "m:a", NULL),
                       "--proxy-protocol");
}
END_TEST

/* Access log options: off by default; a flag without an argument; a
 * format that does not compile is a usage error, not a failing worker. */
START_TEST(test_access_log_options)
{
    sl_options_t o;

    ck_assert_int_eq(parse(&o, "m:a", NULL), 0);
    ck_assert_ptr_null(o.access_logfile);
    ck_assert_ptr_null(o.access_logformat);
    ck_assert(!o.access_log_json);
    ck_assert_int_eq(parse(&o, "--access-logfile", "-", "--access-log-json",
                           "--access-logformat", "%(h)s %({x-id}i)s", "m:a",
                           NULL),
                     0);
    ck_assert_str_eq(o.access_logfile, "-");
    ck_assert_str_eq(o.access_logformat, "%(h)s %({x-id}i)s");
    ck_assert(o.access_log_json);
    assert_usage_error(
        parse(&o, "--access-logformat", "%(h)s %(s", "m:a", NULL),
        "--access-logformat: '%(' at offset 6 is never closed");
    assert_usage_error(parse(&o, "--access-logformat", "100%", "m:a", NULL),
                       "--access-logformat: '%' at offset 3");
    assert_usage_error(parse(&o, "--access-log-json=yes", "m:a", NULL),
                       "unrecognized option '--access-log-json=yes'");
    assert_usage_error(parse(&o, "--access-logfile", "", "m:a", NULL),
                       "--access-logfile: must not be empty");
}
END_TEST

START_TEST(test_inline_mode)
{
    sl_options_t o;

    setenv("SLUICE_INLINE", "1", 1);
    ck_assert_int_eq(parse(&o, "m:a", NULL), 0);
    ck_assert(o.inline_mode);
    assert_usage_error(parse(&o, "--threads", "2", "m:a", NULL),
                       "inline mode runs one lane");
    setenv("SLUICE_INLINE", "0", 1);
    ck_assert_int_eq(parse(&o, "--threads", "2", "m:a", NULL), 0);
    ck_assert(!o.inline_mode);
}
END_TEST

START_TEST(test_version)
{
    sl_options_t o;
    char expect[64];

    snprintf(expect, sizeof(expect), "sluice %s\n", PACKAGE_VERSION);
    ck_assert_int_eq(parse(&o, "--version", NULL), 1);
    ck_assert_str_eq(out_text, expect);
    ck_assert_int_eq(parse(&o, "-v", NULL), 1);
    ck_assert_str_eq(out_text, expect);
    ck_assert_str_eq(err_text, "");
}
END_TEST

START_TEST(test_help)
{
    static const char *names[] = {
        "--bind",
        "--workers",
        "--threads",
        "--worker-connections",
        "--chdir",
        "--pythonpath",
        "--venv",
        "--interface",
        "--log-level",
        "--error-logfile",
        "--limit-request-line",
        "--limit-request-fields",
        "--limit-request-field-size",
        "--limit-request-body",
        "--header-timeout",
        "--keep-alive",
        "--timeout",
        "--graceful-timeout",
        "--boot-timeout",
        "--shutdown-delay",
        "--max-requests",
        "--max-requests-jitter",
        "--reload-surge",
        "--reload",
        "--reload-extra-file FILE",
        "--health-path",
        "--ws-max-size",
        "--ws-max-queue",
        "--ws-ping-interval",
        "--ws-ping-timeout",
        "--ws-per-message-deflate",
        "--http-protocols LIST",
        "--http2-cleartext MODE",
        "--http2-max-concurrent-streams",
        "--http2-initial-window-size",
        "--http2-max-frame-size",
        "--http2-max-header-list-size",
        "--pid",
        "--backlog",
        "--umask",
        "--name",
        "--version",
        "--help",
        "[127.0.0.1:8000]",
        "[4094]",
        "[8190]",
        "[2048]",
        "SLUICE_INLINE",
    };
    sl_options_t o;

    ck_assert_int_eq(parse(&o, "-h", NULL), 1);
    ck_assert(
        strncmp(out_text, "usage: sluice [OPTIONS] MODULE:CALLABLE", 39) == 0);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        ck_assert_msg(strstr(out_text, names[i]) != NULL,
                      "%s missing from --help", names[i]);
    }
    /* 80 columns, like everything else */
    for (const char *line = out_text; *line != '\0';) {
        size_t len = strcspn(line, "\n");
        ck_assert_msg(len < 80, "--help line too long: %.*s", (int)len, line);
        line += len + (line[len] == '\n');
    }
    ck_assert_int_eq(parse(&o, "m:a", "--help", NULL), 1);
}
END_TEST

static Suite *options_suite(void)
{
    Suite *s = suite_create("options");
    TCase *tc = tcase_create("parse");

    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_every_option);
    tcase_add_test(tc, test_short_options_and_order);
    tcase_add_test(tc, test_parse_twice);
    tcase_add_test(tc, test_binds);
    tcase_add_test(tc, test_too_many_binds);
    tcase_add_test(tc, test_cert_pairs);
    tcase_add_test(tc, test_pythonpath);
    tcase_add_test(tc, test_check_pythonpath_keeps_nothing);
    tcase_add_test(tc, test_reload_options);
    tcase_add_test(tc, test_interface_and_levels);
    tcase_add_loop_test(tc, test_bad_value, 0,
                        sizeof(bad_values) / sizeof(bad_values[0]));
    tcase_add_test(tc, test_command_line_errors);
    tcase_add_test(tc, test_factory);
    tcase_add_test(tc, test_websocket_options);
    tcase_add_test(tc, test_http2_options);
    tcase_add_test(tc, test_proxy_options);
    tcase_add_test(tc, test_access_log_options);
    tcase_add_test(tc, test_inline_mode);
    tcase_add_test(tc, test_version);
    tcase_add_test(tc, test_help);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(options_suite());

    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
