/* test_queue.c - check suite for common/queue.c, the ticket queue between
 * the loop thread and the executor lanes.
 *
 * The single-threaded cases pin down the ring: order, wrap-around, a push
 * refused whole when it does not fit. The threaded ones use real consumer
 * threads blocked in sl_queue_pop_wait() and wait, bounded, for what proves
 * each step: the queue's own count of idle consumers, or a consumer's
 * counter of what it took. How many consumers a push wakes is not visible
 * from outside the queue, so this file stands in for sem_post() (the
 * executable's definition wins over libc's for the queue's calls) and
 * counts the posts to the queue's own semaphore, a wake-up each, before
 * passing each call on to libc.
 */
#include "config.h"

#include <check.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common/queue.h"
#include "tests/unit/harness_base.h"

#define WAIT_S 5.0

/* ---- counting wake-ups ---------------------------------------------- */

static sem_t *watched; /* the queue's semaphore, once a test says so */
static atomic_int posts;

int sem_post(sem_t *sem)
{
    static int (*real)(sem_t *);

    if (real == NULL)
        real = (int (*)(sem_t *))dlsym(RTLD_NEXT, "sem_post");
    if (sem == watched)
        atomic_fetch_add(&posts, 1);
    return real(sem);
}

static int nposts(void)
{
    return atomic_load(&posts);
}

/* ---- helpers ---------------------------------------------------------- */

static sl_queue_t q;

static sl_ticket_t ticket(uint32_t idx)
{
    return (sl_ticket_t){.idx = idx, .gen = idx * 10, .kind = idx % 2};
}

static void push_range(uint32_t from, uint32_t n)
{
    sl_ticket_t t[64];

    ck_assert_uint_le(n, 64);
    for (uint32_t i = 0; i < n; i++)
        t[i] = ticket(from + i);
    ck_assert_int_eq(sl_queue_push(&q, t, n), 0);
}

static void expect_pop(uint32_t idx)
{
    sl_ticket_t t;

    ck_assert_msg(sl_queue_try_pop(&q, &t), "queue empty, wanted %u", idx);
    ck_assert_uint_eq(t.idx, idx);
    ck_assert_uint_eq(t.gen, idx * 10);
    ck_assert_uint_eq(t.kind, idx % 2);
}

static int idle_now(void)
{
    pthread_mutex_lock(&q.mu);
    int n = q.idle;
    pthread_mutex_unlock(&q.mu);
    return n;
}

static uint32_t count_now(void)
{
    pthread_mutex_lock(&q.mu);
    uint32_t n = q.count;
    pthread_mutex_unlock(&q.mu);
    return n;
}

typedef struct {
    int want;
} idle_t;

static bool idle_is(void *arg)
{
    return idle_now() == ((idle_t *)arg)->want;
}

static bool queue_empty(void *arg)
{
    (void)arg;
    return count_now() == 0;
}

/* Wait until exactly N consumers are blocked in sl_queue_pop_wait() (a
 * consumer a push has woken no longer counts, though it may not have run
 * yet). */
static void wait_idle(int n)
{
    idle_t w = {n};

    ck_assert_msg(h_wait_until(idle_is, &w, WAIT_S),
                  "%d consumers idle, waited for %d", idle_now(), n);
}

/* A consumer: pop_wait until it returns false, keeping what it took. */
typedef struct {
    pthread_t thread;
    sl_ticket_t *got; /* owned */
    size_t cap;
    atomic_size_t n;
    atomic_bool done;
} consumer_t;

static void *consume(void *arg)
{
    consumer_t *c = arg;
    sl_ticket_t t;

    while (sl_queue_pop_wait(&q, &t)) {
        size_t i = atomic_load(&c->n);
        if (i < c->cap)
            c->got[i] = t;
        atomic_store(&c->n, i + 1);
    }
    atomic_store(&c->done, true);
    return NULL;
}

static void consumers_start(consumer_t *cs, int n, size_t cap)
{
    for (int i = 0; i < n; i++) {
        cs[i].got = calloc(cap, sizeof(sl_ticket_t));
        ck_assert_ptr_nonnull(cs[i].got);
        cs[i].cap = cap;
        atomic_init(&cs[i].n, 0);
        atomic_init(&cs[i].done, false);
        ck_assert_int_eq(pthread_create(&cs[i].thread, NULL, consume, &cs[i]),
                         0);
    }
}

typedef struct {
    consumer_t *cs;
    int n;
    size_t want;
} taken_t;

static size_t taken(consumer_t *cs, int n)
{
    size_t k = 0;

    for (int i = 0; i < n; i++)
        k += atomic_load(&cs[i].n);
    return k;
}

static bool taken_is(void *arg)
{
    taken_t *w = arg;

    return taken(w->cs, w->n) >= w->want;
}

/* Wait until the consumers took WANT tickets between them. */
static void wait_taken(consumer_t *cs, int n, size_t want)
{
    taken_t w = {cs, n, want};

    ck_assert_msg(h_wait_until(taken_is, &w, WAIT_S),
                  "consumers took %zu tickets, waited for %zu", taken(cs, n),
                  want);
}

static bool all_done(void *arg)
{
    taken_t *w = arg;

    for (int i = 0; i < w->n; i++) {
        if (!atomic_load(&w->cs[i].done))
            return false;
    }
    return true;
}

/* Close the queue, wait for every consumer to return, join them. */
static void consumers_stop(consumer_t *cs, int n)
{
    taken_t w = {cs, n, 0};

    sl_queue_close(&q);
    ck_assert_msg(h_wait_until(all_done, &w, WAIT_S),
                  "a consumer still waits after sl_queue_close()");
    for (int i = 0; i < n; i++) {
        pthread_join(cs[i].thread, NULL);
        free(cs[i].got);
    }
}

static void setup(void)
{
    watched = NULL;
    atomic_store(&posts, 0);
}

/* ---- the ring --------------------------------------------------------- */

START_TEST(test_queue_fifo)
{
    sl_ticket_t t[5], out[8];

    ck_assert_int_eq(sl_queue_init(&q, 8), 0);
    ck_assert(!sl_queue_try_pop(&q, &out[0]));
    for (uint32_t i = 0; i < 5; i++)
        t[i] = ticket(i + 1);
    ck_assert_int_eq(sl_queue_push(&q, t, 2), 0);
    ck_assert_int_eq(sl_queue_push(&q, t + 2, 3), 0);
    ck_assert_uint_eq(q.count, 5);
    ck_assert(sl_queue_try_pop(&q, &out[0]));
    ck_assert_uint_eq(out[0].idx, 1);
    ck_assert_uint_eq(out[0].gen, 10);
    ck_assert_uint_eq(sl_queue_pop_all(&q, out, 0), 0);
    ck_assert_uint_eq(sl_queue_pop_all(&q, out, 2), 2);
    ck_assert_uint_eq(out[0].idx, 2);
    ck_assert_uint_eq(out[1].idx, 3);
    ck_assert_uint_eq(sl_queue_pop_all(&q, out, 8), 2);
    ck_assert_uint_eq(out[0].idx, 4);
    ck_assert_uint_eq(out[1].idx, 5);
    ck_assert_uint_eq(sl_queue_pop_all(&q, out, 8), 0);
    sl_queue_destroy(&q);
    ck_assert_ptr_null(q.items);
}
END_TEST

/* A batch goes in whole or not at all. */
START_TEST(test_queue_full)
{
    sl_ticket_t t[4] = {ticket(1), ticket(2), ticket(3), ticket(4)}, out;

    ck_assert_int_eq(sl_queue_init(&q, 4), 0);
    ck_assert_int_eq(sl_queue_push(&q, t, 3), 0);
    ck_assert_int_eq(sl_queue_push(&q, t, 2), -1);
    ck_assert_uint_eq(q.count, 3);
    ck_assert_int_eq(sl_queue_push(&q, t + 3, 1), 0);
    ck_assert_int_eq(sl_queue_push(&q, t, 1), -1);
    ck_assert_int_eq(sl_queue_push(&q, t, 0), 0); /* nothing always fits */
    for (uint32_t i = 1; i <= 4; i++) {
        ck_assert(sl_queue_try_pop(&q, &out));
        ck_assert_uint_eq(out.idx, i);
    }
    sl_queue_destroy(&q);
}
END_TEST

/* Order survives the ring wrapping around many times. */
START_TEST(test_queue_wraps)
{
    sl_ticket_t t[3], out[3];
    uint32_t next_in = 0, next_out = 0;

    ck_assert_int_eq(sl_queue_init(&q, 5), 0);
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < 3; i++)
            t[i] = ticket(next_in++);
        ck_assert_int_eq(sl_queue_push(&q, t, 3), 0);
        ck_assert_uint_eq(sl_queue_pop_all(&q, out, 3), 3);
        for (int i = 0; i < 3; i++)
            ck_assert_uint_eq(out[i].idx, next_out++);
    }
    ck_assert_uint_eq(q.count, 0);
    sl_queue_destroy(&q);
}
END_TEST

/* The same with the ring partly full across the seam: batches of one to
 * five in, one to three out. */
START_TEST(test_queue_wraps_partly_full)
{
    uint32_t next_in = 0, next_out = 0;

    ck_assert_int_eq(sl_queue_init(&q, 5), 0);
    for (int round = 0; round < 20; round++) {
        uint32_t n = 1 + (uint32_t)round % 5;
        if (q.count + n > q.cap)
            n = q.cap - q.count;
        push_range(next_in, n);
        next_in += n;
        for (uint32_t k = 0; k < 1 + (uint32_t)round % 3 && next_out < next_in;
             k++)
            expect_pop(next_out++);
    }
    while (next_out < next_in)
        expect_pop(next_out++);
    sl_queue_destroy(&q);
}
END_TEST

/* With tickets queued, pop_wait returns one at once, on this thread. */
START_TEST(test_pop_wait_does_not_wait_when_not_empty)
{
    sl_ticket_t t;

    ck_assert_int_eq(sl_queue_init(&q, 2), 0);
    push_range(5, 1);
    ck_assert(sl_queue_pop_wait(&q, &t));
    ck_assert_uint_eq(t.idx, 5);
    sl_queue_destroy(&q);
}
END_TEST

/* ---- consumers -------------------------------------------------------- */

/* One-shot consumers: each pops once (waiting) and keeps what it got. */
typedef struct {
    sl_queue_t *q;
    sl_ticket_t t;
    bool ok;
} popper_t;

static void *pop_waiting(void *arg)
{
    popper_t *p = arg;

    p->ok = sl_queue_pop_wait(p->q, &p->t);
    return NULL;
}

START_TEST(test_queue_pop_wait_wakes_on_push)
{
    pthread_t th;
    popper_t p = {.q = &q};
    sl_ticket_t t = ticket(7);

    ck_assert_int_eq(sl_queue_init(&q, 4), 0);
    ck_assert_int_eq(pthread_create(&th, NULL, pop_waiting, &p), 0);
    wait_idle(1);
    ck_assert_int_eq(sl_queue_push(&q, &t, 1), 0);
    pthread_join(th, NULL);
    ck_assert(p.ok);
    ck_assert_uint_eq(p.t.idx, 7);
    ck_assert_int_eq(q.idle, 0);
    sl_queue_destroy(&q);
}
END_TEST

/* A push of N tickets wakes N of the waiting consumers, and only as many
 * as it brought work for. */
START_TEST(test_queue_push_wakes_per_ticket)
{
    pthread_t th[3];
    popper_t p[3];
    sl_ticket_t t[2] = {ticket(1), ticket(2)};

    ck_assert_int_eq(sl_queue_init(&q, 8), 0);
    for (int i = 0; i < 3; i++) {
        p[i] = (popper_t){.q = &q};
        ck_assert_int_eq(pthread_create(&th[i], NULL, pop_waiting, &p[i]), 0);
    }
    wait_idle(3);
    ck_assert_int_eq(sl_queue_push(&q, t, 2), 0);
    /* two took a ticket, one still waits */
    ck_assert(h_wait_until(queue_empty, NULL, WAIT_S));
    wait_idle(1);
    sl_queue_close(&q);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    int got = 0;
    uint32_t sum = 0;
    for (int i = 0; i < 3; i++) {
        got += p[i].ok;
        sum += p[i].ok ? p[i].t.idx : 0;
    }
    ck_assert_int_eq(got, 2);
    ck_assert_uint_eq(sum, 3);
    sl_queue_destroy(&q);
}
END_TEST

START_TEST(test_queue_close)
{
    pthread_t th[2];
    popper_t p[2];
    sl_ticket_t t = ticket(3), out;

    ck_assert_int_eq(sl_queue_init(&q, 4), 0);
    for (int i = 0; i < 2; i++) {
        p[i] = (popper_t){.q = &q, .ok = true};
        ck_assert_int_eq(pthread_create(&th[i], NULL, pop_waiting, &p[i]), 0);
    }
    wait_idle(2);
    sl_queue_close(&q);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        ck_assert(!p[i].ok);
    }
    /* closed: what is still queued is handed out, then false at once */
    ck_assert_int_eq(sl_queue_push(&q, &t, 1), 0);
    ck_assert(sl_queue_pop_wait(&q, &out));
    ck_assert_uint_eq(out.idx, 3);
    ck_assert(!sl_queue_pop_wait(&q, &out));
    sl_queue_destroy(&q);
}
END_TEST

/* Closing does not drop what is queued: pop_wait hands it out, then says
 * false (a lane finishes the work it was given before it exits). */
START_TEST(test_close_lets_queued_tickets_out_first)
{
    sl_ticket_t t;

    ck_assert_int_eq(sl_queue_init(&q, 4), 0);
    push_range(1, 2);
    sl_queue_close(&q);
    ck_assert(sl_queue_pop_wait(&q, &t));
    ck_assert_uint_eq(t.idx, 1);
    ck_assert(sl_queue_pop_wait(&q, &t));
    ck_assert_uint_eq(t.idx, 2);
    ck_assert(!sl_queue_pop_wait(&q, &t));
    ck_assert(!sl_queue_pop_wait(&q, &t)); /* and stays closed */
    sl_queue_destroy(&q);
}
END_TEST

/* A push of N wakes N idle consumers, no more (a batch of one never
 * stampedes every lane) and no fewer (no ticket waits while a consumer
 * sleeps). */
START_TEST(test_push_wakes_at_most_n)
{
    consumer_t cs[3];

    ck_assert_int_eq(sl_queue_init(&q, 8), 0);
    watched = &q.sem;
    consumers_start(cs, 3, 8);
    wait_idle(3);

    push_range(1, 1);
    wait_taken(cs, 3, 1);
    ck_assert_int_eq(nposts(), 1);

    wait_idle(3); /* the one that took it is back */
    push_range(2, 2);
    wait_taken(cs, 3, 3);
    ck_assert_int_eq(nposts(), 3);

    /* More tickets than sleepers: each sleeper is woken once, and takes
     * the rest without sleeping again. */
    wait_idle(3);
    push_range(4, 5);
    wait_taken(cs, 3, 8);
    ck_assert_int_eq(nposts(), 6);

    wait_idle(3);
    consumers_stop(cs, 3);
    ck_assert_int_eq(nposts(), 9); /* close wakes each sleeper once */
    sl_queue_destroy(&q);
}
END_TEST

/* With nobody waiting, a push wakes nobody. */
START_TEST(test_push_without_waiters_signals_nothing)
{
    ck_assert_int_eq(sl_queue_init(&q, 8), 0);
    watched = &q.sem;
    push_range(1, 4);
    ck_assert_int_eq(nposts(), 0);
    sl_queue_destroy(&q);
}
END_TEST

/* ---- many threads ----------------------------------------------------- */

#define PRODUCERS    4
#define CONSUMERS    3
#define PER_PRODUCER 5000

typedef struct {
    pthread_t thread;
    uint32_t id;
    atomic_bool done;
} producer_t;

/* Push 0..PER_PRODUCER-1 as (idx = seq, gen = producer id), in batches
 * of one to three, retrying a batch the queue has no room for. */
static void *produce(void *arg)
{
    producer_t *p = arg;
    uint32_t seq = 0;

    while (seq < PER_PRODUCER) {
        sl_ticket_t t[3];
        uint32_t n = 1 + seq % 3;
        if (n > PER_PRODUCER - seq)
            n = PER_PRODUCER - seq;
        for (uint32_t i = 0; i < n; i++)
            t[i] = (sl_ticket_t){.idx = seq + i, .gen = p->id};
        if (sl_queue_push(&q, t, n) == 0)
            seq += n;
        else
            sched_yield();
    }
    atomic_store(&p->done, true);
    return NULL;
}

static bool producers_done(void *arg)
{
    producer_t *ps = arg;

    for (int i = 0; i < PRODUCERS; i++) {
        if (!atomic_load(&ps[i].done))
            return false;
    }
    return true;
}

/* Every ticket comes out exactly once, and each consumer sees each
 * producer's tickets in the order they were pushed. */
START_TEST(test_producers_and_consumers)
{
    static producer_t ps[PRODUCERS];
    static consumer_t cs[CONSUMERS];
    static uint8_t seen[PRODUCERS][PER_PRODUCER];
    const size_t total = (size_t)PRODUCERS * PER_PRODUCER;

    ck_assert_int_eq(sl_queue_init(&q, 16), 0);
    consumers_start(cs, CONSUMERS, total);
    for (uint32_t i = 0; i < PRODUCERS; i++) {
        ps[i].id = i;
        atomic_init(&ps[i].done, false);
        ck_assert_int_eq(pthread_create(&ps[i].thread, NULL, produce, &ps[i]),
                         0);
    }
    ck_assert_msg(h_wait_until(producers_done, ps, 30),
                  "producers did not finish");
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(ps[i].thread, NULL);
    wait_taken(cs, CONSUMERS, total);

    for (int c = 0; c < CONSUMERS; c++) {
        int64_t last[PRODUCERS];
        size_t n = atomic_load(&cs[c].n);
        for (int p = 0; p < PRODUCERS; p++)
            last[p] = -1;
        for (size_t i = 0; i < n; i++) {
            sl_ticket_t t = cs[c].got[i];
            ck_assert_uint_lt(t.gen, PRODUCERS);
            ck_assert_uint_lt(t.idx, PER_PRODUCER);
            ck_assert_msg((int64_t)t.idx > last[t.gen],
                          "consumer %d: producer %u's %u after %lld", c, t.gen,
                          t.idx, (long long)last[t.gen]);
            last[t.gen] = t.idx;
            ck_assert_msg(seen[t.gen][t.idx]++ == 0, "ticket %u/%u twice",
                          t.gen, t.idx);
        }
    }
    ck_assert_uint_eq(taken(cs, CONSUMERS), total);
    consumers_stop(cs, CONSUMERS);
    sl_queue_destroy(&q);
}
END_TEST

static Suite *queue_suite(void)
{
    Suite *s = suite_create("queue");
    TCase *ring = tcase_create("ring");
    TCase *threads = tcase_create("threads");

    tcase_add_checked_fixture(ring, setup, NULL);
    tcase_add_test(ring, test_queue_fifo);
    tcase_add_test(ring, test_queue_full);
    tcase_add_test(ring, test_queue_wraps);
    tcase_add_test(ring, test_queue_wraps_partly_full);
    tcase_add_test(ring, test_pop_wait_does_not_wait_when_not_empty);
    suite_add_tcase(s, ring);

    tcase_add_checked_fixture(threads, setup, NULL);
    tcase_set_timeout(threads, 60);
    tcase_add_test(threads, test_queue_pop_wait_wakes_on_push);
    tcase_add_test(threads, test_queue_push_wakes_per_ticket);
    tcase_add_test(threads, test_queue_close);
    tcase_add_test(threads, test_close_lets_queued_tickets_out_first);
    tcase_add_test(threads, test_push_wakes_at_most_n);
    tcase_add_test(threads, test_push_without_waiters_signals_nothing);
    tcase_add_test(threads, test_producers_and_consumers);
    suite_add_tcase(s, threads);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(queue_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
