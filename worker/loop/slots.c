/* slots.c - a pump's table of exchanges (slots.h). */
#include "config.h"

#include <stdlib.h>

#include "worker/loop/slots.h"

int sl_slots_init(sl_slots_t *t, uint32_t max, uint32_t base, size_t size)
{
    *t = (sl_slots_t){.max = max, .base = base, .size = size};
    if (max == 0)
        return 0;
    /* written before read: their pages are touched only as used */
    t->slot = malloc(max * sizeof(*t->slot));
    t->free = malloc(max * sizeof(*t->free));
    return t->slot != NULL && t->free != NULL ? 0 : -1;
}

void sl_slots_destroy(sl_slots_t *t)
{
    uint32_t i;

    for (i = 0; i < t->used; i++) {
        pthread_mutex_destroy(&t->slot[i]->mu);
        free(t->slot[i]);
    }
    free(t->slot);
    free(t->free);
    t->slot = NULL;
    t->free = NULL;
    t->used = t->nfree = 0;
}

sl_exch_t *sl_slots_take(sl_slots_t *t)
{
    sl_exch_t *x;

    if (t->nfree > 0)
        return t->slot[t->free[--t->nfree]];
    if (t->used == t->max)
        return NULL;
    x = calloc(1, t->size);
    if (x == NULL)
        return NULL;
    if (pthread_mutex_init(&x->mu, NULL) != 0) {
        free(x);
        return NULL;
    }
    x->id = t->base + t->used;
    sl_tail_init(&x->tail);
    t->slot[t->used++] = x;
    return x;
}

void sl_slots_put(sl_slots_t *t, sl_exch_t *x)
{
    t->free[t->nfree++] = x->id - t->base;
}
