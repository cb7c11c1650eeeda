/* static.h - files served from folders by the loop thread (--static).
 *
 * A worker opens each --static folder once, when it loads (after --chdir,
 * so a deploy that swaps the folder is seen by the next generation, as
 * its code is). A GET or HEAD under a map's prefix never reaches the app:
 * the loop answers it from the folder, the head written here and the body
 * sent by the connection as a file tail (sendfile(2), or the TLS and
 * HTTP/2 paths' own reads of it), as the health check and pathsend are.
 * What is answered and why: docs/http.md, "Static files".
 */
#ifndef SL_STATIC_H
#define SL_STATIC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/buf.h"
#include "common/options.h"
#include "worker/loop/request.h"

typedef struct sl_static sl_static_t;

/* The body a static answer hands its connection after the head: LEN
 * bytes of FD (owned by the receiver) from OFF; FD -1 when there is
 * none beyond what the head's buffer holds. */
typedef struct {
    int fd;
    off_t off;
    size_t len;
} sl_static_body_t;

/* The maps O's --static and --static-cache-control name, their folders
 * opened, and the media types read: *OUT, NULL when there are none. 0, or
 * -1 after one error line (a folder that cannot be opened). */
int sl_static_load(const sl_options_t *o, sl_static_t **out);

void sl_static_free(sl_static_t *s);

/* The map R's path is under (the longest prefix), or -1: the app's. S
 * may be NULL. */
int sl_static_match(const sl_static_t *s, const sl_req_t *r);

/* Answer R from map MAP: the head (and a short body of the server's own)
 * appended to HEAD, the file in *BODY. Returns the response's status, or
 * -1 when memory ran out (nothing appended, nothing open: close). The
 * head says "Connection: close" when R did not ask to keep the
 * connection or sent a body, which the caller then closes after. */
int sl_static_answer(const sl_static_t *s, int map, const sl_req_t *r,
                     sl_buf_t *head, sl_static_body_t *body);

/* Open PATH (relative, as sl_static_path() makes it) for reading, beneath
 * the folder DIRFD only: a symlink may lead elsewhere inside it, never out,
 * and no magic link is followed. WALK: one component at a time with
 * O_NOFOLLOW instead of openat2(2) (what a kernel without openat2, or a
 * sandbox that refuses it, falls back to; symlinks are then refused). The
 * descriptor, or -1 with errno. */
int sl_static_open(int dirfd, const char *path, bool walk);

#endif
