/* test_wsgi_environ.c - check suite for worker/wsgi.c: the environ
 * (PEP 3333's keys, methods, headers, PATH_INFO, absolute-form targets)
 * and wsgi.errors.
 *
 * The embedded interpreter runs one test app (APP in
 * tests/unit/wsgi_harness.h, which the test_wsgi*.c suites share). The
 * pump runs in inline mode, so sl_wsgi_handle() is called on the test
 * thread straight from the parser, as with SLUICE_INLINE=1; requests go
 * over a real loopback connection and the tests read the response bytes
 * the client received. Python starts once per process, so every test runs
 * forked and starts it in its fixture.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <regex.h>

#include "tests/unit/py_harness.h"
#include "tests/unit/wsgi_harness.h"
#include "worker/python/lane.h"
#include "worker/python/wsgi.h"

/* ------------------------------------------------------------------ */
/* environ                                                            */

/* Line "KEY=TYPE:REPR" of the /env answer. */
static void assert_env(const char *line)
{
    char want[512];

    snprintf(want, sizeof(want), "\n%s\n", line);
    ck_assert_msg(strstr(resp.body, want) != NULL, "'%s' not in environ:%s",
                  line, resp.body);
}

static void assert_no_env(const char *key)
{
    char want[128];

    snprintf(want, sizeof(want), "\n%s=", key);
    ck_assert_msg(strstr(resp.body, want) == NULL, "'%s' in environ:%s", key,
                  resp.body);
}

START_TEST(test_environ_basics)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    char line[128];

    UP(NULL);
    get("/env/a%20b?x=1&y=%20#frag");
    ck_assert_int_eq(resp.status, 200);
    assert_env("keys-are-str=True");
    assert_env("REQUEST_METHOD=str:'GET'");
    assert_env("SCRIPT_NAME=str:''");
    assert_env("PATH_INFO=str:'/env/a b'");
    assert_env("QUERY_STRING=str:'x=1&y=%20'");
    assert_env("RAW_URI=str:'/env/a%20b?x=1&y=%20#frag'");
    assert_env("SERVER_PROTOCOL=str:'HTTP/1.1'");
    assert_env("SERVER_NAME=str:'127.0.0.1'");
    snprintf(line, sizeof(line), "SERVER_PORT=str:'%s'",
             pump.listeners[0].server_port);
    assert_env(line);
    assert_env("REMOTE_ADDR=str:'127.0.0.1'");
    ck_assert_int_eq(getsockname(client.fd, (struct sockaddr *)&sin, &len), 0);
    snprintf(line, sizeof(line), "REMOTE_PORT=str:'%u'", ntohs(sin.sin_port));
    assert_env(line);
    assert_env("HTTP_HOST=str:'h'");
    assert_env("wsgi.version=tuple:(1, 0)");
    assert_env("wsgi.url_scheme=str:'http'");
    assert_env("wsgi.multithread=bool:False");
    assert_env("wsgi.multiprocess=bool:False");
    assert_env("wsgi.run_once=bool:False");
    assert_env("wsgi.input_terminated=bool:True");
    assert_env("wsgi.input=Input:-");
    assert_env("wsgi.errors=Errors:-");
    assert_env("wsgi.file_wrapper=type:-");
    /* only when sent */
    assert_no_env("CONTENT_TYPE");
    assert_no_env("CONTENT_LENGTH");
}
END_TEST

START_TEST(test_environ_multi)
{
    UP("--threads", "4", "--workers", "2", NULL);
    get("/env");
    assert_env("wsgi.multithread=bool:True");
    assert_env("wsgi.multiprocess=bool:True");
}
END_TEST

START_TEST(test_environ_post_and_http10)
{
    UP(NULL);
    exchange("POST /env HTTP/1.0\r\nContent-Type: text/x-test\r\n"
             "Content-Length: 4\r\n\r\nbody");
    assert_env("REQUEST_METHOD=str:'POST'");
    assert_env("SERVER_PROTOCOL=str:'HTTP/1.0'");
    assert_env("CONTENT_TYPE=str:'text/x-test'");
    assert_env("CONTENT_LENGTH=str:'4'");
    assert_env("QUERY_STRING=str:''");
    assert_no_env("HTTP_CONTENT_TYPE");
    assert_no_env("HTTP_CONTENT_LENGTH");
    assert_no_env("HTTP_HOST");
}
END_TEST

/* The method names are made once, one reference per table slot: building
 * the table must not leak the placeholder a known name replaces (wsgi.c's
 * own table kept one "UNKNOWN" per known method). */
START_TEST(test_method_table_references)
{
    PyObject *unknown;
    Py_ssize_t before;
    int known = 0;

    h_options(&opt, NULL);
    ck_assert_int_eq(sl_py_init(&opt), 0);
    unknown = PyUnicode_InternFromString("UNKNOWN");
    hp_check(unknown, "UNKNOWN");
    before = Py_REFCNT(unknown);
    serve_up();
#define XX(num, name, string) known++;
    HTTP_METHOD_MAP(XX)
#undef XX
    ck_assert_int_eq(Py_REFCNT(unknown) - before, 64 - known);
    Py_DECREF(unknown);
}
END_TEST

/* Requests keep no reference to their method's name. */
START_TEST(test_method_name_not_leaked)
{
    PyObject *name;
    Py_ssize_t before;
    int i;

    UP(NULL);
    name = PyUnicode_InternFromString("M-SEARCH");
    hp_check(name, "M-SEARCH");
    exchange("M-SEARCH /env HTTP/1.1\r\nHost: h\r\n\r\n");
    before = Py_REFCNT(name);
    for (i = 0; i < 20; i++) {
        exchange("M-SEARCH /env HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_env("REQUEST_METHOD=str:'M-SEARCH'");
    }
    ck_assert_int_eq(Py_REFCNT(name), before);
    Py_DECREF(name);
}
END_TEST

START_TEST(test_environ_other_methods)
{
    UP(NULL);
    exchange("PURGE /env HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_env("REQUEST_METHOD=str:'PURGE'");
    exchange("OPTIONS /env HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_env("REQUEST_METHOD=str:'OPTIONS'");
}
END_TEST

/* Repeated request headers are joined with ',' (common and other names
 * alike); names with '_' are dropped so they cannot pose as a dashed one;
 * values are latin-1. */
START_TEST(test_environ_headers)
{
    UP(NULL);
    exchange("GET /env HTTP/1.1\r\nHost: h\r\n"
             "X-Multi: a\r\nAccept: text/a\r\nX-Multi: b\r\n"
             "Accept: text/b\r\nx-multi: c\r\n"
             "X-Under: good\r\nX_Under: evil\r\nX_Other: evil\r\n"
             "X-Latin: caf\xe9\r\n"
             "X-Empty:\r\n"
             "User-Agent: t/1\r\nCookie: a=1\r\nCookie: b=2\r\n\r\n");
    assert_env("HTTP_X_MULTI=str:'a,b,c'");
    assert_env("HTTP_ACCEPT=str:'text/a,text/b'");
    assert_env("HTTP_X_UNDER=str:'good'");
    assert_no_env("HTTP_X_OTHER");
    assert_env("HTTP_X_LATIN=str:'caf\xc3\xa9'"); /* repr of 'caf\xe9' */
    assert_env("HTTP_X_EMPTY=str:''");
    assert_env("HTTP_USER_AGENT=str:'t/1'");
    assert_env("HTTP_COOKIE=str:'a=1,b=2'");
}
END_TEST

/* PATH_INFO is percent-decoded and then read as latin-1: each byte is one
 * character, as PEP 3333 wants. */
START_TEST(test_path_info_decoding)
{
    static const struct {
        const char *url, *path;
    } cases[] = {
        {"/path/caf%C3%A9", "/path/caf\xc3\xa9"},
        {"/path/%41%2f%2F", "/path/A//"},
        {"/path/%e9", "/path/\xe9"},
        {"/path/100%", "/path/100%"},
        {"/path/%4", "/path/%4"},
        {"/path/%zz%", "/path/%zz%"},
        {"/path/a%20b?c%20d", "/path/a b"},
        {"/path/%00x", "/path/\0x"},
    };

    UP(NULL);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = strlen(cases[i].path);
        if (i == 7)
            n = 8;
        get(cases[i].url);
        ck_assert_int_eq(resp.status, 200);
        ck_assert_msg(resp.body_len == n &&
                          memcmp(resp.body, cases[i].path, n) == 0,
                      "%s: PATH_INFO '%s'", cases[i].url, resp.body);
    }
}
END_TEST

/* A proxy's absolute-form target: the path and query are what count. */
START_TEST(test_absolute_form)
{
    UP(NULL);
    get("http://example.com:8080/env/p?q=1");
    assert_env("PATH_INFO=str:'/env/p'");
    assert_env("QUERY_STRING=str:'q=1'");
    assert_env("RAW_URI=str:'http://example.com:8080/env/p?q=1'");
}
END_TEST

/* An absolute-form target with no path keeps its query. */
START_TEST(test_absolute_form_without_path)
{
    UP(NULL);
    exchange("GET http://example.com?q=1 HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert_int_eq(resp.status, 200);
    assert_env("RAW_URI=str:'http://example.com?q=1'");
    assert_env("QUERY_STRING=str:'q=1'");
}
END_TEST

/* wsgi.errors writes str to the error log. */
START_TEST(test_wsgi_errors)
{
    const char *log;

    UP(NULL);
    get("/errors");
    ck_assert_str_eq(resp.body, "TypeError");
    log = hp_log_text();
    ck_assert_ptr_nonnull(strstr(log, "hello from the app\n"));
    ck_assert_ptr_nonnull(strstr(log, "line one\nline two\n"));
}
END_TEST

static Suite *wsgi_environ_suite(void)
{
    Suite *s = suite_create("wsgi_environ");
    TCase *tc;

    tc = tcase_create("environ");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_environ_basics);
    tcase_add_test(tc, test_environ_multi);
    tcase_add_test(tc, test_environ_post_and_http10);
    tcase_add_test(tc, test_environ_other_methods);
    tcase_add_test(tc, test_method_table_references);
    tcase_add_test(tc, test_method_name_not_leaked);
    tcase_add_test(tc, test_environ_headers);
    tcase_add_test(tc, test_path_info_decoding);
    tcase_add_test(tc, test_absolute_form);
    tcase_add_test(tc, test_absolute_form_without_path);
    tcase_add_test(tc, test_wsgi_errors);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(wsgi_environ_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
