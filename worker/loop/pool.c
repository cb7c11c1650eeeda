/* pool.c - the connection pool and its free, active and idle lists
 * (pool.h). */
#include "config.h"

#include <stdlib.h>

#include "worker/loop/pool.h"

/* Idle connections looked at for a victim at most, per call: ones whose
 * next request is already on its way are passed over. */
#define EVICT_TRIES 16

int sl_pool_init(sl_pool_t *pool, uint32_t n, struct ev_loop *loop)
{
    pool->nconns = n;
    pool->conns = calloc(n, sizeof(sl_conn_t));
    pool->active.next = pool->active.prev = &pool->active;
    pool->loop = loop;
    return pool->conns != NULL ? 0 : -1;
}

void sl_pool_destroy(sl_pool_t *pool)
{
    free(pool->conns);
    pool->conns = NULL;
}

sl_conn_t *sl_pool_take(sl_pool_t *pool)
{
    sl_conn_t *c = pool->free_list;

    if (c != NULL)
        pool->free_list = c->next;
    else
        c = &pool->conns[pool->nfresh++];
    return c;
}

void sl_pool_unused(sl_pool_t *pool, sl_conn_t *c)
{
    c->next = pool->free_list;
    c->prev = NULL;
    pool->free_list = c;
}

void sl_pool_activate(sl_pool_t *pool, sl_conn_t *c)
{
    c->next = pool->active.next;
    c->prev = &pool->active;
    pool->active.next->prev = c;
    pool->active.next = c;
    pool->nactive++;
}

void sl_pool_release(sl_pool_t *pool, sl_conn_t *c)
{
    sl_pool_idle_remove(pool, c);
    c->prev->next = c->next;
    c->next->prev = c->prev;
    c->next = pool->free_list;
    c->prev = NULL;
    pool->free_list = c;
    pool->nactive--;
    pool->changed(pool, true);
}

void sl_pool_idle_add(sl_pool_t *pool, sl_conn_t *c)
{
    if (c->idle_prev != NULL || pool->idle_head == c)
        return;
    c->idle_prev = NULL;
    c->idle_next = pool->idle_head;
    if (pool->idle_head != NULL)
        pool->idle_head->idle_prev = c;
    else
        pool->idle_tail = c;
    pool->idle_head = c;
    pool->nidle++;
    /* a full pool stopped the listeners: this one can make room */
    pool->changed(pool, false);
}

void sl_pool_idle_remove(sl_pool_t *pool, sl_conn_t *c)
{
    if (c->idle_prev == NULL && pool->idle_head != c)
        return;
    if (c->idle_prev != NULL)
        c->idle_prev->idle_next = c->idle_next;
    else
        pool->idle_head = c->idle_next;
    if (c->idle_next != NULL)
        c->idle_next->idle_prev = c->idle_prev;
    else
        pool->idle_tail = c->idle_prev;
    c->idle_next = c->idle_prev = NULL;
    pool->nidle--;
}

sl_conn_t *sl_pool_victim(sl_pool_t *pool)
{
    sl_conn_t *c;
    unsigned tries;

    for (tries = 0; pool->idle_tail != NULL && tries < EVICT_TRIES; tries++) {
        c = pool->idle_tail;
        /* the list is kept by the connections; a stale entry is only
         * dropped */
        if (c->state != SL_CONN_READING || c->h1.in_msg ||
            sl_buf_pending(&c->rbuf) > 0) {
            sl_pool_idle_remove(pool, c);
            continue;
        }
        /* its next request is on its way (bytes we have not read, in its
         * transport or the kernel): closing it would reset that request */
        if (sl_transport_waiting(&c->tp)) {
            sl_pool_idle_remove(pool, c);
            ev_feed_fd_event(pool->loop, c->tp.fd, EV_READ);
            continue;
        }
        return c;
    }
    return NULL;
}
