/* test_pump.c - check suite for worker/loop/pump.c.
 *
 * The cached Date header the pump keeps is compared with the clock (the
 * ticket queue and the line's format have suites of their own, test_queue
 * and test_date). The pump itself runs on a loopback listener: accept, the
 * listeners, the per-pass batch of submits and completions from another
 * thread. The pool's limits are test_pump_limits.c's, the control channel
 * and the signals test_pump_ctl.c's; what the three share is
 * tests/unit/pump_harness.h.
 */
#include "config.h"

#include <check.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "common/date.h"
#include "common/ctl.h"
#include "common/metrics.h"
#include "tests/unit/harness.h"
#include "tests/unit/pump_harness.h"

static uint32_t queue_count(sl_queue_t *qu)
{
    uint32_t n;

    pthread_mutex_lock(&qu->mu);
    n = qu->count;
    pthread_mutex_unlock(&qu->mu);
    return n;
}

/* ------------------------------------------------------------------ */
/* the cached Date header                                             */

static void format_date(time_t t, char *buf, size_t n)
{
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(buf, n, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
}

/* The cached line is the current time (this second or the one before). */
static void assert_date_current(void)
{
    char now[64], before[64];
    time_t t = time(NULL);
    const char *d = sl_date_line();

    format_date(t, now, sizeof(now));
    format_date(t - 1, before, sizeof(before));
    ck_assert_msg(strcmp(d, now) == 0 || strcmp(d, before) == 0,
                  "cached '%s' is not the time '%s'", d, now);
}

START_TEST(test_date_format)
{
    regex_t re;
    const char *d;

    h_options(&opt, NULL);
    ck_assert_int_eq(sl_pump_init(&pump, &opt, h_exec, NULL, 0), 0);
    d = sl_date_line();
    ck_assert_uint_eq(strlen(d), SL_DATE_LINE_LEN);
    ck_assert_int_eq(
        regcomp(&re,
                "^Date: (Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-3][0-9] "
                "(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
                "[0-9]{4} [0-2][0-9]:[0-5][0-9]:[0-6][0-9] GMT\r\n$",
                REG_EXTENDED),
        0);
    ck_assert_msg(regexec(&re, d, 0, NULL, 0) == 0, "bad Date line '%s'", d);
    regfree(&re);
    assert_date_current();
}
END_TEST

static bool date_changed(void *arg)
{
    return strcmp(sl_date_line(), arg) != 0;
}

/* The 1 Hz housekeeping keeps it current: it changes with the second. */
START_TEST(test_date_follows_the_clock)
{
    char first[64];

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    snprintf(first, sizeof(first), "%s", sl_date_line());
    ck_assert(h_run_until(&pump, date_changed, first));
    assert_date_current();
}
END_TEST

/* ------------------------------------------------------------------ */
/* set-up and listeners                                               */

START_TEST(test_init)
{
    h_options(&opt, "--worker-connections", "7", "--threads", "3", NULL);
    ck_assert_int_eq(sl_pump_init(&pump, &opt, h_exec, NULL, 0), 0);
    ck_assert_ptr_nonnull(pump.loop);
    ck_assert_uint_eq(pump.pool.nconns, 7);
    /* the pool is set up entry by entry as connections come */
    ck_assert_uint_eq(pump.pool.nfresh, 0);
    ck_assert_ptr_null(pump.pool.free_list);
    ck_assert_uint_eq(pump.pool.nactive, 0);
    ck_assert_ptr_eq(pump.pool.active.next, &pump.pool.active);
    ck_assert_int_eq(pump.nlisteners, 0);
    ck_assert_ptr_eq(pump.exec, &h_exec_lanes);
    ck_assert_int_eq(pump.drain.ctl_fd, -1);
    ck_assert_int_eq(pump.lanes, 3);
    ck_assert_uint_eq(pump.drain.retire_at, 0);
    ck_assert_uint_ge(pump.work.cap, 7);
    ck_assert_uint_ge(pump.done.cap, 7);
}
END_TEST

/* Tickets name three kinds of exchange by one id: the connections', then
 * HTTP/2's streams', then the requests run ahead (pump.h). Slots are made
 * on first use, kept, and taken again last given back first. */
START_TEST(test_exchange_ids)
{
    sl_exch_t *a[3], *s, *y;
    uint32_t i;

    h_options(&opt, "--worker-connections", "7", "--http-protocols", "h2,h1",
              NULL);
    ck_assert_int_eq(sl_pump_init(&pump, &opt, h_exec, NULL, 0), 0);
    ck_assert_uint_eq(pump.h2s.base, 7);
    ck_assert_uint_gt(pump.h2s.max, 0);
    ck_assert_uint_eq(pump.aheads.base, 7 + pump.h2s.max);
    ck_assert_uint_eq(pump.aheads.max, 7 * SL_AHEAD_DEPTH);
    ck_assert_uint_eq(sl_pump_exch_max(&pump),
                      pump.aheads.base + pump.aheads.max);
    ck_assert_uint_eq(pump.h2s.used + pump.aheads.used, 0);
    ck_assert_int_eq(sl_pump_exch_kind(&pump, 6), SL_EXCH_CONN);
    ck_assert_ptr_eq(sl_pump_exch(&pump, 6), &pump.pool.conns[6].x);

    s = sl_slots_take(&pump.h2s);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(s->id, 7);
    ck_assert_int_eq(sl_pump_exch_kind(&pump, s->id), SL_EXCH_STREAM);
    ck_assert_ptr_eq(sl_pump_exch(&pump, s->id), s);
    ck_assert_int_eq(s->tail.file_fd, -1);
    for (i = 0; i < 3; i++) {
        a[i] = sl_slots_take(&pump.aheads);
        ck_assert_uint_eq(a[i]->id, pump.aheads.base + i);
        ck_assert_int_eq(sl_pump_exch_kind(&pump, a[i]->id), SL_EXCH_AHEAD);
        ck_assert_ptr_eq(sl_pump_exch(&pump, a[i]->id), a[i]);
    }
    sl_slots_put(&pump.aheads, a[0]);
    sl_slots_put(&pump.aheads, a[2]);
    ck_assert_ptr_eq(sl_slots_take(&pump.aheads), a[2]);
    ck_assert_ptr_eq(sl_slots_take(&pump.aheads), a[0]);
    ck_assert_uint_eq(pump.aheads.used, 3);
    /* the last id of the last table is the last an executor may see */
    while ((y = sl_slots_take(&pump.aheads)) != NULL)
        ck_assert_uint_lt(y->id, sl_pump_exch_max(&pump));
    ck_assert_uint_eq(pump.aheads.used, pump.aheads.max);
    ck_assert_int_eq(sl_pump_exch_kind(&pump, sl_pump_exch_max(&pump) - 1),
                     SL_EXCH_AHEAD);
    sl_slots_put(&pump.h2s, s);
}
END_TEST

START_TEST(test_listener_described)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    char port[8];

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    ck_assert_int_eq(
        getsockname(pump.listeners[0].fd, (struct sockaddr *)&sin, &len), 0);
    snprintf(port, sizeof(port), "%u", ntohs(sin.sin_port));
    ck_assert_str_eq(pump.listeners[0].server_name, "127.0.0.1");
    ck_assert_str_eq(pump.listeners[0].server_port, port);
    ck_assert(!pump.listeners[0].unix_sock);
}
END_TEST

/* A worker serves every listener the supervisor passes it: more than 16
 * (a --bind that resolves to several addresses, or systemd's sockets),
 * the last one included. */
START_TEST(test_every_listener_served)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    h_nactive_t accepted = {&pump, 1};
    int fds[20], cfd;

    for (int i = 0; i < 20; i++)
        fds[i] = h_listen();
    h_options(&opt, NULL);
    ck_assert_int_eq(sl_pump_init(&pump, &opt, h_exec, fds, 20), 0);
    ck_assert_int_eq(pump.nlisteners, 20);
    sl_pump_start(&pump);
    ck_assert_int_eq(getsockname(fds[19], (struct sockaddr *)&sin, &len), 0);
    cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_eq(connect(cfd, (struct sockaddr *)&sin, len), 0);
    ck_assert_msg(h_run_until(&pump, h_nactive_is, &accepted),
                  "the 20th listener's connection was not accepted");
    ck_assert_int_eq(pump.pool.active.next->listener, 19);
    close(cfd);
    for (int i = 1; i < 20; i++)
        close(fds[i]);
}
END_TEST

START_TEST(test_unix_listener)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    int fd;

    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/s", h_test_dir());
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
    ck_assert_int_eq(listen(fd, 8), 0);
    h_options(&opt, NULL);
    ck_assert_int_eq(sl_pump_init(&pump, &opt, h_exec, &fd, 1), 0);
    ck_assert(pump.listeners[0].unix_sock);
    ck_assert_str_eq(pump.listeners[0].server_name, "localhost");
}
END_TEST

START_TEST(test_accepted_socket)
{
    int one = 0, fl;
    socklen_t len = sizeof(one);

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    ck_assert_int_eq(client.conn->state, SL_CONN_READING);
    ck_assert_int_eq(client.conn->listener, 0);
    ck_assert_int_eq(
        getsockopt(client.conn->tp.fd, IPPROTO_TCP, TCP_NODELAY, &one, &len),
        0);
    ck_assert_int_eq(one, 1);
    fl = fcntl(client.conn->tp.fd, F_GETFL);
    ck_assert(fl & O_NONBLOCK);
    ck_assert(fcntl(client.conn->tp.fd, F_GETFD) & FD_CLOEXEC);
    ck_assert_uint_eq(pump.pool.nactive, 1);
}
END_TEST

/* The pump's one connection is CL's. */
static bool serves(void *arg)
{
    h_client_t *cl = arg;
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    char buf[64];
    int port;

    if (pump.pool.nactive != 1)
        return false;
    ck_assert_int_eq(getsockname(cl->fd, (struct sockaddr *)&sin, &len), 0);
    sl_conn_peer(pump.pool.active.next, buf, sizeof(buf), &port);
    return port == ntohs(sin.sin_port);
}

/* When the pool is used up the pump stops accepting, and takes the next
 * connection from the backlog as soon as a slot is free again. */
START_TEST(test_pool_limit)
{
    h_client_t second;
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);

    h_options(&opt, "--worker-connections", "1", NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    ck_assert(!pump.accepting);
    ck_assert_ptr_null(pump.pool.free_list);
    /* a second client waits in the backlog */
    memset(&second, 0, sizeof(second));
    ck_assert_int_eq(
        getsockname(pump.listeners[0].fd, (struct sockaddr *)&sin, &len), 0);
    second.fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(connect(second.fd, (struct sockaddr *)&sin, len), 0);
    h_run_passes(&pump, 5);
    ck_assert_uint_eq(pump.pool.nactive, 1);
    ck_assert_ptr_eq(pump.pool.active.next, client.conn);
    /* the first leaves; the second is taken from the backlog */
    h_client_close(&client);
    ck_assert(h_run_until(&pump, serves, &second));
    ck_assert(!pump.accepting); /* full again */
    h_client_close(&second);
}
END_TEST

/* Pool entries are set up as connections first need them, and one given
 * back is taken again before a fresh one: the rest of the pool stays as
 * calloc() left it, pages the worker never touched. */
START_TEST(test_pool_set_up_on_first_use)
{
    static const sl_conn_t zero;
    h_nactive_t none = {&pump, 0};
    h_client_t second;

    h_options(&opt, "--worker-connections", "4", NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    ck_assert_ptr_eq(client.conn, &pump.pool.conns[0]);
    ck_assert_uint_eq(pump.pool.nfresh, 1);
    h_client_close(&client);
    ck_assert(h_run_until(&pump, h_nactive_is, &none));
    h_connect(&pump, &second);
    ck_assert_ptr_eq(second.conn, &pump.pool.conns[0]);
    ck_assert_uint_eq(pump.pool.nfresh, 1);
    for (int i = 1; i < 4; i++)
        ck_assert(memcmp(&pump.pool.conns[i], &zero, sizeof(zero)) == 0);
    h_connect(&pump, &client);
    ck_assert_ptr_eq(client.conn, &pump.pool.conns[1]);
    ck_assert_uint_eq(pump.pool.conns[1].x.id, 1);
    ck_assert_int_eq(pump.pool.conns[1].x.tail.file_fd, -1);
    ck_assert_uint_eq(pump.pool.nfresh, 2);
    h_client_close(&second);
}
END_TEST

START_TEST(test_stop_listening)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    int fd;

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    ck_assert_int_eq(
        getsockname(pump.listeners[0].fd, (struct sockaddr *)&sin, &len), 0);
    sl_listen_stop(&pump);
    ck_assert(!pump.accepting);
    ck_assert_int_eq(pump.listeners[0].fd, -1);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sin, len), -1);
    ck_assert_int_eq(errno, ECONNREFUSED);
    close(fd);
}
END_TEST

/* ------------------------------------------------------------------ */
/* passes: submits out in one batch, completions back through one async */

/* An executor that records what it is handed; on its first batch it
 * queues one more ticket, as an executor on the loop thread may. */
static sl_ticket_t handed[8];
static uint32_t nhanded, nbatches;
static sl_conn_t *requeue; /* queued again while the first batch is handed */

static void record_hand_over(sl_pump_t *p, const sl_ticket_t *t, uint32_t n)
{
    uint32_t i;

    for (i = 0; i < n && nhanded < 8; i++)
        handed[nhanded++] = t[i];
    if (nbatches++ == 0 && requeue != NULL)
        sl_exec_queue_ticket(p, &requeue->x, SL_TICKET_WAKE);
}

static const sl_exec_t record_exec = {
    .name = "record",
    .hand_over = record_hand_over,
    .notify = sl_exec_notify_handoff,
    .wake = sl_exec_wake_ticket,
    .wait = sl_exec_wait_never,
    .finish = sl_exec_finish_nothing,
    .stop = h_exec_stop,
};

/* Every ticket of a pass goes to the executor in one batch, at the end of
 * the pass; a pass without tickets hands over nothing. */
START_TEST(test_submits_batched_per_pass)
{
    h_client_t other;

    h_exec = &record_exec;
    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    h_connect(&pump, &other);
    sl_exec_submit(&pump, &client.conn->x);
    sl_exec_queue_ticket(&pump, &other.conn->x, SL_TICKET_WAKE);
    ck_assert_uint_eq(pump.inflight, 1);
    ck_assert_uint_eq(pump.npending, 2);
    ck_assert_uint_eq(nbatches, 0); /* not before the pass */
    ev_run(pump.loop, EVRUN_NOWAIT);
    ck_assert_uint_eq(pump.npending, 0);
    ck_assert_uint_eq(nbatches, 1);
    ck_assert_uint_eq(nhanded, 2);
    ck_assert_uint_eq(handed[0].idx, client.conn->x.id);
    ck_assert_uint_eq(handed[0].kind, SL_TICKET_SUBMIT);
    ck_assert_uint_eq(handed[1].idx, other.conn->x.id);
    ck_assert_uint_eq(handed[1].kind, SL_TICKET_WAKE);
    ev_run(pump.loop, EVRUN_NOWAIT);
    ck_assert_uint_eq(nbatches, 1);
    h_client_close(&other);
}
END_TEST

/* A ticket queued while a batch is handed over (an executor on the loop
 * thread handling a wake) goes with the next batch, after the rest, and is
 * never lost or handed twice; sl_pump_run_once() hands over what its pass
 * queued without waiting for another pass. */
START_TEST(test_hand_over_during_hand_over)
{
    h_client_t other;

    h_exec = &record_exec;
    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    h_connect(&pump, &other);
    requeue = other.conn;
    sl_exec_queue_ticket(&pump, &client.conn->x, SL_TICKET_WAKE);
    sl_exec_queue_ticket(&pump, &client.conn->x, SL_TICKET_SUBMIT);
    ck_assert(sl_pump_run_once(&pump));
    ck_assert_uint_eq(nbatches, 2);
    ck_assert_uint_eq(nhanded, 3);
    ck_assert_uint_eq(handed[0].kind, SL_TICKET_WAKE);
    ck_assert_uint_eq(handed[1].kind, SL_TICKET_SUBMIT);
    ck_assert_uint_eq(handed[2].idx, other.conn->x.id);
    ck_assert_uint_eq(pump.npending, 0);
    ck_assert(sl_pump_run_once(&pump));
    ck_assert_uint_eq(nhanded, 3); /* nothing left over */
    h_client_close(&other);
}
END_TEST

/* The backend fd found at init is libev's epoll instance: it turns
 * readable when a watched descriptor does, and only then. */
START_TEST(test_backend_fd)
{
    struct pollfd pfd;
    ev_io w;
    int fds[2];

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    ck_assert_int_ge(pump.backend_fd, 0);
    ck_assert_int_eq(pipe(fds), 0);
    ev_io_init(&w, NULL, fds[0], EV_READ);
    ev_io_start(pump.loop, &w);
    ev_run(pump.loop, EVRUN_NOWAIT); /* libev registers the fd */
    pfd = (struct pollfd){.fd = pump.backend_fd, .events = POLLIN};
    ck_assert_int_eq(poll(&pfd, 1, 0), 0);
    ck_assert_int_eq(write(fds[1], "x", 1), 1);
    ck_assert_int_eq(poll(&pfd, 1, 1000), 1);
    ev_io_stop(pump.loop, &w);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

/* Has backend_fd something for the driver within SECS? */
static bool backend_ready(double secs)
{
    struct pollfd pfd = {.fd = pump.backend_fd, .events = POLLIN};

    return poll(&pfd, 1, (int)(secs * 1000)) == 1;
}

/* What a loop that drives the pump (ASGI inline) does when backend_fd is
 * readable: passes until sl_pump_settled(), at most 4; returns how many. */
static int drive(void)
{
    int passes = 0;

    do
        ck_assert(sl_pump_run_once(&pump));
    while (++passes < 4 && !sl_pump_settled(&pump));
    return passes;
}

/* Once the driver's passes are settled it waits for backend_fd, so every
 * socket they watch must be in epoll by then. A connection accepted with
 * nothing to read yet gets its EV_READ in the accepting pass's callbacks,
 * which libev hands to epoll only as the next pass begins: that pass is
 * due before the wait, or the request wakes nobody (issue 26: it waited
 * for the driver's 100 ms timer). Reading and submitting the request
 * changes no watcher: no extra pass per request. */
START_TEST(test_new_connection_watched_once_settled)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    ck_assert_int_eq(drive(), 1); /* the listener, into epoll */
    ck_assert_int_eq(
        getsockname(pump.listeners[0].fd, (struct sockaddr *)&sin, &len), 0);
    client.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_eq(connect(client.fd, (struct sockaddr *)&sin, len), 0);
    ck_assert(backend_ready(H_DEADLINE));
    drive(); /* accept; the read finds nothing */
    ck_assert_uint_eq(pump.pool.nactive, 1);
    ck_assert(!backend_ready(0));
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert_msg(backend_ready(H_DEADLINE),
                  "the request did not wake the driver");
    ck_assert_int_eq(drive(), 1);
    ck_assert_uint_eq(pump.inflight, 1);
}
END_TEST

/* The same for a socket that fills in a pass's callbacks: the pass that
 * applies a completion writes what fits and watches for EV_WRITE, which
 * must be in epoll before the driver waits, or the client making room
 * wakes nobody. A small send buffer makes 1 MiB take many rounds. */
START_TEST(test_full_socket_watched_once_settled)
{
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 1048576"
                               "\r\n\r\n";
    static char body[1 << 20];
    struct iovec iov[2] = {{(void *)head, sizeof(head) - 1},
                           {body, sizeof(body)}};
    size_t total = iov[0].iov_len + iov[1].iov_len;
    int small = 4096, rounds = 0;
    struct pollfd pfd;
    sl_ticket_t t;
    sl_conn_t *c;

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    c = client.conn;
    ck_assert_int_eq(
        setsockopt(c->tp.fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_take_ticket(&pump, &t));
    drive();
    ck_assert_int_eq(sl_exch_send(&c->x, t.gen, iov, 2, SL_SEND_END), 0);
    /* the executor's notify says so to a driver (ASGI inline: a call_soon);
     * an ev_async_send() outside a pass only flags libev */
    drive();
    for (h_pull(&client); client.len < total; h_pull(&client)) {
        if (c->state == SL_CONN_READING) {
            /* all written: the rest is on its way in the kernel */
            pfd = (struct pollfd){.fd = client.fd, .events = POLLIN};
            ck_assert_int_eq(poll(&pfd, 1, (int)(H_DEADLINE * 1000)), 1);
            continue;
        }
        ck_assert_msg(backend_ready(H_DEADLINE),
                      "room to write did not wake the driver (round %d)",
                      rounds);
        drive();
        rounds++;
    }
    ck_assert_uint_eq(client.len, total);
    ck_assert_int_gt(rounds, 2);
    ck_assert_uint_eq(pump.served, 1);
}
END_TEST

/* More tickets in one pass than the batch holds are dropped (and said
 * so in the log), never written past the batch. */
START_TEST(test_batch_overflow_is_bounded)
{
    char path[128], line[256] = {0};
    FILE *f;

    snprintf(path, sizeof(path), "%s/error.log", h_test_dir());
    ck_assert_int_eq(sl_log_open(path), 0);
    h_options(&opt, "--worker-connections", "2", NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    for (uint32_t i = 0; i < pump.npending_cap + 8; i++)
        sl_exec_queue_ticket(&pump, &client.conn->x, SL_TICKET_WAKE);
    ck_assert_uint_eq(pump.npending, pump.npending_cap);
    ev_run(pump.loop, EVRUN_NOWAIT);
    ck_assert_uint_eq(queue_count(&pump.work), pump.npending_cap);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
    fclose(f);
    ck_assert_ptr_nonnull(strstr(line, "executor batch overflow"));
}
END_TEST

typedef struct {
    sl_conn_t *c;
    uint32_t gen;
} answer_t;

static void *answer_from_thread(void *arg)
{
    answer_t *a = arg;
    static const char r[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    struct iovec iov = {(void *)r, sizeof(r) - 1};

    sl_exch_send(&a->c->x, a->gen, &iov, 1, SL_SEND_END);
    return NULL;
}

/* A completion queued by another thread wakes the loop, which applies it:
 * the answer reaches the client and the request is counted. */
START_TEST(test_completion_from_another_thread)
{
    sl_ticket_t t;
    pthread_t th;
    answer_t a;

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_take_ticket(&pump, &t));
    a = (answer_t){&pump.pool.conns[t.idx], t.gen};
    ck_assert_int_eq(pthread_create(&th, NULL, answer_from_thread, &a), 0);
    ck_assert(h_response(&pump, &client, &resp, false));
    pthread_join(th, NULL);
    ck_assert_str_eq(resp.body, "ok");
    ck_assert_uint_eq(pump.served, 1);
    ck_assert_uint_eq(pump.inflight, 0);
}
END_TEST

/* A completion for a connection that is gone meanwhile is ignored. */
START_TEST(test_completion_for_free_slot)
{
    sl_ticket_t t = {.idx = 0, .gen = 5};

    h_options(&opt, "--worker-connections", "2", NULL);
    h_pump_up(&pump, &opt);
    ck_assert_int_eq(pump.pool.conns[0].state, SL_CONN_FREE);
    ck_assert_int_eq(sl_queue_push(&pump.done, &t, 1), 0);
    ev_async_send(pump.loop, &pump.wake);
    h_run_passes(&pump, 3);
    ck_assert_uint_eq(queue_count(&pump.done), 0);
    ck_assert_int_eq(pump.pool.conns[0].state, SL_CONN_FREE);
    ck_assert_uint_eq(pump.pool.nactive, 0);
}
END_TEST

static Suite *pump_suite(void)
{
    Suite *s = suite_create("pump");
    TCase *tc;

    tc = tcase_create("date");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_date_format);
    tcase_add_test(tc, test_date_follows_the_clock);
    suite_add_tcase(s, tc);

    tc = tcase_create("pump");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_init);
    tcase_add_test(tc, test_exchange_ids);
    tcase_add_test(tc, test_listener_described);
    tcase_add_test(tc, test_unix_listener);
    tcase_add_test(tc, test_every_listener_served);
    tcase_add_test(tc, test_accepted_socket);
    tcase_add_test(tc, test_pool_limit);
    tcase_add_test(tc, test_pool_set_up_on_first_use);
    tcase_add_test(tc, test_stop_listening);
    tcase_add_test(tc, test_submits_batched_per_pass);
    tcase_add_test(tc, test_hand_over_during_hand_over);
    tcase_add_test(tc, test_backend_fd);
    tcase_add_test(tc, test_new_connection_watched_once_settled);
    tcase_add_test(tc, test_full_socket_watched_once_settled);
    tcase_add_test(tc, test_batch_overflow_is_bounded);
    tcase_add_test(tc, test_completion_from_another_thread);
    tcase_add_test(tc, test_completion_for_free_slot);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pump_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
