/* test_allow.c - check suite for common/allow.c, the trusted-peer list.
 *
 * What matters: an entry matches exactly the addresses it should (prefix
 * edges, both families, IPv4-mapped peers), and a bad list is refused at
 * parse time with a reason, never half-accepted.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <stdio.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "common/allow.h"

static sl_allow_t list;
static char why[128];

static void parse_ok(const char *spec)
{
    ck_assert_msg(sl_allow_parse(&list, spec, why, sizeof(why)) == 0,
                  "'%s' refused: %s", spec, why);
}

static bool match(const char *addr)
{
    struct sockaddr_storage ss;
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    bool by_text;

    memset(&ss, 0, sizeof(ss));
    if (inet_pton(AF_INET, addr, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
    } else {
        ck_assert_int_eq(inet_pton(AF_INET6, addr, &in6->sin6_addr), 1);
        in6->sin6_family = AF_INET6;
    }
    by_text = sl_allow_match_text(&list, addr, strlen(addr));
    /* the two ways of asking agree */
    ck_assert_int_eq(by_text, sl_allow_match(&list, (struct sockaddr *)&ss));
    return by_text;
}

START_TEST(test_defaults_loopback)
{
    parse_ok("127.0.0.1,::1");
    ck_assert(match("127.0.0.1"));
    ck_assert(match("::1"));
    ck_assert(match("::ffff:127.0.0.1")); /* a dual-stack socket's v4 */
    ck_assert(!match("127.0.0.2"));
    ck_assert(!match("::2"));
    ck_assert(!match("10.0.0.1"));
}
END_TEST

START_TEST(test_cidr_v4_edges)
{
    parse_ok("10.1.0.0/16, 192.168.1.128/25");
    ck_assert(match("10.1.0.0"));
    ck_assert(match("10.1.255.255"));
    ck_assert(!match("10.2.0.0"));
    ck_assert(!match("10.0.255.255"));
    ck_assert(match("192.168.1.128"));
    ck_assert(match("192.168.1.255"));
    ck_assert(!match("192.168.1.127"));
    ck_assert(match("::ffff:10.1.2.3"));
}
END_TEST

START_TEST(test_cidr_v6_edges)
{
    parse_ok("2001:db8::/33");
    ck_assert(match("2001:db8::1"));
    ck_assert(match("2001:db8:7fff:ffff::1"));
    ck_assert(!match("2001:db8:8000::1"));
    ck_assert(!match("2001:db9::"));
    ck_assert(!match("10.0.0.1")); /* no family crosses over */
}
END_TEST

START_TEST(test_zero_and_full_prefix)
{
    parse_ok("0.0.0.0/0");
    ck_assert(match("1.2.3.4"));
    ck_assert(match("255.255.255.255"));
    ck_assert(!match("::1")); /* /0 of IPv4 is all of IPv4 only */
    parse_ok("::/0");
    ck_assert(match("::1"));
    ck_assert(match("fe80::1"));
    parse_ok("1.2.3.4/32");
    ck_assert(match("1.2.3.4"));
    ck_assert(!match("1.2.3.5"));
}
END_TEST

START_TEST(test_star_and_unix)
{
    struct sockaddr_un un = {.sun_family = AF_UNIX};

    parse_ok("127.0.0.1");
    ck_assert(!sl_allow_match(&list, (struct sockaddr *)&un));
    parse_ok("unix");
    ck_assert(sl_allow_match(&list, (struct sockaddr *)&un));
    ck_assert(!match("127.0.0.1"));
    parse_ok("*");
    ck_assert(match("8.8.8.8"));
    ck_assert(match("2001:db8::1"));
    ck_assert(sl_allow_match(&list, (struct sockaddr *)&un));
    /* '*' trusts even what is no address */
    ck_assert(sl_allow_match_text(&list, "_hidden", 7));
}
END_TEST

START_TEST(test_text_that_is_no_address)
{
    parse_ok("127.0.0.1");
    ck_assert(!sl_allow_match_text(&list, "unknown", 7));
    ck_assert(!sl_allow_match_text(&list, "_proxy1", 7));
    ck_assert(!sl_allow_match_text(&list, "", 0));
    ck_assert(!sl_allow_match_text(&list, "127.0.0.1:80", 12));
    /* only N bytes count */
    ck_assert(sl_allow_match_text(&list, "127.0.0.1xyz", 9));
}
END_TEST

START_TEST(test_blanks_and_empty_entries)
{
    parse_ok(" 10.0.0.1 ,, \t10.0.0.2,");
    ck_assert_int_eq(list.n, 2);
    ck_assert(match("10.0.0.2"));
    parse_ok("");
    ck_assert_int_eq(list.n, 0);
    ck_assert(!match("127.0.0.1"));
}
END_TEST

START_TEST(test_bad_lists_refused)
{
    static const char *const bad[] = {
        "localhost",  "10.0.0.0/33",       "::/129", "10.0.0.0/",
        "10.0.0.0/x", "10.0.0.0/-1",       "1.2.3",  "1.2.3.4/8/8",
        "[::1]",      "10.0.0.1 10.0.0.2", "::1/1x",
    };
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why[0] = '\0';
        ck_assert_msg(sl_allow_parse(&list, bad[i], why, sizeof(why)) == -1,
                      "'%s' accepted", bad[i]);
        ck_assert_msg(why[0] != '\0', "no reason for '%s'", bad[i]);
    }
}
END_TEST

START_TEST(test_too_many_entries)
{
    char spec[2048] = "";
    int i;

    for (i = 0; i < SL_ALLOW_MAX; i++)
        snprintf(spec + strlen(spec), sizeof(spec) - strlen(spec), "10.0.0.%d,",
                 i);
    parse_ok(spec);
    ck_assert_int_eq(list.n, SL_ALLOW_MAX);
    strcat(spec, "10.0.1.1");
    ck_assert_int_eq(sl_allow_parse(&list, spec, why, sizeof(why)), -1);
    ck_assert_ptr_nonnull(strstr(why, "more than"));
}
END_TEST

static Suite *allow_suite(void)
{
    Suite *s = suite_create("allow");
    TCase *tc = tcase_create("allow");

    tcase_add_test(tc, test_defaults_loopback);
    tcase_add_test(tc, test_cidr_v4_edges);
    tcase_add_test(tc, test_cidr_v6_edges);
    tcase_add_test(tc, test_zero_and_full_prefix);
    tcase_add_test(tc, test_star_and_unix);
    tcase_add_test(tc, test_text_that_is_no_address);
    tcase_add_test(tc, test_blanks_and_empty_entries);
    tcase_add_test(tc, test_bad_lists_refused);
    tcase_add_test(tc, test_too_many_entries);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(allow_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
