/* test_expo.c - check suite for supervisor/expo.c and the aggregation in
 * common/metrics.c: slots built by hand, text checked line by line.
 *
 * The promises under test: counters are retired + live and never go back
 * when a slot is folded; gauges come from live slots only; histograms are
 * cumulative with _count equal to the +Inf bucket; every family has HELP
 * and TYPE before its samples; worker_up covers every id up to NUP.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/expo.h"

static sl_buf_t out;

static void setup(void)
{
    memset(&out, 0, sizeof(out));
}

static void teardown(void)
{
    sl_buf_free(&out);
}

/* The text, NUL-terminated. */
static const char *format(const sl_metrics_slot_t *retired,
                          const sl_expo_worker_t *w, int nw, int nup,
                          const sl_expo_super_t *sup)
{
    out.len = out.off = 0;
    ck_assert_int_eq(sl_expo_format(&out, retired, w, nw, nup, sup), 0);
    ck_assert_int_eq(sl_buf_append(&out, "", 1), 0);
    return out.data;
}

/* The sample name of sluice_requests_total{METHOD, CODE, HANDLER}. */
#define REQS(method, code, handler)                                            \
    "sluice_requests_total{method=\"" method "\",code=\"" code                 \
    "\",handler=\"" handler "\"}"

/* The value of the sample line that begins with NAME followed by a space. */
static double sample(const char *text, const char *name)
{
    char key[256];
    const char *p;

    snprintf(key, sizeof(key), "\n%s ", name);
    p = strstr(text, key);
    ck_assert_msg(p != NULL, "no sample %s", name);
    return strtod(p + strlen(key), NULL);
}

START_TEST(test_counters_sum_retired_and_live)
{
    sl_metrics_slot_t retired = {0};
    sl_expo_worker_t w[2] = {{.id = 1, .up = true}, {.id = 2, .up = false}};
    sl_expo_super_t sup = {.target = 2};
    const char *t;

    retired.requests[SL_METRICS_APP][SL_METRICS_GET][SL_METRICS_2XX] = 5;
    w[0].m.requests[SL_METRICS_APP][SL_METRICS_GET][SL_METRICS_2XX] = 3;
    w[1].m.requests[SL_METRICS_APP][SL_METRICS_GET][SL_METRICS_2XX] = 2;
    w[1].m.requests[SL_METRICS_APP][SL_METRICS_POST][SL_METRICS_5XX] = 1;
    retired.requests[SL_METRICS_STATIC][SL_METRICS_GET][SL_METRICS_3XX] = 2;
    w[0].m.requests[SL_METRICS_STATIC][SL_METRICS_GET][SL_METRICS_2XX] = 6;
    w[1].m.requests[SL_METRICS_STATIC][SL_METRICS_HEAD][SL_METRICS_2XX] = 1;
    retired.bytes_in = 100;
    w[0].m.bytes_in = 7;
    retired.conns_open = 99; /* a gauge in the retired totals is ignored */
    w[0].m.conns_open = 4;
    w[1].m.conns_open = 1;
    t = format(&retired, w, 2, 3, &sup);
    ck_assert_double_eq(sample(t, REQS("GET", "2xx", "app")), 10);
    ck_assert_double_eq(sample(t, REQS("POST", "5xx", "app")), 1);
    ck_assert_double_eq(sample(t, REQS("HEAD", "4xx", "app")), 0);
    /* a --static map's responses: a series of their own, never the app's */
    ck_assert_double_eq(sample(t, REQS("GET", "2xx", "static")), 6);
    ck_assert_double_eq(sample(t, REQS("GET", "3xx", "static")), 2);
    ck_assert_double_eq(sample(t, REQS("HEAD", "2xx", "static")), 1);
    ck_assert_double_eq(sample(t, REQS("HEAD", "2xx", "app")), 0);
    ck_assert_double_eq(sample(t, REQS("POST", "5xx", "static")), 0);
    ck_assert_double_eq(sample(t, REQS("other", "none", "static")), 0);
    ck_assert_double_eq(sample(t, "sluice_received_bytes_total"), 107);
    ck_assert_double_eq(sample(t, "sluice_connections_open"), 5);
    ck_assert_double_eq(sample(t, "sluice_worker_up{worker=\"1\"}"), 1);
    ck_assert_double_eq(sample(t, "sluice_worker_up{worker=\"2\"}"), 0);
    ck_assert_double_eq(sample(t, "sluice_worker_up{worker=\"3\"}"), 0);
    ck_assert_ptr_null(strstr(t, "worker=\"4\""));
    ck_assert_double_eq(sample(t, "sluice_workers_target"), 2);
}
END_TEST

/* Folding a dead slot keeps every counter where it was, zeroes the slot
 * (gauges included), and the next worker in the slot counts on top. */
START_TEST(test_fold_never_goes_back)
{
    sl_metrics_slot_t retired = {0};
    sl_metrics_slot_t slot = {0};
    sl_expo_worker_t w = {.id = 1, .up = true};
    sl_expo_super_t sup = {0};

    slot.requests[SL_METRICS_APP][SL_METRICS_GET][SL_METRICS_2XX] = 4;
    /* the requests' last word: the fold walks them all */
    slot.requests[SL_METRICS_STATIC][SL_METRICS_OTHER][SL_METRICS_NONE] = 3;
    slot.inflight = 2;
    sl_metrics_observe(&slot.duration, 0.003);
    sl_metrics_read(&slot, &w.m);
    double before =
        sample(format(&retired, &w, 1, 1, &sup), REQS("GET", "2xx", "app"));
    ck_assert_double_eq(before, 4);

    sl_metrics_fold(&retired, &slot);
    ck_assert_uint_eq(
        slot.requests[SL_METRICS_APP][SL_METRICS_GET][SL_METRICS_2XX], 0);
    ck_assert_uint_eq(slot.inflight, 0);
    ck_assert_uint_eq(retired.inflight, 0); /* gauges are not folded */
    const char *t = format(&retired, NULL, 0, 1, &sup);
    ck_assert_double_eq(sample(t, REQS("GET", "2xx", "app")), 4);
    ck_assert_double_eq(sample(t, REQS("other", "none", "static")), 3);
    ck_assert_double_eq(sample(t, "sluice_request_duration_seconds_count"), 1);
    ck_assert_double_eq(sample(t, "sluice_requests_in_flight"), 0);

    /* the replacement */
    slot.requests[SL_METRICS_APP][SL_METRICS_GET][SL_METRICS_2XX] = 1;
    sl_metrics_read(&slot, &w.m);
    t = format(&retired, &w, 1, 1, &sup);
    ck_assert_double_eq(sample(t, REQS("GET", "2xx", "app")), 5);
}
END_TEST

START_TEST(test_histogram_is_cumulative)
{
    sl_metrics_slot_t retired = {0};
    sl_expo_super_t sup = {0};
    const char *t;

    sl_metrics_observe(&retired.queue, 0.0001); /* first bucket */
    sl_metrics_observe(&retired.queue, 0.001);  /* le is inclusive */
    sl_metrics_observe(&retired.queue, 0.2);    /* 0.25 */
    sl_metrics_observe(&retired.queue, 60);     /* +Inf only */
    sl_metrics_observe(&retired.queue, -1);     /* a clock step: 0 */
    t = format(&retired, NULL, 0, 0, &sup);
    ck_assert_double_eq(
        sample(t, "sluice_request_queue_seconds_bucket{le=\"0.0005\"}"), 2);
    ck_assert_double_eq(
        sample(t, "sluice_request_queue_seconds_bucket{le=\"0.001\"}"), 3);
    ck_assert_double_eq(
        sample(t, "sluice_request_queue_seconds_bucket{le=\"0.1\"}"), 3);
    ck_assert_double_eq(
        sample(t, "sluice_request_queue_seconds_bucket{le=\"0.25\"}"), 4);
    ck_assert_double_eq(
        sample(t, "sluice_request_queue_seconds_bucket{le=\"10\"}"), 4);
    ck_assert_double_eq(
        sample(t, "sluice_request_queue_seconds_bucket{le=\"+Inf\"}"), 5);
    ck_assert_double_eq(sample(t, "sluice_request_queue_seconds_count"), 5);
    ck_assert_double_eq_tol(sample(t, "sluice_request_queue_seconds_sum"),
                            60.2011, 1e-6);
}
END_TEST

/* Every sample's family was announced (HELP, then TYPE) before it, and
 * each family is announced once. */
START_TEST(test_families_announced_once)
{
    sl_metrics_slot_t retired = {0};
    sl_expo_worker_t w = {.id = 1, .up = true};
    sl_expo_super_t sup = {
        .restarts = {[SL_EXPO_RELOAD] = 2, [SL_EXPO_MEMORY] = 3}};
    char *copy, *line, *save;
    char current[128] = "";
    int families = 0;

    copy = strdup(format(&retired, &w, 1, 1, &sup));
    for (line = strtok_r(copy, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "# HELP ", 7) == 0) {
            char name[128];
            ck_assert_int_eq(sscanf(line + 7, "%127s", name), 1);
            char key[160];
            snprintf(key, sizeof(key), "# HELP %s ", name);
            ck_assert_ptr_eq(strstr(out.data, key), out.data + (line - copy));
            snprintf(current, sizeof(current), "%s", name);
            families++;
        } else if (strncmp(line, "# TYPE ", 7) == 0) {
            ck_assert_int_eq(strncmp(line + 7, current, strlen(current)), 0);
        } else {
            ck_assert_msg(strncmp(line, current, strlen(current)) == 0,
                          "%s outside its family %s", line, current);
        }
    }
    free(copy);
    ck_assert_int_ge(families, 20);
    ck_assert_double_eq(
        sample(out.data, "sluice_worker_restarts_total{cause=\"reload\"}"), 2);
    ck_assert_double_eq(
        sample(out.data, "sluice_worker_restarts_total{cause=\"crash\"}"), 0);
    ck_assert_double_eq(
        sample(out.data, "sluice_worker_restarts_total{cause=\"memory\"}"), 3);
}
END_TEST

static Suite *expo_suite(void)
{
    Suite *s = suite_create("expo");
    TCase *tc = tcase_create("format");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_counters_sum_retired_and_live);
    tcase_add_test(tc, test_fold_never_goes_back);
    tcase_add_test(tc, test_histogram_is_cumulative);
    tcase_add_test(tc, test_families_announced_once);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(expo_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
