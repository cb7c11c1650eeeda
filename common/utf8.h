/* utf8.h - an incremental UTF-8 validator (RFC 3629).
 *
 * Text arrives in pieces (WebSocket fragments, inflate output), and a
 * character may straddle two of them, so the state between pieces is a
 * few bytes in the caller's struct, never a buffer. Overlong forms,
 * UTF-16 surrogates (U+D800..U+DFFF) and anything above U+10FFFF are
 * invalid, and are caught at the first byte that makes them so: a
 * receiver can fail a stream without waiting for the rest.
 */
#ifndef SL_UTF8_H
#define SL_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Results of sl_utf8_feed(). */
enum {
    SL_UTF8_INVALID = -1,   /* not UTF-8, whatever follows */
    SL_UTF8_VALID = 0,      /* valid so far, and ends on a character */
    SL_UTF8_INCOMPLETE = 1, /* valid so far, ends inside a character */
};

typedef struct {
    uint8_t need;   /* continuation bytes still expected */
    uint8_t lo, hi; /* the range the next continuation byte must be in */
    uint8_t bad;    /* an invalid byte was seen: stays invalid */
} sl_utf8_t;

/* Start a new text. */
static inline void sl_utf8_init(sl_utf8_t *u)
{
    u->need = 0;
    u->lo = 0x80;
    u->hi = 0xBF;
    u->bad = 0;
}

/* Check the next N bytes at P of the text U is following: SL_UTF8_*. */
int sl_utf8_feed(sl_utf8_t *u, const void *p, size_t n);

/* Where the text U followed stands: SL_UTF8_*. */
static inline int sl_utf8_state(const sl_utf8_t *u)
{
    if (u->bad)
        return SL_UTF8_INVALID;
    return u->need > 0 ? SL_UTF8_INCOMPLETE : SL_UTF8_VALID;
}

/* Check a whole text: SL_UTF8_VALID, or SL_UTF8_INVALID (a text cut
 * inside a character is invalid). */
int sl_utf8_check(const void *p, size_t n);

#endif
