/* test_forwarded.c - check suite for worker/loop/forwarded.c's pure part.
 *
 * sl_forwarded_eval() is called only for a trusted peer; these cases are
 * about what it then believes: the right hop of a chain, RFC 7239's
 * quoting, IPv6 and ports, obfuscated names, the host and port the client
 * asked for, and headers too broken to believe at all (which must change
 * nothing).
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

/* All five headers; NULL is absent. */
static void eval5(const char *fwd, const char *xff, const char *xfp,
                  const char *xfh, const char *xfport)
{
    sl_forwarded_hdrs_t h = {
        .forwarded = fwd,
        .forwarded_len = fwd ? strlen(fwd) : 0,
        .xff = xff,
        .xff_len = xff ? strlen(xff) : 0,
        .xfp = xfp,
        .xfp_len = xfp ? strlen(xfp) : 0,
        .xfh = xfh,
        .xfh_len = xfh ? strlen(xfh) : 0,
        .xfport = xfport,
        .xfport_len = xfport ? strlen(xfport) : 0,
    };

    memset(&cl, 0x55, sizeof(cl)); /* eval must set every field */
    sl_forwarded_eval(&trust, &h, false, &cl);
}

static void eval(const char *fwd, const char *xff, const char *xfp)
{
    eval5(fwd, xff, xfp, NULL, NULL);
}

/* The forwarded host HOST ("" none), its name NAME and the port. */
static void assert_host(const char *host, const char *name, int port)
{
    ck_assert_str_eq(cl.host, host);
    ck_assert_int_eq(cl.name_len, strlen(name));
    ck_assert_int_le(cl.name_off + cl.name_len, strlen(cl.host));
    ck_assert(strncmp(cl.host + cl.name_off, name, cl.name_len) == 0);
    ck_assert_int_eq(cl.server_port, port);
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

START_TEST(test_xfh_basic)
{
    trusting("127.0.0.1");
    /* a host without a port: the scheme's */
    eval5(NULL, NULL, NULL, "example.com", NULL);
    assert_host("example.com", "example.com", 80);
    eval5(NULL, NULL, "https", "Example.COM", NULL);
    assert_host("Example.COM", "Example.COM", 443);
    eval5(NULL, "203.0.113.9", NULL, " example.com:8443 ", NULL);
    assert_client("203.0.113.9", 0, false);
    assert_host("example.com:8443", "example.com", 8443);
    /* X-Forwarded-Port wins over the host's own */
    eval5(NULL, NULL, "https", "example.com:8443", "9000");
    assert_host("example.com:8443", "example.com", 9000);
    eval5(NULL, NULL, NULL, "[2001:db8::1]:8080", NULL);
    assert_host("[2001:db8::1]:8080", "2001:db8::1", 8080);
    eval5(NULL, NULL, "https", "[2001:db8::1]", NULL);
    assert_host("[2001:db8::1]", "2001:db8::1", 443);
    eval5(NULL, NULL, NULL, "192.0.2.1:81", NULL);
    assert_host("192.0.2.1:81", "192.0.2.1", 81);
    eval5(NULL, NULL, NULL, "ex%41mple.com", NULL);
    assert_host("ex%41mple.com", "ex%41mple.com", 80);
    /* a port alone: the host stays the request's */
    eval5(NULL, NULL, NULL, NULL, "8443");
    assert_host("", "", 8443);
    eval5(NULL, NULL, NULL, NULL, "00080");
    assert_host("", "", 80);
    /* the last of the repeated lines, joined by commas */
    eval5(NULL, NULL, NULL, "a.example,b.example", "81 , 82");
    assert_host("b.example", "b.example", 82);
    /* nothing forwarded: nothing set */
    eval5(NULL, "203.0.113.9", "https", NULL, NULL);
    assert_host("", "", 0);
}
END_TEST

START_TEST(test_xfh_per_hop)
{
    trusting("127.0.0.1, 10.0.0.0/8");
    /* as long as X-Forwarded-For: the client's hop's */
    eval5(NULL, "203.0.113.9, 10.0.0.2", NULL, "a.example, b.internal",
          "443, 8080");
    assert_client("203.0.113.9", 0, false);
    assert_host("a.example", "a.example", 443);
    eval5(NULL, "1.1.1.1, 203.0.113.9, 10.0.0.2", "http, https, http",
          "x.example, a.example:8443, b.internal", NULL);
    assert_client("203.0.113.9", 0, true);
    assert_host("a.example:8443", "a.example", 8443);
    /* counts differ: the right-most, the nearest proxy's */
    eval5(NULL, "1.1.1.1, 203.0.113.9, 10.0.0.2", NULL, "a.example, b.example",
          "81, 82, 83, 84");
    assert_host("b.example", "b.example", 84);
    /* without X-Forwarded-For: the right-most */
    eval5(NULL, NULL, NULL, "a.example, b.example", "81, 82");
    assert_host("b.example", "b.example", 82);
    /* the chosen entry is bad: nothing, not a neighbour */
    eval5(NULL, "203.0.113.9, 10.0.0.2", NULL, "bad host, b.internal",
          "0, 8080");
    assert_host("", "", 0);
}
END_TEST

START_TEST(test_xfh_malformed_ignored)
{
    static const char *const bad_hosts[] = {
        "exa mple.com", "host:",     "host:0", "host:65536",     "host:123456",
        "host:8x",      "a:b:c",     "::1",    "[::1",           "[nothere]",
        "[1.2.3.4]",    "[::1]x",    "[::1]:", "ex%zzample",     "ex%4",
        "host/path",    "user@host", ":80",    "[fe80::1%eth0]", "h\"q",
        "\x01bin",
    };
    static const char *const bad_ports[] = {
        "0", "65536", "abc", "80a", "-1", "123456", "8 0", "+80",
    };
    char longname[300];
    size_t i;

    trusting("127.0.0.1");
    for (i = 0; i < sizeof(bad_hosts) / sizeof(bad_hosts[0]); i++) {
        eval5(NULL, NULL, NULL, bad_hosts[i], NULL);
        ck_assert_msg(cl.host[0] == '\0' && cl.server_port == 0,
                      "'%s' gave '%s' %d", bad_hosts[i], cl.host,
                      cl.server_port);
        /* a bad host does not take a good port with it */
        eval5(NULL, NULL, NULL, bad_hosts[i], "8080");
        assert_host("", "", 8080);
    }
    for (i = 0; i < sizeof(bad_ports) / sizeof(bad_ports[0]); i++) {
        eval5(NULL, NULL, NULL, NULL, bad_ports[i]);
        ck_assert_msg(cl.server_port == 0, "'%s' gave %d", bad_ports[i],
                      cl.server_port);
        /* a bad port leaves the host's */
        eval5(NULL, NULL, NULL, "example.com:81", bad_ports[i]);
        assert_host("example.com:81", "example.com", 81);
    }
    /* 255 bytes is a host; 256 is not */
    memset(longname, 'a', sizeof(longname));
    longname[255] = '\0';
    eval5(NULL, NULL, NULL, longname, NULL);
    ck_assert_int_eq(strlen(cl.host), 255);
    longname[255] = 'a';
    longname[256] = '\0';
    eval5(NULL, NULL, NULL, longname, NULL);
    assert_host("", "", 0);
}
END_TEST

START_TEST(test_forwarded_host)
{
    char fwd[400];

    trusting("127.0.0.1, 10.0.0.0/8");
    eval("for=203.0.113.9;host=example.com;proto=https", NULL, NULL);
    assert_client("203.0.113.9", 0, true);
    assert_host("example.com", "example.com", 443);
    eval("for=203.0.113.9;Host=\"example.com:8080\"", NULL, NULL);
    assert_host("example.com:8080", "example.com", 8080);
    eval("host=\"[2001:db8::1]:81\"", NULL, NULL);
    assert_client("", 0, false);
    assert_host("[2001:db8::1]:81", "2001:db8::1", 81);
    /* the client's hop's host, not the proxy's */
    eval("for=203.0.113.9;host=a.example, for=10.0.0.2;host=b.internal", NULL,
         NULL);
    assert_host("a.example", "a.example", 80);
    /* the client's hop names none: none, not a neighbour's */
    eval("for=203.0.113.9, for=10.0.0.2;host=b.internal", NULL, NULL);
    assert_host("", "", 0);
    /* Forwarded wins over X-Forwarded-* as a whole */
    eval5("for=203.0.113.9", NULL, NULL, "x.example", "81");
    assert_host("", "", 0);
    /* a bad host is ignored, the rest of the element stands */
    eval("for=203.0.113.9;host=\"a b\";proto=https", NULL, NULL);
    assert_client("203.0.113.9", 0, true);
    assert_host("", "", 0);
    /* two host= in one element: the whole header is broken */
    eval5("for=203.0.113.9;host=a.example;host=b.example", "198.51.100.1", NULL,
          "x.example", NULL);
    assert_client("198.51.100.1", 0, false);
    assert_host("x.example", "x.example", 80);
    /* a host too long to be one, quoted: likewise */
    snprintf(fwd, sizeof(fwd), "for=203.0.113.9;host=\"%0300d\"", 0);
    eval5(fwd, "198.51.100.1", NULL, NULL, NULL);
    assert_client("198.51.100.1", 0, false);
    assert_host("", "", 0);
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
    tcase_add_test(tc, test_xfh_basic);
    tcase_add_test(tc, test_xfh_per_hop);
    tcase_add_test(tc, test_xfh_malformed_ignored);
    tcase_add_test(tc, test_forwarded_host);
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
