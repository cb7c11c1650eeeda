/* date.h - the cached "Date: ...\r\n" header line, refreshed by the loop. */
#ifndef SL_DATE_H
#define SL_DATE_H

/* The length of the line, CRLF included: IMF-fixdate is fixed-width. */
#define SL_DATE_LINE_LEN 37

/* Format the current time into the line readers do not see, then make it
 * theirs. One writer (the loop thread), once a second. */
void sl_date_update(void);

/* The current line, SL_DATE_LINE_LEN bytes. Any thread; good until the
 * second update after this call. */
const char *sl_date_line(void);

#endif
