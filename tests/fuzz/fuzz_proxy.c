/* fuzz_proxy.c - a libFuzzer target for what sluice reads from a proxy:
 * the PROXY protocol header parser (proxyproto.h) and the forwarding
 * headers' judge (forwarded.h).
 *
 * The input's first byte chooses. Even: the rest is a PROXY header, parsed
 * whole and at every length short of it; the verdicts must agree (a
 * header is "need more" at every prefix shorter than itself and its own
 * length from there on; a refused input has no prefix that is a header).
 * Odd: the rest is cut at its first four NUL bytes into a Forwarded, an
 * X-Forwarded-For, -Proto, -Host and -Port value, judged against a fixed
 * trust list; the client and the host named must be NUL-terminated
 * strings that fit, the host's name inside it, the ports in range.
 *
 * Built by a --enable-fuzzing configuration (tests/fuzz/run.sh builds
 * fuzz_ws; make tests/fuzz/fuzz_proxy in the same tree builds this).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/loop/forwarded.h"
#include "worker/loop/proxyproto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_proxy: %s:%d: %s\n", __FILE__, __LINE__,     \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

static void fuzz_header(const uint8_t *d, size_t n)
{
    sl_proxyproto_t pp;
    const char *why;
    long whole = sl_proxyproto_parse(d, n, &pp, &why), rc;
    size_t k;

    CHECK(whole >= -1 && whole <= (long)n);
    CHECK(whole != -1 || why != NULL);
    if (whole > 0)
        CHECK(pp.src.ss_family == AF_UNSPEC || pp.src.ss_family == AF_INET ||
              pp.src.ss_family == AF_INET6);
    for (k = 0; k < n; k++) {
        rc = sl_proxyproto_parse(d, k, &pp, &why);
        if (whole > 0 && k < (size_t)whole)
            CHECK(rc == 0);
        else if (whole > 0)
            CHECK(rc == whole);
        else
            CHECK(rc <= 0);
    }
}

static void fuzz_forwarded(const uint8_t *d, size_t n)
{
    static sl_allow_t trust;
    static bool ready;
    const char *p = (const char *)d, *end = p + n, *z;
    sl_forwarded_hdrs_t h = {0};
    const char **val[] = {&h.forwarded, &h.xff, &h.xfp, &h.xfh, &h.xfport};
    size_t *len[] = {&h.forwarded_len, &h.xff_len, &h.xfp_len, &h.xfh_len,
                     &h.xfport_len};
    sl_client_t cl;
    size_t i;

    if (!ready) {
        CHECK(sl_allow_parse(&trust, "127.0.0.1, 10.0.0.0/8, fd00::/8", NULL,
                             0) == 0);
        ready = true;
    }
    for (i = 0; i < sizeof(val) / sizeof(val[0]); i++) {
        z = i + 1 < sizeof(val) / sizeof(val[0])
                ? memchr(p, '\0', (size_t)(end - p))
                : NULL;
        *val[i] = p;
        *len[i] = (size_t)((z ? z : end) - p);
        if (z == NULL)
            break;
        p = z + 1;
    }
    sl_forwarded_eval(&trust, &h, false, &cl);
    CHECK(memchr(cl.addr, '\0', sizeof(cl.addr)) != NULL);
    CHECK(cl.port >= 0 && cl.port <= 65535);
    CHECK(memchr(cl.host, '\0', sizeof(cl.host)) != NULL);
    CHECK((size_t)cl.name_off + cl.name_len <= strlen(cl.host));
    CHECK(cl.server_port >= 0 && cl.server_port <= 65535);
    CHECK(cl.host[0] == '\0' || cl.server_port > 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] % 2 == 0)
        fuzz_header(data + 1, size - 1);
    else
        fuzz_forwarded(data + 1, size - 1);
    return 0;
}
