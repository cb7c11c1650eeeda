/* reqline.h - the request line's method and target (RFC 9110 §9.1, RFC
 * 9112 §3) and a chunked body's size lines (RFC 9112 §7.1), read by the
 * loop itself rather than by llhttp. Pure functions: no allocation, no
 * state but what the caller carries. */
#ifndef SL_REQLINE_H
#define SL_REQLINE_H

#include <stdbool.h>
#include <stddef.h>

#include "worker/loop/request.h"

/* The llhttp method (llhttp_method_t) named by token P[0..N), case
 * sensitive as RFC 9110 §9.1 has it, or SL_METHOD_OTHER for any other
 * token (the caller has checked it is one). */
int sl_reqline_method_of(const char *p, size_t n);

/* Request R's method as the client wrote it: a pointer into R's hbuf (or
 * llhttp's static name for a request with no token recorded), its length
 * in *LEN. Not NUL-terminated. */
const char *sl_reqline_method_name(const sl_req_t *r, size_t *len);

/* Scan the start of a request line at P[0..N): "method SP target SP".
 * 1 when all of it is there (*MLEN the method token's length, *TLEN the
 * target's, the target starting at P + *MLEN + 1), 0 when more bytes are
 * needed and nothing seen so far is wrong, or the status to refuse with:
 * 400 for a method that is no token (RFC 9110 §9.1 tchar), a target with
 * a control byte, SP or DEL in it (bytes 0x80-0xFF pass), an empty one;
 * 414 when the line cannot fit in LIMIT bytes (0: no limit). *POS and
 * *MLEN start at 0 and carry what was checked from one call to the next
 * while 0 is returned, so a line that arrives in pieces is read once. */
int sl_reqline_scan(const char *p, size_t n, int limit, size_t *pos,
                    size_t *mlen, size_t *tlen);

/* Is P[0..N) an RFC 3986 authority a server may take (host [":" port]):
 * a reg-name, IPv4 or bracketed IPv6 host that is not empty, no userinfo,
 * a port of digits up to 65535 (required when NEED_PORT)? */
bool sl_reqline_authority_ok(const char *p, size_t n, bool need_port);

/* Check R's target (R's offsets into BASE, the head not yet copied)
 * against the four forms of RFC 9112 §3.2: origin-form; "*" for OPTIONS
 * only; authority-form for CONNECT only (a port required); absolute-form
 * whose authority parses, given in *AUTH[0..*ALEN) (it replaces Host,
 * §3.2.2; *AUTH NULL for the other forms). 0, or 400. */
int sl_reqline_check_target(const sl_req_t *r, const char *base,
                            const char **auth, size_t *alen);

/* A chunk's size line, at most this long with its extensions and CRLF
 * (RFC 9112 §7.1.1: a server limits what it reads of extensions). */
#define SL_REQLINE_CHUNK_MAX 4096

/* Scan the chunk size line that begins at P[0..N): chunk-size, then
 * extensions with optional whitespace around ';' and '=' (RFC 9112 §7.1.1,
 * "BWS ; BWS name [ BWS = BWS value ]", a value a token or a quoted
 * string), then CRLF. 1 when the line is whole and well formed: its first
 * *DIGITS bytes are the size's hex digits, and it is *LEN bytes long with
 * its CRLF; 0 when no LF has come yet and the line may still fit in
 * SL_REQLINE_CHUNK_MAX; -1 when it is malformed or too long. */
int sl_reqline_chunk(const char *p, size_t n, size_t *digits, size_t *len);

#endif
