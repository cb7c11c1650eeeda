/* tlspick.c - the server name and ALPN choices of a handshake
 * (tlspick.h).
 *
 * Both run on what the client sent, so every length is checked against
 * the bytes there are before it is used. The name rules are RFC 9525's
 * for a certificate's DNS names: case is ignored (ASCII only: a host name
 * on the wire is A-labels), and a star is a whole left-most label that
 * stands for exactly one label, never a dot, never a partial label
 * ("f*.example.com" names nothing) and never under fewer than two labels
 * ("*.com"). A certificate that claimed more would be refused by the
 * client anyway, so serving it would gain nothing.
 */
#include "config.h"

#include <string.h>

#include "worker/loop/tlspick.h"

static unsigned char lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

/* A[0..N) and B[0..N) the same but for ASCII case, neither holding NUL? */
static bool same_nocase(const char *a, const char *b, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (a[i] == '\0' ||
            lower((unsigned char)a[i]) != lower((unsigned char)b[i]))
            return false;
    return true;
}

/* Can C be in the label a star stands for? */
static bool label_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '-';
}

/* Is SUFFIX[0..N) (what follows "*" in a pattern) ".label.label..." with
 * no empty label, no star, at least two labels? */
static bool wildcard_suffix(const char *suffix, size_t n)
{
    size_t i, labels = 0;

    if (n < 2 || suffix[0] != '.' || suffix[n - 1] == '.')
        return false;
    for (i = 0; i < n; i++) {
        if (suffix[i] == '*')
            return false;
        if (suffix[i] == '.') {
            if (i + 1 < n && suffix[i + 1] == '.')
                return false;
            labels++;
        }
    }
    return labels >= 2;
}

bool sl_tlspick_covers(const char *pattern, size_t plen, const char *host,
                       size_t hlen)
{
    const char *dot;
    size_t i, first;

    if (hlen == 0 || hlen > SL_TLSPICK_HOST_MAX ||
        memchr(host, '\0', hlen) != NULL)
        return false;
    if (memchr(pattern, '*', plen) == NULL)
        return plen == hlen && same_nocase(pattern, host, hlen);
    if (pattern[0] != '*' || !wildcard_suffix(pattern + 1, plen - 1))
        return false;
    dot = memchr(host, '.', hlen);
    if (dot == NULL || dot == host)
        return false;
    first = (size_t)(dot - host);
    for (i = 0; i < first; i++)
        if (!label_char((unsigned char)host[i]))
            return false;
    return hlen - first == plen - 1 &&
           same_nocase(pattern + 1, host + first, plen - 1);
}

int sl_tlspick_server(const sl_tlspick_name_t *names, int n, const char *host,
                      size_t hlen)
{
    int i;

    for (i = 0; i < n; i++)
        if (sl_tlspick_covers(names[i].name, names[i].len, host, hlen))
            return names[i].pair;
    return -1;
}

int sl_tlspick_alpn_offer(sl_tlspick_alpn_t *offer, const char *const *names,
                          int n)
{
    size_t len;
    int i;

    offer->len = 0;
    for (i = 0; i < n; i++) {
        len = strlen(names[i]);
        if (len == 0 || len > 255 || offer->len + 1 + len > sizeof(offer->wire))
            goto out_empty;
        offer->wire[offer->len] = (uint8_t)len;
        memcpy(offer->wire + offer->len + 1, names[i], len);
        offer->len += 1 + len;
    }
    return 0;

out_empty:
    offer->len = 0;
    return -1;
}

/* Is LIST[0..LEN) a wire-form list: at least one name, each of length 1
 * or more, the last ending where LIST does? */
static bool wire_list(const uint8_t *list, size_t len)
{
    size_t at = 0;

    if (len == 0)
        return false;
    while (at < len) {
        if (list[at] == 0 || list[at] > len - at - 1)
            return false;
        at += 1 + (size_t)list[at];
    }
    return true;
}

/* Does the wire-form LIST[0..LEN) (checked) hold NAME[0..N)? */
static bool lists(const uint8_t *list, size_t len, const uint8_t *name,
                  size_t n)
{
    size_t at;

    for (at = 0; at < len; at += 1 + (size_t)list[at])
        if (list[at] == n && memcmp(list + at + 1, name, n) == 0)
            return true;
    return false;
}

int sl_tlspick_alpn(const sl_tlspick_alpn_t *offer, const uint8_t *client,
                    size_t len, const uint8_t **out, uint8_t *outlen)
{
    size_t at;

    if (!wire_list(client, len))
        return -1;
    /* the offer is ours (sl_tlspick_alpn_offer() made it well formed) */
    for (at = 0; at < offer->len; at += 1 + (size_t)offer->wire[at]) {
        if (lists(client, len, offer->wire + at + 1, offer->wire[at])) {
            *out = offer->wire + at + 1;
            *outlen = offer->wire[at];
            return 0;
        }
    }
    return -1;
}
