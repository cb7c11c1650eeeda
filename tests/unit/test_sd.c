/* test_sd.c - check suite for supervisor/sd.c: systemd's service protocol
 * as the environment and one datagram socket carry it.
 *
 * Each test owns the socket systemd would own (harness_base.h's notify
 * socket, at a path or an abstract name) and the variables systemd would
 * set, and
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
#include "tests/unit/harness_base.h"

static h_notify_t nt; /* the socket systemd would own */

START_TEST(test_notify_path)
{
    h_notify_open(&nt, false);
    ck_assert_int_eq(sl_sd_notify("READY=1\nSTATUS=up"), 1);
    ck_assert_int_eq(h_notify_find(&nt, "READY=1", 0), 0);
    ck_assert_str_eq(nt.text[0], "READY=1\nSTATUS=up");
    h_notify_close(&nt);
}
END_TEST

START_TEST(test_notify_abstract)
{
    h_notify_open(&nt, true);
    ck_assert_int_eq(sl_sd_notify("WATCHDOG=1"), 1);
    ck_assert_int_eq(h_notify_find(&nt, "WATCHDOG=1", 0), 0);
    ck_assert_str_eq(nt.text[0], "WATCHDOG=1");
    h_notify_close(&nt);
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

    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);

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
