/* test_date.c - check suite for common/date.c, the cached Date line.
 *
 * date.c reads the clock with time(); this file defines time() itself (the
 * executable's definition wins over libc's for date.c's call), so a test
 * can set the moment and check the exact line for it: every day and month
 * name, zero padding, leap days, the far end of four-digit years. Unset,
 * the stand-in reads the real clock. The expected lines come from
 * strftime() in the C locale, an independent source of the English names.
 *
 * The "dates" case holds sl_date_format() to the same strftime() from
 * 1970 to the last second of 9999 and sl_date_parse() to its inverse
 * there, and checks what the parser refuses: anything not an IMF-fixdate
 * to the byte (the two obsolete forms included) and days no month has.
 */
#include "config.h"

#include <check.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/date.h"

#define NO_FAKE ((time_t)-1)

static time_t fake_now = NO_FAKE;

time_t time(time_t *tloc)
{
    time_t t = fake_now;

    if (t == NO_FAKE) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        t = ts.tv_sec;
    }
    if (tloc != NULL)
        *tloc = t;
    return t;
}

/* The line for T as the C locale's strftime() writes it. */
static const char *expected(time_t t)
{
    static char buf[64];
    locale_t c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    struct tm tm;

    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(gmtime_r(&t, &tm));
    ck_assert_uint_gt(strftime_l(buf, sizeof(buf),
                                 "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm, c),
                      0);
    freelocale(c);
    return buf;
}

static const char *line_at(time_t t)
{
    fake_now = t;
    sl_date_update();
    return sl_date_line();
}

static void setup(void)
{
    fake_now = NO_FAKE;
}

/* ---- shape ------------------------------------------------------------ */

/* With the real clock: fixed length, the header name, CRLF, and a moment
 * between the clock readings around the update. */
START_TEST(test_line_is_a_date_header_for_now)
{
    struct tm tm = {0};
    time_t before = time(NULL);
    sl_date_update();
    time_t after = time(NULL);
    const char *line = sl_date_line();

    ck_assert_uint_eq(strlen(line), SL_DATE_LINE_LEN);
    ck_assert_int_eq(strncmp(line, "Date: ", 6), 0);
    ck_assert_str_eq(line + SL_DATE_LINE_LEN - 5, "GMT\r\n");
    const char *end = strptime(line + 6, "%a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
    ck_assert_msg(end != NULL && *end == '\0', "not IMF-fixdate: %s", line);
    time_t at = timegm(&tm);
    ck_assert_msg(at >= before && at <= after,
                  "%s is not between %lld and %lld", line, (long long)before,
                  (long long)after);
}
END_TEST

static const struct {
    time_t t;
    const char *line;
} moments[] = {
    {0, "Date: Thu, 01 Jan 1970 00:00:00 GMT\r\n"},
    {951782400, "Date: Tue, 29 Feb 2000 00:00:00 GMT\r\n"},
    {1700000000, "Date: Tue, 14 Nov 2023 22:13:20 GMT\r\n"},
    {1709251199, "Date: Thu, 29 Feb 2024 23:59:59 GMT\r\n"},
    {2147483648, "Date: Tue, 19 Jan 2038 03:14:08 GMT\r\n"},
    {253402300799, "Date: Fri, 31 Dec 9999 23:59:59 GMT\r\n"},
};

START_TEST(test_known_moments)
{
    const char *line = line_at(moments[_i].t);

    ck_assert_str_eq(line, moments[_i].line);
    ck_assert_uint_eq(strlen(line), SL_DATE_LINE_LEN);
}
END_TEST

/* Every day and month name, every day of the month, hours, minutes and
 * seconds with and without padding: a moment every 1 day 1 hour 1 minute
 * 1 second for four years. */
START_TEST(test_every_name_and_field)
{
    const time_t step = 86400 + 3600 + 60 + 1;

    for (time_t t = 1704067200; t < 1704067200 + 4 * 366 * 86400; t += step) {
        const char *line = line_at(t);
        ck_assert_str_eq(line, expected(t));
        ck_assert_uint_eq(strlen(line), SL_DATE_LINE_LEN);
    }
}
END_TEST

/* ---- locale ----------------------------------------------------------- */

/* An installed locale whose abbreviated day or month names are not
 * English, or NULL. */
static const char *foreign_locale(void)
{
    static char name[128];
    FILE *p = popen("locale -a 2>/dev/null", "r");
    struct tm thu = {.tm_year = 70, .tm_mon = 0, .tm_mday = 1, .tm_wday = 4};

    if (p == NULL)
        return NULL;
    while (fgets(name, sizeof(name), p) != NULL) {
        char day[32], month[32];
        name[strcspn(name, "\n")] = '\0';
        locale_t l = newlocale(LC_ALL_MASK, name, (locale_t)0);
        if (l == (locale_t)0)
            continue;
        strftime_l(day, sizeof(day), "%a", &thu, l);
        strftime_l(month, sizeof(month), "%b", &thu, l);
        freelocale(l);
        if (strcmp(day, "Thu") != 0 || strcmp(month, "Jan") != 0) {
            pclose(p);
            return name;
        }
    }
    pclose(p);
    return NULL;
}

/* An application may call setlocale(); the header stays English and the
 * same length whatever the names are where it runs. */
START_TEST(test_english_whatever_the_locale)
{
    const char *name = foreign_locale();

    if (name == NULL) {
        fprintf(stderr, "test_date: no non-English locale installed"
                        " (locale -a): locale case skipped\n");
        return;
    }
    ck_assert_ptr_nonnull(setlocale(LC_ALL, name));
    for (time_t t = 1704067200; t < 1704067200 + 366 * 86400; t += 86400 * 9)
        ck_assert_str_eq(line_at(t), expected(t));
    setlocale(LC_ALL, "C");
}
END_TEST

/* ---- readers ---------------------------------------------------------- */

/* A line handed out stays intact through the next update: a reader on
 * another thread may still be copying it. */
START_TEST(test_line_survives_the_next_update)
{
    char copy[64];
    const char *held = line_at(1700000000);

    snprintf(copy, sizeof(copy), "%s", held);
    const char *now = line_at(1700000001);
    ck_assert_ptr_ne(now, held);
    ck_assert_str_eq(held, copy);
    ck_assert_str_eq(now, expected(1700000001));
    ck_assert_str_eq(line_at(1700000002), expected(1700000002));
}
END_TEST

/* ---- dates written and read ----------------------------------------- */

/* The IMF-fixdate for T as the C locale's strftime() writes it. */
static const char *expected_date(time_t t)
{
    static char buf[64];
    static locale_t c;
    struct tm tm;

    if (c == (locale_t)0)
        c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(gmtime_r(&t, &tm));
    ck_assert_uint_eq(
        strftime_l(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &tm, c),
        SL_DATE_LEN);
    return buf;
}

/* T written, checked against strftime(), and read back. */
static void assert_round_trip(time_t t)
{
    char d[SL_DATE_LEN + 1];
    time_t back = -1;

    memset(d, '#', sizeof(d));
    sl_date_format(t, d);
    ck_assert_msg(strcmp(d, expected_date(t)) == 0, "%lld: \"%s\", want \"%s\"",
                  (long long)t, d, expected_date(t));
    ck_assert_msg(sl_date_parse(d, SL_DATE_LEN, &back) == 0, "\"%s\" refused",
                  d);
    ck_assert_msg(back == t, "\"%s\": %lld, want %lld", d, (long long)back,
                  (long long)t);
}

START_TEST(test_format_known_moments)
{
    char d[SL_DATE_LEN + 1];

    sl_date_format(moments[_i].t, d);
    ck_assert_uint_eq(strlen(d), SL_DATE_LEN);
    ck_assert_int_eq(strncmp(d, moments[_i].line + 6, SL_DATE_LEN), 0);
}
END_TEST

/* From the epoch to the end of 9999 by a step that visits every day of
 * the week, of the month and most hours, minutes and seconds. */
START_TEST(test_round_trip_every_year)
{
    const time_t step = 37 * 86400 + 3 * 3600 + 7 * 60 + 11;

    for (time_t t = 0; t <= 253402300799; t += step)
        assert_round_trip(t);
    assert_round_trip(253402300799); /* Fri, 31 Dec 9999 23:59:59 GMT */
}
END_TEST

/* The days either side of the leap days and of a day that looks like one
 * (2100 is no leap year), a moment every 59 s; and the last day of 9999. */
START_TEST(test_round_trip_leap_days)
{
    static const time_t days[] = {
        68083200,     /* 1972-02-28 */
        951696000,    /* 2000-02-28 */
        1709078400,   /* 2024-02-28 */
        4107456000,   /* 2100-02-28 */
        13574476800,  /* 2400-02-28 */
        253370678400, /* 9998-12-31 */
    };

    for (size_t i = 0; i < sizeof(days) / sizeof(days[0]); i++)
        for (time_t t = days[i] - 60; t < days[i] + 2 * 86400; t += 59)
            assert_round_trip(t);
    for (time_t t = 253402300799 - 86400; t <= 253402300799; t += 61)
        assert_round_trip(t); /* the last day of 9999 */
}
END_TEST

static const struct {
    const char *text;
    time_t t;
} readable[] = {
    {"Sun, 06 Nov 1994 08:49:37 GMT", 784111777},
    {"Thu, 01 Jan 1970 00:00:00 GMT", 0},
    {"Tue, 29 Feb 2000 00:00:00 GMT", 951782400},
    {"Thu, 29 Feb 2024 23:59:59 GMT", 1709251199},
    {"Wed, 31 Dec 2025 23:59:59 GMT", 1767225599},
    {"Fri, 31 Dec 9999 23:59:59 GMT", 253402300799},
};

START_TEST(test_parse_known)
{
    time_t t = -1;

    ck_assert_int_eq(
        sl_date_parse(readable[_i].text, strlen(readable[_i].text), &t), 0);
    ck_assert_int_eq(t, readable[_i].t);
}
END_TEST

static const char *const unreadable[] = {
    "",
    "Sun, 06 Nov 1994 08:49:37 GM",   /* 28 bytes */
    "Sun, 06 Nov 1994 08:49:37 GMT ", /* 30 */
    " Sun, 06 Nov 1994 08:49:37 GMT", /* 30 */
    "Sun, 6 Nov 1994 08:49:37 GMT",   /* one-digit day */
    "Sun, 06 Nov 94 08:49:37 GMT",    /* two-digit year */
    "Sun, 06 Nov 1994 8:49:37 GMT",   /* one-digit hour */
    "Sun, 06 Foo 1994 08:49:37 GMT",  /* no month */
    "Sun, 06 nov 1994 08:49:37 GMT",  /* month names are case-sensitive */
    "Sun, 06 NOV 1994 08:49:37 GMT",
    "Sun, 06 anF 1994 08:49:37 GMT", /* across two names */
    "Sun, 06 ovD 1994 08:49:37 GMT",
    "Mon, 30 Feb 2004 00:00:00 GMT", /* Feb 30 */
    "Wed, 29 Feb 2023 00:00:00 GMT", /* Feb 29 of a common year */
    "Mon, 29 Feb 2100 00:00:00 GMT", /* 2100 is no leap year */
    "Sat, 31 Apr 2004 00:00:00 GMT",
    "Sun, 00 Nov 1994 08:49:37 GMT",
    "Sun, 32 Jan 1994 08:49:37 GMT",
    "Sun, 06 Nov 1994 24:00:00 GMT", /* hour 24 */
    "Sun, 06 Nov 1994 08:60:37 GMT",
    "Sun, 06 Nov 1994 08:49:61 GMT",
    "Sun, 06 Nov 1994 08:49:37 UTC", /* not GMT */
    "Sun, 06 Nov 1994 08:49:37 gmt",
    "Sun, 06 Nov 1994 08:49:37 +00",
    "Sun, 06 Nov 1994 08:49:37GMT ",
    "Sun, 06-Nov-1994 08:49:37 GMT",
    "Sun 06 Nov 1994 08:49:37 GMT ",
    "Sun, 06 Nov 1994 08.49.37 GMT",
    "Sun, 0x Nov 1994 08:49:37 GMT",
    "Sun, +6 Nov 1994 08:49:37 GMT",
    "Sun, 06 Nov 19a4 08:49:37 GMT",
    "Sun, 06 Nov 1994 08:-9:37 GMT",
    "Sunday, 06-Nov-94 08:49:37 GMT", /* RFC 850 */
    "Sun Nov  6 08:49:37 1994",       /* asctime() */
    "Sun Nov  6 08:49:37 1994     ",  /* asctime(), 29 bytes */
};

START_TEST(test_parse_refused)
{
    time_t t = 12345;

    ck_assert_msg(sl_date_parse(unreadable[_i], strlen(unreadable[_i]), &t) ==
                      -1,
                  "\"%s\" read as %lld", unreadable[_i], (long long)t);
}
END_TEST

/* Only P[0..N) is read: a date cut short is none, and what follows one
 * is not looked at. */
START_TEST(test_parse_reads_n_bytes_only)
{
    static const char d[] = "Sun, 06 Nov 1994 08:49:37 GMTxyz";
    time_t t = 0;

    ck_assert_int_eq(sl_date_parse(d, SL_DATE_LEN, &t), 0);
    ck_assert_int_eq(t, 784111777);
    ck_assert_int_eq(sl_date_parse(d, SL_DATE_LEN - 1, &t), -1);
    ck_assert_int_eq(sl_date_parse(d, SL_DATE_LEN + 1, &t), -1);
}
END_TEST

static Suite *date_suite(void)
{
    Suite *s = suite_create("date");
    TCase *tc = tcase_create("line");
    TCase *dates = tcase_create("dates");

    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_line_is_a_date_header_for_now);
    tcase_add_loop_test(tc, test_known_moments, 0,
                        sizeof(moments) / sizeof(moments[0]));
    tcase_add_test(tc, test_every_name_and_field);
    tcase_add_test(tc, test_english_whatever_the_locale);
    tcase_add_test(tc, test_line_survives_the_next_update);
    suite_add_tcase(s, tc);
    tcase_add_loop_test(dates, test_format_known_moments, 0,
                        sizeof(moments) / sizeof(moments[0]));
    tcase_add_test(dates, test_round_trip_every_year);
    tcase_add_test(dates, test_round_trip_leap_days);
    tcase_add_loop_test(dates, test_parse_known, 0,
                        sizeof(readable) / sizeof(readable[0]));
    tcase_add_loop_test(dates, test_parse_refused, 0,
                        sizeof(unreadable) / sizeof(unreadable[0]));
    tcase_add_test(dates, test_parse_reads_n_bytes_only);
    suite_add_tcase(s, dates);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(date_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
