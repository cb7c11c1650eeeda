/* zygote.h - --preload: the supervisor's zygotes, one per generation.
 *
 * A zygote (worker/zygote.h) is a sluice-worker that has loaded the app
 * and forks the workers of its generation when asked (the channel:
 * common/zygote.h). This module starts them, reads their READY, asks
 * for forks and forgets them when they are reaped. When to start one,
 * and what a death means, is the supervisor's policy (maintain.c).
 */
#ifndef SL_SUPERVISOR_ZYGOTE_H
#define SL_SUPERVISOR_ZYGOTE_H

#include <ev.h>
#include <stdbool.h>
#include <sys/types.h>

#define SL_ZYGOTES 8 /* zygotes alive at once, at most */

typedef struct {
    pid_t pid;         /* 0: the slot is free */
    int fd;            /* owned: our end of its channel; -1 once at EOF */
    unsigned gen;      /* the generation whose workers it forks */
    bool ready;        /* it said READY */
    bool asked;        /* sent a signal: its end is expected */
    ev_tstamp started; /* when it was spawned */
    ev_io io;          /* reads fd while it has not said READY */
} sl_zygote_t;

typedef struct {
    sl_zygote_t z[SL_ZYGOTES];
    struct ev_loop *loop; /* borrowed */
} sl_zygotes_t;

/* What sl_zygotes_reaped() tells of the zygote that ended. */
typedef struct {
    unsigned gen;
    bool ready;    /* it had said READY */
    bool asked;    /* we had sent it a signal */
    ev_tstamp age; /* seconds it lived */
} sl_zygote_end_t;

/* No zygote yet; their channels are watched on LOOP. */
void sl_zygotes_init(sl_zygotes_t *zs, struct ev_loop *loop);

/* The live zygote of generation GEN (not sent away), or NULL. */
sl_zygote_t *sl_zygotes_find(sl_zygotes_t *zs, unsigned gen);

/* Fork + exec a zygote of generation GEN: EXE with ARGV, the listeners
 * FDS[0..NFDS) and METRICS_FD (or -1) inherited, as a worker would get
 * them. Its slot, or NULL after logging why. */
sl_zygote_t *sl_zygotes_start(sl_zygotes_t *zs, const char *exe, char **argv,
                              const int *fds, int nfds, unsigned gen,
                              int metrics_fd);

/* Ask Z for worker WORKER_ID, whose control channel end CTL_FD goes with
 * the request, and wait (SL_ZYGOTE_ANSWER_WAIT at most) for its pid.
 * Returns the pid, or -1 after logging; a zygote that does not answer is
 * sent SIGKILL. */
pid_t sl_zygotes_fork(sl_zygotes_t *zs, sl_zygote_t *z, int worker_id,
                      int ctl_fd);

/* Send SIG to Z and expect its end. */
void sl_zygotes_kill(sl_zygote_t *z, int sig);

/* Send SIG to every zygote. */
void sl_zygotes_kill_all(sl_zygotes_t *zs, int sig);

/* PID was reaped: when it was a zygote, true, its slot freed, the line
 * logged and *END filled; else false. */
bool sl_zygotes_reaped(sl_zygotes_t *zs, pid_t pid, int status,
                       sl_zygote_end_t *end);

/* Zygotes alive. */
int sl_zygotes_count(const sl_zygotes_t *zs);

#endif
