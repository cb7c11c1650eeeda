/* ws_frames.h - what the WebSocket codec's suites share: frames built and
 * masked as a client would send them, and a parser's events recorded, with
 * copies of their payloads, for comparison.
 */
#ifndef SL_TEST_WS_FRAMES_H
#define SL_TEST_WS_FRAMES_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "worker/loop/ws.h"

static const uint8_t wf_key[4] = {0x37, 0xfa, 0x21, 0x3d}; /* RFC 6455's */

/* Append a client frame: byte B0 (FIN, RSV, opcode), masked with wf_key,
 * carrying P[0..N), its length in the shortest form (or in FORM bytes:
 * 0 shortest, 2 or 8 for the longer encodings). */
static inline void wf_frame(sl_buf_t *b, uint8_t b0, const void *p, size_t n,
                            int form)
{
    uint8_t h[14];
    size_t hl = 2, i;
    const uint8_t *s = p;

    h[0] = b0;
    if (form == 0 && n < 126) {
        h[1] = (uint8_t)(0x80 | n);
    } else if (form != 8 && n <= 0xffff) {
        h[1] = 0x80 | 126;
        h[2] = (uint8_t)(n >> 8);
        h[3] = (uint8_t)n;
        hl = 4;
    } else {
        h[1] = 0x80 | 127;
        for (i = 0; i < 8; i++)
            h[2 + i] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
        hl = 10;
    }
    memcpy(h + hl, wf_key, 4);
    hl += 4;
    ck_assert_int_eq(sl_buf_append(b, h, hl), 0);
    ck_assert_int_eq(sl_buf_reserve(b, n), 0);
    for (i = 0; i < n; i++)
        b->data[b->len + i] = (char)(s[i] ^ wf_key[i & 3]);
    b->len += n;
}

/* Turn the server frames in S[0..N) into client frames (masked with
 * wf_key) appended to OUT: what a peer would send back. */
static inline void wf_mask_all(const uint8_t *s, size_t n, sl_buf_t *out)
{
    size_t pos = 0;

    while (pos < n) {
        uint64_t len = s[pos + 1] & 0x7f;
        size_t hl = 2, i;

        ck_assert(!(s[pos + 1] & 0x80)); /* a server frame is unmasked */
        if (len == 126) {
            len = (uint64_t)s[pos + 2] << 8 | s[pos + 3];
            hl = 4;
        } else if (len == 127) {
            len = 0;
            for (i = 0; i < 8; i++)
                len = len << 8 | s[pos + 2 + i];
            hl = 10;
        }
        ck_assert_uint_le(pos + hl + len, n);
        ck_assert_int_eq(sl_buf_append(out, s + pos, hl), 0);
        out->data[out->len - hl + 1] |= (char)0x80;
        ck_assert_int_eq(sl_buf_append(out, wf_key, 4), 0);
        ck_assert_int_eq(sl_buf_reserve(out, len), 0);
        for (i = 0; i < len; i++)
            out->data[out->len + i] = (char)(s[pos + hl + i] ^ wf_key[i & 3]);
        out->len += len;
        pos += hl + len;
    }
}

/* One recorded event, its payload or reason copied. */
typedef struct {
    int kind, opcode;
    unsigned code;
    size_t len;
    uint8_t *data; /* owned */
} wf_event_t;

typedef struct {
    wf_event_t ev[64];
    int n;
    size_t consumed; /* bytes the parser took */
    int oom;
} wf_log_t;

static inline void wf_log_free(wf_log_t *log)
{
    int i;

    for (i = 0; i < log->n; i++)
        free(log->ev[i].data);
    memset(log, 0, sizeof(*log));
}

/* Feed S[0..N) to RX in pieces of CHUNK bytes (0: all at once), taking
 * every message, recording every event into LOG. */
static inline void wf_feed(sl_ws_rx_t *rx, const void *s, size_t n,
                           size_t chunk, wf_log_t *log)
{
    const uint8_t *p = s;
    size_t pos = 0;

    if (chunk == 0)
        chunk = n > 0 ? n : 1;
    while (pos < n) {
        size_t end = pos + chunk < n ? pos + chunk : n;

        while (pos < end) {
            sl_ws_event_t ev;
            long k = sl_ws_rx_feed(rx, p + pos, end - pos, &ev);
            wf_event_t *e;

            if (k < 0) {
                log->oom++;
                return;
            }
            pos += (size_t)k;
            log->consumed += (size_t)k;
            if (ev.kind == SL_WS_EV_NONE) {
                if (k == 0)
                    return; /* closed or failed: takes no more */
                continue;
            }
            ck_assert_int_lt(log->n, 64);
            e = &log->ev[log->n++];
            e->kind = ev.kind;
            e->opcode = ev.opcode;
            e->code = ev.code;
            if (ev.kind == SL_WS_EV_CLOSE || ev.kind == SL_WS_EV_ERROR) {
                e->len = ev.reason_len;
                e->data = malloc(e->len + 1);
                if (e->len > 0)
                    memcpy(e->data, ev.reason, e->len);
                e->data[e->len] = 0;
                return;
            }
            if (ev.kind == SL_WS_EV_MESSAGE) {
                sl_buf_t m = {0};

                sl_ws_rx_take(rx, &m);
                ck_assert_uint_eq(m.len, ev.len);
                e->len = m.len;
                e->data = (uint8_t *)m.data; /* taken over */
                if (e->data == NULL)
                    e->data = calloc(1, 1);
                continue;
            }
            e->len = ev.len;
            e->data = malloc(ev.len + 1);
            if (ev.len > 0)
                memcpy(e->data, ev.data, ev.len);
        }
    }
}

/* The two logs recorded the same events. */
static inline void wf_log_same(const wf_log_t *a, const wf_log_t *b)
{
    int i;

    ck_assert_int_eq(a->n, b->n);
    ck_assert_uint_eq(a->consumed, b->consumed);
    for (i = 0; i < a->n; i++) {
        ck_assert_int_eq(a->ev[i].kind, b->ev[i].kind);
        ck_assert_int_eq(a->ev[i].opcode, b->ev[i].opcode);
        ck_assert_uint_eq(a->ev[i].code, b->ev[i].code);
        ck_assert_uint_eq(a->ev[i].len, b->ev[i].len);
        ck_assert(a->ev[i].len == 0 ||
                  memcmp(a->ev[i].data, b->ev[i].data, a->ev[i].len) == 0);
    }
}

#endif
