/* allow.h - a list of trusted peers: addresses, CIDR blocks, '*'.
 *
 * One matcher serves both --forwarded-allow-ips (whose forwarding headers
 * are believed) and --proxy-allow-from (who may send a PROXY protocol
 * header). The list is parsed once, at option time, into a fixed array, so
 * matching a peer on the loop thread allocates nothing and cannot fail.
 */
#ifndef SL_ALLOW_H
#define SL_ALLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Entries of one list, at most. */
#define SL_ALLOW_MAX 32

typedef struct {
    uint8_t family; /* AF_INET or AF_INET6 */
    uint8_t bits;   /* prefix length */
    uint8_t addr[16];
} sl_allow_net_t;

typedef struct {
    bool any;        /* '*': every peer */
    bool unix_peers; /* 'unix': peers on unix: sockets */
    int n;
    sl_allow_net_t nets[SL_ALLOW_MAX];
} sl_allow_t;

/* Parse SPEC, comma-separated entries: an IPv4 or IPv6 address, a CIDR
 * block (10.0.0.0/8, fd00::/8), '*' (everyone) or 'unix' (unix: socket
 * peers); blanks around entries and empty entries are ignored. 0, or -1
 * with a one-line reason in ERR (ERRLEN bytes) and *A undefined. */
int sl_allow_parse(sl_allow_t *a, const char *spec, char *err, size_t errlen);

/* Is the peer SA (any family; AF_UNIX counts as 'unix') on list A? An
 * IPv4-mapped IPv6 address matches the IPv4 entries too. */
bool sl_allow_match(const sl_allow_t *a, const struct sockaddr *sa);

/* Is the address in TEXT[0..N) (IPv4 or IPv6, no brackets or port) on A?
 * Text that is no address (an obfuscated RFC 7239 name, "unknown")
 * matches only '*'. */
bool sl_allow_match_text(const sl_allow_t *a, const char *text, size_t n);

#endif
