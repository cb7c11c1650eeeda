/* fuzz_tls.c - a libFuzzer target for what sluice decides from a TLS
 * handshake (tlspick.h): the certificate for a client's server name, and
 * the ALPN protocol. No OpenSSL: these are the decisions on the bytes
 * OpenSSL hands over.
 *
 * The input's first byte chooses. Even: the rest is cut at '\n' into a
 * server name, then up to 32 certificate names (name I is pair I / 2's).
 * The pair chosen must be the pair of the first name that covers the
 * server name, or -1 when none does; a name covers what it covers
 * whatever the ASCII case of either side; an exact name covers only
 * itself, and a wildcard only a host of one more label.
 * Odd: the second byte chooses the server's offer (one of OFFERS), the
 * rest is the client's list in wire form. The choice is checked against
 * a list read here on its own: refused when that list is not one or
 * shares nothing with the offer, else the first of the offer's names
 * the client lists, pointing into the offer.
 *
 * Built by a --enable-fuzzing configuration (tests/fuzz/run.sh).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/loop/tlspick.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_tls: %s:%d: %s\n", __FILE__, __LINE__,       \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

#define MAX_NAMES 32

/* S[0..N) with ASCII letters in upper (UP) or lower case, into OUT. */
static void recase(const char *s, size_t n, bool up, char *out)
{
    size_t i;

    for (i = 0; i < n; i++) {
        char c = s[i];
        if (up && c >= 'a' && c <= 'z')
            c = (char)(c - 'a' + 'A');
        else if (!up && c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        out[i] = c;
    }
}

static size_t count(const char *s, size_t n, char c)
{
    size_t i, k = 0;

    for (i = 0; i < n; i++)
        k += s[i] == c;
    return k;
}

/* What covering PATTERN says of HOST, checked from the outside. */
static void check_covers(const char *p, size_t plen, const char *h, size_t hlen)
{
    static char up[65536], low[65536];
    bool c = sl_tlspick_covers(p, plen, h, hlen);

    recase(h, hlen, true, up);
    recase(p, plen, false, low);
    CHECK(sl_tlspick_covers(p, plen, up, hlen) == c);
    CHECK(sl_tlspick_covers(low, plen, h, hlen) == c);
    if (!c)
        return;
    CHECK(hlen > 0 && hlen <= SL_TLSPICK_HOST_MAX);
    CHECK(memchr(h, '\0', hlen) == NULL && memchr(p, '\0', plen) == NULL);
    if (memchr(p, '*', plen) == NULL) {
        CHECK(plen == hlen);
        recase(h, hlen, false, up);
        CHECK(memcmp(low, up, hlen) == 0);
    } else {
        /* "*" + ".a.b...": the host has one more label, no star */
        CHECK(plen >= 2 && p[0] == '*' && p[1] == '.');
        CHECK(count(p, plen, '*') == 1);
        CHECK(count(p, plen, '.') >= 2);
        CHECK(count(h, hlen, '.') == count(p, plen, '.'));
        CHECK(memchr(h, '*', hlen) == NULL && h[0] != '.');
        CHECK(hlen > plen - 1);
    }
}

static void fuzz_sni(const char *d, size_t n)
{
    sl_tlspick_name_t names[MAX_NAMES];
    const char *end = d + n, *nl, *host = d;
    size_t hlen;
    int k = 0, pair, i;

    nl = memchr(d, '\n', n);
    hlen = (size_t)((nl ? nl : end) - d);
    while (nl != NULL && k < MAX_NAMES) {
        const char *p = nl + 1;
        nl = memchr(p, '\n', (size_t)(end - p));
        names[k] = (sl_tlspick_name_t){p, (size_t)((nl ? nl : end) - p), k / 2};
        k++;
    }
    pair = sl_tlspick_server(names, k, host, hlen);
    for (i = 0; i < k; i++) {
        check_covers(names[i].name, names[i].len, host, hlen);
        if (sl_tlspick_covers(names[i].name, names[i].len, host, hlen))
            break;
    }
    CHECK(pair == (i < k ? names[i].pair : -1));
}

/* The offers a server could make: today's, with h2 first, and others. */
static const char *const offers[][4] = {
    {"http/1.1"},
    {"h2", "http/1.1"},
    {"http/1.1", "h2"},
    {"h2"},
    {"http/1.1", "http/1.0", "h2c", "spdy/3.1"},
    {"acme-tls/1"},
    {"\x01", "\xff\xfe", "a"},
    {NULL},
};

static int names_in(const char *const *o)
{
    int n = 0;

    while (n < 4 && o[n] != NULL)
        n++;
    return n;
}

/* The client's list read on its own: its names' offsets and lengths,
 * their count, or -1 when it is no list. */
static int read_list(const uint8_t *d, size_t n, size_t *at, size_t *len,
                     int max)
{
    size_t i = 0;
    int k = 0;

    if (n == 0)
        return -1;
    while (i < n) {
        size_t l = d[i];
        if (l == 0 || i + 1 + l > n)
            return -1;
        if (k < max) {
            at[k] = i + 1;
            len[k] = l;
        }
        k++;
        i += 1 + l;
    }
    return k;
}

static void fuzz_alpn(const uint8_t *d, size_t n)
{
    static size_t at[65536], len[65536];
    const char *const *o = offers[d[0] % (sizeof(offers) / sizeof(offers[0]))];
    sl_tlspick_alpn_t offer;
    const uint8_t *out = NULL;
    uint8_t outlen = 0;
    int k, no = names_in(o), i, j, rc, want = -1;

    CHECK(sl_tlspick_alpn_offer(&offer, o, no) == 0);
    rc = sl_tlspick_alpn(&offer, d + 1, n - 1, &out, &outlen);
    k = read_list(d + 1, n - 1, at, len, 65536);
    for (i = 0; k > 0 && want < 0 && i < no; i++)
        for (j = 0; want < 0 && j < k; j++)
            if (len[j] == strlen(o[i]) &&
                memcmp(d + 1 + at[j], o[i], len[j]) == 0)
                want = i;
    if (want < 0) {
        CHECK(rc == -1);
        return;
    }
    CHECK(rc == 0);
    CHECK(out > offer.wire && out + outlen <= offer.wire + offer.len);
    CHECK(outlen == strlen(o[want]) && memcmp(out, o[want], outlen) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] % 2 == 0)
        fuzz_sni((const char *)data + 1, size - 1);
    else if (size >= 2)
        fuzz_alpn(data + 1, size - 1);
    return 0;
}
