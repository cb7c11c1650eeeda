/* queue.h - tickets between the loop thread and the executor.
 *
 * A ticket names a request by pool index and generation; a stale ticket (the
 * slot has moved on to another request) is recognised by its generation and
 * dropped, which is what makes slot reuse safe.
 */
#ifndef SL_QUEUE_H
#define SL_QUEUE_H

#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>

enum {
    SL_TICKET_SUBMIT = 0, /* a new request for the executor */
    SL_TICKET_WAKE = 1,   /* ASGI: something the request awaited happened */
};

typedef struct {
    uint32_t idx, gen;
    uint32_t kind; /* SL_TICKET_* */
} sl_ticket_t;

/* A queue of tickets under its own mutex. A consumer with nothing to take
 * counts itself in `idle` and sleeps on `sem` without the mutex; a push
 * takes as many sleepers off `idle` as it brought tickets and posts `sem`
 * once for each. */
typedef struct {
    pthread_mutex_t mu;
    sem_t sem;
    sl_ticket_t *items; /* owned ring */
    uint32_t cap, head, count;
    int idle; /* consumers asleep on sem, not yet woken */
    bool closed;
} sl_queue_t;

int sl_queue_init(sl_queue_t *q, uint32_t cap);
void sl_queue_destroy(sl_queue_t *q);
/* Push N tickets; wakes up to N waiting consumers. 0, or -1 when full. */
int sl_queue_push(sl_queue_t *q, const sl_ticket_t *t, uint32_t n);
/* Pop one, waiting while empty; false when closed. Caller must not hold the
 * GIL. */
bool sl_queue_pop_wait(sl_queue_t *q, sl_ticket_t *t);
/* Pop one without waiting; false when empty. */
bool sl_queue_try_pop(sl_queue_t *q, sl_ticket_t *t);
/* Pop up to N without waiting; returns the count. */
uint32_t sl_queue_pop_all(sl_queue_t *q, sl_ticket_t *out, uint32_t n);
/* Tickets queued now (any thread: by the time it returns, a guess). */
uint32_t sl_queue_count(sl_queue_t *q);
/* Wake every waiter and make pop_wait return false. */
void sl_queue_close(sl_queue_t *q);

#endif
