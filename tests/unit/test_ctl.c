/* test_ctl.c - check suite for common/ctl.c, the control channel.
 *
 * Both ends are a real socketpair(AF_UNIX, SOCK_SEQPACKET), as between the
 * supervisor and a worker: messages keep their boundaries, a full socket
 * drops instead of blocking, and EOF means the other side is gone.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/ctl.h"

static int fds[2] = {-1, -1}; /* [0] worker end, [1] supervisor end */

static void setup(void)
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, fds), 0);
}

static void teardown(void)
{
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

START_TEST(test_round_trip)
{
    sl_ctl_msg_t m = {
        .type = SL_CTL_HEARTBEAT,
        .pid = 1234,
        .served = 1ULL << 40,
        .active = 3,
        .conns = 17,
        .lanes = 4,
        .busy_lanes = 2,
        .oldest = 1.5,
    };
    sl_ctl_msg_t got;

    ck_assert_int_eq(sl_ctl_send(fds[0], &m), 0);
    memset(&got, 0xff, sizeof(got));
    ck_assert_int_eq(sl_ctl_recv(fds[1], &got), 1);
    ck_assert_uint_eq(got.type, SL_CTL_HEARTBEAT);
    ck_assert_uint_eq(got.pid, 1234);
    ck_assert(got.served == 1ULL << 40);
    ck_assert_uint_eq(got.active, 3);
    ck_assert_uint_eq(got.conns, 17);
    ck_assert_uint_eq(got.lanes, 4);
    ck_assert_uint_eq(got.busy_lanes, 2);
    ck_assert_double_eq(got.oldest, 1.5);
}
END_TEST

/* Messages arrive one per recv, in order. */
START_TEST(test_boundaries_and_order)
{
    sl_ctl_msg_t m = {0}, got;

    for (uint32_t t = SL_CTL_READY; t <= SL_CTL_DRAINING; t++) {
        m.type = t;
        m.served = t * 10;
        ck_assert_int_eq(sl_ctl_send(fds[0], &m), 0);
    }
    for (uint32_t t = SL_CTL_READY; t <= SL_CTL_DRAINING; t++) {
        ck_assert_int_eq(sl_ctl_recv(fds[1], &got), 1);
        ck_assert_uint_eq(got.type, t);
        ck_assert(got.served == t * 10);
    }
    errno = 0;
    ck_assert_int_eq(sl_ctl_recv(fds[1], &got), -1);
    ck_assert_int_eq(errno, EAGAIN);
}
END_TEST

START_TEST(test_recv_nothing_waiting)
{
    sl_ctl_msg_t got;

    errno = 0;
    ck_assert_int_eq(sl_ctl_recv(fds[1], &got), -1);
    ck_assert(errno == EAGAIN || errno == EWOULDBLOCK);
}
END_TEST

START_TEST(test_recv_eof)
{
    sl_ctl_msg_t m = {.type = SL_CTL_READY}, got;

    ck_assert_int_eq(sl_ctl_send(fds[0], &m), 0);
    close(fds[0]);
    fds[0] = -1;
    /* what was sent before the close is still delivered, then EOF */
    ck_assert_int_eq(sl_ctl_recv(fds[1], &got), 1);
    ck_assert_uint_eq(got.type, SL_CTL_READY);
    ck_assert_int_eq(sl_ctl_recv(fds[1], &got), 0);
}
END_TEST

START_TEST(test_short_message_is_an_error)
{
    char half[4] = {1, 0, 0, 0};
    sl_ctl_msg_t got;

    ck_assert_int_eq(send(fds[0], half, sizeof(half), 0), sizeof(half));
    errno = 0;
    ck_assert_int_eq(sl_ctl_recv(fds[1], &got), -1);
    ck_assert_int_eq(errno, EPROTO);
}
END_TEST

/* The supervisor is gone: EPIPE, and no SIGPIPE kills the sender. */
START_TEST(test_send_to_closed_peer)
{
    sl_ctl_msg_t m = {.type = SL_CTL_HEARTBEAT};

    signal(SIGPIPE, SIG_DFL);
    close(fds[1]);
    fds[1] = -1;
    errno = 0;
    ck_assert_int_eq(sl_ctl_send(fds[0], &m), -1);
    ck_assert_int_eq(errno, EPIPE);
}
END_TEST

/* A supervisor that stopped reading never blocks the worker's loop: the
 * socket fills, then sends fail with EAGAIN at once. */
START_TEST(test_full_socket_never_blocks)
{
    sl_ctl_msg_t m = {.type = SL_CTL_HEARTBEAT}, got;
    int sent = 0, rc;

    alarm(5); /* a blocking send would hang here: die instead */
    while ((rc = sl_ctl_send(fds[0], &m)) == 0) {
        m.served = (uint64_t)++sent;
        ck_assert_int_lt(sent, 1000000);
    }
    alarm(0);
    ck_assert_int_eq(rc, -1);
    ck_assert(errno == EAGAIN || errno == EWOULDBLOCK);
    ck_assert_int_gt(sent, 0);
    /* what did go in is intact */
    ck_assert_int_eq(sl_ctl_recv(fds[1], &got), 1);
    ck_assert(got.served == 0);
    ck_assert_int_eq(sl_ctl_recv(fds[1], &got), 1);
    ck_assert(got.served == 1);
}
END_TEST

static Suite *ctl_suite(void)
{
    Suite *s = suite_create("ctl");
    TCase *tc = tcase_create("ctl");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_boundaries_and_order);
    tcase_add_test(tc, test_recv_nothing_waiting);
    tcase_add_test(tc, test_recv_eof);
    tcase_add_test(tc, test_short_message_is_an_error);
    tcase_add_test(tc, test_send_to_closed_peer);
    tcase_add_test(tc, test_full_socket_never_blocks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ctl_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
