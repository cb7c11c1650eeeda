/* date.h - the cached "Date: ...\r\n" header line, refreshed by the loop,
 * and HTTP dates (IMF-fixdate, RFC 9110 §5.6.7) written and read. */
#ifndef SL_DATE_H
#define SL_DATE_H

/* The length of the line, CRLF included: IMF-fixdate is fixed-width. */
#define SL_DATE_LINE_LEN 37

/* The length of an IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT". */
#define SL_DATE_LEN 29

#include <stddef.h>
#include <time.h>

/* Format the current time into the line readers do not see, then make it
 * theirs. One writer (the loop thread), once a second. */
void sl_date_update(void);

/* The current line, SL_DATE_LINE_LEN bytes. Any thread; good until the
 * second update after this call. */
const char *sl_date_line(void);

/* T as an IMF-fixdate into OUT, NUL-terminated. Any thread. */
void sl_date_format(time_t t, char out[SL_DATE_LEN + 1]);

/* P[0..N), an IMF-fixdate (the form every client sends today; the two
 * obsolete forms are not read), into *OUT. 0, or -1 when it is not one:
 * a condition with a date that cannot be read is ignored (RFC 9110
 * §13.1.3). */
int sl_date_parse(const char *p, size_t n, time_t *out);

#endif
