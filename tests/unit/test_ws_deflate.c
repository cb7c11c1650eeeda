/* test_ws_deflate.c - check suite for worker/loop/ws_deflate.c and the
 * compressed paths of ws_rx.c and ws_tx.c: RFC 7692 §7.2.3's examples,
 * round trips through the writer and the parser for every window size,
 * with and without the client's context takeover, and the inflate bomb,
 * stopped early and measured.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/ws_frames.h"
#include "worker/loop/ws.h"
#include "worker/loop/ws_internal.h"

#define MAX (1u << 20)

static sl_ws_deflate_params_t params(bool cnct, int sbits, int cbits)
{
    sl_ws_deflate_params_t d = {
        .on = true,
        .server_no_context_takeover = true,
        .client_no_context_takeover = cnct,
        .server_max_window_bits = sbits,
        .client_max_window_bits = cbits,
    };
    return d;
}

/* Parse the server-style (unmasked) frames S[0..N) as a client would send
 * them, with deflate D. */
static void parse_unmasked(const uint8_t *s, size_t n,
                           const sl_ws_deflate_params_t *d, size_t max_size,
                           wf_log_t *log)
{
    sl_ws_rx_t *rx = sl_ws_rx_new(max_size, d);
    sl_buf_t in = {0};

    ck_assert_ptr_nonnull(rx);
    wf_mask_all(s, n, &in);
    memset(log, 0, sizeof(*log));
    wf_feed(rx, in.data, in.len, 0, log);
    sl_buf_free(&in);
    sl_ws_rx_free(rx);
}

static void assert_hello(const wf_log_t *log, int i)
{
    ck_assert_int_gt(log->n, i);
    ck_assert_int_eq(log->ev[i].kind, SL_WS_EV_MESSAGE);
    ck_assert_uint_eq(log->ev[i].len, 5);
    ck_assert(memcmp(log->ev[i].data, "Hello", 5) == 0);
}

/* ---- RFC 7692 §7.2.3 ---- */

START_TEST(test_rfc_hello)
{
    static const uint8_t want[] = {0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00};
    static const uint8_t frame[] = {0xc1, 0x07, 0xf2, 0x48, 0xcd,
                                    0xc9, 0xc9, 0x07, 0x00};
    static const uint8_t frags[] = {0x41, 0x03, 0xf2, 0x48, 0xcd, 0x80,
                                    0x04, 0xc9, 0xc9, 0x07, 0x00};
    sl_ws_deflate_params_t d = params(false, 15, 15);
    z_stream *z = sl_ws_deflater_new(15);
    sl_buf_t out = {0};
    wf_log_t log;

    /* our deflate makes the RFC's bytes */
    ck_assert_int_eq(sl_ws_deflate(z, "Hello", 5, &out), 0);
    ck_assert_uint_eq(out.len, sizeof(want));
    ck_assert(memcmp(out.data, want, sizeof(want)) == 0);
    sl_ws_deflater_free(z);
    sl_buf_free(&out);
    parse_unmasked(frame, sizeof(frame), &d, MAX, &log);
    assert_hello(&log, 0);
    wf_log_free(&log);
    parse_unmasked(frags, sizeof(frags), &d, MAX, &log);
    assert_hello(&log, 0);
    wf_log_free(&log);
}
END_TEST

/* §7.2.3.2: the second message refers back into the first. */
START_TEST(test_rfc_shared_window)
{
    static const uint8_t two[] = {0xc1, 0x07, 0xf2, 0x48, 0xcd, 0xc9,
                                  0xc9, 0x07, 0x00, 0xc1, 0x05, 0xf2,
                                  0x00, 0x11, 0x00, 0x00};
    sl_ws_deflate_params_t d = params(false, 15, 15);
    wf_log_t log;

    parse_unmasked(two, sizeof(two), &d, MAX, &log);
    ck_assert_int_eq(log.n, 2);
    assert_hello(&log, 0);
    assert_hello(&log, 1);
    wf_log_free(&log);
    /* a client that promised no context takeover broke its word: the
     * inflater was dropped, the reference is bad data */
    d = params(true, 15, 15);
    parse_unmasked(two, sizeof(two), &d, MAX, &log);
    ck_assert_int_eq(log.n, 2);
    assert_hello(&log, 0);
    ck_assert_int_eq(log.ev[1].kind, SL_WS_EV_ERROR);
    ck_assert_uint_eq(log.ev[1].code, SL_WS_CLOSE_INVALID_DATA);
    wf_log_free(&log);
}
END_TEST

/* §7.2.3.3-5: a stored block, a final block, two blocks. */
START_TEST(test_rfc_blocks)
{
    static const uint8_t stored[] = {0xc1, 0x0b, 0x00, 0x05, 0x00, 0xfa, 0xff,
                                     0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x00};
    static const uint8_t final[] = {0xc1, 0x08, 0xf3, 0x48, 0xcd,
                                    0xc9, 0xc9, 0x07, 0x00, 0x00};
    static const uint8_t blocks[] = {0xc1, 0x0d, 0xf2, 0x48, 0x05,
                                     0x00, 0x00, 0x00, 0xff, 0xff,
                                     0xca, 0xc9, 0xc9, 0x07, 0x00};
    sl_ws_deflate_params_t d = params(false, 15, 15);
    wf_log_t log;

    parse_unmasked(stored, sizeof(stored), &d, MAX, &log);
    assert_hello(&log, 0);
    wf_log_free(&log);
    parse_unmasked(final, sizeof(final), &d, MAX, &log);
    assert_hello(&log, 0);
    wf_log_free(&log);
    parse_unmasked(blocks, sizeof(blocks), &d, MAX, &log);
    assert_hello(&log, 0);
    wf_log_free(&log);
}
END_TEST

START_TEST(test_bad_data_and_rsv)
{
    static const uint8_t garbage[] = {0xc1, 0x04, 0xff, 0xff, 0xff, 0xff};
    static const uint8_t rsv_cont[] = {0x41, 0x03, 0xf2, 0x48, 0xcd, 0xc0,
                                       0x04, 0xc9, 0xc9, 0x07, 0x00};
    static const uint8_t rsv_ping[] = {0xc9, 0x00};
    static const uint8_t bad_text[] = {0xc1, 0x05, 0xfa, 0x0f,
                                       0x00, 0x00, 0x00}; /* "\xff" */
    sl_ws_deflate_params_t d = params(false, 15, 15);
    wf_log_t log;

    parse_unmasked(garbage, sizeof(garbage), &d, MAX, &log);
    ck_assert_uint_eq(log.ev[0].code, SL_WS_CLOSE_INVALID_DATA);
    wf_log_free(&log);
    parse_unmasked(rsv_cont, sizeof(rsv_cont), &d, MAX, &log);
    ck_assert_uint_eq(log.ev[0].code, SL_WS_CLOSE_PROTOCOL);
    wf_log_free(&log);
    parse_unmasked(rsv_ping, sizeof(rsv_ping), &d, MAX, &log);
    ck_assert_uint_eq(log.ev[0].code, SL_WS_CLOSE_PROTOCOL);
    wf_log_free(&log);
    parse_unmasked(bad_text, sizeof(bad_text), &d, MAX, &log);
    ck_assert_int_eq(log.ev[0].kind, SL_WS_EV_ERROR);
    ck_assert_uint_eq(log.ev[0].code, SL_WS_CLOSE_INVALID_DATA);
    wf_log_free(&log);
}
END_TEST

/* ---- round trips ---- */

static void fill(uint8_t *p, size_t n, unsigned kind)
{
    size_t i;
    uint32_t x = 12345;

    for (i = 0; i < n; i++) {
        x = x * 1103515245 + 12345;
        if (kind == 0)
            p[i] = (uint8_t)("the quick brown fox "[i % 20]); /* text */
        else
            p[i] = (uint8_t)(x >> 16); /* noise: does not compress */
    }
}

/* Messages through the writer with D, then through a parser with D; every
 * window size, both takeovers, every size class. */
START_TEST(test_round_trips)
{
    static const size_t sizes[] = {0,   1,   31,   32,    33,
                                   125, 126, 1000, 65536, 200000};
    uint8_t *p = malloc(200000);
    int bits, cnct, kind;
    size_t i;

    for (bits = 8; bits <= 15; bits++)
        for (cnct = 0; cnct < 2; cnct++)
            for (kind = 0; kind < 2; kind++) {
                sl_ws_deflate_params_t d = params(cnct, bits, bits);
                sl_ws_tx_t *tx = sl_ws_tx_new(&d);
                sl_buf_t out = {0};
                wf_log_t log;

                fill(p, 200000, (unsigned)kind);
                for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
                    int op = kind == 0 ? SL_WS_OP_TEXT : SL_WS_OP_BINARY;
                    size_t before = out.len;

                    ck_assert_int_eq(sl_ws_tx_frame(tx, &out, op, p, sizes[i]),
                                     0);
                    /* compressible and long enough: compressed, smaller
                     * (just over the minimum, deflate may not pay) */
                    if (kind == 0 && sizes[i] >= 125) {
                        ck_assert((uint8_t)out.data[before] & 0x40);
                        ck_assert_uint_lt(out.len - before, sizes[i]);
                    }
                    if (kind == 1 || sizes[i] < SL_WS_DEFLATE_MIN)
                        ck_assert(!((uint8_t)out.data[before] & 0x40));
                }
                parse_unmasked((uint8_t *)out.data, out.len, &d, MAX, &log);
                ck_assert_int_eq(log.n, sizeof(sizes) / sizeof(sizes[0]));
                for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
                    ck_assert_int_eq(log.ev[i].kind, SL_WS_EV_MESSAGE);
                    ck_assert_uint_eq(log.ev[i].len, sizes[i]);
                    ck_assert_msg(sizes[i] == 0 ||
                                      memcmp(log.ev[i].data, p, sizes[i]) == 0,
                                  "bits %d size %zu", bits, sizes[i]);
                }
                wf_log_free(&log);
                sl_buf_free(&out);
                sl_ws_tx_free(tx);
            }
    free(p);
}
END_TEST

/* A client that keeps its context: each message refers back to the ones
 * before, and the parser, keeping its inflater, follows. For window bits
 * 9..15 (a client's zlib cannot make 8). */
START_TEST(test_client_context_takeover)
{
    static const char *const msgs[] = {
        "a message that the next ones will repeat",
        "a message that the next ones will repeat, and then some",
        "a message that the next ones will repeat",
    };
    int bits;
    size_t i;

    for (bits = 9; bits <= 15; bits++) {
        sl_ws_deflate_params_t d = params(false, 15, bits);
        z_stream *z = sl_ws_deflater_new(bits);
        sl_buf_t frames = {0}, body = {0};
        wf_log_t log;
        size_t first = 0;

        for (i = 0; i < 3; i++) {
            uint8_t h[2] = {0xc1, 0};

            body.len = 0;
            ck_assert_int_eq(sl_ws_deflate(z, msgs[i], strlen(msgs[i]), &body),
                             0);
            ck_assert_uint_lt(body.len, 126);
            if (i == 0)
                first = body.len;
            else if (i == 2)
                ck_assert_uint_lt(body.len, first); /* the context paid */
            h[1] = (uint8_t)body.len;
            ck_assert_int_eq(sl_buf_append(&frames, h, 2), 0);
            ck_assert_int_eq(sl_buf_append(&frames, body.data, body.len), 0);
        }
        parse_unmasked((uint8_t *)frames.data, frames.len, &d, MAX, &log);
        ck_assert_int_eq(log.n, 3);
        for (i = 0; i < 3; i++) {
            ck_assert_uint_eq(log.ev[i].len, strlen(msgs[i]));
            ck_assert(memcmp(log.ev[i].data, msgs[i], log.ev[i].len) == 0);
        }
        wf_log_free(&log);
        sl_buf_free(&frames);
        sl_buf_free(&body);
        sl_ws_deflater_free(z);
    }
}
END_TEST

/* A compressed message fed byte by byte gives the same events. */
START_TEST(test_compressed_any_split)
{
    sl_ws_deflate_params_t d = params(false, 15, 15);
    sl_ws_tx_t *tx = sl_ws_tx_new(&d);
    uint8_t p[3000];
    sl_buf_t out = {0}, in = {0};
    wf_log_t whole, part;
    size_t chunk;

    fill(p, sizeof(p), 0);
    ck_assert_int_eq(sl_ws_tx_frame(tx, &out, SL_WS_OP_TEXT, p, sizeof(p)), 0);
    ck_assert_int_eq(sl_ws_tx_frame(tx, &out, SL_WS_OP_PING, "x", 1), 0);
    ck_assert_int_eq(sl_ws_tx_frame(tx, &out, SL_WS_OP_BINARY, p, 100), 0);
    wf_mask_all((uint8_t *)out.data, out.len, &in);
    for (chunk = 0; chunk <= 7; chunk++) {
        sl_ws_rx_t *rx = sl_ws_rx_new(MAX, &d);

        memset(&part, 0, sizeof(part));
        wf_feed(rx, in.data, in.len, chunk, &part);
        if (chunk == 0)
            whole = part;
        else {
            wf_log_same(&whole, &part);
            wf_log_free(&part);
        }
        sl_ws_rx_free(rx);
    }
    ck_assert_int_eq(whole.n, 3);
    ck_assert_uint_eq(whole.ev[0].len, sizeof(p));
    wf_log_free(&whole);
    sl_buf_free(&in);
    sl_buf_free(&out);
    sl_ws_tx_free(tx);
}
END_TEST

/* ---- the thread's deflater ---- */

static void *other_thread(void *arg)
{
    (void)arg;
    return sl_ws_deflater_thread(15);
}

/* One deflater per thread, reset for each message: a message never
 * refers back into the one before (our no context takeover), whichever
 * connection sent it. Making one per message cost 1.2 ms a message. */
START_TEST(test_thread_deflater)
{
    sl_ws_deflate_params_t d = params(true, 15, 15);
    sl_ws_tx_t *a = sl_ws_tx_new(&d), *b = sl_ws_tx_new(&d);
    z_stream *z = sl_ws_deflater_thread(15), *other = NULL;
    uint8_t p[2000];
    sl_buf_t out = {0};
    pthread_t t;
    int i;

    ck_assert_ptr_nonnull(z);
    ck_assert_ptr_eq(sl_ws_deflater_thread(15), z); /* kept */
    ck_assert_int_eq(pthread_create(&t, NULL, other_thread, NULL), 0);
    ck_assert_int_eq(pthread_join(t, (void **)&other), 0);
    ck_assert_ptr_nonnull(other);
    ck_assert_ptr_ne(other, z); /* its own, freed when it ended */
    fill(p, sizeof(p), 0);
    /* the same message twice, from two writers in turn: each compresses
     * to the same bytes, and each inflates alone */
    for (i = 0; i < 4; i++) {
        size_t start = out.len;
        wf_log_t log;

        ck_assert_int_eq(
            sl_ws_tx_frame(i % 2 ? b : a, &out, SL_WS_OP_TEXT, p, sizeof(p)),
            0);
        if (i > 0)
            ck_assert(memcmp(out.data, out.data + start, start / i) == 0);
        parse_unmasked((uint8_t *)out.data + start, out.len - start, &d, MAX,
                       &log);
        ck_assert_int_eq(log.ev[0].kind, SL_WS_EV_MESSAGE);
        ck_assert_uint_eq(log.ev[0].len, sizeof(p));
        wf_log_free(&log);
    }
    /* another window: another deflater, for the window asked */
    ck_assert_ptr_nonnull(sl_ws_deflater_thread(10));
    ck_assert_int_eq(sl_ws_deflater_thread(15) != NULL, 1);
    sl_buf_free(&out);
    sl_ws_tx_free(a);
    sl_ws_tx_free(b);
}
END_TEST

/* ---- limits and memory ---- */

/* A compressed message one byte over the limit fails; at the limit it
 * passes. */
START_TEST(test_max_size_after_inflate)
{
    sl_ws_deflate_params_t d = params(false, 15, 15);
    sl_ws_tx_t *tx = sl_ws_tx_new(&d);
    uint8_t p[5001];
    sl_buf_t out = {0};
    wf_log_t log;

    fill(p, sizeof(p), 0);
    ck_assert_int_eq(sl_ws_tx_frame(tx, &out, SL_WS_OP_TEXT, p, 5000), 0);
    ck_assert_uint_lt(out.len, 1000);
    parse_unmasked((uint8_t *)out.data, out.len, &d, 5000, &log);
    ck_assert_int_eq(log.ev[0].kind, SL_WS_EV_MESSAGE);
    wf_log_free(&log);
    out.len = 0;
    ck_assert_int_eq(sl_ws_tx_frame(tx, &out, SL_WS_OP_TEXT, p, 5001), 0);
    parse_unmasked((uint8_t *)out.data, out.len, &d, 5000, &log);
    ck_assert_int_eq(log.ev[0].kind, SL_WS_EV_ERROR);
    ck_assert_uint_eq(log.ev[0].code, SL_WS_CLOSE_TOO_BIG);
    wf_log_free(&log);
    sl_buf_free(&out);
    sl_ws_tx_free(tx);
}
END_TEST

/* 64 MiB of zeros, compressed (about 64 KiB), against a 1 MiB limit: the
 * parser stops with 1009 after a few KiB of input, holding about the
 * limit. */
static void bomb(size_t max_size, size_t *read, size_t *peak)
{
    const size_t big = (size_t)64 << 20, step = (size_t)1 << 20;
    sl_ws_deflate_params_t d = params(true, 15, 15);
    uint8_t *zeros = calloc(1, step);
    z_stream *z = sl_ws_deflater_new(15);
    sl_buf_t body = {0}, frame = {0};
    sl_ws_rx_t *rx = sl_ws_rx_new(max_size, &d);
    size_t i, pos = 0;
    int flags;

    /* one stream, flushed per MiB; only the last flush's tail dropped */
    for (i = 0; i < big / step; i++) {
        ck_assert_int_eq(sl_ws_deflate(z, zeros, step, &body), 0);
        if (i + 1 < big / step)
            ck_assert_int_eq(sl_buf_append(&body, sl_ws_deflate_tail, 4), 0);
    }
    ck_assert_uint_lt(body.len, 128 * 1024);
    wf_frame(&frame, 0xc2, body.data, body.len, 0);
    *peak = 0;
    flags = 0;
    while (pos < frame.len) {
        sl_ws_event_t ev;
        size_t n = frame.len - pos < 4096 ? frame.len - pos : 4096;
        long k = sl_ws_rx_feed(rx, (uint8_t *)frame.data + pos, n, &ev);

        ck_assert_int_ge(k, 0);
        pos += (size_t)k;
        if (sl_ws_rx_held(rx) > *peak)
            *peak = sl_ws_rx_held(rx);
        if (ev.kind != SL_WS_EV_NONE) {
            ck_assert_int_eq(ev.kind, SL_WS_EV_ERROR);
            ck_assert_uint_eq(ev.code, SL_WS_CLOSE_TOO_BIG);
            flags = 1;
            break;
        }
    }
    ck_assert_int_eq(flags, 1);
    *read = pos;
    printf("inflate bomb: 64 MiB of zeros in %zu bytes of frame, limit "
           "%zu: 1009 after reading %zu bytes, peak held %zu bytes\n",
           frame.len, max_size, pos, *peak);
    sl_ws_rx_free(rx);
    sl_ws_deflater_free(z);
    sl_buf_free(&body);
    sl_buf_free(&frame);
    free(zeros);
}

START_TEST(test_inflate_bomb)
{
    size_t read, peak;

    bomb(1u << 20, &read, &peak);
    /* zeros inflate about 1000:1: 1 MiB takes about 1 KiB of input */
    ck_assert_uint_lt(read, 8 * 1024);
    ck_assert_uint_le(peak, (1u << 20) + 1 + 64 * 1024);
    bomb(16u << 20, &read, &peak);
    ck_assert_uint_lt(read, 32 * 1024);
    ck_assert_uint_le(peak, (16u << 20) + 1 + 64 * 1024);
}
END_TEST

/* What an idle connection holds, measured and bounded. */
START_TEST(test_memory_held)
{
    sl_ws_deflate_params_t keep = params(false, 15, 15),
                           drop = params(true, 15, 15);
    sl_ws_rx_t *rx_keep = sl_ws_rx_new(MAX, &keep),
               *rx_drop = sl_ws_rx_new(MAX, &drop);
    sl_ws_tx_t *tx = sl_ws_tx_new(&keep);
    size_t idle_rx = sl_ws_rx_held(rx_keep), idle_tx = sl_ws_tx_held(tx);
    uint8_t p[4000];
    sl_buf_t out = {0}, in = {0};
    wf_log_t log = {0};
    size_t after_keep, after_drop;

    fill(p, sizeof(p), 0);
    ck_assert_int_eq(sl_ws_tx_frame(tx, &out, SL_WS_OP_TEXT, p, sizeof(p)), 0);
    ck_assert_uint_eq(sl_ws_tx_held(tx), idle_tx); /* nothing kept */
    wf_mask_all((uint8_t *)out.data, out.len, &in);
    wf_feed(rx_keep, in.data, in.len, 0, &log);
    ck_assert_int_eq(log.ev[0].kind, SL_WS_EV_MESSAGE);
    wf_log_free(&log);
    wf_feed(rx_drop, in.data, in.len, 0, &log);
    ck_assert_int_eq(log.ev[0].kind, SL_WS_EV_MESSAGE);
    wf_log_free(&log);
    sl_ws_rx_trim(rx_keep);
    sl_ws_rx_trim(rx_drop);
    after_keep = sl_ws_rx_held(rx_keep);
    after_drop = sl_ws_rx_held(rx_drop);
    printf("idle: rx %zu bytes, tx %zu bytes; after a compressed message: "
           "rx %zu bytes with the client's context kept, %zu without; "
           "the thread's deflater %zu bytes (one per thread, none per "
           "connection)\n",
           idle_rx, idle_tx, after_keep, after_drop, sl_ws_tx_peak(tx));
    ck_assert_uint_le(idle_rx + idle_tx, 2048);
    ck_assert_uint_eq(after_drop, idle_rx);
    ck_assert_uint_gt(after_keep, 32 * 1024); /* the 32 KiB window */
    sl_buf_free(&in);
    sl_buf_free(&out);
    sl_ws_rx_free(rx_keep);
    sl_ws_rx_free(rx_drop);
    sl_ws_tx_free(tx);
}
END_TEST

static Suite *ws_deflate_suite(void)
{
    Suite *s = suite_create("ws_deflate");
    TCase *tc = tcase_create("ws_deflate");

    tcase_set_timeout(tc, 20); /* the bomb compresses 128 MiB of zeros */
    tcase_add_test(tc, test_rfc_hello);
    tcase_add_test(tc, test_rfc_shared_window);
    tcase_add_test(tc, test_rfc_blocks);
    tcase_add_test(tc, test_bad_data_and_rsv);
    tcase_add_test(tc, test_round_trips);
    tcase_add_test(tc, test_client_context_takeover);
    tcase_add_test(tc, test_compressed_any_split);
    tcase_add_test(tc, test_thread_deflater);
    tcase_add_test(tc, test_max_size_after_inflate);
    tcase_add_test(tc, test_inflate_bomb);
    tcase_add_test(tc, test_memory_held);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ws_deflate_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
