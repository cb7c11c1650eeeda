/* ws_internal.h - what the codec's files share and the tests and the
 * fuzzer reach into: the deflate offer parser and the zlib wrappers
 * (ws_deflate.c). Not for the connection: it uses ws.h.
 */
#ifndef SL_WS_INTERNAL_H
#define SL_WS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "common/buf.h"
#include "worker/loop/ws.h"

/* The four bytes a sync flush ends with, removed by the sender and put
 * back by the receiver (RFC 7692 §7.2.1, §7.2.2). */
extern const uint8_t sl_ws_deflate_tail[4];

/* Payloads shorter than this go out uncompressed: deflate would not make
 * them smaller (RFC 7692 lets a sender leave any message uncompressed). */
#define SL_WS_DEFLATE_MIN 32

/* Negotiate permessage-deflate from one Sec-WebSocket-Extensions value
 * P[0..N) (a comma-separated list of offers). An offer we cannot honour
 * or that is malformed is declined, not an error. True when an offer was
 * accepted: *OUT holds what we agreed to. */
bool sl_ws_deflate_offer(const char *p, size_t n, sl_ws_deflate_params_t *out);

/* Our Sec-WebSocket-Extensions answer for D into OUT (CAP bytes with the
 * NUL); its length, or 0 when D is off. Always fits in
 * SL_WS_EXTENSIONS_MAX. */
size_t sl_ws_deflate_response(const sl_ws_deflate_params_t *d, char *out,
                              size_t cap);

/* A raw inflater for a window of 2^BITS bytes; NULL when out of memory. */
z_stream *sl_ws_inflater_new(int bits);
void sl_ws_inflater_free(z_stream *z);

/* Results of sl_ws_inflate(). */
enum {
    SL_WS_INFLATE_OK = 0,
    SL_WS_INFLATE_TOO_BIG = 1, /* the output passed the limit */
    SL_WS_INFLATE_CORRUPT = 2, /* not a deflate stream */
    SL_WS_INFLATE_NOMEM = 3,
};

/* Inflate IN[0..N) and append the output to OUT, stopping as soon as OUT
 * holds more than LIMIT bytes (the rest of IN is then not inflated, and
 * OUT's capacity never grows past LIMIT + 1). SL_WS_INFLATE_*. */
int sl_ws_inflate(z_stream *z, const uint8_t *in, size_t n, sl_buf_t *out,
                  size_t limit);

/* A raw deflater for a window of 2^BITS bytes (8 is run with 9's window
 * but only emits matches a 256-byte window allows); NULL when out of
 * memory. */
z_stream *sl_ws_deflater_new(int bits);
void sl_ws_deflater_free(z_stream *z);

/* Compress the whole message IN[0..N) and append it to OUT without the
 * sync flush's tail. 0, or -1 when out of memory (OUT's length
 * unchanged). */
int sl_ws_deflate(z_stream *z, const void *in, size_t n, sl_buf_t *out);

#endif
