/* bufcache.h - a pump's small cache of freed connection buffers.
 *
 * A connection gives its buffers back when it goes idle (conn.c), so an
 * idle keep-alive connection costs its pool entry and nothing else. A busy
 * one would then malloc and free its buffers on every request; this cache
 * keeps a bounded number of freed blocks per size class (powers of two
 * from 1 KiB to 64 KiB, the sizes sl_buf_grow() makes) and hands them out
 * again, so the next request takes a block off a list instead. Freed
 * blocks hold their list link in their own first bytes: the cache
 * allocates nothing itself. Loop thread only.
 */
#ifndef SL_BUFCACHE_H
#define SL_BUFCACHE_H

#include <limits.h>
#include <stddef.h>
#include <stdlib.h>

#include "common/buf.h"

#define SL_BUFCACHE_MIN     1024
#define SL_BUFCACHE_CLASSES 7 /* 1 KiB .. 64 KiB */
#define SL_BUFCACHE_MAX     (SL_BUFCACHE_MIN << (SL_BUFCACHE_CLASSES - 1))

/* Bytes of blocks one size class keeps, at most; a block freed past it is
 * given back to malloc. */
#define SL_BUFCACHE_CLASS_BYTES (128 * 1024)

typedef struct {
    void *head[SL_BUFCACHE_CLASSES]; /* owned: free blocks, linked */
    unsigned count[SL_BUFCACHE_CLASSES];
} sl_bufcache_t;

/* The class of a block of CAP bytes, -1 when CAP is not one. */
static inline int sl_bufcache_class(size_t cap)
{
    if (cap < SL_BUFCACHE_MIN || cap > SL_BUFCACHE_MAX || (cap & (cap - 1)))
        return -1;
    return __builtin_ctzl(cap) - __builtin_ctzl(SL_BUFCACHE_MIN);
}

/* The size sl_bufcache_take() should be asked for to hold N bytes: N
 * rounded up to a class, or N when it is beyond the classes. */
static inline size_t sl_bufcache_size(size_t n)
{
    if (n <= SL_BUFCACHE_MIN)
        return SL_BUFCACHE_MIN;
    if (n > SL_BUFCACHE_MAX)
        return n;
    return (size_t)1 << ((int)sizeof(long) * CHAR_BIT - __builtin_clzl(n - 1));
}

/* A new block of CAP bytes (bufcache.c), NULL when out of memory. */
void *sl_bufcache_fresh(size_t cap);

/* Take a block of CAP bytes (a class size, or any size that is not
 * cached): a cached one, else a new one; NULL when out of memory. */
static inline void *sl_bufcache_take(sl_bufcache_t *bc, size_t cap)
{
    int k = sl_bufcache_class(cap);
    void *p;

    if (k < 0 || (p = bc->head[k]) == NULL)
        return sl_bufcache_fresh(cap);
    bc->head[k] = *(void **)p;
    bc->count[k]--;
    return p;
}

/* Give back block P (may be NULL) of CAP bytes: cached when CAP is a
 * class with room, else freed. */
static inline void sl_bufcache_give(sl_bufcache_t *bc, void *p, size_t cap)
{
    int k = sl_bufcache_class(cap);

    if (p == NULL)
        return;
    if (k < 0 || (size_t)(bc->count[k] + 1) * cap > SL_BUFCACHE_CLASS_BYTES) {
        free(p);
        return;
    }
    *(void **)p = bc->head[k];
    bc->head[k] = p;
    bc->count[k]++;
}

/* Give B's memory to the cache (or to free() when its size is not a class
 * or its class is full) and leave B empty, without memory. */
static inline void sl_bufcache_put(sl_bufcache_t *bc, sl_buf_t *b)
{
    if (b->data == NULL)
        return;
    sl_bufcache_give(bc, b->data, b->cap);
    b->data = NULL;
    b->len = b->off = b->cap = 0;
}

/* Give B (empty, without memory) a block of at least N bytes: a cached
 * one when a class fits, else a new one. 0, or -1 when out of memory (B
 * unchanged). A B that has memory already is only reserved N more bytes. */
static inline int sl_bufcache_get(sl_bufcache_t *bc, sl_buf_t *b, size_t n)
{
    size_t cap;
    char *p;

    if (b->data != NULL)
        return sl_buf_reserve(b, n);
    cap = sl_bufcache_size(n);
    p = sl_bufcache_take(bc, cap);
    if (p == NULL)
        return -1;
    b->data = p;
    b->cap = cap;
    b->len = b->off = 0;
    return 0;
}

/* Blocks the cache holds (tests). */
unsigned sl_bufcache_held(const sl_bufcache_t *bc);

/* Free every cached block. */
void sl_bufcache_clear(sl_bufcache_t *bc);

#endif
