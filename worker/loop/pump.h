/* pump.h - the loop thread of a worker.
 *
 * One libev loop owns the listeners, the connection pool, the 1 Hz
 * housekeeping (cached Date header, timeouts) and the two queues that join it
 * to the executor: submits go out once per loop pass, completions come back
 * through one ev_async, which coalesces wake-ups. The executor is a table of
 * operations (exec.h) given at init; the pump never asks which one it is.
 */
#ifndef SL_PUMP_H
#define SL_PUMP_H

#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/acceptlimit.h"
#include "common/handoff.h" /* SL_MAX_LISTENERS */
#include "common/options.h"
#include "common/queue.h"
#include "worker/loop/accesslog.h"
#include "worker/loop/bufcache.h"
#include "worker/loop/conn.h"
#include "worker/loop/drain.h"
#include "worker/loop/exec.h"
#include "worker/loop/h1_ahead.h"
#include "worker/loop/h2.h"
#include "worker/loop/pool.h"
#include "worker/loop/slots.h"

/* One inherited listening socket, as the worker accepts from it. */
typedef struct {
    ev_io io; /* embedded */
    int fd;
    char server_name[64]; /* SERVER_NAME when no Host header */
    char server_port[8];
    bool unix_sock;
    bool tls; /* its connections speak TLS (the pump's tls_ctx) */
} sl_pump_listener_t;

struct sl_pump {
    struct ev_loop *loop;    /* owned */
    const sl_options_t *opt; /* borrowed */
    sl_pump_listener_t listeners[SL_MAX_LISTENERS];
    int nlisteners; /* every socket handed over: init fails beyond the max */
    struct ssl_ctx_st *tls_ctx;      /* owned: the TLS listeners' context, NULL
                                        when none speaks TLS (listen.h) */
    const struct sl_tls_module *tls; /* the TLS module (tlsmod.h), with
                                        tls_ctx; NULL without */
    bool accepting;
    bool accept_paused;    /* accept4() ran out of descriptors or memory:
                              the listeners wait for accept_timer, or for
                              one of our connections to close */
    ev_timer accept_timer; /* embedded: the end of an accept pause */
    sl_acceptlimit_t accept_limit; /* its log lines, once a second */

    sl_pool_t pool; /* embedded: the connections (pool.h) */
    /* HTTP/2's streams (h2.h), each an exchange whose id follows the
     * connections' (slots.h) */
    sl_slots_t h2s;        /* embedded */
    uint32_t h2sessions;   /* connections speaking HTTP/2 now */
    uint32_t h2live;       /* streams taken from h2s, not yet given back */
    struct sl_h2 *h2dirty; /* sessions with output to frame at the pass's
                              end (sl_h2_flush()), linked by dirty_next */
    /* HTTP/1.1's pipelined requests run ahead (h1_ahead.h), each an
     * exchange whose id follows the streams' (slots.h) */
    sl_slots_t aheads;   /* embedded */
    sl_exch_t *ahead_px; /* the spare a head is parsed into now */
    /* Pump mode, pipelining: connections whose finished answers wait
     * for the next one (output.h), each SL_CONN_HOLD_SECS at most. */
    sl_holdq_t holdq; /* embedded */

    const sl_exec_t *exec; /* borrowed: the executor's operations */
    int backend_fd;        /* libev's epoll fd, -1 when not epoll */
    bool unsettled;        /* an ev_io started since the last pass of
                              sl_pump_run_once() began: sl_pump_settled() */
    sl_queue_t work;       /* pump -> lane threads */
    sl_ticket_t *pending;  /* owned: this pass's tickets, handed over in
                              prepare */
    sl_ticket_t *handing;  /* owned: the batch being handed over */
    uint32_t npending;
    uint32_t npending_cap;
    sl_queue_t done;  /* lanes -> pump */
    ev_async wake;    /* embedded: completions arrived */
    ev_prepare flush; /* embedded: end of pass */
    ev_timer tick;    /* embedded: 1 Hz housekeeping */
    int lanes;        /* executor lanes a request can hold (0: none, ASGI) */

    ev_tstamp last_tick;
    uint64_t served;      /* requests completed */
    uint32_t inflight;    /* requests with the executor */
    sl_drain_t drain;     /* embedded: control channel, signals, drain
                             (drain.h) */
    sl_accesslog_t *alog; /* owned: the access log, NULL when off */
    /* borrowed: the --static maps (static.h), NULL when none; the
     * worker's, loaded with the app */
    const struct sl_static *statics;
    sl_bufcache_t bufs; /* owned: freed connection buffers (bufcache.h) */
};

/* Set up the loop, pool and listeners for EXEC (borrowed: a table that
 * outlives the pump): every one of FDS[0..NFDS), which may hold up to
 * SL_MAX_LISTENERS. 0, or -1 after logging. */
int sl_pump_init(sl_pump_t *p, const sl_options_t *o, const sl_exec_t *exec,
                 const int *fds, int nfds);

/* Start accepting: sl_pump_run() does it first; a loop that drives the
 * pump itself (sl_pump_run_once()) calls it before its first pass. */
void sl_pump_start(sl_pump_t *p);

/* Run until drained; returns the worker's exit status. */
int sl_pump_run(sl_pump_t *p);

/* For a loop that drives the pump from its own (an event loop on the loop
 * thread): one pass without waiting, then hand over the tickets the pass
 * queued. False once the drain has finished (leave; p->drain.exit_status). */
bool sl_pump_run_once(sl_pump_t *p);

/* Whether a loop that drives the pump may now wait for backend_fd. libev
 * hands its watcher changes to epoll when a pass begins, before it polls
 * (fd_reify): an ev_io started by the callbacks of the last pass (a new
 * connection's EV_READ, EV_WRITE on a full socket) is not watched yet, so
 * its events would not make backend_fd readable. False: run another pass
 * first; it applies them, polls without waiting and may start more. */
bool sl_pump_settled(const sl_pump_t *p);

/* Free what init allocated. */
void sl_pump_destroy(sl_pump_t *p);

/* Loop side: ev_io_start(W) on P's loop. Every ev_io starts here, so that
 * sl_pump_settled() knows of it (stopping needs no such care: epoll may
 * report a stopped fd once more, which libev ignores). */
static inline void sl_pump_io_start(sl_pump_t *p, ev_io *w)
{
    ev_io_start(p->loop, w);
    p->unsettled = true;
}

/* ---- for the executor side and worker life: what they may read of the
 * pump, without reaching into its fields ---- */

static inline const sl_options_t *sl_pump_options(const sl_pump_t *p)
{
    return p->opt;
}

static inline const sl_exec_t *sl_pump_exec(const sl_pump_t *p)
{
    return p->exec;
}

static inline struct ev_loop *sl_pump_loop(const sl_pump_t *p)
{
    return p->loop;
}

/* The queue lane threads take their tickets from (handoff executors). */
static inline sl_queue_t *sl_pump_work(sl_pump_t *p)
{
    return &p->work;
}

/* libev's epoll fd, for a loop that drives the pump from its own
 * (sl_pump_run_once()); -1 when the backend is not epoll. */
static inline int sl_pump_backend_fd(const sl_pump_t *p)
{
    return p->backend_fd;
}

/* The drain has finished: the executor stops too. Any thread. */
static inline bool sl_pump_stopping(sl_pump_t *p)
{
    return atomic_load(&p->drain.stopping);
}

/* The worker's exit status, once the drain has finished. */
static inline int sl_pump_exit_status(const sl_pump_t *p)
{
    return p->drain.exit_status;
}

/* Whether the drain has begun, and when (*SINCE, loop time). */
static inline bool sl_pump_draining_since(sl_pump_t *p, ev_tstamp *since)
{
    *since = p->drain.started;
    return atomic_load(&p->drain.draining);
}

static inline int sl_pump_nlisteners(const sl_pump_t *p)
{
    return p->nlisteners;
}

/* Listener K (below sl_pump_nlisteners()): its server name and port. */
static inline const sl_pump_listener_t *sl_pump_listener(const sl_pump_t *p,
                                                         int k)
{
    return &p->listeners[k];
}

/* What kind of exchange a ticket's ID names: a connection's own, an
 * HTTP/2 stream's or a request run ahead. Ids come in that order. */
typedef enum { SL_EXCH_CONN, SL_EXCH_STREAM, SL_EXCH_AHEAD } sl_exch_kind_t;

static inline sl_exch_kind_t sl_pump_exch_kind(const sl_pump_t *p, uint32_t id)
{
    if (id < p->h2s.base)
        return SL_EXCH_CONN;
    return id < p->h2s.base + p->h2s.max ? SL_EXCH_STREAM : SL_EXCH_AHEAD;
}

/* Executor side: the exchange a ticket names (its id). Any thread: the
 * pool and the slots do not move. */
static inline sl_exch_t *sl_pump_exch(sl_pump_t *p, uint32_t id)
{
    switch (sl_pump_exch_kind(p, id)) {
    case SL_EXCH_CONN:
        return &p->pool.conns[id].x;
    case SL_EXCH_STREAM:
        return sl_slots_get(&p->h2s, id);
    default:
        return sl_slots_get(&p->aheads, id);
    }
}

/* How many exchanges the executor may see at once, at most: what it sizes
 * its per-exchange tables by (ids are below it). */
static inline uint32_t sl_pump_exch_max(const sl_pump_t *p)
{
    return p->h2s.base + p->h2s.max + p->aheads.max;
}

#endif
