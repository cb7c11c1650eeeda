/* buf.c - the slow path of buf.h: growing a buffer.
 *
 * Out of line, so that the inline fast path every append takes stays
 * small, and so that a unit suite can make growth fail on cue to test what
 * its callers do when memory runs out: a suite that defines SL_BUF_FAULTS
 * and includes this file (tests/unit/buf_faults.h) has its own
 * sl_buf_grow() with a countdown, and the linker then never takes this
 * object from the library. The binary is built without the countdown.
 */
#include "config.h"

#include <stdint.h>

#include "common/buf.h"

#ifdef SL_BUF_FAULTS
/* Growths that may still succeed; -1: all of them. */
static long sl_buf_faults_left = -1;
#endif

int sl_buf_grow(sl_buf_t *b, size_t n)
{
    size_t want, cap;
    char *p;

#ifdef SL_BUF_FAULTS
    if (sl_buf_faults_left == 0)
        return -1;
    if (sl_buf_faults_left > 0)
        sl_buf_faults_left--;
#endif
    if (n > SIZE_MAX / 2 - b->len)
        return -1;
    want = b->len + n;
    cap = b->cap ? b->cap : 1024;
    while (cap < want)
        cap *= 2;
    p = realloc(b->data, cap);
    if (p == NULL)
        return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}
