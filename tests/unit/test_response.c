/* test_response.c - check suite for worker/loop/response.c.
 *
 * The framing rules without a connection: heads built into a buffer for a
 * request made by hand, and the header rule both interfaces share.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

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

static Suite *response_suite(void)
{
    Suite *s = suite_create("response");
    TCase *tc = tcase_create("rule");

    tcase_add_test(tc, test_name_is_a_token);
    tcase_add_test(tc, test_name_examples);
    tcase_add_test(tc, test_value_bytes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(response_suite());
    int failed;

    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
