/* test_table.c - check suite for supervisor/table.c, the worker slots.
 *
 * The queries (counts, picks, predicates) are judged on slots filled in by
 * hand. sl_table_spawn() starts real processes: the worker binary is this
 * test program, and main() turns "--fake SCRIPT" into a fake worker that
 * plays SCRIPT on its control socket (see fake_main()). The test is the
 * supervisor's loop thread: it runs the table's loop with h_loop_until()
 * until the messages it waits for have reached on_msg.
 */
#include "config.h"

#include <check.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "supervisor/table.h"
#include "tests/unit/harness_base.h"

#define MAX_MSGS 64

/* ---- the fake worker -------------------------------------------------- */

static void fake_send(int ctl, uint32_t type, uint64_t served)
{
    sl_ctl_msg_t m = {
        .type = type, .pid = (uint32_t)getpid(), .served = served};

    sl_ctl_send(ctl, &m);
}

/* How many of the descriptors in SLUICE_LISTEN_FDS ("3,4") are open. */
static uint32_t open_listeners(void)
{
    const char *p = getenv("SLUICE_LISTEN_FDS");
    uint32_t n = 0;
    char *end;

    while (p != NULL && *p != '\0') {
        long fd = strtol(p, &end, 10);
        if (end == p)
            break;
        n += fcntl((int)fd, F_GETFD) != -1;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

/* READY, with the open listeners counted in .active; then, as HEARTBEATs
 * with served = the signal's number, every signal that comes; exit 0
 * after SIGTERM. */
static int fake_signals(int ctl)
{
    sl_ctl_msg_t ready = {.type = SL_CTL_READY,
                          .pid = (uint32_t)getpid(),
                          .active = open_listeners()};
    sigset_t all;

    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL);
    sl_ctl_send(ctl, &ready); /* listening for signals now */
    for (;;) {
        int sig = sigwaitinfo(&all, NULL);
        if (sig > 0)
            fake_send(ctl, SL_CTL_HEARTBEAT, (uint64_t)sig);
        if (sig == SIGTERM)
            return 0;
    }
}

/* SCRIPT, comma-separated: ready, beat:N (a HEARTBEAT, served N), junk (a
 * datagram too short to be a message), exit (0), wait (until a signal
 * ends it), signals (see fake_signals()). */
static int fake_main(char *script)
{
    const char *env = getenv("SLUICE_CTL_FD");
    int ctl = env ? atoi(env) : -1;

    for (char *tok = strtok(script, ","); tok; tok = strtok(NULL, ",")) {
        if (strcmp(tok, "ready") == 0) {
            fake_send(ctl, SL_CTL_READY, 0);
        } else if (strncmp(tok, "beat:", 5) == 0) {
            fake_send(ctl, SL_CTL_HEARTBEAT, strtoull(tok + 5, NULL, 10));
        } else if (strcmp(tok, "junk") == 0) {
            ssize_t n = send(ctl, "abc", 3, MSG_NOSIGNAL);
            (void)n;
        } else if (strcmp(tok, "exit") == 0) {
            return 0;
        } else if (strcmp(tok, "wait") == 0) {
            for (;;)
                pause();
        } else if (strcmp(tok, "signals") == 0) {
            return fake_signals(ctl);
        }
    }
    return 2;
}

/* ---- the supervisor's side -------------------------------------------- */

static sl_table_t table;
static struct ev_loop *loop;
static char self_exe[PATH_MAX];

typedef struct {
    sl_worker_t *w;
    sl_ctl_msg_t m;
} got_t;

static got_t msgs[MAX_MSGS];
static int nmsgs;

static void on_msg(void *ctx, sl_worker_t *w, const sl_ctl_msg_t *m)
{
    ck_assert_ptr_eq(ctx, &table);
    ck_assert_int_lt(nmsgs, MAX_MSGS);
    msgs[nmsgs++] = (got_t){w, *m};
}

static void setup(void)
{
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);

    ck_assert_int_gt(n, 0);
    self_exe[n] = '\0';
    loop = ev_loop_new(EVFLAG_AUTO);
    ck_assert_ptr_nonnull(loop);
    ck_assert_int_eq(sl_table_init(&table, loop, on_msg, &table), 0);
    nmsgs = 0;
    h_log_to_file();
}

/* Spawn a fake worker playing SCRIPT, generation GEN, on listeners FDS. */
static sl_worker_t *spawn(const char *script, unsigned gen, const int *fds,
                          int nfds)
{
    static char scripts[8][128];
    static int n;
    char *argv[] = {"test_table", "--fake", scripts[n % 8], NULL};

    snprintf(scripts[n % 8], sizeof(scripts[0]), "%s", script);
    n++;
    sl_worker_t *w =
        sl_table_spawn(&table, self_exe, argv, fds, nfds, gen, NULL, NULL);
    if (w != NULL)
        h_track(w->pid);
    return w;
}

static bool msgs_at_least(void *arg)
{
    return nmsgs >= *(int *)arg;
}

/* Run the loop until N messages in all have reached on_msg. */
static void wait_msgs(int n)
{
    ck_assert_msg(h_loop_until(loop, msgs_at_least, &n),
                  "%d control messages, waited for %d (log: %s)", nmsgs, n,
                  h_log_text());
}

static bool channel_closed(void *arg)
{
    return ((sl_worker_t *)arg)->ctl_fd == -1;
}

static int reap(const sl_worker_t *w)
{
    int status;

    ck_assert_msg(h_wait_exit(w->pid, &status, 10), "worker %d still runs",
                  w->id);
    return status;
}

/* End W (SIGKILL), reap it, release its slot. */
static void finish(sl_worker_t *w)
{
    ck_assert_int_eq(sl_table_kill(w, SIGKILL), 0);
    reap(w);
    sl_table_release(&table, w);
}

/* ---- spawn, messages, release ----------------------------------------- */

START_TEST(test_init_is_empty)
{
    for (int i = 0; i < SL_TABLE_SLOTS; i++) {
        ck_assert_int_eq(table.slots[i].state, SL_WORKER_FREE);
        ck_assert_int_eq(table.slots[i].pid, 0);
    }
    ck_assert_int_eq(table.high, 0);
    ck_assert_int_eq(sl_table_count(&table), 0);
    ck_assert_ptr_null(sl_table_find(&table, getpid()));
    ck_assert_ptr_null(sl_table_pick_outdated(&table, 5));
    ck_assert_ptr_null(sl_table_pick_excess(&table, 0));
    ck_assert_int_eq(sl_table_counts(&table, 0).live, 0);
}
END_TEST

/* The slot as spawned; its messages reach on_msg in order, with the slot;
 * EOF closes the channel but keeps the slot until the process is reaped
 * and released. The table itself acts on no message: that is policy. */
START_TEST(test_spawn_watch_release)
{
    ev_now_update(loop);
    ev_tstamp t0 = ev_now(loop);
    sl_worker_t *w = spawn("ready,beat:7,exit", 3, NULL, 0);

    ck_assert_ptr_eq(w, &table.slots[0]);
    ck_assert_int_eq(w->state, SL_WORKER_BOOTING);
    ck_assert_int_eq(w->id, 1);
    ck_assert_int_gt(w->pid, 0);
    ck_assert_uint_eq(w->gen, 3);
    ck_assert(w->started == t0 && w->heartbeat == t0);
    ck_assert_int_ge(w->ctl_fd, 0);
    ck_assert(fcntl(w->ctl_fd, F_GETFL) & O_NONBLOCK);
    ck_assert(fcntl(w->ctl_fd, F_GETFD) & FD_CLOEXEC);
    ck_assert_int_eq(table.high, 1);
    ck_assert_ptr_eq(sl_table_find(&table, w->pid), w);
    ck_assert_int_eq(sl_table_count(&table), 1);

    wait_msgs(2);
    ck_assert_ptr_eq(msgs[0].w, w);
    ck_assert_uint_eq(msgs[0].m.type, SL_CTL_READY);
    ck_assert_uint_eq(msgs[0].m.pid, (uint32_t)w->pid);
    ck_assert_uint_eq(msgs[1].m.type, SL_CTL_HEARTBEAT);
    ck_assert(msgs[1].m.served == 7);
    ck_assert_int_eq(w->state, SL_WORKER_BOOTING);

    ck_assert_msg(h_loop_until(loop, channel_closed, w), "no EOF seen");
    ck_assert_int_eq(w->state, SL_WORKER_BOOTING); /* until reaped */
    ck_assert_ptr_eq(sl_table_find(&table, w->pid), w);
    int status = reap(w);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    sl_table_release(&table, w);
    ck_assert_int_eq(w->state, SL_WORKER_FREE);
    ck_assert_int_eq(w->id, 1);
    ck_assert_int_eq(w->pid, 0);
    ck_assert_int_eq(w->ctl_fd, -1);
    ck_assert_int_eq(table.high, 0);
    ck_assert_int_eq(sl_table_count(&table), 0);
}
END_TEST

/* The lowest free slot is taken; high only drops past free slots. */
START_TEST(test_slots_reused_lowest_first)
{
    sl_worker_t *a = spawn("wait", 0, NULL, 0);
    sl_worker_t *b = spawn("wait", 0, NULL, 0);
    sl_worker_t *c = spawn("wait", 0, NULL, 0);

    ck_assert(a == &table.slots[0] && b == &table.slots[1] &&
              c == &table.slots[2]);
    ck_assert_int_eq(table.high, 3);
    finish(c);
    ck_assert_int_eq(table.high, 2);
    finish(a);
    ck_assert_int_eq(table.high, 2); /* b still in slot 2 */
    ck_assert_int_eq(sl_table_count(&table), 1);
    sl_worker_t *d = spawn("wait", 1, NULL, 0);
    ck_assert_ptr_eq(d, &table.slots[0]);
    ck_assert_int_eq(d->id, 1);
    ck_assert_ptr_null(sl_table_find(&table, 0)); /* free slots hold no pid */
    finish(b);
    ck_assert_int_eq(table.high, 1);
    finish(d);
    ck_assert_int_eq(table.high, 0);
}
END_TEST

/* A datagram that is not a message is logged and skipped; the channel
 * stays open for the next one. */
START_TEST(test_malformed_message_is_skipped)
{
    sl_worker_t *w = spawn("junk,ready,wait", 0, NULL, 0);

    wait_msgs(1);
    ck_assert_uint_eq(msgs[0].m.type, SL_CTL_READY);
    ck_assert_int_ne(w->ctl_fd, -1);
    ck_assert_ptr_nonnull(
        strstr(h_log_text(), "sent a malformed control message"));
    finish(w);
}
END_TEST

/* The listeners reach the worker, open (how is spawn.c's business, tested
 * in test_spawn; here, that the table passes them on). */
START_TEST(test_spawn_passes_listeners)
{
    int l[2] = {h_listen(), h_listen()};
    sl_worker_t *w = spawn("signals", 0, l, 2);

    wait_msgs(1); /* ready: alive and listening for signals */
    ck_assert_uint_eq(msgs[0].m.active, 2);
    ck_assert_int_eq(sl_table_kill(w, SIGTERM), 0);
    wait_msgs(2);
    ck_assert(msgs[1].m.served == SIGTERM);
    int status = reap(w);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    sl_table_release(&table, w);
    close(l[0]);
    close(l[1]);
}
END_TEST

/* ---- kill and stop ---------------------------------------------------- */

/* stop with no signal sends none: the marker sent after it (SIGWINCH,
 * numbered above SIGTERM so a pending TERM would be taken first) is the
 * first signal the worker sees. stop with a signal sends it. */
START_TEST(test_stop)
{
    sl_worker_t *w = spawn("signals", 0, NULL, 0);

    wait_msgs(1);
    sl_table_stop(w, 0, 5.0);
    ck_assert_int_eq(w->state, SL_WORKER_STOPPING);
    ck_assert(w->kill_at == 5.0);
    ck_assert_int_eq(w->stop_signal, 0);
    ck_assert_int_eq(sl_table_kill(w, SIGWINCH), 0);
    wait_msgs(2);
    ck_assert(msgs[1].m.served == SIGWINCH);

    sl_table_stop(w, SIGTERM, 9.0);
    ck_assert_int_eq(w->stop_signal, SIGTERM);
    ck_assert(w->kill_at == 9.0);
    wait_msgs(3);
    ck_assert(msgs[2].m.served == SIGTERM);
    ck_assert(!sl_worker_live(w));
    reap(w);
    sl_table_release(&table, w);
}
END_TEST

/* A process already gone: -1, quietly (the supervisor races exits all the
 * time). A signal that cannot be sent: -1, logged. */
START_TEST(test_kill_failures)
{
    sl_worker_t *w = spawn("wait", 0, NULL, 0);

    ck_assert_int_eq(sl_table_kill(w, 999), -1);
    ck_assert_ptr_nonnull(strstr(h_log_text(), "failed on worker 1"));
    ck_assert_int_eq(sl_table_kill(w, SIGKILL), 0);
    reap(w);
    int before = (int)strlen(h_log_text());
    ck_assert_int_eq(sl_table_kill(w, SIGTERM), -1); /* reaped: ESRCH */
    ck_assert_int_eq((int)strlen(h_log_text()), before);
    sl_table_release(&table, w);
}
END_TEST

/* ---- spawn failures --------------------------------------------------- */

START_TEST(test_no_free_slot)
{
    for (int i = 0; i < SL_TABLE_SLOTS; i++)
        table.slots[i].state = SL_WORKER_READY;
    table.high = SL_TABLE_SLOTS;
    ck_assert_ptr_null(spawn("exit", 0, NULL, 0));
    ck_assert_ptr_nonnull(strstr(h_log_text(), "all 1024 slots are in use"));
}
END_TEST

/* No descriptor left for the channel: NULL, logged, the slot still free
 * and no process started. */
START_TEST(test_socketpair_failure)
{
    int fd = open("/dev/null", O_RDONLY); /* the lowest free number */
    struct rlimit old, low;

    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = (struct rlimit){(rlim_t)fd, old.rlim_max};
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
    sl_worker_t *w = spawn("exit", 0, NULL, 0);
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
    ck_assert_ptr_null(w);
    ck_assert_ptr_nonnull(
        strstr(h_log_text(), "socketpair() failed for worker 1"));
    ck_assert_int_eq(table.slots[0].state, SL_WORKER_FREE);
    ck_assert_int_eq(table.high, 0);
    ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1); /* no child */
    ck_assert_int_eq(errno, ECHILD);
}
END_TEST

/* ---- queries ---------------------------------------------------------- */

START_TEST(test_table_counts_and_picks)
{
    ck_assert_int_eq(sl_table_init(&table, NULL, NULL, NULL), 0);
    sl_worker_t *s = table.slots;
    s[0] = (sl_worker_t){.state = SL_WORKER_READY, .gen = 0, .started = 1};
    s[1] = (sl_worker_t){.state = SL_WORKER_READY, .gen = 1, .started = 2};
    s[2] = (sl_worker_t){.state = SL_WORKER_BOOTING, .gen = 1, .started = 3};
    s[3] = (sl_worker_t){
        .state = SL_WORKER_READY, .gen = 0, .started = 5, .retire = true};
    s[4] = (sl_worker_t){.state = SL_WORKER_STOPPING, .gen = 0};
    table.high = 5;

    sl_table_counts_t c = sl_table_counts(&table, 1);
    ck_assert_int_eq(c.live, 4);
    ck_assert_int_eq(c.ready, 3);
    ck_assert_int_eq(c.current, 2);
    ck_assert_int_eq(c.current_ready, 1);
    ck_assert_int_eq(c.outdated, 2);
    ck_assert_int_eq(c.older, 2);
    ck_assert_int_eq(sl_table_count(&table), 5);
    /* retiring before merely old */
    ck_assert_ptr_eq(sl_table_pick_outdated(&table, 1), &s[3]);
    s[3].retire = false;
    ck_assert_ptr_eq(sl_table_pick_outdated(&table, 1), &s[0]); /* oldest */
    ck_assert_ptr_eq(sl_table_pick_excess(&table, 1), &s[2]);   /* booting */
    s[2].state = SL_WORKER_READY;
    ck_assert_ptr_eq(sl_table_pick_excess(&table, 1), &s[1]);
    ck_assert_ptr_null(sl_table_pick_outdated(&table, 0));
    c = sl_table_counts(&table, 0);
    ck_assert_int_eq(c.current_ready, 4);
    ck_assert_int_eq(c.older, 0);
}
END_TEST

/* Open WebSockets are counted from the live workers' last heartbeats; a
 * stopping worker's last count is stale and left out. */
START_TEST(test_counts_websockets)
{
    ck_assert_int_eq(sl_table_init(&table, NULL, NULL, NULL), 0);
    sl_worker_t *s = table.slots;
    s[0] = (sl_worker_t){.state = SL_WORKER_READY, .last.websockets = 3};
    s[1] = (sl_worker_t){.state = SL_WORKER_READY, .last.websockets = 4};
    s[2] = (sl_worker_t){.state = SL_WORKER_STOPPING, .last.websockets = 9};
    table.high = 3;
    ck_assert_uint_eq(sl_table_counts(&table, 0).websockets, 7);
}
END_TEST

/* The TERM of a replacement is announced on the control channel; a worker
 * without one is skipped. */
START_TEST(test_send_restart)
{
    sl_worker_t w = {.id = 1, .ctl_fd = -1};
    sl_ctl_msg_t m;
    int sv[2];

    sl_table_send_restart(&w); /* no channel: nothing, no crash */
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv),
                     0);
    w.ctl_fd = sv[0];
    sl_table_send_restart(&w);
    ck_assert_int_eq(sl_ctl_recv(sv[1], &m), 1);
    ck_assert_uint_eq(m.type, SL_CTL_RESTART);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

/* The order of letting go, one rule at a time: booting before ready,
 * then retiring, then the older generation, then the older process. */
START_TEST(test_pick_order)
{
    sl_worker_t *s = table.slots;

    s[0] = (sl_worker_t){.state = SL_WORKER_READY, .gen = 1, .started = 1};
    s[1] = (sl_worker_t){.state = SL_WORKER_READY, .gen = 0, .started = 9};
    s[2] = (sl_worker_t){.state = SL_WORKER_READY, .gen = 1, .started = 0.5};
    table.high = 3;
    /* generation first, whatever the age */
    ck_assert_ptr_eq(sl_table_pick_outdated(&table, 2), &s[1]);
    s[1].gen = 1;
    ck_assert_ptr_eq(sl_table_pick_outdated(&table, 2), &s[2]); /* oldest */
    s[0].retire = true; /* retiring beats older generation and age */
    s[2].gen = 0;
    ck_assert_ptr_eq(sl_table_pick_outdated(&table, 2), &s[0]);
    s[1].state = SL_WORKER_BOOTING; /* booting beats everything */
    ck_assert_ptr_eq(sl_table_pick_outdated(&table, 2), &s[1]);

    /* excess: only up-to-date workers, never a retiring one */
    ck_assert_ptr_null(sl_table_pick_excess(&table, 2));
    ck_assert_ptr_eq(sl_table_pick_excess(&table, 1), &s[1]); /* booting */
    s[1].state = SL_WORKER_READY;
    ck_assert_ptr_eq(sl_table_pick_excess(&table, 1), &s[1]);
    s[3] = (sl_worker_t){.state = SL_WORKER_READY, .gen = 1, .started = 2};
    table.high = 4;
    ck_assert_ptr_eq(sl_table_pick_excess(&table, 1), &s[3]); /* older */
    /* slots at and above high are not looked at */
    table.high = 3;
    ck_assert_ptr_eq(sl_table_pick_excess(&table, 1), &s[1]);
}
END_TEST

START_TEST(test_live_leaving_and_outdated)
{
    sl_worker_t w = {.state = SL_WORKER_BOOTING, .gen = 2};

    ck_assert(sl_worker_live(&w));
    ck_assert(!sl_worker_leaving(&w));
    w.state = SL_WORKER_READY;
    ck_assert(sl_worker_live(&w));
    ck_assert(!sl_worker_leaving(&w));
    w.own_drain = 5.0; /* it said it drains: live until let go */
    ck_assert(sl_worker_live(&w));
    ck_assert(sl_worker_leaving(&w));
    w.own_drain = 0;
    w.state = SL_WORKER_STOPPING;
    ck_assert(!sl_worker_live(&w));
    ck_assert(sl_worker_leaving(&w));
    w.state = SL_WORKER_FREE;
    ck_assert(!sl_worker_live(&w));
    ck_assert(!sl_worker_leaving(&w));

    ck_assert(!sl_worker_outdated(&w, 2));
    ck_assert(sl_worker_outdated(&w, 3));
    w.retire = true;
    ck_assert(sl_worker_outdated(&w, 0));
}
END_TEST

static Suite *table_suite(void)
{
    Suite *s = suite_create("table");
    TCase *procs = tcase_create("processes");
    TCase *fail = tcase_create("spawn failures");
    TCase *query = tcase_create("queries");
    TCase *all[] = {procs, fail, query};

    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        tcase_set_timeout(all[i], 30);
        tcase_add_unchecked_fixture(all[i], h_dir_make, h_dir_remove);
        tcase_add_checked_fixture(all[i], setup, NULL);
        suite_add_tcase(s, all[i]);
    }
    tcase_add_test(procs, test_init_is_empty);
    tcase_add_test(procs, test_spawn_watch_release);
    tcase_add_test(procs, test_slots_reused_lowest_first);
    tcase_add_test(procs, test_malformed_message_is_skipped);
    tcase_add_test(procs, test_spawn_passes_listeners);
    tcase_add_test(procs, test_stop);
    tcase_add_test(procs, test_kill_failures);
    tcase_add_test(fail, test_no_free_slot);
    tcase_add_test(fail, test_socketpair_failure);
    tcase_add_test(query, test_table_counts_and_picks);
    tcase_add_test(query, test_pick_order);
    tcase_add_test(query, test_counts_websockets);
    tcase_add_test(query, test_send_restart);
    tcase_add_test(query, test_live_leaving_and_outdated);
    return s;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "--fake") == 0)
        return fake_main(argv[2]);

    SRunner *sr = srunner_create(table_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
