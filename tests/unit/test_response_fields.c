/* test_response_fields.c - check suite for worker/loop/response.c: the
 * app's header fields (Connection and Transfer-Encoding dropped, Server
 * and Date added, Content-Length read) and the header rule both
 * interfaces share, checked byte by byte.
 *
 * The framing is pure: a request as the parser would leave it, a status,
 * the app's fields, and out come the head's bytes and each body part's
 * bytes, which is all the tests look at. What the test_response*.c suites
 * share is tests/unit/response_harness.h.
 */
#include "config.h"

#include <check.h>

#include "common/date.h"
#include "tests/unit/buf_faults.h"
#include "tests/unit/harness.h"
#include "tests/unit/response_harness.h"
#include "worker/loop/response.h"

/* ------------------------------------------------------------------ */
/* the app's fields                                                   */

/* Connection is the server's: the app's is dropped, "close" is heeded. */
START_TEST(test_app_connection_dropped)
{
    const char *h;
    char v[64];

    request(1, true, false);
    h = build(200, 1, false, false, "Connection", "keep-alive", "X-A", "1",
              NULL);
    ck_assert_int_eq(h_header_count(h, "Connection"), 0);
    ck_assert_str_eq(h_header(h, "X-A", v, sizeof(v)), "1");
    ck_assert_str_eq(frames("x", true), "x");
    ck_assert(!sl_response_ends_connection(&rs));

    h = build(200, 1, false, false, "connection", "Close", NULL);
    ck_assert_int_eq(h_header_count(h, "Connection"), 1);
    ck_assert_str_eq(h_header(h, "Connection", v, sizeof(v)), "close");
    ck_assert(strstr(h, "Close") == NULL); /* the app's line is gone */
    ck_assert_str_eq(frames("x", true), "x");
    ck_assert(sl_response_ends_connection(&rs));

    h = build(200, 1, false, false, "Connection", "Upgrade", NULL);
    ck_assert_int_eq(h_header_count(h, "Connection"), 0);
    ck_assert(strstr(h, "Upgrade") == NULL);
}
END_TEST

/* Transfer-Encoding is the server's: dropped, and the framing is ours. */
START_TEST(test_app_transfer_encoding_dropped)
{
    const char *h;
    char v[64];

    request(1, true, false);
    h = build(200, 4, false, false, "Transfer-Encoding", "chunked", NULL);
    ck_assert_int_eq(h_header_count(h, "Transfer-Encoding"), 0);
    ck_assert_str_eq(h_header(h, "Content-Length", v, sizeof(v)), "4");
    ck_assert_str_eq(frames("abcd", true), "abcd");

    h = build(200, -1, false, false, "transfer-encoding", "gzip, chunked",
              NULL);
    ck_assert_int_eq(h_header_count(h, "Transfer-Encoding"), 1);
    ck_assert_str_eq(h_header(h, "Transfer-Encoding", v, sizeof(v)), "chunked");

    request(0, false, false); /* HTTP/1.0: never chunked, even if asked */
    h = build(200, -1, false, false, "Transfer-Encoding", "chunked", NULL);
    ck_assert_int_eq(h_header_count(h, "Transfer-Encoding"), 0);
    ck_assert_str_eq(frames("abcd", true), "abcd");
}
END_TEST

START_TEST(test_server_and_date_added)
{
    const char *h;
    char v[64], date[64];

    request(1, true, false);
    h = build(200, 0, false, false, NULL);
    ck_assert_str_eq(h_header(h, "Server", v, sizeof(v)), "sluice");
    ck_assert_int_eq(h_header_count(h, "Server"), 1);
    ck_assert_int_eq(h_header_count(h, "Date"), 1);
    snprintf(date, sizeof(date), "%.*s", SL_DATE_LINE_LEN, sl_date_line());
    ck_assert_ptr_nonnull(strstr(h, date));
    ck_assert(strncmp(date, "Date: ", 6) == 0);
    ck_assert(strcmp(date + SL_DATE_LINE_LEN - 5, "GMT\r\n") == 0);
}
END_TEST

START_TEST(test_server_and_date_given)
{
    const char *h;
    char v[64];

    request(1, true, false);
    h = build(200, 0, false, false, "server", "mine", "DATE",
              "Thu, 01 Jan 1970 00:00:00 GMT", "Set-Cookie", "a=1",
              "Set-Cookie", "b=2", NULL);
    ck_assert_int_eq(h_header_count(h, "Server"), 1);
    ck_assert_str_eq(h_header(h, "Server", v, sizeof(v)), "mine");
    ck_assert_int_eq(h_header_count(h, "Date"), 1);
    ck_assert_str_eq(h_header(h, "Date", v, sizeof(v)),
                     "Thu, 01 Jan 1970 00:00:00 GMT");
    ck_assert_int_eq(h_header_count(h, "Set-Cookie"), 2);
    /* kept as given, in order */
    ck_assert_ptr_nonnull(strstr(h, "\r\nserver: mine\r\nDATE: Thu, 01 Jan "
                                    "1970 00:00:00 GMT\r\nSet-Cookie: a=1\r\n"
                                    "Set-Cookie: b=2\r\n"));
}
END_TEST

static const char *const bad_lengths[] = {"",   "abc", "-1",
                                          "5x", "1 2", "99999999999999999999"};

START_TEST(test_content_length_not_a_number)
{
    const char *s = bad_lengths[_i];

    request(1, true, false);
    ck_assert_int_eq(sl_response_begin(&rs, &head, &req, 200, NULL, 0), 0);
    ck_assert_int_eq(
        sl_response_field(&rs, &head, "Content-Length", 14, s, strlen(s)), -2);
    ck_assert(!rs.nomem); /* the app's mistake, not memory's */
}
END_TEST

/* Spaces around a number are not part of it. */
START_TEST(test_content_length_trimmed)
{
    request(1, true, false);
    build(200, -1, false, false, "Content-Length", " 3 ", NULL);
    ck_assert_str_eq(frames("abcdef", true), "abc");
    ck_assert(!sl_response_ends_connection(&rs));
}
END_TEST

/* ------------------------------------------------------------------ */
/* checks on the app's bytes                                          */

START_TEST(test_bad_bytes)
{
    ck_assert(!sl_response_bad_bytes("text/plain; q=1", 15));
    ck_assert(!sl_response_bad_bytes("", 0));
    ck_assert(!sl_response_bad_bytes("\t\x7f\xff:", 4));
    ck_assert(sl_response_bad_bytes("a\rb", 3));
    ck_assert(sl_response_bad_bytes("a\nb", 3));
    ck_assert(sl_response_bad_bytes("a\0b", 3));
    ck_assert(sl_response_bad_bytes("\r", 1));
    ck_assert(sl_response_bad_bytes("ab\n", 3));  /* the last byte too */
    ck_assert(!sl_response_bad_bytes("ab\n", 2)); /* only N bytes */
}
END_TEST

START_TEST(test_bad_name)
{
    ck_assert(!sl_response_bad_name("X-Good_Name.1", 13));
    ck_assert(!sl_response_bad_name("a", 1));
    ck_assert(sl_response_bad_name("", 0));
    ck_assert(sl_response_bad_name("X:A", 3));
    ck_assert(sl_response_bad_name("X A", 3));
    ck_assert(sl_response_bad_name("X\tA", 3));
    ck_assert(sl_response_bad_name("X\rA", 3));
    ck_assert(sl_response_bad_name("X\nA", 3));
    ck_assert(sl_response_bad_name("X\0A", 3));
    ck_assert(sl_response_bad_name("Host:", 5));
    ck_assert(!sl_response_bad_name("Host:", 4));
}
END_TEST

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

static Suite *response_fields_suite(void)
{
    Suite *s = suite_create("response_fields");
    TCase *tc;

    tc = tcase_create("fields");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_app_connection_dropped);
    tcase_add_test(tc, test_app_transfer_encoding_dropped);
    tcase_add_test(tc, test_server_and_date_added);
    tcase_add_test(tc, test_server_and_date_given);
    tcase_add_loop_test(tc, test_content_length_not_a_number, 0,
                        sizeof(bad_lengths) / sizeof(bad_lengths[0]));
    tcase_add_test(tc, test_content_length_trimmed);
    tcase_add_test(tc, test_bad_bytes);
    tcase_add_test(tc, test_bad_name);
    tcase_add_test(tc, test_name_is_a_token);
    tcase_add_test(tc, test_name_examples);
    tcase_add_test(tc, test_value_bytes);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(response_fields_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
