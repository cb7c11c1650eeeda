/* test_buf.c - check suite for common/buf.h, the growable byte buffer.
 *
 * The buffer is all inline functions, so the tests poke at its fields: what
 * matters to its users (connections keep offsets into it) is exactly when
 * it moves, rewinds, grows and frees its memory. Growth fails on cue here
 * (buf_faults.h), as it does for the suites that test callers' handling of
 * out-of-memory.
 */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "tests/unit/buf_faults.h"

START_TEST(test_empty)
{
    sl_buf_t b = {0};

    ck_assert_uint_eq(sl_buf_pending(&b), 0);
    ck_assert_int_eq(sl_buf_append(&b, "", 0), 0);
    ck_assert_ptr_null(b.data); /* appending nothing allocates nothing */
    sl_buf_free(&b);
    ck_assert_ptr_null(b.data);
}
END_TEST

START_TEST(test_append_and_consume)
{
    sl_buf_t b = {0};

    ck_assert_int_eq(sl_buf_append(&b, "hello ", 6), 0);
    ck_assert_int_eq(sl_buf_append(&b, "world", 5), 0);
    ck_assert_uint_eq(b.len, 11);
    ck_assert_uint_eq(sl_buf_pending(&b), 11);
    ck_assert(memcmp(b.data, "hello world", 11) == 0);
    ck_assert_uint_eq(b.cap, 1024); /* the first allocation */

    sl_buf_consume(&b, 6);
    ck_assert_uint_eq(b.off, 6);
    ck_assert_uint_eq(sl_buf_pending(&b), 5);
    ck_assert(memcmp(b.data + b.off, "world", 5) == 0);

    /* consuming everything rewinds to the start */
    sl_buf_consume(&b, 5);
    ck_assert_uint_eq(b.off, 0);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_uint_eq(b.cap, 1024);
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_consume_too_much_rewinds)
{
    sl_buf_t b = {0};

    ck_assert_int_eq(sl_buf_append(&b, "abc", 3), 0);
    sl_buf_consume(&b, 10);
    ck_assert_uint_eq(b.off, 0);
    ck_assert_uint_eq(b.len, 0);
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_growth_doubles_and_keeps_data)
{
    sl_buf_t b = {0};
    char chunk[700];

    for (int i = 0; i < 10; i++) {
        memset(chunk, 'a' + i, sizeof(chunk));
        ck_assert_int_eq(sl_buf_append(&b, chunk, sizeof(chunk)), 0);
    }
    ck_assert_uint_eq(b.len, 7000);
    ck_assert_uint_eq(b.cap, 8192);
    for (int i = 0; i < 10; i++) {
        memset(chunk, 'a' + i, sizeof(chunk));
        ck_assert(memcmp(b.data + i * 700, chunk, sizeof(chunk)) == 0);
    }
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_reserve)
{
    sl_buf_t b = {0};

    ck_assert_int_eq(sl_buf_reserve(&b, 5000), 0);
    ck_assert_uint_eq(b.cap, 8192);
    ck_assert_uint_eq(b.len, 0);
    /* enough room already: nothing moves */
    char *data = b.data;
    ck_assert_int_eq(sl_buf_reserve(&b, 8192), 0);
    ck_assert_ptr_eq(b.data, data);
    ck_assert_uint_eq(b.cap, 8192);
    sl_buf_free(&b);
}
END_TEST

/* Making room never moves what is stored, consumed bytes included: a
 * parser keeps offsets into the buffer from one read to the next. */
START_TEST(test_reserve_keeps_offsets)
{
    sl_buf_t b = {0};

    ck_assert_int_eq(sl_buf_append(&b, "0123456789", 10), 0);
    b.off = 10; /* all parsed, not rewound: a request head under way */
    ck_assert_int_eq(sl_buf_reserve(&b, 1024), 0);
    ck_assert_uint_eq(b.off, 10);
    ck_assert_uint_eq(b.len, 10);
    ck_assert_uint_ge(b.cap - b.len, 1024);
    ck_assert(memcmp(b.data, "0123456789", 10) == 0);

    b.off = 4;
    ck_assert_int_eq(sl_buf_reserve(&b, 5000), 0);
    ck_assert_uint_eq(b.off, 4);
    ck_assert_uint_eq(b.len, 10);
    ck_assert_uint_ge(b.cap - b.len, 5000);
    ck_assert(memcmp(b.data, "0123456789", 10) == 0);
    sl_buf_free(&b);
}
END_TEST

/* A size that cannot be met fails instead of wrapping around. */
START_TEST(test_reserve_overflow)
{
    sl_buf_t b = {0};

    ck_assert_int_eq(sl_buf_append(&b, "0123456789", 10), 0);
    ck_assert_int_eq(sl_buf_reserve(&b, SIZE_MAX - 4), -1);
    ck_assert_uint_eq(b.len, 10);
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_compact)
{
    sl_buf_t b = {0};

    ck_assert_int_eq(sl_buf_append(&b, "0123456789", 10), 0);
    sl_buf_compact(&b); /* nothing consumed: no change */
    ck_assert_uint_eq(b.len, 10);
    sl_buf_consume(&b, 7);
    sl_buf_compact(&b);
    ck_assert_uint_eq(b.off, 0);
    ck_assert_uint_eq(b.len, 3);
    ck_assert(memcmp(b.data, "789", 3) == 0);
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_reset_keeps_small_frees_large)
{
    sl_buf_t b = {0};
    char big[5000] = {0};

    ck_assert_int_eq(sl_buf_append(&b, "abc", 3), 0);
    sl_buf_consume(&b, 1);
    sl_buf_reset(&b, 4096);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_uint_eq(b.off, 0);
    ck_assert_ptr_nonnull(b.data); /* 1024 <= 4096: kept for reuse */
    ck_assert_uint_eq(b.cap, 1024);

    ck_assert_int_eq(sl_buf_append(&b, big, sizeof(big)), 0);
    ck_assert_uint_eq(b.cap, 8192);
    sl_buf_reset(&b, 4096);
    ck_assert_ptr_null(b.data);
    ck_assert_uint_eq(b.cap, 0);
    ck_assert_uint_eq(b.len, 0);
    /* and it works again afterwards */
    ck_assert_int_eq(sl_buf_append(&b, "x", 1), 0);
    ck_assert_uint_eq(sl_buf_pending(&b), 1);
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_free)
{
    sl_buf_t b = {0};

    ck_assert_int_eq(sl_buf_append(&b, "abc", 3), 0);
    sl_buf_consume(&b, 1);
    sl_buf_free(&b);
    ck_assert_ptr_null(b.data);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_uint_eq(b.off, 0);
    ck_assert_uint_eq(b.cap, 0);
    sl_buf_free(&b); /* twice is harmless */
}
END_TEST

/* A growth that fails leaves the buffer as it was; what fits without
 * growing still goes in. */
START_TEST(test_failed_growth_changes_nothing)
{
    sl_buf_t b = {0};
    char big[2000];

    memset(big, 'x', sizeof(big));
    hb_fail_after(1);
    ck_assert_int_eq(sl_buf_append(&b, "abc", 3), 0); /* grows to 1024 */
    ck_assert_int_eq(sl_buf_append(&b, big, sizeof(big)), -1);
    ck_assert_uint_eq(b.len, 3);
    ck_assert_uint_eq(b.cap, 1024);
    ck_assert(memcmp(b.data, "abc", 3) == 0);
    ck_assert_int_eq(sl_buf_append(&b, "de", 2), 0); /* fits: no growth */
    ck_assert_uint_eq(b.len, 5);
    hb_fail_after(-1);
    ck_assert_int_eq(sl_buf_append(&b, big, sizeof(big)), 0);
    ck_assert_uint_eq(b.len, 5 + sizeof(big));
    sl_buf_free(&b);
}
END_TEST

/* A move into an empty buffer swaps the two, no byte copied; into one
 * with bytes it appends them; either way the source ends empty, and
 * keeps its memory only up to KEEP. */
START_TEST(test_move)
{
    sl_buf_t to = {0}, from = {0};
    char *mem, big[2000];

    ck_assert_int_eq(sl_buf_append(&from, "xhello", 6), 0);
    sl_buf_consume(&from, 1);
    mem = from.data;
    ck_assert_int_eq(sl_buf_move(&to, &from, 4096), 0);
    ck_assert_ptr_eq(to.data, mem); /* swapped */
    ck_assert_uint_eq(sl_buf_pending(&to), 5);
    ck_assert(memcmp(to.data + to.off, "hello", 5) == 0);
    ck_assert_uint_eq(sl_buf_pending(&from), 0);

    ck_assert_int_eq(sl_buf_append(&from, " world", 6), 0);
    mem = from.data;
    ck_assert_int_eq(sl_buf_move(&to, &from, 4096), 0);
    ck_assert_uint_eq(sl_buf_pending(&to), 11);
    ck_assert(memcmp(to.data + to.off, "hello world", 11) == 0);
    ck_assert_uint_eq(sl_buf_pending(&from), 0);
    ck_assert_ptr_eq(from.data, mem); /* small: kept for the next bytes */

    memset(big, 'x', sizeof(big));
    ck_assert_int_eq(sl_buf_append(&from, big, sizeof(big)), 0);
    ck_assert_int_eq(sl_buf_move(&to, &from, 1024), 0);
    ck_assert_uint_eq(sl_buf_pending(&to), 11 + sizeof(big));
    ck_assert_ptr_null(from.data); /* past KEEP: freed */
    sl_buf_free(&to);
}
END_TEST

/* Out of memory, a move that must copy fails; the source's bytes are
 * dropped and the destination keeps what it had. */
START_TEST(test_move_out_of_memory)
{
    sl_buf_t to = {0}, from = {0};
    char big[2000];

    memset(big, 'x', sizeof(big));
    ck_assert_int_eq(sl_buf_append(&to, "abc", 3), 0);
    ck_assert_int_eq(sl_buf_append(&from, big, sizeof(big)), 0);
    hb_fail_after(0);
    ck_assert_int_eq(sl_buf_move(&to, &from, 4096), -1);
    hb_fail_after(-1);
    ck_assert_uint_eq(sl_buf_pending(&to), 3);
    ck_assert_uint_eq(sl_buf_pending(&from), 0);
    sl_buf_free(&to);
    sl_buf_free(&from);
}
END_TEST

static Suite *buf_suite(void)
{
    Suite *s = suite_create("buf");
    TCase *tc = tcase_create("buf");

    tcase_add_test(tc, test_empty);
    tcase_add_test(tc, test_append_and_consume);
    tcase_add_test(tc, test_consume_too_much_rewinds);
    tcase_add_test(tc, test_growth_doubles_and_keeps_data);
    tcase_add_test(tc, test_reserve);
    tcase_add_test(tc, test_reserve_keeps_offsets);
    tcase_add_test(tc, test_reserve_overflow);
    tcase_add_test(tc, test_compact);
    tcase_add_test(tc, test_reset_keeps_small_frees_large);
    tcase_add_test(tc, test_free);
    tcase_add_test(tc, test_failed_growth_changes_nothing);
    tcase_add_test(tc, test_move);
    tcase_add_test(tc, test_move_out_of_memory);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(buf_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
