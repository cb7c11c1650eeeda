/* test_conffile.c - check suite for common/conffile.c and the merge in
 * common/settings.c.
 *
 * The parser is a pure function, so most cases hand it a text and compare
 * the words that come out, or the one "FILE:LINE: ..." error. The merge
 * cases write a real file and set SLUICE_CMD_ARGS (tests run forked, so
 * the environment does not leak between them), and the round trip checks
 * that --print-config's output reads back to the same settings.
 */
#include "config.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/conffile.h"
#include "common/log.h"
#include "common/options.h"
#include "common/settings.h"

static char err[512];

/* Parse TEXT as file "f.conf"; the return code. */
static int parse(sl_conffile_t *c, const char *text)
{
    sl_conffile_init(c);
    err[0] = '\0';
    return sl_conffile_parse(c, text, strlen(text), "f.conf", err, sizeof(err));
}

/* *C holds exactly the NULL-terminated words given. */
static void assert_words(const sl_conffile_t *c, ...)
{
    va_list ap;
    int i = 0;

    va_start(ap, c);
    for (const char *w; (w = va_arg(ap, const char *)) != NULL; i++) {
        ck_assert_msg(i < c->n, "missing word %d '%s'", i, w);
        ck_assert_str_eq(c->words[i], w);
    }
    va_end(ap);
    ck_assert_int_eq(c->n, i);
    ck_assert_ptr_null(c->words ? c->words[c->n] : NULL);
}

/* TEXT fails with ERR starting "f.conf:LINE: " and containing WHAT. */
static void assert_fails(const char *text, int line, const char *what)
{
    sl_conffile_t c;
    char head[32];

    ck_assert_int_eq(parse(&c, text), -1);
    snprintf(head, sizeof(head), "f.conf:%d: ", line);
    ck_assert_msg(strncmp(err, head, strlen(head)) == 0,
                  "'%s' does not start with '%s'", err, head);
    ck_assert_msg(strstr(err, what) != NULL, "'%s' not in '%s'", what, err);
    sl_conffile_free(&c);
}

START_TEST(test_settings)
{
    sl_conffile_t c;

    ck_assert_int_eq(parse(&c, "# a comment\n"
                               "\n"
                               "   workers = 3\n"
                               "limit_request_line=100\n"
                               "\tkeep-alive\t=  2.5   \n"
                               "root_path = /a#b # comment\n"
                               "name = shop\r\n"
                               "chdir = /srv"),
                     0);
    assert_words(&c, "--workers=3", "--limit-request-line=100",
                 "--keep-alive=2.5", "--root-path=/a#b", "--name=shop",
                 "--chdir=/srv", NULL);
    ck_assert_int_eq(c.lines[0], 3);
    ck_assert_int_eq(c.lines[5], 8);
    sl_conffile_free(&c);
    ck_assert_int_eq(c.n, 0);
}
END_TEST

START_TEST(test_quoted_values)
{
    sl_conffile_t c;

    ck_assert_int_eq(parse(&c, "root_path = \"/a # b\"  # comment\n"
                               "name = 'it''s'\n"
                               "health_path = \"q\\\"uo\\\\te\\n\"\n"
                               "chdir = ' spaced '\n"),
                     -1); /* 'it''s': text after the quoted value */
    ck_assert_msg(strstr(err, "f.conf:2:") != NULL, "%s", err);
    sl_conffile_free(&c);

    ck_assert_int_eq(parse(&c, "root_path = \"/a # b\"  # comment\n"
                               "health_path = \"q\\\"uo\\\\te\\n\"\n"
                               "chdir = ' spaced '\n"
                               "venv = '\\x'\n"),
                     0);
    assert_words(&c, "--root-path=/a # b", "--health-path=q\"uo\\te\\n",
                 "--chdir= spaced ", "--venv=\\x", NULL);
    sl_conffile_free(&c);
}
END_TEST

START_TEST(test_lists)
{
    sl_conffile_t c;

    ck_assert_int_eq(parse(&c, "bind = 127.0.0.1:1, [::1]:2 ,,\n"
                               "bind = unix:/run/a.sock\n"
                               "bind = \"unix:/run/b,c.sock\"\n"
                               "pythonpath = /x\n"),
                     0);
    assert_words(&c, "--bind=127.0.0.1:1", "--bind=[::1]:2",
                 "--bind=unix:/run/a.sock", "--bind=unix:/run/b,c.sock",
                 "--pythonpath=/x", NULL);
    ck_assert_int_eq(c.lines[2], 2);
    ck_assert_int_eq(c.lines[3], 3);
    sl_conffile_free(&c);
}
END_TEST

START_TEST(test_errors)
{
    assert_fails("workers = 2\nthreds = 2\n", 2, "unknown setting 'threds'");
    assert_fails("workers 2\n", 1, "expected '=' after 'workers'");
    assert_fails("\n\n= 2\n", 3, "expected 'name = value'");
    assert_fails("workers =\n", 1, "'workers' has no value");
    assert_fails("workers = # none\n", 1, "'workers' has no value");
    assert_fails("bind = , ,\n", 1, "'bind' has no value");
    assert_fails("name = \"open\n", 1, "unterminated double-quoted value");
    assert_fails("name = 'open\n", 1, "unterminated single-quoted value");
    assert_fails("name = \"a\" b\n", 1, "unexpected 'b'");
    assert_fails("config = other.conf\n", 1, "not a setting a file can hold");
    assert_fails("check_config = true\n", 1, "not a setting");
    assert_fails("help = true\n", 1, "not a setting");
    assert_fails("a\n", 1, "expected '=' after 'a'");

    sl_conffile_t c;
    sl_conffile_init(&c);
    ck_assert_int_eq(sl_conffile_parse(&c, "workers = 1\nna\0me = x\n", 22,
                                       "f.conf", err, sizeof(err)),
                     -1);
    ck_assert_str_eq(err, "f.conf:2: a NUL byte: not a text file");
    sl_conffile_free(&c);
}
END_TEST

START_TEST(test_empty_and_long)
{
    sl_conffile_t c;
    char name[200];

    ck_assert_int_eq(parse(&c, ""), 0);
    ck_assert_int_eq(c.n, 0);
    sl_conffile_free(&c);
    memset(name, 'a', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    assert_fails(name, 1, "unknown setting 'aaaa");
}
END_TEST

START_TEST(test_split)
{
    sl_conffile_t c;

    sl_conffile_init(&c);
    ck_assert_int_eq(sl_conffile_split(&c,
                                       "  -w 2\t--name='my app' "
                                       "--root-path=\"/a \\\"b\\\"\" a\\ b "
                                       "'' \"\\n\"\n",
                                       err, sizeof(err)),
                     0);
    assert_words(&c, "-w", "2", "--name=my app", "--root-path=/a \"b\"", "a b",
                 "", "\\n", NULL);
    sl_conffile_free(&c);

    ck_assert_int_eq(sl_conffile_split(&c, "-w 'two", err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "unterminated quote") != NULL, "%s", err);
    sl_conffile_free(&c);
    ck_assert_int_eq(sl_conffile_split(&c, "   ", err, sizeof(err)), 0);
    ck_assert_int_eq(c.n, 0);
    sl_conffile_free(&c);
}
END_TEST

START_TEST(test_lookup)
{
    const char *canon = NULL;

    ck_assert_int_eq(sl_options_lookup("limit_request_line", &canon),
                     SL_OPTARG_ONE);
    ck_assert_str_eq(canon, "limit-request-line");
    ck_assert_int_eq(sl_options_lookup("bind", NULL), SL_OPTARG_LIST);
    ck_assert_int_eq(sl_options_lookup("pythonpath", NULL), SL_OPTARG_LIST);
    ck_assert_int_eq(sl_options_lookup("print-config", NULL), SL_OPTARG_ACTION);
    ck_assert_int_eq(sl_options_lookup("version", NULL), SL_OPTARG_ACTION);
    ck_assert_int_eq(sl_options_lookup("workers_", NULL), SL_OPTARG_UNKNOWN);
    ck_assert_int_eq(sl_options_lookup("", NULL), SL_OPTARG_UNKNOWN);
}
END_TEST

/* ---- the merge (common/settings.c) ---- */

static char conf_path[64];

/* A configuration file holding TEXT; its path in conf_path. */
static void write_conf(const char *text)
{
    snprintf(conf_path, sizeof(conf_path), "/tmp/test_conffile.XXXXXX");
    int fd = mkstemp(conf_path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* The effective vector of the NULL-terminated command line; -1 or 0. */
static int build(sl_conffile_t *eff, ...)
{
    char *args[32];
    int n = 0;
    va_list ap;

    va_start(ap, eff);
    args[n++] = "sluice";
    for (char *a; (a = va_arg(ap, char *)) != NULL;) {
        args[n++] = a;
    }
    va_end(ap);
    args[n] = NULL;
    return sl_settings_build(args, NULL, eff);
}

START_TEST(test_merge_order)
{
    sl_conffile_t eff;

    write_conf("workers = 2\n"
               "threads = 3\n"
               "bind = 127.0.0.1:1, 127.0.0.1:2\n"
               "pythonpath = /f\n"
               "name = file\n");
    setenv("SLUICE_CMD_ARGS", "--threads 4 --pythonpath=/e -n env", 1);
    ck_assert_int_eq(build(&eff, "-c", conf_path, "-b", "127.0.0.1:3", "-n",
                           "argv", "--root-path=/r", "m:app", NULL),
                     0);
    /* file, env, argv; a later single value wins; a later list replaces */
    assert_words(&eff, "sluice", "--workers=2", "--threads=4",
                 "--pythonpath=/e", "--bind=127.0.0.1:3", "--name=argv",
                 "--root-path=/r", "--", "m:app", NULL);
    sl_conffile_free(&eff);

    sl_options_t o;
    char *argv[] = {"sluice", "-c", conf_path, "m:app", NULL};
    unsetenv("SLUICE_CMD_ARGS");
    ck_assert_int_eq(sl_settings_build(argv, NULL, &eff), 0);
    ck_assert_str_eq(sl_settings_config_path(argv), conf_path);
    ck_assert_int_eq(sl_options_parse(&o, eff.n, eff.words), 0);
    ck_assert_int_eq(o.workers, 2);
    ck_assert_int_eq(o.nbinds, 2);
    ck_assert_str_eq(o.binds[1], "127.0.0.1:2");
    ck_assert_str_eq(o.app, "m:app");
    ck_assert_ptr_null(o.config); /* workers get no -c */
    unlink(conf_path);
}
END_TEST

START_TEST(test_merge_plain)
{
    sl_conffile_t eff;

    unsetenv("SLUICE_CMD_ARGS");
    ck_assert_int_eq(build(&eff, "-w", "2", "m:app", NULL), 0);
    assert_words(&eff, "sluice", "-w", "2", "m:app", NULL);
    sl_conffile_free(&eff);
    char *argv[] = {"sluice", "m:app", NULL};
    ck_assert_ptr_null(sl_settings_config_path(argv));

    /* so may -c (the command line's wins) and the application */
    setenv("SLUICE_CMD_ARGS", "-c /env.conf", 1);
    ck_assert_str_eq(sl_settings_config_path(argv), "/env.conf");
    char *with_c[] = {"sluice", "--config=/argv.conf", "m:app", NULL};
    ck_assert_str_eq(sl_settings_config_path(with_c), "/argv.conf");

    setenv("SLUICE_CMD_ARGS", "env:app -w 3", 1);
    ck_assert_int_eq(build(&eff, "-w", "2", NULL), 0);
    assert_words(&eff, "sluice", "--workers=2", "--", "env:app", NULL);
    sl_conffile_free(&eff);
}
END_TEST

/* Run F with stderr captured into err. */
static int with_stderr(int (*f)(sl_conffile_t *), sl_conffile_t *eff)
{
    FILE *tmp = tmpfile();
    int saved = dup(STDERR_FILENO);

    dup2(fileno(tmp), STDERR_FILENO);
    int rc = f(eff);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(tmp);
    size_t n = fread(err, 1, sizeof(err) - 1, tmp);
    err[n] = '\0';
    fclose(tmp);
    return rc;
}

static int build_with_conf(sl_conffile_t *eff)
{
    return build(eff, "--config", conf_path, "m:app", NULL);
}

START_TEST(test_merge_errors)
{
    sl_conffile_t eff;
    char want[256];

    unsetenv("SLUICE_CMD_ARGS");
    write_conf("workers = 2\n\nworkers = many\n");
    ck_assert_int_eq(with_stderr(build_with_conf, &eff), -1);
    snprintf(want, sizeof(want),
             "sluice: error: %s:3: argument -w/--workers: invalid integer:"
             " 'many'\n",
             conf_path);
    ck_assert_str_eq(err, want);
    unlink(conf_path);

    ck_assert_int_eq(with_stderr(build_with_conf, &eff), -1);
    ck_assert_msg(strstr(err, "cannot read the configuration file") != NULL,
                  "%s", err);

    write_conf("timeout = 1\n");
    setenv("SLUICE_CMD_ARGS", "--timeout=-1", 1);
    ck_assert_int_eq(with_stderr(build_with_conf, &eff), -1);
    ck_assert_msg(strstr(err, "SLUICE_CMD_ARGS: argument -t/--timeout") != NULL,
                  "%s", err);
    setenv("SLUICE_CMD_ARGS", "--timeout='1", 1);
    ck_assert_int_eq(with_stderr(build_with_conf, &eff), -1);
    ck_assert_msg(strstr(err, "SLUICE_CMD_ARGS: unterminated quote") != NULL,
                  "%s", err);
    unlink(conf_path);
}
END_TEST

/* --print-config's output, read back as a file, prints the same. */
START_TEST(test_print_round_trip)
{
    sl_options_t o, o2;
    sl_conffile_t c, eff;
    char *argv[] = {"sluice",
                    "-b",
                    "127.0.0.1:1",
                    "-b",
                    "unix:/run/a,b.sock",
                    "--pythonpath=/x,/y",
                    "--root-path=/a \"#q\"",
                    "--umask=0o027",
                    "--keep-alive=0.25",
                    "--log-level=warning",
                    "--loop=asyncio",
                    "--ws-per-message-deflate=false",
                    "--user=nobody",
                    "--http-protocols=h2, h1",
                    "--http2-cleartext=prior-knowledge",
                    "--http2-max-frame-size=32768",
                    "m:app",
                    NULL};
    int argc = (int)(sizeof(argv) / sizeof(argv[0])) - 1;
    static char first[8192], second[8192];

    unsetenv("SLUICE_CMD_ARGS");
    ck_assert_int_eq(sl_options_parse(&o, argc, argv), 0);
    FILE *f = fmemopen(first, sizeof(first), "w");
    sl_options_print(&o, argc, argv, f);
    fclose(f);
    ck_assert_msg(strstr(first, "bind = \"unix:/run/a,b.sock\"\n") != NULL,
                  "%s", first);
    ck_assert_msg(strstr(first, "umask = 0027\n") != NULL, "%s", first);
    ck_assert_msg(strstr(first, "# pid =\n") != NULL, "%s", first);
    ck_assert_msg(strstr(first, "http_protocols = \"h2,h1\"\n") != NULL, "%s",
                  first);
    ck_assert_msg(strstr(first, "http2_cleartext = prior-knowledge\n") != NULL,
                  "%s", first);

    ck_assert_int_eq(parse(&c, first), 0);
    sl_conffile_init(&eff);
    sl_conffile_add(&eff, "sluice", 0);
    for (int i = 0; i < c.n; i++) {
        sl_conffile_add(&eff, c.words[i], 0);
    }
    sl_conffile_add(&eff, "m:app", 0);
    ck_assert_int_eq(sl_options_parse(&o2, eff.n, eff.words), 0);
    f = fmemopen(second, sizeof(second), "w");
    sl_options_print(&o2, eff.n, eff.words, f);
    fclose(f);
    ck_assert_str_eq(first, second);
}
END_TEST

static Suite *conffile_suite(void)
{
    Suite *s = suite_create("conffile");
    TCase *tc = tcase_create("parse");

    tcase_add_test(tc, test_settings);
    tcase_add_test(tc, test_quoted_values);
    tcase_add_test(tc, test_lists);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_empty_and_long);
    tcase_add_test(tc, test_split);
    tcase_add_test(tc, test_lookup);
    suite_add_tcase(s, tc);

    tc = tcase_create("merge");
    tcase_add_test(tc, test_merge_order);
    tcase_add_test(tc, test_merge_plain);
    tcase_add_test(tc, test_merge_errors);
    tcase_add_test(tc, test_print_round_trip);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(conffile_suite());

    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
