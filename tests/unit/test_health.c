/* test_health.c - check suite for supervisor/health.c, the hang judge.
 *
 * sl_health_check() is pure: a slot, a moment and two limits in, a verdict
 * out. So every case here is a slot built by hand and judged at chosen
 * moments, the edges of each limit included, with no process and no clock.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/health.h"

#define WHY_LEN 128

static char why[WHY_LEN];
static ev_tstamp next;

static sl_health_t judge(const sl_worker_t *w, ev_tstamp now, double timeout,
                         double boot_timeout)
{
    return sl_health_check(w, now, timeout, boot_timeout, why, sizeof(why),
                           &next);
}

static void setup(void)
{
    memset(why, 0, sizeof(why));
    next = 0;
}

/* The verdicts as the supervisor's test first pinned them down. */
START_TEST(test_health_verdicts)
{
    sl_worker_t w = {
        .state = SL_WORKER_READY, .started = 100, .heartbeat = 110};

    w.last = (sl_ctl_msg_t){.lanes = 2, .busy_lanes = 1, .oldest = 50};
    ck_assert_int_eq(judge(&w, 115, 30, 30),
                     SL_HEALTH_OK); /* one lane of two stuck: slow, not hung */
    ck_assert(next == 140);
    ck_assert_int_eq(judge(&w, 140.5, 30, 30), SL_HEALTH_HUNG);
    ck_assert_str_eq(why, "timed out: no heartbeat for 30.5s");
    w.last.busy_lanes = 2;
    w.last.oldest = 29;
    ck_assert_int_eq(judge(&w, 115, 30, 30), SL_HEALTH_OK);
    w.last.oldest = 31;
    ck_assert_int_eq(judge(&w, 115, 30, 30), SL_HEALTH_HUNG);
    ck_assert_str_eq(why,
                     "timed out: all 2 lanes busy with a request for 31.0s");
    ck_assert_int_eq(judge(&w, 999, 0, 30),
                     SL_HEALTH_OK); /* --timeout 0: never */
    w.last = (sl_ctl_msg_t){.lanes = 0, .busy_lanes = 0, .oldest = 99};
    ck_assert_int_eq(judge(&w, 115, 30, 30),
                     SL_HEALTH_OK); /* no lanes reported: only silence counts */

    w.state = SL_WORKER_BOOTING;
    next = 0;
    ck_assert_int_eq(judge(&w, 120, 30, 30), SL_HEALTH_OK);
    ck_assert(next == 130);
    ck_assert_int_eq(judge(&w, 130, 30, 30), SL_HEALTH_LATE);
    ck_assert_ptr_nonnull(strstr(why, "within 30.0s"));
    w.state = SL_WORKER_STOPPING;
    ck_assert_int_eq(judge(&w, 999, 30, 30),
                     SL_HEALTH_OK); /* draining workers send no heartbeat */
}
END_TEST

/* Both limits are reached at their exact moment, not a tick later. */
START_TEST(test_limits_are_inclusive)
{
    sl_worker_t w = {.state = SL_WORKER_READY, .heartbeat = 10};

    ck_assert_int_eq(judge(&w, 39.999, 30, 0), SL_HEALTH_OK);
    ck_assert_int_eq(judge(&w, 40, 30, 0), SL_HEALTH_HUNG);
    ck_assert_str_eq(why, "timed out: no heartbeat for 30.0s");

    w.last = (sl_ctl_msg_t){.lanes = 3, .busy_lanes = 3, .oldest = 30};
    ck_assert_int_eq(judge(&w, 11, 30, 0), SL_HEALTH_HUNG);
    ck_assert_str_eq(why,
                     "timed out: all 3 lanes busy with a request for 30.0s");

    w = (sl_worker_t){.state = SL_WORKER_BOOTING, .started = 5};
    ck_assert_int_eq(judge(&w, 6.999, 0, 2), SL_HEALTH_OK);
    ck_assert_int_eq(judge(&w, 7, 0, 2), SL_HEALTH_LATE);
    ck_assert_str_eq(why, "did not become ready within 2.0s (--boot-timeout)");
}
END_TEST

/* A worker reporting more busy lanes than it has (a counter racing the
 * lane count) is judged as all busy, not as fine. */
START_TEST(test_more_busy_than_lanes_is_all_busy)
{
    sl_worker_t w = {.state = SL_WORKER_READY, .heartbeat = 100};

    w.last = (sl_ctl_msg_t){.lanes = 2, .busy_lanes = 3, .oldest = 45};
    ck_assert_int_eq(judge(&w, 101, 30, 0), SL_HEALTH_HUNG);
}
END_TEST

/* --boot-timeout 0 is no limit: a booting worker is never late, whatever
 * --timeout says (that one is for serving workers), and no wake-up is
 * asked for. */
START_TEST(test_boot_timeout_zero_is_no_limit)
{
    sl_worker_t w = {.state = SL_WORKER_BOOTING, .started = 1, .heartbeat = 1};

    ck_assert_int_eq(judge(&w, 1e6, 30, 0), SL_HEALTH_OK);
    ck_assert(next == 0);
}
END_TEST

/* Free and stopping slots are never judged, and never ask for a wake-up;
 * nor is a worker that said it drains, before the supervisor has let it go
 * (its DRAINING may report a lane stuck past the limit). */
START_TEST(test_free_and_leaving_are_not_judged)
{
    sl_worker_t w = {.state = SL_WORKER_FREE};

    ck_assert_int_eq(judge(&w, 1e6, 1, 1), SL_HEALTH_OK);
    w.state = SL_WORKER_STOPPING;
    w.last = (sl_ctl_msg_t){.lanes = 1, .busy_lanes = 1, .oldest = 1e5};
    ck_assert_int_eq(judge(&w, 1e6, 1, 1), SL_HEALTH_OK);
    w.state = SL_WORKER_READY;
    w.heartbeat = w.own_drain = 1e6;
    ck_assert_int_eq(judge(&w, 1e6, 1, 1), SL_HEALTH_OK);
    w.state = SL_WORKER_BOOTING;
    ck_assert_int_eq(judge(&w, 1e6, 1, 1), SL_HEALTH_OK);
    ck_assert(next == 0);
    ck_assert_str_eq(why, "");
}
END_TEST

/* *NEXT only ever moves earlier: the supervisor folds every worker's
 * moment into one timer. A verdict other than OK leaves it alone. */
START_TEST(test_next_is_lowered_never_raised)
{
    sl_worker_t ready = {.state = SL_WORKER_READY, .heartbeat = 100};
    sl_worker_t booting = {.state = SL_WORKER_BOOTING, .started = 100};

    next = 120;
    ck_assert_int_eq(judge(&ready, 101, 30, 10), SL_HEALTH_OK);
    ck_assert(next == 120); /* 130 is later */
    ck_assert_int_eq(judge(&booting, 101, 30, 10), SL_HEALTH_OK);
    ck_assert(next == 110); /* earlier: taken */
    ck_assert_int_eq(judge(&booting, 111, 30, 10), SL_HEALTH_LATE);
    ck_assert(next == 110);
    ck_assert_int_eq(judge(&ready, 131, 30, 10), SL_HEALTH_HUNG);
    ck_assert(next == 110);
}
END_TEST

/* The reason is cut to the room given, and still a C string. */
START_TEST(test_why_is_truncated_to_size)
{
    sl_worker_t w = {.state = SL_WORKER_READY, .heartbeat = 0};
    char small[8];

    memset(small, 'x', sizeof(small));
    ck_assert_int_eq(
        sl_health_check(&w, 100, 30, 0, small, sizeof(small), &next),
        SL_HEALTH_HUNG);
    ck_assert_str_eq(small, "timed o");
}
END_TEST

static Suite *health_suite(void)
{
    Suite *s = suite_create("health");
    TCase *tc = tcase_create("verdicts");

    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_health_verdicts);
    tcase_add_test(tc, test_limits_are_inclusive);
    tcase_add_test(tc, test_more_busy_than_lanes_is_all_busy);
    tcase_add_test(tc, test_boot_timeout_zero_is_no_limit);
    tcase_add_test(tc, test_free_and_leaving_are_not_judged);
    tcase_add_test(tc, test_next_is_lowered_never_raised);
    tcase_add_test(tc, test_why_is_truncated_to_size);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(health_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
