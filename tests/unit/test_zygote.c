/* test_zygote.c - check suite for supervisor/zygote.c, the supervisor's
 * side of --preload's zygotes.
 *
 * sl_zygotes_start() starts a real process: this test program, which
 * main() turns into a fake zygote playing a script on its channel
 * (SLUICE_ZYGOTE_FD; see fake_main()). The test is the supervisor: it
 * runs the loop with h_loop_until() for READY, and calls
 * sl_zygotes_fork() and sl_zygotes_reaped() as maintain.c and
 * supervisor.c do. What a real zygote does (the import, the double fork)
 * is tests/e2e/test_preload.py's.
 */
#include "config.h"

#include <check.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "common/ctl.h"
#include "common/options.h"
#include "common/zygote.h"
#include "supervisor/zygote.h"
#include "tests/unit/harness_base.h"

/* ---- the fake zygote -------------------------------------------------- */

static void fake_send(int fd, uint32_t type, int id, int pid, int err)
{
    sl_zygote_msg_t m = {.type = type, .worker_id = id, .pid = pid, .err = err};
    ssize_t n = send(fd, &m, sizeof(m), MSG_NOSIGNAL);

    (void)n;
}

/* One FORK: its worker id, the first descriptor that came with it in
 * *PASSED (-1: none) and in *LISTENING how many of the others are
 * listening sockets; -1 at EOF. */
static int fake_recv(int fd, int *passed, uint32_t *listening)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int) * 8)];
    } ctl;
    sl_zygote_msg_t m;
    struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = ctl.buf,
                         .msg_controllen = sizeof(ctl.buf)};

    *passed = -1;
    *listening = 0;
    if (recvmsg(fd, &msg, 0) != (ssize_t)sizeof(m) || m.type != SL_ZYGOTE_FORK)
        return -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (c != NULL && c->cmsg_type == SCM_RIGHTS) {
        int fds[8], n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        memcpy(fds, CMSG_DATA(c), sizeof(int) * (size_t)n);
        *passed = fds[0];
        for (int i = 1; i < n; i++) {
            int on = 0;
            socklen_t len = sizeof(on);
            getsockopt(fds[i], SOL_SOCKET, SO_ACCEPTCONN, &on, &len);
            *listening += on != 0;
            close(fds[i]);
        }
    }
    return m.worker_id;
}

/* SCRIPT: "ready" then answer each FORK as "fork" (a child that sends
 * READY on the passed channel, with the listening sockets that came along
 * counted in .active, and waits for its EOF), "fail" (FAILED,
 * EAGAIN), "silent" (no answer) or "wrong" (FORKED for another worker);
 * "junk": bytes that are not READY; "appload": exit SL_EXIT_APPLOAD at
 * once. */
static int fake_main(const char *script)
{
    const char *env = getenv("SLUICE_ZYGOTE_FD");
    int fd = env ? atoi(env) : -1, passed, id;
    uint32_t listening;
    char buf[1];

    if (strcmp(script, "appload") == 0)
        return SL_EXIT_APPLOAD;
    if (strcmp(script, "junk") == 0) {
        ssize_t n = send(fd, "abc", 3, MSG_NOSIGNAL);
        (void)n;
        for (;;)
            pause();
    }
    fake_send(fd, SL_ZYGOTE_READY, 0, (int)getpid(), 0);
    while ((id = fake_recv(fd, &passed, &listening)) >= 0) {
        if (strcmp(script, "fail") == 0) {
            fake_send(fd, SL_ZYGOTE_FAILED, id, 0, EAGAIN);
        } else if (strcmp(script, "silent") == 0) {
            continue;
        } else if (strcmp(script, "wrong") == 0) {
            fake_send(fd, SL_ZYGOTE_FORKED, id + 1, (int)getpid(), 0);
        } else {
            pid_t pid = fork();
            if (pid == 0) {
                sl_ctl_msg_t m = {.type = SL_CTL_READY,
                                  .pid = (uint32_t)getpid(),
                                  .active = listening};
                sl_ctl_send(passed, &m);
                ssize_t n = read(passed, buf, 1); /* EOF: the test is done */
                _exit(n == 0 ? 0 : 1);
            }
            fake_send(fd, SL_ZYGOTE_FORKED, id, (int)pid, 0);
        }
        if (passed >= 0)
            close(passed);
    }
    return 0;
}

/* ---- the supervisor's side -------------------------------------------- */

static sl_zygotes_t zs;
static struct ev_loop *loop;
static char self_exe[PATH_MAX];

static void setup(void)
{
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);

    ck_assert_int_gt(n, 0);
    self_exe[n] = '\0';
    loop = ev_loop_new(EVFLAG_AUTO);
    ck_assert_ptr_nonnull(loop);
    sl_zygotes_init(&zs, loop);
    h_log_to_file();
}

static sl_zygote_t *start(const char *script, unsigned gen)
{
    static char arg[64];
    char *argv[] = {"test_zygote", "--fake-zygote", arg, NULL};
    int fds[1] = {h_listen()};

    snprintf(arg, sizeof(arg), "%s", script);
    sl_zygote_t *z = sl_zygotes_start(&zs, self_exe, argv, fds, 1, gen, -1);
    close(fds[0]);
    ck_assert_ptr_nonnull(z);
    h_track(z->pid);
    return z;
}

static bool is_ready(void *arg)
{
    return ((sl_zygote_t *)arg)->ready;
}

static bool channel_closed(void *arg)
{
    return ((sl_zygote_t *)arg)->fd == -1;
}

/* Reap Z (it must end within 10 s) through sl_zygotes_reaped(): its
 * status, with *END filled. */
static int reap(sl_zygote_t *z, sl_zygote_end_t *end)
{
    pid_t pid = z->pid;
    int status;

    ck_assert_msg(h_wait_exit(pid, &status, 10), "zygote %ld still runs",
                  (long)pid);
    ck_assert(sl_zygotes_reaped(&zs, pid, status, end));
    ck_assert_int_eq(z->pid, 0);
    ck_assert_int_eq(z->fd, -1);
    return status;
}

START_TEST(test_ready_fork_and_stop)
{
    sl_zygote_t *z = start("fork", 3);
    sl_zygote_end_t end;
    int pair[2];
    sl_ctl_msg_t m;

    ck_assert(!z->ready);
    ck_assert_ptr_eq(sl_zygotes_find(&zs, 3), z);
    ck_assert_ptr_null(sl_zygotes_find(&zs, 4));
    ck_assert_int_eq(sl_zygotes_count(&zs), 1);
    /* not READY yet: no fork asked */
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair), 0);
    ck_assert_int_eq(sl_zygotes_fork(&zs, z, 1, pair[1], NULL, 0), -1);
    ck_assert(h_loop_until(loop, is_ready, z));
    ck_assert(strstr(h_log_text(), "is ready") != NULL);

    /* the worker's channel end and the listeners went with the FORK, and
     * the pid came back */
    int lfds[2] = {h_listen(), h_listen()};
    pid_t pid = sl_zygotes_fork(&zs, z, 7, pair[1], lfds, 2);
    close(lfds[0]);
    close(lfds[1]);
    ck_assert_int_gt(pid, 0);
    h_track(pid);
    close(pair[1]);
    struct pollfd pfd = {.fd = pair[0], .events = POLLIN};
    ck_assert_int_eq(poll(&pfd, 1, 10000), 1);
    ck_assert_int_eq(sl_ctl_recv(pair[0], &m), 1);
    ck_assert_int_eq(m.type, SL_CTL_READY);
    ck_assert_int_eq((pid_t)m.pid, pid);
    ck_assert_uint_eq(m.active, 2);
    close(pair[0]);

    /* TERM: expected, and a stopped zygote is no generation's any more */
    sl_zygotes_kill_all(&zs, SIGTERM);
    ck_assert(z->asked);
    ck_assert_ptr_null(sl_zygotes_find(&zs, 3));
    int status = reap(z, &end);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    ck_assert(end.asked && end.ready);
    ck_assert_uint_eq(end.gen, 3);
    ck_assert_int_eq(sl_zygotes_count(&zs), 0);
    ck_assert(!sl_zygotes_reaped(&zs, pid, 0, &end)); /* not a zygote */
}
END_TEST

START_TEST(test_fork_failed)
{
    sl_zygote_t *z = start("fail", 1);
    int pair[2];
    sl_zygote_end_t end;

    ck_assert(h_loop_until(loop, is_ready, z));
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair), 0);
    ck_assert_int_eq(sl_zygotes_fork(&zs, z, 2, pair[1], NULL, 0), -1);
    ck_assert_msg(strstr(h_log_text(), "could not fork worker 2") != NULL, "%s",
                  h_log_text());
    ck_assert(!z->asked); /* a failed fork leaves the zygote serving */
    close(pair[0]);
    close(pair[1]);
    sl_zygotes_kill(z, SIGKILL);
    reap(z, &end);
}
END_TEST

START_TEST(test_silent_or_wrong_zygote_is_killed)
{
    static const char *const scripts[] = {"silent", "wrong"};
    int pair[2];
    sl_zygote_end_t end;

    for (int i = 0; i < 2; i++) {
        sl_zygote_t *z = start(scripts[i], 1);
        ck_assert(h_loop_until(loop, is_ready, z));
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair), 0);
        double t0 = h_now();
        ck_assert_int_eq(sl_zygotes_fork(&zs, z, 2, pair[1], NULL, 0), -1);
        if (i == 0)
            ck_assert_double_ge(h_now() - t0, SL_ZYGOTE_ANSWER_WAIT - 0.1);
        ck_assert(z->asked);
        int status = reap(z, &end);
        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        close(pair[0]);
        close(pair[1]);
    }
    ck_assert(strstr(h_log_text(), "did not answer for worker 2") != NULL);
}
END_TEST

START_TEST(test_junk_is_killed)
{
    sl_zygote_t *z = start("junk", 1);
    sl_zygote_end_t end;

    ck_assert(h_loop_until(loop, channel_closed, z));
    ck_assert(!z->ready && z->asked);
    int status = reap(z, &end);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    ck_assert(strstr(h_log_text(), "that are not READY") != NULL);
}
END_TEST

START_TEST(test_failed_load)
{
    sl_zygote_t *z = start("appload", 5);
    sl_zygote_end_t end;

    ck_assert(h_loop_until(loop, channel_closed, z)); /* EOF */
    int status = reap(z, &end);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == SL_EXIT_APPLOAD);
    ck_assert(!end.ready && !end.asked);
    ck_assert_uint_eq(end.gen, 5);
    ck_assert(strstr(h_log_text(), "the application failed to load") != NULL);
}
END_TEST

static Suite *zygote_suite(void)
{
    Suite *s = suite_create("zygote");
    TCase *tc = tcase_create("zygotes");

    tcase_set_timeout(tc, 20);
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_ready_fork_and_stop);
    tcase_add_test(tc, test_fork_failed);
    tcase_add_test(tc, test_silent_or_wrong_zygote_is_killed);
    tcase_add_test(tc, test_junk_is_killed);
    tcase_add_test(tc, test_failed_load);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "--fake-zygote") == 0)
        return fake_main(argv[2]);

    SRunner *sr = srunner_create(zygote_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
