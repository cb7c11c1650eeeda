/* ws_deflate.c - permessage-deflate (RFC 7692) over zlib's raw deflate.
 *
 * A message is one raw deflate stream flushed with Z_SYNC_FLUSH, minus the
 * empty stored block's four bytes that flush ends with; the receiver puts
 * them back before inflating. The one idea that matters here is the
 * bounded inflate: output goes into a buffer that never grows past the
 * message limit plus one byte, so a small compressed message that
 * inflates to gigabytes (an inflate bomb) is stopped after producing just
 * over the limit, having read only the part of its input that made it.
 */
#include "config.h"

#include <string.h>

#include "worker/loop/ws_internal.h"

const uint8_t sl_ws_deflate_tail[4] = {0x00, 0x00, 0xff, 0xff};

/* Output is produced in steps of at least this much. */
#define INFLATE_STEP 4096

z_stream *sl_ws_inflater_new(int bits)
{
    z_stream *z = calloc(1, sizeof(*z));

    if (z == NULL)
        return NULL;
    if (inflateInit2(z, -bits) != Z_OK) {
        free(z);
        return NULL;
    }
    return z;
}

void sl_ws_inflater_free(z_stream *z)
{
    if (z == NULL)
        return;
    inflateEnd(z);
    free(z);
}

/* Make room in OUT for more output: double, at least a step, never past
 * LIMIT + 1 bytes in all. Returns the room, 0 when out of memory. */
static size_t inflate_room(sl_buf_t *out, size_t limit)
{
    size_t cap, want, max = limit < SIZE_MAX ? limit + 1 : limit;
    char *p;

    /* up to one byte past the limit: that byte tells it was passed */
    want = out->len < max ? max : out->len + 1;
    if (out->cap <= out->len) {
        cap = out->cap < INFLATE_STEP ? INFLATE_STEP : out->cap * 2;
        if (cap > want)
            cap = want;
        p = realloc(out->data, cap);
        if (p == NULL)
            return 0;
        out->data = p;
        out->cap = cap;
    }
    cap = out->cap < want ? out->cap : want;
    return cap - out->len;
}

int sl_ws_inflate(z_stream *z, const uint8_t *in, size_t n, sl_buf_t *out,
                  size_t limit)
{
    z->next_in = (Bytef *)in;
    z->avail_in = (uInt)n; /* callers feed at most a chunk at a time */
    for (;;) {
        size_t room = inflate_room(out, limit);
        int rc;

        if (room == 0)
            return SL_WS_INFLATE_NOMEM;
        if (room > UINT32_MAX)
            room = UINT32_MAX;
        z->next_out = (Bytef *)out->data + out->len;
        z->avail_out = (uInt)room;
        rc = inflate(z, Z_SYNC_FLUSH);
        out->len += room - z->avail_out;
        if (out->len > limit)
            return SL_WS_INFLATE_TOO_BIG;
        if (rc == Z_STREAM_END) {
            /* The sender ended the stream (a final block): what follows,
             * if anything, starts a new one. */
            inflateReset(z);
            if (z->avail_in == 0)
                return SL_WS_INFLATE_OK;
            continue;
        }
        if (rc == Z_MEM_ERROR)
            return SL_WS_INFLATE_NOMEM;
        if (rc != Z_OK && rc != Z_BUF_ERROR)
            return SL_WS_INFLATE_CORRUPT;
        /* Done when all input is in and the output did not fill up (a
         * full output may hide more that zlib holds back). */
        if (z->avail_in == 0 && z->avail_out > 0)
            return SL_WS_INFLATE_OK;
    }
}

z_stream *sl_ws_deflater_new(int bits)
{
    z_stream *z = calloc(1, sizeof(*z));
    int strategy = Z_DEFAULT_STRATEGY;

    if (z == NULL)
        return NULL;
    /* zlib's raw deflate has no 256-byte window. Run-length matches
     * (distance 1) are valid under any window, so a peer that asked for
     * 8 bits gets those from a 9-bit deflater. */
    if (bits < 9) {
        bits = 9;
        strategy = Z_RLE;
    }
    if (deflateInit2(z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -bits, 8,
                     strategy) != Z_OK) {
        free(z);
        return NULL;
    }
    return z;
}

void sl_ws_deflater_free(z_stream *z)
{
    if (z == NULL)
        return;
    deflateEnd(z);
    free(z);
}

int sl_ws_deflate(z_stream *z, const void *in, size_t n, sl_buf_t *out)
{
    size_t start = out->len;

    z->next_in = (Bytef *)in;
    z->avail_in = (uInt)n;
    if (n > UINT32_MAX)
        return -1; /* messages are bounded far below this */
    for (;;) {
        size_t room;
        int rc;

        /* deflateBound is for Z_FINISH; the sync flush's stored block
         * adds its own few bytes */
        if (sl_buf_reserve(out, deflateBound(z, z->avail_in) + 16) < 0)
            goto fail;
        room = out->cap - out->len;
        if (room > UINT32_MAX)
            room = UINT32_MAX;
        z->next_out = (Bytef *)out->data + out->len;
        z->avail_out = (uInt)room;
        rc = deflate(z, Z_SYNC_FLUSH);
        out->len += room - z->avail_out;
        if (rc != Z_OK && rc != Z_BUF_ERROR)
            goto fail;
        if (z->avail_in == 0 && z->avail_out > 0)
            break;
    }
    if (out->len - start < 4 ||
        memcmp(out->data + out->len - 4, sl_ws_deflate_tail, 4) != 0)
        goto fail;
    out->len -= 4;
    return 0;
fail:
    out->len = start;
    deflateReset(z);
    return -1;
}
