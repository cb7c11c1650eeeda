/* zygote.h - --preload: the channel between the supervisor and a zygote.
 *
 * With --preload the supervisor starts, per generation, one zygote: the
 * sluice-worker executable in zygote mode (SLUICE_ZYGOTE_FD set), which
 * loads the app as a worker would and then serves no request. It says
 * READY once, and then forks a worker each time the supervisor asks. The
 * supervisor itself stays free of Python.
 *
 * One socketpair(AF_UNIX, SOCK_SEQPACKET), one fixed-layout message a
 * packet:
 *   zygote -> supervisor  READY      the app is loaded, forks may come
 *   supervisor -> zygote  FORK       worker_id; the worker's end of its
 *                                    control socketpair rides along
 *                                    (SCM_RIGHTS)
 *   zygote -> supervisor  FORKED     worker_id and the new worker's pid
 *                         FAILED     worker_id and errno: no worker
 * The supervisor waits for the answer to a FORK (SL_ZYGOTE_ANSWER_WAIT at
 * most): one fork takes a millisecond or so, and the answer tells it the
 * pid before its loop can reap that pid.
 *
 * A worker is forked twice, so that it is the supervisor's child and not
 * the zygote's: the zygote forks a child that forks the worker and exits
 * at once, and the orphaned worker goes to the supervisor, which is a
 * child subreaper (PR_SET_CHILD_SUBREAPER). So the supervisor reaps its
 * workers as it does exec'd ones, and a zygote that dies leaves them
 * serving. Both ends are builds of one release: the version in
 * common/handoff.h covers this layout too.
 */
#ifndef SL_ZYGOTE_H
#define SL_ZYGOTE_H

#include <stdint.h>

enum {
    SL_ZYGOTE_READY = 1,
    SL_ZYGOTE_FORK = 2,
    SL_ZYGOTE_FORKED = 3,
    SL_ZYGOTE_FAILED = 4,
};

/* Seconds the supervisor waits for FORKED or FAILED. */
#define SL_ZYGOTE_ANSWER_WAIT 2.0

typedef struct {
    uint32_t type;     /* SL_ZYGOTE_* */
    int32_t worker_id; /* FORK, FORKED, FAILED */
    int32_t pid;       /* FORKED: the worker's; READY: the zygote's */
    int32_t err;       /* FAILED: an errno value */
    double load_time;  /* READY: seconds spent loading the app */
} sl_zygote_msg_t;

#endif
