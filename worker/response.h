/* response.h - an ASGI response on the wire: head, body framing, trailers.
 *
 * ASGI hands the server a status, a list of [name, value] byte pairs and
 * body messages; this module turns them into HTTP/1.1 bytes. The framing is
 * decided when the head is built, from what is known then: the app's
 * Content-Length, the whole body when the first body message is the last
 * one, or chunked encoding (close-delimited for HTTP/1.0) otherwise.
 */
#ifndef SL_RESPONSE_H
#define SL_RESPONSE_H

#include <Python.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "worker/buf.h"
#include "worker/conn.h"

typedef struct {
    int status;
    bool no_body;  /* HEAD, 1xx, 204, 304: no body bytes go out */
    bool chunked;  /* Transfer-Encoding: chunked */
    bool close;    /* Connection: close was sent */
    bool app_cl;   /* a Content-Length is in the head (the app's or ours) */
    bool trailers; /* a chunked body ends with trailer fields */
    uint64_t cl;   /* that Content-Length */
    uint64_t sent; /* body bytes framed so far */
} sl_response_t;

/* Validate HEADERS, a list or tuple of [bytes, bytes] pairs, as the ASGI
 * app gave them (WHAT names the message in errors). 0, or -1 with a
 * TypeError/ValueError set. GIL held. */
int sl_response_check_headers(PyObject *headers, const char *what);

/* Build the head of REQ's response into B (emptied first): STATUS,
 * HEADERS (checked), and the framing: KNOWN is the whole body length when
 * known, else -1; TRAILERS asks for a chunked body that trailers end;
 * CLOSE forces Connection: close. Fills RS. 0, or -1 with an exception. */
int sl_response_head(sl_response_t *rs, sl_buf_t *b, const sl_req_t *req,
                     int status, PyObject *headers, long long known,
                     bool trailers, bool close);

/* Frame LEN body bytes at DATA into IOV[*N...] (up to 3 entries; SIZE_LINE
 * is the caller's scratch of at least 24 bytes). END ends the body unless
 * RS->trailers. Never more than a Content-Length promised. */
void sl_response_frame(sl_response_t *rs, struct iovec *iov, int *n,
                       char *size_line, const void *data, size_t len, bool end);

/* Append the last chunk, the trailer fields of HEADERS (checked; NULL for
 * none) and the final CRLF to B. 0, or -1 with an exception. */
int sl_response_trailers(sl_buf_t *b, PyObject *headers);

#endif
