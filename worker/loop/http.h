/* http.h - HTTP/1.1 facts the loop and the executor share: validating a
 * parsed request head, reason phrases, and heads the loop writes itself. */
#ifndef SL_HTTP_H
#define SL_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llhttp.h"
#include "common/buf.h"
#include "worker/loop/request.h"

/* Finish the head of request R once llhttp H has parsed it from RBUF (R's
 * offsets point into it): derive method, version, keep-alive and body
 * framing, enforce Host and the body LIMIT (--limit-request-body, 0: none),
 * and copy the head into the request's own buffer. Returns 0, or the HTTP
 * status to answer with instead of serving. */
int sl_http_head_complete(llhttp_t *h, sl_req_t *r, const sl_buf_t *rbuf,
                          long long limit);

/* The reason phrase for STATUS ("Unknown" when we have none). */
const char *sl_http_reason(int status);

/* The status code of the response head that P[0..N) begins with
 * ("HTTP/1.x NNN "), or 0 when it does not begin with one. */
int sl_http_status_of(const char *p, size_t n);

/* Not a status on the wire: the 400 answering plain HTTP sent to a TLS
 * listener, which says so (nginx's 497). */
#define SL_HTTP_PLAIN_TO_TLS 497

/* Append a complete error response for STATUS (or SL_HTTP_PLAIN_TO_TLS)
 * with Connection: close. 0, or -1 when out of memory (nothing
 * appended). */
int sl_http_error_head(sl_buf_t *b, int status);

/* Feed the next bytes P[0..N) of a chunked trailer's field name into R's
 * matcher, then end the name with sl_http_trailer_end(): true when the
 * field is one RFC 9110 §6.5.1 keeps out of trailers (the list is in
 * http.c and docs/http.md). The end resets the matcher for the next name;
 * sl_http_trailer_reset() sets it up before the first. No allocation. */
void sl_http_trailer_feed(sl_req_t *r, const char *p, size_t n);
bool sl_http_trailer_end(sl_req_t *r);
void sl_http_trailer_reset(sl_req_t *r);

/* "METHOD url" of request R for the log, in BUF (N bytes, NUL-terminated,
 * the URL cut to fit). Returns its length. No printf: ASGI makes one per
 * request, and the drain copies one where a signal handler can print it. */
size_t sl_http_log_name(const sl_req_t *r, char *buf, size_t n);

/* Case-insensitive compare of a header name slice with NAME (lower case). */
bool sl_http_name_is(const char *p, size_t n, const char *name);

/* Trim spaces and tabs (OWS) off both ends of *P[0..*N). */
void sl_http_trim(const char **p, size_t *n);

/* Walk a comma-separated header list (RFC 9110 §5.6.1): the next item of
 * *P[0..*N), trimmed, into *ITEM[0..*LEN), and *P, *N moved past it.
 * False once the list is over. Empty items are given too (LEN 0). */
bool sl_http_list_next(const char **p, size_t *n, const char **item,
                       size_t *len);

/* Request header names common enough that the executors make their Python
 * forms once (WSGI's environ keys, ASGI's lower-case bytes), lower case. */
#define SL_HTTP_NCOMMON 23
extern const char *const sl_http_common_names[SL_HTTP_NCOMMON];

/* The index of header name P[0..N) (any case) in sl_http_common_names,
 * or -1. */
int sl_http_common_index(const char *p, size_t n);

/* Is request R for PATH (--health-path; GET or HEAD, no body)? */
bool sl_http_is_health(const sl_req_t *r, const char *path);

/* Append the health answer to R: 200 when OK, else 503 (the host is going
 * away). 0, or -1 when out of memory (nothing appended). */
int sl_http_health_head(sl_buf_t *b, const sl_req_t *r, bool ok);

/* A request target cut into its parts: the path (in absolute-form, what
 * follows the authority, "/" when nothing does) and the query after '?'
 * (QUERY NULL when there is no '?'); a fragment is dropped. Pointers into
 * the target, or to a static "/". */
typedef struct {
    const char *path, *query;
    size_t path_len, query_len;
} sl_target_t;

void sl_http_target(const char *url, size_t n, sl_target_t *t);

/* Percent-decode N bytes at P into OUT (room for N bytes); a '%' not
 * followed by two hex digits stays as it is. Returns the decoded length. */
size_t sl_http_unquote(const char *p, size_t n, char *out);

/* A Content-Length value (optional blanks around the digits): 0 with *OUT
 * set, or -1 when it is not a plain decimal that fits. */
int sl_http_parse_u64(const char *p, size_t n, uint64_t *out);

#endif
