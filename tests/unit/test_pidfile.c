/* test_pidfile.c - check suite for supervisor/pidfile.c, --pid FILE.
 *
 * Real files in the test's own directory: what is written, that a failed
 * write leaves neither the target nor a temporary file behind, and that
 * only the process a file names removes it.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <stdlib.h>

#include "supervisor/pidfile.h"
#include "tests/unit/harness_base.h"

static char dir[96];

static void setup(void)
{
    snprintf(dir, sizeof(dir), "%s", h_test_dir());
    h_log_to_file();
}

/* Files in DIR other than the log. */
static int files_in_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL) {
        n += e->d_name[0] != '.' && strcmp(e->d_name, "error.log") != 0;
    }
    closedir(d);
    return n;
}

START_TEST(test_pidfile_only_removes_its_own)
{
    char path[160], buf[32] = "";

    snprintf(path, sizeof(path), "%s/p.pid", dir);
    ck_assert_int_eq(sl_pidfile_write(path), 0);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
    fclose(f);
    ck_assert_int_eq(atol(buf), getpid());

    f = fopen(path, "w");
    fprintf(f, "1\n"); /* another supervisor took over */
    fclose(f);
    sl_pidfile_remove(path);
    ck_assert_int_eq(access(path, F_OK), 0);
    ck_assert_int_eq(sl_pidfile_write(path), 0);
    sl_pidfile_remove(path);
    ck_assert_int_eq(access(path, F_OK), -1);
    snprintf(path, sizeof(path), "%s/no/such/dir/p.pid", dir);
    ck_assert_int_eq(sl_pidfile_write(path), -1);
}
END_TEST

/* The pid and a newline, readable by all, and no temporary file left. */
START_TEST(test_written_whole)
{
    char path[160], want[32];
    struct stat st;

    snprintf(path, sizeof(path), "%s/p.pid", dir);
    ck_assert_int_eq(sl_pidfile_write(path), 0);
    snprintf(want, sizeof(want), "%ld\n", (long)getpid());
    ck_assert_str_eq(h_file_text(path), want);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0644);
    ck_assert_int_eq(files_in_dir(), 1);
    ck_assert_int_eq(sl_pidfile_write(path), 0); /* over the old one */
    ck_assert_str_eq(h_file_text(path), want);
    ck_assert_int_eq(files_in_dir(), 1);
}
END_TEST

/* rename() failing (the target is a directory): -1, logged, the
 * temporary file removed. */
START_TEST(test_failed_rename_leaves_nothing)
{
    char path[160];

    snprintf(path, sizeof(path), "%s/taken", dir);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    ck_assert_int_eq(sl_pidfile_write(path), -1);
    ck_assert_ptr_nonnull(strstr(h_log_text(), "rename("));
    ck_assert_int_eq(files_in_dir(), 1); /* the directory alone */
}
END_TEST

START_TEST(test_name_too_long)
{
    char path[5000];

    memset(path, 'a', sizeof(path) - 1);
    path[sizeof(path) - 1] = '\0';
    ck_assert_int_eq(sl_pidfile_write(path), -1);
    ck_assert_ptr_nonnull(strstr(h_log_text(), "pid file name too long"));
}
END_TEST

/* Nothing to remove, or nothing that names anyone: left alone, quietly. */
START_TEST(test_remove_missing_or_empty)
{
    char path[160];

    snprintf(path, sizeof(path), "%s/absent.pid", dir);
    sl_pidfile_remove(path);
    snprintf(path, sizeof(path), "%s/empty.pid", dir);
    fclose(fopen(path, "w"));
    sl_pidfile_remove(path);
    ck_assert_int_eq(access(path, F_OK), 0);
    ck_assert_str_eq(h_log_text(), "");
}
END_TEST

static Suite *pidfile_suite(void)
{
    Suite *s = suite_create("pidfile");
    TCase *tc = tcase_create("pidfile");

    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_pidfile_only_removes_its_own);
    tcase_add_test(tc, test_written_whole);
    tcase_add_test(tc, test_failed_rename_leaves_nothing);
    tcase_add_test(tc, test_name_too_long);
    tcase_add_test(tc, test_remove_missing_or_empty);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pidfile_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
