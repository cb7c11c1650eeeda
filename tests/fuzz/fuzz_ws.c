/* fuzz_ws.c - a libFuzzer target for the WebSocket codec (ws.h): the frame
 * parser with and without deflate, the deflate offer parser, and the
 * writer's frames read back by the parser.
 *
 * The input's first three bytes choose: byte 0 what to fuzz and the
 * deflate settings, byte 1 the window bits and the message limit, byte 2
 * the seed of the chunk sizes the rest is fed in (so that a frame split
 * anywhere is tried). Whatever the input, the codec must not crash, leak,
 * or break its promises; a broken promise aborts (a finding).
 *
 * Built by a --enable-fuzzing configuration (tests/fuzz/run.sh).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "worker/loop/ws.h"
#include "worker/loop/ws_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_ws: %s:%d: %s\n", __FILE__, __LINE__,        \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

typedef struct {
    sl_ws_deflate_params_t d;
    size_t max_size;
    uint32_t rng;
} config_t;

static uint32_t next(config_t *c)
{
    c->rng = c->rng * 1103515245u + 12345u;
    return c->rng >> 16;
}

static void configure(config_t *c, const uint8_t *h)
{
    memset(c, 0, sizeof(*c));
    c->d.on = (h[0] & 4) != 0;
    c->d.server_no_context_takeover = true;
    c->d.client_no_context_takeover = (h[0] & 8) != 0;
    c->d.server_max_window_bits = 8 + (h[1] & 7);
    c->d.client_max_window_bits = 8 + ((h[1] >> 3) & 7);
    c->max_size = (h[1] & 0x40) ? 1u << 20 : 16 + (h[1] & 0x3f) * 8;
    c->rng = h[2] | 1u;
}

/* Feed P[0..N) to RX in chunks of random sizes, checking every event. */
static void feed(config_t *c, sl_ws_rx_t *rx, const uint8_t *p, size_t n,
                 sl_buf_t *msgs)
{
    size_t pos = 0;

    while (pos < n) {
        size_t chunk = 1 + next(c) % 300, end;

        end = n - pos < chunk ? n : pos + chunk;
        while (pos < end) {
            sl_ws_event_t ev;
            long k = sl_ws_rx_feed(rx, p + pos, end - pos, &ev);
            sl_buf_t m = {0};

            if (k < 0)
                return; /* out of memory: a clean failure */
            CHECK((size_t)k <= end - pos);
            pos += (size_t)k;
            /* an idle or busy parser holds about the limit, never more */
            CHECK(sl_ws_rx_held(rx) <= 2 * c->max_size + 160 * 1024);
            switch (ev.kind) {
            case SL_WS_EV_NONE:
                CHECK(k > 0 || end == pos || pos == n);
                if (k == 0)
                    return;
                break;
            case SL_WS_EV_MESSAGE:
                CHECK(ev.len <= c->max_size);
                CHECK(ev.opcode == SL_WS_OP_TEXT ||
                      ev.opcode == SL_WS_OP_BINARY);
                if (ev.opcode == SL_WS_OP_TEXT)
                    CHECK(sl_utf8_check(ev.data, ev.len) == SL_UTF8_VALID);
                sl_ws_rx_take(rx, &m);
                CHECK(m.len == ev.len);
                if (msgs != NULL) {
                    uint8_t h[9];
                    uint64_t len = m.len;
                    int i;

                    h[0] = (uint8_t)ev.opcode;
                    for (i = 0; i < 8; i++)
                        h[1 + i] = (uint8_t)(len >> (56 - 8 * i));
                    CHECK(sl_buf_append(msgs, h, 9) == 0);
                    CHECK(sl_buf_append(msgs, m.data, m.len) == 0);
                }
                sl_buf_free(&m);
                if (next(c) % 4 == 0)
                    sl_ws_rx_trim(rx);
                break;
            case SL_WS_EV_PING:
            case SL_WS_EV_PONG:
                CHECK(ev.len <= 125);
                break;
            case SL_WS_EV_CLOSE:
                CHECK(ev.code == SL_WS_CLOSE_NO_STATUS ||
                      sl_ws_close_code_valid(ev.code));
                CHECK(ev.reason_len <= 123);
                CHECK(sl_utf8_check(ev.reason, ev.reason_len) == SL_UTF8_VALID);
                /* closed: takes nothing more */
                CHECK(pos == n ||
                      sl_ws_rx_feed(rx, p + pos, n - pos, &ev) == 0);
                return;
            case SL_WS_EV_ERROR:
                CHECK(ev.code == SL_WS_CLOSE_PROTOCOL ||
                      ev.code == SL_WS_CLOSE_INVALID_DATA ||
                      ev.code == SL_WS_CLOSE_TOO_BIG);
                CHECK(ev.reason_len > 0);
                return;
            default:
                CHECK(0);
            }
        }
    }
}

static void fuzz_rx(config_t *c, const uint8_t *p, size_t n)
{
    sl_ws_rx_t *rx = sl_ws_rx_new(c->max_size, &c->d);

    if (rx == NULL)
        return;
    feed(c, rx, p, n, NULL);
    sl_ws_rx_free(rx);
}

/* The offer parser: whatever it accepts, it answers with a value that
 * fits and that, read back as an offer, means the same. */
static void fuzz_offer(const uint8_t *p, size_t n)
{
    sl_ws_deflate_params_t d, back;
    char resp[SL_WS_EXTENSIONS_MAX];
    size_t len;

    if (!sl_ws_deflate_offer((const char *)p, n, &d))
        return;
    CHECK(d.on && d.server_no_context_takeover);
    CHECK(d.server_max_window_bits >= 8 && d.server_max_window_bits <= 15);
    CHECK(d.client_max_window_bits >= 8 && d.client_max_window_bits <= 15);
    len = sl_ws_deflate_response(&d, resp, sizeof(resp));
    CHECK(len > 0 && len == strlen(resp));
    CHECK(sl_ws_deflate_offer(resp, len, &back));
    CHECK(back.client_no_context_takeover == d.client_no_context_takeover);
    CHECK(back.server_max_window_bits == d.server_max_window_bits);
    CHECK(back.client_max_window_bits == d.client_max_window_bits);
}

/* Messages cut from the input go through the writer, are masked as a
 * client would, and must come back from the parser as they were. */
static void fuzz_tx(config_t *c, const uint8_t *p, size_t n)
{
    sl_ws_deflate_params_t rd = c->d;
    sl_ws_tx_t *tx = sl_ws_tx_new(&c->d);
    sl_ws_rx_t *rx;
    sl_buf_t out = {0}, masked = {0}, want = {0}, got = {0};
    size_t pos = 0, i;

    /* the parser inflates with the window our writer deflates with */
    rd.client_max_window_bits = c->d.server_max_window_bits;
    c->max_size = (size_t)1 << 20; /* every message fits */
    rx = sl_ws_rx_new(c->max_size, &rd);
    if (tx == NULL || rx == NULL)
        goto out;
    while (pos < n) {
        size_t len = next(c) % 2 ? next(c) % 40 : next(c) % 2000;
        int op;
        uint8_t h[9];

        if (len > n - pos)
            len = n - pos;
        op = sl_utf8_check(p + pos, len) == SL_UTF8_VALID && next(c) % 2
                 ? SL_WS_OP_TEXT
                 : SL_WS_OP_BINARY;
        if (sl_ws_tx_frame(tx, &out, op, p + pos, len) < 0)
            goto out;
        h[0] = (uint8_t)op;
        for (i = 0; i < 8; i++)
            h[1 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
        CHECK(sl_buf_append(&want, h, 9) == 0);
        CHECK(sl_buf_append(&want, p + pos, len) == 0);
        pos += len;
        if (next(c) % 8 == 0)
            CHECK(sl_ws_tx_frame(tx, &out, SL_WS_OP_PING, p,
                                 n < 125 ? n : 125) == 0);
    }
    /* a close with a reason cut on a character's boundary */
    if (sl_utf8_check(p, n) == SL_UTF8_VALID)
        CHECK(sl_ws_tx_close(&out, 1000, (const char *)p, n) == 0);
    /* mask every frame */
    for (pos = 0; pos < out.len;) {
        const uint8_t *f = (const uint8_t *)out.data + pos;
        uint64_t len = f[1] & 0x7f;
        size_t hl = 2;
        uint8_t key[4] = {(uint8_t)next(c), (uint8_t)next(c), (uint8_t)next(c),
                          (uint8_t)next(c)};

        CHECK(!(f[1] & 0x80));
        if (len == 126) {
            len = (uint64_t)f[2] << 8 | f[3];
            hl = 4;
            CHECK(len >= 126);
        } else if (len == 127) {
            len = 0;
            for (i = 0; i < 8; i++)
                len = len << 8 | f[2 + i];
            hl = 10;
            CHECK(len > 0xffff);
        }
        CHECK(pos + hl + len <= out.len);
        CHECK(sl_buf_append(&masked, f, hl) == 0);
        masked.data[masked.len - hl + 1] |= (char)0x80;
        CHECK(sl_buf_append(&masked, key, 4) == 0);
        CHECK(sl_buf_reserve(&masked, len) == 0);
        for (i = 0; i < len; i++)
            masked.data[masked.len + i] = (char)(f[hl + i] ^ key[i & 3]);
        masked.len += len;
        pos += hl + len;
    }
    feed(c, rx, (const uint8_t *)masked.data, masked.len, &got);
    CHECK(got.len == want.len);
    CHECK(want.len == 0 || memcmp(got.data, want.data, want.len) == 0);
out:
    sl_buf_free(&out);
    sl_buf_free(&masked);
    sl_buf_free(&want);
    sl_buf_free(&got);
    sl_ws_tx_free(tx);
    sl_ws_rx_free(rx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    config_t c;

    if (size < 3)
        return 0;
    configure(&c, data);
    switch (data[0] & 3) {
    case 0:
    case 1:
        fuzz_rx(&c, data + 3, size - 3);
        break;
    case 2:
        fuzz_offer(data + 3, size - 3);
        break;
    default:
        fuzz_tx(&c, data + 3, size - 3);
        break;
    }
    return 0;
}
