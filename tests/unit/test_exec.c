/* test_exec.c - check suite for worker/loop/exec.c, the executor
 * operations that several executors share.
 *
 * Each operation is called on a real connection of a real pump (a loopback
 * client whose request has been handed to the executor), and the test
 * looks where the operation leaves its trace: the pump's completion inbox
 * (p->done), this pass's tickets and the work queue, the connection's
 * flags, and, for the condition variable, a second thread that really
 * blocks in sl_conn_read_body() until it is signalled.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>

#include "tests/unit/harness.h"

static sl_options_t opt;
static sl_pump_t pump;
static h_client_t client;

static void setup(void)
{
    client.fd = -1;
    sl_log_set_level(SL_LOG_ERROR);
}

static void teardown(void)
{
    h_client_close(&client);
    h_pump_down(&pump);
}

static bool conn_serving(void *arg)
{
    sl_conn_t *c = arg;

    return c->state == SL_CONN_SERVING;
}

/* A pump with EXEC, a client, and its request RAW with the executor; T is
 * the submit ticket. */
static void up(const sl_exec_t *exec, const char *raw, sl_ticket_t *t)
{
    h_exec = exec;
    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    h_sends(&client, raw);
    ck_assert(h_run_until(&pump, conn_serving, client.conn));
    ck_assert(h_take_ticket(&pump, t));
    ck_assert_uint_eq(t->kind, SL_TICKET_SUBMIT);
    ck_assert_uint_eq(t->idx, client.conn->x.id);
}

static const char GET[] = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
static const char POST5[] =
    "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n";

/* Entries in the pump's completion inbox. */
static uint32_t inbox(void)
{
    uint32_t n;

    pthread_mutex_lock(&pump.done.mu);
    n = pump.done.count;
    pthread_mutex_unlock(&pump.done.mu);
    return n;
}

static void notify(sl_exch_t *x)
{
    sl_conn_t *c = x->conn;

    pthread_mutex_lock(&c->x.mu);
    sl_exec_notify_handoff(&c->x);
    pthread_mutex_unlock(&c->x.mu);
}

static bool inbox_empty(void *arg)
{
    (void)arg;
    return inbox() == 0;
}

/* ------------------------------------------------------------------ */
/* notify                                                             */

/* However often the executor notifies, C is in the inbox once until the
 * loop has applied the completion; then the next notify counts again. */
START_TEST(test_notify_coalesces)
{
    sl_ticket_t t, entry;
    sl_conn_t *c;

    up(&h_exec_lanes, GET, &t);
    c = client.conn;
    ck_assert_uint_eq(inbox(), 0);
    notify(&c->x);
    notify(&c->x);
    notify(&c->x);
    ck_assert_uint_eq(inbox(), 1);
    ck_assert(sl_queue_try_pop(&pump.done, &entry));
    ck_assert_uint_eq(entry.idx, c->x.id);
    ck_assert_uint_eq(entry.gen, t.gen);
    /* taken from the inbox but not yet applied: still coalesced */
    notify(&c->x);
    ck_assert_uint_eq(inbox(), 0);
    sl_conn_complete(c);
    notify(&c->x);
    notify(&c->x);
    ck_assert_uint_eq(inbox(), 1);
}
END_TEST

/* The loop applies a completion when its ev_async fires, after which a
 * notify is a new entry. */
START_TEST(test_notify_wakes_loop)
{
    sl_ticket_t t;
    sl_conn_t *c;

    up(&h_exec_lanes, GET, &t);
    c = client.conn;
    notify(&c->x);
    ck_assert(h_run_until(&pump, inbox_empty, NULL));
    ck_assert(!c->x.notified);
    notify(&c->x);
    ck_assert_uint_eq(inbox(), 1);
}
END_TEST

/* A completion posted under sl_exch_lock() is in the inbox at once, but
 * wakes the loop (its ev_async) only once the mutex is given back; without
 * the lock, at once. */
START_TEST(test_notify_under_lock_wakes_after_unlock)
{
    sl_ticket_t t;
    sl_conn_t *c;

    up(&h_exec_lanes, GET, &t);
    c = client.conn;
    ck_assert(!ev_async_pending(&pump.wake));
    sl_exch_lock(&c->x);
    sl_exec_notify_handoff(&c->x);
    ck_assert_uint_eq(inbox(), 1);
    ck_assert(!ev_async_pending(&pump.wake));
    ck_assert_int_eq(pthread_mutex_trylock(&c->x.mu), EBUSY);
    sl_exch_unlock(&c->x);
    ck_assert(ev_async_pending(&pump.wake));
    ck_assert(h_run_until(&pump, inbox_empty, NULL));
    ck_assert(!ev_async_pending(&pump.wake));
    notify(&c->x);
    ck_assert(ev_async_pending(&pump.wake));
}
END_TEST

/* Under sl_exec_hold_wake(), a completion whose answer waits for others
 * anyway (wake_later: pipelining) is in the inbox at once and wakes the
 * loop at the hold's end; one whose answer can leave now wakes it at its
 * unlock, as without the hold; a hold with nothing posted wakes nothing. */
START_TEST(test_hold_wake_for_a_batch)
{
    sl_ticket_t t;
    sl_conn_t *c;

    up(&h_exec_lanes, GET, &t);
    c = client.conn;
    ck_assert(!ev_async_pending(&pump.wake));
    sl_exec_hold_wake(true);
    sl_exch_lock(&c->x);
    c->x.wake_later = true;
    sl_exec_notify_handoff(&c->x);
    sl_exch_unlock(&c->x);
    ck_assert_uint_eq(inbox(), 1);
    ck_assert(!ev_async_pending(&pump.wake));
    sl_exec_hold_wake(false);
    ck_assert(ev_async_pending(&pump.wake));
    ck_assert(h_run_until(&pump, inbox_empty, NULL));

    sl_exec_hold_wake(true);
    sl_exec_hold_wake(false);
    ck_assert(!ev_async_pending(&pump.wake));

    sl_exec_hold_wake(true);
    sl_exch_lock(&c->x);
    c->x.wake_later = false;
    sl_exec_notify_handoff(&c->x);
    ck_assert(!ev_async_pending(&pump.wake)); /* not under the lock */
    sl_exch_unlock(&c->x);
    ck_assert(ev_async_pending(&pump.wake));
    sl_exec_hold_wake(false);
    ck_assert(h_run_until(&pump, inbox_empty, NULL));
}
END_TEST

/* Three sends before the loop runs: one inbox entry, and all three parts
 * reach the client in order from that one completion. */
START_TEST(test_sends_share_one_completion)
{
    sl_ticket_t t;
    sl_conn_t *c;
    struct iovec iov;
    static const char *const parts[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n", "ab", "cd", "ef"};
    size_t i, total = 0;

    up(&h_exec_lanes, GET, &t);
    c = client.conn;
    for (i = 0; i < 4; i++) {
        iov = (struct iovec){(void *)parts[i], strlen(parts[i])};
        total += iov.iov_len;
        ck_assert_int_eq(
            sl_exch_send(&c->x, t.gen, &iov, 1, i == 3 ? SL_SEND_END : 0), 0);
    }
    ck_assert_uint_eq(inbox(), 1);
    ck_assert(h_wait_bytes(&pump, &client, total));
    ck_assert_uint_eq(client.len, total);
    ck_assert(strstr(client.data, "\r\n\r\nabcdef") != NULL);
}
END_TEST

/* ------------------------------------------------------------------ */
/* wake_cv and wait_cv                                                */

/* A lane blocked in a body read (wait_cv: it says it waits, and sleeps on
 * its thread's condition variable) is woken by wake_cv alone: the bytes
 * are put in its buffer by hand, so nothing else could have woken it.
 * Awake, it no longer says it waits. */
START_TEST(test_wake_cv_signals_waiter)
{
    sl_ticket_t t;
    pthread_t th;
    h_reader_t r = {0};

    up(&h_exec_lanes, POST5, &t);
    r.c = client.conn;
    r.gen = t.gen;
    ck_assert_int_eq(pthread_create(&th, NULL, h_reader_main, &r), 0);
    ck_assert(h_run_until(&pump, h_executor_waiting, r.c));
    ck_assert(!h_reader_done(&r));

    pthread_mutex_lock(&r.c->x.mu);
    ck_assert_int_eq(sl_buf_append(&r.c->x.body, "hello", 5), 0);
    sl_exec_wake_cv(&r.c->x);
    pthread_mutex_unlock(&r.c->x.mu);

    ck_assert(h_run_until(&pump, h_reader_done, &r));
    pthread_join(th, NULL);
    ck_assert_int_eq(r.rc, 5);
    ck_assert_str_eq(r.buf, "hello");
    ck_assert(!h_executor_waiting(r.c));
}
END_TEST

/* Woken with nothing to read, the lane waits again rather than return. */
START_TEST(test_wake_cv_without_bytes_waits_again)
{
    sl_ticket_t t;
    pthread_t th;
    h_reader_t r = {0};

    up(&h_exec_lanes, POST5, &t);
    r.c = client.conn;
    r.gen = t.gen;
    ck_assert_int_eq(pthread_create(&th, NULL, h_reader_main, &r), 0);
    ck_assert(h_run_until(&pump, h_executor_waiting, r.c));
    pthread_mutex_lock(&r.c->x.mu);
    sl_exec_wake_cv(&r.c->x);
    pthread_mutex_unlock(&r.c->x.mu);
    /* it woke (or will), found nothing and sleeps again: the bytes the
     * client now sends are what end its wait */
    h_sends(&client, "abcde");
    ck_assert(h_run_until(&pump, h_reader_done, &r));
    pthread_join(th, NULL);
    ck_assert_int_eq(r.rc, 5);
    ck_assert_str_eq(r.buf, "abcde");
}
END_TEST

/* ------------------------------------------------------------------ */
/* wake_ticket and wait_never                                         */

/* wake_ticket clears c->x.waiting and queues a WAKE for this request with
 * the pass's batch; the executor gets it from the work queue. */
START_TEST(test_wake_ticket)
{
    sl_ticket_t t, wake;
    sl_conn_t *c;

    up(&h_exec_await, POST5, &t);
    c = client.conn;
    ck_assert_int_eq(sl_exch_await(&c->x, t.gen, SL_AWAIT_BODY), 1);
    ck_assert(h_executor_waiting(c));
    ck_assert_uint_eq(pump.npending, 0);

    pthread_mutex_lock(&c->x.mu);
    sl_exec_wake_ticket(&c->x);
    ck_assert(!c->x.waiting);
    pthread_mutex_unlock(&c->x.mu);
    ck_assert_uint_eq(pump.npending, 1);
    ck_assert_uint_eq(pump.pending[0].kind, SL_TICKET_WAKE);
    ck_assert_uint_eq(pump.pending[0].idx, c->x.id);
    ck_assert_uint_eq(pump.pending[0].gen, t.gen);

    ck_assert(h_take_ticket(&pump, &wake));
    ck_assert_uint_eq(wake.kind, SL_TICKET_WAKE);
    ck_assert_uint_eq(wake.idx, c->x.id);
    ck_assert_uint_eq(wake.gen, t.gen);
    ck_assert_uint_eq(h_tickets(&pump), 0);
}
END_TEST

/* The generation in the ticket is the request's at the time of the wake:
 * the next request on the same connection gets a new one. */
START_TEST(test_wake_ticket_generation)
{
    sl_ticket_t t, t2, wake;
    sl_conn_t *c;
    struct iovec iov = {"HTTP/1.1 204 No Content\r\n\r\n", 27};

    up(&h_exec_await, GET, &t);
    c = client.conn;
    ck_assert_int_eq(sl_exch_send(&c->x, t.gen, &iov, 1, SL_SEND_END), 0);
    ck_assert(h_wait_bytes(&pump, &client, iov.iov_len));
    h_sends(&client, GET);
    ck_assert(h_take_ticket(&pump, &t2));
    ck_assert_uint_eq(t2.kind, SL_TICKET_SUBMIT);
    ck_assert_uint_ne(t2.gen, t.gen);
    pthread_mutex_lock(&c->x.mu);
    c->x.waiting = true;
    sl_exec_wake_ticket(&c->x);
    pthread_mutex_unlock(&c->x.mu);
    ck_assert(h_take_ticket(&pump, &wake));
    ck_assert_uint_eq(wake.kind, SL_TICKET_WAKE);
    ck_assert_uint_eq(wake.gen, t2.gen);
}
END_TEST

/* An executor that must not block refuses to: -1, at once, and a body
 * read that would wait fails instead of hanging. */
START_TEST(test_wait_never)
{
    sl_ticket_t t;
    sl_conn_t *c;
    char buf[8];

    up(&h_exec_await, POST5, &t);
    c = client.conn;
    sl_log_set_level(SL_LOG_CRITICAL); /* its error line is expected */
    pthread_mutex_lock(&c->x.mu);
    ck_assert_int_eq(sl_exec_wait_never(&c->x, SL_AWAIT_BODY), -1);
    ck_assert_int_eq(sl_exec_wait_never(&c->x, SL_AWAIT_CREDIT), -1);
    pthread_mutex_unlock(&c->x.mu);
    ck_assert_int_eq(
        sl_exch_read_body(&c->x, t.gen, buf, sizeof(buf), false, true), -1);
    ck_assert_int_eq(
        sl_exch_read_body(&c->x, t.gen, buf, sizeof(buf), false, false), -2);
}
END_TEST

/* ------------------------------------------------------------------ */
/* hand_over                                                          */

/* The batch goes to the work queue as given, in order. */
START_TEST(test_hand_over_queue_in_order)
{
    sl_ticket_t batch[5], got;
    uint32_t i;

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    for (i = 0; i < 5; i++)
        batch[i] = (sl_ticket_t){.idx = 4 - i, .gen = 100 + i, .kind = i % 2};
    sl_exec_hand_over_queue(&pump, batch, 3);
    sl_exec_hand_over_queue(&pump, batch + 3, 2);
    ck_assert_uint_eq(pump.work.count, 5);
    for (i = 0; i < 5; i++) {
        ck_assert(sl_queue_try_pop(&pump.work, &got));
        ck_assert_uint_eq(got.idx, batch[i].idx);
        ck_assert_uint_eq(got.gen, batch[i].gen);
        ck_assert_uint_eq(got.kind, batch[i].kind);
    }
    ck_assert(!sl_queue_try_pop(&pump.work, &got));
}
END_TEST

/* Requests submitted in one pass reach the executor in the order the loop
 * dispatched them, through hand_over at the end of the pass. */
START_TEST(test_hand_over_from_pump)
{
    h_client_t more[3];
    sl_ticket_t t;
    int i;

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    for (i = 0; i < 3; i++)
        h_connect(&pump, &more[i]);
    for (i = 0; i < 3; i++) {
        sl_conn_t *c = more[i].conn;
        h_send(&more[i], GET, sizeof(GET) - 1);
        ck_assert(h_run_until(&pump, conn_serving, c));
        ck_assert(h_take_ticket(&pump, &t));
        ck_assert_uint_eq(t.kind, SL_TICKET_SUBMIT);
        ck_assert_uint_eq(t.idx, c->x.id);
        ck_assert_uint_eq(t.gen, c->x.gen);
    }
    /* one batch of several: queue a wake for each, one pass hands over */
    for (i = 0; i < 3; i++)
        sl_exec_queue_ticket(&pump, &more[i].conn->x, SL_TICKET_WAKE);
    ck_assert(h_run_until(&pump, h_ticket_ready, &pump));
    ck_assert_uint_eq(pump.work.count, 3);
    for (i = 0; i < 3; i++) {
        ck_assert(sl_queue_try_pop(&pump.work, &t));
        ck_assert_uint_eq(t.idx, more[i].conn->x.id);
        ck_assert_uint_eq(t.kind, SL_TICKET_WAKE);
    }
    for (i = 0; i < 3; i++)
        h_client_close(&more[i]);
}
END_TEST

/* A batch that does not fit is refused whole, never half queued. */
START_TEST(test_hand_over_queue_overflow)
{
    static sl_ticket_t batch[512];
    sl_ticket_t got;
    uint32_t i, half;

    h_options(&opt, "--worker-connections", "4", NULL);
    h_pump_up(&pump, &opt);
    sl_log_set_level(SL_LOG_CRITICAL); /* its error line is expected */
    /* four per connection, two per request run ahead (h1_ahead.h) */
    ck_assert_uint_eq(pump.work.cap, 16 + 2 * 4 * SL_AHEAD_DEPTH);
    half = pump.work.cap / 2 + 1;
    ck_assert_uint_le(2 * half, 512);
    for (i = 0; i < 2 * half; i++)
        batch[i] = (sl_ticket_t){.idx = i, .gen = i};
    sl_exec_hand_over_queue(&pump, batch, half);
    sl_exec_hand_over_queue(&pump, batch + half, half);
    ck_assert_uint_eq(pump.work.count, half);
    for (i = 0; i < half; i++) {
        ck_assert(sl_queue_try_pop(&pump.work, &got));
        ck_assert_uint_eq(got.idx, i);
    }
    sl_exec_finish_nothing(&pump); /* nothing to cancel, nothing changes */
    ck_assert_uint_eq(pump.work.count, 0);
}
END_TEST

static Suite *exec_suite(void)
{
    Suite *s = suite_create("exec");
    TCase *tc = tcase_create("notify");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_notify_coalesces);
    tcase_add_test(tc, test_notify_wakes_loop);
    tcase_add_test(tc, test_notify_under_lock_wakes_after_unlock);
    tcase_add_test(tc, test_hold_wake_for_a_batch);
    tcase_add_test(tc, test_sends_share_one_completion);
    suite_add_tcase(s, tc);

    tc = tcase_create("wake");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_wake_cv_signals_waiter);
    tcase_add_test(tc, test_wake_cv_without_bytes_waits_again);
    tcase_add_test(tc, test_wake_ticket);
    tcase_add_test(tc, test_wake_ticket_generation);
    tcase_add_test(tc, test_wait_never);
    suite_add_tcase(s, tc);

    tc = tcase_create("hand_over");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_hand_over_queue_in_order);
    tcase_add_test(tc, test_hand_over_from_pump);
    tcase_add_test(tc, test_hand_over_queue_overflow);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(exec_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
