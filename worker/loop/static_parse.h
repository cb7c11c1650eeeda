/* static_parse.h - what a request for a static file says, read: its path
 * made a path inside the folder, its Range, its entity-tag lists, its
 * Accept-Encoding.
 *
 * Pure functions of their arguments (no file, no connection, no clock),
 * so that a unit suite checks every case and a fuzzer (tests/fuzz/
 * fuzz_static.c) the rest; static.c does the I/O.
 */
#ifndef SL_STATIC_PARSE_H
#define SL_STATIC_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* sl_static_path()'s refusals. */
enum {
    SL_SPATH_BAD = -1,    /* not a path a browser sends: 400 */
    SL_SPATH_HIDDEN = -2, /* a segment beginning with '.': 404 */
    SL_SPATH_LONG = -3,   /* longer than the room given: 404 */
};

/* P[0..N), the raw request path after a --static prefix (percent-encoded,
 * no query), decoded once into OUT[CAP] as a path relative to the folder:
 * segments joined by one '/', no leading or trailing '/', NUL-terminated.
 * Returns its length (0: the folder itself), or a refusal:
 * - SL_SPATH_BAD: a '%' not followed by two hex digits; a decoded NUL,
 *   '/' (an encoded slash), '\\' or control byte; a "." or ".." segment,
 *   raw or encoded (nothing is resolved: a browser never sends them);
 * - SL_SPATH_HIDDEN: a segment beginning with '.' (".env", ".git");
 * - SL_SPATH_LONG: the path does not fit in CAP. */
long sl_static_path(const char *p, size_t n, char *out, size_t cap);

/* sl_static_range()'s answers. */
enum {
    SL_RANGE_NONE = 0,  /* no range applies: the whole representation */
    SL_RANGE_ONE = 1,   /* *FIRST..*LAST, inclusive: 206 */
    SL_RANGE_UNSAT = 2, /* nothing of it can be sent: 416 */
};

/* V[0..N), a Range header's value, against a representation of SIZE
 * bytes. One "bytes=" range is served; several, another unit or a value
 * that does not parse are ignored (RFC 9110 §14.2: the whole is sent). A
 * last position past the end is cut to it (however many digits it has); a
 * first one at or past the end (or a suffix of 0) cannot be satisfied. */
int sl_static_range(const char *v, size_t n, uint64_t size, uint64_t *first,
                    uint64_t *last);

/* Does the list V[0..N) (If-None-Match, If-Match, If-Range) name the
 * strong entity tag TAG[0..TN) (quoted, as the answer sends it)? "*",
 * alone, names every tag. WEAK: the weak comparison (If-None-Match:
 * W/"x" names "x"), else the strong one (a weak item names nothing). A
 * malformed list names nothing, whatever it held before the fault. */
bool sl_static_etag_match(const char *v, size_t n, const char *tag, size_t tn,
                          bool weak);

/* Content codings a precompressed sibling may have. */
enum {
    SL_ENC_GZIP = 1,
    SL_ENC_BR = 2,
};

/* The codings of SL_ENC_* the Accept-Encoding value V[0..N) accepts (a
 * q-value above 0, by name or through "*"); 0 when none. */
int sl_static_accept(const char *v, size_t n);

#endif
