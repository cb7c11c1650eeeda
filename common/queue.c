/* queue.c - a bounded ring of tickets under one mutex.
 *
 * The one join between the loop thread and executor threads: the pump
 * pushes a pass's submits in one call, lanes pop them, and completions
 * come back the same way. A push wakes at most as many waiting consumers
 * as it brought tickets, so a batch of one never stampedes every lane.
 *
 * Sleepers wait on a semaphore, not a condition variable: a consumer
 * woken from pthread_cond_wait() takes the mutex back marked contended,
 * so its unlock makes one more futex call, and a signal given under the
 * mutex wakes a thread that (on the pusher's CPU) runs at once and sleeps
 * again on that mutex. Both cost a system call per wake-up on the pump's
 * hottest path; a post made after the unlock to a consumer that slept
 * without the mutex costs the one wake and nothing else.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/queue.h"

int sl_queue_init(sl_queue_t *q, uint32_t cap)
{
    memset(q, 0, sizeof(*q));
    q->items = malloc(cap * sizeof(*q->items)); /* written before read */
    if (q->items == NULL)
        return -1;
    q->cap = cap;
    if (pthread_mutex_init(&q->mu, NULL) != 0 || sem_init(&q->sem, 0, 0) != 0)
        return -1;
    return 0;
}

void sl_queue_destroy(sl_queue_t *q)
{
    free(q->items);
    q->items = NULL;
    pthread_mutex_destroy(&q->mu);
    sem_destroy(&q->sem);
}

int sl_queue_push(sl_queue_t *q, const sl_ticket_t *t, uint32_t n)
{
    uint32_t i, wake;

    pthread_mutex_lock(&q->mu);
    if (q->count + n > q->cap) {
        pthread_mutex_unlock(&q->mu);
        return -1;
    }
    for (i = 0; i < n; i++)
        q->items[(q->head + q->count + i) % q->cap] = t[i];
    q->count += n;
    wake = (uint32_t)q->idle < n ? (uint32_t)q->idle : n;
    q->idle -= (int)wake;
    pthread_mutex_unlock(&q->mu);
    for (i = 0; i < wake; i++)
        sem_post(&q->sem);
    return 0;
}

static bool pop_locked(sl_queue_t *q, sl_ticket_t *t)
{
    if (q->count == 0)
        return false;
    *t = q->items[q->head];
    q->head = (q->head + 1) % q->cap;
    q->count--;
    return true;
}

bool sl_queue_pop_wait(sl_queue_t *q, sl_ticket_t *t)
{
    bool ok;

    pthread_mutex_lock(&q->mu);
    while (q->count == 0 && !q->closed) {
        q->idle++;
        pthread_mutex_unlock(&q->mu);
        /* a post made before this wait is kept by the semaphore */
        while (sem_wait(&q->sem) != 0 && errno == EINTR)
            ;
        pthread_mutex_lock(&q->mu);
    }
    ok = pop_locked(q, t);
    pthread_mutex_unlock(&q->mu);
    return ok;
}

bool sl_queue_try_pop(sl_queue_t *q, sl_ticket_t *t)
{
    bool ok;

    pthread_mutex_lock(&q->mu);
    ok = pop_locked(q, t);
    pthread_mutex_unlock(&q->mu);
    return ok;
}

uint32_t sl_queue_pop_all(sl_queue_t *q, sl_ticket_t *out, uint32_t n)
{
    uint32_t i = 0;

    pthread_mutex_lock(&q->mu);
    while (i < n && pop_locked(q, &out[i]))
        i++;
    pthread_mutex_unlock(&q->mu);
    return i;
}

uint32_t sl_queue_count(sl_queue_t *q)
{
    uint32_t n;

    pthread_mutex_lock(&q->mu);
    n = q->count;
    pthread_mutex_unlock(&q->mu);
    return n;
}

void sl_queue_close(sl_queue_t *q)
{
    int wake;

    pthread_mutex_lock(&q->mu);
    q->closed = true;
    wake = q->idle;
    q->idle = 0;
    pthread_mutex_unlock(&q->mu);
    while (wake-- > 0)
        sem_post(&q->sem);
}
