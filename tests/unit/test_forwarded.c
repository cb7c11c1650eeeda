/* test_forwarded.c - check suite for worker/loop/forwarded.c's pure part.
 *
 * sl_forwarded_eval() is called only for a trusted peer; these cases are
 * about what it then believes: the right hop of a chain, RFC 7239's
 * quoting, IPv6 and ports, obfuscated names, and headers too broken to
 * believe at all (which must change nothing).
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/loop/forwarded.h"

static sl_allow_t trust;
static sl_client_t cl;

static void trusting(const char *spec)
{
    char why[128];

    ck_assert_int_eq(sl_allow_parse(&trust, spec, why, sizeof(why)), 0);
}

static void eval(const char *fwd, const char *xff, const char *xfp)
{
    sl_forwarded_hdrs_t h = {
        .forwarded = fwd,
        .forwarded_len = fwd ? strlen(fwd) : 0,
        .xff = xff,
        .xff_len = xff ? strlen(xff) : 0,
        .xfp = xfp,
        .xfp_len = xfp ? strlen(xfp) : 0,
    };

    memset(&cl, 0x55, sizeof(cl)); /* eval must set every field */
    sl_forwarded_eval(&trust, &h, &cl);
}

static void assert_client(const char *addr, int port, bool https)
{
    ck_assert_str_eq(cl.addr, addr);
    ck_assert_int_eq(cl.port, port);
    ck_assert_int_eq(cl.https, https);
}

START_TEST(test_xff_single)
{
    trusting("127.0.0.1");
    eval(NULL, "203.0.113.9", NULL);
    assert_client("203.0.113.9", 0, false);
    eval(NULL, "203.0.113.9", "https");
    assert_client("203.0.113.9", 0, true);
    eval(NULL, " 2001:db8::9 ", "HTTPS");
    assert_client("2001:db8::9", 0, true);
}
END_TEST

START_TEST(test_xff_chain_rightmost_untrusted)
{
    trusting("127.0.0.1, 10.0.0.0/8");
    /* the client forged the first entry; 10.0.0.2 is our proxy */
    eval(NULL, "1.1.1.1, 203.0.113.9, 10.0.0.2", NULL);
    assert_client("203.0.113.9", 0, false);
    /* all trusted: the left-most, as uvicorn */
    eval(NULL, "10.0.0.1, 10.0.0.2", NULL);
    assert_client("10.0.0.1", 0, false);
    /* '*': the left-most, whatever it is */
    trusting("*");
    eval(NULL, "1.1.1.1, 203.0.113.9, 10.0.0.2", NULL);
    assert_client("1.1.1.1", 0, false);
}
END_TEST

START_TEST(test_xff_ports_and_brackets)
{
    trusting("127.0.0.1");
    eval(NULL, "203.0.113.9:4711", NULL);
    assert_client("203.0.113.9", 4711, false);
    eval(NULL, "[2001:db8::9]:4711", NULL);
    assert_client("2001:db8::9", 4711, false);
    eval(NULL, "[2001:db8::9]", NULL);
    assert_client("2001:db8::9", 0, false);
}
END_TEST

START_TEST(test_xfp_per_hop)
{
    trusting("127.0.0.1, 10.0.0.0/8");
    /* one scheme per hop: the client's hop's */
    eval(NULL, "203.0.113.9, 10.0.0.2", "https, http");
    assert_client("203.0.113.9", 0, true);
    /* counts differ: the right-most, the nearest proxy's */
    eval(NULL, "203.0.113.9, 10.0.0.2", "http, http, https");
    assert_client("203.0.113.9", 0, true);
    eval(NULL, "203.0.113.9", "https, http");
    assert_client("203.0.113.9", 0, false);
    /* a scheme without an address: the peer stays the client */
    eval(NULL, NULL, "wss");
    assert_client("", 0, true);
    eval(NULL, NULL, "gopher");
    assert_client("", 0, false);
}
END_TEST

START_TEST(test_xff_malformed_ignored)
{
    static const char *const bad[] = {
        "not an address", "203.0.113.9:99999",         "[2001:db8::9",
        "1.2.3.4:x",      "203.0.113.9, evil.example", "[1.2.3.4]",
        "1.2.3.4\"",
    };
    size_t i;

    trusting("127.0.0.1");
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        eval(NULL, bad[i], NULL);
        ck_assert_msg(cl.addr[0] == '\0', "'%s' gave '%s'", bad[i], cl.addr);
    }
}
END_TEST

START_TEST(test_forwarded_basic)
{
    trusting("127.0.0.1");
    eval("for=192.0.2.60;proto=https;by=203.0.113.43", NULL, NULL);
    assert_client("192.0.2.60", 0, true);
    eval("For=\"[2001:db8:cafe::17]:4711\"", NULL, NULL);
    assert_client("2001:db8:cafe::17", 4711, false);
    eval("proto=http;for=192.0.2.43:80 ;host=example.com", NULL, NULL);
    assert_client("192.0.2.43", 80, false);
    /* Forwarded wins over X-Forwarded-* */
    eval("for=192.0.2.60", "198.51.100.1", "https");
    assert_client("192.0.2.60", 0, false);
}
END_TEST

START_TEST(test_forwarded_quoting)
{
    trusting("127.0.0.1, ::1");
    /* a quoted-pair inside a quoted-string, and quoted commas and
     * semicolons that are no separators */
    eval("for=\"192.0.2.\\61\";host=\"a,b;c\", for=\"[::1]\"", NULL, NULL);
    assert_client("192.0.2.61", 0, false);
    eval("for=192.0.2.1;host=\"unterminated", NULL, "https");
    assert_client("", 0, true); /* ignored: X-Forwarded-* apply */
    eval("for=\"192.0.2.1\"x", NULL, NULL);
    assert_client("", 0, false);
}
END_TEST

START_TEST(test_forwarded_chain)
{
    trusting("127.0.0.1, 10.0.0.0/8");
    eval("for=1.1.1.1, for=192.0.2.60;proto=https, for=10.0.0.2;proto=http",
         NULL, NULL);
    assert_client("192.0.2.60", 0, true);
    /* empty list elements are no hops */
    eval(", for=192.0.2.60 ,, for=10.0.0.2,", NULL, NULL);
    assert_client("192.0.2.60", 0, false);
    /* a hop without for= cannot be trusted: it is the client, unnamed */
    eval("for=192.0.2.60, proto=https, for=10.0.0.2", NULL, NULL);
    assert_client("", 0, true);
}
END_TEST

START_TEST(test_forwarded_obfuscated)
{
    trusting("127.0.0.1, 10.0.0.0/8");
    eval("for=_hidden, for=10.0.0.2", NULL, NULL);
    assert_client("_hidden", 0, false);
    eval("for=\"_hidden:_port\"", NULL, NULL);
    assert_client("_hidden", 0, false);
    eval("for=unknown", NULL, NULL);
    assert_client("unknown", 0, false);
    eval("for=\"[2001:db8::1]:_p1\"", NULL, NULL);
    assert_client("2001:db8::1", 0, false);
    /* an obfuscated name is never one of ours */
    trusting("0.0.0.0/0, ::/0");
    eval("for=203.0.113.9, for=_p1, for=10.0.0.2", NULL, NULL);
    assert_client("_p1", 0, false);
}
END_TEST

START_TEST(test_forwarded_malformed_ignored)
{
    static const char *const bad[] = {
        "for",
        "=1.2.3.4",
        "for=",
        "for=1.2.3.4;for=5.6.7.8", /* one for= per element */
        "for=1.2.3.4 x",
        "for=[::1]:80", /* unquoted but harmless brackets: allowed */
        "for=\"[::1\"",
        "for=_",
        "for=1.2.3.4:65536",
        "fo r=1.2.3.4",
        "for=hostname",
    };
    size_t i;

    trusting("127.0.0.1");
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        eval(bad[i], NULL, NULL);
        if (strcmp(bad[i], "for=[::1]:80") == 0) {
            assert_client("::1", 80, false);
            continue;
        }
        ck_assert_msg(cl.addr[0] == '\0', "'%s' gave '%s'", bad[i], cl.addr);
    }
}
END_TEST

START_TEST(test_too_many_hops_ignored)
{
    char list[1024] = "";
    int i;

    trusting("127.0.0.1");
    for (i = 0; i < SL_FORWARDED_HOPS; i++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list),
                 "%s10.0.0.%d", i ? ", " : "", i);
    eval(NULL, list, NULL);
    ck_assert_str_eq(cl.addr, "10.0.0.31");
    strcat(list, ", 10.0.1.1");
    eval(NULL, list, NULL);
    ck_assert_str_eq(cl.addr, "");
}
END_TEST

static Suite *forwarded_suite(void)
{
    Suite *s = suite_create("forwarded");
    TCase *tc = tcase_create("forwarded");

    tcase_add_test(tc, test_xff_single);
    tcase_add_test(tc, test_xff_chain_rightmost_untrusted);
    tcase_add_test(tc, test_xff_ports_and_brackets);
    tcase_add_test(tc, test_xfp_per_hop);
    tcase_add_test(tc, test_xff_malformed_ignored);
    tcase_add_test(tc, test_forwarded_basic);
    tcase_add_test(tc, test_forwarded_quoting);
    tcase_add_test(tc, test_forwarded_chain);
    tcase_add_test(tc, test_forwarded_obfuscated);
    tcase_add_test(tc, test_forwarded_malformed_ignored);
    tcase_add_test(tc, test_too_many_hops_ignored);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(forwarded_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
