/* tail.h - what a response hands over after its buffered bytes instead of
 * copying them: bytes lent by the executor (sl_exch_sendmem()) or a file
 * (sl_exch_sendfile(), a static file), never both.
 *
 * A tail has one owner at a time and moves whole: from the exchange the
 * executor filled to the output that writes it (HTTP/1.1), to the stream
 * that frames it (HTTP/2), or to the exchange of the request before it (a
 * request run ahead). Whoever holds it last drops it: the file is closed,
 * the lent bytes go back through the executor's release operation.
 */
#ifndef SL_TAIL_H
#define SL_TAIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <unistd.h>

typedef struct {
    const char *mem; /* lent bytes, or NULL */
    void *mem_owner; /* given back through the release operation */
    off_t file_off;  /* the file's next byte */
    size_t len;      /* the bytes left of either */
    int file_fd;     /* owned: a file, -1 = none */
} sl_tail_t;

/* An empty tail. */
static inline void sl_tail_init(sl_tail_t *t)
{
    t->mem = NULL;
    t->mem_owner = NULL;
    t->file_fd = -1;
}

/* T holds a file or lent bytes. */
static inline bool sl_tail_any(const sl_tail_t *t)
{
    return t->file_fd >= 0 || t->mem != NULL;
}

/* FROM's tail becomes TO's, which held none; FROM is left empty. */
static inline void sl_tail_move(sl_tail_t *to, sl_tail_t *from)
{
    *to = *from;
    sl_tail_init(from);
}

/* Close T's file and give its lent bytes back through RELEASE (written,
 * or a response cut short, or a closing connection); T is left empty.
 * RELEASE runs on the loop thread, maybe with locks held: it must only
 * note the owner. */
static inline void sl_tail_drop(sl_tail_t *t, void (*release)(void *owner))
{
    if (t->file_fd >= 0)
        close(t->file_fd);
    if (t->mem != NULL)
        release(t->mem_owner);
    sl_tail_init(t);
}

#endif
