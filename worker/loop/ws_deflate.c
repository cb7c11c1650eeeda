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

#include <pthread.h>
#include <string.h>

#include "worker/loop/ws_internal.h"

const uint8_t sl_ws_deflate_tail[4] = {0x00, 0x00, 0xff, 0xff};

/* Output is produced in steps of at least this much. */
#define INFLATE_STEP 4096

/* A stream and the bytes zlib allocated for it: zlib's allocations go
 * through counting hooks so that what a connection holds can be measured
 * (sl_ws_zheld()), not guessed. */
typedef struct {
    z_stream z; /* first: a z_stream * is a zbox_t * */
    size_t held;
    int bits; /* a deflater's window */
} zbox_t;

/* Room before each block for its size, keeping malloc's alignment. */
#define ZHEAD 16

static voidpf zalloc_counted(voidpf opaque, uInt items, uInt size)
{
    size_t n = (size_t)items * size;
    char *p = malloc(ZHEAD + n);

    if (p == NULL)
        return NULL;
    memcpy(p, &n, sizeof(n));
    *(size_t *)opaque += n;
    return p + ZHEAD;
}

static void zfree_counted(voidpf opaque, voidpf ptr)
{
    char *p = (char *)ptr - ZHEAD;
    size_t n;

    memcpy(&n, p, sizeof(n));
    *(size_t *)opaque -= n;
    free(p);
}

static zbox_t *zbox_new(void)
{
    zbox_t *b = calloc(1, sizeof(*b));

    if (b == NULL)
        return NULL;
    b->z.zalloc = zalloc_counted;
    b->z.zfree = zfree_counted;
    b->z.opaque = &b->held;
    return b;
}

size_t sl_ws_zheld(const z_stream *z)
{
    return z ? sizeof(zbox_t) + ((const zbox_t *)z)->held : 0;
}

z_stream *sl_ws_inflater_new(int bits)
{
    zbox_t *b = zbox_new();

    if (b == NULL)
        return NULL;
    if (inflateInit2(&b->z, -bits) != Z_OK) {
        free(b);
        return NULL;
    }
    return &b->z;
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
    zbox_t *b = zbox_new();
    z_stream *z = b ? &b->z : NULL;
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
    b->bits = strategy == Z_RLE ? 8 : bits;
    if (deflateInit2(z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -bits, 8,
                     strategy) != Z_OK) {
        free(z);
        return NULL;
    }
    return z;
}

/* The thread's deflater, freed when the thread ends. */
static pthread_key_t thread_key;
static pthread_once_t thread_once = PTHREAD_ONCE_INIT;
static bool thread_key_ok;

static void thread_deflater_free(void *z)
{
    sl_ws_deflater_free(z);
}

static void thread_key_init(void)
{
    thread_key_ok = pthread_key_create(&thread_key, thread_deflater_free) == 0;
}

z_stream *sl_ws_deflater_thread(int bits)
{
    z_stream *z;

    pthread_once(&thread_once, thread_key_init);
    if (!thread_key_ok)
        return NULL;
    z = pthread_getspecific(thread_key);
    if (z != NULL && ((zbox_t *)z)->bits == bits) {
        deflateReset(z);
        return z;
    }
    sl_ws_deflater_free(z);
    pthread_setspecific(thread_key, NULL);
    z = sl_ws_deflater_new(bits);
    if (z != NULL && pthread_setspecific(thread_key, z) != 0) {
        sl_ws_deflater_free(z);
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
