/* allow.c - the trusted-peer list: parse once, match with no allocation.
 *
 * An entry is kept as its family, prefix length and address bytes; a
 * plain address is a block of full length. Matching compares whole bytes,
 * then the leftover bits of the last one under a mask. An IPv4-mapped
 * IPv6 peer (::ffff:a.b.c.d, what a dual-stack socket reports for an IPv4
 * client) is matched as the IPv4 address it carries, so "127.0.0.1" means
 * the same thing on a [::] listener as on a 0.0.0.0 one.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "common/allow.h"

/* Longest entry text: an IPv6 address with a zone-less /128. */
#define ENTRY_MAX (INET6_ADDRSTRLEN + 4)

static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* Parse one entry TEXT (NUL-terminated, trimmed) into *NET. 0 or -1. */
static int parse_net(sl_allow_net_t *net, char *text)
{
    char *slash = strchr(text, '/');
    int max;
    long bits;
    char *end;

    if (slash != NULL)
        *slash = '\0';
    memset(net, 0, sizeof(*net));
    if (inet_pton(AF_INET, text, net->addr) == 1) {
        net->family = AF_INET;
        max = 32;
    } else if (inet_pton(AF_INET6, text, net->addr) == 1) {
        net->family = AF_INET6;
        max = 128;
    } else {
        return -1;
    }
    net->bits = (uint8_t)max;
    if (slash == NULL)
        return 0;
    if (slash[1] < '0' || slash[1] > '9')
        return -1;
    bits = strtol(slash + 1, &end, 10);
    if (*end != '\0' || bits > max)
        return -1;
    net->bits = (uint8_t)bits;
    return 0;
}

int sl_allow_parse(sl_allow_t *a, const char *spec, char *err, size_t errlen)
{
    const char *p = spec;
    char text[ENTRY_MAX + 1];

    memset(a, 0, sizeof(*a));
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        const char *s = p, *e = p + n;

        p = *e == ',' ? e + 1 : e;
        while (s < e && (*s == ' ' || *s == '\t'))
            s++;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (s == e)
            continue;
        if ((size_t)(e - s) > ENTRY_MAX) {
            snprintf(err, errlen, "'%.*s...' is no address", ENTRY_MAX, s);
            return -1;
        }
        memcpy(text, s, (size_t)(e - s));
        text[e - s] = '\0';
        if (strcmp(text, "*") == 0) {
            a->any = true;
            continue;
        }
        if (strcmp(text, "unix") == 0) {
            a->unix_peers = true;
            continue;
        }
        if (a->n == SL_ALLOW_MAX) {
            snprintf(err, errlen, "more than %d entries", SL_ALLOW_MAX);
            return -1;
        }
        if (parse_net(&a->nets[a->n], text) < 0) {
            snprintf(err, errlen,
                     "'%.*s' is no address, CIDR block, '*' or 'unix'",
                     (int)(e - s), s);
            return -1;
        }
        a->n++;
    }
    return 0;
}

/* Do the first BITS bits of X and Y agree? */
static bool prefix_eq(const uint8_t *x, const uint8_t *y, unsigned bits)
{
    unsigned whole = bits / 8, rest = bits % 8;
    uint8_t mask;

    if (memcmp(x, y, whole) != 0)
        return false;
    if (rest == 0)
        return true;
    mask = (uint8_t)(0xff << (8 - rest));
    return (x[whole] & mask) == (y[whole] & mask);
}

/* Is the address of FAMILY in ADDR (4 or 16 bytes) on A? */
static bool match_addr(const sl_allow_t *a, int family, const uint8_t *addr)
{
    int i;

    if (a->any)
        return true;
    if (family == AF_INET6 && memcmp(addr, v4_mapped, 12) == 0) {
        family = AF_INET;
        addr += 12;
    }
    for (i = 0; i < a->n; i++) {
        const sl_allow_net_t *net = &a->nets[i];
        if (net->family == family && prefix_eq(net->addr, addr, net->bits))
            return true;
    }
    return false;
}

bool sl_allow_match(const sl_allow_t *a, const struct sockaddr *sa)
{
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

    switch (sa->sa_family) {
    case AF_INET:
        return match_addr(a, AF_INET, (const uint8_t *)&in->sin_addr);
    case AF_INET6:
        return match_addr(a, AF_INET6, (const uint8_t *)&in6->sin6_addr);
    case AF_UNIX:
        return a->any || a->unix_peers;
    default:
        return a->any;
    }
}

bool sl_allow_match_text(const sl_allow_t *a, const char *text, size_t n)
{
    char buf[INET6_ADDRSTRLEN];
    uint8_t addr[16];

    if (a->any)
        return true;
    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, text, n);
    buf[n] = '\0';
    if (inet_pton(AF_INET, buf, addr) == 1)
        return match_addr(a, AF_INET, addr);
    if (inet_pton(AF_INET6, buf, addr) == 1)
        return match_addr(a, AF_INET6, addr);
    return false;
}
