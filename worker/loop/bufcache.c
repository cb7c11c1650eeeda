/* bufcache.c - free lists of connection buffers, by size class.
 *
 * The point is to make "free the buffers of an idle connection" cheap
 * enough to do after every response: a put and the next get are a few
 * pointer moves. The bound per class keeps what the cache holds small
 * (under 1 MiB in all) next to the memory it saves: before, every
 * connection kept its buffers for as long as it lived.
 */
#include "config.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "worker/loop/bufcache.h"

#define MAX_CLASS_SIZE ((size_t)SL_BUFCACHE_MIN << (SL_BUFCACHE_CLASSES - 1))

/* The class of a block of CAP bytes, -1 when CAP is not one. */
static int class_of(size_t cap)
{
    if (cap < SL_BUFCACHE_MIN || cap > MAX_CLASS_SIZE || (cap & (cap - 1)))
        return -1;
    return __builtin_ctzl(cap) - __builtin_ctzl(SL_BUFCACHE_MIN);
}

size_t sl_bufcache_size(size_t n)
{
    if (n <= SL_BUFCACHE_MIN)
        return SL_BUFCACHE_MIN;
    if (n > MAX_CLASS_SIZE)
        return n;
    return (size_t)1 << ((int)sizeof(long) * CHAR_BIT - __builtin_clzl(n - 1));
}

/* A block off class K's list, NULL when it is empty. */
static void *pop(sl_bufcache_t *bc, int k)
{
    void *p = bc->head[k];

    if (p != NULL) {
        bc->head[k] = *(void **)p;
        bc->count[k]--;
    }
    return p;
}

/* A new block of CAP bytes, a class size (exactly what sl_buf_grow()
 * makes of an empty buffer; through it a unit suite can make it fail,
 * tests/unit/buf_faults.h), NULL when out of memory. */
static void *fresh(size_t cap)
{
    sl_buf_t b = {0};

    if (sl_buf_grow(&b, cap) < 0)
        return NULL;
    return b.data;
}

void *sl_bufcache_take(sl_bufcache_t *bc, size_t cap)
{
    int k = class_of(cap);
    void *p;

    if (k < 0)
        return malloc(cap);
    p = pop(bc, k);
    return p != NULL ? p : fresh(cap);
}

void sl_bufcache_give(sl_bufcache_t *bc, void *p, size_t cap)
{
    int k = class_of(cap);

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

void sl_bufcache_put(sl_bufcache_t *bc, sl_buf_t *b)
{
    sl_bufcache_give(bc, b->data, b->cap);
    b->data = NULL;
    b->len = b->off = b->cap = 0;
}

int sl_bufcache_get(sl_bufcache_t *bc, sl_buf_t *b, size_t n)
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

unsigned sl_bufcache_held(const sl_bufcache_t *bc)
{
    unsigned n = 0;
    int k;

    for (k = 0; k < SL_BUFCACHE_CLASSES; k++)
        n += bc->count[k];
    return n;
}

void sl_bufcache_clear(sl_bufcache_t *bc)
{
    void *p;
    int k;

    for (k = 0; k < SL_BUFCACHE_CLASSES; k++) {
        while ((p = bc->head[k]) != NULL) {
            bc->head[k] = *(void **)p;
            free(p);
        }
        bc->count[k] = 0;
    }
}
