/* test_ws_handshake.c - check suite for worker/loop/ws_handshake.c: SHA-1
 * against FIPS 180's vectors, the accept key against RFC 6455's example,
 * every reason a handshake is refused (400 or 426), and the deflate
 * negotiation: what we accept of an offer, which offers we decline, and
 * that our answer always fits.
 */
#include "config.h"

#include <check.h>
#include <llhttp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/loop/ws.h"
#include "worker/loop/ws_internal.h"

static sl_req_t req;
static sl_hdr_t hdrs[32];

static void add(const char *name, const char *value)
{
    sl_hdr_t *h = &hdrs[req.nhdrs++];
    size_t nl = strlen(name), vl = strlen(value);

    ck_assert_int_le(req.nhdrs, 32);
    h->name_off = (uint32_t)req.hbuf.len;
    h->name_len = (uint32_t)nl;
    ck_assert_int_eq(sl_buf_append(&req.hbuf, name, nl), 0);
    h->val_off = (uint32_t)req.hbuf.len;
    h->val_len = (uint32_t)vl;
    ck_assert_int_eq(sl_buf_append(&req.hbuf, value, vl), 0);
}

/* A valid handshake request without its Sec-WebSocket-Extensions; SKIP
 * names a header to leave out. */
static void request(const char *skip)
{
    sl_buf_free(&req.hbuf);
    memset(&req, 0, sizeof(req));
    req.hdrs = hdrs;
    req.method = HTTP_GET;
    req.major = 1;
    req.minor = 1;
    if (!skip || strcmp(skip, "Host"))
        add("Host", "example.com");
    if (!skip || strcmp(skip, "Upgrade"))
        add("Upgrade", "websocket");
    if (!skip || strcmp(skip, "Connection"))
        add("Connection", "Upgrade");
    if (!skip || strcmp(skip, "Sec-WebSocket-Key"))
        add("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==");
    if (!skip || strcmp(skip, "Sec-WebSocket-Version"))
        add("Sec-WebSocket-Version", "13");
}

static void teardown(void)
{
    sl_buf_free(&req.hbuf);
}

static int handshake(bool deflate, sl_ws_handshake_t *hs)
{
    return sl_ws_handshake(&req, deflate, hs);
}

static void hex(const uint8_t *md, char *out)
{
    int i;

    for (i = 0; i < 20; i++)
        sprintf(out + 2 * i, "%02x", md[i]);
}

START_TEST(test_sha1_vectors)
{
    uint8_t md[20];
    char h[41], *million;

    sl_ws_sha1("abc", 3, md);
    hex(md, h);
    ck_assert_str_eq(h, "a9993e364706816aba3e25717850c26c9cd0d89d");
    sl_ws_sha1("", 0, md);
    hex(md, h);
    ck_assert_str_eq(h, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    sl_ws_sha1("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
               md);
    hex(md, h);
    ck_assert_str_eq(h, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    sl_ws_sha1("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
               "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
               112, md);
    hex(md, h);
    ck_assert_str_eq(h, "a49b2446a02c645bf419f995b67091253a04a259");
    million = malloc(1000000);
    memset(million, 'a', 1000000);
    sl_ws_sha1(million, 1000000, md);
    hex(md, h);
    ck_assert_str_eq(h, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
    free(million);
}
END_TEST

START_TEST(test_accept_key)
{
    sl_ws_handshake_t hs;
    char out[29];

    sl_ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", 24, out);
    ck_assert_str_eq(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    request(NULL);
    ck_assert(sl_ws_is_upgrade(&req));
    ck_assert_int_eq(handshake(true, &hs), 0);
    ck_assert_str_eq(hs.accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    ck_assert(!hs.deflate.on); /* not offered */
    ck_assert_str_eq(hs.extensions, "");
}
END_TEST

/* Token lists, any case, in any of several headers. */
START_TEST(test_lists)
{
    sl_ws_handshake_t hs;

    request("Connection");
    add("Connection", "keep-alive");
    add("connection", " keep-alive ,  UPGRADE ");
    ck_assert_int_eq(handshake(false, &hs), 0);
    request("Upgrade");
    add("upgrade", "h2c, WebSocket");
    ck_assert_int_eq(handshake(false, &hs), 0);
    /* a token is a whole list item, not a substring */
    request("Upgrade");
    add("Upgrade", "websockets");
    ck_assert(!sl_ws_is_upgrade(&req));
    ck_assert_int_eq(handshake(false, &hs), 400);
    request("Connection");
    add("Connection", "upgraded");
    ck_assert(!sl_ws_is_upgrade(&req));
}
END_TEST

START_TEST(test_refused_400)
{
    static const char *const bad_keys[] = {
        "",
        "dGhlIHNhbXBsZSBub25jZQ",   /* no padding */
        "dGhlIHNhbXBsZSBub25jZQ=",  /* short padding */
        "dGhlIHNhbXBsZSBub25jZ===", /* 15 bytes */
        "dGhlIHNhbXBsZSBub25jZQo=", /* 17 bytes */
        "dGhlIHNhbXBsZSBub25jZR==", /* stray bits in the last digit */
        "dGhlIHNhbXBsZSBub2*jZQ==", /* not base64 */
        "dGhlIHNhbXBsZSBub25jZQ==dGhl",
    };
    sl_ws_handshake_t hs;
    size_t i;

    request(NULL);
    req.method = HTTP_POST;
    ck_assert_int_eq(handshake(true, &hs), 400);
    request(NULL);
    req.minor = 0; /* HTTP/1.0 */
    ck_assert_int_eq(handshake(true, &hs), 400);
    request(NULL);
    req.has_body = req.chunked = true; /* found by fuzz_http */
    ck_assert_int_eq(handshake(true, &hs), 400);
    request(NULL);
    req.has_body = true;
    req.content_length = 5;
    ck_assert_int_eq(handshake(true, &hs), 400);
    request("Host");
    ck_assert_int_eq(handshake(true, &hs), 400);
    request("Upgrade");
    ck_assert_int_eq(handshake(true, &hs), 400);
    request("Connection");
    ck_assert_int_eq(handshake(true, &hs), 400);
    request("Sec-WebSocket-Key");
    ck_assert_int_eq(handshake(true, &hs), 400);
    for (i = 0; i < sizeof(bad_keys) / sizeof(bad_keys[0]); i++) {
        request("Sec-WebSocket-Key");
        add("Sec-WebSocket-Key", bad_keys[i]);
        ck_assert_msg(handshake(true, &hs) == 400, "key %s", bad_keys[i]);
    }
    /* two keys, two versions */
    request(NULL);
    add("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==");
    ck_assert_int_eq(handshake(true, &hs), 400);
    request(NULL);
    add("Sec-WebSocket-Version", "13");
    ck_assert_int_eq(handshake(true, &hs), 400);
}
END_TEST

START_TEST(test_refused_426)
{
    static const char *const versions[] = {"8", "12", "14", "", "13, 8", "013"};
    sl_ws_handshake_t hs;
    size_t i;

    request("Sec-WebSocket-Version");
    ck_assert_int_eq(handshake(true, &hs), 426);
    for (i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
        request("Sec-WebSocket-Version");
        add("Sec-WebSocket-Version", versions[i]);
        ck_assert_msg(handshake(true, &hs) == 426, "version %s", versions[i]);
    }
}
END_TEST

/* Negotiate from the header values given, NULL-terminated. */
static int offer(bool deflate, sl_ws_handshake_t *hs, ...)
{
    const char *v;
    va_list ap;

    request(NULL);
    va_start(ap, hs);
    while ((v = va_arg(ap, const char *)) != NULL)
        add("Sec-WebSocket-Extensions", v);
    va_end(ap);
    return handshake(deflate, hs);
}

START_TEST(test_deflate_plain)
{
    sl_ws_handshake_t hs;

    ck_assert_int_eq(offer(true, &hs, "permessage-deflate", NULL), 0);
    ck_assert(hs.deflate.on);
    ck_assert(hs.deflate.server_no_context_takeover); /* always, unasked */
    ck_assert(hs.deflate.client_no_context_takeover); /* asked, too */
    ck_assert_int_eq(hs.deflate.server_max_window_bits, 15);
    ck_assert_int_eq(hs.deflate.client_max_window_bits, 15);
    ck_assert_str_eq(hs.extensions,
                     "permessage-deflate; server_no_context_takeover; "
                     "client_no_context_takeover");
    /* switched off: not negotiated */
    ck_assert_int_eq(offer(false, &hs, "permessage-deflate", NULL), 0);
    ck_assert(!hs.deflate.on);
    ck_assert_str_eq(hs.extensions, "");
}
END_TEST

START_TEST(test_deflate_params)
{
    sl_ws_handshake_t hs;

    /* what a browser sends */
    ck_assert_int_eq(
        offer(true, &hs, "permessage-deflate; client_max_window_bits", NULL),
        0);
    ck_assert(hs.deflate.on);
    ck_assert_int_eq(hs.deflate.client_max_window_bits, 15);
    ck_assert_str_eq(hs.extensions,
                     "permessage-deflate; server_no_context_takeover; "
                     "client_no_context_takeover");
    /* everything, quoted values too */
    ck_assert_int_eq(
        offer(true, &hs,
              "permessage-deflate;client_no_context_takeover; "
              "server_no_context_takeover ;server_max_window_bits=\"10\"; "
              "client_max_window_bits = 9",
              NULL),
        0);
    ck_assert(hs.deflate.client_no_context_takeover);
    ck_assert_int_eq(hs.deflate.server_max_window_bits, 10);
    ck_assert_int_eq(hs.deflate.client_max_window_bits, 9);
    ck_assert_str_eq(hs.extensions,
                     "permessage-deflate; server_no_context_takeover; "
                     "client_no_context_takeover; server_max_window_bits=10; "
                     "client_max_window_bits=9");
    /* window bits 8 for our deflater: accepted (run-length matches) */
    ck_assert_int_eq(
        offer(true, &hs, "permessage-deflate; server_max_window_bits=8", NULL),
        0);
    ck_assert_int_eq(hs.deflate.server_max_window_bits, 8);
}
END_TEST

START_TEST(test_deflate_declined)
{
    static const char *const bad[] = {
        "permessage-deflate; server_max_window_bits", /* needs a value */
        "permessage-deflate; server_max_window_bits=16",
        "permessage-deflate; server_max_window_bits=7",
        "permessage-deflate; server_max_window_bits=010",
        "permessage-deflate; client_max_window_bits=1a",
        "permessage-deflate; client_max_window_bits=\"\"",
        "permessage-deflate; client_no_context_takeover=1",
        "permessage-deflate; server_no_context_takeover=\"x\"",
        "permessage-deflate; client_no_context_takeover; "
        "client_no_context_takeover", /* twice */
        "permessage-deflate; unknown_param",
        "permessage-deflate;", /* empty param */
        "permessage-deflate; ; client_no_context_takeover",
        "permessage-deflate; server_max_window_bits=\"1\\0\"x",
        "x-webkit-deflate-frame",
        "permessage-deflater",
        "",
        ",,,",
        "\"permessage-deflate\"",
    };
    sl_ws_handshake_t hs;
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_int_eq(offer(true, &hs, bad[i], NULL), 0);
        ck_assert_msg(!hs.deflate.on, "accepted %s", bad[i]);
        ck_assert_str_eq(hs.extensions, "");
    }
}
END_TEST

/* The first acceptable offer wins, across offers and headers. */
START_TEST(test_deflate_several_offers)
{
    sl_ws_handshake_t hs;

    ck_assert_int_eq(offer(true, &hs,
                           "foo; bar=\"a,b\", permessage-deflate; bogus, "
                           "permessage-deflate; client_max_window_bits=12, "
                           "permessage-deflate; client_max_window_bits=10",
                           NULL),
                     0);
    ck_assert(hs.deflate.on);
    ck_assert_int_eq(hs.deflate.client_max_window_bits, 12);
    ck_assert_int_eq(offer(true, &hs, "x-foo",
                           "permessage-deflate; server_max_window_bits=99",
                           "permessage-deflate; server_max_window_bits=11",
                           "permessage-deflate", NULL),
                     0);
    ck_assert(hs.deflate.on);
    ck_assert_int_eq(hs.deflate.server_max_window_bits, 11);
    ck_assert_str_eq(hs.extensions, "permessage-deflate; "
                                    "server_no_context_takeover; "
                                    "client_no_context_takeover; "
                                    "server_max_window_bits=11");
}
END_TEST

/* Every combination we can answer fits the handshake's buffer, and the
 * response builder never writes past a smaller one. */
START_TEST(test_response_fits)
{
    sl_ws_deflate_params_t d = {.on = true};
    char small[40];
    size_t n, longest = 0;
    int a, b, s, c;

    for (a = 0; a < 2; a++)
        for (b = 0; b < 2; b++)
            for (s = 8; s <= 15; s++)
                for (c = 8; c <= 15; c++) {
                    char out[SL_WS_EXTENSIONS_MAX];

                    d.server_no_context_takeover = a;
                    d.client_no_context_takeover = b;
                    d.server_max_window_bits = s;
                    d.client_max_window_bits = c;
                    n = sl_ws_deflate_response(&d, out, sizeof(out));
                    ck_assert_uint_gt(n, 0);
                    ck_assert_uint_eq(strlen(out), n);
                    if (n > longest)
                        longest = n;
                }
    /* the longest: all four, two-digit window bits */
    ck_assert_uint_eq(longest, strlen("permessage-deflate; "
                                      "server_no_context_takeover; "
                                      "client_no_context_takeover; "
                                      "server_max_window_bits=14; "
                                      "client_max_window_bits=14"));
    ck_assert_uint_lt(longest, SL_WS_EXTENSIONS_MAX);
    memset(small, 'x', sizeof(small));
    ck_assert_uint_eq(sl_ws_deflate_response(&d, small, sizeof(small)), 0);
    ck_assert_str_eq(small, "");
}
END_TEST

static Suite *ws_handshake_suite(void)
{
    Suite *s = suite_create("ws_handshake");
    TCase *tc = tcase_create("ws_handshake");

    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, test_sha1_vectors);
    tcase_add_test(tc, test_accept_key);
    tcase_add_test(tc, test_lists);
    tcase_add_test(tc, test_refused_400);
    tcase_add_test(tc, test_refused_426);
    tcase_add_test(tc, test_deflate_plain);
    tcase_add_test(tc, test_deflate_params);
    tcase_add_test(tc, test_deflate_declined);
    tcase_add_test(tc, test_deflate_several_offers);
    tcase_add_test(tc, test_response_fits);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ws_handshake_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
