/* response.h - a response on the wire: head, body framing, trailers.
 *
 * WSGI and ASGI apps hand the server a status, header fields and body
 * parts; this module turns them into HTTP/1.1 bytes, the same way for both.
 * The framing is decided when the head is built, from what is known then:
 * the app's Content-Length, the whole body when the first part is the last
 * one, or chunked encoding (close-delimited for HTTP/1.0) otherwise.
 *
 * A head is built in three steps: sl_response_begin() with the status
 * line (WSGI sends the app's status text), one sl_response_field() per app
 * header, then sl_response_end(). Out of memory, each step says so, and
 * the head stays unusable until the next begin: a head cut short never
 * looks finished. The Python side (worker/python/writer.c) feeds it from
 * header lists.
 */
#ifndef SL_RESPONSE_H
#define SL_RESPONSE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/buf.h"
#include "worker/loop/request.h"

typedef struct {
    int status;
    bool no_body;  /* HEAD, 1xx, 204, 304: no body bytes go out */
    bool chunked;  /* Transfer-Encoding: chunked */
    bool close;    /* Connection: close was sent */
    bool app_cl;   /* a Content-Length is in the head (the app's or ours) */
    bool trailers; /* a chunked body ends with trailer fields */
    bool has_server, has_date; /* the app gave these fields */
    uint64_t cl;               /* that Content-Length */
    uint64_t sent;             /* body bytes framed so far */
    bool nomem;                /* an append failed: the head is cut short */
} sl_response_t;

/* Does P[0..N) hold CR, LF or NUL (bytes that would split a head)? The
 * one rule for both interfaces' header values. */
bool sl_response_bad_bytes(const char *p, size_t n);

/* Is P[0..N) not a header name we send: empty, or holding a byte that is
 * not an RFC 9110 tchar (a separator, a space, a control or non-ASCII
 * byte)? The one rule for both interfaces' names. */
bool sl_response_bad_name(const char *p, size_t n);

/* Start the head of REQ's response with STATUS (100..999): empties B and
 * RS, then appends the status line, "HTTP/1.1 " and LINE[0..LN) (the
 * app's "200 OK") or, when LINE is NULL, the code and our reason phrase.
 * 0, or -1 when out of memory. */
int sl_response_begin(sl_response_t *rs, sl_buf_t *b, const sl_req_t *req,
                      int status, const char *line, size_t ln);

/* One header field the app gave (already checked against the rule):
 * appended to B, except Connection and Transfer-Encoding, which are the
 * server's; notes Content-Length, Server, Date and "Connection: close" in
 * RS. 0; -1 when out of memory (now or in an earlier step); -2 when a
 * Content-Length is not a number. */
int sl_response_field(sl_response_t *rs, sl_buf_t *b, const char *name,
                      size_t nn, const char *value, size_t vn);

/* Finish the head in B: Server and Date unless the app gave them, the
 * framing, Connection, the blank line. KNOWN is the whole body length when
 * known, else -1; TRAILERS asks for a chunked body that trailers end;
 * CLOSE ends the connection after this response. 0 when B holds the whole
 * head, -1 when an append failed in any step since begin (out of memory:
 * B must not be sent). */
int sl_response_end(sl_response_t *rs, sl_buf_t *b, const sl_req_t *req,
                    long long known, bool trailers, bool close);

/* Does a response ending now leave the client short of bytes (a body
 * shorter than its Content-Length) or promised a close? Then the
 * connection must close. */
bool sl_response_ends_connection(const sl_response_t *rs);

/* Frame LEN body bytes at DATA into IOV[*N...] (up to 3 entries; SIZE_LINE
 * is the caller's scratch of at least 24 bytes). END ends the body unless
 * RS->trailers. Never more than a Content-Length promised. */
void sl_response_frame(sl_response_t *rs, struct iovec *iov, int *n,
                       char *size_line, const void *data, size_t len, bool end);

#endif
