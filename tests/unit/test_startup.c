/* test_startup.c - check suite for common/startup.c, the first steps of
 * both mains.
 *
 * Each case hands sl_startup() an argv of its own, its strings laid end to
 * end in one buffer as the kernel lays out a real one, so the title module
 * takes that buffer over exactly as it would argv. stdout and stderr go to
 * files in the test's directory so what a failure prints can be read back.
 * Every test runs forked (check's default): the options, the log and the
 * title area start fresh in each.
 */
#include "config.h"

#include <check.h>
#include <stdarg.h>
#include <stdlib.h>

#include "common/proctitle.h"
#include "common/startup.h"
#include "tests/unit/harness_base.h"

#define MAX_ARGS 16

static char area[1024]; /* the argv strings, end to end */
static char *argv_[MAX_ARGS + 1];
static int argc_;
static char out_path[128], err_path[128];
static sl_options_t opt;
static char **args;
static int status = -1;

static void setup(void)
{
    const char *d = h_test_dir();

    snprintf(out_path, sizeof(out_path), "%s/stdout", d);
    snprintf(err_path, sizeof(err_path), "%s/stderr", d);
    ck_assert(freopen(out_path, "w", stdout) != NULL);
    ck_assert(freopen(err_path, "w", stderr) != NULL);
    setvbuf(stderr, NULL, _IONBF, 0);
}

/* sl_startup() on "sluice ARGS..." (NULL-terminated); its answer. */
static bool startup(const char *first, ...)
{
    va_list ap;
    size_t at = 0;

    argc_ = 0;
    va_start(ap, first);
    for (const char *a = first; a != NULL; a = va_arg(ap, const char *)) {
        size_t n = strlen(a) + 1;
        ck_assert_int_lt(argc_, MAX_ARGS);
        ck_assert_uint_le(at + n, sizeof(area));
        argv_[argc_++] = memcpy(area + at, a, n);
        at += n;
    }
    va_end(ap);
    argv_[argc_] = NULL;
    return sl_startup(argc_, argv_, &opt, &args, &status);
}

static const char *out_text(void)
{
    fflush(stdout);
    return h_file_text(out_path);
}

static const char *err_text(void)
{
    return h_file_text(err_path);
}

/* ------------------------------------------------------------------ */
/* going on                                                           */

/* The options are parsed; *ARGS is argv as given (getopt reorders only
 * its own twin), in memory the title does not touch. */
START_TEST(test_parses_and_keeps_argv)
{
    ck_assert(startup("sluice", "app:main", "--workers", "3", "--bind",
                      "127.0.0.1:9000", NULL));
    ck_assert_int_eq(status, -1); /* untouched when going on */
    ck_assert_str_eq(opt.app, "app:main");
    ck_assert_int_eq(opt.workers, 3);
    ck_assert_str_eq(opt.binds[0], "127.0.0.1:9000");
    ck_assert_ptr_nonnull(args);
    ck_assert_ptr_ne(args, argv_);
    for (int i = 0; i < argc_; i++) {
        ck_assert_str_eq(args[i], argv_[i]);
        ck_assert_ptr_ne(args[i], argv_[i]);
    }
    ck_assert_ptr_null(args[argc_]);
    ck_assert_str_eq(args[1], "app:main"); /* not moved to the end */

    /* a title over the old argv leaves the copy and the options alone */
    sl_proctitle_set("sluice", "%s", "sluice: a title as long as argv was");
    ck_assert(strncmp(area, "sluice: a title", 15) == 0);
    ck_assert_str_eq(args[1], "app:main");
    ck_assert_str_eq(args[2], "--workers");
    ck_assert_str_eq(opt.app, "app:main");
    ck_assert_str_eq(opt.binds[0], "127.0.0.1:9000");
    ck_assert_str_eq(err_text(), "");
}
END_TEST

/* --log-level and --error-logfile take effect before main() goes on. */
START_TEST(test_log_set_up)
{
    char path[160];

    snprintf(path, sizeof(path), "%s/error.log", h_test_dir());
    ck_assert(startup("sluice", "--log-level", "debug", "--error-logfile", path,
                      "app:main", NULL));
    ck_assert_int_eq(opt.log_level, SL_LOG_DEBUG);
    ck_assert_str_eq(opt.error_logfile, path);
    sl_debug("a debug line");
    ck_assert_ptr_nonnull(strstr(h_file_text(path), "[DEBUG] a debug line"));
    ck_assert_str_eq(err_text(), "");
}
END_TEST

/* Without --error-logfile the log stays on stderr, at the level asked. */
START_TEST(test_log_level_on_stderr)
{
    ck_assert(startup("sluice", "--log-level", "warning", "app:main", NULL));
    sl_info("an info line");
    sl_warn("a warning line");
    ck_assert_ptr_null(strstr(err_text(), "an info line"));
    ck_assert_ptr_nonnull(strstr(err_text(), "[WARNING] a warning line"));
}
END_TEST

/* ------------------------------------------------------------------ */
/* exiting                                                            */

START_TEST(test_help_exits_ok)
{
    ck_assert(!startup("sluice", "--help", NULL));
    ck_assert_int_eq(status, SL_EXIT_OK);
    ck_assert_ptr_nonnull(strstr(out_text(), "--error-logfile"));
    ck_assert_str_eq(err_text(), "");
}
END_TEST

START_TEST(test_version_exits_ok)
{
    char want[64];

    snprintf(want, sizeof(want), "sluice %s\n", PACKAGE_VERSION);
    ck_assert(!startup("sluice", "--version", NULL));
    ck_assert_int_eq(status, SL_EXIT_OK);
    ck_assert_str_eq(out_text(), want);
}
END_TEST

/* A bad command line: the usage status and one line saying why. */
START_TEST(test_bad_option_is_usage)
{
    ck_assert(!startup("sluice", "--no-such-option", "app:main", NULL));
    ck_assert_int_eq(status, SL_EXIT_USAGE);
    ck_assert_str_eq(err_text(),
                     "sluice: error: unrecognized option '--no-such-option'\n");
    ck_assert_str_eq(out_text(), "");
}
END_TEST

/* An error log that cannot be opened is a usage error, reported on
 * stderr (the log it names does not exist). */
START_TEST(test_error_logfile_unopenable)
{
    char path[160], want[256];

    snprintf(path, sizeof(path), "%s/no/such/dir/error.log", h_test_dir());
    snprintf(want, sizeof(want),
             "sluice: error: cannot open the error log %s: No such file or "
             "directory\n",
             path);
    ck_assert(!startup("sluice", "--error-logfile", path, "app:main", NULL));
    ck_assert_int_eq(status, SL_EXIT_USAGE);
    ck_assert_str_eq(err_text(), want);
    /* the log still goes to stderr */
    sl_error("after the failure");
    ck_assert_ptr_nonnull(strstr(err_text(), "[ERROR] after the failure"));
}
END_TEST

/* The SLUICE_* integers: whole non-negative decimal ints, nothing else;
 * *OUT untouched on a refusal. */
START_TEST(test_int)
{
    static const char *const bad[] = {
        "",   "-1",         "+1",
        " 1", "1 ",         "1x",
        "x",  "2147483648", "99999999999999999999"};
    int v = 0;

    ck_assert_int_eq(sl_startup_int("0", &v), 0);
    ck_assert_int_eq(v, 0);
    ck_assert_int_eq(sl_startup_int("007", &v), 0);
    ck_assert_int_eq(v, 7);
    ck_assert_int_eq(sl_startup_int("2147483647", &v), 0);
    ck_assert_int_eq(v, 2147483647);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 42;
        ck_assert_msg(sl_startup_int(bad[i], &v) == -1, "\"%s\"", bad[i]);
        ck_assert_int_eq(v, 42);
    }
}
END_TEST

static Suite *startup_suite(void)
{
    Suite *s = suite_create("startup");
    TCase *tc = tcase_create("startup");

    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_parses_and_keeps_argv);
    tcase_add_test(tc, test_log_set_up);
    tcase_add_test(tc, test_log_level_on_stderr);
    tcase_add_test(tc, test_help_exits_ok);
    tcase_add_test(tc, test_version_exits_ok);
    tcase_add_test(tc, test_bad_option_is_usage);
    tcase_add_test(tc, test_error_logfile_unopenable);
    tcase_add_test(tc, test_int);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(startup_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
