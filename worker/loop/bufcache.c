/* bufcache.c - free lists of connection buffers, by size class.
 *
 * The point is to make "free the buffers of an idle connection" cheap
 * enough to do after every response: a put and the next get are a few
 * pointer moves. The bound per class keeps what the cache holds small
 * (under 1 MiB in all) next to the memory it saves: before, every
 * connection kept its buffers for as long as it lived.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>

#include "worker/loop/bufcache.h"

/* Exactly what sl_buf_grow() makes of an empty buffer for a class size:
 * through it a unit suite can make it fail (tests/unit/buf_faults.h). */
void *sl_bufcache_fresh(size_t cap)
{
    sl_buf_t b = {0};

    if (sl_bufcache_class(cap) < 0)
        return malloc(cap);
    if (sl_buf_grow(&b, cap) < 0)
        return NULL;
    return b.data;
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
