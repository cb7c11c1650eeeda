/* test_pump.c - check suite for worker/loop/pump.c.
 *
 * The cached Date header the pump keeps is compared with the clock (the
 * ticket queue and the line's format have suites of their own, test_queue
 * and test_date). The pump itself runs on a loopback listener: accept, the
 * pool limit, the per-pass batch of submits, completions from another
 * thread, the control channel (a socketpair standing in for the
 * supervisor) and the signals it owns.
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

static sl_options_t opt;
static sl_pump_t pump;
static h_client_t client;
static h_resp_t resp;
static int ctl[2] = {-1, -1}; /* [0] the worker's end, [1] the supervisor's */

static void setup(void)
{
    client.fd = -1;
    sl_log_set_level(SL_LOG_ERROR);
}

static void teardown(void)
{
    h_resp_free(&resp);
    h_client_close(&client);
    h_pump_down(&pump);
    if (ctl[1] >= 0)
        close(ctl[1]);
}

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
    ck_assert_uint_eq(pump.pool.conns[1].idx, 1);
    ck_assert_int_eq(pump.pool.conns[1].file_fd, -1);
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
/* limits: idle connections give up their slot, EMFILE pauses accepting */

/* CL sends a GET and the test executor answers it: afterwards CL's
 * connection is an idle keep-alive one. */
static void serve_one(h_client_t *cl)
{
    static const char r[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    struct iovec iov = {(void *)r, sizeof(r) - 1};
    h_resp_t got = {0};
    sl_ticket_t t;

    h_sends(cl, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_take_ticket(&pump, &t));
    ck_assert_int_eq(
        sl_conn_send(&pump.pool.conns[t.idx], t.gen, &iov, 1, SL_SEND_END), 0);
    ck_assert(h_response(&pump, cl, &got, false));
    ck_assert_str_eq(got.body, "ok");
    h_resp_free(&got);
}

/* A client connected to the pump's listener, not yet accepted. */
static void connect_only(h_client_t *cl)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);

    memset(cl, 0, sizeof(*cl));
    ck_assert_int_eq(
        getsockname(pump.listeners[0].fd, (struct sockaddr *)&sin, &len), 0);
    cl->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(cl->fd, 0);
    ck_assert_int_eq(connect(cl->fd, (struct sockaddr *)&sin, len), 0);
}

/* Has the pump accepted CL (is the peer of one of its connections)? */
static bool accepted(void *arg)
{
    h_client_t *cl = arg;
    struct sockaddr_in mine, theirs;
    socklen_t len = sizeof(mine), tlen;
    sl_conn_t *c;

    ck_assert_int_eq(getsockname(cl->fd, (struct sockaddr *)&mine, &len), 0);
    for (c = pump.pool.active.next; c != &pump.pool.active; c = c->next) {
        tlen = sizeof(theirs);
        if (getpeername(c->tp.fd, (struct sockaddr *)&theirs, &tlen) == 0 &&
            mine.sin_port == theirs.sin_port)
            return true;
    }
    return false;
}

/* With every slot taken, a new connection closes the longest-idle
 * keep-alive one and takes its slot, at once. */
START_TEST(test_idle_evicted_for_new)
{
    h_client_t second, third;
    uint64_t before = sl_metrics_self->idle_evictions;

    h_options(&opt, "--worker-connections", "2", NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    serve_one(&client);
    h_connect(&pump, &second);
    serve_one(&second);
    ck_assert_uint_eq(pump.pool.nidle, 2);
    ck_assert_ptr_eq(pump.pool.idle_tail, client.conn); /* idle the longest */
    ck_assert(pump.accepting); /* full, but idle ones can make room */
    connect_only(&third);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert(h_run_until(&pump, accepted, &third));
    ck_assert_uint_eq(pump.pool.nactive, 2);
    ck_assert_uint_eq(sl_metrics_self->idle_evictions, before + 1);
    /* the other idle one is untouched and still served */
    serve_one(&second);
    serve_one(&third);
    h_client_close(&second);
    h_client_close(&third);
}
END_TEST

/* An idle connection whose next request is already on the wire is not
 * the one evicted: its request is answered, the next idle one goes. */
START_TEST(test_idle_with_request_waiting_kept)
{
    h_client_t second, third;
    h_resp_t got = {0};
    sl_ticket_t t;
    static const char r[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    struct iovec iov = {(void *)r, sizeof(r) - 1};

    h_options(&opt, "--worker-connections", "2", NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    serve_one(&client);
    h_connect(&pump, &second);
    serve_one(&second);
    /* the oldest sends its next request; the loop has not read it yet */
    h_sends(&client, "GET /again HTTP/1.1\r\nHost: h\r\n\r\n");
    connect_only(&third);
    ck_assert(h_wait_eof(&pump, &second));
    ck_assert(h_take_ticket(&pump, &t));
    ck_assert_ptr_eq(&pump.pool.conns[t.idx], client.conn);
    ck_assert_int_eq(
        sl_conn_send(&pump.pool.conns[t.idx], t.gen, &iov, 1, SL_SEND_END), 0);
    ck_assert(h_response(&pump, &client, &got, false));
    ck_assert_str_eq(got.body, "ok");
    h_resp_free(&got);
    ck_assert(h_run_until(&pump, accepted, &third));
    h_client_close(&second);
    h_client_close(&third);
}
END_TEST

/* A connection that never sent a byte is not idle in that sense: with
 * the pool used up by such, a new one waits in the backlog (the header
 * timeout is what frees those). */
START_TEST(test_fresh_connection_not_evicted)
{
    h_client_t second;

    h_options(&opt, "--worker-connections", "1", NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    ck_assert_uint_eq(pump.pool.nidle, 0);
    ck_assert(!pump.accepting);
    connect_only(&second);
    h_run_passes(&pump, 5);
    ck_assert_uint_eq(pump.pool.nactive, 1);
    ck_assert_ptr_eq(pump.pool.active.next, client.conn);
    ck_assert(!h_saw_eof(&client));
    h_client_close(&second);
}
END_TEST

/* The lowest free descriptor: a soft limit of this makes the next
 * accept4() fail with EMFILE. */
static int next_fd(void)
{
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

    ck_assert_int_ge(fd, 0);
    close(fd);
    return fd;
}

static void set_nofile(rlim_t soft)
{
    struct rlimit rl;

    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rl.rlim_cur = soft;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

static bool is_paused(void *arg)
{
    (void)arg;
    return pump.accept_paused;
}

static bool nactive_two(void *arg)
{
    (void)arg;
    return pump.pool.nactive == 2;
}

/* Out of descriptors, the listener stops (no retry loop: one failure, one
 * log line), and a connection of ours closing resumes it at once. */
START_TEST(test_emfile_pauses_until_a_close)
{
    h_client_t second, third;
    char path[128], buf[4096];
    struct rlimit saved;
    ev_tstamp closed;
    FILE *f;
    size_t n;

    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &saved), 0);
    snprintf(path, sizeof(path), "%s/emfile.log", h_test_dir());
    ck_assert_int_eq(sl_log_open(path), 0);
    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    connect_only(&second);
    connect_only(&third);
    set_nofile((rlim_t)next_fd());
    ck_assert(h_run_until(&pump, is_paused, NULL));
    ck_assert(!pump.accepting);
    h_run_passes(&pump, 20);
    ck_assert_uint_eq(pump.accept_limit.total, 1); /* tried once, no spin */
    ck_assert_uint_eq(pump.pool.nactive, 1);
    /* our first client leaves: its descriptor is the next one's, taken
     * without waiting for the pause to end */
    closed = ev_time();
    h_client_close(&client);
    ck_assert(h_run_until(&pump, accepted, &second));
    ck_assert_double_lt(ev_time() - closed, SL_ACCEPTLIMIT_PAUSE);
    /* the client's own descriptor is free too: the third may follow */
    ck_assert_uint_le(pump.accept_limit.total, 2);
    set_nofile(saved.rlim_cur);
    ck_assert(h_run_until(&pump, nactive_two, NULL));
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    ck_assert_ptr_nonnull(
        strstr(buf, "accept4() failed: Too many open files; accepting paused"));
    h_client_close(&second);
    h_client_close(&third);
}
END_TEST

/* With no connection of ours to close, the pause ends on its timer. */
START_TEST(test_emfile_pause_ends_on_timer)
{
    h_client_t second;
    rlim_t low;

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    sl_log_set_level(SL_LOG_CRITICAL); /* its error line is expected */
    connect_only(&second);
    low = (rlim_t)next_fd();
    set_nofile(low);
    ck_assert(h_run_until(&pump, is_paused, NULL));
    set_nofile(low + 16);
    ck_assert(h_run_until(&pump, accepted, &second));
    ck_assert(!pump.accept_paused);
    ck_assert(pump.accepting);
    ck_assert_uint_eq(pump.accept_limit.total, 1);
    h_client_close(&second);
}
END_TEST

/* A drain during a pause: the listeners close and nothing resumes them
 * (no timer left armed). */
START_TEST(test_emfile_pause_then_drain)
{
    h_client_t second;
    struct rlimit saved;

    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &saved), 0);
    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    sl_log_set_level(SL_LOG_CRITICAL); /* its error line is expected */
    connect_only(&second);
    set_nofile((rlim_t)next_fd());
    ck_assert(h_run_until(&pump, is_paused, NULL));
    ck_assert(ev_is_active(&pump.accept_timer));
    pump.drain.draining = true; /* as sl_drain_prepare() does first */
    sl_listen_stop(&pump);
    set_nofile(saved.rlim_cur);
    ck_assert(!pump.accept_paused);
    ck_assert(!ev_is_active(&pump.accept_timer));
    h_run_passes(&pump, 5);
    ck_assert(!pump.accepting);
    ck_assert_int_eq(pump.listeners[0].fd, -1);
    ck_assert_uint_eq(pump.pool.nactive, 0);
    h_client_close(&second);
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
        sl_exec_queue_ticket(p, requeue, SL_TICKET_WAKE);
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
    sl_exec_submit(&pump, client.conn);
    sl_exec_queue_ticket(&pump, other.conn, SL_TICKET_WAKE);
    ck_assert_uint_eq(pump.inflight, 1);
    ck_assert_uint_eq(pump.npending, 2);
    ck_assert_uint_eq(nbatches, 0); /* not before the pass */
    ev_run(pump.loop, EVRUN_NOWAIT);
    ck_assert_uint_eq(pump.npending, 0);
    ck_assert_uint_eq(nbatches, 1);
    ck_assert_uint_eq(nhanded, 2);
    ck_assert_uint_eq(handed[0].idx, client.conn->idx);
    ck_assert_uint_eq(handed[0].kind, SL_TICKET_SUBMIT);
    ck_assert_uint_eq(handed[1].idx, other.conn->idx);
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
    sl_exec_queue_ticket(&pump, client.conn, SL_TICKET_WAKE);
    sl_exec_queue_ticket(&pump, client.conn, SL_TICKET_SUBMIT);
    ck_assert(sl_pump_run_once(&pump));
    ck_assert_uint_eq(nbatches, 2);
    ck_assert_uint_eq(nhanded, 3);
    ck_assert_uint_eq(handed[0].kind, SL_TICKET_WAKE);
    ck_assert_uint_eq(handed[1].kind, SL_TICKET_SUBMIT);
    ck_assert_uint_eq(handed[2].idx, other.conn->idx);
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
    ck_assert_int_eq(sl_conn_send(c, t.gen, iov, 2, SL_SEND_END), 0);
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
    for (int i = 0; i < 10; i++)
        sl_exec_queue_ticket(&pump, client.conn, SL_TICKET_WAKE);
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

    sl_conn_send(a->c, a->gen, &iov, 1, SL_SEND_END);
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

/* ------------------------------------------------------------------ */
/* the control channel                                                */

static void ctl_up(void)
{
    ck_assert_int_eq(
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, ctl), 0);
    sl_drain_set_ctl(&pump, ctl[0]);
    ck_assert_int_eq(pump.drain.ctl_fd, ctl[0]);
}

static bool ctl_readable(void *arg)
{
    sl_ctl_msg_t *m = arg;

    return sl_ctl_recv(ctl[1], m) == 1;
}

START_TEST(test_heartbeat)
{
    sl_ctl_msg_t m;
    sl_ticket_t t;

    h_options(&opt, "--threads", "4", NULL);
    h_pump_up(&pump, &opt);
    ctl_up();
    h_connect(&pump, &client);
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_take_ticket(&pump, &t));
    pump.served = 41;
    sl_drain_ctl(&pump, SL_CTL_HEARTBEAT);
    ck_assert_int_eq(sl_ctl_recv(ctl[1], &m), 1);
    ck_assert_uint_eq(m.type, SL_CTL_HEARTBEAT);
    ck_assert_uint_eq(m.pid, (uint32_t)getpid());
    ck_assert(m.served == 41);
    ck_assert_uint_eq(m.active, 1);
    ck_assert_uint_eq(m.conns, 1);
    ck_assert_uint_eq(m.lanes, 4);
    ck_assert_uint_eq(m.busy_lanes, 1);
    ck_assert(m.oldest >= 0 && m.oldest < 5);
}
END_TEST

/* The housekeeping tick sends a heartbeat (and sweeps, and dates). */
START_TEST(test_tick_sends_heartbeat)
{
    sl_ctl_msg_t m;

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    ctl_up();
    ev_feed_event(pump.loop, &pump.tick, EV_TIMER);
    ck_assert(h_run_until(&pump, ctl_readable, &m));
    ck_assert_uint_eq(m.type, SL_CTL_HEARTBEAT);
}
END_TEST

/* The tick closes connections whose deadline passed. */
START_TEST(test_tick_sweeps)
{
    h_options(&opt, "--keep-alive", "1", "--header-timeout", "0.01", NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_uint_eq(pump.pool.nactive, 0);
}
END_TEST

START_TEST(test_retire_once)
{
    sl_ctl_msg_t m;

    h_options(&opt, "--max-requests", "2", NULL);
    h_pump_up(&pump, &opt);
    ctl_up();
    ck_assert_uint_eq(pump.drain.retire_at, 2);
    sl_request_done(&pump, &pump.pool.conns[0]);
    ck_assert_int_eq(sl_ctl_recv(ctl[1], &m), -1);
    sl_request_done(&pump, &pump.pool.conns[0]);
    ck_assert_int_eq(sl_ctl_recv(ctl[1], &m), 1);
    ck_assert_uint_eq(m.type, SL_CTL_RETIRE);
    ck_assert(m.served == 2);
    sl_request_done(&pump, &pump.pool.conns[0]);
    ck_assert_int_eq(sl_ctl_recv(ctl[1], &m), -1);
    ck_assert(pump.served == 3);
}
END_TEST

/* A finished request is counted by method and status class, with its
 * duration and queue time; one refused before its head was whole counts
 * as "other" with no times. */
START_TEST(test_request_done_counts_metrics)
{
    sl_metrics_slot_t before = *sl_metrics_self;
    sl_conn_t *c;

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    c = &pump.pool.conns[0];
    c->head_done = true;
    c->req.method = HTTP_POST;
    c->resp_status = 503;
    c->req.start = ev_now(pump.loop) - 0.2;
    c->picked = c->req.start + 0.1;
    sl_request_done(&pump, c);
    ck_assert_uint_eq(
        sl_metrics_self->requests[SL_METRICS_POST][SL_METRICS_5XX] -
            before.requests[SL_METRICS_POST][SL_METRICS_5XX],
        1);
    /* 0.1 s queued: the 0.1 bucket (le is inclusive); 0.2 s in all */
    ck_assert_uint_eq(sl_metrics_self->queue.bucket[7] - before.queue.bucket[7],
                      1);
    ck_assert_uint_eq(
        sl_metrics_self->duration.bucket[8] - before.duration.bucket[8], 1);

    c->head_done = false;
    c->resp_status = 0;
    c->req.start = 0;
    before = *sl_metrics_self;
    sl_request_done(&pump, c);
    ck_assert_uint_eq(
        sl_metrics_self->requests[SL_METRICS_OTHER][SL_METRICS_NONE] -
            before.requests[SL_METRICS_OTHER][SL_METRICS_NONE],
        1);
    ck_assert(memcmp(&sl_metrics_self->duration, &before.duration,
                     sizeof(before.duration)) == 0);
}
END_TEST

START_TEST(test_retire_jitter)
{
    h_options(&opt, "--max-requests", "10", "--max-requests-jitter", "5", NULL);
    ck_assert_int_eq(sl_pump_init(&pump, &opt, h_exec, NULL, 0), 0);
    ck_assert_uint_ge(pump.drain.retire_at, 10);
    ck_assert_uint_le(pump.drain.retire_at, 15);
}
END_TEST

static bool pump_stopping(void *arg)
{
    sl_pump_t *p = arg;

    return p->drain.stopping;
}

/* EOF on the control channel: the supervisor is gone, drain and stop. */
START_TEST(test_ctl_eof_drains)
{
    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    ctl_up();
    close(ctl[1]);
    ctl[1] = -1;
    ck_assert(h_run_until(&pump, pump_stopping, &pump));
    ck_assert(pump.drain.draining);
    ck_assert_int_eq(pump.drain.exit_status, SL_EXIT_OK);
    ck_assert_int_eq(pump.listeners[0].fd, -1);
}
END_TEST

/* ------------------------------------------------------------------ */
/* signals and sl_pump_run                                            */

START_TEST(test_sigterm_drains)
{
    sl_ctl_msg_t m;

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    ctl_up();
    ck_assert_int_eq(kill(getpid(), SIGTERM), 0);
    ck_assert(h_run_until(&pump, pump_stopping, &pump));
    ck_assert(pump.drain.terminating);
    ck_assert_int_eq(pump.drain.exit_status, SL_EXIT_OK);
    ck_assert_int_eq(sl_ctl_recv(ctl[1], &m), 1);
    ck_assert_uint_eq(m.type, SL_CTL_DRAINING);
}
END_TEST

START_TEST(test_sigint_and_sigquit_stop_fast)
{
    static const int sigs[] = {SIGINT, SIGQUIT};

    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
    ck_assert_int_eq(kill(getpid(), sigs[_i]), 0);
    ck_assert(h_run_until(&pump, pump_stopping, &pump));
    ck_assert_uint_eq(pump.pool.nactive, 0);
    ck_assert(h_wait_eof(&pump, &client));
}
END_TEST

static bool file_exists(void *arg)
{
    struct stat st;

    return stat(arg, &st) == 0;
}

/* USR1 reopens the log: after logrotate moved it, a new file appears. */
START_TEST(test_sigusr1_reopens_log)
{
    char path[128], moved[128], line[256] = {0};
    int saved = dup(STDERR_FILENO);
    FILE *f;

    snprintf(path, sizeof(path), "%s/error.log", h_test_dir());
    snprintf(moved, sizeof(moved), "%s/error.log.1", h_test_dir());
    ck_assert_int_eq(sl_log_open(path), 0);
    h_options(&opt, NULL);
    h_pump_up(&pump, &opt);
    ck_assert_int_eq(rename(path, moved), 0);
    ck_assert_int_eq(kill(getpid(), SIGUSR1), 0);
    ck_assert(h_run_until(&pump, file_exists, path));
    sl_log(SL_LOG_ERROR, "after the reopen");
    dup2(saved, STDERR_FILENO);
    close(saved);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
    fclose(f);
    ck_assert_ptr_nonnull(strstr(line, "after the reopen"));
}
END_TEST

/* sl_pump_run() starts the listeners and returns the drain's status. */
START_TEST(test_run_until_term)
{
    int fd = h_listen();

    h_options(&opt, NULL);
    ck_assert_int_eq(sl_pump_init(&pump, &opt, h_exec, &fd, 1), 0);
    ck_assert(!pump.accepting);
    ck_assert_int_eq(kill(getpid(), SIGTERM), 0);
    alarm(5);
    ck_assert_int_eq(sl_pump_run(&pump), SL_EXIT_OK);
    alarm(0);
    ck_assert(pump.drain.stopping);
    ck_assert_int_eq(pump.listeners[0].fd, -1);
}
END_TEST

static Suite *pump_suite(void)
{
    Suite *s = suite_create("pump");
    TCase *tc = tcase_create("date");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_date_format);
    tcase_add_test(tc, test_date_follows_the_clock);
    suite_add_tcase(s, tc);

    tc = tcase_create("pump");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_init);
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

    tc = tcase_create("limits");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_idle_evicted_for_new);
    tcase_add_test(tc, test_idle_with_request_waiting_kept);
    tcase_add_test(tc, test_fresh_connection_not_evicted);
    tcase_add_test(tc, test_emfile_pauses_until_a_close);
    tcase_add_test(tc, test_emfile_pause_ends_on_timer);
    tcase_add_test(tc, test_emfile_pause_then_drain);
    suite_add_tcase(s, tc);

    tc = tcase_create("ctl");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_heartbeat);
    tcase_add_test(tc, test_tick_sends_heartbeat);
    tcase_add_test(tc, test_tick_sweeps);
    tcase_add_test(tc, test_retire_once);
    tcase_add_test(tc, test_request_done_counts_metrics);
    tcase_add_test(tc, test_retire_jitter);
    tcase_add_test(tc, test_ctl_eof_drains);
    suite_add_tcase(s, tc);

    tc = tcase_create("signals");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_sigterm_drains);
    tcase_add_loop_test(tc, test_sigint_and_sigquit_stop_fast, 0, 2);
    tcase_add_test(tc, test_sigusr1_reopens_log);
    tcase_add_test(tc, test_run_until_term);
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
