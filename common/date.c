/* date.c - the cached Date header line, and HTTP dates written and read.
 *
 * Formatting a date per response would cost more than the rest of the head;
 * the loop thread refreshes the line once a second instead. Two buffers and
 * an atomic index let executor threads read the current line while the loop
 * writes the other one.
 */
#include "config.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/date.h"

static char date_lines[2][48];
static atomic_int date_cur;

static const char days[] = "SunMonTueWedThuFriSat";
static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";

/* IMF-fixdate in English whatever the locale (an app may call setlocale()),
 * so the line is always SL_DATE_LINE_LEN bytes. */
void sl_date_update(void)
{
    int next = 1 - atomic_load(&date_cur);
    time_t now = time(NULL);
    struct tm tm;

    gmtime_r(&now, &tm);
    snprintf(date_lines[next], sizeof(date_lines[next]),
             "Date: %.3s, %02d %.3s %04d %02d:%02d:%02d GMT\r\n",
             days + 3 * tm.tm_wday, tm.tm_mday, months + 3 * tm.tm_mon,
             tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    atomic_store(&date_cur, next);
}

const char *sl_date_line(void)
{
    return date_lines[atomic_load(&date_cur)];
}

void sl_date_format(time_t t, char out[SL_DATE_LEN + 1])
{
    char line[64]; /* room for any int the compiler imagines */
    struct tm tm;

    gmtime_r(&t, &tm);
    snprintf(line, sizeof(line), "%.3s, %02d %.3s %04d %02d:%02d:%02d GMT",
             days + 3 * tm.tm_wday, tm.tm_mday, months + 3 * tm.tm_mon,
             (tm.tm_year + 1900) % 10000, tm.tm_hour, tm.tm_min, tm.tm_sec);
    memcpy(out, line, SL_DATE_LEN);
    out[SL_DATE_LEN] = '\0';
}

/* N decimal digits at P, or -1. */
static int digits(const char *p, int n)
{
    int v = 0;

    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

int sl_date_parse(const char *p, size_t n, time_t *out)
{
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    struct tm tm = {0};
    const char *m;
    int day, year, hh, mm, ss, mon;

    /* "Sun, 06 Nov 1994 08:49:37 GMT": fixed width, the weekday unread */
    if (n != SL_DATE_LEN || p[3] != ',' || p[4] != ' ' || p[7] != ' ' ||
        p[11] != ' ' || p[16] != ' ' || p[19] != ':' || p[22] != ':' ||
        memcmp(p + 25, " GMT", 4) != 0)
        return -1;
    m = memmem(months, sizeof(months) - 1, p + 8, 3);
    day = digits(p + 5, 2);
    year = digits(p + 12, 4);
    hh = digits(p + 17, 2);
    mm = digits(p + 20, 2);
    ss = digits(p + 23, 2);
    if (m == NULL || (m - months) % 3 != 0 || day < 1 || year < 1970 ||
        hh < 0 || hh > 23 || mm < 0 || mm > 59 || ss < 0 || ss > 60)
        return -1;
    mon = (int)(m - months) / 3;
    if (day > mdays[mon] ||
        (mon == 1 && day == 29 &&
         (year % 4 != 0 || (year % 100 == 0 && year % 400 != 0))))
        return -1;
    tm.tm_mday = day;
    tm.tm_mon = mon;
    tm.tm_year = year - 1900;
    tm.tm_hour = hh;
    tm.tm_min = mm;
    tm.tm_sec = ss;
    *out = timegm(&tm);
    return 0;
}
