/* test_transport.c - check suite for worker/loop/transport.c.
 *
 * The plain transport over real sockets: a unix socketpair for most cases
 * and loopback TCP where the kernel treats TCP differently (MSG_MORE, a
 * file sent ahead of its head's flush). The peer end is a plain socket the
 * test reads and writes itself. No case waits on time: every socket is
 * non-blocking, and what a case reads was written before it reads.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "worker/loop/transport.h"

/* A connected pair: *OURS (non-blocking, for the transport) and *PEER. */
static void unix_pair(int *ours, int *peer)
{
    int sv[2];

    ck_assert_int_eq(
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv),
        0);
    *ours = sv[0];
    *peer = sv[1];
}

/* The same over loopback TCP, as accept4() hands a socket to the pump. */
static void tcp_pair(int *ours, int *peer)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int l, one = 1;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(l, 0);
    ck_assert_int_eq(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(l, 1), 0);
    ck_assert_int_eq(getsockname(l, (struct sockaddr *)&sa, &len), 0);
    *peer = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(*peer, 0);
    ck_assert_int_eq(connect(*peer, (struct sockaddr *)&sa, sizeof(sa)), 0);
    *ours = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    ck_assert_int_ge(*ours, 0);
    setsockopt(*ours, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    close(l);
}

/* Read exactly N bytes from the blocking socket FD into BUF, bounded by
 * a poll of 5 s per read. */
static void peer_read(int fd, char *buf, size_t n)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    size_t got = 0;
    ssize_t k;

    while (got < n) {
        ck_assert_msg(poll(&pfd, 1, 5000) == 1, "peer: nothing to read");
        k = recv(fd, buf + got, n - got, MSG_DONTWAIT);
        ck_assert_msg(k > 0, "peer: recv() gave %zd after %zu of %zu", k, got,
                      n);
        got += (size_t)k;
    }
}

/* Read from our non-blocking side through T until N bytes came. */
static void transport_read_all(sl_transport_t *t, char *buf, size_t n)
{
    struct pollfd pfd = {.fd = t->fd, .events = POLLIN};
    size_t got = 0;
    ssize_t k;

    while (got < n) {
        k = sl_transport_read(t, buf + got, n - got);
        if (k < 0 && errno == EAGAIN) {
            ck_assert_msg(poll(&pfd, 1, 5000) == 1, "nothing came");
            continue;
        }
        ck_assert_msg(k > 0, "read gave %zd after %zu of %zu", k, got, n);
        got += (size_t)k;
    }
}

START_TEST(test_start_plain)
{
    sl_transport_t t;
    int ours, peer;

    unix_pair(&ours, &peer);
    sl_transport_start(&t, &sl_transport_plain, ours);
    ck_assert_ptr_eq(t.ops, &sl_transport_plain);
    ck_assert_str_eq(t.ops->name, "plain");
    ck_assert_ptr_null(t.state);
    ck_assert_int_eq(t.fd, ours);
    ck_assert_uint_eq(sl_transport_pending(&t), 0);
    /* plain waits for what it does, in both directions */
    ck_assert_int_eq(sl_transport_events(&t, EV_READ), EV_READ);
    ck_assert_int_eq(sl_transport_events(&t, EV_WRITE), EV_WRITE);
    ck_assert_int_eq(sl_transport_events(&t, EV_READ | EV_WRITE),
                     EV_READ | EV_WRITE);
    ck_assert_int_eq(sl_transport_events(&t, 0), 0);
    ck_assert_int_eq(sl_transport_ready(&t, EV_READ), EV_READ);
    ck_assert_int_eq(sl_transport_ready(&t, EV_WRITE), EV_WRITE);
    sl_transport_close(&t);
    close(peer);
}
END_TEST

START_TEST(test_read_empty_is_eagain)
{
    sl_transport_t t;
    char buf[16];
    int ours, peer;

    unix_pair(&ours, &peer);
    sl_transport_start(&t, &sl_transport_plain, ours);
    errno = 0;
    ck_assert_int_eq(sl_transport_read(&t, buf, sizeof(buf)), -1);
    ck_assert(errno == EAGAIN || errno == EWOULDBLOCK);
    ck_assert_int_eq(t.read_wait, EV_READ);
    ck_assert(!sl_transport_waiting(&t));
    ck_assert_uint_eq(sl_transport_pending(&t), 0);
    sl_transport_close(&t);
    close(peer);
}
END_TEST

START_TEST(test_read_then_eof)
{
    sl_transport_t t;
    char buf[16];
    int ours, peer;

    unix_pair(&ours, &peer);
    sl_transport_start(&t, &sl_transport_plain, ours);
    ck_assert_int_eq(send(peer, "hello", 5, 0), 5);
    /* waiting peeks: twice, and the bytes are still there */
    ck_assert(sl_transport_waiting(&t));
    ck_assert(sl_transport_waiting(&t));
    ck_assert_uint_eq(sl_transport_pending(&t), 0); /* the kernel has them */
    ck_assert_int_eq(sl_transport_read(&t, buf, 3), 3);
    ck_assert_int_eq(memcmp(buf, "hel", 3), 0);
    ck_assert_int_eq(sl_transport_read(&t, buf, sizeof(buf)), 2);
    ck_assert_int_eq(memcmp(buf, "lo", 2), 0);
    close(peer);
    ck_assert(sl_transport_waiting(&t)); /* an EOF is due too */
    ck_assert_int_eq(sl_transport_read(&t, buf, sizeof(buf)), 0);
    sl_transport_close(&t);
}
END_TEST

START_TEST(test_writev_two_buffers)
{
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
    struct iovec iov[2] = {{(void *)head, sizeof(head) - 1},
                           {(void *)"hello", 5}};
    char buf[sizeof(head) - 1 + 5];
    sl_transport_t t;
    int ours, peer;

    tcp_pair(&ours, &peer);
    sl_transport_start(&t, &sl_transport_plain, ours);
    ck_assert_int_eq(sl_transport_writev(&t, iov, 2, 0), sizeof(buf));
    peer_read(peer, buf, sizeof(buf));
    ck_assert_int_eq(memcmp(buf, head, sizeof(head) - 1), 0);
    ck_assert_int_eq(memcmp(buf + sizeof(head) - 1, "hello", 5), 0);
    /* one buffer, and the two flags a caller passes */
    ck_assert_int_eq(sl_transport_writev(&t, iov + 1, 1, 0), 5);
    peer_read(peer, buf, 5);
    ck_assert_int_eq(memcmp(buf, "hello", 5), 0);
    sl_transport_close(&t);
    close(peer);
}
END_TEST

/* A head announced with SL_TRANSPORT_MORE, then a file: the client gets
 * both, in order (MSG_MORE holds the head only until the file comes). */
START_TEST(test_sendfile_after_more)
{
    static const char head[] = "HEAD-";
    char path[] = "/tmp/sluice-transport-XXXXXX";
    char body[3000], buf[sizeof(head) - 1 + 1000];
    struct iovec iov = {(void *)head, sizeof(head) - 1};
    sl_transport_t t;
    int ours, peer, fd;
    off_t off = 1000;
    size_t i;

    for (i = 0; i < sizeof(body); i++)
        body[i] = (char)('a' + i % 26);
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    unlink(path);
    ck_assert_int_eq(write(fd, body, sizeof(body)), sizeof(body));
    tcp_pair(&ours, &peer);
    sl_transport_start(&t, &sl_transport_plain, ours);
    ck_assert_int_eq(sl_transport_writev(&t, &iov, 1, SL_TRANSPORT_MORE),
                     sizeof(head) - 1);
    /* the middle third: the offset moves past what went */
    ck_assert_int_eq(sl_transport_sendfile(&t, fd, &off, 1000), 1000);
    ck_assert_int_eq(off, 2000);
    peer_read(peer, buf, sizeof(buf));
    ck_assert_int_eq(memcmp(buf, head, sizeof(head) - 1), 0);
    ck_assert_int_eq(memcmp(buf + sizeof(head) - 1, body + 1000, 1000), 0);
    /* a file that ends before the promised length: 0 at its end */
    off = sizeof(body);
    ck_assert_int_eq(sl_transport_sendfile(&t, fd, &off, 10), 0);
    close(fd);
    sl_transport_close(&t);
    close(peer);
}
END_TEST

START_TEST(test_write_full_is_eagain)
{
    char chunk[65536];
    struct iovec iov = {chunk, sizeof(chunk)};
    sl_transport_t t;
    int ours, peer, i;
    ssize_t n = 0;

    memset(chunk, 'x', sizeof(chunk));
    unix_pair(&ours, &peer);
    sl_transport_start(&t, &sl_transport_plain, ours);
    for (i = 0; i < 10000 && n >= 0; i++)
        n = sl_transport_writev(&t, &iov, 1, 0);
    ck_assert_int_eq(n, -1);
    ck_assert(errno == EAGAIN || errno == EWOULDBLOCK);
    ck_assert_int_eq(t.write_wait, EV_WRITE);
    sl_transport_close(&t);
    close(peer);
}
END_TEST

/* A write to a peer that left: EPIPE, and no SIGPIPE (which would kill
 * this test's process: check reports it as a signal). */
START_TEST(test_write_to_gone_peer_is_epipe)
{
    struct iovec iov = {(void *)"x", 1};
    sl_transport_t t;
    int ours, peer;

    unix_pair(&ours, &peer);
    sl_transport_start(&t, &sl_transport_plain, ours);
    close(peer);
    errno = 0;
    ck_assert_int_eq(sl_transport_writev(&t, &iov, 1, 0), -1);
    ck_assert_int_eq(errno, EPIPE);
    ck_assert_int_eq(sl_transport_writev(&t, &iov, 1, SL_TRANSPORT_MORE), -1);
    ck_assert_int_eq(errno, EPIPE);
    sl_transport_close(&t);
}
END_TEST

START_TEST(test_shutdown_ends_our_side_only)
{
    sl_transport_t t;
    char buf[8];
    int ours, peer;

    unix_pair(&ours, &peer);
    sl_transport_start(&t, &sl_transport_plain, ours);
    ck_assert_int_eq(sl_transport_shutdown(&t), 0);
    /* the peer reads EOF ... */
    ck_assert_int_eq(recv(peer, buf, sizeof(buf), 0), 0);
    /* ... and can still talk: we read on, as a lingering close does */
    ck_assert_int_eq(send(peer, "late", 4, 0), 4);
    transport_read_all(&t, buf, 4);
    ck_assert_int_eq(memcmp(buf, "late", 4), 0);
    sl_transport_close(&t);
    close(peer);
}
END_TEST

START_TEST(test_close)
{
    sl_transport_t t;
    char buf[8];
    int ours, peer;

    unix_pair(&ours, &peer);
    sl_transport_start(&t, &sl_transport_plain, ours);
    sl_transport_close(&t);
    ck_assert_int_eq(t.fd, -1);
    ck_assert_int_eq(fcntl(ours, F_GETFD), -1); /* the fd is gone */
    ck_assert_int_eq(errno, EBADF);
    ck_assert_int_eq(recv(peer, buf, sizeof(buf), 0), 0);
    sl_transport_close(&t); /* closed: nothing to do */
    close(peer);
}
END_TEST

static Suite *transport_suite(void)
{
    Suite *s = suite_create("transport");
    TCase *tc = tcase_create("plain");

    tcase_add_test(tc, test_start_plain);
    tcase_add_test(tc, test_read_empty_is_eagain);
    tcase_add_test(tc, test_read_then_eof);
    tcase_add_test(tc, test_writev_two_buffers);
    tcase_add_test(tc, test_sendfile_after_more);
    tcase_add_test(tc, test_write_full_is_eagain);
    tcase_add_test(tc, test_write_to_gone_peer_is_epipe);
    tcase_add_test(tc, test_shutdown_ends_our_side_only);
    tcase_add_test(tc, test_close);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(transport_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
