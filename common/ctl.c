/* ctl.c - sending and receiving control messages (see ctl.h). */
#include "config.h"

#include <errno.h>
#include <sys/socket.h>

#include "common/ctl.h"

int sl_ctl_send(int fd, const sl_ctl_msg_t *m)
{
    ssize_t n;

    do {
        n = send(fd, m, sizeof(*m), MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof(*m) ? 0 : -1;
}

int sl_ctl_recv(int fd, sl_ctl_msg_t *m)
{
    ssize_t n;

    do {
        n = recv(fd, m, sizeof(*m), MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n == 0)
        return 0;
    if (n != (ssize_t)sizeof(*m)) {
        if (n >= 0)
            errno = EPROTO;
        return -1;
    }
    return 1;
}
