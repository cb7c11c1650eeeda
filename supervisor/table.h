/* table.h - the supervisor's worker table: fixed slots, one per process.
 *
 * A slot holds one worker process from its fork until it is reaped, with
 * its control channel and what it last reported. The table knows nothing
 * of policy (how many, when to replace, when to kill): supervisor.c decides
 * and uses these functions to act.
 */
#ifndef SL_TABLE_H
#define SL_TABLE_H

#include <ev.h>
#include <stdbool.h>
#include <sys/types.h>

#include "common/ctl.h"
#include "supervisor/zygote.h"

#define SL_TABLE_SLOTS 1024 /* at most this many worker processes at once */

typedef enum {
    SL_WORKER_FREE = 0, /* no process */
    SL_WORKER_BOOTING,  /* spawned, not READY yet */
    SL_WORKER_READY,    /* serving */
    SL_WORKER_STOPPING, /* asked to exit, or let go draining on its own */
} sl_worker_state_t;

typedef struct {
    sl_worker_state_t state;
    int id;              /* slot index + 1: "worker 3" in logs and ps */
    pid_t pid;           /* 0 when FREE */
    unsigned gen;        /* generation: every rolling restart starts one */
    bool retire;         /* it sent RETIRE: replace it, then drain it */
    bool aborted;        /* sent SIGABRT for its Python tracebacks */
    bool killed;         /* sent SIGKILL */
    bool reopen_pending; /* USR1 came while it booted: send it at READY */
    int stop_signal;     /* STOPPING: the signal it was sent (0: none) */
    ev_tstamp started;   /* fork time */
    ev_tstamp ready_at;  /* READY time */
    ev_tstamp heartbeat; /* time of its last message */
    ev_tstamp kill_at;   /* STOPPING: SIGKILL when still alive after this */
    ev_tstamp own_drain; /* it said DRAINING unasked at this time (0: no) */
    sl_ctl_msg_t last;   /* the counters of its last message */
    int ctl_fd;          /* owned: our end of the control socketpair */
    ev_io ctl_watcher;   /* reads ctl_fd; data points to the table */
} sl_worker_t;

typedef struct sl_table sl_table_t;

/* Called for every control message; W stays valid for the call. */
typedef void sl_table_msg_cb(void *ctx, sl_worker_t *w, const sl_ctl_msg_t *m);

struct sl_table {
    /* owned, SL_TABLE_SLOTS of them: calloc'd, so the pages of slots never
     * used are never touched (the supervisor stays small) */
    sl_worker_t *slots;
    int high;             /* slots at and above this index are FREE */
    struct ev_loop *loop; /* borrowed */
    sl_table_msg_cb *on_msg;
    void *ctx;      /* borrowed: passed to on_msg */
    int metrics_fd; /* borrowed: the metrics segment for workers, -1: none */
    /* the TLS session ticket keys every worker gets, at its start and
     * when they change (SL_CTL_TICKET_KEYS); nticket_keys 0: none */
    sl_ctl_msg_t keys;
};

/* An empty table whose channels are watched on LOOP; ON_MSG(CTX, ...) gets
 * every message. 0, or -1 after logging (out of memory). */
int sl_table_init(sl_table_t *t, struct ev_loop *loop, sl_table_msg_cb *on_msg,
                  void *ctx);

/* Start a worker of generation GEN in the lowest free slot, with its
 * control channel: fork + exec of EXE with ARGV and the listeners
 * FDS[0..NFDS), or, with ZYGOTE (--preload), forked by that zygote of
 * GEN. Returns its slot (BOOTING), or NULL after logging why (no free
 * slot, socketpair() or fork() failed). */
sl_worker_t *sl_table_spawn(sl_table_t *t, const char *exe, char **argv,
                            const int *fds, int nfds, unsigned gen,
                            sl_zygotes_t *zs, sl_zygote_t *zygote);

/* The slot of process PID, or NULL. */
sl_worker_t *sl_table_find(sl_table_t *t, pid_t pid);

/* Send SIG to W, logging a failure other than ESRCH. 0 or -1. */
int sl_table_kill(const sl_worker_t *w, int sig);

/* Mark W STOPPING after sending it SIG (none when SIG is 0), with SIGKILL
 * due at KILL_AT. */
void sl_table_stop(sl_worker_t *w, int sig, ev_tstamp kill_at);

/* W was reaped: close its channel and free the slot. */
void sl_table_release(sl_table_t *t, sl_worker_t *w);

/* Booting or ready: a worker that counts toward the target. */
bool sl_worker_live(const sl_worker_t *w);

/* Going, whoever asked: STOPPING, or it said it drains on its own. */
bool sl_worker_leaving(const sl_worker_t *w);

/* Slots in use (any state but FREE). */
int sl_table_count(const sl_table_t *t);

/* Outdated: W asked to retire, or a rolling restart began after it was
 * spawned (its generation is older than GEN_MIN). It serves on until its
 * replacement is ready. */
bool sl_worker_outdated(const sl_worker_t *w, unsigned gen_min);

typedef struct {
    int live;            /* booting or ready */
    int ready;           /* ready, outdated or not: serving now */
    int current;         /* live and not outdated */
    int current_ready;   /* ready and not outdated */
    int outdated;        /* live and outdated */
    int older;           /* live, of a generation older than gen_min */
    unsigned websockets; /* open WebSockets, as last reported */
} sl_table_counts_t;

/* Tell W that the TERM about to follow replaces it (SL_CTL_RESTART);
 * never blocks, a full channel drops it. */
void sl_table_send_restart(sl_worker_t *w);

/* KEYS (an SL_CTL_TICKET_KEYS message) are the ticket keys from now on:
 * every live worker is sent them, and every worker spawned after. Never
 * blocks; a full channel drops them (that worker's tickets then resume
 * on it alone until the next rotation). */
void sl_table_set_keys(sl_table_t *t, const sl_ctl_msg_t *keys);

/* T's workers counted against GEN_MIN. */
sl_table_counts_t sl_table_counts(const sl_table_t *t, unsigned gen_min);

/* The live outdated worker to let go first: one still booting (nothing is
 * lost), then one that asked to retire, then the oldest generation, then
 * the oldest process. NULL when there is none. */
sl_worker_t *sl_table_pick_outdated(sl_table_t *t, unsigned gen_min);

/* The live up-to-date worker to let go first: one still booting, else the
 * oldest (gunicorn's TTOU does the same). NULL when there is none. */
sl_worker_t *sl_table_pick_excess(sl_table_t *t, unsigned gen_min);

#endif
