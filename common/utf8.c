/* utf8.c - the incremental UTF-8 validator (utf8.h).
 *
 * The lead byte sets how many continuation bytes follow and the range of
 * the first of them: the Unicode Standard's table 3-7 of well-formed
 * sequences, where the narrowed ranges after E0, ED, F0 and F4 are what
 * exclude overlongs, surrogates and code points above U+10FFFF. ASCII,
 * most of what a server sees, is skipped eight bytes at a time.
 */
#include "config.h"

#include <string.h>

#include "common/utf8.h"

/* Set up U for the continuation bytes of lead byte B; false when B cannot
 * start a character. */
static int lead(sl_utf8_t *u, uint8_t b)
{
    u->lo = 0x80;
    u->hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
        u->need = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
        u->need = 2;
        if (b == 0xE0)
            u->lo = 0xA0; /* below: overlong */
        else if (b == 0xED)
            u->hi = 0x9F; /* above: surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        u->need = 3;
        if (b == 0xF0)
            u->lo = 0x90; /* below: overlong */
        else if (b == 0xF4)
            u->hi = 0x8F; /* above: past U+10FFFF */
    } else {
        return 0; /* 80..C1 (continuation, overlong 2-byte), F5..FF */
    }
    return 1;
}

int sl_utf8_feed(sl_utf8_t *u, const void *p, size_t n)
{
    const uint8_t *s = p, *end = s + n;

    if (u->bad)
        return SL_UTF8_INVALID;
    while (s < end) {
        uint8_t b = *s;

        if (u->need > 0) {
            if (b < u->lo || b > u->hi)
                goto invalid;
            u->lo = 0x80;
            u->hi = 0xBF;
            u->need--;
            s++;
            continue;
        }
        if (b < 0x80) {
            /* a run of ASCII, a word at a time */
            while (end - s >= 8) {
                uint64_t w;
                memcpy(&w, s, 8);
                if (w & 0x8080808080808080ull)
                    break;
                s += 8;
            }
            while (s < end && *s < 0x80)
                s++;
            continue;
        }
        if (!lead(u, b))
            goto invalid;
        s++;
    }
    return u->need > 0 ? SL_UTF8_INCOMPLETE : SL_UTF8_VALID;
invalid:
    u->bad = 1;
    return SL_UTF8_INVALID;
}

int sl_utf8_check(const void *p, size_t n)
{
    sl_utf8_t u;

    sl_utf8_init(&u);
    return sl_utf8_feed(&u, p, n) == SL_UTF8_VALID ? SL_UTF8_VALID
                                                   : SL_UTF8_INVALID;
}
