/* test_utf8.c - check suite for common/utf8.c, the incremental UTF-8
 * validator: the boundaries of every range in the table of well-formed
 * sequences, the three kinds of ill-formed ones (overlong, surrogate, past
 * U+10FFFF), and the state carried from one piece to the next.
 */
#include "config.h"

#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"

static int check_str(const char *s)
{
    return sl_utf8_check(s, strlen(s));
}

START_TEST(test_valid)
{
    static const char *const ok[] = {
        "",
        "plain ASCII, long enough for the word-at-a-time path",
        "\x7f",
        "\xc2\x80",         /* U+0080, the first 2-byte */
        "\xdf\xbf",         /* U+07FF */
        "\xe0\xa0\x80",     /* U+0800, the first 3-byte */
        "\xed\x9f\xbf",     /* U+D7FF, just below the surrogates */
        "\xee\x80\x80",     /* U+E000, just above them */
        "\xef\xbf\xbf",     /* U+FFFF */
        "\xf0\x90\x80\x80", /* U+10000, the first 4-byte */
        "\xf4\x8f\xbf\xbf", /* U+10FFFF, the last */
        "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5", /* kosme */
        "Hello-\xc2\xb5@\xc3\x9f\xc3\xb6\xc3\xa4\xc3\xbc\xc3\xa0\xc3\xa1-UTF-8!"
        "!",
    };
    size_t i;

    for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        ck_assert_msg(check_str(ok[i]) == SL_UTF8_VALID, "case %zu", i);
}
END_TEST

START_TEST(test_invalid)
{
    static const char *const bad[] = {
        "\x80", /* a lone continuation */
        "\xbf",
        "\xc0\x80",         /* overlong NUL */
        "\xc1\xbf",         /* overlong 2-byte */
        "\xe0\x9f\xbf",     /* overlong 3-byte */
        "\xf0\x8f\xbf\xbf", /* overlong 4-byte */
        "\xed\xa0\x80",     /* U+D800 */
        "\xed\xbf\xbf",     /* U+DFFF */
        "\xf4\x90\x80\x80", /* U+110000 */
        "\xf5\x80\x80\x80", /* no lead byte above F4 */
        "\xff",
        "\xfe",
        "\xc2\x41", /* lead then ASCII */
        "\xe1\x80\x41",
        "abcdefgh\x80", /* after a word of ASCII */
        "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80"
        "edited",
    };
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(check_str(bad[i]) == SL_UTF8_INVALID, "case %zu", i);
}
END_TEST

START_TEST(test_incomplete)
{
    sl_utf8_t u;

    /* a whole-text check counts a cut character as invalid */
    ck_assert_int_eq(check_str("abc\xe2\x82"), SL_UTF8_INVALID);
    sl_utf8_init(&u);
    ck_assert_int_eq(sl_utf8_feed(&u, "abc\xe2\x82", 5), SL_UTF8_INCOMPLETE);
    ck_assert_int_eq(sl_utf8_state(&u), SL_UTF8_INCOMPLETE);
    ck_assert_int_eq(sl_utf8_feed(&u, "\xac", 1), SL_UTF8_VALID); /* € */
    ck_assert_int_eq(sl_utf8_state(&u), SL_UTF8_VALID);
    /* an incomplete prefix that can never complete is invalid at once */
    sl_utf8_init(&u);
    ck_assert_int_eq(sl_utf8_feed(&u, "\xf4\x90", 2), SL_UTF8_INVALID);
    sl_utf8_init(&u);
    ck_assert_int_eq(sl_utf8_feed(&u, "\xed\xa0", 2), SL_UTF8_INVALID);
    sl_utf8_init(&u);
    ck_assert_int_eq(sl_utf8_feed(&u, "\xe0\x80", 2), SL_UTF8_INVALID);
}
END_TEST

/* Every split of a text into two pieces gives the whole text's verdict. */
START_TEST(test_every_split)
{
    static const char *const texts[] = {
        "a\xf0\x9f\x98\x80z\xe2\x82\xac\xc3\xa9", /* 😀 € é */
        "a\xf0\x9f\x98\x80z\xed\xa0\x80",         /* then a surrogate */
        "\xf4\x8f\xbf\xbf\xf4\x90\x80\x80",       /* then past U+10FFFF */
    };
    size_t t, cut, i;

    for (t = 0; t < sizeof(texts) / sizeof(texts[0]); t++) {
        const char *s = texts[t];
        size_t n = strlen(s);
        int whole = sl_utf8_check(s, n);

        for (cut = 0; cut <= n; cut++) {
            sl_utf8_t u;
            int rc;

            sl_utf8_init(&u);
            rc = sl_utf8_feed(&u, s, cut);
            if (rc != SL_UTF8_INVALID)
                rc = sl_utf8_feed(&u, s + cut, n - cut);
            if (rc == SL_UTF8_INCOMPLETE)
                rc = SL_UTF8_INVALID;
            ck_assert_msg(rc == whole, "text %zu cut %zu", t, cut);
        }
        /* and byte by byte */
        {
            sl_utf8_t u;
            int rc = SL_UTF8_VALID;

            sl_utf8_init(&u);
            for (i = 0; i < n && rc != SL_UTF8_INVALID; i++)
                rc = sl_utf8_feed(&u, s + i, 1);
            if (rc == SL_UTF8_INCOMPLETE)
                rc = SL_UTF8_INVALID;
            ck_assert_int_eq(rc, whole);
        }
    }
    ck_assert_int_eq(sl_utf8_check(texts[0], strlen(texts[0])), SL_UTF8_VALID);
}
END_TEST

/* Once invalid, always invalid: more valid text does not mend it. */
START_TEST(test_sticky)
{
    sl_utf8_t u;

    sl_utf8_init(&u);
    ck_assert_int_eq(sl_utf8_feed(&u, "\xff", 1), SL_UTF8_INVALID);
    ck_assert_int_eq(sl_utf8_feed(&u, "abc", 3), SL_UTF8_INVALID);
    ck_assert_int_eq(sl_utf8_state(&u), SL_UTF8_INVALID);
}
END_TEST

/* Every code point encodes to something the validator accepts, and every
 * 2-byte sequence is judged as the table says. */
START_TEST(test_exhaustive)
{
    unsigned cp, a, b;
    uint8_t s[4];

    for (cp = 0; cp <= 0x10FFFF; cp++) {
        size_t n;

        if (cp >= 0xD800 && cp <= 0xDFFF)
            continue;
        if (cp < 0x80) {
            s[0] = (uint8_t)cp;
            n = 1;
        } else if (cp < 0x800) {
            s[0] = (uint8_t)(0xC0 | cp >> 6);
            s[1] = (uint8_t)(0x80 | (cp & 63));
            n = 2;
        } else if (cp < 0x10000) {
            s[0] = (uint8_t)(0xE0 | cp >> 12);
            s[1] = (uint8_t)(0x80 | ((cp >> 6) & 63));
            s[2] = (uint8_t)(0x80 | (cp & 63));
            n = 3;
        } else {
            s[0] = (uint8_t)(0xF0 | cp >> 18);
            s[1] = (uint8_t)(0x80 | ((cp >> 12) & 63));
            s[2] = (uint8_t)(0x80 | ((cp >> 6) & 63));
            s[3] = (uint8_t)(0x80 | (cp & 63));
            n = 4;
        }
        ck_assert_msg(sl_utf8_check(s, n) == SL_UTF8_VALID, "U+%X", cp);
    }
    for (a = 0x80; a < 0x100; a++)
        for (b = 0; b < 0x100; b++) {
            bool want = a >= 0xC2 && a <= 0xDF && b >= 0x80 && b <= 0xBF;
            s[0] = (uint8_t)a;
            s[1] = (uint8_t)b;
            ck_assert_msg((sl_utf8_check(s, 2) == SL_UTF8_VALID) == want,
                          "%02X %02X", a, b);
        }
}
END_TEST

static Suite *utf8_suite(void)
{
    Suite *s = suite_create("utf8");
    TCase *tc = tcase_create("utf8");

    tcase_add_test(tc, test_valid);
    tcase_add_test(tc, test_invalid);
    tcase_add_test(tc, test_incomplete);
    tcase_add_test(tc, test_every_split);
    tcase_add_test(tc, test_sticky);
    tcase_add_test(tc, test_exhaustive);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(utf8_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
