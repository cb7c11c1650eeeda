/* upgrade.h - USR2: replace the supervisor binary without closing a socket.
 *
 * The old supervisor forks and execs the binary at its own path (perhaps a
 * newer build by now) with the listening sockets and one end of a pipe. The
 * new supervisor starts its own workers; once all of them are READY it
 * writes the pidfile, tells systemd MAINPID=, and writes one byte on the
 * pipe. Only then does the old supervisor drain its workers and exit. If
 * the new one dies first, or closes the pipe without that byte, the upgrade
 * failed and the old supervisor simply goes on serving.
 */
#ifndef SL_UPGRADE_H
#define SL_UPGRADE_H

#include <ev.h>
#include <stdbool.h>
#include <sys/types.h>

#include "supervisor/listen.h"

/* Called once per upgrade attempt: READY true when the new supervisor PID
 * has taken over, false with WHY when it failed. */
typedef void sl_upgrade_cb(void *ctx, pid_t pid, bool ready, const char *why);

typedef struct {
    /* old side */
    pid_t child;          /* the new supervisor until it is done, else 0 */
    bool took_over;       /* the child said it is ready */
    int pipe_fd;          /* owned: read end of the child's pipe, or -1 */
    ev_io pipe_watcher;   /* data points to this struct */
    struct ev_loop *loop; /* borrowed */
    sl_upgrade_cb *done;
    void *ctx; /* borrowed: passed to done */
    /* new side */
    int parent_fd; /* owned: write end from the old supervisor, or -1 */
    pid_t parent;  /* the old supervisor, 0 when not started by one */
} sl_upgrade_t;

/* Set up U on LOOP; DONE(CTX, ...) reports each attempt. Reads (and
 * removes) SLUICE_UPGRADE_PIPE and SLUICE_UPGRADE_FROM, which make this
 * process a new supervisor taking over from an old one. */
void sl_upgrade_init(sl_upgrade_t *u, struct ev_loop *loop, sl_upgrade_cb *done,
                     void *ctx);

/* True when this process was started by USR2 and has not taken over yet. */
bool sl_upgrade_is_successor(const sl_upgrade_t *u);

/* The old supervisor's pid when this one was started by USR2, else 0. */
pid_t sl_upgrade_parent(const sl_upgrade_t *u);

/* Start a new supervisor: EXE with ARGV, the listeners LS[0..NLS) and
 * WORKERS as its worker count. 0, or -1 after logging why (an upgrade
 * already running, pipe2() or fork() failed). */
int sl_upgrade_start(sl_upgrade_t *u, const char *exe, char **argv,
                     const sl_listener_t *ls, int nls, int workers);

/* New side: every worker is ready; tell the old supervisor to go. */
void sl_upgrade_took_over(sl_upgrade_t *u);

/* True when PID is the new supervisor; its exit is then handled (a failure
 * is reported through the callback). */
bool sl_upgrade_reaped(sl_upgrade_t *u, pid_t pid, int status);

/* True while a new supervisor started by this one is alive and has not
 * taken over. */
bool sl_upgrade_running(const sl_upgrade_t *u);

/* Send SIG to the new supervisor while sl_upgrade_running(). */
void sl_upgrade_signal(const sl_upgrade_t *u, int sig);

#endif
