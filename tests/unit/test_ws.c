/* test_ws.c - check suite for worker/loop/ws_rx.c and ws_tx.c, the frame
 * parser and writer, without compression (test_ws_deflate.c has that).
 *
 * RFC 6455 §5.7's examples byte for byte, then every way a client can
 * break the protocol and the close code each one earns, and the claim the
 * parser's design rests on: any split of the input gives the same events.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/ws_frames.h"
#include "worker/loop/ws.h"
#include "worker/loop/ws_internal.h"

#define MAX (1u << 20)

/* Parse S[0..N) whole into LOG with a fresh parser (limit MAX_SIZE). */
static void parse(const void *s, size_t n, size_t max_size, wf_log_t *log)
{
    sl_ws_rx_t *rx = sl_ws_rx_new(max_size, NULL);

    ck_assert_ptr_nonnull(rx);
    memset(log, 0, sizeof(*log));
    wf_feed(rx, s, n, 0, log);
    sl_ws_rx_free(rx);
}

/* Parsing S[0..N) ends with EV_ERROR and CODE. */
static void assert_error(const void *s, size_t n, unsigned code)
{
    wf_log_t log;

    parse(s, n, MAX, &log);
    ck_assert_int_ge(log.n, 1);
    ck_assert_int_eq(log.ev[log.n - 1].kind, SL_WS_EV_ERROR);
    ck_assert_uint_eq(log.ev[log.n - 1].code, code);
    ck_assert_uint_gt(log.ev[log.n - 1].len, 0); /* a reason says why */
    wf_log_free(&log);
}

static void assert_frame_error(uint8_t b0, const void *p, size_t n,
                               unsigned code)
{
    sl_buf_t b = {0};

    wf_frame(&b, b0, p, n, 0);
    assert_error(b.data, b.len, code);
    sl_buf_free(&b);
}

/* ---- RFC 6455 §5.7 ---- */

static const uint8_t hello_masked[] = {0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d,
                                       0x7f, 0x9f, 0x4d, 0x51, 0x58};

START_TEST(test_rfc_single_unmasked)
{
    static const uint8_t want[] = {0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f};
    sl_ws_tx_t *tx = sl_ws_tx_new(NULL);
    sl_buf_t out = {0};

    /* what the writer sends, byte for byte */
    ck_assert_int_eq(sl_ws_tx_frame(tx, &out, SL_WS_OP_TEXT, "Hello", 5), 0);
    ck_assert_uint_eq(out.len, sizeof(want));
    ck_assert(memcmp(out.data, want, sizeof(want)) == 0);
    /* and what a client may not send */
    assert_error(want, sizeof(want), SL_WS_CLOSE_PROTOCOL);
    sl_buf_free(&out);
    sl_ws_tx_free(tx);
}
END_TEST

START_TEST(test_rfc_single_masked)
{
    wf_log_t log;

    parse(hello_masked, sizeof(hello_masked), MAX, &log);
    ck_assert_int_eq(log.n, 1);
    ck_assert_int_eq(log.ev[0].kind, SL_WS_EV_MESSAGE);
    ck_assert_int_eq(log.ev[0].opcode, SL_WS_OP_TEXT);
    ck_assert_uint_eq(log.ev[0].len, 5);
    ck_assert(memcmp(log.ev[0].data, "Hello", 5) == 0);
    ck_assert_uint_eq(log.consumed, sizeof(hello_masked));
    wf_log_free(&log);
}
END_TEST

START_TEST(test_rfc_fragmented)
{
    static const uint8_t unmasked[] = {0x01, 0x03, 0x48, 0x65, 0x6c,
                                       0x80, 0x02, 0x6c, 0x6f};
    sl_buf_t b = {0};
    wf_log_t log;

    wf_mask_all(unmasked, sizeof(unmasked), &b);
    parse(b.data, b.len, MAX, &log);
    ck_assert_int_eq(log.n, 1);
    ck_assert_int_eq(log.ev[0].opcode, SL_WS_OP_TEXT);
    ck_assert_uint_eq(log.ev[0].len, 5);
    ck_assert(memcmp(log.ev[0].data, "Hello", 5) == 0);
    wf_log_free(&log);
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_rfc_ping_pong)
{
    static const uint8_t ping[] = {0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f};
    static const uint8_t pong[] = {0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d,
                                   0x7f, 0x9f, 0x4d, 0x51, 0x58};
    sl_ws_tx_t *tx = sl_ws_tx_new(NULL);
    sl_buf_t out = {0}, in = {0};
    wf_log_t log;

    ck_assert_int_eq(sl_ws_tx_frame(tx, &out, SL_WS_OP_PING, "Hello", 5), 0);
    ck_assert_uint_eq(out.len, sizeof(ping));
    ck_assert(memcmp(out.data, ping, sizeof(ping)) == 0);
    parse(pong, sizeof(pong), MAX, &log);
    ck_assert_int_eq(log.n, 1);
    ck_assert_int_eq(log.ev[0].kind, SL_WS_EV_PONG);
    ck_assert_uint_eq(log.ev[0].len, 5);
    ck_assert(memcmp(log.ev[0].data, "Hello", 5) == 0);
    wf_log_free(&log);
    /* a client's ping reaches us as a PING event */
    wf_mask_all(out.data ? (const uint8_t *)out.data : ping, out.len, &in);
    parse(in.data, in.len, MAX, &log);
    ck_assert_int_eq(log.ev[0].kind, SL_WS_EV_PING);
    ck_assert(memcmp(log.ev[0].data, "Hello", 5) == 0);
    wf_log_free(&log);
    sl_buf_free(&in);
    sl_buf_free(&out);
    sl_ws_tx_free(tx);
}
END_TEST

/* 256 bytes take a 16-bit length, 64 KiB a 64-bit one. */
START_TEST(test_rfc_lengths)
{
    static const uint8_t h256[] = {0x82, 0x7E, 0x01, 0x00};
    static const uint8_t h64k[] = {0x82, 0x7F, 0x00, 0x00, 0x00,
                                   0x00, 0x00, 0x01, 0x00, 0x00};
    sl_ws_tx_t *tx = sl_ws_tx_new(NULL);
    uint8_t *p = malloc(65536);
    sl_buf_t out = {0}, in = {0};
    wf_log_t log;
    size_t i;

    for (i = 0; i < 65536; i++)
        p[i] = (uint8_t)(i * 7);
    ck_assert_int_eq(sl_ws_tx_frame(tx, &out, SL_WS_OP_BINARY, p, 256), 0);
    ck_assert_uint_eq(out.len, 4 + 256);
    ck_assert(memcmp(out.data, h256, 4) == 0);
    ck_assert(memcmp(out.data + 4, p, 256) == 0);
    out.len = 0;
    ck_assert_int_eq(sl_ws_tx_frame(tx, &out, SL_WS_OP_BINARY, p, 65536), 0);
    ck_assert_uint_eq(out.len, 10 + 65536);
    ck_assert(memcmp(out.data, h64k, 10) == 0);
    /* the boundaries: 125 is 7-bit, 126 16-bit, 65535 16-bit */
    out.len = 0;
    ck_assert_int_eq(sl_ws_tx_frame(tx, &out, SL_WS_OP_BINARY, p, 125), 0);
    ck_assert_uint_eq((uint8_t)out.data[1], 125);
    out.len = 0;
    ck_assert_int_eq(sl_ws_tx_frame(tx, &out, SL_WS_OP_BINARY, p, 126), 0);
    ck_assert_uint_eq((uint8_t)out.data[1], 126);
    out.len = 0;
    ck_assert_int_eq(sl_ws_tx_frame(tx, &out, SL_WS_OP_BINARY, p, 65535), 0);
    ck_assert_uint_eq((uint8_t)out.data[1], 126);
    ck_assert_uint_eq(out.len, 4 + 65535);
    /* and each parses back, masked by a client */
    out.len = 0;
    ck_assert_int_eq(sl_ws_tx_frame(tx, &out, SL_WS_OP_BINARY, p, 256), 0);
    ck_assert_int_eq(sl_ws_tx_frame(tx, &out, SL_WS_OP_BINARY, p, 65536), 0);
    wf_mask_all((uint8_t *)out.data, out.len, &in);
    parse(in.data, in.len, MAX, &log);
    ck_assert_int_eq(log.n, 2);
    ck_assert_uint_eq(log.ev[0].len, 256);
    ck_assert_uint_eq(log.ev[1].len, 65536);
    ck_assert(memcmp(log.ev[1].data, p, 65536) == 0);
    ck_assert_int_eq(log.ev[1].opcode, SL_WS_OP_BINARY);
    wf_log_free(&log);
    sl_buf_free(&in);
    sl_buf_free(&out);
    free(p);
    sl_ws_tx_free(tx);
}
END_TEST

/* ---- fragmentation ---- */

START_TEST(test_interleaved_control)
{
    sl_buf_t b = {0};
    wf_log_t log;

    wf_frame(&b, 0x01, "Hel", 3, 0);
    wf_frame(&b, 0x89, "p1", 2, 0);
    wf_frame(&b, 0x00, "", 0, 0); /* an empty middle fragment */
    wf_frame(&b, 0x8A, "", 0, 0);
    wf_frame(&b, 0x80, "lo", 2, 0);
    wf_frame(&b, 0x82, "", 0, 0); /* an empty binary message */
    parse(b.data, b.len, MAX, &log);
    ck_assert_int_eq(log.n, 4);
    ck_assert_int_eq(log.ev[0].kind, SL_WS_EV_PING);
    ck_assert(memcmp(log.ev[0].data, "p1", 2) == 0);
    ck_assert_int_eq(log.ev[1].kind, SL_WS_EV_PONG);
    ck_assert_uint_eq(log.ev[1].len, 0);
    ck_assert_int_eq(log.ev[2].kind, SL_WS_EV_MESSAGE);
    ck_assert_uint_eq(log.ev[2].len, 5);
    ck_assert(memcmp(log.ev[2].data, "Hello", 5) == 0);
    ck_assert_int_eq(log.ev[3].opcode, SL_WS_OP_BINARY);
    ck_assert_uint_eq(log.ev[3].len, 0);
    wf_log_free(&log);
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_fragment_errors)
{
    sl_buf_t b = {0};

    /* a continuation with no message started */
    assert_frame_error(0x80, "x", 1, SL_WS_CLOSE_PROTOCOL);
    assert_frame_error(0x00, "x", 1, SL_WS_CLOSE_PROTOCOL);
    /* a new data frame inside a fragmented message */
    wf_frame(&b, 0x01, "a", 1, 0);
    wf_frame(&b, 0x81, "b", 1, 0);
    assert_error(b.data, b.len, SL_WS_CLOSE_PROTOCOL);
    b.len = 0;
    wf_frame(&b, 0x02, "a", 1, 0);
    wf_frame(&b, 0x02, "b", 1, 0);
    assert_error(b.data, b.len, SL_WS_CLOSE_PROTOCOL);
    sl_buf_free(&b);
}
END_TEST

/* A 4-byte character split between two fragments at every position. */
START_TEST(test_utf8_across_fragments)
{
    static const char text[] = "a\xf0\x9f\x98\x80z"; /* a😀z */
    size_t n = sizeof(text) - 1, cut;

    for (cut = 0; cut <= n; cut++) {
        sl_buf_t b = {0};
        wf_log_t log;

        wf_frame(&b, 0x01, text, cut, 0);
        wf_frame(&b, 0x80, text + cut, n - cut, 0);
        parse(b.data, b.len, MAX, &log);
        ck_assert_msg(log.n == 1 && log.ev[0].kind == SL_WS_EV_MESSAGE,
                      "cut at %zu", cut);
        ck_assert(memcmp(log.ev[0].data, text, n) == 0);
        wf_log_free(&log);
        sl_buf_free(&b);
    }
}
END_TEST

START_TEST(test_utf8_errors)
{
    sl_buf_t b = {0};
    wf_log_t log;

    assert_frame_error(0x81, "\xc0\x80", 2, SL_WS_CLOSE_INVALID_DATA);
    assert_frame_error(0x81, "\xed\xa0\x80", 3, SL_WS_CLOSE_INVALID_DATA);
    /* cut inside a character at FIN */
    assert_frame_error(0x81, "ok\xf0\x9f\x98", 5, SL_WS_CLOSE_INVALID_DATA);
    wf_frame(&b, 0x01, "ok\xf0\x9f", 4, 0);
    wf_frame(&b, 0x80, "\x98", 1, 0);
    assert_error(b.data, b.len, SL_WS_CLOSE_INVALID_DATA);
    /* binary is not checked */
    b.len = 0;
    wf_frame(&b, 0x82, "\xff\xfe", 2, 0);
    parse(b.data, b.len, MAX, &log);
    ck_assert_int_eq(log.ev[0].kind, SL_WS_EV_MESSAGE);
    wf_log_free(&log);
    /* a bad first fragment fails before the message ends */
    b.len = 0;
    wf_frame(&b, 0x01, "\xff", 1, 0);
    parse(b.data, b.len, MAX, &log);
    ck_assert_int_eq(log.n, 1);
    ck_assert_uint_eq(log.ev[0].code, SL_WS_CLOSE_INVALID_DATA);
    wf_log_free(&log);
    sl_buf_free(&b);
}
END_TEST

/* ---- header errors ---- */

START_TEST(test_header_errors)
{
    static const uint8_t unmasked_close[] = {0x88, 0x00};
    static const uint8_t huge[] = {0x82, 0xFF, 0x80, 0, 0, 0, 0,
                                   0,    0,    0,    1, 2, 3, 4};
    char big[126];
    int op;

    memset(big, 'x', sizeof(big));
    assert_error(unmasked_close, sizeof(unmasked_close), SL_WS_CLOSE_PROTOCOL);
    for (op = 3; op <= 7; op++)
        assert_frame_error((uint8_t)(0x80 | op), "", 0, SL_WS_CLOSE_PROTOCOL);
    for (op = 0xB; op <= 0xF; op++)
        assert_frame_error((uint8_t)(0x80 | op), "", 0, SL_WS_CLOSE_PROTOCOL);
    /* RSV1 (no deflate), RSV2, RSV3 */
    assert_frame_error(0xC1, "x", 1, SL_WS_CLOSE_PROTOCOL);
    assert_frame_error(0xA1, "x", 1, SL_WS_CLOSE_PROTOCOL);
    assert_frame_error(0x91, "x", 1, SL_WS_CLOSE_PROTOCOL);
    assert_frame_error(0xC9, "x", 1, SL_WS_CLOSE_PROTOCOL);
    /* control frames: not fragmented, at most 125 bytes */
    assert_frame_error(0x09, "x", 1, SL_WS_CLOSE_PROTOCOL);
    assert_frame_error(0x0A, "x", 1, SL_WS_CLOSE_PROTOCOL);
    assert_frame_error(0x89, big, 126, SL_WS_CLOSE_PROTOCOL);
    assert_frame_error(0x88, big, 126, SL_WS_CLOSE_PROTOCOL);
    /* a 64-bit length with its top bit set */
    assert_error(huge, sizeof(huge), SL_WS_CLOSE_PROTOCOL);
}
END_TEST

/* Longer length encodings than needed are accepted for data frames
 * (RFC 6455 §5.2 asks for the minimal one, but nothing is gained by
 * refusing); a control frame's 7-bit length must be at most 125, so an
 * extended one is refused whatever it says. */
START_TEST(test_non_minimal_lengths)
{
    sl_buf_t b = {0};
    wf_log_t log;

    wf_frame(&b, 0x81, "Hello", 5, 2);
    wf_frame(&b, 0x81, "Hello", 5, 8);
    wf_frame(&b, 0x89, "p", 1, 8);
    parse(b.data, b.len, MAX, &log);
    ck_assert_int_eq(log.n, 3);
    ck_assert_uint_eq(log.ev[0].len, 5);
    ck_assert_uint_eq(log.ev[1].len, 5);
    ck_assert_int_eq(log.ev[2].kind, SL_WS_EV_ERROR);
    ck_assert_uint_eq(log.ev[2].code, SL_WS_CLOSE_PROTOCOL);
    wf_log_free(&log);
    sl_buf_free(&b);
}
END_TEST

/* ---- close frames ---- */

static void close_frame(sl_buf_t *b, unsigned code, const char *reason)
{
    uint8_t p[125];
    size_t n = strlen(reason);

    p[0] = (uint8_t)(code >> 8);
    p[1] = (uint8_t)code;
    memcpy(p + 2, reason, n);
    b->len = 0;
    wf_frame(b, 0x88, p, 2 + n, 0);
}

START_TEST(test_close)
{
    static const unsigned ok[] = {1000, 1001, 1002, 1003, 1007, 1008, 1009,
                                  1010, 1011, 1012, 1013, 1014, 3000, 4999};
    static const unsigned bad[] = {0,    999,  1004, 1005, 1006,
                                   1015, 1016, 2999, 5000, 65535};
    sl_buf_t b = {0};
    wf_log_t log;
    size_t i;

    for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        close_frame(&b, ok[i], "bye");
        parse(b.data, b.len, MAX, &log);
        ck_assert_int_eq(log.n, 1);
        ck_assert_int_eq(log.ev[0].kind, SL_WS_EV_CLOSE);
        ck_assert_uint_eq(log.ev[0].code, ok[i]);
        ck_assert_uint_eq(log.ev[0].len, 3);
        ck_assert(memcmp(log.ev[0].data, "bye", 3) == 0);
        wf_log_free(&log);
    }
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        close_frame(&b, bad[i], "");
        assert_error(b.data, b.len, SL_WS_CLOSE_PROTOCOL);
    }
    /* no payload: 1005; one byte: a protocol error */
    b.len = 0;
    wf_frame(&b, 0x88, "", 0, 0);
    parse(b.data, b.len, MAX, &log);
    ck_assert_int_eq(log.ev[0].kind, SL_WS_EV_CLOSE);
    ck_assert_uint_eq(log.ev[0].code, SL_WS_CLOSE_NO_STATUS);
    ck_assert_uint_eq(log.ev[0].len, 0);
    wf_log_free(&log);
    assert_frame_error(0x88, "\x03", 1, SL_WS_CLOSE_PROTOCOL);
    /* a reason that is not UTF-8 */
    close_frame(&b, 1000, "\xc3\x28");
    assert_error(b.data, b.len, SL_WS_CLOSE_INVALID_DATA);
    close_frame(&b, 1000, "ab\xe2\x82"); /* cut inside a character */
    assert_error(b.data, b.len, SL_WS_CLOSE_INVALID_DATA);
    sl_buf_free(&b);
}
END_TEST

/* After a close or an error the parser takes nothing more. */
START_TEST(test_nothing_after_close)
{
    sl_ws_rx_t *rx = sl_ws_rx_new(MAX, NULL);
    sl_buf_t b = {0};
    sl_ws_event_t ev;
    long k;

    wf_frame(&b, 0x88, "\x03\xe8", 2, 0);
    wf_frame(&b, 0x81, "after", 5, 0);
    k = sl_ws_rx_feed(rx, (uint8_t *)b.data, b.len, &ev);
    ck_assert_int_eq(ev.kind, SL_WS_EV_CLOSE);
    ck_assert_int_eq(k, 2 + 4 + 2);
    ck_assert_int_eq(
        sl_ws_rx_feed(rx, (uint8_t *)b.data + k, b.len - (size_t)k, &ev), 0);
    ck_assert_int_eq(ev.kind, SL_WS_EV_NONE);
    sl_ws_rx_free(rx);
    sl_buf_free(&b);
}
END_TEST

/* ---- limits ---- */

START_TEST(test_max_size)
{
    char p[101];
    sl_buf_t b = {0};
    wf_log_t log;

    memset(p, 'a', sizeof(p));
    /* exactly the limit is fine */
    wf_frame(&b, 0x82, p, 100, 0);
    parse(b.data, b.len, 100, &log);
    ck_assert_int_eq(log.ev[0].kind, SL_WS_EV_MESSAGE);
    wf_log_free(&log);
    /* one more fails at the header, before the payload arrives */
    b.len = 0;
    wf_frame(&b, 0x82, p, 101, 0);
    parse(b.data, 2 + 4, 100, &log);
    ck_assert_int_eq(log.n, 1);
    ck_assert_uint_eq(log.ev[0].code, SL_WS_CLOSE_TOO_BIG);
    wf_log_free(&log);
    /* fragments add up */
    b.len = 0;
    wf_frame(&b, 0x01, p, 60, 0);
    wf_frame(&b, 0x89, "x", 1, 0);
    wf_frame(&b, 0x80, p, 41, 0);
    parse(b.data, b.len, 100, &log);
    ck_assert_int_eq(log.n, 2);
    ck_assert_int_eq(log.ev[0].kind, SL_WS_EV_PING);
    ck_assert_uint_eq(log.ev[1].code, SL_WS_CLOSE_TOO_BIG);
    wf_log_free(&log);
    /* a declared 2^62 bytes: no allocation of that, just 1009 */
    {
        static const uint8_t h[] = {0x82, 0xFF, 0x40, 0, 0, 0, 0,
                                    0,    0,    0,    1, 2, 3, 4};
        parse(h, sizeof(h), MAX, &log);
        ck_assert_uint_eq(log.ev[0].code, SL_WS_CLOSE_TOO_BIG);
        wf_log_free(&log);
    }
    sl_buf_free(&b);
}
END_TEST

/* ---- any split of the input gives the same events ---- */

START_TEST(test_any_split)
{
    static const size_t chunks[] = {1, 2, 3, 5, 7, 13, 64, 200};
    uint8_t big[300];
    sl_buf_t b = {0};
    wf_log_t whole, part;
    size_t i;

    for (i = 0; i < sizeof(big); i++)
        big[i] = (uint8_t)i;
    wf_frame(&b, 0x81, "Hello", 5, 0);
    wf_frame(&b, 0x01, "a\xf0\x9f", 3, 0);
    wf_frame(&b, 0x89, "ping!", 5, 0);
    wf_frame(&b, 0x00, "\x98\x80", 2, 0);
    wf_frame(&b, 0x80, "b", 1, 0);
    wf_frame(&b, 0x82, big, sizeof(big), 0);
    wf_frame(&b, 0x8A, "", 0, 0);
    wf_frame(&b, 0x82, big, 5, 8);
    wf_frame(&b, 0x88,
             "\x03\xe8"
             "done",
             6, 0);
    parse(b.data, b.len, MAX, &whole);
    ck_assert_int_eq(whole.n, 7);
    ck_assert_int_eq(whole.ev[6].kind, SL_WS_EV_CLOSE);
    ck_assert_uint_eq(whole.consumed, b.len);
    for (i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
        sl_ws_rx_t *rx = sl_ws_rx_new(MAX, NULL);

        memset(&part, 0, sizeof(part));
        wf_feed(rx, b.data, b.len, chunks[i], &part);
        wf_log_same(&whole, &part);
        wf_log_free(&part);
        sl_ws_rx_free(rx);
    }
    wf_log_free(&whole);
    sl_buf_free(&b);
}
END_TEST

/* ---- buffers: take, reuse, trim ---- */

START_TEST(test_take_and_trim)
{
    sl_ws_rx_t *rx = sl_ws_rx_new(MAX, NULL);
    sl_buf_t b = {0}, m = {0};
    sl_ws_event_t ev;
    long k;

    wf_frame(&b, 0x82, "first", 5, 0);
    wf_frame(&b, 0x82, "second", 6, 0);
    k = sl_ws_rx_feed(rx, (uint8_t *)b.data, b.len, &ev);
    ck_assert_int_eq(ev.kind, SL_WS_EV_MESSAGE);
    /* taken: the caller owns it, the next message starts afresh */
    ck_assert_int_eq(sl_buf_append(&m, "old", 3), 0);
    sl_ws_rx_take(rx, &m);
    ck_assert_uint_eq(m.len, 5);
    ck_assert(memcmp(m.data, "first", 5) == 0);
    ck_assert_ptr_eq(m.data, (const char *)ev.data);
    sl_ws_rx_feed(rx, (uint8_t *)b.data + k, b.len - (size_t)k, &ev);
    ck_assert_int_eq(ev.kind, SL_WS_EV_MESSAGE);
    ck_assert(memcmp(ev.data, "second", 6) == 0);
    ck_assert_ptr_ne((const char *)ev.data, m.data);
    /* not taken: trimmed away once idle; taking then gives nothing */
    sl_ws_rx_feed(rx, NULL, 0, &ev);
    sl_ws_rx_trim(rx);
    sl_ws_rx_take(rx, &m);
    ck_assert_ptr_null(m.data);
    ck_assert_uint_eq(m.len, 0);
    sl_ws_rx_free(rx);
    sl_buf_free(&b);
}
END_TEST

/* A control frame's payload buffer is taken only for a payload and given
 * back by a trim, except while a control frame's payload is coming in. */
START_TEST(test_control_payload_trimmed)
{
    static const uint8_t bye[] = {0x0f, 0xa1, 'b', 'y', 'e'}; /* 4001 */
    sl_ws_rx_t *rx = sl_ws_rx_new(MAX, NULL);
    size_t base = sl_ws_rx_held(rx);
    sl_buf_t b = {0};
    sl_ws_event_t ev;
    long k;

    wf_frame(&b, 0x89, NULL, 0, 0); /* an empty ping: no buffer */
    ck_assert_int_eq(sl_ws_rx_feed(rx, (uint8_t *)b.data, b.len, &ev),
                     (long)b.len);
    ck_assert_int_eq(ev.kind, SL_WS_EV_PING);
    ck_assert_uint_eq(ev.len, 0);
    ck_assert_uint_eq(sl_ws_rx_held(rx), base);
    b.len = 0;
    wf_frame(&b, 0x89, "are you there", 13, 0);
    k = sl_ws_rx_feed(rx, (uint8_t *)b.data, b.len - 5, &ev);
    ck_assert_int_eq(ev.kind, SL_WS_EV_NONE);
    ck_assert_uint_gt(sl_ws_rx_held(rx), base);
    sl_ws_rx_trim(rx); /* mid-payload: kept */
    ck_assert_uint_gt(sl_ws_rx_held(rx), base);
    sl_ws_rx_feed(rx, (uint8_t *)b.data + k, b.len - (size_t)k, &ev);
    ck_assert_int_eq(ev.kind, SL_WS_EV_PING);
    ck_assert_uint_eq(ev.len, 13);
    ck_assert(memcmp(ev.data, "are you there", 13) == 0);
    sl_ws_rx_trim(rx); /* between frames: given back */
    ck_assert_uint_eq(sl_ws_rx_held(rx), base);
    b.len = 0;
    wf_frame(&b, 0x88, bye, sizeof(bye), 0); /* taken again for a close */
    sl_ws_rx_feed(rx, (uint8_t *)b.data, b.len, &ev);
    ck_assert_int_eq(ev.kind, SL_WS_EV_CLOSE);
    ck_assert_uint_eq(ev.code, 4001);
    ck_assert_uint_eq(ev.reason_len, 3);
    ck_assert(memcmp(ev.reason, "bye", 3) == 0);
    sl_ws_rx_free(rx); /* with it (ASan: no leak) */
    sl_buf_free(&b);
}
END_TEST

/* ---- the writer's close frames ---- */

START_TEST(test_tx_close)
{
    char reason[200];
    sl_buf_t out = {0};
    wf_log_t log;
    sl_buf_t in = {0};

    /* no code: an empty payload; NULL with 0 bytes is fine */
    ck_assert_int_eq(sl_ws_tx_close(&out, 0, NULL, 0), 0);
    ck_assert_uint_eq(out.len, 2);
    ck_assert_uint_eq((uint8_t)out.data[0], 0x88);
    ck_assert_uint_eq((uint8_t)out.data[1], 0);
    out.len = 0;
    ck_assert_int_eq(sl_ws_tx_close(&out, 1000, NULL, 0), 0);
    ck_assert_uint_eq(out.len, 4);
    ck_assert(memcmp(out.data, "\x88\x02\x03\xe8", 4) == 0);
    /* 122 ASCII bytes then é: the cut at 123 would split é */
    memset(reason, 'r', sizeof(reason));
    reason[122] = '\xc3';
    reason[123] = '\xa9';
    out.len = 0;
    ck_assert_int_eq(sl_ws_tx_close(&out, 1001, reason, 124), 0);
    ck_assert_uint_eq((uint8_t)out.data[1], 2 + 122);
    /* ASCII is cut at exactly 123 bytes */
    out.len = 0;
    ck_assert_int_eq(sl_ws_tx_close(&out, 4000, reason, 122), 0);
    ck_assert_int_eq(sl_ws_tx_close(&out, 4000, "r", 1), 0);
    memset(reason, 'r', sizeof(reason));
    ck_assert_int_eq(sl_ws_tx_close(&out, 4001, reason, sizeof(reason)), 0);
    ck_assert_uint_eq((uint8_t)out.data[out.len - 125 - 1], 125);
    /* and a client reads them back */
    wf_mask_all((uint8_t *)out.data, out.len, &in);
    parse(in.data, in.len, MAX, &log);
    ck_assert_int_eq(log.ev[0].kind, SL_WS_EV_CLOSE);
    ck_assert_uint_eq(log.ev[0].code, 4000);
    ck_assert_uint_eq(log.ev[0].len, 122);
    wf_log_free(&log);
    sl_buf_free(&in);
    sl_buf_free(&out);
}
END_TEST

START_TEST(test_tx_empty_and_control)
{
    sl_ws_tx_t *tx = sl_ws_tx_new(NULL);
    sl_buf_t out = {0};

    ck_assert_int_eq(sl_ws_tx_frame(tx, &out, SL_WS_OP_TEXT, NULL, 0), 0);
    ck_assert_uint_eq(out.len, 2);
    ck_assert(memcmp(out.data, "\x81\x00", 2) == 0);
    ck_assert_int_eq(sl_ws_tx_frame(tx, &out, SL_WS_OP_PONG, NULL, 0), 0);
    ck_assert(memcmp(out.data + 2, "\x8a\x00", 2) == 0);
    sl_ws_tx_trim(tx);
    sl_buf_free(&out);
    sl_ws_tx_free(tx);
}
END_TEST

static Suite *ws_suite(void)
{
    Suite *s = suite_create("ws");
    TCase *tc = tcase_create("ws");

    tcase_add_test(tc, test_rfc_single_unmasked);
    tcase_add_test(tc, test_rfc_single_masked);
    tcase_add_test(tc, test_rfc_fragmented);
    tcase_add_test(tc, test_rfc_ping_pong);
    tcase_add_test(tc, test_rfc_lengths);
    tcase_add_test(tc, test_interleaved_control);
    tcase_add_test(tc, test_fragment_errors);
    tcase_add_test(tc, test_utf8_across_fragments);
    tcase_add_test(tc, test_utf8_errors);
    tcase_add_test(tc, test_header_errors);
    tcase_add_test(tc, test_non_minimal_lengths);
    tcase_add_test(tc, test_close);
    tcase_add_test(tc, test_nothing_after_close);
    tcase_add_test(tc, test_max_size);
    tcase_add_test(tc, test_any_split);
    tcase_add_test(tc, test_take_and_trim);
    tcase_add_test(tc, test_control_payload_trimmed);
    tcase_add_test(tc, test_tx_close);
    tcase_add_test(tc, test_tx_empty_and_control);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ws_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
