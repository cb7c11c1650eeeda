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

/* One inherited listening socket, as the worker accepts from it. */
typedef struct {
    ev_io io; /* embedded */
    int fd;
    char server_name[64]; /* SERVER_NAME when no Host header */
    char server_port[8];
    bool unix_sock;
} sl_pump_listener_t;

struct sl_pump {
    struct ev_loop *loop;    /* owned */
    const sl_options_t *opt; /* borrowed */
    sl_pump_listener_t listeners[SL_MAX_LISTENERS];
    int nlisteners; /* every socket handed over: init fails beyond the max */
    bool accepting;
    bool accept_paused;    /* accept4() ran out of descriptors or memory:
                              the listeners wait for accept_timer, or for
                              one of our connections to close */
    ev_timer accept_timer; /* embedded: the end of an accept pause */
    sl_acceptlimit_t accept_limit; /* its log lines, once a second */

    /* The pool: --worker-connections entries, calloc'd and set up on
     * first use, so a pool sized for a peak holds no memory for
     * connections that never came (824 KiB untouched at the default 1000
     * in a worker that never had more than a few at once). */
    sl_conn_t *conns; /* owned */
    uint32_t nconns;
    uint32_t nfresh;      /* conns[nfresh..] never used: still zero pages */
    sl_conn_t *free_list; /* entries given back, taken before fresh ones */
    sl_conn_t active;     /* sentinel of the active list */
    uint32_t nactive;
    /* Idle keep-alive connections (a response done, no byte of the next
     * request yet), newest at the head: with the pool used up, a new
     * connection closes the one at the tail (the longest idle) and takes
     * its slot. Links: sl_conn_t.idle_next / idle_prev. */
    sl_conn_t *idle_head;
    sl_conn_t *idle_tail;
    uint32_t nidle;
    bool evict_told; /* the first eviction was logged */
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
    sl_bufcache_t bufs;   /* owned: freed connection buffers (bufcache.h) */
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

/* Loop side: ev_io_start(W) on P's loop. Every ev_io starts here, so that
 * sl_pump_settled() knows of it (stopping needs no such care: epoll may
 * report a stopped fd once more, which libev ignores). */
void sl_pump_io_start(sl_pump_t *p, ev_io *w);

/* Free what init allocated. */
void sl_pump_destroy(sl_pump_t *p);

/* Hand C's request to the executor (queued until the end of the pass). */
void sl_pump_submit(sl_pump_t *p, sl_conn_t *c);

/* Loop side: queue a ticket of KIND for C, sent with this pass's batch. */
void sl_pump_queue_ticket(sl_pump_t *p, sl_conn_t *c, uint32_t kind);

/* Executor side: C has something for the loop. Thread-safe. */
void sl_pump_notify(sl_pump_t *p, sl_conn_t *c);

/* Loop side: C is done with its request (served count, its metrics:
 * method and status class, duration, queue time; drain step). */
void sl_pump_request_done(sl_pump_t *p, sl_conn_t *c);

/* Accept every connection waiting in the listen queues (drain: whoever
 * closes a listener last would otherwise reset them). */
void sl_pump_accept_pending(sl_pump_t *p);

/* Stop accepting and close this worker's listeners (drain). */
void sl_pump_stop_listening(sl_pump_t *p);

/* Loop side: return C to the pool. */
void sl_pump_release(sl_pump_t *p, sl_conn_t *c);

/* Loop side: C has answered a request and kept the connection, and no
 * byte of the next request is here: it may be evicted, the longest idle
 * first, when a new connection finds the pool used up. No-op when C is
 * already on the idle list. */
void sl_pump_idle_add(sl_pump_t *p, sl_conn_t *c);

/* Loop side: C is no longer idle (bytes came, or it closes). No-op when
 * it is not on the idle list. */
void sl_pump_idle_remove(sl_pump_t *p, sl_conn_t *c);

#endif
