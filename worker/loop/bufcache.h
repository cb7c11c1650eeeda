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

#include <stddef.h>

#include "common/buf.h"

#define SL_BUFCACHE_MIN     1024
#define SL_BUFCACHE_CLASSES 7 /* 1 KiB .. 64 KiB */

/* Bytes of blocks one size class keeps, at most; a block freed past it is
 * given back to malloc. */
#define SL_BUFCACHE_CLASS_BYTES (128 * 1024)

typedef struct {
    void *head[SL_BUFCACHE_CLASSES]; /* owned: free blocks, linked */
    unsigned count[SL_BUFCACHE_CLASSES];
} sl_bufcache_t;

/* Give B's memory to the cache (or to free() when its size is not a class
 * or its class is full) and leave B empty, without memory. */
void sl_bufcache_put(sl_bufcache_t *bc, sl_buf_t *b);

/* Give B (empty, without memory) a block of at least N bytes: a cached
 * one when a class fits, else a new one. 0, or -1 when out of memory (B
 * unchanged). A B that has memory already is only reserved N more bytes. */
int sl_bufcache_get(sl_bufcache_t *bc, sl_buf_t *b, size_t n);

/* The same for raw blocks of CAP bytes (a power of two, or any size that
 * is not cached): take one, or give one back (P may be NULL). */
void *sl_bufcache_take(sl_bufcache_t *bc, size_t cap);
void sl_bufcache_give(sl_bufcache_t *bc, void *p, size_t cap);

/* The size sl_bufcache_take() should be asked for to hold N bytes: N
 * rounded up to a class, or N when it is beyond the classes. */
size_t sl_bufcache_size(size_t n);

/* Blocks the cache holds (tests). */
unsigned sl_bufcache_held(const sl_bufcache_t *bc);

/* Free every cached block. */
void sl_bufcache_clear(sl_bufcache_t *bc);

#endif
