/* test_tlspick.c - check suite for worker/loop/tlspick.c.
 *
 * The server name rules are RFC 9525's (6.3, 6.4): exact names match but
 * for ASCII case, a star is one whole left-most label and covers exactly
 * one label. A name nothing covers is the default certificate's (-1).
 * ALPN follows RFC 7301: the server's order wins, and no protocol in
 * common (or a list that is not one) is a refusal (-1).
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "worker/loop/tlspick.h"

static bool covers(const char *pattern, const char *host)
{
    return sl_tlspick_covers(pattern, strlen(pattern), host, strlen(host));
}

START_TEST(test_exact_names)
{
    ck_assert(covers("example.com", "example.com"));
    ck_assert(covers("www.example.com", "WWW.Example.COM"));
    ck_assert(covers("WWW.EXAMPLE.COM", "www.example.com"));
    ck_assert(covers("localhost", "localhost"));
    ck_assert(!covers("example.com", "www.example.com"));
    ck_assert(!covers("www.example.com", "example.com"));
    ck_assert(!covers("example.com", "example.co"));
    ck_assert(!covers("example.com", "example.com."));
    /* case is ASCII's only: no other byte folds */
    ck_assert(!covers("\xc3\xa9.example", "\xc3\x89.example"));
}
END_TEST

START_TEST(test_wildcard_one_label)
{
    ck_assert(covers("*.example.com", "www.example.com"));
    ck_assert(covers("*.example.com", "A-1.EXAMPLE.com"));
    ck_assert(covers("*.Example.COM", "x.example.com"));
    /* RFC 9525 6.3: one label, not none, not two */
    ck_assert(!covers("*.example.com", "example.com"));
    ck_assert(!covers("*.example.com", ".example.com"));
    ck_assert(!covers("*.example.com", "a.b.example.com"));
    ck_assert(!covers("*.example.com", "www.example.org"));
    /* the label may hold letters, digits and hyphens only */
    ck_assert(!covers("*.example.com", "a_b.example.com"));
    ck_assert(!covers("*.example.com", "*.example.com"));
}
END_TEST

START_TEST(test_wildcard_forms_refused)
{
    /* under fewer than two labels */
    ck_assert(!covers("*.com", "example.com"));
    ck_assert(!covers("*", "localhost"));
    ck_assert(!covers("*.", "a."));
    /* partial labels, a star past the first label, two stars */
    ck_assert(!covers("w*.example.com", "www.example.com"));
    ck_assert(!covers("*w.example.com", "www.example.com"));
    ck_assert(!covers("www.*.com", "www.example.com"));
    ck_assert(!covers("*.*.example.com", "a.b.example.com"));
    /* empty labels after the star */
    ck_assert(!covers("*..example.com", "a..example.com"));
    ck_assert(!covers("*.example.com.", "a.example.com."));
}
END_TEST

START_TEST(test_bad_hosts)
{
    char longest[SL_TLSPICK_HOST_MAX + 2];

    ck_assert(!sl_tlspick_covers("example.com", 11, "", 0));
    ck_assert(!sl_tlspick_covers("", 0, "", 0));
    /* a NUL inside either name */
    ck_assert(!sl_tlspick_covers("example.com\0x", 13, "example.com\0x", 13));
    ck_assert(!sl_tlspick_covers("*.example.com", 13, "a\0b.example.com", 15));
    ck_assert(!sl_tlspick_covers("*.example.com\0", 14, "a.example.com\0", 14));
    /* 255 bytes is the longest name */
    memset(longest, 'a', sizeof(longest));
    ck_assert(sl_tlspick_covers(longest, SL_TLSPICK_HOST_MAX, longest,
                                SL_TLSPICK_HOST_MAX));
    ck_assert(!sl_tlspick_covers(longest, SL_TLSPICK_HOST_MAX + 1, longest,
                                 SL_TLSPICK_HOST_MAX + 1));
}
END_TEST

START_TEST(test_server_first_pair_wins)
{
    /* pair 0 the default; pair 1 a wildcard and its apex; pair 2 one
     * host the wildcard covers too; pair 3 another domain */
    static const sl_tlspick_name_t names[] = {
        {"localhost", 9, 0},    {"*.example.com", 13, 1},
        {"example.com", 11, 1}, {"api.example.com", 15, 2},
        {"example.org", 11, 3}, {"*.example.org", 13, 3},
    };
    int n = sizeof(names) / sizeof(names[0]);

    ck_assert_int_eq(sl_tlspick_server(names, n, "localhost", 9), 0);
    ck_assert_int_eq(sl_tlspick_server(names, n, "example.com", 11), 1);
    ck_assert_int_eq(sl_tlspick_server(names, n, "WWW.example.com", 15), 1);
    /* the first pair that covers it, not the most exact */
    ck_assert_int_eq(sl_tlspick_server(names, n, "api.example.com", 15), 1);
    ck_assert_int_eq(sl_tlspick_server(&names[3], n - 3, "api.example.com", 15),
                     2);
    ck_assert_int_eq(sl_tlspick_server(names, n, "a.example.org", 13), 3);
    /* nothing covers it: the default */
    ck_assert_int_eq(sl_tlspick_server(names, n, "example.net", 11), -1);
    ck_assert_int_eq(sl_tlspick_server(names, n, "a.b.example.com", 15), -1);
    ck_assert_int_eq(sl_tlspick_server(names, n, "", 0), -1);
    ck_assert_int_eq(sl_tlspick_server(names, 0, "localhost", 9), -1);
}
END_TEST

static sl_tlspick_alpn_t offer_of(const char *const *names, int n)
{
    sl_tlspick_alpn_t offer;

    ck_assert_int_eq(sl_tlspick_alpn_offer(&offer, names, n), 0);
    return offer;
}

/* The protocol chosen from the wire-form CLIENT (LEN bytes), as a string
 * in BUF; NULL when refused. */
static const char *choose(const sl_tlspick_alpn_t *offer, const char *client,
                          size_t len, char *buf)
{
    const uint8_t *out = NULL;
    uint8_t outlen = 0;

    if (sl_tlspick_alpn(offer, (const uint8_t *)client, len, &out, &outlen) < 0)
        return NULL;
    ck_assert(out >= offer->wire && out + outlen <= offer->wire + offer->len);
    memcpy(buf, out, outlen);
    buf[outlen] = '\0';
    return buf;
}

static const char *const today[] = {"http/1.1"};
static const char *const with_h2[] = {"h2", "http/1.1"};

START_TEST(test_alpn_offer_wire_form)
{
    sl_tlspick_alpn_t offer = offer_of(with_h2, 2);
    static const char *const empty[] = {"h2", ""};
    char big[300];
    const char *const too_long[] = {big};
    const char *const many[] = {"http/1.1", "http/1.1", "http/1.1", "http/1.1",
                                "http/1.1", "http/1.1", "http/1.1", "http/1.1"};

    ck_assert_uint_eq(offer.len, 12);
    ck_assert(memcmp(offer.wire, "\x02h2\x08http/1.1", 12) == 0);
    offer = offer_of(today, 1);
    ck_assert_uint_eq(offer.len, 9);
    ck_assert_int_eq(sl_tlspick_alpn_offer(&offer, empty, 2), -1);
    ck_assert_uint_eq(offer.len, 0);
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    ck_assert_int_eq(sl_tlspick_alpn_offer(&offer, too_long, 1), -1);
    ck_assert_int_eq(sl_tlspick_alpn_offer(&offer, many, 8), -1);
    ck_assert_uint_eq(offer.len, 0);
}
END_TEST

START_TEST(test_alpn_http11_today)
{
    sl_tlspick_alpn_t offer = offer_of(today, 1);
    char buf[256];

    /* a browser's list: h2 first, and today http/1.1 is what we speak */
    ck_assert_str_eq(choose(&offer, "\x02h2\x08http/1.1", 12, buf), "http/1.1");
    ck_assert_str_eq(choose(&offer, "\x08http/1.1", 9, buf), "http/1.1");
    ck_assert_str_eq(choose(&offer, "\x08http/1.0\x08http/1.1", 18, buf),
                     "http/1.1");
    /* nothing in common: refused (RFC 7301 3.2) */
    ck_assert_ptr_null(choose(&offer, "\x02h2", 3, buf));
    ck_assert_ptr_null(choose(&offer, "\x08http/1.0", 9, buf));
    ck_assert_ptr_null(choose(&offer, "\x08HTTP/1.1", 9, buf));
    ck_assert_ptr_null(choose(&offer, "\x07http/1.", 8, buf));
}
END_TEST

START_TEST(test_alpn_server_order)
{
    sl_tlspick_alpn_t offer = offer_of(with_h2, 2);
    char buf[256];

    /* the server's preference, whatever the client's order */
    ck_assert_str_eq(choose(&offer, "\x02h2\x08http/1.1", 12, buf), "h2");
    ck_assert_str_eq(choose(&offer, "\x08http/1.1\x02h2", 12, buf), "h2");
    ck_assert_str_eq(choose(&offer, "\x08http/1.1", 9, buf), "http/1.1");
    ck_assert_str_eq(choose(&offer, "\x03h2c\x02h2", 7, buf), "h2");
    ck_assert_ptr_null(choose(&offer, "\x03h2c", 4, buf));
}
END_TEST

START_TEST(test_alpn_malformed)
{
    sl_tlspick_alpn_t offer = offer_of(today, 1);
    sl_tlspick_alpn_t none = {.len = 0};
    char buf[256];

    /* an empty list, a name of length 0, a length past the end */
    ck_assert_ptr_null(choose(&offer, "", 0, buf));
    ck_assert_ptr_null(choose(&offer, "\x00\x08http/1.1", 10, buf));
    ck_assert_ptr_null(choose(&offer, "\x08http/1.1\x00", 10, buf));
    ck_assert_ptr_null(choose(&offer, "\x09http/1.1", 9, buf));
    ck_assert_ptr_null(choose(&offer, "\x08http/1.1\x02h", 11, buf));
    /* the good name first does not save a list that ends badly */
    ck_assert_ptr_null(choose(&offer, "\x08http/1.1\xff", 10, buf));
    /* an empty offer chooses nothing */
    ck_assert_ptr_null(choose(&none, "\x08http/1.1", 9, buf));
}
END_TEST

static Suite *tlspick_suite(void)
{
    Suite *s = suite_create("tlspick");
    TCase *tc = tcase_create("tlspick");

    tcase_add_test(tc, test_exact_names);
    tcase_add_test(tc, test_wildcard_one_label);
    tcase_add_test(tc, test_wildcard_forms_refused);
    tcase_add_test(tc, test_bad_hosts);
    tcase_add_test(tc, test_server_first_pair_wins);
    tcase_add_test(tc, test_alpn_offer_wire_form);
    tcase_add_test(tc, test_alpn_http11_today);
    tcase_add_test(tc, test_alpn_server_order);
    tcase_add_test(tc, test_alpn_malformed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(tlspick_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
