/* ws_rx.c - the frame parser for a connection's client frames (RFC 6455
 * §5, RFC 7692 §6).
 *
 * Bytes go straight from the caller's buffer to where they end up: a data
 * frame's payload is unmasked into the message buffer (or, compressed,
 * through a small stack chunk into the inflater, whose output lands in the
 * message buffer), a control frame's into the parser's own 125 bytes
 * (taken at the first control frame with a payload, given back by
 * sl_ws_rx_trim(): most idle connections hold none). So
 * the parser holds no copy of the input, a frame's header is the only
 * thing it gathers byte by byte, and the caller may feed any split of the
 * stream: one byte at a time gives the same events as all at once.
 *
 * Every limit is checked as the bytes arrive, never after the fact: a data
 * frame whose declared length would take the message past max_size fails
 * at its header; compressed input fails as soon as its output passes
 * max_size; text fails at the first byte that cannot be UTF-8.
 */
#include "config.h"

#include <string.h>

#include "common/utf8.h"
#include "worker/loop/ws.h"
#include "worker/loop/ws_internal.h"

enum { S_HEAD, S_PAYLOAD, S_DONE };

#define CTL_MAX 125 /* a control frame's payload, at most (RFC 6455 §5.5) */

/* Compressed input is unmasked and inflated this much at a time: the
 * most input that is read past the point where an inflate bomb passes
 * the limit. */
#define INFLATE_CHUNK 1024

struct sl_ws_rx {
    size_t max_size;
    sl_ws_deflate_params_t d;
    sl_buf_t msg;   /* owned: the message being assembled */
    z_stream *zin;  /* owned: the inflater, NULL until needed */
    uint64_t left;  /* payload bytes of this frame still to come */
    uint64_t moff;  /* payload bytes of this frame seen (mask phase) */
    int state;      /* S_* */
    int msg_op;     /* the message being assembled: TEXT, BINARY, 0 none */
    bool msg_z;     /* ... is compressed */
    bool msg_ready; /* the last event was EV_MESSAGE: msg holds it */
    uint8_t op, fin;
    uint8_t hlen, hneed; /* header bytes gathered, needed */
    uint8_t hdr[14];
    uint8_t mask[4];
    sl_utf8_t utf8;
    uint8_t ctl_len;
    uint8_t *ctl; /* owned: a control frame's payload (CTL_MAX), or NULL */
};

sl_ws_rx_t *sl_ws_rx_new(size_t max_size, const sl_ws_deflate_params_t *d)
{
    sl_ws_rx_t *rx = calloc(1, sizeof(*rx));

    if (rx == NULL)
        return NULL;
    rx->max_size = max_size;
    if (d != NULL && d->on)
        rx->d = *d;
    rx->hneed = 2;
    return rx;
}

void sl_ws_rx_free(sl_ws_rx_t *rx)
{
    if (rx == NULL)
        return;
    sl_buf_free(&rx->msg);
    sl_ws_inflater_free(rx->zin);
    free(rx->ctl);
    free(rx);
}

size_t sl_ws_rx_held(const sl_ws_rx_t *rx)
{
    return sizeof(*rx) + rx->msg.cap + sl_ws_zheld(rx->zin) +
           (rx->ctl != NULL ? CTL_MAX : 0);
}

void sl_ws_rx_take(sl_ws_rx_t *rx, sl_buf_t *out)
{
    sl_buf_free(out);
    if (!rx->msg_ready)
        return;
    *out = rx->msg;
    memset(&rx->msg, 0, sizeof(rx->msg));
    rx->msg_ready = false;
}

void sl_ws_rx_trim(sl_ws_rx_t *rx)
{
    if (rx->msg_op == 0 && !rx->msg_ready)
        sl_buf_free(&rx->msg);
    /* between frames, or within a data frame: no control payload is due */
    if (rx->state != S_PAYLOAD || (rx->op & 8) == 0) {
        free(rx->ctl);
        rx->ctl = NULL;
    }
    /* with the client's context kept, the inflater's window is part of
     * the stream and stays */
    if (rx->msg_op == 0 && rx->zin != NULL &&
        rx->d.client_no_context_takeover) {
        sl_ws_inflater_free(rx->zin);
        rx->zin = NULL;
    }
}

static void fail(sl_ws_rx_t *rx, sl_ws_event_t *ev, unsigned code,
                 const char *why)
{
    rx->state = S_DONE;
    ev->kind = SL_WS_EV_ERROR;
    ev->code = code;
    ev->reason = why;
    ev->reason_len = strlen(why);
}

/* DST = SRC xor the mask, from payload offset OFF on. */
static void unmask(uint8_t *dst, const uint8_t *src, size_t n,
                   const uint8_t mask[4], uint64_t off)
{
    uint8_t m[8];
    uint64_t mw;
    size_t i;

    for (i = 0; i < 8; i++)
        m[i] = mask[(off + i) & 3];
    memcpy(&mw, m, 8);
    for (i = 0; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, src + i, 8);
        w ^= mw;
        memcpy(dst + i, &w, 8);
    }
    for (; i < n; i++)
        dst[i] = src[i] ^ m[i & 7];
}

static bool is_control(int op)
{
    return (op & 8) != 0;
}

/* The first two header bytes are in: check what they can tell. */
static bool head_start(sl_ws_rx_t *rx, sl_ws_event_t *ev)
{
    uint8_t b0 = rx->hdr[0], b1 = rx->hdr[1];
    unsigned rsv = (b0 >> 4) & 7, len7 = b1 & 0x7f;
    int op = b0 & 0x0f;

    rx->fin = b0 >> 7;
    rx->op = (uint8_t)op;
    if (op != SL_WS_OP_CONT && op != SL_WS_OP_TEXT && op != SL_WS_OP_BINARY &&
        op != SL_WS_OP_CLOSE && op != SL_WS_OP_PING && op != SL_WS_OP_PONG) {
        fail(rx, ev, SL_WS_CLOSE_PROTOCOL, "unknown opcode");
        return false;
    }
    if (!(b1 & 0x80)) {
        fail(rx, ev, SL_WS_CLOSE_PROTOCOL, "client frame not masked");
        return false;
    }
    if (is_control(op) && (!rx->fin || len7 > CTL_MAX)) {
        fail(rx, ev, SL_WS_CLOSE_PROTOCOL,
             rx->fin ? "control frame over 125 bytes"
                     : "fragmented control frame");
        return false;
    }
    /* RSV1 is deflate's "compressed" bit, on a message's first frame */
    if ((rsv & 3) != 0 ||
        (rsv == 4 &&
         (!rx->d.on || (op != SL_WS_OP_TEXT && op != SL_WS_OP_BINARY)))) {
        fail(rx, ev, SL_WS_CLOSE_PROTOCOL, "reserved bit set");
        return false;
    }
    if (op == SL_WS_OP_CONT && rx->msg_op == 0) {
        fail(rx, ev, SL_WS_CLOSE_PROTOCOL, "continuation without a message");
        return false;
    }
    if ((op == SL_WS_OP_TEXT || op == SL_WS_OP_BINARY) && rx->msg_op != 0) {
        fail(rx, ev, SL_WS_CLOSE_PROTOCOL,
             "new message inside a fragmented one");
        return false;
    }
    rx->hneed = (uint8_t)(2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + 4);
    return true;
}

/* The whole header is in: the length, the mask, a message's start. */
static bool head_done(sl_ws_rx_t *rx, sl_ws_event_t *ev)
{
    unsigned len7 = rx->hdr[1] & 0x7f, i;
    uint64_t len = len7;
    const uint8_t *p = rx->hdr + 2;

    if (len7 == 126) {
        len = (uint64_t)p[0] << 8 | p[1];
        p += 2;
    } else if (len7 == 127) {
        len = 0;
        for (i = 0; i < 8; i++)
            len = len << 8 | p[i];
        p += 8;
        if (len >> 63) {
            fail(rx, ev, SL_WS_CLOSE_PROTOCOL, "frame length over 2^63");
            return false;
        }
    }
    memcpy(rx->mask, p, 4);
    rx->left = len;
    rx->moff = 0;
    if (is_control(rx->op)) {
        rx->ctl_len = 0;
        return true;
    }
    if (rx->op != SL_WS_OP_CONT) {
        rx->msg_op = rx->op;
        rx->msg_z = (rx->hdr[0] & 0x40) != 0;
        rx->msg.len = rx->msg.off = 0;
        sl_utf8_init(&rx->utf8);
    }
    /* uncompressed, the length tells at once; compressed, the output */
    if (!rx->msg_z && len > rx->max_size - rx->msg.len) {
        fail(rx, ev, SL_WS_CLOSE_TOO_BIG, "message too big");
        return false;
    }
    return true;
}

/* Check the message's new bytes from FROM on, if it is text. */
static bool text_ok(sl_ws_rx_t *rx, size_t from)
{
    if (rx->msg_op != SL_WS_OP_TEXT)
        return true;
    return sl_utf8_feed(&rx->utf8, rx->msg.data + from, rx->msg.len - from) !=
           SL_UTF8_INVALID;
}

/* Inflate IN[0..N) into the message. -1 out of memory, 0 failed (*EV
 * set), 1 fine. */
static int inflate_some(sl_ws_rx_t *rx, const uint8_t *in, size_t n,
                        sl_ws_event_t *ev)
{
    size_t from = rx->msg.len;
    int rc;

    if (rx->zin == NULL) {
        rx->zin = sl_ws_inflater_new(rx->d.client_max_window_bits);
        if (rx->zin == NULL)
            return -1;
    }
    rc = sl_ws_inflate(rx->zin, in, n, &rx->msg, rx->max_size);
    if (rc == SL_WS_INFLATE_NOMEM)
        return -1;
    if (rc == SL_WS_INFLATE_TOO_BIG) {
        fail(rx, ev, SL_WS_CLOSE_TOO_BIG, "message too big");
        return 0;
    }
    if (rc == SL_WS_INFLATE_CORRUPT) {
        fail(rx, ev, SL_WS_CLOSE_INVALID_DATA, "bad compressed data");
        return 0;
    }
    if (!text_ok(rx, from)) {
        fail(rx, ev, SL_WS_CLOSE_INVALID_DATA, "text is not UTF-8");
        return 0;
    }
    return 1;
}

/* Take a data frame's payload bytes P[0..N): the count taken (all of
 * them, fewer when it failed), or -1 when out of memory. */
static long data_payload(sl_ws_rx_t *rx, const uint8_t *p, size_t n,
                         sl_ws_event_t *ev)
{
    size_t done = 0, from = rx->msg.len;

    if (!rx->msg_z) {
        if (sl_buf_reserve(&rx->msg, n) < 0)
            return -1;
        unmask((uint8_t *)rx->msg.data + rx->msg.len, p, n, rx->mask, rx->moff);
        rx->msg.len += n;
        rx->moff += n;
        if (!text_ok(rx, from))
            fail(rx, ev, SL_WS_CLOSE_INVALID_DATA, "text is not UTF-8");
        return (long)n;
    }
    while (done < n) {
        uint8_t chunk[INFLATE_CHUNK];
        size_t k = n - done < sizeof(chunk) ? n - done : sizeof(chunk);
        int rc;

        unmask(chunk, p + done, k, rx->mask, rx->moff);
        rx->moff += k;
        done += k;
        rc = inflate_some(rx, chunk, k, ev);
        if (rc < 0)
            return -1;
        if (rc == 0)
            break;
    }
    return (long)done;
}

static void control_done(sl_ws_rx_t *rx, sl_ws_event_t *ev)
{
    unsigned code;

    if (rx->op == SL_WS_OP_PING || rx->op == SL_WS_OP_PONG) {
        ev->kind = rx->op == SL_WS_OP_PING ? SL_WS_EV_PING : SL_WS_EV_PONG;
        ev->data = rx->ctl;
        ev->len = rx->ctl_len;
        return;
    }
    if (rx->ctl_len == 1) {
        fail(rx, ev, SL_WS_CLOSE_PROTOCOL, "close payload of 1 byte");
        return;
    }
    if (rx->ctl_len == 0) {
        code = SL_WS_CLOSE_NO_STATUS;
    } else {
        code = (unsigned)rx->ctl[0] << 8 | rx->ctl[1];
        if (!sl_ws_close_code_valid(code)) {
            fail(rx, ev, SL_WS_CLOSE_PROTOCOL, "invalid close code");
            return;
        }
        if (sl_utf8_check(rx->ctl + 2, rx->ctl_len - 2u) != SL_UTF8_VALID) {
            fail(rx, ev, SL_WS_CLOSE_INVALID_DATA, "close reason is not UTF-8");
            return;
        }
    }
    rx->state = S_DONE;
    ev->kind = SL_WS_EV_CLOSE;
    ev->code = code;
    ev->reason = rx->ctl_len > 2 ? (const char *)rx->ctl + 2 : "";
    ev->reason_len = rx->ctl_len > 2 ? rx->ctl_len - 2u : 0;
}

/* A data frame ended: a message, when it was the last. -1 out of
 * memory. */
static int data_done(sl_ws_rx_t *rx, sl_ws_event_t *ev)
{
    if (!rx->fin)
        return 0;
    if (rx->msg_z) {
        int rc = inflate_some(rx, sl_ws_deflate_tail, 4, ev);
        if (rc <= 0)
            return rc;
    }
    if (rx->msg_op == SL_WS_OP_TEXT &&
        sl_utf8_state(&rx->utf8) != SL_UTF8_VALID) {
        fail(rx, ev, SL_WS_CLOSE_INVALID_DATA, "text ends inside a character");
        return 0;
    }
    ev->kind = SL_WS_EV_MESSAGE;
    ev->opcode = rx->msg_op;
    ev->data = (const uint8_t *)rx->msg.data;
    ev->len = rx->msg.len;
    rx->msg_op = 0;
    rx->msg_ready = true;
    /* the client starts afresh each message: nothing to keep */
    if (rx->msg_z && rx->d.client_no_context_takeover) {
        sl_ws_inflater_free(rx->zin);
        rx->zin = NULL;
    }
    return 0;
}

/* The frame's payload is all in. -1 out of memory. */
static int frame_done(sl_ws_rx_t *rx, sl_ws_event_t *ev)
{
    rx->state = S_HEAD;
    rx->hlen = 0;
    rx->hneed = 2;
    if (is_control(rx->op)) {
        control_done(rx, ev);
        return 0;
    }
    return data_done(rx, ev);
}

long sl_ws_rx_feed(sl_ws_rx_t *rx, const uint8_t *data, size_t n,
                   sl_ws_event_t *ev)
{
    size_t pos = 0;

    memset(ev, 0, sizeof(*ev));
    if (rx->state == S_DONE)
        return 0;
    if (rx->msg_ready) {
        /* not taken: the buffer serves the next message */
        rx->msg_ready = false;
        rx->msg.len = rx->msg.off = 0;
    }
    while (pos < n && ev->kind == SL_WS_EV_NONE) {
        if (rx->state == S_HEAD) {
            size_t k = rx->hneed - rx->hlen;

            if (k > n - pos)
                k = n - pos;
            memcpy(rx->hdr + rx->hlen, data + pos, k);
            rx->hlen = (uint8_t)(rx->hlen + k);
            pos += k;
            if (rx->hlen == 2 && rx->hneed == 2 && !head_start(rx, ev))
                break;
            if (rx->hlen < rx->hneed)
                continue;
            if (!head_done(rx, ev))
                break;
            rx->state = S_PAYLOAD;
        } else {
            size_t k = n - pos;
            long took;

            if (k > rx->left)
                k = (size_t)rx->left;
            if (is_control(rx->op)) {
                if (rx->ctl == NULL && (rx->ctl = malloc(CTL_MAX)) == NULL)
                    return -1;
                unmask(rx->ctl + rx->ctl_len, data + pos, k, rx->mask,
                       rx->moff);
                rx->ctl_len = (uint8_t)(rx->ctl_len + k);
                rx->moff += k;
                took = (long)k;
            } else {
                took = data_payload(rx, data + pos, k, ev);
                if (took < 0)
                    return -1;
            }
            pos += (size_t)took;
            rx->left -= (uint64_t)took;
            if (ev->kind != SL_WS_EV_NONE)
                break;
        }
        if (rx->state == S_PAYLOAD && rx->left == 0 && frame_done(rx, ev) < 0)
            return -1;
    }
    return (long)pos;
}
