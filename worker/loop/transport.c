/* transport.c - the plain-socket transport, and what every transport
 * shares.
 *
 * The plain table is the socket calls the connection files made before
 * there was a table, unchanged: one send() for one buffer and one
 * sendmsg() for more, so a response's head and its body's first bytes
 * leave in one segment; MSG_NOSIGNAL on every write (sendfile(2) has no
 * such flag: the worker ignores SIGPIPE); MSG_MORE when the caller says a
 * file follows. errno is the kernel's. The calls outside a table,
 * sl_transport_waiting() and the PROXY header's peek and take, use the
 * socket itself, which is the same under any transport.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "worker/loop/transport.h"

static ssize_t plain_read(sl_transport_t *t, void *buf, size_t n)
{
    return recv(t->fd, buf, n, 0);
}

static ssize_t plain_writev(sl_transport_t *t, const struct iovec *iov,
                            int iovcnt, int flags)
{
    int more = (flags & SL_TRANSPORT_MORE) ? MSG_MORE : 0;
    struct msghdr m;

    if (iovcnt == 1) /* the common case: send() */
        return send(t->fd, iov[0].iov_base, iov[0].iov_len,
                    MSG_NOSIGNAL | more);
    memset(&m, 0, sizeof(m));
    m.msg_iov = (struct iovec *)iov;
    m.msg_iovlen = (size_t)iovcnt;
    return sendmsg(t->fd, &m, MSG_NOSIGNAL | more);
}

static ssize_t plain_sendfile(sl_transport_t *t, int file_fd, off_t *off,
                              size_t n)
{
    return sendfile(t->fd, file_fd, off, n);
}

static int plain_shutdown(sl_transport_t *t)
{
    return shutdown(t->fd, SHUT_WR);
}

static void plain_close(sl_transport_t *t)
{
    close(t->fd);
    t->fd = -1;
}

static size_t plain_pending(const sl_transport_t *t)
{
    (void)t;
    return 0;
}

static bool plain_opening(const sl_transport_t *t)
{
    (void)t;
    return false;
}

static const sl_tls_info_t *plain_tls_info(const sl_transport_t *t)
{
    (void)t;
    return NULL;
}

const sl_transport_ops_t sl_transport_plain = {
    .name = "plain",
    .read = plain_read,
    .writev = plain_writev,
    .sendfile = plain_sendfile,
    .shutdown = plain_shutdown,
    .close = plain_close,
    .pending = plain_pending,
    .opening = plain_opening,
    .tls_info = plain_tls_info,
};

void sl_transport_start(sl_transport_t *t, const sl_transport_ops_t *ops,
                        int fd)
{
    t->ops = ops;
    t->state = NULL;
    t->fd = fd;
    t->read_wait = EV_READ;
    t->write_wait = EV_WRITE;
}

bool sl_transport_waiting(const sl_transport_t *t)
{
    char b;

    if (t->ops->pending(t) > 0)
        return true;
    return recv(t->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) != -1 ||
           (errno != EAGAIN && errno != EWOULDBLOCK);
}

ssize_t sl_transport_peek(const sl_transport_t *t, void *buf, size_t n)
{
    return recv(t->fd, buf, n, MSG_PEEK);
}

ssize_t sl_transport_take(sl_transport_t *t, void *buf, size_t n)
{
    return recv(t->fd, buf, n, 0);
}
