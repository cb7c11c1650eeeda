/* date.c - the cached Date header line.
 *
 * Formatting a date per response would cost more than the rest of the head;
 * the loop thread refreshes the line once a second instead. Two buffers and
 * an atomic index let executor threads read the current line while the loop
 * writes the other one.
 */
#include "config.h"

#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "common/date.h"

static char date_lines[2][48];
static atomic_int date_cur;

/* IMF-fixdate in English whatever the locale (an app may call setlocale()),
 * so the line is always SL_DATE_LINE_LEN bytes. */
void sl_date_update(void)
{
    static const char days[] = "SunMonTueWedThuFriSat";
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
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
