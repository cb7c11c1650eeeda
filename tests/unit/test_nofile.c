/* test_nofile.c - check suite for supervisor/nofile.c: the descriptors a
 * worker needs, and the soft RLIMIT_NOFILE raised to fit them within the
 * hard limit. Each test runs in its own process (check's fork mode), so
 * the limits it sets die with it. */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/log.h"
#include "common/options.h"
#include "supervisor/nofile.h"

static char logpath[] = "/tmp/test_nofile_XXXXXX";

static void setup(void)
{
    int fd = mkstemp(logpath);

    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(sl_log_open(logpath), 0);
}

static void teardown(void)
{
    unlink(logpath);
}

static void options(sl_options_t *o, const char *conns, const char *workers)
{
    char *argv[] = {"sluice", "--worker-connections", (char *)conns,
                    "-w",     (char *)workers,        "app:app",
                    NULL};

    ck_assert_int_eq(sl_options_parse(o, 6, argv), 0);
}

static const char *log_text(void)
{
    static char buf[4096];
    FILE *f = fopen(logpath, "r");
    size_t n;

    ck_assert_ptr_nonnull(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void set_limits(rlim_t soft, rlim_t hard)
{
    struct rlimit rl = {soft, hard};

    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

static struct rlimit limits(void)
{
    struct rlimit rl;

    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    return rl;
}

/* connections + listeners + SL_NOFILE_SLACK; the supervisor's own need
 * only when it has more workers than a worker has connections. */
START_TEST(test_need)
{
    sl_options_t o;

    options(&o, "1000", "4");
    ck_assert_uint_eq(sl_nofile_need(&o, 2), 1000 + 2 + SL_NOFILE_SLACK);
    options(&o, "1", "100");
    ck_assert_uint_eq(sl_nofile_need(&o, 1), 1 + 100 * 2 + SL_NOFILE_SLACK);
}
END_TEST

/* Room under the hard limit: the soft limit is raised to the need, with
 * an INFO line and no warning. */
START_TEST(test_raised_within_hard)
{
    struct rlimit before = limits();

    if (before.rlim_max < 512)
        return; /* this machine's hard limit leaves no room to test */
    set_limits(100, before.rlim_max);
    ck_assert_int_eq(sl_nofile_fit(300, 236), 0);
    ck_assert_uint_eq(limits().rlim_cur, 300);
    ck_assert_uint_eq(limits().rlim_max, before.rlim_max);
    ck_assert_ptr_nonnull(strstr(log_text(), "raised from 100 to 300"));
    ck_assert_ptr_null(strstr(log_text(), "WARNING"));
}
END_TEST

/* Enough already: nothing changes, nothing is said (never lowered). */
START_TEST(test_enough_untouched)
{
    struct rlimit before = limits();

    if (before.rlim_max < 512)
        return;
    set_limits(500, before.rlim_max);
    ck_assert_int_eq(sl_nofile_fit(300, 236), 0);
    ck_assert_uint_eq(limits().rlim_cur, 500);
    ck_assert_str_eq(log_text(), "");
}
END_TEST

/* A hard limit below the need: as far as it goes, and one warning that
 * names the figures. The hard limit is never lifted, even by a
 * privileged process. */
START_TEST(test_hard_too_low_warns)
{
    const char *text;

    set_limits(64, 128);
    ck_assert_int_eq(sl_nofile_fit(1065, 1000), -1);
    ck_assert_uint_eq(limits().rlim_cur, 128);
    ck_assert_uint_eq(limits().rlim_max, 128);
    text = log_text();
    ck_assert_ptr_nonnull(strstr(text, "[WARNING] RLIMIT_NOFILE: 1000 worker "
                                       "connections need 1065 descriptors"));
    ck_assert_ptr_nonnull(strstr(text, "the hard limit is 128"));
    ck_assert_ptr_nonnull(strstr(text, "raised from 64 to 128 only"));
    ck_assert_ptr_eq(strchr(text, '\n'), text + strlen(text) - 1);
}
END_TEST

static Suite *nofile_suite(void)
{
    Suite *s = suite_create("nofile");
    TCase *tc = tcase_create("nofile");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_need);
    tcase_add_test(tc, test_raised_within_hard);
    tcase_add_test(tc, test_enough_untouched);
    tcase_add_test(tc, test_hard_too_low_warns);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(nofile_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
