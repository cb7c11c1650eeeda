/* test_proxyproto.c - check suite for worker/loop/proxyproto.c.
 *
 * The parser sees whatever part of the header the socket has given so
 * far, so every good header is fed at every split point: "need more" up to
 * its last byte, its length from then on, whatever follows it. Bad headers
 * must be refused, and no prefix of one may ever be taken as a header.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "worker/loop/proxyproto.h"

static const uint8_t sig[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};
static const char request[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";

/* Parse HDR (N bytes) at every split point, then with a request after
 * it; returns the last result in *OUT. */
static void every_split(const uint8_t *hdr, size_t n, sl_proxyproto_t *out)
{
    uint8_t buf[1024];
    const char *why;
    size_t k;
    long rc;

    ck_assert_uint_le(n + sizeof(request), sizeof(buf));
    memcpy(buf, hdr, n);
    memcpy(buf + n, request, sizeof(request) - 1);
    for (k = 0; k < n; k++) {
        rc = sl_proxyproto_parse(buf, k, out, &why);
        ck_assert_msg(rc == 0, "split at %zu of %zu: %ld (%s)", k, n, rc,
                      why ? why : "");
    }
    for (k = n; k <= n + sizeof(request) - 1; k++) {
        rc = sl_proxyproto_parse(buf, k, out, &why);
        ck_assert_msg(rc == (long)n, "%zu bytes of %zu: %ld (%s)", k, n, rc,
                      why ? why : "");
    }
}

static void assert_v4(const sl_proxyproto_t *pp, const char *addr, int port)
{
    const struct sockaddr_in *in = (const struct sockaddr_in *)&pp->src;
    char text[INET_ADDRSTRLEN];

    ck_assert_int_eq(pp->src.ss_family, AF_INET);
    ck_assert_uint_eq(pp->srclen, sizeof(*in));
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    ck_assert_str_eq(text, addr);
    ck_assert_int_eq(ntohs(in->sin_port), port);
}

static void assert_v6(const sl_proxyproto_t *pp, const char *addr, int port)
{
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&pp->src;
    char text[INET6_ADDRSTRLEN];

    ck_assert_int_eq(pp->src.ss_family, AF_INET6);
    ck_assert_uint_eq(pp->srclen, sizeof(*in6));
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    ck_assert_str_eq(text, addr);
    ck_assert_int_eq(ntohs(in6->sin6_port), port);
}

static void every_split_str(const char *hdr, sl_proxyproto_t *out)
{
    every_split((const uint8_t *)hdr, strlen(hdr), out);
}

START_TEST(test_v1_tcp4)
{
    sl_proxyproto_t pp;

    every_split_str("PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\r\n", &pp);
    ck_assert_int_eq(pp.version, 1);
    assert_v4(&pp, "192.0.2.7", 56324);
}
END_TEST

START_TEST(test_v1_tcp6)
{
    sl_proxyproto_t pp;

    every_split_str("PROXY TCP6 2001:db8::7 2001:db8::1 65535 80\r\n", &pp);
    assert_v6(&pp, "2001:db8::7", 65535);
}
END_TEST

START_TEST(test_v1_unknown)
{
    sl_proxyproto_t pp;

    every_split_str("PROXY UNKNOWN\r\n", &pp);
    ck_assert_int_eq(pp.src.ss_family, AF_UNSPEC);
    /* the rest of an UNKNOWN line is ignored, as the spec asks */
    every_split_str("PROXY UNKNOWN ffff:f::1 ffff:f::2 1 2\r\n", &pp);
    ck_assert_int_eq(pp.src.ss_family, AF_UNSPEC);
}
END_TEST

START_TEST(test_v1_longest_line)
{
    static const char tcp6[] =
        "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
        " ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
    static const char unknown[] =
        "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
        " ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
    sl_proxyproto_t pp;

    every_split_str(tcp6, &pp);
    assert_v6(&pp, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 65535);
    /* the spec's worst case */
    ck_assert_uint_eq(strlen(unknown), SL_PROXYPROTO_V1_MAX);
    every_split_str(unknown, &pp);
    ck_assert_int_eq(pp.src.ss_family, AF_UNSPEC);
}
END_TEST

/* A v2 header: command CMD, family FAM, the address block ADDR (ALEN
 * bytes) and TLVLEN bytes of TLVs after it, into BUF. Its length. */
static size_t v2(uint8_t *buf, int cmd, int fam, const uint8_t *addr,
                 size_t alen, size_t tlvlen)
{
    size_t body = alen + tlvlen;

    memcpy(buf, sig, 12);
    buf[12] = (uint8_t)(0x20 | cmd);
    buf[13] = (uint8_t)fam;
    buf[14] = (uint8_t)(body >> 8);
    buf[15] = (uint8_t)body;
    if (alen > 0) {
        memcpy(buf + 16, addr, alen); /* ADDR may be NULL when empty */
    }
    memset(buf + 16 + alen, 0x04, tlvlen); /* NOOP TLV bytes */
    return 16 + body;
}

static const uint8_t v4_block[12] = {192, 0, 2,    7,    198,  51,
                                     100, 1, 0xdc, 0x04, 0x01, 0xbb};

START_TEST(test_v2_tcp4)
{
    uint8_t buf[256];
    sl_proxyproto_t pp;
    size_t n = v2(buf, 1, 0x11, v4_block, 12, 0);

    every_split(buf, n, &pp);
    ck_assert_int_eq(pp.version, 2);
    assert_v4(&pp, "192.0.2.7", 0xdc04);
}
END_TEST

START_TEST(test_v2_tcp6_with_tlvs)
{
    uint8_t block[36] = {0x20, 0x01, 0x0d, 0xb8};
    uint8_t buf[256];
    sl_proxyproto_t pp;
    size_t n;

    block[15] = 7;
    block[16] = 0x20;
    block[17] = 0x01;
    block[31] = 1;
    block[32] = 0x12;
    block[33] = 0x34;
    n = v2(buf, 1, 0x21, block, 36, 40);
    every_split(buf, n, &pp);
    assert_v6(&pp, "2001:db8::7", 0x1234);
}
END_TEST

START_TEST(test_v2_local_and_unspec_keep_peer)
{
    uint8_t buf[256];
    sl_proxyproto_t pp;
    size_t n;

    n = v2(buf, 0, 0x00, NULL, 0, 0); /* LOCAL: a health check */
    every_split(buf, n, &pp);
    ck_assert_int_eq(pp.src.ss_family, AF_UNSPEC);
    n = v2(buf, 0, 0x11, v4_block, 12, 0); /* LOCAL with addresses */
    every_split(buf, n, &pp);
    ck_assert_int_eq(pp.src.ss_family, AF_UNSPEC);
    n = v2(buf, 1, 0x00, NULL, 0, 0); /* PROXY, UNSPEC */
    every_split(buf, n, &pp);
    ck_assert_int_eq(pp.src.ss_family, AF_UNSPEC);
    n = v2(buf, 1, 0x12, v4_block, 12, 0); /* UDP over IPv4 */
    every_split(buf, n, &pp);
    ck_assert_int_eq(pp.src.ss_family, AF_UNSPEC);
}
END_TEST

START_TEST(test_v2_largest)
{
    static uint8_t buf[SL_PROXYPROTO_V2_MAX + 8];
    sl_proxyproto_t pp;
    const char *why;
    size_t n = v2(buf, 1, 0x11, v4_block, 12, 65535 - 12);

    ck_assert_uint_eq(n, SL_PROXYPROTO_V2_MAX);
    ck_assert_int_eq(sl_proxyproto_parse(buf, n - 1, &pp, &why), 0);
    ck_assert_int_eq(sl_proxyproto_parse(buf, n, &pp, &why), (long)n);
    assert_v4(&pp, "192.0.2.7", 0xdc04);
}
END_TEST

/* BAD (N bytes) is refused whole, and no prefix of it is a header. */
static void refused(const uint8_t *bad, size_t n)
{
    sl_proxyproto_t pp;
    const char *why;
    size_t k;
    long rc;

    for (k = 0; k < n; k++) {
        rc = sl_proxyproto_parse(bad, k, &pp, &why);
        ck_assert_msg(rc <= 0, "prefix %zu of a bad header taken: %ld", k, rc);
    }
    rc = sl_proxyproto_parse(bad, n, &pp, &why);
    ck_assert_msg(rc == -1, "bad header (%zu bytes) not refused: %ld", n, rc);
    ck_assert_ptr_nonnull(why);
}

START_TEST(test_v1_malformed)
{
    static const char *const bad[] = {
        "GET / HTTP/1.1\r\n\r\n",
        "PROXY\r\n",
        "PROXY \r\n",
        "proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n",
        "PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n",
        "PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 x\r\n",
        "PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n",
        "PROXY TCP4 ::1 5.6.7.8 1 2\r\n",
        "PROXY TCP6 1.2.3.4 ::1 1 2\r\n",
        "PROXY TCP6 ::1 ::g 1 2\r\n",
        "PROXY TCP4 1.2.3.4\r5.6.7.8 1 2\r\n",
    };
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        refused((const uint8_t *)bad[i], strlen(bad[i]));
}
END_TEST

START_TEST(test_v1_too_long)
{
    char line[200];
    sl_proxyproto_t pp;
    const char *why;

    memset(line, 'x', sizeof(line));
    memcpy(line, "PROXY UNKNOWN ", 14);
    /* no CRLF within the 107 bytes a line may have */
    ck_assert_int_eq(sl_proxyproto_parse((uint8_t *)line, 106, &pp, &why), 0);
    ck_assert_int_eq(sl_proxyproto_parse((uint8_t *)line, 107, &pp, &why), -1);
    ck_assert_int_eq(sl_proxyproto_parse((uint8_t *)line, 200, &pp, &why), -1);
}
END_TEST

START_TEST(test_v2_malformed)
{
    uint8_t buf[256];
    size_t n;

    /* a signature wrong in its last byte */
    n = v2(buf, 1, 0x11, v4_block, 12, 0);
    buf[11] = 0x0b;
    refused(buf, n);
    /* version 1 in the binary form, version 3 */
    n = v2(buf, 1, 0x11, v4_block, 12, 0);
    buf[12] = 0x11;
    refused(buf, n);
    buf[12] = 0x31;
    refused(buf, n);
    /* a command other than LOCAL and PROXY */
    buf[12] = 0x22;
    refused(buf, n);
    /* a length too short for the family's addresses */
    n = v2(buf, 1, 0x11, v4_block, 11, 0);
    refused(buf, n);
    n = v2(buf, 1, 0x21, v4_block, 12, 0);
    refused(buf, n);
    /* the v2 signature's first bytes, then something else */
    refused((const uint8_t *)"\r\nGET", 5);
}
END_TEST

static Suite *proxyproto_suite(void)
{
    Suite *s = suite_create("proxyproto");
    TCase *tc = tcase_create("proxyproto");

    tcase_add_test(tc, test_v1_tcp4);
    tcase_add_test(tc, test_v1_tcp6);
    tcase_add_test(tc, test_v1_unknown);
    tcase_add_test(tc, test_v1_longest_line);
    tcase_add_test(tc, test_v2_tcp4);
    tcase_add_test(tc, test_v2_tcp6_with_tlvs);
    tcase_add_test(tc, test_v2_local_and_unspec_keep_peer);
    tcase_add_test(tc, test_v2_largest);
    tcase_add_test(tc, test_v1_malformed);
    tcase_add_test(tc, test_v1_too_long);
    tcase_add_test(tc, test_v2_malformed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(proxyproto_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
