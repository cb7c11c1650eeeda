/* mime.h - a file's media type, by its name's extension.
 *
 * The table is read once per worker generation from /etc/mime.types (the
 * system's list: Debian's media-types package), every extension of every
 * line, the first line naming an extension winning. Without that file a
 * short built-in table covers what web pages are made of. Read-only once
 * loaded: a zygote's table is shared with the workers it forks.
 */
#ifndef SL_MIME_H
#define SL_MIME_H

#include <stddef.h>

typedef struct sl_mime sl_mime_t;

/* The table from PATH (NULL: the built-in one alone; a PATH that cannot be
 * read also falls back to it, with a warning). NULL only when out of
 * memory, after a log line. */
sl_mime_t *sl_mime_load(const char *path);

void sl_mime_free(sl_mime_t *m);

/* The Content-Type value for the file NAME[0..N), from its last
 * extension, letter case ignored; text types (text/..., JavaScript, JSON)
 * say "; charset=utf-8". "application/octet-stream" when unknown. */
const char *sl_mime_type(const sl_mime_t *m, const char *name, size_t n);

#endif
