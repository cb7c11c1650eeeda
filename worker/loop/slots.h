/* slots.h - a pump's table of exchanges beyond its connections' own.
 *
 * HTTP/2's streams (h2.h) and HTTP/1.1's requests run ahead (h1_ahead.h)
 * are exchanges a session takes and gives back many times over. Each kind
 * lives in a table of its own: a slot is allocated on first use and kept,
 * since an executor may hold its id (a ticket, a late call) after it is
 * given back, and the exchange's generation then tells that call it is
 * stale. Ids follow the connections' (the pump's id ranges, pump.h).
 * Loop thread, but for sl_slots_get().
 */
#ifndef SL_SLOTS_H
#define SL_SLOTS_H

#include <stddef.h>
#include <stdint.h>

#include "worker/loop/exchange.h"

typedef struct sl_slots {
    sl_exch_t **slot; /* owned: slot[0..used), each owned */
    uint32_t *free;   /* owned: indexes of the slots given back, a stack */
    uint32_t nfree;
    uint32_t used;
    uint32_t max;
    uint32_t base; /* the first slot's id */
    size_t size;   /* bytes of an entry, whose sl_exch_t comes first */
} sl_slots_t;

/* Room for MAX entries of SIZE bytes, ids from BASE; none allocated yet.
 * MAX 0 makes an empty table. 0, or -1 when out of memory. */
int sl_slots_init(sl_slots_t *t, uint32_t max, uint32_t base, size_t size);
void sl_slots_destroy(sl_slots_t *t);

/* A free entry: one given back, or a new one zeroed (its exchange's
 * mutex made, its id set, no file). NULL when all MAX are taken or out of
 * memory. */
sl_exch_t *sl_slots_take(sl_slots_t *t);

/* Give X back (taken from T). */
void sl_slots_put(sl_slots_t *t, sl_exch_t *x);

/* The entry ID names (an id of T's). Any thread: slots do not move. */
static inline sl_exch_t *sl_slots_get(const sl_slots_t *t, uint32_t id)
{
    return t->slot[id - t->base];
}

#endif
