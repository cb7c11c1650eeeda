/* test_response.c - check suite for worker/loop/response.c.
 *
 * The framing rules without a connection: heads built into a buffer for a
 * request made by hand, the header rule both interfaces share, and heads
 * built while buffer growth fails (buf_faults.h).
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/date.h"
#include "tests/unit/buf_faults.h"
#include "worker/loop/response.h"

/* ------------------------------------------------------------------ */
/* the header rule                                                    */

/* RFC 9110: token = 1*tchar, tchar = "!" / "#" / "$" / "%" / "&" / "'" /
 * "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA. */
static bool is_tchar(int ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
           (ch >= 'A' && ch <= 'Z') ||
           (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* Every byte, alone and inside a name: bad exactly when not a tchar. */
START_TEST(test_name_is_a_token)
{
    char name[3] = {'X', 0, 'Y'};
    int ch;

    for (ch = 0; ch < 256; ch++) {
        name[1] = (char)ch;
        ck_assert_msg(sl_response_bad_name(name + 1, 1) == !is_tchar(ch),
                      "byte 0x%02x alone", ch);
        ck_assert_msg(sl_response_bad_name(name, 3) == !is_tchar(ch),
                      "byte 0x%02x inside a name", ch);
    }
}
END_TEST

START_TEST(test_name_examples)
{
    ck_assert(sl_response_bad_name("", 0));
    ck_assert(sl_response_bad_name("X Injected", 10));
    ck_assert(sl_response_bad_name("X-A:", 4));
    ck_assert(sl_response_bad_name("X-A\t", 4));
    ck_assert(sl_response_bad_name("(comment)", 9));
    ck_assert(sl_response_bad_name("caf\xc3\xa9", 5));
    ck_assert(!sl_response_bad_name("Content-Type", 12));
    ck_assert(!sl_response_bad_name("x!#$%&'*+-.^_`|~9", 17));
}
END_TEST

/* A value may hold anything but what would split the head. */
START_TEST(test_value_bytes)
{
    char value[3] = {'a', 0, 'b'};
    int ch;

    for (ch = 0; ch < 256; ch++) {
        value[1] = (char)ch;
        ck_assert_msg(sl_response_bad_bytes(value, 3) ==
                          (ch == '\r' || ch == '\n' || ch == '\0'),
                      "byte 0x%02x", ch);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* building a head                                                    */

static char long_a[3000], long_b[5000];

/* A head with two long fields, so that the buffer grows mid-way: its
 * steps' results and'ed, in *RC (0, or -1 from any step). */
static void build(sl_response_t *rs, sl_buf_t *b, int *rc)
{
    sl_req_t req = {.major = 1, .minor = 1, .keep_alive = true};

    memset(long_a, 'a', sizeof(long_a));
    memset(long_b, 'b', sizeof(long_b));
    *rc = sl_response_begin(rs, b, &req, 200, "200 Fine", 8);
    *rc |= sl_response_field(rs, b, "X-A", 3, long_a, sizeof(long_a));
    *rc |= sl_response_field(rs, b, "X-Short", 7, "s", 1);
    *rc |= sl_response_field(rs, b, "X-B", 3, long_b, sizeof(long_b));
    *rc |= sl_response_end(rs, b, &req, 12, false, false);
}

START_TEST(test_head_whole)
{
    sl_response_t rs;
    sl_buf_t b = {0};
    int rc;

    sl_date_update();
    build(&rs, &b, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert(strncmp(b.data, "HTTP/1.1 200 Fine\r\nX-A: aaa", 25) == 0);
    ck_assert(b.len > sizeof(long_a) + sizeof(long_b));
    ck_assert(memcmp(b.data + b.len - 4, "\r\n\r\n", 4) == 0);
    ck_assert_ptr_nonnull(memmem(b.data, b.len, "Content-Length: 12\r\n", 20));
    sl_buf_free(&b);
}
END_TEST

/* Out of memory at any growth: a step says so and end() fails, though the
 * small appends after the failed one fit (they would cut the head short
 * and still end it with a blank line); the next head builds whole. */
START_TEST(test_head_out_of_memory)
{
    sl_response_t rs, whole;
    sl_buf_t ref = {0}, b = {0};
    int rc;

    sl_date_update();
    build(&whole, &ref, &rc);
    ck_assert_int_eq(rc, 0);
    hb_fail_after(_i); /* 0: at the status line; 1: X-A; 2: X-B */
    build(&rs, &b, &rc);
    ck_assert_int_eq(rc, -1);
    ck_assert(rs.nomem);
    ck_assert_int_eq(
        sl_response_end(&rs, &b, &(sl_req_t){.minor = 1}, -1, false, false),
        -1); /* still failed: it sticks until begin */
    hb_fail_after(-1);
    build(&rs, &b, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(b.len, ref.len);
    sl_buf_free(&ref);
    sl_buf_free(&b);
}
END_TEST

/* A bad Content-Length is the app's mistake, not memory's. */
START_TEST(test_bad_content_length)
{
    sl_req_t req = {.major = 1, .minor = 1, .keep_alive = true};
    sl_response_t rs;
    sl_buf_t b = {0};

    ck_assert_int_eq(sl_response_begin(&rs, &b, &req, 200, NULL, 0), 0);
    ck_assert_int_eq(b.len, 17);
    ck_assert(memcmp(b.data, "HTTP/1.1 200 OK\r\n", 17) == 0);
    ck_assert_int_eq(sl_response_field(&rs, &b, "Content-Length", 14, "12x", 3),
                     -2);
    ck_assert(!rs.nomem);
    sl_buf_free(&b);
}
END_TEST

static Suite *response_suite(void)
{
    Suite *s = suite_create("response");
    TCase *tc = tcase_create("rule");

    tcase_add_test(tc, test_name_is_a_token);
    tcase_add_test(tc, test_name_examples);
    tcase_add_test(tc, test_value_bytes);
    suite_add_tcase(s, tc);

    tc = tcase_create("head");
    tcase_add_test(tc, test_head_whole);
    tcase_add_loop_test(tc, test_head_out_of_memory, 0, 3);
    tcase_add_test(tc, test_bad_content_length);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(response_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
