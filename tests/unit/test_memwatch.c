/* test_memwatch.c - check suite for supervisor/memwatch.c.
 *
 * The parser and the bound are pure and judged on chosen inputs. The tick
 * reads real processes: slots filled in by hand name this test process
 * (whose PSS is a few MiB: past a bound of 1 MiB, under the largest), or
 * a child that is gone or not yet reaped, which must be skipped quietly.
 */
#include "config.h"

#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "supervisor/memwatch.h"
#include "tests/unit/harness_base.h"

#define ROLLUP_HEAD                                                            \
    "55c100595000-7ffe0a48d000 ---p 00000000 00:00 0        [rollup]\n"        \
    "Rss:                1752 kB\n"

static long long parse(const char *text)
{
    return sl_memwatch_parse_pss(text, strlen(text));
}

/* The kernel's format: "Pss:" exactly, its figure in kB. */
START_TEST(test_parse_pss)
{
    ck_assert_int_eq(parse(ROLLUP_HEAD "Pss:                 256 kB\n"
                                       "Pss_Dirty:           112 kB\n"
                                       "Pss_Anon:            112 kB\n"),
                     256);
    /* a part of it before the line itself is not it */
    ck_assert_int_eq(parse(ROLLUP_HEAD "Pss_Anon:   112 kB\n"
                                       "Pss:    4194305 kB\n"),
                     4194305);
    ck_assert_int_eq(parse("Pss:\t7 kB"), 7); /* no newline at the end */
    ck_assert_int_eq(parse("Pss: 0 kB\n"), 0);
    /* a line cut short (at the end of what was read) is no figure */
    ck_assert_int_eq(sl_memwatch_parse_pss("Pss: 12 kB\n", 7), -1);
}
END_TEST

START_TEST(test_parse_no_figure)
{
    ck_assert_int_eq(parse(""), -1); /* a zombie's file */
    ck_assert_int_eq(parse(ROLLUP_HEAD "Pss_Anon: 112 kB\n"), -1);
    ck_assert_int_eq(parse("Pss: kB\n"), -1);
    ck_assert_int_eq(parse("Pss: 12\n"), -1);
    ck_assert_int_eq(parse("Pss: 12 MB\n"), -1);
    ck_assert_int_eq(parse(" Pss: 12 kB\n"), -1);
    ck_assert_int_eq(parse("Pss: 99999999999999999999999 kB\n"), -1);
}
END_TEST

/* Each bound is the limit less 0 to 10 %, the same for one pid, and the
 * pids spread over the whole range. */
START_TEST(test_bound_jitter)
{
    const long long limit = 200 * 1024;
    long long lo = limit, hi = 0;

    for (pid_t pid = 2; pid < 20000; pid++) {
        long long b = sl_memwatch_bound_kib(200, pid, 12345);
        ck_assert_int_ge(b, limit - limit / 10);
        ck_assert_int_le(b, limit);
        ck_assert_int_eq(b, sl_memwatch_bound_kib(200, pid, 12345));
        lo = b < lo ? b : lo;
        hi = b > hi ? b : hi;
    }
    ck_assert_int_eq(lo, limit - limit / 10);
    ck_assert_int_eq(hi, limit);
    /* another supervisor (seed) picks differently for the same pid */
    int differ = 0;
    for (pid_t pid = 2; pid < 100; pid++) {
        differ += sl_memwatch_bound_kib(200, pid, 1) !=
                  sl_memwatch_bound_kib(200, pid, 2);
    }
    ck_assert_int_gt(differ, 80);
}
END_TEST

static sl_worker_t slots[4];
static sl_table_t table = {.slots = slots, .high = 4};
static sl_options_t opts;

static void setup(void)
{
    h_log_to_file();
    memset(slots, 0, sizeof(slots));
    memset(&opts, 0, sizeof(opts));
    for (int i = 0; i < 4; i++) {
        slots[i] = (sl_worker_t){.state = SL_WORKER_READY,
                                 .id = i + 1,
                                 .pid = getpid(),
                                 .gen = 3,
                                 .ctl_fd = -1};
    }
}

static void tick(int limit_mib)
{
    opts.max_worker_memory = limit_mib;
    sl_memwatch_tick(&table, &opts, 3);
}

/* This process is past 1 MiB: marked to retire, as over memory, with its
 * figure in the log, and judged once (it is outdated after). */
START_TEST(test_tick_marks_a_worker_past_its_bound)
{
    size_t size = 4 << 20;
    char want[128], *own = malloc(size);

    ck_assert_ptr_nonnull(own);
    memset(own, 1, size); /* resident, and this process's alone */
    table.high = 1;
    tick(1);
    ck_assert(slots[0].retire);
    ck_assert(slots[0].over_memory);
    snprintf(want, sizeof(want), "[INFO] Worker 1 (pid %ld) uses ",
             (long)getpid());
    ck_assert_ptr_nonnull(strstr(h_log_text(), want));
    ck_assert_ptr_nonnull(strstr(h_log_text(),
                                 " MiB (PSS), past --max-worker-memory 1 (its"
                                 " bound 1 MiB): replacing it\n"));
    size_t before = strlen(h_log_text());
    tick(1);
    ck_assert_int_eq(strlen(h_log_text()), before);
    free(own);
}
END_TEST

START_TEST(test_tick_leaves_a_worker_under_its_bound)
{
    tick(4194304);
    tick(0); /* no bound at all */
    for (int i = 0; i < 4; i++) {
        ck_assert(!slots[i].retire);
        ck_assert(!slots[i].over_memory);
    }
    ck_assert_str_eq(h_log_text(), "");
}
END_TEST

/* Only a worker serving, not going already, is judged. */
START_TEST(test_tick_skips_workers_on_their_way)
{
    slots[0].state = SL_WORKER_BOOTING;
    slots[1].state = SL_WORKER_STOPPING;
    slots[2].retire = true; /* --max-requests came first */
    slots[3].gen = 2;       /* a rolling restart replaces it */
    tick(1);
    for (int i = 0; i < 4; i++) {
        ck_assert(!slots[i].over_memory);
    }
    ck_assert(!slots[0].retire && !slots[1].retire && !slots[3].retire);
    slots[0].state = SL_WORKER_READY;
    slots[0].own_drain = 1; /* someone else sent it TERM */
    tick(1);
    ck_assert(!slots[0].retire);
    ck_assert_str_eq(h_log_text(), "");
}
END_TEST

/* A worker that died before the supervisor reaped it (a zombie: its file
 * is empty) or was reaped already (none) is no news. */
START_TEST(test_tick_skips_dead_workers_quietly)
{
    siginfo_t si;
    pid_t child = fork();

    ck_assert_int_ge(child, 0);
    if (child == 0) {
        _exit(0);
    }
    ck_assert_int_eq(waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT), 0);
    table.high = 1;
    slots[0].pid = child;
    tick(1);
    ck_assert(!slots[0].retire);
    ck_assert_int_eq(waitpid(child, NULL, 0), child);
    tick(1);
    ck_assert(!slots[0].retire);
    ck_assert_str_eq(h_log_text(), "");
}
END_TEST

static Suite *memwatch_suite(void)
{
    Suite *s = suite_create("memwatch");
    TCase *pure = tcase_create("pure");
    TCase *tc = tcase_create("tick");

    tcase_add_test(pure, test_parse_pss);
    tcase_add_test(pure, test_parse_no_figure);
    tcase_add_test(pure, test_bound_jitter);
    suite_add_tcase(s, pure);
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_tick_marks_a_worker_past_its_bound);
    tcase_add_test(tc, test_tick_leaves_a_worker_under_its_bound);
    tcase_add_test(tc, test_tick_skips_workers_on_their_way);
    tcase_add_test(tc, test_tick_skips_dead_workers_quietly);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(memwatch_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
