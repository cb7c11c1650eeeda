/* test_reload.c - check suite for supervisor/reload.c, --reload's watcher.
 *
 * Real inotify on the test's own directory, driven by a loop of the
 * test's own one pass at a time: which names count, that a burst of
 * changes is reported once and names its first file, that a worker's
 * report adds its directories, and that the report directory goes with
 * sl_reload_close(). A change that must not count is followed by one that
 * must: the report then names the second, which proves the first was
 * ignored without waiting for nothing to happen.
 */
#include "config.h"

#include <check.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "supervisor/reload.h"
#include "tests/unit/harness_base.h"

static char dir[96];
static struct ev_loop *loop;
static sl_options_t opt;
static sl_reload_t rl;
static int changes;
static char changed[PATH_MAX];

static void on_change(void *ctx, const char *path)
{
    (void)ctx;
    changes++;
    snprintf(changed, sizeof(changed), "%s", path);
}

static bool changed_once(void *arg)
{
    (void)arg;
    return changes > 0;
}

static void setup(void)
{
    snprintf(dir, sizeof(dir), "%s", h_test_dir());
    h_log_to_file();
    ck_assert_int_eq(setenv("TMPDIR", dir, 1), 0);
    loop = ev_loop_new(EVFLAG_AUTO);
    ck_assert_ptr_nonnull(loop);
    memset(&opt, 0, sizeof(opt));
    opt.reload = true;
    opt.chdir = dir;
    changes = 0;
    changed[0] = '\0';
}

static void teardown(void)
{
    sl_reload_close(&rl);
    ev_loop_destroy(loop);
}

static void put(const char *name, const char *text)
{
    char path[PATH_MAX];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    ck_assert_msg(f != NULL, "fopen %s: %s", path, strerror(errno));
    fputs(text, f);
    fclose(f);
}

static void make_dir(const char *name)
{
    char path[PATH_MAX];

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    ck_assert_int_eq(mkdir(path, 0700), 0);
}

/* The change reported after a burst, which must name NAME (under dir). */
static void expect_change(const char *name)
{
    char want[PATH_MAX];

    ck_assert_msg(h_loop_until(loop, changed_once, NULL), "no change seen");
    snprintf(want, sizeof(want), "%s/%s", dir, name);
    ck_assert_str_eq(changed, want);
}

START_TEST(test_what_counts)
{
    ck_assert(sl_reload_is_source("app.py"));
    ck_assert(sl_reload_is_source("a.py"));
    ck_assert(!sl_reload_is_source(".py"));
    ck_assert(!sl_reload_is_source(".#app.py")); /* emacs' lock */
    ck_assert(!sl_reload_is_source(".app.py.swp"));
    ck_assert(!sl_reload_is_source("app.pyc"));
    ck_assert(!sl_reload_is_source("app.py~"));
    ck_assert(!sl_reload_is_source("4913")); /* vim's probe */
    ck_assert(!sl_reload_is_source("notes.txt"));
}
END_TEST

START_TEST(test_off_without_the_option)
{
    opt.reload = false;
    ck_assert_int_eq(sl_reload_init(&rl, loop, &opt, on_change, NULL), 0);
    ck_assert(!sl_reload_on(&rl));
    ck_assert_int_eq(sl_reload_take_report(&rl, getpid()), -1);
    ck_assert_int_eq(sl_reload_watch_dir(&rl, dir, true), 0);
    ck_assert_int_eq(rl.ndirs, 0);
}
END_TEST

/* Noise first, then three saves: one report, naming the first .py. */
START_TEST(test_a_burst_is_one_change)
{
    ck_assert_int_eq(sl_reload_init(&rl, loop, &opt, on_change, NULL), 0);
    ck_assert(sl_reload_on(&rl));
    ck_assert_int_eq(rl.ndirs, 1);
    put("notes.txt", "x");
    put(".#app.py", "x");
    put("app.py", "x = 1\n");
    put("other.py", "y = 1\n");
    put("app.py", "x = 2\n");
    expect_change("app.py");
    ck_assert_int_eq(changes, 1);

    /* the next burst is a new report */
    put("other.py", "y = 2\n");
    changes = 0;
    expect_change("other.py");
}
END_TEST

/* An extra file counts in a directory whose .py files do not; a deletion
 * counts too. */
START_TEST(test_extra_file)
{
    char extra[PATH_MAX];

    make_dir("conf");
    snprintf(extra, sizeof(extra), "%s/conf/settings.ini", dir);
    opt.reload_extra_files[0] = extra;
    opt.nreload_extra_files = 1;
    put("conf/settings.ini", "a");
    ck_assert_int_eq(sl_reload_init(&rl, loop, &opt, on_change, NULL), 0);
    ck_assert_int_eq(rl.ndirs, 2);
    put("conf/tool.py", "x = 1\n");
    put("conf/settings.ini", "b");
    expect_change("conf/settings.ini");

    changes = 0;
    ck_assert_int_eq(unlink(extra), 0);
    expect_change("conf/settings.ini");
}
END_TEST

/* A worker's report: its directories are watched (once each), and the
 * report is gone once read. */
START_TEST(test_report_adds_directories)
{
    char report[PATH_MAX], text[PATH_MAX * 4];
    const char *rdir;

    make_dir("pkg");
    ck_assert_int_eq(sl_reload_init(&rl, loop, &opt, on_change, NULL), 0);
    rdir = getenv("SLUICE_RELOAD_DIR");
    ck_assert_ptr_nonnull(rdir);
    ck_assert_str_eq(rdir, rl.report_dir);
    ck_assert_int_eq(strncmp(rdir, dir, strlen(dir)), 0); /* in TMPDIR */
    snprintf(text, sizeof(text),
             "%s/app.py\n%s/pkg/__init__.py\n%s/pkg/mod.py\nrelative.py\n", dir,
             dir, dir);
    snprintf(report, sizeof(report), "%s/4242", rdir);
    FILE *f = fopen(report, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    ck_assert_int_eq(sl_reload_take_report(&rl, 4242), 3);
    ck_assert_int_eq(rl.ndirs, 2); /* dir (already, as --chdir) and pkg */
    ck_assert_int_eq(access(report, F_OK), -1);
    ck_assert_int_eq(sl_reload_take_report(&rl, 4242), -1);

    put("pkg/mod.py", "z = 1\n");
    expect_change("pkg/mod.py");
}
END_TEST

static bool two_dirs(void *arg)
{
    (void)arg;
    return rl.ndirs == 2;
}

/* A report renamed into the directory later (a worker imported more) is
 * read when the rename shows, without a READY. */
START_TEST(test_later_report_is_read_on_rename)
{
    char tmp[PATH_MAX + 16], report[PATH_MAX + 16];

    make_dir("later");
    ck_assert_int_eq(sl_reload_init(&rl, loop, &opt, on_change, NULL), 0);
    ck_assert_int_eq(rl.ndirs, 1);
    snprintf(tmp, sizeof(tmp), "%s/77.tmp", rl.report_dir);
    snprintf(report, sizeof(report), "%s/77", rl.report_dir);
    FILE *f = fopen(tmp, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%s/later/late.py\n", dir);
    fclose(f);
    ck_assert_int_eq(rename(tmp, report), 0);
    ck_assert_msg(h_loop_until(loop, two_dirs, NULL), "report not read");
    ck_assert_int_eq(access(report, F_OK), -1);

    put("later/late.py", "w = 2\n");
    expect_change("later/late.py");
}
END_TEST

/* Reports nobody read go with the directory. */
START_TEST(test_close_removes_the_report_dir)
{
    char report_dir[PATH_MAX], left[PATH_MAX + 16];

    ck_assert_int_eq(sl_reload_init(&rl, loop, &opt, on_change, NULL), 0);
    snprintf(report_dir, sizeof(report_dir), "%s", rl.report_dir);
    snprintf(left, sizeof(left), "%s/99.tmp", report_dir);
    FILE *f = fopen(left, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    sl_reload_close(&rl);
    ck_assert(!sl_reload_on(&rl));
    ck_assert_int_eq(access(report_dir, F_OK), -1);
    sl_reload_close(&rl); /* twice is harmless */
}
END_TEST

/* A --chdir that does not exist is skipped with a warning; the watcher
 * still starts (the worker will say what is wrong with the directory). */
START_TEST(test_missing_directory_is_skipped)
{
    char missing[PATH_MAX];

    snprintf(missing, sizeof(missing), "%s/nope", dir);
    opt.chdir = missing;
    ck_assert_int_eq(sl_reload_init(&rl, loop, &opt, on_change, NULL), 0);
    ck_assert_int_eq(rl.ndirs, 0);
    ck_assert_ptr_nonnull(strstr(h_log_text(), "--reload: cannot watch"));
}
END_TEST

static Suite *reload_suite(void)
{
    Suite *s = suite_create("reload");
    TCase *tc = tcase_create("reload");

    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_what_counts);
    tcase_add_test(tc, test_off_without_the_option);
    tcase_add_test(tc, test_a_burst_is_one_change);
    tcase_add_test(tc, test_extra_file);
    tcase_add_test(tc, test_report_adds_directories);
    tcase_add_test(tc, test_later_report_is_read_on_rename);
    tcase_add_test(tc, test_close_removes_the_report_dir);
    tcase_add_test(tc, test_missing_directory_is_skipped);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(reload_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
