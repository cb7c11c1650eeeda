/* peer.h - a socket peer's address as text and its port, for whoever
 * names a client: the connection (sl_conn_peer()) and the access log. A
 * pure function: no connection, no state.
 */
#ifndef SL_PEER_H
#define SL_PEER_H

#include <stddef.h>
#include <sys/socket.h>

/* The address of SA as text in BUF[0..N) (inet_ntop()'s: N of
 * INET6_ADDRSTRLEN holds any) and its port in *PORT, for AF_INET and
 * AF_INET6; "" and 0 for any other family (a unix: socket's peer). SA is
 * read as far as its family's address struct: its family says what it
 * holds, so a caller that filled in only the family and the address (no
 * length) gets the same. Returns BUF. */
const char *sl_peer_text(const struct sockaddr *sa, char *buf, size_t n,
                         int *port);

#endif
