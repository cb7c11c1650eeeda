/* peer.c - a socket peer's address as text and its port (see peer.h).
 *
 * Kept apart from the connection so that what only reads a peer's address
 * (the access log) does not call into the connection's files.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "worker/loop/peer.h"

const char *sl_peer_text(const struct sockaddr *sa, char *buf, size_t n,
                         int *port)
{
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

    *port = 0;
    buf[0] = '\0';
    if (sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &in->sin_addr, buf, (socklen_t)n);
        *port = ntohs(in->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &in6->sin6_addr, buf, (socklen_t)n);
        *port = ntohs(in6->sin6_port);
    }
    return buf;
}
