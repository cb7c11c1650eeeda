/* test_sd.c - check suite for supervisor/sd.c: systemd's service protocol
 * as the environment and one datagram socket carry it.
 *
 * Each test owns the socket systemd would own (a datagram socket bound to a
 * path, or to an abstract name) and the variables systemd would set, and
 * checks what arrives or what is parsed. The suite runs its tests forked
 * (check's default), so the environment starts fresh in each.
 */
#include "config.h"

#include <check.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "supervisor/sd.h"

/* A datagram socket bound to PATH ('@' first: the abstract namespace),
 * with a receive timeout so a missing message fails instead of hanging. */
static int bind_notify(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct timeval tv = {.tv_sec = 2};
    size_t n = strlen(path);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    ck_assert_int_ge(fd, 0);
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@')
        sa.sun_path[0] = '\0';
    ck_assert_int_eq(
        bind(fd, (struct sockaddr *)&sa,
             (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)),
        0);
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)),
                     0);
    return fd;
}

static void expect_datagram(int fd, const char *want)
{
    char buf[256];
    ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);

    ck_assert_int_ge(n, 0);
    buf[n] = '\0';
    ck_assert_str_eq(buf, want);
}

START_TEST(test_notify_path)
{
    char path[64];
    int fd;

    snprintf(path, sizeof(path), "/tmp/sl-test-sd-%ld", (long)getpid());
    unlink(path);
    fd = bind_notify(path);
    setenv("NOTIFY_SOCKET", path, 1);
    ck_assert_int_eq(sl_sd_notify("READY=1\nSTATUS=up"), 1);
    expect_datagram(fd, "READY=1\nSTATUS=up");
    close(fd);
    unlink(path);
}
END_TEST

START_TEST(test_notify_abstract)
{
    char name[64];
    int fd;

    snprintf(name, sizeof(name), "@sl-test-sd-%ld", (long)getpid());
    fd = bind_notify(name);
    setenv("NOTIFY_SOCKET", name, 1);
    ck_assert_int_eq(sl_sd_notify("WATCHDOG=1"), 1);
    expect_datagram(fd, "WATCHDOG=1");
    close(fd);
}
END_TEST

START_TEST(test_notify_without_socket)
{
    unsetenv("NOTIFY_SOCKET");
    ck_assert_int_eq(sl_sd_notify("READY=1"), 0);
    setenv("NOTIFY_SOCKET", "relative/path", 1);
    ck_assert_int_eq(sl_sd_notify("READY=1"), -EINVAL);
    /* nobody bound there: the error comes back, nothing blocks */
    setenv("NOTIFY_SOCKET", "/tmp/sl-test-sd-nobody-here", 1);
    ck_assert_int_lt(sl_sd_notify("READY=1"), 0);
}
END_TEST

START_TEST(test_watchdog)
{
    char pid[16];
    uint64_t usec = 0;

    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    ck_assert_int_eq(sl_sd_watchdog(&usec), 0);
    setenv("WATCHDOG_USEC", "2000000", 1);
    ck_assert_int_eq(sl_sd_watchdog(&usec), 1);
    ck_assert(usec == 2000000);
    snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    setenv("WATCHDOG_PID", pid, 1);
    ck_assert_int_eq(sl_sd_watchdog(&usec), 1);
    setenv("WATCHDOG_PID", "1", 1); /* meant for another process */
    ck_assert_int_eq(sl_sd_watchdog(&usec), 0);
    unsetenv("WATCHDOG_PID");
    setenv("WATCHDOG_USEC", "2s", 1);
    ck_assert_int_eq(sl_sd_watchdog(&usec), -EINVAL);
    setenv("WATCHDOG_USEC", "0", 1);
    ck_assert_int_eq(sl_sd_watchdog(&usec), -EINVAL);
    /* the variables stay for a binary upgrade's new supervisor */
    ck_assert_ptr_nonnull(getenv("WATCHDOG_USEC"));
}
END_TEST

/* Put a listening socket at each of fds 3 and 4, as systemd would. The
 * check library may use those descriptors itself (its channel to the
 * forked test): SAVED keeps them, restore_fds() puts them back, and no
 * ck_assert may run in between. */
static int saved[2];

static bool pass_two_sockets(void)
{
    bool ok = true;

    for (int i = 0; i < 2; i++) {
        int want = SL_SD_LISTEN_FDS_START + i;
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        saved[i] = fcntl(want, F_DUPFD_CLOEXEC, 100);
        ok = ok && fd >= 0 && listen(fd, 1) == 0 && dup2(fd, want) == want;
        if (fd >= 0 && fd != want)
            close(fd);
    }
    return ok;
}

static void restore_fds(void)
{
    for (int i = 0; i < 2; i++) {
        int want = SL_SD_LISTEN_FDS_START + i;
        if (saved[i] >= 0) {
            dup2(saved[i], want);
            close(saved[i]);
        } else {
            close(want);
        }
    }
}

START_TEST(test_listen_fds)
{
    char pid[16], **names = NULL;
    bool passed, cloexec = true, listening = true;
    int n;

    snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    setenv("LISTEN_PID", pid, 1);
    setenv("LISTEN_FDS", "2", 1);
    setenv("LISTEN_FDNAMES", "web", 1);
    passed = pass_two_sockets();
    n = sl_sd_listen_fds(&names);
    for (int fd = 3; fd < 5; fd++) {
        cloexec = cloexec && (fcntl(fd, F_GETFD) & FD_CLOEXEC);
        listening = listening && sl_sd_is_listening_stream(fd);
    }
    restore_fds();
    ck_assert(passed);
    ck_assert_int_eq(n, 2);
    ck_assert(cloexec);
    ck_assert(listening);
    ck_assert_ptr_nonnull(names);
    ck_assert_str_eq(names[0], "web");
    ck_assert_str_eq(names[1], "unknown");
    ck_assert_ptr_null(names[2]);
    /* the workers must not take them for their own */
    ck_assert_ptr_null(getenv("LISTEN_PID"));
    ck_assert_ptr_null(getenv("LISTEN_FDS"));
    ck_assert_ptr_null(getenv("LISTEN_FDNAMES"));
    for (char **p = names; *p != NULL; p++)
        free(*p);
    free(names);
}
END_TEST

START_TEST(test_listen_fds_for_another_process)
{
    char **names = NULL;

    setenv("LISTEN_PID", "1", 1);
    setenv("LISTEN_FDS", "2", 1);
    ck_assert_int_eq(sl_sd_listen_fds(&names), 0);
    ck_assert_ptr_null(names);
    ck_assert_ptr_null(getenv("LISTEN_FDS"));
    unsetenv("LISTEN_PID");
    ck_assert_int_eq(sl_sd_listen_fds(&names), 0); /* none at all */
    setenv("LISTEN_PID", "x", 1);
    setenv("LISTEN_FDS", "1", 1);
    ck_assert_int_eq(sl_sd_listen_fds(&names), -EINVAL);
}
END_TEST

START_TEST(test_listen_fds_malformed_count)
{
    char pid[16], **names = NULL;

    snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    setenv("LISTEN_PID", pid, 1);
    setenv("LISTEN_FDS", "two", 1);
    ck_assert_int_eq(sl_sd_listen_fds(&names), -EINVAL);
    ck_assert_ptr_null(names);
}
END_TEST

START_TEST(test_is_listening_stream)
{
    int sv[2], l = socket(AF_INET6, SOCK_STREAM, 0);
    int d = socket(AF_INET, SOCK_DGRAM, 0);

    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    ck_assert(!sl_sd_is_listening_stream(l)); /* not yet listening */
    ck_assert_int_eq(listen(l, 1), 0);
    ck_assert(sl_sd_is_listening_stream(l));
    ck_assert(!sl_sd_is_listening_stream(d));
    ck_assert(!sl_sd_is_listening_stream(sv[0])); /* connected */
    ck_assert(!sl_sd_is_listening_stream(0) || isatty(0) == 0);
    ck_assert(!sl_sd_is_listening_stream(-1));
    close(l);
    close(d);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

static Suite *sd_suite(void)
{
    Suite *s = suite_create("sd");
    TCase *tc = tcase_create("protocol");

    tcase_add_test(tc, test_notify_path);
    tcase_add_test(tc, test_notify_abstract);
    tcase_add_test(tc, test_notify_without_socket);
    tcase_add_test(tc, test_watchdog);
    tcase_add_test(tc, test_listen_fds);
    tcase_add_test(tc, test_listen_fds_for_another_process);
    tcase_add_test(tc, test_listen_fds_malformed_count);
    tcase_add_test(tc, test_is_listening_stream);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(sd_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
