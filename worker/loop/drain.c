/* drain.c - prepare / step / finish, driven by libev.
 *
 * The seed server's drain waited inside a callback and so blocked the very
 * requests it was waiting for. Here nothing waits: prepare changes state and
 * returns, a 100 ms timer (and the end of every request) calls step, and
 * step calls finish once the worker is idle or out of time. A response
 * whose head is made once the drain began says "Connection: close"
 * (sl_exch_must_close()); one made before keeps its connection, which the
 * drain closes once it has been quiet for IDLE_GRACE, so that a request
 * its client sent on it meanwhile is answered rather than met by EOF.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/ctl.h"
#include "common/log.h"
#include "common/options.h"
#include "worker/loop/conn_ws.h"
#include "worker/loop/drain.h"
#include "worker/loop/http.h"
#include "worker/loop/pump.h"
#include "worker/loop/listen.h"

#define STEP_SECS 0.1
/* An idle keep-alive connection is closed after this much quiet during a
 * drain: a client that is about to send its next request gets it answered
 * (with Connection: close) instead of finding the connection reset. One
 * that has not sent its first request gets SL_CONN_FRESH_GRACE (conn.h). */
#define IDLE_GRACE 0.1

/* Signal-handler state: the drain TERM marks; the request an executor runs on
 * the loop thread (for the backstop's last words: copied when the request
 * starts, since the handler may not format, and shown only while
 * running_len says the copy is whole). Written by the loop thread or the
 * handler only. */
static sl_drain_t *term_drain;
static const sl_options_t *backstop_opt;
static double backstop_margin; /* past the graceful timeout, see drain.h */
static timer_t backstop_timer;
static bool backstop_ready;
static char running_what[256];
static atomic_int running_len;

/* ---- the control channel ---- */

static void ctl_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    sl_pump_t *p = ev_userdata(loop);

    (void)revents;
    if (sl_drain_ctl_read(p) == 0)
        return;
    /* EOF or error: the supervisor is gone; never stay as an orphan */
    ev_io_stop(loop, w);
    sl_warn("supervisor gone: draining");
    sl_drain_prepare(p);
}

void sl_drain_set_ctl(sl_pump_t *p, int fd)
{
    p->drain.ctl_fd = fd;
    if (fd < 0)
        return;
    ev_io_init(&p->drain.ctl_io, ctl_cb, fd, EV_READ);
    sl_pump_io_start(p, &p->drain.ctl_io);
    /* what the supervisor sent at the spawn (the TLS ticket keys) is read
     * before the first connection, which the loop might otherwise take
     * first; EOF is the watcher's to see */
    (void)sl_drain_ctl_read(p);
}

/* ---- the drain ---- */

static void drain_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)w;
    (void)revents;
    sl_drain_step(ev_userdata(loop));
}

static void drain_finish(sl_pump_t *p, bool forced)
{
    ev_tstamp now = ev_now(p->loop);
    sl_conn_t *c, *next;
    char what[512];

    /* first: connections released below must not step the drain again */
    p->drain.stopping = true;
    ev_timer_stop(p->loop, &p->drain.timer);
    p->exec->finish(p); /* cancel what still runs in the executor */
    for (c = p->pool.active.next; c != &p->pool.active; c = next) {
        next = c->next;
        if (c->state == SL_CONN_SERVING || c->state == SL_CONN_WRITING) {
            sl_http_log_name(&sl_conn_wx(c)->req, what, sizeof(what));
            sl_warn("drain: abandoning request %s after %.1fs", what,
                    now - sl_conn_wx(c)->req.start);
        }
        sl_conn_abort(c);
    }
    p->drain.exit_status = forced ? SL_EXIT_FAIL : SL_EXIT_OK;
    if (p->alog != NULL) {
        sl_accesslog_flush(p->alog);
        sl_accesslog_report(p->alog);
    }
    ev_break(p->loop, EVBREAK_ALL);
}

static void delay_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)w;
    (void)revents;
    sl_drain_prepare(ev_userdata(loop));
}

void sl_drain_begin(sl_pump_t *p)
{
    if (p->drain.terminating)
        return;
    /* A restart's RESTART comes just before its TERM: read it now, so that
     * the health check (sl_http_health_head) knows the host stays up */
    (void)sl_drain_ctl_read(p); /* EOF: the ctl watcher says it */
    p->drain.terminating = true;
    if (p->opt->shutdown_delay <= 0) {
        sl_drain_prepare(p);
        return;
    }
    sl_info("TERM: serving %.1fs more before draining (--shutdown-delay)",
            p->opt->shutdown_delay);
    ev_timer_start(p->loop, &p->drain.delay_timer);
}

/* Tell every open WebSocket: close 1012 when the supervisor said this TERM
 * is a restart (its SL_CTL_RESTART comes just before the TERM: read what
 * the loop has not yet), 1001 otherwise. */
static void close_websockets(sl_pump_t *p)
{
    sl_conn_t *c, *next;

    (void)sl_drain_ctl_read(p); /* EOF: the ctl watcher says it */
    p->drain.ws_going_away =
        p->drain.restart ? SL_WS_CLOSE_RESTART : SL_WS_CLOSE_GOING_AWAY;
    for (c = p->pool.active.next; c != &p->pool.active; c = next) {
        next = c->next;
        sl_conn_going_away(c, p->drain.ws_going_away);
    }
}

void sl_drain_prepare(sl_pump_t *p)
{
    if (p->drain.draining)
        return;
    ev_timer_stop(p->loop, &p->drain.delay_timer);
    p->drain.terminating = true;
    p->drain.draining = true;
    p->drain.started = ev_now(p->loop);
    p->drain.deadline = p->drain.started + p->opt->graceful_timeout;
    sl_info("draining: %u connections open, %u requests in flight",
            p->pool.nactive, p->inflight);
    ev_timer_start(p->loop, &p->drain.timer);
    /* what completed its handshake is ours to answer: take it before our
     * listener closes, in case ours is the last copy of the socket */
    sl_listen_accept_pending(p);
    sl_listen_stop(p);
    sl_drain_ctl(p, SL_CTL_DRAINING);
    close_websockets(p);
    sl_drain_step(p);
}

/* Connections still worth waiting for: lingering closes are not. */
static uint32_t busy_conns(sl_pump_t *p)
{
    sl_conn_t *c;
    uint32_t n = 0;

    for (c = p->pool.active.next; c != &p->pool.active; c = c->next)
        n += c->state != SL_CONN_CLOSING;
    return n;
}

void sl_drain_step(sl_pump_t *p)
{
    ev_tstamp now = ev_now(p->loop);
    sl_conn_t *c, *next;

    if (!p->drain.draining || p->drain.stopping)
        return;
    for (c = p->pool.active.next; c != &p->pool.active; c = next) {
        next = c->next;
        sl_conn_drain(c, now, IDLE_GRACE);
    }
    if (p->inflight == 0 && busy_conns(p) == 0) {
        drain_finish(p, false);
        return;
    }
    if (ev_now(p->loop) >= p->drain.deadline) {
        sl_warn("graceful timeout (%.1fs) reached with %u requests in flight",
                p->opt->graceful_timeout, p->inflight);
        drain_finish(p, true);
    }
}

/* ---- signals: the parts that must work while the loop is held ---- */

static void backstop_handler(int sig)
{
    static const char head[] = "sluice: worker graceful timeout: exiting";
    static const char mid[] = "; abandoning ";
    int n = atomic_load(&running_len);
    int fd = sl_log_fd();
    ssize_t rc;

    (void)sig;
    rc = write(fd, head, sizeof(head) - 1);
    if (n > 0) {
        rc = write(fd, mid, sizeof(mid) - 1);
        rc = write(fd, running_what, (size_t)n);
    }
    rc = write(fd, "\n", 1);
    (void)rc;
    _exit(SL_EXIT_FAIL);
}

/* TERM: remember it where a response made on the loop thread sees it, arm the
 * backstop, then let libev deliver it to the loop as usual. */
static void term_handler(int sig)
{
    struct itimerspec its = {{0, 0}, {0, 0}};
    double secs;

    if (!term_drain->term_seen && backstop_ready) {
        secs = backstop_opt->shutdown_delay + backstop_opt->graceful_timeout +
               backstop_margin;
        its.it_value.tv_sec = (time_t)secs;
        its.it_value.tv_nsec = (long)((secs - (double)(time_t)secs) * 1e9);
        timer_settime(backstop_timer, 0, &its, NULL);
    }
    term_drain->term_seen = 1;
    ev_feed_signal(sig);
}

void sl_drain_signals(sl_pump_t *p)
{
    struct sigaction sa;
    struct sigevent sev;

    term_drain = &p->drain;
    backstop_opt = p->opt;
    /* an app that holds the loop can hold it past its timeout: only the
     * backstop can keep the promise, a little after the loop would have */
    backstop_margin = p->exec->holds_loop ? 0.1 : 1.0;
    memset(&sev, 0, sizeof(sev));
    sev.sigev_notify = SIGEV_SIGNAL;
    sev.sigev_signo = SIGALRM;
    if (timer_create(CLOCK_MONOTONIC, &sev, &backstop_timer) < 0) {
        sl_log_errno(SL_LOG_WARNING, "timer_create() failed: no drain "
                                     "backstop");
    } else {
        backstop_ready = true;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = backstop_handler;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGALRM, &sa, NULL);
    }
    /* after libev's ev_signal_start, so ours is the handler that runs */
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = term_handler;
    sigfillset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGTERM, &sa, NULL) < 0)
        sl_log_errno(SL_LOG_WARNING, "sigaction(SIGTERM) failed");
}

void sl_drain_note_running(const sl_exch_t *x)
{
    /* the handler shows nothing while the copy changes (on this thread;
     * one that fires elsewhere at that moment may show it half made) */
    atomic_store(&running_len, 0);
    atomic_signal_fence(memory_order_seq_cst);
    if (x == NULL)
        return;
    atomic_store(&running_len, (int)sl_http_log_name(&x->req, running_what,
                                                     sizeof(running_what)));
}

void sl_drain_fast(sl_pump_t *p)
{
    if (p->drain.stopping)
        return;
    p->drain.draining = true;
    p->drain.started = ev_now(p->loop);
    p->drain.deadline = p->drain.started;
    sl_listen_stop(p);
    drain_finish(p, p->inflight > 0);
}

/* ---- signals and set-up ---- */

/* USR1: logrotate moved the file; Python writes to fd 2, so point it at
 * the new file too. */
static void reopen_logs(sl_pump_t *p)
{
    sl_accesslog_reopen(p->alog);
    if (sl_log_reopen() < 0)
        sl_log_errno(SL_LOG_ERROR, "reopening the error log failed");
    else if (sl_log_fd() != STDERR_FILENO)
        dup2(sl_log_fd(), STDERR_FILENO);
}

static void signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
    sl_pump_t *p = ev_userdata(loop);

    (void)revents;
    if (w->signum == SIGTERM)
        sl_drain_begin(p);
    else if (w->signum == SIGUSR1)
        reopen_logs(p);
    else
        sl_drain_fast(p);
}

void sl_drain_init(sl_pump_t *p)
{
    sl_drain_t *d = &p->drain;
    const sl_options_t *o = p->opt;

    d->ctl_fd = -1;
    d->shutdown_delay = o->shutdown_delay > 0;
    ev_timer_init(&d->delay_timer, delay_cb, o->shutdown_delay, 0);
    ev_timer_init(&d->timer, drain_timer_cb, STEP_SECS, STEP_SECS);
    ev_signal_init(&d->sigterm, signal_cb, SIGTERM);
    ev_signal_init(&d->sigint, signal_cb, SIGINT);
    ev_signal_init(&d->sigquit, signal_cb, SIGQUIT);
    ev_signal_init(&d->sigusr1, signal_cb, SIGUSR1);
    ev_signal_start(p->loop, &d->sigterm);
    ev_signal_start(p->loop, &d->sigint);
    ev_signal_start(p->loop, &d->sigquit);
    ev_signal_start(p->loop, &d->sigusr1);
    sl_drain_signals(p);
    if (o->max_requests > 0) {
        srand((unsigned)getpid());
        d->retire_at = (uint64_t)o->max_requests +
                       (o->max_requests_jitter > 0
                            ? (uint64_t)(rand() % (o->max_requests_jitter + 1))
                            : 0);
    }
}
