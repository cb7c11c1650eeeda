/* test_acceptlimit.c - check suite for common/acceptlimit.c: which accept4()
 * errors are retried at once (the rest pause a listener), and the once-a-second
 * count of its log lines, driven with made-up times. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/acceptlimit.h"
#include "common/log.h"

START_TEST(test_transient)
{
    ck_assert(sl_acceptlimit_transient(EAGAIN));
    ck_assert(sl_acceptlimit_transient(EINTR));
    ck_assert(sl_acceptlimit_transient(ECONNABORTED));
    ck_assert(sl_acceptlimit_transient(EPROTO));
    ck_assert(sl_acceptlimit_transient(EPERM));
    ck_assert(!sl_acceptlimit_transient(EMFILE));
    ck_assert(!sl_acceptlimit_transient(ENFILE));
    ck_assert(!sl_acceptlimit_transient(ENOBUFS));
    ck_assert(!sl_acceptlimit_transient(ENOMEM));
    ck_assert(!sl_acceptlimit_transient(EBADF));
    ck_assert(!sl_acceptlimit_transient(EINVAL));
}
END_TEST

/* The first failure is told at once; those within the next second are
 * held back and told, counted, by the first one after it. */
START_TEST(test_once_a_second)
{
    sl_acceptlimit_t a = {0};
    double span = -1;

    ck_assert_uint_eq(sl_acceptlimit_hit(&a, 100.0, &span), 1);
    ck_assert_double_eq(span, 0);
    for (int i = 1; i < 10; i++)
        ck_assert_uint_eq(sl_acceptlimit_hit(&a, 100.0 + i * 0.1, &span), 0);
    ck_assert_uint_eq(sl_acceptlimit_hit(&a, 101.0, &span), 10);
    ck_assert_double_eq_tol(span, 1.0, 1e-9);
    /* a quiet spell: the next one is told at once, alone */
    ck_assert_uint_eq(sl_acceptlimit_hit(&a, 200.0, &span), 1);
    ck_assert_double_eq_tol(span, 99.0, 1e-9);
    ck_assert_uint_eq(a.total, 12);
}
END_TEST

/* A storm of failures makes one line a second, each with its count. */
START_TEST(test_log_lines)
{
    char path[] = "/tmp/test_acceptlimit_XXXXXX", buf[8192];
    sl_acceptlimit_t a = {0};
    int fd = mkstemp(path), lines = 0;
    FILE *f;
    size_t n;

    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(sl_log_open(path), 0);
    for (int i = 0; i < 3000; i++)
        sl_acceptlimit_log(&a, 10.0 + i / 1000.0, EMFILE, "listener fd 3",
                           true);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    unlink(path);
    buf[n] = '\0';
    for (char *p = buf; (p = strchr(p, '\n')) != NULL; p++)
        lines++;
    ck_assert_int_eq(lines, 3);
    ck_assert_ptr_nonnull(strstr(buf, "listener fd 3: accept4() failed: "
                                      "Too many open files; accepting "
                                      "paused\n"));
    ck_assert_ptr_nonnull(strstr(buf, "accepting paused, 1000 times in the "
                                      "last 1.0s\n"));
}
END_TEST

static Suite *acceptlimit_suite(void)
{
    Suite *s = suite_create("acceptlimit");
    TCase *tc = tcase_create("acceptlimit");

    tcase_add_test(tc, test_transient);
    tcase_add_test(tc, test_once_a_second);
    tcase_add_test(tc, test_log_lines);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(acceptlimit_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
