/* test_metrics.c - check suite for common/metrics.c, the shared segment.
 *
 * The supervisor's side and a worker's side in one process: a segment is
 * created, attached as a worker would (through its descriptor), written
 * through sl_metrics_self and read back through the supervisor's mapping,
 * folded, and refused when it does not match.
 */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/metrics.h"

START_TEST(test_worker_writes_what_the_supervisor_reads)
{
    int fd;
    sl_metrics_seg_t *seg = sl_metrics_create(8, &fd);
    sl_metrics_slot_t copy, retired = {0};

    ck_assert_ptr_nonnull(seg);
    ck_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    /* a worker gets its own descriptor (the exec'd copy), and closes it */
    int dup_fd = dup(fd);
    ck_assert_int_eq(sl_metrics_attach(dup_fd, 3), 0);
    ck_assert_int_eq(fcntl(dup_fd, F_GETFD), -1);
    ck_assert_ptr_ne(sl_metrics_self, &seg->slots[2]); /* its own mapping */

    sl_metrics_slot_t *self = sl_metrics_self;
    sl_metrics_add(&sl_metrics_self->bytes_in, 42);
    sl_metrics_add(
        &self->requests[SL_METRICS_APP][SL_METRICS_GET][SL_METRICS_2XX], 1);
    sl_metrics_add(
        &self->requests[SL_METRICS_STATIC][SL_METRICS_HEAD][SL_METRICS_3XX], 2);
    sl_metrics_set(&sl_metrics_self->conns_open, 5);
    sl_metrics_observe(&sl_metrics_self->duration, 0.003);
    sl_metrics_read(&seg->slots[2], &copy);
    ck_assert_uint_eq(copy.bytes_in, 42);
    ck_assert_uint_eq(
        copy.requests[SL_METRICS_APP][SL_METRICS_GET][SL_METRICS_2XX], 1);
    ck_assert_uint_eq(
        copy.requests[SL_METRICS_STATIC][SL_METRICS_HEAD][SL_METRICS_3XX], 2);
    ck_assert_uint_eq(
        copy.requests[SL_METRICS_APP][SL_METRICS_HEAD][SL_METRICS_3XX], 0);
    ck_assert_uint_eq(copy.conns_open, 5);
    ck_assert_uint_eq(copy.duration.bucket[3], 1); /* le 0.005 */
    ck_assert_uint_eq(copy.duration.sum_ns, 3000000);
    ck_assert_uint_eq(seg->slots[1].bytes_in, 0); /* the neighbour */

    sl_metrics_fold(&retired, &seg->slots[2]);
    ck_assert_uint_eq(retired.bytes_in, 42);
    ck_assert_uint_eq(
        retired.requests[SL_METRICS_STATIC][SL_METRICS_HEAD][SL_METRICS_3XX],
        2);
    ck_assert_uint_eq(retired.conns_open, 0);
    ck_assert_uint_eq(sl_metrics_self->bytes_in, 0); /* zeroed for reuse */
    close(fd);
}
END_TEST

START_TEST(test_attach_refuses_a_mismatch)
{
    int fd;
    sl_metrics_seg_t *seg = sl_metrics_create(2, &fd);
    sl_metrics_slot_t *before = sl_metrics_self;

    ck_assert_ptr_nonnull(seg);
    ck_assert_int_eq(sl_metrics_attach(dup(fd), 3), -1); /* no slot 3 */
    ck_assert_int_eq(sl_metrics_attach(dup(fd), 0), -1);
    seg->magic = 0;
    ck_assert_int_eq(sl_metrics_attach(dup(fd), 1), -1);
    int null_fd = open("/dev/null", O_RDONLY);
    ck_assert_int_eq(sl_metrics_attach(null_fd, 1), -1); /* too small */
    ck_assert_ptr_eq(sl_metrics_self, before); /* still counting privately */
    sl_metrics_add(&sl_metrics_self->bytes_out, 1);
    close(fd);
}
END_TEST

static Suite *metrics_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("segment");

    tcase_add_test(tc, test_worker_writes_what_the_supervisor_reads);
    tcase_add_test(tc, test_attach_refuses_a_mismatch);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(metrics_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
