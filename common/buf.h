/* buf.h - a growable byte buffer with a read offset.
 *
 * Used for connection read buffers, request bodies and response output. It
 * never shrinks while in use, so a connection that served one large request
 * keeps its capacity for the next; sl_buf_trim() gives memory back when a
 * buffer is idle and oversized.
 */
#ifndef SL_BUF_H
#define SL_BUF_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *data; /* owned */
    size_t len; /* bytes stored, from data[0] */
    size_t off; /* bytes already consumed, off <= len */
    size_t cap;
} sl_buf_t;

/* Grow B so that N more bytes fit after len: sl_buf_reserve()'s slow
 * path (common/buf.c). 0, or -1 when out of memory (B unchanged). */
int sl_buf_grow(sl_buf_t *b, size_t n);

/* Make room for N more bytes after len; never moves stored bytes within the
 * buffer (offsets into it stay valid). 0, or -1 when out of memory. */
static inline int sl_buf_reserve(sl_buf_t *b, size_t n)
{
    if (b->cap - b->len >= n)
        return 0;
    return sl_buf_grow(b, n);
}

/* Append N bytes. 0, or -1 when out of memory. */
static inline int sl_buf_append(sl_buf_t *b, const void *src, size_t n)
{
    if (n == 0)
        return 0;
    if (sl_buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

/* Bytes stored but not yet consumed. */
static inline size_t sl_buf_pending(const sl_buf_t *b)
{
    return b->len - b->off;
}

/* Mark N bytes consumed; an emptied buffer rewinds to its start. */
static inline void sl_buf_consume(sl_buf_t *b, size_t n)
{
    b->off += n;
    if (b->off >= b->len)
        b->off = b->len = 0;
}

/* Move unconsumed bytes to the front. */
static inline void sl_buf_compact(sl_buf_t *b)
{
    if (b->off == 0)
        return;
    memmove(b->data, b->data + b->off, b->len - b->off);
    b->len -= b->off;
    b->off = 0;
}

/* Drop the contents; free the memory when it grew past KEEP bytes. */
static inline void sl_buf_reset(sl_buf_t *b, size_t keep)
{
    b->len = b->off = 0;
    if (b->cap > keep) {
        free(b->data);
        b->data = NULL;
        b->cap = 0;
    }
}

/* Append FROM's unconsumed bytes to TO and empty FROM, which keeps at
 * most KEEP bytes of memory: the two swap when TO is empty, no byte
 * copied. 0, or -1 when out of memory (FROM is emptied all the same: its
 * bytes are lost). */
static inline int sl_buf_move(sl_buf_t *to, sl_buf_t *from, size_t keep)
{
    int rc = 0;

    if (to->len == to->off) {
        sl_buf_t t = *to;
        *to = *from;
        *from = t;
    } else {
        rc = sl_buf_append(to, from->data + from->off, from->len - from->off);
    }
    sl_buf_reset(from, keep);
    return rc;
}

static inline void sl_buf_free(sl_buf_t *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->off = b->cap = 0;
}

/* Append the string literal S (without its NUL). */
#define SL_BUF_APPEND_LIT(b, s) sl_buf_append((b), (s), sizeof(s) - 1)

#endif
