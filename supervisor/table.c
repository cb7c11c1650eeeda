/* table.c - the worker slots and their control channels (see table.h).
 *
 * Each worker gets one socketpair(AF_UNIX, SOCK_SEQPACKET); the supervisor
 * keeps its end non-blocking and close-on-exec and reads it from an ev_io
 * embedded in the slot, so watching a worker never allocates. EOF closes
 * the channel but frees nothing: the slot lives until the process is
 * reaped, because only the exit status says what happened.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "supervisor/spawn.h"
#include "supervisor/table.h"

static bool goes_first(const sl_worker_t *a, const sl_worker_t *b);
static void on_ctl(struct ev_loop *loop, ev_io *io, int revents);
static void send_keys(const sl_table_t *t, const sl_worker_t *w);
static void close_ctl(sl_table_t *t, sl_worker_t *w);

int sl_table_init(sl_table_t *t, struct ev_loop *loop, sl_table_msg_cb *on_msg,
                  void *ctx)
{
    memset(t, 0, sizeof(*t));
    t->loop = loop;
    t->on_msg = on_msg;
    t->ctx = ctx;
    t->metrics_fd = -1;
    /* all zero is a FREE slot; its id and ctl_fd are set when it is taken */
    t->slots = calloc(SL_TABLE_SLOTS, sizeof(*t->slots));
    if (t->slots == NULL) {
        sl_error("out of memory for %d worker slots", SL_TABLE_SLOTS);
        return -1;
    }
    return 0;
}

sl_worker_t *sl_table_spawn(sl_table_t *t, const char *exe, char **argv,
                            const int *fds, int nfds, unsigned gen,
                            sl_zygotes_t *zs, sl_zygote_t *zygote)
{
    sl_worker_t *w = NULL;
    int pair[2];

    for (int i = 0; i < SL_TABLE_SLOTS && w == NULL; i++) {
        if (t->slots[i].state == SL_WORKER_FREE) {
            w = &t->slots[i];
        }
    }
    if (w == NULL) {
        sl_error("cannot start a worker: all %d slots are in use",
                 SL_TABLE_SLOTS);
        return NULL;
    }
    w->id = (int)(w - t->slots) + 1;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == -1) {
        sl_log_errno(SL_LOG_ERROR, "socketpair() failed for worker %d", w->id);
        return NULL;
    }
    /* the boot time counts from here (a zygote's fork takes ~1 ms) */
    ev_now_update(t->loop);
    pid_t pid = zygote != NULL ? sl_zygotes_fork(zs, zygote, w->id, pair[1])
                               : sl_spawn_worker(exe, argv, fds, nfds, w->id,
                                                 pair[1], t->metrics_fd);
    close(pair[1]);
    if (pid == -1) {
        close(pair[0]);
        return NULL;
    }
    if (fcntl(pair[0], F_SETFL, O_NONBLOCK) == -1) {
        sl_log_errno(SL_LOG_WARNING,
                     "fcntl(O_NONBLOCK) failed on worker %d's control socket",
                     w->id);
    }

    int id = (int)(w - t->slots) + 1;
    *w = (sl_worker_t){.state = SL_WORKER_BOOTING,
                       .id = id,
                       .pid = pid,
                       .gen = gen,
                       .ctl_fd = pair[0]};
    w->started = w->heartbeat = ev_now(t->loop);
    ev_io_init(&w->ctl_watcher, on_ctl, w->ctl_fd, EV_READ);
    w->ctl_watcher.data = t;
    ev_io_start(t->loop, &w->ctl_watcher);
    if (id > t->high) {
        t->high = id;
    }
    send_keys(t, w);
    return w;
}

sl_worker_t *sl_table_find(sl_table_t *t, pid_t pid)
{
    for (int i = 0; i < t->high; i++) {
        if (t->slots[i].state != SL_WORKER_FREE && t->slots[i].pid == pid) {
            return &t->slots[i];
        }
    }
    return NULL;
}

int sl_table_kill(const sl_worker_t *w, int sig)
{
    if (kill(w->pid, sig) == -1) {
        if (errno != ESRCH) {
            sl_log_errno(SL_LOG_ERROR, "kill(%ld, %s) failed on worker %d",
                         (long)w->pid, strsignal(sig), w->id);
        }
        return -1;
    }
    return 0;
}

void sl_table_stop(sl_worker_t *w, int sig, ev_tstamp kill_at)
{
    if (sig != 0) {
        sl_table_kill(w, sig);
        w->stop_signal = sig;
    }
    w->state = SL_WORKER_STOPPING;
    w->kill_at = kill_at;
}

void sl_table_release(sl_table_t *t, sl_worker_t *w)
{
    int id = w->id;

    close_ctl(t, w);
    *w = (sl_worker_t){.state = SL_WORKER_FREE, .id = id, .ctl_fd = -1};
    while (t->high > 0 && t->slots[t->high - 1].state == SL_WORKER_FREE) {
        t->high--;
    }
}

bool sl_worker_live(const sl_worker_t *w)
{
    return w->state == SL_WORKER_BOOTING || w->state == SL_WORKER_READY;
}

bool sl_worker_leaving(const sl_worker_t *w)
{
    return w->state == SL_WORKER_STOPPING || w->own_drain > 0;
}

int sl_table_count(const sl_table_t *t)
{
    int n = 0;

    for (int i = 0; i < t->high; i++) {
        n += t->slots[i].state != SL_WORKER_FREE;
    }
    return n;
}

bool sl_worker_outdated(const sl_worker_t *w, unsigned gen_min)
{
    return w->retire || w->gen < gen_min;
}

static void send_keys(const sl_table_t *t, const sl_worker_t *w)
{
    if (t->keys.nticket_keys > 0 && w->ctl_fd >= 0 &&
        sl_ctl_send(w->ctl_fd, &t->keys) < 0) {
        sl_log_errno(SL_LOG_DEBUG, "worker %d: sending ticket keys failed",
                     w->id);
    }
}

void sl_table_set_keys(sl_table_t *t, const sl_ctl_msg_t *keys)
{
    t->keys = *keys;
    for (int i = 0; i < t->high; i++) {
        if (t->slots[i].state != SL_WORKER_FREE) {
            send_keys(t, &t->slots[i]);
        }
    }
}

void sl_table_send_restart(sl_worker_t *w)
{
    sl_ctl_msg_t m = {.type = SL_CTL_RESTART};

    if (w->ctl_fd >= 0 && sl_ctl_send(w->ctl_fd, &m) < 0) {
        sl_log_errno(SL_LOG_DEBUG, "worker %d: sending RESTART failed", w->id);
    }
}

sl_table_counts_t sl_table_counts(const sl_table_t *t, unsigned gen_min)
{
    sl_table_counts_t c = {0};

    for (int i = 0; i < t->high; i++) {
        const sl_worker_t *w = &t->slots[i];
        if (!sl_worker_live(w)) {
            continue;
        }
        bool ready = w->state == SL_WORKER_READY;
        bool old = sl_worker_outdated(w, gen_min);
        c.live++;
        c.ready += ready;
        c.current += !old;
        c.current_ready += !old && ready;
        c.outdated += old;
        c.older += w->gen < gen_min;
        c.websockets += w->last.websockets;
    }
    return c;
}

sl_worker_t *sl_table_pick_outdated(sl_table_t *t, unsigned gen_min)
{
    sl_worker_t *best = NULL;

    for (int i = 0; i < t->high; i++) {
        sl_worker_t *w = &t->slots[i];
        if (!sl_worker_live(w) || !sl_worker_outdated(w, gen_min)) {
            continue;
        }
        if (best == NULL || goes_first(w, best)) {
            best = w;
        }
    }
    return best;
}

sl_worker_t *sl_table_pick_excess(sl_table_t *t, unsigned gen_min)
{
    sl_worker_t *best = NULL;

    for (int i = 0; i < t->high; i++) {
        sl_worker_t *w = &t->slots[i];
        if (!sl_worker_live(w) || sl_worker_outdated(w, gen_min)) {
            continue;
        }
        if (best == NULL || goes_first(w, best)) {
            best = w;
        }
    }
    return best;
}

/* Of two workers to let go, whether A goes before B: booting before
 * ready, retiring before not, older generation before newer, older
 * process before younger. */
static bool goes_first(const sl_worker_t *a, const sl_worker_t *b)
{
    bool a_booting = a->state == SL_WORKER_BOOTING;
    bool b_booting = b->state == SL_WORKER_BOOTING;

    if (a_booting != b_booting) {
        return a_booting;
    }
    if (a->retire != b->retire) {
        return a->retire;
    }
    if (a->gen != b->gen) {
        return a->gen < b->gen;
    }
    return a->started < b->started;
}

/* Everything the worker has sent, until the channel would block. EOF means
 * the worker is gone or going; its exit is handled when it is reaped. */
static void on_ctl(struct ev_loop *loop, ev_io *io, int revents)
{
    sl_table_t *t = io->data;
    sl_worker_t *w =
        (sl_worker_t *)((char *)io - offsetof(sl_worker_t, ctl_watcher));
    sl_ctl_msg_t m;

    (void)loop;
    (void)revents;
    for (;;) {
        int rc = sl_ctl_recv(w->ctl_fd, &m);
        if (rc == 1) {
            t->on_msg(t->ctx, w, &m);
            continue;
        }
        if (rc == -1 && errno == EAGAIN) {
            return;
        }
        if (rc == -1 && errno == EPROTO) {
            sl_warn("worker %d (pid %ld) sent a malformed control message",
                    w->id, (long)w->pid);
            continue;
        }
        if (rc == -1) {
            sl_log_errno(SL_LOG_WARNING,
                         "recv() failed on worker %d's control socket", w->id);
        }
        close_ctl(t, w);
        return;
    }
}

static void close_ctl(sl_table_t *t, sl_worker_t *w)
{
    if (w->ctl_fd != -1) {
        ev_io_stop(t->loop, &w->ctl_watcher);
        close(w->ctl_fd);
        w->ctl_fd = -1;
    }
}
