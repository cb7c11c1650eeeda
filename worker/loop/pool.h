/* pool.h - a worker's connections: the pool, and which of them are free,
 * active or idle.
 *
 * --worker-connections entries, calloc'd and set up on first use, so a
 * pool sized for a peak holds no memory for connections that never came
 * (824 KiB untouched at the default 1000 in a worker that never had more
 * than a few at once). Idle keep-alive connections (a response done, no
 * byte of the next request yet) are listed newest first: with the pool
 * used up, a new connection closes the longest idle and takes its slot.
 * Loop thread only. The pool names nothing of what a connection does; it
 * tells its owner through changed() that a slot may be had again.
 */
#ifndef SL_POOL_H
#define SL_POOL_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>

#include "worker/loop/conn.h"

typedef struct sl_pool sl_pool_t;

struct sl_pool {
    sl_conn_t *conns; /* owned */
    uint32_t nconns;
    uint32_t nfresh;      /* conns[nfresh..] never used: still zero pages */
    sl_conn_t *free_list; /* entries given back, taken before fresh ones */
    sl_conn_t active;     /* sentinel of the active list */
    uint32_t nactive;
    sl_conn_t *idle_head; /* links: sl_conn_t.idle_next / idle_prev */
    sl_conn_t *idle_tail;
    uint32_t nidle;
    bool evict_told;      /* the first eviction was logged */
    struct ev_loop *loop; /* borrowed */
    /* A slot may be had again: a connection was given back (RELEASED) or
     * became idle, and so evictable. Set by the owner (pump.c). */
    void (*changed)(sl_pool_t *pool, bool released);
};

/* Set up POOL of N entries on LOOP. 0, or -1 when out of memory. */
int sl_pool_init(sl_pool_t *pool, uint32_t n, struct ev_loop *loop);

/* Free the entries' array (their own memory is the caller's to free). */
void sl_pool_destroy(sl_pool_t *pool);

/* Whether an entry can be had without closing an idle connection. */
static inline bool sl_pool_have_free(const sl_pool_t *pool)
{
    return pool->free_list != NULL || pool->nfresh < pool->nconns;
}

/* A free entry (sl_pool_have_free() said there is one): one given back,
 * else the next never used. Taking the used ones first keeps the pages
 * touched as few as the peak needs. A never-used entry comes zeroed (its
 * pump NULL): the caller sets it up (sl_conn_init()), then puts it on the
 * active list (sl_pool_activate()), or gives it back unused
 * (sl_pool_unused()). */
sl_conn_t *sl_pool_take(sl_pool_t *pool);

/* C, taken, is in use from here: on the active list. */
void sl_pool_activate(sl_pool_t *pool, sl_conn_t *c);

/* C, taken, was not used after all: free again. */
void sl_pool_unused(sl_pool_t *pool, sl_conn_t *c);

/* Give C back (it is closed). */
void sl_pool_release(sl_pool_t *pool, sl_conn_t *c);

/* The pool is used up: the longest-idle keep-alive connection, to close
 * for a new one, or NULL. A client whose next request is on the wire (or
 * that left: EOF) is not one: it is dropped from the list and read in this
 * pass. Looks at a few at most; the ones passed over leave the list, so
 * the next call goes on from there. */
sl_conn_t *sl_pool_victim(sl_pool_t *pool);

/* C has answered a request and kept the connection, and no byte of the
 * next request is here: it may be evicted, the longest idle first. No-op
 * when C is already on the idle list. */
void sl_pool_idle_add(sl_pool_t *pool, sl_conn_t *c);

/* C is no longer idle (bytes came, or it closes). No-op when it is not on
 * the idle list. */
void sl_pool_idle_remove(sl_pool_t *pool, sl_conn_t *c);

#endif
