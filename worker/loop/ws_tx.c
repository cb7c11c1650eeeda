/* ws_tx.c - the frame writer for a connection's server frames (RFC 6455
 * §5.2; server frames are never masked).
 *
 * Every message goes out as one frame: the connection has it whole, and
 * one frame is the least work for both ends. With deflate on, a text or
 * binary message is compressed into the output right after room for the
 * longest header, then the header is written in front of it once its
 * length is known (and the payload moved down over the unused room).
 * Payloads under SL_WS_DEFLATE_MIN bytes, and any that deflate would not
 * make smaller, go out uncompressed: RFC 7692 lets a sender choose per
 * message.
 *
 * Our side always has no context takeover (ws_handshake.c), so the
 * deflater holds nothing between messages: it is made for a message and
 * freed after it, and an idle writer is a few bytes.
 */
#include "config.h"

#include <string.h>

#include "worker/loop/ws.h"
#include "worker/loop/ws_internal.h"

struct sl_ws_tx {
    sl_ws_deflate_params_t d;
};

/* The longest header of a server frame: 2 bytes and a 64-bit length. */
#define HEAD_MAX 10

sl_ws_tx_t *sl_ws_tx_new(const sl_ws_deflate_params_t *d)
{
    sl_ws_tx_t *tx = calloc(1, sizeof(*tx));

    if (tx == NULL)
        return NULL;
    if (d != NULL && d->on)
        tx->d = *d;
    return tx;
}

void sl_ws_tx_free(sl_ws_tx_t *tx)
{
    free(tx);
}

void sl_ws_tx_trim(sl_ws_tx_t *tx)
{
    (void)tx; /* nothing is kept between messages */
}

/* Write the header of a final frame with byte B0 and length N to H;
 * returns its length. */
static size_t head(uint8_t *h, uint8_t b0, uint64_t n)
{
    int i;

    h[0] = b0;
    if (n < 126) {
        h[1] = (uint8_t)n;
        return 2;
    }
    if (n <= 0xffff) {
        h[1] = 126;
        h[2] = (uint8_t)(n >> 8);
        h[3] = (uint8_t)n;
        return 4;
    }
    h[1] = 127;
    for (i = 0; i < 8; i++)
        h[2 + i] = (uint8_t)(n >> (56 - 8 * i));
    return 10;
}

static int plain(sl_buf_t *out, uint8_t b0, const void *data, size_t n)
{
    uint8_t h[HEAD_MAX];
    size_t hl = head(h, b0, n);

    if (n > SIZE_MAX - hl || sl_buf_reserve(out, hl + n) < 0)
        return -1;
    memcpy(out->data + out->len, h, hl);
    if (n > 0)
        memcpy(out->data + out->len + hl, data, n);
    out->len += hl + n;
    return 0;
}

/* Compress DATA[0..N) as one frame with B0 | RSV1. 1 when compressing
 * did not pay (nothing appended), 0 done, -1 out of memory. */
static int compressed(sl_ws_tx_t *tx, sl_buf_t *out, uint8_t b0,
                      const void *data, size_t n)
{
    size_t start = out->len, zlen, hl;
    uint8_t h[HEAD_MAX];
    z_stream *z;
    int rc;

    if (sl_buf_reserve(out, HEAD_MAX) < 0)
        return -1;
    z = sl_ws_deflater_new(tx->d.server_max_window_bits);
    if (z == NULL)
        return -1;
    out->len += HEAD_MAX;
    rc = sl_ws_deflate(z, data, n, out);
    sl_ws_deflater_free(z);
    if (rc < 0) {
        out->len = start;
        return -1;
    }
    zlen = out->len - start - HEAD_MAX;
    if (zlen >= n) {
        out->len = start;
        return 1;
    }
    hl = head(h, b0 | 0x40, zlen);
    memmove(out->data + start + hl, out->data + start + HEAD_MAX, zlen);
    memcpy(out->data + start, h, hl);
    out->len = start + hl + zlen;
    return 0;
}

int sl_ws_tx_frame(sl_ws_tx_t *tx, sl_buf_t *out, int opcode, const void *data,
                   size_t n)
{
    uint8_t b0 = (uint8_t)(0x80 | (opcode & 0x0f));

    if (tx != NULL && tx->d.on && n >= SL_WS_DEFLATE_MIN &&
        (opcode == SL_WS_OP_TEXT || opcode == SL_WS_OP_BINARY)) {
        int rc = compressed(tx, out, b0, data, n);
        if (rc <= 0)
            return rc;
    }
    return plain(out, b0, data, n);
}

int sl_ws_tx_close(sl_buf_t *out, unsigned code, const char *reason, size_t n)
{
    uint8_t p[125];
    size_t len = 0;

    if (code != 0) {
        p[0] = (uint8_t)(code >> 8);
        p[1] = (uint8_t)code;
        len = 2;
        if (n > 123) {
            /* cut before a continuation byte: on a character's start */
            n = 123;
            while (n > 0 && ((uint8_t)reason[n] & 0xC0) == 0x80)
                n--;
        }
        if (n > 0)
            memcpy(p + 2, reason, n);
        len += n;
    }
    return plain(out, 0x80 | SL_WS_OP_CLOSE, p, len);
}
